"""Normalisations: batch norm (inference), layer norm, group norm, softmax and log_softmax.

Batch norm with running statistics is elementwise in its input (a per-channel scale and shift), so it joins the
expression of its producer or consumer; constant folding usually folds it into the convolution before it. Layer and
group norm take the mean, then the mean of squared deviations (two passes, as torch), then normalise; softmax
subtracts the row maximum before the exponential.

>>> from tensorlang.graph.ops import get
>>> get("_softmax").kind, get("_native_batch_norm_legit_no_training").kind
('reduce', 'elementwise')
"""
from __future__ import annotations

from ..affine import divmod_exact
from ..builder import MapRef, cast, literal
from . import register
from .common import as_float, fail, norm_dim, numel, out
from .reduce import reduction


def _channel(ref, c: int, rank: int):
    """A per-channel vector [C] read as [C, 1, ...] so that it broadcasts along dim 1 of a rank-`rank` tensor."""
    return MapRef(ref, (c,) + (1,) * (rank - 2), lambda idx: [idx[0]])


def _bn_infer(node):
    x = node.inputs[0]
    if x.type.rank < 2:
        raise fail(node, f"input {list(x.shape)}: batch norm needs [N, C, ...]")
    return out(x.shape, x.dtype) + out((0,), x.dtype) + out((0,), x.dtype)


def _bn_lower(b, node, refs):
    x = node.inputs[0]
    dt, c, rank = x.dtype, x.shape[1], x.type.rank
    eps = node.attrs.get("eps", 1e-5)
    ins = [refs[0]] + [_channel(r, c, rank) if r is not None else None for r in refs[1:5]]
    weight, bias, mean, var = ins[1:5]
    present = [r for r in (ins[0], mean, var, weight, bias) if r is not None]

    def text(*vals):
        it = iter(vals)
        xx, mm, vv = next(it), next(it), next(it)
        w = next(it) if weight is not None else None
        bb = next(it) if bias is not None else None
        y = f"({xx} - {mm}) / sqrt({vv} + {literal(eps, dt)})"
        if w is not None:
            y = f"{y} * {w}"
        if bb is not None:
            y = f"{y} + {bb}"
        return y
    return [b.elementwise(x.shape, dt, present, text), None, None]


register("_native_batch_norm_legit_no_training", "elementwise", _bn_infer, _bn_lower,
         lambda node: 4 * node.inputs[0].type.numel, family="normalisation",
         doc="inference (running statistics), weight and bias optional; folded into a preceding convolution")


def _bn_eval_infer(node):
    if node.attrs.get("training"):
        raise fail(node, "batch norm in training mode is not supported; compile the module in eval mode")
    if node.inputs[3] is None or node.inputs[4] is None:
        raise fail(node, "batch norm without running statistics is not supported")
    return _bn_infer(node)


register("native_batch_norm", "elementwise", _bn_eval_infer, _bn_lower, lambda node: 4 * node.inputs[0].type.numel,
         family="normalisation", doc="with training=False (as torch.compile's decompositions give it)")


def _ln_axis(node):
    x = node.inputs[0]
    k = len(node.attrs["normalized_shape"])
    if tuple(x.shape[x.type.rank - k:]) != tuple(node.attrs["normalized_shape"]):
        raise fail(node, f"normalized_shape {node.attrs['normalized_shape']} is not the end of {list(x.shape)}")
    return x.type.rank - k


def _ln_infer(node):
    x = node.inputs[0]
    axis = _ln_axis(node)
    stat = tuple(x.shape[:axis]) + (1,) * (x.type.rank - axis)
    dt = as_float(x.dtype)
    return out(x.shape, dt) + out(stat, dt) + out(stat, dt)


def _moments(b, x, shape, dims, dt, src_dtype, eps):
    """(mean, rstd) stages of `x` over `dims` (kept as size 1)."""
    n = numel([shape[d] for d in dims])
    s = reduction(b, x, shape, dims, True, "+", dt, src_dtype)
    mean = b.materialize(b.elementwise(s.shape, dt, [s], lambda a: f"{a} * {literal(1.0 / n, dt)}"))
    centred = b.elementwise(shape, dt, [x, mean], lambda a, m: f"{cast(a, src_dtype, dt)} - {m}")
    sq = reduction(b, centred, shape, dims, True, "+", dt, dt, pre=lambda t: f"{t} * {t}")
    rstd = b.materialize(b.elementwise(sq.shape, dt, [sq],
                                       lambda a: f"1.0 / sqrt({a} * {literal(1.0 / n, dt)} + {literal(eps, dt)})"))
    return mean, rstd


def _ln_lower(b, node, refs):
    xv = node.inputs[0]
    dt = node.outputs[0].dtype
    axis = _ln_axis(node)
    x = b.stage_of(refs[0])
    dims = list(range(axis, xv.type.rank))
    mean, rstd = _moments(b, x, xv.shape, dims, dt, xv.dtype, node.attrs.get("eps", 1e-5))
    present = [r for r in (x, mean, rstd, refs[1], refs[2]) if r is not None]
    has_w, has_b = refs[1] is not None, refs[2] is not None

    def text(*vals):
        xx, mm, rr = vals[:3]
        y = f"({cast(xx, xv.dtype, dt)} - {mm}) * {rr}"
        if has_w:
            y = f"{y} * {vals[3]}"
        if has_b:
            y = f"{y} + {vals[3 + has_w]}"
        return y
    return [b.elementwise(xv.shape, dt, present, text), mean, rstd]


register("native_layer_norm", "reduce", _ln_infer, _ln_lower, lambda node: 8 * node.inputs[0].type.numel,
         family="normalisation", doc="over the last dims, weight and bias optional; mean and rstd outputs too")


def _gn_infer(node):
    x = node.inputs[0]
    n, g = node.attrs["N"], node.attrs["group"]
    c = x.shape[1]
    if x.type.rank < 2 or c % g:
        raise fail(node, f"{g} groups do not divide the {c} channels of {list(x.shape)}")
    dt = as_float(x.dtype)
    return out(x.shape, dt) + out((n, g), dt) + out((n, g), dt)


def _gn_lower(b, node, refs):
    xv = node.inputs[0]
    dt = node.outputs[0].dtype
    g = node.attrs["group"]
    n, c, *spatial = xv.shape
    cg = c // g
    x = b.stage_of(refs[0])
    grouped = (n, g, cg, *spatial)  # x read as [N, G, C/G, ...]: the same buffer
    xg = MapRef(x, grouped, lambda idx: [idx[0], idx[1] * cg + idx[2], *idx[3:]])
    dims = list(range(2, len(grouped)))
    mean, rstd = _moments(b, xg, grouped, dims, dt, xv.dtype, node.attrs.get("eps", 1e-5))
    w, bias = refs[1], refs[2]

    def body(idx, _):
        grp, _c = divmod_exact(idx[1], cg, b.ranges)
        at = [idx[0], grp] + [idx[0] * 0] * len(dims)
        y = f"({cast(x.read(idx), xv.dtype, dt)} - {mean.read(at)}) * {rstd.read(at)}"
        if w is not None:
            y = f"{y} * {w.read([idx[1]])}"
        if bias is not None:
            y = f"{y} + {bias.read([idx[1]])}"
        return y
    stats = [MapRef(r, (n, g), lambda idx: [idx[0], idx[1]] + [idx[0] * 0] * len(dims)) for r in (mean, rstd)]
    return [b.stage(xv.shape, dt, body, decl=grouped)] + stats


register("native_group_norm", "reduce", _gn_infer, _gn_lower, lambda node: 8 * node.inputs[0].type.numel,
         family="normalisation", doc="groups, weight and bias optional")


def _batch_stats_infer(node):
    x = node.inputs[0]
    if x.type.rank < 2:
        raise fail(node, f"input {list(x.shape)}: batch norm needs [N, C, ...]")
    dt = as_float(x.dtype)
    return out(x.shape, dt) + out((x.shape[1],), dt) + out((x.shape[1],), dt)


def _batch_stats_lower(b, node, refs):
    """Normalised by the statistics of the batch itself, per channel (instance norm: torch's view of [N, C, ...]
    as [1, N*C, ...]); the mean and rstd outputs too."""
    xv = node.inputs[0]
    dt = node.outputs[0].dtype
    c, rank = xv.shape[1], xv.type.rank
    x = b.stage_of(refs[0])
    dims = [0] + list(range(2, rank))
    mean, rstd = _moments(b, x, xv.shape, dims, dt, xv.dtype, node.attrs.get("eps", 1e-5))
    scale = [_channel(r, c, rank) for r in refs[1:3] if r is not None]
    has_w = refs[1] is not None

    def text(xx, mm, rr, *wb):
        y = f"({cast(xx, xv.dtype, dt)} - {mm}) * {rr}"
        if has_w:
            y = f"{y} * {wb[0]}"
        if len(wb) > has_w:
            y = f"{y} + {wb[-1]}"
        return y
    stats = [MapRef(r, (c,), lambda idx: [idx[0] * 0, idx[0]] + [idx[0] * 0] * (rank - 2)) for r in (mean, rstd)]
    return [b.elementwise(xv.shape, dt, [x, mean, rstd, *scale], text)] + stats


register("_native_batch_norm_legit.no_stats", "reduce", _batch_stats_infer, _batch_stats_lower,
         lambda node: 8 * node.inputs[0].type.numel, family="normalisation",
         doc="the batch's own statistics, without running ones (instance norm); weight and bias optional")


def _softmax_infer(node):
    x = node.inputs[0]
    norm_dim(node.attrs["dim"], x.type.rank)
    return out(x.shape, as_float(x.dtype))


def _softmax_lower(log: bool):
    def lower(b, node, refs):
        xv = node.inputs[0]
        dt = node.outputs[0].dtype
        d = norm_dim(node.attrs["dim"], xv.type.rank) if xv.shape else 0
        x = b.stage_of(refs[0])
        shape = xv.shape
        if not shape:  # one element: 1 (log: 0), NaN where it is not finite, as torch's exp(x - x)
            return [b.elementwise((), dt, [x], lambda a: f"{a} - {a}" if log else f"{a} - {a} + 1.0")]
        mx = reduction(b, x, shape, [d], True, "max", dt, xv.dtype)
        if log:
            e = b.elementwise(shape, dt, [x, mx], lambda a, m: f"exp({cast(a, xv.dtype, dt)} - {m})")
            s = reduction(b, e, shape, [d], True, "+", dt, dt)
            return [b.elementwise(shape, dt, [x, mx, s], lambda a, m, t: f"{cast(a, xv.dtype, dt)} - {m} - log({t})")]
        e = b.materialize(b.elementwise(shape, dt, [x, mx], lambda a, m: f"exp({cast(a, xv.dtype, dt)} - {m})"))
        s = reduction(b, e, shape, [d], True, "+", dt, dt)
        return [b.elementwise(shape, dt, [e, s], lambda a, t: f"{a} / {t}")]
    return lower


register("_softmax", "reduce", _softmax_infer, _softmax_lower(False), lambda node: 5 * node.inputs[0].type.numel,
         family="normalisation", doc="any dim (max subtracted first)")
register("_log_softmax", "reduce", _softmax_infer, _softmax_lower(True), lambda node: 5 * node.inputs[0].type.numel,
         family="normalisation", doc="any dim")
