"""Schedule primitives: each keeps the result identical to numpy and shows in the loop IR what it did; each
illegal use is a ScheduleError that names the primitive, the stage and the loop, says what would be legal, and
leaves the schedule unchanged; every schedule round-trips through JSON and through its printed Python.

Sizes are small primes that the tiles do not divide. Every schedule is lowered with ``strict=True`` (a guard
the bounds check cannot prove is an internal error) before it is built and run.

Every schedule this module builds comes from `new()`, which keeps it in `BUILT`; the named schedules of the
primitive tests come from builders registered in `CASES`, so that the round-trip test can rebuild each one in
whatever process (pytest-xdist worker) runs it. Known bugs are `xfail(strict=True)` tests whose reason gives
the bug.

Run: ``.venv/bin/pytest tests/schedule/test_schedule.py -q``
"""
from __future__ import annotations

import json
import re
import zlib

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.target import host_target
from oracle import assert_close
from schedule_cases import PROGRAMS, encloses, loop_header, loop_order, make_inputs

BUILT: list[tl.Schedule] = []             # every schedule built in this module (in this process)
CASES: dict[str, object] = {}             # name -> builder of a schedule used by a primitive test


def new(program: str, **sizes) -> tl.Schedule:
    """The default schedule of PROGRAMS[program] at `sizes`, remembered for the round-trip test."""
    s = tl.schedule(PROGRAMS[program].op, **sizes)
    BUILT.append(s)
    return s


def case(name: str):
    """Register a schedule builder under `name` (for the round-trip test)."""
    def deco(fn):
        assert name not in CASES, name
        CASES[name] = fn
        return fn
    return deco


def run(s: tl.Schedule, seed: int | None = None):
    """Lower `s` strictly, build it, run it on random inputs and compare with the program's numpy oracle.

    The inputs' seed comes from the schedule unless given, so that a kernel that reads a temporary it never
    wrote cannot pass by finding there the values an earlier test's run of the same program left in freed
    memory. Returns (loop IR text, kernel)."""
    func = s.lowered(strict=True)
    assert func.guards == 0
    text = s.lower()
    prog = PROGRAMS[s.op.name]
    inputs = make_inputs(s, zlib.crc32(s.to_json().encode()) if seed is None else seed)
    k = tl.build(s)
    # outputs start as NaN (or a sentinel): an element the kernel never writes cannot pass as a fresh zero page
    outs = [np.full(k.output_shapes[o], np.nan if np.issubdtype(k.output_dtypes[o], np.floating) else -77,
                    k.output_dtypes[o]) for o in s.op.outputs]
    got = k(*inputs, out=outs[0] if len(outs) == 1 else tuple(outs))
    assert_close(got, prog.reference(*inputs, **s.sizes), prog.red_len(s.sizes), exact=prog.exact,
                 err_msg=f"schedule:\n{s}\nloop IR:\n{text}")
    return text, k


def llvm(k) -> str:
    return k.source("llvm-unoptimized")


def default_text(s: tl.Schedule) -> str:
    return tl.schedule(s.op, **s.sizes).lower()


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
# vectorize
# =====================================================================================================
def _vec_builder(w):
    @case(f"vectorize_w{w}")
    def build():
        s = new("scale", N=67)
        s["B"].split("i", w)
        s["B"].vectorize("i_i")
        return s
    return build


VECTOR_WIDTHS = (4, 8, 16, 24, 32, 40, 48, 64)
for _w in VECTOR_WIDTHS:
    _vec_builder(_w)


@pytest.mark.parametrize("w", VECTOR_WIDTHS)
def test_vectorize_widths_with_tail(w):
    """Any width works; a loop wider than one register is emitted as register-wide vectors (a `<48 x float>`
    left to LLVM's legalisation went through the stack and ran 10x slower)."""
    text, k = run(CASES[f"vectorize_w{w}"]())
    assert loop_header(text, "i_i") == f"for i_i in 0:{w}:  # vectorized"
    assert "if i <= 66:" in text
    ll = llvm(k)
    lanes = min(w, k.target.vector_bits() // 32)
    widths = {int(n) for n in re.findall(r"<(\d+) x float>", ll)}
    assert lanes in widths and max(widths) == lanes, widths          # no vector wider than a register
    assert "llvm.masked.store" in ll                                # the tail is a lane mask
    assert "i_i_loop" not in ll                                      # no scalar loop over the lanes


def _vec_reduce_builder(w):
    @case(f"vectorize_reduce_w{w}")
    def build():
        s = new("rowsum", M=3, K=33)
        s["B"].split("k", w)
        s["B"].vectorize("k_i")
        return s
    return build


for _w in (16, 24, 32, 48, 64):
    _vec_reduce_builder(_w)


@pytest.mark.parametrize("w", [16, 24, 32, 48, 64])
def test_vectorized_reduction_with_lanes_all_off(w):
    """A vectorized reduction over K=33 by w lanes, emitted in register-wide chunks: in the last tile some
    chunks have every lane guarded off. Such a chunk must leave the row's sum alone (a regression stored
    the first row's sum into every other row)."""
    text, _ = run(CASES[f"vectorize_reduce_w{w}"]())
    assert loop_header(text, "k_i") == f"for k_i in 0:{w}:  # vectorized"


@pytest.mark.parametrize("program,bits", [("mm", 32), ("mm64", 64)])
def test_wide_vectorized_matmul_tile_runs_in_registers(program, bits):
    """A 48-wide register tile (several vectors per row) keeps its accumulators in vector registers: one
    register-wide FMA per vector, no lanes inserted one by one (the regression ran at 12 GFLOPS, not 150)."""
    s = new(program, M=19, N=101, K=23)
    c = s["C"]
    jo, ji = c.split("n", 48)
    io, ii = c.split("m", 4)
    c.reorder(io, jo, "k", ii, ji)
    c.unroll(ii)
    c.vectorize(ji)
    c.cache_write(jo)
    _, k = run(s)
    lanes = k.target.vector_bits() // bits
    ll = k.source("llvm")
    elem = "float" if bits == 32 else "double"
    assert {int(n) for n in re.findall(rf"<(\d+) x {elem}>", ll)} <= {lanes}
    asm = k.source("asm")
    assert asm.count("vfmadd") >= 4 * 48 // lanes
    assert "vinsertps" not in asm and "vmovhps" not in asm


def test_spilled_vector_registers_get_an_aligned_stack():
    """A register tile larger than the register file spills vectors to the stack. Every function that does so
    realigns its stack to the vector width, so that no spill straddles two cache lines: with only the ABI's 16
    bytes, the same convolution ran 1.5x slower in half the processes (by where the stack began) and on every
    worker thread."""
    lanes = host_target().vector_bits() // 32
    s = new("mm", M=16, N=10 * lanes, K=64)
    c = s["C"]
    jo, ji = c.split("n", 5 * lanes)  # a tile of 8 rows x 5 vectors: 40 accumulators
    jm, jv = c.split(ji, lanes)
    io, ii = c.split("m", 8)
    c.reorder(io, jo, "k", ii, jm, jv)
    c.unroll(ii)
    c.unroll(jm)
    c.vectorize(jv)
    c.cache_write(jo)
    _, k = run(s)
    width = k.target.vector_bits() // 8
    reg = {64: "zmm", 32: "ymm", 16: "xmm"}[width]
    functions = k.source("asm").split(",@function\n")[1:]  # each function's code, from its .type line on
    spilling = [f for f in functions if re.search(rf"vmov\w*\s+%{reg}\d+, -?\d*\(%rsp\)", f)]
    assert spilling, "the tile was meant to spill: make it larger"
    for f in spilling:
        assert f"andq\t$-{width}, %rsp" in f, f.splitlines()[0]


@pytest.mark.parametrize("tile_n,k_outside", [(14, False), (16, False), (12, True), (9, False), (6, False)])
def test_a_register_tile_vectorized_across_rows_is_written_back_transposed(tile_n, k_outside):
    """A tile of one vector of rows (`m`, strided by N in C) x `tile_n` columns (contiguous in C), accumulated in
    registers: written back as transposes in registers, in groups of at most a vector of columns, and runs of
    columns (masked where a group is shorter than a vector), not a scatter a column; an update
    (`C = C + C_local`, with the reduction's blocks outside) too. Under half a vector of columns it stays
    scatters. The same result as numpy either way. With AVX2's 8 lanes, 14 columns are a group of 8 and a masked
    group of 6 (they were 112 single-element stores: AVX2 has no scatter instruction)."""
    lanes = host_target().vector_bits() // 32
    s = new("mm", M=2 * lanes, N=3 * tile_n, K=24)
    c = s["C"]
    io, ii = c.split("m", lanes)
    jo, ji = c.split("n", tile_n)
    if k_outside:
        ko, ki = c.split("k", 8)
        c.reorder(ko, io, jo, ki, ji, ii)
    else:
        c.reorder(io, jo, "k", ji, ii)
    c.cache_write(jo)
    c.unroll(ji)
    c.vectorize(ii)
    text, k = run(s)
    assert ("C[m, n] = C[m, n] + C_local" in text) == k_outside, text
    asm = k.source("asm")
    if lanes in (4, 8, 16) and tile_n >= lanes // 2:
        # no scatter: AVX-512's vscatter, or without AVX-512 (no scatter instruction) a vextractps a lane of every
        # column (72 for 9 columns of 8 lanes); a last group of one column stores one element a row (8 of them)
        assert "vscatter" not in asm and asm.count("vextractps") <= lanes * (tile_n % lanes == 1)
        assert re.search(r"vperm[ti]2ps|vperm2f128|vunpck|vshuf", asm)  # the transpose's shuffles
        assert ("llvm.masked.store" in k.source("llvm")) == (tile_n % lanes != 0)  # masked runs under a vector
    elif lanes == 16:
        assert "vscatter" in asm


def test_a_division_by_a_row_constant_is_one_reciprocal_a_row():
    """`/ sqrt(var[n] + eps)` inside the vectorized row loop and `/ D` inside the sums: each becomes a multiply by
    a reciprocal (one exact scalar division a row, `vdivss`; no `vdivps` a vector: before, 48 of them a row made
    layernorm 2x slower), with 1/sqrt(0) still inf and the result within an ulp of numpy's."""
    op = tl.op("def ln(X: f32[N, D]) -> Y:\n    mean[n] += X[n, d] / D\n"
               "    Y[n, d] = (X[n, d] - mean[n]) / sqrt(mean[n] * mean[n])")
    s = tl.schedule(op, N=4, D=64)
    s["Y"].split("d", 16)
    s["Y"].vectorize("d_i")
    s["mean"].compute_at(s["Y"], "n")
    k = tl.build(s)
    asm = k.source("asm")
    assert "vdivps" not in asm and "vrsqrt" not in asm and "vrcp" not in asm
    assert "vdivss" in asm  # the reciprocal is divided exactly, not estimated
    X = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    X[1] = np.abs(X[1]) * 1e-18  # a tiny mean: its reciprocal is large, still finite
    X[2] = 0  # mean 0: 0/0 is nan, as in numpy
    X[3, 0] = 1
    X[3, 1:] = 0  # mean 1/64: X/|mean| is 64 where X is 1
    m = (X.astype(np.float64).sum(1, keepdims=True) / 64).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = (X - m) / np.sqrt(m * m)
    got = k(X)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=4e-6)
    assert got[3, 0] == 63 and np.all(got[2] != got[2])


@case("vectorize_divides")
def _vectorize_divides():
    s = new("scale", N=64)
    s["B"].split("i", 16)
    s["B"].vectorize("i_i")
    return s


def test_vectorize_without_tail_is_unmasked():
    text, k = run(CASES["vectorize_divides"]())
    ll = llvm(k)
    lanes = min(16, k.target.vector_bits() // 32)  # the split's 16 lanes as register-wide vectors
    assert f"store <{lanes} x float>" in ll and f"load <{lanes} x float>" in ll
    assert max(int(n) for n in re.findall(r"<(\d+) x float>", ll)) == lanes
    assert "llvm.masked" not in ll


@case("vectorize_whole_loop")
def _vectorize_whole_loop():
    s = new("scale64", N=5)
    s["B"].vectorize("i")
    return s


def test_vectorize_whole_loop_f64():
    text, k = run(CASES["vectorize_whole_loop"]())
    assert loop_header(text, "i") == "for i in 0:5:  # vectorized"
    # five lanes as vectors of powers of two (an odd-width vector can abort LLVM's x86 backend)
    assert "<4 x double>" in llvm(k) and "<5 x" not in llvm(k)  # the fifth lane as scalar code


@case("vectorize_i32")
def _vectorize_i32():
    s = new("scalei", N=23)
    s["B"].split("i", 16)
    s["B"].vectorize("i_i")
    return s


def test_vectorize_int():
    text, k = run(CASES["vectorize_i32"]())
    lanes = min(16, k.target.vector_bits() // 32)  # the split's 16 lanes as register-wide vectors
    assert f"<{lanes} x i32>" in llvm(k)


@case("vectorize_scatter")
def _vectorize_scatter():
    s = new("tr", M=5, N=7)
    s["B"].reorder("i", "j")
    s["B"].vectorize("j")        # B[j, i]: the store steps by 5 elements from lane to lane
    return s


def test_vectorize_transpose_scatter():
    text, k = run(CASES["vectorize_scatter"]())
    assert loop_header(text, "j") == "for j in 0:7:  # vectorized"
    ll = llvm(k)
    assert "llvm.masked.scatter" in ll
    # A[i, j] is contiguous in j: 7 lanes as 4 + 2 (+ 1 scalar), each a plain vector load
    assert "llvm.masked.gather" not in ll and "load <4 x float>" in ll and "load <2 x float>" in ll


@case("vectorize_gather")
def _vectorize_gather():
    s = new("tr", M=5, N=7)
    s["B"].vectorize("i")        # A[i, j]: the load steps by 7 elements
    return s


def test_vectorize_transpose_gather():
    text, k = run(CASES["vectorize_gather"]())
    ll = llvm(k)
    assert "llvm.masked.gather" in ll
    assert "llvm.masked.scatter" not in ll and "store <4 x float>" in ll  # 5 lanes: 4 (+ 1 scalar)


@case("vectorize_broadcast")
def _vectorize_broadcast():
    s = new("bcast", M=5, N=13)
    s["C"].split("n", 8)
    s["C"].vectorize("n_i")      # b[m] is the same for every lane: one scalar load, broadcast
    return s


def test_vectorize_broadcast_read():
    text, k = run(CASES["vectorize_broadcast"]())
    assert "C[m, n] = A[m, n]*c[n] + b[m]" in text
    ll = llvm(k)
    assert "llvm.masked.gather" not in ll and "llvm.masked.scatter" not in ll
    assert "load float, ptr" in ll                                   # the scalar b[m]


@case("vectorize_broadcast_other_axis")
def _vectorize_broadcast_other_axis():
    s = new("bcast", M=5, N=13)
    s["C"].reorder("n", "m")
    s["C"].vectorize("m")        # c[n] broadcast, A[m, n] gathered, b[m] contiguous
    return s


def test_vectorize_broadcast_and_gather_together():
    text, k = run(CASES["vectorize_broadcast_other_axis"]())
    ll = llvm(k)
    assert "llvm.masked.gather" in ll and "llvm.masked.scatter" in ll


@case("vectorize_in_reduction")
def _vectorize_in_reduction():
    s = new("mm64", M=5, N=7, K=11)
    s["C"].reorder("k", "n")
    s["C"].vectorize("n")
    return s


def test_vectorize_output_loop_inside_reduction_loop():
    s = CASES["vectorize_in_reduction"]()
    text, k = run(s)
    assert encloses(text, "k", "n") and "# vectorized" in loop_header(text, "n")
    assert "<4 x double>" in llvm(k) and "<2 x double>" in llvm(k)  # 7 lanes: 4 + 2 (+ 1 scalar)


@case("vectorize_innermost_reduction")
def _vectorize_innermost_reduction():
    s = new("rowsum", M=5, K=37)
    s["B"].split("k", 8)
    s["B"].vectorize("k_i")      # an innermost reduction loop: lanes are combined
    return s


def test_vectorize_innermost_reduction_loop():
    text, k = run(CASES["vectorize_innermost_reduction"]())
    assert loop_header(text, "k_i") == "for k_i in 0:8:  # vectorized"
    assert "llvm.vector.reduce.fadd" in llvm(k)


@case("vectorize_innermost_reduction_int")
def _vectorize_innermost_reduction_int():
    s = new("rowmaxi", M=3, K=13)
    s["B"].vectorize("k")
    return s


def test_vectorize_innermost_int_max_reduction():
    text, k = run(CASES["vectorize_innermost_reduction_int"]())
    assert "llvm.vector.reduce.smax" in llvm(k)


def test_vectorize_outside_cache_write_level_is_refused():
    # the local tile would hold one element for all the lanes of the vectorized m
    s = new("mm", M=5, N=7, K=11)
    s["C"].vectorize("m")
    refuse(s, lambda: s["C"].cache_write("n"), "cache_write(C, n)", "inside the vectorized loop m")
    s = new("mm", M=5, N=7, K=11)
    s["C"].cache_write("n")
    refuse(s, lambda: s["C"].vectorize("m"), "vectorize(C, m)", "its cache_write at loop n")


# =====================================================================================================
# unroll
# =====================================================================================================
@case("unroll_tail")
def _unroll_tail():
    s = new("mm", M=5, N=7, K=11)
    s["C"].split("k", 4)
    s["C"].unroll("k_i")
    return s


def test_unroll_with_tail():
    text, k = run(CASES["unroll_tail"]())
    assert loop_header(text, "k_i") == "for k_i in 0:4:  # unrolled"
    ll = llvm(k)
    assert "k_i_loop" not in ll and "k_o_loop" in ll                 # k_i is no loop in the code
    assert ll.count("fmul contract float") >= 4


@case("unroll_vectorize_i32")
def _unroll_vectorize_i32():
    s = new("mmi", M=7, N=11, K=13)
    s["C"].tile("m", "n", 3, 4)
    s["C"].reorder("m_o", "n_o", "k", "m_i", "n_i")
    s["C"].unroll("m_i")
    s["C"].vectorize("n_i")
    return s


def test_unroll_outside_vectorized_int():
    text, k = run(CASES["unroll_vectorize_i32"]())
    assert "# unrolled" in loop_header(text, "m_i") and "# vectorized" in loop_header(text, "n_i")
    assert "m_i_loop" not in llvm(k)


@case("unroll_lo")
def _unroll_lo():
    s = new("rowsum_lo", M=3, K=5, L=7)
    s["B"].unroll("l")
    return s


def test_unroll_loop_that_starts_above_zero():
    text, k = run(CASES["unroll_lo"]())
    assert loop_header(text, "l") == "for l in 1:7:  # unrolled"


# =====================================================================================================
# parallel
# =====================================================================================================
def _run_threads(s, monkeypatch):
    """Results with 1 and 2 threads: identical to each other and to numpy."""
    outs = []
    for n in ("1", "2"):
        monkeypatch.setenv("TENSORLANG_NUM_THREADS", n)
        _, k = run(s)
        outs.append(k(*make_inputs(s, 1)))
    np.testing.assert_array_equal(outs[0], outs[1])
    return s.lower(), k


@case("parallel_outer")
def _parallel_outer():
    s = new("mm", M=13, N=7, K=11)
    s["C"].split("m", 4)
    s["C"].parallel("m_o")
    return s


def test_parallel_outer_loop(monkeypatch):
    text, k = _run_threads(CASES["parallel_outer"](), monkeypatch)
    assert loop_header(text, "m_o") == "for m_o in 0:4:  # parallel"
    ll = llvm(k)
    assert "tensorlang_parallel_for" in ll and "_par1_m_o" in ll


@case("parallel_fused")
def _parallel_fused():
    s = new("mmi", M=5, N=7, K=11)
    s["C"].fuse("m", "n")
    s["C"].parallel("m_n")
    return s


def test_parallel_fused_loop_int(monkeypatch):
    text, _ = _run_threads(CASES["parallel_fused"](), monkeypatch)
    assert loop_header(text, "m_n") == "for m_n in 0:35:  # parallel"


@case("parallel_inner_vectorized_cached")
def _parallel_inner_vectorized_cached():
    s = new("mm", M=13, N=37, K=19)
    s["C"].tile("m", "n", 4, 16)
    s["C"].reorder("m_o", "n_o", "k", "m_i", "n_i")
    s["C"].cache_write("n_o")
    s["C"].vectorize("n_i")
    s["C"].parallel("n_o")       # not the outermost loop
    return s


def test_parallel_inner_loop_with_cache_write_and_vectorize(monkeypatch):
    text, _ = _run_threads(CASES["parallel_inner_vectorized_cached"](), monkeypatch)
    assert "# parallel" in loop_header(text, "n_o")
    assert encloses(text, "n_o", "n_i")


@case("parallel_with_producers")
def _parallel_with_producers():
    s = new("softmax", N=7, D=13)
    s["Y"].split("n", 2)
    s["Y"].parallel("n_i")
    for name in ("sm", "e", "mx"):
        s[name].compute_at(s["Y"], "n_o")   # outside the parallel loop
    return s


def test_parallel_with_producers_computed_outside_it(monkeypatch):
    text, _ = _run_threads(CASES["parallel_with_producers"](), monkeypatch)
    assert encloses(text, "n_o", "e.d") and encloses(text, "n_o", "n_i")
    assert not encloses(text, "n_i", "e.d")


@case("parallel_producer_at_root")
def _parallel_producer_at_root():
    s = new("softmax", N=7, D=13)
    s["e"].parallel("n")
    s["mx"].parallel("n")
    s["Y"].parallel("n")
    return s


def test_parallel_several_stages(monkeypatch):
    text, k = _run_threads(CASES["parallel_producer_at_root"](), monkeypatch)
    assert text.count("# parallel") == 3
    assert llvm(k).count('call i32 @"tensorlang_parallel_for"') == 3


@case("parallel_heap_locals")
def _parallel_heap_locals():
    s = new("mm", M=13, N=5, K=2111)
    s["C"].split("m", 4)
    s["C"].parallel("m_o")
    s["C"].cache_read("A", "m_o")        # 4 x 2111 floats: more than the 32 KiB kept on the stack
    s["C"].cache_write("m_o")
    return s


def test_parallel_loop_with_heap_local_buffers_per_thread(monkeypatch):
    text, k = _run_threads(CASES["parallel_heap_locals"](), monkeypatch)
    assert "allocate A_C_local: f32[4, 2111]" in text and encloses(text, "m_o", "A_C_local_1")
    assert "aligned_alloc" in llvm(k)


# =====================================================================================================
# serial
# =====================================================================================================
@case("serial_undo")
def _serial_undo():
    s = new("mm", M=5, N=7, K=11)
    s["C"].split("n", 4)
    s["C"].vectorize("n_i")
    s["C"].parallel("m")
    s["C"].split("k", 2)
    s["C"].unroll("k_i")
    for loop in ("n_i", "m", "k_i"):
        s["C"].serial(loop)
    s["C"].split("n_i", 2)               # legal again: n_i is serial
    return s


def test_serial_undoes_annotations():
    s = CASES["serial_undo"]()
    text, _ = run(s)
    assert "#" not in text
    plain = new("mm", M=5, N=7, K=11)
    plain["C"].split("n", 4)
    plain["C"].split("k", 2)
    plain["C"].split("n_i", 2)
    assert text == plain.lower()


# =====================================================================================================
# compute_at
# =====================================================================================================
CONV = dict(N=2, C=2, F=3, H=5, W=7, R=3, S=3, stride=1, pad=1, dil=1)


def _conv_at_builder(axis):
    @case(f"conv_P_at_{axis}")
    def build():
        s = new("conv2d", **CONV)
        s["P"].compute_at(s["O"], axis)
        return s
    return build


for _ax in ("n", "f", "h", "w", "c", "r", "s"):
    _conv_at_builder(_ax)


@pytest.mark.parametrize("axis", ["n", "f", "h", "w", "c", "r", "s"])
def test_compute_at_conv_padding_stage(axis):
    text, _ = run(CASES[f"conv_P_at_{axis}"]())
    assert encloses(text, axis, "P.x") and encloses(text, axis, "P.y")
    assert loop_order(text)[0] == "n"                                   # P is no longer a root nest
    assert "(0 outside)" in text


@case("conv_strided_at_split")
def _conv_strided_at_split():
    s = new("conv2d", N=1, C=2, F=3, H=9, W=8, R=3, S=3, stride=2, pad=1, dil=2)
    s["O"].split("h", 2)
    s["P"].compute_at(s["O"], "h_o")
    return s


def test_compute_at_strided_dilated_conv_at_split_loop():
    text, _ = run(CASES["conv_strided_at_split"]())
    assert encloses(text, "h_o", "P.y") and not encloses(text, "h_i", "P.y")
    # the rows two outputs with stride 2 and a dilated 3-tap filter read: 2*1 + 2*2 + 1 = 7
    assert loop_header(text, "P.y") == "for P.y in 0:7:"


@case("softmax_at_row")
def _softmax_at_row():
    s = new("softmax", N=5, D=13)
    s["sm"].compute_at(s["Y"], "n")   # readers first: sm reads e, e reads mx
    s["e"].compute_at(s["Y"], "n")
    s["mx"].compute_at(s["Y"], "n")
    return s


def test_compute_at_softmax_stages_at_row_loop():
    text, _ = run(CASES["softmax_at_row"]())
    for loop in ("mx.d", "e.d", "sm.d", "d"):
        assert encloses(text, "n", loop)
    order = loop_order(text)
    assert order.index("mx.d") < order.index("e.d") < order.index("sm.d") < order.index("d")
    assert order.count("n") == 1                                        # one nest


@case("softmax_at_row_vectorized")
def _softmax_at_row_vectorized():
    s = _softmax_at_row()
    s["Y"].split("d", 8)
    s["Y"].vectorize("d_i")
    s["e"].split("d", 4)
    s["e"].vectorize("d_i")
    return s


def test_compute_at_producer_and_consumer_scheduled():
    text, _ = run(CASES["softmax_at_row_vectorized"]())
    assert loop_header(text, "e.d_i") == "for e.d_i in 0:4:  # vectorized"
    assert encloses(text, "n", "e.d_i")


@case("stencil3_at_outer")
def _stencil3_at_outer():
    s = new("stencil3", N=23)
    s["D"].split("i", 4)
    s["C"].compute_at(s["D"], "i_o")
    s["B"].compute_at(s["D"], "i_o")
    return s


def test_compute_at_chain_of_three_at_one_loop():
    text, _ = run(CASES["stencil3_at_outer"]())
    assert loop_header(text, "C.i") == "for C.i in 0:5:"               # 4 outputs need 5 of C
    assert loop_header(text, "B.i") == "for B.i in 0:7:"               # ... and 7 of B
    assert encloses(text, "i_o", "B.i") and encloses(text, "i_o", "C.i")


@case("stencil3_nested")
def _stencil3_nested():
    s = new("stencil3", N=23)
    s["D"].split("i", 4)
    s["C"].compute_at(s["D"], "i_o")
    s["B"].compute_at(s["C"], "i")
    return s


def test_compute_at_chain_nested():
    text, _ = run(CASES["stencil3_nested"]())
    assert encloses(text, "C.i", "B.i") and encloses(text, "i_o", "C.i")
    assert loop_header(text, "B.i") == "for B.i in 0:3:"


@case("stencil3_producers_scheduled")
def _stencil3_producers_scheduled():
    s = new("stencil3", N=23)
    s["D"].split("i", 8)
    s["D"].vectorize("i_i")
    s["C"].compute_at(s["D"], "i_o")
    s["C"].split("i", 3)
    s["C"].vectorize("i_i")
    s["B"].compute_at(s["D"], "i_o")
    s["B"].split("i", 16)
    s["B"].unroll("i_o")
    return s


def test_compute_at_chain_with_producer_schedules():
    text, _ = run(CASES["stencil3_producers_scheduled"]())
    assert loop_header(text, "C.i_i") == "for C.i_i in 0:3:  # vectorized"
    assert "# unrolled" in loop_header(text, "B.i_o")


def test_compute_at_stores_the_region_in_the_loop_where_it_can():
    # softmax's row: e, mx and sm each hold one row, allocated in the parallel row loop (one per thread)
    text, _ = run(CASES["softmax_at_row"]())
    assert text.index("for n in 0:") < text.index("allocate e: f32[1, ") and "allocate e: f32[4, " not in text
    # B's loop (16 iterations) overshoots its 11-element part, but the tail's guard (B:i <= i_o*8 + 10) keeps the
    # writes inside it: B moves into the loop too, beside C
    text, _ = run(CASES["stencil3_producers_scheduled"]())
    assert text.index("for i_o in 0:3:") < text.index("allocate C: f32[9]") < text.index("allocate B: f32[11]")
    # T is read outside its domain (padding reads 0 there, not where a part ends): whole, at the root
    s = tl.schedule(tl.op("def pd(X: f32[N]) -> B:\n    T[i] = X[i] * 2.0\n"
                          "    B[i] = T[i - 1] + T[i] where i in 0:N+1"), N=9)
    s["T"].compute_at(s["B"], "i")
    text = s.lower()
    assert text.index("allocate T: f32[9]") < text.index("for i in 0:10:")
    X = np.random.default_rng(0).standard_normal(9).astype(np.float32)
    T, zero = 2 * X, np.zeros(1, np.float32)
    np.testing.assert_array_equal(tl.build(s)(X), np.concatenate([zero, T]) + np.concatenate([T, zero]))


@case("stencil_red_at")
def _stencil_red_at():
    s = new("stencil_red", N=11, K=5)
    s["T"].compute_at(s["O"], "j")
    return s


def test_compute_at_reduction_producer_with_overlapping_regions():
    text, _ = run(CASES["stencil_red_at"]())
    assert encloses(text, "j", "T.k") and "T[T.i] = 0f" in text
    assert "allocate T: f32[2]" in text and "O[j] = T[0] + T[1]" in text  # T's two rows, stored in the loop


@case("blur_i32_at")
def _blur_i32_at():
    s = new("blur_i32", N=17)
    s["B"].split("i", 4)
    s["P"].compute_at(s["B"], "i_o")
    return s


def test_compute_at_int_padding_stage():
    text, _ = run(CASES["blur_i32_at"]())
    assert loop_header(text, "P.i") == "for P.i in 0:6:" and encloses(text, "i_o", "P.i")
    # the last block's rows (16 .. 21) run past P's 19: they are guarded
    assert "if P:i <= min(i_o*4 + 5, 18):" in text


def test_compute_at_writes_no_guard_where_the_loops_prove_the_part_inside():
    s = new("blur_i32", N=16)  # blocks of 4 rows: P's rows i_o*4 .. i_o*4 + 5 <= 17 < 18, never past its end
    s["B"].split("i", 4)
    s["P"].compute_at(s["B"], "i_o")
    text, _ = run(s)
    assert "P[P.i] = A[P:i - 1] (0 outside)" in text and "if " not in text


# =====================================================================================================
# compute_inline
# =====================================================================================================
@case("conv_inline")
def _conv_inline():
    s = new("conv2d", N=1, C=2, F=2, H=4, W=5, R=3, S=3, stride=1, pad=2, dil=1)
    s["P"].compute_inline()
    return s


def test_compute_inline_padding_stage_still_reads_zero():
    text, _ = run(CASES["conv_inline"]())
    assert "allocate P" not in text and "P[" not in text
    assert "I[n, c, h + r - 2, s + w - 2] (0 outside)" in text
    assert loop_order(text) == ["n", "f", "h", "w", "c", "r", "s"]


@case("chain_inline")
def _chain_inline():
    s = new("chain", N=5, M=7)
    s["T2"].compute_inline()
    s["T1"].compute_inline()
    return s


def test_compute_inline_elementwise_chain():
    text, _ = run(CASES["chain_inline"]())
    assert "allocate" not in text
    assert loop_order(text) == ["i", "j"]
    assert "T1" not in text and "T2" not in text


@case("chain_inline_one_vec")
def _chain_inline_one_vec():
    s = new("chain", N=5, M=7)
    s["T2"].compute_inline()
    s["E"].split("j", 4)
    s["E"].vectorize("j_i")
    return s


def test_compute_inline_one_stage_then_vectorize_consumer():
    text, _ = run(CASES["chain_inline_one_vec"]())
    assert "allocate T1" in text and "allocate T2" not in text
    assert loop_order(text) == ["i", "j", "i", "j_o", "j_i"]


@case("stencil3_inline")
def _stencil3_inline():
    s = new("stencil3", N=13)
    s["B"].compute_inline()
    s["C"].compute_inline()
    return s


def test_compute_inline_stencil_chain():
    text, _ = run(CASES["stencil3_inline"]())
    assert loop_order(text) == ["i"] and "allocate" not in text


@case("blur_i32_inline")
def _blur_i32_inline():
    s = new("blur_i32", N=17)
    s["P"].compute_inline()
    return s


def test_compute_inline_int_padding_stage():
    text, _ = run(CASES["blur_i32_inline"]())
    assert "allocate P" not in text and "(0 outside)" in text


# =====================================================================================================
# compute_root
# =====================================================================================================
@case("softmax_root_again")
def _softmax_root_again():
    s = _softmax_at_row()
    s["mx"].compute_root()
    s["e"].compute_root()
    s["sm"].compute_root()
    return s


def test_compute_root_undoes_compute_at():
    s = CASES["softmax_root_again"]()
    text, _ = run(s)
    assert text == default_text(s)


@case("conv_inline_root")
def _conv_inline_root():
    s = _conv_inline()
    s["P"].compute_root()
    return s


def test_compute_root_undoes_compute_inline():
    s = CASES["conv_inline_root"]()
    text, _ = run(s)
    assert text == default_text(s) and "allocate P" in text


def test_each_stage_is_attached_by_a_typed_placement_and_the_json_keeps_its_format():
    # replay says where each stage is computed as Root(), Inline(), At(consumer, axis) or Epilogue(producer),
    # compared by value; the schedule's JSON, which tuning records store, keeps its format whatever the state
    from tensorlang.schedule import At, Epilogue, Inline, Root
    src = ("def f(X: f32[M, K], W: f32[K, N], b: f32[N]) -> Y:\n    T[m, k] = X[m, k] * 2.0\n"
           "    D[m, n] += T[m, k] * W[k, n]\n    Y[m, n] = max(D[m, n] + b[n], 0.0)\n")
    s = tl.schedule(tl.op(src), M=4, N=8, K=3)
    assert {n: st.attach for n, st in s.state().stages.items()} == {"T": Root(), "D": Root(), "Y": Root()}
    s["T"].compute_inline()
    s["Y"].reverse_compute_inline()
    assert {n: st.attach for n, st in s.state().stages.items()} == {"T": Inline(), "D": Root(), "Y": Epilogue("D")}
    s["Y"].compute_root()
    s["T"].compute_root()
    s["T"].compute_at(s["D"], "m")
    assert {n: st.attach for n, st in s.state().stages.items()} == {"T": At("D", "m"), "D": Root(), "Y": Root()}
    assert json.loads(s.to_json()) == {
        "format": 1, "op": "f", "sizes": {"K": 3, "M": 4, "N": 8}, "source": src,
        "primitives": [{"prim": "compute_inline", "stage": "T"}, {"prim": "reverse_compute_inline", "stage": "Y"},
                       {"prim": "compute_root", "stage": "Y"}, {"prim": "compute_root", "stage": "T"},
                       {"axis": "m", "consumer": "D", "prim": "compute_at", "stage": "T"}]}
    assert tl.Schedule.from_json(s.to_json()).state().stages["T"].attach == At("D", "m")


def test_compute_root_with_a_stale_reader_is_refused_at_the_call():
    s = _softmax_at_row()
    # e would stay computed at Y.n while its reader sm would not: the call that would make it so is refused
    refuse(s, lambda: s["sm"].compute_root(), "compute_root(sm): compute_at(e, Y, n)", "read by sm",
           "no longer computed at Y.n")


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
# expected errors: one test per refusal
# =====================================================================================================
def refuse(s: tl.Schedule, action, *needles):
    """`action()` raises ScheduleError whose message holds every needle (a tuple: any of its strings), and `s` is
    unchanged (same primitives, same loop IR)."""
    prims = list(s.primitives)
    text = s.lower()
    with pytest.raises(tl.ScheduleError) as info:
        action()
    msg = str(info.value)
    for n in needles:
        alts = n if isinstance(n, tuple) else (n,)
        assert any(a in msg for a in alts), f"{alts!r} not in {msg!r}"
    assert s.primitives == prims
    assert s.lower() == text
    return msg


# messages name the method the user called
VEC, UNR, PAR = "vectorize(", "unroll(", "parallel("


def test_error_unknown_stage():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["Q"], "'Q'", "the stages are C")


def test_error_input_as_stage():
    s = new("softmax", N=3, D=5)
    refuse(s, lambda: s["X"], "'X'", "X is an input", "the stages are mx, e, sm, Y")


def test_error_unknown_stage_as_consumer():
    s = new("softmax", N=3, D=5)
    refuse(s, lambda: s["e"].compute_at("Q", "n"), "compute_at(", "Q", "the stages are")


def test_error_unknown_loop_lists_loops():
    s = new("mm", M=5, N=7, K=11)
    s["C"].split("m", 2)
    refuse(s, lambda: s["C"].split("m", 2), "split(C, m)", "no loop 'm'", "its loops are m_o, m_i, n, k")


@pytest.mark.parametrize("factor", [0, -3, 2.0, True, "4", None], ids=repr)
def test_error_bad_split_factor(factor):
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].split("n", factor), "split(C, n)", "positive integer", repr(factor))


@pytest.mark.parametrize("names", [dict(outer="n"), dict(inner="k"), dict(outer="m"), dict(outer="x", inner="x")],
                         ids=["outer-exists", "inner-exists", "same-as-axis", "outer-equals-inner"])
def test_error_duplicate_loop_names(names):
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].split("m", 2, **names), "split(C", ("exists already", "different names"))


def test_error_loop_name_not_identifier():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].split("m", 2, outer="1x"), "split(C", "'1x'", "not an identifier")


def test_error_fused_name_exists():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].fuse("m", "n", fused="k"), "fuse(C", "'k'", "choose another name")


def test_error_reorder_repeated_loop():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].reorder("m", "n", "m"), "reorder(C", "named twice", "m, n, m")


def test_error_reorder_unknown_loop():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].reorder("m", "q"), "reorder(C, q)", "its loops are m, n, k")


def test_error_reorder_single_loop():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].reorder("m"), "reorder(C", "at least two loops")


def test_error_fuse_not_adjacent():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].fuse("m", "k"), "fuse(C, m, k)", "directly inside m", "the loops are m, n, k")


def test_error_fuse_inner_outer_swapped():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].fuse("n", "m"), "fuse(C, n, m)", "directly inside n")


def test_error_fuse_pure_with_reduction():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].fuse("n", "k"), "fuse(C, n, k)", "reduction loop", "same sort")


def test_error_fuse_after_annotation():
    s = new("mm", M=5, N=7, K=11)
    s["C"].unroll("n")
    refuse(s, lambda: s["C"].fuse("m", "n"), "fuse(C, m, n)", "before annotating")


def test_error_vectorize_reduction_loop_with_loops_inside():
    s = new("mm", M=5, N=7, K=11)
    s["C"].reorder("k", "n")
    refuse(s, lambda: s["C"].vectorize("k"), VEC, "C, k)", "reduction loop", "innermost")


def test_error_vectorize_too_many_lanes():
    s = new("scale", N=65)
    refuse(s, lambda: s["B"].vectorize("i"), VEC, "B, i)", "65", "64 lanes", "split it")


def test_error_two_vectorized_loops():
    s = new("mm", M=5, N=7, K=11)
    s["C"].vectorize("m")
    refuse(s, lambda: s["C"].vectorize("n"), VEC, "C, n)", "m is vectorized already")


def test_error_parallel_reduction_loop():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].parallel("k"), PAR, "C, k)", "reduction loop", "output index")


def test_error_two_parallel_loops():
    s = new("mm", M=5, N=7, K=11)
    s["C"].parallel("m")
    refuse(s, lambda: s["C"].parallel("n"), PAR, "C, n)", "m is parallel already", "fuse")


def test_error_parallel_inside_vectorized():
    s = new("mm", M=5, N=7, K=11)
    s["C"].vectorize("m")
    refuse(s, lambda: s["C"].parallel("n"), PAR, "C, n)", "inside the vectorized loop m")


def test_error_vectorize_outside_parallel():
    s = new("mm", M=5, N=7, K=11)
    s["C"].parallel("n")
    refuse(s, lambda: s["C"].vectorize("m"), VEC, "C, m)", "n, is parallel")


def test_error_unroll_too_many():
    s = new("rowsum", M=2, K=513)
    refuse(s, lambda: s["B"].unroll("k"), UNR, "B, k)", "513", "512", "split it")


def test_unroll_limit_itself_is_legal():
    s = new("rowsum", M=2, K=512)
    s["B"].unroll("k")
    assert "# unrolled" in loop_header(s.lower(), "k")


def test_error_split_after_vectorize():
    s = new("mm", M=5, N=7, K=11)
    s["C"].vectorize("n")
    refuse(s, lambda: s["C"].split("n", 2), "split(C, n)", "vectorized", "split it before annotating")


def test_error_unknown_annotation_kind_from_json():
    s = new("mm", M=5, N=7, K=11)
    bad = json.loads(s.to_json())
    bad["primitives"] = [{"prim": "annotate", "stage": "C", "axis": "m", "kind": "gpu"}]
    refuse(s, lambda: tl.Schedule.from_json(json.dumps(bad)), "C, m)", "'gpu'", "kinds are serial")


def test_error_compute_at_output():
    s = new("softmax", N=3, D=5)
    refuse(s, lambda: s["Y"].compute_at(s["Y"], "n"), "compute_at(Y", "Y is an output", "computed at the root")


def test_error_compute_at_stage_that_does_not_read_it():
    s = new("softmax", N=3, D=5)
    refuse(s, lambda: s["mx"].compute_at(s["Y"], "n"), "compute_at(mx, Y, n)", "reads mx", "its readers: e")


@case("softmax_e_inlined_stats_at_row")
def _softmax_e_inlined_stats_at_row():
    s = new("softmax", N=7, D=13)
    s["e"].compute_inline()
    s["sm"].compute_at(s["Y"], "n")  # sm and Y read mx through the inlined e
    s["mx"].compute_at(s["Y"], "n")
    s["sm"].split("d", 4)
    s["sm"].vectorize("d_i")
    return s


def test_compute_at_a_producer_read_through_an_inlined_stage():
    text, _ = run(CASES["softmax_e_inlined_stats_at_row"]())
    assert "allocate e" not in text and text.count("exp(") == 2  # e's expression in sm and in Y
    for loop in ("mx.d", "sm.d_o", "d"):
        assert encloses(text, "n", loop)


def test_error_compute_at_a_producer_read_through_an_inlined_stage_elsewhere():
    s = new("softmax", N=3, D=5)
    s["e"].compute_inline()
    refuse(s, lambda: s["mx"].compute_at(s["Y"], "n"), "compute_at(mx, Y, n)", "also read by sm",
           "compute sm there first")
    s["sm"].compute_at(s["Y"], "n")
    s["mx"].compute_at(s["Y"], "n")
    refuse(s, lambda: s["e"].compute_root(), "compute_at(mx, Y, n)", "also read by e",
           "no longer computed at Y.n")


def test_error_compute_at_producer_also_read_elsewhere():
    s = new("softmax", N=3, D=5)
    refuse(s, lambda: s["e"].compute_at(s["Y"], "n"), "compute_at(e, Y, n)", "also read by sm",
           "compute sm there first")


def test_compute_at_below_a_parallel_loop_with_disjoint_regions_is_legal():
    # each iteration of the parallel n needs its own row of sm (and of e, mx): no two threads share one
    for axis in ("n", "d"):
        s = new("softmax", N=3, D=5)
        s["Y"].parallel("n")
        s["sm"].compute_at(s["Y"], axis)
        s["e"].compute_at(s["Y"], axis)
        s["mx"].compute_at(s["Y"], axis)
        run(s)


def test_compute_at_below_a_parallel_loop_with_overlapping_regions_recomputes_in_a_buffer_of_its_own():
    # O[j] reads T[j] and T[j + 1]: neighbouring iterations of the parallel j both need T[j + 1]. Each computes
    # its two rows into a buffer allocated in the loop (one per thread), as Halide's compute_at over tiles does
    for parallel_first in (True, False):
        s = new("stencil_red", N=11, K=5)
        if parallel_first:
            s["O"].parallel("j")
        s["T"].compute_at(s["O"], "j")
        if not parallel_first:
            s["O"].parallel("j")
        text, _ = run(s)
        assert text.index("for j in 0:10:  # parallel") < text.index("allocate T: f32[2]")


PADDED_READ = "def pd(X: f32[N]) -> B:\n    T[i] = X[i] * 2.0\n    B[i] = T[i - 1] + T[i] where i in 0:N+1"


def test_error_compute_at_below_a_parallel_loop_with_overlapping_regions_in_a_shared_buffer():
    # B[i] reads T[i - 1] and T[i], and outside T's domain (padding reads 0 at T's ends, not at a part's): T keeps
    # its whole buffer (the region of i = 0 starts at -1), which neighbouring iterations of the parallel i would
    # both write
    s = tl.schedule(tl.op(PADDED_READ), N=9)
    s["B"].parallel("i")
    refuse(s, lambda: s["T"].compute_at(s["B"], "i"), "compute_at(T, B, i)", "i is parallel", "overlap",
           "may start before 0", "compute T outside it")


def test_error_compute_at_region_wider_than_the_producers_vectorized_loop():
    # C[i] reads B[i] and B[i + 2]: at C's loop i_o (63 iterations of i_i) B is computed over 65 elements, more than
    # one vectorized loop may have (64 lanes); whichever call makes that so is refused, not the final lowering
    s = new("stencil3", N=64)
    s["B"].vectorize("i")
    s["C"].split("i", 63)
    refuse(s, lambda: s["B"].compute_at(s["C"], "i_o"), "compute_at(B, C, i_o)", "65 elements",
           "vectorize(B, i): extent 65 is more than 64 lanes")
    s = new("stencil3", N=64)
    s["C"].split("i", 63)
    s["B"].compute_at(s["C"], "i_o")
    refuse(s, lambda: s["B"].vectorize("i"), "vectorize(B, i)", "compute_at(B, C, i_o)", "65 elements")
    s["B"].split("i", 32)
    s["B"].vectorize("i_i")  # what the message says to do
    run(s)


def test_error_compute_at_inside_vectorized_loop():
    s = new("stencil3", N=13)
    s["D"].vectorize("i")
    refuse(s, lambda: s["C"].compute_at(s["D"], "i"), "compute_at(C, D, i)", "vectorized loop i")


def test_error_compute_at_stage_with_parallel_loop():
    s = new("softmax", N=3, D=5)
    s["sm"].parallel("n")
    refuse(s, lambda: s["sm"].compute_at(s["Y"], "n"), "compute_at(sm, Y, n)", "sm has a parallel loop")


def test_error_parallel_in_stage_computed_inside_another():
    s = new("softmax", N=3, D=5)
    s["sm"].compute_at(s["Y"], "n")
    refuse(s, lambda: s["sm"].parallel("n"), "parallel(sm, n)", "computed inside Y", "parallelise a loop of Y")


def test_error_compute_at_unknown_consumer_loop():
    s = new("softmax", N=3, D=5)
    refuse(s, lambda: s["sm"].compute_at(s["Y"], "k"), "compute_at(Y, k)", "its loops are n, d")


def test_error_compute_at_cycle():
    # sm and e computed at Y.n; now put e inside sm (which reads e and is itself computed at Y.n)
    s = new("softmax", N=3, D=5)
    s["sm"].compute_at(s["Y"], "n")
    s["e"].compute_at(s["Y"], "n")
    refuse(s, lambda: s["e"].compute_at(s["sm"], "n"), "compute_at(e, sm, n)", "also read by Y")
    # and the consumer of a chain inside its own producer
    s = new("stencil3", N=13)
    s["C"].compute_at(s["D"], "i")
    s["B"].compute_at(s["C"], "i")
    refuse(s, lambda: s["C"].compute_at(s["B"], "i"), "compute_at(C, B, i)", "reads C")


def test_error_compute_at_into_inlined_consumer():
    s = new("stencil3", N=13)
    s["C"].compute_inline()
    refuse(s, lambda: s["B"].compute_at(s["C"], "i"), "compute_at(B, C, i)", ("inlined", "reads B"))


def test_error_compute_inline_reduction():
    s = new("softmax", N=3, D=5)
    refuse(s, lambda: s["sm"].compute_inline(), "compute_inline(sm)", "reduction", "use compute_at instead")


def test_error_compute_inline_output():
    s = new("softmax", N=3, D=5)
    refuse(s, lambda: s["Y"].compute_inline(), "compute_inline(Y)", "Y is an output")


def test_error_compute_inline_stage_with_producers_at_it():
    s = new("stencil3", N=13)
    s["B"].compute_at(s["C"], "i")
    refuse(s, lambda: s["C"].compute_inline(), "compute_inline(C)", "B is computed inside C",
           "compute it elsewhere first")


def test_error_cache_read_tensor_not_read():
    s = new("softmax", N=3, D=5)
    refuse(s, lambda: s["Y"].cache_read("mx", "n"), "cache_read(Y, mx, n)", "does not read mx", "it reads e, sm")


def test_error_cache_read_unknown_loop():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].cache_read("B", "q"), "cache_read(C, q)", "its loops are m, n, k")


@pytest.mark.parametrize("layout,needle", [
    (((2, 0),), "dimensions 0..1, the layout names 2"),
    (((-1, 0),), "dimensions 0..1, the layout names -1"),
    (((1, -4), (1, 0)), "block -4 of dimension 1 must be >= 0"),
    (((1, 0), (1, 0)), "dimension 1 appears as [0, 0]"),
    (((1, 4),), "dimension 1 appears as [4]"),
    (((1, 0), (1, 4)), "dimension 1 appears as [0, 4]"),
    (((1, 4), (1, 4), (1, 0)), "dimension 1 appears as [4, 4, 0]"),
    (((1,),), "a layout entry is (dimension, block), got (1,)"),
    ((("1", 0),), "a layout entry is (dimension, block)"),
], ids=["dim-too-big", "dim-negative", "block-negative", "twice-whole", "outer-without-inner", "inner-first",
        "three-parts", "short-entry", "str-dimension"])
def test_error_cache_read_bad_layout(layout, needle):
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].cache_read("B", "m", layout=layout), "cache_read(C, B, m)", needle)


def test_error_cache_read_bool_dimension():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].cache_read("B", "m", layout=((True, 0),)), "cache_read(C, B, m)")


def test_error_cache_read_twice():
    s = new("mm", M=5, N=7, K=11)
    s["C"].cache_read("B", "m")
    refuse(s, lambda: s["C"].cache_read("B", "n"), "cache_read(C, B, n)", "cached by C already")


def test_error_cache_read_of_inlined_stage():
    s = new("stencil3", N=13)
    s["C"].compute_inline()
    s["B"].compute_inline()
    refuse(s, lambda: s["D"].cache_read("C", "i"), "cache_read(D, C, i)", "C is inlined")


def test_error_cache_write_on_inlined_stage():
    s = new("softmax", N=3, D=5)
    s["e"].compute_inline()
    refuse(s, lambda: s["e"].cache_write("n"), "cache_write(e, n)", "inlined", "no loops")


def test_error_cache_write_unknown_loop():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].cache_write("q"), "cache_write(C, q)", "its loops are m, n, k")


def test_error_from_json_not_json():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: tl.Schedule.from_json("{nope"), "from_json", "not JSON")
    refuse(s, lambda: tl.Schedule.from_json(None), "from_json", "not JSON")


def test_error_from_json_wrong_format():
    s = new("mm", M=5, N=7, K=11)
    good = json.loads(s.to_json())
    refuse(s, lambda: tl.Schedule.from_json(json.dumps({**good, "format": 99})), "from_json",
           "format 1 expected")
    refuse(s, lambda: tl.Schedule.from_json("[1, 2]"), "from_json", "not a tensorlang schedule")


def test_error_from_json_unknown_primitive():
    s = new("mm", M=5, N=7, K=11)
    good = json.loads(s.to_json())
    bad = {**good, "primitives": [{"prim": "explode", "stage": "C"}]}
    refuse(s, lambda: tl.Schedule.from_json(json.dumps(bad)), "from_json", "'explode'", "known: split, reorder")


def test_error_from_json_primitive_missing_fields():
    s = new("mm", M=5, N=7, K=11)
    bad = {**json.loads(s.to_json()), "primitives": [{"prim": "split", "stage": "C", "axis": "m"}]}
    refuse(s, lambda: tl.Schedule.from_json(json.dumps(bad)), "from_json", "split lacks factor, outer, inner")


def test_error_from_json_illegal_primitive_is_checked():
    s = new("mm", M=5, N=7, K=11)
    bad = {**json.loads(s.to_json()), "primitives": [
        {"prim": "split", "stage": "C", "axis": "m", "factor": 0, "outer": "a", "inner": "b"}]}
    refuse(s, lambda: tl.Schedule.from_json(json.dumps(bad)), "split(C, m)", "positive integer")


def test_error_from_json_missing_keys():
    with pytest.raises(tl.ScheduleError, match="from_json"):
        tl.Schedule.from_json(json.dumps({"format": 1}))


def test_error_annotation_messages_name_the_method_called():
    s = new("mm", M=5, N=7, K=11)
    for call, method in [(lambda: s["C"].vectorize("q"), "vectorize"), (lambda: s["C"].unroll("q"), "unroll"),
                         (lambda: s["C"].parallel("k"), "parallel")]:
        with pytest.raises(tl.ScheduleError) as info:
            call()
        assert str(info.value).startswith(f"{method}(C, "), str(info.value)


def test_error_duplicate_name_message_names_the_axis():
    s = new("mm", M=5, N=7, K=11)
    with pytest.raises(tl.ScheduleError, match=r"split\(C, m\)"):
        s["C"].split("m", 2, outer="n")


# ---- primitives that invalidate an earlier one ----
def test_split_of_compute_at_loop_is_refused_or_kept():
    s = new("stencil_red", N=11, K=5)
    s["T"].compute_at(s["O"], "j")
    try:
        s["O"].split("j", 4)
    except tl.ScheduleError:
        return
    text = s.lower()
    # T must still be computed somewhere (checked on the IR: a run can pass by reading a freed buffer that
    # still holds T from an earlier correct run)
    assert any(ln.strip().startswith("T[") for ln in text.splitlines()), text
    run(s, seed=11)


def test_split_of_cached_loop_is_refused_at_split():
    for prim in ("cache_write", "cache_read"):
        s = new("mm", M=5, N=7, K=11)
        if prim == "cache_write":
            s["C"].cache_write("n")
        else:
            s["C"].cache_read("B", "n")
        refuse(s, lambda s=s: s["C"].split("n", 4), "split(C, n)")


def test_parallel_after_compute_at_is_refused_like_compute_at_after_parallel():
    s = tl.schedule(tl.op(PADDED_READ), N=9)
    s["T"].compute_at(s["B"], "i")
    refuse(s, lambda: s["B"].parallel("i"), "parallel(B, i)", "overlap")


# =====================================================================================================
# the docstring examples of each primitive, checked against lower()
# =====================================================================================================
def test_doc_split():
    s = new("scale", N=10)
    s["B"].split("i", 4)
    text = s.lower()
    assert loop_header(text, "i_o") == "for i_o in 0:3:" and loop_header(text, "i_i") == "for i_i in 0:4:"
    assert "i = i_i + i_o*4" in text and "if i <= 9:" in text           # the docstring's `if i < 10`


def test_doc_tile():
    s = new("mm", M=64, N=64, K=4)
    s["C"].tile("m", "n", 32, 32)
    text = s.lower()
    assert loop_order(text) == ["m_o", "n_o", "m_i", "n_i", "k"]
    assert loop_header(text, "m_o") == "for m_o in 0:2:" and loop_header(text, "n_i") == "for n_i in 0:32:"


def test_doc_reorder():
    s = new("mm", M=4, N=4, K=4)
    s["C"].reorder("k", "n")
    # the update nest is m, k, n; k now encloses an output loop, so C is initialised by a nest of its own
    assert loop_order(s.lower()) == ["m", "n", "m", "k", "n"]
    assert encloses(s.lower(), "k", "n")


def test_doc_fuse():
    s = new("tri", M=3, N=4)       # B[j, i]: j in 0:4, i in 0:3, as the docstring's m in 0:4, n in 0:3
    s["B"].fuse("j", "i")
    text = s.lower()
    assert loop_header(text, "j_i") == "for j_i in 0:12:"
    assert "j = j_i//3" in text and "i = j_i%3" in text


def test_doc_vectorize():
    s = new("scale", N=64)
    s["B"].split("i", 16)
    s["B"].vectorize("i_i")
    assert "for i_i in 0:16:  # vectorized\n      i = i_i + i_o*16\n      B[i] = A[i]*2f + 1f" in s.lower()


def test_doc_unroll():
    s = new("rowsum", M=3, K=8)
    s["B"].split("k", 2)
    s["B"].unroll("k_i")
    text = s.lower()
    # lower() keeps the loop, marked; the copies are made by the code generator
    assert loop_header(text, "k_i") == "for k_i in 0:2:  # unrolled"
    assert "B[m] = B[m] + A[m, k]" in text


def test_doc_parallel():
    s = new("mm", M=64, N=4, K=4)
    s["C"].split("m", 8)
    s["C"].parallel("m_o")
    assert loop_header(s.lower(), "m_o") == "for m_o in 0:8:  # parallel"


def test_doc_serial():
    s = new("scale", N=64)
    s["B"].split("i", 16)
    before = s.lower()
    s["B"].vectorize("i_i")
    assert s.lower() != before
    s["B"].serial("i_i")
    assert s.lower() == before


def test_doc_compute_at():
    s = new("blur_i32", N=6)       # P[i] = A[i - 1] where i in 0:N+2, as the docstring's P[y] = I[y-1]
    s["P"].compute_at(s["B"], "i")
    text = s.lower()
    assert encloses(text, "i", "P.i") and loop_header(text, "P.i") == "for P.i in 0:3:"
    # rows i .. i+2 of P, never past its end (i + 2 <= 7): no guard
    assert "P:i = P.i + i" in text and "min(" not in text and "if " not in text
    assert "allocate P: i32[3]" in text and "B[i] = P[0] + 2*P[1] + P[2]" in text  # stored in the loop


def test_doc_compute_inline():
    s = new("chain", N=2, M=2)
    s["T2"].compute_inline()
    s["T1"].compute_inline()
    assert "E[i, j] = " in s.lower() and "A[i, j]*2f + B[i, j]" in s.lower()


def test_doc_compute_root():
    s = new("stencil3", N=13)
    s["B"].compute_at(s["C"], "i")
    s["B"].compute_root()
    assert s.lower() == default_text(s)


def test_doc_cache_write():
    s = new("mm", M=8, N=8, K=4)
    s["C"].tile("m", "n", 4, 4)
    s["C"].reorder("m_o", "n_o", "k", "m_i", "n_i")
    s["C"].cache_write("n_o")
    text = s.lower()
    assert "C_local[m_i, n_i] = 0f" in text
    assert "C_local[m_i, n_i] = C_local[m_i, n_i] + A[m, k]*B[k, n]" in text
    assert "C[m, n] = C_local[m_i, n_i]" in text


def test_doc_cache_read():
    s = new("mm", M=32, N=32, K=512)
    s["C"].split("k", 256)
    s["C"].split("n", 16)
    s["C"].reorder("k_o", "m", "n_o", "k_i", "n_i")
    s["C"].cache_read("B", "k_o", layout=((1, 16), (0, 0), (1, 0)))
    text = s.lower()
    assert "allocate B_C_local: f32[2, 256, 16]" in text
    assert "B_C_local[B_C_local_0, B_C_local_1, B_C_local_2] = B[B_C_local_1 + k_o*256, B_C_local_0*16 + " \
        "B_C_local_2]" in text
    assert "B_C_local[n_o, k_i, n_i]" in text


# =====================================================================================================
# round trips: JSON and the printed Python rebuild the same loop IR
# =====================================================================================================
def _lower_or_error(s: tl.Schedule) -> str:
    """The loop IR text, or the ScheduleError that lowering raises (a schedule an error test left stale)."""
    try:
        return s.lower()
    except tl.ScheduleError as e:
        return f"ScheduleError: {e}"


def roundtrip(s: tl.Schedule) -> None:
    text = _lower_or_error(s)
    again = tl.Schedule.from_json(s.to_json())
    assert again.primitives == s.primitives
    assert again.to_json() == s.to_json()
    assert _lower_or_error(again) == text
    assert _lower_or_error(tl.Schedule.from_json(s.to_json(), op=s.op)) == text
    ns = {"tl": tl, "op": s.op}
    exec(str(s), ns)                                                   # noqa: S102 - our own printed schedule
    assert ns["s"].primitives == s.primitives
    assert _lower_or_error(ns["s"]) == text


@pytest.mark.parametrize("name", sorted(CASES))
def test_roundtrip_case(name):
    s = CASES[name]()
    assert not _lower_or_error(s).startswith("ScheduleError")
    roundtrip(s)


def test_zz_roundtrip_every_schedule_built():
    """Runs last: every schedule the tests above built in this process (the primitive cases at least)."""
    if len(BUILT) < len(CASES):             # run alone or on a worker that got few tests
        for name in sorted(CASES):
            CASES[name]()
    assert len(BUILT) >= len(CASES)
    seen = set()
    for s in BUILT:
        key = s.to_json()
        if key in seen:
            continue
        seen.add(key)
        roundtrip(s)


# =====================================================================================================
# regressions from the schedule fuzzer
# =====================================================================================================
def test_tile_is_atomic():
    s = new("mm", M=5, N=7, K=11)
    s["C"].split("n", 2)   # the loop n no longer exists: tile's second split fails
    before = list(s.primitives)
    with pytest.raises(tl.ScheduleError):
        s["C"].tile("m", "n", 2, 2)
    assert s.primitives == before and "m_o" not in s.lower()


def test_user_loop_names_cannot_clash_with_a_computed_at_stages_loops():
    s = new("stencil3", N=21)
    s["D"].split("i", 4, outer="B_i", inner="C_i")   # names the generated loops of B and C once used
    s["C"].compute_at(s["D"], "B_i")
    s["B"].compute_at(s["D"], "B_i")
    run(s)


def test_cache_write_with_a_reduction_tail_does_not_accumulate_the_tail():
    op = tl.op("def f(A: f32[M, K]) -> B:\n    B[m] += A[m, k] + f32(k)")
    s = tl.schedule(op, M=3, K=13)
    s["B"].split("k", 4)
    s["B"].cache_read("A", "m")
    s["B"].cache_write("m")
    A = np.random.default_rng(0).standard_normal((3, 13)).astype(np.float32)
    expected = (A.astype(np.float64) + np.arange(13)).sum(axis=1).astype(np.float32)
    np.testing.assert_allclose(tl.build(s)(A), expected, rtol=1e-5)


def test_error_inline_of_a_cache_read_tensor():
    s = new("stencil3", N=13)
    s["D"].cache_read("C", "i")
    refuse(s, lambda: s["C"].compute_inline(), "compute_inline(C)", "copies C with cache_read")


def test_error_cache_read_outside_the_loop_its_tensor_is_computed_at():
    s = new("blur_i32", N=17)
    s["B"].split("i", 4)
    s["P"].compute_at(s["B"], "i_i")
    refuse(s, lambda: s["B"].cache_read("P", "i_o"), "cache_read(B, P, i_o)", "computed at the inner loop i_i")


def test_vectorized_reduction_of_a_lane_invariant_value_counts_every_lane():
    op = tl.op("def f(A: f32[M], Z: f32[K]) -> B:\n    B[m] += A[m] + 0.0 * Z[k]")
    s = tl.schedule(op, M=3, K=8)
    s["B"].vectorize("k")
    A = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(tl.build(s)(A, np.zeros(8, np.float32)), A * 8)


def test_error_flat_layout():
    s = new("mm", M=5, N=7, K=11)
    refuse(s, lambda: s["C"].cache_read("B", "m", layout=(0, 1)), "cache_read(C, B, m)", "(dimension, block) pairs")


def test_vectorized_reduction_into_a_padded_cache_write_element_builds():
    """Issue 18, a random-mode fuzz run (seed 2388225041): codegen crashed (TypeError: llvm.vector.reduce.fadd got
    a <4 x float> accumulator) where a vectorized reduction with a tail updates one element of a cache_write tile
    that is read as padding (the fused, split loops leave the tile's index unproven): the lane-invariant guarded
    read was a gather of one address, a vector. It is one scalar load now. (Since the region analysis bounds a
    term of the tile's inner loops alone, `i_j_o // 2` here, the tile's index is proven and this schedule no longer
    reads the element as padding; the fuzzers' random schedules still reach that path.)"""
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


@pytest.mark.parametrize("H", [1, 2, 3])
def test_fused_reduction_loops_keep_a_compute_at_region_disjoint_across_a_parallel_loop(H):
    """Issue 18, CI's fresh fuzz slice (seed 1853178310): with the padding P computed at O's loop w and O's loop h
    parallel, fusing O's reduction loops r and s was refused ("the parts of P that its iterations need overlap"):
    the row index h + r became h + rs // 3, a term the region analysis gave up on (the whole of P's rows, the same
    for every h). A term of the inner loops alone is bounded now (rs // 3 in 0..0), so P's rows move with h; with
    R = 2 the rows do overlap, and each iteration of h computes its rows into a buffer of its own."""
    from tensorlang import schedules
    w = schedules.get("conv2d")
    op = tl.op(w.source)
    s = tl.schedule(op, N=5, C=7, H=H, W=4, F=1, R=1, S=3, stride=1, pad=2, dil=1)
    s["P"].compute_at(s["O"], "w")
    s["P"].unroll("n")
    s["O"].parallel("h")
    s["O"].fuse("r", "s", fused="r_s1")
    I, Wt = w.make_inputs(s.sizes, np.random.default_rng(H))
    assert_close(tl.build(s)(I, Wt), w.reference(I, Wt, **s.sizes), 21)
    s2 = tl.schedule(op, N=5, C=7, H=3, W=4, F=1, R=2, S=3, stride=1, pad=2, dil=1)
    s2["P"].compute_at(s2["O"], "w")
    s2["O"].parallel("h")
    assert s2.lowered(strict=True).guards == 0
    I2, Wt2 = w.make_inputs(s2.sizes, np.random.default_rng(H))
    assert_close(tl.build(s2)(I2, Wt2), w.reference(I2, Wt2, **s2.sizes), 42)



SPLIT_TAIL_PROGRAM = """\
def prog(X: f64[N, 2], Y: f64[N, M], Z: f64[M, K, N]) -> T1:
    T0[i, j] += X[i, j + r + 1] * Y[s, i] where i in 0:1, j in 0:2
    T1[i, j] = select(min(T0[i, j + i], Z[i, 2*j + i, j + i + 1]) < min(X[j, i + 1], T0[j, i + j]), \\
        log(abs(f64(X[j, i])) + 1), T0[i, i]) where i in 0:N+2, j in {J}
"""


def test_a_split_tail_does_not_widen_a_compute_at_region_across_a_parallel_loop():
    """Issue 18, random-mode schedule fuzz (seed 2653242877): T0 computed at T1's parallel loop i, then T1's j (one
    iteration) split by 4 was refused ("the parts of T0 that its iterations need overlap"): the region analysis
    took j = j_o*4 + j_i over 0..3, so T0[j, i + j] spanned columns i..i+3 for every i. The tail iterations are
    guarded (j <= 0) and read nothing: j counts with its domain only, column i alone. Where j really takes two
    values the columns do overlap, and the split is refused as before."""
    op = tl.op(SPLIT_TAIL_PROGRAM.format(J="0:1"))
    s = tl.schedule(op, N=2, M=2, K=7)
    s["T0"].compute_at(s["T1"], "i")
    s["T1"].parallel("i")
    s["T1"].split("j", 4)
    s.lowered(strict=True)
    rng = np.random.default_rng(0)
    X, Y, Z = rng.standard_normal((2, 2)), rng.standard_normal((2, 2)), rng.standard_normal((2, 7, 2))
    want = tl.build(op, schedule="naive", N=2, M=2, K=7)(X, Y, Z)
    np.testing.assert_allclose(tl.build(s)(X, Y, Z), want, rtol=1e-12)
    op2 = tl.op(SPLIT_TAIL_PROGRAM.format(J="0:2"))
    s2 = tl.schedule(op2, N=2, M=2, K=7)
    s2["T0"].compute_at(s2["T1"], "i")
    with pytest.raises(tl.ScheduleError, match=r"parallel\(T1, i\): .*overlap"):
        s2["T1"].parallel("i")



def test_a_split_of_a_split_tail_does_not_widen_a_compute_at_region_across_a_parallel_loop():
    """Issue 18, random-mode schedule fuzz (seed 869164965, find (9)): T1's i split by 3, T0 computed at the outer
    loop i_o, i_o parallel, then the inner i_i (3 iterations) split by 4 was refused ("the parts of T0 that its
    iterations need overlap"): the region analysis took i_i = i_i_o*4 + i_i_i over 0..3, so the rows of T0 that
    iteration i_o reads ran to i_o*3 + 3, the first row of the next. The tail (i_i < 3) is guarded and reads
    nothing: i_i counts with 0..2 only. Where the reads really overlap (T0[i + 1] besides T0[i]) each iteration of
    the parallel loop computes its rows into a buffer of its own."""
    source = "def f(X: f32[N]) -> T1:\n    T0[i] = X[i] * 2.0\n    T1[i] = T0[i]{extra} where i in 0:6\n"
    op = tl.op(source.format(extra=" * 3.0"))
    s = tl.schedule(op, N=7)
    s["T1"].split("i", 3, outer="i_o", inner="i_i")
    s["T0"].compute_at(s["T1"], "i_o")
    s["T1"].parallel("i_o")
    s["T1"].split("i_i", 4)
    s.lowered(strict=True)
    X = np.random.default_rng(0).standard_normal(7).astype(np.float32)
    np.testing.assert_allclose(tl.build(s)(X), X[:6] * 6.0, rtol=1e-6)
    op2 = tl.op(source.format(extra=" + T0[i + 1]"))
    s2 = tl.schedule(op2, N=7)
    s2["T1"].split("i", 3, outer="i_o", inner="i_i")
    s2["T0"].compute_at(s2["T1"], "i_o")
    s2["T1"].parallel("i_o")
    text = s2.lower()
    assert text.index("for i_o in 0:2:  # parallel") < text.index("allocate T0: f32[4]")
    np.testing.assert_allclose(tl.build(s2)(X), 2 * X[:6] + 2 * X[1:7], rtol=1e-6)

# ---- proofs of range that used to need a guard (found by the schedule fuzzer) ----

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


def test_compute_at_region_outside_the_producer_is_dead_code():
    """B reads T only outside T's domain (padding) for some i: the clamped region is empty there, the guard can
    never hold, and strict lowering drops that branch instead of failing to prove the producer's reads."""
    op = tl.op("def f(X: f32[N]) -> B:\n    T[i] = X[2*i] + X[i]\n    B[i] = T[i - 2] where i in 0:5\n")
    for n in (1, 3):
        s = tl.schedule(op, N=n)
        s["T"].compute_at(s["B"], "i")
        s.lowered(strict=True)
        X = np.arange(n, dtype=np.float32) + 1
        T = np.array([X[2 * i] + X[i] for i in range(n) if 2 * i < n], dtype=np.float32)
        want = np.array([T[i - 2] if 0 <= i - 2 < len(T) else 0.0 for i in range(5)], dtype=np.float32)
        np.testing.assert_array_equal(tl.build(s)(X), want)


def test_stages_computed_at_one_loop_read_through_an_inlined_stage():
    """Found by tuning BERT's layer norm (`tune-model`, fifth session of 2026-11-26): `v` reads the inlined `m`, which
    reads `s`; with `s`, `v` and `w` computed at O's loop `i`, the region of `w` asked for `m`'s region through `v`,
    whose region was not known yet, and lowering died with KeyError 'v'. An inlined stage's region is now taken only
    on the way to the tensor asked for."""
    op = tl.op("""
def ln(X: f32[R, D]) -> O:
    s[i] += X[i, r]
    m[i] = s[i] * 0.125
    v[i] += (X[i, r] - m[i]) * (X[i, r] - m[i])
    w[i] = 1.0 / sqrt(v[i] * 0.125 + 1.0)
    O[i, j] = (X[i, j] - m[i]) * w[i]
""")
    sch = tl.schedule(op, R=5, D=8)
    sch["m"].compute_inline()
    for name in ("w", "v", "s"):
        sch[name].compute_at(sch["O"], "i")
    sch["O"].parallel("i")
    X = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    m = X.mean(1, keepdims=True)
    assert_close(tl.build(sch)(X), (X - m) / np.sqrt(((X - m) ** 2).mean(1, keepdims=True) + 1), reduction_len=8)
