"""The ops the image models of the zoo need (issue 56), each against torch on random inputs as
tests/graph/test_graph_ops.py checks the others (its `check_case`: the ATen op imported as it is, the whole pass
pipeline, torch's result in float64): strided views, gathers through an index, any / all, fmod / remainder, cumsum,
roll, slice_scatter, copy, upsampling, transposed convolution, instance and group norm; then 0-d values through
every family, the same ops through torch.compile's decompositions, and the errors of what is not supported."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle import assert_close  # noqa: E402
from test_graph_ops import Wrap, check_case, r  # noqa: E402

from tensorlang.errors import UsageError  # noqa: E402
from tensorlang.frontend.torch_import import export_program, graph_from_exported, graph_from_fx  # noqa: E402
from tensorlang.graph import compile_graph  # noqa: E402
from tensorlang.graph.ir import STORAGE  # noqa: E402

aten = torch.ops.aten
F = torch.nn.functional


def ints(*shape, lo=0, hi=5, dtype=torch.int32):
    return torch.randint(lo, hi, shape, generator=torch.Generator().manual_seed(sum(shape) + hi), dtype=dtype)


def ct(values, dtype=torch.int64):
    return torch.tensor(values, dtype=dtype)


CASES = [
    # (op, function of the inputs, inputs, reduction length)
    ("as_strided", lambda x: aten.as_strided(x.mean((2, 3), keepdim=True), [1, 6, 1, 1], [6, 1, 6, 6]) + 1,
     [r(1, 6, 3, 5)], 15),  # ConvNeXt's and Swin's flatten before the head
    ("as_strided", lambda x: aten.as_strided(x + 1, [4, 3], [2, 1]), [r(10)], 1),  # overlapping windows
    ("as_strided", lambda x: aten.as_strided(x + 1, [2, 3], [5, 1], 1), [r(3, 5)], 1),  # a window at an offset
    ("as_strided", lambda x: aten.as_strided(x.permute(1, 0), [3, 2], [1, 3]) * 2, [r(2, 3)], 1),
    ("any.dim", lambda x: aten.any(x > 1.0, 1, True), [r(3, 5, 2)], 1),
    ("any.dims", lambda x: aten.any.dims(x > 1.5, [0, 2]), [r(3, 4, 5)], 1),
    ("any.default", lambda x: aten.any(x * 0.0), [r(3, 4)], 1),
    ("all.dim", lambda x: aten.all(x > -1.5, -1), [r(4, 7)], 1),
    ("all.dims", lambda x: aten.all.dims(x, [1]), [r(3, 4, 2)], 1),  # a nonzero float is true
    ("all.default", lambda c: aten.all(c), [torch.ones(2, 3, dtype=torch.bool)], 1),
    ("fmod.Tensor", lambda x, y: aten.fmod(x, y),
     [r(4, 5, lo=-6, hi=6), r(5, lo=0.3, hi=2) * ct([1, -1, 1, -1, 1])], 1),
    ("fmod.Scalar", lambda x: aten.fmod(x, -0.7), [r(3, 7, lo=-5, hi=5)], 1),
    ("fmod.Scalar", lambda x: aten.fmod(x, 3), [ints(4, 5, lo=-9, hi=9)], 1),
    ("remainder.Tensor", lambda x, y: aten.remainder(x, y), [r(4, 5, lo=-6, hi=6), r(4, 1, lo=-2, hi=-0.3)], 1),
    ("remainder.Scalar", lambda x: aten.remainder(x, 0.7), [r(3, 7, lo=-5, hi=5)], 1),
    ("remainder.Scalar", lambda x: aten.remainder(x, -4), [ints(6, lo=-9, hi=9)], 1),
    ("cumsum", lambda x: aten.cumsum(x, 1), [r(2, 7, 3)], 7),
    ("cumsum", lambda x: aten.cumsum(aten.permute(x, [1, 0]), -1), [r(5, 4)], 5),
    ("cumsum", lambda x: aten.cumsum(x, 0, dtype=torch.float64), [r(6, 2)], 6),
    ("cumsum", lambda x: aten.cumsum(x, 0, dtype=torch.float32), [ints(9, 2)], 9),
    ("roll", lambda x: aten.roll(x, [1, -2], [2, 3]) * 2, [r(1, 3, 5, 6)], 1),  # Swin's shifted windows
    ("roll", lambda x: aten.roll(x + 1, [3]), [r(7)], 1),  # no dims: the flattened tensor
    ("roll", lambda x: aten.roll(x, [2, 4, -7], [1, 1, 0]), [r(3, 5)], 1),
    ("index.Tensor", lambda x, i: aten.index(x, [None, i]) * 2, [r(2, 4, 3), ct([0, 3, 1, 3, 2], torch.int32)], 1),
    ("index.Tensor", lambda x, i, j: aten.index(x, [i, None, j]) + 1,  # not adjacent: the index dims come first
     [r(2, 4, 3), ct([[0], [1]], torch.int32), ct([2, 0, 1], torch.int32)], 1),
    ("index.Tensor", lambda x, i, j: aten.index(x, [None, i, j]), [r(2, 4, 3), ct([[3, -1]], torch.int32),
                                                                    ct([[0], [-3], [2]], torch.int32)], 1),
    ("index.Tensor", lambda x: aten.index(x, [ct([-1, 0, 2, 2])]), [r(3, 5)], 1),  # a constant index, negatives
    ("index.Tensor", lambda x, i: aten.index(x, [i, ct([[1], [0]], torch.int32)]),
     [r(3, 2), ct([2, 0, 1], torch.int32)], 1),  # an index given and a constant one
    ("slice_scatter", lambda x, y: aten.slice_scatter(x, y * 2, 1, 1, 4), [r(2, 5, 3), r(2, 3, 3)], 1),
    ("slice_scatter", lambda x, y: aten.slice_scatter(x, y, -2, 0, None, 2), [r(2, 5, 3), r(2, 3, 3)], 1),
    ("slice_scatter", lambda x, y: aten.slice_scatter(x + 1, y, 0, -2), [r(5, 3), r(2, 3)], 1),
    ("copy", lambda x, y: aten.copy(x, y) + 1, [r(2, 5, 3), r(5, 1)], 1),
    ("copy", lambda x, y: aten.copy(x, y), [r(3, 4).double(), r(4)], 1),
    ("lift_fresh_copy", lambda x: x + torch.tensor([1.0, 2.0, 3.0]), [r(2, 3)], 1),  # a constant made in forward
    ("upsample_nearest2d.vec", lambda x: F.interpolate(x, size=(9, 13), mode="nearest"), [r(1, 3, 5, 7)], 1),
    ("upsample_nearest2d.vec", lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest"), [r(2, 3, 5, 7)], 1),
    ("upsample_nearest2d.default", lambda x: aten.upsample_nearest2d(x, [4, 10], 0.7, 1.5), [r(1, 2, 5, 7)], 1),
    ("upsample_bilinear2d.vec", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), [r(1, 3, 5, 7)], 4),
    ("upsample_bilinear2d.vec", lambda x: F.interpolate(x, size=(9, 4), mode="bilinear", align_corners=True),
     [r(2, 3, 5, 7)], 4),
    ("upsample_bilinear2d.vec", lambda x: F.interpolate(x, size=(3, 7), mode="bilinear"), [r(1, 2, 5, 7)], 4),
    ("upsample_bilinear2d.default", lambda x: aten.upsample_bilinear2d(x, [7, 11], False, 1.5, 1.7),
     [r(1, 2, 5, 7)], 4),
    ("upsample_bicubic2d.vec", lambda x: F.interpolate(x, scale_factor=1.7, mode="bicubic"), [r(1, 3, 5, 7)], 16),
    ("upsample_bicubic2d.vec", lambda x: F.interpolate(x, size=(9, 13), mode="bicubic", align_corners=True),
     [r(2, 2, 5, 7)], 16),
    ("upsample_bicubic2d.default", lambda x: aten.upsample_bicubic2d(x, [4, 9], False), [r(1, 2, 6, 5)], 16),
    ("convolution", lambda x, w, b: aten.convolution(x, w, b, [2, 2], [1, 1], [1, 1], True, [1, 1], 1),
     [r(1, 4, 5, 6), r(4, 3, 3, 3), r(3)], 36),
    ("convolution", lambda x, w: aten.convolution(x, w, None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1),
     [r(2, 4, 5, 6), r(4, 3, 3, 2)], 24),
    ("convolution", lambda x, w: aten.convolution(x, w, None, [2, 3], [1, 2], [1, 1], True, [0, 0], 2),
     [r(1, 4, 5, 5), r(4, 2, 3, 3)], 18),
    ("convolution", lambda x, w: aten.convolution(x, w, None, [2, 2], [1, 1], [1, 1], True, [0, 0], 6),
     [r(1, 6, 4, 5), r(6, 1, 4, 4)], 16),
    ("convolution", lambda x, w: aten.convolution(x, w, None, [2, 2], [0, 0], [2, 2], True, [1, 1], 1),
     [r(1, 3, 5, 5), r(3, 2, 3, 3)], 27),
    ("convolution", lambda x, w: aten.convolution(x, w, None, [3], [2], [1], True, [0], 1), [r(1, 3, 7), r(3, 4, 3)],
     9),
    ("convolution", lambda x, w: aten.convolution(x, w, None, [2, 2], [3, 3], [1, 1], True, [0, 0], 1),
     [r(1, 3, 6, 6), r(3, 2, 2, 2)], 12),  # padding beyond the kernel: cropped
    ("_native_batch_norm_legit.no_stats",
     lambda x, w, b: aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-3), [r(2, 3, 5, 7), r(3), r(3)], 70),
    ("_native_batch_norm_legit.no_stats", lambda x: aten._native_batch_norm_legit.no_stats(x, None, None, True, 0.1,
                                                                                           1e-5)[0], [r(1, 6, 9)], 9),
    ("native_group_norm", lambda x: aten.native_group_norm(x, None, None, 3, 6, 7, 2, 1e-5)[0], [r(3, 6, 7)], 21),
    ("native_group_norm", lambda x, w, b: aten.native_group_norm(x, w, b, 2, 5, 15, 5, 1e-5)[0],
     [r(2, 5, 3, 5), r(5), r(5)], 15),  # instance norm as group norm
]


@pytest.mark.parametrize("op,fn,inputs,red", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_op_against_torch(op, fn, inputs, red):
    check_case(op, fn, inputs, red)


def _compare(fn, inputs, red, graph, positions=None):
    positions = list(range(len(inputs))) if positions is None else positions
    got = compile_graph(graph).run_flat([inputs[k].numpy() for k in positions])
    with torch.no_grad():
        want = fn(*[t.double() if t.is_floating_point() else t for t in inputs])
    wants = want if isinstance(want, (tuple, list)) else [want]
    assert len(got) == len(wants)
    for g, w in zip(got, wants):
        w = w.numpy()
        assert_close(g, w.astype(np.float32) if w.dtype == np.float64 and g.dtype == np.float32 else w, red)


class Constants(torch.nn.Module):
    """A module holding a table, an index and a 0-d value as buffers, as Swin and MaxViT hold theirs."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn
        self.register_buffer("table", r(13, 3))
        self.register_buffer("index", ct([[12, 0, 5], [7, 7, 1]]))
        self.register_buffer("scalar", torch.tensor(-100.0))

    def forward(self, *xs):
        return self.fn(self, *xs)


MODULE_CASES = [
    # (what, fn(module, *inputs), inputs, reduction length): through torch.export, as the zoo's models come
    ("relative position bias: a constant table through a constant index, folded",
     lambda m, x: x + m.table[m.index].permute(2, 0, 1), [r(3, 2, 3)], 1),
    ("a 0-d buffer cloned (Swin's attention mask value)", lambda m, x: x + m.scalar.clone(), [r(2, 3)], 1),
    ("a 0-d buffer written into a slice (Swin's mask)", lambda m, x: x + torch.zeros(4, 5).slice_scatter(
        m.scalar.clone().expand(2, 5), 0, 1, 3), [r(4, 5)], 1),
    ("reductions over dim 0 of a 0-d value", lambda m, s: (torch.sum(s, 0) + torch.amax(s, 0), torch.mean(s, [0]),
                                                          torch.softmax(s, 0), torch.log_softmax(s, 0)),
     [torch.tensor(1.5)], 1),
    ("0-d through cumsum, any, roll, fmod", lambda m, s: (torch.cumsum(s, 0), torch.any(s > 1, 0).float(),
                                                          torch.roll(s, 2), torch.fmod(s, 0.4)),
     [torch.tensor(1.5)], 1),
    ("0-d select and index", lambda m, x: (x[1, 2] * m.scalar, x[ct(1), ct(2)] + 1), [r(2, 3)], 1),
    ("instance norm, affine", lambda m, x: F.instance_norm(x, weight=m.table[:3, 0], bias=m.table[3:6, 1]),
     [r(2, 3, 5, 7)], 35),
    ("the three parts of a split of an expression (a qkv projection with its bias)", lambda m, x: (
        lambda q, k, v: q * k + v)(*torch.split(F.linear(x, m.table[:12, :2].reshape(6, 4), m.table[12, :]
                                                           .repeat(2)), 2, -1)), [r(5, 4)], 4),
    ("pixel shuffle and unshuffle", lambda m, x: (F.pixel_shuffle(x, 2) * 1.5, F.pixel_unshuffle(x, 2) - 1),
     [r(1, 8, 4, 6)], 1),
    ("conv_transpose then batch norm: not folded into its weight", lambda m, x: torch.relu(F.batch_norm(
        F.conv_transpose2d(x, m.table[:12].reshape(3, 2, 2, 3), stride=2), m.table[:2, 0], m.table[2:4, 1].abs() + 0.5,
        m.table[4:6, 2], m.table[6:8, 0])), [r(1, 3, 4, 5)], 18),
]


@pytest.mark.parametrize("what,fn,inputs,red", MODULE_CASES, ids=[c[0] for c in MODULE_CASES])
def test_module_against_torch(what, fn, inputs, red):
    module = Constants(fn).eval()
    graph = graph_from_exported(export_program(module, tuple(inputs)))
    _compare(lambda *xs: fn(module.double(), *xs), inputs, red, graph)


# the ops as torch.compile's decompositions give them (upsampling, roll and instance norm kept whole)
COMPILE_CASES = [c for c in CASES if c[0] in ("as_strided", "roll", "upsample_nearest2d.vec", "upsample_bicubic2d.vec",
                                               "upsample_bilinear2d.vec", "slice_scatter")]
COMPILE_CASES += [("instance norm", lambda x: F.instance_norm(x), [r(2, 3, 5, 7)], 35),
                  ("group norm", lambda x: F.group_norm(x, 2), [r(2, 4, 3, 5)], 30)]


@pytest.mark.parametrize("op,fn,inputs,red", COMPILE_CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(COMPILE_CASES)])
def test_through_torch_compile_decompositions(op, fn, inputs, red):
    graph, positions, _ = graph_from_fx(fn, inputs)
    _compare(fn, inputs, red, graph, positions)


@pytest.mark.parametrize("read_after", [False, True])
def test_an_in_place_restride_of_a_value_nothing_else_reads_is_as_strided(read_after):
    """torch.compile's tracing of adaptive average pooling of a channels-last tensor (timm's ConvNeXt head) restrides
    the mean in place; where nothing else reads the mean that is as_strided, else it stays an unsupported op."""
    from tensorlang.frontend.torch_import import _as_exported
    g = torch.fx.Graph()
    x = g.placeholder("x")
    mean = g.call_function(aten.mean.dim, (x, [-1, -2], True))
    restrided = g.call_function(aten.as_strided_.default, (mean, [1, 6, 1, 1], [6, 1, 6, 6]))
    out = g.call_function(aten.permute.default, (restrided, [0, 2, 3, 1]))
    g.output((out, g.call_function(aten.neg.default, (mean,))) if read_after else out)
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    _as_exported(gm)
    assert restrided.target is (aten.as_strided_.default if read_after else aten.as_strided.default)
    if not read_after:
        x = r(1, 6, 3, 5)
        graph, positions, _ = graph_from_fx(gm, [x])
        _compare(lambda t: t.mean((2, 3), keepdim=True).permute(0, 2, 3, 1), [x], 15, graph, positions)


@pytest.mark.skipif("i64" not in STORAGE, reason="kernels read int64 values that are not constants: issue 56's "
                                                  "text-side ops add them")
@pytest.mark.parametrize("case", ["input", "fused constant"])
def test_index_with_int64_indices(case):
    if case == "input":
        check_case("index.Tensor", lambda x, i: aten.index(x, [None, i]), [r(2, 4, 3), ct([0, 3, -1])], 1)
    else:
        check_case("index.Tensor", lambda x: aten.index(x, [ct([2, 0, 1])]) * 2, [r(3, 5)], 1)


def _error(fn, inputs):
    with pytest.raises(UsageError) as e:
        compile_graph(graph_from_exported(export_program(Wrap(fn).eval(), tuple(inputs))))
    return str(e.value)


def test_as_strided_that_is_not_an_affine_index_is_a_clear_error():
    msg = _error(lambda x: torch.as_strided(x + 1, (3, 3), (3, 1)), [r(3, 4)])
    assert msg.startswith("as_strided (node as_strided at test_graph_ops.py:") and msg.count("(node") == 1, msg
    assert "not an affine index" in msg, msg


def test_as_strided_of_a_strided_view_is_a_clear_error():
    msg = _error(lambda x: torch.as_strided(x[:, 1:], (2, 2), (1, 1)), [r(3, 4)])
    assert "strides [4, 1]" in msg and "not dense" in msg, msg


def test_a_boolean_mask_index_is_a_clear_error():
    with pytest.raises(UsageError, match=r"index 0 is a boolean mask \(its result's shape depends on the data\)"):
        graph_from_fx(lambda x, m: aten.index(x, [m]), [r(4, 3), torch.tensor([True, False, True, True])],
                      decompose=False)


@pytest.mark.parametrize("table", ["input", "constant"])
def test_constant_index_out_of_range_is_an_index_error(table):
    from tensorlang.errors import IndexError as TLIndexError
    from tensorlang.graph.ir import Graph, TensorType
    g = Graph("m")
    x = g.add_input("x", TensorType((3, 2), "f32")) if table == "input" else g.add_constant("x", np.ones((3, 2),
                                                                                                       np.float32))
    i = g.add_constant("i", np.array([0, 5], np.int32))
    g.outputs = [g.add_node("index.Tensor", [x, i], {}, [TensorType((2, 2), "f32")], name="gather").outputs[0]]
    with pytest.raises(TLIndexError, match=r"node gather.*index 5 is out of range for dimension 0 \(size 3\)"):
        compile_graph(g)


def test_an_index_given_out_of_range_is_an_index_error_beside_a_constant_one():
    """The constant index is known to be in range and read unchecked; the one given is checked as the kernel runs
    (the kernel's status 2; the graph runtime reports it as MemoryError until it maps that status to tl.IndexError)."""
    from tensorlang.errors import IndexError as TLIndexError
    graph, _, _ = graph_from_fx(lambda x, i: aten.index(x, [i, ct([1, 0], torch.int32)]),
                                [r(3, 2), ct([2, 0], torch.int32)], decompose=False)
    model = compile_graph(graph)
    table = np.arange(6, dtype=np.float32).reshape(3, 2)
    assert model.run_flat([table, np.array([2, 0], np.int32)])[0].tolist() == [5.0, 0.0]
    with pytest.raises((TLIndexError, MemoryError)):
        model.run_flat([table, np.array([3, 0], np.int32)])


def test_roll_of_a_flattened_matrix_is_a_clear_error():
    with pytest.raises(UsageError, match=r"roll without dims .* rank 1 only"):
        compile_graph(graph_from_fx(lambda x: aten.roll(x + 1, [2]), [r(3, 4)], decompose=False)[0])
