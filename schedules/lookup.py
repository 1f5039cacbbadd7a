"""The "hand" schedule source of :mod:`tensorlang.choice`: a built-in workload's hand schedule, for a program
that is that workload's (the same text, up to comments and spacing).

Example::

    >>> import tensorlang as tl
    >>> from tensorlang import schedules
    >>> s = hand_schedule(tl.op(schedules.get("softmax").source), {"N": 64, "D": 256})
    >>> "# parallel" in s.lower()
    True
    >>> hand_schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]"), {"N": 4}) is None
    True
"""
from __future__ import annotations

import functools

import tensorlang as tl


@functools.lru_cache(maxsize=1)
def _by_key() -> dict:
    from tensorlang import schedules
    return {tl.op(w.source).key: w for w in schedules.WORKLOADS.values() if w.hand_schedule is not None}


def workload_of(op):
    """The built-in workload whose program `op` is (by its normalized text), or None.

    Example::

        >>> from tensorlang import schedules
        >>> workload_of(tl.op(schedules.get("matmul").source)).name
        'matmul'
    """
    from tensorlang import schedules
    for w in schedules.WORKLOADS.values():
        if tl.op(w.source).key == op.key:
            return w
    return None


def hand_schedule(op, sizes: dict, **_) -> "tl.Schedule | None":
    """The hand schedule of the built-in workload whose program `op` is, at `sizes`; None when it has none.

    Example::

        s = hand_schedule(tl.op(schedules.get("matmul").source), {"M": 64, "N": 64, "K": 64})
    """
    w = _by_key().get(op.key)
    if w is None:
        return None
    s = tl.schedule(op, **sizes)
    w.hand_schedule(s)
    return s
