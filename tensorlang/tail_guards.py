"""Tail guards taken out of unrolled and vectorized loops: a loop runs a copy without the guard wherever every
one of its iterations passes it (loop versioning, as Halide's loop partitioning does for its steady state).

A split of a loop over a size the factor may not divide (a symbolic size, or an integer one it does not divide)
guards the tail: ``if i <= M - 1`` around the store of a register tile, ``if k <= K - 1`` around the step of a
reduction. Inside an unrolled or vectorized loop such a guard is paid at every element, and it can keep LLVM
from storing a whole vector. Where the guard is affine in the loops it sits in, the top of the run of
constant-extent, non-parallel loops around it (one of them unrolled or vectorized, some of them ones it depends
on) is versioned: when the guard holds at the extreme values of those loops it holds at all of them, so that copy runs
without it; the other copy, for the tail, keeps it. The run goes up through loops the guard does not depend on
(a reduction's tap loop between it and the vector loop), so that the loop under the check runs free of branches
and keeps its accumulators in registers. Where the guard is known to fail at those extremes (a fixed size whose
last block is partial: `for x_t in 0:98` over 1560 elements in vectors of 16), the versioning goes one loop down,
once per iteration of the loop above, which then runs its whole blocks without the guard. A bound's min or max is
taken apart into comparisons that are linear. The result is the same for every size.

A boundary condition's clamp is handled as a guard: `min(x - 26, 1535)` with `x` moving along a vectorized loop
holds as `x - 26` where ``x - 26 <= 1535`` at the loops' extremes, so the copy for the vectors inside the image
reads without it (:func:`_unclamped`).

Before and after (M symbolic, ``i = i_i + i_o*4``)::

    for i_i in 0:4:  # unrolled               if i_o*4 + 3 <= M - 1:
      i = i_i + i_o*4                           for i_i in 0:4:  # unrolled
      if i <= M - 1:                              i = i_i + i_o*4
        B[i] = A[i]*2f                            B[i] = A[i]*2f
                                              else:
                                                for i_i in 0:4:  # unrolled
                                                  i = i_i + i_o*4
                                                  if i <= M - 1:
                                                    B[i] = A[i]*2f

Example::

    >>> from tensorlang import ir
    >>> A = ir.Buffer("A", "f32", (8,))
    >>> i, o = ir.Var("i_i"), ir.Var("i_o")
    >>> store = ir.Store(A, (i,), ir.FloatImm(0.0))
    >>> guarded = ir.If(ir.Cmp("<=", ir.BinOp("+", i, ir.BinOp("*", o, ir.const(4))), ir.const(6)), store)
    >>> print(hoist_tail_guards(ir.For(i, ir.const(0), ir.const(4), guarded, "unrolled")))
    if i_o*4 + 3 <= 6:
      for i_i in 0:4:  # unrolled
        A[i_i] = 0f
    else:
      for i_i in 0:4:  # unrolled
        if i_i + i_o*4 <= 6:
          A[i_i] = 0f
"""
from __future__ import annotations

import dataclasses
import operator
from typing import cast

from . import ir
from .simplify import _linear, simplify
from .symbolic import is_symbolic, proven

_INT = ("i32", "i64")
_INT_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_PURE = (ir.Var, ir.IntImm, ir.BinOp, ir.Neg)  # what a hoisted condition may be made of (no loads, no calls)


def hoist_tail_guards(s: ir.Stmt) -> ir.Stmt:
    """`s` with each loop that tops a run of loops a tail guard depends on versioned on that guard (see the module
    docstring): ``if <the guard at the loops' extremes>: <the loop without it> else: <the loop as it was>``.

    >>> from tensorlang import ir
    >>> v = ir.Var("v")
    >>> loop = ir.For(v, ir.const(0), ir.const(8), ir.If(ir.Cmp("<", v, ir.const(3)), ir.Seq(())), "vectorized")
    >>> hoist_tail_guards(loop) == loop  # a guard on constants alone is left where it is
    True
    """
    return _rewrite(s, {}, None, False)


def _chainable(loop: ir.Stmt) -> bool:
    """Whether a loop can be part of a run a guard is hoisted through: integer bounds, not parallel."""
    return isinstance(loop, ir.For) and loop.kind != "parallel" and isinstance(loop.lo, ir.IntImm) and \
        isinstance(loop.extent, ir.IntImm) and not is_symbolic(loop.lo.value) and \
        not is_symbolic(loop.extent.value) and loop.extent.value >= 1


def _pure(e: ir.Expr) -> bool:
    if not isinstance(e, _PURE) or e.dtype not in _INT:
        return False
    if isinstance(e, ir.BinOp):
        return e.op in ("+", "-", "*", "//", "%", "min", "max") and _pure(e.a) and _pure(e.b)
    if isinstance(e, ir.Neg):
        return _pure(e.a)
    return True


def _hoisted(cond: ir.Expr, env: dict, run: list[ir.For]) -> ir.Expr | None:
    """The condition, at the entry of ``run[0]``, under which the conjunct `cond` holds for every iteration of
    the loops in `run` (outermost first); None where it is not an affine comparison in their variables that
    depends on the first, or where `run` is not a run of chainable loops with an unrolled or vectorized one."""
    if not isinstance(cond, ir.Cmp) or cond.op not in ("<", "<=", ">", ">=") or not run or \
            not all(_chainable(lp) for lp in run) or not any(lp.kind in ("unrolled", "vectorized") for lp in run):
        return None
    a, b = ir.substitute(cond.a, env), ir.substitute(cond.b, env)
    if not (_pure(a) and _pure(b)):
        return None
    terms, _ = _linear(ir.BinOp("-", a, b))
    names = {lp.var.name: lp for lp in run}
    spans = {n: (cast(ir.IntImm, lp.lo).value, cast(ir.IntImm, lp.extent).value) for n, lp in names.items()}
    coef: dict[str, int] = {}
    for atom, k in terms.items():
        if isinstance(atom, ir.Var) and atom.name in names:
            if is_symbolic(k):
                return None
            coef[atom.name] = k
        elif ir.expr_vars(atom) & names.keys():  # not affine in the loops' variables
            return None
    if not any(coef.values()):
        return None
    rising = cond.op in ("<", "<=")  # the guard fails first where a - b is largest
    extreme = {}
    for name, k in coef.items():
        first, last = spans[name][0], spans[name][0] + spans[name][1] - 1
        extreme[name] = ir.const(last if (k > 0) == rising else first)
    lhs, rhs = simplify(ir.substitute(a, extreme)), simplify(ir.substitute(b, extreme))
    kept = []
    for left, right in _without_min_max(cond.op, lhs, rhs):
        decided = _decided(cond.op, left, right)
        if decided is False:
            return ir.IntImm(0, "bool")
        if decided is None:
            kept.append(ir.Cmp(cond.op, left, right))
    return ir.all_of(kept) or ir.IntImm(1, "bool")


def _without_min_max(op: str, lhs: ir.Expr, rhs: ir.Expr) -> list[tuple[ir.Expr, ir.Expr]]:
    """`lhs op rhs` as comparisons that all hold where it holds, a bound's min or max taken apart (`x <= min(a,
    b)`: `x <= a` and `x <= b`), so that each is linear for deciding and for the bounds proof."""
    small, large = ("min", "max") if op in ("<", "<=") else ("max", "min")
    if isinstance(rhs, ir.BinOp) and rhs.op == small:
        return _without_min_max(op, lhs, rhs.a) + _without_min_max(op, lhs, rhs.b)
    if isinstance(lhs, ir.BinOp) and lhs.op == large:
        return _without_min_max(op, lhs.a, rhs) + _without_min_max(op, lhs.b, rhs)
    return [(lhs, rhs)]


def _decided(op: str, lhs: ir.Expr, rhs: ir.Expr) -> bool | None:
    """Whether `lhs op rhs` holds (True), fails (False) or depends on what is not known here (None)."""
    terms, diff = _linear(ir.BinOp("-", lhs, rhs))
    if any(terms.values()):
        return None
    if is_symbolic(diff):  # the loops' variables cancel (`w*4 + 7 <= w*4 + 4`); a symbolic size remains
        return True if proven(diff, op, 0) else None
    return bool(_INT_OPS[op](diff, 0))


def _conjuncts(c: ir.Expr) -> list[ir.Expr]:
    if isinstance(c, ir.Logic) and c.op == "and":
        return _conjuncts(c.a) + _conjuncts(c.b)
    return [c]


def _at(cond: ir.Expr, env: dict, run: list[ir.For], parent: ir.For | None) -> ir.Expr | None:
    """The hoisted form of conjunct `cond` where `run[0]` is the loop it is hoisted to: hoistable there and not
    through the loop around it (`parent`), else None."""
    got = _hoisted(cond, env, run)
    if got is None or (got.__class__ is ir.IntImm and not got.value):  # fails at the run's extremes: lower down
        return None
    if parent is None:
        return got
    outer = _hoisted(cond, env, [parent] + run)
    if outer is None:
        return got
    if outer.__class__ is ir.IntImm and not outer.value:  # fails at the parent's extremes: versioned here, per
        return got if _holds_somewhere(got, parent) else None  # step of the parent, where some step passes it
    return None


def _holds_somewhere(cond: ir.Expr, loop: ir.For) -> bool:
    """Whether `cond` (affine in `loop`'s variable, so monotone in it) holds at its first or last iteration, or
    cannot be decided there."""
    first = cast(ir.IntImm, loop.lo).value
    for value in (first, first + cast(ir.IntImm, loop.extent).value - 1):
        at = simplify(ir.substitute(cond, {loop.var.name: ir.const(value)}))
        if not (isinstance(at, ir.IntImm) and not is_symbolic(at.value) and not at.value):
            return True
    return False


def _unclamped(e: ir.Expr, env: dict, run: list[ir.For], parent: ir.For | None, out: list | None) -> ir.Expr:
    """`e` with each integer min or max that clamps an index moving with a vectorized loop of `run` (`min(x - 26,
    1535)`: one operand depends on the loop's variable, the other does not) replaced by that operand where the
    clamp is hoisted to ``run[0]``: where ``x - 26 <= 1535`` holds at the run's extremes, checked at the run's
    entry. The hoisted conditions go into `out` (when given). Innermost first, so that `min(max(x - 26, 0), 1535)`
    yields two linear conditions.

    >>> from tensorlang import ir
    >>> x, t = ir.Var("x_r"), ir.Var("x_t")
    >>> loop = ir.For(x, ir.const(0), ir.const(8), ir.Seq(()), "vectorized")
    >>> at = ir.BinOp("+", x, ir.BinOp("*", t, ir.const(8)))
    >>> conds = []
    >>> print(_unclamped(ir.BinOp("max", at, ir.const(0)), {}, [loop], None, conds), conds[0])
    x_r + x_t*8 x_t*8 >= 0
    """
    lanes = {lp.var.name for lp in run if lp.kind == "vectorized"}
    if not lanes:
        return e

    def one(n: ir.Expr) -> ir.Expr:
        if not (isinstance(n, ir.BinOp) and n.op in ("min", "max") and n.dtype in _INT):
            return n
        moves = [bool(ir.expr_vars(ir.substitute(side, env)) & lanes) for side in (n.a, n.b)]
        if moves[0] == moves[1]:
            return n
        kept, bound = (n.a, n.b) if moves[0] else (n.b, n.a)
        op = "<=" if n.op == "min" else ">="
        found = []
        for left, right in _without_min_max(op, kept, bound):  # a clamp left inside: `max(x - 1, 0) <= 99`
            if _decided(op, ir.substitute(left, env), ir.substitute(right, env)) is True:  # `0 <= 99`
                continue
            h = _at(ir.Cmp(op, left, right), env, run, parent)
            if h is None:
                return n
            found.append(h)
        if out is not None:
            out.extend(h for h in found if h not in out)
        return kept

    return ir.map_expr(e, one)


def _guards(s: ir.Stmt, env: dict, run: list[ir.For], parent: ir.For | None, out: list) -> None:
    """Collect into `out` the hoisted conditions of the guards in `s` that are hoisted to ``run[0]``, and of the
    clamps that are (:func:`_unclamped`)."""
    if isinstance(s, ir.Store):
        for e in (*s.indices, s.value):
            _unclamped(e, env, run, parent, out)
    elif isinstance(s, ir.Seq):
        for x in s.stmts:
            _guards(x, env, run, parent, out)
    elif isinstance(s, ir.Let):
        _unclamped(s.value, env, run, parent, out)
        _guards(s.body, {**env, s.var.name: ir.substitute(s.value, env)}, run, parent, out)
    elif isinstance(s, ir.Allocate):
        _guards(s.body, env, run, parent, out)
    elif isinstance(s, ir.For):
        _guards(s.body, env, run + [s], parent, out)
    elif isinstance(s, ir.If):
        if s.orelse is None:
            for c in _conjuncts(s.cond):
                h = _at(c, env, run, parent)
                if h is not None and h not in out:
                    out.append(h)
        _guards(s.then, env, run, parent, out)
        if s.orelse is not None:
            _guards(s.orelse, env, run, parent, out)


def _map_children(s: ir.Stmt, env: dict, fn) -> ir.Stmt:
    """`s` (a Seq, Let, Allocate or If) with `fn(child, env)` applied to the statements inside it, the Let-bound
    variables added to `env` (expanded); any other statement as it is."""
    if isinstance(s, ir.Seq):
        return ir.Seq(tuple(fn(x, env) for x in s.stmts))
    if isinstance(s, ir.Let):
        return dataclasses.replace(s, body=fn(s.body, {**env, s.var.name: ir.substitute(s.value, env)}))
    if isinstance(s, ir.Allocate):
        return dataclasses.replace(s, body=fn(s.body, env))
    if isinstance(s, ir.If):
        return dataclasses.replace(s, then=fn(s.then, env), orelse=None if s.orelse is None else fn(s.orelse, env))
    return s


def _strip(s: ir.Stmt, env: dict, run: list[ir.For], parent: ir.For | None) -> ir.Stmt:
    """`s` without the conjuncts of its guards that are hoisted to ``run[0]`` (see `_guards`)."""
    if isinstance(s, ir.For):
        return dataclasses.replace(s, body=_strip(s.body, env, run + [s], parent))
    if isinstance(s, ir.Store):
        return dataclasses.replace(s, indices=tuple(_unclamped(e, env, run, parent, None) for e in s.indices),
                                   value=_unclamped(s.value, env, run, parent, None))
    if isinstance(s, ir.Let):  # the body sees the value as _guards saw it
        body = _strip(s.body, {**env, s.var.name: ir.substitute(s.value, env)}, run, parent)
        return dataclasses.replace(s, value=_unclamped(s.value, env, run, parent, None), body=body)
    out = _map_children(s, env, lambda x, e: _strip(x, e, run, parent))
    if isinstance(out, ir.If) and out.orelse is None:
        kept = ir.all_of(c for c in _conjuncts(out.cond) if _at(c, env, run, parent) is None)
        return out.then if kept is None else ir.If(kept, out.then)
    return out


def _rewrite(s: ir.Stmt, env: dict, parent: ir.For | None, skip: bool) -> ir.Stmt:
    """`s` with its loops versioned (`skip`: not `s` itself, which is the copy that keeps the guards)."""
    if not isinstance(s, ir.For):
        return _map_children(s, env, lambda x, e: _rewrite(x, e, parent, False))
    if not skip and _chainable(s):
        conds: list[ir.Expr] = []
        _guards(s.body, env, [s], parent, conds)
        if conds:
            clean = _rewrite(_strip(s.body, env, [s], parent), env, s, False)
            cond = ir.all_of(c for c in conds if c.__class__ is not ir.IntImm)  # not those that always hold
            if cond is None:
                return dataclasses.replace(s, body=clean)
            return ir.If(cond, dataclasses.replace(s, body=clean), _rewrite(s, env, parent, True))
    return dataclasses.replace(s, body=_rewrite(s.body, env, s, False))
