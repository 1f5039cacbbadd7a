"""Ansor's single-operator suite (Zheng et al., OSDI 2020, section 7.1): C1D, C2D, C3D, GMM, GRP, DIL, DEP, T2D, CAP
and NRM, with the operator definitions of its evaluation script (``scripts/tune_op_subgraph.py`` of the Ansor branch
of apache/tvm: NLC, NHWC and NDHWC layouts, weights ``[K..., CI, CO]``) and its four shapes per operator
(``scripts/shape_configs.py``, ``single_op_shape_dict``), each at batch 1 and 16 (the shapes' leading 1 replaced by
the batch, as the script's ``--batch-size`` does), in float32. Softmax (SMX) is commented out of that script's list
with no shapes; it is here over rows with NRM's shapes (B x M rows of N).

Written as the DSL needs them: a grouped convolution's output channel ``co`` as ``(g, o)`` (its output is
``[N, H, W, G, CO/G]``, the same memory as ``[N, H, W, CO]``: TVM's ``co // (CO/G)`` is not affine); the transposed
convolution (stride 2, kernel 4, padding 1 in all four shapes) as its four stride phases, ``O[n, h, a, w, b, f]`` for
output row ``2h + a`` and column ``2w + b`` (``[N, H, 2, W, 2, CO]``, the memory of ``[N, 2H, 2W, CO]``), each
summing the 2 x 2 kernel taps that reach it: TVM's dilated input needs ``//`` and ``%`` of indices, and this is the
arithmetic of the nonzero taps only. The baselines: PyTorch (oneDNN) on channels-last views of the same memory, the
weights moved to PyTorch's layout once; numpy or BLAS calls where PyTorch has no operator (the capsule convolution:
its patches and one matrix product).

Example::

    >>> sorted({p.name.split("-")[0] for p in PROGRAMS})
    ['C1D', 'C2D', 'C3D', 'CAP', 'DEP', 'DIL', 'GMM', 'GRP', 'NRM', 'SMX', 'T2D']
    >>> next(p for p in PROGRAMS if p.name == "C2D-0-b16").sizes["N"]
    16
"""
from __future__ import annotations

import math

import numpy as np

from .common import Baseline, Program, call

ORIGIN = "Ansor (OSDI 2020) single operators: apache/tvm scripts/shape_configs.py, scripts/tune_op_subgraph.py"
BATCHES = (1, 16)

#: Ansor's operators the DSL cannot write; empty: all of them are written (see the module docstring for how).
NOT_WRITTEN: dict = {}

# (N, L, CI, CO, K, stride, pad)
C1D = [(1, 256, 64, 128, 3, 2, 1), (1, 128, 128, 256, 1, 2, 0), (1, 64, 256, 256, 5, 1, 2), (1, 32, 512, 512, 3, 1, 1)]
# (N, H, W, CI, CO, K, stride, pad)
C2D = [(1, 224, 224, 3, 64, 7, 2, 3), (1, 56, 56, 64, 64, 1, 1, 0), (1, 14, 14, 256, 256, 3, 1, 1),
       (1, 7, 7, 512, 512, 3, 1, 1)]
# (N, D, H, W, CI, CO, K, stride, pad)
C3D = [(1, 16, 224, 224, 3, 64, 7, 2, 3), (1, 16, 56, 56, 64, 64, 1, 1, 0), (1, 16, 14, 14, 256, 256, 3, 1, 1),
       (1, 16, 7, 7, 512, 512, 3, 1, 1)]
# (B, N, M, K): X [B, N, K] times Y [B, K, M]
GMM = [(1, 128, 128, 128), (1, 512, 32, 512), (1, 512, 512, 512), (1, 1024, 1024, 1024)]
# (N, H, W, CI, CO, K, stride, pad, dilation, groups)
GRP = [(1, 56, 56, 64, 128, 3, 2, 1, 1, 4), (1, 56, 56, 64, 64, 1, 1, 0, 1, 4), (1, 14, 14, 256, 256, 3, 1, 1, 1, 4),
       (1, 7, 7, 512, 512, 3, 1, 1, 1, 4)]
# (N, H, W, CI, CO, K, stride, pad, dilation)
DIL = [(1, 224, 224, 3, 64, 7, 2, 3, 2), (1, 56, 56, 64, 64, 1, 1, 0, 2), (1, 14, 14, 256, 256, 3, 1, 1, 2),
       (1, 7, 7, 512, 512, 3, 1, 1, 2)]
# (N, H, W, C, K, stride, pad)
DEP = [(1, 112, 112, 32, 3, 1, 1), (1, 112, 112, 64, 3, 2, 1), (1, 14, 14, 512, 3, 2, 1), (1, 7, 7, 1024, 3, 1, 1)]
# (N, H, W, CI, CO, K, stride, pad)
T2D = [(1, 4, 4, 512, 256, 4, 2, 1), (1, 8, 8, 256, 128, 4, 2, 1), (1, 16, 16, 128, 64, 4, 2, 1),
       (1, 32, 32, 64, 3, 4, 2, 1)]
# (N, H, W, CI, CO, K, stride, pad), capsules of 4 x 4
CAP = [(1, 16, 16, 32, 32, 3, 2, 1), (1, 8, 8, 32, 32, 3, 1, 1), (1, 16, 16, 8, 16, 3, 2, 1),
       (1, 8, 8, 16, 16, 3, 1, 1)]
# (B, M, N)
NRM = [(1, 256, 256), (1, 512, 512), (1, 1024, 1024), (1, 4096, 1024)]

CAPSULE = 4


def _out(n, k, stride, pad, dil=1):
    return (n + 2 * pad - dil * (k - 1) - 1) // stride + 1


# ------------------------------------------------------------------------------------------------ references


def _pad(x, pad, spatial):
    """x with `pad` zeros on both sides of its `spatial` axes (1..spatial)."""
    widths = [(0, 0)] + [(pad, pad)] * spatial + [(0, 0)] * (x.ndim - 1 - spatial)
    return np.pad(x, widths)


#: Bytes of float64 patches one matrix product of the convolutions' reference takes at most.
BLOCK_BYTES = 1 << 26


def _window(tap, lo, hi, stride, dil):
    """The input slices that kernel tap ``tap`` reads for the outputs from ``lo`` to ``hi`` (per spatial axis)."""
    return tuple(slice(t * dil + a * stride, t * dil + (b - 1) * stride + 1, stride) for t, a, b in zip(tap, lo, hi))


def _conv_ref(x, w, stride, pad, dil=1, groups=1):
    """A convolution of channels-last x [N, S..., CI] with w [K..., CI/groups, CO] in float64: [N, O..., CO]. Each
    image's patches (every kernel tap's window) for a block of output rows form one matrix, multiplied by the
    weight's (BLAS), in blocks of at most :data:`BLOCK_BYTES`."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    nd = x.ndim - 2
    xp = _pad(x, pad, nd)
    ks, (cg, co) = w.shape[:nd], w.shape[-2:]
    og = co // groups
    outs = [_out(x.shape[1 + i], ks[i], stride, pad, dil) for i in range(nd)]
    taps = list(np.ndindex(*ks))
    wm = w.reshape(len(taps), cg, co)
    out = np.empty((x.shape[0], *outs, co))
    block = max(1, BLOCK_BYTES // (8 * math.prod(outs[1:]) * len(taps) * cg * groups))
    for n in range(x.shape[0]):
        for o0 in range(0, outs[0], block):
            o1 = min(outs[0], o0 + block)
            cols = np.stack([xp[(n,) + _window(tap, [o0] + [0] * (nd - 1), [o1] + outs[1:], stride, dil)]
                             for tap in taps], axis=-2).reshape(-1, len(taps), cg * groups)
            for g in range(groups):
                prod = cols[:, :, g * cg:(g + 1) * cg].reshape(len(cols), -1) @ \
                    wm[:, :, g * og:(g + 1) * og].reshape(-1, og)
                out[n, o0:o1, ..., g * og:(g + 1) * og] = prod.reshape(o1 - o0, *outs[1:], og)
    return out


def _depthwise_ref(x, w, stride, pad):
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    xp = _pad(x, pad, 2)
    k = w.shape[0]
    oh, ow = _out(x.shape[1], k, stride, pad), _out(x.shape[2], k, stride, pad)
    out = np.zeros((x.shape[0], oh, ow, x.shape[3]))
    for r in range(k):
        for s in range(k):
            out += xp[:, r:r + (oh - 1) * stride + 1:stride, s:s + (ow - 1) * stride + 1:stride, :] * w[r, s]
    return out


def _t2d_ref(x, w):
    """Transposed convolution, stride 2, padding 1, by scattering each input pixel times each kernel tap to
    output (2i + r - 1, 2j + s - 1): [N, 2H, 2W, CO]."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, h, wd, _ = x.shape
    k = w.shape[0]
    full = np.zeros((n, 2 * h + k - 2, 2 * wd + k - 2, w.shape[3]))
    for r in range(k):
        for s in range(k):
            full[:, r:r + 2 * h:2, s:s + 2 * wd:2, :] += x @ w[r, s]
    return full[:, 1:1 + 2 * h, 1:1 + 2 * wd, :]


def _grp_ref(I, Wt, stride, pad, G, OG, **_):
    out = _conv_ref(I, Wt, stride, pad, 1, G)
    return out.reshape(*out.shape[:3], G, OG)


def _cap_patches(x, k, stride, pad):
    """[N, OH, OW, CAPS(i), K, K, CAPS(q), CI]: the padded input's windows."""
    xp = _pad(x, pad, 2)
    n, hp, wp, ci_, cq, c = xp.shape
    oh, ow = (hp - k) // stride + 1, (wp - k) // stride + 1
    s = xp.strides
    view = np.lib.stride_tricks.as_strided(
        xp, (n, oh, ow, ci_, k, k, cq, c), (s[0], s[1] * stride, s[2] * stride, s[3], s[1], s[2], s[4], s[5]))
    return view


def _cap_ref(x, w, stride, pad, **_):
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    return np.einsum("nhwirsqc,rsqjcf->nhwijf", _cap_patches(x, w.shape[0], stride, pad), w, optimize=True)


# ------------------------------------------------------------------------------------------------ baselines


def _torch_conv_setup(nd, groups_key=None, depthwise=False):
    """PyTorch's convolution on the channels-last view of the program's input; the weight moved to PyTorch's
    layout (and memory format) once; the output's channels-last memory returned in the program's layout."""
    def setup(inputs, sizes):
        import torch
        x, w = inputs
        stride, pad, dil = sizes["stride"], sizes["pad"], sizes.get("dil", 1)
        groups = sizes[groups_key] if groups_key else 1
        perm = (0, nd + 1) + tuple(range(1, nd + 1))  # NHWC -> NCHW view
        if depthwise:
            wt = w.permute(2, 0, 1).unsqueeze(1)  # [K, K, C] -> [C, 1, K, K]
            groups = x.shape[-1]
        else:
            wt = w.permute((nd + 1, nd) + tuple(range(nd)))  # [K..., CI, CO] -> [CO, CI, K...]
        fmt = {1: torch.contiguous_format, 2: torch.channels_last, 3: torch.channels_last_3d}[nd]
        wt = wt.contiguous(memory_format=fmt)
        conv = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}[nd]
        back = (0,) + tuple(range(2, nd + 2)) + (1,)

        def run():
            return conv(x.permute(perm), wt, stride=stride, padding=pad, dilation=dil, groups=groups) \
                .permute(back).contiguous()
        return run
    return Baseline("torch", setup, "torch.nn.functional.conv (oneDNN), channels-last")


def _t2d_torch_setup(inputs, sizes):
    import torch
    x, w = inputs
    wt = w.permute(2, 3, 0, 1).contiguous()  # [K, K, CI, CO] -> [CI, CO, K, K]

    def run():
        return torch.nn.functional.conv_transpose2d(x.permute(0, 3, 1, 2), wt, stride=2, padding=1) \
            .permute(0, 2, 3, 1).contiguous()
    return run


def _cap_np_setup(inputs, sizes):
    x, w = inputs
    k, stride, pad = w.shape[0], sizes["stride"], sizes["pad"]
    co = w.shape[-1]
    wm = np.ascontiguousarray(w.transpose(0, 1, 2, 4, 3, 5)).reshape(-1, CAPSULE * co)  # [(r,s,q,c), (j,f)]

    def run():
        p = np.ascontiguousarray(_cap_patches(x, k, stride, pad))
        n, oh, ow = p.shape[:3]
        return (p.reshape(n * oh * ow * CAPSULE, -1) @ wm).reshape(n, oh, ow, CAPSULE, CAPSULE, co)
    return run


def _softmax_np(X, **s):
    Y = X - X.max(axis=-1, keepdims=True)
    np.exp(Y, out=Y)
    Y /= Y.sum(axis=-1, keepdims=True)
    return Y


# ------------------------------------------------------------------------------------------------ programs


def _conv_flops(sizes, out_points, taps, cin):
    return 2.0 * out_points * taps * cin


def _programs() -> list[Program]:
    progs = []

    def add(op, i, batch, source, sizes, small, reference, baselines, flops, what, notes=""):
        progs.append(Program(f"{op}-{i}-b{batch}", "ansor", source, sizes, small, reference, baselines, flops=flops,
                             what=what, origin=ORIGIN, notes=notes))

    src_c1d = """\
def c1d(I: f32[N, L, CI], Wt: f32[K, CI, CO], stride: int, pad: int) -> O:
    P[n, x, c] = I[n, x - pad, c] where x in 0:L+2*pad
    O[n, l, f] += P[n, l*stride + r, c] * Wt[r, c, f]
"""
    src_c2d = """\
def c2d(I: f32[N, H, W, CI], Wt: f32[K, K, CI, CO], stride: int, pad: int, dil: int) -> O:
    P[n, y, x, c] = I[n, y - pad, x - pad, c] where y in 0:H+2*pad, x in 0:W+2*pad
    O[n, h, w, f] += P[n, h*stride + r*dil, w*stride + s*dil, c] * Wt[r, s, c, f]
"""
    src_c3d = """\
def c3d(I: f32[N, D, H, W, CI], Wt: f32[K, K, K, CI, CO], stride: int, pad: int) -> O:
    P[n, z, y, x, c] = I[n, z - pad, y - pad, x - pad, c] where z in 0:D+2*pad, y in 0:H+2*pad, x in 0:W+2*pad
    O[n, d, h, w, f] += P[n, d*stride + q, h*stride + r, w*stride + s, c] * Wt[q, r, s, c, f]
"""
    src_grp = """\
def grp(I: f32[N, H, W, CI], Wt: f32[K, K, CG, CO], stride: int, pad: int, G: int, OG: int) -> O:
    P[n, y, x, c] = I[n, y - pad, x - pad, c] where y in 0:H+2*pad, x in 0:W+2*pad
    O[n, h, w, g, o] += P[n, h*stride + r, w*stride + s, g*CG + c] * Wt[r, s, c, g*OG + o] where g in 0:G, o in 0:OG
"""
    src_dep = """\
def dep(I: f32[N, H, W, C], Wt: f32[K, K, C], stride: int, pad: int) -> O:
    P[n, y, x, c] = I[n, y - pad, x - pad, c] where y in 0:H+2*pad, x in 0:W+2*pad
    O[n, h, w, c] += P[n, h*stride + r, w*stride + s, c] * Wt[r, s, c]
"""
    src_t2d = """\
def t2d(I: f32[N, H, W, CI], Wt: f32[4, 4, CI, CO]) -> O:
    P[n, y, x, c] = I[n, y - 1, x - 1, c] where y in 0:H+2, x in 0:W+2
    O[n, h, a, w, b, f] += P[n, h + a - t + 1, w + b - u + 1, c] * Wt[2*t + 1 - a, 2*u + 1 - b, c, f] \
where h in 0:H, a in 0:2, w in 0:W, b in 0:2, t in 0:2, u in 0:2
"""
    src_cap = """\
def cap(I: f32[N, H, W, 4, 4, CI], Wt: f32[K, K, 4, 4, CI, CO], stride: int, pad: int) -> O:
    P[n, y, x, i, j, c] = I[n, y - pad, x - pad, i, j, c] where y in 0:H+2*pad, x in 0:W+2*pad
    O[n, h, w, i, j, f] += P[n, h*stride + r, w*stride + s, i, q, c] * Wt[r, s, q, j, c, f]
"""
    src_gmm = """\
def gmm(X: f32[B, N, K], Y: f32[B, K, M]) -> Z:
    Z[b, i, j] += X[b, i, k] * Y[b, k, j]
"""
    src_nrm = """\
def nrm(A: f32[B, M, N]) -> D:
    S[b] += A[b, i, j] * A[b, i, j]
    D[b] = sqrt(S[b])
"""
    src_smx = """\
def smx(X: f32[B, M, N]) -> Y:
    mx[b, i] max= X[b, i, j]
    e[b, i, j] = exp(X[b, i, j] - mx[b, i])
    sm[b, i] += e[b, i, j]
    Y[b, i, j] = e[b, i, j] / sm[b, i]
"""
    for batch in BATCHES:
        sb = min(batch, 2)  # the small sizes keep a batch of 2 for batch 16
        for i, (_, L, CI, CO, K, st, pd) in enumerate(C1D):
            sz = dict(N=batch, L=L, CI=CI, CO=CO, K=K, stride=st, pad=pd)
            sm = dict(sz, N=sb, L=12, CI=4, CO=8)
            add("C1D", i, batch, src_c1d, sz, sm, lambda I, Wt, stride, pad, **s: _conv_ref(I, Wt, stride, pad),
                {"torch": _torch_conv_setup(1)},
                lambda s: _conv_flops(s, s["N"] * _out(s["L"], s["K"], s["stride"], s["pad"]) * s["CO"], s["K"],
                                      s["CI"]),
                f"1-D convolution NLC, L={L}, {CI}->{CO}, kernel {K}, stride {st}, pad {pd}")
        for op, table in (("C2D", C2D), ("DIL", DIL)):
            for i, shape in enumerate(table):
                _, H, W, CI, CO, K, st, pd = shape[:8]
                dil = shape[8] if op == "DIL" else 1
                sz = dict(N=batch, H=H, W=W, CI=CI, CO=CO, K=K, stride=st, pad=pd, dil=dil)
                sm = dict(sz, N=sb, H=min(H, 11) + (K - 1) * dil, W=min(W, 9) + (K - 1) * dil, CI=min(CI, 3), CO=8)
                add(op, i, batch, src_c2d, sz, sm,
                    lambda I, Wt, stride, pad, dil, **s: _conv_ref(I, Wt, stride, pad, dil),
                    {"torch": _torch_conv_setup(2)},
                    lambda s: _conv_flops(s, s["N"] * _out(s["H"], s["K"], s["stride"], s["pad"], s["dil"])
                                          * _out(s["W"], s["K"], s["stride"], s["pad"], s["dil"]) * s["CO"],
                                          s["K"] ** 2, s["CI"]),
                    f"2-D convolution NHWC, {H}x{W}, {CI}->{CO}, kernel {K}, stride {st}, pad {pd}"
                    + (f", dilation {dil}" if dil > 1 else ""))
        for i, (_, D, H, W, CI, CO, K, st, pd) in enumerate(C3D):
            sz = dict(N=batch, D=D, H=H, W=W, CI=CI, CO=CO, K=K, stride=st, pad=pd)
            sm = dict(sz, N=sb, D=min(D, 5) + K, H=min(H, 6) + K, W=min(W, 7) + K, CI=min(CI, 3), CO=4)
            add("C3D", i, batch, src_c3d, sz, sm, lambda I, Wt, stride, pad, **s: _conv_ref(I, Wt, stride, pad),
                {"torch": _torch_conv_setup(3)},
                lambda s: _conv_flops(s, s["N"] * math.prod(_out(s[d], s["K"], s["stride"], s["pad"])
                                                            for d in ("D", "H", "W")) * s["CO"], s["K"] ** 3, s["CI"]),
                f"3-D convolution NDHWC, {D}x{H}x{W}, {CI}->{CO}, kernel {K}, stride {st}, pad {pd}")
        for i, (_, H, W, CI, CO, K, st, pd, _dil, G) in enumerate(GRP):
            sz = dict(N=batch, H=H, W=W, CI=CI, CO=CO, K=K, stride=st, pad=pd, G=G, CG=CI // G, OG=CO // G)
            sm = dict(sz, N=sb, H=min(H, 9), W=min(W, 10), CI=8, CO=16, CG=2, OG=4)
            add("GRP", i, batch, src_grp, sz, sm,
                _grp_ref,
                {"torch": _torch_conv_setup(2, groups_key="G")},
                lambda s: _conv_flops(s, s["N"] * _out(s["H"], s["K"], s["stride"], s["pad"])
                                      * _out(s["W"], s["K"], s["stride"], s["pad"]) * s["CO"], s["K"] ** 2, s["CG"]),
                f"grouped convolution NHWC, {H}x{W}, {CI}->{CO} in {G} groups, kernel {K}, stride {st}, pad {pd}",
                "output [N, H, W, G, CO/G]: the memory of [N, H, W, CO]")
        for i, (_, H, W, C, K, st, pd) in enumerate(DEP):
            sz = dict(N=batch, H=H, W=W, C=C, K=K, stride=st, pad=pd)
            sm = dict(sz, N=sb, H=min(H, 9), W=min(W, 10), C=8)
            add("DEP", i, batch, src_dep, sz, sm, lambda I, Wt, stride, pad, **s: _depthwise_ref(I, Wt, stride, pad),
                {"torch": _torch_conv_setup(2, depthwise=True)},
                lambda s: _conv_flops(s, s["N"] * _out(s["H"], s["K"], s["stride"], s["pad"])
                                      * _out(s["W"], s["K"], s["stride"], s["pad"]) * s["C"], s["K"] ** 2, 1),
                f"depthwise convolution NHWC, {H}x{W}x{C}, kernel {K}, stride {st}, pad {pd}")
        for i, (_, H, W, CI, CO, K, st, pd) in enumerate(T2D):
            assert (K, st, pd) == (4, 2, 1), "the DSL program is the stride-2, kernel-4, padding-1 case"
            sz = dict(N=batch, H=H, W=W, CI=CI, CO=CO)
            sm = dict(sz, N=sb, H=min(H, 5), W=min(W, 6), CI=4, CO=min(CO, 3))
            add("T2D", i, batch, src_t2d, sz, sm,
                lambda I, Wt, **s: _t2d_ref(I, Wt).reshape(I.shape[0], I.shape[1], 2, I.shape[2], 2, Wt.shape[3]),
                {"torch": Baseline("torch", _t2d_torch_setup, "torch.nn.functional.conv_transpose2d")},
                lambda s: 2.0 * s["N"] * s["H"] * s["W"] * s["CI"] * s["CO"] * 16,
                f"transposed convolution NHWC, {H}x{W} -> {2 * H}x{2 * W}, {CI}->{CO}, kernel 4, stride 2, pad 1",
                "output [N, H, 2, W, 2, CO] (the stride phases): the memory of [N, 2H, 2W, CO]")
        for i, (_, H, W, CI, CO, K, st, pd) in enumerate(CAP):
            sz = dict(N=batch, H=H, W=W, CI=CI, CO=CO, K=K, stride=st, pad=pd)
            sm = dict(sz, N=sb, H=min(H, 6), W=min(W, 7), CI=3, CO=2)
            add("CAP", i, batch, src_cap, sz, sm, _cap_ref,
                {"numpy": Baseline("numpy", _cap_np_setup, "patches and one matrix product (BLAS)")},
                lambda s: 2.0 * s["N"] * _out(s["H"], s["K"], s["stride"], s["pad"])
                * _out(s["W"], s["K"], s["stride"], s["pad"]) * CAPSULE * CAPSULE * s["CO"]
                * s["K"] ** 2 * CAPSULE * s["CI"],
                f"capsule convolution (4x4 capsules), {H}x{W}, {CI}->{CO}, kernel {K}, stride {st}, pad {pd}")
        for i, (_, N, M, K) in enumerate(GMM):
            sz = dict(B=batch, N=N, M=M, K=K)
            sm = dict(sz, B=sb, N=min(N, 12), M=min(M, 10), K=min(K, 14))
            add("GMM", i, batch, src_gmm, sz, sm,
                lambda X, Y, **s: np.matmul(np.asarray(X, np.float64), np.asarray(Y, np.float64)),
                {"numpy": call("numpy", lambda X, Y, **s: np.matmul(X, Y)),
                 "torch": call("torch", lambda torch, X, Y, **s: torch.bmm(X, Y))},
                lambda s: 2.0 * s["B"] * s["N"] * s["M"] * s["K"], f"batched matrix product, {N}x{K} by {K}x{M}")
        for i, (_, M, N) in enumerate(NRM):
            sz = dict(B=batch, M=M, N=N)
            sm = dict(sz, B=sb, M=min(M, 12), N=min(N, 16))
            add("NRM", i, batch, src_nrm, sz, sm,
                lambda A, **s: np.sqrt((np.asarray(A, np.float64) ** 2).sum(axis=(1, 2))),
                {"numpy": call("numpy", lambda A, **s: np.linalg.norm(A.reshape(A.shape[0], -1), axis=1)),
                 "torch": call("torch", lambda torch, A, **s: torch.linalg.vector_norm(A, dim=(1, 2)))},
                lambda s: 2.0 * s["B"] * s["M"] * s["N"], f"2-norm of each {M}x{N} matrix")
            add("SMX", i, batch, src_smx, sz, sm,
                lambda X, **s: _softmax_np(np.asarray(X, np.float64)),
                {"numpy": call("numpy", _softmax_np),
                 "torch": call("torch", lambda torch, X, **s: torch.softmax(X, dim=-1))},
                lambda s: 5.0 * s["B"] * s["M"] * s["N"], f"softmax over rows of {N}, {M} rows",
                "shapes: NRM's (Ansor's SMX has none)")
    return progs


PROGRAMS = _programs()
