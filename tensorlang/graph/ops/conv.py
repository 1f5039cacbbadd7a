"""Convolution (1-d, 2-d and 3-d; stride, padding, dilation, groups, depthwise; transposed), in NCHW.

The program is the DSL's convolution: a padding stage where there is padding (reads outside the input give 0),
then the multiply-accumulate over input channels and the kernel window; a bias is an elementwise add that a
consumer in the same program reads through. Grouped convolutions loop over [N, G, F/G, ...] (the same buffer as
[N, F, ...]); depthwise ones (one input and one output channel per group) over [N, F, ...].

A transposed convolution (conv_transpose) is the convolution of its input with zeros inserted between the
elements (stride - 1 of them), padded by dilation * (kernel - 1) - padding on each side (plus output_padding at
the end), by the kernel flipped with its two channel dims swapped, at stride 1: the zero-inserted input is a stage
looped over [..., H', stride] that selects the input's element at offset 0 of each stride and 0 elsewhere.

>>> from tensorlang.graph.ops import get
>>> get("convolution").kind
'anchor'
"""
from __future__ import annotations

from ..affine import Aff, divmod_exact
from ..builder import MapRef, cast, literal
from . import register
from .common import fail, numel, out, pairs
from .vision import gather_text


def conv_params(node):
    """(spatial rank, stride, padding, dilation, groups) of a convolution node, checked.

    >>> from tensorlang.graph.ir import Node, Value, TensorType
    >>> x, w = Value("x", TensorType((1, 4, 8, 8), "f32")), Value("w", TensorType((6, 2, 3, 3), "f32"))
    >>> conv_params(Node("convolution", [x, w, None], {"stride": [2, 2], "padding": [1], "dilation": [1, 1],
    ...                  "groups": 2, "transposed": False}, []))
    (2, [2, 2], [1, 1], [1, 1], 2)
    """
    x, w = node.inputs[0], node.inputs[1]
    k = x.type.rank - 2
    if k < 1 or k > 3 or w.type.rank != k + 2:
        raise fail(node, f"input {list(x.shape)} and weight {list(w.shape)}: 1-d, 2-d or 3-d convolutions only")
    stride, padding, dilation = (pairs(node.attrs.get(a, d), k) for a, d in
                                 (("stride", 1), ("padding", 0), ("dilation", 1)))
    groups = node.attrs.get("groups", 1)
    c = x.shape[1]
    if node.attrs.get("transposed"):  # weight [C, F/G, ...]
        if groups < 1 or c % groups or w.shape[0] != c:
            raise fail(node, f"groups={groups} does not fit input channels {c} and the transposed convolution's "
                             f"weight {list(w.shape)} ([C, F/groups, ...])")
    elif groups < 1 or c % groups or w.shape[0] % groups or w.shape[1] != c // groups:
        raise fail(node, f"groups={groups} does not fit input channels {c}, filters {w.shape[0]} and weight "
                         f"{list(w.shape)}")
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise fail(node, f"stride {stride}, padding {padding}, dilation {dilation}: stride and dilation must be "
                         ">= 1 and padding >= 0")
    return k, stride, padding, dilation, groups


def conv_out_shape(node) -> tuple[int, ...]:
    """The output shape [N, F, *spatial] of a convolution node.

    >>> from tensorlang.graph.ir import Node, Value, TensorType
    >>> x, w = Value("x", TensorType((1, 4, 8, 8), "f32")), Value("w", TensorType((6, 4, 3, 3), "f32"))
    >>> conv_out_shape(Node("convolution", [x, w, None], {"stride": [2, 2], "padding": [1, 1]}, []))
    (1, 6, 4, 4)
    """
    k, stride, padding, dilation, groups = conv_params(node)
    x, w = node.inputs[0].shape, node.inputs[1].shape
    if node.attrs.get("transposed"):
        extra = _output_padding(node, k, stride, dilation)
        spatial = [(x[2 + d] - 1) * stride[d] - 2 * padding[d] + dilation[d] * (w[2 + d] - 1) + extra[d] + 1
                   for d in range(k)]
        if min(spatial) < 1:
            raise fail(node, f"padding {padding} leaves no output of the transposed convolution")
        return (x[0], w[1] * groups, *spatial)
    spatial = [(x[2 + d] + 2 * padding[d] - dilation[d] * (w[2 + d] - 1) - 1) // stride[d] + 1 for d in range(k)]
    if min(spatial) < 1:
        raise fail(node, f"the kernel {list(w[2:])} (dilation {dilation}) is larger than the padded input "
                         f"{[x[2 + d] + 2 * padding[d] for d in range(k)]}")
    return (x[0], w[0], *spatial)


def _output_padding(node, k: int, stride, dilation) -> list[int]:
    extra = pairs(node.attrs.get("output_padding", 0) or 0, k)
    if any(e < 0 or (e >= s and e >= d) for e, s, d in zip(extra, stride, dilation)):
        raise fail(node, f"output_padding {extra} must be smaller than the stride {stride} or the dilation "
                         f"{dilation}")
    return extra


def _infer(node):
    return out(conv_out_shape(node), node.inputs[0].dtype)


def _zero_inserted(b, node, x, k: int, stride, padding, dilation):
    """The input of a transposed convolution as its equivalent convolution reads it: `stride - 1` zeros between
    elements, padded by `dilation * (kernel - 1) - padding` (cropped where that is negative) and output_padding.
    Along a strided dim, position z holds the input's element (z - lo) / stride where stride divides z - lo: a read
    through an index stage of those rows."""
    xv, ksize = node.inputs[0], node.inputs[1].shape[2:]
    xt = b.tensor_of(x)
    oshape = conv_out_shape(node)
    lo = [dilation[d] * (ksize[d] - 1) - padding[d] for d in range(k)]
    size = [oshape[2 + d] + dilation[d] * (ksize[d] - 1) for d in range(k)]  # what the stride-1 convolution reads
    n_in = xv.shape[2:]
    rows = [b.stage((size[d],), "i32", lambda idx, _, d=d: (
        f"clamp(({idx[0]} - {lo[d]}) // {stride[d]}, 0, {n_in[d] - 1})")) if stride[d] > 1 else None
        for d in range(k)]

    def body(idx, _):
        at, inside = [idx[0], idx[1]], []
        for d in range(k):
            z, row = idx[2 + d], rows[d]
            if row is None:
                at.append(z - lo[d])  # outside the input: 0
                continue
            at.append(f"clamp({row.read([z])}, 0, {n_in[d] - 1})")
            inside.append(f"{z} >= {lo[d]} and {z} <= {lo[d] + stride[d] * (n_in[d] - 1)} and "
                          f"({z} - {lo[d]}) % {stride[d]} == 0")
        value = gather_text(xt, at) if inside else xt.read(at)
        return f"select({' and '.join(inside)}, {value}, {literal(0, xv.dtype)})" if inside else value
    return b.stage((xv.shape[0], xv.shape[1], *size), xv.dtype, body)


def _lower(b, node, refs):
    k, stride, padding, dilation, groups = conv_params(node)
    xv, wv, bv = node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else None
    dt = node.outputs[0].dtype
    oshape = node.outputs[0].shape
    n, c = xv.shape[:2]
    ksize = wv.shape[2:]
    x, w = refs[0], b.stage_of(refs[1])
    if node.attrs.get("transposed"):  # a convolution at stride 1 of the zero-inserted input by the flipped kernel
        cg, fg = c // groups, wv.shape[1]
        x = _zero_inserted(b, node, x, k, stride, padding, dilation)
        stride, base = [1] * k, w
        w = MapRef(base, (oshape[1], cg, *ksize), lambda idx: _flipped(idx, b, cg, fg, ksize))
    elif any(padding):
        cg, fg = wv.shape[1], wv.shape[0] // groups
        xt = b.tensor_of(x)
        padded = tuple(xv.shape[2 + d] + 2 * padding[d] for d in range(k))
        x = b.stage((n, c, *padded), xv.dtype,
                    lambda idx, _: xt.read([idx[0], idx[1], *(idx[2 + d] - padding[d] for d in range(k))]))
    else:
        cg, fg = wv.shape[1], wv.shape[0] // groups
        x = b.stage_of(x)
    depthwise = groups > 1 and cg == 1 and fg == 1
    red = ((cg,) if not depthwise else ()) + tuple(ksize)

    def body(idx, ridx):
        if depthwise:
            ch, wf, wc, taps = idx[1], idx[1], Aff(), ridx
        elif groups == 1:
            ch, wf, wc, taps = ridx[0], idx[1], ridx[0], ridx[1:]
        else:
            g, _ = divmod_exact(idx[1], fg, b.ranges)
            ch, wf, wc, taps = g * cg + ridx[0], idx[1], ridx[0], ridx[1:]
        xi = [idx[0], ch, *(idx[2 + d] * stride[d] + taps[d] * dilation[d] for d in range(k))]
        wi = [wf, wc, *taps]
        return f"{cast(x.read(xi), xv.dtype, dt)} * {cast(w.read(wi), wv.dtype, dt)}"
    decl = None if groups == 1 or depthwise else (oshape[0], groups, fg, *oshape[2:])
    acc = b.stage(oshape, dt, body, reduce="+", red=red, decl=decl)
    return [acc if bv is None else add_channel_bias(b, acc, refs[2], bv.dtype, oshape)]


def _flipped(idx, b, cg: int, fg: int, ksize) -> list:
    """The index into a transposed convolution's weight [C, F/G, *k] of the element [f, c', *t] of its equivalent
    convolution's weight [F, C/G, *k]: channel g*C/G + c', filter f - g*F/G (g = f // (F/G)), taps reversed."""
    g, j = divmod_exact(idx[0], fg, b.ranges) if fg > 1 else (idx[0], Aff())
    return [g * cg + idx[1], j, *(t * -1 + (n - 1) for t, n in zip(idx[2:], ksize))]


def add_channel_bias(b, acc, bias_ref, bias_dtype: str, oshape) -> object:
    """`acc` (an [N, F, *spatial] ref of the program `b` writes) plus a bias [F] broadcast along the channel
    dimension, as an elementwise ref (a consumer reads it through; nothing is written yet).

    Example::

        out = add_channel_bias(b, acc, refs[2], node.inputs[2].dtype, node.outputs[0].shape)
    """
    dt = acc.dtype
    bias = MapRef(bias_ref, (oshape[1],) + (1,) * (len(oshape) - 2), lambda idx: [idx[0]])
    return b.elementwise(oshape, dt, [acc, bias], lambda a, c: f"{a} + {cast(c, bias_dtype, dt)}")


def _flops(node):
    w = node.inputs[1].shape
    if node.attrs.get("transposed"):  # each input element meets each weight of its group once
        return 2 * numel(node.inputs[0].shape) * numel(w[1:])
    return 2 * numel(node.outputs[0].shape) * numel(w[1:])


register("convolution", "anchor", _infer, _lower, _flops, family="convolution",
         doc="1-d/2-d/3-d, stride, padding, dilation, groups (depthwise), bias; transposed (conv_transpose: "
             "output_padding, groups, dilation)")
