"""The graph verifier: every value defined once and before its use, every node's types what its op infers,
constants that match their types, outputs that exist, fused bodies that are graphs of their own.

A pass that breaks the graph is a bug in tensorlang; `verify` names the pass, the node and what is wrong.

>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("ok")
>>> x = g.add_input("x", TensorType((2,), "f32"))
>>> g.outputs = [g.add_node("relu", [x], {}, [TensorType((2,), "f32")]).outputs[0]]
>>> verify(g)
"""
from __future__ import annotations

import numpy as np

from ..errors import UsageError
from . import ops
from .ir import DTYPES, Graph, TensorType


class GraphError(UsageError):
    """A graph that breaks the IR's rules (after a pass: a bug in that pass)."""


def verify(graph: Graph, after: str | None = None) -> None:
    """Check `graph` (see the module's docstring); GraphError says what is wrong, and after which pass.

    >>> verify(Graph("empty"))
    """
    where = f" after pass {after}" if after else ""

    def bad(msg):
        return GraphError(f"graph {graph.name}{where}: {msg}")
    defined: set[int] = set()
    for v in graph.inputs:
        if v.uid in defined:
            raise bad(f"input {v.name} is listed twice")
        defined.add(v.uid)
    for c in graph.constants:
        if c.data is None:
            raise bad(f"constant {c.name} has no data")
        if tuple(c.data.shape) != c.shape or np.dtype(c.data.dtype) != DTYPES[c.dtype]:
            raise bad(f"constant {c.name} holds {c.data.dtype}{list(c.data.shape)} but is typed {c.type}")
        defined.add(c.uid)
    names: set[str] = set()
    for n in graph.nodes:
        if n.name in names:
            raise bad(f"two nodes are called {n.name}")
        names.add(n.name)
        for v in n.inputs:
            if v is not None and v.uid not in defined:
                raise bad(f"node {n.name} ({n.op}) reads {v.name}, which is not defined before it")
        if n.op == "fused":
            if n.body is None:
                raise bad(f"fused node {n.name} has no body")
            _check_body(n, bad)
        else:
            opdef = ops.REGISTRY.get(n.op)
            if opdef is None:
                raise bad(f"node {n.name} has the unknown op {n.op}")
            try:
                types = opdef.infer(n)
            except UsageError as e:
                raise bad(f"node {n.name}: {e}") from None
            got = [v.type for v in n.outputs]
            if types != got:
                raise bad(f"node {n.name} ({n.op}) has outputs {got} but its op gives {types}")
        for v in n.outputs:
            if v.uid in defined:
                raise bad(f"value {v.name} is defined twice (again by node {n.name})")
            if v.producer is not n:
                raise bad(f"value {v.name} does not name node {n.name} as its producer")
            defined.add(v.uid)
    for v in graph.outputs:
        if v.uid not in defined:
            raise bad(f"output {v.name} is not defined")


def _check_body(node, bad) -> None:
    body = node.body
    if len(body.inputs) != len(node.inputs) or any(
            a.type != b.type for a, b in zip(body.inputs, node.inputs)):
        raise bad(f"fused node {node.name}: its body's inputs do not match its operands")
    if [v.type for v in body.outputs] != [v.type for v in node.outputs]:
        raise bad(f"fused node {node.name}: its body's outputs do not match its outputs")
    verify(body)
    if any(n.op == "fused" for n in body.nodes):
        raise bad(f"fused node {node.name} holds another fused node")


def check_types(types) -> list[TensorType]:
    """`types` as a list of TensorTypes (a helper for passes that build nodes).

    >>> check_types([TensorType((1,), "f32")])
    [f32[1]]
    """
    return [t if isinstance(t, TensorType) else TensorType(*t) for t in types]
