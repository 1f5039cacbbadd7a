"""Helpers the op families share: dims, dtypes, broadcasting, numel.

>>> norm_dim(-1, 4), broadcast_shapes((2, 1, 3), (4, 3))
(3, (2, 4, 3))
"""
from __future__ import annotations

from ...errors import UsageError
from ..ir import TensorType

FLOAT = ("f32", "f64")
_RANK = {"bool": 0, "i32": 1, "i64": 2, "f32": 3, "f64": 4}


def fail(node, message: str) -> UsageError:
    """A UsageError about `node` (its op and name, and the user's line when known).

    >>> from tensorlang.graph.ir import Node
    >>> str(fail(Node("relu", [], {}, [], name="relu_1"), "bad"))
    'relu (node relu_1): bad'
    """
    where = f" at {node.source}" if getattr(node, "source", "") else ""
    return UsageError(f"{node.op} (node {node.name}{where}): {message}")


def norm_dim(d: int, rank: int) -> int:
    """A dim in 0..rank-1 (negative counts from the end; a 0-d tensor takes dim 0 or -1).

    >>> norm_dim(-2, 3)
    1
    """
    r = max(rank, 1)
    if not -r <= d < r:
        raise UsageError(f"dim {d} is out of range for a tensor of rank {rank}")
    return d % r


def norm_dims(dims, rank: int) -> list[int]:
    """Sorted distinct dims in 0..rank-1; None or [] means every dim. A 0-d tensor has none (dim 0 or -1 names it).

    >>> norm_dims([-1, 0], 3), norm_dims(None, 2), norm_dims([0], 0)
    ([0, 2], [0, 1], [])
    """
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    dims = sorted({norm_dim(d, rank) for d in dims})
    return dims if rank else []


def numel(shape) -> int:
    """The number of elements of `shape`.

    >>> numel((2, 3, 4)), numel(())
    (24, 1)
    """
    n = 1
    for s in shape:
        n *= s
    return n


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    """numpy's broadcast of shapes, or UsageError.

    >>> broadcast_shapes((3,), (2, 1))
    (2, 3)
    """
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for k in range(rank):
        sizes = {s[len(s) - rank + k] for s in shapes if len(s) - rank + k >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise UsageError(f"shapes {' and '.join(str(list(s)) for s in shapes)} do not broadcast")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def promote(*dtypes: str) -> str:
    """The widest of tensor dtypes (bool < i32 < i64 < f32 < f64).

    >>> promote("i32", "f32"), promote("bool", "bool")
    ('f32', 'bool')
    """
    return max(dtypes, key=lambda d: _RANK[d])


def scalar_dtype(x) -> str:
    """The category of a Python number: 'bool', 'i64' (int) or 'f32' (float, torch's default dtype).

    >>> scalar_dtype(2), scalar_dtype(2.5), scalar_dtype(True)
    ('i64', 'f32', 'bool')
    """
    if isinstance(x, bool):
        return "bool"
    if isinstance(x, int):
        return "i64"
    return "f32"


def result_dtype(tensors: list[str], scalars: list) -> str:
    """torch's type promotion for tensors and Python numbers: numbers count only where their category is higher.

    >>> result_dtype(["i32"], [2.5]), result_dtype(["f64"], [2]), result_dtype(["f32", "f64"], [])
    ('f32', 'f64', 'f64')
    """
    t = promote(*tensors) if tensors else "f32"
    for s in scalars:
        sd = scalar_dtype(s)
        if _category(sd) > _category(t):
            t = "f32" if sd == "f32" else "i64"
    return t


def _category(d: str) -> int:
    return 0 if d == "bool" else 1 if d in ("i32", "i64") else 2


def out(shape, dtype: str) -> list[TensorType]:
    """One output of `shape` and `dtype`.

    >>> out((2,), "f32")
    [f32[2]]
    """
    return [TensorType(tuple(shape), dtype)]


def same_as(k: int = 0):
    """An `infer` that gives the type of input `k`.

    >>> from tensorlang.graph.ir import Node, Value
    >>> same_as(0)(Node("relu", [Value("x", TensorType((2,), "f32"))], {}, []))
    [f32[2]]
    """
    return lambda node: [node.inputs[k].type]


def pairs(v, n: int = 2) -> list[int]:
    """An int or list of ints as a list of `n` (torch's `_pair`).

    >>> pairs(3), pairs([1, 2]), pairs([4])
    ([3, 3], [1, 2], [4, 4])
    """
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    return v * n if len(v) == 1 else v


def as_float(dtype: str) -> str:
    """`dtype` if it is a float type, else f32 (true division, means of integers).

    >>> as_float("i32"), as_float("f64")
    ('f32', 'f64')
    """
    return dtype if dtype in FLOAT else "f32"
