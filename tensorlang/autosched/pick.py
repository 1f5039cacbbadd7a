"""The zero-trial pick: a config of a generated space chosen by rules, with no measurement.

The rules are those an expert applies by hand (and BLIS by construction):

- placements: cheap injective stages inlined; expensive ones (math calls, padded reads) and reductions computed
  inside their reader's loops where a loop holds them without recomputing, else at the root; an injective
  output that can be computed in its producer's write-back is;
- the register tile: the vector width and the unrolled rows that give the most FMAs per load within the
  vector registers (leaving four free), with the least waste in partial tiles; a stencil's rows along its
  window, so that each loaded row serves every output row that needs it;
- blocks: the reduction blocked so that the register tile's panel of the vector side stays in half of L2;
- packing: the reads that move with the vector variable, and those read along a reduction variable, unless
  the copy would change nothing (:func:`panel_in_place`) or each element is read once;
- parallel: the fewest leading loops fused that give every thread the same number of iterations (or at
  least eight each).

A rule that leaves the config unschedulable (the space's ``problems``) is relaxed, in a fixed order, until it is
not; the pick is deterministic.

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

from ..dtypes import DTYPES
from .analysis import StageInfo
from .space import epilogue_producer, packable
from .template import window_taps, y_side


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def tile_efficiency(st: StageInfo, vec: str, w: int, rows: dict, lanes: int, packed: set = frozenset()) -> float:
    """How close to the FMA peak the register tile of `w` elements of `vec` by `rows` ({var: unrolled extent})
    can run, from counting one step of the innermost reduction: FMAs (vectors x rows) against loads (each read
    that moves with `vec` loads one vector per row it depends on, a gather of `lanes` loads unless it is
    contiguous or `packed`; every other read one broadcast per row it depends on), at two FMAs and two loads a
    cycle; times the share of lanes and rows that do work, and at least eight independent accumulators to hide
    the FMA's latency.

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
    eff = E / (-(-E // w) * -(-w // lanes) * lanes)  # lanes that do work, over all lanes of every tile
    for v, r in rows.items():
        eff *= st.extents[v] / _round_up(st.extents[v], r)
    cycles = max(fmas / 2, loads / 2)
    return eff * (fmas / 2) / cycles * min(1.0, fmas / 8)


def tile_counts(st: StageInfo, vec: str, w: int, rows: dict, lanes: int, packed: set = frozenset()) -> tuple:
    """(FMAs, loads) of one step of the innermost reduction in the register tile of `w` elements of `vec` by
    `rows` (see :func:`tile_efficiency`): vector FMAs, and vector loads, broadcasts and gathered lanes.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]"),
    ...              {"M": 1024, "N": 1024, "K": 1024}).stage("C")
    >>> tile_counts(st, "j", 64, {"i": 6}, 16)
    (24, 10.0)
    """
    vecs = -(-w // lanes)
    n_rows = math.prod(rows.values()) if rows else 1
    fmas = vecs * n_rows
    loads = 0.0
    for r in st.reads:
        per = math.prod(n for v, n in rows.items() if v in r.vars)
        stride = abs(r.strides.get(vec, 0))
        if stride == 0:
            loads += per  # a broadcast per row
        elif stride == 1 or (r.tensor in packed and r.plain_dim(vec) is not None):
            loads += per * vecs  # contiguous, or made so by a pack that puts vec's dimension innermost
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
tile that issues about a load per FMA reaches the model's peak only if nothing else takes a load slot
(batch_matmul 12 x 128 x 128 x 64: 6 batches x 2 rows x 2 vectors, 24 FMAs to 24 loads, ran at 0.42x of 4 rows x 4
vectors, 16 to 8, on two Zen 5 cores). Above it the bigger tile wins: ResNet-18's 3x3 convolutions ran 1.5x to 2x
slower at 4 vectors x 7 pixels (28 FMAs to 11 loads) than at 2 x 14 (28 to 16)."""


UNROLLED_OPS = 4096
"""At most this many operations (a stage's arithmetic and reads, once per vector of its register tile and per
unrolled step) in the reduction body the pick unrolls. A fused body of 50 operations and 22 reads (random
programs make them) in a 27-vector tile, its reduction of 7 unrolled whole (13,600 operations), took 6.4 s to
build; the tile kernels of matmul and the convolutions stay far below (a multiply-add is 4)."""


TILE_OPS = 1024
"""At most this many operations (a stage's arithmetic and reads, once per vector) in the register tile the pick
weighs: the multiply-add of matmul and the convolutions (4) leaves the register file the only limit; a random
program's fused body of 72 gets at most 14 vectors (the pick took 9 of them, where it took 27 before: 1.2 s to
build, not 6.4)."""


FREE_REGISTERS = 4
"""Vector registers a register tile leaves free of accumulators (for the loaded vector, the broadcasts and the
addresses): :func:`register_tiles` weighs tiles of at most `registers` - this many."""


def register_tiles(st: StageInfo, vec: str, lanes: int, registers: int, reg_values: dict, vws: tuple,
                   packed: set = frozenset()) -> list[tuple]:
    """Every (vw, {var: rows}, efficiency) register tile of a reduction with reuse that :func:`register_tile`
    weighs (the vector width and up to two unrolled spatial variables within `registers` - 4 accumulators), the
    best first: by :func:`tile_efficiency`, then the FMAs per load up to :data:`ENOUGH_FMAS_PER_LOAD`, then the
    most accumulators, then the narrower vector.

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
        vecs = -(-w // lanes)
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
                fmas, loads = tile_counts(st, vec, w, rows, lanes, packed)
                e = _efficiency(st, vec, w, rows, lanes, fmas, loads)
                # ties: up to ENOUGH_FMAS_PER_LOAD, the most FMAs per load, then the bigger tile (less overhead
                # per FMA), then the narrower vector
                intensity = min(ENOUGH_FMAS_PER_LOAD, round(fmas / max(loads, 1.0), 2))
                scored.append(((round(e, 2), intensity, vecs * n_rows, -vw), (vw, rows, e)))
    scored.sort(key=lambda t: t[0], reverse=True)  # stable: among equals, the first weighed
    return [tile for _, tile in scored]


def register_tile(st: StageInfo, vec: str, lanes: int, registers: int, reg_values: dict, vws: tuple,
                  packed: set = frozenset()) -> tuple:
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
    tiles = register_tiles(st, vec, lanes, registers, reg_values, vws, packed)
    return tiles[0] if tiles else (vws[0], {}, 0.0)


TILE_TRIES = 64
"""The most register tiles the pick weighs, the best first, for one whose working set fits in L2."""

MIN_KC = 128
"""The shortest reduction block the rules give a register tile: shorter, loading and storing the tile's
accumulators costs more than the block's FMAs gain."""


def _reduction_block(space, st: StageInfo, cfg: dict, knob: dict, vec: str, vw: int) -> int:
    """Block the outer reduction variable so that the vector side's packed block (the panels of every register
    tile along it: each X-side block sweeps all of them) stays in half of L2; where that leaves fewer than
    `MIN_KC` reduction steps, block the vector side instead. Sets the knobs in `cfg`; returns the reduction
    steps of a block (matmul 1024: a 4 MB packed B swept from L3 for every block of 8 rows ran 2.3x slower
    than blocks of 128 steps, 512 KB)."""
    n = st.name
    red = math.prod(st.extents[r] for r in st.reduction) or 1
    outer = st.reduction[0] if st.reduction else None
    if outer is None or f"{n}.{outer}.block" not in knob:
        return red
    inner = red // st.extents[outer]
    half = space.l2 // 2
    vb = min(cfg.get(f"{n}.{vec}.block", st.extents[vec]), st.extents[vec])
    values = knob[f"{n}.{outer}.block"].values
    b = max((x for x in values if vb * 4 * inner * x <= half), default=values[0])
    if b * inner < min(MIN_KC, red) and f"{n}.{vec}.block" in knob:
        b = min((x for x in values if x * inner >= MIN_KC), default=st.extents[outer])
        narrower = [x for x in knob[f"{n}.{vec}.block"].values if vw <= x < vb and x * 4 * inner * b <= half]
        if narrower:
            cfg[f"{n}.{vec}.block"] = max(narrower)
    cfg[f"{n}.{outer}.block"] = b
    return b * inner


FEW_X_TILES = 4
"""An X-side block of at most this many register tiles reuses each panel of the vector side's block that few
times, so that block must stay in L2 (see :func:`_reduction_block`)."""


def _x_tiles(st: StageInfo, cfg: dict, ys: set) -> int:
    """The register tiles in one X-side block of `cfg`."""
    n = st.name
    return math.prod(-(-min(cfg.get(f"{n}.{v}.block", st.extents[v]), st.extents[v]) // cfg.get(f"{n}.{v}.reg", 1))
                     for v in st.spatial if v not in ys)


def _x_block(space, st: StageInfo, cfg: dict, knob: dict, rows: dict, ys: set, red: int) -> None:
    """The X side's rows in blocks of register tiles whose panel (rows x `red` reduction steps) fits in 60% of
    L1 (A's mr x kc panel in BLIS), so that the threads can split the blocks."""
    n = st.name
    row = max(rows, key=lambda v: st.extents[v]) if rows else None
    if row is not None and row not in ys and f"{n}.{row}.block" in knob:
        per = max(1, int(0.6 * space.l1) // (rows[row] * min(red, 1024) * 4))
        cfg[f"{n}.{row}.block"] = min((b for b in knob[f"{n}.{row}.block"].values if b >= rows[row] * per),
                                      default=st.extents[row])


def _reuse_tile_defaults(space, st: StageInfo, cfg: dict, knob: dict, vec: str, vw: int, rows: dict,
                         packable_reads: set) -> None:
    """The knobs of a reduction with reuse that follow from its register tile (`vw` elements of `vec` by `rows`):
    blocks, the reduction's blocking, packs and the unrolling of the innermost reduction loop; set in `cfg`."""
    n = st.name
    cfg[f"{n}.vw"] = vw
    for v, r in rows.items():
        cfg[f"{n}.{v}.reg"] = r
    ys = set(y_side(st, vec))
    for v in st.spatial:  # other Y-side variables (a batch): one at a time, so the threads can split them
        if v in ys and v != vec and f"{n}.{v}.block" in knob:
            cfg[f"{n}.{v}.block"] = 1
    _x_block(space, st, cfg, knob, rows, ys, math.prod(st.extents[r] for r in st.reduction) or 1)
    # the reduction blocked so that the vector side's panel of the register tile stays in half of L2
    panel = min(vw, st.extents[vec]) * 4
    for r in st.reduction:
        panel *= st.extents[r]
    outer = st.reduction[0] if st.reduction else None
    if outer and f"{n}.{outer}.block" in knob and panel > space.l2 // 2:
        fits = [b for b in knob[f"{n}.{outer}.block"].values
                if panel // st.extents[outer] * b <= space.l2 // 2]
        cfg[f"{n}.{outer}.block"] = max(fits) if fits else knob[f"{n}.{outer}.block"].values[0]
    if _x_tiles(st, cfg, ys) <= FEW_X_TILES:
        # an X-side block of few register tiles sweeps the vector side's whole packed block for each of them:
        # that block in half of L2, and the X blocks sized again for the shorter reduction block (matmul
        # 1024: 1.6x faster on two threads, conv1d 2.9x; convolutions, whose X blocks hold many tiles, keep
        # theirs)
        kc = _reduction_block(space, st, cfg, knob, vec, vw)
        _x_block(space, st, cfg, knob, rows, ys, kc)
    for t in packable_reads:
        reads = st.reads_of(t)
        # a vector read that is not contiguous (a pack makes it so), a contiguous one (panels stream from
        # L1), or broadcasts along a reduction whose rows lie far apart (A's rows in a matmul)
        moves = any(r.strides.get(vec, 0) for r in reads)
        along_reduction = any(any(abs(r.strides.get(x, 0)) == 1 for x in st.reduction) for r in reads)
        # a copy pays only when the copied panel is read again: a read that every spatial variable moves
        # (the weights of a matrix-vector product) is read once, and read in place where it is contiguous
        once = reuse(st, t) == 1 and all(abs(r.strides.get(vec, 0)) <= 1 for r in reads)
        # a stage inlined or computed inside another's loops has no buffer to copy from (a 1x1 convolution's
        # padding stage with no padding, a plain copy, is inlined)
        # and a vector-side panel that is already contiguous runs in the loops' order is read in place: a copy
        # costs a pass over it on every call and streams no better (NCHW16c convolutions' blocked filters; on
        # ResNet-18's 3x3 convolution at 7 x 7, 512 channels, two threads: 1.43 -> 1.04 ms)
        cfg[f"{n}.pack.{t}"] = bool(moves or along_reduction) and not once and space.has_buffer(cfg, t) \
            and not (moves and panel_in_place(st, t, cfg))
    if f"{n}.ku" in knob:
        inner = st.extents[st.reduction[-1]]
        values = knob[f"{n}.ku"].values
        # a short window's taps all unrolled (the space offers their product up to 16: depthwise 3x3 1.3x
        # faster); else a short loop unrolled whole; else the largest of 4 and 2 that divides it (a tail would
        # put a guard in the hot loop)
        taps = window_taps(st)
        if taps in values:
            cfg[f"{n}.ku"] = taps
        elif inner <= 8 and any(v >= inner for v in values) and _reads_inlined_window(space, st, cfg, vec):
            # a padded image inlined into a stride-1 window: its bounds guards are in the hot loop unless the
            # short window loop is unrolled whole, each tap's guard then folding to a constant offset (conv1d
            # with its padding inlined: 186 -> 217 GFLOPS, conv2d 119 -> 169 on two Zen 4 cores; at stride 2
            # the reads are gathers and unrolling them ran slower: 67 -> 58)
            cfg[f"{n}.ku"] = min(v for v in values if v >= inner)
        else:
            cfg[f"{n}.ku"] = inner if inner in values and inner <= 8 else \
                next((v for v in (4, 2) if v in values and inner % v == 0), 1)
        # a large body is unrolled less: each unrolled step copies it once per vector of the register tile
        step = (st.ops + len(st.reads)) * math.prod(rows.values()) * max(1, -(-vw // space.roles[n].lanes))
        if cfg[f"{n}.ku"] * step > UNROLLED_OPS:
            cfg[f"{n}.ku"] = max((v for v in values if v * step <= UNROLLED_OPS and inner % v == 0), default=1)


def _stage_defaults(space, st: StageInfo, cfg: dict, vw: int | None = None, registers: int | None = None) -> None:
    role = space.roles[st.name]
    registers = space.registers if registers is None else registers
    n, L = st.name, role.lanes
    knob = {k.name: k for k in role.knobs}
    vws = knob[f"{n}.vw"].values
    if st.kind == "reuse" and vw in vws:  # a variant of the pick: the register tile at this vector width
        vws = (vw,)
    vec = role.vecs[0]
    packable_reads = {t for t in dict.fromkeys(r.tensor for r in st.reads) if f"{n}.pack.{t}" in knob}
    if st.kind == "reuse":  # the candidate whose best register tile runs closest to the FMA peak
        reg_values = {v: knob[f"{n}.{v}.reg"].values for v in st.spatial if f"{n}.{v}.reg" in knob}
        scored = []
        for i, v in enumerate(role.vecs):
            if v is None or v not in st.spatial:
                continue
            e = register_tile(st, v, L, registers, reg_values, vws, packable_reads)[2]
            scored.append((round(e, 2), -i, v))
        if scored:
            vec = max(scored)[2]
    elif vec is not None and any(abs(r.strides.get(vec, 0)) > 1 and not packable(st, r.tensor) for r in st.reads):
        # a gather in every vector (a pool's window at stride 2): LLVM's loop vectorizer does better on the plain
        # loop (two loads and a shuffle for a stride of 2); maxpool 56 x 56 x 64 ran 5x slower vectorized by hand
        vec = None
    cfg[f"{n}.vec"] = vec
    for v in st.spatial:
        if f"{n}.{v}.reg" in knob:
            cfg[f"{n}.{v}.reg"] = 1
        if f"{n}.{v}.block" in knob:
            cfg[f"{n}.{v}.block"] = st.extents[v]
    for r in st.reduction:
        if f"{n}.{r}.block" in knob:
            cfg[f"{n}.{r}.block"] = st.extents[r]
    if st.kind == "reuse" and vec in st.spatial:
        reg_values = {v: knob[f"{n}.{v}.reg"].values for v in st.spatial if f"{n}.{v}.reg" in knob}
        tiles = register_tiles(st, vec, L, registers, reg_values, vws, packable_reads) or [(vws[0], {}, 0.0)]
        # the best tile whose working set fits in L2 (the space rules the others out; relaxing the best one
        # afterwards, knob by knob, dropped ResNet-18's 7 x 7 convolution from 4 output blocks x 7 rows to 1 x 7,
        # 7 accumulators, where 2 x 7 ran 1.4x faster on two Zen 5 cores)
        for tile in tiles[:TILE_TRIES] + tiles[:1]:  # none fits: the best, for the repair to relax
            trial = dict(cfg)
            _reuse_tile_defaults(space, st, trial, knob, vec, tile[0], tile[1], packable_reads)
            if not any(p.startswith(f"{n}: ") and ("working set" in p or "accumulators" in p)
                       for p in space.problems(trial)):
                break
        cfg.update(trial)
    elif vec in st.reduction:
        cfg[f"{n}.vw"] = vws[-1]  # several vector accumulators hide the add's latency
    elif cfg.get(f"{n}.place") == "at":
        # inside a reader's loops it covers the reader's tile, which may be narrower than two vectors (a vector
        # wider than the region it computes is mostly masked: 13x slower on `elementwise`'s T1 at 64)
        cfg[f"{n}.vw"] = vws[0]
    else:
        cfg[f"{n}.vw"] = vws[min(1, len(vws) - 1)]
    if st.kind != "reuse":  # a transposing copy is the search's to try (it needs blocks to copy)
        for t in packable_reads:
            cfg[f"{n}.pack.{t}"] = False
    if st.kind == "injective" and vec is not None:
        _transpose_tiles(space, st, cfg, knob, L)
        _stencil_rows(space, st, cfg, knob, L)


STENCIL_ROWS = 8
"""The most rows of a stencil's register tile (:func:`_stencil_rows`): each row's window rows stay in registers."""


def window_vars(space, cfg: dict, st: StageInfo) -> dict:
    """{variable of `st`: taps} for the variables along which `st` reads some tensor at several offsets (a
    window: `X[y, x] + X[y + 1, x]` reads along `y` with 2 taps), directly or through the stages `cfg` inlines
    into it, whose windows are then `st`'s (a separable blur's vertical pass, inlined into the horizontal one).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> src = ("def blur(X: f32[H, W]) -> B:\\n    T[y, x] = X[y, x] + X[y + 1, x] + X[y + 2, x]\\n"
    ...        "    B[y, x] = T[y, x] + T[y, x + 1]")
    >>> sp = generated_space(tl.op(src), {"H": 64, "W": 64}, threads=1)
    >>> B = sp.info.stage("B")
    >>> window_vars(sp, {"T.place": "inline"}, B), window_vars(sp, {"T.place": "root"}, B)
    ({'x': 2, 'y': 3}, {'x': 2})
    """
    taps: dict = {}
    offsets: dict = {}
    for r in st.reads:
        for terms, const in r.dims:
            if len(terms) == 1 and terms[0][1] == 1:
                offsets.setdefault((r.tensor, terms[0][0]), set()).add(const)
        if r.tensor in space.roles and space.placement(cfg, r.tensor) == "inline":
            producer = space.info.stage(r.tensor)
            # the producer's variables as this stage's: a plain index `T[y, x + 1]` maps T's d-th variable to y
            names = {producer.spatial[d]: terms[0][0] for d, (terms, _) in enumerate(r.dims)
                     if d < len(producer.spatial) and len(terms) == 1 and terms[0][1] == 1}
            for v, n in window_vars(space, cfg, producer).items():
                if v in names:
                    taps[names[v]] = max(taps.get(names[v], 1), n)
    for (_, v), consts in offsets.items():
        if len(consts) > 1:
            taps[v] = max(taps.get(v, 1), max(consts) - min(consts) + 1)
    return dict(sorted(taps.items()))


def _stencil_rows(space, st: StageInfo, cfg: dict, knob: dict, lanes: int) -> None:
    """A stencil (an injective stage that reads a window along a variable other than its vector one, itself or
    through a stage it inlines) gets a register tile of rows along that variable, up to :data:`STENCIL_ROWS`
    within the vector registers, so that each row it loads serves every output row whose window covers it (LLVM
    keeps the loads of the unrolled rows in registers): a 3-tap window then loads each row about once instead of
    three times. On a separable 3x3 blur of 2048 x 2048 (the vertical pass inlined) on two Zen 5 cores, 8 rows
    ran 2.2x faster than one (1.57 -> 0.71 ms); computing the vertical pass at the tile instead of inlining it
    came within the spread of that (0.89 ms at 11 rows), and the search may take it."""
    n, vec = st.name, cfg[f"{st.name}.vec"]
    vecs = -(-min(cfg[f"{n}.vw"], st.extents[vec]) // lanes)
    for v, taps in sorted(window_vars(space, cfg, st).items(), key=lambda t: (-t[1], t[0])):
        name = f"{n}.{v}.reg"
        if v == vec or name not in knob or st.extents[v] < 2 * taps:
            continue
        fits = [r for r in knob[name].values
                if 1 < r <= STENCIL_ROWS and (r + taps - 1) * vecs <= space.registers - FREE_REGISTERS]
        if fits:
            cfg[name] = max(fits)
            return


def panel_in_place(st: StageInfo, tensor: str, cfg: dict) -> bool:
    """Whether each read of `tensor` by `st` that moves with the vector variable of `cfg` reads its panel as
    contiguous runs of memory in the order of the loops, one run per value of the other spatial variables (a
    register tile of several output-channel blocks reads one run each): the vector variable at stride 1
    innermost, one register tile wide, and each reduction variable outside it at the stride of the elements
    inside, in the reduction's order, over its whole block. The hardware prefetcher streams such runs as well as
    it streams a packed copy, which would cost a pass over the panel on every call (NCHW16c filters).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> src = "def c(I: f32[4, 8], W: f32[2, 4, 16]) -> O:\\n    O[o, x, v] += I[c, x] * W[o, c, v]"
    >>> st = analyze(tl.op(src), {}).stage("O")
    >>> cfg = {"O.vec": "v", "O.vw": 16, "O.o.reg": 2, "O.v.block": 16, "O.red_order": "c"}
    >>> panel_in_place(st, "W", cfg), panel_in_place(st, "W", {**cfg, "O.v.block": 8, "O.vw": 8})
    (True, False)
    """
    n, vec = st.name, cfg.get(f"{st.name}.vec")
    order = [x for x in cfg.get(f"{n}.red_order", "").split(",") if x] or list(st.reduction)

    def block(v: str) -> int:
        return min(cfg.get(f"{n}.{v}.block", st.extents[v]), st.extents[v])

    reads = [r for r in st.reads_of(tensor) if r.strides.get(vec or "", 0)]
    if not reads or block(vec) > cfg.get(f"{n}.vw", 1) * cfg.get(f"{n}.{vec}.reg", 1):
        return False  # several register tiles along the vector in a block: the copy puts each one's panel apart
    for r in reads:
        if any(len(terms) != 1 or terms[0][1] != 1 for terms, _ in r.dims):
            return False  # a window or a scaled index: not the plain layout a copy makes
        run = 1
        for v in [vec] + sorted((x for x in r.strides if x in st.reduction and block(x) > 1), key=order.index,
                                reverse=True):
            if r.strides[v] != run:
                return False
            run *= block(v)
    return True


def _transpose_tiles(space, st: StageInfo, cfg: dict, knob: dict, lanes: int) -> None:
    """A stage that writes along one variable and reads along another, touching more cache lines in a run of the
    written one than L1 keeps (a transpose): both in blocks of one vector (`lanes` elements, or the largest block
    below), and no vector of gathers, so that each line is read and written whole while it is in L1. Vectors of
    gathers along 1,024 elements of a transpose touch 1,024 lines before coming back to the next element of each,
    all 4 KB apart (one L1 set of 12 ways): blocks run 10x faster. A short run (NCHW to NCHW16c: 16 channels), or
    one whose lines fit in half of L1 and fall in different sets (NCHW16c to NCHW: 112 lines 64 bytes apart),
    keeps its vectors, 1.7x to 2x faster there than blocks. Where the space offers to pack the read, its blocks are
    copied transposed (a transpose in registers) and the stage keeps one vector along the written variable: on a
    1024 x 1024 transpose on Zen 4, 8x faster than the blocks of scalars on one thread and 2x on two."""
    n, vec = st.name, cfg[f"{st.name}.vec"]
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
        for v in (vec, along):
            name = f"{n}.{v}.block"
            if name in knob:
                cfg[name] = max((b for b in knob[name].values if b <= lanes), default=knob[name].values[0])
        if f"{n}.pack.{r.tensor}" in knob:
            cfg[f"{n}.pack.{r.tensor}"] = True
            cfg[f"{n}.vw"] = knob[f"{n}.vw"].values[0]
        else:
            cfg[f"{n}.vec"] = None
        return


PARALLEL_WORK = 1 << 16
"""Operations (points x operations each) below which a stage runs on one thread: a parallel loop costs a few
microseconds, which is more than such a stage takes."""


def _balanced_parallel(space, st: StageInfo, cfg: dict) -> str:
    """The parallel knob for stage `st` (and, where no loop of `cfg` splits evenly between the threads, a block
    of some spatial variable, largest first, changed in `cfg` so that one does): every thread the same number of
    iterations, or at least eight each."""
    choices, balanced = _parallel_choices(space, st, cfg, with_balance=True)
    # balanced, or too little work for threads (also "balanced"); with no parallel loop at all (every block the
    # whole extent, or a reduction block outermost), a block of a spatial variable makes one
    if balanced or space.threads == 1:
        return choices[0]
    knob = {k.name: k for k in space.roles[st.name].knobs}
    # blocks that divide the extent first (112 in blocks of 96 gives one thread 96 rows and the other 16)
    for exact in (True, False):
        for v in sorted(st.spatial, key=lambda v: -st.extents[v]):
            name = f"{st.name}.{v}.block"
            if name not in knob:
                continue
            E = st.extents[v]
            for B in sorted(knob[name].values, reverse=True):
                n = -(-E // B)
                if B >= E or (n % space.threads and n < 8 * space.threads) or (exact and E % B):
                    continue
                trial = {**cfg, name: B}
                got, ok = _parallel_choices(space, st, trial, with_balance=True)
                if ok:
                    cfg[name] = B
                    return got[0]
    return choices[0]


def _parallel_choices(space, st: StageInfo, cfg: dict, with_balance: bool = False):
    role = space.roles[st.name]
    anchors = space.anchors(cfg)  # the stages computed in this one's loops add their work to its own
    work = sum(s.points * max(1, s.ops) for s in space.info.stages if anchors.get(s.name) == st.name)
    if max(work, st.points * max(1, st.ops)) < PARALLEL_WORK:
        return (["none"], True) if with_balance else ["none"]
    values = next(k.values for k in role.knobs if k.name == f"{st.name}.parallel")
    from .template import chunks, plan_loops
    good, ok = [], []
    for p in values:
        if p == "none":
            continue
        plan = plan_loops(st, role.tile_config({**cfg, f"{st.name}.parallel": p}), role.lanes)
        if plan.problems:
            continue
        c = chunks(plan)
        if c < space.threads:
            continue
        (good if c % space.threads == 0 or c >= 8 * space.threads else ok).append(p)
    if with_balance:
        return good + ok + ["none"], bool(good)
    return good + ok + ["none"]


def rule_config(space, vw: int | None = None, place: dict | None = None, registers: int | None = None) -> dict:
    """The rules' config of a :class:`~tensorlang.autosched.space.GeneratedSpace` (see the module's docstring):
    deterministic, allowed by the space's constraint, and one that schedules. With `vw`, the register tiles of
    the reductions with reuse are the best the rules find at that vector width; `place` overrides the rules'
    placement of the stages it names (stage -> "root", "at", ...; see :func:`rule_variants`).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> sp = generated_space(tl.op("def f(A: f32[N, M]) -> B:\\n    B[i, j] = exp(A[i, j])"), {"N": 512, "M": 512}, 2)
    >>> cfg = rule_config(sp)
    >>> cfg["B.vec"], cfg["B.parallel"], sp.allowed(cfg)
    ('j', 'outer1', True)
    """
    cfg = {k.name: k.values[0] for k in space.knobs}
    info = space.info
    producers = {epilogue_producer(info, st) for st in info.stages
                 if "epilogue" in space.roles[st.name].placements}
    for st in info.stages:
        role = space.roles[st.name]
        if f"{st.name}.place" in cfg:
            if place and st.name in place:
                cfg[f"{st.name}.place"] = place[st.name]
            elif "epilogue" in role.placements:
                cfg[f"{st.name}.place"] = "epilogue"
            elif st.name in producers:
                cfg[f"{st.name}.place"] = "root"  # its reader is computed in its write-back
            elif st.kind == "injective" and not st.expensive:
                cfg[f"{st.name}.place"] = "inline"
            elif st.kind == "injective" and windowed(info, st.name):
                cfg[f"{st.name}.place"] = "root"  # a padded image: computed inside, its halo would be recomputed
            elif st.kind == "reuse":
                # a matmul or convolution read by a stage that is no epilogue of it (a permuted write, say): at
                # the root it gets its own register tile; computed at a reader's loop it gets the reader's
                cfg[f"{st.name}.place"] = "root"
            else:
                cfg[f"{st.name}.place"] = "at"
        if f"{st.name}.vec" in cfg:
            _stage_defaults(space, st, cfg, vw, registers)
    for st in info.stages:
        if f"{st.name}.parallel" in cfg:
            cfg[f"{st.name}.parallel"] = _balanced_parallel(space, st, cfg)
    return _until_it_schedules(space, cfg)


def rule_variants(space) -> list[dict]:
    """The configs a tuner measures before its strategy proposes, one per loop structure the rules' model cannot
    rank by itself, so that search starts in every basin, as Ansor's sketches each seed its population: the rules'
    pick first; the pick at each other vector width of the register tiles of the reductions with reuse (a
    matmul's, a convolution's); the pick with each stage it computes inside another's loops or inlines computed at
    the root instead, and each it computes at the root inlined (at most :data:`PLACEMENT_VARIANTS` of those); each
    of these with its X side held in L2 (:func:`x_side_in_l2`); then the moved placements at the other vector
    widths, and those with the X side in L2; then the pick and its other widths with the X side read in place
    (:func:`x_side_in_place`), then with every read in place (:func:`every_read_in_place`), then with each
    data-moving stage vectorized along its read (:func:`read_side_vectorized`); last, where there is room, the
    register tiles within half the register file, as picked, with the X side and with every read in place; at most
    :data:`MAX_STARTS` in all (one round of the tuner).

    The model counts FMAs against loads; it does not see register allocation or the cost of packing a wide vector
    block: on ResNet-18's 3x3 stride-2 convolution at 14x14 -> 7x7 its pick, 4 vectors x 7 pixels, ran at 55
    GFLOPS, the one-vector tile at 85, and 200 trials of search from the pick alone never left its basin. Nor does
    it see what one loop of tanh and exp costs against two: `elementwise` with its tanh stage at the root ran 1.2x
    faster than inlined or inside the reader's tiles, a config 17 of 200 trials visited, never with good tiles.
    And the basins combine: conv1d's best (the padded input inlined, one-vector tiles, the filters whole in L2)
    is three moves from the pick, each slower alone than the pick's basin tuned (2 Zen 4 cores: 221 GFLOPS
    against 205); search from the single moves never found it. Deterministic, distinct, each allowed and one
    that schedules.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
    >>> vs = rule_variants(generated_space(op, {"M": 256, "N": 256, "K": 256}, threads=2))
    >>> vs[0] == rule_config(generated_space(op, {"M": 256, "N": 256, "K": 256}, threads=2)), 1 < len(vs) <= MAX_STARTS
    (True, True)
    """
    from ..space import config_key
    pick = rule_config(space)
    widths: list[int] = []
    for st in space.info.stages:
        if st.kind == "reuse" and f"{st.name}.vw" in pick and pick.get(f"{st.name}.vec") in st.spatial:
            widths += [w for w in space.knob(f"{st.name}.vw").values if w not in widths]
    moved = [(st.name, "root") for st in space.info.stages if pick.get(f"{st.name}.place") in ("at", "inline")
             and "root" in space.roles[st.name].placements]
    # and the other way: a stage the pick keeps at the root, inlined (depthwise 3x3's padded image: inlined, its
    # guards fold per unrolled tap, 1.4x faster than the copy)
    moved += [(st.name, "inline") for st in space.info.stages if pick.get(f"{st.name}.place") == "root"
              and "inline" in space.roles[st.name].placements]
    places = [{name: where} for name, where in moved[:PLACEMENT_VARIANTS]]
    first = [pick] + [rule_config(space, w) for w in widths] + [rule_config(space, place=p) for p in places]
    crossed = [rule_config(space, w, place=p) for p in places for w in widths]
    candidates = first + [x_side_in_l2(space, c) for c in first] + crossed + [x_side_in_l2(space, c) for c in crossed]
    candidates += [x_side_in_place(space, c) for c in first]
    candidates += [every_read_in_place(space, c) for c in first]
    candidates += [read_side_vectorized(space, c) for c in first]
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
        # against loads and rate 28 accumulators above 16 where both load about once per 1.5 FMAs, but on two
        # Ice Lake cores the default conv2d ran 1.3x faster at 8 pixels x 2 vectors with the padded image read in
        # place than at its pick's 14 x 2 with it packed, a config 200 trials from the other starts never found
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
    pick sizes the X side's blocks for L1 instead, as a matmul 1024 needs (its activations are 4 MB): on dense +
    bias + ReLU at 128 x 3072 x 768 (activations 384 KB) this config ran 202 GFLOPS on two Zen 4 cores against the
    pick's 171, and 200 trials of search from the pick never unblocked the rows. Unchanged where nothing fits.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
    >>> sp = generated_space(op, {"M": 64, "N": 3072, "K": 512}, threads=2)  # A: 128 KB, in half of any L2 here
    >>> v = x_side_in_l2(sp, sp.default())
    >>> v["C.i.block"], v["C.k.block"], v["C.pack.A"]
    (64, 512, False)
    """
    out = dict(cfg)
    for st, vec, ys, x_reads in _x_sides(space, out):
        n = st.name
        held = sum(math.prod(r.shape) * DTYPES[space.info.bound.dtypes[r.tensor]].itemsize for r in x_reads)
        if not x_reads or held > space.l2 // 2:
            continue
        knob = {k.name: k for k in space.roles[n].knobs}
        for v in [v for v in st.spatial if v not in ys] + list(st.reduction):
            if f"{n}.{v}.block" in knob:
                out[f"{n}.{v}.block"] = st.extents[v]
        if f"{n}.{vec}.block" in knob:
            values = knob[f"{n}.{vec}.block"].values
            out[f"{n}.{vec}.block"] = min((b for b in values if b >= out[f"{n}.vw"]), default=values[-1])
        for r in x_reads:
            if f"{n}.pack.{r.tensor}" in knob:
                out[f"{n}.pack.{r.tensor}"] = False
        if f"{n}.parallel" in out:
            out[f"{n}.parallel"] = _balanced_parallel(space, st, out)
    return out


def x_side_in_place(space, cfg: dict) -> dict:
    """`cfg` with the X-side reads of each reduction with reuse at the root read in place rather than packed (see
    :func:`x_side_in_l2`), where they are broadcasts (they do not move with the vector variable): the pick packs
    them when their rows lie far apart, but a block of the image that the X-side blocks keep in L2 reads as fast
    in place, without the copy. On ResNet-18's 3x3 stride-2 convolution 56 -> 28, one thread, the pick's basin
    tuned reached 102.7 GFLOPS, the basin read in place 108.7 (its image, 861 KB, is too big for
    :func:`x_side_in_l2`). Unchanged where nothing is packed.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
    >>> sp = generated_space(op, {"M": 1024, "N": 1024, "K": 1024}, threads=2)
    >>> v = x_side_in_place(sp, {**sp.default(), "C.vec": "j", "C.pack.A": True, "C.pack.B": True})
    >>> v["C.pack.A"], v["C.pack.B"]
    (False, True)
    """
    out = dict(cfg)
    for st, _, _, x_reads in _x_sides(space, out):
        for r in x_reads:
            if out.get(f"{st.name}.pack.{r.tensor}"):
                out[f"{st.name}.pack.{r.tensor}"] = False
    return out


def every_read_in_place(space, cfg: dict) -> dict:
    """`cfg` with no read of a reduction with reuse at the root packed: where a whole batch's operands sit in L2
    (batch_matmul's 128 x 64 and 64 x 128 slabs, 32 KB each), the copies cost a pass over them on every call and
    stream no better. On batch_matmul 12 x 128 x 128 x 64, two Zen 5 cores, the pick (both reads packed) ran at 377
    GFLOPS, its tile of 6 rows x 4 vectors with nothing packed at 429, the hand-written space's best at 425; 200
    trials of search from the other start configs, which pack the vector side, never turned both packs off.
    Unchanged where nothing is packed.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]")
    >>> sp = generated_space(op, {"M": 1024, "N": 1024, "K": 1024}, threads=2)
    >>> v = every_read_in_place(sp, {**sp.default(), "C.vec": "j", "C.pack.A": True, "C.pack.B": True})
    >>> v["C.pack.A"], v["C.pack.B"]
    (False, False)
    """
    out = dict(cfg)
    for st in space.info.stages:
        if st.kind == "reuse" and space.placement(out, st.name) == "root":
            _packs_off(space, out, st.name)
    return out


def _packs_off(space, cfg: dict, stage: str) -> None:
    """Switch off, in place, every pack of `stage` that `cfg` turns on."""
    for k in space.roles[stage].knobs:
        if ".pack." in k.name and cfg.get(k.name):
            cfg[k.name] = False


def read_side_vectorized(space, cfg: dict) -> dict:
    """`cfg` with each stage at the root that moves data without a reduction (a transpose, a permuted copy)
    vectorized along the variable its read is contiguous in where the config vectorizes another (its output's),
    and that stage's packs off: the loads stream and the stores scatter, where the pick's stream the stores from a
    transposed copy of the read. On a transpose 1024 x 1024 (two Zen 4 cores) both run at about 4.8 elements a
    nanosecond, the hand-written space's best is of the read side's kind, and 200 trials of search from the pick
    never left the pick's basin (0.85x the hand-written space side by side, in one run). Only a read that the
    vector variable moves by more than one element counts (not a row's statistic or a bias); unchanged where no
    read is contiguous in another spatial variable.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def t(X: f32[M, N]) -> Y:\\n    Y[j, i] = X[i, j]")
    >>> sp = generated_space(op, {"M": 256, "N": 256}, threads=2)
    >>> v = read_side_vectorized(sp, sp.default())
    >>> sp.default()["Y.vec"], v["Y.vec"], v["Y.pack.X"], sp.allowed(v)
    ('i', 'j', False, True)
    """
    out = dict(cfg)
    for st in space.info.stages:
        key = f"{st.name}.vec"
        if st.reduction or key not in out or space.placement(out, st.name) != "root":
            continue
        values = space.knob(key).values
        for r in st.reads:
            if abs(r.strides.get(out[key], 1)) == 1:
                continue  # read along the vector already, or not moved by it (a row's statistic, a bias)
            v = next((v for v, stride in r.strides.items() if abs(stride) == 1 and v in st.spatial), None)
            if v is not None and v in values:
                out[key] = v
                _packs_off(space, out, st.name)
                break
    return out


def _x_sides(space, cfg: dict):
    """(stage, vector variable, Y-side variables, X-side reads) of each reduction with reuse at the root whose
    vector variable is spatial under `cfg`: the X-side reads are those that do not move with any Y-side variable."""
    for st in space.info.stages:
        vec = cfg.get(f"{st.name}.vec")
        if st.kind != "reuse" or space.placement(cfg, st.name) != "root" or vec not in st.spatial:
            continue
        ys = set(y_side(st, vec))
        yield st, vec, ys, [r for r in st.reads if not set(r.vars) & ys]


def _reads_inlined_window(space, st: StageInfo, cfg: dict, vec: str) -> bool:
    """Whether `st` reads, contiguously along `vec`, a stage that `cfg` inlines and that is read through a window
    (a padded image: its bounds guards are then in `st`'s loops)."""
    return any(r.tensor in space.roles and space.placement(cfg, r.tensor) == "inline"
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


def _to_root(space, cfg: dict, name: str) -> dict:
    """`cfg` with stage `name` computed at the root (with the rules' template) instead of where it was."""
    st = space.info.stage(name)
    cfg = {**cfg, f"{name}.place": "root"}
    if f"{name}.vec" in cfg:
        _stage_defaults(space, st, cfg)
        if f"{name}.parallel" in cfg:
            cfg[f"{name}.parallel"] = _balanced_parallel(space, st, cfg)
    return cfg


def plain_config(space) -> dict:
    """The config closest to the naive loop nest: every stage at the root (injective ones inlined), nothing
    vectorized, unrolled, packed or parallel. The rules fall back to it when nothing else schedules.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.space import generated_space
    >>> op = tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] + 1.0")
    >>> plain_config(generated_space(op, {"N": 8}, threads=2))["B.parallel"]
    'none'
    """
    cfg = {}
    for k in space.knobs:
        if k.name.endswith(".place"):
            cfg[k.name] = "inline" if "inline" in k.values else "root"
        elif k.name.endswith(".vec"):
            cfg[k.name] = None
        elif k.name.endswith((".reg", ".ku")):
            cfg[k.name] = 1 if 1 in k.values else k.values[0]
        elif k.name.endswith(".block"):
            cfg[k.name] = k.values[-1]  # the whole extent
        elif k.name.endswith(".parallel"):
            cfg[k.name] = "none"
        elif ".pack." in k.name:
            cfg[k.name] = False
        else:
            cfg[k.name] = k.values[0]
    return cfg


def _until_it_schedules(space, cfg: dict) -> dict:
    """Apply `cfg` to a schedule; where the space's constraint or a primitive refuses it (regions that threads
    would share, say), move the stages computed inside others back to the root, one at a time in program order,
    then run serially; last, the plain config."""
    from ..errors import ScheduleError
    for _ in range(2 * len(space.info.stages) + 2):
        if space.problems(cfg):
            cfg = _repair(space, cfg)
        try:
            space.schedule(space.op, space.sizes, cfg)
            return cfg
        except ScheduleError:
            pass
        moved = False
        for st in space.info.stages:
            if cfg.get(f"{st.name}.place") in ("at", "epilogue"):
                cfg = _to_root(space, cfg, st.name)
                moved = True
                break
        if not moved:
            cfg = {**cfg, **{k.name: "none" for k in space.knobs if k.name.endswith(".parallel")}}
    return plain_config(space)


def _repair(space, cfg: dict) -> dict:
    """Relax the rules' choices in a fixed order until the space allows the config: placements back to the
    root, then each stage's parallel loop, vector width and register tile, then packs off."""
    for st in space.info.stages:
        key = f"{st.name}.place"
        if key in cfg and cfg[key] in ("at", "epilogue") and any(p.startswith(st.name) or f" {st.name}" in p
                                                                  for p in space.problems(cfg)):
            cfg = _to_root(space, cfg, st.name)
    if not space.problems(cfg):
        return cfg
    for st in space.info.stages:  # packs of what is not in memory whole: off; where packs still have nowhere to
        # go, all of the stage's
        prefix = f"{st.name}.pack."
        packs = [k.name for k in space.roles[st.name].knobs if k.name.startswith(prefix)]
        cfg = {**cfg, **{k: False for k in packs if not space.has_buffer(cfg, k[len(prefix):])}}
        if any(p.startswith(f"{st.name}:") and "pack" in p for p in space.problems(cfg)):
            cfg = {**cfg, **{k: False for k in packs}}
    for st in space.info.stages:
        for k in space.roles[st.name].knobs:
            if not space.problems(cfg):
                return cfg
            if k.name.endswith((".parallel", ".vw", ".reg", ".block", ".ku")) or ".pack." in k.name:
                current = len(space.problems(cfg))
                for v in k.values:
                    trial = {**cfg, k.name: v}
                    if len(space.problems(trial)) < current:
                        cfg, current = trial, len(space.problems(trial))
    return cfg
