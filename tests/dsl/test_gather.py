"""Reads through an index read from another tensor (gathers), the i64 and bool dtypes, and the index error.

Every result is compared with numpy computed here (fancy indexing, np.clip, np.where, int64 arithmetic that wraps),
never with tensorlang's own path; the JIT kernel, `tl.reference`, the C backend (compiled and called through
ctypes) and an exported shared library (`tl.load`) each report an index out of range as `tl.IndexError` (or the
status 2 and `NAME_index_error` in C) naming the program, the value, the tensor, its dimension and size, and the
stage.
"""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
from c_kernels import c_kernel, needs_cc

import tensorlang as tl

EMBED = "def embed(E: f32[V, D], ids: {dt}[T]) -> Y:\n    Y[t, d] = E[ids[t], d]"


def rng(seed=0):
    return np.random.default_rng(seed)


def table(*shape, seed=0):
    return rng(seed).standard_normal(shape).astype(np.float32)


def index_error(fn, *args) -> str:
    with pytest.raises(tl.IndexError) as info:
        fn(*args)
    return str(info.value)


# ---- gathers in the DSL ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dt, np_dt", [("i64", np.int64), ("i32", np.int32)])
@pytest.mark.parametrize("schedule", ["naive", "auto"])
def test_embedding_lookup(dt, np_dt, schedule):
    op = tl.op(EMBED.format(dt=dt))
    k = tl.build(op, V=50, D=33, T=19, schedule=schedule)
    E, ids = table(50, 33), rng(1).integers(0, 50, 19).astype(np_dt)
    ids[:3] = [0, 49, 0]  # both ends, and a repeat
    np.testing.assert_array_equal(k(E, ids), E[ids])
    np.testing.assert_array_equal(tl.reference(op, V=50, D=33, T=19)(E, ids), E[ids])


def test_gather_along_several_dims():
    op = tl.op("def g(A: f32[N, M, L], r: i32[K], c: i64[K], p: i32[P]) -> (Y, Z):\n"
               "    Y[k, l] = A[r[k], c[k], l]\n"
               "    Z[k, q] = A[r[k], 2, p[q]]")
    sizes = dict(N=7, M=5, L=6, K=9, P=4)
    A = table(7, 5, 6)
    r, c = rng(2).integers(0, 7, 9).astype(np.int32), rng(3).integers(0, 5, 9)
    p = rng(4).integers(0, 6, 4).astype(np.int32)
    for schedule in ("naive", "auto"):
        Y, Z = tl.build(op, **sizes, schedule=schedule)(A, r, c, p)
        np.testing.assert_array_equal(Y, A[r, c, :])
        np.testing.assert_array_equal(Z, A[r[:, None], 2, p[None, :]])


def test_gather_in_a_reduction_and_nested_gathers():
    op = tl.op("def bag(E: f32[V, D], ids: i32[B, S], perm: i32[V]) -> (Y, W):\n"
               "    Y[b, d] += E[ids[b, s], d]\n"
               "    W[b, s] = E[perm[ids[b, s]], 0]")
    E, ids = table(30, 8), rng(5).integers(0, 30, (4, 6)).astype(np.int32)
    perm = rng(6).permutation(30).astype(np.int32)
    Y, W = tl.build(op, V=30, D=8, B=4, S=6)(E, ids, perm)
    np.testing.assert_allclose(Y, E[ids].astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(W, E[perm[ids], 0])


@pytest.mark.parametrize("expr, fn", [("ids[t] + 1", lambda ids: ids + 1), ("ids[t] * 2", lambda ids: ids * 2),
                                      ("i64(ids[t]) * 2 + t", lambda ids: ids * 2 + np.arange(len(ids))),
                                      ("V - 1 - ids[t]", lambda ids: 29 - ids)])
def test_index_computed_from_a_read(expr, fn):
    op = tl.op(f"def f(E: f32[V, D], ids: i32[T]) -> Y:\n    Y[t, d] = E[{expr}, d]")
    ids = np.array([0, 3, 9, 1, 4, 2], np.int32)
    E = table(30, 5)
    np.testing.assert_array_equal(tl.build(op, V=30, D=5, T=6)(E, ids), E[fn(ids)])


def test_a_scalar_input_as_an_index():
    op = tl.op("def row(E: f32[V, D], s: i32) -> Y:\n    Y[d] = E[s, d]")
    E, k = table(3, 4), tl.build(op, V=3, D=4)
    np.testing.assert_array_equal(k(E, np.array(2, np.int32)), E[2])
    assert "index 3 is out of range for dimension 0 of E (size 3) in stage Y's read E[s, d]" in \
        index_error(k, E, np.array(3, np.int32))


def test_lookup_table_with_clamp_needs_no_check():
    op = tl.op("def lut(T: f32[N], X: i32[M]) -> Y:\n    Y[i] = T[clamp(X[i], 0, N - 1)]")
    T, X = table(256), rng(7).integers(-300, 600, 100).astype(np.int32)
    for schedule in ("naive", "auto"):
        k = tl.build(op, N=256, M=100, schedule=schedule)
        np.testing.assert_array_equal(k(T, X), T[np.clip(X, 0, 255)])
        assert "check(" not in k.source("ir")  # the program keeps it in range: nothing to check
    clamped_too_wide = tl.op("def lut(T: f32[N], X: i32[M]) -> Y:\n    Y[i] = T[clamp(X[i], 0, 255)]")
    k = tl.build(clamped_too_wide, N=100, M=4)
    assert "check(" in k.source("ir")
    assert "index 255 is out of range for dimension 0 of T (size 100)" in \
        index_error(k, table(100), np.array([1, 2, 900, 3], np.int32))


def test_index_guarded_by_select_needs_no_check():
    op = tl.op("def g(T: f32[N], X: i64[M]) -> Y:\n"
               "    Y[i] = select(X[i] >= 0 and X[i] < N, T[select(X[i] >= 0 and X[i] < N, X[i], 0)], 0.0)")
    k = tl.build(op, N=10, M=8)
    assert "check(" not in k.source("ir")
    T, X = table(10), np.array([-5, 0, 9, 10, 3, 100, -1, 7])
    np.testing.assert_array_equal(k(T, X), np.where((X >= 0) & (X < 10), T[np.clip(X, 0, 9)], 0))


def test_clamp_of_floats_is_numpys_clip():
    op = tl.op("def c(X: f32[N]) -> Y:\n    Y[i] = clamp(X[i], -1.0, 0.5)")
    X = np.array([-3, -1, 0, 0.25, 0.5, 7, np.nan, -np.inf], np.float32)
    np.testing.assert_array_equal(tl.build(op, N=8)(X), np.clip(X, -1, 0.5))


def test_gather_from_an_intermediate_stage_and_inlined_reads():
    src = ("def f(E: f32[V, D], ids: i32[T]) -> Y:\n"
           "    F[v, d] = E[v, d] * 2.0\n"
           "    Y[t, d] = F[ids[t], d] + 1.0")
    op = tl.op(src)
    E, ids = table(12, 7), rng(8).integers(0, 12, 5).astype(np.int32)
    want = E[ids] * 2 + 1
    s = tl.schedule(op, V=12, D=7, T=5)
    s["F"].compute_inline()
    np.testing.assert_array_equal(tl.build(s)(E, ids), want)
    ids[2] = 12
    assert "index 12 is out of range for dimension 0 of F (size 12) in stage Y" in index_error(tl.build(s), E, ids)


def test_an_inlined_stage_read_outside_its_domain_reports_nothing_there():
    # G is inlined into Y, which reads G[i - 1] at i = 0 (padding: 0); there G's index would be ids[-1] - 1 = -1,
    # a value the kernel computes and drops: no error, as numpy (which never computes G[-1]) gives none
    op = tl.op("def f(T: f32[N], ids: i32[N]) -> Y:\n"
               "    G[i] = T[ids[i] - 1]\n"
               "    Y[i] = G[i - 1] where i in 0:N+1")
    T, ids = table(6), np.array([1, 2, 3, 4, 5, 6], np.int32)
    s = tl.schedule(op, N=6)
    s["G"].compute_inline()
    want = np.concatenate([[0], T[ids - 1]])
    np.testing.assert_array_equal(tl.build(s)(T, ids), want)
    np.testing.assert_array_equal(tl.reference(op, N=6)(T, ids), want)
    ids[4] = 0  # read at i = 5 inside G's domain: reported
    assert "index -1 is out of range for dimension 0 of T (size 6) in stage G's read T[ids[i] - 1]" in \
        index_error(tl.build(s), T, ids)


# ---- i64 and bool ------------------------------------------------------------------------------------------------

def test_i64_arithmetic_beyond_2_31():
    op = tl.op("def big(X: i64[N], A: i32[N]) -> (Y, S, P, Q):\n"
               "    Y[i] = X[i] * 3 + 5000000000\n"
               "    S += X[i] * i64(A[i])\n"
               "    P[i] = X[i] * X[i]\n"
               "    Q[i] = X[i] // (i64(A[i]) - 4) + X[i] % 7")
    X = np.array([2**40 + 1, -(2**35), 3, 2**33 + 7, -1, 2**62], np.int64)
    A = np.array([3, -2, 5, 7, 1, 2], np.int32)
    for schedule in ("naive", "auto"):
        Y, S, P, Q = tl.build(op, N=6, schedule=schedule)(X, A)
        np.testing.assert_array_equal(Y, X * 3 + 5000000000)
        assert S == np.sum(X * A.astype(np.int64))
        np.testing.assert_array_equal(P, X * X)  # wraps, as numpy's int64 does
        np.testing.assert_array_equal(Q, X // (A.astype(np.int64) - 4) + X % 7)
    assert all(np.array_equal(a, b) for a, b in zip(tl.reference(op, N=6)(X, A), (X * 3 + 5000000000,
                                                                                 np.sum(X * A.astype(np.int64)))))


def test_i64_values_wrap_as_numpys_in_every_loop():
    # i64 arithmetic of the program wraps (numpy's int64): no `nsw` that would let LLVM assume `x + 1 > x`
    op = tl.op("def w(X: i64[N, K]) -> (B, S):\n    B[n, k] = X[n, k] + 1 > X[n, k]\n    S[n] += X[n, k]")
    X = np.full((3, 16), 2**62, np.int64)
    X[1, 3] = X[2, 0] = 2**63 - 1
    for vectorize in (False, True):
        s = tl.schedule(op, N=3, K=16)
        if vectorize:
            s["B"].vectorize("k")
            s["S"].vectorize("k")
        B, S = tl.build(s)(X)
        np.testing.assert_array_equal(B, X + 1 > X)
        np.testing.assert_array_equal(S, X.sum(axis=1))


def test_i64_casts_and_reductions():
    op = tl.op("def c(F: f64[N], A: i32[N]) -> (I, J, M):\n"
               "    I[i] = i64(F[i]) + i64(A[i]) * 4000000000\n"
               "    J[i] = i32(I[i] // 1000)\n"
               "    M max= I[i]")
    F = np.array([1.5e15, -2.7, 0.0, 9.2e18], np.float64)
    A = np.array([1, -3, 7, 0], np.int32)
    I, J, M = tl.build(op, N=4)(F, A)
    want = F.astype(np.int64) + A.astype(np.int64) * 4000000000
    np.testing.assert_array_equal(I, want)
    np.testing.assert_array_equal(J, (want // 1000).astype(np.int32))
    assert M == want.max() and I.dtype == np.int64 and J.dtype == np.int32


def test_bool_masks():
    op = tl.op("def m(X: f32[N], M: bool[N]) -> (Y, B, C, K):\n"
               "    Y[i] = select(M[i], X[i], 0.0) + f32(M[i])\n"
               "    B[i] = X[i] > 0 and not M[i]\n"
               "    C[i] = B[i] == M[i] or bool(X[i])\n"
               "    K += i32(B[i])")
    X = np.array([1.5, -2, 0, 3, np.nan, 0, -0.0, 7, 2, -1, 5, 0, 1, 1, 1, 1, 1, -4, 0], np.float32)
    M = rng(9).integers(0, 2, X.size).astype(bool)
    for schedule in ("naive", "auto"):
        s = tl.schedule(op, N=X.size) if schedule == "naive" else None
        k = tl.build(op, N=X.size, schedule=schedule) if s is None else tl.build(s)
        Y, B, C, K = k(X, M)
        want_B = (X > 0) & ~M
        np.testing.assert_array_equal(Y, np.where(M, X, 0) + M.astype(np.float32))
        assert B.dtype == np.bool_ and C.dtype == np.bool_
        np.testing.assert_array_equal(B, want_B)
        np.testing.assert_array_equal(C, (want_B == M) | X.astype(bool))  # NaN is True, -0.0 False
        assert K == want_B.sum()


def test_bool_vectorized_loads_and_stores_are_bytes():
    # a vector of bools is one byte a lane in memory (LLVM would pack a <16 x i1> into two bytes)
    op = tl.op("def v(X: f32[N], M: bool[N]) -> B:\n    B[i] = M[i] != (X[i] < 0)")
    s = tl.schedule(op, N=37)
    _io, ii = s["B"].split("i", 16)
    s["B"].vectorize(ii)
    X, M = table(37), rng(10).integers(0, 2, 37).astype(bool)
    B = tl.build(s)(X, M)
    np.testing.assert_array_equal(B, M != (X < 0))
    assert set(np.frombuffer(B.tobytes(), np.uint8)) <= {0, 1}


# ---- the index error ---------------------------------------------------------------------------------------------

def test_the_index_error_class():
    assert issubclass(tl.IndexError, tl.TensorlangError) and issubclass(tl.IndexError, IndexError)
    assert "IndexError" not in tl.__all__  # a star import must not hide Python's IndexError


@pytest.mark.parametrize("bad", [100, -1, 2**40])
def test_out_of_range_index_raises_in_the_kernel_and_the_reference(bad):
    op = tl.op(EMBED.format(dt="i64"))
    E, ids = table(100, 16), rng(11).integers(0, 100, 23)
    ids[17] = bad
    want = (f"embed: index {bad} is out of range for dimension 0 of E (size 100) in stage Y's read E[ids[t], d] "
            "(line 2, column 15)")
    for schedule in ("naive", "auto"):
        assert index_error(tl.build(op, V=100, D=16, T=23, schedule=schedule), E, ids) == want
    assert index_error(tl.reference(op, V=100, D=16, T=23), E, ids) == want
    ids[17] = 5  # the kernel is fine afterwards
    np.testing.assert_array_equal(tl.build(op, V=100, D=16, T=23)(E, ids), E[ids])


def test_the_second_of_two_gathered_dims_is_named():
    op = tl.op("def g(A: f32[N, M], r: i32[K], c: i32[K]) -> Y:\n    Y[k] = A[r[k], c[k]]")
    msg = index_error(tl.build(op, N=3, M=4, K=2), table(3, 4), np.array([0, 2], np.int32),
                      np.array([3, 4], np.int32))
    assert msg == "g: index 4 is out of range for dimension 1 of A (size 4) in stage Y's read A[r[k], c[k]] " \
                  "(line 2, column 12)"


@pytest.mark.parametrize("vectorize", [False, True])
def test_parallel_loops_with_an_index_out_of_range(vectorize, monkeypatch):
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "2")
    op = tl.op("def f(E: f32[V, D], ids: i32[T]) -> Y:\n    Y[t, d] = E[ids[t], d] * 2.0")
    s = tl.schedule(op, V=64, D=24, T=200)
    to, ti = s["Y"].split("t", 8)
    s["Y"].parallel(to)
    if vectorize:  # lanes along t: each lane its own row (a vector gather), the check lane by lane
        s["Y"].reorder(to, "d", ti)
        s["Y"].vectorize(ti)
    k = tl.build(s)
    assert ("llvm.masked.gather" in k.source("llvm")) == vectorize  # a vector of rows: the CPU's gather
    E, ids = table(64, 24), rng(12).integers(0, 64, 200).astype(np.int32)
    np.testing.assert_array_equal(k(E, ids), E[ids] * 2)
    for bad in ([(5, 64)], [(77, -7), (150, 999)], [(t, 64 + t) for t in range(0, 200, 3)]):
        worse = ids.copy()
        for t, v in bad:
            worse[t] = v
        msg = index_error(k, E, worse)
        value = int(re.search(r"index (-?\d+) is out of range", msg).group(1))
        assert value in {v for _, v in bad}  # the first bad index a thread met
        assert "dimension 0 of E (size 64) in stage Y" in msg
    np.testing.assert_array_equal(k(E, ids), E[ids] * 2)



@needs_cc
@pytest.mark.parametrize("parallel", [False, True])
def test_the_c_backend_reports_an_index_out_of_range(parallel, tmp_path):
    op = tl.op("def embed(E: f32[V, D], ids: i32[T], pos: i64[T]) -> Y:\n"
               "    Y[t, d] = E[ids[t], d] + E[pos[t] * 2, d] + f32(pos[t] * 3000000000)")
    s = tl.schedule(op, V=40, D=8, T=30)
    if parallel:
        s["Y"].parallel("t")
    k = tl.build(s)
    fn, err = c_kernel(k, tmp_path)
    E, ids, pos = table(40, 8), rng(13).integers(0, 40, 30).astype(np.int32), rng(14).integers(0, 20, 30)
    Y = np.empty((30, 8), np.float32)

    def call():
        return fn(E.ctypes.data, ids.ctypes.data, pos.ctypes.data, Y.ctypes.data)

    assert call() == 0
    np.testing.assert_allclose(Y, E[ids] + E[pos * 2] + (pos * 3000000000).astype(np.float32)[:, None], rtol=1e-6)
    pos[11] = 20  # E[40]: the second gathered index (number 1)
    value = ctypes.c_int64()
    assert call() == 2 and err(ctypes.byref(value)) == 1 and value.value == 40
    assert str(tl.IndexError) and index_error(k, E, ids, pos).startswith("embed: index 40 is out of range for "
                                                                          "dimension 0 of E (size 40)")


@needs_cc
def test_the_c_backend_wraps_i64_values(tmp_path):
    op = tl.op("def w(X: i64[N]) -> (B, Y):\n    B[n] = X[n] + 1 > X[n]\n    Y[n] = -X[n] * 3")
    k = tl.build(op, N=4)
    fn, _ = c_kernel(k, tmp_path)
    X = np.array([2**63 - 1, -(2**63), 5, 2**62], np.int64)
    B, Y = np.empty(4, bool), np.empty(4, np.int64)
    assert fn(X.ctypes.data, B.ctypes.data, Y.ctypes.data) == 0
    np.testing.assert_array_equal(B, X + 1 > X)
    np.testing.assert_array_equal(Y, -X * 3)


@needs_cc
def test_an_exported_library_reports_an_index_out_of_range(tmp_path):
    op = tl.op(EMBED.format(dt="i32"))
    s = tl.schedule(op, V=30, D=16, T=12)
    s["Y"].parallel("t")
    s["Y"].vectorize("d")
    files = tl.build(s).export(tmp_path, "so")
    assert "int64_t embed_index_error(int64_t *value);" in open(files["header"]).read()
    k = tl.load(files["library"])
    E, ids = table(30, 16), rng(15).integers(0, 30, 12).astype(np.int32)
    np.testing.assert_array_equal(k(E, ids), E[ids])
    ids[3] = -30
    assert index_error(k, E, ids) == ("embed: index -30 is out of range for dimension 0 of E (size 30) in stage "
                                      "Y's read E[ids[t], d] (line 2, column 15)")


# ---- schedules on programs with gathers --------------------------------------------------------------------------

SCHED = ("def f(E: f32[V, D], ids: i32[T], W: f32[D, M]) -> Y:\n"
         "    F[v, d] = E[v, d] + 1.0\n"
         "    I[t] = ids[t] + 1\n"
         "    Y[t, m] += F[I[t] - 1, k] * W[k, m]")
SIZES = dict(V=11, D=20, T=13, M=16)


def _sched_inputs():
    return table(11, 20), rng(16).integers(0, 11, 13).astype(np.int32), table(20, 16, seed=3)


def _sched_want(E, ids, W):
    F = (E + 1).astype(np.float64)
    return F[ids] @ W.astype(np.float64)


def _compute_at_f(s):
    s["F"].compute_at(s["Y"], "t")


def _compute_at_i_and_cache_read(s):
    to, ti = s["Y"].split("t", 4)
    s["I"].compute_at(s["Y"], ti)
    s["Y"].cache_read("F", to, ((1, 8), (0, 0), (1, 0)))


def _split_vectorize_parallel(s):
    to, ti = s["Y"].split("t", 4)
    s["Y"].parallel(to)
    mo, mi = s["Y"].split("m", 8)
    s["Y"].reorder(to, ti, mo, "k", mi)
    s["Y"].vectorize(mi)
    s["F"].parallel("v")


def _vectorized_gather_lanes(s):
    to, ti = s["Y"].split("t", 4)
    s["Y"].reorder(to, "m", "k", ti)
    s["Y"].vectorize(ti)
    s["I"].compute_inline()


def _cache_write_and_unroll(s):
    to, ti = s["Y"].split("t", 2)
    mo, mi = s["Y"].split("m", 8)
    s["Y"].reorder(to, mo, "k", ti, mi)
    s["Y"].cache_write(mo)
    s["Y"].unroll(ti)
    s["Y"].vectorize(mi)
    s["F"].compute_inline()


@pytest.mark.parametrize("schedule", [_compute_at_f, _compute_at_i_and_cache_read, _split_vectorize_parallel,
                                      _vectorized_gather_lanes, _cache_write_and_unroll])
def test_schedules_of_a_program_with_gathers(schedule):
    s = tl.schedule(tl.op(SCHED), **SIZES)
    schedule(s)
    k = tl.build(s)
    E, ids, W = _sched_inputs()
    np.testing.assert_allclose(k(E, ids, W), _sched_want(E, ids, W), rtol=1e-5, atol=1e-4)
    assert s.lowered(strict=True) is not None  # every access proven in range without a guard
    ids[9] = 11
    assert "index 11 is out of range for dimension 0 of F (size 11) in stage Y" in index_error(k, E, ids, W)


def test_a_gathered_dimension_is_computed_whole_at_a_consumers_loop():
    s = tl.schedule(tl.op(SCHED), **SIZES)
    s["F"].compute_at(s["Y"], "t")
    ir = s.lower()
    assert re.search(r"allocate F: f32\[11, 20\]", ir) or "for F.v in 0:11" in ir, ir  # all 11 rows of F


def test_threads_cannot_share_a_gathered_producer():
    # every iteration of t needs all of F (its rows are read through ids): computed in each thread's iteration
    # into F's one buffer, threads would write the same elements
    s = tl.schedule(tl.op(SCHED), **SIZES)
    s["Y"].parallel("t")
    with pytest.raises(tl.ScheduleError, match=r"compute_at\(F, Y, t\): Y's loop t is parallel.*overlap"):
        s["F"].compute_at(s["Y"], "t")


def test_a_write_back_cannot_compute_a_gathering_reader():
    op = tl.op("def f(X: f32[N, K], ids: i32[N]) -> Y:\n    S[n] += X[n, k]\n    Y[n] = S[ids[n]] * 2.0")
    s = tl.schedule(op, N=4, K=3)
    with pytest.raises(tl.ScheduleError, match=r"reads S\[ids\[n\]\].*not S\[n\]"):
        s["Y"].reverse_compute_inline()


def test_the_auto_scheduler_sees_a_whole_dimension_read():
    from tensorlang.autosched.analysis import analyze
    info = analyze(tl.op(EMBED.format(dt="i32")), {"V": 1000, "D": 64, "T": 16})
    read = info.stage("Y").reads[0]
    assert read.tensor == "E" and read.strides == {"t": 1000 * 64, "d": 1}  # a step of t: anywhere in E
    assert read.plain_dim("t") is None


# ---- DSL errors --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("src, message, text", [
    ("def f(A: f32[N], I: f32[N]) -> C:\n    C[i] = A[I[i]]",
     "an index computed from a tensor read must be an integer (i32, i64, u8, ...), got f32; convert with "
     "i32(...)", "I[i]"),
    ("def f(A: f32[N], M: bool[N]) -> C:\n    C[i] = A[M[i]]",
     "must be an integer (i32, i64, u8, ...), got a comparison", "M[i]"),
    ("def f(A: f32[N], I: i32[N]) -> C:\n    C[i] = A[I[i] > 0]",
     "must be an integer (i32, i64, u8, ...), got a comparison", "I[i] > 0"),
    ("def f(A: f32[N], I: i32[N]) -> C:\n    C += A[I[i] + j]",
     "index `j` is used only in an index computed from a tensor read, which does not give its range; give it "
     "with `where j in LO:HI`", "j"),
    ("def f(A: f32[N], I: i32[N]) -> C:\n    C[i, j] = A[I[i] + j]",
     "cannot infer the range of `j` in stage `C`: it is used only in an index computed from a tensor read", "j"),
    ("def f(A: f32[N]) -> C:\n    C max= A[i] > 0",
     "`max=` of true/false values: reduce numbers, like `max= i32(...)`", "A[i] > 0"),
    ("def f(A: i64[N]) -> C:\n    C[i] = A[i] / 2",
     "`/` of i64 values", "/"),
    ("def f(A: i64[N]) -> C:\n    C[i] = A[i] + 0.5",
     "a float value with an i64 tensor; convert with f32(...) or i64(...)", "A[i] + 0.5"),
    ("def f(A: i64[N], B: i32[N]) -> C:\n    C[i] = A[i] + B[i]",
     "dtype mismatch in `+`: i64 and i32", "A[i] + B[i]"),
    ("def f(A: bool[N]) -> C:\n    C[i] = A[i] + 1",
     "`+` needs a number, got a comparison", "A[i]"),
    ("def f(A: f32[N]) -> C:\n    C[i] = clamp(A[i], 0.0)",
     "`clamp` takes 3 arguments, 2 given", "clamp(A[i], 0.0)"),
])
def test_dsl_errors(src, message, text):
    with pytest.raises(tl.DSLError) as info:
        tl.op(src)
    e = info.value
    assert message in e.message, e.message
    line = src.splitlines()[e.line - 1]
    assert line[e.col - 1:e.end_col - 1] == text, str(e)


def test_new_dtypes_are_declared_and_checked():
    op = tl.op("def f(A: i64[N], M: bool[N]) -> B:\n    B[i] = select(M[i], A[i], -A[i])")
    k = tl.build(op, N=3)
    assert k.input_dtypes == {"A": np.int64, "M": np.bool_} and k.output_dtypes == {"B": np.int64}
    with pytest.raises(tl.BuildError, match="input M has dtype int64, expected bool"):
        k(np.zeros(3, np.int64), np.zeros(3, np.int64))
    np.testing.assert_array_equal(k(np.array([1, 2, 3]), np.array([True, False, True])), [1, -2, 3])


def test_a_gathered_index_is_part_of_the_programs_structure():
    # tuned records and hand schedules are matched by structure: the index expression inside a gather counts
    src = "def f(E: f32[V, D], ids: i32[T]) -> Y:\n    Y[t, d] = E[{}, d]"
    plain, doubled = tl.op(src.format("ids[t]")), tl.op(src.format("ids[t] * 2"))
    renamed = tl.op(src.format("ids[t]").replace("ids", "tok").replace("E", "W"))
    assert plain.structure.key != doubled.structure.key
    assert plain.loop_structure.key != doubled.loop_structure.key
    assert plain.structure.renaming(renamed.structure).tensors == {"E": "W", "ids": "tok", "Y": "Y"}
