"""`tensorlang bench`: one table of the default schedule, the hand schedule and numpy, timed in one run.

numpy runs in subprocesses, because OpenBLAS reads its thread count and its kernel choice when it loads:
once as installed, and once with `OPENBLAS_CORETYPE=SkylakeX` (its AVX-512 kernel; this machine's
environment pins the AVX2 `Haswell` kernel, which is half as fast).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np

_NUMPY_WORKER = r"""
import json, sys
import numpy as np
import schedules
from tensorlang.timing import measure, median
name, sizes, files, min_runs, min_time = json.loads(sys.argv[1])
w = schedules.get(name)
inputs = [np.load(f) for f in files]
fn = w.numpy_fast or w.reference
times = measure(lambda: fn(*inputs, **sizes), min_runs=min_runs, min_time=min_time)
print(json.dumps({"median_s": median(times), "runs": len(times)}))
"""


def numpy_baseline(w, sizes: dict, inputs: list, threads: int, coretype: str | None, min_runs: int,
                   min_time: float) -> dict:
    """Time the workload's fastest numpy formulation (`numpy_fast`, else `reference`) on `inputs` in a fresh
    process whose OpenBLAS uses `threads` threads and, with `coretype`, that kernel family. Returns the worker's
    {"median_s", "runs"}; a RuntimeError carries the worker's last line of stderr when it fails.

    Example::

        import numpy as np, schedules
        w = schedules.get("matmul")
        sizes = w.sizes("small")
        inputs = w.make_inputs(sizes, np.random.default_rng(0))
        numpy_baseline(w, sizes, inputs, threads=2, coretype="SkylakeX", min_runs=10, min_time=0.3)
        # e.g. {'median_s': 2.1e-05, 'runs': 14285}
    """
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
        arg = json.dumps([w.name, sizes, files, min_runs, min_time])
        r = subprocess.run([sys.executable, "-c", _NUMPY_WORKER, arg], capture_output=True, text=True, env=env,
                           timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"numpy baseline failed: {r.stderr.strip().splitlines()[-1] if r.stderr else r.returncode}")
    return json.loads(r.stdout)


def run_bench(w, sizes: dict, threads: int, min_runs: int = 10, min_time: float = 0.3, extra: list | None = None,
              log=print) -> dict:
    """Build and time the default schedule, the hand schedule (if the workload has one) and the `extra`
    (name, Schedule) pairs on `threads` threads, then numpy as installed and with its AVX-512 kernel. Each kernel's
    result is compared with the workload's reference (`max_rel_error`); `log` gets one line per timing. Returns
    {"workload", "sizes", "threads", "results"}, each result with "name", "median_s", "runs" and "gflops".

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
    from .timing import measure, median
    op = tl.op(w.source)
    inputs = w.make_inputs(sizes, np.random.default_rng(0))
    expected = w.reference(*inputs, **sizes)
    flops = w.flops(sizes)
    results = []
    candidates = [("default", tl.schedule(op, **sizes))]
    if w.hand_schedule is not None:
        s = tl.schedule(op, **sizes)
        w.hand_schedule(s)
        candidates.append(("hand", s))
    candidates += list(extra or [])
    for name, sched in candidates:
        kernel = tl.build(sched)
        out = kernel(*inputs)
        err = float(np.max(np.abs(np.asarray(out, np.float64) - expected)) / max(1.0, float(np.max(np.abs(expected)))))
        times = measure(lambda k=kernel: k(*inputs), min_runs=min_runs, min_time=min_time)
        results.append({"name": name, "median_s": median(times), "runs": len(times), "max_rel_error": err})
        log(f"  {name}: {results[-1]['median_s'] * 1e3:.3f} ms")
    for name, coretype in (("numpy", None), ("numpy-avx512", "SkylakeX")):
        r = numpy_baseline(w, sizes, inputs, threads, coretype, min_runs, min_time)
        results.append({"name": name, **r})
        log(f"  {name}: {r['median_s'] * 1e3:.3f} ms")
    for r in results:
        r["gflops"] = flops / r["median_s"] / 1e9
    return {"workload": w.name, "sizes": sizes, "threads": threads, "results": results}


def format_table(report: dict) -> str:
    """The report of :func:`run_bench` as a text table: median time, GFLOPS and speed ratios against numpy and
    numpy-avx512 (above 1x: faster than numpy).

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
    """
    rows = report["results"]
    base = {r["name"]: r["median_s"] for r in rows}
    lines = [f"{report['workload']} ({', '.join(f'{k}={v}' for k, v in report['sizes'].items())}), "
             f"{report['threads']} thread{'s' if report['threads'] > 1 else ''}",
             f"{'':14} {'median ms':>10} {'GFLOPS':>9} {'vs numpy':>9} {'vs avx512':>10}"]
    for r in rows:
        lines.append(f"{r['name']:14} {r['median_s'] * 1e3:10.3f} {r['gflops']:9.1f} "
                     f"{base['numpy'] / r['median_s']:8.2f}x {base['numpy-avx512'] / r['median_s']:9.2f}x")
    return "\n".join(lines)
