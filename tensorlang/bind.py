"""Bind sizes to an `Op`: check them, infer every index range and every stage's shape.

Range inference follows TC's rule: an index that is the only unknown in one dimension of a read gets the
largest range that keeps that read in bounds, intersected over all such reads; `where` gives a range
explicitly. A read that may still fall outside its tensor reads 0 (padding) when a `where` range widened
it, and is an error otherwise.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

from .errors import BuildError, DSLError, SourceLoc
from .program import BoundaryIndex, GatherIndex, Op, Stage
from .symbolic import Dim, Sym, SymbolicRefusal, smax, smin


@dataclass(frozen=True)
class BoundStage:
    """A stage with integer ranges: `ranges[v] = (lo, extent)`; `padded[i]` is True when read i may fall outside."""

    stage: Stage
    ranges: dict
    shape: tuple[int, ...]
    padded: tuple[bool, ...]


@dataclass(frozen=True)
class BoundOp:
    """An Op with sizes bound: every tensor's shape and dtype, every stage's ranges.

    >>> import tensorlang as tl
    >>> b = bind(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] + A[i + 1]"), {"N": 5})
    >>> b.shapes["B"], b.stages["B"].ranges
    ((4,), {'i': (0, 4)})
    """

    op: Op
    sizes: dict
    shapes: dict
    dtypes: dict
    stages: dict

    def stage(self, name: str) -> BoundStage:
        """The bound stage `name`."""
        return self.stages[name]


MAX_INDEX = 2 ** 48
"""Sizes and input element counts stay below this, so that the generated code's 64-bit index arithmetic (a
product of an index and a stride, plus offsets) cannot overflow; no machine addresses more bytes anyway."""


def check_sizes(op: Op, sizes: dict) -> dict[str, int]:
    """Check that `sizes` binds exactly the op's sizes to fitting integers; return them as plain ints.

    Shape sizes must be >= 1 and `int` parameters >= 0, and every input dimension must come out >= 1; anything
    else (a missing or unknown name, a non-integer) is a BuildError naming the size.

    >>> import numpy as np, tensorlang as tl
    >>> op = tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] + A[i + 1]")
    >>> check_sizes(op, {"N": np.int64(5)})
    {'N': 5}
    >>> check_sizes(op, {"N": 0})
    Traceback (most recent call last):
    ...
    tensorlang.errors.BuildError: f: size N=0 must be >= 1
    """
    missing = [n for n in op.size_names if n not in sizes]
    if missing:
        example = ", ".join(f"{n}=..." for n in op.size_names)
        raise BuildError(f"{op.name}: missing size{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
                         f"bind every size: ({example})")
    unknown = [n for n in sizes if n not in op.size_names]
    if unknown:
        raise BuildError(f"{op.name}: unknown size{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
                         f"the sizes are {', '.join(op.size_names) or 'none'}")
    out: dict[str, int] = {}  # a symbolic size (Sym) computes as an int does (tensorlang.symbolic)
    for n in op.size_names:
        v = sizes[n]
        if isinstance(v, Sym):  # a symbolic size made already (a multiple of one, see tensorlang.specialize)
            out[n] = cast(int, v)
            continue
        if isinstance(v, Dim):
            if n in op.int_params:
                raise BuildError(f"{op.name}: size {n} is an `int` parameter; it cannot be symbolic (a Dim)")
            if v.hi >= MAX_INDEX:
                raise BuildError(f"{op.name}: size {n}={v} is too large: indices are 64-bit, sizes below 2**48")
            if len(v.likes) > 1:
                raise BuildError(f"{op.name}: size {n}={v} has several representative sizes, one a version of the "
                                 "code: tl.build makes the versions; a schedule is made for one (like=...)")
            out[n] = cast(int, Sym.size(n, v.lo, v.hi, v.likes[0]))
            continue
        if isinstance(v, bool) or not hasattr(v, "__index__"):
            raise BuildError(f"{op.name}: size {n}={v!r} must be an integer")
        v = int(v)
        shape_size = n not in op.int_params
        if v < (1 if shape_size else 0):
            raise BuildError(f"{op.name}: size {n}={v} must be {'>= 1' if shape_size else '>= 0'}")
        if v >= MAX_INDEX:
            raise BuildError(f"{op.name}: size {n}={v} is too large: indices are 64-bit, sizes below 2**48")
        out[n] = v
    for p in op.params:
        dims = tuple(d.evaluate(out) for d in p.shape)
        for d, (poly, val) in enumerate(zip(p.shape, dims)):
            if val < 1:
                raise BuildError(f"{op.name}: input {p.name} dimension {d} is {poly} = {val}; it must be >= 1")
        elements = math.prod(dims)
        if elements >= MAX_INDEX:
            raise BuildError(f"{op.name}: input {p.name} would have {elements:.3g} elements "
                             f"({' x '.join(map(str, dims))}); at most 2**48 fit a 64-bit index")
    return out


def bind(op: Op, sizes: dict) -> BoundOp:
    """Check the sizes (see :func:`check_sizes`) and infer the ranges and the shape of every stage.

    A convolution's output is as long as the reads of `I` stay in bounds:

    >>> import tensorlang as tl
    >>> b = bind(tl.op("def conv(I: f32[H], W: f32[R]) -> O:\\n    O[h] += I[h + r] * W[r]"), {"H": 8, "R": 3})
    >>> b.shapes["O"], b.stages["O"].ranges
    ((6,), {'h': (0, 6), 'r': (0, 3)})
    """
    sizes = check_sizes(op, sizes)
    shapes = {p.name: tuple(d.evaluate(sizes) for d in p.shape) for p in op.params}
    dtypes = {p.name: p.dtype for p in op.params}
    stages: dict[str, BoundStage] = {}
    for s in op.stages:
        bs = _bind_stage(op, s, sizes, shapes)
        stages[s.name] = bs
        shapes[s.name] = bs.shape
        dtypes[s.name] = s.dtype
    return BoundOp(op, sizes, shapes, dtypes, stages)


def _floordiv(a: int, b: int) -> int:
    return a // b


def _ceildiv(a: int, b: int) -> int:
    return -((-a) // b)


def _bounds_for(c: int, rmin: int, rmax: int, dim: int) -> tuple[int, int]:
    """Largest [lo, hi] of v such that 0 <= c*v + r <= dim-1 for every r in [rmin, rmax]."""
    if c > 0:
        return _ceildiv(-rmin, c), _floordiv(dim - 1 - rmax, c)
    c = -c
    lo_u, hi_u = _ceildiv(-rmin, c), _floordiv(dim - 1 - rmax, c)
    return -hi_u, -lo_u


def _interval(coeffs: dict, const: int, ranges: dict) -> tuple[int, int]:
    lo = hi = const
    for v, c in coeffs.items():
        a, b = ranges[v]
        lo += smin(c * a, c * b)
        hi += smax(c * a, c * b)
    return lo, hi


def _err(op: Op, message: str, loc) -> DSLError:
    return DSLError(message, loc, op.source)


def _check_boundary(op: Op, s: Stage, a, d: int, ix: BoundaryIndex, sizes: dict, ranges: dict, extent: int) -> None:
    """A DSLError unless the boundary index `ix` (dimension `d` of read `a`) stays inside the dimension for every
    value of the index variables (interval arithmetic over clamp, min, max and abs)."""
    lo, hi = ix.interval(sizes, ranges)
    if 0 <= lo and hi <= extent - 1:
        return
    sz = ", ".join(f"{k}={v}" for k, v in sizes.items())
    raise _err(op, f"`{a.tensor}` dimension {d} may be read at {lo}..{hi} by the boundary index `{ix}` in stage "
               f"`{s.name}`, but has extent {extent} (for {sz}); keep it inside 0..{extent - 1}, e.g. with "
               f"clamp(..., 0, {extent - 1})", a.index_locs[d])


def _plain_symbolic(op: Op, s: Stage, a, d: int, coeffs: dict) -> None:
    """A SymbolicRefusal where a symbolic size multiplies an index variable (`A[N*i]`): only plain, constant
    coefficient positions take symbolic sizes."""
    for v, c in coeffs.items():
        if isinstance(c, Sym):
            names = ", ".join(sorted(c.sizes()))
            raise SymbolicRefusal(f"{op.name}: size {names} is symbolic here, which is not supported for a "
                                  f"coefficient of the index variable `{v}` (`{a.tensor}` dimension {d}, stage "
                                  f"`{s.name}`); bind it to an integer")


def _bind_stage(op: Op, s: Stage, sizes: dict, shapes: dict) -> BoundStage:
    ranges: dict[str, tuple[int, int]] = {}  # inclusive [lo, hi]
    for v, w in s.where.items():
        ranges[v] = (w.lo.evaluate(sizes), w.hi.evaluate(sizes) - 1)
    accesses = s.accesses()
    dims = []  # (access number, dim, coeffs, const, extent)
    for n, a in enumerate(accesses):
        for d, ix in enumerate(a.indices):
            # a gathered or boundary index takes values of its own, and a scan's read of itself has no shape yet:
            # none bounds an index variable
            if isinstance(ix, (GatherIndex, BoundaryIndex)) or a.tensor == s.name:
                continue
            coeffs, const = ix.evaluate(sizes)
            _plain_symbolic(op, s, a, d, coeffs)
            dims.append((n, d, coeffs, const, shapes[a.tensor][d]))
    # exact uses (`A[.., i, ..]`) of one index over dimensions of different extent disagree
    exact: dict[str, tuple] = {}
    for n, d, _, _, extent in dims:
        a = accesses[n]
        iv = a.indices[d].is_plain_var()  # as written: `A[st*i]` is not checked even when st is 1
        if iv is not None:
            if iv in s.where:
                continue
            if iv in exact and exact[iv][0] != extent:
                pe, pa, pd = exact[iv]
                raise _err(op, f"index `{iv}` ranges over 0:{extent} in {a.tensor} (dimension {d}) but over "
                           f"0:{pe} in {pa} (dimension {pd}) for these sizes; the sizes must agree, or give "
                           f"the range with `where {iv} in LO:HI`", a.index_locs[d])
            exact.setdefault(iv, (extent, a.tensor, d))
    origin: dict[str, SourceLoc] = {}
    while True:
        found: dict[str, tuple[int, int]] = {}
        for n, d, coeffs, const, extent in dims:
            unknown = [v for v in coeffs if v not in ranges]
            if len(unknown) != 1:
                continue
            v = unknown[0]
            rest = {u: c for u, c in coeffs.items() if u != v}
            rmin, rmax = _interval(rest, const, ranges)
            lo, hi = _bounds_for(coeffs[v], rmin, rmax, extent)
            if v in found:
                lo, hi = smax(lo, found[v][0]), smin(hi, found[v][1])
            found[v] = (lo, hi)
            origin.setdefault(v, accesses[n].index_locs[d])
        if not found:
            break
        for v, (lo, hi) in found.items():
            if v in s.lhs_vars:
                if lo > 0:
                    raise _err(op, f"the range of `{v}` inferred from this read starts at {lo}, but a "
                               f"left-side index starts at 0; give it with `where {v} in 0:...` (reads "
                               f"outside the tensor are then 0)", origin[v])
                lo = 0
            ranges[v] = (lo, hi)
    for v in s.all_vars:
        if v not in ranges:
            raise _err(op, f"cannot infer the range of `{v}` in stage `{s.name}` for these sizes; give it "
                       f"with `where {v} in LO:HI`", s.var_locs.get(v, s.loc))
        lo, hi = ranges[v]
        if hi < lo:
            where = f" (inferred from the read at line {origin[v].line}, column {origin[v].col})" \
                if v in origin else ""
            sz = ", ".join(f"{k}={val}" for k, val in sizes.items())
            raise BuildError(f"{op.name}: the range of `{v}` in stage `{s.name}` (line {s.loc.line}) is empty "
                             f"for {sz}{where}")
    padded = []
    for a in accesses:
        if a.tensor == s.name:  # a scan reads before its first element (`S[i - 1]` at i = 0): 0 there
            padded.append(True)
            continue
        pad = False
        for d, ix in enumerate(a.indices):
            if isinstance(ix, GatherIndex):  # checked when the kernel runs (tl.IndexError), never padded
                continue
            if isinstance(ix, BoundaryIndex):  # proven inside by interval arithmetic, never padded
                _check_boundary(op, s, a, d, ix, sizes, ranges, shapes[a.tensor][d])
                continue
            coeffs, const = ix.evaluate(sizes)
            lo, hi = _interval(coeffs, const, ranges)
            extent = shapes[a.tensor][d]
            if lo >= 0 and hi <= extent - 1:
                continue
            if any(v in s.where for v in coeffs):
                pad = True
                continue
            raise _err(op, f"`{a.tensor}` dimension {d} is read at {lo}..{hi} here but has extent {extent}: "
                       f"the inferred ranges are ambiguous; give the ranges with `where` (reads outside "
                       f"{a.tensor} then read 0)", a.index_locs[d])
        padded.append(pad)
    out_ranges = {v: (ranges[v][0], ranges[v][1] - ranges[v][0] + 1) for v in s.all_vars}
    shape = tuple(out_ranges[v][1] for v in s.lhs_vars)
    return BoundStage(s, out_ranges, shape, tuple(padded))
