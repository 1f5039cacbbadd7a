"""The machine's two ceilings, for a thread count: the FMA peak (benchmarks/fma_peak.py's kernel on that many
threads) and the memory bandwidth (the STREAM-like triad of benchmarks/suites/membound.py, its best row as the
suites take it: tensorlang's zero-trial pick, numpy's and PyTorch's formulations, each the best of a few calls).
A kernel's share of the ceiling that bounds it is read against these (``tensorlang.graph.profile.with_ceilings``).

Run with nothing else on the machine: ``.venv/bin/python benchmarks/ceilings.py --threads 2``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fma_peak  # noqa: E402
import suites  # noqa: E402
from suites import common  # noqa: E402


def triad_gbps(threads: int, runs: int = 5, sizes: dict | None = None) -> dict:
    """{gbps, row}: the triad's best speed over its rows (the ones that allocate their output and the one that
    writes into a preallocated output, as the suites' ceiling), each the best of `runs` calls, at the suite's sizes
    (or `sizes`), with `threads` threads for tensorlang (TENSORLANG_NUM_THREADS) and PyTorch.

    >>> r = triad_gbps(1, runs=1, sizes={"N": 1000})
    >>> r["gbps"] > 0 and r["row"] in ("pick", "numpy", "torch", "torch-out")
    True
    """
    import tensorlang as tl
    p = suites.find("membound", suites.module("membound").TRIAD)
    sizes = sizes or p.sizes
    inputs = common.make_inputs(p, sizes)
    os.environ["TENSORLANG_NUM_THREADS"] = str(threads)
    kernel = tl.build(p.op, schedule="auto", **sizes)
    calls = {"pick": lambda: kernel(*inputs)}
    for name, b in p.baselines.items():
        if b.lib == "torch":
            import torch
            torch.set_num_threads(threads)
            calls[name] = b.setup([torch.from_numpy(a) for a in inputs], sizes)
        else:
            calls[name] = b.setup(inputs, sizes)
    nbytes = p.bytes(sizes)
    best: dict = {}
    for name, fn in calls.items():
        fn()
        seconds = []
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            seconds.append(time.perf_counter() - t0)
        gbps = nbytes / min(seconds) / 1e9
        if gbps > best.get("gbps", 0.0):
            best = {"gbps": gbps, "row": name}
    return best


def measure(threads: int) -> dict:
    """{peak_gflops, bandwidth_gbps, bandwidth_row, threads} on `threads` threads.

    Example::

        measure(2)    # {'peak_gflops': 210.4, 'bandwidth_gbps': 31.2, 'bandwidth_row': 'torch-out', 'threads': 2}
    """
    peak = fma_peak.measure(threads=(threads,))[threads]
    triad = triad_gbps(threads)
    return {"peak_gflops": peak, "bandwidth_gbps": triad["gbps"], "bandwidth_row": triad["row"], "threads": threads}


def main(argv=None) -> None:
    """Print the two ceilings for ``--threads``.

    Example::

        python benchmarks/ceilings.py --threads 2
    """
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2, help="threads (default 2)")
    args = p.parse_args(argv)
    c = measure(args.threads)
    print(f"{args.threads} threads: FMA peak {c['peak_gflops']:.1f} GFLOPS, bandwidth {c['bandwidth_gbps']:.1f} GB/s "
          f"(the triad's {c['bandwidth_row']} row)")


if __name__ == "__main__":
    main()
