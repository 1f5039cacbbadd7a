"""2-D average pooling (NCHW) with a KHxKW window and a stride, no padding.

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.avgpool2d import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> (I,) = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(I, **sizes).shape
    (2, 3, 5, 5)
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.maxpool2d import (  # the same loops and windows as max pooling
    apply_config,
    flops,
    make_inputs,
    pool_knobs,
    window_views,
)
from tensorlang.schedules.workload import Workload
from tensorlang.space import Space

SOURCE = """\
def avgpool2d(I: f32[N, C, H, W], KH: int, KW: int, stride: int) -> O:
    O[n, c, h, w] += I[n, c, h*stride + r, w*stride + s] / (KH*KW) where r in 0:KH, s in 0:KW
"""


def reference(I: np.ndarray, *, KH: int, KW: int, stride: int, **sizes: int) -> np.ndarray:
    """``np.mean`` (float64) over ``sliding_window_view`` windows subsampled by ``stride``.

    Example::

        >>> import numpy as np
        >>> I = np.array([[1, 5, 2, 0], [3, 4, 8, 1]], np.float32).reshape(1, 1, 2, 4)
        >>> reference(I, KH=2, KW=2, stride=2).ravel().tolist()
        [3.25, 2.75]
    """
    windows = np.lib.stride_tricks.sliding_window_view(I.astype(np.float64), (KH, KW), axis=(2, 3))
    return np.mean(windows[:, :, ::stride, ::stride], axis=(4, 5)).astype(np.float32)


def space(sizes: dict) -> Space:
    """The tuner's space: max pooling's knobs (``tensorlang.schedules.maxpool2d.pool_knobs``: a tile of rows by
    vectorized columns, the window unrolled or not, a local accumulator, the parallel loop) and its ``apply_config``.

    Example::

        >>> space(WORKLOAD.sizes()).size
        324
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> sp = space(sz)
        >>> "# parallel" in sp.schedule(tl.op(SOURCE), sz, sp.config_at(0)).lower()
        True
    """
    return Space("avgpool2d", pool_knobs(sizes), apply_config)


def numpy_fast(I, *, KH, KW, stride, **sizes):
    """The sum of the KH*KW strided views of the input, scaled by ``1/(KH*KW)``, in float32 (the input's dtype).

    Takes the arguments of :func:`reference` and gives the same ``O[N, C, OH, OW]``.

    Example::

        >>> import numpy as np
        >>> I = np.random.default_rng(0).standard_normal((1, 2, 7, 9), dtype=np.float32)
        >>> O = numpy_fast(I, KH=3, KW=3, stride=2)
        >>> O.shape, O.dtype, bool(np.allclose(O, reference(I, KH=3, KW=3, stride=2), atol=1e-6))
        ((1, 2, 3, 4), dtype('float32'), True)
    """
    out = None
    for v in window_views(I, KH, KW, stride):
        out = v.copy() if out is None else np.add(out, v, out=out)
    out *= np.float32(1.0 / (KH * KW))
    return out


def torch_fast(torch, I, *, KH, KW, stride, **sizes):
    """``torch.nn.functional.avg_pool2d`` with a ``(KH, KW)`` window, the same stride, no padding and
    ``ceil_mode=False``, in float32: every window lies inside the image, so each output is the sum of its
    ``KH*KW`` inputs divided by ``KH*KW`` (``count_include_pad`` has nothing to count and is left at its default).

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as a CPU tensor and gives the
    same ``O[N, C, OH, OW]``.

    Example::

        import numpy as np
        import torch
        I = np.random.default_rng(0).standard_normal((1, 2, 7, 9), dtype=np.float32)
        O = torch_fast(torch, torch.from_numpy(I), KH=3, KW=3, stride=2)   # (1, 2, 3, 4)
    """
    return torch.nn.functional.avg_pool2d(I, (KH, KW), stride=stride, padding=0, ceil_mode=False)


WORKLOAD = Workload(
    name="avgpool2d",
    source=SOURCE,
    presets={
        "2x2s2": {"N": 1, "C": 64, "H": 112, "W": 112, "KH": 2, "KW": 2, "stride": 2},
        "3x3s1": {"N": 1, "C": 64, "H": 56, "W": 56, "KH": 3, "KW": 3, "stride": 1},
        # ResNet-18 global average pool: 512 channels of 7x7 -> 1x1.
        "global_7x7": {"N": 1, "C": 512, "H": 7, "W": 7, "KH": 7, "KW": 7, "stride": 1},
        "small": {"N": 2, "C": 3, "H": 10, "W": 11, "KH": 2, "KW": 2, "stride": 2},
    },
    default_preset="2x2s2",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="2-D f32 average pooling O[N, C, OH, OW] over KHxKW windows of I[N, C, H, W] with a stride.",
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
    size_min={"KH": 1, "KW": 1, "stride": 1},
)
