"""The Dask worker's side of distributed tuning (:mod:`tensorlang.tuner.measure.cluster`): the only functions the tuner
sends to workers, and the plugin that makes each worker advertise its target.

Every entry point takes JSON text and answers JSON text: a job holds the task (the fields of
:class:`tensorlang.tuner.task.Task`, as ``dataclasses.asdict`` gives them), the seed of its inputs, the
:class:`tensorlang.tuner.measure.local.MeasureOptions` and a config (or a schedule's JSON). Nothing of the tuner's is
unpickled here but the reference to these functions. The candidates are built and timed in this worker's own isolated
processes, those of a :class:`tensorlang.tuner.measure.local.LocalRunner` kept per task (its builders, its runner, and
its reference output, computed on this worker from the same seed), so that a candidate that crashes or hangs is an error
of that candidate and never takes the Dask worker down.

- :func:`build` schedules a config and compiles it to object code on a builder process;
- :func:`run` checks the object's output against the default schedule's and times it, one at a time;
- :func:`retime` times several configs again in interleaved rounds, all on this worker;
- :func:`features` computes the loop-IR features of configs the cost model scores (the tuner's loop, spread out);
- :func:`simulate` sleeps instead of measuring (``benchmarks/cluster_scaling.py``: the tuner loop's overhead);
- :class:`TargetPlugin` adds the resources ``tensorlang-target:TRIPLE/CPU/FEATURES-HASH`` (this worker's cores)
  and, unless the worker was started with its own count, ``measure=1``.

Example::

    >>> target_resource({"triple": "x86_64-unknown-linux-gnu", "cpu": "znver4", "features": "+avx2"})
    'tensorlang-target:x86_64-unknown-linux-gnu/znver4/d849045f9926'
"""
from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import queue
import threading
import time
import zlib
from collections import OrderedDict

from distributed.diagnostics.plugin import WorkerPlugin

TARGET_ENV = "TENSORLANG_CLUSTER_TARGET"
"""Test-only hook: JSON that replaces fields of the target this worker reports (say ``{"cpu": "other"}``), so
that a test can start a worker that looks like another machine. Never set it on a real cluster: the worker
would then be sent tasks compiled for a CPU it is not."""

FAULTS_ENV = "TENSORLANG_CLUSTER_FAULTS"
"""Test-only hook: JSON ``{config_key: fault}`` with fault ``kill_worker`` (the Dask worker's process ends when it
runs that config) or ``hang_worker`` (it freezes); the candidates' own faults are
``tensorlang.tuner.measure.local.FAULTS_ENV``'s."""

MEASURE = "measure"
"""The worker resource a measurement holds (one at a time per worker: ``dask worker ... --resources measure=1``)."""

TARGET_PREFIX = "tensorlang-target:"
PROGRESS_TOPIC = "tensorlang-progress"
"""The Dask event topic on which a worker says that it started a build or a run (the tuner's watchdog), and
sends each final answer (phase ``answer``), so that the tuner never fetches a result from a worker."""

_MAX_TASKS = 4  # the tasks whose processes and reference data a worker keeps at once


def worker_target() -> dict:
    """This machine's target as a task records it: LLVM's triple, host CPU name and features (with
    :data:`TARGET_ENV` applied, in tests).

    Example::

        >>> sorted(worker_target())
        ['cpu', 'features', 'triple']
    """
    from tensorlang.target import host_target
    t = host_target()
    out = {"triple": t.triple, "cpu": t.cpu, "features": t.features}
    override = os.environ.get(TARGET_ENV)
    if override:
        out.update(json.loads(override))
    return out


def target_name(target: dict) -> str:
    """``TRIPLE/CPU/HASH``: a target in a few words (the hash is of the feature string).

    Example::

        >>> target_name({"triple": "x86_64-unknown-linux-gnu", "cpu": "znver4", "features": "+avx2"})
        'x86_64-unknown-linux-gnu/znver4/d849045f9926'
    """
    features = hashlib.sha256(str(target.get("features", "")).encode()).hexdigest()[:12]
    return f"{target.get('triple', '?')}/{target.get('cpu', '?')}/{features}"


def target_resource(target: dict) -> str:
    """The name of the worker resource that says a worker has ``target`` (its amount: the worker's cores).

    Example::

        >>> target_resource({"triple": "t", "cpu": "c", "features": ""}).startswith(TARGET_PREFIX)
        True
    """
    return TARGET_PREFIX + target_name(target)


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, say from ``taskset``; else the CPU count).

    Example::

        >>> usable_cores() >= 1
        True
    """
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class TargetPlugin(WorkerPlugin):
    """Registered by the tuner on every worker of the cluster (present and future): adds the resource
    :func:`target_resource` of :func:`worker_target` with the worker's :func:`usable_cores` as its amount (a build
    holds one, a run as many as the task's threads), and ``measure=1`` unless the worker has a ``measure``
    amount of its own (``--resources measure=0`` makes a worker that only builds)."""

    name = "tensorlang-target"
    idempotent = False  # a tuner of another version registers its own

    async def setup(self, worker) -> None:
        """Advertise this worker's target and cores as resources."""
        have = worker.state.total_resources
        resources = {target_resource(worker_target()): float(usable_cores())}
        if MEASURE not in have:
            resources[MEASURE] = 1.0
        if any(have.get(k) != v for k, v in resources.items()):  # registered again by another tuner: no change
            await worker.set_resources(**resources)


# ---------------------------------------------------------------------------------------------------------------
# one task's isolated processes on this worker


class _TaskState:
    """A task's :class:`tensorlang.tuner.measure.local.LocalRunner` on this worker (its reference output, builder
    processes and runner process), shared by the threads of the Dask worker: builders are lent one per build, the runner
    is used under a lock. The runner's internals (``_schedule``, ``_build``, ``_run``, ``_builders``) are used on
    purpose, so that whatever the local measurement does, a worker does the same."""

    def __init__(self, task_fields: dict, seed: int, options):
        from tensorlang.tuner.measure.local import LocalRunner
        from tensorlang.tuner.task import Task
        self.task = Task(**task_fields)
        self.runner = LocalRunner(self.task, jobs=usable_cores(), options=options, seed=seed)
        self.runner.start()
        self.builders: queue.SimpleQueue = queue.SimpleQueue()
        for b in self.runner._builders:
            self.builders.put(b)
        self.run_lock = threading.Lock()
        self.users = 0

    def build(self, r, options):
        """Build ``r`` (a scheduled :class:`tensorlang.tuner.measure.local.Result`) on a free builder process; the build
        answer or None (then ``r`` holds the error)."""
        b = self.builders.get()
        try:
            self.runner.options = options  # _build reads only build_timeout from it
            return self.runner._build(r, b)
        finally:
            self.builders.put(b)

    def all_builders(self) -> list:
        """Take every builder (waiting for the builds in progress), for a re-timing that builds in parallel."""
        return [self.builders.get() for _ in self.runner._builders]

    def close(self) -> None:
        """Stop the processes and delete the reference data."""
        self.runner.close()


_STATES: OrderedDict = OrderedDict()
_STATES_LOCK = threading.Lock()
_CREATING: dict = {}


class _Using:
    """``with _Using(job) as state``: the job's task state, created once per task on this worker (the others
    wait for it), never closed while in use; the least recently used beyond ``_MAX_TASKS`` are closed."""

    def __init__(self, job: dict):
        from tensorlang.tuner.measure.local import MeasureOptions
        self.key = json.dumps([job["task"], job.get("seed", 0)], sort_keys=True)
        self.job = job
        self.options = MeasureOptions(**job["options"])
        self.state = None

    def __enter__(self) -> _TaskState:
        while True:
            with _STATES_LOCK:
                state = _STATES.get(self.key)
                if state is not None:
                    _STATES.move_to_end(self.key)
                    state.users += 1
                    self.state = state
                    return state
                event = _CREATING.get(self.key)
                mine = event is None
                if mine:
                    event = _CREATING[self.key] = threading.Event()
            if not mine:
                event.wait()
                continue
            try:
                state = _TaskState(self.job["task"], self.job.get("seed", 0), self.options)
            finally:
                with _STATES_LOCK:
                    del _CREATING[self.key]
                event.set()
            with _STATES_LOCK:
                _STATES[self.key] = state
                state.users += 1
                self.state = state
                old = [k for k, s in _STATES.items() if s.users == 0 and k != self.key]
                closing = [_STATES.pop(k) for k in old[: max(0, len(_STATES) - _MAX_TASKS)]]
            for s in closing:
                s.close()
            return state

    def __exit__(self, *exc) -> None:
        with _STATES_LOCK:
            self.state.users -= 1


def close_all() -> None:
    """Stop the processes of every task this worker keeps (they also end with the worker).

    Example::

        >>> close_all()
    """
    with _STATES_LOCK:
        states = list(_STATES.values())
        _STATES.clear()
    for s in states:
        s.close()


# ---------------------------------------------------------------------------------------------------------------
# entry points


def _here() -> dict:
    """This worker's address and name (empty outside a Dask worker)."""
    try:
        from distributed import get_worker
        w = get_worker()
    except ValueError:
        return {"address": "", "name": ""}
    return {"address": w.address, "name": str(w.name)}


def _started(job: dict, phase: str, **more) -> None:
    """Tell the tuner (a Dask event) that this worker started ``phase`` of the job now."""
    try:
        from distributed import get_worker
        w = get_worker()
    except ValueError:
        return
    w.log_event(PROGRESS_TOPIC, {"id": job["id"], "phase": phase, "worker": w.address, **more})


def _answer(job: dict, text: str) -> str:
    """Send the job's final answer to the tuner as an event too (so that it never has to fetch it from this
    worker, which may be gone or frozen by then), and return it."""
    _started(job, "answer", answer=text)
    return text


def _inject(job: dict, phase: str) -> None:
    """Test-only faults of the Dask worker itself (:data:`FAULTS_ENV`): ``kill_worker`` ends this worker's
    process when the config is run, ``hang_worker`` freezes it (SIGSTOP)."""
    from tensorlang.space import config_key
    faults = json.loads(os.environ.get(FAULTS_ENV, "{}"))
    fault = faults.get(config_key(job.get("config") or {}))
    if phase == "run" and fault == "kill_worker":
        os._exit(1)
    if phase == "run" and fault == "hang_worker":
        import signal
        os.kill(os.getpid(), signal.SIGSTOP)


def build(job_text: str) -> str:
    """Schedule the job's ``config`` (or take its ``schedule``) and compile it on one of this worker's builder
    processes. Answers ``{"config", "schedule", "error_kind", "error", "build_s", "object" (base64), "name",
    "worker"}``; an error kind (``schedule``, ``build``, ``build_timeout``) leaves the object out.

    Example::

        >>> import dataclasses
        >>> from tensorlang.tuner.measure.local import MeasureOptions
        >>> from tensorlang.tuner.task import Task
        >>> task = Task.create("matmul", preset="small", threads=1)
        >>> job = {"id": "1", "task": dataclasses.asdict(task), "seed": 0, "options": MeasureOptions().__dict__,
        ...        "config": task.space.config_at(0)}
        >>> built = json.loads(build(json.dumps(job)))
        >>> built["error_kind"], len(base64.b64decode(built["object"])) > 0
        (None, True)
        >>> answer = json.loads(run(json.dumps(job), json.dumps(built)))
        >>> answer["error_kind"] is None and len(answer["times"]) >= 3
        True
        >>> close_all()
    """
    from tensorlang.tuner.measure.local import Result
    job = json.loads(job_text)
    out = {"config": job.get("config") or {}, "build_s": 0.0, "worker": _here()["address"]}
    with _Using(job) as state:
        _started(job, "build")
        if job.get("schedule") is not None:
            r = Result(dict(job.get("config") or {}), job["schedule"])
        else:
            r = state.runner._schedule(job["config"])
        built = state.build(r, _options(job)) if r.ok else None
    out.update(schedule=r.schedule_json, error_kind=r.error_kind, error=r.error, build_s=r.build_s)
    if built is not None:
        out.update(object=base64.b64encode(built["object"]).decode("ascii"), name=built["name"])
    return json.dumps(out)


def _options(job: dict):
    from tensorlang.tuner.measure.local import MeasureOptions
    return MeasureOptions(**job["options"])


def run(job_text: str, built_text: str) -> str:
    """Run the object :func:`build` answered on this worker's runner process (one run at a time): check its output
    against the default schedule's, then time it (the job's ``best_s`` lets a slow candidate stop early, as in
    :class:`tensorlang.tuner.measure.local.LocalRunner`). Answers the build's fields (without the object) plus
    ``times``, ``disturbance`` (what other processes took meanwhile,
    :meth:`tensorlang.tuner.measure.disturbance.Disturbance.to_json`, or None), ``run_s`` and the ``worker`` that ran it
    (``built_on``: the one that built it); a build that failed is answered as it was.

    Example::

        answer = json.loads(run(job_text, build(job_text)))   # see build()
    """
    from tensorlang.tuner.measure.local import Result
    job = json.loads(job_text)
    built = json.loads(built_text)
    out = {k: v for k, v in built.items() if k != "object"}
    out.update(built_on=built.get("worker", ""), worker=_here()["address"], times=[], run_s=0.0)
    if built.get("error_kind") is not None or "object" not in built:
        return _answer(job, json.dumps(out))
    with _Using(job) as state:
        with state.run_lock:
            _started(job, "run")
            _inject(job, "run")
            r = Result(dict(built["config"]), built["schedule"], build_s=built.get("build_s", 0.0))
            state.runner.options = _options(job)
            state.runner.best_s = job.get("best_s")
            t0 = time.perf_counter()
            state.runner._run(r, {"object": base64.b64decode(built["object"]), "name": built["name"]})
            out["run_s"] = time.perf_counter() - t0
    out.update(times=list(r.times), error_kind=r.error_kind, error=r.error, disturbance=_figure(r.disturbance))
    return _answer(job, json.dumps(out))


def _figure(d) -> dict | None:
    """A :class:`tensorlang.tuner.measure.disturbance.Disturbance` as JSON (None stays None)."""
    return None if d is None else d.to_json()


def retime(job_text: str) -> str:
    """Time the job's ``configs`` again on this worker in ``rounds`` interleaved rounds
    (:meth:`tensorlang.tuner.measure.local.LocalRunner.retime` with the job's options); answers a list of
    ``{"config", "schedule", "times", "error_kind", "error", "worker", "disturbance", "round_disturbances"}``.

    Example::

        answers = json.loads(retime(json.dumps({**job, "configs": configs, "rounds": 3})))
    """
    job = json.loads(job_text)
    where = _here()["address"]
    with _Using(job) as state:
        with state.run_lock:
            _started(job, "run")
            held = state.all_builders()  # retime builds on every builder at once
            try:
                state.runner.options = _options(job)
                results = state.runner.retime(job["configs"], job["rounds"], _options(job))
            finally:
                for b in held:
                    state.builders.put(b)
    return _answer(job, json.dumps([{"config": r.config, "schedule": r.schedule_json, "times": list(r.times),
                                     "error_kind": r.error_kind, "error": r.error, "build_s": r.build_s,
                                     "worker": where, "disturbance": _figure(r.disturbance),
                                     "round_disturbances": [_figure(d) for d in
                                                            r.extra.get("round_disturbances", ())]}
                                    for r in results]))


@functools.lru_cache(maxsize=8)
def _task(task_json: str):
    from tensorlang.tuner.task import Task
    return Task(**json.loads(task_json))


def features(job_text: str) -> str:
    """The loop-IR features of the job's ``configs`` (lists of floats, None where a config cannot be scheduled),
    computed in this worker's process (lowering is pure Python): the cost model's scoring, spread over the
    cluster. Answers ``{"features": [...]}``, or ``{"error": ...}`` when the extractor failed (the tuner then
    computes them itself).

    Example::

        >>> import dataclasses
        >>> from tensorlang.tuner.task import Task
        >>> task = Task.create("matmul", preset="small", threads=1)
        >>> job = {"id": "1", "task": dataclasses.asdict(task), "configs": [task.space.config_at(0)]}
        >>> len(json.loads(features(json.dumps(job)))["features"][0])
        58
    """
    from tensorlang.tuner import features as extraction
    job = json.loads(job_text)
    _started(job, "features")
    try:
        task = _task(json.dumps(job["task"], sort_keys=True))
        out = []
        for c in job["configs"]:
            f = extraction.of_config(task.space, task.op, task.sizes, c)
            out.append(None if f is None else [float(x) for x in f])
        answer = {"features": out}
    except Exception as e:  # the tuner computes them itself, and says nothing: the same vectors
        answer = {"error": f"{type(e).__name__}: {e}"}
    return _answer(job, json.dumps(answer))


def simulate(job_text: str) -> str:
    """A simulated measurement for ``benchmarks/cluster_scaling.py``: sleep the job's ``simulate`` seconds and
    answer a time that depends only on the config (from 1 to 2 ms), without building anything.

    Example::

        >>> answer = json.loads(simulate(json.dumps({"id": "1", "config": {"a": 1}, "simulate": 0.01})))
        >>> answer["error_kind"], 1e-3 <= answer["times"][0] <= 2e-3
        (None, True)
    """
    job = json.loads(job_text)
    _started(job, "run")
    time.sleep(job["simulate"])
    from tensorlang.space import config_key
    t = 1e-3 * (1.0 + (zlib.crc32(config_key(job["config"]).encode()) % 1000) / 1000.0)
    return _answer(job, json.dumps({"config": job["config"], "schedule": None, "times": [t], "error_kind": None,
                                    "error": None, "build_s": 0.0, "run_s": job["simulate"],
                                    "worker": _here()["address"]}))


def describe() -> dict:
    """This worker's target, its name as a resource, cores and tensorlang version (what ``tensorlang`` would
    measure here).

    Example::

        >>> describe()["cores"] >= 1
        True
    """
    import tensorlang
    target = worker_target()
    return {"target": target, "resource": target_resource(target), "cores": usable_cores(),
            "version": tensorlang.__version__}
