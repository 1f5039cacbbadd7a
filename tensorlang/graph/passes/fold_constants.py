"""Constant folding: a node whose operands are all constants is computed now, and its outputs become constants
(a weight's permute, the arithmetic on constants that decompositions leave); creation ops (full, arange) never
reach a kernel. Ops with a numpy evaluation use it (exact: views, permutes, slices); the others run the node's own
compiled kernel, so the folded value is what the model would have computed. A fold that would grow the constants
a lot (an expand of a scalar to a large tensor) is left to run.

>>> import numpy as np
>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((3, 2), "f32"))
>>> w = g.add_constant("w", np.arange(6, dtype=np.float32).reshape(2, 3))
>>> wt = g.add_node("permute", [w], {"dims": [1, 0]}, [TensorType((3, 2), "f32")], name="wt").outputs[0]
>>> g.outputs = [g.add_node("mul.Tensor", [x, wt], {}, [TensorType((3, 2), "f32")]).outputs[0]]
>>> run(g)
['wt (permute) folded into a constant f32[3, 2]']
"""
from __future__ import annotations

import numpy as np

from .. import ops

#: a fold may make constants at most this much larger than its operands, beyond this many bytes
GROWTH, SLACK = 4, 1 << 16


def evaluate(node, arrays: list) -> list[np.ndarray | None]:
    """A node's outputs for constant operands: the op's numpy evaluation, else its compiled kernel (None for an
    output of no bytes, which a kernel does not write).

    >>> from tensorlang.graph.ir import Node, Value, TensorType
    >>> n = Node("exp", [Value("c", TensorType((2,), "f32"))], {}, [Value("y", TensorType((2,), "f32"))])
    >>> [round(float(v), 4) for v in evaluate(n, [np.array([0, 1], np.float32)])[0]]
    [1.0, 2.7183]
    """
    opdef = ops.get(node.op)
    if opdef.evaluate is not None:
        outs = opdef.evaluate(node, arrays)
        return [np.ascontiguousarray(o, dtype=v.type.numpy_dtype).reshape(v.shape) for o, v in zip(outs, node.outputs)]
    from ..ir import Graph, Node, Value
    from ..model import Model
    g = Graph(f"fold_{node.name}")  # the node alone, reading `arrays` as its constants
    copy = Node(node.op, [None if v is None else g.add_constant(v.name, np.asarray(a))
                          for v, a in zip(node.inputs, arrays)], dict(node.attrs), [], name=node.name)
    copy.outputs = [Value(v.name, v.type, producer=copy) for v in node.outputs]
    used = [v for v in copy.outputs if v.type.nbytes > 0]
    g.nodes, g.outputs = [copy], used
    results = Model(g, inplace=False).run_flat([])
    by_uid = {v.uid: r for v, r in zip(used, results)}
    return [by_uid.get(v.uid) for v in copy.outputs]


def run(graph) -> list[str]:
    """Fold every node whose operands are constants (see the module's docstring); one line per fold.

    Example::

        fold_constants.run(graph)    # ['wt (permute) folded into a constant f32[3, 2]']
    """
    changes = []
    for n in list(graph.nodes):
        if n.body is not None or not n.outputs:
            continue
        opdef = ops.REGISTRY.get(n.op)
        if opdef is None:
            continue
        ins = [v for v in n.inputs if v is not None]
        if opdef.kind != "creation" and not all(v.is_constant for v in ins):
            continue
        in_bytes = sum(int(v.data.nbytes) for v in ins if v.is_constant)
        out_bytes = sum(v.type.nbytes for v in n.outputs)
        if opdef.kind != "creation" and out_bytes > GROWTH * in_bytes + SLACK:
            continue
        arrays = [v.data if v is not None and v.is_constant else None for v in n.inputs]
        results = evaluate(n, arrays)
        for v, data in zip(n.outputs, results):
            if data is None:
                continue
            c = graph.add_constant(v.name, data)
            graph.replace_uses(v, c)
        graph.nodes.remove(n)
        changes.append(f"{n.name} ({n.op}) folded into a constant {', '.join(str(v.type) for v in n.outputs)}")
    return changes
