"""Random graphs for fuzzing the graph passes and the memory planner (numpy only, no torch).

`random_graph(seed)` builds a graph of convolutions (with and without bias, padding, groups), batch norms with
constant statistics, elementwise chains, residual adds, permutes and their inverses, views, sums, softmax, matmuls
and weight permutes, with one or two outputs. The same seed gives the same graph, so a test can build it twice and
compile one copy with a pass and one without.
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


def random_graph(seed: int, spatial: tuple[int, int] = (6, 5)) -> Graph:
    """A random graph (see the module's docstring) on a batch of 2 images of `spatial` height and width."""
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
        v = pick()
        choice = rng.integers(12)
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
        else:
            out = _node(g, "clone", [v], {}).outputs[0]
            if rng.random() < 0.5:
                _node(g, "exp", [v], {})  # dead
        values.append(out)
    extra = values[int(rng.integers(1, len(values)))]
    g.outputs = [values[-1]] + ([extra] if extra is not values[-1] and rng.random() < 0.5 else [])
    return g


def inputs_for(graph: Graph, seed: int = 0) -> list[np.ndarray]:
    """Random inputs of the graph's shapes and dtypes."""
    rng = np.random.default_rng(seed + 1000)
    return [rng.uniform(-1, 1, v.shape).astype(v.type.numpy_dtype) for v in graph.inputs]
