"""Random graphs for fuzzing the graph passes and the memory planner (numpy only, no torch).

`random_graph(seed)` builds a graph of convolutions (with and without bias, padding, groups), batch norms with
constant statistics, elementwise chains, residual adds, permutes and their inverses, views, sums, softmax, matmuls
and weight permutes, with one or two outputs. It draws branchy graphs too: values with several readers; a `cat`
along channels of two or three branches of one value (the value itself as in DenseNet, 1x1 and 3x3 convolutions
with relu, a 3x3 max pool as in GoogLeNet); a channel shuffle (view [N, g, C/g, H, W], permute (0, 2, 1, 3, 4),
view back, as in ShuffleNetV2); and residual adds whose branch changes layout on the way (a permute and its inverse,
a view and back, or channels-last and a linear layer as in ConvNeXt). The same seed gives the same graph, so a test
can build it twice and compile one copy with a pass and one without.

>>> g = random_graph(7)
>>> g.name, len(g.outputs) in (1, 2)
('random7', True)
"""
from __future__ import annotations

import numpy as np

from tensorlang.graph.ir import Graph, TensorType
from tensorlang.graph.ops import get


def _node(g, op, inputs, attrs, name=None):
    probe = g.make_node(op, inputs, attrs, [])
    types = get(op).infer(probe)
    g._node_names.discard(probe.name)
    return g.add_node(op, inputs, attrs, types, name=name or op.split(".")[0])


def _concat_branches(g, rng, const, v):
    """`cat` along channels of 2 or 3 branches of `v`; at most 24 channels come out."""
    ch = v.shape[1]
    parts = []
    for _ in range(int(rng.integers(2, 4))):
        kind = int(rng.integers(4)) if ch <= 8 else int(rng.integers(1, 3))
        if kind == 0:
            parts.append(v)
        elif kind in (1, 2):
            k, f = 2 * kind - 1, int(rng.choice([4, 8]))
            conv = _node(g, "convolution", [v, const((f, ch, k, k)), const((f,))],
                         {"stride": [1, 1], "padding": [k // 2] * 2, "dilation": [1, 1], "transposed": False,
                          "output_padding": [0, 0], "groups": 1}).outputs[0]
            parts.append(_node(g, "relu", [conv], {}).outputs[0])
        else:
            parts.append(_node(g, "max_pool2d_with_indices", [v], {"kernel_size": [3, 3], "stride": [1, 1],
                                                                   "padding": [1, 1]}).outputs[0])
    return _node(g, "cat", parts, {"dim": 1}).outputs[0]


def _channel_shuffle(g, rng, v):
    """ShuffleNetV2's shuffle of `v`'s channels in `groups` groups (a 4-d `v` whose channels divide)."""
    n, ch, h, w = v.shape
    groups = int(rng.choice([k for k in (2, 3, 4) if ch % k == 0 and ch > k]))
    t = _node(g, "view", [v], {"size": [n, groups, ch // groups, h, w]}).outputs[0]
    t = _node(g, "permute", [t], {"dims": [0, 2, 1, 3, 4]}).outputs[0]
    return _node(g, "view", [t], {"size": [n, ch, h, w]}).outputs[0]


def _residual_through_layout(g, rng, const, v):
    """`v` + a branch of `v` that leaves `v`'s layout and comes back: a permute and its inverse (with or without an
    elementwise op between), a view and back around a softmax or relu, or ConvNeXt's channels-last linear layer."""
    n, ch, h, w = v.shape
    kind = int(rng.integers(3))
    if kind == 0:
        dims = [int(d) for d in rng.permutation(4)]
        dims = dims if dims != [0, 1, 2, 3] else [0, 2, 3, 1]
        t = _node(g, "permute", [v], {"dims": dims}).outputs[0]
        if rng.random() < 0.7:
            t = _node(g, str(rng.choice(["tanh", "relu", "sigmoid"])), [t], {}).outputs[0]
        branch = _node(g, "permute", [t], {"dims": [int(d) for d in np.argsort(dims)]}).outputs[0]
    elif kind == 1:
        size = [n, ch, h * w] if rng.random() < 0.5 else [n, ch * h, w]
        t = _node(g, "view", [v], {"size": size}).outputs[0]
        t = _node(g, "_softmax", [t], {"dim": 2, "half_to_float": False}).outputs[0] if rng.random() < 0.5 else \
            _node(g, "relu", [t], {}).outputs[0]
        branch = _node(g, "view", [t], {"size": [n, ch, h, w]}).outputs[0]
    else:
        t = _node(g, "permute", [v], {"dims": [0, 2, 3, 1]}).outputs[0]
        t = _node(g, "view", [t], {"size": [-1, ch]}).outputs[0]
        wt = _node(g, "permute", [const((ch, ch))], {"dims": [1, 0]}).outputs[0]
        t = _node(g, "add.Tensor", [_node(g, "mm", [t, wt], {}).outputs[0], const((ch,))], {}).outputs[0]
        t = _node(g, "view", [t], {"size": [n, h, w, ch]}).outputs[0]
        branch = _node(g, "permute", [t], {"dims": [0, 3, 1, 2]}).outputs[0]
    pair = [v, branch] if rng.random() < 0.5 else [branch, v]
    return _node(g, "add.Tensor", pair, {}).outputs[0]


def random_graph(seed: int, spatial: tuple[int, int] = (6, 5)) -> Graph:
    """A random graph (see the module's docstring) on a batch of 2 images of `spatial` height and width.

    >>> g = random_graph(3)
    >>> g.inputs[0].shape[0], g.inputs[0].shape[2:]
    (2, (6, 5))
    """
    rng = np.random.default_rng(seed)
    g = Graph(f"random{seed}")
    c = int(rng.choice([4, 8, 16]))
    x = g.add_input("x", TensorType((2, c, *spatial), "f32"))
    values = [x]

    def const(shape, lo=-1.0, hi=1.0):
        return g.add_constant("w", rng.uniform(lo, hi, shape).astype(np.float32))

    def pick():
        return values[int(rng.integers(len(values)))] if rng.random() < 0.4 else values[-1]
    for _ in range(int(rng.integers(4, 10))):
        if len(g.nodes) >= 14:  # branchy steps add several nodes: keep the graph small
            break
        v = pick()
        choice = rng.integers(15)
        if v.type.rank != 4:
            v = values[0]
        ch = v.shape[1]
        if choice == 0:
            groups = int(rng.choice([1, ch])) if ch > 1 else 1
            f = ch if groups > 1 else int(rng.choice([ch, 8, 16]))
            w = const((f, ch // groups, 3, 3))
            b = const((f,)) if rng.random() < 0.5 else None
            out = _node(g, "convolution", [v, w, b], {"stride": [1, 1], "padding": [1, 1], "dilation": [1, 1],
                                                      "transposed": False, "output_padding": [0, 0],
                                                      "groups": groups}).outputs[0]
        elif choice == 1:
            stats = [const((ch,)), const((ch,)), const((ch,)), const((ch,), 0.5, 1.5)]
            out = _node(g, "_native_batch_norm_legit_no_training", [v, *stats],
                        {"momentum": 0.1, "eps": 1e-5}).outputs[0]
        elif choice == 2:
            out = _node(g, str(rng.choice(["relu", "sigmoid", "tanh", "neg", "abs"])), [v], {}).outputs[0]
        elif choice == 3:
            out = _node(g, "hardtanh", [v], {"min_val": 0.0, "max_val": 6.0}).outputs[0]
        elif choice == 4:
            others = [u for u in values if u.type == v.type and u is not v]
            other = others[int(rng.integers(len(others)))] if others else v
            out = _node(g, "add.Tensor", [v, other], {}).outputs[0]
        elif choice == 5:
            out = _node(g, "mul.Tensor", [v, None], {"other": float(rng.choice([1.0, 0.5, -2.0]))}).outputs[0]
        elif choice == 6:
            t = _node(g, "permute", [v], {"dims": [0, 2, 3, 1]}).outputs[0]
            t = _node(g, "exp", [_node(g, "neg", [_node(g, "abs", [t], {}).outputs[0]], {}).outputs[0]], {}).outputs[0]
            out = _node(g, "permute", [t], {"dims": [0, 3, 1, 2]}).outputs[0]
        elif choice == 7:
            flat = _node(g, "view", [v], {"size": [v.shape[0], -1]}).outputs[0]
            out = _node(g, "view", [_node(g, "relu", [flat], {}).outputs[0]], {"size": list(v.shape)}).outputs[0]
        elif choice == 8:
            s = _node(g, "sum.dim_IntList", [v], {"dim": [1], "keepdim": True}).outputs[0]
            out = _node(g, "add.Tensor", [v, s], {}).outputs[0]
        elif choice == 9:
            out = _node(g, "_softmax", [v], {"dim": 3, "half_to_float": False}).outputs[0]
        elif choice == 10:
            flat = _node(g, "view", [v], {"size": [-1, v.shape[3]]}).outputs[0]
            w = const((v.shape[3], v.shape[3]))
            wt = _node(g, "permute", [w], {"dims": [1, 0]}).outputs[0]
            mm = _node(g, "mm", [flat, wt], {}).outputs[0]
            mm = _node(g, "add.Tensor", [mm, const((v.shape[3],))], {}).outputs[0]
            out = _node(g, "view", [mm], {"size": list(v.shape)}).outputs[0]
        elif choice == 11:
            out = _node(g, "clone", [v], {}).outputs[0]
            if rng.random() < 0.5:
                _node(g, "exp", [v], {})  # dead
        elif choice == 12:
            out = _concat_branches(g, rng, const, v)
            if rng.random() < 0.4:  # ShuffleNetV2's unit: concatenate, then shuffle
                out = _channel_shuffle(g, rng, out)
        elif choice == 13:
            out = _channel_shuffle(g, rng, v)
        else:
            out = _residual_through_layout(g, rng, const, v)
        values.append(out)
    extra = values[int(rng.integers(1, len(values)))]
    g.outputs = [values[-1]] + ([extra] if extra is not values[-1] and rng.random() < 0.5 else [])
    return g


def inputs_for(graph: Graph, seed: int = 0) -> list[np.ndarray]:
    """Random inputs of the graph's shapes and dtypes."""
    rng = np.random.default_rng(seed + 1000)
    return [rng.uniform(-1, 1, v.shape).astype(v.type.numpy_dtype) for v in graph.inputs]
