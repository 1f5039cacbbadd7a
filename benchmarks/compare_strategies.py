"""Search strategies on replay of the shipped datasets: the research kit's bars, measured in one run.

For each dataset, 4 strategies x 10 seeds x 200 trials through ``tuner.compare`` (the same code as
``tensorlang compare``), on all CPUs. Prints the comparison table, the wall time of the whole comparison (bar:
at most 2 minutes) and, per dataset, xgb-genetic's median trials to 95% of the best known over random's (bar on
conv2d: at most 0.5). ``--plot DIR`` writes one PNG per dataset.

Run with nothing else on the machine: ``.venv/bin/python benchmarks/compare_strategies.py [--plot docs]``.
"""
from __future__ import annotations

import argparse
import math
import os
import pathlib
import time

from tensorlang.tuner.records.dataset import Dataset
from tensorlang.tuner.research.comparison import compare

ROOT = pathlib.Path(__file__).resolve().parents[1]
STRATEGIES = ["random", "genetic", "bayesian", "xgb-genetic"]


def trials_ratio(xgb: float, rnd: float, trials: int) -> str:
    """The ratio of two medians of trials to a mark, as text. Where random never reached it (inf), the ratio is
    only known to be below ``xgb / trials`` (random would have needed more than ``trials``): said as a bound,
    never as a ratio of 0.

    >>> trials_ratio(40, 100, 200)
    '40 / 100 = 0.40'
    >>> trials_ratio(40, math.inf, 200)
    '40 / more than 200 < 0.20 (random did not reach it in 200 trials: an upper bound)'
    >>> trials_ratio(math.inf, math.inf, 200)
    'neither reached it in 200 trials: no ratio'
    """
    if math.isfinite(rnd):
        return f"{xgb:.0f} / {rnd:.0f} = {xgb / rnd:.2f}" if math.isfinite(xgb) else \
            f"xgb-genetic did not reach it in {trials} trials, random in {rnd:.0f}"
    if math.isfinite(xgb):
        return (f"{xgb:.0f} / more than {trials} < {xgb / trials:.2f} (random did not reach it in {trials} trials: "
                "an upper bound)")
    return f"neither reached it in {trials} trials: no ratio"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="conv2d_resnet18_3x3.csv,matmul_512.csv")
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--plot", help="folder for one PNG per dataset")
    args = ap.parse_args()
    for name in args.datasets.split(","):
        ds = Dataset.load(str(ROOT / "datasets" / name))
        t0 = time.perf_counter()
        result = compare(STRATEGIES, args.trials, args.seeds, replay=ds, jobs=args.jobs)
        wall = time.perf_counter() - t0
        print(f"\n== {name}: {len(STRATEGIES)} strategies x {args.seeds} seeds x {args.trials} trials, "
              f"{args.jobs} processes: {wall:.1f} s (bar: 120 s)")
        print(result.table())
        s = result.stats()
        xgb, rnd = s["xgb-genetic"]["trials_to_95"], s["random"]["trials_to_95"]
        print(f"xgb-genetic / random, median trials to 95% of the best known: "
              f"{trials_ratio(xgb, rnd, args.trials)} (bar on conv2d: <= 0.5)")
        if args.plot:
            path = os.path.join(args.plot, f"compare_{name.removesuffix('.csv')}.png")
            result.plot(path)
            print(f"plot: {path}")


if __name__ == "__main__":
    main()
