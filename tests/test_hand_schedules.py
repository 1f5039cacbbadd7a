"""Hand-written schedules (schedules/<workload>.py) and the fast numpy baselines compute what the reference
computes, at every preset and at sizes their tiles do not divide."""
import numpy as np
import pytest

import schedules
import tensorlang as tl
from oracle import assert_close

HAND = [w for w in schedules.WORKLOADS.values() if w.hand_schedule is not None]
ODD = {
    "matmul": [dict(M=1, N=7, K=13), dict(M=97, N=131, K=61), dict(M=13, N=600, K=300)],
    "conv2d": [dict(N=1, C=3, H=7, W=11, F=5, R=3, S=3, stride=1, pad=1, dil=1),
               dict(N=2, C=4, H=9, W=30, F=40, R=3, S=3, stride=2, pad=0, dil=2)],
    "depthwise_conv2d": [dict(N=1, C=3, H=7, W=19, R=3, S=3, stride=1, pad=1),
                         dict(N=2, C=5, H=11, W=13, R=5, S=5, stride=2, pad=2)],
    "softmax": [dict(N=1, D=1), dict(N=7, D=33)],
    "maxpool2d": [dict(N=1, C=3, H=7, W=37, KH=2, KW=2, stride=2), dict(N=2, C=2, H=9, W=9, KH=3, KW=3, stride=1)],
}


def reduction_len(w, sizes):
    return {"matmul": sizes.get("K", 1), "conv2d": sizes.get("C", 1) * sizes.get("R", 1) * sizes.get("S", 1),
            "depthwise_conv2d": sizes.get("R", 1) * sizes.get("S", 1), "softmax": sizes.get("D", 1)}.get(w.name, 1)


def cases():
    for w in HAND:
        for preset, sizes in w.presets.items():
            big = w.flops(sizes) > 5e8
            yield pytest.param(w, sizes, id=f"{w.name}-{preset}", marks=[pytest.mark.slow] if big else [])
        for i, sizes in enumerate(ODD.get(w.name, [])):
            yield pytest.param(w, sizes, id=f"{w.name}-odd{i}")


@pytest.mark.parametrize("w,sizes", list(cases()))
def test_hand_schedule_matches_reference(w, sizes):
    s = tl.schedule(tl.op(w.source), **sizes)
    w.hand_schedule(s)
    func = s.lowered(strict=True)  # every access proven in bounds: no hidden guard
    assert func.guards == 0
    inputs = w.make_inputs(sizes, np.random.default_rng(7))
    got = tl.build(s)(*inputs)
    assert_close(got, w.reference(*inputs, **sizes), reduction_len(w, sizes))


@pytest.mark.parametrize("w,sizes", list(cases()))
def test_numpy_fast_matches_reference(w, sizes):
    inputs = w.make_inputs(sizes, np.random.default_rng(3))
    got = w.numpy_fast(*inputs, **sizes)
    assert got.dtype == inputs[0].dtype
    assert_close(got, w.reference(*inputs, **sizes), reduction_len(w, sizes))


def test_every_required_workload_has_a_hand_schedule():
    assert {w.name for w in HAND} >= {"matmul", "conv2d", "depthwise_conv2d", "softmax", "maxpool2d"}
