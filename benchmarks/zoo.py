"""The zoo of issue 56: every named torchvision classifier, timm model and Hugging Face transformer (random weights,
no downloads, batch 1, fp32; tests/support/zoo_models.py builds them), compiled from torch.export and checked against
torch eager (every output within 1e-4 x max(1, max |reference|), a NaN where torch has a number an infinite error),
and through ``torch.compile(model, backend="tensorlang")``. A model that does not compile is a FAIL row with the
error, never the end of the run: each model runs in its own process, and one that dies (a crash, out of memory) is
a FAIL row for the check it was in.

    python benchmarks/zoo.py [--models resnet18,timm_vit_tiny_patch16_224,hf_bert,...] [--threads 2]
                             [--onnx] [--time] [--profile [--profile-calls 25]] [--no-dynamo]
                             [--json zoo.json] [--md zoo.md]

``--onnx`` exports the torchvision models to ONNX (opset 17) and compiles them through ``tl.from_onnx``, checked
against onnxruntime ("from_onnx not available" where this tensorlang has no ONNX frontend). ``--time`` times
tensorlang against onnxruntime (``intra_op_num_threads`` = threads, default graph optimizations) and torch eager
(``torch.set_num_threads``) under one contract: public calls that allocate their outputs, the same thread count set
explicitly for every library (tensorlang's through TENSORLANG_NUM_THREADS), each contender alone in blocks of 25
calls, the contenders in turn for 3 rotations; the median of all calls and the spread (the fastest and slowest
block's median) per contender, and each one's outputs checked; and the compile time from the torch module to a
runnable model, cold (a fresh process, an empty kernel cache: TENSORLANG_KERNEL_CACHE set to a new folder) and warm
(a fresh process, that cache filled). ``--profile`` writes where each millisecond goes on both sides: tensorlang's
kernels (``Model.profile``: each kernel's median over ``--profile-calls`` runs) and onnxruntime's own profile
(``enable_profiling``, the same threads, warm-up runs left out: benchmarks/ort_profile.py), each summed by op
category (``tensorlang.graph.profile.CATEGORIES``), side by side, with each side's whole call (and onnxruntime's
without its profiler, which costs time in every node it records) and every tensorlang kernel's bound and share of
the machine's FMA peak or memory bandwidth (measured once per run by benchmarks/ceilings.py for the thread count,
or given with ``--peak-gflops`` and ``--bandwidth-gbps``). The run ends with one table (markdown, and every figure
and error in ``--json``), then the profiles.

Speed figures on a shared machine are noisy: compare only the ratios of one run. Install the models with the
``zoo`` extra (``pip install -e '.[zoo]'``, see docs/user-guide/models.md).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUPPORT = os.path.join(ROOT, "tests", "support")
sys.path.insert(0, SUPPORT)

import zoo_models  # noqa: E402

BLOCK, ROTATIONS = 25, 3

COMPILE = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {support!r})
import torch, zoo_models
import tensorlang as tl
module, args = zoo_models.build({name!r})
t0 = time.perf_counter()
model = tl.from_torch(module, args)
print(json.dumps({{"seconds": time.perf_counter() - t0, "kernels": len(model.steps),
                  "cached": sum(s.kernel.cached for s in model.steps), "graph_cached": model.cached}}))
"""


def _error(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:400] if text else ''}"


def compile_in_fresh_process(name: str, cache: str, threads: int) -> dict:
    """{seconds, kernels, cached (kernels from the kernel cache), graph_cached (the optimised graph from the model
    cache)} of tl.from_torch on model `name` in a new process whose kernel cache is `cache`, or {error}.

    Example::

        compile_in_fresh_process("resnet18", "/tmp/kernels", 2)    # {'seconds': 9.8, 'kernels': 23, 'cached': 0, ...}
    """
    env = dict(os.environ, TENSORLANG_KERNEL_CACHE=cache, TENSORLANG_NUM_THREADS=str(threads))
    try:
        r = subprocess.run([sys.executable, "-c", COMPILE.format(support=SUPPORT, name=name)], capture_output=True,
                           text=True, cwd=ROOT, env=env, timeout=3600)
    except subprocess.TimeoutExpired:
        return {"error": "compile took more than an hour"}
    if r.returncode != 0:
        lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
        return {"error": lines[-1][:400] if lines else f"exit status {r.returncode}"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def _flat(outputs) -> list:
    from tensorlang.tuner.model.variants import flat_outputs
    return list(flat_outputs(outputs))


def _check(got, reference) -> dict:
    from tensorlang.tuner.model.variants import compare_outputs
    error, why = compare_outputs(got, reference)
    return {"status": "MISMATCH" if why else "ok", "error": error, "why": why}


def _onnx_session(module, args, path: str, threads: int):
    """A call of the model exported to ONNX at `path` in an onnxruntime session with `threads` intra-op threads."""
    import onnxruntime as ort
    import torch
    # without MultiheadAttention's fused inference path (aten._native_multi_head_attention has no ONNX export)
    with torch.no_grad(), _mha_fastpath(False):
        torch.onnx.export(module, args, path, dynamo=False, opset_version=17)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    feed = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)}
    return lambda: session.run(None, feed)


@contextlib.contextmanager
def _mha_fastpath(enabled: bool):
    import torch
    before = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(enabled)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(before)


def _from_onnx():
    import tensorlang as tl
    try:
        return tl.from_onnx
    except AttributeError:
        return None


def time_contenders(contenders: list) -> dict:
    """{name: {median_s, spread_s, blocks}}: each contender alone for BLOCK calls, in turn, ROTATIONS times (one
    call of each first, untimed).

    >>> r = time_contenders([("noop", lambda: None)])
    >>> sorted(r["noop"])
    ['blocks', 'median_s', 'spread_s']
    """
    for _, fn in contenders:
        fn()
    calls: dict[str, list] = {n: [] for n, _ in contenders}
    for _ in range(ROTATIONS):
        for name, fn in contenders:
            block = []
            for _ in range(BLOCK):
                t0 = time.perf_counter()
                fn()
                block.append(time.perf_counter() - t0)
            calls[name].append(block)
    out = {}
    for name, blocks in calls.items():
        medians = [statistics.median(b) for b in blocks]
        out[name] = {"median_s": statistics.median([t for b in blocks for t in b]),
                     "spread_s": [min(medians), max(medians)], "blocks": len(blocks)}
    return out


def profile_both(model, np_args: list, onnx_path: str | None, threads: int, calls: int, ceilings: dict,
                 onnx_why: str = "") -> dict:
    """{tensorlang, onnxruntime, ceilings}: tensorlang's kernels profiled over `calls` runs (every kernel's row, with
    its bound and share of the `ceilings` {peak_gflops, bandwidth_gbps}) and onnxruntime's own profile of the model
    at `onnx_path` (benchmarks/ort_profile.py), each with its time per op category, its total (the kernels' times
    summed) and its whole call's median (``call_s``, ``run_s``: the kernels and what runs between them); a side that
    fails is {error}.

    Example::

        profile_both(model, [x], "work/resnet18/model.onnx", 2, 25, {"peak_gflops": 200.0, "bandwidth_gbps": 30.0})
    """
    import ort_profile

    from tensorlang.graph.profile import by_category
    out: dict = {"ceilings": ceilings}
    try:
        times = model.profile_flat(np_args, repeat=calls)
        rows = model.kernel_rows(times, peak_gflops=ceilings.get("peak_gflops"),
                                 bandwidth_gbps=ceilings.get("bandwidth_gbps"))
        whole = []
        for _ in range(calls):
            t0 = time.perf_counter()
            model(*np_args)
            whole.append(time.perf_counter() - t0)
        out["tensorlang"] = {"runs": calls, "kernels_s": sum(times), "call_s": statistics.median(whole),
                             "by_category": by_category(rows), "kernels": [r.as_dict() for r in rows]}
    except Exception as e:
        out["tensorlang"] = {"error": _error(e)}
    if onnx_path is None:
        out["onnxruntime"] = {"error": onnx_why or "no ONNX model"}
    else:
        try:
            out["onnxruntime"] = ort_profile.profile_onnx(onnx_path, np_args, threads, calls)
        except Exception as e:
            out["onnxruntime"] = {"error": _error(e)}
    return out


def bench(name: str, threads: int, dynamo: bool, onnx: bool, timing: bool, work: str, save=None,
          profile: dict | None = None) -> dict:
    """Every check and figure of the module's docstring for one model (errors as FAIL entries); `save(row)` is
    called with the row so far after each check, so that a process that dies leaves the checks it finished.
    `profile` ({calls, peak_gflops, bandwidth_gbps}) asks for `profile_both` after the rest."""
    import numpy as np
    import torch

    import tensorlang as tl
    row: dict = {"model": name, "family": zoo_models.family(name)}
    cache = os.path.join(work, name, "kernels")
    os.makedirs(cache, exist_ok=True)
    if timing:
        row["compile_cold"] = compile_in_fresh_process(name, cache, threads)
        row["compile_warm"] = compile_in_fresh_process(name, cache, threads) if "error" not in row["compile_cold"] \
            else {"error": "cold compile failed"}
    os.environ["TENSORLANG_KERNEL_CACHE"] = cache
    try:
        module, args = zoo_models.build(name)
        with torch.no_grad():
            reference = _flat(module(*args))
    except Exception as e:
        row["export"] = {"status": "FAIL", "why": f"the model does not build or run in torch: {_error(e)}"}
        return row
    row["reference_max"] = max(float(np.abs(r).max()) for r in reference if r.size)
    np_args = [a.numpy() for a in args]
    model = None
    try:
        model = tl.from_torch(module, args)
        row["export"] = _check(model(*np_args), reference)
        row["kernels"] = len(model.steps)
    except Exception as e:
        row["export"] = {"status": "FAIL", "why": _error(e)}
    save = save or (lambda row: None)
    save(row)
    if dynamo:
        from torch._dynamo.utils import counters
        torch._dynamo.reset()
        counters.clear()
        try:
            with torch.no_grad():
                row["dynamo"] = _check(torch.compile(module, backend="tensorlang")(*args), reference)
            # graph breaks leave torch eager the code between the graphs
            row["dynamo"]["graphs"] = counters["stats"]["unique_graphs"]
            row["dynamo"]["graph_breaks"] = sum(counters["graph_break"].values())
        except Exception as e:
            row["dynamo"] = {"status": "FAIL", "why": _error(e)}
        finally:
            torch._dynamo.reset()
        save(row)
    session, session_why = None, ""
    if onnx or timing or profile:
        try:
            session = _onnx_session(module, args, os.path.join(work, name, "model.onnx"), threads)
        except Exception as e:
            session_why = f"no onnxruntime session: {_error(e)}"
    if onnx and row["family"] == "torchvision":
        from_onnx = _from_onnx()
        if from_onnx is None:
            row["onnx"] = {"status": "FAIL", "why": "from_onnx not available"}
        elif session is None:
            row["onnx"] = {"status": "FAIL", "why": session_why}
        else:
            try:
                row["onnx"] = _check(from_onnx(os.path.join(work, name, "model.onnx"))(*np_args), session())
            except Exception as e:
                row["onnx"] = {"status": "FAIL", "why": _error(e)}
        save(row)
    if timing and model is not None:
        def eager():
            with torch.no_grad():
                return module(*args)
        contenders = [("tensorlang", lambda: model(*np_args)), ("torch eager", eager)]
        if session is not None:
            contenders.append(("onnxruntime", session))
        torch.set_num_threads(threads)
        row["time"] = time_contenders(contenders)
        row["time_checked"] = {n: _check(fn(), reference) for n, fn in contenders if n != "torch eager"}
        if session is None:
            row["time_not_run"] = {"onnxruntime": session_why}
        save(row)
    if profile and model is not None:
        ceilings = {k: profile[k] for k in ("peak_gflops", "bandwidth_gbps") if profile.get(k)}
        row["profile"] = profile_both(model, np_args, os.path.join(work, name, "model.onnx") if session else None,
                                      threads, profile["calls"], ceilings, session_why)
    return row


def stages(name: str, dynamo: bool, onnx: bool, timing: bool, profile: bool = False) -> list[str]:
    """The checks `bench` makes of model `name`, in order.

    >>> stages("hf_bert", True, True, False), stages("resnet18", False, True, True, True)
    (['export', 'dynamo'], ['export', 'onnx', 'time_checked', 'profile'])
    """
    return ["export"] + ["dynamo"] * dynamo + ["onnx"] * (onnx and zoo_models.family(name) == "torchvision") + \
        ["time_checked"] * timing + ["profile"] * profile


def bench_in_child(name: str, argv: list, work: str, expected: list) -> dict:
    """`bench` of model `name` in a child process (this script with `argv` and --row): its row; where the process
    dies (a crash in a kernel, out of memory) the checks it finished and a FAIL naming how it ended for the one it
    was in (the first of `expected` missing), with its last line on stderr."""
    path = os.path.join(work, f"{name}.row.json")
    log = os.path.join(work, f"{name}.stderr")
    with open(log, "w") as err:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--models", name, "--row", path],
                           stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
    row = {"model": name, "family": zoo_models.family(name)}
    if os.path.exists(path):
        with open(path) as f:
            row = json.load(f)
    if r.returncode != 0:
        with open(log) as f:
            lines = [ln.strip() for ln in f if ln.strip()]
        how = f"signal {-r.returncode}" if r.returncode < 0 else f"exit status {r.returncode}"
        why = f"the process running the model ended with {how}" + (f": {lines[-1][:300]}" if lines else "")
        missing = [k for k in expected if k not in row]
        key = missing[0] if missing else "export"
        row[key] = {"tensorlang": {"status": "FAIL", "why": why}} if key == "time_checked" else \
            {"status": "FAIL", "why": why}
    return row


def _cell(check: dict | None) -> str:
    if not check:
        return "-"
    if check["status"] == "ok":
        breaks = check.get("graph_breaks")
        return f"ok ({check['error']:.0e})" + (f", {check['graphs']} graphs, {breaks} graph breaks" if breaks else "")
    return f"{check['status']}: {check['why'][:90]}".replace("|", "\\|")


def table(rows: list, threads: int) -> list[str]:
    """The markdown table of the rows (one per model), then each failure's whole message.

    >>> table([], 2)[0].startswith("| model")
    True
    """
    lines = ["| model | torch.export | torch.compile | ONNX (from_onnx vs onnxruntime) | max \\|ref\\| "
             "| compile cold s | warm s | tensorlang ms | onnxruntime ms | torch eager ms | x onnxruntime "
             "| x torch eager |",
             "|" + "---|" * 12]
    for r in rows:
        t = r.get("time", {})
        ms = {k: t[k]["median_s"] * 1e3 for k in t}
        tlms = ms.get("tensorlang")
        cold, warm = r.get("compile_cold", {}), r.get("compile_warm", {})

        def ratio(k, ms=ms, tlms=tlms):
            return f"{ms[k] / tlms:.2f}" if k in ms and tlms else "-"
        lines.append(" | ".join([
            f"| {r['model']}", _cell(r.get("export")), _cell(r.get("dynamo")), _cell(r.get("onnx")),
            f"{r['reference_max']:.3g}" if "reference_max" in r else "-",
            f"{cold['seconds']:.1f}" if "seconds" in cold else "FAIL" if "error" in cold else "-",
            f"{warm['seconds']:.1f}" if "seconds" in warm else "FAIL" if "error" in warm else "-",
            f"{tlms:.2f}" if tlms else "-", f"{ms['onnxruntime']:.2f}" if "onnxruntime" in ms else "-",
            f"{ms['torch eager']:.2f}" if "torch eager" in ms else "-",
            ratio("onnxruntime"), ratio("torch eager") + " |"]))
    lines += ["", f"threads: {threads} for every contender; times are medians of {ROTATIONS} blocks of {BLOCK} "
                  "calls; x = the contender's time / tensorlang's (above 1: tensorlang is faster)"]
    failures = [(r["model"], k, r[k]["why"]) for r in rows for k in ("export", "dynamo", "onnx")
                if isinstance(r.get(k), dict) and r[k]["status"] != "ok"]
    failures += [(r["model"], f"timed {c}", check["why"]) for r in rows
                 for c, check in r.get("time_checked", {}).items() if check["status"] != "ok"]
    failures += [(r["model"], k, r[k]["error"]) for r in rows for k in ("compile_cold", "compile_warm")
                 if "error" in r.get(k, {})]
    failures += [(r["model"], "profile", r["profile"]["why"]) for r in rows
                 if r.get("profile", {}).get("status") == "FAIL"]
    failures += [(r["model"], f"profile {side}", r["profile"][side]["error"]) for r in rows
                 for side in ("tensorlang", "onnxruntime") if "error" in r.get("profile", {}).get(side, {})]
    if failures:
        lines += ["", "Failures:"] + [f"- {m} ({k}): {why}" for m, k, why in failures]
    return lines


def profile_lines(row: dict, top: int = 5) -> list[str]:
    """Where one model's milliseconds go (its row's ``profile``): a markdown table of the time per op category on
    both sides (tensorlang's kernels, onnxruntime's nodes, and onnxruntime's / tensorlang's), the totals, then
    tensorlang's `top` slowest kernels with their bound and share of it; [] without a profile.

    >>> p = {"tensorlang": {"runs": 3, "kernels_s": 0.003, "call_s": 0.0031,
    ...                     "by_category": {"conv": 0.002, "elementwise": 0.001}, "kernels": []},
    ...      "onnxruntime": {"runs": 3, "kernels_s": 0.002, "run_s": 0.0022, "unprofiled_run_s": 0.0021,
    ...                      "by_category": {"conv": 0.002}},
    ...      "ceilings": {}}
    >>> print("\\n".join(profile_lines({"model": "m", "profile": p})[4:7]))
    | conv | 2.000 | 66.7% | 2.000 | 100.0% | 1.00 |
    | elementwise | 1.000 | 33.3% | - | - | - |
    | **kernels total** | 3.000 | 100% | 2.000 | 100% | 0.67 |
    >>> profile_lines({"model": "m", "profile": p})[8]
    '- the whole call (median): tensorlang 3.100 ms (0.100 ms outside the kernels), onnxruntime 2.200 ms (0.200 ms \
outside the kernels); onnxruntime without its profiler 2.100 ms'
    """
    from tensorlang.graph.profile import CATEGORIES
    p = row.get("profile")
    if not p or "tensorlang" not in p:
        return []
    tl_side, ort = p["tensorlang"], p.get("onnxruntime", {})
    tl_cat, ort_cat = tl_side.get("by_category", {}), ort.get("by_category", {})
    tl_total, ort_total = tl_side.get("kernels_s"), ort.get("kernels_s")

    def ms(s):
        return f"{s * 1e3:.3f}" if s is not None else "-"

    def share(s, total):
        return f"{100 * s / total:.1f}%" if s is not None and total else "-"

    def ratio(a, b):
        return f"{b / a:.2f}" if a and b else "-"
    lines = [f"### {row['model']}: where the milliseconds go (per call)", "",
             "| category | tensorlang ms | share | onnxruntime ms | share | x onnxruntime |", "|" + "---|" * 6]
    for c in CATEGORIES:
        a, b = tl_cat.get(c), ort_cat.get(c)
        if a is not None or b is not None:
            lines.append(f"| {c} | {ms(a)} | {share(a, tl_total)} | {ms(b)} | {share(b, ort_total)} | {ratio(a, b)} |")
    lines.append(f"| **kernels total** | {ms(tl_total)} | {'100%' if tl_total else '-'} | {ms(ort_total)} | "
                 f"{'100%' if ort_total else '-'} | {ratio(tl_total, ort_total)} |")
    notes = [f"{name}: {side['error']}" for name, side in (("tensorlang", tl_side), ("onnxruntime", ort))
             if "error" in side]
    whole = [f"{name} {side[key] * 1e3:.3f} ms ({(side[key] - side['kernels_s']) * 1e3:.3f} ms outside the kernels)"
             for name, side, key in (("tensorlang", tl_side, "call_s"), ("onnxruntime", ort, "run_s")) if key in side]
    if "unprofiled_run_s" in ort:
        whole[-1] += f"; onnxruntime without its profiler {ort['unprofiled_run_s'] * 1e3:.3f} ms"
    if whole:
        notes.append("the whole call (median): " + ", ".join(whole))
    c = p.get("ceilings", {})
    if c:
        notes.append(f"ceilings: FMA peak {c['peak_gflops']:.1f} GFLOPS, bandwidth {c['bandwidth_gbps']:.1f} GB/s")
    slow = sorted(tl_side.get("kernels", []), key=lambda k: -(k["seconds"] or 0.0))[:top]
    if slow:
        notes.append("tensorlang's slowest kernels: " + "; ".join(
            f"{k['node']} ({k['category']}, {k['seconds'] * 1e3:.3f} ms"
            + (f", {k['bound']}-bound at {100 * k['share']:.0f}%" if k.get("bound") else "") + ")" for k in slow))
    return lines + [""] + [f"- {n}" for n in notes] + [""]


def main(argv=None) -> int:
    """Run the zoo and print its table; exit status 1 when a check failed.

    Example::

        python benchmarks/zoo.py --models mobilenet_v3_small,timm_resnet18 --time
    """
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=",".join(zoo_models.NAMES),
                   help=f"comma-separated (default: all): {', '.join(zoo_models.NAMES)}")
    p.add_argument("--threads", type=int, default=2, help="threads for every library (default 2)")
    p.add_argument("--onnx", action="store_true", help="also the torchvision models through ONNX and tl.from_onnx")
    p.add_argument("--time", action="store_true",
                   help="time against onnxruntime and torch eager, and the compile (cold and warm)")
    p.add_argument("--profile", action="store_true",
                   help="where each millisecond goes: tensorlang's kernels and onnxruntime's profile by op category")
    p.add_argument("--profile-calls", type=int, default=BLOCK, metavar="N",
                   help=f"runs each profile takes its medians over (default {BLOCK})")
    p.add_argument("--peak-gflops", type=float, metavar="GFLOPS",
                   help="the FMA peak for the thread count (default: measured, benchmarks/ceilings.py)")
    p.add_argument("--bandwidth-gbps", type=float, metavar="GBPS",
                   help="the memory bandwidth for the thread count (default: measured, the triad)")
    p.add_argument("--no-dynamo", action="store_true", help="leave out the torch.compile(backend='tensorlang') check")
    p.add_argument("--json", metavar="FILE", help="write every figure and error as JSON")
    p.add_argument("--md", metavar="FILE", help="write the table as markdown")
    p.add_argument("--row", metavar="FILE", help=argparse.SUPPRESS)  # the child process of one model
    args = p.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in zoo_models.NAMES and n not in zoo_models.TOYS:
            p.error(f"--models: unknown model {n!r}; models: {', '.join(zoo_models.NAMES)}")
    if args.threads < 1:
        p.error("--threads: must be at least 1")
    if args.profile_calls < 1:
        p.error("--profile-calls: must be at least 1")
    for flag, value in (("--peak-gflops", args.peak_gflops), ("--bandwidth-gbps", args.bandwidth_gbps)):
        if value is not None and value <= 0:
            p.error(f"{flag}: must be positive, got {value}")
    os.environ["TENSORLANG_NUM_THREADS"] = str(args.threads)
    profile = None
    if args.profile:
        profile = {"calls": args.profile_calls, "peak_gflops": args.peak_gflops, "bandwidth_gbps": args.bandwidth_gbps}
    if args.row:
        def save(row):
            with open(args.row, "w") as f:
                json.dump(row, f)
        save(bench(names[0], args.threads, not args.no_dynamo, args.onnx, args.time,
                   os.path.dirname(os.path.abspath(args.row)), save, profile))
        return 0
    if profile and (args.peak_gflops is None or args.bandwidth_gbps is None):
        import ceilings
        print("measuring the FMA peak and the memory bandwidth ...", file=sys.stderr, flush=True)
        measured = ceilings.measure(args.threads)
        profile["peak_gflops"] = args.peak_gflops or measured["peak_gflops"]
        profile["bandwidth_gbps"] = args.bandwidth_gbps or measured["bandwidth_gbps"]
    with tempfile.TemporaryDirectory(prefix="tensorlang-zoo-") as work:
        rows = run_children(names, args, profile, work)
    return report(rows, args, profile)


def run_children(names: list[str], args, profile: dict | None, work: str) -> list[dict]:
    """Bench each model in a process of its own (a model that crashes its process is a FAIL row), its files in
    `work`."""
    child = ["--threads", str(args.threads)] + ["--onnx"] * args.onnx + ["--time"] * args.time + \
        ["--no-dynamo"] * args.no_dynamo
    if profile:
        child += ["--profile", "--profile-calls", str(profile["calls"]), "--peak-gflops", str(profile["peak_gflops"]),
                  "--bandwidth-gbps", str(profile["bandwidth_gbps"])]
    rows = []
    for n in names:
        print(f"{n} ...", file=sys.stderr, flush=True)
        rows.append(bench_in_child(n, child, work, stages(n, not args.no_dynamo, args.onnx, args.time, args.profile)))
        print(f"  {json.dumps(rows[-1])[:600]}", file=sys.stderr, flush=True)
    return rows


def report(rows: list[dict], args, profile: dict | None) -> int:
    """Print (and write to --md / --json) the table of `rows`; the exit status (1 where a model failed)."""
    lines = table(rows, args.threads)
    if profile:
        lines += ["", f"## Where the milliseconds go ({args.threads} threads; each kernel's or node's median over "
                      f"{profile['calls']} runs; x onnxruntime = onnxruntime's ms / tensorlang's)", ""]
        lines += [line for r in rows for line in profile_lines(r)]
    print("\n".join(lines))
    if args.md:
        with open(args.md, "w") as f:
            f.write("\n".join(lines) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "block": BLOCK, "rotations": ROTATIONS, "models": rows,
                       **({"profile": profile} if profile else {})}, f, indent=1)
    bad = [r for r in rows if any(isinstance(r.get(k), dict) and r[k].get("status") != "ok"
                                  for k in ("export", "dynamo", "onnx"))
           or any(isinstance(c, dict) and c.get("status") != "ok" for c in r.get("time_checked", {}).values())
           or r.get("profile", {}).get("status") == "FAIL"]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
