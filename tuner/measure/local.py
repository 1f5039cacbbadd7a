"""Measurement: compile candidates in a pool of worker processes, then run them one at a time in one more
isolated process, never while builds run; check each output against the default schedule's before timing it.

A candidate that cannot be scheduled, fails to build, takes too long to build, crashes (a segfault kills only
the runner process, which is restarted), hangs (killed after the timeout) or computes a wrong result becomes a
:class:`Result` with that ``error_kind`` and its message; measuring goes on.

``LocalRunner`` is the only runner today; anything with the same ``measure(candidates)`` method (say, one that
fans candidates out to other machines) can stand in for it.

Example::

    >>> from tensorlang.tuner.task import Task
    >>> task = Task.create("matmul", preset="small", threads=1)
    >>> with LocalRunner(task, jobs=1) as runner:
    ...     [r] = runner.measure([task.space.config_at(0)])
    >>> r.error_kind is None and len(r.times) >= 3
    True
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

import tensorlang as tl
from tensorlang.errors import UsageError
from tensorlang.space import config_key
from tensorlang.tuner.measure import disturbance
from tensorlang.tuner.measure.disturbance import Disturbance
from tensorlang.tuner.measure.worker import Worker, WorkerCrash, WorkerTimeout
from tensorlang.tuner.task import Task

FAULTS_ENV = "TENSORLANG_TUNER_FAULTS"
"""Test-only hook: JSON ``{config_key: fault}`` with fault one of :data:`FAULTS`; the workers then misbehave that
way for that config ("nan": every output element NaN, "one_nan": the first one, "cold": the checked run reads a
second slower than it ran; "busy_first": its first measurement in a runner process reports other processes on
every CPU, its later ones a quiet machine; "quiet": every measurement reports a quiet machine)."""

FAULTS = ("segfault", "hang", "wrong", "nan", "one_nan", "raise", "build_hang", "build_crash", "features_crash",
          "cold", "busy_first", "quiet")


def injected_faults() -> dict:
    """The faults of ``$TENSORLANG_TUNER_FAULTS`` (see :data:`FAULTS_ENV`); a value that is not a JSON object of
    known faults is a UsageError naming the variable.

    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {FAULTS_ENV: '{"k": "nan"}'}):
    ...     injected_faults()
    {'k': 'nan'}
    """
    text = os.environ.get(FAULTS_ENV, "").strip()
    if not text:
        return {}
    try:
        faults = json.loads(text)
    except ValueError as e:
        raise UsageError(f"{FAULTS_ENV}={text!r} is not JSON ({e}); it is an object {{config_key: fault}}") from None
    if not isinstance(faults, dict) or any(f not in FAULTS for f in faults.values()):
        raise UsageError(f"{FAULTS_ENV}={text!r}: expected a JSON object {{config_key: fault}} with faults from "
                         f"{', '.join(FAULTS)}")
    return faults


@dataclass(frozen=True)
class MeasureOptions:
    """How candidates are timed and how long they may take.

    Attributes:
        min_runs: timed runs at least (after the checked run, which also warms up).
        min_time: seconds of timed runs at least.
        max_runs: timed runs at most.
        slow_factor: a candidate whose checked run and first warm run are this many times slower than the best
            so far is timed by that warm run alone.
        coarse_factor: a candidate whose first ``min_runs`` timed runs are all this many times slower than the
            best so far stops there: its rank is clear, and ``min_time`` buys precision only for the contenders.
        build_timeout: seconds one build may take.
        run_timeout: seconds the checked run plus the timed runs of one candidate may take.
        disturbance_time: seconds the disturbance figure (:mod:`tensorlang.tuner.measure.disturbance`) covers at least:
            a measurement that took less runs the kernel on, untimed, until then. At 0 the figure covers the checked and
            timed runs alone, and a measurement shorter than 0.04 s (``/proc/stat`` counts in 0.01 s ticks) has none.

    Example::

        >>> MeasureOptions(min_time=0.1).min_runs
        3
        >>> MeasureOptions(coarse_factor=0.5)
        Traceback (most recent call last):
        ...
        tensorlang.errors.UsageError: MeasureOptions: coarse_factor must be a number >= 1 (math.inf: never), got 0.5
    """

    min_runs: int = 3
    min_time: float = 0.05
    max_runs: int = 200
    slow_factor: float = 20.0
    coarse_factor: float = 1.5
    build_timeout: float = 60.0
    run_timeout: float = 10.0
    disturbance_time: float = 0.0

    def __post_init__(self):
        if not (isinstance(self.min_runs, int) and isinstance(self.max_runs, int)
                and 1 <= self.min_runs <= self.max_runs):
            raise UsageError(f"MeasureOptions: min_runs and max_runs must be integers with 1 <= min_runs <= "
                             f"max_runs, got {self.min_runs!r} and {self.max_runs!r}")
        for name in ("min_time", "build_timeout", "run_timeout", "disturbance_time"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value >= 0
                    and (value > 0 or name in ("min_time", "disturbance_time"))):
                raise UsageError(f"MeasureOptions: {name} must be a positive number of seconds, got {value!r}")
        for name in ("slow_factor", "coarse_factor"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and value >= 1):
                raise UsageError(f"MeasureOptions: {name} must be a number >= 1 (math.inf: never), got {value!r}")


RETIME_OPTIONS = MeasureOptions(min_runs=5, min_time=0.1, slow_factor=math.inf, coarse_factor=math.inf,
                                disturbance_time=0.05)
"""How :meth:`LocalRunner.retime` times each candidate in each round: at least 5 runs and 0.1 s (at most 200
runs), the disturbance figure over 0.05 s at least."""


@dataclass
class Result:
    """What measuring one config gave: its repeat times, or an error kind and message; ``disturbance``: what other
    processes took while it was timed (:class:`tensorlang.tuner.measure.disturbance.Disturbance`; None where unknown).

    Example::

        >>> Result({"a": 1}, None, (), "schedule", "bad").ok
        False
    """

    config: dict
    schedule_json: str | None
    times: tuple = ()
    error_kind: str | None = None
    error: str | None = None
    build_s: float = 0.0
    extra: dict = field(default_factory=dict)
    disturbance: Disturbance | None = None

    @property
    def ok(self) -> bool:
        """Valid: measured and checked."""
        return self.error_kind is None

    @property
    def median_s(self) -> float | None:
        """Median of the repeat times (None when not valid)."""
        return float(np.median(self.times)) if self.ok and self.times else None


# ---------------------------------------------------------------- worker side: build


def build_handler(init: dict):
    """Worker factory: compiles ``{"schedule": json, "key": config_key}`` to ``{"object": bytes}`` or an error;
    with the task in ``init``, also answers ``{"features": [config, ...]}`` with each config's loop-IR features
    (a list of floats, or None where the config cannot be scheduled).

    ``init`` holds the DSL ``source`` and, optionally, the ``task`` (the fields of :class:`tensorlang.tuner.task.Task`)
    and an ``object_cache`` folder, shared by the builders of one runner: a config whose LLVM IR is that of one built
    before (configs that differ only where the loop nest does not: 136 of the 500 one `tune conv2d --trials 500`
    measured) reuses its object code instead of running LLVM again (:func:`cached_object`). A build answers the object
    code with the kernel's ``name`` and ``build_s`` (its seconds), or ``error_kind`` "schedule" or "build" and the
    ``error``.

    Example::

        >>> import tensorlang as tl
        >>> src = "def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"
        >>> handle = build_handler({"source": src})
        >>> answer = handle({"schedule": tl.schedule(tl.op(src), N=64).to_json(), "key": "k"})
        >>> answer["name"], type(answer["object"]).__name__, answer["build_s"] > 0
        ('f', 'bytes', True)
    """
    from tensorlang.codegen_llvm import emit_module
    from tensorlang.target import compile_object, host_target
    op = tl.op(init["source"])
    target = host_target()
    faults = injected_faults()
    task = Task(**init["task"]) if init.get("task") else None
    cache = init.get("object_cache")

    def handle(request: dict) -> dict:
        if "features" in request:
            return {"features": [_features(task, c, faults) for c in request["features"]]}
        fault = faults.get(request["key"])
        if fault == "build_hang":
            while True:
                time.sleep(1)
        if fault == "build_crash":
            os.abort()
        try:
            t0 = time.perf_counter()
            func = tl.Schedule.from_json(request["schedule"], op).lowered()
            ir = str(emit_module(func, vector_bits=target.vector_bits()))
            obj = cached_object(cache, ir, lambda: compile_object(ir, target))
            return {"object": obj, "name": func.name, "build_s": time.perf_counter() - t0}
        except tl.ScheduleError as e:
            return {"error_kind": "schedule", "error": str(e)}
        except Exception as e:  # any failure of the compiler is this candidate's error, with where it happened
            return {"error_kind": "build", "error": f"{type(e).__name__}: {e}\n{_short_traceback()}"}

    return handle


def cached_object(folder: str | None, llvm_ir: str, compile) -> bytes:
    """The object code of `llvm_ir`: read from `folder` where a build of the same IR text left it, else
    ``compile()``, written there for the next (atomically: two builders may race, each writes the same bytes).
    Without a folder, always ``compile()``.

    Example::

        >>> import tempfile
        >>> calls = []
        >>> with tempfile.TemporaryDirectory() as d:
        ...     a = cached_object(d, "ir", lambda: calls.append(1) or b"obj")
        ...     b = cached_object(d, "ir", lambda: calls.append(1) or b"obj")
        >>> a == b == b"obj", len(calls)
        (True, 1)
    """
    if folder is None:
        return compile()
    path = os.path.join(folder, hashlib.sha256(llvm_ir.encode()).hexdigest() + ".o")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        pass
    obj = compile()
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(obj)
        os.replace(tmp, path)
    except OSError:  # a full disk costs the cache, never the build
        pass
    return obj


def _features(task: Task | None, config: dict, faults: dict) -> list[float] | None:
    from tensorlang.tuner import features
    if task is None:
        raise UsageError("this builder was started without a task: it cannot compute features")
    if faults.get(config_key(config)) == "features_crash":
        os.abort()
    f = features.of_config(task.space, task.op, task.sizes, config)
    return None if f is None else f.tolist()


def _short_traceback() -> str:
    return "".join(traceback.format_exc().splitlines(keepends=True)[-6:])


# ---------------------------------------------------------------- worker side: run


def compare(out: np.ndarray, expected: np.ndarray) -> str | None:
    """None when ``out`` matches ``expected`` within float reassociation error; else what differs.

    The tolerance scales with the output's magnitude: ``|out - expected| <= 1e-4 * max|expected| + 1e-3 *
    |expected|``; integers must be equal; NaN must be where expected has NaN, and an infinity exactly where
    expected has that infinity.

    Example::

        >>> compare(np.ones(3, np.float32), np.ones(3, np.float32)) is None
        True
        >>> compare(np.array([1.0, 2.5]), np.array([1.0, 2.0]))
        'wrong result: 1 of 2 elements differ, the largest by 0.5 at index (1,) (2.5 instead of 2)'
    """
    if out.shape != expected.shape:
        return f"wrong result: shape {out.shape} instead of {expected.shape}"
    if np.issubdtype(expected.dtype, np.integer):
        bad = out != expected
    else:
        nan_ok = np.isnan(out) == np.isnan(expected)
        finite = np.isfinite(expected)
        scale = float(np.max(np.abs(expected[finite]))) if finite.any() else 0.0
        with np.errstate(invalid="ignore"):
            diff = np.abs(out.astype(np.float64) - expected.astype(np.float64))
            # an infinite expected value must come out exactly (its relative tolerance would be infinite)
            close = ((diff <= 1e-4 * scale + 1e-3 * np.abs(expected)) & finite) | (out == expected)
        bad = ~(close & nan_ok) & ~(np.isnan(out) & np.isnan(expected))
    if not bad.any():
        return None
    with np.errstate(invalid="ignore"):  # inf - inf where both are infinite: NaN, and not chosen
        diffs = np.where(bad, np.abs(out.astype(np.float64) - expected.astype(np.float64)), -1.0)
    diffs = np.nan_to_num(diffs, nan=math.inf)
    at = np.unravel_index(int(np.argmax(diffs)), out.shape)
    return (f"wrong result: {int(bad.sum())} of {out.size} elements differ, the largest by {diffs[at]:g} at "
            f"index {tuple(int(i) for i in at)} ({out[at]:g} instead of {expected[at]:g})")


def run_handler(init: dict):
    """Worker factory: loads each object, runs it on the task's inputs, checks it and times it.

    ``init`` holds the ``.npy`` paths of the ``inputs`` and of the ``expected`` outputs, the output names (``outputs``)
    and the kernel ``threads`` (set as ``$TENSORLANG_NUM_THREADS`` of this process). A request holds the ``object`` and
    ``name`` a build answered, the config ``key``, the best median so far ``best_s`` (or None) and the
    :class:`MeasureOptions` as a dict. The outputs are filled with NaN (integers: -12345) before the checked run; a
    wrong output answers ``error_kind`` "wrong", a non-zero status "runtime". Otherwise the answer is ``{"times":
    [seconds, ...]}``: timed runs until there are ``min_runs`` and ``min_time`` has passed (at most ``max_runs``), cut
    short, from ``min_runs`` runs on, while even the fastest of them is above ``coarse_factor`` times ``best_s``; or one
    warm run's time alone when it and the checked run both took more than ``slow_factor`` times ``best_s`` (the checked
    run's alone when it took more than a quarter of ``run_timeout``, which a second run could overrun). The checked run
    is cold (the kernel's workspace and its threads touched for the first time), so it decides nothing by itself: a
    short kernel's cold run, and its first warm ones, can read many times slower than it runs, and would cut good
    candidates short. With the times comes ``disturbance``: what other processes took from the checked run to the
    last timed one, or over the options' ``disturbance_time`` at least
    (:meth:`tensorlang.tuner.measure.disturbance.Disturbance.to_json`; None where unknown).

    Example::

        runner = Worker("tensorlang.tuner.measure.local:run_handler",
                        {"inputs": ["A.npy", "B.npy"], "expected": ["C.npy"], "outputs": ["C"], "threads": 4})
        runner.call({"object": build["object"], "name": build["name"], "key": key, "best_s": None,
                     "options": MeasureOptions().__dict__}, timeout=10)   # {"times": [...]}
    """
    import ctypes

    os.environ["TENSORLANG_NUM_THREADS"] = str(init["threads"])
    from tensorlang.target import MachineCode, host_target, load_object
    target = host_target()
    inputs = [np.load(p) for p in init["inputs"]]
    expected = [np.load(p) for p in init["expected"]]
    outs = [np.empty_like(e) for e in expected]
    arrays = inputs + outs
    faults = injected_faults()
    seen: set = set()  # the configs measured here, for the "busy_first" fault

    def figure(key, before) -> dict | None:
        d = disturbance.between(before, disturbance.sample())
        if faults.get(key) in ("busy_first", "quiet"):  # a test's machine is neither busy nor quiet on demand
            cpus = d.cpus if d else os.cpu_count() or 1
            others = float(cpus) if faults[key] == "busy_first" and key not in seen else 0.0
            d = Disturbance(others, cpus, d.seconds if d else 0.0)
        seen.add(key)
        return None if d is None else d.to_json()

    def handle(request: dict) -> dict:
        opts = request["options"]
        args = [a.ctypes.data for a in arrays]  # from the arrays this handler holds: the kernel gets addresses only
        code = MachineCode(load_object(request["object"], target), request["name"])  # frees its workspace when done
        fn = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.c_void_p] * len(args)))(code.address)
        fault = faults.get(request["key"])
        if fault == "segfault":
            ctypes.string_at(0)
        if fault == "hang":
            while True:
                pass
        if fault == "raise":
            return {"error_kind": "runtime", "error": "injected failure"}
        for o in outs:
            o.fill(np.nan if np.issubdtype(o.dtype, np.floating) else np.array(-12345).astype(o.dtype))  # wraps in u8
        before = disturbance.sample()
        t0 = time.perf_counter()
        status = fn(*args)
        first = time.perf_counter() - t0 + (1.0 if fault == "cold" else 0.0)
        if status != 0:
            return {"error_kind": "runtime", "error": f"the kernel returned status {status} (allocation failed)"}
        if fault == "wrong":
            outs[0].flat[0] += 1.0
        if fault == "nan":
            outs[0].fill(np.nan)
        if fault == "one_nan":
            outs[0].flat[0] = np.nan
        for name, o, e in zip(init["outputs"], outs, expected):
            wrong = compare(o, e)
            if wrong:
                return {"error_kind": "wrong", "error": f"output {name}: {wrong}"}
        best = request.get("best_s")
        times: list[float] = []
        start = time.perf_counter()
        if best and first > opts["slow_factor"] * best:
            # the checked run is a cold one (the kernel's workspace and its threads' first touch), many times slower
            # than warm for a short kernel. One warm run decides, unless the checked run
            # took so long (a quarter of the run's time limit) that a cold start is no part of it
            if first > opts["run_timeout"] / 4:
                del code
                return {"times": [first], "disturbance": figure(request["key"], before)}
            t0 = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t0)
            if times[0] > opts["slow_factor"] * best:
                del code  # far slower than the best, warm too: one run says enough
                return {"times": times, "disturbance": figure(request["key"], before)}
        while len(times) < opts["max_runs"]:
            t0 = time.perf_counter()
            fn(*args)
            times.append(time.perf_counter() - t0)
            if len(times) >= opts["min_runs"]:
                if time.perf_counter() - start >= opts["min_time"]:
                    break
                if best and min(times) > opts["coarse_factor"] * best:
                    break  # clearly not a contender even at its fastest: min_runs are enough to rank it
        until = before.wall_s + opts.get("disturbance_time", 0.0) if before is not None else 0.0
        while time.perf_counter() < until:  # untimed: the figure needs a longer look at the machine
            fn(*args)
        del code
        return {"times": times, "disturbance": figure(request["key"], before)}

    return handle


# ---------------------------------------------------------------- tuner side


def check_against_reference(task: Task, inputs: list, outputs: list) -> None:
    """Check the default schedule's ``outputs`` (what every candidate is compared with) against the workload's
    numpy reference at the tolerance of their dtypes and reduction lengths, as ``tensorlang run`` does (NaN and
    infinities that the reference does not have fail): a default that differs would pass wrong candidates and
    fail right ones, so it is a ``tl.BuildError``. Nothing to check for a task whose workload has no reference.

    Example::

        >>> task = Task.create("matmul", preset="small", threads=1)
        >>> A, B = task.workload_def.make_inputs(task.sizes, np.random.default_rng(0))
        >>> check_against_reference(task, [A, B], [A @ B])
        >>> check_against_reference(task, [A, B], [np.full_like(A @ B, np.nan)])
        Traceback (most recent call last):
        ...
        tensorlang.errors.BuildError: matmul: the default schedule's result does not match the numpy reference \
(max relative error inf, tolerance 1.30e-05): output 0: 3072 NaN where the reference has a number (first at \
index (0, 0)); it is what candidates are checked against, so there is nothing to tune against
    """
    w = task.workload_def
    if getattr(w, "reference", None) is None:
        return
    check = w.check(tuple(outputs), w.reference(*inputs, **task.sizes), task.sizes)
    if not check.ok:
        raise tl.BuildError(f"{task.workload}: the default schedule's result {check.describe()}; it is what "
                            "candidates are checked against, so there is nothing to tune against")


class LocalRunner:
    """Builds on ``jobs`` worker processes and measures on one more, on this machine.

    ``measure(configs)`` schedules each config (a ScheduleError is that config's error), builds them all in
    parallel, and then, with the builders idle, runs them one by one.
    """

    def __init__(self, task: Task, jobs: int | None = None, options: MeasureOptions | None = None,
                 expected: list[np.ndarray] | None = None, seed: int = 0):
        self.task = task
        self.options = options or MeasureOptions()
        self.jobs = max(1, jobs or os.cpu_count() or 1)
        self.best_s: float | None = None
        w = task.workload_def
        self._tmp = tempfile.TemporaryDirectory(prefix="tensorlang-tune-")
        injected_faults()  # a bad test hook fails here, not in every worker
        inputs = w.make_inputs(task.sizes, np.random.default_rng(seed))
        if expected is None:
            default = tl.build(task.op, schedule="naive", **task.sizes)
            got = default(*inputs)
            expected = list(got) if isinstance(got, tuple) else [got]
            check_against_reference(task, inputs, expected)
        self.inputs, self.expected = inputs, expected
        paths = {"inputs": [], "expected": []}
        for kind, arrays in (("inputs", inputs), ("expected", expected)):
            for i, a in enumerate(arrays):
                paths[kind].append(os.path.join(self._tmp.name, f"{kind}{i}.npy"))
                np.save(paths[kind][-1], a)
        objects = os.path.join(self._tmp.name, "objects")
        os.makedirs(objects)
        init = {"source": w.source, "task": task.to_dict(), "object_cache": objects}
        self._builders = [Worker("tensorlang.tuner.measure.local:build_handler", init) for _ in range(self.jobs)]
        self._runner = Worker("tensorlang.tuner.measure.local:run_handler", {**paths, "threads": task.threads,
                                                            "outputs": list(task.op.outputs)})
        self.phase_s = {"build": 0.0, "run": 0.0}  # wall seconds spent building and running, for reports

    def start(self) -> None:
        """Start every worker process now (each takes about a second to import the compiler)."""
        with ThreadPoolExecutor(len(self._builders) + 1) as pool:
            list(pool.map(lambda wk: wk.ensure_started(), self._builders + [self._runner]))

    def measure(self, configs: list[dict], on_result=None) -> list[Result]:
        """Measure ``configs``; one :class:`Result` each, in order. ``on_result(result)`` is called as soon as
        each result is final (schedule errors first, then build errors, then each run), so that a caller can
        commit it at once."""
        results = [self._schedule(c) for c in configs]
        self._measure_results(results, on_result)
        return results

    def features(self, configs: list[dict], local) -> list[np.ndarray | None]:
        """The loop-IR features of ``configs`` (None where a config cannot be scheduled), computed on the builder
        processes, which are idle between builds: one share of the configs each. A share whose builder crashes or
        takes longer than the build timeout is computed here with ``local(config)`` instead, so the answer is
        always complete (and the same as ``[local(c) for c in configs]``).

        Example::

            >>> from tensorlang.tuner import features
            >>> from tensorlang.tuner.task import Task
            >>> task = Task.create("matmul", preset="small", threads=1)
            >>> def local(c):
            ...     return features.of_schedule(task.space.schedule(task.op, task.sizes, c))
            >>> cfgs = [task.space.config_at(i) for i in range(4)]
            >>> with LocalRunner(task, jobs=2) as runner:
            ...     got = runner.features(cfgs, local)
            >>> all(np.array_equal(g, local(c)) for g, c in zip(got, cfgs))
            True
        """
        n = min(len(self._builders), len(configs))
        if n == 0:
            return []
        shares = [configs[i::n] for i in range(n)]
        answers: list = [None] * n

        def serve(i: int) -> None:
            try:
                answers[i] = self._builders[i].call({"features": shares[i]}, self.options.build_timeout)["features"]
            except (WorkerCrash, WorkerTimeout):
                answers[i] = None

        with ThreadPoolExecutor(n) as pool:
            list(pool.map(serve, range(n)))
        out: list = [None] * len(configs)
        for i in range(n):
            got = answers[i] if answers[i] is not None else [local(c) for c in shares[i]]
            for j, f in enumerate(got):
                out[i + j * n] = None if f is None else np.asarray(f, dtype=np.float64)
        return out

    def retime(self, configs: list[dict], rounds: int = 3, options: MeasureOptions | None = None) -> list[Result]:
        """Time ``configs`` again, longer, in ``rounds`` interleaved rounds (each config once per round, so that a
        slow spell of the machine hits them all alike); build each once. A round during which the machine was
        busy is run again (at most 3 more rounds), and each result's ``times`` hold every repeat of the quiet
        rounds where there are any, else of every round; one that fails in any round keeps that error.

        Example::

            >>> from tensorlang.tuner.task import Task
            >>> task = Task.create("matmul", preset="small", threads=1)
            >>> with LocalRunner(task, jobs=1) as runner:
            ...     [r] = runner.retime([task.space.config_at(0)], rounds=2)
            >>> r.ok and len(r.times) >= 2 * RETIME_OPTIONS.min_runs
            True
        """
        results = [self._schedule(c) for c in configs]
        self._interleaved(results, rounds, options or RETIME_OPTIONS)
        return results

    def time_schedules(self, schedules: list, rounds: int = 3, options: MeasureOptions | None = None,
                       between=None) -> list[Result]:
        """Time ``tl.Schedule`` objects (the baselines: the naive nest, the pick, the best record's) in ``rounds``
        interleaved rounds, each built once and run once a round with ``options`` (default: ``RETIME_OPTIONS``),
        no shortcut for slow ones, a round during which the machine was busy run again as :meth:`retime` does;
        ``between(k)``, when given, runs after round ``k``'s schedules (a library baseline timed in the same
        rounds). One that fails in any round keeps that error and is not run again.

        Example::

            >>> import tensorlang as tl
            >>> from tensorlang.tuner.task import Task
            >>> task = Task.create("matmul", preset="small", threads=1)
            >>> with LocalRunner(task, jobs=1) as runner:
            ...     [r] = runner.time_schedules([tl.schedule(task.op, **task.sizes)], rounds=2)
            >>> r.ok and len(r.times) >= 2 * RETIME_OPTIONS.min_runs
            True
        """
        results = [Result({}, s.to_json()) for s in schedules]
        self._interleaved(results, rounds, options or RETIME_OPTIONS, between)
        return results

    def _interleaved(self, results: list[Result], rounds: int, options: MeasureOptions, between=None) -> None:
        """Run every result once a round; a round during which the machine was busy for the task's threads (any of its
        measurements, :meth:`tensorlang.tuner.measure.disturbance.Disturbance.busy`) is run again, up to
        :data:`tensorlang.tuner.measure.disturbance.EXTRA_ROUNDS` more
        (:func:`tensorlang.tuner.measure.disturbance.run_rounds`), and each result keeps the times of the quiet rounds
        where there are any. ``disturbance`` combines those rounds' figures; ``extra["round_disturbances"]`` holds every
        round's, kept or not. ``between(k)`` follows round k."""
        todo = [r for r in results if r.ok]
        builds = self._build_all(todo) if todo else []
        saved, best = self.options, self.best_s
        self.options = options
        times: dict[int, dict] = {id(r): {} for r in todo}  # round -> that round's times
        figures: dict[int, dict] = {id(r): {} for r in todo}  # round -> that round's Disturbance

        def run_round(k: int) -> bool:
            busy = False
            for r, obj in zip(todo, builds):
                if obj is None or not r.ok:
                    continue
                self.best_s = None  # no shortcut for slow candidates: every one is timed in full
                self._run(r, obj)
                times[id(r)][k], figures[id(r)][k] = r.times, r.disturbance
                busy = busy or (r.disturbance is not None and r.disturbance.busy(self.task.threads))
            if between is not None:
                between(k)
            return busy

        try:
            kept = disturbance.run_rounds(rounds, run_round)
            for r in todo:
                if r.ok:
                    r.times = tuple(t for k in kept for t in times[id(r)].get(k, ()))
                    r.disturbance = Disturbance.combine(figures[id(r)].get(k) for k in kept)
                    r.extra["round_disturbances"] = list(figures[id(r)].values())
        finally:
            self.options, self.best_s = saved, best

    def measure_schedule(self, schedule) -> Result:
        """Measure one ``tl.Schedule`` (the default or the hand schedule, say) exactly like a candidate."""
        r = Result({}, schedule.to_json())
        self._measure_results([r], None)
        return r

    def _measure_results(self, results: list[Result], on_result) -> None:
        done = (lambda r: None) if on_result is None else on_result
        for r in results:
            if not r.ok:
                done(r)
        todo = [r for r in results if r.ok]
        if not todo:
            return
        t0 = time.perf_counter()
        builds = self._build_all(todo)
        self.phase_s["build"] += time.perf_counter() - t0
        for r, obj in zip(todo, builds):
            if obj is None:
                done(r)
        for r, obj in zip(todo, builds):
            if obj is not None:
                t0 = time.perf_counter()
                self._run(r, obj)
                self.phase_s["run"] += time.perf_counter() - t0
                done(r)

    def _build_all(self, todo: list[Result]) -> list:
        """Build every result's schedule; each builder process takes the next unbuilt one when it is free."""
        builds: list = [None] * len(todo)
        queue = iter(range(len(todo)))
        lock = threading.Lock()

        def serve(worker: Worker) -> None:
            while True:
                with lock:
                    i = next(queue, None)
                if i is None:
                    return
                builds[i] = self._build(todo[i], worker)

        with ThreadPoolExecutor(len(self._builders)) as pool:
            list(pool.map(serve, self._builders[: len(todo)]))
        return builds

    def _schedule(self, config: dict) -> Result:
        try:
            s = self.task.space.schedule(self.task.op, self.task.sizes, config)
            return Result(config, s.to_json())
        except tl.ScheduleError as e:
            return Result(config, None, error_kind="schedule", error=str(e))

    def _build(self, r: Result, worker: Worker):
        try:
            answer = worker.call({"schedule": r.schedule_json, "key": config_key(r.config)},
                                 self.options.build_timeout)
        except WorkerTimeout:
            r.error_kind, r.error = "build_timeout", f"the build took more than {self.options.build_timeout:g} s"
            return None
        except WorkerCrash as e:
            r.error_kind, r.error = "build", f"the build process died ({e})"
            return None
        if "error_kind" in answer:
            r.error_kind, r.error = answer["error_kind"], answer["error"]
            return None
        r.build_s = answer["build_s"]
        return answer

    def _run(self, r: Result, build: dict) -> None:
        request = {"object": build["object"], "name": build["name"], "key": config_key(r.config),
                   "best_s": self.best_s, "options": self.options.__dict__}
        try:
            answer = self._runner.call(request, self.options.run_timeout)
        except WorkerTimeout:
            r.error_kind, r.error = "timeout", f"the kernel ran for more than {self.options.run_timeout:g} s; killed"
            return
        except WorkerCrash as e:
            r.error_kind, r.error = "crash", f"the kernel crashed the measuring process ({e})"
            return
        if "error_kind" in answer:
            r.error_kind, r.error = answer["error_kind"], answer["error"]
            return
        r.times = tuple(answer["times"])
        r.disturbance = Disturbance.from_json(answer.get("disturbance"))
        m = r.median_s
        if self.best_s is None or m < self.best_s:
            self.best_s = m

    def close(self) -> None:
        """Stop every worker process and delete the temporary inputs."""
        for wk in self._builders + [self._runner]:
            wk.close()
        self._tmp.cleanup()

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

