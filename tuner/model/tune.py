"""Model tuning: make a whole network fast in one call. ``tune_model(model, trials=2000)``.

1. **Pass variants** (`tuner/model/variants.py`): the model is compiled under each distinct combination of the pass
   options (the layout pass's block or no layout pass; reductions fused with their producers or not), each with
   zero-trial schedules, its outputs compared with torch eager's (computed once; a variant that differs is an
   error and never chosen) and timed end to end; the fastest is stored in the tuning database, where every later
   compile of the model (``tl.from_torch``, ``tl.from_exported``, ``tensorlang compile``) finds it.
2. **Tasks** (`tuner/model/tasks.py`): the chosen variant's kernels, deduplicated, each weighted by its calls.
3. **Rounds** (`tuner/model/task_scheduler.py`): a warm-up round for every task (the auto-scheduler's zero-trial pick
   measured first), then each round goes to the task whose next trials are expected to lower the estimated end-to-end
   latency (``sum(weight x best time)``) the most; or in turn with ``scheduler="round-robin"``. A round proposes configs
   with the task's search strategy, measures them through a runner for that task
   (:class:`tensorlang.tuner.measure.local.LocalRunner` by default; ``runner_factory`` plugs in another, say a
   cluster's) and commits each record to the database as soon as it is measured, as ``tune`` does: Ctrl-C or kill -9
   lose at most the record in flight, and a second run with the same database resumes (trials already spent count).
4. **Transfer** (`tuner/search/transfer.py`, on by default): every task's search asks one cost model trained on the
   records of all tasks (this run's, the database's earlier ones, the shipped datasets).
5. At the end the top configs of the tasks that matter are re-timed, and the model is compiled again (the tuned
   schedules), its outputs compared with torch eager's (``summary.mismatch`` says what differs; ``tensorlang
   tune-model`` then fails) and timed end to end, in alternating rounds, beside the model with the default passes
   and zero-trial schedules (what ``tl.from_torch`` gave before any tuning) and, for a model from torch, torch eager
   and ``torch.compile`` (inductor with weight freezing, as tensorlang folds the weights), every contender on the
   same thread count.

Example::

    from tensorlang import tuner
    summary = tuner.tune_model("resnet18.pt2", trials=2000, db="resnet18.db")
    print(summary.latency)     # {"tuned": {"median_s": ...}, "zero-trial": ..., "torch eager": ..., ...}
    model = tl.from_torch(net, (x,))    # (TENSORLANG_DB=resnet18.db) the tuned variant and schedules
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass

from tensorlang.errors import TensorlangError, UsageError
from tensorlang.tuner.interrupt import check as check_ctrl_c
from tensorlang.tuner.interrupt import stops_on_ctrl_c
from tensorlang.tuner.measure.local import MeasureOptions
from tensorlang.tuner.records.database import Database, default_db_path

from .baselines import reference_outputs, torch_contenders, torch_like_for_like
from .progress import Progress
from .report import ModelTuneSummary, TaskReport, task_table
from .runners import LocalRunners, RunnerPool
from .source import ModelSource, environment, resolve_model, zero_trial_db
from .task_scheduler import STRATEGIES as SCHEDULERS
from .task_scheduler import TaskScheduler, TaskState, round_size
from .task_search import TaskSession
from .tasks import model_tasks, profile_tasks, random_graph_inputs
from .variants import compare_outputs


@dataclass
class ModelTuneOptions:
    """How :func:`tune_model` tunes a model; every field is also a keyword argument of ``tune_model``.

    Attributes:
        strategy, cost_model: each task's search strategy and cost model, as for ``tune`` (names, entry points or
            ``package.module:Class``).
        seed: the seed of the search (same seed, same proposals).
        db: the tuning database (a path or a :class:`~tensorlang.tuner.records.database.Database`; None:
            ``TENSORLANG_DB`` or the cache folder's), opened only once the model is read; compiles of the model read
            it through ``TENSORLANG_DB``, which is set to it while ``tune_model`` runs.
        jobs: build processes per task runner (None: the CPU count).
        threads: the kernels' thread count (None: all CPUs).
        scheduler: "gradient" (each round to the task expected to gain the most) or "round-robin".
        transfer: one cost model shared by the tasks, trained also on earlier records and on `datasets`.
        variants: measure the pass variants first (when the model's imported graph is known and its options were
            not given).
        batch: trials per round.
        timeout: seconds one candidate may run.
        retime_top: configs of each task that matters re-timed at the end (0: none).
        measure: time the model end to end at the end (`rounds` alternating rounds of `min_time` seconds;
            torch.compile too unless `torch_compile` is false).
        progress: the stream progress goes to (None: silent).
        runner_factory: ``runner_factory(task) -> runner`` measures (None: :class:`LocalRunners`), at most
            `max_open_runners` open at once.
        torch_module: the torch module of the torch baselines and the output check (a ``.pt2`` file brings its own).
        datasets: dataset files of the transfer prior (None: the shipped ones).
        name: the model's name in reports (None: the file's or the graph's).
        on_round: ``on_round(summary)`` is called after each round.

    Example::

        >>> ModelTuneOptions(batch=8).with_keywords({"seed": 3}).seed
        3
    """

    strategy: str = "xgb-genetic"
    cost_model: str = "xgb"
    seed: int = 0
    db: object = None
    jobs: int | None = None
    threads: int | None = None
    scheduler: str = "gradient"
    transfer: bool = True
    variants: bool = True
    batch: int = 16
    timeout: float = 10.0
    retime_top: int = 3
    measure: bool = True
    rounds: int = 5
    min_time: float = 0.1
    progress: object = sys.stderr
    runner_factory: object = None
    max_open_runners: int = 4
    torch_module: object = None
    torch_compile: bool = True
    datasets: object = None
    name: str | None = None
    on_round: object = None

    def with_keywords(self, keywords: dict) -> ModelTuneOptions:
        """A copy with the fields `keywords` names replaced; UsageError naming a keyword that is no field.

        >>> ModelTuneOptions().with_keywords({"trails": 5})
        Traceback (most recent call last):
        ...
        tensorlang.errors.UsageError: tune_model has no argument 'trails' (did you mean 'trials'?)
        """
        fields = [f.name for f in dataclasses.fields(self)]
        for key in keywords:
            if key not in fields:
                import difflib
                close = difflib.get_close_matches(key, [*fields, "trials"], n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else f"; arguments: trials, {', '.join(fields)}"
                raise UsageError(f"tune_model has no argument {key!r}{hint}")
        return dataclasses.replace(self, **keywords)


def check_arguments(trials: int, options: ModelTuneOptions) -> None:
    """Refuse bad arguments of ``tune_model`` before anything starts, naming the argument (UsageError).

    >>> check_arguments(0, ModelTuneOptions())
    Traceback (most recent call last):
    ...
    tensorlang.errors.UsageError: trials must be an integer >= 1, got 0
    """
    from tensorlang.threadpool import MAX_THREADS
    from tensorlang.tuner.search.plugins import resolve_cost_model, resolve_strategy
    o = options
    batch, seed, threads, jobs, scheduler, timeout = o.batch, o.seed, o.threads, o.jobs, o.scheduler, o.timeout
    for name, value, low in (("trials", trials, 1), ("batch", batch, 1), ("seed", seed, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise UsageError(f"{name} must be an integer >= {low}, got {value!r}")
    if threads is not None and not (isinstance(threads, int) and 1 <= threads <= MAX_THREADS):
        raise UsageError(f"threads must be an integer from 1 to {MAX_THREADS}, got {threads!r}")
    if jobs is not None and not (isinstance(jobs, int) and jobs >= 1):
        raise UsageError(f"jobs must be an integer >= 1, got {jobs!r}")
    if scheduler not in SCHEDULERS:
        raise UsageError(f"scheduler {scheduler!r}: choose one of {', '.join(SCHEDULERS)}")
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise UsageError(f"timeout must be a positive number of seconds, got {timeout!r}")
    for kind, name, resolve in (("strategy", o.strategy, resolve_strategy), ("cost model", o.cost_model,
                                                                              resolve_cost_model)):
        try:
            resolve(name)
        except ValueError as e:
            raise UsageError(f"{kind}: {e}") from None


@stops_on_ctrl_c
def tune_model(model, trials: int, options: ModelTuneOptions | None = None, **keywords) -> ModelTuneSummary:
    """Tune a whole model until its tasks hold `trials` records in all (see the module docstring); returns a
    :class:`~tensorlang.tuner.model.report.ModelTuneSummary`.

    `model`: a ``tl.Model`` (from ``tl.from_torch``: its pass variants can be measured; give ``torch_module`` for the
    torch baselines), the path of a ``.pt2`` file (``torch.export.save``: variants and torch baselines) or of a saved
    model (``model.save``: its passes are fixed, its kernels are tuned). How it tunes: `options`, a
    :class:`ModelTuneOptions`, and any of its fields as keyword arguments (``strategy``, ``cost_model``, ``seed``,
    ``db``, ``jobs``, ``threads``, ``scheduler``, ``transfer``, ``variants``, ``batch``, ``timeout``,
    ``retime_top``, ``measure``, ``rounds``, ``min_time``, ``progress``, ``runner_factory``, ``max_open_runners``,
    ``torch_module``, ``torch_compile``, ``datasets``, ``name``, ``on_round``), which replace the fields of
    `options`. The pass variants and the tuned model are checked against torch eager's outputs (a model without a
    torch module is not: ``summary.reference`` says so, and its pass variants are not measured); a tuned model
    that differs sets ``summary.mismatch``.

    Example::

        summary = tune_model("mnist.pt2", trials=200, db="mnist.db")
        summary = tune_model(tl.from_torch(net, (x,)), trials=2000, torch_module=net, scheduler="round-robin")
        summary = tune_model("mnist.pt2", 200, ModelTuneOptions(db="mnist.db", threads=2))
    """
    o = (options or ModelTuneOptions()).with_keywords(keywords)
    db, strategy, cost_model, seed, scheduler = o.db, o.strategy, o.cost_model, o.seed, o.scheduler
    threads, rounds, min_time = o.threads, o.rounds, o.min_time
    from tensorlang.threadpool import num_threads
    check_arguments(trials, o)
    t_start = time.perf_counter()
    threads = threads or num_threads()
    where = db.path if isinstance(db, Database) else db if db is not None else default_db_path()
    if os.fspath(where) == ":memory:":
        raise UsageError("model tuning needs a database file: the compiled model reads its tuned schedules and pass "
                         "options from it")
    # the model first: a file that is no model leaves no database behind
    with environment(os.path.expanduser(os.fspath(where)), threads):  # a saved model compiles its kernels as it loads
        src = model if isinstance(model, ModelSource) else resolve_model(model, o.name)
    if o.torch_module is not None:
        src.torch_module = o.torch_module
    database = db if isinstance(db, Database) else Database(db)
    progress = Progress(o.progress, total=trials)
    pool = summary = None
    try:
        summary = ModelTuneSummary(src.name, src.key, threads, str(database.path), trials, scheduler, strategy,
                                   cost_model, seed)
        phase = summary.phase_s
        with environment(database.path, threads):
            t0 = time.perf_counter()
            graph = src.graph()
            inputs = random_graph_inputs(graph, seed)
            reference, summary.reference = reference_outputs(src, inputs, graph.input_spec)
            tuned_model, baseline = _choose_variant(src, database, threads, o.variants, summary, progress, rounds,
                                                    min_time, inputs, reference)
            phase["variants"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            tasks = model_tasks(tuned_model, threads)
            profile_tasks(tuned_model, tasks, inputs)
            phase["profile"] = time.perf_counter() - t0
            shared = None
            if o.transfer and strategy == "xgb-genetic":
                t0 = time.perf_counter()
                shared = _shared_model(database, cost_model, seed, o.datasets, progress)
                summary.transfer = shared.description
                phase["transfer"] = time.perf_counter() - t0
            searches = [TaskSession(t, database, strategy, cost_model, seed, shared) for t in tasks]
            reports = [TaskReport(i, t.name, t.kind, t.key, t.weight, t.flops, s.trials, s.trials, s.best_s,
                                  s.best_s, t.seconds_now, t.schedule_source) for i, (t, s) in
                       enumerate(zip(tasks, searches))]
            summary.tasks = reports
            states = [TaskState(t.weight, t.flops, t.kind, t.seconds_now) for t in tasks]
            sched = TaskScheduler(states, scheduler, round_trials=round_size(o.batch, trials, len(tasks)), seed=seed)
            for i, s in enumerate(searches):
                sched.restore(i, s.earlier_best)
                if s.best_s is not None:  # the time of the record tl.build compiles (its re-timing's, if any)
                    states[i].best_s = s.best_s
            summary.trials_before = sum(s.trials for s in searches)
            summary.curve.append((summary.trials_before, sched.estimated_latency()))
            progress.say(f"tuning {src.name}: {len(tasks)} tasks ({sum(t.weight for t in tasks)} kernels), "
                         f"{trials} trials ({summary.trials_before} done before), {threads} thread"
                         f"{'s' * (threads != 1)}, scheduler {scheduler}, strategy {strategy}, "
                         f"{'transfer: ' + summary.transfer if summary.transfer else 'no transfer'}; records in "
                         f"{database.path}")
            progress.say(task_table(reports, sched.estimated_latency()))
            pool = RunnerPool(o.runner_factory or LocalRunners(o.jobs, MeasureOptions(run_timeout=o.timeout), seed),
                              o.max_open_runners)
            t0 = time.perf_counter()
            progress.start_bar(summary.trials_before)
            try:
                _rounds(sched, searches, reports, pool, summary, progress, trials, o.on_round)
            except KeyboardInterrupt:
                summary.interrupted = True
            finally:
                progress.close()
                # every record a task's search committed counts, those of a round cut short too
                summary.trials_done = sum(s.trials for s in searches) - summary.trials_before
                for s, r in zip(searches, reports):
                    r.trials = s.trials
            phase["tune"] = time.perf_counter() - t0
            if not summary.interrupted:
                t0 = time.perf_counter()
                try:
                    _retime(searches, reports, sched, pool, database, o.retime_top, progress)
                except KeyboardInterrupt:
                    summary.interrupted = True
                phase["retime"] = time.perf_counter() - t0
            pool.close()
            phase.update({f"tune: {k}": v for k, v in pool.phase_s.items()})
            phase["tune: propose"] = sum(s.propose_s for s in searches)
            pool = None
            for s, r in zip(searches, reports):
                r.best_s = s.best_s
                summary.errors.update(s.errors)
            if not summary.interrupted and (o.measure or reference is not None):
                t0 = time.perf_counter()
                tuned = src.compile(summary.variant)
                summary.schedule_sources = dict(Counter(s.kernel.schedule_source for s in tuned.steps))
                if reference is not None:
                    _check_tuned(tuned, inputs, reference, summary, progress)
                phase["compile and check"] = time.perf_counter() - t0
                if o.measure:
                    t0 = time.perf_counter()
                    _measure_end_to_end(src, tuned, summary, baseline, inputs, reference, threads, rounds, min_time,
                                        progress, o.torch_compile)
                    phase["measure"] = time.perf_counter() - t0
    finally:
        if pool is not None:
            pool.close()
        if not isinstance(db, Database):
            database.close()
        if summary is not None:
            summary.wall_s = time.perf_counter() - t_start
    return summary


def _shared_model(database, cost_model, seed, datasets, progress):
    from tensorlang.tuner.search.transfer import SharedCostModel, default_datasets, describe_prior, prior_rows
    prior = prior_rows(database, datasets=default_datasets() if datasets is None else datasets,
                       progress=progress.say)
    shared = SharedCostModel(cost_model, seed, prior)
    shared.description = f"one {cost_model} model for every task, prior {describe_prior(prior)}"
    return shared


def _reuse_or_compile(src: ModelSource, options: dict):
    """The model given, when it was compiled with these pass options; else a fresh compile."""
    if src.model is not None and (src.model.pass_options or {}) == options:
        return src.model
    return src.compile(options)


def _choose_variant(src: ModelSource, database, threads, variants, summary, progress, rounds, min_time, inputs,
                    reference):
    """Settle the pass options; returns (the model to tune, the zero-trial model with the default options, or
    None when it is to be compiled at the end). Variants are measured only against a `reference` (torch eager's
    outputs on `inputs`)."""
    from tensorlang.graph.pass_options import describe_pass_options
    from tensorlang.tuner.model.variants import (
        OutputMismatch,
        candidate_variants,
        measure_variants,
        store_choice,
        stored_choice,
    )
    if src.snapshot is None:
        summary.variant_how = "fixed: a saved model's passes are baked in"
        summary.variant = {}
        return src.model, None
    if src.given_options is not None:
        summary.variant, summary.variant_how = dict(src.given_options), "given"
        return src.model, None
    stored = stored_choice(database, src.key, threads)
    if stored is not None:
        summary.variant, summary.variant_how = stored["options"], "chosen in an earlier run"
        summary.variants = stored["variants"]
        progress.say(f"pass variant: {describe_pass_options(stored['options'])} (chosen in an earlier run)")
        return _reuse_or_compile(src, stored["options"]), None
    if not variants or reference is None:
        summary.variant = {}
        summary.variant_how = ("default (variants not measured)" if not variants else
                               "default (variants not measured: no torch reference to check their outputs against)")
        return _reuse_or_compile(src, {}), None
    candidates = candidate_variants(src.snapshot)
    progress.say(f"pass variants: {len(candidates)} distinct ("
                 f"{'; '.join(describe_pass_options(o) for o, _ in candidates)}); compiling each with zero-trial "
                 "schedules, checking its outputs against torch eager's and timing it end to end ...")
    with environment(zero_trial_db(), threads):
        timed = measure_variants(candidates, inputs, reference, rounds, min_time)
    for e in timed:
        text = "failed: " + e["error"] if e["error"] else f"{e['median_s'] * 1e3:.3f} ms"
        progress.say(f"  {describe_pass_options(e['options'])}: {text}")
    chosen = store_choice(database, src.name, src.key, threads, timed)
    if chosen is None:
        raise OutputMismatch(f"{src.name}: no pass variant could be compiled, run and match torch eager's outputs: "
                             + "; ".join(f"{describe_pass_options(e['options'])}: {e['error']}" for e in timed))
    summary.variant = chosen["options"]
    summary.variant_how = (f"the fastest of {len(timed)} variants measured in this run" if len(timed) > 1 else
                           "the only variant: the passes have no layout or fusion choice in this model")
    summary.variants = timed
    progress.say(f"pass variant: {describe_pass_options(chosen['options'])} (the fastest)")
    baseline = timed[0]["model"] if not timed[0]["options"] else None
    for e in timed:
        e.pop("model", None)
    return src.compile(chosen["options"]), baseline


def _rounds(sched: TaskScheduler, searches: list[TaskSession], reports: list[TaskReport], pool: RunnerPool,
            summary: ModelTuneSummary, progress: Progress, trials: int, on_round) -> None:
    """The rounds: the scheduler picks a task, its search measures a round through the task's runner."""
    spent = summary.trials_before
    warmup = bool(sched.warmup_pending())
    while spent < trials:
        check_ctrl_c()
        i = sched.next_task()
        if i is None:
            summary.exhausted = True
            return
        task_search, report = searches[i], reports[i]
        before = task_search.best_s
        n = min(sched.round_trials, trials - spent)
        try:
            runner = pool.get(task_search.task)
        except (TensorlangError, OSError) as e:  # the task cannot be measured here (its runner cannot start)
            report.note = f"cannot be measured: {type(e).__name__}: {e}"
            progress.say(f"task {i} {report.name}: {report.note}; the other tasks go on")
            sched.record(i, 0, None, exhausted=True)
            continue
        added = task_search.run_round(n, runner)
        spent += added
        summary.trials_done += added
        sched.record(i, added, task_search.best_s, exhausted=task_search.exhausted, times=task_search.round_times)
        if task_search.exhausted:
            report.note = "its search space is used up"
        report.trials, report.best_s = task_search.trials, task_search.best_s
        estimate = sched.estimated_latency()
        summary.curve.append((spent, estimate))
        summary.rounds.append({"task": i, "trials": added, "best_s": task_search.best_s, "estimated_s": estimate,
                               "trials_after": spent})
        warmup_done = warmup and not sched.warmup_pending()
        warmup = warmup and not warmup_done
        if warmup_done:
            summary.warmup_trials = spent
        progress.round(summary, report, added, before, estimate, reports, len(summary.rounds), warmup_done)
        if on_round is not None:
            on_round(summary)


def _retime(searches, reports, sched, pool, database, top: int, progress) -> None:
    """Time the top configs of each task again (longer, interleaved) where it matters: tasks with trials in this
    run that hold at least 1% of the estimated latency."""
    if top <= 0:
        return
    total = sched.estimated_latency() or 1.0
    todo = [(s, r) for s, r in zip(searches, reports)
            if r.trials > r.trials_before and r.weight * (s.best_s or 0.0) >= 0.01 * total]
    if not todo:
        return
    progress.say(f"re-timing the {top} fastest configs of {len(todo)} tasks (3 interleaved rounds each) ...")
    for task_search, report in todo:
        check_ctrl_c()
        candidates = task_search.retime_candidates(top)
        if len(candidates) < 2:
            continue
        try:
            runner = pool.get(task_search.task)
        except (TensorlangError, OSError):
            continue
        if not hasattr(runner, "retime"):
            continue
        results = runner.retime(candidates, 3)
        timed = [(r.config, r.times) for r in results if r.ok and r.times]
        if timed:
            database.add_retimes(task_search.task.key, timed)
            task_search.refresh_best()
            report.best_s = task_search.best_s


def _check_tuned(tuned, inputs, reference, summary: ModelTuneSummary, progress) -> None:
    """Compare the tuned model's outputs with torch eager's; say what differs (``summary.mismatch``)."""
    error, why = compare_outputs(tuned.run_flat(inputs), reference)
    summary.max_rel_error["tuned"] = error
    if why:
        summary.mismatch = f"the tuned model's outputs differ from torch eager's: {why}"
        progress.say(summary.mismatch)


def _measure_end_to_end(src: ModelSource, tuned, summary: ModelTuneSummary, baseline, inputs, reference, threads,
                        rounds, min_time, progress, torch_compile: bool = True) -> None:
    """Time the tuned model end to end beside the zero-trial model (default passes) and torch, every one on
    `threads` threads; record each one's largest output difference from torch eager's (`reference`)."""
    progress.say("timing the tuned model end to end, in alternating rounds ...")
    if baseline is None:
        with environment(zero_trial_db(), threads):
            baseline = src.compile({})
    contenders = [("tuned", lambda: tuned.run_flat(inputs)), ("zero-trial", lambda: baseline.run_flat(inputs))]
    notes = {}
    from tensorlang.tuner.model.variants import time_alternating
    with contextlib.ExitStack() as stack:
        if src.torch_module is not None:
            try:
                stack.enter_context(torch_like_for_like(threads))
                for name, fn in torch_contenders(src.torch_module, inputs, tuned.graph.input_spec, torch_compile):
                    if callable(fn):
                        contenders.append((name, fn))
                    else:
                        notes[name] = fn
            except ImportError:
                notes["torch eager"] = "torch is not installed"
        timed = time_alternating(contenders, rounds, min_time)
        if reference is not None:
            for name, fn in contenders:
                if name != "torch eager" and not timed[name]["error"]:
                    summary.max_rel_error[name] = compare_outputs(fn(), reference)[0]
    for name, why in notes.items():
        timed[name] = {"median_s": None, "times": [], "error": why}
    summary.latency = timed
