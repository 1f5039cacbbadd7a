"""Fully connected layer with bias and ReLU: ``Y = relu(X @ Wt.T + bias)`` (PyTorch ``Linear`` layout).

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.dense_bias_relu import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> X, Wt, bias = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(X, Wt, bias, **sizes).shape
    (16, 24)
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.workload import Workload, register_tile_knobs
from tensorlang.space import Knob, Space

SOURCE = """\
def dense_bias_relu(X: f32[M, K], Wt: f32[N, K], bias: f32[N]) -> Y:
    D[m, n] += X[m, k] * Wt[n, k]
    Y[m, n] = max(D[m, n] + bias[n], 0.0)
"""


def reference(X: np.ndarray, Wt: np.ndarray, bias: np.ndarray, **sizes: int) -> np.ndarray:
    """``np.maximum(X @ Wt.T + bias, 0)`` in float64, rounded to float32.

    Example::

        >>> import numpy as np
        >>> X = np.array([[1, 2]], np.float32)
        >>> Wt = np.array([[1, 1], [1, -1]], np.float32)
        >>> reference(X, Wt, np.array([0.5, 0.5], np.float32)).tolist()
        [[3.5, 0.0]]
    """
    y = X.astype(np.float64) @ Wt.astype(np.float64).T + bias.astype(np.float64)
    return np.maximum(y, 0.0).astype(np.float32)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard-normal ``X[M, K]``, ``Wt[N, K]`` and ``bias[N]``.

    Example::

        >>> import numpy as np
        >>> [a.shape for a in make_inputs({"M": 2, "N": 3, "K": 4}, np.random.default_rng(0))]
        [(2, 4), (3, 4), (3,)]
    """
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    X = rng.standard_normal((M, K), dtype=np.float32)
    Wt = rng.standard_normal((N, K), dtype=np.float32)
    bias = rng.standard_normal(N, dtype=np.float32)
    return [X, Wt, bias]


def flops(sizes: dict) -> float:
    """``2*M*N*K + 2*M*N`` (matmul, then bias add and ReLU).

    Example::

        >>> flops({"M": 2, "N": 3, "K": 4})
        60.0
    """
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    return 2.0 * M * N * K + 2.0 * M * N


def space(sizes: dict) -> Space:
    """The tuner's space: the matmul ``D`` as an ``mr`` x ``nr`` register tile (rows unrolled, columns vectorized,
    accumulated in a local buffer) with k unrolled by ``ku`` and ``Wt`` optionally packed into a transposed
    ``K`` x ``nr`` panel; the bias and ReLU ``Y`` as a pass of its own at the root, or with ``D`` computed inside
    ``Y``'s panel loop (a column panel, or a row panel when the rows are split between threads); and whether the
    threads split column blocks or row blocks.

    Example::

        >>> space(WORKLOAD.sizes()).size
        2160
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> sp = space(sz)
        >>> "D_local" in sp.schedule(tl.op(SOURCE), sz, sp.config_at(0)).lower()
        True
    """
    knobs = [
        *register_tile_knobs(sizes),
        Knob("pack_wt", (True, False), "copy each nr-row block of Wt into a transposed K x nr panel"),
        Knob("epilogue", ("root", "at_panel"),
             "bias and ReLU in a pass of their own, or D computed inside the panel loop of Y"),
        Knob("parallel", ("n", "m"), "the loop the threads split: column blocks or row blocks"),
    ]
    return Space("dense_bias_relu", knobs, apply_config)


def apply_config(s, cfg: dict) -> None:
    """Apply a config of :func:`space` to the schedule ``s`` (public primitives only).

    Example::

        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> s = tl.schedule(tl.op(SOURCE), **sz)
        >>> apply_config(s, {"nr": 8, "mr": 4, "ku": 2, "pack_wt": True, "epilogue": "at_panel", "parallel": "n"})
        >>> s["D"].loops(), s["Y"].loops()
        (['n_o', 'm_o', 'k_o', 'k_i', 'm_i', 'n_i'], ['n_o', 'm', 'n_i'])
    """
    d, y = s["D"], s["Y"]
    mr, nr = cfg["mr"], cfg["nr"]
    dno, dni = d.split("n", nr)
    dmo, dmi = d.split("m", mr)
    dko, dki = d.split("k", cfg["ku"])
    blocks = (dno, dmo) if cfg["parallel"] == "n" else (dmo, dno)
    d.reorder(*blocks, dko, dki, dmi, dni)
    d.vectorize(dni)
    d.unroll(dmi)
    d.unroll(dki)
    d.cache_write(blocks[1])
    if cfg["pack_wt"]:
        d.cache_read("Wt", dno, layout=((1, 0), (0, 0)))
    yno, yni = y.split("n", nr)
    if cfg["epilogue"] == "root":
        d.parallel(blocks[0])
        y.parallel(y.fuse("m", yno))
    elif cfg["parallel"] == "n":  # D computed for a column panel of all M rows
        y.reorder(yno, "m", yni)
        d.compute_at(y, yno)
        y.parallel(yno)
    else:  # D computed for a row panel of mr rows
        ymo, ymi = y.split("m", mr)
        y.reorder(ymo, yno, ymi, yni)
        d.compute_at(y, ymo)
        y.parallel(ymo)
    y.vectorize(yni)


def numpy_fast(X, Wt, bias, **sizes):
    """``max(X @ Wt.T + bias, 0)`` in float32: one OpenBLAS sgemm, then the bias and the ReLU in place.

    Example::

        >>> import numpy as np
        >>> X, Wt, bias = make_inputs({"M": 3, "N": 4, "K": 5}, np.random.default_rng(0))
        >>> Y = numpy_fast(X, Wt, bias)
        >>> Y.shape, Y.dtype, bool(np.allclose(Y, reference(X, Wt, bias), atol=1e-5))
        ((3, 4), dtype('float32'), True)
    """
    y = X @ Wt.T
    y += bias
    return np.maximum(y, 0.0, out=y)


def torch_fast(torch, X, Wt, bias, **sizes):
    """``torch.addmm(bias, X, Wt.T)`` (one sgemm with the bias broadcast into the output, ``Wt`` read
    transposed in place, as ``torch.nn.Linear`` does) followed by an in-place ``relu_``, in float32.

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as CPU tensors and gives the
    same ``Y[M, N]``.

    Example::

        import numpy as np
        import torch
        X, Wt, bias = make_inputs({"M": 2, "N": 3, "K": 4}, np.random.default_rng(0))
        Y = torch_fast(torch, *(torch.from_numpy(a) for a in (X, Wt, bias)))   # (2, 3), >= 0
    """
    return torch.addmm(bias, X, Wt.t()).relu_()


WORKLOAD = Workload(
    name="dense_bias_relu",
    source=SOURCE,
    presets={
        # BERT-base feed-forward up-projection: 128 tokens, 768 -> 3072.
        "bert_ffn": {"M": 128, "K": 768, "N": 3072},
        "mlp_512": {"M": 64, "K": 512, "N": 512},
        # Batch-1 inference (matrix-vector shaped).
        "batch1": {"M": 1, "K": 1024, "N": 1024},
        "small": {"M": 16, "K": 20, "N": 24},
    },
    default_preset="bert_ffn",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="Dense layer Y[M, N] = relu(X[M, K] @ Wt[N, K]^T + bias[N]) in f32.",
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
)
