"""A three-stage chain of elementwise math (tanh, exp, abs, mul, add, compare/select) on two matrices.

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.elementwise import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> A, B = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(A, B, **sizes).shape
    (20, 30)
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.workload import Workload
from tensorlang.space import Knob, Space, factors

# The select condition compares the inputs only, so it is decided exactly in f32 and f64 alike and the
# reference cannot take the other branch on a rounding difference.
SOURCE = """\
def elementwise(A: f32[N, M], B: f32[N, M]) -> E:
    T1[i, j] = tanh(A[i, j]) * B[i, j] + 1.0
    T2[i, j] = exp(-abs(T1[i, j])) + 0.5 * A[i, j]
    E[i, j] = select(A[i, j] > B[i, j], T1[i, j] * T2[i, j], T2[i, j] - T1[i, j])
"""


def reference(A: np.ndarray, B: np.ndarray, **sizes: int) -> np.ndarray:
    """The same chain with NumPy ufuncs (``np.tanh``, ``np.exp``, ``np.where``) in float64, cast to f32.

    Example::

        >>> import numpy as np
        >>> z = np.zeros((1, 1), np.float32)
        >>> float(reference(z, z)[0, 0])   # T1 = 1, T2 = exp(-1); A > B is false -> T2 - T1
        -0.6321205496788025
    """
    a = A.astype(np.float64)
    b = B.astype(np.float64)
    t1 = np.tanh(a) * b + 1.0
    t2 = np.exp(-np.abs(t1)) + 0.5 * a
    return np.where(A > B, t1 * t2, t2 - t1).astype(np.float32)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard-normal ``A[N, M]`` and ``B[N, M]``.

    Example::

        >>> import numpy as np
        >>> [a.shape for a in make_inputs({"N": 2, "M": 3}, np.random.default_rng(0))]
        [(2, 3), (2, 3)]
    """
    N, M = sizes["N"], sizes["M"]
    return [rng.standard_normal((N, M), dtype=np.float32), rng.standard_normal((N, M), dtype=np.float32)]


def flops(sizes: dict) -> float:
    """``11*N*M``: tanh, mul, add; abs, neg, exp, mul, add; compare, select, mul/sub per element.

    Example::

        >>> flops({"N": 2, "M": 3})
        66.0
    """
    return 11.0 * sizes["N"] * sizes["M"]


_FUSIONS = {
    # fusion -> (T1, T2): "inline", "root", or the loop of E they are computed at ("tile" or "row")
    "inline": ("inline", "inline"),
    "at_tile": ("tile", "tile"),
    "at_row": ("row", "row"),
    "root": ("root", "root"),
    "root_t1": ("root", "inline"),
}


def space(sizes: dict) -> Space:
    """The tuner's space: the vector width of the contiguous axis ``j``, how many vectors each step unrolls, where
    the intermediate stages ``T1`` and ``T2`` are computed (inlined into ``E``, inside ``E``'s vector-tile or row
    loop, each in a pass of its own at the root, or ``T1`` at the root and ``T2`` inlined), and the rows each
    parallel iteration handles.

    Example::

        >>> space(WORKLOAD.sizes()).size
        420
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> sp = space(sz)
        >>> "# parallel" in sp.schedule(tl.op(SOURCE), sz, sp.config_at(0)).lower()
        True
    """
    N, M = sizes["N"], sizes["M"]
    knobs = [
        Knob("vec", factors(M, 64), "vector width of the loops over j (1: not split)"),
        Knob("unroll", factors(M, 4), "vectors (or elements) of E per unrolled step"),
        Knob("fusion", tuple(_FUSIONS),
             "T1 and T2 inlined, computed inside E's tile or row loop, at the root, or T1 at the root, T2 inlined"),
        Knob("rows", factors(N, 8), "rows per iteration of the parallel loop"),
    ]
    return Space("elementwise", knobs, apply_config)


def apply_config(s, cfg: dict) -> None:
    """Apply a config of :func:`space` to the schedule ``s`` (public primitives only).

    Example::

        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> s = tl.schedule(tl.op(SOURCE), **sz)
        >>> apply_config(s, {"vec": 8, "unroll": 2, "fusion": "at_tile", "rows": 4})
        >>> s["E"].loops(), s["T1"].loops()
        (['i_o', 'i_i', 'j_o_o', 'j_o_i', 'j_i'], ['i', 'j_o', 'j_i'])
    """
    e = s["E"]
    rows, vec, unroll = cfg["rows"], cfg["vec"], cfg["unroll"]
    io, ii = e.split("i", rows) if rows > 1 else ("i", "i")
    jo, ji = e.split("j", vec) if vec > 1 else ("j", None)
    if unroll > 1:
        jo, ju = e.split(jo, unroll)
        e.unroll(ju)
    if ji:
        e.vectorize(ji)
    where = _FUSIONS[cfg["fusion"]]
    # each stage's own loops first, then the placements (a stage computed inside another is checked on its
    # region at every primitive that schedules it: placed last, it is checked once)
    for name, how in zip(("T1", "T2"), where):
        if how != "inline" and vec > 1:
            _, vi = s[name].split("j", vec)
            s[name].vectorize(vi)
    for name, how in zip(("T2", "T1"), reversed(where)):  # T2 first: it reads T1
        if how == "inline":
            s[name].compute_inline()
        elif how in ("tile", "row"):
            s[name].compute_at(e, jo if how == "tile" else ii)
        else:
            s[name].parallel(s[name].split("i", rows)[0] if rows > 1 else "i")
    e.parallel(io)


def numpy_fast(A, B, **sizes):
    """The three stages as whole-array float32 numpy operations, reusing temporaries in place.

    Example::

        >>> import numpy as np
        >>> A, B = make_inputs({"N": 3, "M": 4}, np.random.default_rng(0))
        >>> E = numpy_fast(A, B)
        >>> E.dtype, bool(np.allclose(E, reference(A, B), atol=1e-6))
        (dtype('float32'), True)
    """
    t1 = np.tanh(A)
    t1 *= B
    t1 += np.float32(1.0)
    t2 = np.abs(t1)
    np.negative(t2, out=t2)
    np.exp(t2, out=t2)
    t2 += np.float32(0.5) * A
    return np.where(A > B, t1 * t2, np.subtract(t2, t1, out=t2))


def torch_fast(torch, A, B, **sizes):
    """The same chain with PyTorch ops in float32, the temporaries updated in place (``A`` and ``B`` are not
    changed): ``T1 = tanh(A) * B + 1``, ``T2 = exp(-|T1|) + 0.5 * A``, ``E = where(A > B, T1 * T2, T2 - T1)``.

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as CPU tensors and gives the
    same ``E[N, M]``.

    Example::

        import numpy as np
        import torch
        A, B = make_inputs({"N": 2, "M": 3}, np.random.default_rng(0))
        E = torch_fast(torch, torch.from_numpy(A), torch.from_numpy(B))   # (2, 3)
    """
    t1 = torch.tanh(A).mul_(B).add_(1.0)
    t2 = torch.abs(t1).neg_().exp_().add_(A, alpha=0.5)
    product = t1 * t2
    return torch.where(A > B, product, t2.sub_(t1))


WORKLOAD = Workload(
    name="elementwise",
    source=SOURCE,
    presets={
        "1024": {"N": 1024, "M": 1024},
        "4096x1024": {"N": 4096, "M": 1024},
        "small": {"N": 20, "M": 30},
    },
    default_preset="1024",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="Elementwise chain over A[N, M], B[N, M]: T1 = tanh(A)*B + 1, T2 = exp(-|T1|) + A/2, "
    "E = select(A > B, T1*T2, T2 - T1).",
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
)
