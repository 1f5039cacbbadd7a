"""The worker process that times a library's formulation of a suite program (numpy, scipy or PyTorch): OpenBLAS and
PyTorch read their thread counts when they load, so each library runs in a process of its own, started with the
run's thread count in its environment (and ``torch.set_num_threads``).
"""
from __future__ import annotations

import os

import numpy as np


def versions(lib: str) -> str:
    """The version of ``lib`` ("numpy", "scipy" or "torch") as imported here.

    >>> versions("numpy") == np.__version__
    True
    """
    import importlib
    return importlib.import_module(lib).__version__


def handler(init: dict):
    """Worker factory (the tuner's ``Worker``): the baseline ``init["baseline"]`` of the program ``init["program"]``
    of the fixed suite ``init["suite"]``, on the ``.npy`` ``inputs`` at ``sizes`` with ``threads`` threads. Its setup
    runs here, once. ``{"first": True}`` writes the outputs to ``folder/out{i}.npy`` and answers their count, the
    library's version and this process's ``pid``; ``{"runs": n, "min_time": t}`` answers the times of at least n
    calls and t seconds.

    Example::

        Worker("suites.library:handler", {"suite": "polybench", "program": "gemm", "baseline": "scipy", ...},
               env={"OPENBLAS_NUM_THREADS": "2"})
    """
    from tensorlang.timing import measure

    from . import find
    program = find(init["suite"], init["program"])
    baseline = program.baselines[init["baseline"]]
    inputs = [np.load(f) for f in init["inputs"]]
    sizes = init["sizes"]
    if baseline.lib == "torch":
        import torch
        torch.set_num_threads(init["threads"])
        with torch.inference_mode():
            run = baseline.setup([torch.from_numpy(a) for a in inputs], sizes)

        def timed():
            with torch.inference_mode():
                return run()
    else:
        timed = baseline.setup(inputs, sizes)

    def handle(request: dict) -> dict:
        if request.get("first"):
            out = timed()
            outs = out if isinstance(out, (tuple, list)) else (out,)
            for i, o in enumerate(outs):
                array = o.numpy() if hasattr(o, "numpy") else o  # a torch tensor, or numpy's
                np.save(os.path.join(init["folder"], f"out{i}.npy"), np.asarray(array))
            return {"outputs": len(outs), "version": f"{baseline.lib} {versions(baseline.lib)}", "pid": os.getpid()}
        return {"times": measure(timed, min_runs=request["runs"], min_time=request["min_time"])}

    return handle
