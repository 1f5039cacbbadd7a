"""The PyTorch speed baselines (``Workload.torch_fast``, timed by ``tensorlang bench``) compute what the workloads'
references compute: same shapes, dtypes and values (the repository's oracle tolerances), at every preset small
enough to run quickly, at extra small sizes with strides, padding, dilation and remainders, without changing
their inputs (which share the numpy inputs' memory) or returning a view of them. Skipped where PyTorch is not
installed; the schedules package itself must import without it.

Run: ``python -m pytest -q -p no:cacheprovider tests/graph/test_torch_baselines.py``.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from oracle import assert_close  # tests/support/, on sys.path (tests/conftest.py)

from tensorlang.schedules import WORKLOADS

torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Workloads left without a torch_fast on purpose (none: every workload has a faithful PyTorch formulation).
NO_TORCH_FAST: set[str] = set()

# Presets above this many flops are not run here (the float64 references get slow); every workload still runs at
# its smallest preset whatever its flops.
MAX_FLOPS = 2e8

# Number of terms summed into one output element (the oracle's tolerance grows with it).
REDUCTION_LEN = {
    "matmul": lambda s: s["K"],
    "batch_matmul": lambda s: s["K"],
    "conv1d": lambda s: s["C"] * s["S"],
    "conv2d": lambda s: s["C"] * s["R"] * s["S"],
    "depthwise_conv2d": lambda s: s["R"] * s["S"],
    "maxpool2d": lambda s: 1,
    "avgpool2d": lambda s: s["KH"] * s["KW"],
    "softmax": lambda s: s["D"],
    "layernorm": lambda s: s["D"],
    "dense_bias_relu": lambda s: s["K"],
    "transpose": lambda s: 1,
    "reduce_sum": lambda s: s["N"],
    "elementwise": lambda s: 1,
}

EXACT = {"maxpool2d", "transpose"}  # results are copies of input values: must be bit-exact


def _conv1d(N, C, F, W, S, stride, pad, dil):
    return dict(N=N, C=C, F=F, W=W, S=S, stride=stride, pad=pad, dil=dil)


def _conv2d(N, C, F, H, W, R, S, stride, pad, dil):
    return dict(N=N, C=C, F=F, H=H, W=W, R=R, S=S, stride=stride, pad=pad, dil=dil)


def _pool(N, C, H, W, KH, KW, stride):
    return dict(N=N, C=C, H=H, W=W, KH=KH, KW=KW, stride=stride)


_POOL_SIZES = [
    _pool(1, 1, 1, 1, 1, 1, 1),
    _pool(1, 3, 7, 11, 2, 2, 2),  # odd sizes: the last row and column are dropped (no ceil mode)
    _pool(2, 5, 7, 11, 3, 2, 1),  # non-square window, overlapping
    _pool(1, 3, 13, 8, 3, 3, 2),  # overlapping, strided
    _pool(1, 2, 10, 10, 2, 2, 3),  # stride larger than the window: inputs skipped
    _pool(1, 7, 5, 5, 5, 5, 1),  # global pooling
]

# Extra small sizes: strides, padding and dilation that leave remainders, sizes of 1, non-square kernels.
EXTRA_SIZES = {
    "matmul": [dict(M=1, N=1, K=1), dict(M=1, N=7, K=13), dict(M=17, N=19, K=23)],
    "batch_matmul": [dict(BS=1, M=1, N=1, K=1), dict(BS=3, M=5, N=7, K=11)],
    "conv1d": [
        _conv1d(1, 3, 5, 11, 3, stride=2, pad=1, dil=2),
        _conv1d(2, 7, 3, 13, 5, stride=3, pad=2, dil=2),
        _conv1d(1, 2, 4, 9, 3, stride=1, pad=0, dil=1),
        _conv1d(2, 1, 1, 1, 1, stride=1, pad=1, dil=1),  # output mostly padding
        _conv1d(3, 2, 1, 7, 7, stride=1, pad=0, dil=1),  # kernel as wide as the input
    ],
    "conv2d": [
        _conv2d(1, 3, 5, 7, 11, 3, 3, stride=2, pad=1, dil=2),
        _conv2d(2, 5, 7, 13, 9, 5, 1, stride=2, pad=2, dil=3),
        _conv2d(1, 2, 3, 5, 6, 2, 3, stride=3, pad=1, dil=1),  # non-square kernel
        _conv2d(1, 3, 4, 6, 5, 3, 3, stride=1, pad=0, dil=1),
        _conv2d(2, 1, 1, 1, 1, 1, 1, stride=1, pad=1, dil=1),  # output mostly padding
    ],
    "depthwise_conv2d": [
        dict(N=1, C=3, H=7, W=11, R=3, S=3, stride=2, pad=0),
        dict(N=1, C=3, H=7, W=11, R=3, S=3, stride=2, pad=1),
        dict(N=2, C=13, H=5, W=9, R=2, S=5, stride=3, pad=2),
        dict(N=1, C=1, H=1, W=1, R=1, S=1, stride=1, pad=0),
    ],
    "maxpool2d": _POOL_SIZES,
    "avgpool2d": _POOL_SIZES,
    "softmax": [dict(N=1, D=1), dict(N=5, D=31), dict(N=3, D=1009)],
    "layernorm": [dict(N=1, D=1), dict(N=13, D=3), dict(N=5, D=129)],
    "dense_bias_relu": [dict(M=1, N=1, K=1), dict(M=1, N=7, K=13), dict(M=5, N=17, K=31)],
    "transpose": [dict(M=1, N=7), dict(M=7, N=1), dict(M=31, N=33)],  # M or N of 1: X.T is already contiguous
    "reduce_sum": [dict(M=1, N=1), dict(M=7, N=1), dict(M=3, N=1001)],
    "elementwise": [dict(N=1, M=1), dict(N=13, M=17)],
}

WITH_TORCH = [name for name, w in WORKLOADS.items() if w.torch_fast is not None]


def _cases() -> list[tuple[str, str, dict]]:
    """(workload, case id, sizes): the presets of at most MAX_FLOPS (the smallest one at least), then the extras."""
    cases = []
    for name in WITH_TORCH:
        w = WORKLOADS[name]
        smallest = min(w.presets, key=lambda p: w.flops(w.sizes(p)))
        for preset in w.presets:
            if preset == smallest or w.flops(w.sizes(preset)) <= MAX_FLOPS:
                cases.append((name, preset, w.sizes(preset)))
        for sizes in EXTRA_SIZES.get(name, []):
            cases.append((name, "-".join(f"{k}{v}" for k, v in sizes.items()), dict(sizes)))
    return cases


CASES = _cases()


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


@pytest.mark.parametrize("name, sizes", [pytest.param(n, s, id=f"{n}-{c}") for n, c, s in CASES])
def test_torch_fast_matches_reference(name, sizes):
    w = WORKLOADS[name]
    inputs = w.make_inputs(sizes, np.random.default_rng(0))
    saved = [a.copy() for a in inputs]
    tensors = [torch.from_numpy(a) for a in inputs]
    with torch.inference_mode():
        actual = _as_tuple(w.torch_fast(torch, *tensors, **sizes))
    for a, b in zip(inputs, saved):
        np.testing.assert_array_equal(a, b, err_msg=f"{name} {sizes}: torch_fast modified an input")
    expected = _as_tuple(w.reference(*inputs, **sizes))
    assert len(actual) == len(expected), f"{name}: {len(actual)} outputs, the reference gives {len(expected)}"
    for i, (got, want) in enumerate(zip(actual, expected)):
        assert isinstance(got, torch.Tensor), f"{name} output {i} is a {type(got).__name__}, not a torch.Tensor"
        got = got.numpy()
        assert not any(np.may_share_memory(got, a) for a in inputs), f"{name} output {i} is a view of an input"
        assert_close(got, want, REDUCTION_LEN[name](sizes), exact=name in EXACT,
                     err_msg=f"{name} output {i} {sizes}")


def test_every_workload_has_torch_fast_unless_listed():
    assert {name for name, w in WORKLOADS.items() if w.torch_fast is None} == NO_TORCH_FAST


def test_cases_cover_every_workload_and_its_strides_padding_dilation():
    assert set(REDUCTION_LEN) == set(WORKLOADS)
    for name, cases in EXTRA_SIZES.items():
        for sizes in cases:
            assert set(sizes) == set(WORKLOADS[name].sizes()), (name, sizes)
    for name in WITH_TORCH:
        tested = [s for n, _, s in CASES if n == name]
        assert tested, name
        for key, default in (("stride", 1), ("pad", 0), ("dil", 1)):
            if key in WORKLOADS[name].sizes():
                assert any(s[key] != default for s in tested), f"{name}: no case with {key} != {default}"


def test_softmax_large_logits():
    # torch.softmax subtracts the row max: exp stays finite for logits far beyond exp's f32 range.
    w = WORKLOADS["softmax"]
    X = (np.random.default_rng(4).standard_normal((3, 17)) * 30 + 500).astype(np.float32)
    with torch.inference_mode():
        got = w.torch_fast(torch, torch.from_numpy(X), N=3, D=17).numpy()
    assert np.isfinite(got).all()
    assert_close(got, w.reference(X, N=3, D=17), reduction_len=17)


def test_schedules_import_without_torch():
    code = "import sys; sys.modules['torch'] = None; from tensorlang import schedules; print(len(schedules.WORKLOADS))"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(len(WORKLOADS))
