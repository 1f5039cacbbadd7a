"""Row-wise numerically stable softmax over the last axis of ``X[N, D]``.

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.softmax import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> (X,) = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> bool(np.allclose(WORKLOAD.reference(X, **sizes).sum(axis=1), 1.0))
    True
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.rowwise import apply_rowwise, rowwise_knobs
from tensorlang.schedules.workload import Workload
from tensorlang.space import Space

SOURCE = """\
def softmax(X: f32[N, D]) -> Y:
    mx[n] max= X[n, d]
    e[n, d] = exp(X[n, d] - mx[n])
    sm[n] += e[n, d]
    Y[n, d] = e[n, d] * (1.0 / sm[n])
"""


def reference(X: np.ndarray, **sizes: int) -> np.ndarray:
    """``exp(x - max) / sum(exp(x - max))`` along axis 1, in float64, rounded to float32.

    Example::

        >>> import numpy as np
        >>> reference(np.log(np.array([[1, 3]], np.float32))).tolist()
        [[0.25, 0.75]]
    """
    x = X.astype(np.float64)
    e = np.exp(x - np.max(x, axis=1, keepdims=True))
    return (e / np.sum(e, axis=1, keepdims=True)).astype(np.float32)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """``X[N, D]`` normal with standard deviation 2 (moderate logits).

    Example::

        >>> import numpy as np
        >>> [a.shape for a in make_inputs({"N": 3, "D": 5}, np.random.default_rng(0))]
        [(3, 5)]
    """
    return [(2.0 * rng.standard_normal((sizes["N"], sizes["D"]))).astype(np.float32)]


def flops(sizes: dict) -> float:
    """``5*N*D``: max, subtract, exp, add, scale per element (the reciprocal of each row's sum is taken once).

    Example::

        >>> flops({"N": 2, "D": 3})
        30.0
    """
    return 5.0 * sizes["N"] * sizes["D"]


def hand_width(D: int) -> int:
    """The hand schedule's vector width over ``d``: 64 lanes (four AVX-512 registers, so that the exponentials of
    four vectors overlap and the max and the sum keep four partial vectors), or the largest power of two in a
    shorter row.

    Example::

        >>> hand_width(1024), hand_width(33)
        (64, 32)
    """
    return min(64, 1 << (D.bit_length() - 1))


def hand_schedule(s) -> None:
    """Each row's max, exponentials and sum computed inside the row loop (in cache), every loop over d
    vectorized :func:`hand_width` wide (the max and the sum accumulate in vectors and combine their lanes once a
    row), rows split between threads.

    Example::

        >>> import tensorlang as tl
        >>> s = tl.schedule(tl.op(SOURCE), N=4, D=40)
        >>> hand_schedule(s)
        >>> "# parallel" in s.lower(), "allocate sm_acc: f32[32]" in s.lower()
        (True, True)
    """
    y = s["Y"]
    width = hand_width(s.sizes["D"])
    for name in ("sm", "e", "mx"):
        s[name].compute_at(y, "n")
    for name in ("Y", "e", "sm", "mx"):
        _, di = s[name].split("d", width)
        s[name].vectorize(di)
    y.parallel("n")


def hand_config(sizes: dict) -> dict:
    """The hand schedule as a config of :func:`space` (the same loop IR: tests/autosched/test_spaces.py).

    Example::

        >>> hand_config({"N": 1024, "D": 1024})
        {'placement': 'row', 'vec': 64, 'vec_reduce': 64, 'rows': 1}
    """
    width = hand_width(sizes["D"])
    return {"placement": "row", "vec": width, "vec_reduce": width, "rows": 1}


PLACEMENTS = {
    # placement -> (stages computed inside Y's row loop, readers first: e where sm is, mx where e is;
    #               stages at the root; inlined stages)
    "row": (("sm", "e", "mx"), (), ()),
    "root": ((), ("mx", "e", "sm"), ()),
    "inline_e": ((), ("mx", "sm"), ("e",)),
}



def space(sizes: dict) -> Space:
    """The tuner's space: where the row statistics and the exponentials are computed (inside the row loop, as in
    the hand schedule; each in a pass of its own at the root; or ``e`` inlined, its exponentials computed twice,
    with the max and the sum at the root), the vector widths of the elementwise loops and of the reductions over
    ``d``, and the rows each parallel iteration handles.

    The hand schedule is :func:`hand_config`: ``{"placement": "row", "vec": 64, "vec_reduce": 64, "rows": 1}``
    for rows of 64 or more.

    Example::

        >>> space(WORKLOAD.sizes()).size
        588
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> sp = space(sz)
        >>> "# parallel" in sp.schedule(tl.op(SOURCE), sz, sp.config_at(0)).lower()
        True
    """
    knobs = rowwise_knobs(sizes, PLACEMENTS, "max, exp and sum inside the row loop of Y; each at the root; or e "
                          "inlined, max and sum at the root", "e and Y", "the max and the sum")
    return Space("softmax", knobs, apply_config)


def apply_config(s, cfg: dict) -> None:
    """Apply a config of :func:`space` to the schedule ``s`` (public primitives only).

    Example::

        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> s = tl.schedule(tl.op(SOURCE), **sz)
        >>> apply_config(s, {"placement": "row", "vec": 16, "vec_reduce": 8, "rows": 2})
        >>> s["Y"].loops(), s["mx"].loops()
        (['n_o', 'n_i', 'd_o', 'd_i'], ['n', 'd_o', 'd_i'])
    """
    widths = {"Y": cfg["vec"], "e": cfg["vec"], "sm": cfg["vec_reduce"], "mx": cfg["vec_reduce"]}
    apply_rowwise(s, "Y", PLACEMENTS[cfg["placement"]], widths, cfg["rows"])


def numpy_fast(X, **sizes):
    """``e = exp(X - max); e /= sum(e)`` along rows, in float32, in place where possible (``X`` is not changed).

    Example::

        >>> import numpy as np
        >>> X = np.array([[0.0, 1.0, 2.0], [1000.0, 1000.0, 1000.0]], np.float32)
        >>> Y = numpy_fast(X)
        >>> bool(np.allclose(Y[0], np.exp([0, 1, 2]) / np.exp([0, 1, 2]).sum())), Y[1].tolist()
        (True, [0.3333333432674408, 0.3333333432674408, 0.3333333432674408])
    """
    e = X - X.max(axis=1, keepdims=True)
    np.exp(e, out=e)
    e /= e.sum(axis=1, keepdims=True)
    return e


def torch_fast(torch, X, **sizes):
    """``torch.softmax(X, dim=1)`` in float32 (PyTorch's fused, max-subtracting CPU kernel).

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as a CPU tensor and gives the
    same ``Y[N, D]``.

    Example::

        import numpy as np
        import torch
        (X,) = make_inputs({"N": 3, "D": 5}, np.random.default_rng(0))
        Y = torch_fast(torch, torch.from_numpy(X))   # rows sum to 1
    """
    return torch.softmax(X, dim=1)


WORKLOAD = Workload(
    name="softmax",
    source=SOURCE,
    presets={
        "1024": {"N": 1024, "D": 1024},
        # BERT-base attention probabilities: 12 heads x 128 queries, 128 keys.
        "bert_attn": {"N": 1536, "D": 128},
        # Vocabulary-sized rows.
        "wide": {"N": 32, "D": 32768},
        "small": {"N": 16, "D": 33},
    },
    default_preset="1024",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="Numerically stable softmax Y[N, D] over the rows of X[N, D] (max, exp, sum, divide).",
    hand_schedule=hand_schedule,
    hand_config=hand_config,
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
)
