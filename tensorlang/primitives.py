"""Schedule primitives as data: small frozen dataclasses, one per primitive, with a JSON form.

A `Schedule` is a list of these, replayed in order onto a fresh program. Each record names its stage
and its loops, so a schedule prints as the Python calls that rebuild it and round-trips through JSON.

>>> p = Split("C", "m", 32, "m_o", "m_i")
>>> p.to_python()
's["C"].split("m", 32, outer="m_o", inner="m_i")'
>>> from_json(p.to_json()) == p
True
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .errors import ScheduleError


@dataclass(frozen=True)
class Primitive:
    """Base class: every primitive applies to one stage."""

    stage: str

    NAME = ""

    def to_json(self) -> dict:
        """{"prim": name, field: value, ...} with lists for tuples."""
        out: dict[str, Any] = {"prim": self.NAME}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            out[f.name] = list(v) if isinstance(v, tuple) else v
        return out

    def to_python(self) -> str:
        """The Python call that applies this primitive to a schedule `s`."""
        raise NotImplementedError


def _q(x) -> str:
    return repr(x).replace("'", '"')


@dataclass(frozen=True)
class Split(Primitive):
    """Split loop `axis` by `factor` into `outer` (extent ceil(E/factor)) and `inner` (extent factor)."""

    axis: str
    factor: int
    outer: str
    inner: str
    NAME = "split"

    def to_python(self):
        """The Python call that redoes this primitive, e.g. ``s["C"].split("m", 32, outer="m_o", inner="m_i")``."""
        return (f"s[{_q(self.stage)}].split({_q(self.axis)}, {self.factor}, outer={_q(self.outer)}, "
                f"inner={_q(self.inner)})")


@dataclass(frozen=True)
class Reorder(Primitive):
    """Put the named loops in this order, in the positions they occupy."""

    axes: tuple
    NAME = "reorder"

    def to_python(self):
        """The Python call that redoes this primitive, e.g. ``s["C"].reorder("k", "m")``."""
        return f"s[{_q(self.stage)}].reorder({', '.join(_q(a) for a in self.axes)})"


@dataclass(frozen=True)
class Fuse(Primitive):
    """Fuse adjacent loops `outer` and `inner` into one loop `fused`."""

    outer: str
    inner: str
    fused: str
    NAME = "fuse"

    def to_python(self):
        """The Python call that redoes this primitive, e.g. ``s["C"].fuse("m", "n", fused="m_n")``."""
        return f"s[{_q(self.stage)}].fuse({_q(self.outer)}, {_q(self.inner)}, fused={_q(self.fused)})"


@dataclass(frozen=True)
class Annotate(Primitive):
    """Mark loop `axis` as vectorized, unrolled, parallel or serial."""

    axis: str
    kind: str
    NAME = "annotate"

    @property
    def verb(self) -> str:
        """The schedule method that made it: vectorize, unroll, parallel or serial."""
        return {"vectorized": "vectorize", "unrolled": "unroll"}.get(self.kind, self.kind)

    def to_python(self):
        """The Python call that redoes this primitive, e.g. ``s["C"].vectorize("n_i")``."""
        return f"s[{_q(self.stage)}].{self.verb}({_q(self.axis)})"


@dataclass(frozen=True)
class ComputeAt(Primitive):
    """Compute this (producer) stage inside loop `axis` of stage `consumer`, for the region that loop needs."""

    consumer: str
    axis: str
    NAME = "compute_at"

    def to_python(self):
        """The Python call that redoes this primitive, e.g. ``s["P"].compute_at(s["O"], "h")``."""
        return f"s[{_q(self.stage)}].compute_at(s[{_q(self.consumer)}], {_q(self.axis)})"


@dataclass(frozen=True)
class ComputeInline(Primitive):
    """Substitute this (pure) stage's expression into every read of it; it gets no buffer."""

    NAME = "compute_inline"

    def to_python(self):
        """The Python call that redoes this primitive, e.g. ``s["T"].compute_inline()``."""
        return f"s[{_q(self.stage)}].compute_inline()"


@dataclass(frozen=True)
class ReverseComputeInline(Primitive):
    """Compute this (elementwise) stage inside the reduction it reads, where each of that stage's elements is
    final: in its cache_write write-back, or right after its reduction loops (TVM's reverse_compute_inline)."""

    NAME = "reverse_compute_inline"

    def to_python(self):
        """The Python call that redoes this primitive, e.g. ``s["Y"].reverse_compute_inline()``."""
        return f"s[{_q(self.stage)}].reverse_compute_inline()"


@dataclass(frozen=True)
class ComputeRoot(Primitive):
    """Compute this stage on its own at the root (the default)."""

    NAME = "compute_root"

    def to_python(self):
        """The Python call that redoes this primitive, e.g. ``s["P"].compute_root()``."""
        return f"s[{_q(self.stage)}].compute_root()"


@dataclass(frozen=True)
class CacheWrite(Primitive):
    """Accumulate the tile of this stage's output that loop `axis` covers in a local buffer, then write it."""

    axis: str
    NAME = "cache_write"

    def to_python(self):
        """The Python call that redoes this primitive, e.g. ``s["C"].cache_write("n_o")``."""
        return f"s[{_q(self.stage)}].cache_write({_q(self.axis)})"


@dataclass(frozen=True)
class CacheRead(Primitive):
    """Copy the part of `tensor` this stage reads inside loop `axis` into a contiguous local buffer.

    `layout` blocks and orders the local buffer: a tuple of (dimension, block) pairs, outermost first; a block
    of 0 means the whole dimension. `((1, 0), (0, 0))` stores a 2-D tile transposed; `((1, 16), (0, 0), (1, 0))`
    stores it in panels 16 wide (dimension 1 split in 16s, its inner part innermost).
    """

    tensor: str
    axis: str
    layout: tuple = ()
    NAME = "cache_read"

    def to_python(self):
        """The Python call that redoes this primitive, e.g.
        ``s["C"].cache_read("B", "k_o", layout=((1, 16), (0, 0), (1, 0)))``."""
        extra = f", layout={tuple(tuple(x) for x in self.layout)!r}" if self.layout else ""
        return f"s[{_q(self.stage)}].cache_read({_q(self.tensor)}, {_q(self.axis)}{extra})"


@dataclass(frozen=True)
class RFactor(Primitive):
    """Split this reduction over its reduction loop `axis` into a stage `partial` indexed by that loop too, and a
    combine stage (this one) that reduces the partials over it (see ``StageHandle.rfactor``)."""

    axis: str
    partial: str
    NAME = "rfactor"

    def to_python(self):
        """The Python call that redoes this primitive, e.g. ``s["B"].rfactor("k_o", partial="B_rf")``."""
        return f"s[{_q(self.stage)}].rfactor({_q(self.axis)}, partial={_q(self.partial)})"


@dataclass(frozen=True)
class StoreAt(Primitive):
    """Keep this (computed-at) stage's buffer at loop `axis` of `consumer` (``""``: at the root), outside the loop
    it is computed at, so that each iteration of that loop computes only the part earlier ones did not (a
    sliding window)."""

    consumer: str
    axis: str
    NAME = "store_at"

    def to_python(self):
        """The Python call that redoes this primitive, e.g. ``s["P"].store_at(s["O"], "y")`` or
        ``s["P"].store_root()``."""
        if not self.axis:
            return f"s[{_q(self.stage)}].store_root()"
        return f"s[{_q(self.stage)}].store_at(s[{_q(self.consumer)}], {_q(self.axis)})"


@dataclass(frozen=True)
class FoldStorage(Primitive):
    """Make this (sliding) stage's buffer a ring of `factor` entries along its dimension `dim`, indexed modulo
    `factor`."""

    dim: str
    factor: int
    NAME = "fold_storage"

    def to_python(self):
        """The Python call that redoes this primitive, e.g. ``s["P"].fold_storage("y", 4)``."""
        return f"s[{_q(self.stage)}].fold_storage({_q(self.dim)}, {self.factor})"


PRIMITIVES = {c.NAME: c for c in (Split, Reorder, Fuse, Annotate, ComputeAt, ComputeInline, ComputeRoot,
                                  CacheWrite, CacheRead, ReverseComputeInline, RFactor, StoreAt, FoldStorage)}


def from_json(d: dict) -> Primitive:
    """The primitive a `to_json()` dict describes (lists become tuples); a ScheduleError names what is malformed.

    >>> from_json({"prim": "reorder", "stage": "C", "axes": ["k", "m"]})
    Reorder(stage='C', axes=('k', 'm'))
    >>> from_json({"prim": "split", "stage": "C", "axis": "m"})
    Traceback (most recent call last):
    ...
    tensorlang.errors.ScheduleError: from_json: split lacks factor, outer, inner
    >>> from_json({"prim": "reorder", "stage": "C", "axes": 5})
    Traceback (most recent call last):
    ...
    tensorlang.errors.ScheduleError: from_json: reorder axes must be a list of loop names, got 5
    """
    if not isinstance(d, dict) or d.get("prim") not in PRIMITIVES:
        raise ScheduleError(f"from_json: not a primitive: {d!r} (known: {', '.join(PRIMITIVES)})")
    cls = PRIMITIVES[d["prim"]]
    names = [f.name for f in dataclasses.fields(cls)]
    missing = [n for n in names if n not in d and n != "layout"]
    if missing:
        raise ScheduleError(f"from_json: {d['prim']} lacks {', '.join(missing)}")
    kw = {}
    for n in names:
        if n not in d:
            continue
        v = d[n]
        if n == "layout":  # a list of [dimension, block] pairs (their values are checked when applied)
            if not isinstance(v, list) or not all(isinstance(x, list) for x in v):
                raise ScheduleError(f"from_json: {d['prim']} layout must be a list of [dimension, block] pairs, "
                                    f"got {v!r}")
            v = tuple(tuple(x) for x in v)
        elif n == "axes":
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ScheduleError(f"from_json: {d['prim']} axes must be a list of loop names, got {v!r}")
            v = tuple(v)
        elif n != "factor" and not isinstance(v, str):  # names of stages, loops, tensors, kinds
            raise ScheduleError(f"from_json: {d['prim']} {n} must be a name (a string), got {v!r}")
        kw[n] = v
    return cls(**kw)
