"""The tuner's commands of the ``tensorlang`` command line: ``tune`` and ``best`` (:func:`register` adds their
flags; the functions do the work and return the JSON object of ``--json``).

    tensorlang tune WORKLOAD --trials N [--preset P | --size K=V,...] [--strategy S] [--cost-model M]
                    [--seed N] [--db PATH] [--jobs N] [--timeout S] [--threads N] [--plot FILE] [--json]
                    [--cluster tcp://HOST:8786] [--cluster-timeout S]
    tensorlang best WORKLOAD [--preset P | --size K=V,...] [--threads N] [--db PATH] [--json]
"""
from __future__ import annotations

import shlex
import sys

from tensorlang.errors import TensorlangError

from .cluster import add_cluster_flags, open_cluster
from .common import (
    DB_DEFAULT,
    TuneFlagError,
    add_common,
    best_and_retimed,
    check_jobs_flag,
    check_plot_flag,
    check_plugin_flags,
    check_threads_flag,
    open_db,
    record_schedule,
    resume_command,
    seed_value,
    task_for,
    workload_and_sizes,
)


def register(subparsers) -> None:
    """Add ``tune`` and ``best`` to the ``tensorlang`` parser's ``subparsers``.

    >>> import argparse
    >>> sub = argparse.ArgumentParser().add_subparsers(dest="command")
    >>> register(sub)
    >>> sorted(sub.choices)
    ['best', 'tune']
    """
    sub = subparsers
    t = sub.add_parser("tune", help="auto-tune a workload: search schedules, measure them, keep every record")
    add_common(t)
    t.add_argument("--trials", type=int, required=True, help="tune until the task has this many records")
    t.add_argument("--strategy", default="xgb-genetic",
                   help="random, grid, genetic, bayesian or xgb-genetic (default); or a plug-in: an entry point "
                        "name or package.module:Class")
    t.add_argument("--cost-model", default="xgb",
                   help="xgb (default), forest or none; or a plug-in (entry point name or package.module:Class)")
    t.add_argument("--sampler", help="with --strategy bayesian: an optuna sampler class (default TPESampler)")
    t.add_argument("--seed", type=seed_value, default=0, help="seed of the search (same seed, same proposals)")
    t.add_argument("--db", help=f"tuning database file {DB_DEFAULT}")
    t.add_argument("--jobs", type=int, help="build processes (default: the CPU count)")
    t.add_argument("--timeout", type=float, default=10.0, help="seconds one candidate may run (default 10)")
    t.add_argument("--threads", type=int, help="threads the kernels use (default: all CPUs)")
    t.add_argument("--batch", type=int, default=16,
                   help="candidates proposed and measured per round (at most 8 for the first 64 trials)")
    t.add_argument("--retime-top", type=int, default=5,
                   help="at the end, time the K fastest configs again (3 interleaved rounds) and let that choose "
                        "the best (default 5; 0: no re-timing)")
    t.add_argument("--no-hand-start", action="store_true",
                   help="do not measure a starting config first (the hand schedule's, or in a generated space the "
                        "auto-scheduler's zero-trial pick): search starts from nothing")
    t.add_argument("--space", default="default", choices=("default", "generated", "hand"),
                   help="the search space: generated from the program by the auto-scheduler's rules, the "
                        "workload's hand-written one, or default (the generated one, or the space a built-in "
                        "workload's measurements chose)")
    t.add_argument("--plot", help="write a PNG of the best GFLOPS so far against trials")
    t.add_argument("--no-baselines", action="store_true",
                   help="skip timing the default and hand schedules and numpy at the end")
    add_cluster_flags(t)
    bst = sub.add_parser("best", help="the best tuned record of a workload and its schedule as Python")
    add_common(bst)
    bst.add_argument("--threads", type=int, help="the thread count it was tuned for (default: all CPUs)")
    bst.add_argument("--db", help=f"tuning database file {DB_DEFAULT}")
    t.set_defaults(func=cmd_tune)
    bst.set_defaults(func=cmd_best)


def check_tune_flags(args) -> None:
    """Refuse bad values of ``tune``'s flags before anything starts, naming the flag and what is legal.

    ``args`` is the parsed ``tensorlang tune`` command line; each bad value is a TuneFlagError. The strategy and
    cost model must resolve (:func:`check_plugin_flags`), ``--sampler`` must name an optuna sampler and goes with
    ``--strategy bayesian`` only, and the ``--plot`` file must be one that can be written (:func:`check_plot_flag`).

    Example::

        >>> from tensorlang.cli.main import make_parser
        >>> check_tune_flags(make_parser().parse_args(["tune", "matmul", "--trials", "64"]))
        >>> check_tune_flags(make_parser().parse_args(["tune", "matmul", "--trials", "64", "--jobs", "0"]))
        Traceback (most recent call last):
        ...
        tensorlang.cli.common.TuneFlagError: --jobs: must be at least 1, got 0
    """
    if args.trials < 1:
        raise TuneFlagError(f"--trials: must be at least 1, got {args.trials}")
    check_plugin_flags([args.strategy], [args.cost_model])
    check_jobs_flag(args.jobs)
    check_threads_flag(args.threads)
    if not args.timeout > 0:
        raise TuneFlagError(f"--timeout: must be a positive number of seconds, got {args.timeout}")
    if args.sampler is not None:
        from tensorlang.tuner.search.strategies import optuna_samplers, sampler_problem
        if args.strategy != "bayesian":
            raise TuneFlagError(f"--sampler: only with --strategy bayesian, not {args.strategy!r}")
        legal = optuna_samplers()
        if args.sampler not in legal:
            raise TuneFlagError(f"--sampler: {sampler_problem(args.sampler)}; samplers: {', '.join(legal)}")
    if args.batch < 1:
        raise TuneFlagError(f"--batch: must be at least 1, got {args.batch}")
    if args.retime_top < 0:
        raise TuneFlagError(f"--retime-top: must be at least 0, got {args.retime_top}")
    check_plot_flag(args.plot)


def cmd_tune(args) -> dict:
    """``tensorlang tune``: tune, show progress, then print a summary (and write a plot).

    ``args`` is the parsed command line (its WORKLOAD, ``--preset`` and ``--size`` name the workload and sizes).
    The flags are checked first (:func:`check_tune_flags`); the hand schedule's config is measured first unless
    ``--no-hand-start``; after the run the default schedule, the hand schedule, the best record and numpy are
    timed side by side unless ``--no-baselines`` or the run was interrupted. With ``--json`` the progress goes to
    stderr and the text summary is left out (the caller prints the returned JSON). Returns :func:`summary_json`.

    Example::

        tensorlang tune conv2d --preset resnet18_3x3 --trials 200 --plot conv2d.png
    """
    workload, sizes = workload_and_sizes(args)
    check_tune_flags(args)
    task = task_for(workload, sizes, args.threads, getattr(args, "space", "default"))
    db = open_db(args.db)
    cluster = None
    try:
        cluster = open_cluster(args)  # None: measure on this machine
        return _tune(args, workload, task, db, cluster)
    finally:
        if cluster is not None:
            cluster.close()
        db.close()


def _tune(args, workload, task, db, cluster=None) -> dict:
    from tensorlang.space import config_key
    from tensorlang.tuner.measure.local import MeasureOptions
    from tensorlang.tuner.tuning import ProgressBar, Tuner, hand_start_configs, measure_baselines, start_name
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    say(f"tuning {task.describe()}: {args.trials} trials, strategy {args.strategy}, cost model {args.cost_model}, "
        f"seed {args.seed}")
    say(f"  {task.space.describe().splitlines()[0]}; records in {db.path}")
    if cluster is not None:
        say(f"  measuring on the Dask cluster at {cluster.address}")
    start = [] if args.no_hand_start else hand_start_configs(task)
    name = start_name(task)
    what = "the hand schedule's config" if name == "hand" else "the auto-scheduler's zero-trial pick"
    measured = {r.config_key() for r in db.records(task.key)}
    if start and all(config_key(c) in measured for c in start):
        say(f"  {what} was measured in an earlier run; it competes again in the final re-timing")
    elif start:
        more = (f", then {len(start) - 1} variant{'s' * (len(start) > 2)} of it at other vector widths, "
                "placements or blocks") if len(start) > 1 else ""
        say(f"  {what} is measured first{more} (--no-hand-start: search from nothing)")
    elif not args.no_hand_start and workload.hand_schedule is not None and task.space_used == "hand":
        say("  the hand schedule is not a config of this space at these sizes: search starts from nothing")
    bar = ProgressBar(args.trials, sys.stderr)

    def on_retime(n: int, rounds: int) -> None:
        bar.close()
        which = f"the fastest and the {name} config" if start else "the fastest"
        say(f"re-timing {n} configs ({which}), {rounds} interleaved rounds ...")

    tuner = Tuner(task, args.trials, args.strategy, args.cost_model, args.seed, db, args.jobs,
                  MeasureOptions(run_timeout=args.timeout), batch=args.batch, on_trial=bar.update,
                  strategy_options={"sampler": args.sampler} if args.sampler else None, retime_top=args.retime_top,
                  on_retime=on_retime, start=start, start_name=name, cluster=cluster)
    before = db.count(task.key)
    try:
        summary = tuner.run()
    except TensorlangError as e:
        if cluster is None:  # (tensorlang.tuner.measure.cluster needs Dask's distributed, an extra)
            raise
        from tensorlang.tuner.measure.cluster import ClusterError
        if not isinstance(e, ClusterError) or not e.resumable:
            raise
        kept = db.count(task.key) - before  # a cluster that failed mid-run: say what is kept and how to go on
        raise ClusterError(f"{e}; the {kept} records this run measured are kept in {db.path}; once the cluster is "
                           f"back, resume with: {resume_command(args)}") from None
    finally:
        bar.close()
    if summary.interrupted:
        say(f"interrupted: {summary.trials_done} trials measured in this run, all of them kept in {db.path}")
        say(f"resume with: {resume_command(args)}")
    if summary.best is not None and not args.no_baselines and not summary.interrupted:
        say("timing the default schedule, the pick, the hand schedule, the best schedule and numpy as "
            "`tensorlang bench` does ...")
        summary.baselines = measure_baselines(task, summary.best, errors=summary.baseline_errors,
                                              timeout=args.timeout, tally=summary.disturbance)
    plot_error = None
    if args.plot:
        try:
            plot_curve(summary, args.plot)
        except OSError as e:  # the folder went away or filled up during the run: the summary still stands
            plot_error = f"--plot: could not write {args.plot!r} ({e.strerror or e})"
    report = summary_json(summary, db) | ({"plot_error": plot_error} if plot_error else {})
    if not args.json:
        print(format_summary(summary, report, args))
    if plot_error:
        print(f"tensorlang tune: {plot_error}", file=sys.stderr)
    return report


def summary_json(summary, db) -> dict:
    """The JSON object ``tune --json`` prints: the task, the trial counts (all runs, and this run's valid and
    invalid ones by error kind), timings, the best record, the re-timed medians by config key (this run's, else
    those ``db`` holds for the task), the baselines' GFLOPS and, where the best was timed with them, its speedup
    over each, and ``disturbance``: how many of the run's measurements a busy machine disturbed
    (:meth:`tensorlang.tuner.measure.disturbance.Tally.to_json`).

    Example::

        >>> from tensorlang.tuner.records.database import Database, Record
        >>> from tensorlang.tuner.task import Task
        >>> from tensorlang.tuner.tuning import TuneSummary
        >>> t = Task.create("matmul", preset="small", threads=1)
        >>> best = Record(t.key, "matmul", t.sizes, t.target, t.space.config_at(0), None, times=(1e-4,),
        ...               flops=t.flops, strategy="random", trial=3)
        >>> s = TuneSummary(t, best, trials_before=10, trials_done=6, valid=6, baselines={"tuned": 2.0, "numpy": 4.0})
        >>> report = summary_json(s, Database(":memory:"))
        >>> report["trials"], report["best"]["gflops"], report["speedup"]
        (16, 1.96608, {'numpy': 0.5})
    """
    best = summary.best
    retimed = summary.retimed or db.retimed(summary.task.key)  # this run's re-timing, else the one in force
    out = {
        "workload": summary.task.workload, "sizes": summary.task.sizes, "threads": summary.task.threads,
        "task_key": summary.task.key, "db": str(db.path),
        "trials": summary.trials_before + summary.trials_done, "trials_this_run": summary.trials_done,
        "valid_this_run": summary.valid, "errors_this_run": dict(summary.errors),
        "wall_s": summary.wall_s, "measured_per_s": summary.measured_per_s, "phase_s": summary.phase_s,
        "interrupted": summary.interrupted, "exhausted": summary.exhausted,
        "best": None if best is None else {"median_s": best.median_s, "gflops": best.gflops, "trial": best.trial,
                                           "strategy": best.strategy, "config": best.config,
                                           "retimed_median_s": retimed.get(best.config_key())},
        "retimed": retimed,
        "baselines_gflops": summary.baselines,
        "baseline_errors": summary.baseline_errors,
        "space": summary.task.space_used,
        "disturbance": summary.disturbance.to_json(),
    }
    if best is not None:  # the one figure the text summary prints: the re-timing in force, else the measurement
        t = retimed.get(best.config_key())
        out["best"]["best_gflops"] = summary.task.flops / t / 1e9 if t else best.gflops
    if summary.previous:
        key, then, now = summary.previous
        out["previous_retimed"] = {"config_key": key, "gflops_then": then, "gflops_now": now}
    tuned = summary.baselines.get("tuned")
    if tuned:
        out["speedup"] = {k: tuned / v for k, v in summary.baselines.items() if v and k != "tuned"}
    return out


def _duration(s: float) -> str:
    return f"{int(s // 60)}m{s % 60:04.1f}s" if s >= 60 else f"{s:.1f}s"


def format_summary(summary, report: dict, args) -> str:
    """The text summary ``tune`` prints at the end, from the ``summary``, its ``report`` (:func:`summary_json`)
    and the command line ``args`` (whose ``--preset``, ``--size`` and ``--db`` go into the suggested next
    command); a line says when measurements were taken while the machine was busy
    (:func:`tensorlang.tuner.measure.disturbance.busy_note`).

    Example::

        >>> import argparse
        >>> from collections import Counter
        >>> from tensorlang.tuner.records.database import Database, Record
        >>> from tensorlang.tuner.task import Task
        >>> from tensorlang.tuner.tuning import TuneSummary
        >>> t = Task.create("matmul", preset="small", threads=1)
        >>> best = Record(t.key, "matmul", t.sizes, t.target, t.space.config_at(0), None, times=(1e-4,),
        ...               flops=t.flops, strategy="random", trial=3)
        >>> s = TuneSummary(t, best, trials_before=10, trials_done=6, valid=5, errors=Counter(wrong=1), wall_s=3.0)
        >>> print(format_summary(s, summary_json(s, Database(":memory:")),
        ...                      argparse.Namespace(preset="small", size=None, db=None, plot=None)))
        tuned matmul: 16 trials (6 in this run), 2.00 measured per second
          best: 0.100 ms, 2.0 GFLOPS (one measurement; trial 3, random)
          this run: 5 valid, 1 invalid (1 wrong)
        next: tensorlang best matmul --preset small   (or: tensorlang bench matmul --preset small)
    """
    from tensorlang.tuner.bench import BENCH_ROUNDS, contract
    lines = []
    t = summary.task
    total = report["trials"]
    lines.append(f"tuned {t.workload}: {total} trials ({summary.trials_done} in this run), "
                 f"{summary.measured_per_s:.2f} measured per second")
    best = summary.best
    if best is None:
        lines.append("  no valid schedule yet")
    else:
        g = report["best"]["best_gflops"]
        how = f"chosen by re-timing {len(report['retimed'])} configs" if best.config_key() in report["retimed"] \
            else "one measurement"
        lines.append(f"  best: {t.flops / g / 1e9 * 1e3:.3f} ms, {g:.1f} GFLOPS ({how}; trial {best.trial}, "
                     f"{best.strategy})")
    if summary.previous and summary.previous[2] is not None and best is not None \
            and report["best"]["best_gflops"] < summary.previous[1]:
        _, then, now = summary.previous
        lines.append(f"  the last run's best re-timed at {then:.1f} GFLOPS; timed again now, next to the new "
                     f"candidates, it ran at {now:.1f}: the machine's timings moved by "
                     f"{(now / then - 1) * 100:+.0f}%, and the best above is the fastest of today's timings")
    if report.get("speedup"):
        parts = [f"{report['speedup'][k]:.2f}x {name}"
                 for k, name in (("default", "the naive loop nest"), ("auto", "the auto-scheduler's pick"),
                                 ("hand", "the hand schedule"), ("numpy", "numpy")) if k in report["speedup"]]
        lines.append("  timed side by side, the best runs at " + ", ".join(parts))
        lines.append(f"  (timed as `tensorlang bench` times: {contract(t.threads, BENCH_ROUNDS)})")
    names = {"default": "the naive loop nest", "auto": "the auto-scheduler's pick", "hand": "the hand schedule",
             "tuned": "the best schedule"}
    for name, why in summary.baseline_errors.items():
        lines.append(f"  {names.get(name, name)} could not be timed next to it ({why})")
    errors = ", ".join(f"{n} {k}" for k, n in sorted(summary.errors.items())) or "none"
    lines.append(f"  this run: {summary.valid} valid, {sum(summary.errors.values())} invalid ({errors})")
    ph = summary.phase_s
    if ph:
        retime = f", re-time {_duration(ph['retime'])}" if "retime" in ph else ""
        lines.append(f"  wall time {_duration(summary.wall_s)} (propose {_duration(ph['propose'])}, "
                     f"build {_duration(ph['build'])}, run {_duration(ph['run'])}{retime})")
    note = summary.disturbance.note()
    if note:
        lines.append(f"  {note}")
    if summary.exhausted:
        lines.append("  the search space is used up: every allowed config has been measured")
    if args.plot and "plot_error" not in report:
        lines.append(f"  plot: {args.plot}")
    where = f" --preset {args.preset}" if args.preset else f" --size {args.size}" if args.size else ""
    db = f" --db {shlex.quote(args.db)}" if args.db else ""
    lines.append(f"next: tensorlang best {t.workload}{where}{db}   (or: tensorlang bench {t.workload}{where}{db})")
    return "\n".join(lines)


def plot_curve(summary, path: str) -> None:
    """Write a PNG of the best GFLOPS so far against the trial number (``summary.curve``) to ``path``, with a
    dashed line for each baseline that was timed (the best record's re-timing dotted).

    Example::

        from tensorlang.tuner.tuning import Tuner
        summary = Tuner(task, 200).run()
        plot_curve(summary, "matmul-tuning.png")
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.plot(range(1, len(summary.curve) + 1), summary.curve, color="tab:blue", label="best so far (while tuning)")
    colors = {"default": "gray", "hand": "tab:orange", "numpy": "tab:green", "tuned": "tab:blue"}
    for name, value in summary.baselines.items():
        if value:
            label = "best, re-timed" if name == "tuned" else name
            ax.axhline(value, linestyle=":" if name == "tuned" else "--", linewidth=1,
                       color=colors.get(name, "black"), label=f"{label} ({value:.1f})")
    ax.set_xlabel("trial")
    ax.set_ylabel("GFLOPS")
    ax.set_title(f"{summary.task.workload} ({summary.task.threads} threads)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def cmd_best(args) -> dict:
    """``tensorlang best``: the best record of a task and its schedule as Python.

    Prints the record's time and GFLOPS (the figure ``tune``'s summary gives: the final re-timing's median where
    the record's config was re-timed, else its own measurement), knob values and schedule (nothing with
    ``--json``) and returns them as a JSON object; TuneFlagError, with the ``tune`` command to run, when the task
    has no valid record.

    Example::

        tensorlang best matmul --preset 512 --threads 8 --db runs.db
    """
    workload, sizes = workload_and_sizes(args)
    check_threads_flag(args.threads)
    task, rec, path, retimed = best_and_retimed(workload, sizes, args.threads, args.db)
    if rec is None:
        where = f" --preset {args.preset}" if args.preset else f" --size {args.size}" if args.size else ""
        raise TuneFlagError(f"no valid tuning record for {task.describe()} in {path}; "
                            f"run: tensorlang tune {workload.name}{where} --trials 100")
    python = str(record_schedule(rec, task.op, path))
    # the figure tune's summary prints: the re-timing in force, else the record's own measurement
    retimed_s = retimed.get(rec.config_key())
    median = retimed_s or rec.median_s
    out = {"workload": workload.name, "sizes": task.sizes, "threads": task.threads, "task_key": task.key,
           "median_s": median, "gflops": task.flops / median / 1e9, "measured_median_s": rec.median_s,
           "retimed_median_s": retimed_s, "trial": rec.trial, "strategy": rec.strategy, "seed": rec.seed,
           "config": rec.config, "schedule": rec.schedule, "python": python, "times": rec.times}
    if not args.json:
        how = f"chosen by re-timing {len(retimed)} configs" if retimed_s else "one measurement"
        print(f"best of {task.describe()}: {median * 1e3:.3f} ms, {out['gflops']:.1f} GFLOPS ({how}; "
              f"trial {rec.trial}, {rec.strategy}, seed {rec.seed})")
        print("knobs: " + ", ".join(f"{k}={v}" for k, v in rec.config.items()))
        print(python)
    return out
