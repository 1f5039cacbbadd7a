"""Layer normalization over the last axis of ``X[N, D]`` with scale ``gamma`` and shift ``beta`` (eps 1e-5).

Example::

    >>> import numpy as np
    >>> from schedules.layernorm import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> X, gamma, beta = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(X, gamma, beta, **sizes).shape
    (8, 40)
"""

from __future__ import annotations

import numpy as np

from schedules.workload import Workload

EPS = 1e-5

SOURCE = """\
def layernorm(X: f32[N, D], gamma: f32[D], beta: f32[D]) -> Y:
    mean[n] += X[n, d] / D
    xc[n, d] = X[n, d] - mean[n]
    var[n] += xc[n, d] * xc[n, d] / D
    Y[n, d] = xc[n, d] / sqrt(var[n] + 1e-5) * gamma[d] + beta[d]
"""


def reference(X: np.ndarray, gamma: np.ndarray, beta: np.ndarray, **sizes: int) -> np.ndarray:
    """``(X - mean) / sqrt(var + 1e-5) * gamma + beta`` with ``np.mean``/``np.var`` in float64.

    Example::

        >>> import numpy as np
        >>> y = reference(np.array([[1, 3]], np.float32), np.ones(2, np.float32), np.zeros(2, np.float32))
        >>> np.round(y, 4).tolist()
        [[-1.0, 1.0]]
    """
    x = X.astype(np.float64)
    mean = np.mean(x, axis=1, keepdims=True)
    var = np.var(x, axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + EPS) * gamma.astype(np.float64) + beta.astype(np.float64)
    return y.astype(np.float32)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """``X[N, D]`` ~ 1 + N(0, 1) (non-zero mean), ``gamma[D]`` ~ 1 + 0.1 N(0, 1), ``beta[D]`` ~ 0.1 N(0, 1).

    Example::

        >>> import numpy as np
        >>> [a.shape for a in make_inputs({"N": 3, "D": 5}, np.random.default_rng(0))]
        [(3, 5), (5,), (5,)]
    """
    N, D = sizes["N"], sizes["D"]
    X = (1.0 + rng.standard_normal((N, D))).astype(np.float32)
    gamma = (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    beta = (0.1 * rng.standard_normal(D)).astype(np.float32)
    return [X, gamma, beta]


def flops(sizes: dict) -> float:
    """``8*N*D``: mean (add), centre (subtract), variance (multiply, add), normalize, scale, shift (3 ops)
    per element, plus ``2*N`` for the per-row ``sqrt(var + eps)``.

    Example::

        >>> flops({"N": 2, "D": 3})
        52.0
    """
    N, D = sizes["N"], sizes["D"]
    return 8.0 * N * D + 2.0 * N


WORKLOAD = Workload(
    name="layernorm",
    source=SOURCE,
    presets={
        # BERT-base hidden states: 128 tokens x 768 features.
        "bert": {"N": 128, "D": 768},
        "1024": {"N": 1024, "D": 1024},
        "small": {"N": 8, "D": 40},
    },
    default_preset="bert",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="Layer normalization Y[N, D] of the rows of X[N, D] with gamma[D], beta[D], eps 1e-5 "
    "(two-pass mean and variance).",
)
