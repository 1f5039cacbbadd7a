"""Hand schedules against PyTorch on one thread, interleaved in one process: each round times every workload's
hand kernel and its `torch_fast` back to back, so that the machine's slow spells hit both alike; the medians over
rounds and their ratio (above 1x: tensorlang faster). Both are timed through their public calls with outputs
allocated, and both results are checked against the workload's numpy reference first.

    python benchmarks/vs_torch.py [--workloads matmul,conv2d,...] [--rounds 30] [--json]

One thread only: in one process, each side's idle threads spin for a while after a call (PyTorch's OpenMP
pool, libgomp; tensorlang's for 500 µs) and take the other core from the other side, so that neither gains from a
second thread. For two threads use
`tensorlang bench WORKLOAD --threads 2`, which times PyTorch in a process of its own. Needs PyTorch
(`pip install torch --index-url https://download.pytorch.org/whl/cpu`); run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

DEFAULT = ("matmul", "conv2d", "depthwise_conv2d", "softmax", "maxpool2d")


def timed_pair(ours, theirs, rounds: int, calls: int, tally=None) -> tuple[float, float]:
    """Median seconds of one call of `ours` and of `theirs`, `calls` calls per round, the two alternating; each
    round's disturbance goes to `tally` (a tensorlang.tuner.measure.disturbance.Tally), when given.

    Example::

        timed_pair(lambda: None, lambda: None, rounds=3, calls=2)   # (2e-07, 2e-07), say
    """
    from tensorlang.tuner.measure.disturbance import Watch
    times: tuple[list, list] = ([], [])
    for _ in range(rounds):
        with Watch(tally):
            for fn, out in zip((ours, theirs), times):
                fn()
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                out.append((time.perf_counter() - t0) / calls)
    return statistics.median(times[0]), statistics.median(times[1])


def compare(name: str, rounds: int) -> dict:
    """Build `name`'s hand schedule at its default preset, check it and `torch_fast` against numpy, and time
    them interleaved on one thread; returns {"workload", "tensorlang_s", "torch_s", "ratio", "torch",
    "disturbance"} (what other processes took meanwhile: tensorlang.tuner.measure.disturbance.Tally.to_json).

    Example::

        compare("softmax", rounds=20)["ratio"]   # e.g. 0.83
    """
    import torch

    import tensorlang as tl
    from tensorlang import schedules
    from tensorlang.tuner.measure.disturbance import Tally
    w = schedules.get(name)
    sizes = w.sizes()
    s = tl.schedule(tl.op(w.source), **sizes)
    w.hand_schedule(s)
    kernel = tl.build(s)
    inputs = w.make_inputs(sizes, np.random.default_rng(0))
    expected = w.reference(*inputs, **sizes)
    tensors = [torch.from_numpy(a) for a in inputs]

    def run_torch():
        with torch.inference_mode():
            return w.torch_fast(torch, *tensors, **sizes)
    for who, got in (("tensorlang", kernel(*inputs)), ("torch", np.asarray(run_torch()))):
        check = w.check(got, expected, sizes)
        if not check.ok:
            raise SystemExit(f"{name}: {who} {check.describe()}")
    first = time.perf_counter()
    kernel(*inputs)
    calls = max(1, min(20, int(0.02 / max(time.perf_counter() - first, 1e-6))))
    # one timing contract: both through their public calls, outputs allocated as a user's call allocates them
    tally = Tally(1)
    ours, theirs = timed_pair(lambda: kernel(*inputs), run_torch, rounds, calls, tally)
    return {"workload": name, "tensorlang_s": ours, "torch_s": theirs, "ratio": theirs / ours,
            "torch": torch.__version__, "disturbance": tally.to_json()}


def main(argv=None) -> int:
    """Parse the flags, compare each workload, print a table (or JSON).

    Example::

        main(["--workloads", "softmax,conv2d", "--rounds", "20"])
    """
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default=",".join(DEFAULT))
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    from tensorlang import schedules
    from tensorlang.tuner.measure.disturbance import busy_note
    names = args.workloads.split(",")
    for name in names:
        w = schedules.WORKLOADS.get(name)
        if w is None or w.hand_schedule is None or w.torch_fast is None:
            legal = [n for n, x in schedules.WORKLOADS.items() if x.hand_schedule and x.torch_fast]
            p.error(f"--workloads: {name!r} is not a workload with a hand schedule and a torch_fast; "
                    f"those are {', '.join(legal)}")
    if args.rounds < 1:
        p.error(f"--rounds: must be at least 1, got {args.rounds}")
    try:
        import torch
    except ImportError:
        print("vs_torch: PyTorch is not installed (pip install torch --index-url "
              "https://download.pytorch.org/whl/cpu)", file=sys.stderr)
        return 2
    os.environ["TENSORLANG_NUM_THREADS"] = "1"
    torch.set_num_threads(1)
    rows = [compare(name, args.rounds) for name in names]
    if args.json:
        print(json.dumps(rows))
    else:
        print(f"hand schedules against PyTorch {torch.__version__}: public calls with outputs allocated, 1 thread "
              f"set for both, median of {args.rounds} alternating rounds")
        for r in rows:
            print(f"  {r['workload']:18} tensorlang {r['tensorlang_s'] * 1e3:8.3f} ms   torch "
                  f"{r['torch_s'] * 1e3:8.3f} ms   {r['ratio']:.2f}x")
            note = busy_note(r["disturbance"])
            if note:
                print(f"    note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
