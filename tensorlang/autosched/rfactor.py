"""The rfactor rule: a reduction whose outputs are too few to keep the threads busy is split across them.

A full reduction to one value, a row sum of a few long rows, a matrix-vector product with a short output: their
only loops over output indices have fewer iterations than the threads need, so the usual parallel loop (over
outputs) leaves threads idle. The rule splits the long reduction variable into chunks, ``rfactor``s over the chunks
(a partial stage indexed by the chunk, whose chunk loop runs in parallel, each chunk summed in a vector
accumulator where the read is contiguous along the variable) and reduces the partials in a small combine stage.

The generated space offers it (knob ``STAGE.rfactor``) where :func:`rfactor_offered` holds; the zero-trial pick
takes it where :func:`rfactor_picked` holds. The thresholds come from the thread count alone.

>>> import tensorlang as tl
>>> from tensorlang.autosched.analysis import analyze
>>> op = tl.op("def total(A: f32[N]) -> S:\\n    S[z] += A[k] where z in 0:1")
>>> st = analyze(op, {"N": 1 << 20}).stage("S")
>>> rfactor_offered(st, threads=2), rfactor_picked(st, threads=2), rfactor_picked(st, threads=1)
(True, True, False)
"""
from __future__ import annotations

import math

from .analysis import StageInfo

SPATIAL_PER_THREAD = 8
"""Output elements a thread gets at least from a reduction's own parallel loop before the pick rfactors it: with
fewer than ``SPATIAL_PER_THREAD * threads`` outputs, threads claiming whole outputs are idle or unbalanced (3 rows
on 2 threads: one thread does two)."""

OFFERED_SPATIAL_PER_THREAD = 64
"""Below ``OFFERED_SPATIAL_PER_THREAD * threads`` outputs the space offers rfactor to the tuner (the pick takes
it below :data:`SPATIAL_PER_THREAD`)."""

MIN_CHUNK = 4096
"""Iterations of the long reduction variable one partial covers at least: a partial's start and its share of the
combine cost about as much as a few hundred iterations."""

CHUNKS_PER_THREAD = 8
"""Partials per thread, at most: threads claim chunks as they go, so a thread that loses its CPU for a while
leaves a few chunks to the others, not half the work."""


def spatial_points(st: StageInfo) -> int:
    """Output elements of `st` (the product of its spatial extents).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> spatial_points(analyze(tl.op("def f(A: f32[M, K]) -> B:\\n    B[m] += A[m, k]"), {"M": 3, "K": 9}).stage("B"))
    3
    """
    return math.prod(st.extents[v] for v in st.spatial)


def rfactor_var(st: StageInfo, threads: int) -> str | None:
    """The reduction variable the rule splits: one of at least ``MIN_CHUNK * threads`` iterations, contiguous in
    some read (stride 1) if one is, else the longest; None when none is that long.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> op = tl.op("def f(A: f32[R, K]) -> B:\\n    B[z] += A[r, k] where z in 0:1")
    >>> rfactor_var(analyze(op, {"R": 9000, "K": 9000}).stage("B"), 2)
    'k'
    """
    long = [r for r in st.reduction if st.extents[r] >= MIN_CHUNK * threads]
    if not long:
        return None
    contiguous = [r for r in long if any(rd.strides.get(r) == 1 for rd in st.reads)]
    return max(contiguous or long, key=lambda r: st.extents[r])


def rfactor_offered(st: StageInfo, threads: int) -> bool:
    """Whether the generated space offers to rfactor stage `st` for `threads` threads.

    Conditions, all of:
      1. more than one thread;
      2. `st` is a reduction;
      3. it has fewer than ``OFFERED_SPATIAL_PER_THREAD * threads`` output elements;
      4. a reduction variable has at least ``MIN_CHUNK * threads`` iterations (:func:`rfactor_var`).

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> op = tl.op("def gemv(A: f32[M, K], x: f32[K]) -> y:\\n    y[m] += A[m, k] * x[k]")
    >>> [rfactor_offered(analyze(op, {"M": m, "K": 1 << 16}).stage("y"), 2) for m in (4, 100, 128)]
    [True, True, False]
    """
    return (threads > 1 and bool(st.reduction) and spatial_points(st) < OFFERED_SPATIAL_PER_THREAD * threads
            and rfactor_var(st, threads) is not None)


def rfactor_picked(st: StageInfo, threads: int) -> bool:
    """Whether the zero-trial pick rfactors stage `st` (placed at the root, with no stage computed in its loops or
    write-back: the pick checks those).

    Conditions, all of:
      1. the space offers it (:func:`rfactor_offered`);
      2. `st` has fewer than ``SPATIAL_PER_THREAD * threads`` output elements.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> op = tl.op("def gemv(A: f32[M, K], x: f32[K]) -> y:\\n    y[m] += A[m, k] * x[k]")
    >>> [rfactor_picked(analyze(op, {"M": m, "K": 1 << 16}).stage("y"), 2) for m in (4, 15, 16)]
    [True, True, False]
    """
    return rfactor_offered(st, threads) and spatial_points(st) < SPATIAL_PER_THREAD * threads


def chunk_of(extent: int, threads: int, lanes: int) -> int:
    """Iterations of the split variable per partial: about ``extent / (CHUNKS_PER_THREAD * threads)``, at least
    ``MIN_CHUNK``, a multiple of `lanes`; one that divides `extent` where one is within twice that (no tail).

    >>> chunk_of(1 << 24, 2, 16), chunk_of(100_003, 2, 16)
    (1048576, 6256)
    """
    parts = max(threads, min(CHUNKS_PER_THREAD * threads, extent // MIN_CHUNK))
    per = -(-extent // parts)
    target = -(-per // lanes) * lanes
    for c in range(target, min(2 * target, extent) + 1, lanes):
        if extent % c == 0:
            return c
    return target


def apply_rfactor(s, st: StageInfo, threads: int, lanes: int) -> None:
    """Schedule stage `st` of schedule `s` by the rule: split the variable :func:`rfactor_var` into chunks
    (:func:`chunk_of`), rfactor over the chunks, run the chunks of the partial stage in parallel (outermost), and
    vectorize the chunk's inner `lanes` iterations where a read is contiguous along the variable. The combine
    stage keeps its default loops.

    >>> import tensorlang as tl
    >>> from tensorlang.autosched.analysis import analyze
    >>> op = tl.op("def total(A: f32[N]) -> S:\\n    S[z] += A[k] where z in 0:1")
    >>> s = tl.schedule(op, N=1 << 16)
    >>> apply_rfactor(s, analyze(op, {"N": 1 << 16}).stage("S"), threads=2, lanes=16)
    >>> print(s)
    s = tl.schedule(op, N=65536)
    s["S"].split("k", 4096, outer="k_o", inner="k_i")
    s["S"].split("k_i", 16, outer="k_i_o", inner="k_i_i")
    s["S"].rfactor("k_o", partial="S_rf")
    s["S_rf"].reorder("k_o", "z", "k_i_o", "k_i_i")
    s["S_rf"].parallel("k_o")
    s["S_rf"].vectorize("k_i_i")
    """
    r = rfactor_var(st, threads)
    assert r is not None, st.name  # rfactor_offered
    h = s[st.name]
    names = set(h.loops()) | set(st.extents)

    def fresh(base: str) -> str:
        while base in names:
            base += "_"
        names.add(base)
        return base

    vector = any(rd.strides.get(r) == 1 for rd in st.reads) and st.extents[r] >= lanes
    chunk = chunk_of(st.extents[r], threads, lanes if vector else 1)
    ro, ri = h.split(r, chunk, fresh(f"{r}_o"), fresh(f"{r}_i"))
    inner = [ri]
    if vector:
        inner = list(h.split(ri, lanes, fresh(f"{ri}_o"), fresh(f"{ri}_i")))
    taken = {p.name for p in s.op.params} | {x.name for x in s.state().bound.op.stages} | set(s.sizes)
    partial = f"{st.name}_rf"
    while partial in taken:
        partial += "_"
    p = s[h.rfactor(ro, partial)]
    rest = [q for q in p.loops() if q != ro and q not in inner]
    p.reorder(ro, *rest, *inner)
    p.parallel(ro)
    if vector:
        p.vectorize(inner[-1])
