"""Random tensorlang programs and an independent numpy evaluator for them (used by test_random_programs.py).

A program is generated as a small structure -- input declarations, stages, index accesses, expression trees --
from which both the DSL text and the expected result are produced.  Nothing here imports tensorlang.

The generator knows the iteration range of every index variable:

* a variable gets an explicit ``where v in LO:HI`` (left-side variables always start at 0), or
* it relies on the compiler's range inference: the intersection, over every dimension of every access in which
  ``v`` is the only index variable (``a*v + c``), of ``ceil(-c/a) <= v <= floor((D-1-c)/a)``.  The generator only
  relies on inference when the answer is unambiguous: the range is non-empty, starts at exactly 0 for left-side
  variables, and every dimension that mixes ``v`` with other variables (``i + r``) stays in bounds over the
  chosen ranges (so it does not matter whether the compiler also intersects those).

The evaluator builds an open index grid per stage, gathers with a zero mask for out-of-range reads (padding),
evaluates the expression in float64 (int64 for i32 and i64 stages, numpy bools for bool stages) and reduces with
sum/prod/max/min.  It raises ``Reject`` when an example is numerically fragile (a comparison that is a near-tie,
sqrt of a tiny non-zero value, i32 overflow, i64 values past 2**62) so that the test can discard it instead of
reporting a rounding difference.

With ``generate(src, extras=True)``, a read's dimension may also be indexed through an index tensor (``X[G[i],
j]``, a gather, with an offset ``G[i] + 1`` or a ``clamp(G[i], 0, N - 1)``): ``G`` is an i32 or i64 input whose
values ``make_inputs`` draws inside the dimension (or around it, where a clamp brings them in); programs may be
i64, stages bool (comparisons stored), and inputs i64 or bool masks; and a dimension may be read through a boundary
condition, ``X[clamp(i - 1, 0, N - 1)]`` (an ``Edge``: its variables get their ranges from other reads or
``where``).  Without it, the same choices give the programs they gave before those existed (regression tests pin
programs by their seed).

Usage::

    import random
    from progen import Src, generate, make_inputs
    prog = generate(Src.from_random(random.Random(0)))
    print(prog.text, prog.env)
    inputs = make_inputs(prog, seed=0)
    expected = prog.evaluate(inputs)      # {output name: array}
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

INT32_MAX = 2**31 - 1
INT64_LIMIT = 2**62  # i64 values past it may wrap in a later operation: rejected
NP_DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "bool": np.bool_,
             "u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16, "u32": np.uint32, "u64": np.uint64}
FLOAT_DTYPES = ("f32", "f64")
#: the small integer types (with ``generate(..., small_ints=True)``): their arithmetic wraps, as numpy's. The evaluator
#: holds their values as int64 and wraps them into the type after each operation, except u64's, which it holds as
#: numpy's uint64 (an int64 cannot): a weak value (literal, index, size) is converted to it where it meets one
SMALL_DTYPES = ("u8", "i8", "u16", "i16", "u32", "u64")
INT_DTYPES = ("i32", "i64") + SMALL_DTYPES
# literals of a small-type stage: in its range, one of them near an end so that arithmetic wraps
SMALL_LITS = {"u8": [1, 2, 0, 3, 250], "i8": [1, 2, 0, 3, -1, -2, 120, -120], "u16": [1, 2, 0, 3, 65000],
              "i16": [1, 2, 0, 3, -1, -2, 32000, -32000], "u32": [1, 2, 0, 3, 4000000000],
              "u64": [1, 2, 0, 3, 9223372036854775800]}  # (a weak value is computed in i64: past it, a BuildError)


class Reject(Exception):
    """The example is numerically fragile (near-tie comparison, sqrt near 0, i32 overflow): discard it."""


# ------------------------------------------------------------------------------------------ draw source
class Src:
    """Source of random choices; every choice is an integer draw so that hypothesis can shrink it.

    Choices shrink toward the first option / False / the low end.
    """

    def __init__(self, draw_int):
        self._draw = draw_int

    @classmethod
    def from_hypothesis(cls, draw):
        from hypothesis import strategies as st

        return cls(lambda lo, hi: draw(st.integers(lo, hi)))

    @classmethod
    def from_random(cls, rnd):
        return cls(rnd.randint)

    def int(self, lo, hi):
        return self._draw(lo, hi)

    def chance(self, pct):
        """True with probability pct/100; shrinks to False."""
        return self._draw(0, 99) >= 100 - pct

    def pick(self, seq):
        seq = list(seq)
        return seq[self._draw(0, len(seq) - 1)]

    def weighted(self, pairs):
        pairs = [(item, w) for item, w in pairs if w > 0]
        x = self._draw(0, sum(w for _, w in pairs) - 1)
        for item, w in pairs:
            if x < w:
                return item
            x -= w
        raise AssertionError


# ------------------------------------------------------------------------------------------ size expressions
def _join(pieces, compact=False):
    """pieces: [(positive, text)] -> 'a + b - c' with positive pieces first (no leading unary minus)."""
    pos = [t for p, t in pieces if p]
    neg = [t for p, t in pieces if not p]
    plus, minus = (" + ", " - ") if not compact else ("+", "-")
    if not pos:
        if not neg:
            return "0"
        return "-" + neg[0] + "".join(minus + t for t in neg[1:])
    return plus.join(pos) + "".join(minus + t for t in neg)


@dataclass(frozen=True)
class SE:
    """Size expression: const + sum(coef * size_name)."""

    const: int = 0
    terms: tuple = ()  # ((name, coef), ...)

    @staticmethod
    def lit(c):
        return SE(int(c), ())

    @staticmethod
    def name(n, c=1):
        return SE(0, ((n, c),))

    def _coerce(self, other):
        return SE.lit(other) if isinstance(other, int) else other

    def __add__(self, other):
        other = self._coerce(other)
        d = dict(self.terms)
        for n, c in other.terms:
            d[n] = d.get(n, 0) + c
        return SE(self.const + other.const, tuple((n, c) for n, c in d.items() if c != 0))

    def __neg__(self):
        return SE(-self.const, tuple((n, -c) for n, c in self.terms))

    def __sub__(self, other):
        return self + (-self._coerce(other))

    def ev(self, env):
        return self.const + sum(c * env[n] for n, c in self.terms)

    def names(self):
        return {n for n, _ in self.terms}

    def is_lit(self):
        return not self.terms

    def pieces(self):
        out = [(c > 0, n if abs(c) == 1 else f"{abs(c)}*{n}") for n, c in self.terms]
        if self.const:
            out.append((self.const > 0, str(abs(self.const))))
        return out

    def render(self, compact=False):
        return _join(self.pieces(), compact)


@dataclass(frozen=True)
class Affine:
    """Index expression: sum(coef * var) + const, coef a size expression (an int literal or a size parameter)."""

    terms: tuple  # ((SE coef, var), ...)
    const: SE = SE()

    def vars(self):
        return [v for _, v in self.terms]

    def ev(self, env, grids):
        out = self.const.ev(env)
        for c, v in self.terms:
            out = out + c.ev(env) * grids[v]
        return out

    def bounds(self, env, ranges):
        """(min, max) of the expression over the box of variable ranges."""
        lo = hi = self.const.ev(env)
        for c, v in self.terms:
            a = c.ev(env)
            vlo, vhi = ranges[v]
            lo += min(a * vlo, a * vhi)
            hi += max(a * vlo, a * vhi)
        return lo, hi

    def render(self):
        pieces = []
        for c, v in self.terms:
            if c.is_lit():
                k = c.const
                pieces.append((k > 0, v if abs(k) == 1 else f"{abs(k)}*{v}"))
            else:
                (n, k), = c.terms
                pieces.append((True, f"{n}*{v}"))
        return _join(pieces + self.const.pieces())


# ------------------------------------------------------------------------------------------ expressions
# Precedence levels (Python's): or 1, and 2, not 3, comparisons 4, + - 5, * / 6, unary - 7, ** 8, atoms 9.
def _wrap(node, min_prec):
    txt = node.render()
    return f"({txt})" if node.prec < min_prec else txt


class Ctx:
    """Evaluation context of one stage."""

    def __init__(self, env, grids, tensors, domain, prog_state, int_max=INT32_MAX, wrap=None):
        self.env = env
        self.wrap = wrap  # a small integer type: its values wrap instead of being rejected past its range
        self.grids = grids  # var -> int64 array (open grid, broadcastable)
        self.tensors = tensors  # name -> stored array (float64, int64 or bool)
        self.domain = domain  # "float" or "int"
        self.state = prog_state  # dict with "mag": largest finite |value| seen so far
        self.int_max = int_max  # the largest |value| an integer stage may reach (its dtype's, or 2**62 for i64)

    def track(self, v):
        v = np.asarray(v)
        if v.dtype == bool or v.size == 0:
            return v
        if self.wrap == "u64":
            return v  # a uint64 wraps by itself; an int64 is a weak value (in range: `_weak_in_range`)
        if self.wrap is not None and np.issubdtype(v.dtype, np.integer):
            return v.astype(NP_DTYPES[self.wrap]).astype(np.int64)  # numpy's astype between integers wraps
        if self.domain == "int":
            # (compared in floats: an int64 past 2**63 has wrapped already; float64 tells it from a small one)
            if np.issubdtype(v.dtype, np.integer) and np.max(np.abs(v.astype(np.float64))) > self.int_max:
                raise Reject("integer overflow")
        else:
            a = np.abs(v[np.isfinite(v)])
            if a.size:
                self.state["mag"] = max(self.state["mag"], float(a.max()))
        return v


class Node:
    prec = 9
    typed = True  # does the value carry a tensor dtype (vs an adapting literal / index / size)

    def children(self):
        return []

    def walk(self):
        yield self
        for c in self.children():
            yield from c.walk()


@dataclass(eq=False)
class Gather:
    """A dimension indexed through an index tensor: `G[..] + offset`, or `clamp(G[..] + offset, 0, D - 1)`. Its
    values stay inside the dimension (``make_inputs`` draws G's values so), so that, like an Affine, it has
    bounds, and no variable whose range it decides (the range analysis skips it)."""

    read: Read  # the read of the index tensor (affine indices)
    offset: int
    clamp: SE | None  # the dimension's extent when clamped
    lo: int  # the values it takes
    hi: int
    terms = ()
    const = SE()

    def vars(self):
        return []

    def bounds(self, env, ranges):
        return self.lo, self.hi

    def render(self):
        x = self.read.render() + (f" + {self.offset}" if self.offset > 0 else f" - {-self.offset}" if self.offset
                                  else "")
        return f"clamp({x}, 0, {(self.clamp - 1).render()})" if self.clamp is not None else x

    def value(self, ctx):
        v = np.asarray(self.read.ev(ctx)).astype(np.int64) + self.offset
        return np.clip(v, 0, self.clamp.ev(ctx.env) - 1) if self.clamp is not None else v


@dataclass(eq=False)
class Edge:
    """A dimension read through a boundary condition, Halide's repeat_edge: ``clamp(inner, 0, D - 1)`` of an affine
    index. It stays inside the dimension, and (like a Gather) decides no variable's range: ``vars()`` is empty, and
    the variables of ``inner`` get their ranges elsewhere (other reads or ``where``)."""

    inner: Affine
    extent: SE
    terms = ()
    const = SE()

    def vars(self):
        return []

    def bounds(self, env, ranges):
        lo, hi = self.inner.bounds(env, ranges)
        top = self.extent.ev(env) - 1
        return min(max(lo, 0), top), min(max(hi, 0), top)

    def render(self):
        return f"clamp({self.inner.render()}, 0, {(self.extent - 1).render()})"

    def ev(self, env, grids):
        return np.clip(self.inner.ev(env, grids), 0, self.extent.ev(env) - 1)


@dataclass(eq=False)
class Read(Node):
    tensor: str
    idx: tuple  # of Affine or Gather; () for a 0-d tensor
    typed = True

    def children(self):
        return [a.read for a in self.idx if isinstance(a, Gather)]

    def render(self):
        if not self.idx:
            return self.tensor
        return f"{self.tensor}[{', '.join(a.render() for a in self.idx)}]"

    def ev(self, ctx):
        arr = ctx.tensors[self.tensor]
        if not self.idx:
            return arr[()]
        ids = [np.asarray(a.value(ctx) if isinstance(a, Gather) else a.ev(ctx.env, ctx.grids), dtype=np.int64)
               for a in self.idx]
        ids = np.broadcast_arrays(*ids)
        mask = np.ones(ids[0].shape, dtype=bool)
        clipped = []
        for d, ix in enumerate(ids):
            n = arr.shape[d]
            mask &= (ix >= 0) & (ix < n)
            clipped.append(np.clip(ix, 0, n - 1))
        vals = arr[tuple(clipped)]
        return np.where(mask, vals, np.zeros((), arr.dtype))


@dataclass(eq=False)
class Lit(Node):
    value: object  # int or float (float may be +-inf)
    text: str = None  # spelling, e.g. "5e-1"

    @property
    def typed(self):
        return False

    @property
    def prec(self):
        return 7 if self.value < 0 else 9

    def render(self):
        v = self.value
        if self.text is not None:
            return self.text
        if isinstance(v, float) and math.isinf(v):
            return "-inf" if v < 0 else "inf"
        return repr(v)

    def ev(self, ctx):
        return float(self.value) if ctx.domain == "float" else int(self.value)


@dataclass(eq=False)
class Var(Node):
    """An index variable used as a value."""

    name: str
    typed = False

    def render(self):
        return self.name

    def ev(self, ctx):
        g = ctx.grids[self.name]
        return g.astype(np.float64) if ctx.domain == "float" else g


@dataclass(eq=False)
class Size(Node):
    """A size (or int parameter) used as a value."""

    name: str
    typed = False

    def render(self):
        return self.name

    def ev(self, ctx):
        v = ctx.env[self.name]
        return float(v) if ctx.domain == "float" else int(v)


UNARY_FUNCS = ("exp", "log", "sqrt", "tanh", "abs")


@dataclass(eq=False)
class Un(Node):
    op: str  # "neg" or a function name
    x: Node

    def children(self):
        return [self.x]

    @property
    def typed(self):
        return self.x.typed

    @property
    def prec(self):
        return 7 if self.op == "neg" else 9

    def render(self):
        if self.op == "neg":
            return "-" + _wrap(self.x, 8)  # `-x ** 2` is -(x ** 2), as in Python
        return f"{self.op}({self.x.render()})"

    def ev(self, ctx):
        x = self.x.ev(ctx)
        if self.op == "neg":
            r = -x
        elif self.op == "abs":
            r = np.abs(x)
        elif self.op == "exp":
            r = np.exp(x)
        elif self.op == "log":
            r = np.log(x)
        elif self.op == "tanh":
            r = np.tanh(x)
        elif self.op == "sqrt":
            ax = np.asarray(x)
            thr = 1e-5 * max(1.0, ctx.state["mag"])
            if np.any((ax > 0) & (ax < thr)):
                raise Reject("sqrt of a tiny value")
            if np.any(ax == 0) and not _exact_value(self.x, ctx.state.get("exact", set())):
                # a zero the oracle reaches exactly (terms that cancel) and the kernel within rounding of it:
                # sqrt turns its 1e-7 into 3e-4
                raise Reject("sqrt of a zero of rounded values")
            r = np.sqrt(x)
        else:
            raise AssertionError(self.op)
        return ctx.track(_weak_in_range(self, r, ctx))


BIN_PREC = {"+": 5, "-": 5, "*": 6, "/": 6, "//": 6, "%": 6, "**": 8}


def _weak_in_range(node, r, ctx):
    """`r`, the value of `node`; in a small-type stage, a weak value (literals, indices and sizes only) must fit the
    type: the DSL computes it in the type where it meets a tensor (wrapping) and exactly where it meets none."""
    if ctx.wrap is not None and not node.typed:
        info = np.iinfo(NP_DTYPES[ctx.wrap])
        x = np.asarray(r)
        # (a weak integer is computed in 64 bits: past int64, u64's weak values are not followed)
        top = min(int(info.max), 2**63 - 1)
        if x.size and (x.min() < info.min or x.max() > top):
            raise Reject("a weak value outside the small type")
    return r


def _as_u64(a, b, ctx):
    """The operands of an operation in a u64 stage: a weak one (a Python or int64 number) meeting a uint64 value is
    converted to it (wrapping, numpy's astype), as the DSL's weak values adapt; elsewhere unchanged."""
    if ctx.wrap != "u64" or not any(np.asarray(x).dtype == np.uint64 for x in (a, b)):
        return a, b
    return tuple(np.asarray(x).astype(np.uint64) for x in (a, b))


@dataclass(eq=False)
class Bin(Node):
    op: str  # + - * / ** max min
    a: Node
    b: Node

    def children(self):
        return [self.a, self.b]

    @property
    def typed(self):
        return self.a.typed or self.b.typed

    @property
    def prec(self):
        return BIN_PREC.get(self.op, 9)

    def render(self):
        if self.op in ("max", "min"):
            return f"{self.op}({self.a.render()}, {self.b.render()})"
        if self.op == "**":
            return f"{_wrap(self.a, 9)} ** {_wrap(self.b, 9)}"
        p = BIN_PREC[self.op]
        return f"{_wrap(self.a, p)} {self.op} {_wrap(self.b, p + 1)}"

    def ev(self, ctx):
        a, b = self.a.ev(ctx), self.b.ev(ctx)
        op = self.op
        if op != "/":
            a, b = _as_u64(a, b, ctx)
        if ctx.wrap == "u64" and not self.typed and isinstance(a, int) != isinstance(b, int) and \
                max(abs(a) if isinstance(a, int) else 0, abs(b) if isinstance(b, int) else 0) > 2**62:
            raise Reject("a weak value past int64")  # numpy refuses a Python int past int64 with an int64 array
        # an i64 result past the limit may have wrapped already (a small type's values wrap as the kernel's do)
        if ctx.wrap is None and ctx.domain == "int" and op in ("+", "-", "*"):
            approx = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](np.asarray(a, np.float64), b)
            if np.any(np.abs(approx) > ctx.int_max):
                raise Reject("integer overflow")
        if op == "+":
            r = a + b
        elif op == "-":
            r = a - b
        elif op == "*":
            r = a * b
        elif op == "**":
            if 0 < b < 1:
                ax = np.asarray(a)
                if np.any((ax > 0) & (ax < 1e-5 * max(1.0, ctx.state["mag"]))):
                    raise Reject("fractional power of a tiny value")
            r = np.asarray(a, dtype=np.float64) ** b
        elif op == "max":
            r = np.maximum(a, b)
        elif op == "min":
            r = np.minimum(a, b)
        elif op in ("//", "%"):  # floor division / modulo with the sign of the divisor (Python's)
            if ctx.domain == "float":
                with np.errstate(divide="ignore", invalid="ignore"):
                    q = np.asarray(a / b, dtype=np.float64)
                    frac = np.abs(q - np.round(q))
                if np.any((frac > 0) & (frac < 1e-5 * (1.0 + np.abs(q)))):
                    raise Reject("floor of a near-integer quotient")
                exact = ctx.state.get("exact", set())
                if (not (_exact_value(self.a, exact) and _exact_value(self.b, exact))
                        and np.any((frac == 0) & (np.asarray(a) != 0))):
                    # an integer quotient of values that rounding may move (a sum of quotients, say, that the
                    # oracle lands on a multiple and the kernel one ulp beside it): the floor jumps by one
                    raise Reject("floor of an integer quotient of rounded values")
            r = np.floor_divide(a, b) if op == "//" else np.mod(a, b)
        elif op == "/":  # true division, a float in any stage (numpy's, and the DSL's: `/` never truncates)
            with np.errstate(divide="ignore", invalid="ignore"):  # a small type's `abs(b) + 1` may wrap to 0
                r = np.true_divide(np.asarray(a, np.float64), b)
        else:
            raise AssertionError(op)
        return ctx.track(_weak_in_range(self, r, ctx))


@dataclass(eq=False)
class Cmp(Node):
    op: str  # > < >= <= == !=
    a: Node
    b: Node
    prec = 4
    typed = False

    def children(self):
        return [self.a, self.b]

    def render(self):
        return f"{_wrap(self.a, 5)} {self.op} {_wrap(self.b, 5)}"

    def ev(self, ctx):
        return _cmp(self.op, self.a.ev(ctx), self.b.ev(ctx), ctx)


def _cmp(op, a, b, ctx):
    a, b = (np.asarray(x) for x in _as_u64(a, b, ctx))
    if np.issubdtype(a.dtype, np.floating) or np.issubdtype(b.dtype, np.floating):
        d = np.abs(a - b)
        with np.errstate(invalid="ignore"):
            near = (d > 0) & (d <= 1e-5 * (1.0 + np.abs(a) + np.abs(b)))
        if np.any(near):
            raise Reject("near-tie comparison")
    return CMP_FUNCS[op](a, b)


CMP_FUNCS = {">": np.greater, "<": np.less, ">=": np.greater_equal, "<=": np.less_equal, "==": np.equal,
             "!=": np.not_equal}


@dataclass(eq=False)
class Chain(Node):
    """A chained comparison `a < b <= c` (= `a < b and b <= c`)."""

    ops: tuple
    xs: tuple
    prec = 4
    typed = False

    def children(self):
        return list(self.xs)

    def render(self):
        out = _wrap(self.xs[0], 5)
        for op, x in zip(self.ops, self.xs[1:]):
            out += f" {op} {_wrap(x, 5)}"
        return out

    def ev(self, ctx):
        vals = [x.ev(ctx) for x in self.xs]
        res = True
        for op, a, b in zip(self.ops, vals, vals[1:]):
            res = np.logical_and(res, _cmp(op, a, b, ctx))
        return res


@dataclass(eq=False)
class Logic(Node):
    op: str  # and / or
    a: Node
    b: Node
    typed = False

    def children(self):
        return [self.a, self.b]

    @property
    def prec(self):
        return 2 if self.op == "and" else 1

    def render(self):
        p = self.prec
        return f"{_wrap(self.a, p)} {self.op} {_wrap(self.b, p + 1)}"

    def ev(self, ctx):
        f = np.logical_and if self.op == "and" else np.logical_or
        return f(self.a.ev(ctx), self.b.ev(ctx))


@dataclass(eq=False)
class Not(Node):
    x: Node
    prec = 3
    typed = False

    def children(self):
        return [self.x]

    def render(self):
        return "not " + _wrap(self.x, 3)

    def ev(self, ctx):
        return np.logical_not(self.x.ev(ctx))


@dataclass(eq=False)
class Sel(Node):
    cond: Node
    a: Node
    b: Node

    def children(self):
        return [self.cond, self.a, self.b]

    @property
    def typed(self):
        return self.a.typed or self.b.typed

    def render(self):
        return f"select({self.cond.render()}, {self.a.render()}, {self.b.render()})"

    def ev(self, ctx):
        return np.where(self.cond.ev(ctx), *_as_u64(self.a.ev(ctx), self.b.ev(ctx), ctx))


@dataclass(eq=False)
class Cast(Node):
    dtype: str
    x: Node
    typed = True

    def children(self):
        return [self.x]

    def render(self):
        return f"{self.dtype}({self.x.render()})"

    def ev(self, ctx):
        x = np.asarray(self.x.ev(ctx))
        if self.dtype == "bool":  # numpy's: nonzero (NaN too) is True
            return x.astype(bool)
        if np.issubdtype(x.dtype, np.floating) and not _exact_value(self.x, ctx.state.get("exact", set())) \
                and _near_whole(x):
            # a kernel may divide by multiplying with the reciprocal (docs: dsl.md, Division): x / x may be one
            # ulp below 1, which truncates to 0
            raise Reject("a rounded float within an ulp of a whole number cast to an integer")
        if self.dtype == "u64":  # as below, held as uint64 (the largest float64 below 2**64 is 2**64 - 2048)
            if not np.issubdtype(x.dtype, np.floating):
                return x.astype(np.uint64)
            t = np.trunc(np.nan_to_num(x, nan=0.0))
            if np.any(t >= 2.0**53) and not _exact_value(self.x, ctx.state.get("exact", set())):
                # a kernel may divide by multiplying with the reciprocal (docs: dsl.md, Division): one ulp, which
                # past 2**53 is a whole number or more once cast
                raise Reject("a rounded float past 2**53 cast to u64")
            return np.where(t >= 2.0**64, np.uint64(2**64 - 1), np.clip(t, 0.0, 2.0**64 - 2048).astype(np.uint64))
        if self.dtype in SMALL_DTYPES:  # the DSL's definition: floats truncated and saturated, integers wrapped
            info = np.iinfo(NP_DTYPES[self.dtype])
            if np.issubdtype(x.dtype, np.floating):
                x = np.clip(np.trunc(np.nan_to_num(x, nan=0.0)), float(info.min), float(info.max))
            return x.astype(np.int64).astype(NP_DTYPES[self.dtype]).astype(np.int64)
        if self.dtype in INT_DTYPES:
            if np.issubdtype(x.dtype, np.floating):
                x = np.trunc(x)
            elif self.dtype == "i32":  # an i64 value wraps, as numpy's astype
                x = x.astype(np.int32)
            return ctx.track(x.astype(np.int64))
        x = x.astype(np.float64)
        if self.dtype == "f32":
            x = x.astype(np.float32).astype(np.float64)
        return ctx.track(x)


# ------------------------------------------------------------------------------------------ program
@dataclass
class InputDecl:
    name: str
    dtype: str
    dims: list  # of SE


@dataclass
class Stage:
    name: str
    lhs: list  # left-side index variables
    red: list  # reduction index variables
    op: str  # = += *= max= min=
    expr: Node = None
    dtype: str = "f32"
    ranges: dict = field(default_factory=dict)  # var -> (lo, hi) inclusive
    where: dict = field(default_factory=dict)  # var -> (SE lo, SE hi) for explicit ranges (hi exclusive)
    compact_where: bool = True
    operand_dtype: str = ""  # of a bool stage: the dtype its comparisons' operands are generated in

    @property
    def shape(self):
        return tuple(self.ranges[v][1] + 1 for v in self.lhs)

    @property
    def value_dtype(self):
        """The dtype the stage's values (its comparisons' operands, for a bool stage) are computed in."""
        return self.operand_dtype if self.dtype == "bool" else self.dtype

    @property
    def reduction_len(self):
        return int(np.prod([self.ranges[v][1] - self.ranges[v][0] + 1 for v in self.red], dtype=np.int64))

    def reads(self):
        return [n for n in self.expr.walk() if isinstance(n, Read)]

    def render(self):
        lhs = self.name if not self.lhs else f"{self.name}[{', '.join(self.lhs)}]"
        line = f"{lhs} {self.op} {self.expr.render()}"
        if self.where:
            parts = []
            for v in self.lhs + self.red:
                if v in self.where:
                    lo, hi = self.where[v]
                    sep = ":" if self.compact_where else " : "
                    parts.append(f"{v} in {lo.render(self.compact_where)}{sep}{hi.render(self.compact_where)}")
            line += " where " + ", ".join(parts)
        return line


REDUCE = {"+=": np.sum, "*=": np.prod, "max=": np.max, "min=": np.min}


@dataclass
class Program:
    name: str
    inputs: list  # of InputDecl (parameter order of tensors)
    params: list  # int parameter names
    env: dict  # size / parameter name -> value
    stages: list  # of Stage, in dependency order
    outputs: list  # output stage names
    text: str = ""
    index_ranges: dict = field(default_factory=dict)  # index tensor -> (lo, hi): the values make_inputs draws

    def __repr__(self):
        return f"Program(sizes={self.env}, text={self.text!r})"

    def stage(self, name):
        return next(s for s in self.stages if s.name == name)

    def input_shape(self, decl):
        return tuple(d.ev(self.env) for d in decl.dims)

    def uses_f32(self):
        """Does any value pass through f32 (an f32 input, stage or cast)?"""
        return (any(d.dtype == "f32" for d in self.inputs) or any(s.dtype == "f32" for s in self.stages)
                or any(isinstance(n, Cast) and n.dtype == "f32" for s in self.stages for n in s.expr.walk()))

    def total_reduction_len(self):
        return sum(s.reduction_len for s in self.stages)

    def evaluate(self, inputs, return_all=False):
        """inputs: {name: array}.  Returns {output name: array of the output dtype}; raises Reject."""
        tensors = {}
        for decl in self.inputs:
            a = np.asarray(inputs[decl.name])
            tensors[decl.name] = a if decl.dtype in ("bool", "u64") else \
                a.astype(np.int64 if decl.dtype in INT_DTYPES else np.float64)
        state = {"mag": 0.0, "exact": {decl.name for decl in self.inputs}}
        for st in self.stages:
            tensors[st.name] = self._eval_stage(st, tensors, state)
            # (a bool stage is exact: the comparisons it stores reject near-ties)
            if st.dtype == "bool" or (st.op != "*=" and _exact_value(st.expr, state["exact"])):
                state["exact"].add(st.name)
        self.magnitude = state["mag"]
        names = [s.name for s in self.stages] if return_all else self.outputs
        return {n: tensors[n].astype(NP_DTYPES[self.stage(n).dtype]) for n in names}

    def _eval_stage(self, st, tensors, state):
        allv = st.lhs + st.red
        grids = {}
        for ax, v in enumerate(allv):
            lo, hi = st.ranges[v]
            shape = [1] * len(allv)
            shape[ax] = hi - lo + 1
            grids[v] = np.arange(lo, hi + 1, dtype=np.int64).reshape(shape)
        full = tuple(st.ranges[v][1] - st.ranges[v][0] + 1 for v in allv)
        if math.prod(full) > MAX_POINTS:
            raise Reject("too many iteration points")
        domain = "int" if st.value_dtype in INT_DTYPES else "float"
        ctx = Ctx(self.env, grids, tensors, domain, state, INT64_LIMIT if st.value_dtype == "i64" else INT32_MAX,
                  wrap=st.value_dtype if st.value_dtype in SMALL_DTYPES else None)
        with np.errstate(over="ignore", divide="ignore"):  # (a uint64 0-d value warns where it wraps, as 1 // 0)
            val = np.asarray(st.expr.ev(ctx))
        if st.dtype == "bool":
            return np.array(np.broadcast_to(val, full), dtype=bool, order="C")
        val = np.broadcast_to(val, full).astype(np.uint64 if ctx.wrap == "u64" else np.int64 if domain == "int"
                                                else np.float64)
        if st.red:
            axes = tuple(range(len(st.lhs), len(allv)))
            if ctx.wrap is None and domain == "int" and st.op == "+=" and \
                    np.any(np.abs(val.astype(np.float64)).sum(axis=axes) > ctx.int_max):
                raise Reject("integer overflow")
            val = REDUCE[st.op](val, axis=axes)
        val = ctx.track(np.asarray(val))
        if st.dtype == "f32":
            val = val.astype(np.float32).astype(np.float64)
        return np.array(val, order="C")


def make_inputs(prog, seed):
    """Input arrays: floats are multiples of 1/8 in [-2, 2] (exact in f32), ints in [-3, 3] (i64 inputs sometimes
    times 2**20), bools either; an index tensor's values span its range (``Program.index_ranges``)."""
    rng = np.random.default_rng(seed)
    out = {}
    for decl in prog.inputs:
        shape = prog.input_shape(decl)
        if decl.name in prog.index_ranges:
            lo, hi = prog.index_ranges[decl.name]
            a = rng.integers(lo, hi + 1, size=shape).astype(NP_DTYPES[decl.dtype])
        elif decl.dtype == "bool":
            a = rng.integers(0, 2, size=shape).astype(bool)
        elif decl.dtype == "i64":
            # (times 2**20: past 2**31 in a product, far enough below 2**62 that few examples overflow)
            a = rng.integers(-3, 4, size=shape) * (2**20 if rng.integers(0, 3) == 0 else 1)
        elif decl.dtype == "i32":
            a = rng.integers(-3, 4, size=shape).astype(np.int32)
        elif decl.dtype in SMALL_DTYPES:  # small values, or any value of the type (arithmetic wraps)
            info = np.iinfo(NP_DTYPES[decl.dtype])
            lo, hi = (max(int(info.min), -3), 4) if rng.integers(0, 2) else (int(info.min), int(info.max) + 1)
            wide = np.uint64 if decl.dtype == "u64" else np.int64  # (one that holds the type's values)
            a = rng.integers(lo, hi - 1, size=shape, dtype=wide, endpoint=True).astype(NP_DTYPES[decl.dtype])
        else:
            a = (rng.integers(-16, 17, size=shape) / 8.0).astype(NP_DTYPES[decl.dtype])
        out[decl.name] = np.array(a, order="C")
    return out


# ------------------------------------------------------------------------------------------ generator
SIZE_NAMES = ["N", "M", "K", "L"]
SIZE_VALUES = [1, 2, 3, 5, 7, 4, 6]  # shrink toward small; includes 1 and primes
INPUT_NAMES = ["X", "Y", "Z"]
INDEX_NAMES = ["G", "H"]  # index tensors of gathers
LHS_VARS = ["i", "j", "k"]
RED_VARS = ["r", "s"]
PARAM_VALUES = {"pad": [1, 2], "st": [1, 2, 3]}
FLOAT_LITS = [1, 2, 0.5, 1.5, 0.25, 3, 2.0, -1, -0.5, 0.125]
INT_LITS = [1, 2, 0, 3, -1, -2]
I64_LITS = INT_LITS + [3000000000, -5000000000]  # past 2**31
MAX_EXTENT = 9
BIG_SIZE_VALUES = [16, 17, 8, 31, 33, 9]  # for the occasional program with longer loops
BIG_MAX_EXTENT = 40
MAX_POINTS = 100_000  # iteration points of one stage; bigger examples are rejected


def _near_whole(x: np.ndarray) -> bool:
    """Whether a finite element of float array `x` lies within 4 ulps of a whole number other than 0 (itself one
    included), where truncating it to an integer can jump by one when the value is rounded differently (around 0
    truncation gives 0 on both sides).

    >>> _near_whole(np.array([1.0, 2.5])), _near_whole(np.array([0.0, -1e-17, 2.5]))
    (True, False)
    """
    x = np.asarray(x, np.float64)
    x = x[np.isfinite(x) & (np.abs(x) >= 0.5)]
    return bool(np.any(np.abs(x - np.round(x)) <= 4 * np.spacing(np.abs(x))))


def _exact_value(node, exact_tensors) -> bool:
    """Whether `node` has the same value in any evaluation order and float precision the compiler may use: inputs
    (multiples of 1/8), small grid literals, indices and sizes, combined by + - * max min abs neg select // % and
    whole powers, and reads of stages that are exact themselves (`exact_tensors`). A `/`, a function or a
    product reduction rounds, so a floor or modulo of such a value can jump where the oracle's value and the
    kernel's differ by one ulp."""
    if isinstance(node, Lit):
        v = node.value
        return isinstance(v, int) or (math.isfinite(v) and float(v * 64).is_integer())
    if isinstance(node, (Var, Size)):
        return True
    if isinstance(node, Read):
        return node.tensor in exact_tensors
    if isinstance(node, Un):
        return node.op in ("abs", "neg") and _exact_value(node.x, exact_tensors)
    if isinstance(node, Bin):
        if node.op == "**":
            return isinstance(node.b, Lit) and node.b.value in (2, 3) and _exact_value(node.a, exact_tensors)
        return (node.op in ("+", "-", "*", "max", "min", "//", "%") and _exact_value(node.a, exact_tensors)
                and _exact_value(node.b, exact_tensors))
    if isinstance(node, Sel):
        return _exact_value(node.a, exact_tensors) and _exact_value(node.b, exact_tensors)
    if isinstance(node, Cast):
        return _exact_value(node.x, exact_tensors)
    return False


def _int_exact(node):
    """An untyped expression of ints, + - * max min abs neg only: exact in any dtype, safe for == and !=."""
    if isinstance(node, Lit):
        return isinstance(node.value, int)
    if isinstance(node, (Var, Size)):
        return True
    if isinstance(node, Bin):
        return node.op in ("+", "-", "*", "max", "min") and _int_exact(node.a) and _int_exact(node.b)
    if isinstance(node, Un):
        return node.op in ("abs", "neg") and _int_exact(node.x)
    return False


class _Gen:
    def __init__(self, src: Src, allow_rank0_inputs=True, extras=False, small_ints=False):
        self.s = src
        self.allow_rank0 = allow_rank0_inputs
        self.extras = extras  # gathers, i64 and bool: choices drawn only then
        self.small_ints = small_ints  # programs in one of the small integer types

    # -- sizes / params
    def size_name(self):
        """A size name for a new shape dimension; an unused name gets a value now."""
        used = [n for n in SIZE_NAMES if n in self.env]
        if used and (len(used) == len(SIZE_NAMES) or self.s.chance(60)):
            return self.s.pick(used)
        n = next(n for n in SIZE_NAMES if n not in self.env)
        self.env[n] = self.s.pick(BIG_SIZE_VALUES if self.big and not self.env else SIZE_VALUES)
        return n

    def param(self, name):
        if name not in self.params:
            self.params.append(name)
            self.env[name] = self.s.pick(PARAM_VALUES[name])
        return name

    def known_sizes(self):
        return [n for n in self.env]

    def dim_se(self):
        kind = self.s.weighted([("name", 78), ("lit", 10), ("plus", 8), ("sum", 4)])
        if kind == "lit":
            return SE.lit(self.s.int(1, 4))
        n = self.size_name()
        if kind == "plus":
            return SE.name(n) + self.s.int(1, 2)
        if kind == "sum":  # the second name is one already in a shape
            m = self.s.pick([x for x in SIZE_NAMES if x in self.env])
            e = SE.name(n) + SE.name(m)
            if e.ev(self.env) <= self.max_extent:
                return e
        return SE.name(n)

    # -- tensors
    def new_input(self, min_rank=0, dtype=None):
        name = INPUT_NAMES[len([d for d in self.inputs if d.name in INPUT_NAMES])]
        dtype = dtype or self.main
        if self.mixed and self.s.chance(50) and dtype == self.main:
            dtype = self.s.pick([d for d in ("f32", "f64", "i32") + ("i64",) * self.extras if d != self.main])
        ranks = [(1, 30), (2, 40), (3, 18), (0, 12 if self.allow_rank0 else 0)]
        rank = self.s.weighted([(r, w) for r, w in ranks if r >= min_rank])
        decl = InputDecl(name, dtype, [self.dim_se() for _ in range(rank)])
        self.inputs.append(decl)
        self.tensors[name] = (dtype, decl.dims)
        return name

    def tensor_dims(self, name):
        """(list of SE, list of int) for a tensor's dims."""
        dims = self.tensors[name][1]
        return dims, [d.ev(self.env) for d in dims]

    def pick_tensor(self, min_rank=0):
        if self.pending:
            return self.pending.pop(0)
        avail = [t for t in self.tensors if len(self.tensors[t][1]) >= min_rank and t not in self.index_ranges
                 and self.tensors[t][0] != "bool"]
        can_new = len([d for d in self.inputs if d.name in INPUT_NAMES]) < len(INPUT_NAMES)
        if can_new and (not avail or self.s.chance(35 if len(self.inputs) < 2 else 15)):
            return self.new_input(min_rank)
        if not avail:
            return None
        return self.s.pick(avail)

    # -- index expressions
    def pick_var(self):
        unplaced = [v for v in self.vars if v not in self.placed]
        if unplaced and self.s.chance(75):
            v = self.s.pick(unplaced)
        else:
            v = self.s.pick(self.vars)
        self.placed.add(v)
        return v

    def index(self, dim_se, prev):
        """One dimension's affine index; prev = vars used in earlier dims of this access."""
        if not self.vars:
            return Affine((), SE.lit(0) if self.s.chance(50) else dim_se - 1)
        one = SE.lit(1)
        kinds = [
            ("var", 46),
            ("diag", 8 if prev else 0),
            ("offset", 10),
            ("sum", 10 if len(self.vars) > 1 else 0),
            ("scaled", 8),
            ("rev", 6),
            ("const", 5),
            ("param", 7),
        ]
        kind = self.s.weighted(kinds)
        if kind == "const":
            return Affine((), SE.lit(0) if self.s.chance(50) else dim_se - 1)
        if kind == "diag":
            return Affine(((one, self.s.pick(prev)),))
        v = self.pick_var()
        if kind == "var":
            return Affine(((one, v),))
        if kind == "offset":
            return Affine(((one, v),), SE.lit(self.s.pick([1, -1, 2, -2])))
        if kind == "sum":
            w = self.s.pick([u for u in self.vars if u != v])
            self.placed.add(w)
            return Affine(((one, v), (one, w)), SE.lit(self.s.pick([0, 0, 1, -1])))
        if kind == "scaled":
            if len(self.vars) > 1 and self.s.chance(50):
                w = self.s.pick([u for u in self.vars if u != v])
                self.placed.add(w)
                return Affine(((SE.lit(2), v), (one, w)))
            return Affine(((SE.lit(2), v),), SE.lit(self.s.pick([0, 1])))
        if kind == "rev":
            return Affine(((SE.lit(-1), v),), dim_se - 1)
        # param
        if self.s.chance(50):
            p = self.param("pad")
            return Affine(((one, v),), SE.name(p, self.s.pick([1, -1])))
        p = self.param("st")
        if len(self.vars) > 1 and self.s.chance(60):
            w = self.s.pick([u for u in self.vars if u != v])
            self.placed.add(w)
            return Affine(((SE.name(p), v), (one, w)))
        return Affine(((SE.name(p), v),))

    def gather(self, dim_se):
        """An index of a dimension of extent `dim_se` through a new index tensor (G, then H), or None."""
        used = [n for n in INDEX_NAMES if n in self.index_ranges]
        if len(used) == len(INDEX_NAMES) or not self.vars:
            return None
        name = INDEX_NAMES[len(used)]
        decl = InputDecl(name, self.s.pick(["i32", "i64"]), [self.dim_se() for _ in range(self.s.int(1, 2))])
        self.inputs.append(decl)
        self.tensors[name] = (decl.dtype, decl.dims)
        self.index_ranges[name] = (0, 0)  # (drawn below; kept out of pick_tensor meanwhile)
        idx, prev = [], []
        for d in decl.dims:
            a = self.index(d, prev)
            idx.append(a)
            prev.extend(a.vars())
        n = dim_se.ev(self.env)
        if self.s.chance(30):  # clamped: values around the dimension, brought in
            offset, clamp = self.s.pick([0, 1, -1]), dim_se
            self.index_ranges[name] = (-2, n + 1)
        else:  # values that stay inside it, offset included (a padded read of G gives 0: 0 + offset too)
            offset, clamp = (self.s.pick([0, 0, 1]) if n > 1 else 0), None
            self.index_ranges[name] = (-offset, n - 1 - offset)
        return Gather(Read(name, tuple(idx)), offset, clamp, 0, n - 1)

    def read(self, min_rank=0, want_var=None):
        t = self.pick_tensor(min_rank)
        if t is None:
            return None
        dims, _ = self.tensor_dims(t)
        idx, prev = [], []
        for d in dims:
            if want_var is not None and not prev:
                a = Affine(((SE.lit(1), want_var),))
                self.placed.add(want_var)
            else:
                a = (self.gather(d) if self.extras and self.s.chance(7) else None) or self.index(d, prev)
                if self.extras and isinstance(a, Affine) and a.terms and self.s.chance(8):
                    a = Edge(a, d)
            idx.append(a)
            prev.extend(a.vars())
        node = Read(t, tuple(idx))
        tdtype = self.tensors[t][0]
        if tdtype != self.dtype:
            node = Cast(self.dtype, node)
        return node

    # -- value expressions
    def lit(self):
        if self.dtype in SMALL_DTYPES:
            return Lit(self.s.pick(SMALL_LITS[self.dtype]))
        if self.dtype in INT_DTYPES:
            return Lit(self.s.pick(I64_LITS if self.dtype == "i64" else INT_LITS))
        v = self.s.pick(FLOAT_LITS)
        if isinstance(v, float) and v > 0 and self.s.chance(10):  # scientific spelling
            return Lit(v, f"{v * 10:g}e-1")
        return Lit(v)

    def leaf(self, typed):
        kind = self.s.weighted(
            [("read", 80), ("lit", 0 if typed else 9), ("var", 0 if typed else 5), ("size", 0 if typed else 2),
             ("castvar", 4 if self.vars else 0), ("castweak", 2)]
        )
        if kind == "castweak":  # a cast of an untyped expression (`f32(i / 2)`, `i32(1 - N)`): Python numbers inside
            x = self.expr(1, False)
            return x if isinstance(x, Cast) and x.dtype == self.dtype else Cast(self.dtype, x)
        if kind == "read":
            r = self.read()
            if r is not None:
                return r
            kind = "castvar" if self.vars else "lit"
        if kind == "castvar":
            v = self.s.pick(self.vars)
            self.value_vars.add(v)
            return Cast(self.dtype, Var(v))
        if kind == "var" and self.vars:
            v = self.s.pick(self.vars)
            self.value_vars.add(v)
            return Var(v)
        if kind == "size" and self.env:
            return Size(self.s.pick(self.known_sizes()))
        if typed:  # no tensor could be read and no variables: a cast literal is typed
            return Cast(self.dtype, self.lit())
        return self.lit()

    def expr(self, depth, typed):
        """Random expression; typed=True guarantees the result carries the stage dtype."""
        if depth <= 0 or self.s.chance(30):
            return self.leaf(typed)
        isf = self.dtype not in INT_DTYPES
        kind = self.s.weighted(
            [
                ("arith", 38),
                ("div", 7),
                ("maxmin", 9),
                ("func", 22 if isf else 0),
                ("absneg", 6),
                ("select", 10),
                ("pow", 2 if isf else 0),
                ("roundtrip", 3 if isf else 0),
                ("inf", 1 if isf else 0),
            ]
        )
        d = depth - 1
        if kind in ("arith", "maxmin"):
            op = self.s.pick(["+", "*", "-"]) if kind == "arith" else self.s.pick(["max", "min"])
            ta = typed and self.s.chance(50)
            a = self.expr(d, ta)
            b = self.expr(d, typed and not a.typed)
            return Bin(op, a, b)
        if kind == "div":  # a / (abs(b) + 1): never divides by (almost) zero
            # `/` is true division (a float): untyped operands (`i / 2`) give a weak float, which adapts to a float
            # stage; an i32 stage truncates it back with a cast (`/` of an i32 value is an error: it casts first)
            a = self.expr(d, typed)
            b = self.expr(d - 1, False)
            op = self.s.weighted([("/", 70), ("//", 15), ("%", 15)])
            den = Bin("+", Un("abs", b), Lit(1))
            if op == "/" and self.dtype in INT_DTYPES:
                a, den = (Cast("f64", x) if x.typed else x for x in (a, den))  # f64: exact for any i32
                return Cast(self.dtype, Bin("/", a, den))
            return Bin(op, a, den)
        if kind == "absneg":
            return Un(self.s.pick(["abs", "neg"]), self.expr(d, typed))
        if kind == "select":
            c = self.cond(2)
            ta = typed and self.s.chance(50)
            a = self.expr(d, ta)
            b = self.expr(d, typed and not a.typed)
            return Sel(c, a, b)
        if kind == "pow":
            x = self.expr(d, typed)
            e = self.s.pick(["2", "3", "0.5", "-1"])
            if e == "0.5":
                return Bin("**", Un("abs", x), Lit(0.5))
            if e == "-1":
                return Bin("**", Bin("+", Un("abs", x), Lit(1)), Lit(-1))
            return Bin("**", x, Lit(int(e)))
        if kind == "roundtrip":
            other = "f64" if self.dtype == "f32" else "f32"
            saved, self.dtype = self.dtype, other
            inner = self.expr(d, True)
            self.dtype = saved
            return Cast(saved, inner)
        if kind == "inf":
            x = self.expr(d, True)
            return self.s.pick([Bin("max", x, Lit(-math.inf)), Bin("min", Lit(math.inf), x)])
        # func
        f = self.s.pick(["tanh", "exp", "log", "sqrt", "abs", "exp2"])
        x = self.expr(d, typed)
        if f == "exp":
            return Un("exp", Un("tanh", x))
        if f == "exp2":
            return Un("exp", Un("neg", Un("abs", x)))
        if f == "log":
            return Un("log", Bin("+", Un("abs", x), Lit(1)))
        if f == "sqrt":
            return Un("sqrt", Un("abs", x))
        return Un(f, x)

    def cond(self, depth):
        kind = self.s.weighted([("cmp", 64), ("and", 12 if depth else 0), ("or", 10 if depth else 0),
                                ("not", 8 if depth else 0), ("chain", 6), ("mask", 6 if self.extras else 0)])
        if kind == "mask":  # a bool tensor read (a mask input, or a bool stage), or bool(...) of an input's read
            masks = [t for t, (dt, _) in self.tensors.items() if dt == "bool"]
            can_new = len([d for d in self.inputs if d.name in INPUT_NAMES]) < len(INPUT_NAMES)
            if masks and self.s.chance(70):
                return self.plain_read(self.s.pick(masks))
            if can_new and self.s.chance(60):
                return self.plain_read(self.new_input(dtype="bool"))
            numbers = [d.name for d in self.inputs if d.name in INPUT_NAMES and d.dtype != "bool"]
            if numbers:  # an input: exact values, so that `!= 0` is the same in the kernel
                return Cast("bool", self.plain_read(self.s.pick(numbers)))
            kind = "cmp"
        if kind == "chain":
            xs = (self.cond_operand(), self.cond_operand(), self.cond_operand())
            return Chain((self.s.pick(["<", "<="]), self.s.pick(["<", "<="])), xs)
        if kind == "cmp":
            isf = self.dtype not in INT_DTYPES
            a = self.cond_operand()
            b = self.cond_operand()
            exact = not isf or (_int_exact(a) and _int_exact(b))
            ops = [">", "<", ">=", "<="] + (["==", "!="] if exact else [])
            return Cmp(self.s.pick(ops), a, b)
        if kind == "not":
            return Not(self.cond(depth - 1))
        return Logic(kind, self.cond(depth - 1), self.cond(depth - 1))

    def plain_read(self, name):
        """A read of tensor `name` (its dtype as it is) at affine indices."""
        dims, _ = self.tensor_dims(name)
        idx, prev = [], []
        for d in dims:
            a = self.index(d, prev)
            idx.append(a)
            prev.extend(a.vars())
        return Read(name, tuple(idx))

    def cond_operand(self):
        if self.vars and self.s.chance(30):
            v = self.s.pick(self.vars)
            self.value_vars.add(v)
            return Var(v)
        if self.s.chance(25):
            return self.lit()
        return self.expr(1, False)

    # -- stages
    def stage(self, idx, must_read):
        s = self.s
        op = s.weighted([("=", 48), ("+=", 26), ("*=", 8), ("max=", 9), ("min=", 9)])
        nl = s.weighted([(1, 35), (2, 35), (0, 12), (3, 18)])
        nr = 0 if op == "=" else s.weighted([(1, 70), (2, 30)])
        nr = min(nr, 4 - nl)
        self.vars = LHS_VARS[:nl] + RED_VARS[:nr]
        self.placed, self.value_vars = set(), set()
        dtype = self.main
        if self.main in FLOAT_DTYPES and s.chance(10):
            dtype = "f64" if self.main == "f32" else "f32"
        self.dtype = dtype
        self.pending = list(must_read)
        if not self.inputs:  # a program needs at least one input
            self.pending.append(self.new_input())
        st = Stage(f"T{idx}", LHS_VARS[:nl], RED_VARS[:nr], op, dtype=dtype)
        if op == "=" and self.extras and s.chance(7):  # a bool stage: comparisons stored (numeric readers convert it)
            st.dtype, st.operand_dtype = "bool", dtype
            e = self.cond(2)
        else:
            e = self.expr(s.weighted([(2, 40), (1, 25), (3, 35)]), True)
        while self.pending:  # a must-read tensor that no leaf picked up
            r = self.read()
            if st.dtype == "bool":
                e = Logic(s.pick(["and", "or"]), e, Cmp(s.pick([">", "<="]), r, self.lit()))
            else:
                e = Bin(s.pick(["+", "*"]), e, r)
        # every reduction variable must occur on the right side
        for v in list(st.red):
            if v in self.placed or v in self.value_vars:
                continue
            r = self.read(min_rank=1, want_var=v)
            if r is None:
                st.red.remove(v)
            else:
                e = Bin(s.pick(["+", "*", "-"]), e, r)
        if not st.red and op != "=":
            st.op = op = "="
        if op == "*=":  # keep products near 1
            if dtype in SMALL_DTYPES and dtype[0] == "u":
                e = Bin("min", e, Lit(1))
            elif dtype in INT_DTYPES:
                e = Bin("max", Bin("min", e, Lit(1)), Lit(-1))
            else:
                e = Bin("+", Lit(1), Bin("*", Lit(0.25), Un("tanh", e)))
        st.expr = e
        self.vars = st.lhs + st.red
        self.ranges(st)
        st.compact_where = not s.chance(20)
        self.tensors[st.name] = (st.dtype, [SE.lit(n) for n in st.shape])
        return st

    # -- ranges
    def all_dims(self, st):
        """(Affine, extent) for every dimension of every read of the stage."""
        out = []
        for r in st.reads():
            _, dvals = self.tensor_dims(r.tensor)
            out += list(zip(r.idx, dvals))
        return out

    @staticmethod
    def bounds_for(k, rmin, rmax, D):
        """Largest [lo, hi] of v such that 0 <= k*v + r <= D-1 for every r in [rmin, rmax]."""
        if k > 0:
            return -(rmin // k), (D - 1 - rmax) // k  # ceil(-rmin/k), floor((D-1-rmax)/k)
        m = -k
        return -((D - 1 - rmax) // m), rmin // m

    def infer(self, st):
        """The DSL's range inference: rounds in which every index that is the only unknown of a dimension gets
        the largest range keeping that dimension in bounds for all values of the known indices (intersected
        over such dimensions); left-side indices start at 0.  Returns (ranges, offending left-side var)."""
        env = self.env
        ranges = {v: (lo.ev(env), hi.ev(env) - 1) for v, (lo, hi) in st.where.items()}
        dims = self.all_dims(st)
        while True:
            found = {}
            for a, D in dims:
                unknown = [v for v in a.vars() if v not in ranges]
                if len(unknown) != 1:
                    continue
                v = unknown[0]
                k = next(c.ev(env) for c, u in a.terms if u == v)
                rest = Affine(tuple((c, u) for c, u in a.terms if u != v), a.const)
                rmin, rmax = rest.bounds(env, ranges)
                lo, hi = self.bounds_for(k, rmin, rmax, D)
                if v in found:
                    lo, hi = max(lo, found[v][0]), min(hi, found[v][1])
                found[v] = (lo, hi)
            if not found:
                return ranges, None
            for v, (lo, hi) in found.items():
                if v in st.lhs:
                    if lo > 0:
                        return ranges, v
                    lo = 0
                ranges[v] = (lo, hi)

    def explicit_range(self, st, v, inferred):
        """Choose an explicit where range for v; returns (SE lo, SE hi-exclusive)."""
        s = self.s
        lhs = v in st.lhs
        lo = SE.lit(0)
        if not lhs:
            opts = [(SE.lit(0), 64), (SE.lit(1), 18), (SE.lit(-1), 8)]
            if "pad" in self.params:
                opts += [(SE.name("pad"), 6), (SE.name("pad", -1), 4)]
            lo = s.weighted(opts)
        lov = lo.ev(self.env)
        cands = []
        if inferred is not None and inferred[0] <= inferred[1]:
            cands.append(SE.lit(inferred[1] + 1))
        # symbolic candidates from plain accesses v + c into a dimension D
        for r in st.reads():
            dims, _ = self.tensor_dims(r.tensor)
            for a, dse in zip(r.idx, dims):
                if len(a.terms) == 1 and a.terms[0][1] == v and a.terms[0][0] == SE.lit(1):
                    base = dse - a.const
                    cands += [base, base + 1, base + 2, base - 1]
        for n in self.known_sizes():
            cands += [SE.name(n), SE.name(n) + 1, SE.name(n) + 2]
        cands += [SE.lit(k) for k in range(1, 5)]
        good = [c for c in cands if lov < c.ev(self.env) <= lov + self.max_extent]
        if not good:
            return lo, SE.lit(lov + s.int(1, 3))
        return lo, s.pick(good)

    def exact_uses_agree(self, st, v):
        """tensorlang (like TC) requires the dimensions that an inferred index reads plainly (`A[.., v, ..]`) to
        agree: the same size expression for inputs, the same extent for all tensors.  Otherwise use `where`."""
        sym, num = set(), set()
        for r in st.reads():
            dims, dvals = self.tensor_dims(r.tensor)
            is_input = any(d.name == r.tensor for d in self.inputs)
            for a, dse, dval in zip(r.idx, dims, dvals):
                if a.vars() != [v]:
                    continue
                # at build time the check is numeric: `st*v` with st=1 counts as a plain use
                if a.terms[0][0].ev(self.env) == 1 and a.const.ev(self.env) == 0:
                    num.add(dval)
                if is_input and a.terms[0][0] == SE.lit(1) and a.const == SE.lit(0):
                    sym.add((dse.const, tuple(sorted(dse.terms))))
        return len(sym) <= 1 and len(num) <= 1

    def ranges(self, st):
        """Decide which indices get an explicit `where` and compute every index's range."""
        s = self.s
        allv = st.lhs + st.red
        for v in allv:
            if s.chance(12):
                st.where[v] = self.explicit_range(st, v, None)
        while True:
            ranges, bad = self.infer(st)
            if bad is None:
                for v in allv:
                    if v in st.where:
                        continue
                    r = ranges.get(v)
                    if r is None or r[0] > r[1] or r[1] - r[0] >= self.max_extent or not self.exact_uses_agree(st, v):
                        bad = v
                        break
            if bad is None:
                # a read that may fall outside its tensor must involve a `where` index (padding), else it is an
                # error (the inferred ranges would be ambiguous)
                for a, D in self.all_dims(st):
                    lo, hi = a.bounds(self.env, ranges)
                    if (lo < 0 or hi > D - 1) and not any(v in st.where for v in a.vars()):
                        bad = s.pick(a.vars())
                        break
            if bad is None:
                st.ranges = ranges
                return
            st.where[bad] = self.explicit_range(st, bad, ranges.get(bad))

    # -- program
    def program(self):
        s = self.s
        self.env, self.params, self.inputs, self.tensors, self.index_ranges = {}, [], [], {}, {}
        self.main = s.weighted([("f32", 75), ("f64", 13), ("i32", 12), ("i64", 5 if self.extras else 0)])
        if self.small_ints:
            self.main = s.pick(list(SMALL_DTYPES))
        self.big = s.chance(8)  # the first size is large (16..33)
        self.max_extent = BIG_MAX_EXTENT if self.big else MAX_EXTENT
        self.mixed = s.chance(12)
        nst = s.weighted([(1, 30), (2, 40), (3, 30)])
        nout = 2 if nst >= 2 and s.chance(25) else 1
        out_names = [f"T{i}" for i in range(nst - nout, nst)]
        stages = []
        for i in range(nst):
            must = [f"T{i - 1}"] if i > 0 and f"T{i - 1}" not in out_names else []
            if i > 0 and not must and s.chance(50):
                must = [f"T{i - 1}"]
            stages.append(self.stage(i, must))
        prog = Program("prog", self.inputs, self.params, dict(self.env), stages, out_names,
                       index_ranges=dict(self.index_ranges))
        prog.text = self.render(prog)
        return prog

    def render(self, prog):
        s = self.s
        # a 0-d input is declared `X: f32[()]` (the DSL is parsed as Python, where `f32[]` is a syntax error)
        items = [f"{d.name}: {d.dtype}[{', '.join(x.render() for x in d.dims) or '()'}]" for d in prog.inputs]
        for p in prog.params:
            items.insert(s.int(0, len(items)), f"{p}: int")
        outs = prog.outputs[0] if len(prog.outputs) == 1 else "(" + ", ".join(prog.outputs) + ")"
        lines = [st.render() for st in prog.stages]
        if len(lines) > 1 and s.chance(20):  # stages may be written in any order
            perm = list(range(len(lines)))
            for i in range(len(perm) - 1, 0, -1):
                j = s.int(0, i)
                perm[i], perm[j] = perm[j], perm[i]
            lines = [lines[i] for i in perm]
        body = []
        for ln in lines:
            if s.chance(8):
                body.append("    # a comment line")
            if s.chance(5):
                body.append("")
            body.append("    " + ln + ("  # trailing comment" if s.chance(8) else ""))
        return f"def {prog.name}({', '.join(items)}) -> {outs}:\n" + "\n".join(body) + "\n"


def generate(src: Src, allow_rank0_inputs=True, extras=False, small_ints=False) -> Program:
    """A random program from the choices of `src`; `extras`: gathers, i64 and bool values too; `small_ints`: its
    stages and inputs in one of u8, i8, u16, i16, u32 and u64 (other inputs converted to it)."""
    return _Gen(src, allow_rank0_inputs, extras, small_ints).program()
