"""ONNX models through `tl.from_onnx`, with onnxruntime as the oracle: one-node models for each ONNX op and its
attributes, models exported from torch by both exporters (TorchScript and dynamo), MobileNetV2 and ResNet-18 from
torchvision (slow), and the errors (unsupported ops, malformed files, dynamic shapes)."""
from __future__ import annotations

import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import tensorlang as tl  # noqa: E402
from tensorlang.errors import UsageError  # noqa: E402
from tensorlang.frontend.onnx_import import graph_from_onnx, model_from_onnx  # noqa: E402

RNG = np.random.default_rng(56)
_NP_ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
            np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64,
            np.dtype(np.bool_): TensorProto.BOOL}


def ort_run(model, feeds: dict) -> list[np.ndarray]:
    """onnxruntime's outputs for `model` (a ModelProto or a path) on `feeds`."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def assert_matches(ours, refs) -> None:
    """Each output within 1e-4 x max(1, max|ref|) of onnxruntime's, same shape and dtype; NaN never passes."""
    ours = list(ours) if isinstance(ours, (tuple, list)) else [ours]
    assert len(ours) == len(refs)
    for k, (o, r) in enumerate(zip(ours, refs)):
        assert o.shape == r.shape and o.dtype == r.dtype, f"output {k}: {o.dtype}{o.shape} vs {r.dtype}{r.shape}"
        if r.dtype.kind in "iub":
            np.testing.assert_array_equal(o, r)
            continue
        tol = 1e-4 * max(1.0, float(np.max(np.abs(r))))
        ok = np.abs(o.astype(np.float64) - r.astype(np.float64)) <= tol  # False where either is NaN
        assert ok.all(), f"output {k}: {np.count_nonzero(~ok)} of {ok.size} elements differ by more than {tol}"


def check(model, feeds: dict):
    """Compile `model` with tensorlang and compare it with onnxruntime on `feeds` (in the model's input order);
    returns the compiled model."""
    m = tl.from_onnx(model)
    assert_matches(m(*feeds.values()), ort_run(model, feeds))
    return m


def one_node(op_type: str, inputs: list, attrs: dict | None = None, opset: int = 17, n_out: int = 1):
    """A model of one node: `inputs` are (name, array, is_initializer) or None for an absent optional input;
    returns (model, feeds)."""
    names, feeds, graph_inputs, inits = [], {}, [], []
    for item in inputs:
        if item is None:
            names.append("")
            continue
        name, array, const = item
        names.append(name)
        if const:
            inits.append(numpy_helper.from_array(np.asarray(array), name))
        else:
            feeds[name] = array
            graph_inputs.append(helper.make_tensor_value_info(name, _NP_ELEM[array.dtype], list(array.shape)))
    outs = [f"y{k}" for k in range(n_out)]
    node = helper.make_node(op_type, names, outs, name=f"the_{op_type}", **(attrs or {}))
    graph = helper.make_graph([node], "one", graph_inputs, [helper.make_empty_tensor_value_info(o) for o in outs],
                              initializer=inits)
    return _typed(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])), feeds


def _typed(model):
    """`model` with its outputs' types filled in by ONNX's shape inference (a valid model declares them)."""
    return onnx.shape_inference.infer_shapes(model)


def r(*shape, lo=-2.0, hi=2.0, dtype=np.float32):
    return RNG.uniform(lo, hi, shape).astype(dtype)


def i64(*values):
    return np.array(values, np.int64)


def _case(op, inputs, attrs=None, opset=17, n_out=1, id=None):
    return pytest.param(op, inputs, attrs or {}, opset, n_out, id=id or op)


OP_CASES = [
    _case("Conv", [("x", r(1, 4, 9, 8), False), ("w", r(6, 2, 3, 3), True), ("b", r(6), True)],
          {"group": 2, "dilations": [2, 1], "pads": [1, 0, 1, 0], "strides": [2, 1]}, id="Conv-groups-dilation"),
    _case("Conv", [("x", r(2, 3, 7, 6), False), ("w", r(4, 3, 3, 2), True)], {"pads": [0, 1, 2, 1]},
          id="Conv-asymmetric-pads"),
    _case("Conv", [("x", r(1, 3, 7, 8), False), ("w", r(5, 3, 3, 3), True)],
          {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, id="Conv-same-upper"),
    _case("Conv", [("x", r(1, 6, 5, 5), False), ("w", r(6, 1, 3, 3), True), ("b", r(6), True)],
          {"group": 6, "pads": [1, 1, 1, 1]}, id="Conv-depthwise"),
    _case("Conv", [("x", r(2, 3, 10), False), ("w", r(4, 3, 3), True)], {"pads": [1, 1]}, id="Conv-1d"),
    _case("BatchNormalization", [("x", r(2, 3, 4, 5), False), ("s", r(3), True), ("b", r(3), True),
                                 ("m", r(3), True), ("v", r(3, lo=0.5), True)], {"epsilon": 1e-3}),
    _case("Relu", [("x", r(3, 4), False)]),
    *(_case(op, [("x", r(3, 4, lo=0.1 if op == "Log" else -2.0), False)])
      for op in ("Abs", "Neg", "Exp", "Log", "Tanh", "Sign", "Softplus", "Elu")),
    _case("Not", [("x", r(3, 4) > 0, False)]),
    *(_case(op, [("a", r(2, 3).round(), False), ("b", r(3).round(), False)])
      for op in ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual")),
    *(_case(op, [("a", r(2, 3) > 0, False), ("b", r(3) > 0, False)]) for op in ("And", "Or")),
    _case("Min", [("a", r(2, 3), False), ("b", r(3), False)], id="Min"),
    _case("Sum", [("a", r(2, 3), False), ("b", r(3), False), ("c", r(1), True)], id="Sum"),
    _case("Dropout", [("x", r(3, 4), False)], opset=13),
    _case("CastLike", [("x", r(3, 4), False), ("like", np.zeros(1, np.float64), True)]),
    _case("Sigmoid", [("x", r(3, 4), False)]),
    _case("Erf", [("x", r(3, 4), False)]),
    _case("Sqrt", [("x", r(3, 4, lo=0.1), False)]),
    _case("Reciprocal", [("x", r(3, 4, lo=0.5), False)]),
    _case("HardSwish", [("x", r(3, 4, lo=-5, hi=5), False)]),
    _case("HardSigmoid", [("x", r(3, 4, lo=-5, hi=5), False)], {"alpha": 0.3, "beta": 0.4}),
    _case("HardSigmoid", [("x", r(3, 4, lo=-5, hi=5), False)], id="HardSigmoid-defaults"),
    _case("LeakyRelu", [("x", r(3, 4), False)], {"alpha": 0.2}),
    _case("Clip", [("x", r(3, 4, lo=-8, hi=8), False), ("lo", np.float32(0), True), ("hi", np.float32(6), True)],
          id="Clip-relu6"),
    _case("Clip", [("x", r(3, 4), False), ("lo", np.float32(-0.5), True)], id="Clip-min-only"),
    _case("Clip", [("x", r(3, 4), False)], {"min": -0.25, "max": 0.5}, opset=10, id="Clip-opset10-attrs"),
    _case("Add", [("a", r(2, 3, 4), False), ("b", r(3, 1), False)], id="Add-broadcast"),
    _case("Sub", [("a", r(2, 3, 4), False), ("b", r(4), True)], id="Sub-broadcast-const"),
    _case("Mul", [("a", r(3, 1), False), ("b", r(2, 1, 4), False)], id="Mul-broadcast-both"),
    _case("Div", [("a", r(2, 3, 4), False), ("b", r(2, 1, 4, lo=0.5), False)], id="Div-broadcast"),
    _case("Pow", [("a", r(2, 3, lo=0.1), False), ("e", np.float32(2.0), True)], id="Pow-square"),
    _case("Pow", [("a", r(2, 3, lo=0.1), False), ("e", np.float32(0.7), True)], id="Pow-const"),
    _case("Pow", [("a", r(2, 3, lo=0.1), False), ("e", r(3), False)], id="Pow-tensor"),
    _case("Max", [("a", r(2, 3), False), ("b", r(3), False), ("c", r(2, 1), True)], id="Max-variadic"),
    _case("MatMul", [("a", r(2, 3, 4), False), ("b", r(4, 5), True)], id="MatMul-3d-2d"),
    _case("MatMul", [("a", r(2, 1, 3, 4), False), ("b", r(3, 4, 5), False)], id="MatMul-batch-broadcast"),
    _case("MatMul", [("a", r(4), False), ("b", r(2, 4, 3), False)], id="MatMul-1d-left"),
    _case("MatMul", [("a", r(2, 3, 4), False), ("b", r(4), False)], id="MatMul-1d-right"),
    _case("Einsum", [("a", r(2, 3, 4, 5), False), ("b", r(2, 3, 6, 5), False)],
          {"equation": "B G I D, B G J D -> B G I J"}, id="Einsum-attention"),
    _case("Einsum", [("a", r(3, 4, 2), False), ("b", r(4, 5), True)], {"equation": "ikx,kj"}, id="Einsum-implicit"),
    _case("Einsum", [("a", r(3, 4, 2), False)], {"equation": "ijk->kj"}, id="Einsum-one-operand"),
    _case("Einsum", [("a", r(3, 4), False), ("b", r(4, 5), False)], {"equation": "ij,jk->k"}, id="Einsum-sums"),
    _case("Gemm", [("a", r(4, 3), False), ("b", r(5, 4), True), ("c", r(5), True)],
          {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}, id="Gemm-trans-alpha-beta"),
    _case("Gemm", [("a", r(3, 4), False), ("b", r(4, 5), False), ("c", r(3, 1), False)], id="Gemm-column-bias"),
    _case("Gemm", [("a", r(3, 4), False), ("b", r(4, 5), True)], {"alpha": 3.0}, id="Gemm-no-C"),
    _case("Flatten", [("x", r(2, 3, 4, 5), False)], {"axis": 2}),
    _case("Flatten", [("x", r(2, 3, 4), False)], {"axis": 0}, id="Flatten-axis0"),
    _case("Reshape", [("x", r(2, 3, 4), False), ("s", i64(0, -1, 2), True)]),
    _case("Transpose", [("x", r(2, 3, 4), False)], {"perm": [2, 0, 1]}),
    _case("Transpose", [("x", r(2, 3, 4), False)], id="Transpose-default"),
    _case("Concat", [("a", r(2, 3), False), ("b", r(2, 1), True), ("c", r(2, 2), False)], {"axis": -1}),
    _case("Split", [("x", r(2, 4, 3), False), ("s", i64(1, 3), True)], {"axis": 1}, opset=13, n_out=2),
    _case("Split", [("x", r(7, 2), False)], {"num_outputs": 3}, opset=18, n_out=3, id="Split-num-outputs"),
    _case("Split", [("x", r(2, 6), False)], {"axis": -1, "split": [2, 4]}, opset=11, n_out=2, id="Split-attr"),
    _case("Slice", [("x", r(5, 4, 6), False), ("st", i64(1, -1), True), ("en", i64(100, -10**9), True),
                    ("ax", i64(0, 2), True), ("sp", i64(2, -2), True)], id="Slice-steps"),
    _case("Slice", [("x", r(5, 4), False)], {"starts": [1], "ends": [-1], "axes": [1]}, opset=9,
          id="Slice-opset9"),
    _case("Squeeze", [("x", r(2, 1, 3, 1), False), ("a", i64(1), True)], opset=13),
    _case("Squeeze", [("x", r(2, 1, 3, 1), False)], opset=11, id="Squeeze-all"),
    _case("Unsqueeze", [("x", r(2, 3), False), ("a", i64(0, -1), True)], opset=13),
    _case("Unsqueeze", [("x", r(2, 3), False)], {"axes": [1]}, opset=11, id="Unsqueeze-attr"),
    _case("GlobalAveragePool", [("x", r(1, 3, 5, 7), False)]),
    _case("GlobalAveragePool", [("x", r(2, 3, 5), False)], id="GlobalAveragePool-1d"),
    _case("AveragePool", [("x", r(1, 2, 7, 8), False)],
          {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}, id="AveragePool-exclude-pad"),
    _case("AveragePool", [("x", r(1, 2, 7, 8), False)],
          {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
          id="AveragePool-include-pad"),
    _case("AveragePool", [("x", r(1, 2, 7, 8), False)], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
          id="AveragePool-ceil"),
    _case("AveragePool", [("x", r(2, 3, 9), False)], {"kernel_shape": [3], "strides": [2]}, id="AveragePool-1d"),
    _case("MaxPool", [("x", r(1, 2, 9, 8), False)],
          {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "dilations": [1, 2]}, id="MaxPool"),
    _case("MaxPool", [("x", r(1, 2, 8, 8), False)], {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
          id="MaxPool-ceil"),
    _case("MaxPool", [("x", r(1, 2, 7, 6), False)], {"kernel_shape": [2, 2], "strides": [2, 2],
                                                       "auto_pad": "SAME_UPPER"}, id="MaxPool-same-upper"),
    _case("ReduceMean", [("x", r(2, 3, 4), False)], {"axes": [0, 2], "keepdims": 0}, id="ReduceMean-attr"),
    _case("ReduceMean", [("x", r(2, 3, 4), False), ("a", i64(-1), True)], opset=18, id="ReduceMean-input"),
    _case("ReduceSum", [("x", r(2, 3, 4), False), ("a", i64(1), True)], {"keepdims": 0}, opset=13),
    _case("ReduceMax", [("x", r(2, 3, 4), False), ("a", i64(0, 2), True)], opset=18),
    _case("ReduceMin", [("x", r(2, 3, 4), False)], {"axes": [1]}),
    _case("ReduceProd", [("x", r(2, 3, 4), False)], {"axes": [2], "keepdims": 0}),
    _case("ReduceL2", [("x", r(2, 3, 4), False)], {"axes": [1, 2]}),
    _case("ReduceMean", [("x", r(2, 3), False)], {"noop_with_empty_axes": 1}, opset=18, id="ReduceMean-noop"),
    _case("GlobalMaxPool", [("x", r(1, 3, 5, 7), False)]),
    _case("Softmax", [("x", r(2, 3, 4), False)], {"axis": 1}),
    _case("Softmax", [("x", r(2, 3, 4), False)], {"axis": 1}, opset=11, id="Softmax-opset11-coerced"),
    _case("LogSoftmax", [("x", r(2, 5), False)]),
    _case("Gelu", [("x", r(3, 4, lo=-4, hi=4), False)], opset=20),
    _case("Gelu", [("x", r(3, 4, lo=-4, hi=4), False)], {"approximate": "tanh"}, opset=20, id="Gelu-tanh"),
    _case("LayerNormalization", [("x", r(2, 3, 8), False), ("s", r(8), True), ("b", r(8), True)]),
    _case("LayerNormalization", [("x", r(2, 4, 5), False), ("s", r(4, 5), True)], {"axis": -2, "epsilon": 1e-3},
          id="LayerNormalization-two-axes"),
    _case("InstanceNormalization", [("x", r(2, 3, 4, 5), False), ("s", r(3), True), ("b", r(3), True)]),
    _case("Identity", [("x", r(3), False)]),
    _case("Cast", [("x", r(3, 4), False)], {"to": TensorProto.DOUBLE}, id="Cast-f64"),
    _case("Cast", [("x", r(3, 4, lo=-9, hi=9), False)], {"to": TensorProto.INT32}, id="Cast-i32"),
    _case("Where", [("c", r(3, 4) > 0, False), ("a", r(3, 4), False), ("b", r(4), True)]),
    _case("Expand", [("x", r(3, 1), False), ("s", i64(2, 1, 4), True)]),
    _case("Tile", [("x", r(2, 3), False), ("t", i64(2, 1), True)]),
    _case("Pad", [("x", r(1, 2, 3, 4), False), ("p", i64(1, 2, 0, 1), True), ("v", np.float32(0.5), True),
                  ("a", i64(2, 3), True)], opset=18),
    _case("Resize", [("x", r(1, 2, 3, 4), False), None, ("s", np.array([1, 1, 2, 3], np.float32), True)],
          {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
          id="Resize-nearest"),
]


def test_every_onnx_op_read_has_a_case():
    from tensorlang.frontend.onnx_import import supported_onnx_ops
    covered = {p.values[0] for p in OP_CASES} | {"Shape", "Size", "Constant", "Gather"}  # the tests below
    assert not sorted(set(supported_onnx_ops()) - covered)


@pytest.mark.parametrize("op_type,inputs,attrs,opset,n_out", OP_CASES)
def test_one_onnx_op_matches_onnxruntime(op_type, inputs, attrs, opset, n_out):
    model, feeds = one_node(op_type, inputs, attrs, opset, n_out)
    check(model, feeds)


def _chain_model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "chain", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs],
                              initializer=list(inits))
    return _typed(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


def test_shape_arithmetic_folds_at_import():
    # Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])), as the TorchScript exporter writes x.view(x.size(0), -1)
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(i64(0)[0])),
             helper.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
             helper.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
             helper.make_node("Concat", ["batch1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("Shape", ["x"], ["tail"], start=2),
             helper.make_node("Cast", ["tail"], ["tailf"], to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", ["tailf"], ["n"], keepdims=0),
             helper.make_node("Mul", ["flat", "n"], ["scaled"]),
             helper.make_node("Size", ["x"], ["size"]),
             helper.make_node("Cast", ["size"], ["sizef"], to=TensorProto.FLOAT),
             helper.make_node("Div", ["scaled", "sizef"], ["y"])]
    model = _chain_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])], ["y"],
                         [numpy_helper.from_array(i64(0), "axes"), numpy_helper.from_array(i64(-1), "minus1")])
    g = graph_from_onnx(model)
    assert sorted(n.op for n in g.nodes) == ["div.Tensor", "mul.Tensor", "view"]  # the shape chains are constants
    check(model, {"x": r(2, 3, 4, 5)})


def test_constant_nodes_and_identity():
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(r(3, 4))),
             helper.make_node("Constant", [], ["k"], value_float=2.5),
             helper.make_node("Identity", ["x"], ["xi"]),
             helper.make_node("Mul", ["c", "k"], ["ck"]),
             helper.make_node("Add", ["xi", "ck"], ["y"])]
    model = _chain_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])], ["y"])
    check(model, {"x": r(3, 4)})


# ---- models exported from torch ---------------------------------------------------------------------------------


def _export(module, example, path, exporter: str, opset: int = 17, **kw):
    import warnings
    module.eval()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            pytest.importorskip("onnxscript")
            torch.onnx.export(module, example, str(path), dynamo=True, opset_version=opset, verbose=False, **kw)
        else:
            extra = {"training": torch.onnx.TrainingMode.PRESERVE} if exporter == "torchscript-bn" else {}
            kw.setdefault("input_names", ["x"])  # the TorchScript exporter names them input.1, ... otherwise
            torch.onnx.export(module, example, str(path), dynamo=False, opset_version=opset, **extra, **kw)
    return path


def _randomize_norms(module):
    """Batch norms with statistics and affine parameters away from their defaults, so that activations keep a
    magnitude of about 1 through deep networks (a default-initialised one gives outputs near 0, which any result
    would match)."""
    gen = torch.Generator().manual_seed(56)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(torch.rand(c, generator=gen) * 0.2 - 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
                m.bias.copy_(torch.rand(c, generator=gen) * 0.2 - 0.1)
    return module


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=2)
        self.c3 = torch.nn.Conv2d(8, 4, 1)
        self.fc = torch.nn.Linear(12 * 4 * 4, 10)

    def forward(self, x):
        y = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.c1(x))), 2)
        z = self.c2(y) + y                                    # residual add
        z = torch.cat([self.c3(z), self.c3(y), z[:, :4]], 1)  # concat of branches, a slice
        z = torch.nn.functional.avg_pool2d(z, 2)
        return torch.softmax(self.fc(torch.flatten(z, 1)), -1), z.mean((2, 3))


class SmallMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = torch.nn.Linear(16, 32)
        self.ln = torch.nn.LayerNorm(32)
        self.l2 = torch.nn.Linear(32, 10)

    def forward(self, x):
        return torch.softmax(self.l2(torch.nn.functional.gelu(self.ln(self.l1(x)))), -1)


EXPORTERS = ["torchscript", "torchscript-bn", "dynamo"]


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_small_cnn_from_torch_matches_onnxruntime(tmp_path, exporter):
    x = torch.randn(2, 3, 16, 16)
    path = _export(_randomize_norms(SmallCNN()), (x,), tmp_path / "cnn.onnx", exporter)
    if exporter == "torchscript-bn":
        assert "BatchNormalization" in {n.op_type for n in onnx.load(str(path)).graph.node}
    m = check(str(path), {"x": x.numpy()})
    assert m.graph.name == "cnn"
    if exporter == "torchscript":  # a model from ONNX saves and loads as any other
        loaded = tl.load_model(m.save(str(tmp_path / "cnn.tlm")))
        assert_matches(loaded(x.numpy()), ort_run(str(path), {"x": x.numpy()}))


@pytest.mark.parametrize("exporter,opset", [("torchscript", 17), ("torchscript", 18), ("dynamo", 18)])
def test_small_mlp_from_torch_matches_onnxruntime(tmp_path, exporter, opset):
    x = torch.randn(2, 5, 16)  # 3-d: MatMul with broadcast weights, not Gemm
    path = _export(SmallMLP(), (x,), tmp_path / "mlp.onnx", exporter, opset)
    check(str(path), {"x": x.numpy()})


def _torchvision():
    if "torchvision" not in sys.modules:
        # the wheel beside the CPU torch cannot load its C ops (torchvision::nms); the classifiers never call them
        try:
            lib = torch.library.Library("torchvision", "DEF")
            lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            _LIBRARIES.append(lib)
        except RuntimeError:
            pass  # defined already
    return pytest.importorskip("torchvision")


_LIBRARIES: list = []


@pytest.mark.slow
@pytest.mark.parametrize("name,exporter,opset", [("mobilenet_v2", "torchscript", 18),
                                                 ("mobilenet_v2", "dynamo", 18),
                                                 ("resnet18", "torchscript", 17),
                                                 ("resnet18", "dynamo", 18)])
def test_torchvision_classifier_matches_onnxruntime(tmp_path, name, exporter, opset):
    tv = _torchvision()
    torch.manual_seed(0)
    net = _randomize_norms(getattr(tv.models, name)(weights=None))
    x = torch.randn(1, 3, 224, 224)
    path = _export(net, (x,), tmp_path / f"{name}.onnx", exporter, opset)
    ref = ort_run(str(path), {onnx.load(str(path)).graph.input[0].name: x.numpy()})
    assert np.max(np.abs(ref[0])) > 0.1  # the comparison below means something
    assert_matches(tl.from_onnx(str(path))(x.numpy()), ref)


# ---- inputs, names, errors --------------------------------------------------------------------------------------

def test_model_proto_bytes_and_path_give_the_same_model(tmp_path):
    model, feeds = one_node("Relu", [("x", r(2, 3), False)])
    path = tmp_path / "relu net.onnx"
    onnx.save(model, str(path))
    ref = ort_run(model, feeds)
    for source in (model, model.SerializeToString(), str(path), path):
        assert_matches(tl.from_onnx(source)(feeds["x"]), ref)
    assert model_from_onnx(path).graph.name == "relu_net"


def test_dynamic_input_dims_need_input_shapes(tmp_path):
    x = torch.randn(2, 5, 16)
    path = _export(SmallMLP(), (x,), tmp_path / "dyn.onnx", "torchscript", input_names=["x"],
                   dynamic_axes={"x": {0: "batch"}})
    with pytest.raises(UsageError, match=r"input 'x' has shape \[batch, 5, 16\].*input_shapes=\{'x'"):
        tl.from_onnx(str(path))
    x3 = np.random.default_rng(1).standard_normal((3, 5, 16)).astype(np.float32)
    m = tl.from_onnx(str(path), input_shapes={"x": (3, 5, 16)})
    assert_matches(m(x3), ort_run(str(path), {"x": x3}))
    with pytest.raises(UsageError, match=r"input_shapes names 'y'.*inputs are 'x'"):
        tl.from_onnx(str(path), input_shapes={"y": (3, 5, 16)})
    with pytest.raises(UsageError, match=r"does not fit the input's fixed dims"):
        tl.from_onnx(str(path), input_shapes={"x": (3, 6, 16)})


def test_unsupported_onnx_op_names_the_node_and_its_aten_op(tmp_path):
    class Up(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear")
    path = _export(Up(), (torch.randn(1, 2, 4, 4),), tmp_path / "up.onnx", "torchscript", 18)
    with pytest.raises(UsageError) as e:
        tl.from_onnx(str(path))
    text = str(e.value)
    assert "ONNX node '/Resize' (Resize, opset 18)" in text and "mode 'linear'" in text
    assert "aten.upsample_bilinear2d" in text and "Traceback" not in text


def test_every_unsupported_node_is_reported_at_once():
    nodes = [helper.make_node("Floor", ["x"], ["f"], name="floor_it"),
             helper.make_node("Relu", ["f"], ["fr"], name="after_floor"),  # skipped: its input is unsupported
             helper.make_node("CumSum", ["x", "axis"], ["c"], name="cumsum_it"),
             helper.make_node("Floor", ["x"], ["f2"], name="second_floor"),
             helper.make_node("Add", ["fr", "c"], ["s"]),
             helper.make_node("Add", ["s", "f2"], ["y"])]
    model = _chain_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], ["y"],
                         [numpy_helper.from_array(i64(1)[0], "axis")])
    with pytest.raises(UsageError) as e:
        tl.from_onnx(model)
    text = str(e.value)
    assert text.startswith("ONNX ops tensorlang does not read: ONNX node 'floor_it' (Floor, opset 17) and 1 more Floor "
                           "node: its ATen equivalent, aten.floor, is not supported either; ONNX node 'cumsum_it'")
    assert "aten.floor, is not supported either" in text and "aten.cumsum" in text
    assert "after_floor" not in text and "tensorlang reads these ONNX ops: Abs, Add" in text


def test_an_op_of_another_domain_names_the_domain():
    node = helper.make_node("FusedGemm", ["x"], ["y"], name="the_FusedGemm", domain="com.microsoft")
    graph = helper.make_graph([node], "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(UsageError, match=r"ONNX node 'the_FusedGemm' \(FusedGemm, domain 'com.microsoft', opset 1\) "
                                         r"is not supported"):
        tl.from_onnx(model)


def test_unsupported_attributes_name_the_node():
    model, _ = one_node("Pad", [("x", r(1, 2, 3, 4), False), ("p", i64(0, 0, 1, 1, 0, 0, 1, 1), True)],
                        {"mode": "reflect"}, opset=18)
    with pytest.raises(UsageError, match=r"ONNX node 'the_Pad' \(Pad, opset 18\): mode 'reflect' is not supported, "
                                         r"only 'constant'; its ATen equivalent, aten.reflection_pad2d, is not"):
        tl.from_onnx(model)
    model, _ = one_node("AveragePool", [("x", r(1, 2, 6, 6), False)],
                        {"kernel_shape": [3, 3], "pads": [0, 0, 1, 1], "ceil_mode": 1})
    with pytest.raises(UsageError, match=r"'the_AveragePool' \(AveragePool, opset 17\): asymmetric pads"):
        tl.from_onnx(model)


def test_shapes_computed_at_run_time_are_an_error():
    model, _ = one_node("Reshape", [("x", r(2, 6), False), ("s", i64(3, 4), False)])
    with pytest.raises(UsageError, match=r"'the_Reshape' \(Reshape, opset 17\): its shape \('s'\) is computed at "
                                         r"run time"):
        tl.from_onnx(model)


def test_a_type_the_model_declares_wrongly_is_named():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["h"], name="relu_it"),
                               helper.make_node("Neg", ["h"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, [3, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(UsageError, match=r"ONNX node 'relu_it' \(Relu, opset 17\): tensorlang infers f32\[2, 3\] for "
                                         r"its output 'h' where the model .* says f32\[3, 2\]"):
        tl.from_onnx(model)


def test_gathers_of_constant_indices():
    for idx in (np.array(2, np.int64), i64(1, 3), i64(-1)):
        model, feeds = one_node("Gather", [("x", r(2, 5, 3), False), ("i", idx, True)], {"axis": 1})
        check(model, feeds)
    model, _ = one_node("Gather", [("x", r(2, 5, 3), False), ("i", i64(3, 1), True)], {"axis": 1})
    with pytest.raises(UsageError, match=r"'the_Gather' \(Gather, opset 17\): indices \[3, 1\].*aten.index_select"):
        tl.from_onnx(model)


def test_malformed_files_name_the_file(tmp_path):
    bad = tmp_path / "garbage.onnx"
    bad.write_bytes(b"\x08\x07this is not a protobuf \xff\xfe")
    with pytest.raises(UsageError, match=r"garbage.onnx is not an ONNX model"):
        tl.from_onnx(str(bad))
    with pytest.raises(UsageError, match=r"missing.onnx: no such file"):
        tl.from_onnx(str(tmp_path / "missing.onnx"))
    model = _chain_model([helper.make_node("Relu", ["nowhere"], ["y"])],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], ["y"])
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(model.SerializeToString())
    with pytest.raises(UsageError, match=r"broken.onnx is not a valid ONNX model"):
        tl.from_onnx(str(broken))
    with pytest.raises(UsageError, match=r"from_onnx takes an onnx.ModelProto, the path of an .onnx file or its "
                                         r"bytes, not int"):
        tl.from_onnx(3)


def test_unsupported_dtypes_are_named():
    model = _chain_model([helper.make_node("Relu", ["x"], ["y"])],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 3])], ["y"])
    with pytest.raises(UsageError, match=r"input 'x' has element type FLOAT16"):
        tl.from_onnx(model)


def test_without_the_onnx_package_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError
    with pytest.raises(UsageError, match=r"pip install 'tensorlang\[onnx\]'"):
        tl.from_onnx("model.onnx")
