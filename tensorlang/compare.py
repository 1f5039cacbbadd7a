"""Whether a kernel's outputs match a reference: tolerances that fit the dtype and the reduction length, relative
to each element's magnitude, and NaN or infinity where the reference has a number always a mismatch.

An element matches when ``|out - ref| <= tol * (|ref| + rms(ref))``: relative to its own magnitude, with the
root-mean-square of the output's finite reference values absorbing cancellation in elements near zero (where
a relative error means nothing). ``tol`` is :func:`tolerance`. Integers and booleans must be equal.

Example::

    >>> import numpy as np
    >>> ref = np.full(100, 0.01, np.float32)          # a softmax row: every value below 1
    >>> compare(ref * np.float32(1 + 1e-6), ref, "f32").ok
    True
    >>> out = ref.copy(); out[-1] = 0                 # one entry zeroed: off by 0.01
    >>> r = compare(out, ref, "f32")
    >>> r.ok, r.why
    (False, 'output 0: 1 of 100 elements differ, the largest by 0.01 at index (99,) (0 instead of 0.01)')
    >>> compare(np.array([1.0, np.nan]), np.array([1.0, 2.0]), "f64").why
    'output 0: 1 NaN where the reference has a number (first at index (1,))'
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


def tolerance(dtype, reduction_len: int = 1) -> float:
    """The relative error a result of ``dtype`` made by summing ``reduction_len`` terms may have: ``8 eps
    sqrt(n) + 64 eps`` (rounding errors of a length-n float sum grow like ``eps sqrt(n)``; the constant covers
    a few ulps of exp, tanh, sqrt and division, and reassociated sums). 0 for integer and boolean dtypes.

    Example::

        >>> round(tolerance("f32", 1024) / np.finfo(np.float32).eps)
        320
        >>> tolerance("i32")
        0.0
    """
    dt = _numpy_dtype(dtype)
    if not np.issubdtype(dt, np.floating):
        return 0.0
    eps = float(np.finfo(dt).eps)
    return 8.0 * eps * math.sqrt(max(int(reduction_len), 1)) + 64.0 * eps


@dataclass(frozen=True)
class Comparison:
    """The outcome of :func:`compare`: ``ok``; ``error``, the largest relative error over the outputs (``inf``
    for a NaN, an infinity or a shape the reference does not have); ``tolerance``, the error allowed for the
    output where the error is largest against its tolerance; ``why``, what differs and where ("" when ok).

    Example::

        >>> Comparison(True, 1e-7, 1e-5, "").describe()
        'matches the numpy reference (max relative error 1.00e-07, tolerance 1.00e-05)'
    """

    ok: bool
    error: float
    tolerance: float
    why: str = ""

    def describe(self, reference: str = "the numpy reference") -> str:
        """One line: whether it matches ``reference``, with the error and the tolerance."""
        verdict = "matches" if self.ok else "does not match"
        text = f"{verdict} {reference} (max relative error {self.error:.2e}, tolerance {self.tolerance:.2e})"
        return text if self.ok else f"{text}: {self.why}"


def compare(out, expected, dtypes, reduction_lengths=1) -> Comparison:
    """Compare ``out`` with ``expected`` (arrays, or tuples of arrays for several outputs) at the tolerance of
    ``dtypes`` (the kernel's output dtypes: one for all, or one per output) and ``reduction_lengths`` (one, or
    one per output; see :func:`tolerance`). A NaN never passes as a match.

    Example::

        >>> compare((np.ones(2), np.zeros(3)), (np.ones(2), np.zeros(3)), ("f64", "f64"), (4, 1)).ok
        True
        >>> compare(np.ones(2), np.ones(3), "f32").why
        'output 0: shape (2,) where the reference has (3,)'
    """
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    exps = tuple(expected) if isinstance(expected, (tuple, list)) else (expected,)
    if len(outs) != len(exps):
        return Comparison(False, math.inf, 0.0, f"{len(outs)} outputs where the reference has {len(exps)}")
    dts = tuple(dtypes) if isinstance(dtypes, (tuple, list)) else (dtypes,) * len(outs)
    lens = tuple(reduction_lengths) if isinstance(reduction_lengths, (tuple, list)) else \
        (reduction_lengths,) * len(outs)
    worst = Comparison(True, 0.0, tolerance(dts[0], lens[0]) if dts else 0.0)
    worst_ratio = -1.0
    for i, (o, e, dt, n) in enumerate(zip(outs, exps, dts, lens)):
        tol = tolerance(dt, n)
        err, why = _output_error(np.asarray(o), np.asarray(e), tol)
        if why:
            return Comparison(False, err, tol, f"output {i}: {why}")
        ratio = err / tol if tol else (math.inf if err else 0.0)
        if ratio > worst_ratio:
            worst, worst_ratio = Comparison(True, err, tol), ratio
    return worst


def max_rel_error(out, expected) -> float:
    """The largest absolute difference between `out` and `expected` (arrays, or tuples of arrays for several
    outputs) relative to the largest finite magnitude of `expected` (at least 1): the models' metric (a model
    matches within ``1e-4`` of it). A NaN or an infinity where `expected` has none in that place, or a number
    where it has NaN, is an infinite error: a NaN never passes (see :func:`reference_mismatch` for what differs).

    >>> max_rel_error(np.array([1.0, 2.5]), np.array([1.0, 2.0]))
    0.25
    >>> max_rel_error((np.ones(2), np.zeros(3)), (np.ones(2), np.full(3, 10.0)))
    1.0
    >>> max_rel_error(np.array([1.0, np.nan]), np.array([1.0, 2.0]))
    inf
    >>> max_rel_error(np.array([np.nan, -np.inf, 3.0]), np.array([np.nan, -np.inf, 3.0]))
    0.0
    """
    return _scaled(out, expected)[0]


def reference_mismatch(out, expected) -> str:
    """What makes :func:`max_rel_error` infinite: a different count or shape of outputs, or NaNs and infinities
    that `expected` does not have in those places (the first output that has them); "" when there is none.

    >>> reference_mismatch(np.array([np.nan, 2.0, np.inf]), np.array([1.0, 2.0, 3.0]))
    'output 0: 1 NaN and 1 infinity where the reference has a number (first at index (0,))'
    >>> reference_mismatch(np.array([1.0, 2.0]), np.array([np.nan, 2.0]))
    'output 0: 1 number where the reference has NaN or infinity (first at index (0,))'
    >>> reference_mismatch(np.ones(2), np.ones(2))
    ''
    """
    return _scaled(out, expected)[1]


def _scaled(out, expected) -> tuple[float, str]:
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    exps = tuple(expected) if isinstance(expected, (tuple, list)) else (expected,)
    if len(outs) != len(exps):
        return math.inf, f"{len(outs)} outputs where the reference has {len(exps)}"
    worst = 0.0
    for i, (o, e) in enumerate(zip(outs, exps)):
        o64, e64 = np.asarray(o, np.float64), np.asarray(e, np.float64)
        if o64.shape != e64.shape:
            return math.inf, f"output {i}: shape {o64.shape} where the reference has {e64.shape}"
        finite, why = _special_values(o64, e64)
        if why:
            return math.inf, f"output {i}: {why}"
        if finite.any():
            scale = max(1.0, float(np.max(np.abs(e64[finite]))))
            worst = max(worst, float(np.max(np.abs(o64[finite] - e64[finite]))) / scale)
    return worst, ""


def _special_values(o64: np.ndarray, e64: np.ndarray) -> tuple[np.ndarray, str]:
    """(the places where both are numbers, what is wrong with the NaNs and infinities or "")."""
    # the same special value in the same place: NaN where the reference has NaN, an infinity where it has that one
    same = (np.isnan(o64) & np.isnan(e64)) | (np.isinf(e64) & (o64 == e64))
    wrong = ~same & ~np.isfinite(o64)
    if wrong.any():
        nan, inf = int((wrong & np.isnan(o64)).sum()), int((wrong & np.isinf(o64)).sum())
        what = " and ".join(t for t in (f"{nan} NaN" if nan else "",
                                        f"{inf} infinit{'y' if inf == 1 else 'ies'}" if inf else "") if t)
        return same, f"{what} where the reference has a number (first at index {_first(wrong)})"
    missing = ~same & ~np.isfinite(e64)
    if missing.any():
        n = int(missing.sum())
        return same, (f"{n} number{'s' if n > 1 else ''} where the reference has NaN or infinity (first at "
                      f"index {_first(missing)})")
    return ~same, ""


def _output_error(o: np.ndarray, e: np.ndarray, tol: float) -> tuple[float, str]:
    """(the largest relative error, what is wrong or "")."""
    if o.shape != e.shape:
        return math.inf, f"shape {o.shape} where the reference has {e.shape}"
    if o.size == 0:
        return 0.0, ""
    exact = not (np.issubdtype(o.dtype, np.floating) or np.issubdtype(e.dtype, np.floating))
    o64, e64 = o.astype(np.float64), e.astype(np.float64)
    finite, why = _special_values(o64, e64)
    if why:
        return math.inf, why
    if not finite.any():
        return 0.0, ""
    diff = np.where(finite, np.abs(o64 - e64), 0.0)
    if exact:
        bad = diff > 0
        err = float(diff.max())
    else:
        ref = e64[finite]
        rms = float(np.sqrt(np.mean(ref * ref)))
        rel = diff / (np.abs(e64) + (rms if rms > 0 else 1.0))
        err = float(rel.max())
        bad = rel > tol
    if not bad.any():
        return err, ""
    at = np.unravel_index(int(np.argmax(np.where(bad, diff, -1.0))), o.shape)
    return err, (f"{int(bad.sum())} of {o.size} elements differ, the largest by {diff[at]:.3g} at index "
                 f"{tuple(int(x) for x in at)} ({o64[at]:.6g} instead of {e64[at]:.6g})")


def _first(mask: np.ndarray) -> tuple:
    return tuple(int(x) for x in np.unravel_index(int(np.argmax(mask)), mask.shape))


def _numpy_dtype(dtype) -> np.dtype:
    if isinstance(dtype, str):
        from .dtypes import DTYPES
        if dtype in DTYPES:
            return DTYPES[dtype].numpy
    return np.dtype(dtype)
