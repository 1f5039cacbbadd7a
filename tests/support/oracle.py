"""Floating-point comparison against a (float64-computed) reference, with tolerances that fit the dtype and
the length of the reductions that produced each output element.

Example::

    >>> import numpy as np
    >>> from oracle import assert_close
    >>> x = np.float32([1.0, 2.0])
    >>> assert_close(x + np.float32(1e-7), x, reduction_len=1)
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["EXACT", "assert_close", "reduction_len", "tolerance"]


def tolerance(dtype, reduction_len: int = 1) -> float:
    """Relative error budget for results of ``dtype`` made by summing ``reduction_len`` terms.

    Rounding errors of a length-n float sum grow like ``eps*sqrt(n)`` relative to the magnitude of the
    result (measured: about ``1.4*eps*sqrt(n)`` max over 65k sequential f32 dot products), so the budget is
    ``8*eps*sqrt(n)`` plus ``64*eps`` for a few-ulp differences in exp/tanh/sqrt/division.

    Example::

        >>> import numpy as np
        >>> round(tolerance(np.float32, 1024) / np.finfo(np.float32).eps)
        320
    """
    eps = float(np.finfo(dtype).eps)
    return 8.0 * eps * math.sqrt(max(int(reduction_len), 1)) + 64.0 * eps


def assert_close(actual, expected, reduction_len: int = 1, *, exact: bool = False, err_msg: str = "") -> None:
    """Assert ``actual`` matches ``expected`` in shape, dtype and value.

    Values are compared with ``np.testing.assert_allclose(rtol=tol, atol=tol*rms(expected))`` where
    ``tol = tolerance(dtype, reduction_len)``; the absolute part, scaled by the root-mean-square of the
    expected values, absorbs cancellation in elements near zero. ``exact=True`` (max, transpose, ints)
    requires bit-equal values.

    Example::

        >>> import numpy as np
        >>> a = np.ones((2, 2), np.float32)
        >>> assert_close(a * 3, np.full((2, 2), 3, np.float32), reduction_len=3)
        >>> assert_close(a, a, exact=True)
    """
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    prefix = f"{err_msg}: " if err_msg else ""
    assert actual.shape == expected.shape, f"{prefix}shape {actual.shape} != expected {expected.shape}"
    assert actual.dtype == expected.dtype, f"{prefix}dtype {actual.dtype} != expected {expected.dtype}"
    if exact or not np.issubdtype(expected.dtype, np.floating):
        np.testing.assert_array_equal(actual, expected, err_msg=err_msg)
        return
    tol = tolerance(expected.dtype, reduction_len)
    e64 = expected.astype(np.float64)
    finite = e64[np.isfinite(e64)]
    rms = float(np.sqrt(np.mean(finite * finite))) if finite.size else 0.0
    scale = rms if rms > 0.0 else 1.0
    np.testing.assert_allclose(
        actual.astype(np.float64),
        e64,
        rtol=tol,
        atol=tol * scale,
        err_msg=f"{err_msg} (reduction_len={reduction_len}, rtol={tol:.3g}, atol={tol * scale:.3g})",
    )


def reduction_len(name: str, s: dict) -> int:
    """Number of terms summed into one output element of workload ``name`` at sizes ``s``.

    Example::

        >>> from tensorlang import schedules
        >>> reduction_len("conv2d", schedules.get("conv2d").sizes())
        576
    """
    return {
        "matmul": lambda: s["K"],
        "batch_matmul": lambda: s["K"],
        "conv1d": lambda: s["C"] * s["S"],
        "conv2d": lambda: s["C"] * s["R"] * s["S"],
        "depthwise_conv2d": lambda: s["R"] * s["S"],
        "maxpool2d": lambda: 1,
        "avgpool2d": lambda: s["KH"] * s["KW"],
        "softmax": lambda: s["D"],
        "layernorm": lambda: s["D"],
        "dense_bias_relu": lambda: s["K"],
        "transpose": lambda: 1,
        "reduce_sum": lambda: s["N"],
        "elementwise": lambda: 1,
    }[name]()


#: the workloads whose results are copies of input values: they must be bit-exact
EXACT = {"maxpool2d", "transpose"}
