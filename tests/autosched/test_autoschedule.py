"""The auto-scheduler: generated spaces, the zero-trial pick, tl.build's choice of schedule, reverse_compute_inline.

The fuzz test applies configs of generated spaces to random programs (``progen``) and to every workload at tiny
sizes: the rules' pick and random allowed configs must schedule (or be refused with ``ScheduleError`` by a
primitive, which the tuner records as a "schedule" error), lower with every access proven in bounds or guarded
(``strict=True``) and compute what the naive loop nest computes, into outputs prefilled with NaN; a config the
constraint rules out is refused before anything is built. ``TENSORLANG_AUTOSCHED_FUZZ`` sets the number of
programs (default 200: the pick and 3 random allowed configs each, about 800 configs; 5,000 programs, 20,000
configs, is the long mode), ``TENSORLANG_AUTOSCHED_FUZZ_RANDOM=1`` draws new programs instead of CI's fixed set.
"""
from __future__ import annotations

import dataclasses
import math
import os
import random

import numpy as np
import progen
import pytest
import schedfuzz
from hypothesis import HealthCheck, event, given, note, reject, settings
from hypothesis import strategies as st
from oracle import assert_close

import tensorlang as tl
from tensorlang.autosched.problems import Problem, ProblemKind
from tensorlang.autosched.space import GeneratedSpace, generated_space
from tensorlang.choice import choose_schedule, register_schedule_source, unregister_schedule_source

FUZZ_PROGRAMS = int(os.environ.get("TENSORLANG_AUTOSCHED_FUZZ", "120"))
RANDOM = os.environ.get("TENSORLANG_AUTOSCHED_FUZZ_RANDOM", "0") == "1"
RANDOM_CONFIGS = 3

MM = "def mm(A: f32[M, K], B: f32[K, N]) -> C:\n    C[i, j] += A[i, k] * B[k, j]\n"
#: a matmul of B transposed: no built-in workload's structure, so no hand schedule
MMT = "def mmt(A: f32[M, K], B: f32[N, K]) -> C:\n    C[i, j] += A[i, k] * B[j, k]\n"
DENSE = """\
def dense_gelu(X: f32[M, K], W: f32[N, K], b: f32[N]) -> Y:
    D[m, n] += X[m, k] * W[n, k]
    Y[m, n] = 0.5 * (D[m, n] + b[n]) * (1.0 + tanh(0.7978845608 * ((D[m, n] + b[n])
                                                   + 0.044715 * (D[m, n] + b[n]) ** 3)))
"""


# ------------------------------------------------------------------------------------------ fuzz
def _case(src: progen.Src, rng: random.Random):
    from tensorlang import schedules
    if rng.random() < 0.4:
        return schedfuzz.workload_case(rng.choice(list(schedules.WORKLOADS)), src)
    return schedfuzz.progen_case(src)


def _check(case, space: GeneratedSpace, cfg: dict, seed: int) -> str:
    op, sizes = case.op, case.sizes
    try:
        s = space.schedule(op, sizes, cfg)
    except tl.ScheduleError as e:
        return f"refused by a primitive: {str(e).split(':')[0]}"
    s.lowered(strict=True)
    outs = {}
    for o in op.outputs:
        dt = case.baseline[o].dtype
        outs[o] = np.full(s.bound.shapes[o], np.nan if np.issubdtype(dt, np.floating) else 7, dtype=dt)
    inputs = [a.copy() for a in case.inputs]
    k = tl.build(s)
    k(*inputs, out=tuple(outs.values()) if len(outs) > 1 else outs[op.outputs[0]])
    for a, b in zip(inputs, case.inputs):
        np.testing.assert_array_equal(a, b)  # inputs left alone
    for o in op.outputs:
        want = case.baseline[o]
        if case.exact[o]:
            np.testing.assert_array_equal(outs[o], want, err_msg=f"output {o}\nconfig {cfg}\n{s}")
        else:
            got = outs[o]
            if case.compare_f32.get(o):  # an f64 output of f32 values: f32 rounding, reassociated, reaches it
                got, want = got.astype(np.float32), want.astype(np.float32)
            assert_close(got, want, reduction_len=case.reduction_len[o], err_msg=f"output {o}\nconfig {cfg}\n{s}")
    return "checked"


@pytest.mark.slow
@settings(max_examples=FUZZ_PROGRAMS, deadline=None, derandomize=not RANDOM, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(data=st.data())
def test_generated_spaces_never_miscompile(data):
    rng = data.draw(st.randoms(use_true_random=False), label="choices")
    src = progen.Src.from_random(rng)
    try:
        case = _case(src, rng)
    except progen.Reject as e:
        event(f"rejected program: {e}")
        reject()
    note(case.describe())
    space = generated_space(case.op, case.sizes, threads=rng.choice([1, 2, 3]))
    nprng = np.random.default_rng(rng.randrange(2**32))
    try:
        default = space.default()
        assert space.allowed(default), space.problems(default)
        outcome = _check(case, space, default, 0)
        assert outcome == "checked", f"the rules' pick does not schedule: {outcome}\n{default}"
        event("rules' pick: checked")
        refused_one, checked = False, 0
        for i in range(RANDOM_CONFIGS * 20):  # draw until RANDOM_CONFIGS allowed ones are checked
            if checked == RANDOM_CONFIGS:
                break
            cfg = space.random(nprng)
            if not space.allowed(cfg):
                if not refused_one:
                    with pytest.raises(tl.ScheduleError, match="not schedulable"):
                        space.schedule(case.op, case.sizes, cfg)  # refused before anything is built
                    refused_one = True
                continue
            checked += 1
            event(f"random config: {_check(case, space, cfg, i)}")
    finally:
        tl.clear_cache()


@pytest.mark.parametrize("seed", range(4))
def test_generated_space_smoke(seed):
    """A few programs, for runs that skip the slow tests."""
    rng = random.Random(seed)
    case = _case(progen.Src.from_random(rng), rng)
    space = generated_space(case.op, case.sizes, threads=2)
    assert _check(case, space, space.default(), 0) == "checked"


# ------------------------------------------------------------------------------------------ the spaces
def test_matmul_space_has_the_blis_structure():
    op = tl.op(MM)
    sp = generated_space(op, {"M": 256, "N": 256, "K": 256}, threads=2)
    cfg = sp.default()
    assert cfg["C.vec"] == "j" and cfg["C.pack.B"] is True
    plan = sp.plans(cfg)["C"]
    # register tile accumulated in a local buffer, packed panels, the innermost loops unrolled and vectorized
    assert plan.cache_write is not None and plan.vectorize == plan.order[-1]
    low = sp.schedule(op, sp.sizes, cfg).lower()
    assert "C_local" in low and "B_C_local" in low and "# parallel" in low and "# vectorized" in low


def test_convolution_vectorizes_the_filters_and_packs_them():
    from tensorlang import schedules
    w = schedules.get("conv2d")
    op = tl.op(w.source)
    sp = generated_space(op, w.sizes(), threads=2)
    cfg = sp.default()
    # with 16 lanes the filters (64 of them, 4 vectors) give the best register tile; with 8 lanes (AVX2) a tile
    # along the output's width rates alike (8 accumulators, 8 FMAs to 6 loads either way) and the narrower vector
    # wins the tie (it ran at least as fast)
    assert cfg["O.vec"] == ("f" if sp.roles["O"].lanes == 16 else "w") and cfg["O.pack.Wt"] is True
    assert "Wt_O_local" in sp.schedule(op, w.sizes(), cfg).lower()


def blocked_conv(channels: int, hw: int) -> str:
    """A 3x3 convolution in NCHW16c, as the graph compiler writes ResNet-18's: filters [F/16][C/16][3][3][16c][16f]."""
    b = channels // 16
    return (f"def conv16c(I: f32[1, {b}, {hw}, {hw}, 16], W: f32[{b}, {b}, 3, 3, 16, 16]) -> O:\n"
            f"    P[n, c, y, x, u] = I[n, c, y - 1, x - 1, u] where n in 0:1, c in 0:{b}, y in 0:{hw + 2}, "
            f"x in 0:{hw + 2}, u in 0:16\n"
            f"    O[n, o, y, x, v] += P[n, c, y + r, x + s, u] * W[o, c, r, s, u, v] where y in 0:{hw}, x in 0:{hw}\n")


@pytest.fixture
def zen5(monkeypatch):
    """A fixed view of the machine for the pick tests (`znver5`: AVX-512, 32 vector registers, 48 KB of L1 and 1 MB
    of L2 a core), whatever this one is: the picks are analysis, not timings, so a
    test of a pick rule holds on every CPU. What a kernel built from such a space computes is still checked on this
    one (LLVM splits 16-lane vectors into what it has)."""
    from tensorlang.autosched import space as space_module
    from tensorlang.target import Target, host_target
    real = host_target()
    features = ",".join(f for f in real.features.split(",") if "avx512" not in f) + \
        ",+avx512f,+avx512bw,+avx512dq,+avx512vl"
    monkeypatch.setattr(space_module, "host_target", lambda: Target(real.triple, "znver5", features))
    monkeypatch.setattr(space_module, "cache_sizes", lambda: (48 << 10, 1 << 20))


def test_filters_already_blocked_are_read_in_place(zen5):
    # one output block's panel of NCHW16c filters is one contiguous run in the order of the loops: a pack would
    # copy it as it is (ResNet-18's 3x3 convolution at 7 x 7, 512 channels, two threads: 1.43 -> 1.04 ms)
    from tensorlang.autosched.pick import panel_in_place
    sp = generated_space(tl.op(blocked_conv(512, 7)), {}, threads=2)
    pick, st, tile = sp.default(), sp.info.stage("O"), sp.roles["O"].tile_config
    assert pick["O.vec"] == "v" and pick["O.pack.W"] is False, pick
    assert panel_in_place(st, "W", tile(pick))
    assert not panel_in_place(st, "W", tile({**pick, "O.red_order": "r,s,u,c"}))  # c's stride is outside r's
    assert panel_in_place(st, "W", tile({**pick, "O.o.reg": 4}))  # four output blocks: four runs, each in place
    assert not panel_in_place(st, "W", tile({**pick, "O.vw": 8}))  # two register tiles along the vector in a block
    # read in place or packed, the same result (a small one, to build)
    op = tl.op(blocked_conv(32, 5))
    sp = generated_space(op, {}, threads=2)
    cfg = {**sp.default(), "O.o.reg": 1, "O.o.block": 1, "O.parallel": "none"}
    in_place = {**cfg, "O.pack.W": False}
    assert panel_in_place(sp.info.stage("O"), "W", sp.roles["O"].tile_config(in_place))
    assert "W_O_local" not in sp.schedule(op, {}, in_place).lower()
    rng = np.random.default_rng(0)
    I, W = rng.standard_normal((1, 2, 5, 5, 16), np.float32), rng.standard_normal((2, 2, 3, 3, 16, 16), np.float32)
    P = np.pad(I, ((0, 0), (0, 0), (1, 1), (1, 1), (0, 0)))
    want = sum(np.einsum("ncyxu,ocuv->noyxv", P[:, :, r:r + 5, s:s + 5], W[:, :, r, s])
               for r in range(3) for s in range(3))
    for c in (in_place, {**cfg, "O.pack.W": True}):
        assert_close(tl.build(sp.schedule(op, {}, c))(I, W), want.astype(np.float32), 288)


def test_the_pick_takes_the_best_register_tile_whose_working_set_fits_in_l2(zen5):
    # ResNet-18's 3x3 convolution at 7 x 7, 512 channels, in NCHW16c: the most efficient tile by the FMA count
    # (4 output blocks x 7 rows) sweeps 4 blocks' filters over the whole reduction, 1.2 MB, more than a 1 MB L2;
    # the pick takes the best tile that fits (3 x 7: its filters stream from L2, 12 vector loads to 21 FMAs), not
    # that one relaxed knob by knob (to 1 x 7: 7 accumulators, too few to hide the FMA's latency)
    from tensorlang.autosched.pick import register_tiles
    sp = generated_space(tl.op(blocked_conv(512, 7)), {}, threads=2)
    pick, st = sp.default(), sp.info.stage("O")
    knob = {k.name: k for k in sp.roles["O"].knobs}
    reg_values = {v: knob[f"O.{v}.reg"].values for v in st.spatial if f"O.{v}.reg" in knob}
    tiles = register_tiles(st, "v", 16, sp.registers, reg_values, knob["O.vw"].values, {"P", "W"}, sp.l1)
    regs = {v: pick.get(f"O.{v}.reg", 1) for v in st.spatial}
    chosen = next(i for i, (vw, rows, _) in enumerate(tiles)
                  if vw == pick["O.vw"] and all(regs[v] == rows.get(v, 1) for v in st.spatial if v != "v"))
    assert sp.allowed(pick) and not sp.problems(pick)
    for vw, rows, _ in tiles[:chosen]:  # each better tile has a working set beyond L2 with the pick's blocks
        bigger = {**pick, "O.vw": vw, **{f"O.{v}.reg": rows.get(v, 1) for v in st.spatial if v != "v"}}
        assert any(p.stage == "O" and p.kind in (ProblemKind.WORKING_SET, ProblemKind.ACCUMULATORS)
                   for p in sp.problems(bigger)), (vw, rows)
    if sp.l2 <= 1 << 20:  # a 1 MB L2: three output blocks by seven rows
        assert (pick["O.vw"], regs["o"], regs["y"] * regs["x"]) == (16, 3, 7), pick


def test_among_tiles_the_model_rates_alike_the_pick_takes_more_fmas_per_load(zen5):
    # batch_matmul 12 x 128 x 128 x 64: 6 batches x 2 rows x 2 vectors (24 FMAs to 24 loads) and 4 rows x 4
    # vectors (16 to 8) both rate 1.0; the first issues a load per FMA, which leaves no load slot to spare. Above
    # ENOUGH_FMAS_PER_LOAD the ratio no longer decides: 2 vectors x 14 pixels (28 to 16) over 4 x 7 (28 to 11)
    # on a convolution
    from tensorlang import schedules
    from tensorlang.autosched.pick import ENOUGH_FMAS_PER_LOAD, register_tiles, tile_counts, tile_efficiency
    from tensorlang.tuner.task import Task
    t = Task.create("batch_matmul", threads=2, space="generated")
    st = t.space.info.stage("C")
    assert tile_efficiency(st, "j", 32, {"b": 6, "i": 2}, 16) == tile_efficiency(st, "j", 64, {"i": 4}, 16) == 1.0
    assert tile_counts(st, "j", 32, {"b": 6, "i": 2}, 16) == (24, 24.0)
    cfg = t.space.default()
    fmas, loads = tile_counts(st, "j", cfg["C.vw"], {v: cfg[f"C.{v}.reg"] for v in ("b", "i")}, 16)
    assert cfg["C.b.reg"] == 1 and fmas / loads >= ENOUGH_FMAS_PER_LOAD, cfg
    w = schedules.get("conv2d")
    sp = generated_space(tl.op(w.source), w.sizes(), threads=2)
    o = sp.info.stage("O")
    knob = {k.name: k for k in sp.roles["O"].knobs}
    reg_values = {v: knob[f"O.{v}.reg"].values for v in o.spatial if f"O.{v}.reg" in knob}
    vec = sp.default()["O.vec"]
    tiles = register_tiles(o, vec, 16, sp.registers, reg_values, knob["O.vw"].values, {"P", "Wt"})
    vw, rows, _ = tiles[0]
    f, l = tile_counts(o, vec, vw, rows, 16, {"P", "Wt"})
    assert f == 28 and f / l >= ENOUGH_FMAS_PER_LOAD and vw == 32, tiles[:3]


def test_the_start_configs_are_the_pick_then_one_register_tile_per_vector_width():
    from tensorlang import schedules
    from tensorlang.autosched.pick import MAX_STARTS, x_side_in_l2
    from tensorlang.space import config_key
    from tensorlang.tuner.task import Task
    from tensorlang.tuner.tuning import hand_start_configs
    w = schedules.get("conv2d")
    sizes = {"N": 1, "C": 256, "H": 14, "W": 14, "F": 512, "R": 3, "S": 3, "stride": 2, "pad": 1, "dil": 1}
    sp = generated_space(tl.op(w.source), sizes, threads=1)
    starts = sp.variants()
    assert starts[0] == sp.default() and starts == sp.variants()  # the pick first; deterministic
    assert len(starts) == MAX_STARTS and len({config_key(c) for c in starts}) == len(starts)
    tiles = starts[:len(sp.knob("O.vw").values)]
    widths = [c["O.vw"] for c in tiles]
    assert sorted(widths) == sorted(sp.knob("O.vw").values) and all(c["P.place"] == "root" for c in tiles)
    # then the pick with its padded image (at the root) inlined instead, then each of those with the whole image
    # (256 KB) held in L2: every output pixel in one block, the channels unblocked, one register tile of filters a
    # block; then the inlined image at the other widths
    assert starts[len(tiles)]["P.place"] == "inline" and starts[len(tiles)]["O.vw"] == starts[0]["O.vw"]
    held = starts[len(tiles) + 1]
    assert held == x_side_in_l2(sp, starts[0]) and held["P.place"] == "root"
    assert (held["O.h.block"], held["O.w.block"], held["O.c.block"], held["O.pack.P"]) == (7, 7, 256, False)
    assert held["O.f.block"] == min(b for b in sp.knob("O.f.block").values if b >= held["O.vw"])
    assert {k for k in held if held[k] != starts[0][k]} <= {"O.h.block", "O.w.block", "O.c.block", "O.f.block",
                                                              "O.pack.P", "O.parallel"}
    assert {(c["P.place"], c["O.vw"]) for c in starts} == {(p, v) for p in ("root", "inline") for v in widths}
    assert all(sp.allowed(c) for c in starts)
    for c in starts:  # each the best tile the rules find at its width, within the registers
        vecs = -(-c["O.vw"] // sp.roles["O"].lanes)
        assert vecs * c["O.h.reg"] * c["O.w.reg"] <= sp.registers - 4
    task = Task.create("conv2d", sizes=sizes, threads=1, space="generated")
    assert hand_start_configs(task) == task.space.variants()
    # a program without a reduction that has reuse: the pick, then the pick with one of the stages it computes
    # inside another's loops at the root instead (the rules may move what that stage's readers need with it)
    ln = generated_space(tl.op(schedules.get("layernorm").source), schedules.get("layernorm").sizes(), threads=1)
    starts = ln.variants()
    assert starts[0] == ln.default() and 1 < len(starts) <= 4
    for c in starts[1:]:
        moved = [k for k in c if k.endswith(".place") and c[k] != starts[0][k]]
        assert moved and all(c[k] == "root" for k in moved) and ln.allowed(c), c
    # nothing to move, no reuse: one start
    one = generated_space(tl.op("def f(A: f32[N, M]) -> B:\n    B[i, j] = exp(A[i, j])"), {"N": 64, "M": 64}, 1)
    assert one.variants() == [one.default()]


GROUPED = """\
def grouped_conv(I: f32[N, C, H, W], Wt: f32[F, CG, R, S], G: int, FG: int) -> O:
    P[n, c, y, x] = I[n, c, y - 1, x - 1] where y in 0:H+2, x in 0:W+2
    O[n, g, o, h, w] += P[n, g*CG + c, h + r, w + s] * Wt[g*FG + o, c, r, s] where g in 0:G, o in 0:FG
"""


def test_a_packed_window_keeps_the_vector_dimension_innermost():
    # vectorized along w, the padded image's copy P[.., h + r, w + s] needs its w + s dimension innermost (one
    # vector load per row); with h in blocks of one register tile the loops inside the pack met w before h, and
    # the copy came out [.., 34, 9], every vector load a 9-element-stride gather
    op = tl.op(GROUPED)
    sizes = {"N": 1, "C": 16, "H": 12, "W": 20, "F": 16, "CG": 4, "R": 3, "S": 3, "G": 4, "FG": 4}
    sp = generated_space(op, sizes, threads=2)
    cfg = {**sp.default(), "O.vec": "w", "O.pack.P": True, "O.h.block": 1, "O.h.reg": 2, "O.parallel": "outer1"}
    layout = next(lay for t, _at, lay in sp.plans(cfg)["O"].packs if t == "P")
    assert layout[-1] == (3, 0), layout
    s = sp.schedule(op, sizes, cfg)
    rng = np.random.default_rng(1)
    I = rng.standard_normal((1, 16, 12, 20)).astype(np.float32)
    Wt = rng.standard_normal((16, 4, 3, 3)).astype(np.float32)
    want = tl.build(op, schedule="naive", **sizes)(I, Wt)
    assert_close(tl.build(s)(I, Wt), want, reduction_len=36)


def test_epilogue_is_fused_into_the_write_back():
    op = tl.op(DENSE)
    sizes = {"M": 24, "N": 64, "K": 40}
    sp = generated_space(op, sizes, threads=2)
    cfg = sp.default()
    assert cfg["Y.place"] == "epilogue"
    s = sp.schedule(op, sizes, cfg)
    low = s.lower()
    assert "allocate D:" not in low  # D's elements go straight to Y
    rng = np.random.default_rng(0)
    X, W, b = (rng.standard_normal(x).astype(np.float32) for x in ((24, 40), (64, 40), (64,)))
    d = X.astype(np.float64) @ W.T.astype(np.float64) + b
    want = 0.5 * d * (1 + np.tanh(0.7978845608 * (d + 0.044715 * d ** 3)))
    assert_close(tl.build(s)(X, W, b), want.astype(np.float32), reduction_len=40)


def test_softmax_statistics_are_computed_per_row():
    from tensorlang import schedules
    w = schedules.get("softmax")
    op = tl.op(w.source)
    sp = generated_space(op, {"N": 64, "D": 256}, threads=2)
    cfg = sp.default()
    assert cfg["mx.place"] == "at" and cfg["sm.place"] == "at"
    attach, _ = sp.attach_loops(cfg, sp.plans(cfg))
    assert sp.plans(cfg)["Y"].levels[attach["mx"]][0] == "n"  # a loop over rows, not inside one


@pytest.mark.parametrize("D", [256, 200, 40])
def test_a_stage_inside_a_row_loop_takes_its_vector_width(D):
    # the row statistics of softmax, computed in Y's row loop, accumulate in vw lanes (four vectors at 64: the
    # max's and the add's latency hidden, as the hand schedule does); they were always one vector of 16, and
    # their vw knob a dead one that canonical() threw away
    from tensorlang import schedules
    w = schedules.get("softmax")
    op = tl.op(w.source)
    sizes = {"N": 6, "D": D}
    sp = generated_space(op, sizes, threads=2)
    for vw in sp.knob("sm.vw").values:
        cfg = {**sp.default(), "sm.vw": vw, "mx.vw": vw}
        assert sp.canonical(cfg)["sm.vw"] == vw
        s = sp.schedule(op, sizes, cfg)
        width = vw if D >= vw else 16
        assert f"allocate sm_acc: f32[{width}]" in s.lower() and f"allocate mx_acc: f32[{width}]" in s.lower()
        X = w.make_inputs(sizes, np.random.default_rng(vw))[0]
        out = np.full((6, D), np.nan, np.float32)
        tl.build(s)(X, out=out)
        assert_close(out, w.reference(X, **sizes), reduction_len=D)



def test_the_pick_leaves_a_strided_window_to_llvm():
    # maxpool at stride 2: the plain loop, which LLVM vectorizes with two loads and a shuffle and ends with scalar
    # code, is faster than the template's vectors along w (I[.., w*2 + s]), whose last one is masked
    from tensorlang import schedules
    for name in ("maxpool2d", "avgpool2d"):
        w = schedules.get(name)
        op = tl.op(w.source)
        sizes = {"N": 1, "C": 3, "H": 10, "W": 38, "KH": 2, "KW": 2, "stride": 2}
        sp = generated_space(op, sizes, threads=2)
        cfg = sp.default()
        assert cfg["O.vec"] is None, (name, cfg)
        (I,) = w.make_inputs(sizes, np.random.default_rng(0))
        assert_close(tl.build(sp.schedule(op, sizes, cfg))(I), w.reference(I, **sizes), reduction_len=4)
    # unit stride stays vectorized by the rules
    sp = generated_space(tl.op("def f(X: f32[N, M]) -> Y:\n    Y[n, m] max= X[n, m + s] where s in 0:3"),
                         {"N": 64, "M": 64}, threads=2)
    assert sp.default()["Y.vec"] == "m"


INTERLEAVE = """\
def interleave(R: f32[H, W], G: f32[H, W], B: f32[H, W]) -> O:
    O[y, x, c] = select(c == 0, R[y, x] * 2.0, select(c == 1, G[y, x] + R[y, x], B[y, x] - G[y, x])) where c in 0:3
"""


@pytest.mark.parametrize("H, W", [(4, 37), (9, 64)])
def test_the_pick_unrolls_a_variable_its_selects_test(H, W):
    """`select(c == 0, ...)` over a short variable (colours, a quad's sites, Winograd's transform rows): the pick
    unrolls `c` whole, so that each copy computes the side its condition chooses (vectorized along `c`, every
    element computed all three), and vectorizes along another variable; numpy agrees."""
    from tensorlang.autosched.space import unrolled_selectors, vec_candidates
    op = tl.op(INTERLEAVE)
    sp = generated_space(op, {"H": H, "W": W}, threads=2)
    st = sp.info.stage("O")
    assert st.selectors == ("c",) and unrolled_selectors(st) == ("c",)
    assert vec_candidates(st)[-2:] == ("c", None)  # a candidate still, for the search, after the others
    cfg = sp.default()
    assert cfg["O.vec"] != "c" and cfg["O.c.reg"] == 3, cfg
    s = sp.schedule(op, {"H": H, "W": W}, cfg)
    assert "unroll(\"c\")" in str(s)
    rng = np.random.default_rng(W)
    R, G, B = (rng.standard_normal((H, W)).astype(np.float32) for _ in range(3))
    want = np.stack([R * 2, G + R, B - G], axis=-1)
    assert_close(tl.build(s)(R, G, B), want, reduction_len=1)


def test_selects_that_read_data_or_test_long_variables_unroll_nothing():
    """A condition that reads a tensor (`select(M[i] > 0, ...)`) folds in no copy; a variable longer than
    `SELECT_UNROLL` is not unrolled (a concatenation along 64 channels); the product of the unrolled extents stays
    within it."""
    from tensorlang.autosched.analysis import analyze
    from tensorlang.autosched.space import SELECT_UNROLL, unrolled_selectors
    data = analyze(tl.op("def f(M: f32[N], A: f32[N]) -> O:\n    O[i] = select(M[i] > 0.0, A[i], 0.0)"), {"N": 8})
    assert data.stage("O").selectors == ()
    cat = analyze(tl.op("def f(A: f32[N], B: f32[N]) -> O:\n"
                        "    O[c, i] = select(c < 32, A[i], B[i]) where c in 0:64"), {"N": 8}).stage("O")
    assert cat.selectors == ("c",) and unrolled_selectors(cat) == ()
    many = analyze(tl.op("def f(A: f32[N]) -> O:\n    O[a, b, c, i] = select(a == 0 and b == 1 and c == 2, A[i], "
                         "0.0) where a in 0:4, b in 0:4, c in 0:4"), {"N": 32}).stage("O")
    assert many.selectors == ("a", "b", "c") and unrolled_selectors(many) == ("a", "b")
    assert 4 * 4 <= SELECT_UNROLL < 4 * 4 * 4


SLICE_GATHER = """\
def slices(V: f32[6, R, X], S: i32[D], T: i32[D]) -> O:
    O[y, x] max= max(V[S[d], y + T[d], x + d], V[S[d], y + 2 * T[d], x + d]) where y in 0:R-16, x in 0:X-D
"""


def test_a_tile_that_gathers_rows_counts_the_rows_it_can_reach():
    """A read whose row is a value loaded from data (`V[S[d], y + T[d], x]`: the max filter's slices) reaches one
    row per value of its variables inside a register tile, not every row of the tensor: counting every row, no tile
    fit L2 and the pick did not schedule. The pick schedules, and numpy agrees."""
    sizes = {"R": 2048, "X": 400, "D": 16}
    op = tl.op(SLICE_GATHER)
    sp = generated_space(op, sizes, threads=2)
    assert not sp.problems(sp.default())
    rng = np.random.default_rng(3)
    V = rng.standard_normal((6, 2048, 400)).astype(np.float32)
    S = rng.integers(0, 6, 16).astype(np.int32)
    T = rng.integers(0, 9, 16).astype(np.int32)
    y, x = np.arange(2048 - 16)[:, None], np.arange(400 - 16)[None, :]
    want = np.max([np.maximum(V[S[d], y + T[d], x + d], V[S[d], y + 2 * T[d], x + d]) for d in range(16)], axis=0)
    np.testing.assert_array_equal(tl.build(sp.schedule(op, sizes, sp.default()))(V, S, T), want)


PRODUCTS = """\
def corners(X: f32[H, W]) -> R:
    Ix[y, x] = X[y + 1, x + 2] - X[y + 1, x] where y in 0:H-2, x in 0:W-2
    Iy[y, x] = X[y + 2, x + 1] - X[y, x + 1] where y in 0:H-2, x in 0:W-2
    Pxx[y, x] = Ix[y, x] * Ix[y, x]
    Pxy[y, x] = Ix[y, x] * Iy[y, x]
    Sxx[y, x] += Pxx[y + a, x + b] where a in 0:3, b in 0:3
    Sxy[y, x] += Pxy[y + a, x + b] where a in 0:3, b in 0:3
    R[y, x] = Sxx[y, x] * Sxx[y, x] - 0.04 * Sxy[y, x]
"""


@pytest.mark.parametrize("H, W", [(12, 40), (74, 135)])
def test_products_under_a_small_window_sum_are_computed_in_its_tile(H, W):
    """Harris's shape: products of gradients summed over 3 x 3 by reductions that the pick computes in the output's
    tile. The products are computed in that tile too (with their halo) rather than written whole to memory, and the
    output's tile gets rows, so that the halo is a fraction of it; numpy agrees."""
    from tensorlang.autosched.pick import window_vars
    op = tl.op(PRODUCTS)
    sizes = {"H": H, "W": W}
    sp = generated_space(op, sizes, threads=2)
    cfg = sp.default()
    assert cfg["Pxx.place"] == cfg["Pxy.place"] == cfg["Sxx.place"] == "at", cfg
    assert window_vars(sp, cfg, sp.info.stage("R")) == {"x": 3, "y": 3}
    if H >= 32:
        assert cfg["R.y.reg"] > 1, cfg
    X = np.random.default_rng(H).standard_normal((H, W)).astype(np.float32)
    ix = X[1:H - 1, 2:W] - X[1:H - 1, 0:W - 2]
    iy = X[2:H, 1:W - 1] - X[0:H - 2, 1:W - 1]

    def box(P):
        return sum(P[a:a + H - 4, b:b + W - 4] for a in range(3) for b in range(3))
    sxx, sxy = box(ix.astype(np.float64) ** 2), box(ix.astype(np.float64) * iy)
    assert_close(tl.build(sp.schedule(op, sizes, cfg))(X), (sxx * sxx - 0.04 * sxy).astype(np.float32), reduction_len=9)


@pytest.mark.parametrize("stride, K", [(2, 3), (2, 5), (3, 3)])
def test_a_depthwise_convolution_at_a_stride_is_vectorized_along_x_without_gathers(stride, K, zen5):
    # NCHW, one filter a channel: across the channels every lane is a gather (X's channels lie H*W apart), along x
    # the lanes lie `stride` apart, which the vectors read as the span of their lanes and a shuffle
    from tensorlang.runtime import llvm_ir_of
    from tensorlang.target import host_target
    H = W = 2 * 14 + K
    src = ("def dw(X: f32[C, H, W], F: f32[C, K, K]) -> O:\n"
           f"    O[c, y, x] += X[c, {stride}*y + r, {stride}*x + s] * F[c, r, s] "
           f"where y in 0:{(H - K) // stride + 1}, x in 0:{(W - K) // stride + 1}, r in 0:K, s in 0:K")
    op = tl.op(src)
    sizes = {"C": 96, "H": H, "W": W, "K": K}
    sp = generated_space(op, sizes, threads=2)
    cfg = sp.default()
    assert cfg["O.vec"] == "x", cfg
    sched = sp.schedule(op, sizes, cfg)
    assert "masked.gather" not in llvm_ir_of(sched, host_target())[1]
    rng = np.random.default_rng(stride * K)
    X = rng.standard_normal((96, H, W)).astype(np.float32)
    Fw = rng.standard_normal((96, K, K)).astype(np.float32)
    n = (H - K) // stride + 1
    want = sum(X[:, r:r + stride * (n - 1) + 1:stride, s:s + stride * (n - 1) + 1:stride] * Fw[:, r, s][:, None, None]
               for r in range(K) for s in range(K))
    assert_close(tl.build(sched)(X, Fw), want, reduction_len=K * K)


@pytest.mark.parametrize("H, W", [(67, 301), (3, 5)])
def test_the_pick_vectorizes_a_lookup_table_read(H, W):
    """A tone curve read at indices loaded from the image (the camera pipe's `curve[clamp(corrected, 0, 1023)]`)
    gathers in every vector whatever the loop: vectorized by hand, not left to LLVM (which leaves it scalar), and
    numpy agrees at every index, the clamped ends included."""
    from tensorlang.autosched.pick import indirect
    src = ("def tone(I: i32[H, W], curve: u8[1024]) -> O:\n"
           "    O[y, x] = curve[clamp(I[y, x] * 3 - 100, 0, 1023)]\n")
    op = tl.op(src)
    sp = generated_space(op, {"H": H, "W": W}, threads=2)
    assert [indirect(r) for r in sp.info.stage("O").reads] == [True, False]
    cfg = sp.default()
    if W >= 16:
        assert cfg["O.vec"] == "x"
    rng = np.random.default_rng(H)
    I = rng.integers(-50, 450, (H, W)).astype(np.int32)
    curve = rng.integers(0, 256, 1024).astype(np.uint8)
    want = curve[np.clip(I * 3 - 100, 0, 1023)]
    np.testing.assert_array_equal(tl.build(sp.schedule(op, {"H": H, "W": W}, cfg))(I, curve), want)


BLUR = """\
def blur(X: f32[H, W]) -> B:
    T[y, x] = (X[y, x] + 2.0 * X[y + 1, x] + X[y + 2, x]) * 0.25
    B[y, x] = (T[y, x] + 2.0 * T[y, x + 1] + T[y, x + 2]) * 0.25
"""


CHAIN = """\
def chain(X: f32[N]) -> E:
    B[i] = X[i] + X[i + 1] + X[i + 2] + X[i + 3] + X[i + 4]
    C[i] = B[i] + B[i + 1] + B[i + 2] + B[i + 3] + B[i + 4]
    D[i] = C[i] + C[i + 1] + C[i + 2] + C[i + 3] + C[i + 4]
    E[i] = D[i] + D[i + 1] + D[i + 2] + D[i + 3] + D[i + 4]
"""


def test_a_chain_of_stencils_computes_each_stage_once():
    """A stage inlined into a reader that reads it at several points is computed again at each of them: B inlined
    into C would cost 5 x 5 = 25 loads a point of C (MAX_WINDOW_RECOMPUTE is 16), and so on down the chain (D
    inlined into E: 625, the bilateral grid's 2000 loads a pixel and 138 s compile once). So each stage gets a
    buffer at the root, which the window reads, and the chain still computes what numpy computes."""
    from tensorlang.autosched.pick import MAX_WINDOW_RECOMPUTE, inlined_loads, rule_config, window_points
    op = tl.op(CHAIN)
    sizes = {"N": 4000}
    sp = generated_space(op, sizes, threads=2)
    cfg = rule_config(sp)
    assert [cfg[f"{name}.place"] for name in "BCD"] == ["root"] * 3
    assert window_points(sp.info.stage("C"), "B") == 5
    assert inlined_loads(sp.info, {"B": "inline"})["C"] == 25 > MAX_WINDOW_RECOMPUTE
    X = np.random.default_rng(0).standard_normal(4000).astype(np.float32)
    want = X.astype(np.float64)
    for _ in range(4):
        want = sum(want[k:len(want) - 4 + k] for k in range(5))
    assert_close(tl.build(sp.schedule(op, sizes, cfg))(X), want.astype(np.float32), reduction_len=625)


GRADIENTS = """\
def gradients(I: f32[3, H, W]) -> S:
    g[y, x] = 0.25 * I[0, y, x] + 0.5 * I[1, y, x] + 0.25 * I[2, y, x]
    Ix[y, x] = g[y, x + 2] - g[y, x] + 2.0 * (g[y + 1, x + 2] - g[y + 1, x]) + g[y + 2, x + 2] - g[y + 2, x]
    P[y, x] = Ix[y, x] * Ix[y, x]
    S[y, x] += P[y + a, x + b] where a in 0:3, b in 0:3
"""


@pytest.mark.parametrize("H, W", [(517, 389), (13, 17)])
def test_a_stage_read_at_several_points_is_inlined_only_where_recomputing_it_stays_cheap(H, W):
    """Harris's first stages: the gray value (3 loads) read at 6 points by the gradient would cost 18 loads a
    point inlined (above MAX_WINDOW_RECOMPUTE): computed once at the root; the gradient, read at one point by
    the product, is inlined into it; the product, 6 loads, summed over a 3x3 window (54): at the root. numpy
    checks each."""
    from tensorlang.autosched.pick import rule_config
    op = tl.op(GRADIENTS)
    sp = generated_space(op, {"H": H, "W": W}, threads=2)
    cfg = rule_config(sp)
    assert (cfg["g.place"], cfg["Ix.place"], cfg["P.place"]) == ("root", "inline", "root")
    I = np.random.default_rng(H).standard_normal((3, H, W)).astype(np.float32)
    g = 0.25 * I[0] + 0.5 * I[1] + 0.25 * I[2]
    g = g.astype(np.float64)
    Ix = (g[:-2, 2:] - g[:-2, :-2]) + 2 * (g[1:-1, 2:] - g[1:-1, :-2]) + (g[2:, 2:] - g[2:, :-2])
    P = Ix * Ix
    want = sum(P[a:a + H - 4, b:b + W - 4] for a in range(3) for b in range(3))
    assert_close(tl.build(sp.schedule(op, {"H": H, "W": W}, cfg))(I), want.astype(np.float32), reduction_len=81)


@pytest.mark.parametrize("H, W", [(263, 301), (9, 23)])
def test_a_stencil_reduction_keeps_eight_accumulators_and_unrolls_its_taps(H, W):
    """A 5x5 stencil written as a reduction (`+=` over the taps) at the root: vectorized along x in two vectors
    with 4 rows along y (8 accumulators, each its own chain of FMAs) and the x taps unrolled, so each tap's
    offset is a constant. The max filter's horizontal pass is vectorized along x, not along its taps (whose
    lanes would be combined per output). numpy checks both."""
    from tensorlang.autosched.pick import rule_config
    src = ("def s(I: f32[H, W]) -> O:\n"
           "    T[y, x] += I[y + j, x + i] * f32((i + 1) * (j + 1)) where i in 0:5, j in 0:5\n"
           "    O[y, x] max= T[y, x + r] where r in 0:17\n")
    op = tl.op(src)
    sizes = {"H": H, "W": W}
    sp = generated_space(op, sizes, threads=2)
    cfg = rule_config(sp)
    assert cfg["T.place"] == "root" and cfg["T.vec"] == "x"
    if H >= 16:  # (at 3 outputs a row, O's 17 taps make the longer vector)
        two_vectors = 2 * sp.roles["T"].lanes  # 16 floats with AVX2, 32 with AVX-512
        assert cfg["O.vec"] == "x" and cfg["T.vw"] == two_vectors and cfg["T.y.reg"] == 4 and cfg["T.ku"] == 5
    I = np.random.default_rng(W).standard_normal((H, W)).astype(np.float64)
    T = sum(I[j:j + H - 4, i:i + W - 4] * ((i + 1) * (j + 1)) for i in range(5) for j in range(5))
    want = np.max([T[:, r:r + W - 20] for r in range(17)], axis=0)
    got = tl.build(sp.schedule(op, sizes, cfg))(I.astype(np.float32))
    assert_close(got, want.astype(np.float32), reduction_len=25)


@pytest.mark.parametrize("H, W", [(2048, 2048), (23, 45)])
def test_a_stencil_gets_rows_of_its_window_in_a_register_tile(H, W, zen5):
    # a separable blur with its vertical pass inlined reads X through a 3-row window: the pick unrolls 8 rows of
    # the output so each loaded row of X serves the three output rows that need it; rows along the horizontal
    # window (the vector's) are no use, and with the vertical pass at the
    # root the horizontal one has no vertical window left
    from tensorlang.autosched.pick import rule_config, window_vars
    op = tl.op(BLUR)
    sp = generated_space(op, {"H": H, "W": W}, threads=2)
    cfg = rule_config(sp)
    assert cfg["T.place"] == "inline" and cfg["B.vec"] == "x"
    assert window_vars(sp, cfg, sp.info.stage("B")) == {"x": 3, "y": 3}
    assert cfg["B.y.reg"] == 8 and cfg["B.x.reg"] == 1
    root = rule_config(sp, place={"T": "root"})
    assert window_vars(sp, root, sp.info.stage("B")) == {"x": 3} and root["B.y.reg"] == 1
    assert root["T.y.reg"] == 8  # T's own window along y
    (X,) = [np.random.default_rng(0).standard_normal((H, W)).astype(np.float32)]
    T = (X[:-2] + 2 * X[1:-1] + X[2:]) * 0.25
    want = (T[:, :-2] + 2 * T[:, 1:-1] + T[:, 2:]) * 0.25
    for c in (cfg, root):
        s = sp.schedule(op, {"H": H, "W": W}, c)
        s.lowered(strict=True)
        assert_close(tl.build(s)(X), want, reduction_len=9)


def test_the_pick_gives_a_stage_inside_a_tile_one_vector():
    # an elementwise stage computed inside its reader's tile covers that tile only: wider than it, the vector is
    # mostly masked (T1 of `elementwise` at 64 lanes inside a 32-wide tile)
    from tensorlang import schedules
    w = schedules.get("elementwise")
    sp = generated_space(tl.op(w.source), {"N": 64, "M": 256}, threads=2)
    cfg = sp.default()
    assert cfg["T1.place"] == "at" and cfg["T1.vw"] == sp.knob("T1.vw").values[0]


def test_a_stage_inside_a_tile_that_never_runs_past_its_end_is_not_guarded():
    # T1 and T2 of `elementwise` computed at E's 32-wide tiles of 1,024 columns: the tiles' columns j_t*32 ..
    # j_t*32 + 31 stay inside; a guard there would keep T1's vector loop from vectorizing
    from tensorlang import schedules
    w = schedules.get("elementwise")
    op = tl.op(w.source)
    for sizes, guarded in (({"N": 8, "M": 1024}, False), ({"N": 8, "M": 1000}, True)):
        sp = generated_space(op, sizes, threads=2)
        cfg = sp.default()
        assert cfg["T1.place"] == "at" and cfg["T2.place"] == "at"
        s = sp.schedule(op, sizes, cfg)
        assert ("if T1:j" in s.lower()) == guarded, s.lower()
        A, B = w.make_inputs(sizes, np.random.default_rng(0))
        assert_close(tl.build(s)(A, B), w.reference(A, B, **sizes))


def test_the_pick_blocks_a_long_transpose_and_keeps_vectors_on_a_short_one():
    # vectors of gathers along 1,024 rows 4 KB apart touch more lines than L1 keeps (one set): blocks of a vector
    # each way, copied transposed (in registers) so that the stage keeps a vector of contiguous loads (faster than
    # blocks of scalars, themselves faster than the gathers); where the space offers no
    # pack (a read that is no transpose of whole dimensions), blocks of scalars; NCHW16c to NCHW reads 112 lines
    # 64 bytes apart, which L1 keeps: vectors stay, unpacked
    op = tl.op("def t(X: f32[M, N]) -> Y:\n    Y[j, i] = X[i, j]\n")
    sp = generated_space(op, {"M": 1024, "N": 1024}, threads=2)
    cfg = sp.default()
    lanes = sp.roles["Y"].lanes
    assert cfg["Y.vec"] == "i" and cfg["Y.pack.X"] and cfg["Y.vw"] == lanes, cfg
    assert cfg["Y.i.block"] <= lanes and cfg["Y.j.block"] <= lanes, cfg
    X = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    np.testing.assert_array_equal(tl.build(sp.schedule(op, sp.sizes, cfg))(X), X.T)
    unpacked = dataclasses.replace(sp.roles["Y"].offered, pack=())
    from tensorlang.autosched import pick
    tile = sp.roles["Y"].tile_config(dict(cfg, **{"Y.vec": "i", "Y.pack.X": False}))
    tile = pick._transpose_tiles(sp, sp.info.stage("Y"), tile, unpacked, lanes)
    assert tile.vec is None and not tile.pack, tile
    op2 = tl.op("def f(X: f32[N, CB, H, W, V]) -> Y:\n    Y[n, cb, v, h, w] = X[n, cb, h, w, v]\n")
    sp2 = generated_space(op2, {"N": 1, "CB": 2, "H": 4, "W": 112, "V": 16}, threads=2)
    assert sp2.default()["Y.vec"] == "w" and not sp2.default().get("Y.pack.X")


def test_the_pick_keeps_a_thin_x_blocks_vector_side_in_l2():
    # matmul 1024: X blocks of two register tiles each swept the whole packed B (4 MB, from L3); the reduction
    # is blocked so that B's block fits half of L2, and the X blocks grow with it
    import math
    sp = generated_space(tl.op(MM), {"M": 1024, "N": 1024, "K": 1024}, threads=2)
    cfg = sp.default()
    b_block = min(cfg["C.j.block"], 1024) * cfg["C.k.block"] * 4
    assert b_block <= sp.l2 // 2 and cfg["C.k.block"] >= 128, cfg
    assert math.ceil(cfg["C.i.block"] / cfg["C.i.reg"]) > 2, cfg
    # a convolution's X blocks hold many register tiles: its packed filters stay whole along the channels
    from tensorlang import schedules
    w = schedules.get("conv2d")
    sizes = {"N": 1, "C": 128, "H": 28, "W": 28, "F": 128, "R": 3, "S": 3, "stride": 1, "pad": 1, "dil": 1}
    assert generated_space(tl.op(w.source), sizes, threads=2).default()["O.c.block"] == 128

def test_constraint_rules_out_register_tiles_beyond_the_registers():
    op = tl.op(MM)
    sp = generated_space(op, {"M": 256, "N": 256, "K": 256}, threads=1)
    cfg = {**sp.default(), "C.vw": max(sp.knob("C.vw").values), "C.i.reg": 16}
    assert not sp.allowed(cfg)
    assert [(p.stage, p.kind) for p in sp.problems(cfg)] == [("C", ProblemKind.ACCUMULATORS)]
    assert str(sp.problems(cfg)[0]).endswith(" vector accumulators")
    with pytest.raises(tl.ScheduleError, match="not schedulable"):
        sp.schedule(op, sp.sizes, cfg)


@pytest.mark.parametrize("seed", range(6))
def test_the_register_budget_checked_first_agrees_with_the_loop_plans(seed):
    """`allowed` asks the register budget of the tile configs before any loop plan
    (template.register_accumulators): on random programs and configs it counts what the plans count, and allowed
    says what the full list of problems says."""
    from tensorlang import schedules
    from tensorlang.autosched.template import accumulators, plan_loops, register_accumulators
    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    programs = [(tl.op(w.source), w.sizes()) for w in map(schedules.get, ("conv2d", "matmul", "softmax",
                                                                           "depthwise_conv2d"))]
    for _ in range(4):
        case = _case(progen.Src.from_random(rng), rng)
        programs.append((case.op, case.sizes))
    for op, sizes in programs:
        sp = generated_space(op, sizes, threads=2)
        for _ in range(60):
            cfg = sp.canonical(sp.random(nprng))
            for stage in sp.info.stages:
                if sp.placement(cfg, stage.name) == "root":
                    role = sp.roles[stage.name]
                    tile = role.tile_config(cfg)
                    assert register_accumulators(stage, tile, role.lanes) == \
                        accumulators(plan_loops(stage, tile, role.lanes), role.lanes), (stage.name, cfg)
            assert sp.allowed(cfg) == (not sp.problems(cfg)), cfg


def test_pick_is_deterministic_and_quick():
    import time

    from tensorlang import schedules
    for name in ("conv2d", "softmax", "dense_bias_relu"):
        w = schedules.get(name)
        op = tl.op(w.source)
        t0 = time.perf_counter()
        a = generated_space(op, w.sizes(), threads=2).default()
        assert time.perf_counter() - t0 < 1.0
        assert a == generated_space(op, w.sizes(), threads=2).default()


# ------------------------------------------------------------------------------------------ reverse_compute_inline
BIAS_RELU = """\
def f(X: f32[M, K], W: f32[K, N], b: f32[N]) -> Y:
    D[m, n] += X[m, k] * W[k, n]
    Y[m, n] = max(D[m, n] + b[n], 0.0)
"""


def _inputs(M=13, N=40, K=50):
    rng = np.random.default_rng(1)
    return [rng.standard_normal(x).astype(np.float32) for x in ((M, K), (K, N), (N,))]


@pytest.mark.parametrize("variant", ["innermost", "tile", "tile_parallel", "blocked_reduction"])
def test_reverse_compute_inline_keeps_the_result(variant):
    op = tl.op(BIAS_RELU)
    X, W, b = _inputs()
    want = np.maximum(X.astype(np.float64) @ W + b, 0).astype(np.float32)
    s = tl.schedule(op, M=13, N=40, K=50)
    d = s["D"]
    if variant != "innermost":
        no, ni = d.split("n", 16)
        mo, mi = d.split("m", 4)
        if variant == "blocked_reduction":
            ko, ki = d.split("k", 16)
            d.reorder(no, ko, mo, ki, mi, ni)
        else:
            d.reorder(no, mo, "k", mi, ni)
        d.vectorize(ni)
        d.unroll(mi)
        d.cache_write(mo)
        if variant == "tile_parallel":
            d.parallel(no)
    s["Y"].reverse_compute_inline()
    low = s.lower()
    assert "for m in" not in low.split("Y[")[0] or variant == "innermost"
    assert ("allocate D:" in low) == (variant in ("innermost", "blocked_reduction"))  # partial sums need D
    assert 's["Y"].reverse_compute_inline()' in str(s)
    assert tl.Schedule.from_json(s.to_json()).lower() == low
    out = np.full((13, 40), np.nan, np.float32)
    tl.build(s)(X, W, b, out=out)
    assert_close(out, want, reduction_len=50)


def test_reverse_compute_inline_before_and_after():
    op = tl.op(BIAS_RELU)
    s = tl.schedule(op, M=2, N=3, K=4)
    s["Y"].reverse_compute_inline()
    assert s.lower() == """\
def f(X: f32[2, 4], W: f32[4, 3], b: f32[3], Y: f32[2, 3]):
  allocate D: f32[2, 3]
  for m in 0:2:
    for n in 0:3:
      D[m, n] = 0f
      for k in 0:4:
        D[m, n] = D[m, n] + X[m, k]*W[k, n]
      Y[m, n] = max(D[m, n] + b[n], 0f)"""


@pytest.mark.parametrize("source, stage, message", [
    ("def f(A: f32[N, K]) -> Y:\n    D[n] += A[n, k]\n    Y[n] += D[n] * A[n, k]", "Y", "is a reduction"),
    ("def f(A: f32[N]) -> Y:\n    D[n] = A[n] * 2.0\n    Y[n] = D[n] + 1.0", "Y", "D is not a reduction"),
    ("def f(A: f32[N, K]) -> Y:\n    D[n] += A[n, k]\n    Y[n] = D[n] + A[n, 0]\n", "D", "is a reduction"),
    ("def f(A: f32[N, K]) -> (D, Y):\n    D[n] += A[n, k]\n    Y[n] = D[n] + 1.0", "Y", "is an output"),
    ("def f(A: f32[N, K]) -> (Y, Z):\n    D[n] += A[n, k]\n    Y[n] = D[n] + 1.0\n    Z[n] = D[n] * 2.0",
     "Y", "also read by Z"),
    ("def f(A: f32[N, K]) -> Y:\n    D[n] += A[n, k]\n    Y[n] = D[n] + D[0]", "Y", r"not D\[n\]"),
    ("def f(A: f32[N, K]) -> Y:\n    D[n] += A[n, k]\n    Y[n] = D[N - 1 - n]", "Y", r"not D\[n\]"),
    ("def f(A: f32[N, K], B: f32[N]) -> Y:\n    D[n] += A[n, k]\n    E[n] += A[n, k] * B[n]\n"
     "    Y[n] = D[n] + E[n]", "Y", "exactly one stage"),
])
def test_reverse_compute_inline_refusals(source, stage, message):
    op = tl.op(source)
    s = tl.schedule(op, **{k: v for k, v in {"N": 4, "K": 3}.items() if k in op.size_names})
    with pytest.raises(tl.ScheduleError, match=message) as info:
        s[stage].reverse_compute_inline()
    assert str(info.value).startswith(f"reverse_compute_inline({stage})")
    assert s.primitives == []


def test_reverse_compute_inline_refuses_later_primitives_on_either_stage():
    s = tl.schedule(tl.op(BIAS_RELU), M=4, N=8, K=3)
    s["Y"].reverse_compute_inline()
    with pytest.raises(tl.ScheduleError, match="write-back"):
        s["Y"].split("n", 4)
    with pytest.raises(tl.ScheduleError, match="write-back"):
        s["D"].compute_inline()
    s2 = tl.schedule(tl.op(BIAS_RELU), M=4, N=8, K=3)
    s2["D"].reorder("k", "n")  # a loop over the output inside the reduction: never final inside D's loops
    with pytest.raises(tl.ScheduleError, match="never final"):
        s2["Y"].reverse_compute_inline()
    s["Y"].compute_root()  # undoes it
    assert "for m in" in s.lower().split("allocate D")[1]


# ------------------------------------------------------------------------------------------ tl.build's choice
def test_build_chooses_hand_then_auto_then_naive():
    from tensorlang import schedules
    w = schedules.get("softmax")
    hand = tl.build(tl.op(w.source), N=8, D=64)
    assert hand.schedule_source == "hand"
    auto = tl.build(tl.op(MMT), M=32, N=48, K=16)
    assert auto.schedule_source == "auto"
    naive = tl.build(tl.op(MMT), M=32, N=48, K=16, schedule="naive")
    assert naive.schedule_source == "naive" and naive.schedule.primitives == []
    assert tl.build(tl.schedule(tl.op(MMT), M=2, N=2, K=2)).schedule_source == "given"
    A = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
    B = np.random.default_rng(1).standard_normal((48, 16)).astype(np.float32)
    want = (A.astype(np.float64) @ B.T.astype(np.float64)).astype(np.float32)
    assert_close(auto(A, B), want, reduction_len=16)
    assert_close(naive(A, B), want, reduction_len=16)
    with pytest.raises(tl.BuildError, match="no hand schedule"):
        tl.build(tl.op(MMT), M=32, N=48, K=16, schedule="hand")


def test_build_takes_the_tuned_record(tmp_path):
    from tensorlang.tuner.records.database import Database, Record
    from tensorlang.tuner.task import Task
    op = tl.op(MMT)
    sizes = {"M": 32, "N": 48, "K": 16}
    task = Task.from_source(MMT, sizes)
    s = tl.schedule(op, **sizes)
    s["C"].split("j", 16)
    db = tmp_path / "t.db"
    with Database(db) as d:
        d.add(Record(task.key, task.workload, sizes, task.target, {}, s.to_json(), (1e-4,), flops=task.flops))
    k = tl.build(op, db=str(db), **sizes)
    assert k.schedule_source == "tuned" and k.schedule.to_json() == s.to_json()
    assert tl.build(op, db=str(tmp_path / "missing.db"), **sizes).schedule_source == "auto"
    bad = tmp_path / "bad.db"
    bad.write_text("not a database")
    with pytest.raises(tl.UsageError, match=r"bad\.db"):
        tl.build(op, db=str(bad), **sizes)


def test_registered_schedule_sources_are_asked(tmp_path):
    op = tl.op(MMT)  # no tuned record, no hand schedule: the registered source is asked next
    seen = []

    def source(o, sizes, **kw):
        seen.append(kw["threads"])
        s = tl.schedule(o, **sizes)
        s["C"].vectorize("j")
        return s

    register_schedule_source("zz_mine", source)
    try:
        s, where = choose_schedule(op, {"M": 2, "N": 8, "K": 2}, db=str(tmp_path / "none.db"))
        assert where == "given" and seen and "# vectorized" in s.lower()
    finally:
        unregister_schedule_source("zz_mine")


# ------------------------------------------------------------------------------------------ any program, everywhere
PROGRAM = "def scale_add(X: f32[N, M], b: f32[M]) -> Y:\n    Y[i, j] = X[i, j] * 2.0 + b[j]\n"


def _cli(*args, env=None):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "tensorlang.cli", *map(str, args)], capture_output=True, text=True,
                          env=env)


def test_a_dsl_file_goes_through_every_command(tmp_path):
    import json
    f = tmp_path / "scale_add.tl"
    f.write_text(PROGRAM)
    db = tmp_path / "t.db"
    size = "N=64,M=96"
    r = _cli("tune", f, "--size", size, "--trials", 4, "--db", db, "--jobs", 1, "--json", "--retime-top", 2)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["workload"] == "scale_add" and report["space"] == "generated" and report["trials"] == 4
    assert report["best"]["strategy"] in ("auto", "xgb-genetic")
    r = _cli("best", f, "--size", size, "--db", db, "--json")
    assert r.returncode == 0, r.stderr
    r = _cli("bench", f, "--size", size, "--db", db, "--json", "--repeat", 2, "--min-time", 0, "--rounds", 2)
    assert r.returncode == 0, r.stderr
    rows = [row["name"] for row in json.loads(r.stdout)["results"]]
    assert rows == ["naive", "auto", "tuned"]  # no library formulation of a user's program
    r = _cli("show", f, "--size", size, "--best", "--db", db)
    assert r.returncode == 0 and r.stdout.startswith("# schedule: tuned"), r.stderr
    r = _cli("export", f, "--size", size, "--best", "--db", db, "-o", tmp_path / "out", "--json")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "libscale_add.so").exists()
    r = _cli("dataset", "export", f, "--size", size, "--db", db, "-o", tmp_path / "d.csv")
    assert r.returncode == 0, r.stderr
    r = _cli("compare", f, "--size", size, "--strategies", "random", "--trials", 2, "--seeds", 1,
             "--replay", tmp_path / "d.csv")
    assert r.returncode == 0, r.stderr
    r = _cli("run", f, "--size", size, "--json", "--repeat", 1, "--min-time", 0)  # the default database: no record
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["schedule"] == "auto" and json.loads(r.stdout)["matches_numpy"]


@pytest.mark.parametrize("args, message", [
    (("--size", "N=4"), "--size: {f} needs every size of scale_add: M missing (--size N=...,M=...)"),
    (("--size", "N=4,M=4,Q=2"), "--size: scale_add has no size Q; sizes: N, M"),
    (("--preset", "small", "--size", "N=4,M=4"), "--preset: {f} is a DSL file, which has no presets"),
])
def test_a_dsl_file_names_what_is_wrong(tmp_path, args, message):
    f = tmp_path / "scale_add.tl"
    f.write_text(PROGRAM)
    r = _cli("run", f, *args)
    assert r.returncode == 2 and message.format(f=f) in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_dsl_file_with_an_error_points_into_the_file(tmp_path):
    f = tmp_path / "bad.tl"
    f.write_text("def bad(X: f32[N]) -> Y:\n    Y[i] = Q[i]\n")
    r = _cli("run", f, "--size", "N=4")
    assert r.returncode == 2 and f"{f}, line 2, column 12:" in r.stderr, r.stderr
    r = _cli("run", tmp_path / "missing.tl", "--size", "N=4")
    assert r.returncode == 2 and "no workload and no file called" in r.stderr


def test_a_misspelt_flag_names_the_closest_one():
    r = _cli("tune", "conv2d", "--trails", 10)
    assert r.returncode == 2
    assert "unknown flag --trails for tensorlang tune; did you mean --trials?" in r.stderr
    assert "usage: tensorlang tune" in r.stderr  # the subcommand's flags, not the top-level usage
    r = _cli("bench", "conv2d", "--foo")
    assert r.returncode == 2 and "unknown flag --foo for tensorlang bench" in r.stderr


def test_a_read_only_database_is_read_and_named_as_read_only(tmp_path, monkeypatch):
    import json

    from tensorlang.tuner.records.database import Database, DatabaseError
    db = tmp_path / "t.db"
    assert _cli("tune", "matmul", "--preset", "small", "--trials", 2, "--db", db, "--jobs", 1, "--no-baselines",
                "--retime-top", 0).returncode == 0
    folder = tmp_path / "ro"
    folder.mkdir()
    ro = folder / "t.db"
    ro.write_bytes(db.read_bytes())
    with Database(ro, read_only=True) as d:
        assert d.count(d.best().task_key) == 2
        with pytest.raises(DatabaseError, match="opened read-only"):
            d.add(d.best())
    r = _cli("best", "matmul", "--preset", "small", "--db", ro, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["gflops"] > 0, r.stderr
    # what a read-only file system answers when tuning would write: named as read-only, with what still works
    import sqlite3
    real = sqlite3.connect

    def readonly(*a, **k):
        conn = real(*a, **k)

        class Conn:
            def __getattr__(self, name):
                return getattr(conn, name)

            def execute(self, sql, *p):
                if sql.startswith("PRAGMA journal_mode"):
                    raise sqlite3.OperationalError("attempt to write a readonly database")
                return conn.execute(sql, *p)
        return Conn()
    monkeypatch.setattr(sqlite3, "connect", readonly)
    with pytest.raises(DatabaseError, match=r"is read-only .*best, bench --db, show --best and export --best read it"):
        Database(ro)


def test_task_of_any_program_and_tuner_tune_on_dsl_text(tmp_path):
    from tensorlang import schedules, tuner
    from tensorlang.tuner.task import Task
    t = Task.from_source(PROGRAM, {"N": 64, "M": 96}, threads=1)
    assert t.workload == "scale_add" and not t.builtin and t.space_used == "generated"
    assert Task(**t.to_dict()).key == t.key
    mm = Task.from_source(schedules.get("matmul").source + "  # a comment\n", {"M": 8, "N": 8, "K": 8}, threads=1)
    assert mm.builtin and mm.workload == "matmul"  # a built-in workload's program is that workload
    with pytest.raises(tl.UsageError, match="no hand-written search space"):
        Task.from_source(PROGRAM, {"N": 64, "M": 96}, space="hand")
    best = tuner.tune(PROGRAM, trials=3, sizes={"N": 64, "M": 96}, db=str(tmp_path / "t.db"), jobs=1,
                      progress=False, threads=1)
    assert best.ok and best.workload == "scale_add"
    with pytest.raises(tl.UsageError, match="a program has no presets"):
        tuner.tune(PROGRAM, trials=3, preset="small")


def test_a_start_config_holds_the_activations_in_l2_where_they_fit(zen5):
    # dense + bias + GELU at BERT's 128 x 3072 x 768: the activations (384 KB) fit in half of L2, so one start has
    # them whole (rows and reduction unblocked, read in place) and the weights blocked to one register tile's width;
    # a matmul 1024 (A: 4 MB) has no such start, and the start is built from the pick alone
    from tensorlang.autosched.pick import x_side_in_l2
    sp = generated_space(tl.op(DENSE), {"M": 128, "N": 3072, "K": 768}, threads=2)
    pick, starts = sp.default(), sp.variants()
    held = x_side_in_l2(sp, pick)
    assert held in starts and held != pick and sp.allowed(held)
    assert (held["D.m.block"], held["D.k.block"], held["D.pack.X"]) == (128, 768, False)
    assert held["D.n.block"] >= held["D.vw"] and held["D.vw"] == pick["D.vw"] and held["D.pack.W"] == pick["D.pack.W"]
    mm = generated_space(tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\n    C[i, j] += A[i, k] * B[k, j]"),
                         {"M": 1024, "N": 1024, "K": 1024}, threads=2)
    assert x_side_in_l2(mm, mm.default()) == mm.default()
    rng = np.random.default_rng(0)
    X, W, b = (rng.standard_normal(s, dtype=np.float32) for s in ((128, 768), (3072, 768), (3072,)))
    k = tl.build(sp.schedule(sp.op, sp.sizes, held))
    y = X.astype(np.float64) @ W.T.astype(np.float64) + b
    want = 0.5 * y * (1 + np.tanh(0.7978845608 * (y + 0.044715 * y ** 3)))
    np.testing.assert_allclose(k(X, W, b), want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_the_starts_end_with_the_register_tile_within_half_the_registers(zen5):
    # the default conv2d's pick holds 14 pixels x 2 vectors (28 accumulators); its last starts hold at most 16
    # (8 x 2, the filters split between the threads), as picked, with the padded image read in place, and with
    # every read in place, a basin the other starts do not lead to. Spaces whose round is full keep their starts as
    # they were
    import math

    from tensorlang import schedules
    from tensorlang.autosched.pick import FREE_REGISTERS, MAX_STARTS, rule_config
    w = schedules.get("conv2d")
    sp = generated_space(tl.op(w.source), w.sizes(), threads=2)
    pick, starts = sp.default(), sp.variants()

    def accumulators(c):
        return math.ceil(min(c["O.vw"], 64) / 16) * math.prod(c[f"O.{v}.reg"] for v in ("f", "h", "w"))

    half = rule_config(sp, registers=sp.registers // 2 + FREE_REGISTERS)
    assert accumulators(pick) > sp.registers // 2 >= accumulators(half), (pick, half)
    assert half in starts and len(starts) <= MAX_STARTS and starts.index(half) > starts.index(pick)
    in_place = {**half, "O.pack.P": False}
    assert in_place in starts and all(sp.allowed(c) for c in starts)
    assert len({tuple(sorted(c.items())) for c in starts}) == len(starts)
    I, Wt = w.make_inputs(w.sizes(), np.random.default_rng(0))
    assert_close(tl.build(sp.schedule(sp.op, sp.sizes, in_place))(I, Wt), w.reference(I, Wt, **w.sizes()),
                 reduction_len=64 * 9)
    mm = generated_space(tl.op(MM), {"M": 1024, "N": 1024, "K": 1024}, threads=2)
    assert len(mm.variants()) == len({tuple(sorted(c.items())) for c in mm.variants()})


def test_a_pointwise_convolution_packs_its_filters_though_its_padding_stage_is_inlined():
    # a 1x1 stride-2 convolution: its padding stage (no padding: a plain copy) is inlined, so it cannot be packed;
    # that must not switch off every pack of the convolution: the filters' unpacked, its vectors along f are
    # gathers 256 floats apart. Repairing a config switches off only the packs its problems name
    from tensorlang import schedules
    from tensorlang.autosched import pick
    w = schedules.get("conv2d")
    sizes = {"N": 1, "C": 256, "H": 14, "W": 14, "F": 512, "R": 1, "S": 1, "stride": 2, "pad": 0, "dil": 1}
    sp = generated_space(tl.op(w.source), sizes, threads=1)
    cfg = sp.default()
    assert cfg["P.place"] == "inline" and cfg["O.vec"] == "f" and cfg["O.pack.Wt"] and not cfg["O.pack.P"], cfg
    bad = {**cfg, "O.pack.P": True}
    assert sp.problems(bad) == [Problem("O", ProblemKind.PACK_SOURCE, "O: packs P, which is not computed at the root",
                                        ("P",))]
    fixed = sp.knob_config(pick._repair(sp, sp.stage_configs(bad)))
    assert fixed == cfg and sp.allowed(fixed)
    I, Wt = w.make_inputs(sizes, np.random.default_rng(0))
    assert_close(tl.build(sp.schedule(sp.op, sizes, cfg))(I, Wt), w.reference(I, Wt, **sizes))


def test_a_pointwise_convolution_reads_its_image_in_place():
    # the image of a 1x1 convolution vectorized along the filters is read by broadcasts, one row of pixels a channel:
    # its filter window (r, s of one step each) is no reduction it is contiguous along, and a pack of it sits in the
    # filter blocks' loop, copying the whole image again for each block (SqueezeNet's last convolution, 512 -> 1000
    # channels at 13 x 13, as the graph compiler writes it: 1.32 -> 1.02 ms without that pack); the filters are
    # still packed
    src = ("def pw(I: f32[1, 512, 13, 13], W: f32[1000, 512, 1, 1]) -> O:\n"
           "    O[n, f, y, x] += I[n, c, y + r, x + s] * W[f, c, r, s]\n")
    op = tl.op(src)
    sp = generated_space(op, {}, threads=2)
    cfg = sp.default()
    assert cfg["O.vec"] == "f" and cfg["O.pack.W"] and not cfg["O.pack.I"], cfg
    rng = np.random.default_rng(1)
    I = rng.standard_normal((1, 512, 13, 13)).astype(np.float32)
    W = rng.standard_normal((1000, 512, 1, 1)).astype(np.float32)
    want = np.einsum("ncyx,fc->nfyx", I.astype(np.float64), W[:, :, 0, 0].astype(np.float64)).astype(np.float32)
    assert_close(tl.build(sp.schedule(op, {}, cfg))(I, W), want, reduction_len=512)


def test_the_repair_moves_only_the_stages_a_problem_concerns(zen5):
    # the repair decides from each problem's stage and the stages it involves, not from its text: e, computed
    # inside C's loops, stays there when C's register tile is too big ("C: the register tile's working set exceeds
    # L2", whose " exceeds" a search of the text for " e" would take for e) and the tile is narrowed instead
    from tensorlang.autosched import pick
    src = "def f(A: f32[M, K], B: f32[K, N]) -> C:\n    e[m, k] = exp(A[m, k])\n    C[m, n] += e[m, k] * B[k, n]\n"
    sp = generated_space(tl.op(src), {"M": 256, "N": 256, "K": 4096}, threads=1)
    bad = {**sp.default(), "e.place": "at", "C.pack.e": False, "C.pack.B": False, "C.n.block": 256,
           "C.k.block": 4096, "C.m.block": 24, "C.m.reg": 4, "C.vw": 64}
    [problem] = sp.problems(bad)
    assert (problem.stage, problem.kind, problem.others) == ("C", ProblemKind.WORKING_SET, ()), problem
    assert not problem.concerns("e") and " e" in str(problem)
    fixed = sp.knob_config(pick._repair(sp, sp.stage_configs(bad)))
    assert fixed["e.place"] == "at" and fixed["C.vw"] < 64 and sp.allowed(fixed), fixed


@pytest.mark.parametrize("name", ["conv2d", "softmax", "dense_bias_relu", "layernorm", "transpose"])
def test_typed_stage_configs_round_trip_to_knob_values(name):
    # the rules work on one StageConfig a stage and flatten to knob values once: every config of the space
    # (every knob set) goes there and back unchanged, in the space's knob order
    from tensorlang import schedules
    w = schedules.get(name)
    sp = generated_space(tl.op(w.source), dict(w.sizes("small")), threads=2)
    rng = np.random.default_rng(0)
    for cfg in sp.variants() + [sp.random(rng) for _ in range(20)]:
        configs = sp.stage_configs(cfg)
        assert list(configs) == list(sp.stage_names) and sp.stage_configs(configs) is configs
        back = sp.knob_config(configs)
        assert back == cfg and list(back) == [k.name for k in sp.knobs]
        assert sp.problems(configs) == sp.problems(cfg) and sp.plans(configs).keys() == sp.plans(cfg).keys()
        for name_, sc in configs.items():
            assert sc.place == sp.placement(cfg, name_) and sc.tile == sp.roles[name_].tile_config(cfg)
    with pytest.raises(tl.UsageError, match="one for each stage"):
        sp.stage_configs({"nope": next(iter(configs.values()))})


def test_search_keeps_a_proposal_in_each_rival_basin():
    # the start variants are four loop structures (register tiles at four vector widths); the pick leads, two
    # variants come within 0.85 of it: each round keeps one proposal in each of those two, none in the fourth
    from tensorlang import schedules
    from tensorlang.tuner.search.strategies import RIVAL_SHARE, ModelGuidedGenetic, Observation
    w = schedules.get("conv2d")
    sizes = {"N": 1, "C": 256, "H": 14, "W": 14, "F": 512, "R": 3, "S": 3, "stride": 2, "pad": 1, "dil": 1}
    sp = generated_space(tl.op(w.source), sizes, threads=1)
    starts = sp.variants()[:4]  # the four register-tile widths (the fifth inlines the padded image)
    assert len({sp.basin(c) for c in starts}) == len(starts) == 4
    g = ModelGuidedGenetic(sp, seed=0, featurize=lambda c: np.array(sp.encode(c), float))
    speeds = [86.8, 75.0, 81.8, 54.3]
    assert all(s >= RIVAL_SHARE * speeds[0] for s in speeds[1:3]) and speeds[3] < RIVAL_SHARE * speeds[0]
    rng = np.random.default_rng(0)
    history = [Observation(c, s) for c, s in zip(starts, speeds)]
    history += [Observation(sp.random(rng), 5.0 + i) for i in range(8)]  # slow ones: the model trains
    g.observe(history)
    proposed = g.propose(16)
    assert len(proposed) == 16 and len({str(sorted(c.items())) for c in proposed}) == 16
    rival = [sp.basin(c) for c in proposed[:2]]
    assert rival == [sp.basin(starts[2]), sp.basin(starts[1])], rival  # the better rival first
    assert all(sp.allowed(c) for c in proposed[:2])
    # a small proposal, or a space without basins (a hand-written one), gets none
    assert g._rival_picks(3) == []


def test_search_moves_one_structural_knob_out_of_the_measured_structures():
    # ResNet-18's 3x3 convolution at 7 x 7, 512 channels: after the start configs and some slow random ones, a
    # quarter of each proposal is structural moves of the best measured configs, one knob each, alternating
    # between the basin's knobs and the register tiles', each of a structure not measured yet
    from tensorlang import schedules
    from tensorlang.tuner.search.strategies import MOVE_FROM, ModelGuidedGenetic, Observation
    w = schedules.get("conv2d")
    sizes = {"N": 1, "C": 512, "H": 7, "W": 7, "F": 512, "R": 3, "S": 3, "stride": 1, "pad": 1, "dil": 1}
    sp = generated_space(tl.op(w.source), sizes, threads=2)
    basin_knobs, tile_knobs = sp.structural_knobs()
    names = basin_knobs + tile_knobs
    structure = lambda c: tuple(c[k] for k in names)  # noqa: E731
    g = ModelGuidedGenetic(sp, seed=0, featurize=lambda c: np.array(sp.encode(c), float))
    rng = np.random.default_rng(0)
    history = [Observation(c, 100.0 - i) for i, c in enumerate(sp.variants())]
    history += [Observation(sp.canonical(sp.random(rng)), 5.0 + i) for i in range(8)]
    g.observe(history)
    measured = {structure(o.config) for o in history}
    moves = g.structural_moves(4)
    assert len(moves) == 4 and len({structure(c) for c in moves}) == 4
    assert all(sp.allowed(c) and sp.canonical(c) == c and structure(c) not in measured for c in moves)
    best = [o.config for o in history[:MOVE_FROM]]
    one_move = [sp.canonical({**b, k: v}) for b in best for k in names for v in sp.knob(k).values]
    assert all(c in one_move for c in moves)
    assert [sp.basin(c) != sp.basin(best[0]) and sp.basin(c) != sp.basin(best[1]) for c in moves[:2]] == [True, False]
    proposed = g.propose(16)  # the round holds them (or others of new structures) beside the model's picks
    assert sum(structure(c) not in measured for c in proposed) >= 4
    # a hand-written space names no structural knobs: no moves
    hand = schedules.get("conv2d").space(sizes)
    assert hand.structural_knobs() == ()


def test_search_proposes_canonical_configs_so_one_search_round_fills_a_proposal():
    # dense + bias + GELU: with the epilogue fused, Y's tile knobs are unused; children that differ from a measured
    # config only there are that config again. The search proposes canonical configs, so one round of it fills a
    # proposal (not ten rounds and more of repeats)
    from tensorlang.tuner.search.strategies import ModelGuidedGenetic, Observation
    sp = generated_space(tl.op(DENSE), {"M": 128, "N": 3072, "K": 768}, threads=2)
    g = ModelGuidedGenetic(sp, seed=0, featurize=lambda c: np.array(sp.encode(c), float))
    rng = np.random.default_rng(0)
    history = [Observation(c, 100.0 - i) for i, c in enumerate(sp.variants())]
    history += [Observation(sp.canonical(sp.random(rng)), 5.0 + i) for i in range(8)]
    g.observe(history)
    rounds = []
    inner = g._propose
    g._propose = lambda n: rounds.append(n) or inner(n)
    proposed = g.propose(16)
    assert len(proposed) == 16 and all(sp.canonical(c) == c for c in proposed)
    assert rounds == [16], rounds
    genes = np.array([sp.encode(o.config) for o in history])
    kids = g.children(genes, np.array([o.gflops for o in history]), 32, set())
    assert len(kids) == 32 and all(sp.canonical(c) == c for c in kids)
    assert all(sp.canonical(c) == c for c in g.random_unseen(8))


@pytest.mark.parametrize("workload", ["conv2d", "matmul", "depthwise_conv2d", "layernorm"])
def test_block_knobs_that_round_to_one_block_are_one_canonical_config(workload):
    # blocks round up to whole register tiles: under a tile of 4 rows, blocks of 1, 2, 3 and 4 rows are one loop
    # nest (27% of one `tune conv2d --trials 500` run measured such twins). canonical() maps every block value to
    # the largest of its class: configs it joins lower alike, and it is idempotent and keeps a config allowed
    from tensorlang import schedules
    w = schedules.get(workload)
    sizes = w.sizes("small")
    op = tl.op(w.source)
    sp = generated_space(op, sizes, threads=2)
    blocks = [k for k in sp.knobs if k.name.endswith(".block")]
    rng = np.random.default_rng(0)
    joined = 0
    for _ in range(12):
        c = sp.canonical(sp.random(rng))
        knob = blocks[int(rng.integers(len(blocks)))]
        lowered: dict = {}
        for v in knob.values:
            d = {**c, knob.name: v}
            can = sp.canonical(d)
            assert sp.canonical(can) == can and sp.allowed(can) == sp.allowed(d)
            text = sp.schedule(op, sizes, d).lower() if sp.allowed(d) else None
            key = tuple(sorted(can.items()))
            if key in lowered:
                joined += 1
                assert lowered[key] == text, (knob.name, v, can[knob.name])
            lowered[key] = text
    assert joined > 0


def test_a_config_measured_in_a_non_canonical_form_is_not_proposed_again_in_its_canonical_form():
    # a start config (or a record of an older space) with a block its register tile rounds up: the search knows
    # its canonical twin as measured, so the same kernel is not measured twice
    from tensorlang import schedules
    from tensorlang.space import config_key
    from tensorlang.tuner.search.strategies import Observation, RandomSearch
    w = schedules.get("conv2d")
    sp = generated_space(tl.op(w.source), w.sizes("small"), threads=2)
    base = sp.canonical(sp.default())
    reg = next(k for k in sp.knobs if k.name.endswith(".reg") and base[k.name] > 1)
    block = reg.name.replace(".reg", ".block")
    twin = {**base, block: 1}
    assert sp.canonical(twin) != twin
    r = RandomSearch(sp, seed=0)
    r.observe([Observation(twin, 1.0)])
    assert config_key(sp.canonical(twin)) in r.seen
    # proposed again (a strategy's children, say), the canonical twin is dropped as seen
    r._propose = lambda n: [sp.canonical(twin), twin]
    assert r.propose(2) == []


def test_a_short_window_has_every_tap_unrolled_and_the_pick_takes_it():
    # depthwise 3x3: ku offers 9 (3 x 3 taps: every reduction loop unrolled) beside 1, 2, 3; the pick takes it
    # (the taps' offsets fold); a convolution over channels is offered no such value
    from tensorlang import schedules
    w = schedules.get("depthwise_conv2d")
    sizes = {"N": 1, "C": 4, "H": 13, "W": 19, "R": 3, "S": 3, "stride": 1, "pad": 1}
    op = tl.op(w.source)
    sp = generated_space(op, sizes, threads=1)
    assert sp.knob("O.ku").values == (1, 2, 3, 9) and sp.default()["O.ku"] == 9
    for place in ("root", "inline"):
        cfg = sp.canonical({**sp.default(), "P.place": place})
        text = sp.schedule(op, sizes, cfg).lower()
        assert "for r in 0:3:  # unrolled" in text and "for s in 0:3:  # unrolled" in text, text
        inputs = w.make_inputs(sizes, np.random.default_rng(1))
        assert_close(tl.build(sp.schedule(op, sizes, cfg))(*inputs), w.reference(*inputs, **sizes), 9)
    conv = generated_space(tl.op(schedules.get("conv2d").source), schedules.get("conv2d").sizes(), threads=1)
    assert max(conv.knob("O.ku").values) <= 8
    # and its pick is as before: the innermost loop (s, 3) is neither among the values nor divided by 4 or 2
    assert conv.default()["O.ku"] == 1


def test_the_pick_unrolls_a_large_body_less(zen5):
    # the same reduction of 8 steps: a multiply-add is unrolled whole; a fused body of math calls in a register
    # tile of many vectors is unrolled only as far as UNROLLED_OPS allows (random programs' bodies emitted 13,000
    # vector operations and took 5 s to compile), and what it computes is unchanged
    from tensorlang.autosched.pick import TILE_OPS, UNROLLED_OPS
    sizes = {"M": 64, "N": 64, "K": 8}
    plain = generated_space(tl.op(MM), sizes, threads=2).default()
    assert plain["C.ku"] == 8
    term = ("tanh(A[i, k] * B[k, j] + A[i, k]) * exp(B[k, j] - A[i, k])"
            " + sqrt(abs(A[i, k] + B[k, j] * 2.0)) * tanh(B[k, j])")
    big = tl.op(f"def big(A: f32[M, K], B: f32[K, N]) -> C:\n    C[i, j] += {term} - ({term}) * 0.5\n")
    sp = generated_space(big, sizes, threads=2)
    cfg = sp.default()
    st = sp.info.stage("C")
    step = (st.ops + len(st.reads)) * math.prod(cfg[f"C.{v}.reg"] for v in st.spatial) \
        * -(-cfg["C.vw"] // sp.roles["C"].lanes)
    assert 1 < cfg["C.ku"] < 8 and cfg["C.ku"] * step <= UNROLLED_OPS < 2 * cfg["C.ku"] * step, (cfg, step)
    # and its register tile leaves room for the body: at most TILE_OPS of it (8 vectors), where the multiply-add
    # gets 16
    assert step <= TILE_OPS and plain["C.i.reg"] * plain["C.j.reg"] * plain["C.vw"] // 16 == 16, (plain, cfg)
    assert step // (st.ops + len(st.reads)) <= TILE_OPS // (st.ops + len(st.reads)) < 16, (cfg, step)
    A, B = (np.random.default_rng(0).standard_normal(sh).astype(np.float32) for sh in ((64, 8), (8, 64)))
    t = (np.tanh(A[:, :, None] * B[None] + A[:, :, None]) * np.exp(B[None] - A[:, :, None])
         + np.sqrt(np.abs(A[:, :, None] + B[None] * 2.0)) * np.tanh(B[None]))
    want = (t - t * 0.5).sum(1)
    assert_close(tl.build(sp.schedule(big, sizes, cfg))(A, B), want, reduction_len=8)


def test_a_stride_one_window_over_an_inlined_padded_image_is_unrolled_whole():
    # conv1d with its padding stage inlined: the bounds guards of the padded reads sit in the hot loop unless the
    # 3-tap window loop is unrolled whole; with the image at the root there
    # are no guards, and at stride 2 the reads are gathers, so neither unrolls it
    from tensorlang import schedules
    from tensorlang.autosched.pick import rule_config
    w = schedules.get("conv1d")
    sizes = w.sizes()
    sp = generated_space(tl.op(w.source), sizes, threads=2)
    inlined = rule_config(sp, place={"P": "inline"})
    assert inlined["O.red_order"] == "c,s" and inlined["O.ku"] >= sizes["S"] and sp.allowed(inlined)
    assert rule_config(sp, place={"P": "root"})["O.ku"] < sizes["S"]
    assert inlined in sp.variants()
    I, Wt = w.make_inputs(sizes, np.random.default_rng(0))
    assert_close(tl.build(sp.schedule(sp.op, sizes, inlined))(I, Wt), w.reference(I, Wt, **sizes))
    c2 = schedules.get("conv2d")
    strided = {"N": 1, "C": 64, "H": 56, "W": 56, "F": 128, "R": 3, "S": 3, "stride": 2, "pad": 1, "dil": 1}
    sp2 = generated_space(tl.op(c2.source), strided, threads=1)
    assert rule_config(sp2, place={"P": "inline"})["O.ku"] < 3


def test_a_start_config_reads_the_image_in_place_where_it_is_too_big_for_l2(zen5):
    # ResNet-18's 3x3 stride-2 convolution 56 -> 28 on one thread: the pick packs the padded image (its rows lie far
    # apart), which is 861 KB, too big for x_side_in_l2; one start per vector width reads it in place instead
    # (a pick rule, so tested on the fixture's view of the machine: with 2 MB of L2 a core the image would fit in
    # half of it and x_side_in_l2 take its place)
    from tensorlang import schedules
    from tensorlang.autosched.pick import rule_config, x_side_in_place
    w = schedules.get("conv2d")
    sizes = {"N": 1, "C": 64, "H": 56, "W": 56, "F": 128, "R": 3, "S": 3, "stride": 2, "pad": 1, "dil": 1}
    sp = generated_space(tl.op(w.source), sizes, threads=1)
    pick, starts = sp.default(), sp.variants()
    assert pick["O.vec"] == "f" and pick["O.pack.P"] and pick["O.pack.Wt"]
    in_place = x_side_in_place(sp, pick)
    assert in_place in starts and {k for k in pick if pick[k] != in_place[k]} == {"O.pack.P"}
    assert in_place["O.pack.Wt"] and sp.allowed(in_place)
    widths = {c["O.vw"] for c in starts if c["P.place"] == "root" and not c["O.pack.P"]}
    # one start per vector width at which the rules vectorize the filters (at 48 lanes, which leave a masked
    # tile of 32 of the 128 filters, they vectorize along x instead, where the image moves with the vector)
    along_f = {w for w in sp.knob("O.vw").values if rule_config(sp, w)["O.vec"] == "f"}
    assert len(along_f) >= 3 and widths == along_f
    I, Wt = w.make_inputs(sizes, np.random.default_rng(0))
    assert_close(tl.build(sp.schedule(sp.op, sizes, in_place))(I, Wt), w.reference(I, Wt, **sizes))


def test_a_padding_stage_at_a_tile_of_a_parallel_loop_is_recomputed_per_tile(zen5):
    # conv1d with the padded image P computed at O's parallel loop w_b: neighbouring tiles need overlapping parts of
    # P (a 3-tap window), so each tile computes its 66 columns into a buffer of its own (one per thread). P's own
    # vector loop (48 lanes) runs past 66 and is guarded; the guard's bound moves with w_b (P:x <= w_b*64 + 65). The
    # space allowed this config while the lowering refused it ("two threads would write the same elements": 12 of
    # 300 random allowed configs of conv1d, 41 of 300 of conv2d's: invalid trials in tuning)
    from tensorlang import schedules
    w = schedules.get("conv1d")
    sizes = w.sizes()
    sp = generated_space(tl.op(w.source), sizes, threads=2)
    cfg = {"P.place": "at", "P.vec": None, "P.vw": 48, "P.c.reg": 4, "P.x.reg": 16, "P.c.block": 12,
           "P.x.block": 1026, "P.parallel": "outer1", "O.vec": "w", "O.vw": 32, "O.f.reg": 4, "O.w.reg": 3,
           "O.f.block": 32, "O.w.block": 64, "O.c.block": 32, "O.red_order": "c,s", "O.ku": 4,
           "O.tile_order": "x_first", "O.parallel": "outer1", "O.pack.P": False, "O.pack.Wt": False}
    assert sp.allowed(cfg), sp.problems(cfg)
    s = sp.schedule(sp.op, sizes, cfg)
    text = s.lower()
    assert text.index("for w_b in 0:16:  # parallel") < text.index("allocate P: f32[1, 64, 66]")
    assert s.lowered(strict=True).guards == 0
    I, Wt = w.make_inputs(sizes, np.random.default_rng(0))
    assert_close(tl.build(s)(I, Wt), w.reference(I, Wt, **sizes), reduction_len=sizes["C"] * sizes["S"])


def test_a_start_config_vectorizes_a_transpose_along_its_read(zen5):
    # the pick of a transpose streams the stores from a transposed copy of each tile of X; the hand-written space's
    # best streams the loads and scatters the stores, a basin search from the pick does not reach: that basin is a
    # start config of its own
    from tensorlang import schedules
    from tensorlang.autosched.pick import read_side_vectorized
    w = schedules.get("transpose")
    sizes = w.sizes()  # 1024 x 1024: the pick packs (at small sizes it reads in place)
    sp = generated_space(tl.op(w.source), sizes, threads=2)
    pick, starts = sp.default(), sp.variants()
    assert pick["Y.vec"] == "i" and pick["Y.pack.X"]
    v = read_side_vectorized(sp, pick)
    assert v in starts and {k for k in pick if pick[k] != v[k]} == {"Y.vec", "Y.pack.X"}
    assert v["Y.vec"] == "j" and not v["Y.pack.X"] and sp.allowed(v)
    (X,) = w.make_inputs(sizes, np.random.default_rng(0))
    s = sp.schedule(sp.op, sizes, v)
    assert "X_Y_local" in sp.schedule(sp.op, sizes, pick).lower() and "X_Y_local" not in s.lower()
    assert_close(tl.build(s)(X), w.reference(X, **sizes))
    # a read that the vector does not move (a row's statistic, a bias) or moves along itself changes nothing
    for name in ("softmax", "layernorm", "elementwise", "dense_bias_relu"):
        wl = schedules.get(name)
        sp2 = generated_space(tl.op(wl.source), wl.sizes(), threads=2)
        assert read_side_vectorized(sp2, sp2.default()) == sp2.default(), name


def test_every_vector_width_offered_to_an_8_bit_stage_schedules():
    """A u8 stage has 32 lanes a vector with AVX2 and 64 with AVX-512; the space offers register tiles of up to four
    vectors, but a vectorized loop holds at most MAX_VECTOR_LANES elements: widths beyond that were offered, the
    rules picked two vectors of 64 on AVX-512, the schedule refused it and the pick fell back to the plain loop nest
    (the camera pipe 125x slower). Every width offered schedules, and the pick vectorizes."""
    from tensorlang.loopnest import MAX_VECTOR_LANES
    op = tl.op("def b(I: u8[H, W]) -> O:\n    O[y, x] = u8((u16(I[y, x]) + u16(I[y, x + 1]) + u16(I[y, x + 2])) // 3)")
    sizes = {"H": 40, "W": 517}
    sp = generated_space(op, sizes, threads=2)
    widths = sp.knob("O.vw").values
    assert max(widths) <= MAX_VECTOR_LANES, widths
    for w in widths:
        sp.schedule(op, sizes, {**sp.default(), "O.vec": "x", "O.vw": w})
    assert sp.default()["O.vec"] == "x"
    I = np.random.default_rng(0).integers(0, 256, (40, 517), dtype=np.uint8)
    want = ((I[:, :-2].astype(np.uint16) + I[:, 1:-1] + I[:, 2:]) // 3).astype(np.uint8)
    np.testing.assert_array_equal(tl.build(op, schedule="auto", **sizes)(I), want)


MIXER_GEMM = ("def fc(X: f32[196, 2048], W: f32[2048, 512]) -> Y:\n"
              "    Y[i, j] += X[i, k] * W[k, j]\n")
BLOCKED_1X1 = ("def c1(I: f32[1, 42, 14, 14, 16], W: f32[7, 42, 1, 1, 16, 16]) -> O:\n"
               "    O[n, o, y, x, v] += I[n, c, y + r, x + s, u] * W[o, c, r, s, u, v] "
               "where r in 0:1, s in 0:1\n")


def test_a_broadcast_side_copied_for_one_register_tile_is_read_in_place(zen5):
    # MLP-Mixer's 196 x 2048 x 512 GEMM on two threads goes in blocks of 32 columns, one register tile each: a copy
    # of X's rows would be made for every tile and read once, so X is read in place (W, which moves with the
    # vector, is still packed); a blocked 1x1 convolution's tile takes one filter block at a time, so its image is
    # read in place too. The queries of an attention block (197 x 64 against 197 keys, 13 tiles of keys a copy)
    # and an NCHW convolution's padded image keep their copies
    from tensorlang import schedules
    from tensorlang.autosched.pick import X_PACK_TILES
    gemm = generated_space(tl.op(MIXER_GEMM), {}, threads=2).default()
    assert gemm["Y.vec"] == "j" and gemm["Y.pack.X"] is False and gemm["Y.pack.W"] is True, gemm
    assert -(-gemm["Y.j.block"] // gemm["Y.vw"]) < X_PACK_TILES, gemm
    conv1 = generated_space(tl.op(BLOCKED_1X1), {}, threads=2).default()
    assert conv1["O.vec"] == "v" and conv1.get("O.pack.I", False) is False, conv1
    qk = ("def qk(Q: f32[3, 197, 64], K: f32[3, 64, 197]) -> S:\n"
          "    S[h, i, j] += Q[h, i, e] * K[h, e, j]\n")
    attention = generated_space(tl.op(qk), {}, threads=2).default()
    assert attention["S.vec"] == "j" and attention["S.pack.Q"] is True, attention
    w = schedules.get("conv2d")
    conv3 = generated_space(tl.op(w.source), w.sizes(), threads=2).default()
    assert conv3["O.vec"] == "f" and conv3["O.pack.P"] is True, conv3
    # read in place, the same result
    rng = np.random.default_rng(7)
    X, W = rng.standard_normal((196, 2048), np.float32), rng.standard_normal((2048, 512), np.float32)
    op = tl.op(MIXER_GEMM)
    assert_close(tl.build(generated_space(op, {}, threads=2).schedule(op, {}, gemm))(X, W),
                 (X.astype(np.float64) @ W.astype(np.float64)).astype(np.float32), 2048)


def test_filters_streamed_from_l2_take_a_tile_with_fewer_filter_blocks(zen5):
    # the blocked 1x1 convolution's filters for all 7 output blocks are 300 KB: a tile of 7 blocks x 2 rows loads
    # 7 filter vectors from L2 for 14 FMAs (L2_LOAD_COST each); the pick takes a tile whose filter panel fits in L1
    from tensorlang.autosched.analysis import analyze
    from tensorlang.autosched.pick import L2_LOAD_COST, tile_counts
    st = analyze(tl.op(BLOCKED_1X1), {}).stage("O")
    assert tile_counts(st, "v", 16, {"o": 7, "y": 2}, 16) == (14, 9.0)
    assert tile_counts(st, "v", 16, {"o": 7, "y": 2}, 16, l1=48 << 10) == (14, 7 * L2_LOAD_COST + 2.0)
    assert tile_counts(st, "v", 16, {"y": 2, "x": 14}, 16, l1=48 << 10) == (28, 29.0)  # 43 KB of filters: L1
    sp = generated_space(tl.op(BLOCKED_1X1), {}, threads=2)
    pick = sp.default()
    assert pick["O.o.reg"] * 16 * 4 * 672 <= sp.l1 and pick["O.o.reg"] < 7, pick


def test_among_tiles_rated_alike_rows_along_a_batch_lose(zen5):
    # ResNet-18's Winograd products, 16 batches of 64 x 64 x 784: 32 lanes x 7 pixels x 2 batches and 32 lanes x
    # 14 pixels rate alike; the batch's rows share no loaded value, so the pick takes the 14 pixels
    from tensorlang.autosched.pick import batch_rows
    src = ("def bmm(A: f32[16, 64, 64], X: f32[16, 64, 784]) -> C:\n"
           "    C[b, i, j] += A[b, i, k] * X[b, k, j]\n")
    sp = generated_space(tl.op(src), {}, threads=2)
    pick = sp.default()
    rows = {v: pick[f"C.{v}.reg"] for v in ("b", "i", "j") if pick[f"C.{v}.reg"] > 1}
    assert batch_rows(sp.info.stage("C"), rows) == 1 and pick["C.b.reg"] == 1, pick



def test_a_kept_dimension_of_one_iteration_gives_no_reuse():
    # torch's mean over H, W with keepdim: `t1[n, c, z, w] += I[n, c, r, s] where z in 0:1, w in 0:1`; the read
    # misses z and w, which take one value each: nothing is read again, so the stage is a reduction without reuse
    # (as a reuse stage its image was copied with the channels innermost: EfficientNet-B0's 144 x 56 x 56 squeeze
    # 0.29 -> 0.015 ms)
    from tensorlang.autosched.analysis import analyze
    src = ("def gap(I: f32[1, 144, 56, 56]) -> O:\n"
           "    O[n, c, z, w] += I[n, c, r, s] where n in 0:1, c in 0:144, z in 0:1, w in 0:1, r in 0:56, s in 0:56\n")
    op = tl.op(src)
    assert analyze(op, {}).stage("O").kind == "reduce"
    mm = "def mv(A: f32[1, 64], B: f32[64, 32]) -> C:\n    C[i, j] += A[i, k] * B[k, j]\n"
    assert analyze(tl.op(mm), {}).stage("C").kind == "reuse"  # A misses j, which has 32 iterations
    I = np.random.default_rng(3).standard_normal((1, 144, 56, 56)).astype(np.float32)
    got = tl.build(op, schedule="auto")(I)
    assert_close(got, I.astype(np.float64).sum(axis=(2, 3), keepdims=True).astype(np.float32), 56 * 56)


def test_a_pools_padding_is_inlined_into_the_pool():
    # torch's max_pool2d(3, stride 2, padding 1): the padded copy P of the image was written whole at the root and
    # read back by the pool; inlined, each tap tests its bounds (ResNet-18's 64 x 112 x 112: 0.24 -> 0.13 ms). A
    # convolution's padded image is not a pool's: it stays where it was
    src = ("def mp(I: f32[1, 64, 112, 112]) -> O:\n"
           "    P[n, c, y, x] = select(y >= 1 and y < 113 and x >= 1 and x < 113, I[n, c, y - 1, x - 1], -inf) "
           "where n in 0:1, c in 0:64, y in 0:113, x in 0:113\n"
           "    O[n, c, y, x] max= P[n, c, 2*y + r, 2*x + s] where n in 0:1, c in 0:64, y in 0:56, x in 0:56, "
           "r in 0:3, s in 0:3\n")
    op = tl.op(src)
    sp = generated_space(op, {}, threads=2)
    pick = sp.default()
    assert pick["P.place"] == "inline", pick
    I = np.random.default_rng(5).standard_normal((1, 64, 112, 112)).astype(np.float32)
    padded = np.pad(I, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    want = np.max([padded[:, :, r:r + 112:2, s:s + 112:2] for r in range(3) for s in range(3)], axis=0)
    assert_close(tl.build(sp.schedule(op, {}, pick))(I), want, exact=True)
    from tensorlang import schedules
    w = schedules.get("conv2d")
    assert generated_space(tl.op(w.source), w.sizes(), threads=2).default()["P.place"] != "inline"
