"""Winograd convolution: a 3x3 stride-1 convolution with many channels becomes F(2x2, 3x3) (`ops/winograd.py`).

A convolution is rewritten when it is 2-d, f32, groups 1, a 3x3 kernel of stride 1 and dilation 1, with constant
weights (and bias), an output of even height and width, at least `MIN_CHANNELS` input and output channels and at
least `MIN_TILES` 2x2 output tiles. It becomes ``winograd_input`` -> ``bmm`` with the transformed weights (a
constant [16, F, C], computed now) -> ``winograd_output`` (with the bias); the elementwise ops after the
convolution fuse into the output transform as they did into the convolution. The 16 products do 2.25x fewer
multiplications than the direct convolution; the transforms are additions.

It pays where the 2x2 tiles are many enough to share the transformed weights ([16, F, C]): with few tiles and many
channels the weights are read for a handful of columns each (an 8x8 image with 512 channels: 16 tiles, 16 MB of
weights), and the direct convolution wins. Hence at least 32 tiles; ResNet's 7x7 layers (odd outputs) are left
alone too. The figures are on the benchmarks page ("The `winograd` pass, layer by layer"). The pass option
``winograd`` (False) turns the pass off.

Results differ from the direct convolution by rounding only (the transforms' constants are 0, ±1 and ±0.5).

>>> import numpy as np
>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((1, 8, 6, 6), "f32"))
>>> w = g.add_constant("w", np.ones((8, 8, 3, 3), np.float32))
>>> c = g.add_node("convolution", [x, w, None], {"stride": [1, 1], "padding": [1, 1], "dilation": [1, 1],
...                "transposed": False, "output_padding": [0, 0], "groups": 1},
...                [TensorType((1, 8, 6, 6), "f32")], name="c")
>>> g.outputs = [c.outputs[0]]
>>> run(g, min_channels=8, min_tiles=4)
['c (3x3 convolution, 8 -> 8 channels, 6x6) as Winograd F(2x2, 3x3): 9 tiles, weights transformed to [16, 8, 8]']
>>> [n.op for n in g.nodes]
['winograd_input', 'bmm', 'winograd_output']
"""
from __future__ import annotations

from ..ir import Node, TensorType
from ..ops.conv import conv_out_shape, conv_params
from ..ops.winograd import transform_weights

#: the fewest input and output channels, and 2x2 output tiles (over the batch), for the rewrite to pay here
MIN_CHANNELS, MIN_TILES = 64, 32


def eligible(node: Node, min_channels: int = MIN_CHANNELS, min_tiles: int = MIN_TILES) -> bool:
    """Whether the pass rewrites `node` (see the module's docstring for the conditions).

    >>> from tensorlang.graph.ir import Node, Value
    >>> import numpy as np
    >>> x = Value("x", TensorType((1, 128, 28, 28), "f32"))
    >>> w = Value("w", TensorType((128, 128, 3, 3), "f32"), data=np.zeros((128, 128, 3, 3), np.float32))
    >>> eligible(Node("convolution", [x, w, None], {"stride": [1, 1], "padding": [1, 1], "dilation": [1, 1]}, []))
    True
    """
    if node.op != "convolution" or node.body is not None or len(node.inputs) < 2:
        return False
    x, w = node.inputs[0], node.inputs[1]
    bias = node.inputs[2] if len(node.inputs) > 2 else None
    if x.type.rank != 4 or x.dtype != "f32" or w.dtype != "f32" or not w.is_constant or w.shape[2:] != (3, 3):
        return False
    if bias is not None and (not bias.is_constant or bias.dtype != "f32"):
        return False
    if node.attrs.get("transposed"):
        return False
    _, stride, _, dilation, groups = conv_params(node)
    if groups != 1 or list(stride) != [1, 1] or list(dilation) != [1, 1]:
        return False
    n, f, oh, ow = conv_out_shape(node)
    if oh % 2 or ow % 2:
        return False
    return min(x.shape[1], f) >= min_channels and n * (oh // 2) * (ow // 2) >= min_tiles


def run(graph, min_channels: int = MIN_CHANNELS, min_tiles: int = MIN_TILES) -> list[str]:
    """Rewrite each eligible convolution as Winograd F(2x2, 3x3); one line per convolution rewritten.

    Example::

        winograd.run(graph)   # ['conv (3x3 convolution, 128 -> 128 channels, 28x28) as Winograd ...']
    """
    changes = []
    for conv in list(graph.nodes):
        if not eligible(conv, min_channels, min_tiles):
            continue
        x, w = conv.inputs[0], conv.inputs[1]
        bias = conv.inputs[2] if len(conv.inputs) > 2 else None
        _, _, padding, _, _ = conv_params(conv)
        n, f, oh, ow = conv_out_shape(conv)
        c, tiles = x.shape[1], [oh // 2, ow // 2]
        t = n * tiles[0] * tiles[1]
        u = graph.add_constant(f"{w.name}_winograd", transform_weights(w.data))
        where = dict(source=conv.source)
        v = graph.make_node("winograd_input", [x], {"padding": list(padding), "tiles": tiles},
                            [TensorType((16, c, t), "f32")], name=f"{conv.name}_in", **where)
        m = graph.make_node("bmm", [u, v.outputs[0]], {}, [TensorType((16, f, t), "f32")],
                            name=f"{conv.name}_products", **where)
        y = graph.make_node("winograd_output", [m.outputs[0], bias], {"tiles": tiles, "out": [n, f, oh, ow]},
                            [conv.outputs[0].type], name=f"{conv.name}_out", **where)
        for node in (v, m, y):
            graph.insert_before(conv, node)
        graph.replace_uses(conv.outputs[0], y.outputs[0])
        graph.nodes.remove(conv)
        changes.append(f"{conv.name} (3x3 convolution, {c} -> {f} channels, {oh}x{ow}) as Winograd F(2x2, 3x3): "
                       f"{t} tiles, weights transformed to [16, {f}, {c}]")
    return changes
