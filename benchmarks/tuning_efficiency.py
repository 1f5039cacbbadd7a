"""Tuning efficiency: best GFLOPS after an equal trial budget, per strategy and seed, and the cost model's
ranking quality on held-out records.

    python benchmarks/tuning_efficiency.py [--workloads conv2d,matmul] [--strategies xgb-genetic,random]
                                           [--trials 64] [--seeds 3] [--threads 2] [--json]

Each (workload, strategy, seed) tunes from an empty database. The table gives the median over seeds of the best
GFLOPS, and the ratio of each strategy's median to random's. Then the records of all runs of a workload are split
(by run: the first seeds train, the last seed is held out) and every registered cost model is trained on the
training records and scored on the held-out ones (Spearman, NDCG@10, top-1 / top-5 hits, pairwise accuracy).
Run it on a quiet machine: it times kernels.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

from tensorlang.tuner.measure.local import MeasureOptions
from tensorlang.tuner.records.database import Database
from tensorlang.tuner.search.costmodel import COST_MODELS, make_cost_model, ranking_quality
from tensorlang.tuner.task import Task
from tensorlang.tuner.tuning import Tuner

PRESETS = {"matmul": "512", "conv2d": None}


def tune_once(workload: str, strategy: str, seed: int, trials: int, threads: int, folder: str) -> tuple:
    """Tune from an empty database; return (best GFLOPS, wall seconds, the Tuner) for one seed."""
    task = Task.create(workload, preset=PRESETS.get(workload), threads=threads)
    db = Database(os.path.join(folder, f"{workload}-{strategy}-{seed}.db"))
    tuner = Tuner(task, trials, strategy, "xgb", seed, db, None, MeasureOptions())
    summary = tuner.run()
    best = summary.best.gflops if summary.best else 0.0
    if summary.disturbance.note():
        print(f"  note: {summary.disturbance.note()}", file=sys.stderr)
    return best, summary.wall_s, tuner, db


def ranking_report(tuners_and_dbs: list, held_out_seed: int) -> dict:
    """Train each cost model on the records of every run but those of ``held_out_seed``; score the rest."""
    rows = {"train": ([], []), "test": ([], [])}
    for tuner, db, seed in tuners_and_dbs:
        records = db.records(tuner.task.key)
        best = max((r.gflops for r in records if r.ok), default=1.0)
        part = "test" if seed == held_out_seed else "train"
        for r in records:
            f = tuner.featurize(r.config)
            if f is not None:
                rows[part][0].append(f)
                rows[part][1].append(r.gflops / best if r.ok else 0.0)
    (xtr, ytr), (xte, yte) = rows["train"], rows["test"]
    out = {}
    for name in COST_MODELS:
        model = make_cost_model(name, seed=0)
        model.fit(np.array(xtr), np.array(ytr))
        out[name] = ranking_quality(np.array(yte), model.predict(np.array(xte)))
    out["rows"] = {"train": len(ytr), "test": len(yte)}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default="conv2d,matmul")
    p.add_argument("--strategies", default="xgb-genetic,random")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    report = {"trials": args.trials, "seeds": args.seeds, "threads": args.threads, "workloads": {}}
    with tempfile.TemporaryDirectory() as folder:
        for workload in args.workloads.split(","):
            per = {}
            runs = []
            for strategy in args.strategies.split(","):
                bests, walls = [], []
                for seed in range(args.seeds):
                    t0 = time.perf_counter()
                    best, wall, tuner, db = tune_once(workload, strategy, seed, args.trials, args.threads, folder)
                    bests.append(best)
                    walls.append(wall)
                    if strategy in ("xgb-genetic", "random"):
                        runs.append((tuner, db, seed))
                    print(f"{workload:<8} {strategy:<12} seed {seed}: best {best:7.1f} GFLOPS "
                          f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
                per[strategy] = {"best_gflops": bests, "median_best": statistics.median(bests),
                                 "wall_s": walls, "measured_per_s": args.trials / statistics.median(walls)}
            if "random" in per:
                for s in per.values():
                    s["ratio_to_random"] = s["median_best"] / per["random"]["median_best"]
            entry = {"strategies": per}
            if runs and args.seeds > 1:
                entry["ranking"] = ranking_report(runs, held_out_seed=args.seeds - 1)
            for _, db, _ in runs:
                db.close()
            report["workloads"][workload] = entry
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"best GFLOPS after {args.trials} trials, median over {args.seeds} seeds ({args.threads} threads)")
    for workload, entry in report["workloads"].items():
        for name, s in entry["strategies"].items():
            ratio = f"  {s['ratio_to_random']:.2f}x random" if "ratio_to_random" in s else ""
            print(f"  {workload:<8} {name:<12} {s['median_best']:7.1f}{ratio}   "
                  f"({s['measured_per_s']:.1f} measured/s; seeds: {', '.join(f'{b:.1f}' for b in s['best_gflops'])})")
        if "ranking" in entry:
            rk = entry["ranking"]
            print(f"  cost models on held-out records of {workload} ({rk['rows']['train']} train, "
                  f"{rk['rows']['test']} test):")
            for name in COST_MODELS:
                q = rk[name]
                print(f"    {name:<7} spearman {q['spearman']:.2f}  ndcg@10 {q['ndcg@10']:.2f}  top1 {q['top1']:.0f}  "
                      f"top5 {q['top5']:.0f}  pairwise {q['pairwise']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
