"""Schedules: how a program's loops are arranged, kept as data (a list of primitive applications).

The default schedule computes every stage at the root, its loops in the order of its output indices with
reduction loops innermost. `s["C"]` is a handle on stage C whose methods (split, tile, reorder, fuse,
vectorize, unroll, parallel, compute_at, store_at, store_root, fold_storage, compute_inline, compute_root,
cache_write, cache_read, rfactor) append primitives after checking them; none of them changes what the program
computes (rfactor reassociates a float reduction), and an illegal one raises `ScheduleError` naming the primitive,
the stage and the loop.

>>> import tensorlang as tl
>>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] + 1.0"), N=64)
>>> io, ii = s["B"].split("i", 16)
>>> s["B"].vectorize(ii)
>>> print(s.lower())
def f(A: f32[64], B: f32[64]):
  for i_o in 0:4:
    for i_i in 0:16:  # vectorized
      i = i_i + i_o*16
      B[i] = A[i] + 1f
>>> print(s)
s = tl.schedule(op, N=64)
s["B"].split("i", 16, outer="i_o", inner="i_i")
s["B"].vectorize("i_i")
>>> tl.Schedule.from_json(s.to_json()).lower() == s.lower()
True
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import math
from dataclasses import dataclass, field

from .bind import BoundOp, bind
from .bounds import check_bounds
from .dtypes import DTYPES
from .errors import ScheduleError
from .ir import Func, expr_vars
from .loopnest import LoopNest
from .primitives import (
    Annotate,
    CacheRead,
    CacheWrite,
    ComputeAt,
    ComputeInline,
    ComputeRoot,
    FoldStorage,
    Fuse,
    Primitive,
    Reorder,
    ReverseComputeInline,
    RFactor,
    Split,
    StoreAt,
    from_json,
)
from .program import Op, Renaming, Stage
from .recurrence import check_scan_primitive
from .symbolic import SymbolicRefusal, size_from_json, size_source, size_to_json

SCHEDULE_FORMAT = 1
SCATTER_COPIES_MAX_BYTES = 1 << 28
"""The most bytes of private copies a parallel loop of a scatter may accumulate into (one copy an iteration)."""
VERBS = {"vectorized": "vectorize", "unrolled": "unroll", "parallel": "parallel", "serial": "serial"}


@dataclass(frozen=True)
class Root:
    """Where a stage is computed: on its own, in loops of its own at the root (every stage's start).

    >>> Root() == Root(), Root() == Inline()
    (True, False)
    """


@dataclass(frozen=True)
class Inline:
    """Where a stage is computed: its expression substituted into every read of it (``compute_inline``); it has
    no loops and no buffer.

    >>> isinstance(Inline(), Root)
    False
    """


@dataclass(frozen=True)
class At:
    """Where a stage is computed: inside loop `axis` of stage `consumer`, the part one iteration reads
    (``compute_at``).

    >>> At("C", "i_o").consumer, At("C", "i_o") == At("C", "i_o")
    ('C', True)
    """

    consumer: str
    axis: str


@dataclass(frozen=True)
class Epilogue:
    """Where a stage is computed: element by element in the write-back of the reduction `producer`
    (``reverse_compute_inline``); it has no loops of its own.

    >>> Epilogue("D").producer
    'D'
    """

    producer: str


Attachment = Root | Inline | At | Epilogue
"""Where a stage is computed: :class:`Root`, :class:`Inline`, :class:`At` or :class:`Epilogue`."""


@dataclass
class StageState:
    """Everything the schedule says about one stage after replay."""

    nest: LoopNest
    attach: Attachment = Root()
    cache_write: str | None = None       # loop at whose level the output tile is accumulated locally
    cache_reads: list = field(default_factory=list)   # [(tensor, axis, layout)]
    store_at: str | None = None          # store_at: the consumer's loop its buffer is kept at ("" the root)
    fold: tuple | None = None            # fold_storage: (dimension, factor)


class ScheduleState:
    """The result of replaying a schedule's primitives: one StageState per stage."""

    def __init__(self, bound: BoundOp):
        self.bound = bound
        self.loop_prims: dict[str, list] = {s.name: [] for s in bound.op.stages}
        self.stages: dict[str, StageState] = {}
        for s in bound.op.stages:
            bs = bound.stages[s.name]
            # a scatter's loops write data-chosen elements: none is a reduction loop (see _scatter_checks)
            axes = [(v, bs.ranges[v][0], bs.ranges[v][1], v in s.red_vars and s.lhs is None) for v in s.loop_vars]
            self.stages[s.name] = StageState(LoopNest(s.name, axes))

    def readers(self, name: str) -> list[str]:
        """Stages that read `name`; an inlined reader stands for its own readers, where its expression goes."""
        out: list[str] = []
        for s in self.bound.op.stages:
            if name in s.reads():
                inlined = isinstance(self.stages[s.name].attach, Inline)
                out += [r for r in (self.readers(s.name) if inlined else [s.name]) if r not in out]
        return out

    def stage(self, prim: str, name: str) -> StageState:
        """The state of stage `name`; when there is none, a ScheduleError that starts `prim(name)` and lists the
        stages."""
        if name not in self.stages:
            raise ScheduleError(f"{prim}({name}): no stage {name!r}; the stages are {', '.join(self.stages)}"
                                + (f" ({name} is an input)" if self.bound.op.param(name) else ""))
        return self.stages[name]

    def apply(self, p: Primitive) -> None:
        """Apply one primitive, or raise ScheduleError saying why it is illegal."""
        name = verb(p)
        st = self.stage(name, p.stage)
        check_scan_primitive(self, p, describe(p))
        if isinstance(st.attach, Epilogue) and isinstance(p, (Split, Fuse, Reorder, Annotate, CacheWrite, CacheRead)):
            raise ScheduleError(f"{describe(p)}: {p.stage} is computed in {st.attach.producer}'s write-back "
                                f"(reverse_compute_inline) and has no loops of its own; schedule "
                                f"{st.attach.producer}, or "
                                f"s[{p.stage!r}].compute_root() first")
        self._scatter_checks(p, st)
        if isinstance(p, (ComputeAt, ComputeInline, ComputeRoot, ReverseComputeInline)):
            st.store_at = st.fold = None  # a new place to compute it: a new place to store it
        if isinstance(p, (ComputeAt, ComputeInline)):
            for n, other in self.stages.items():
                if other.attach == Epilogue(p.stage):
                    raise ScheduleError(f"{describe(p)}: {n} is computed in {p.stage}'s write-back "
                                        f"(reverse_compute_inline), so {p.stage} stays at the root; "
                                        f"s[{n!r}].compute_root() first")
        if isinstance(p, (Split, Fuse, Reorder, Annotate)):
            self.loop_prims[p.stage].append(p)
        if isinstance(p, (Split, Fuse)):
            for axis in ((p.axis,) if isinstance(p, Split) else (p.outer, p.inner)):
                used = self.uses_of_loop(p.stage, axis)
                if used:
                    raise ScheduleError(f"{name}({p.stage}, {axis}): {used} names loop {axis}; {name} the loop "
                                        "before that, or name a loop you do not change")
        if isinstance(p, Split):
            st.nest.split(name, p.axis, p.factor, p.outer, p.inner)
        elif isinstance(p, Fuse):
            st.nest.fuse(name, p.outer, p.inner, p.fused)
        elif isinstance(p, Reorder):
            st.nest.reorder(name, tuple(p.axes))
        elif isinstance(p, Annotate):
            if p.kind == "parallel" and isinstance(st.attach, At):
                raise ScheduleError(f"parallel({p.stage}, {p.axis}): {p.stage} is computed inside "
                                    f"{st.attach.consumer}; parallelise a loop of {st.attach.consumer} instead")
            if p.kind == "vectorized":
                i = st.nest.index(name, p.axis)
                inside = {lp.name for lp in st.nest.loops[i:]}
                for what, axis in self.levels_of(p.stage):
                    if axis in inside:
                        raise ScheduleError(f"vectorize({p.stage}, {p.axis}): {what} at loop {axis}, inside the "
                                            "loop to vectorize; a vectorized loop runs its body once for all lanes")
            st.nest.annotate(name, p.axis, p.kind)
        elif isinstance(p, ComputeAt):
            self._compute_at(p, st)
        elif isinstance(p, ComputeInline):
            self._compute_inline(p, st)
        elif isinstance(p, ComputeRoot):
            st.attach = Root()
        elif isinstance(p, ReverseComputeInline):
            self._reverse_compute_inline(p, st)
        elif isinstance(p, CacheWrite):
            i = st.nest.index(name, p.axis)
            if isinstance(st.attach, Inline):
                raise ScheduleError(f"cache_write({p.stage}, {p.axis}): {p.stage} is inlined and has no loops")
            if st.cache_write is not None:
                raise ScheduleError(f"cache_write({p.stage}, {p.axis}): {p.stage} is cached at {st.cache_write} "
                                    "already; one cache_write a stage")
            self.not_inside_vector("cache_write", st, i, p)
            st.cache_write = p.axis
        elif isinstance(p, CacheRead):
            self._cache_read(p, st)
        elif isinstance(p, RFactor):
            self._rfactor(p, st)
        elif isinstance(p, StoreAt):
            self._store_at(p, st)
        elif isinstance(p, FoldStorage):
            self._fold_storage(p, st)
        else:
            raise ScheduleError(f"unknown primitive {p!r}")
        if isinstance(p, (Split, Fuse, Reorder, Annotate)):
            self.check_vector_levels(p.stage, name, getattr(p, "axis", None) or ", ".join(getattr(p, "axes", ())))
        self.check_copy_order(describe(p))

    def _scatter_checks(self, p: Primitive, st: StageState) -> None:
        """A scatter stage (`H[b := I[y, x]] += 1`) is computed at the root, in loops of its own; a parallel loop
        accumulates into per-thread copies of the output (lowered by `Lowerer.scatter_stage`), and a vectorized
        loop must run over a plain left-side index, so that no two lanes can update one element."""
        op = self.bound.op
        s = _stage(op, p.stage)
        why = "its updates go to elements chosen by data, so it is computed at the root, in loops of its own"
        if s.lhs is not None and isinstance(p, (ComputeAt, ComputeInline, CacheWrite, CacheRead)):
            left = f"{p.stage}[{', '.join(map(str, s.lhs.indices))}] {s.reduce_op}= ..."
            raise ScheduleError(f"{describe(p)}: {p.stage} is a scatter ({left}); {why}")
        consumer = op.stage(p.consumer) if isinstance(p, ComputeAt) else None
        if isinstance(p, ComputeAt) and consumer is not None and consumer.lhs is not None:
            raise ScheduleError(f"{describe(p)}: {p.consumer} is a scatter; nothing is computed inside its loops "
                                "(compute the stages it reads at the root, or inline them)")
        if isinstance(p, ReverseComputeInline):
            scatters = [t for t in s.reads() if op.stage(t) is not None and _stage(op, t).lhs is not None]
            if scatters:
                raise ScheduleError(f"{describe(p)}: {scatters[0]} is a scatter: its elements are final only after "
                                    f"all its loops, so {p.stage} cannot be computed in its write-back")
        plain = {v for v in s.lhs_vars if v not in s.scatter_vars}
        if s.lhs is not None and isinstance(p, Annotate) and p.kind == "parallel" \
                and not set(_expr_vars(st.nest, p.axis, "parallel")) <= plain:
            extent = st.nest.loops[st.nest.index("parallel", p.axis)].extent
            size = extent * math.prod(self.bound.shapes[p.stage]) * DTYPES[s.dtype].itemsize
            if size > SCATTER_COPIES_MAX_BYTES:
                raise ScheduleError(f"parallel({p.stage}, {p.axis}): each of its {extent} iterations would "
                                    f"accumulate into a private copy of {p.stage} ({size} bytes in all, more than "
                                    f"{SCATTER_COPIES_MAX_BYTES}); split {p.axis} and parallelise the outer loop")
        if s.lhs is not None and isinstance(p, Annotate) and p.kind == "vectorized":
            lanes = set(_expr_vars(st.nest, p.axis, "vectorize"))
            if not lanes <= plain:
                bad = sorted(lanes - plain)
                raise ScheduleError(f"vectorize({p.stage}, {p.axis}): the loop runs over {', '.join(bad)}, and "
                                    f"{p.stage}'s updates go to elements chosen by data, so two lanes could update "
                                    f"the same element; vectorize a loop over a plain left-side index "
                                    f"({', '.join(sorted(plain)) or 'there is none'})")

    def check_vector_levels(self, stage: str, prim: str, axis: str) -> None:
        """Nothing may be attached at or inside a vectorized loop (its body runs once for all lanes)."""
        st = self.stages[stage]
        names = st.nest.names()
        vec = [i for i, lp in enumerate(st.nest.loops) if lp.kind == "vectorized"]
        if not vec:
            return
        for what, level in self.levels_of(stage):
            if level in names and names.index(level) >= vec[0]:
                raise ScheduleError(f"{prim}({stage}, {axis}): {what} at loop {level}, which would be inside the "
                                    f"vectorized loop {names[vec[0]]}; a vectorized loop runs its body once for "
                                    "all lanes")

    def _producer_checks(self, prim: str, p: Primitive) -> None:
        op = self.bound.op
        if p.stage in op.outputs:
            raise ScheduleError(f"{prim}({p.stage}): {p.stage} is an output; outputs are computed at the root")

    def _compute_at(self, p: ComputeAt, st: StageState) -> None:
        where = f"compute_at({p.stage}, {p.consumer}, {p.axis})"
        self._producer_checks("compute_at", p)
        cons = self.stage("compute_at", p.consumer)
        readers = self.readers(p.stage)
        here = At(p.consumer, p.axis)
        if p.consumer not in readers and not any(self.stages[r].attach == here for r in readers):
            raise ScheduleError(f"{where}: neither {p.consumer} nor a stage computed at {p.consumer}.{p.axis} reads "
                                f"{p.stage} (its readers: {', '.join(readers)})")
        for r in readers:
            if r != p.consumer and self.stages[r].attach != here:
                raise ScheduleError(f"{where}: {p.stage} is also read by {r}, which is not computed at "
                                    f"{p.consumer}.{p.axis}; compute {r} there first "
                                    f"(s[{r!r}].compute_at(s[{p.consumer!r}], {p.axis!r}))")
        if isinstance(cons.attach, Inline):
            raise ScheduleError(f"{where}: {p.consumer} is inlined and has no loops")
        if isinstance(cons.attach, Epilogue):
            raise ScheduleError(f"{where}: {p.consumer} is computed in {cons.attach.producer}'s write-back and has no "
                                "loops of its own")
        i = cons.nest.index("compute_at", p.axis)
        vec = [lp.name for lp in cons.nest.loops[:i + 1] if lp.kind == "vectorized"]
        if vec:
            raise ScheduleError(f"{where}: {p.axis} is inside the vectorized loop {vec[0]}")
        # no cycle: the consumer must not be computed inside the producer
        c: Attachment = cons.attach
        while isinstance(c, At):
            if c.consumer == p.stage:
                raise ScheduleError(f"{where}: {p.consumer} is computed inside {p.stage}; that would be a cycle")
            c = self.stages[c.consumer].attach
        if any(lp.kind == "parallel" for lp in st.nest.loops):
            raise ScheduleError(f"{where}: {p.stage} has a parallel loop; a stage computed inside another "
                                "runs on that stage's thread")
        st.attach = here

    def uses_of_loop(self, stage: str, axis: str) -> str:
        """What names loop `axis` of `stage` (a compute_at, cache_write or cache_read), or ''."""
        st = self.stages[stage]
        for n, other in self.stages.items():
            if other.attach == At(stage, axis):
                return f"compute_at({n}, {stage}, {axis})"
            if isinstance(other.attach, At) and other.attach.consumer == stage and other.store_at == axis:
                return f"store_at({n}, {stage}, {axis})"
        if st.cache_write == axis:
            return f"cache_write({stage}, {axis})"
        for tensor, a, _ in st.cache_reads:
            if a == axis:
                return f"cache_read({stage}, {tensor}, {axis})"
        return ""

    def levels_of(self, stage: str) -> list[tuple[str, str]]:
        """(what, loop) for everything attached to a loop of `stage`."""
        st = self.stages[stage]
        out = [(f"{n} is computed", other.attach.axis) for n, other in self.stages.items()
               if isinstance(other.attach, At) and other.attach.consumer == stage]
        out += [(f"{n} is stored", other.store_at) for n, other in self.stages.items()
                if isinstance(other.attach, At) and other.attach.consumer == stage and other.store_at]
        if st.cache_write:
            out.append(("its cache_write", st.cache_write))
        out += [(f"its cache_read of {t}", a) for t, a, _ in st.cache_reads]
        return out

    @staticmethod
    def not_inside_vector(prim: str, st: StageState, i: int, p) -> None:
        """Refuse `p` (as `prim`) with a ScheduleError when its loop, number `i` of `st`'s nest, is a vectorized loop
        or inside one."""
        vec = [lp.name for lp in st.nest.loops[:i + 1] if lp.kind == "vectorized"]
        if vec:
            raise ScheduleError(f"{prim}({p.stage}, {p.axis}): the loop is inside the vectorized loop {vec[0]}; "
                                "choose a loop outside it")

    def check_copy_order(self, prim: str) -> None:
        """A cache_read of a stage computed at a loop of the reader must be at that loop or inside it: a copy made
        outside would copy the stage before it is computed."""
        for name, st in self.stages.items():
            names = st.nest.names()
            for tensor, axis, _ in st.cache_reads:
                t = self.stages[tensor].attach if tensor in self.stages else None
                if not isinstance(t, At) or t.consumer != name:
                    continue
                if axis in names and t.axis in names and names.index(axis) < names.index(t.axis):
                    raise ScheduleError(f"{prim}: {name} copies {tensor} at loop {axis}, but {tensor} is computed "
                                        f"at the inner loop {t.axis}; the copy would come first; cache it at "
                                        f"{t.axis} or inside it")

    def check_attachments(self) -> None:
        """Every reader of a stage computed at C.axis must be C or computed at C.axis too (checked when lowering,
        since a later primitive can move a reader)."""
        for name, st in self.stages.items():
            for what, axis in self.levels_of(name):
                if axis not in st.nest.names():
                    raise ScheduleError(f"{name}: {what} at loop {axis}, which no longer exists (loops: "
                                        f"{', '.join(st.nest.names())})")
            if not isinstance(st.attach, At):
                continue
            cons, axis = st.attach.consumer, st.attach.axis
            for r in self.readers(name):
                if r != cons and self.stages[r].attach != st.attach:
                    raise ScheduleError(f"compute_at({name}, {cons}, {axis}): {name} is also read by {r}, which "
                                        f"is no longer computed at {cons}.{axis}")

    def _compute_inline(self, p: ComputeInline, st: StageState) -> None:
        self._producer_checks("compute_inline", p)
        s = _stage(self.bound.op, p.stage)
        if s.reduce_op is not None:
            raise ScheduleError(f"compute_inline({p.stage}): {p.stage} is a reduction (`{s.reduce_op}=` over "
                                f"{', '.join(s.red_vars)}); only stages written with `=` can be inlined; use "
                                "compute_at instead")
        for n, other in self.stages.items():
            if any(t == p.stage for t, _, _ in other.cache_reads):
                raise ScheduleError(f"compute_inline({p.stage}): {n} copies {p.stage} with cache_read; an inlined "
                                    "stage has no buffer to copy")
            if isinstance(other.attach, At) and other.attach.consumer == p.stage:
                raise ScheduleError(f"compute_inline({p.stage}): {n} is computed inside {p.stage}; compute it "
                                    "elsewhere first")
        st.attach = Inline()

    def _reverse_compute_inline(self, p: ReverseComputeInline, st: StageState) -> None:
        where = f"reverse_compute_inline({p.stage})"
        op, bound = self.bound.op, self.bound
        s = _stage(op, p.stage)
        if s.reduce_op is not None:
            raise ScheduleError(f"{where}: {p.stage} is a reduction (`{s.reduce_op}=`); only a stage written with "
                                "`=` can be computed in its producer's write-back")
        if self.loop_prims[p.stage] or st.cache_write or st.cache_reads or self.levels_of(p.stage):
            raise ScheduleError(f"{where}: {p.stage}'s own loops are scheduled already (or something is computed "
                                f"at them); computed in its producer's write-back it has none: do this first")
        stages = {x.name for x in op.stages}
        producers = [t for t in s.reads() if t in stages and not isinstance(self.stages[t].attach, Inline)]
        if len(producers) != 1:
            what = ", ".join(producers) if producers else "none"
            raise ScheduleError(f"{where}: {p.stage} must read exactly one stage that is not inlined, the reduction "
                                f"whose write-back computes it; it reads {what}")
        d = producers[0]
        ds = _stage(op, d)
        if ds.reduce_op is None:
            raise ScheduleError(f"{where}: {d} is not a reduction; inline it into {p.stage} instead "
                                f"(s[{d!r}].compute_inline())")
        if d in op.outputs:
            raise ScheduleError(f"{where}: {d} is an output of the program and must be stored; only an intermediate "
                                "reduction can hand its elements straight to the stage that reads it")
        if not isinstance(self.stages[d].attach, Root):
            raise ScheduleError(f"{where}: {d} is not computed at the root; s[{d!r}].compute_root() first")
        others = [r for r in self.readers(d) if r != p.stage]
        if others:
            raise ScheduleError(f"{where}: {d} is also read by {', '.join(others)}; its elements must go to "
                                f"{p.stage} alone")
        bs = bound.stages[p.stage]
        if bound.shapes[d] != bs.shape:
            raise ScheduleError(f"{where}: {p.stage} has shape {list(bs.shape)} and {d} {list(bound.shapes[d])}; "
                                "the write-back computes one element of each at a time, so they must agree")
        for a, padded in zip(s.accesses(), bs.padded):
            if a.tensor != d:
                continue
            plain = [ix.is_plain_var() for ix in a.indices]
            if plain != list(s.lhs_vars) or padded:
                at = f" (line {a.loc.line}, column {a.loc.col})" if a.loc is not None else ""
                raise ScheduleError(f"{where}: {p.stage} reads {d}[{', '.join(str(ix) for ix in a.indices)}]{at}, "
                                    f"not {d}[{', '.join(s.lhs_vars)}]; only an element-for-element read can be "
                                    "computed in the write-back")
        order = [x.name for x in op.stages]
        self._check_epilogue_reads(where, s, d, order)
        st.attach = Epilogue(d)

    def _check_epilogue_reads(self, where: str, s, d: str, order: list) -> None:
        """The other tensors an epilogue reads (directly or through inlined stages) must be ready when the producer
        `d` runs: inputs, or stages at the root that come before it."""
        for t in s.reads():
            if t == d or t not in self.stages:  # the producer itself, or an input
                continue
            other = self.stages[t]
            if isinstance(other.attach, Inline):
                inner = _stage(self.bound.op, t)
                if d in inner.reads():
                    raise ScheduleError(f"{where}: the inlined stage {t} reads {d}; the write-back has one element "
                                        f"of {d} at a time")
                self._check_epilogue_reads(where, inner, d, order)
            elif not isinstance(other.attach, Root) or order.index(t) > order.index(d):
                raise ScheduleError(f"{where}: it reads {t}, which is computed after {d} (or inside another "
                                    f"stage); the write-back of {d} needs it ready")

    def _rfactor(self, p: RFactor, st: StageState) -> None:
        """Rewrite the program this state schedules (`self.bound`): stage `p.stage` becomes a partial stage and a
        combine stage, each with the default loop nest (see :func:`tensorlang.rfactor.rfactor_program`)."""
        from .rfactor import rfactor_program
        where = f"rfactor({p.stage}, {p.axis})"
        bound = rfactor_program(self.bound, st.nest, p.stage, p.axis, p.partial)
        red, done = set(_stage(self.bound.op, p.stage).red_vars), []
        for q in self.loop_prims[p.stage]:  # splits of reduction loops are what rfactor takes in
            if isinstance(q, Split) and q.axis in red:
                red |= {q.outer, q.inner}
            else:
                done.append(describe(q))
        if done:
            raise ScheduleError(f"{where}: {p.stage}'s loops are scheduled already ({', '.join(done)}); rfactor "
                                f"rebuilds them, so apply it right after splitting {p.stage}'s reduction loops, "
                                f"then schedule {p.partial} and {p.stage}")
        if not isinstance(st.attach, Root) or st.cache_write or st.cache_reads or self.levels_of(p.stage):
            raise ScheduleError(f"{where}: {p.stage} must be at the root with no cache_write, cache_read or stage "
                                "computed at its loops; rfactor it first")
        for n, other in self.stages.items():
            if other.attach == Epilogue(p.stage):
                raise ScheduleError(f"{where}: {n} is computed in {p.stage}'s write-back (reverse_compute_inline); "
                                    f"s[{n!r}].compute_root() first")
        self.bound = bound
        old = self.stages
        self.stages, prims = {}, self.loop_prims
        self.loop_prims = {}
        for s in self.bound.op.stages:
            self.loop_prims[s.name] = prims[s.name] if s.name in old and s.name != p.stage else []
            if s.name in old and s.name != p.stage:
                self.stages[s.name] = old[s.name]
            else:
                bs = self.bound.stages[s.name]
                self.stages[s.name] = StageState(LoopNest(s.name, [(v, bs.ranges[v][0], bs.ranges[v][1],
                                                                    v in s.red_vars) for v in s.all_vars]))

    def _store_at(self, p: StoreAt, st: StageState) -> None:
        where = describe(p)
        if not isinstance(st.attach, At):
            raise ScheduleError(f"{where}: {p.stage} is not computed at a consumer's loop; compute_at first, then "
                                "store it at a loop outside that one")
        cons, axis = st.attach.consumer, st.attach.axis
        if p.axis and p.consumer != cons:
            raise ScheduleError(f"{where}: {p.stage} is computed at {cons}.{axis}; store it at a loop of {cons}")
        if not isinstance(self.stages[cons].attach, Root):
            raise ScheduleError(f"{where}: {cons} is not computed at the root; a sliding window needs its consumer "
                                f"at the root (s[{cons!r}].compute_root())")
        names = self.stages[cons].nest.names()
        if p.axis and names.index(axis) <= self.stages[cons].nest.index("store_at", p.axis):
            raise ScheduleError(f"{where}: loop {p.axis} is not outside {axis}, where {p.stage} is computed; store "
                                f"it at a loop of {cons} outside {axis} (loops: {', '.join(names)}), or at the root "
                                f"(s[{p.stage!r}].store_root())")
        st.store_at, st.fold = p.axis, None

    def _fold_storage(self, p: FoldStorage, st: StageState) -> None:
        where = f"fold_storage({p.stage}, {p.dim}, {p.factor!r})"
        if st.store_at is None:
            raise ScheduleError(f"{where}: {p.stage} has no store_at; fold the buffer of a stage stored outside the "
                                "loop it is computed at (store_at or store_root first)")
        dims = _stage(self.bound.op, p.stage).lhs_vars
        if p.dim not in dims:
            raise ScheduleError(f"{where}: {p.stage} has no dimension {p.dim!r}; its dimensions are "
                                f"{', '.join(dims)}")
        if not isinstance(p.factor, int) or isinstance(p.factor, bool) or p.factor < 1:
            raise ScheduleError(f"{where}: the factor must be a positive integer, got {p.factor!r}")
        st.fold = (p.dim, p.factor)

    def _cache_read(self, p: CacheRead, st: StageState) -> None:
        where = f"cache_read({p.stage}, {p.tensor}, {p.axis})"
        s = _stage(self.bound.op, p.stage)
        if p.tensor not in s.reads():
            raise ScheduleError(f"{where}: {p.stage} does not read {p.tensor}; it reads {', '.join(s.reads())}")
        if p.tensor in self.stages and isinstance(self.stages[p.tensor].attach, Inline):
            raise ScheduleError(f"{where}: {p.tensor} is inlined; there is no buffer to copy")
        i = st.nest.index("cache_read", p.axis)
        self.not_inside_vector("cache_read", st, i, p)
        rank = len(self.bound.shapes[p.tensor])
        parts: dict[int, list[int]] = {}
        for entry in p.layout:
            if not (isinstance(entry, tuple) and len(entry) == 2 and
                    all(isinstance(x, int) and not isinstance(x, bool) for x in entry)):
                raise ScheduleError(f"{where}: a layout entry is (dimension, block), got {entry!r}")
            d, b = entry
            if not 0 <= d < rank:
                raise ScheduleError(f"{where}: {p.tensor} has dimensions 0..{rank - 1}, the layout names {d}")
            if b < 0:
                raise ScheduleError(f"{where}: block {b} of dimension {d} must be >= 0")
            parts.setdefault(d, []).append(b)
        for d, bs in parts.items():
            if not (bs == [0] or (len(bs) == 2 and bs[0] > 0 and bs[1] == 0)):
                raise ScheduleError(f"{where}: dimension {d} appears as {bs}; give it once as (d, 0), or twice as "
                                    "(d, block) then (d, 0) for its outer and inner parts")
        if any(t == p.tensor for t, _, _ in st.cache_reads):
            raise ScheduleError(f"{where}: {p.tensor} is cached by {p.stage} already")
        st.cache_reads.append((p.tensor, p.axis, tuple(p.layout)))


def _expr_vars(nest: LoopNest, axis: str, prim: str) -> list[str]:
    """The index variables whose expressions use loop `axis` of `nest` (a ScheduleError naming `prim` for no such
    loop)."""
    nest.index(prim, axis)
    return [v for v, e in nest.exprs.items() if axis in expr_vars(e)]


def _stage(op: Op, name: str) -> Stage:
    """The stage `name` of `op`, which every stage a schedule names is."""
    s = op.stage(name)
    assert s is not None, name
    return s


def verb(p: Primitive) -> str:
    """The method the user called for `p` (annotations are recorded as one primitive, `annotate`).

    >>> verb(Annotate("C", "n_i", "vectorized")), verb(Split("C", "m", 32, "m_o", "m_i"))
    ('vectorize', 'split')
    """
    if isinstance(p, StoreAt) and not p.axis:
        return "store_root"
    return VERBS.get(p.kind, p.NAME) if isinstance(p, Annotate) else p.NAME


def describe(p: Primitive) -> str:
    """`name(stage, loops)` as error messages start: `parallel(C, m_o)`.

    >>> describe(Annotate("C", "m_o", "parallel")), describe(ComputeAt("P", "O", "h"))
    ('parallel(C, m_o)', 'compute_at(P, O, h)')
    """
    name = verb(p)
    if isinstance(p, Reorder):
        return f"{name}({p.stage}, {', '.join(p.axes)})"
    if isinstance(p, Fuse):
        return f"{name}({p.stage}, {p.outer}, {p.inner})"
    if isinstance(p, CacheRead):
        return f"{name}({p.stage}, {p.tensor}, {p.axis})"
    if isinstance(p, ComputeAt) or (isinstance(p, StoreAt) and p.axis):
        return f"{name}({p.stage}, {p.consumer}, {p.axis})"
    if isinstance(p, FoldStorage):
        return f"{name}({p.stage}, {p.dim}, {p.factor})"
    axis = getattr(p, "axis", None)
    return f"{name}({p.stage}, {axis})" if axis else f"{name}({p.stage})"


class StageHandle:
    """The schedule of one stage: its methods apply primitives (see each for a before/after loop nest)."""

    def __init__(self, schedule: Schedule, name: str):
        self._s = schedule
        self.name = name

    def loops(self) -> list[str]:
        """The stage's loops, outermost first.

        >>> import tensorlang as tl
        >>> s = tl.schedule(tl.op("def f(A: f32[M, K]) -> B:\\n    B[m] += A[m, k]"), M=4, K=4)
        >>> s["B"].loops()
        ['m', 'k']
        """
        return self._s.state().stages[self.name].nest.names()

    def split(self, axis: str, factor: int, outer: str | None = None, inner: str | None = None):
        """Split loop `axis` into an outer loop over tiles and an inner loop of `factor` iterations.

        A factor that does not divide the extent leaves a tail that a guard skips. Returns (outer, inner).

        Before ``split("i", 4)`` on extent 10, and after::

            for i in 0:10:             for i_o in 0:3:
              B[i] = A[i]                for i_i in 0:4:
                                           i = i_i + i_o*4
                                           if i < 10:
                                             B[i] = A[i]
        """
        outer = outer or f"{axis}_o"
        inner = inner or f"{axis}_i"
        self._s.apply(Split(self.name, axis, factor, outer, inner))
        return outer, inner

    def tile(self, x: str, y: str, fx: int, fy: int):
        """Split `x` by `fx` and `y` by `fy` and order the loops x_o, y_o, x_i, y_i. Returns those names.

        Before ``tile("m", "n", 32, 32)`` and after::

            for m in 0:M:              for m_o in 0:M/32:
              for n in 0:N:              for n_o in 0:N/32:
                ...                        for m_i in 0:32:
                                             for n_i in 0:32:
                                               ...
        """
        xo, xi, yo, yi = f"{x}_o", f"{x}_i", f"{y}_o", f"{y}_i"
        self._s.apply_all([Split(self.name, x, fx, xo, xi), Split(self.name, y, fy, yo, yi),
                           Reorder(self.name, (xo, yo, xi, yi))])
        return xo, yo, xi, yi

    def reorder(self, *axes: str) -> None:
        """Put the named loops in this order (the loops not named keep their places).

        Before ``reorder("k", "n")`` and after::

            for m: for n: for k:       for m: for k: for n:

        Moving a reduction loop outward is legal: the output is then initialised by a loop nest of its own.
        """
        self._s.apply(Reorder(self.name, tuple(axes)))

    def fuse(self, outer: str, inner: str, fused: str | None = None) -> str:
        """Fuse loop `outer` and the loop `inner` directly inside it into one loop. Returns its name.

        Before ``fuse("m", "n")`` and after::

            for m in 0:4:              for m_n in 0:12:
              for n in 0:3:              m = m_n // 3
                ...                      n = m_n % 3
        """
        fused = fused or f"{outer}_{inner}"
        self._s.apply(Fuse(self.name, outer, inner, fused))
        return fused

    def vectorize(self, axis: str) -> None:
        """Run loop `axis` as one SIMD operation of `extent` lanes (explicit LLVM vectors; tails masked).

        Before and after ``vectorize("i_i")``::

            for i_i in 0:16:           for i_i in 0:16:  # vectorized
              B[i] = A[i] * 2            B[i] = A[i] * 2       (one <16 x float> load, mul, store)

        A reduction loop cannot be vectorized (its iterations update the same element).
        """
        self._s.apply(Annotate(self.name, axis, "vectorized"))

    def unroll(self, axis: str) -> None:
        """Replicate the body of loop `axis` once per iteration (no loop left).

        Before and after ``unroll("k_i")`` (the loop IR keeps the loop, marked; the code has no loop)::

            for k_i in 0:2:            for k_i in 0:2:  # unrolled     emitted as   C[m] += A[m, k_o*2]
              C[m] += A[m, k]            C[m] += A[m, k]                          C[m] += A[m, k_o*2 + 1]
        """
        self._s.apply(Annotate(self.name, axis, "unrolled"))

    def parallel(self, axis: str) -> None:
        """Run the iterations of loop `axis` on the thread pool (`TENSORLANG_NUM_THREADS` threads).

        Before and after ``parallel("m_o")``::

            for m_o in 0:8:            for m_o in 0:8:  # parallel   (chunks of m_o run on different cores)
              ...                        ...

        Only loops over output indices can run in parallel; a reduction loop is refused.
        """
        self._s.apply(Annotate(self.name, axis, "parallel"))

    def rfactor(self, axis: str, partial: str | None = None) -> str:
        """Split this reduction over its reduction loop `axis` (usually the outer part of a split) into a partial
        stage, indexed by this stage's indices and `axis` (which is then a loop over an output index: it can run in
        parallel), and a combine stage, this one, that reduces the partials over `axis` with the same operator
        (Halide's and TVM's rfactor). Returns the partial stage's name (`partial`, by default ``NAME_rf``, or
        ``NAME_rf2``, ... where that name is taken).

        Before and after ``s["B"].rfactor("k_o")`` on ``B[m] += A[m, k]`` split ``k = k_o*64 + k_i``, then
        ``s["B_rf"].reorder("k_o", "m")`` and ``s["B_rf"].parallel("k_o")``::

            for m in 0:M:                         for k_o in 0:K/64:  # parallel
              B[m] = 0                              for m in 0:M:
              for k_o in 0:K/64:                      B_rf[m, k_o] = 0
                for k_i in 0:64:                      for k_i in 0:64:
                  B[m] += A[m, k_o*64 + k_i]            B_rf[m, k_o] += A[m, k_o*64 + k_i]
                                                  for m in 0:M:
                                                    B[m] = 0
                                                    for k_o in 0:K/64:
                                                      B[m] += B_rf[m, k_o]

        Works for +=, *=, max= and min=, of any dtype; a split that does not divide adds the identity in its
        tail. Floating-point sums and products are reassociated (the partials are added in another order).
        Both stages start with their default loops (the partial: this stage's indices, `axis`, then the other
        reduction loops), so apply rfactor right after the splits of this stage's reduction loops, before any
        other primitive on it. Refused for a stage written with `=`, a loop over an output index (or one that
        is already parallel: no reduction loop can be), a fused reduction loop, and a stage not at the root or
        with a cache_write, a cache_read or a stage computed at its loops.
        """
        if partial is None:  # NAME_rf, or NAME_rf2, ... where that is taken (a combine stage rfactored again)
            op = self._s.state().bound.op
            taken = set(op.inputs) | {s.name for s in op.stages} | set(op.size_names)
            names = [f"{self.name}_rf"] + [f"{self.name}_rf{i}" for i in range(2, len(taken) + 3)]
            partial = next(n for n in names if n not in taken)
        self._s.apply(RFactor(self.name, axis, partial))
        return partial

    def serial(self, axis: str) -> None:
        """Undo vectorize, unroll or parallel on loop `axis`."""
        self._s.apply(Annotate(self.name, axis, "serial"))

    def compute_at(self, consumer: StageHandle | str, axis: str) -> None:
        """Compute this stage inside loop `axis` of `consumer`, just the part that one iteration reads.

        Before and after ``s["P"].compute_at(s["O"], "h")`` (P's rows h..h+2, clipped to P)::

            allocate P: f32[H+2]       for h in 0:H:
            for y in 0:H+2:              allocate P: f32[3]
              P[y] = I[y-1]              for P_y in 0:3:
            for h in 0:H:                  P.y = P_y + h
              O[h] = P[h]+P[h+2]           P[P_y] = I[P.y - 1]
                                         O[h] = P[0] + P[2]

        Where the part may run past the stage's end (a consumer loop of more iterations than the stage has rows
        to spare), its indices are guarded (``if P.y <= min(h + 2, H + 1):``); where the loops prove they cannot,
        as here, no guard is written.

        The stage's buffer then holds just that part, inside the loop (as Halide stores a stage where it is
        computed), where every start of the part is provably >= 0, no read of the stage may fall outside its
        domain (padding) or copies it (cache_read), and no tail of a split overshoots the part (a tail's guard
        counts: ``if P.y <= h*4 + 5`` keeps ``P[P.y - h*4]`` inside 6 rows); else the whole buffer stays at the
        root. Every reader of this stage must be `consumer` or a stage computed at the same loop (a stage inlined
        into them reads through). At or inside a parallel loop, each iteration (each thread) computes its part
        into its own buffer, overlapping its neighbours' parts where the reads do (Halide's recomputation over
        tiles); a stage whose whole buffer stays at the root there is refused when the parts of different
        iterations overlap, since two threads would write the same elements (checked when lowering).
        """
        cname = consumer.name if isinstance(consumer, StageHandle) else consumer
        self._s.apply(ComputeAt(self.name, cname, axis))

    def store_at(self, consumer: StageHandle | str, axis: str) -> None:
        """Keep this stage's buffer at loop `axis` of `consumer`, outside the loop it is computed at (``compute_at``
        first), and slide it: the first iteration of the compute loop computes the whole part it needs, each later
        one only the rows that earlier iterations did not (Halide's sliding window). A blur ``O[y] = P[y] + P[y+1]
        + P[y+2]`` then computes one new row of P per row of O instead of three.

        Before and after ``s["P"].store_root()``, P computed at ``O``'s loop ``y`` (``O[y] = P[y] + P[y+1] +
        P[y+2]``, N = 10)::

            for y in 0:8:                       allocate P: f32[10]
              allocate P: f32[3]                for y in 0:8:
              for P.y in 0:3:                     if y == 0:
                P:y = P.y + y                       for P.y in 0:3:
                P[P.y] = I[P:y]*2f                    P:y = P.y + y
              O[y] = P[0] + P[1] + P[2]               P[P.y + y] = I[P:y]*2f
                                                  else:
                                                    for P.y in 0:1:
                                                      P:y = P.y + y + 2
                                                      P[P.y + y + 2] = I[P:y]*2f
                                                  O[y] = P[y] + P[y + 1] + P[y + 2]

        Along the sliding dimension the buffer holds the rows one sweep of the compute loop covers (from the first
        iteration's start; ``fold_storage`` makes it a ring), along the others the part one iteration needs. One
        dimension slides, along the loop P is computed at; at the first iteration of that loop (each time the
        loops between the two levels start it again) the whole part is computed. Refused (naming the stage and the
        loop): a loop between the two levels, or the compute loop itself, that is parallel or vectorized (threads
        or lanes would share the rows); a part that moves backwards as the loop runs, or in more than one
        dimension, or by a step that is not a constant multiple of the loop; a consumer that is not at the root;
        a stage read outside its domain (padding) or copied by cache_read. A later compute_at, compute_root or
        compute_inline of this stage drops its store_at.
        """
        cname = consumer.name if isinstance(consumer, StageHandle) else consumer
        self._s.apply(StoreAt(self.name, cname, axis))

    def store_root(self) -> None:
        """Keep this stage's buffer at the root, outside every loop of its consumer, and slide it along the loop it
        is computed at (see ``store_at``, whose example uses it)."""
        self._s.apply(StoreAt(self.name, "", ""))

    def fold_storage(self, dim: str, factor: int) -> None:
        """Make this sliding stage's buffer (``store_at`` / ``store_root`` first) a ring of `factor` rows along its
        dimension `dim`, the one that slides: row ``y`` lives at ``y % factor`` (any factor; a power of two makes
        the remainder a mask).

        Before and after ``s["P"].fold_storage("y", 4)`` on the sliding blur of ``store_at``::

            allocate P: f32[10]                 allocate P: f32[4]
            for y in 0:8:                       for y in 0:8:
              ...                                 ...
                  P[P.y + y + 2] = I[P:y]*2f          P[(P.y + y + 2)%4] = I[P:y]*2f
              O[y] = P[y] + P[y + 1] + P[y + 2]   O[y] = P[y%4] + P[(y + 1)%4] + P[(y + 2)%4]

        Refused (when lowering, naming the stage): a factor smaller than the rows one iteration reads at once
        (3 here; the message names the minimum), a dimension that does not slide.
        """
        self._s.apply(FoldStorage(self.name, dim, factor))

    def compute_inline(self) -> None:
        """Replace every read of this stage by its expression; the stage gets no buffer and no loops.

        Before and after ``s["T"].compute_inline()``::

            for i: T[i] = A[i]*2       for i: B[i] = A[i]*2 + 1
            for i: B[i] = T[i] + 1

        A reduction cannot be inlined.
        """
        self._s.apply(ComputeInline(self.name))

    def compute_root(self) -> None:
        """Compute this stage on its own at the root (undoes compute_at, compute_inline and
        reverse_compute_inline)."""
        self._s.apply(ComputeRoot(self.name))

    def reverse_compute_inline(self) -> None:
        """Compute this elementwise stage inside the one reduction it reads, element by element where each
        element of the reduction is final: in its cache_write write-back, or right after its reduction loops
        when they are innermost (TVM's reverse_compute_inline). The reduction's result then never goes through
        memory (unless blocks of the reduction outside the tile keep partial sums there). This is how a bias,
        an activation or a residual add joins a matmul or a convolution.

        Before and after ``s["Y"].reverse_compute_inline()`` with D tiled and cached at ``m_o``::

            for m_o: ...                            for m_o: ...
              D_local[...] = ...                      D_local[...] = ...
              for m_i: for n_i:                       for m_i: for n_i:
                D[m, n] = D_local[m_i, n_i]             Y[m, n] = max(D_local[m_i, n_i] + b[n], 0)
            for m: for n:
              Y[m, n] = max(D[m, n] + b[n], 0)

        Refused unless this stage is written with `=`, reads that reduction (not an output, at the root, read by
        nothing else) only as ``D[i, j, ...]`` with its own indices over the same shape, and everything else
        it reads is ready before the reduction runs; it gets no loops of its own.
        """
        self._s.apply(ReverseComputeInline(self.name))

    def cache_write(self, axis: str) -> None:
        """Accumulate the tile of the output that loop `axis` covers in a local buffer (kept in registers
        when it is small and its loops are unrolled and vectorized), then write the tile back.

        Before and after ``cache_write("n_o")`` on a matmul tiled m_o, n_o, k, m_i, n_i::

            for m_o: for n_o:                 for m_o: for n_o:
              for k: for m_i: for n_i:          C_local[...] = 0
                C[m, n] += A[m, k]*B[k, n]      for k: for m_i: for n_i:
                                                  C_local[m_i, n_i] += A[m, k]*B[k, n]
                                                for m_i: for n_i: C[m, n] = C_local[m_i, n_i]
        """
        self._s.apply(CacheWrite(self.name, axis))

    def cache_read(self, tensor: str, axis: str, layout: tuple = ()) -> None:
        """Copy the part of `tensor` that this stage reads inside loop `axis` into a contiguous local buffer
        (in `layout`, see `CacheRead`) at the start of each iteration of `axis`, and read it from there.

        Before and after ``cache_read("B", "k_o", layout=((1, 16), (0, 0), (1, 0)))`` (packing B panels)::

            for k_o:                          for k_o:
              for n_o: for k_i: for n_i:        B_local[n//16, k, n%16] = B[k_o*256 + k, n]  (for the tile)
                ... B[k, n] ...                 for n_o: for k_i: for n_i:
                                                  ... B_local[n_o, k_i, n_i] ...
        """
        if not isinstance(layout, (tuple, list)) or not all(isinstance(x, (tuple, list)) for x in layout):
            raise ScheduleError(f"cache_read({self.name}, {tensor}, {axis}): layout is a tuple of (dimension, block) "
                                f"pairs, like ((1, 16), (0, 0), (1, 0)); got {layout!r}")
        self._s.apply(CacheRead(self.name, tensor, axis, tuple(tuple(x) for x in layout)))

    pack = cache_read


_LOWER_AT_THE_END = contextvars.ContextVar("tensorlang_lower_at_the_end", default=False)


@contextlib.contextmanager
def lowering_checks_at_the_end():
    """Inside, primitives skip the trial lowering that names the primitive making a computed-at stage illegal;
    the schedule's own lowering still refuses such a schedule (as a ScheduleError that names no primitive). For
    code that only needs to know whether a schedule lowers, and its loop IR: the tuner's features of the configs
    its space allows (every one of which lowers), a third of whose time those trial lowerings took.

    Example::

        >>> import tensorlang as tl
        >>> op = tl.op("def f(A: f32[N]) -> C:\\n    B[i] = A[i] * 2.0\\n    C[i] = B[i] + 1.0")
        >>> with lowering_checks_at_the_end():
        ...     s = tl.schedule(op, N=64)
        ...     s["B"].compute_at(s["C"], "i")
        ...     ir = str(s.lowered())
        >>> ir == s.lower()
        True
    """
    token = _LOWER_AT_THE_END.set(True)
    try:
        yield
    finally:
        _LOWER_AT_THE_END.reset(token)


def _may_break_regions(state: ScheduleState, p: Primitive) -> bool:
    """Whether `p`, just applied to `state`, can make a computed-at stage illegal over its region: it attaches or
    detaches a stage, schedules a stage computed at another's loop or a consumer of one (its loops decide the
    region), or any loop is parallel (threads must not share a region) while some stage is computed at another."""
    epilogues = [(n, st.attach.producer) for n, st in state.stages.items() if isinstance(st.attach, Epilogue)]
    if isinstance(p, ReverseComputeInline) or any(p.stage in pair for pair in epilogues):
        return True  # the producer's loops decide where its elements are final: lowering tells
    attached = [st.attach for st in state.stages.values() if isinstance(st.attach, At)]
    if not attached:
        return False
    if isinstance(p, (ComputeAt, ComputeRoot, ComputeInline)) or isinstance(state.stages[p.stage].attach, At):
        return True
    if any(a.consumer == p.stage for a in attached):
        return True
    return any(lp.kind == "parallel" for st in state.stages.values() for lp in st.nest.loops)


class Schedule:
    """A program with bound sizes and the primitives applied to it, in order."""

    def __init__(self, op: Op, sizes: dict, primitives: list | None = None):
        self.op = op
        self.bound: BoundOp = bind(op, sizes)
        self.sizes = dict(self.bound.sizes)
        self.primitives: list[Primitive] = []
        self._state: ScheduleState | None = None
        self._lowered: tuple | None = None  # (primitives applied, strict, Func) of the last lowering
        for p in primitives or []:
            self.apply(p if isinstance(p, Primitive) else from_json(p))

    def __getitem__(self, name: str) -> StageHandle:
        op = self.state().bound.op  # the program as scheduled: an rfactor adds a stage
        if not isinstance(name, str) or name not in {s.name for s in op.stages}:
            stages = ", ".join(s.name for s in op.stages)
            extra = f" ({name} is an input, not a stage)" if isinstance(name, str) and self.op.param(name) else ""
            raise ScheduleError(f"schedule[{name!r}]: no stage {name!r}{extra}; the stages are {stages}")
        return StageHandle(self, name)

    def state(self) -> ScheduleState:
        """The replayed state of every stage."""
        if self._state is None:
            st = ScheduleState(self.bound)
            for p in self.primitives:
                st.apply(p)
            self._state = st
        return self._state

    def apply(self, p: Primitive) -> None:
        """Check `p` against the current state and append it (a ScheduleError leaves the schedule unchanged)."""
        self.apply_all([p])

    def apply_all(self, prims: list[Primitive]) -> None:
        """Apply several primitives as one: all of them, or (on a ScheduleError) none."""
        trial = self.state()  # applied in place; on a refusal the state is dropped and replayed when next needed
        self._state = None
        for p in prims:
            self._check(trial, p)
        self.primitives.extend(prims)
        self._state = trial

    def _check(self, trial: ScheduleState, p: Primitive) -> None:
        try:
            trial.apply(p)
        except SymbolicRefusal as e:  # name the primitive that met the symbolic size
            raise SymbolicRefusal(f"{describe(p)}: {e}") from None
        if not _LOWER_AT_THE_END.get() and _may_break_regions(trial, p):
            # a stage computed at a consumer's loop runs over the region its readers use, known once regions are
            # (its loops replayed on that region, whether threads would share it): lower to find out now, so that
            # the primitive that makes the schedule illegal is the one refused
            from .lower import Lowerer
            try:
                Lowerer(trial.bound, trial).function()
            except SymbolicRefusal as e:
                raise SymbolicRefusal(f"{describe(p)}: {e}") from None
            except ScheduleError as e:
                sliding = str(e).startswith(("store_at(", "store_root(", "fold_storage("))  # another stage's
                if (isinstance(p, ComputeAt) and not sliding) or str(e).startswith(f"{describe(p)}:"):
                    raise
                raise ScheduleError(f"{describe(p)}: {e}") from None

    def lowered(self, strict: bool = False) -> Func:
        """The loop IR, every access proven in bounds or guarded (`strict`: a guard is an internal error).

        Lowered once for the primitives applied so far (the IR is immutable): a strict lowering, or one that
        needed no guard, also answers the other kind of request (a tuner's builder and the fuzz tests lower the
        schedule they then build).

        >>> import tensorlang as tl
        >>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]"), N=8)
        >>> s.lowered(strict=True) is s.lowered()
        True
        """
        from .lower import lower
        memo = self._lowered
        if memo is not None and memo[0] == len(self.primitives) and (memo[1] or not strict or memo[2].guards == 0):
            return memo[2]
        state = self.state()
        func = check_bounds(lower(state.bound, state), strict=strict)
        if func.sizes:  # symbolic sizes: with a version for multiples of the split factors first
            from .specialize import with_multiples_path
            func = with_multiples_path(self, func, lambda b, st: check_bounds(lower(b, st), strict=strict))
        self._lowered = (len(self.primitives), strict, func)
        return func

    def lower(self) -> str:
        """The loop IR as readable text, with loop annotations and allocations."""
        return str(self.lowered())

    def to_json(self) -> str:
        """The schedule as JSON: program text, sizes and primitives."""
        return json.dumps({"format": SCHEDULE_FORMAT, "op": self.op.name, "source": self.op.source,
                           "sizes": {k: size_to_json(v) for k, v in self.sizes.items()},
                           "primitives": [p.to_json() for p in self.primitives]},
                          sort_keys=True)

    @staticmethod
    def from_json(text: str, op: Op | None = None) -> Schedule:
        """Rebuild a schedule from `to_json()` (the program is re-parsed from the JSON unless given)."""
        from .parse import parse
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, TypeError, RecursionError) as e:  # RecursionError: nested thousands deep
            raise ScheduleError(f"from_json: not JSON: {e}") from None
        if not isinstance(data, dict) or data.get("format") != SCHEDULE_FORMAT:
            raise ScheduleError(f"from_json: not a tensorlang schedule (format {SCHEDULE_FORMAT} expected)")
        missing = [k for k in ("source", "sizes", "primitives") if k not in data]
        if missing:
            raise ScheduleError(f"from_json: the schedule lacks {', '.join(missing)}")
        if not isinstance(data["sizes"], dict) or not isinstance(data["primitives"], list):
            raise ScheduleError("from_json: sizes must be an object and primitives a list")
        return Schedule(op if op is not None else parse(data["source"]),
                        {k: size_from_json(v) for k, v in data["sizes"].items()},
                        [from_json(p) for p in data["primitives"]])

    def renamed(self, op: Op, names: Renaming) -> Schedule:
        """This schedule replayed on `op`, a program of the same loop structure, its names changed by `names` (from
        this schedule's program to `op`: ``self.op.loop_structure.renaming(op.loop_structure)``). A loop the
        schedule made gets the name made the same way from the new one (``j_o`` split from ``j`` becomes ``n_o``
        from ``n``); the loop IR is this schedule's, up to names.

        >>> import tensorlang as tl
        >>> s = tl.schedule(tl.op("def f(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0"), N=64)
        >>> _ = s["Y"].split("i", 16)
        >>> s["Y"].vectorize("i_i")
        >>> op = tl.op("def g(A: f32[M]) -> B:\\n    B[j] = A[j] * 2.0")
        >>> print(s.renamed(op, s.op.loop_structure.renaming(op.loop_structure)))
        s = tl.schedule(op, M=64)
        s["B"].split("j", 16, outer="j_o", inner="j_i")
        s["B"].vectorize("j_i")
        """
        return Schedule(op, {names.sizes[k]: v for k, v in self.sizes.items()},
                        _renamed_primitives(self.primitives, names, op))

    def key(self) -> str:
        """A stable text of the primitives, for caching."""
        return json.dumps([p.to_json() for p in self.primitives], sort_keys=True)

    def __str__(self) -> str:
        sizes = ", ".join(f"{k}={size_source(v)}" for k, v in self.sizes.items())
        return "\n".join([f"s = tl.schedule(op, {sizes})"] + [p.to_python() for p in self.primitives])


def _renamed_primitives(prims: list, names: Renaming, op: Op) -> list:
    """`prims` with the names of `names` (see :meth:`Schedule.renamed`); a made loop's new name avoids every name
    `op` and the stage's loops use."""
    taken = set(op.inputs) | {s.name for s in op.stages} | set(op.size_names)
    tensors = dict(names.tensors)  # and the partial stages that rfactor makes
    loops = {tensors[s]: dict(m) for s, m in names.axes.items()}  # new stage -> old loop -> new loop
    used = {s: taken | set(m.values()) for s, m in loops.items()}

    def made(stage: str, old: str, new: str) -> str:
        while new in used[stage]:
            new += "_"
        used[stage].add(new)
        loops[stage][old] = new
        return new

    def from_parent(old: str, parent: str, ax: dict) -> str:
        return ax[parent] + old[len(parent):] if old.startswith(parent) else old

    out = []
    for p in prims:
        stage = tensors[p.stage]
        ax = loops[stage]
        q: Primitive
        if isinstance(p, Split):
            q = Split(stage, ax[p.axis], p.factor, made(stage, p.outer, from_parent(p.outer, p.axis, ax)),
                      made(stage, p.inner, from_parent(p.inner, p.axis, ax)))
        elif isinstance(p, Fuse):
            new = f"{ax[p.outer]}_{ax[p.inner]}" if p.fused == f"{p.outer}_{p.inner}" else \
                from_parent(p.fused, p.outer, ax)
            q = Fuse(stage, ax[p.outer], ax[p.inner], made(stage, p.fused, new))
        elif isinstance(p, Reorder):
            q = Reorder(stage, tuple(ax[a] for a in p.axes))
        elif isinstance(p, Annotate):
            q = Annotate(stage, ax[p.axis], p.kind)
        elif isinstance(p, ComputeAt):
            q = ComputeAt(stage, tensors[p.consumer], loops[tensors[p.consumer]][p.axis])
        elif isinstance(p, CacheWrite):
            q = CacheWrite(stage, ax[p.axis])
        elif isinstance(p, CacheRead):
            q = CacheRead(stage, tensors[p.tensor], ax[p.axis], p.layout)
        elif isinstance(p, RFactor):
            part = stage + p.partial[len(p.stage):] if p.partial.startswith(f"{p.stage}_rf") else p.partial
            while part in taken or part in tensors.values():
                part += "_"
            q = RFactor(stage, ax[p.axis], part)
            tensors[p.partial] = part
            loops[part], used[part] = dict(ax), set(used[stage])  # its loops are the stage's
        elif isinstance(p, StoreAt):
            q = StoreAt(stage, tensors[p.consumer], loops[tensors[p.consumer]][p.axis]) if p.axis \
                else StoreAt(stage, "", "")
        elif isinstance(p, FoldStorage):
            q = FoldStorage(stage, ax[p.dim], p.factor)
        elif isinstance(p, (ComputeInline, ComputeRoot, ReverseComputeInline)):
            q = type(p)(stage)
        else:
            raise ScheduleError(f"renamed: unknown primitive {p!r}")
        out.append(q)
    return out


def schedule(op: Op, **sizes: int) -> Schedule:
    """The default schedule of `op` for these sizes, ready to transform.

    >>> import tensorlang as tl
    >>> tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]"), N=3).sizes
    {'N': 3}
    """
    return Schedule(op, sizes)
