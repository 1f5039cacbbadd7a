"""The model commands of the `tensorlang` command line: compile, bench-model and show-model.

    tensorlang compile MODEL.pt2|MODEL.onnx -o DIR [--format tlm|so|c] [--print-passes] [--skip-pass layout,...]
    tensorlang bench-model MODEL.pt2 [--threads N] [--rounds 10]
    tensorlang show-model MODEL.pt2|MODEL.onnx|MODEL.tlm [--source NODE] [--profile] [--print-passes]

MODEL.pt2 is a file written by `torch.export.save`, MODEL.onnx an ONNX model (`tl.from_onnx`, the `onnx` extra);
show-model and bench-model also take a model saved by `model.save` (MODEL.tlm), which needs no torch.

Example::

    tensorlang compile mnist.pt2 -o out --format so
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import statistics
import sys
import time
import warnings

import numpy as np

from .common import CLIError, add_common

FORMATS = ("tlm", "so", "c")


def register(subparsers) -> None:
    """Add ``compile``, ``bench-model`` and ``show-model`` to the ``tensorlang`` parser's ``subparsers``.

    >>> import argparse
    >>> sub = argparse.ArgumentParser().add_subparsers(dest="command")
    >>> register(sub)
    >>> sorted(sub.choices)
    ['bench-model', 'compile', 'show-model']
    """
    sub = subparsers
    c = sub.add_parser("compile", help="compile a PyTorch model (.pt2 from torch.export.save) or an ONNX model "
                                       "(.onnx): a saved model (tlm), a shared library (so) or C source (c)")
    add_common(c, sizes=False)
    c.add_argument("model", metavar="MODEL", help="a model written by torch.export.save (.pt2) or an ONNX file (.onnx)")
    c.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write the files in")
    c.add_argument("--format", default="tlm", help="tlm (a saved model for tl.load_model, default), so (one shared "
                                                  "library, weights embedded) or c (C source and a weights file)")
    _pass_flags(c)
    c.add_argument("--name", help="the model's C name (default: the file's name)")
    b = sub.add_parser("bench-model", help="time a model: tensorlang against torch eager, torch.compile (inductor, "
                                           "freezing) and onnxruntime, on one thread count, in alternating rounds")
    add_common(b, sizes=False)
    b.add_argument("model", metavar="MODEL.pt2", help="a model written by torch.export.save (or a saved .tlm)")
    b.add_argument("--threads", type=int, help="threads for every contender (default: TENSORLANG_NUM_THREADS, else "
                                                "all CPUs)")
    b.add_argument("--rounds", type=int, default=10, help="rounds, each timing every contender once (default 10)")
    b.add_argument("--min-time", type=float, default=0.05, help="seconds per contender per round (default 0.05)")
    _pass_flags(b)
    s = sub.add_parser("show-model", help="print a model's optimised graph, its kernels and its memory plan")
    add_common(s, sizes=False)
    s.add_argument("model", metavar="MODEL", help="a .pt2 file (torch.export.save), an ONNX file (.onnx) or a saved "
                                                  "model (.tlm)")
    s.add_argument("--source", metavar="NODE", help="print the tensorlang program of the kernel computing NODE")
    s.add_argument("--profile", action="store_true", help="time each kernel on random inputs (time share, GFLOPS)")
    _pass_flags(s)
    c.set_defaults(func=cmd_compile)
    b.set_defaults(func=cmd_bench_model)
    s.set_defaults(func=cmd_show_model)



def _pass_flags(p) -> None:
    p.add_argument("--print-passes", action="store_true", help="print what each graph pass changed")
    p.add_argument("--skip-pass", default="", metavar="NAME,...", help="graph passes to leave out (as layout)")


def _skip(args) -> tuple[str, ...]:
    from tensorlang.graph.passes import PASS_NAMES
    names = tuple(n for n in (x.strip() for x in args.skip_pass.split(",")) if n)
    for n in names:
        if n not in PASS_NAMES:
            raise CLIError(f"--skip-pass: unknown pass {n!r}; passes: {', '.join(PASS_NAMES)}")
    return names


def load(args, *, allow_saved: bool = True):
    """The model the command names: a .pt2 or .onnx file compiled now (with --skip-pass and --print-passes), or a
    saved model; returns (model, seconds it took).

    Example::

        model, seconds = load(args)
    """
    path = args.model
    if not os.path.exists(path):
        raise CLIError(f"{path}: no such file")
    t0 = time.perf_counter()
    if allow_saved and _is_saved(path):
        import tensorlang as tl
        return tl.load_model(path), time.perf_counter() - t0
    if path.lower().endswith(".onnx"):
        from tensorlang.frontend.onnx_import import model_from_onnx  # says how to install onnx when it is missing
        model = model_from_onnx(path, skip=_skip(args), print_passes=args.print_passes or None, out=sys.stderr,
                                name=getattr(args, "name", None) or _name(path))
        return model, time.perf_counter() - t0
    try:
        from tensorlang.frontend.torch_import import model_from_pt2
    except ImportError:
        raise CLIError(f"{path}: reading .pt2 files needs PyTorch (pip install 'tensorlang[torch]')") from None
    model = model_from_pt2(path, skip=_skip(args), print_passes=args.print_passes or None, out=sys.stderr,
                           name=getattr(args, "name", None) or _name(path))
    return model, time.perf_counter() - t0


def _is_saved(path: str) -> bool:
    import zipfile
    try:
        with zipfile.ZipFile(path) as z:
            return "graph.json" in z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def _name(path: str) -> str:
    return re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0]) or "model"


def _describe(model) -> dict:
    plan = model.plan
    return {"model": model.graph.name, "nodes": sum(1 for _ in model.graph.all_nodes() if _.op != "fused"),
            "kernels": len(model.steps), "distinct_kernels": len(model.tasks()),
            "arena_bytes": plan.arena_bytes, "value_bytes": plan.value_bytes, "model_bytes": model.model_bytes,
            "constant_bytes": model.graph.constant_bytes(),
            "schedules": _count(s.kernel.schedule_source for s in model.steps),
            "pass_options": model.pass_options, "pass_options_source": model.pass_options_source}


def _count(items) -> dict:
    out: dict = {}
    for x in items:
        out[x] = out.get(x, 0) + 1
    return out


def cmd_compile(args) -> dict:
    """`tensorlang compile MODEL.pt2 -o DIR`: import, optimise, compile and write the model in the chosen format;
    returns what it wrote.

    Example::

        tensorlang compile mnist.pt2 -o out --format c
    """
    from tensorlang.errors import BuildError
    from tensorlang.export import check_name, output_directory
    if args.format not in FORMATS:
        raise CLIError(f"--format: unknown format {args.format!r}; formats: tlm (saved model), so (shared library), "
                       "c (C source)")
    try:
        if args.name is not None:
            check_name(args.name)
        output_directory(args.output, "-o")
    except BuildError as e:
        raise CLIError(str(e)) from None
    model, seconds = load(args, allow_saved=False)
    name = args.name or _name(args.model).lower()
    if args.format == "tlm":
        files = {"model": model.save(os.path.join(args.output, f"{name}.tlm"))}
    else:
        files = model.export(args.output, format=args.format, name=name)
    result = {**_describe(model), "format": args.format, "compile_seconds": round(seconds, 3), "files": files,
              "memory": model.plan.describe()}
    if not args.json:
        print(f"compiled {args.model} in {seconds:.2f} s: {result['nodes']} ops in {result['kernels']} kernels "
              f"({result['distinct_kernels']} distinct; schedules {result['schedules']})")
        if model.pass_options_source == "tuned":  # chosen by tensorlang tune-model (tensorlang/graph/pass_options.py)
            from tensorlang.graph.pass_options import describe_pass_options
            print(f"passes: {describe_pass_options(model.pass_options)} (tuned)")
        print(f"memory: {model.plan.describe()}"
              + (f"; the model's intermediate tensors take {model.model_bytes / 2**20:.1f} MiB"
                 if model.model_bytes else ""))
        for role, path in files.items():
            print(f"  {role:8} {path}")
        if args.format != "tlm":
            from tensorlang.graph.export import build_command
            print(f"build the example program: cd {args.output} && {build_command(name, args.format)}")
    return result


def cmd_show_model(args) -> dict:
    """`tensorlang show-model MODEL`: the optimised graph, one line per node with shapes and fused groups; the
    kernels with their schedules (and with --profile their time shares); --source NODE prints one kernel's
    program.

    Example::

        tensorlang show-model mnist.pt2 --profile
    """
    model, seconds = load(args)
    if args.source:
        text = model.source(args.source)
        if not args.json:
            print(text, end="")
        return {"node": args.source, "source": text}
    inputs = None
    if args.profile:
        rng = np.random.default_rng(0)
        inputs = [rng.standard_normal(v.shape).astype(v.type.numpy_dtype) for v in model.graph.inputs]
    summary = model.summary_table(model.profile_flat(inputs) if inputs is not None else None)
    if not args.json:
        print(model.graph)
        print()
        print(summary)
    return {**_describe(model), "graph": str(model.graph), "summary": summary, "seconds": round(seconds, 3)}


def _time(fn, rounds: int, min_time: float, out: list) -> None:
    fn()
    calls, t0 = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        if time.perf_counter() - t0 >= min_time:
            break
    out.append((time.perf_counter() - t0) / calls)


def _onnx(module, args, kwargs, inputs: list, threads: int):
    """onnxruntime's (callable, thread count) on the module's `args` (flat: `inputs`), or (why it does not run,
    None)."""
    import tempfile

    import torch
    try:
        import onnxruntime as ort
    except ImportError:
        return "not installed", None
    try:
        path = os.path.join(tempfile.mkdtemp(prefix="tensorlang-onnx-"), "model.onnx")
        # the exporter reports its progress on stdout, which carries this command's --json
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(module, args, path, kwargs=kwargs or None, verbose=False)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        feed = {i.name: a for i, a in zip(session.get_inputs(), inputs)}
        return (lambda: session.run(None, feed)), opts.intra_op_num_threads
    except Exception as e:
        return f"failed here: {type(e).__name__}: {str(e).splitlines()[0][:160]}", None


@contextlib.contextmanager
def _tensorlang_threads(threads: int):
    saved = os.environ.get("TENSORLANG_NUM_THREADS")
    os.environ["TENSORLANG_NUM_THREADS"] = str(threads)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("TENSORLANG_NUM_THREADS", None)
        else:
            os.environ["TENSORLANG_NUM_THREADS"] = saved


def cmd_bench_model(args) -> dict:
    """`tensorlang bench-model MODEL.pt2`: tensorlang against torch eager, torch.compile (inductor with weight
    freezing, as tensorlang folds the weights) and onnxruntime (where installed) on the same random inputs and the
    same thread count (--threads, default tensorlang's: TENSORLANG_NUM_THREADS or all CPUs), in alternating rounds
    (each contender once per round); medians, spread (min-max of the rounds) and each one's largest difference from
    torch eager's outputs. A contender whose outputs differ from torch eager's fails the command (OutputMismatch,
    after the table). A saved model (.tlm) has no torch module: it is timed alone and not checked.

    Example::

        tensorlang bench-model resnet18.pt2 --threads 2
    """
    from tensorlang.threadpool import MAX_THREADS, num_threads
    from tensorlang.tuner.model.tasks import random_model_inputs
    from tensorlang.tuner.model.variants import TOLERANCE, OutputMismatch, compare_outputs
    if args.threads is not None and not 1 <= args.threads <= MAX_THREADS:
        raise CLIError(f"--threads: must be from 1 to {MAX_THREADS}, got {args.threads}")
    if args.rounds < 1:
        raise CLIError(f"--rounds: must be >= 1, got {args.rounds}")
    if not args.min_time >= 0 or args.min_time != args.min_time or args.min_time == float("inf"):
        raise CLIError("--min-time: must be a finite number of seconds >= 0")
    threads = args.threads or num_threads()
    with contextlib.ExitStack() as stack:
        stack.enter_context(_tensorlang_threads(threads))
        model, seconds = load(args)
        inputs = random_model_inputs(model)
        contenders = [("tensorlang", lambda: model.run_flat(inputs))]
        used = {"tensorlang": num_threads()}  # the thread count each contender was given
        notes, reference = {}, None
        if not _is_saved(args.model):
            import torch

            from tensorlang.frontend.torch_import import load_pt2
            from tensorlang.tuner.model.baselines import torch_arguments, torch_contenders, torch_like_for_like
            module = load_pt2(args.model).module()
            stack.enter_context(torch_like_for_like(threads))
            for name, fn in torch_contenders(module, inputs, model.graph.input_spec):
                if callable(fn):
                    contenders.append((name, fn))
                    used[name] = torch.get_num_threads()
                else:
                    notes[name] = fn
            reference = dict(contenders)["torch eager"]()
            call_args, call_kwargs = torch_arguments(inputs, model.graph.input_spec)
            fn, n = _onnx(module, call_args, call_kwargs, inputs, threads)
            if callable(fn):
                contenders.append(("onnxruntime", fn))
                used["onnxruntime"] = n
            else:
                notes["onnxruntime"] = fn
        times: dict[str, list] = {name: [] for name, _ in contenders}
        for _ in range(args.rounds):
            for name, fn in contenders:
                _time(fn, args.rounds, args.min_time, times[name])
        rows, wrong = [], []
        base = statistics.median(times["tensorlang"])
        for name, fn in contenders:
            ts = times[name]
            med = statistics.median(ts)
            error, why = (None, "") if reference is None or name == "torch eager" else compare_outputs(fn(), reference)
            if why:
                wrong.append(f"{name}: {why}")
            rows.append({"name": name, "threads": used[name], "median_s": med, "min_s": min(ts), "max_s": max(ts),
                         "vs_tensorlang": med / base if base else None, "max_rel_error": error})
    result = {**_describe(model), "threads": threads, "rounds": args.rounds, "results": rows, "not_run": notes,
              "reference": "torch eager" if reference is not None else "none: a saved model has no torch module",
              "tolerance": TOLERANCE, "compile_seconds": round(seconds, 3)}
    if not args.json:
        print(f"{model.graph.name}: {len(model.steps)} kernels, {args.rounds} rounds, {threads} thread"
              f"{'s' * (threads != 1)} for every contender")
        print(f"{'':36} {'median':>12} {'spread':>22} {'tensorlang is':>14} {'max error':>9}")
        for r in rows:
            ratio = f"{r['vs_tensorlang']:.2f}x" if r["name"] != "tensorlang" else ""
            error = "-" if r["max_rel_error"] is None else f"{r['max_rel_error']:.1e}"
            print(f"{r['name']:36} {r['median_s'] * 1e3:9.3f} ms {r['min_s'] * 1e3:9.3f}-{r['max_s'] * 1e3:.3f} ms "
                  f"{ratio:>14} {error:>9}")
        for name, why in notes.items():
            print(f"{name:36} {why}")
        print(f"error: largest |difference| from {result['reference']}'s outputs / max(1, max |reference|), "
              f"tolerance {TOLERANCE:.0e}" if reference is not None else "outputs not checked: a saved model has no "
              "torch module to compare with")
    if wrong:
        if args.json:
            print(json.dumps(result))
        raise OutputMismatch(f"{args.model}: outputs differ from torch eager's: {'; '.join(wrong)}")
    return result
