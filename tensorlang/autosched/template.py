"""The loop template of a stage computed at the root, and how one config of its knobs becomes primitives.

The template is Ansor's multi-level tiling for CPUs ("SSRSRS") in the form BLIS gives a matmul. The *vector
variable* V is the spatial variable vectorized innermost (or, for a plain reduction, its contiguous reduction
variable). The spatial variables that the reads moving with V depend on are the *Y side* (B's columns in a
matmul, the filters in a convolution); the others are the *X side* (A's rows, the image's rows and columns).
Every spatial variable is split in up to three levels: blocks (level 0), register tiles within a block (level
1) and the register tile itself (level 2: unrolled, V vectorized); every reduction variable in blocks and the
rest, the innermost reduction loop unrolled by ``ku``::

    for Y-side blocks:                    # the threads split the leading loops (fused)
      for reduction blocks:               # pack the Y-side reads here (B's kc x nc panel)
        for X-side blocks:                # pack the X-side reads here (A's mc x kc panel)
          for tiles (Y then X, or X then Y):   # cache_write: the register tile is accumulated here
            for reductions (the innermost unrolled by ku):
              for the register tile, unrolled:
                for V, vectorized:

A loop of extent 1 is never made: a variable whose block is all of it has no block loop, one whose register
tile is 1 no register loop.

>>> import tensorlang as tl
>>> from tensorlang.autosched.analysis import analyze
>>> info = analyze(tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]"),
...                {"M": 64, "N": 64, "K": 64})
>>> plan = plan_loops(info.stage("C"), TileConfig(vec="j", vw=32, reg={"i": 4}, block={"i": 16, "j": 64},
...                   rblock={"k": 32}, red_order=("k",), ku=4, tile_order="y_first", parallel="inner1",
...                   pack=("A", "B")), lanes=16)
>>> plan.order
['k_b', 'i_b', 'j_t', 'i_t', 'k_o', 'k_u', 'i_r', 'j_r']
>>> plan.parallel_loops, plan.cache_write, [(t, a) for t, a, _ in plan.packs]
(['i_b'], 'i_t', [('A', 'i_b'), ('B', 'k_b')])
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from .analysis import StageInfo
from .problems import Problem, ProblemKind


def window_taps(st: StageInfo) -> int | None:
    """The product of the stage's reduction extents where there are several, it exceeds the longest and it is at
    most 16 (a 3x3 window's 9 taps), else None: ``ku`` may then unroll every reduction loop, so that each tap's
    offsets and guards fold into constants.

    >>> from types import SimpleNamespace as NS
    >>> window_taps(NS(reduction=("r", "s"), extents={"r": 3, "s": 3})), window_taps(NS(reduction=("c", "r", "s"),
    ...     extents={"c": 64, "r": 3, "s": 3}))
    (9, None)
    """
    taps = math.prod(st.extents[r] for r in st.reduction)
    return taps if len(st.reduction) > 1 and max(st.extents[r] for r in st.reduction) < taps <= 16 else None


@dataclass(frozen=True)
class TileConfig:
    """The knob values of one root stage's template.

    ``vec``: the vectorized variable (None: none); ``vw``: its register tile in elements; ``reg``: the register
    tile of other spatial variables (unrolled); ``block``: the level-0 block of each spatial variable in
    elements (rounded up to whole register tiles); ``rblock``: the block of each reduction variable;
    ``red_order``: the reduction variables, outermost first; ``ku``: how far the innermost reduction loop is
    unrolled (at least the product of every reduction extent: all of them); ``tile_order``: "y_first" or
    "x_first" (the level-1 loops); ``parallel``: "none", "outerK" (the first K leading spatial loops, fused) or
    "innerK" (the first K X-side block loops after the reduction blocks); ``pack``: the tensors copied into a
    blocked layout (cache_read); ``rfactor``: the stage is scheduled by the rfactor rule instead
    (:mod:`tensorlang.autosched.rfactor`), the other fields unused.
    """

    vec: str | None = None
    vw: int = 1
    reg: dict = field(default_factory=dict)
    block: dict = field(default_factory=dict)
    rblock: dict = field(default_factory=dict)
    red_order: tuple = ()
    ku: int = 1
    tile_order: str = "y_first"
    parallel: str = "none"
    pack: tuple = ()
    cache_write: bool = True
    rfactor: bool = False


@dataclass
class LoopPlan:
    """The primitives a TileConfig turns into, before any is applied.

    ``splits``: (loop, factor, outer, inner) in order; ``order``: every loop, outermost first; ``levels``: loop
    -> (variable, level) with level one of "block", "rblock", "tile", "red", "unroll", "reg", "vec";
    ``parallel_loops``: the leading loops fused into the parallel loop (empty: none); ``unroll``: loops to
    unroll; ``vectorize``: the vectorized loop; ``cache_write``: the loop of the register tile, or None;
    ``packs``: (tensor, loop, layout) copies; ``problems``: why the plan cannot be scheduled (:class:`Problem`).
    """

    stage: str
    splits: list = field(default_factory=list)
    order: list = field(default_factory=list)
    levels: dict = field(default_factory=dict)
    extents: dict = field(default_factory=dict)
    parallel_loops: list = field(default_factory=list)
    unroll: list = field(default_factory=list)
    vectorize: str | None = None
    cache_write: str | None = None
    packs: list = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    def fused_name(self) -> str | None:
        """The name of the parallel loop once its loops are fused (None: no parallel loop)."""
        if not self.parallel_loops:
            return None
        return "_".join(self.parallel_loops) if len(self.parallel_loops) > 1 else self.parallel_loops[0]

    def final(self, loop: str) -> str:
        """What `loop` is called once the parallel loops are fused."""
        fused = self.fused_name()
        return fused if fused is not None and loop in self.parallel_loops else loop

    def final_order(self) -> list[str]:
        """The loops outermost first once the parallel loops are fused."""
        out: list[str] = []
        for lp in self.order:
            name = self.final(lp)
            if not out or out[-1] != name:
                out.append(name)
        return out


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def register_extent(st: StageInfo, cfg: TileConfig, v: str) -> int:
    """The register tile's extent along spatial variable `v` of `st` under `cfg`: the vector width for the vector
    variable, the ``reg`` knob for another, 1 for every one when the vector variable is a reduction's; never
    more than the extent.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def f(A: f32[N, M]) -> B:\\n    B[i, j] = A[i, j] * 2.0"), {"N": 6, "M": 64}).stage("B")
    >>> cfg = TileConfig(vec="j", vw=16, reg={"i": 8})
    >>> register_extent(st, cfg, "i"), register_extent(st, cfg, "j")
    (6, 16)
    """
    if cfg.vec in st.reduction:
        return 1
    return max(min(cfg.vw if v == cfg.vec else cfg.reg.get(v, 1), st.extents[v]), 1)


def block_extent(st: StageInfo, cfg: TileConfig, v: str) -> int:
    """The extent of the block loop's body along spatial variable `v` under `cfg`: the ``block`` knob rounded up
    to whole register tiles, or the whole extent where that leaves no block loop. Block knob values with the same
    block extent give the same loop nest.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def f(A: f32[N, M]) -> B:\\n    B[i, j] = A[i, j] * 2.0"), {"N": 64, "M": 64}).stage("B")
    >>> [block_extent(st, TileConfig(vec="j", vw=16, reg={"i": 4}, block={"i": b}), "i") for b in (1, 4, 6, 62, 64)]
    [4, 4, 8, 64, 64]
    """
    E = st.extents[v]
    return rounded_block(E, register_extent(st, cfg, v), cfg.block.get(v, E))


def rounded_block(extent: int, tile: int, block: int) -> int:
    """A block knob's value `block` rounded up to whole register tiles of `tile` along a loop of `extent`, or the
    whole `extent` where that leaves no block loop (the arithmetic of :func:`block_extent`).

    >>> [rounded_block(64, 4, b) for b in (1, 4, 6, 62, 64)]
    [4, 4, 8, 64, 64]
    """
    B = min(_round_up(max(block, 1), tile), _round_up(extent, tile))
    return B if B < extent else extent


def y_side(st: StageInfo, vec: str | None) -> list[str]:
    """The spatial variables that the reads moving with `vec` depend on (all of them when there is no `vec`);
    the others are the X side.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> src = "def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]"
    >>> y_side(analyze(tl.op(src), {"M": 4, "N": 4, "K": 4}).stage("C"), "j")
    ['j']
    """
    if vec is None:
        return list(st.spatial)
    deps: set = {vec}
    for r in st.reads:
        if r.strides.get(vec, 0) != 0:
            deps |= set(r.vars)
    return [v for v in st.spatial if v in deps]


def plan_loops(st: StageInfo, cfg: TileConfig, lanes: int) -> LoopPlan:
    """The loops, their order and the primitives of `st`'s template for `cfg` (see the module's docstring).
    Problems (a parallel choice with no loop to take it, a pack with nowhere to go) are listed in
    ``problems``; the space's constraint rules such configs out.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def f(A: f32[N, M]) -> B:\\n    B[i, j] = A[i, j] * 2.0"), {"N": 64, "M": 64}).stage("B")
    >>> p = plan_loops(st, TileConfig(vec="j", vw=16, block={"i": 8}, parallel="outer1"), lanes=16)
    >>> p.order, p.parallel_loops, p.vectorize
    (['i_b', 'i_in', 'j_t', 'j_r'], ['i_b'], 'j_r')
    """
    plan = LoopPlan(st.name)
    taken = set(st.spatial) | set(st.reduction)

    def fresh(base: str) -> str:
        name = base
        while name in taken:
            name += "_"
        taken.add(name)
        return name

    spatial_vec = cfg.vec if cfg.vec in st.spatial else None
    red_vec = cfg.vec if cfg.vec in st.reduction else None
    ys = set(y_side(st, spatial_vec)) if spatial_vec else set(st.spatial)
    per_var: dict[str, dict[str, str]] = {}
    reg_size: dict[str, int] = {}
    for v in st.spatial:
        E = st.extents[v]
        t = register_extent(st, cfg, v)
        B = block_extent(st, cfg, v)
        names: dict[str, str] = {}
        cur, cur_ext = v, E
        if B < E:
            o, i = fresh(f"{v}_b"), fresh(f"{v}_in")
            plan.splits.append((cur, B, o, i))
            names["block"] = o
            plan.extents[o] = -(-E // B)
            cur, cur_ext = i, B
        if 1 < t < cur_ext:
            o, i = fresh(f"{v}_t"), fresh(f"{v}_r")
            plan.splits.append((cur, t, o, i))
            names["tile"] = o
            plan.extents[o] = -(-cur_ext // t)
            names["reg"] = i
            plan.extents[i] = t
        else:  # the whole rest is the register tile, or there is none (a tile loop over single elements)
            names["reg" if t > 1 or v == spatial_vec else "tile"] = cur
            plan.extents[cur] = cur_ext
        per_var[v] = names
        reg_size[v] = t
    red_order = [r for r in cfg.red_order if r in st.reduction] or list(st.reduction)
    if red_vec:
        red_order = [r for r in red_order if r != red_vec] + [red_vec]
    # a pack of the vector side needs a loop around the reduction to copy at: where no block loop of the Y side
    # or of the reduction is there, the outermost reduction gets a block loop of one iteration
    y_pack = any(any(r.strides.get(spatial_vec or "", 0) for r in st.reads_of(t)) or not spatial_vec
                 for t in cfg.pack)
    no_y_block = not any("block" in per_var[v] for v in st.spatial if v in ys)
    no_r_block = not any(cfg.rblock.get(r, st.extents[r]) < st.extents[r] for r in red_order)
    no_x_block = not any("block" in per_var[v] for v in st.spatial if v not in ys)
    needs_loop = y_pack or (cfg.pack and no_x_block)
    one_iteration = red_order[0] if (needs_loop and no_y_block and no_r_block and red_order and not red_vec) \
        else None
    red_names: dict[str, dict[str, str]] = {}
    # ku at least the window's taps (see window_taps): every reduction loop unrolled
    taps = window_taps(st)
    unroll_all = taps is not None and not red_vec and cfg.ku >= taps
    for n, r in enumerate(red_order):
        E = st.extents[r]
        names = {}
        cur, cur_ext = r, E
        Bk = min(cfg.rblock.get(r, E), E)
        if red_vec == r:
            Bk = E
        if r == one_iteration:
            o, i = fresh(f"{r}_b"), fresh(f"{r}_in")
            plan.splits.append((cur, E, o, i))
            names["rblock"] = o
            plan.extents[o] = 1
            cur, cur_ext = i, E
        elif Bk < E:
            o, i = fresh(f"{r}_b"), fresh(f"{r}_in")
            plan.splits.append((cur, Bk, o, i))
            names["rblock"] = o
            plan.extents[o] = -(-E // Bk)
            cur, cur_ext = i, Bk
        innermost = n == len(red_order) - 1
        if innermost and red_vec == r:
            w = min(cfg.vw, cur_ext)
            if w < cur_ext:
                o, i = fresh(f"{r}_o"), fresh(f"{r}_v")
                plan.splits.append((cur, w, o, i))
                names["red"] = o
                plan.extents[o] = -(-cur_ext // w)
                names["vec"] = i
                plan.extents[i] = w
            else:
                names["vec"] = cur
                plan.extents[cur] = cur_ext
        elif unroll_all:
            names["unroll"] = cur
            plan.extents[cur] = cur_ext
        elif innermost and 1 < cfg.ku < cur_ext:
            o, i = fresh(f"{r}_o"), fresh(f"{r}_u")
            plan.splits.append((cur, cfg.ku, o, i))
            names["red"] = o
            plan.extents[o] = -(-cur_ext // cfg.ku)
            names["unroll"] = i
            plan.extents[i] = cfg.ku
        elif innermost and cfg.ku >= cur_ext and cfg.ku > 1:
            names["unroll"] = cur
            plan.extents[cur] = cur_ext
        else:
            names["red"] = cur
            plan.extents[cur] = cur_ext
        red_names[r] = names

    def loops_of(vars_, level, table):
        return [table[v][level] for v in vars_ if level in table[v]]

    xs = [v for v in st.spatial if v not in ys]
    y0 = loops_of([v for v in st.spatial if v in ys], "block", per_var)
    x0 = loops_of(xs, "block", per_var)
    r0 = loops_of(red_order, "rblock", red_names)
    y1 = loops_of([v for v in st.spatial if v in ys], "tile", per_var)
    x1 = loops_of(xs, "tile", per_var)
    t1 = y1 + x1 if cfg.tile_order == "y_first" else x1 + y1
    r1 = loops_of(red_order, "red", red_names) + loops_of(red_order, "unroll", red_names)
    reg = [per_var[v]["reg"] for v in st.spatial if "reg" in per_var[v] and v != spatial_vec]
    vec = [per_var[spatial_vec]["reg"]] if spatial_vec else loops_of(red_order, "vec", red_names)
    plan.order = y0 + r0 + x0 + t1 + r1 + reg + vec
    if st.scan is not None:  # a scan's loops inside the others' (in their order): the others lead, run in parallel
        mine = [lp for lp in y0 + x0 + t1 if lp in per_var[st.scan].values()]
        plan.order = [lp for lp in plan.order if lp not in mine][:-len(reg + vec) or None] + mine + reg + vec
    for v, names in per_var.items():
        for level, name in names.items():
            plan.levels[name] = (v, "vec" if (level == "reg" and v == spatial_vec) else level)
    for r, names in red_names.items():
        for level, name in names.items():
            plan.levels[name] = (r, level)
    plan.unroll = reg + loops_of(red_order, "unroll", red_names)
    plan.vectorize = vec[0] if vec else None

    # the parallel loop: leading spatial loops, or the X-side blocks inside the reduction blocks
    if cfg.parallel.startswith("outer"):
        k = int(cfg.parallel[5:])
        lead = []
        for lp in plan.order:
            if plan.levels[lp][1] in ("block", "tile") and lp not in plan.unroll and lp != plan.vectorize \
                    and plan.levels[lp][0] != st.scan:
                lead.append(lp)
            else:
                break
        if len(lead) < k:
            plan.problems.append(Problem(st.name, ProblemKind.PARALLEL_LOOPS, f"{st.name}: parallel {cfg.parallel}: "
                                         f"only {len(lead)} leading spatial loops"))
        plan.parallel_loops = lead[:k]
    elif cfg.parallel.startswith("inner"):
        k = int(cfg.parallel[5:])
        if not r0 or len(x0) < k:
            plan.problems.append(Problem(st.name, ProblemKind.PARALLEL_LOOPS, f"{st.name}: parallel {cfg.parallel}: "
                                         f"needs reduction blocks and {k} X-side block loops"))
        plan.parallel_loops = x0[:k] if r0 else []

    # the register tile: accumulated at the last loop around it, where there is a reduction to accumulate
    if st.reduction and cfg.cache_write and not red_vec:
        outside = y0 + r0 + x0 + t1
        if outside:
            plan.cache_write = plan.final(outside[-1]) if outside[-1] in plan.parallel_loops else outside[-1]

    # packs: Y-side reads at the last block loop around the reduction blocks, X-side ones inside them
    for tensor in cfg.pack:
        reads = st.reads_of(tensor)
        moves_with_vec = any(r.strides.get(spatial_vec or "", 0) for r in reads)
        if moves_with_vec or not spatial_vec:
            where = (y0 + r0)[-1:] or []
        else:
            where = x0[-1:] or (y0 + r0)[-1:]
        if not where:
            plan.problems.append(Problem(st.name, ProblemKind.PACK_LOOP,
                                         f"{st.name}: pack {tensor}: no block loop to copy it at", (tensor,)))
            continue
        at = where[0]
        layout = pack_layout(st, tensor, plan, at)
        plan.packs.append((tensor, plan.final(at), layout))
    return plan


def pack_layout(st: StageInfo, tensor: str, plan: LoopPlan, at: str) -> tuple:
    """The blocked layout of `tensor`'s copy at loop `at`: its dimensions in the order of the loops inside `at`
    that index them, a dimension split by its register tile when both its tile loop and its register loop are
    inside (B's panels: ((1, nr), (0, 0), (1, 0))).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def mm(A: f32[M, K], B: f32[K, N]) -> C:\\n    C[i, j] += A[i, k] * B[k, j]"),
    ...              {"M": 64, "N": 64, "K": 64}).stage("C")
    >>> cfg = TileConfig(vec="j", vw=16, reg={"i": 4}, block={"i": 16, "j": 64}, rblock={"k": 64},
    ...                  red_order=("k",), ku=1, pack=("A", "B"))
    >>> [(t, layout) for t, _, layout in plan_loops(st, cfg, 16).packs]
    [('A', ((0, 4), (1, 0), (0, 0))), ('B', ((1, 16), (0, 0), (1, 0)))]
    """
    read = st.reads_of(tensor)[0]
    inside = plan.order[plan.order.index(at) + 1:]
    layout: list[tuple[int, int]] = []
    placed: dict[int, str] = {}
    for lp in inside:
        var, level = plan.levels[lp]
        d = read.plain_dim(var)
        if d is None:
            ds = [k for k, (terms, _) in enumerate(read.dims) if any(v == var for v, _ in terms)]
            for k in ds:
                if k not in placed:
                    layout.append((k, 0))
                    placed[k] = "whole"
            continue
        if d in placed:
            if placed[d] == "outer" and level in ("reg", "vec"):
                layout.append((d, 0))
                placed[d] = "done"
            continue
        later = [plan.levels[q] for q in inside[inside.index(lp) + 1:]]
        inner_level = next((lv for v, lv in later if v == var and lv in ("reg", "vec")), None)
        if level == "tile" and inner_level is not None:
            size = plan.extents[next(q for q in inside if plan.levels[q] == (var, inner_level))]
            layout.append((d, size))
            placed[d] = "outer"
        else:
            layout.append((d, 0))
            placed[d] = "whole"
    for d, how in placed.items():
        if how == "outer":  # its inner part never came: keep the dimension whole
            layout = [(k, 0) if k == d else (k, b) for k, b in layout]
    # the vectorized variable's dimension goes innermost, so that the vector loads from the copy are contiguous;
    # also a window's (w + s: consecutive w, consecutive elements)
    vec = plan.vectorize and plan.levels[plan.vectorize][0]
    d = read.plain_dim(vec) if vec else None
    if vec and d is None:
        d = read.dim_of(vec)
    if d is not None and layout and layout[-1] != (d, 0) and (d, 0) in layout:
        layout = [e for e in layout if e != (d, 0)] + [(d, 0)]
    return tuple(_source_order_before_vector(layout, len(read.shape)))


def _source_order_before_vector(layout: list, rank: int) -> list:
    """`layout` with the whole dimensions just before the innermost one in the source's order, where they are
    the source's last dimensions and the innermost one is not among them (a transposing copy: a convolution's
    filters `Wt[f, c, r, s]` packed `f` innermost as [c][r][s][f], not [r][s][c][f]). The copy then reads them as
    one contiguous dimension and transposes it with the innermost in registers (`lower._transposed_copy`); the
    reads from the copy keep their order, one constant stride apart.

    >>> _source_order_before_vector([(2, 0), (3, 0), (1, 0), (0, 0)], 4)
    [(1, 0), (2, 0), (3, 0), (0, 0)]
    >>> _source_order_before_vector([(0, 4), (1, 0), (0, 0)], 2)  # A's panels of a matmul: as they were
    [(0, 4), (1, 0), (0, 0)]
    """
    if len(layout) < 3 or layout[-1][1] != 0:
        return layout
    run = 0
    while run < len(layout) - 1 and layout[-2 - run][1] == 0:
        run += 1
    for m in range(run, 1, -1):  # the longest run of whole dims just before the innermost that is a suffix
        dims = [d for d, _ in layout[-1 - m:-1]]
        if sorted(dims) == list(range(rank - m, rank)) and layout[-1][0] < rank - m:
            return layout[:-1 - m] + [(d, 0) for d in sorted(dims)] + layout[-1:]
    return layout


def apply_plan(s, plan: LoopPlan) -> None:
    """Apply `plan`'s primitives to the schedule `s` (public primitives only), in the order that lets each check
    pass: splits, reorder, fuse, annotations, cache_write, packs.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> op = tl.op("def f(A: f32[N, M]) -> B:\\n    B[i, j] = A[i, j] * 2.0")
    >>> st = analyze(op, {"N": 64, "M": 64}).stage("B")
    >>> s = tl.schedule(op, N=64, M=64)
    >>> apply_plan(s, plan_loops(st, TileConfig(vec="j", vw=16, block={"i": 8}, parallel="outer1"), lanes=16))
    >>> s["B"].loops()
    ['i_b', 'i_in', 'j_t', 'j_r']
    """
    h = s[plan.stage]
    for loop, factor, outer, inner in plan.splits:
        h.split(loop, factor, outer=outer, inner=inner)
    if len(plan.order) >= 2 and plan.order != h.loops():
        h.reorder(*plan.order)
    par = None
    if plan.parallel_loops:
        par = plan.parallel_loops[0]
        for lp in plan.parallel_loops[1:]:
            par = h.fuse(par, lp, fused=f"{par}_{lp}")
    for lp in plan.unroll:
        h.unroll(lp)
    if plan.vectorize:
        h.vectorize(plan.vectorize)
    if par is not None:
        h.parallel(par)
    if plan.cache_write:
        h.cache_write(plan.cache_write)
    for tensor, at, layout in plan.packs:
        h.cache_read(tensor, at, layout=layout)


def accumulators(plan: LoopPlan, lanes: int) -> int:
    """Vector registers the register tile needs: vectors across the vectorized loop times the unrolled
    spatial loops (the reduction's unrolled loop adds none).

    >>> p = LoopPlan("C", levels={"i_r": ("i", "reg"), "j_r": ("j", "vec")}, extents={"i_r": 6, "j_r": 64},
    ...              unroll=["i_r"], vectorize="j_r")
    >>> accumulators(p, 16)
    24
    """
    n = -(-plan.extents[plan.vectorize] // lanes) if plan.vectorize else 1
    for lp in plan.unroll:
        if plan.levels[lp][1] == "reg":
            n *= plan.extents[lp]
    return n


def register_accumulators(st: StageInfo, cfg: TileConfig, lanes: int) -> int:
    """``accumulators(plan_loops(st, cfg, lanes), lanes)`` from the tile config alone, without planning the loops:
    the space's constraint asks it first of every random config (it rules out most of conv2d's).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> st = analyze(tl.op("def f(A: f32[N, M]) -> B:\\n    B[i, j] = A[i, j] * 2.0"), {"N": 64, "M": 64}).stage("B")
    >>> cfg = TileConfig(vec="j", vw=32, reg={"i": 6})
    >>> register_accumulators(st, cfg, 16) == accumulators(plan_loops(st, cfg, 16), 16) == 12
    True
    """
    red_vec = cfg.vec if cfg.vec in st.reduction else None
    if red_vec:
        return -(-min(cfg.vw, st.extents[red_vec]) // lanes)
    n = 1
    for v in st.spatial:
        t = register_extent(st, cfg, v)
        if v == cfg.vec:
            n *= -(-(t if t > 1 else block_extent(st, cfg, v)) // lanes)
        elif t > 1:
            n *= t
    return n


def chunks(plan: LoopPlan) -> int:
    """Iterations of the parallel loop (1: none).

    >>> chunks(LoopPlan("C", parallel_loops=["a", "b"], extents={"a": 4, "b": 3}))
    12
    """
    return math.prod(plan.extents[lp] for lp in plan.parallel_loops) if plan.parallel_loops else 1
