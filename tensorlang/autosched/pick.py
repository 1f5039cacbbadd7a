"""The zero-trial pick: a config of a generated space chosen by rules, with no measurement.

The rules are those an expert applies by hand (and BLIS by construction):

- placements: cheap injective stages inlined, unless a reader reads so many points of them that computing them
  again at each would cost more than computing them once; stages read through a window at the root; expensive
  ones (math calls, padded reads) and reductions computed inside their reader's loops where a loop holds them
  without recomputing, else at the root; an injective output that can be computed in its producer's write-back
  is;
- the register tile: the vector width and the unrolled rows that give the most FMAs per load within the
  vector registers (leaving four free), with the least waste in partial tiles; a stencil's rows along its
  window, so that each loaded row serves every output row that needs it; a reduction without reuse, rows
  enough for eight vector accumulators;
- blocks: the reduction blocked so that the register tile's panel of the vector side stays in half of L2;
- packing: the reads that move with the vector variable, and those read along a reduction variable, unless
  the copy would change nothing (:func:`panel_in_place`), each element is read once, or a broadcast side's copy
  would serve fewer than two register tiles (:func:`_x_packs_with_reuse`);
- parallel: the fewest leading loops fused that give every thread the same number of iterations (or at
  least eight each).

A rule that leaves the config unschedulable (the space's ``problems``) is relaxed, in a fixed order, until it is
not; the pick is deterministic.

The rules read and write one typed :class:`~tensorlang.autosched.space.StageConfig` a stage (its placement and
its template's :class:`~tensorlang.autosched.template.TileConfig`), choosing among the values the space offers
(:class:`~tensorlang.autosched.space.StageKnobs`); the config becomes knob values once, at the end. Each rule's
docstring lists its conditions, numbered; the repairs decide from each problem's stage and kind
(:class:`~tensorlang.autosched.problems.Problem`), never from its text.

>>> import tensorlang as tl
>>> from tensorlang.autosched.space import generated_space
>>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
>>> cfg = rule_config(generated_space(op, {"M": 256, "N": 256, "K": 256}, threads=2))
>>> cfg["C.vec"], cfg["C.pack.B"], cfg["C.parallel"]
('j', True, 'inner1')
"""
from __future__ import annotations

import itertools
import math
from dataclasses import replace

from ..codegen_llvm import MAX_DEINTERLEAVED_STRIDE, vector_pieces
from ..dtypes import DTYPES
from .analysis import StageInfo
from .problems import PACK_KINDS, ProblemKind
from .rfactor import rfactor_picked
from .space import KnobField, Placement, StageConfig, StageKnobs, epilogue_producer, packable, unrolled_selectors
from .template import TileConfig, chunks, plan_loops, window_taps, y_side

Configs = dict[str, StageConfig]
"""A config as the rules read and write it: one StageConfig a stage, in program order (see
:meth:`~tensorlang.autosched.space.GeneratedSpace.stage_configs`)."""


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def vector_ops(w: int, lanes: int) -> int:
    """The vector instructions one operation over a vectorized loop of `w` lanes takes in registers of `lanes`:
    whole registers, then the rest in powers of two (`codegen_llvm.vector_pieces`: 14 lanes of 16 are 8 + 4 + 2,
    three instructions where the lanes would fill one).

    >>> vector_ops(64, 16), vector_ops(14, 16), vector_ops(7, 16), vector_ops(8, 16)
    (4, 3, 3, 1)
    """
    return len(vector_pieces(w, lanes))


MASKED_TILE_COST = 4
"""What a register tile whose vector loop runs past the extent costs, in tiles of the same width that do not: the
last tile of a split that does not divide its variable is versioned with its lanes masked. Its tile stays in
registers (its guarded lanes are blended, `codegen_llvm._Emitter._whole_vector_inside`), but every read of its
inputs is a masked load and its lanes past the extent still take their instruction slots. Judged on the picks of
eight zoo models' 388 kernels and the external suites (2 threads, Zen 4): at 2, 20 picks change, geomean 1.27x
their time (MobileNetV3-small's 1x1 convolutions up to 2.2x; PolyBench's gemm and 3mm 0.95x); at 1, 63 change,
1.30x."""


def vector_slots(E: int, w: int, lanes: int) -> int:
    """The register-wide vector instructions one operation over the `E` elements of a variable vectorized in tiles
    of `w` takes, counting a masked last tile :data:`MASKED_TILE_COST` times (see :func:`vector_ops`).

    >>> vector_slots(28, 32, 16), vector_slots(28, 16, 16), vector_slots(64, 32, 16)
    (3, 5, 4)
    """
    if w >= E:
        return vector_ops(E, lanes)
    return (E // w) * vector_ops(w, lanes) + (MASKED_TILE_COST * -(-w // lanes) if E % w else 0)


def tile_efficiency(st: StageInfo, vec: str, w: int, rows: dict, lanes: int,
                    packed: frozenset | set = frozenset()) -> float:
    """How close to the FMA peak the register tile of `w` elements of `vec` by `rows` ({var: unrolled extent})
    can run, from counting one step of the innermost reduction: FMAs (vectors x rows) against loads (each read
    that moves with `vec` loads one vector per row it depends on; where its lanes are s <=
    `MAX_DEINTERLEAVED_STRIDE` elements apart, s vectors and s - 1 shuffles; otherwise a gather of `lanes` loads
    unless it is contiguous or `packed`; every other read one broadcast per row it depends on), at two FMAs and
    two loads a cycle; times the share of lanes and rows that do work (lanes counted per vector instruction,
    with a masked last tile at :data:`MASKED_TILE_COST`: :func:`vector_slots`), and at least eight independent
    accumulators to hide the FMA's latency.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]"),
    ...              {"M": 1024, "N": 1024, "K": 1024}).stage("C")
    >>> round(tile_efficiency(st, "j", 64, {"i": 6}, 16), 2), round(tile_efficiency(st, "j", 16, {}, 16), 2)
    (1.0, 0.06)
    """
    return _efficiency(st, vec, w, rows, lanes, *tile_counts(st, vec, w, rows, lanes, packed))


def _efficiency(st: StageInfo, vec: str, w: int, rows: dict, lanes: int, fmas: int, loads: float) -> float:
    """:func:`tile_efficiency` of a tile whose :func:`tile_counts` are `fmas` and `loads`."""
    E = st.extents[vec]
    eff = E / (vector_slots(E, w, lanes) * lanes)  # lanes that do work, over the lanes of every instruction
    for v, r in rows.items():
        eff *= st.extents[v] / _round_up(st.extents[v], r)
    cycles = max(fmas / 2, loads / 2)
    return eff * (fmas / 2) / cycles * min(1.0, fmas / 8)


L2_LOAD_COST = 4
"""What a vector load from L2 costs in load slots: L2 sustains about half a 64-byte line a cycle to a core where L1
serves two loads. A read that moves with the vector comes from L2 when its panel (the tile's vectors of it over the
whole reduction) exceeds L1, so that every register tile along the X side loads it again from L2 (EfficientNet-B0's
1x1 convolution 672 -> 112 channels at 14 x 14: 7 filter blocks x 2 rows stream 300 KB of filters from L2 per tile,
0.34 ms; one block x 28 pixels, 43 KB of filters, 0.14 ms; Emerald Rapids, 2 threads)."""


def tile_counts(st: StageInfo, vec: str, w: int, rows: dict, lanes: int,
                packed: frozenset | set = frozenset(), l1: int | None = None) -> tuple:
    """(FMAs, loads) of one step of the innermost reduction in the register tile of `w` elements of `vec` by
    `rows` (see :func:`tile_efficiency`): vector FMAs, and vector loads, broadcasts and gathered lanes; with the
    L1 size `l1` (bytes), a vector read whose panel exceeds it costs :data:`L2_LOAD_COST` loads a vector.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]"),
    ...              {"M": 1024, "N": 1024, "K": 1024}).stage("C")
    >>> tile_counts(st, "j", 64, {"i": 6}, 16), tile_counts(st, "j", 64, {"i": 6}, 16, l1=48 * 1024)
    ((24, 10.0), (24, 22.0))
    """
    vecs = vector_ops(min(w, st.extents[vec]), lanes)
    n_rows = math.prod(rows.values()) if rows else 1
    fmas = vecs * n_rows
    loads = 0.0
    for r in st.reads:
        per = math.prod(n for v, n in rows.items() if v in r.vars)
        stride = abs(r.strides.get(vec, 0))
        panel = min(w, st.extents[vec]) * 4 * per * math.prod(st.extents[x] for x in st.reduction if x in r.vars)
        cost = L2_LOAD_COST if stride and l1 is not None and panel > l1 else 1
        if stride == 0:
            loads += per  # a broadcast per row
        elif stride == 1 or (r.tensor in packed and r.plain_dim(vec) is not None):
            loads += per * vecs * cost  # contiguous, or made so by a pack that puts vec's dimension innermost
        elif stride <= MAX_DEINTERLEAVED_STRIDE:
            # lanes a few elements apart: the span's `stride` vectors, then `stride` - 1 shuffles, which take the
            # FP ports the FMAs need (counted as loads: the model has no third kind of instruction)
            loads += per * vecs * (2 * stride - 1) * cost
        else:
            loads += per * vecs * lanes  # a gather (a strided window stays strided in any layout)
    return fmas, loads


def reuse(st: StageInfo, tensor: str) -> int:
    """How many times each element of `tensor` is read by stage `st`: the product of the extents of the
    spatial variables that none of its reads depends on (1: every element read once).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def mv(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]"),
    ...              {"M": 1, "N": 128, "K": 512}).stage("C")
    >>> reuse(st, "A"), reuse(st, "B")
    (128, 1)
    """
    used = set().union(*(r.vars for r in st.reads_of(tensor)))
    return math.prod(st.extents[v] for v in st.spatial if v not in used)


ENOUGH_FMAS_PER_LOAD = 1.5
"""Among register tiles the model rates alike, one with fewer FMAs per load than this loses to one with more: a
tile that issues about a load per FMA reaches the model's peak only if nothing else takes a load slot. Above it
the ratio no longer decides, and the model's other terms pick the tile."""


UNROLLED_OPS = 4096
"""At most this many operations (a stage's arithmetic and reads, once per vector of its register tile and per
unrolled step) in the reduction body the pick unrolls: LLVM's build time grows with the unrolled body, and large
fused bodies (random programs make them) would take seconds to build; the tile kernels of matmul and the
convolutions stay far below (a multiply-add is 4)."""


TILE_OPS = 1024
"""At most this many operations (a stage's arithmetic and reads, once per vector) in the register tile the pick
weighs: the multiply-add of matmul and the convolutions (4) leaves the register file the only limit; a random
program's fused body of 72 gets at most 14 vectors, which keeps its build short."""


FREE_REGISTERS = 4
"""Vector registers a register tile leaves free of accumulators (for the loaded vector, the broadcasts and the
addresses): :func:`register_tiles` weighs tiles of at most `registers` - this many."""


def register_tiles(st: StageInfo, vec: str, lanes: int, registers: int, reg_values: dict, vws: tuple,
                   packed: frozenset | set = frozenset(), l1: int | None = None) -> list[tuple]:
    """Every (vw, {var: rows}, efficiency) register tile of a reduction with reuse that :func:`register_tile`
    weighs (the vector width and up to two unrolled spatial variables within `registers` - 4 accumulators), the
    best first: by :func:`tile_efficiency` (with the L1 size `l1`, vectors streamed from L2 at
    :data:`L2_LOAD_COST`), then the FMAs per load up to :data:`ENOUGH_FMAS_PER_LOAD`, then the fewest rows along
    variables that every read depends on (:func:`batch_rows`), then the most accumulators, then the narrower
    vector.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]"),
    ...              {"M": 1024, "N": 1024, "K": 1024}).stage("C")
    >>> [t[:2] for t in register_tiles(st, "j", 16, 32, {"i": (1, 2, 4, 6, 7, 8)}, (16, 32, 48, 64))[:3]]
    [(64, {'i': 7}), (64, {'i': 6}), (32, {'i': 8})]
    """
    # a large body needs registers of its own, and is copied once per vector of the tile
    budget = min(registers - FREE_REGISTERS, max(1, TILE_OPS // (st.ops + len(st.reads))))
    others = [v for v in st.spatial if v != vec and st.extents[v] > 1 and v in reg_values]
    others.sort(key=lambda v: -st.extents[v])
    E = st.extents[vec]
    scored, seen = [], set()
    for vw in vws:
        w = min(vw, E)
        vecs = vector_ops(w, lanes)
        for pair in itertools.combinations(others, min(2, len(others))) if others else [()]:
            for combo in itertools.product(*[reg_values[v] for v in pair]):
                n_rows = math.prod(combo) if combo else 1
                if vecs * n_rows > budget:
                    continue
                rows = {v: r for v, r in zip(pair, combo) if r > 1}
                key = (vw, tuple(sorted(rows.items())))
                if key in seen:
                    continue
                seen.add(key)
                fmas, loads = tile_counts(st, vec, w, rows, lanes, packed, l1)
                e = _efficiency(st, vec, w, rows, lanes, fmas, loads)
                # ties: up to ENOUGH_FMAS_PER_LOAD, the most FMAs per load, then the fewest independent copies,
                # then the bigger tile (less overhead per FMA), then the narrower vector
                intensity = min(ENOUGH_FMAS_PER_LOAD, round(fmas / max(loads, 1.0), 2))
                scored.append(((round(e, 2), intensity, -batch_rows(st, rows), vecs * n_rows, -vw), (vw, rows, e)))
    scored.sort(key=lambda t: t[0], reverse=True)  # stable: among equals, the first weighed
    return [tile for _, tile in scored]


def batch_rows(st: StageInfo, rows: dict) -> int:
    """The copies a register tile's `rows` make along variables that every read of `st` depends on (a batch): such
    rows share no loaded value, so they only add streams to load from; among tiles the model rates alike, rows
    that reuse loads win (the Winograd products of ResNet-18, 16 batches of 64 x 64 x 784: 32 lanes x 14 pixels
    0.41 ms against 32 lanes x 7 pixels x 2 batches 0.56 ms; Emerald Rapids, 2 threads).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> src = "def bmm(A: f32[B, M, K], X: f32[B, K, N]) -> C:\\n    C[b, i, j] += A[b, i, k] * X[b, k, j]"
    >>> st = analyze(tl.op(src), {"B": 4, "M": 64, "N": 64, "K": 64}).stage("C")
    >>> batch_rows(st, {"i": 7, "b": 2}), batch_rows(st, {"i": 14})
    (2, 1)
    """
    return math.prod(n for v, n in rows.items() if all(v in r.vars for r in st.reads))


def register_tile(st: StageInfo, vec: str, lanes: int, registers: int, reg_values: dict, vws: tuple,
                  packed: frozenset | set = frozenset(), l1: int | None = None) -> tuple:
    """(vw, {var: rows}, efficiency) for the register tile of a reduction with reuse: the vector width and up to
    two unrolled spatial variables with the best :func:`tile_efficiency` within `registers` - 4 accumulators
    (ties: the most accumulators, whose loop overhead and write-back spread over more FMAs); the first of
    :func:`register_tiles`.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]"),
    ...              {"M": 1024, "N": 1024, "K": 1024}).stage("C")
    >>> register_tile(st, "j", 16, 32, {"i": (1, 2, 4, 6, 7, 8)}, (16, 32, 48, 64))[:2]
    (64, {'i': 7})
    """
    tiles = register_tiles(st, vec, lanes, registers, reg_values, vws, packed, l1)
    return tiles[0] if tiles else (vws[0], {}, 0.0)


TILE_TRIES = 64
"""The most register tiles the pick weighs, the best first, for one whose working set fits in L2."""

MIN_KC = 128
"""The shortest reduction block the rules give a register tile: shorter, loading and storing the tile's
accumulators costs more than the block's FMAs gain."""


def _with_packs(st: StageInfo, tile: TileConfig, packs: dict[str, bool]) -> TileConfig:
    """`tile` with each tensor of `packs` packed or not, the others as they were (packs in the order `st` reads
    them, which is the order they are made in)."""
    return replace(tile, pack=tuple(t for t in dict.fromkeys(r.tensor for r in st.reads)
                                    if packs.get(t, t in tile.pack)))


def _reduction_block(space, st: StageInfo, tile: TileConfig, offered: StageKnobs, vec: str,
                     vw: int) -> tuple[TileConfig, int]:
    """Block the outer reduction variable so that the vector side's packed block (the panels of every register
    tile along it: each X-side block sweeps all of them) stays in half of L2; where that leaves fewer than
    `MIN_KC` reduction steps, block the vector side instead. Returns `tile` so blocked and the reduction steps of
    a block (a packed block swept from L3 for every X-side block is bound by memory, not by the FMAs).

    Conditions:
      1. the space offers to block the stage's outermost reduction variable (else nothing changes);
      2. its block is the largest whose vector-side block (the vector variable's block x the block's reduction
         steps) fits in half of L2, else the smallest;
      3. where that leaves fewer than `MIN_KC` steps (or the whole reduction, if shorter) and the space offers to
         block the vector variable: the smallest block of at least `MIN_KC` steps, and the vector side's block
         narrowed to the widest (at least one register tile) that then fits.
    """
    red = math.prod(st.extents[r] for r in st.reduction) or 1
    outer = st.reduction[0] if st.reduction else None
    if outer is None or outer not in offered.rblock:
        return tile, red
    inner = red // st.extents[outer]
    half = space.l2 // 2
    vb = min(tile.block.get(vec, st.extents[vec]), st.extents[vec])
    values = offered.rblock[outer]
    b = max((x for x in values if vb * 4 * inner * x <= half), default=values[0])
    block = tile.block
    if b * inner < min(MIN_KC, red) and vec in offered.block:
        b = min((x for x in values if x * inner >= MIN_KC), default=st.extents[outer])
        narrower = [x for x in offered.block[vec] if vw <= x < vb and x * 4 * inner * b <= half]
        if narrower:
            block = {**block, vec: max(narrower)}
    return replace(tile, block=block, rblock={**tile.rblock, outer: b}), b * inner


FEW_X_TILES = 4
"""An X-side block of at most this many register tiles reuses each panel of the vector side's block that few
times, so that block must stay in L2 (see :func:`_reduction_block`)."""


def _x_tiles(st: StageInfo, tile: TileConfig, ys: set) -> int:
    """The register tiles in one X-side block of `tile`."""
    return math.prod(-(-min(tile.block.get(v, st.extents[v]), st.extents[v]) // tile.reg.get(v, 1))
                     for v in st.spatial if v not in ys)


def _y_tiles(st: StageInfo, tile: TileConfig, ys: set) -> int:
    """The register tiles in one block of the Y side (`ys`: the vector variable in tiles of the vector width, the
    others in their rows) of `tile`; :func:`_x_tiles`'s twin."""
    return math.prod(-(-min(tile.block.get(v, st.extents[v]), st.extents[v])
                       // max(1, tile.vw if v == tile.vec else tile.reg.get(v, 1))) for v in ys)


def _x_block(space, st: StageInfo, tile: TileConfig, offered: StageKnobs, rows: dict, ys: set,
             red: int) -> TileConfig:
    """`tile` with the X side's rows in blocks of register tiles whose panel (rows x `red` reduction steps) fits
    in 60% of L1 (A's mr x kc panel in BLIS), so that the threads can split the blocks.

    Conditions:
      1. the register tile unrolls some variable (`rows`); the one of the largest extent is the row;
      2. the row is on the X side and the space offers to block it;
      3. its block is the smallest of at least as many register tiles as fit in 60% of L1, else the whole extent.
    """
    row = max(rows, key=lambda v: st.extents[v]) if rows else None
    if row is None or row in ys or row not in offered.block:
        return tile
    per = max(1, int(0.6 * space.l1) // (rows[row] * min(red, 1024) * 4))
    b = min((b for b in offered.block[row] if b >= rows[row] * per), default=st.extents[row])
    return replace(tile, block={**tile.block, row: b})


LINE_BYTES = 64
"""A cache line, in bytes (:func:`short_runs`)."""


def short_runs(st: StageInfo, read, itemsize: int = 4) -> bool:
    """Whether `read` runs contiguously along a reduction variable for less than a cache line (:data:`LINE_BYTES`)
    before it jumps: each line it loads serves a few elements (a first convolution's 3 channels, an NCHW window's 3
    pixels of a row).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> src = "def c(P: f32[C, N], W: f32[C, R]) -> O:\\n    O[h] += P[c, h + r] * W[c, r] where h in 0:N-R+1"
    >>> st = analyze(tl.op(src), {"C": 64, "N": 8, "R": 3}).stage("O")
    >>> [(r.tensor, short_runs(st, r)) for r in st.reads]
    [('P', True), ('W', True)]
    """
    return any(abs(read.strides.get(x, 0)) == 1 and 1 < st.extents[x] and st.extents[x] * itemsize < LINE_BYTES
               for x in st.reduction)


X_PACK_TILES = 2
"""The fewest register tiles of the vector side that read one copy of a broadcast side's panel for the rules to
make that copy (:func:`_x_packs_with_reuse`)."""


def _x_packs_with_reuse(space, st: StageInfo, tile: TileConfig) -> TileConfig:
    """`tile` (its blocks and parallel loop final) without the packs of tensors read only by broadcasts (the X
    side) whose copy would serve fewer than :data:`X_PACK_TILES` register tiles along the vector side: the copy is
    made again for every block of the vector side, and read once it only adds a pass over the panel (MLP-Mixer's
    196 x 2048 x 512 GEMM in blocks of 32 columns, one tile each, for two threads: 2.68 ms packed, 1.55 ms in
    place; EfficientNet-B0's 1x1 convolution 672 -> 112 channels, all 7 filter blocks in one tile, 0.53 -> 0.34 ms;
    Emerald Rapids, 2 threads). The queries of an attention block (197 rows of 64, 13 tiles of keys a copy) keep
    theirs: read in place, their 14 rows 256 bytes apart ran 1.5x slower.

    Conditions, for each packed tensor T of a reduction with reuse vectorized along a spatial variable:
      1. no read of T moves with the vector variable, and none runs along the reduction for less than a cache
         line (:func:`short_runs`: the copy puts the few elements of each line it would load side by side, so
         such an image keeps its copy even under one tile: Ansor's first dilated convolution, 7 x 7 taps over 3
         channels, 0.90 ms packed against 1.33 ms in place, where the NHWC convolutions over 256 channels and more
         ran up to 1.26x faster in place);
      2. the vector side's block (the Y-side variables' blocks, each over its register tile, the vector's over
         the vector width) holds fewer than :data:`X_PACK_TILES` tiles: T is read in place.
    """
    if st.kind != "reuse" or tile.vec is None or tile.vec not in st.spatial or not tile.pack:
        return tile
    if _y_tiles(st, tile, set(y_side(st, tile.vec))) >= X_PACK_TILES:
        return tile
    itemsize = {t: DTYPES[space.info.bound.dtypes[t]].itemsize for t in tile.pack}
    x_side = {t for t in tile.pack if not any(r.strides.get(tile.vec, 0) or short_runs(st, r, itemsize[t])
                                              for r in st.reads_of(t))}
    return replace(tile, pack=tuple(t for t in tile.pack if t not in x_side))


def _pack_rule(space, st: StageInfo, configs: Configs, tile: TileConfig, vec: str,
               packable_reads: set) -> TileConfig:
    """`tile` with each read the space offers to pack (`packable_reads`) of a reduction with reuse packed or not.

    Conditions for packing tensor T:
      1. a read of T moves with the vector variable (a vector read that a pack makes contiguous, or a contiguous
         one whose panels then stream from L1), or is contiguous along a reduction variable of more than one
         iteration (broadcasts along a reduction whose rows lie far apart: A's rows in a matmul, a convolution's
         padded image; a broadcast side copied for too few register tiles is read in place instead, see
         :func:`_x_packs_with_reuse`);
      2. some element of T is read more than once, or a read of T moves with the vector variable by more than
         one element (a copy pays only when the copied panel is read again: the weights of a matrix-vector
         product are read once, in place where they are contiguous);
      3. T is in memory whole (an input, or a stage at the root): a stage inlined or computed inside another's
         loops has no buffer to copy from (a 1x1 convolution's padding stage with no padding is inlined);
      4. where T moves with the vector variable, its panel is not already contiguous in the loops' order
         (:func:`panel_in_place`): a copy would cost a pass over it on every call and stream no better
         (NCHW16c convolutions' blocked filters).
    """
    packs = {}
    for t in packable_reads:
        reads = st.reads_of(t)
        moves = any(r.strides.get(vec, 0) for r in reads)
        along_reduction = any(any(abs(r.strides.get(x, 0)) == 1 and st.extents[x] > 1 for x in st.reduction)
                              for r in reads)
        once = reuse(st, t) == 1 and all(abs(r.strides.get(vec, 0)) <= 1 for r in reads)
        packs[t] = bool(moves or along_reduction) and not once and space.has_buffer(configs, t) \
            and not (moves and panel_in_place(st, t, tile))
    return _with_packs(st, tile, packs)


def _ku_rule(space, st: StageInfo, configs: Configs, tile: TileConfig, offered: StageKnobs, vec: str,
             rows: dict) -> int:
    """How far the rules unroll the innermost reduction loop of a reduction with reuse whose register tile is
    `tile` (`tile.vw` elements of `vec` by `rows`).

    Conditions, the first that holds deciding:
      1. a short window's taps (:func:`~tensorlang.autosched.template.window_taps`) are offered: all of them
         (each tap's offset becomes a constant);
      2. the loop has at most 8 steps, some value covers it, and the stage reads, contiguously along `vec`, an
         inlined stage read through a window (a padded image): the whole loop, so that each tap's bounds guard
         folds to a constant offset (not at a stride, where unrolling them measured slower);
      3. the loop has at most 8 steps and its extent is offered: the whole loop;
      4. else the largest of 4 and 2 that divides it (a tail would put a guard in the hot loop), else 1;

    then, where the unrolled body would exceed :data:`UNROLLED_OPS` (each step copies it once per vector of the
    register tile), the largest value within that which divides the loop, else 1.
    """
    inner = st.extents[st.reduction[-1]]
    values = offered.ku
    taps = window_taps(st)
    if taps is not None and taps in values:
        ku = taps
    elif inner <= 8 and any(v >= inner for v in values) and _reads_inlined_window(space, st, configs, vec):
        ku = min(v for v in values if v >= inner)
    else:
        ku = inner if inner in values and inner <= 8 else \
            next((v for v in (4, 2) if v in values and inner % v == 0), 1)
    step = (st.ops + len(st.reads)) * math.prod(rows.values()) * max(1, -(-tile.vw // space.roles[st.name].lanes))
    if ku * step > UNROLLED_OPS:
        ku = max((v for v in values if v * step <= UNROLLED_OPS and inner % v == 0), default=1)
    return ku


def _reuse_tile_defaults(space, st: StageInfo, configs: Configs, tile: TileConfig, offered: StageKnobs, vec: str,
                         vw: int, rows: dict, packable_reads: set) -> TileConfig:
    """`tile` with the knobs of a reduction with reuse that follow from its register tile (`vw` elements of `vec`
    by `rows`): blocks, the reduction's blocking, packs and the unrolling of the innermost reduction loop.

    Conditions:
      1. the other Y-side variables (a batch) are blocked one at a time, so that the threads can split them;
      2. the X side is blocked for L1 (:func:`_x_block`);
      3. where the vector side's panel over the whole reduction exceeds half of L2 and the space offers to block
         the outer reduction variable: the largest block that fits, else the smallest;
      4. where an X-side block holds at most :data:`FEW_X_TILES` register tiles, it sweeps the vector side's
         whole packed block for each of them: that block in half of L2 (:func:`_reduction_block`) and the X
         blocks sized again for the shorter reduction block (convolutions, whose X blocks hold many tiles, keep
         theirs);
      5. packs by :func:`_pack_rule`, the unrolling by :func:`_ku_rule` where the space offers it.
    """
    tile = replace(tile, vw=vw, reg={**tile.reg, **rows})
    ys = set(y_side(st, vec))
    tile = replace(tile, block={**tile.block, **{v: 1 for v in st.spatial
                                                 if v in ys and v != vec and v in offered.block}})
    tile = _x_block(space, st, tile, offered, rows, ys, math.prod(st.extents[r] for r in st.reduction) or 1)
    panel = min(vw, st.extents[vec]) * 4
    for r in st.reduction:
        panel *= st.extents[r]
    outer = st.reduction[0] if st.reduction else None
    if outer and outer in offered.rblock and panel > space.l2 // 2:
        values = offered.rblock[outer]
        fits = [b for b in values if panel // st.extents[outer] * b <= space.l2 // 2]
        tile = replace(tile, rblock={**tile.rblock, outer: max(fits) if fits else values[0]})
    if _x_tiles(st, tile, ys) <= FEW_X_TILES:
        tile, kc = _reduction_block(space, st, tile, offered, vec, vw)
        tile = _x_block(space, st, tile, offered, rows, ys, kc)
    tile = _pack_rule(space, st, configs, tile, vec, packable_reads)
    if offered.ku:
        tile = replace(tile, ku=_ku_rule(space, st, configs, tile, offered, vec, rows))
    return tile


def indirect(read) -> bool:
    """Whether `read` indexes some dimension by a value loaded from data (`curve[I[y, x]]`, `E[ids[t], d]`): the
    analysis gives such a dimension its whole extent as the coefficient of each variable of the value, which no
    affine index inside the tensor can have.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def f(L: f32[16], I: i32[N]) -> O:\\n    O[i] = L[I[i]]"), {"N": 64}).stage("O")
    >>> [(r.tensor, indirect(r)) for r in st.reads]
    [('L', True), ('I', False)]
    """
    return any(len(terms) >= 1 and all(abs(k) >= n > 1 for _, k in terms)
               for (terms, _), n in zip(read.dims, read.shape))


def _vector_rule(space, st: StageInfo, vws: tuple, registers: int, packable_reads: set) -> str | None:
    """The variable the rules vectorize in stage `st` (None: leave it to LLVM).

    Conditions, the first that holds deciding:
      1. a reduction with reuse: the spatial candidate whose best register tile (:func:`register_tile`, at the
         vector widths `vws` within `registers`) runs closest to the FMA peak, ties to the earlier candidate;
      2. the best candidate by :func:`~tensorlang.autosched.space.vec_candidates` reads at a stride along it that
         no pack can make contiguous (a pool's window at stride 2): None, since LLVM's loop vectorizer does better
         on the plain loop: its vectors load the span of their lanes and shuffle, as the template's do too
         (`MAX_DEINTERLEAVED_STRIDE`), but it runs the loop's last partial vector as scalar code where the
         template's is masked (the built-in 2x2 max pool at 56 outputs a row: 0.031 ms against 0.046 ms); not for
         a read at an index loaded from data (a lookup table, :func:`indirect`), which gathers either way, and
         which LLVM leaves scalar (the camera pipe's tone curve: 8x slower);
      3. else that best candidate.
    """
    role = space.roles[st.name]
    vec = role.vecs[0]
    if st.kind == "reuse":
        scored = []
        for i, v in enumerate(role.vecs):
            if v is None or v not in st.spatial:
                continue
            e = register_tile(st, v, role.lanes, registers, role.offered.reg, vws, packable_reads, space.l1)[2]
            scored.append((round(e, 2), -i, v))
        if scored:
            vec = max(scored)[2]
    elif vec is not None and any(abs(r.strides.get(vec, 0)) > 1 and not packable(st, r.tensor) and not indirect(r)
                                 for r in st.reads):
        vec = None
    return vec


def _stage_defaults(space, st: StageInfo, configs: Configs, vw: int | None = None,
                    registers: int | None = None) -> None:
    """Set, in `configs`, the rules' template of stage `st` (its placement already chosen): with `vw`, a reduction
    with reuse gets its best register tile at that vector width; `registers` bounds the register tiles weighed.

    Conditions:
      1. the vector variable by :func:`_vector_rule`; every register tile and block first the whole extent;
      2. a reduction with reuse vectorized along a spatial variable: the best register tile
         (:func:`register_tiles`, at most :data:`TILE_TRIES`) whose working set fits in L2 and whose
         accumulators fit the registers (the space rules the others out; relaxing the best one afterwards, knob
         by knob, can shrink it below the accumulators that hide the FMA's latency), with the knobs that follow
         from it
         (:func:`_reuse_tile_defaults`); where none fits, the best, for the repair to relax;
      3. vectorized along a reduction variable: the widest vector (several vector accumulators hide the add's
         latency);
      4. computed inside a reader's loops: the narrowest vector (it covers the reader's tile, which may be
         narrower than two vectors: a vector wider than the region it computes is mostly masked);
      5. else two vectors where the space offers them;
      6. no pack but in a reduction with reuse (a transposing copy is the search's to try: it needs blocks to
         copy);
      7. an injective stage with a vector variable: :func:`_transpose_tiles`, then :func:`_stencil_rows`;
      8. a stage that is not a reduction with reuse: the variables that its selects test
         (:func:`~tensorlang.autosched.space.unrolled_selectors`) in register tiles of their whole extent, where the
         space offers them: unrolled, each copy computes one side of its selects.
    """
    role = space.roles[st.name]
    offered = role.offered
    registers = space.registers if registers is None else registers
    vws = offered.vw
    if st.kind == "reuse" and vw in vws:  # a variant of the pick: the register tile at this vector width
        vws = (vw,)
    packable_reads = set(offered.pack)
    vec = _vector_rule(space, st, vws, registers, packable_reads)
    sc = configs[st.name]
    tile = replace(sc.tile, vec=vec, reg={**sc.tile.reg, **{v: 1 for v in offered.reg}},
                   block={**sc.tile.block, **{v: st.extents[v] for v in offered.block}},
                   rblock={**sc.tile.rblock, **{r: st.extents[r] for r in offered.rblock}})
    if st.kind == "reuse" and vec is not None and vec in st.spatial:
        tiles = register_tiles(st, vec, role.lanes, registers, offered.reg, vws, packable_reads, space.l1) \
            or [(vws[0], {}, 0.0)]
        for width, rows, _ in tiles[:TILE_TRIES] + tiles[:1]:  # none fits: the best, for the repair to relax
            trial = _reuse_tile_defaults(space, st, configs, tile, offered, vec, width, rows, packable_reads)
            problems = space.problems({**configs, st.name: replace(sc, tile=trial)})
            if not any(p.stage == st.name and p.kind in (ProblemKind.WORKING_SET, ProblemKind.ACCUMULATORS)
                       for p in problems):
                break
        tile = trial
    elif vec in st.reduction:
        tile = replace(tile, vw=vws[-1])
    elif sc.place == "at":
        tile = replace(tile, vw=vws[0])
    else:
        tile = replace(tile, vw=vws[min(1, len(vws) - 1)])
    if st.kind != "reuse":
        tile = _with_packs(st, tile, dict.fromkeys(packable_reads, False))
    if st.kind == "reduce" and vec is not None and vec in st.spatial and sc.place == "root":
        tile = _reduction_rows(space, st, configs, tile, offered, vec, role.lanes)
    if st.kind == "injective" and vec is not None:
        tile = _transpose_tiles(space, st, tile, offered, role.lanes)
        tile = _stencil_rows(space, st, configs, tile, offered, role.lanes)
    if st.kind != "reuse":
        unrolled = {v: st.extents[v] for v in unrolled_selectors(st)
                    if v != tile.vec and st.extents[v] in offered.reg.get(v, ())}
        tile = replace(tile, reg={**tile.reg, **unrolled})
    configs[st.name] = replace(sc, tile=tile)


ACCUMULATORS = 8
"""Vector accumulators a reduction's register tile keeps in flight (:func:`_reduction_rows`): the latency of an
FMA or an add (4 cycles on current x86 cores) times the two a core issues a cycle. Fewer, and each step of the
reduction waits for the one before it."""


def _reduction_rows(space, st: StageInfo, configs: Configs, tile: TileConfig, offered: StageKnobs, vec: str,
                    lanes: int) -> TileConfig:
    """`tile` of a reduction without reuse (a stencil's taps, a max filter's window, a sum over rows) vectorized
    along a spatial variable and computed at the root, with rows along another spatial variable, so that the
    register tile holds :data:`ACCUMULATORS` vectors, each its own chain of adds, and the innermost reduction
    loop unrolled as :func:`_ku_rule` unrolls a reduction with reuse (a short window's offsets become constants).

    Conditions, for the rows:
      1. the other spatial variables the space offers a register tile along, the longest first;
      2. the first whose extent is at least twice the rows wanted (:data:`ACCUMULATORS` over the tile's vectors);
      3. its largest offered value up to those rows that keeps the tile within the vector registers less
         :data:`FREE_REGISTERS` and its body within :data:`TILE_OPS`;
      4. none: the tile as it was.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> src = "def s(I: f32[H, W]) -> O:\\n    O[y, x] += I[y + j, x + i] where i in 0:3, j in 0:3"
    >>> cfg = rule_config(generated_space(tl.op(src), {"H": 512, "W": 512}, threads=2))
    >>> cfg["O.vec"], cfg["O.y.reg"], cfg["O.ku"]
    ('x', 4, 9)
    """
    vecs = -(-min(tile.vw, st.extents[vec]) // lanes)
    want = max(1, -(-ACCUMULATORS // vecs))
    budget = min(space.registers - FREE_REGISTERS, max(1, TILE_OPS // (st.ops + len(st.reads))))
    rows: dict = {}
    for v in sorted((v for v in st.spatial if v != vec and v in offered.reg), key=lambda v: -st.extents[v]):
        if st.extents[v] < 2 * want:
            continue
        fits = [r for r in offered.reg[v] if 1 < r <= want and r * vecs <= budget]
        if fits:
            rows = {v: max(fits)}
        break
    tile = replace(tile, reg={**tile.reg, **rows})
    if offered.ku:
        tile = replace(tile, ku=_ku_rule(space, st, configs, tile, offered, vec, rows))
    return tile


STENCIL_ROWS = 8
"""The most rows of a stencil's register tile (:func:`_stencil_rows`): each row's window rows stay in registers."""


def window_vars(space, config: dict, st: StageInfo) -> dict:
    """{variable of `st`: taps} for the variables along which `st` reads some tensor at several offsets (a
    window: `X[y, x] + X[y + 1, x]` reads along `y` with 2 taps), directly or through the stages `config` (knob
    values, or one StageConfig a stage) inlines into it, whose windows are then `st`'s (a separable blur's
    vertical pass, inlined into the horizontal one), and of the reductions computed in its tile over a window of a
    stage computed there too (Harris's 3 x 3 sums of products: the products' halo rows).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> src = ("def blur(X: f32[H, W]) -> B:\\n    T[y, x] = X[y, x] + X[y + 1, x] + X[y + 2, x]\\n"
    ...        "    B[y, x] = T[y, x] + T[y, x + 1]")
    >>> sp = generated_space(tl.op(src), {"H": 64, "W": 64}, threads=1)
    >>> B = sp.info.stage("B")
    >>> window_vars(sp, {"T.place": "inline"}, B), window_vars(sp, {"T.place": "root"}, B)
    ({'x': 2, 'y': 3}, {'x': 2})
    """
    configs = space.stage_configs(config)
    taps: dict = {}
    offsets: dict = {}
    for r in st.reads:
        for terms, const in r.dims:
            if len(terms) == 1 and terms[0][1] == 1:
                offsets.setdefault((r.tensor, terms[0][0]), set()).add(const)
        place = configs[r.tensor].place if r.tensor in space.roles else None
        if place not in ("inline", "at"):
            continue
        producer = space.info.stage(r.tensor)
        if place == "inline":  # its windows are this stage's
            inner = window_vars(space, configs, producer)
        elif producer.kind == "reduce":  # computed in this stage's tile: the halo of what it reads there
            inner = _slid_windows(space, configs, producer)
        else:
            continue
        # the producer's variables as this stage's: a plain index `T[y, x + 1]` maps T's d-th variable to y
        names = {producer.spatial[d]: terms[0][0] for d, (terms, _) in enumerate(r.dims)
                 if d < len(producer.spatial) and len(terms) == 1 and terms[0][1] == 1}
        for v, n in inner.items():
            if v in names:
                taps[names[v]] = max(taps.get(names[v], 1), n)
    for (_, v), consts in offsets.items():
        if len(consts) > 1:
            taps[v] = max(taps.get(v, 1), max(consts) - min(consts) + 1)
    return dict(sorted(taps.items()))


def _slid_windows(space, configs: Configs, st: StageInfo) -> dict:
    """{spatial variable of reduction `st`: taps} for its reads of stages `configs` computes inside a tile ("at")
    through a window that a reduction variable slides along that spatial one (`P[y + a, x + b]`, `a` in 0:3:
    {'y': 3, 'x': 3}): the halo of those stages in the tile where `st` is computed too (:func:`window_vars`)."""
    taps: dict = {}
    for q in st.reads:
        if q.tensor not in space.roles or configs[q.tensor].place != "at":
            continue
        for terms, _ in q.dims:
            slid = [v for v, c in terms if v in st.reduction and c == 1]
            own = [v for v, c in terms if v in st.spatial and c == 1]
            if len(terms) == 2 and len(slid) == 1 and len(own) == 1:
                taps[own[0]] = max(taps.get(own[0], 1), st.extents[slid[0]])
    return taps


def _stencil_rows(space, st: StageInfo, configs: Configs, tile: TileConfig, offered: StageKnobs,
                  lanes: int) -> TileConfig:
    """`tile` with a stencil's register tile of rows along its window, so that each row it loads serves every
    output row whose window covers it (LLVM keeps the loads of the unrolled rows in registers): a 3-tap window
    then loads each row about once instead of three times (computing the producer at the tile, instead of inlining
    it, does about as well; the search may take it).

    Conditions, for the window variables (:func:`window_vars`) by most taps first, the first that qualifies:
      1. the variable is not the vector variable and the space offers a register tile along it;
      2. its extent is at least twice its taps;
      3. some register tile of 2 to :data:`STENCIL_ROWS` rows keeps its rows' windows (rows + taps - 1 rows of
         vectors) within the vector registers, less :data:`FREE_REGISTERS`: the largest such.
    """
    vec = tile.vec
    vecs = -(-min(tile.vw, st.extents[vec]) // lanes)
    for v, taps in sorted(window_vars(space, configs, st).items(), key=lambda t: (-t[1], t[0])):
        if v == vec or v not in offered.reg or st.extents[v] < 2 * taps:
            continue
        fits = [r for r in offered.reg[v]
                if 1 < r <= STENCIL_ROWS and (r + taps - 1) * vecs <= space.registers - FREE_REGISTERS]
        if fits:
            return replace(tile, reg={**tile.reg, v: max(fits)})
    return tile


def panel_in_place(st: StageInfo, tensor: str, tile: TileConfig) -> bool:
    """Whether each read of `tensor` by `st` that moves with the vector variable of `tile` reads its panel as
    contiguous runs of memory in the order of the loops, one run per value of the other spatial variables (a
    register tile of several output-channel blocks reads one run each). The hardware prefetcher streams such runs
    as well as it streams a packed copy, which would cost a pass over the panel on every call (NCHW16c filters).

    Conditions:
      1. some read of `tensor` moves with the vector variable;
      2. the vector variable's block is one register tile wide (several register tiles along it in a block: the
         copy puts each one's panel apart);
      3. every such read indexes each dimension by one variable (not a window or a scaled index: not the plain
         layout a copy makes);
      4. in each, the vector variable is at stride 1, and each reduction variable blocked beyond 1 at the stride
         of the elements inside it, innermost first in the reduction's order.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> src = "def c(I: f32[4, 8], W: f32[2, 4, 16]) -> O:\\n    O[o, x, v] += I[c, x] * W[o, c, v]"
    >>> st = analyze(tl.op(src), {}).stage("O")
    >>> tile = TileConfig(vec="v", vw=16, reg={"o": 2}, block={"v": 16}, red_order=("c",))
    >>> panel_in_place(st, "W", tile), panel_in_place(st, "W", replace(tile, block={"v": 8}, vw=8))
    (True, False)
    """
    vec = tile.vec
    order = list(tile.red_order) or list(st.reduction)

    def block(v: str) -> int:
        blocks = tile.rblock if v in st.reduction else tile.block
        return min(blocks.get(v, st.extents[v]), st.extents[v])

    reads = [r for r in st.reads_of(tensor) if r.strides.get(vec or "", 0)]
    if not reads or vec is None or block(vec) > tile.vw * tile.reg.get(vec, 1):
        return False
    for r in reads:
        if any(len(terms) != 1 or terms[0][1] != 1 for terms, _ in r.dims):
            return False
        run = 1
        for v in [vec] + sorted((x for x in r.strides if x in st.reduction and block(x) > 1), key=order.index,
                                reverse=True):
            if r.strides[v] != run:
                return False
            run *= block(v)
    return True


def _transpose_tiles(space, st: StageInfo, tile: TileConfig, offered: StageKnobs, lanes: int) -> TileConfig:
    """`tile` for a stage that writes along one variable and reads along another, touching more cache lines in a
    run of the written one than L1 keeps (a transpose): vectors of gathers along 1,024 elements of a transpose
    touch 1,024 lines before coming back to the next element of each, all 4 KB apart (one L1 set of 12 ways), so
    every line is evicted before its next element is read: blocks reuse each line. A short run (NCHW to NCHW16c:
    16 channels), or one whose lines fit in half of L1 and fall in different sets (NCHW16c to NCHW: 112 lines 64
    bytes apart), keeps its vectors, which blocks would only shorten. A transposed copy of the read's blocks (a
    transpose in registers) with one vector along the written variable beats the blocks of scalars: its loads and
    stores are whole vectors.

    Conditions, for the first read that qualifies:
      1. lanes along the vector variable fall in different cache lines (the read's stride along it exceeds 64
         bytes);
      2. the run along the vector variable touches more lines than L1 keeps (more than its 12 ways where the
         stride is a multiple of 4 KB, else more than L1 / 128);
      3. the read is contiguous along another spatial variable;

    then the vector variable and that one in blocks of one vector (`lanes` elements, or the largest block
    below) where the space offers them, and the read packed (transposed) with the narrowest vector where the
    space offers to pack it, else nothing vectorized (no vector of gathers).
    """
    vec = tile.vec
    for r in st.reads:
        stride = abs(r.strides.get(vec, 0)) * DTYPES[space.info.bound.dtypes[r.tensor]].itemsize
        if stride <= 64:
            continue  # lanes that share lines
        lines, ways = st.extents[vec], 12
        if lines <= (ways if stride % 4096 == 0 else space.l1 // 128):
            continue
        along = next((v for v, step in r.strides.items() if abs(step) == 1 and v in st.spatial), None)
        if along is None or along == vec:
            continue
        block = dict(tile.block)
        for v in (vec, along):
            if v in offered.block:
                block[v] = max((b for b in offered.block[v] if b <= lanes), default=offered.block[v][0])
        tile = replace(tile, block=block)
        if r.tensor in offered.pack:
            return replace(_with_packs(st, tile, {r.tensor: True}), vw=offered.vw[0])
        return replace(tile, vec=None)
    return tile


PARALLEL_WORK = 1 << 16
"""Operations (points x operations each) below which a stage runs on one thread: a parallel loop costs a few
microseconds, which is more than such a stage takes."""


def _balanced_parallel(space, st: StageInfo, configs: Configs, tile: TileConfig) -> TileConfig:
    """`tile` (stage `st`'s, in `configs`) with the rules' parallel loop.

    Conditions, the first that holds deciding:
      1. some parallel choice gives every thread the same number of iterations, or at least eight each
         (:func:`_parallel_choices`), or there is one thread: the first of the choices;
      2. a block of some spatial variable the space offers to block (largest extent first; blocks that divide the
         extent first, since 112 in blocks of 96 gives one thread 96 rows and the other 16), of as many blocks
         as a multiple of the threads or at least eight a thread, makes such a choice (with no parallel loop at
         all, every block the whole extent or a reduction block outermost, a block makes one): that block and
         that choice;
      3. else the first choice (with too little work, "none").
    """
    choices, balanced = _parallel_choices(space, st, configs, tile)
    if balanced or space.threads == 1:
        return replace(tile, parallel=choices[0])
    offered = space.roles[st.name].offered
    for exact in (True, False):
        for v in sorted(st.spatial, key=lambda v: -st.extents[v]):
            if v not in offered.block:
                continue
            E = st.extents[v]
            for B in sorted(offered.block[v], reverse=True):
                n = -(-E // B)
                if B >= E or (n % space.threads and n < 8 * space.threads) or (exact and E % B):
                    continue
                trial = replace(tile, block={**tile.block, v: B})
                got, ok = _parallel_choices(space, st, configs, trial)
                if ok:
                    return replace(trial, parallel=got[0])
    return replace(tile, parallel=choices[0])


def _parallel_choices(space, st: StageInfo, configs: Configs, tile: TileConfig) -> tuple[list[str], bool]:
    """The parallel choices the space offers stage `st` under `tile` that give every thread an iteration, those
    that split evenly (or at least eight a thread) first, then "none"; and whether any splits evenly.

    Conditions for a choice:
      1. the stage and the stages computed in its loops do at least :data:`PARALLEL_WORK` operations (else only
         "none", which counts as even);
      2. its loop plan has no problem;
      3. it has at least as many iterations as threads.
    """
    role = space.roles[st.name]
    anchors = space.anchors(configs)  # the stages computed in this one's loops add their work to its own
    work = sum(s.points * max(1, s.ops) for s in space.info.stages if anchors.get(s.name) == st.name)
    if max(work, st.points * max(1, st.ops)) < PARALLEL_WORK:
        return ["none"], True
    good: list[str] = []
    ok: list[str] = []
    for p in role.offered.parallel:
        if p == "none":
            continue
        plan = plan_loops(st, replace(tile, parallel=p), role.lanes)
        if plan.problems:
            continue
        c = chunks(plan)
        if c < space.threads:
            continue
        (good if c % space.threads == 0 or c >= 8 * space.threads else ok).append(p)
    return good + ok + ["none"], bool(good)


#: Loads a point of a stage may make once the stages it reads are inlined into it (rule 3 of
#: :func:`_placement_rule`): inlining a stage copies its expression into each of its reader's reads of it, so
#: chains of stencils, interpolations and pyramids multiply (Halide's bilateral grid: blurs of 5 taps along three
#: axes read through 8 interpolation taps, about 2000 loads a pixel, a 150 s compile; the interpolate app's
#: pyramid, 3 loads a level down and 4 up, never finished compiling). Judged on the external suites' programs and
#: the built-in workloads (2 threads, Zen 3): at 128 four of 131 picks change, the bilateral grid (33x faster),
#: unsharp (4.6x), interpolate (143 ms, a 33 s compile at 2560 x 1536) and demosaic (0.90x: 44.6 against 40.2 ms);
#: at 64 demosaic lost more (0.72x) and the camera pipe lost 0.79x; at 256 unsharp kept its 4.6x loss and
#: interpolate its compile time.
MAX_INLINED_LOADS = 128


def inlined_loads(info, place: dict) -> dict:
    """Loads a point of each stage makes with the stages `place` marks "inline" substituted into it: one per read
    of a tensor computed elsewhere (an input, or a stage placed anywhere else), an inlined stage's own count per
    read of it.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> op = tl.op("def f(A: f32[N]) -> C:\\n    B[i] = A[i] + A[i + 1]\\n    C[i] = B[i] + B[i + 1] + B[i + 2]")
    >>> info = analyze(op, {"N": 64})
    >>> inlined_loads(info, {"B": "inline"})["C"], inlined_loads(info, {})["C"]
    (6, 3)
    """
    loads: dict = {}
    for st in info.stages:
        loads[st.name] = sum(loads.get(r.tensor, 1) if place.get(r.tensor) == "inline" else 1 for r in st.reads)
    return loads


def _placement_rule(space, st: StageInfo, producers: set, placed: dict | None = None) -> Placement:
    """Where the rules compute stage `st`, one the space lets move (`producers`: the reductions whose
    write-back can compute their reader; `placed`: the placements of the stages before it).

    Conditions, the first that holds deciding:
      1. the space offers to compute it in its producer's write-back: "epilogue";
      2. it is such a producer (its reader is computed in its write-back): "root";
      3. an injective stage that is cheap (no math calls, no reads that pad), inlined into every reader
         at most :data:`MAX_INLINED_LOADS` loads a point, and, where a reader reads several points of it (a
         window), whose loads times those points stay within :data:`MAX_WINDOW_RECOMPUTE`: "inline";
      3b. a padding stage (one load, which may fall outside its tensor) read only by reductions without reuse (a
         pool's window, :func:`_padding_read_by_pools`): "inline", each tap tests its bounds;
      4. a cheap injective stage read only by reductions over a small window that the rules compute inside their
         reader's tile (:func:`_computed_with_its_window_readers`: Harris's products of gradients under its 3 x 3
         sums): "at", in that tile with its halo, as Halide's overlapping tiles are (the reader's tile gets rows
         for it: :func:`window_vars`);
      5. a stage read through a window (a padded image, a stencil's taps), or an injective one that a reader reads
         at several points: "root", since computed inside its readers its halo would be recomputed;
      6. a reduction with reuse (a matmul or convolution read by a stage that is not its epilogue, a permuted
         write say): "root", where it gets its own register tile (computed at a reader's loop it gets the
         reader's);
      7. else (an expensive injective stage, a reduction without reuse): "at", inside its reader's loops.
    """
    if "epilogue" in space.roles[st.name].placements:
        return "epilogue"
    if st.name in producers:
        return "root"
    if st.kind == "injective" and not st.expensive and _inlining_stays_small(space.info, st, placed or {}):
        return "inline"
    if _padding_read_by_pools(space.info, st):
        return "inline"
    if st.kind == "injective" and not st.expensive and _computed_with_its_window_readers(space, st, producers,
                                                                                          placed or {}):
        return "at"
    if windowed(space.info, st.name) or (st.kind == "injective" and _read_at_points(space.info, st) > 1):
        return "root"
    if st.kind == "reuse":
        return "root"
    return "at"


def _padding_read_by_pools(info, st: StageInfo) -> bool:
    """Whether `st` is a padding stage (injective, one read, which may fall outside its tensor, no math calls) read
    only by reductions without reuse (pools): inlined, each tap of the window tests its bounds, which costs less than
    writing the padded copy whole and reading it back (ResNet-18's 3 x 3 max pool at stride 2 over 64 x 112 x 112:
    0.24 -> 0.13 ms; Emerald Rapids, 2 threads). A convolution's padded image stays where the other rules put it
    (its reader packs or tiles it).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> src = ("def mp(I: f32[8, 8]) -> O:\\n    P[y, x] = select(y >= 1 and x >= 1, I[y - 1, x - 1], -inf) "
    ...        "where y in 0:9, x in 0:9\\n    O[y, x] max= P[2*y + r, 2*x + s] where y in 0:4, x in 0:4, r in 0:2, "
    ...        "s in 0:2")
    >>> info = analyze(tl.op(src), {})
    >>> _padding_read_by_pools(info, info.stage("P"))
    True
    """
    if st.kind != "injective" or len(st.reads) != 1 or not st.reads[0].padded or not st.readers:
        return False
    return not st.math_calls and all(info.stage(r).kind == "reduce" for r in st.readers)


MAX_TILE_WINDOW = 9
"""The most points of a stage that one point of its reader reads for :func:`_computed_with_its_window_readers` to
compute the stage in its reader's tile: a 3 x 3 window, whose halo around a tile of 8 rows of 32 adds 33%; a
wider one (the max filter's 53 taps) would recompute more than it saves."""


def _computed_with_its_window_readers(space, st: StageInfo, producers: set, placed: dict) -> bool:
    """Whether every reader of `st` is a reduction that reads it through a window of at most
    :data:`MAX_TILE_WINDOW` points and that the rules compute inside its own reader's loops (condition 4 of
    :func:`_placement_rule`): computed there too, `st` is computed for the tile and its halo, and never written
    whole to memory and read back (Harris's three products of gradients, summed over 3 x 3: three full images
    before).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> src = ("def h(X: f32[H, W]) -> R:\\n    P[y, x] = X[y, x] * X[y, x + 1]\\n"
    ...        "    S[y, x] += P[y + a, x + b] where a in 0:3, b in 0:3\\n    R[y, x] = S[y, x] * S[y, x]")
    >>> sp = generated_space(tl.op(src), {"H": 64, "W": 64}, threads=1)
    >>> _computed_with_its_window_readers(sp, sp.info.stage("P"), set(), {})
    True
    """
    stages = {o.name: o for o in space.info.stages}
    readers = [stages[r] for r in st.readers if r in stages]
    if not readers or not windowed(space.info, st.name):
        return False
    after = {**placed, st.name: "at"}
    for reader in readers:
        if reader.kind != "reduce" or not 1 < window_points(reader, st.name) <= MAX_TILE_WINDOW:
            return False
        if "at" not in space.roles[reader.name].placements or \
                _placement_rule(space, reader, producers, after) != "at":
            return False
    return True


MAX_WINDOW_RECOMPUTE = 16
"""The most loads an injective stage inlined into a reader that reads it through a window may cost a point of that
reader: its own loads (with what it inlines) once per point of the window, since each is computed again for
every reader point that covers it. A separable blur's first pass (3 loads, read at 3 points: 9) stays inlined;
a gradient's input (a gray value of 3 loads read at 6 points: 18) or products of gradients summed over a 3x3
window (9 points) are computed once, at the root, and the window reads the results."""


def window_points(reader: StageInfo, name: str) -> int:
    """How many points of stage `name` one point of `reader` reads through a window: one per read at another index
    (`B[i - 1] + B[i + 1]`: 2), times the extents of the reduction variables that slide with a spatial one in its
    index (a 3x3 box sum `B[y + a, x + b]` reads 9 points; a matmul's `B[i, k]` is no window: the points of a row
    are each read by other points of the reader, not again by the same one's neighbours).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> src = "def f(A: f32[N]) -> C:\\n    B[i] = A[i] * 2.0\\n    C[i] += B[i + r] where r in 0:3"
    >>> info = analyze(tl.op(src), {"N": 64})
    >>> window_points(info.stage("C"), "B")
    3
    """
    distinct = {r.dims: r for r in reader.reads_of(name)}.values()  # `B[i] * B[i]` reads one point
    return sum(math.prod(reader.extents[v] for terms, _ in r.dims if len(terms) > 1
                         for v, _ in terms if v in reader.reduction) for r in distinct)


def _read_at_points(info, st: StageInfo) -> int:
    """The most points of `st` that one point of any of its readers reads (:func:`window_points`)."""
    stages = {o.name: o for o in info.stages}
    return max((window_points(stages[r], st.name) for r in st.readers if r in stages), default=0)


def _inlining_stays_small(info, st: StageInfo, placed: dict) -> bool:
    """Whether inlining `st` (after the stages `placed` before it) keeps every reader within
    :data:`MAX_INLINED_LOADS` loads a point, and each reader that reads it through a window within
    :data:`MAX_WINDOW_RECOMPUTE` loads a point for it, unless `st` makes one load (a copy, a cast, a padding:
    inlined, each point read is a load, as from its buffer); condition 3 of :func:`_placement_rule`."""
    loads = inlined_loads(info, {**placed, st.name: "inline"})
    if not all(loads[r] <= MAX_INLINED_LOADS for r in st.readers if r in loads):
        return False
    points = _read_at_points(info, st)  # one load: a load either way
    return points <= 1 or loads[st.name] <= 1 or loads[st.name] * points <= MAX_WINDOW_RECOMPUTE


def rule_config(space, vw: int | None = None, place: dict | None = None, registers: int | None = None) -> dict:
    """The rules' config of a :class:`~tensorlang.autosched.space.GeneratedSpace` (see the module's docstring):
    deterministic, allowed by the space's constraint, and one that schedules. With `vw`, the register tiles of
    the reductions with reuse are the best the rules find at that vector width; `place` overrides the rules'
    placement of the stages it names (stage -> "root", "at", ...; see :func:`rule_variants`).

    Every stage gets its placement (:func:`_placement_rule`) and its template (:func:`_stage_defaults`) in
    program order, then its parallel loop (:func:`_balanced_parallel`); the config is repaired until it
    schedules (:func:`_until_it_schedules`).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> sp = generated_space(tl.op("def f(A: f32[N, M]) -> B:\\n    B[i, j] = exp(A[i, j])"), {"N": 512, "M": 512}, 2)
    >>> cfg = rule_config(sp)
    >>> cfg["B.vec"], cfg["B.parallel"], sp.allowed(cfg)
    ('j', 'outer1', True)
    """
    configs = space.stage_configs({k.name: k.values[0] for k in space.knobs})
    info = space.info
    producers = {epilogue_producer(info, st) for st in info.stages
                 if "epilogue" in space.roles[st.name].placements}
    for k, st in enumerate(info.stages):
        if len(space.roles[st.name].placements) > 1:
            placed = {o.name: configs[o.name].place for o in info.stages[:k]}
            where = place[st.name] if place and st.name in place else _placement_rule(space, st, producers,
                                                                                       placed)
            configs[st.name] = replace(configs[st.name], place=where)
        _stage_defaults(space, st, configs, vw, registers)
    for st in info.stages:
        tile = _balanced_parallel(space, st, configs, configs[st.name].tile)
        configs[st.name] = replace(configs[st.name], tile=_x_packs_with_reuse(space, st, tile))
    for st in info.stages:
        _rfactor_rule(space, st, configs)
    return space.knob_config(_until_it_schedules(space, configs))


def _rfactor_rule(space, st: StageInfo, configs: Configs) -> None:
    """Rfactor stage `st` in `configs` (:mod:`tensorlang.autosched.rfactor`) where its outputs are too few for the
    threads and a reduction variable is long.

    Conditions, all of:
      1. the space offers to rfactor it (:func:`~tensorlang.autosched.rfactor.rfactor_offered`: several threads,
         a reduction, few outputs, a reduction variable of at least ``MIN_CHUNK`` iterations a thread);
      2. it has fewer than ``SPATIAL_PER_THREAD`` output elements a thread
         (:func:`~tensorlang.autosched.rfactor.rfactor_picked`);
      3. it is placed at the root;
      4. every other stage computed in its loops can move: one in its write-back (an epilogue) moves to the root
         (as few elements as it has, its own loops cost nothing), one inside its loops is inlined where the space
         offers that; else it is not rfactored.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def mean(A: f32[N]) -> M:\\n    S[z] += A[k] where z in 0:1\\n    M[z] = S[z] / 1000.0")
    >>> cfg = rule_config(generated_space(op, {"N": 1 << 20}, threads=2))
    >>> cfg["S.rfactor"], cfg["M.place"]
    (True, 'root')
    """
    sc = configs[st.name]
    if not space.roles[st.name].offered.rfactor or not rfactor_picked(st, space.threads) or sc.place != "root":
        return
    anchors = space.anchors(configs)
    moved: dict[str, Placement] = {}
    for o in space.info.stages:
        if o.name == st.name or anchors.get(o.name) != st.name:
            continue
        place = configs[o.name].place
        to: Placement | None = "root" if place == "epilogue" else "inline" if place == "at" else None
        if to is None or to not in space.roles[o.name].placements:
            return
        moved[o.name] = to
    configs[st.name] = replace(sc, tile=replace(sc.tile, rfactor=True))
    for name, to in moved.items():
        configs[name] = replace(configs[name], place=to)
        o = space.info.stage(name)
        _stage_defaults(space, o, configs)
        configs[name] = replace(configs[name], tile=_balanced_parallel(space, o, configs, configs[name].tile))


def rule_variants(space) -> list[dict]:
    """The configs a tuner measures before its strategy proposes, one per loop structure the rules' model cannot
    rank by itself, so that search starts in every basin, as Ansor's sketches each seed its population: the rules'
    pick first; the pick at each other vector width of the register tiles of the reductions with reuse (a
    matmul's, a convolution's); the pick with each stage it computes inside another's loops or inlines computed at
    the root instead, and each it computes at the root inlined (at most :data:`PLACEMENT_VARIANTS` of those); each
    of these with its X side held in L2 (:func:`x_side_in_l2`); then the moved placements at the other vector
    widths, and those with the X side in L2; then the pick and its other widths with the X side read in place
    (:func:`x_side_in_place`), then with every read in place (:func:`every_read_in_place`), then with each
    data-moving stage vectorized along its read (:func:`read_side_vectorized`), then with each rfactor knob the
    space offers flipped (:func:`_rfactor_rule`); last, where there is room, the
    register tiles within half the register file, as picked, with the X side and with every read in place; at most
    :data:`MAX_STARTS` in all (one round of the tuner).

    Why several starts: the model counts FMAs against loads; it does not see register allocation, the cost of
    packing a wide vector block, or what one loop of tanh and exp costs against two, and a search started from the
    pick alone seldom leaves the pick's basin; the basins also combine (a config three moves from the pick, each
    move slower alone), which search from single moves does not reach. Deterministic, distinct, each allowed and
    one that schedules.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
    >>> vs = rule_variants(generated_space(op, {"M": 256, "N": 256, "K": 256}, threads=2))
    >>> vs[0] == rule_config(generated_space(op, {"M": 256, "N": 256, "K": 256}, threads=2)), 1 < len(vs) <= MAX_STARTS
    (True, True)
    """
    from ..space import config_key
    pick = rule_config(space)
    chosen = space.stage_configs(pick)
    widths: list[int] = []
    for st in space.info.stages:
        if st.kind == "reuse" and chosen[st.name].tile.vec in st.spatial:
            widths += [w for w in space.roles[st.name].offered.vw if w not in widths]
    moved = [(st.name, "root") for st in space.info.stages if chosen[st.name].place in ("at", "inline")
             and "root" in space.roles[st.name].placements]
    # and the other way: a stage the pick keeps at the root, inlined (a padded image inlined into a depthwise
    # convolution: its guards fold per unrolled tap, which saves the copy)
    moved += [(st.name, "inline") for st in space.info.stages if chosen[st.name].place == "root"
              and "inline" in space.roles[st.name].placements]
    places = [{name: where} for name, where in moved[:PLACEMENT_VARIANTS]]
    first = [pick] + [rule_config(space, w) for w in widths] + [rule_config(space, place=p) for p in places]
    crossed = [rule_config(space, w, place=p) for p in places for w in widths]
    candidates = first + [x_side_in_l2(space, c) for c in first] + crossed + [x_side_in_l2(space, c) for c in crossed]
    candidates += [x_side_in_place(space, c) for c in first]
    candidates += [every_read_in_place(space, c) for c in first]
    candidates += [read_side_vectorized(space, c) for c in first]
    # the pick with each rfactor knob flipped (where the space offers one: few outputs, a long reduction)
    candidates += [{**pick, k.name: not pick[k.name]} for k in space.knobs if k.name.endswith(".rfactor")]
    out: list[dict] = []
    seen: set = set()

    def take(configs) -> None:
        for cfg in configs:
            if len(out) == MAX_STARTS:
                return
            k = config_key(cfg)
            if k not in seen and (not out or space.allowed(cfg)):
                seen.add(k)
                out.append(cfg)

    take(candidates)
    if widths and len(out) < MAX_STARTS:
        # last, where the round has room: the register tiles within half the register file. The rules count FMAs
        # against loads and rate 28 accumulators above 16 where both load about once per 1.5 FMAs, but a smaller
        # tile with the padded image read in place can run faster, and the other starts do not lead there
        half = rule_config(space, registers=space.registers // 2 + FREE_REGISTERS)
        take([half, x_side_in_place(space, half), every_read_in_place(space, half)])
    return out


MAX_STARTS = 16
"""The most start configs :func:`rule_variants` gives: the tuner's first round (``batch``), 8% of 200 trials."""


PLACEMENT_VARIANTS = 3  # stages moved to the root, one per start config: the first round stays a few trials


def x_side_in_l2(space, cfg: dict) -> dict:
    """`cfg` with each reduction with reuse at the root holding its whole X side in L2, where that side's reads
    (those that do not move with the vector variable: a dense layer's activations, a convolution's image) fit in
    half of it: the X-side variables and the reduction unblocked, the vector side blocked to one register tile's
    width, the X-side reads read in place rather than packed (each packed copy would be made once per vector
    block). The loop nest is then BLIS's with one micro-panel per outer block: each thread packs a panel of the
    weights, then sweeps every row of the activations, which stay in L2, through the whole reduction. The rules'
    pick sizes the X side's blocks for L1 instead, as a large matmul needs (its activations exceed L2); where they
    fit in L2 (a dense layer over a few hundred tokens) this nest wins, and search from the pick does not unblock
    the rows. Unchanged where nothing fits.

    Conditions, for each reduction with reuse at the root vectorized along a spatial variable (:func:`_x_sides`):
      1. it has X-side reads;
      2. they fit, whole, in half of L2;

    then its parallel loop is chosen again (:func:`_balanced_parallel`).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
    >>> sp = generated_space(op, {"M": 64, "N": 3072, "K": 512}, threads=2)  # A: 128 KB, in half of any L2 here
    >>> v = x_side_in_l2(sp, sp.default())
    >>> v["C.i.block"], v["C.k.block"], v["C.pack.A"]
    (64, 512, False)
    """
    configs = space.stage_configs(cfg)
    for st, vec, ys, x_reads in _x_sides(space, configs):
        held = sum(math.prod(r.shape) * DTYPES[space.info.bound.dtypes[r.tensor]].itemsize for r in x_reads)
        if not x_reads or held > space.l2 // 2:
            continue
        offered = space.roles[st.name].offered
        tile = configs[st.name].tile
        block = {**tile.block, **{v: st.extents[v] for v in st.spatial if v not in ys and v in offered.block}}
        rblock = {**tile.rblock, **{r: st.extents[r] for r in st.reduction if r in offered.rblock}}
        if vec in offered.block:
            values = offered.block[vec]
            block[vec] = min((b for b in values if b >= tile.vw), default=values[-1])
        tile = _with_packs(st, replace(tile, block=block, rblock=rblock),
                           {r.tensor: False for r in x_reads if r.tensor in offered.pack})
        configs[st.name] = replace(configs[st.name], tile=_balanced_parallel(space, st, configs, tile))
    return space.knob_config(configs)


def x_side_in_place(space, cfg: dict) -> dict:
    """`cfg` with the X-side reads of each reduction with reuse at the root read in place rather than packed (see
    :func:`x_side_in_l2`), where they are broadcasts (they do not move with the vector variable): the pick packs
    them when their rows lie far apart, but a block of the image that the X-side blocks keep in L2 reads as fast
    in place, without the copy (an image too big for :func:`x_side_in_l2` still gains). Unchanged where nothing is
    packed.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
    >>> sp = generated_space(op, {"M": 1024, "N": 1024, "K": 1024}, threads=2)
    >>> v = x_side_in_place(sp, {**sp.default(), "C.vec": "j", "C.pack.A": True, "C.pack.B": True})
    >>> v["C.pack.A"], v["C.pack.B"]
    (False, True)
    """
    configs = space.stage_configs(cfg)
    for st, _, _, x_reads in _x_sides(space, configs):
        sc = configs[st.name]
        configs[st.name] = replace(sc, tile=_with_packs(st, sc.tile, {r.tensor: False for r in x_reads}))
    return space.knob_config(configs)


def every_read_in_place(space, cfg: dict) -> dict:
    """`cfg` with no read of a reduction with reuse at the root packed: where a whole batch's operands sit in L2
    (batch_matmul's 128 x 64 and 64 x 128 slabs, 32 KB each), the copies cost a pass over them on every call and
    stream no better; search from the other start configs, which pack the vector side, does not turn both packs
    off. Unchanged where nothing is packed.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
    >>> sp = generated_space(op, {"M": 1024, "N": 1024, "K": 1024}, threads=2)
    >>> v = every_read_in_place(sp, {**sp.default(), "C.vec": "j", "C.pack.A": True, "C.pack.B": True})
    >>> v["C.pack.A"], v["C.pack.B"]
    (False, False)
    """
    configs = space.stage_configs(cfg)
    for st in space.info.stages:
        sc = configs[st.name]
        if st.kind == "reuse" and sc.place == "root":
            configs[st.name] = replace(sc, tile=replace(sc.tile, pack=()))
    return space.knob_config(configs)


def read_side_vectorized(space, cfg: dict) -> dict:
    """`cfg` with each stage at the root that moves data without a reduction (a transpose, a permuted copy)
    vectorized along the variable its read is contiguous in where the config vectorizes another (its output's),
    and that stage's packs off: the loads stream and the stores scatter, where the pick's stream the stores from a
    transposed copy of the read. Both kinds run about as fast, and search from the pick does not leave the pick's
    basin for the other.

    Conditions, for each stage at the root without a reduction, the first read that qualifies:
      1. the vector variable moves the read by more than one element (not a read along the vector already, nor a
         row's statistic or a bias, which it does not move);
      2. the read is contiguous along another spatial variable, which the space offers to vectorize.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def t(X: f32[M, N]) -> Y:\\n    Y[j, i] = X[i, j]")
    >>> sp = generated_space(op, {"M": 256, "N": 256}, threads=2)
    >>> v = read_side_vectorized(sp, sp.default())
    >>> sp.default()["Y.vec"], v["Y.vec"], v["Y.pack.X"], sp.allowed(v)
    ('i', 'j', False, True)
    """
    configs = space.stage_configs(cfg)
    for st in space.info.stages:
        sc = configs[st.name]
        if st.reduction or sc.place != "root":
            continue
        for r in st.reads:
            if abs(r.strides.get(sc.tile.vec, 1)) == 1:
                continue
            v = next((v for v, stride in r.strides.items() if abs(stride) == 1 and v in st.spatial), None)
            if v is not None and v in space.roles[st.name].offered.vec:
                configs[st.name] = replace(sc, tile=replace(sc.tile, vec=v, pack=()))
                break
    return space.knob_config(configs)


def _x_sides(space, configs: Configs):
    """(stage, vector variable, Y-side variables, X-side reads) of each reduction with reuse at the root whose
    vector variable is spatial under `configs`: the X-side reads are those that do not move with any Y-side
    variable."""
    for st in space.info.stages:
        sc = configs[st.name]
        vec = sc.tile.vec
        if st.kind != "reuse" or sc.place != "root" or vec not in st.spatial:
            continue
        ys = set(y_side(st, vec))
        yield st, vec, ys, [r for r in st.reads if not set(r.vars) & ys]


def _reads_inlined_window(space, st: StageInfo, configs: Configs, vec: str) -> bool:
    """Whether `st` reads, contiguously along `vec`, a stage that `configs` inlines and that is read through a
    window (a padded image: its bounds guards are then in `st`'s loops)."""
    return any(r.tensor in space.roles and configs[r.tensor].place == "inline"
               and windowed(space.info, r.tensor) and abs(r.strides.get(vec, 0)) == 1 for r in st.reads)


def windowed(info, name: str) -> bool:
    """Whether some stage reads stage `name` through a window (an index that mixes variables, `y + r`), so that
    neighbouring iterations of the reader need overlapping parts of it.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> src = "def c(I: f32[N], W: f32[R]) -> O:\\n    P[y] = I[y - 1] where y in 0:N+2\\n    O[h] += P[h + r] * W[r]"
    >>> windowed(analyze(tl.op(src), {"N": 8, "R": 3}), "P")
    True
    """
    for st in info.stages:
        for r in st.reads_of(name):
            if any(len(terms) != 1 or terms[0][1] != 1 for terms, _ in r.dims):
                return True
    return False


def _to_root(space, configs: Configs, name: str) -> Configs:
    """`configs` with stage `name` computed at the root (with the rules' template) instead of where it was."""
    st = space.info.stage(name)
    configs = {**configs, name: replace(configs[name], place="root")}
    _stage_defaults(space, st, configs)
    configs[name] = replace(configs[name], tile=_balanced_parallel(space, st, configs, configs[name].tile))
    return configs


def plain_config(space) -> dict:
    """The config closest to the naive loop nest: every stage at the root (injective ones inlined), nothing
    vectorized, unrolled, packed or parallel. The rules fall back to it when nothing else schedules.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] + 1.0")
    >>> plain_config(generated_space(op, {"N": 8}, threads=2))["B.parallel"]
    'none'
    """
    return space.knob_config(_plain(space))


def _plain(space) -> Configs:
    """:func:`plain_config` as one StageConfig a stage."""
    configs = {}
    for name, role in space.roles.items():
        sc = role.config({})
        for f in role.fields:
            sc = f.set(sc, _plain_value(f))
        configs[name] = sc
    return configs


def _plain_value(f: KnobField):
    """The value of knob `f` in :func:`plain_config`."""
    values = f.knob.values
    if f.field == "place":
        return "inline" if "inline" in values else "root"
    if f.field == "vec":
        return None
    if f.field in ("reg", "ku"):
        return 1 if 1 in values else values[0]
    if f.field in ("block", "rblock"):
        return values[-1]  # the whole extent
    if f.field == "parallel":
        return "none"
    if f.field == "pack":
        return False
    return values[0]


def _until_it_schedules(space, configs: Configs) -> Configs:
    """`configs` repaired until it schedules.

    Conditions, tried in turn until the config schedules (or, after twice as many rounds as stages, the plain
    config, :func:`plain_config`):
      1. where the space's constraint refuses it, :func:`_repair`;
      2. where a primitive still refuses it (regions that threads would share, say), the first stage computed
         inside another's loops or in a write-back, in program order, computed at the root instead;
      3. where there is none, every stage run serially.
    """
    from ..errors import ScheduleError
    for _ in range(2 * len(space.info.stages) + 2):
        if space.problems(configs):
            configs = _repair(space, configs)
        try:
            space.schedule(space.op, space.sizes, space.knob_config(configs))
            return configs
        except ScheduleError:
            pass
        moved = next((st.name for st in space.info.stages if configs[st.name].place in ("at", "epilogue")), None)
        if moved is not None:
            configs = _to_root(space, configs, moved)
        else:
            configs = {name: replace(sc, tile=replace(sc.tile, parallel="none")) for name, sc in configs.items()}
    return _plain(space)


RELAXED_FIELDS = ("parallel", "vw", "reg", "block", "rblock", "ku", "pack")
"""The knobs :func:`_repair` relaxes last, one at a time, in the space's order."""


def _repair(space, configs: Configs) -> Configs:
    """Relax the rules' choices in a fixed order until the space allows the config.

    Conditions, in order:
      1. each stage computed inside another's loops or in a write-back that a problem concerns: at the root;
      2. each stage's packs of tensors that are not in memory whole: off; where a pack problem of the stage
         remains, all of its packs;
      3. while problems remain, each knob of :data:`RELAXED_FIELDS` (the parallel loop, vector width, register
         tile, blocks, unrolling and packs), stage by stage in the space's order, at the value that leaves the
         fewest problems, where that is fewer.
    """
    for st in space.info.stages:
        if configs[st.name].place in ("at", "epilogue") \
                and any(p.concerns(st.name) for p in space.problems(configs)):
            configs = _to_root(space, configs, st.name)
    if not space.problems(configs):
        return configs
    for st in space.info.stages:
        offered = space.roles[st.name].offered.pack
        sc = configs[st.name]
        off = {t: False for t in offered if not space.has_buffer(configs, t)}
        configs = {**configs, st.name: replace(sc, tile=_with_packs(st, sc.tile, off))}
        if any(p.stage == st.name and p.kind in PACK_KINDS for p in space.problems(configs)):
            sc = configs[st.name]
            configs = {**configs, st.name: replace(sc, tile=_with_packs(st, sc.tile, dict.fromkeys(offered, False)))}
    for st in space.info.stages:
        for f in space.roles[st.name].fields:
            if not space.problems(configs):
                return configs
            if f.field in RELAXED_FIELDS:
                current = len(space.problems(configs))
                for v in f.knob.values:
                    trial = {**configs, st.name: f.set(configs[st.name], v)}
                    if len(space.problems(trial)) < current:
                        configs, current = trial, len(space.problems(trial))
    return configs
