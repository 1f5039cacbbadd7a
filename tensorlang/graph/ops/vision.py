"""Ops that the image models of the zoo need beyond the core families: reads through an index tensor
(`index.Tensor`: Swin's and MaxViT's relative position bias tables), `any` / `all` (ViT's attention mask),
`fmod` / `remainder`, `cumsum`, and resampling (nearest, bilinear and bicubic upsampling).

`index.Tensor` lowers to a gathered read of the DSL (``Y[t, d] = T[idx[t], d]``); with a constant table and a
constant index (a bias table and its index buffer) it folds in numpy. `cumsum` has no scan to lower to: it is the
triangular reduction ``Y[.., i] += select(j <= i, X[.., j], 0)``, n^2/2 terms a row, which is fine for the short
rows models scan (position ids, masks) but not for long sequences. Upsampling computes, for each output row and
column, the input rows and columns it reads and their weights in small index and weight stages, with torch's
float32 arithmetic (so that nearest neighbours are the same pixels as torch's), then gathers through them;
nearest upsampling by a whole-number factor reads the input at ``o // f`` with no gather.

>>> from tensorlang.graph.ops import get
>>> get("index.Tensor").kind, get("any.dim").kind, get("upsample_bilinear2d.vec").kind
('injective', 'reduce', 'anchor')
"""
from __future__ import annotations

import numpy as np

from ... import errors
from ..affine import Aff, divmod_exact
from ..builder import LiteralRef, Ref, TensorRef, broadcast_index, cast, literal
from ..ir import STORAGE
from . import register
from .common import broadcast_shapes, fail, norm_dim, norm_dims, numel, out
from .elementwise import _binary
from .reduce import reduce_shape, reduction

_INTS = ("i32", "i64")


class GatherRef(Ref):
    """`base` (a tensor of the program declared with its own shape) read at `at(idx)`: one entry per dimension of
    `base`, an `Aff` or the DSL text of an integer computed from reads of other tensors.

    >>> from tensorlang.graph.builder import Builder
    >>> from tensorlang.graph.ir import Value, TensorType
    >>> b = Builder("g")
    >>> t = b.param(Value("t", TensorType((10, 4), "f32")))
    >>> ids = b.param(Value("ids", TensorType((3,), "i32")))
    >>> b.set_outputs([GatherRef(t, (3, 4), lambda idx: [ids.read(idx[:1]), idx[1]])])
    >>> print(b.text().splitlines()[1])
        out0[i0, i1] = in0[in1[i0], i1] where i0 in 0:3, i1 in 0:4
    """

    def __init__(self, base: TensorRef, shape, at):
        self.base, self.shape, self.dtype, self.at = base, tuple(shape), base.dtype, at

    def read(self, idx) -> str:
        """`base`'s element at the gathered index."""
        return gather_text(self.base, self.at(list(idx)))


def gather_text(base: TensorRef, at) -> str:
    """DSL text of `base` (declared with its own shape) read at `at` (Affs or texts of integers read from tensors).

    >>> from tensorlang.graph.builder import Builder
    >>> from tensorlang.graph.ir import Value, TensorType
    >>> gather_text(Builder("g").param(Value("t", TensorType((4,), "f32"))), ["in1[i0]"])
    'in0[in1[i0]]'
    """
    text = f"{base.name}[{', '.join(map(str, at))}]"
    return f"({text} != 0)" if base.dtype == "bool" else text


# ---- index.Tensor ------------------------------------------------------------------------------------------------

def _index_layout(node):
    """(indexed dims, their broadcast shape B, where B starts in the output, output shape, {other dim: its output
    position}) of `x[idx0, idx1, ...]` with numpy's rule: B replaces the indexed dims where they are adjacent, else
    it comes first."""
    x = node.inputs[0]
    idx = list(node.inputs[1:])
    rank = x.type.rank
    if len(idx) > rank:
        raise fail(node, f"{len(idx)} indices for a tensor of rank {rank}")
    idx += [None] * (rank - len(idx))
    present = [k for k, v in enumerate(idx) if v is not None]
    if not present:
        raise fail(node, "no index tensor")
    for k in present:
        if idx[k].dtype not in _INTS:
            what = "a boolean mask (its result's shape depends on the data)" if idx[k].dtype == "bool" else \
                f"of dtype {idx[k].dtype}"
            raise fail(node, f"index {k} is {what}; indices are integer tensors (int64 or int32)")
    bshape = broadcast_shapes(*(idx[k].shape for k in present))
    rest = [k for k in range(rank) if k not in present]
    adjacent = present == list(range(present[0], present[-1] + 1))
    start = present[0] if adjacent else 0
    before = [k for k in rest if k < start] if adjacent else []
    oshape = [x.shape[k] for k in before] + list(bshape) + [x.shape[k] for k in rest if k not in before]
    pos = {k: p for p, k in enumerate(before)}
    pos.update({k: len(before) + len(bshape) + p for p, k in enumerate(k for k in rest if k not in before)})
    return present, bshape, start, tuple(oshape), pos


def _index_infer(node):
    return out(_index_layout(node)[3], node.inputs[0].dtype)


def _check_range(node, k: int, data: np.ndarray, n: int) -> None:
    if data.size and (int(data.min()) < -n or int(data.max()) >= n):
        bad = data[(data < -n) | (data >= n)].flat[0]
        raise errors.IndexError(f"{node.op} (node {node.name}{' at ' + node.source if node.source else ''}): index "
                                f"{int(bad)} is out of range for dimension {k} (size {n})")


def _index_lower(b, node, refs):
    xv = node.inputs[0]
    present, bshape, start, oshape, pos = _index_layout(node)
    x = b.tensor_of(refs[0])
    texts = {}
    for k in present:
        v, n = node.inputs[1 + k], xv.shape[k]
        if isinstance(refs[1 + k], LiteralRef):  # one constant index
            _check_range(node, k, np.asarray(refs[1 + k].value), n)
            texts[k] = lambda bidx, c=int(refs[1 + k].value) % n: Aff.const_(c)
            continue
        r = b.stage_of(refs[1 + k])
        lo = int(v.data.min()) if v.is_constant and v.data.size else -1
        if v.is_constant:
            _check_range(node, k, v.data, n)

        def text(bidx, r=r, n=n, lo=lo, checked=v.is_constant):
            t = r.read(broadcast_index(bidx, bshape, r.shape))
            if lo < 0:  # negative indices count from the end, as in torch
                t = f"select({t} < 0, {t} + {n}, {t})"
            # a constant index is in range (checked now), so the kernel need not check it
            return f"clamp({t}, 0, {n - 1})" if checked else t
        texts[k] = text

    def at(idx):
        bidx = idx[start:start + len(bshape)]
        return [texts[k](bidx) if k in texts else idx[pos[k]] for k in range(xv.type.rank)]
    return [GatherRef(x, oshape, at)]


def _index_eval(node, arrays):
    x = arrays[0]
    keys = []
    for k in range(x.ndim):
        v = node.inputs[1 + k] if 1 + k < len(node.inputs) else None
        if v is None:
            keys.append(slice(None))
        else:
            _check_range(node, k, arrays[1 + k], x.shape[k])
            keys.append(arrays[1 + k])
    return [np.ascontiguousarray(x[tuple(keys)])]


register("index.Tensor", "injective", _index_infer, _index_lower, evaluate=_index_eval, family="index",
         doc="integer index tensors (broadcast; negative ones count from the end), with open dims between; "
             "folded where the table and the index are constants")


# ---- any, all ----------------------------------------------------------------------------------------------------

def _truth_dims(node):
    rank = node.inputs[0].type.rank
    return norm_dims(node.attrs.get("dim"), rank)


def _truth_infer(node):
    return out(reduce_shape(node.inputs[0].shape, _truth_dims(node), node.attrs.get("keepdim", False)), "bool")


def _truth_lower(op: str):
    def lower(b, node, refs):
        xv = node.inputs[0]
        src = xv.dtype
        acc = reduction(b, refs[0], xv.shape, _truth_dims(node), node.attrs.get("keepdim", False), op, "i32", "i32",
                        pre=lambda t: cast(cast(t, src, "bool"), "bool", "i32"))
        return [b.elementwise(acc.shape, "bool", [acc], lambda a: f"{a} != 0")]
    return lower


def _truth_eval(fn):
    def evaluate(node, arrays):
        dims = tuple(_truth_dims(node))
        return [np.asarray(fn(arrays[0].astype(bool), axis=dims, keepdims=bool(node.attrs.get("keepdim", False))))]
    return evaluate


for _name, _op, _fn in (("any", "max", np.any), ("all", "min", np.all)):
    for _overload, _doc in (("dim", "one dim, keepdim"), ("dims", "dims (none: every dim), keepdim"),
                            ("default", "every element")):
        register(f"{_name}.{_overload}", "reduce", _truth_infer, _truth_lower(_op),
                 lambda node: node.inputs[0].type.numel, evaluate=_truth_eval(_fn), family="reduction",
                 doc=f"{_doc} (a bool tensor; a nonzero number is true)")


# ---- fmod, remainder ---------------------------------------------------------------------------------------------

def _fmod_text(x: str, y: str, dt: str) -> str:
    """C's fmod (the sign of x) from the DSL's `%`, which is numpy's remainder (the sign of y)."""
    r, zero = f"({x} % {y})", literal(0, dt)
    return f"select({r} != {zero} and ({r} < {zero}) != ({x} < {zero}), {r} - {y}, {r})"


def _numbers(node, arrays):
    """The two operands of a binary op folded in numpy (a Python number from the node's attrs), in its dtype."""
    dt = node.outputs[0].type.numpy_dtype
    return [np.asarray(arrays[k] if k < len(arrays) and arrays[k] is not None else node.attrs[n], dt)
            for k, n in enumerate(("self", "other"))]


for _suffix in ("Tensor", "Scalar"):
    _binary(f"remainder.{_suffix}", lambda x, y, dt, at: f"{x} % {y}", flops=2,
            evaluate=lambda node, a: [np.remainder(*_numbers(node, a))], doc="the sign of the divisor (Python's %)")
    _binary(f"fmod.{_suffix}", lambda x, y, dt, at: _fmod_text(x, y, dt), flops=4,
            evaluate=lambda node, a: [np.fmod(*_numbers(node, a))], doc="the sign of the dividend (C's fmod)")


# ---- cumsum --------------------------------------------------------------------------------------------------------

def _cumsum_infer(node):
    x = node.inputs[0]
    norm_dim(node.attrs["dim"], x.type.rank)
    d = node.attrs.get("dtype") or ("i64" if x.dtype in ("bool", "i32", "i64") else x.dtype)
    return out(x.shape, d)


def _cumsum_lower(b, node, refs):
    xv = node.inputs[0]
    dt = node.outputs[0].dtype
    if dt not in STORAGE:
        raise fail(node, f"a cumsum of {xv.dtype} values gives an {dt} tensor, which kernels do not compute; cast "
                         "to float first")
    x = refs[0]
    if not xv.shape:
        return [b.elementwise((), dt, [x], lambda a: cast(a, xv.dtype, dt))]
    d = norm_dim(node.attrs["dim"], xv.type.rank)

    def body(idx, r):  # a triangular reduction: the DSL has no scan
        at = list(idx)
        at[d] = r[0]
        return f"select({r[0]} <= {idx[d]}, {cast(x.read(at), xv.dtype, dt)}, {literal(0, dt)})"
    return [b.stage(xv.shape, dt, body, reduce="+", red=(xv.shape[d],))]


register("cumsum", "reduce", _cumsum_infer, _cumsum_lower, lambda node: node.inputs[0].type.numel *
         max(node.inputs[0].shape or (1,)), family="reduction",
         evaluate=lambda node, a: [np.cumsum(a[0], axis=norm_dim(node.attrs["dim"], a[0].ndim) if a[0].ndim else None,
                                             dtype=node.outputs[0].type.numpy_dtype).reshape(a[0].shape)],
         doc="any dim (a triangular sum: n^2/2 terms a row)")


# ---- upsampling ----------------------------------------------------------------------------------------------------

def resample_params(node):
    """((H, W) in, (H, W) out, [scale_h, scale_w] or Nones) of an upsampling node: the output size given, or the
    input's times the scale factors (which torch then also uses to map positions).

    >>> from tensorlang.graph.ir import Node, Value, TensorType
    >>> x = Value("x", TensorType((1, 3, 4, 5), "f32"))
    >>> resample_params(Node("upsample_bilinear2d.vec", [x], {"output_size": None, "scale_factors": [1.5, 2.0]}, []))
    ((4, 5), (6, 10), [1.5, 2.0])
    """
    x = node.inputs[0]
    if x.type.rank not in (3, 4):
        raise fail(node, f"input {list(x.shape)}: 2-d upsampling of a [C, H, W] or [N, C, H, W] tensor")
    h, w = x.shape[-2:]
    size = node.attrs.get("output_size")
    scales = node.attrs.get("scale_factors")
    if scales is None:
        scales = [node.attrs.get("scales_h"), node.attrs.get("scales_w")]
    scales = [None if s is None else float(s) for s in scales]
    if size is None:
        if any(s is None for s in scales):
            raise fail(node, "needs an output size or scale factors")
        size = [int(h * scales[0]), int(w * scales[1])]
    size = [int(s) for s in size]
    if len(size) != 2 or min(size) < 1:
        raise fail(node, f"output size {size}: two sizes of at least 1")
    return (h, w), tuple(size), scales


def _resample_infer(node):
    _, size, _ = resample_params(node)
    return out((*node.inputs[0].shape[:-2], *size), node.inputs[0].dtype)


def _ratio(n_in: int, n_out: int, scale, align_corners: bool) -> float:
    """torch's float32 ratio from output positions to input positions (`area_pixel_compute_scale`)."""
    if align_corners:
        return float(np.float32(n_in - 1) / np.float32(n_out - 1)) if n_out > 1 else 0.0
    if scale is not None and scale > 0:
        return float(np.float32(1.0 / scale))
    return float(np.float32(n_in) / np.float32(n_out))


def _axis(b, mode: str, n_in: int, n_out: int, scale, align_corners: bool, dt: str):
    """How one output dim reads its input dim: None (the same position), or (taps, index stage [n_out, taps] of
    input positions, weight stage [n_out, taps] or None), computed as torch computes them in float32."""
    if n_in == n_out:
        return None
    s = literal(_ratio(n_in, n_out, scale, align_corners), "f32")
    if mode == "nearest":
        index = b.stage((n_out, 1), "i32", lambda idx, _: f"min(i32(f32({idx[0]}) * {s}), {n_in - 1})")
        return 1, index, None
    if align_corners:
        def src(o):
            return f"(f32({o}) * {s})"
    elif mode == "bilinear":
        def src(o):
            return f"max({s} * (f32({o}) + 0.5) - 0.5, 0.0)"
    else:  # bicubic: no clamp at 0
        def src(o):
            return f"({s} * (f32({o}) + 0.5) - 0.5)"
    first = b.stage((n_out,), "i32", lambda idx, _: f"min(i32({src(idx[0])} // 1.0), {n_in - 1})")
    t = b.stage((n_out,), "f32", lambda idx, _: f"clamp({src(idx[0])} - f32({first.read(idx)}), 0.0, 1.0)")
    if mode == "bilinear":
        index = b.stage((n_out, 2), "i32", lambda idx, _: (
            f"{first.read(idx[:1])} + select({idx[1]} == 1 and {first.read(idx[:1])} < {n_in - 1}, 1, 0)"))
        weight = b.stage((n_out, 2), dt, lambda idx, _: cast(
            f"select({idx[1]} == 0, 1.0 - {t.read(idx[:1])}, {t.read(idx[:1])})", "f32", dt))
        return 2, index, weight
    index = b.stage((n_out, 4), "i32", lambda idx, _: f"clamp({first.read(idx[:1])} - 1 + {idx[1]}, 0, {n_in - 1})")
    a = -0.75  # torch's cubic convolution coefficient: the weights of the taps at distance z

    def near(z):  # |z| <= 1: (a + 2) z^3 - (a + 3) z^2 + 1
        return f"(({a + 2} * {z} - {a + 3}) * {z} * {z} + 1.0)"

    def far(z):  # 1 < |z| < 2: a z^3 - 5a z^2 + 8a z - 4a
        return f"((({a} * {z} + {-5 * a}) * {z} + ({8 * a})) * {z} + {-4 * a})"

    def coeffs(idx):
        tt = t.read(idx[:1])
        c = [far(f"({tt} + 1.0)"), near(tt), near(f"(1.0 - {tt})"), far(f"(2.0 - {tt})")]
        return cast(f"select({idx[1]} == 0, {c[0]}, select({idx[1]} == 1, {c[1]}, select({idx[1]} == 2, {c[2]}, "
                    f"{c[3]})))", "f32", dt)
    return 4, index, b.stage((n_out, 4), dt, lambda idx, _: coeffs(idx))


def _whole_factors(node) -> tuple[int, int] | None:
    """(fh, fw) where nearest upsampling repeats each pixel a whole number of times (torch's float32 positions give
    `o // f` then), else None."""
    (h, w), (oh, ow), _ = resample_params(node)
    return (oh // h, ow // w) if oh % h == 0 and ow % w == 0 else None


def _resample_lower(mode: str):
    def lower(b, node, refs):
        xv = node.inputs[0]
        dt = node.outputs[0].dtype
        (h, w), (oh, ow), scales = resample_params(node)
        lead = xv.shape[:-2]
        if mode == "nearest" and (factors := _whole_factors(node)) is not None:
            fh, fw = factors
            x = refs[0]

            def nearest(idx, _):
                return x.read([*idx[:-2], divmod_exact(idx[-2], fh, b.ranges)[0],
                               divmod_exact(idx[-1], fw, b.ranges)[0]])
            return [b.stage(node.outputs[0].shape, dt, nearest, decl=(*lead, h, fh, w, fw))]
        if dt not in ("f32", "f64"):
            raise fail(node, f"{mode} upsampling of {dt} values is not supported")
        align = bool(node.attrs.get("align_corners", False))
        axes = [_axis(b, mode, n, o, s, align, dt) for n, o, s in zip((h, w), (oh, ow), scales)]
        x = b.tensor_of(refs[0])
        red = tuple(a[0] for a in axes if a is not None and a[0] > 1)

        def body(idx, r):
            at, weights, k = list(idx[:-2]), [], 0
            for d, (axis, n) in enumerate(zip(axes, (h, w))):
                o = idx[len(lead) + d]
                if axis is None:
                    at.append(o)
                    continue
                taps, index, weight = axis
                tap = r[k] if taps > 1 else Aff()
                k += taps > 1
                at.append(f"clamp({index.read([o, tap])}, 0, {n - 1})")
                if weight is not None:
                    weights.append(weight.read([o, tap]))
            return " * ".join(weights + [gather_text(x, at)])
        return [b.stage(node.outputs[0].shape, dt, body, reduce="+" if red else None, red=red)]
    return lower


def _taps(mode: str) -> int:
    return {"nearest": 1, "bilinear": 4, "bicubic": 16}[mode]


for _mode, _names, _doc in (
        ("nearest", ("upsample_nearest2d.vec", "upsample_nearest2d.default"),
         "NCHW, any output size or scale (whole-number factors read o // f; others gather as torch rounds)"),
        ("bilinear", ("upsample_bilinear2d.vec", "upsample_bilinear2d.default"),
         "NCHW, any output size or scale, align_corners both ways"),
        ("bicubic", ("upsample_bicubic2d.vec", "upsample_bicubic2d.default"),
         "NCHW, any output size or scale, align_corners both ways (A = -0.75, borders clamped)")):
    for _n in _names:
        register(_n, "injective" if _mode == "nearest" else "anchor", _resample_infer, _resample_lower(_mode),
                 lambda node, m=_mode: 2 * _taps(m) * numel(node.outputs[0].shape), family="resampling", doc=_doc)
