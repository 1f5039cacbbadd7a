"""Updates through an index computed from data (scatters): histograms, scatter-add, bin-wise max / min / product.

Every result is compared with numpy computed here (np.bincount, np.add.at, np.maximum.at, np.minimum.at,
np.multiply.at), never with tensorlang's own path; integer results bit-exactly. A left index outside its dimension
is a `tl.IndexError` from the JIT kernel (serial, privatized parallel, vectorized), `tl.reference`, and the C
backend (status 2 and `NAME_index_error`), never a write outside the buffer.
"""

from __future__ import annotations

import ctypes
import random

import numpy as np
import progen
import pytest
import schedfuzz
from c_kernels import c_kernel, needs_cc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schedule_cases import PROGRAMS

import tensorlang as tl
from tensorlang.choice import auto_schedule

HIST = "def hist(I: i32[Y, X]) -> H:\n    H[b := I[y, x]] += 1 where b in 0:256"
INDEX_ADD = "def index_add(ids: i32[T], V: f32[T, D], N: int) -> O:\n    O[n := ids[t], d] += V[t, d] where n in 0:N"


def rng(seed=0):
    return np.random.default_rng(seed)


def image(h, w, seed=0, lo=0, hi=256):
    return rng(seed).integers(lo, hi, (h, w)).astype(np.int32)


def index_error(fn, *args) -> str:
    with pytest.raises(tl.IndexError) as info:
        fn(*args)
    return str(info.value)


def privatized_histogram(threads: int = 4) -> tl.Schedule:
    s = tl.schedule(tl.op(HIST), Y=61, X=37)
    yo, _ = s["H"].split("y", -(-61 // threads))
    s["H"].parallel(yo)
    return s


# ---- results ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("schedule", ["naive", "auto", "privatized"])
def test_histogram_is_bincount(schedule, monkeypatch):
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "2")
    op = tl.op(HIST)
    I = image(61, 37)
    I[0, :5] = [0, 255, 255, 0, 7]  # both ends, repeats
    k = tl.build(privatized_histogram()) if schedule == "privatized" else tl.build(op, Y=61, X=37, schedule=schedule)
    got = k(I)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, np.bincount(I.ravel(), minlength=256))
    np.testing.assert_array_equal(tl.reference(op, Y=61, X=37)(I), np.bincount(I.ravel(), minlength=256))


def test_a_parallel_scatter_accumulates_into_private_copies(monkeypatch):
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "4")
    s = privatized_histogram(threads=4)
    text = s.lower()
    assert "allocate H_part: i32[4, 256]" in text and "# parallel" in text
    I = np.full((61, 37), 9, np.int32)  # every update of every thread to one element: a race would lose counts
    for _ in range(5):
        got = tl.build(s)(I)
        assert got[9] == 61 * 37 and got.sum() == 61 * 37


def test_a_parallel_loop_over_a_plain_left_index_needs_no_copies():
    s = tl.schedule(tl.op(INDEX_ADD), T=40, D=24, N=7)
    s["O"].parallel("d")
    assert "O_part" not in s.lower()
    ids, V = rng(1).integers(0, 7, 40).astype(np.int32), rng(2).standard_normal((40, 24)).astype(np.float32)
    want = np.zeros((7, 24))
    np.add.at(want, ids, V.astype(np.float64))
    np.testing.assert_allclose(tl.build(s)(ids, V), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("how", ["naive", "vectorized", "privatized", "privatized_inside", "auto"])
def test_scatter_add_is_np_add_at(how, monkeypatch):
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "2")
    op = tl.op(INDEX_ADD)
    sizes = dict(T=300, D=20, N=9)
    ids, V = rng(3).integers(0, 9, 300).astype(np.int32), rng(4).standard_normal((300, 20)).astype(np.float32)
    want = np.zeros((9, 20))
    np.add.at(want, ids, V.astype(np.float64))
    s = tl.schedule(op, **sizes)
    if how == "vectorized":
        s["O"].reorder("t", "d")
        _, di = s["O"].split("d", 8)
        s["O"].vectorize(di)
        assert "# vectorized" in s.lower()
    elif how == "privatized":
        s["O"].reorder("t", "d")
        to, _ = s["O"].split("t", 64)
        s["O"].parallel(to)
        assert "O_part" in s.lower()
    elif how == "privatized_inside":  # a serial loop outside the parallel one: copies combined at each iteration
        to, _ = s["O"].split("t", 64)
        s["O"].parallel(to)
        assert s["O"].loops() == ["d", "t_o", "t_i"] and "O_part" in s.lower()
    k = tl.build(op, **sizes, schedule="auto") if how == "auto" else tl.build(s)
    np.testing.assert_allclose(k(ids, V), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(tl.reference(op, **sizes)(ids, V), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("red, ufunc, identity", [("max", np.maximum, np.iinfo(np.int32).min),
                                                  ("min", np.minimum, np.iinfo(np.int32).max),
                                                  ("*", np.multiply, 1)])
@pytest.mark.parametrize("parallel", [False, True])
def test_max_min_and_product_scatters(red, ufunc, identity, parallel):
    op = tl.op(f"def f(K: i32[N], V: i32[N]) -> H:\n    H[b := K[i] % 10] {red}= V[i] where b in 0:12")
    s = tl.schedule(op, N=500)
    if parallel:
        io, _ = s["H"].split("i", 125)
        s["H"].parallel(io)
    K, V = rng(5).integers(-50, 50, 500).astype(np.int32), rng(6).integers(-3, 4, 500).astype(np.int32)
    want = np.full(12, identity, np.int64)
    ufunc.at(want, K % 10, V.astype(np.int64))
    want = want.astype(np.int32)  # bins 10 and 11 are never updated: the identity
    np.testing.assert_array_equal(tl.build(s)(K, V), want)
    np.testing.assert_array_equal(tl.reference(op, N=500)(K, V), want)


def test_a_float_max_scatter_leaves_empty_bins_at_minus_infinity():
    op = tl.op("def f(K: i32[N], V: f32[N]) -> H:\n    H[b := K[i]] max= V[i] where b in 0:4")
    K, V = np.array([0, 2, 0, 2], np.int32), np.array([1.5, -2.0, 3.0, -1.0], np.float32)
    np.testing.assert_array_equal(tl.build(op, N=4)(K, V), np.array([3.0, -np.inf, -1.0, -np.inf], np.float32))


def test_two_data_dependent_left_indices_and_a_scatter_read_by_a_later_stage():
    op = tl.op("def h2(A: i32[N], B: i32[N], W: f32[N]) -> Y:\n"
               "    H[a := A[i], b := B[i]] += W[i] where a in 0:4, b in 0:5\n"
               "    Y[a, b] = H[a, b] * 2.0")
    A, B = rng(7).integers(0, 4, 200).astype(np.int32), rng(8).integers(0, 5, 200).astype(np.int32)
    W = rng(9).standard_normal(200).astype(np.float32)
    want = np.zeros((4, 5))
    np.add.at(want, (A, B), W.astype(np.float64))
    np.testing.assert_allclose(tl.build(op, N=200)(A, B, W), want * 2, rtol=1e-5, atol=1e-5)
    s = tl.schedule(op, N=200)
    s["Y"].parallel("a")
    np.testing.assert_allclose(tl.build(s)(A, B, W), want * 2, rtol=1e-5, atol=1e-5)


def test_the_program_structure_tells_scatters_apart():
    a = tl.op("def h(I: i32[N]) -> H:\n    H[b := I[i]] += 1 where b in 0:8")
    b = tl.op("def h(I: i32[N]) -> H:\n    H[b := I[i] + 1] += 1 where b in 0:8")
    assert a.structure.key != b.structure.key and a != b


# ---- indices out of range ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [256, -1, 70000])
@pytest.mark.parametrize("schedule", ["naive", "privatized", "auto"])
def test_an_out_of_range_left_index_is_an_index_error(bad, schedule, monkeypatch):
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "2")
    op = tl.op(HIST)
    I = image(61, 37)
    k = tl.build(privatized_histogram()) if schedule == "privatized" else tl.build(op, Y=61, X=37, schedule=schedule)
    worse = I.copy()
    worse[40, 3] = bad
    want = (f"hist: index {bad} is out of range for dimension 0 of H (size 256) in stage H's update H[I[y, x]] "
            "(line 2, column 5)")
    assert index_error(k, worse) == want
    assert index_error(tl.reference(op, Y=61, X=37), worse) == want
    np.testing.assert_array_equal(k(I), np.bincount(I.ravel(), minlength=256))  # the kernel is fine afterwards


def test_the_second_left_index_out_of_range_is_named():
    op = tl.op("def f(A: i32[N], B: i32[N]) -> H:\n    H[a := A[i], b := B[i]] += 1 where a in 0:3, b in 0:2")
    msg = index_error(tl.build(op, N=3), np.array([0, 1, 2], np.int32), np.array([0, 2, 1], np.int32))
    assert msg == "f: index 2 is out of range for dimension 1 of H (size 2) in stage H's update H[A[i], B[i]] " \
                  "(line 2, column 5)"


def test_a_left_index_kept_in_range_needs_no_check():
    I = rng(10).integers(-20, 40, 100).astype(np.int32)
    for index, want in [("clamp(I[i], 0, 15)", np.clip(I, 0, 15)), ("I[i] % 16", I % 16)]:
        op = tl.op(f"def h(I: i32[N]) -> H:\n    H[b := {index}] += 1 where b in 0:16")
        k = tl.build(op, N=100)
        assert "check(" not in k.schedule.lower()
        np.testing.assert_array_equal(k(I), np.bincount(want, minlength=16))
    too_small = tl.op("def h(I: i32[N]) -> H:\n    H[b := I[i] % 16] += 1 where b in 0:15")
    assert "check(" in tl.schedule(too_small, N=100).lower()



@needs_cc
@pytest.mark.parametrize("parallel", [False, True])
def test_the_c_backend_scatters_and_reports_an_index_out_of_range(parallel, tmp_path):
    k = tl.build(privatized_histogram()) if parallel else tl.build(tl.op(HIST), Y=61, X=37)
    fn, err = c_kernel(k, tmp_path)
    I, H = image(61, 37, seed=11), np.empty(256, np.int32)
    assert fn(I.ctypes.data, H.ctypes.data) == 0
    np.testing.assert_array_equal(H, np.bincount(I.ravel(), minlength=256))
    I[60, 36] = 300
    value = ctypes.c_int64()
    assert fn(I.ctypes.data, H.ctypes.data) == 2 and err(ctypes.byref(value)) == 0 and value.value == 300


@needs_cc
def test_an_exported_library_scatters_and_reports_an_index_out_of_range(tmp_path):
    files = tl.build(privatized_histogram()).export(tmp_path, "so")
    assert "int64_t hist_index_error(int64_t *value);" in open(files["header"]).read()
    k = tl.load(files["library"])
    I = image(61, 37, seed=16)
    np.testing.assert_array_equal(k(I), np.bincount(I.ravel(), minlength=256))
    I[5, 5] = -3
    assert index_error(k, I) == ("hist: index -3 is out of range for dimension 0 of H (size 256) in stage H's "
                                 "update H[I[y, x]] (line 2, column 5)")


# ---- the pipeline: histogram equalization --------------------------------------------------------------------------

HISTEQ = """
def histeq(I: i32[Y, X]) -> O:
    H[b := I[y, x]] += 1 where b in 0:256
    C[b] += H[k] * select(k <= b, 1, 0) where b in 0:256
    O[y, x] = C[I[y, x]] * 255 // (Y * X)
"""


def _histeq_numpy(I):
    cdf = np.cumsum(np.bincount(I.ravel(), minlength=256)).astype(np.int64)
    return (cdf[I] * 255 // I.size).astype(np.int32)


@pytest.mark.parametrize("schedule", ["naive", "auto", "hand"])
def test_histogram_equalization_end_to_end(schedule, monkeypatch):
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "2")
    op = tl.op(HISTEQ)
    I = (rng(12).beta(2, 5, (90, 70)) * 256).astype(np.int32)  # a dark image: equalization spreads it
    if schedule == "hand":
        s = tl.schedule(op, Y=90, X=70)
        yo, _ = s["H"].split("y", 45)
        s["H"].parallel(yo)
        s["O"].parallel("y")
        _, xi = s["O"].split("x", 8)
        s["O"].vectorize(xi)
        k = tl.build(s)
    else:
        k = tl.build(op, Y=90, X=70, schedule=schedule)
    want = _histeq_numpy(I)
    np.testing.assert_array_equal(k(I), want)
    np.testing.assert_array_equal(tl.reference(op, Y=90, X=70)(I), want)
    assert want.max() == 255 and want.min() < 40  # the output spans the range


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_the_auto_scheduler_picks_a_legal_schedule_for_scatters(threads):
    I = image(200, 300, seed=13)
    for src, sizes, args, want in [
        (HIST, dict(Y=200, X=300), (I,), np.bincount(I.ravel(), minlength=256)),
        (HISTEQ, dict(Y=200, X=300), (I,), _histeq_numpy(I)),
    ]:
        s = auto_schedule(tl.op(src), sizes, threads=threads)
        s.lowered(strict=True)
        assert ("H_part" in s.lower()) == (threads > 1)  # 60000 updates: enough work to privatize
        np.testing.assert_array_equal(tl.build(s)(*args), want)


# ---- random schedules ----------------------------------------------------------------------------------------------

SCATTERS = ["hist", "index_add", "binmax"]


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(name=st.sampled_from(SCATTERS), seed=st.integers(0, 2**32 - 1))
def test_random_schedules_of_scatters(name, seed):
    src = progen.Src.from_random(random.Random(seed))
    case = schedfuzz.program_case(name, src)
    try:
        for _ in range(2):
            schedfuzz.run_schedule(case, src)
    finally:
        tl.clear_cache()


def test_the_fuzzed_scatters_are_scatters():
    assert all(PROGRAMS[n].op.stages[0].lhs is not None for n in SCATTERS)


# ---- errors --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("src, message", [
    ("def h(I: i32[N]) -> H:\n    H[I[i]] += 1",
     "line 2, column 7: a left-side index computed from data (a scatter) needs a name and a range, which give the "
     "output's size: write `H[b := I[i]] += ... where b in 0:SIZE`"),
    ("def h(I: i32[N]) -> H:\n    H[b := I[i]] += 1",
     "line 2, column 7: `b` is computed from data, so nothing gives its range (the size of H's dimension 0): give "
     "it with `where b in 0:SIZE`"),
    ("def h(I: i32[N]) -> H:\n    H[b := I[i]] = 1 where b in 0:8",
     "line 2, column 5: `=` through an index computed from data would leave which of several updates of one "
     "element wins to the loop order; accumulate with `+=`, `*=`, `max=` or `min=` (a histogram, a scatter-add)"),
    ("def h(I: i32[N]) -> H:\n    H[b := i + 1] += I[i] where b in 0:8",
     "line 2, column 12: `b := ...` names a left index computed from data, but `i + 1` reads no tensor; write a "
     "plain index variable"),
    ("def h(I: i32[N, M]) -> H:\n    H[b := I[i, d], d] += 1 where b in 0:8",
     "line 2, column 12: the left index `b` is computed from `d`, another left index; index it with reduction "
     "indices only (those of the right side)"),
    ("def h(I: f32[N]) -> H:\n    H[b := I[i]] += 1 where b in 0:8",
     "line 2, column 12: an index computed from a tensor read must be an integer (i32, i64, u8, ...), got f32; convert "
     "with i32(...) or i64(...)"),
    ("def h(I: i32[N], X: f32[N]) -> H:\n    H[b := I[i]] += X[b] where b in 0:8",
     "line 2, column 7: `b` is computed from data (one value for each point of the right side), so the right side "
     "cannot use it; use the value it is computed from instead"),
    ("def h(I: i32[N]) -> H:\n    H[b := I[i]] += 1 where b in 1:8",
     "line 2, column 34: `b` is a left-side index, so its range starts at 0 (not 1)"),
])
def test_scatter_errors(src, message):
    with pytest.raises(tl.DSLError) as info:
        tl.op(src)
    assert str(info.value).splitlines()[0] == message


def test_schedule_refusals():
    op = tl.op("def f(I: i32[Y, X], W: f32[Y, X]) -> O:\n"
               "    P[y, x] = I[y, x] % 16\n"
               "    H[b := P[y, x], c] += W[y, x] * f32(c) where b in 0:16, c in 0:4\n"
               "    O[b, c] = H[b, c] + 1.0")
    s = tl.schedule(op, Y=8, X=8)
    for action, needle in [
        (lambda: s["H"].vectorize("y"), "vectorize(H, y): the loop runs over y, and H's updates go to elements "
                                         "chosen by data, so two lanes could update the same element; vectorize a "
                                         "loop over a plain left-side index (c)"),
        (lambda: s["H"].compute_at(s["O"], "b"), "compute_at(H, O, b): H is a scatter (H[P[y, x], c] += ...); its "
                                                 "updates go to elements chosen by data"),
        (lambda: s["H"].cache_write("y"), "cache_write(H, y): H is a scatter"),
        (lambda: s["H"].cache_read("W", "y"), "cache_read(H, W, y): H is a scatter"),
        (lambda: s["P"].compute_at(s["H"], "y"), "compute_at(P, H, y): H is a scatter; nothing is computed inside "
                                                 "its loops"),
        (lambda: s["O"].reverse_compute_inline(), "reverse_compute_inline(O): H is a scatter"),
    ]:
        with pytest.raises(tl.ScheduleError) as info:
            action()
        assert needle in str(info.value)
    # what stays legal: the producer inlined into the scatter, the plain index vectorized, a parallel loop anywhere
    s["P"].compute_inline()
    s["H"].reorder("y", "x", "c")
    s["H"].vectorize("c")
    s["H"].parallel("y")
    I, W = rng(14).integers(0, 100, (8, 8)).astype(np.int32), rng(15).standard_normal((8, 8)).astype(np.float32)
    want = np.zeros((16, 4))
    np.add.at(want, I % 16, W.astype(np.float64)[..., None] * np.arange(4))
    np.testing.assert_allclose(tl.build(s)(I, W), want + 1, rtol=1e-5, atol=1e-5)


def test_too_many_private_copies_are_refused():
    s = tl.schedule(tl.op(INDEX_ADD), T=100000, D=64, N=20000)
    s["O"].reorder("t", "d")
    with pytest.raises(tl.ScheduleError) as info:
        s["O"].parallel("t")
    assert str(info.value) == ("parallel(O, t): each of its 100000 iterations would accumulate into a private copy "
                               "of O (512000000000 bytes in all, more than 268435456); split t and parallelise the "
                               "outer loop")
    to, _ = s["O"].split("t", 25000)
    s["O"].parallel(to)  # four copies
    assert "allocate O_part: f32[4, 20000, 64]" in s.lower()
