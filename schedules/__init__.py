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

from tensorlang.errors import UsageError
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


# Which search space `tensorlang tune` uses for each built-in workload ("generated" where not listed): the one whose
# tuned best is faster at equal trials, side by side (`python benchmarks/autoschedule.py`, the "generated / hand"
# column of docs/benchmarks.md). A workload is listed with "hand" only where the hand-written space wins by more than
# 5% on the machines measured; none does.
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


__all__ = ["SPACE_CHOICE", "WORKLOADS", "Workload", "conv_output_size", "get"]
