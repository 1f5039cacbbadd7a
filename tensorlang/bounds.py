"""Bounds check: prove every access inside its buffer, or guard it.

Interval arithmetic over the enclosing loops' ranges (and `Let` values, and `if v < e` guards) bounds each
index. A store that cannot be proven in range is wrapped in an `If`; a load gets `guard` flags and reads 0
outside. Loads the program allows to fall outside (`pad`, from `where`-widened ranges) are guarded the same
way without counting as a failure; any other guard is counted in `Func.guards`, and `strict=True` turns it
into an error (the tests lower that way, so a lowering bug cannot hide behind a guard).
"""
from __future__ import annotations

from dataclasses import replace

from .errors import BuildError
from .simplify import _linear, simplify
from .ir import (Allocate, BinOp, Call, Cast, Cmp, Expr, For, Func, If, IntImm, Let, Load, Logic, Neg, Not, Select,
                 Seq, Store, Var, all_of)

Interval = tuple[int, int] | None


def interval(e: Expr, env: dict[str, tuple[int, int]]) -> Interval:
    """Inclusive integer bounds of `e` given bounds of variables, or None when unknown.

    >>> from tensorlang.ir import Var, BinOp, const
    >>> interval(BinOp("+", BinOp("*", Var("mo"), const(32)), Var("mi")), {"mo": (0, 3), "mi": (0, 31)})
    (0, 127)
    """
    computed = _interval(e, env)
    fact = env.get(e) if env and not isinstance(e, (IntImm, Var)) else None
    if fact is None and env and _FACTS in env and isinstance(e, BinOp) and e.op in ("+", "-"):
        fact = _linear_fact(e, env)
    if fact is None:
        return computed
    if computed is None:
        return fact
    return (max(fact[0], computed[0]), min(fact[1], computed[1]))


_FACTS = "#facts"  # env key: the expressions that `if` conditions bound (besides plain variables)


def _linear_fact(e: Expr, env: dict) -> Interval:
    """Bounds of the sum `e` from a fact about a part of it: `e = key + rest` where a condition bounds `key`
    and the loop ranges bound `rest`, so that `if i_o*4 - 1 <= 7` proves `A[a + i_o*4 - 1]` for `a in 0:6`."""
    terms, const = _linear(e)
    out = None
    for key in env[_FACTS]:
        kterms, kconst = _linear(key)
        if not kterms or any(terms.get(a) != c for a, c in kterms.items()):
            continue
        lo = hi = const - kconst
        for atom, c in terms.items():
            if atom in kterms:
                continue
            r = interval(atom, env)
            if r is None:
                break
            lo, hi = lo + min(c * r[0], c * r[1]), hi + max(c * r[0], c * r[1])
        else:
            klo, khi = env[key]
            cand = (klo + lo, khi + hi)
            out = cand if out is None else (max(out[0], cand[0]), min(out[1], cand[1]))
    return out


def _interval(e: Expr, env) -> Interval:
    if isinstance(e, IntImm):
        return (e.value, e.value)
    if isinstance(e, Var):
        return env.get(e.name)
    if isinstance(e, Cast) and e.dtype in ("i64", "i32"):
        return interval(e.a, env)
    if isinstance(e, Neg):
        a = interval(e.a, env)
        return None if a is None else (-a[1], -a[0])
    if isinstance(e, Select):
        t, f = interval(e.t, env), interval(e.f, env)
        return None if t is None or f is None else (min(t[0], f[0]), max(t[1], f[1]))
    if not isinstance(e, BinOp) or e.dtype not in ("i64", "i32"):
        return None
    a, b = interval(e.a, env), interval(e.b, env)
    if a is None or b is None:
        if e.op == "%" and b is not None and b[0] > 0:
            return (0, b[1] - 1)
        return None
    if e.op == "+":
        return (a[0] + b[0], a[1] + b[1])
    if e.op == "-":
        return (a[0] - b[1], a[1] - b[0])
    if e.op == "*":
        ps = [x * y for x in a for y in b]
        return (min(ps), max(ps))
    if e.op == "min":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if e.op == "max":
        return (max(a[0], b[0]), max(a[1], b[1]))
    if e.op == "//" and b[0] > 0:
        return (min(a[0] // b[0], a[0] // b[1]), max(a[1] // b[0], a[1] // b[1]))
    if e.op == "%" and b[0] > 0:
        if a[0] >= 0 and a[1] < b[0]:
            return a
        return (0, b[1] - 1)
    return None


def _refine(cond: Expr, env: dict) -> dict:
    """Inside `if cond`: remember `a < b` (and <=, >, >=, `and`) as a fact bounding expression `a`.

    Facts are keyed by the simplified expression, so a guard `mo*32 + mi < N` proves `X[mo*32 + mi]`.
    """
    if isinstance(cond, Logic) and cond.op == "and":
        return _refine(cond.b, _refine(cond.a, env))
    if not (isinstance(cond, Cmp) and cond.op in ("<", "<=", ">", ">=")):
        return env
    out = dict(env)
    for a, b, upper in ((cond.a, cond.b, cond.op in ("<", "<=")), (cond.b, cond.a, cond.op in (">", ">="))):
        strict = cond.op in ("<", ">")
        other = interval(b, env)
        if other is None:
            continue
        key = simplify(a)
        lo, hi = interval(key, env) or (-(1 << 62), 1 << 62)
        if upper:
            hi = min(hi, other[1] - (1 if strict else 0))
        else:
            lo = max(lo, other[0] + (1 if strict else 0))
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
        for d, ix in enumerate(indices):
            r = interval(simplify(ix), env)
            out.append(r is None or r[0] < 0 or r[1] > buf.shape[d] - 1)
        return tuple(out)

    def fail(self, what: str, buf, indices) -> None:
        self.guards += 1
        if self.strict:
            idx = ", ".join(str(i) for i in indices)
            raise BuildError(f"internal: cannot prove {what} {buf.name}[{idx}] inside {buf.name}{list(buf.shape)}")

    def expr(self, e: Expr, env) -> Expr:
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
            return replace(s, value=self.expr(s.value, env), body=self.stmt(s.body, inner))
        if isinstance(s, If):
            inner = _refine(s.cond, env)
            if any(isinstance(r, tuple) and r[0] > r[1] for r in inner.values()):
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
            return If(all_of(Logic("and", Cmp(">=", ix, IntImm(0, ix.dtype)),
                                   Cmp("<", ix, IntImm(s.buffer.shape[d], ix.dtype)))
                             for d, (ix, bad) in enumerate(zip(idx, g)) if bad), store)
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
