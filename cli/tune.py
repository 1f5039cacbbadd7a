"""The tuner's commands of the ``tensorlang`` command line: ``tune`` and ``best`` (``tuner/cli.py`` parses
the flags and reports errors; these functions do the work and return the JSON object of ``--json``).

    tensorlang tune WORKLOAD --trials N [--preset P | --size K=V,...] [--strategy S] [--cost-model M]
                    [--seed N] [--db PATH] [--jobs N] [--timeout S] [--threads N] [--plot FILE] [--json]
                    [--cluster tcp://HOST:8786] [--cluster-timeout S]
    tensorlang best WORKLOAD [--preset P | --size K=V,...] [--threads N] [--db PATH] [--json]
"""
from __future__ import annotations

import os
import shlex
import sys

from tensorlang.errors import TensorlangError, UsageError
from tuner.task import Task


class TuneFlagError(UsageError):
    """A bad flag of ``tune`` or ``best``: the message names the flag and the legal values."""


def check_tune_flags(args) -> None:
    """Refuse bad values of ``tune``'s flags before anything starts, naming the flag and what is legal.

    ``args`` is the parsed ``tensorlang tune`` command line; each bad value is a TuneFlagError. The strategy and
    cost model must resolve (:func:`check_plugin_flags`), ``--sampler`` must name an optuna sampler and goes with
    ``--strategy bayesian`` only, and the ``--plot`` file must be one that can be written (:func:`check_plot_flag`).

    Example::

        >>> from tuner.cli import make_parser
        >>> check_tune_flags(make_parser().parse_args(["tune", "matmul", "--trials", "64"]))
        >>> check_tune_flags(make_parser().parse_args(["tune", "matmul", "--trials", "64", "--jobs", "0"]))
        Traceback (most recent call last):
        ...
        tuner.tune_cli.TuneFlagError: --jobs: must be at least 1, got 0
    """
    if args.trials < 1:
        raise TuneFlagError(f"--trials: must be at least 1, got {args.trials}")
    check_plugin_flags([args.strategy], [args.cost_model])
    check_jobs_flag(args.jobs)
    check_threads_flag(args.threads)
    if not args.timeout > 0:
        raise TuneFlagError(f"--timeout: must be a positive number of seconds, got {args.timeout}")
    if args.sampler is not None:
        from tuner.strategies import sampler_problem, optuna_samplers
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


def check_plot_flag(path: str | None) -> None:
    """Refuse a ``--plot`` file that is not a .png, whose folder does not exist, or that cannot be written (None:
    no plot). The check opens the file as the plot will: permissions do not tell (root may write a read-only
    folder, and nobody may write some that say otherwise); a file it creates it removes again.

    Example::

        >>> check_plot_flag(None)
        >>> check_plot_flag("/no/such/folder/curve.png")
        Traceback (most recent call last):
        ...
        tuner.tune_cli.TuneFlagError: --plot: folder '/no/such/folder' does not exist
    """
    if path is None:
        return
    if not path.lower().endswith(".png"):
        raise TuneFlagError(f"--plot: the file must end in .png, got {path!r}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise TuneFlagError(f"--plot: folder {folder!r} does not exist")
    if os.path.isdir(path):
        raise TuneFlagError(f"--plot: {path!r} is a folder, not a file")
    existed = os.path.exists(path)
    try:
        with open(path, "ab"):
            pass
    except OSError as e:
        raise TuneFlagError(f"--plot: cannot write {path!r}: {e.strerror or e}") from None
    if not existed:
        os.unlink(path)


#: The most build processes ``--jobs`` starts (each is a Python process of about 100 MB).
MAX_JOBS = 256


def check_threads_flag(threads: int | None, flag: str = "--threads") -> None:
    """Refuse a thread count (None: not given) below 1 or above :data:`tensorlang.threadpool.MAX_THREADS`, the
    most threads the thread pool runs, with a TuneFlagError naming ``flag``.

    Example::

        >>> check_threads_flag(None); check_threads_flag(8)
        >>> check_threads_flag(100000)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        tuner.tune_cli.TuneFlagError: --threads: must be at most 1024 (the most threads the thread pool ...), got 100000
    """
    from tensorlang.threadpool import MAX_THREADS
    _check_count(threads, flag, MAX_THREADS, "the most threads the thread pool runs")


def check_jobs_flag(jobs: int | None, flag: str = "--jobs") -> None:
    """Refuse a number of build processes (None: not given, the CPU count) below 1 or above :data:`MAX_JOBS`
    with a TuneFlagError naming ``flag``.

    Example::

        >>> check_jobs_flag(None); check_jobs_flag(4)
        >>> check_jobs_flag(0)
        Traceback (most recent call last):
        ...
        tuner.tune_cli.TuneFlagError: --jobs: must be at least 1, got 0
    """
    _check_count(jobs, flag, MAX_JOBS, "each job is a Python process")


def _check_count(value: int | None, flag: str, most: int, why: str) -> None:
    if value is None:
        return
    if value < 1:
        raise TuneFlagError(f"{flag}: must be at least 1, got {value}")
    if value > most:
        raise TuneFlagError(f"{flag}: must be at most {most} ({why}), got {value}")


def check_plugin_flags(strategies, cost_models, strategy_flag: str = "--strategy",
                       cost_model_flag: str = "--cost-model") -> None:
    """Resolve every strategy and cost model name (registered, entry point or ``package.module:Class``) before
    anything starts; TuneFlagError naming the flag otherwise (``strategy_flag`` or ``cost_model_flag``: the
    commands that take lists pass ``--strategies`` or ``--models``).

    Example::

        >>> check_plugin_flags(["random", "tuner.strategies:GridSearch"], ["xgb"])
        >>> check_plugin_flags(["annealing"], [], strategy_flag="--strategies")
        Traceback (most recent call last):
        ...
        tuner.tune_cli.TuneFlagError: --strategies: unknown strategy 'annealing'; strategies: random, grid, ...
    """
    from tuner.plugins import resolve_cost_model, resolve_strategy
    for flag, names, resolve in ((strategy_flag, strategies, resolve_strategy),
                                 (cost_model_flag, cost_models, resolve_cost_model)):
        for name in names:
            try:
                resolve(name)
            except ValueError as e:
                raise TuneFlagError(f"{flag}: {e}") from None


def _db_source(path) -> str:
    """Where the tuning database path came from, for error messages: ``--db``, ``TENSORLANG_DB`` or the
    default."""
    if path is not None:
        return "--db"
    return "TENSORLANG_DB" if os.environ.get("TENSORLANG_DB", "").strip() else "the default tuning database"


def _open_db(path, read_only: bool = False):
    from tuner.database import Database, DatabaseError
    _check_db_flag(path)
    try:
        return Database(path, read_only=read_only)
    except DatabaseError as e:
        raise TuneFlagError(f"{_db_source(path)}: {e}") from None


def task_for(workload, sizes: dict, threads: int | None, space: str = "default") -> Task:
    """The tuning task of a workload from the command line: a built-in one by name, a user's program (from a
    DSL file) by its text.

    Example::

        >>> import schedules
        >>> task_for(schedules.get("matmul"), {"M": 64, "N": 48, "K": 32}, 1).key == \\
        ...     Task.create("matmul", preset="small", threads=1).key
        True
    """
    import schedules
    if schedules.WORKLOADS.get(workload.name) is workload:
        return Task.create(workload.name, sizes=sizes, threads=threads, space=space)
    return Task.from_source(workload.source, sizes, threads=threads, space=space)


def _check_db_flag(path) -> None:
    if path is not None and not str(path).strip():
        raise TuneFlagError("--db: the path is empty; name a tuning database file")


def _existing_db(db_path):
    """(the path ``db_path`` or the default resolves to, the opened Database or None when no file is there yet:
    reading never creates one); TuneFlagError naming where the path came from."""
    from tuner.database import DatabaseError, default_db_path
    _check_db_flag(db_path)
    try:
        path = db_path or default_db_path()
    except DatabaseError as e:
        raise TuneFlagError(f"{_db_source(db_path)}: {e}") from None
    if path != ":memory:" and not os.path.exists(os.path.expanduser(path)):
        return path, None
    return path, _open_db(db_path, read_only=path != ":memory:")


def record_schedule(rec, op, path):
    """The :class:`tensorlang.Schedule` of a tuning record ``rec`` of the program ``op``, read from the database
    at ``path``; TuneFlagError naming the database and the record when its schedule cannot be rebuilt (a damaged
    file, or one written for another version of the program).

    Example::

        >>> import tensorlang as tl
        >>> from tuner.database import Record
        >>> op = tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]")
        >>> good = Record("t", "f", {}, {}, {}, tl.schedule(op, N=4).to_json(), (1.0,), id=3)
        >>> record_schedule(good, op, "runs.db").sizes
        {'N': 4}
        >>> record_schedule(Record("t", "f", {}, {}, {}, "{}", (1.0,), id=3, trial=7), op, "runs.db")
        Traceback (most recent call last):
        ...
        tuner.tune_cli.TuneFlagError: tuning database runs.db: the schedule of record 3 (trial 7) cannot be rebuilt: ...
    """
    import tensorlang as tl
    from tensorlang.errors import TensorlangError
    try:
        return tl.Schedule.from_json(rec.schedule, op)
    except TensorlangError as e:
        raise TuneFlagError(f"tuning database {path}: the schedule of record {rec.id} (trial {rec.trial}) cannot be "
                            f"rebuilt: {e}") from None


def cmd_tune(args, workload, sizes) -> dict:
    """``tensorlang tune``: tune, show progress, then print a summary (and write a plot).

    ``args`` is the parsed command line, ``workload`` the :class:`schedules.Workload` and ``sizes`` its sizes.
    The flags are checked first (:func:`check_tune_flags`); the hand schedule's config is measured first unless
    ``--no-hand-start``; after the run the default schedule, the hand schedule, the best record and numpy are
    timed side by side unless ``--no-baselines`` or the run was interrupted. With ``--json`` the progress goes to
    stderr and the text summary is left out (the caller prints the returned JSON). Returns :func:`summary_json`.

    Example::

        tensorlang tune conv2d --preset resnet18_3x3 --trials 200 --plot conv2d.png
    """
    check_tune_flags(args)
    task = task_for(workload, sizes, args.threads, getattr(args, "space", "default"))
    db = _open_db(args.db)
    from tuner.cluster_cli import open_cluster
    cluster = None
    try:
        cluster = open_cluster(args)  # None: measure on this machine
        return _tune(args, workload, task, db, cluster)
    finally:
        if cluster is not None:
            cluster.close()
        db.close()


def _tune(args, workload, task, db, cluster=None) -> dict:
    from tuner.measure import MeasureOptions
    from tensorlang.space import config_key
    from tuner.tuning import ProgressBar, Tuner, hand_start_configs, measure_baselines, start_name
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
        if cluster is None:  # (tuner.cluster needs Dask's distributed, an extra)
            raise
        from tuner.cluster import ClusterError
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


def resume_command(args) -> str:
    """The command line that continues this tuning run, quoted for the shell: the arguments
    :func:`tuner.cli.main` was given (``args.argv``; this process's ``sys.argv`` when there is none). The
    same flags resume, since earlier records count.

    Example::

        >>> from tuner.cli import make_parser
        >>> argv = ["tune", "matmul", "--trials", "500", "--db", "my tuning.db"]
        >>> args = make_parser().parse_args(argv)
        >>> args.argv = argv
        >>> resume_command(args)
        "tensorlang tune matmul --trials 500 --db 'my tuning.db'"
    """
    argv = getattr(args, "argv", None)
    argv = sys.argv[1:] if argv is None else argv
    return "tensorlang " + " ".join(shlex.quote(a) for a in argv) if argv else "tensorlang tune ..."


def summary_json(summary, db) -> dict:
    """The JSON object ``tune --json`` prints: the task, the trial counts (all runs, and this run's valid and
    invalid ones by error kind), timings, the best record, the re-timed medians by config key (this run's, else
    those ``db`` holds for the task), the baselines' GFLOPS and, where the best was timed with them, its speedup
    over each, and ``disturbance``: how many of the run's measurements a busy machine disturbed
    (:meth:`tuner.disturbance.Tally.to_json`).

    Example::

        >>> from tuner.database import Database, Record
        >>> from tuner.tuning import TuneSummary
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
    (:func:`tuner.disturbance.busy_note`).

    Example::

        >>> import argparse
        >>> from collections import Counter
        >>> from tuner.database import Database, Record
        >>> from tuner.tuning import TuneSummary
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
    from tuner.bench import contract
    from tuner.tuning import BASELINE_ROUNDS
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
        lines.append(f"  (timed as `tensorlang bench` times: {contract(t.threads, BASELINE_ROUNDS)})")
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

        from tuner.tuning import Tuner
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


def best_record(workload, sizes, threads, db_path):
    """(task, its best valid record or None, the database path) for the workload at sizes, this CPU, threads.
    A database file that does not exist yet is not created. ``db_path`` None: :func:`tuner.database.default_db_path`.

    Example::

        >>> import schedules
        >>> task, rec, path = best_record(schedules.get("matmul"), {"M": 64, "N": 48, "K": 32}, 1, "/no/such.db")
        >>> task.describe().split(" on ")[0], rec, path
        ('matmul(M=64, N=48, K=32)', None, '/no/such.db')
    """
    task, rec, path, _ = _best_and_retimed(workload, sizes, threads, db_path)
    return task, rec, path


def _best_and_retimed(workload, sizes, threads, db_path):
    task = task_for(workload, sizes, threads)
    path, db = _existing_db(db_path)
    if db is None:
        return task, None, path, {}
    try:
        return task, db.best(task.key), db.path, db.retimed(task.key)
    finally:
        db.close()


def cmd_best(args, workload, sizes) -> dict:
    """``tensorlang best``: the best record of a task and its schedule as Python.

    Prints the record's time and GFLOPS (the figure ``tune``'s summary gives: the final re-timing's median where
    the record's config was re-timed, else its own measurement), knob values and schedule (nothing with
    ``--json``) and returns them as a JSON object; TuneFlagError, with the ``tune`` command to run, when the task
    has no valid record.

    Example::

        tensorlang best matmul --preset 512 --threads 8 --db runs.db
    """
    check_threads_flag(args.threads)
    task, rec, path, retimed = _best_and_retimed(workload, sizes, args.threads, args.db)
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
