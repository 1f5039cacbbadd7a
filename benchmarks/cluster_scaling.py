"""Distributed tuning: measured candidates per second against the number of Dask workers.

    python benchmarks/cluster_scaling.py real [--workload conv2d] [--preset P] [--trials 96] [--strategy random]
                                              [--cores 0,1] [--json]
    python benchmarks/cluster_scaling.py simulated [--workers 1,4,16,64] [--sleep 1.0] [--rounds 8]
                                                   [--strategy xgb-genetic] [--procs 8] [--batch 16] [--json]
    python benchmarks/cluster_scaling.py all ...

(a) ``real``: a local ``dask scheduler`` and one ``dask worker`` pinned to one core (``--cores``' first), then two
workers each pinned to a core of its own; each setup tunes the workload (one thread per kernel) from an empty
database with the same strategy and seed. With ``random`` (the default) both setups measure the same configs, so
their best must be the same config and time within timing noise. Each worker first measures two configs that are
not part of the run (it starts its build and run processes and computes the reference output), so the rate is
that of the tuning loop. Reported: measured candidates per second, the speedup of two workers over one (the bar:
1.7x), and the best of each setup. The tuner's own process and the scheduler run on the same machine: give a
quiet machine with a core more than the workers need.

(b) ``simulated``: every measurement is a fixed sleep (``--sleep`` seconds, no build; the time answered depends
on the config only), on N measuring slots for N in ``--workers``: min(N, ``--procs``) ``dask worker`` processes
sharing the slots (``--nthreads K --resources measure=K``), since a sleep needs no core. The tuner runs its real
loop (the strategy, its cost model and the loop-IR features of every config it scores, the database commits),
``--rounds`` rounds of N candidates. Reported per N: candidates per second, the ideal N / sleep, the efficiency
(the bar: 0.8 at every N), and where the tuner's time went: proposing and observing (strategy, cost model,
features), committing, and waiting for results. ``loop capacity`` is the candidates per second the loop could
take if measurements were free: where N / sleep comes near it, the loop stops keeping up. ``CPU/cand.`` is the
tuner process's CPU time per candidate (all its threads): 1000 / it is the most candidates per second one free
core can drive, a figure that a busy machine changes less than the wall times.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))  # dask_cluster.py starts and stops the local scheduler and workers

from dask_cluster import LocalDask  # noqa: E402

from tensorlang.tuner.measure.cluster import Cluster, ClusterOptions, DaskRunner  # noqa: E402
from tensorlang.tuner.records.database import Database  # noqa: E402
from tensorlang.tuner.task import Task  # noqa: E402
from tensorlang.tuner.tuning import Tuner  # noqa: E402


class _TimedTuner(Tuner):
    """A Tuner that adds up the seconds its commits take (database writes and bookkeeping)."""

    commit_s = 0.0

    def _commit(self, summary, r, strategy):
        t0 = time.perf_counter()
        try:
            return super()._commit(summary, r, strategy)
        finally:
            self.commit_s += time.perf_counter() - t0


def real_run(workers: int, cores: list[int], args, folder: pathlib.Path) -> dict:
    """Tune on ``workers`` local workers, each pinned to one core; the run's rate and best."""
    task = Task.create(args.workload, preset=args.preset, threads=1)
    with LocalDask(folder / f"dask-{workers}") as dk:
        dk.start_scheduler()
        for i in range(workers):
            dk.start_worker(f"w{i}", cpu=cores[i])
        dk.wait_for_workers(workers)
        with Cluster(dk.address, ClusterOptions(timeout=60)) as cluster:
            runner = DaskRunner(task, cluster, seed=args.seed)
            space = task.space
            warm = [space.config_at((space.size // 2 + 7919 * i) % space.size) for i in range(64)]
            warm = [c for c in warm if space.allowed(c)][: 2 * workers]
            runner.measure(warm)  # every worker has started its processes and computed the reference output
            runner.measured_by.clear()
            db = Database(folder / f"real-{workers}.db")
            tuner = _TimedTuner(task, args.trials, args.strategy, seed=args.seed, db=db, runner=runner,
                                retime_top=0)
            t0 = time.perf_counter()
            summary = tuner.run()
            wall = time.perf_counter() - t0
            db.close()
    best = summary.best
    return {"workers": workers, "cores": cores[:workers], "trials": summary.trials_done, "valid": summary.valid,
            "wall_s": wall, "per_s": summary.trials_done / wall,
            "best_gflops": best.gflops if best else None, "best_config": best.config_key() if best else None,
            "measured_by": dict(runner.measured_by), "phase_s": summary.phase_s, "commit_s": tuner.commit_s}


def real(args, folder: pathlib.Path) -> dict:
    cores = [int(c) for c in args.cores.split(",")]
    if len(cores) < 2:
        raise SystemExit("--cores: name two cores, one per worker (say 0,1)")
    one = real_run(1, cores, args, folder)
    two = real_run(2, cores, args, folder)
    out = {"workload": args.workload, "preset": args.preset, "strategy": args.strategy, "one": one, "two": two,
           "speedup": two["per_s"] / one["per_s"],
           "same_best_config": one["best_config"] == two["best_config"],
           "best_ratio": (two["best_gflops"] / one["best_gflops"]) if one["best_gflops"] else None}
    if not args.json:
        print(f"(a) {args.workload} ({args.preset or 'default preset'}), {args.strategy}, {args.trials} trials, "
              "one thread per kernel")
        for r in (one, two):
            print(f"  {r['workers']} worker(s) on cores {r['cores']}: {r['per_s']:.2f} measured/s "
                  f"({r['trials']} in {r['wall_s']:.1f} s, {r['valid']} valid), best {r['best_gflops']:.2f} GFLOPS; "
                  f"by worker {sorted(r['measured_by'].values())}")
        print(f"  speedup {out['speedup']:.2f}x (bar: 1.7x); same best config: {out['same_best_config']}, "
              f"best two/one {out['best_ratio']:.3f}")
    return out


def simulated_run(n: int, args, folder: pathlib.Path) -> dict:
    """The tuner's loop against ``n`` measuring slots whose measurements are sleeps."""
    task = Task.create(args.workload, preset=args.preset, threads=1)
    procs = min(n, args.procs)
    slots = [n // procs + (i < n % procs) for i in range(procs)]
    with LocalDask(folder / f"sim-{n}") as dk:
        dk.start_scheduler()
        for i, k in enumerate(slots):
            dk.start_worker(f"s{i}", nthreads=k, resources=f"measure={k}")
        dk.wait_for_workers(procs)
        with Cluster(dk.address, ClusterOptions(timeout=60)) as cluster:
            runner = DaskRunner(task, cluster, seed=args.seed, simulate=args.sleep)
            assert runner.parallelism == n, (runner.parallelism, n)
            db = Database(folder / f"sim-{n}.db")
            trials = args.rounds * n
            tuner = _TimedTuner(task, trials, args.strategy, seed=args.seed, db=db, runner=runner, retime_top=0,
                                batch=args.batch)
            t0, c0 = time.perf_counter(), time.process_time()
            summary = tuner.run()
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            db.close()
    ph = summary.phase_s
    busy = ph.get("propose", 0.0) + tuner.commit_s
    return {"workers": n, "processes": procs, "trials": summary.trials_done, "wall_s": wall,
            "per_s": summary.trials_done / wall, "ideal_per_s": n / args.sleep,
            "efficiency": summary.trials_done / wall / (n / args.sleep),
            "propose_s": ph.get("propose", 0.0), "commit_s": tuner.commit_s, "wait_s": ph.get("wait", 0.0),
            "loop_capacity_per_s": summary.trials_done / busy if busy > 0 else None,
            "cpu_s": cpu, "cpu_ms_per_candidate": 1e3 * cpu / max(1, summary.trials_done)}


def simulated(args, folder: pathlib.Path) -> dict:
    runs = [simulated_run(int(n), args, folder) for n in args.workers.split(",")]
    base = runs[0]["per_s"] / runs[0]["workers"]
    for r in runs:
        r["speedup"] = r["per_s"] / base
    out = {"workload": args.workload, "strategy": args.strategy, "sleep_s": args.sleep, "rounds": args.rounds,
           "batch": args.batch, "runs": runs}
    if not args.json:
        print(f"(b) simulated measurements of {args.sleep:g} s, {args.workload}, {args.strategy}, {args.rounds} x N "
              f"trials, rounds of max(N, {args.batch})")
        print(f"  {'N':>4} {'procs':>5} {'per s':>8} {'ideal':>8} {'eff.':>6} {'speedup':>8} {'propose':>8} "
              f"{'commit':>7} {'wait':>7} {'loop cap./s':>11} {'CPU/cand.':>9}")
        for r in runs:
            cap = f"{r['loop_capacity_per_s']:.0f}" if r["loop_capacity_per_s"] else "-"
            print(f"  {r['workers']:>4} {r['processes']:>5} {r['per_s']:>8.2f} {r['ideal_per_s']:>8.2f} "
                  f"{r['efficiency']:>6.2f} {r['speedup']:>7.1f}x {r['propose_s']:>7.1f}s {r['commit_s']:>6.1f}s "
                  f"{r['wait_s']:>6.1f}s {cap:>11} {r['cpu_ms_per_candidate']:>7.1f}ms")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=("real", "simulated", "all"))
    p.add_argument("--workload", default="conv2d")
    p.add_argument("--preset", default=None, help="size preset (default: the workload's)")
    p.add_argument("--strategy", default=None, help="default: random for real, xgb-genetic for simulated")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trials", type=int, default=96, help="real: trials per setup")
    p.add_argument("--cores", default="0,1", help="real: the cores of the two workers")
    p.add_argument("--workers", default="1,4,16,64", help="simulated: numbers of measuring slots")
    p.add_argument("--sleep", type=float, default=1.0, help="simulated: seconds per measurement")
    p.add_argument("--rounds", type=int, default=8, help="simulated: trials = rounds x N")
    p.add_argument("--procs", type=int, default=8, help="simulated: most worker processes")
    p.add_argument("--batch", type=int, default=16,
                   help="simulated: the tuner's --batch (a round is at least the number of slots)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    out = {}
    with tempfile.TemporaryDirectory(prefix="tensorlang-cluster-bench-") as tmp:
        folder = pathlib.Path(tmp)
        strategy = args.strategy
        if args.what in ("real", "all"):
            args.strategy = strategy or "random"
            out["real"] = real(args, folder)
        if args.what in ("simulated", "all"):
            args.strategy = strategy or "xgb-genetic"
            out["simulated"] = simulated(args, folder)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TENSORLANG_NUM_THREADS", "1")
    sys.exit(main())
