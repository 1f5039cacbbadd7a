"""Model tuning: make a whole network fast in one call. ``tune_model(model, trials=2000)``.

1. **Pass variants** (`tuner/model_variants.py`): the model is compiled under each distinct combination of the pass
   options (the layout pass's block or no layout pass; reductions fused with their producers or not), each with
   zero-trial schedules, its outputs compared with torch eager's (computed once; a variant that differs is an
   error and never chosen) and timed end to end; the fastest is stored in the tuning database, where every later
   compile of the model (``tl.from_torch``, ``tl.from_exported``, ``tensorlang compile``) finds it.
2. **Tasks** (`tuner/model_tasks.py`): the chosen variant's kernels, deduplicated, each weighted by its calls.
3. **Rounds** (`tuner/task_scheduler.py`): a warm-up round for every task (the auto-scheduler's zero-trial pick
   measured first), then each round goes to the task whose next trials are expected to lower the estimated
   end-to-end latency (``sum(weight x best time)``) the most; or in turn with ``scheduler="round-robin"``.
   A round proposes configs with the task's search strategy, measures them through a runner for that task
   (:class:`tuner.measure.LocalRunner` by default; ``runner_factory`` plugs in another, say a cluster's) and
   commits each record to the database as soon as it is measured, as ``tune`` does: Ctrl-C or kill -9 lose at most
   the record in flight, and a second run with the same database resumes (trials already spent count).
4. **Transfer** (`tuner/transfer.py`, on by default): every task's search asks one cost model trained on the
   records of all tasks (this run's, the database's earlier ones, the shipped datasets).
5. At the end the top configs of the tasks that matter are re-timed, and the model is compiled again (the tuned
   schedules), its outputs compared with torch eager's (``summary.mismatch`` says what differs; ``tensorlang
   tune-model`` then fails) and timed end to end, in alternating rounds, beside the model with the default passes
   and zero-trial schedules (what ``tl.from_torch`` gave before any tuning) and, for a model from torch, torch eager
   and ``torch.compile`` (inductor with weight freezing, as tensorlang folds the weights), every contender on the
   same thread count.

Example::

    import tuner
    summary = tuner.tune_model("resnet18.pt2", trials=2000, db="resnet18.db")
    print(summary.latency)     # {"tuned": {"median_s": ...}, "zero-trial": ..., "torch eager": ..., ...}
    model = tl.from_torch(net, (x,))    # (TENSORLANG_DB=resnet18.db) the tuned variant and schedules
"""
from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field

import numpy as np

from tensorlang.errors import TensorlangError, UsageError
from tensorlang.space import config_key
from tuner import features as feature_extraction
from tuner.interrupt import check as check_ctrl_c
from tuner.interrupt import stops_on_ctrl_c
from tuner.database import Database, default_db_path
from tuner.measure import LocalRunner, MeasureOptions
from tuner.model_tasks import ModelTask, model_tasks, profile_tasks, random_graph_inputs
from tuner.model_variants import compare_outputs, flat_outputs
from tuner.task import Task
from tuner.task_scheduler import STRATEGIES as SCHEDULERS
from tuner.task_scheduler import TaskScheduler, TaskState, round_size
from tuner.tuning import hand_start_configs, observation_of, record_of, start_name


# ---------------------------------------------------------------- the report


@dataclass
class TaskReport:
    """One task in the summary: index, name, kind, key, weight, FLOPs of one call, trials before this run and now,
    best seconds before this run and now (None: no valid record), seconds of one call in the profile run at the
    start, the schedule source its kernels had then, and what stopped it (``note``: a runner that could not
    start, a search space used up).

    Example::

        >>> TaskReport(0, "f_0123456789", "f", "k", 2, 1e6, 0, 16, None, 1e-3, 2e-3, "auto").gflops
        1.0
    """

    index: int
    name: str
    kind: str
    key: str
    weight: int
    flops: float
    trials_before: int
    trials: int
    best_s_before: float | None
    best_s: float | None
    seconds_now: float | None
    schedule_source: str
    note: str = ""

    @property
    def gflops(self) -> float | None:
        """GFLOPS of the best record."""
        return self.flops / self.best_s / 1e9 if self.best_s else None


@dataclass
class ModelTuneSummary:
    """What ``tune_model`` did (``to_json()`` is what ``tensorlang tune-model --json`` prints).

    ``curve``: the estimated end-to-end latency after every round, ``[(trials of the model's tasks, seconds)]``,
    starting with the estimate before this run's first round; ``rounds``: one dict per round (task, trials,
    best); ``latency``: the end-to-end timings at the end, name -> ``{"median_s", "times", "error"}``
    ("tuned", "zero-trial" and, for a model from torch, "torch eager" and :data:`TORCH_COMPILE`); ``variants``:
    the pass variants measured (``{"options", "median_s", "error", "max_rel_error"}``), ``variant`` the options
    used and ``variant_how`` how they were chosen. ``reference`` is what the outputs were compared with ("torch
    eager", or why they were not), ``max_rel_error`` each compiled contender's largest difference from it (relative
    to max(1, max |reference|), :func:`tuner.model_variants.compare_outputs`) and ``mismatch`` what differs when the
    tuned model's outputs are not within the tolerance ("" when they are).
    """

    model: str
    graph_key: str | None
    threads: int
    db: str
    trials: int
    scheduler: str
    strategy: str
    cost_model: str
    seed: int
    transfer: str | None = None
    trials_before: int = 0
    trials_done: int = 0
    tasks: list = field(default_factory=list)
    variant: dict = field(default_factory=dict)
    variant_how: str = ""
    variants: list = field(default_factory=list)
    curve: list = field(default_factory=list)
    warmup_trials: int | None = None  # the trial count when every task had had its first round
    rounds: list = field(default_factory=list)
    latency: dict = field(default_factory=dict)
    reference: str = ""
    max_rel_error: dict = field(default_factory=dict)
    mismatch: str = ""
    schedule_sources: dict = field(default_factory=dict)  # the tuned model's kernels by schedule source
    errors: Counter = field(default_factory=Counter)
    interrupted: bool = False
    exhausted: bool = False
    wall_s: float = 0.0
    phase_s: dict = field(default_factory=dict)

    @property
    def estimated_s(self) -> float | None:
        """The estimated end-to-end latency now (the curve's last point)."""
        return self.curve[-1][1] if self.curve else None

    def speedups(self) -> dict:
        """Each other contender's median over the tuned model's (how many times faster the tuned model is).

        >>> s = ModelTuneSummary("m", None, 2, "db", 8, "gradient", "xgb-genetic", "xgb", 0)
        >>> s.latency = {"tuned": {"median_s": 0.01}, "torch eager": {"median_s": 0.02}}
        >>> s.speedups()
        {'torch eager': 2.0}
        """
        tuned = (self.latency.get("tuned") or {}).get("median_s")
        if not tuned:
            return {}
        return {k: v["median_s"] / tuned for k, v in self.latency.items() if k != "tuned" and v.get("median_s")}

    def to_json(self) -> dict:
        """The summary as one JSON-able dict.

        >>> s = ModelTuneSummary("m", None, 2, "db", 8, "gradient", "xgb-genetic", "xgb", 0)
        >>> sorted(s.to_json())[:4]
        ['cost_model', 'curve', 'db', 'errors_this_run']
        """
        return {
            "model": self.model, "graph_key": self.graph_key, "threads": self.threads, "db": self.db,
            "trials": self.trials_before + self.trials_done, "trials_target": self.trials,
            "trials_this_run": self.trials_done, "scheduler": self.scheduler, "strategy": self.strategy,
            "cost_model": self.cost_model, "seed": self.seed, "transfer": self.transfer,
            "variant": self.variant, "variant_how": self.variant_how,
            "variants": [{k: v for k, v in e.items() if k != "model"} for e in self.variants],
            "tasks": [dict(t.__dict__, gflops=t.gflops) for t in self.tasks],
            "estimated_s": {"start": self.curve[0][1] if self.curve else None, "end": self.estimated_s},
            "curve": [list(p) for p in self.curve], "warmup_trials": self.warmup_trials, "rounds": self.rounds,
            "latency": {k: {"median_s": v.get("median_s"), "error": v.get("error")} for k, v in self.latency.items()},
            "speedup": self.speedups(), "reference": self.reference, "max_rel_error": self.max_rel_error,
            "mismatch": self.mismatch,
            "schedule_sources": self.schedule_sources,
            "errors_this_run": dict(self.errors), "interrupted": self.interrupted, "exhausted": self.exhausted,
            "wall_s": self.wall_s, "phase_s": self.phase_s,
        }


# ---------------------------------------------------------------- one task's search


class _Features:
    """A task's ``featurize(config)``, with ``many(configs)`` on the current runner's idle builder processes."""

    def __init__(self, task: Task):
        self.task = task
        self.runner = None
        self._builders_ok = task.space.same_as(Task(**task.to_dict()).space)

    def __call__(self, config: dict):
        return feature_extraction.of_config(self.task.space, self.task.op, self.task.sizes, config)

    def many(self, configs: list[dict]) -> list:
        if self.runner is not None and self._builders_ok and len(configs) > 1 and hasattr(self.runner, "features"):
            return self.runner.features(configs, self)
        return [self(c) for c in configs]


class TaskSession:
    """The search of one task across the rounds it gets: its strategy (warm-started from the task's records in the
    database), the start configs not yet measured (the zero-trial pick), its trial count and best record. Each
    :meth:`run_round` measures through the runner it is given and commits each record at once.

    Example::

        session = TaskSession(model_task, db, strategy="xgb-genetic", cost_model="xgb", seed=0)
        added = session.run_round(16, runner)
    """

    def __init__(self, mtask: ModelTask, db: Database, strategy: str = "xgb-genetic", cost_model: str = "xgb",
                 seed: int = 0, shared=None):
        from tuner.costmodel import make_cost_model
        from tuner.strategies import make_strategy
        from tuner.transfer import TransferGenetic
        self.mtask, self.task, self.db, self.seed = mtask, mtask.task, db, seed
        self.strategy_name = strategy
        self.featurize = _Features(self.task)
        model = shared.view(self.task.key) if shared is not None else make_cost_model(cost_model, seed)
        if shared is not None and strategy == "xgb-genetic":
            self.strategy = TransferGenetic(self.task.space, seed, cost_model=model, featurize=self.featurize)
        else:
            self.strategy = make_strategy(strategy, self.task.space, seed=seed, cost_model=model,
                                          featurize=self.featurize)
        earlier = db.records(self.task.key)
        self.strategy.observe([observation_of(r) for r in earlier if self._fits(r.config)])
        self.trials = len(earlier)
        self.earlier_best = [r.median_s if r.ok else None for r in earlier]
        measured = {r.config_key() for r in earlier}
        self.start_configs = hand_start_configs(self.task)
        self.start = [c for c in self.start_configs if config_key(c) not in measured]
        self.start_name = start_name(self.task)
        self.refresh_best()
        self.errors: Counter = Counter()
        self.exhausted = False
        self.propose_s = 0.0  # seconds in the strategy (proposing, learning), for the summary
        self.round_times: list[float | None] = []  # the last round's measured seconds (None: invalid), in order

    def _fits(self, config: dict) -> bool:
        try:
            self.task.space.validate(dict(config))
        except UsageError:
            return False
        return True

    def refresh_best(self) -> None:
        """Read the task's best record from the database (the one ``tl.build`` would compile) and its time: the
        median of its last re-timing where one is in force, else its own measurement."""
        self.best = self.db.best(self.task.key)
        self.best_s: float | None = None
        if self.best is not None:
            self.best_s = self.db.retimed(self.task.key).get(self.best.config_key(), self.best.median_s)

    def run_round(self, n: int, runner) -> int:
        """Measure up to `n` configs (the start configs first, then the strategy's proposals) through `runner`,
        committing each record as it comes; returns how many were measured (0: the space is used up)."""
        self.featurize.runner = runner
        self.round_times = []
        done = 0
        try:
            if self.best_s is not None and hasattr(runner, "best_s"):
                runner.best_s = self.best_s
            if self.start:
                configs, self.start = self.start[:n], self.start[n:]
                done += self._measure(runner, configs, self.start_name)
            if n - done > 0:
                t0 = time.perf_counter()
                configs = self.strategy.propose(n - done)
                self.propose_s += time.perf_counter() - t0
                if not configs:
                    self.exhausted = done == 0
                else:
                    done += self._measure(runner, configs, self.strategy_name)
        finally:
            self.featurize.runner = None
        return done

    def _measure(self, runner, configs: list[dict], name: str) -> int:
        batch = []
        runner.measure(configs, on_result=lambda r: batch.append(self._commit(r, name)))
        t0 = time.perf_counter()
        self.strategy.observe(batch)
        self.propose_s += time.perf_counter() - t0
        return len(batch)

    def _commit(self, result, name: str):
        rec = record_of(self.task, result, name, self.seed, self.trials)
        self.db.add(rec)
        self.trials += 1
        self.round_times.append(rec.median_s if rec.ok else None)
        if rec.ok:
            if self.best_s is None or rec.median_s < self.best_s:
                self.best, self.best_s = rec, rec.median_s
        else:
            self.errors[rec.error_kind] += 1
        return observation_of(rec)

    def retime_candidates(self, top: int) -> list[dict]:
        """The `top` fastest distinct configs of the task's valid records (those its space holds), and the start
        configs that were measured."""
        out: dict[str, dict] = {}
        valid = sorted((r for r in self.db.records(self.task.key, valid_only=True) if self._fits(r.config)),
                       key=lambda r: (r.median_s, r.id))
        for rec in valid:
            if len(out) >= top:
                break
            out.setdefault(rec.config_key(), rec.config)
        measured = {r.config_key() for r in valid}
        for c in self.start_configs[:1]:  # the pick (or hand config); the other start configs by speed
            if config_key(c) in measured:
                out.setdefault(config_key(c), c)
        return list(out.values())


class LocalRunners:
    """The default ``runner_factory``: a :class:`tuner.measure.LocalRunner` per task, which keeps each task's
    expected outputs (the unscheduled loop nest's) so that a runner opened again for the task does not compute
    them again. Any callable ``factory(task) -> runner`` (the runner has ``measure(configs, on_result)`` and
    ``close()``; ``retime`` and ``features`` are used when it has them) can replace it.

    Example::

        factory = LocalRunners(jobs=2, options=MeasureOptions(run_timeout=10), seed=0)
        runner = factory(task)
    """

    def __init__(self, jobs: int | None = None, options: MeasureOptions | None = None, seed: int = 0):
        self.jobs, self.options, self.seed = jobs, options or MeasureOptions(), seed
        self.expected: dict[str, list] = {}

    def __call__(self, task: Task):
        runner = LocalRunner(task, self.jobs, self.options, expected=self.expected.get(task.key), seed=self.seed)
        self.expected[task.key] = runner.expected
        return runner


class RunnerPool:
    """Runners by task, at most `max_open` open at once (the least recently used is closed first): each holds
    worker processes, and the scheduler may return to a task many rounds later.

    Example::

        pool = RunnerPool(LocalRunners(jobs=2), max_open=2)
        runner = pool.get(task)
        pool.close()
    """

    def __init__(self, factory, max_open: int = 4):
        self.factory, self.max_open = factory, max(1, max_open)
        self.open: OrderedDict = OrderedDict()
        self.phase_s: Counter = Counter()  # the runners' seconds by phase (build, run), and starting them

    def get(self, task: Task):
        """The open runner of `task`, or a new one."""
        if task.key in self.open:
            self.open.move_to_end(task.key)
            return self.open[task.key]
        while len(self.open) >= self.max_open:
            _, old = self.open.popitem(last=False)
            self._close(old)
        t0 = time.perf_counter()
        runner = self.factory(task)
        self.phase_s["start runners"] += time.perf_counter() - t0
        self.open[task.key] = runner
        return runner

    def _close(self, runner) -> None:
        self.phase_s.update(getattr(runner, "phase_s", None) or {})
        runner.close()

    def close(self) -> None:
        """Close every open runner."""
        while self.open:
            _, r = self.open.popitem(last=False)
            self._close(r)


# ---------------------------------------------------------------- the model


@contextlib.contextmanager
def environment(db_path, threads: int):
    """Within: ``TENSORLANG_DB`` is `db_path` (where ``tl.build`` looks for tuned schedules and ``compile_graph``
    for pass options) and ``TENSORLANG_NUM_THREADS`` is `threads` (the kernels' thread count).

    Example::

        with environment("runs.db", 2):
            model = tl.load_model("net.tlm")      # the tuned schedules of runs.db, for 2 threads
    """
    saved = {k: os.environ.get(k) for k in ("TENSORLANG_DB", "TENSORLANG_NUM_THREADS")}
    os.environ["TENSORLANG_DB"] = os.fspath(db_path)
    os.environ["TENSORLANG_NUM_THREADS"] = str(threads)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass
class ModelSource:
    """Where the model came from: a compiled ``model`` (or None while only its imported graph is known), the imported
    graph (``snapshot``: JSON and constants; None for a saved model, whose passes are baked in), its key, its name,
    the torch module for the baselines (None without torch) and the pass options the caller fixed (None: choose).

    Example::

        src = resolve_model("net.pt2")
    """

    model: object
    snapshot: tuple | None
    key: str | None
    name: str
    torch_module: object = None
    given_options: dict | None = None

    def graph(self):
        """The imported graph (a saved model's optimised one): its inputs are the model's flat inputs."""
        if self.snapshot is None:
            return self.model.graph
        from tensorlang.graph.serialize import graph_from_json
        return graph_from_json(*self.snapshot)

    def compile(self, options: dict | None):
        """A fresh model of the imported graph under pass `options` (None: those the database chose)."""
        from tensorlang.graph import compile_graph
        from tensorlang.graph.serialize import graph_from_json, graph_to_json
        if self.snapshot is None:  # a saved model: its optimised graph again, kernels chosen now
            from tensorlang.graph.model import Model
            graph = self.model.graph
            return Model(graph_from_json(graph_to_json(graph), {c.name: c.data for c in graph.constants}),
                         model_bytes=self.model.model_bytes)
        data, constants = self.snapshot
        return compile_graph(graph_from_json(data, constants), pass_options=options)


def _is_saved_model(path: str) -> bool:
    import zipfile
    try:
        with zipfile.ZipFile(path) as z:
            return "graph.json" in z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def resolve_model(model, name: str | None = None) -> ModelSource:
    """The :class:`ModelSource` of what ``tune_model`` was given: a ``tl.Model``, a ``.pt2`` file (torch.export.save)
    or a saved model (``model.save``); UsageError naming the file otherwise. ``tune_model`` takes its result too.

    Example::

        >>> resolve_model("/no/such/model.pt2")
        Traceback (most recent call last):
        ...
        tensorlang.errors.UsageError: /no/such/model.pt2: no such file
    """
    from tensorlang.graph.model import Model
    if isinstance(model, Model):
        given = model.pass_options if model.pass_options_source == "given" else None
        return ModelSource(model, model.source_graph, model.graph_key, name or model.graph.name, None, given)
    if not isinstance(model, (str, os.PathLike)):
        raise UsageError(f"tune_model takes a tl.Model or the path of a .pt2 file or saved model, not "
                         f"{type(model).__name__}")
    path = os.fspath(model)
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    label = name or os.path.splitext(os.path.basename(path))[0] or "model"
    if _is_saved_model(path):
        import tensorlang as tl
        m = tl.load_model(path)
        return ModelSource(m, None, None, label)
    try:
        from tensorlang.frontend.torch_import import graph_from_exported, load_pt2
    except ImportError:
        raise UsageError(f"{path}: reading .pt2 files needs PyTorch (pip install 'tensorlang[torch]')") from None
    from tensorlang.graph.pass_options import graph_key
    from tensorlang.graph.serialize import graph_to_json
    from tensorlang.graph.verify import verify
    ep = load_pt2(path)
    graph = graph_from_exported(ep, name=label)
    verify(graph)
    snapshot = (graph_to_json(graph), {c.name: c.data for c in graph.constants})
    return ModelSource(None, snapshot, graph_key(graph), label, ep.module())


def _zero_trial_db() -> str:
    """A database path where nothing is: within ``environment`` of it, kernels get zero-trial schedules and the
    default pass options."""
    return os.path.join(tempfile.mkdtemp(prefix="tensorlang-zero-trial-"), "none.db")


#: the name of torch.compile's row: inductor with weight freezing, which folds the weights (and batch norms into
#: convolutions) at compile time as tensorlang's passes do, so that both compile the same thing
TORCH_COMPILE = "torch.compile (inductor, freezing)"


@contextlib.contextmanager
def torch_like_for_like(threads: int):
    """Within: torch runs on `threads` threads (``torch.set_num_threads``) and inductor freezes the weights
    (``torch._inductor.config.freezing``); both are put back after. Compile and time torch within it.

    Example::

        with torch_like_for_like(2):
            for name, fn in torch_contenders(module, inputs, model.graph.input_spec):
                ...
    """
    import torch
    import torch._inductor.config as inductor_config
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with inductor_config.patch(freezing=True):
            yield
    finally:
        torch.set_num_threads(saved)


def torch_arguments(inputs: list, spec: dict | None) -> tuple[tuple, dict]:
    """The positional and keyword arguments of the torch module whose flat inputs (in graph input order) are
    `inputs` (numpy arrays), as the graph's ``input_spec`` arranges them.

    >>> import numpy as np
    >>> args, kwargs = torch_arguments([np.zeros(2, np.float32)], None)
    >>> [tuple(a.shape) for a in args], kwargs
    ([(2,)], {})
    """
    import torch

    from tensorlang.graph.structure import leaf_count, unflatten
    tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    if spec and spec.get("call"):
        n = leaf_count(spec["items"][0])
        return tuple(unflatten(spec["items"][0], tensors[:n])), unflatten(spec["items"][1], tensors[n:])
    if spec and spec.get("kind") in ("tuple", "list"):
        return tuple(unflatten(spec, tensors)), {}
    return tuple(tensors), {}


def torch_contenders(module, inputs: list, spec: dict | None, inductor: bool = True) -> list:
    """(name, callable or error text) for torch eager and (with `inductor`) :data:`TORCH_COMPILE` on the model's
    flat `inputs`; call it, and time the callables, within :func:`torch_like_for_like` (inductor compiles on the
    first call, made here).

    Example::

        with torch_like_for_like(threads):
            contenders = torch_contenders(ep.module(), inputs, model.graph.input_spec)
    """
    import torch
    args, kwargs = torch_arguments(inputs, spec)
    out = []

    def eager():
        with torch.no_grad():
            return module(*args, **kwargs)
    out.append(("torch eager", eager))
    if not inductor:
        return out
    try:
        compiled = torch.compile(module)
        with torch.no_grad():
            compiled(*args, **kwargs)

        def inductor():
            with torch.no_grad():
                return compiled(*args, **kwargs)
        out.append((TORCH_COMPILE, inductor))
    except Exception as e:  # inductor needs a C++ toolchain; say why it did not run
        out.append((TORCH_COMPILE, f"failed here: {type(e).__name__}: {str(e).splitlines()[0][:160]}"))
    return out


def _reference(src: ModelSource, inputs: list, spec: dict | None) -> tuple[list | None, str]:
    """Torch eager's outputs on `inputs` (flat arrays) and "torch eager"; or None and why there are none."""
    if src.torch_module is None:
        return None, ("not checked: a saved model has no torch module to compare with" if src.snapshot is None else
                      "not checked: no torch module to compare with (give torch_module)")
    import torch
    args, kwargs = torch_arguments(inputs, spec)
    with torch.no_grad():
        return flat_outputs(src.torch_module(*args, **kwargs)), "torch eager"


# ---------------------------------------------------------------- progress


class Progress:
    """What ``tune_model`` shows while it works, on `stream` (stderr): a line per stage, a tqdm bar of trials with
    the estimated end-to-end latency and the current task, a line per round, and every `table_every` rounds (and
    after the warm-up) a table of each task's best. ``None`` stream: silent.

    Example::

        progress = Progress(sys.stderr, total=2000)
    """

    def __init__(self, stream=sys.stderr, total: int = 0, initial: int = 0, table_every: int = 10):
        self.stream, self.total, self.initial, self.table_every = stream, total, initial, table_every
        self._bar = None

    def say(self, text: str) -> None:
        """Print one line (above the bar, if there is one)."""
        if self.stream is None:
            return
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def start_bar(self, initial: int) -> None:
        """Start the bar of trials at `initial`."""
        if self.stream is None:
            return
        from tqdm import tqdm
        self._bar = tqdm(total=self.total, initial=min(initial, self.total), file=self.stream, unit="trial",
                         dynamic_ncols=True, leave=True)

    def round(self, summary: ModelTuneSummary, task: TaskReport, added: int, before: float | None,
              estimate: float, tasks: list[TaskReport], rounds: int, warmup_done: bool) -> None:
        """After a round of `task`: move the bar, print the round's line (and the table now and then)."""
        if self.stream is None:
            return
        if self._bar is not None:
            self._bar.update(added)
            self._bar.set_postfix_str(f"est. {estimate * 1e3:.3f} ms, task {task.index} {task.name}", refresh=True)
        best = "-" if task.best_s is None else f"{task.best_s * 1e3:.4f} ms"
        change = ""
        if before and task.best_s and task.best_s < before:
            change = f" ({(task.best_s / before - 1) * 100:+.0f}%)"
        self.say(f"round {rounds}: task {task.index} {task.name} x{task.weight}: {added} trials ({task.trials} in "
                 f"all), best {best}{change}; estimated end-to-end {estimate * 1e3:.3f} ms")
        if warmup_done or (self.table_every and rounds % self.table_every == 0):
            self.say(task_table(tasks, estimate))

    def close(self) -> None:
        """Finish the bar."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def task_table(tasks: list[TaskReport], estimate: float | None = None) -> str:
    """Each task's trials, best time, GFLOPS and share of the estimated latency, one row each.

    >>> print(task_table([TaskReport(0, "f_0123456789", "f", "k", 2, 1e6, 0, 16, None, 1e-3, 2e-3, "auto")]))
      #  task          calls  trials  best ms  GFLOPS  share
      0  f_0123456789  2      16      1.0000   1.0     100.0%
    """
    total = estimate or sum(t.weight * (t.best_s or t.seconds_now or 0.0) for t in tasks) or 1.0
    rows = [("#", "task", "calls", "trials", "best ms", "GFLOPS", "share")]
    for t in tasks:
        cost = t.best_s or t.seconds_now or 0.0
        rows.append((str(t.index), t.name, str(t.weight), str(t.trials),
                     "-" if t.best_s is None else f"{t.best_s * 1e3:.4f}",
                     "-" if t.gflops is None else f"{t.gflops:.1f}", f"{100 * t.weight * cost / total:.1f}%"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


# ---------------------------------------------------------------- tune_model


def check_arguments(trials, batch, seed, threads, jobs, scheduler, strategy, cost_model, timeout) -> None:
    """Refuse bad arguments of ``tune_model`` before anything starts, naming the argument (UsageError).

    >>> check_arguments(0, 16, 0, None, None, "gradient", "xgb-genetic", "xgb", 10.0)
    Traceback (most recent call last):
    ...
    tensorlang.errors.UsageError: trials must be an integer >= 1, got 0
    """
    from tensorlang.threadpool import MAX_THREADS
    from tuner.plugins import resolve_cost_model, resolve_strategy
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
    for kind, name, resolve in (("strategy", strategy, resolve_strategy), ("cost model", cost_model,
                                                                            resolve_cost_model)):
        try:
            resolve(name)
        except ValueError as e:
            raise UsageError(f"{kind}: {e}") from None


@stops_on_ctrl_c
def tune_model(model, trials: int, *, strategy: str = "xgb-genetic", cost_model: str = "xgb", seed: int = 0,
               db=None, jobs: int | None = None, threads: int | None = None, scheduler: str = "gradient",
               transfer: bool = True, variants: bool = True, batch: int = 16, timeout: float = 10.0,
               retime_top: int = 3, measure: bool = True, rounds: int = 5, min_time: float = 0.1,
               progress=sys.stderr, runner_factory=None, max_open_runners: int = 4, torch_module=None,
               torch_compile: bool = True, datasets=None, name: str | None = None,
               on_round=None) -> ModelTuneSummary:
    """Tune a whole model until its tasks hold `trials` records in all (see the module docstring); returns a
    :class:`ModelTuneSummary`.

    `model`: a ``tl.Model`` (from ``tl.from_torch``: its pass variants can be measured; give `torch_module` for the
    torch baselines), the path of a ``.pt2`` file (``torch.export.save``: variants and torch baselines) or of a saved
    model (``model.save``: its passes are fixed, its kernels are tuned). `strategy` and `cost_model` are those of
    ``tune``; `scheduler` "gradient" or "round-robin"; `transfer` shares one cost model between the tasks, trained
    also on earlier records and on `datasets` (default: the shipped ones); `variants` measures the pass variants
    first (when the model's imported graph is known and its options were not given); `batch` trials per round;
    `timeout` seconds one candidate may run; `retime_top` configs of each task that matters are re-timed at the
    end (0: none); `measure` times the model end to end at the end (`rounds` alternating rounds of `min_time`
    seconds; torch.compile too unless `torch_compile` is false); `progress` is the stream for progress (None:
    silent); `runner_factory(task) -> runner` measures (default :class:`LocalRunners`, at most
    `max_open_runners` open); `on_round(summary)` is called after each round. `db` is the tuning database
    (default ``TENSORLANG_DB`` or the cache folder's; opened only once the model is read); compiles of the model
    read it through ``TENSORLANG_DB``, which is set to it while this runs. The pass variants and the tuned model
    are checked against torch eager's outputs (a model without a torch module is not: ``summary.reference`` says
    so, and its pass variants are not measured); a tuned model that differs sets ``summary.mismatch``.

    Example::

        summary = tune_model("mnist.pt2", trials=200, db="mnist.db")
        summary = tune_model(tl.from_torch(net, (x,)), trials=2000, torch_module=net, scheduler="round-robin")
    """
    from tensorlang.threadpool import num_threads
    check_arguments(trials, batch, seed, threads, jobs, scheduler, strategy, cost_model, timeout)
    t_start = time.perf_counter()
    threads = threads or num_threads()
    where = db.path if isinstance(db, Database) else db if db is not None else default_db_path()
    if os.fspath(where) == ":memory:":
        raise UsageError("model tuning needs a database file: the compiled model reads its tuned schedules and pass "
                         "options from it")
    # the model first: a file that is no model leaves no database behind
    with environment(os.path.expanduser(os.fspath(where)), threads):  # a saved model compiles its kernels as it loads
        src = model if isinstance(model, ModelSource) else resolve_model(model, name)
    if torch_module is not None:
        src.torch_module = torch_module
    database = db if isinstance(db, Database) else Database(db)
    progress = Progress(progress, total=trials)
    pool = summary = None
    try:
        summary = ModelTuneSummary(src.name, src.key, threads, str(database.path), trials, scheduler, strategy,
                                   cost_model, seed)
        phase = summary.phase_s
        with environment(database.path, threads):
            t0 = time.perf_counter()
            graph = src.graph()
            inputs = random_graph_inputs(graph, seed)
            reference, summary.reference = _reference(src, inputs, graph.input_spec)
            tuned_model, baseline = _choose_variant(src, database, threads, variants, summary, progress, rounds,
                                                    min_time, inputs, reference)
            phase["variants"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            tasks = model_tasks(tuned_model, threads)
            profile_tasks(tuned_model, tasks, inputs)
            phase["profile"] = time.perf_counter() - t0
            shared = None
            if transfer and strategy == "xgb-genetic":
                t0 = time.perf_counter()
                shared = _shared_model(database, cost_model, seed, datasets, progress)
                summary.transfer = shared.description
                phase["transfer"] = time.perf_counter() - t0
            sessions = [TaskSession(t, database, strategy, cost_model, seed, shared) for t in tasks]
            reports = [TaskReport(i, t.name, t.kind, t.key, t.weight, t.flops, s.trials, s.trials, s.best_s,
                                  s.best_s, t.seconds_now, t.schedule_source) for i, (t, s) in
                       enumerate(zip(tasks, sessions))]
            summary.tasks = reports
            states = [TaskState(t.weight, t.flops, t.kind, t.seconds_now) for t in tasks]
            sched = TaskScheduler(states, scheduler, round_trials=round_size(batch, trials, len(tasks)), seed=seed)
            for i, s in enumerate(sessions):
                sched.restore(i, s.earlier_best)
                if s.best_s is not None:  # the time of the record tl.build compiles (its re-timing's, if any)
                    states[i].best_s = s.best_s
            summary.trials_before = sum(s.trials for s in sessions)
            summary.curve.append((summary.trials_before, sched.estimated_latency()))
            progress.say(f"tuning {src.name}: {len(tasks)} tasks ({sum(t.weight for t in tasks)} kernels), "
                         f"{trials} trials ({summary.trials_before} done before), {threads} thread"
                         f"{'s' * (threads != 1)}, scheduler {scheduler}, strategy {strategy}, "
                         f"{'transfer: ' + summary.transfer if summary.transfer else 'no transfer'}; records in "
                         f"{database.path}")
            progress.say(task_table(reports, sched.estimated_latency()))
            pool = RunnerPool(runner_factory or LocalRunners(jobs, MeasureOptions(run_timeout=timeout), seed),
                              max_open_runners)
            t0 = time.perf_counter()
            progress.start_bar(summary.trials_before)
            try:
                _rounds(sched, sessions, reports, pool, summary, progress, trials, on_round)
            except KeyboardInterrupt:
                summary.interrupted = True
            finally:
                progress.close()
                # every record a session committed counts, those of a round cut short too
                summary.trials_done = sum(s.trials for s in sessions) - summary.trials_before
                for s, r in zip(sessions, reports):
                    r.trials = s.trials
            phase["tune"] = time.perf_counter() - t0
            if not summary.interrupted:
                t0 = time.perf_counter()
                try:
                    _retime(sessions, reports, sched, pool, database, retime_top, progress)
                except KeyboardInterrupt:
                    summary.interrupted = True
                phase["retime"] = time.perf_counter() - t0
            pool.close()
            phase.update({f"tune: {k}": v for k, v in pool.phase_s.items()})
            phase["tune: propose"] = sum(s.propose_s for s in sessions)
            pool = None
            for s, r in zip(sessions, reports):
                r.best_s = s.best_s
                summary.errors.update(s.errors)
            if not summary.interrupted and (measure or reference is not None):
                t0 = time.perf_counter()
                tuned = src.compile(summary.variant)
                summary.schedule_sources = dict(Counter(s.kernel.schedule_source for s in tuned.steps))
                if reference is not None:
                    _check_tuned(tuned, inputs, reference, summary, progress)
                phase["compile and check"] = time.perf_counter() - t0
                if measure:
                    t0 = time.perf_counter()
                    _measure_end_to_end(src, tuned, summary, baseline, inputs, reference, threads, rounds, min_time,
                                        progress, torch_compile)
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
    from tuner.transfer import SharedCostModel, default_datasets, describe_prior, prior_rows
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
    from tuner.model_variants import OutputMismatch, candidate_variants, measure_variants, store_choice, stored_choice
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
    with environment(_zero_trial_db(), threads):
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


def _rounds(sched: TaskScheduler, sessions: list[TaskSession], reports: list[TaskReport], pool: RunnerPool,
            summary: ModelTuneSummary, progress: Progress, trials: int, on_round) -> None:
    """The rounds: the scheduler picks a task, its session measures a round through the task's runner."""
    spent = summary.trials_before
    warmup = bool(sched.warmup_pending())
    while spent < trials:
        check_ctrl_c()
        i = sched.next_task()
        if i is None:
            summary.exhausted = True
            return
        session, report = sessions[i], reports[i]
        before = session.best_s
        n = min(sched.round_trials, trials - spent)
        try:
            runner = pool.get(session.task)
        except (TensorlangError, OSError) as e:  # the task cannot be measured here (its runner cannot start)
            report.note = f"cannot be measured: {type(e).__name__}: {e}"
            progress.say(f"task {i} {report.name}: {report.note}; the other tasks go on")
            sched.record(i, 0, None, exhausted=True)
            continue
        added = session.run_round(n, runner)
        spent += added
        summary.trials_done += added
        sched.record(i, added, session.best_s, exhausted=session.exhausted, times=session.round_times)
        if session.exhausted:
            report.note = "its search space is used up"
        report.trials, report.best_s = session.trials, session.best_s
        estimate = sched.estimated_latency()
        summary.curve.append((spent, estimate))
        summary.rounds.append({"task": i, "trials": added, "best_s": session.best_s, "estimated_s": estimate,
                               "trials_after": spent})
        warmup_done = warmup and not sched.warmup_pending()
        warmup = warmup and not warmup_done
        if warmup_done:
            summary.warmup_trials = spent
        progress.round(summary, report, added, before, estimate, reports, len(summary.rounds), warmup_done)
        if on_round is not None:
            on_round(summary)


def _retime(sessions, reports, sched, pool, database, top: int, progress) -> None:
    """Time the top configs of each task again (longer, interleaved) where it matters: tasks with trials in this
    run that hold at least 1% of the estimated latency."""
    if top <= 0:
        return
    total = sched.estimated_latency() or 1.0
    todo = [(s, r) for s, r in zip(sessions, reports)
            if r.trials > r.trials_before and r.weight * (s.best_s or 0.0) >= 0.01 * total]
    if not todo:
        return
    progress.say(f"re-timing the {top} fastest configs of {len(todo)} tasks (3 interleaved rounds each) ...")
    for session, report in todo:
        check_ctrl_c()
        candidates = session.retime_candidates(top)
        if len(candidates) < 2:
            continue
        try:
            runner = pool.get(session.task)
        except (TensorlangError, OSError):
            continue
        if not hasattr(runner, "retime"):
            continue
        results = runner.retime(candidates, 3)
        timed = [(r.config, r.times) for r in results if r.ok and r.times]
        if timed:
            database.add_retimes(session.task.key, timed)
            session.refresh_best()
            report.best_s = session.best_s


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
        with environment(_zero_trial_db(), threads):
            baseline = src.compile({})
    contenders = [("tuned", lambda: tuned.run_flat(inputs)), ("zero-trial", lambda: baseline.run_flat(inputs))]
    notes = {}
    from tuner.model_variants import time_alternating
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
