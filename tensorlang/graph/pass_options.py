"""Pass options: the choices of the graph passes that depend on measurement, and where a compile finds them.

Some choices of the pass pipeline cannot be settled by the passes alone: the block ``b`` of the layout pass's
NCHW[b]c (or no layout change at all), and whether the fusion pass reads a reduction's elementwise producer inside
the reduction (rule 2 of `passes/fusion.py`). They are *pass options*, a small dict:

==================  ===========================================================================================
option              meaning
==================  ===========================================================================================
``layout_block``    the layout pass's channel block (2, 4, 8, 16, 32 or 64); 0 turns the layout pass off;
                    absent: the vector width in f32 lanes (16 with AVX-512, 8 with AVX2)
``fuse_reductions`` False: a reduction never takes in its elementwise producer (each runs as its own kernel);
                    absent or True: the fusion pass's rule 2 applies
``winograd``        False: no convolution becomes Winograd F(2x2, 3x3); absent or True: the winograd pass
                    rewrites the 3x3 convolutions it finds worth it (`passes/winograd.py`)
==================  ===========================================================================================

Model tuning (``tensorlang tune-model``) measures the model end to end under each distinct variant and stores the
fastest in the tuning database, under the model's :func:`graph_key` (a hash of the imported graph before any pass:
ops, attrs, shapes, dtypes and how values connect, not the weights, the model's name or its Python lines), the
target CPU and the thread count. ``compile_graph`` (and so ``tl.from_torch``, ``tl.from_exported`` and ``tensorlang
compile``) asks the registered *pass option sources* for that key when the caller chose no passes, skip list or
options itself, as ``tl.build`` asks its schedule sources. The core cannot read the tuning database (it sits on the
floor above), so the tuner registers a source through the entry point group ``tensorlang.pass_options`` (its own:
``tuned = "tensorlang.tuner.model.variants:tuned_pass_options"``) or :func:`register_pass_option_source`.

>>> check_pass_options({"layout_block": 8, "fuse_reductions": False})
{'layout_block': 8, 'fuse_reductions': False}
>>> describe_pass_options({"layout_block": 0})
'layout off, fuse reductions'
"""
from __future__ import annotations

import hashlib
import json

from ..errors import UsageError
from ..sources import SourceRegistry

ENTRY_POINT_GROUP = "tensorlang.pass_options"
#: the options and what each holds
OPTIONS = {"layout_block": "the layout pass's block (2 to 64, a power of two), 0: no layout pass",
           "fuse_reductions": "whether a reduction takes in its elementwise producer (True or False)",
           "winograd": "whether 3x3 convolutions may become Winograd F(2x2, 3x3) (True or False)"}
LAYOUT_BLOCKS = (2, 4, 8, 16, 32, 64)

_REGISTRY = SourceRegistry("pass option source", ENTRY_POINT_GROUP)


def check_pass_options(options) -> dict:
    """`options` checked (a dict of the keys of :data:`OPTIONS` with legal values); returns a copy, or a UsageError
    that names the option and the legal values.

    >>> check_pass_options({"layout_block": 12})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tensorlang.errors.UsageError: pass option layout_block=12: choose 0 (no layout pass) or a block of 2, 4, ...
    """
    if not isinstance(options, dict):
        raise UsageError(f"pass options must be a dict like {{'layout_block': 8}}, got {type(options).__name__}")
    out = {}
    for k, v in options.items():
        if k not in OPTIONS:
            raise UsageError(f"unknown pass option {k!r}; options: {', '.join(OPTIONS)}")
        if k == "layout_block":
            if isinstance(v, bool) or not isinstance(v, int) or (v != 0 and v not in LAYOUT_BLOCKS):
                raise UsageError(f"pass option layout_block={v!r}: choose 0 (no layout pass) or a block of "
                                 f"{', '.join(map(str, LAYOUT_BLOCKS))}")
        elif not isinstance(v, bool):
            raise UsageError(f"pass option {k}={v!r}: must be True or False")
        out[k] = v
    return out


def describe_pass_options(options: dict | None) -> str:
    """A short text of pass options, as `tensorlang tune-model` and `tensorlang compile` print them.

    >>> describe_pass_options({}), describe_pass_options({"layout_block": 16, "fuse_reductions": False})
    ('layout NCHW[vector width]c, fuse reductions', 'layout NCHW16c, reductions apart')
    """
    options = options or {}
    b = options.get("layout_block")
    layout = "layout off" if b == 0 else f"layout NCHW{b}c" if b else "layout NCHW[vector width]c"
    return (layout + (", reductions apart" if options.get("fuse_reductions") is False else ", fuse reductions")
            + (", no Winograd" if options.get("winograd") is False else ""))


def graph_key(graph) -> str:
    """16 hex digits of a hash of an imported graph (before the passes): its ops, attrs, value shapes and dtypes,
    constants' shapes and dtypes, and how values connect; not the weights, the graph's name, or the Python lines
    nodes came from. The same network exported twice (or saved as .pt2 and loaded) has the same key.

    >>> from tensorlang.graph.ir import Graph, TensorType
    >>> g = Graph("a"); x = g.add_input("x", TensorType((2,), "f32")); g.outputs = [x]
    >>> h = Graph("b"); y = h.add_input("x", TensorType((2,), "f32")); h.outputs = [y]
    >>> graph_key(g) == graph_key(h)
    True
    """
    from .serialize import graph_to_json

    def strip(data: dict) -> dict:
        data = dict(data, name="")
        nodes = []
        for n in data["nodes"]:
            n = {k: v for k, v in n.items() if k != "source"}
            if "body" in n:
                n["body"] = strip(n["body"])
            nodes.append(n)
        data["nodes"] = nodes
        return data
    text = json.dumps(strip(graph_to_json(graph)), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def register_pass_option_source(name: str, fn) -> None:
    """Add (or replace) a pass option source: ``fn(graph_key, *, threads) -> dict | None``.

    >>> register_pass_option_source("never", lambda key, **kw: None)
    >>> "never" in sources()
    True
    >>> unregister_pass_option_source("never")
    """
    _REGISTRY.register(name, fn, "register_pass_option_source")


def unregister_pass_option_source(name: str) -> None:
    """Remove a source added by :func:`register_pass_option_source` (nothing if there is none).

    >>> unregister_pass_option_source("no such source")
    """
    _REGISTRY.unregister(name)


def sources() -> dict:
    """The pass option sources, name -> function, in the order they are asked (by name).

    >>> isinstance(sources(), dict)
    True
    """
    return _REGISTRY.sources()


def choose_pass_options(key: str, threads: int | None = None) -> tuple[dict, str]:
    """The pass options a compile of the graph with key `key` uses when its caller chose none, and where they came
    from: the first source that knows the key (its name, as "tuned"), else ``({}, "default")``.

    >>> choose_pass_options("0000000000000000", threads=1)
    ({}, 'default')
    """
    from ..threadpool import num_threads
    threads = threads or num_threads()
    for name, fn in sources().items():
        found = fn(key, threads=threads)
        if found is not None:
            try:
                return check_pass_options(found), name
            except UsageError as e:
                raise UsageError(f"pass option source {name!r} answered bad options for graph {key}: {e}") from None
    return {}, "default"
