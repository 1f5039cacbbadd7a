"""PyTorch models into tensorlang: `torch.export`, `.pt2` files and the `torch.compile` backend.

This is the only module of tensorlang that imports torch. It turns an ExportedProgram, decomposed to core ATen
(`run_decompositions()`), into a `tensorlang.graph.Graph`: parameters, buffers and lifted constants become numpy
constants, each ATen call a node whose tensor operands are values and whose other arguments (bound by the op's
schema, defaults filled in) are attrs, and the node keeps the line of the user's Python it came from (from the
stack trace torch.export records). The inputs and outputs keep the module's structure (a list of tensors in, a
tuple out). An op tensorlang does not support is an error that names it, the node and the user's line, and lists
the supported ops; nothing falls back to torch.

Example::

    import torch, tensorlang as tl
    m = tl.from_torch(net.eval(), (torch.randn(1, 1, 28, 28),))    # a tl.Model
    y = m(x.numpy())
    opt = torch.compile(net, backend="tensorlang")                   # the same compiler behind torch.compile
"""
from __future__ import annotations

import os
import re
import threading
import warnings
from typing import cast

import numpy as np
import torch
import torch.fx
import torch.utils._pytree as pytree

from ..errors import UsageError
from ..graph import ops
from ..graph.ir import Graph, TensorType, Value

_DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.int32: "i32", torch.int64: "i64", torch.bool: "bool",
           torch.uint8: "u8", torch.int8: "i8", torch.int16: "i16"}
_TORCH_DIR = os.path.dirname(torch.__file__)
_UNSUPPORTED = object()  # the value of an unsupported node: its users are skipped, the node is reported
_SKIP = {"_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range_for_size", "_assert_async"}
#: ops tensorlang lowers itself, kept out of torch's decompositions (roll's is a gather by index_select; nearest and
#: bicubic upsampling's are index.Tensor gathers with their index arithmetic in int64)
_KEEP = ("roll.default", "upsample_nearest2d.default", "upsample_bicubic2d.vec")


def decompositions(table):
    """`table` (torch's decomposition table) without the ops tensorlang lowers itself (`_KEEP`).

    >>> from torch._decomp import core_aten_decompositions
    >>> torch.ops.aten.roll.default in decompositions(core_aten_decompositions())
    False
    """
    for name in _KEEP:
        packet, overload = name.split(".")
        op = getattr(getattr(torch.ops.aten, packet), overload)
        if op in table:
            table.pop(op)
    return table


def dtype_name(dtype) -> str:
    """The graph dtype of a torch dtype, or UsageError.

    >>> dtype_name(torch.float32)
    'f32'
    """
    try:
        return _DTYPES[dtype]
    except KeyError:
        raise UsageError(f"tensors of dtype {dtype} are not supported; tensorlang models compute with "
                         f"{', '.join(str(d) for d in _DTYPES)}") from None


def user_line(node: torch.fx.Node) -> str:
    """'file.py:LINE: code' for the user's Python that made `node` (the innermost frame outside torch), or ''.

    >>> user_line(torch.fx.Graph().placeholder("x"))
    ''
    """
    trace = node.meta.get("stack_trace") or ""
    frames = re.findall(r'File "([^"]+)", line (\d+), in [^\n]*\n\s*([^\n]*)', trace)
    for path, line, code in reversed(frames):
        if not os.path.abspath(path).startswith(_TORCH_DIR):
            return f"{os.path.basename(path)}:{line}: {code.strip()}"
    return ""


def _attr(value):
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_attr(v) for v in value]
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise UsageError("dynamic shapes are not supported: export with static shapes (no dynamic_shapes=)")
    if isinstance(value, float) and value != value:
        raise UsageError("a NaN constant argument is not supported")
    return value


def _is_tensor_type(arg_type) -> bool:
    return "Tensor" in str(arg_type)


def _op_name(target) -> str | None:
    if not isinstance(target, torch._ops.OpOverload):
        return None
    packet = target._schema.name.split("::")[-1]
    overload = target._overloadname
    full = f"{packet}.{overload}"
    if full in ops.REGISTRY:
        return full
    if overload == "default" and packet in ops.REGISTRY:
        return packet
    return full if overload != "default" else packet


def _numpy(t: torch.Tensor) -> np.ndarray:
    t = t.detach()
    dtype_name(t.dtype)
    if t.is_quantized or t.layout != torch.strided:
        raise UsageError(f"a {t.layout} tensor constant is not supported")
    return np.array(t.cpu().resolve_conj().resolve_neg().numpy(), order="C", copy=True)  # a 0-d tensor stays 0-d


def _tree_spec(spec, leaf_kinds: list) -> dict:
    """Our JSON spec from a torch TreeSpec; `leaf_kinds` (consumed in order) gives each leaf's spec."""
    if spec.is_leaf():
        return leaf_kinds.pop(0)
    kids = [_tree_spec(c, leaf_kinds) for c in spec.children()]
    if spec.type in (tuple, list):
        return {"kind": "tuple" if spec.type is tuple else "list", "items": kids}
    if spec.type is dict:
        return {"kind": "dict", "keys": list(spec.context), "items": kids}
    if spec.type is type(None):
        return {"kind": "const", "value": None}
    # namedtuples and other containers: plain tuples of their leaves
    return {"kind": "tuple", "items": kids}


class _Importer:
    def __init__(self, name: str):
        self.g = Graph(name)
        self.values: dict[torch.fx.Node, object] = {}
        self.unsupported: dict[str, list[str]] = {}

    def constant(self, name: str, tensor) -> Value:
        return self.g.add_constant(name, _numpy(tensor))

    def filled(self, node: torch.fx.Node, data: np.ndarray) -> Value:
        """The constant a creation op made; one that holds a single value (full_like, zeros_like: the decomposed
        attention's zeros) and that only elementwise ops read, broadcasting it, is that value as a 0-d constant,
        which kernels read as a number instead of a buffer."""
        flat = data.reshape(-1)
        if flat.size > 1 and (flat == flat[0]).all() and all(self._broadcasts(u, node) for u in node.users):
            data = flat[:1].reshape(())
        return self.g.add_constant(node.name, data)

    @staticmethod
    def _broadcasts(user: torch.fx.Node, node: torch.fx.Node) -> bool:
        """Whether `user` is an elementwise op whose output has the broadcast shape of its operands other than
        `node` (so that `node` as a 0-d value gives the same result)."""
        name = _op_name(user.target) if user.op == "call_function" else None
        opdef = ops.REGISTRY.get(name) if name is not None else None
        out = user.meta.get("val")
        others = [a.meta.get("val") for a in user.all_input_nodes if a is not node]
        if opdef is None or opdef.kind != "elementwise" or not isinstance(out, torch.Tensor) or \
                not all(isinstance(t, torch.Tensor) for t in others):
            return False
        tensors = cast(list[torch.Tensor], others)  # all checked above
        return tuple(torch.broadcast_shapes(*(t.shape for t in tensors))) == tuple(out.shape)

    def call(self, node: torch.fx.Node) -> None:
        import operator
        if not node.users:  # dead (the graph is functional): as torch's empty() placeholders of unused outputs
            return
        if node.target is operator.getitem:
            src, index = node.args
            assert isinstance(src, torch.fx.Node) and isinstance(index, int)  # fx's getitem: a node's output k
            base = self.values[src]
            self.values[node] = base[index] if isinstance(base, (list, tuple)) else base
            return
        name = _op_name(node.target)
        if name is not None and name.split(".")[0] in _SKIP:
            return
        self.values[node] = _UNSUPPORTED
        if any(self.values.get(a) is _UNSUPPORTED for a in node.all_input_nodes):
            return  # its operand is unsupported, and reported
        opdef = ops.REGISTRY.get(name) if name is not None else None
        if name is None or opdef is None or opdef.family == "internal":
            label = f"aten.{name}" if name is not None else str(node.target)
            self.unsupported.setdefault(label, []).append(self._where(node))
            return
        schema = cast(torch._ops.OpOverload, node.target)._schema  # _op_name named it: an OpOverload
        bound = self._bind(node, schema)
        inputs, input_names, attrs = [], [], {}
        for arg in schema.arguments:
            value = bound[arg.name]
            if _is_tensor_type(arg.type):
                if isinstance(value, (list, tuple)):  # Tensor[] (cat's tensors), Tensor?[] (index's indices)
                    for k, v in enumerate(value):
                        inputs.append(None if v is None else self._value(v))
                        input_names.append(f"{arg.name}.{k}")
                    continue
                if isinstance(value, torch.fx.Node):
                    inputs.append(self._value(value))
                else:
                    inputs.append(None)
                    if value is not None:
                        attrs[arg.name] = _attr(value)
                input_names.append(arg.name)
            else:
                attrs[arg.name] = _attr(value)
        if name == "as_strided":  # it addresses its input's storage: how torch lays the input out there
            src = node.args[0]
            assert isinstance(src, torch.fx.Node)  # its input is a Tensor: a node of the graph
            layout = src.meta.get("val")
            if isinstance(layout, torch.Tensor):
                attrs["input_stride"] = [int(s) for s in layout.stride()]
                attrs["input_storage_offset"] = int(layout.storage_offset())
        source = user_line(node)
        vals = node.meta.get("val")
        flat = list(vals) if isinstance(vals, (list, tuple)) else [vals]
        try:
            probe = self.g.make_node(name, inputs, attrs, [], name=node.name, source=source,
                                     input_names=tuple(input_names))
            ops.check_small_ints(probe)
            types = opdef.infer(probe)
        except UsageError as e:  # named where the op's own message does not name the node yet
            where = f" (node {node.name}{' at ' + source if source else ''})"
            raise UsageError(str(e) if f"(node {node.name}" in str(e) else f"{e}{where}") from None
        for t, v in zip(types, flat):
            if isinstance(v, torch.Tensor):
                theirs = TensorType(tuple(int(s) for s in v.shape), dtype_name(v.dtype))
                if theirs != t:
                    raise UsageError(f"aten.{name} (node {node.name}{' at ' + source if source else ''}): tensorlang "
                                     f"infers {t} where torch gives {theirs}; this op's arguments are not supported")
        if opdef.kind == "creation":
            made = self.g.make_node(name, inputs, attrs, types, name=node.name)
            assert opdef.evaluate is not None  # a creation op is folded, so it evaluates
            consts = opdef.evaluate(made, [None] * len(inputs))
            outs = [self.filled(node, np.asarray(c)) for c in consts]
        else:
            n = self.g.add_node(name, inputs, attrs, types, name=node.name, source=source,
                                input_names=tuple(input_names))
            ops.check_small_ints(n)  # (its outputs: the probe had none)
            outs = n.outputs
        self.values[node] = outs[0] if len(outs) == 1 and not isinstance(vals, (list, tuple)) else outs

    def _value(self, node) -> Value:
        v = self.values.get(node)
        if not isinstance(v, Value):
            raise UsageError(f"node {node} is used as a tensor but is not one tensorlang supports")
        return v

    @staticmethod
    def _bind(node, schema) -> dict:
        bound: dict = {}
        args = list(node.args)
        for i, arg in enumerate(schema.arguments):
            if i < len(args) and not arg.kwarg_only:
                bound[arg.name] = args[i]
            elif arg.name in node.kwargs:
                bound[arg.name] = node.kwargs[arg.name]
            elif arg.has_default_value():
                bound[arg.name] = arg.default_value
            else:
                bound[arg.name] = None
        return bound

    @staticmethod
    def _where(node) -> str:
        line = user_line(node)
        return f"node {node.name}" + (f" at {line}" if line else "")

    def check_supported(self) -> None:
        if not self.unsupported:
            return
        parts = []
        for op, places in self.unsupported.items():
            more = f" (and {len(places) - 2} more)" if len(places) > 2 else ""
            parts.append(f"{op} ({'; '.join(places[:2])}{more})")
        raise UsageError(f"unsupported op{'s' if len(parts) > 1 else ''}: {'; '.join(parts)}. Supported ops: "
                         f"{', '.join(ops.supported())}")


def graph_from_exported(ep, name: str = "model", decompose: bool = True) -> Graph:
    """The tensorlang graph of an ExportedProgram (decomposed to core ATen first unless `decompose` is False).

    Example::

        ep = torch.export.export(net.eval(), (x,))
        g = graph_from_exported(ep)      # print(g): one line per node with shapes
    """
    from torch.export.graph_signature import InputKind, OutputKind
    if decompose:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ep = ep.run_decompositions(decompositions(torch.export.default_decompositions()))
    sig = ep.graph_signature
    imp = _Importer(name)
    specs = {s.arg.name: s for s in sig.input_specs}
    leaf_kinds: list[dict] = []
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        spec = specs.get(node.name)
        if spec is None:
            raise UsageError(f"input {node.name} is not described by the exported program's signature")
        if spec.kind == InputKind.USER_INPUT:
            val = node.meta.get("val")
            if isinstance(val, torch.Tensor):
                v = imp.g.add_input(node.name, TensorType(tuple(int(s) for s in val.shape), dtype_name(val.dtype)))
                imp.values[node] = v
                leaf_kinds.append({"kind": "leaf"})
            else:
                value = getattr(spec.arg, "value", val)
                imp.values[node] = value
                leaf_kinds.append({"kind": "const", "value": value if isinstance(value, (int, float, bool, str,
                                                                                         type(None))) else None})
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            t = ep.state_dict[spec.target] if spec.target in ep.state_dict else ep.constants[spec.target]
            imp.values[node] = imp.constant(spec.target, t)
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            imp.values[node] = imp.constant(spec.target, ep.constants[spec.target])
        else:
            raise UsageError(f"input {node.name} of kind {spec.kind.name} is not supported")
    for node in ep.graph.nodes:
        if node.op == "call_function":
            imp.call(node)
        elif node.op == "output":
            out_args = node.args[0]
    imp.check_supported()
    outs = []
    for spec, arg in zip(sig.output_specs, out_args):
        if spec.kind != OutputKind.USER_OUTPUT:
            raise UsageError(f"the model changes its buffer {spec.target} as it runs ({spec.kind.name}); "
                             "export it in eval mode (model.eval()) and without in-place updates of buffers")
        out = imp.values.get(arg) if isinstance(arg, torch.fx.Node) else None
        if not isinstance(out, Value):
            raise UsageError(f"output {arg} is not a tensor tensorlang computes")
        outs.append(out)
    imp.g.outputs = outs
    if ep.call_spec.in_spec is not None:
        imp.g.input_spec = {**_tree_spec(ep.call_spec.in_spec, leaf_kinds), "call": True}  # (args, kwargs)
    imp.g.output_spec = _tree_spec(ep.call_spec.out_spec, [{"kind": "leaf"}] * len(outs)) \
        if ep.call_spec.out_spec is not None else None
    return imp.g


def export_program(module, example_inputs, example_kwargs=None):
    """torch.export.export of `module` in eval mode on `example_inputs` (a tuple), with errors as UsageError.

    Example::

        ep = export_program(net, (torch.randn(1, 3, 224, 224),))
    """
    if not isinstance(module, torch.nn.Module):
        raise UsageError(f"from_torch takes a torch.nn.Module, not {type(module).__name__}")
    if not isinstance(example_inputs, tuple):
        example_inputs = (example_inputs,)
    training = module.training
    if training:
        warnings.warn("from_torch: the module is in training mode; compiling it as in eval mode (dropout off, batch "
                      "norm with its running statistics)", stacklevel=3)
        module.eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.export.export(module, example_inputs, example_kwargs)
    except Exception as e:  # torch's own errors: say where they come from
        raise UsageError(f"torch.export could not export the module: {type(e).__name__}: "
                         f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}") from e
    finally:
        module.train(training)


def from_torch(module, example_inputs, example_kwargs=None, **options):
    """Compile a torch.nn.Module for `example_inputs` (their shapes and dtypes are fixed): torch.export, core
    ATen, the graph passes, kernels. Returns a `tl.Model`; `options` go to `tensorlang.graph.compile_graph`.

    Example::

        m = tl.from_torch(net.eval(), (torch.randn(1, 1, 28, 28),))
        probs = m(np.random.rand(1, 1, 28, 28).astype(np.float32))
    """
    ep = export_program(module, example_inputs, example_kwargs)
    return from_exported(ep, name=options.pop("name", type(module).__name__), **options)


def from_exported(ep, name: str = "model", **options):
    """Compile a torch.export ExportedProgram (as `torch.export.export` or `torch.export.load` give it) into a
    `tl.Model`; one compiled before (the same program, weights and options) comes from the model cache
    (`tensorlang.frontend.torch_cache`).

    Example::

        m = tl.from_exported(torch.export.load("net.pt2"))
    """
    from .torch_cache import compile_exported
    if not isinstance(ep, torch.export.ExportedProgram):
        raise UsageError(f"from_exported takes a torch.export.ExportedProgram, not {type(ep).__name__}")
    return compile_exported(ep, name, options, lambda: graph_from_exported(ep, name=name))


def load_pt2(path) -> torch.export.ExportedProgram:
    """Read a `.pt2` file written by `torch.export.save`, or UsageError naming the file.

    Example::

        ep = load_pt2("net.pt2")
    """
    import logging
    import zipfile
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):
        raise UsageError(f"{path} is not a model saved by torch.export.save (not a zip archive)")
    logger = logging.getLogger("torch.export")
    level = logger.level
    try:
        logger.setLevel(logging.CRITICAL)  # torch logs its own traceback before raising
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.export.load(path)
    except Exception as e:
        raise UsageError(f"{path} is not a model saved by torch.export.save ({type(e).__name__}: "
                         f"{str(e).strip().splitlines()[0] if str(e).strip() else 'unreadable'})") from None
    finally:
        logger.setLevel(level)


def model_from_pt2(path, **options):
    """A `tl.Model` compiled from a `.pt2` file (see `load_pt2`), named after the file.

    Example::

        m = model_from_pt2("net.pt2", print_passes=True)
    """
    name = re.sub(r"\W", "_", os.path.splitext(os.path.basename(os.fspath(path)))[0]) or "model"
    return from_exported(load_pt2(path), name=options.pop("name", name), **options)


def _check_inference(traced: torch.fx.GraphModule, input_names: list[str]) -> None:
    """UsageError where a traced ATen graph does what only a module in training mode does (batch norm updating
    its statistics, dropout's random numbers) or writes into its inputs, naming the op, node and user's line."""
    training: dict[str, str] = {}
    writes: list[str] = []
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    for node in traced.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        if _op_name(node.target) == "copy_" and node.args[0] in placeholders:  # functionalize's input writes
            k = placeholders.index(node.args[0])
            name = input_names[k] if k < len(input_names) else node.args[0].name
            source = node.args[1] if isinstance(node.args[1], torch.fx.Node) else node
            writes.append(f"input {name} ({_Importer._where(source)})")
            continue
        bound = _Importer._bind(node, node.target._schema)
        if bound.get("training") is True and isinstance(bound.get("running_mean"), torch.fx.Node):
            kind = "normalises with the batch's statistics and updates the running ones (batch norm in training)"
        elif torch.Tag.nondeterministic_seeded in node.target.tags:
            kind = "draws random numbers (dropout in training)"
        else:
            continue
        training.setdefault(kind, f"aten.{_op_name(node.target)} ({_Importer._where(node)}) {kind}")
    if training:
        raise UsageError(f"the module runs in training mode: {'; '.join(training.values())}. Call .eval() on the "
                         "module: tensorlang compiles inference graphs")
    if writes:
        raise UsageError(f"the graph writes into {'; '.join(writes)} in place; tensorlang compiles inference graphs "
                         "without side effects")


def _as_exported(traced: torch.fx.GraphModule) -> None:
    """Ops that torch.compile's tracing gives in another form than torch.export, rewritten as torch.export gives
    them: a batch norm by the batch's own statistics without running ones (instance norm: native_batch_norm with
    training=True), and an in-place restride (as_strided_) of a value nothing else reads."""
    aten = torch.ops.aten
    for node in traced.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target is aten.native_batch_norm.default:
            bound = _Importer._bind(node, node.target._schema)
            if bound["training"] is True and bound["running_mean"] is None and bound["running_var"] is None:
                node.target = aten._native_batch_norm_legit.no_stats
                node.args = (bound["input"], bound["weight"], bound["bias"], True, bound["momentum"], bound["eps"])
                node.kwargs = {}
        elif node.target is aten.as_strided_.default and len(node.args[0].users) == 1:
            node.target = aten.as_strided.default


def graph_from_fx(gm, example_inputs, name: str = "compiled", frozen=(), decompose: bool = True, bound=()):
    """A graph from a torch.compile FX graph, traced to core ATen with torch's decompositions (functionalised) on
    the example inputs, which fix every shape and every int input; returns (graph, the positions of the example
    inputs that are its inputs, `rebuild`: a function from the graph's output tensors, in order, to the FX graph's
    output structure, its int outputs filled in). Positions listed in `frozen` (parameters) become constants
    holding the example inputs' values; positions in `bound` (dynamo's Python numbers passed as 0-d tensors, which
    the graph may read with `.item()`) are compiled in before tracing. `gm` is a GraphModule or any function of
    tensors; `decompose=False` keeps the ATen ops it calls as they are. A graph that only a module in training mode
    gives (batch norm updating its statistics, dropout) is a UsageError that says to call `.eval()`, one that
    writes into its inputs (buffers included) a UsageError too.

    Example::

        g, positions, rebuild = graph_from_fx(gm, example_inputs)
    """
    from torch._decomp import core_aten_decompositions
    from torch.fx import traceback as fx_traceback
    from torch.fx.experimental.proxy_tensor import make_fx
    table = decompositions(core_aten_decompositions()) if decompose else {}
    run = torch.fx.Interpreter(gm).run if isinstance(gm, torch.fx.GraphModule) else gm  # keeps the user's lines

    def fn(*args):  # the `bound` inputs are not traced: constants, as the example inputs hold them
        it = iter(args)
        return run(*(x if k in bound else next(it) for k, x in enumerate(example_inputs)))
    with warnings.catch_warnings(), torch.no_grad(), fx_traceback.preserve_node_meta():
        warnings.simplefilter("ignore")
        traced = make_fx(torch.func.functionalize(fn, remove="mutations"), decomposition_table=table,
                         tracing_mode="real")(*(x for k, x in enumerate(example_inputs) if k not in bound))
    _check_inference(traced, [n.name for k, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")
                              if k not in bound] if isinstance(gm, torch.fx.GraphModule) else [])
    if any(n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable
           for n in traced.graph.nodes):  # a decomposition that writes in place (rms_norm's add_): functionalise it
        with warnings.catch_warnings(), torch.no_grad(), fx_traceback.preserve_node_meta():
            warnings.simplefilter("ignore")
            traced = make_fx(torch.func.functionalize(torch.fx.Interpreter(traced).run, remove="mutations"),
                             tracing_mode="real")(*(x for k, x in enumerate(example_inputs) if k not in bound))
    _as_exported(traced)
    imp = _Importer(name)
    placeholders = iter(n for n in traced.graph.nodes if n.op == "placeholder")
    leaves = []
    for k, x in enumerate(example_inputs):
        if k in bound:
            continue
        node = next(placeholders)
        if not isinstance(x, torch.Tensor):
            imp.values[node] = x
            continue
        if k in frozen:
            imp.values[node] = imp.constant(node.name, x)
            continue
        imp.values[node] = imp.g.add_input(node.name, TensorType(tuple(x.shape), dtype_name(x.dtype)))
        leaves.append(k)
    out_args = None
    for node in traced.graph.nodes:
        if node.op == "call_function":
            imp.call(node)
        elif node.op == "get_attr":
            imp.values[node] = imp.constant(node.target, getattr(traced, node.target))
        elif node.op == "output":
            out_args = node.args[0]
    imp.check_supported()
    flat, spec = pytree.tree_flatten(out_args)
    outs, kinds = [], []
    for a in flat:
        if isinstance(a, (bool, int, float)):  # a size the example inputs fix (dynamo's SymInt outputs)
            kinds.append({"kind": "const", "value": a})
            continue
        v = imp.values.get(a) if isinstance(a, torch.fx.Node) else None
        if not isinstance(v, Value):
            raise UsageError(f"output {a} is not a tensor tensorlang computes")
        outs.append(v)
        kinds.append({"kind": "leaf"})
    imp.g.outputs = outs
    imp.g.input_spec = {"kind": "list", "items": [{"kind": "leaf"} for _ in leaves]}
    imp.g.output_spec = _tree_spec(spec, list(kinds))

    def rebuild(tensors):
        it = iter(tensors)
        return pytree.tree_unflatten([next(it) if k["kind"] == "leaf" else k["value"] for k in kinds], spec)
    return imp.g, leaves, rebuild


class _InferenceOnly(torch.autograd.Function):
    """The outputs of a compiled graph where torch would track gradients: they require grad as torch's would,
    and backward() through them is a UsageError (tensorlang computes no gradients)."""

    @staticmethod
    def forward(ctx, compute, *args):
        return tuple(compute(args))

    @staticmethod
    def backward(ctx, *grads):
        raise UsageError('backward() through a torch.compile(backend="tensorlang") graph: training is not '
                         "supported, tensorlang compiles inference graphs and computes no gradients; train with "
                         "torch eager or another backend, and run inference under torch.no_grad()")


def _bits(t: torch.Tensor) -> torch.Tensor:
    """`t` read as integers of its element size, so that equal bits compare equal (NaN, -0.0)."""
    return t.detach().view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _same_weight(live: torch.Tensor, snapshot: torch.Tensor) -> bool:
    return (live.shape == snapshot.shape and live.dtype == snapshot.dtype
            and torch.equal(_bits(live), _bits(snapshot)))


def _concrete(example_inputs) -> list | None:
    """The example inputs with SymInts replaced by the sizes they stand for here, or None where one is symbolic
    with no such size (a FakeTensor, a SymInt without a hint): then the first call's inputs are compiled."""
    from torch._subclasses.fake_tensor import is_fake
    out = []
    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            if is_fake(x) or not all(isinstance(s, int) for s in x.shape):
                return None
        elif isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            if not x.node.has_hint():
                return None
            x = x.node.hint
        out.append(x)
    return out


def _signature(args, frozen) -> tuple:
    """What a compiled model is specialised to: the shape and dtype of each tensor input, the value of the rest."""
    key: list[tuple] = []
    for k, a in enumerate(args):
        if k in frozen:
            continue
        if isinstance(a, torch.Tensor):
            key.append((tuple(a.shape), a.dtype))
        elif isinstance(a, (bool, int, float)):
            key.append((type(a), a))
        else:
            raise UsageError(f'torch.compile(backend="tensorlang"): graph input [{k}] is a {type(a).__name__}; '
                             "tensorlang specialises graphs to tensors and numbers only")
    return tuple(key)


def dynamo_backend(gm: torch.fx.GraphModule, example_inputs):
    """The `torch.compile(model, backend="tensorlang")` backend (registered through the `torch_dynamo_backends`
    entry point): compiles each graph torch.compile captures into a `tl.Model` and runs it on numpy views of the
    tensors. A graph dynamo makes dynamic (symbolic sizes, as after a third batch size) gets one model per
    signature of concrete input shapes and ints, compiled on first use and kept. Parameters and buffers are frozen
    into constants (as inductor's freezing), so that batch norms fold into convolutions; each call compares them
    bit for bit with the values compiled in (writes through `.data` change neither `_version` nor the data
    pointer, so only the contents tell) and compiles again where one changed. A module in training mode is a
    UsageError; where torch would track gradients the outputs require grad and backward() through them is a
    UsageError. Graph breaks stay torch's business.

    Example::

        fast = torch.compile(net.eval(), backend="tensorlang")
        y = fast(x)
    """
    from ..graph import compile_graph
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"] if hasattr(gm, "graph") else []
    names = [n.name for n in placeholders]
    # Python numbers dynamo passes as 0-d tensors (a float attribute it saw change between modules, as a dropout's
    # p): compiled in as the parameters are, and bound before tracing, so that `.item()` on them traces
    scalars = tuple(k for k, n in enumerate(placeholders)
                    if getattr(n.meta.get("grapharg"), "pass_arg_as_tensor", False))
    frozen = tuple(k for k, x in enumerate(example_inputs) if isinstance(x, torch.nn.Parameter) or
                   (k < len(names) and "_buffers_" in names[k]) or k in scalars)  # parameters and buffers (BN)
    models: dict[tuple, tuple] = {}  # signature -> (model, positions, rebuild)
    weights: dict[int, torch.Tensor] = {}  # the frozen inputs' values that `models` hold
    lock = threading.Lock()  # calls from several threads: one compares, compiles and updates at a time

    def model_for(args):
        with lock:
            return _model_for(args)

    def _model_for(args):
        if len(weights) != len(frozen) or any(not _same_weight(args[k], w) for k, w in weights.items()):
            models.clear()  # weights changed: every signature compiles again
            weights.clear()
            weights.update({k: args[k].detach().clone() for k in frozen})
        key = _signature(args, frozen)
        if key not in models:
            # traced on copies: tracing runs the graph, and one that writes into its inputs is refused after
            traced_on = [weights[k] if k in weights else a.detach().clone() if isinstance(a, torch.Tensor) else a
                         for k, a in enumerate(args)]
            graph, positions, rebuild = graph_from_fx(gm, traced_on, frozen=frozen, bound=scalars)
            models[key] = compile_graph(graph), positions, rebuild
        return models[key]

    example = _concrete(example_inputs)
    if example is not None:
        model_for(example)  # errors (unsupported ops, training mode) surface as torch.compile compiles

    def run(*args):
        model, positions, rebuild = model_for(args)

        def compute(args):
            outs = model.run_flat([args[k].detach().contiguous().numpy() for k in positions])
            return [torch.from_numpy(o) for o in outs]
        grad = torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        if grad and model.graph.outputs:
            return rebuild(_InferenceOnly.apply(compute, *args))
        return rebuild(compute(args))
    return run
