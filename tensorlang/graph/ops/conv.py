"""Convolution (1-d, 2-d and 3-d; stride, padding, dilation, groups, depthwise), in NCHW.

The program is the DSL's convolution: a padding stage where there is padding (reads outside the input give 0),
then the multiply-accumulate over input channels and the kernel window; a bias is an elementwise add that a
consumer in the same program reads through. Grouped convolutions loop over [N, G, F/G, ...] (the same buffer as
[N, F, ...]); depthwise ones (one input and one output channel per group) over [N, F, ...].

>>> from tensorlang.graph.ops import get
>>> get("convolution").kind
'anchor'
"""
from __future__ import annotations

from ..affine import Aff, divmod_aff
from ..builder import MapRef, cast
from . import register
from .common import fail, numel, out, pairs


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
    if node.attrs.get("transposed"):
        raise fail(node, "transposed convolution (conv_transpose) is not supported")
    stride, padding, dilation = (pairs(node.attrs.get(a, d), k) for a, d in
                                 (("stride", 1), ("padding", 0), ("dilation", 1)))
    groups = node.attrs.get("groups", 1)
    c, f = x.shape[1], w.shape[0]
    if groups < 1 or c % groups or f % groups or w.shape[1] != c // groups:
        raise fail(node, f"groups={groups} does not fit input channels {c}, filters {f} and weight {list(w.shape)}")
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
    spatial = [(x[2 + d] + 2 * padding[d] - dilation[d] * (w[2 + d] - 1) - 1) // stride[d] + 1 for d in range(k)]
    if min(spatial) < 1:
        raise fail(node, f"the kernel {list(w[2:])} (dilation {dilation}) is larger than the padded input "
                         f"{[x[2 + d] + 2 * padding[d] for d in range(k)]}")
    return (x[0], w[0], *spatial)


def _infer(node):
    return out(conv_out_shape(node), node.inputs[0].dtype)


def _lower(b, node, refs):
    k, stride, padding, dilation, groups = conv_params(node)
    xv, wv, bv = node.inputs[0], node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else None
    dt = node.outputs[0].dtype
    oshape = node.outputs[0].shape
    n, c = xv.shape[:2]
    f, cg = wv.shape[:2]
    ksize = wv.shape[2:]
    fg = f // groups
    x, w = refs[0], b.stage_of(refs[1])
    if any(padding):
        xt = b.tensor_of(x)
        padded = tuple(xv.shape[2 + d] + 2 * padding[d] for d in range(k))
        x = b.stage((n, c, *padded), xv.dtype,
                    lambda idx, _: xt.read([idx[0], idx[1], *(idx[2 + d] - padding[d] for d in range(k))]))
    else:
        x = b.stage_of(x)
    depthwise = groups > 1 and cg == 1 and fg == 1
    red = ((cg,) if not depthwise else ()) + tuple(ksize)

    def body(idx, ridx):
        if depthwise:
            ch, wf, wc, taps = idx[1], idx[1], Aff(), ridx
        elif groups == 1:
            ch, wf, wc, taps = ridx[0], idx[1], ridx[0], ridx[1:]
        else:
            g, _ = divmod_aff(idx[1], fg, b.ranges)
            ch, wf, wc, taps = g * cg + ridx[0], idx[1], ridx[0], ridx[1:]
        xi = [idx[0], ch, *(idx[2 + d] * stride[d] + taps[d] * dilation[d] for d in range(k))]
        wi = [wf, wc, *taps]
        return f"{cast(x.read(xi), xv.dtype, dt)} * {cast(w.read(wi), wv.dtype, dt)}"
    decl = None if groups == 1 or depthwise else (oshape[0], groups, fg, *oshape[2:])
    acc = b.stage(oshape, dt, body, reduce="+", red=red, decl=decl)
    return [acc if bv is None else add_channel_bias(b, acc, refs[2], bv.dtype, oshape)]


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
    return 2 * numel(node.outputs[0].shape) * numel(w[1:])


register("convolution", "anchor", _infer, _lower, _flops, family="convolution",
         doc="1-d/2-d/3-d, stride, padding, dilation, groups (depthwise), bias; not transposed")
