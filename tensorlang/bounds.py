"""Bounds check: prove every access inside its buffer, or guard it.

Interval arithmetic over the enclosing loops' ranges (and `Let` values, and `if v < e` guards) bounds each
index. A guard's fact holds on an expression even when its bound moves with an outer loop
(`if x < min(wb*48 + 49, 1025)` bounds `x - wb*48`), with Let-bound variables expanded and the fact scaled
to the multiple an index uses. A store that cannot be proven in range is wrapped in an `If`; a load gets `guard`
flags and reads 0 outside. Loads the program allows to fall outside (`pad`, from `where`-widened ranges) are
guarded the same way without counting as a failure; any other guard is counted in `Func.guards`, and
`strict=True` turns it into an error (the tests lower that way, so a lowering bug cannot hide behind a guard).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from .dtypes import DTYPES
from .errors import BuildError
from .ir import (
    Allocate,
    BinOp,
    Call,
    Cast,
    Cmp,
    Expr,
    For,
    Func,
    If,
    IndexCheck,
    IntImm,
    Let,
    Load,
    Logic,
    Neg,
    Not,
    Select,
    Seq,
    Store,
    Var,
    all_of,
    substitute,
)
from .simplify import _linear, simplify
from .symbolic import Sym, proven, smax, smin

Interval = tuple[int, int] | None
_INT_RANGES = {n: d.int_range for n, d in DTYPES.items() if not d.is_float}


def interval(e: Expr, env: dict) -> Interval:
    """Inclusive integer bounds of `e` given bounds of variables, or None when unknown.

    >>> from tensorlang.ir import Var, BinOp, const
    >>> interval(BinOp("+", BinOp("*", Var("mo"), const(32)), Var("mi")), {"mo": (0, 3), "mi": (0, 31)})
    (0, 127)
    """
    c = e.__class__
    if c is Var:  # the leaves, most of the calls: no facts are kept about them
        return env.get(cast(Var, e).name)
    if c is IntImm:
        return (cast(IntImm, e).value, cast(IntImm, e).value)
    computed = _interval(e, env)
    fact = env.get(e) if env and not isinstance(e, (IntImm, Var)) else None
    if fact is None and env and _FACTS in env and isinstance(e, BinOp) and e.op in ("+", "-"):
        fact = _linear_fact(e, env)
    if fact is None:
        return computed
    if computed is None:
        return fact
    return (smax(fact[0], computed[0]), smin(fact[1], computed[1]))


_FACTS = "#facts"  # env key: the expressions that `if` conditions bound (besides plain variables)
DEFS = "#defs"  # env key: the Let-bound variables around, by name, each expanded to the loop variables


def _linear_fact(e: Expr, env: dict) -> Interval:
    """Bounds of the sum `e` from facts about parts of it: `e = k1*key1 + k2*key2 + ... + rest` where conditions
    bound the keys and the loop ranges bound `rest`, so that `if i_o*4 - 1 <= 7` proves `A[a + i_o*4 - 1]` for
    `a in 0:6`, and `if w <= 111` (w = w_r + w_t*32) proves `P[s + w_r*2 + w_t*64]` for `s in 0:7` and P[229]."""
    terms, const = _linear(e)
    facts = [(key, _linear(key)) for key in env[_FACTS]]
    out = None
    for first in range(len(facts)):  # each fact first, then any others that fit what is left
        left, lo, hi, used = dict(terms), const, const, False
        for key, (kterms, kconst) in facts[first:] + facts[:first]:
            k = _multiple(left, kterms)
            if k is None:
                continue
            for a in kterms:
                del left[a]
            klo, khi = env[key] if k > 0 else env[key][::-1]  # an empty fact (klo > khi): the code never runs
            lo, hi = lo + k * klo - k * kconst, hi + k * khi - k * kconst
            used = True
        if not used:
            continue
        for atom, c in left.items():
            r = interval(atom, env)
            if r is None:
                break
            lo, hi = lo + smin(c * r[0], c * r[1]), hi + smax(c * r[0], c * r[1])
        else:
            out = (lo, hi) if out is None else (smax(out[0], lo), smin(out[1], hi))
    return out


def _multiple(terms: dict, kterms: dict) -> int | None:
    """k where `terms` holds k times every term of `kterms` (k a nonzero integer), else None."""
    kterms = {a: c for a, c in kterms.items() if c}
    if not kterms or any(a not in terms for a in kterms):
        return None
    a0 = next(iter(kterms))
    k, rem = divmod(terms[a0], kterms[a0])
    if rem or k == 0 or any(terms[a] != k * c for a, c in kterms.items()):
        return None
    return k


def _interval(e: Expr, env) -> Interval:
    if isinstance(e, IntImm):
        return (e.value, e.value)
    if isinstance(e, Var):
        return env.get(e.name)
    if isinstance(e, IndexCheck):  # 0 wherever the value is out of range
        return (0, e.extent - 1)
    if isinstance(e, Load):  # an integer read from memory: any value of its type
        return _INT_RANGES.get(e.dtype)
    if isinstance(e, Cast) and e.dtype in ("i64", "i32"):
        a = interval(e.a, env) if e.a.dtype in _INT_RANGES else None
        lo, hi = _INT_RANGES[e.dtype]
        return a if a is not None and lo <= a[0] and a[1] <= hi else None  # a narrowing cast may wrap
    if isinstance(e, Neg):
        a = interval(e.a, env)
        return None if a is None else (-a[1], -a[0])
    if isinstance(e, Call) and e.fn == "abs" and e.dtype in ("i64", "i32"):  # a boundary index's mirror
        a = interval(e.args[0], env)
        if a is None or a[0] == _INT_RANGES[e.dtype][0]:  # abs of the smallest integer wraps
            return None
        return (0 if a[0] <= 0 <= a[1] else smin(abs(a[0]), abs(a[1]))), smax(abs(a[0]), abs(a[1]))
    if isinstance(e, Select):  # the true side where the condition holds (`select(x < N, x, 0)` is below N)
        t, f = interval(e.t, assume(e.cond, env)), interval(e.f, env)
        return None if t is None or f is None else (smin(t[0], f[0]), smax(t[1], f[1]))
    if not isinstance(e, BinOp) or e.dtype not in ("i64", "i32"):
        return None
    r = _binop_interval(e.op, interval(e.a, env), interval(e.b, env))
    if e.op in ("min", "max") and r is not None:  # a + b constant (a mirror's `max(x, -1 - x)`): a bound at c/2
        terms, c = _linear(simplify(BinOp("+", e.a, e.b)))
        if not any(terms.values()):
            r = (smax(r[0], -(-c // 2)), r[1]) if e.op == "max" else (r[0], smin(r[1], c // 2))
    lo, hi = _INT_RANGES[e.dtype]
    return r if r is None or (lo <= r[0] and r[1] <= hi) else (lo, hi)  # past its type, the value wraps


def _binop_interval(op: str, a: Interval, b: Interval) -> Interval:
    """Bounds of `a op b` for integers, computed exactly (without wrapping)."""
    if a is None or b is None:
        if op == "%" and b is not None and proven(b[0], ">", 0):
            return (0, b[1] - 1)
        return None
    if op == "+":
        return (a[0] + b[0], a[1] + b[1])
    if op == "-":
        return (a[0] - b[1], a[1] - b[0])
    if op == "*":
        for x, y in ((a, b), (b, a)):  # a constant factor >= 0 keeps the order (and a symbolic bound symbolic)
            if isinstance(y[0], int) and y[0] == y[1] and y[0] >= 0 and not (isinstance(x[0], int)
                                                                           and isinstance(x[1], int)):
                return (x[0] * y[0], x[1] * y[0])
        ps = [x * y for x in a for y in b]
        return (smin(*ps), smax(*ps))
    if op == "min":
        return (smin(a[0], b[0]), smin(a[1], b[1]))
    if op == "max":
        return (smax(a[0], b[0]), smax(a[1], b[1]))
    if op == "//" and proven(b[0], ">", 0):
        if any(isinstance(x, Sym) for x in b):  # a divisor known at run time: 0..a for a >= 0
            return (0, a[1]) if proven(a[0], ">=", 0) else None
        return (smin(a[0] // b[0], a[0] // b[1]), smax(a[1] // b[0], a[1] // b[1]))
    if op == "%" and proven(b[0], ">", 0):
        if proven(a[0], ">=", 0) and proven(a[1], "<", b[0]):
            return a
        return (0, b[1] - 1)
    return None


def assume(cond: Expr, env: dict) -> dict:
    """The variable bounds `env` inside `if cond` (a new dict; facts the condition proves added, also with the
    Let-bound variables in it expanded, as indices that were relocated to a local buffer have them).

    >>> from tensorlang.ir import Var, BinOp, Cmp, const
    >>> x, wb = Var("x"), Var("wb")
    >>> env = assume(Cmp("<=", x, BinOp("+", BinOp("*", wb, const(64)), const(65))), {"x": (0, 1100), "wb": (0, 15)})
    >>> interval(BinOp("-", x, BinOp("*", wb, const(64))), env)[1]
    65
    """
    out = _refine(cond, env)
    defs = env.get(DEFS)
    if defs:
        expanded = substitute(cond, defs)
        if expanded != cond:
            out = _refine(expanded, out)
    return out


def _refine(cond: Expr, env: dict) -> dict:
    """Inside `if cond`: remember `a < b` (and <=, >, >=, `and`) as a fact bounding expression `a`.

    Facts are keyed by the simplified expression, so a guard `mo*32 + mi < N` proves `X[mo*32 + mi]`.
    """
    if isinstance(cond, Logic) and cond.op == "and":
        return _refine(cond.b, _refine(cond.a, env))
    if not (isinstance(cond, Cmp) and cond.op in ("<", "<=", ">", ">=")):
        return env
    upper = cond.op in ("<", "<=")  # a < min(b, c) is a < b and a < c; a > max(b, c) likewise
    for side in ("b", "a"):
        x = getattr(cond, side)
        if isinstance(x, BinOp) and x.op == ("min" if upper == (side == "b") else "max"):
            first: dict[str, Any] = {side: x.a}
            second: dict[str, Any] = {side: x.b}
            return _refine(replace(cond, **second), _refine(replace(cond, **first), env))
    out = dict(env)
    for a, b, upper in ((cond.a, cond.b, cond.op in ("<", "<=")), (cond.b, cond.a, cond.op in (">", ">="))):
        strict = cond.op in ("<", ">")
        other = interval(b, env)
        if other is None:
            continue
        key = simplify(a)
        lo, hi = interval(key, env) or (-(1 << 62), 1 << 62)
        if upper:
            hi = smin(hi, other[1] - (1 if strict else 0))
        else:
            lo = smax(lo, other[0] + (1 if strict else 0))
        if isinstance(key, Var):
            out[key.name] = (lo, hi)
        else:
            out[key] = (lo, hi)
            out[_FACTS] = out.get(_FACTS, frozenset()) | {key}
    return _refine_difference(cond, out)


def _refine_difference(cond: Cmp, env: dict) -> dict:
    """Also remember `a - b` (its variable terms, the constant moved across) where both sides vary, so that
    `if x <= w_b*64 + 65` bounds `x - w_b*64` by 65, which the interval of the right side alone cannot."""
    a, b = interval(cond.a, env), interval(cond.b, env)
    # not integers we can bound, or nothing to add (a constant right side: `_refine` bounded the left one); a
    # right side that varies with a loop of one iteration still adds (`x <= w*2 + 4` for w in 0:1 bounds x - w*2)
    if a is None or b is None or not _linear(simplify(cond.b))[0]:
        return env
    terms, const = _linear(simplify(BinOp("-", cond.a, cond.b)))
    if not terms:
        return env
    key = simplify(BinOp("-", BinOp("-", cond.a, cond.b), IntImm(const)))
    strict = 1 if cond.op in ("<", ">") else 0
    lo, hi = interval(key, env) or (-(1 << 62), 1 << 62)
    if cond.op in ("<", "<="):
        hi = smin(hi, -const - strict)
    else:
        lo = smax(lo, -const + strict)
    out = dict(env)
    if isinstance(key, Var):
        out[key.name] = (lo, hi)
    else:
        out[key] = (lo, hi)
        out[_FACTS] = out.get(_FACTS, frozenset()) | {key}
    return out


class _Checker:
    def __init__(self, strict: bool):
        self.strict = strict
        self.guards = 0

    def unproven(self, buf, indices, env) -> tuple[bool, ...]:
        out = []
        defs = env.get(DEFS)
        for d, ix in enumerate(indices):
            bad = self.outside(interval(simplify(ix), env), buf.shape[d])
            if bad and defs:  # the Let-bound variables expanded to the loops', which a condition may bound
                bad = self.outside(interval(simplify(substitute(ix, defs)), env), buf.shape[d])
            out.append(bad)
        return tuple(out)

    @staticmethod
    def outside(r, extent) -> bool:
        """Whether the interval `r` of an index may leave 0..extent - 1 (None: unknown, so it may)."""
        return r is None or not proven(r[0], ">=", 0) or not proven(r[1], "<=", extent - 1)

    def fail(self, what: str, buf, indices) -> None:
        self.guards += 1
        if self.strict:
            idx = ", ".join(str(i) for i in indices)
            raise BuildError(f"internal: cannot prove {what} {buf.name}[{idx}] inside {buf.name}{list(buf.shape)}")

    def expr(self, e: Expr, env) -> Expr:
        if isinstance(e, IndexCheck):  # no check where the program keeps the value in range (clamp, select)
            a = self.expr(e.a, env)
            r = interval(simplify(a), env)
            if r is not None and proven(r[0], ">=", 0) and proven(r[1], "<", e.extent):
                return a
            return replace(e, a=a, when=None if e.when is None else self.expr(e.when, env))
        if isinstance(e, Load):
            idx = tuple(self.expr(i, env) for i in e.indices)
            g = self.unproven(e.buffer, idx, env)
            if any(g) and not e.pad:
                self.fail("the read", e.buffer, idx)
            return replace(e, indices=idx, guard=g if any(g) else ())
        if isinstance(e, (BinOp, Cmp, Logic)):
            return replace(e, a=self.expr(e.a, env), b=self.expr(e.b, env))
        if isinstance(e, (Neg, Not)):
            return replace(e, a=self.expr(e.a, env))
        if isinstance(e, Cast):
            return Cast(e.dtype, self.expr(e.a, env))
        if isinstance(e, Select):
            return Select(self.expr(e.cond, env), self.expr(e.t, env), self.expr(e.f, env))
        if isinstance(e, Call):
            return replace(e, args=tuple(self.expr(a, env) for a in e.args))
        return e

    def stmt(self, s, env):
        if isinstance(s, Seq):
            return Seq(tuple(self.stmt(x, env) for x in s.stmts))
        if isinstance(s, For):
            lo, ext = interval(s.lo, env), interval(s.extent, env)
            inner = dict(env)
            if lo is None or ext is None:
                inner.pop(s.var.name, None)
            else:
                inner[s.var.name] = (lo[0], lo[1] + ext[1] - 1)
            return replace(s, body=self.stmt(s.body, inner))
        if isinstance(s, Let):
            inner = dict(env)
            r = interval(s.value, env)
            if r is None:
                inner.pop(s.var.name, None)
            else:
                inner[s.var.name] = r
            defs = env.get(DEFS, {})
            inner[DEFS] = {**defs, s.var.name: substitute(s.value, defs)}
            return replace(s, value=self.expr(s.value, env), body=self.stmt(s.body, inner))
        if isinstance(s, If):
            inner = assume(s.cond, env)
            if any(isinstance(r, tuple) and proven(r[0], ">", r[1]) for r in inner.values()):
                # the condition can never hold (a compute_at region that misses its producer's domain, say):
                # nothing inside ever runs, so it is dropped rather than proven
                then = Seq(())
            else:
                then = self.stmt(s.then, inner)
            orelse = None if s.orelse is None else self.stmt(s.orelse, env)
            return If(self.expr(s.cond, env), then, orelse)
        if isinstance(s, Allocate):
            return replace(s, body=self.stmt(s.body, env))
        if isinstance(s, Store):
            idx = tuple(self.expr(i, env) for i in s.indices)
            store = Store(s.buffer, idx, self.expr(s.value, env))
            g = self.unproven(s.buffer, idx, env)
            if not any(g):
                return store
            self.fail("the write", s.buffer, idx)
            guard = all_of(Logic("and", Cmp(">=", ix, IntImm(0, ix.dtype)),
                                 Cmp("<", ix, IntImm(s.buffer.shape[d], ix.dtype)))
                           for d, (ix, bad) in enumerate(zip(idx, g)) if bad)
            assert guard is not None  # some index is unproven
            return If(guard, store)
        raise TypeError(f"not an IR statement: {s!r}")


def check_bounds(func: Func, strict: bool = False) -> Func:
    """Return `func` with every access proven in range or guarded; `Func.guards` counts the guards added.

    >>> import tensorlang as tl
    >>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]"), N=8)
    >>> check_bounds(s.lowered(), strict=True).guards
    0
    """
    c = _Checker(strict)
    body = c.stmt(func.body, {})
    return replace(func, body=body, guards=c.guards)
