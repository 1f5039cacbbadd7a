"""Affine index expressions for the programs the graph compiler writes, and how an index moves through a reshape.

Every value lives in a dense row-major buffer, so a reshape never moves data: it only changes how an index is
written. Reading a tensor of shape [12, 64] through a view [768] takes the merged index ``64*a + b`` (always
affine); reading [768] as [12, 64] splits an index, which is affine only when the index expression already has
the form ``64*q + r`` with ``0 <= r < 64`` (as it does after a merge). `reshape_index` does both, and raises
`NotAffine` when the DSL's affine indices cannot express the read.

>>> a, b = Aff.var("a"), Aff.var("b")
>>> str(a * 64 + b - 1)
'64*a + b - 1'
>>> [str(e) for e in reshape_index([a, b], (12, 64), (768,), {"a": 12, "b": 64})]
['64*a + b']
>>> [str(e) for e in reshape_index([a * 64 + b], (768,), (12, 64), {"a": 12, "b": 64})]
['a', 'b']
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass


class NotAffine(Exception):
    """An index the DSL cannot write with affine expressions (a reshape that would need a division)."""


@dataclass(frozen=True)
class Aff:
    """sum(coefficient * variable) + constant, with integer coefficients; variables range over 0:extent.

    >>> str(Aff.var("h") * 2 + Aff.const(3))
    '2*h + 3'
    """

    terms: tuple[tuple[str, int], ...] = ()
    const: int = 0

    @staticmethod
    def var(name: str) -> Aff:
        """The index variable `name`."""
        return Aff(((name, 1),), 0)

    @staticmethod
    def const_(value: int) -> Aff:
        """A constant index (also available as `Aff.const(value)`)."""
        return Aff((), int(value))

    def __add__(self, other) -> Aff:
        if isinstance(other, int):
            return Aff(self.terms, self.const + other)
        d = dict(self.terms)
        for v, c in other.terms:
            d[v] = d.get(v, 0) + c
        return Aff(tuple(sorted((v, c) for v, c in d.items() if c)), self.const + other.const)

    __radd__ = __add__

    def __neg__(self) -> Aff:
        return Aff(tuple((v, -c) for v, c in self.terms), -self.const)

    def __sub__(self, other) -> Aff:
        return self + (-other if isinstance(other, Aff) else -int(other))

    def __mul__(self, k: int) -> Aff:
        k = int(k)
        if k == 0:
            return Aff()
        return Aff(tuple((v, c * k) for v, c in self.terms), self.const * k)

    __rmul__ = __mul__

    def is_const(self) -> bool:
        """Whether no variable appears."""
        return not self.terms

    def bounds(self, ranges: dict[str, int]) -> tuple[int, int]:
        """The smallest and largest value over every variable in 0:ranges[var].

        >>> (Aff.var("i") * -2 + 5).bounds({"i": 3})
        (1, 5)
        """
        lo = hi = self.const
        for v, c in self.terms:
            top = c * (ranges[v] - 1)
            lo += min(0, top)
            hi += max(0, top)
        return lo, hi

    def __str__(self) -> str:
        parts = []
        for v, c in self.terms:
            parts.append(v if c == 1 else f"-{v}" if c == -1 else f"{c}*{v}")
        if self.const or not parts:
            parts.append(str(self.const))
        text = parts[0]
        for p in parts[1:]:
            text += f" - {p[1:]}" if p.startswith("-") else f" + {p}"
        return text


Aff.const = staticmethod(Aff.const_)  # type: ignore[assignment]  # Aff.const(3); instances keep their field


def divmod_aff(e: Aff, d: int, ranges: dict[str, int]) -> tuple[Aff, Aff] | None:
    """(q, r) with e == d*q + r and 0 <= r < d for every value of the variables, or None when the coefficients
    do not split that way.

    >>> q, r = divmod_aff(Aff.var("a") * 64 + Aff.var("b"), 64, {"a": 12, "b": 64})
    >>> str(q), str(r)
    ('a', 'b')
    >>> divmod_aff(Aff.var("i"), 4, {"i": 8}) is None
    True
    """
    if d == 1:
        return e, Aff()
    q_terms, r_terms = [], []
    for v, c in e.terms:
        if ranges.get(v, 2) == 1:
            continue  # a variable over 0:1 is always 0
        qc, rc = divmod(c, d)
        if qc:
            q_terms.append((v, qc))
        if rc:
            r_terms.append((v, rc))
    qc, rc = divmod(e.const, d)
    q, r = Aff(tuple(q_terms), qc), Aff(tuple(r_terms), rc)
    lo, hi = r.bounds(ranges)
    if lo < 0 or hi >= d:
        return None
    return q, r


def divmod_exact(e: Aff, d: int, ranges: dict[str, int]) -> tuple[Aff, Aff]:
    """`divmod_aff` of an index that splits by construction (a stage declared over a shape split by d).

    >>> q, r = divmod_exact(Aff.var("a") * 4 + Aff.var("b"), 4, {"a": 3, "b": 4})
    >>> str(q), str(r)
    ('a', 'b')
    """
    qr = divmod_aff(e, d, ranges)
    assert qr is not None, f"{e} does not split by {d}"
    return qr


def strides(shape) -> list[int]:
    """Row-major strides of `shape`, in elements.

    >>> strides((2, 3, 4))
    [12, 4, 1]
    """
    out, s = [], 1
    for n in reversed(tuple(shape)):
        out.append(s)
        s *= n
    return out[::-1]


def reshape_index(idx, from_shape, to_shape, ranges: dict[str, int]) -> list[Aff]:
    """The index into `to_shape` of the element at `idx` of `from_shape` (same element count, row-major), or
    NotAffine.

    >>> i = Aff.var("i")
    >>> [str(e) for e in reshape_index([Aff.const(0), i], (1, 5), (5,), {"i": 5})]
    ['i']
    """
    from_shape, to_shape = tuple(from_shape), tuple(to_shape)
    if from_shape == to_shape:
        return list(idx)
    flat = Aff()
    for e, s in zip(idx, strides(from_shape)):
        flat = flat + e * s
    out: list[Aff] = []
    for size in reversed(to_shape[1:]):
        qr = divmod_aff(flat, size, ranges)
        if qr is None:
            raise NotAffine(f"an index of a {list(from_shape)} tensor read as {list(to_shape)} needs a division")
        flat, r = qr
        out.append(r)
    if to_shape:
        lo, hi = flat.bounds(ranges)
        if lo < 0 or hi >= to_shape[0]:
            raise NotAffine(f"an index of a {list(from_shape)} tensor read as {list(to_shape)} needs a division")
        out.append(flat)
    return out[::-1]


def refine(a, b) -> tuple[int, ...] | None:
    """The coarsest shape that both `a` and `b` (same element count) are merges of, or None (as [4, 6] and [6, 4]:
    no shape splits into both).

    >>> refine((4, 6), (8, 3)), refine((2, 6), (2, 2, 3)), refine((4, 6), (6, 4))
    ((4, 2, 3), (2, 2, 3), None)
    """
    def cuts(shape):
        out, s = set(), 1
        for n in reversed(tuple(shape)):
            s *= n
            out.add(s)
        return out
    total = 1
    for n in a:
        total *= n
    points = sorted(cuts(a) | cuts(b) | {1})
    for lo, hi in itertools.pairwise(points):
        if hi % lo:
            return None
    dims = [hi // lo for lo, hi in itertools.pairwise(points)][::-1]
    return tuple(dims) if dims else ((1,) if total == 1 and (a or b) else ())
