"""Compile time of every workload's default preset with the default schedule.

    python benchmarks/compile_time.py [--repeat 3] [--json]

Reports parse, lower (loop IR + bounds check), LLVM (codegen, O2, JIT) and total seconds per workload:
the median of `--repeat` cold builds (the kernel cache is bypassed). Take timings on a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import tensorlang as tl
from tensorlang import schedules
from tensorlang.codegen_llvm import emit_module
from tensorlang.target import compile_ir, host_target


def measure(source: str, sizes: dict) -> dict:
    """Seconds spent in each phase of one cold build."""
    t0 = time.perf_counter()
    op = tl.op(source)
    t1 = time.perf_counter()
    func = tl.schedule(op, **sizes).lowered()
    t2 = time.perf_counter()
    compile_ir(str(emit_module(func, vector_bits=host_target().vector_bits())), host_target())
    t3 = time.perf_counter()
    return {"parse_s": t1 - t0, "lower_s": t2 - t1, "llvm_s": t3 - t2, "total_s": t3 - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tl.build(tl.op("def warm(A: f32[N]) -> B:\n    B[i] = A[i]"), N=4)  # LLVM start-up, once
    rows = []
    for w in schedules.WORKLOADS.values():
        sizes = w.sizes()
        runs = [measure(w.source, sizes) for _ in range(args.repeat)]
        row = {"workload": w.name, "preset": w.default_preset}
        for k in runs[0]:
            row[k] = statistics.median(r[k] for r in runs)
        rows.append(row)
    if args.json:
        print(json.dumps({"target": host_target().cpu, "rows": rows}))
        return
    print(f"{'workload':<18} {'preset':<16} {'parse ms':>9} {'lower ms':>9} {'llvm ms':>9} {'total ms':>9}")
    for r in rows:
        print(f"{r['workload']:<18} {r['preset']:<16} {r['parse_s'] * 1e3:9.1f} {r['lower_s'] * 1e3:9.1f} "
              f"{r['llvm_s'] * 1e3:9.1f} {r['total_s'] * 1e3:9.1f}")


if __name__ == "__main__":
    main()
