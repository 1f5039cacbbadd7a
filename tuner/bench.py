"""`tensorlang bench`: one table of the default schedule, the hand schedule, numpy and (where installed)
PyTorch, timed in one run.

The baselines run in subprocesses, because OpenBLAS reads its thread count and its kernel choice when it loads:
numpy once as installed and, where the CPU has AVX-512, once with `OPENBLAS_CORETYPE=SkylakeX` (its AVX-512
kernel; this machine's environment pins the AVX2 `Haswell` kernel, which is half as fast), and PyTorch with
`torch.set_num_threads`. Every row's result is compared with the workload's numpy reference.
"""
from __future__ import annotations

import importlib.util
import os
import tempfile

import numpy as np

from tensorlang.errors import TensorlangError, UsageError

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
    forced on a CPU without it, OpenBLAS's first sgemm dies of SIGILL (seen on an AMD Zen 1 guest), so the
    "numpy-avx512" baseline exists only where the instructions do.

    >>> avx512_coretype() in ("SkylakeX", None)
    True
    """
    from tensorlang.target import host_target
    return "SkylakeX" if host_target().vector_bits() == 512 else None


def max_rel_error(out, expected) -> float:
    """The largest absolute difference between `out` and `expected` (arrays, or tuples of arrays for several
    outputs) relative to the largest finite magnitude of `expected` (at least 1). A NaN or an infinity where
    `expected` has none in that place, or a number where it has NaN, is an infinite error: a NaN never passes
    as a match (see :func:`reference_mismatch` for what differs).

    >>> max_rel_error(np.array([1.0, 2.5]), np.array([1.0, 2.0]))
    0.25
    >>> max_rel_error((np.ones(2), np.zeros(3)), (np.ones(2), np.full(3, 10.0)))
    1.0
    >>> max_rel_error(np.array([1.0, np.nan]), np.array([1.0, 2.0]))
    inf
    >>> max_rel_error(np.array([np.nan, -np.inf, 3.0]), np.array([np.nan, -np.inf, 3.0]))
    0.0
    """
    return _compare(out, expected)[0]


def reference_mismatch(out, expected) -> str:
    """What makes :func:`max_rel_error` infinite: a different count or shape of outputs, or NaNs and infinities
    that `expected` does not have in those places (the first output that has them); "" when there is none.

    >>> reference_mismatch(np.array([np.nan, 2.0, np.inf]), np.array([1.0, 2.0, 3.0]))
    'output 0: 1 NaN and 1 infinity where the reference has a number (first at index (0,))'
    >>> reference_mismatch(np.array([1.0, 2.0]), np.array([np.nan, 2.0]))
    'output 0: 1 number where the reference has NaN or infinity (first at index (0,))'
    >>> reference_mismatch(np.ones(2), np.ones(2))
    ''
    """
    return _compare(out, expected)[1]


def _compare(out, expected) -> tuple[float, str]:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    exps = expected if isinstance(expected, tuple) else (expected,)
    if len(outs) != len(exps):
        return float("inf"), f"{len(outs)} outputs where the reference has {len(exps)}"
    worst = 0.0
    for i, (o, e) in enumerate(zip(outs, exps)):
        o, e = np.asarray(o, np.float64), np.asarray(e, np.float64)
        if o.shape != e.shape:
            return float("inf"), f"output {i}: shape {o.shape} where the reference has {e.shape}"
        # NaN where the reference has NaN, an infinity where it has that infinity: the same special value
        same = (np.isnan(o) & np.isnan(e)) | (np.isinf(e) & (o == e))
        wrong = ~same & ~np.isfinite(o)
        missing = ~same & ~np.isfinite(e) & np.isfinite(o)
        if wrong.any():
            nan, inf = int((wrong & np.isnan(o)).sum()), int((wrong & np.isinf(o)).sum())
            what = " and ".join(t for t in (f"{nan} NaN" if nan else "", f"{inf} infinit{'y' if inf == 1 else 'ies'}"
                                            if inf else "") if t)
            at = np.unravel_index(int(np.argmax(wrong)), o.shape)
            return float("inf"), (f"output {i}: {what} where the reference has a number (first at index "
                                   f"{tuple(int(x) for x in at)})")
        if missing.any():
            n = int(missing.sum())
            at = np.unravel_index(int(np.argmax(missing)), o.shape)
            return float("inf"), (f"output {i}: {n} number{'s' if n > 1 else ''} where the reference has NaN or "
                                   f"infinity (first at index {tuple(int(x) for x in at)})")
        finite = ~same
        if finite.any():
            scale = max(1.0, float(np.max(np.abs(e[finite]))))
            worst = max(worst, float(np.max(np.abs(o[finite] - e[finite]))) / scale)
    return worst, ""


def library_handler(init: dict):
    """Worker factory (:class:`tuner.worker.Worker`): a library's formulation of a workload, timed on request.

    ``init`` holds ``kind`` ("numpy": the workload's ``numpy_fast``, else its ``reference``; "torch": its
    ``torch_fast`` with ``torch.set_num_threads(threads)``), the workload ``name``, ``sizes``, the ``.npy`` paths of
    the ``inputs``, ``threads`` and a ``folder``. ``{"first": True}`` runs it once and writes its outputs to
    ``folder/out{i}.npy`` (answer: their count and the library's version); ``{"runs": n, "min_time": t}`` times
    at least n runs and t seconds (answer: the times).

    Example::

        w = Worker("tuner.bench:library_handler", {"kind": "numpy", "name": "matmul", ...},
                   env={"OPENBLAS_CORETYPE": "SkylakeX"})
        w.call({"runs": 10, "min_time": 0.1}, timeout=60)["times"]
    """
    import schedules
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
            return {"outputs": len(outs), "version": version}
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
        """Run once (a warm-up) and return the outputs."""
        return self.kernel(*self.inputs)

    def burst(self, runs: int, min_time: float) -> list[float]:
        """Time at least `runs` calls and `min_time` seconds; the times."""
        from tensorlang.timing import measure
        return measure(lambda: self.kernel(*self.inputs), min_runs=runs, min_time=min_time)

    def close(self) -> None:
        """Nothing to let go."""


class LibraryRow:
    """A row of the bench: a library's formulation, timed in a worker process of its own (OpenBLAS reads its
    thread count and its kernel choice when it loads), started once and asked for a burst of runs each round.

    Example::

        row = LibraryRow("numpy-avx512", w, sizes, inputs, threads=2, kind="numpy", coretype="SkylakeX")
        outputs = row.first(); times = row.burst(10, 0.05); row.close()
    """

    def __init__(self, name: str, w, sizes: dict, inputs: list, threads: int, kind: str = "numpy",
                 coretype: str | None = None):
        from tuner.worker import Worker
        if kind not in ("numpy", "torch"):
            raise UsageError(f"baseline: kind is 'numpy' or 'torch', not {kind!r}")
        self.name, self.kind = name, kind
        self._tmp = tempfile.TemporaryDirectory(prefix="tensorlang-bench-")
        files = []
        for i, a in enumerate(inputs):
            files.append(os.path.join(self._tmp.name, f"in{i}.npy"))
            np.save(files[-1], a)
        env = {var: str(threads) for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
        if coretype:
            env["OPENBLAS_CORETYPE"] = coretype
        self._worker = Worker("tuner.bench:library_handler",
                              {"kind": kind, "name": w.name, "sizes": sizes, "inputs": files, "threads": threads,
                               "folder": self._tmp.name}, env=env)
        self.extra: dict = {}

    def _call(self, request: dict):
        from tuner.worker import WorkerCrash, WorkerTimeout
        try:
            return self._worker.call(request, timeout=600)
        except (WorkerCrash, WorkerTimeout) as e:
            raise BaselineError(f"{self.kind} baseline failed: {str(e).strip().splitlines()[-1]}") from None

    def first(self):
        """Run once in the worker and return its outputs (a list of arrays)."""
        answer = self._call({"first": True})
        self.extra["version"] = answer["version"]
        return [np.load(os.path.join(self._tmp.name, f"out{i}.npy")) for i in range(answer["outputs"])]

    def burst(self, runs: int, min_time: float) -> list[float]:
        """Time at least `runs` calls and `min_time` seconds in the worker; the times."""
        return self._call({"runs": runs, "min_time": min_time})["times"]

    def close(self) -> None:
        """Stop the worker and delete its files."""
        self._worker.close()
        self._tmp.cleanup()


def library_row(name: str, w, sizes: dict, inputs: list, threads: int, kind: str = "numpy",
                coretype: str | None = None):
    """The bench row of a library baseline (see :class:`LibraryRow`); the tests replace it to inject faults.

    Example::

        row = library_row("numpy", w, sizes, inputs, threads=2)
    """
    return LibraryRow(name, w, sizes, inputs, threads, kind, coretype)


def time_interleaved(rows: list, rounds: int, min_runs: int, min_time: float, log=lambda *a: None) -> list[dict]:
    """Time `rows` in `rounds` rounds, each row once a round (a burst of ``min_runs / rounds`` runs and
    ``min_time / rounds`` seconds), so that a slow spell of the machine hits every row alike: one dict per row
    with the median over every run, the runs, and the spread of the rounds' medians (lowest and highest, as a
    fraction of the median).

    >>> class Fixed:
    ...     def __init__(self, t): self.t = t
    ...     def burst(self, runs, min_time): return [self.t] * runs
    >>> [r["median_s"] for r in time_interleaved([Fixed(1e-3), Fixed(2e-3)], rounds=3, min_runs=6, min_time=0)]
    [0.001, 0.002]
    """
    from tensorlang.timing import median
    per_round = max(1, -(-min_runs // rounds))
    times: list[list[float]] = [[] for _ in rows]
    medians: list[list[float]] = [[] for _ in rows]
    for k in range(rounds):
        for i, row in enumerate(rows):
            t = row.burst(per_round, min_time / rounds)
            times[i] += t
            medians[i].append(median(t))
        log(f"  round {k + 1}/{rounds}: " + ", ".join(f"{getattr(r, 'name', i)} {medians[i][-1] * 1e3:.3f} ms"
                                                  for i, r in enumerate(rows)))
    out = []
    for ts, ms in zip(times, medians):
        m = median(ts)
        out.append({"median_s": m, "runs": len(ts), "spread": [min(ms) / m - 1, max(ms) / m - 1]})
    return out


def baseline(w, sizes: dict, inputs: list, threads: int, min_runs: int, min_time: float, *, kind: str = "numpy",
             coretype: str | None = None) -> dict:
    """Time a library's formulation of the workload on `inputs` in a fresh process with `threads` threads:
    `kind` "numpy" (`numpy_fast`, else `reference`; with `coretype`, OpenBLAS's kernel family) or "torch"
    (`torch_fast`). Returns {"median_s", "runs", "version", "outputs"} (the outputs of the first call, as numpy
    arrays); a BaselineError carries the worker's last line of stderr when it fails.

    Example::

        import numpy as np, schedules
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


def run_bench(w, sizes: dict, threads: int, min_runs: int = 10, min_time: float = 0.3, extra: list | None = None,
              log=print, rounds: int = 5) -> dict:
    """Time, in `rounds` interleaved rounds (:func:`time_interleaved`), the naive loop nest ("naive"), the
    auto-scheduler's zero-trial pick ("auto"), the hand schedule ("hand", where the workload has one), the `extra`
    (name, Schedule) pairs (the best tuned record: "tuned"), numpy as installed and (where the CPU has AVX-512)
    with its AVX-512 kernel, and PyTorch where it is installed and the workload has a `torch_fast`, all on
    `threads` threads. Each row's result
    is compared with the workload's reference (`max_rel_error`, computed after every timing); `log` gets one line
    a round. Returns {"workload", "sizes", "threads", "rounds", "results"}, each result with "name", "median_s",
    "runs", "gflops", "spread" (the lowest and highest round median over the median, minus 1) and
    "max_rel_error" (and the library's "version" for numpy and torch; and "mismatch", saying where, when the row
    has a NaN or an infinity that the reference does not).

    Example::

        import schedules
        w = schedules.get("conv2d")
        report = run_bench(w, w.sizes("resnet18_3x3"), threads=2)
        [r["name"] for r in report["results"]]   # ['naive', 'auto', 'hand', 'numpy', 'numpy-avx512', 'torch']
    """
    if rounds < 1:
        raise UsageError(f"rounds must be at least 1, got {rounds}")
    saved = os.environ.get("TENSORLANG_NUM_THREADS")
    os.environ["TENSORLANG_NUM_THREADS"] = str(threads)
    try:
        return _run_bench(w, sizes, threads, min_runs, min_time, extra, log, rounds)
    finally:  # the process's kernels go back to the thread count they had
        if saved is None:
            del os.environ["TENSORLANG_NUM_THREADS"]
        else:
            os.environ["TENSORLANG_NUM_THREADS"] = saved


def _run_bench(w, sizes, threads, min_runs, min_time, extra, log, rounds) -> dict:
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
    import schedules
    if schedules.WORKLOADS.get(w.name) is w:  # a user's program has no library formulation
        libraries = [("numpy", "numpy", None)]
        coretype = avx512_coretype()
        if coretype:
            libraries.append(("numpy-avx512", "numpy", coretype))
        if w.torch_fast is not None and torch_available():
            libraries.append(("torch", "torch", None))
        for name, kind, coretype in libraries:
            rows.append(library_row(name, w, sizes, inputs, threads, kind, coretype))
    try:
        outputs = [row.first() for row in rows]  # also the warm-up
        timed = time_interleaved(rows, rounds, min_runs, min_time, log)
    finally:
        for row in rows:
            row.close()
    results = [{"name": row.name, **t, **row.extra} for row, t in zip(rows, timed)]
    # the float64 reference last: its BLAS threads spin for a while after it returns, and would share the CPUs
    # with the timings that follow (a two-thread matmul ran 10 to 20% slower in the 0.1 s after one)
    expected = w.reference(*inputs, **sizes)
    for r, out in zip(results, outputs):
        r["max_rel_error"], why = _compare(out, expected)
        if why:  # NaN or infinity where the reference has none (max_rel_error is inf): say where
            r["mismatch"] = why
    for r in results:
        r["gflops"] = flops / r["median_s"] / 1e9
    return {"workload": w.name, "sizes": sizes, "threads": threads, "rounds": rounds, "results": results}


def format_table(report: dict) -> str:
    """The report of :func:`run_bench` as a text table: median time, GFLOPS, the spread of the rounds' medians,
    and speed ratios against numpy, numpy-avx512 and, when the report has a torch row, PyTorch (above 1x: faster
    than that baseline); a report without library rows (a user's program) compares with the naive loop nest.

    >>> rows = [{"name": "naive", "median_s": 2.5e-4, "gflops": 2.1, "spread": [-0.02, 0.05]},
    ...         {"name": "numpy", "median_s": 5e-5, "gflops": 10.5},
    ...         {"name": "numpy-avx512", "median_s": 4e-5, "gflops": 13.1}]
    >>> print(format_table({"workload": "matmul", "sizes": {"M": 64, "N": 64, "K": 64}, "threads": 1,
    ...                     "results": rows}))
    matmul (M=64, N=64, K=64), 1 thread
                    median ms    GFLOPS     spread  vs numpy  vs avx512
    naive               0.250       2.1    -2%/+5%     0.20x      0.16x
    numpy               0.050      10.5                1.00x      0.80x
    numpy-avx512        0.040      13.1                1.25x      1.00x
    >>> rows.append({"name": "torch", "median_s": 2.5e-5, "gflops": 21.0})
    >>> print(format_table({"workload": "matmul", "sizes": {"M": 64, "N": 64, "K": 64}, "threads": 1,
    ...                     "results": rows}).splitlines()[-1])
    torch               0.025      21.0                2.00x      1.60x     1.00x
    """
    rows = report["results"]
    base = {r["name"]: r["median_s"] for r in rows}
    against = [(n, t, w) for n, t, w in (("numpy", "vs numpy", 9), ("numpy-avx512", "vs avx512", 10),
                                         ("torch", "vs torch", 9)) if n in base]
    if not against:
        against = [(n, f"vs {n}", 9) for n in ("naive",) if n in base]
    lines = [f"{report['workload']} ({', '.join(f'{k}={v}' for k, v in report['sizes'].items())}), "
             f"{report['threads']} thread{'s' if report['threads'] > 1 else ''}",
             f"{'':14} {'median ms':>10} {'GFLOPS':>9} {'spread':>10}"
             + "".join(f" {title:>{width}}" for _, title, width in against)]
    for r in rows:
        spread = r.get("spread")
        text = f"{spread[0] * 100:+.0f}%/{spread[1] * 100:+.0f}%" if spread else ""
        lines.append(f"{r['name']:14} {r['median_s'] * 1e3:10.3f} {r['gflops']:9.1f} {text:>10}"
                     + "".join(f" {base[name] / r['median_s']:{width - 1}.2f}x" for name, _, width in against))
    return "\n".join(lines)
