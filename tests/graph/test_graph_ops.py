"""Every supported ATen op against torch: each case calls one ATen op on random inputs (odd sizes, batch > 1,
broadcasting where the op broadcasts), imports it without decomposing, compiles it with the whole pass pipeline,
and compares the result with torch's computed in float64. A last test checks that every op in the registry has a
case here."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle import assert_close  # noqa: E402

from tensorlang.frontend.torch_import import export_program, graph_from_exported, graph_from_fx  # noqa: E402
from tensorlang.graph import compile_graph, ops  # noqa: E402

aten = torch.ops.aten
G = torch.Generator().manual_seed(0)


def r(*shape, lo=-2.0, hi=2.0):
    return torch.rand(*shape, generator=G) * (hi - lo) + lo


def pos(*shape):
    return r(*shape, lo=0.1, hi=3.0)


def boolean(*shape):
    return torch.rand(*shape, generator=G) > 0.5


CASES = [
    # (op, function of the inputs, inputs, reduction length)
    ("convolution", lambda x, w, b: aten.convolution(x, w, b, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
     [r(2, 3, 7, 9), r(5, 3, 3, 3), r(5)], 27),
    ("convolution", lambda x, w: aten.convolution(x, w, None, [2, 1], [1, 2], [1, 1], False, [0, 0], 1),
     [r(2, 4, 9, 8), r(6, 4, 3, 2)], 24),
    ("convolution", lambda x, w, b: aten.convolution(x, w, b, [1, 1], [2, 2], [2, 2], False, [0, 0], 2),
     [r(1, 4, 9, 9), r(6, 2, 3, 3), r(6)], 18),
    ("convolution", lambda x, w: aten.convolution(x, w, None, [2, 2], [1, 1], [1, 1], False, [0, 0], 6),
     [r(2, 6, 8, 7), r(6, 1, 3, 3)], 9),
    ("convolution", lambda x, w: aten.convolution(x, w, None, [1], [1], [1], False, [0], 1),
     [r(2, 3, 11), r(4, 3, 3)], 9),
    ("convolution", lambda x, w: aten.convolution(x, w, None, [1, 1, 1], [0, 1, 0], [1, 1, 1], False, [0, 0, 0], 1),
     [r(1, 2, 4, 5, 3), r(3, 2, 2, 3, 1)], 12),
    ("mm", lambda a, b: aten.mm(a, b), [r(5, 7), r(7, 3)], 7),
    ("addmm", lambda c, a, b: aten.addmm(c, a, b), [r(3), r(5, 7), r(7, 3)], 7),
    ("addmm", lambda c, a, b: aten.addmm(c, a, b, beta=0.5, alpha=2.0), [r(5, 3), r(5, 7), r(7, 3)], 7),
    ("bmm", lambda a, b: aten.bmm(a, b), [r(3, 5, 7), r(3, 7, 4)], 7),
    ("baddbmm", lambda c, a, b: aten.baddbmm(c, a, b, beta=2.0), [r(1, 5, 4), r(3, 5, 7), r(3, 7, 4)], 7),
    ("max_pool2d_with_indices", lambda x: aten.max_pool2d_with_indices(x, [3, 3], [2, 2], [1, 1])[0],
     [r(2, 3, 9, 8)], 1),
    ("max_pool2d_with_indices", lambda x: aten.max_pool2d_with_indices(x, [2, 3], [2, 2], [0, 1], [1, 1], True)[0],
     [r(1, 2, 7, 9)], 1),
    ("max_pool2d_with_indices", lambda x: aten.max_pool2d_with_indices(x, [2, 2], [1, 1], [0, 0], [2, 2])[0],
     [r(3, 6, 6)], 1),
    ("avg_pool2d", lambda x: aten.avg_pool2d(x, [3, 3], [2, 2], [1, 1]), [r(2, 3, 9, 8)], 9),
    ("avg_pool2d", lambda x: aten.avg_pool2d(x, [3, 3], [2, 2], [1, 1], True, False), [r(2, 3, 8, 9)], 9),
    ("avg_pool2d", lambda x: aten.avg_pool2d(x, [2, 2], [2, 2], [0, 0], False, True, 3), [r(1, 2, 6, 6)], 4),
    ("_adaptive_avg_pool2d", lambda x: aten._adaptive_avg_pool2d(x, [1, 1]), [r(2, 3, 7, 5)], 35),
    ("_adaptive_avg_pool2d", lambda x: aten._adaptive_avg_pool2d(x, [2, 3]), [r(2, 3, 7, 8)], 12),
    ("_adaptive_avg_pool2d", lambda x: aten._adaptive_avg_pool2d(x, [3, 2]), [r(1, 2, 6, 4)], 4),
    ("_native_batch_norm_legit_no_training",
     lambda x, w, b, m, v: aten._native_batch_norm_legit_no_training(x, w, b, m, v, 0.1, 1e-5)[0],
     [r(2, 3, 5, 4), r(3), r(3), r(3), pos(3)], 1),
    ("native_batch_norm", lambda x, w, b, m, v: aten.native_batch_norm(x, w, b, m, v, False, 0.1, 1e-5)[0],
     [r(2, 3, 5, 4), r(3), r(3), r(3), pos(3)], 1),
    ("native_layer_norm", lambda x, w, b: aten.native_layer_norm(x, [7], w, b, 1e-5)[0], [r(2, 3, 7), r(7), r(7)], 7),
    ("native_layer_norm", lambda x: aten.native_layer_norm(x, [3, 7], None, None, 1e-5), [r(2, 3, 7)], 21),
    ("native_group_norm", lambda x, w, b: aten.native_group_norm(x, w, b, 2, 6, 20, 3, 1e-5),
     [r(2, 6, 4, 5), r(6), r(6)], 40),
    ("_softmax", lambda x: aten._softmax(x, -1, False), [r(3, 4, 9)], 9),
    ("_softmax", lambda x: aten._softmax(x, 1, False), [r(3, 5, 2)], 5),
    ("_log_softmax", lambda x: aten._log_softmax(x, 1, False), [r(4, 11)], 11),
    ("relu", lambda x: aten.relu(x), [r(2, 3, 5)], 1),
    ("hardtanh", lambda x: aten.hardtanh(x, 0.0, 6.0), [r(2, 9, lo=-3, hi=9)], 1),
    ("gelu", lambda x: aten.gelu(x), [r(3, 17, lo=-5, hi=5)], 1),
    ("gelu", lambda x: aten.gelu(x, approximate="tanh"), [r(3, 17, lo=-5, hi=5)], 1),
    ("erf", lambda x: aten.erf(x), [r(4, 9, lo=-4, hi=4)], 1),
    ("sigmoid", lambda x: aten.sigmoid(x), [r(2, 7, lo=-9, hi=9)], 1),
    ("tanh", lambda x: aten.tanh(x), [r(2, 7, lo=-5, hi=5)], 1),
    ("silu", lambda x: aten.silu(x), [r(2, 7, lo=-5, hi=5)], 1),
    ("clamp", lambda x: aten.clamp(x, -0.5, 0.75), [r(3, 5)], 1),
    ("clamp", lambda x: aten.clamp(x, None, 0.25), [r(3, 5)], 1),
    ("leaky_relu", lambda x: aten.leaky_relu(x, 0.1), [r(3, 5)], 1),
    ("elu", lambda x: aten.elu(x, 1.5), [r(3, 5)], 1),
    ("hardswish", lambda x: aten.hardswish(x), [r(3, 5, lo=-5, hi=5)], 1),
    ("hardsigmoid", lambda x: aten.hardsigmoid(x), [r(3, 5, lo=-5, hi=5)], 1),
    ("softplus", lambda x: aten.softplus(x, 2.0, 5.0), [r(3, 5, lo=-5, hi=5)], 1),
    ("neg", lambda x: aten.neg(x), [r(3, 4)], 1),
    ("abs", lambda x: aten.abs(x), [r(3, 4)], 1),
    ("exp", lambda x: aten.exp(x), [r(3, 4)], 1),
    ("expm1", lambda x: aten.expm1(x), [r(3, 4)], 1),
    ("log", lambda x: aten.log(x), [pos(3, 4)], 1),
    ("log1p", lambda x: aten.log1p(x), [pos(3, 4)], 1),
    ("sqrt", lambda x: aten.sqrt(x), [pos(3, 4)], 1),
    ("rsqrt", lambda x: aten.rsqrt(x), [pos(3, 4)], 1),
    ("reciprocal", lambda x: aten.reciprocal(x), [pos(3, 4)], 1),
    ("sign", lambda x: aten.sign(x), [torch.tensor([[-2.0, 0.0, 3.0], [1.0, -0.5, 0.0]])], 1),
    ("pow.Tensor_Scalar", lambda x: aten.pow(x, 2), [r(3, 4)], 1),
    ("pow.Tensor_Scalar", lambda x: aten.pow(x, 1.5), [pos(3, 4)], 1),
    ("pow.Tensor_Scalar", lambda x: aten.pow(x, -0.5), [pos(3, 4)], 1),
    ("pow.Tensor_Tensor", lambda x, y: aten.pow(x, y), [pos(3, 4), r(4)], 1),
    ("_to_copy", lambda x: aten._to_copy(x, dtype=torch.float64), [r(3, 4)], 1),
    ("_to_copy", lambda x: aten._to_copy(x, dtype=torch.float32), [boolean(3, 4)], 1),
    ("add.Tensor", lambda x, y: aten.add(x, y), [r(2, 1, 5), r(3, 1)], 1),
    ("add.Tensor", lambda x, y: aten.add(x, y, alpha=2.5), [r(2, 3), r(2, 3)], 1),
    ("add.Tensor", lambda x: aten.add(x, 1.5), [r(2, 3)], 1),
    ("add.Scalar", lambda x: aten.add.Scalar(x, 1.5), [r(2, 3)], 1),
    ("sub.Tensor", lambda x, y: aten.sub(x, y, alpha=0.5), [r(4, 3), r(3)], 1),
    ("sub.Scalar", lambda x: aten.sub.Scalar(x, 2.0), [r(4, 3)], 1),
    ("rsub.Scalar", lambda x: aten.rsub.Scalar(x, 2.0), [r(4, 3)], 1),
    ("mul.Tensor", lambda x, y: aten.mul(x, y), [r(2, 3, 1), r(1, 4)], 1),
    ("mul.Scalar", lambda x: aten.mul.Scalar(x, -3.0), [r(4, 3)], 1),
    ("div.Tensor", lambda x, y: aten.div(x, y), [r(2, 3, 4), pos(4)], 1),
    ("div.Tensor", lambda x: aten.div(x, 8.0), [r(2, 3, 4)], 1),
    ("div.Scalar", lambda x: aten.div.Scalar(x, 3.0), [r(2, 3)], 1),
    ("maximum", lambda x, y: aten.maximum(x, y), [r(2, 3), r(3)], 1),
    ("minimum", lambda x, y: aten.minimum(x, y), [r(2, 3), r(2, 1)], 1),
    ("where.self", lambda c, x, y: aten.where(c, x, y), [boolean(2, 3), r(2, 3), r(3)], 1),
    ("logical_not", lambda c: aten.logical_not(c), [boolean(3, 4)], 1),
    ("logical_and", lambda a, b: aten.logical_and(a, b), [boolean(3, 4), boolean(4)], 1),
    ("logical_or", lambda a, b: aten.logical_or(a, b), [boolean(3, 4), boolean(3, 1)], 1),
    ("mean.dim", lambda x: aten.mean(x, [1, 2], True), [r(2, 3, 5, 4)], 15),
    ("mean.dim", lambda x: aten.mean(x, [-1]), [r(2, 3, 5)], 5),
    ("mean.default", lambda x: aten.mean(x), [r(3, 5)], 15),
    ("sum.dim_IntList", lambda x: aten.sum(x, [0, 2]), [r(3, 4, 5)], 15),
    ("sum.default", lambda x: aten.sum(x), [r(3, 4)], 12),
    ("amax", lambda x: aten.amax(x, [1]), [r(3, 7, 2)], 1),
    ("amin", lambda x: aten.amin(x, [0, 2], True), [r(3, 7, 2)], 1),
    ("prod.dim_int", lambda x: aten.prod(x, 1), [r(3, 5, lo=0.5, hi=1.5)], 5),
    ("var.correction", lambda x: aten.var(x, [1], correction=1), [r(3, 9)], 9),
    ("var.correction", lambda x: aten.var(x, [0, 2], correction=0, keepdim=True), [r(3, 4, 5)], 15),
    ("linalg_vector_norm", lambda x: aten.linalg_vector_norm(x, 2, [1], True), [r(3, 6)], 6),
    ("max.dim", lambda x: aten.max(x, 1)[0], [r(3, 6)], 1),
    ("min.dim", lambda x: aten.min(x, 0, True)[0], [r(3, 6)], 1),
    ("view", lambda x: aten.view(x, [6, -1]) * 2, [r(2, 3, 4)], 1),
    ("_unsafe_view", lambda x: aten._unsafe_view(x, [4, 6]) * 2, [r(2, 3, 4)], 1),
    ("permute", lambda x: aten.permute(x, [2, 0, 1]), [r(2, 3, 4)], 1),
    ("expand", lambda x: aten.expand(x, [2, 3, 4]), [r(3, 1)], 1),
    ("slice.Tensor", lambda x: aten.slice(x, 1, 1, 9, 3), [r(2, 10)], 1),
    ("slice.Tensor", lambda x: aten.slice(x, 0, -3), [r(5, 2)], 1),
    ("select.int", lambda x: aten.select(x, 1, -1), [r(2, 3, 4)], 1),
    ("squeeze.dims", lambda x: aten.squeeze(x, [1, 3]) + 1, [r(2, 1, 3, 1)], 1),
    ("squeeze.dim", lambda x: aten.squeeze(x, 0) + 1, [r(1, 3)], 1),
    ("squeeze.default", lambda x: aten.squeeze(x) + 1, [r(1, 3, 1)], 1),
    ("unsqueeze", lambda x: aten.unsqueeze(x, -1) + 1, [r(2, 3)], 1),
    ("clone", lambda x: aten.clone(x) + 1, [r(2, 3)], 1),
    ("alias", lambda x: aten.alias(x) + 1, [r(2, 3)], 1),
    ("detach", lambda x: aten.detach(x) + 1, [r(2, 3)], 1),
    ("cat", lambda a, b, c: aten.cat([a, b, c], 1), [r(2, 3, 2), r(2, 1, 2), r(2, 4, 2)], 1),
    ("cat", lambda a, b: aten.cat([a, b]), [r(2, 3), r(1, 3)], 1),
    ("split_with_sizes", lambda x: aten.split_with_sizes(x, [2, 3], 1)[1] * 2, [r(2, 5)], 1),
    ("flip", lambda x: aten.flip(x, [0, 2]), [r(2, 3, 4)], 1),
    ("repeat", lambda x: aten.repeat(x, [2, 1, 3]), [r(3, 2)], 1),
    ("constant_pad_nd", lambda x: aten.constant_pad_nd(x, [1, 2, 0, 1], 0.5), [r(2, 3, 4)], 1),
    ("constant_pad_nd", lambda x: aten.constant_pad_nd(x, [-1, 2]), [r(2, 5)], 1),
    ("upsample_nearest2d.vec", lambda x: torch.nn.functional.interpolate(x, scale_factor=(2, 3)), [r(2, 3, 4, 5)], 1),
    ("upsample_nearest2d.default", lambda x: aten.upsample_nearest2d(x, [8, 5]), [r(1, 2, 4, 5)], 1),
    ("full", lambda x: x + aten.full([3], 2.5), [r(2, 3)], 1),
    ("full_like", lambda x: x * aten.full_like(x, 3.0), [r(2, 3)], 1),
    ("scalar_tensor", lambda x: x + aten.scalar_tensor(0.5), [r(2, 3)], 1),
    ("arange.start_step", lambda x: x + aten.arange(1, 7, 2), [r(2, 3)], 1),
    ("arange.default", lambda x: x + aten.arange(3, dtype=torch.float32), [r(2, 3)], 1),
    ("empty.memory_format", lambda x: aten.where(x > 100.0, aten.empty.memory_format([2, 3]), x), [r(2, 3)], 1),
]


def _compare_cases(op):
    tensor, scalar = getattr(aten, op).Tensor, getattr(aten, op).Scalar
    x = torch.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])
    return [(f"{op}.Tensor", lambda a, b: tensor(a, b), [x, torch.tensor([2.0, 2.0, 2.0])], 1),
            (f"{op}.Scalar", lambda a: scalar(a, 2.0), [x], 1)]


for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    CASES += _compare_cases(_op)


CREATION = {name for name in ops.supported() if ops.get(name).kind == "creation"}  # folded into constants on import


def _f64(t):
    return t.double() if t.is_floating_point() else t


class Wrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def imported(fn, inputs):
    """The graph of fn's ATen ops as they are; ops that only torch.export produces (upsample_nearest2d.vec),
    through torch.export."""
    graph, positions, _ = graph_from_fx(fn, inputs, decompose=False)
    return graph, positions


def check_case(op, fn, inputs, red):
    graph, positions = imported(fn, inputs)
    if op not in graph.op_counts() and op not in CREATION:
        graph = graph_from_exported(export_program(Wrap(fn).eval(), tuple(inputs)))
        positions = list(range(len(inputs)))
    assert op in graph.op_counts() or op in CREATION, graph.op_counts()
    model = compile_graph(graph)
    got = model.run_flat([inputs[k].numpy() for k in positions])
    with torch.no_grad():
        want = fn(*[_f64(t) for t in inputs])
    wants = want if isinstance(want, (tuple, list)) else [want]
    assert len(got) == len(wants)
    for g, w in zip(got, wants):
        w = w.numpy()
        if w.dtype == np.float64 and g.dtype == np.float32:
            w = w.astype(np.float32)
        assert_close(g, w, red, err_msg=op)


@pytest.mark.parametrize("op,fn,inputs,red", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_op_against_torch(op, fn, inputs, red):
    check_case(op, fn, inputs, red)


def _family_cases() -> set[str]:
    """The ops that the families' own files (test_graph_ops_*.py beside this one) have cases for."""
    import glob
    import importlib
    import os
    names = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_graph_ops_*.py")))
    return {c[0] for n in names for c in importlib.import_module(os.path.basename(n)[:-3]).CASES}


def test_every_supported_op_has_a_case():
    covered = {c[0] for c in CASES} | _family_cases()
    missing = sorted(set(ops.supported()) - covered)
    assert not missing, f"ops without a test case: {missing}"
    assert len(ops.supported()) >= 60


def test_a_broken_lowering_is_caught(monkeypatch):
    """The comparison can fail: a relu that lowers to min instead of max is found."""
    import dataclasses
    bad = dataclasses.replace(ops.REGISTRY["relu"], lower=lambda b, n, refs: [
        b.elementwise(n.outputs[0].shape, "f32", [refs[0]], lambda a: f"min({a}, 0.0)")])
    monkeypatch.setitem(ops.REGISTRY, "relu", bad)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        check_case("relu", lambda x: aten.relu(x), [r(2, 3)], 1)


VIEW_CASES = [
    # ops on non-contiguous views (transposes, strided slices, expands), through torch.export and every pass
    ("relu of a transpose", lambda x: torch.relu(x.transpose(1, 2)) * 2, [r(2, 3, 5)], 1),
    ("add of a strided slice and a broadcast", lambda x, y: x[:, ::2] + y, [r(3, 8), r(4)], 1),
    ("softmax of a permute", lambda x: torch.softmax(x.permute(0, 2, 1), -1), [r(2, 5, 7)], 7),
    ("convolution of a cropped view", lambda x, w: torch.nn.functional.conv2d(x[:, :, 1:-1, ::2], w, padding=1),
     [r(2, 3, 9, 10), r(4, 3, 3, 3)], 27),
    ("mm of a transpose", lambda x, w: x.t() @ w, [r(6, 4), r(6, 5)], 6),
    ("layer norm of a transpose", lambda x: torch.nn.functional.layer_norm(x.transpose(0, 1), (3,)), [r(3, 4)], 3),
    ("sum over a permute", lambda x: x.permute(2, 0, 1).sum((0, 2)), [r(3, 4, 5)], 20),
    ("cat of slices", lambda x: torch.cat([x[:, :2], x[:, 3:], x[:, 1:2]], 1), [r(2, 5)], 1),
    ("matmul of 4-d transposes", lambda q, k: torch.softmax(q @ k.transpose(-1, -2) / 4.0, -1),
     [r(2, 3, 5, 8), r(2, 3, 6, 8)], 8),
    ("gelu of a reshape of a transpose", lambda x: torch.nn.functional.gelu(x.transpose(1, 2).reshape(2, -1)),
     [r(2, 3, 4)], 1),
    ("max pool of a channel slice", lambda x: torch.nn.functional.max_pool2d(x[:, 1:], 2), [r(2, 4, 6, 6)], 1),
    ("mean of an expand", lambda x: x.expand(3, 4, 5).mean(0), [r(4, 1)], 3),
    ("where on a flipped view", lambda x: torch.where(x.flip(1) > 0, x, -x), [r(3, 4)], 1),
]


@pytest.mark.parametrize("what,fn,inputs,red", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_ops_on_non_contiguous_views(what, fn, inputs, red):
    graph = graph_from_exported(export_program(Wrap(fn).eval(), tuple(inputs)))
    got = compile_graph(graph).run_flat([t.numpy() for t in inputs])
    with torch.no_grad():
        want = fn(*[_f64(t) for t in inputs]).numpy().astype(np.float32)
    assert_close(got[0], want, red, err_msg=what)
