"""The element types of the DSL and how each maps to numpy and LLVM."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class DType:
    """One element type: its DSL name, numpy dtype, size and kind.

    >>> DTYPES["f32"].itemsize
    4
    """

    name: str
    numpy: np.dtype
    itemsize: int
    is_float: bool

    def identity(self, reduce_op: str):
        """The identity of a reduction: 0 for +, 1 for *, the lowest value for max, the highest for min.

        >>> DTYPES["f32"].identity("max")
        -inf
        """
        if reduce_op == "+":
            return 0.0 if self.is_float else 0
        if reduce_op == "*":
            return 1.0 if self.is_float else 1
        if self.is_float:
            return -math.inf if reduce_op == "max" else math.inf
        info = np.iinfo(self.numpy)
        return int(info.min) if reduce_op == "max" else int(info.max)

    @property
    def is_int(self) -> bool:
        """Whether this is an integer type (signed or unsigned; not bool, not a float).

        >>> DTYPES["u8"].is_int, DTYPES["bool"].is_int
        (True, False)
        """
        return self.numpy.kind in "iu"

    @property
    def is_unsigned(self) -> bool:
        """Whether this is an unsigned integer type: its comparisons, division, max/min and widening are unsigned.

        >>> DTYPES["u16"].is_unsigned, DTYPES["i16"].is_unsigned
        (True, False)
        """
        return self.numpy.kind == "u"

    @property
    def int_range(self) -> tuple[int, int]:
        """The lowest and highest value of an integer type (bool: 0 and 1).

        >>> DTYPES["u8"].int_range
        (0, 255)
        """
        if self.name == "bool":
            return 0, 1
        info = np.iinfo(self.numpy)
        return int(info.min), int(info.max)

    def __str__(self) -> str:
        return self.name


DTYPES: dict[str, DType] = {
    "f32": DType("f32", np.dtype(np.float32), 4, True),
    "f64": DType("f64", np.dtype(np.float64), 8, True),
    "i32": DType("i32", np.dtype(np.int32), 4, False),
    "i64": DType("i64", np.dtype(np.int64), 8, False),
    "bool": DType("bool", np.dtype(np.bool_), 1, False),
    "u8": DType("u8", np.dtype(np.uint8), 1, False),
    "i8": DType("i8", np.dtype(np.int8), 1, False),
    "u16": DType("u16", np.dtype(np.uint16), 2, False),
    "i16": DType("i16", np.dtype(np.int16), 2, False),
    "u32": DType("u32", np.dtype(np.uint32), 4, False),
    "u64": DType("u64", np.dtype(np.uint64), 8, False),
}

#: dtypes a user may declare for a tensor in the DSL (bool: numpy's bool_, one byte of 0 or 1).
TENSOR_DTYPES = ("f32", "f64", "i32", "i64", "bool", "u8", "i8", "u16", "i16", "u32", "u64")

#: the integer dtypes (each has a saturating cast `sat_<name>(x)` in the DSL).
INT_DTYPES = tuple(n for n, d in DTYPES.items() if d.is_int)
