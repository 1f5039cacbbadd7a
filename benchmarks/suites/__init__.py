"""Benchmark suites from outside the project (issue 57): PolyBench/C 4.2, Ansor's single operators, Halide's
application pipelines (also run through Halide's own auto-schedulers), memory-bound kernels, and random programs of
the tests' generator. Each program is DSL text with its sizes, a numpy reference, its fastest reasonable library
formulation and its work (:class:`suites.common.Program`); ``run.py`` builds, tunes, checks and times them.

Example::

    >>> [len(programs(s)) > 0 for s in STATIC]
    [True, True, True, True]
    >>> find("polybench", "gemm").sizes
    {'NI': 1000, 'NJ': 1100, 'NK': 1200}
"""
from __future__ import annotations

import importlib

#: Every suite, by the name ``run.py --suites`` takes, and its module.
MODULES = {"polybench": "polybench", "ansor": "ansor", "halide": "halide_apps", "membound": "membound",
           "random": "random_programs"}
#: The suites whose programs are fixed (the random suite's are drawn: ``random_programs.draw``).
STATIC = ("polybench", "ansor", "halide", "membound")


def module(suite: str):
    """The module of ``suite`` (a key of :data:`MODULES`).

    >>> module("membound").TRIAD
    'triad'
    """
    if suite not in MODULES:
        raise KeyError(f"no suite {suite!r}; the suites: {', '.join(MODULES)}")
    return importlib.import_module(f".{MODULES[suite]}", __name__)


def programs(suite: str) -> list:
    """The programs of a fixed suite (one of :data:`STATIC`).

    >>> programs("halide")[0].name
    'blur'
    """
    if suite not in STATIC:
        raise KeyError(f"{suite!r} is not a suite of fixed programs ({', '.join(STATIC)})")
    return module(suite).PROGRAMS


def find(suite: str, name: str):
    """The program ``name`` of the fixed suite ``suite``.

    >>> find("ansor", "GMM-3-b16").sizes
    {'B': 16, 'N': 1024, 'M': 1024, 'K': 1024}
    """
    for p in programs(suite):
        if p.name == name:
            return p
    raise KeyError(f"no program {name!r} in the {suite} suite")


def not_written() -> dict:
    """For each suite, the programs the DSL cannot write yet and why.

    >>> "seidel-2d" in not_written()["polybench"]
    True
    """
    return {suite: dict(module(suite).NOT_WRITTEN) for suite in MODULES}
