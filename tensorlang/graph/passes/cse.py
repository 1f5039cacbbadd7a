"""Common-subexpression elimination: two nodes with the same op, the same operands and the same attrs compute the
same values, so the later one's users read the earlier one's outputs (and the later node becomes dead); constants
with the same dtype, shape and bytes become one.

>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((2,), "f32"))
>>> a = g.add_node("exp", [x], {}, [TensorType((2,), "f32")], name="a").outputs[0]
>>> b = g.add_node("exp", [x], {}, [TensorType((2,), "f32")], name="b").outputs[0]
>>> g.outputs = [g.add_node("add.Tensor", [a, b], {}, [TensorType((2,), "f32")]).outputs[0]]
>>> run(g)
['b (exp) is a repeat of a: its users read a']
"""
from __future__ import annotations

import hashlib
import json

from ..ir import Node, Value


def _attrs_key(attrs: dict) -> str:
    return json.dumps(attrs, sort_keys=True, default=repr)


def run(graph) -> list[str]:
    """Merge repeated constants and nodes (see the module's docstring); one line per merge.

    Example::

        cse.run(graph)       # ['b (exp) is a repeat of a: its users read a']
    """
    changes = []
    seen_const: dict[tuple, Value] = {}
    for c in list(graph.constants):
        key = (c.dtype, c.shape, hashlib.sha256(c.data.tobytes()).hexdigest())
        first = seen_const.setdefault(key, c)
        if first is not c and graph.replace_uses(c, first):
            changes.append(f"constant {c.name} equals {first.name}")
    seen: dict[tuple, Node] = {}
    for n in list(graph.nodes):
        if n.body is not None:
            continue
        key = (n.op, tuple(v.uid if v is not None else None for v in n.inputs), _attrs_key(n.attrs))
        earlier = seen.setdefault(key, n)
        if earlier is n:
            continue
        for old, new in zip(n.outputs, earlier.outputs):
            graph.replace_uses(old, new)
        graph.nodes.remove(n)
        changes.append(f"{n.name} ({n.op}) is a repeat of {earlier.name}: its users read {earlier.name}")
    return changes
