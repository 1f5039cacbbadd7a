"""Pooling: max pooling (its values; not its indices), average pooling (count_include_pad, ceil_mode,
divisor_override) and adaptive average pooling, over the last two dims.

Max pooling pads with -inf (a stage selects -inf outside the input); average pooling reads the input directly
with zeros outside it and divides by the window's count, written as an integer expression of the output index.
Adaptive average pooling with windows that do not tile the input sums over the whole input with a mask, each
window's bounds written with integer division of the index.

>>> from tensorlang.graph.ops import get
>>> get("max_pool2d_with_indices").kind, get("_adaptive_avg_pool2d").kind
('anchor', 'anchor')
"""
from __future__ import annotations

from ..affine import Aff
from ..builder import literal
from . import register
from .common import fail, numel, out, pairs


def pool_params(node):
    """(kernel, stride, padding, dilation, ceil_mode, output H and W) of a 2-d pooling node, checked.

    >>> from tensorlang.graph.ir import Node, Value, TensorType
    >>> x = Value("x", TensorType((1, 1, 7, 7), "f32"))
    >>> pool_params(Node("max_pool2d_with_indices", [x], {"kernel_size": [3], "stride": [2], "padding": 1}, []))
    ([3, 3], [2, 2], [1, 1], [1, 1], False, [4, 4])
    """
    x = node.inputs[0]
    if x.type.rank not in (3, 4):
        raise fail(node, f"input {list(x.shape)}: 2-d pooling of a [C, H, W] or [N, C, H, W] tensor")
    kernel = pairs(node.attrs["kernel_size"])
    stride = pairs(node.attrs.get("stride") or kernel)
    padding = pairs(node.attrs.get("padding", 0))
    dilation = pairs(node.attrs.get("dilation", 1))
    ceil_mode = bool(node.attrs.get("ceil_mode", False))
    if min(kernel) < 1 or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise fail(node, f"kernel {kernel}, stride {stride}, padding {padding}, dilation {dilation} out of range")
    if any(p * 2 > k for p, k in zip(padding, kernel)):
        raise fail(node, f"padding {padding} is more than half the kernel {kernel}")
    sizes = []
    for d in range(2):
        n = x.shape[-2 + d]
        span = dilation[d] * (kernel[d] - 1) + 1
        top = n + 2 * padding[d] - span
        o = (-(-top // stride[d]) if ceil_mode else top // stride[d]) + 1
        if ceil_mode and (o - 1) * stride[d] >= n + padding[d]:
            o -= 1
        if o < 1:
            raise fail(node, f"the window {kernel} does not fit the input {list(x.shape[-2:])}")
        sizes.append(o)
    return kernel, stride, padding, dilation, ceil_mode, sizes


def _out_shape(node):
    *_, sizes = pool_params(node)
    return (*node.inputs[0].shape[:-2], *sizes)


def _max_infer(node):
    return out(_out_shape(node), node.inputs[0].dtype) + out(_out_shape(node), "i64")


def _lowest(dt):
    return "-inf" if dt in ("f32", "f64") else str(-2**31)


def _max_lower(b, node, refs):
    kernel, stride, padding, dilation, _, sizes = pool_params(node)
    xv = node.inputs[0]
    dt = xv.dtype
    lead = xv.shape[:-2]
    h, w = xv.shape[-2:]
    need = [(sizes[d] - 1) * stride[d] + dilation[d] * (kernel[d] - 1) + 1 for d in range(2)]
    if any(padding) or need[0] > h or need[1] > w:
        xt = b.tensor_of(refs[0])
        ext = (*lead, max(need[0], h + padding[0]), max(need[1], w + padding[1]))

        def pad(idx, _):
            y, x = idx[-2], idx[-1]
            inside = (f"{y} >= {padding[0]} and {y} < {padding[0] + h} and "
                      f"{x} >= {padding[1]} and {x} < {padding[1] + w}")
            return f"select({inside}, {xt.read([*idx[:-2], y - padding[0], x - padding[1]])}, {_lowest(dt)})"
        src = b.stage(ext, dt, pad)
    else:
        src = b.stage_of(refs[0])

    def body(idx, ridx):
        return src.read([*idx[:-2], idx[-2] * stride[0] + ridx[0] * dilation[0],
                         idx[-1] * stride[1] + ridx[1] * dilation[1]])
    return [b.stage(node.outputs[0].shape, dt, body, reduce="max", red=tuple(kernel)), None]


register("max_pool2d_with_indices", "anchor", _max_infer, _max_lower,
         lambda node: numel(node.outputs[0].shape) * numel(pairs(node.attrs["kernel_size"])), family="pooling",
         doc="kernel, stride, padding (-inf), dilation, ceil_mode; the values (the indices output must be unused)")


def _avg_infer(node):
    return out(_out_shape(node), node.inputs[0].dtype)


def _count_text(o: Aff, d, kernel, stride, padding, n, include_pad: bool) -> str:
    start = f"{o} * {stride[d]} - {padding[d]}" if padding[d] else f"{o} * {stride[d]}"
    if include_pad:
        return f"(min({start} + {kernel[d]}, {n + padding[d]}) - ({start}))"
    return f"(min({start} + {kernel[d]}, {n}) - max({start}, 0))"


def _avg_lower(b, node, refs):
    kernel, stride, padding, _, ceil_mode, _sizes = pool_params(node)
    xv = node.inputs[0]
    dt = node.outputs[0].dtype
    h, w = xv.shape[-2:]
    include_pad = node.attrs.get("count_include_pad", True)
    divisor = node.attrs.get("divisor_override")
    x = b.tensor_of(refs[0]) if any(padding) or ceil_mode else b.stage_of(refs[0])

    def body(idx, ridx):  # reads outside x give 0
        return x.read([*idx[:-2], idx[-2] * stride[0] + ridx[0] - padding[0],
                       idx[-1] * stride[1] + ridx[1] - padding[1]])
    acc = b.stage(node.outputs[0].shape, dt, body, reduce="+", red=tuple(kernel))
    uniform = not ceil_mode and (include_pad or not any(padding))
    if divisor or uniform:
        scale = literal(1.0 / (divisor or kernel[0] * kernel[1]), dt)
        return [b.elementwise(node.outputs[0].shape, dt, [acc], lambda a: f"{a} * {scale}")]

    def per_element(idx, _):
        ch = _count_text(idx[-2], 0, kernel, stride, padding, h, include_pad)
        cw = _count_text(idx[-1], 1, kernel, stride, padding, w, include_pad)
        return f"{acc.read(idx)} / {dt}({ch} * {cw})"
    return [b.stage(node.outputs[0].shape, dt, per_element)]


register("avg_pool2d", "anchor", _avg_infer, _avg_lower,
         lambda node: numel(node.outputs[0].shape) * numel(pairs(node.attrs["kernel_size"])), family="pooling",
         doc="kernel, stride, padding, ceil_mode, count_include_pad, divisor_override")


def _adaptive_infer(node):
    x = node.inputs[0]
    size = pairs(node.attrs["output_size"])
    if x.type.rank not in (3, 4) or min(size) < 1:
        raise fail(node, f"input {list(x.shape)}, output size {size}")
    return out((*x.shape[:-2], *size), x.dtype)


def _adaptive_lower(b, node, refs):
    xv = node.inputs[0]
    dt = node.outputs[0].dtype
    h, w = xv.shape[-2:]
    oh, ow = pairs(node.attrs["output_size"])
    if h % oh == 0 and w % ow == 0:  # windows tile the input: an average pool
        kh, kw = h // oh, w // ow
        x = refs[0]  # each element is read once: an elementwise producer is read through
        acc = b.stage(node.outputs[0].shape, dt, lambda idx, r: x.read(
            [*idx[:-2], idx[-2] * kh + r[0], idx[-1] * kw + r[1]]), reduce="+", red=(kh, kw))
        scale = literal(1.0 / (kh * kw), dt)
        return [b.elementwise(node.outputs[0].shape, dt, [acc], lambda a: f"{a} * {scale}")]
    x = b.stage_of(refs[0])

    def bounds(o, n, m):
        return f"({o} * {n}) // {m}", f"(({o} + 1) * {n} + {m - 1}) // {m}"

    def body(idx, r):
        (y0, y1), (x0, x1) = bounds(idx[-2], h, oh), bounds(idx[-1], w, ow)
        inside = f"{r[0]} >= {y0} and {r[0]} < {y1} and {r[1]} >= {x0} and {r[1]} < {x1}"
        return f"select({inside}, {x.read([*idx[:-2], r[0], r[1]])}, 0.0)"
    acc = b.stage(node.outputs[0].shape, dt, body, reduce="+", red=(h, w))

    def mean(idx, _):
        (y0, y1), (x0, x1) = bounds(idx[-2], h, oh), bounds(idx[-1], w, ow)
        return f"{acc.read(idx)} / {dt}(({y1} - {y0}) * ({x1} - {x0}))"
    return [b.stage(node.outputs[0].shape, dt, mean)]


register("_adaptive_avg_pool2d", "anchor", _adaptive_infer, _adaptive_lower,
         lambda node: node.inputs[0].type.numel, family="pooling", doc="any output size")
