"""The shared schedule template of row-wise normalisations (softmax, layernorm): statistics stages placed in the
row loop of the output, at the root or inlined, loops over ``d`` vectorized, rows split between threads.

Example::

    >>> import tensorlang as tl
    >>> from tensorlang.schedules.softmax import SOURCE, PLACEMENTS
    >>> s = tl.schedule(tl.op(SOURCE), N=4, D=40)
    >>> apply_rowwise(s, "Y", PLACEMENTS["row"], {"Y": 8, "e": 8, "sm": 8, "mx": 8}, rows=2)
    >>> s["Y"].loops()
    ['n_o', 'n_i', 'd_o', 'd_i']
"""
from __future__ import annotations

from tensorlang.space import Knob, factors


def rowwise_knobs(sizes: dict, placements, placement_doc: str, elementwise: str, reductions: str) -> list[Knob]:
    """The knobs of the row-wise template: where the statistics stages go (``placements``), the vector width of
    the ``elementwise`` loops over d and of the ``reductions`` over d, and the rows per parallel iteration.

    Example::

        >>> [k.name for k in rowwise_knobs({"N": 8, "D": 40}, ("row",), "", "e and Y", "max and sum")]
        ['placement', 'vec', 'vec_reduce', 'rows']
    """
    N, D = sizes["N"], sizes["D"]
    return [
        Knob("placement", tuple(placements), placement_doc),
        Knob("vec", factors(D, 64), f"vector width of the loops over d of {elementwise} (1: not split)"),
        Knob("vec_reduce", factors(D, 64), f"vector width of the loops over d of {reductions} (1: not split)"),
        Knob("rows", factors(N, 8), "rows per iteration of the parallel loop"),
    ]


def apply_rowwise(s, output: str, placement: tuple, widths: dict, rows: int) -> None:
    """Place the statistics stages, vectorize the loops over ``d`` and parallelise the rows.

    ``placement`` is (stages computed inside the output's row loop, readers first; stages at the root; inlined
    stages); ``widths`` maps each stage (and the output) to its vector width over ``d`` (1: not split);
    ``rows`` is the number of rows per parallel iteration (1: not split).

    Example (softmax with ``e`` inlined, the max and the sum each in a parallel pass of their own)::

        >>> import tensorlang as tl
        >>> from tensorlang.schedules.softmax import SOURCE, PLACEMENTS
        >>> s = tl.schedule(tl.op(SOURCE), N=4, D=40)
        >>> apply_rowwise(s, "Y", PLACEMENTS["inline_e"], {"Y": 8, "e": 8, "sm": 4, "mx": 4}, rows=1)
        >>> low = s.lower()
        >>> low.count("# parallel"), "allocate e" in low, "Y[n, d] = exp(X[n, d] - mx[n])*(1f/sm[n])" in low
        (3, False, True)
    """
    y = s[output]
    yo, yi = y.split("n", rows) if rows > 1 else ("n", "n")
    at_row, roots, inlined = placement
    for name in inlined:
        s[name].compute_inline()
    # each stage's own loops first, then the placements: a stage computed inside another is checked on its
    # region at every primitive that schedules it, so placing it last checks it once
    for name, width in widths.items():
        if width > 1 and name not in inlined:
            _, di = s[name].split("d", width)
            s[name].vectorize(di)
    for name in at_row:
        s[name].compute_at(y, yi)
    for name in roots:
        s[name].parallel(s[name].split("n", rows)[0] if rows > 1 else "n")
    y.parallel(yo)
