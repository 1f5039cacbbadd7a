"""A fast path for symbolic sizes that are multiples of the schedule's split factors (Halide's `specialize`).

A schedule replayed on a symbolic size `N` gives every split of a loop over `N` a guarded tail, since the factor
may not divide `N`. When the sizes a kernel is called with are multiples of the factors (the common case: powers
of two, a model's sizes), the tails are empty and the guards only cost. So the kernel holds two versions of the
loop nest: one lowered with `N = L * N'` (L the least common multiple of the factors that split loops over N, N'
a size of its own), whose splits divide and need no tail, and the general one; which runs is decided once per
call, on `N % L == 0` for every such size.
"""
from __future__ import annotations

import dataclasses
import math

from . import ir
from .bind import bind
from .primitives import Fuse, Split
from .symbolic import Sym, SymbolicRefusal, size_name, size_var


def split_multiples(sched) -> dict[str, int]:
    """For each symbolic size, the least common multiple of the factors by which the schedule splits loops over it
    (a loop over the whole size, or the outer loop of such a split), where that is more than 1 and some multiple
    of it lies in the size's range.

    >>> import tensorlang as tl
    >>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=tl.Dim(1, 100, like=32))
    >>> _ = s["B"].split("i", 8)
    >>> _ = s["B"].split("i_o", 2)
    >>> split_multiples(s)
    {'N': 16}
    """
    loops: dict[tuple[str, str], tuple[str, int]] = {}  # (stage, loop) -> (size, the product of factors above it)
    for name, st in sched.bound.stages.items():
        for v, (lo, extent) in st.ranges.items():
            size = size_name(extent)
            if lo == 0 and size is not None:
                loops[(name, v)] = (size, 1)
    need: dict[str, int] = {}
    for p in sched.primitives:
        if isinstance(p, Split) and (p.stage, p.axis) in loops:
            size, d = loops[(p.stage, p.axis)]
            loops[(p.stage, p.outer)] = (size, d * p.factor)
            need[size] = math.lcm(need.get(size, 1), d * p.factor)
        elif isinstance(p, Fuse):
            loops.pop((p.stage, p.outer), None)
            loops.pop((p.stage, p.inner), None)
    out = {}
    for size, m in need.items():
        lo, hi = sched.sizes[size].sizes()[size]
        if m > 1 and -(-lo // m) <= hi // m:
            out[size] = m
    return out


def with_multiples_path(sched, func: ir.Func, lower_fn) -> ir.Func:
    """`func` (the general lowering of `sched`, with symbolic sizes) preceded by the version for sizes that are
    multiples of :func:`split_multiples`: ``if N % L == 0 and ...: <that version> else: <func's body>``.
    `lower_fn(bound, state)` lowers and checks a bound program (as `Schedule.lowered` does). Without such sizes,
    or where that version cannot be lowered for every size in range, `func` as it is.

    >>> import tensorlang as tl
    >>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=tl.Dim(1, 100, like=32))
    >>> _ = s["B"].split("i", 8)
    >>> print(s.lowered())
    def f(A: f32[N], B: f32[N], N: i64):
      if N__size%8 == 0:
        N_x8__size = N__size//8
        for i_o in 0:N_x8:
          for i_i in 0:8:
            i = i_i + i_o*8
            B[i] = A[i]*2f
      else:
        for i_o in 0:N - (N*7)//8:
          for i_i in 0:8:
            i = i_i + i_o*8
            if i <= N - 1:
              B[i] = A[i]*2f
    """
    from .schedule import ScheduleState
    multiples = split_multiples(sched)
    if not multiples:
        return func
    sizes: dict = {}
    for n, v in sched.sizes.items():
        if n in multiples:
            m = multiples[n]
            (atom, _), = v.terms.values()
            lo, hi = -(-atom.lo // m), atom.hi // m
            sizes[n] = Sym.size(_quotient(n, m), lo, hi, min(max(atom.like // m, lo), hi)) * m
        else:
            sizes[n] = v
    try:
        bound = bind(sched.op, sizes)
        state = ScheduleState(bound)
        for p in sched.primitives:
            state.apply(p)
        fast = lower_fn(state.bound, state)  # rfactor rewrites the program it schedules
    except SymbolicRefusal:  # a choice of the general version's lowering is the one to keep
        return func
    body = fast.body
    for n, m in multiples.items():
        body = ir.Let(size_var(_quotient(n, m)), ir.BinOp("//", size_var(n), ir.const(m)), body)
    cond = ir.all_of(ir.Cmp("==", ir.BinOp("%", size_var(n), ir.const(m)), ir.const(0))
                     for n, m in multiples.items())
    assert cond is not None  # multiples is not empty
    return dataclasses.replace(func, body=ir.If(cond, body, func.body), guards=func.guards + fast.guards)


def _quotient(name: str, m: int) -> str:
    return f"{name}_x{m}"
