"""1-D convolution (NCW layout, cross-correlation as in deep-learning frameworks).

Stride, zero padding and dilation are DSL ``int`` parameters.

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.conv1d import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> I, Wt = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(I, Wt, **sizes).shape
    (2, 6, 20)
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.workload import Workload, conv_output_size
from tensorlang.space import Knob, Space, factors

SOURCE = """\
def conv1d(I: f32[N, C, W], Wt: f32[F, C, S], stride: int, pad: int, dil: int) -> O:
    P[n, c, x] = I[n, c, x - pad] where x in 0:W+2*pad
    O[n, f, w] += P[n, c, w*stride + s*dil] * Wt[f, c, s]
"""


def reference(I: np.ndarray, Wt: np.ndarray, *, stride: int, pad: int, dil: int, **sizes: int) -> np.ndarray:
    """Zero-pad with ``np.pad``, then accumulate one strided-slice ``einsum`` per filter tap (float64).

    ``O[n, f, w] = sum_{c, s} Ipad[n, c, w*stride + s*dil] * Wt[f, c, s]``.

    Example::

        >>> import numpy as np
        >>> I = np.arange(5, dtype=np.float32).reshape(1, 1, 5)
        >>> Wt = np.array([[[1, 0, -1]]], np.float32)
        >>> reference(I, Wt, stride=1, pad=0, dil=1).ravel().tolist()
        [-2.0, -2.0, -2.0]
    """
    x = np.pad(I.astype(np.float64), ((0, 0), (0, 0), (pad, pad)))
    wt = Wt.astype(np.float64)
    N, _, W = I.shape
    F, _, S = Wt.shape
    OW = conv_output_size(W, S, stride, pad, dil)
    out = np.zeros((N, F, OW))
    for s in range(S):
        start = s * dil
        window = x[:, :, start : start + stride * (OW - 1) + 1 : stride]  # (N, C, OW)
        out += np.einsum("ncw,fc->nfw", window, wt[:, :, s])
    return out.astype(np.float32)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard-normal input ``I[N, C, W]`` and filter ``Wt[F, C, S]``.

    Example::

        >>> import numpy as np
        >>> sz = {"N": 1, "C": 2, "W": 9, "F": 3, "S": 3, "stride": 1, "pad": 1, "dil": 1}
        >>> [a.shape for a in make_inputs(sz, np.random.default_rng(0))]
        [(1, 2, 9), (3, 2, 3)]
    """
    I = rng.standard_normal((sizes["N"], sizes["C"], sizes["W"]), dtype=np.float32)
    Wt = rng.standard_normal((sizes["F"], sizes["C"], sizes["S"]), dtype=np.float32)
    return [I, Wt]


def flops(sizes: dict) -> float:
    """``2*N*F*OW*C*S`` (one multiply and one add per tap).

    Example::

        >>> flops({"N": 1, "C": 2, "W": 9, "F": 3, "S": 3, "stride": 1, "pad": 1, "dil": 1})
        324.0
    """
    OW = conv_output_size(sizes["W"], sizes["S"], sizes["stride"], sizes["pad"], sizes["dil"])
    return 2.0 * sizes["N"] * sizes["F"] * OW * sizes["C"] * sizes["S"]


_REDUCTION_ORDERS = {"c,s": ("c", "s"), "s,c": ("s", "c")}


def space(sizes: dict) -> Space:
    """The tuner's space: conv2d's implicit-GEMM structure in one dimension, a register tile of ``fi`` filters by
    ``wi`` output columns (one of the two vectorized, the other unrolled) accumulated in a local buffer or not,
    packed filters, the reduction order, the padded input at the root or inlined, and the parallel loop.

    Example::

        >>> space(WORKLOAD.sizes()).size
        6912
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> sp = space(sz)
        >>> "O_local" in sp.schedule(tl.op(SOURCE), sz, sp.config_at(0)).lower()
        True
    """
    OW = conv_output_size(sizes["W"], sizes["S"], sizes["stride"], sizes["pad"], sizes["dil"])
    knobs = [
        Knob("fi", factors(sizes["F"], 32), "filters per register tile"),
        Knob("wi", factors(OW, 32), "output columns per register tile"),
        Knob("vectorize", ("f", "w"), "the tile axis that is vectorized (innermost); the other is unrolled"),
        Knob("reduce_order", tuple(_REDUCTION_ORDERS), "order of the reduction loops around the tile"),
        Knob("unroll_s", (False, True), "unroll the filter-tap loop s"),
        Knob("cache_write", (True, False), "accumulate the tile in a local buffer (registers)"),
        Knob("pack_filters", (True, False), "copy each block of filters into a (c, s, f) layout"),
        Knob("parallel", ("fo", "wo", "fused"), "the loop the threads split: filter blocks, column blocks, or both"),
        Knob("padding", ("root", "inline"), "compute the padded input once, or test the bounds at each read"),
    ]
    return Space("conv1d", knobs, apply_config)


def apply_config(s, cfg: dict) -> None:
    """Apply a config of :func:`space` to the schedule ``s`` (public primitives only).

    Example::

        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> s = tl.schedule(tl.op(SOURCE), **sz)
        >>> apply_config(s, {"fi": 2, "wi": 4, "vectorize": "w", "reduce_order": "c,s", "unroll_s": True,
        ...                  "cache_write": True, "pack_filters": True, "parallel": "fo", "padding": "inline"})
        >>> s["O"].loops()
        ['n', 'f_o', 'w_o', 'c', 's', 'f_i', 'w_i']
    """
    o = s["O"]
    fo, fi = o.split("f", cfg["fi"])
    wo, wi = o.split("w", cfg["wi"])
    vec, unr = (fi, wi) if cfg["vectorize"] == "f" else (wi, fi)
    o.reorder("n", fo, wo, *_REDUCTION_ORDERS[cfg["reduce_order"]], unr, vec)
    o.vectorize(vec)
    o.unroll(unr)
    if cfg["unroll_s"]:
        o.unroll("s")
    top = o.fuse(fo, wo) if cfg["parallel"] == "fused" else fo
    if cfg["cache_write"]:
        o.cache_write(top if cfg["parallel"] == "fused" else wo)
    if cfg["pack_filters"]:
        o.cache_read("Wt", top, layout=((1, 0), (2, 0), (0, 0)))
    o.parallel(wo if cfg["parallel"] == "wo" else top)
    if cfg["padding"] == "inline":
        s["P"].compute_inline()
    else:
        s["P"].parallel("c")


def numpy_fast(I, Wt, *, stride, pad, dil, **sizes):
    """im2col (a strided view, copied once) and one float32 matmul, as conv2d's numpy baseline.

    Takes the arguments of :func:`reference` and gives the same ``O[N, F, OW]``, in the inputs' dtype.

    Example::

        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> I, Wt = rng.standard_normal((2, 3, 11), dtype=np.float32), rng.standard_normal((4, 3, 3), dtype=np.float32)
        >>> O = numpy_fast(I, Wt, stride=2, pad=1, dil=2)
        >>> O.shape, bool(np.allclose(O, reference(I, Wt, stride=2, pad=1, dil=2), atol=1e-5))
        ((2, 4, 5), True)
    """
    N, C, W = I.shape
    F, _, S = Wt.shape
    x = np.pad(I, ((0, 0), (0, 0), (pad, pad))) if pad else I
    OW = conv_output_size(W, S, stride, pad, dil)
    sn, sc, sw = x.strides
    cols = np.lib.stride_tricks.as_strided(x, (N, C, S, OW), (sn, sc, sw * dil, sw * stride))
    cols = np.ascontiguousarray(cols).reshape(N, C * S, OW)
    return Wt.reshape(F, C * S) @ cols


def torch_fast(torch, I, Wt, *, stride, pad, dil, **sizes):
    """``torch.nn.functional.conv1d`` with the same stride, symmetric zero padding and dilation, in float32
    (PyTorch's conv1d is cross-correlation, as the DSL program and :func:`reference` are).

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as CPU tensors and gives the
    same ``O[N, F, OW]``.

    Example::

        import numpy as np
        import torch
        sz = {"N": 1, "C": 2, "W": 9, "F": 3, "S": 3, "stride": 2, "pad": 1, "dil": 2}
        I, Wt = make_inputs(sz, np.random.default_rng(0))
        O = torch_fast(torch, torch.from_numpy(I), torch.from_numpy(Wt), **sz)   # (1, 3, 4)
    """
    return torch.nn.functional.conv1d(I, Wt, stride=stride, padding=pad, dilation=dil)


WORKLOAD = Workload(
    name="conv1d",
    source=SOURCE,
    presets={
        "c64_w1024": {"N": 1, "C": 64, "W": 1024, "F": 64, "S": 3, "stride": 1, "pad": 1, "dil": 1},
        "strided": {"N": 1, "C": 64, "W": 1024, "F": 128, "S": 5, "stride": 2, "pad": 2, "dil": 1},
        # WaveNet-style dilated causal-size window.
        "dilated": {"N": 1, "C": 32, "W": 2048, "F": 32, "S": 3, "stride": 1, "pad": 4, "dil": 4},
        "small": {"N": 2, "C": 3, "W": 20, "F": 6, "S": 3, "stride": 1, "pad": 1, "dil": 1},
    },
    default_preset="c64_w1024",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="1-D f32 convolution O[N, F, OW] of I[N, C, W] with Wt[F, C, S]; "
    "stride, zero padding, dilation.",
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
    size_min={"stride": 1, "dil": 1},
)
