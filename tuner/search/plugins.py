"""Plug-ins: search strategies and cost models from outside this package, without forking it.

A strategy or a cost model is found, in this order:

1. by a name registered in code (``tuner.register_strategy(name, cls)`` / ``tuner.register_cost_model``);
2. by a ``package.module:Class`` spec, imported on first use and then registered under that spec
   (``tensorlang tune conv2d --strategy mypkg.search:Annealing``);
3. by an entry point of an installed distribution, in the group ``tensorlang.strategies`` or
   ``tensorlang.cost_models`` (the entry point's name is the name). In ``pyproject.toml``::

       [project.entry-points."tensorlang.strategies"]
       annealing = "mypkg.search:Annealing"

Example::

    >>> cls = resolve_strategy("tensorlang.tuner.search.strategies:RandomSearch")
    >>> cls.__name__
    'RandomSearch'
    >>> resolve_strategy("no.such.module:Thing")
    Traceback (most recent call last):
    ...
    tensorlang.errors.UsageError: strategy 'no.such.module:Thing': cannot import module 'no.such.module' (...)
"""
from __future__ import annotations

import importlib
import importlib.metadata
import re

from tensorlang.errors import UsageError

__all__ = [
    "COST_MODEL_GROUP",
    "STRATEGY_GROUP",
    "load_class",
    "load_entry_points",
    "resolve_cost_model",
    "resolve_strategy",
]

STRATEGY_GROUP = "tensorlang.strategies"
COST_MODEL_GROUP = "tensorlang.cost_models"

_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")


def load_class(spec: str, kind: str) -> type:
    """The class named by ``package.module:Class`` (``Class`` may be dotted: ``mod:Outer.Inner``).

    UsageError naming the ``kind`` ("strategy", "cost model"), the spec and what is wrong with it.

    Example::

        >>> load_class("tensorlang.tuner.search.costmodel:XGBCostModel", "cost model").name
        'xgb'
    """
    if not isinstance(spec, str) or not _SPEC.fullmatch(spec):
        raise UsageError(f"{kind} {spec!r}: a plug-in is named as package.module:Class")
    module_name, _, attr = spec.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except Exception as e:  # the plug-in's own import error, reported as the user's input
        raise UsageError(f"{kind} {spec!r}: cannot import module {module_name!r} ({e})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"{kind} {spec!r}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not isinstance(obj, type):
        raise UsageError(f"{kind} {spec!r}: {attr!r} is a {type(obj).__name__}, not a class")
    return obj


def _entry_points(group: str) -> dict:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=group)}


def load_entry_points(kind: str = "strategy") -> list[str]:
    """Register every installed entry point of the ``kind``'s group that is not registered yet; return the
    problems (one line per entry point that failed to load or register), so that listing never crashes.

    Example::

        >>> load_entry_points("cost model")
        []
    """
    group, registry, register = _kind(kind)
    problems = []
    for name, ep in _entry_points(group).items():
        if name in registry:
            continue
        try:
            register(name, ep.load())
        except Exception as e:
            problems.append(f"entry point {name!r} ({ep.value}) in group {group}: {e}")
    return problems


def _kind(kind: str):
    if kind == "strategy":
        from tensorlang.tuner.search.strategies import STRATEGIES, register_strategy
        return STRATEGY_GROUP, STRATEGIES, register_strategy
    if kind == "cost model":
        from tensorlang.tuner.search.costmodel import COST_MODELS, register_cost_model
        return COST_MODEL_GROUP, COST_MODELS, register_cost_model
    raise UsageError(f"plug-in kind is 'strategy' or 'cost model', not {kind!r}")


def _resolve(name: str, kind: str) -> type:
    group, registry, register = _kind(kind)
    if not isinstance(name, str) or not name:
        raise UsageError(f"a {kind} name is a non-empty string, got {name!r}")
    if name in registry:
        return registry[name]
    if ":" in name:
        cls = load_class(name, kind)
        register(name, cls)  # checks the interface; makes the spec usable everywhere a name is
        return cls
    ep = _entry_points(group).get(name)
    if ep is not None:
        try:
            cls = ep.load()
        except Exception as e:
            raise UsageError(f"{kind} {name!r}: entry point {ep.value!r} in group {group} fails to load ({e})") \
                from None
        register(name, cls)
        return cls
    load_entry_points(kind)
    plural = {"strategy": "strategies", "cost model": "cost models"}[kind]
    raise UsageError(f"unknown {kind} {name!r}; {plural}: {', '.join(registry)} "
                     "(or a plug-in as package.module:Class)")


def resolve_strategy(name: str) -> type:
    """The strategy class called ``name``: registered, ``package.module:Class``, or an entry point of the group
    ``tensorlang.strategies``. UsageError naming the strategy and the known names.

    Example::

        >>> resolve_strategy("genetic").__name__
        'GeneticSearch'
    """
    return _resolve(name, "strategy")


def resolve_cost_model(name: str) -> type:
    """The cost model class called ``name``: registered, ``package.module:Class``, or an entry point of the
    group ``tensorlang.cost_models``. UsageError naming the cost model and the known names.

    Example::

        >>> resolve_cost_model("forest").__name__
        'ForestCostModel'
    """
    return _resolve(name, "cost model")
