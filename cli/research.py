"""The research commands of the ``tensorlang`` command line (:func:`register` adds their flags):

    tensorlang compare WORKLOAD --strategies random,genetic,... --trials N --seeds K [--replay DATASET]
                       [--preset P | --size K=V,...] [--cost-model M] [--jobs N] [--plot FILE] [--json]
                       [--cluster tcp://HOST:8786]   (live only)
    tensorlang dataset export WORKLOAD [--preset P | --size K=V,...] [--threads N] [--db PATH] -o FILE.csv
    tensorlang dataset info FILE.csv
    tensorlang costmodel eval --dataset FILE.csv [--models xgb,forest,...] [--train-fraction F] [--splits N]

Each function does the work and returns the JSON object ``--json`` prints.
"""
from __future__ import annotations

import os
import sys

from .cluster import add_cluster_flags, open_cluster
from .common import (
    DB_DEFAULT,
    Parser,
    TuneFlagError,
    add_common,
    check_jobs_flag,
    check_plot_flag,
    check_plugin_flags,
    check_threads_flag,
    db_source,
    existing_db,
    seed_value,
    task_for,
    workload_and_sizes,
)


def register(subparsers) -> None:
    """Add ``compare``, ``dataset`` (``export``, ``info``) and ``costmodel`` (``eval``) to the ``tensorlang``
    parser's ``subparsers``.

    >>> import argparse
    >>> sub = argparse.ArgumentParser().add_subparsers(dest="command")
    >>> register(sub)
    >>> sorted(sub.choices)
    ['compare', 'costmodel', 'dataset']
    """
    sub = subparsers
    c = sub.add_parser("compare", help="compare search strategies over seeds, on replay of a dataset or live")
    add_common(c)
    c.add_argument("--strategies", required=True,
                   help="strategies separated by commas: names, entry points or package.module:Class")
    c.add_argument("--trials", type=int, required=True, help="trials per run")
    c.add_argument("--seeds", type=int, default=5, help="runs per strategy, with seeds 0..K-1 (default 5)")
    c.add_argument("--replay", metavar="DATASET", help="answer from this dataset (CSV) instead of measuring")
    c.add_argument("--cost-model", default="xgb", help="cost model of model-guided strategies (default xgb)")
    c.add_argument("--jobs", type=int, help="processes sharing the runs on replay (default: the CPU count)")
    c.add_argument("--threads", type=int, help="threads the kernels use when live (default: all CPUs)")
    c.add_argument("--timeout", type=float, default=10.0, help="seconds one candidate may run, live (default 10)")
    c.add_argument("--plot", help="write a PNG of the best-so-far curves (median and 25-75%% over seeds)")
    c.add_argument("--space", default="default", choices=("default", "generated", "hand"),
                   help="live: the search space (as for tune)")
    add_cluster_flags(c)
    d = sub.add_parser("dataset", help="export tuning records as a dataset for offline replay, or describe one")
    dsub = d.add_subparsers(dest="dataset_command", metavar="ACTION", parser_class=Parser)
    dsub.required = True
    de = dsub.add_parser("export", help="write one task's records as a CSV table with a JSON header")
    add_common(de)
    de.add_argument("-o", "--output", required=True, help="the CSV file to write")
    de.add_argument("--threads", type=int, help="the thread count it was tuned for (default: all CPUs)")
    de.add_argument("--db", help=f"tuning database file {DB_DEFAULT}")
    de.add_argument("--note", help="free text stored in the header (how the records were made)")
    de.add_argument("--space", default="default", choices=("default", "generated", "hand"),
                    help="export the records of this search space (as for tune)")
    di = dsub.add_parser("info", help="describe a dataset file")
    add_common(di, sizes=False)
    di.add_argument("file", metavar="FILE", help="a dataset CSV")
    cm = sub.add_parser("costmodel", help="evaluate cost models on a dataset")
    csub = cm.add_subparsers(dest="costmodel_command", metavar="ACTION", parser_class=Parser)
    csub.required = True
    ce = csub.add_parser("eval", help="train each cost model on part of a dataset, rank the rest")
    add_common(ce, sizes=False)
    ce.add_argument("--dataset", required=True, help="a dataset CSV (see `tensorlang dataset export`)")
    ce.add_argument("--models", help="cost models separated by commas (default: every registered one)")
    ce.add_argument("--train-fraction", type=float, default=0.5, help="share of configs to train on (default 0.5)")
    ce.add_argument("--splits", type=int, default=5, help="random train/test splits to average (default 5)")
    ce.add_argument("--seed", type=seed_value, default=0, help="seed of the splits and the models")
    c.set_defaults(func=cmd_compare)
    d.set_defaults(func=cmd_dataset)
    cm.set_defaults(func=cmd_costmodel)


def _names(text: str, flag: str) -> list[str]:
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if not names:
        raise TuneFlagError(f"{flag}: name at least one, separated by commas")
    if len(set(names)) != len(names):
        raise TuneFlagError(f"{flag}: a name is given twice in {text!r}")
    return names


def _load_dataset(path: str, flag: str):
    from tensorlang.tuner.records.dataset import Dataset, DatasetError
    try:
        return Dataset.load(path)
    except DatasetError as e:
        raise TuneFlagError(f"{flag}: {e}") from None


def cmd_compare(args) -> dict:
    """``tensorlang compare``: every strategy with every seed; a table, optionally a plot and JSON.

    ``args`` is the parsed command line (its WORKLOAD, ``--preset`` and ``--size`` name the workload and sizes).
    With ``--replay`` the runs answer from the dataset (which must be of this workload, and of these sizes when
    ``--preset`` or ``--size`` is given) and share ``--jobs`` processes (default: the CPU count); otherwise the
    task is tuned live, one run after another, and no record is kept. Prints progress and the table of
    :meth:`tensorlang.tuner.research.comparison.Comparison.table` (with ``--json``, progress only, on stderr); returns
    :meth:`tensorlang.tuner.research.comparison.Comparison.to_json`, with the plot's path when ``--plot`` is given.

    Example::

        tensorlang compare matmul --strategies random,genetic,xgb-genetic --trials 200 --seeds 10 \\
            --replay matmul_1024.csv --plot compare.png
    """
    from tensorlang.tuner.measure.local import MeasureOptions
    from tensorlang.tuner.research.comparison import compare
    workload, sizes = workload_and_sizes(args)
    strategies = _names(args.strategies, "--strategies")
    check_plugin_flags(strategies, [args.cost_model], strategy_flag="--strategies")
    for flag, v in (("--trials", args.trials), ("--seeds", args.seeds)):
        if v < 1:
            raise TuneFlagError(f"{flag}: must be at least 1, got {v}")
    check_jobs_flag(args.jobs)
    check_threads_flag(args.threads)
    if not args.timeout > 0:
        raise TuneFlagError(f"--timeout: must be a positive number of seconds, got {args.timeout}")
    check_plot_flag(args.plot)
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    task = dataset = None
    if args.replay:
        dataset = _load_dataset(args.replay, "--replay")
        if dataset.workload != workload.name:
            raise TuneFlagError(f"--replay: {args.replay} is a dataset of {dataset.workload!r}, not {workload.name!r}")
        if (args.preset or args.size) and dataset.sizes != sizes:
            raise TuneFlagError(f"--replay: {args.replay} was measured at sizes {dataset.sizes}, not {sizes}")
        if not dataset.valid_count:
            raise TuneFlagError(f"--replay: {args.replay} has no valid config to find (0 of its {len(dataset)} "
                                f"rows are valid)")
        say(f"replaying {len(dataset)} configs of {args.replay} ({dataset.valid_count} valid, best "
            f"{dataset.best_gflops:.1f} GFLOPS): {len(strategies)} strategies x {args.seeds} seeds x "
            f"{min(args.trials, len(dataset))} trials")
    else:
        task = task_for(workload, sizes, args.threads, args.space)
        say(f"tuning {task.describe()} live: {len(strategies)} strategies x {args.seeds} seeds x {args.trials} "
            f"trials (records are not kept; use --replay DATASET to compare in seconds)")
    jobs = args.jobs or ((os.cpu_count() or 1) if dataset is not None else 1)
    done = [0]
    total = len(strategies) * args.seeds

    def on_run(run):
        done[0] += 1
        say(f"  [{done[0]}/{total}] {run.strategy} seed {run.seed}: best {run.curve[-1] if run.curve else 0:.1f} "
            f"GFLOPS in {len(run.curve)} trials, {run.wall_s:.1f} s")

    cluster = None
    if dataset is None:
        cluster = open_cluster(args)  # live runs measure on the Dask cluster (None: on this machine)
        if cluster is not None:
            say(f"  measuring on the Dask cluster at {cluster.address}")
    elif getattr(args, "cluster", None):
        raise TuneFlagError("--cluster: only for live comparisons (--replay measures nothing)")
    try:
        result = compare(strategies, args.trials, args.seeds, replay=dataset, task=task,
                         cost_model=args.cost_model, jobs=jobs, on_run=on_run,
                         options=MeasureOptions(run_timeout=args.timeout), cluster=cluster)
    finally:
        if cluster is not None:
            cluster.close()
    report = result.to_json()
    if args.plot:
        result.plot(args.plot)
        report["plot"] = args.plot
    if not args.json:
        print(result.table())
        if args.plot:
            print(f"plot: {args.plot}")
    return report


def cmd_dataset(args) -> dict:
    """``tensorlang dataset export|info``: ``export`` writes one task's records of the tuning database as a
    dataset file (``-o``; TuneFlagError when the database or the task's records are missing, or the file
    cannot be written), ``info`` describes a dataset file. Each prints a summary (nothing with ``--json``) and
    returns it as a JSON object.

    Example::

        tensorlang dataset export matmul --preset 1024 --threads 1 --db runs.db -o matmul_1024.csv
        tensorlang dataset info matmul_1024.csv
    """
    if args.dataset_command == "info":
        return _dataset_info(args)
    return _dataset_export(args, *workload_and_sizes(args))


def _dataset_export(args, workload, sizes) -> dict:
    from tensorlang.tuner.records.dataset import DatasetError, check_output_path, from_records
    check_threads_flag(args.threads)
    try:
        check_output_path(args.output)
    except DatasetError as e:
        raise TuneFlagError(f"-o: {e}") from None
    task = task_for(workload, sizes, args.threads, args.space)
    path, db = existing_db(args.db)
    if db is None:
        raise TuneFlagError(f"{db_source(args.db)}: no tuning database at {path}")
    try:
        records = db.records(task.key)
    finally:
        db.close()
    if not records:
        where = f" --preset {args.preset}" if args.preset else f" --size {args.size}" if args.size else ""
        raise TuneFlagError(f"no tuning records of {task.describe()} in {path}; measure some with: "
                            f"tensorlang tune {workload.name}{where} --strategy random --trials 2000")
    ds = from_records(records, task, note=args.note or "")
    try:
        ds.save(args.output)
    except DatasetError as e:
        raise TuneFlagError(f"-o: {e}") from None
    out = {"path": args.output, "workload": task.workload, "sizes": task.sizes, "records": len(records),
           "rows": len(ds), "valid": ds.valid_count, "best_gflops": ds.best_gflops}
    if not args.json:
        print(f"wrote {args.output}: {len(ds)} configs of {task.describe()} ({ds.valid_count} valid, best "
              f"{ds.best_gflops:.1f} GFLOPS) from {len(records)} records in {path}")
    return out


def _dataset_info(args) -> dict:
    from collections import Counter
    ds = _load_dataset(args.file, "FILE")
    errors = Counter(kind for _, g, kind in ds.rows() if g is None)
    h = ds.header
    out = {"path": args.file, "workload": ds.workload, "sizes": ds.sizes, "threads": h["threads"],
           "target": h.get("target"), "tensorlang_version": h.get("tensorlang_version"), "created": h.get("created"),
           "rows": len(ds), "valid": ds.valid_count, "errors": dict(errors), "best_gflops": ds.best_gflops,
           "best_config": ds.best_config, "knobs": ds.knobs, "note": h.get("note", "")}
    if not args.json:
        sizes = ", ".join(f"{k}={v}" for k, v in ds.sizes.items())
        cpu = (h.get("target") or {}).get("cpu", "?")
        print(f"{args.file}: {ds.workload}({sizes}) on {cpu}, {h['threads']} threads; tensorlang "
              f"{h.get('tensorlang_version')}, made {h.get('created')}")
        print(f"  {len(ds)} configs, {ds.valid_count} valid" +
              (f", invalid: {', '.join(f'{n} {k}' for k, n in errors.items())}" if errors else ""))
        knobs = ", ".join(f"{k}={v}" for k, v in (ds.best_config or {}).items())
        print(f"  best {ds.best_gflops:.1f} GFLOPS: {knobs}")
        if h.get("note"):
            print(f"  note: {h['note']}")
    return out


def cmd_costmodel(args) -> dict:
    """``tensorlang costmodel eval``: rank held-out configs of a dataset with each cost model.

    Runs :func:`tensorlang.tuner.research.evaluate.evaluate_dataset` with ``--models`` (default: every registered one),
    ``--train-fraction``, ``--splits`` and ``--seed``; prints :func:`tensorlang.tuner.research.evaluate.format_report`
    (nothing with ``--json``) and returns ``{"dataset", "workload", "models": the report}``.

    Example::

        tensorlang costmodel eval --dataset matmul_1024.csv --models xgb,forest --splits 10
    """
    from tensorlang.tuner.research.evaluate import evaluate_dataset, format_report
    ds = _load_dataset(args.dataset, "--dataset")
    models = None
    if args.models:
        models = _names(args.models, "--models")
        check_plugin_flags([], models, cost_model_flag="--models")
    if not 0.0 < args.train_fraction < 1.0:
        raise TuneFlagError(f"--train-fraction: must be between 0 and 1, got {args.train_fraction}")
    if args.splits < 1:
        raise TuneFlagError(f"--splits: must be at least 1, got {args.splits}")
    report = evaluate_dataset(ds, models, args.train_fraction, args.splits, args.seed)
    if not args.json:
        print(f"cost models on {args.dataset} ({ds.workload}, {len(ds)} configs)")
        print(format_report(report))
    return {"dataset": args.dataset, "workload": ds.workload, "models": report}
