"""What the auto-scheduler's rules look at: each stage of a bound program, classified, with its reads.

Every stage is one of three kinds (Ansor's and MetaSchedule's distinction on CPU):

- ``injective``: written with ``=`` (elementwise, transposes, padding, broadcasts);
- ``reuse``: a reduction where some read misses one of the stage's loop variables of more than one iteration, so
  that the read's elements are used again across that loop (matmul, convolutions, batched, grouped and depthwise):
  these get multi-level tiling with a register tile;
- ``reduce``: a reduction without such reuse (row sums, max, the statistics of softmax and layernorm, pooling).

A read's *strides* say how far (in elements of its tensor) one step of each loop variable moves it, which tells
the rules which variable is contiguous where.

>>> import tensorlang as tl
>>> info = analyze(tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]"),
...                {"M": 8, "N": 32, "K": 4})
>>> s = info.stage("C")
>>> s.kind, s.extents, [r.tensor for r in s.reads], s.reads[1].strides
('reuse', {'i': 8, 'j': 32, 'k': 4}, ['A', 'B'], {'k': 32, 'j': 1})
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..bind import BoundOp, bind
from ..dtypes import DTYPES
from ..program import (
    Access,
    Binary,
    BoundaryIndex,
    Call,
    GatherIndex,
    IntValue,
    Op,
    Unary,
    index_vars_of,
    scan_axis,
    walk,
)

EXPENSIVE_CALLS = ("exp", "log", "sqrt", "tanh", "erf", "sigmoid")


@dataclass(frozen=True)
class Read:
    """One read `tensor[...]` of a stage: per dimension the variables with their coefficients and a constant,
    and the stride of each variable in elements of the tensor (row-major). A dimension indexed by a value read
    from data (`E[ids[t], d]`) moves by its whole extent (at least 2) with each variable of that value: a step of
    `t` may land anywhere in it, never on the next element."""

    tensor: str
    dims: tuple            # per dimension: (((var, coeff), ...), const)
    shape: tuple
    padded: bool           # may fall outside the tensor (a `where`-widened range): reads 0 there
    strides: dict          # var -> elements moved per step of the var

    @property
    def vars(self) -> frozenset:
        """The loop variables the read depends on."""
        return frozenset(self.strides)

    def plain_dim(self, var: str) -> int | None:
        """The dimension indexed by exactly `var` (coefficient 1, no other variable), or None.

        >>> r = Read("B", ((((("k", 1),), 0)), ((("j", 1),), 0)), (4, 8), False, {"k": 8, "j": 1})
        >>> r.plain_dim("j"), r.plain_dim("x")
        (1, None)
        """
        for d, (terms, _) in enumerate(self.dims):
            if len(terms) == 1 and terms[0] == (var, 1):
                return d
        return None

    def dim_of(self, var: str) -> int | None:
        """The one dimension whose index uses `var` (None when none does, or several)."""
        ds = [d for d, (terms, _) in enumerate(self.dims) if any(v == var for v, _ in terms)]
        return ds[0] if len(ds) == 1 else None


@dataclass(frozen=True)
class StageInfo:
    """One stage as the rules see it."""

    name: str
    kind: str                  # "injective", "reuse" or "reduce"
    spatial: tuple             # left-side variables, in order
    reduction: tuple           # reduction variables, in order
    extents: dict              # var -> extent
    lows: dict                 # var -> first value (reduction ranges may start above 0)
    reads: tuple               # Read, in source order
    readers: tuple             # stages that read this one
    is_output: bool
    expensive: bool            # recomputing it costs: math calls, or reads that pad
    ops: int                   # arithmetic operations per point of the stage's loops
    dtype: str
    out_strides: dict          # left-side var -> stride in the stage's own buffer
    scan: str | None = None    # a stage that reads itself: the index it runs along in order (never parallel/vector)
    selectors: tuple = ()      # spatial vars a select's condition tests without reading data (`select(c == 0, ...)`)
    math_calls: bool = False   # calls exp, log, sqrt, tanh, erf or sigmoid

    @property
    def points(self) -> int:
        """Iterations of the stage's whole loop nest."""
        return math.prod(self.extents.values())

    def reads_of(self, tensor: str) -> list:
        """This stage's reads of `tensor`."""
        return [r for r in self.reads if r.tensor == tensor]


@dataclass(frozen=True)
class ProgramInfo:
    """Every stage of a bound program, in the program's order."""

    bound: BoundOp
    stages: tuple

    def stage(self, name: str) -> StageInfo:
        """The stage called `name`."""
        return next(s for s in self.stages if s.name == name)

    @property
    def inputs(self) -> tuple:
        """The program's input tensors."""
        return self.bound.op.inputs


def _row_major(shape: tuple) -> list[int]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= n
    return strides[::-1]


def _ops(e) -> int:
    n = 0
    for x in walk(e):
        if isinstance(x, (Binary, Unary)):
            n += 1
        elif isinstance(x, Call):
            n += 1 if x.fn not in EXPENSIVE_CALLS else 10
    return n


def selectors(e, spatial: tuple) -> tuple:
    """The variables of `spatial` that the condition of a `select` (or `x if c else y`) in `e` tests without reading
    data (`select(c == 0, R[y, x], G[y, x])`, `select(dx == 0, ...)`): where such a variable is unrolled, each copy
    of the body folds the condition to a constant and computes one side only; vectorized or in a loop, every side
    is computed for every element.

    >>> import tensorlang as tl
    >>> st = tl.op("def f(R: f32[N], G: f32[N]) -> O:\\n    O[c, i] = select(c == 0, R[i], G[i]) where c in 0:2"
    ...            ).stage("O")
    >>> selectors(st.rhs, st.lhs_vars)
    ('c',)
    """
    found: dict[str, None] = {}
    for node in walk(e):
        if isinstance(node, Call) and node.fn == "select":
            cond = list(walk(node.args[0]))
            if any(isinstance(x, Access) for x in cond):
                continue
            for x in cond:
                if isinstance(x, IntValue):
                    for v in x.expr.variables():
                        if v in spatial:
                            found.setdefault(v)
    return tuple(found)


def analyze(op: Op, sizes: dict) -> ProgramInfo:
    """Bind `op` at `sizes` and describe every stage for the rules.

    >>> import tensorlang as tl
    >>> src = "def sm(X: f32[N, D]) -> Y:\\n    mx[n] max= X[n, d]\\n    Y[n, d] = exp(X[n, d] - mx[n])"
    >>> [(s.name, s.kind, s.readers) for s in analyze(tl.op(src), {"N": 4, "D": 16}).stages]
    [('mx', 'reduce', ('Y',)), ('Y', 'injective', ())]
    """
    bound = bind(op, sizes)
    readers: dict[str, list[str]] = {s.name: [] for s in op.stages}
    for s in op.stages:
        for t in s.reads():
            if t in readers and t != s.name:  # a scan's read of itself makes it no reader of itself
                readers[t].append(s.name)
    out = []
    for s in op.stages:
        if s.lhs is not None:  # a scatter has no knobs: space.schedule_scatter schedules it
            continue
        bs = bound.stages[s.name]
        reads = []
        for a, padded in zip(s.accesses(), bs.padded):
            shape = bound.shapes[a.tensor]
            rm = _row_major(shape)
            dims: list[tuple] = []
            strides: dict[str, int] = {}
            for d, ix in enumerate(a.indices):
                if isinstance(ix, GatherIndex):
                    coeffs, const = {v: max(2, shape[d]) for v in index_vars_of(ix.value)}, 0
                elif isinstance(ix, BoundaryIndex):  # it moves as its interior does, away from the borders
                    coeffs, const = ix.interior().evaluate(bound.sizes)
                else:
                    coeffs, const = ix.evaluate(bound.sizes)
                dims.append((tuple(sorted(coeffs.items())), const))
                for v, c in coeffs.items():
                    strides[v] = strides.get(v, 0) + c * rm[d]
            reads.append(Read(a.tensor, tuple(dims), shape, padded, strides))
        # a variable of one iteration (a mean's kept dimensions, `z in 0:1`) gives no read anything to reuse
        all_vars = {v for v in s.all_vars if bs.ranges[v][1] > 1}
        has_reuse = s.reduce_op is not None and any(all_vars - r.vars for r in reads)
        kind = "injective" if s.reduce_op is None else "reuse" if has_reuse else "reduce"
        math_calls = any(isinstance(x, Call) and x.fn in EXPENSIVE_CALLS for x in walk(s.rhs))
        expensive = math_calls or any(bs.padded)
        out.append(StageInfo(
            name=s.name, kind=kind, spatial=s.lhs_vars, reduction=s.red_vars,
            extents={v: bs.ranges[v][1] for v in s.all_vars}, lows={v: bs.ranges[v][0] for v in s.all_vars},
            reads=tuple(reads), readers=tuple(readers[s.name]), is_output=s.name in op.outputs,
            expensive=expensive, ops=_ops(s.rhs) + (s.reduce_op is not None), dtype=s.dtype,
            out_strides=dict(zip(s.lhs_vars, _row_major(bs.shape))), scan=(scan_axis(s) or (None,))[0],
            selectors=selectors(s.rhs, s.lhs_vars), math_calls=math_calls))
    return ProgramInfo(bound, tuple(out))


def _arith(e) -> int:
    """Arithmetic operations of a value expression: +, -, *, /, //, %, ** and math calls (min, max and select
    count one each, casts and comparisons of indices none)."""
    n = 0
    for x in walk(e):
        if isinstance(x, Binary) and x.op in ("+", "-", "*", "/", "//", "%", "**") and x.dtype != "bool":
            n += 1
        elif isinstance(x, Unary) and x.op == "neg":
            n += 1
        elif isinstance(x, Call) and x.fn not in DTYPES:  # a cast
            n += 1
    return n


def flop_count(op: Op, sizes: dict) -> float:
    """Arithmetic operations of one run of `op` at `sizes`: per stage, its points times the operations of its
    right side plus one for a reduction's combine (2*M*N*K for a matmul; a padding copy counts none).

    >>> import tensorlang as tl
    >>> flop_count(tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]"),
    ...            {"M": 2, "N": 3, "K": 4})
    48.0
    """
    bound = bind(op, sizes)
    total = 0
    for s in op.stages:
        bs = bound.stages[s.name]
        points = math.prod(bs.ranges[v][1] for v in s.loop_vars)
        total += points * (_arith(s.rhs) + (s.reduce_op is not None))
    return float(total)
