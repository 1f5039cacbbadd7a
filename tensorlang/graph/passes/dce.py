"""Dead-code elimination: nodes none of whose outputs is read by another node or is a graph output go, last
first, so that a chain that only fed a dead node goes too; constants nobody reads go with them.

>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((2,), "f32"))
>>> dead = g.add_node("exp", [x], {}, [TensorType((2,), "f32")], name="unused")
>>> g.outputs = [g.add_node("relu", [x], {}, [TensorType((2,), "f32")]).outputs[0]]
>>> run(g)
['removed unused (exp): its result is never used']
"""
from __future__ import annotations


def run(graph) -> list[str]:
    """Remove dead nodes (see the module's docstring); one line per node removed.

    Example::

        dce.run(graph)       # ['removed unused (exp): its result is never used']
    """
    live = {v.uid for v in graph.outputs}
    keep, changes = [], []
    for n in reversed(graph.nodes):
        if any(v.uid in live for v in n.outputs):
            keep.append(n)
            live.update(v.uid for v in n.inputs if v is not None)
        else:
            changes.append(f"removed {n.name} ({n.op}): its result is never used")
    graph.nodes = keep[::-1]
    return changes[::-1]
