"""The model tuning commands of the ``tensorlang`` command line: ``tasks`` and ``tune-model``.

    tensorlang tasks MODEL [--threads N] [--db PATH] [--repeat N] [--json]
    tensorlang tune-model MODEL --trials N [--strategy S] [--cost-model M] [--seed N] [--db PATH] [--jobs N]
                          [--threads N] [--timeout S] [--batch N] [--round-robin] [--no-transfer] [--no-variants]
                          [--retime-top K] [--no-measure] [--rounds R] [--no-torch-compile] [--plot FILE]
                          [--cluster tcp://HOST:8786] [--json]

MODEL is a ``.pt2`` file (``torch.export.save``) or a saved model (``model.save``); it is read before the tuning
database is opened, so a file that is no model leaves no database behind. :func:`register` adds the flags and
:func:`tensorlang.cli.main.main` reports errors; these functions do the work and return the JSON object of ``--json``.
``tune-model`` fails (exit status 2, naming the output and its difference) when the tuned model's outputs differ from
torch eager's.

Example::

    tensorlang tune-model resnet18.pt2 --trials 2000 --plot resnet18.png
"""
from __future__ import annotations

import json
import os
import shlex
import sys

from .cluster import add_cluster_flags, open_cluster
from .common import (
    DB_DEFAULT,
    TuneFlagError,
    add_common,
    check_db_flag,
    check_jobs_flag,
    check_plot_flag,
    check_plugin_flags,
    check_threads_flag,
    open_db,
    resume_command,
    seed_value,
)


def register(subparsers) -> None:
    """Add ``tasks`` and ``tune-model`` to the ``tensorlang`` parser's ``subparsers``.

    >>> import argparse
    >>> sub = argparse.ArgumentParser().add_subparsers(dest="command")
    >>> register(sub)
    >>> sorted(sub.choices)
    ['tasks', 'tune-model']
    """
    sub = subparsers
    t = sub.add_parser("tasks", help="a model's tuning tasks: its distinct kernels with FLOPs, calls, schedule source "
                                     "and share of the model's time now")
    add_common(t, sizes=False)
    t.add_argument("model", metavar="MODEL", help="a .pt2 file (torch.export.save) or a saved model (.tlm)")
    t.add_argument("--threads", type=int, help="the thread count the tasks are for (default: all CPUs)")
    t.add_argument("--db", help=f"tuning database: trials and best records per task {DB_DEFAULT}")
    t.add_argument("--repeat", type=int, default=5, help="profile runs whose median each kernel's time is (default 5)")
    m = sub.add_parser("tune-model", help="tune a whole model: pass variants, then its tasks by a task scheduler")
    add_common(m, sizes=False)
    m.add_argument("model", metavar="MODEL", help="a .pt2 file (torch.export.save) or a saved model (.tlm)")
    m.add_argument("--trials", type=int, required=True,
                   help="tune until the model's tasks hold this many records in all (earlier runs' count)")
    m.add_argument("--strategy", default="xgb-genetic", help="each task's search strategy (as for tune; default "
                                                             "xgb-genetic)")
    m.add_argument("--cost-model", default="xgb", help="xgb (default), forest or none; or a plug-in")
    m.add_argument("--seed", type=seed_value, default=0, help="seed of the search (same seed, same proposals)")
    m.add_argument("--db", help=f"tuning database file {DB_DEFAULT}")
    m.add_argument("--jobs", type=int, help="build processes per task runner (default: the CPU count)")
    m.add_argument("--threads", type=int, help="threads the kernels use (default: all CPUs)")
    m.add_argument("--timeout", type=float, default=10.0, help="seconds one candidate may run (default 10)")
    m.add_argument("--batch", type=int, default=16, help="trials per round (default 16)")
    m.add_argument("--round-robin", action="store_true",
                   help="give the rounds to the tasks in turn instead of by expected gain (to compare)")
    m.add_argument("--no-transfer", action="store_true",
                   help="each task learns alone (no shared cost model, no prior records or datasets)")
    m.add_argument("--no-variants", action="store_true",
                   help="do not measure pass variants (layout block, reduction fusion): keep the default passes")
    m.add_argument("--retime-top", type=int, default=3,
                   help="at the end, time the K fastest configs of each task that matters again (default 3; 0: no)")
    m.add_argument("--no-measure", action="store_true",
                   help="skip timing the model end to end at the end (tuned, zero-trial, torch)")
    m.add_argument("--rounds", type=int, default=5, help="alternating rounds of the end-to-end timing (default 5)")
    m.add_argument("--no-torch-compile", action="store_true",
                   help="leave torch.compile out of the end-to-end timing (inductor compiles for a while)")
    m.add_argument("--plot", help="write a PNG of the estimated end-to-end latency against trials")
    add_cluster_flags(m)  # --cluster: every task's runner measures on the Dask cluster's workers
    t.set_defaults(func=cmd_tasks)
    m.set_defaults(func=cmd_tune_model)



def _check(args) -> None:
    if args.trials < 1:
        raise TuneFlagError(f"--trials: must be at least 1, got {args.trials}")
    check_plugin_flags([args.strategy], [args.cost_model])
    check_jobs_flag(args.jobs)
    check_threads_flag(args.threads)
    if not args.timeout > 0:
        raise TuneFlagError(f"--timeout: must be a positive number of seconds, got {args.timeout}")
    if args.batch < 1:
        raise TuneFlagError(f"--batch: must be at least 1, got {args.batch}")
    if args.retime_top < 0:
        raise TuneFlagError(f"--retime-top: must be at least 0, got {args.retime_top}")
    if args.rounds < 1:
        raise TuneFlagError(f"--rounds: must be at least 1, got {args.rounds}")
    check_plot_flag(args.plot)
    _check_model_path(args.model)


def _check_model_path(path: str) -> None:
    if not os.path.exists(path):
        raise TuneFlagError(f"{path}: no such file")
    if os.path.isdir(path):
        raise TuneFlagError(f"{path} is a folder; give a .pt2 file or a saved model (.tlm)")


def _db_path(args, create: bool = False) -> str:
    """The database path the command uses, checked with the tuner's error messages: an existing file is opened
    read-only (a folder, or a file that is no tuning database, is refused); nothing is created unless `create`."""
    from tensorlang.tuner.records.database import default_db_path
    check_db_flag(args.db)
    path = os.path.expanduser(args.db) if args.db is not None else str(default_db_path())
    if create or os.path.exists(path):
        db = open_db(args.db, read_only=not create)
        try:
            return str(db.path)
        finally:
            db.close()
    return path


def _read_model(args, path: str, threads: int):
    """The model of the command (:func:`tensorlang.tuner.model.source.resolve_model`), read as tuning reads it."""
    from tensorlang.tuner.model.source import environment, resolve_model
    with environment(path, threads):  # a saved model compiles its kernels as it loads
        return resolve_model(args.model)


def cmd_tasks(args) -> dict:
    """``tensorlang tasks MODEL``: compile the model as ``tl.from_torch`` would (its tuned pass options and schedules
    from the database), list its tasks and time each kernel in a profile run.

    Example::

        tensorlang tasks resnet18.pt2 --threads 2
    """
    from tensorlang.graph.pass_options import describe_pass_options
    from tensorlang.threadpool import num_threads
    from tensorlang.tuner.model.source import environment
    from tensorlang.tuner.model.tasks import model_tasks, profile_tasks, random_model_inputs, task_rows, tasks_table
    from tensorlang.tuner.records.database import Database
    check_threads_flag(args.threads)
    if args.repeat < 1:
        raise TuneFlagError(f"--repeat: must be at least 1, got {args.repeat}")
    _check_model_path(args.model)
    threads = args.threads or num_threads()
    path = _db_path(args)
    src = _read_model(args, path, threads)
    with environment(path, threads):
        model = src.model if src.snapshot is None else src.compile(None)
        tasks = model_tasks(model, threads)
        total = profile_tasks(model, tasks, random_model_inputs(model), repeat=args.repeat)
    if os.path.exists(path):
        with Database(path, read_only=True) as db:
            rows = task_rows(tasks, total, db)
    else:  # no database: no trials (and none is made by listing)
        rows = task_rows(tasks, total)
    options = model.pass_options
    out = {"model": src.name, "threads": threads, "db": path, "kernels": len(model.steps), "tasks": rows,
           "total_ms": total * 1e3, "pass_options": options, "pass_options_source": model.pass_options_source,
           "graph_key": model.graph_key}
    if not args.json:
        where = "" if options is None else (f"; passes: {describe_pass_options(options)} "
                                            f"({model.pass_options_source})")
        print(f"{src.name}: {len(model.steps)} kernels, {len(tasks)} tasks, {threads} thread{'s' * (threads != 1)}"
              f"{where}; a profile run takes {total * 1e3:.3f} ms (median of {args.repeat} per kernel)")
        print(tasks_table(rows))
        print(f"tune them: tensorlang tune-model {shlex.quote(args.model)} --trials {max(200, 100 * len(tasks))}"
              + (f" --db {shlex.quote(args.db)}" if args.db else ""))
    return out


def cmd_tune_model(args) -> dict:
    """``tensorlang tune-model MODEL --trials N``: :func:`tensorlang.tuner.model.tune.tune_model`, with its progress on
    stderr, then a summary (and a plot with ``--plot``); returns the summary's JSON. When the tuned model's outputs
    differ from torch eager's, the summary (and with ``--json`` its JSON) is printed and an OutputMismatch names
    the output and the difference (exit status 2).

    Example::

        tensorlang tune-model mnist.pt2 --trials 200 --json
    """
    from tensorlang.threadpool import num_threads
    from tensorlang.tuner.model.tune import tune_model
    from tensorlang.tuner.model.variants import OutputMismatch
    _check(args)
    path = _db_path(args)
    src = _read_model(args, path, args.threads or num_threads())
    path = _db_path(args, create=True)
    cluster = open_cluster(args)  # None: measure on this machine
    factory = None
    if cluster is not None:
        from tensorlang.tuner.measure.cluster import DaskRunner
        from tensorlang.tuner.measure.local import MeasureOptions
        options = MeasureOptions(run_timeout=args.timeout)

        def factory(task):
            return DaskRunner(task, cluster, options, seed=args.seed)
        print(f"measuring on the Dask cluster at {cluster.address}", file=sys.stderr)
    try:
        summary = tune_model(src, args.trials, strategy=args.strategy, cost_model=args.cost_model,
                             seed=args.seed, db=path, jobs=args.jobs, threads=args.threads,
                             scheduler="round-robin" if args.round_robin else "gradient",
                             transfer=not args.no_transfer, variants=not args.no_variants, batch=args.batch,
                             timeout=args.timeout, retime_top=args.retime_top, measure=not args.no_measure,
                             rounds=args.rounds, torch_compile=not args.no_torch_compile, progress=sys.stderr,
                             runner_factory=factory)
    finally:
        if cluster is not None:
            cluster.close()
    report = summary.to_json()
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    if summary.interrupted:
        say(f"interrupted: {summary.trials_done} trials measured in this run, all of them kept in {path}")
        say(f"resume with: {resume_command(args)}")
    if args.plot:
        plot_model_curve(summary, args.plot)
    if not args.json:
        print(format_model_summary(summary, args))
    if summary.mismatch:
        if args.json:
            print(json.dumps(report))
        raise OutputMismatch(f"{args.model}: {summary.mismatch}")
    return report


def _ms(s) -> str:
    return "-" if s is None else f"{s * 1e3:.3f} ms"


def format_model_summary(summary, args=None) -> str:
    """The text ``tune-model`` prints at the end.

    Example::

        >>> from tensorlang.tuner.model.report import ModelTuneSummary, TaskReport
        >>> s = ModelTuneSummary("net", "k", 2, "t.db", 32, "gradient", "xgb-genetic", "xgb", 0, trials_done=32)
        >>> s.tasks = [TaskReport(0, "f_0123456789", "f", "k", 2, 1e6, 0, 32, None, 1e-3, 2e-3, "auto")]
        >>> s.curve = [(0, 4e-3), (32, 2e-3)]
        >>> s.latency = {"tuned": {"median_s": 2e-3}, "zero-trial": {"median_s": 4e-3}}
        >>> s.reference, s.max_rel_error = "torch eager", {"tuned": 2e-7, "zero-trial": 1e-7}
        >>> print(format_model_summary(s))  # doctest: +NORMALIZE_WHITESPACE
        tuned net, 2 threads: 32 trials, 1 task (32 in this run); gradient scheduler, xgb-genetic, no transfer
          estimated end to end (sum of calls x best time): 4.000 ms at the start of this run -> 2.000 ms
            #  task          calls  trials  best ms  GFLOPS  share
            0  f_0123456789  2      32      1.0000   1.0     100.0%
          measured end to end (median of alternating rounds, every contender on 2 threads):
            tensorlang, tuned                           2.000 ms
            tensorlang, zero-trial (default passes)     4.000 ms   the tuned model is 2.00x faster
          outputs against torch eager's (largest |difference| / max(1, max |reference|), tolerance 1e-04): tuned
          2.0e-07, zero-trial 1.0e-07
          this run: 32 trials, 0 invalid
    """
    from tensorlang.graph.pass_options import describe_pass_options
    from tensorlang.tuner.model.report import task_table
    from tensorlang.tuner.model.variants import TOLERANCE
    s = summary
    lines = [f"tuned {s.model}, {s.threads} thread{'s' * (s.threads != 1)}: {s.trials_before + s.trials_done} "
             f"trials, {len(s.tasks)} task{'s' * (len(s.tasks) != 1)} ({s.trials_done} in this run); {s.scheduler} "
             f"scheduler, {s.strategy}, " + (f"transfer: {s.transfer}" if s.transfer else "no transfer")]
    if s.variant_how:
        lines.append(f"  passes: {describe_pass_options(s.variant)} ({s.variant_how})")
        timed = [v for v in s.variants if v.get("median_s")]
        if len(timed) > 1:
            lines.append("    zero-trial end to end: " + "; ".join(
                f"{describe_pass_options(v['options'])} {_ms(v['median_s'])}" for v in timed))
        for v in s.variants:
            if v.get("error"):
                lines.append(f"    not chosen: {describe_pass_options(v['options'])}: {v['error']}")
    if s.curve:
        lines.append(f"  estimated end to end (sum of calls x best time): {_ms(s.curve[0][1])} at the start of this "
                     f"run -> {_ms(s.curve[-1][1])}")
    lines.append(task_table(s.tasks, s.estimated_s).replace("\n", "\n  ").replace("  #", "    #", 1)
                 if s.tasks else "  no tasks")
    if s.latency:
        names = {"tuned": "tensorlang, tuned", "zero-trial": "tensorlang, zero-trial (default passes)"}
        lines.append(f"  measured end to end (median of alternating rounds, every contender on {s.threads} thread"
                     f"{'s' * (s.threads != 1)}):")
        tuned = (s.latency.get("tuned") or {}).get("median_s")
        for name, v in s.latency.items():
            label = names.get(name, name)
            if v.get("median_s") is None:
                lines.append(f"    {label:42} {v.get('error') or 'not timed'}")
                continue
            ratio = ""
            if name != "tuned" and tuned:
                ratio = f"   the tuned model is {v['median_s'] / tuned:.2f}x faster"
            lines.append(f"    {label:42} {_ms(v['median_s']):>10}{ratio}")
    if s.max_rel_error:
        lines.append(f"  outputs against {s.reference}'s (largest |difference| / max(1, max |reference|), tolerance "
                     f"{TOLERANCE:.0e}): " + ", ".join(f"{k} {v:.1e}" for k, v in s.max_rel_error.items()))
    elif s.reference:
        lines.append(f"  outputs: {s.reference}")
    if s.mismatch:
        lines.append(f"  WRONG: {s.mismatch}")
    if s.schedule_sources:
        lines.append("  the tuned model's kernels: " + ", ".join(f"{n} {k}" for k, n in s.schedule_sources.items()))
    errors = ", ".join(f"{n} {k}" for k, n in sorted(s.errors.items()))
    lines.append(f"  this run: {s.trials_done} trials, {sum(s.errors.values())} invalid"
                 + (f" ({errors})" if errors else ""))
    if s.phase_s:
        lines.append(f"  wall time {s.wall_s:.1f} s (" + ", ".join(f"{k} {v:.1f} s" for k, v in s.phase_s.items())
                     + ")")
    for t in s.tasks:
        if t.note:
            lines.append(f"  task {t.index} {t.name}: {t.note}")
    if s.exhausted:
        lines.append("  every task's search space is used up")
    if args is not None and getattr(args, "plot", None):
        lines.append(f"  plot: {args.plot}")
    if args is not None and not s.mismatch:  # a wrong model is not for compiling
        env = f"TENSORLANG_DB={shlex.quote(s.db)} " if getattr(args, "db", None) else ""
        lines.append(f"next: {env}tensorlang compile {shlex.quote(args.model)} -o out   (the tuned passes and "
                     f"schedules; tl.from_torch and tl.load_model find them too)")
    return "\n".join(lines)


def plot_model_curve(summary, path: str) -> None:
    """Write a PNG of the estimated end-to-end latency against trials (``summary.curve``), with a dashed line for
    each end-to-end timing at the end.

    Example::

        plot_model_curve(tune_model("net.pt2", trials=500), "net.png")
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    xs = [p[0] for p in summary.curve]
    ys = [p[1] * 1e3 for p in summary.curve]
    ax.step(xs, ys, where="post", color="tab:blue", label="estimated (sum of calls x best time)")
    from tensorlang.tuner.model.baselines import TORCH_COMPILE
    colors = {"tuned": "tab:blue", "zero-trial": "gray", "torch eager": "tab:red", TORCH_COMPILE: "tab:orange"}
    for name, v in summary.latency.items():
        if v.get("median_s"):
            ax.axhline(v["median_s"] * 1e3, linestyle="--", linewidth=1, color=colors.get(name, "black"),
                       label=f"{name}, measured ({v['median_s'] * 1e3:.2f} ms)")
    ax.set_xlabel("trials (all tasks)")
    ax.set_ylabel("end-to-end latency (ms)")
    if summary.warmup_trials is not None:
        ax.axvline(summary.warmup_trials, linestyle=":", linewidth=1, color="gray", label="every task tuned once")
    ax.set_title(f"{summary.model}: {summary.scheduler} scheduler, {summary.threads} "
                 f"thread{'s' * (summary.threads != 1)}")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
