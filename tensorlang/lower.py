"""Lower a bound program and its schedule to the loop IR.

Each stage becomes a loop nest over its scheduled loops. Inside the loop where an index variable's last
loop opens, a `Let` computes it (`m = m_i + m_o*32`) and, when the loops can overshoot its range (a split
that does not divide), an `If` guards the rest. A reduction initialises its output with the identity just
before its reduction loops, or in a loop nest of its own when a reduction loop encloses an output loop.
Stages computed at the root are buffers allocated around the whole function; a stage computed at a loop of
its consumer is computed there for the region the consumer reads; an inlined stage is substituted.

>>> import tensorlang as tl
>>> print(tl.op("def s(X: f32[N, D]) -> T:\\n    T[n] += X[n, d]").lower(N=2, D=3))
def s(X: f32[2, 3], T: f32[2]):
  for n in 0:2:
    T[n] = 0f
    for d in 0:3:
      T[n] = T[n] + X[n, d]
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Set
from dataclasses import dataclass

from . import ir
from .accumulate import vector_accumulators
from .bind import BoundOp, BoundStage
from .bounds import DEFS, assume, interval
from .dtypes import DTYPES
from .errors import BuildError, ScheduleError
from .loopnest import MAX_UNROLL, MAX_VECTOR_LANES, LoopNest, substitute, variables
from .primitives import Annotate, Fuse, Reorder, Split
from .program import (
    Access,
    Binary,
    BoundaryIndex,
    Call,
    Expr,
    GatherIndex,
    IndexExpr,
    IntValue,
    Literal,
    Unary,
    gather_sites,
)
from .schedule import At, Epilogue, Inline, Root
from .simplify import _linear, simplify, simplify_divmod
from .symbolic import is_symbolic, proven, representative, smax, smin
from .tail_guards import hoist_tail_guards
from .tighten import tighten_loops

STACK_LIMIT_BYTES = 32 * 1024


def buffers_of(bound: BoundOp, inlined: Set[str] = frozenset()) -> dict[str, ir.Buffer]:
    """One IR buffer per tensor, by name: inputs, outputs and intermediate (temp) stages that are not in `inlined`.

    >>> import tensorlang as tl
    >>> from tensorlang.bind import bind
    >>> op = tl.op("def sm(X: f32[N, D]) -> Y:\\n    mx[n] max= X[n, d]\\n    Y[n, d] = exp(X[n, d] - mx[n])")
    >>> {name: (b.role, b.shape) for name, b in buffers_of(bind(op, {"N": 2, "D": 3})).items()}
    {'X': ('input', (2, 3)), 'mx': ('temp', (2,)), 'Y': ('output', (2, 3))}
    """
    out = {}
    for p in bound.op.params:
        out[p.name] = ir.Buffer(p.name, p.dtype, bound.shapes[p.name], "input")
    for s in bound.op.stages:
        if s.name in inlined:
            continue
        role = "output" if s.name in bound.op.outputs else "temp"
        out[s.name] = ir.Buffer(s.name, s.dtype, bound.shapes[s.name], role)
    return out


def index_to_ir(ix: IndexExpr, sizes: dict, env: Mapping[str, ir.Expr]) -> ir.Expr:
    """An affine DSL index as an i64 IR expression over the expressions in `env` (index variable -> IR
    expression), with the sizes bound and the result simplified.

    >>> from tensorlang.program import IndexExpr
    >>> from tensorlang.sizes import SizePoly
    >>> h_stride_r = IndexExpr.var("h") * SizePoly.symbol("stride") + IndexExpr.var("r")
    >>> str(index_to_ir(h_stride_r, {"stride": 2}, {"h": ir.Var("h"), "r": ir.Var("r")}))
    'h*2 + r'
    """
    coeffs, const = ix.evaluate(sizes)
    e: ir.Expr = ir.IntImm(const)
    for v, c in coeffs.items():
        e = ir.BinOp("+", e, ir.BinOp("*", env[v], ir.IntImm(c)))
    return simplify(e)


def boundary_to_ir(ix: BoundaryIndex, sizes: dict, env: Mapping[str, ir.Expr]) -> ir.Expr:
    """A boundary index (clamp, min, max, abs over affine forms) as an i64 IR expression over `env`.

    >>> import tensorlang as tl
    >>> a = tl.op("def b(I: f32[H]) -> O:\\n    O[y] = I[clamp(y - 1, 0, H - 1)] + I[y]").stage("O").rhs.a
    >>> str(boundary_to_ir(a.indices[0], {"H": 8}, {"y": ir.Var("y")}))
    'min(max(y - 1, 0), 7)'
    """
    def lower(e: Expr) -> ir.Expr:
        if isinstance(e, IntValue):
            return index_to_ir(e.expr, sizes, env)
        if isinstance(e, Unary):
            return ir.Neg(lower(e.x))
        if isinstance(e, Binary):
            return ir.BinOp(e.op, lower(e.a), lower(e.b))
        assert isinstance(e, Call), e  # the parser builds nothing else
        args = [lower(a) for a in e.args]
        if e.fn == "clamp":
            return ir.BinOp("min", ir.BinOp("max", args[0], args[1]), args[2])
        if e.fn == "abs":
            return ir.Call("abs", (args[0],), "i64")
        return ir.BinOp(e.fn, args[0], args[1])
    return simplify(lower(ix.value))


def _constant(value, dtype: str) -> ir.Expr:
    d = DTYPES[dtype]
    if d.is_float:
        return ir.FloatImm(float(value), dtype)
    if isinstance(value, float) and not math.isfinite(value):
        value = d.identity("max" if value < 0 else "min")
    value = int(value)
    if d.is_int:  # an integer constant converted to a narrower type wraps, as numpy's astype
        lo, hi = d.int_range
        value = (value - lo) % (hi - lo + 1) + lo
    return ir.IntImm(value, dtype)


def _saturate(x: ir.Expr, dtype: str) -> ir.Expr:
    """`x` converted to the integer type `dtype` with values outside its range clamped to its ends (a float: as
    every float-to-integer conversion, truncated toward zero and saturated, NaN giving 0)."""
    src = DTYPES[x.dtype]
    if not src.is_float:
        (lo, hi), (src_lo, src_hi) = DTYPES[dtype].int_range, src.int_range
        if lo > src_lo:
            x = ir.BinOp("max", x, ir.IntImm(lo, x.dtype))
        if hi < src_hi:
            x = ir.BinOp("min", x, ir.IntImm(hi, x.dtype))
    return _convert(x, dtype)


def _scale_factor(value: ir.Expr) -> tuple[ir.Expr, ir.FloatImm] | None:
    """``value`` as ``rest * c``, with ``c`` a floating-point constant that multiplies the whole of it (a factor
    of its top-level product), or None. A sum over a register tile accumulates ``rest`` and scales once as it
    writes the tile back: ``sum(q * k * 0.125)`` is ``0.125 * sum(q * k)`` up to rounding, and the multiply
    inside the loop would turn each fused multiply-add into two operations.

    >>> r, c = _scale_factor(ir.BinOp("*", ir.BinOp("*", ir.Var("q", "f32"), ir.Var("k", "f32")), ir.FloatImm(0.125)))
    >>> str(r), c.value
    ('q*k', 0.125)
    >>> _scale_factor(ir.BinOp("+", ir.Var("q", "f32"), ir.FloatImm(1.0))) is None
    True
    """
    if not (isinstance(value, ir.BinOp) and value.op == "*"):
        return None
    if isinstance(value.b, ir.FloatImm):
        return value.a, value.b
    if isinstance(value.a, ir.FloatImm):
        return value.b, value.a
    for inner, other, left in ((value.a, value.b, True), (value.b, value.a, False)):
        got = _scale_factor(inner)
        if got is not None:
            rest, c = got
            return (ir.BinOp("*", rest, other) if left else ir.BinOp("*", other, rest)), c
    return None


#: The dtype a computation of weak values only (literals, sizes, index values: Python numbers) is done in where it
#: meets no tensor, in a cast's argument or a comparison: exactly, as Python would (`f64(0.1)` is the double 0.1,
#: `f64(N * N)` does not wrap at 2**31).
_PYTHON_NUMBER = {"i32": "i64", "f32": "f64"}


def _convert(x: ir.Expr, dtype: str) -> ir.Expr:
    if x.dtype == dtype:
        return x
    if isinstance(x, ir.IntImm):
        return _constant(x.value, dtype)
    return ir.Cast(dtype, x)


def _in_domain(indices, shape) -> ir.Expr:
    cond = ir.all_of(ir.Logic("and", ir.Cmp(">=", ix, ir.const(0)), ir.Cmp("<", ix, ir.const(ext)))
                     for ix, ext in zip(indices, shape))
    assert cond is not None  # called for padded reads only, and a read is padded in one of its dimensions
    return cond


def _may_exceed_one(extent) -> bool:
    """Whether a loop of this extent may run more than once (a symbolic extent is asked over its whole range)."""
    return extent.bounds()[1] > 1 if is_symbolic(extent) else extent > 1


def _at_least(a: ir.Expr, b: ir.Expr, ranges: dict) -> bool:
    """Whether `a >= b` for every value of the loops in `ranges`: from the bounds of `a - b` after the terms the
    two share cancel (`T1.j + j_t*32 >= j_t*32` for `T1.j` in 0:32), with `min(x, y)` on the larger side proven
    for `x` and `y` each.

    >>> from tensorlang.ir import Var, BinOp, const
    >>> jt = BinOp("*", Var("j_t"), const(32))
    >>> _at_least(BinOp("+", Var("j"), jt), jt, {"j": (0, 31)}), _at_least(jt, BinOp("+", Var("j"), jt), {"j": (0, 31)})
    (True, False)
    """
    if isinstance(a, ir.BinOp) and a.op == "min":
        return _at_least(a.a, b, ranges) and _at_least(a.b, b, ranges)
    if isinstance(b, ir.BinOp) and b.op == "max":
        return _at_least(a, b.a, ranges) and _at_least(a, b.b, ranges)
    r = interval(simplify(ir.BinOp("-", a, b)), ranges)
    return r is not None and proven(r[0], ">=", 0)


@dataclass
class Region:
    """Per dimension: the smallest index (an expression of outer loops), and a constant extent that bounds it;
    `inside[d]` when that smallest index is provably >= 0 (no clamping at the start of the dimension), `ends[d]`
    when its last index is provably below the dimension's size (no clamping at the end)."""

    mins: list
    extents: list
    inside: tuple = ()
    ends: tuple = ()


@dataclass
class LocalCopy:
    """A cache_read buffer: the local buffer, the tensor's region it holds, and its layout."""

    buffer: ir.Buffer
    region: Region
    layout: list  # [(dim, kind, block)] with kind "whole", "outer" or "inner"

    def index(self, logical: list[ir.Expr], ranges: dict) -> tuple:
        """Physical indices into the local buffer for global indices `logical` (expressions of loops)."""
        local = [simplify_divmod(ir.BinOp("-", g, m), ranges) for g, m in zip(logical, self.region.mins)]
        out = []
        for d, kind, block in self.layout:
            x = local[d]
            if kind == "outer":
                x = ir.BinOp("//", x, ir.const(block))
            elif kind == "inner":
                x = ir.BinOp("%", x, ir.const(block))
            out.append(simplify_divmod(x, ranges))
        return tuple(out)


class Lowerer:
    """Builds the loop IR of a whole function from the bound program and the replayed schedule."""

    def __init__(self, bound: BoundOp, state):
        self.bound, self.state = bound, state
        self.op = bound.op
        self.inlined = {n for n, st in state.stages.items() if isinstance(st.attach, Inline)}
        self.buffers = buffers_of(bound, self.inlined)
        # each gathered index by its read and dimension: its number, by which a kernel reports it out of range
        self.sites = {(id(site.access), site.dim): n for n, site in enumerate(gather_sites(self.op))}
        state.check_attachments()
        self.local_stages: set[str] = set()  # computed at a loop and stored there (see stored_here)
        # producer -> the stage computed in its write-back (reverse_compute_inline)
        self.epilogue = {st.attach.producer: n for n, st in state.stages.items() if isinstance(st.attach, Epilogue)}
        self.attached: dict[tuple[str, str], list[str]] = {}
        # (consumer, store loop or "" for the root) -> the sliding buffers allocated there (see slide_storage)
        self.slide_allocs: dict[tuple[str, str], list[ir.Buffer]] = {}
        for s in self.op.stages:
            at = state.stages[s.name].attach
            if isinstance(at, At):
                self.attached.setdefault((at.consumer, at.axis), []).append(s.name)

    # ---- the function ----
    def function(self) -> ir.Func:
        """The whole function: the stages computed at the root in the order of `op.stages` (the others come inside
        their consumers), every temporary stage's buffer allocated around the whole body, the inputs then the outputs
        as parameters, vectorized reductions into one element accumulated in a vector (`accumulate.py`), and no
        Let whose variable nothing reads."""
        roots = [s.name for s in self.op.stages if isinstance(self.state.stages[s.name].attach, Root)]
        body = ir.seq(*(self.stage(name, None) for name in roots))
        used = ir.stmt_buffers(body)
        for s in reversed(self.op.stages):
            buf = self.buffers.get(s.name)
            # a reduction whose write-back computes its reader may never store: it then needs no buffer
            if buf is not None and buf.role == "temp" and s.name not in self.local_stages and s.name in used:
                body = ir.Allocate(buf, body)
        params = tuple(self.buffers[p.name] for p in self.op.params) + \
            tuple(self.buffers[o] for o in self.op.outputs)
        body = vector_accumulators(body, {b.name for b in self.buffers.values()})
        return ir.Func(self.op.name, params, ir.drop_unused_lets(body)[0])

    # ---- one stage ----
    def nest_for(self, name: str, region: Region | None) -> tuple[LoopNest, dict, str]:
        """The stage's loops (replayed on the region's extents when it is computed at a consumer's loop),
        each index variable's domain (lo, hi) as expressions, and the prefix of its IR variable names."""
        bs = self.bound.stages[name]
        s = bs.stage
        domains: dict[str, tuple[ir.Expr, ir.Expr]]
        if region is None:
            nest = self.state.stages[name].nest
            domains = {v: (ir.const(bs.ranges[v][0]), ir.const(bs.ranges[v][0] + bs.ranges[v][1] - 1))
                       for v in s.all_vars}
            return nest, domains, ""
        prefix = f"{name}."  # no loop a user names can contain a dot
        axes = []
        domains = {}
        for d, v in enumerate(s.lhs_vars):
            axes.append((v, 0, region.extents[d], False))
            lo = region.mins[d] if d < len(region.inside) and region.inside[d] else \
                simplify(ir.BinOp("max", region.mins[d], ir.const(0)))
            last = ir.BinOp("+", region.mins[d], ir.const(region.extents[d] - 1))
            hi = simplify(last) if d < len(region.ends) and region.ends[d] else \
                simplify(ir.BinOp("min", last, ir.const(bs.shape[d] - 1)))
            domains[v] = (lo, hi)
        for v in s.red_vars:
            lo, ext = bs.ranges[v]
            axes.append((v, lo, ext, True))
            domains[v] = (ir.const(lo), ir.const(lo + ext - 1))
        nest = LoopNest(name, axes)
        try:
            for p in self.state.loop_prims[name]:
                if isinstance(p, Split):
                    nest.split("split", p.axis, p.factor, p.outer, p.inner)
                elif isinstance(p, Fuse):
                    nest.fuse("fuse", p.outer, p.inner, p.fused)
                elif isinstance(p, Reorder):
                    nest.reorder("reorder", p.axes)
                elif isinstance(p, Annotate):
                    nest.annotate(p.verb, p.axis, p.kind)
        except ScheduleError as e:
            at = self.state.stages[name].attach
            assert isinstance(at, At)  # a region is given only to a stage computed at a consumer's loop
            shape = " x ".join(str(x) for x in region.extents)
            raise ScheduleError(f"compute_at({name}, {at.consumer}, {at.axis}): {name} is computed there over the "
                                f"region its readers use, {shape} elements, and its own loop primitives do not fit "
                                f"that region: {e}") from None
        return nest, domains, prefix

    def stage(self, name: str, region: Region | None) -> ir.Stmt:
        """The statements that compute stage `name` (over `region` when given)."""
        bs = self.bound.stages[name]
        s = bs.stage
        if s.lhs is not None:
            assert region is None  # the schedule keeps a scatter at the root
            return self.scatter_stage(name)
        st = self.state.stages[name]
        nest, domains, prefix = self.nest_for(name, region)
        loops = nest.loops
        pos = {lp.name: i for i, lp in enumerate(loops)}
        var = {lp.name: ir.Var(prefix + lp.name) for lp in loops}
        exprs = {v: simplify(substitute(e, var)) for v, e in nest.exprs.items()}
        if region is not None:
            # the loops run from 0 over the region's extent; the index starts at the region's clamped start
            for v in s.lhs_vars:
                exprs[v] = simplify(ir.BinOp("+", exprs[v], domains[v][0]))
        ranges = {prefix + lp.name: (lp.lo, lp.lo + lp.extent - 1) for lp in loops}
        # index variables: their own names at the root; inside a consumer, names that no loop can take
        orig = {v: ir.Var(f"{name}:{v}" if prefix else v) for v in s.all_vars}
        loop_depth = {prefix + n: i for n, i in pos.items()}
        depth_of = {v: max([loop_depth[n] for n in variables(exprs[v]) if n in loop_depth], default=-1)
                    for v in s.all_vars}
        red_loops = {prefix + lp.name for lp in loops if lp.reduction}
        constraints = []  # (depth, condition, involves a reduction loop): tails of splits of split loops
        tails = []  # (e, bound): e < bound wherever the stage reads (a tail of a split loop reads nothing)
        for e, bound in nest.constraints:
            e = simplify(substitute(e, var))
            vs = variables(e)
            depth = max([loop_depth[n] for n in vs if n in loop_depth], default=-1)
            constraints.append((depth, ir.Cmp("<", e, ir.const(bound)), bool(vs & red_loops)))
            tails.append((e, bound))
        out = self.buffers[name]
        out_idx = tuple(orig[v] for v in s.lhs_vars)
        cw_depth = nest.index("cache_write", st.cache_write) if st.cache_write else None
        whole = {v: (region.extents[d] if region is not None else bs.ranges[v][1]) for d, v in enumerate(s.lhs_vars)}

        local = None  # cache_write: (buffer, index into it)
        if cw_depth is not None:
            free = {prefix + lp.name for lp in loops[cw_depth + 1:]}
            # the tile's dimensions in the order of their innermost loops: a vectorized index is contiguous
            dims = sorted(s.lhs_vars, key=lambda v: depth_of[v])
            mins, exts = zip(*(self.extent_over(exprs[v], free, ranges, (domains[v][0], whole[v])) for v in dims)) \
                if dims else ((), ())
            buf = _local_buffer(f"{name}_local", s.dtype, tuple(exts))
            idx = tuple(simplify_divmod(ir.BinOp("-", exprs[v], m), ranges) for v, m in zip(dims, mins))
            local = (buf, idx)

        copies = self.cache_reads(name, nest, exprs, ranges, prefix)
        value = ValueLowering(self, bs, orig, exprs, copies, ranges)(s.rhs, s.dtype)
        epilogue = self.epilogue_store(name, orig, ranges) if name in self.epilogue else None
        tbuf, tidx = local if local is not None else (out, out_idx)
        scale = None  # a constant factor of a sum into a register tile: applied once, as the tile is written back
        if s.reduce_op == "+" and local is not None:
            got = _scale_factor(value)
            if got is not None:
                value, scale = got
        if s.reduce_op is None:
            core: ir.Stmt = ir.Store(tbuf, tidx, value)
            identity = None
        else:
            core = ir.Store(tbuf, tidx, ir.BinOp(s.reduce_op, ir.Load(tbuf, tidx), value))
            identity = _constant(DTYPES[s.dtype].identity(s.reduce_op), s.dtype)

        red_depths = [i for i, lp in enumerate(loops) if lp.reduction]
        first_red = red_depths[0] if red_depths else None
        pure_inside_red = first_red is not None and any(not lp.reduction for lp in loops[first_red:])
        # with cache_write and reduction loops outside the tile, the first of their iterations writes the tile
        # back without reading the output: no separate pass initialises it (a loop of one iteration is both the
        # first and the last: the tile then holds the whole reduction)
        outer_red = [lp for lp in loops[:cw_depth + 1] if lp.reduction and _may_exceed_one(lp.extent)] \
            if cw_depth is not None else []
        all_red_cached = cw_depth is not None and not outer_red
        fused_init = identity is not None and cw_depth is None and not pure_inside_red
        folded_init = identity is not None and bool(outer_red) and all(lp.kind in ("serial", "unrolled")
                                                                         for lp in outer_red)
        separate_init = identity is not None and not fused_init and not all_red_cached and not folded_init
        # an index that may overshoot is guarded where it reaches a program buffer; a reduction index always
        # (its extra iterations would be accumulated even into a local tile)
        # with cache_write, an index bound outside the tile is guarded where it is bound (its overshoot would reach
        # the write-back); one bound inside is guarded at the write-back itself
        guarded_vars = self.global_index_vars(value, orig) | set(s.red_vars) | \
            (set(s.all_vars) if cw_depth is None else {v for v in s.lhs_vars if depth_of[v] <= cw_depth})
        # an index guarded where it is bound never leaves its domain where the stage reads
        kept = {v: (domains[v][0].value, domains[v][1].value) for v in guarded_vars
                if all(isinstance(b, ir.IntImm) for b in domains[v])}

        def bounds_checks(v) -> list[ir.Expr]:
            """The comparisons that keep index v in its domain, leaving out those its loops cannot break."""
            lo, hi = domains[v]
            out: list[ir.Expr] = []
            if not _at_least(exprs[v], lo, ranges):
                out.append(ir.Cmp(">=", orig[v], lo))
            if not _at_least(hi, exprs[v], ranges):
                out.append(ir.Cmp("<=", orig[v], hi))
            return out

        def needs_guard(v) -> bool:
            return bool(bounds_checks(v))

        def lets(depth: int, body: ir.Stmt, pure_only: bool, guard_all: bool) -> ir.Stmt:
            """Let-bind the index variables whose last loop is at `depth`; guard those that may overshoot."""
            vs = [v for v in s.all_vars if depth_of[v] == depth and not (pure_only and v in s.red_vars)]
            # always the tails: a tail of a split loop would visit an index twice
            cond = ir.all_of([c for d, c, red in constraints if d == depth and not (pure_only and red)] +
                             [c for v in vs if needs_guard(v) and (guard_all or v in guarded_vars)
                              for c in bounds_checks(v)])
            if cond is not None:
                body = ir.If(simplify(cond), body)
            for v in reversed(vs):
                if exprs[v] != orig[v]:
                    body = ir.Let(orig[v], exprs[v], body)
            return body

        def tile(sub, body, guard_all) -> ir.Stmt:
            """A nest over the pure loops of `sub` (same order and kinds) around `body`."""
            for lp in reversed([lp for lp in sub if not lp.reduction]):
                body = ir.For(var[lp.name], ir.const(lp.lo), ir.const(lp.extent),
                              lets(pos[lp.name], body, True, guard_all), lp.kind)
            return body

        def build(depth: int) -> ir.Stmt:
            if depth == len(loops):
                return core
            lp = loops[depth]
            body = build(depth + 1)
            if cw_depth == depth:
                assert local is not None  # set with cw_depth
                buf, idx = local
                inner = loops[depth + 1:]
                init = [] if identity is None else [tile(inner, ir.Store(buf, idx, identity), False)]
                back = ir.Load(buf, idx) if scale is None else ir.BinOp("*", ir.Load(buf, idx), scale)

                def write(value):
                    return tile(inner, ir.Store(out, out_idx, value), True)

                def final(value):  # the element is final: the epilogue's store, or the producer's own
                    return tile(inner, epilogue(value), True) if epilogue else write(value)
                if identity is None or all_red_cached:
                    write_back = final(back)
                else:
                    summed = ir.BinOp(s.reduce_op, ir.Load(out, out_idx), back)
                    accumulate = write(summed)
                    first = ir.all_of(ir.Cmp("==", var[r.name], ir.const(r.lo)) for r in outer_red)
                    assert first is not None  # not all_red_cached: a reduction loop outside the tile
                    if epilogue:  # partial sums stay in the buffer until the last block of the reduction
                        last = ir.all_of(ir.Cmp("==", var[r.name], ir.const(r.lo + r.extent - 1))
                                         for r in outer_red)
                        assert last is not None
                        accumulate = ir.If(last, final(summed), accumulate)
                        store_first = ir.If(last, final(back), write(back))
                    else:
                        store_first = write(back)
                    write_back = ir.If(first, store_first, accumulate) if folded_init else accumulate
                body = ir.Allocate(buf, ir.seq(*init, body, write_back))
            # a copy outside the stage's parallel loop is split across the threads too, rather than run by one
            threads = not prefix and any(q.kind == "parallel" for q in loops[depth + 1:])
            for lc, copy in self.copies_at(copies, lp.name, ranges, threads):
                body = ir.Allocate(lc.buffer, ir.seq(copy, body))
            # producers computed here come first: a cache_read at this loop may copy what they compute
            producers = self.producers_at(name, lp.name, exprs, ranges, prefix, loops[:depth + 1], kept, tails)
            body = ir.seq(*(stmt for _, _, stmt in producers), body)
            for p, region, _ in producers:
                if self.state.stages[p].store_at is not None:
                    outer = {orig[v].name: exprs[v] for v in s.all_vars
                             if depth_of[v] <= depth and exprs[v] != orig[v]}  # bound by Lets around `body`
                    body = self.slide_storage(p, name, lp.name, region, prefix, body, ranges, outer)
                    continue
                if self.stored_here(p, region):  # the producer's buffer holds just its region, in this loop
                    stored = _local_buffer(p, self.buffers[p].dtype, tuple(region.extents))
                    outer = {orig[v].name: exprs[v] for v in s.all_vars
                             if depth_of[v] <= depth and exprs[v] != orig[v]}  # bound by Lets around `body`
                    moved = _relocate(body, p, stored, region.mins, outer)
                    if _indices_inside(moved, stored, ranges, outer):  # else a tail loop overshoots the region
                        body = ir.Allocate(stored, moved)
                        self.local_stages.add(p)
                        continue
                self.check_shared(p, name, lp.name, region, prefix, loops[:depth + 1])
            for buf in self.slide_allocs.pop((name, lp.name), []):  # sliding buffers stored at this loop
                body = ir.Allocate(buf, body)
            body = lets(depth, body, False, False)
            loop = ir.For(var[lp.name], ir.const(lp.lo), ir.const(lp.extent), body, lp.kind)
            if fused_init and depth == first_red:  # initialise just before the reduction loops
                assert identity is not None  # fused_init
                after = [epilogue(ir.Load(out, out_idx))] if epilogue else []
                return ir.seq(ir.Store(out, out_idx, identity), loop, *after)
            return loop

        if epilogue is not None and cw_depth is None and not fused_init:
            consumer = self.epilogue[name]
            raise ScheduleError(f"reverse_compute_inline({consumer}): {name}'s elements are never final inside its "
                                f"loops (a loop over its output runs inside a reduction loop); give {name} a "
                                "cache_write, or put its reduction loops innermost")
        main = lets(-1, build(0), False, False)
        if separate_init:
            assert identity is not None  # separate_init
            main = ir.seq(lets(-1, tile(loops, ir.Store(out, out_idx, identity), True), True, True), main)
        for buf in self.slide_allocs.pop((name, ""), []):  # sliding buffers stored at the root
            main = ir.Allocate(buf, main)
        return main

    def scatter_stage(self, name: str) -> ir.Stmt:
        """A scatter (`H[b := I[y, x]] += 1`): the output set to the reduction's identity, then each iteration of
        the stage's loops updates the element its indices computed from data choose (one outside its dimension is a
        `tl.IndexError`, never a write outside the buffer). A parallel loop whose iterations may update one element
        accumulates into a private copy of the output per iteration of it, and the copies are combined into the
        output after it (Halide's privatized histogram), so no two threads update one element."""
        bs = self.bound.stages[name]
        s = bs.stage
        assert s.lhs is not None  # the caller's check
        op = s.reduce_op
        assert op is not None  # the parser refuses `=` through an index computed from data
        nest = self.state.stages[name].nest
        loops = nest.loops
        var = {lp.name: ir.Var(lp.name) for lp in loops}
        exprs = {v: simplify(substitute(e, var)) for v, e in nest.exprs.items()}
        ranges = {lp.name: (lp.lo, lp.lo + lp.extent - 1) for lp in loops}
        orig = {v: ir.Var(v) for v in s.loop_vars}
        lower_value = ValueLowering(self, bs, orig, exprs, {}, ranges)
        value = lower_value(s.rhs, s.dtype)
        slots = {v: ir.Var(f"{name}:{v}") for v in s.scatter_vars}  # no loop name holds a colon
        element = tuple(slots.get(v, orig.get(v)) for v in s.lhs_vars)
        identity = _constant(DTYPES[s.dtype].identity(op), s.dtype)
        out = self.buffers[name]

        def update(buf: ir.Buffer, first: tuple) -> ir.Stmt:
            """The guarded update of one iteration into `buf` (at `first` + the element)."""
            at = first + element
            body: ir.Stmt = ir.Store(buf, at, ir.BinOp(op, ir.Load(buf, at), value))
            for d, v in reversed(list(enumerate(s.lhs_vars))):
                if v in slots:
                    body = ir.Let(slots[v], lower_value.index(s.lhs, d, orig), body)
            conds = [ir.Cmp("<", simplify(substitute(e, var)), ir.const(b)) for e, b in nest.constraints]
            for v in s.loop_vars:
                lo, ext = bs.ranges[v]
                if not _at_least(exprs[v], ir.const(lo), ranges):
                    conds.append(ir.Cmp(">=", orig[v], ir.const(lo)))
                if not _at_least(ir.const(lo + ext - 1), exprs[v], ranges):
                    conds.append(ir.Cmp("<=", orig[v], ir.const(lo + ext - 1)))
            cond = ir.all_of(conds)
            if cond is not None:
                body = ir.If(simplify(cond), body)
            for v in reversed(s.loop_vars):
                if exprs[v] != orig[v]:
                    body = ir.Let(orig[v], exprs[v], body)
            return body

        def around(sub: list, body: ir.Stmt) -> ir.Stmt:
            for lp in reversed(sub):
                body = ir.For(var[lp.name], ir.const(lp.lo), ir.const(lp.extent), body, lp.kind)
            return body

        def every(shape: tuple, tag: str, body) -> ir.Stmt:
            """Loops over every element of `shape` around `body(element)`."""
            vs = [ir.Var(f"{name}:{tag}{d}") for d in range(len(shape))]
            stmt = body(tuple(vs))
            for v, n in reversed(list(zip(vs, shape))):
                stmt = ir.For(v, ir.const(0), ir.const(n), stmt, "serial")
            return stmt

        init = every(bs.shape, "e", lambda e: ir.Store(out, e, identity))
        plain = {v for v in s.lhs_vars if v not in slots}
        shared = [k for k, lp in enumerate(loops) if lp.kind == "parallel"
                  and not {v for v, e in exprs.items() if lp.name in ir.expr_vars(e)} <= plain]
        if not shared:  # each thread (if any) updates elements of its own
            return ir.seq(init, around(loops, update(out, ())))
        k = shared[0]
        lp = loops[k]
        copies = ir.Buffer(f"{name}_part", s.dtype, (lp.extent,) + bs.shape, "temp")
        mine = simplify(ir.BinOp("-", var[lp.name], ir.const(lp.lo)))
        fill = every(bs.shape, "p", lambda e: ir.Store(copies, (mine,) + e, identity))
        body = ir.For(var[lp.name], ir.const(lp.lo), ir.const(lp.extent),
                      ir.seq(fill, around(loops[k + 1:], update(copies, (mine,)))), "parallel")
        c = ir.Var(f"{name}:copy")

        def combine(e: tuple) -> ir.Stmt:
            return ir.For(c, ir.const(0), ir.const(lp.extent),
                          ir.Store(out, e, ir.BinOp(op, ir.Load(out, e), ir.Load(copies, (c,) + e))), "serial")
        return ir.seq(init, ir.Allocate(copies, around(loops[:k], ir.seq(body, every(bs.shape, "c", combine)))))

    def epilogue_store(self, producer: str, orig: dict, ranges: dict):
        """For the stage computed in `producer`'s write-back: a function of the IR value of one final element of
        the producer (at the producer's index variables `orig`) that stores the consumer's element there."""
        consumer = self.epilogue[producer]
        bs = self.bound.stages[consumer]
        ps = self.bound.stages[producer].stage
        env = {v: orig[pv] for v, pv in zip(bs.stage.lhs_vars, ps.lhs_vars)}
        out = self.buffers[consumer]
        idx = tuple(env[v] for v in bs.stage.lhs_vars)

        def store(value: ir.Expr) -> ir.Stmt:
            lowering = ValueLowering(self, bs, env, env, {}, ranges, replace={producer: value})
            return ir.Store(out, idx, lowering(bs.stage.rhs, bs.stage.dtype))
        return store

    @staticmethod
    def global_index_vars(value: ir.Expr, orig: dict) -> set[str]:
        """Index variables used in the indices of loads from the program's buffers (not local copies)."""
        names: set[str] = set()
        for load in ir.loads(value):
            if load.buffer.role in ("input", "output", "temp"):
                for i in load.indices:
                    names |= ir.expr_vars(i)
        return {v for v, var in orig.items() if var.name in names}

    # ---- regions ----
    @staticmethod
    def extent_over(e: ir.Expr, free: set[str], ranges: dict, whole: tuple) -> tuple[ir.Expr, int]:
        """The smallest value of `e` as an expression of the loops not in `free`, and a constant bound on the
        number of values it takes while the `free` loops run (a term of the free loops alone that is not affine,
        as `rs // 3` of a fused loop, counts with its bounds); `whole` (start, constant extent) when a term mixes
        the free loops with others."""
        terms, c = _linear(simplify(e))
        fixed = {}
        lo, span = c, 0
        for atom, coef in terms.items():
            if not (variables(atom) & free):
                fixed[atom] = coef
                continue
            if isinstance(atom, ir.Var):
                a, b = ranges[atom.name]
            else:  # a term of the free loops alone (`rs // 3` of a fused loop): its bounds over them
                bounds = interval(atom, ranges) if not (variables(atom) - free) else None
                if bounds is None:
                    return whole
                a, b = bounds
            lo += smin(coef * a, coef * b)
            span += abs(coef) * (b - a)
        m: ir.Expr = ir.IntImm(lo)
        for atom, coef in fixed.items():
            m = ir.BinOp("+", m, ir.BinOp("*", atom, ir.const(coef)))
        return simplify(m), span + 1

    def region_of(self, s, tensor: str, exprs: dict, free: set[str], ranges: dict,
                  kept: dict | None = None, tails: list | None = None) -> Region:
        """The part of `tensor` that stage `s` reads while the `free` loops run (one min and extent a dimension).
        An index variable in `kept` (var -> (lo, hi): guarded to its domain wherever `s` reads) that the free
        loops alone move counts with its values in the domain only (j of a split by 4 with one iteration: 0, not
        0 to 3). Likewise the tails of splits of split loops (`tails`: (e, bound), e < bound wherever `s` reads):
        a sum of free loops that a tail bounds counts with the values it takes below the bound (i_i of a split by
        3 split again by 4: 0 to 2, not 0 to 3), in every index that holds it."""
        shape = self.bound.shapes[tensor]
        env = exprs
        if kept or tails:
            env, ranges, free = dict(exprs), dict(ranges), set(free)
        for v, (lo, hi) in (kept or {}).items():
            e = exprs.get(v)
            r = interval(e, ranges) if e is not None and variables(e) and variables(e) <= free else None
            # (a region is only narrowed where that is proven for every value of the symbolic sizes)
            if r is not None and not (proven(r[0], ">=", lo) and proven(r[1], "<=", hi)) \
                    and proven(smax(r[0], lo), "<=", smin(r[1], hi)):
                atom = ir.Var(f"{v}:in-domain")
                env[v], ranges[atom.name] = atom, (smax(r[0], lo), smin(r[1], hi))
                free.add(atom.name)
        for k, (e, bound) in enumerate(tails or ()):
            terms, const = _linear(e)
            terms = {a: c for a, c in terms.items() if c}
            r = interval(e, ranges)
            if not terms or not variables(e) <= free or r is None or not proven(r[1], ">=", bound) \
                    or not proven(r[0], "<", bound):
                continue
            atom = ir.Var(f"tail{k}:in-domain")  # the tail's sum of loops, less its constant, below the bound
            ranges[atom.name], free = (r[0] - const, bound - 1 - const), free | {atom.name}
            for v, ev in env.items():
                vterms, vconst = _linear(ev)
                ratios = {vterms.get(a, 0) / c for a, c in terms.items()}
                if len(ratios) == 1 and (m := ratios.pop()) == int(m) and m != 0:
                    rest = [ir.BinOp("*", a, ir.const(c)) for a, c in vterms.items() if a not in terms]
                    new_ev: ir.Expr = ir.BinOp("*", atom, ir.const(int(m)))
                    for t in rest:
                        new_ev = ir.BinOp("+", new_ev, t)
                    env[v] = simplify(ir.BinOp("+", new_ev, ir.const(vconst)))
        per_dim: list[list] = [[] for _ in shape]
        for a in s.accesses():
            if a.tensor != tensor:
                continue
            for d, ix in enumerate(a.indices):
                if isinstance(ix, GatherIndex):  # an index read from data may be anywhere in the dimension
                    per_dim[d].append((ir.const(0), shape[d]))
                    continue
                if isinstance(ix, BoundaryIndex):  # its bounds over the free loops, or the whole dimension
                    e = boundary_to_ir(ix, self.bound.sizes, env)
                    per_dim[d].append(self.extent_over(e, free, ranges, _boundary_whole(e, ranges, shape[d])))
                    continue
                e = index_to_ir(ix, self.bound.sizes, env)
                per_dim[d].append(self.extent_over(e, free, ranges, (ir.const(0), shape[d])))
        mins, exts = [], []
        for d, cands in enumerate(per_dim):
            base = [_linear(m)[0] for m, _ in cands]
            if all(b == base[0] for b in base):
                consts = [_linear(m)[1] for m, _ in cands]
                lo = smin(*consts)
                hi = smax(*(k + e - 1 for k, (_, e) in zip(consts, cands)))
                mins.append(simplify(ir.BinOp("+", ir.BinOp("-", cands[0][0], ir.const(consts[0])), ir.const(lo))))
                exts.append(hi - lo + 1)
            else:  # reads whose starts move differently: a constant range covering every index they take
                lo, hi = 0, shape[d] - 1
                for m, e in cands:
                    r = interval(m, ranges)  # None when the start depends on an enclosing stage's loops
                    if r is not None:
                        lo, hi = smin(lo, r[0]), smax(hi, r[1] + e - 1)
                mins.append(ir.const(lo))
                exts.append(hi - lo + 1)
        return Region(mins, exts)

    def producers_at(self, consumer: str, axis: str, exprs: dict, ranges: dict, prefix: str,
                     outer_loops: list, kept: dict | None = None,
                     tails: list | None = None) -> list[tuple[str, Region, ir.Stmt]]:
        """Producers computed at loop `axis` of `consumer`, each over the region that the consumer's inner loops
        and the other stages computed there read: (name, region, statements) each. Inside a parallel loop, the
        regions of different iterations must not overlap (else two threads would write the same elements).
        `kept`: the consumer's index variables that a guard keeps in their domain (var -> (lo, hi)), wherever the
        consumer reads (the tail of a split loop reads nothing); `tails`: the consumer's tails of splits of split
        loops (see region_of)."""
        attached = self.attached.get((consumer, axis), [])
        if not attached:
            return []
        cons = self.bound.stages[consumer].stage
        nest = self.state.stages[consumer].nest
        i = nest.index("compute_at", axis)
        free = {prefix + lp.name for lp in nest.loops[i + 1:]}
        regions: dict[str, Region] = {}
        for p in reversed(attached):  # readers come after what they read: their regions are known first
            parts = self.regions_read(cons, lambda t: self.region_of(cons, t, exprs, free, ranges, kept, tails), p)
            for r in attached:
                if r != p:
                    parts += self.regions_read(self.bound.stages[r].stage,
                                               lambda t, r=r: self.region_via(r, regions[r], t), p)
            shape = self.bound.shapes[p]
            region = parts[0]
            for other in parts[1:]:
                region = _union(region, other, shape)
            starts = [interval(m, ranges) for m in region.mins]
            region = Region(region.mins, region.extents, tuple(r is not None and r[0] >= 0 for r in starts),
                            tuple(r is not None and r[1] + ext <= n
                                  for r, ext, n in zip(starts, region.extents, shape)))
            regions[p] = region
        return [(p, regions[p], self.sliding(p, consumer, axis, regions[p], prefix, ranges)
                 if self.state.stages[p].store_at is not None else self.stage(p, regions[p])) for p in attached]

    # ---- sliding windows (store_at / fold_storage) ----
    def slide_dim(self, name: str, consumer: str, axis: str, region: Region, prefix: str) -> tuple[int | None, int]:
        """(dimension, step) of the sliding stage `name` computed at loop `axis` of `consumer` over `region`: the
        one dimension whose start moves with that loop, by `step` (>= 0) per iteration; (None, 0) when none does.
        Refuses (as store_at) what the sliding window cannot keep safe: a loop between the store level and the
        compute loop, or that loop, that is parallel or vectorized; a start that moves backwards, in more than one
        dimension, or not by a constant multiple of the loop; a stage read outside its domain or copied."""
        st = self.state.stages[name]
        nest = self.state.stages[consumer].nest
        where = self.slide_where(name, consumer)
        if not isinstance(self.state.stages[consumer].attach, Root):
            raise ScheduleError(f"{where}: {consumer} is no longer computed at the root; a sliding window needs its "
                                f"consumer at the root (or s[{name!r}].compute_at(...) again, which drops the "
                                "store_at)")
        i = nest.index("compute_at", axis)
        s = nest.index("store_at", st.store_at) if st.store_at else -1
        if s >= i:
            raise ScheduleError(f"{where}: loop {st.store_at} of {consumer} is no longer outside {axis}, where {name} "
                                f"is computed (loops: {', '.join(nest.names())})")
        for lp in nest.loops[s + 1:i + 1]:
            if lp.kind in ("parallel", "vectorized"):
                what = "the loop it slides along" if lp.name == axis else \
                    f"a loop between {st.store_at or 'the root'} and {axis}"
                raise ScheduleError(f"{where}: loop {lp.name} of {consumer} is {lp.kind}, and it is {what}; a sliding "
                                    f"window needs its iterations in order, one after another (make {lp.name} "
                                    f"serial, or store {name} inside it)")
        if self.read_padded(name):
            raise ScheduleError(f"{where}: a read of {name} may fall outside its domain (padding), which needs its "
                                "whole buffer")
        if any(t == name for other in self.state.stages.values() for t, _, _ in other.cache_reads):
            raise ScheduleError(f"{where}: a cache_read copies {name}, which needs its whole buffer")
        loop = prefix + axis
        moving = []
        for d, m in enumerate(region.mins):
            terms, _ = _linear(m)
            for atom, coef in terms.items():
                if loop not in variables(atom) or not coef:
                    continue
                if not (isinstance(atom, ir.Var) and atom.name == loop):
                    raise ScheduleError(f"{where}: the rows of {name} that {consumer} reads start at {m} in "
                                        f"dimension {d}, not a constant step of loop {axis}; a sliding window needs "
                                        "a start that moves by a constant step")
                if coef < 0:
                    raise ScheduleError(f"{where}: the part of {name} that {consumer} reads moves backwards as loop "
                                        f"{axis} runs (start {m} in dimension {d}); a sliding window needs its start "
                                        "and end non-decreasing in the loop")
                moving.append((d, coef))
        if len(moving) > 1:
            raise ScheduleError(f"{where}: the part of {name} that {consumer} reads moves with loop {axis} in "
                                f"dimensions {', '.join(str(d) for d, _ in moving)}; a sliding window slides along "
                                "one dimension")
        return moving[0] if moving else (None, 0)

    def slide_where(self, name: str, consumer: str) -> str:
        """How errors about the sliding stage `name` start: its store_at (or store_root) call."""
        at = self.state.stages[name].store_at
        return f"store_at({name}, {consumer}, {at})" if at else f"store_root({name})"

    def sliding(self, name: str, consumer: str, axis: str, region: Region, prefix: str, ranges: dict) -> ir.Stmt:
        """The statements computing the sliding stage `name` at loop `axis` of `consumer`: all of `region` at the
        loop's first iteration, else only its part that the previous iteration did not compute."""
        d, step = self.slide_dim(name, consumer, axis, region, prefix)
        lp = self.state.stages[consumer].nest.loops[self.state.stages[consumer].nest.index("compute_at", axis)]
        first = ir.Cmp("==", ir.Var(prefix + axis), ir.const(lp.lo))
        whole = self.stage(name, region)
        if d is None:  # the part does not move: computed once a sweep of the loop
            return ir.If(first, whole)
        new = min(step, region.extents[d])  # the rows the part gains per iteration
        mins = list(region.mins)
        mins[d] = simplify(ir.BinOp("+", region.mins[d], ir.const(region.extents[d] - new)))
        exts = list(region.extents)
        exts[d] = new
        shape = self.bound.shapes[name]
        starts = [interval(m, ranges) for m in mins]
        part = Region(mins, exts, tuple(r is not None and r[0] >= 0 for r in starts),
                      tuple(r is not None and r[1] + e <= n for r, e, n in zip(starts, exts, shape)))
        return ir.If(first, whole, self.stage(name, part))

    def slide_storage(self, name: str, consumer: str, axis: str, region: Region, prefix: str, body: ir.Stmt,
                      ranges: dict, defs: dict) -> ir.Stmt:
        """`body` (the compute loop's body) with the sliding stage `name`'s accesses moved to its own buffer: along
        the sliding dimension, the rows that one sweep of the compute loop covers (or a ring of the fold factor,
        at its indices modulo the factor), the other dimensions over `region`; the buffer is allocated at the
        store level (`slide_allocs`)."""
        st = self.state.stages[name]
        d, step = self.slide_dim(name, consumer, axis, region, prefix)
        where = f"fold_storage({name}, {st.fold[0]}, {st.fold[1]})" if st.fold else self.slide_where(name, consumer)
        fold = None
        shape = list(region.extents)
        mins = list(region.mins)
        if st.fold:
            dims = self.bound.stages[name].stage.lhs_vars
            if d is None or dims[d] != st.fold[0]:
                moves = f"it slides along {dims[d]}" if d is not None else "its part does not move"
                raise ScheduleError(f"{where}: {name} does not slide along {st.fold[0]} ({moves}); fold the "
                                    "dimension that slides")
            if st.fold[1] < region.extents[d]:
                raise ScheduleError(f"{where}: {region.extents[d]} rows of {name} along {st.fold[0]} are live at "
                                    f"once (what one iteration of {consumer}.{axis} reads); the fold factor must be "
                                    f"at least {region.extents[d]}")
            fold = (d, st.fold[1])
            shape[d], mins[d] = st.fold[1], ir.const(0)
        elif d is not None:  # from the start at the loop's first iteration, for its whole sweep
            nest = self.state.stages[consumer].nest
            lp = nest.loops[nest.index("compute_at", axis)]
            mins[d] = simplify(ir.substitute(region.mins[d], {prefix + axis: ir.const(lp.lo)}))
            shape[d] = (lp.extent - 1) * step + region.extents[d]
        stored = _local_buffer(name, self.buffers[name].dtype, tuple(shape))
        moved = _relocate(body, name, stored, mins, defs, fold)
        if not _indices_inside(moved, stored, ranges, defs):
            raise ScheduleError(f"{where}: {name}'s sliding buffer {list(shape)} does not "
                                f"provably hold every access to it ({self.why_shared(name, region)})")
        self.slide_allocs.setdefault((consumer, st.store_at or ""), []).append(stored)
        self.local_stages.add(name)
        return moved

    def check_shared(self, producer: str, consumer: str, axis: str, region: Region, prefix: str,
                     outer_loops: list) -> None:
        """Refuse a producer computed at loop `axis` of `consumer` into its whole (shared) buffer where the regions
        of different iterations of an enclosing parallel loop overlap: two threads would write the same elements.
        (A producer stored in a buffer of its own inside the loop may overlap: each iteration recomputes its part,
        as Halide's compute_at does over tiles.)"""
        for lp in outer_loops:
            if lp.kind == "parallel" and not _disjoint(region, prefix + lp.name):
                where = "outside it" if lp.name == axis else f"at {lp.name} or outside it"
                raise ScheduleError(f"compute_at({producer}, {consumer}, {axis}): {consumer}'s loop {lp.name} is "
                                    f"parallel, and the parts of {producer} that its iterations need overlap in "
                                    f"{producer}'s whole buffer (two threads would write the same elements; it "
                                    f"cannot have a buffer of its own there: {self.why_shared(producer, region)}); "
                                    f"compute {producer} {where}, or parallelise another loop")

    def stored_here(self, name: str, region: Region) -> bool:
        """Whether stage `name`, computed at a loop over `region`, can keep just that region in a buffer allocated
        inside the loop (as Halide's compute_at stores at the same level), rather than its whole shape at the
        root: every start of the region provably >= 0, smaller than the whole, and no read of the stage that
        may fall outside its domain (padding reads 0 where the whole buffer ends, not where the region does)
        or that copies it (cache_read)."""
        if not region.inside or not all(region.inside):
            return False
        if math.prod(region.extents) >= math.prod(self.bound.shapes[name]):
            return False
        if any(t == name for st in self.state.stages.values() for t, _, _ in st.cache_reads):
            return False
        return not self.read_padded(name)

    def why_shared(self, name: str, region: Region) -> str:
        """Why stage `name`, computed at a loop over `region`, is not stored in a buffer of its own there (the
        first condition of stored_here that fails, else a tail loop reading past the region)."""
        if not region.inside or not all(region.inside):
            return "its region may start before 0 or end past its shape"
        if math.prod(region.extents) >= math.prod(self.bound.shapes[name]):
            return "its region is as large as its whole shape"
        if any(t == name for st in self.state.stages.values() for t, _, _ in st.cache_reads):
            return "a cache_read copies it"
        if self.read_padded(name):
            return "a read of it may fall outside its domain (padding)"
        return "a tail loop of a split reads past its region"

    def read_padded(self, name: str) -> bool:
        """Whether some read of stage `name` (directly, or through stages inlined into their readers) may fall
        outside its domain."""
        for s in self.op.stages:
            bs = self.bound.stages[s.name]
            for access, pad in zip(s.accesses(), bs.padded):
                if access.tensor == name and (pad or (s.name in self.inlined and self.read_padded(s.name))):
                    return True
        return False

    def regions_read(self, reader, region_read, tensor: str) -> list[Region]:
        """The parts of `tensor` that stage `reader` reads, directly or through the stages inlined into it;
        `region_read(name)` is the part of `name` that `reader` reads directly."""
        out = []
        for t in reader.reads():
            if t == tensor:
                out.append(region_read(t))
            elif t in self.inlined and self.reads_through_inlined(t, tensor):
                inlined = region_read(t)  # only on the way to `tensor`: the region may need a reader's region
                out += self.regions_read(self.bound.stages[t].stage,
                                         lambda u, t=t, inlined=inlined: self.region_via(t, inlined, u), tensor)
        return out

    def reads_through_inlined(self, name: str, tensor: str) -> bool:
        """Whether inlined stage `name` reads `tensor`, directly or through other inlined stages."""
        return any(u == tensor or (u in self.inlined and self.reads_through_inlined(u, tensor))
                   for u in self.bound.stages[name].stage.reads())

    def region_via(self, reader: str, reader_region: Region, tensor: str) -> Region:
        """The part of `tensor` that stage `reader` reads while it computes `reader_region`."""
        s = self.bound.stages[reader].stage
        bs = self.bound.stages[reader]
        env: dict[str, ir.Expr] = {}
        ranges = {}
        for d, v in enumerate(s.lhs_vars):
            local = ir.Var(f"{reader}.{v}.local")
            env[v] = ir.BinOp("+", reader_region.mins[d], local)
            ranges[local.name] = (0, reader_region.extents[d] - 1)
        for v in s.red_vars:
            lo, ext = bs.ranges[v]
            red = env[v] = ir.Var(f"{reader}.{v}")
            ranges[red.name] = (lo, lo + ext - 1)
        return self.region_of(s, tensor, {v: simplify(e) for v, e in env.items()}, set(ranges), ranges)

    def cache_reads(self, name, nest, exprs, ranges, prefix) -> dict[str, tuple]:
        """The cache_read buffers of stage `name`: tensor -> (unprefixed loop name, LocalCopy)."""
        s = self.bound.stages[name].stage
        out = {}
        for tensor, axis, layout in self.state.stages[name].cache_reads:
            i = nest.index("cache_read", axis)
            free = {prefix + lp.name for lp in nest.loops[i + 1:]}
            region = self.region_of(s, tensor, exprs, free, ranges)
            parts = _layout(layout, len(region.extents))
            shape = []
            for d, kind, block in parts:
                ext = region.extents[d]
                shape.append(-(-ext // block) if kind == "outer" else block if kind == "inner" else ext)
            buf = _local_buffer(f"{tensor}_{name}_local", self.bound.dtypes[tensor], tuple(shape))
            out[tensor] = (axis, LocalCopy(buf, region, parts))
        return out

    def copies_at(self, copies: dict, loop_name: str, ranges: dict, threads: bool = False) -> list[tuple]:
        """(LocalCopy, copy loop nest) for each tensor cached at loop `loop_name`: the region, read with padding
        (0 outside the tensor), stored in the local layout. There is one loop per dimension of the local buffer,
        so no index is divided; a panel's last block may hold a few extra elements.
        The innermost loop is the buffer's innermost dimension (contiguous stores); the loops around it go by their
        step in the tensor, largest outermost, so that the reads run along its rows (B's panels copied row by row
        of B, not panel by panel, which streams the reads). With `threads`, the outermost copy loop
        (when it has more than one iteration) is parallel. A transposing copy goes in tiles transposed in registers
        (:func:`_transposed_copy`)."""
        out = []
        for tensor, (axis, lc) in copies.items():
            if axis != loop_name:
                continue
            src = self.buffers[tensor]
            pvars = [ir.Var(f"{lc.buffer.name}_{i}") for i in range(len(lc.layout))]
            logical: dict[int, ir.Expr] = {}
            for pv, (d, kind, block) in zip(pvars, lc.layout):
                if kind == "outer":
                    logical[d] = ir.BinOp("*", pv, ir.const(block))
                elif kind == "inner":
                    logical[d] = ir.BinOp("+", logical[d], pv)
                else:
                    logical[d] = pv
            glob = tuple(simplify(ir.BinOp("+", m, logical[d])) for d, m in enumerate(lc.region.mins))
            inside = _copy_inside(lc, src.shape, ranges)
            fast = _transposed_copy(lc, src, pvars, glob, ranges, threads, checked=inside is not None)
            if fast is not None and inside is None:
                out.append((lc, fast))
                continue
            body: ir.Stmt = ir.Store(lc.buffer, tuple(pvars), ir.Load(src, glob, pad=True))
            for depth, i in reversed(list(enumerate(_copy_order(pvars, glob, src.shape)))):
                ext = lc.buffer.shape[i]
                kind = "parallel" if threads and depth == 0 and _may_exceed_one(ext) else "serial"
                body = ir.For(pvars[i], ir.const(0), ir.const(ext), body, kind)
            if inside is not None:  # the same copy twice: where the test holds, no read needs its padding guard
                body = ir.If(inside, fast if fast is not None else body, body)
            out.append((lc, body))
        return out


TRANSPOSE_TILE = 16
"""Tiles of a transposing copy (:func:`_transposed_copy`): the f32 lanes of an AVX-512 register."""


def _transposed_copy(lc: LocalCopy, src: ir.Buffer, pvars: list, glob: tuple, ranges: dict,
                     threads: bool, checked: bool = False) -> ir.Stmt | None:
    """A copy whose innermost local dimension is strided in the source (the filters `Wt[f, c, r, s]` of a
    convolution packed as `[c][r][s][f]`, `f` innermost) written as tiles the code generator transposes in
    registers (`codegen_llvm._Emitter.transposed_tile`), or None where the copy is not one.

    It is one when the local dimensions just inside the innermost one are whole, in the source's order, and are
    the source's last dimensions, wholly covered but the first (a block of a matmul's reduction, say): read as
    one dimension of the source (a view of it with those merged: a contiguous run) and of the local buffer
    (stride: the innermost extent), the copy is a
    transpose of that merged dimension Q and the innermost one V. Tiles of 16 x 16 of it (the read contiguous
    along Q, the write along V), then what is left of Q and of V in plain loops; the whole copy provably inside
    the source, so nothing is guarded, or `checked`: run only where the test of `_copy_inside` holds (the last
    block of a reduction that a block does not divide keeps the guarded copy). 4-byte elements, Q and V of at
    least one tile.

    Before and after, `Wt: f32[512, 256, 3, 3]` copied at `f_b` (64 filters):

        for c in 0:256:                        for q_o in 0:144:
          for r in 0:3:                          for v_o in 0:4:
            for s in 0:3:                          for q_i in 0:16:
              for f in 0:64:                         for v_i in 0:16:  # vectorized
                L[c, r, s, f] = Wt[f_b*64 + f,         L'[q_o*16 + q_i, v_o*16 + v_i] =
                                   c, r, s]                Wt'[f_b*64 + v_o*16 + v_i, q_o*16 + q_i]

    (`L'` and `Wt'`: the same memory as [2304, 64] and [512, 2304].)
    """
    parts, shape = lc.layout, lc.buffer.shape
    if DTYPES[src.dtype].itemsize != 4 or len(parts) < 2 or parts[-1][1] == "outer":
        return None
    d_v = parts[-1][0]
    rank = len(src.shape)
    m = 0  # how many parts just inside the innermost one merge: whole, the source's last dims in order
    while m < len(parts) - 1:
        d, kind, _ = parts[-2 - m]
        if kind != "whole" or d != rank - 1 - m or d == d_v:
            break
        m += 1
    k = rank - m  # the merged source dims are k .. rank-1
    if m == 0 or d_v >= k:
        return None
    for d in range(k + 1, rank):  # wholly copied, so that the merged region is one contiguous run of the source
        lo = interval(lc.region.mins[d], ranges)
        if lo != (0, 0) or shape[len(parts) - 1 - (rank - d)] != src.shape[d]:
            return None
    inner = math.prod(src.shape[k + 1:])
    Q, V, T = shape[len(parts) - 1 - (rank - k)] * inner, shape[-1], TRANSPOSE_TILE
    if not (proven(Q, ">=", T) and proven(V, ">=", T)):  # below the tile (for some sizes only): a plain copy
        return None
    start = simplify(ir.BinOp("*", lc.region.mins[k], ir.const(inner)))  # where the run begins (a block of k)
    outer = list(range(len(parts) - 1 - m))  # the local dims outside the merged ones
    src_view = ir.Buffer(src.name, src.dtype, tuple(src.shape[:k]) + (math.prod(src.shape[k:]),), src.role)
    dst_view = ir.Buffer(lc.buffer.name, lc.buffer.dtype, tuple(shape[i] for i in outer) + (Q, V),
                         lc.buffer.role)
    pv = pvars[-1]
    q, v = ir.Var(f"{lc.buffer.name}_q"), ir.Var(f"{lc.buffer.name}_v")

    def reads(q: ir.Expr, v: ir.Expr) -> tuple:
        """The view's indices of the element the copy stores at (q, v)."""
        return tuple(simplify(ir.substitute(glob[d], {pv.name: v})) for d in range(k)) + \
            (simplify(ir.BinOp("+", start, q)),)

    if not checked:  # every read provably inside the source, so that nothing is guarded
        env = {**ranges, **{pvars[i].name: (0, shape[i] - 1) for i in outer}, q.name: (0, Q - 1), v.name: (0, V - 1)}
        for x, n in zip(reads(q, v), src_view.shape):
            r = interval(x, env)
            if r is None or not proven(r[0], ">=", 0) or not proven(r[1], "<=", n - 1):
                return None

    def copy(q: ir.Expr, v: ir.Expr) -> ir.Stmt:
        return ir.Store(dst_view, tuple(pvars[i] for i in outer) + (q, v), ir.Load(src_view, reads(q, v)))

    def loops(body: ir.Stmt, spans: list) -> ir.Stmt:
        for var, lo, ext, kind in reversed(spans):
            body = ir.For(var, ir.const(lo), ir.const(ext), body, kind)
        return body

    qo, qi, vo, vi = (ir.Var(f"{lc.buffer.name}_{n}") for n in ("q_o", "q_i", "v_o", "v_i"))
    Qm, Vm = Q // T * T, V // T * T
    tile_q = simplify(ir.BinOp("+", ir.BinOp("*", qo, ir.const(T)), qi))
    tile_v = simplify(ir.BinOp("+", ir.BinOp("*", vo, ir.const(T)), vi))
    # with `threads`, the outermost loop with more than one iteration is parallel, as for any copy
    spans = [(pvars[i], 0, shape[i], "parallel" if threads and n == 0 and shape[i] > 1 else "serial")
             for n, i in enumerate(outer)]
    first = "parallel" if threads and not spans and Qm // T > 1 else "serial"
    pieces = [loops(copy(tile_q, tile_v), [(qo, 0, Qm // T, first), (vo, 0, Vm // T, "serial"),
                                           (qi, 0, T, "serial"), (vi, 0, T, "vectorized")])]
    if Vm < V:
        pieces.append(loops(copy(q, v), [(q, 0, Qm, "serial"), (v, Vm, V - Vm, "serial")]))
    if Qm < Q:
        pieces.append(loops(copy(q, v), [(q, Qm, Q - Qm, "serial"), (v, 0, V, "serial")]))
    return loops(ir.seq(*pieces), spans)


def _copy_order(pvars: list, glob: tuple, shape: tuple) -> list[int]:
    """The order of a copy's loops (indices into `pvars`): the innermost stays innermost (contiguous stores); the
    others go by their step in the source (`glob`, indices into a tensor of `shape`), largest outermost, so that
    the reads run along the source's rows. Loops with the same step keep the buffer's order."""
    strides, stride = [0] * len(shape), 1
    for d in range(len(shape) - 1, -1, -1):
        strides[d], stride = stride, stride * shape[d]
    step = [0] * len(pvars)
    for d, g in enumerate(glob):
        terms, _ = _linear(g)
        for i, pv in enumerate(pvars):
            step[i] += abs(terms.get(pv, 0)) * strides[d]
    outer = sorted(range(len(pvars) - 1), key=lambda i: -representative(step[i]))
    return outer + [len(pvars) - 1] if pvars else []


def _copy_inside(lc: LocalCopy, shape: tuple, ranges: dict) -> ir.Expr | None:
    """The test, on the loops around a cache_read copy, that every element the copy reads (its whole local buffer,
    the padding of a last block included) lies inside the tensor of `shape`; None where that is provable from
    `ranges` alone, or where the buffer covers more than the tensor. Versioning the copy on it lets the interior
    blocks copy without a guard per element (a guarded read is a gather in vector code)."""
    covered = list(lc.region.extents)
    for (d, kind, block), n in zip(lc.layout, lc.buffer.shape):
        if kind == "outer":
            covered[d] = n * block
    conds = []
    for m, ext, n in zip(lc.region.mins, covered, shape):
        if proven(ext, ">", n):
            return None
        r = interval(m, ranges)
        if r is None or not proven(r[0], ">=", 0):
            conds.append(ir.Cmp(">=", m, ir.const(0)))
        if r is None or not proven(r[1], "<=", n - ext):
            conds.append(ir.Cmp("<=", m, ir.const(n - ext)))
    return ir.all_of(conds) if conds else None


def _relocate(s: ir.Stmt, name: str, local: ir.Buffer, mins: list, defs: dict, fold: tuple | None = None) -> ir.Stmt:
    """`s` with every access to buffer `name` made an access to `local`, which holds the region starting at `mins`
    (index minus start, with the Let-bound index variables expanded so that the difference simplifies); `fold`
    (dimension, factor): that index taken modulo the factor (a ring buffer, fold_storage)."""
    def e(x):
        return _relocate_expr(x, name, local, mins, defs, fold)
    if isinstance(s, ir.Store):
        if s.buffer.name == name:
            return ir.Store(local, _local_index(tuple(e(i) for i in s.indices), mins, defs, fold), e(s.value))
        return ir.Store(s.buffer, tuple(e(i) for i in s.indices), e(s.value))
    if isinstance(s, ir.Seq):
        return ir.Seq(tuple(_relocate(x, name, local, mins, defs, fold) for x in s.stmts))
    if isinstance(s, ir.For):
        return ir.For(s.var, e(s.lo), e(s.extent), _relocate(s.body, name, local, mins, defs, fold), s.kind)
    if isinstance(s, ir.If):
        return ir.If(e(s.cond), _relocate(s.then, name, local, mins, defs, fold),
                     None if s.orelse is None else _relocate(s.orelse, name, local, mins, defs, fold))
    if isinstance(s, ir.Let):
        inner = {**defs, s.var.name: ir.substitute(s.value, defs)}
        return ir.Let(s.var, e(s.value), _relocate(s.body, name, local, mins, inner, fold))
    if isinstance(s, ir.Allocate):
        return ir.Allocate(s.buffer, _relocate(s.body, name, local, mins, defs, fold))
    return s


def _indices_inside(s: ir.Stmt, buf: ir.Buffer, ranges: dict, lets: dict) -> bool:
    """Whether every access to `buf` in `s` is provably inside it from the loop ranges (`ranges`: those of the
    loops around `s`) and the conditions of the Ifs around it (`lets`: the Let-bound variables around `s`, by
    name, expanded), so that the bounds check needs no guard for it."""
    def inside(indices, env) -> bool:
        bounds = [interval(i, env) for i in indices]
        return all(r is not None and 0 <= r[0] and r[1] < n for r, n in zip(bounds, buf.shape))

    def reads_inside(exprs, env) -> bool:
        return all(inside(ld.indices, env) for e in exprs for ld in ir.loads(e) if ld.buffer.name == buf.name)

    def walk(x, env) -> bool:
        if isinstance(x, ir.Seq):
            return all(walk(y, env) for y in x.stmts)
        if isinstance(x, ir.Store):
            return (x.buffer.name != buf.name or inside(x.indices, env)) and reads_inside([x.value, *x.indices], env)
        if isinstance(x, ir.If):
            then = assume(x.cond, env)
            return reads_inside([x.cond], env) and walk(x.then, then) and (x.orelse is None or walk(x.orelse, env))
        if isinstance(x, ir.Allocate):
            return walk(x.body, env)
        if isinstance(x, (ir.For, ir.Let)):
            inner = {k: v for k, v in env.items() if k != x.var.name}
            if isinstance(x, ir.Let):
                inner[DEFS] = {**env[DEFS], x.var.name: ir.substitute(x.value, env[DEFS])}
            if isinstance(x, ir.For):
                lo, ext = interval(x.lo, env), interval(x.extent, env)
                r = None if lo is None or ext is None else (lo[0], lo[1] + ext[1] - 1)
            else:
                r = interval(x.value, env)
            if r is not None:
                inner[x.var.name] = r
            return (isinstance(x, ir.For) or reads_inside([x.value], env)) and walk(x.body, inner)
        return True

    return walk(s, {**ranges, DEFS: dict(lets)})


def _local_index(indices: tuple, mins: list, defs: dict, fold: tuple | None = None) -> tuple:
    out = [simplify(ir.BinOp("-", ir.substitute(i, defs), m)) for i, m in zip(indices, mins)]
    if fold is not None:
        out[fold[0]] = simplify(ir.BinOp("%", out[fold[0]], ir.const(fold[1])))
    return tuple(out)


def _relocate_expr(x: ir.Expr, name: str, local: ir.Buffer, mins: list, defs: dict,
                   fold: tuple | None = None) -> ir.Expr:
    def move(n):
        if isinstance(n, ir.Load) and n.buffer.name == name:
            return ir.Load(local, _local_index(n.indices, mins, defs, fold), n.pad, n.guard)
        return n
    return ir.map_expr(x, move)


def _disjoint(region: Region, loop: str) -> bool:
    """True when the regions for different values of `loop` cannot overlap: in some dimension the start moves
    by at least the extent from one iteration to the next."""
    for m, ext in zip(region.mins, region.extents):
        terms, _ = _linear(m)
        for atom, coef in terms.items():
            if isinstance(atom, ir.Var) and atom.name == loop and abs(coef) >= ext:
                return True
    return False


def _union(a: Region, b: Region, shape: tuple) -> Region:
    """The smallest region (of this form) holding both; a dimension whose starts move differently is whole."""
    mins, exts = [], []
    for d in range(len(shape)):
        ta, ca = _linear(a.mins[d])
        tb, cb = _linear(b.mins[d])
        if ta == tb:
            lo = min(ca, cb)
            hi = max(ca + a.extents[d], cb + b.extents[d])
            mins.append(simplify(ir.BinOp("+", ir.BinOp("-", a.mins[d], ir.const(ca)), ir.const(lo))))
            exts.append(hi - lo)
        else:
            mins.append(ir.const(0))
            exts.append(shape[d])
    return Region(mins, exts)


def _local_buffer(name: str, dtype: str, shape: tuple) -> ir.Buffer:
    """A buffer local to a loop body: on the stack when small (LLVM can keep it in registers), else on the heap."""
    size = math.prod(shape) * DTYPES[dtype].itemsize
    return ir.Buffer(name, dtype, shape, "stack" if proven(size, "<=", STACK_LIMIT_BYTES) else "local")


def _boundary_whole(e: ir.Expr, ranges: dict, extent: int) -> tuple[ir.Expr, int]:
    """The constant range a boundary index `e` (clamp, mirror, ...) may take over the loops' `ranges`: the whole
    dimension [0, extent), widened to the values the index takes where a loop runs past its stage's domain (the
    tail of a split computed into a cache_write buffer): a mirror of `i + 1` at i = N is -1 there. The parser
    proved it inside the dimension on the domain only.

    >>> _boundary_whole(ir.Var("i"), {"i": (-1, 4)}, 4)
    (IntImm(value=-1, dtype='i64'), 6)
    """
    r = interval(simplify(e), ranges)
    if r is None or not isinstance(r[0], int) or not isinstance(r[1], int):
        return ir.const(0), extent
    lo, hi = min(0, r[0]), max(extent - 1, r[1])
    return ir.const(lo), hi - lo + 1


def _layout(layout: tuple, rank: int) -> list:
    """[(dim, kind, block)] from a cache_read layout; dimensions it leaves out follow, whole, in order."""
    out = []
    seen: dict[int, int] = {}
    for d, b in layout:
        if d in seen:
            out.append((d, "inner", seen[d]))
        elif b > 0:
            out.append((d, "outer", b))
            seen[d] = b
        else:
            out.append((d, "whole", 0))
            seen[d] = 0
    for d in range(rank):
        if d not in seen:
            out.append((d, "whole", 0))
    return out


class ValueLowering:
    """Turns a stage's value expression into IR, given IR expressions for its index variables."""

    def __init__(self, lowerer: Lowerer, stage: BoundStage, env: Mapping[str, ir.Expr], leaf_env: dict[str, ir.Expr],
                 copies: dict, ranges: dict, all_pad: bool = False, replace: dict | None = None,
                 used: ir.Expr | None = None):
        self.lowerer, self.stage, self.env, self.copies, self.ranges = lowerer, stage, env, copies, ranges
        # tensor -> the value every read of it gives (an epilogue's element of its producer)
        self.replace = replace or {}
        # inside an inlined stage read outside its domain, every read may fall outside: its value is dropped
        self.all_pad = all_pad
        # there, where the value is used (inside the domain; None: everywhere): gathered indices report errors only
        # where it holds
        self.used = used
        self.leaf_env = leaf_env  # index variables as expressions of the loops (for local copies)
        self.bound = lowerer.bound
        self.pads = dict(zip(map(id, stage.stage.accesses()), stage.padded))

    def __call__(self, e: Expr, want: str) -> ir.Expr:
        """Lower `e` computed in dtype `want` (literals and index values adapt; tensors must match)."""
        dt = want if e.weak else e.dtype
        if isinstance(e, Access):
            if e.tensor in self.replace:
                return _convert(self.replace[e.tensor], dt)
            if e.tensor in self.copies:
                _, lc = self.copies[e.tensor]
                logical = [self.index(e, d, self.leaf_env) for d in range(len(e.indices))]
                return _convert(ir.Load(lc.buffer, lc.index(logical, self.ranges)), dt)
            idx = tuple(self.index(e, d, self.env) for d in range(len(e.indices)))
            return _convert(self.read(e.tensor, idx, self.pads[id(e)]), dt)
        if isinstance(e, Literal):
            self.check_fits(e.value, dt, e, "the integer")
            return _constant(e.value, dt)
        if isinstance(e, IntValue):
            value = index_to_ir(e.expr, self.bound.sizes, self.env)
            if isinstance(value, ir.IntImm):  # sizes only
                self.check_fits(value.value, dt, e, "the value")
            return _convert(value, dt)
        if isinstance(e, Unary):
            if e.op == "not":
                return ir.Not(self(e.x, "bool"))
            return ir.Neg(self(e.x, dt))
        if isinstance(e, Binary):
            if e.op in ("and", "or"):
                return ir.Logic(e.op, self(e.a, "bool"), self(e.b, "bool"))
            if e.dtype == "bool":  # comparison: operands in their common dtype
                odt = e.operand_dtype
                if e.a.weak and e.b.weak:  # two Python numbers: compared exactly
                    odt = _PYTHON_NUMBER[odt]
                return ir.Cmp(e.op, self(e.a, odt), self(e.b, odt))
            if e.op == "/" and dt == "i32":  # the parser gives `/` a float dtype or refuses it
                raise TypeError(f"internal error: `/` lowered as an i32 operation ({e.loc})")
            return ir.BinOp(e.op, self(e.a, dt), self(e.b, dt))
        if isinstance(e, Call):
            if e.fn in DTYPES or e.fn.startswith("sat_"):  # a cast
                a = e.args[0]
                # weak values (`f64(0.1)`, `i32(i / 3)`, `f64(N * N)`) are Python numbers: computed exactly
                x = self(a, _PYTHON_NUMBER[a.dtype] if a.weak else a.dtype)
                return _convert(x, e.fn) if e.fn in DTYPES else _saturate(x, e.dtype)
            if e.fn == "select":
                return ir.Select(self(e.args[0], "bool"), self(e.args[1], dt), self(e.args[2], dt))
            if e.fn in ("max", "min", "clamp") and all(a.weak for a in e.args) and e.dtype in _PYTHON_NUMBER:
                # of Python numbers only (`max(pad, r)`): computed exactly, then converted (in a u16 program,
                # max(2, u16(-2)) would be 65534)
                return _convert(self._min_max(e, _PYTHON_NUMBER[e.dtype]), dt)
            if e.fn in ("max", "min", "clamp"):
                return self._min_max(e, dt)
            return ir.Call(e.fn, (self(e.args[0], dt),), dt)
        raise TypeError(f"cannot lower {e!r}")

    def _min_max(self, e: Call, dt: str) -> ir.Expr:
        """`max`, `min` or `clamp` computed in `dt`."""
        args = [self(a, dt) for a in e.args]
        if e.fn == "clamp":
            return ir.BinOp("min", ir.BinOp("max", args[0], args[1]), args[2])
        return ir.BinOp(e.fn, args[0], args[1])

    def index(self, a: Access, d: int, env: Mapping) -> ir.Expr:
        """Index `d` of the read `a` as an i64 IR expression: an affine index over the index variables' expressions
        in `env`, or a gathered one, computed from its reads and checked against the dimension."""
        ix = a.indices[d]
        if isinstance(ix, BoundaryIndex):
            return boundary_to_ir(ix, self.bound.sizes, env)
        if not isinstance(ix, GatherIndex):
            return index_to_ir(ix, self.bound.sizes, env)
        value = _convert(self(ix.value, ix.value.dtype), "i64")
        extent = self.bound.shapes[a.tensor][d]
        return ir.IndexCheck(value, extent, self.lowerer.sites[(id(a), d)], self.used)

    def check_fits(self, value, dtype: str, e: Expr, what: str) -> None:
        """BuildError when an integer constant is computed as an integer type it does not fit (it would wrap)."""
        fits = DTYPES[dtype].int_range if DTYPES[dtype].is_int else None
        if fits is not None and isinstance(value, int) and not fits[0] <= value <= fits[1]:
            raise BuildError(f"{self.bound.op.name}: {what} {value} (line {e.loc.line}, column {e.loc.col}) is "
                             f"computed as {dtype} here, where it does not fit (it would wrap; numpy refuses it "
                             "too); compute in floats (f64(...), or write it as a float), in a wider integer type "
                             "(i32(...) of the tensor), or keep it smaller")

    def read(self, tensor: str, idx: tuple, pad: bool) -> ir.Expr:
        """A read of `tensor` at global indices: from its cache_read copy, its inlined expression, or its buffer."""
        if tensor in self.lowerer.inlined:
            bs = self.bound.stages[tensor]
            env = {v: i for v, i in zip(bs.stage.lhs_vars, idx)}
            used = self.used
            if pad:
                inside = _in_domain(idx, bs.shape)
                used = inside if used is None else ir.Logic("and", used, inside)
            inner = ValueLowering(self.lowerer, bs, env, env, {}, self.ranges, all_pad=pad or self.all_pad,
                                  used=used)
            value = inner(bs.stage.rhs, bs.stage.dtype)
            if pad:  # reads outside the inlined stage's domain are 0, as they were from its buffer
                value = ir.Select(_in_domain(idx, bs.shape), value, _constant(0, bs.stage.dtype))
            return value
        return ir.Load(self.lowerer.buffers[tensor], idx, pad=pad or self.all_pad)


def lower(bound: BoundOp, state=None) -> ir.Func:
    """The whole function for a bound program and a replayed schedule (the default schedule when None).

    >>> import tensorlang as tl
    >>> from tensorlang.bind import bind
    >>> print(lower(bind(tl.op("def t(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0"), {"N": 4})))
    def t(X: f32[4], Y: f32[4]):
      for i in 0:4:
        Y[i] = X[i]*2f
    """
    if state is None:
        from .schedule import ScheduleState
        state = ScheduleState(bound)
    func = Lowerer(bound, state).function()
    symbolic = tuple(n for n, v in bound.sizes.items() if is_symbolic(v))
    body = tighten_loops(func.body)
    body = hoist_tail_guards(strip_symbolic_vectors(body) if symbolic else body)
    return dataclasses.replace(func, body=body, sizes=symbolic)


def strip_symbolic_vectors(s: ir.Stmt) -> ir.Stmt:
    """Every vectorized or unrolled loop whose extent is a symbolic size made pieces of a constant width W (the
    extent at the representative sizes, at most `MAX_VECTOR_LANES` lanes): the whole pieces as they are, then,
    where the extent is not a multiple of W, one vector whose lanes past the end are masked off, or a serial loop
    over the rest of an unrolled one (Halide's `specialize` on the tail).

    >>> import tensorlang as tl
    >>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=tl.Dim(1, 100, like=8))
    >>> s["B"].vectorize("i")
    >>> print(s.lowered())
    def f(A: f32[N], B: f32[N], N: i64):
      for i_v in 0:N//8:
        for i in i_v*8:i_v*8 + 8:  # vectorized
          B[i] = A[i]*2f
      if N - N//8*8 != 0:
        for i in N//8*8:N//8*8 + 8:  # vectorized
          if i < N:
            B[i] = A[i]*2f
    """
    if isinstance(s, ir.For):
        body = strip_symbolic_vectors(s.body)
        ext = s.extent.value if isinstance(s.extent, ir.IntImm) else None
        if s.kind not in ("vectorized", "unrolled") or not is_symbolic(ext):
            return dataclasses.replace(s, body=body)
        w = max(1, min(representative(ext), MAX_VECTOR_LANES if s.kind == "vectorized" else MAX_UNROLL))
        outer = ir.Var(f"{s.var.name}_v")
        lo_of = ir.BinOp("+", s.lo, ir.BinOp("*", outer, ir.const(w)))
        whole = ir.For(outer, ir.const(0), ir.const(ext // w),
                       ir.For(s.var, simplify(lo_of), ir.const(w), body, s.kind))
        start = simplify(ir.BinOp("+", s.lo, ir.const(ext // w * w)))
        end = simplify(ir.BinOp("+", s.lo, ir.const(ext)))
        if s.kind == "unrolled":
            tail: ir.Stmt = ir.For(s.var, start, ir.const(ext % w), body)
        else:
            tail = ir.For(s.var, start, ir.const(w), ir.If(ir.Cmp("<", s.var, end), body), "vectorized")
        return ir.seq(whole, ir.If(ir.Cmp("!=", ir.const(ext % w), ir.const(0)), tail))
    if isinstance(s, ir.Seq):
        return ir.seq(*(strip_symbolic_vectors(x) for x in s.stmts))
    if isinstance(s, ir.If):
        return dataclasses.replace(s, then=strip_symbolic_vectors(s.then),
                                   orelse=None if s.orelse is None else strip_symbolic_vectors(s.orelse))
    if isinstance(s, (ir.Let, ir.Allocate)):
        return dataclasses.replace(s, body=strip_symbolic_vectors(s.body))
    return s
