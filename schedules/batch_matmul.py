"""Batched matrix multiplication ``C[b] = A[b] @ B[b]`` (f32), e.g. attention scores.

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.batch_matmul import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> A, B = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(A, B, **sizes).shape
    (2, 8, 12)
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.workload import Workload, register_tile_knobs
from tensorlang.space import Knob, Space

SOURCE = """\
def batch_matmul(A: f32[BS, M, K], B: f32[BS, K, N]) -> C:
    C[b, i, j] += A[b, i, k] * B[b, k, j]
"""


def reference(A: np.ndarray, B: np.ndarray, **sizes: int) -> np.ndarray:
    """Per-batch ``A[b] @ B[b]`` computed in float64 and rounded to float32.

    Example::

        >>> import numpy as np
        >>> reference(np.ones((2, 1, 3), np.float32), np.ones((2, 3, 1), np.float32)).ravel().tolist()
        [3.0, 3.0]
    """
    return np.einsum("bik,bkj->bij", A.astype(np.float64), B.astype(np.float64)).astype(np.float32)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard-normal ``A[BS, M, K]`` and ``B[BS, K, N]``.

    Example::

        >>> import numpy as np
        >>> [a.shape for a in make_inputs({"BS": 2, "M": 3, "N": 4, "K": 5}, np.random.default_rng(0))]
        [(2, 3, 5), (2, 5, 4)]
    """
    BS, M, N, K = sizes["BS"], sizes["M"], sizes["N"], sizes["K"]
    A = rng.standard_normal((BS, M, K), dtype=np.float32)
    B = rng.standard_normal((BS, K, N), dtype=np.float32)
    return [A, B]


def flops(sizes: dict) -> float:
    """``2*BS*M*N*K``.

    Example::

        >>> flops({"BS": 2, "M": 3, "N": 4, "K": 5})
        240.0
    """
    return 2.0 * sizes["BS"] * sizes["M"] * sizes["N"] * sizes["K"]


def space(sizes: dict) -> Space:
    """The tuner's space: a register tile of ``mr`` rows (unrolled) by ``nr`` columns (vectorized) per batch,
    accumulated in a local buffer or not, k unrolled by ``ku``, B optionally packed into ``nr``-column panels,
    the order of the row- and column-block loops, and the loop the threads split.

    Example::

        >>> space(WORKLOAD.sizes()).size
        2400
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> sp = space(sz)
        >>> "C_local" in sp.schedule(tl.op(SOURCE), sz, sp.config_at(0)).lower()
        True
    """
    knobs = [
        *register_tile_knobs(sizes),
        Knob("tile_order", ("i,j", "j,i"), "order of the row-block and column-block loops"),
        Knob("cache_write", (True, False), "accumulate the tile in a local buffer (registers)"),
        Knob("pack_b", (True, False), "copy B into nr-column panels (once per batch, or per fused block)"),
        Knob("parallel", ("b", "fused", "outer"),
             "the loop the threads split: batches, batches fused with the outer block loop, or that block loop"),
    ]
    return Space("batch_matmul", knobs, apply_config)


def apply_config(s, cfg: dict) -> None:
    """Apply a config of :func:`space` to the schedule ``s`` (public primitives only).

    Example::

        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> s = tl.schedule(tl.op(SOURCE), **sz)
        >>> apply_config(s, {"nr": 4, "mr": 2, "ku": 2, "tile_order": "i,j", "cache_write": True,
        ...                  "pack_b": False, "parallel": "b"})
        >>> s["C"].loops()
        ['b', 'i_o', 'j_o', 'k_o', 'k_i', 'i_i', 'j_i']
    """
    c = s["C"]
    nr = cfg["nr"]
    jo, ji = c.split("j", nr)
    io, ii = c.split("i", cfg["mr"])
    ko, ki = c.split("k", cfg["ku"])
    outer, inner = (io, jo) if cfg["tile_order"] == "i,j" else (jo, io)
    c.reorder("b", outer, inner, ko, ki, ii, ji)
    c.vectorize(ji)
    c.unroll(ii)
    c.unroll(ki)
    if cfg["cache_write"]:
        c.cache_write(inner)
    top = c.fuse("b", outer) if cfg["parallel"] == "fused" else "b"
    if cfg["pack_b"]:
        c.cache_read("B", top, layout=((2, nr), (1, 0), (2, 0)))
    c.parallel(outer if cfg["parallel"] == "outer" else top)


def numpy_fast(A, B, **sizes):
    """``A @ B`` in float32: numpy's batched matmul, one OpenBLAS sgemm per batch.

    Example::

        >>> import numpy as np
        >>> A, B = make_inputs({"BS": 2, "M": 3, "N": 4, "K": 5}, np.random.default_rng(0))
        >>> C = numpy_fast(A, B)
        >>> C.shape, C.dtype, bool(np.allclose(C, reference(A, B), atol=1e-5))
        ((2, 3, 4), dtype('float32'), True)
    """
    return np.matmul(A, B)


def torch_fast(torch, A, B, **sizes):
    """``torch.bmm(A, B)`` in float32: one batched sgemm.

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as CPU tensors and gives the
    same ``C[BS, M, N]``, in the inputs' dtype.

    Example::

        import numpy as np
        import torch
        A, B = make_inputs({"BS": 2, "M": 3, "N": 4, "K": 5}, np.random.default_rng(0))
        C = torch_fast(torch, torch.from_numpy(A), torch.from_numpy(B))   # torch.float32, (2, 3, 4)
    """
    return torch.bmm(A, B)


WORKLOAD = Workload(
    name="batch_matmul",
    source=SOURCE,
    presets={
        # BERT-base attention scores: 12 heads, sequence 128, head dim 64.
        "bert_attn": {"BS": 12, "M": 128, "N": 128, "K": 64},
        "square256": {"BS": 4, "M": 256, "N": 256, "K": 256},
        "small": {"BS": 2, "M": 8, "N": 12, "K": 16},
    },
    default_preset="bert_attn",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="Batched f32 matrix multiplication C[BS, M, N] = A[BS, M, K] @ B[BS, K, N].",
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
)
