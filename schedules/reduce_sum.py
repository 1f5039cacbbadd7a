"""Row sums ``Y[i] = sum_j X[i, j]`` of a matrix.

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.reduce_sum import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> (X,) = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(X, **sizes).shape
    (24,)
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.transpose import flops, make_inputs  # same input X[M, N]; M*N additions
from tensorlang.schedules.workload import Workload
from tensorlang.space import Knob, Space, factors

SOURCE = """\
def reduce_sum(X: f32[M, N]) -> Y:
    Y[i] += X[i, j]
"""


def reference(X: np.ndarray, **sizes: int) -> np.ndarray:
    """``np.sum(X, axis=1)`` in float64, rounded to float32.

    Example::

        >>> import numpy as np
        >>> reference(np.array([[1, 2, 3], [4, 5, 6]], np.float32)).tolist()
        [6.0, 15.0]
    """
    return np.sum(X.astype(np.float64), axis=1).astype(np.float32)


def space(sizes: dict) -> Space:
    """The tuner's space: a tile of ``ri`` rows by ``vj`` columns, vectorized along the columns (each vector's lanes
    combined into its row's sum) or along the rows (one lane a row, the columns unrolled), the sums accumulated in
    a local buffer or not, and whether the row blocks run in parallel.

    Example::

        >>> space(WORKLOAD.sizes()).size
        280
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> sp = space(sz)
        >>> "# vectorized" in sp.schedule(tl.op(SOURCE), sz, sp.config_at(0)).lower()
        True
    """
    M, N = sizes["M"], sizes["N"]
    knobs = [
        Knob("vec_axis", ("j", "i"), "vectorize the columns of a row (lanes combined) or the rows of the tile"),
        Knob("ri", factors(M, 16), "rows per tile (vectorized or unrolled)"),
        Knob("vj", factors(N, 64), "columns per tile step (vectorized or unrolled)"),
        Knob("cache_write", (True, False), "accumulate the tile's sums in a local buffer (registers)"),
        Knob("parallel", (True, False), "split the row blocks between threads"),
    ]
    return Space("reduce_sum", knobs, apply_config)


def apply_config(s, cfg: dict) -> None:
    """Apply a config of :func:`space` to the schedule ``s`` (public primitives only).

    Example::

        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> s = tl.schedule(tl.op(SOURCE), **sz)
        >>> apply_config(s, {"vec_axis": "i", "ri": 8, "vj": 4, "cache_write": True, "parallel": True})
        >>> s["Y"].loops()
        ['i_o', 'j_o', 'j_i', 'i_i']
    """
    y = s["Y"]
    io, ii = y.split("i", cfg["ri"])
    jo, ji = y.split("j", cfg["vj"])
    vec, unr = (ji, ii) if cfg["vec_axis"] == "j" else (ii, ji)
    y.reorder(io, jo, unr, vec)
    y.vectorize(vec)
    y.unroll(unr)
    if cfg["cache_write"]:
        y.cache_write(io)
    if cfg["parallel"]:
        y.parallel(io)


def numpy_fast(X, **sizes):
    """``X.sum(axis=1)`` in float32 (numpy's pairwise summation).

    Example::

        >>> import numpy as np
        >>> numpy_fast(np.ones((2, 3), np.float32)).tolist()
        [3.0, 3.0]
    """
    return X.sum(axis=1)


def torch_fast(torch, X, **sizes):
    """``torch.sum(X, dim=1)`` in float32 (PyTorch's vectorized cascade sum).

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as a CPU tensor and gives the
    same ``Y[M]``.

    Example::

        import numpy as np
        import torch
        (X,) = make_inputs({"M": 2, "N": 3}, np.random.default_rng(0))
        Y = torch_fast(torch, torch.from_numpy(X))   # (2,)
    """
    return torch.sum(X, dim=1)


WORKLOAD = Workload(
    name="reduce_sum",
    source=SOURCE,
    presets={
        "1024": {"M": 1024, "N": 1024},
        "long_rows": {"M": 64, "N": 65536},
        "many_rows": {"M": 65536, "N": 64},
        "small": {"M": 24, "N": 37},
    },
    default_preset="1024",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="Row sums Y[M] of X[M, N] in f32 (a reduction over the inner axis).",
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
)
