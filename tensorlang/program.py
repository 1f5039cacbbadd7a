"""The parsed program: tensors, stages and the Einstein expressions they compute.

An `Op` is what `tl.op(SOURCE)` returns: sizes stay symbolic. Index expressions are affine in the
index variables with size polynomials as coefficients; value expressions carry their dtype and the
source range they came from, so that every later error can point at the text.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field

from .errors import SourceLoc
from .sizes import SizePoly

REDUCE_OPS = ("+", "*", "max", "min")


@dataclass(frozen=True)
class IndexExpr:
    """An affine index expression: sum of coefficient * index variable, plus a constant.

    >>> e = IndexExpr.var("h") * SizePoly.const(2) + IndexExpr.var("r")
    >>> str(e)
    '2*h + r'
    >>> e.evaluate({})
    ({'h': 2, 'r': 1}, 0)
    """

    terms: tuple[tuple[str, SizePoly], ...] = ()
    const: SizePoly = SizePoly()

    @staticmethod
    def var(name: str) -> IndexExpr:
        """The index variable `name`."""
        return IndexExpr(((name, SizePoly.const(1)),))

    @staticmethod
    def size(poly: SizePoly) -> IndexExpr:
        """A constant (size polynomial) index."""
        return IndexExpr((), poly)

    def variables(self) -> tuple[str, ...]:
        """The index variables with a non-zero coefficient, sorted."""
        return tuple(v for v, _ in self.terms)

    def __add__(self, other: IndexExpr) -> IndexExpr:
        d = dict(self.terms)
        for v, c in other.terms:
            d[v] = d.get(v, SizePoly()) + c
        return IndexExpr(tuple(sorted((v, c) for v, c in d.items() if c.terms)), self.const + other.const)

    def __neg__(self) -> IndexExpr:
        return IndexExpr(tuple((v, -c) for v, c in self.terms), -self.const)

    def __sub__(self, other: IndexExpr) -> IndexExpr:
        return self + (-other)

    def __mul__(self, k: SizePoly) -> IndexExpr:
        return IndexExpr(tuple((v, c * k) for v, c in self.terms if (c * k).terms), self.const * k)

    def evaluate(self, sizes: dict[str, int]) -> tuple[dict[str, int], int]:
        """Bind sizes: integer coefficients per variable and an integer constant."""
        coeffs = {v: c.evaluate(sizes) for v, c in self.terms}
        return {v: c for v, c in coeffs.items() if c != 0}, self.const.evaluate(sizes)

    def is_plain_var(self) -> str | None:
        """The variable name when the expression is exactly one variable, else None."""
        if not self.const.terms and len(self.terms) == 1 and self.terms[0][1] == SizePoly.const(1):
            return self.terms[0][0]
        return None

    def __str__(self) -> str:
        parts = []
        for v, c in self.terms:
            if c == SizePoly.const(1):
                parts.append(v)
            elif c == SizePoly.const(-1):
                parts.append(f"-{v}")
            elif c.is_constant() or len(c.terms) == 1:
                parts.append(f"{c}*{v}")
            else:
                parts.append(f"({c})*{v}")
        if self.const.terms or not parts:
            parts.append(str(self.const))
        text = parts[0]
        for p in parts[1:]:
            text += f" - {p[1:]}" if p.startswith("-") else f" + {p}"
        return text


# ---- value expressions -------------------------------------------------------------------------
# Every node has `dtype` (the DSL dtype name) and `weak` (a literal, size or index value whose type
# adapts to its context, like a Python number in numpy).


@dataclass(frozen=True)
class Expr:
    """Base of value expressions."""

    dtype: str
    weak: bool
    loc: SourceLoc = field(compare=False, hash=False)


@dataclass(frozen=True)
class GatherIndex:
    """One index of a read that is a value read from another tensor (`ids[t]` in `E[ids[t], d]`, `clamp(X[i], 0,
    255)`): an integer value expression (i32 or i64). It may take any value of its dimension, so it counts as a read
    of the whole dimension (for range inference, bounds and placement); a value outside the dimension is a run-time
    `tl.IndexError`, never a read outside the tensor.

    >>> import tensorlang as tl
    >>> a = tl.op("def e(E: f32[V, D], ids: i64[T]) -> Y:\\n    Y[t, d] = E[ids[t], d]").stage("Y").rhs
    >>> str(a.indices[0]), a.indices[0].value.dtype, a.indices[0].is_plain_var()
    ('ids[t]', 'i64', None)
    """

    value: Expr
    text: str = field(default="", compare=False, hash=False)

    def is_plain_var(self) -> None:
        """None: a gathered index is never one index variable."""
        return None

    def __str__(self) -> str:
        return self.text


#: The functions a boundary index may use (see :class:`BoundaryIndex`).
BOUNDARY_FUNCS = ("clamp", "min", "max", "abs")


@dataclass(frozen=True)
class BoundaryIndex:
    """One index of a read that a boundary condition keeps inside its dimension: `clamp`, `min`, `max` and `abs`
    nested over affine forms in index variables and sizes (`I[clamp(y - 1, 0, H - 1), x]`, a mirror
    `I[H - 1 - abs(H - 1 - abs(y)), x]`), and floor division and remainder by positive integers (an upsampling
    `I[y // 2, x // 2]`). `value` is that integer expression (IntValue leaves, integer literals, `+ - *`, `//` and
    `%` by integers, and the calls). It bounds no index variable (their ranges come from the left side, other reads and
    `where`); binding proves it inside its dimension by interval arithmetic, or refuses the program.

    >>> import tensorlang as tl
    >>> a = tl.op("def b(I: f32[H]) -> O:\\n    O[y] = I[clamp(y - 1, 0, H - 1)] + I[y]").stage("O").rhs.a
    >>> str(a.indices[0]), a.indices[0].variables(), a.indices[0].interval({"H": 5}, {"y": (0, 4)})
    ('clamp(y - 1, 0, H - 1)', ('y',), (0, 3))
    """

    value: Expr
    text: str = field(default="", compare=False, hash=False)

    def is_plain_var(self) -> None:
        """None: a boundary index is never one index variable."""
        return None

    def variables(self) -> tuple[str, ...]:
        """The index variables it uses, sorted."""
        return tuple(sorted({v for n in walk(self.value) if isinstance(n, IntValue) for v in n.expr.variables()}))

    def interior(self) -> IndexExpr:
        """The affine form the index takes away from the borders, where every clamp, min and max passes its first
        argument that moves (and abs its argument): how the read moves with the loops for the auto-scheduler.

        >>> import tensorlang as tl
        >>> op = tl.op("def m(I: f32[H]) -> O:\\n    O[y] = I[H - 1 - abs(H - 1 - abs(y - 1))] + I[y]")
        >>> str(op.stage("O").rhs.a.indices[0].interior())
        'y - 1'
        """
        def affine(e: Expr) -> IndexExpr:
            if isinstance(e, IntValue):
                return e.expr
            if isinstance(e, Unary):
                return -affine(e.x)
            if isinstance(e, Binary):
                a, b = affine(e.a), affine(e.b)
                if e.op in ("//", "%"):  # moves at most as its dividend does
                    return a
                if e.op == "*":
                    return a * b.const if a.terms or not b.terms else b * a.const
                return a + b if e.op == "+" else a - b
            assert isinstance(e, Call), e
            args = [affine(x) for x in e.args]
            return next((a for a in args if a.terms), args[0])
        return affine(self.value)

    def interval(self, sizes: dict[str, int], ranges: dict[str, tuple[int, int]]) -> tuple[int, int]:
        """Inclusive bounds of the index for sizes `sizes` and index variables in `ranges` (inclusive bounds).

        >>> import tensorlang as tl
        >>> op = tl.op("def m(I: f32[H]) -> O:\\n    O[y] = I[H - 1 - abs(H - 1 - abs(y - 1))] + I[y]")
        >>> op.stage("O").rhs.a.indices[0].interval({"H": 4}, {"y": (0, 3)})
        (0, 2)
        """
        return _boundary_interval(self.value, sizes, ranges)

    def __str__(self) -> str:
        return self.text


def _boundary_interval(e: Expr, sizes: dict, ranges: dict) -> tuple[int, int]:
    """Interval arithmetic over a boundary index's expression (see :meth:`BoundaryIndex.interval`)."""
    if isinstance(e, Literal):
        return int(e.value), int(e.value)
    if isinstance(e, IntValue):
        coeffs, lo = e.expr.evaluate(sizes)
        hi = lo
        for v, c in coeffs.items():
            a, b = ranges[v]
            lo, hi = lo + min(c * a, c * b), hi + max(c * a, c * b)
        return lo, hi
    if isinstance(e, Unary):  # negation
        a, b = _boundary_interval(e.x, sizes, ranges)
        return -b, -a
    if isinstance(e, Binary):
        (a0, a1), (b0, b1) = _boundary_interval(e.a, sizes, ranges), _boundary_interval(e.b, sizes, ranges)
        if e.op == "//":  # by a positive integer (the parser's rule): monotone
            return a0 // b0, a1 // b0
        if e.op == "%":
            return (a0 % b0, a1 % b0) if a0 // b0 == a1 // b0 else (0, b0 - 1)
        if e.op == "+":
            return a0 + b0, a1 + b1
        if e.op == "-":
            return a0 - b1, a1 - b0
        ps = [a0 * b0, a0 * b1, a1 * b0, a1 * b1]
        return min(ps), max(ps)
    assert isinstance(e, Call), e  # the parser builds nothing else
    args = [_boundary_interval(x, sizes, ranges) for x in e.args]
    if e.fn == "abs":
        a, b = args[0]
        return (0 if a <= 0 <= b else min(abs(a), abs(b))), max(abs(a), abs(b))
    if e.fn in ("max", "min"):  # a + b constant (a mirror's `max(x, -1 - x)`): max >= ceil(c/2), min <= floor(c/2)
        total = _linear_value(Binary("i32", True, e.loc, "+", e.args[0], e.args[1]), sizes)
        const = total[1] if total is not None and not any(total[0].values()) else None
        if e.fn == "max":
            lo = max(args[0][0], args[1][0])
            return (lo if const is None else max(lo, -(-const // 2))), max(args[0][1], args[1][1])
        hi = min(args[0][1], args[1][1])
        return min(args[0][0], args[1][0]), (hi if const is None else min(hi, const // 2))
    (x0, x1), (l0, l1), (h0, h1) = args  # clamp(x, lo, hi) = min(max(x, lo), hi)
    return min(max(x0, l0), h0), min(max(x1, l1), h1)


def _linear_value(e: Expr, sizes: dict) -> tuple[dict, int] | None:
    """A boundary index's expression as a sum of integer multiples of index variables and of its calls (each call
    an atom), plus a constant; None where a product has no constant side."""
    if isinstance(e, Literal):
        return {}, int(e.value)
    if isinstance(e, IntValue):
        coeffs, const = e.expr.evaluate(sizes)
        return dict(coeffs), const
    if isinstance(e, Call) or (isinstance(e, Binary) and e.op in ("//", "%")):
        return {e: 1}, 0
    if isinstance(e, Unary):
        x = _linear_value(e.x, sizes)
        return None if x is None else ({k: -c for k, c in x[0].items()}, -x[1])
    assert isinstance(e, Binary), e
    a, b = _linear_value(e.a, sizes), _linear_value(e.b, sizes)
    if a is None or b is None:
        return None
    if e.op == "*":
        (ka, ca), (kb, cb) = (a, b) if not b[0] else (b, a)
        return ({k: c * cb for k, c in ka.items()}, ca * cb) if not kb else None
    sign = 1 if e.op == "+" else -1
    out = dict(a[0])
    for k, c in b[0].items():
        out[k] = out.get(k, 0) + sign * c
    return out, a[1] + sign * b[1]


@dataclass(frozen=True)
class Access(Expr):
    """A read `tensor[indices]`; an index is affine (IndexExpr), a value read from other tensors (GatherIndex) or
    a boundary condition over affine forms (BoundaryIndex)."""

    tensor: str = ""
    indices: tuple[IndexExpr | GatherIndex | BoundaryIndex, ...] = ()
    index_locs: tuple[SourceLoc, ...] = field(default=(), compare=False, hash=False)


@dataclass(frozen=True)
class Literal(Expr):
    """An int or float constant (`inf` included)."""

    value: float | int = 0


@dataclass(frozen=True)
class IntValue(Expr):
    """An integer computed from index variables and sizes, used as a value (`select(i == j, 1.0, 0.0)`)."""

    expr: IndexExpr = IndexExpr()


@dataclass(frozen=True)
class Unary(Expr):
    """`-x` (op "neg") or `not x` (op "not")."""

    op: str
    x: Expr


@dataclass(frozen=True)
class Binary(Expr):
    """Arithmetic (+ - * / // % **), comparison (< <= > >= == !=) or logic (and or).

    `operand_dtype` is the dtype both operands are computed in (for comparisons it differs from the result).
    """

    op: str
    a: Expr
    b: Expr
    operand_dtype: str = ""


@dataclass(frozen=True)
class Call(Expr):
    """A function: exp log sqrt tanh abs max min clamp select, or a cast f32 f64 i32 i64 bool."""

    fn: str = ""
    args: tuple[Expr, ...] = ()
    operand_dtype: str = ""


def walk(e: Expr):
    """Yield `e` and every sub-expression, parents first (a read, then the nodes of its gathered and boundary
    indices).

    >>> [type(x).__name__ for x in walk(Literal("f32", True, None, 1.0))]
    ['Literal']
    """
    yield e
    if isinstance(e, Access):
        for ix in e.indices:
            if isinstance(ix, (GatherIndex, BoundaryIndex)):
                yield from walk(ix.value)
    elif isinstance(e, Unary):
        yield from walk(e.x)
    elif isinstance(e, Binary):
        yield from walk(e.a)
        yield from walk(e.b)
    elif isinstance(e, Call):
        for a in e.args:
            yield from walk(a)


def index_vars_of(e: Expr) -> list[str]:
    """Index variables a value expression uses (in reads' indices and as values), in order of first appearance.

    >>> import tensorlang as tl
    >>> index_vars_of(tl.op("def t(A: f32[N, M]) -> B:\\n    B[j, i] = A[i, j]").stage("B").rhs)
    ['i', 'j']
    """
    seen: dict[str, None] = {}
    for node in walk(e):
        if isinstance(node, Access):
            for ix in affine_indices(node):
                for v in ix.variables():
                    seen.setdefault(v)
        elif isinstance(node, IntValue):
            for v in node.expr.variables():
                seen.setdefault(v)
    return list(seen)


def affine_indices(a: Access) -> list[IndexExpr]:
    """The affine indices of a read (its gathered and boundary ones left out: walk() reaches what is inside those).

    >>> import tensorlang as tl
    >>> [str(ix) for ix in affine_indices(tl.op("def e(E: f32[V, D], ids: i32[T]) -> Y:\\n"
    ...                                          "    Y[t, d] = E[ids[t], d]").stage("Y").rhs)]
    ['d']
    """
    return [ix for ix in a.indices if isinstance(ix, IndexExpr)]


# ---- program -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """A tensor input `NAME: DTYPE[SIZES]`."""

    name: str
    dtype: str
    shape: tuple[SizePoly, ...]
    loc: SourceLoc = field(compare=False, hash=False)

    def __str__(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(str(s) for s in self.shape)}]"


@dataclass(frozen=True)
class WhereRange:
    """An explicit range `var in lo:hi` from a `where` clause."""

    lo: SizePoly
    hi: SizePoly
    loc: SourceLoc = field(compare=False, hash=False)


@dataclass(frozen=True)
class Stage:
    """One statement: `name[lhs_vars] reduce_op= rhs where ...`; `reduce_op` is None for `=`."""

    name: str
    dtype: str
    lhs_vars: tuple[str, ...]
    reduce_op: str | None
    rhs: Expr
    red_vars: tuple[str, ...]
    where: dict[str, WhereRange] = field(compare=False, hash=False)
    loc: SourceLoc = field(compare=False, hash=False)
    var_locs: dict[str, SourceLoc] = field(compare=False, hash=False)
    text: str = field(default="", compare=False, hash=False)
    # a scatter (`H[b := I[y, x]] += 1`): the left side as an access whose data-dependent indices are GatherIndex
    lhs: Access | None = None

    @property
    def all_vars(self) -> tuple[str, ...]:
        """Left-side variables then reduction variables: the default loop order."""
        return self.lhs_vars + self.red_vars

    @property
    def scatter_vars(self) -> tuple[str, ...]:
        """The left-side variables named by an index computed from data (`b` in `H[b := I[y, x]] += 1`): they
        size the output and have no loop.

        >>> import tensorlang as tl
        >>> tl.op("def h(I: i32[N]) -> H:\\n    H[b := I[i]] += 1 where b in 0:8").stage("H").scatter_vars
        ('b',)
        """
        if self.lhs is None:
            return ()
        return tuple(v for v, ix in zip(self.lhs_vars, self.lhs.indices) if isinstance(ix, GatherIndex))

    @property
    def loop_vars(self) -> tuple[str, ...]:
        """The index variables that get loops: :attr:`all_vars` less :attr:`scatter_vars`."""
        return tuple(v for v in self.all_vars if v not in self.scatter_vars)

    def values(self) -> list[Expr]:
        """The right side, then the data-dependent left indices of a scatter."""
        left = [ix.value for ix in self.lhs.indices if isinstance(ix, GatherIndex)] if self.lhs is not None else []
        return [self.rhs, *left]

    def accesses(self) -> list[Access]:
        """Every read in the right side, in source order, then those in a scatter's left indices."""
        return [n for e in self.values() for n in walk(e) if isinstance(n, Access)]

    def reads(self) -> list[str]:
        """Names of the tensors read, without repeats, in source order."""
        return list(dict.fromkeys(a.tensor for a in self.accesses()))


def scan_axis(stage: Stage) -> tuple[str, tuple[int, ...]] | None:
    """The recurrence of a stage that reads itself (a scan): its scan index and the offsets of its reads of itself
    along it (each read `S[.., v - c, ..]` with every other index the left side's), or None for any other stage.
    The parser refuses every other read of a stage by itself.

    >>> import tensorlang as tl
    >>> scan_axis(tl.op("def p(X: f32[N]) -> S:\\n    S[i] = S[i - 1] + S[i - 2] + X[i]").stage("S"))
    ('i', (1, 2))
    >>> scan_axis(tl.op("def f(X: f32[N]) -> Y:\\n    Y[i] = X[i]").stage("Y")) is None
    True
    """
    offsets: dict[int, None] = {}
    axis = None
    for a in stage.accesses():
        if a.tensor != stage.name:
            continue
        for v, ix in zip(stage.lhs_vars, a.indices):
            if isinstance(ix, IndexExpr) and ix.is_plain_var() != v:
                axis = v
                offsets.setdefault(-ix.const.evaluate({}))
    return None if axis is None else (axis, tuple(offsets))


@dataclass(frozen=True)
class GatherSite:
    """A gathered index of the program: dimension `dim` of the read `access` (of `tensor`) in stage `stage`."""

    stage: str
    tensor: str
    dim: int
    access: Access = field(compare=False, hash=False)
    write: bool = False  # a scatter's left index (`H[b := I[y, x]] += 1`), not a read

    def message(self, op_name: str, value: int, extent: int) -> str:
        """The error for `value` outside the dimension's `extent` (what `tl.IndexError` says).

        >>> import tensorlang as tl
        >>> op = tl.op("def e(E: f32[V, D], ids: i32[T]) -> Y:\\n    Y[t, d] = E[ids[t], d]")
        >>> gather_sites(op)[0].message("e", -1, 10)
        "e: index -1 is out of range for dimension 0 of E (size 10) in stage Y's read E[ids[t], d] (line 2, column 15)"
        """
        a = self.access
        text = f"{a.tensor}[{', '.join(str(ix) for ix in a.indices)}]"
        where = f" (line {a.loc.line}, column {a.loc.col})" if a.loc is not None else ""
        what = "update" if self.write else "read"
        return (f"{op_name}: index {value} is out of range for dimension {self.dim} of {self.tensor} (size {extent}) "
                f"in stage {self.stage}'s {what} {text}{where}")


def gather_sites(op: Op) -> tuple[GatherSite, ...]:
    """Every gathered index of `op`, numbered in order (stages in program order, reads in source order,
    dimensions in order): a kernel reports an index out of range by its number here.

    >>> import tensorlang as tl
    >>> op = tl.op("def g(A: f32[N, M], r: i32[K], c: i32[K]) -> Y:\\n    Y[k] = A[r[k], c[k]]")
    >>> [(s.stage, s.tensor, s.dim) for s in gather_sites(op)]
    [('Y', 'A', 0), ('Y', 'A', 1)]
    """
    return tuple(GatherSite(s.name, a.tensor, d, a, a is s.lhs) for s in op.stages
                 for a in s.accesses() + ([s.lhs] if s.lhs is not None else [])
                 for d, ix in enumerate(a.indices) if isinstance(ix, GatherIndex))


@dataclass(frozen=True)
class Op:
    """A parsed and checked program; sizes stay symbolic until `tl.build(op, **sizes)`.

    >>> import tensorlang as tl
    >>> op = tl.op('''
    ... def matmul(A: f32[M, K], B: f32[K, N]) -> C:
    ...     C[m, n] += A[m, k] * B[k, n]
    ... ''')
    >>> op.inputs, op.outputs, op.size_names
    (('A', 'B'), ('C',), ('M', 'K', 'N'))
    """

    name: str
    source: str = field(compare=False, hash=False, repr=False)
    params: tuple[Param, ...]
    int_params: tuple[str, ...]
    stages: tuple[Stage, ...]
    outputs: tuple[str, ...]
    size_names: tuple[str, ...]

    @property
    def inputs(self) -> tuple[str, ...]:
        """Input tensor names, in parameter order (a tuple, as `outputs` is)."""
        return tuple(p.name for p in self.params)

    def param(self, name: str) -> Param | None:
        """The input called `name`, or None."""
        return next((p for p in self.params if p.name == name), None)

    def stage(self, name: str) -> Stage | None:
        """The stage called `name`, or None."""
        return next((s for s in self.stages if s.name == name), None)

    @functools.cached_property
    def structure(self) -> Structure:
        """What the program computes with every name replaced by its position: equal for two programs that differ
        only in names (of the program, inputs, stages, sizes and index variables), spacing and comments.

        >>> import tensorlang as tl
        >>> a = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
        >>> b = tl.op("def matmul(X: f32[P, Q], Y: f32[Q, R]) -> Z:  # mine\\n    Z[m, n] += X[m, q] * Y[q, n]")
        >>> a.structure.key == b.structure.key, a.key == b.key
        (True, False)
        """
        return _structure(self, arithmetic=True)

    @functools.cached_property
    def loop_structure(self) -> Structure:
        """:attr:`structure` without the arithmetic between the reads: the stages, their dtypes, index variables,
        ranges and reduction operators, the inputs and every read (tensor and indices), in order. What a schedule
        arranges (loops and memory), so a hand schedule fits every program of the same loop structure.

        >>> import tensorlang as tl
        >>> a = tl.op("def f(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0")
        >>> b = tl.op("def g(A: f32[M]) -> B:\\n    B[j] = exp(A[j]) + 1.0")
        >>> a.loop_structure.key == b.loop_structure.key, a.structure.key == b.structure.key
        (True, False)
        """
        return _structure(self, arithmetic=False)

    @property
    def key(self) -> str:
        """A hash of the normalized program text (comments and blank lines removed, spacing folded)."""
        lines = []
        for line in self.source.splitlines():
            text = line.split("#", 1)[0].strip()
            if text:
                lines.append(" ".join(text.split()))
        return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]

    def lower(self, **sizes: int) -> str:
        """The loop IR of the default schedule for these sizes, as text.

        >>> import tensorlang as tl
        >>> print(tl.op("def t(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0").lower(N=4))  # doctest: +ELLIPSIS
        def t(X: f32[4], Y: f32[4]):
          for i in 0:4:
            Y[i] = X[i]*2f
        """
        from .schedule import Schedule

        return Schedule(self, sizes).lower()

    def __str__(self) -> str:
        return self.source.strip()


# ---- structure -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Renaming:
    """How the names of one program map onto those of another of the same structure: `tensors` (inputs and
    stages), `sizes`, and `axes` (each stage's index variables, under the first program's stage name).

    >>> import tensorlang as tl
    >>> a = tl.op("def f(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0")
    >>> r = a.structure.renaming(tl.op("def g(A: f32[M]) -> B:\\n    B[j] = A[j] * 2.0").structure)
    >>> r.tensors, r.sizes, r.axes
    ({'X': 'A', 'Y': 'B'}, {'N': 'M'}, {'Y': {'i': 'j'}})
    >>> r.is_identity()
    False
    """

    tensors: dict[str, str]
    sizes: dict[str, str]
    axes: dict[str, dict[str, str]]

    def is_identity(self) -> bool:
        """Whether every name maps to itself.

        >>> Renaming({"A": "A"}, {}, {"A": {"i": "i"}}).is_identity()
        True
        """
        return all(k == v for m in (self.tensors, self.sizes, *self.axes.values()) for k, v in m.items())


@dataclass(frozen=True)
class Structure:
    """A program's structure (:attr:`Op.structure`, :attr:`Op.loop_structure`): `key`, a hash of the program with
    every name replaced by its position, and the names in that order: `tensors` (the inputs in order, then the
    stages in the order they run), `sizes` (in order of declaration) and `axes` (each stage's index variables:
    left side, then reduction indices).

    >>> import tensorlang as tl
    >>> st = tl.op("def f(X: f32[N, D]) -> Y:\\n    Y[n] += X[n, d]").structure
    >>> st.tensors, st.sizes, st.axes, len(st.key)
    (('X', 'Y'), ('N', 'D'), (('n', 'd'),), 16)
    """

    key: str
    tensors: tuple[str, ...]
    sizes: tuple[str, ...]
    axes: tuple[tuple[str, ...], ...]

    def renaming(self, other: Structure) -> Renaming | None:
        """The names of this program mapped onto those of `other`, or None when the structures differ.

        >>> import tensorlang as tl
        >>> a = tl.op("def f(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]").structure
        >>> b = tl.op("def f(A: f32[M, K], B: f32[N, K]) -> C:\\n    C[i, j] += A[i, k] * B[j, k]").structure
        >>> a.renaming(b) is None
        True
        """
        if self.key != other.key:
            return None
        stages = self.tensors[len(self.tensors) - len(self.axes):]
        return Renaming(dict(zip(self.tensors, other.tensors)), dict(zip(self.sizes, other.sizes)),
                        {s: dict(zip(a, b)) for s, a, b in zip(stages, self.axes, other.axes)})


def _structure(op: Op, arithmetic: bool) -> Structure:
    """The structure of `op`: every name replaced by its position, then hashed (see :class:`Structure`)."""
    tensors = {n: f"t{i}" for i, n in enumerate(op.inputs + tuple(s.name for s in op.stages))}
    sizes = {n: f"s{i}" for i, n in enumerate(op.size_names)}

    def poly(p: SizePoly) -> list:
        return sorted([sorted(sizes[x] for x in mono), c] for mono, c in p.terms)

    def index(ix: IndexExpr | GatherIndex | BoundaryIndex, axes: dict) -> list:
        if isinstance(ix, GatherIndex):  # a value read from tensors: its whole expression, arithmetic included
            return ["gather", expr(ix.value, axes)]
        if isinstance(ix, BoundaryIndex):
            return ["boundary", expr(ix.value, axes)]
        return [sorted([axes[v], poly(c)] for v, c in ix.terms), poly(ix.const)]

    def expr(e: Expr, axes: dict) -> list:
        head = [type(e).__name__, e.dtype, e.weak]
        if isinstance(e, Access):
            return head + [tensors[e.tensor], [index(ix, axes) for ix in e.indices]]
        if isinstance(e, IntValue):
            return head + [index(e.expr, axes)]
        if isinstance(e, Literal):
            return head + [type(e.value).__name__, repr(e.value)]
        if isinstance(e, Unary):
            return head + [e.op, expr(e.x, axes)]
        if isinstance(e, Binary):
            return head + [e.op, e.operand_dtype, expr(e.a, axes), expr(e.b, axes)]
        if isinstance(e, Call):
            return head + [e.fn, e.operand_dtype, [expr(a, axes) for a in e.args]]
        raise TypeError(f"structure: unknown expression {type(e).__name__}")

    stages = []
    for s in op.stages:
        axes = {v: f"v{i}" for i, v in enumerate(s.all_vars)}
        if arithmetic:
            rhs = expr(s.rhs, axes)
        else:  # the reads, in order; what is computed from them is left out
            rhs = [expr(n, axes) for n in walk(s.rhs) if isinstance(n, (Access, IntValue))]
        where = sorted([axes[v], poly(r.lo), poly(r.hi)] for v, r in s.where.items())
        stages.append([s.dtype, len(s.lhs_vars), len(s.red_vars), s.reduce_op, rhs, where])
        if s.lhs is not None:  # a scatter: where it writes
            stages[-1].append([index(ix, axes) for ix in s.lhs.indices])
    text = json.dumps({"arithmetic": arithmetic, "inputs": [[p.dtype, [poly(d) for d in p.shape]] for p in op.params],
                       "int_sizes": [sizes[n] for n in op.int_params], "sizes": len(sizes), "stages": stages,
                       "outputs": [tensors[n] for n in op.outputs]}, sort_keys=True)
    return Structure(hashlib.sha256(text.encode()).hexdigest()[:16], tuple(tensors), tuple(sizes),
                     tuple(s.all_vars for s in op.stages))
