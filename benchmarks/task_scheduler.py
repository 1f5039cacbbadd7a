"""The task scheduler against round-robin: how many trials the gradient rule needs to reach the estimated end-to-end
latency that round-robin reaches with the whole budget (ResNet-18 by default; the median over seeds).

    python benchmarks/task_scheduler.py [--model resnet18] [--trials 2000] [--seeds 3] [--threads 2] [--batch 16]
                                        [--workdir DIR] [--json]

For each seed, ``tune_model`` runs twice from empty databases with the same settings (the default passes, transfer
on, no end-to-end timing): once with ``scheduler="round-robin"`` and once with the gradient rule. Round-robin's
final estimated latency (sum over tasks of calls x best time) is the target; the ratio is the trials the gradient
run needed to get there over round-robin's budget (a run that never gets there counts as 1.0 and is marked). The
bar: at most 0.6, the median over 3 seeds, ResNet-18, 2000 trials. It times kernels: run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))


def first_reaching(curve: list, target: float) -> int | None:
    """The trial count of the first point of `curve` ([(trials, latency)]) at or below `target` (None: never).

    >>> first_reaching([(0, 5.0), (16, 3.0), (32, 2.0)], 3.0)
    16
    """
    for trials, latency in curve:
        if latency <= target * (1 + 1e-12):
            return trials
    return None


def run(model, scheduler: str, seed: int, trials: int, threads: int, batch: int, db: str):
    """One tune_model run from an empty database; its summary."""
    from tuner.model_tuning import tune_model
    return tune_model(model, trials, scheduler=scheduler, seed=seed, threads=threads, batch=batch, db=db,
                      variants=False, measure=False, retime_top=0, progress=sys.stderr)


def main(argv=None) -> int:
    """Run both schedulers for every seed and print the ratios (or JSON).

    Example::

        python benchmarks/task_scheduler.py --trials 200 --seeds 1
    """
    import reference_models as R

    import tensorlang as tl
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--workdir", help="folder for the databases (default: a new temporary folder)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    os.environ["TENSORLANG_NUM_THREADS"] = str(args.threads)
    work = args.workdir or tempfile.mkdtemp(prefix="tensorlang-scheduler-")
    os.makedirs(work, exist_ok=True)
    module, inputs = R.MODELS[args.model]()
    model = tl.from_torch(module, inputs, pass_options={})  # the default passes for both arms
    results = []
    for seed in range(args.seeds):
        rr = run(model, "round-robin", seed, args.trials, args.threads, args.batch,
                 os.path.join(work, f"rr-{seed}.db"))
        gr = run(model, "gradient", seed, args.trials, args.threads, args.batch,
                 os.path.join(work, f"gradient-{seed}.db"))
        target = rr.curve[-1][1]
        reached = first_reaching(gr.curve, target)
        spent = rr.curve[-1][0]
        results.append({"seed": seed, "round_robin_s": target, "gradient_s": gr.curve[-1][1],
                        "gradient_trials_to_target": reached, "trials": spent,
                        "ratio": (reached if reached is not None else spent) / spent, "reached": reached is not None,
                        "round_robin_curve": rr.curve, "gradient_curve": gr.curve})
        print(f"seed {seed}: round-robin {target * 1e3:.3f} ms after {spent} trials; the gradient rule "
              + (f"got there after {reached} ({reached / spent:.2f}x)" if reached is not None else
                 f"did not get there ({gr.curve[-1][1] * 1e3:.3f} ms)"), file=sys.stderr, flush=True)
    median = statistics.median(r["ratio"] for r in results)
    out = {"model": args.model, "trials": args.trials, "threads": args.threads, "seeds": args.seeds,
           "results": results, "median_ratio": median, "workdir": work}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{'seed':>4} {'round-robin':>14} {'gradient':>12} {'trials to RR':>13} {'ratio':>6}")
    for r in results:
        to = r["gradient_trials_to_target"]
        print(f"{r['seed']:>4} {r['round_robin_s'] * 1e3:11.3f} ms {r['gradient_s'] * 1e3:9.3f} ms "
              f"{to if to is not None else '>' + str(r['trials']):>13} {r['ratio']:6.2f}")
    print(f"median over {args.seeds} seeds: the gradient rule reaches round-robin's {args.trials}-trial latency in "
          f"{median:.2f}x its trials (bar: at most 0.6x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
