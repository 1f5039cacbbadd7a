"""Reads through an index: embedding, gather, index_select.

Each reads a tensor at positions that another tensor holds, so each lowers to a gathered read of the DSL
(``Y[t, d] = W[ids[t], d]``, see the DSL's "Reads through an index"). The read is a `GatherRef`: a consumer in
the same program reads through it (an embedding's rows go straight into the add and layer norm after it), and
an index outside its dimension is never read: the kernel raises `tl.IndexError` naming the node (torch raises an
IndexError too). Negative indices are out of range, as in torch's embedding and gather. With constant operands
they fold in numpy, with the same check at compile time.

>>> from tensorlang.graph.ops import get
>>> get("embedding").kind, get("gather").kind, get("index_select").kind
('injective', 'injective', 'injective')
"""
from __future__ import annotations

import numpy as np

from ... import errors
from ..builder import LiteralRef, Ref, TensorRef
from . import register
from .common import fail, norm_dim, out

_INTS = ("i32", "i64")


class GatherRef(Ref):
    """`base` (a tensor of the program, declared with its own shape) read at an index that `at(idx)` gives: one
    entry per dimension of `base`, an `Aff` or the DSL text of an integer read from another tensor.

    >>> from tensorlang.graph.builder import Builder
    >>> from tensorlang.graph.ir import Value, TensorType
    >>> b = Builder("emb")
    >>> w = b.param(Value("w", TensorType((10, 4), "f32")))
    >>> ids = b.param(Value("ids", TensorType((3,), "i64")))
    >>> b.set_outputs([GatherRef(w, (3, 4), lambda idx: [ids.read(idx[:1]), idx[1]])])
    >>> print(b.text().splitlines()[1])
        out0[i0, i1] = in0[in1[i0], i1] where i0 in 0:3, i1 in 0:4
    """

    def __init__(self, base: TensorRef, shape, at):
        self.base, self.shape, self.dtype, self.at = base, tuple(shape), base.dtype, at

    def read(self, idx) -> str:
        """`base`'s element at the gathered index."""
        text = f"{self.base.name}[{', '.join(map(str, self.at(list(idx))))}]"
        return f"({text} != 0)" if self.dtype == "bool" else text


def _check_index(node, v) -> None:
    if v.dtype not in _INTS:
        raise fail(node, f"indices {v.name} have dtype {v.dtype}; indices are integer tensors (int64 or int32)")


def _index_text(b, node, ref, size: int, idx, what: str):
    """The index read from `ref` at `idx`, for a dimension of `size`: the DSL text of a gathered index, or an Aff
    for a constant index (checked now)."""
    if isinstance(ref, LiteralRef):
        k = int(ref.value)
        if not 0 <= k < size:
            raise errors.IndexError(f"{node.op} (node {node.name}): index {k} is out of range for {what} (size "
                                    f"{size})")
        from ..affine import Aff
        return Aff.const_(k)
    return ref.read(idx)


def _base(b, ref) -> TensorRef:
    """`ref` as a tensor of the program declared with its own shape (a 0-d value as one element [1])."""
    if ref.shape:
        return b.tensor_of(ref)
    return b.stage((1,), ref.dtype, lambda idx, _: ref.read([]))


def _out_of_range(node, index: np.ndarray, size: int, what: str) -> None:
    bad = (index < 0) | (index >= size)
    if bad.any():
        raise errors.IndexError(f"{node.op} (node {node.name}): index {int(index[bad].flat[0])} is out of range for "
                                f"{what} (size {size})")


# ---- embedding ------------------------------------------------------------------------------------------------

def _embedding_infer(node):
    w, ids = node.inputs[:2]
    _check_index(node, ids)
    if w.type.rank != 2:
        raise fail(node, f"weight {list(w.shape)}: an embedding table is [num_embeddings, dim]")
    return out(tuple(ids.shape) + (w.shape[1],), w.dtype)


def _embedding_lower(b, node, refs):
    w, ids = node.inputs[:2]
    table, index = _base(b, refs[0]), b.stage_of(refs[1])
    rank = ids.type.rank
    what = f"dimension 0 of the embedding table {w.name}"
    return [GatherRef(table, node.outputs[0].shape,
                      lambda idx: [_index_text(b, node, index, w.shape[0], idx[:rank], what), idx[rank]])]


def _embedding_eval(node, arrays):
    w, ids = arrays[:2]
    _out_of_range(node, ids, w.shape[0], f"dimension 0 of the embedding table {node.inputs[0].name}")
    return [w[ids]]


register("embedding", "injective", _embedding_infer, _embedding_lower, lambda node: 0, evaluate=_embedding_eval,
         family="index", doc="rows of a [V, D] table by integer ids of any shape (padding_idx: training only)")


# ---- gather ---------------------------------------------------------------------------------------------------

def _gather_dim(node) -> int:
    x, index = node.inputs[0], node.inputs[1]
    _check_index(node, index)
    if x.type.rank != index.type.rank and index.type.rank:
        raise fail(node, f"index {list(index.shape)} and input {list(x.shape)} must have the same rank")
    d = norm_dim(node.attrs.get("dim", 0), x.type.rank)
    for k, (s, n) in enumerate(zip(index.shape, x.shape)):
        if k != d and s > n:
            raise fail(node, f"index {list(index.shape)} is larger than input {list(x.shape)} in dim {k}")
    return d


def _gather_infer(node):
    if node.attrs.get("sparse_grad"):
        raise fail(node, "sparse_grad=True is not supported")
    _gather_dim(node)
    return out(node.inputs[1].shape, node.inputs[0].dtype)


def _gather_lower(b, node, refs):
    x = node.inputs[0]
    d = _gather_dim(node)
    base, index = _base(b, refs[0]), b.stage_of(refs[1])
    if not x.shape:  # a 0-d input: index 0 only
        return [GatherRef(base, node.outputs[0].shape,
                          lambda idx: [_index_text(b, node, index, 1, idx, "a 0-d input")])]
    what = f"dimension {d} of {x.name}"

    def at(idx):
        return idx[:d] + [_index_text(b, node, index, x.shape[d], idx, what)] + idx[d + 1:]
    return [GatherRef(base, node.outputs[0].shape, at)]


def _gather_eval(node, arrays):
    x, index = arrays[:2]
    if x.ndim == 0:
        _out_of_range(node, index, 1, "a 0-d input")
        return [np.broadcast_to(x, index.shape)]
    d = _gather_dim(node)
    _out_of_range(node, index, x.shape[d], f"dimension {d} of {node.inputs[0].name}")
    return [np.take_along_axis(x[tuple(slice(0, s) if k != d else slice(None) for k, s in enumerate(index.shape))],
                               index, axis=d)]


register("gather", "injective", _gather_infer, _gather_lower, lambda node: 0, evaluate=_gather_eval, family="index",
         doc="torch.gather along any dim (index no larger than the input in the other dims)")


# ---- index_select ---------------------------------------------------------------------------------------------

def _select_dim(node) -> int:
    x, index = node.inputs[:2]
    _check_index(node, index)
    if index.type.rank > 1:
        raise fail(node, f"index {list(index.shape)}: index_select takes a 1-d (or 0-d) index")
    return norm_dim(node.attrs.get("dim", 0), x.type.rank)


def _index_select_infer(node):
    x, index = node.inputs[:2]
    d = _select_dim(node)
    if not x.shape:
        return out((), x.dtype)
    n = index.shape[0] if index.shape else 1
    return out(x.shape[:d] + (n,) + x.shape[d + 1:], x.dtype)


def _index_select_lower(b, node, refs):
    x, index_v = node.inputs[:2]
    d = _select_dim(node)
    base, index = _base(b, refs[0]), b.stage_of(refs[1])
    size = x.shape[d] if x.shape else 1
    what = f"dimension {d} of {x.name}"

    def at(idx):
        k = _index_text(b, node, index, size, [idx[d]] if index_v.shape else [], what)
        return [k] if not x.shape else idx[:d] + [k] + idx[d + 1:]
    return [GatherRef(base, node.outputs[0].shape, at)]


def _index_select_eval(node, arrays):
    x, index = arrays[:2]
    d = _select_dim(node)
    _out_of_range(node, index, x.shape[d] if x.ndim else 1, f"dimension {d} of {node.inputs[0].name}")
    if x.ndim == 0:
        return [x.copy()]
    return [np.take(x, index.reshape(-1), axis=d)]


register("index_select", "injective", _index_select_infer, _index_select_lower, lambda node: 0,
         evaluate=_index_select_eval, family="index", doc="slices along one dim by a 1-d index")
