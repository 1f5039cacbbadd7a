"""2-D max pooling (NCHW) with a KHxKW window and a stride, no padding.

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.maxpool2d import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> (I,) = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(I, **sizes).shape
    (2, 3, 5, 5)
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.workload import Workload, conv_output_size, fixed_config
from tensorlang.space import Knob, Space, factors

SOURCE = """\
def maxpool2d(I: f32[N, C, H, W], KH: int, KW: int, stride: int) -> O:
    O[n, c, h, w] max= I[n, c, h*stride + r, w*stride + s] where r in 0:KH, s in 0:KW
"""


def reference(I: np.ndarray, *, KH: int, KW: int, stride: int, **sizes: int) -> np.ndarray:
    """``np.max`` over ``sliding_window_view`` windows subsampled by ``stride``.

    Example::

        >>> import numpy as np
        >>> I = np.array([[1, 5, 2, 0], [3, 4, 8, 1]], np.float32).reshape(1, 1, 2, 4)
        >>> reference(I, KH=2, KW=2, stride=2).ravel().tolist()
        [5.0, 8.0]
    """
    windows = np.lib.stride_tricks.sliding_window_view(I, (KH, KW), axis=(2, 3))
    return np.max(windows[:, :, ::stride, ::stride], axis=(4, 5)).astype(I.dtype)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard-normal ``I[N, C, H, W]``.

    Example::

        >>> import numpy as np
        >>> sz = {"N": 1, "C": 2, "H": 4, "W": 4, "KH": 2, "KW": 2, "stride": 2}
        >>> [a.shape for a in make_inputs(sz, np.random.default_rng(0))]
        [(1, 2, 4, 4)]
    """
    return [rng.standard_normal((sizes["N"], sizes["C"], sizes["H"], sizes["W"]), dtype=np.float32)]


def flops(sizes: dict) -> float:
    """``N*C*OH*OW*KH*KW`` (one comparison per window element).

    Example::

        >>> flops(WORKLOAD.sizes("2x2s2"))
        802816.0
    """
    OH = conv_output_size(sizes["H"], sizes["KH"], sizes["stride"])
    OW = conv_output_size(sizes["W"], sizes["KW"], sizes["stride"])
    return float(sizes["N"] * sizes["C"] * OH * OW * sizes["KH"] * sizes["KW"])


def hand_schedule(s) -> None:
    """Channels split between threads and the window unrolled; LLVM vectorizes the strided row loop with
    shuffles (faster than explicit 16-lane gathers).

    Example::

        >>> import tensorlang as tl
        >>> s = tl.schedule(tl.op(SOURCE), N=1, C=2, H=8, W=8, KH=2, KW=2, stride=2)
        >>> hand_schedule(s)
        >>> "# parallel" in s.lower()
        True
    """
    o = s["O"]
    o.parallel("c")
    o.unroll("r")
    o.unroll("s")


def pool_knobs(sizes: dict) -> list[Knob]:
    """The knobs of a pooling space (max or average: the same loops): the tile of ``hi`` rows (unrolled) by ``wi``
    columns (vectorized; 1 leaves the column loop to LLVM's vectorizer, as the hand schedule does), the window
    unrolled or not, a local accumulator, and the parallel loop.

    Example::

        >>> [k.name for k in pool_knobs(WORKLOAD.sizes())]
        ['wi', 'hi', 'unroll_window', 'cache_write', 'parallel']
    """
    OH = conv_output_size(sizes["H"], sizes["KH"], sizes["stride"])
    OW = conv_output_size(sizes["W"], sizes["KW"], sizes["stride"])
    return [
        Knob("wi", factors(OW, 32), "output columns per tile (vectorized when more than 1)"),
        Knob("hi", factors(OH, 4), "output rows per tile (unrolled)"),
        Knob("unroll_window", (True, False), "unroll the r and s loops of the window"),
        Knob("cache_write", (False, True), "accumulate the tile in a local buffer (registers)"),
        Knob("parallel", ("c", "ho", "fused"), "the loop the threads split: channels, row blocks, or both fused"),
    ]


# the hand schedule as a config of space() (the same loop IR: tests/autosched/test_spaces.py)
HAND_CONFIG = {"wi": 1, "hi": 1, "unroll_window": True, "cache_write": False, "parallel": "c"}


def space(sizes: dict) -> Space:
    """The tuner's space (see :func:`pool_knobs`); it holds the hand schedule, ``{"wi": 1, "hi": 1,
    "unroll_window": True, "cache_write": False, "parallel": "c"}``.

    Example::

        >>> space(WORKLOAD.sizes()).size
        324
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> sp = space(sz)
        >>> "# parallel" in sp.schedule(tl.op(SOURCE), sz, sp.config_at(0)).lower()
        True
    """
    return Space("maxpool2d", pool_knobs(sizes), apply_config)


def apply_config(s, cfg: dict) -> None:
    """Apply a config of :func:`pool_knobs` to the schedule ``s`` of a pooling program (public primitives only).

    Example::

        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> s = tl.schedule(tl.op(SOURCE), **sz)
        >>> apply_config(s, {"wi": 4, "hi": 2, "unroll_window": True, "cache_write": True, "parallel": "fused"})
        >>> s["O"].loops()
        ['n', 'c_h_o', 'w_o', 'r', 's', 'h_i', 'w_i']
    """
    o = s["O"]
    # a factor of 1 splits nothing: no loop of extent 1 (the hand schedule's config lowers to the same loop IR)
    wo, wi = o.split("w", cfg["wi"]) if cfg["wi"] > 1 else ("w", None)
    ho, hi = o.split("h", cfg["hi"]) if cfg["hi"] > 1 else ("h", None)
    tile = tuple(a for a in (hi, wi) if a)
    if tile:
        o.reorder("n", "c", ho, wo, "r", "s", *tile)
    if wi:
        o.vectorize(wi)
    if hi:
        o.unroll(hi)
    if cfg["unroll_window"]:
        o.unroll("r")
        o.unroll("s")
    if cfg["cache_write"]:
        o.cache_write(wo)
    if cfg["parallel"] == "fused":
        o.parallel(o.fuse("c", ho))
    else:
        o.parallel("c" if cfg["parallel"] == "c" else ho)


def numpy_fast(I, *, KH, KW, stride, **sizes):
    """The maximum over the KH*KW strided views of the input, in the input's dtype (float32).

    Takes the arguments of :func:`reference` and gives the same ``O[N, C, OH, OW]``.

    Example::

        >>> import numpy as np
        >>> I = np.random.default_rng(0).standard_normal((1, 2, 7, 9), dtype=np.float32)
        >>> O = numpy_fast(I, KH=3, KW=3, stride=2)
        >>> O.shape, bool(np.array_equal(O, reference(I, KH=3, KW=3, stride=2)))
        ((1, 2, 3, 4), True)
    """
    out = None
    for v in window_views(I, KH, KW, stride):
        out = v.copy() if out is None else np.maximum(out, v, out=out)
    return out


def window_views(I, KH: int, KW: int, stride: int):
    """Yield the KH*KW strided views of ``I[N, C, H, W]``, one per window offset, each ``[N, C, OH, OW]``: the
    view of offset (r, s) holds ``I[n, c, h*stride + r, w*stride + s]`` (windows that do not fit are dropped).

    Example::

        >>> import numpy as np
        >>> [v.shape for v in window_views(np.zeros((1, 1, 5, 4)), 2, 2, 2)]
        [(1, 1, 2, 2), (1, 1, 2, 2), (1, 1, 2, 2), (1, 1, 2, 2)]
    """
    H, W = I.shape[2], I.shape[3]
    OH = (H - KH) // stride + 1
    OW = (W - KW) // stride + 1
    for r in range(KH):
        for s in range(KW):
            yield I[:, :, r:r + stride * (OH - 1) + 1:stride, s:s + stride * (OW - 1) + 1:stride]


def torch_fast(torch, I, *, KH, KW, stride, **sizes):
    """``torch.nn.functional.max_pool2d`` with a ``(KH, KW)`` window, the same stride, no padding and
    ``ceil_mode=False`` (windows that do not fit are dropped, as in the DSL program); bit-equal to
    :func:`reference`.

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as a CPU tensor and gives the
    same ``O[N, C, OH, OW]``, in the input's dtype.

    Example::

        import numpy as np
        import torch
        I = np.random.default_rng(0).standard_normal((1, 2, 7, 9), dtype=np.float32)
        O = torch_fast(torch, torch.from_numpy(I), KH=3, KW=3, stride=2)   # (1, 2, 3, 4)
    """
    return torch.nn.functional.max_pool2d(I, (KH, KW), stride=stride, padding=0, ceil_mode=False)


WORKLOAD = Workload(
    name="maxpool2d",
    source=SOURCE,
    presets={
        "2x2s2": {"N": 1, "C": 64, "H": 112, "W": 112, "KH": 2, "KW": 2, "stride": 2},
        # Overlapping windows (ResNet-style 3x3 stride 2, without padding).
        "3x3s2": {"N": 1, "C": 64, "H": 112, "W": 112, "KH": 3, "KW": 3, "stride": 2},
        "small": {"N": 2, "C": 3, "H": 10, "W": 11, "KH": 2, "KW": 2, "stride": 2},
    },
    default_preset="2x2s2",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="2-D f32 max pooling O[N, C, OH, OW] over KHxKW windows of I[N, C, H, W] with a stride.",
    hand_schedule=hand_schedule,
    hand_config=fixed_config(space, HAND_CONFIG),
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
    size_min={"KH": 1, "KW": 1, "stride": 1},
)
