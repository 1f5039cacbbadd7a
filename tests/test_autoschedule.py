"""The auto-scheduler: generated spaces, the zero-trial pick, tl.build's choice of schedule, reverse_compute_inline.

The fuzz test applies configs of generated spaces to random programs (``progen``) and to every workload at tiny
sizes: the rules' pick and random allowed configs must schedule (or be refused with ``ScheduleError`` by a
primitive, which the tuner records as a "schedule" error), lower with every access proven in bounds or guarded
(``strict=True``) and compute what the naive loop nest computes, into outputs prefilled with NaN; a config the
constraint rules out is refused before anything is built. ``TENSORLANG_AUTOSCHED_FUZZ`` sets the number of
programs (default 600: the pick and 3 random allowed configs each, about 2,400 configs; 5,000 programs, 20,000
configs, is the long mode), ``TENSORLANG_AUTOSCHED_FUZZ_RANDOM=1`` draws new programs instead of CI's fixed set.
"""
from __future__ import annotations

import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, reject, settings
from hypothesis import strategies as st

import progen
import schedfuzz
import tensorlang as tl
from oracle import assert_close
from tensorlang.autosched.space import GeneratedSpace, generated_space
from tensorlang.choice import choose_schedule, register_schedule_source, unregister_schedule_source

FUZZ_PROGRAMS = int(os.environ.get("TENSORLANG_AUTOSCHED_FUZZ", "600"))
RANDOM = os.environ.get("TENSORLANG_AUTOSCHED_FUZZ_RANDOM", "0") == "1"
RANDOM_CONFIGS = 3

MM = "def mm(A: f32[M, K], B: f32[K, N]) -> C:\n    C[i, j] += A[i, k] * B[k, j]\n"
DENSE = """\
def dense_gelu(X: f32[M, K], W: f32[N, K], b: f32[N]) -> Y:
    D[m, n] += X[m, k] * W[n, k]
    Y[m, n] = 0.5 * (D[m, n] + b[n]) * (1.0 + tanh(0.7978845608 * ((D[m, n] + b[n])
                                                   + 0.044715 * (D[m, n] + b[n]) ** 3)))
"""


# ------------------------------------------------------------------------------------------ fuzz
def _case(src: progen.Src, rng: random.Random):
    import schedules
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
            assert_close(outs[o], want, reduction_len=case.reduction_len[o], err_msg=f"output {o}\nconfig {cfg}\n{s}")
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
    import schedules
    w = schedules.get("conv2d")
    op = tl.op(w.source)
    sp = generated_space(op, w.sizes(), threads=2)
    cfg = sp.default()
    assert cfg["O.vec"] == "f" and cfg["O.pack.Wt"] is True
    assert "Wt_O_local" in sp.schedule(op, w.sizes(), cfg).lower()


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
    import schedules
    w = schedules.get("softmax")
    op = tl.op(w.source)
    sp = generated_space(op, {"N": 64, "D": 256}, threads=2)
    cfg = sp.default()
    assert cfg["mx.place"] == "at" and cfg["sm.place"] == "at"
    attach, _ = sp.attach_loops(cfg, sp.plans(cfg))
    assert sp.plans(cfg)["Y"].levels[attach["mx"]][0] == "n"  # a loop over rows, not inside one


def test_constraint_rules_out_register_tiles_beyond_the_registers():
    op = tl.op(MM)
    sp = generated_space(op, {"M": 256, "N": 256, "K": 256}, threads=1)
    cfg = {**sp.default(), "C.vw": max(sp.knob("C.vw").values), "C.i.reg": 16}
    assert not sp.allowed(cfg)
    assert any("vector accumulators" in p for p in sp.problems(cfg))
    with pytest.raises(tl.ScheduleError, match="not schedulable"):
        sp.schedule(op, sp.sizes, cfg)


def test_pick_is_deterministic_and_quick():
    import time
    import schedules
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
    import schedules
    w = schedules.get("softmax")
    hand = tl.build(tl.op(w.source), N=8, D=64)
    assert hand.schedule_source == "hand"
    auto = tl.build(tl.op(MM), M=32, N=48, K=16)
    assert auto.schedule_source == "auto"
    naive = tl.build(tl.op(MM), M=32, N=48, K=16, schedule="naive")
    assert naive.schedule_source == "naive" and naive.schedule.primitives == []
    assert tl.build(tl.schedule(tl.op(MM), M=2, N=2, K=2)).schedule_source == "given"
    A = np.random.default_rng(0).standard_normal((32, 16)).astype(np.float32)
    B = np.random.default_rng(1).standard_normal((16, 48)).astype(np.float32)
    assert_close(auto(A, B), naive(A, B), reduction_len=16)
    with pytest.raises(tl.BuildError, match="no hand schedule"):
        tl.build(tl.op(MM), M=32, N=48, K=16, schedule="hand")


def test_build_takes_the_tuned_record(tmp_path):
    from tuner.database import Database, Record
    from tuner.task import Task
    op = tl.op(MM)
    sizes = {"M": 32, "N": 48, "K": 16}
    task = Task.from_source(MM, sizes)
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
    with pytest.raises(tl.UsageError, match="bad.db"):
        tl.build(op, db=str(bad), **sizes)


def test_registered_schedule_sources_are_asked(tmp_path):
    op = tl.op(MM)
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
