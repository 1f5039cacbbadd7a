"""The auto-scheduler's bars, each part in one run with its baselines:

    python benchmarks/autoschedule.py [--parts peak,builtins,resnet,programs,speed] [--trials 200] [--threads 2]
                                      [--workloads matmul,conv2d] [--layers '3x3 56,3x3/2 56->28']
                                      [--resnet-threads 1,2] [--db bench.db] [--seed 0] [--json out.json]

- peak: the FMA peak on 1 and 2 threads (benchmarks/fma_peak.py's kernel), read at the start and at the end;
- builtins: each workload at its default preset tuned --trials in the generated space and in the hand-written
  space, each from its own start configuration (the zero-trial pick's, the hand schedule's), same seed; then both
  bests, the zero-trial pick and numpy timed side by side in interleaved rounds. matmul and conv2d also as a share
  of the FMA peak;
- resnet: ResNet-18's 11 distinct convolutions (batch 1, 224 x 224) tuned --trials each in the generated space, then
  timed against PyTorch's F.conv2d (oneDNN) in interleaved rounds, on 1 and 2 threads;
- programs: six programs that are not in schedules/ (benchmarks/program_baselines.py) tuned --trials, against the
  faster of numpy and PyTorch, with the zero-trial pick and the naive loop nest;
- speed: `tensorlang tune conv2d --trials 500` from an empty database: wall time and candidates measured a second.

Tuning records go to --db (default: benchmarks/autoschedule.db next to this script), so that a run interrupted resumes.
Run it with nothing else on the machine: it times kernels. Every row of every part is timed through its public call with
outputs allocated (tensorlang.tuner.bench.contract) and its output is checked against the numpy reference first: a row
that does not match is reported as wrong and no ratio is computed from it.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import tensorlang as tl  # noqa: E402
from tensorlang import schedules  # noqa: E402
from tensorlang.choice import auto_schedule  # noqa: E402
from tensorlang.threadpool import num_threads  # noqa: E402
from tensorlang.tuner.bench import (  # noqa: E402
    KernelRow,
    LibraryRow,
    WorkerRow,
    avx512_coretype,
    library_env,
    library_processes,
    time_interleaved,
)
from tensorlang.tuner.measure.disturbance import Tally  # noqa: E402
from tensorlang.tuner.measure.local import MeasureOptions  # noqa: E402
from tensorlang.tuner.records.database import Database  # noqa: E402
from tensorlang.tuner.task import Task  # noqa: E402
from tensorlang.tuner.tuning import Tuner, hand_start_configs, start_name  # noqa: E402

RESNET18_CONVS = {  # (C, F, H=W, R=S, stride, pad)
    "stem 7x7/2": (3, 64, 224, 7, 2, 3),
    "3x3 56": (64, 64, 56, 3, 1, 1),
    "3x3/2 56->28": (64, 128, 56, 3, 2, 1),
    "1x1/2 56->28": (64, 128, 56, 1, 2, 0),
    "3x3 28": (128, 128, 28, 3, 1, 1),
    "3x3/2 28->14": (128, 256, 28, 3, 2, 1),
    "1x1/2 28->14": (128, 256, 28, 1, 2, 0),
    "3x3 14": (256, 256, 14, 3, 1, 1),
    "3x3/2 14->7": (256, 512, 14, 3, 2, 1),
    "1x1/2 14->7": (256, 512, 14, 1, 2, 0),
    "3x3 7": (512, 512, 7, 3, 1, 1),
}


def fma_peak() -> dict:
    """GFLOPS of fma_peak.py's kernel on 1 and 2 threads (best of 3)."""
    import fma_peak
    return fma_peak.measure(5_000_000)


def tune(task: Task, trials: int, seed: int, db: Database, start: bool = True, log=print):
    """Tune `task` to `trials` records (resuming); the best record's schedule."""
    t0 = time.perf_counter()
    tuner = Tuner(task, trials, "xgb-genetic", "xgb", seed, db, None, MeasureOptions(),
                  start=hand_start_configs(task) if start else (), start_name=start_name(task))
    summary = tuner.run()
    log(f"    {task.describe()}, {task.space_used} space: {summary.trials_done} trials in "
        f"{time.perf_counter() - t0:.0f} s, best {summary.best_gflops or 0:.1f} GFLOPS (re-timed)")
    if summary.disturbance.note():
        log(f"    note: {summary.disturbance.note()}")
    return tl.Schedule.from_json(summary.best.schedule, task.op) if summary.best else None


def side_by_side(rows: list, flops: float, check, rounds: int = 5, log=print) -> dict:
    """Check each row's output with `check(outputs) -> tensorlang.compare.Comparison`, then time the rows
    interleaved; {name: {"gflops", "spread"}, "disturbance": {...}} (`log` gets a note when the machine was busy
    during rounds). SystemExit naming the row when an output does not match: a ratio against a wrong result means
    nothing."""
    tally = Tally(num_threads())
    try:
        for r in rows:
            out = r.first()
            result = check(out if not isinstance(out, list) else tuple(out))
            if not result.ok:
                raise SystemExit(f"{r.name}: {result.describe()}")
        timed = time_interleaved(rows, rounds, 20, 1.0, tally=tally)
    finally:
        for r in rows:
            r.close()
    if tally.note():
        log(f"    note: {tally.note()}")
    return {**{r.name: {"gflops": flops / t["median_s"] / 1e9, "spread": t["spread"]} for r, t in zip(rows, timed)},
            "disturbance": tally.to_json()}


def checker(w, inputs: list, sizes: dict):
    """`check` for :func:`side_by_side`: against the workload's numpy reference, computed once."""
    expected = w.reference(*inputs, **sizes)
    return lambda outputs: w.check(outputs, expected, sizes)


def with_threads(threads: int):
    os.environ["TENSORLANG_NUM_THREADS"] = str(threads)


def part_builtins(args, db, out, log):
    with_threads(args.threads)
    names = args.workloads.split(",") if args.workloads else list(schedules.WORKLOADS)
    out["builtins"] = {}
    for name in names:
        w = schedules.get(name)
        if w.space is None:
            continue
        log(f"  {name}")
        gen = Task.create(name, threads=args.threads, space="generated")
        hand = Task.create(name, threads=args.threads, space="hand")
        s_gen = tune(gen, args.trials, args.seed, db, log=log)
        # the hand-written space in a database of its own: in one database the generated space's records would
        # count as this search's trials (a task's records are shared by its spaces) and its best would be theirs
        with Database(os.path.splitext(args.db)[0] + "-hand.db") as hand_db:
            s_hand = tune(hand, args.trials, args.seed, hand_db, log=log)
        sizes = gen.sizes
        inputs = w.make_inputs(sizes, np.random.default_rng(0))
        rows = [KernelRow("generated", tl.build(s_gen), inputs), KernelRow("hand space", tl.build(s_hand), inputs),
                KernelRow("auto pick", tl.build(auto_schedule(gen.op, sizes, args.threads)), inputs),
                LibraryRow("numpy", w, sizes, inputs, args.threads, "numpy", avx512_coretype())]
        if w.hand_schedule is not None:
            hs = tl.schedule(gen.op, **sizes)
            w.hand_schedule(hs)
            rows.insert(2, KernelRow("hand schedule", tl.build(hs), inputs))
        res = side_by_side(rows, gen.flops, checker(w, inputs, sizes), log=log)
        res["ratio"] = res["generated"]["gflops"] / res["hand space"]["gflops"]
        out["builtins"][name] = res
        log(f"    generated {res['generated']['gflops']:.1f}, hand space {res['hand space']['gflops']:.1f} GFLOPS: "
            f"{res['ratio']:.2f}x")


def part_resnet(args, db, out, log):
    out["resnet"] = {}
    layers = args.layers or list(RESNET18_CONVS)
    for threads in args.resnet_threads:
        with_threads(threads)
        for label in layers:
            C, F, HW, RS, stride, pad = RESNET18_CONVS[label]
            sizes = {"N": 1, "C": C, "H": HW, "W": HW, "F": F, "R": RS, "S": RS, "stride": stride, "pad": pad,
                     "dil": 1}
            task = Task.create("conv2d", sizes=sizes, threads=threads, space="generated")
            log(f"  {label}, {threads} thread{'s' * (threads > 1)}")
            s = tune(task, args.trials, args.seed, db, log=log)
            w = schedules.get("conv2d")
            inputs = w.make_inputs(task.sizes, np.random.default_rng(0))
            rows = [KernelRow("tuned", tl.build(s), inputs),
                    KernelRow("auto pick", tl.build(auto_schedule(task.op, task.sizes, threads)), inputs),
                    LibraryRow("torch", w, task.sizes, inputs, threads, "torch")]
            res = side_by_side(rows, task.flops, checker(w, inputs, task.sizes), log=log)
            res["vs_torch"] = res["tuned"]["gflops"] / res["torch"]["gflops"]
            out["resnet"][f"{label}/{threads}"] = res
            log(f"    tuned {res['tuned']['gflops']:.1f} GFLOPS, torch {res['torch']['gflops']:.1f}: "
                f"{res['vs_torch']:.2f}x")


class ProgramRow(WorkerRow):
    """A library row for a program of program_baselines.py (numpy or torch, the fastest of
    ``bench.library_processes()`` worker processes)."""

    def __init__(self, name, program, inputs, threads, kind):
        super().__init__(name, "program_baselines:handler", {"program": program, "kind": kind, "threads": threads},
                         inputs, library_env(threads, avx512_coretype()), processes=library_processes())


def part_programs(args, db, out, log):
    from program_baselines import PROGRAMS

    from tensorlang.autosched.analysis import flop_count
    from tensorlang.schedules.program import program_workload, random_inputs
    with_threads(args.threads)
    out["programs"] = {}
    for name in args.programs.split(",") if args.programs else list(PROGRAMS):
        p = PROGRAMS[name]
        op = tl.op(p["source"])
        sizes = p["sizes"]
        log(f"  {name}: {p['what']}")
        task = Task.from_source(op, sizes, threads=args.threads)
        s = tune(task, args.trials, args.seed, db, log=log)
        inputs = random_inputs(op, sizes, np.random.default_rng(0))
        rows = [KernelRow("tuned", tl.build(s), inputs),
                KernelRow("auto pick", tl.build(auto_schedule(op, sizes, args.threads)), inputs),
                KernelRow("naive", tl.build(op, schedule="naive", **sizes), inputs),
                ProgramRow("numpy", name, inputs, args.threads, "numpy"),
                ProgramRow("torch", name, inputs, args.threads, "torch")]
        # every row, numpy's and torch's too, against numpy's evaluation of the program (tl.reference)
        res = side_by_side(rows, flop_count(op, sizes), checker(program_workload(p["source"], sizes), inputs, sizes),
                           log=log)
        best_lib = max(res["numpy"]["gflops"], res["torch"]["gflops"])
        res.update(vs_library=res["tuned"]["gflops"] / best_lib,
                   pick_vs_tuned=res["auto pick"]["gflops"] / res["tuned"]["gflops"],
                   pick_vs_naive=res["auto pick"]["gflops"] / res["naive"]["gflops"], heavy=p["heavy"],
                   what=p["what"])
        out["programs"][name] = res
        log(f"    tuned {res['tuned']['gflops']:.1f} GFLOPS, best of numpy/torch {best_lib:.1f} "
            f"({res['vs_library']:.2f}x); pick {res['pick_vs_tuned']:.2f}x tuned, {res['pick_vs_naive']:.0f}x naive")


def part_speed(args, out, log):
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "tensorlang.cli", "tune", "conv2d", "--trials", "500", "--db",
                            os.path.join(tmp, "speed.db"), "--json", "--threads", str(args.threads)],
                           capture_output=True, text=True)
        wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"tune failed: {r.stderr[-2000:]}")
    report = json.loads(r.stdout)
    out["speed"] = {"wall_s": wall, "measured_per_s": report["measured_per_s"], "tune_wall_s": report["wall_s"],
                    "best_gflops": report["best"]["best_gflops"], "phase_s": report["phase_s"]}
    log(f"  tune conv2d --trials 500: {wall:.0f} s wall, {report['measured_per_s']:.2f} measured per second")


def _thread_counts(text: str) -> tuple:
    """`--resnet-threads`: positive integers, comma-separated (argparse names the flag where one is not).

    >>> _thread_counts("1,2")
    (1, 2)
    """
    try:
        counts = tuple(int(t) for t in text.split(","))
    except ValueError:
        counts = ()
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give thread counts such as 1,2")
    return counts


def _layers(text: str) -> list:
    """`--layers`: labels of RESNET18_CONVS, comma-separated (argparse names the flag and the layers otherwise).

    >>> _layers("3x3 56,3x3 7")
    ['3x3 56', '3x3 7']
    """
    layers = text.split(",")
    unknown = [x for x in layers if x not in RESNET18_CONVS]
    if unknown:
        raise argparse.ArgumentTypeError(f"no layer {unknown[0]!r}; the layers: {', '.join(RESNET18_CONVS)}")
    return layers


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default="peak,builtins,resnet,programs,speed")
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workloads", help="builtins: these workloads only (comma-separated)")
    p.add_argument("--programs", help="programs: these programs only (comma-separated names of program_baselines.py)")
    p.add_argument("--layers", type=_layers, help="resnet: these layers only (comma-separated labels, as printed)")
    p.add_argument("--resnet-threads", type=_thread_counts, default=(1, 2),
                   help="resnet: the thread counts, comma-separated (default 1,2)")
    p.add_argument("--db", default=os.path.join(HERE, "autoschedule.db"))
    p.add_argument("--json", help="write the results to this file")
    args = p.parse_args()
    parts = args.parts.split(",")
    unknown = set(parts) - {"peak", "builtins", "resnet", "programs", "speed"}
    if unknown:
        p.error(f"--parts: unknown part {sorted(unknown)[0]!r}")
    if args.trials < 1 or args.threads < 1:
        p.error("--trials and --threads must be at least 1")
    if args.programs:
        from program_baselines import PROGRAMS
        unknown = [n for n in args.programs.split(",") if n not in PROGRAMS]
        if unknown:
            p.error(f"--programs: unknown program {unknown[0]!r} (known: {', '.join(PROGRAMS)})")
    out: dict = {"trials": args.trials, "threads": args.threads}
    log = print
    out["peak_before"] = fma_peak()
    log(f"FMA peak: {out['peak_before'][1]:.1f} GFLOPS on 1 thread, {out['peak_before'][2]:.1f} on 2")
    db = Database(args.db)
    try:
        for part in parts:
            if part == "peak":
                continue
            log(f"{part}:")
            if part == "builtins":
                part_builtins(args, db, out, log)
            elif part == "resnet":
                part_resnet(args, db, out, log)
            elif part == "programs":
                part_programs(args, db, out, log)
            elif part == "speed":
                part_speed(args, out, log)
    finally:
        db.close()
        out["peak_after"] = fma_peak()
        log(f"FMA peak after: {out['peak_after'][1]:.1f} GFLOPS on 1 thread, {out['peak_after'][2]:.1f} on 2")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1, default=str)
    if "builtins" in out:
        # the shares of the peak use the higher of the two readings: one taken in a slow spell of the machine
        # (20% lower has been seen) would flatter every share; readings further apart than 5% are reported as such
        before, after = out["peak_before"][args.threads], out["peak_after"][args.threads]
        peak = max(before, after)
        out["peak_used"] = peak
        if abs(before - after) > 0.05 * peak:
            log(f"the FMA peak readings differ by {abs(before - after) / peak * 100:.0f}% ({before:.1f} at the start, "
                f"{after:.1f} at the end): the machine was not steady, judge the shares below with care")
        for name in ("matmul", "conv2d"):
            if name in out["builtins"]:
                g = out["builtins"][name]["generated"]["gflops"]
                log(f"{name}: generated space's best at {g / peak * 100:.0f}% of the {args.threads}-thread FMA peak "
                    f"({peak:.1f} GFLOPS, the higher reading)")
        ratios = [v["ratio"] for v in out["builtins"].values()]
        log(f"builtins: generated / hand space, median {statistics.median(ratios):.2f}x, least {min(ratios):.2f}x")


if __name__ == "__main__":
    main()
