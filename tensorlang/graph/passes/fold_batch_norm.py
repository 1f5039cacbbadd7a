"""Batch norm folded into the convolution before it: with running statistics, batch norm is a per-channel
``y = (x - mean) * scale + beta`` with ``scale = gamma / sqrt(var + eps)``, so a convolution whose output feeds
only that batch norm gets weights ``W * scale`` (per output channel) and bias ``(b - mean) * scale + beta``,
computed once now, and the batch norm goes. It needs constant weights and statistics; otherwise nothing changes.

>>> import numpy as np
>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((1, 2, 4, 4), "f32"))
>>> w = g.add_constant("w", np.ones((3, 2, 1, 1), np.float32))
>>> conv = g.add_node("convolution", [x, w, None], {"stride": [1, 1], "padding": [0, 0], "dilation": [1, 1],
...                   "transposed": False, "output_padding": [0, 0], "groups": 1}, [TensorType((1, 3, 4, 4), "f32")],
...                   name="conv")
>>> stats = [g.add_constant(k, np.full(3, v, np.float32)) for k, v in (("g", 2), ("b", 1), ("m", 0), ("v", 1))]
>>> bn = g.add_node("_native_batch_norm_legit_no_training", [conv.outputs[0], *stats], {"momentum": 0.1,
...                 "eps": 0.0}, [TensorType((1, 3, 4, 4), "f32"), TensorType((0,), "f32"), TensorType((0,), "f32")],
...                 name="bn")
>>> g.outputs = [bn.outputs[0]]
>>> run(g)
['bn (batch norm) folded into conv: weights scaled per output channel, bias (b - mean) * scale + beta']
>>> [n.op for n in g.nodes], float(conv.inputs[1].data[0, 0, 0, 0]), float(conv.inputs[2].data[0])
(['convolution'], 2.0, 1.0)
"""
from __future__ import annotations

import numpy as np

BN = "_native_batch_norm_legit_no_training"


def run(graph) -> list[str]:
    """Fold each batch norm into the convolution before it where legal (see the module's docstring).

    Example::

        fold_batch_norm.run(graph)   # ['bn (batch norm) folded into conv: ...']
    """
    users = graph.users()
    outputs = {v.uid for v in graph.outputs}
    changes = []
    for bn in list(graph.nodes):
        if bn.op not in (BN, "native_batch_norm") or bn.attrs.get("training"):
            continue
        x, gamma, beta, mean, var = (list(bn.inputs) + [None] * 5)[:5]
        conv = x.producer
        if conv is None or conv.op != "convolution" or conv.body is not None or conv.attrs.get("transposed"):
            continue
        if len(users.get(x.uid, [])) != 1 or x.uid in outputs:
            continue
        if any(u in outputs or users.get(u) for u in (v.uid for v in bn.outputs[1:])):
            continue
        w = conv.inputs[1]
        b = conv.inputs[2] if len(conv.inputs) > 2 else None
        if not all(v is None or v.is_constant for v in (w, b, gamma, beta)) or not (mean.is_constant and
                                                                                  var.is_constant):
            continue
        dt = np.float64
        scale = 1.0 / np.sqrt(var.data.astype(dt) + bn.attrs.get("eps", 1e-5))
        if gamma is not None:
            scale = scale * gamma.data.astype(dt)
        shift = -mean.data.astype(dt) * scale
        if b is not None:
            shift = shift + b.data.astype(dt) * scale
        if beta is not None:
            shift = shift + beta.data.astype(dt)
        new_w = (w.data.astype(dt) * scale.reshape((-1,) + (1,) * (w.type.rank - 1))).astype(w.type.numpy_dtype)
        new_b = shift.astype(w.type.numpy_dtype)
        conv.inputs[1] = graph.add_constant(f"{w.name}_bn", new_w)
        bias = graph.add_constant(f"{conv.name}_bias_bn", new_b)
        if len(conv.inputs) > 2:
            conv.inputs[2] = bias
        else:
            conv.inputs.append(bias)
        graph.replace_uses(bn.outputs[0], conv.outputs[0])
        graph.nodes.remove(bn)
        changes.append(f"{bn.name} (batch norm) folded into {conv.name}: weights scaled per output channel, bias "
                       "(b - mean) * scale + beta")
    return changes
