"""One build for a range of sizes against a build specialized for each size: the built-in matmul and conv2d.

    python benchmarks/symbolic_sizes.py [--workload matmul,conv2d] [--base 128] [--scales 1,2,4,8]
        [--versions 1] [--schedule auto] [--threads 2] [--rounds 3] [--min-runs 10] [--json]

For each workload one kernel is built with symbolic sizes (``tl.Dim(base, 8*base, like=base)`` for matmul's M, N
and K; for conv2d's H and W, with N, C, F and the 3x3 filter fixed), its schedule chosen (``--schedule``: auto,
hand, tuned or naive) for the representative size ``base``; with ``--versions 1,4`` the kernel holds a version
for each of those multiples of the base (``like=(base, 4*base)``), each with the schedule chosen for its size,
and each call runs the version nearest its sizes. At each scale s (size s*base), a kernel specialized
for that size is built with the same schedule source; both get the same inputs, and both outputs are checked
against numpy (float64) before timing. Timing alternates the two kernels for ``--rounds`` rounds of
``tensorlang.timing.measure`` (warm-up, then at least ``--min-runs`` calls and 0.2 s); the table gives the median
of all calls of each and the ratio specialized/symbolic (>= 1.0: the symbolic build is as fast). The symbolic
build is compiled once: the script fails if any later call compiles. ``--threads`` sets TENSORLANG_NUM_THREADS
before tensorlang starts its thread pool. Run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import os
import sys


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="matmul,conv2d", help="comma-separated: matmul, conv2d")
    p.add_argument("--base", type=int, default=0, help="the representative size (default: 128 matmul, 14 conv2d)")
    p.add_argument("--scales", default="1,2,4,8", help="sizes as multiples of the base, within 1..8")
    p.add_argument("--versions", default="1", help="multiples of the base to make versions for (default 1: one)")
    p.add_argument("--schedule", default="auto", choices=["auto", "hand", "tuned", "naive"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--min-runs", type=int, default=10)
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ["TENSORLANG_NUM_THREADS"] = str(args.threads)  # before the thread pool starts
    from tensorlang import runtime

    scales = [int(x) for x in args.scales.split(",")]
    if any(not 1 <= s <= 8 for s in scales):
        sys.exit("--scales: each scale must lie in 1..8 (the symbolic build's range)")
    versions = [int(x) for x in args.versions.split(",")]
    if any(not 1 <= v <= 8 for v in versions) or versions != sorted(set(versions)):
        sys.exit("--versions: ascending multiples of the base, each in 1..8")
    compiles = [0]
    real_compile = runtime.compile_ir

    def counting(*a, **kw):
        compiles[0] += 1
        return real_compile(*a, **kw)
    runtime.compile_ir = counting
    try:
        rows = run(args, compiles)
    finally:
        runtime.compile_ir = real_compile
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(f"{'workload':8} {'scale':>5} {'version':>8} {'symbolic ms':>12} {'specialized ms':>15} {'spec/sym':>9}")
        for r in rows:
            print(f"{r['workload']:8} {r['scale']:>4}x {r['version_scale']:>7}x {r['symbolic_s'] * 1e3:12.3f} "
                  f"{r['specialized_s'] * 1e3:15.3f} {r['ratio']:9.2f}")
    return 0


def run(args: argparse.Namespace, compiles: list) -> list[dict]:
    """The rows of the table (see the module docstring); `compiles[0]` counts the compilations."""
    import numpy as np

    import tensorlang as tl
    from tensorlang import schedules
    from tensorlang.timing import measure, median

    scales = [int(x) for x in args.scales.split(",")]
    versions = [int(x) for x in args.versions.split(",")]
    rows = []
    for name in args.workload.split(","):
        w = schedules.get(name)
        op = tl.op(w.source)
        rng = np.random.default_rng(0)
        if name == "matmul":
            base = args.base or 128
            dims = {n: tl.Dim(base, 8 * base, like=tuple(v * base for v in versions)) for n in ("M", "N", "K")}

            def sizes_at(size):
                return {"M": size, "N": size, "K": size}
        elif name == "conv2d":
            base = args.base or 14
            fixed = {"N": 1, "C": 64, "F": 64, "R": 3, "S": 3, "stride": 1, "pad": 1, "dil": 1}
            like = tuple(v * base for v in versions)
            dims = {**fixed, "H": tl.Dim(base, 8 * base, like=like), "W": tl.Dim(base, 8 * base, like=like)}

            def sizes_at(size, fixed=fixed):
                return {**fixed, "H": size, "W": size}
        else:
            sys.exit(f"--workload: unknown workload {name!r} (matmul or conv2d)")
        symbolic = tl.build(op, **dims, schedule=args.schedule)
        built = compiles[0]
        for s in scales:
            sizes = sizes_at(s * base)
            special = tl.build(op, **sizes, schedule=args.schedule)
            inputs = w.make_inputs(sizes, rng)
            want = w.reference(*inputs, **sizes).astype(np.float64)
            for label, k in (("symbolic", symbolic), ("specialized", special)):
                got = k(*inputs)
                err = float(np.max(np.abs(got.astype(np.float64) - want))) / max(float(np.sqrt(np.mean(want ** 2))),
                                                                                1e-30)
                if not err <= 1e-4:  # NaN fails too
                    sys.exit(f"{name} at {s}x: the {label} kernel is wrong (max error {err:.3g} of the rms)")
            compiles_before = compiles[0]
            times = {"symbolic": [], "specialized": []}
            for _ in range(args.rounds):
                for label, k in (("symbolic", symbolic), ("specialized", special)):
                    times[label] += measure(lambda k=k, inputs=inputs: k(*inputs), min_runs=args.min_runs)
            if compiles[0] != compiles_before:
                sys.exit(f"{name} at {s}x: a kernel compiled while being timed")
            t_sym, t_spec = median(times["symbolic"]), median(times["specialized"])
            symbolic_sizes = {k: v for k, v in sizes.items() if isinstance(dims[k], tl.Dim)}
            version = symbolic.versions[symbolic.version_for(symbolic_sizes)]  # the one this size runs
            version_scale = next(iter(version.sizes[n] for n in symbolic_sizes)) // base
            rows.append({"workload": name, "scale": s, "version_scale": version_scale, "sizes": symbolic_sizes,
                         "symbolic_s": t_sym,
                         "specialized_s": t_spec, "ratio": t_spec / t_sym})
        if compiles[0] - built != len(scales):
            sys.exit(f"{name}: the symbolic build compiled again ({compiles[0] - built} compilations for "
                     f"{len(scales)} specialized builds)")
    return rows


if __name__ == "__main__":
    sys.exit(main())
