"""The tuning loop: propose configs, measure them in isolated processes, commit each record at once, learn.

``tune(...)`` returns the best record of the task (this run's or an earlier one's). Tuning a task again resumes:
earlier records count towards ``trials`` and warm-start the strategy and its cost model.

Example::

    >>> import tempfile, os
    >>> db = os.path.join(tempfile.mkdtemp(), "t.db")
    >>> best = tune("matmul", trials=4, preset="small", strategy="random", db=db, jobs=1, progress=False)
    >>> best.ok and best.gflops > 0
    True
"""
from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

import tensorlang as tl
from tensorlang.errors import UsageError
from tensorlang.space import config_key
from tensorlang.tuner import features as feature_extraction
from tensorlang.tuner.bench import BENCH_ROUNDS, BENCH_RUNS, BENCH_SECONDS
from tensorlang.tuner.interrupt import check as check_ctrl_c
from tensorlang.tuner.interrupt import stops_on_ctrl_c
from tensorlang.tuner.measure.disturbance import Tally
from tensorlang.tuner.measure.local import LocalRunner, MeasureOptions, Result
from tensorlang.tuner.records.database import Database, Record
from tensorlang.tuner.search.costmodel import make_cost_model
from tensorlang.tuner.search.strategies import Observation, Strategy, make_strategy
from tensorlang.tuner.task import Task


@dataclass
class TuneSummary:
    """What a tuning run did: the best record, counts, best-so-far curve, wall time, how it ended, and
    ``disturbance``: how many of its measurements (trials, re-timing rounds, baseline bursts) a busy machine
    disturbed (a :class:`tensorlang.tuner.measure.disturbance.Tally` for the task's threads)."""

    task: Task
    best: Record | None
    trials_before: int
    trials_done: int
    errors: Counter = field(default_factory=Counter)
    valid: int = 0
    curve: list = field(default_factory=list)  # best GFLOPS so far after each trial of the task (all runs)
    wall_s: float = 0.0
    interrupted: bool = False
    exhausted: bool = False
    baselines: dict = field(default_factory=dict)  # name -> GFLOPS (default, hand, numpy)
    retimed: dict = field(default_factory=dict)  # config key -> median seconds of the final re-timing
    baseline_errors: dict = field(default_factory=dict)  # name -> why that baseline has no figure
    phase_s: dict = field(default_factory=dict)  # wall seconds by phase: propose, build, run
    # the previous run's re-timed winner: (config key, GFLOPS then, GFLOPS in this run's re-timing or None)
    previous: tuple | None = None
    disturbance: Tally | None = None

    def __post_init__(self):
        if self.disturbance is None:
            self.disturbance = Tally(self.task.threads)

    @property
    def best_gflops(self) -> float | None:
        """The one best figure to report: the best record's GFLOPS in the final interleaved re-timing where it
        had one, else its own measurement."""
        if self.best is None:
            return None
        t = self.retimed.get(self.best.config_key())
        return self.task.flops / t / 1e9 if t else self.best.gflops

    @property
    def measured_per_s(self) -> float:
        """Candidates this run measured per second of wall time."""
        return self.trials_done / self.wall_s if self.wall_s > 0 else 0.0


def record_of(task: Task, r: Result, strategy: str, seed: int, trial: int) -> Record:
    """The database record of one measured result.

    Example::

        >>> t = Task.create("matmul", preset="small", threads=1)
        >>> record_of(t, Result({"a": 1}, None, (), "schedule", "bad"), "random", 0, 3).error_kind
        'schedule'
    """
    return Record(task_key=task.key, workload=task.workload, sizes=dict(task.sizes), target=dict(task.target),
                  config=dict(r.config), schedule=r.schedule_json, times=tuple(r.times), error_kind=r.error_kind,
                  error=r.error, strategy=strategy, seed=seed, trial=trial, threads=task.threads, flops=task.flops,
                  version=tl.__version__, disturbance=r.disturbance if r.ok else None)


def hand_start_configs(task: Task) -> list[dict]:
    """The configs ``tensorlang tune`` measures before its strategy proposes: the workload's hand config, when
    the task's space is the workload's hand-written one and holds it; in a generated space the rules' zero-trial
    pick, then the pick at each other vector width of its register tiles and with stages moved to the root
    (else none).

    Example::

        >>> from tensorlang.schedules.matmul import hand_tile
        >>> [cfg] = hand_start_configs(Task.create("matmul", preset="1024", threads=2, space="hand"))
        >>> cfg["nr"] == hand_tile()[0], cfg["mr"], cfg["nc"]  # the tile's columns follow the CPU's registers
        (True, 6, 1024)
        >>> hand_start_configs(Task.create("matmul", sizes={"M": 4, "N": 64, "K": 8}, threads=1, space="hand"))
        []
        >>> hand_start_configs(Task.create("matmul", preset="small", threads=1, space="generated"))[0]["C.vec"]
        'j'
    """
    from tensorlang.autosched.space import GeneratedSpace
    if isinstance(task.space, GeneratedSpace):
        return [cfg for cfg in task.space.variants() if task.space.allowed(cfg)]
    w = task.workload_def
    cfg = w.hand_config(task.sizes) if w.hand_config is not None else None
    if cfg is None or w.space is None or not task.space.same_as(w.space(task.sizes)) \
            or not task.space.allowed(cfg):
        return []
    return [cfg]


def start_name(task: Task) -> str:
    """The strategy name the records of :func:`hand_start_configs` carry: "auto" (the rules' pick) in a generated
    space, "hand" in a hand-written one.

    Example::

        >>> start_name(Task.create("matmul", preset="small", threads=1, space="generated"))
        'auto'
    """
    from tensorlang.autosched.space import GeneratedSpace
    return "auto" if isinstance(task.space, GeneratedSpace) else "hand"


def observation_of(rec: Record) -> Observation:
    """A database record as a strategy observation: its config and GFLOPS, or None and its error kind.

    Example::

        >>> observation_of(Record("t", "matmul", {}, {}, {"tile": 8}, None, times=(0.002,), flops=4e6))
        Observation(config={'tile': 8}, gflops=2.0, error_kind=None)
        >>> observation_of(Record("t", "matmul", {}, {}, {"tile": 8}, None, (), "crash", "SIGSEGV")).gflops is None
        True
    """
    return Observation(dict(rec.config), rec.gflops if rec.ok else None, rec.error_kind)


class Tuner:
    """One tuning run of a task. ``run()`` returns a :class:`TuneSummary`; ``on_trial(summary)`` is called
    after each committed record (the CLI draws its progress bar with it).

    ``strategy`` and ``cost_model`` are registered names, entry points or ``package.module:Class`` specs
    (:mod:`tensorlang.tuner.search.plugins`). Offline replay passes a ``runner`` (anything with ``measure(configs,
    on_result)``, ``close()`` and ``phase_s``, say :class:`tensorlang.tuner.research.replay.ReplayRunner`), the
    ``space`` to search and a ``featurize`` function instead of measuring on this machine. ``start`` configs (say
    :func:`hand_start_configs`) are measured first, those without a record yet, and observed by the strategy like its
    own; their records name ``start_name`` as their strategy.
    """

    def __init__(self, task: Task, trials: int, strategy: str = "xgb-genetic", cost_model: str = "xgb",
                 seed: int = 0, db: Database | str | None = None, jobs: int | None = None,
                 options: MeasureOptions | None = None, batch: int = 16, on_trial=None,
                 strategy_options: dict | None = None, runner=None, space=None, featurize=None,
                 retime_top: int = 5, retime_rounds: int = 3, on_retime=None, start=(), start_name: str = "hand",
                 cluster=None):
        if trials < 1:
            raise UsageError(f"trials must be at least 1, got {trials}")
        if batch < 1:
            raise UsageError(f"batch must be at least 1, got {batch}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise UsageError(f"seed must be an integer >= 0, got {seed!r}")
        self.task = task
        self.trials = trials
        self.strategy_name = strategy
        self.seed = seed
        self.db = db if isinstance(db, Database) else Database(db)
        self.jobs = jobs
        self.options = options or MeasureOptions()
        self.batch = batch
        if retime_top < 0 or retime_rounds < 1:
            raise UsageError(f"retime_top must be >= 0 and retime_rounds >= 1, got {retime_top}, {retime_rounds}")
        self.on_trial = on_trial
        try:
            self.start = [dict((space or task.space).validate(c)) for c in start]
        except ValueError as e:
            raise UsageError(f"start: {e}") from None
        self.start_name = start_name
        self._runner = runner
        self.cluster = cluster  # a Dask scheduler address, distributed.Client or measure.cluster.Cluster: measure there
        self.retime_top, self.retime_rounds, self.on_retime = retime_top, retime_rounds, on_retime
        model = make_cost_model(cost_model, seed)
        self.strategy: Strategy = make_strategy(strategy, space or task.space, seed=seed, cost_model=model,
                                                featurize=featurize or _TunerFeatures(self),
                                                **(strategy_options or {}))
        self._local_runner = None  # while run() measures: the runner that also computes features
        # the builder processes rebuild the task's space from the task: they featurize only if that is this one
        self._builders_featurize = (featurize is None and space is None
                                    and task.space.same_as(Task(**task.to_dict()).space))

    def featurize(self, config: dict) -> np.ndarray | None:
        """Features of the config's lowered loop IR (None when the config cannot be scheduled)."""
        return feature_extraction.of_config(self.task.space, self.task.op, self.task.sizes, config)

    def featurize_many(self, configs: list[dict]) -> list[np.ndarray | None]:
        """:meth:`featurize` of each config; while :meth:`run` measures, on the idle builder processes (on a
        cluster, the workers' spare cores): the same vectors, sooner, unless the task's space is not the
        workload's own."""
        if self._local_runner is not None and len(configs) > 1:
            return self._local_runner.features(configs, self.featurize)
        return [self.featurize(c) for c in configs]

    @stops_on_ctrl_c
    def run(self) -> TuneSummary:
        """Tune until the task has ``trials`` records (or the space is exhausted, or Ctrl-C)."""
        t0 = time.perf_counter()
        earlier = self.db.records(self.task.key)
        summary = TuneSummary(self.task, self.db.best(self.task.key), len(earlier), 0)
        best = 0.0
        for rec in earlier:
            best = max(best, rec.gflops or 0.0)
            summary.curve.append(best)
        # records of another space (the task's hand-written one, or an older version of this one) count as trials
        # and for the best, but the strategy learns from those its space holds
        self.strategy.observe([observation_of(r) for r in earlier if self._fits(r.config)])
        measured = {r.config_key() for r in earlier}
        start = [c for c in self.start if config_key(c) not in measured]
        runner = None
        propose_s = 0.0
        try:
            if len(earlier) < self.trials:
                runner = self._runner or self._new_runner()
                if hasattr(runner, "features") and self._builders_featurize:  # LocalRunner, DaskRunner
                    self._local_runner = runner
                if summary.best is not None:
                    runner.best_s = summary.best.median_s
            if hasattr(runner, "submit"):  # a cluster: the next round is proposed while the last one measures
                propose_s += self._run_pipelined(runner, summary, start)
            while not hasattr(runner, "submit") and summary.trials_before + summary.trials_done < self.trials:
                check_ctrl_c()
                tp = time.perf_counter()
                done = summary.trials_before + summary.trials_done
                # small rounds while the model is young (it learns after every round), then `batch`
                size = min(self.batch, 8) if done < 64 else self.batch
                if start:  # the start configs make the first round
                    name, configs, start = self.start_name, start[:self.trials - done], []
                else:
                    name, configs = self.strategy_name, self.strategy.propose(min(size, self.trials - done))
                propose_s += time.perf_counter() - tp
                if not configs:
                    summary.exhausted = True
                    break
                batch: list[Observation] = []
                runner.measure(configs, on_result=lambda r, batch=batch, name=name:
                               batch.append(self._commit(summary, r, name)))
                tp = time.perf_counter()
                self.strategy.observe(batch)
                propose_s += time.perf_counter() - tp
            if runner is not None and summary.trials_done and hasattr(runner, "retime"):
                self._retime(runner, summary)
        except KeyboardInterrupt:
            summary.interrupted = True
        finally:
            if runner is not None:
                self._local_runner = None
                runner.close()
                summary.phase_s = {"propose": propose_s, **runner.phase_s, **summary.phase_s}
            summary.wall_s = time.perf_counter() - t0
        return summary

    def _new_runner(self):
        """The runner of :meth:`run`: a :class:`tensorlang.tuner.measure.cluster.DaskRunner` on ``cluster``, else a
        LocalRunner."""
        if self.cluster is not None:
            from tensorlang.tuner.measure.cluster import DaskRunner
            return DaskRunner(self.task, self.cluster, self.options, seed=self.seed)
        return LocalRunner(self.task, self.jobs, self.options, seed=self.seed)

    def _run_pipelined(self, runner, summary: TuneSummary, start: list) -> float:
        """The loop of :meth:`run` with a runner that measures in the background (``submit`` / ``wait``): two
        rounds in flight, each at least as large as the runner's ``parallelism``; round k is observed (in
        proposal order) once all of it has arrived, then round k+2 is proposed while k+1 measures. Each result is
        committed as it arrives. Returns the seconds spent proposing and observing."""
        from collections import deque
        pending: deque = deque()
        spent = 0.0
        proposed = summary.trials_before + summary.trials_done  # records, plus what is in flight
        while True:
            check_ctrl_c()
            while len(pending) < 2 and not summary.exhausted:
                left = self.trials - proposed
                if left <= 0:
                    break
                tp = time.perf_counter()
                size = max(min(self.batch, 8) if proposed < 64 else self.batch, runner.parallelism)
                if start:
                    name, configs, start = self.start_name, start[:left], []
                else:
                    name, configs = self.strategy_name, self.strategy.propose(min(size, left))
                spent += time.perf_counter() - tp
                if not configs:
                    summary.exhausted = True
                    break
                obs: dict = {}
                batch = runner.submit(configs, on_result=lambda r, obs=obs, name=name:
                                      obs.__setitem__(id(r), self._commit(summary, r, name)))
                pending.append((batch, obs))
                proposed += len(configs)
            if not pending:
                return spent
            batch, obs = pending.popleft()
            runner.wait(batch)
            tp = time.perf_counter()
            self.strategy.observe([obs[id(r)] for r in batch.results])
            spent += time.perf_counter() - tp

    def retime_candidates(self) -> list[dict]:
        """The ``retime_top`` fastest distinct configs of the task's records, plus the winner of its last
        re-timing and the first ``start`` config (either may have measured slower than these in its own short
        trial: the hand config, or the rules' pick, then still competes; the other start configs only by their
        speed). Records whose config today's space refuses (measured with
        another version of the space) are left out: they cannot be built again."""
        out: dict[str, dict] = {}
        valid = sorted((r for r in self.db.records(self.task.key, valid_only=True) if self._fits(r.config)),
                       key=lambda r: (r.median_s, r.id))
        for rec in valid:
            if len(out) >= self.retime_top:
                break
            out.setdefault(rec.config_key(), rec.config)
        measured = {rec.config_key() for rec in valid}
        for c in self.start[:1] if self.retime_top else ():
            if config_key(c) in measured:
                out.setdefault(config_key(c), c)
        last = self.db.retimed(self.task.key, current_only=False)
        if last and self.retime_top:
            winner = min(last, key=lambda k: (last[k], k))
            if winner not in out and self._fits(json.loads(winner)):
                out[winner] = json.loads(winner)
        return list(out.values())

    def _fits(self, config: dict) -> bool:
        try:
            self.task.space.validate(dict(config))
        except UsageError:
            return False
        return True

    def _retime(self, runner, summary: TuneSummary) -> None:
        """Time the top candidates again, longer and interleaved, and let that choose the best record."""
        candidates = self.retime_candidates()
        if len(candidates) < 2:
            return
        last = self.db.retimed(self.task.key, current_only=False)
        if self.on_retime:
            self.on_retime(len(candidates), self.retime_rounds)
        t0 = time.perf_counter()
        results = runner.retime(candidates, self.retime_rounds)
        summary.phase_s["retime"] = time.perf_counter() - t0
        for r in results:
            for d in r.extra.get("round_disturbances", ()):
                summary.disturbance.add(d)
        timed = [(r.config, r.times) for r in results if r.ok and r.times]
        if timed:
            self.db.add_retimes(self.task.key, timed)
            summary.retimed = {config_key(c): float(np.median(t)) for c, t in timed}
            summary.best = self.db.best(self.task.key)
        if last:  # so that a best below the last run's can be explained: the same config, timed again now
            winner = min(last, key=lambda k: (last[k], k))
            now = summary.retimed.get(winner)
            summary.previous = (winner, self.task.flops / last[winner] / 1e9,
                                self.task.flops / now / 1e9 if now else None)

    def _commit(self, summary: TuneSummary, r: Result, strategy: str) -> Observation:
        """Commit one result to the database at once, update the summary, return it as an observation."""
        rec = record_of(self.task, r, strategy, self.seed, summary.trials_before + summary.trials_done)
        self.db.add(rec)
        summary.disturbance.add(rec.disturbance)
        summary.trials_done += 1
        if rec.ok:
            summary.valid += 1
            if summary.best is None or rec.median_s < summary.best.median_s:
                summary.best = rec
        else:
            summary.errors[rec.error_kind] += 1
        summary.curve.append(max(summary.curve[-1] if summary.curve else 0.0, rec.gflops or 0.0))
        if self.on_trial:
            self.on_trial(summary)
        return observation_of(rec)


def measure_baselines(task: Task, best: Record | None, numpy: bool = True, errors: dict | None = None,
                      timeout: float | None = None, tally: Tally | None = None) -> dict:
    """GFLOPS of the default schedule, the zero-trial pick, the hand schedule (if any), numpy as installed and the best
    record, timed exactly as ``tensorlang bench`` times them (:func:`tensorlang.tuner.bench.run_bench`: public calls
    with outputs allocated, the task's threads for every library, rows alternating in ``bench``'s 5 rounds), so
    that ``tune`` and ``bench`` report the same ratios. Every row's output is checked against the reference. A row
    that fails (its output does not match; its warm-up call took more than `timeout` seconds, as the default matmul
    1024 does) gets None, and ``errors[name]`` says why. ``tally`` (say the run's ``TuneSummary.disturbance``) counts
    each burst's disturbance.

    Returns ``{"default": ..., "auto": ..., "hand": ..., "tuned": ..., "numpy": ...}`` (``hand`` only when the
    workload has a hand schedule, ``tuned`` only when ``best`` has a schedule, ``numpy`` only when ``numpy`` is
    true and the task is a built-in workload's).

    Example::

        task = Task.create("matmul", preset="512")
        errors = {}
        gflops = measure_baselines(task, Database().best(task.key), errors=errors)
        print(gflops["tuned"] / gflops["numpy"], errors)
    """
    from tensorlang.tuner.bench import run_bench
    extra = [("tuned", tl.Schedule.from_json(best.schedule, task.op))] if best is not None and best.schedule else []
    report = run_bench(task.workload_def, task.sizes, task.threads, min_runs=BENCH_RUNS,
                       min_time=BENCH_SECONDS, extra=extra, log=lambda *a: None, rounds=BENCH_ROUNDS,
                       libraries=("numpy",) if numpy else (), timeout=timeout, tally=tally)
    out = {}
    for r in report["results"]:
        name = "default" if r["name"] == "naive" else r["name"]
        why = r.get("error") or (None if r["matches_reference"] else f"wrong result: {r['mismatch']}")
        out[name] = None if why else r["gflops"]
        if why and errors is not None:
            errors[name] = why
    return out


def tune(workload, trials: int, preset: str | None = None, sizes: dict | None = None,
         strategy: str = "xgb-genetic", cost_model: str = "xgb", seed: int = 0, db: str | None = None,
         jobs: int | None = None, timeout: float = 10.0, threads: int | None = None, progress: bool = True,
         hand_start: bool = True, space: str = "default", **options) -> Record | None:
    """Tune ``workload`` until its task has ``trials`` records; return the best record (None if none is valid).

    ``workload`` is a built-in workload's name, or any program: its DSL text or an ``Op`` from ``tl.op`` (then
    ``sizes`` gives every size). ``space`` is "default" (the generated space, or a built-in workload's measured
    choice), "generated" or "hand". ``timeout`` bounds one candidate's runs (seconds); the build has its own
    limit. ``progress`` draws a progress bar on stderr. ``hand_start`` measures a starting config first (the hand
    schedule's in a hand-written space, the rules' zero-trial pick in a generated one: :func:`hand_start_configs`),
    so that search starts from it. Other keyword arguments go to :class:`Tuner` (``batch``, ``options``,
    ``strategy_options``, ``cluster``: a Dask scheduler address or ``distributed.Client`` to build and measure on,
    see :mod:`tensorlang.tuner.measure.cluster`).

    Example::

        best = tune("conv2d", trials=200, preset="resnet18_3x3", strategy="xgb-genetic", db="runs.db")
        best = tune(my_dsl_text, trials=200, sizes={"M": 512, "N": 512, "K": 512})
        print(best.gflops, best.config)
    """
    if isinstance(workload, tl.Op) or (isinstance(workload, str) and workload.lstrip().startswith("def ")):
        if preset is not None:
            raise UsageError("tune(program, ...): a program has no presets; give every size with sizes={...}")
        task = Task.from_source(workload, sizes or {}, threads=threads, space=space)
    else:
        task = Task.create(workload, preset=preset, sizes=sizes, threads=threads, space=space)
    opts = options.pop("options", None) or MeasureOptions(run_timeout=timeout)
    bar = ProgressBar(trials, sys.stderr) if progress else None
    tuner = Tuner(task, trials, strategy, cost_model, seed, db, jobs, opts, on_trial=bar.update if bar else None,
                  start=hand_start_configs(task) if hand_start else (), start_name=start_name(task), **options)
    try:
        summary = tuner.run()
    finally:
        if bar:
            bar.close()
        tuner.db.close()
    return summary.best


class ProgressBar:
    """A tqdm bar of trials with the best GFLOPS so far, and an ETA, on ``stream``."""

    def __init__(self, total: int, stream=sys.stderr):
        from tqdm import tqdm
        self._bar = tqdm(total=total, file=stream, unit="trial", dynamic_ncols=True, leave=True)
        self._started = False

    def update(self, summary: TuneSummary) -> None:
        """Move the bar to the summary's trial count and show its best GFLOPS."""
        if not self._started:
            self._bar.n = summary.trials_before
            self._bar.last_print_n = summary.trials_before
            self._started = True
        self._bar.update(summary.trials_before + summary.trials_done - self._bar.n)
        best = summary.best.gflops if summary.best else 0.0
        self._bar.set_postfix_str(f"best {best:.1f} GFLOPS, {sum(summary.errors.values())} invalid", refresh=False)

    def close(self) -> None:
        """Finish the bar."""
        self._bar.close()


class _TunerFeatures:
    """The strategy's ``featurize``: :meth:`Tuner.featurize`, with ``many`` = :meth:`Tuner.featurize_many`."""

    def __init__(self, tuner: Tuner):
        self.tuner = tuner

    def __call__(self, config: dict) -> np.ndarray | None:
        return self.tuner.featurize(config)

    def many(self, configs: list[dict]) -> list[np.ndarray | None]:
        return self.tuner.featurize_many(configs)
