"""Where a stage is computed: compute_at, compute_inline, compute_root and reverse_compute_inline. Each keeps the
result identical to numpy; a stage computed at a loop stores the region that loop needs, and no more.

Sizes are small primes that the tiles do not divide. Every schedule is lowered with ``strict=True`` (a guard the
bounds check cannot prove is an internal error) before it is built and run; the helpers (`new`, `case`, `run`,
`refuse`) are in tests/support/schedule_checks.py, and every case registered here is also rebuilt from its JSON and
its printed Python by test_schedule_roundtrip.py.

Run: ``.venv/bin/pytest tests/schedule/test_schedule_placement.py -q``
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from oracle import assert_close
from schedule_cases import encloses, loop_header, loop_order
from schedule_checks import CASES, case, default_text, new, refuse, run

import tensorlang as tl

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
    assert loop_order(text) == ["i", "j", "i", "j_o", "j_i", "j_i"]  # whole vectors, then the masked last one


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
# corner cases the schedule fuzzers reach
# =====================================================================================================
def test_user_loop_names_cannot_clash_with_a_computed_at_stages_loops():
    s = new("stencil3", N=21)
    s["D"].split("i", 4, outer="B_i", inner="C_i")   # names the generated loops of B and C once used
    s["C"].compute_at(s["D"], "B_i")
    s["B"].compute_at(s["D"], "B_i")
    run(s)


@pytest.mark.parametrize("H", [1, 2, 3])
def test_fused_reduction_loops_keep_a_compute_at_region_disjoint_across_a_parallel_loop(H):
    """With the padding P computed at O's loop w and O's loop h parallel, fusing O's reduction loops r and s is
    legal: the row index h + rs // 3 has a term of the inner loops alone, bounded (rs // 3 in 0..0), so P's rows
    move with h and do not overlap; with R = 2 they do, and each iteration of h computes its rows into a buffer of
    its own."""
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
    """T0 computed at T1's parallel loop i, then T1's j (one iteration) split by 4: the tail iterations are guarded
    (j <= 0) and read nothing, so j counts with its domain only (column i alone of T0[j, i + j]) and the split is
    legal. Where j really takes two values the columns do overlap, and the split is refused."""
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
    """T1's i split by 3, T0 computed at the outer loop i_o, i_o parallel, then the inner i_i (3 iterations) split
    by 4: the tail (i_i < 3) is guarded and reads nothing, so i_i counts with 0..2 only and the rows of T0 that
    iteration i_o reads stop before the next one's. Where the reads really overlap (T0[i + 1] besides T0[i]) each
    iteration of the parallel loop computes its rows into a buffer of its own."""
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
    """A layer norm's stages: `v` reads the inlined `m`, which reads `s`; with `s`, `v` and `w` computed at O's loop
    `i`, the region of `w` must not ask for `m`'s region through `v`, whose region is not known yet: an inlined
    stage's region is taken only on the way to the tensor asked for."""
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
