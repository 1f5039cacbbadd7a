"""ONNX models into tensorlang: `tl.from_onnx(model_or_path)`.

An ONNX model (a file, its bytes, or an `onnx.ModelProto`) becomes the same `tensorlang.graph.Graph` the PyTorch
importer builds: each ONNX node turns into the core ATen ops of the op registry (`Conv` into ``convolution``, `Gemm`
into ``addmm``, `MatMul` into ``mm`` or ``bmm`` between views, `Flatten` and `Reshape` into ``view``, ...), so every
graph pass and kernel applies unchanged, and the graph compiles with the same `compile_graph`. Initializers become
numpy constants (only those a kernel reads enter the graph). The graph is static: a node whose inputs are all
constants is computed at import by ONNX's reference evaluator (shape arithmetic such as Shape, Gather, Concat,
Unsqueeze into a Reshape's shape), and `Shape` of any value is a constant. Types come from ONNX's shape inference
(`onnx.shape_inference.infer_shapes`) and the value_info the model carries, and the graph's own type inference
checks them node by node. A model whose inputs have dynamic dims is compiled for the sizes `input_shapes` gives.

An ONNX op tensorlang does not read is an error naming the node (name, op type, domain, opset) and, where torch has
one, the ATen op it corresponds to; so is an attribute of a supported op that tensorlang does not implement, and a
file that is not a valid ONNX model names the file. The `onnx` package (the `onnx` extra) is imported on first use.

Example::

    import numpy as np, tensorlang as tl
    m = tl.from_onnx("resnet18.onnx")                          # a tl.Model, as tl.from_torch gives
    y = m(np.random.rand(1, 3, 224, 224).astype(np.float32))   # inputs by position, in the model's input order
"""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, cast

import numpy as np

from ..errors import UsageError
from ..graph import ops
from ..graph.ir import Graph, Node, TensorType, Value, dtype_of_numpy
from ..graph.ops.common import broadcast_shapes, norm_dim, numel

if TYPE_CHECKING:
    from onnx import NodeProto

#: ONNX element types (TensorProto.DataType) of the graph's dtypes
_ELEM = {1: "f32", 11: "f64", 6: "i32", 7: "i64", 9: "bool", 2: "u8", 3: "i8", 5: "i16"}
#: ops whose outputs are random: never computed at import even where their inputs are constants
_RANDOM = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
#: a fold at import may make its outputs at most this much larger than its inputs, beyond this many bytes, where
#: the op also has a translation (as the graph's own constant folding)
_GROWTH, _SLACK = 4, 1 << 16
#: the ATen op (as torch.export gives it) of ONNX ops tensorlang does not read, for the error
_ATEN = {"ConvTranspose": "convolution with transposed=True", "Gather": "index_select",
         "GatherElements": "gather", "GatherND": "index.Tensor", "ScatterND": "index_put",
         "ScatterElements": "scatter", "CumSum": "cumsum", "Mod": "fmod", "Floor": "floor", "Ceil": "ceil",
         "Round": "round", "ArgMax": "argmax", "ArgMin": "argmin", "TopK": "topk", "Trilu": "triu",
         "NonZero": "nonzero", "GroupNormalization": "native_group_norm", "DepthToSpace": "pixel_shuffle",
         "SpaceToDepth": "pixel_unshuffle", "Upsample": "upsample_nearest2d",
         "LSTM": "lstm", "GRU": "gru", "Sin": "sin", "Cos": "cos", "Atan": "atan", "IsNaN": "isnan",
         "IsInf": "isinf", "OneHot": "one_hot", "Attention": "scaled_dot_product_attention"}
_RESIZE_ATEN = {"nearest": "upsample_nearest2d", "linear": "upsample_bilinear2d", "cubic": "upsample_bicubic2d"}
_PAD_ATEN = {"reflect": "reflection_pad2d", "edge": "replication_pad2d", "wrap": "circular_pad2d"}


def _onnx():
    try:
        import onnx
    except ImportError:
        raise UsageError("reading ONNX models needs the onnx package: pip install 'tensorlang[onnx]'") from None
    return onnx


def aten_hint(aten: str) -> str:
    """What the error about an unsupported ONNX op says of its ATen equivalent `aten`.

    >>> aten_hint("nosuch_op")
    'its ATen equivalent, aten.nosuch_op, is not supported either'
    >>> aten_hint("relu")
    'aten.relu is supported through torch.export: import the PyTorch model with tl.from_torch'
    """
    if any(k == aten or k.startswith(aten + ".") for k in ops.supported()):
        return f"aten.{aten} is supported through torch.export: import the PyTorch model with tl.from_torch"
    return f"its ATen equivalent, aten.{aten}, is not supported either"


def supported_onnx_ops() -> list[str]:
    """The ONNX op types (default domain) tensorlang reads, sorted.

    >>> "Conv" in supported_onnx_ops() and "Gemm" in supported_onnx_ops()
    True
    """
    return sorted(_TRANSLATE)


def load_onnx(model_or_path):
    """An `onnx.ModelProto` from a path, bytes or a ModelProto, checked with `onnx.checker`; a file that is
    missing or not a valid ONNX model is a UsageError naming it.

    Example::

        proto = load_onnx("net.onnx")
    """
    onnx = _onnx()
    if isinstance(model_or_path, onnx.ModelProto):
        model, where = model_or_path, "the ONNX model"
    elif isinstance(model_or_path, (bytes, bytearray)):
        where = "the ONNX model bytes"
        model = _parse(onnx, lambda: onnx.load_from_string(bytes(model_or_path)), where)
    elif isinstance(model_or_path, (str, os.PathLike)):
        where = os.fspath(model_or_path)
        if not os.path.isfile(where):
            raise UsageError(f"{where}: no such file")
        model = _parse(onnx, lambda: onnx.load(where), where)
    else:
        raise UsageError(f"from_onnx takes an onnx.ModelProto, the path of an .onnx file or its bytes, not "
                         f"{type(model_or_path).__name__}")
    try:
        onnx.checker.check_model(model)
    except Exception as e:
        raise UsageError(f"{where} is not a valid ONNX model: {_first_line(e)}") from None
    return model


def _parse(onnx, load, where):
    try:
        model = load()
    except Exception as e:
        raise UsageError(f"{where} is not an ONNX model (it does not parse: {_first_line(e)})") from None
    if not model.HasField("graph") or not model.opset_import:
        raise UsageError(f"{where} is not an ONNX model (it holds no graph or no opset)")
    return model


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


def _static_shape(type_proto) -> list[int | str | None] | None:
    """The dims of a tensor type proto (ints; a name or None where dynamic), or None when it has no shape."""
    t = type_proto.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]


def _with_input_shapes(onnx, model, input_shapes: dict, inputs, where: str):
    """A copy of `model` whose inputs have the shapes `input_shapes` gives (value_info left to inference)."""
    names = [i.name for i in inputs]
    unknown = [k for k in input_shapes if k not in names]
    if unknown:
        raise UsageError(f"input_shapes names {', '.join(map(repr, unknown))}, which {where} does not take; its "
                         f"inputs are {', '.join(map(repr, names))}")
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.value_info[:]
    for i in copy.graph.input:
        if i.name not in input_shapes:
            continue
        shape = [int(s) for s in input_shapes[i.name]]
        old = _static_shape(i.type)
        if old is not None and len(old) != len(shape):
            raise UsageError(f"input_shapes[{i.name!r}] = {shape} has rank {len(shape)}; the input has rank "
                             f"{len(old)} ({_dims_text(old)})")
        if old is not None and any(isinstance(a, int) and a and a != b for a, b in zip(old, shape)):
            raise UsageError(f"input_shapes[{i.name!r}] = {shape} does not fit the input's fixed dims "
                             f"{_dims_text(old)}")
        dims = i.type.tensor_type.shape.dim
        del dims[:]
        for s in shape:
            dims.add().dim_value = s
    return copy


def _dims_text(dims) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


class _Importer:
    """Walks an ONNX graph in order, translating each node into ATen-named nodes of a tensorlang Graph."""

    def __init__(self, onnx, model, name: str):
        self.onnx = onnx
        self.g = Graph(name)
        self.opsets = {("" if d.domain == "ai.onnx" else d.domain): d.version for d in model.opset_import}
        self.env: dict[str, Value | np.ndarray] = {}  # ONNX value name -> Value or numpy array (a constant)
        self.consts: dict[str, Value] = {}  # constants made graph values, by ONNX name
        self.dead: set[str] = set()  # values of unsupported nodes: their users are skipped
        self.unsupported: list[tuple[str, str]] = []  # (op label, node label)
        self.known: dict[str, tuple[int, list]] = {}  # ONNX's type of each value: elem type, dims
        self.used: set[str] = set()  # values some node or the graph's outputs read
        self.node: NodeProto | None = None
        self.label = ""

    # ---- values ----
    def is_const(self, name: str) -> bool:
        return isinstance(self.env.get(name), np.ndarray)

    def const(self, name: str):
        """The numpy array of constant `name` (None when it is computed at run time)."""
        v = self.env.get(name)
        return v if isinstance(v, np.ndarray) else None

    def value(self, name: str) -> Value | None:
        """Value `name` as a graph value (a constant becomes a graph constant); None for an absent optional input."""
        if not name:
            return None
        v = self.env[name]
        if isinstance(v, Value):
            return v
        if name not in self.consts:
            try:
                dtype_of_numpy(v.dtype)
            except UsageError:
                raise UsageError(f"its input {name!r} is a constant of dtype {v.dtype}; tensorlang holds "
                                 "float32, float64, int32, int64, bool, uint8, int8 and int16") from None
            self.consts[name] = self.g.add_constant(name, np.ascontiguousarray(v))
        return self.consts[name]

    def input(self, k: int) -> Value | None:
        """The current node's input `k` as a value (None when absent)."""
        assert self.node is not None  # translators run inside run_node
        return self.value(self.node.input[k]) if k < len(self.node.input) else None

    def ints(self, attrs: dict, attr: str, k: int, what: str) -> list[int] | None:
        """A list of ints from attribute `attr` (older opsets) or constant input `k` (newer), or None if absent."""
        if attr in attrs:
            return [int(v) for v in attrs[attr]]
        assert self.node is not None  # translators run inside run_node
        if k < len(self.node.input) and self.node.input[k]:
            c = self.const(self.node.input[k])
            if c is None:
                raise UsageError(f"its {what} ({self.node.input[k]!r}) is computed at run time; tensorlang "
                                 "compiles static graphs and needs it constant")
            return [int(v) for v in c.reshape(-1)]
        return None

    def scalar(self, k: int, what: str):
        """Constant input `k` (one element) as a Python number, or None if absent."""
        assert self.node is not None  # translators run inside run_node
        if k >= len(self.node.input) or not self.node.input[k]:
            return None
        c = self.const(self.node.input[k])
        if c is None or c.size != 1:
            raise UsageError(f"its {what} ({self.node.input[k]!r}) must be a constant with one element")
        return c.reshape(-1)[0].item()

    # ---- emitting ATen nodes ----
    def emit(self, op: str, inputs: list, attrs: dict) -> list[Value]:
        """Add an ATen node (its output types from the op's own inference); returns its outputs."""
        opdef = ops.get(op)
        source = self.label
        probe = Node(op, list(inputs), dict(attrs), [], name=op.split(".")[0], source=source)
        ops.check_small_ints(probe)
        types = opdef.infer(probe)
        node = self.g.add_node(op, inputs, attrs, types, name=op.split(".")[0], source=source)
        ops.check_small_ints(node)  # (its outputs: the probe had none)
        return node.outputs

    def emit1(self, op: str, inputs: list, attrs: dict | None = None) -> Value:
        """`emit` of a node with one output (or whose first output is the one wanted)."""
        return self.emit(op, inputs, attrs or {})[0]

    def view(self, x: Value, shape) -> Value:
        """`x` as `shape` (no node where it already has it)."""
        shape = [int(s) for s in shape]
        return x if list(x.shape) == shape else self.emit1("view", [x], {"size": shape})

    # ---- nodes ----
    def run_node(self, index: int, node) -> None:
        domain = "" if node.domain == "ai.onnx" else node.domain
        opset = self.opsets.get(domain)
        name = f"'{node.name}'" if node.name else f"#{index} (output {node.output[0]!r})"
        dom = f", domain {domain!r}" if domain else ""
        self.label = f"ONNX node {name} ({node.op_type}{dom}, opset {opset})"
        self.node = node
        if any(i in self.dead for i in node.input):
            self.dead.update(node.output)
            return
        attrs = {a.name: _attr_value(self.onnx, a) for a in node.attribute}
        translate = _TRANSLATE.get(node.op_type) if domain == "" else None
        if any(a.type in (self.onnx.AttributeProto.GRAPH, self.onnx.AttributeProto.GRAPHS)
               for a in node.attribute):
            translate = None  # control flow (If, Loop, Scan): not read
        elif node.op_type not in _RANDOM and all(not i or self.is_const(i) for i in node.input):
            folded = self._fold(node, opset, domain, translate is not None)
            if folded is not None:
                self._bind(node, folded)
                return
        if translate is None:
            self.unsupported.append((f"{node.op_type}{dom}", self.label))
            self.dead.update(node.output)
            return
        try:
            results = translate(self, node, attrs)
        except UsageError as e:
            raise UsageError(f"{self.label}: {e}") from None
        except (ValueError, TypeError, IndexError, KeyError) as e:  # a malformed node: name it
            raise UsageError(f"{self.label} could not be read: {_first_line(e)}") from e
        self._bind(node, results)

    def _fold(self, node, opset, domain, translatable: bool):
        """The outputs of a node whose inputs are all constants, from ONNX's reference evaluator (None where it
        cannot compute them, or where the result would be much larger than the inputs and a kernel can make it)."""
        from onnx.reference import ReferenceEvaluator
        feeds = {i: self.const(i) for i in node.input if i}
        try:
            outs = ReferenceEvaluator(node, opsets={domain: opset}).run(None, feeds)
        except Exception:
            return None
        outs = [np.asarray(o) for o in outs]
        size = sum(o.nbytes for o in outs)
        if translatable and size > _GROWTH * sum(a.nbytes for a in feeds.values()) + _SLACK:
            return None
        return outs

    def _bind(self, node, results: list) -> None:
        """Name the node's outputs, checking each against ONNX's type of it."""
        for k, out in enumerate(node.output):
            if not out:
                continue
            r = results[k] if k < len(results) else None
            if r is None:
                if out in self.used:
                    raise UsageError(f"{self.label}: its output {k} ({out!r}) is not supported (only its first "
                                     "output is computed)")
                continue
            self._check(out, r)
            self.env[out] = r

    def _check(self, name: str, r) -> None:
        known = self.known.get(name)
        if known is None or any(not isinstance(d, int) for d in known[1]):
            return
        elem, dims = known
        if isinstance(r, Value):
            ours, dtype = str(r.type), _ELEM.get(elem, f"elem type {elem}")
            same = list(r.shape) == dims and (not elem or r.dtype == dtype)
        else:
            ours, dtype = f"{r.dtype}[{', '.join(map(str, r.shape))}]", r.dtype
            if elem:
                dtype = np.dtype(self.onnx.helper.tensor_dtype_to_np_dtype(elem))
            same = list(r.shape) == dims and r.dtype == dtype
        if not same:
            theirs = f"{dtype}[{', '.join(map(str, dims))}]"
            raise UsageError(f"{self.label}: tensorlang infers {ours} for its output {name!r} where the model (its "
                             f"value_info and ONNX's shape inference) says {theirs}")

    def check_supported(self) -> None:
        if not self.unsupported:
            return
        by_op: dict[str, list[str]] = {}
        for op, label in self.unsupported:
            by_op.setdefault(op, []).append(label)
        parts, hints = [], []
        for op, labels in by_op.items():
            more = f" and {len(labels) - 1} more {op} node{'s' if len(labels) > 2 else ''}" if len(labels) > 1 else ""
            parts.append(f"{labels[0]}{more}")
            hints.append(aten_hint(_ATEN[op]) if op in _ATEN else "")
        known = f"tensorlang reads these ONNX ops: {', '.join(supported_onnx_ops())}"
        if len(parts) == 1:
            verb = "is" if len(self.unsupported) == 1 else "are"
            raise UsageError(f"{parts[0]} {verb} not supported{'; ' + hints[0] if hints[0] else ''}. {known}")
        listed = "; ".join(f"{p}: {h}" if h else p for p, h in zip(parts, hints))
        raise UsageError(f"ONNX ops tensorlang does not read: {listed}. {known}")


def _attr_value(onnx, a):
    v = onnx.helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [s.decode() for s in v]
    return v


# ---- translations: (importer, node, attrs) -> one Value, numpy array or None per output -------------------------

_TRANSLATE: dict = {}


def _op(*names):
    def register(fn):
        for n in names:
            _TRANSLATE[n] = fn
        return fn
    return register


_UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
          "Reciprocal": "reciprocal", "Abs": "abs", "Neg": "neg", "Erf": "erf", "Sign": "sign",
          "Not": "logical_not", "HardSwish": "hardswish", "Softplus": "softplus"}
_BINARY = {"Add": "add.Tensor", "Sub": "sub.Tensor", "Mul": "mul.Tensor", "Div": "div.Tensor",
           "Equal": "eq.Tensor", "Less": "lt.Tensor", "LessOrEqual": "le.Tensor", "Greater": "gt.Tensor",
           "GreaterOrEqual": "ge.Tensor", "And": "logical_and", "Or": "logical_or"}
_VARIADIC = {"Max": "maximum", "Min": "minimum", "Sum": "add.Tensor"}


@_op(*_UNARY)
def _unary(imp, node, attrs):
    return [imp.emit1(_UNARY[node.op_type], [imp.input(0)])]


@_op("LeakyRelu")
def _leaky_relu(imp, node, attrs):
    return [imp.emit1("leaky_relu", [imp.input(0)], {"negative_slope": attrs.get("alpha", 0.01)})]


@_op("Elu")
def _elu(imp, node, attrs):
    return [imp.emit1("elu", [imp.input(0)], {"alpha": attrs.get("alpha", 1.0), "scale": 1, "input_scale": 1})]


@_op("Gelu")
def _gelu(imp, node, attrs):
    return [imp.emit1("gelu", [imp.input(0)], {"approximate": attrs.get("approximate", "none")})]


@_op(*_BINARY)
def _binary(imp, node, attrs):
    a, b = imp.input(0), imp.input(1)
    if node.op_type == "Div" and a.dtype not in ("f32", "f64"):
        raise UsageError(f"integer division ({a.dtype}) of values computed at run time is not supported")
    extra = {"alpha": 1} if node.op_type in ("Add", "Sub") else {}
    return [imp.emit1(_BINARY[node.op_type], [a, b], extra)]


@_op(*_VARIADIC)
def _variadic(imp, node, attrs):
    acc = imp.input(0)
    extra = {"alpha": 1} if node.op_type == "Sum" else {}
    for k in range(1, len(node.input)):
        acc = imp.emit1(_VARIADIC[node.op_type], [acc, imp.input(k)], extra)
    return [acc]


@_op("Pow")
def _pow(imp, node, attrs):
    x = imp.input(0)
    e = imp.const(node.input[1])
    if e is not None and e.size == 1:
        e = e.reshape(-1)[0].item()
        return [imp.emit1("pow.Tensor_Scalar", [x], {"exponent": int(e) if float(e).is_integer() else float(e)})]
    y = imp.input(1)
    if y.dtype != x.dtype:
        y = imp.emit1("_to_copy", [y], {"dtype": x.dtype})
    return [imp.emit1("pow.Tensor_Tensor", [x, y])]


@_op("Where")
def _where(imp, node, attrs):
    return [imp.emit1("where.self", [imp.input(0), imp.input(1), imp.input(2)])]


@_op("Clip")
def _clip(imp, node, attrs):
    x = imp.input(0)
    lo = attrs["min"] if "min" in attrs else imp.scalar(1, "min")
    hi = attrs["max"] if "max" in attrs else imp.scalar(2, "max")
    if lo is None and hi is None:
        return [x]
    if lo is not None and hi is not None and lo <= hi and x.dtype in ("f32", "f64"):
        return [imp.emit1("hardtanh", [x], {"min_val": lo, "max_val": hi})]
    return [imp.emit1("clamp", [x], {"min": lo, "max": hi})]


@_op("HardSigmoid")
def _hard_sigmoid(imp, node, attrs):
    x = imp.input(0)
    y = imp.emit1("mul.Tensor", [x, None], {"other": attrs.get("alpha", 0.2)})
    y = imp.emit1("add.Tensor", [y, None], {"other": attrs.get("beta", 0.5), "alpha": 1})
    return [imp.emit1("clamp", [y], {"min": 0.0, "max": 1.0})]


@_op("Cast", "CastLike")
def _cast(imp, node, attrs):
    x = imp.input(0)
    if node.op_type == "CastLike":
        dtype = imp.input(1).dtype
    else:
        to = attrs["to"]
        if to not in _ELEM:
            raise UsageError(f"a cast to {imp.onnx.TensorProto.DataType.Name(to)} is not supported; tensorlang "
                             "holds float32, float64, int32, int64, bool, uint8, int8 and int16")
        dtype = _ELEM[to]
    return [x if dtype == x.dtype else imp.emit1("_to_copy", [x], {"dtype": dtype})]


@_op("Identity", "Dropout")
def _identity(imp, node, attrs):
    if node.op_type == "Dropout" and len(node.input) > 2 and node.input[2] and imp.scalar(2, "training_mode"):
        raise UsageError("dropout in training mode is not supported; export the model in eval mode")
    return [imp.input(0), None]


@_op("Shape")
def _shape(imp, node, attrs):
    shape = imp.input(0).shape
    start, end = attrs.get("start", 0), attrs.get("end", len(shape))
    return [np.array(shape[start:end], np.int64)]


@_op("Size")
def _size(imp, node, attrs):
    return [np.array(imp.input(0).type.numel, np.int64)]


# ---- convolution, normalisation ---------------------------------------------------------------------------------

def _window_pads(attrs, spatial, kernel, strides, dilations) -> tuple[list[int], list[int]]:
    """(pads at the start, pads at the end) of each spatial dim, from `pads` or `auto_pad`."""
    k = len(spatial)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for n, kk, s, d in zip(spatial, kernel, strides, dilations):
            total = max((-(-n // s) - 1) * s + (kk - 1) * d + 1 - n, 0)
            small = total // 2
            begins.append(small if auto == "SAME_UPPER" else total - small)
            ends.append(total - begins[-1])
        return begins, ends
    if auto == "VALID":
        return [0] * k, [0] * k
    if auto != "NOTSET":
        raise UsageError(f"auto_pad {auto!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID")
    pads = list(attrs.get("pads", [0] * (2 * k)))
    if len(pads) != 2 * k:
        raise UsageError(f"pads {pads} has {len(pads)} entries; a {k}-d window needs {2 * k}")
    return pads[:k], pads[k:]


def _explicit_pad(imp, x: Value, begins, ends, value=0.0) -> Value:
    """`x` padded by `begins` / `ends` on its trailing dims (constant_pad_nd, last dim first)."""
    pad = []
    for b, e in zip(reversed(begins), reversed(ends)):
        pad += [int(b), int(e)]
    return imp.emit1("constant_pad_nd", [x], {"pad": pad, "value": value}) if any(pad) else x


@_op("Conv")
def _conv(imp, node, attrs):
    x, w, b = imp.input(0), imp.input(1), imp.input(2)
    k = x.type.rank - 2
    kernel = list(attrs.get("kernel_shape", w.shape[2:]))
    strides = list(attrs.get("strides", [1] * k))
    dilations = list(attrs.get("dilations", [1] * k))
    begins, ends = _window_pads(attrs, x.shape[2:], kernel, strides, dilations)
    sym = [min(p, q) for p, q in zip(begins, ends)]  # the convolution pads both sides; the rest explicitly
    x = _explicit_pad(imp, x, [p - s for p, s in zip(begins, sym)], [q - s for q, s in zip(ends, sym)])
    return [imp.emit1("convolution", [x, w, b], {"stride": strides, "padding": sym, "dilation": dilations,
                                                   "transposed": False, "output_padding": [0] * k,
                                                   "groups": attrs.get("group", 1)})]


@_op("BatchNormalization")
def _batch_norm(imp, node, attrs):
    if attrs.get("training_mode", 0) or not attrs.get("spatial", 1):
        raise UsageError("batch norm in training mode (or not spatial) is not supported; export the model in "
                         "eval mode")
    ins = [imp.input(k) for k in range(5)]
    return [imp.emit1("_native_batch_norm_legit_no_training", ins,
                      {"momentum": 1.0 - attrs.get("momentum", 0.9), "eps": attrs.get("epsilon", 1e-5)})]


@_op("LayerNormalization")
def _layer_norm(imp, node, attrs):
    x = imp.input(0)
    axis = norm_dim(attrs.get("axis", -1), x.type.rank)
    return imp.emit("native_layer_norm", [x, imp.input(1), imp.input(2)],
                    {"normalized_shape": list(x.shape[axis:]), "eps": attrs.get("epsilon", 1e-5)})


@_op("InstanceNormalization")
def _instance_norm(imp, node, attrs):
    x = imp.input(0)
    n, c = x.shape[:2]
    out = imp.emit("native_group_norm", [x, imp.input(1), imp.input(2)],
                   {"N": n, "C": c, "HxW": numel(x.shape[2:]), "group": c, "eps": attrs.get("epsilon", 1e-5)})
    return [out[0]]


@_op("Softmax", "LogSoftmax")
def _softmax(imp, node, attrs):
    x = imp.input(0)
    op = "_softmax" if node.op_type == "Softmax" else "_log_softmax"
    opset = imp.opsets.get("", 0)
    axis = norm_dim(attrs.get("axis", -1 if opset >= 13 else 1), x.type.rank)
    if opset >= 13 or axis == x.type.rank - 1:
        return [imp.emit1(op, [x], {"dim": axis, "half_to_float": False})]
    # before opset 13: over the input flattened to 2-d at `axis`
    flat = imp.view(x, [numel(x.shape[:axis]), numel(x.shape[axis:])])
    return [imp.view(imp.emit1(op, [flat], {"dim": 1, "half_to_float": False}), x.shape)]


# ---- matrix products --------------------------------------------------------------------------------------------

def matmul(imp, a: Value, b: Value) -> Value:
    """numpy's matmul of two values as mm (a 2-d right operand: the left one's leading dims merged into its rows)
    or bmm (batch dims broadcast, then merged), between views, added to the importer's graph.

    Example::

        y = matmul(imp, imp.input(0), imp.input(1))     # [2, 3, 4] @ [4, 5]: view [6, 4], mm, view [2, 3, 5]
    """
    ra, rb = a.type.rank, b.type.rank
    if ra == 1:
        a = imp.view(a, [1, a.shape[0]])
    if rb == 1:
        b = imp.view(b, [b.shape[0], 1])
    (m, k), (k2, n) = a.shape[-2:], b.shape[-2:]
    if k != k2:
        raise UsageError(f"cannot multiply {list(a.shape)} and {list(b.shape)}")
    batch = list(broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    if b.type.rank == 2:
        y = imp.emit1("mm", [imp.view(a, [numel(a.shape[:-1]), k]), b])
        batch = list(a.shape[:-2])
    else:
        def batched(v, rows, cols):
            full = batch + [rows, cols]
            if list(v.shape) != full:
                v = imp.emit1("expand", [v], {"size": full, "implicit": False})
            return imp.view(v, [numel(batch), rows, cols])
        y = imp.emit1("bmm", [batched(a, m, k), batched(b, k, n)])
    shape = batch + ([m] if ra > 1 else []) + ([n] if rb > 1 else [])
    return imp.view(y, shape)


@_op("MatMul")
def _matmul(imp, node, attrs):
    return [matmul(imp, imp.input(0), imp.input(1))]


@_op("Gemm")
def _gemm(imp, node, attrs):
    a, b, c = imp.input(0), imp.input(1), imp.input(2)
    if attrs.get("transA", 0):
        a = imp.emit1("permute", [a], {"dims": [1, 0]})
    if attrs.get("transB", 0):
        b = imp.emit1("permute", [b], {"dims": [1, 0]})
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if c is not None and beta != 0:
        m, n = a.shape[0], b.shape[1]
        if broadcast_shapes(c.shape, (m, n)) != (m, n):
            raise UsageError(f"C {list(c.shape)} does not broadcast to the product's [{m}, {n}]")
        return [imp.emit1("addmm", [c, a, b], {"beta": beta, "alpha": alpha})]
    y = imp.emit1("mm", [a, b])
    return [y if alpha == 1 else imp.emit1("mul.Tensor", [y, None], {"other": alpha})]


@_op("Einsum")
def _einsum(imp, node, attrs):
    eq = attrs["equation"].replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if "." in eq or len(terms) > 2:
        raise UsageError(f"equation {attrs['equation']!r}: one or two operands without '...' only")
    if not arrow:  # implicit output: the letters that appear once, in alphabetical order
        out = "".join(sorted(c for c in set(lhs) if lhs.count(c) == 1 and c.isalpha()))
    values = [imp.input(k) for k in range(len(terms))]
    sizes: dict[str, int] = {}
    for t, v in zip(terms, values):
        if len(t) != v.type.rank or len(set(t)) != len(t):
            raise UsageError(f"equation {attrs['equation']!r}: term {t!r} does not name each of the {v.type.rank} "
                             "dims of its operand once (diagonals are not supported)")
        for c, n in zip(t, v.shape):
            if sizes.setdefault(c, n) != n:
                raise UsageError(f"equation {attrs['equation']!r}: {c!r} is {sizes[c]} in one operand, {n} in another")
    if any(c not in sizes for c in out):
        raise UsageError(f"equation {attrs['equation']!r}: output letters that no operand has")

    def summed(v, t, keep: str):  # letters only this operand has and the output lacks are summed first
        dims = [k for k, c in enumerate(t) if c not in keep]
        if not dims:
            return v, t
        v = imp.emit1("sum.dim_IntList", [v], {"dim": dims, "keepdim": False, "dtype": None})
        return v, "".join(c for c in t if c in keep)

    def arranged(v, t, order: str):
        perm = [t.index(c) for c in order]
        return v if perm == list(range(len(t))) else imp.emit1("permute", [v], {"dims": perm})
    if len(terms) == 1:
        v, t = summed(values[0], terms[0], out)
        return [arranged(v, t, out)]
    (a, b), (ta, tb) = values, terms
    a, ta = summed(a, ta, out + tb)
    b, tb = summed(b, tb, out + ta)
    batch = "".join(c for c in ta if c in tb and c in out)
    inner = "".join(c for c in ta if c in tb and c not in out)
    free_a, free_b = "".join(c for c in ta if c not in tb), "".join(c for c in tb if c not in ta)

    def size(letters):
        return numel([sizes[c] for c in letters])
    a3 = imp.view(arranged(a, ta, batch + free_a + inner), [size(batch), size(free_a), size(inner)])
    b3 = imp.view(arranged(b, tb, batch + inner + free_b), [size(batch), size(inner), size(free_b)])
    y = imp.view(imp.emit1("bmm", [a3, b3]), [sizes[c] for c in batch + free_a + free_b])
    return [arranged(y, batch + free_a + free_b, out)]


# ---- pooling and reductions -------------------------------------------------------------------------------------

def _pool(imp, node, attrs, kind: str):
    x = imp.input(0)
    rank = x.type.rank
    if rank not in (3, 4):
        raise UsageError(f"input {list(x.shape)}: tensorlang pools 1-d and 2-d windows ([N, C, L] or [N, C, H, W])")
    k = rank - 2
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * k))
    dilations = list(attrs.get("dilations", [1] * k))
    begins, ends = _window_pads(attrs, x.shape[2:], kernel, strides, dilations)
    ceil = bool(attrs.get("ceil_mode", 0))
    include_pad = bool(attrs.get("count_include_pad", 0))
    if kind == "avg" and any(d != 1 for d in dilations):
        raise UsageError(f"average pooling with dilations {dilations} is not supported")
    if begins != ends:  # asymmetric: pad explicitly where the result is the same
        if ceil or (kind == "avg" and not include_pad):
            raise UsageError(f"asymmetric pads {begins + ends} with {'ceil_mode' if ceil else 'count_include_pad=0'}"
                             " are not supported")
        x = _explicit_pad(imp, x, begins, ends, float("-inf") if kind == "max" else 0.0)
        begins = [0] * k
    if k == 1:  # a 1-d window is a 2-d one of height 1
        x = imp.view(x, [*x.shape[:2], 1, x.shape[2]])
        kernel, strides, dilations, begins = [1, *kernel], [1, *strides], [1, *dilations], [0, *begins]
    if kind == "max":
        y = imp.emit1("max_pool2d_with_indices", [x], {"kernel_size": kernel, "stride": strides, "padding": begins,
                                                        "dilation": dilations, "ceil_mode": ceil})
    else:
        y = imp.emit1("avg_pool2d", [x], {"kernel_size": kernel, "stride": strides, "padding": begins,
                                           "ceil_mode": ceil, "count_include_pad": include_pad,
                                           "divisor_override": None})
    if k == 1:
        y = imp.view(y, [*y.shape[:2], y.shape[3]])
    return [y, None]


@_op("MaxPool")
def _max_pool(imp, node, attrs):
    if attrs.get("storage_order", 0):
        raise UsageError("storage_order=1 (column-major indices) is not supported")
    return _pool(imp, node, attrs, "max")


@_op("AveragePool")
def _avg_pool(imp, node, attrs):
    return _pool(imp, node, attrs, "avg")


@_op("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(imp, node, attrs):
    x = imp.input(0)
    dims = list(range(2, x.type.rank))
    if node.op_type == "GlobalMaxPool":
        return [imp.emit1("amax", [x], {"dim": dims, "keepdim": True})]
    if x.type.rank == 4:
        return [imp.emit1("_adaptive_avg_pool2d", [x], {"output_size": [1, 1]})]
    return [imp.emit1("mean.dim", [x], {"dim": dims, "keepdim": True, "dtype": None})]


_REDUCE = {"ReduceMean": "mean.dim", "ReduceSum": "sum.dim_IntList", "ReduceMax": "amax", "ReduceMin": "amin",
           "ReduceProd": "prod.dim_int", "ReduceL2": "linalg_vector_norm"}


@_op(*_REDUCE)
def _reduce(imp, node, attrs):
    x = imp.input(0)
    axes = imp.ints(attrs, "axes", 1, "axes")
    keep = bool(attrs.get("keepdims", 1))
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(x.type.rank))
    dims = sorted({norm_dim(a, x.type.rank) for a in axes})
    op = _REDUCE[node.op_type]
    if op == "prod.dim_int":
        if len(dims) != 1:
            raise UsageError(f"a product over several axes ({dims}) is not supported")
        return [imp.emit1(op, [x], {"dim": dims[0], "keepdim": keep, "dtype": None})]
    extra = {"dtype": None} if op in ("mean.dim", "sum.dim_IntList") else {"ord": 2} if op == \
        "linalg_vector_norm" else {}
    return [imp.emit1(op, [x], {"dim": dims, "keepdim": keep, **extra})]


# ---- shapes and layout ------------------------------------------------------------------------------------------

@_op("Flatten")
def _flatten(imp, node, attrs):
    x = imp.input(0)
    axis = attrs.get("axis", 1)
    axis = axis + x.type.rank if axis < 0 else axis
    return [imp.view(x, [numel(x.shape[:axis]), numel(x.shape[axis:])])]


@_op("Reshape")
def _reshape(imp, node, attrs):
    x = imp.input(0)
    shape = imp.ints({}, "", 1, "shape")
    if not attrs.get("allowzero", 0):
        shape = [x.shape[k] if s == 0 else s for k, s in enumerate(shape)]
    if shape.count(-1) == 1:
        rest = numel([s for s in shape if s != -1])
        shape[shape.index(-1)] = x.type.numel // rest if rest else 0
    if numel(shape) != x.type.numel:
        raise UsageError(f"cannot reshape {list(x.shape)} to {shape}")
    return [imp.view(x, shape)]


@_op("Squeeze")
def _squeeze(imp, node, attrs):
    x = imp.input(0)
    axes = imp.ints(attrs, "axes", 1, "axes")
    dims = {norm_dim(a, x.type.rank) for a in axes} if axes else {k for k, s in enumerate(x.shape) if s == 1}
    if any(x.shape[d] != 1 for d in dims):
        raise UsageError(f"cannot squeeze axes {sorted(dims)} of {list(x.shape)}: not all of size 1")
    return [imp.view(x, [s for k, s in enumerate(x.shape) if k not in dims])]


@_op("Unsqueeze")
def _unsqueeze(imp, node, attrs):
    x = imp.input(0)
    axes = imp.ints(attrs, "axes", 1, "axes") or []
    rank = x.type.rank + len(axes)
    dims = {norm_dim(a, rank) for a in axes}
    rest = iter(x.shape)
    return [imp.view(x, [1 if k in dims else next(rest) for k in range(rank)])]


@_op("Transpose")
def _transpose(imp, node, attrs):
    x = imp.input(0)
    perm = list(attrs.get("perm", range(x.type.rank - 1, -1, -1)))
    return [imp.emit1("permute", [x], {"dims": perm})]


@_op("Concat")
def _concat(imp, node, attrs):
    values = [imp.value(i) for i in node.input if i]
    return [imp.emit1("cat", values, {"dim": attrs["axis"]})]


@_op("Split")
def _split(imp, node, attrs):
    x = imp.input(0)
    axis = norm_dim(attrs.get("axis", 0), x.type.rank)
    n = x.shape[axis]
    sizes = imp.ints(attrs, "split", 1, "split")
    if sizes is None:
        parts = attrs.get("num_outputs", len(node.output))
        each = -(-n // parts)
        sizes = [min(each, n - each * k) for k in range(parts)]
    return imp.emit("split_with_sizes", [x], {"split_sizes": sizes, "dim": axis})


def slice_range(start: int, end: int, step: int, n: int) -> range:
    """The indices ONNX's Slice takes from a dim of size `n` (starts and ends clamped as its spec says).

    >>> list(slice_range(-1, -2**63, -2, 5)), list(slice_range(1, 2**63 - 1, 1, 4))
    ([4, 2, 0], [1, 2, 3])
    """
    if step == 0:
        raise UsageError("a slice step of 0")
    start, end = start + n if start < 0 else start, end + n if end < 0 else end
    if step > 0:
        return range(min(max(start, 0), n), min(max(end, 0), n), step)
    return range(min(max(start, 0), n - 1), min(max(end, -1), n - 1), step)


@_op("Slice")
def _slice(imp, node, attrs):
    x = imp.input(0)
    starts = imp.ints(attrs, "starts", 1, "starts")
    ends = imp.ints(attrs, "ends", 2, "ends")
    axes = imp.ints(attrs, "axes", 3, "axes") or list(range(len(starts)))
    steps = imp.ints({}, "", 4, "steps") or [1] * len(starts)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        d = norm_dim(axis, x.type.rank)
        n = x.shape[d]
        r = slice_range(start, end, step, n)
        if len(r) == 0:
            raise UsageError(f"the slice of axis {axis} is empty; tensorlang does not compute empty tensors")
        if r.step < 0:
            x = imp.emit1("flip", [x], {"dims": [d]})
            r = range(n - 1 - r[0], n - 1 - r[-1] + 1, -r.step)
        if (r[0], len(r), r.step) != (0, n, 1):
            x = imp.emit1("slice.Tensor", [x], {"dim": d, "start": r[0], "end": r[-1] + 1, "step": r.step})
    return [x]


@_op("Gather")
def _gather(imp, node, attrs):
    x = imp.input(0)
    idx = imp.const(node.input[1])
    axis = norm_dim(attrs.get("axis", 0), x.type.rank)
    n = x.shape[axis]
    if idx is None:
        raise UsageError(f"indices computed at run time are not supported; {aten_hint('index_select')}")
    flat = [int(i) + n if i < 0 else int(i) for i in idx.reshape(-1)]
    if any(not 0 <= i < n for i in flat):
        raise UsageError(f"indices {idx.reshape(-1).tolist()} are out of range for axis {axis} of size {n}")
    if idx.ndim == 0:
        return [imp.emit1("select.int", [x], {"dim": axis, "index": flat[0]})]
    step = flat[1] - flat[0] if len(flat) > 1 else 1
    if step < 1 or flat != list(range(flat[0], flat[0] + step * len(flat), step)):
        raise UsageError(f"indices {flat} are not an increasing arithmetic progression, and gathers of other indices "
                         f"are not supported; {aten_hint('index_select')}")
    y = imp.emit1("slice.Tensor", [x], {"dim": axis, "start": flat[0], "end": flat[-1] + 1, "step": step})
    return [imp.view(y, [*x.shape[:axis], *idx.shape, *x.shape[axis + 1:]])]


@_op("Expand")
def _expand(imp, node, attrs):
    x = imp.input(0)
    shape = broadcast_shapes(x.shape, tuple(imp.ints({}, "", 1, "shape")))
    return [x if shape == x.shape else imp.emit1("expand", [x], {"size": list(shape), "implicit": False})]


@_op("Tile")
def _tile(imp, node, attrs):
    return [imp.emit1("repeat", [imp.input(0)], {"repeats": imp.ints({}, "", 1, "repeats")})]


@_op("Pad")
def _pad(imp, node, attrs):
    x = imp.input(0)
    mode = attrs.get("mode", "constant")
    if mode != "constant":
        raise UsageError(f"mode {mode!r} is not supported, only 'constant'"
                         + (f"; {aten_hint(_PAD_ATEN[mode])}" if mode in _PAD_ATEN else ""))
    pads = imp.ints(attrs, "pads", 1, "pads")
    value = attrs.get("value", imp.scalar(2, "constant_value") or 0.0)
    axes = imp.ints({}, "", 3, "axes")
    rank = x.type.rank
    axes = [norm_dim(a, rank) for a in axes] if axes is not None else list(range(rank))
    begins, ends = [0] * rank, [0] * rank
    for j, d in enumerate(axes):
        begins[d], ends[d] = pads[j], pads[j + len(axes)]
    return [_explicit_pad(imp, x, begins, ends, value)]


@_op("Resize")
def _resize(imp, node, attrs):
    x = imp.input(0)
    mode = attrs.get("mode", "nearest")
    how = (mode, attrs.get("coordinate_transformation_mode", "half_pixel"), attrs.get("nearest_mode",
                                                                                       "round_prefer_floor"))
    if how != ("nearest", "asymmetric", "floor") or x.type.rank != 4:
        raise UsageError(f"mode {mode!r} (coordinate_transformation_mode {how[1]!r}) on a rank-{x.type.rank} input "
                         "is not supported: tensorlang reads nearest upsampling of NCHW tensors by whole factors "
                         "(coordinate_transformation_mode 'asymmetric', nearest_mode 'floor') only; "
                         f"{aten_hint(_RESIZE_ATEN.get(mode, 'upsample_bilinear2d'))}")
    sizes = imp.ints({}, "", 3, "sizes")
    if sizes is None:
        scales = imp.const(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if scales is None:
            raise UsageError("its scales are computed at run time; tensorlang needs them constant")
        sizes = [int(np.floor(s * float(f))) for s, f in zip(x.shape, scales.reshape(-1))]
    if list(sizes[:2]) != list(x.shape[:2]) or sizes[2] % x.shape[2] or sizes[3] % x.shape[3]:
        raise UsageError(f"resizing {list(x.shape)} to {list(sizes)} is not upsampling of H and W by whole factors, "
                         "which is all tensorlang reads")
    return [imp.emit1("upsample_nearest2d.vec", [x], {"output_size": list(sizes[2:]), "scale_factors": None})]


# ---- the whole model --------------------------------------------------------------------------------------------

def graph_from_onnx(model_or_path, input_shapes: dict | None = None, name: str | None = None) -> Graph:
    """The tensorlang graph of an ONNX model (a path, bytes or an `onnx.ModelProto`); `input_shapes` maps input
    names to the sizes to compile for where the model's inputs have dynamic dims.

    Example::

        g = graph_from_onnx("net.onnx", input_shapes={"x": (1, 3, 224, 224)})
        print(g)
    """
    onnx = _onnx()
    model = load_onnx(model_or_path)
    where = os.fspath(model_or_path) if isinstance(model_or_path, (str, os.PathLike)) else "the ONNX model"
    if model.functions:
        model = onnx.inliner.inline_local_functions(model)
    initializers = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if input_shapes:
        model = _with_input_shapes(onnx, model, dict(input_shapes), inputs, where)
        inputs = [i for i in model.graph.input if i.name not in initializers]
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception as e:
        raise UsageError(f"{where}: ONNX's shape inference fails: {_first_line(e)}") from None
    imp = _Importer(onnx, inferred, name or re.sub(r"\W", "_", model.graph.name) or "model")
    for vi in [*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input]:
        dims = _static_shape(vi.type)
        if vi.type.HasField("tensor_type") and dims is not None:
            imp.known[vi.name] = (vi.type.tensor_type.elem_type, dims)
    default = imp.opsets.get("")
    if default is not None and default < 7:
        raise UsageError(f"{where} uses opset {default}; tensorlang reads opset 7 and later (convert it with "
                         "onnx.version_converter.convert_version)")
    for t in inferred.graph.initializer:
        imp.env[t.name] = onnx.numpy_helper.to_array(t)
    for i in inputs:
        if not i.type.HasField("tensor_type"):
            raise UsageError(f"{where}: input {i.name!r} is not a tensor")
        elem = i.type.tensor_type.elem_type
        dims = _static_shape(i.type)
        if elem not in _ELEM:
            raise UsageError(f"{where}: input {i.name!r} has element type "
                             f"{onnx.TensorProto.DataType.Name(elem)}; tensorlang takes float32, float64, "
                             "int32, int64, bool, uint8, int8 and int16")
        if dims is None or any(not isinstance(d, int) or d <= 0 for d in dims):
            shown = "unknown" if dims is None else _dims_text(dims)
            raise UsageError(f"{where}: input {i.name!r} has shape {shown}, with dims not fixed; tensorlang "
                             f"compiles for static shapes: pass input_shapes={{{i.name!r}: (...)}}")
        imp.env[i.name] = imp.g.add_input(i.name, TensorType(tuple(cast(list[int], dims)), _ELEM[elem]))
    imp.used = {i for n in inferred.graph.node for i in n.input} | {o.name for o in inferred.graph.output}
    for index, node in enumerate(inferred.graph.node):
        imp.run_node(index, node)
    imp.check_supported()
    outs = []
    for o in inferred.graph.output:
        v = imp.env.get(o.name)
        if v is None:
            raise UsageError(f"{where}: output {o.name!r} is not computed by any node")
        outs.append(v if isinstance(v, Value) else imp.g.add_constant(o.name, v))
    imp.g.outputs = outs
    return imp.g


def from_onnx(model_or_path, *, input_shapes: dict | None = None, **options):
    """Compile an ONNX model (a path, bytes or an `onnx.ModelProto`) into a `tl.Model`: the inputs by position
    in the model's order (initializers are constants, not inputs), one output as an array, several as a tuple.
    `input_shapes` fixes dynamic input dims; `options` (name, print_passes, skip, pass_options, ...) go to
    `tensorlang.graph.compile_graph`.

    Example::

        m = tl.from_onnx("net.onnx")
        y = m(x)                           # as onnxruntime.InferenceSession("net.onnx").run(None, {"x": x})[0]
    """
    from ..graph import compile_graph
    name = options.pop("name", None)
    if name is None and isinstance(model_or_path, (str, os.PathLike)):
        name = _file_stem(model_or_path)
    return compile_graph(graph_from_onnx(model_or_path, input_shapes, name), **options)


def model_from_onnx(path, **options):
    """A `tl.Model` compiled from an `.onnx` file, named after the file (as `model_from_pt2` for `.pt2` files);
    `options` go to `from_onnx`.

    Example::

        m = model_from_onnx("resnet18.onnx", print_passes=True)
    """
    return from_onnx(path, **options)


def _file_stem(path) -> str:
    return re.sub(r"\W", "_", os.path.splitext(os.path.basename(os.fspath(path)))[0]) or "model"
