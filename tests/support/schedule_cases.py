"""Small programs for the schedule tests (tests/schedule/test_schedule_*.py): DSL text, a numpy oracle written without
the DSL, inputs, the reduction length that sets the float tolerance, and helpers that read the loop IR text.

Every program's `def` name is unique, so a schedule finds its program by ``PROGRAMS[s.op.name]``.

Example::

    >>> p = PROGRAMS["mm"]
    >>> p.red_len({"M": 2, "N": 3, "K": 5})
    5
    >>> text = "def f():\\n  for a in 0:2:\\n    for b in 0:3:  # vectorized\\n      x = 1\\n  for c in 0:1:\\n"
    >>> encloses(text, "a", "b"), encloses(text, "a", "c"), loop_header(text, "b")
    (True, False, 'for b in 0:3:  # vectorized')
    >>> loop_order(text)
    ['a', 'b', 'c']
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import tensorlang as tl

__all__ = ["PROGRAMS", "Program", "encloses", "loop_header", "loop_lines", "loop_order", "make_inputs"]


@dataclass
class Program:
    """A DSL program and its oracle: ``reference(*inputs, **sizes)`` computes in float64 (or int64) and returns
    the output in the program's output dtype."""

    source: str
    reference: Callable
    red_len: Callable[[dict], int] = lambda sizes: 1
    exact: bool = False          # the outputs are copies or integer arithmetic: bit-equal
    op: tl.Op = field(init=False)

    def __post_init__(self):
        self.op = tl.op(self.source)


def _f32(x):
    return np.asarray(x).astype(np.float32)


def _conv2d(I, Wt, *, stride, pad, dil, **_):
    N, _C, H, W = I.shape
    F, _, R, S = Wt.shape
    P = np.pad(I.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    OH = (H + 2 * pad - dil * (R - 1) - 1) // stride + 1
    OW = (W + 2 * pad - dil * (S - 1) - 1) // stride + 1
    out = np.zeros((N, F, OH, OW))
    for r in range(R):
        for s in range(S):
            win = P[:, :, r * dil: r * dil + stride * (OH - 1) + 1: stride, s * dil: s * dil + stride * (OW - 1) + 1:
                    stride]
            out += np.einsum("nchw,fc->nfhw", win, Wt[:, :, r, s].astype(np.float64))
    return _f32(out)


def _softmax(X, **_):
    x = X.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return _f32(e / e.sum(axis=1, keepdims=True))


def _chain(A, B, **_):
    a, b = A.astype(np.float64), B.astype(np.float64)
    t1 = a * 2.0 + b
    t2 = t1 * t1 - a
    return _f32(t2 + t1 * 0.5)


def _stencil3(A, **_):
    a = A.astype(np.float64)
    b = a[:-1] * 2.0 + a[1:]
    c = b[:-2] - b[2:]
    return _f32(c[:-1] * c[1:])


def _stencil_red(A, **_):
    t = A.astype(np.float64).sum(axis=1)
    return _f32(t[:-1] + t[1:])


def _pad1d(A, **_):
    p = np.pad(A.astype(np.float64), 1)
    return (p[:-2] + p[2:]).astype(A.dtype)


def _blur_i32(A, **_):
    p = np.pad(A.astype(np.int64), 1)
    return (p[:-2] + 2 * p[1:-1] + p[2:]).astype(np.int32)


def _edge3(a, axis):
    """a[i - 1] + a[i] + a[i + 1] along `axis`, repeating the edge (Halide's repeat_edge) as np.pad does."""
    p = np.pad(a, [(1, 1) if d == axis else (0, 0) for d in range(a.ndim)], mode="edge")
    n = a.shape[axis]
    return sum(np.take(p, range(k, k + n), axis=axis) for k in range(3))


def _blur_edge(I, **_):
    return _f32(_edge3(_edge3(I.astype(np.float64), 1), 0))


def _mirror_i32(A, **_):
    p = np.pad(A.astype(np.int64), 1, mode="reflect")
    return (p[:-2] + 2 * p[1:-1] + p[2:]).astype(np.int32)


def _box_sym(A, **_):
    p = np.pad(A.astype(np.float64), ((0, 0), (1, 1)), mode="symmetric")
    return _f32(p[:, :-2] + p[:, 1:-1] + p[:, 2:])


def _upsample2(I, **_):
    H, W = I.shape
    y, x = np.arange(2 * H)[:, None], np.arange(2 * W)[None, :]
    return _f32(I.astype(np.float64)[y // 2, x // 2] + I.astype(np.float64)[np.minimum((y + 1) // 2, H - 1), x // 2])


def _tile_mod(A, N, **_):
    i = np.arange(N)[:, None]
    return (A.astype(np.int64)[i % 4, np.arange(A.shape[1])] * 2 + A[(i + 1) % 4, np.arange(A.shape[1])]) \
        .astype(np.int32)


# Programs whose reads carry boundary conditions (clamp, min, max, abs, and // and % by integers in an index): see
# test_boundary.py.
BOUNDARY_PROGRAMS = ("blur_edge", "mirror_i32", "box_sym", "upsample2", "tile_mod")

def _hist(I, **_):
    return np.bincount((I % 8).ravel(), minlength=8).astype(np.int32)


def _index_add(ids, V, **_):
    out = np.zeros((5, V.shape[1]))
    np.add.at(out, ids % 5, V.astype(np.float64) * 2)
    return _f32(out)


def _binmax(I, **_):
    H = np.full(6, np.iinfo(np.int32).min, np.int64)
    np.maximum.at(H, I % 6, I.astype(np.int64) * 3)
    return (H + 1).astype(np.int32)


def _scan(x, coeff_x: float, coeff_prev: float, axis: int, first=None, dtype=np.float64):
    """A first-order recurrence along `axis` by an explicit loop in float64 (int64 for ints):
    ``y[t] = coeff_x * x[t] + coeff_prev * y[t - 1]``, with y[-1] = 0, or ``y[0] = first(x[0])`` when given."""
    x = np.moveaxis(x.astype(dtype), axis, 0)
    out = np.zeros_like(x)
    prev = np.zeros_like(x[0])
    for t in range(x.shape[0]):
        prev = first(x[0]) if (first is not None and t == 0) else coeff_x * x[t] + coeff_prev * prev
        out[t] = prev
    return np.moveaxis(out, 0, axis)


def _fib(X, **_):
    s = np.zeros(X.shape, np.int64)
    for i in range(len(X)):
        s[i] = X[i] + (s[i - 1] if i >= 1 else 0) + (s[i - 2] if i >= 2 else 0)
    return s.astype(np.int32)


def _scan_pipe(X, **_):
    t = X.astype(np.float64) * 2.0
    y = _scan(t, 1.0, 0.5, axis=1)
    return _f32(y + 1.0)


PROGRAMS: dict[str, Program] = {p.op.name: p for p in [
    Program("def scale(A: f32[N]) -> B:\n    B[i] = A[i] * 2.0 + 1.0\n",
            lambda A, **_: _f32(A.astype(np.float64) * 2.0 + 1.0)),
    Program("def scale64(A: f64[N]) -> B:\n    B[i] = A[i] * 2.0 + 1.0\n",
            lambda A, **_: A * 2.0 + 1.0),
    Program("def scalei(A: i32[N]) -> B:\n    B[i] = A[i] * 3 - 7\n",
            lambda A, **_: (A.astype(np.int64) * 3 - 7).astype(np.int32), exact=True),
    Program("def bcast(A: f32[M, N], b: f32[M], c: f32[N]) -> C:\n    C[m, n] = A[m, n] * c[n] + b[m]\n",
            lambda A, b, c, **_: _f32(A.astype(np.float64) * c[None, :] + b[:, None])),
    Program("def mm(A: f32[M, K], B: f32[K, N]) -> C:\n    C[m, n] += A[m, k] * B[k, n]\n",
            lambda A, B, **_: _f32(A.astype(np.float64) @ B.astype(np.float64)), lambda s: s["K"]),
    Program("def mm64(A: f64[M, K], B: f64[K, N]) -> C:\n    C[m, n] += A[m, k] * B[k, n]\n",
            lambda A, B, **_: A @ B, lambda s: s["K"]),
    Program("def mms(A: f32[M, K], B: f32[K, N]) -> C:\n    C[m, n] += A[m, k] * 0.125 * B[k, n]\n",
            lambda A, B, **_: _f32(A.astype(np.float64) @ B.astype(np.float64) * 0.125), lambda s: s["K"]),
    Program("def mmi(A: i32[M, K], B: i32[K, N]) -> C:\n    C[m, n] += A[m, k] * B[k, n]\n",
            lambda A, B, **_: (A.astype(np.int64) @ B.astype(np.int64)).astype(np.int32), exact=True),
    Program("def tr(A: f32[M, N]) -> B:\n    B[j, i] = A[i, j]\n", lambda A, **_: A.T.copy(), exact=True),
    Program("def tri(A: i32[M, N]) -> B:\n    B[j, i] = A[i, j] * 3 + 1\n",
            lambda A, **_: (A.T * 3 + 1).astype(np.int32), exact=True),
    Program("def rowsum(A: f32[M, K]) -> B:\n    B[m] += A[m, k]\n",
            lambda A, **_: _f32(A.astype(np.float64).sum(axis=1)), lambda s: s["K"]),
    Program("def rowmaxi(A: i32[M, K]) -> B:\n    B[m] max= A[m, k]\n", lambda A, **_: A.max(axis=1), exact=True),
    Program("def rowsum_lo(A: f32[M, K, L]) -> B:\n    B[m] += A[m, k, l] where k in 2:K, l in 1:L\n",
            lambda A, **_: _f32(A[:, 2:, 1:].astype(np.float64).sum(axis=(1, 2))),
            lambda s: (s["K"] - 2) * (s["L"] - 1)),
    Program("def conv2d(I: f32[N, C, H, W], Wt: f32[F, C, R, S], stride: int, pad: int, dil: int) -> O:\n"
            "    P[n, c, y, x] = I[n, c, y - pad, x - pad] where y in 0:H+2*pad, x in 0:W+2*pad\n"
            "    O[n, f, h, w] += P[n, c, h*stride + r*dil, w*stride + s*dil] * Wt[f, c, r, s]\n",
            _conv2d, lambda s: s["C"] * s["R"] * s["S"]),
    # scans (recurrences along one index: tests/dsl/test_scan.py)
    Program("def cumsum(X: f32[N]) -> S:\n    S[i] = S[i - 1] + X[i]\n",
            lambda X, **_: _f32(np.cumsum(X.astype(np.float64))), lambda s: s["N"]),
    Program("def cumsumi(X: i32[N]) -> S:\n    S[i] = S[i - 1] + X[i]\n",
            lambda X, **_: np.cumsum(X.astype(np.int64)).astype(np.int32), exact=True),
    Program("def fib(X: i32[N]) -> S:\n    S[i] = S[i - 1] + S[i - 2] + X[i]\n", _fib, exact=True),
    Program("def iir_col(X: f32[H, W]) -> Y:\n    Y[y, x] = 0.25 * X[y, x] + 0.75 * Y[y - 1, x]\n",
            lambda X, **_: _f32(_scan(X, 0.25, 0.75, axis=0)), lambda s: s["H"]),
    Program("def iir_first(X: f32[H, W]) -> Y:\n"
            "    Y[y, x] = select(y == 0, X[y, x], 0.5 * X[y, x] + 0.5 * Y[y - 1, x])\n",
            lambda X, **_: _f32(_scan(X, 0.5, 0.5, axis=0, first=lambda x0: x0)), lambda s: s["H"]),
    Program("def scan_row(X: f64[H, W]) -> Y:\n    Y[y, x] = X[y, x] + Y[y, x - 1]\n",
            lambda X, **_: np.cumsum(X, axis=1), lambda s: s["W"]),
    Program("def scan_pipe(X: f32[H, W]) -> Z:\n    T[y, x] = X[y, x] * 2.0\n"
            "    Y[y, x] = T[y, x] + 0.5 * Y[y, x - 1]\n    Z[y, x] = Y[y, x] + 1.0\n",
            _scan_pipe, lambda s: s["W"]),
    Program("def softmax(X: f32[N, D]) -> Y:\n"
            "    mx[n] max= X[n, d]\n"
            "    e[n, d] = exp(X[n, d] - mx[n])\n"
            "    sm[n] += e[n, d]\n"
            "    Y[n, d] = e[n, d] / sm[n]\n",
            _softmax, lambda s: s["D"]),
    Program("def chain(A: f32[N, M], B: f32[N, M]) -> E:\n"
            "    T1[i, j] = A[i, j] * 2.0 + B[i, j]\n"
            "    T2[i, j] = T1[i, j] * T1[i, j] - A[i, j]\n"
            "    E[i, j] = T2[i, j] + T1[i, j] * 0.5\n",
            _chain),
    Program("def stencil3(A: f32[N]) -> D:\n"
            "    B[i] = A[i] * 2.0 + A[i + 1]\n"
            "    C[i] = B[i] - B[i + 2]\n"
            "    D[i] = C[i] * C[i + 1]\n",
            _stencil3),
    Program("def stencil_red(A: f32[N, K]) -> O:\n"
            "    T[i] += A[i, k]\n"
            "    O[j] = T[j] + T[j + 1]\n",
            _stencil_red, lambda s: s["K"]),
    Program("def pad1d(A: f32[N]) -> B:\n    B[i] = A[i - 1] + A[i + 1] where i in 0:N\n", _pad1d),
    Program("def blur_i32(A: i32[N]) -> B:\n"
            "    P[i] = A[i - 1] where i in 0:N+2\n"
            "    B[i] = P[i] + 2 * P[i + 1] + P[i + 2]\n",
            _blur_i32, exact=True),
    Program("def blur_edge(I: f32[H, W]) -> O:\n"
            "    B[y, x] = I[y, clamp(x - 1, 0, W - 1)] + I[y, x] + I[y, clamp(x + 1, 0, W - 1)]\n"
            "    O[y, x] = B[clamp(y - 1, 0, H - 1), x] + B[y, x] + B[min(y + 1, H - 1), x]\n",
            _blur_edge, lambda s: 9),
    Program("def mirror_i32(A: i32[N]) -> B:\n"
            "    B[i] = A[N - 1 - abs(N - 1 - abs(i - 1))] + 2 * A[i] + A[N - 1 - abs(N - 1 - abs(i + 1))]\n",
            _mirror_i32, exact=True),
    Program("def box_sym(A: f32[M, N]) -> B:\n"
            "    B[m, n] += A[m, min(max(n + r - 1, -n - r), 2*N - 1 - max(n + r - 1, -n - r))] "
            "where r in 0:3, n in 0:N\n",
            _box_sym, lambda s: 3),
    Program("def upsample2(I: f32[H, W]) -> O:\n"
            "    O[y, x] = I[y // 2, x // 2] + I[min((y + 1) // 2, H - 1), x // 2] where y in 0:2*H, x in 0:2*W\n",
            _upsample2, lambda s: 2),
    Program("def tile_mod(A: i32[4, M], N: int) -> B:\n"
            "    B[i, j] = A[i % 4, j] * 2 + A[(i + 1) % 4, j] where i in 0:N\n",
            _tile_mod, exact=True),
    # scatters: updates at indices computed from data (see docs/user-guide/dsl.md, "Updates through an index")
    Program("def hist(I: i32[M, N]) -> H:\n    H[b := I[m, n] % 8] += 1 where b in 0:8\n", _hist, exact=True),
    Program("def index_add(ids: i32[T], V: f32[T, D]) -> O:\n"
            "    O[r := ids[t] % 5, d] += V[t, d] * 2.0 where r in 0:5\n",
            _index_add, lambda s: s["T"]),
    Program("def binmax(I: i32[M, N]) -> C:\n"
            "    H[b := I[m, n] % 6] max= I[m, n] * 3 where b in 0:6\n"
            "    C[c] = H[c] + 1\n",
            _binmax, exact=True),
]}


def make_inputs(s, seed: int = 0) -> list[np.ndarray]:
    """Inputs for schedule `s`'s program at its sizes: standard normal floats, small ints (no i32 overflow)."""
    rng = np.random.default_rng(seed)
    out = []
    for p in s.op.params:
        shape = s.bound.shapes[p.name]
        if p.dtype == "i32":
            out.append(rng.integers(-9, 10, size=shape).astype(np.int32))
        elif p.dtype == "f64":
            out.append(rng.standard_normal(shape))
        else:
            out.append(rng.standard_normal(shape).astype(np.float32))
    return out


# ---- reading the loop IR text ----
_FOR = re.compile(r"^(\s*)for (\S+) in ")


def loop_lines(text: str) -> list[tuple[int, int, str]]:
    """(line number, indentation, loop variable) of every `for` line, in order."""
    out = []
    for i, line in enumerate(text.splitlines()):
        m = _FOR.match(line)
        if m:
            out.append((i, len(m.group(1)), m.group(2)))
    return out


def loop_order(text: str) -> list[str]:
    """Loop variables in the order their `for` lines appear."""
    return [v for _, _, v in loop_lines(text)]


def loop_header(text: str, var: str) -> str:
    """The (stripped) `for` line of the first loop over `var`."""
    for line in text.splitlines():
        if line.strip().startswith(f"for {var} in "):
            return line.strip()
    raise AssertionError(f"no loop {var!r} in\n{text}")


def encloses(text: str, outer: str, inner: str) -> bool:
    """Whether some loop over `inner` lies inside the body of some loop over `outer`."""
    lines = text.splitlines()
    for i, ind, v in loop_lines(text):
        if v != outer:
            continue
        for j in range(i + 1, len(lines)):
            line = lines[j]
            if not line.strip():
                continue
            if len(line) - len(line.lstrip()) <= ind:
                break
            m = _FOR.match(line)
            if m and m.group(2) == inner:
                return True
    return False
