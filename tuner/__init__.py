"""The auto-tuner: search spaces, isolated measurement, cost models, search strategies and the records database.

``tuner.tune(workload, trials, ...)`` tunes a workload of ``schedules/`` and returns its best record.

Example::

    >>> import tuner
    >>> sorted(tuner.STRATEGIES)[:3]
    ['bayesian', 'genetic', 'grid']
"""
from __future__ import annotations

_LAZY = {
    "tune": ("tuner.tuning", "tune"),
    "tune_model": ("tuner.model_tuning", "tune_model"),
    "Tuner": ("tuner.tuning", "Tuner"),
    "Task": ("tuner.task", "Task"),
    "Database": ("tuner.database", "Database"),
    "Record": ("tuner.database", "Record"),
    "STRATEGIES": ("tuner.strategies", "STRATEGIES"),
    "Strategy": ("tuner.strategies", "Strategy"),
    "Observation": ("tuner.strategies", "Observation"),
    "compare": ("tuner.comparison", "compare"),
    "Dataset": ("tuner.dataset", "Dataset"),
    "register_strategy": ("tuner.strategies", "register_strategy"),
    "COST_MODELS": ("tuner.costmodel", "COST_MODELS"),
    "CostModel": ("tuner.costmodel", "CostModel"),
    "register_cost_model": ("tuner.costmodel", "register_cost_model"),
}


def __getattr__(name):
    # imported on first use, so that worker processes, which import tuner.measure, stay light
    if name in _LAZY:
        import importlib
        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'tuner' has no attribute {name!r}")


__all__ = list(_LAZY)
