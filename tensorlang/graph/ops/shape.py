"""Views and injective ops: reshape family, permute, expand, slice, select, cat, split, pad, repeat, flip, roll,
as_strided, slice_scatter, copy.

Views (view, _unsafe_view, squeeze, unsqueeze, clone, alias) cost nothing at run time: every value lives in a dense
row-major buffer, so a view's output is its input's buffer under another shape. Inside a fused program they are a
change of index (`reshape_index`). The injective ops read their input at a mapped index (`MapRef`), so a consumer
in the same program reads through them without a copy; cat, pad, repeat, roll and slice_scatter write a stage of
their own. `as_strided` addresses torch's storage of its input: it is supported where that address is an affine
index of the input's elements (a flatten or a window written as as_strided), else an error naming the node.

>>> from tensorlang.graph.ops import get
>>> get("view").kind, get("permute").kind
('view', 'injective')
"""
from __future__ import annotations

import numpy as np

from ..affine import Aff, NotAffine, divmod_aff, divmod_exact, reshape_index, strides
from ..builder import MapRef, cast, literal
from . import register
from .common import broadcast_shapes, fail, norm_dim, norm_dims, numel, out
from .vision import gather_text


def _same(node):
    return [node.inputs[0].type]


def _view_map(b, out_shape, in_shape):
    return lambda idx: reshape_index(idx, out_shape, in_shape, b.ranges)


def _view_lower(b, node, refs):
    src, dst = node.inputs[0].shape, node.outputs[0].shape
    return [MapRef(refs[0], dst, _view_map(b, dst, src))]


def _view_eval(node, arrays):
    return [np.ascontiguousarray(arrays[0]).reshape(node.outputs[0].shape)]


def _resolve_size(node, size) -> tuple[int, ...]:
    n = node.inputs[0].type.numel
    size = [int(s) for s in size]
    if size.count(-1) > 1:
        raise fail(node, f"size {size} has more than one -1")
    if -1 in size:
        rest = numel([s for s in size if s != -1])
        if rest == 0 or n % rest:
            raise fail(node, f"cannot view {n} elements as {size}")
        size[size.index(-1)] = n // rest
    if numel(size) != n:
        raise fail(node, f"cannot view a {list(node.inputs[0].shape)} tensor as {size}")
    return tuple(size)


def _register_view(name, infer, doc):
    register(name, "view", infer, _view_lower, evaluate=_view_eval, family="view", doc=doc)


_register_view("view", lambda node: out(_resolve_size(node, node.attrs["size"]), node.inputs[0].dtype),
               "reshape of a dense tensor: no copy")
_register_view("_unsafe_view", lambda node: out(_resolve_size(node, node.attrs["size"]), node.inputs[0].dtype),
               "as view")
_register_view("clone", _same, "no copy (every value is dense)")
_register_view("alias", _same, "no copy")
_register_view("detach", _same, "no copy")
_register_view("lift_fresh_copy", _same, "no copy (a tensor constant made in forward)")


def _squeeze_infer(node):
    shape = node.inputs[0].shape
    if "dims" in node.attrs or "dim" in node.attrs:
        dims = node.attrs.get("dims", node.attrs.get("dim"))
        dims = norm_dims([dims] if isinstance(dims, int) else dims, len(shape)) if shape else []
    else:
        dims = list(range(len(shape)))
    return out([s for k, s in enumerate(shape) if not (k in dims and s == 1)], node.inputs[0].dtype)


for _n in ("squeeze.dims", "squeeze.dim", "squeeze.default"):
    _register_view(_n, _squeeze_infer, "drop dims of size 1")


def _unsqueeze_infer(node):
    shape = list(node.inputs[0].shape)
    d = node.attrs["dim"]
    d = d % (len(shape) + 1) if -len(shape) - 1 <= d <= len(shape) else None
    if d is None:
        raise fail(node, f"dim {node.attrs['dim']} is out of range")
    shape.insert(d, 1)
    return out(shape, node.inputs[0].dtype)


_register_view("unsqueeze", _unsqueeze_infer, "insert a dim of size 1")


# ---- permute, expand, slice, select, flip -----------------------------------------------------------------------

def _permute_dims(node):
    rank = node.inputs[0].type.rank
    dims = [norm_dim(d, rank) for d in node.attrs["dims"]]
    if sorted(dims) != list(range(rank)):
        raise fail(node, f"dims {node.attrs['dims']} are not a permutation of 0..{rank - 1}")
    return dims


def _permute_infer(node):
    shape = node.inputs[0].shape
    return out([shape[d] for d in _permute_dims(node)], node.inputs[0].dtype)


def _permute_lower(b, node, refs):
    dims = _permute_dims(node)
    inv = [dims.index(k) for k in range(len(dims))]
    return [MapRef(refs[0], node.outputs[0].shape, lambda idx: [idx[inv[k]] for k in range(len(dims))])]


register("permute", "injective", _permute_infer, _permute_lower,
         evaluate=lambda node, a: [np.ascontiguousarray(np.transpose(a[0], _permute_dims(node)))],
         family="layout", doc="any permutation (transpose, t)")


def _expand_infer(node):
    shape = node.inputs[0].shape
    size = list(node.attrs["size"])
    lead = len(size) - len(shape)
    if lead < 0:
        raise fail(node, f"cannot expand {list(shape)} to fewer dims {size}")
    res = []
    for k, s in enumerate(size):
        old = shape[k - lead] if k >= lead else None
        if s == -1:
            if old is None:
                raise fail(node, "-1 in a new leading dim")
            s = old
        if old is not None and old != 1 and old != s:
            raise fail(node, f"cannot expand dim {k - lead} of size {old} to {s}")
        res.append(s)
    return out(res, node.inputs[0].dtype)


def _expand_lower(b, node, refs):
    shape, oshape = node.inputs[0].shape, node.outputs[0].shape
    lead = len(oshape) - len(shape)
    return [MapRef(refs[0], oshape, lambda idx: [Aff() if shape[k] == 1 and oshape[k + lead] != 1
                                                 else idx[k + lead] for k in range(len(shape))])]


register("expand", "injective", _expand_infer, _expand_lower,
         evaluate=lambda node, a: [np.ascontiguousarray(np.broadcast_to(a[0], node.outputs[0].shape))],
         family="layout", doc="broadcast to a size")


def _slice_params(node):
    shape = node.inputs[0].shape
    d = norm_dim(node.attrs.get("dim", 0), len(shape))
    n = shape[d]
    start, end, step = node.attrs.get("start"), node.attrs.get("end"), node.attrs.get("step", 1) or 1
    if step < 1:
        raise fail(node, f"step {step} must be >= 1")
    start = 0 if start is None else start
    end = n if end is None else end
    start = min(max(start + n if start < 0 else start, 0), n)
    end = min(max(end + n if end < 0 else end, 0), n)
    length = max(0, (end - start + step - 1) // step)
    return d, start, step, length


def _slice_infer(node):
    d, _, _, length = _slice_params(node)
    shape = list(node.inputs[0].shape)
    shape[d] = length
    return out(shape, node.inputs[0].dtype)


def _slice_lower(b, node, refs):
    d, start, step, _ = _slice_params(node)
    return [MapRef(refs[0], node.outputs[0].shape,
                   lambda idx: [e * step + start if k == d else e for k, e in enumerate(idx)])]


def _slice_eval(node, arrays):
    d, start, step, length = _slice_params(node)
    sl = [slice(None)] * arrays[0].ndim
    sl[d] = slice(start, start + step * length, step) if length else slice(0, 0)
    return [np.ascontiguousarray(arrays[0][tuple(sl)])]


register("slice.Tensor", "injective", _slice_infer, _slice_lower, evaluate=_slice_eval, family="layout",
         doc="start, end, step (negative and open ends)")


def _select_params(node):
    shape = node.inputs[0].shape
    d = norm_dim(node.attrs["dim"], len(shape))
    i = node.attrs["index"]
    if not -shape[d] <= i < shape[d]:
        raise fail(node, f"index {i} is out of range for dim {d} of size {shape[d]}")
    return d, i % shape[d]


def _select_infer(node):
    d, _ = _select_params(node)
    shape = list(node.inputs[0].shape)
    del shape[d]
    return out(shape, node.inputs[0].dtype)


def _select_lower(b, node, refs):
    d, i = _select_params(node)
    return [MapRef(refs[0], node.outputs[0].shape, lambda idx: [*idx[:d], Aff.const_(i), *idx[d:]])]


register("select.int", "injective", _select_infer, _select_lower,
         evaluate=lambda node, a: [np.ascontiguousarray(np.take(a[0], _select_params(node)[1],
                                                                _select_params(node)[0]))],
         family="layout", doc="one index of a dim")


def _flip_lower(b, node, refs):
    shape = node.inputs[0].shape
    dims = norm_dims(node.attrs["dims"], len(shape))
    return [MapRef(refs[0], shape, lambda idx: [e * -1 + (shape[k] - 1) if k in dims else e
                                                for k, e in enumerate(idx)])]


register("flip", "injective", _same, _flip_lower,
         evaluate=lambda node, a: [np.ascontiguousarray(
             np.flip(a[0], tuple(norm_dims(node.attrs["dims"], a[0].ndim))))],
         family="layout", doc="reverse dims")


def _split_params(node):
    shape = node.inputs[0].shape
    d = norm_dim(node.attrs.get("dim", 0), len(shape))
    sizes = list(node.attrs["split_sizes"])
    if sum(sizes) != shape[d]:
        raise fail(node, f"split sizes {sizes} do not add up to {shape[d]}")
    return d, sizes


def _split_infer(node):
    d, sizes = _split_params(node)
    res = []
    for s in sizes:
        shape = list(node.inputs[0].shape)
        shape[d] = s
        res += out(shape, node.inputs[0].dtype)
    return res


def _split_lower(b, node, refs):
    d, sizes = _split_params(node)
    res, start = [], 0
    base = b.stage_of(refs[0]) if len(sizes) > 1 else refs[0]  # an expression is read once by each part
    for s, v in zip(sizes, node.outputs):
        res.append(MapRef(base, v.shape, lambda idx, st=start: [e + st if k == d else e for k, e in enumerate(idx)]))
        start += s
    return res


def _split_eval(node, arrays):
    d, sizes = _split_params(node)
    return [np.ascontiguousarray(p) for p in np.split(arrays[0], np.cumsum(sizes)[:-1], axis=d)]


register("split_with_sizes", "injective", _split_infer, _split_lower, evaluate=_split_eval, family="layout",
         doc="split, chunk")


# ---- cat, pad, repeat, upsampling: stages of their own ----------------------------------------------------------

def _cat_params(node):
    tensors = [v for v in node.inputs if v is not None and v.type.numel > 0]
    if not tensors:
        raise fail(node, "cat of empty tensors only")
    rank = tensors[0].type.rank
    d = norm_dim(node.attrs.get("dim", 0), rank)
    return tensors, d


def _cat_infer(node):
    tensors, d = _cat_params(node)
    from .common import promote
    shape = list(tensors[0].shape)
    for v in tensors[1:]:
        if len(v.shape) != len(shape) or any(a != c for k, (a, c) in enumerate(zip(v.shape, shape)) if k != d):
            raise fail(node, f"cannot cat {list(v.shape)} with {shape} along dim {d}")
    shape[d] = sum(v.shape[d] for v in tensors)
    return out(shape, promote(*(v.dtype for v in tensors)))


def _cat_lower(b, node, refs):
    tensors, d = _cat_params(node)
    dt = node.outputs[0].dtype
    work = "i32" if dt == "bool" else dt
    keep = [b.tensor_of(r) for v, r in zip(node.inputs, refs) if v is not None and v.type.numel > 0]

    def body(idx, _):
        terms, offset = [], 0
        for v, r in zip(tensors, keep):
            at = [e - offset if k == d else e for k, e in enumerate(idx)]
            terms.append(cast(r.read(at), r.dtype, work))  # outside its part, a read gives 0 (padding)
            offset += v.shape[d]
        total = " + ".join(terms)
        return f"({total}) != 0" if dt == "bool" else total
    return [b.stage(node.outputs[0].shape, dt, body)]


register("cat", "injective", _cat_infer, _cat_lower,
         evaluate=lambda node, a: [np.concatenate([x for x, v in zip(a, node.inputs) if v is not None and
                                                   v.type.numel > 0], _cat_params(node)[1]).astype(
                                                       node.outputs[0].type.numpy_dtype)],
         family="layout", doc="any dim, any number of tensors (stack)")


def _pad_params(node):
    shape = node.inputs[0].shape
    pad = list(node.attrs["pad"])
    if len(pad) % 2 or len(pad) // 2 > len(shape):
        raise fail(node, f"pad {pad} needs an even length of at most 2 x rank")
    lefts, rights = [0] * len(shape), [0] * len(shape)
    for k in range(len(pad) // 2):
        lefts[len(shape) - 1 - k], rights[len(shape) - 1 - k] = pad[2 * k], pad[2 * k + 1]
    return lefts, rights


def _pad_infer(node):
    lefts, rights = _pad_params(node)
    shape = [s + lo + hi for s, lo, hi in zip(node.inputs[0].shape, lefts, rights)]
    if min(shape, default=1) < 0:
        raise fail(node, f"pad {node.attrs['pad']} crops more than the tensor has")
    return out(shape, node.inputs[0].dtype)


def _pad_lower(b, node, refs):
    lefts, rights = _pad_params(node)
    shape = node.inputs[0].shape
    value = node.attrs.get("value", 0) or 0
    dt = node.outputs[0].dtype
    x = b.tensor_of(refs[0])

    def body(idx, _):
        text = x.read([e - lo for e, lo in zip(idx, lefts)])  # reads outside x give 0
        if value:
            inside = " and ".join(f"{e} >= {lo} and {e} < {lo + n}" for e, lo, hi, n in zip(idx, lefts, rights, shape)
                                  if lo > 0 or hi > 0)
            if inside:
                text = f"select({inside}, {text}, {literal(value, dt)})"
        return text
    return [b.stage(node.outputs[0].shape, dt, body)]


def _pad_eval(node, arrays):
    lefts, rights = _pad_params(node)
    x = arrays[0]
    crop = tuple(slice(max(0, -lo), x.shape[k] - max(0, -hi)) for k, (lo, hi) in enumerate(zip(lefts, rights)))
    x = x[crop]
    return [np.pad(x, [(max(0, lo), max(0, hi)) for lo, hi in zip(lefts, rights)],
                   constant_values=node.attrs.get("value", 0) or 0)]


register("constant_pad_nd", "injective", _pad_infer, _pad_lower, evaluate=_pad_eval, family="layout",
         doc="any value; negative pads crop")


def _repeat_infer(node):
    shape = node.inputs[0].shape
    reps = list(node.attrs["repeats"])
    if len(reps) < len(shape):
        raise fail(node, f"repeats {reps} has fewer entries than the tensor has dims")
    full = [1] * (len(reps) - len(shape)) + list(shape)
    return out([r * s for r, s in zip(reps, full)], node.inputs[0].dtype)


def _interleaved_stage(b, node, ref, factors, in_shape):
    """A stage over [f0, s0, f1, s1, ...] (each output dim k split into factors[k] x in_shape[k]) that reads
    `ref` at the inner index: the output's element (a*s + i) is the input's i (repeat) when `inner` is True."""
    oshape = node.outputs[0].shape
    decl = [x for f, s in zip(factors, in_shape) for x in (f, s)]

    def body(idx, _):
        at = []
        for e, s in zip(idx, in_shape):
            qr = divmod_exact(e, s, b.ranges)
            at.append(qr[1])
        return ref.read(at[len(at) - len(ref.shape):])
    return b.stage(oshape, node.outputs[0].dtype, body, decl=decl)


def _repeat_lower(b, node, refs):
    reps = list(node.attrs["repeats"])
    shape = node.inputs[0].shape
    full = [1] * (len(reps) - len(shape)) + list(shape)
    return [_interleaved_stage(b, node, refs[0], reps, full)]


register("repeat", "injective", _repeat_infer, _repeat_lower,
         evaluate=lambda node, a: [np.tile(a[0], node.attrs["repeats"])], family="layout", doc="tile")


# ---- as_strided, roll, slice_scatter, copy -------------------------------------------------------------------------

def _strided_params(node):
    """(size, stride, the output's first element counted from the input's, the input's non-trivial dims from the
    innermost in torch's storage) of an as_strided node. Torch lays its input out in storage with strides
    `input_stride` (the importer records them); that layout must be dense in some order of the dims (a contiguous
    tensor, or a permute of one), so that each storage address is one element of the input."""
    shape = node.inputs[0].shape
    size, stride = [int(s) for s in node.attrs["size"]], [int(s) for s in node.attrs["stride"]]
    if len(size) != len(stride) or min(size, default=1) < 0:
        raise fail(node, f"size {size} and stride {stride} must have one entry per dim, sizes >= 0")
    xstride = node.attrs.get("input_stride") or strides(shape)
    xoff = node.attrs.get("input_storage_offset", 0) or 0
    off = node.attrs.get("storage_offset")
    dims = sorted((k for k in range(len(shape)) if shape[k] > 1), key=lambda k: xstride[k])
    expect = 1
    for k in dims:
        if xstride[k] != expect:
            raise fail(node, f"its input {list(shape)} is a view that torch lays out with strides {list(xstride)} "
                             f"(not dense in any order of its dims): as_strided of such a view is not supported")
        expect *= shape[k]
    return size, stride, (xoff if off is None else off) - xoff, dims


def _strided_index(node, idx, ranges):
    """The input's index read by as_strided's element at `idx`, or NotAffine."""
    shape = node.inputs[0].shape
    _size, stride, base, dims = _strided_params(node)
    addr = Aff.const_(base)
    for e, s in zip(idx, stride):
        addr = addr + e * s
    at = [Aff()] * len(shape)
    for k in dims[:-1]:
        qr = divmod_aff(addr, shape[k], ranges)
        if qr is None:
            raise NotAffine(f"as_strided's address {addr} is not an affine index of dim {k} of {list(shape)}")
        addr, at[k] = qr
    lo, hi = addr.bounds(ranges)
    top = shape[dims[-1]] if dims else 1
    if lo < 0 or hi >= top:
        raise NotAffine(f"as_strided reads storage addresses {lo}..{hi} outside its input's {top} elements")
    if dims:
        at[dims[-1]] = addr
    return at


def _strided_infer(node):
    size, stride, base, _ = _strided_params(node)
    ranges = {f"i{k}": n for k, n in enumerate(size)}
    if numel(size):
        try:
            _strided_index(node, [Aff.var(f"i{k}") for k in range(len(size))], ranges)
        except NotAffine as e:
            raise fail(node, f"size {size}, stride {stride}, storage offset {base} from its input's: {e}; only views "
                             f"whose elements are an affine index of the input are supported") from None
    return out(size, node.inputs[0].dtype)


def _strided_lower(b, node, refs):
    return [MapRef(refs[0], node.outputs[0].shape, lambda idx: _strided_index(node, idx, b.ranges))]


def _strided_eval(node, arrays):
    x = arrays[0]
    size, stride, base, _ = _strided_params(node)
    xstride = node.attrs.get("input_stride") or strides(x.shape)
    storage = np.empty(max(x.size, 1), x.dtype)  # the input's elements where torch's storage holds them
    storage[sum(g * s for g, s in zip(np.indices(x.shape), xstride)) if x.ndim else 0] = x
    addr = base + sum((g * s for g, s in zip(np.indices(size), stride)), np.zeros(size, np.int64))
    return [storage[addr]]


register("as_strided", "injective", _strided_infer, _strided_lower, evaluate=_strided_eval, family="layout",
         doc="views whose elements are an affine index of the input (as torch lays it out); others a clear error")


def _roll_params(node) -> dict[int, int]:
    """{dim: shift in 0..size-1} of a roll node (a dim named twice adds its shifts)."""
    shape = node.inputs[0].shape
    shifts, dims = list(node.attrs["shifts"]), list(node.attrs.get("dims") or [])
    if not shape:  # one element: nothing moves
        return {}
    if not dims:
        if len(shape) > 1:
            raise fail(node, "a roll without dims (of the flattened tensor) is supported for tensors of rank 1 only")
        dims = [0] * len(shifts)
    if len(shifts) != len(dims):
        raise fail(node, f"shifts {shifts} and dims {dims} differ in length")
    out_: dict[int, int] = {}
    for s, d in zip(shifts, dims):
        d = norm_dim(d, len(shape))
        if shape[d]:
            out_[d] = (out_.get(d, 0) + s) % shape[d]
    return {d: s for d, s in out_.items() if s}


def _roll_lower(b, node, refs):
    shifts = sorted(_roll_params(node).items())
    shape = node.inputs[0].shape
    if not shifts:
        return [MapRef(refs[0], shape, lambda idx: idx)]
    x = b.tensor_of(refs[0])

    def pick(idx, at, k):  # element e of a rolled dim reads e - s, or e - s + n before the shift
        if k == len(shifts):
            return x.read(at)
        d, s = shifts[k]
        e = idx[d]
        late = pick(idx, [e - s if j == d else a for j, a in enumerate(at)], k + 1)
        early = pick(idx, [e - s + shape[d] if j == d else a for j, a in enumerate(at)], k + 1)
        return f"select({e} >= {s}, {late}, {early})"
    return [b.stage(shape, node.outputs[0].dtype, lambda idx, _: pick(idx, list(idx), 0))]


def _roll_eval(node, arrays):
    shifts = _roll_params(node)
    return [np.roll(arrays[0], list(shifts.values()), list(shifts.keys())) if shifts else arrays[0]]


register("roll", "injective", _same, _roll_lower, evaluate=_roll_eval, family="layout",
         doc="shifts along dims (kept whole from torch's decompositions: no gather)")


def _scatter_params(node):
    d, start, step, length = _slice_params(node)
    want = list(node.inputs[0].shape)
    want[d] = length
    if list(node.inputs[1].shape) != want:
        raise fail(node, f"src {list(node.inputs[1].shape)} does not fit the slice {want} of dim {d}")
    return d, start, step, length


def _scatter_lower(b, node, refs):
    d, start, step, length = _scatter_params(node)
    dt, sv = node.outputs[0].dtype, node.inputs[1]
    x, src = refs[0], b.tensor_of(refs[1])
    if step > 1:  # the src row of output row e is (e - start) / step: an index stage, read as a gather
        n = node.inputs[0].shape[d]
        rows = b.stage((n,), "i32", lambda idx, _: f"clamp(({idx[0]} - {start}) // {step}, 0, {max(length - 1, 0)})")

    def body(idx, _):
        e = idx[d]
        inside = f"{e} >= {start} and {e} < {start + step * length}"
        if step == 1:
            taken = src.read([e - start if k == d else a for k, a in enumerate(idx)])
        else:
            inside += f" and ({e} - {start}) % {step} == 0"
            taken = gather_text(src, [f"clamp({rows.read([e])}, 0, {length - 1})" if k == d else a
                                      for k, a in enumerate(idx)])
        return f"select({inside}, {cast(taken, sv.dtype, dt)}, {cast(x.read(idx), node.inputs[0].dtype, dt)})"
    if length == 0:
        return [MapRef(refs[0], node.outputs[0].shape, lambda idx: idx)]
    return [b.stage(node.outputs[0].shape, dt, body)]


def _scatter_eval(node, arrays):
    d, start, step, length = _scatter_params(node)
    y = np.array(arrays[0], copy=True)
    sl = [slice(None)] * y.ndim
    sl[d] = slice(start, start + step * length, step)
    y[tuple(sl)] = arrays[1]
    return [y]


def _scatter_infer(node):
    _scatter_params(node)
    return [node.inputs[0].type]


register("slice_scatter", "injective", _scatter_infer, _scatter_lower, evaluate=_scatter_eval, family="layout",
         doc="src written into a slice (any step)")


def _copy_infer(node):
    x, src = node.inputs[0], node.inputs[1]
    if broadcast_shapes(x.shape, src.shape) != tuple(x.shape):
        raise fail(node, f"src {list(src.shape)} does not broadcast to {list(x.shape)}")
    return [x.type]


def _copy_lower(b, node, refs):
    src, dt = node.inputs[1].dtype, node.outputs[0].dtype
    return [b.elementwise(node.outputs[0].shape, dt, [refs[1]], lambda a: cast(a, src, dt))]


def _copy_eval(node, arrays):
    return [np.broadcast_to(arrays[1], node.outputs[0].shape).astype(node.outputs[0].type.numpy_dtype)]


register("copy", "elementwise", _copy_infer, _copy_lower, evaluate=_copy_eval, family="layout",
         doc="src broadcast into self's shape and dtype")
