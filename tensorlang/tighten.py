"""Loop bounds tightened to the iterations a guard lets through.

A split by a factor larger than what is left of a loop (``split("w", 8)`` of a 2-iteration ``w``) lowers to a
loop whose tail iterations do nothing but fail a guard. Those iterations cost time, and LLVM's loop unroller
can spend minutes and gigabytes on a nest of several of them (a maxpool with ``w``, ``h``, ``r`` and ``s`` all
split past their extents). This pass shortens a serial or unrolled loop
whose whole body is a guard (through pure ``Let`` bindings) to the iterations for which the guard can hold.
The guard stays: only iterations that did nothing are dropped, so the result is the same for every shape.

Before and after::

    for w_o in 0:1:                      for w_o in 0:1:
      for w_i in 0:8:                      for w_i in 0:2:
        w = w_i + w_o*8                      w = w_i + w_o*8
        if w <= 1:                           if w <= 1:
          O[w] = X[w]                          O[w] = X[w]

Example::

    >>> from tensorlang import ir
    >>> i, w = ir.Var("w_i"), ir.Var("w")
    >>> body = ir.Let(w, ir.BinOp("+", i, ir.const(0)), ir.If(ir.Cmp("<=", w, ir.const(1)), ir.Seq(())))
    >>> tighten_loops(ir.For(i, ir.const(0), ir.const(8), body)).extent
    IntImm(value=2, dtype='i64')
"""

from __future__ import annotations

import dataclasses

from . import ir
from .simplify import _linear
from .symbolic import is_symbolic


def tighten_loops(s: ir.Stmt, ranges: dict[str, tuple[int, int]] | None = None) -> ir.Stmt:
    """`s` with every serial or unrolled loop whose body is only a guard shortened to the iterations the guard
    can let through, given the enclosing loops' `ranges` (name -> (lowest, highest) value).

    >>> from tensorlang import ir
    >>> v = ir.Var("v")
    >>> loop = ir.For(v, ir.const(0), ir.const(8), ir.If(ir.Cmp("<", v, ir.const(3)), ir.Seq(())))
    >>> tighten_loops(loop).extent.value
    3
    """
    ranges = dict(ranges or {})
    if isinstance(s, ir.Seq):
        return ir.Seq(tuple(tighten_loops(x, ranges) for x in s.stmts))
    if isinstance(s, ir.Let):
        return dataclasses.replace(s, body=tighten_loops(s.body, _with_let(ranges, s)))
    if isinstance(s, ir.If):
        return dataclasses.replace(s, then=tighten_loops(s.then, ranges),
                                   orelse=None if s.orelse is None else tighten_loops(s.orelse, ranges))
    if isinstance(s, ir.Allocate):
        return dataclasses.replace(s, body=tighten_loops(s.body, ranges))
    if not isinstance(s, ir.For):
        return s
    lo, ext = s.lo, s.extent
    if not (isinstance(lo, ir.IntImm) and isinstance(ext, ir.IntImm)) or is_symbolic(lo.value) \
            or is_symbolic(ext.value) or ext.value < 1:  # a loop over a size known at run time stays as it is
        return dataclasses.replace(s, body=tighten_loops(s.body, ranges))
    if s.kind in ("serial", "unrolled"):
        last = _last_useful(s.var.name, lo.value, lo.value + ext.value - 1, s.body, ranges)
        if last is not None and last < lo.value + ext.value - 1:
            ext = ir.const(max(last - lo.value + 1, 0))
    inner = dict(ranges)
    inner[s.var.name] = (lo.value, lo.value + max(ext.value, 1) - 1)
    if ext.value == 0:
        return dataclasses.replace(s, extent=ext)
    return dataclasses.replace(s, extent=ext, body=tighten_loops(s.body, inner))


def _with_let(ranges: dict, let: ir.Let) -> dict:
    """`ranges` and the let variable's range, where its value is affine in variables of known range."""
    span = _span(let.value, ranges)
    if span is None:
        return ranges
    out = dict(ranges)
    out[let.var.name] = span
    return out


def _span(e: ir.Expr, ranges: dict) -> tuple[int, int] | None:
    """(lowest, highest) of an affine integer expression over `ranges`, None if it is not one."""
    if e.dtype not in ("i32", "i64"):
        return None
    terms, c = _linear(e)
    lo = hi = c
    for atom, k in terms.items():
        if not isinstance(atom, ir.Var) or atom.name not in ranges:
            return None
        a, b = ranges[atom.name]
        lo += min(k * a, k * b)
        hi += max(k * a, k * b)
    return lo, hi


def _last_useful(var: str, first: int, last: int, body: ir.Stmt, ranges: dict) -> int | None:
    """The largest value of `var` for which `body` (Lets around one guard) can do anything, or None."""
    lets: dict[str, ir.Expr] = {}
    while isinstance(body, ir.Let):
        lets[body.var.name] = body.value
        body = body.body
    if not isinstance(body, ir.If) or body.orelse is not None:
        return None
    best = None
    for cond in _conjuncts(body.cond):
        bound = _upper_bound(var, cond, lets, ranges)
        if bound is not None:
            best = bound if best is None else min(best, bound)
    return best


def _conjuncts(c: ir.Expr):
    if isinstance(c, ir.Logic) and c.op == "and":
        yield from _conjuncts(c.a)
        yield from _conjuncts(c.b)
    else:
        yield c


def _upper_bound(var: str, cond: ir.Expr, lets: dict, ranges: dict) -> int | None:
    """The largest `var` that can satisfy ``cond`` (``a <= b`` or ``a < b`` with `var` rising in ``a - b``) for
    some values of the other variables in `ranges`, or None."""
    if not isinstance(cond, ir.Cmp) or cond.op not in ("<", "<=") or cond.a.dtype not in ("i32", "i64"):
        return None
    diff: ir.Expr = ir.BinOp("-", cond.a, cond.b)
    for _ in range(len(lets)):  # a let may name an earlier one
        diff = ir.substitute(diff, lets)
    terms, c = _linear(diff)
    if is_symbolic(c) or any(is_symbolic(v) for v in terms.values()):  # a bound known at run time only
        return None
    k = next((k for atom, k in terms.items() if isinstance(atom, ir.Var) and atom.name == var), 0)
    if k <= 0:
        return None
    rest = {a: v for a, v in terms.items() if not (isinstance(a, ir.Var) and a.name == var)}
    low = c  # the smallest value of the other terms: the guard holds for the most iterations there
    for atom, kk in rest.items():
        if not isinstance(atom, ir.Var) or atom.name not in ranges:
            return None
        a, b = ranges[atom.name]
        low += min(kk * a, kk * b)
    limit = 0 if cond.op == "<=" else -1  # k*var + low <= limit
    return (limit - low) // k
