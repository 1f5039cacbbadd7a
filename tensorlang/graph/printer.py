"""`print(model.graph)`: one line per node with its op, operands, attributes and output types; a fused node shows
the nodes it holds, indented under it; the user's Python line the node came from at the end.

>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("tiny")
>>> x = g.add_input("x", TensorType((2, 3), "f32"))
>>> g.outputs = [g.add_node("relu", [x], {}, [TensorType((2, 3), "f32")], name="r").outputs[0]]
>>> print(g)
graph tiny(%x: f32[2, 3]) -> (%r: f32[2, 3]):
  %r: f32[2, 3] = relu(%x)
"""
from __future__ import annotations

import numpy as np

from .ir import Graph, Node


def _attr(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_attr(x) for x in v) + "]"
    return repr(v) if isinstance(v, str) else str(v)


def format_node(n: Node, indent: str = "  ", source: bool = True) -> list[str]:
    """The lines of one node (a fused node's body after it, indented).

    >>> from tensorlang.graph.ir import Value, TensorType
    >>> format_node(Node("relu", [Value("x", TensorType((2,), "f32"))], {}, [Value("y", TensorType((2,), "f32"))]))
    ['  %y: f32[2] = relu(%x)']
    """
    outs = ", ".join(f"%{v.name}: {v.type}" for v in n.outputs)
    args = ", ".join("None" if v is None else f"%{v.name}" for v in n.inputs)
    attrs = ", ".join(f"{k}={_attr(v)}" for k, v in n.attrs.items() if v is not None and k not in ("name",))
    text = f"{indent}{outs} = {n.op}({args}{', ' if args and attrs else ''}{attrs})"
    if n.op == "fused":
        text = f"{indent}{outs} = fused {n.attrs.get('name', n.name)}({args}) {{"
    if source and n.source and n.op != "fused":
        text += f"    # {n.source}"
    lines = [text]
    if n.body is not None:
        inner = {id(a): b for a, b in zip(n.body.inputs, n.inputs)}
        for m in n.body.nodes:
            lines += [_rename(line, n, inner) for line in format_node(m, indent + "    ", source)]
        lines.append(f"{indent}}}")
    return lines


def _rename(line: str, node, inner) -> str:
    for a, b in zip(node.body.inputs, node.inputs):
        line = line.replace(f"%{a.name})", f"%{b.name})").replace(f"%{a.name},", f"%{b.name},")
    return line


def format_graph(g: Graph, source: bool = True) -> str:
    """The whole graph: header with inputs and outputs, constants (shape only), then the nodes.

    >>> print(format_graph(Graph("empty")))
    graph empty() -> ():
    """
    ins = ", ".join(f"%{v.name}: {v.type}" for v in g.inputs)
    outs = ", ".join(f"%{v.name}: {v.type}" for v in g.outputs)
    lines = [f"graph {g.name}({ins}) -> ({outs}):"]
    if g.constants:
        total = sum(int(np.asarray(c.data).nbytes) for c in g.constants)
        shown = ", ".join(f"%{c.name}: {c.type}" for c in g.constants[:6])
        more = f", ... ({len(g.constants)} constants, {total / 2**20:.2f} MiB)" if len(g.constants) > 6 else ""
        lines.append(f"  constants: {shown}{more}")
    for n in g.nodes:
        lines += format_node(n, "  ", source)
    return "\n".join(lines)
