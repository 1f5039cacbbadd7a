"""Caches and packing: cache_write (a register or L1 tile of the output) and cache_read (a copy of an input,
optionally in a packed layout). Each keeps the result identical to numpy.

Sizes are small primes that the tiles do not divide. Every schedule is lowered with ``strict=True`` (a guard the
bounds check cannot prove is an internal error) before it is built and run; the helpers (`new`, `case`, `run`,
`refuse`) are in tests/support/schedule_checks.py, and every case registered here is also rebuilt from its JSON and
its printed Python by test_schedule_roundtrip.py.

Run: ``.venv/bin/pytest tests/schedule/test_schedule_caches.py -q``
"""
from __future__ import annotations

import numpy as np
from oracle import assert_close
from schedule_cases import encloses, loop_order
from schedule_checks import CASES, case, new, run

import tensorlang as tl


# =====================================================================================================
# cache_write
# =====================================================================================================
@case("cw_register_tile")
def _cw_register_tile():
    s = new("mm", M=13, N=37, K=19)
    s["C"].tile("m", "n", 4, 16)
    s["C"].reorder("m_o", "n_o", "k", "m_i", "n_i")
    s["C"].cache_write("n_o")
    s["C"].unroll("m_i")
    s["C"].vectorize("n_i")
    return s


def test_cache_write_register_tile_reduction_inside():
    text, _ = run(CASES["cw_register_tile"]())
    assert "allocate C_local: f32[4, 16]" in text
    assert "C_local[m_i, n_i] = 0f" in text
    assert "C[m, n] = C_local[m_i, n_i]" in text                       # written back, not accumulated
    assert "C[m, n] = 0f" not in text                                   # no init of C itself
    assert encloses(text, "n_o", "k") and encloses(text, "k", "n_i")


@case("cw_reduction_outside")
def _cw_reduction_outside():
    s = new("mm", M=13, N=37, K=19)
    s["C"].tile("m", "n", 4, 16)
    s["C"].reorder("m_o", "k", "n_o", "m_i", "n_i")
    s["C"].cache_write("n_o")
    return s


def test_cache_write_reduction_loop_outside_cached_level():
    text, _ = run(CASES["cw_reduction_outside"]())
    assert "C[m, n] = 0f" not in text                                   # no separate init pass over C
    assert "if k == 0:" in text                                          # the first k writes the tile back
    assert "C[m, n] = C_local[m_i, n_i]" in text
    assert "C[m, n] = C[m, n] + C_local[m_i, n_i]" in text             # later ones accumulate
    assert encloses(text, "k", "n_o")


@case("cw_two_reductions_outside")
def _cw_two_reductions_outside():
    s = new("mm", M=13, N=37, K=19)
    s["C"].tile("m", "n", 4, 16)
    s["C"].split("k", 4)
    s["C"].reorder("k_o", "m_o", "k_i", "n_o", "m_i", "n_i")
    s["C"].unroll("k_i")
    s["C"].cache_write("n_o")
    return s


def test_cache_write_init_folded_into_first_write_back_of_every_outer_reduction_loop():
    # k split 4 + 4 + 4 + 4 + 3 (a tail), both parts outside the tile, the inner one unrolled: the write-back that
    # does not read C is the one where both are 0, and every element of C is written there
    text, _ = run(CASES["cw_two_reductions_outside"]())
    assert "C[m, n] = 0f" not in text
    assert "if k_o == 0 and k_i == 0:" in text
    run(CASES["cw_two_reductions_outside"](), seed=3)


@case("cw_scaled_sum")
def _cw_scaled_sum():
    s = new("mms", M=13, N=37, K=19)
    s["C"].tile("m", "n", 4, 16)
    s["C"].split("k", 8)
    s["C"].reorder("m_o", "k_o", "n_o", "k_i", "m_i", "n_i")
    s["C"].cache_write("n_o")
    s["C"].vectorize("n_i")
    return s


def test_cache_write_scales_a_sum_once_as_it_writes_the_tile_back():
    # C += A * 0.125 * B: the tile accumulates A * B (one fused multiply-add per element) and the constant
    # multiplies each write-back, the first (which stores) and the later ones (which add), k split with a tail
    text, _ = run(CASES["cw_scaled_sum"]())
    assert "C_local[m_i, n_i] = C_local[m_i, n_i] + A[m, k]*B[k, n]" in text
    assert "C[m, n] = C_local[m_i, n_i]*0.125f" in text
    assert "C[m, n] = C[m, n] + C_local[m_i, n_i]*0.125f" in text
    # without a register tile the sum is left as written
    s = new("mms", M=13, N=37, K=19)
    text, _ = run(s)
    assert "C[m, n] = C[m, n] + A[m, k]*0.125f*B[k, n]" in text


@case("cw_max_reduction_outside")
def _cw_max_reduction_outside():
    s = new("rowmaxi", M=21, K=10)
    s["B"].split("m", 8)
    s["B"].reorder("k", "m_o", "m_i")
    s["B"].cache_write("m_o")
    return s


def test_cache_write_init_folded_for_a_max_reduction():
    # the local tile starts at the identity (INT_MIN); the first write-back stores it as it is
    text, _ = run(CASES["cw_max_reduction_outside"]())
    assert "if k == 0:" in text and "B[m] = B_local[m_i]" in text
    assert "B[m] = max(B[m], B_local[m_i])" in text


@case("cw_innermost")
def _cw_innermost():
    s = new("mm64", M=5, N=7, K=11)
    s["C"].cache_write("k")
    return s


def test_cache_write_at_the_reduction_loop():
    text, _ = run(CASES["cw_innermost"]())
    assert "allocate C_local: f64[1, 1]" in text
    assert "C[m, n] = C[m, n] + C_local[0, 0]" in text


@case("cw_pure")
def _cw_pure():
    s = new("tri", M=5, N=7)
    s["B"].tile("j", "i", 4, 2)
    s["B"].cache_write("i_o")
    s["B"].vectorize("i_i")
    return s


def test_cache_write_pure_stage():
    text, _ = run(CASES["cw_pure"]())
    assert "allocate B_local: i32[4, 2]" in text
    assert "B_local[j_i, i_i] = A[i, j]*3 + 1" in text
    assert "B[j, i] = B_local[j_i, i_i]" in text


@case("cw_f64_outermost")
def _cw_f64_outermost():
    s = new("mm64", M=5, N=7, K=11)
    s["C"].split("m", 2)
    s["C"].cache_write("m_o")
    return s


def test_cache_write_outer_loop_f64():
    text, _ = run(CASES["cw_f64_outermost"]())
    assert "allocate C_local: f64[2, 7]" in text


# =====================================================================================================
# cache_read
# =====================================================================================================
def _gemm(prog="mm", M=13, N=37, K=19):
    s = new(prog, M=M, N=N, K=K)
    s["C"].tile("m", "n", 4, 16)
    s["C"].split("k", 8)
    s["C"].reorder("m_o", "n_o", "k_o", "k_i", "m_i", "n_i")
    return s


@case("cr_pack_B_panels")
def _cr_pack_B_panels():
    s = new("mm", M=13, N=37, K=19)
    s["C"].tile("m", "n", 4, 16)
    s["C"].reorder("m_o", "n_o", "k", "m_i", "n_i")
    s["C"].cache_read("B", "m_o", layout=((1, 16), (0, 0), (1, 0)))   # every panel of B the row block uses
    return s


def test_cache_read_pack_B_panels():
    text, _ = run(CASES["cr_pack_B_panels"]())
    # the copy runs along B's rows (row k of every panel, then row k + 1), its stores 16 floats at a time
    assert loop_order(text).index("B_C_local_1") < loop_order(text).index("B_C_local_0")
    assert encloses(text, "B_C_local_0", "B_C_local_2")
    assert "allocate B_C_local: f32[3, 19, 16]" in text                # 48 columns in panels of 16
    # copied in the panel order: B_local[n // 16, k, n % 16] = B[k, n], no index divided
    assert "B_C_local[B_C_local_0, B_C_local_1, B_C_local_2] = B[B_C_local_1, B_C_local_0*16 + B_C_local_2]" in text
    assert "C[m, n] = C[m, n] + A[m, k]*B_C_local[n_o, k, n_i]" in text          # panel n_o, row k, lane n_i
    assert encloses(text, "m_o", "B_C_local_1") and not encloses(text, "n_o", "B_C_local_1")


@case("cr_pack_A_B_full")
def _cr_pack_A_B_full():
    s = _gemm()
    s["C"].cache_read("B", "k_o", layout=((1, 16), (0, 0), (1, 0)))
    s["C"].cache_read("A", "k_o", layout=((1, 0), (0, 0)))            # A's tile transposed
    s["C"].cache_write("n_o")
    s["C"].unroll("m_i")
    s["C"].vectorize("n_i")
    return s


def test_cache_read_both_operands_with_layouts():
    text, _ = run(CASES["cr_pack_A_B_full"]())
    assert "allocate A_C_local: f32[8, 4]" in text and "allocate B_C_local: f32[1, 8, 16]" in text
    assert "A_C_local[A_C_local_0, A_C_local_1] = A[" in text
    assert "A_C_local[k_i, m_i]" in text
    assert encloses(text, "k_o", "A_C_local_0") and encloses(text, "k_o", "B_C_local_0")


@case("cr_copy_split_across_threads")
def _cr_copy_split_across_threads():
    s = new("mm", M=13, N=37, K=19)
    s["C"].split("k", 8)
    s["C"].split("m", 4)
    s["C"].reorder("k_o", "m_o", "n", "k_i", "m_i")
    s["C"].cache_read("B", "k_o", layout=((1, 16), (0, 0), (1, 0)))
    s["C"].cache_read("A", "m_o")
    s["C"].parallel("m_o")
    return s


def test_cache_read_copy_outside_the_parallel_loop_is_split_across_threads():
    """B's copy at k_o runs before the parallel loop m_o: its outer loop (8 rows of B) is parallel too, rather
    than one thread copying while the others wait; A's copy, inside the parallel loop, stays serial."""
    text, _ = run(CASES["cr_copy_split_across_threads"]())
    assert "for B_C_local_1 in 0:8:  # parallel" in text and "for m_o in 0:4:  # parallel" in text
    assert "for A_C_local_0 in 0:4:\n" in text and "A_C_local_0 in 0:4:  # parallel" not in text


@case("cr_pack_f64")
def _cr_pack_f64():
    s = _gemm("mm64", M=7, N=19, K=11)
    s["C"].cache_read("B", "n_o", layout=((1, 4), (0, 0), (1, 0)))
    return s


def test_cache_read_f64_blocked():
    text, _ = run(CASES["cr_pack_f64"]())
    assert "allocate B_C_local: f64[4, 16, 4]" in text


@case("cr_no_layout")
def _cr_no_layout():
    s = new("mm", M=13, N=37, K=19)
    s["C"].split("m", 4)
    s["C"].cache_read("A", "m_o")
    return s


def test_cache_read_without_layout():
    text, _ = run(CASES["cr_no_layout"]())
    assert "allocate A_C_local: f32[4, 19]" in text
    assert "A_C_local[A_C_local_0, A_C_local_1] = A[A_C_local_0 + m_o*4, A_C_local_1] (0 outside)" in text
    assert "A_C_local[m_i, k]" in text


def test_cache_read_copies_inner_blocks_without_guards():
    """A copy that may read outside its tensor (the last block of 4 rows of 13) is versioned: the blocks wholly
    inside copy without a guard per element (a guarded read is a gather in vector code), the last one with it."""
    text, _ = run(CASES["cr_no_layout"]())
    fast = "A_C_local[A_C_local_0, A_C_local_1] = A[A_C_local_0 + m_o*4, A_C_local_1]\n"
    assert "    if m_o*4 <= 9:\n" in text and fast in text and text.index(fast) < text.index("(0 outside)")
    # a start that may fall below 0 is tested too
    padded, _ = run(CASES["cr_padded"]())
    assert "if i_o*4 - 1 >= 0 and i_o*4 - 1 <= 7:\n" in padded
    assert "A_B_local[A_B_local_0] = A[A_B_local_0 + i_o*4 - 1]\n" in padded
    # not versioned: a copy provably inside, and one whose buffer is wider than the tensor (48 columns of 37)
    inside, _ = run(CASES["cr_intermediate"]())
    assert "e_Y_local_1] = e[e_Y_local_0 + n, e_Y_local_1]\n" in inside and "if " not in inside
    wider, _ = run(CASES["cr_pack_B_panels"]())
    assert wider.count("B_C_local_2] = B[") == 1 and "B_C_local_2] (0 outside)" in wider


@case("cr_padded")
def _cr_padded():
    s = new("pad1d", N=13)
    s["B"].split("i", 4)
    s["B"].cache_read("A", "i_o")
    return s


def test_cache_read_padded_input():
    text, _ = run(CASES["cr_padded"]())
    assert "allocate A_B_local: f32[6]" in text
    assert "A_B_local[A_B_local_0] = A[A_B_local_0 + i_o*4 - 1] (0 outside)" in text
    assert "B[i] = A_B_local[i_i] + A_B_local[i_i + 2]" in text


@case("cr_padded_blocked")
def _cr_padded_blocked():
    s = new("pad1d", N=13)
    s["B"].split("i", 4)
    s["B"].cache_read("A", "i_o", layout=((0, 3), (0, 0)))
    s["B"].vectorize("i_i")
    return s


def test_cache_read_padded_input_blocked():
    text, _ = run(CASES["cr_padded_blocked"]())
    assert "allocate A_B_local: f32[2, 3]" in text
    assert "A_B_local[A_B_local_0, A_B_local_1] = A[A_B_local_0*3 + A_B_local_1 + i_o*4 - 1] (0 outside)" in text


@case("cr_intermediate")
def _cr_intermediate():
    s = new("softmax", N=5, D=13)
    s["Y"].cache_read("e", "n")
    return s


def test_cache_read_intermediate_stage():
    text, _ = run(CASES["cr_intermediate"]())
    assert "allocate e_Y_local: f32[1, 13]" in text and "e_Y_local[0, d]" in text


@case("cr_int_in_attached")
def _cr_int_in_attached():
    s = new("blur_i32", N=17)
    s["B"].split("i", 4)
    s["P"].compute_at(s["B"], "i_o")
    s["B"].cache_read("P", "i_o")
    return s


def test_cache_read_int_stage_computed_at_the_same_loop():
    s = CASES["cr_int_in_attached"]()
    text = s.lower()
    assert "allocate P_B_local: i32[6]" in text
    order = loop_order(text)
    assert order.index("P.i") < order.index("P_B_local_0"), text      # copied after it is computed
    run(s)


# =====================================================================================================
# corner cases the schedule fuzzers reach
# =====================================================================================================
def test_cache_write_with_a_reduction_tail_does_not_accumulate_the_tail():
    op = tl.op("def f(A: f32[M, K]) -> B:\n    B[m] += A[m, k] + f32(k)")
    s = tl.schedule(op, M=3, K=13)
    s["B"].split("k", 4)
    s["B"].cache_read("A", "m")
    s["B"].cache_write("m")
    A = np.random.default_rng(0).standard_normal((3, 13)).astype(np.float32)
    expected = (A.astype(np.float64) + np.arange(13)).sum(axis=1).astype(np.float32)
    np.testing.assert_allclose(tl.build(s)(A), expected, rtol=1e-5)


def test_vectorized_reduction_into_a_padded_cache_write_element_builds():
    """A vectorized reduction with a tail that updates one element of a cache_write tile builds and is right: a
    lane-invariant guarded read of that element is one scalar load, not a gather of one address (which
    llvm.vector.reduce.fadd cannot take as its accumulator). The region analysis now proves this schedule's tile
    index (`i_j_o // 2`), so the padded read itself is left to the fuzzers' random schedules."""
    from tensorlang import schedules
    w = schedules.get("batch_matmul")
    s = tl.schedule(tl.op(w.source), BS=6, M=4, K=6, N=6)
    s["C"].split("j", 5, outer="j_o", inner="j_i")
    s["C"].split("j_i", 3, outer="j_i_o", inner="j_i_i")
    s["C"].split("k", 4, outer="k_o", inner="k_i")
    s["C"].reorder("j_i_o", "k_o", "j_i_i", "k_i")
    s["C"].vectorize("k_i")
    s["C"].fuse("i", "j_o", fused="i_j_o")
    s["C"].cache_write("b")
    A, B = w.make_inputs(s.sizes, np.random.default_rng(0))
    assert_close(tl.build(s)(A, B), w.reference(A, B, **s.sizes), 6)


def test_cache_write_below_a_split_tail_is_guarded_where_the_index_is_bound():
    """A pure loop split with a tail outside a cache_write tile: the overshooting index is guarded at its let (so
    the tile is never computed for it), and strict lowering proves the write-back in range."""
    op = tl.op("def f(A: f32[J], B: f32[R]) -> C:\n    C[i, j] += A[j] - B[r] where i in 0:1\n")
    s = tl.schedule(op, J=5, R=3)
    s["C"].cache_write("j")
    s["C"].split("i", 2)
    text = s.lower()
    assert text.index("if i <= 0") < text.index("allocate C_local")
    s.lowered(strict=True)
    A, B = np.arange(5, dtype=np.float32), np.arange(3, dtype=np.float32)
    assert_close(tl.build(s)(A, B), (A[None, :] * 3 - B.sum())[:1], 3)


def test_a_split_fused_back_indexes_its_tile_affinely():
    """split then fuse gives j = f%2 + f//2*2, which the simplifier folds to f: the tile index is provably in range."""
    op = tl.op("def matmul(A: f32[M, K], B: f32[K, N]) -> C:\n    C[i, j] += A[i, k] * B[k, j]\n")
    s = tl.schedule(op, M=3, K=4, N=5)
    s["C"].split("j", 2, outer="j_o", inner="j_i")
    s["C"].fuse("j_o", "j_i", fused="f")
    s["C"].cache_write("i")
    assert "j = f\n" in s.lower()
    s.lowered(strict=True)
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((3, 4), dtype=np.float32), rng.standard_normal((4, 5), dtype=np.float32)
    assert_close(tl.build(s)(A, B), A @ B, 4)
