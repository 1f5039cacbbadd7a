"""The graph IR: typed values, operator nodes, constants held as numpy arrays.

A `Graph` is a list of `Node`s in a valid execution order (every input defined before its use). A `Value` has a
`TensorType` (shape and dtype) and is defined exactly once: as a graph input, as a constant (its `data` is a numpy
array) or as an output of one node. A node names its operator by the core ATen name it came from
(``convolution``, ``add.Tensor``, ...; see ``tensorlang.graph.ops``), holds its tensor operands in `inputs` (None for
an optional operand that is absent) and everything else (ints, floats, lists, strings) in `attrs`. A fused node
(op ``fused``) holds the nodes it groups in a sub-graph, `body`.

>>> import numpy as np
>>> g = Graph("double")
>>> x = g.add_input("x", TensorType((2, 3), "f32"))
>>> two = g.add_constant("two", np.full((), 2.0, np.float32))
>>> y = g.add_node("mul.Tensor", [x, two], {}, [TensorType((2, 3), "f32")]).outputs[0]
>>> g.outputs = [y]
>>> len(g.nodes), y.type
(1, f32[2, 3])
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..errors import UsageError

#: dtypes a graph value may have, and the numpy dtype of each (bool values are stored as i32 in kernels)
DTYPES: dict[str, np.dtype] = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64), "i32": np.dtype(np.int32),
                              "i64": np.dtype(np.int64), "bool": np.dtype(np.bool_), "u8": np.dtype(np.uint8),
                              "i8": np.dtype(np.int8), "i16": np.dtype(np.int16)}
#: the dtype a kernel reads and writes for a value of each dtype
STORAGE = {"f32": "f32", "f64": "f64", "i32": "i32", "i64": "i64", "bool": "i32", "u8": "u8", "i8": "i8", "i16": "i16"}
#: the small integer dtypes: a graph holds them (an 8-bit image input, a quantized table) and converts them with
#: casts and moves them with layout ops, but computes in f32, f64, i32 and i64 (see `small_int_refusal`)
SMALL_INTS = ("u8", "i8", "i16")


def dtype_of_numpy(dtype) -> str:
    """The graph dtype of a numpy dtype, or UsageError.

    >>> dtype_of_numpy(np.float32)
    'f32'
    """
    dtype = np.dtype(dtype)
    for name, d in DTYPES.items():
        if d == dtype:
            return name
    raise UsageError(f"dtype {dtype} is not supported; tensors are one of {', '.join(DTYPES)}")


@dataclass(frozen=True)
class TensorType:
    """The shape and dtype of a value.

    >>> t = TensorType((1, 3), "f32")
    >>> t.numel, t.nbytes, str(t)
    (3, 12, 'f32[1, 3]')
    """

    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        if self.dtype not in DTYPES:
            raise UsageError(f"dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")

    @property
    def rank(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def numel(self) -> int:
        """The number of elements."""
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        """Bytes of the value as a kernel stores it (bool as i32)."""
        storage = STORAGE.get(self.dtype, self.dtype)
        return self.numel * DTYPES[storage].itemsize

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype of the value."""
        return DTYPES[self.dtype]

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"

    __repr__ = __str__


_ids = itertools.count()


class Value:
    """A typed value defined once: a graph input, a constant (`data` set) or the output of `producer`.

    >>> v = Value("x", TensorType((2,), "f32"))
    >>> v.is_constant, v.name
    (False, 'x')
    """

    __slots__ = ("data", "name", "producer", "type", "uid")

    def __init__(self, name: str, type: TensorType, producer: Node | None = None, data: np.ndarray | None = None):
        self.name = name
        self.type = type
        self.producer = producer
        self.data = data
        self.uid = next(_ids)

    @property
    def is_constant(self) -> bool:
        """Whether the value is a constant (its data is known at compile time)."""
        return self.data is not None

    @property
    def constant_data(self) -> np.ndarray:
        """The data of a constant (a value in `Graph.constants`).

        >>> Value("c", TensorType((2,), "f32"), data=np.zeros(2, np.float32)).constant_data.shape
        (2,)
        """
        assert self.data is not None, f"{self.name} is not a constant"
        return self.data

    @property
    def shape(self) -> tuple[int, ...]:
        """The value's shape."""
        return self.type.shape

    @property
    def dtype(self) -> str:
        """The value's dtype."""
        return self.type.dtype

    def __repr__(self) -> str:
        return f"%{self.name}: {self.type}"


@dataclass(eq=False)
class Node:
    """One operator application: `op` (a core ATen name), tensor `inputs`, other arguments in `attrs`, `outputs`.

    `source` is the line of the user's Python the node came from (from torch.export's stack trace), `body` the
    sub-graph of a fused node.

    >>> n = Node("relu", [Value("x", TensorType((2,), "f32"))], {}, [], name="relu_1")
    >>> n.op, n.name
    ('relu', 'relu_1')
    """

    op: str
    inputs: list
    attrs: dict
    outputs: list
    name: str = ""
    source: str = ""
    body: Graph | None = None
    input_names: tuple[str, ...] = ()
    meta: dict = field(default_factory=dict)

    def tensor_inputs(self) -> list[Value]:
        """The inputs that are present (optional operands that are absent are None in `inputs`)."""
        return [v for v in self.inputs if v is not None]

    def __repr__(self) -> str:
        return f"<Node {self.name}: {self.op}>"


class Graph:
    """A model: inputs, constants, nodes in execution order, outputs.

    `input_spec` and `output_spec` describe how the flat inputs and outputs nest in the model's own structure
    (JSON: ``{"kind": "tuple"|"list"|"dict"|"leaf", ...}``; see ``tensorlang.graph.structure``).

    >>> g = Graph("empty")
    >>> g.add_input("x", TensorType((1,), "f32")).name
    'x'
    """

    def __init__(self, name: str = "model"):
        self.name = name
        self.inputs: list[Value] = []
        self.outputs: list[Value] = []
        self.nodes: list[Node] = []
        self.constants: list[Value] = []
        self.input_spec: dict | None = None
        self.output_spec: dict | None = None
        self._names: set[str] = set()
        self._node_names: set[str] = set()

    # ---- construction ----
    def fresh_name(self, hint: str, taken: set | None = None) -> str:
        """A value name (or, with `taken`, a name not in that set) not used yet in this graph, based on `hint`.

        >>> g = Graph(); g.fresh_name("a"), g.fresh_name("a")
        ('a', 'a_1')
        """
        taken = self._names if taken is None else taken
        base = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in (hint or "v")) or "v"
        name, k = base, 0
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        taken.add(name)
        return name

    def add_input(self, name: str, type: TensorType) -> Value:
        """A new graph input."""
        v = Value(self.fresh_name(name), type)
        self.inputs.append(v)
        return v

    def add_constant(self, name: str, data: np.ndarray) -> Value:
        """A new constant holding `data` (a numpy array; kept as given, so do not change it afterwards)."""
        data = np.asarray(data)
        v = Value(self.fresh_name(name), TensorType(data.shape, dtype_of_numpy(data.dtype)), data=data)
        self.constants.append(v)
        return v

    def make_node(self, op: str, inputs: list, attrs: dict, out_types: list[TensorType], name: str = "",
                  source: str = "", input_names: tuple[str, ...] = ()) -> Node:
        """A new node with fresh output values, not yet placed in `nodes` (see `add_node`, `insert_before`)."""
        name = self.fresh_name(name or op.split(".")[0], self._node_names)
        node = Node(op, list(inputs), dict(attrs), [], name=name, source=source, input_names=tuple(input_names))
        for i, t in enumerate(out_types):
            node.outputs.append(Value(self.fresh_name(name if i == 0 else f"{name}_{i}"), t, producer=node))
        return node

    def add_node(self, op: str, inputs: list, attrs: dict, out_types: list[TensorType], name: str = "",
                 source: str = "", input_names: tuple[str, ...] = ()) -> Node:
        """Append a new node (after every node there is) and return it."""
        node = self.make_node(op, inputs, attrs, out_types, name, source, input_names)
        self.nodes.append(node)
        return node

    def insert_before(self, anchor: Node, node: Node) -> None:
        """Place `node` just before `anchor` in execution order."""
        self.nodes.insert(self.nodes.index(anchor), node)

    # ---- queries ----
    def users(self) -> dict[int, list[Node]]:
        """For each value's uid, the nodes that read it (a node reading it twice is listed twice)."""
        out: dict[int, list[Node]] = {}
        for n in self.nodes:
            for v in n.inputs:
                if v is not None:
                    out.setdefault(v.uid, []).append(n)
        return out

    def values(self) -> list[Value]:
        """Every value: inputs, constants, then node outputs in order."""
        return [*self.inputs, *self.constants, *(v for n in self.nodes for v in n.outputs)]

    def replace_uses(self, old: Value, new: Value) -> int:
        """Make every node and graph output that reads `old` read `new`; returns how many uses changed."""
        count = 0
        for n in self.nodes:
            for i, v in enumerate(n.inputs):
                if v is old:
                    n.inputs[i] = new
                    count += 1
        for i, v in enumerate(self.outputs):
            if v is old:
                self.outputs[i] = new
                count += 1
        return count

    def prune_constants(self) -> int:
        """Drop constants no node and no output reads; returns how many."""
        used = {v.uid for n in self.nodes for v in n.inputs if v is not None} | {v.uid for v in self.outputs}
        before = len(self.constants)
        self.constants = [c for c in self.constants if c.uid in used]
        return before - len(self.constants)

    def all_nodes(self):
        """Every node, those inside fused nodes' bodies included (a fused node comes before its body's nodes)."""
        for n in self.nodes:
            yield n
            if n.body is not None:
                yield from n.body.all_nodes()

    def op_counts(self) -> dict[str, int]:
        """How many nodes of each op the graph has (fused nodes' bodies included, the fused nodes not).

        >>> Graph().op_counts()
        {}
        """
        counts: dict[str, int] = {}
        for n in self.all_nodes():
            if n.op != "fused":
                counts[n.op] = counts.get(n.op, 0) + 1
        return counts

    def constant_bytes(self) -> int:
        """Bytes of all constants."""
        return sum(int(c.constant_data.nbytes) for c in self.constants)

    def __str__(self) -> str:
        from .printer import format_graph
        return format_graph(self)

    def __repr__(self) -> str:
        return f"<Graph {self.name}: {len(self.inputs)} inputs, {len(self.nodes)} nodes, {len(self.outputs)} outputs>"
