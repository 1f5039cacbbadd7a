"""tensorlang's parallel loops on a shared CPU: a CPU-bound competitor that this script starts itself
(a Python busy loop at nice 0, then at nice 19, pinned to one CPU with `taskset` where there is one), and torch or
onnxruntime thread pools spinning in the same process.

    python benchmarks/shared_cpu.py [--cases conv2d,matmul,softmax,mnist,resnet18,transformer] [--threads 2]
                                    [--rounds 7] [--min-time 0.2] [--baseline-commit REV] [--json] [--quick]

Parts, each printed with its bar:
- the cost of a parallel loop on the quiet machine: a kernel that runs 1000 parallel loops of 2 tiny iterations,
  against the same kernel without them;
- each case (conv2d at the ResNet-18 3x3 layer, matmul 1024, softmax, and through `tl.from_torch` the MNIST net,
  ResNet-18 and a BERT-base encoder layer) on the quiet machine, beside the nice 0 competitor and beside the nice
  19 one: tensorlang on 1 and on `--threads` threads, torch eager on `--threads`; bars: under a competitor the
  `--threads` time is at most 1.15x the 1-thread time, and tensorlang's speed against torch is at least 0.8x the
  quiet machine's;
- on the quiet machine, the models called alternately with torch eager (each tensorlang call right after a torch
  call), and with an onnxruntime session where onnxruntime is installed, against blocks of tensorlang calls
  alone; bar: at most 1.3x. For reference, also after an onnxruntime session of one thread (no pool threads
  that spin after its call).
With `--baseline-commit REV` the runtime of that commit (its tensorlang/csrc/tensorlang_runtime.c, built into a
library of its own the way tensorlang/threadpool.py builds the current one) runs the same kernels too, through a
switch that the JIT's kernels call instead of either runtime: on the quiet machine the current runtime's loop
cost and conv2d, matmul and ResNet-18 times must be within 3% of it.

One timing contract for every contender: the public call (a kernel's or model's `__call__`, torch's module or
function, onnxruntime's `run`), outputs allocated by the call, the thread count set explicitly for each library
(TENSORLANG_NUM_THREADS, `torch.set_num_threads`, onnxruntime's intra-op threads), rounds in which the contenders
take turns (the order rotating) for `--min-time` seconds each after one call of warm-up, every call timed alone;
a contender's figure is the median over rounds of its per-round median, with the least and largest round medians
as its spread. Every output is checked against torch (a model compiled for each thread count, since schedules
are chosen per thread count) before anything is timed. Run it on an otherwise quiet machine; `--quick` (tiny sizes,
2 rounds) only shows that everything runs.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "support"))
sys.path.insert(0, ROOT)

CASES = ("conv2d", "matmul", "softmax", "mnist", "resnet18", "transformer")
MODELS = ("mnist", "resnet18", "transformer")
#: the bars (the module docstring says what each bounds)
MAX_LOADED_VS_ONE_THREAD = 1.15
MIN_TORCH_RATIO_KEPT = 0.8
MAX_ALTERNATING_VS_ALONE = 1.3
MAX_VS_BASELINE = 1.03
QUIET_BASELINE_CASES = ("conv2d", "matmul", "resnet18")

# The JIT's kernels call this instead of a runtime when a baseline runs too: it forwards to the runtime chosen.
SWITCH_C = r"""
#include <stdint.h>
typedef int32_t (*chunk_fn)(int64_t, int64_t, void *);
typedef int32_t (*parallel_for_fn)(chunk_fn, void *, int64_t, int64_t);
static parallel_for_fn target;
__attribute__((visibility("default"))) void shared_cpu_use(parallel_for_fn f) {
    __atomic_store_n(&target, f, __ATOMIC_RELEASE);
}
__attribute__((visibility("default"))) int32_t tensorlang_parallel_for(chunk_fn fn, void *closure, int64_t lo,
                                                                      int64_t extent) {
    return __atomic_load_n(&target, __ATOMIC_ACQUIRE)(fn, closure, lo, extent);
}
"""


class Runtimes:
    """The runtimes kernels can run on: "current" always; "baseline" with --baseline-commit, through the switch."""

    def __init__(self, baseline_commit: str | None, work: pathlib.Path):
        from tensorlang import target, threadpool
        from tensorlang.codegen_c import find_c_compiler
        self.addresses = {}
        self.switch = None
        if baseline_commit is None:
            return
        if target._initialise.cache_info().currsize:
            raise RuntimeError("Runtimes(baseline) must be made before the JIT starts (it registers the switch)")
        current, why = threadpool._native_address()
        if current is None:
            raise ValueError(f"--baseline-commit: the current native runtime is not available ({why})")
        r = subprocess.run(["git", "-C", ROOT, "show", f"{baseline_commit}:tensorlang/csrc/tensorlang_runtime.c"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise ValueError(f"--baseline-commit {baseline_commit}: git cannot show its "
                             f"tensorlang/csrc/tensorlang_runtime.c: {r.stderr.strip()}")
        old_c, switch_c = work / "baseline_runtime.c", work / "switch.c"
        old_c.write_text(r.stdout)
        if r.stdout.encode() == threadpool.RUNTIME_C.read_bytes():
            print(f"note: the runtime of {baseline_commit} is the current one", file=sys.stderr)
        switch_c.write_text(SWITCH_C)
        cc = find_c_compiler()
        baseline = ctypes.CDLL(str(threadpool._build_native(cc, old_c)), mode=ctypes.RTLD_LOCAL)
        if not hasattr(baseline, "tensorlang_parallel_for"):
            raise ValueError(f"--baseline-commit {baseline_commit}: its runtime does not export "
                             "tensorlang_parallel_for to the JIT (it predates TENSORLANG_JIT_RUNTIME)")
        self.switch = ctypes.CDLL(str(threadpool._build_native(cc, switch_c)), mode=ctypes.RTLD_LOCAL)
        self.switch.shared_cpu_use.argtypes = [ctypes.c_void_p]
        self.addresses = {"current": current,
                          "baseline": ctypes.cast(baseline.tensorlang_parallel_for, ctypes.c_void_p).value}
        self.use("current")
        switch_address = ctypes.cast(self.switch.tensorlang_parallel_for, ctypes.c_void_p).value

        def through_the_switch() -> int:
            threadpool.check_settings()
            return switch_address
        # the JIT registers the symbol once, when it starts (tensorlang.target): before any kernel is built
        threadpool.parallel_for_address = through_the_switch

    @property
    def names(self) -> list[str]:
        return list(self.addresses) or ["current"]

    def use(self, name: str) -> None:
        if self.switch is not None:
            self.switch.shared_cpu_use(self.addresses[name])


# ---- timing --------------------------------------------------------------------------------------------------

def plain(fn):
    """One timed call of `fn`."""
    def call() -> float:
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    return call


def after(first, fn):
    """`first()` (not timed), then one timed call of `fn`."""
    def call() -> float:
        first()
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    return call


def measure(contenders: dict, rounds: int, min_time: float) -> dict:
    """contenders: name -> (setup, timed call). Rounds in which each contender, in a rotating order, is set up, called
    once untimed, then called for `min_time` seconds; {name: {"median_s", "spread_s", "rounds_s"}}."""
    names = list(contenders)
    per_round = {n: [] for n in names}
    for r in range(rounds):
        for n in names[r % len(names):] + names[:r % len(names)]:
            setup, call = contenders[n]
            setup()
            call()
            times, start = [], time.perf_counter()
            while not times or time.perf_counter() - start < min_time:
                times.append(call())
            per_round[n].append(statistics.median(times))
    return {n: {"median_s": statistics.median(t), "spread_s": [min(t), max(t)], "rounds_s": t}
            for n, t in per_round.items()}


def set_threads(n: int) -> None:
    os.environ["TENSORLANG_NUM_THREADS"] = str(n)  # the runtime reads it at every parallel loop


def setup(runtimes: Runtimes, runtime: str, threads: int, torch_threads: int | None = None):
    """A contender's setup: this runtime and thread count for tensorlang (and this many threads for torch)."""
    def run() -> None:
        runtimes.use(runtime)
        set_threads(threads)
        if torch_threads is not None:
            import torch
            torch.set_num_threads(torch_threads)
    return run


# ---- the competitor -------------------------------------------------------------------------------------------

@contextlib.contextmanager
def competitor(nice: int | None):
    """A CPU-bound process at `nice` (None: none), pinned to this process's last CPU with taskset where there is
    one; yields a description."""
    if nice is None:
        yield "quiet"
        return
    cmd = [sys.executable, "-c", "while True:\n    pass"]
    cpu = max(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    where = "unpinned (no taskset)"
    if shutil.which("taskset") and cpu is not None:
        cmd = ["taskset", "-c", str(cpu), *cmd]
        where = f"pinned to CPU {cpu}"
    proc = subprocess.Popen(cmd, preexec_fn=lambda: os.nice(nice))
    try:
        time.sleep(0.3)  # running before anything is timed
        yield f"competitor at nice {nice}, {where}"
    finally:
        proc.kill()
        proc.wait()


# ---- cases ----------------------------------------------------------------------------------------------------

def close(got, want, tol: float) -> tuple[bool, float]:
    """(right, error): max |got - want| / max(1, max |want|); NaN anywhere is wrong."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return False, float("inf")
    err = float(np.max(np.abs(got - want))) / max(1.0, float(np.max(np.abs(want))))
    return bool(err <= tol), err  # a NaN error is not <= tol


class Case:
    """One case: tensorlang callables per thread count, torch's callable, the output check."""

    def __init__(self, name, tl_calls: dict, torch_call, tol: float, onnx=None):
        self.name, self.tl_calls, self.torch_call, self.tol, self.onnx = name, tl_calls, torch_call, tol, onnx

    def eager(self):
        """torch's output, without autograd."""
        import torch
        with torch.no_grad():
            return self.torch_call()

    def check(self, torch, threads: int) -> dict:
        """Compare every tensorlang callable's output (each thread count) with torch's; {threads: error}."""
        torch.set_num_threads(threads)
        want = self.eager().numpy()
        errors = {}
        for t, call in self.tl_calls.items():
            set_threads(t)
            ok, err = close(call(), want, self.tol)
            if not ok:
                raise SystemExit(f"{self.name} on {t} thread(s): tensorlang's output differs from torch's "
                                 f"(error {err:.3g} x max(1, |torch|), tolerance {self.tol})")
            errors[t] = err
        return errors


def kernel_case(name: str, preset: str, threads: int) -> Case:
    import torch

    import tensorlang as tl
    from tensorlang import schedules
    w = schedules.get(name)
    sizes = w.sizes(preset)
    s = tl.schedule(tl.op(w.source), **sizes)
    w.hand_schedule(s)
    k = tl.build(s)
    inputs = w.make_inputs(sizes, np.random.default_rng(0))
    tensors = [torch.from_numpy(x) for x in inputs]
    reduction = max((sizes.get(v, 1) for v in ("K", "C", "D")), default=1)
    return Case(f"{name} ({preset})", {1: lambda: k(*inputs), threads: lambda: k(*inputs)},
                lambda: w.torch_fast(torch, *tensors, **sizes), 1e-4 * max(1, reduction) ** 0.5)


def model_case(name: str, threads: int, quick: bool, work: pathlib.Path) -> Case:
    import reference_models as R
    import torch

    import tensorlang as tl
    make = {"mnist": lambda: R.make_mnist(),
            "resnet18": lambda: R.make_resnet18(size=32 if quick else 224),
            "transformer": lambda: R.make_bert_layer(seq=16 if quick else 128)}[name]
    module, args = make()
    np_args = [a.numpy() for a in args]
    calls = {}
    for t in sorted({1, threads}):
        set_threads(t)  # schedules are chosen for the thread count the model is compiled under
        model = tl.from_torch(module, args)
        calls[t] = (lambda m: lambda: m(*np_args))(model)

    def eager():
        with torch.no_grad():
            return module(*args)
    return Case(name, calls, eager, 1e-3, onnx=(module, args, work / f"{name}.onnx"))


def onnx_session(case: Case, threads: int):
    """(a callable running an onnxruntime session of the case's model on `threads` threads, None) or (None, why)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None, "onnxruntime is not installed"
    import torch
    module, args, path = case.onnx
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # the TorchScript exporter, which needs no onnxscript
            torch.onnx.export(module, args, str(path), dynamo=False)
    except Exception as e:  # any export failure is reported as the reason
        return None, f"torch.onnx.export failed: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    feed = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)}
    ok, err = close(session.run(None, feed)[0], case.eager().numpy(), 1e-3)
    if not ok:
        return None, f"onnxruntime's output differs from torch's (error {err:.3g})"
    return (lambda: session.run(None, feed)), None


# ---- parts ----------------------------------------------------------------------------------------------------

def loop_cost(runtimes: Runtimes, threads: int, rounds: int, min_time: float) -> dict:
    """Microseconds one parallel loop of 2 tiny iterations adds, per runtime: a kernel running 1000 of them against
    the same kernel without the parallel loops."""
    import tensorlang as tl
    op = tl.op("def loops(A: f32[R, N]) -> B:\n    B[r, i] = A[r, i] + 1.0\n")
    kernels = {}
    for parallel in (True, False):
        s = tl.schedule(op, R=1000, N=32)
        io, _ = s["B"].split("i", 16)
        if parallel:
            s["B"].parallel(io)
        kernels[parallel] = tl.build(s)
    A = np.random.default_rng(0).standard_normal((1000, 32)).astype(np.float32)
    for k in kernels.values():
        ok, err = close(k(A), A.astype(np.float64) + 1, 1e-6)
        if not ok:
            raise SystemExit(f"the loop-cost kernel is wrong (error {err:.3g})")
    contenders = {"serial": (setup(runtimes, "current", threads), plain(lambda: kernels[False](A)))}
    for rt in runtimes.names:
        contenders[rt] = (setup(runtimes, rt, threads), plain(lambda: kernels[True](A)))
    m = measure(contenders, rounds, min_time)
    base = m["serial"]["median_s"]
    return {rt: (m[rt]["median_s"] - base) / 1000 * 1e6 for rt in runtimes.names} | {"timings": m}


def scenario(cases: list[Case], runtimes: Runtimes, threads: int, rounds: int, min_time: float) -> dict:
    """Every case: tensorlang on 1 and `threads` threads (each runtime), torch eager on `threads`."""
    from tensorlang.threadpool import pool_stats
    out = {}
    for case in cases:
        before = pool_stats()
        contenders = {"tensorlang 1": (setup(runtimes, "current", 1), plain(case.tl_calls[1]))}
        for rt in runtimes.names:
            label = f"tensorlang {threads}" + ("" if rt == "current" else f" {rt}")
            contenders[label] = (setup(runtimes, rt, threads), plain(case.tl_calls[threads]))
        contenders[f"torch {threads}"] = (setup(runtimes, "current", threads, threads), plain(case.eager))
        m = measure(contenders, rounds, min_time)
        after_stats = pool_stats()
        out[case.name] = {"timings": m, "pool": {k: after_stats[k] - before[k] for k in after_stats}}
    return out


def alternation(cases: list[Case], runtimes: Runtimes, threads: int, rounds: int, min_time: float) -> dict:
    """Quiet machine, models only: tensorlang alone, and each call right after a torch eager call (and after an
    onnxruntime session's call), per runtime; torch alone and after tensorlang for reference."""
    out = {}
    for case in cases:
        if case.name not in MODELS:
            continue
        tl_call = case.tl_calls[threads]
        session, why = onnx_session(case, threads)
        alone_session = onnx_session(case, 1)[0] if session is not None and threads > 1 else None
        contenders = {}
        for rt in runtimes.names:
            suffix = "" if rt == "current" else f" ({rt})"
            ready = setup(runtimes, rt, threads, threads)
            contenders[f"tensorlang alone{suffix}"] = (ready, plain(tl_call))
            contenders[f"tensorlang after torch{suffix}"] = (ready, after(case.eager, tl_call))
            if session is not None:
                contenders[f"tensorlang after onnxruntime{suffix}"] = (ready, after(session, tl_call))
            if alone_session is not None:  # no pool threads: what the other library's threads cost, apart
                contenders[f"tensorlang after onnxruntime 1 thread{suffix}"] = (ready, after(alone_session, tl_call))
        ready = setup(runtimes, "current", threads, threads)
        contenders["torch alone"] = (ready, plain(case.eager))
        contenders["torch after tensorlang"] = (ready, after(tl_call, case.eager))
        out[case.name] = {"timings": measure(contenders, rounds, min_time), "onnxruntime": why or "run"}
    return out


# ---- report ---------------------------------------------------------------------------------------------------

def ms(m: dict) -> str:
    lo, hi = m["spread_s"]
    return f"{m['median_s'] * 1e3:.3f} ms ({lo * 1e3:.3f}-{hi * 1e3:.3f})"


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def report(result: dict, threads: int) -> list[str]:
    """The text report with every bar's verdict."""
    lines = []
    if "loop_cost_us" in result:
        lc = result["loop_cost_us"]
        line = "a parallel loop's cost, quiet machine: " + ", ".join(
            f"{rt} {lc[rt]:.2f} us" for rt in lc if rt != "timings")
        if "baseline" in lc:
            line += f"; current / baseline {lc['current'] / lc['baseline']:.3f} " \
                    f"(bar <= {MAX_VS_BASELINE}: {verdict(lc['current'] <= MAX_VS_BASELINE * lc['baseline'])})"
        lines.append(line)
    quiet = result["scenarios"].get("quiet", {})
    for sname, cases in result["scenarios"].items():
        lines.append(f"\n{sname}:")
        for cname, r in cases.items():
            m = r["timings"]
            t1, tn, tt = (m["tensorlang 1"]["median_s"], m[f"tensorlang {threads}"]["median_s"],
                          m[f"torch {threads}"]["median_s"])
            lines.append(f"  {cname}: " + "; ".join(f"{k} {ms(v)}" for k, v in m.items()))
            notes = [f"{threads} / 1 thread {tn / t1:.2f}x", f"tensorlang speed / torch {tt / tn:.2f}x"]
            if sname != "quiet":
                notes[0] += f" (bar <= {MAX_LOADED_VS_ONE_THREAD}: {verdict(tn <= MAX_LOADED_VS_ONE_THREAD * t1)})"
                if cname in quiet:
                    q = quiet[cname]["timings"]
                    kept = (tt / tn) / (q[f"torch {threads}"]["median_s"] / q[f"tensorlang {threads}"]["median_s"])
                    notes.append(f"kept {kept:.2f}x of the quiet machine's (bar >= {MIN_TORCH_RATIO_KEPT}: "
                                 f"{verdict(kept >= MIN_TORCH_RATIO_KEPT)})")
            base = m.get(f"tensorlang {threads} baseline")
            if base is not None:
                ratio = tn / base["median_s"]
                note = f"current / baseline {ratio:.3f}"
                if sname == "quiet" and cname.split(" ")[0] in QUIET_BASELINE_CASES:
                    note += f" (bar <= {MAX_VS_BASELINE}: {verdict(ratio <= MAX_VS_BASELINE)})"
                notes.append(note)
            p = r["pool"]
            notes.append(f"pool: {p['loops']} loops, {p['steals']} steals, {p['caller_sleeps']} caller sleeps, "
                         f"{p['stalls']} stalls, {p['spins_given_up']} spins given up")
            lines.append("    " + "; ".join(notes))
    if result.get("alternation"):
        lines.append("\nalternating call by call, quiet machine:")
        for cname, r in result["alternation"].items():
            m = r["timings"]
            lines.append(f"  {cname}: " + "; ".join(f"{k} {ms(v)}" for k, v in m.items()))
            notes = []
            for k in m:
                if k.startswith("tensorlang after"):
                    alone = m[k.replace("after torch", "alone").replace("after onnxruntime 1 thread", "alone")
                              .replace("after onnxruntime", "alone")]
                    x = m[k]["median_s"] / alone["median_s"]
                    if "1 thread" in k:  # a reference, not a bar: the same library without its pool's threads
                        notes.append(f"{k} / alone {x:.2f}x")
                        continue
                    notes.append(f"{k} / alone {x:.2f}x (bar <= {MAX_ALTERNATING_VS_ALONE}: "
                                 f"{verdict(x <= MAX_ALTERNATING_VS_ALONE)})")
            if r["onnxruntime"] != "run":
                notes.append(f"onnxruntime not run: {r['onnxruntime']}")
            lines.append("    " + "; ".join(notes))
    return lines


def main(argv=None) -> int:
    """Run the parts the module's docstring lists and print the report (or JSON).

    Example::

        python benchmarks/shared_cpu.py --quick --cases mnist,softmax
    """
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from {', '.join(CASES)}")
    p.add_argument("--threads", type=int, default=2, help="the parallel thread count compared with 1 (default 2)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--min-time", type=float, default=0.2, help="seconds per contender per round")
    p.add_argument("--baseline-commit", metavar="REV", help="also run the runtime of this git commit")
    p.add_argument("--no-competitor", action="store_true", help="the quiet machine only")
    p.add_argument("--quick", action="store_true", help="tiny sizes, 2 rounds of 0.01 s: shows that it runs")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in CASES:
            p.error(f"--cases: unknown case {c!r}; cases: {', '.join(CASES)}")
    if args.threads < 2:
        p.error(f"--threads: {args.threads}; give 2 or more (it is compared with 1 thread)")
    if args.rounds < 1 or args.min_time < 0:
        p.error(f"--rounds must be at least 1 and --min-time at least 0, got {args.rounds} and {args.min_time}")
    if args.quick:
        args.rounds, args.min_time = 2, 0.01
    try:
        import torch
    except ImportError:
        p.error("needs PyTorch (pip install torch --index-url https://download.pytorch.org/whl/cpu)")
    work = pathlib.Path(tempfile.mkdtemp(prefix="tensorlang-shared-cpu-"))
    try:
        runtimes = Runtimes(args.baseline_commit, work)  # before the JIT starts
    except ValueError as e:
        p.error(str(e))
    torch.set_num_threads(args.threads)
    presets = {"conv2d": "small" if args.quick else "resnet18_3x3", "matmul": "256" if args.quick else "1024",
               "softmax": "small" if args.quick else "1024"}
    built = []
    for c in cases:
        print(f"building {c} ...", file=sys.stderr)
        built.append(model_case(c, args.threads, args.quick, work) if c in MODELS
                     else kernel_case(c, presets[c], args.threads))
    errors = {}
    for rt in runtimes.names:  # every output, on every runtime, against torch's before anything is timed
        runtimes.use(rt)
        errors[rt] = {c.name: c.check(torch, args.threads) for c in built}
    result = {"threads": args.threads, "rounds": args.rounds, "min_time_s": args.min_time,
              "baseline_commit": args.baseline_commit, "quick": args.quick, "max_errors": errors}
    torch.set_num_threads(args.threads)
    print("loop cost ...", file=sys.stderr)
    result["loop_cost_us"] = loop_cost(runtimes, args.threads, args.rounds, args.min_time)
    result["scenarios"] = {}
    for nice in [None] if args.no_competitor else [None, 0, 19]:
        with competitor(nice) as name:
            print(f"{name} ...", file=sys.stderr)
            result["scenarios"][name] = scenario(built, runtimes, args.threads, args.rounds, args.min_time)
    print("alternation ...", file=sys.stderr)
    result["alternation"] = alternation(built, runtimes, args.threads, args.rounds, args.min_time)
    if args.json:
        print(json.dumps(result))
    else:
        print("\n".join(report(result, args.threads)))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
