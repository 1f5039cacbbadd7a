"""Algebraic simplification: rewrites that compute the same with fewer or cheaper nodes.

- ``add(mm(a, b), c)`` (c a bias that broadcasts to the product, or the product's shape) is ``addmm(c, a, b)``,
  and ``add(bmm(a, b), c)`` is ``baddbmm``: the bias becomes part of the matmul's program;
- ``x / c`` for a constant number c is ``x * (1 / c)``;
- ``(x * a) * b`` and ``(x + a) + b`` with numbers a and b fold the numbers into one (rounding may differ in the
  last bit, as any compiler's reassociation of constants);
- ``neg(neg(x))`` is x, ``sub(x, neg(y))`` is ``add(x, y)``, ``add(x, neg(y))`` is ``sub(x, y)``;
- ``relu(relu(x))`` and ``relu(hardtanh(x, 0, m))`` are one op; ``reciprocal(sqrt(x))`` is ``rsqrt(x)``;
- ``where(c, x, x)`` is x.

>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((2, 3), "f32"))
>>> g.outputs = [g.add_node("div.Tensor", [x, None], {"other": 4.0}, [TensorType((2, 3), "f32")],
...                         name="d").outputs[0]]
>>> run(g)
['d: x / 4.0 is x * 0.25']
>>> g.nodes[0].op, g.nodes[0].attrs["other"]
('mul.Tensor', 0.25)
"""
from __future__ import annotations

from ..ops.common import broadcast_shapes


def _single_use(graph, v) -> bool:
    count = sum(1 for n in graph.nodes for u in n.inputs if u is v) + sum(1 for o in graph.outputs if o is v)
    return count == 1


def _number(node, name="other"):
    x = node.attrs.get(name)
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def _rewire(graph, node, new_op, inputs, attrs, changes, why):
    node.op, node.inputs, node.attrs = new_op, list(inputs), dict(attrs)
    changes.append(f"{node.name}: {why}")


def run(graph) -> list[str]:
    """Apply the rewrites above until none applies (each node at most a few times).

    Example::

        simplify.run(graph)  # ['d: x / 4.0 is x * 0.25']
    """
    changes: list[str] = []
    for _ in range(4):
        before = len(changes)
        _round(graph, changes)
        if len(changes) == before:
            break
    return changes


def _round(graph, changes) -> None:
    for n in list(graph.nodes):
        if n not in graph.nodes or n.body is not None or not n.outputs:
            continue  # every rewrite below is of an op with an output
        ins = n.inputs
        out = n.outputs[0]
        p = [v.producer if v is not None else None for v in ins]
        if n.op == "add.Tensor" and len(ins) > 1 and ins[1] is not None and n.attrs.get("alpha", 1) == 1:
            for k in (0, 1):
                prod, bias = p[k], ins[1 - k]
                if prod is None or prod.op not in ("mm", "bmm") or prod.body is not None or \
                        not _single_use(graph, ins[k]) or bias.dtype != out.dtype:
                    continue
                try:
                    fits = broadcast_shapes(prod.outputs[0].shape, bias.shape) == prod.outputs[0].shape
                except Exception:
                    fits = False
                if not fits or out.shape != prod.outputs[0].shape:
                    continue
                new = "addmm" if prod.op == "mm" else "baddbmm"
                _rewire(graph, prod, new, [bias, *prod.inputs], {"beta": 1, "alpha": 1}, changes,
                        f"{prod.op} + {bias.name} ({n.name}) is {new}")
                graph.replace_uses(out, prod.outputs[0])
                graph.nodes.remove(n)
                # the bias must be defined before the matmul: move the matmul down to where the add was
                graph.nodes.remove(prod)
                graph.nodes.insert(_position_after_inputs(graph, prod), prod)
                break
            continue
        if n.op in ("div.Tensor", "div.Scalar") and (len(ins) < 2 or ins[1] is None):
            c = _number(n)
            if c not in (None, 0) and out.dtype in ("f32", "f64") and ins[0].dtype in ("f32", "f64"):
                _rewire(graph, n, "mul.Tensor", [ins[0], None], {"other": 1.0 / c}, changes,
                        f"x / {c} is x * {1.0 / c:g}")
            continue
        if n.op in ("mul.Tensor", "mul.Scalar", "add.Tensor", "add.Scalar") and (len(ins) < 2 or ins[1] is None) \
                and p[0] is not None and p[0].op.split(".")[0] == n.op.split(".")[0] and p[0].body is None:
            inner = p[0]
            a, b = _number(inner), _number(n)
            if a is None or b is None or (len(inner.inputs) > 1 and inner.inputs[1] is not None) or \
                    inner.attrs.get("alpha", 1) != 1 or n.attrs.get("alpha", 1) != 1 or \
                    not _single_use(graph, ins[0]) or inner.inputs[0].dtype not in ("f32", "f64"):
                continue
            value = a * b if n.op.startswith("mul") else a + b
            _rewire(graph, n, n.op, [inner.inputs[0], None], {**n.attrs, "other": value}, changes,
                    f"two {n.op.split('.')[0]}s by numbers ({inner.name}, {n.name}) are one by {value:g}")
            graph.nodes.remove(inner)
            continue
        if n.op == "neg" and p[0] is not None and p[0].op == "neg" and p[0].body is None:
            graph.replace_uses(out, p[0].inputs[0])
            graph.nodes.remove(n)
            changes.append(f"{n.name}: neg(neg(x)) is x")
            continue
        if n.op in ("sub.Tensor", "add.Tensor") and len(ins) > 1 and p[1] is not None and p[1].op == "neg" and \
                n.attrs.get("alpha", 1) == 1 and p[1].body is None:
            new = "add.Tensor" if n.op == "sub.Tensor" else "sub.Tensor"
            _rewire(graph, n, new, [ins[0], p[1].inputs[0]], {}, changes,
                    f"{n.op.split('.')[0]}(x, neg(y)) is {new.split('.')[0]}(x, y)")
            continue
        if n.op == "relu" and p[0] is not None and p[0].body is None and _single_use(graph, ins[0]) and (
                p[0].op == "relu" or (p[0].op == "hardtanh" and p[0].attrs.get("min_val", -1) == 0)):
            graph.replace_uses(out, ins[0])
            graph.nodes.remove(n)
            changes.append(f"{n.name}: relu of {p[0].op} ({p[0].name}) is the {p[0].op}")
            continue
        if n.op == "reciprocal" and p[0] is not None and p[0].op == "sqrt" and p[0].body is None:
            _rewire(graph, n, "rsqrt", [p[0].inputs[0]], {}, changes, "reciprocal(sqrt(x)) is rsqrt(x)")
            continue
        if n.op == "where.self" and len(ins) == 3 and ins[1] is not None and ins[1] is ins[2] and \
                ins[1].type == out.type:
            graph.replace_uses(out, ins[1])
            graph.nodes.remove(n)
            changes.append(f"{n.name}: where(c, x, x) is x")


def _position_after_inputs(graph, node) -> int:
    """The index where `node` can go: after every producer of its operands, before its first user."""
    producers = {id(v.producer) for v in node.inputs if v is not None and v.producer is not None}
    at = 0
    for i, m in enumerate(graph.nodes):
        if id(m) in producers:
            at = i + 1
    return at
