"""A three-stage chain of elementwise math (tanh, exp, abs, mul, add, compare/select) on two matrices.

Example::

    >>> import numpy as np
    >>> from schedules.elementwise import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> A, B = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(A, B, **sizes).shape
    (20, 30)
"""

from __future__ import annotations

import numpy as np

from schedules.workload import Workload

# The select condition compares the inputs only, so it is decided exactly in f32 and f64 alike and the
# reference cannot take the other branch on a rounding difference.
SOURCE = """\
def elementwise(A: f32[N, M], B: f32[N, M]) -> E:
    T1[i, j] = tanh(A[i, j]) * B[i, j] + 1.0
    T2[i, j] = exp(-abs(T1[i, j])) + 0.5 * A[i, j]
    E[i, j] = select(A[i, j] > B[i, j], T1[i, j] * T2[i, j], T2[i, j] - T1[i, j])
"""


def reference(A: np.ndarray, B: np.ndarray, **sizes: int) -> np.ndarray:
    """The same chain with NumPy ufuncs (``np.tanh``, ``np.exp``, ``np.where``) in float64, cast to f32.

    Example::

        >>> import numpy as np
        >>> z = np.zeros((1, 1), np.float32)
        >>> float(reference(z, z)[0, 0])   # T1 = 1, T2 = exp(-1); A > B is false -> T2 - T1
        -0.6321205496788025
    """
    a = A.astype(np.float64)
    b = B.astype(np.float64)
    t1 = np.tanh(a) * b + 1.0
    t2 = np.exp(-np.abs(t1)) + 0.5 * a
    return np.where(A > B, t1 * t2, t2 - t1).astype(np.float32)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard-normal ``A[N, M]`` and ``B[N, M]``.

    Example::

        >>> import numpy as np
        >>> [a.shape for a in make_inputs({"N": 2, "M": 3}, np.random.default_rng(0))]
        [(2, 3), (2, 3)]
    """
    N, M = sizes["N"], sizes["M"]
    return [rng.standard_normal((N, M), dtype=np.float32), rng.standard_normal((N, M), dtype=np.float32)]


def flops(sizes: dict) -> float:
    """``11*N*M``: tanh, mul, add; abs, neg, exp, mul, add; compare, select, mul/sub per element.

    Example::

        >>> flops({"N": 2, "M": 3})
        66.0
    """
    return 11.0 * sizes["N"] * sizes["M"]


WORKLOAD = Workload(
    name="elementwise",
    source=SOURCE,
    presets={
        "1024": {"N": 1024, "M": 1024},
        "4096x1024": {"N": 4096, "M": 1024},
        "small": {"N": 20, "M": 30},
    },
    default_preset="1024",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="Elementwise chain over A[N, M], B[N, M]: T1 = tanh(A)*B + 1, T2 = exp(-|T1|) + A/2, "
    "E = select(A > B, T1*T2, T2 - T1).",
)
