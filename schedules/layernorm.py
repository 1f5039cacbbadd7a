"""Layer normalization over the last axis of ``X[N, D]`` with scale ``gamma`` and shift ``beta`` (eps 1e-5).

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.layernorm import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> X, gamma, beta = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(X, gamma, beta, **sizes).shape
    (8, 40)
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.rowwise import apply_rowwise, rowwise_knobs
from tensorlang.schedules.workload import Workload
from tensorlang.space import Space

EPS = 1e-5

SOURCE = """\
def layernorm(X: f32[N, D], gamma: f32[D], beta: f32[D]) -> Y:
    mean[n] += X[n, d] / D
    xc[n, d] = X[n, d] - mean[n]
    var[n] += xc[n, d] * xc[n, d] / D
    Y[n, d] = xc[n, d] / sqrt(var[n] + 1e-5) * gamma[d] + beta[d]
"""


def reference(X: np.ndarray, gamma: np.ndarray, beta: np.ndarray, **sizes: int) -> np.ndarray:
    """``(X - mean) / sqrt(var + 1e-5) * gamma + beta`` with ``np.mean``/``np.var`` in float64.

    Example::

        >>> import numpy as np
        >>> y = reference(np.array([[1, 3]], np.float32), np.ones(2, np.float32), np.zeros(2, np.float32))
        >>> np.round(y, 4).tolist()
        [[-1.0, 1.0]]
    """
    x = X.astype(np.float64)
    mean = np.mean(x, axis=1, keepdims=True)
    var = np.var(x, axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + EPS) * gamma.astype(np.float64) + beta.astype(np.float64)
    return y.astype(np.float32)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """``X[N, D]`` ~ 1 + N(0, 1) (non-zero mean), ``gamma[D]`` ~ 1 + 0.1 N(0, 1), ``beta[D]`` ~ 0.1 N(0, 1).

    Example::

        >>> import numpy as np
        >>> [a.shape for a in make_inputs({"N": 3, "D": 5}, np.random.default_rng(0))]
        [(3, 5), (5,), (5,)]
    """
    N, D = sizes["N"], sizes["D"]
    X = (1.0 + rng.standard_normal((N, D))).astype(np.float32)
    gamma = (1.0 + 0.1 * rng.standard_normal(D)).astype(np.float32)
    beta = (0.1 * rng.standard_normal(D)).astype(np.float32)
    return [X, gamma, beta]


def flops(sizes: dict) -> float:
    """``8*N*D``: mean (add), centre (subtract), variance (multiply, add), normalize, scale, shift (3 ops)
    per element, plus ``2*N`` for the per-row ``sqrt(var + eps)``.

    Example::

        >>> flops({"N": 2, "D": 3})
        52.0
    """
    N, D = sizes["N"], sizes["D"]
    return 8.0 * N * D + 2.0 * N


_PLACEMENTS = {
    # placement -> (stages computed inside Y's row loop, readers first; stages at the root; inlined stages)
    "row": (("var", "xc", "mean"), (), ()),
    "root": ((), ("mean", "xc", "var"), ()),
    "inline_xc": ((), ("mean", "var"), ("xc",)),
    "inline_xc_var_row": (("var",), ("mean",), ("xc",)),
}


def space(sizes: dict) -> Space:
    """The tuner's space: where the statistics and the centred rows are computed (inside the row loop of ``Y``,
    each in a pass of its own at the root, or ``xc`` inlined with the mean at the root and the variance at the
    root or inside the row loop), the vector widths of the elementwise loops and of the reductions over ``d``,
    and the rows each parallel iteration handles.

    Example::

        >>> space(WORKLOAD.sizes()).size
        2304
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> sp = space(sz)
        >>> "# parallel" in sp.schedule(tl.op(SOURCE), sz, sp.config_at(0)).lower()
        True
    """
    knobs = rowwise_knobs(sizes, _PLACEMENTS, "mean, xc and var inside the row loop of Y; each at the root; or xc "
                          "inlined, the mean at the root and the variance at the root or inside the row loop",
                          "xc and Y", "the mean and the variance")
    return Space("layernorm", knobs, apply_config)


def apply_config(s, cfg: dict) -> None:
    """Apply a config of :func:`space` to the schedule ``s`` (public primitives only).

    Example::

        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> s = tl.schedule(tl.op(SOURCE), **sz)
        >>> apply_config(s, {"placement": "row", "vec": 8, "vec_reduce": 8, "rows": 2})
        >>> s["Y"].loops(), s["var"].loops()
        (['n_o', 'n_i', 'd_o', 'd_i'], ['n', 'd_o', 'd_i'])
    """
    widths = {"Y": cfg["vec"], "xc": cfg["vec"], "var": cfg["vec_reduce"], "mean": cfg["vec_reduce"]}
    apply_rowwise(s, "Y", _PLACEMENTS[cfg["placement"]], widths, cfg["rows"])


def numpy_fast(X, gamma, beta, **sizes):
    """Row mean and variance with numpy's float32 reductions, then the scale and shift in place.

    Example::

        >>> import numpy as np
        >>> X, gamma, beta = make_inputs({"N": 3, "D": 5}, np.random.default_rng(0))
        >>> Y = numpy_fast(X, gamma, beta)
        >>> Y.dtype, bool(np.allclose(Y, reference(X, gamma, beta), atol=1e-5))
        (dtype('float32'), True)
    """
    xc = X - X.mean(axis=1, keepdims=True)
    var = np.mean(xc * xc, axis=1, keepdims=True)
    var += np.float32(EPS)
    xc /= np.sqrt(var)
    xc *= gamma
    xc += beta
    return xc


def torch_fast(torch, X, gamma, beta, **sizes):
    """``torch.nn.functional.layer_norm`` over the last axis (``normalized_shape=(D,)``) with ``gamma`` as the
    weight, ``beta`` as the bias and ``eps=1e-5``, in float32; PyTorch uses the biased variance (divided by
    ``D``), as the DSL program and :func:`reference` do.

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as CPU tensors and gives the
    same ``Y[N, D]``.

    Example::

        import numpy as np
        import torch
        X, gamma, beta = make_inputs({"N": 3, "D": 5}, np.random.default_rng(0))
        Y = torch_fast(torch, *(torch.from_numpy(a) for a in (X, gamma, beta)))   # (3, 5)
    """
    return torch.nn.functional.layer_norm(X, (X.shape[-1],), gamma, beta, eps=EPS)


WORKLOAD = Workload(
    name="layernorm",
    source=SOURCE,
    presets={
        # BERT-base hidden states: 128 tokens x 768 features.
        "bert": {"N": 128, "D": 768},
        "1024": {"N": 1024, "D": 1024},
        "small": {"N": 8, "D": 40},
    },
    default_preset="bert",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="Layer normalization Y[N, D] of the rows of X[N, D] with gamma[D], beta[D], eps 1e-5 "
    "(two-pass mean and variance).",
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
)
