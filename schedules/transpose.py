"""2-D matrix transpose ``Y = X.T`` (pure data movement).

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.transpose import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> (X,) = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(X, **sizes).shape
    (40, 24)
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.workload import Workload
from tensorlang.space import Knob, Space, factors

SOURCE = """\
def transpose(X: f32[M, N]) -> Y:
    Y[j, i] = X[i, j]
"""


def reference(X: np.ndarray, **sizes: int) -> np.ndarray:
    """``np.ascontiguousarray(X.T)``.

    Example::

        >>> import numpy as np
        >>> reference(np.array([[1, 2, 3]], np.float32)).tolist()
        [[1.0], [2.0], [3.0]]
    """
    return np.ascontiguousarray(X.T)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard-normal ``X[M, N]``.

    Example::

        >>> import numpy as np
        >>> [a.shape for a in make_inputs({"M": 2, "N": 3}, np.random.default_rng(0))]
        [(2, 3)]
    """
    return [rng.standard_normal((sizes["M"], sizes["N"]), dtype=np.float32)]


def flops(sizes: dict) -> float:
    """``M*N``: a transpose does no arithmetic, so this counts elements moved (throughput = elements/s).

    Example::

        >>> flops({"M": 2, "N": 3})
        6.0
    """
    return float(sizes["M"] * sizes["N"])


def space(sizes: dict) -> Space:
    """The tuner's space: a ``tj`` x ``ti`` tile of the output (``Y``'s rows ``j`` by its contiguous columns
    ``i``), which tile loop is innermost and whether it is vectorized, an optional transposed copy of each input
    tile into a local buffer (so that the innermost loop reads it contiguously), and the parallel loop.

    Example::

        >>> space(WORKLOAD.sizes()).size
        784
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> sp = space(sz)
        >>> "# parallel" in sp.schedule(tl.op(SOURCE), sz, sp.config_at(0)).lower()
        True
    """
    M, N = sizes["M"], sizes["N"]
    knobs = [
        Knob("tj", factors(N, 64), "rows of Y per tile"),
        Knob("ti", factors(M, 64), "columns of Y per tile (contiguous in Y)"),
        Knob("inner", ("i", "j"), "the innermost tile loop: i (contiguous stores to Y) or j (contiguous loads from X)"),
        Knob("vectorize", (True, False), "vectorize the innermost tile loop"),
        Knob("pack", (False, True), "copy each tile of X, transposed, into a local buffer first"),
        Knob("parallel", ("jo", "fused"), "the loop the threads split: row blocks, or row and column blocks fused"),
    ]
    return Space("transpose", knobs, apply_config)


def apply_config(s, cfg: dict) -> None:
    """Apply a config of :func:`space` to the schedule ``s`` (public primitives only).

    Example::

        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> s = tl.schedule(tl.op(SOURCE), **sz)
        >>> apply_config(s, {"tj": 8, "ti": 8, "inner": "i", "vectorize": True, "pack": True, "parallel": "jo"})
        >>> s["Y"].loops()
        ['j_o', 'i_o', 'j_i', 'i_i']
    """
    y = s["Y"]
    jo, io, ji, ii = y.tile("j", "i", cfg["tj"], cfg["ti"])
    if cfg["inner"] == "j":
        y.reorder(ii, ji)
    if cfg["vectorize"]:
        y.vectorize(ii if cfg["inner"] == "i" else ji)
    top = y.fuse(jo, io) if cfg["parallel"] == "fused" else io
    if cfg["pack"]:
        y.cache_read("X", top, layout=((1, 0), (0, 0)))
    y.parallel(top if cfg["parallel"] == "fused" else jo)


def numpy_fast(X, **sizes):
    """``X.T`` copied into a new C-contiguous array (numpy's strided copy).

    Example::

        >>> import numpy as np
        >>> numpy_fast(np.arange(6, dtype=np.float32).reshape(2, 3)).tolist()
        [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    """
    return np.ascontiguousarray(X.T)


def torch_fast(torch, X, **sizes):
    """``X.t()`` copied into a fresh contiguous ``Y[N, M]`` (``clone(memory_format=torch.contiguous_format)``:
    the same blocked transpose copy as ``.contiguous()``, but a copy even where ``M`` or ``N`` is 1 and the
    transposed view is already contiguous); bit-equal to :func:`reference`.

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as a CPU tensor.

    Example::

        import numpy as np
        import torch
        (X,) = make_inputs({"M": 2, "N": 3}, np.random.default_rng(0))
        Y = torch_fast(torch, torch.from_numpy(X))   # (3, 2), Y[j, i] == X[i, j]
    """
    return X.t().clone(memory_format=torch.contiguous_format)


WORKLOAD = Workload(
    name="transpose",
    source=SOURCE,
    presets={
        "1024": {"M": 1024, "N": 1024},
        "4096x256": {"M": 4096, "N": 256},
        "odd": {"M": 1000, "N": 999},
        "small": {"M": 24, "N": 40},
    },
    default_preset="1024",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="Matrix transpose Y[N, M] = X[M, N]^T in f32; memory bound, flops() counts elements.",
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
)
