"""Row sums ``Y[i] = sum_j X[i, j]`` of a matrix.

Example::

    >>> import numpy as np
    >>> from schedules.reduce_sum import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> (X,) = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(X, **sizes).shape
    (24,)
"""

from __future__ import annotations

import numpy as np

from schedules.transpose import flops, make_inputs  # same input X[M, N]; M*N additions
from schedules.workload import Workload

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
)
