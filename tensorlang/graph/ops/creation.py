"""Ops that make a tensor from numbers alone (full, zeros, ones, arange, scalar_tensor, and the `*_like` and `new_*`
ops, which read only their input's shape and dtype):
they are constants, computed in numpy when the graph is built (`evaluate`); no kernel runs them.

>>> from tensorlang.graph.ops import get
>>> from tensorlang.graph.ir import Node
>>> get("full").evaluate(Node("full", [], {"size": [2], "fill_value": 1.5, "dtype": "f32"}, []), [])[0].tolist()
[1.5, 1.5]
"""
from __future__ import annotations

import numpy as np

from ..ir import DTYPES
from . import register
from .common import fail, out, scalar_dtype


def _fill_dtype(node, value):
    d = node.attrs.get("dtype")
    if d:
        return d
    return scalar_dtype(value) if not isinstance(value, float) else "f32"


def _full_infer(node):
    return out(node.attrs["size"], _fill_dtype(node, node.attrs["fill_value"]))


def _full_eval(node, arrays):
    t = node.outputs[0].type if node.outputs else _full_infer(node)[0]
    return [np.full(t.shape, node.attrs["fill_value"], DTYPES[t.dtype])]


def _like_infer(node):
    x = node.inputs[0]
    return out(x.shape, node.attrs.get("dtype") or x.dtype)


def _like_eval(node, arrays):
    t = node.outputs[0].type
    return [np.full(t.shape, node.attrs.get("fill_value", 0), DTYPES[t.dtype])]


def _scalar_infer(node):
    return out((), _fill_dtype(node, node.attrs["s"]))


def _scalar_eval(node, arrays):
    t = node.outputs[0].type
    return [np.array(node.attrs["s"], DTYPES[t.dtype])]


def _arange_values(node):
    start, end, step = node.attrs.get("start", 0), node.attrs["end"], node.attrs.get("step", 1)
    if not step:
        raise fail(node, "step 0")
    dtype = node.attrs.get("dtype")
    if dtype is None:
        dtype = "f32" if any(isinstance(v, float) for v in (start, end, step)) else "i64"
    return np.arange(start, end, step).astype(DTYPES[dtype])


def _new_infer(node):
    return out(node.attrs["size"], node.attrs.get("dtype") or node.inputs[0].dtype)


def _new_eval(fill):
    def evaluate(node, arrays):
        t = node.outputs[0].type
        return [np.full(t.shape, node.attrs.get("fill_value", fill), DTYPES[t.dtype])]
    return evaluate


def _empty_infer(node):
    return out(node.attrs["size"], node.attrs.get("dtype") or "f32")


def _arange_infer(node):
    v = _arange_values(node)
    return out(v.shape, node.attrs.get("dtype") or ("f32" if v.dtype.kind == "f" else "i64"))


for _name, _infer, _eval, _doc in (
        ("full", _full_infer, _full_eval, "zeros, ones"),
        ("full_like", _like_infer, _like_eval, "zeros_like, ones_like (only the shape of its input is read)"),
        ("scalar_tensor", _scalar_infer, _scalar_eval, ""),
        ("arange.start_step", _arange_infer, lambda n, a: [_arange_values(n)], ""),
        ("arange.default", _arange_infer, lambda n, a: [_arange_values(n)], ""),
        ("zeros_like", _like_infer, _new_eval(0), "only the shape of its input is read"),
        ("ones_like", _like_infer, _new_eval(1), "only the shape of its input is read"),
        ("empty_like", _like_infer, _new_eval(0), "zeros (its contents are unspecified)"),
        ("new_full", _new_infer, _new_eval(0), "size, fill_value; the input's dtype unless dtype is given"),
        ("new_zeros", _new_infer, _new_eval(0), "size; the input's dtype unless dtype is given"),
        ("new_ones", _new_infer, _new_eval(1), "size; the input's dtype unless dtype is given"),
        ("new_empty", _new_infer, _new_eval(0), "zeros (its contents are unspecified)"),
        ("empty.memory_format", _empty_infer, lambda n, a: [np.zeros(n.outputs[0].shape, DTYPES[n.outputs[0].dtype])],
         "zeros (its contents are unspecified)")):
    register(_name, "creation", _infer, None, evaluate=_eval, family="creation", doc=_doc)
