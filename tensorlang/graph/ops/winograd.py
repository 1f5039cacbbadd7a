"""Winograd's F(2x2, 3x3) convolution in three kernels: the input transform, 16 matrix products, the output transform.

A 3x3 convolution of stride 1 computes each 2x2 block of output pixels from a 4x4 block of the (padded) input with
16 multiplications per input channel instead of 36: ``Y = Aᵀ [(G g Gᵀ) ⊙ (Bᵀ d B)] A`` (Lavin and Gray, 2016). The
winograd pass (`passes/winograd.py`) rewrites a convolution into

- ``winograd_input`` (these ops): ``V[4a+b, c, t] = (Bᵀ d_t B)[a, b]`` for every channel c and 2x2 output tile t
  (t runs over batch, tile row, tile column), additions and subtractions only;
- ``bmm``: ``M[e] = U[e] @ V[e]`` for each of the 16 elements e, with ``U[e] = (G g Gᵀ)[e]`` transformed once, at
  compile time, from the weights ([16, F, C]); this is where the multiplications are, 2.25x fewer than direct;
- ``winograd_output`` (these ops): ``Y = Aᵀ M_t A`` back to [N, F, OH, OW], plus the bias; its elementwise
  consumers (ReLU, residual add) fuse into it.

The output's height and width must be even (each tile is 2x2).

>>> from tensorlang.graph.ops import get
>>> get("winograd_input").kind, get("winograd_output").kind
('anchor', 'anchor')
"""
from __future__ import annotations

import numpy as np

from ..affine import divmod_exact
from ..builder import cast
from . import register
from .common import fail, out
from .conv import add_channel_bias

#: F(2x2, 3x3): Bᵀ (4x4), G (4x3), Aᵀ (2x4)
BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)


def transform_weights(w: np.ndarray) -> np.ndarray:
    """The weights [F, C, 3, 3] as the 16 matrices ``U[4a+b] = (G g Gᵀ)[a, b]``, shape [16, F, C], in the weights'
    dtype (computed in float64).

    >>> transform_weights(np.ones((2, 3, 3, 3), np.float32)).shape
    (16, 2, 3)
    """
    f, c = w.shape[:2]
    u = np.einsum("ai,fcij,bj->abfc", G, w.astype(np.float64), G)
    return np.ascontiguousarray(u.reshape(16, f, c).astype(w.dtype))


def _tiles(node):
    th, tw = node.attrs["tiles"]
    return int(th), int(tw)


def _combine(cond, items, rows) -> str:
    """select(cond == 0, row 0, select(cond == 1, row 1, ...)) where row k adds `items` with the signs of `rows[k]`."""
    def row(coeffs):
        text = ""
        for k, s in enumerate(coeffs):
            if s == 0:
                continue
            if not text:
                text = items[k] if s > 0 else f"-{items[k]}"
            else:
                text += f" + {items[k]}" if s > 0 else f" - {items[k]}"
        return text
    texts = [row(r) for r in rows]
    expr = texts[-1]
    for k in range(len(texts) - 2, -1, -1):
        expr = f"select({cond} == {k}, {texts[k]}, {expr})"
    return expr


def _in_infer(node):
    x = node.inputs[0]
    if x.type.rank != 4:
        raise fail(node, f"input {list(x.shape)}: an NCHW tensor expected")
    n, c = x.shape[:2]
    th, tw = _tiles(node)
    return out((16, c, n * th * tw), x.dtype)


def _in_lower(b, node, refs):
    xv = node.inputs[0]
    dt = node.outputs[0].dtype
    n, c = xv.shape[:2]
    ph, pw = node.attrs["padding"]
    th, tw = _tiles(node)
    xt = b.tensor_of(refs[0])
    # the padded input over exactly the tiles' rows and columns (reads outside the input give 0)
    p = b.stage((n, c, 2 * th + 2, 2 * tw + 2), xv.dtype,
                lambda idx, _: xt.read([idx[0], idx[1], idx[2] - ph, idx[3] - pw]))

    def along_x(idx, _):  # Q[b, n, c, y, tw] = (d Bᵀ-row b) along x
        col = idx[4] * 2
        items = [cast(p.read([idx[1], idx[2], idx[3], col + k]), xv.dtype, dt) for k in range(4)]
        return _combine(idx[0], items, BT)
    q = b.stage((4, n, c, 2 * th + 2, tw), dt, along_x)

    def along_y(idx, _):  # V[4a+b, c, (n, th, tw)] = (Bᵀ-row a) of Q along y
        a, bb = divmod_exact(idx[0], 4, b.ranges)
        rest, col = divmod_exact(idx[2], tw, b.ranges)
        img, row = divmod_exact(rest, th, b.ranges)
        items = [q.read([bb, img, idx[1], row * 2 + k, col]) for k in range(4)]
        return _combine(a, items, BT)
    return [b.stage(node.outputs[0].shape, dt, along_y, decl=(4, 4, c, n, th, tw))]


def _in_flops(node):
    n, c = node.inputs[0].shape[:2]
    th, tw = _tiles(node)
    return 2 * 4 * n * c * (2 * th + 2) * tw + 2 * 16 * c * n * th * tw


def _out_infer(node):
    m = node.inputs[0]
    n, f, oh, ow = node.attrs["out"]
    th, tw = _tiles(node)
    if m.type.rank != 3 or m.shape != (16, f, n * th * tw) or oh != 2 * th or ow != 2 * tw:
        raise fail(node, f"products {list(m.shape)} do not fit the output {[n, f, oh, ow]} in 2x2 tiles")
    return out((n, f, oh, ow), m.dtype)


def _out_lower(b, node, refs):
    dt = node.outputs[0].dtype
    n, f, oh, ow = node.outputs[0].shape
    th, tw = _tiles(node)
    m = refs[0]
    t = n * th * tw

    def along_x(idx, _):  # R[a, j, f, t] = (M_t[a, :] Aᵀ-row j)
        items = [m.read([idx[0] * 4 + k, idx[2], idx[3]]) for k in range(4)]
        return _combine(idx[1], items, AT)
    r = b.stage((4, 2, f, t), dt, along_x)

    def along_y(idx, _):  # Y[n, f, 2th+i, 2tw+j] = (Aᵀ-row i) of R along a
        row, i = divmod_exact(idx[2], 2, b.ranges)
        col, j = divmod_exact(idx[3], 2, b.ranges)
        tile = (idx[0] * th + row) * tw + col
        return _combine(i, [r.read([k, j, idx[1], tile]) for k in range(4)], AT)
    y = b.stage((n, f, oh, ow), dt, along_y, decl=(n, f, th, 2, tw, 2))
    if len(node.inputs) < 2 or node.inputs[1] is None:
        return [y]
    return [add_channel_bias(b, y, refs[1], node.inputs[1].dtype, (n, f, oh, ow))]


def _out_flops(node):
    n, f, oh, ow = node.attrs["out"]
    th, tw = _tiles(node)
    return 2 * 4 * 2 * f * n * th * tw + 2 * n * f * oh * ow


register("winograd_input", "anchor", _in_infer, _in_lower, _in_flops, family="internal",
         doc="F(2x2, 3x3) input transform: [N, C, H, W] to [16, C, tiles]")
register("winograd_output", "anchor", _out_infer, _out_lower, _out_flops, family="internal",
         doc="F(2x2, 3x3) output transform: [16, F, tiles] to [N, F, OH, OW], bias")
