"""Random programs for performance: the generator the tests use for correctness (``progen``), its programs' sizes
scaled up until the largest stage runs at least 10^6 iterations (every size multiplied by the same factor; the
padding and stride parameters kept). A program is skipped, and counted by reason, when the DSL or the compiler
rejects it, when the generator's own evaluator finds it numerically fragile at its drawn sizes, or when no factor
reaches the mark within the limits (its dimensions are literals, or a tensor or the total work would be too large).
The programs have no library formulation: their figures are the zero-trial pick against tuning.

Example::

    programs, skipped = draw(2, seed=0, min_points=1e4)
    [p.name for p in programs]   # e.g. ['r0-0', 'r0-2']
"""
from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter

import tensorlang as tl

from .common import Program, load_progen

ORIGIN = "tests' random program generator (progen), sizes scaled"
#: The factors tried, smallest first.
FACTORS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 4096)
#: Limits of a scaled program: elements of one tensor, iteration points of all stages together.
MAX_ELEMENTS = 1 << 25
MAX_POINTS = 2e8

#: Nothing of the generator's language is left out here.
NOT_WRITTEN: dict = {}


def points(op, sizes: dict) -> tuple[int, int, int]:
    """(iteration points of the largest stage, of all stages, elements of the largest tensor) of ``op`` at
    ``sizes``.

    >>> points(tl.op("def f(A: f32[N, M]) -> B:\\n    B[i] += A[i, j]"), {"N": 3, "M": 4})
    (12, 12, 12)
    """
    bound = tl.reference(op, **sizes).bound
    per = [math.prod(ext for _, ext in bs.ranges.values()) for bs in bound.stages.values()]
    return max(per), sum(per), max(math.prod(s) for s in bound.shapes.values())


def scaled_sizes(op, env: dict, params: list, min_points: float) -> dict | None:
    """The sizes of ``env`` times the smallest factor of :data:`FACTORS` that gives a stage ``min_points``
    iterations (``params``, the padding and stride parameters, kept), or None where none does within the limits.

    >>> op = tl.op("def f(A: f32[N, M]) -> B:\\n    B[i] += A[i, j]")
    >>> scaled_sizes(op, {"N": 3, "M": 4}, [], 1000)
    {'N': 36, 'M': 48}
    """
    for f in FACTORS:
        sizes = {k: v if k in params else v * f for k, v in env.items()}
        try:
            most, total, largest = points(op, sizes)
        except tl.TensorlangError:
            return None
        if largest > MAX_ELEMENTS or total > MAX_POINTS:
            return None
        if most >= min_points:
            return sizes
    return None


def _generated(seed: int):
    """The generator's programs from ``seed``, in order (the k-th is the program ``r{seed}-{k}``)."""
    progen = load_progen()
    rnd = random.Random(seed)
    while True:
        yield progen.generate(progen.Src.from_random(random.Random(rnd.randrange(1 << 32))))


def generated(name: str):
    """The generator's program behind the random program ``name`` (``r{seed}-{k}``), at its drawn sizes: its
    ``evaluate`` is the generator's own numpy evaluator.

    >>> p = draw(1, seed=0, build=False)[0][0]
    >>> generated(p.name).text == p.source
    True
    """
    seed, k = (int(x) for x in name[1:].split("-"))
    for i, prog in enumerate(_generated(seed)):
        if i == k:
            return prog


def _program(name: str, prog, sizes: dict, op) -> Program:
    progen = load_progen()

    def inputs(at, rng):
        seed = int(rng.integers(1 << 31))
        arrays = progen.make_inputs(dataclasses.replace(prog, env=dict(at)), seed)
        return [arrays[p] for p in op.inputs]

    return Program(name, "random", prog.text, sizes, dict(prog.env),
                   reference=lambda *ins, **at: tl.reference(op, **at)(*ins), inputs=inputs,
                   what=f"a random program of {len(prog.stages)} stage{'s' * (len(prog.stages) > 1)}", origin=ORIGIN)


def draw(count: int, seed: int = 0, min_points: float = 1e6, build: bool = True,
         max_draws: int | None = None) -> tuple[list[Program], Counter]:
    """``count`` random programs scaled to ``min_points`` iterations (see the module docstring), from ``seed``: the
    programs (named ``r{seed}-{k}`` for the k-th draw) and the reasons the others were skipped. With ``build``, a
    program whose zero-trial pick the compiler refuses at the scaled sizes is skipped too.

    Example::

        programs, skipped = draw(300, seed=0)
        skipped.most_common()   # e.g. [('no size reaches 1e6 iterations within the limits', 41), ...]
    """
    progen = load_progen()
    programs: list[Program] = []
    skipped: Counter = Counter()
    max_draws = max_draws or 50 * count
    for k, prog in zip(range(max_draws), _generated(seed)):
        if len(programs) >= count:
            break
        try:
            op = tl.op(prog.text)
        except tl.TensorlangError:
            skipped["rejected by the DSL"] += 1
            continue
        try:
            prog.evaluate(progen.make_inputs(prog, 0))
        except progen.Reject:
            skipped["numerically fragile (the generator's evaluator)"] += 1
            continue
        sizes = scaled_sizes(op, prog.env, prog.params, min_points)
        if sizes is None:
            skipped[f"no size reaches {min_points:g} iterations within the limits"] += 1
            continue
        if build:
            try:
                tl.build(op, schedule="auto", **sizes)
            except tl.TensorlangError:
                skipped["rejected by the compiler"] += 1
                continue
            except Exception as e:  # a compiler bug: counted by its kind, the suite goes on
                skipped[f"the compiler failed ({type(e).__name__})"] += 1
                continue
        programs.append(_program(f"r{seed}-{k}", prog, sizes, op))
    return programs, skipped
