"""The tensorlang workload library: DSL programs with size presets, NumPy oracles, inputs and FLOP counts.

``WORKLOADS`` maps each workload name to its :class:`Workload`, in a fixed order (dense linear algebra,
convolutions, pooling, normalization, data movement and elementwise).

Example::

    >>> import numpy as np
    >>> from tensorlang import schedules
    >>> w = schedules.get("conv2d")
    >>> sizes = w.sizes()                      # the default preset, "resnet18_3x3"
    >>> sizes["C"], sizes["H"], sizes["stride"]
    (64, 56, 1)
    >>> list(schedules.WORKLOADS)[:3]
    ['matmul', 'batch_matmul', 'conv1d']
"""

from __future__ import annotations

from tensorlang.schedules import (
    avgpool2d,
    batch_matmul,
    conv1d,
    conv2d,
    dense_bias_relu,
    depthwise_conv2d,
    elementwise,
    layernorm,
    matmul,
    maxpool2d,
    reduce_sum,
    softmax,
    transpose,
)
from tensorlang.schedules.workload import Workload, conv_output_size
from tensorlang.errors import UsageError

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        matmul.WORKLOAD,
        batch_matmul.WORKLOAD,
        conv1d.WORKLOAD,
        conv2d.WORKLOAD,
        depthwise_conv2d.WORKLOAD,
        maxpool2d.WORKLOAD,
        avgpool2d.WORKLOAD,
        softmax.WORKLOAD,
        layernorm.WORKLOAD,
        dense_bias_relu.WORKLOAD,
        transpose.WORKLOAD,
        reduce_sum.WORKLOAD,
        elementwise.WORKLOAD,
    )
}


# Which search space `tensorlang tune` uses for each built-in workload ("generated" where not listed): the one
# whose tuned best was faster at equal trials, measured side by side (README, "The auto-scheduler").
# Measured 2026-11-26 (Zen 5, 2 threads, 200 trials each, benchmarks/autoschedule.py): the hand-written space won by
# more than 5% on batch_matmul, conv1d, maxpool2d, avgpool2d, softmax and elementwise, which it then chose. In the
# full runs of 2026-12-02 (Zen 4), 2026-12-03 (Ice Lake) and 2026-12-04 (Zen 4) the generated space reached 0.99x to
# 1.30x the hand-written one on those six (never 5% below it; 0.96x or more on all 13 in each run): the generated
# space for every workload.
SPACE_CHOICE: dict[str, str] = {}


def get(name: str) -> Workload:
    """Return the workload called ``name``; raises UsageError listing the legal names when there is none.

    Example::

        >>> get("softmax").sizes()
        {'N': 1024, 'D': 1024}
    """
    try:
        return WORKLOADS[name]
    except (KeyError, TypeError):
        raise UsageError(f"unknown workload {name!r}; legal names: {', '.join(WORKLOADS)}") from None


__all__ = ["WORKLOADS", "SPACE_CHOICE", "Workload", "conv_output_size", "get"]
