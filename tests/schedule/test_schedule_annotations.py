"""Loop annotations: vectorize, unroll, parallel and serial. Each keeps the result identical to numpy and shows in
the loop IR and the machine code what it did.

Sizes are small primes that the tiles do not divide. Every schedule is lowered with ``strict=True`` (a guard the
bounds check cannot prove is an internal error) before it is built and run; the helpers (`new`, `case`, `run`,
`refuse`) are in tests/support/schedule_checks.py, and every case registered here is also rebuilt from its JSON and
its printed Python by test_schedule_roundtrip.py.

Run: ``.venv/bin/pytest tests/schedule/test_schedule_annotations.py -q``
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from schedule_cases import encloses, loop_header, make_inputs
from schedule_checks import CASES, case, llvm, new, refuse, run

import tensorlang as tl
from tensorlang.target import host_target


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
    left to LLVM's legalisation goes through the stack)."""
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
    chunks have every lane guarded off. Such a chunk must leave the row's sum alone (not store the first row's
    sum into every other row)."""
    text, _ = run(CASES[f"vectorize_reduce_w{w}"]())
    assert loop_header(text, "k_i") == f"for k_i in 0:{w}:  # vectorized"


@pytest.mark.parametrize("program,bits", [("mm", 32), ("mm64", 64)])
def test_wide_vectorized_matmul_tile_runs_in_registers(program, bits):
    """A 48-wide register tile (several vectors per row) keeps its accumulators in vector registers: one
    register-wide FMA per vector, no lanes inserted one by one."""
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
    realigns its stack to the vector width, so that no spill straddles two cache lines (with only the ABI's 16
    bytes, half the stack positions would split them)."""
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
    group of 6, not 112 single-element stores (AVX2 has no scatter instruction)."""
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
    a reciprocal (one exact scalar division a row, `vdivss`; no `vdivps` a vector, which would cost a division per
    vector), with 1/sqrt(0) still inf and the result within an ulp of numpy's."""
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
    _text, k = run(CASES["vectorize_divides"]())
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
    _text, k = run(CASES["vectorize_i32"]())
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
    _text, k = run(CASES["vectorize_gather"]())
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
    _text, k = run(CASES["vectorize_broadcast_other_axis"]())
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
    _text, k = run(CASES["vectorize_innermost_reduction_int"]())
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
    text, _k = run(CASES["unroll_lo"]())
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
# corner cases the schedule fuzzers reach
# =====================================================================================================
def test_vectorized_reduction_of_a_lane_invariant_value_counts_every_lane():
    op = tl.op("def f(A: f32[M], Z: f32[K]) -> B:\n    B[m] += A[m] + 0.0 * Z[k]")
    s = tl.schedule(op, M=3, K=8)
    s["B"].vectorize("k")
    A = np.arange(3, dtype=np.float32)
    np.testing.assert_allclose(tl.build(s)(A, np.zeros(8, np.float32)), A * 8)
