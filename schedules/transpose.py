"""2-D matrix transpose ``Y = X.T`` (pure data movement).

Example::

    >>> import numpy as np
    >>> from schedules.transpose import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> (X,) = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(X, **sizes).shape
    (40, 24)
"""

from __future__ import annotations

import numpy as np

from schedules.workload import Workload

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
)
