"""Where a model's time goes (`tensorlang.graph.profile`, `Model.kernel_rows`, `Model.summary`): each kernel's op
category, bytes moved, and its bound and share of the FMA peak or the memory bandwidth; the time per category sums
to the kernels' total."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tensorlang as tl  # noqa: E402
from tensorlang.errors import UsageError  # noqa: E402
from tensorlang.graph import profile  # noqa: E402
from tensorlang.graph.ir import Graph, TensorType  # noqa: E402
from tensorlang.graph.passes import winograd  # noqa: E402


class Net(torch.nn.Module):
    """A 3x3 convolution, a depthwise one, a 1x1 one, max pooling, a global mean, a linear layer, a softmax and a
    product of two activations."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.pw = torch.nn.Conv2d(16, 32, 1)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x, a, b):
        y = self.pw(self.dw(self.c1(x).relu())).relu()
        y = torch.nn.functional.max_pool2d(y, 2).mean((2, 3))
        return torch.softmax(self.fc(y), -1), torch.bmm(a, b)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    args = (torch.randn(1, 3, 16, 16), torch.randn(2, 8, 4), torch.randn(2, 4, 8))
    return tl.from_torch(Net().eval(), args), [a.numpy() for a in args]


def test_each_kernel_has_its_category_and_bytes(model):
    m, _ = model
    rows = m.kernel_rows()
    cats = {r.ops: r.category for r in rows}
    assert [r.category for r in rows if "convolution" in r.ops] == ["conv", "depthwise conv", "1x1 conv/GEMM"]
    assert cats["max_pool2d_with_indices"] == "pooling" and cats["mean"] == "pooling"  # a global average pool
    assert cats["addmm"] == "1x1 conv/GEMM" and cats["bmm"] == "matmul" and cats["_softmax"] == "softmax/attention"
    fc = next(r for r in rows if r.ops == "addmm")
    assert fc.bytes == 4 * (32 + 32 * 10 + 10 + 10)  # input, weight, bias, output
    assert fc.flops > 0 and fc.seconds is None and fc.bound is None


def test_times_give_speeds_bounds_and_a_category_sum_equal_to_the_total(model):
    m, args = model
    times = m.profile(*args, repeat=2)
    rows = m.kernel_rows(times, peak_gflops=100.0, bandwidth_gbps=20.0)
    assert [r.seconds for r in rows] == times
    for r in rows:
        balance_side = "compute" if r.flops / r.bytes >= 100.0 / 20.0 else "memory"
        assert r.bound == balance_side
        expect = r.flops / r.seconds / 1e9 / 100.0 if r.bound == "compute" else r.bytes / r.seconds / 1e9 / 20.0
        assert math.isclose(r.share, expect, rel_tol=1e-12)
    cats = profile.by_category(rows)
    assert set(cats) <= set(profile.CATEGORIES)
    assert math.isclose(sum(cats.values()), sum(times), rel_tol=1e-12)
    d = rows[0].as_dict()
    assert d["gflops"] == rows[0].gflops and d["category"] == rows[0].category


def test_summary_shows_the_columns_and_the_roll_up(model):
    m, args = model
    text = m.summary(*args, repeat=1, peak_gflops=100.0, bandwidth_gbps=20.0)
    header = text.splitlines()[0].split()
    assert header[:7] == ["node", "ops", "category", "output", "schedule", "MFLOP", "MB"]
    assert header[-4:] == ["GB/s", "bound", "of", "ceiling"]
    assert "by category: conv " in text and "FMA peak 100 GFLOPS, bandwidth 20 GB/s" in text
    assert "bound" not in m.summary(*args, repeat=1).splitlines()[0]


def test_a_ceiling_alone_or_times_that_do_not_fit_are_refused(model):
    m, _ = model
    with pytest.raises(UsageError, match="give both the FMA peak"):
        m.kernel_rows([1e-3] * len(m.steps), peak_gflops=100.0)
    with pytest.raises(UsageError, match=f"2 kernel times for {len(m.steps)} kernels"):
        m.kernel_rows([1e-3, 1e-3])
    with pytest.raises(UsageError, match="must both be positive"):
        profile.with_ceilings(m.kernel_rows([1e-3] * len(m.steps)), 0.0, 20.0)


def test_winograd_kernels_are_the_convolution_s():
    g = Graph("w")
    x = g.add_input("x", TensorType((1, 64, 16, 16), "f32"))
    w = g.add_constant("w", np.zeros((64, 64, 3, 3), np.float32))
    conv = g.add_node("convolution", [x, w, None], {"stride": [1, 1], "padding": [1, 1], "dilation": [1, 1],
                                                     "groups": 1, "transposed": False},
                      [TensorType((1, 64, 16, 16), "f32")])
    g.outputs = [conv.outputs[0]]
    assert winograd.run(g)
    assert [(n.op, profile.node_category(n)) for n in g.nodes] == [
        ("winograd_input", "conv"), ("bmm", "conv"), ("winograd_output", "conv")]


def test_shape_rules_shared_with_other_runtimes():
    assert profile.conv_category((8, 1, 3, 3), 8) == "depthwise conv"
    assert profile.conv_category((8, 1, 3, 3), 1) == "conv"  # one input channel: a plain convolution
    assert profile.conv_category((8, 4, 1, 1), 8) == "1x1 conv/GEMM"  # grouped 1x1
    assert profile.reduction_category((1, 8, 1, 1), (1, 8, 1, 1)) == "other"
    assert profile.reduction_category((1, 8, 4, 4), (1, 1, 4, 4)) == "other"
