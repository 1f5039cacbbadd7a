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

    def __str__(self) -> str:
        return self.name


DTYPES: dict[str, DType] = {
    "f32": DType("f32", np.dtype(np.float32), 4, True),
    "f64": DType("f64", np.dtype(np.float64), 8, True),
    "i32": DType("i32", np.dtype(np.int32), 4, False),
    "i64": DType("i64", np.dtype(np.int64), 8, False),
    "bool": DType("bool", np.dtype(np.bool_), 1, False),
}

#: dtypes a user may declare for a tensor in the DSL (bool: numpy's bool_, one byte of 0 or 1).
TENSOR_DTYPES = ("f32", "f64", "i32", "i64", "bool")
