"""The loop IR: one representation for code generation, the cost model's features and the printer.

Expressions are immutable and carry a dtype ("i64" for indices, "f32", "f64", "i32", "bool"); statements
are For (serial, parallel, vectorized, unrolled), Store, Allocate, If, Let and Seq. Buffers are indexed
with one index per dimension (row-major), which keeps bounds checks and the printout readable.

>>> i = Var("i")
>>> X = Buffer("X", "f32", (4,), "input")
>>> print(For(i, const(0), const(4), Store(X, (i,), FloatImm(0.0, "f32"))))
for i in 0:4:
  X[i] = 0f
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from .symbolic import Sym


def _hash_once(cls):
    """Make the frozen dataclass `cls` compute its hash once per node (kept in the instance, never pickled):
    the generated hash walks the whole tree, and the bounds proof, the simplifier and CSE look expressions up in
    dicts over and over (a third of a lowering's hashing was re-hashing the same subtrees).

    >>> e = BinOp("+", Var("i"), const(1))
    >>> hash(e) == hash(BinOp("+", Var("i"), const(1))) and "_hash" in e.__dict__
    True
    >>> import pickle; "_hash" in pickle.loads(pickle.dumps(e)).__dict__
    False
    """
    fields_hash = cls.__hash__

    def __hash__(self):
        try:
            return self._hash
        except AttributeError:
            h = self.__dict__["_hash"] = fields_hash(self)  # the dict itself: the dataclass is frozen to setattr
            return h

    def __getstate__(self):  # a string's hash differs between processes: never carry the cached one along
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    cls.__hash__ = __hash__
    cls.__getstate__ = __getstate__
    return cls


# ---- expressions -------------------------------------------------------------------------------

class Expr:
    """Base class of IR expressions."""

    if TYPE_CHECKING:  # a field in some subclasses, a property computed from the operands in others
        @property
        def dtype(self) -> str: ...

    def __str__(self) -> str:
        return expr_str(self)


@_hash_once
@dataclass(frozen=True, eq=True)
class IntImm(Expr):
    """An integer constant."""

    value: int
    dtype: str = "i64"


@_hash_once
@dataclass(frozen=True, eq=True)
class FloatImm(Expr):
    """A floating-point constant. Two are equal when their bits are: -0.0 is not 0.0 (``1 / x`` tells them
    apart), and a NaN equals a NaN, so that a memo or CSE keyed by expressions never trades one for the other.

    >>> FloatImm(-0.0) == FloatImm(0.0), FloatImm(float("nan")) == FloatImm(float("nan"))
    (False, True)
    """

    value: float
    dtype: str = "f32"

    def __eq__(self, other) -> bool:
        return other.__class__ is FloatImm and self.dtype == other.dtype and \
            float(self.value).hex() == float(other.value).hex()

    def __hash__(self) -> int:
        return hash((float(self.value).hex(), self.dtype))


@_hash_once
@dataclass(frozen=True, eq=True)
class Var(Expr):
    """A loop or let variable."""

    name: str
    dtype: str = "i64"


@_hash_once
@dataclass(frozen=True, eq=True)
class BinOp(Expr):
    """`a op b` with op one of + - * / // % min max **; both operands have the result dtype."""

    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self) -> str:
        """The dtype of the operands, which is the result's."""
        return self.a.dtype


@_hash_once
@dataclass(frozen=True, eq=True)
class Cmp(Expr):
    """A comparison (< <= > >= == !=); dtype bool."""

    op: str
    a: Expr
    b: Expr
    dtype: str = "bool"


@_hash_once
@dataclass(frozen=True, eq=True)
class Logic(Expr):
    """`a and b`, `a or b`."""

    op: str
    a: Expr
    b: Expr
    dtype: str = "bool"


@_hash_once
@dataclass(frozen=True, eq=True)
class Not(Expr):
    """Logical negation."""

    a: Expr
    dtype: str = "bool"


@_hash_once
@dataclass(frozen=True, eq=True)
class Neg(Expr):
    """Arithmetic negation."""

    a: Expr

    @property
    def dtype(self) -> str:
        """The dtype of the operand."""
        return self.a.dtype


@_hash_once
@dataclass(frozen=True, eq=True)
class Call(Expr):
    """A math function: exp log sqrt tanh abs."""

    fn: str
    args: tuple
    dtype: str = "f32"


@_hash_once
@dataclass(frozen=True, eq=True)
class Select(Expr):
    """`cond ? t : f` (both sides are computed)."""

    cond: Expr
    t: Expr
    f: Expr

    @property
    def dtype(self) -> str:
        """The dtype of the `t` side (both sides have it)."""
        return self.t.dtype


@_hash_once
@dataclass(frozen=True, eq=True)
class Cast(Expr):
    """Convert to `dtype`."""

    dtype: str
    a: Expr


@_hash_once
@dataclass(frozen=True, eq=True)
class Buffer:
    """A named row-major array: an input, an output, or a temporary the function allocates."""

    name: str
    dtype: str
    shape: tuple
    role: str = "temp"

    @property
    def size(self) -> int:
        """The number of elements: the product of the shape (1 for a 0-d buffer)."""
        n = 1
        for d in self.shape:
            n *= d
        return n


@_hash_once
@dataclass(frozen=True, eq=True)
class Load(Expr):
    """`buffer[indices]`.

    `pad` says the program allows this read to fall outside the buffer (a `where`-widened range), where it
    reads 0; `guard[d]` is True for each dimension the bounds check could not prove in range: the code
    checks those dimensions and reads 0 outside.
    """

    buffer: Buffer
    indices: tuple
    pad: bool = False
    guard: tuple = ()

    @property
    def dtype(self) -> str:
        """The dtype of the buffer read."""
        return self.buffer.dtype


@_hash_once
@dataclass(frozen=True, eq=True)
class IndexCheck(Expr):
    """An index computed from data (a gathered index, `ids[t]` in `E[ids[t], d]`) checked against the extent of
    the dimension it indexes: `a` where 0 <= a < extent, else 0, and the kernel then reports an index error as it
    returns (number `site` of `tensorlang.program.gather_sites`, and the value of `a`). `when` (a condition; None:
    always) limits the report to where the value is used: an inlined stage read outside its domain computes values
    that are dropped.

    >>> ids = Buffer("ids", "i32", (8,), "input")
    >>> print(IndexCheck(Cast("i64", Load(ids, (Var("t"),))), 1000, 0))
    check(i64(ids[t]), 1000)
    """

    a: Expr
    extent: int
    site: int
    when: Expr | None = None
    dtype: str = "i64"


# ---- statements --------------------------------------------------------------------------------

class Stmt:
    """Base class of IR statements."""

    def __str__(self) -> str:
        return "\n".join(stmt_lines(self, 0))


@_hash_once
@dataclass(frozen=True, eq=True)
class Store(Stmt):
    """`buffer[indices] = value`."""

    buffer: Buffer
    indices: tuple
    value: Expr


@_hash_once
@dataclass(frozen=True, eq=True)
class For(Stmt):
    """`for var in lo:lo+extent`; kind is serial, parallel, vectorized or unrolled."""

    var: Var
    lo: Expr
    extent: Expr
    body: Stmt
    kind: str = "serial"


@_hash_once
@dataclass(frozen=True, eq=True)
class If(Stmt):
    """`if cond: then else: orelse`."""

    cond: Expr
    then: Stmt
    orelse: Stmt | None = None


@_hash_once
@dataclass(frozen=True, eq=True)
class Let(Stmt):
    """Bind `var = value` for `body`."""

    var: Var
    value: Expr
    body: Stmt


@_hash_once
@dataclass(frozen=True, eq=True)
class Allocate(Stmt):
    """A temporary buffer that lives for `body`."""

    buffer: Buffer
    body: Stmt


@_hash_once
@dataclass(frozen=True, eq=True)
class Seq(Stmt):
    """Statements one after another."""

    stmts: tuple


@dataclass(frozen=True)
class Func:
    """A lowered function: its parameters (inputs then outputs) and its body."""

    name: str
    params: tuple
    body: Stmt
    guards: int = field(default=0, compare=False)
    sizes: tuple = ()  # names of the symbolic sizes, passed (as i64, after the buffers) at run time

    def __str__(self) -> str:
        sig = ", ".join([f"{b.name}: {b.dtype}[{', '.join(str(d) for d in b.shape)}]" for b in self.params] +
                        [f"{n}: i64" for n in self.sizes])
        return "\n".join([f"def {self.name}({sig}):"] + stmt_lines(self.body, 1))


# ---- construction helpers ----------------------------------------------------------------------

def const(value: int | Sym, dtype: str = "i64") -> IntImm:
    """An integer constant (i64 unless said).

    >>> const(3).value
    3
    """
    # a Sym is a size known at run time, held where the value is (and computed as an int is)
    return IntImm(cast(int, value) if isinstance(value, Sym) else int(value), dtype)


def all_of(conds) -> Expr | None:
    """The conditions joined by `and`, left to right (None when there are none).

    >>> expr_str(all_of([Cmp("<", Var("i"), const(4)), Cmp(">=", Var("j"), const(0))]))
    'i < 4 and j >= 0'
    """
    out = None
    for c in conds:
        out = c if out is None else Logic("and", out, c)
    return out


def seq(*stmts: Stmt | None) -> Stmt:
    """A Seq of the statements that are not None, nested Seqs flattened; a single statement stays itself.

    >>> X = Buffer("X", "f32", (2,))
    >>> a, b = Store(X, (const(0),), FloatImm(1.0)), Store(X, (const(1),), FloatImm(2.0))
    >>> seq(a, None, Seq((b, a))).stmts == (a, b, a)
    True
    >>> seq(None, a) is a
    True
    """
    out: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            out.extend(s.stmts)
        else:
            out.append(s)
    return out[0] if len(out) == 1 else Seq(tuple(out))


# ---- printing ----------------------------------------------------------------------------------

_PREC = {"or": 1, "and": 2, "cmp": 3, "+": 4, "-": 4, "*": 5, "/": 5, "//": 5, "%": 5, "**": 6}


def _fmt_float(v: float, dtype: str) -> str:
    if v != v or v in (float("inf"), float("-inf")):
        return repr(float(v))
    text = repr(float(v))
    if text.endswith(".0"):
        text = text[:-2]
    return text + ("f" if dtype == "f32" else "")


def expr_str(e: Expr, prec: int = 0) -> str:
    """Readable text of an expression (Python-like, minimal parentheses); `prec` is the precedence of the operator
    around it, which decides whether it needs parentheses. f32 constants end in `f`.

    >>> expr_str(BinOp("*", BinOp("+", Var("i"), const(1)), FloatImm(2.0)))
    '(i + 1)*2f'
    """
    if isinstance(e, IntImm):
        return str(e.value)
    if isinstance(e, FloatImm):
        return _fmt_float(e.value, e.dtype)
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Load):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]" + \
            (" (0 outside)" if any(e.guard) else "")
    if isinstance(e, (BinOp, Cmp, Logic)):
        if isinstance(e, BinOp) and e.op in ("min", "max"):
            return f"{e.op}({expr_str(e.a)}, {expr_str(e.b)})"
        p = _PREC["cmp"] if isinstance(e, Cmp) else _PREC[e.op]
        sep = f" {e.op} " if isinstance(e, (Cmp, Logic)) or e.op in ("+", "-") else e.op
        text = f"{expr_str(e.a, p)}{sep}{expr_str(e.b, p + 1)}"
        return f"({text})" if p < prec else text
    if isinstance(e, Not):
        return f"not {expr_str(e.a, 7)}"
    if isinstance(e, Neg):
        return f"-{expr_str(e.a, 7)}"
    if isinstance(e, Call):
        return f"{e.fn}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, Select):
        return f"select({expr_str(e.cond)}, {expr_str(e.t)}, {expr_str(e.f)})"
    if isinstance(e, Cast):
        return f"{e.dtype}({expr_str(e.a)})"
    if isinstance(e, IndexCheck):
        when = "" if e.when is None else f", when {expr_str(e.when)}"
        return f"check({expr_str(e.a)}, {e.extent}{when})"
    raise TypeError(f"not an IR expression: {e!r}")


def stmt_lines(s: Stmt, depth: int) -> list[str]:
    """Readable lines of a statement, indented two spaces a level starting at level `depth`; loops that are not
    serial say their kind in a comment.

    >>> X = Buffer("X", "f32", (4,), "output")
    >>> stmt_lines(For(Var("i"), const(0), const(4), Store(X, (Var("i"),), FloatImm(0.0)), "vectorized"), 1)
    ['  for i in 0:4:  # vectorized', '    X[i] = 0f']
    """
    pad = "  " * depth
    if isinstance(s, Seq):
        return [line for x in s.stmts for line in stmt_lines(x, depth)]
    if isinstance(s, Store):
        idx = ", ".join(expr_str(i) for i in s.indices)
        return [f"{pad}{s.buffer.name}[{idx}] = {expr_str(s.value)}"]
    if isinstance(s, For):
        note = "" if s.kind == "serial" else f"  # {s.kind}"
        hi = expr_str(BinOp("+", s.lo, s.extent)) if not (isinstance(s.lo, IntImm) and s.lo.value == 0) \
            else expr_str(s.extent)
        lo = expr_str(s.lo)
        if isinstance(s.lo, IntImm) and isinstance(s.extent, IntImm):
            hi = str(s.lo.value + s.extent.value)
        return [f"{pad}for {s.var.name} in {lo}:{hi}:{note}"] + stmt_lines(s.body, depth + 1)
    if isinstance(s, If):
        out = [f"{pad}if {expr_str(s.cond)}:"] + stmt_lines(s.then, depth + 1)
        if s.orelse is not None:
            out += [f"{pad}else:"] + stmt_lines(s.orelse, depth + 1)
        return out
    if isinstance(s, Let):
        return [f"{pad}{s.var.name} = {expr_str(s.value)}"] + stmt_lines(s.body, depth)
    if isinstance(s, Allocate):
        b = s.buffer
        return [f"{pad}allocate {b.name}: {b.dtype}[{', '.join(str(d) for d in b.shape)}]"] + \
            stmt_lines(s.body, depth)
    raise TypeError(f"not an IR statement: {s!r}")


# ---- small passes --------------------------------------------------------------------------------

def expr_vars(e: Expr) -> set[str]:
    """Names of the variables an expression reads (loads' indices included).

    >>> A = Buffer("A", "f32", (4, 4))
    >>> sorted(expr_vars(BinOp("+", Load(A, (Var("i"), Var("j"))), Cast("f32", Var("k")))))
    ['i', 'j', 'k']
    """
    if isinstance(e, Var):
        return {e.name}
    if isinstance(e, (BinOp, Cmp, Logic)):
        return expr_vars(e.a) | expr_vars(e.b)
    if isinstance(e, (Neg, Not, Cast)):
        return expr_vars(e.a)
    if isinstance(e, Select):
        return expr_vars(e.cond) | expr_vars(e.t) | expr_vars(e.f)
    if isinstance(e, Call):
        return set().union(*(expr_vars(a) for a in e.args)) if e.args else set()
    if isinstance(e, Load):
        return set().union(*(expr_vars(i) for i in e.indices)) if e.indices else set()
    if isinstance(e, IndexCheck):
        return expr_vars(e.a) | (expr_vars(e.when) if e.when is not None else set())
    return set()


def loads(e: Expr):
    """Every Load in an expression (loads inside indices included).

    >>> X = Buffer("X", "f32", (4,))
    >>> [l.buffer.name for l in loads(BinOp("+", Load(X, (const(0),)), FloatImm(1.0)))]
    ['X']
    """
    if isinstance(e, Load):
        yield e
        for i in e.indices:
            yield from loads(i)
    elif isinstance(e, (BinOp, Cmp, Logic)):
        yield from loads(e.a)
        yield from loads(e.b)
    elif isinstance(e, (Neg, Not, Cast)):
        yield from loads(e.a)
    elif isinstance(e, Select):
        for x in (e.cond, e.t, e.f):
            yield from loads(x)
    elif isinstance(e, Call):
        for a in e.args:
            yield from loads(a)
    elif isinstance(e, IndexCheck):
        yield from loads(e.a)
        if e.when is not None:
            yield from loads(e.when)


def index_checks(s: Stmt):
    """Every IndexCheck in a statement (in indices, values, bounds and conditions).

    >>> ids, X = Buffer("ids", "i64", (4,), "input"), Buffer("X", "f32", (9,), "input")
    >>> Y = Buffer("Y", "f32", (4,), "output")
    >>> store = Store(Y, (Var("t"),), Load(X, (IndexCheck(Load(ids, (Var("t"),)), 9, 0),)))
    >>> [c.extent for c in index_checks(store)]
    [9]
    """
    stack = list(stmt_exprs(s))
    while stack:
        e = stack.pop()
        if isinstance(e, IndexCheck):
            yield e
        stack.extend(children(e))


def children(e: Expr) -> tuple:
    """The expressions directly inside `e` (a load's indices, a check's value and condition included).

    >>> len(children(BinOp("+", Var("i"), const(1))))
    2
    """
    if isinstance(e, (BinOp, Cmp, Logic)):
        return (e.a, e.b)
    if isinstance(e, (Neg, Not, Cast)):
        return (e.a,)
    if isinstance(e, Select):
        return (e.cond, e.t, e.f)
    if isinstance(e, Call):
        return tuple(e.args)
    if isinstance(e, Load):
        return tuple(e.indices)
    if isinstance(e, IndexCheck):
        return (e.a,) if e.when is None else (e.a, e.when)
    return ()


def stmt_exprs(s: Stmt):
    """The expressions of a statement and of the statements inside it: stores' indices and values, loops' bounds,
    conditions and Let values.

    >>> X = Buffer("X", "f32", (4,))
    >>> len(list(stmt_exprs(For(Var("i"), const(0), const(4), Store(X, (Var("i"),), FloatImm(0.0))))))
    4
    """
    if isinstance(s, Seq):
        for x in s.stmts:
            yield from stmt_exprs(x)
    elif isinstance(s, Store):
        yield from s.indices
        yield s.value
    elif isinstance(s, For):
        yield s.lo
        yield s.extent
        yield from stmt_exprs(s.body)
    elif isinstance(s, If):
        yield s.cond
        yield from stmt_exprs(s.then)
        if s.orelse is not None:
            yield from stmt_exprs(s.orelse)
    elif isinstance(s, Let):
        yield s.value
        yield from stmt_exprs(s.body)
    elif isinstance(s, Allocate):
        yield from stmt_exprs(s.body)


def stmt_buffers(s: Stmt) -> dict[str, Buffer]:
    """Every buffer a statement reads or writes (loads in indices, bounds and conditions included), by name.

    >>> X, Y = Buffer("X", "f32", (4,)), Buffer("Y", "f64", (4,))
    >>> sorted(stmt_buffers(Store(Y, (const(0),), Load(X, (const(1),)))))
    ['X', 'Y']
    """
    out: dict[str, Buffer] = {}

    def exprs(*es):
        for e in es:
            out.update((ld.buffer.name, ld.buffer) for ld in loads(e))

    def walk(x):
        if isinstance(x, Seq):
            for y in x.stmts:
                walk(y)
        elif isinstance(x, Store):
            out[x.buffer.name] = x.buffer
            exprs(x.value, *x.indices)
        elif isinstance(x, For):
            exprs(x.lo, x.extent)
            walk(x.body)
        elif isinstance(x, If):
            exprs(x.cond)
            walk(x.then)
            if x.orelse is not None:
                walk(x.orelse)
        elif isinstance(x, Let):
            exprs(x.value)
            walk(x.body)
        elif isinstance(x, Allocate):
            walk(x.body)

    walk(s)
    return out


def map_expr(e: Expr, fn) -> Expr:
    """`e` rebuilt bottom-up with `fn` applied to every node, its children first (loads' indices and calls'
    arguments included).

    >>> X = Buffer("X", "f32", (4,))
    >>> e = BinOp("+", Load(X, (Var("i"),)), FloatImm(1.0))
    >>> expr_str(map_expr(e, lambda n: Var("j") if n == Var("i") else n))
    'X[j] + 1f'
    """
    if isinstance(e, (BinOp, Cmp, Logic)):
        e = type(e)(e.op, map_expr(e.a, fn), map_expr(e.b, fn))
    elif isinstance(e, (Neg, Not)):
        e = type(e)(map_expr(e.a, fn))
    elif isinstance(e, Select):
        e = Select(map_expr(e.cond, fn), map_expr(e.t, fn), map_expr(e.f, fn))
    elif isinstance(e, Cast):
        e = Cast(e.dtype, map_expr(e.a, fn))
    elif isinstance(e, Call):
        e = Call(e.fn, tuple(map_expr(a, fn) for a in e.args), e.dtype)
    elif isinstance(e, Load):
        e = Load(e.buffer, tuple(map_expr(i, fn) for i in e.indices), e.pad, e.guard)
    elif isinstance(e, IndexCheck):
        e = IndexCheck(map_expr(e.a, fn), e.extent, e.site, None if e.when is None else map_expr(e.when, fn))
    return fn(e)


def substitute(e: Expr, mapping: Mapping[str, Expr]) -> Expr:
    """`e` with variables replaced by expressions (integer index expressions and conditions; indices computed
    from data included: the loads and checks in them).

    >>> str(substitute(BinOp("+", Var("i"), const(1)), {"i": Var("j")}))
    'j + 1'
    """
    if isinstance(e, Var):
        return mapping.get(e.name, e)
    if isinstance(e, (BinOp, Cmp, Logic)):
        return type(e)(e.op, substitute(e.a, mapping), substitute(e.b, mapping))
    if isinstance(e, (Neg, Not)):
        return type(e)(substitute(e.a, mapping))
    if isinstance(e, Select):
        return Select(substitute(e.cond, mapping), substitute(e.t, mapping), substitute(e.f, mapping))
    if isinstance(e, Cast):
        return Cast(e.dtype, substitute(e.a, mapping))
    if isinstance(e, (Load, Call, IndexCheck)):
        return map_expr(e, lambda n: mapping.get(n.name, n) if isinstance(n, Var) else n)
    return e


def drop_unused_lets(s: Stmt) -> tuple[Stmt, set[str]]:
    """`s` without the Lets whose variable nothing reads, and the variables `s` reads.

    >>> store = Store(Buffer("X", "f32", (1,)), (const(0),), FloatImm(0.0))
    >>> body, used = drop_unused_lets(Let(Var("m"), const(1), store))
    >>> isinstance(body, Store), used
    (True, set())
    """
    if isinstance(s, Seq):
        parts = [drop_unused_lets(x) for x in s.stmts]
        return Seq(tuple(p for p, _ in parts)), set().union(*(u for _, u in parts)) if parts else set()
    if isinstance(s, Store):
        used = expr_vars(s.value)
        for i in s.indices:
            used |= expr_vars(i)
        return s, used
    if isinstance(s, For):
        body, used = drop_unused_lets(s.body)
        used.discard(s.var.name)
        return For(s.var, s.lo, s.extent, body, s.kind), used | expr_vars(s.lo) | expr_vars(s.extent)
    if isinstance(s, If):
        then, used = drop_unused_lets(s.then)
        orelse = None
        if s.orelse is not None:
            orelse, u2 = drop_unused_lets(s.orelse)
            used |= u2
        return If(s.cond, then, orelse), used | expr_vars(s.cond)
    if isinstance(s, Let):
        body, used = drop_unused_lets(s.body)
        if s.var.name not in used:
            return body, used
        used.discard(s.var.name)
        return Let(s.var, s.value, body), used | expr_vars(s.value)
    if isinstance(s, Allocate):
        body, used = drop_unused_lets(s.body)
        return Allocate(s.buffer, body), used
    raise TypeError(f"not an IR statement: {s!r}")
