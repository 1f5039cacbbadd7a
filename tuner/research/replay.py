"""Offline replay: tune against a dataset instead of the machine. ``ReplayRunner`` answers each config from the
table in microseconds, so a search strategy is evaluated in seconds, without compiling or timing anything.

The replayed task's search space is the dataset's configs (:meth:`tensorlang.tuner.records.dataset.Dataset.space`):
strategies draw from it and every other config is ruled out by the space's constraint. Model-guided strategies get the
loop-IR features of the table's configs, computed once per dataset (:func:`table_features`).

Example::

    >>> from tensorlang.tuner.records.dataset import Dataset
    >>> ds = Dataset({"workload": "matmul", "sizes": {"M": 64, "N": 48, "K": 32}, "threads": 1, "flops": 196608.0,
    ...               "knobs": {"nr": [16]}}, [({"nr": 16}, 2.0, None)])
    >>> [r] = ReplayRunner(ds).measure([{"nr": 16}])
    >>> r.ok, round(r.median_s * 1e6, 1)
    (True, 98.3)
"""
from __future__ import annotations

import math
import time

import numpy as np

from tensorlang.space import config_key
from tensorlang.tuner.measure.local import Result
from tensorlang.tuner.records.dataset import Dataset, DatasetError
from tensorlang.tuner.task import Task

__all__ = ["ReplayRunner", "replay_task", "table_features"]


class ReplayRunner:
    """A runner (the interface of :class:`tensorlang.tuner.measure.local.LocalRunner`) that looks results up in a
    dataset.

    A config the table does not hold is a :class:`DatasetError`: the replay space never proposes one.
    """

    def __init__(self, dataset: Dataset):
        self.dataset = dataset
        self.phase_s = {"build": 0.0, "run": 0.0}
        self.best_s: float | None = None

    def measure(self, configs, on_result=None) -> list[Result]:
        """The table's answer for each config, in order (``on_result(r)`` is called for each, like the real
        runner)."""
        t0 = time.perf_counter()
        out = []
        for c in configs:
            if c not in self.dataset:
                raise DatasetError(f"replay: config {config_key(c)} is not in the dataset")
            gflops, kind = self.dataset.lookup(c)
            if gflops is None:
                r = Result(dict(c), None, (), kind, f"{kind} (replayed from the dataset)")
            else:
                r = Result(dict(c), None, (self.dataset.median_s(c),))
            out.append(r)
            if on_result is not None:
                on_result(r)
        self.phase_s["run"] += time.perf_counter() - t0
        return out

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def replay_task(dataset: Dataset) -> Task:
    """The task the dataset was measured for (its target, not this machine's), with the workload of this
    tensorlang. DatasetError when the workload or a size is unknown.

    Example::

        >>> ds = Dataset({"workload": "matmul", "sizes": {"M": 64, "N": 48, "K": 32}, "threads": 2,
        ...               "flops": 196608.0, "knobs": {}, "target": {"cpu": "znver5"}}, [])
        >>> replay_task(ds).describe()
        'matmul(M=64, N=48, K=32) on znver5, 2 threads'
    """
    from tensorlang import schedules
    from tensorlang.errors import TensorlangError
    # datasets written before the generated spaces name none: they were measured in the hand-written ones
    space = dataset.header.get("space", "hand")
    source = dataset.header.get("source") or ""
    target = dict(dataset.header.get("target") or {"triple": "", "cpu": "unknown", "features": ""})
    if source:
        try:
            task = Task(dataset.workload, dict(dataset.sizes), target, int(dataset.header["threads"]), source=source,
                        space_kind="generated")
            w = task.workload_def
        except (TensorlangError, ValueError) as e:
            raise DatasetError(f"dataset {dataset.path}: its program does not compile here: {e}") from None
        sizes = dict(dataset.sizes)
    else:
        try:
            w = schedules.get(dataset.workload)
        except ValueError as e:
            raise DatasetError(f"dataset {dataset.path}: {e}") from None
        sizes = w.sizes(None)
        unknown = sorted(set(dataset.sizes) - set(sizes))
        if unknown:
            raise DatasetError(f"dataset {dataset.path}: workload {w.name!r} has no size {unknown[0]!r}")
        sizes.update(dataset.sizes)
    flops = float(w.flops(sizes))
    if not math.isclose(flops, float(dataset.header["flops"]), rel_tol=1e-9):
        raise DatasetError(f"dataset {dataset.path}: {dataset.header['flops']:g} flops per run, but {w.name} at "
                           f"these sizes has {flops:g}; the workload changed since the dataset was measured")
    return Task(w.name, sizes, target, int(dataset.header["threads"]), source=source, space_kind=space)


def table_features(dataset: Dataset, task: Task | None = None) -> dict[str, np.ndarray | None]:
    """``{config key: loop-IR features}`` of every config in the table (None where the config cannot be
    scheduled), for model-guided strategies on replay. Computed once per dataset and process.

    Example::

        >>> ds = Dataset({"workload": "matmul", "sizes": {"M": 64, "N": 48, "K": 32}, "threads": 1,
        ...               "flops": 196608.0, "knobs": {}}, [])
        >>> table_features(ds)
        {}
    """
    key = (id(dataset), len(dataset))
    hit = _FEATURES.get(key)
    if hit is not None and hit[0] is dataset:
        return hit[1]
    from tensorlang.tuner import features
    task = task or replay_task(dataset)
    space = dataset.space(task.space) if len(dataset) else None
    out: dict[str, np.ndarray | None] = {}
    for c in dataset.configs:
        out[config_key(c)] = features.of_config(space, task.op, task.sizes, c)
    _FEATURES[key] = (dataset, out)
    return out


_FEATURES: dict[tuple, tuple] = {}
