"""rfactor: the sum of one row of 2^24 floats on 1 and on 2 threads (issue 59's bar: the 2-thread time at least
1.8x faster than the 1-thread time of the same kernel).

    python benchmarks/rfactor_rowsum.py [--log2n 24] [--rounds 21] [--min-time 0.1] [--block 65536] [--auto] [--json]

The program is ``S[z] += A[k] where z in 0:1``, whose only loop over an output index has one iteration, so
without rfactor it runs on one thread. The schedule splits ``k`` into blocks of ``--block`` elements, rfactors
over the blocks, runs the blocks in parallel and sums each block in a 16-lane vector accumulator::

    s["S"].split("k", BLOCK); s["S"].split("k_i", 16)
    s["S"].rfactor("k_o")                       # S_rf[z, k_o] += A[...]; S[z] += S_rf[z, k_o]
    s["S_rf"].reorder("k_o", "z"); s["S_rf"].parallel("k_o"); s["S_rf"].vectorize("k_i_i")

With ``--auto`` the zero-trial pick (``tl.build(op, N=...)`` with no database, for ``--threads-auto`` threads)
is timed the same way beside it.

Timing: one kernel, its thread count set explicitly before each call (TENSORLANG_NUM_THREADS, which the runtime
reads at every call); rounds in which 1 and 2 threads take turns (the order alternating), each round
``--min-time`` seconds of calls after one warm-up call, every call timed alone; a thread count's figure is the
median over rounds of its per-round median, with the least and largest round medians as its spread. The output is
checked against numpy's float64 sum (within 8 eps sqrt(n) of the sum of magnitudes) before anything is timed. Run
it on an otherwise quiet machine; a small ``--log2n`` only shows that it runs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import tensorlang as tl  # noqa: E402

PROGRAM = "def rowsum(A: f32[N]) -> S:\n    S[z] += A[k] where z in 0:1\n"
BAR = 1.8  # issue 59: 2 threads at least this much faster than 1


def rfactor_schedule(op, n: int, block: int) -> tl.Schedule:
    """The row sum over blocks of `block` elements in parallel (see the module's docstring)."""
    s = tl.schedule(op, N=n)
    s["S"].split("k", block)
    s["S"].split("k_i", 16)
    s["S"].rfactor("k_o")
    s["S_rf"].reorder("k_o", "z")
    s["S_rf"].parallel("k_o")
    s["S_rf"].vectorize("k_i_i")
    return s


def check(got, a: np.ndarray) -> None:
    """`got` (shape (1,)) is numpy's float64 sum of `a` within reassociation rounding; NaN never passes."""
    want = float(np.sum(a, dtype=np.float64))
    tol = 8 * float(np.finfo(np.float32).eps) * math.sqrt(a.size) * float(np.sum(np.abs(a), dtype=np.float64))
    value = float(np.asarray(got).reshape(-1)[0])
    if not (math.isfinite(value) and abs(value - want) <= tol):
        raise SystemExit(f"wrong result: {value!r} against numpy's {want!r} (tolerance {tol:.3g})")


def set_threads(n: int) -> None:
    os.environ["TENSORLANG_NUM_THREADS"] = str(n)


def time_alternating(kernel, a: np.ndarray, counts: tuple, rounds: int, min_time: float) -> dict:
    """{threads: (median, least, largest)} of per-round medians, the thread counts taking turns."""
    per: dict[int, list[float]] = {c: [] for c in counts}
    for r in range(rounds):
        for c in (counts if r % 2 == 0 else tuple(reversed(counts))):
            set_threads(c)
            kernel(a)  # warm-up: the pool's threads at this count
            times, start = [], time.perf_counter()
            while not times or time.perf_counter() - start < min_time:
                t0 = time.perf_counter()
                kernel(a)
                times.append(time.perf_counter() - t0)
            per[c].append(statistics.median(times))
    return {c: (statistics.median(v), min(v), max(v)) for c, v in per.items()}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log2n", type=int, default=24, help="the row has 2**LOG2N floats (default 24)")
    ap.add_argument("--rounds", type=int, default=21, help="rounds of alternating thread counts (default 21)")
    ap.add_argument("--min-time", type=float, default=0.1, help="seconds of calls per round and count (0.1)")
    ap.add_argument("--block", type=int, default=1 << 16, help="elements a partial sums (default 65536)")
    ap.add_argument("--auto", action="store_true", help="also time the zero-trial pick")
    ap.add_argument("--threads-auto", type=int, default=2, help="threads the zero-trial pick is chosen for (2)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    for name in ("log2n", "rounds", "block", "threads_auto"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.min_time <= 0:
        ap.error("--min-time must be > 0")
    n = 1 << args.log2n
    op = tl.op(PROGRAM)
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    kernels = {"rfactor": tl.build(rfactor_schedule(op, n, min(args.block, n)))}
    if args.auto:
        set_threads(args.threads_auto)
        kernels["auto"] = tl.build(op, N=n, schedule="auto")
    for k in kernels.values():
        for c in (1, 2):
            set_threads(c)
            check(k(a), a)
    out = {"n": n, "bar": BAR, "results": {}}
    for name, k in kernels.items():
        t = time_alternating(k, a, (1, 2), args.rounds, args.min_time)
        ratio = t[1][0] / t[2][0]
        out["results"][name] = {"schedule_source": k.schedule_source,
                                "threads": {str(c): {"median_s": m, "least_s": lo, "largest_s": hi}
                                            for c, (m, lo, hi) in t.items()},
                                "ratio_1_over_2": ratio}
        if not args.json:
            print(f"{name} ({k.schedule_source}), n = 2^{args.log2n}:")
            for c, (m, lo, hi) in t.items():
                print(f"  {c} thread{'s' if c > 1 else ''}: median {m * 1e3:8.3f} ms  (rounds {lo * 1e3:.3f} .. "
                      f"{hi * 1e3:.3f} ms)")
            print(f"  1-thread / 2-thread time: {ratio:.2f}x  (bar >= {BAR}x: {'met' if ratio >= BAR else 'not met'})")
    if args.json:
        print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
