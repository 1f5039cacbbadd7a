"""Programs that are not in schedules/, with their fastest reasonable numpy and PyTorch formulations, for
benchmarks/autoschedule.py (the auto-scheduler on any program).

Each entry of PROGRAMS: the DSL text, the sizes, and `numpy(*inputs)` / `torch(torch, *tensors)` computing the same
outputs in float32. `handler` is the worker factory that times one of them in a process of its own (OpenBLAS and
PyTorch read their thread counts when they load).
"""
from __future__ import annotations

import os

import numpy as np

GELU_C = 0.7978845608


def _gelu_np(x):
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * x ** 3)))


def _dense_gelu_np(X, W, b):
    y = X @ W.T
    y += b
    return _gelu_np(y).astype(np.float32)


def _dense_gelu_torch(torch, X, W, b):
    return torch.nn.functional.gelu(torch.addmm(b, X, W.t()), approximate="tanh")


def _attention_np(Q, K):
    s = np.matmul(Q, K.transpose(0, 2, 1)) * np.float32(1 / 8)
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s


def _attention_torch(torch, Q, K):
    return torch.softmax(torch.bmm(Q, K.transpose(1, 2)) * (1 / 8), dim=-1)


def _blur_np(X):
    h = (X[:-2] + X[1:-1] * np.float32(2) + X[2:]) * np.float32(0.25)
    return ((h[:, :-2] + h[:, 1:-1] * np.float32(2) + h[:, 2:]) * np.float32(0.25)).astype(np.float32)


def _blur_torch(torch, X):
    k = torch.tensor([0.25, 0.5, 0.25])
    x = X[None, None]
    x = torch.nn.functional.conv2d(x, k.view(1, 1, 3, 1))
    return torch.nn.functional.conv2d(x, k.view(1, 1, 1, 3))[0, 0]


def _grouped_np(I, Wt):
    # groups of 8 channels: im2col per group and a batched matmul
    G, C, F = 8, I.shape[1], Wt.shape[0]
    x = np.pad(I, ((0, 0), (0, 0), (1, 1), (1, 1)))
    H, W = I.shape[2], I.shape[3]
    _sn, sc, sh, sw = x.strides
    cols = np.lib.stride_tricks.as_strided(x, (C, 3, 3, H, W), (sc, sh, sw, sh, sw))
    cols = np.ascontiguousarray(cols).reshape(G, C // G * 9, H * W)
    w = Wt.reshape(G, F // G, C // G * 9)
    return np.matmul(w, cols).reshape(1, G, F // G, H, W)  # the program's output: [N, G, F/G, H, W]


def _grouped_torch(torch, I, Wt):
    out = torch.nn.functional.conv2d(I, Wt, padding=1, groups=8)
    return out.view(1, 8, out.shape[1] // 8, out.shape[2], out.shape[3])


def _conv3d_np(I, Wt):
    x = np.pad(I, ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)))
    C, D, H, W = I.shape[1:]
    F = Wt.shape[0]
    s = x.strides
    cols = np.lib.stride_tricks.as_strided(x, (C, 3, 3, 3, D, H, W), (s[1], s[2], s[3], s[4], s[2], s[3], s[4]))
    cols = np.ascontiguousarray(cols).reshape(C * 27, D * H * W)
    return (Wt.reshape(F, C * 27) @ cols).reshape(1, F, D, H, W)


def _conv3d_torch(torch, I, Wt):
    return torch.nn.functional.conv3d(I, Wt, padding=1)


def _layernorm_np(X, g, b):
    m = X.mean(axis=1, keepdims=True)
    xc = X - m
    v = (xc * xc).mean(axis=1, keepdims=True)
    return (xc / np.sqrt(v + np.float32(1e-5)) * g + b).astype(np.float32)


def _layernorm_torch(torch, X, g, b):
    return torch.nn.functional.layer_norm(X, (X.shape[1],), g, b, eps=1e-5)


PROGRAMS = {
    "dense_gelu": {
        "source": """\
def dense_gelu(X: f32[M, K], W: f32[N, K], b: f32[N]) -> Y:
    D[m, n] += X[m, k] * W[n, k]
    Y[m, n] = 0.5 * (D[m, n] + b[n]) * (1.0 + tanh(0.7978845608 * ((D[m, n] + b[n])
                                                   + 0.044715 * (D[m, n] + b[n]) ** 3)))
""",
        "sizes": {"M": 128, "N": 3072, "K": 768}, "numpy": _dense_gelu_np, "torch": _dense_gelu_torch,
        "heavy": True, "what": "BERT-base FFN up-projection with bias and tanh-GELU, 128 tokens"},
    "attention_scores": {
        "source": """\
def attention_scores(Q: f32[H, T, E], K: f32[H, T, E]) -> P:
    S[h, i, j] += Q[h, i, e] * K[h, j, e] * 0.125
    mx[h, i] max= S[h, i, j]
    ex[h, i, j] = exp(S[h, i, j] - mx[h, i])
    sm[h, i] += ex[h, i, j]
    P[h, i, j] = ex[h, i, j] / sm[h, i]
""",
        "sizes": {"H": 12, "T": 128, "E": 64}, "numpy": _attention_np, "torch": _attention_torch, "heavy": True,
        "what": "softmax(Q K^T / sqrt(64)) for 12 heads x 128 tokens"},
    "blur3x3": {
        "source": """\
def blur3x3(X: f32[H, W]) -> B:
    T[y, x] = (X[y, x] + 2.0 * X[y + 1, x] + X[y + 2, x]) * 0.25
    B[y, x] = (T[y, x] + 2.0 * T[y, x + 1] + T[y, x + 2]) * 0.25
""",
        "sizes": {"H": 2048, "W": 2048}, "numpy": _blur_np, "torch": _blur_torch, "heavy": False,
        "what": "separable 3x3 binomial blur on 2048 x 2048 (valid)"},
    "grouped_conv": {
        "source": """\
def grouped_conv(I: f32[N, C, H, W], Wt: f32[F, CG, R, S], G: int, FG: int) -> O:
    P[n, c, y, x] = I[n, c, y - 1, x - 1] where y in 0:H+2, x in 0:W+2
    O[n, g, o, h, w] += P[n, g*CG + c, h + r, w + s] * Wt[g*FG + o, c, r, s] where g in 0:G, o in 0:FG
""",
        "sizes": {"N": 1, "C": 128, "H": 28, "W": 28, "F": 128, "CG": 16, "R": 3, "S": 3, "G": 8, "FG": 16},
        "numpy": _grouped_np, "torch": _grouped_torch, "heavy": True,
        "what": "3x3 convolution, 128 -> 128 channels in 8 groups, 28 x 28"},
    "conv3d": {
        "source": """\
def conv3d(I: f32[N, C, D, H, W], Wt: f32[F, C, R, S, T]) -> O:
    P[n, c, z, y, x] = I[n, c, z - 1, y - 1, x - 1] where z in 0:D+2, y in 0:H+2, x in 0:W+2
    O[n, f, d, h, w] += P[n, c, d + r, h + s, w + t] * Wt[f, c, r, s, t]
""",
        "sizes": {"N": 1, "C": 32, "D": 16, "H": 28, "W": 28, "F": 32, "R": 3, "S": 3, "T": 3},
        "numpy": _conv3d_np, "torch": _conv3d_torch, "heavy": True,
        "what": "3x3x3 convolution, 32 -> 32 channels, 16 x 28 x 28"},
    "layernorm_affine": {
        "source": """\
def layernorm_affine(X: f32[N, D], g: f32[D], b: f32[D]) -> Y:
    mean[n] += X[n, d] / D
    xc[n, d] = X[n, d] - mean[n]
    var[n] += xc[n, d] * xc[n, d] / D
    Y[n, d] = xc[n, d] / sqrt(var[n] + 1e-5) * g[d] + b[d]
""",
        "sizes": {"N": 128, "D": 768}, "numpy": _layernorm_np, "torch": _layernorm_torch, "heavy": False,
        "what": "layernorm with affine over [128, 768]"},
}


def handler(init: dict):
    """Worker factory: the numpy or torch formulation of one program, timed on request (see tensorlang.tuner.bench's
    library_handler for the protocol: {"first": True} writes the outputs, {"runs", "min_time"} times).

    Example::

        Worker("program_baselines:handler", {"program": "blur3x3", "kind": "torch", "inputs": [...],
                                             "threads": 2, "folder": tmp})
    """
    from tensorlang.timing import measure
    p = PROGRAMS[init["program"]]
    inputs = [np.load(f) for f in init["inputs"]]
    if init["kind"] == "torch":
        import torch
        torch.set_num_threads(init["threads"])
        tensors = [torch.from_numpy(a) for a in inputs]

        def run():
            with torch.inference_mode():
                return p["torch"](torch, *tensors)
        version = torch.__version__
    else:
        def run():
            return p["numpy"](*inputs)
        version = np.__version__

    def handle(request: dict) -> dict:
        if request.get("first"):
            out = run()
            np.save(os.path.join(init["folder"], "out0.npy"), out.numpy() if init["kind"] == "torch" else out)
            return {"outputs": 1, "version": version, "pid": os.getpid()}
        return {"times": measure(run, min_runs=request["runs"], min_time=request["min_time"])}

    return handle
