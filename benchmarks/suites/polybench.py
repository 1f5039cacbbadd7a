"""PolyBench/C 4.2: every kernel whose statement the DSL can write, at PolyBench's LARGE sizes (the ``LARGE_DATASET``
values of each kernel's header), in double precision as PolyBench computes by default; and convolution-2d/3d of
PolyBench/ACC (the GPU/accelerator port of PolyBench/C 3.2) at its LARGE sizes, in single precision as it computes.

PolyBench updates arrays in place (``C := alpha*A*B + beta*C``); the DSL's statements are out of place, so each
kernel here reads its arrays and writes new ones (``D = 1.5*A*B + 1.2*C``): the same values, the inputs untouched.
The scalars are PolyBench's initial values (alpha 1.5, beta 1.2), written as constants. The stencils (jacobi-1d/2d,
heat-3d, fdtd-2d) compute one step of PolyBench's time loop per call: both sweeps of a step for the Jacobi and heat
kernels (A -> B -> A, both arrays returned), the three field updates for fdtd-2d; the boundary keeps its values.
Kernels that update one triangle (syrk, syr2k) compute the whole product and select the triangle (the DSL has no
triangular domains), as trmm reads its triangle through a mask: twice the triangle's arithmetic, while scipy's BLAS
routines (the baseline) do the triangle alone; their FLOP counts are the triangle's.

Inputs are random (standard normal) instead of PolyBench's initialisation formulas. :data:`NOT_WRITTEN` lists the
kernels the DSL cannot write, with the reason.

Example::

    >>> [p.name for p in PROGRAMS][:4]
    ['gemm', '2mm', '3mm', 'atax']
    >>> next(p for p in PROGRAMS if p.name == "gemm").sizes
    {'NI': 1000, 'NJ': 1100, 'NK': 1200}
"""
from __future__ import annotations

import numpy as np

from .common import Baseline, Program, call

ORIGIN = "PolyBench/C 4.2.1, LARGE_DATASET"
ORIGIN_ACC = "PolyBench/ACC (PolyBench/C 3.2 port), LARGE_DATASET"
ALPHA, BETA = 1.5, 1.2

#: The kernels of PolyBench/C 4.2 that the DSL cannot write, and why.
NOT_WRITTEN = {
    "seidel-2d": "an in-place Gauss-Seidel sweep: each point reads its left and upper neighbours already updated in "
                 "the same sweep (a recurrence in two dimensions); a statement cannot read the stage it writes",
    "adi": "alternating-direction implicit: tridiagonal solves along rows then columns, each a forward and a backward "
           "recurrence (p[j] = -c / (a*p[j-1] + b)); the DSL has no scans",
    "lu": "in-place LU factorization: step k reads the rows and columns that steps before k rewrote (a triangular "
          "recurrence over k)",
    "ludcmp": "LU factorization followed by forward and back substitution: recurrences over k and over i",
    "cholesky": "in-place Cholesky factorization: each column needs the columns before it (a recurrence)",
    "trisolv": "forward substitution x[i] = (b[i] - sum_{j<i} L[i,j] x[j]) / L[i,i]: every x[i] needs the x before "
               "it (a recurrence)",
    "durbin": "the Levinson-Durbin recursion: step k's vector and scalars come from step k-1's",
    "gramschmidt": "modified Gram-Schmidt: column k is orthogonalised against the columns the earlier steps "
                   "produced, in place (sequential over k)",
    "deriche": "recursive (IIR) filters along rows and columns: y[j] depends on y[j-1] and y[j-2] (scans)",
    "floyd-warshall": "N dependent steps, each reading row and column k of the step before; one step is a statement "
                      "with k as a size, so a compiled kernel would serve one k only (the DSL has no run-time "
                      "scalar arguments)",
    "nussinov": "dynamic programming over a table that each entry reads back (max over k of table[i,k] + "
                "table[k+1,j] for entries computed earlier in the same sweep)",
}


def _f64(*arrays):
    return [np.asarray(a, np.float64) for a in arrays]


def _scipy(fn):
    """A scipy baseline: ``fn(blas, *inputs, **sizes)`` with ``scipy.linalg.blas``."""
    def setup(inputs, sizes):
        from scipy.linalg import blas
        return lambda: fn(blas, *inputs, **sizes)
    return Baseline("scipy", setup, "scipy.linalg.blas")


# ------------------------------------------------------------------------------------------------ the kernels


def _gemm_ref(A, B, C, **s):
    A, B, C = _f64(A, B, C)
    return ALPHA * (A @ B) + BETA * C


def _gemm_np(A, B, C, **s):
    D = A @ B
    D *= ALPHA
    D += BETA * C
    return D


def _two_mm_ref(A, B, C, D, **s):
    A, B, C, D = _f64(A, B, C, D)
    return (ALPHA * (A @ B)) @ C + BETA * D


def _two_mm_np(A, B, C, D, **s):
    T = A @ B
    T *= ALPHA
    E = T @ C
    E += BETA * D
    return E


def _three_mm_ref(A, B, C, D, **s):
    A, B, C, D = _f64(A, B, C, D)
    return (A @ B) @ (C @ D)


def _syrk_ref(A, C, **s):
    A, C = _f64(A, C)
    lower = np.tril(np.ones(C.shape, bool))
    return np.where(lower, BETA * C + ALPHA * (A @ A.T), C)


def _syrk_np_setup(inputs, sizes):
    A, C = inputs
    lower = np.tril(np.ones(C.shape, bool))

    def run():
        G = A @ A.T
        G *= ALPHA
        G += BETA * C
        return np.where(lower, G, C)
    return run


def _syr2k_ref(A, B, C, **s):
    A, B, C = _f64(A, B, C)
    lower = np.tril(np.ones(C.shape, bool))
    return np.where(lower, BETA * C + ALPHA * (A @ B.T + B @ A.T), C)


def _syr2k_np_setup(inputs, sizes):
    A, B, C = inputs
    lower = np.tril(np.ones(C.shape, bool))

    def run():
        G = A @ B.T
        G += G.T
        G *= ALPHA
        G += BETA * C
        return np.where(lower, G, C)
    return run


def _sym_lower(A):
    """The symmetric matrix whose lower triangle (diagonal included) is A's."""
    L = np.tril(A)
    return L + np.tril(A, -1).T


def _symm_ref(A, B, C, **s):
    A, B, C = _f64(A, B, C)
    return ALPHA * (_sym_lower(A) @ B) + BETA * C


def _symm_np_setup(inputs, sizes):
    A, B, C = inputs

    def run():
        D = _sym_lower(A) @ B
        D *= ALPHA
        D += BETA * C
        return D
    return run


def _trmm_ref(A, B, **s):
    A, B = _f64(A, B)
    L = np.tril(A, -1) + np.eye(A.shape[0])
    return ALPHA * (L.T @ B)


def _trmm_np(A, B, **s):
    L = np.tril(A, -1)
    D = L.T @ B
    D += B
    D *= ALPHA
    return D


def _gemver_ref(A, u1, v1, u2, v2, w, x, y, z, **s):
    A, u1, v1, u2, v2, w, x, y, z = _f64(A, u1, v1, u2, v2, w, x, y, z)
    Ah = A + np.outer(u1, v1) + np.outer(u2, v2)
    X = x + BETA * (Ah.T @ y) + z
    return Ah, X, w + ALPHA * (Ah @ X)


def _gemver_np(A, u1, v1, u2, v2, w, x, y, z, **s):
    Ah = A + np.outer(u1, v1)
    Ah += np.outer(u2, v2)
    X = y @ Ah
    X *= BETA
    X += x
    X += z
    W = Ah @ X
    W *= ALPHA
    W += w
    return Ah, X, W


def _gesummv_ref(A, B, x, **s):
    A, B, x = _f64(A, B, x)
    return ALPHA * (A @ x) + BETA * (B @ x)


def _doitgen_ref(A, C4, **s):
    A, C4 = _f64(A, C4)
    return A @ C4


def _doitgen_np(A, C4, **s):
    nr, nq, np_ = A.shape
    return (A.reshape(nr * nq, np_) @ C4).reshape(nr, nq, np_)


def _covariance_ref(data, **s):
    (data,) = _f64(data)
    d = data - data.sum(axis=0) / data.shape[0]
    return d.T @ d / (data.shape[0] - 1)


def _covariance_np(data, **s):
    d = data - data.mean(axis=0)
    cov = d.T @ d
    cov /= data.shape[0] - 1
    return cov


def _correlation_ref(data, **s):
    (data,) = _f64(data)
    n = data.shape[0]
    mean = data.sum(axis=0) / n
    std = np.sqrt(((data - mean) ** 2).sum(axis=0) / n)
    std = np.where(std <= 0.1, 1.0, std)
    z = (data - mean) / (np.sqrt(n) * std)
    corr = z.T @ z
    np.fill_diagonal(corr, 1.0)
    return corr


def _correlation_np(data, **s):
    n = data.shape[0]
    d = data - data.mean(axis=0)
    std = np.sqrt((d * d).sum(axis=0) / n)
    std[std <= 0.1] = 1.0
    d /= np.sqrt(n) * std
    corr = d.T @ d
    np.fill_diagonal(corr, 1.0)
    return corr


def _jacobi_1d_ref(A, B, **s):
    A, B = _f64(A, B)
    B2 = B.copy()
    B2[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
    A2 = A.copy()
    A2[1:-1] = 0.33333 * (B2[:-2] + B2[1:-1] + B2[2:])
    return A2, B2


def _jacobi_1d_np(A, B, **s):
    B2 = B.copy()
    t = B2[1:-1]
    np.add(A[:-2], A[1:-1], out=t)
    t += A[2:]
    t *= 0.33333
    A2 = A.copy()
    t = A2[1:-1]
    np.add(B2[:-2], B2[1:-1], out=t)
    t += B2[2:]
    t *= 0.33333
    return A2, B2


def _jacobi_2d_sweep(src, dst):
    t = dst[1:-1, 1:-1]
    np.add(src[1:-1, 1:-1], src[1:-1, :-2], out=t)
    t += src[1:-1, 2:]
    t += src[2:, 1:-1]
    t += src[:-2, 1:-1]
    t *= 0.2


def _jacobi_2d_ref(A, B, **s):
    A, B = _f64(A, B)
    B2 = B.copy()
    B2[1:-1, 1:-1] = 0.2 * (A[1:-1, 1:-1] + A[1:-1, :-2] + A[1:-1, 2:] + A[2:, 1:-1] + A[:-2, 1:-1])
    A2 = A.copy()
    A2[1:-1, 1:-1] = 0.2 * (B2[1:-1, 1:-1] + B2[1:-1, :-2] + B2[1:-1, 2:] + B2[2:, 1:-1] + B2[:-2, 1:-1])
    return A2, B2


def _jacobi_2d_np(A, B, **s):
    B2 = B.copy()
    _jacobi_2d_sweep(A, B2)
    A2 = A.copy()
    _jacobi_2d_sweep(B2, A2)
    return A2, B2


def _heat_sweep(a):
    c = a[1:-1, 1:-1, 1:-1]
    return (0.125 * (a[2:, 1:-1, 1:-1] - 2.0 * c + a[:-2, 1:-1, 1:-1])
            + 0.125 * (a[1:-1, 2:, 1:-1] - 2.0 * c + a[1:-1, :-2, 1:-1])
            + 0.125 * (a[1:-1, 1:-1, 2:] - 2.0 * c + a[1:-1, 1:-1, :-2]) + c)


def _heat_3d_ref(A, B, **s):
    A, B = _f64(A, B)
    B2 = B.copy()
    B2[1:-1, 1:-1, 1:-1] = _heat_sweep(A)
    A2 = A.copy()
    A2[1:-1, 1:-1, 1:-1] = _heat_sweep(B2)
    return A2, B2


def _heat_3d_np(A, B, **s):
    B2 = B.copy()
    B2[1:-1, 1:-1, 1:-1] = _heat_sweep(A)
    A2 = A.copy()
    A2[1:-1, 1:-1, 1:-1] = _heat_sweep(B2)
    return A2, B2


def _fdtd_2d_ref(ex, ey, hz, fict, **s):
    ex, ey, hz, fict = _f64(ex, ey, hz, fict)
    ey2 = ey.copy()
    ey2[0, :] = fict[0]
    ey2[1:, :] = ey[1:, :] - 0.5 * (hz[1:, :] - hz[:-1, :])
    ex2 = ex.copy()
    ex2[:, 1:] = ex[:, 1:] - 0.5 * (hz[:, 1:] - hz[:, :-1])
    hz2 = hz.copy()
    hz2[:-1, :-1] = hz[:-1, :-1] - 0.7 * (ex2[:-1, 1:] - ex2[:-1, :-1] + ey2[1:, :-1] - ey2[:-1, :-1])
    return ex2, ey2, hz2


def _fdtd_2d_np(ex, ey, hz, fict, **s):
    ey2 = np.empty_like(ey)
    ey2[0, :] = fict[0]
    t = ey2[1:, :]
    np.subtract(hz[1:, :], hz[:-1, :], out=t)
    t *= -0.5
    t += ey[1:, :]
    ex2 = np.empty_like(ex)
    ex2[:, 0] = ex[:, 0]
    t = ex2[:, 1:]
    np.subtract(hz[:, 1:], hz[:, :-1], out=t)
    t *= -0.5
    t += ex[:, 1:]
    hz2 = hz.copy()
    t = hz2[:-1, :-1]
    d = ex2[:-1, 1:] - ex2[:-1, :-1]
    d += ey2[1:, :-1]
    d -= ey2[:-1, :-1]
    d *= 0.7
    t -= d
    return ex2, ey2, hz2


_C2 = ((0.2, 0.5, -0.8), (-0.3, 0.6, -0.9), (0.4, 0.7, 0.1))  # c[di][dj] for A[i-1+di][j-1+dj]


def _conv2d_ref(A, **s):
    (A,) = _f64(A)
    n, m = A.shape
    out = np.zeros((n - 2, m - 2))
    for di in range(3):
        for dj in range(3):
            out += _C2[di][dj] * A[di:di + n - 2, dj:dj + m - 2]
    return out


def _conv2d_np(A, **s):
    n, m = A.shape
    out = np.zeros((n - 2, m - 2), np.float32)
    for di in range(3):
        for dj in range(3):
            out += np.float32(_C2[di][dj]) * A[di:di + n - 2, dj:dj + m - 2]
    return out


def _conv2d_torch_setup(inputs, sizes):
    import torch
    (A,) = inputs
    w = torch.tensor(_C2, dtype=torch.float32).view(1, 1, 3, 3)
    x = A.view(1, 1, *A.shape)
    return lambda: torch.nn.functional.conv2d(x, w)[0, 0]


#: The terms of convolution-3d as PolyBench/ACC writes them: (coefficient, di, dj, dk) for A[i+di][j+dj][k+dk].
_C3 = ((2, -1, -1, -1), (4, 1, -1, -1), (5, -1, -1, -1), (7, 1, -1, -1), (-8, -1, -1, -1), (10, 1, -1, -1),
       (-3, 0, -1, 0), (6, 0, 0, 0), (-9, 0, 1, 0),
       (2, -1, -1, 1), (4, 1, -1, 1), (5, -1, 0, 1), (7, 1, 0, 1), (-8, -1, 1, 1), (10, 1, 1, 1))


def _conv3d_terms(A, dtype):
    n, m, k = A.shape
    out = np.zeros((n - 2, m - 2, k - 2), dtype)
    for c, di, dj, dk in _C3:
        out += dtype(c) * A[1 + di:n - 1 + di, 1 + dj:m - 1 + dj, 1 + dk:k - 1 + dk]
    return out


def _conv3d_ref(A, **s):
    return _conv3d_terms(np.asarray(A, np.float64), np.float64)


def _conv3d_np(A, **s):
    return _conv3d_terms(A, np.float32)


def _conv3d_source() -> str:
    def idx(d, v):
        return v if d == -1 else f"{v} + {d + 1}"
    terms = " + ".join(f"{c}.0 * A[{idx(di, 'i')}, {idx(dj, 'j')}, {idx(dk, 'k')}]".replace("+ -", "- ")
                       for c, di, dj, dk in _C3)
    return f"def convolution_3d(A: f32[NI, NJ, NK]) -> B:\n    B[i, j, k] = {terms}\n"


def _conv2d_source() -> str:
    terms = " + ".join(f"{_C2[di][dj]} * A[{'i' if di == 0 else f'i + {di}'}, {'j' if dj == 0 else f'j + {dj}'}]"
                       for di in range(3) for dj in range(3))
    return f"def convolution_2d(A: f32[NI, NJ]) -> B:\n    B[i, j] = {terms}\n"


def _program(name, source, sizes, small, reference, baselines, flops, what, notes="", origin=ORIGIN):
    return Program(name, "polybench", source, sizes, small, reference, baselines, flops=flops, what=what,
                   origin=origin, notes=notes)


PROGRAMS = [
    _program("gemm", """\
def gemm(A: f64[NI, NK], B: f64[NK, NJ], C: f64[NI, NJ]) -> D:
    P[i, j] += A[i, k] * B[k, j]
    D[i, j] = 1.5 * P[i, j] + 1.2 * C[i, j]
""", {"NI": 1000, "NJ": 1100, "NK": 1200}, {"NI": 20, "NJ": 25, "NK": 30}, _gemm_ref,
        {"numpy": call("numpy", _gemm_np),
         "scipy": _scipy(lambda b, A, B, C, **s: b.dgemm(ALPHA, B.T, A.T, beta=BETA, c=C.T).T)},
        lambda s: 2.0 * s["NI"] * s["NJ"] * s["NK"] + 3.0 * s["NI"] * s["NJ"], "D = 1.5*A*B + 1.2*C"),
    _program("2mm", """\
def two_mm(A: f64[NI, NK], B: f64[NK, NJ], C: f64[NJ, NL], D: f64[NI, NL]) -> E:
    T[i, j] += 1.5 * A[i, k] * B[k, j]
    P[i, l] += T[i, j] * C[j, l]
    E[i, l] = P[i, l] + 1.2 * D[i, l]
""", {"NI": 800, "NJ": 900, "NK": 1100, "NL": 1200}, {"NI": 16, "NJ": 18, "NK": 22, "NL": 24}, _two_mm_ref,
        {"numpy": call("numpy", _two_mm_np)},
        lambda s: 2.0 * s["NI"] * s["NJ"] * s["NK"] + 2.0 * s["NI"] * s["NL"] * s["NJ"] + 2.0 * s["NI"] * s["NL"],
        "E = 1.5*A*B*C + 1.2*D"),
    _program("3mm", """\
def three_mm(A: f64[NI, NK], B: f64[NK, NJ], C: f64[NJ, NM], D: f64[NM, NL]) -> G:
    E[i, j] += A[i, k] * B[k, j]
    F[j, l] += C[j, m] * D[m, l]
    G[i, l] += E[i, j] * F[j, l]
""", {"NI": 800, "NJ": 900, "NK": 1000, "NL": 1100, "NM": 1200}, {"NI": 16, "NJ": 18, "NK": 20, "NL": 22, "NM": 24},
        _three_mm_ref, {"numpy": call("numpy", lambda A, B, C, D, **s: (A @ B) @ (C @ D))},
        lambda s: 2.0 * (s["NI"] * s["NJ"] * s["NK"] + s["NJ"] * s["NL"] * s["NM"] + s["NI"] * s["NL"] * s["NJ"]),
        "G = (A*B)*(C*D)"),
    _program("atax", """\
def atax(A: f64[M, N], x: f64[N]) -> y:
    t[i] += A[i, j] * x[j]
    y[j] += A[i, j] * t[i]
""", {"M": 1900, "N": 2100}, {"M": 38, "N": 42}, lambda A, x, **s: _f64(A)[0].T @ (_f64(A)[0] @ _f64(x)[0]),
        {"numpy": call("numpy", lambda A, x, **s: (A @ x) @ A)}, lambda s: 4.0 * s["M"] * s["N"], "y = A^T (A x)"),
    _program("bicg", """\
def bicg(A: f64[N, M], p: f64[M], r: f64[N]) -> (s, q):
    s[j] += r[i] * A[i, j]
    q[i] += A[i, j] * p[j]
""", {"M": 1900, "N": 2100}, {"M": 38, "N": 42},
        lambda A, p, r, **s: (_f64(r)[0] @ _f64(A)[0], _f64(A)[0] @ _f64(p)[0]),
        {"numpy": call("numpy", lambda A, p, r, **s: (r @ A, A @ p))}, lambda s: 4.0 * s["M"] * s["N"],
        "s = A^T r, q = A p"),
    _program("mvt", """\
def mvt(A: f64[N, N], x1: f64[N], x2: f64[N], y1: f64[N], y2: f64[N]) -> (X1, X2):
    t1[i] += A[i, j] * y1[j]
    t2[i] += A[j, i] * y2[j]
    X1[i] = x1[i] + t1[i]
    X2[i] = x2[i] + t2[i]
""", {"N": 2000}, {"N": 40},
        lambda A, x1, x2, y1, y2, **s: (_f64(x1)[0] + _f64(A)[0] @ _f64(y1)[0],
                                        _f64(x2)[0] + _f64(y2)[0] @ _f64(A)[0]),
        {"numpy": call("numpy", lambda A, x1, x2, y1, y2, **s: (x1 + A @ y1, x2 + y2 @ A))},
        lambda s: 4.0 * s["N"] * s["N"] + 2.0 * s["N"], "x1 += A y1, x2 += A^T y2"),
    _program("gemver", """\
def gemver(A: f64[N, N], u1: f64[N], v1: f64[N], u2: f64[N], v2: f64[N], w: f64[N], x: f64[N], y: f64[N],
           z: f64[N]) -> (Ah, X, W):
    Ah[i, j] = A[i, j] + u1[i] * v1[j] + u2[i] * v2[j]
    t[i] += Ah[j, i] * y[j]
    X[i] = x[i] + 1.2 * t[i] + z[i]
    u[i] += Ah[i, j] * X[j]
    W[i] = w[i] + 1.5 * u[i]
""", {"N": 2000}, {"N": 40}, _gemver_ref, {"numpy": call("numpy", _gemver_np)},
        lambda s: 8.0 * s["N"] * s["N"] + 5.0 * s["N"], "A += u1 v1^T + u2 v2^T; x += 1.2 A^T y + z; w += 1.5 A x"),
    _program("gesummv", """\
def gesummv(A: f64[N, N], B: f64[N, N], x: f64[N]) -> y:
    t[i] += A[i, j] * x[j]
    u[i] += B[i, j] * x[j]
    y[i] = 1.5 * t[i] + 1.2 * u[i]
""", {"N": 1300}, {"N": 30}, _gesummv_ref,
        {"numpy": call("numpy", lambda A, B, x, **s: ALPHA * (A @ x) + BETA * (B @ x))},
        lambda s: 4.0 * s["N"] * s["N"] + 3.0 * s["N"], "y = 1.5 A x + 1.2 B x"),
    _program("syrk", """\
def syrk(A: f64[N, M], C: f64[N, N]) -> D:
    G[i, j] += A[i, k] * A[j, k]
    D[i, j] = select(j <= i, 1.2 * C[i, j] + 1.5 * G[i, j], C[i, j])
""", {"M": 1000, "N": 1200}, {"M": 20, "N": 30}, _syrk_ref,
        {"numpy": Baseline("numpy", _syrk_np_setup),
         "scipy": _scipy(lambda b, A, C, **s: b.dsyrk(ALPHA, A.T, beta=BETA, c=C.T, trans=1, lower=0).T)},
        lambda s: s["N"] * (s["N"] + 1) / 2 * (2.0 * s["M"] + 2), "C = 1.2 C + 1.5 A A^T on the lower triangle",
        "the whole product, its lower triangle selected: twice the triangle's arithmetic"),
    _program("syr2k", """\
def syr2k(A: f64[N, M], B: f64[N, M], C: f64[N, N]) -> D:
    G[i, j] += A[j, k] * B[i, k] + B[j, k] * A[i, k]
    D[i, j] = select(j <= i, 1.2 * C[i, j] + 1.5 * G[i, j], C[i, j])
""", {"M": 1000, "N": 1200}, {"M": 20, "N": 30}, _syr2k_ref,
        {"numpy": Baseline("numpy", _syr2k_np_setup),
         "scipy": _scipy(lambda b, A, B, C, **s: b.dsyr2k(ALPHA, A.T, B.T, beta=BETA, c=C.T, trans=1, lower=0).T)},
        lambda s: s["N"] * (s["N"] + 1) / 2 * (4.0 * s["M"] + 2),
        "C = 1.2 C + 1.5 (A B^T + B A^T) on the lower triangle",
        "the whole product, its lower triangle selected: twice the triangle's arithmetic"),
    _program("symm", """\
def symm(A: f64[M, M], B: f64[M, N], C: f64[M, N]) -> D:
    S[i, k] = select(k <= i, A[i, k], A[k, i])
    P[i, j] += S[i, k] * B[k, j]
    D[i, j] = 1.5 * P[i, j] + 1.2 * C[i, j]
""", {"M": 1000, "N": 1200}, {"M": 20, "N": 30}, _symm_ref,
        {"numpy": Baseline("numpy", _symm_np_setup),
         "scipy": _scipy(lambda b, A, B, C, **s: b.dsymm(ALPHA, A.T, B.T, beta=BETA, c=C.T, side=1, lower=0).T)},
        lambda s: 2.0 * s["M"] * s["M"] * s["N"] + 3.0 * s["M"] * s["N"],
        "D = 1.5 A B + 1.2 C, A symmetric from its lower triangle"),
    _program("trmm", """\
def trmm(A: f64[M, M], B: f64[M, N]) -> D:
    P[i, j] += select(k > i, A[k, i], 0.0) * B[k, j]
    D[i, j] = 1.5 * (B[i, j] + P[i, j])
""", {"M": 1000, "N": 1200}, {"M": 20, "N": 30}, _trmm_ref,
        {"numpy": call("numpy", _trmm_np),
         "scipy": _scipy(lambda b, A, B, **s: b.dtrmm(ALPHA, A.T, B.T, side=1, lower=0, trans_a=1, diag=1).T)},
        lambda s: s["M"] * (s["M"] - 1) * s["N"] + 2.0 * s["M"] * s["N"],
        "D = 1.5 L^T B, L unit lower triangular from A",
        "the strictly lower triangle read through a mask over the whole product: twice the triangle's arithmetic"),
    _program("doitgen", """\
def doitgen(A: f64[NR, NQ, NP], C4: f64[NP, NP]) -> S:
    S[r, q, p] += A[r, q, s] * C4[s, p]
""", {"NR": 150, "NQ": 140, "NP": 160}, {"NR": 5, "NQ": 8, "NP": 10}, _doitgen_ref,
        {"numpy": call("numpy", _doitgen_np)}, lambda s: 2.0 * s["NR"] * s["NQ"] * s["NP"] * s["NP"],
        "A[r, q, :] = A[r, q, :] C4"),
    _program("covariance", """\
def covariance(data: f64[N, M]) -> cov:
    total[j] += data[i, j]
    d[i, j] = data[i, j] - total[j] / N
    cov[a, b] += d[k, a] * d[k, b] / (N - 1)
""", {"M": 1200, "N": 1400}, {"M": 28, "N": 32}, _covariance_ref, {"numpy": call("numpy", _covariance_np)},
        lambda s: 2.0 * s["M"] * s["M"] * s["N"] + 2.0 * s["N"] * s["M"],
        "the covariance of the columns (the whole symmetric matrix)",
        "PolyBench computes the upper triangle and mirrors it; here the whole matrix, as numpy does"),
    _program("correlation", """\
def correlation(data: f64[N, M]) -> corr:
    total[j] += data[i, j]
    d[i, j] = data[i, j] - total[j] / N
    ss[j] += d[i, j] * d[i, j]
    sd[j] = select(sqrt(ss[j] / N) <= 0.1, 1.0, sqrt(ss[j] / N))
    z[i, j] = d[i, j] / (sqrt(f64(N)) * sd[j])
    c[a, b] += z[k, a] * z[k, b]
    corr[a, b] = select(a == b, 1.0, c[a, b])
""", {"M": 1200, "N": 1400}, {"M": 28, "N": 32}, _correlation_ref, {"numpy": call("numpy", _correlation_np)},
        lambda s: 2.0 * s["M"] * s["M"] * s["N"] + 6.0 * s["N"] * s["M"],
        "the correlation matrix of the columns (the whole symmetric matrix)",
        "PolyBench computes the upper triangle and mirrors it; here the whole matrix, as numpy does"),
    _program("jacobi-1d", """\
def jacobi_1d(A: f64[N], B: f64[N]) -> (A2, B2):
    B2[i] = select(1 <= i < N - 1, 0.33333 * (A[i - 1] + A[i] + A[i + 1]), B[i]) where i in 0:N
    A2[i] = select(1 <= i < N - 1, 0.33333 * (B2[i - 1] + B2[i] + B2[i + 1]), A[i]) where i in 0:N
""", {"N": 2000}, {"N": 30}, _jacobi_1d_ref, {"numpy": call("numpy", _jacobi_1d_np)},
        lambda s: 6.0 * (s["N"] - 2), "one time step: B from A, then A from B (3-point)"),
    _program("jacobi-2d", """\
def jacobi_2d(A: f64[N, N], B: f64[N, N]) -> (A2, B2):
    B2[i, j] = select(1 <= i < N - 1 and 1 <= j < N - 1,
                      0.2 * (A[i, j] + A[i, j - 1] + A[i, j + 1] + A[i + 1, j] + A[i - 1, j]),
                      B[i, j]) where i in 0:N, j in 0:N
    A2[i, j] = select(1 <= i < N - 1 and 1 <= j < N - 1,
                      0.2 * (B2[i, j] + B2[i, j - 1] + B2[i, j + 1] + B2[i + 1, j] + B2[i - 1, j]),
                      A[i, j]) where i in 0:N, j in 0:N
""", {"N": 1300}, {"N": 30}, _jacobi_2d_ref, {"numpy": call("numpy", _jacobi_2d_np)},
        lambda s: 10.0 * (s["N"] - 2) ** 2, "one time step: B from A, then A from B (5-point)"),
    _program("heat-3d", """\
def heat_3d(A: f64[N, N, N], B: f64[N, N, N]) -> (A2, B2):
    B2[i, j, k] = select(1 <= i < N - 1 and 1 <= j < N - 1 and 1 <= k < N - 1,
                         0.125 * (A[i + 1, j, k] - 2.0 * A[i, j, k] + A[i - 1, j, k])
                         + 0.125 * (A[i, j + 1, k] - 2.0 * A[i, j, k] + A[i, j - 1, k])
                         + 0.125 * (A[i, j, k + 1] - 2.0 * A[i, j, k] + A[i, j, k - 1]) + A[i, j, k],
                         B[i, j, k]) where i in 0:N, j in 0:N, k in 0:N
    A2[i, j, k] = select(1 <= i < N - 1 and 1 <= j < N - 1 and 1 <= k < N - 1,
                         0.125 * (B2[i + 1, j, k] - 2.0 * B2[i, j, k] + B2[i - 1, j, k])
                         + 0.125 * (B2[i, j + 1, k] - 2.0 * B2[i, j, k] + B2[i, j - 1, k])
                         + 0.125 * (B2[i, j, k + 1] - 2.0 * B2[i, j, k] + B2[i, j, k - 1]) + B2[i, j, k],
                         A[i, j, k]) where i in 0:N, j in 0:N, k in 0:N
""", {"N": 120}, {"N": 10}, _heat_3d_ref, {"numpy": call("numpy", _heat_3d_np)},
        lambda s: 2 * 15.0 * (s["N"] - 2) ** 3, "one time step: B from A, then A from B (7-point)"),
    _program("fdtd-2d", """\
def fdtd_2d(ex: f64[NX, NY], ey: f64[NX, NY], hz: f64[NX, NY], fict: f64[1]) -> (ex2, ey2, hz2):
    ey2[i, j] = select(i == 0, fict[0], ey[i, j] - 0.5 * (hz[i, j] - hz[i - 1, j])) where i in 0:NX, j in 0:NY
    ex2[i, j] = select(j == 0, ex[i, j], ex[i, j] - 0.5 * (hz[i, j] - hz[i, j - 1])) where i in 0:NX, j in 0:NY
    hz2[i, j] = select(i < NX - 1 and j < NY - 1,
                       hz[i, j] - 0.7 * (ex2[i, j + 1] - ex2[i, j] + ey2[i + 1, j] - ey2[i, j]),
                       hz[i, j]) where i in 0:NX, j in 0:NY
""", {"NX": 1000, "NY": 1200}, {"NX": 20, "NY": 24}, _fdtd_2d_ref, {"numpy": call("numpy", _fdtd_2d_np)},
        lambda s: 11.0 * s["NX"] * s["NY"], "one time step: ey, ex, then hz",
        "the time step's source value fict[t] is an input array of one element"),
    _program("convolution-2d", _conv2d_source(), {"NI": 4096, "NJ": 4096}, {"NI": 20, "NJ": 24}, _conv2d_ref,
             {"numpy": call("numpy", _conv2d_np), "torch": Baseline("torch", _conv2d_torch_setup, "F.conv2d")},
             lambda s: 17.0 * (s["NI"] - 2) * (s["NJ"] - 2), "3x3 stencil with fixed coefficients (interior)",
             "the interior only (PolyBench leaves B's boundary unwritten)", origin=ORIGIN_ACC),
    _program("convolution-3d", _conv3d_source(), {"NI": 256, "NJ": 256, "NK": 256}, {"NI": 10, "NJ": 12, "NK": 14},
             _conv3d_ref, {"numpy": call("numpy", _conv3d_np)},
             lambda s: 29.0 * (s["NI"] - 2) * (s["NJ"] - 2) * (s["NK"] - 2),
             "15-term 3-D stencil with fixed coefficients (interior), the terms as PolyBench/ACC writes them",
             "the interior only (PolyBench leaves B's boundary unwritten)", origin=ORIGIN_ACC),
]
