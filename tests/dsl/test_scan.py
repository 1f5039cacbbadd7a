"""Scans: a stage that reads itself at earlier elements along one index (`S[i] = S[i - 1] + X[i]`), computed in
increasing order of that index.

What is checked: the results against numpy formulations written here (np.cumsum, explicit loops,
scipy.signal.lfilter when scipy is installed) -- bit-exact for integers and for float sums whose order is fixed,
within a few units in the last place where LLVM fuses a multiply and an add; the numpy evaluator
(`tl.reference`) on its own; the C backend (an exported library); schedules that keep the order (splits,
reorders of the other indices inside the scan index, fuses, a column IIR vectorized along its rows) and the
refusals of those that do not, naming primitive, stage and loop; the auto-scheduler's zero-trial pick; and
the DSL errors for recurrences whose order is not defined (line and column).
"""
from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_close
from schedule_cases import PROGRAMS, make_inputs
from schedule_checks import new, refuse, roundtrip, run

import tensorlang as tl
from tensorlang.choice import auto_schedule
from tensorlang.codegen_c import find_c_compiler
from tensorlang.ir import expr_vars
from tensorlang.program import scan_axis

needs_cc = pytest.mark.skipif(find_c_compiler() is None, reason="no C compiler found (gcc, clang or $CC)")


def rng(seed=0):
    return np.random.default_rng(seed)


def loop_scan(x, step, first=None):
    """An explicit loop along axis 0: y[t] = step(x[t], y[t - 1]) with y[-1] = 0 (or y[0] = first(x[0]))."""
    out = np.empty_like(x)
    prev = np.zeros_like(x[0])
    for t in range(x.shape[0]):
        prev = first(x[0]) if first is not None and t == 0 else step(x[t], prev)
        out[t] = prev
    return out


# ---- what a scan computes ------------------------------------------------------------------------------------------

def test_a_prefix_sum_is_numpys_cumsum_bit_for_bit():
    op = tl.op("def p(X: f32[N]) -> S:\n    S[i] = S[i - 1] + X[i]")
    X = rng(1).standard_normal(1000).astype(np.float32)
    want = np.cumsum(X)  # numpy accumulates in order, in float32
    np.testing.assert_array_equal(tl.build(op, N=1000)(X), want)
    np.testing.assert_array_equal(tl.reference(op, N=1000)(X), want)
    X64 = X.astype(np.float64)
    op64 = tl.op("def p(X: f64[N]) -> S:\n    S[i] = S[i - 1] + X[i]")
    np.testing.assert_array_equal(tl.build(op64, N=1000)(X64), np.cumsum(X64))


def test_an_integer_prefix_sum_is_exact():
    op = tl.op("def p(X: i32[N]) -> S:\n    S[i] = S[i - 1] + X[i]")
    X = rng(2).integers(-1000, 1000, 777).astype(np.int32)
    np.testing.assert_array_equal(tl.build(op, N=777)(X), np.cumsum(X, dtype=np.int32))
    np.testing.assert_array_equal(tl.reference(op, N=777)(X), np.cumsum(X, dtype=np.int32))


def test_a_column_iir_matches_an_explicit_loop_and_lfilter():
    op = tl.op("def iir(X: f64[H, W]) -> Y:\n    Y[y, x] = 0.25 * X[y, x] + 0.75 * Y[y - 1, x]")
    X = rng(3).standard_normal((50, 37))
    want = loop_scan(X, lambda x, prev: 0.25 * x + 0.75 * prev)
    got = tl.build(op, H=50, W=37)(X)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)  # the order is fixed: FMA contraction only
    np.testing.assert_array_equal(tl.reference(op, H=50, W=37)(X), want)
    signal = pytest.importorskip("scipy.signal")
    np.testing.assert_allclose(got, signal.lfilter([0.25], [1.0, -0.75], X, axis=0), rtol=1e-12, atol=1e-14)


def test_a_row_scan_runs_along_the_inner_index():
    op = tl.op("def rs(X: f64[H, W]) -> Y:\n    Y[y, x] = X[y, x] + Y[y, x - 1]")
    X = rng(4).standard_normal((9, 300))
    np.testing.assert_array_equal(tl.build(op, H=9, W=300)(X), np.cumsum(X, axis=1))
    np.testing.assert_array_equal(tl.reference(op, H=9, W=300)(X), np.cumsum(X, axis=1))


def test_offsets_of_more_than_one_and_several_reads_of_itself():
    op = tl.op("def two(X: i32[N]) -> S:\n    S[i] = S[i - 2] + X[i]")
    X = rng(5).integers(-50, 50, 101).astype(np.int32)
    want = np.zeros(101, np.int32)
    want[0::2], want[1::2] = np.cumsum(X[0::2]), np.cumsum(X[1::2])
    np.testing.assert_array_equal(tl.build(op, N=101)(X), want)
    assert scan_axis(op.stage("S")) == ("i", (2,))
    fib = tl.op("def fib(X: i64[N]) -> S:\n    S[i] = S[i - 1] + S[i - 2] + X[i]")
    X = rng(6).integers(-3, 4, 60).astype(np.int64)
    want = np.zeros(60, np.int64)
    for i in range(60):
        want[i] = X[i] + (want[i - 1] if i >= 1 else 0) + (want[i - 2] if i >= 2 else 0)
    np.testing.assert_array_equal(tl.build(fib, N=60)(X), want)
    np.testing.assert_array_equal(tl.reference(fib, N=60)(X), want)
    assert scan_axis(fib.stage("S")) == ("i", (1, 2))


@pytest.mark.parametrize("rhs", ["select(i == 0, X[i], 0.5 * S[i - 1] + X[i] * X[i])",
                                 "X[i] if i == 0 else 0.5 * S[i - 1] + X[i] * X[i]"])
def test_a_first_value_other_than_zero(rhs):
    op = tl.op(f"def e(X: f64[N]) -> S:\n    S[i] = {rhs}")
    X = rng(7).standard_normal(64)
    want = loop_scan(X, lambda x, prev: 0.5 * prev + x * x, first=lambda x0: x0)
    np.testing.assert_allclose(tl.build(op, N=64)(X), want, rtol=1e-14)
    np.testing.assert_array_equal(tl.reference(op, N=64)(X), want)


def test_a_scan_between_other_stages():
    op = tl.op("def pipe(X: f32[N, D]) -> Z:\n"
               "    T[n, d] = X[n, d] * 2.0\n"
               "    S[n, d] = S[n, d - 1] + T[n, d]\n"
               "    Z[n] += S[n, d]")
    X = rng(8).integers(-8, 9, (6, 40)).astype(np.float32)  # small integers: every sum exact
    want = np.cumsum(X * 2, axis=1).sum(axis=1)
    np.testing.assert_array_equal(tl.build(op, N=6, D=40)(X), want)
    np.testing.assert_array_equal(tl.reference(op, N=6, D=40)(X), want)


def test_a_scan_takes_its_dtype_from_the_rest_of_its_right_side():
    op = tl.op("def c(X: i32[N]) -> S:\n    S[i] = S[i - 1] * 2 + X[i]")
    assert op.stage("S").dtype == "i32"
    op = tl.op("def c(X: f32[N]) -> S:\n    S[i] = S[i - 1] * 0.5 + 1 + X[i]")
    assert op.stage("S").dtype == "f32"
    np.testing.assert_array_equal(tl.build(op, N=4)(np.zeros(4, np.float32)), [1.0, 1.5, 1.75, 1.875])
    op = tl.op("def c(X: f32[N]) -> S:\n    S[i] = f64(S[i - 1]) * 0.5 + f64(X[i])")
    assert op.stage("S").dtype == "f64"


# ---- both backends ------------------------------------------------------------------------------------------------

@needs_cc
def test_the_c_backend_computes_scans(tmp_path):
    s = tl.schedule(tl.op("def iir(X: f32[H, W]) -> Y:\n    Y[y, x] = 0.25 * X[y, x] + 0.75 * Y[y - 1, x]"),
                    H=30, W=64)
    s["Y"].reorder("x", "y")
    s["Y"].split("x", 16)
    s["Y"].reorder("x_o", "y", "x_i")
    s["Y"].vectorize("x_i")
    s["Y"].parallel("x_o")
    X = rng(9).standard_normal((30, 64)).astype(np.float32)
    want = loop_scan(X.astype(np.float64), lambda x, prev: 0.25 * x + 0.75 * prev)
    k = tl.load(tl.build(s).export(tmp_path / "iir", "so")["library"])
    np.testing.assert_allclose(k(X), want, rtol=1e-5, atol=1e-6)
    p = tl.op("def p(X: i32[N]) -> S:\n    S[i] = S[i - 1] + S[i - 3] + X[i]")
    X = rng(10).integers(-5, 6, 40).astype(np.int32)
    want = np.zeros(40, np.int64)
    for i in range(40):
        want[i] = X[i] + (want[i - 1] if i >= 1 else 0) + (want[i - 3] if i >= 3 else 0)
    k = tl.load(tl.build(p, N=40).export(tmp_path / "p", "so")["library"])
    np.testing.assert_array_equal(k(X), want.astype(np.int32))


# ---- schedules ----------------------------------------------------------------------------------------------------

def test_a_column_iir_vectorized_along_its_rows():
    s = new("iir_col", H=23, W=70)
    s["Y"].split("x", 16)
    s["Y"].reorder("x_o", "y", "x_i")
    s["Y"].vectorize("x_i")
    s["Y"].parallel("x_o")
    text, _ = run(s)
    assert "for x_i in 0:16:  # vectorized" in text and "for y in 0:23:\n" in text
    roundtrip(s)


def test_a_split_scan_loop_keeps_its_order():
    s = new("iir_first", H=29, W=5)
    s["Y"].split("y", 4)  # a tail: 29 is no multiple of 4
    s["Y"].unroll("y_i")
    s["Y"].vectorize("x")
    run(s)
    s = new("fib", N=50)
    s["S"].split("i", 3)
    s["S"].split("i_o", 2)
    s["S"].fuse("i_o_i", "i_i")
    run(s)


def test_other_loops_go_inside_or_outside_the_scan_loop():
    s = new("scan_row", H=17, W=21)
    s["Y"].reorder("x", "y")  # the rows inside the scan along x
    s["Y"].split("y", 8)
    s["Y"].vectorize("y_i")
    s["Y"].parallel("y_o")
    run(s)
    s = new("scan_row", H=7, W=13)
    s["Y"].fuse("y", "x")  # a fuse keeps x in order inside each row
    s["Y"].split("y_x", 5)
    run(s)
    s = new("cumsumi", N=64)
    s["S"].split("i", 8)
    s["S"].split("i_i", 2)
    s["S"].reorder("i_i_o", "i_i_i")  # already in that order: legal
    run(s)


def test_producers_inlined_or_computed_inside_a_scan():
    s = new("scan_pipe", H=6, W=19)
    s["T"].compute_at(s["Y"], "y")
    s["Z"].vectorize("x")
    run(s)
    s = new("scan_pipe", H=6, W=19)
    s["T"].compute_inline()
    s["Y"].parallel("y")
    run(s)


def test_refusals_name_the_primitive_the_stage_and_the_loop():
    s = new("iir_col", H=8, W=32)
    refuse(s, lambda: s["Y"].parallel("y"), "parallel(Y, y)", "Y is a scan along y", "Y[y - 1, x]")
    s["Y"].split("y", 4)
    refuse(s, lambda: s["Y"].vectorize("y_i"), "vectorize(Y, y_i)", "loop y_i runs over y")
    refuse(s, lambda: s["Y"].reorder("y_i", "y_o"), "reorder(Y, y_i, y_o)", "y would not run in increasing order")
    refuse(s, lambda: s["Y"].reorder("y_i", "x", "y_o"), "reorder(Y, y_i, x, y_o)", "keep y_o outside y_i")
    s["Y"].fuse("y_o", "y_i", "yy")
    refuse(s, lambda: s["Y"].parallel("yy"), "parallel(Y, yy)", "loop yy runs over y")
    refuse(s, lambda: s["Y"].cache_write("yy"), "cache_write(Y, yy)", "scan along y")
    s = new("scan_row", H=8, W=32)
    s["Y"].fuse("y", "x", "f")
    refuse(s, lambda: s["Y"].parallel("f"), "parallel(Y, f)", "loop f runs over x")
    s = new("scan_pipe", H=6, W=19)
    refuse(s, lambda: s["Y"].compute_inline(), "compute_inline(Y)", "Y is a scan along x")
    refuse(s, lambda: s["Y"].compute_at(s["Z"], "y"), "compute_at(Y, Z, y)", "computed at the root")
    refuse(s, lambda: s["Y"].cache_read("Y", "y"), "cache_read(Y, Y, y)", "scan along x")


def test_a_refused_schedule_is_refused_from_json_too():
    s = new("cumsum", N=16)
    s["S"].split("i", 4)
    s["S"].unroll("i_i")
    text = s.to_json().replace('"unrolled"', '"vectorized"')  # a schedule written by hand, or by another tool
    with pytest.raises(tl.ScheduleError, match=r"vectorize\(S, i_i\): S is a scan along i"):
        tl.Schedule.from_json(text)


# ---- the auto-scheduler ----------------------------------------------------------------------------------------

SCANS = {
    "cumsum": ({"N": 5000}, "S"),
    "iir_col": ({"H": 256, "W": 1024}, "Y"),
    "scan_row": ({"H": 200, "W": 300}, "Y"),
    "scan_pipe": ({"H": 64, "W": 256}, "Y"),
    "fib": ({"N": 40}, "S"),
}


@pytest.mark.parametrize("name", SCANS)
def test_the_zero_trial_pick_keeps_each_scan_in_order(name):
    sizes, stage = SCANS[name]
    prog = PROGRAMS[name]
    s = auto_schedule(prog.op, sizes, threads=2)
    st = s.state().stages[stage]
    axis = scan_axis(prog.op.stage(stage))[0]
    runs_scan = expr_vars(st.nest.exprs[axis])
    for lp in st.nest.loops:
        assert not (lp.kind in ("parallel", "vectorized") and lp.name in runs_scan), (lp, str(s))
    assert type(st.attach).__name__ == "Root"
    if name == "iir_col":  # the point of a column IIR: vectors along the rows, blocks of columns on threads
        along_x = {lp.kind for lp in st.nest.loops if lp.name in expr_vars(st.nest.exprs["x"])}
        assert {"vectorized", "parallel"} <= along_x, str(s)
    inputs = make_inputs(s, 11)
    assert_close(tl.build(s)(*inputs), prog.reference(*inputs, **sizes), prog.red_len(sizes), exact=prog.exact)


# ---- errors: recurrences whose order is not defined ----------------------------------------------------------------

def _error(src: str) -> tl.DSLError:
    with pytest.raises(tl.DSLError) as info:
        tl.op(src)
    return info.value


def _at(e: tl.DSLError, src: str, line: int, text: str, *phrases: str) -> None:
    for p in phrases:
        assert p in e.message, e.message
    col = src.splitlines()[line - 1].rindex(text) + 1
    assert (e.line, e.col, e.end_col) == (line, col, col + len(text)), str(e)


@pytest.mark.parametrize("src, text, phrases", [
    ("def f(X: f32[N]) -> S:\n    S[i] = S[i + 1] + X[i]", "i + 1",
     ("stage `S` reads itself at `i + 1`", "an element computed after `S[i]`", "earlier elements only")),
    ("def f(X: f32[H, W]) -> Y:\n    Y[y, x] = Y[y - 1, x] + Y[y, x - 1] + X[y, x]", "x - 1",
     ("reads itself along two indices, `y` (line 2, column 17) and `x`", "runs along one index")),
    ("def f(X: f32[H, W]) -> Y:\n    Y[y, x] = Y[y - 1, x - 1] + X[y, x]", "x - 1",
     ("reads itself along two indices",)),
    ("def f(X: f32[N, D]) -> S:\n    S[n] += S[n - 1] * X[n, d]", "S[n - 1]",
     ("stage `S` reads itself and reduces with `+=`", "a reduction cannot read its own result")),
    ("def f(X: f32[H, W]) -> Y:\n    Y[y, x] = Y[y - 1, x + 1] + X[y, x]", "x + 1",
     ("stage `Y` reads itself at `x + 1`",)),
    ("def f(X: f32[N]) -> S:\n    S[i] = S[2*i - 1] + X[i]", "2*i - 1",
     ("reads itself at index 0 `2*i - 1`", "`i - c` with c a positive integer")),
    ("def f(X: f32[N], K: int) -> S:\n    S[i] = S[i - K] + X[i]", "i - K",
     ("reads itself at index 0 `i - K`",)),
    ("def f(X: f32[H, W]) -> Y:\n    Y[y, x] = Y[x - 1, y] + X[y, x]", "x - 1",
     ("reads itself at index 0 `x - 1`",)),
    ("def f(X: f32[N], ids: i32[N]) -> S:\n    S[i] = S[ids[i]] + X[i]", "ids[i]",
     ("reads itself at index 0",)),
    ("def f(X: f32[N]) -> S:\n    S[i] = S[i] + X[i]", "S[i]",
     ("stage `S` reads the element it writes, `S[i]`",)),
    ("def f(X: f32[N]) -> (S, T):\n    T[i] = X[i]\n    S = S + T[0]", "S + T[0]",
     ()),
])
def test_recurrences_without_an_order_are_refused(src, text, phrases):
    e = _error(src)
    line = next(n for n, ln in enumerate(src.splitlines(), 1) if text in ln and "def " not in ln)
    if not phrases:  # a stage of no index reading itself
        assert "reads the element it writes" in e.message and "has no index" in e.message, e.message
        assert e.line == line
        return
    _at(e, src, line, text, *phrases)


def test_a_cycle_through_two_stages_is_still_a_cycle():
    e = _error("def f(A: f32[N]) -> C:\n    B[i] = C[i - 1] + A[i]\n    C[i] = B[i] * 2.0")
    assert "cycle between stages: B -> C -> B" in e.message


def test_a_scan_nothing_reads_is_unused():
    e = _error("def f(X: f32[N]) -> Y:\n    S[i] = S[i - 1] + X[i]\n    Y[i] = X[i]")
    assert "stage `S` is computed but never used" in e.message


def test_a_scan_needs_a_range_from_its_other_reads():
    e = _error("def f(X: f32[N]) -> S:\n    S[i] = S[i - 1] + X[0]")
    assert "cannot infer the range of `i` in stage `S`" in e.message
    op = tl.op("def f(X: f32[N]) -> S:\n    S[i] = S[i - 1] + 1.0 + X[0] where i in 0:N")
    np.testing.assert_array_equal(tl.build(op, N=4)(np.zeros(4, np.float32)), [1, 2, 3, 4])
