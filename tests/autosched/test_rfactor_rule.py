"""The rfactor rule of the generated spaces and the zero-trial pick (tensorlang/autosched/rfactor.py): a reduction
whose outputs are too few for the threads, with a long reduction variable, is split into parallel partials and a
combine; one with many outputs keeps its pick.

Before and after, for each condition: the same program with the condition met and not met. Every kernel is checked
against numpy in float64.

Run: ``.venv/bin/pytest tests/autosched/test_rfactor_rule.py -q -n 0``
"""
from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_close

import tensorlang as tl
from tensorlang.autosched.rfactor import MIN_CHUNK, OFFERED_SPATIAL_PER_THREAD, SPATIAL_PER_THREAD
from tensorlang.autosched.space import generated_space

TOTAL = "def total(A: f32[N]) -> S:\n    S[z] += A[k] where z in 0:1"
GEMV = "def gemv(A: f32[M, K], x: f32[K]) -> y:\n    y[m] += A[m, k] * x[k]"


def _pick(src: str, sizes: dict, threads: int):
    op = tl.op(src)
    sp = generated_space(op, sizes, threads=threads)
    cfg = sp.default()
    return op, sp, cfg, sp.schedule(op, sizes, cfg)


def _inputs(op, sizes, seed=0):
    rng = np.random.default_rng(seed)
    shapes = tl.schedule(op, **sizes).bound.shapes
    return [(rng.random(shapes[p.name]) - 0.25).astype(np.float32) for p in op.params]


def test_a_full_reduction_is_rfactored_on_two_threads_not_on_one():
    sizes = {"N": 1 << 18}
    op, sp, cfg, s = _pick(TOTAL, sizes, threads=2)
    assert cfg["S.rfactor"] is True and sp.allowed(cfg)
    ir = s.lower()
    assert "allocate S_rf" in ir and "for k_o in 0:" in ir and "# parallel" in ir.split("for k_o in 0:")[1][:20]
    assert "# vectorized" in ir
    (a,) = _inputs(op, sizes)
    assert_close(tl.build(s)(a), np.float32([a.astype(np.float64).sum()]), sizes["N"])
    # before: one thread, nothing to split across
    _, _, cfg1, s1 = _pick(TOTAL, sizes, threads=1)
    assert "S.rfactor" not in cfg1 and "rfactor" not in str(s1)


def test_a_gemv_with_a_short_output_is_rfactored_and_one_with_a_long_output_keeps_its_pick():
    short = {"M": 3, "K": 1 << 16}
    op, _, cfg, s = _pick(GEMV, short, threads=2)
    assert cfg["y.rfactor"] is True
    A, x = _inputs(op, short, 1)
    assert_close(tl.build(s)(A, x), (A.astype(np.float64) @ x).astype(np.float32), short["K"])
    # before: OFFERED_SPATIAL_PER_THREAD outputs a thread and more: no knob, the pick of a space without the rule
    long = {"M": OFFERED_SPATIAL_PER_THREAD * 2, "K": 1 << 16}
    _, sp_long, _, s_long = _pick(GEMV, long, threads=2)
    assert not any(k.name.endswith(".rfactor") for k in sp_long.knobs) and "rfactor" not in str(s_long)
    assert "# parallel" in s_long.lower()


def test_outputs_between_the_thresholds_are_offered_to_the_tuner_but_not_picked():
    sizes = {"M": SPATIAL_PER_THREAD * 2, "K": 1 << 16}
    op, sp, cfg, _ = _pick(GEMV, sizes, threads=2)
    assert sp.knob("y.rfactor").values == (False, True) and cfg["y.rfactor"] is False
    on = {**cfg, "y.rfactor": True}
    assert sp.allowed(on)
    A, x = _inputs(op, sizes, 2)
    assert_close(tl.build(sp.schedule(op, sizes, on))(A, x), (A.astype(np.float64) @ x).astype(np.float32),
                 sizes["K"])
    assert sp.canonical({**on, "y.vw": sp.knob("y.vw").values[-1]}) == sp.canonical(on)  # template knobs unused


def test_a_short_reduction_is_not_rfactored():
    sizes = {"N": MIN_CHUNK * 2 - 1}
    _, _, cfg, s = _pick(TOTAL, sizes, threads=2)
    assert "S.rfactor" not in cfg and "rfactor" not in str(s)


@pytest.mark.parametrize("src,want", [
    ("def mean(A: f32[N]) -> M:\n    S[z] += A[k] where z in 0:1\n    M[z] = S[z] / 1000.0",
     lambda a: np.float32([a.astype(np.float64).sum() / 1000.0])),
    ("def se(A: f32[N]) -> S:\n    E[k] = exp(A[k])\n    S[z] += E[k] where z in 0:1",
     lambda a: np.float32([np.exp(a.astype(np.float64)).sum()])),
])
def test_stages_computed_in_the_reduction_move_so_that_it_is_rfactored(src, want):
    """An epilogue (the mean's division) moves to the root; a stage computed inside the loops (exp) is inlined."""
    sizes = {"N": 1 << 17}
    op, sp, cfg, s = _pick(src, sizes, threads=2)
    rf = next(k for k in cfg if k.endswith(".rfactor"))
    assert cfg[rf] is True and sp.allowed(cfg)
    (a,) = _inputs(op, sizes, 3)
    assert_close(tl.build(s)(a), want(a), sizes["N"])


def test_random_configs_with_the_rfactor_knob_compute_the_sum():
    sizes = {"M": 2, "K": MIN_CHUNK * 4 + 3}  # a prime-ish length: chunks with a tail
    op = tl.op("def rmax(A: f32[M, K]) -> y:\n    y[m] max= A[m, k] * 2.0")
    sp = generated_space(op, sizes, threads=2)
    (a,) = _inputs(op, sizes, 4)
    want = (a.astype(np.float64) * 2).max(axis=1).astype(np.float32)
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(40):
        cfg = {**sp.random(rng), "y.rfactor": True}
        if not sp.allowed(cfg):
            continue
        s = sp.schedule(op, sizes, cfg)
        if s.key() in seen:
            continue
        seen.add(s.key())
        assert_close(tl.build(s)(a), want, exact=True)
    assert seen


def test_the_start_configs_try_the_rfactor_knob_the_pick_left_off():
    sizes = {"M": SPATIAL_PER_THREAD * 2, "K": 1 << 16}
    sp = generated_space(tl.op(GEMV), sizes, threads=2)
    starts = sp.variants()
    assert starts[0]["y.rfactor"] is False and any(c["y.rfactor"] for c in starts)
