"""Side-by-side comparison of search strategies: each strategy tunes the same task with several seeds, on
replay of a dataset (seconds, nothing compiled) or live on this machine; the best-so-far curves are summarised.

Per strategy (medians over seeds): trials to reach 90% and 95% of the best known throughput, the area under the
best-so-far curve (the mean over trials of best-so-far / best known, 1.0 = the best from the first trial), the
best reached, and the wall time of one run. The best known is the dataset's best on replay, else the best any
run found. ``plot`` draws the median curve and the spread (25th to 75th percentile) of each strategy.

Example::

    >>> from tensorlang.tuner.records.dataset import Dataset
    >>> ds = Dataset({"workload": "matmul", "sizes": {"M": 64, "N": 48, "K": 32}, "threads": 1,
    ...               "flops": 196608.0, "knobs": {"nr": [16, 32, 48, 64]}},
    ...              [({"nr": v}, float(v), None) for v in (16, 32, 48, 64)])
    >>> cmp = compare(["random", "grid"], trials=4, seeds=2, replay=ds)
    >>> cmp.stats()["grid"]["trials_to_95"]
    4.0
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from tensorlang.errors import UsageError
from tensorlang.tuner.records.dataset import Dataset

__all__ = ["Comparison", "Run", "compare", "live_run", "replay_run"]


@dataclass
class Run:
    """One strategy's run with one seed: the best GFLOPS so far after each trial, and its wall time."""

    strategy: str
    seed: int
    curve: list
    wall_s: float
    valid: int = 0

    def trials_to(self, target: float) -> float:
        """The first trial (1-based) whose best so far reaches ``target`` GFLOPS; inf if none does."""
        for i, v in enumerate(self.curve):
            if v >= target:
                return float(i + 1)
        return math.inf


@dataclass
class Comparison:
    """The runs of every strategy on one task, and the throughput they are measured against."""

    task: object
    runs: dict = field(default_factory=dict)  # strategy -> [Run, ...] in seed order
    trials: int = 0
    best_known: float = 0.0
    source: str = "live"  # "live" or the replayed dataset's path

    def stats(self) -> dict:
        """``{strategy: {trials_to_90, trials_to_95, reached_90, reached_95, auc, best, wall_s}}``: medians over
        seeds (inf where fewer than half the seeds reach the mark), the number of seeds that reached it, the
        median area under the curve, the median best GFLOPS and the mean wall seconds per run."""
        out = {}
        for name, runs in self.runs.items():
            row = {}
            for pct in (90, 95):
                hits = [r.trials_to(self.best_known * pct / 100 * (1 - 1e-12)) for r in runs]
                row[f"trials_to_{pct}"] = float(np.median(hits))
                row[f"reached_{pct}"] = sum(math.isfinite(h) for h in hits)
            row["auc"] = float(np.median([_auc(r.curve, self.trials, self.best_known) for r in runs]))
            row["best"] = float(np.median([r.curve[-1] if r.curve else 0.0 for r in runs]))
            row["wall_s"] = float(np.mean([r.wall_s for r in runs]))
            row["seeds"] = len(runs)
            out[name] = row
        return out

    def table(self) -> str:
        """The statistics as an aligned text table."""
        stats = self.stats()
        n = max((s["seeds"] for s in stats.values()), default=0)
        w = max([16] + [len(name) for name in stats])
        head = (f"{'strategy':<{w}} {'to 90%':>12} {'to 95%':>12} {'AUC':>6} {'best GFLOPS':>12} "
                f"{'wall/run':>9}")
        known = "best of all runs" if self.source == "live" else f"dataset {self.source}"
        lines = [f"best known: {self.best_known:.1f} GFLOPS ({known}); {self.trials} trials, {n} seeds; "
                 "medians over seeds", head, "-" * len(head)]
        for name, s in stats.items():
            lines.append(f"{name:<{w}} {_trials(s['trials_to_90'], s['reached_90'], n):>12} "
                         f"{_trials(s['trials_to_95'], s['reached_95'], n):>12} {s['auc']:>6.3f} "
                         f"{s['best']:>12.1f} {_secs(s['wall_s']):>9}")
        return "\n".join(lines)

    def to_json(self) -> dict:
        """Everything as JSON-ready data: the task, the statistics (inf as null) and every curve."""
        def clean(v):
            return None if isinstance(v, float) and not math.isfinite(v) else v
        return {
            "workload": self.task.workload, "sizes": self.task.sizes, "threads": self.task.threads,
            "source": self.source, "trials": self.trials, "best_known_gflops": self.best_known,
            "stats": {k: {m: clean(v) for m, v in s.items()} for k, s in self.stats().items()},
            "runs": {k: [{"seed": r.seed, "wall_s": r.wall_s, "valid": r.valid, "curve": r.curve} for r in runs]
                     for k, runs in self.runs.items()},
        }

    def plot(self, path: str) -> None:
        """Write a PNG: per strategy, the median best-so-far (as a share of the best known) against trials, with
        the 25th-75th percentile band, and the 90% and 95% marks."""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
        x = np.arange(1, self.trials + 1)
        for name, runs in self.runs.items():
            curves = np.array([_padded(r.curve, self.trials) for r in runs]) / max(self.best_known, 1e-12)
            med = np.median(curves, axis=0)
            lo, hi = np.percentile(curves, 25, axis=0), np.percentile(curves, 75, axis=0)
            line, = ax.plot(x, med, label=name, linewidth=1.6)
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.18, linewidth=0)
        for pct in (0.9, 0.95):
            ax.axhline(pct, color="gray", linestyle=":", linewidth=1)
        ax.set_xlabel("trial")
        ax.set_ylabel("best so far / best known")
        ax.set_ylim(0, 1.02)
        import os
        what = "measured live" if self.source == "live" else f"replay of {os.path.basename(self.source)}"
        ax.set_title(f"{self.task.workload}, {what}: median and 25-75% of "
                     f"{max(len(r) for r in self.runs.values())} seeds", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)


def _padded(curve: list, n: int) -> list:
    """``curve`` cut or extended (with its last value) to ``n`` points."""
    curve = list(curve[:n]) or [0.0]
    return curve + [curve[-1]] * (n - len(curve))


def _auc(curve: list, n: int, best: float) -> float:
    return float(np.mean(_padded(curve, n))) / best if best > 0 else 0.0


def _trials(v: float, reached: int, n: int) -> str:
    text = f"{v:.0f}" if math.isfinite(v) else "never"
    return text if reached == n else f"{text} ({reached}/{n})"


def _secs(s: float) -> str:
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.1f} s"


def replay_run(dataset: Dataset, strategy: str, seed: int, trials: int, cost_model: str = "xgb",
               batch: int = 16, strategy_options: dict | None = None) -> Run:
    """Tune on replay of ``dataset`` with ``strategy`` and ``seed`` for ``trials`` trials (the tuner's own loop,
    a :class:`tensorlang.tuner.research.replay.ReplayRunner` and a database in memory); return the run.

    Example::

        >>> ds = Dataset({"workload": "matmul", "sizes": {"M": 64, "N": 48, "K": 32}, "threads": 1,
        ...               "flops": 196608.0, "knobs": {"nr": [16, 32]}},
        ...              [({"nr": 16}, 1.0, None), ({"nr": 32}, 3.0, None)])
        >>> replay_run(ds, "grid", 0, 2).curve
        [1.0, 3.0]
    """
    from tensorlang.space import config_key
    from tensorlang.tuner.records.database import Database
    from tensorlang.tuner.research.replay import ReplayRunner, replay_task, table_features
    from tensorlang.tuner.tuning import Tuner

    task = replay_task(dataset)
    space = dataset.space(task.space if _knobs_match(dataset, task) else None)
    features = None
    if _uses_features(strategy):
        table = table_features(dataset, task)
        def features(c):
            return table.get(config_key(c))
    t0 = time.perf_counter()
    db = Database(":memory:")
    try:
        tuner = Tuner(task, min(trials, len(dataset)), strategy, cost_model, seed, db, batch=batch,
                      strategy_options=strategy_options, runner=ReplayRunner(dataset), space=space,
                      featurize=features or _no_features)
        summary = tuner.run()
    finally:
        db.close()
    return Run(strategy, seed, summary.curve, time.perf_counter() - t0, summary.valid)


def _no_features(config: dict) -> None:
    return None


def _knobs_match(dataset: Dataset, task) -> bool:
    return {k.name: list(k.values) for k in task.space.knobs} == dataset.knobs


def _uses_features(strategy: str) -> bool:
    from tensorlang.tuner.search.plugins import resolve_strategy
    from tensorlang.tuner.search.strategies import ModelGuidedGenetic, Strategy
    cls = resolve_strategy(strategy)
    # every strategy but the built-in model-free ones may call featurize
    return not (issubclass(cls, Strategy) and cls.__module__ == "tensorlang.tuner.search.strategies"
                and not issubclass(cls, ModelGuidedGenetic))


def live_run(task, strategy: str, seed: int, trials: int, cost_model: str = "xgb", jobs: int | None = None,
             options=None, batch: int = 16, strategy_options: dict | None = None, cluster=None) -> Run:
    """Tune ``task`` on this machine from scratch (a database in memory, so no earlier records count) with
    ``strategy`` and ``seed`` for ``trials`` trials, without the final re-timing; return the run (measured on the
    Dask ``cluster`` when one is given: see :mod:`tensorlang.tuner.measure.cluster`). A Ctrl-C
    that stopped the tuner is raised again as KeyboardInterrupt (no partial run is returned).

    Example::

        from tensorlang.tuner.task import Task
        run = live_run(Task.create("matmul", preset="512"), "xgb-genetic", seed=0, trials=100)
        print(run.curve[-1], run.wall_s)
    """
    from tensorlang.tuner.records.database import Database
    from tensorlang.tuner.tuning import Tuner
    t0 = time.perf_counter()
    db = Database(":memory:")
    try:
        summary = Tuner(task, trials, strategy, cost_model, seed, db, jobs, options, batch=batch,
                        strategy_options=strategy_options, retime_top=0, cluster=cluster).run()
    finally:
        db.close()
    if summary.interrupted:
        raise KeyboardInterrupt
    return Run(strategy, seed, summary.curve, time.perf_counter() - t0, summary.valid)


def compare(strategies, trials: int, seeds: int = 5, replay: Dataset | str | None = None, task=None,
            cost_model: str = "xgb", jobs: int = 1, batch: int = 16, on_run=None, options=None,
            cluster=None) -> Comparison:
    """Run every strategy with seeds ``0 .. seeds-1`` for ``trials`` trials and return the :class:`Comparison`.

    On replay (``replay`` a :class:`Dataset` or its path) nothing is compiled and ``jobs`` processes share the runs;
    otherwise ``task`` (a :class:`tensorlang.tuner.task.Task`) is tuned live, one run after another. ``on_run(run)`` is
    called as each run ends. Strategies are names, entry points or ``package.module:Class`` specs. Live runs measure on
    the Dask ``cluster`` when one is given (an address, a ``distributed.Client`` or a
    :class:`tensorlang.tuner.measure.cluster.Cluster`).

    Example::

        >>> ds = Dataset({"workload": "matmul", "sizes": {"M": 64, "N": 48, "K": 32}, "threads": 1,
        ...               "flops": 196608.0, "knobs": {"nr": [16, 32, 48, 64]}},
        ...              [({"nr": v}, float(v), None) for v in (16, 32, 48, 64)])
        >>> cmp = compare(["grid", "random"], trials=3, seeds=2, replay=ds)
        >>> cmp.best_known, [r.curve for r in cmp.runs["grid"]]
        (64.0, [[16.0, 32.0, 48.0], [16.0, 32.0, 48.0]])
        >>> compare(["grid"], trials=3)
        Traceback (most recent call last):
        ...
        tensorlang.errors.UsageError: compare: give a task to tune live, or a dataset to replay
    """
    strategies = list(strategies)
    if not strategies:
        raise UsageError("compare: name at least one strategy")
    if len(set(strategies)) != len(strategies):
        raise UsageError(f"compare: a strategy is named twice in {strategies}")
    if trials < 1 or seeds < 1:
        raise UsageError(f"compare: trials and seeds must be at least 1, got {trials} and {seeds}")
    from tensorlang.tuner.search.plugins import resolve_strategy
    classes = {name: resolve_strategy(name) for name in strategies}
    if isinstance(replay, str):
        replay = Dataset.load(replay)
    jobs_list = [(name, seed) for name in strategies for seed in range(seeds)]
    if replay is not None:
        from tensorlang.tuner.research.replay import replay_task
        result = Comparison(replay_task(replay), trials=min(trials, len(replay)), best_known=replay.best_gflops,
                            source=replay.path or "in memory")
        runs = _replay_all(replay, classes, jobs_list, trials, cost_model, batch, jobs, on_run)
    else:
        if task is None:
            raise UsageError("compare: give a task to tune live, or a dataset to replay")
        result = Comparison(task, trials=trials)
        runs = []
        for name, seed in jobs_list:
            runs.append(live_run(task, name, seed, trials, cost_model, batch=batch, options=options,
                                 cluster=cluster))
            if on_run:
                on_run(runs[-1])
    for r in runs:
        result.runs.setdefault(r.strategy, []).append(r)
    if replay is None:
        result.best_known = max((r.curve[-1] for r in runs if r.curve), default=0.0)
    return result


def _replay_all(dataset, classes, jobs_list, trials, cost_model, batch, jobs, on_run) -> list[Run]:
    if jobs <= 1 or len(jobs_list) == 1:
        runs = []
        for name, seed in jobs_list:
            runs.append(replay_run(dataset, name, seed, trials, cost_model, batch))
            if on_run:
                on_run(runs[-1])
        return runs
    import multiprocessing
    import pickle
    from concurrent.futures import ProcessPoolExecutor

    from tensorlang.tuner.research.replay import table_features
    features = table_features(dataset) if any(_uses_features(n) for n in classes) else {}
    for name, cls in classes.items():
        try:
            pickle.dumps(cls)
        except Exception:
            raise UsageError(f"compare: strategy {name!r} ({cls!r}) cannot be sent to worker processes; define "
                             "it at the top level of an importable module, or use jobs=1") from None
    ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold OpenMP threads
    done: dict[tuple, Run] = {}
    with ProcessPoolExecutor(max_workers=min(jobs, len(jobs_list)), mp_context=ctx, initializer=_worker_init,
                             initargs=(dataset, classes, features)) as pool:
        futures = {pool.submit(_worker_run, name, seed, trials, cost_model, batch): (name, seed)
                   for name, seed in jobs_list}
        from concurrent.futures import as_completed
        for f in as_completed(futures):
            run = f.result()
            done[futures[f]] = run
            if on_run:
                on_run(run)
    return [done[k] for k in jobs_list]


_WORKER: dict = {}


def _worker_init(dataset, classes, features) -> None:
    from tensorlang.tuner.research.replay import _FEATURES
    from tensorlang.tuner.search.strategies import STRATEGIES
    for name, cls in classes.items():
        STRATEGIES.setdefault(name, cls)
    _FEATURES[(id(dataset), len(dataset))] = (dataset, features)
    _WORKER["dataset"] = dataset


def _worker_run(name, seed, trials, cost_model, batch) -> Run:
    return replay_run(_WORKER["dataset"], name, seed, trials, cost_model, batch)
