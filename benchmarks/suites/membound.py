"""Memory-bound kernels: matrix-vector products (GEMV, both orientations), row, column and whole-array reductions, a
long elementwise chain, a transpose, a layout change (NCHW to NHWC) and AXPY, in float32, each array larger than the
last-level cache; and a STREAM-like triad (``A = B + 3 C``), measured in the same run, whose best speed over its
rows (tensorlang's, numpy's, PyTorch's, and PyTorch's into a preallocated output as STREAM writes) is the bandwidth
ceiling the others are measured against (the preallocated row only for the ceiling: it is outside the timing
contract, which allocates outputs). Their work is in bytes: each input read once and each output written once.

Example::

    >>> [p.name for p in PROGRAMS]
    ['triad', 'gemv', 'gemv-t', 'row-sum', 'col-sum', 'sum-all', 'elementwise-chain', 'transpose', 'nchw-to-nhwc', \
'axpy']
"""
from __future__ import annotations

import math

import numpy as np

from .common import Baseline, Program, call

ORIGIN = "this suite (issue 57): memory-bound kernels"

#: The program whose best speed is the bandwidth ceiling.
TRIAD = "triad"

#: No memory-bound kernel of the list is missing.
NOT_WRITTEN: dict = {}


def _bytes_of(*shapes):
    """Bytes of float32 arrays of these shapes, one function of the sizes per shape."""
    return lambda s: 4.0 * sum(math.prod(f(s)) for f in shapes)


def _chain_np(A, B, C, **s):
    Y = A * B
    Y += C
    Y *= 0.5
    Y -= np.maximum(A, 0.0) * np.float32(0.25)
    Y += np.abs(B - C)
    Y *= A
    return Y


def _chain_ref(A, B, C, **s):
    A, B, C = (np.asarray(x, np.float64) for x in (A, B, C))
    return ((A * B + C) * 0.5 - np.maximum(A, 0.0) * 0.25 + np.abs(B - C)) * A


def _chain_torch(torch, A, B, C, **s):
    return ((A * B + C) * 0.5 - torch.clamp_min(A, 0.0) * 0.25 + torch.abs(B - C)) * A


def _triad_torch_out(inputs, sizes):
    import torch
    B, C = inputs
    out = torch.empty_like(B)
    return lambda: torch.add(B, C, alpha=3.0, out=out)


def _triad_np(B, C, **s):
    A = C * np.float32(3.0)
    A += B
    return A


def _f64(x):
    return np.asarray(x, np.float64)


def _program(name, source, sizes, small, reference, baselines, nbytes, what, notes=""):
    return Program(name, "membound", source, sizes, small, reference, baselines, bytes=nbytes, what=what,
                   origin=ORIGIN, notes=notes)


PROGRAMS = [
    _program(TRIAD, """\
def triad(B: f32[N], C: f32[N]) -> A:
    A[i] = B[i] + 3.0 * C[i]
""", {"N": 1 << 25}, {"N": 1000}, lambda B, C, **s: _f64(B) + 3.0 * _f64(C),
        {"numpy": call("numpy", _triad_np), "torch": call("torch", lambda torch, B, C, **s: torch.add(B, C, alpha=3.0)),
         "torch-out": Baseline("torch", _triad_torch_out, "torch.add(..., out=A): STREAM's preallocated output",
                               allocates=False)},
        _bytes_of(lambda s: (s["N"],), lambda s: (s["N"],), lambda s: (s["N"],)),
        "STREAM-like triad over 2^25 floats: the bandwidth ceiling"),
    _program("gemv", """\
def gemv(A: f32[M, N], x: f32[N]) -> y:
    y[i] += A[i, j] * x[j]
""", {"M": 4096, "N": 4096}, {"M": 40, "N": 48}, lambda A, x, **s: _f64(A) @ _f64(x),
        {"numpy": call("numpy", lambda A, x, **s: A @ x),
         "torch": call("torch", lambda torch, A, x, **s: torch.mv(A, x))},
        _bytes_of(lambda s: (s["M"], s["N"]), lambda s: (s["N"],), lambda s: (s["M"],)), "y = A x, 4096 x 4096"),
    _program("gemv-t", """\
def gemv_t(A: f32[M, N], x: f32[M]) -> y:
    y[j] += A[i, j] * x[i]
""", {"M": 4096, "N": 4096}, {"M": 40, "N": 48}, lambda A, x, **s: _f64(x) @ _f64(A),
        {"numpy": call("numpy", lambda A, x, **s: x @ A),
         "torch": call("torch", lambda torch, A, x, **s: torch.mv(A.t(), x))},
        _bytes_of(lambda s: (s["M"], s["N"]), lambda s: (s["M"],), lambda s: (s["N"],)), "y = A^T x, 4096 x 4096"),
    _program("row-sum", """\
def row_sum(X: f32[M, N]) -> R:
    R[i] += X[i, j]
""", {"M": 8192, "N": 4096}, {"M": 40, "N": 48}, lambda X, **s: _f64(X).sum(axis=1),
        {"numpy": call("numpy", lambda X, **s: X.sum(axis=1)),
         "torch": call("torch", lambda torch, X, **s: torch.sum(X, dim=1))},
        _bytes_of(lambda s: (s["M"], s["N"]), lambda s: (s["M"],)), "the sum of each row of 8192 x 4096"),
    _program("col-sum", """\
def col_sum(X: f32[M, N]) -> C:
    C[j] += X[i, j]
""", {"M": 8192, "N": 4096}, {"M": 40, "N": 48}, lambda X, **s: _f64(X).sum(axis=0),
        {"numpy": call("numpy", lambda X, **s: X.sum(axis=0)),
         "torch": call("torch", lambda torch, X, **s: torch.sum(X, dim=0))},
        _bytes_of(lambda s: (s["M"], s["N"]), lambda s: (s["N"],)), "the sum of each column of 8192 x 4096"),
    _program("sum-all", """\
def sum_all(X: f32[N]) -> S:
    S += X[i]
""", {"N": 1 << 26}, {"N": 1000}, lambda X, **s: np.asarray(_f64(X).sum()),
        {"numpy": call("numpy", lambda X, **s: X.sum()), "torch": call("torch", lambda torch, X, **s: torch.sum(X))},
        _bytes_of(lambda s: (s["N"],)), "the sum of 2^26 floats (one reduction: parallel only when split)"),
    _program("elementwise-chain", """\
def elementwise_chain(A: f32[N], B: f32[N], C: f32[N]) -> Y:
    Y[i] = ((A[i] * B[i] + C[i]) * 0.5 - max(A[i], 0.0) * 0.25 + abs(B[i] - C[i])) * A[i]
""", {"N": 1 << 24}, {"N": 1000}, _chain_ref,
        {"numpy": call("numpy", _chain_np), "torch": call("torch", _chain_torch)},
        _bytes_of(*[lambda s: (s["N"],)] * 4), "nine elementwise operations on three arrays of 2^24 floats"),
    _program("transpose", """\
def transpose(A: f32[M, N]) -> B:
    B[j, i] = A[i, j]
""", {"M": 4096, "N": 4096}, {"M": 40, "N": 48}, lambda A, **s: _f64(A).T,
        {"numpy": call("numpy", lambda A, **s: np.ascontiguousarray(A.T)),
         "torch": call("torch", lambda torch, A, **s: A.t().contiguous())},
        _bytes_of(lambda s: (s["M"], s["N"]), lambda s: (s["M"], s["N"])), "B = A^T, 4096 x 4096"),
    _program("nchw-to-nhwc", """\
def nchw_to_nhwc(I: f32[N, C, H, W]) -> O:
    O[n, h, w, c] = I[n, c, h, w]
""", {"N": 8, "C": 64, "H": 112, "W": 112}, {"N": 2, "C": 5, "H": 6, "W": 7},
        lambda I, **s: _f64(I).transpose(0, 2, 3, 1),
        {"numpy": call("numpy", lambda I, **s: np.ascontiguousarray(I.transpose(0, 2, 3, 1))),
         "torch": call("torch", lambda torch, I, **s: I.permute(0, 2, 3, 1).contiguous())},
        _bytes_of(lambda s: (s["N"], s["C"], s["H"], s["W"]), lambda s: (s["N"], s["C"], s["H"], s["W"])),
        "a layout change NCHW -> NHWC of [8, 64, 112, 112]"),
    _program("axpy", """\
def axpy(X: f32[N], Y: f32[N]) -> Z:
    Z[i] = 2.5 * X[i] + Y[i]
""", {"N": 1 << 25}, {"N": 1000}, lambda X, Y, **s: 2.5 * _f64(X) + _f64(Y),
        {"numpy": call("numpy", lambda X, Y, **s: np.float32(2.5) * X + Y),
         "torch": call("torch", lambda torch, X, Y, **s: torch.add(Y, X, alpha=2.5))},
        _bytes_of(*[lambda s: (s["N"],)] * 3), "Z = 2.5 X + Y over 2^25 floats (out of place)"),
]
