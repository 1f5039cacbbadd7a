"""The "hand" schedule source of :mod:`tensorlang.choice`: a built-in workload's hand schedule, for a program of that
workload's loop structure (:attr:`tensorlang.program.Op.loop_structure`): the same inputs, stages, index patterns,
ranges and reductions, whatever the names of the program, its inputs, stages, sizes and indices, its spacing and
comments, and the arithmetic between the reads. The hand schedule runs on the workload's own program; its
primitives are then renamed and replayed on the program asked about (:meth:`tensorlang.Schedule.renamed`), so its
loop IR is the hand schedule's, up to names.

Example::

    >>> import tensorlang as tl
    >>> from tensorlang import schedules
    >>> s = hand_schedule(tl.op(schedules.get("softmax").source), {"N": 64, "D": 256})
    >>> "# parallel" in s.lower()
    True
    >>> mine = tl.op("def mm(X: f32[P, Q], Y: f32[Q, R]) -> Z:\\n    Z[m, n] += X[m, q] * Y[q, n]")
    >>> "Z_local" in hand_schedule(mine, {"P": 64, "Q": 32, "R": 64}).lower()
    True
    >>> hand_schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]"), {"N": 4}) is None
    True
"""
from __future__ import annotations

import functools

import tensorlang as tl
from tensorlang.choice import StaleScheduleError


@functools.lru_cache(maxsize=1)
def _builtins() -> tuple:
    from tensorlang import schedules
    return tuple((w, tl.op(w.source)) for w in schedules.WORKLOADS.values())


def workload_of(op, hand: bool = False):
    """``(workload, its program, renaming)``: the built-in workload whose program `op` is up to names, spacing and
    comments, and the :class:`tensorlang.program.Renaming` from the workload's names to `op`'s; None when there is
    none. ``hand=True``: among the workloads with a hand schedule, the one whose program `op` is, else the one whose
    loop structure it has (the arithmetic between the reads may differ).

    Example::

        >>> mm = tl.op("def mm(X: f32[P, Q], Y: f32[Q, R]) -> Z:\\n    Z[m, n] += X[m, q] * Y[q, n]")
        >>> w, _, names = workload_of(mm)
        >>> w.name, names.sizes, names.axes["C"]
        ('matmul', {'M': 'P', 'K': 'Q', 'N': 'R'}, {'i': 'm', 'j': 'n', 'k': 'q'})
        >>> workload_of(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]")) is None
        True
    """
    candidates = [(w, wop) for w, wop in _builtins() if not hand or w.hand_schedule is not None]
    for kind in ("structure", "loop_structure") if hand else ("structure",):
        for w, wop in candidates:
            names = getattr(wop, kind).renaming(getattr(op, kind))
            if names is not None:
                return w, wop, names
    return None


def sizes_of(names, sizes: dict) -> dict:
    """`sizes` of a program, by the names of the workload that `names` (from :func:`workload_of`) maps onto it.

    Example::

        >>> mm = tl.op("def mm(X: f32[P, Q], Y: f32[Q, R]) -> Z:\\n    Z[m, n] += X[m, q] * Y[q, n]")
        >>> _, _, names = workload_of(mm)
        >>> sizes_of(names, {"P": 64, "Q": 32, "R": 48})
        {'M': 64, 'K': 32, 'N': 48}
    """
    return {w: sizes[mine] for w, mine in names.sizes.items()}


def hand_schedule(op, sizes: dict, **_) -> tl.Schedule | None:
    """The hand schedule of the built-in workload of `op`'s loop structure (see the module docstring) at `sizes`,
    in `op`'s names; None when no workload with a hand schedule has that structure.

    Example::

        s = hand_schedule(tl.op(schedules.get("matmul").source), {"M": 64, "N": 64, "K": 64})
    """
    found = workload_of(op, hand=True)
    if found is None:
        return None
    w, wop, names = found
    same = names.is_identity()  # the workload's own names: nothing to rename
    try:
        s = tl.schedule(op, **sizes) if same else tl.schedule(wop, **sizes_of(names, sizes))
        w.hand_schedule(s)
        return s if same else s.renamed(op, names)
    except tl.ScheduleError as e:
        raise StaleScheduleError(f"the hand schedule of {w.name} does not apply to {op.name}, whose loops are "
                                 f"{w.name}'s up to names: {e}") from None
