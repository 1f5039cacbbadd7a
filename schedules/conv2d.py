"""2-D convolution (NCHW / FCRS layouts, cross-correlation as in deep-learning frameworks).

Stride, zero padding and dilation are DSL ``int`` parameters and apply to both spatial axes.

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.conv2d import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> I, Wt = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(I, Wt, **sizes).shape
    (2, 8, 10, 10)
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.workload import Workload, conv_output_size, fixed_config
from tensorlang.space import Knob, Space, factors, vector_registers

SOURCE = """\
def conv2d(I: f32[N, C, H, W], Wt: f32[F, C, R, S], stride: int, pad: int, dil: int) -> O:
    P[n, c, y, x] = I[n, c, y - pad, x - pad] where y in 0:H+2*pad, x in 0:W+2*pad
    O[n, f, h, w] += P[n, c, h*stride + r*dil, w*stride + s*dil] * Wt[f, c, r, s]
"""


def reference(I: np.ndarray, Wt: np.ndarray, *, stride: int, pad: int, dil: int, **sizes: int) -> np.ndarray:
    """Zero-pad with ``np.pad``, then accumulate one strided-window ``einsum`` per filter tap (float64).

    ``O[n, f, h, w] = sum_{c, r, s} Ipad[n, c, h*stride + r*dil, w*stride + s*dil] * Wt[f, c, r, s]``.

    Example::

        >>> import numpy as np
        >>> I = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
        >>> Wt = np.ones((1, 1, 2, 2), np.float32)
        >>> reference(I, Wt, stride=1, pad=0, dil=1).ravel().tolist()
        [8.0, 12.0, 20.0, 24.0]
    """
    x = np.pad(I.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    wt = Wt.astype(np.float64)
    N, _, H, W = I.shape
    F, _, R, S = Wt.shape
    OH = conv_output_size(H, R, stride, pad, dil)
    OW = conv_output_size(W, S, stride, pad, dil)
    out = np.zeros((N, F, OH, OW))
    for r in range(R):
        for s in range(S):
            y0, x0 = r * dil, s * dil
            rows = slice(y0, y0 + stride * (OH - 1) + 1, stride)
            cols = slice(x0, x0 + stride * (OW - 1) + 1, stride)
            window = x[:, :, rows, cols]  # (N, C, OH, OW)
            out += np.einsum("nchw,fc->nfhw", window, wt[:, :, r, s])
    return out.astype(np.float32)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard-normal input ``I[N, C, H, W]`` and filter ``Wt[F, C, R, S]``.

    Example::

        >>> import numpy as np
        >>> sz = {"N": 1, "C": 2, "H": 5, "W": 6, "F": 3, "R": 3, "S": 3, "stride": 1, "pad": 1, "dil": 1}
        >>> [a.shape for a in make_inputs(sz, np.random.default_rng(0))]
        [(1, 2, 5, 6), (3, 2, 3, 3)]
    """
    I = rng.standard_normal((sizes["N"], sizes["C"], sizes["H"], sizes["W"]), dtype=np.float32)
    Wt = rng.standard_normal((sizes["F"], sizes["C"], sizes["R"], sizes["S"]), dtype=np.float32)
    return [I, Wt]


def output_shape(sizes: dict) -> tuple[int, int, int, int]:
    """``(N, F, OH, OW)`` of the convolution.

    Example::

        >>> output_shape(WORKLOAD.sizes("resnet18_stride2"))
        (1, 128, 28, 28)
    """
    OH = conv_output_size(sizes["H"], sizes["R"], sizes["stride"], sizes["pad"], sizes["dil"])
    OW = conv_output_size(sizes["W"], sizes["S"], sizes["stride"], sizes["pad"], sizes["dil"])
    return (sizes["N"], sizes["F"], OH, OW)


def flops(sizes: dict) -> float:
    """``2*N*F*OH*OW*C*R*S`` (one multiply and one add per tap; padding taps counted).

    Example::

        >>> flops(WORKLOAD.sizes("resnet18_3x3"))
        231211008.0
    """
    N, F, OH, OW = output_shape(sizes)
    return 2.0 * N * F * OH * OW * sizes["C"] * sizes["R"] * sizes["S"]


def _sizes(N, C, F, H, W, R, S, stride, pad, dil):
    return {"N": N, "C": C, "H": H, "W": W, "F": F, "R": R, "S": S, "stride": stride, "pad": pad, "dil": dil}


def hand_tile() -> tuple[int, int]:
    """The hand schedule's register tile on this CPU, (filters, output columns): two vectors of filters by 14
    columns where there are 32 vector registers (AVX-512: 28 accumulators), by 4 where there are 16 (AVX2: 8
    accumulators, two filter vectors and a broadcast; 2 x 14 would spill, and of the tiles that fit, two filter
    vectors by 4 columns run fastest).

    Example::

        >>> hand_tile() in ((32, 14), (16, 4), (8, 4))
        True
    """
    lanes, registers = vector_registers()
    return 2 * lanes, 14 if registers >= 32 else 4


def hand_schedule(s) -> None:
    """Implicit GEMM: a register tile of two vectors of filters by 14 output columns (AVX-512; by 4 with AVX2,
    :func:`hand_tile`), filters packed so that they are contiguous, the padded image computed once; threads split
    the filters.

    Example::

        >>> import tensorlang as tl
        >>> s = tl.schedule(tl.op(SOURCE), N=1, C=3, H=8, W=8, F=8, R=3, S=3, stride=1, pad=1, dil=1)
        >>> hand_schedule(s)
        >>> "O_local" in s.lower()
        True
    """
    o = s["O"]
    f_tile, w_tile = hand_tile()
    fo, fi = o.split("f", f_tile)
    wo, wi = o.split("w", w_tile)
    o.reorder("n", fo, "h", wo, "c", "r", "s", wi, fi)
    o.vectorize(fi)
    o.unroll(wi)
    o.cache_write(wo)
    o.cache_read("Wt", fo, layout=((1, 0), (2, 0), (3, 0), (0, 0)))
    o.parallel(fo)
    s["P"].parallel("c")


_REDUCTION_ORDERS = {"c,r,s": ("c", "r", "s"), "r,s,c": ("r", "s", "c"), "r,c,s": ("r", "c", "s")}


def hand_config(sizes: dict) -> dict | None:
    """The hand schedule as a config of :func:`space` (the same loop IR: tests/autosched/test_spaces.py), or None where
    the space lacks its values. Asked for when needed, not at import: the tile reads the CPU (:func:`hand_tile`), which
    starts the thread pool, and a bad TENSORLANG_* setting must fail where it is used, not in an import.

    Example::

        >>> hand_config(WORKLOAD.sizes())["fi"] == hand_tile()[0]
        True
    """
    f_tile, w_tile = hand_tile()
    return fixed_config(space, {"fi": f_tile, "wi": w_tile, "hi": 1, "reduce_order": "c,r,s", "unroll_s": False,
                                "cache_write": True, "pack_filters": True, "parallel": "fo",
                                "padding": "root"})(sizes)


def space(sizes: dict) -> Space:
    """The tuner's space: the hand schedule's structure (register tile of ``fi`` filters by ``hi`` rows by ``wi``
    columns accumulated in a local buffer, packed filters, the padded image at the root) with every size, the
    reduction order, the packing, the padding and the parallel loop as knobs.

    Example::

        >>> sp = space(WORKLOAD.sizes())
        >>> sp.size
        23040
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> cfg = space(sz).config_at(0)
        >>> "O_local" in space(sz).schedule(tl.op(SOURCE), sz, cfg).lower()
        True
    """
    F = sizes["F"]
    _, _, OH, OW = output_shape(sizes)
    knobs = [
        Knob("fi", tuple(v for v in (8, 16, 32, 48, 64) if v <= max(F, 8)), "filters per register tile (vectorized)"),
        Knob("wi", factors(OW, 28), "output columns per register tile (unrolled)"),
        Knob("hi", factors(OH, 4), "output rows per register tile (unrolled)"),
        Knob("reduce_order", tuple(_REDUCTION_ORDERS), "order of the reduction loops around the tile"),
        Knob("unroll_s", (False, True), "unroll the filter-column loop s"),
        Knob("cache_write", (True, False), "accumulate the tile in a local buffer (registers)"),
        Knob("pack_filters", (True, False), "copy each block of filters into a contiguous layout"),
        Knob("parallel", ("fo", "ho", "fused", "none"),
             "the loop the threads split: filter blocks, row blocks, both, or none (one thread)"),
        Knob("padding", ("root", "inline"), "compute the padded image once, or test the bounds at each read"),
    ]
    lanes, registers = vector_registers()
    return Space("conv2d", knobs, apply_config,
                 constraint=lambda c: -(-c["fi"] // lanes) * c["wi"] * c["hi"] <= registers,
                 constraint_doc=f"register tile of at most {registers} {lanes}-lane accumulators")


def apply_config(s, cfg: dict) -> None:
    """Apply a config of :func:`space` to the schedule ``s`` (public primitives only).

    Example::

        >>> import tensorlang as tl
        >>> s = tl.schedule(tl.op(SOURCE), **WORKLOAD.sizes("small"))
        >>> apply_config(s, {"fi": 8, "wi": 5, "hi": 1, "reduce_order": "c,r,s", "unroll_s": False,
        ...                  "cache_write": True, "pack_filters": True, "parallel": "fo", "padding": "root"})
        >>> s["O"].loops()
        ['n', 'f_o', 'h', 'w_o', 'c', 'r', 's', 'w_i', 'f_i']
    """
    o = s["O"]
    fo, fi = o.split("f", cfg["fi"])
    # one row a tile: no h_i loop of extent 1 (so that the hand schedule's config lowers to the same loop IR)
    ho, hi = o.split("h", cfg["hi"]) if cfg["hi"] > 1 else ("h", None)
    wo, wi = o.split("w", cfg["wi"])
    red = _REDUCTION_ORDERS[cfg["reduce_order"]]
    o.reorder("n", fo, ho, wo, *red, *((hi,) if hi else ()), wi, fi)
    o.vectorize(fi)
    o.unroll(wi)
    if hi:
        o.unroll(hi)
    if cfg["unroll_s"]:
        o.unroll("s")
    if cfg["cache_write"]:
        o.cache_write(wo)
    outer = fo
    if cfg["parallel"] == "fused":
        outer = o.fuse(fo, ho)
    if cfg["pack_filters"]:
        o.cache_read("Wt", outer, layout=((1, 0), (2, 0), (3, 0), (0, 0)))
    if cfg["parallel"] != "none":
        o.parallel({"fo": fo, "ho": ho, "fused": outer}[cfg["parallel"]])
    if cfg["padding"] == "inline":
        s["P"].compute_inline()
    elif cfg["parallel"] != "none":
        s["P"].parallel("c")


def numpy_fast(I, Wt, *, stride, pad, dil, **sizes):
    """im2col (a strided view, copied once) and one float32 matmul: the fastest plain-numpy convolution.

    Takes the arguments of :func:`reference` and gives the same ``O[N, F, OH, OW]``, in the inputs' dtype.

    Example::

        >>> import numpy as np
        >>> rng = np.random.default_rng(0)
        >>> I = rng.standard_normal((1, 2, 7, 7), dtype=np.float32)
        >>> Wt = rng.standard_normal((3, 2, 3, 3), dtype=np.float32)
        >>> O = numpy_fast(I, Wt, stride=2, pad=1, dil=2)
        >>> O.shape, bool(np.allclose(O, reference(I, Wt, stride=2, pad=1, dil=2), atol=1e-5))
        ((1, 3, 3, 3), True)
    """
    N, C, H, W = I.shape
    F, _, R, S = Wt.shape
    x = np.pad(I, ((0, 0), (0, 0), (pad, pad), (pad, pad))) if pad else I
    OH = conv_output_size(H, R, stride, pad, dil)
    OW = conv_output_size(W, S, stride, pad, dil)
    sn, sc, sh, sw = x.strides
    cols = np.lib.stride_tricks.as_strided(
        x, (N, C, R, S, OH, OW), (sn, sc, sh * dil, sw * dil, sh * stride, sw * stride))
    cols = np.ascontiguousarray(cols).reshape(N, C * R * S, OH * OW)
    return (Wt.reshape(F, C * R * S) @ cols).reshape(N, F, OH, OW)


def torch_fast(torch, I, Wt, *, stride, pad, dil, **sizes):
    """``torch.nn.functional.conv2d`` with the same stride, zero padding and dilation on both spatial axes, in
    float32 (PyTorch's conv2d is cross-correlation in NCHW / FCRS, as the DSL program and :func:`reference` are).

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as CPU tensors and gives the
    same ``O[N, F, OH, OW]``.

    Example::

        import numpy as np
        import torch
        sizes = WORKLOAD.sizes("small")
        I, Wt = make_inputs(sizes, np.random.default_rng(0))
        O = torch_fast(torch, torch.from_numpy(I), torch.from_numpy(Wt), **sizes)   # (2, 8, 10, 10)
    """
    return torch.nn.functional.conv2d(I, Wt, stride=stride, padding=pad, dilation=dil)


WORKLOAD = Workload(
    name="conv2d",
    source=SOURCE,
    presets={
        # ResNet-18 conv2_x: 3x3, 64 -> 64 channels on 56x56.
        "resnet18_3x3": _sizes(N=1, C=64, F=64, H=56, W=56, R=3, S=3, stride=1, pad=1, dil=1),
        # ResNet-18 conv3_1: 3x3 stride 2, 64 -> 128 channels, 56x56 -> 28x28.
        "resnet18_stride2": _sizes(N=1, C=64, F=128, H=56, W=56, R=3, S=3, stride=2, pad=1, dil=1),
        # ResNet-18 stem: 7x7 stride 2 on a 224x224 RGB image.
        "resnet18_stem": _sizes(N=1, C=3, F=64, H=224, W=224, R=7, S=7, stride=2, pad=3, dil=1),
        # DeepLab-style atrous 3x3 (dilation 2, "same" padding).
        "dilated": _sizes(N=1, C=32, F=32, H=28, W=28, R=3, S=3, stride=1, pad=2, dil=2),
        "small": _sizes(N=2, C=4, F=8, H=10, W=10, R=3, S=3, stride=1, pad=1, dil=1),
    },
    default_preset="resnet18_3x3",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="2-D f32 convolution O[N, F, OH, OW] of I[N, C, H, W] with Wt[F, C, R, S] (NCHW); "
    "stride, zero padding and dilation.",
    hand_schedule=hand_schedule,
    hand_config=hand_config,
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
    size_min={"stride": 1, "dil": 1},
)
