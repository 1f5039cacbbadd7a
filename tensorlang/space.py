"""Search spaces: named knobs with finite value lists, and a function that turns a config into a Schedule.

A *config* is a plain dict ``{knob name: value}`` whose values are JSON scalars, so it goes into the tuning
database as JSON and back unchanged. Every workload in ``schedules/`` declares its space with
``space(sizes) -> Space``; the space's ``apply(s, config)`` uses public schedule primitives only.

Example::

    >>> import tensorlang as tl
    >>> from tensorlang.space import Knob, Space
    >>> def apply(s, cfg):
    ...     _, vi = s["B"].split("i", cfg["vec"])
    ...     s["B"].vectorize(vi)
    >>> op = tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0")
    >>> sp = Space("double", [Knob("vec", (4, 8, 16))], apply)
    >>> sp.size, sp.config_at(2)
    (3, {'vec': 16})
    >>> "# vectorized" in sp.schedule(op, {"N": 64}, {"vec": 16}).lower()
    True
"""
from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tensorlang.errors import UsageError

__all__ = ["Knob", "Space", "config_key", "factors", "vector_registers"]


def vector_registers() -> tuple[int, int]:
    """(f32 lanes per vector register, number of vector registers) of this CPU: (16, 32) with AVX-512,
    (8, 16) with AVX2, else (4, 16). Spaces use it to rule out register tiles that cannot fit.

    Example::

        >>> vector_registers() in {(16, 32), (8, 16), (4, 16)}
        True
    """
    from tensorlang.target import host_target
    bits = host_target().vector_bits()
    return bits // 32, 32 if bits == 512 else 16


@dataclass(frozen=True)
class Knob:
    """One tunable choice: a name, the values it may take (JSON scalars, in a meaningful order) and what it does.

    Example::

        >>> Knob("tile_w", (1, 2, 4), "register tile along w").index(4)
        2
    """

    name: str
    values: tuple
    doc: str = ""

    def __post_init__(self) -> None:
        if not self.values:
            raise UsageError(f"knob {self.name!r} has no values")
        if len(set(map(_scalar_key, self.values))) != len(self.values):
            raise UsageError(f"knob {self.name!r} lists a value twice: {self.values}")
        for v in self.values:
            if not isinstance(v, (int, str, bool, float)) and v is not None:
                raise UsageError(f"knob {self.name!r}: value {v!r} is not a JSON scalar")

    def index(self, value) -> int:
        """The position of ``value`` in this knob's values; UsageError naming the knob and the legal values."""
        for i, v in enumerate(self.values):
            if _scalar_key(v) == _scalar_key(value):
                return i
        raise UsageError(f"knob {self.name!r}: {value!r} is not one of {list(self.values)}")


def _code(f):
    return getattr(f, "__code__", f)


def _scalar_key(v):
    return (type(v).__name__, v)


def config_key(config: dict) -> str:
    """The canonical text of a config (sorted keys, compact): equal configs give equal keys.

    Example::

        >>> config_key({"b": 2, "a": True})
        '{"a":true,"b":2}'
    """
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def factors(n: int, limit: int | None = None, extra: Sequence[int] = ()) -> tuple[int, ...]:
    """Split factors worth trying for a loop of extent ``n``: its divisors and the powers of two below it,
    plus ``extra``, each at most ``limit`` (and at most ``n``), sorted.

    Example::

        >>> factors(56, limit=32)
        (1, 2, 4, 7, 8, 14, 16, 28, 32)
    """
    limit = n if limit is None else min(limit, n)
    out = {d for d in range(1, limit + 1) if n % d == 0}
    p = 1
    while p <= limit:
        out.add(p)
        p *= 2
    out.update(e for e in extra if 1 <= e <= limit)
    return tuple(sorted(out))


class Space:
    """A product of knobs and the function that applies a config to a fresh schedule.

    ``apply(s, config)`` gets a ``tl.Schedule`` and a full config; it may raise ``tl.ScheduleError`` for a
    combination it cannot express (the tuner records that as an error of kind "schedule").
    ``constraint(config) -> bool``, when given, rules configs out before anything is built (say, register
    tiles with more accumulators than the CPU has registers); strategies never propose those.

    Example::

        >>> sp = Space("toy", [Knob("a", (1, 2)), Knob("b", ("x", "y", "z"))], lambda s, c: None)
        >>> sp.size, sp.config_at(5), sp.index_of({"a": 2, "b": "z"})
        (6, {'a': 2, 'b': 'z'}, 5)
    """

    def __init__(self, name: str, knobs: Sequence[Knob], apply: Callable[[object, dict], None],
                 constraint: Callable[[dict], bool] | None = None, constraint_doc: str = ""):
        names = [k.name for k in knobs]
        if len(set(names)) != len(names):
            raise UsageError(f"space {name!r} names a knob twice: {names}")
        self.name = name
        self.knobs: tuple[Knob, ...] = tuple(knobs)
        self._apply = apply
        self.constraint = constraint
        self.constraint_doc = constraint_doc
        self._allowed_size: int | None = None

    def same_as(self, other: Space) -> bool:
        """Whether ``other`` has the same name, knobs and apply function (a constraint built again by the same
        code counts as the same), so that both schedule every config alike.

        Example::

            >>> def apply(s, c):
            ...     pass
            >>> def make():
            ...     return Space("t", [Knob("x", (1, 2))], apply, lambda c: True)
            >>> make().same_as(make())
            True
            >>> make().same_as(Space("t", [Knob("x", (1, 2))], lambda s, c: None))
            False
        """
        return (self.name == other.name and self.knobs == other.knobs and self._apply is other._apply
                and _code(self.constraint) is _code(other.constraint))

    def allowed(self, config: dict) -> bool:
        """Whether the space's constraint admits ``config`` (True when there is no constraint)."""
        return self.constraint is None or bool(self.constraint(config))

    @property
    def allowed_size(self) -> int:
        """The number of configs the constraint admits (counted once, by enumeration up to 2 million configs;
        beyond that, estimated from 100,000 seeded random draws)."""
        if self._allowed_size is None:
            if self.constraint is None:
                self._allowed_size = self.size
            elif self.size <= 2_000_000:
                self._allowed_size = sum(self.allowed(self.config_at(i)) for i in range(self.size))
            else:
                rng = np.random.default_rng(0)
                hits = sum(self.allowed(self.random(rng)) for _ in range(100_000))
                self._allowed_size = max(1, round(self.size * hits / 100_000))
        return self._allowed_size

    @property
    def size(self) -> int:
        """The number of configs (the product of the knobs' value counts)."""
        n = 1
        for k in self.knobs:
            n *= len(k.values)
        return n

    def knob(self, name: str) -> Knob:
        """The knob called ``name``; UsageError listing the knobs when there is none."""
        for k in self.knobs:
            if k.name == name:
                return k
        raise UsageError(f"space {self.name!r} has no knob {name!r}; knobs: {', '.join(k.name for k in self.knobs)}")

    def validate(self, config: dict) -> dict:
        """Check that ``config`` sets every knob to one of its values and nothing else; return it.

        Example::

            >>> Space("toy", [Knob("a", (1, 2))], lambda s, c: None).validate({"a": 3})
            Traceback (most recent call last):
            ...
            tensorlang.errors.UsageError: knob 'a': 3 is not one of [1, 2]
        """
        if not isinstance(config, dict):
            raise UsageError(f"space {self.name!r}: a config is a dict of knob values, got {type(config).__name__}")
        unknown = set(config) - {k.name for k in self.knobs}
        if unknown:
            raise UsageError(f"space {self.name!r} has no knob {sorted(unknown)[0]!r}; "
                             f"knobs: {', '.join(k.name for k in self.knobs)}")
        for k in self.knobs:
            if k.name not in config:
                raise UsageError(f"space {self.name!r}: the config does not set knob {k.name!r}")
            k.index(config[k.name])
        return config

    def config_at(self, index: int) -> dict:
        """The config at position ``index`` of the space (mixed radix; the last knob varies fastest)."""
        if not 0 <= index < self.size:
            raise UsageError(f"space {self.name!r}: index {index} is outside 0..{self.size - 1}")
        out = {}
        for k in reversed(self.knobs):
            index, i = divmod(index, len(k.values))
            out[k.name] = k.values[i]
        return {k.name: out[k.name] for k in self.knobs}

    def index_of(self, config: dict) -> int:
        """The position of ``config`` in the space (inverse of :meth:`config_at`)."""
        index = 0
        for k in self.knobs:
            index = index * len(k.values) + k.index(config[k.name])
        return index

    def encode(self, config: dict) -> np.ndarray:
        """The config as a vector of value positions, one per knob (for genetic operators and models)."""
        return np.array([k.index(config[k.name]) for k in self.knobs], dtype=np.int64)

    def decode(self, positions: Sequence[int]) -> dict:
        """The config whose value positions are ``positions`` (inverse of :meth:`encode`)."""
        return {k.name: k.values[int(i)] for k, i in zip(self.knobs, positions)}

    def allowed_configs(self):
        """Every config the constraint admits, in the space's order (a generator)."""
        for i in range(self.size):
            c = self.config_at(i)
            if self.allowed(c):
                yield c

    def canonical(self, config: dict) -> dict:
        """The config that stands for every config scheduling alike: ``config`` itself here (every knob of a
        hand-written space matters); a generated space resets knobs the config leaves unused.

        Example::

            >>> Space("toy", [Knob("a", (1, 2))], lambda s, c: None).canonical({"a": 2})
            {'a': 2}
        """
        return config

    def structural_knobs(self) -> tuple[tuple[str, ...], ...]:
        """Groups of the knobs that set a config's loop structure (its sketch and register tile), which search
        also moves one knob at a time (``tensorlang.tuner.search.strategies.ModelGuidedGenetic``): none here (every knob
        of a hand-written space is the genetic search's); a generated space names its placements, vector variables and
        widths, and its register tiles.

        Example::

            >>> Space("toy", [Knob("a", (1, 2))], lambda s, c: None).structural_knobs()
            ()
        """
        return ()

    def nearest(self, config: dict, exclude: set[str]) -> dict | None:
        """The allowed config that stands in for ``config`` when the constraint rules it out: None here (the
        config is simply not measured); a replay space answers with the nearest config of its table."""
        return None

    def random(self, rng: np.random.Generator) -> dict:
        """A uniformly random config drawn with ``rng``."""
        return {k.name: k.values[int(rng.integers(len(k.values)))] for k in self.knobs}

    def schedule(self, op, sizes: dict, config: dict):
        """A fresh ``tl.Schedule`` of ``op`` at ``sizes`` with ``config`` applied (ScheduleError if it cannot be)."""
        import tensorlang as tl
        s = tl.schedule(op, **sizes)
        self._apply(s, self.validate(config))
        return s

    def describe(self) -> str:
        """One line per knob: its name, its values and what it does."""
        lines = [f"space {self.name}: {self.size:,} configs"]
        if self.constraint is not None:
            lines[0] += f", {self.allowed_size:,} allowed"
            if self.constraint_doc:
                lines[0] += f" ({self.constraint_doc})"
        for k in self.knobs:
            lines.append(f"  {k.name:<14} {list(k.values)}" + (f"  {k.doc}" if k.doc else ""))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Space({self.name!r}, {len(self.knobs)} knobs, {self.size} configs)"
