"""Speed of an exported shared library against the JIT kernel it came from (bar: at least 0.95x).

    python benchmarks/export_speed.py [--workload matmul] [--preset 1024] [--runs 60] [--threads N] [--json]

Builds the workload's hand schedule with the JIT, exports it with `kernel.export(dir, "so")`, loads the library
back with `tl.load`, checks both against numpy, and then times the two in this process on the same inputs,
alternating (JIT first in even rounds, the library first in odd ones), after warm-up: the median of `--runs`
calls each, in GFLOPS, and their ratio. Both use the same thread count (TENSORLANG_NUM_THREADS). Take timings
on a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

import numpy as np

import tensorlang as tl
from tensorlang import schedules
from tensorlang.threadpool import num_threads
from tensorlang.tuner.measure.disturbance import Tally


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="matmul")
    ap.add_argument("--preset", default="1024")
    ap.add_argument("--runs", type=int, default=60, help="timed calls of each kernel (default 60)")
    ap.add_argument("--threads", type=int, help="threads of both kernels (default: all CPUs)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.threads:
        os.environ["TENSORLANG_NUM_THREADS"] = str(args.threads)
    w = schedules.get(args.workload)
    sizes = w.sizes(args.preset)
    s = tl.schedule(tl.op(w.source), **sizes)
    w.hand_schedule(s)
    jit = tl.build(s)
    with tempfile.TemporaryDirectory(prefix="tensorlang-export-speed-") as tmp:
        lib = tl.load(jit.export(tmp, "so")["library"])
        inputs = w.make_inputs(sizes, np.random.default_rng(0))
        expected = w.reference(*inputs, **sizes)
        outs = {"jit": np.empty_like(expected), "so": np.empty_like(expected)}
        kernels = {"jit": jit, "so": lib}
        for name, k in kernels.items():
            k(*inputs, out=outs[name])
            check = w.check(outs[name], expected, sizes)  # a NaN or infinity numpy lacks never matches
            if not check.ok:
                raise SystemExit(f"{w.name}: the {name} kernel {check.describe()}")
        for _ in range(3):  # warm-up
            for name, k in kernels.items():
                k(*inputs, out=outs[name])
        times = {"jit": [], "so": []}
        tally = Tally(num_threads())  # what other processes took while the runs were timed
        with tally.watch():
            for i in range(args.runs):
                for name in (("jit", "so") if i % 2 == 0 else ("so", "jit")):
                    t0 = time.perf_counter()
                    kernels[name](*inputs, out=outs[name])
                    times[name].append(time.perf_counter() - t0)
    flops = w.flops(sizes)
    med = {n: statistics.median(t) for n, t in times.items()}
    result = {"workload": w.name, "sizes": sizes, "threads": int(os.environ.get("TENSORLANG_NUM_THREADS", 0))
              or len(os.sched_getaffinity(0)), "runs": args.runs, "cpu": jit.target.cpu,
              "jit": {"median_s": med["jit"], "gflops": flops / med["jit"] / 1e9},
              "so": {"median_s": med["so"], "gflops": flops / med["so"] / 1e9},
              "ratio": med["jit"] / med["so"], "disturbance": tally.to_json()}
    if args.json:
        print(json.dumps(result))
        return
    print(f"{w.name} ({', '.join(f'{k}={v}' for k, v in sizes.items())}), hand schedule, {result['threads']} "
          f"threads, median of {args.runs} alternating runs each, both as calls into preallocated outputs (out=)")
    for name, label in (("jit", "JIT kernel (tl.build)"), ("so", "exported .so (tl.load)")):
        print(f"  {label:<24} {med[name] * 1e3:8.3f} ms  {result[name]['gflops']:7.1f} GFLOPS")
    print(f"  ratio .so / JIT speed: {result['ratio']:.3f} (bar 0.95)")
    if tally.note():
        print(f"  note: {tally.note()}")


if __name__ == "__main__":
    main()
