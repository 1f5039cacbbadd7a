"""The task scheduler against round-robin: how many trials the gradient rule needs to reach the estimated end-to-end
latency that round-robin reaches with the whole budget (ResNet-18 by default; the median over seeds).

    python benchmarks/task_scheduler.py [--model resnet18] [--trials 2000] [--seeds 3] [--threads 2] [--batch 16]
                                        [--workdir DIR] [--reuse] [--no-retime] [--json]

For each seed, ``tune_model`` runs twice from empty databases with the same settings (the default passes, transfer
on, no end-to-end timing): once with ``scheduler="round-robin"`` and once with the gradient rule (``--reuse``: a
run whose database in ``--workdir`` already holds ``--trials`` records is not run again). Each run's curve (the sum
over tasks of calls x best time, after each record that lowered a task's best) is rebuilt from its database
(``tensorlang.tuner.research.run_curves``) twice:

- with the times the run measured (the scheduler's own estimate);
- re-timed: every config that was ever a task's best in either run, timed again task by task in 3 interleaved
  rounds, both runs' configs side by side, and each point valued at those times. The two runs are made 10 minutes
  apart; a shared machine's speed drifts by several percent in that time (the same warm-up configs, identical in
  both runs, can time differently in each), which would decide the comparison.

Round-robin's final latency is the target; the ratio is the trials the gradient run needed to get there over
round-robin's budget (a run that never gets there counts as 1.0 and is marked). The bar: at most 0.6, the median
over 3 seeds of the re-timed ratio, ResNet-18, 2000 trials. It times kernels: run it on a quiet machine.

Beside each seed it prints the ceiling of any scheduler on round-robin's own run: the fewest trials in which some
allocation of rounds over the tasks reaches round-robin's final latency, each task's best after n trials read off
round-robin's records (``tensorlang.tuner.research.run_curves.hindsight_trials``), and round-robin's own latency at 0.6x
its trials.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))


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
    from tensorlang.tuner.model.tune import tune_model
    return tune_model(model, trials, scheduler=scheduler, seed=seed, threads=threads, batch=batch, db=db,
                      variants=False, measure=False, retime_top=0, progress=sys.stderr)


def main(argv=None) -> int:
    """Run both schedulers for every seed and print the ratios (or JSON).

    Example::

        python benchmarks/task_scheduler.py --trials 200 --seeds 1
    """
    import reference_models as R

    import tensorlang as tl
    from tensorlang.tuner.model.task_scheduler import round_size
    from tensorlang.tuner.model.tasks import model_tasks, profile_tasks
    from tensorlang.tuner.records.database import Database
    from tensorlang.tuner.research.run_curves import (
        best_steps,
        hindsight_trials,
        latency_curve,
        retime_steps,
        task_curves,
    )
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--trials", type=int, default=2000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--workdir", help="folder for the databases (default: a new temporary folder)")
    p.add_argument("--reuse", action="store_true", help="do not run again a run whose database holds --trials records")
    p.add_argument("--no-retime", action="store_true", help="compare the runs' own times only")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    os.environ["TENSORLANG_NUM_THREADS"] = str(args.threads)
    work = args.workdir or tempfile.mkdtemp(prefix="tensorlang-scheduler-")
    os.makedirs(work, exist_ok=True)
    module, inputs = R.MODELS[args.model]()
    model = tl.from_torch(module, inputs, pass_options={})  # the default passes for both arms
    tasks = model_tasks(model, args.threads)
    profile_tasks(model, tasks)
    weights = {t.task.key: t.weight for t in tasks}
    start_s = {t.task.key: t.seconds_now for t in tasks}
    results = []
    for seed in range(args.seeds):
        steps = {}
        for scheduler, name in (("round-robin", "rr"), ("gradient", "gradient")):
            db = os.path.join(work, f"{name}-{seed}.db")
            done = 0
            if args.reuse and os.path.exists(db):
                with Database(db, read_only=True) as d:
                    done = len(d.records())
            if done < args.trials:
                run(model, scheduler, seed, args.trials, args.threads, args.batch, db)
            steps[scheduler] = best_steps(db)
        row = {"seed": seed}
        values = [("own", None)]
        if not args.no_retime:
            print(f"seed {seed}: timing again the {sum(len(s) for s, _ in steps.values())} configs that were a "
                  f"task's best ...", file=sys.stderr, flush=True)
            values.append(("retimed", retime_steps(tasks, [s for s, _ in steps.values()])))
        for label, retimed in values:
            rr = latency_curve(steps["round-robin"][0], weights, start_s, retimed)
            gr = latency_curve(steps["gradient"][0], weights, start_s, retimed)
            spent = steps["round-robin"][1]
            target = rr[-1][1]
            reached = first_reaching(gr, target)
            row[label] = {"round_robin_s": target, "gradient_s": gr[-1][1], "gradient_trials_to_target": reached,
                          "trials": spent, "ratio": (reached if reached is not None else spent) / spent,
                          "reached": reached is not None, "round_robin_curve": rr, "gradient_curve": gr}
            if label == "own":
                ceiling = hindsight_trials(task_curves(os.path.join(work, f"rr-{seed}.db")), weights, target,
                                           round_size(args.batch, args.trials, len(tasks)))
                at = [lat for t, lat in rr if t <= 0.6 * spent][-1]
                row[label].update(hindsight_trials=ceiling, round_robin_at_0_6_s=at)
                print(f"seed {seed}: the ceiling on round-robin's own task curves: "
                      + (f"{ceiling} trials ({ceiling / spent:.2f}x)" if ceiling else "never")
                      + f"; round-robin itself at {int(0.6 * spent)} trials: {at * 1e3:.3f} ms "
                      f"({at / target - 1:+.1%})", file=sys.stderr, flush=True)
            print(f"seed {seed} ({label} times): round-robin {target * 1e3:.3f} ms after {spent} trials; the "
                  "gradient rule " + (f"got there after {reached} ({reached / spent:.2f}x)" if reached is not None
                                      else f"did not get there ({gr[-1][1] * 1e3:.3f} ms)"),
                  file=sys.stderr, flush=True)
        results.append(row)
    labels = [label for label in ("own", "retimed") if label in results[0]]
    medians = {label: statistics.median(r[label]["ratio"] for r in results) for label in labels}
    out = {"model": args.model, "trials": args.trials, "threads": args.threads, "seeds": args.seeds,
           "results": results, "median_ratio": medians[labels[-1]], "median_ratios": medians, "workdir": work}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{'seed':>4} {'times':>8} {'round-robin':>14} {'gradient':>12} {'trials to RR':>13} {'ratio':>6}")
    for r in results:
        for label in labels:
            x = r[label]
            to = x["gradient_trials_to_target"]
            print(f"{r['seed']:>4} {label:>8} {x['round_robin_s'] * 1e3:11.3f} ms {x['gradient_s'] * 1e3:9.3f} ms "
                  f"{to if to is not None else '>' + str(x['trials']):>13} {x['ratio']:6.2f}")
    for r in results:
        x = r["own"]
        print(f"seed {r['seed']}: a scheduler that knew round-robin's task curves in advance needs "
              f"{x['hindsight_trials'] or '>' + str(x['trials'])} trials to its latency; round-robin at 0.6x its "
              f"trials is {x['round_robin_at_0_6_s'] / x['round_robin_s'] - 1:+.1%} from it")
    for label in labels:
        print(f"median over {args.seeds} seeds ({label} times): the gradient rule reaches round-robin's "
              f"{args.trials}-trial latency in {medians[label]:.2f}x its trials (bar: at most 0.6x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
