"""`tensorlang bench`: one table of the default schedule, the hand schedule, numpy and (where installed)
PyTorch, timed in one run.

The baselines run in subprocesses, because OpenBLAS reads its thread count and its kernel choice when it loads:
numpy once as installed and once with `OPENBLAS_CORETYPE=SkylakeX` (its AVX-512 kernel; this machine's
environment pins the AVX2 `Haswell` kernel, which is half as fast), and PyTorch with `torch.set_num_threads`.
Every row's result is compared with the workload's numpy reference.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from tensorlang.errors import TensorlangError, UsageError

class BaselineError(TensorlangError, RuntimeError):
    """A library baseline (numpy or PyTorch) failed in its subprocess: out of memory at the sizes asked for, a
    crash of the library; the message ends with the worker's last line of stderr. The CLI prints it as one line.

    >>> issubclass(BaselineError, TensorlangError)
    True
    """


_BASELINE_WORKER = r"""
import json, sys
import numpy as np
import schedules
from tensorlang.timing import measure, median
kind, name, sizes, files, folder, threads, min_runs, min_time = json.loads(sys.argv[1])
w = schedules.get(name)
inputs = [np.load(f) for f in files]
if kind == "torch":
    import torch
    torch.set_num_threads(threads)
    tensors = [torch.from_numpy(a) for a in inputs]
    def run():
        with torch.inference_mode():
            return w.torch_fast(torch, *tensors, **sizes)
    version = torch.__version__
else:
    fn = w.numpy_fast or w.reference
    run = lambda: fn(*inputs, **sizes)
    version = np.__version__
out = run()
for i, o in enumerate(out if isinstance(out, tuple) else (out,)):
    np.save(f"{folder}/out{i}.npy", o.numpy() if kind == "torch" else np.asarray(o))
times = measure(run, min_runs=min_runs, min_time=min_time)
print(json.dumps({"median_s": median(times), "runs": len(times), "version": version}))
"""


def torch_available() -> bool:
    """Whether PyTorch can be imported here (without importing it).

    >>> torch_available() in (True, False)
    True
    """
    return importlib.util.find_spec("torch") is not None


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
    if kind not in ("numpy", "torch"):
        raise UsageError(f"baseline: kind is 'numpy' or 'torch', not {kind!r}")
    env = dict(os.environ)
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = str(threads)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, a in enumerate(inputs):
            files.append(os.path.join(tmp, f"in{i}.npy"))
            np.save(files[-1], a)
        arg = json.dumps([kind, w.name, sizes, files, tmp, threads, min_runs, min_time])
        r = subprocess.run([sys.executable, "-c", _BASELINE_WORKER, arg], capture_output=True, text=True, env=env,
                           timeout=600)
        if r.returncode != 0:
            last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit status {r.returncode}"
            raise BaselineError(f"{kind} baseline failed: {last}")
        result = json.loads(r.stdout)
        n = len([f for f in os.listdir(tmp) if f.startswith("out")])
        result["outputs"] = [np.load(os.path.join(tmp, f"out{i}.npy")) for i in range(n)]
    return result


def run_bench(w, sizes: dict, threads: int, min_runs: int = 10, min_time: float = 0.3, extra: list | None = None,
              log=print) -> dict:
    """Build and time the default schedule, the hand schedule (if the workload has one) and the `extra`
    (name, Schedule) pairs on `threads` threads, then numpy as installed and with its AVX-512 kernel, and PyTorch
    where it is installed and the workload has a `torch_fast`. Each row's result is compared with the workload's
    reference (`max_rel_error`); `log` gets one line per timing. Returns {"workload", "sizes", "threads",
    "results"}, each result with "name", "median_s", "runs", "gflops" and "max_rel_error" (and the library's
    "version" for numpy and torch; and "mismatch", saying where, when the row has a NaN or an infinity that the
    reference does not).

    Example::

        import schedules
        w = schedules.get("conv2d")
        report = run_bench(w, w.sizes("resnet18_3x3"), threads=2)
        [r["name"] for r in report["results"]]   # ['default', 'hand', 'numpy', 'numpy-avx512']
    """
    saved = os.environ.get("TENSORLANG_NUM_THREADS")
    os.environ["TENSORLANG_NUM_THREADS"] = str(threads)
    try:
        return _run_bench(w, sizes, threads, min_runs, min_time, extra, log)
    finally:  # the process's kernels go back to the thread count they had
        if saved is None:
            del os.environ["TENSORLANG_NUM_THREADS"]
        else:
            os.environ["TENSORLANG_NUM_THREADS"] = saved


def _run_bench(w, sizes, threads, min_runs, min_time, extra, log) -> dict:
    import tensorlang as tl

    from tensorlang.timing import measure, median
    op = tl.op(w.source)
    inputs = w.make_inputs(sizes, np.random.default_rng(0))
    flops = w.flops(sizes)
    results, outputs = [], []
    candidates = [("default", tl.schedule(op, **sizes))]
    if w.hand_schedule is not None:
        s = tl.schedule(op, **sizes)
        w.hand_schedule(s)
        candidates.append(("hand", s))
    candidates += list(extra or [])
    for name, sched in candidates:
        kernel = tl.build(sched)
        outputs.append(kernel(*inputs))
        times = measure(lambda k=kernel: k(*inputs), min_runs=min_runs, min_time=min_time)
        results.append({"name": name, "median_s": median(times), "runs": len(times)})
        log(f"  {name}: {results[-1]['median_s'] * 1e3:.3f} ms")
    libraries = [("numpy", "numpy", None), ("numpy-avx512", "numpy", "SkylakeX")]
    if w.torch_fast is not None and torch_available():
        libraries.append(("torch", "torch", None))
    for name, kind, coretype in libraries:
        r = baseline(w, sizes, inputs, threads, min_runs, min_time, kind=kind, coretype=coretype)
        results.append({"name": name, "median_s": r["median_s"], "runs": r["runs"], "version": r["version"]})
        outputs.append(r["outputs"])
        log(f"  {name}: {r['median_s'] * 1e3:.3f} ms")
    # the float64 reference last: its BLAS threads spin for a while after it returns, and would share the CPUs
    # with the timings that follow (a two-thread matmul ran 10 to 20% slower in the 0.1 s after one)
    expected = w.reference(*inputs, **sizes)
    for r, out in zip(results, outputs):
        r["max_rel_error"], why = _compare(out, expected)
        if why:  # NaN or infinity where the reference has none (max_rel_error is inf): say where
            r["mismatch"] = why
    for r in results:
        r["gflops"] = flops / r["median_s"] / 1e9
    return {"workload": w.name, "sizes": sizes, "threads": threads, "results": results}


def format_table(report: dict) -> str:
    """The report of :func:`run_bench` as a text table: median time, GFLOPS and speed ratios against numpy,
    numpy-avx512 and, when the report has a torch row, PyTorch (above 1x: faster than that baseline).

    >>> rows = [{"name": "default", "median_s": 2.5e-4, "gflops": 2.1},
    ...         {"name": "numpy", "median_s": 5e-5, "gflops": 10.5},
    ...         {"name": "numpy-avx512", "median_s": 4e-5, "gflops": 13.1}]
    >>> print(format_table({"workload": "matmul", "sizes": {"M": 64, "N": 64, "K": 64}, "threads": 1,
    ...                     "results": rows}))
    matmul (M=64, N=64, K=64), 1 thread
                    median ms    GFLOPS  vs numpy  vs avx512
    default             0.250       2.1     0.20x      0.16x
    numpy               0.050      10.5     1.00x      0.80x
    numpy-avx512        0.040      13.1     1.25x      1.00x
    >>> rows.append({"name": "torch", "median_s": 2.5e-5, "gflops": 21.0})
    >>> print(format_table({"workload": "matmul", "sizes": {"M": 64, "N": 64, "K": 64}, "threads": 1,
    ...                     "results": rows}).splitlines()[-1])
    torch               0.025      21.0     2.00x      1.60x     1.00x
    """
    rows = report["results"]
    base = {r["name"]: r["median_s"] for r in rows}
    against = [("numpy", "vs numpy", 9), ("numpy-avx512", "vs avx512", 10)]
    if "torch" in base:
        against.append(("torch", "vs torch", 9))
    lines = [f"{report['workload']} ({', '.join(f'{k}={v}' for k, v in report['sizes'].items())}), "
             f"{report['threads']} thread{'s' if report['threads'] > 1 else ''}",
             f"{'':14} {'median ms':>10} {'GFLOPS':>9}" + "".join(f" {title:>{width}}" for _, title, width in against)]
    for r in rows:
        lines.append(f"{r['name']:14} {r['median_s'] * 1e3:10.3f} {r['gflops']:9.1f}"
                     + "".join(f" {base[name] / r['median_s']:{width - 1}.2f}x" for name, _, width in against))
    return "\n".join(lines)
