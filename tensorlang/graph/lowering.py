"""A group of nodes (one node, or a fused node's body) as one tensorlang program.

`lower_nodes` runs each node's lowering in order on a `Builder`: values from outside the group become the
program's inputs, the group's outputs its outputs. An elementwise result read by one consumer in the group is
substituted into it; one read by several (or an output) becomes a stage. The program's name is the kind of its
nodes and a hash of its text, so the same computation gets the same program (and the same kernel, and the same
tuning task) wherever it appears.

>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((2, 3), "f32"))
>>> n = g.add_node("relu", [x], {}, [TensorType((2, 3), "f32")])
>>> p = lower_nodes([n], [n.outputs[0]])
>>> print(p.text, end="")
def relu_...(in0: f32[2, 3]) -> out0:
    out0[i0, i1] = (max(in0[i0, i1], 0.0)) where i0 in 0:2, i1 in 0:3
>>> [v.name for v in p.inputs]
['x']
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..errors import UsageError
from . import ops
from .affine import NotAffine
from .builder import Builder, Ref
from .ir import Node, Value


@dataclass(frozen=True)
class Program:
    """A group's program: DSL `text`, the graph values it reads (`inputs`, in parameter order) and writes
    (`outputs`), and the shapes it declares them with (an output may be declared split, as [N, G, F/G, H, W])."""

    text: str
    name: str
    inputs: tuple[Value, ...]
    outputs: tuple[Value, ...]
    input_decls: tuple[tuple[int, ...], ...]
    output_decls: tuple[tuple[int, ...], ...]


def program_kind(nodes: list[Node]) -> str:
    """A short name for what the nodes compute: the anchor op and what follows it ("convolution_relu").

    >>> from tensorlang.graph.ir import Node
    >>> program_kind([Node("convolution", [], {}, []), Node("add.Tensor", [], {}, []), Node("relu", [], {}, [])])
    'convolution_add_relu'
    """
    words: list[str] = []
    for n in nodes:
        w = n.op.split(".")[0].strip("_").replace("native_", "").replace("_legit_no_training", "")
        if ops.REGISTRY.get(n.op) is not None and ops.REGISTRY[n.op].kind == "view":
            continue
        if w not in words:
            words.append(w)
    name = "_".join(words[:4]) or "copy"
    return name if name[0].isalpha() else "k_" + name


def lower_nodes(nodes: list[Node], outputs: list[Value], literals: bool = True) -> Program:
    """The program computing `outputs` from the nodes `nodes` (in execution order) and whatever they read from
    outside. Raises NotAffine when a read cannot be written with affine indices (the caller then does not fuse),
    UsageError when an op cannot be lowered (naming the node). One-element constants are written into the program
    as numbers (`literals`), unless the program would then read no tensor at all.

    Example::

        program = lower_nodes(fused.body.nodes, fused.body.outputs)
        print(program.text)       # def convolution_relu_...(in0: f32[1, 3, 8, 8], ...) -> out0: ...
    """
    b = Builder("KERNEL", literals)
    inside = {v.uid for n in nodes for v in n.outputs}
    uses: dict[int, int] = {}
    for n in nodes:
        for v in n.inputs:
            if v is not None:
                uses[v.uid] = uses.get(v.uid, 0) + 1
    wanted = {v.uid for v in outputs}
    refs: dict[int, Ref] = {}
    for n in nodes:
        opdef = ops.get(n.op)
        if opdef.lower is None:
            raise UsageError(f"{n.op} (node {n.name}) has no kernel: it should have been folded into a constant")
        ins: list[Ref | None] = []
        for v in n.inputs:
            if v is None:
                ins.append(None)
            elif v.uid in inside:
                ins.append(refs[v.uid])
            else:
                ins.append(b.param(v))
        try:
            results = opdef.lower(b, n, ins)
        except NotAffine:
            raise
        except UsageError:
            raise
        for v, r in zip(n.outputs, results):
            if r is None:
                if v.uid in wanted or uses.get(v.uid):
                    raise UsageError(f"{n.op} (node {n.name}{' at ' + n.source if n.source else ''}): its output "
                                     f"{v.name} ({v.type}) is not supported; only its other outputs may be used")
                continue
            if r.lazy and (uses.get(v.uid, 0) > 1 or v.uid in wanted):
                r = b.materialize(r)
            refs[v.uid] = r
    b.set_outputs([refs[v.uid] if v.uid in refs else b.param(v) for v in outputs])
    text = b.text()
    used = b.used_params()
    if not used and literals:  # a program must read something: keep the constants as inputs
        return lower_nodes(nodes, outputs, literals=False)
    kind = program_kind(nodes)
    body = text.split("(", 1)[1]
    name = f"{kind}_{hashlib.sha256(body.encode()).hexdigest()[:10]}"
    text = text.replace("def KERNEL(", f"def {name}(", 1)
    return Program(text, name, tuple(v for _, v, _ in used), tuple(outputs), tuple(d for _, _, d in used),
                   tuple(r.decl for r in b.outputs))
