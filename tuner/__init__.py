"""The auto-tuner, by role: search strategies and cost models (:mod:`tensorlang.tuner.search`), measurement and
the Dask cluster (:mod:`tensorlang.tuner.measure`), the records database and datasets
(:mod:`tensorlang.tuner.records`), research tools (:mod:`tensorlang.tuner.research`) and model tuning
(:mod:`tensorlang.tuner.model`); a task, the tuning loop and the "tuned" schedule source at the top.

``tensorlang.tuner.tune(workload, trials, ...)`` tunes a workload of :mod:`tensorlang.schedules` and returns its
best record; ``tensorlang.tuner.tune_model(model, trials)`` tunes a whole model.

Example::

    >>> from tensorlang import tuner
    >>> sorted(tuner.STRATEGIES)[:3]
    ['bayesian', 'genetic', 'grid']
"""
from __future__ import annotations

_LAZY = {
    "tune": (".tuning", "tune"),
    "Tuner": (".tuning", "Tuner"),
    "TuneSummary": (".tuning", "TuneSummary"),
    "tune_model": (".model.tune", "tune_model"),
    "ModelTuneOptions": (".model.tune", "ModelTuneOptions"),
    "ModelTuneSummary": (".model.report", "ModelTuneSummary"),
    "Task": (".task", "Task"),
    "Database": (".records.database", "Database"),
    "Record": (".records.database", "Record"),
    "Dataset": (".records.dataset", "Dataset"),
    "STRATEGIES": (".search.strategies", "STRATEGIES"),
    "Strategy": (".search.strategies", "Strategy"),
    "Observation": (".search.strategies", "Observation"),
    "register_strategy": (".search.strategies", "register_strategy"),
    "COST_MODELS": (".search.costmodel", "COST_MODELS"),
    "CostModel": (".search.costmodel", "CostModel"),
    "register_cost_model": (".search.costmodel", "register_cost_model"),
    "compare": (".research.comparison", "compare"),
}


def __getattr__(name):
    # imported on first use, so that worker processes, which import tensorlang.tuner.measure.local, stay light
    if name in _LAZY:
        import importlib
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module, __name__), attr)
    raise AttributeError(f"module 'tensorlang.tuner' has no attribute {name!r}")


__all__ = list(_LAZY)
