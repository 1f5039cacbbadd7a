"""Symbolic sizes (`tl.Dim`): one build serves every size in a range, checked against numpy at the ends of the
range, primes and sizes that no split factor divides, for the built-in matmul and conv2d under the naive, auto,
hand and tuned schedules; the call's checks (range, agreeing shapes) and the refusals of what is not supported."""
import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ir, runtime, schedules
from tensorlang.symbolic import Sym, SymbolicRefusal, proven, smax, smin, upper_bound
from tensorlang.tuner.records.database import Database, Record
from tensorlang.tuner.task import Task

MATMUL = schedules.get("matmul").source
CONV2D = schedules.get("conv2d").source
MM_DIMS = {"M": tl.Dim(1, 72, like=24), "N": tl.Dim(1, 72, like=24), "K": tl.Dim(1, 72, like=24)}
# (M, N, K): the range's ends, primes, the representative size, and sizes no split factor (4, 6, 8, 12, 16) divides
MM_CASES = [(1, 1, 1), (72, 72, 72), (24, 24, 24), (13, 17, 31), (37, 5, 71), (23, 61, 2), (71, 7, 43), (50, 66, 9)]
CONV_FIXED = {"C": 4, "F": 8, "R": 3, "S": 3, "stride": 1, "pad": 1, "dil": 1}
CONV_DIMS = {**CONV_FIXED, "N": tl.Dim(1, 3, like=1), "H": tl.Dim(3, 40, like=10), "W": tl.Dim(3, 40, like=10)}
CONV_CASES = [(1, 3, 3), (3, 40, 40), (1, 10, 10), (2, 13, 29), (1, 37, 7), (3, 11, 23)]


@pytest.fixture
def compiles(monkeypatch):
    """Counts the machine-code compilations from here on."""
    count = [0]
    real = runtime.compile_ir

    def counting(*a, **kw):
        count[0] += 1
        return real(*a, **kw)
    monkeypatch.setattr(runtime, "compile_ir", counting)
    return count


def matmul_ref(A, B):
    return A.astype(np.float64) @ B.astype(np.float64)


def check_matmul(k, cases=MM_CASES, seed=0):
    rng = np.random.default_rng(seed)
    for M, N, K in cases:
        A = rng.standard_normal((M, K), dtype=np.float32)
        B = rng.standard_normal((K, N), dtype=np.float32)
        got = k(A, B)
        assert got.shape == (M, N)
        np.testing.assert_allclose(got, matmul_ref(A, B), rtol=1e-4, atol=1e-4, err_msg=f"M={M} N={N} K={K}")


@pytest.mark.parametrize("schedule", ["naive", "auto", "hand"])
def test_one_matmul_build_serves_every_size_in_the_range(schedule, compiles):
    tl.clear_cache()
    k = tl.build(tl.op(MATMUL), **MM_DIMS, schedule=schedule)
    assert k.schedule_source == schedule and compiles[0] == 1
    assert k.sizes == {"M": (1, 72), "K": (1, 72), "N": (1, 72)}
    check_matmul(k)
    assert compiles[0] == 1  # every size above ran on the one compiled kernel
    assert tl.build(tl.op(MATMUL), **MM_DIMS, schedule=schedule) is k and compiles[0] == 1


@pytest.mark.parametrize("schedule", ["naive", "auto", "hand"])
def test_one_conv2d_build_serves_every_size_in_the_range(schedule, compiles):
    tl.clear_cache()
    w = schedules.get("conv2d")
    k = tl.build(tl.op(CONV2D), **CONV_DIMS, schedule=schedule)
    assert compiles[0] == 1
    rng = np.random.default_rng(1)
    for n, h, wd in CONV_CASES:
        sizes = {**CONV_FIXED, "N": n, "H": h, "W": wd}
        I, Wt = w.make_inputs(sizes, rng)
        got = k(I, Wt)
        want = w.reference(I, Wt, **sizes)
        assert got.shape == want.shape == (n, 8, h, wd)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"N={n} H={h} W={wd}")
    assert compiles[0] == 1


def test_a_hand_written_schedule_with_tails_and_a_partial_vector_is_exact_at_every_size():
    """Splits by 8 and 5 (a tail at most sizes), the vectorized loop over a symbolic extent (whole vectors, then one
    masked vector), a parallel loop, at every size from 1 to 40."""
    s = tl.schedule(tl.op(MATMUL), M=tl.Dim(1, 40, like=16), N=tl.Dim(1, 40, like=16), K=tl.Dim(1, 40, like=16))
    mo, mi = s["C"].split("i", 5)
    ko, ki = s["C"].split("k", 8)
    s["C"].reorder(mo, ko, mi, ki, "j")
    s["C"].vectorize("j")
    s["C"].parallel(mo)
    k = tl.build(s)
    check_matmul(k, [(n, n, n) for n in range(1, 41)] + [(40, 1, 3), (1, 40, 39)])


def test_a_tuned_record_for_the_representative_sizes_serves_the_symbolic_build(tmp_path):
    db = tmp_path / "t.db"
    rep = tl.schedule(tl.op(MATMUL), M=24, N=24, K=24)
    jo, ji = rep["C"].split("j", 8)
    rep["C"].reorder("i", "k", jo, ji)
    rep["C"].vectorize(ji)
    task = Task.create("matmul", sizes={"M": 24, "N": 24, "K": 24})
    with Database(db) as d:
        d.add(Record(task.key, task.workload, task.sizes, task.target, {}, rep.to_json(), (1e-4,),
                     flops=task.flops, threads=task.threads))
    k = tl.build(tl.op(MATMUL), **MM_DIMS, db=str(db), schedule="tuned")
    assert k.schedule_source == "tuned"
    assert [p.to_json() for p in k.schedule.primitives] == [p.to_json() for p in rep.primitives]
    check_matmul(k)


def test_a_call_outside_the_range_is_an_error_naming_the_input_dimension_and_range():
    k = tl.build(tl.op(MATMUL), **MM_DIMS, schedule="naive")
    A, B = np.ones((73, 4), np.float32), np.ones((4, 5), np.float32)
    with pytest.raises(tl.BuildError, match=r"matmul: input A dimension 0 is 73, but size M must lie in 1\.\.72 "
                                            r"for this kernel \(built with M=tl.Dim\(1, 72\)\)"):
        k(A, B)


def test_inputs_that_disagree_on_a_size_are_an_error_naming_both():
    k = tl.build(tl.op(MATMUL), **MM_DIMS, schedule="naive")
    A, B = np.ones((3, 4), np.float32), np.ones((5, 6), np.float32)
    with pytest.raises(tl.BuildError, match=r"matmul: input B has shape \(5, 6\), expected \(4, 6\).*K=4 from input "
                                            r"A dimension 1"):
        k(A, B)


def test_out_must_have_the_shape_of_the_call():
    k = tl.build(tl.op(MATMUL), **MM_DIMS, schedule="naive")
    A, B = np.ones((3, 4), np.float32), np.ones((4, 5), np.float32)
    out = np.empty((3, 5), np.float32)
    assert k(A, B, out=out) is out and (out == 4).all()
    with pytest.raises(tl.BuildError, match=r"output C has shape \(3, 6\), expected \(3, 5\)"):
        k(A, B, out=np.empty((3, 6), np.float32))


def test_a_symbolic_size_in_an_index_coefficient_is_refused():
    op = tl.op("def f(A: f32[S, T]) -> B:\n    B[i] = A[0, S*i]\n")
    with pytest.raises(SymbolicRefusal, match=r"f: size S is symbolic here, which is not supported for a coefficient "
                                              r"of the index variable `i` \(`A` dimension 1, stage `B`\)"):
        tl.build(op, T=64, S=tl.Dim(1, 8), schedule="naive")
    assert tl.build(op, T=64, S=8, schedule="naive")(np.arange(512, dtype=np.float32).reshape(8, 64)).tolist() \
        == [0.0, 8.0, 16.0, 24.0, 32.0, 40.0, 48.0, 56.0]


def test_an_int_parameter_cannot_be_symbolic():
    with pytest.raises(tl.BuildError, match="size stride is an `int` parameter; it cannot be symbolic"):
        tl.build(tl.op(CONV2D), **{**CONV_DIMS, "stride": tl.Dim(1, 2)})


def test_a_vectorized_reduction_over_a_symbolic_size_is_refused_with_the_fix():
    s = tl.schedule(tl.op(MATMUL), M=8, N=8, K=tl.Dim(1, 64))
    s["C"].reorder("i", "j", "k")
    with pytest.raises(tl.ScheduleError, match=r"size K is symbolic here, which is not supported for a vectorized "
                                               r"reduction loop \(extent K\); split the loop by a constant factor"):
        s["C"].vectorize("k")


def test_unrolled_and_vectorized_loops_over_a_symbolic_size_run_in_pieces_of_the_representative_extent():
    """Whole pieces of the extent at `like` (7: no power of two), then the rest: a serial loop after unrolled
    pieces, a masked vector after whole vectors."""
    s = tl.schedule(tl.op(MATMUL), M=tl.Dim(1, 30, like=7), N=tl.Dim(1, 30, like=7), K=5)
    s["C"].reorder("k", "i", "j")
    s["C"].unroll("i")
    s["C"].vectorize("j")
    text = s.lower()
    assert "for i in i_v*7:i_v*7 + 7:  # unrolled" in text and "for i in M//7*7:M:" in text
    assert "for j in j_v*7:j_v*7 + 7:  # vectorized" in text and "if j < N:" in text
    check_matmul(tl.build(s), [(m, n, 5) for m in (1, 6, 7, 8, 14, 29, 30) for n in (1, 7, 13, 30)])


def test_a_symbolic_size_no_input_has_as_a_dimension_is_refused():
    op = tl.op("def f(A: f32[N + 1]) -> B:\n    B[i] = A[i] * 2.0\n")
    with pytest.raises(tl.BuildError, match="size N is symbolic but no input has it as a whole dimension"):
        tl.build(op, N=tl.Dim(1, 9), schedule="naive")


def test_export_and_the_c_backend_refuse_symbolic_sizes(tmp_path):
    k = tl.build(tl.op(MATMUL), **MM_DIMS, schedule="naive")
    with pytest.raises(tl.BuildError, match="export of a kernel with symbolic sizes"):
        k.export(tmp_path / "k.so")
    with pytest.raises(tl.BuildError, match="the C backend does not take symbolic sizes"):
        k.source("c")
    assert "M: i64" in k.source("ir")
    from tensorlang.codegen_c import emit_c
    with pytest.raises(tl.BuildError, match=r"C backend: matmul has symbolic sizes \(M, K, N\), which it does not "
                                            "take"):
        emit_c(k.func)


def test_dim_checks_its_range():
    assert tl.Dim(2, 9).like == 2
    for args, msg in [((0, 4), r"need 1 <= lo <= hi"), ((5, 4), r"need 1 <= lo <= hi"),
                      ((1, 4, 9), r"like must lie in 1\.\.4"), ((1.5, 4), "lo=1.5 must be an integer")]:
        with pytest.raises(tl.BuildError, match=msg):
            tl.Dim(*args[:2], like=args[2] if len(args) > 2 else None)


def test_sym_decides_only_what_holds_over_the_whole_range():
    n = Sym.size("N", 5, 100)
    q = (n + 7) // 8
    assert 8 * q >= n and 8 * q - n <= 7 and n - 1 < n
    assert proven(n // 8 * 8, "<=", n) and not proven(n, ">", 50)
    with pytest.raises(SymbolicRefusal, match=r"size N is symbolic here, which is not supported where `N > 50` is "
                                              r"decided: it holds for some N in 5\.\.100 and not others"):
        bool(n > 50)
    with pytest.raises(SymbolicRefusal):
        range(n)
    assert smax(0, n - 1) is not None and str(smax(0, n - 1)) == "N - 1"
    assert str(smin(n, 50)) == "min(50, N)" or str(smin(n, 50)) == "min(N, 50)"
    assert upper_bound(n * 4 + 1) == 401
    env = {"N": 37}
    assert (q * 8 - n).evaluate(env) == 3 and smin(n, 50).evaluate(env) == 37


def test_sizes_that_are_multiples_of_the_split_factors_take_a_version_without_tails():
    """The kernel tests `M % 12 == 0 and K % 16 == 0` once per call: a version whose splits divide (no guard in the
    micro-kernel) where it holds, the guarded one elsewhere; both exact, whichever sizes hold it."""
    from tensorlang.specialize import split_multiples
    s = tl.schedule(tl.op(MATMUL), M=tl.Dim(12, 96, like=24), N=tl.Dim(8, 96, like=24), K=tl.Dim(16, 96, like=32))
    io, ii = s["C"].split("i", 12)
    ko, ki = s["C"].split("k", 16)
    s["C"].reorder(io, ko, ii, ki, "j")
    s["C"].vectorize("j")
    assert split_multiples(s) == {"M": 12, "K": 16}
    func = s.lowered()
    assert isinstance(func.body, ir.If) and str(func.body.cond) == "M__size%12 == 0 and K__size%16 == 0"
    fast, general = str(func.body.then), str(func.body.orelse)
    assert "if i <= M - 1" in general and "if k <= K - 1" in general
    assert "<= M" not in fast and "<= K" not in fast and "M_x12" in fast and "K_x16" in fast
    check_matmul(tl.build(s), [(12, 8, 16), (96, 96, 96), (24, 13, 32), (36, 9, 48), (13, 8, 16), (12, 8, 17),
                               (95, 95, 95), (60, 31, 80)])


def test_kernels_for_different_ranges_of_a_size_are_different_kernels():
    op = tl.op(MATMUL)
    narrow = tl.build(op, M=tl.Dim(1, 8), N=4, K=4, schedule="naive")
    wide = tl.build(op, M=tl.Dim(1, 64), N=4, K=4, schedule="naive")
    assert narrow is not wide and wide.sizes["M"] == (1, 64) and narrow.sizes["M"] == (1, 8)
    check_matmul(wide, [(64, 4, 4), (33, 4, 4)])


def test_a_tail_guard_inside_an_unrolled_or_vectorized_loop_is_checked_once_outside_it():
    """Sizes that are not multiples of the factors take the general version; there each unrolled row block and
    vector of the tile runs without its guard wherever the whole block is inside (`i_o*4 + 3 <= M - 1`), and the
    guarded copy only for the last, partial one. Proven in bounds without a runtime check, and exact."""
    s = tl.schedule(tl.op(MATMUL), **MM_DIMS)
    io, ii = s["C"].split("i", 4)
    jo, ji = s["C"].split("j", 8)
    s["C"].reorder(io, jo, "k", ii, ji)
    s["C"].unroll(ii)
    s["C"].vectorize(ji)
    func = s.lowered(strict=True)
    assert isinstance(func.body, ir.If)  # the version for multiples of 4 and 8 first
    general = str(func.body.orelse)
    clean = """
      if i_o*4 + 3 <= M - 1 and j_o*8 + 7 <= N - 1:
        for i_i in 0:4:  # unrolled
          i = i_i + i_o*4
          for j_i in 0:8:  # vectorized
            j = j_i + j_o*8
            C[i, j] = C[i, j] + A[i, k]*B[k, j]
      else:
"""  # the update for a whole row block of whole vectors: one check (the vector's guard does not change with the
    # unrolled rows, so it goes above them), no guard inside
    assert clean in general
    assert "if i <= M - 1" in general and "if j <= N - 1" in general  # kept for the partial ones
    check_matmul(tl.build(s))


def test_a_symbolic_temporary_is_laid_out_at_its_largest_extent():
    """A temporary over a symbolic size gets the room of the largest size anyway; laid out at that extent its
    strides are constants (40 here), as in a kernel for fixed sizes, while the inputs and outputs keep the
    caller's layout (a stride of N)."""
    import re
    op = tl.op("def f(A: f32[N, N]) -> B:\n    T[i, j] = A[i, j] * 2.0\n    B[i, j] = T[j, i] + 1.0")
    k = tl.build(op, N=tl.Dim(1, 40, like=8), schedule="naive")
    text = k.source("llvm-unoptimized")
    assert len(re.findall(r'mul nsw i64 %"[\w.]+", 40\b', text)) == 2  # T written and read
    assert len(re.findall(r'mul nsw i64 %"[\w.]+", %"N"', text)) == 2  # A read, B written
    for n in (1, 7, 40):
        a = np.random.default_rng(n).standard_normal((n, n), dtype=np.float32)
        np.testing.assert_allclose(k(a), (a * 2).T + 1, rtol=1e-6)


def test_a_symbolic_kernel_is_freed_by_reference_counting_alone():
    """Nothing a kernel holds refers back to it: the garbage collector, freeing a cycle in any order, could free
    its machine code before the kernel's release of its workspace runs."""
    import gc
    import weakref
    op = tl.op("def g(T: f32[N], I: i32[M]) -> O:\n    O[m] = T[I[m]]")
    k = tl.build(op, N=tl.Dim(1, 50), M=tl.Dim(1, 50))
    assert k(np.arange(5, dtype=np.float32), np.array([4, 0, 2], np.int32)).tolist() == [4.0, 0.0, 2.0]
    ref = weakref.ref(k)
    gc.disable()
    try:
        del k
        tl.clear_cache()
        assert ref() is None
    finally:
        gc.enable()


def test_an_index_out_of_range_in_a_symbolic_kernel_names_the_read():
    op = tl.op("def g(T: f32[N], I: i32[M]) -> O:\n    O[m] = T[I[m]]")
    k = tl.build(op, N=tl.Dim(1, 50), M=tl.Dim(1, 50))
    with pytest.raises(IndexError, match=r"index 7 is out of range for dimension 0 of T \(size 5\) in stage O"):
        k(np.arange(5, dtype=np.float32), np.array([4, 7, 2], np.int32))
    with pytest.raises(tl.BuildError, match="dtype float64, expected float32"):  # the general path's checks
        k(np.arange(5, dtype=np.float64), np.array([4, 0, 2], np.int32))


def test_several_representative_sizes_give_one_kernel_with_a_version_for_each(compiles):
    """`like=(a, b)`: each version's schedule is chosen for its own sizes (Halide's `specialize`), all in one
    compiled module; a call runs the version whose sizes' product is nearest its own, and every version is exact."""
    tl.clear_cache()
    dims = {n: tl.Dim(1, 72, like=(6, 48)) for n in ("M", "N", "K")}
    k = tl.build(tl.op(MATMUL), **dims, schedule="auto")
    assert compiles[0] == 1
    assert [v.sizes for v in k.versions] == [{"M": 6, "N": 6, "K": 6}, {"M": 48, "N": 48, "K": 48}]
    assert k.versions[0].schedule.primitives != k.versions[1].schedule.primitives
    assert k.version_for({"M": 16, "N": 17, "K": 17}) == 0 and k.version_for({"M": 17, "N": 17, "K": 17}) == 1
    assert "version@__size == 0" in k.source("ir")
    check_matmul(k, MM_CASES + [(6, 6, 6), (48, 48, 48), (16, 17, 17), (17, 17, 17)])
    assert compiles[0] == 1
    assert tl.build(tl.op(MATMUL), **dims, schedule="auto") is k


def test_representative_sizes_are_checked_and_a_schedule_takes_one():
    with pytest.raises(tl.BuildError, match=r"ascending order, each once"):
        tl.Dim(1, 64, like=(32, 8))
    with pytest.raises(tl.BuildError, match=r"like must lie in 1\.\.64"):
        tl.Dim(1, 64, like=(8, 128))
    op = tl.op(MATMUL)
    with pytest.raises(tl.BuildError, match=r"different numbers of representative sizes"):
        tl.build(op, M=tl.Dim(1, 64, like=(8, 32)), N=tl.Dim(1, 64, like=(8, 16, 32)), K=4)
    with pytest.raises(tl.BuildError, match=r"size M=.* has several representative sizes.*makes the versions"):
        tl.schedule(op, M=tl.Dim(1, 64, like=(8, 32)), N=4, K=4)
    # a plain like serves every version; versions with the same primitives are one
    k = tl.build(op, M=tl.Dim(1, 64, like=(8, 9)), N=tl.Dim(1, 64, like=16), K=4, schedule="naive")
    assert len(k.versions) == 1 and not k.thresholds
    check_matmul(k, [(1, 1, 4), (64, 64, 4), (9, 33, 4)])
