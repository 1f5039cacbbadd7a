"""rfactor (a reduction split into a parallel partial stage and a combine) and nested parallelism (two parallel
loops of one stage; a fused parallel loop).

Every kernel is compared with numpy in float64 (floats within the reassociation tolerance of the reduction's
length, integers and max / min exactly); every refusal names the primitive, the stage and the loop and leaves the
schedule unchanged.

Run: ``.venv/bin/pytest tests/schedule/test_rfactor.py -q -n 0``
"""
from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_close
from schedule_checks import refuse, roundtrip

import tensorlang as tl

ROWSUM = "def f(A: f32[M, K]) -> B:\n    B[m] += A[m, k]"
NUMPY = {"+": np.sum, "*": np.prod, "max": np.max, "min": np.min}


def _inputs(rng, red: str, dtype: str, shape) -> np.ndarray:
    """Values each reduction keeps finite and exact where it must: products of numbers near 1 (or of +-1 and 2
    for integers, which wrap the same way in any order)."""
    if dtype == "i32":
        if red == "*":
            return rng.choice(np.int32([1, -1, 2]), shape)
        return rng.integers(-1000, 1000, shape).astype(np.int32)
    if red == "*":
        return (1 + (rng.random(shape) - 0.5) * 0.05).astype(dtype.replace("f", "float"))
    return (rng.random(shape) * 4 - 2.5).astype(dtype.replace("f", "float"))


def _check(got, a, red: str, axis: int = -1) -> None:
    if a.dtype == np.int32:
        want = NUMPY[red](a, axis=axis, dtype=np.int32) if red in ("+", "*") else NUMPY[red](a, axis=axis)
        assert_close(got, want, exact=True)
    else:
        want = NUMPY[red](a.astype(np.float64), axis=axis).astype(a.dtype)
        assert_close(got, want, a.shape[axis], exact=red in ("max", "min"))


# ---- the loop nest --------------------------------------------------------------------------------------
def test_rfactor_loop_nest():
    s = tl.schedule(tl.op(ROWSUM), M=3, K=256)
    s["B"].split("k", 64)
    assert s["B"].rfactor("k_o") == "B_rf"
    s["B_rf"].reorder("k_o", "m")
    s["B_rf"].parallel("k_o")
    assert s.lower() == """def f(A: f32[3, 256], B: f32[3]):
  allocate B_rf: f32[3, 4]
  for k_o in 0:4:  # parallel
    for m in 0:3:
      B_rf[m, k_o] = 0f
      for k_i in 0:64:
        B_rf[m, k_o] = B_rf[m, k_o] + A[m, k_i + k_o*64]
  for m in 0:3:
    B[m] = 0f
    for k_o in 0:4:
      B[m] = B[m] + B_rf[m, k_o]"""
    assert s["B_rf"].loops() == ["k_o", "m", "k_i"] and s["B"].loops() == ["m", "k_o"]
    a = np.random.default_rng(0).random((3, 256)).astype(np.float32)
    _check(tl.build(s)(a), a, "+")


def test_rfactor_tail_adds_the_identity():
    """A split that does not divide: the partial's tail adds max's identity (the inputs are all negative, so a
    tail that added 0, as a padded read alone would, gives a wrong maximum)."""
    op = tl.op("def f(A: f32[M, K]) -> B:\n    B[m] max= A[m, k]")
    s = tl.schedule(op, M=2, K=37)
    s["B"].split("k", 8)
    s["B"].rfactor("k_o")
    assert "select(k_i + k_o*8 < 37, A[m, k_i + k_o*8] (0 outside), -inf)" in s.lower()
    a = -1 - np.random.default_rng(1).random((2, 37)).astype(np.float32)
    _check(tl.build(s)(a), a, "max")


# ---- results: every operator and dtype, dividing and not ------------------------------------------------
@pytest.mark.parametrize("red", ["+", "*", "max", "min"])
@pytest.mark.parametrize("dtype", ["f32", "f64", "i32"])
@pytest.mark.parametrize("K,factor", [(1024, 64), (1009, 32)])
def test_rfactor_matches_numpy(red, dtype, K, factor):
    op = tl.op(f"def f(A: {dtype}[M, K]) -> B:\n    B[m] {red}= A[m, k]")
    s = tl.schedule(op, M=3, K=K)
    s["B"].split("k", factor)
    s["B"].rfactor("k_o")
    s["B_rf"].reorder("k_o", "m")
    s["B_rf"].parallel("k_o")
    a = _inputs(np.random.default_rng(K + factor), red, dtype, (3, K))
    _check(tl.build(s)(a), a, red)


def test_rfactor_full_reduction_to_a_scalar_vectorized():
    """One long row summed on every thread: the partials over k_o in parallel, each a vector accumulator."""
    op = tl.op("def total(A: f32[K]) -> S:\n    S[z] += A[k] where z in 0:1")
    s = tl.schedule(op, K=100_003)
    s["S"].split("k", 4096)
    s["S"].split("k_i", 16)
    s["S"].rfactor("k_o")
    s["S_rf"].reorder("k_o", "z")
    s["S_rf"].parallel("k_o")
    s["S_rf"].vectorize("k_i_i")
    ir = s.lower()
    assert "for k_o in 0:25:  # parallel" in ir and "# vectorized" in ir
    a = np.random.default_rng(2).random(100_003).astype(np.float32)
    _check(tl.build(s)(a), a[None], "+")


def test_rfactor_inner_axis_and_other_reduction_loops():
    """rfactor over the inner part of a split (strided partials), in a reduction over two indices."""
    op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\n    C[i, j] += A[i, k] * B[k, j]")
    s = tl.schedule(op, M=3, N=5, K=60)
    s["C"].split("k", 7)
    s["C"].rfactor("k_i", partial="P")
    assert s["P"].loops() == ["i", "j", "k_i", "k_o"]
    s["P"].parallel("k_i")  # not the outermost loop: each (i, j) runs its k_i loop on the threads
    rng = np.random.default_rng(3)
    A, B = rng.random((3, 60)).astype(np.float32), rng.random((60, 5)).astype(np.float32)
    assert_close(tl.build(s)(A, B), (A.astype(np.float64) @ B).astype(np.float32), 60)


@pytest.mark.parametrize("factor", [None, 3])
def test_rfactor_reduction_index_that_does_not_start_at_zero(factor):
    """`r in 1:K`: the partial's index over an unsplit r starts at 0 (its writes stay inside its buffer)."""
    op = tl.op("def f(A: f32[M, K]) -> B:\n    B[m] += A[m, r] * 2.0 where r in 1:K")
    s = tl.schedule(op, M=2, K=11)
    axis = "r"
    if factor:
        axis, _ = s["B"].split("r", factor)
    s["B"].rfactor(axis)
    s["B_rf"].parallel(axis)
    a = np.random.default_rng(8).random((2, 11)).astype(np.float32)
    assert_close(tl.build(s)(a), (a[:, 1:].astype(np.float64) * 2).sum(1).astype(np.float32), 10)
    assert s.lowered(strict=True) is not None


def test_rfactor_reads_a_computed_stage_and_schedules_both_stages():
    """The partial and the combine are stages like any other: split, fuse, parallel, compute_at."""
    op = tl.op("def g(A: f32[M, K]) -> B:\n    E[m, k] = exp(A[m, k])\n    B[m] += E[m, k] * 0.5")
    s = tl.schedule(op, M=4, K=300)
    s["B"].split("k", 50)
    s["B"].rfactor("k_o")
    s["E"].compute_inline()
    f = s["B_rf"].fuse("m", "k_o")
    s["B_rf"].parallel(f)
    s["B"].parallel("m")
    a = np.random.default_rng(4).random((4, 300)).astype(np.float32)
    assert_close(tl.build(s)(a), (np.exp(a.astype(np.float64)) * 0.5).sum(1).astype(np.float32), 300)


def test_rfactor_of_a_combine_stage_again_takes_a_fresh_name():
    """A combine stage rfactored again (a two-level tree of partials): the default name NAME_rf is taken."""
    s = tl.schedule(tl.op(ROWSUM), M=2, K=4096)
    s["B"].split("k", 256)
    s["B"].rfactor("k_o")
    s["B"].split("k_o", 4)
    assert s["B"].rfactor("k_o_o") == "B_rf2"
    s["B_rf"].parallel("k_o")
    a = np.random.default_rng(9).random((2, 4096)).astype(np.float32)
    _check(tl.build(s)(a), a, "+")
    roundtrip(s)


def test_rfactor_round_trips_and_renames():
    s = tl.schedule(tl.op(ROWSUM), M=3, K=100)
    s["B"].split("k", 16)
    s["B"].rfactor("k_o")
    s["B_rf"].parallel("m")
    assert 's["B"].rfactor("k_o", partial="B_rf")' in str(s)
    roundtrip(s)
    other = tl.op("def g(X: f32[R, L]) -> Y:\n    Y[r] += X[r, l]")
    t = s.renamed(other, s.op.loop_structure.renaming(other.loop_structure))
    assert 's["Y"].rfactor("l_o", partial="Y_rf")' in str(t) and 's["Y_rf"].parallel("r")' in str(t)
    x = np.random.default_rng(5).random((3, 100)).astype(np.float32)
    _check(tl.build(t)(x), x, "+")


# ---- refusals ---------------------------------------------------------------------------------------------
def test_rfactor_refuses_a_stage_that_is_not_a_reduction():
    s = tl.schedule(tl.op("def f(A: f32[M, K]) -> B:\n    B[m, k] = A[m, k] * 2.0"), M=3, K=8)
    refuse(s, lambda: s["B"].rfactor("k"), "rfactor(B, k)", "not a reduction")


def test_rfactor_refuses_a_loop_over_an_output_index():
    s = tl.schedule(tl.op(ROWSUM), M=3, K=8)
    refuse(s, lambda: s["B"].rfactor("m"), "rfactor(B, m)", "not a reduction loop", "reduction loops: k")


def test_rfactor_refuses_a_loop_it_does_not_have():
    s = tl.schedule(tl.op(ROWSUM), M=3, K=8)
    refuse(s, lambda: s["B"].rfactor("k_o"), "rfactor(B, k_o)", "no loop 'k_o'")


def test_rfactor_refuses_an_axis_already_parallel():
    """The partial's rfactor axis is a loop over an output index (it may run in parallel): no second rfactor."""
    s = tl.schedule(tl.op(ROWSUM), M=3, K=64)
    s["B"].split("k", 8)
    s["B"].rfactor("k_o")
    s["B_rf"].parallel("k_o")
    refuse(s, lambda: s["B_rf"].rfactor("k_o"), "rfactor(B_rf, k_o)", "not a reduction loop")
    refuse(s, lambda: s["B"].parallel("k_o"), "parallel(B, k_o)", "reduction loop")


def test_rfactor_refuses_a_stage_whose_loops_are_scheduled():
    s = tl.schedule(tl.op(ROWSUM), M=3, K=64)
    s["B"].split("k", 8)
    s["B"].unroll("k_i")
    refuse(s, lambda: s["B"].rfactor("k_o"), "rfactor(B, k_o)", "unroll(B, k_i)", "right after splitting")


def test_rfactor_refuses_fused_reduction_loops():
    op = tl.op("def f(A: f32[M, K, L]) -> B:\n    B[m] += A[m, k, l]")
    s = tl.schedule(op, M=2, K=3, L=4)
    s["B"].fuse("k", "l")
    refuse(s, lambda: s["B"].rfactor("k_l"), "rfactor(B, k_l)", "k is k_l//4", "split, not fused")


def test_rfactor_refuses_a_split_tail_on_fused_loops():
    """A random program of the schedule fuzzer (an AssertionError before): `j` tiled by 3 then 7 over one column
    guards its tail on `j_o_o*7 + j_o_i`; fused with the rows' loop, that guard reads `j_o_o*7 + i_o_o_j_o_i%7`,
    which the partial stage cannot take as a bound."""
    op = tl.op("def prog(X: u16[N]) -> T0:\n    T0[i, j] += (X[N - 1] + X[N - j - 1]) * X[r] where i in 0:1")
    s = tl.schedule(op, N=1)
    s["T0"].tile("j", "i", 3, 4)
    s["T0"].tile("j_o", "i_o", 7, 9)
    s["T0"].fuse("i_o_o", "j_o_i")
    refuse(s, lambda: s["T0"].rfactor("r"), "rfactor(T0, r)", "tail guard", "rfactor before fusing")


def test_rfactor_refuses_a_cached_stage_and_a_taken_name():
    s = tl.schedule(tl.op(ROWSUM), M=3, K=64)
    s["B"].split("k", 8)
    s["B"].cache_write("m")
    refuse(s, lambda: s["B"].rfactor("k_o"), "rfactor(B, k_o)", "cache_write")
    s = tl.schedule(tl.op(ROWSUM), M=3, K=64)
    s["B"].split("k", 8)
    for name in ("A", "B", "K", "1x"):
        refuse(s, lambda name=name: s["B"].rfactor("k_o", partial=name), "rfactor(B, k_o)", f"{name!r}", "partial=")


def test_rfactor_refuses_a_stage_computed_inside_another():
    op = tl.op("def g(A: f32[M, K]) -> Y:\n    T[m] += A[m, k]\n    Y[m] = T[m] * 2.0")
    s = tl.schedule(op, M=4, K=16)
    s["T"].split("k", 4)
    s["T"].compute_at(s["Y"], "m")
    refuse(s, lambda: s["T"].rfactor("k_o"), "rfactor(T, k_o)", "at the root")


def test_rfactor_from_json_lacks_a_field():
    from tensorlang.primitives import RFactor, from_json
    p = RFactor("B", "k_o", "B_rf")
    assert from_json(p.to_json()) == p
    with pytest.raises(tl.ScheduleError, match="rfactor lacks partial"):
        from_json({"prim": "rfactor", "stage": "B", "axis": "k_o"})


# ---- nested parallelism ---------------------------------------------------------------------------------
def test_fused_parallel_loop_runs_both_loops_on_the_threads():
    """Parallel over two loops: fuse them, then parallelise the fused loop (one parallel range of M*N)."""
    op = tl.op("def f(A: f32[M, N, K]) -> B:\n    B[m, n] max= A[m, n, k]")
    s = tl.schedule(op, M=3, N=5, K=7)
    f = s["B"].fuse("m", "n")
    s["B"].parallel(f)
    assert "for m_n in 0:15:  # parallel" in s.lower()
    a = np.random.default_rng(6).random((3, 5, 7)).astype(np.float32)
    _check(tl.build(s)(a), a, "max")


def test_two_parallel_loops_in_one_stage_are_refused_with_the_fuse_to_use():
    s = tl.schedule(tl.op("def f(A: f32[M, N]) -> B:\n    B[m, n] = A[m, n] * 2.0"), M=4, N=6)
    s["B"].parallel("m")
    refuse(s, lambda: s["B"].parallel("n"), "parallel(B, n)", "m is parallel already", "fuse")


def test_rfactor_then_fused_parallel_rows_and_partials():
    """A few rows: the partial's rows and reduction blocks fused into one parallel loop."""
    s = tl.schedule(tl.op(ROWSUM), M=2, K=4000)
    s["B"].split("k", 500)
    s["B"].rfactor("k_o")
    f = s["B_rf"].fuse("m", "k_o")
    s["B_rf"].parallel(f)
    assert "for m_k_o in 0:16:  # parallel" in s.lower()
    a = np.random.default_rng(7).random((2, 4000)).astype(np.float32)
    _check(tl.build(s)(a), a, "+")


def test_rfactor_of_a_scatter_is_refused_with_the_parallel_form_named():
    op = tl.op("def hist(I: i32[M, N]) -> H:\n    H[b := I[m, n] % 8] += 1 where b in 0:8\n")
    s = tl.schedule(op, M=4, N=64)
    s["H"].split("n", 16)
    with pytest.raises(tl.ScheduleError, match=r"rfactor\(H, n_o\): H is a scatter .* `parallel` on one of its "
                                               r"loops already gives each iteration a private copy"):
        s["H"].rfactor("n_o")


def test_rfactor_keeps_a_boundary_read():
    op = tl.op("def f(I: f32[H, W]) -> S:\n"
               "    S[z] += I[clamp(y - 1, 0, H - 1), x] where z in 0:1, y in 0:H, x in 0:W\n")
    s = tl.schedule(op, H=24, W=40)
    s["S"].split("y", 8)
    s["S"].rfactor("y_o")
    s["S_rf"].parallel("y_o")
    I = np.random.default_rng(3).random((24, 40), dtype=np.float32)
    want = I[np.clip(np.arange(24) - 1, 0, 23)].astype(np.float64).sum()
    assert_close(tl.build(s)(I), np.array([want], np.float32), 24 * 40)


def test_rfactor_refuses_a_tail_that_a_boundary_read_cannot_take():
    op = tl.op("def box_sym(A: f32[M, N]) -> B:\n"
               "    B[m, n] += A[m, min(max(n + r - 1, -n - r), 2*N - 1 - max(n + r - 1, -n - r))] "
               "where r in 0:3, n in 0:N\n")
    s = tl.schedule(op, M=2, N=4)
    s["B"].split("r", 8, outer="r_o1", inner="r_i2")
    with pytest.raises(tl.ScheduleError, match=r"rfactor\(B, r_o1\): the partial stage B_rf cannot read as B does "
                                               r"over the split's tail .*split the reduction by a factor that divides"):
        s["B"].rfactor("r_o1")
    assert len(s.primitives) == 1  # the schedule is left as it was
