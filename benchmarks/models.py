"""The graph compiler on the reference models (MNIST net, ResNet-18, MobileNetV2, a BERT-base encoder layer, a
recurrent net over a list of 10 inputs): correctness against torch eager (every output within 1e-4 x max(1,
max |reference|), NaN-aware), speed against torch eager and torch.compile (inductor with weight freezing, as
tensorlang folds the weights at compile time) in alternating rounds, every contender on the same thread count,
the planned arena against the model's intermediate tensors, compile time cold and warm (fresh processes, an empty
then a filled kernel cache), and the peak RSS of running the saved model in a fresh process where torch cannot be
imported. The FMA peak (benchmarks/fma_peak.py's kernel, 1 and 2 threads) is read at the start and at the end, to
show the machine the ratios were measured on.

    python benchmarks/models.py [--models mnist,resnet18,...] [--threads 2] [--rounds 5] [--json]
    python benchmarks/models.py --models resnet18,mobilenet_v2,bert_layer --threads 1,2 --tune 2000 --db models.db

With ``--tune TRIALS`` each model is first exported to a .pt2 file and tuned with ``tensorlang tune-model`` for each
thread count (``--threads`` takes a list; the records go to ``--db``, default a file in the work folder; a second
run with the same database resumes, and with as many trials does nothing more), and then measured as above with that
database, so that the compiled model has the tuned pass variant and schedules. The table at the end holds the bars
(`BARS`: ResNet-18 at least 1.5x torch eager and torch.compile, MobileNetV2 1.2x torch.compile, the BERT layer 1.1x
torch.compile, on 1 and 2 threads).

Speed figures on a shared machine are noisy: compare only the ratios of one run, and read `tensorlang bench-model`
for one model at a time. The models are defined in tests/support/reference_models.py.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))

COMPILE = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
sys.path.insert(0, {tests!r})
import reference_models as R
from tensorlang.frontend.torch_import import export_program, graph_from_exported
from tensorlang.graph import compile_graph
module, args = R.MODELS[{name!r}](**{kwargs!r})
t1 = time.perf_counter()
ep = export_program(module, args)
t2 = time.perf_counter()
graph = graph_from_exported(ep)
t3 = time.perf_counter()
model = compile_graph(graph)
t4 = time.perf_counter()
model.save({saved!r})
print(json.dumps({{"export_s": t2 - t1, "import_s": t3 - t2, "compile_s": t4 - t3, "total_s": t4 - t1,
                  "cached": sum(s.kernel.cached for s in model.steps), "kernels": len(model.steps)}}))
"""

# peak RSS from /proc (VmHWM, this process's own high-water mark): ru_maxrss would carry over the parent's, since
# the kernel keeps it across the fork and exec of a subprocess
PEAK = "int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]) / 1024"

RUN_SAVED = r"""
import json, sys
sys.modules["torch"] = None
import numpy as np
import tensorlang as tl
model = tl.load_model({saved!r})
inputs = [np.random.default_rng(0).standard_normal(v.shape).astype(v.type.numpy_dtype) for v in model.graph.inputs]
model.run_flat(inputs)
print(json.dumps({{"peak_rss_mib": PEAK}}))
""".replace("PEAK", PEAK)

BASELINE_RSS = r"""
import json, numpy, tensorlang, tensorlang.graph
print(json.dumps({"peak_rss_mib": PEAK}))
""".replace("PEAK", PEAK)

KWARGS = {"mnist": {}, "resnet18": {}, "mobilenet_v2": {}, "bert_layer": {"seq": 128}, "recurrent": {}}


def fma_peak() -> dict:
    """{threads: GFLOPS} of fma_peak.py's kernel on 1 and 2 threads (best of 3).

    Example::

        fma_peak()   # {1: 121.8, 2: 244.0}
    """
    import fma_peak as peak
    return peak.measure(5_000_000)


def _python(code: str, env: dict) -> dict:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-3000:])
    return json.loads(r.stdout.strip().splitlines()[-1])


def _timed(fn, min_time: float) -> float:
    fn()
    calls, t0 = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        if time.perf_counter() - t0 >= min_time:
            return (time.perf_counter() - t0) / calls


def bench_model(name: str, threads: int, rounds: int, min_time: float, db: str | None = None) -> dict:
    """Everything the module's docstring lists, for one model (with the tuning database `db`, when given)."""
    import reference_models as R
    import torch

    import tensorlang as tl
    from tensorlang.tuner.measure.disturbance import Tally
    from tensorlang.tuner.model.baselines import TORCH_COMPILE, torch_like_for_like
    from tensorlang.tuner.model.variants import compare_outputs
    work = tempfile.mkdtemp(prefix="tensorlang-bench-models-")
    saved = os.path.join(work, f"{name}.tlm")
    env = dict(os.environ, TENSORLANG_KERNEL_CACHE=os.path.join(work, "kernels"), TENSORLANG_NUM_THREADS=str(threads))
    if db is not None:
        env["TENSORLANG_DB"] = os.environ["TENSORLANG_DB"] = os.path.abspath(db)
    code = COMPILE.format(tests=os.path.join(ROOT, "tests", "support"), name=name, kwargs=KWARGS[name], saved=saved)
    cold = _python(code, env)
    warm = _python(code, env)
    rss = _python(RUN_SAVED.format(saved=saved), env)
    # timings in this process: the model from the saved file (the kernels from the warm cache)
    os.environ["TENSORLANG_KERNEL_CACHE"] = env["TENSORLANG_KERNEL_CACHE"]
    os.environ["TENSORLANG_NUM_THREADS"] = str(threads)
    module, args = R.MODELS[name](**KWARGS[name])
    model = tl.load_model(saved)
    np_args = [[t.numpy() for t in a] if isinstance(a, list) else a.numpy() for a in args]
    with torch.no_grad():
        ref = module(*args)
    error, mismatch = compare_outputs(model(*np_args), ref)
    contenders = [("tensorlang", lambda: model(*np_args))]

    def eager():
        with torch.no_grad():
            module(*args)
    contenders.append(("torch eager", eager))
    notes = {}
    with torch_like_for_like(threads):  # torch on `threads` threads, inductor freezing the weights
        try:
            compiled = torch.compile(module)
            with torch.no_grad():
                compiled(*args)

            def inductor():
                with torch.no_grad():
                    compiled(*args)
            contenders.append((TORCH_COMPILE, inductor))
        except Exception as e:
            notes[TORCH_COMPILE] = f"failed here: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
        times = {n: [] for n, _ in contenders}
        tally = Tally(threads)  # what other processes took during each round
        for _ in range(rounds):
            with tally.watch():
                for n, fn in contenders:
                    times[n].append(_timed(fn, min_time))
    med = {n: statistics.median(t) for n, t in times.items()}
    return {"model": name, "threads": threads, "max_rel_error": error, "correct": not mismatch, "mismatch": mismatch,
            "median_s": med, "spread_s": {n: [min(t), max(t)] for n, t in times.items()}, "not_run": notes,
            "tensorlang_vs_eager": med["torch eager"] / med["tensorlang"],
            "arena_bytes": model.plan.arena_bytes, "model_intermediate_bytes": model.model_bytes,
            "value_bytes": model.plan.value_bytes, "arena_ratio": model.plan.arena_bytes / model.model_bytes,
            "compile_cold": cold, "compile_warm": warm, "peak_rss_mib": rss["peak_rss_mib"],
            "kernels": len(model.steps), "schedules": sorted({s.kernel.schedule_source for s in model.steps}),
            "disturbance": tally.to_json()}


EXPORT = r"""
import sys, torch
sys.path.insert(0, {tests!r})
import reference_models as R
module, args = R.MODELS[{name!r}](**{kwargs!r})
torch.export.save(torch.export.export(module, args), {path!r})
"""

#: the models' bars: model -> {contender: the least tensorlang must be faster by}; "torch.compile" is inductor with
#: weight freezing (tensorlang.tuner.model.baselines.TORCH_COMPILE)
BARS = {"resnet18": {"torch eager": 1.5, "torch.compile": 1.5}, "mobilenet_v2": {"torch.compile": 1.2},
        "bert_layer": {"torch.compile": 1.1}}


def tune_model_first(name: str, threads: int, trials: int, db: str, work: str) -> dict:
    """Export the model to a .pt2 file and run `tensorlang tune-model` on it (progress on this stderr); its JSON."""
    pt2 = os.path.join(work, f"{name}.pt2")
    if not os.path.exists(pt2):
        subprocess.run([sys.executable, "-c", EXPORT.format(tests=os.path.join(ROOT, "tests", "support"), name=name,
                                                            kwargs=KWARGS[name], path=pt2)], check=True, cwd=ROOT)
    r = subprocess.run([sys.executable, "-m", "tensorlang.cli", "tune-model", pt2, "--trials", str(trials), "--threads",
                        str(threads), "--db", db, "--no-measure", "--json"], stdout=subprocess.PIPE, text=True,
                       cwd=ROOT)
    if r.returncode != 0:
        raise RuntimeError(f"tune-model {name} failed (exit {r.returncode})")
    return json.loads(r.stdout)


def bars_table(results: list) -> list[str]:
    """Lines: for each model and thread count, tensorlang against torch eager and torch.compile (inductor,
    freezing), and the bar."""
    from tensorlang.tuner.model.baselines import TORCH_COMPILE
    lines = [f"compile: {TORCH_COMPILE}; every contender on the row's thread count",
             f"{'model':14} {'threads':>7} {'tensorlang':>11} {'eager':>10} {'compile':>10} {'x eager':>8} "
             f"{'x compile':>9}  bar"]
    for r in results:
        m = r["median_s"]
        t, e, c = m.get("tensorlang"), m.get("torch eager"), m.get(TORCH_COMPILE)
        xe = e / t if e and t else None
        xc = c / t if c and t else None
        bars = BARS.get(r["model"], {})
        met = []
        for k, v in bars.items():
            x = xe if k == "torch eager" else xc
            met.append(f"{k} {v}x: {'met' if x and x >= v else 'NOT met'}")
        fmt = lambda v: f"{v * 1e3:8.2f} ms" if v else "         -"  # noqa: E731
        lines.append(f"{r['model']:14} {r['threads']:>7} {fmt(t):>11} {fmt(e):>10} {fmt(c):>10} "
                     f"{(f'{xe:.2f}x' if xe else '-'):>8} {(f'{xc:.2f}x' if xc else '-'):>9}  {'; '.join(met)}")
    return lines


def main(argv=None) -> int:
    """Run the benchmark and print a table (or JSON).

    Example::

        python benchmarks/models.py --models mnist,recurrent --rounds 3
    """
    from tensorlang.tuner.measure.disturbance import busy_note
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(KWARGS), help=f"comma-separated, from {', '.join(KWARGS)}")
    p.add_argument("--threads", default="2", help="thread counts, comma-separated (default 2)")
    p.add_argument("--tune", type=int, metavar="TRIALS", help="tune each model first (tensorlang tune-model)")
    p.add_argument("--db", help="the tuning database of --tune (default: a file in a new temporary folder)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--min-time", type=float, default=0.2, help="seconds per contender per round")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in KWARGS:
            p.error(f"--models: unknown model {n!r}; models: {', '.join(KWARGS)}")
    try:
        thread_counts = [int(t) for t in args.threads.split(",") if t.strip()]
    except ValueError:
        p.error(f"--threads: expected integers separated by commas, got {args.threads!r}")
    peak_start = fma_peak()
    if not args.json:
        print(f"FMA peak at the start: {peak_start[1]:.1f} / {peak_start[2]:.1f} GFLOPS on 1 / 2 threads")
    db = args.db
    if args.tune:
        work = tempfile.mkdtemp(prefix="tensorlang-bench-tune-")
        db = os.path.abspath(db or os.path.join(work, "models.db"))
        for n in names:
            for threads in thread_counts:
                print(f"tuning {n} on {threads} thread(s), {args.tune} trials, records in {db} ...", file=sys.stderr)
                tuned = tune_model_first(n, threads, args.tune, db, work)
                print(f"  {tuned['trials']} trials, estimated {tuned['estimated_s']['end'] * 1e3:.3f} ms, "
                      f"{tuned['wall_s']:.0f} s", file=sys.stderr)
    base_rss = _python(BASELINE_RSS, dict(os.environ))["peak_rss_mib"]
    results = []
    for n, threads in [(n, t) for n in names for t in thread_counts]:
        r = bench_model(n, threads, args.rounds, args.min_time, db)
        results.append(r)
        if not args.json:
            m = r["median_s"]
            print(f"{n}, {threads} thread(s) for every contender: {r['kernels']} kernels "
                  f"({', '.join(r['schedules'])} schedules), max error {r['max_rel_error']:.1e} x max(1, |ref|) "
                  f"({'correct' if r['correct'] else 'WRONG: ' + r['mismatch']})")
            sp = r["spread_s"]
            print("  time (median, min-max over the rounds): " + ", ".join(
                f"{k} {v * 1e3:.2f} ms ({sp[k][0] * 1e3:.2f}-{sp[k][1] * 1e3:.2f})" for k, v in m.items())
                  + f"; tensorlang {r['tensorlang_vs_eager']:.2f}x torch eager"
                  + ("".join(f"; {k}: {v}" for k, v in r["not_run"].items())))
            if busy_note(r["disturbance"]):
                print(f"  note: {busy_note(r['disturbance'])}")
            print(f"  memory: arena {r['arena_bytes'] / 2**20:.2f} MiB = {r['arena_ratio']:.3f}x the model's "
                  f"intermediate tensors ({r['model_intermediate_bytes'] / 2**20:.2f} MiB; one buffer per value of "
                  f"the optimised graph: {r['value_bytes'] / 2**20:.2f} MiB)")
            c, w = r["compile_cold"], r["compile_warm"]
            print(f"  compile from torch: cold {c['total_s']:.2f} s (export {c['export_s']:.2f}, import "
                  f"{c['import_s']:.2f}, passes and kernels {c['compile_s']:.2f}); warm {w['total_s']:.2f} s "
                  f"(export {w['export_s']:.2f}, import {w['import_s']:.2f}, passes and kernels "
                  f"{w['compile_s']:.2f}; {w['cached']}/{w['kernels']} kernels from the cache)")
            print(f"  peak RSS running the saved model in a fresh process without torch: {r['peak_rss_mib']:.0f} MiB "
                  f"(python + numpy + tensorlang alone: {base_rss:.0f} MiB)")
    peak_end = fma_peak()
    if not args.json:
        print(f"FMA peak at the end: {peak_end[1]:.1f} / {peak_end[2]:.1f} GFLOPS on 1 / 2 threads")
        print("\n".join(bars_table(results)))
    if args.json:
        print(json.dumps({"threads": thread_counts, "baseline_rss_mib": base_rss, "db": db, "results": results,
                          "fma_peak_gflops": {"start": peak_start, "end": peak_end}}))
    return 0 if all(r["correct"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
