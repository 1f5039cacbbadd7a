"""The loops of one stage and how its index variables are computed from them.

A stage starts with one loop per index variable (left-side indices, then reduction indices). split, fuse,
reorder and the annotations change the list of loops and rewrite each index variable as an expression of
the loops: after `split("m", 32)`, `m = m_o*32 + m_i`.

>>> nest = LoopNest("C", [("m", 0, 100, False), ("k", 0, 8, True)])
>>> nest.split("split", "m", 32, "m_o", "m_i")
>>> [(l.name, l.extent) for l in nest.loops], str(nest.exprs["m"])
([('m_o', 4), ('m_i', 32), ('k', 8)], 'm_i + m_o*32')
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

from . import ir
from .errors import ScheduleError
from .simplify import simplify
from .symbolic import is_symbolic, representative

KINDS = ("serial", "parallel", "vectorized", "unrolled")
MAX_VECTOR_LANES = 64
MAX_UNROLL = 512


@dataclass
class Loop:
    """One loop of a stage: `for name in lo:lo+extent` of the given kind."""

    name: str
    lo: int
    extent: int
    kind: str
    reduction: bool


def _may_not_divide(extent, factor: int) -> bool:
    """Whether `factor` may leave a tail of `extent`: a symbolic extent (a size known at run time) may."""
    return True if is_symbolic(extent) else extent % factor != 0


substitute = ir.substitute
variables = ir.expr_vars


class LoopNest:
    """The loops of one stage, outermost first, and each index variable as an expression of them."""

    def __init__(self, stage: str, axes: list[tuple[str, int, int, bool]]):
        self.stage = stage
        self.loops = [Loop(name, lo, extent, "serial", red) for name, lo, extent, red in axes]
        self.exprs: dict[str, ir.Expr] = {name: ir.Var(name) for name, _, _, _ in axes}
        self.domains = {name: (lo, extent) for name, lo, extent, _ in axes}
        # `expr < bound` for loops that were split by a factor that does not divide them and are no index
        # variable themselves: their tails must be skipped, or an index would be visited twice
        self.constraints: list[tuple[ir.Expr, int]] = []

    def copy(self) -> LoopNest:
        """An independent copy."""
        return copy.deepcopy(self)

    def names(self) -> list[str]:
        """Loop names, outermost first."""
        return [lp.name for lp in self.loops]

    def index(self, prim: str, axis: str) -> int:
        """Position of loop `axis`; a ScheduleError names the primitive, stage and the loops there are."""
        for i, lp in enumerate(self.loops):
            if lp.name == axis:
                return i
        raise ScheduleError(f"{prim}({self.stage}, {axis}): stage {self.stage} has no loop {axis!r}; "
                            f"its loops are {', '.join(self.names())}")

    def _fresh(self, prim: str, axis: str, name: str) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ScheduleError(f"{prim}({self.stage}, {axis}): the new loop name {name!r} is not an identifier")
        if name in self.names() or name in self.exprs:
            raise ScheduleError(f"{prim}({self.stage}, {axis}): a loop or index named {name!r} exists already; "
                                "choose another name for the new loop")

    def _subst(self, name: str, value: ir.Expr) -> None:
        for v, e in self.exprs.items():
            self.exprs[v] = simplify(substitute(e, {name: value}))
        self.constraints = [(simplify(substitute(e, {name: value})), b) for e, b in self.constraints]

    def split(self, prim: str, axis: str, factor: int, outer: str, inner: str) -> None:
        """Split loop `axis` in two; a factor that does not divide the extent leaves a guarded tail."""
        i = self.index(prim, axis)
        lp = self.loops[i]
        if isinstance(factor, bool) or not isinstance(factor, int) or factor <= 0:
            raise ScheduleError(f"{prim}({self.stage}, {axis}): factor must be a positive integer, got {factor!r}")
        if lp.kind != "serial":
            raise ScheduleError(f"{prim}({self.stage}, {axis}): the loop is {lp.kind}; split it before "
                                "annotating it")
        self._fresh(prim, axis, outer)
        self._fresh(prim, axis, inner)
        if outer == inner:
            raise ScheduleError(f"{prim}({self.stage}, {axis}): outer and inner need different names")
        n_outer = -(-lp.extent // factor)
        self.loops[i:i + 1] = [Loop(outer, 0, n_outer, "serial", lp.reduction),
                               Loop(inner, 0, factor, "serial", lp.reduction)]
        value = ir.BinOp("+", ir.BinOp("*", ir.Var(outer), ir.const(factor)), ir.Var(inner))
        if _may_not_divide(lp.extent, factor) and axis not in self.domains:
            self.constraints.append((simplify(value), lp.extent))
        if lp.lo:
            value = ir.BinOp("+", value, ir.const(lp.lo))
        self._subst(axis, value)

    def fuse(self, prim: str, outer: str, inner: str, fused: str) -> None:
        """Fuse two adjacent loops (outer directly enclosing inner) into one."""
        i, j = self.index(prim, outer), self.index(prim, inner)
        if j != i + 1:
            raise ScheduleError(f"{prim}({self.stage}, {outer}, {inner}): {inner} must be the loop directly "
                                f"inside {outer}; the loops are {', '.join(self.names())}")
        a, b = self.loops[i], self.loops[j]
        if a.reduction != b.reduction:
            raise ScheduleError(f"{prim}({self.stage}, {outer}, {inner}): one is a reduction loop and the other "
                                "is not; only loops of the same sort fuse")
        if a.kind != "serial" or b.kind != "serial":
            raise ScheduleError(f"{prim}({self.stage}, {outer}, {inner}): fuse loops before annotating them")
        self._fresh(prim, f"{outer}, {inner}", fused)
        self.loops[i:j + 1] = [Loop(fused, 0, a.extent * b.extent, "serial", a.reduction)]
        f = ir.Var(fused)
        va = ir.BinOp("//", f, ir.const(b.extent))
        vb = ir.BinOp("%", f, ir.const(b.extent))
        if a.lo:
            va = ir.BinOp("+", va, ir.const(a.lo))
        if b.lo:
            vb = ir.BinOp("+", vb, ir.const(b.lo))
        self._subst(outer, va)
        self._subst(inner, vb)

    def reorder(self, prim: str, axes: tuple) -> None:
        """Put the named loops in the given order, in the positions they occupy now."""
        if len(set(axes)) != len(axes):
            raise ScheduleError(f"{prim}({self.stage}): a loop is named twice in {', '.join(axes)}")
        if len(axes) < 2:
            raise ScheduleError(f"{prim}({self.stage}): name at least two loops to reorder")
        positions = sorted(self.index(prim, a) for a in axes)
        by_name = {lp.name: lp for lp in self.loops}
        for pos, name in zip(positions, axes):
            self.loops[pos] = by_name[name]
        where = f"{prim}({self.stage}, {', '.join(axes)})"
        for i, lp in enumerate(self.loops):
            if lp.kind == "vectorized" and lp.reduction and i != len(self.loops) - 1:
                raise ScheduleError(f"{where}: the vectorized reduction loop {lp.name} would have loops inside it; "
                                    "it must stay innermost")
            if lp.kind == "vectorized":
                inner_par = [q.name for q in self.loops[i + 1:] if q.kind == "parallel"]
                if inner_par:
                    raise ScheduleError(f"{where}: the parallel loop {inner_par[0]} would be inside the vectorized "
                                        f"loop {lp.name}")

    def annotate(self, prim: str, axis: str, kind: str) -> None:
        """Mark loop `axis` vectorized, unrolled, parallel or serial, after checking it is legal."""
        i = self.index(prim, axis)
        lp = self.loops[i]
        where = f"{prim}({self.stage}, {axis})"
        if kind not in KINDS:
            raise ScheduleError(f"{where}: unknown loop kind {kind!r}; kinds are {', '.join(KINDS)}")
        if kind == "parallel" and lp.reduction:
            raise ScheduleError(f"{where}: {axis} is a reduction loop: its iterations accumulate into the same "
                                "element, so they cannot run on different threads; parallelise a loop over an "
                                "output index instead")
        if kind == "vectorized" and lp.reduction and i != len(self.loops) - 1:
            raise ScheduleError(f"{where}: {axis} is a reduction loop with loops inside it "
                                f"({', '.join(q.name for q in self.loops[i + 1:])}): its lanes would update the "
                                "same element at different times; vectorize it only as the innermost loop (the "
                                "lanes are then combined), or vectorize a loop over an output index")
        if kind == "vectorized" and lp.reduction and is_symbolic(lp.extent):
            raise ScheduleError(f"{where}: size {', '.join(sorted(lp.extent.sizes()))} is symbolic here, which is "
                                f"not supported for a vectorized reduction loop (extent {lp.extent}); split the loop "
                                "by a constant factor and vectorize the inner loop, or bind the size")
        if is_symbolic(lp.extent):  # lowered in pieces of its extent at the representative sizes
            pass
        elif kind == "vectorized":
            if lp.extent > MAX_VECTOR_LANES:
                raise ScheduleError(f"{where}: extent {lp.extent} is more than {MAX_VECTOR_LANES} lanes; split it "
                                    "and vectorize the inner loop")
        if kind == "vectorized":
            outer_vec = [q.name for q in self.loops if q.kind == "vectorized" and q is not lp]
            if outer_vec:
                raise ScheduleError(f"{where}: {outer_vec[0]} is vectorized already; one vectorized loop a stage")
            inner_par = [q.name for q in self.loops[i + 1:] if q.kind == "parallel"]
            if inner_par:
                raise ScheduleError(f"{where}: the loop inside it, {inner_par[0]}, is parallel; a parallel loop "
                                    "cannot run inside a vectorized one")
        if kind == "unrolled" and representative(lp.extent) > MAX_UNROLL:
            raise ScheduleError(f"{where}: extent {lp.extent} is more than {MAX_UNROLL} copies; split it and "
                                "unroll the inner loop")
        if kind == "parallel":
            others = [q.name for q in self.loops if q.kind == "parallel" and q is not lp]
            if others:
                raise ScheduleError(f"{where}: {others[0]} is parallel already; one parallel loop a stage "
                                    "(fuse the loops to parallelise more)")
            outer_vec = [q.name for q in self.loops[:i] if q.kind == "vectorized"]
            if outer_vec:
                raise ScheduleError(f"{where}: it is inside the vectorized loop {outer_vec[0]}")
        lp.kind = kind

    def level(self, axis: str | None) -> int:
        """Number of loops up to and including `axis` (0 for None, the root)."""
        return 0 if axis is None else self.index("level", axis) + 1

    def pure_names(self) -> list[str]:
        """Names of the loops over left-side indices."""
        return [lp.name for lp in self.loops if not lp.reduction]
