"""A program evaluated by numpy: the oracle that ``tensorlang run`` and ``bench`` check kernels against.

:func:`reference` reads a program's meaning from its parsed statements (the ranges its sizes give, the dtypes its
typing rules give) and computes every stage with numpy arrays over a grid of its index values: reads gather with
numpy indexing (a read outside its tensor, possible only in a ``where``-widened range, gives 0; an index read from
a tensor outside its dimension, negative ones included, is a ``tl.IndexError`` as in a kernel), reductions are
numpy's (accumulated in float64 for float stages, int64 for integer ones, then rounded to the stage's dtype), and
``x // y``, ``%``, ``max``, casts and comparisons are numpy's own; a scan (a stage that reads its earlier elements,
``S[i] = S[i - 1] + X[i]``) is computed one slice along its scan index at a time, in order. Nothing of the
schedule, the lowering or the code generators is used, so a lowering bug cannot pass as a match.

Large statements are computed in blocks of at most :data:`BLOCK_ELEMENTS` grid points; a ``+=`` of a product of
plain reads (a matrix product, a batched contraction) goes to ``numpy.einsum``.

Example::

    >>> import numpy as np, tensorlang as tl
    >>> op = tl.op("def matmul(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[m, n] += A[m, k] * B[k, n]")
    >>> ref = tl.reference(op, M=2, N=3, K=4)
    >>> A, B = np.ones((2, 4), np.float32), np.ones((4, 3), np.float32)
    >>> ref(A, B).tolist()
    [[4.0, 4.0, 4.0], [4.0, 4.0, 4.0]]
    >>> ref.reduction_lengths
    {'C': 4}
"""
from __future__ import annotations

import math
from typing import cast

import numpy as np

from . import errors
from .bind import BoundOp, BoundStage, bind
from .dtypes import DTYPES
from .errors import BuildError
from .program import (
    Access,
    Binary,
    BoundaryIndex,
    Call,
    GatherIndex,
    IndexExpr,
    IntValue,
    Literal,
    Op,
    Unary,
    gather_sites,
    scan_axis,
)

#: The most grid points (index combinations) one numpy evaluation of a statement covers; larger statements are
#: computed in blocks along their outer indices (about 100 MB of float64 temporaries at most per array).
BLOCK_ELEMENTS = 1 << 22

#: Where weak values (literals, sizes, index values) meet no tensor, in a cast's argument or a comparison of two
#: of them, they are Python numbers: integers in 64 bits, floats in double (the DSL's typing rule).
_PYTHON_NUMBER = {"i32": "i64", "f32": "f64"}

_CMP = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal, "==": np.equal,
        "!=": np.not_equal}
_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "//": np.floor_divide, "%": np.mod, "**": np.power,
          "/": np.true_divide}
_FUNCS = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "abs": np.abs}
_REDUCE = {"+": np.add, "*": np.multiply, "max": np.maximum, "min": np.minimum}


class Reference:
    """A program bound to sizes, evaluated by numpy (see the module docstring); call it like a kernel.

    ``reduction_lengths[output]`` is the number of terms the longest chain of reductions adds into one element of
    that output (what its rounding error grows with, for :func:`tensorlang.compare.tolerance`).

    Example::

        >>> import numpy as np, tensorlang as tl
        >>> ref = tl.reference(tl.op("def f(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0"), N=3)
        >>> ref(np.arange(3, dtype=np.float32)).tolist()
        [0.0, 2.0, 4.0]
    """

    def __init__(self, op: Op, sizes: dict):
        self.op = op
        self.bound: BoundOp = bind(op, sizes)
        self.sizes = dict(self.bound.sizes)
        self.order = _dependency_order(op)
        self.reduction_lengths = _reduction_lengths(self.bound, self.order)

    def __call__(self, *inputs):
        """The program's outputs for ``inputs`` (numpy arrays in parameter order): one array, or a tuple of them
        when the program has several outputs. An input of the wrong shape or dtype is a ``tl.BuildError``."""
        op, bound = self.op, self.bound
        if len(inputs) != len(op.params):
            raise BuildError(f"{op.name}: the reference takes {len(op.params)} inputs "
                             f"({', '.join(op.inputs)}), got {len(inputs)}")
        tensors: dict[str, np.ndarray] = {}
        for p, a in zip(op.params, inputs):
            a = np.asarray(a)
            want = DTYPES[p.dtype].numpy
            if a.shape != bound.shapes[p.name] or a.dtype != want:
                raise BuildError(f"{op.name}: input {p.name} of the reference must be {want.name}"
                                 f"{list(bound.shapes[p.name])}, got {a.dtype.name}{list(a.shape)}")
            tensors[p.name] = a
        with np.errstate(all="ignore"):
            for name in self.order:
                tensors[name] = _evaluate_stage(bound, bound.stages[name], tensors)
        outs = tuple(tensors[name] for name in op.outputs)
        return outs[0] if len(outs) == 1 else outs


def reference(op: Op, **sizes: int) -> Reference:
    """``op`` at ``sizes`` evaluated by numpy, independently of the compiler's lowering: the oracle to check a
    kernel of any program against (see :mod:`tensorlang.numpy_reference`). Sizes are checked as ``tl.build``
    checks them.

    Example::

        >>> import numpy as np, tensorlang as tl
        >>> op = tl.op('''
        ... def softmax(X: f32[N, D]) -> Y:
        ...     mx[n] max= X[n, d]
        ...     e[n, d] = exp(X[n, d] - mx[n])
        ...     s[n] += e[n, d]
        ...     Y[n, d] = e[n, d] / s[n]
        ... ''')
        >>> Y = tl.reference(op, N=2, D=5)(np.zeros((2, 5), np.float32))
        >>> Y.dtype.name, Y[0].tolist()
        ('float32', [0.20000000298023224, 0.20000000298023224, 0.20000000298023224, 0.20000000298023224, \
0.20000000298023224])
    """
    return Reference(op, sizes)


# ------------------------------------------------------------------------------------------------ stages


def _dependency_order(op: Op) -> list[str]:
    stages = {s.name: s for s in op.stages}
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(name: str) -> None:
        if state.get(name) == 2:
            return
        state[name] = 1
        for r in stages[name].reads():
            if r in stages and r != name and state.get(r) != 2:
                visit(r)  # the parser refuses cycles, so a stage in progress is never met again
        state[name] = 2
        order.append(name)
    for s in op.stages:
        visit(s.name)
    return order


def _reduction_lengths(bound: BoundOp, order: list[str]) -> dict[str, int]:
    own: dict[str, int] = {}
    for name in order:
        bs = bound.stages[name]
        n = math.prod(bs.ranges[v][1] for v in bs.stage.red_vars)
        scan = scan_axis(bs.stage)
        if scan is not None:  # a scan adds up to one term a step along its index
            n = bs.ranges[scan[0]][1]
        own[name] = n + max((own[r] for r in bs.stage.reads() if r in own and r != name), default=0)
    return {o: max(own.get(o, 1), 1) for o in bound.op.outputs}


def _evaluate_stage(bound: BoundOp, bs: BoundStage, tensors: dict) -> np.ndarray:
    s = bs.stage
    dtype = DTYPES[s.dtype].numpy
    if s.lhs is not None:
        return _evaluate_scatter(bound, bs, tensors).astype(dtype)
    if scan_axis(s) is not None:
        return _evaluate_scan(bound, bs, tensors)
    fast = _einsum(bound, bs, tensors)
    if fast is not None:
        return fast.astype(dtype)
    axes = list(s.lhs_vars + s.red_vars)
    extents = [bs.ranges[v][1] for v in axes]
    acc_dtype = np.float64 if DTYPES[s.dtype].is_float else np.bool_ if s.dtype == "bool" else \
        np.uint64 if s.dtype == "u64" else np.int64
    out = np.full(bs.shape, DTYPES[s.dtype].identity(s.reduce_op), acc_dtype) if s.reduce_op else \
        np.empty(bs.shape, dtype)
    nl = len(s.lhs_vars)
    sites = {(id(g.access), g.dim): g for g in gather_sites(bound.op)}
    for block in _blocks(extents):
        grids = _grids(bs, axes, block)
        full = tuple(stop - start for start, stop in block)
        value = _Evaluator(bound, bs, tensors, grids, sites)(s.rhs, s.dtype)
        value = np.broadcast_to(np.asarray(value), full)
        where = tuple(slice(start, stop) for start, stop in block[:nl])
        if s.reduce_op is None:
            out[where] = value.astype(dtype)
        else:
            red = tuple(range(nl, len(axes)))
            part = _REDUCE[s.reduce_op].reduce(value.astype(acc_dtype), axis=red) if red else value
            out[where] = _REDUCE[s.reduce_op](out[where], part)
    return out.astype(dtype)


def _grids(bs: BoundStage, axes: list[str], block: list) -> dict:
    """Each index variable's values over one block of the grid, as an array along its own axis."""
    grids = {}
    for k, (v, (start, stop)) in enumerate(zip(axes, block)):
        shape = [1] * len(axes)
        shape[k] = stop - start
        lo = bs.ranges[v][0]
        grids[v] = np.arange(lo + start, lo + stop, dtype=np.int64).reshape(shape)
    return grids


def _evaluate_scatter(bound: BoundOp, bs: BoundStage, tensors: dict) -> np.ndarray:
    """A scatter (`H[b := I[y, x]] += 1`): the value and the left indices over the grid of the stage's loop
    indices, accumulated by numpy's unbuffered `ufunc.at` (np.add.at, np.maximum.at, ...), so that every repeat
    of an index counts; a left index outside its dimension is a tl.IndexError (np.add.at's IndexError)."""
    s = bs.stage
    assert s.lhs is not None and s.reduce_op is not None  # the caller's check; the parser refuses `=`
    axes = list(s.loop_vars)
    acc_dtype = np.float64 if DTYPES[s.dtype].is_float else np.int64
    out = np.full(bs.shape, DTYPES[s.dtype].identity(s.reduce_op), acc_dtype)
    sites = {(id(g.access), g.dim): g for g in gather_sites(bound.op)}
    for block in _blocks([bs.ranges[v][1] for v in axes]):
        grids = _grids(bs, axes, block)
        full = tuple(stop - start for start, stop in block)
        ev = _Evaluator(bound, bs, tensors, grids, sites)
        value = np.broadcast_to(np.asarray(ev(s.rhs, s.dtype)).astype(acc_dtype), full)
        at = []
        for d, (v, ix) in enumerate(zip(s.lhs_vars, s.lhs.indices)):
            if not isinstance(ix, GatherIndex):
                at.append(np.broadcast_to(grids[v], full))
                continue
            idx = np.asarray(ev(ix.value, ix.value.dtype)).astype(np.int64)
            bad = (idx < 0) | (idx >= bs.shape[d])
            if bad.any():
                site = sites[(id(s.lhs), d)]
                raise errors.IndexError(site.message(bound.op.name, int(idx[bad].flat[0]), bs.shape[d]))
            at.append(np.broadcast_to(idx, full))
        _REDUCE[s.reduce_op].at(out, tuple(at), value)
    return out


def _evaluate_scan(bound: BoundOp, bs: BoundStage, tensors: dict) -> np.ndarray:
    """A stage that reads itself (a scan): one slice along its scan index at a time, in increasing order, each
    computed from the slices before it (the elements not computed yet are 0, as the reads before the first are)."""
    s = bs.stage
    axis, _ = cast(tuple, scan_axis(s))
    out = tensors[s.name] = np.zeros(bs.shape, DTYPES[s.dtype].numpy)
    sites = {(id(g.access), g.dim): g for g in gather_sites(bound.op)}
    k = s.lhs_vars.index(axis)
    step = tuple(1 if v == axis else n for v, n in zip(s.lhs_vars, bs.shape))
    for t in range(bs.shape[k]):
        grids = {}
        for j, v in enumerate(s.lhs_vars):
            shape = [1] * len(s.lhs_vars)
            shape[j] = 1 if v == axis else bs.shape[j]
            grids[v] = (np.full(shape, t, np.int64) if v == axis else np.arange(bs.shape[j], dtype=np.int64)
                        .reshape(shape))
        value = _Evaluator(bound, bs, tensors, grids, sites)(s.rhs, s.dtype)
        out[(slice(None),) * k + (slice(t, t + 1),)] = np.broadcast_to(np.asarray(value), step)
    return out


def _blocks(extents: list[int]):
    """Blocks of the grid, as a list of (start, stop) per axis: whole trailing axes, one block axis, and single
    indices before it, so that a block holds at most BLOCK_ELEMENTS points."""
    k = len(extents)
    inner = 1
    while k > 0 and inner * extents[k - 1] <= BLOCK_ELEMENTS:
        k -= 1
        inner *= extents[k]
    if k == 0:
        yield [(0, e) for e in extents]
        return
    step = max(1, BLOCK_ELEMENTS // inner)
    for outer in np.ndindex(*extents[:k - 1]):
        for start in range(0, extents[k - 1], step):
            yield ([(int(i), int(i) + 1) for i in outer] + [(start, min(start + step, extents[k - 1]))]
                   + [(0, e) for e in extents[k:]])


def _einsum(bound: BoundOp, bs: BoundStage, tensors: dict) -> np.ndarray | None:
    """A `+=` (or `=`) of a product of reads at plain indices over their whole dimensions, by numpy.einsum in
    float64; None for any other statement."""
    s = bs.stage
    if s.reduce_op not in (None, "+") or not DTYPES[s.dtype].is_float:
        return None
    factors: list = []

    def collect(e) -> bool:
        if isinstance(e, Binary) and e.op == "*":
            return collect(e.a) and collect(e.b)
        if isinstance(e, Access) and e.dtype == s.dtype and e.indices:
            factors.append(e)
            return True
        return False
    if not collect(s.rhs) or len(factors) > 8:
        return None
    letters = {v: chr(ord("a") + i) for i, v in enumerate(s.lhs_vars + s.red_vars)}
    if len(letters) > 26:
        return None
    subscripts, operands = [], []
    for a in factors:
        names = [ix.is_plain_var() for ix in a.indices]
        if None in names or len(set(names)) != len(names):
            return None
        if any(bs.ranges[v] != (0, n) for v, n in zip(names, bound.shapes[a.tensor])):
            return None
        subscripts.append("".join(letters[v] for v in names))
        operands.append(tensors[a.tensor].astype(np.float64))
    if not set(letters[v] for v in s.lhs_vars) <= set("".join(subscripts)):
        return None  # a left-side index no factor reads: the result broadcasts along it
    spec = ",".join(subscripts) + "->" + "".join(letters[v] for v in s.lhs_vars)
    return np.einsum(spec, *operands, optimize=True)


# ------------------------------------------------------------------------------------------------ values


class _Evaluator:
    """A value expression over a grid of index values, each node computed in the dtype the DSL's typing gives
    it: `want` for weak values, their own dtype otherwise."""

    def __init__(self, bound: BoundOp, bs: BoundStage, tensors: dict, grids: dict, sites: dict):
        self.bound, self.tensors, self.grids = bound, tensors, grids
        self.pads = dict(zip(map(id, bs.stage.accesses()), bs.padded))
        self.sites = sites  # (id of a read, dimension) -> its GatherSite

    def index(self, ix: IndexExpr):
        coeffs, const = ix.evaluate(self.bound.sizes)
        value = np.int64(const)
        for v, c in coeffs.items():
            value = value + np.int64(c) * self.grids[v]
        return value

    def __call__(self, e, want: str):
        dt = want if e.weak else e.dtype
        if isinstance(e, Access):
            return _cast(self.read(e), dt)
        if isinstance(e, Literal):
            return _cast(np.asarray(e.value, np.float64 if isinstance(e.value, float) else np.int64), dt)
        if isinstance(e, IntValue):
            return _cast(self.index(e.expr), dt)
        if isinstance(e, Unary):
            return np.logical_not(self(e.x, "bool")) if e.op == "not" else np.negative(self(e.x, dt))
        if isinstance(e, Binary):
            if e.op in ("and", "or"):
                fn = np.logical_and if e.op == "and" else np.logical_or
                return fn(self(e.a, "bool"), self(e.b, "bool"))
            if e.dtype == "bool":
                odt = _PYTHON_NUMBER.get(e.operand_dtype, e.operand_dtype) if e.a.weak and e.b.weak \
                    else e.operand_dtype
                return _CMP[e.op](self(e.a, odt), self(e.b, odt))
            return _cast(_ARITH[e.op](self(e.a, dt), self(e.b, dt)), dt)
        if isinstance(e, Call):
            if e.fn in DTYPES or e.fn.startswith("sat_"):  # a cast
                a = e.args[0]
                x = self(a, _PYTHON_NUMBER.get(a.dtype, a.dtype) if a.weak else a.dtype)
                return _cast(x, e.fn) if e.fn in DTYPES else _saturate(x, e.dtype)
            if e.fn == "select":
                return np.where(self(e.args[0], "bool"), self(e.args[1], dt), self(e.args[2], dt))
            if e.fn in ("max", "min", "clamp"):
                # of Python numbers only (`max(pad, r)`): computed exactly, then converted, as the kernels do
                exact = all(a.weak for a in e.args) and e.dtype in _PYTHON_NUMBER
                at = _PYTHON_NUMBER[e.dtype] if exact else dt
                args = [self(a, at) for a in e.args]
                if e.fn == "clamp":
                    value = np.minimum(np.maximum(args[0], args[1]), args[2])
                else:
                    value = (np.maximum if e.fn == "max" else np.minimum)(args[0], args[1])
                return _cast(value, dt) if exact else value
            return _cast(_FUNCS[e.fn](self(e.args[0], dt)), dt)
        raise TypeError(f"the reference cannot evaluate {type(e).__name__}")

    def read(self, a: Access):
        arr = self.tensors[a.tensor]
        if not a.indices:
            return arr[()]
        ids = [self.gathered(a, d) if isinstance(ix, GatherIndex) else
               self(ix.value, "i64") if isinstance(ix, BoundaryIndex) else self.index(ix)
               for d, ix in enumerate(a.indices)]
        if not self.pads[id(a)]:
            return arr[tuple(ids)]
        ids = list(np.broadcast_arrays(*ids))
        inside = np.ones(ids[0].shape, bool)
        for d, ix in enumerate(ids):
            inside &= (ix >= 0) & (ix < arr.shape[d])
        clipped = tuple(np.clip(ix, 0, arr.shape[d] - 1) for d, ix in enumerate(ids))
        return np.where(inside, arr[clipped], np.zeros((), arr.dtype))


    def gathered(self, a: Access, d: int):
        """The values of the gathered index `d` of read `a`; tl.IndexError for one outside the dimension (numpy
        would count a negative one from the end)."""
        ix = cast(GatherIndex, a.indices[d])  # the caller's check
        value = np.asarray(self(ix.value, ix.value.dtype)).astype(np.int64)
        n = self.tensors[a.tensor].shape[d]
        bad = (value < 0) | (value >= n)
        if bad.any():
            raise errors.IndexError(self.sites[(id(a), d)].message(self.bound.op.name, int(value[bad].flat[0]), n))
        return value


def _cast(x, dtype: str):
    want = DTYPES[dtype].numpy
    x = np.asarray(x)
    if x.dtype == want:
        return x
    if x.dtype.kind == "f" and DTYPES[dtype].is_int:  # the DSL's definition (numpy leaves out-of-range undefined)
        return _saturate(x, dtype)
    return x.astype(want)


def _saturate(x, dtype: str):
    """`x` as the integer type `dtype`, clamped to its range: floats truncated toward zero, NaN giving 0."""
    x = np.asarray(x)
    lo, hi = DTYPES[dtype].int_range
    want = DTYPES[dtype].numpy
    if x.dtype.kind == "f":
        t = np.trunc(np.where(np.isnan(x), 0, x)).astype(np.float64)
        low, high = t < lo, t >= float(hi + 1)  # lo and hi + 1 are powers of two: exact in float64
        inside = np.where(low | high, 0, t).astype(want)
        return np.where(low, want.type(lo), np.where(high, want.type(hi), inside))
    if x.dtype == np.bool_:
        return x.astype(want)
    info = np.iinfo(x.dtype)  # bounds within the source's range, so that numpy takes them in its dtype
    return np.clip(x, max(lo, int(info.min)), min(hi, int(info.max))).astype(want)
