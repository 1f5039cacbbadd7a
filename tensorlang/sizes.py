"""Size polynomials: integer expressions over the size symbols of a program (N, H + 2*pad, h*stride).

A `SizePoly` is a canonical sum of monomials, so two sizes are equal exactly when their polynomials are.

>>> H, pad = SizePoly.symbol("H"), SizePoly.symbol("pad")
>>> str(H + pad * 2)
'H + 2*pad'
>>> (H + pad * 2).evaluate({"H": 56, "pad": 1})
58
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SizePoly:
    """A polynomial with integer coefficients over size symbols; terms map sorted symbol tuples to coefficients."""

    terms: tuple[tuple[tuple[str, ...], int], ...] = ()

    @staticmethod
    def const(value: int) -> SizePoly:
        """The constant polynomial `value`.

        >>> SizePoly.const(3).constant_value()
        3
        """
        return SizePoly._make({(): value})

    @staticmethod
    def symbol(name: str) -> SizePoly:
        """The polynomial made of one size symbol.

        >>> SizePoly.symbol("N").symbols()
        {'N'}
        """
        return SizePoly._make({(name,): 1})

    @staticmethod
    def _make(d: dict) -> SizePoly:
        return SizePoly(tuple(sorted((k, v) for k, v in d.items() if v != 0)))

    def _dict(self) -> dict:
        return dict(self.terms)

    def __add__(self, other: SizePoly | int) -> SizePoly:
        other = _lift(other)
        d = self._dict()
        for k, v in other.terms:
            d[k] = d.get(k, 0) + v
        return SizePoly._make(d)

    __radd__ = __add__

    def __neg__(self) -> SizePoly:
        return SizePoly(tuple((k, -v) for k, v in self.terms))

    def __sub__(self, other: SizePoly | int) -> SizePoly:
        return self + (-_lift(other))

    def __rsub__(self, other: SizePoly | int) -> SizePoly:
        return _lift(other) - self

    def __mul__(self, other: SizePoly | int) -> SizePoly:
        other = _lift(other)
        d: dict = {}
        for k1, v1 in self.terms:
            for k2, v2 in other.terms:
                k = tuple(sorted(k1 + k2))
                d[k] = d.get(k, 0) + v1 * v2
        return SizePoly._make(d)

    __rmul__ = __mul__

    def is_constant(self) -> bool:
        """True when no symbol occurs."""
        return all(k == () for k, _ in self.terms)

    def constant_value(self) -> int:
        """The value of a constant polynomial (0 for the empty one)."""
        assert self.is_constant()
        return self.terms[0][1] if self.terms else 0

    def symbols(self) -> set[str]:
        """The size symbols that occur."""
        return {s for k, _ in self.terms for s in k}

    def evaluate(self, sizes: dict[str, int]) -> int:
        """The integer value for bound sizes."""
        total = 0
        for k, v in self.terms:
            term = v
            for s in k:
                term *= sizes[s]
            total += term
        return total

    def __str__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for k, v in sorted(self.terms, key=lambda kv: (len(kv[0]) == 0, kv[0])):
            body = "*".join(k)
            if not body:
                text = str(abs(v))
            elif abs(v) == 1:
                text = body
            else:
                text = f"{abs(v)}*{body}"
            parts.append(("-" if v < 0 else "+", text))
        first_sign, first = parts[0]
        out = ("-" if first_sign == "-" else "") + first
        for sign, text in parts[1:]:
            out += f" {sign} {text}"
        return out


def _lift(x: SizePoly | int) -> SizePoly:
    return x if isinstance(x, SizePoly) else SizePoly.const(int(x))
