"""Simplify index expressions: fold constants and put affine integer expressions in a canonical order.

>>> from tensorlang.ir import Var, BinOp, const
>>> i, j = Var("i"), Var("j")
>>> str(simplify(BinOp("+", BinOp("*", BinOp("+", i, const(1)), const(2)), BinOp("-", j, i))))
'i + j + 2'
"""
from __future__ import annotations

from collections.abc import Callable
from typing import cast

from .ir import BinOp, Cast, Cmp, Expr, IndexCheck, IntImm, Logic, Neg, Not, Select, Var
from .symbolic import Sym, is_symbolic, proven, smax, smin

_INT = ("i64", "i32")


_MEMO_LIMIT = 1 << 17  # entries each memo keeps before it starts afresh
_simplified: dict = {}
_linears: dict = {}


def simplify(e: Expr) -> Expr:
    """A simpler expression equal to `e`: integer +, - and * in a canonical order with constants folded; //, %,
    min, max, comparisons, selects and integer casts of constants computed; `x // 1` and `x % 1` reduced. Float
    arithmetic is left alone.

    >>> str(simplify(BinOp("-", BinOp("*", IntImm(3), Var("i")), BinOp("+", Var("i"), IntImm(2)))))
    'i*2 - 2'
    >>> str(simplify(BinOp("//", BinOp("+", Var("j"), IntImm(0)), IntImm(1))))
    'j'
    """
    if e.__class__ is Var or e.__class__ is IntImm:
        return e
    # expressions are immutable and simplifying is pure: a lowering asks for the same index expressions again
    # and again (the bounds proof of every access, every guard), so each is simplified once
    got = _simplified.get(e)
    if got is None:
        if len(_simplified) > _MEMO_LIMIT:
            _simplified.clear()
        got = _simplified[e] = _simplify(e)
    return got


def _simplify(e: Expr) -> Expr:
    if isinstance(e, BinOp) and e.dtype in _INT and e.op in ("+", "-", "*"):
        return _rebuild(*_linear(e), e.dtype)
    if isinstance(e, Neg) and e.dtype in _INT:
        return _rebuild(*_linear(e), e.dtype)
    if isinstance(e, BinOp):
        a, b = simplify(e.a), simplify(e.b)
        if isinstance(a, IntImm) and isinstance(b, IntImm) and e.op in ("//", "%", "min", "max") and \
                (e.op in ("min", "max") or b.value != 0):
            fold: dict[str, Callable[[int, int], int]] = {"//": lambda x, y: x // y, "%": lambda x, y: x % y,
                                                          "min": min, "max": max}
            v = fold[e.op](a.value, b.value)
            return IntImm(v, e.dtype)
        if e.op in ("//", "%") and isinstance(b, IntImm) and b.value == 1:
            return a if e.op == "//" else IntImm(0, e.dtype)
        if e.op in ("//", "%") and isinstance(b, IntImm) and not is_symbolic(b.value) and b.value > 1 \
                and e.dtype == "i64":
            whole = _divide_out(e.op, a, b.value)
            if whole is not None:
                return whole
        return BinOp(e.op, a, b)
    if isinstance(e, Cmp):
        a, b = simplify(e.a), simplify(e.b)
        if isinstance(a, IntImm) and isinstance(b, IntImm):
            return IntImm(int(_cmp(e.op, a.value, b.value)), "bool")
        return Cmp(e.op, a, b)
    if isinstance(e, Logic):
        return Logic(e.op, simplify(e.a), simplify(e.b))
    if isinstance(e, Not):
        return Not(simplify(e.a))
    if isinstance(e, Select):
        c = simplify(e.cond)
        if isinstance(c, IntImm):
            return simplify(e.t if c.value else e.f)
        return Select(c, simplify(e.t), simplify(e.f))
    if isinstance(e, Cast):
        a = simplify(e.a)
        if isinstance(a, IntImm) and e.dtype in _INT:
            return IntImm(a.value, e.dtype)
        return Cast(e.dtype, a)
    if isinstance(e, IndexCheck):
        return IndexCheck(simplify(e.a), e.extent, e.site, None if e.when is None else simplify(e.when))
    return e


def _divide_out(op: str, a: Expr, d: int) -> Expr | None:
    """``a // d`` or ``a % d`` with the terms of `a` that are multiples of `d` taken out of the division:
    ``(o*64 + i) // 2`` is ``o*32 + i // 2`` and ``(o*64 + i) % 2`` is ``i % 2`` (floor division; for i64 index
    arithmetic only, where nothing wraps). None when no term is a multiple of `d`.

    >>> from tensorlang.ir import Var, const
    >>> str(simplify(BinOp("//", BinOp("+", BinOp("*", Var("o"), const(64)), Var("i")), const(2))))
    'o*32 + i//2'
    >>> str(simplify(BinOp("%", BinOp("+", BinOp("*", Var("o"), const(64)), Var("i")), const(2))))
    'i%2'
    """
    terms, c = _linear(a)
    if any(is_symbolic(v) for v in terms.values()) or is_symbolic(c):
        return None
    whole = {k: v // d for k, v in terms.items() if v % d == 0}
    rest = {k: v for k, v in terms.items() if v % d != 0}
    if not whole and c // d == 0:
        return None
    r = c - (c // d) * d
    if not rest:  # 0 <= r < d
        return IntImm(r, a.dtype) if op == "%" else _rebuild(whole, c // d, a.dtype)
    left = BinOp(op, _rebuild(rest, r, a.dtype), IntImm(d, a.dtype))
    if op == "%":
        return left
    return simplify(BinOp("+", _rebuild(whole, c // d, a.dtype), left))


def _cmp(op: str, x: int, y: int) -> bool:
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y, "==": x == y, "!=": x != y}[op]


def _linear(e: Expr) -> tuple[dict, int]:
    """e as (atom -> coefficient, constant); atoms are variables or simplified non-affine parts (a dict of the
    caller's own: memoized like :func:`simplify`)."""
    if e.__class__ is IntImm:
        return {}, e.value
    if e.__class__ is Var:
        return {e: 1}, 0
    got = _linears.get(e)
    if got is None:
        if len(_linears) > _MEMO_LIMIT:
            _linears.clear()
        got = _linears[e] = _linear_of(e)
    return dict(got[0]), got[1]


def _linear_of(e: Expr) -> tuple[dict, int]:
    if isinstance(e, IntImm):
        return {}, e.value
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        ta, ca = _linear(e.a)
        tb, cb = _linear(e.b)
        sign = 1 if e.op == "+" else -1
        out = dict(ta)
        for k, v in tb.items():
            out[k] = out.get(k, 0) + sign * v
        return _fold_divmod(out, ca + sign * cb)
    if isinstance(e, Neg):
        t, c = _linear(e.a)
        return {k: -v for k, v in t.items()}, -c
    if isinstance(e, BinOp) and e.op == "*":
        ta, ca = _linear(e.a)
        tb, cb = _linear(e.b)
        if not ta:
            return {k: ca * v for k, v in tb.items()}, ca * cb
        if not tb:
            return {k: cb * v for k, v in ta.items()}, ca * cb
        return {BinOp("*", _rebuild(ta, ca, e.dtype), _rebuild(tb, cb, e.dtype)): 1}, 0
    s = simplify(e)
    if isinstance(s, IntImm):
        return {}, s.value
    return {s: 1}, 0


def _fold_divmod(terms: dict, c: int) -> tuple[dict, int]:
    """Replace ``a*(x % d) + a*d*(x // d)`` by ``a*x`` (true for floor and for truncating division alike): a split
    loop fused back, say, gives ``f%2 + f//2*2``, which is ``f``.

    >>> from tensorlang.ir import Var, BinOp, const
    >>> f = Var("f")
    >>> str(simplify(BinOp("+", BinOp("%", f, const(4)), BinOp("*", BinOp("//", f, const(4)), const(4)))))
    'f'
    """
    for atom in [k for k in terms if isinstance(k, BinOp) and k.op == "%"]:
        d, a = atom.b, terms.get(atom, 0)
        if not (isinstance(d, IntImm) and d.value > 0 and a):
            continue
        div = BinOp("//", atom.a, d)
        if terms.get(div) != a * d.value:
            continue
        del terms[atom], terms[div]
        tx, cx = _linear(atom.a)
        for k, v in tx.items():
            terms[k] = terms.get(k, 0) + a * v
        c += a * cx
    return terms, c


def _order(atom: Expr):
    return (0, atom.name) if isinstance(atom, Var) else (1, str(atom))


def _rebuild(terms: dict, c: int, dtype: str) -> Expr:
    items = sorted(((k, v) for k, v in terms.items() if v != 0), key=lambda kv: _order(kv[0]))
    out: Expr | None = None
    for atom, coef in items:
        if isinstance(coef, Sym):  # a size known at run time: its sign is not asked
            term = BinOp("*", atom, IntImm(cast(int, coef), dtype))  # a symbolic IntImm (ir.IntImm)
            out = term if out is None else BinOp("+", out, term)
            continue
        term = atom if abs(coef) == 1 else BinOp("*", atom, IntImm(abs(coef), dtype))
        if out is None:
            out = term if coef > 0 else Neg(term)
        else:
            out = BinOp("+" if coef > 0 else "-", out, term)
    if out is None:
        return IntImm(c, dtype)
    if isinstance(c, Sym):
        return BinOp("+", out, IntImm(c, dtype))
    if c > 0:
        return BinOp("+", out, IntImm(c, dtype))
    if c < 0:
        return BinOp("-", out, IntImm(-c, dtype))
    return out


def simplify_divmod(e: Expr, ranges: dict[str, tuple[int, int]]) -> Expr:
    """Simplify `(q*b + r) // b` to `q` and `(q*b + r) % b` to `r` when `r` provably lies in [0, b).

    `ranges` gives inclusive bounds of loop variables. This keeps packed-layout indices affine, so that
    vector code sees contiguous accesses.

    >>> from tensorlang.ir import Var, BinOp, const
    >>> e = BinOp("//", BinOp("+", BinOp("*", Var("o"), const(32)), Var("i")), const(32))
    >>> str(simplify_divmod(e, {"o": (0, 7), "i": (0, 31)}))
    'o'
    """
    e = simplify(e)
    if isinstance(e, BinOp):
        a, b = simplify_divmod(e.a, ranges), simplify_divmod(e.b, ranges)
        if e.op in ("//", "%") and isinstance(b, IntImm) and b.value > 0 and a.dtype in _INT:
            terms, c = _linear(a)
            d = b.value
            if all(isinstance(k, Var) and k.name in ranges for k in terms):
                quot = {k: v // d for k, v in terms.items()}
                rem = {k: v % d for k, v in terms.items()}
                lo = c % d + sum(smin(v * ranges[k.name][0], v * ranges[k.name][1]) for k, v in rem.items())
                hi = c % d + sum(smax(v * ranges[k.name][0], v * ranges[k.name][1]) for k, v in rem.items())
                if proven(lo, ">=", 0) and proven(hi, "<", d):
                    if e.op == "//":
                        return _rebuild(quot, c // d, a.dtype)
                    return _rebuild(rem, c % d, a.dtype)
        return simplify(BinOp(e.op, a, b))
    return e
