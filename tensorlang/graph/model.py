"""`tl.Model`: a compiled graph that runs on numpy arrays, with one kernel per node and one arena per call.

A model never imports torch: `tl.load_model` reads a saved one in a process without it. Calls check their inputs
as a `Kernel` does (count, numpy type, dtype, shape, C-contiguity, each named by its place in the model's input
structure) and are safe from several threads at once (each call takes an arena of its own from a pool).

>>> import numpy as np
>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("twice")
>>> x = g.add_input("x", TensorType((3,), "f32"))
>>> g.outputs = [g.add_node("mul.Scalar", [x, None], {"other": 2.0}, [TensorType((3,), "f32")]).outputs[0]]
>>> m = Model(g)
>>> m(np.arange(3, dtype=np.float32)).tolist()
[0.0, 2.0, 4.0]
"""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..errors import BuildError, UsageError
from . import ops
from .driver import compile_steps
from .ir import DTYPES, STORAGE, Graph, Node
from .kernels import CompiledKernel, compile_program
from .lowering import Program, lower_nodes
from .passes.memory_plan import MemoryPlan, is_alias, plan_memory
from .structure import flat_spec, flatten, leaf_count, leaf_paths, unflatten


@dataclass
class Step:
    """One kernel call of the model: the node, its program, its kernel and where each argument lives."""

    node: Node
    program: Program
    kernel: CompiledKernel
    args: list  # [(base index, byte offset)] for the program's inputs then outputs


def check_inputs(model: str, arrays: list, specs: list, paths: list[str]) -> list[np.ndarray]:
    """`arrays` checked as a Kernel checks its arguments, each named by its place in the input structure; `specs`
    are (name, dtype, shape). Returns the arrays as the kernels read them (bool as int32).

    >>> check_inputs("m", [np.zeros(2)], [("x", "f32", (2,))], ["[0]"])
    Traceback (most recent call last):
    ...
    tensorlang.errors.BuildError: m: input [0] (x) has dtype float64, expected float32; convert with .astype(np.float32)
    """
    if len(arrays) != len(specs):
        raise BuildError(f"{model}: expected {len(specs)} input array{'s' if len(specs) != 1 else ''}, "
                         f"got {len(arrays)}")
    out = []
    for a, (name, dtype, shape), path in zip(arrays, specs, paths):
        where = f"{model}: input {path} ({name})"
        if not isinstance(a, np.ndarray):
            raise BuildError(f"{where} must be a numpy array, got {type(a).__name__}")
        want = DTYPES[dtype]
        if a.dtype != want:
            raise BuildError(f"{where} has dtype {a.dtype}, expected {want}; convert with .astype(np.{want.name})")
        if a.shape != tuple(shape):
            raise BuildError(f"{where} has shape {a.shape}, expected {tuple(shape)} (the shapes the model was "
                             "compiled for)")
        if not a.flags.c_contiguous:
            raise BuildError(f"{where} is not C-contiguous; pass np.ascontiguousarray(...)")
        out.append(a.astype(np.int32) if dtype == "bool" else a)
    return out


def storage_array(data: np.ndarray) -> np.ndarray:
    """A constant as the kernels read it: contiguous, bool as int32.

    >>> storage_array(np.array([True, False])).dtype, storage_array(np.arange(3)).dtype
    (dtype('int32'), dtype('int64'))
    """
    data = np.asarray(data)
    if data.dtype == np.bool_:
        return np.ascontiguousarray(data, dtype=np.int32)
    return np.ascontiguousarray(data)


def _where(node: Node) -> str:
    """'node NAME (op)' (the nodes fused into it, gathers first) and the user's line, for errors raised as it runs."""
    members = [m for m in (node.body.nodes if node.body is not None else [node]) if ops.REGISTRY[m.op].kind != "view"]
    members.sort(key=lambda m: ops.REGISTRY[m.op].family != "index")
    what = ", ".join(f"{m.name} ({m.op})" for m in members[:3]) + (", ..." if len(members) > 3 else "")
    source = next((m.source for m in members if m.source), "")
    return f"node{'s' if len(members) > 1 else ''} {what}" + (f" at {source}" if source else "")


def tensor_names(program: Program) -> dict[str, str]:
    """{parameter of the program: the graph value it reads} ("in0": "embed_weight", ...).

    >>> from tensorlang.graph.ir import Graph, TensorType
    >>> g = Graph("m"); x = g.add_input("x", TensorType((2,), "f32"))
    >>> n = g.add_node("relu", [x], {}, [TensorType((2,), "f32")])
    >>> tensor_names(lower_nodes([n], n.outputs))
    {'in0': 'x'}
    """
    header = program.text.split("->", 1)[0]
    return dict(zip(re.findall(r"\b(in\d+):", header), (v.name for v in program.inputs)))


def index_error_message(model: str, where: str, names: dict[str, str], message: str) -> str:
    """A kernel's index error as the model's: the model and node first, the program's tensors named by value.

    >>> index_error_message("m", "node e", {"in0": "w"}, "k: index 9 is out of range for dimension 0 of in0 (size 4)")
    'm: node e: k: index 9 is out of range for dimension 0 of in0 = w (size 4)'
    """
    message = re.sub(r"\bof (in\d+) \(size", lambda m: f"of {m.group(1)} = {names.get(m.group(1), '?')} (size",
                     message)
    return f"{model}: {where}: {message}"


class Model:
    """A graph compiled for this CPU: call it with numpy arrays in the structure of the original module's inputs;
    it returns numpy arrays in the structure of its outputs.

    Attributes: `graph` (the optimised graph; `print(model.graph)`), `plan` (the memory plan), `steps` (one per
    kernel call), `passes` (what each graph pass changed). See `summary()`, `source(node)`, `tasks()`,
    `save(path)`, `export(dir)`.
    """

    def __init__(self, graph: Graph, passes: list | None = None, compile_seconds: float | None = None,
                 inplace: bool = True, model_bytes: int | None = None):
        t0 = time.perf_counter()
        self.graph = graph
        #: bytes of the imported model's intermediate tensors, one buffer each (the baseline of the arena)
        self.model_bytes = model_bytes
        self.passes = passes or []
        self.plan: MemoryPlan = plan_memory(graph, inplace=inplace)
        self.constants = [storage_array(c.constant_data) for c in graph.constants]
        # read once: `ndarray.ctypes.data` costs about a microsecond, and a model has a hundred constants or more
        self._constant_addresses = [c.ctypes.data for c in self.constants]
        if graph.input_spec is None:
            graph.input_spec = flat_spec(len(graph.inputs))
        spec = graph.input_spec
        self._input_paths = (leaf_paths(spec["items"][0]) + leaf_paths(spec["items"][1]) if spec.get("call")
                             else leaf_paths(spec))
        self.steps: list[Step] = []
        n_in, n_out = len(graph.inputs), len(graph.outputs)
        self._bases_layout = (n_in, n_out)
        used = {v.uid for n in graph.nodes for v in n.inputs if v is not None} | {v.uid for v in graph.outputs}
        for node in graph.nodes:
            if is_alias(node) or not any(v.uid in used for v in node.outputs):
                continue  # a view costs nothing; a node nobody reads (dead code left in) is not run
            if node.body is None:
                program = lower_nodes([node], [v for v in node.outputs if v.uid in used])
                outer = {}
            else:  # the body's own values stand for the fused node's operands and results
                wanted = [(i, o) for i, o in zip(node.body.outputs, node.outputs) if o.uid in used]
                program = lower_nodes(node.body.nodes, [i for i, _ in wanted])
                outer = {i.uid: o for i, o in zip(node.body.inputs, node.inputs)}
                outer.update({i.uid: o for i, o in wanted})
            kernel = compile_program(program.text)
            args = [self._slot(outer.get(v.uid, v)) for v in (*program.inputs, *program.outputs)]
            self.steps.append(Step(node, program, kernel, args))
        #: the steps as one machine-code function (`tensorlang.graph.driver`): one crossing from Python a call
        self._compiled_steps = compile_steps([(step.kernel, step.args) for step in self.steps])
        self._arenas: list[np.ndarray] = []
        self._arena_lock = threading.Lock()
        # set by compile_graph (a model loaded from a file has its passes' results baked in): the imported graph's
        # key, the pass options used and where they came from, the imported graph (JSON and constants)
        self.graph_key: str | None = None
        self.pass_options: dict | None = None
        self.pass_options_source: str | None = None
        self._source_graph: tuple | None = None
        self._source_fn = None
        #: whether the optimised graph came from the model cache (`tensorlang.graph.model_cache`)
        self.cached = False
        self.compile_seconds = (compile_seconds or 0.0) + time.perf_counter() - t0

    @property
    def source_graph(self) -> tuple | None:
        """The imported graph before the passes, as (graph JSON, {constant name: array}), for model tuning to
        compile again under other pass options; None for a model loaded from a file."""
        if self._source_graph is None and self._source_fn is not None:
            from . import snapshot
            self._source_graph, self._source_fn = snapshot(self._source_fn()), None
        return self._source_graph

    @source_graph.setter
    def source_graph(self, value: tuple | None) -> None:
        """Set the imported graph (graph JSON, constants) that `source_graph` gives."""
        self._source_graph, self._source_fn = value, None

    def source_graph_from(self, fn) -> None:
        """Make `source_graph` the graph `fn()` imports, imported the first time it is asked for (a model from the
        model cache skipped the import).

        Example::

            model.source_graph_from(lambda: graph_from_exported(ep))
        """
        self._source_graph, self._source_fn = None, fn

    def _slot(self, v) -> tuple[int, int]:
        loc = self.plan.locations[v.uid]
        n_in, n_out = self._bases_layout
        base = {"arena": 0, "input": 1 + loc.index, "output": 1 + n_in + loc.index,
                "const": 1 + n_in + n_out + loc.index}[loc.kind]
        return base, loc.offset

    # ---- calling ----
    def __call__(self, *args, **kwargs):
        """Run the model: the arguments as the original module took them (numpy arrays for its tensors)."""
        outs = self.run_flat(self._leaves(args, kwargs))
        if self.graph.output_spec is None:
            return outs[0] if len(outs) == 1 else tuple(outs)
        return unflatten(self.graph.output_spec, outs)

    def _leaves(self, args, kwargs) -> list:
        spec = self.graph.input_spec
        assert spec is not None  # set in __init__
        call = spec.get("call")  # torch.export's (args, kwargs)
        keywords = spec["items"][1]["keys"] if call else []
        unknown = [k for k in kwargs if k not in keywords]
        if unknown:
            n = leaf_count(spec["items"][0]) if call else len(self.graph.inputs)
            names = ", ".join(v.name for v in self.graph.inputs[:n])
            also = f"; its keyword inputs are {', '.join(keywords)}" if keywords else ""
            raise BuildError(f"{self.graph.name}: keyword input{'s' if len(unknown) > 1 else ''} "
                             f"{', '.join(unknown)} not taken: the model takes its inputs by position, in the order "
                             f"{names or '(none)'}{also}")
        if call:
            return flatten(spec["items"][0], tuple(args), "input") + flatten(spec["items"][1], kwargs, "input")
        return flatten(spec, list(args) if spec["kind"] == "list" else tuple(args), "input")

    def _check_inputs(self, arrays: list) -> list[np.ndarray]:
        g = self.graph
        return check_inputs(g.name, arrays, [(v.name, v.dtype, v.shape) for v in g.inputs], self._input_paths)

    def _bases(self, arena: np.ndarray, arrays: list, outs: list) -> list[int]:
        """Base addresses of every buffer a step's argument may be in: the arena (64-byte aligned), the inputs,
        the outputs, the constants."""
        base = arena.ctypes.data
        base += (-base) % 64
        return [base, *(a.ctypes.data for a in arrays), *(o.ctypes.data for o in outs), *self._constant_addresses]

    def _arena(self) -> np.ndarray:
        with self._arena_lock:
            if self._arenas:
                return self._arenas.pop()
        return np.empty(self.plan.arena_bytes + 64, np.uint8)

    def run_flat(self, arrays: list) -> list[np.ndarray]:
        """Run on the flat list of input arrays (in graph input order); returns the flat list of outputs."""
        g = self.graph
        arrays = self._check_inputs(list(arrays))
        outs = [np.empty(v.shape, DTYPES[STORAGE[v.dtype]] if v.dtype in STORAGE else DTYPES[v.dtype])
                for v in g.outputs]
        arena = self._arena()
        try:
            bases = self._bases(arena, arrays, outs)
            status, failed = self._compiled_steps.run(bases)
            if status:
                step = self.steps[failed]
                e = step.kernel.error(status)
                if isinstance(e, IndexError):  # name the node (and the user's line) whose kernel read out of range
                    e = type(e)(index_error_message(g.name, _where(step.node), tensor_names(step.program), str(e)))
                raise e
            for k in self.plan.copies:
                outs[k] = self._copy_out(g.outputs[k], bases, arrays, outs)
        finally:
            with self._arena_lock:
                self._arenas.append(arena)
        return [o.astype(np.bool_) if v.dtype == "bool" else o for o, v in zip(outs, g.outputs)]

    def _copy_out(self, v, bases, arrays, outs) -> np.ndarray:
        loc = self.plan.locations[v.uid]
        if loc.kind == "input":
            return arrays[loc.index].reshape(v.shape).copy()
        if loc.kind == "const":
            return self.constants[loc.index].reshape(v.shape).copy()
        if loc.kind == "output":
            return outs[loc.index].reshape(v.shape).copy()
        n = v.type.nbytes
        storage = DTYPES[STORAGE[v.dtype]]
        import ctypes
        buf = (ctypes.c_uint8 * n).from_address(bases[0] + loc.offset)
        return np.frombuffer(buf, dtype=storage).reshape(v.shape).copy()

    # ---- looking inside ----
    def node(self, name) -> Node:
        """The node called `name` (a fused node, or one inside a fused node's body), or UsageError."""
        if isinstance(name, Node):
            return name
        for n in self.graph.all_nodes():
            if n.name == name:
                return n
        raise UsageError(f"{self.graph.name} has no node {name!r}; nodes: "
                         f"{', '.join(n.name for n in self.graph.nodes)}")

    def step(self, node) -> Step:
        """The kernel call that computes `node` (a top-level node, or one fused into it)."""
        node = self.node(node)
        for s in self.steps:
            if s.node is node or (s.node.body is not None and node in list(s.node.body.all_nodes())):
                return s
        raise UsageError(f"node {node.name} ({node.op}) has no kernel: it is a view of its input's buffer")

    def source(self, node) -> str:
        """The tensorlang program (DSL text) of the kernel that computes `node`."""
        return self.step(node).program.text

    def tasks(self) -> list[tuple[str, dict, int]]:
        """The distinct kernels of the model as (DSL program, sizes, how many nodes use it): the tasks a model
        tuner would tune. Sizes are {} (the programs write their shapes as numbers)."""
        counts: dict[str, int] = {}
        for s in self.steps:
            counts[s.program.text] = counts.get(s.program.text, 0) + 1
        return [(text, {}, n) for text, n in counts.items()]

    def flops(self, step: Step) -> int:
        """Arithmetic of one kernel call (its nodes' FLOP counts)."""
        nodes = step.node.body.nodes if step.node.body is not None else [step.node]
        return sum(ops.get(n.op).flops(n) for n in nodes)

    def profile(self, *args, repeat: int = 3) -> list[float]:
        """Median seconds of each kernel call (in `steps` order) over `repeat` runs on the given inputs (in the
        module's input structure)."""
        return self.profile_flat(self._leaves(args, {}), repeat)

    def profile_flat(self, arrays: list, repeat: int = 3) -> list[float]:
        """`profile` on the flat list of input arrays."""
        arrays = self._check_inputs(list(arrays))
        outs = [np.empty(v.shape, DTYPES[STORAGE.get(v.dtype, v.dtype)]) for v in self.graph.outputs]
        arena = self._arena()
        times: list[list[float]] = [[] for _ in self.steps]
        try:
            bases = self._bases(arena, arrays, outs)
            for _ in range(max(1, repeat)):
                for k, step in enumerate(self.steps):
                    addrs = [bases[b] + off for b, off in step.args]
                    t0 = time.perf_counter()
                    step.kernel.call(*addrs)
                    times[k].append(time.perf_counter() - t0)
        finally:
            with self._arena_lock:
                self._arenas.append(arena)
        return [float(np.median(t)) for t in times]

    def summary(self, *args, repeat: int = 3, peak_gflops: float | None = None,
                bandwidth_gbps: float | None = None) -> str:
        """A table, one row per kernel call: node, ops, category, output shape, schedule source, FLOPs, bytes moved,
        and with inputs given (as for a call) the time, share, GFLOPS and GB/s of a profile run, then the time per
        op category. With the machine's FMA peak and memory bandwidth (both, for the thread count the model runs
        with; benchmarks/fma_peak.py and the triad of benchmarks/suites measure them) each kernel's bound and its
        share of that ceiling too. See `kernel_rows` for the rows as data.

        Example::

            print(model.summary(x))    # node  ops  category  output  schedule  MFLOP  MB  time  share  GFLOPS  GB/s
            print(model.summary(x, peak_gflops=150.0, bandwidth_gbps=20.0))    # ...  bound  of ceiling
        """
        times = self.profile(*args, repeat=repeat) if args else None
        return self.summary_table(times, peak_gflops=peak_gflops, bandwidth_gbps=bandwidth_gbps)

    def kernel_rows(self, times: list[float] | None = None, *, peak_gflops: float | None = None,
                    bandwidth_gbps: float | None = None) -> list:
        """One `tensorlang.graph.profile.KernelRow` per kernel call (in `steps` order), with the kernel times of
        `profile` where given, and each kernel's bound and share of it where the FMA peak (GFLOPS) and the memory
        bandwidth (GB/s) are given.

        Example::

            rows = model.kernel_rows(model.profile(x), peak_gflops=150.0, bandwidth_gbps=20.0)
            profile.by_category(rows)    # {'conv': 0.0021, 'elementwise': 0.0004, ...}
        """
        from . import profile
        if times is not None and len(times) != len(self.steps):
            raise UsageError(f"{self.graph.name}: {len(times)} kernel times for {len(self.steps)} kernels")
        if (peak_gflops is None) != (bandwidth_gbps is None):
            raise UsageError("give both the FMA peak (peak_gflops) and the memory bandwidth (bandwidth_gbps), or "
                             "neither: which one bounds a kernel depends on both")
        rows = []
        for k, s in enumerate(self.steps):
            nodes = s.node.body.nodes if s.node.body is not None else [s.node]
            opnames = "+".join(dict.fromkeys(n.op.split(".")[0] for n in nodes
                                             if ops.REGISTRY[n.op].kind != "view"))
            moved = sum(v.type.nbytes for v in (*s.program.inputs, *s.program.outputs))
            rows.append(profile.KernelRow(s.node.name, opnames, profile.kernel_category(s.node),
                                          str(s.node.outputs[0].type), s.kernel.schedule_source, self.flops(s), moved,
                                          times[k] if times is not None else None))
        if times is not None and peak_gflops is not None and bandwidth_gbps is not None:
            rows = profile.with_ceilings(rows, peak_gflops, bandwidth_gbps)
        return rows

    def summary_table(self, times: list[float] | None = None, *, peak_gflops: float | None = None,
                      bandwidth_gbps: float | None = None) -> str:
        """The `summary` table for kernel times already measured (`profile`), or without times."""
        from . import profile
        lines = profile.table(self.kernel_rows(times, peak_gflops=peak_gflops, bandwidth_gbps=bandwidth_gbps))
        memory = self.plan.describe()
        if self.model_bytes:
            memory += (f"; {self.plan.arena_bytes / self.model_bytes:.2f}x the model's intermediate tensors "
                       f"({self.model_bytes / 2**20:.1f} MiB)")
        lines.append(f"{len(self.steps)} kernels ({len(self.tasks())} distinct), {memory}, constants "
                     f"{self.graph.constant_bytes() / 2**20:.1f} MiB"
                     + (f", total {sum(times) * 1e3:.3f} ms" if times else "")
                     + (f"; ceilings: FMA peak {peak_gflops:g} GFLOPS, bandwidth {bandwidth_gbps:g} GB/s"
                        if times and peak_gflops else ""))
        return "\n".join(lines)

    def export(self, path, format: str = "so", *, name: str | None = None, weights: str | None = None,
               cc: str | None = None) -> dict:
        """Write the whole model ahead of time into the directory `path`: "so" (one shared library, weights
        embedded; `tl.load` reads it back) or "c" (one C source and a weights file), with NAME.h and an example C
        program; returns {role: file path}. See tensorlang/graph/export.py.

        Example::

            model.export("out", format="so")    # out/libmnistnet.so, out/mnistnet.h, out/mnistnet_example.c
        """
        from .export import export_model
        return export_model(self, path, format, name=name, weights=weights, cc=cc)

    def save(self, path) -> str:
        """Write the model to one file (graph JSON and .npy constants in a zip, no pickle); `tl.load_model(path)`
        reads it back without torch.

        Example::

            model.save("net.tlm")
        """
        from .serialize import save_model
        return save_model(self, path)

    def __repr__(self) -> str:
        return (f"<Model {self.graph.name}: {len(self.graph.inputs)} inputs, {len(self.steps)} kernels, "
                f"arena {self.plan.arena_bytes} bytes>")
