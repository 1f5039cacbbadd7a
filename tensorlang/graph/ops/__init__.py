"""The operators the graph compiler supports: one `OpDef` per core ATen op, each with its shape inference, its
lowering to a tensorlang program, its FLOP count and, where cheap, a numpy evaluation for constant folding.

Op families live in their own modules (elementwise, shape, conv, matmul, pool, reduce, norm, creation, vision);
importing
this package registers them all. `get(name)` returns an op's definition, `supported()` lists the names.

>>> from tensorlang.graph.ops import get, supported
>>> "convolution" in supported() and "add.Tensor" in supported()
True
>>> get("relu").kind
'elementwise'
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...errors import UsageError

#: What an op does to indices, which decides how it fuses:
#: "elementwise" (out[i] from inputs at i, broadcast), "injective" (each output element reads at most one element
#: of each input: permute, slice, cat, pad), "view" (a reshape: an alias of its input's buffer at run time),
#: "reduce" (a reduction without data reuse: sum, softmax, layer norm), "anchor" (data reuse: convolution, matmul,
#: pooling), "creation" (no tensor inputs: folded into a constant)
KINDS = ("elementwise", "injective", "view", "reduce", "anchor", "creation")


@dataclass(frozen=True)
class OpDef:
    """One supported op.

    `infer(node) -> [TensorType]` gives the output types from the input types and attrs; `lower(builder, node,
    refs) -> [Ref | None]` writes the op into a program (a ref per output; None for an output the program cannot
    produce, which must then be unused); `flops(node)` counts arithmetic; `evaluate(node, arrays)`, when set,
    computes the outputs in numpy for constant folding (else folding runs the compiled kernel); `doc` is the
    op's row in the README's table.
    """

    name: str
    kind: str
    infer: Callable
    lower: Callable | None
    flops: Callable = field(default=lambda node: 0)
    evaluate: Callable | None = None
    doc: str = ""
    family: str = ""


REGISTRY: dict[str, OpDef] = {}


def register(name: str, kind: str, infer, lower=None, flops=None, evaluate=None, doc: str = "",
             family: str = "") -> OpDef:
    """Add an op to the registry (a name registered twice is an error).

    >>> from tensorlang.graph.ops import get
    >>> get("relu").name
    'relu'
    """
    if name in REGISTRY:
        raise ValueError(f"op {name} registered twice")
    if kind not in KINDS:
        raise ValueError(f"op {name}: kind {kind!r} is not one of {KINDS}")
    op = OpDef(name, kind, infer, lower, flops or (lambda node: 0), evaluate, doc, family)
    REGISTRY[name] = op
    return op


def get(name: str) -> OpDef:
    """The definition of op `name`, or UsageError listing the supported ops.

    >>> from tensorlang.graph.ops import get
    >>> get("nosuch")
    Traceback (most recent call last):
    ...
    tensorlang.errors.UsageError: op 'nosuch' is not supported; supported ops: ...
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise UsageError(f"op {name!r} is not supported; supported ops: {', '.join(supported())}") from None


def supported() -> list[str]:
    """The names of every supported op, sorted (ops the graph compiler makes itself, like ``fused``, left out).

    >>> from tensorlang.graph.ops import supported
    >>> len(supported()) >= 60
    True
    """
    return sorted(n for n, d in REGISTRY.items() if d.family != "internal")


def table() -> list[tuple[str, str, str, str]]:
    """(family, op, kind, what it supports) for every supported op, for the README.

    >>> from tensorlang.graph.ops import table
    >>> len(table()) >= 60
    True
    """
    return sorted((d.family, d.name, d.kind, d.doc) for d in REGISTRY.values() if d.family != "internal")


#: what a node may do with a small integer value (u8, i8, i16): convert it (`_to_copy`), or move it (view and
#: layout ops); any other op is refused by `check_small_ints`
_SMALL_INT_KINDS = ("view", "injective")


def check_small_ints(node) -> None:
    """UsageError where `node` computes with a small integer value (u8, i8, i16) rather than converting or moving
    it: a graph holds such values (a uint8 image input, an int8 table) and computes in f32, f64, i32 and i64.

    >>> from tensorlang.graph.ir import Graph, TensorType
    >>> g = Graph("g")
    >>> x = g.add_input("x", TensorType((2,), "u8"))
    >>> check_small_ints(g.make_node("_to_copy", [x], {"dtype": "f32"}, [TensorType((2,), "f32")], name="to"))
    >>> check_small_ints(g.make_node("add.Tensor", [x, x], {}, [TensorType((2,), "u8")], name="add"))
    Traceback (most recent call last):
    ...
    tensorlang.errors.UsageError: add.Tensor (node add): computes in u8; a graph converts u8, i8 and i16 values ...
    """
    from ..ir import SMALL_INTS
    from .common import fail

    small = sorted({v.dtype for v in list(node.inputs) + list(node.outputs) if v is not None and v.dtype in SMALL_INTS})
    if not small or node.op == "_to_copy" or REGISTRY[node.op].kind in _SMALL_INT_KINDS:
        return
    raise fail(node, f"computes in {', '.join(small)}; a graph converts u8, i8 and i16 values (casts) and moves "
                     "them (views, permutes, slices) but computes in f32, f64, i32 and i64: convert first "
                     "(x.float(), x.to(torch.int32), ONNX Cast)")


from . import blocked, conv, creation, elementwise, index, matmul, norm, pool, reduce, shape, vision, winograd  # noqa: E402,F401  (they register)
