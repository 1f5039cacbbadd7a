"""Depthwise 2-D convolution (NCHW, one RxS filter per channel) with stride and zero padding.

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.depthwise_conv2d import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> I, Wt = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(I, Wt, **sizes).shape
    (2, 5, 12, 12)
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.workload import Workload, conv_output_size, fixed_config
from tensorlang.space import Knob, Space, factors

SOURCE = """\
def depthwise_conv2d(I: f32[N, C, H, W], Wt: f32[C, R, S], stride: int, pad: int) -> O:
    P[n, c, y, x] = I[n, c, y - pad, x - pad] where y in 0:H+2*pad, x in 0:W+2*pad
    O[n, c, h, w] += P[n, c, h*stride + r, w*stride + s] * Wt[c, r, s]
"""


def reference(I: np.ndarray, Wt: np.ndarray, *, stride: int, pad: int, **sizes: int) -> np.ndarray:
    """Zero-pad, take ``sliding_window_view`` windows, subsample by ``stride``, weight per channel (float64).

    ``O[n, c, h, w] = sum_{r, s} Ipad[n, c, h*stride + r, w*stride + s] * Wt[c, r, s]``.

    Example::

        >>> import numpy as np
        >>> I = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
        >>> Wt = np.stack([np.ones((2, 2)), -np.ones((2, 2))]).astype(np.float32)
        >>> reference(I, Wt, stride=1, pad=0).ravel().tolist()
        [6.0, -22.0]
    """
    x = np.pad(I.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    _, R, S = Wt.shape
    windows = np.lib.stride_tricks.sliding_window_view(x, (R, S), axis=(2, 3))  # (N, C, H', W', R, S)
    windows = windows[:, :, ::stride, ::stride]
    return np.einsum("nchwrs,crs->nchw", windows, Wt.astype(np.float64)).astype(np.float32)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard-normal input ``I[N, C, H, W]`` and per-channel filters ``Wt[C, R, S]``.

    Example::

        >>> import numpy as np
        >>> sz = {"N": 1, "C": 2, "H": 5, "W": 6, "R": 3, "S": 3, "stride": 1, "pad": 1}
        >>> [a.shape for a in make_inputs(sz, np.random.default_rng(0))]
        [(1, 2, 5, 6), (2, 3, 3)]
    """
    I = rng.standard_normal((sizes["N"], sizes["C"], sizes["H"], sizes["W"]), dtype=np.float32)
    Wt = rng.standard_normal((sizes["C"], sizes["R"], sizes["S"]), dtype=np.float32)
    return [I, Wt]


def flops(sizes: dict) -> float:
    """``2*N*C*OH*OW*R*S``.

    Example::

        >>> flops(WORKLOAD.sizes("mobilenet_112"))
        7225344.0
    """
    OH = conv_output_size(sizes["H"], sizes["R"], sizes["stride"], sizes["pad"])
    OW = conv_output_size(sizes["W"], sizes["S"], sizes["stride"], sizes["pad"])
    return 2.0 * sizes["N"] * sizes["C"] * OH * OW * sizes["R"] * sizes["S"]


def hand_schedule(s) -> None:
    """The padding inlined (reads outside the image give 0), 16 output columns a vector, the taps unrolled
    into a register accumulator, channels split between threads.

    Example::

        >>> import tensorlang as tl
        >>> s = tl.schedule(tl.op(SOURCE), N=1, C=2, H=8, W=8, R=3, S=3, stride=1, pad=1)
        >>> hand_schedule(s)
        >>> "# vectorized" in s.lower()
        True
    """
    s["P"].compute_inline()
    o = s["O"]
    wo, wi = o.split("w", 16)
    o.reorder("n", "c", "h", wo, "r", "s", wi)
    o.vectorize(wi)
    o.unroll("r")
    o.unroll("s")
    o.cache_write(wo)
    o.parallel("c")


# the hand schedule as a config of space() (the same loop IR: tests/autosched/test_spaces.py)
HAND_CONFIG = {"wi": 16, "hi": 1, "unroll_taps": True, "cache_write": True, "padding": "inline",
               "parallel": "c"}


def space(sizes: dict) -> Space:
    """The tuner's space: the hand schedule's structure (a register tile of ``hi`` rows by ``wi`` vectorized
    columns, the taps around it) with the tile sizes, the unrolling of the taps, the local accumulator, where the
    padded image is computed (inlined, at the root, or one channel at a time) and the parallel loop as knobs.

    The hand schedule is ``{"wi": 16, "hi": 1, "unroll_taps": True, "cache_write": True, "padding": "inline",
    "parallel": "c"}``.

    Example::

        >>> space(WORKLOAD.sizes()).size
        648
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> sp = space(sz)
        >>> "# vectorized" in sp.schedule(tl.op(SOURCE), sz, sp.config_at(0)).lower()
        True
    """
    OH = conv_output_size(sizes["H"], sizes["R"], sizes["stride"], sizes["pad"])
    OW = conv_output_size(sizes["W"], sizes["S"], sizes["stride"], sizes["pad"])
    knobs = [
        Knob("wi", factors(OW, 32), "output columns per tile (vectorized)"),
        Knob("hi", factors(OH, 4), "output rows per tile (unrolled)"),
        Knob("unroll_taps", (True, False), "unroll the r and s loops of the filter taps"),
        Knob("cache_write", (True, False), "accumulate the tile in a local buffer (registers)"),
        Knob("padding", ("inline", "root", "per_channel"),
             "the padded image: bounds tests at each read, computed once, or computed inside the channel loop"),
        Knob("parallel", ("c", "ho"), "the loop the threads split: channels or row blocks"),
    ]
    return Space("depthwise_conv2d", knobs, apply_config)


def apply_config(s, cfg: dict) -> None:
    """Apply a config of :func:`space` to the schedule ``s`` (public primitives only).

    Example::

        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> s = tl.schedule(tl.op(SOURCE), **sz)
        >>> apply_config(s, {"wi": 4, "hi": 2, "unroll_taps": True, "cache_write": True, "padding": "root",
        ...                  "parallel": "c"})
        >>> s["O"].loops()
        ['n', 'c', 'h_o', 'w_o', 'r', 's', 'h_i', 'w_i']
    """
    o = s["O"]
    if cfg["padding"] == "inline":
        s["P"].compute_inline()
    wo, wi = o.split("w", cfg["wi"])
    # one row a tile: no h_i loop of extent 1 (the hand schedule's config lowers to the same loop IR)
    ho, hi = o.split("h", cfg["hi"]) if cfg["hi"] > 1 else ("h", None)
    o.reorder("n", "c", ho, wo, "r", "s", *((hi,) if hi else ()), wi)
    o.vectorize(wi)
    if hi:
        o.unroll(hi)
    if cfg["unroll_taps"]:
        o.unroll("r")
        o.unroll("s")
    if cfg["cache_write"]:
        o.cache_write(wo)
    o.parallel("c" if cfg["parallel"] == "c" else ho)
    if cfg["padding"] == "root":
        s["P"].parallel("c")
    elif cfg["padding"] == "per_channel":
        s["P"].compute_at(o, "c")


def numpy_fast(I, Wt, *, stride, pad, **sizes):
    """Pad once, then one multiply-add of a shifted (strided) slice per tap, in float32.

    Takes the arguments of :func:`reference` and gives the same ``O[N, C, OH, OW]``.

    Example::

        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> I = rng.standard_normal((1, 3, 7, 7), dtype=np.float32)
        >>> Wt = rng.standard_normal((3, 3, 3), dtype=np.float32)
        >>> O = numpy_fast(I, Wt, stride=2, pad=1)
        >>> O.shape, bool(np.allclose(O, reference(I, Wt, stride=2, pad=1), atol=1e-5))
        ((1, 3, 4, 4), True)
    """
    N, C, H, W = I.shape
    _, R, S = Wt.shape
    x = np.pad(I, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else I
    OH = (H + 2 * pad - R) // stride + 1
    OW = (W + 2 * pad - S) // stride + 1
    out = np.zeros((N, C, OH, OW), np.float32)
    for r in range(R):
        for t in range(S):
            out += x[:, :, r:r + stride * (OH - 1) + 1:stride, t:t + stride * (OW - 1) + 1:stride] * \
                Wt[None, :, r, t, None, None]
    return out


def torch_fast(torch, I, Wt, *, stride, pad, **sizes):
    """``torch.nn.functional.conv2d`` with ``groups=C`` (one input channel per group) and the filters viewed as
    ``Wt[C, 1, R, S]``, the same stride and zero padding, no dilation, in float32.

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as CPU tensors and gives the
    same ``O[N, C, OH, OW]``.

    Example::

        import numpy as np
        import torch
        sz = {"N": 1, "C": 3, "H": 7, "W": 7, "R": 3, "S": 3, "stride": 2, "pad": 1}
        I, Wt = make_inputs(sz, np.random.default_rng(0))
        O = torch_fast(torch, torch.from_numpy(I), torch.from_numpy(Wt), **sz)   # (1, 3, 4, 4)
    """
    C = I.shape[1]
    return torch.nn.functional.conv2d(I, Wt.unsqueeze(1), stride=stride, padding=pad, groups=C)


WORKLOAD = Workload(
    name="depthwise_conv2d",
    source=SOURCE,
    presets={
        # MobileNet-v1 first depthwise layer: 32 channels, 112x112, 3x3, pad 1, stride 1.
        "mobilenet_112": {"N": 1, "C": 32, "H": 112, "W": 112, "R": 3, "S": 3, "stride": 1, "pad": 1},
        # MobileNet-v1 stride-2 depthwise layer: 128 channels, 56x56 -> 28x28.
        "mobilenet_56_s2": {"N": 1, "C": 128, "H": 56, "W": 56, "R": 3, "S": 3, "stride": 2, "pad": 1},
        # MobileNet-v3 / EfficientNet style 5x5 depthwise.
        "k5_28": {"N": 1, "C": 240, "H": 28, "W": 28, "R": 5, "S": 5, "stride": 1, "pad": 2},
        "small": {"N": 2, "C": 5, "H": 12, "W": 12, "R": 3, "S": 3, "stride": 1, "pad": 1},
    },
    default_preset="mobilenet_112",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="Depthwise 2-D f32 convolution O[N, C, OH, OW] of I[N, C, H, W] with Wt[C, R, S] (NCHW); "
    "stride and zero padding.",
    hand_schedule=hand_schedule,
    hand_config=fixed_config(space, HAND_CONFIG),
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
    size_min={"stride": 1},
)
