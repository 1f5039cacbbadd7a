"""The kernel commands of the ``tensorlang`` command line: ``ops``, ``run``, ``bench`` and ``show``.

    tensorlang ops [--json]                               workloads and their size presets
    tensorlang run WORKLOAD [--preset P | --size K=V,...]  compile, run, check against numpy, time it
    tensorlang bench WORKLOAD [--threads N]                default vs hand schedule vs numpy, one table
    tensorlang show WORKLOAD [--ir | --llvm | --asm]       the loop IR or generated code

Example::

    tensorlang run conv2d --preset resnet18_3x3
"""
from __future__ import annotations

import sys
import time

from .common import (
    DB_DEFAULT,
    SCHEDULE_SOURCES,
    CLIError,
    add_common,
    best_record,
    check_threads_flag,
    check_timing_flags,
    record_schedule,
    seed_value,
    workload_and_sizes,
)


def register(subparsers) -> None:
    """Add ``ops``, ``run``, ``bench`` and ``show`` to the ``tensorlang`` parser's ``subparsers``.

    >>> import argparse
    >>> sub = argparse.ArgumentParser().add_subparsers(dest="command")
    >>> register(sub)
    >>> sorted(sub.choices)
    ['bench', 'ops', 'run', 'show']
    """
    from tensorlang.tuner.bench import BENCH_ROUNDS, BENCH_RUNS, BENCH_SECONDS
    sub = subparsers
    o = sub.add_parser("ops", help="list workloads and their size presets")
    add_common(o, sizes=False)
    o.add_argument("--spaces", action="store_true", help="also show each workload's search space and its size")
    r = sub.add_parser("run", help="compile a workload, run it, check it against numpy and time it")
    add_common(r)
    r.add_argument("--repeat", type=int, default=10, help="at least this many timed runs (default 10)")
    r.add_argument("--min-time", type=float, default=0.2, help="and at least this many seconds (default 0.2)")
    r.add_argument("--seed", type=seed_value, default=0, help="seed of the random inputs")
    b = sub.add_parser("bench", help="time the naive loop nest, the auto-scheduler's pick, the hand and tuned "
                                     "schedules, numpy and PyTorch in one table, in interleaved rounds")
    add_common(b)
    b.add_argument("--threads", type=int, help="threads for tensorlang and OpenBLAS (default: all CPUs)")
    b.add_argument("--repeat", type=int, default=BENCH_RUNS,
                   help=f"at least this many timed runs each (default {BENCH_RUNS})")
    b.add_argument("--min-time", type=float, default=BENCH_SECONDS,
                   help=f"and at least this many seconds each (default {BENCH_SECONDS:g})")
    b.add_argument("--rounds", type=int, default=BENCH_ROUNDS,
                   help="rounds, each row timed once a round, so that a slow spell hits every row "
                        f"(default {BENCH_ROUNDS})")
    b.add_argument("--db", help=f"tuning database whose best record is timed too {DB_DEFAULT}")
    s = sub.add_parser("show", help="print the loop IR (default), LLVM IR or assembly")
    add_common(s)
    g = s.add_mutually_exclusive_group()
    g.add_argument("--ir", action="store_true", help="the loop IR (default)")
    g.add_argument("--llvm", action="store_true", help="the optimised LLVM IR")
    g.add_argument("--asm", action="store_true", help="the assembly")
    s.add_argument("--best", action="store_true", help="the best tuned schedule")
    s.add_argument("--schedule", choices=("auto", "naive", "hand", "tuned"),
                   help="which schedule (default: the one tl.build chooses: tuned, else hand, else auto)")
    s.add_argument("--db", help="tuning database for --best")
    o.set_defaults(func=cmd_ops)
    r.set_defaults(func=cmd_run)
    b.set_defaults(func=cmd_bench)
    s.set_defaults(func=cmd_show)


def cmd_ops(args) -> dict:
    """`tensorlang ops`: every workload with its description and size presets (with --spaces, also its search
    space at the default preset); prints them unless --json. Returns {"workloads": [one dict per workload]}.

    >>> from tensorlang.cli.main import make_parser
    >>> workloads = cmd_ops(make_parser().parse_args(["ops", "--json"]))["workloads"]
    >>> workloads[0]["workload"], workloads[0]["presets"]["small"]
    ('matmul', {'M': 64, 'N': 48, 'K': 32})
    """
    from tensorlang import schedules
    rows = []
    for w in schedules.WORKLOADS.values():
        row = {"workload": w.name, "description": w.description, "default_preset": w.default_preset,
               "presets": w.presets}
        if args.spaces and w.space is not None:
            space = w.space(w.sizes())
            row["space"] = {"knobs": {k.name: list(k.values) for k in space.knobs}, "size": space.size,
                            "allowed": space.allowed_size}
            row["space_text"] = space.describe()
        rows.append(row)
    if not args.json:
        for r in rows:
            print(f"{r['workload']:<18} {r['description']}")
            for name, sizes in r["presets"].items():
                mark = "*" if name == r["default_preset"] else " "
                print(f"  {mark} {name:<16} {', '.join(f'{k}={v}' for k, v in sizes.items())}")
            if "space_text" in r:
                print("    " + r["space_text"].replace("\n", "\n    ") + "  (at the default preset)")
        print("\n(* default preset)  run one: tensorlang run conv2d --preset resnet18_3x3"
              + ("" if args.spaces else "; search spaces: tensorlang ops --spaces"))
    for r in rows:
        r.pop("space_text", None)
    return {"workloads": rows}


def cmd_run(args) -> dict:
    """`tensorlang run`: build the workload with the default schedule, run it on random inputs (--seed), check the
    result against the numpy reference (a built-in workload's own, or numpy's evaluation of a user's program:
    :func:`tensorlang.reference`) at the tolerance of its dtype and reduction length, and time at least --repeat
    runs and --min-time seconds. Returns the sizes, compile time, median time, GFLOPS, error and tolerance; a
    result that does not match raises CLIError.

    >>> from tensorlang.cli.main import make_parser
    >>> args = make_parser().parse_args(["run", "matmul", "--size", "M=4,N=4,K=4", "--repeat", "1", "--min-time", "0",
    ...                                  "--json"])
    >>> cmd_run(args)["matches_numpy"]
    True
    """
    import numpy as np

    import tensorlang as tl

    check_timing_flags(args)
    w, sizes = workload_and_sizes(args)
    op = tl.op(w.source)
    t0 = time.perf_counter()
    kernel = tl.build(op, **sizes)
    compile_s = time.perf_counter() - t0
    inputs = w.make_inputs(sizes, np.random.default_rng(args.seed))
    out = kernel(*inputs)
    times = []
    deadline = time.perf_counter() + args.min_time
    while len(times) < args.repeat or time.perf_counter() < deadline:
        t = time.perf_counter()
        kernel(*inputs)
        times.append(time.perf_counter() - t)
    median = float(np.median(times))
    check = w.check(out, w.reference(*inputs, **sizes), sizes)
    gflops = w.flops(sizes) / median / 1e9
    result = {"workload": w.name, "sizes": sizes, "schedule": kernel.schedule_source, "compile_s": compile_s,
              "median_s": median, "gflops": gflops, "runs": len(times), "max_rel_error": check.error,
              "tolerance": check.tolerance, "matches_numpy": check.ok}
    if not args.json:
        print(f"{w.name} ({', '.join(f'{k}={v}' for k, v in sizes.items())})")
        print(f"  compiled in {compile_s * 1000:.0f} ms ({SCHEDULE_SOURCES[kernel.schedule_source]}, "
              f"{kernel.target.cpu})")
        print(f"  median of {len(times)} runs (public calls, outputs allocated): {median * 1000:.3f} ms, "
              f"{gflops:.2f} GFLOPS")
        print(f"  {check.describe()}")
    if not check.ok:
        raise CLIError(f"{w.name}: the result {check.describe()}")
    return result


def cmd_bench(args) -> dict:
    """`tensorlang bench`: time the naive loop nest, the auto-scheduler's pick, the hand schedule, the best tuned
    record of --db (if any), numpy and PyTorch on --threads threads in --rounds interleaved rounds (see
    :func:`tensorlang.tuner.bench.run_bench`) and print the table; a kernel whose result differs from the reference
    raises CLIError. Returns the bench report.

    Example::

        tensorlang bench conv2d --threads 2
        cmd_bench(make_parser().parse_args(["bench", "conv2d", "--threads", "2", "--json"]))["results"]
    """
    from tensorlang.tuner.bench import format_table, run_bench
    check_timing_flags(args)
    w, sizes = workload_and_sizes(args)
    check_threads_flag(args.threads)
    threads = args.threads or __import__("tensorlang.threadpool", fromlist=["x"]).num_threads()
    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else (lambda *a: None)
    extra = []
    if w.space is not None:
        task, rec, path = best_record(w, sizes, threads, args.db)
        if rec is not None:
            extra.append(("tuned", record_schedule(rec, task.op, path)))
    if args.rounds < 1:
        raise CLIError(f"--rounds: must be at least 1, got {args.rounds}")
    report = run_bench(w, sizes, threads, min_runs=args.repeat, min_time=args.min_time, extra=extra, log=log,
                       rounds=args.rounds)
    if not args.json:
        print(format_table(report))
    bad = [f"{r['name']} ({r['mismatch']})" for r in report["results"] if not r["matches_reference"]]
    if bad:
        raise CLIError(f"{w.name}: {', '.join(bad)} do{'es' * (len(bad) == 1)} not match the numpy reference")
    return report


def cmd_show(args) -> dict:
    """`tensorlang show`: the workload's loop IR (default), optimised LLVM IR (--llvm) or assembly (--asm), for the
    schedule `tl.build` chooses (tuned, else hand, else the auto-scheduler's pick; ``--schedule`` asks for one),
    or with --best the best tuned one; printed unless --json (with a first line saying which schedule), and
    returned under "text" with the schedule's source under "schedule".

    >>> from tensorlang.cli.main import make_parser
    >>> args = make_parser().parse_args(["show", "matmul", "--size", "M=2,N=3,K=4", "--schedule", "naive", "--json"])
    >>> print(cmd_show(args)["text"])
    def matmul(A: f32[2, 4], B: f32[4, 3], C: f32[2, 3]):
      for i in 0:2:
        for j in 0:3:
          C[i, j] = 0f
          for k in 0:4:
            C[i, j] = C[i, j] + A[i, k]*B[k, j]
    """
    import tensorlang as tl
    from tensorlang.choice import choose_schedule
    if args.db is not None and not args.best:
        raise CLIError("--db: only with --best (the database whose best record is shown)")
    if args.best and args.schedule:
        raise CLIError("--schedule: not with --best (which shows the best tuned record)")
    w, sizes = workload_and_sizes(args)
    op = tl.op(w.source)
    kind = "llvm" if args.llvm else "asm" if args.asm else "ir"
    try:
        s, source = choose_schedule(op, sizes, schedule=args.schedule)
    except tl.BuildError as e:
        raise CLIError(f"--schedule: {e}") from None
    if args.best:
        source = "tuned"
        task, rec, path = best_record(w, sizes, None, args.db)
        if rec is None:
            where = f" --preset {args.preset}" if args.preset else f" --size {args.size}" if args.size else ""
            raise CLIError(f"--best: no tuning record for {task.describe()} in {path}; "
                           f"run: tensorlang tune {w.name}{where} --trials 100")
        s = record_schedule(rec, op, path)
    text = s.lower() if kind == "ir" else tl.build(s).source(kind)
    if not args.json:
        print(f"# schedule: {source} ({SCHEDULE_SOURCES[source]})")
        print(text)
    return {"workload": w.name, "sizes": sizes, "kind": kind, "schedule": source, "text": text}
