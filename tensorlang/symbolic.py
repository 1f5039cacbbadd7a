"""Symbolic sizes: `tl.Dim(lo, hi, like=...)`, a size known only to lie in [lo, hi], and `Sym`, the integer
expressions over such sizes that binding, scheduling and lowering compute with in place of ints.

A `Sym` is an affine form over atoms (a size; `a // c` for a positive int c; a product of two symbolic values).
Arithmetic with ints and Syms gives Syms (or a plain int when the sizes cancel); a comparison is answered only
where it holds, or fails, for every value of the sizes in their ranges, and raises `SymbolicRefusal` otherwise,
as does any use that needs a concrete int (`int()`, `range()`). So code written for int sizes either computes
the same thing for every size in range, or refuses.

>>> n = Sym.size("N", 16, 64)
>>> q = (n + 7) // 8
>>> str(q * 8 - n), 8 * q >= n, (n - 1) < n
('(N + 7)//8*8 - N', True, True)
>>> n < 32  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
tensorlang.symbolic.SymbolicRefusal: size N is symbolic here, ... `N < 32` ...: it holds for some N in 16..64 and ...
"""
from __future__ import annotations

import itertools
import math
import operator
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeGuard, cast

from .errors import BuildError


class SymbolicRefusal(BuildError):
    """A step needed a concrete value of a symbolic size (a decision that differs across the size's range)."""


@dataclass(frozen=True)
class Dim:
    """A symbolic size for `tl.build` / `tl.schedule`: any integer in [lo, hi], with `like` (default `lo`) the
    representative value the schedule is chosen (and tuned) for. For `tl.build`, `like` may be a tuple of
    ascending values: the kernel then holds one version of the code a value, each with the schedule chosen for
    it, and each call runs the version whose sizes are nearest its own (Halide's `specialize`).

    >>> import tensorlang as tl
    >>> tl.Dim(64, 512, like=128)
    Dim(lo=64, hi=512, like=128)
    >>> tl.Dim(64, 512, like=(64, 256)).likes
    (64, 256)
    """

    lo: int
    hi: int
    like: int | tuple[int, ...] | None = None

    def __post_init__(self):
        for what in ("lo", "hi"):
            v = getattr(self, what)
            if isinstance(v, bool) or not isinstance(v, int):
                raise BuildError(f"Dim: {what}={v!r} must be an integer")
        if not 1 <= self.lo <= self.hi:
            raise BuildError(f"Dim({self.lo}, {self.hi}): need 1 <= lo <= hi")
        if self.like is None:
            object.__setattr__(self, "like", self.lo)
        likes: tuple = self.like if isinstance(self.like, tuple) else (self.like,)
        for v in likes:
            if isinstance(v, bool) or not isinstance(v, int):
                raise BuildError(f"Dim: like={self.like!r} must be an integer or a tuple of integers")
            if not self.lo <= v <= self.hi:
                raise BuildError(f"Dim({self.lo}, {self.hi}, like={self.like}): like must lie in {self.lo}..{self.hi}")
        if not likes or any(a >= b for a, b in itertools.pairwise(likes)):
            raise BuildError(f"Dim({self.lo}, {self.hi}, like={self.like}): the representative sizes must be given in "
                             "ascending order, each once")
        if len(likes) == 1:
            object.__setattr__(self, "like", likes[0])

    @property
    def likes(self) -> tuple[int, ...]:
        """The representative values, one a version of the code (one unless `like` is a tuple)."""
        return self.like if isinstance(self.like, tuple) else (cast(int, self.like),)


# ---- atoms ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Size:
    name: str
    lo: int
    hi: int
    like: int = 0  # the representative value (for heuristics only, see `representative`)

    def key(self):  # the range too: two kernels for N in different ranges are different kernels
        return ("s", self.name, self.lo, self.hi, self.like)


@dataclass(frozen=True)
class _Div:
    num: Sym
    c: int

    def key(self):
        return ("d", self.num.key(), self.c)


@dataclass(frozen=True)
class _Mul:
    a: Sym
    b: Sym

    def key(self):
        return ("m", self.a.key(), self.b.key())


@dataclass(frozen=True)
class _Ext:
    op: str  # "min" or "max"
    a: Sym
    b: Sym

    def key(self):
        return ("x", self.op, self.a.key(), self.b.key())


def _names(x: Sym) -> str:
    names = sorted(x.sizes())
    return f"size {names[0]} is" if len(names) == 1 else f"sizes {', '.join(names)} are"


def _ranges(x: Sym) -> str:
    return ", ".join(f"{n} in {a}..{b}" for n, (a, b) in sorted(x.sizes().items()))


def smin(a, *rest):
    """`min(a, b)` for ints and Syms: the smaller where it is the same one for every size in range, else a
    symbolic minimum.

    >>> n = Sym.size("N", 1, 9)
    >>> smin(n - 5, 0), smin(n, n + 1), smax(0, n - 1)
    (min(N - 5, 0), N, N - 1)
    """
    for b in rest:
        a = _extreme("min", a, b)
    return a


def smax(a, *rest):
    """`max(a, b, ...)` for ints and Syms (see :func:`smin`).

    >>> smax(Sym.size("N", 1, 9), 10, 3)
    10
    """
    for b in rest:
        a = _extreme("max", a, b)
    return a


def _extreme(op: str, a, b):
    if not isinstance(a, Sym) and not isinstance(b, Sym):
        return min(a, b) if op == "min" else max(a, b)
    sa, sb = _as_sym(a), _as_sym(b)
    assert sa is not None and sb is not None, (a, b)  # sizes, integers and their sums only
    d = sb - sa
    if not isinstance(d, Sym):
        return (a if d >= 0 else b) if op == "min" else (b if d >= 0 else a)
    lo, hi = d.bounds()
    if lo >= 0:  # b >= a everywhere
        return a if op == "min" else b
    if hi <= 0:
        return b if op == "min" else a
    x, y = sorted((sa, sb), key=lambda s: repr(s.key()))
    atom = _Ext(op, x, y)
    return Sym({atom.key(): (atom, 1)}, 0)


def _as_sym(x) -> Sym | None:
    if isinstance(x, Sym):
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        return Sym({}, x)
    if hasattr(x, "__index__") and not isinstance(x, (bool, float)):
        return Sym({}, int(x))
    return None


def _make(terms: dict, const: int):
    terms = {k: v for k, v in terms.items() if v != 0}
    return Sym(terms, const) if terms else const


class Sym:
    """An integer expression over symbolic sizes (see the module docstring)."""

    __slots__ = ("_key", "const", "terms")

    def __init__(self, terms: dict, const: int):
        self.terms = terms  # atom key -> (atom, coefficient)
        self.const = const
        self._key = (tuple(sorted((k, c) for k, (_, c) in terms.items())), const)

    @staticmethod
    def size(name: str, lo: int, hi: int, like: int | None = None) -> Sym:
        """The size `name`, known to lie in lo..hi (`like`: its representative value, default lo)."""
        a = _Size(name, lo, hi, lo if like is None else like)
        return Sym({a.key(): (a, 1)}, 0)

    def key(self):
        """A hashable canonical form."""
        return self._key

    def sizes(self) -> dict[str, tuple[int, int]]:
        """The sizes this expression uses, with their ranges."""
        out: dict = {}
        for atom, _ in self.terms.values():
            if isinstance(atom, _Size):
                out[atom.name] = (atom.lo, atom.hi)
            elif isinstance(atom, _Div):
                out.update(atom.num.sizes())
            else:  # a product, min or max
                out.update(atom.a.sizes())
                out.update(atom.b.sizes())
        return out

    # -- arithmetic --
    def _add(self, other: Sym, sign: int):
        terms = {k: (a, c) for k, (a, c) in self.terms.items()}
        for k, (a, c) in other.terms.items():
            terms[k] = (a, terms[k][1] + sign * c) if k in terms else (a, sign * c)
        terms = {k: v for k, v in terms.items() if v[1] != 0}
        return Sym(terms, self.const + sign * other.const) if terms else self.const + sign * other.const

    def __add__(self, other):
        o = _as_sym(other)
        return NotImplemented if o is None else self._add(o, 1)

    __radd__ = __add__

    def __sub__(self, other):
        o = _as_sym(other)
        return NotImplemented if o is None else self._add(o, -1)

    def __rsub__(self, other):
        o = _as_sym(other)
        return NotImplemented if o is None else o._add(self, -1)

    def __neg__(self):
        return self * -1

    def __pos__(self):
        return self

    def __mul__(self, other):
        o = _as_sym(other)
        if o is None:
            return NotImplemented
        if not o.terms:
            k = o.const
            if k == 0:
                return 0
            return Sym({key: (a, c * k) for key, (a, c) in self.terms.items()}, self.const * k)
        a, b = sorted((self, o), key=lambda s: repr(s.key()))
        atom = _Mul(a, b)
        return Sym({atom.key(): (atom, 1)}, 0)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        o = _as_sym(other)
        if o is None:
            return NotImplemented
        if o.terms:
            if o.key() == self.key():
                return 1
            raise SymbolicRefusal(f"{_names(o)} symbolic here, which is not supported as a divisor (`{self} // {o}`, "
                                  f"for {_ranges(o)}; a loop over it fused into an outer one divides by it)")
        c = o.const
        if c < 0:
            return (-self) // (-c)
        if c == 0:
            raise ZeroDivisionError("integer division by zero")
        if c == 1:
            return self
        if all(co % c == 0 for _, co in self.terms.values()) and self.const % c == 0:
            return Sym({k: (a, co // c) for k, (a, co) in self.terms.items()}, self.const // c)
        # pull out whole multiples: (c*x + r) // c = x + r // c when every coefficient of x is an int
        whole = {k: (a, co // c) for k, (a, co) in self.terms.items() if co // c}
        rest = {k: (a, co - (co // c) * c) for k, (a, co) in self.terms.items()}
        base = self.const // c
        num = _make(rest, self.const - base * c)
        if not isinstance(num, Sym):
            q = num // c
        else:
            atom = _Div(num, c)
            q = Sym({atom.key(): (atom, 1)}, 0)
        out = _make(whole, base)
        return out + q

    def __rfloordiv__(self, other):
        if isinstance(other, int) and other >= 0 and proven(self, ">", other):
            return 0
        raise SymbolicRefusal(f"{_names(self)} symbolic here, which is not supported as a divisor (`{other} // "
                              f"{self}`, for {_ranges(self)}; a loop over it fused into an outer one divides by it)")

    def __mod__(self, other):
        o = _as_sym(other)
        if o is None:
            return NotImplemented
        return self - (self // o) * o

    def __divmod__(self, other):
        return self // other, self % other

    def __rdivmod__(self, other):
        return other // self, other % self

    def __rmod__(self, other):
        if isinstance(other, int) and other >= 0 and proven(self, ">", other):
            return other
        raise SymbolicRefusal(f"{_names(self)} symbolic here, which is not supported as a divisor (`{other} % "
                              f"{self}`, for {_ranges(self)}; a loop over it fused into an outer one divides by it)")

    def __truediv__(self, other):
        raise SymbolicRefusal(f"{self} / {other}: a fraction of a symbolic size")

    __rtruediv__ = __truediv__

    # -- decisions --
    def bounds(self) -> tuple[Fraction, Fraction]:
        """Lower and upper bound of the value over the sizes' ranges (sound, not always tight): the tighter of
        two sound bounds, with each `x // c` bounded as a whole, and written as `(x - r) / c` for a remainder r
        in 0..c-1 (which keeps `c*(N//c) - N` in -(c-1)..0)."""
        a, b = self._bounds(True), self._bounds(False)
        return max(a[0], b[0]), min(a[1], b[1])

    def _bounds(self, expand: bool) -> tuple[Fraction, Fraction]:
        lin: dict = {}  # variable key -> (lo, hi, coefficient)
        const = Fraction(self.const)

        def add(s: Sym, scale: Fraction):
            nonlocal const
            const += scale * s.const
            for k, (atom, c) in s.terms.items():
                w = scale * c
                if isinstance(atom, _Size):
                    lo, hi, old = lin.get(k, (atom.lo, atom.hi, Fraction(0)))
                    lin[k] = (lo, hi, old + w)
                elif isinstance(atom, _Div) and not expand:
                    nlo, nhi = atom.num.bounds()
                    lo, hi, old = lin.get(k, (Fraction(math.floor(nlo / atom.c)), Fraction(math.floor(nhi / atom.c)),
                                              Fraction(0)))
                    lin[k] = (lo, hi, old + w)
                elif isinstance(atom, _Div):  # (num - r) / c with r in 0..c-1
                    add(atom.num, w / atom.c)
                    rk = ("r",) + k
                    lo, hi, old = lin.get(rk, (0, atom.c - 1, Fraction(0)))
                    lin[rk] = (lo, hi, old - w / atom.c)
                else:
                    alo, ahi = atom.a.bounds()
                    blo, bhi = atom.b.bounds()
                    if isinstance(atom, _Mul):
                        ps = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
                        vlo, vhi = min(ps), max(ps)
                    elif atom.op == "min":
                        vlo, vhi = min(alo, blo), min(ahi, bhi)
                    else:
                        vlo, vhi = max(alo, blo), max(ahi, bhi)
                    lo, hi, old = lin.get(k, (vlo, vhi, Fraction(0)))
                    lin[k] = (lo, hi, old + w)

        const = Fraction(0)
        add(self, Fraction(1))
        lo = hi = const
        for vlo, vhi, w in lin.values():
            lo += min(w * vlo, w * vhi)
            hi += max(w * vlo, w * vhi)
        return lo, hi

    def _decide(self, other, op: str) -> bool:
        o = _as_sym(other)
        if o is None:
            raise TypeError(f"cannot compare a symbolic size with {type(other).__name__}")
        d = self - o
        if not isinstance(d, Sym):
            return {"<": d < 0, "<=": d <= 0, ">": d > 0, ">=": d >= 0, "==": d == 0, "!=": d != 0}[op]
        lo, hi = d.bounds()
        lo_i, hi_i = -((-lo.numerator) // lo.denominator), hi.numerator // hi.denominator  # integer values
        table = {"<": (hi_i < 0, lo_i >= 0), "<=": (hi_i <= 0, lo_i > 0), ">": (lo_i > 0, hi_i <= 0),
                 ">=": (lo_i >= 0, hi_i < 0), "==": (lo_i == hi_i == 0, lo_i > 0 or hi_i < 0),
                 "!=": (lo_i > 0 or hi_i < 0, lo_i == hi_i == 0)}
        yes, no = table[op]
        if yes:
            return True
        if no:
            return False
        raise SymbolicRefusal(f"{_names(d)} symbolic here, which is not supported where `{self} {op} {o}` is "
                              f"decided: it holds for some {_ranges(d)} and not others")

    def __lt__(self, other):
        return self._decide(other, "<")

    def __le__(self, other):
        return self._decide(other, "<=")

    def __gt__(self, other):
        return self._decide(other, ">")

    def __ge__(self, other):
        return self._decide(other, ">=")

    def __eq__(self, other):  # equal where proven so (`x == 0` asks "is it surely this constant?")
        if _as_sym(other) is None:
            return False
        if isinstance(other, Sym) and other.key() == self.key():
            return True
        return proven(self, "==", other)

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(self._key)

    def __bool__(self):
        return self._decide(0, "!=")

    def __index__(self):
        raise SymbolicRefusal(f"{_names(self)} symbolic here, which is not supported where a concrete integer is "
                              f"needed (`{self}`, for {_ranges(self)})")

    __int__ = __index__

    def __float__(self):
        raise SymbolicRefusal(f"{_names(self)} symbolic here, which is not supported where a concrete number is "
                              f"needed (`{self}`, for {_ranges(self)})")

    def __abs__(self):
        return self if self >= 0 else -self

    def __round__(self, n=None):
        return self

    # -- evaluation and printing --
    def evaluate(self, env: dict) -> int:
        """The value for the sizes in `env`."""
        total = self.const
        for atom, c in self.terms.values():
            if isinstance(atom, _Size):
                v = env[atom.name]
            elif isinstance(atom, _Div):
                v = evaluate(atom.num, env) // atom.c
            elif isinstance(atom, _Mul):
                v = evaluate(atom.a, env) * evaluate(atom.b, env)
            else:
                v = _extreme(atom.op, evaluate(atom.a, env), evaluate(atom.b, env))
            total += c * v
        return total

    def representative(self) -> int:
        """The value at the representative sizes (each Dim's `like`)."""
        env: dict = {}

        def walk(x: Sym):
            for atom, _ in x.terms.values():
                if isinstance(atom, _Size):
                    env[atom.name] = atom.like
                elif isinstance(atom, _Div):
                    walk(atom.num)
                else:
                    walk(atom.a)
                    walk(atom.b)
        walk(self)
        return self.evaluate(env)

    def to_ir(self):
        """The expression as loop IR over the size parameters (`size_var(name)`)."""
        from . import ir
        if not self.terms:  # a constant side of a min or max
            return ir.const(self.const)
        out = None
        for atom, c in sorted(self.terms.values(), key=lambda t: repr(t[0].key())):
            if isinstance(atom, _Size):
                e = size_var(atom.name)
            elif isinstance(atom, _Div):
                e = ir.BinOp("//", to_ir(atom.num), ir.const(atom.c))
            elif isinstance(atom, _Mul):
                e = ir.BinOp("*", to_ir(atom.a), to_ir(atom.b))
            else:
                e = ir.BinOp(atom.op, to_ir(atom.a), to_ir(atom.b))
            if c != 1:
                e = ir.BinOp("*", e, ir.const(c))
            out = e if out is None else ir.BinOp("+", out, e)
        if self.const:
            out = ir.const(self.const) if out is None else ir.BinOp("+", out, ir.const(self.const))
        return out

    def __str__(self):
        if not self.terms:
            return str(self.const)
        parts = []
        for atom, c in sorted(self.terms.values(), key=lambda t: repr(t[0].key())):
            if isinstance(atom, _Size):
                s = atom.name
            elif isinstance(atom, _Div):
                s = f"{atom.num}//{atom.c}" if len(atom.num.terms) == 1 and not atom.num.const and \
                    isinstance(next(iter(atom.num.terms.values()))[0], _Size) and \
                    next(iter(atom.num.terms.values()))[1] == 1 else f"({atom.num})//{atom.c}"
            elif isinstance(atom, _Mul):
                s = f"({atom.a})*({atom.b})"
            else:
                s = f"{atom.op}({atom.a}, {atom.b})"
            if c == 1:
                parts.append(("+", s))
            elif c == -1:
                parts.append(("-", s))
            else:
                parts.append(("+" if c > 0 else "-", f"{s}*{abs(c)}"))
        if self.const:
            parts.append(("+" if self.const > 0 else "-", str(abs(self.const))))
        parts.sort(key=lambda p: p[0] == "-")  # a positive term first: `N - N//8*8`, never `-N//8*8 + N`
        text = ("-" if parts[0][0] == "-" else "") + parts[0][1]
        if parts[0][0] == "-" and len(parts) == 1:
            text = f"-({parts[0][1]})"
        for sign, s in parts[1:]:
            text += f" {sign} {s}"
        return text

    __repr__ = __str__

    def __format__(self, spec):
        return str(self)

    def __deepcopy__(self, memo):
        return self

    def __copy__(self):
        return self

    def __reduce__(self):
        raise SymbolicRefusal(f"{self}: a symbolic size cannot be serialized")


def size_to_json(v):
    """A bound size as JSON: the int, or ``{"dim": [lo, hi, like]}`` for a symbolic one (see `size_from_json`).

    >>> size_to_json(4), size_to_json(Sym.size("N", 1, 9, 3))
    (4, {'dim': [1, 9, 3]})
    """
    if not isinstance(v, Sym):
        return v
    (atom, c), = v.terms.values()
    assert isinstance(atom, _Size) and c == 1 and not v.const  # a bound size is one size, as given
    return {"dim": [atom.lo, atom.hi, atom.like]}


def size_source(v) -> str:
    """A bound size as Python: the int, or the `tl.Dim(...)` that made a symbolic one.

    >>> size_source(4), size_source(Sym.size("N", 1, 9, 3))
    ('4', 'tl.Dim(1, 9, like=3)')
    """
    if not isinstance(v, Sym):
        return str(v)
    lo, hi, like = size_to_json(v)["dim"]
    return f"tl.Dim({lo}, {hi}, like={like})"


def size_from_json(v):
    """The size `size_to_json` wrote: an int as it is, a Dim for ``{"dim": [lo, hi, like]}``.

    >>> size_from_json({"dim": [1, 9, 3]}), size_from_json(4)
    (Dim(lo=1, hi=9, like=3), 4)
    """
    if isinstance(v, dict) and set(v) == {"dim"} and isinstance(v["dim"], list) and len(v["dim"]) == 3:
        return Dim(*v["dim"])
    return v


_INT_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq}


def proven(a, op: str, b) -> bool:
    """Whether `a op b` holds for every value of the sizes in range (False where it is not known to: a proof
    that fails leaves a guard, never a wrong answer).

    >>> n = Sym.size("N", 1, 9)
    >>> proven(n - 1, ">=", 0), proven(n - 1, ">", 0), proven(3, "<", 4)
    (True, False, True)
    """
    if a.__class__ is int and b.__class__ is int:  # the common case, on the lowering's hot paths
        return _INT_OPS[op](a, b)
    sa = _as_sym(a)
    if sa is None or _as_sym(b) is None:
        raise TypeError(f"proven({a!r}, {op!r}, {b!r}): integers or symbolic sizes only")
    try:
        return sa._decide(b, op)
    except SymbolicRefusal:
        return False


SIZE_SUFFIX = "__size"
#: The size parameter of a kernel with several versions (``tl.Dim(..., like=(a, b))``) that says which one runs,
#: chosen by the call from its sizes; not a name a program's size can have
VERSION_SIZE = "version@"


def size_var(name: str):
    """The loop IR variable holding size `name` at run time (a parameter of the generated function).

    >>> size_var("N").name
    'N__size'
    """
    from . import ir
    return ir.Var(name + SIZE_SUFFIX)


def upper_bound(x) -> int:
    """The largest value `x` (an int or a Sym) takes for sizes in range (an upper bound: what a buffer of that
    many elements is allocated with, so that one allocation serves every call).

    >>> upper_bound(Sym.size("N", 1, 9) * 4), upper_bound(5)
    (36, 5)
    """
    if not isinstance(x, Sym):
        return x
    hi = x.bounds()[1]
    return hi.numerator // hi.denominator


def representative(x) -> int:
    """`x` (an int or a Sym) at the representative sizes: for choices that affect speed, never correctness.

    >>> representative(Sym.size("N", 1, 99, 8) * 2 + 1)
    17
    """
    return x.representative() if isinstance(x, Sym) else x


def size_name(x) -> str | None:
    """The name of the symbolic size that `x` is exactly (`N`; not `N + 2`, `2*N` or an int), else None.

    >>> n = Sym.size("N", 1, 9)
    >>> size_name(n), size_name(n + 2), size_name(4)
    ('N', None, None)
    """
    if not isinstance(x, Sym) or x.const or len(x.terms) != 1:
        return None
    (atom, c), = x.terms.values()
    return atom.name if c == 1 and isinstance(atom, _Size) else None


def is_symbolic(x) -> TypeGuard[Sym]:
    """Whether `x` is a symbolic value.

    >>> is_symbolic(Sym.size("N", 1, 9)), is_symbolic(9)
    (True, False)
    """
    return isinstance(x, Sym)


def evaluate(x, env: dict) -> int:
    """`x` (an int or a Sym) for the sizes in `env`.

    >>> evaluate(Sym.size("N", 1, 9) // 2, {"N": 7}), evaluate(3, {})
    (3, 3)
    """
    return x.evaluate(env) if isinstance(x, Sym) else x


def to_ir(x):
    """`x` (an int or a Sym) as a loop IR expression.

    >>> str(to_ir(Sym.size("N", 1, 9) + 1)), str(to_ir(3))
    ('N__size + 1', '3')
    """
    from . import ir
    return x.to_ir() if isinstance(x, Sym) else ir.const(x)
