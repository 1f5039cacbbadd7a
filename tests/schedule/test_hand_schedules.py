"""Hand-written schedules (schedules/<workload>.py) and the fast numpy baselines compute what the reference
computes, at every preset and at sizes their tiles do not divide."""
import numpy as np
import pytest
from oracle import assert_close

import tensorlang as tl
from tensorlang import schedules

HAND = [w for w in schedules.WORKLOADS.values() if w.hand_schedule is not None]
FAST = [w for w in schedules.WORKLOADS.values() if w.numpy_fast is not None]
ODD = {
    "matmul": [dict(M=1, N=7, K=13), dict(M=97, N=131, K=61), dict(M=13, N=600, K=300)],
    "conv2d": [dict(N=1, C=3, H=7, W=11, F=5, R=3, S=3, stride=1, pad=1, dil=1),
               dict(N=2, C=4, H=9, W=30, F=40, R=3, S=3, stride=2, pad=0, dil=2)],
    "depthwise_conv2d": [dict(N=1, C=3, H=7, W=19, R=3, S=3, stride=1, pad=1),
                         dict(N=2, C=5, H=11, W=13, R=5, S=5, stride=2, pad=2)],
    "softmax": [dict(N=1, D=1), dict(N=7, D=33)],
    "maxpool2d": [dict(N=1, C=3, H=7, W=37, KH=2, KW=2, stride=2), dict(N=2, C=2, H=9, W=9, KH=3, KW=3, stride=1)],
    "avgpool2d": [dict(N=1, C=3, H=7, W=37, KH=2, KW=3, stride=2), dict(N=2, C=2, H=9, W=9, KH=3, KW=3, stride=1)],
    "batch_matmul": [dict(BS=3, M=1, N=7, K=13), dict(BS=2, M=17, N=9, K=33)],
    "conv1d": [dict(N=2, C=3, W=19, F=5, S=3, stride=2, pad=1, dil=2), dict(N=1, C=1, W=5, F=1, S=5, stride=1,
                                                                            pad=0, dil=1)],
    "dense_bias_relu": [dict(M=1, N=7, K=13), dict(M=33, N=17, K=5)],
    "elementwise": [dict(N=1, M=1), dict(N=7, M=33)],
    "layernorm": [dict(N=1, D=1), dict(N=5, D=37)],
    "reduce_sum": [dict(M=1, N=1), dict(M=7, N=1001)],
    "transpose": [dict(M=1, N=9), dict(M=33, N=17)],
}


def reduction_len(w, sizes):
    return {"matmul": sizes.get("K", 1), "conv2d": sizes.get("C", 1) * sizes.get("R", 1) * sizes.get("S", 1),
            "depthwise_conv2d": sizes.get("R", 1) * sizes.get("S", 1), "softmax": sizes.get("D", 1),
            "batch_matmul": sizes.get("K", 1), "dense_bias_relu": sizes.get("K", 1),
            "conv1d": sizes.get("C", 1) * sizes.get("S", 1), "avgpool2d": sizes.get("KH", 1) * sizes.get("KW", 1),
            "layernorm": sizes.get("D", 1), "reduce_sum": sizes.get("N", 1)}.get(w.name, 1)


def cases(workloads=HAND):
    for w in workloads:
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


@pytest.mark.parametrize("w,sizes", list(cases(FAST)))
def test_numpy_fast_matches_reference(w, sizes):
    inputs = w.make_inputs(sizes, np.random.default_rng(3))
    got = w.numpy_fast(*inputs, **sizes)
    assert got.dtype == inputs[0].dtype
    assert_close(got, w.reference(*inputs, **sizes), reduction_len(w, sizes))


def test_every_workload_has_a_numpy_baseline_in_float32():
    assert FAST == list(schedules.WORKLOADS.values())


def test_every_required_workload_has_a_hand_schedule():
    assert {w.name for w in HAND} >= {"matmul", "conv2d", "depthwise_conv2d", "softmax", "maxpool2d"}
