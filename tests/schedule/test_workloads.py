"""Tests of the workload library (schedules/): every workload compiles with the default schedule and matches
its NumPy reference at every preset and at extra edge sizes (1, primes); the references themselves are
checked against hand-computed values and naive loop implementations, since they are the oracle.

Run: ``.venv/bin/pytest tests/schedule/test_workloads.py -q`` (``-m "not slow"`` skips the
big presets).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from oracle import EXACT, assert_close, reduction_len  # tests/support/, on sys.path (tests/conftest.py)

from tensorlang import schedules
from tensorlang.schedules import WORKLOADS, Workload, conv_output_size

# Presets whose build + run take longer than about 2 s with the default schedule (measured: only matmul 1024,
# about 5 s; dense_bias_relu bert_ffn at 6e8 flops takes 0.6 s): more than this many flops
# (for the memory-bound workloads flops() is about the number of elements).
SLOW_FLOPS = 1e9


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def build_and_check(w: Workload, sizes: dict, seed: int = 0) -> None:
    """Build ``w`` with the default schedule at ``sizes``, run it on ``w.make_inputs`` and compare with
    ``w.reference`` (also checks shapes/dtypes the kernel reports and that the inputs are left unchanged).

    Example::

        >>> build_and_check(schedules.get("matmul"), {"M": 2, "N": 3, "K": 4})
    """
    import tensorlang as tl

    op = tl.op(w.source)
    kernel = tl.build(op, **sizes)
    inputs = w.make_inputs(sizes, np.random.default_rng(seed))
    for name, a in zip(op.inputs, inputs):
        assert a.flags.c_contiguous, name
        assert tuple(kernel.input_shapes[name]) == a.shape, name
        assert np.dtype(kernel.input_dtypes[name]) == a.dtype, name
    saved = [a.copy() for a in inputs]
    actual = _as_tuple(kernel(*inputs))
    expected = _as_tuple(w.reference(*inputs, **sizes))
    assert len(actual) == len(expected) == len(op.outputs)
    for a, b in zip(inputs, saved):
        np.testing.assert_array_equal(a, b, err_msg="kernel modified an input")
    for name, got, want in zip(op.outputs, actual, expected):
        assert tuple(kernel.output_shapes[name]) == want.shape, name
        assert np.dtype(kernel.output_dtypes[name]) == want.dtype, name
        assert_close(
            got, want, reduction_len(w.name, sizes), exact=w.name in EXACT, err_msg=f"{w.name} {name} {sizes}"
        )


# ---------------------------------------------------------------------------------------------------------
# Registry and Workload record


def test_registry_order_and_names():
    assert list(WORKLOADS) == [
        "matmul", "batch_matmul", "conv1d", "conv2d", "depthwise_conv2d", "maxpool2d", "avgpool2d",
        "softmax", "layernorm", "dense_bias_relu", "transpose", "reduce_sum", "elementwise",
    ]  # fmt: skip
    for name, w in WORKLOADS.items():
        assert isinstance(w, Workload)
        assert w.name == name
        assert schedules.get(name) is w
        assert w.description
    assert set(schedules.__all__) >= {"WORKLOADS", "get", "Workload"}


def test_get_unknown_lists_legal_names():
    with pytest.raises(ValueError) as info:
        schedules.get("matmull")
    assert "matmull" in str(info.value)
    for name in WORKLOADS:
        assert name in str(info.value)


def test_sizes_default_copy_and_unknown_preset():
    w = schedules.get("conv2d")
    assert w.sizes() == w.sizes("resnet18_3x3") == {
        "N": 1, "C": 64, "F": 64, "H": 56, "W": 56, "R": 3, "S": 3, "stride": 1, "pad": 1, "dil": 1,
    }  # fmt: skip
    s = w.sizes()
    s["N"] = 99
    assert w.sizes()["N"] == 1  # a fresh copy each call
    with pytest.raises(ValueError) as info:
        w.sizes("resnet50")
    for preset in w.presets:
        assert repr(preset) in str(info.value)


def test_workload_validates_presets():
    kwargs = dict(
        name="x", source="", reference=lambda *a, **k: None, make_inputs=lambda s, r: [],
        flops=lambda s: 0.0, description="",
    )  # fmt: skip
    with pytest.raises(ValueError, match="default preset"):
        Workload(presets={"a": {"N": 1}}, default_preset="b", **kwargs)
    with pytest.raises(ValueError, match="binds"):
        Workload(presets={"a": {"N": 1}, "b": {"M": 1}}, default_preset="a", **kwargs)
    with pytest.raises(ValueError, match="non-negative"):
        Workload(presets={"a": {"N": -1}}, default_preset="a", **kwargs)
    with pytest.raises(ValueError, match="non-negative"):
        Workload(presets={"a": {"N": 2.0}}, default_preset="a", **kwargs)
    assert Workload(presets={"a": {"pad": 0}}, default_preset="a", **kwargs).sizes() == {"pad": 0}
    with pytest.raises(ValueError, match="preset 'a': x: size stride=0 must be >= 1"):
        Workload(presets={"a": {"stride": 0}}, default_preset="a", size_min={"stride": 1}, **kwargs)


def test_sizes_below_a_workloads_minimum_are_refused_by_name():
    from tensorlang.errors import UsageError
    from tensorlang.tuner.task import Task
    for name, size in (("conv2d", "stride"), ("conv2d", "dil"), ("conv1d", "stride"), ("depthwise_conv2d", "stride"),
                       ("maxpool2d", "KW"), ("avgpool2d", "KH")):
        with pytest.raises(UsageError, match=f"{name}: size {size}=0 must be >= 1"):
            Task.create(name, sizes={size: 0})
    schedules.get("conv2d").check_sizes({"stride": 2, "pad": 0})  # pad 0 is fine


def test_required_presets():
    assert schedules.get("matmul").sizes("1024") == {"M": 1024, "N": 1024, "K": 1024}
    assert schedules.get("matmul").default_preset == "1024"
    assert schedules.get("depthwise_conv2d").sizes("mobilenet_112") == {
        "N": 1, "C": 32, "H": 112, "W": 112, "R": 3, "S": 3, "stride": 1, "pad": 1,
    }  # fmt: skip
    assert schedules.get("softmax").sizes("1024") == {"N": 1024, "D": 1024}
    mp = schedules.get("maxpool2d").sizes()
    assert (mp["KH"], mp["KW"], mp["stride"]) == (2, 2, 2)
    conv = schedules.get("conv2d").presets.values()
    assert any(s["stride"] == 2 for s in conv) and any(s["dil"] > 1 for s in conv)


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_presets_bind_exactly_the_program_sizes(name):
    import tensorlang as tl

    w = WORKLOADS[name]
    op = tl.op(w.source)
    assert op.name == w.name
    for preset in w.presets:
        assert set(w.sizes(preset)) == set(op.size_names), preset


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_make_inputs_flops_and_reference_shapes(name):
    w = WORKLOADS[name]
    for preset in w.presets:
        sizes = w.sizes(preset)
        inputs = w.make_inputs(sizes, np.random.default_rng(1))
        again = w.make_inputs(sizes, np.random.default_rng(1))
        assert inputs and all(a.dtype == np.float32 and a.flags.c_contiguous for a in inputs)
        assert all(np.isfinite(a).all() for a in inputs)
        for a, b in zip(inputs, again):
            np.testing.assert_array_equal(a, b)  # deterministic in the generator
        flops = w.flops(sizes)
        assert isinstance(flops, float) and flops > 0, preset
        out = _as_tuple(w.reference(*inputs, **sizes))
        assert all(o.dtype == np.float32 and min(o.shape) >= 1 for o in out), preset


# ---------------------------------------------------------------------------------------------------------
# Every preset, compiled with the default schedule, against the reference


def _preset_params():
    params = []
    for name, w in WORKLOADS.items():
        for preset in w.presets:
            sizes = w.sizes(preset)
            slow = w.flops(sizes) > SLOW_FLOPS
            params.append(
                pytest.param(name, preset, id=f"{name}-{preset}", marks=[pytest.mark.slow] if slow else [])
            )
    return params


@pytest.mark.parametrize("name, preset", _preset_params())
def test_preset_matches_reference(name, preset):
    w = WORKLOADS[name]
    build_and_check(w, w.sizes(preset))


# ---------------------------------------------------------------------------------------------------------
# Extra small sizes: 1, primes, strides/pads/dilations that leave remainders


def _conv2d_sizes():
    out = []
    for stride, pad, dil in itertools.product((1, 2), (0, 1), (1, 2)):
        out.append(dict(N=1, C=3, F=5, H=7, W=11, R=3, S=3, stride=stride, pad=pad, dil=dil))
    out += [
        dict(N=1, C=1, F=1, H=1, W=1, R=1, S=1, stride=1, pad=0, dil=1),
        dict(N=2, C=1, F=1, H=1, W=1, R=1, S=1, stride=1, pad=1, dil=1),  # output is mostly padding
        dict(N=1, C=2, F=3, H=5, W=6, R=2, S=3, stride=3, pad=1, dil=1),  # non-square kernel
        dict(N=2, C=5, F=7, H=13, W=9, R=5, S=1, stride=2, pad=2, dil=3),
        dict(N=1, C=17, F=19, H=4, W=4, R=3, S=3, stride=1, pad=1, dil=1),
    ]
    return out


def _conv1d_sizes():
    out = []
    for stride, pad, dil in itertools.product((1, 2), (0, 1), (1, 2)):
        out.append(dict(N=1, C=3, F=5, W=11, S=3, stride=stride, pad=pad, dil=dil))
    out += [
        dict(N=1, C=1, F=1, W=1, S=1, stride=1, pad=0, dil=1),
        dict(N=2, C=7, F=3, W=13, S=5, stride=3, pad=2, dil=2),
        dict(N=3, C=2, F=1, W=7, S=7, stride=1, pad=0, dil=1),  # kernel as wide as the input
    ]
    return out


def _depthwise_sizes():
    out = []
    for stride, pad in itertools.product((1, 2), (0, 1)):
        out.append(dict(N=1, C=3, H=7, W=11, R=3, S=3, stride=stride, pad=pad))
    out += [
        dict(N=1, C=1, H=1, W=1, R=1, S=1, stride=1, pad=0),
        dict(N=2, C=13, H=5, W=9, R=2, S=5, stride=3, pad=2),
    ]
    return out


def _pool_sizes():
    return [
        dict(N=1, C=1, H=1, W=1, KH=1, KW=1, stride=1),
        dict(N=1, C=3, H=7, W=11, KH=2, KW=2, stride=2),  # odd sizes: last row/column dropped
        dict(N=2, C=5, H=7, W=11, KH=3, KW=2, stride=1),
        dict(N=1, C=2, H=9, W=9, KH=3, KW=3, stride=3),
        dict(N=1, C=7, H=5, W=5, KH=5, KW=5, stride=1),  # global pooling
        dict(N=1, C=3, H=13, W=8, KH=3, KW=3, stride=2),
    ]


def _mnk(*triples):
    return [dict(M=m, N=n, K=k) for m, n, k in triples]


EXTRA_SIZES = {
    "matmul": _mnk((1, 1, 1), (1, 7, 13), (7, 1, 13), (13, 7, 1), (17, 19, 23), (33, 65, 31)),
    "batch_matmul": [
        dict(BS=1, M=1, N=1, K=1), dict(BS=3, M=5, N=7, K=11), dict(BS=2, M=1, N=13, K=3),
        dict(BS=5, M=17, N=2, K=19),
    ],
    "conv1d": _conv1d_sizes(),
    "conv2d": _conv2d_sizes(),
    "depthwise_conv2d": _depthwise_sizes(),
    "maxpool2d": _pool_sizes(),
    "avgpool2d": _pool_sizes(),
    "softmax": [dict(N=1, D=1), dict(N=1, D=7), dict(N=13, D=1), dict(N=5, D=31), dict(N=3, D=1009)],
    "layernorm": [dict(N=1, D=1), dict(N=1, D=7), dict(N=13, D=3), dict(N=5, D=129)],
    "dense_bias_relu": _mnk((1, 1, 1), (1, 7, 13), (13, 7, 1), (5, 17, 31)),
    "transpose": [dict(M=1, N=1), dict(M=1, N=7), dict(M=7, N=1), dict(M=13, N=17), dict(M=31, N=33)],
    "reduce_sum": [dict(M=1, N=1), dict(M=1, N=7), dict(M=7, N=1), dict(M=13, N=17), dict(M=3, N=1001)],
    "elementwise": [dict(N=1, M=1), dict(N=1, M=7), dict(N=7, M=1), dict(N=13, M=17)],
}  # fmt: skip


def test_extra_sizes_cover_every_workload():
    assert set(EXTRA_SIZES) == set(WORKLOADS)
    for name, cases in EXTRA_SIZES.items():
        for sizes in cases:
            assert set(sizes) == set(WORKLOADS[name].sizes()), (name, sizes)


def _extra_params():
    return [
        pytest.param(name, sizes, id=f"{name}-" + "-".join(f"{k}{v}" for k, v in sizes.items()))
        for name, cases in EXTRA_SIZES.items()
        for sizes in cases
    ]


@pytest.mark.parametrize("name, sizes", _extra_params())
def test_extra_sizes_match_reference(name, sizes):
    build_and_check(WORKLOADS[name], sizes, seed=7)


def test_maxpool_all_negative_inputs():
    # The max reduction must start from -inf, not 0.
    import tensorlang as tl

    w = WORKLOADS["maxpool2d"]
    sizes = dict(N=1, C=2, H=5, W=6, KH=2, KW=3, stride=2)
    I = -1.0 - np.abs(np.random.default_rng(3).standard_normal((1, 2, 5, 6), dtype=np.float32))
    got = tl.build(tl.op(w.source), **sizes)(I)
    assert_close(got, w.reference(I, **sizes), exact=True)
    assert (got < -1.0).all()


def test_softmax_large_logits():
    # Max subtraction keeps exp finite for logits far beyond exp's f32 range.
    import tensorlang as tl

    w = WORKLOADS["softmax"]
    sizes = dict(N=3, D=17)
    X = (np.random.default_rng(4).standard_normal((3, 17)) * 30 + 500).astype(np.float32)
    got = tl.build(tl.op(w.source), **sizes)(X)
    assert np.isfinite(got).all()
    assert_close(got, w.reference(X, **sizes), reduction_len=17)


# ---------------------------------------------------------------------------------------------------------
# The references are the oracle: hand-computed cases and naive loop implementations


def test_conv2d_reference_by_hand():
    ref = WORKLOADS["conv2d"].reference
    I = np.arange(1, 10, dtype=np.float32).reshape(1, 1, 3, 3)  # [[1,2,3],[4,5,6],[7,8,9]]
    Wt = np.array([[1, 2], [3, 4]], np.float32).reshape(1, 1, 2, 2)
    # Valid 2x2 windows: 1+4+12+20, 2+6+15+24, 4+10+21+32, 5+12+24+36.
    np.testing.assert_array_equal(ref(I, Wt, stride=1, pad=0, dil=1)[0, 0], [[37, 47], [67, 77]])
    # pad 1, stride 2: windows at (-1,-1), (-1,1), (1,-1), (1,1) of the padded image.
    # (0,0): 4*1; (0,1): 3*2 + 4*3; (1,0): 2*4 + 4*7; (1,1): 1*5 + 2*6 + 3*8 + 4*9.
    np.testing.assert_array_equal(ref(I, Wt, stride=2, pad=1, dil=1)[0, 0], [[4, 18], [36, 77]])
    # Dilation 2: the taps are the four corners, 1*1 + 2*3 + 3*7 + 4*9.
    np.testing.assert_array_equal(ref(I, Wt, stride=1, pad=0, dil=2), [[[[64]]]])
    # Two input channels (second all ones), two filters.
    I2 = np.concatenate([I, np.ones_like(I)], axis=1)
    Wt2 = np.zeros((2, 2, 2, 2), np.float32)
    Wt2[0, 0] = [[1, 2], [3, 4]]
    Wt2[0, 1] = 1  # adds 4 to every output of filter 0
    Wt2[1, 1, 1, 1] = 5  # filter 1 sees only the ones channel: 5 everywhere
    out = ref(I2, Wt2, stride=1, pad=0, dil=1)
    np.testing.assert_array_equal(out, [[[[41, 51], [71, 81]], [[5, 5], [5, 5]]]])
    assert out.dtype == np.float32


def test_maxpool2d_reference_by_hand():
    ref = WORKLOADS["maxpool2d"].reference
    I = np.array(
        [[1, -2, 3, 0, 9], [4, 5, -6, 7, 1], [-1, -3, -5, -7, 2], [-8, -2, -4, -6, 3]], np.float32
    ).reshape(1, 1, 4, 5)
    # 2x2 stride 2: the last column does not fill a window and is dropped.
    np.testing.assert_array_equal(ref(I, KH=2, KW=2, stride=2)[0, 0], [[5, 7], [-1, -4]])
    # 3x3 stride 1: a 2x3 output.
    np.testing.assert_array_equal(ref(I, KH=3, KW=3, stride=1)[0, 0], [[5, 7, 9], [5, 7, 7]])
    # 1x5 stride 1 (row maxima) and 4x1 stride 2 (column maxima of rows 0-3 at columns 0, 2, 4).
    np.testing.assert_array_equal(ref(I, KH=1, KW=5, stride=1)[0, 0, :, 0], [9, 7, 2, 3])
    np.testing.assert_array_equal(ref(I, KH=4, KW=1, stride=2)[0, 0], [[4, 3, 9]])


def test_avgpool2d_and_depthwise_references_by_hand():
    I = np.array([[1, 5, 2, 0], [3, 4, 8, 1]], np.float32).reshape(1, 1, 2, 4)
    avg = WORKLOADS["avgpool2d"].reference
    np.testing.assert_array_equal(avg(I, KH=2, KW=2, stride=2)[0, 0], [[13 / 4, 11 / 4]])
    np.testing.assert_array_equal(avg(I, KH=1, KW=2, stride=1)[0, 0], [[3, 3.5, 1], [3.5, 6, 4.5]])
    dw = WORKLOADS["depthwise_conv2d"].reference
    Wt = np.array([[[1, -1]]], np.float32)  # (C=1, R=1, S=2): horizontal difference
    np.testing.assert_array_equal(dw(I, Wt, stride=1, pad=0)[0, 0], [[-4, 3, 2], [-1, -4, 7]])
    # pad 1, stride 2 on 4x6 padded: rows -1, 1 and columns -1, 1 of the input.
    np.testing.assert_array_equal(dw(I, Wt, stride=2, pad=1)[0, 0], [[0, 0, 0], [-3, -4, 1]])


def _naive_conv2d(I, Wt, stride, pad, dil):
    N, C, H, W = I.shape
    F, _, R, S = Wt.shape
    OH = conv_output_size(H, R, stride, pad, dil)
    OW = conv_output_size(W, S, stride, pad, dil)
    O = np.zeros((N, F, OH, OW))
    for n, f, h, w, c, r, s in itertools.product(*map(range, (N, F, OH, OW, C, R, S))):
        y, x = h * stride + r * dil - pad, w * stride + s * dil - pad
        if 0 <= y < H and 0 <= x < W:
            O[n, f, h, w] += float(I[n, c, y, x]) * float(Wt[f, c, r, s])
    return O


@pytest.mark.parametrize("stride, pad, dil", list(itertools.product((1, 2, 3), (0, 1, 2), (1, 2))))
def test_conv_references_against_loops(stride, pad, dil):
    rng = np.random.default_rng(stride * 100 + pad * 10 + dil)
    I = rng.standard_normal((2, 3, 7, 8), dtype=np.float32)
    Wt = rng.standard_normal((4, 3, 3, 2), dtype=np.float32)
    naive = _naive_conv2d(I, Wt, stride, pad, dil)
    got = WORKLOADS["conv2d"].reference(I, Wt, stride=stride, pad=pad, dil=dil)
    np.testing.assert_allclose(got, naive, rtol=1e-6, atol=1e-5)
    # conv1d is conv2d with H = R = 1.
    got1 = WORKLOADS["conv1d"].reference(I[:, :, 0], Wt[:, :, 0], stride=stride, pad=pad, dil=dil)
    # conv1d pads W only: pad the 2-D loop version's input in W by hand.
    Ip = np.pad(I[:, :, :1], ((0, 0), (0, 0), (0, 0), (pad, pad)))
    naive1 = _naive_conv2d(Ip, Wt[:, :, :1], stride, 0, dil)
    np.testing.assert_allclose(got1, naive1[:, :, 0], rtol=1e-6, atol=1e-5)
    # depthwise is a grouped conv2d: channel c convolved with filter c alone (no dilation).
    if dil == 1:
        Wd = rng.standard_normal((3, 3, 2), dtype=np.float32)
        got_dw = WORKLOADS["depthwise_conv2d"].reference(I, Wd, stride=stride, pad=pad)
        for c in range(3):
            naive_c = _naive_conv2d(I[:, c : c + 1], Wd[c : c + 1, None], stride, pad, 1)
            np.testing.assert_allclose(got_dw[:, c], naive_c[:, 0], rtol=1e-6, atol=1e-5)


@pytest.mark.parametrize("KH, KW, stride", [(2, 2, 2), (3, 2, 1), (3, 3, 2), (1, 4, 3)])
def test_pool_references_against_loops(KH, KW, stride):
    I = np.random.default_rng(KH * 10 + KW).standard_normal((2, 3, 9, 10), dtype=np.float32)
    OH, OW = conv_output_size(9, KH, stride), conv_output_size(10, KW, stride)
    mx = np.full((2, 3, OH, OW), -np.inf)
    sm = np.zeros((2, 3, OH, OW))
    for n, c, h, w, r, s in itertools.product(*map(range, (2, 3, OH, OW, KH, KW))):
        v = float(I[n, c, h * stride + r, w * stride + s])
        mx[n, c, h, w] = max(mx[n, c, h, w], v)
        sm[n, c, h, w] += v
    np.testing.assert_array_equal(WORKLOADS["maxpool2d"].reference(I, KH=KH, KW=KW, stride=stride), mx)
    np.testing.assert_allclose(
        WORKLOADS["avgpool2d"].reference(I, KH=KH, KW=KW, stride=stride), sm / (KH * KW), rtol=1e-6, atol=1e-7
    )


def test_row_references_against_loops():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((3, 6), dtype=np.float32)
    gamma, beta = rng.standard_normal(6, dtype=np.float32), rng.standard_normal(6, dtype=np.float32)
    sm = WORKLOADS["softmax"].reference(X)
    ln = WORKLOADS["layernorm"].reference(X, gamma, beta)
    rs = WORKLOADS["reduce_sum"].reference(X)
    for n in range(3):
        row = [float(v) for v in X[n]]
        ex = [math.exp(v) for v in row]
        np.testing.assert_allclose(sm[n], [v / sum(ex) for v in ex], rtol=1e-6)
        mean = sum(row) / 6
        var = sum((v - mean) ** 2 for v in row) / 6
        want = [(v - mean) / math.sqrt(var + 1e-5) * float(g) + float(b) for v, g, b in zip(row, gamma, beta)]
        np.testing.assert_allclose(ln[n], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rs[n], sum(row), rtol=1e-6)
    np.testing.assert_array_equal(WORKLOADS["transpose"].reference(X), X.T)
    A, B = X, rng.standard_normal((6, 4), dtype=np.float32)
    mm = WORKLOADS["matmul"].reference(A, B)
    bm = WORKLOADS["batch_matmul"].reference(A[None], B[None])[0]
    bias = rng.standard_normal(4, dtype=np.float32)
    dbr = WORKLOADS["dense_bias_relu"].reference(A, np.ascontiguousarray(B.T), bias)
    for i, j in itertools.product(range(3), range(4)):
        dot = sum(float(A[i, k]) * float(B[k, j]) for k in range(6))
        np.testing.assert_allclose([mm[i, j], bm[i, j]], dot, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(dbr[i, j], max(dot + float(bias[j]), 0.0), rtol=1e-6, atol=1e-6)


def test_elementwise_reference_against_scalar_math():
    rng = np.random.default_rng(6)
    A, B = rng.standard_normal((4, 5), dtype=np.float32), rng.standard_normal((4, 5), dtype=np.float32)
    E = WORKLOADS["elementwise"].reference(A, B)
    for i, j in itertools.product(range(4), range(5)):
        a, b = float(A[i, j]), float(B[i, j])
        t1 = math.tanh(a) * b + 1.0
        t2 = math.exp(-abs(t1)) + 0.5 * a
        np.testing.assert_allclose(E[i, j], t1 * t2 if a > b else t2 - t1, rtol=1e-6, atol=1e-7)
