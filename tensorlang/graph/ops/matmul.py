"""Matrix products: mm, bmm, addmm (linear layers), baddbmm.

mm is the DSL's ``C[m, n] += A[m, k] * B[k, n]``; addmm adds ``beta * bias`` (broadcast) to ``alpha * A @ B`` as an
elementwise step that a consumer in the same program (GELU, ReLU) reads through.

>>> from tensorlang.graph.ops import get
>>> get("addmm").kind
'anchor'
"""
from __future__ import annotations

from ..builder import cast
from ..builder import literal as _literal
from . import register
from .common import fail, numel, out, promote


def _mm_shape(node, a, c, batched: bool):
    if batched:
        if a.type.rank != 3 or c.type.rank != 3 or a.shape[0] != c.shape[0] or a.shape[2] != c.shape[1]:
            raise fail(node, f"cannot multiply batches {list(a.shape)} and {list(c.shape)}")
        return (a.shape[0], a.shape[1], c.shape[2])
    if a.type.rank != 2 or c.type.rank != 2 or a.shape[1] != c.shape[0]:
        raise fail(node, f"cannot multiply {list(a.shape)} and {list(c.shape)}")
    return (a.shape[0], c.shape[1])


def _product(b, node, ra, rc, a, c, batched: bool, dt: str):
    ra, rc = b.stage_of(ra), b.stage_of(rc)
    shape = _mm_shape(node, a, c, batched)
    k = a.shape[-1]

    def body(idx, ridx):
        pre = idx[:-2]
        return (f"{cast(ra.read([*pre, idx[-2], ridx[0]]), a.dtype, dt)} * "
                f"{cast(rc.read([*pre, ridx[0], idx[-1]]), c.dtype, dt)}")
    return b.stage(shape, dt, body, reduce="+", red=(k,))


def _mm_infer(batched, first):
    def infer(node):
        a, c = node.inputs[first], node.inputs[first + 1]
        return out(_mm_shape(node, a, c, batched), promote(*(v.dtype for v in node.inputs if v is not None)))
    return infer


def _mm_lower(batched):
    def lower(b, node, refs):
        dt = node.outputs[0].dtype
        return [_product(b, node, refs[0], refs[1], node.inputs[0], node.inputs[1], batched, dt)]
    return lower


def _addmm_lower(batched):
    def lower(b, node, refs):
        dt = node.outputs[0].dtype
        bias, a, c = node.inputs[:3]
        acc = _product(b, node, refs[1], refs[2], a, c, batched, dt)
        beta, alpha = node.attrs.get("beta", 1), node.attrs.get("alpha", 1)

        def text(x, y):
            x = x if alpha == 1 else f"{x} * {_literal(alpha, dt)}"
            if beta == 0:
                return x
            y = cast(y, bias.dtype, dt)
            return f"{x} + {y}" if beta == 1 else f"{x} + {y} * {_literal(beta, dt)}"
        return [b.elementwise(node.outputs[0].shape, dt, [acc, refs[0]], text)]
    return lower


def _flops(first):
    return lambda node: 2 * numel(node.outputs[0].shape) * node.inputs[first].shape[-1]


register("mm", "anchor", _mm_infer(False, 0), _mm_lower(False), _flops(0), family="matmul", doc="[M, K] @ [K, N]")
register("bmm", "anchor", _mm_infer(True, 0), _mm_lower(True), _flops(0), family="matmul",
         doc="[B, M, K] @ [B, K, N] (matmul of 3-d and 4-d tensors)")
register("addmm", "anchor", _mm_infer(False, 1), _addmm_lower(False), _flops(1), family="matmul",
         doc="beta * bias + alpha * A @ B (linear)")
register("baddbmm", "anchor", _mm_infer(True, 1), _addmm_lower(True), _flops(1), family="matmul",
         doc="beta * bias + alpha * bmm")
