"""Transfer between tasks: trials to 95% of each task's best, with and without the shared cost model, over the tasks
of a network (ResNet-18 by default).

    python benchmarks/transfer.py [--model resnet18] [--trials 128] [--tasks 0] [--threads 2] [--seed 0]
                                  [--batch 16] [--workdir DIR] [--reuse] [--no-retime] [--prior reuse] [--json]

The model's tasks (as ``tensorlang tasks`` lists them, the largest share of time first; ``--tasks N`` keeps the N
largest, 0 all) are tuned one after the other, ``--trials`` each, twice from empty databases:

- without transfer: each task's xgb-genetic search with a cost model of its own (random proposals until 8 of its
  configs are measured), as ``tensorlang tune`` does;
- with transfer: every task's search asks one shared model, trained on the records of the tasks tuned before it
  in this run and on the shipped datasets measured on this CPU, leaving out any dataset of one of the model's own
  tasks (those rows would be reuse of the task's own measurements, not transfer);
- ``--prior reuse`` adds a third arm, "with reuse": the shared model as ``tensorlang tune-model`` builds it by
  default, which keeps a dataset of the very task being tuned (where this CPU measured it), reported beside the
  transfer arm so the two are never confused.

Both measure the auto-scheduler's zero-trial pick first (``--reuse``: an arm whose database in ``--workdir`` holds
``--trials`` records of every task is not run again). After each trial of a task, each arm deploys its best config so
far; every config that was ever a task's best, in either arm, is timed again task by task, both arms' configs side by
side in 3 interleaved rounds (``tensorlang.tuner.research.run_curves.retime_steps``): the arms run many minutes apart,
and a shared machine's speed drifts by several percent in that time, as much as the 5% that "95%" allows. For each task
the reference best is the faster of the two arms' last deployed configs at those times; "trials to 95%" is the first
trial after which the arm's deployed config is within 1/0.95 of it (a run that never gets there counts its whole budget,
marked ``>``). ``--no-retime`` uses the times each arm measured instead. The speedup of a task is the trials without
transfer over the trials with it; the table ends with the median over tasks (the bar: at least 1.5x). It times kernels:
run it on a quiet machine, and read one run's ratios only.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))


def model_task_list(name: str, threads: int, limit: int):
    """The model's tasks, the largest share of a profile run first (the first `limit`; 0: all)."""
    import reference_models as R

    import tensorlang as tl
    from tensorlang.tuner.model.tasks import model_tasks, profile_tasks
    module, args = R.MODELS[name]()
    model = tl.from_torch(module, args)
    tasks = model_tasks(model, threads)
    profile_tasks(model, tasks)
    tasks.sort(key=lambda t: -t.weight * t.seconds_now)
    return tasks[:limit] if limit else tasks


def tune_tasks(tasks, db_path: str, prior: str | None, trials: int, batch: int, seed: int, jobs: int | None) -> None:
    """Tune each task for `trials` in order (a task that already holds them is skipped), records in `db_path`;
    `prior` None: no transfer; "transfer": a shared model whose prior leaves the model's own tasks out; "reuse":
    the prior as tune-model builds it."""
    from tensorlang.tuner.model.runners import LocalRunners
    from tensorlang.tuner.model.task_search import TaskSession
    from tensorlang.tuner.records.database import Database
    from tensorlang.tuner.search.transfer import SharedCostModel, default_datasets, describe_prior, prior_rows
    db = Database(db_path)
    shared = None
    if prior is not None:
        own = [(t.task.workload, t.task.sizes) for t in tasks] if prior == "transfer" else []
        rows = prior_rows(db, datasets=default_datasets(), exclude=own)
        print(f"  {prior} arm: prior {describe_prior(rows)}", file=sys.stderr)
        shared = SharedCostModel("xgb", seed, rows)
    factory = LocalRunners(jobs, seed=seed)
    for k, t in enumerate(tasks):
        session = TaskSession(t, db, "xgb-genetic", "xgb", seed, shared)
        if session.trials >= trials:
            continue
        runner = factory(t.task)
        t0 = time.perf_counter()
        try:
            while session.trials < trials:
                if session.run_round(min(batch, trials - session.trials), runner) == 0:
                    break
        finally:
            runner.close()
        best = "none valid" if session.best_s is None else f"{session.best_s * 1e3:.4f} ms"
        print(f"  {prior or 'no'} transfer arm: task {k} {t.name}: best {best} after "
              f"{session.trials} trials ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    db.close()


def valued(curve: list, retimed: dict | None) -> list[float]:
    """The time of each trial's deployed config: the arm's own, or with `retimed` its time measured again (a
    config missing there keeps the previous value; inf before the first).

    >>> from tensorlang.tuner.research.run_curves import BestStep
    >>> a, b = BestStep(1, "t", "x", {}, 3.0), BestStep(2, "t", "y", {}, 2.0)
    >>> valued([None, a, b, b], None), valued([None, a, b], {("t", "y"): 2.5})
    ([inf, 3.0, 2.0, 2.0], [inf, inf, 2.5])
    """
    out, last = [], float("inf")
    for s in curve:
        if s is not None:
            last = s.seconds if retimed is None else retimed.get((s.task_key, s.config_key), last)
        out.append(last)
    return out


def trials_to(curve: list, target: float) -> tuple[int, bool]:
    """(the first trial, counting from 1, after which the best-so-far time is at most `target`; whether it got
    there): a curve that never gets there gives its length and False.

    >>> trials_to([3.0, 2.0, 1.0], 2.0), trials_to([3.0, 2.5], 2.0)
    ((2, True), (2, False))
    """
    for i, v in enumerate(curve):
        if v <= target:
            return i + 1, True
    return len(curve), False


def main(argv=None) -> int:
    """Run both arms and print the table (or JSON).

    Example::

        python benchmarks/transfer.py --trials 32 --tasks 3
    """
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--trials", type=int, default=128, help="trials per task in each arm (default 128)")
    p.add_argument("--tasks", type=int, default=0, help="keep the N tasks with the largest share (0: all)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--batch", type=int, default=16, help="trials per round (default 16)")
    p.add_argument("--jobs", type=int, help="build processes (default: the CPU count)")
    p.add_argument("--workdir", help="folder for the two databases (default: a new temporary folder)")
    p.add_argument("--reuse", action="store_true", help="use the records already in --workdir's databases")
    p.add_argument("--no-retime", action="store_true", help="use the times each arm measured")
    p.add_argument("--prior", choices=("transfer", "reuse"), default="transfer",
                   help="reuse: also run an arm whose prior keeps the tuned tasks' own datasets (default: transfer "
                        "only)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    os.environ["TENSORLANG_NUM_THREADS"] = str(args.threads)
    work = args.workdir or tempfile.mkdtemp(prefix="tensorlang-transfer-")
    os.makedirs(work, exist_ok=True)
    tasks = model_task_list(args.model, args.threads, args.tasks)
    print(f"{args.model}: {len(tasks)} tasks, {args.trials} trials each, per arm; databases in {work}",
          file=sys.stderr)
    from tensorlang.tuner.research.run_curves import deployed_steps, retime_steps
    arms = {}
    plan = [("without", None), ("with", "transfer")] + ([("with reuse", "reuse")] if args.prior == "reuse" else [])
    for name, prior in plan:
        path = os.path.join(work, f"{name.replace(' ', '-')}.db")
        if not args.reuse and os.path.exists(path):
            raise SystemExit(f"transfer.py: {path} exists: pass --reuse to use its records, or another --workdir")
        tune_tasks(tasks, path, prior, args.trials, args.batch, args.seed, args.jobs)
        steps = deployed_steps(path)  # per task, after each of its trials, the config the arm would deploy
        arms[name] = [steps.get(t.key, []) for t in tasks]
    retimed = None
    if not args.no_retime:
        ever = [[x for curve in arm for x in curve if x is not None] for arm in arms.values()]
        n = len({(x.task_key, x.config_key) for e in ever for x in e})
        print(f"timing again the {n} configs that were a task's best ...", file=sys.stderr, flush=True)
        retimed = retime_steps(tasks, ever)
    rows = []
    names = list(arms)
    for k, t in enumerate(tasks):
        curves = {name: valued(arms[name][k], retimed) for name in names}
        best = min(c[-1] for c in curves.values())
        row = {"task": t.name, "weight": t.weight, "best_ms": best * 1e3}
        for name, c in curves.items():
            row[name], row[f"{name} reached"] = trials_to(c, best / 0.95)
        for name in names[1:]:
            row[f"speedup {name}"] = row["without"] / row[name]
        rows.append(row)
    medians = {name: statistics.median(r[f"speedup {name}"] for r in rows) if rows else None for name in names[1:]}
    out = {"model": args.model, "trials": args.trials, "threads": args.threads, "seed": args.seed,
           "times": "own" if retimed is None else "retimed", "tasks": rows, "median_speedup": medians["with"],
           "median_speedups": medians, "workdir": work}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"{'task':48} {'calls':>5} {'best ms':>9}" + "".join(f" {n:>11}" for n in names)
          + "".join(f" {'x ' + n:>13}" for n in names[1:]))
    for r in rows:
        mark = lambda n, ok: f"{'' if ok else '>'}{n}"  # noqa: E731
        print(f"{r['task']:48} {r['weight']:>5} {r['best_ms']:9.4f}"
              + "".join(f" {mark(r[n], r[n + ' reached']):>11}" for n in names)
              + "".join(f" {r['speedup ' + n]:12.2f}x" for n in names[1:]))
    times = "own" if retimed is None else "retimed"
    print(f"median speedup in trials to 95% of each task's best ({times} times), transfer (the tuned tasks' own "
          f"datasets left out): {medians['with']:.2f}x (bar: 1.5x)")
    if "with reuse" in medians:
        print(f"  with reuse (the prior tune-model builds, own datasets kept): {medians['with reuse']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
