"""Batched matrix multiplication ``C[b] = A[b] @ B[b]`` (f32), e.g. attention scores.

Example::

    >>> import numpy as np
    >>> from schedules.batch_matmul import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> A, B = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(A, B, **sizes).shape
    (2, 8, 12)
"""

from __future__ import annotations

import numpy as np

from schedules.workload import Workload

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
)
