"""Schedules: how a program's loops are arranged, kept as data (a list of primitive applications).

The default schedule computes every stage at the root, its loops in the order of its output indices with
reduction loops innermost.

>>> import tensorlang as tl
>>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] + 1.0"), N=4)
>>> print(s.lower())
def f(A: f32[4], B: f32[4]):
  for i in 0:4:
    B[i] = A[i] + 1f
>>> tl.Schedule.from_json(s.to_json(), s.op).to_json() == s.to_json()
True
"""
from __future__ import annotations

import json

from .bind import BoundOp, bind
from .bounds import check_bounds
from .errors import ScheduleError
from .ir import Func
from .lower import lower as _lower
from .program import Op

SCHEDULE_FORMAT = 1


class Schedule:
    """A program with bound sizes and the primitives applied to it, in order."""

    def __init__(self, op: Op, sizes: dict, primitives: list | None = None):
        self.op = op
        self.bound: BoundOp = bind(op, sizes)
        self.sizes = dict(self.bound.sizes)
        self.primitives: list = list(primitives or [])

    def lowered(self, strict: bool = False) -> Func:
        """The loop IR, every access proven in bounds or guarded (`strict`: a guard is an internal error)."""
        return check_bounds(_lower(self.bound), strict=strict)

    def lower(self) -> str:
        """The loop IR as readable text."""
        return str(self.lowered())

    def to_json(self) -> str:
        """The schedule as JSON: program text, sizes and primitives."""
        return json.dumps({"format": SCHEDULE_FORMAT, "op": self.op.name, "source": self.op.source,
                           "sizes": self.sizes, "primitives": self.primitives}, sort_keys=True)

    @staticmethod
    def from_json(text: str, op: Op | None = None) -> "Schedule":
        """Rebuild a schedule from `to_json()` (the program is re-parsed from the JSON unless given)."""
        from .parse import parse
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ScheduleError(f"from_json: not JSON: {e}") from None
        if not isinstance(data, dict) or data.get("format") != SCHEDULE_FORMAT:
            raise ScheduleError(f"from_json: not a tensorlang schedule (format {SCHEDULE_FORMAT} expected)")
        return Schedule(op if op is not None else parse(data["source"]), data["sizes"], data["primitives"])

    def key(self) -> str:
        """A stable text of the primitives, for caching."""
        return json.dumps(self.primitives, sort_keys=True)

    def __str__(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        lines = [f"s = tl.schedule(op, {sizes})"]
        return "\n".join(lines)


def schedule(op: Op, **sizes: int) -> Schedule:
    """The default schedule of `op` for these sizes, ready to transform.

    >>> import tensorlang as tl
    >>> tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]"), N=3).sizes
    {'N': 3}
    """
    return Schedule(op, sizes)
