"""The schedule rules of a scan: a stage that reads itself at earlier elements along one index (`S[i] = S[i - 1] +
X[i]`, a column IIR `Y[y, x] = a * X[y, x] + b * Y[y - 1, x]`), computed in increasing order of that index.

Each element depends on the elements before it along the scan index with every other index equal, so:

* a loop the scan index is computed from (the scan loop, a part of it after `split`, a `fuse` of it with another
  loop) is never parallel or vectorized; the loops over the other indices may be anything;
* loops keep the scan index increasing: after a split of such a loop, the outer part stays outside the inner part
  (a reorder that puts them the other way round is refused). A fuse keeps the order of its two loops, so it is
  allowed, and so is any reorder of the scan loop against loops over other indices;
* the scan is computed at the root, in its own buffer: `compute_at` and `compute_inline` of it (its region would
  start after elements it reads), `cache_write` (its reads of itself would miss the tile), a `cache_read` of itself
  and `reverse_compute_inline` are refused.

>>> import tensorlang as tl
>>> s = tl.schedule(tl.op("def iir(X: f32[H, W]) -> Y:\\n    Y[y, x] = X[y, x] + 0.5 * Y[y - 1, x]"), H=8, W=16)
>>> s["Y"].vectorize("x")
>>> s["Y"].parallel("y")  # doctest: +IGNORE_EXCEPTION_DETAIL
Traceback (most recent call last):
ScheduleError: parallel(Y, y): Y is a scan along y ...
"""
from __future__ import annotations

from .errors import ScheduleError
from .ir import expr_vars
from .primitives import (
    Annotate,
    CacheRead,
    CacheWrite,
    ComputeAt,
    ComputeInline,
    Fuse,
    Primitive,
    Reorder,
    ReverseComputeInline,
    Split,
)
from .program import scan_axis


def check_scan_primitive(state, p: Primitive, describe: str) -> None:
    """Refuse `p` (written `describe` in errors), about to be applied to the schedule state `state`, when it breaks
    the order a scan stage needs (see the module docstring); nothing for a stage that is no scan.

    >>> import tensorlang as tl
    >>> s = tl.schedule(tl.op("def p(X: i32[N]) -> S:\\n    S[i] = S[i - 1] + X[i]"), N=64)
    >>> s["S"].split("i", 8, "i_o", "i_i")
    ('i_o', 'i_i')
    >>> s["S"].unroll("i_i")
    >>> s["S"].reorder("i_i", "i_o")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ScheduleError: reorder(S, i_i, i_o): S is a scan along i ...
    """
    s = state.bound.op.stage(p.stage)
    scan = scan_axis(s) if s is not None else None
    if scan is None:
        return
    axis = scan[0]
    what = f"{p.stage} is a scan along {axis} (it reads {p.stage}[{', '.join(_shifted(s.lhs_vars, axis, scan[1]))}])"
    if isinstance(p, Annotate) and p.kind in ("parallel", "vectorized"):
        if p.axis in expr_vars(state.stages[p.stage].nest.exprs[axis]):
            fix = "parallelise" if p.kind == "parallel" else "vectorize"
            raise ScheduleError(f"{describe}: {what}, and loop {p.axis} runs over {axis}: its iterations run one "
                                f"after another, in increasing order; {fix} a loop over another index of {p.stage}")
    elif isinstance(p, Reorder):
        _check_order(state, p, axis, describe, what)
    elif isinstance(p, (ComputeAt, ComputeInline)):
        raise ScheduleError(f"{describe}: {what}: each element needs every earlier one along {axis}, so it is "
                            f"computed at the root, in increasing order of {axis}")
    elif isinstance(p, CacheWrite):
        raise ScheduleError(f"{describe}: {what}, and its reads of itself would not see the elements held in a "
                            "local tile; a scan is written to its buffer element by element")
    elif isinstance(p, CacheRead) and p.tensor == p.stage:
        raise ScheduleError(f"{describe}: {what}; a copy of itself would be made before its elements are computed")
    elif isinstance(p, ReverseComputeInline):
        raise ScheduleError(f"{describe}: {what}; it has loops of its own and cannot be computed in another "
                            "stage's write-back")


def _shifted(lhs_vars, axis: str, offsets) -> list[str]:
    return [f"{v} - {offsets[0]}" if v == axis else v for v in lhs_vars]


def _check_order(state, p: Reorder, axis: str, describe: str, what: str) -> None:
    """After reorder `p`, every split of a loop the scan index is computed from keeps its outer part (and the loops
    made from it) outside its inner part."""
    nest = state.stages[p.stage].nest.copy()
    nest.reorder("reorder", tuple(p.axes))
    # the loops each loop was made from (itself included), replaying the stage's splits and fuses
    made_from: dict[str, set[str]] = {v: {v} for v in state.bound.op.stage(p.stage).all_vars}
    splits = []
    for q in state.loop_prims[p.stage]:
        if isinstance(q, Split):
            parent = made_from.pop(q.axis)
            if axis in parent:
                splits.append((q.axis, q.outer, q.inner))
            made_from[q.outer], made_from[q.inner] = parent | {q.outer}, parent | {q.inner}
        elif isinstance(q, Fuse):
            made_from[q.fused] = made_from.pop(q.outer) | made_from.pop(q.inner) | {q.fused}
    names = nest.names()
    for split_axis, outer, inner in splits:
        outs = [i for i, n in enumerate(names) if outer in made_from.get(n, ())]
        ins = [i for i, n in enumerate(names) if inner in made_from.get(n, ())]
        if outs and ins and max(outs) > min(ins):
            first, last = names[min(ins)], names[max(outs)]
            raise ScheduleError(f"{describe}: {what}, and this puts {first}{_made(first, inner)} outside "
                                f"{last}{_made(last, outer)}, parts of the split of {split_axis} into {outer} and "
                                f"{inner}: {axis} would not run in increasing order; keep {outer} outside {inner}")


def _made(loop: str, part: str) -> str:
    return "" if loop == part else f" (made from {part})"
