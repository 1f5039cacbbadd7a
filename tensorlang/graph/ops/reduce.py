"""Reductions over dims: sum, mean, amax, amin, prod, var (with correction), max.dim's values, vector norms.

A reduction reads each input element once, so an elementwise producer in the same program is read through (its
expression is substituted into the reduction); the reduced dims become reduction indices of one stage.

>>> from tensorlang.graph.ops import get
>>> get("sum.dim_IntList").kind
'reduce'
"""
from __future__ import annotations

from ..affine import Aff
from ..builder import cast, literal
from . import register
from .common import as_float, fail, norm_dims, numel, out


def reduce_shape(shape, dims, keepdim: bool) -> tuple[int, ...]:
    """The shape after reducing `dims` of `shape`.

    >>> reduce_shape((2, 3, 4), [1], True), reduce_shape((2, 3, 4), [0, 2], False)
    ((2, 1, 4), (3,))
    """
    if keepdim:
        return tuple(1 if k in dims else s for k, s in enumerate(shape))
    return tuple(s for k, s in enumerate(shape) if k not in dims)


def _dims(node, key="dim"):
    return norm_dims(node.attrs.get(key), node.inputs[0].type.rank)


def _result_dtype(node, kind):
    d = node.attrs.get("dtype") or node.inputs[0].dtype
    if kind == "mean" or kind == "var":
        return as_float(d)
    if kind in ("sum", "prod") and d in ("bool", "i32"):
        return "i64"
    return d


def reduction(b, ref, in_shape, dims, keepdim, op: str, dt: str, src_dtype: str, pre=None):
    """A stage reducing `ref` (of `in_shape`) over `dims` with `op` (+, max, min, *); `pre(text)` transforms each
    element first (as a square for variances).

    >>> from tensorlang.graph.builder import Builder
    >>> from tensorlang.graph.ir import Value, TensorType
    >>> b = Builder("s"); x = b.param(Value("x", TensorType((2, 3), "f32")))
    >>> b.set_outputs([reduction(b, x, (2, 3), [1], False, "+", "f32", "f32")]); print(b.text().splitlines()[1])
        out0[i0] += in0[i0, r0] where i0 in 0:2, r0 in 0:3
    """
    oshape = reduce_shape(in_shape, dims, keepdim)

    def body(idx, ridx):
        at, k, r = [], 0, 0
        for d in range(len(in_shape)):
            if d in dims:
                at.append(ridx[r])
                r += 1
                if keepdim:
                    k += 1
            else:
                at.append(idx[k])
                k += 1
        text = cast(ref.read(at), src_dtype, dt)
        return pre(text) if pre else text
    red = tuple(in_shape[d] for d in dims)
    if not red or numel(red) == 1:  # nothing to reduce: a copy
        return b.stage(oshape, dt, lambda idx, _: body(idx, [Aff()] * len(dims)))
    return b.stage(oshape, dt, body, reduce=op, red=red)


def _register(name, kind, op, key="dim", doc=""):
    def infer(node):
        dims = _dims(node, key)
        shape = reduce_shape(node.inputs[0].shape, dims, node.attrs.get("keepdim", False))
        return out(shape, _result_dtype(node, kind))

    def lower(b, node, refs):
        dims = _dims(node, key)
        dt = node.outputs[0].dtype
        keep = node.attrs.get("keepdim", False)
        shape = node.inputs[0].shape
        if kind == "var":
            x = b.stage_of(refs[0])
            n = numel([shape[d] for d in dims])
            corr = node.attrs.get("correction", 1)
            corr = 1 if corr is None else corr
            mean = reduction(b, x, shape, dims, True, "+", dt, node.inputs[0].dtype)
            m = b.elementwise(mean.shape, dt, [mean], lambda a: f"{a} * {literal(1.0 / n, dt)}")
            m = b.materialize(m)
            centred = b.elementwise(shape, dt, [x, m], lambda a, c: f"{cast(a, node.inputs[0].dtype, dt)} - {c}")
            sq = reduction(b, centred, shape, dims, keep, "+", dt, dt, pre=lambda t: f"{t} * {t}")
            div = max(n - corr, 0)
            scale = literal(1.0 / div, dt) if div else "inf"
            return [b.elementwise(sq.shape, dt, [sq], lambda a: f"{a} * {scale}")]
        acc = reduction(b, refs[0], shape, dims, keep, op, dt, node.inputs[0].dtype,
                        pre=(lambda t: f"{t} * {t}") if kind == "norm2" else None)
        if kind == "mean":
            n = numel([shape[d] for d in dims])
            return [b.elementwise(acc.shape, dt, [acc], lambda a: f"{a} * {literal(1.0 / n, dt)}")]
        if kind == "norm2":
            return [b.elementwise(acc.shape, dt, [acc], lambda a: f"sqrt({a})")]
        return [acc]
    register(name, "reduce", infer, lower, lambda node: node.inputs[0].type.numel * (3 if kind == "var" else 1),
             family="reduction", doc=doc)


_register("sum.dim_IntList", "sum", "+", doc="dims, keepdim, dtype")
_register("sum.default", "sum", "+", key="__all__", doc="every element")
_register("mean.dim", "mean", "+", doc="dims, keepdim, dtype")
_register("mean.default", "mean", "+", key="__all__", doc="every element")
_register("amax", "max", "max", doc="dims, keepdim")
_register("amin", "min", "min", doc="dims, keepdim")
_register("prod.dim_int", "prod", "*", doc="one dim, keepdim")
_register("var.correction", "var", "+", doc="dims, correction, keepdim (two passes: mean, then squares)")


def _norm_check(node):
    if node.attrs.get("ord", 2) != 2:
        raise fail(node, f"ord={node.attrs.get('ord')}: only the 2-norm is supported")


def _norm_infer(node):
    _norm_check(node)
    dims = _dims(node)
    shape = reduce_shape(node.inputs[0].shape, dims, node.attrs.get("keepdim", False))
    return out(shape, as_float(node.inputs[0].dtype))


def _norm_lower(b, node, refs):
    _norm_check(node)
    dims = _dims(node)
    dt = node.outputs[0].dtype
    acc = reduction(b, refs[0], node.inputs[0].shape, dims, node.attrs.get("keepdim", False), "+", dt,
                    node.inputs[0].dtype, pre=lambda t: f"{t} * {t}")
    return [b.elementwise(acc.shape, dt, [acc], lambda a: f"sqrt({a})")]


register("linalg_vector_norm", "reduce", _norm_infer, _norm_lower, lambda node: 2 * node.inputs[0].type.numel,
         family="reduction", doc="ord=2 over dims (F.normalize)")


def _maxdim_infer(node):
    shape = reduce_shape(node.inputs[0].shape, _dims(node), node.attrs.get("keepdim", False))
    return out(shape, node.inputs[0].dtype) + out(shape, "i64")


def _maxdim_lower(op):
    def lower(b, node, refs):
        return [reduction(b, refs[0], node.inputs[0].shape, _dims(node), node.attrs.get("keepdim", False), op,
                          node.outputs[0].dtype, node.inputs[0].dtype), None]
    return lower


register("max.dim", "reduce", _maxdim_infer, _maxdim_lower("max"), lambda node: node.inputs[0].type.numel,
         family="reduction", doc="the values (the indices output must be unused)")
register("min.dim", "reduce", _maxdim_infer, _maxdim_lower("min"), lambda node: node.inputs[0].type.numel,
         family="reduction", doc="the values (the indices output must be unused)")
