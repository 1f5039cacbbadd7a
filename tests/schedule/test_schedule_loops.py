"""Loop primitives: split, tile, reorder and fuse. Each keeps the result identical to numpy and shows in the loop
IR what it did.

Sizes are small primes that the tiles do not divide. Every schedule is lowered with ``strict=True`` (a guard the
bounds check cannot prove is an internal error) before it is built and run; the helpers (`new`, `case`, `run`,
`refuse`) are in tests/support/schedule_checks.py, and every case registered here is also rebuilt from its JSON and
its printed Python by test_schedule_roundtrip.py.

Run: ``.venv/bin/pytest tests/schedule/test_schedule_loops.py -q``
"""
from __future__ import annotations

import pytest
from schedule_cases import encloses, loop_header, loop_order
from schedule_checks import CASES, case, default_text, new, run

import tensorlang as tl


# =====================================================================================================
# split
# =====================================================================================================
@case("split_tail")
def _split_tail():
    s = new("scale", N=67)
    assert s["B"].split("i", 8) == ("i_o", "i_i")
    return s


def test_split_with_tail():
    text, _ = run(CASES["split_tail"]())
    assert loop_header(text, "i_o") == "for i_o in 0:9:"      # ceil(67 / 8)
    assert loop_header(text, "i_i") == "for i_i in 0:8:"
    assert "i = i_i + i_o*8" in text
    assert "if i <= 66:" in text                               # the tail is guarded
    assert encloses(text, "i_o", "i_i")


@case("split_divides")
def _split_divides():
    s = new("scale", N=64)
    s["B"].split("i", 16)
    return s


def test_split_that_divides_needs_no_guard():
    text, _ = run(CASES["split_divides"]())
    assert loop_header(text, "i_o") == "for i_o in 0:4:"
    assert "if " not in text


@case("split_factor_1")
def _split_factor_1():
    s = new("scalei", N=13)
    s["B"].split("i", 1)
    return s


def test_split_factor_one():
    text, _ = run(CASES["split_factor_1"]())
    assert loop_header(text, "i_o") == "for i_o in 0:13:"
    assert loop_header(text, "i_i") == "for i_i in 0:1:"
    assert "i = i_i + i_o" in text
    assert "if " not in text


@case("split_factor_gt_extent")
def _split_factor_gt_extent():
    s = new("scale64", N=13)
    s["B"].split("i", 16)
    return s


def test_split_factor_larger_than_extent():
    text, _ = run(CASES["split_factor_gt_extent"]())
    assert loop_header(text, "i_o") == "for i_o in 0:1:"
    # the 3 tail iterations of the split would only fail the guard: lowering drops them (tensorlang/tighten.py)
    assert loop_header(text, "i_i") == "for i_i in 0:13:"
    assert "if i <= 12:" in text


@case("split_custom_names")
def _split_custom_names():
    s = new("scale", N=23)
    assert s["B"].split("i", 5, outer="tile", inner="lane") == ("tile", "lane")
    return s


def test_split_custom_names():
    s = CASES["split_custom_names"]()
    assert s["B"].loops() == ["tile", "lane"]
    text, _ = run(s)
    assert "i = lane + tile*5" in text


@case("split_of_split_outer")
def _split_of_split_outer():
    s = new("scale", N=67)
    s["B"].split("i", 8)
    s["B"].split("i_o", 3)
    return s


def test_split_of_split_outer():
    s = CASES["split_of_split_outer"]()
    assert s["B"].loops() == ["i_o_o", "i_o_i", "i_i"]
    text, _ = run(s)
    assert loop_header(text, "i_o_o") == "for i_o_o in 0:3:"   # ceil(9 / 3)
    assert loop_header(text, "i_o_i") == "for i_o_i in 0:3:"
    assert "i = i_i + i_o_i*8 + i_o_o*24" in text
    assert "if i <= 66:" in text


@case("split_of_split_inner")
def _split_of_split_inner():
    s = new("scale", N=67)
    s["B"].split("i", 8)
    s["B"].split("i_i", 3)                                     # 3 does not divide 8: i_i overshoots to 8
    return s


def test_split_of_split_inner_pure():
    s = CASES["split_of_split_inner"]()
    assert s["B"].loops() == ["i_o", "i_i_o", "i_i_i"]
    text, _ = run(s)
    assert loop_header(text, "i_i_o") == "for i_i_o in 0:3:"
    assert "i = i_i_i + i_i_o*3 + i_o*8" in text


@case("split_reduction")
def _split_reduction():
    s = new("mm", M=5, N=7, K=11)
    s["C"].split("k", 4)
    return s


def test_split_reduction_loop():
    text, _ = run(CASES["split_reduction"]())
    assert loop_order(text) == ["m", "n", "k_o", "k_i"]
    assert "k = k_i + k_o*4" in text
    assert "if k <= 10:" in text
    lines = [ln.strip() for ln in text.splitlines()]
    assert lines.index("C[m, n] = 0f") == lines.index("for k_o in 0:3:") - 1   # initialised just before


@case("split_reduction_lo")
def _split_reduction_lo():
    s = new("rowsum_lo", M=3, K=7, L=4)
    s["B"].split("k", 2)
    return s


def test_split_reduction_loop_that_starts_above_zero():
    text, _ = run(CASES["split_reduction_lo"]())
    assert loop_header(text, "k_o") == "for k_o in 0:3:"       # k in 2:7 has 5 values
    assert "k = k_i + k_o*2 + 2" in text
    assert "if k <= 6:" in text


@case("split_of_split_reduction_divides")
def _split_of_split_reduction_divides():
    s = new("mm", M=5, N=7, K=11)
    s["C"].split("k", 8)
    s["C"].split("k_i", 4)
    return s


def test_split_of_split_reduction_inner_divides():
    text, _ = run(CASES["split_of_split_reduction_divides"]())
    assert "k = k_i_i + k_i_o*4 + k_o*8" in text


@case("split_of_split_reduction_tail")
def _split_of_split_reduction_tail():
    s = new("rowsum", M=3, K=13)
    s["B"].split("k", 4)
    s["B"].split("k_i", 3)          # k_i in 0:4 becomes k_i_o*3 + k_i_i in 0:6: k_i = 4, 5 repeat k
    return s


def test_split_of_split_reduction_inner_tail():
    run(CASES["split_of_split_reduction_tail"]())


@case("split_i32_f64")
def _split_mmi():
    s = new("mmi", M=7, N=11, K=13)
    s["C"].split("n", 4)
    s["C"].split("k", 5)
    return s


def test_split_int_program():
    text, _ = run(CASES["split_i32_f64"]())
    assert "n = n_i + n_o*4" in text and "k = k_i + k_o*5" in text


# =====================================================================================================
# tile
# =====================================================================================================
@case("tile_f64")
def _tile_f64():
    s = new("mm64", M=13, N=37, K=5)
    assert s["C"].tile("m", "n", 4, 8) == ("m_o", "n_o", "m_i", "n_i")
    return s


def test_tile():
    s = CASES["tile_f64"]()
    assert s["C"].loops() == ["m_o", "n_o", "m_i", "n_i", "k"]
    text, _ = run(s)
    assert loop_order(text) == ["m_o", "n_o", "m_i", "n_i", "k"]
    assert loop_header(text, "m_o") == "for m_o in 0:4:" and loop_header(text, "n_o") == "for n_o in 0:5:"
    assert "if m <= 12:" in text and "if n <= 36:" in text


@case("tile_i32")
def _tile_i32():
    s = new("mmi", M=7, N=11, K=13)
    s["C"].tile("n", "m", 5, 3)
    return s


def test_tile_int_and_swapped_axes():
    s = CASES["tile_i32"]()
    assert s["C"].loops() == ["n_o", "m_o", "n_i", "m_i", "k"]
    text, _ = run(s)
    assert encloses(text, "n_i", "m_i")


# =====================================================================================================
# reorder
# =====================================================================================================
@case("reorder_pure")
def _reorder_pure():
    s = new("tr", M=5, N=7)
    s["B"].reorder("i", "j")
    return s


def test_reorder_pure_loops():
    s = CASES["reorder_pure"]()
    assert s["B"].loops() == ["i", "j"]
    text, _ = run(s)
    assert loop_order(text) == ["i", "j"]
    assert default_text(s) != text and loop_order(default_text(s)) == ["j", "i"]


@case("reorder_reduction_out")
def _reorder_reduction_out():
    s = new("mm", M=5, N=7, K=11)
    s["C"].reorder("k", "m")
    return s


def test_reorder_reduction_outside_output_loop_makes_init_nest():
    s = CASES["reorder_reduction_out"]()
    assert s["C"].loops() == ["k", "n", "m"]
    text, _ = run(s)
    assert loop_order(text) == ["n", "m", "k", "n", "m"]          # init nest, then the update nest
    lines = [ln.strip() for ln in text.splitlines()]
    init, k_loop = lines.index("C[m, n] = 0f"), lines.index("for k in 0:11:")
    assert init < k_loop
    assert not encloses(text, "k", "k") and encloses(text, "k", "m")


@case("reorder_three")
def _reorder_three():
    s = new("mm64", M=5, N=7, K=11)
    s["C"].reorder("n", "k", "m")
    return s


def test_reorder_three_loops():
    s = CASES["reorder_three"]()
    assert s["C"].loops() == ["n", "k", "m"]
    text, _ = run(s)
    assert loop_order(text)[-3:] == ["n", "k", "m"]
    assert [ln.strip() for ln in text.splitlines()].count("C[m, n] = 0") == 1      # f64 zero, own nest


@case("reorder_int_max_vec")
def _reorder_int_max_vec():
    s = new("rowmaxi", M=13, K=7)
    s["B"].reorder("k", "m")
    s["B"].split("m", 8)
    s["B"].vectorize("m_i")
    return s


def test_reorder_int_max_reduction_outside_with_vectorized_output():
    text, _ = run(CASES["reorder_int_max_vec"]())
    assert "B[m] = -2147483648" in text                            # max= starts from the i32 minimum
    assert encloses(text, "k", "m_i")
    assert loop_header(text, "m_i") == "for m_i in 0:8:  # vectorized"


@case("reorder_split_loops")
def _reorder_split_loops():
    s = new("mmi", M=7, N=11, K=13)
    s["C"].tile("m", "n", 4, 4)
    s["C"].reorder("m_o", "n_o", "k", "m_i", "n_i")
    return s


def test_reorder_split_loops_reduction_between():
    text, _ = run(CASES["reorder_split_loops"]())
    assert loop_order(text)[-5:] == ["m_o", "n_o", "k", "m_i", "n_i"]
    assert "C[m, n] = 0" in text


# =====================================================================================================
# fuse
# =====================================================================================================
@case("fuse_split_vec")
def _fuse_split_vec():
    s = new("mm", M=5, N=7, K=11)
    assert s["C"].fuse("m", "n") == "m_n"
    s["C"].split("m_n", 8)
    s["C"].vectorize("m_n_i")
    return s


def test_fuse_then_split_and_vectorize():
    s = CASES["fuse_split_vec"]()
    assert s["C"].loops() == ["m_n_o", "m_n_i", "k"]
    text, _ = run(s)
    assert loop_header(text, "m_n_o") == "for m_n_o in 0:5:"      # ceil(35 / 8)
    assert loop_header(text, "m_n_i") == "for m_n_i in 0:8:  # vectorized"
    assert "m = (m_n_i + m_n_o*8)//7" in text and "n = (m_n_i + m_n_o*8)%7" in text


@case("fuse_plain")
def _fuse_plain():
    s = new("tri", M=5, N=7)
    assert s["B"].fuse("j", "i", fused="ji") == "ji"
    return s


def test_fuse_custom_name_int():
    text, _ = run(CASES["fuse_plain"]())
    assert loop_order(text) == ["ji"]
    assert loop_header(text, "ji") == "for ji in 0:35:"
    assert "j = ji//5" in text and "i = ji%5" in text


@case("fuse_reduction_lo")
def _fuse_reduction_lo():
    s = new("rowsum_lo", M=3, K=5, L=7)
    s["B"].fuse("k", "l")
    s["B"].split("k_l", 4)
    return s


def test_fuse_reduction_loops_that_start_above_zero():
    text, _ = run(CASES["fuse_reduction_lo"]())
    assert loop_header(text, "k_l_o") == "for k_l_o in 0:5:"      # 3 * 6 = 18 values, ceil(18 / 4)
    assert "k = (k_l_i + k_l_o*4)//6 + 2" in text and "l = (k_l_i + k_l_o*4)%6 + 1" in text


# =====================================================================================================
# corner cases the schedule fuzzers reach
# =====================================================================================================
def test_tile_is_atomic():
    s = new("mm", M=5, N=7, K=11)
    s["C"].split("n", 2)   # the loop n no longer exists: tile's second split fails
    before = list(s.primitives)
    with pytest.raises(tl.ScheduleError):
        s["C"].tile("m", "n", 2, 2)
    assert s.primitives == before and "m_o" not in s.lower()
