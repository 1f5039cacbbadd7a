"""The blocked channel layout NCHW[b]c that the layout pass introduces (internal ops, not ATen's).

A tensor [N, C, H, W] in blocked layout is [N, C/b, H, W, b]: channel c is block c // b, lane c % b, so that the
innermost dimension is b channels of one pixel (a vector register's worth). Convolutions in this layout read
weights as [F/b, C/b, R, S, b_in, b_out] (depthwise: [C/b, R, S, b]), transformed once at compile time.

>>> from tensorlang.graph.ops import get
>>> get("layout_to_blocked").kind, get("convolution_blocked").kind
('injective', 'anchor')
"""
from __future__ import annotations

from ..affine import divmod_exact
from ..builder import cast
from . import register
from .common import fail, numel, out, pairs


def _to_infer(node):
    b = node.attrs["block"]
    n, c, *s = node.inputs[0].shape
    if c % b:
        raise fail(node, f"{c} channels do not split into blocks of {b}")
    return out((n, c // b, *s, b), node.inputs[0].dtype)


def _to_lower(b_, node, refs):
    b = node.attrs["block"]
    from ..builder import MapRef
    return [MapRef(refs[0], node.outputs[0].shape, lambda idx: [idx[0], idx[1] * b + idx[-1], *idx[2:-1]])]


def _from_infer(node):
    n, cb, *s, b = node.inputs[0].shape
    return out((n, cb * b, *s), node.inputs[0].dtype)


def _from_lower(bld, node, refs):
    n, cb, *s, b = node.inputs[0].shape
    x = refs[0]

    def body(idx, _):
        blk, lane = divmod_exact(idx[1], b, bld.ranges)
        return x.read([idx[0], blk, *idx[2:], lane])
    return [bld.stage(node.outputs[0].shape, node.outputs[0].dtype, body, decl=(n, cb, b, *s))]


register("layout_to_blocked", "injective", _to_infer, _to_lower, family="internal",
         doc="[N, C, ...] to [N, C/b, ..., b]")
register("layout_from_blocked", "injective", _from_infer, _from_lower, family="internal",
         doc="[N, C/b, ..., b] to [N, C, ...]")


def _conv_params(node):
    stride, padding, dilation = (pairs(node.attrs[a]) for a in ("stride", "padding", "dilation"))
    return stride, padding, dilation, bool(node.attrs.get("depthwise"))


def _conv_infer(node):
    x, w = node.inputs[0], node.inputs[1]
    stride, padding, dilation, depthwise = _conv_params(node)
    n, _cb, h, wd, _b = x.shape
    if depthwise:
        fb, r, s = w.shape[0], w.shape[1], w.shape[2]
    else:
        fb, r, s = w.shape[0], w.shape[2], w.shape[3]
    oh = (h + 2 * padding[0] - dilation[0] * (r - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (s - 1) - 1) // stride[1] + 1
    return out((n, fb, oh, ow, w.shape[-1]), x.dtype)


def _conv_lower(bld, node, refs):
    stride, padding, dilation, depthwise = _conv_params(node)
    xv, wv = node.inputs[0], node.inputs[1]
    dt = node.outputs[0].dtype
    n, cb, h, wd, b = xv.shape
    x = refs[0]
    if any(padding):
        xt = bld.tensor_of(x)
        x = bld.stage((n, cb, h + 2 * padding[0], wd + 2 * padding[1], b), xv.dtype,
                      lambda idx, _: xt.read([idx[0], idx[1], idx[2] - padding[0], idx[3] - padding[1], idx[4]]))
    else:
        x = bld.stage_of(x)
    w = bld.stage_of(refs[1])
    if depthwise:
        r, s = wv.shape[1:3]
        red: tuple[int, ...] = (r, s)

        def body(idx, ri):
            xi = [idx[0], idx[1], idx[2] * stride[0] + ri[0] * dilation[0], idx[3] * stride[1] + ri[1] * dilation[1],
                  idx[4]]
            return f"{cast(x.read(xi), xv.dtype, dt)} * {cast(w.read([idx[1], ri[0], ri[1], idx[4]]), wv.dtype, dt)}"
    else:
        r, s, bi = wv.shape[2], wv.shape[3], wv.shape[4]
        red = (cb, r, s, bi)

        def body(idx, ri):
            xi = [idx[0], ri[0], idx[2] * stride[0] + ri[1] * dilation[0], idx[3] * stride[1] + ri[2] * dilation[1],
                  ri[3]]
            wi = [idx[1], ri[0], ri[1], ri[2], ri[3], idx[4]]
            return f"{cast(x.read(xi), xv.dtype, dt)} * {cast(w.read(wi), wv.dtype, dt)}"
    acc = bld.stage(node.outputs[0].shape, dt, body, reduce="+", red=red)
    if len(node.inputs) < 3 or node.inputs[2] is None:
        return [acc]
    from ..builder import MapRef
    bias = MapRef(refs[2], (node.outputs[0].shape[1], 1, 1, node.outputs[0].shape[4]), lambda idx: [idx[0], idx[3]])
    return [bld.elementwise(node.outputs[0].shape, dt, [acc, bias], lambda a, c: f"{a} + {c}")]


def _conv_flops(node):
    w = node.inputs[1].shape
    per = numel(w[1:3]) if node.attrs.get("depthwise") else numel(w[1:5])
    return 2 * numel(node.outputs[0].shape) * per


register("convolution_blocked", "anchor", _conv_infer, _conv_lower, _conv_flops, family="internal",
         doc="2-d convolution in NCHW[b]c (groups 1 or depthwise)")
