"""`tensorlang bench`: one table of the default schedule, the hand schedule, numpy and (where installed)
PyTorch, timed in one run.

The baselines run in subprocesses, because OpenBLAS reads its thread count and its kernel choice when it loads: numpy
once as installed and, where the CPU has AVX-512, once with `OPENBLAS_CORETYPE=SkylakeX` (its AVX-512 kernel,
which OpenBLAS as installed does not always choose on its own), and PyTorch with `torch.set_num_threads`.
Every row's result is compared with the workload's numpy reference. A round of the rows during which other processes
took CPU the rows' threads needed (:mod:`tensorlang.tuner.measure.disturbance`) is timed again, and the table says when
the machine was busy.
"""
from __future__ import annotations

import importlib.util
import os
import tempfile
import time

import numpy as np

from tensorlang.compare import max_rel_error, reference_mismatch  # noqa: F401  (the models' metric, used here)
from tensorlang.errors import TensorlangError, UsageError
from tensorlang.tuner.measure.disturbance import Disturbance, Tally, busy_note, run_rounds


class BaselineError(TensorlangError, RuntimeError):
    """A library baseline (numpy or PyTorch) failed in its subprocess: out of memory at the sizes asked for, a
    crash of the library; the message ends with the worker's last line of stderr. The CLI prints it as one line.

    >>> issubclass(BaselineError, TensorlangError)
    True
    """


def torch_available() -> bool:
    """Whether PyTorch can be imported here (without importing it).

    >>> torch_available() in (True, False)
    True
    """
    return importlib.util.find_spec("torch") is not None


def avx512_coretype() -> str | None:
    """OpenBLAS's AVX-512 kernel family (``OPENBLAS_CORETYPE=SkylakeX``) where this CPU has AVX-512, else None:
    forced on a CPU without it, OpenBLAS's first sgemm dies of SIGILL, so the
    "numpy-avx512" baseline exists only where the instructions do.

    >>> avx512_coretype() in ("SkylakeX", None)
    True
    """
    from tensorlang.target import host_target
    return "SkylakeX" if host_target().vector_bits() == 512 else None


def library_handler(init: dict):
    """Worker factory (:class:`tensorlang.tuner.measure.worker.Worker`): a library's formulation of a workload, timed on
    request.

    ``init`` holds ``kind`` ("numpy": the workload's ``numpy_fast``, else its ``reference``; "torch": its
    ``torch_fast`` with ``torch.set_num_threads(threads)``), the workload ``name``, ``sizes``, the ``.npy`` paths of
    the ``inputs``, ``threads`` and a ``folder``. ``{"first": True}`` runs it once and writes its outputs to
    ``folder/out{i}.npy`` (answer: their count, the library's version and this process's ``pid``, whose CPU time
    a bench counts as its own); ``{"runs": n, "min_time": t}`` times at least n runs and t seconds (answer: the
    times).

    Example::

        w = Worker("tensorlang.tuner.bench:library_handler", {"kind": "numpy", "name": "matmul", ...},
                   env={"OPENBLAS_CORETYPE": "SkylakeX"})
        w.call({"runs": 10, "min_time": 0.1}, timeout=60)["times"]
    """
    from tensorlang import schedules
    from tensorlang.timing import measure
    w = schedules.get(init["name"])
    sizes = init["sizes"]
    inputs = [np.load(f) for f in init["inputs"]]
    if init["kind"] == "torch":
        import torch
        torch.set_num_threads(init["threads"])
        tensors = [torch.from_numpy(a) for a in inputs]

        def run():
            with torch.inference_mode():
                return w.torch_fast(torch, *tensors, **sizes)
        version = torch.__version__
    else:
        fn = w.numpy_fast or w.reference

        def run():
            return fn(*inputs, **sizes)
        version = np.__version__

    def handle(request: dict) -> dict:
        if request.get("first"):
            out = run()
            outs = out if isinstance(out, tuple) else (out,)
            for i, o in enumerate(outs):
                np.save(os.path.join(init["folder"], f"out{i}.npy"),
                        o.numpy() if init["kind"] == "torch" else np.asarray(o))
            return {"outputs": len(outs), "version": version, "pid": os.getpid()}
        return {"times": measure(run, min_runs=request["runs"], min_time=request["min_time"])}

    return handle


class KernelRow:
    """A row of the bench: a tensorlang kernel, timed in this process.

    Example::

        row = KernelRow("auto", tl.build(op, **sizes), inputs)
        outputs = row.first(); times = row.burst(10, 0.05)
    """

    def __init__(self, name: str, kernel, inputs: list):
        self.name, self.kernel, self.inputs = name, kernel, inputs
        self.extra = {"schedule_source": getattr(kernel, "schedule_source", "given")}

    def first(self):
        """Run once (a warm-up) and return the outputs; ``first_s`` keeps how long that call took."""
        import time
        t0 = time.perf_counter()
        out = self.kernel(*self.inputs)
        self.first_s = time.perf_counter() - t0
        return out

    def burst(self, runs: int, min_time: float) -> list[float]:
        """Time at least `runs` calls and `min_time` seconds; the times."""
        from tensorlang.timing import measure
        return measure(lambda: self.kernel(*self.inputs), min_runs=runs, min_time=min_time)

    def close(self) -> None:
        """Nothing to let go."""


#: Fresh processes a library row starts; it keeps the fastest of them by a short probe
#: (:data:`PROBE_RUNS` runs and :data:`PROBE_TIME` seconds each). One library call runs at speeds up to 30% apart
#: in different processes of one machine (numpy's im2col convolution), so a single process would make the same
#: baseline read fast in one run and slow in the next; the fastest of three is the library at its best on this
#: machine in most runs.
LIBRARY_PROCESSES = 3
#: The environment variable that changes :data:`LIBRARY_PROCESSES` (1: one process, no probe; quicker, and a
#: library row may then read slow in one run and fast in the next).
PROCESSES_VARIABLE = "TENSORLANG_BENCH_PROCESSES"
PROBE_RUNS, PROBE_TIME = 5, 0.1
#: Probes go over the processes this many times, each probe after a pause of PROBE_GAP seconds: a library's threads
#: spin for a while after its call returns (OpenBLAS's for about 0.1 s, OpenMP's too), and would slow the next
#: process's probe.
PROBE_PASSES, PROBE_GAP = 2, 0.3
#: A first call longer than this (seconds) is probed by one call.
PROBE_SLOW = 1.0


def library_processes() -> int:
    """The fresh processes a library row starts and probes: ``TENSORLANG_BENCH_PROCESSES`` (an integer from 1 to
    16) where it is set, else :data:`LIBRARY_PROCESSES`; any other value is an error naming the variable.

    >>> library_processes() >= 1
    True
    """
    text = os.environ.get(PROCESSES_VARIABLE)
    if text is None or text == "":
        return LIBRARY_PROCESSES
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 16:
        raise UsageError(f"{PROCESSES_VARIABLE}={text!r}: the library rows' processes are an integer from 1 to 16")
    return value


class WorkerRow:
    """A row of a comparison timed in a worker process (:class:`tensorlang.tuner.measure.worker.Worker` running
    `handler` with `init`, the `inputs` saved as ``.npy`` files it reads, and `env`): ``first()`` runs it once and
    returns its outputs, ``burst(runs, min_time)`` times it, ``close()`` stops the process. With ``processes`` above
    1, ``first()`` starts that many fresh processes, probes each, keeps the fastest and stops the others
    (``extra["probe_s"]`` holds each one's probe median). ``pids`` holds the kept process's id once it ran (its CPU
    time is the run's own, not another program's).

    The handler answers ``{"first": True}`` with ``outputs`` (how many ``out{i}.npy`` it wrote into ``folder``),
    ``version``, ``pid`` and optionally ``schedule_s``, and ``{"runs": n, "min_time": t}`` with ``times``.

    Example::

        row = WorkerRow("numpy", "tensorlang.tuner.bench:library_handler", {"kind": "numpy", "name": "matmul",
                        "sizes": sizes, "threads": 2}, inputs, env={"OPENBLAS_NUM_THREADS": "2"}, processes=3)
        outputs = row.first(); times = row.burst(10, 0.1); row.close()
    """

    def __init__(self, name: str, handler: str, init: dict, inputs: list, env: dict, *, processes: int = 1,
                 first_timeout: float = 600.0):
        self.name, self.processes, self.first_timeout = name, processes, first_timeout
        self._handler, self._init, self._env = handler, init, env
        self._tmp = tempfile.TemporaryDirectory(prefix="tensorlang-bench-")
        self._files = []
        for i, a in enumerate(inputs):
            self._files.append(os.path.join(self._tmp.name, f"in{i}.npy"))
            np.save(self._files[-1], a)
        self._worker = None
        self._folder = self._tmp.name
        self.extra: dict = {}
        self.pids: tuple = ()

    def _call(self, worker, request: dict, timeout: float):
        """One request to `worker`; subclasses turn its failures into their own errors."""
        return worker.call(request, timeout=timeout)

    def first(self) -> list:
        """Start the process (the fastest of ``processes``), run once and return the outputs (a list of arrays)."""
        from tensorlang.timing import median
        from tensorlang.tuner.measure.worker import Worker
        started = []
        try:
            for k in range(self.processes):
                folder = os.path.join(self._tmp.name, f"p{k}")
                os.makedirs(folder, exist_ok=True)
                worker = Worker(self._handler, {**self._init, "inputs": self._files, "folder": folder},
                                env=self._env)
                t0 = time.perf_counter()
                started.append((worker, folder, self._call(worker, {"first": True}, self.first_timeout)))
                took = time.perf_counter() - t0
            best = 0
            if len(started) > 1:
                runs = PROBE_RUNS if took < PROBE_SLOW else 1
                passes: list[list[float]] = [[] for _ in started]
                for _ in range(PROBE_PASSES):
                    for k, (w, _, _) in enumerate(started):
                        time.sleep(PROBE_GAP)
                        passes[k].append(median(self._call(w, {"runs": runs, "min_time": PROBE_TIME}, 3600)["times"]))
                probe = [min(p) for p in passes]
                best = min(range(len(probe)), key=probe.__getitem__)
                self.extra["probe_s"] = probe
        except BaseException:
            for w, _, _ in started:
                w.close()
            raise
        for k, (w, _, _) in enumerate(started):
            if k != best:
                w.close()
        self._worker, self._folder, answer = started[best]
        self.extra["version"] = answer["version"]
        if "schedule_s" in answer:
            self.extra["schedule_s"] = answer["schedule_s"]
        self.pids = (answer["pid"],)
        return [np.load(os.path.join(self._folder, f"out{i}.npy")) for i in range(answer["outputs"])]

    def burst(self, runs: int, min_time: float) -> list[float]:
        """Time at least `runs` calls and `min_time` seconds in the worker; the times."""
        return self._call(self._worker, {"runs": runs, "min_time": min_time}, 3600)["times"]

    def close(self) -> None:
        """Stop the worker and delete its files."""
        if self._worker is not None:
            self._worker.close()
        self._tmp.cleanup()


def library_env(threads: int, coretype: str | None = None) -> dict:
    """The environment of a library's worker: every library's thread count set, and with `coretype` OpenBLAS's
    kernel family.

    >>> library_env(2)["OPENBLAS_NUM_THREADS"], "OPENBLAS_CORETYPE" in library_env(2)
    ('2', False)
    """
    env = {var: str(threads) for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    return env


class LibraryRow(WorkerRow):
    """A row of the bench: a library's formulation of a workload (:func:`library_handler`), timed in a worker
    process of its own (OpenBLAS reads its thread count and its kernel choice when it loads), the fastest of
    :func:`library_processes` fresh ones, asked for a burst of runs each round.

    Example::

        row = LibraryRow("numpy-avx512", w, sizes, inputs, threads=2, kind="numpy", coretype="SkylakeX")
        outputs = row.first(); times = row.burst(10, 0.05); row.close()
    """

    def __init__(self, name: str, w, sizes: dict, inputs: list, threads: int, kind: str = "numpy",
                 coretype: str | None = None):
        if kind not in ("numpy", "torch"):
            raise UsageError(f"baseline: kind is 'numpy' or 'torch', not {kind!r}")
        self.kind = kind
        super().__init__(name, "tensorlang.tuner.bench:library_handler",
                         {"kind": kind, "name": w.name, "sizes": sizes, "threads": threads}, inputs,
                         library_env(threads, coretype), processes=library_processes())

    def _call(self, worker, request: dict, timeout: float):
        from tensorlang.tuner.measure.worker import WorkerCrash, WorkerTimeout
        try:
            return worker.call(request, timeout=timeout)
        except (WorkerCrash, WorkerTimeout) as e:
            raise BaselineError(f"{self.kind} baseline failed: {str(e).strip().splitlines()[-1]}") from None


def library_row(name: str, w, sizes: dict, inputs: list, threads: int, kind: str = "numpy",
                coretype: str | None = None):
    """The bench row of a library baseline (see :class:`LibraryRow`); the tests replace it to inject faults.

    Example::

        row = library_row("numpy", w, sizes, inputs, threads=2)
    """
    return LibraryRow(name, w, sizes, inputs, threads, kind, coretype)


def time_interleaved(rows: list, rounds: int, min_runs: int, min_time: float, log=lambda *a: None,
                     tally: Tally | None = None) -> list[dict]:
    """Time `rows` in `rounds` rounds, each row once a round (a burst of ``min_runs / rounds`` runs and
    ``min_time / rounds`` seconds), so that a slow spell of the machine hits every row alike: one dict per row
    with the median over every run, the runs, and the spread of the rounds' medians (lowest and highest, as a
    fraction of the median).

    Each round's disturbance is read (:class:`tensorlang.tuner.measure.disturbance.Watch`; the CPU time of the processes
    a row names in its ``pids`` counts as the bench's own) and added to ``tally`` (default: one for this process's
    kernel threads); a round during which the machine was busy for the tally's threads is run again, at most 3 more
    rounds, and the figures rest on the quiet rounds where there are any
    (:func:`tensorlang.tuner.measure.disturbance.run_rounds`). Each row's dict also holds ``busy_rounds`` (the rounds
    run during which the machine was busy) and ``others_cpus`` (the CPUs other processes used in the kept rounds; None
    where unknown).

    >>> class Fixed:
    ...     def __init__(self, t): self.t = t
    ...     def burst(self, runs, min_time): return [self.t] * runs
    >>> [r["median_s"] for r in time_interleaved([Fixed(1e-3), Fixed(2e-3)], rounds=3, min_runs=6, min_time=0)]
    [0.001, 0.002]
    """
    from tensorlang.timing import median
    if tally is None:
        from tensorlang.threadpool import num_threads
        tally = Tally(num_threads())
    pids = [p for row in rows for p in getattr(row, "pids", ())]
    per_round = max(1, -(-min_runs // rounds))
    times: list[dict] = [{} for _ in rows]  # round -> the row's times in it
    figures: dict[int, Disturbance | None] = {}

    def run_round(k: int) -> bool:
        with tally.watch(pids) as watch:
            for i, row in enumerate(rows):
                times[i][k] = row.burst(per_round, min_time / rounds)
        d = figures[k] = watch.disturbance
        busy = d is not None and d.busy(tally.threads)
        log(f"  round {k + 1}/{rounds}: " + ", ".join(f"{getattr(r, 'name', i)} {median(times[i][k]) * 1e3:.3f} ms"
                                                  for i, r in enumerate(rows))
            + (f" (the machine was busy: other processes used {d.others_cpus:.1f} CPUs)" if busy else ""))
        return busy

    kept = run_rounds(rounds, run_round)
    busy_rounds = sum(1 for d in figures.values() if d is not None and d.busy(tally.threads))
    quiet = Disturbance.combine(figures[k] for k in kept)
    out = []
    for per in times:
        ts = [t for k in kept for t in per[k]]
        ms = [median(per[k]) for k in kept]
        m = median(ts)
        out.append({"median_s": m, "runs": len(ts), "spread": [min(ms) / m - 1, max(ms) / m - 1],
                    "busy_rounds": busy_rounds, "others_cpus": None if quiet is None else quiet.others_cpus})
    return out


def baseline(w, sizes: dict, inputs: list, threads: int, min_runs: int, min_time: float, *, kind: str = "numpy",
             coretype: str | None = None) -> dict:
    """Time a library's formulation of the workload on `inputs` in a fresh process with `threads` threads:
    `kind` "numpy" (`numpy_fast`, else `reference`; with `coretype`, OpenBLAS's kernel family) or "torch"
    (`torch_fast`). Returns {"median_s", "runs", "version", "outputs"} (the outputs of the first call, as numpy
    arrays); a BaselineError carries the worker's last line of stderr when it fails.

    Example::

        import numpy as np
        from tensorlang import schedules
        w = schedules.get("matmul")
        sizes = w.sizes("small")
        inputs = w.make_inputs(sizes, np.random.default_rng(0))
        baseline(w, sizes, inputs, threads=2, min_runs=10, min_time=0.3, coretype="SkylakeX")["median_s"]
        # e.g. 2.1e-05
    """
    from tensorlang.timing import median
    row = library_row(kind, w, sizes, inputs, threads, kind, coretype)
    try:
        outputs = row.first()
        times = row.burst(min_runs, min_time)
    finally:
        row.close()
    return {"median_s": median(times), "runs": len(times), "version": row.extra.get("version"), "outputs": outputs}


#: The timing contract of every comparison tensorlang reports (``tensorlang bench``, the summary of ``tensorlang
#: tune``, the benchmarks): every contender through its public call with its outputs allocated as a user's call
#: allocates them, the same thread count set explicitly for every library, rows alternating within each round.
TIMING_CONTRACT = ("public calls with outputs allocated, {threads} thread{s} set for every library, {rounds} "
                   "alternating rounds, medians")


def contract(threads: int, rounds: int) -> str:
    """The timing contract as one line, for a summary to say how its rows were timed.

    >>> contract(2, 5)
    'public calls with outputs allocated, 2 threads set for every library, 5 alternating rounds, medians'
    """
    return TIMING_CONTRACT.format(threads=threads, s="s" if threads != 1 else "", rounds=rounds)


#: The rounds, runs and seconds of every row of ``tensorlang bench`` by default, and of the summary of ``tensorlang
#: tune``, which times the same rows with the same call (fewer rounds let one slow spell of the machine move a
#: median: 3 rounds put the same record at 0.41x-0.76x numpy on the small matmul, 5 rounds at 0.72x-0.76x).
BENCH_ROUNDS, BENCH_RUNS, BENCH_SECONDS = 5, 10, 0.3

#: The library rows :func:`run_bench` can add: numpy as installed, numpy with OpenBLAS's AVX-512 kernels (where
#: the CPU has AVX-512) and PyTorch (where it is installed and the workload has a ``torch_fast``).
LIBRARIES = ("numpy", "numpy-avx512", "torch")


def run_bench(w, sizes: dict, threads: int, min_runs: int = BENCH_RUNS, min_time: float = BENCH_SECONDS,
              extra: list | None = None, log=print, rounds: int = BENCH_ROUNDS, libraries=LIBRARIES,
              timeout: float | None = None, tally: Tally | None = None) -> dict:
    """Time, in `rounds` interleaved rounds (:func:`time_interleaved`), the naive loop nest ("naive"), the
    auto-scheduler's zero-trial pick ("auto"), the hand schedule ("hand", where the workload has one), the `extra`
    (name, Schedule) pairs (the best tuned record: "tuned") and the `libraries` rows of :data:`LIBRARIES` that
    apply (a built-in workload's only: a user's program has no library formulation), all on `threads` threads
    and under one timing contract (:func:`contract`). A kernel whose warm-up call took more than `timeout`
    seconds is not timed (its row has "error"). Each row's result is checked against the workload's reference
    (:meth:`tensorlang.schedules.workload.Workload.check`, after every timing); `log` gets one line a round.

    Returns {"workload", "sizes", "threads", "rounds", "contract", "results", "disturbance"}, each result with "name",
    "median_s", "runs", "gflops", "spread" (the lowest and highest round median over the median, minus 1),
    "busy_rounds", "others_cpus", "max_rel_error", "tolerance", "matches_reference" and, when it does not match,
    "mismatch" saying where (and the library's "version" for numpy and torch); "disturbance" is the figures of
    :meth:`tensorlang.tuner.measure.disturbance.Tally.to_json` over the rounds (of `tally`, when given, which then also
    counts them).

    Example::

        from tensorlang import schedules
        w = schedules.get("conv2d")
        report = run_bench(w, w.sizes("resnet18_3x3"), threads=2)
        [r["name"] for r in report["results"]]   # ['naive', 'auto', 'hand', 'numpy', 'numpy-avx512', 'torch']
    """
    if rounds < 1:
        raise UsageError(f"rounds must be at least 1, got {rounds}")
    unknown = [name for name in libraries if name not in LIBRARIES]
    if unknown:
        raise UsageError(f"libraries: {', '.join(map(repr, unknown))} not among {', '.join(LIBRARIES)}")
    saved = os.environ.get("TENSORLANG_NUM_THREADS")
    os.environ["TENSORLANG_NUM_THREADS"] = str(threads)
    try:
        return _run_bench(w, sizes, threads, min_runs, min_time, extra, log, rounds, libraries, timeout,
                          Tally(threads) if tally is None else tally)
    finally:  # the process's kernels go back to the thread count they had
        if saved is None:
            del os.environ["TENSORLANG_NUM_THREADS"]
        else:
            os.environ["TENSORLANG_NUM_THREADS"] = saved


def _library_rows(w, sizes, inputs, threads, libraries) -> list:
    from tensorlang import schedules
    if schedules.WORKLOADS.get(w.name) is not w:  # a user's program has no library formulation
        return []
    wanted = [("numpy", "numpy", None)]
    coretype = avx512_coretype()
    if coretype:
        wanted.append(("numpy-avx512", "numpy", coretype))
    if w.torch_fast is not None and torch_available():
        wanted.append(("torch", "torch", None))
    return [library_row(name, w, sizes, inputs, threads, kind, core) for name, kind, core in wanted
            if name in libraries]


def _run_bench(w, sizes, threads, min_runs, min_time, extra, log, rounds, libraries, timeout, tally) -> dict:
    import tensorlang as tl
    from tensorlang.choice import auto_schedule
    op = tl.op(w.source)
    inputs = w.make_inputs(sizes, np.random.default_rng(0))
    flops = w.flops(sizes)
    candidates = [("naive", tl.schedule(op, **sizes)), ("auto", auto_schedule(op, sizes, threads))]
    if w.hand_schedule is not None:
        s = tl.schedule(op, **sizes)
        w.hand_schedule(s)
        candidates.append(("hand", s))
    candidates += list(extra or [])
    rows = [KernelRow(name, tl.build(sched), inputs) for name, sched in candidates]
    rows += _library_rows(w, sizes, inputs, threads, libraries)
    dropped: dict[str, str] = {}
    try:
        outputs = []
        for row in rows:  # also the warm-up
            outputs.append(row.first())
            took = getattr(row, "first_s", 0.0)
            if timeout is not None and took > timeout:
                dropped[row.name] = f"one call took {took:.1f} s, more than the time limit of {timeout:g} s"
        timed_rows = [r for r in rows if r.name not in dropped]
        timed = dict(zip(map(id, timed_rows), time_interleaved(timed_rows, rounds, min_runs, min_time, log, tally)))
    finally:
        for row in rows:
            row.close()
    results = []
    for row in rows:
        if row.name in dropped:
            results.append({"name": row.name, "median_s": None, "gflops": None, "error": dropped[row.name],
                            **row.extra})
        else:
            results.append({"name": row.name, **timed[id(row)], **row.extra})
    # the float64 reference last: its BLAS threads spin for a while after it returns, and would share the CPUs
    # with the timings that follow, and slow them
    expected = w.reference(*inputs, **sizes)
    for r, out in zip(results, outputs):
        check = w.check(out, expected, sizes)
        r.update(max_rel_error=check.error, tolerance=check.tolerance, matches_reference=check.ok)
        if not check.ok:
            r["mismatch"] = check.why
    for r in results:
        if r["median_s"]:
            r["gflops"] = flops / r["median_s"] / 1e9
    return {"workload": w.name, "sizes": sizes, "threads": threads, "rounds": rounds,
            "contract": contract(threads, rounds), "results": results, "disturbance": tally.to_json()}


def format_table(report: dict) -> str:
    """The report of :func:`run_bench` as a text table: median time, GFLOPS, the spread of the rounds' medians,
    and speed ratios against numpy, numpy-avx512 and, when the report has a torch row, PyTorch (above 1x: faster
    than that baseline); a report without library rows (a user's program) compares with the naive loop nest. The
    timing contract follows the table, then, when rounds were timed while the machine was busy, a note saying
    so (:func:`tensorlang.tuner.measure.disturbance.busy_note`); a row that could not be timed says why.

    >>> rows = [{"name": "naive", "median_s": 2.5e-4, "gflops": 2.1, "spread": [-0.02, 0.05]},
    ...         {"name": "numpy", "median_s": 5e-5, "gflops": 10.5},
    ...         {"name": "numpy-avx512", "median_s": 4e-5, "gflops": 13.1}]
    >>> print(format_table({"workload": "matmul", "sizes": {"M": 64, "N": 64, "K": 64}, "threads": 1,
    ...                     "results": rows, "contract": contract(1, 5)}))
    matmul (M=64, N=64, K=64), 1 thread
                    median ms    GFLOPS     spread  vs numpy  vs avx512
    naive               0.250       2.1    -2%/+5%     0.20x      0.16x
    numpy               0.050      10.5                1.00x      0.80x
    numpy-avx512        0.040      13.1                1.25x      1.00x
    timed as: public calls with outputs allocated, 1 thread set for every library, 5 alternating rounds, medians
    >>> rows.append({"name": "torch", "median_s": 2.5e-5, "gflops": 21.0})
    >>> print(format_table({"workload": "matmul", "sizes": {"M": 64, "N": 64, "K": 64}, "threads": 1,
    ...                     "results": rows}).splitlines()[-1])
    torch               0.025      21.0                2.00x      1.60x     1.00x
    >>> print(format_table({"workload": "matmul", "sizes": {"M": 64}, "threads": 1, "results": rows[:1],
    ...                     "disturbance": {"busy": 2, "busy_fraction": 0.25, "others_cpus": 1.5,
    ...                                     "slowdown": 2.0}}).splitlines()[-1])
    note: the machine was busy during 25% of the measurements (other processes used 1.5 CPUs on average while \
they ran); figures may be off by up to 100%
    """
    rows = report["results"]
    base = {r["name"]: r["median_s"] for r in rows if r.get("median_s")}
    against = [(n, t, w) for n, t, w in (("numpy", "vs numpy", 9), ("numpy-avx512", "vs avx512", 10),
                                         ("torch", "vs torch", 9)) if n in base]
    if not against:
        against = [(n, f"vs {n}", 9) for n in ("naive",) if n in base]
    lines = [f"{report['workload']} ({', '.join(f'{k}={v}' for k, v in report['sizes'].items())}), "
             f"{report['threads']} thread{'s' if report['threads'] > 1 else ''}",
             f"{'':14} {'median ms':>10} {'GFLOPS':>9} {'spread':>10}"
             + "".join(f" {title:>{width}}" for _, title, width in against)]
    for r in rows:
        if not r.get("median_s"):
            lines.append(f"{r['name']:14} not timed: {r.get('error', 'no time')}")
            continue
        spread = r.get("spread")
        text = f"{spread[0] * 100:+.0f}%/{spread[1] * 100:+.0f}%" if spread else ""
        lines.append(f"{r['name']:14} {r['median_s'] * 1e3:10.3f} {r['gflops']:9.1f} {text:>10}"
                     + "".join(f" {base[name] / r['median_s']:{width - 1}.2f}x" for name, _, width in against))
    if report.get("contract"):
        lines.append(f"timed as: {report['contract']}")
    note = busy_note(report.get("disturbance"))
    if note:
        lines.append(f"note: {note}")
    return "\n".join(lines)
