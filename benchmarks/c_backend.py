"""The C backend against the LLVM backend: the hand-scheduled matmul, compiled both ways, timed in one run.

    python benchmarks/c_backend.py [--presets 1024,512] [--min-runs 10] [--rounds 3] [--no-openmp] [--json]

For each preset the hand schedule (schedules/matmul.py) is lowered once; the loop IR is compiled by the LLVM
backend (``tl.build``, MCJIT, its thread pool) and by the C backend (``emit_c`` + ``compile_c``: the system C
compiler with ``-O3 -march=native -fopenmp``, called through ctypes). Both get the same inputs; both results are
checked against numpy (float64) first. Timing alternates the two for ``--rounds`` rounds of
``tensorlang.timing.measure`` (warm-up, then at least ``--min-runs`` calls and 0.5 s); the table gives the median
of all calls, GFLOPS (2*M*N*K per call) and the ratio C/LLVM. Run it on a quiet machine.

OpenMP gets as many threads as the LLVM thread pool (TENSORLANG_NUM_THREADS, default: the CPUs available) and
OMP_WAIT_POLICY=passive, unless set: its idle threads then block (the pool's spin 500 µs, then block) instead
of spinning on the cores that the LLVM kernel is timed on next, which would slow it.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import tensorlang as tl
from tensorlang import schedules
from tensorlang.codegen_c import CFLAGS, compile_c, emit_c, find_c_compiler
from tensorlang.threadpool import num_threads
from tensorlang.timing import measure, median
from tensorlang.tuner.measure.disturbance import Tally, busy_note


def check(name: str, got: np.ndarray, want: np.ndarray, k: int) -> float:
    """The largest error relative to the rms of the result; fails above an f32 budget for a length-k sum."""
    rms = float(np.sqrt(np.mean(want * want)))
    err = float(np.max(np.abs(got.astype(np.float64) - want))) / rms
    budget = 8 * float(np.finfo(np.float32).eps) * (k ** 0.5 + 8)
    if not err <= budget:
        sys.exit(f"{name}: wrong result (max error {err:.3g} of the rms, budget {budget:.3g})")
    return err


def bench(preset: str, workdir: Path, openmp: bool, min_runs: int, rounds: int) -> dict:
    w = schedules.get("matmul")
    sizes = w.sizes(preset)
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    s = tl.schedule(tl.op(w.source), **sizes)
    w.hand_schedule(s)
    kernel = tl.build(s)
    so = compile_c(emit_c(kernel.func), workdir / f"matmul_{preset}.so", openmp=openmp)
    fn = ctypes.CDLL(str(so)).matmul
    fn.restype = ctypes.c_int32
    fn.argtypes = [ctypes.c_void_p] * 3

    A, B = w.make_inputs(sizes, np.random.default_rng(0))
    C_llvm = np.empty((M, N), np.float32)
    C_c = np.empty((M, N), np.float32)
    pa, pb, pc = A.ctypes.data, B.ctypes.data, C_c.ctypes.data

    def run_llvm():
        kernel(A, B, out=C_llvm)

    def run_c():
        if fn(pa, pb, pc) != 0:
            raise MemoryError("the C kernel could not allocate its buffers")

    run_llvm()
    run_c()
    want = A.astype(np.float64) @ B.astype(np.float64)
    err_llvm = check("LLVM", C_llvm, want, K)
    err_c = check("C", C_c, want, K)
    times = {"llvm": [], "c": []}
    tally = Tally(num_threads())  # what other processes took during each round
    for _ in range(rounds):
        with tally.watch():
            times["llvm"] += measure(run_llvm, min_runs=min_runs, min_time=0.5)
            times["c"] += measure(run_c, min_runs=min_runs, min_time=0.5)
    flops = 2.0 * M * N * K
    row = {"preset": preset, "sizes": sizes}
    for name, ts in times.items():
        row[f"{name}_median_s"] = median(ts)
        row[f"{name}_gflops"] = flops / median(ts) / 1e9
        row[f"{name}_runs"] = len(ts)
    row["ratio_c_over_llvm"] = row["c_gflops"] / row["llvm_gflops"]
    row["max_rel_error"] = {"llvm": err_llvm, "c": err_c}
    row["disturbance"] = tally.to_json()
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="1024,512", help="matmul presets, comma-separated (default 1024,512)")
    ap.add_argument("--min-runs", type=int, default=10, help="timed calls per round at least (default 10)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds of LLVM and C timing (default 3)")
    ap.add_argument("--no-openmp", action="store_true", help="compile the C kernel without -fopenmp (serial)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    threads = num_threads()
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))  # read when libgomp loads, with the first kernel
    os.environ.setdefault("OMP_WAIT_POLICY", "passive")
    cc = find_c_compiler()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tensorlang-bench-c-") as d:
        for preset in args.presets.split(","):
            rows.append(bench(preset.strip(), Path(d), not args.no_openmp, args.min_runs, args.rounds))
    result = {"workload": "matmul", "schedule": "hand", "threads": threads, "cc": " ".join(cc),
              "omp_wait_policy": os.environ["OMP_WAIT_POLICY"],
              "cflags": " ".join(CFLAGS) + ("" if args.no_openmp else " -fopenmp"), "results": rows}
    if args.json:
        print(json.dumps(result))
        return
    print(f"hand-scheduled matmul, {threads} thread(s); C: {result['cc']} {result['cflags']}, "
          f"OMP_WAIT_POLICY={result['omp_wait_policy']}; both timed as calls into preallocated outputs, "
          f"alternating rounds, medians")
    print(f"{'preset':<8} {'LLVM ms':>9} {'LLVM GFLOPS':>12} {'C ms':>9} {'C GFLOPS':>10} {'C/LLVM':>7}")
    for r in rows:
        print(f"{r['preset']:<8} {r['llvm_median_s'] * 1e3:>9.2f} {r['llvm_gflops']:>12.1f} "
              f"{r['c_median_s'] * 1e3:>9.2f} {r['c_gflops']:>10.1f} {r['ratio_c_over_llvm']:>7.2f}")
        note = busy_note(r["disturbance"])
        if note:
            print(f"  note: {note}")


if __name__ == "__main__":
    main()
