"""Dense matrix multiplication ``C = A @ B`` (f32).

Example::

    >>> import numpy as np
    >>> from schedules.matmul import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> A, B = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(A, B, **sizes).shape
    (64, 48)
"""

from __future__ import annotations

import numpy as np

from schedules.workload import Workload

SOURCE = """\
def matmul(A: f32[M, K], B: f32[K, N]) -> C:
    C[i, j] += A[i, k] * B[k, j]
"""


def reference(A: np.ndarray, B: np.ndarray, **sizes: int) -> np.ndarray:
    """``A @ B`` computed in float64 and rounded to float32.

    Example::

        >>> import numpy as np
        >>> reference(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)).tolist()[0]
        [3.0, 3.0, 3.0, 3.0]
    """
    return np.matmul(A.astype(np.float64), B.astype(np.float64)).astype(np.float32)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard-normal ``A[M, K]`` and ``B[K, N]``.

    Example::

        >>> import numpy as np
        >>> [a.shape for a in make_inputs({"M": 2, "N": 3, "K": 4}, np.random.default_rng(0))]
        [(2, 4), (4, 3)]
    """
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    return [A, B]


def flops(sizes: dict) -> float:
    """``2*M*N*K``.

    Example::

        >>> flops({"M": 2, "N": 3, "K": 4})
        48.0
    """
    return 2.0 * sizes["M"] * sizes["N"] * sizes["K"]


def hand_schedule(s) -> None:
    """BLIS-style schedule: packed panels of A (12 rows) and B (32 columns), a 12x32 register tile
    (24 `<16 x float>` accumulators), K unrolled by 4, KC=256, MC=96, NC=512; threads split the columns.

    Example::

        >>> import tensorlang as tl
        >>> s = tl.schedule(tl.op(SOURCE), M=64, N=64, K=64)
        >>> hand_schedule(s)
        >>> "# parallel" in s.lower() and "C_local" in s.lower()
        True
    """
    M, N, K = s.sizes["M"], s.sizes["N"], s.sizes["K"]
    c = s["C"]
    nc = min(512, -(-N // 64) * 32)  # two column blocks at least, so that two threads share the work
    jo, j1 = c.split("j", nc)
    jm, ji = c.split(j1, 32)
    ko, k1 = c.split("k", min(256, K))
    kk, ku = c.split(k1, 4)
    io, i1 = c.split("i", min(96, -(-M // 12) * 12))
    im, ii = c.split(i1, 12)
    c.reorder(jo, ko, io, jm, im, kk, ku, ii, ji)
    c.unroll(ku)
    c.unroll(ii)
    c.vectorize(ji)
    c.cache_write(im)
    c.cache_read("B", ko, layout=((1, 32), (0, 0), (1, 0)))
    c.cache_read("A", io, layout=((0, 12), (1, 0), (0, 0)))
    c.parallel(jo)


def numpy_fast(A, B, **sizes):
    """``A @ B`` in float32 (OpenBLAS sgemm)."""
    return A @ B


WORKLOAD = Workload(
    name="matmul",
    source=SOURCE,
    presets={
        "1024": {"M": 1024, "N": 1024, "K": 1024},
        "512": {"M": 512, "N": 512, "K": 512},
        "256": {"M": 256, "N": 256, "K": 256},
        "tall_skinny": {"M": 4096, "N": 64, "K": 256},
        "small": {"M": 64, "N": 48, "K": 32},
    },
    default_preset="1024",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="Dense f32 matrix multiplication C[M, N] = A[M, K] @ B[K, N].",
    hand_schedule=hand_schedule,
    numpy_fast=numpy_fast,
)
