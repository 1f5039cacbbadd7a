"""Program features for the cost model: a fixed-length vector that describes a lowered loop nest.

In the spirit of TVM Ansor's per-store features: every ``Store`` of the loop IR gets a record (how often it
runs, what it computes, how its loops are annotated, which memory it touches and how), and the program
vector is the record of the *main* store (the one that executes the most flops; the most executions when no
store computes) followed by sums over all stores. ``extract(func)`` is deterministic and never raises on an
index it cannot analyse: that access falls back to the whole buffer.

Conventions: every count, extent and byte figure is ``log2(1 + x)``; flags are 0/1, stride codes are 0
(the access does not move with the innermost loop), 1 (unit stride) or 2 (any other or unknown stride); the
``_frac`` features are fractions in [0, 1]. The *innermost loop* of a store is the loop directly around it.
A *level* is a loop of the store's nest together with everything inside it: the footprint at a level is
what one iteration of the enclosing loops touches, counted in 64-byte cache lines.

Per-store features (the main store's, prefixed ``main_``):

=====================  ==============================================================================
name                   meaning
=====================  ==============================================================================
execs                  executions of the store: product of its enclosing loops' extents (a loop whose
                       variable an enclosing ``if v == c`` pins counts once)
flops                  float operations per execution (add + mul + div + math + cmp)
flops_total            flops x execs
add                    float additions, subtractions and negations per execution
mul                    float multiplications per execution
div                    float divisions (and float ``//``, ``%``) per execution
math                   math calls (exp log sqrt tanh abs) and ``**`` per execution
cmp                    float comparisons, selects, min and max per execution
cast                   casts per execution
int_ops                integer index arithmetic per execution: the store's and loads' indices and the
                       ``Let`` values bound inside the innermost loop
loads                  loads per execution
depth                  number of enclosing loops
inner_extent           extent of the innermost loop (0: none)
vec_width              extent of the enclosing vectorized loop (0: none)
unroll                 product of the enclosing unrolled loops' extents (1: none)
par_extent             extent of the outermost enclosing parallel loop (0: none)
par_work               executions per iteration of that parallel loop, the work of one chunk's step
                       (0: none)
local                  1 when the stored buffer is a temporary (``Allocate``'d), else 0
accumulates            1 when the store reads the buffer it writes (a reduction update), else 0
guards                 number of enclosing ``If`` statements (tails, region clips)
b{k}_bytes             bytes of buffer slot k the whole nest touches (its footprint: the box spanned by
                       its indices over the loops, clipped to the buffer); slot 0 is the stored buffer,
                       slots 1 to 3 the other buffers read, largest footprint first (0: no such buffer)
b{k}_stride_code       0/1/2 stride code of the slot's access w.r.t. the innermost loop
b{k}_stride            log2(1 + |stride|) in elements (the largest over the slot's accesses)
b{k}_reuse             log2(1 + accesses / distinct elements) over the whole nest
l1_iters               executions inside the outermost level whose footprint fits 32 KiB (L1)
l1_bytes               the footprint of that level
l1_bytes_per_iter      log2(1 + footprint / executions) at that level: the L1 fill traffic per execution
l2_iters               as l1_iters for 1 MiB (L2)
l2_bytes               as l1_bytes for 1 MiB
l2_bytes_per_iter      as l1_bytes_per_iter for 1 MiB
=====================  ==============================================================================

Program features (sums over every store, each store weighted by its executions):

=====================  ==============================================================================
name                   meaning
=====================  ==============================================================================
total_flops            float operations of one run
total_int_ops          integer index operations of one run
total_execs            store executions of one run
total_bytes            sum of each store's footprints over all its buffers
l1_traffic             bytes filled into L1: sum of execs / l1 iterations x l1 footprint
l2_traffic             the same for L2
n_stores               Store statements
n_loops                For statements
n_parallel             parallel loops
n_vectorized           vectorized loops
n_unrolled             unrolled loops
n_allocs               Allocate statements
alloc_bytes            bytes of all allocated temporaries together
vec_frac               fraction of the work inside a vectorized loop (work: execs x max(1, flops))
par_frac               fraction of the work inside a parallel loop
local_frac             fraction of the work that stores to a temporary
=====================  ==============================================================================

Example::

    >>> import tensorlang as tl
    >>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=64)
    >>> _, vi = s["B"].split("i", 16)
    >>> s["B"].vectorize(vi)
    >>> v = of_schedule(s)
    >>> v.shape == (len(FEATURE_NAMES),), v.dtype
    (True, dtype('float64'))
    >>> f = as_dict(v, linear=True)
    >>> f["main_vec_width"], f["main_execs"], f["total_flops"], f["main_b0_stride_code"]
    (16.0, 64.0, 64.0, 1.0)
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from tensorlang.dtypes import DTYPES
from tensorlang.errors import UsageError
from tensorlang.ir import (
    Allocate,
    BinOp,
    Buffer,
    Call,
    Cast,
    Cmp,
    Expr,
    For,
    Func,
    If,
    IntImm,
    Let,
    Load,
    Logic,
    Neg,
    Not,
    Select,
    Seq,
    Store,
    Var,
)

__all__ = [
    "FEATURE_NAMES",
    "PROGRAM_FEATURES",
    "STORE_FEATURES",
    "as_dict",
    "extract",
    "of_config",
    "of_schedule",
]

L1_BYTES = 32 * 1024
L2_BYTES = 1024 * 1024
CACHE_LINE = 64
BUFFER_SLOTS = 4
ITEMSIZE = {name: d.itemsize for name, d in DTYPES.items()}
OP_KINDS = ("add", "mul", "div", "math", "cmp", "cast", "int_ops")
FLOAT_KINDS = ("add", "mul", "div", "math", "cmp")

BUFFER_FEATURES = ("bytes", "stride_code", "stride", "reuse")
STORE_FEATURES: tuple[str, ...] = (
    ("execs", "flops", "flops_total") + OP_KINDS
    + ("loads", "depth", "inner_extent", "vec_width", "unroll", "par_extent", "par_work", "local", "accumulates",
       "guards")
    + tuple(f"b{k}_{f}" for k in range(BUFFER_SLOTS) for f in BUFFER_FEATURES)
    + ("l1_iters", "l1_bytes", "l1_bytes_per_iter", "l2_iters", "l2_bytes", "l2_bytes_per_iter")
)
PROGRAM_FEATURES: tuple[str, ...] = (
    "total_flops", "total_int_ops", "total_execs", "total_bytes", "l1_traffic", "l2_traffic", "n_stores", "n_loops",
    "n_parallel", "n_vectorized", "n_unrolled", "n_allocs", "alloc_bytes", "vec_frac", "par_frac", "local_frac",
)
FEATURE_NAMES: tuple[str, ...] = tuple(f"main_{n}" for n in STORE_FEATURES) + PROGRAM_FEATURES
_RAW = frozenset({"local", "accumulates"} | {f"b{k}_stride_code" for k in range(BUFFER_SLOTS)}
                 | {"vec_frac", "par_frac", "local_frac"})   # features kept as they are (flags, codes, fractions)
_INDEX = {name: i for i, name in enumerate(FEATURE_NAMES)}

Interval = tuple[int, int] | None


# ---- integer interval arithmetic over loop and let variables -----------------------------------------------

def _interval(e: Expr, env: dict[str, tuple[int, int]]) -> Interval:
    """Inclusive bounds of integer expression `e` (None: unknown). Points in `env` give exact values."""
    t = type(e)
    if t is Var:
        return env.get(e.name)
    if t is IntImm:
        return (e.value, e.value)
    if t is BinOp:
        return _binop_interval(e.op, _interval(e.a, env), _interval(e.b, env))
    if t is Cast:
        return _interval(e.a, env) if e.dtype in ("i64", "i32") else None
    if t is Neg:
        a = _interval(e.a, env)
        return None if a is None else (-a[1], -a[0])
    if t is Select:
        a, b = _interval(e.t, env), _interval(e.f, env)
        return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
    return None


def _binop_interval(op: str, a: Interval, b: Interval) -> Interval:
    if b is not None and op == "%" and b[0] > 0 and (a is None or not 0 <= a[0] <= a[1] < b[0]):
        return (0, b[1] - 1)
    if a is None or b is None:
        return None
    if op == "+":
        return (a[0] + b[0], a[1] + b[1])
    if op == "-":
        return (a[0] - b[1], a[1] - b[0])
    if op == "*":
        ps = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
        return (min(ps), max(ps))
    if op == "min":
        return (min(a[0], b[0]), min(a[1], b[1]))
    if op == "max":
        return (max(a[0], b[0]), max(a[1], b[1]))
    if op == "//" and b[0] > 0:
        return (min(a[0] // b[0], a[0] // b[1]), max(a[1] // b[0], a[1] // b[1]))
    if op == "%" and b[0] > 0:
        return a
    return None


# ---- the walk: one record of context per store ---------------------------------------------------------

@dataclass(frozen=True)
class _Loop:
    name: str
    lo: Expr
    extent: int            # the largest extent
    kind: str


@dataclass(frozen=True)
class _Bind:
    name: str
    value: Expr


@dataclass
class _Context:
    chain: list = field(default_factory=list)        # _Loop and _Bind entries, outermost first
    env: dict = field(default_factory=dict)          # full ranges of loop and let variables
    allocated: set = field(default_factory=set)      # names of Allocate'd buffers
    guards: int = 0


@dataclass
class _Walk:
    stores: list = field(default_factory=list)       # (Store, chain snapshot, allocated?, guards)
    n_loops: int = 0
    n_parallel: int = 0
    n_vectorized: int = 0
    n_unrolled: int = 0
    n_allocs: int = 0
    alloc_bytes: int = 0


def _walk(s, ctx: _Context, out: _Walk) -> None:
    if isinstance(s, Seq):
        for x in s.stmts:
            _walk(x, ctx, out)
    elif isinstance(s, For):
        _walk_for(s, ctx, out)
    elif isinstance(s, Let):
        saved = ctx.env.get(s.var.name)
        r = _interval(s.value, ctx.env)
        _set(ctx.env, s.var.name, r)
        ctx.chain.append(_Bind(s.var.name, s.value))
        _walk(s.body, ctx, out)
        ctx.chain.pop()
        _set(ctx.env, s.var.name, saved)
    elif isinstance(s, If):
        ctx.guards += 1
        pinned = _pinned(s.cond, ctx.chain)
        if pinned:  # `v == c`: the branch runs on one iteration of loop v (a folded init's first write-back)
            chain, env = ctx.chain, ctx.env
            ctx.chain = [_Loop(e.name, e.lo, 1, e.kind) if isinstance(e, _Loop) and e.name in pinned else e
                         for e in chain]
            ctx.env = dict(env)
            for name, c in pinned.items():
                _set(ctx.env, name, (c, c))
            _walk(s.then, ctx, out)
            ctx.chain, ctx.env = chain, env
        else:
            _walk(s.then, ctx, out)
        if s.orelse is not None:
            _walk(s.orelse, ctx, out)
        ctx.guards -= 1
    elif isinstance(s, Allocate):
        out.n_allocs += 1
        out.alloc_bytes += s.buffer.size * ITEMSIZE.get(s.buffer.dtype, 4)
        fresh = s.buffer.name not in ctx.allocated
        ctx.allocated.add(s.buffer.name)
        _walk(s.body, ctx, out)
        if fresh:
            ctx.allocated.discard(s.buffer.name)
    elif isinstance(s, Store):
        out.stores.append((s, tuple(ctx.chain), s.buffer.name in ctx.allocated, ctx.guards))


def _pinned(cond: Expr, chain: list) -> dict[str, int]:
    """``{loop variable: value}`` for each conjunct ``v == c`` of `cond` on an enclosing loop's variable."""
    if isinstance(cond, Logic) and cond.op == "and":
        return {**_pinned(cond.a, chain), **_pinned(cond.b, chain)}
    loops = {e.name for e in chain if isinstance(e, _Loop)}
    if isinstance(cond, Cmp) and cond.op == "==" and isinstance(cond.a, Var) and cond.a.name in loops \
            and isinstance(cond.b, IntImm):
        return {cond.a.name: cond.b.value}
    return {}


def _walk_for(s: For, ctx: _Context, out: _Walk) -> None:
    out.n_loops += 1
    out.n_parallel += s.kind == "parallel"
    out.n_vectorized += s.kind == "vectorized"
    out.n_unrolled += s.kind == "unrolled"
    lo, ext = _interval(s.lo, ctx.env), _interval(s.extent, ctx.env)
    extent = max(0, ext[1]) if ext is not None else 1
    saved = ctx.env.get(s.var.name)
    _set(ctx.env, s.var.name, None if lo is None or ext is None else (lo[0], lo[1] + max(extent, 1) - 1))
    ctx.chain.append(_Loop(s.var.name, s.lo, extent, s.kind))
    _walk(s.body, ctx, out)
    ctx.chain.pop()
    _set(ctx.env, s.var.name, saved)


def _set(env: dict, name: str, value: Interval) -> None:
    if value is None:
        env.pop(name, None)
    else:
        env[name] = value


def _level_env(chain: tuple, level: int, bump: bool = False) -> dict:
    """Variable ranges when the loops from position `level` on (counted among loops) run and the outer loops
    stand at their first iteration; `bump` puts the innermost loop at its second iteration instead (with
    `level` past every loop, every loop variable is a point: one execution)."""
    env: dict[str, tuple[int, int]] = {}
    loops = sum(1 for c in chain if type(c) is _Loop)
    i = 0
    for c in chain:
        if type(c) is _Bind:
            _set(env, c.name, _interval(c.value, env))
            continue
        lo = _interval(c.lo, env)
        if lo is None:
            env.pop(c.name, None)
        elif i >= level:
            env[c.name] = (lo[0], lo[1] + max(c.extent, 1) - 1)
        else:
            start = lo[0] + (1 if bump and i == loops - 1 else 0)
            env[c.name] = (start, start)
        i += 1
    return env


# ---- operation counts ----------------------------------------------------------------------------------

def _count_ops(e: Expr, counts: dict[str, int]) -> None:
    """Add the operations of one evaluation of `e` to `counts` (loads counted under "loads")."""
    t = type(e)
    if t is BinOp:
        if e.dtype in ("f32", "f64"):
            kind = {"+": "add", "-": "add", "*": "mul", "/": "div", "//": "div", "%": "div", "**": "math"}.get(e.op,
                                                                                                                "cmp")
        else:
            kind = "int_ops"
        counts[kind] += 1
        _count_ops(e.a, counts)
        _count_ops(e.b, counts)
    elif t is Load:
        counts["loads"] += 1
        for i in e.indices:
            _count_ops(i, counts)
    elif t is Cmp:
        counts["cmp" if e.a.dtype in ("f32", "f64") else "int_ops"] += 1
        _count_ops(e.a, counts)
        _count_ops(e.b, counts)
    elif t is Logic:
        counts["int_ops"] += 1
        _count_ops(e.a, counts)
        _count_ops(e.b, counts)
    elif t is Select:
        counts["cmp" if e.dtype in ("f32", "f64") else "int_ops"] += 1
        for x in (e.cond, e.t, e.f):
            _count_ops(x, counts)
    elif t is Call:
        counts["math"] += 1
        for a in e.args:
            _count_ops(a, counts)
    elif t is Cast:
        counts["cast"] += 1
        _count_ops(e.a, counts)
    elif t in (Neg, Not):
        counts["add" if e.dtype in ("f32", "f64") else "int_ops"] += 1
        _count_ops(e.a, counts)


def _store_ops(store: Store, chain: tuple) -> dict[str, int]:
    counts = dict.fromkeys(OP_KINDS + ("loads",), 0)
    _count_ops(store.value, counts)
    for i in store.indices:
        _count_ops(i, counts)
    inner_lets = []
    for c in reversed(chain):
        if type(c) is _Loop:
            break
        inner_lets.append(c)
    for c in inner_lets:
        index_counts = dict.fromkeys(OP_KINDS + ("loads",), 0)
        _count_ops(c.value, index_counts)
        counts["int_ops"] += sum(index_counts.values()) - index_counts["loads"]
    return counts


# ---- memory accesses -----------------------------------------------------------------------------------

@dataclass
class _Access:
    """The accesses of one store to one buffer."""

    buffer: Buffer
    indices: list = field(default_factory=list)      # one index tuple per access

    @property
    def itemsize(self) -> int:
        return ITEMSIZE.get(self.buffer.dtype, 4)


def _accesses(store: Store) -> list[_Access]:
    """The stored buffer's accesses first, then one entry per other buffer read, in order of first read."""
    by_name = {store.buffer.name: _Access(store.buffer, [store.indices])}
    stack = [store.value] + list(store.indices)
    loads = []
    while stack:
        e = stack.pop()
        t = type(e)
        if t is Load:
            loads.append(e)
            stack.extend(e.indices)
        elif t in (BinOp, Cmp, Logic):
            stack += (e.b, e.a)
        elif t in (Neg, Not, Cast):
            stack.append(e.a)
        elif t is Select:
            stack += (e.f, e.t, e.cond)
        elif t is Call:
            stack.extend(reversed(e.args))
    for ld in loads:
        by_name.setdefault(ld.buffer.name, _Access(ld.buffer)).indices.append(ld.indices)
    return list(by_name.values())


def _box(acc: _Access, env: dict) -> list[tuple[int, int]]:
    """Per dimension, the index range the accesses cover in `env`, clipped to the buffer (whole dimension
    where unknown)."""
    box = []
    for d, size in enumerate(acc.buffer.shape):
        lo, hi = size, -1
        for idx in acc.indices:
            r = _interval(idx[d], env) if d < len(idx) else None
            if r is None:
                lo, hi = 0, size - 1
                break
            lo, hi = min(lo, r[0]), max(hi, r[1])
        lo, hi = max(lo, 0), min(hi, size - 1)
        box.append((lo, hi) if hi >= lo else (0, 0))
    return box


def _elements(box: list[tuple[int, int]]) -> int:
    n = 1
    for lo, hi in box:
        n *= hi - lo + 1
    return n


def _lines(acc: _Access, box: list[tuple[int, int]]) -> int:
    """Cache lines a box covers: the trailing full dimensions and the first partial one are contiguous."""
    contiguous, outer = 1, 1
    shape = acc.buffer.shape
    d = len(shape) - 1
    while d >= 0:
        contiguous *= box[d][1] - box[d][0] + 1
        full = box[d] == (0, shape[d] - 1)
        d -= 1
        if not full:
            break
    while d >= 0:
        outer *= box[d][1] - box[d][0] + 1
        d -= 1
    return outer * -(-contiguous * acc.itemsize // CACHE_LINE)


def _stride(acc: _Access, chain: tuple, depth: int) -> int | None:
    """Elements the address moves when the innermost loop steps once (the largest over the accesses), or
    None when an index cannot be evaluated."""
    if depth == 0:
        return 0
    first, second = _level_env(chain, depth), _level_env(chain, depth, bump=True)
    worst = 0
    for idx in acc.indices:
        a, b = _address(acc.buffer, idx, first), _address(acc.buffer, idx, second)
        if a is None or b is None:
            return None
        worst = max(worst, abs(b - a))
    return worst


def _address(buf: Buffer, idx: tuple, env: dict) -> int | None:
    addr = 0
    for size, ix in zip(buf.shape, idx):
        r = _interval(ix, env)
        if r is None:
            return None
        addr = addr * size + r[0]
    return addr


# ---- one store's record --------------------------------------------------------------------------------

def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, x))


def _store_record(store: Store, chain: tuple, local: bool, guards: int) -> dict[str, float]:
    """The raw (untransformed) features of one store, plus the helpers the program sums need."""
    loops = [c for c in chain if type(c) is _Loop]
    depth = len(loops)
    execs = math.prod(lp.extent for lp in loops)
    ops = _store_ops(store, chain)
    flops = sum(ops[k] for k in FLOAT_KINDS)
    accesses = _accesses(store)
    whole = _level_env(chain, 0)
    rec = {"execs": execs, "flops": flops, "flops_total": flops * execs, **ops, "depth": depth,
           "inner_extent": loops[-1].extent if loops else 0, "guards": guards, "local": float(local),
           "accumulates": float(len(accesses[0].indices) > 1)}
    rec.update(_annotation_features(loops))
    slots = _buffer_features(accesses, chain, whole, execs, depth)
    rec.update(slots)
    footprints = _footprints(accesses, chain, loops, max(L1_BYTES, L2_BYTES))
    for tag, cap in (("l1", L1_BYTES), ("l2", L2_BYTES)):
        iters, nbytes = _cache_level(footprints, cap)
        rec.update({f"{tag}_iters": iters, f"{tag}_bytes": nbytes, f"{tag}_bytes_per_iter": nbytes / iters})
    rec["_bytes"] = sum(_elements(_box(a, whole)) * a.itemsize for a in accesses)
    return rec


def _annotation_features(loops: list[_Loop]) -> dict[str, float]:
    vec = [lp.extent for lp in loops if lp.kind == "vectorized"]
    par = [i for i, lp in enumerate(loops) if lp.kind == "parallel"]
    par_extent = loops[par[0]].extent if par else 0
    par_work = math.prod(lp.extent for lp in loops[par[0] + 1:]) if par else 0
    return {"vec_width": math.prod(vec) if vec else 0,
            "unroll": math.prod(lp.extent for lp in loops if lp.kind == "unrolled"),
            "par_extent": par_extent, "par_work": par_work}


def _buffer_features(accesses: list[_Access], chain: tuple, whole: dict, execs: int, depth: int) -> dict:
    boxes = {a.buffer.name: _box(a, whole) for a in accesses}
    reads = sorted(accesses[1:], key=lambda a: (-_elements(boxes[a.buffer.name]) * a.itemsize, a.buffer.name))
    out = {}
    for k, acc in enumerate([accesses[0]] + reads[:BUFFER_SLOTS - 1]):
        distinct = _elements(boxes[acc.buffer.name])
        stride = _stride(acc, chain, depth)
        code = 2 if stride is None else min(stride, 2)
        out.update({f"b{k}_bytes": distinct * acc.itemsize, f"b{k}_stride_code": code,
                    f"b{k}_stride": acc.buffer.size if stride is None else stride,
                    f"b{k}_reuse": execs * len(acc.indices) / distinct})
    for k in range(len(out) // len(BUFFER_FEATURES), BUFFER_SLOTS):
        out.update({f"b{k}_{f}": 0 for f in BUFFER_FEATURES})
    return out


def _footprints(accesses: list[_Access], chain: tuple, loops: list[_Loop], cap: int) -> list[tuple[int, int]]:
    """(executions, cache-line bytes) of each loop level from the innermost (one execution) outwards, up to and
    including the first level whose footprint exceeds `cap` bytes."""
    out = []
    iters = 1
    for level in range(len(loops), -1, -1):
        if level < len(loops):
            iters *= max(loops[level].extent, 1)
        env = _level_env(chain, level)
        nbytes = sum(_lines(a, _box(a, env)) for a in accesses) * CACHE_LINE
        out.append((iters, nbytes))
        if nbytes > cap:
            break
    return out


def _cache_level(footprints: list[tuple[int, int]], cap: int) -> tuple[int, int]:
    """(executions, bytes) of the outermost level of `footprints` (see :func:`_footprints`) whose footprint fits
    `cap` bytes (the innermost level when not even that fits)."""
    best = footprints[0]
    for iters, nbytes in footprints:
        if nbytes > cap:
            break
        best = (iters, nbytes)
    return best


# ---- the program vector --------------------------------------------------------------------------------

def extract(func: Func) -> np.ndarray:
    """The feature vector of a lowered function: float64, ``len(FEATURE_NAMES)`` long, finite.

    Example::

        >>> import tensorlang as tl
        >>> f = tl.schedule(tl.op("def f(A: f32[M, K]) -> B:\\n    B[m] += A[m, k]"), M=8, K=4).lowered()
        >>> v = as_dict(extract(f), linear=True)
        >>> v["main_execs"], v["main_flops"], v["n_stores"], v["main_accumulates"]
        (32.0, 1.0, 2.0, 1.0)
    """
    walk = _Walk()
    _walk(func.body, _Context(), walk)
    records = [_store_record(*entry) for entry in walk.stores]
    out = np.zeros(len(FEATURE_NAMES), dtype=np.float64)
    if records:
        main = max(records, key=lambda r: (r["flops_total"], r["execs"]))   # first of equals: max keeps it
        for name in STORE_FEATURES:
            out[_INDEX[f"main_{name}"]] = main[name] if name in _RAW else _log(main[name])
    for name, value in _program_sums(records, walk).items():
        out[_INDEX[name]] = value if name in _RAW else _log(value)
    return out


def _program_sums(records: list[dict], walk: _Walk) -> dict[str, float]:
    work = [r["execs"] * max(1, r["flops"]) for r in records]
    total_work = sum(work) or 1

    def frac(pred) -> float:
        return sum(w for w, r in zip(work, records) if pred(r)) / total_work

    return {
        "total_flops": sum(r["flops_total"] for r in records),
        "total_int_ops": sum(r["int_ops"] * r["execs"] for r in records),
        "total_execs": sum(r["execs"] for r in records),
        "total_bytes": sum(r["_bytes"] for r in records),
        "l1_traffic": sum(r["execs"] / r["l1_iters"] * r["l1_bytes"] for r in records),
        "l2_traffic": sum(r["execs"] / r["l2_iters"] * r["l2_bytes"] for r in records),
        "n_stores": len(records), "n_loops": walk.n_loops, "n_parallel": walk.n_parallel,
        "n_vectorized": walk.n_vectorized, "n_unrolled": walk.n_unrolled, "n_allocs": walk.n_allocs,
        "alloc_bytes": walk.alloc_bytes,
        "vec_frac": frac(lambda r: r["vec_width"] > 0),
        "par_frac": frac(lambda r: r["par_extent"] > 0),
        "local_frac": frac(lambda r: r["local"] > 0),
    }


def of_schedule(schedule) -> np.ndarray:
    """The feature vector of a ``tl.Schedule``: lower it, then :func:`extract`.

    Example::

        >>> import tensorlang as tl
        >>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]"), N=8)
        >>> bool(np.array_equal(of_schedule(s), extract(s.lowered())))
        True
    """
    return extract(schedule.lowered())


def of_config(space, op, sizes: dict, config: dict) -> np.ndarray | None:
    """The feature vector of ``config`` of a search ``space`` for ``op`` at ``sizes``, or None when the config
    cannot be scheduled (what the tuner, its builder processes and replay all compute).

    Example::

        >>> from tensorlang.tuner.task import Task
        >>> t = Task.create("matmul", preset="small", threads=1)
        >>> of_config(t.space, t.op, t.sizes, t.space.config_at(0)).shape == (len(FEATURE_NAMES),)
        True
    """
    import tensorlang as tl
    from tensorlang.schedule import lowering_checks_at_the_end
    try:
        with lowering_checks_at_the_end():  # the same loop IR (or refusal), without a trial lowering per primitive
            return of_schedule(space.schedule(op, sizes, config))
    except tl.ScheduleError:
        return None
    except Exception as e:  # a compiler bug must not stop the tuning: say so, and count the config as unschedulable
        warnings.warn(f"tensorlang: scheduling a config of the search space failed with an internal error "
                      f"({type(e).__name__}: {e}); the tuner counts such configs as ones that cannot be scheduled. "
                      "Please report it with the config.", RuntimeWarning, stacklevel=2)
        return None


def as_dict(vector: np.ndarray, linear: bool = False) -> dict[str, float]:
    """A feature vector as ``{name: value}`` in the order of FEATURE_NAMES (for reading and for tests);
    ``linear=True`` undoes the ``log2(1 + x)`` of the log-scaled features (rounded to 6 decimals).

    Example::

        >>> list(as_dict(np.zeros(len(FEATURE_NAMES))))[:3]
        ['main_execs', 'main_flops', 'main_flops_total']
        >>> as_dict(np.full(len(FEATURE_NAMES), 4.0), linear=True)["main_execs"]
        15.0
    """
    if len(vector) != len(FEATURE_NAMES):
        raise UsageError(f"a feature vector has {len(FEATURE_NAMES)} entries, got {len(vector)}")
    out = {name: float(x) for name, x in zip(FEATURE_NAMES, vector)}
    if linear:
        out = {name: x if _base(name) in _RAW else round(2.0 ** x - 1.0, 6) for name, x in out.items()}
    return out


def _base(name: str) -> str:
    return name[len("main_"):] if name.startswith("main_") else name
