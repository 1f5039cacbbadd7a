"""Fully connected layer with bias and ReLU: ``Y = relu(X @ Wt.T + bias)`` (PyTorch ``Linear`` layout).

Example::

    >>> import numpy as np
    >>> from schedules.dense_bias_relu import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> X, Wt, bias = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(X, Wt, bias, **sizes).shape
    (16, 24)
"""

from __future__ import annotations

import numpy as np

from schedules.workload import Workload

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
)
