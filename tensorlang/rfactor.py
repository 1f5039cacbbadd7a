"""rfactor: a reduction split into a partial stage indexed by one of its reduction loops, and a combine stage.

``s["B"].rfactor("k_o")`` on ``B[m] += A[m, k]`` split ``k = k_o*F + k_i`` rewrites the program the schedule runs
(the program the user wrote, its inputs and outputs, stay as they are):

    B_rf[m, k_o] += A[m, k_o*F + k_i]      (partial: k_o is an output index now, so it can run in parallel)
    B[m] += B_rf[m, k_o]                   (combine: the same operator over the partials)

Where the split does not divide the reduction, the partial's right side is
``select(k_o*F + k_i < K, ..., identity)``, so the tail adds the operator's identity (0, 1, -inf, +inf or the
integer type's lowest / highest value). The order of the terms changes, so a floating-point sum or product
differs from the serial one by reassociation only; integer results and max / min are exact.

>>> import tensorlang as tl
>>> s = tl.schedule(tl.op("def f(A: f32[M, K]) -> B:\\n    B[m] += A[m, k]"), M=2, K=8)
>>> _ = s["B"].split("k", 4)
>>> s["B"].rfactor("k_o")
'B_rf'
>>> [st.text for st in s.state().bound.op.stages]
['B_rf[m, k_o] += A[m, k_i + 4*k_o]', 'B[m] += B_rf[m, k_o]']
"""
from __future__ import annotations

import dataclasses

from . import ir
from .bind import BoundOp, bind
from .dtypes import DTYPES
from .errors import DSLError, ScheduleError
from .loopnest import LoopNest
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
    Stage,
    Unary,
    WhereRange,
)
from .sizes import SizePoly


def affine_in_loops(e: ir.Expr) -> tuple[dict[str, int], int] | None:
    """An IR index expression as ({loop: coefficient}, constant) when it is affine in its variables, else None.

    >>> affine_in_loops(ir.BinOp("+", ir.BinOp("*", ir.Var("k_o"), ir.const(4)), ir.Var("k_i")))
    ({'k_o': 4, 'k_i': 1}, 0)
    >>> affine_in_loops(ir.BinOp("//", ir.Var("f"), ir.const(3))) is None
    True
    """
    if isinstance(e, ir.Var):
        return {e.name: 1}, 0
    if isinstance(e, ir.IntImm):
        return {}, int(e.value)
    if isinstance(e, ir.BinOp) and e.op in ("+", "-", "*"):
        a, b = affine_in_loops(e.a), affine_in_loops(e.b)
        if a is None or b is None:
            return None
        if e.op == "*":
            if a[0] and b[0]:
                return None
            (k, (terms, c)) = (a[1], b) if not a[0] else (b[1], a)
            return {v: x * k for v, x in terms.items() if x * k}, c * k
        sign = 1 if e.op == "+" else -1
        terms = dict(a[0])
        for v, x in b[0].items():
            terms[v] = terms.get(v, 0) + sign * x
        return {v: x for v, x in terms.items() if x}, a[1] + sign * b[1]
    return None


def _index(terms: dict[str, int], const: int) -> IndexExpr:
    out = IndexExpr.size(SizePoly.const(const))
    for v, c in terms.items():
        out = out + IndexExpr.var(v) * SizePoly.const(c)
    return out


def substitute_index_vars(e: Expr, mapping: dict[str, IndexExpr]) -> Expr:
    """`e` with index variables replaced by affine index expressions (in reads, gathered indices and values).

    >>> import tensorlang as tl
    >>> rhs = tl.op("def f(A: f32[K]) -> B:\\n    B[i] += A[k] where i in 0:1").stage("B").rhs
    >>> k = IndexExpr.var("k_o") * SizePoly.const(4) + IndexExpr.var("k_i")
    >>> str(substitute_index_vars(rhs, {"k": k}).indices[0])
    'k_i + 4*k_o'
    """
    def ix(x: IndexExpr) -> IndexExpr:
        out = IndexExpr.size(x.const)
        for v, c in x.terms:
            out = out + (mapping[v] * c if v in mapping else IndexExpr.var(v) * c)
        return out

    def go(x: Expr) -> Expr:
        if isinstance(x, Access):
            return dataclasses.replace(x, indices=tuple(
                type(i)(go(i.value), i.text) if isinstance(i, (GatherIndex, BoundaryIndex)) else ix(i)
                for i in x.indices))
        if isinstance(x, IntValue):
            return dataclasses.replace(x, expr=ix(x.expr))
        if isinstance(x, Unary):
            return dataclasses.replace(x, x=go(x.x))
        if isinstance(x, Binary):
            return dataclasses.replace(x, a=go(x.a), b=go(x.b))
        if isinstance(x, Call):
            return dataclasses.replace(x, args=tuple(go(a) for a in x.args))
        return x

    return go(e)


def rfactor_program(bound: BoundOp, nest: LoopNest, stage: str, axis: str, partial: str) -> BoundOp:
    """`bound` with reduction stage `stage` (its loops `nest`: its index variables and splits of its reduction
    variables) replaced by a partial stage `partial` indexed by `stage`'s indices and reduction loop `axis`, and a
    combine stage `stage` that reduces the partials over `axis` (see the module's docstring). A ScheduleError
    names what makes it illegal.

    >>> import tensorlang as tl
    >>> s = tl.schedule(tl.op("def f(A: i32[K]) -> B:\\n    B[i] max= A[k] where i in 0:1"), K=10)
    >>> _ = s["B"].split("k", 4)
    >>> b = rfactor_program(s.bound, s.state().stages["B"].nest, "B", "k_i", "P")
    >>> b.op.stage("P").text, b.shapes["P"]
    ('P[i, k_i] max= select(k_i + 4*k_o < 10, A[k_i + 4*k_o], -2147483648)', (1, 4))
    """
    where = f"rfactor({stage}, {axis})"
    op = bound.op
    s = op.stage(stage)
    assert s is not None, stage
    if s.reduce_op is None:
        raise ScheduleError(f"{where}: {stage} is not a reduction (it is written with `=`); rfactor splits a "
                            "stage written with +=, *=, max= or min=")
    if s.lhs is not None:
        raise ScheduleError(f"{where}: {stage} is a scatter (its left side indexes by data); `parallel` on one of its "
                            "loops already gives each iteration a private copy of the result, combined after the loop")
    lp = nest.loops[nest.index("rfactor", axis)]
    if not lp.reduction:
        raise ScheduleError(f"{where}: {axis} is a loop over an output index of {stage}, not a reduction loop "
                            f"(its reduction loops: {', '.join(q.name for q in nest.loops if q.reduction)})")
    taken = set(op.inputs) | {x.name for x in op.stages} | set(op.size_names)
    if not isinstance(partial, str) or not partial.isidentifier() or partial in taken:
        raise ScheduleError(f"{where}: the partial stage's name {partial!r} must be an identifier no input, stage "
                            "or size has; choose another name (partial=...)")
    mapping, conds = {}, []
    # the partial's index over `axis` starts at 0 (an unsplit reduction index may start elsewhere: shift it)
    ranges = {q.name: (q.lo, q.extent) for q in nest.loops if q.reduction}
    shift, ranges[axis] = ranges[axis][0], (0, ranges[axis][1])
    for v in s.red_vars:
        aff = affine_in_loops(nest.exprs[v])
        if aff is None:
            raise ScheduleError(f"{where}: reduction index {v} is {nest.exprs[v]}, not a sum of loops (fused "
                                "loops); rfactor works on a reduction split, not fused")
        aff = (aff[0], aff[1] + aff[0].get(axis, 0) * shift)
        mapping[v] = _index(*aff)
        lo, ext = bound.stages[stage].ranges[v]
        top = aff[1] + sum(c * (ranges[q][0] + ranges[q][1] - 1) for q, c in aff[0].items())
        if top > lo + ext - 1:  # a split that does not divide: the tail must add the identity
            conds.append((mapping[v], lo + ext))
    for e, b in nest.constraints:
        aff = affine_in_loops(e)
        if aff is None:  # a split's tail guard on a loop fused with another: `j_o_o*7 + i_o_o_j_o_i%7 < 1`
            raise ScheduleError(f"{where}: the tail guard {e} < {b} of a split that does not divide is not a sum of "
                                "loops (a loop of it was fused); rfactor before fusing, or split by a factor that "
                                "divides")
        conds.append((_index(*aff), b))
    rhs = substitute_index_vars(s.rhs, mapping)
    dt = DTYPES[s.dtype]
    if conds:
        loc = s.loc
        cond: Expr | None = None
        for ix, b in conds:
            c = Binary("bool", False, loc, "<", IntValue("i64", False, loc, ix), Literal("i64", False, loc, b), "i64")
            cond = c if cond is None else Binary("bool", False, loc, "and", cond, c, "bool")
        assert cond is not None
        rhs = Call(s.dtype, False, loc, "select", (cond, rhs, Literal(s.dtype, False, loc, dt.identity(s.reduce_op))),
                   s.dtype)
    lhs = s.lhs_vars + (axis,)
    red = tuple(q.name for q in nest.loops if q.reduction and q.name != axis)
    ranges.update({v: bound.stages[stage].ranges[v] for v in s.lhs_vars})

    def wheres(vs):
        return {v: WhereRange(SizePoly.const(ranges[v][0]), SizePoly.const(ranges[v][0] + ranges[v][1]), s.loc)
                for v in vs}

    sym = s.reduce_op if red else ""
    rf = Stage(partial, s.dtype, lhs, s.reduce_op if red else None, rhs, red, wheres(lhs + red), s.loc,
               {v: s.loc for v in lhs + red}, f"{partial}[{', '.join(lhs)}] {sym}= {_text(rhs)}")
    read = Access(s.dtype, False, s.loc, partial, tuple(IndexExpr.var(v) for v in lhs), (s.loc,) * len(lhs))
    combine = Stage(stage, s.dtype, s.lhs_vars, s.reduce_op, read, (axis,), wheres(lhs), s.loc,
                    {v: s.loc for v in lhs}, f"{stage}[{', '.join(s.lhs_vars)}] {s.reduce_op}= "
                                              f"{partial}[{', '.join(lhs)}]")
    i = [x.name for x in op.stages].index(stage)
    new_op = dataclasses.replace(op, stages=op.stages[:i] + (rf, combine) + op.stages[i + 1:])
    try:
        return bind(new_op, bound.sizes)
    except DSLError as e:  # a boundary read proven in bounds for the reduction's range, not for a split's tail
        raise ScheduleError(f"{where}: the partial stage {partial} cannot read as {stage} does over the split's "
                            f"tail ({str(e).splitlines()[0]}); split the reduction by a factor that divides its "
                            "extent") from None


def _text(e: Expr) -> str:
    """A right side as DSL-like text (for the partial stage's `text`, which error messages show)."""
    if isinstance(e, Access):
        return f"{e.tensor}[{', '.join(str(i) for i in e.indices)}]"
    if isinstance(e, IntValue):
        return str(e.expr)
    if isinstance(e, Literal):
        return repr(e.value) if not isinstance(e.value, float) else str(e.value)
    if isinstance(e, Unary):
        return f"-{_text(e.x)}" if e.op == "neg" else f"not {_text(e.x)}"
    if isinstance(e, Binary):
        return f"{_text(e.a)} {e.op} {_text(e.b)}"
    if isinstance(e, Call):
        return f"{e.fn}({', '.join(_text(a) for a in e.args)})"
    return "..."
