"""Generated search spaces: a :class:`~tensorlang.space.Space` derived from any program by rules over its stages.

The rules, in the spirit of Ansor's CPU sketch rules and MetaSchedule's default LLVM rules:

- **placement** of every stage that is not an output: ``inline`` (an injective stage substituted into its
  readers: elementwise chains, padding), ``root`` (computed on its own, with its own loop template), or ``at``
  (computed inside its reader's loop nest, at the deepest loop that does not make it recompute what it already
  computed: a padded image per block of output rows, softmax's max and sum per row). An injective output stage
  whose only producer is a reduction it reads element for element can be ``epilogue``: computed in the
  producer's write-back (bias, ReLU, GELU, a residual add after a matmul or convolution).
- **multi-level tiling** of every stage at the root (see :mod:`tensorlang.autosched.template`): blocks,
  register tiles accumulated with ``cache_write``, reductions blocked and the innermost unrolled, the vector
  variable innermost at register width, the reads with reuse optionally packed (``cache_read`` with a blocked
  layout), the leading loops fused and run in parallel.

Knobs are named ``STAGE.knob``; the constraint rules out, before anything is built, templates that need more
vector registers than the CPU has, register tiles whose working set does not fit L2, parallel loops with fewer
iterations than threads, and placements the loop nests cannot hold.

>>> import tensorlang as tl
>>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
>>> sp = generated_space(op, {"M": 64, "N": 64, "K": 64}, threads=2)
>>> [k.name for k in sp.knobs][:4]
['C.vec', 'C.vw', 'C.i.reg', 'C.j.reg']
>>> cfg = sp.default()
>>> sp.allowed(cfg), "C_local" in sp.schedule(op, {"M": 64, "N": 64, "K": 64}, cfg).lower()
(True, True)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, Literal

import numpy as np

from ..codegen_llvm import MAX_DEINTERLEAVED_STRIDE
from ..dtypes import DTYPES
from ..errors import ScheduleError, UsageError
from ..loopnest import MAX_VECTOR_LANES
from ..space import Knob, Space, factors
from ..target import cache_sizes, host_target
from .analysis import ProgramInfo, StageInfo, analyze
from .problems import Problem, ProblemKind
from .rfactor import apply_rfactor, rfactor_offered
from .template import (
    LoopPlan,
    TileConfig,
    accumulators,
    apply_plan,
    chunks,
    plan_loops,
    register_accumulators,
    register_extent,
    rounded_block,
    window_taps,
)

SCATTER_WORK = 8
"""Updates per element of a thread's private copy of a scatter's output below which the scatter runs on one thread
(a copy is set to the identity and combined into the output, which costs about two updates per element)."""

PLACEMENT_DOC = "inline into readers, own loops at the root, computed inside its reader's loops, or in the " \
                "producer's write-back"


def lanes_of(dtype: str) -> int:
    """Elements of `dtype` in one vector register of this CPU.

    >>> lanes_of("f32") * 2 == lanes_of("f32") * DTYPES["f64"].itemsize // DTYPES["f32"].itemsize
    True
    """
    return max(1, host_target().vector_bits() // (8 * DTYPES[dtype].itemsize))


def vector_register_count() -> int:
    """Vector registers of this CPU: 32 with AVX-512, else 16.

    >>> vector_register_count() in (16, 32)
    True
    """
    return 32 if host_target().vector_bits() == 512 else 16


def packable(st: StageInfo, tensor: str) -> bool:
    """Whether the space offers to copy `tensor`'s blocks into a blocked layout in stage `st`: a read with reuse
    in a reduction (some of the stage's variables do not move it), or a transposing read in an injective stage
    (its contiguous variable is not the output's).

    Conditions, either of:
      1. `st` is a reduction with reuse and some read of `tensor` misses one of its spatial variables;
      2. `st` is injective, `tensor` has at least two dimensions, and some read of it moves with the variable
         contiguous in `st`'s output by other than one element.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def t(X: f32[M, N]) -> Y:\\n    Y[j, i] = X[i, j]"), {"M": 8, "N": 8}).stage("Y")
    >>> packable(st, "X")
    True
    """
    reads = st.reads_of(tensor)
    if not reads:
        return False
    if st.kind == "reuse":
        return any(set(st.spatial) - r.vars for r in reads)
    if st.kind == "injective" and len(reads[0].shape) >= 2:
        out_inner = next((v for v in st.spatial if st.out_strides[v] == 1), None)
        return any(out_inner is not None and abs(r.strides.get(out_inner, 0)) != 1 and r.strides.get(out_inner, 0)
                   for r in reads)
    return False


def vec_cost(st: StageInfo, v: str, lanes: int) -> float:
    """The relative cost of vectorizing `v`: the share of lanes that do work in the last vector (1 when the
    extent is a multiple of the lanes), over the cost of its accesses: 1 a contiguous read, a little more one
    that a pack makes contiguous, s a read s <= `MAX_DEINTERLEAVED_STRIDE` elements a lane apart (s loads and a
    shuffle), lanes/2 a gather; a scattered output costs little when a register tile
    accumulates it, lanes/2 when every element is stored on its own. Lower is better.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def t(X: f32[M, N]) -> Y:\\n    Y[i, j] = X[i, j] + 1.0"), {"M": 8, "N": 64}).stage("Y")
    >>> vec_cost(st, "j", 16) < vec_cost(st, "i", 16)
    True
    """
    E = st.extents[v]
    eff = E / (-(-E // lanes) * lanes) if E >= lanes else E / lanes
    cost = 0.0
    for r in st.reads:
        stride = abs(r.strides.get(v, 0))
        if stride == 0:
            continue
        cost += 1.0 if stride == 1 else 1.2 if packable(st, r.tensor) else \
            float(stride) if stride <= MAX_DEINTERLEAVED_STRIDE else lanes / 2
    if v in st.spatial and st.out_strides[v] != 1:
        cost += 0.2 if st.kind != "injective" else lanes / 2
    return max(cost, 1.0) / eff


LANE_COMBINE_COST = 0.25
"""What :func:`vec_candidates` adds to the cost of vectorizing a reduction variable: its lanes are combined at the
end of each output, and each output is stored on its own; a spatial variable along which the reads and the store
are as contiguous wins (a max filter's sliding window vectorized along x, not along its taps)."""


SELECT_UNROLL = 16
"""The most copies of a stage's body that :func:`unrolled_selectors` unrolls so that its selects on index variables
fold: the demosaic's output quad, `select(c == 0, red, select(c == 1, green, blue))` over a 2 x 2 quad, is 12."""


def unrolled_selectors(st: StageInfo) -> tuple:
    """The spatial variables of `st` that the rules unroll whole because a `select` tests them without reading data
    (:func:`~tensorlang.autosched.analysis.selectors`): unrolled, each copy of the body computes the side its
    condition chooses; vectorized or looped over, every element computes every side (the demosaic's colours: three
    sides for one, in each of its 2 x 2 sites). Conditions: a stage with a vector candidate other than them, the
    variables taken in order while the product of their extents stays within :data:`SELECT_UNROLL`.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> src = "def f(R: f32[N], G: f32[N]) -> O:\\n    O[c, i] = select(c == 0, R[i], G[i]) where c in 0:2"
    >>> unrolled_selectors(analyze(tl.op(src), {"N": 64}).stage("O"))
    ('c',)
    """
    out, copies = [], 1
    for v in st.selectors:
        if st.extents[v] >= 2 and copies * st.extents[v] <= SELECT_UNROLL:
            out.append(v)
            copies *= st.extents[v]
    return tuple(out) if len(out) < len(st.spatial) else ()


def vec_candidates(st: StageInfo, lanes: int = 16) -> tuple:
    """The variables worth vectorizing, best first, then None (leave vectorizing to LLVM): spatial ones that are
    contiguous in the output or in some read, or that a pack makes contiguous; for a reduction without reuse
    also its innermost contiguous reduction variable (vector accumulators, lanes combined at the end) when it
    has at least a vector's worth of elements. The variables the rules unroll for their selects
    (:func:`unrolled_selectors`) come after the others.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def s(X: f32[N, D]) -> Y:\\n    Y[n] += X[n, d]"), {"N": 8, "D": 64}).stage("Y")
    >>> vec_candidates(st)
    ('d', 'n', None)
    """
    scored = []
    for v in st.spatial:
        if st.extents[v] < 2:
            continue
        moving = [r for r in st.reads if r.strides.get(v, 0)]
        ok = st.out_strides[v] == 1 or any(abs(r.strides[v]) == 1 or packable(st, r.tensor) for r in moving)
        if ok:
            scored.append((vec_cost(st, v, lanes), v))
    if st.kind == "reduce":
        for v in reversed(st.reduction):
            if st.extents[v] >= lanes and any(abs(r.strides.get(v, 0)) == 1 for r in st.reads):
                # contiguous loads, and the lanes combined once at the end: as good as a spatial variable
                # whose reads and store are contiguous, better than one whose reads gather
                scored.append((vec_cost(st, v, lanes) + LANE_COMBINE_COST, v))
                break
    unrolled = unrolled_selectors(st)
    scored.sort(key=lambda x: (x[1] in unrolled, x[0]))  # a selector unrolled (so its selects fold) comes last
    return tuple(v for _, v in scored) + (None,)


def _block_values(extent: int) -> tuple:
    candidates = set(factors(extent)) | {v for v in (6, 12, 24, 48, 96, 192, 384, 768) if v < extent}
    values = sorted(v for v in candidates if 1 <= v < extent)
    if len(values) > 11:  # keep the small ones and about every other large one, in log scale
        keep = set(values[:4])
        logs = np.log2(values)
        for target in np.linspace(logs[4], logs[-1], 7):
            keep.add(values[int(np.argmin(np.abs(logs - target)))])
        values = sorted(keep)
    return tuple(values) + (extent,)


def _reg_values(extent: int) -> tuple:
    return tuple(v for v in sorted(set(range(1, 9)) | set(factors(extent, 16)) | {12, 14, 16}) if v <= extent)


def _rblock_values(extent: int) -> tuple:
    return tuple(v for v in (32, 64, 128, 256, 512, 1024) if v < extent) + (extent,)


def _ku_values(extent: int, taps: int | None = None) -> tuple:
    """Unrolling of the innermost reduction loop: 1, 2, 4, 8 up to its extent, the extent itself up to 16, and
    a window's ``taps`` (:func:`window_taps`): all of them unrolled.

    >>> _ku_values(3, 9), _ku_values(64)
    ((1, 2, 3, 9), (1, 2, 4, 8))
    """
    return tuple(sorted({v for v in (1, 2, 4, 8) if v <= extent} | ({extent} if extent <= 16 else set()) |
                        ({taps} if taps else set())))


def _rotations(names: tuple) -> tuple:
    return tuple(",".join(names[i:] + names[:i]) for i in range(len(names))) or ("",)


Placement = Literal["root", "inline", "at", "epilogue"]
"""Where a generated space computes a stage (the values of its ``STAGE.place`` knob): ``root`` in loops of its own,
``inline`` substituted into its readers, ``at`` inside its reader's loops, ``epilogue`` in its producer's
write-back."""


@dataclass(frozen=True)
class StageConfig:
    """One stage's part of a config of a generated space, typed: where it is computed and its loop template's knob
    values (see :meth:`GeneratedSpace.stage_configs` and :meth:`GeneratedSpace.knob_config`).

    >>> import tensorlang as tl
    >>> sp = generated_space(tl.op("def f(A: f32[N]) -> C:\\n    B[i] = A[i] + 1.0\\n    C[i] = B[i] * 2.0"),
    ...                      {"N": 64}, threads=1)
    >>> sc = sp.stage_configs(sp.default())["B"]
    >>> sc.place, sc.tile.parallel
    ('inline', 'none')
    """

    place: Placement
    tile: TileConfig


Field = Literal["place", "vec", "vw", "reg", "block", "rblock", "red_order", "ku", "tile_order", "parallel", "pack",
                "rfactor"]


@dataclass(frozen=True)
class KnobField:
    """Where the value of one knob of a generated space lives in its stage's :class:`StageConfig`: the placement,
    a field of the TileConfig, or the entry `key` (a variable, or the tensor a pack copies) of a field that holds
    one per variable or per tensor. `reads`: for a pack, every tensor the stage reads, in order (the order its
    packs are made in).

    >>> f = KnobField(Knob("C.i.reg", (1, 2, 4)), "reg", "i")
    >>> sc = StageConfig("root", TileConfig(reg={"i": 1, "j": 1}))
    >>> f.get(f.set(sc, 4)), f.get(sc), f.set(sc, 4).tile.reg
    (4, 1, {'i': 4, 'j': 1})
    """

    knob: Knob
    field: Field
    key: str | None = None
    reads: tuple = ()

    def get(self, sc: StageConfig):
        """This knob's value in `sc`."""
        if self.field == "place":
            return sc.place
        value = getattr(sc.tile, self.field)
        if self.field == "pack":
            return self.key in value
        if self.field == "red_order":
            return ",".join(value)
        return value[self.key] if self.key is not None else value

    def set(self, sc: StageConfig, value) -> StageConfig:
        """`sc` with this knob at `value`."""
        if self.field == "place":
            return replace(sc, place=value)
        new: Any  # the type of the field
        if self.field == "pack":
            new = tuple(t for t in self.reads if (value if t == self.key else t in sc.tile.pack))
        elif self.field == "red_order":
            new = tuple(value.split(","))
        elif self.key is not None:
            new = {**getattr(sc.tile, self.field), self.key: value}
        else:
            new = value
        return replace(sc, tile=replace(sc.tile, **{self.field: new}))


@dataclass(frozen=True)
class StageKnobs:
    """The values a generated space offers one stage for each knob of its loop template (see :class:`StageRole`):
    what the zero-trial pick chooses among. ``reg``, ``block`` and ``rblock`` hold the variables that have such a
    knob; ``ku`` and ``tile_order`` are empty where there is no such knob; ``pack``: the tensors it may pack, in
    the order it reads them.

    >>> import tensorlang as tl
    >>> sp = generated_space(tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]"),
    ...                      {"M": 64, "N": 64, "K": 16}, threads=1)
    >>> offered = sp.roles["C"].offered
    >>> sorted(offered.block), offered.rblock, offered.pack
    (['i', 'j'], {}, ('A', 'B'))
    """

    vec: tuple
    vw: tuple
    reg: dict
    block: dict
    rblock: dict
    red_order: tuple
    ku: tuple
    tile_order: tuple
    parallel: tuple
    pack: tuple
    rfactor: tuple = ()


class StageRole:
    """What the space offers one stage: its placements and its template knobs (every stage may be at the root).

    ``knobs`` are the space's knobs of the stage, ``fields`` where each one's value lives in a :class:`StageConfig`
    (the only place knob names are made and read), ``offered`` their values by field.
    """

    def __init__(self, st: StageInfo, placements: tuple, threads: int):
        self.st = st
        self.placements = placements
        self.lanes = lanes_of(st.dtype)
        self.knobs: list[Knob] = []
        self.fields: list[KnobField] = []
        reads = tuple(dict.fromkeys(r.tensor for r in st.reads))
        n = st.name

        def offer(field: Field, key: str | None, name: str, values: tuple, doc: str) -> tuple:
            knob = Knob(name, values, doc)
            self.knobs.append(knob)
            self.fields.append(KnobField(knob, field, key, reads if field == "pack" else ()))
            return values

        if len(placements) > 1:
            offer("place", None, f"{n}.place", placements, PLACEMENT_DOC)
        L = self.lanes
        vecs = tuple(v for v in vec_candidates(st, L) if v is None or v != st.scan)  # a scan runs in order
        self.vecs = offer("vec", None, f"{n}.vec", vecs, "the variable vectorized innermost")
        widest = max((st.extents[v] for v in self.vecs if v is not None), default=1)
        vws = offer("vw", None, f"{n}.vw", tuple(k * L for k in (1, 2, 3, 4) if (k - 1) * L < widest
                                                 and k * L <= MAX_VECTOR_LANES) or (L,),
                    "elements of the vector variable in the register tile (one vectorized loop: at most "
                    f"{MAX_VECTOR_LANES})")
        reg = {v: offer("reg", v, f"{n}.{v}.reg", _reg_values(st.extents[v]),
                        f"register tile along {v} (unrolled; not for the vector variable)")
               for v in st.spatial if st.extents[v] > 1}
        block = {v: offer("block", v, f"{n}.{v}.block", _block_values(st.extents[v]),
                          f"block along {v}, in elements (rounded up to whole register tiles)")
                 for v in st.spatial if st.extents[v] > 1}
        rblock = {r: offer("rblock", r, f"{n}.{r}.block", _rblock_values(st.extents[r]),
                           f"block of the reduction along {r}")
                  for r in st.reduction if st.extents[r] > 32}
        red_order, ku, tile_order = (), (), ()
        if st.reduction:
            red_order = offer("red_order", None, f"{n}.red_order", _rotations(st.reduction),
                              "order of the reduction loops")
            inner = max(st.extents[r] for r in st.reduction)
            ku = offer("ku", None, f"{n}.ku", _ku_values(inner, window_taps(st)),
                       "unrolling of the innermost reduction loop (the product of every reduction extent: all of them)")
            if st.kind == "reuse" and len(st.spatial) > 1:
                tile_order = offer("tile_order", None, f"{n}.tile_order", ("y_first", "x_first"),
                                   "which side's register-tile loops run outside")
        par = ["outer1", "outer2", "outer3"] if threads > 1 else []
        if threads > 1 and st.kind == "reuse":
            par += ["inner1", "inner2"]
        parallel = offer("parallel", None, f"{n}.parallel", (*par, "none"),
                         "the loops the threads split: the first K leading ones fused, or the first K row blocks "
                         "inside the reduction blocks")
        packs = tuple(t for t in reads if packable(st, t) and t != st.name)
        for t in packs:
            offer("pack", t, f"{n}.pack.{t}", (True, False),
                  f"copy the blocks of {t} into a blocked layout (cache_read)")
        rf = offer("rfactor", None, f"{n}.rfactor", (False, True),
                   "split the long reduction into parallel partials and a combine (rfactor)") \
            if rfactor_offered(st, threads) else ()
        self.offered = StageKnobs(self.vecs, vws, reg, block, rblock, red_order, ku, tile_order, parallel, packs,
                                  rf)

    def tile_config(self, cfg: dict) -> TileConfig:
        """The template's knob values in `cfg` as a TileConfig."""
        st, n = self.st, self.st.name
        get = cfg.get
        red_order = tuple(x for x in get(f"{n}.red_order", "").split(",") if x) or st.reduction
        return TileConfig(
            vec=get(f"{n}.vec"), vw=get(f"{n}.vw", self.lanes),
            reg={v: get(f"{n}.{v}.reg", 1) for v in st.spatial},
            block={v: get(f"{n}.{v}.block", st.extents[v]) for v in st.spatial},
            rblock={r: get(f"{n}.{r}.block", st.extents[r]) for r in st.reduction},
            red_order=red_order, ku=get(f"{n}.ku", 1), tile_order=get(f"{n}.tile_order", "y_first"),
            parallel=get(f"{n}.parallel", "none"),
            pack=tuple(t for t in dict.fromkeys(r.tensor for r in st.reads) if get(f"{n}.pack.{t}", False)),
            rfactor=get(f"{n}.rfactor", False))

    def config(self, cfg: dict) -> StageConfig:
        """This stage's knob values in `cfg` (a dict of knob values, some of which may be missing: those are at
        the space's defaults) as a StageConfig."""
        return StageConfig(cfg.get(f"{self.st.name}.place", self.placements[0]), self.tile_config(cfg))

    def knob_values(self, sc: StageConfig) -> dict:
        """The value of each knob of this stage in `sc`, by knob name, in the space's order."""
        return {f.knob.name: f.get(sc) for f in self.fields}


def _typed(config: dict) -> bool:
    """Whether `config` holds one StageConfig a stage (else knob values)."""
    return bool(config) and isinstance(next(iter(config.values())), StageConfig)


def _placements(info: ProgramInfo) -> dict[str, tuple]:
    """The placements the space offers each stage, the first its default.

    Conditions, the first that holds deciding:
      1. an output: the root, and its producer's write-back where it has an :func:`epilogue_producer`;
      2. an injective stage that some stage reads: inlined, the root, or inside its reader's loops;
      3. an injective stage nothing reads: the root;
      4. a reduction: the root, or inside its reader's loops;
      5. a scan (a stage that reads itself): the root (it needs every earlier element, computed in order).
    """
    out: dict[str, tuple] = {}
    for st in info.stages:
        if st.scan is not None:
            out[st.name] = ("root",)
        elif st.is_output:
            out[st.name] = ("root", "epilogue") if epilogue_producer(info, st) else ("root",)
        elif st.kind == "injective":
            out[st.name] = ("inline", "root", "at") if st.readers else ("root",)
        else:
            out[st.name] = ("root", "at")
    return out


def epilogue_producer(info: ProgramInfo, st: StageInfo) -> str | None:
    """The reduction whose write-back can compute the injective stage `st`: the one stage `st` reads, read
    element for element (its indices are `st`'s own, in order, over the same extents) and by nothing else;
    None when there is none.

    Conditions:
      1. `st` is injective and reads exactly one stage, D;
      2. D is a reduction, not an output, and `st` is its only reader;
      3. every read of D by `st` is unpadded and indexes D by `st`'s own variables, in order, with no offset, over
         the same extents.

    >>> import tensorlang as tl
    >>> src = "def f(X: f32[M, K], W: f32[K, N], b: f32[N]) -> Y:\\n    D[m, n] += X[m, k] * W[k, n]\\n" \\
    ...       "    Y[m, n] = max(D[m, n] + b[n], 0.0)"
    >>> info = analyze(tl.op(src), {"M": 4, "N": 8, "K": 3})
    >>> epilogue_producer(info, info.stage("Y"))
    'D'
    """
    if st.kind != "injective":
        return None
    stage_names = {s.name for s in info.stages}
    producers = {r.tensor for r in st.reads if r.tensor in stage_names}
    if len(producers) != 1:
        return None
    (d,) = producers
    dst = info.stage(d)
    if dst.kind == "injective" or dst.readers != (st.name,) or dst.is_output:
        return None
    for r in st.reads_of(d):
        if r.padded or len(r.dims) != len(st.spatial):
            return None
        for (terms, const), v, dv in zip(r.dims, st.spatial, dst.spatial):
            if terms != ((v, 1),) or const != 0 or st.extents[v] != dst.extents[dv]:
                return None
    return d


class GeneratedSpace(Space):
    """The space the rules derive from a program at fixed sizes (see the module's docstring).

    ``default()`` is the rules' own pick (no measurement); ``plans(config)`` the loop plans of the stages at
    the root; ``problems(config)`` why a config cannot be scheduled (empty: it can).
    """

    def __init__(self, op, sizes: dict, threads: int | None = None):
        from ..threadpool import num_threads
        self.op = op
        self.info = analyze(op, sizes)
        self.sizes = dict(self.info.bound.sizes)
        self.threads = threads or num_threads()
        self.registers = vector_register_count()
        self.l1, self.l2 = cache_sizes()
        placements = _placements(self.info)
        self.roles = {st.name: StageRole(st, placements[st.name], self.threads) for st in self.info.stages}
        knobs = [k for role in self.roles.values() for k in role.knobs]
        super().__init__(f"auto:{op.name}", knobs, self._apply, constraint=self._allowed,
                         constraint_doc=f"register tiles of at most {self.registers} vector registers, working "
                                        f"sets within L2 ({self.l2 // 1024} KiB), parallel loops with at least "
                                        f"{self.threads} iterations, placements the loop nests can hold")
        self._problems_cache: dict[str, list] = {}

    @property
    def allowed_size(self) -> int:
        """The number of configs the constraint admits, estimated from 2,000 seeded random draws (the spaces are
        too large to count, and the constraint lowers nothing but is not free)."""
        if self._allowed_size is None:
            rng = np.random.default_rng(0)
            hits = sum(self.allowed(self.random(rng)) for _ in range(2000))
            self._allowed_size = max(1, round(self.size * hits / 2000))
        return self._allowed_size

    def same_as(self, other: Space) -> bool:
        """Whether `other` is a generated space of the same program, sizes, threads and knobs.

        >>> import tensorlang as tl
        >>> op = tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0")
        >>> generated_space(op, {"N": 64}, 2).same_as(generated_space(op, {"N": 64}, 2))
        True
        """
        return (isinstance(other, GeneratedSpace) and other.op.key == self.op.key and other.sizes == self.sizes
                and other.threads == self.threads and other.knobs == self.knobs)

    def canonical(self, config: dict) -> dict:
        """`config` with the knobs it leaves unused at their first values: the template knobs of a stage that is
        not at the root (but the vector width of one computed inside another's loops, which vectorizes it), the
        register tile of the vector variable, the vector width of a stage with nothing vectorized; and each block
        at the largest value of the same block extent (blocks round up to whole register tiles, so that under a
        register tile of 4 rows blocks of 1 to 4 rows are one loop nest). Configs that differ only there schedule
        alike; the tuner measures the canonical one.

        >>> import tensorlang as tl
        >>> op = tl.op("def f(A: f32[N]) -> C:\\n    B[i] = A[i] + 1.0\\n    C[i] = B[i] * 2.0")
        >>> sp = generated_space(op, {"N": 64}, threads=1)
        >>> c = {**sp.default(), "B.place": "inline", "B.vw": sp.knob("B.vw").values[-1]}
        >>> sp.canonical(c)["B.vw"] == sp.knob("B.vw").values[0]
        True
        >>> op = tl.op("def f(A: f32[N, M]) -> B:\\n    B[i, j] = A[i, j] * 2.0")
        >>> sp = generated_space(op, {"N": 64, "M": 64}, 1)
        >>> c = {**sp.default(), "B.vec": "j", "B.i.reg": 4}
        >>> [sp.canonical({**c, "B.i.block": b})["B.i.block"] for b in (1, 2, 3, 4, 6, 8)]
        [4, 4, 4, 4, 8, 8]
        """
        out = dict(config)
        first = {k.name: k.values[0] for k in self.knobs}
        for st in self.info.stages:
            role = self.roles[st.name]
            n = st.name
            names = [k.name for k in role.knobs if not k.name.endswith(".place")]
            if self.placement(out, n) not in ("root",):
                for k in names:  # computed inside another stage's loops, it uses only its vector width
                    if not (k == f"{n}.vw" and self.placement(out, n) == "at"
                            and _inside_vector_var(st, role.lanes) is not None):
                        out[k] = first[k]
                continue
            if out.get(f"{n}.rfactor"):  # the rfactor rule schedules it: its template knobs are unused
                for k in names:
                    if k != f"{n}.rfactor":
                        out[k] = first[k]
                continue
            vec = out.get(f"{n}.vec")
            if vec is None and f"{n}.vw" in out:
                out[f"{n}.vw"] = first[f"{n}.vw"]
            if vec is not None and f"{n}.{vec}.reg" in out:
                out[f"{n}.{vec}.reg"] = first[f"{n}.{vec}.reg"]
            self._canonical_blocks(out, role)
        return out

    def _canonical_blocks(self, out: dict, role: StageRole) -> None:
        """Each block knob of the root stage `role` in `out` at the largest of its values with the same block
        extent (:func:`~tensorlang.autosched.template.block_extent`: blocks round up to whole register tiles), and
        the block of a reduction vectorized innermost (which is never blocked) at its first value."""
        st, n = role.st, role.st.name
        tile = role.tile_config(out)
        for v in st.spatial:
            name = f"{n}.{v}.block"
            if name not in out:
                continue
            E, t = st.extents[v], register_extent(st, tile, v)
            out[name] = self._largest_blocks(name, E, t)[rounded_block(E, t, out[name])]
        if tile.vec in st.reduction and f"{n}.{tile.vec}.block" in out:
            out[f"{n}.{tile.vec}.block"] = self.knob(f"{n}.{tile.vec}.block").values[0]

    def _largest_blocks(self, name: str, extent: int, tile: int) -> dict[int, int]:
        """For block knob `name` along a loop of `extent` under a register tile of `tile`: each block extent its
        values round up to, mapped to the largest value that rounds to it (memoized: canonical forms are asked for
        on every proposal)."""
        memo = self.__dict__.setdefault("_largest_blocks_memo", {})
        key = (name, extent, tile)
        if key not in memo:
            largest: dict[int, int] = {}
            for b in self.knob(name).values:
                r = rounded_block(extent, tile, b)
                largest[r] = max(largest.get(r, b), b)
            memo[key] = largest
        return memo[key]

    # ---- typed configs ----
    def stage_configs(self, config: dict) -> dict[str, StageConfig]:
        """`config` (a dict of knob values; a missing knob is at its default) as one StageConfig a stage, in program
        order: what the rules read and write, flattened back to knob values by :meth:`knob_config`. Given one
        StageConfig a stage already, it is returned as it is: the methods below take either form.

        >>> import tensorlang as tl
        >>> sp = generated_space(tl.op("def f(A: f32[N]) -> C:\\n    B[i] = A[i] + 1.0\\n    C[i] = B[i] * 2.0"),
        ...                      {"N": 64}, threads=1)
        >>> configs = sp.stage_configs(sp.default())
        >>> [(name, sc.place) for name, sc in configs.items()], sp.knob_config(configs) == sp.default()
        ([('B', 'inline'), ('C', 'root')], True)
        """
        if _typed(config):
            if config.keys() != self.roles.keys():
                raise UsageError(f"{self.name}: a config of StageConfigs needs one for each stage, "
                                 f"{', '.join(self.roles)}; got {', '.join(map(str, config))}")
            return config
        return {name: role.config(config) for name, role in self.roles.items()}

    def knob_config(self, config: dict) -> dict:
        """The config as knob values (knob name -> value, every knob, in the space's order) of one StageConfig a
        stage: the inverse of :meth:`stage_configs` (see there)."""
        configs = self.stage_configs(config)
        out: dict = {}
        for name, role in self.roles.items():
            out.update(role.knob_values(configs[name]))
        return out

    # ---- placements ----
    def placement(self, config: dict, name: str) -> Placement:
        """Where stage `name` is computed under `config`: "root", "inline", "at" or "epilogue"."""
        if _typed(config):
            return config[name].place
        return config.get(f"{name}.place", self.roles[name].placements[0])

    def has_buffer(self, config: dict, tensor: str) -> bool:
        """Whether `tensor` is in memory whole under `config`, so that a pack can copy from it: an input, or a
        stage computed at the root (not inlined, nor computed inside another's loops).

        >>> import tensorlang as tl
        >>> sp = generated_space(tl.op("def f(A: f32[N]) -> C:\\n    B[i] = A[i] + 1.0\\n    C[i] = B[i] * 2.0"),
        ...                      {"N": 64}, threads=1)
        >>> sp.has_buffer({"B.place": "inline"}, "B"), sp.has_buffer({"B.place": "root"}, "B"), sp.has_buffer({}, "A")
        (False, True, True)
        """
        return tensor not in self.roles or self.placement(config, tensor) == "root"

    def anchors(self, config: dict) -> dict[str, str | None]:
        """For each stage, the root stage whose loops compute it (itself at the root; None when its readers lead
        to several or it is an output computed elsewhere)."""
        configs = self.stage_configs(config)
        out: dict[str, str | None] = {}
        stages = self.info.stages
        for st in reversed(stages):
            place = configs[st.name].place
            if place == "root":
                out[st.name] = st.name
                continue
            if place == "epilogue":
                out[st.name] = epilogue_producer(self.info, st)
                continue
            found = set()
            for r in st.readers:
                found.add(out.get(r))
            out[st.name] = found.pop() if len(found) == 1 else None
        return out

    def reader_vars(self, anchor: str, tensor: str, config: dict) -> set:
        """The spatial variables of `anchor` on which the part of `tensor` it needs depends (through the stages
        inlined into it or computed inside it)."""
        configs = self.stage_configs(config)
        st = self.info.stage(anchor)
        return self._through(st, tensor, configs, anchor, self.anchors(configs)) & set(st.spatial)

    def _through(self, st: StageInfo, tensor: str, configs: dict[str, StageConfig], anchor: str,
                 anchors: dict) -> set:
        out: set = set()
        for r in st.reads:
            if r.tensor == tensor:
                out |= set(r.vars)
            elif r.tensor in configs and configs[r.tensor].place in ("inline", "at") \
                    and anchors.get(r.tensor) == anchor:
                mid = self.info.stage(r.tensor)
                inner = self._through(mid, tensor, configs, anchor, anchors)
                for d, (terms, _) in enumerate(r.dims):
                    if d < len(mid.spatial) and mid.spatial[d] in inner:
                        out |= {v for v, _ in terms}
        return out

    # ---- plans ----
    def plans(self, config: dict) -> dict[str, LoopPlan]:
        """The loop plan of every stage computed at the root under `config`."""
        configs = self.stage_configs(config)
        return {st.name: plan_loops(st, configs[st.name].tile, self.roles[st.name].lanes)
                for st in self.info.stages if configs[st.name].place == "root" and not configs[st.name].tile.rfactor}

    def attach_loops(self, config: dict, plans: dict) -> tuple[dict[str, str], list[Problem]]:
        """The loop of its anchor at which each "at" stage is computed (one loop for all the stages of an anchor:
        the deepest whose enclosing loops all run over variables each of them depends on), and problems."""
        configs = self.stage_configs(config)
        anchors = self.anchors(configs)
        groups: dict[str, list[str]] = {}
        problems = []
        for st in self.info.stages:
            if configs[st.name].place == "at":
                a = anchors[st.name]
                if a is None or a not in plans:
                    problems.append(Problem(st.name, ProblemKind.AT_READERS,
                                            f"{st.name} at: its readers are not computed in one root stage's loops"))
                    continue
                groups.setdefault(a, []).append(st.name)
        out = {}
        for a, members in groups.items():
            plan = plans[a]
            deps = set.intersection(*(self.reader_vars(a, m, configs) for m in members))
            chosen = None
            for lp in plan.final_order():
                parts = plan.parallel_loops if lp == plan.fused_name() else [lp]
                ok = all(plan.levels[q][1] in ("block", "tile") and plan.levels[q][0] in deps
                         and q not in plan.unroll for q in parts)
                if not ok:
                    break
                chosen = lp
            if chosen is None:
                problems.append(Problem(members[0], ProblemKind.AT_LOOP,
                                        f"{', '.join(members)} at {a}: no loop of {a} runs over only what they depend "
                                        "on", (*members[1:], a)))
                continue
            for m in members:
                out[m] = chosen
        return out, problems

    def problems(self, config: dict) -> list[Problem]:
        """Why `config` cannot be scheduled well (empty: it can): loop plans that do not fit, too many vector
        registers, a working set beyond L2, too few parallel iterations, placements the nests cannot hold; each a
        :class:`~tensorlang.autosched.problems.Problem` whose ``str()`` says it.

        >>> import tensorlang as tl
        >>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
        >>> sp = generated_space(op, {"M": 64, "N": 64, "K": 64}, threads=2)
        >>> [(p.stage, p.kind.value) for p in sp.problems({**sp.default(), "C.parallel": "outer3"})]
        [('C', 'parallel loops')]
        """
        from ..space import config_key
        cfg = self.knob_config(config) if _typed(config) else config
        key = config_key(cfg)
        hit = self._problems_cache.get(key)
        if hit is not None:
            return hit
        out = self._problems(self.stage_configs(cfg))
        if len(self._problems_cache) < 100_000:
            self._problems_cache[key] = out
        return out

    def _problems(self, configs: dict[str, StageConfig]) -> list[Problem]:
        out = []
        anchors = self.anchors(configs)
        for st in self.info.stages:
            if configs[st.name].place == "epilogue":
                prod = anchors[st.name]
                if prod is None or configs[prod].place != "root":
                    out.append(Problem(st.name, ProblemKind.EPILOGUE,
                                       f"{st.name} epilogue: its producer is not at the root"))
                elif configs[prod].tile.rfactor:
                    out.append(Problem(st.name, ProblemKind.EPILOGUE,
                                       f"{st.name} epilogue: its producer {prod} is rfactored", (prod,)))
        plans = self.plans(configs)
        for name, plan in plans.items():
            role = self.roles[name]
            out += plan.problems
            for tensor, _, _ in plan.packs:
                if not self.has_buffer(configs, tensor):
                    out.append(Problem(name, ProblemKind.PACK_SOURCE,
                                       f"{name}: packs {tensor}, which is not computed at the root", (tensor,)))
            if accumulators(plan, role.lanes) > self.registers:
                out.append(Problem(name, ProblemKind.ACCUMULATORS,
                                   f"{name}: {accumulators(plan, role.lanes)} vector accumulators"))
            if plan.parallel_loops and chunks(plan) < self.threads:
                out.append(Problem(name, ProblemKind.PARALLEL_ITERATIONS,
                                   f"{name}: {chunks(plan)} parallel iterations for {self.threads} threads"))
            if plan.cache_write and self.working_set(role.st, plan, plan.cache_write) > self.l2:
                out.append(Problem(name, ProblemKind.WORKING_SET,
                                   f"{name}: the register tile's working set exceeds L2"))
        _, more = self.attach_loops(configs, plans)
        out += more
        return out

    def working_set(self, st: StageInfo, plan: LoopPlan, at: str) -> int:
        """Bytes of the reads that the loops inside loop `at` of `st`'s plan touch (at most: a dimension indexed by a
        value read from data, `E[ids[t], d]`, counts one index per combination of the values its variables take
        inside, up to its size)."""
        order = plan.final_order()
        inside = order[order.index(at) + 1:]
        cover: dict[str, int] = {}
        for lp in inside:
            var = plan.levels[lp][0]
            cover[var] = cover.get(var, 1) * plan.extents[lp]
        total = 0
        for r in st.reads:
            n = 1
            for (terms, _), size in zip(r.dims, r.shape):
                covered = {v: min(cover.get(v, 1), st.extents.get(v, 1)) for v, _ in terms}
                if terms and all(abs(c) >= size > 1 for _, c in terms):  # indexed by a value read from data
                    span = math.prod(covered.values())  # one index, anywhere, per combination of its variables
                else:
                    span = 1 + sum(abs(c) * (covered[v] - 1) for v, c in terms)
                n *= min(span, size)
            total += n * DTYPES[self.info.bound.dtypes[r.tensor]].itemsize
        return total

    def _allowed(self, cfg: dict) -> bool:
        # the register budget first, from the tile configs alone: it rules out most random configs of the
        # reductions with reuse, before any loop plan is made (see problems for the whole list)
        for st in self.info.stages:
            if self.placement(cfg, st.name) == "root":
                role = self.roles[st.name]
                if register_accumulators(st, role.tile_config(cfg), role.lanes) > self.registers:
                    return False
        return not self.problems(cfg)

    # ---- applying a config ----
    def _apply(self, s, cfg: dict) -> None:
        problems = self.problems(cfg)
        if problems:
            raise ScheduleError(f"{self.name}: config not schedulable: {problems[0]}")
        configs = self.stage_configs(cfg)
        plans = self.plans(configs)
        attach, _ = self.attach_loops(configs, plans)
        anchors = self.anchors(configs)
        for st in self.info.stages:
            if configs[st.name].place == "inline":
                s[st.name].compute_inline()
        for plan in plans.values():
            apply_plan(s, plan)
        for st in self.info.stages:
            if configs[st.name].place == "root" and configs[st.name].tile.rfactor:
                apply_rfactor(s, st, self.threads, self.roles[st.name].lanes)
        for st in self.info.stages:
            if configs[st.name].place == "at":
                _schedule_inside(s, st, self.roles[st.name].lanes, configs[st.name].tile.vw)
        for st in reversed(self.info.stages):
            if configs[st.name].place == "at":
                s[st.name].compute_at(s[anchors[st.name]], attach[st.name])
        for st in self.info.stages:
            if configs[st.name].place == "epilogue":
                s[st.name].reverse_compute_inline()
        for stage in self.op.stages:
            if stage.lhs is not None:
                schedule_scatter(s, self.info.bound, stage.name, self.threads)

    # ---- the rules' own pick ----
    def default(self) -> dict:
        """The config the rules pick without measuring (see :mod:`tensorlang.autosched.pick`)."""
        from .pick import rule_config
        return rule_config(self)

    def basin(self, config: dict) -> tuple:
        """The config's sketch, in Ansor's word: every stage's placement and vectorized variable, and the vector width
        of each reduction with reuse (the register tile's shape). Configs of one basin differ in tiles, blocks,
        orders and annotations, which search moves through by small steps; another basin is another loop
        structure. `tuner.strategies.ModelGuidedGenetic` keeps searching the best rival basins.

        >>> import tensorlang as tl
        >>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
        >>> sp = generated_space(op, {"M": 256, "N": 256, "K": 256}, threads=2)
        >>> sp.basin(sp.default()) == sp.basin({**sp.default(), "C.ku": 1}), len(set(map(sp.basin, sp.variants())))
        (True, 4)
        """
        return tuple(config.get(k) for k in self._basin_knobs)

    @cached_property
    def _basin_knobs(self) -> tuple:
        reuse = {st.name for st in self.info.stages if st.kind == "reuse"}
        return tuple(k.name for k in self.knobs if k.name.endswith((".place", ".vec"))
                     or (k.name.endswith(".vw") and k.name[:-3] in reuse))

    def structural_knobs(self) -> tuple[tuple[str, ...], ...]:
        """Two groups: the knobs of the config's basin (see :meth:`basin`) and those of its register tiles (the
        unrolled extents of every stage's tile). One step of either changes the loop structure that the other
        knobs (blocks, orders, unrolling, packs) then tune.

        >>> import tensorlang as tl
        >>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
        >>> generated_space(op, {"M": 64, "N": 64, "K": 64}, threads=2).structural_knobs()
        (('C.vec', 'C.vw'), ('C.i.reg', 'C.j.reg'))
        """
        tiles = tuple(k.name for k in self.knobs if k.name.endswith(".reg"))
        return tuple(group for group in (self._basin_knobs, tiles) if group)

    def variants(self) -> list[dict]:
        """The rules' pick, then the pick at each other vector width of its register tiles and with each stage it
        inlines or computes inside another's loops at the root (see :func:`tensorlang.autosched.pick.rule_variants`):
        what a tuner measures first."""
        from .pick import rule_variants
        return rule_variants(self)

    def random(self, rng: np.random.Generator) -> dict:
        """A random config: placements first, then every knob uniformly."""
        return super().random(rng)

    @cached_property
    def stage_names(self) -> tuple:
        """The stages of the program, in order."""
        return tuple(st.name for st in self.info.stages)


def _inside_vector_var(st: StageInfo, lanes: int) -> str | None:
    """The variable :func:`_schedule_inside` vectorizes in a stage computed inside another's loops (its innermost
    contiguous reduction variable of at least `lanes` elements, or, without reductions, its first spatial variable
    contiguous in the output), or None (nothing vectorized, so its vector width knob is unused)."""
    if st.kind == "reduce":
        for v in reversed(st.reduction):
            if any(abs(r.strides.get(v, 0)) == 1 for r in st.reads) and st.extents[v] >= lanes:
                return v
    inner = [v for v in st.spatial if st.out_strides[v] == 1 and st.extents[v] >= 2]
    return inner[0] if inner and not st.reduction else None


def _schedule_inside(s, st: StageInfo, lanes: int, width: int | None = None) -> None:
    """The loops of a stage computed inside another's: its innermost contiguous variable vectorized `width`
    elements wide (a reduction's into that many vector accumulator lanes: at 4 x 16, four independent vectors
    hide the latency of the max or the add), `lanes` where the variable is shorter than `width`."""
    v = _inside_vector_var(st, lanes)
    if v is None:
        return
    width = width or lanes
    h = s[st.name]
    _, vi = h.split(v, width if st.extents[v] >= width else lanes)
    if v in st.reduction:
        h.reorder(*[q for q in h.loops() if q != vi], vi)
    h.vectorize(vi)


def schedule_scatter(s, bound, name: str, threads: int) -> None:
    """Schedule the scatter stage `name` (`H[b := I[y, x]] += 1`), which has no knobs: its plain left-side
    indices innermost, the last of them vectorized; and, where the updates outnumber the output's elements by
    at least :data:`SCATTER_WORK` per thread, its outermost loop split over the threads, each accumulating into a
    copy of its own (the copies are combined after it).

    >>> import tensorlang as tl
    >>> op = tl.op("def h(I: i32[N]) -> H:\\n    H[b := I[i]] += 1 where b in 0:16")
    >>> s = tl.schedule(op, N=4096)
    >>> schedule_scatter(s, s.bound, "H", threads=2)
    >>> s["H"].loops()
    ['i_o', 'i_i']
    """
    bs = bound.stages[name]
    stage = bs.stage
    h = s[name]
    plain = [v for v in stage.lhs_vars if v not in stage.scatter_vars and bs.ranges[v][1] > 1]
    others = [v for v in stage.loop_vars if v not in plain]
    if plain and others and stage.loop_vars != tuple(others + plain):
        h.reorder(*others, *plain)
    if plain:
        lanes = lanes_of(stage.dtype)
        v = plain[-1]
        if bs.ranges[v][1] > lanes:
            v = h.split(v, lanes)[1]
        h.vectorize(v)
    updates = math.prod(bs.ranges[v][1] for v in stage.loop_vars)
    if threads > 1 and others and bs.ranges[others[0]][1] >= threads \
            and updates >= SCATTER_WORK * threads * math.prod(bs.shape):
        outer, _ = h.split(others[0], -(-bs.ranges[others[0]][1] // threads))
        h.parallel(outer)


def generated_space(op, sizes: dict, threads: int | None = None) -> GeneratedSpace:
    """The generated search space of `op` at `sizes` for `threads` threads (default: the thread pool's count).

    >>> import tensorlang as tl
    >>> op = tl.op("def f(A: f32[N, M]) -> B:\\n    B[i, j] = A[i, j] * 2.0")
    >>> sp = generated_space(op, {"N": 64, "M": 64}, threads=1)
    >>> sp.name, sp.default()["B.vec"]
    ('auto:f', 'j')
    """
    if not isinstance(sizes, dict):
        raise UsageError(f"generated_space: sizes must be a dict of name -> int, got {type(sizes).__name__}")
    return GeneratedSpace(op, sizes, threads)


__all__ = [
    "GeneratedSpace",
    "KnobField",
    "Placement",
    "StageConfig",
    "StageKnobs",
    "epilogue_producer",
    "generated_space",
    "lanes_of",
    "packable",
    "unrolled_selectors",
    "vec_candidates",
]
