"""Layout transformation: chains of convolutions run in the blocked channel layout NCHW[b]c.

A *region* is a connected set of 2-d convolutions (groups 1 or depthwise, constant weights, channel counts that
divide by the block) and the elementwise ops on their results (a ReLU, a clamp, a residual add, whose other
operand, of the same shape, joins the region through a conversion; numbers and one-element constants stay as they
are). Inside a region
every value is [N, C/b, H, W, b]: each convolution becomes `convolution_blocked` with its weights and bias
transformed once, now; a value enters the region through one `layout_to_blocked` and leaves it through one
`layout_from_blocked`, so the conversions happen only at the region's ends. The block is the vector width in f32
lanes (16 with AVX-512, 8 with AVX2). A region with a single convolution is left alone (its two conversions would
cost more than the layout gains).

>>> import numpy as np
>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((1, 16, 6, 6), "f32"))
>>> def conv(v, name):
...     w = g.add_constant(name + "_w", np.ones((16, 16, 3, 3), np.float32))
...     return g.add_node("convolution", [v, w, None], {"stride": [1, 1], "padding": [1, 1], "dilation": [1, 1],
...                       "transposed": False, "output_padding": [0, 0], "groups": 1},
...                       [TensorType((1, 16, 6, 6), "f32")], name=name).outputs[0]
>>> y = g.add_node("relu", [conv(x, "c1")], {}, [TensorType((1, 16, 6, 6), "f32")], name="r").outputs[0]
>>> g.outputs = [conv(y, "c2")]
>>> run(g, block=8)[0]
'region of 2 convolutions and 1 other ops in NCHW8c: c1, r, c2; 1 conversion in, 1 out'
>>> [n.op for n in g.nodes]
['layout_to_blocked', 'convolution_blocked', 'relu', 'convolution_blocked', 'layout_from_blocked']
"""
from __future__ import annotations

import numpy as np

from .. import ops
from ..ir import Graph, Node, Value


def default_block() -> int:
    """f32 lanes of the widest vector register of this CPU (16 with AVX-512, 8 with AVX2, else 4).

    >>> default_block() in (4, 8, 16)
    True
    """
    from ...target import host_target
    return host_target().vector_bits() // 32


def _conv_ok(n: Node, b: int) -> bool:
    if n.op != "convolution" or n.body is not None:
        return False
    x, w = n.inputs[0], n.inputs[1]
    bias = n.inputs[2] if len(n.inputs) > 2 else None
    if x.type.rank != 4 or x.dtype != "f32" or not w.is_constant or (bias is not None and not bias.is_constant):
        return False
    if n.attrs.get("transposed"):
        return False
    c, f, g = x.shape[1], w.shape[0], n.attrs.get("groups", 1)
    if c % b or f % b:
        return False
    return g == 1 or (g == c and f == c and w.shape[1] == 1)


def _elementwise_ok(n: Node, blocked: set) -> bool:
    opdef = ops.REGISTRY.get(n.op)
    if n.body is not None or opdef is None or opdef.kind != "elementwise" or len(n.outputs) != 1 or \
            n.op in ("_native_batch_norm_legit_no_training", "native_batch_norm"):
        return False
    tensors = [v for v in n.inputs if v is not None and not (v.is_constant and v.type.numel == 1)]
    return any(v.uid in blocked for v in tensors) and all(v.type == n.outputs[0].type for v in tensors)


def run(graph: Graph, block: int | None = None) -> list[str]:
    """Move conv chains to the blocked layout (see the module's docstring); one line per region.

    Example::

        layout.run(graph)    # ['region of 2 convolutions and 1 other ops in NCHW16c: ...']
    """
    b = block or default_block()
    convs = {id(n) for n in graph.nodes if _conv_ok(n, b)}
    if not convs:
        return []
    blocked: set[int] = set()  # values computed in blocked layout
    member: dict[int, Node] = {}
    for n in graph.nodes:
        if id(n) in convs or _elementwise_ok(n, blocked):
            member[id(n)] = n
            blocked.add(n.outputs[0].uid)
    # regions: connected components of members through the values they share
    parent = {k: k for k in member}

    def find(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k
    producer = {v.uid: n for n in graph.nodes for v in n.outputs}
    for n in member.values():
        for v in n.inputs:
            if v is not None and v.uid in blocked:
                parent[find(id(producer[v.uid]))] = find(id(n))
    regions: dict[int, list[Node]] = {}
    for k, n in member.items():
        regions.setdefault(find(k), []).append(n)
    changes = []
    for nodes in regions.values():
        if sum(1 for n in nodes if n.op == "convolution") < 2:
            continue
        changes.append(_rewrite(graph, nodes, b))
    return changes


def _rewrite(graph: Graph, nodes: list[Node], b: int) -> str:
    """Rewrite one region in place."""
    region = {id(n) for n in nodes}
    new_value: dict[int, Value] = {}  # old value uid -> its blocked twin
    entries: dict[int, Value] = {}
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    placed: list[tuple[int, Node]] = []
    n_in = n_out = 0
    def blocked_operand(v, at: int):
        nonlocal n_in
        if v is None or (v.is_constant and v.type.numel == 1):
            return v
        if v.uid in new_value:
            return new_value[v.uid]
        if v.uid not in entries:
            conv_node = graph.make_node("layout_to_blocked", [v], {"block": b},
                                        ops.get("layout_to_blocked").infer(_probe(v, b)), name=f"{v.name}_blocked")
            placed.append((at, conv_node))
            entries[v.uid] = conv_node.outputs[0]
            n_in += 1
        return entries[v.uid]
    for n in sorted(nodes, key=lambda m: order[id(m)]):
        if n.op == "convolution":
            x, w = n.inputs[0], n.inputs[1]
            bias = n.inputs[2] if len(n.inputs) > 2 else None
            depthwise = n.attrs.get("groups", 1) > 1
            f, c = w.shape[0], x.shape[1]
            if depthwise:  # [C, 1, R, S] -> [C/b, R, S, b]
                wb = w.data.reshape(c // b, b, *w.shape[2:]).transpose(0, 2, 3, 1)
            else:  # [F, C, R, S] -> [F/b, C/b, R, S, b_in, b_out]
                wb = w.data.reshape(f // b, b, c // b, b, *w.shape[2:]).transpose(0, 2, 4, 5, 3, 1)
            inputs = [blocked_operand(x, order[id(n)]),
                      graph.add_constant(f"{w.name}_nchw{b}c", np.ascontiguousarray(wb))]
            if bias is not None:
                inputs.append(graph.add_constant(f"{bias.name}_nchw{b}c", bias.data.reshape(f // b, b).copy()))
            attrs = {"stride": n.attrs["stride"], "padding": n.attrs["padding"], "dilation": n.attrs["dilation"],
                     "depthwise": depthwise}
            new = graph.make_node("convolution_blocked", inputs, attrs, [], name=f"{n.name}_blocked",
                                  source=n.source)
        else:
            new = graph.make_node(n.op, [blocked_operand(v, order[id(n)]) for v in n.inputs], n.attrs, [],
                                  name=f"{n.name}_blocked",
                                  source=n.source)
        new.outputs = [Value(graph.fresh_name(new.name), t, producer=new) for t in ops.get(new.op).infer(new)]
        new_value[n.outputs[0].uid] = new.outputs[0]
        placed.append((order[id(n)], new))
    # users outside the region (and graph outputs) read the value converted back, once per value
    exits: dict[int, Value] = {}
    users = graph.users()
    graph_outputs = {v.uid for v in graph.outputs}
    for n in nodes:
        v = n.outputs[0]
        outside = [u for u in users.get(v.uid, []) if id(u) not in region]
        if not outside and v.uid not in graph_outputs:
            continue
        back = graph.make_node("layout_from_blocked", [new_value[v.uid]], {},
                               ops.get("layout_from_blocked").infer(_probe(new_value[v.uid], b)), name=f"{v.name}_nchw")
        placed.append((order[id(n)], back))
        exits[v.uid] = back.outputs[0]
        n_out += 1
    for u in graph.nodes:
        if id(u) not in region:
            u.inputs = [exits.get(v.uid, v) if v is not None else None for v in u.inputs]
    graph.outputs = [exits.get(v.uid, v) for v in graph.outputs]
    # the new nodes go where the region's nodes were, in order
    kept = [(order[id(n)], n) for n in graph.nodes if id(n) not in region]
    merged = sorted(kept + placed, key=lambda t: t[0])
    from .fusion import topological
    graph.nodes = topological([n for _, n in merged])
    names = ", ".join(n.name for n in sorted(nodes, key=lambda m: order[id(m)]))
    n_convs = sum(1 for n in nodes if n.op == "convolution")
    return (f"region of {n_convs} convolutions and {len(nodes) - n_convs} other ops in NCHW{b}c: {names}; "
            f"{n_in} conversion{'s' if n_in != 1 else ''} in, {n_out} out")


def _probe(v: Value, b: int) -> Node:
    return Node("probe", [v], {"block": b}, [])
