"""Vector accumulators: a reduction into one element from a vectorized loop keeps a vector of partial results
across the serial loop around it, and combines its lanes once at the end.

A vectorized reduction loop whose output element does not depend on the lane (softmax's row sum, split and
vectorized over `d`) makes every vector iteration reduce its lanes to one value and update the element in
memory: a horizontal reduction and a store per vector, and a chain of dependent updates. When the loop around
it is serial and does nothing else, this pass gives the reduction a stack buffer of one vector, which LLVM
keeps in a register::

    for d_o in 0:64:                         allocate sm_acc: f32[16]
      for d_i in 0:16:  # vectorized           for d_i in 0:16:  # vectorized
        sm[n] = sm[n] + e[n, d_i + d_o*16]        sm_acc[d_i] = 0f
                                     ==>       for d_o in 0:64:
                                                 for d_i in 0:16:  # vectorized
                                                   sm_acc[d_i] = sm_acc[d_i] + e[n, d_i + d_o*16]
                                               for d_i in 0:16:  # vectorized
                                                 sm[n] = sm[n] + sm_acc[d_i]

The partial results are combined in another order (float reassociation, as any vectorized reduction); integer
reductions and max / min give the same result. Lanes a tail guard masks off keep the identity.
"""
from __future__ import annotations

import itertools
from typing import cast

from . import ir
from .dtypes import DTYPES

REDUCE_OPS = ("+", "*", "max", "min")
"""The operators of a reduction update `T[i] = T[i] op value` that this pass reorders."""


def vector_accumulators(body: ir.Stmt, taken: set[str] | None = None) -> ir.Stmt:
    """`body` with every serial or unrolled loop whose only statement is a vectorized reduction into one element
    (see the module docstring) rewritten to accumulate in a vector. `taken` holds buffer names in use (those of
    `body` are added), so that each accumulator's name is new.

    >>> import tensorlang as tl
    >>> s = tl.schedule(tl.op("def rowsum(X: f32[N, D]) -> S:\\n    S[n] += X[n, d]"), N=2, D=64)
    >>> _ = s["S"].split("d", 16, outer="d_o", inner="d_i")
    >>> s["S"].vectorize("d_i")
    >>> print(s.lower())
    def rowsum(X: f32[2, 64], S: f32[2]):
      for n in 0:2:
        S[n] = 0f
        allocate S_acc: f32[16]
          for d_i in 0:16:  # vectorized
            S_acc[d_i] = 0f
          for d_o in 0:4:
            for d_i in 0:16:  # vectorized
              d = d_i + d_o*16
              S_acc[d_i] = S_acc[d_i] + X[n, d]
          for d_i in 0:16:  # vectorized
            S[n] = S[n] + S_acc[d_i]
    """
    names = _Names(body, taken)
    return _rewrite(body, names)


class _Names:
    """Buffer names in use, collected from the body only when a first accumulator needs a new one."""

    def __init__(self, body: ir.Stmt, taken):
        self.body, self.given = body, set(taken or ())
        self.taken: set[str] | None = None

    def new(self, base: str) -> str:
        """`base`, or `base1`, `base2`, ...: the first name not in use; it is in use from then on."""
        if self.taken is None:
            self.taken = self.given | set(ir.stmt_buffers(self.body))
        name = next(n for n in itertools.chain([base], (f"{base}{i}" for i in itertools.count(1)))
                    if n not in self.taken)
        self.taken.add(name)
        return name


def _rewrite(s: ir.Stmt, names: _Names) -> ir.Stmt:
    """`s` with its reductions rewritten; `s` itself (no copy) where there is none inside."""
    if isinstance(s, ir.For):
        if s.kind in ("serial", "unrolled"):
            found = _reduction_in(s)
            if found is not None:
                return _accumulate(s, *found, names)
        body = _rewrite(s.body, names)
        return s if body is s.body else ir.For(s.var, s.lo, s.extent, body, s.kind)
    if isinstance(s, ir.Seq):
        stmts = tuple(_rewrite(x, names) for x in s.stmts)
        return s if all(a is b for a, b in zip(stmts, s.stmts)) else ir.Seq(stmts)
    if isinstance(s, ir.If):
        then = _rewrite(s.then, names)
        orelse = None if s.orelse is None else _rewrite(s.orelse, names)
        return s if then is s.then and orelse is s.orelse else ir.If(s.cond, then, orelse)
    if isinstance(s, (ir.Let, ir.Allocate)):
        body = _rewrite(s.body, names)
        if body is s.body:
            return s
        return ir.Let(s.var, s.value, body) if isinstance(s, ir.Let) else ir.Allocate(s.buffer, body)
    return s


def _reduction_in(loop: ir.For) -> tuple[ir.For, ir.Store, list[ir.Expr]] | None:
    """(the vectorized loop, its store, the guards of the store that neither loop moves) when `loop`'s body is
    Lets around one constant-width vectorized loop whose body is Lets and Ifs around one reduction update of an
    element that neither loop moves; else None.

    A guard that the loops move (a tail) must not depend on where the element is, so that the combined update is
    valid exactly where the guards that do not move hold."""
    deps: dict[str, set[str]] = {loop.var.name: set()}  # what each variable bound inside depends on outside
    inner = _through_lets(loop.body, deps)
    if not (isinstance(inner, ir.For) and inner.kind == "vectorized" and isinstance(inner.extent, ir.IntImm)
            and not ir.expr_vars(inner.lo) & set(deps)):
        return None
    deps[inner.var.name] = set()
    store, conds = _through_lets(inner.body, deps), []
    while isinstance(store, ir.If) and store.orelse is None:
        conds += _atoms(store.cond)
        store = _through_lets(store.then, deps)
    if not isinstance(store, ir.Store):
        return None
    value = store.value
    if not (isinstance(value, ir.BinOp) and value.op in REDUCE_OPS and isinstance(value.a, ir.Load)
            and value.a.buffer == store.buffer and value.a.indices == store.indices):
        return None
    where = set().union(*(ir.expr_vars(i) for i in store.indices)) if store.indices else set()
    if where & set(deps):
        return None  # the element moves with the loops: not a reduction into one element
    fixed = []
    for c in conds:
        names = ir.expr_vars(c)
        if not names & set(deps):
            fixed.append(c)
        elif (names | set().union(*(deps.get(n, set()) for n in names))) & where:
            return None  # a tail guard that depends on the element
    others = [value.b, *conds, *_let_values(loop.body)]
    if any(ld.buffer.name == store.buffer.name for e in others for ld in ir.loads(e)):
        return None  # the element is read elsewhere in the loop: the updates must stay in order
    return inner, store, fixed


def _through_lets(s: ir.Stmt, deps: dict[str, set[str]]) -> ir.Stmt:
    """The statement inside `s`'s Lets; records in `deps` the outside variables each Let's value depends on."""
    while isinstance(s, ir.Let):
        names = ir.expr_vars(s.value)
        deps[s.var.name] = {n for n in names if n not in deps}.union(*(deps[n] for n in names if n in deps))
        s = s.body
    return s


def _atoms(cond: ir.Expr) -> list[ir.Expr]:
    """The conditions an `and` chain joins."""
    if isinstance(cond, ir.Logic) and cond.op == "and":
        return _atoms(cond.a) + _atoms(cond.b)
    return [cond]


def _let_values(s: ir.Stmt):
    """The values and conditions of the Lets and Ifs in `s`."""
    if isinstance(s, ir.Let):
        yield s.value
        yield from _let_values(s.body)
    elif isinstance(s, ir.If):
        yield s.cond
        yield from _let_values(s.then)
    elif isinstance(s, ir.For):
        yield from _let_values(s.body)


def _accumulate(loop: ir.For, inner: ir.For, store: ir.Store, fixed: list, names: _Names) -> ir.Stmt:
    value, extent = cast(ir.BinOp, store.value), cast(ir.IntImm, inner.extent)  # as _reduction_in found them
    target, op, dtype = store.buffer, value.op, store.buffer.dtype
    width = extent.value
    acc = ir.Buffer(names.new(f"{target.name}_acc"), dtype, (width,), "stack")
    lane = ir.Var(inner.var.name)
    slot = (ir.BinOp("-", lane, inner.lo) if not (isinstance(inner.lo, ir.IntImm) and inner.lo.value == 0)
            else lane,)
    identity = DTYPES[dtype].identity(op)
    ident = ir.FloatImm(float(identity), dtype) if DTYPES[dtype].is_float else ir.IntImm(int(identity), dtype)
    update = ir.Store(acc, slot, ir.BinOp(op, ir.Load(acc, slot), value.b))

    def swap(s: ir.Stmt) -> ir.Stmt:
        if s is store:
            return update
        if isinstance(s, ir.For):
            return ir.For(s.var, s.lo, s.extent, swap(s.body), s.kind)
        if isinstance(s, ir.Let):
            return ir.Let(s.var, s.value, swap(s.body))
        if isinstance(s, ir.If):
            return ir.If(s.cond, swap(s.then), None)
        return s

    def vector(body: ir.Stmt) -> ir.For:
        return ir.For(inner.var, inner.lo, inner.extent, body, "vectorized")

    combine: ir.Stmt = ir.Store(target, store.indices,
                                ir.BinOp(op, ir.Load(target, store.indices), ir.Load(acc, slot)))
    guard = ir.all_of(fixed)
    if guard is not None:
        combine = ir.If(guard, combine)
    return ir.Allocate(acc, ir.seq(vector(ir.Store(acc, slot, ident)),
                                   ir.For(loop.var, loop.lo, loop.extent, swap(loop.body), loop.kind),
                                   vector(combine)))
