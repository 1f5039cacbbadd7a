"""The tuner's commands of the ``tensorlang`` command line: ``tune`` and ``best`` (``tensorlang/cli.py`` parses
the flags and reports errors; these functions do the work and return the JSON object of ``--json``).

    tensorlang tune WORKLOAD --trials N [--preset P | --size K=V,...] [--strategy S] [--cost-model M]
                    [--seed N] [--db PATH] [--jobs N] [--timeout S] [--threads N] [--plot FILE] [--json]
    tensorlang best WORKLOAD [--preset P | --size K=V,...] [--threads N] [--db PATH] [--json]
"""
from __future__ import annotations

import os
import shlex
import sys

from tuner.task import Task


class TuneFlagError(ValueError):
    """A bad flag of ``tune`` or ``best``: the message names the flag and the legal values."""


def check_tune_flags(args) -> None:
    """Refuse bad values of ``tune``'s flags before anything starts, naming the flag and what is legal."""
    if args.trials < 1:
        raise TuneFlagError(f"--trials: must be at least 1, got {args.trials}")
    check_plugin_flags([args.strategy], [args.cost_model])
    if args.jobs is not None and args.jobs < 1:
        raise TuneFlagError(f"--jobs: must be at least 1, got {args.jobs}")
    if args.threads is not None and args.threads < 1:
        raise TuneFlagError(f"--threads: must be at least 1, got {args.threads}")
    if not args.timeout > 0:
        raise TuneFlagError(f"--timeout: must be a positive number of seconds, got {args.timeout}")
    if args.sampler is not None:
        import optuna
        if args.strategy != "bayesian":
            raise TuneFlagError(f"--sampler: only with --strategy bayesian, not {args.strategy!r}")
        legal = [n for n in dir(optuna.samplers) if n.endswith("Sampler") and not n.startswith("Base")]
        if args.sampler not in legal:
            raise TuneFlagError(f"--sampler: optuna has no sampler {args.sampler!r}; samplers: {', '.join(legal)}")
    if args.batch < 1:
        raise TuneFlagError(f"--batch: must be at least 1, got {args.batch}")
    if args.retime_top < 0:
        raise TuneFlagError(f"--retime-top: must be at least 0, got {args.retime_top}")
    check_plot_flag(args.plot)


def check_plot_flag(path: str | None) -> None:
    """Refuse a ``--plot`` file that is not a .png or whose folder does not exist (None: no plot)."""
    if path is None:
        return
    if not path.lower().endswith(".png"):
        raise TuneFlagError(f"--plot: the file must end in .png, got {path!r}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise TuneFlagError(f"--plot: folder {folder!r} does not exist")


def check_plugin_flags(strategies, cost_models, strategy_flag: str = "--strategy",
                       cost_model_flag: str = "--cost-model") -> None:
    """Resolve every strategy and cost model name (registered, entry point or ``package.module:Class``) before
    anything starts; TuneFlagError naming the flag otherwise."""
    from tuner.plugins import resolve_cost_model, resolve_strategy
    for flag, names, resolve in ((strategy_flag, strategies, resolve_strategy),
                                 (cost_model_flag, cost_models, resolve_cost_model)):
        for name in names:
            try:
                resolve(name)
            except ValueError as e:
                raise TuneFlagError(f"{flag}: {e}") from None


def _open_db(path):
    from tuner.database import Database, DatabaseError
    try:
        return Database(path)
    except DatabaseError as e:
        raise TuneFlagError(f"--db: {e}") from None


def cmd_tune(args, workload, sizes) -> dict:
    """``tensorlang tune``: tune, show progress, then print a summary (and write a plot)."""
    from tuner.measure import MeasureOptions
    from tuner.tuning import ProgressBar, Tuner, hand_start_configs, measure_baselines
    check_tune_flags(args)
    task = Task.create(workload.name, sizes=sizes, threads=args.threads)
    db = _open_db(args.db)
    say = (lambda *a: print(*a, file=sys.stderr)) if args.json else print
    say(f"tuning {task.describe()}: {args.trials} trials, strategy {args.strategy}, cost model {args.cost_model}, "
        f"seed {args.seed}")
    say(f"  {task.space.describe().splitlines()[0]}; records in {db.path}")
    start = [] if args.no_hand_start else hand_start_configs(task)
    if start:
        say("  the hand schedule's config is measured first (--no-hand-start: search from nothing)")
    elif not args.no_hand_start and workload.hand_schedule is not None:
        say("  the hand schedule is not a config of this space at these sizes: search starts from nothing")
    bar = ProgressBar(args.trials, sys.stderr)

    def on_retime(n: int, rounds: int) -> None:
        bar.close()
        which = "the fastest and the hand config" if start else "the fastest"
        say(f"re-timing {n} configs ({which}), {rounds} interleaved rounds ...")

    tuner = Tuner(task, args.trials, args.strategy, args.cost_model, args.seed, db, args.jobs,
                  MeasureOptions(run_timeout=args.timeout), batch=args.batch, on_trial=bar.update,
                  strategy_options={"sampler": args.sampler} if args.sampler else None, retime_top=args.retime_top,
                  on_retime=on_retime, start=start)
    try:
        summary = tuner.run()
    finally:
        bar.close()
    if summary.interrupted:
        say(f"interrupted: {summary.trials_done} trials measured in this run, all of them kept in {db.path}")
        say(f"resume with: {resume_command(args)}")
    if summary.best is not None and not args.no_baselines and not summary.interrupted:
        say("timing the default schedule, the hand schedule, the best schedule and numpy ...")
        summary.baselines = measure_baselines(task, summary.best, jobs=1, errors=summary.baseline_errors)
    if args.plot:
        plot_curve(summary, args.plot)
    report = summary_json(summary, db)
    if not args.json:
        print(format_summary(summary, report, args))
    db.close()
    return report


def resume_command(args) -> str:
    """The command line that continues this tuning run (the same flags: earlier records count)."""
    return "tensorlang " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "tensorlang tune ..."


def summary_json(summary, db) -> dict:
    """The JSON object ``tune --json`` prints."""
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
    }
    tuned = summary.baselines.get("tuned")
    if tuned:
        out["speedup"] = {k: tuned / v for k, v in summary.baselines.items() if v and k != "tuned"}
    return out


def _duration(s: float) -> str:
    return f"{int(s // 60)}m{s % 60:04.1f}s" if s >= 60 else f"{s:.1f}s"


def format_summary(summary, report: dict, args) -> str:
    """The text summary ``tune`` prints at the end."""
    lines = []
    t = summary.task
    total = report["trials"]
    lines.append(f"tuned {t.workload}: {total} trials ({summary.trials_done} in this run), "
                 f"{summary.measured_per_s:.2f} measured per second")
    best = summary.best
    if best is None:
        lines.append("  no valid schedule yet")
    else:
        lines.append(f"  best: {best.median_s * 1e3:.3f} ms, {best.gflops:.1f} GFLOPS "
                     f"(trial {best.trial}, {best.strategy})")
    if report.get("speedup"):
        b = summary.baselines
        parts = [f"{report['speedup'][k]:.2f}x {name} ({b[k]:.1f} GFLOPS)"
                 for k, name in (("default", "the default schedule"), ("hand", "the hand schedule"),
                                 ("numpy", "numpy")) if k in report["speedup"]]
        lines.append(f"  best re-timed at {b['tuned']:.1f} GFLOPS: " + ", ".join(parts))
    names = {"default": "the default schedule", "hand": "the hand schedule", "tuned": "the best schedule"}
    for name, why in summary.baseline_errors.items():
        lines.append(f"  {names.get(name, name)} could not be timed next to it ({why})")
    if summary.retimed and best is not None:
        ranked = sorted(summary.retimed.values())
        mine = summary.retimed.get(best.config_key())
        lines.append(f"  chosen by re-timing {len(ranked)} configs: {t.flops / mine / 1e9:.1f} GFLOPS "
                     f"re-timed (the others {', '.join(f'{t.flops / m / 1e9:.1f}' for m in ranked[1:])})"
                     if mine else f"  re-timed {len(ranked)} configs")
    errors = ", ".join(f"{n} {k}" for k, n in sorted(summary.errors.items())) or "none"
    lines.append(f"  this run: {summary.valid} valid, {sum(summary.errors.values())} invalid ({errors})")
    ph = summary.phase_s
    if ph:
        retime = f", re-time {_duration(ph['retime'])}" if "retime" in ph else ""
        lines.append(f"  wall time {_duration(summary.wall_s)} (propose {_duration(ph['propose'])}, "
                     f"build {_duration(ph['build'])}, run {_duration(ph['run'])}{retime})")
    if summary.exhausted:
        lines.append("  the search space is used up: every allowed config has been measured")
    if args.plot:
        lines.append(f"  plot: {args.plot}")
    where = f" --preset {args.preset}" if args.preset else f" --size {args.size}" if args.size else ""
    db = f" --db {shlex.quote(args.db)}" if args.db else ""
    lines.append(f"next: tensorlang best {t.workload}{where}{db}   (or: tensorlang bench {t.workload}{where}{db})")
    return "\n".join(lines)


def plot_curve(summary, path: str) -> None:
    """Write a PNG of the best GFLOPS so far against the trial number."""
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
    A database file that does not exist yet is not created."""
    from tuner.database import default_db_path
    task = Task.create(workload.name, sizes=sizes, threads=threads)
    path = db_path or default_db_path()
    if path != ":memory:" and not os.path.exists(path):
        return task, None, path
    db = _open_db(db_path)
    try:
        return task, db.best(task.key), db.path
    finally:
        db.close()


def cmd_best(args, workload, sizes) -> dict:
    """``tensorlang best``: the best record of a task and its schedule as Python."""
    import tensorlang as tl
    if args.threads is not None and args.threads < 1:
        raise TuneFlagError(f"--threads: must be at least 1, got {args.threads}")
    task, rec, path = best_record(workload, sizes, args.threads, args.db)
    if rec is None:
        where = f" --preset {args.preset}" if args.preset else f" --size {args.size}" if args.size else ""
        raise TuneFlagError(f"no valid tuning record for {task.describe()} in {path}; "
                            f"run: tensorlang tune {workload.name}{where} --trials 100")
    python = str(tl.Schedule.from_json(rec.schedule, task.op))
    out = {"workload": workload.name, "sizes": task.sizes, "threads": task.threads, "task_key": task.key,
           "median_s": rec.median_s, "gflops": rec.gflops, "trial": rec.trial, "strategy": rec.strategy,
           "seed": rec.seed, "config": rec.config, "schedule": rec.schedule, "python": python, "times": rec.times}
    if not args.json:
        print(f"best of {task.describe()}: {rec.median_s * 1e3:.3f} ms, {rec.gflops:.1f} GFLOPS "
              f"(trial {rec.trial}, {rec.strategy}, seed {rec.seed})")
        print("knobs: " + ", ".join(f"{k}={v}" for k, v in rec.config.items()))
        print(python)
    return out
