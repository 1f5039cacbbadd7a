"""No-op elimination: nodes whose output equals an operand go, their users reading that operand instead.

Removed: clone, alias, detach (dropout in eval mode comes out of torch.export as a clone); a view, expand or
`_to_copy` that changes nothing; an identity permute, and a permute of a permute (composed into one, or none when
they cancel, as transpose pairs do); a slice of a whole dim; a view of a view (one view); a cat of one tensor; a
pad of zeros; a repeat by ones; ``x * 1``, ``x / 1``, ``x + 0``, ``x - 0`` with a number or a constant of ones or
zeros that does not broadcast x to a larger shape; ``x ** 1``.

>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((2, 3), "f32"))
>>> t = g.add_node("permute", [x], {"dims": [1, 0]}, [TensorType((3, 2), "f32")], name="t").outputs[0]
>>> tt = g.add_node("permute", [t], {"dims": [1, 0]}, [TensorType((2, 3), "f32")], name="tt").outputs[0]
>>> g.outputs = [g.add_node("relu", [tt], {}, [TensorType((2, 3), "f32")]).outputs[0]]
>>> run(g)
['tt (permute) of t (permute) cancels out: its users read x']
"""
from __future__ import annotations

import numpy as np

from ..ops.shape import _slice_params

_IDENTITY_SCALAR = {"mul.Tensor": 1, "mul.Scalar": 1, "div.Tensor": 1, "div.Scalar": 1, "add.Tensor": 0,
                    "add.Scalar": 0, "sub.Tensor": 0, "sub.Scalar": 0}


def _is_const(node, k: int, name: str, value) -> bool:
    """Whether operand `k` (or the number under `name`) is `value` everywhere."""
    v = node.inputs[k] if k < len(node.inputs) else None
    if v is None:
        x = node.attrs.get(name)
        return isinstance(x, (int, float)) and not isinstance(x, bool) and x == value
    return v.is_constant and v.data.size > 0 and bool(np.all(v.data == value))


def _forward(node):
    """The operand whose value the node's (only) output equals, and why; or (None, '')."""
    op, ins, out = node.op, node.inputs, node.outputs[0] if node.outputs else None
    x = ins[0] if ins else None
    if out is None or x is None:
        return None, ""
    same = x.type == out.type
    if op in ("clone", "alias", "detach", "lift_fresh_copy"):
        return x, "a copy (dropout in eval mode, clone)"
    if op in ("view", "_unsafe_view", "expand", "_to_copy", "squeeze.dims", "squeeze.dim", "squeeze.default",
              "unsqueeze") and same:
        return x, "changes nothing"
    if op == "permute" and list(node.attrs["dims"]) == list(range(x.type.rank)):
        return x, "an identity permute"
    if op == "slice.Tensor" and same and _slice_params(node)[2] == 1:
        return x, "slices a whole dim"
    if op == "cat" and len([v for v in ins if v is not None]) == 1 and same:
        return x, "a cat of one tensor"
    if op == "constant_pad_nd" and not any(node.attrs["pad"]):
        return x, "pads nothing"
    if op == "repeat" and same:
        return x, "repeats once"
    if op == "pow.Tensor_Scalar" and node.attrs.get("exponent") == 1 and same:
        return x, "x ** 1"
    if op in _IDENTITY_SCALAR and same and _is_const(node, 1, "other", _IDENTITY_SCALAR[op]) and \
            node.attrs.get("alpha", 1) != 0:
        return x, f"{op.split('.')[0]} by {_IDENTITY_SCALAR[op]}"
    if op in ("mul.Tensor", "add.Tensor") and len(ins) > 1 and ins[1] is not None and ins[1].type == out.type \
            and _is_const(node, 0, "self", _IDENTITY_SCALAR[op]):
        return ins[1], f"{_IDENTITY_SCALAR[op]} {op.split('.')[0]} x"
    return None, ""


def run(graph) -> list[str]:
    """Remove no-ops and compose permute and view pairs (see the module's docstring).

    Example::

        noop.run(graph)      # ['removed clone (clone): a copy (dropout in eval mode, clone); ...']
    """
    changes = []
    for n in list(graph.nodes):
        if n.body is not None or not n.outputs:
            continue
        src = n.inputs[0] if n.inputs else None
        prev = src.producer if src is not None else None
        if n.op == "permute" and prev is not None and prev.op == "permute" and prev.body is None:
            dims = [prev.attrs["dims"][d] for d in n.attrs["dims"]]
            if dims == list(range(len(dims))):
                graph.replace_uses(n.outputs[0], prev.inputs[0])
                graph.nodes.remove(n)
                changes.append(f"{n.name} (permute) of {prev.name} (permute) cancels out: its users read "
                               f"{prev.inputs[0].name}")
            else:
                n.inputs[0], n.attrs["dims"] = prev.inputs[0], dims
                changes.append(f"{n.name} (permute) of {prev.name} (permute) composed into one permute {dims}")
            continue
        if n.op in ("view", "_unsafe_view") and prev is not None and prev.op in ("view", "_unsafe_view") \
                and prev.body is None:
            n.inputs[0] = prev.inputs[0]
            changes.append(f"{n.name} (view) of {prev.name} (view) reads {prev.inputs[0].name} directly")
            if n.inputs[0].type == n.outputs[0].type:
                graph.replace_uses(n.outputs[0], n.inputs[0])
                graph.nodes.remove(n)
            continue
        target, why = _forward(n)
        if target is not None and all(v is n.outputs[0] or not _used(graph, v) for v in n.outputs):
            graph.replace_uses(n.outputs[0], target)
            graph.nodes.remove(n)
            changes.append(f"removed {n.name} ({n.op}): {why}; its users read {target.name}")
    return changes


def _used(graph, v) -> bool:
    return any(v is u for n in graph.nodes for u in n.inputs) or any(v is o for o in graph.outputs)
