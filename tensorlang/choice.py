"""Which schedule a kernel gets when the caller gives none: one function decides, for `tl.build` and the graph
compiler alike.

In order: the best tuned record of the program at these sizes for this CPU and thread count in the tuning
database ("tuned"), the hand schedule of a built-in workload of the same loop structure ("hand"), the
auto-scheduler's zero-trial pick ("auto"); the naive loop nest ("naive") only when asked. A schedule the caller
built is "given". Programs are matched by structure, not text: the names of the program, its inputs, stages, sizes
and indices, its spacing and comments do not matter (:attr:`tensorlang.program.Op.structure`), and for a hand
schedule neither does the arithmetic between the reads (:attr:`tensorlang.program.Op.loop_structure`).

The core cannot look into the tuning database or the operator library (they sit on the floors above it), so
those floors register *schedule sources*: functions ``source(op, sizes, *, db, threads) -> Schedule | None``,
found through the entry point group ``tensorlang.schedule_sources`` (tensorlang's own: ``tuned`` in
``tuner/lookup.py``, ``hand`` in ``schedules/lookup.py``) or :func:`register_schedule_source`.

>>> import tensorlang as tl
>>> op = tl.op("def f(A: f32[N, M]) -> B:\\n    B[i, j] = A[i, j] * 2.0")
>>> s, source = choose_schedule(op, {"N": 64, "M": 64})
>>> source, "# vectorized" in s.lower()
('auto', True)
>>> choose_schedule(op, {"N": 64, "M": 64}, schedule="naive")[1]
'naive'
"""
from __future__ import annotations

import threading
import warnings

from .errors import BuildError
from .schedule import Schedule
from .sources import SourceRegistry

SOURCES = ("tuned", "hand", "auto", "naive", "given")
ENTRY_POINT_GROUP = "tensorlang.schedule_sources"
ORDER = ("tuned", "hand")  # the registered sources tried first, in this order; others follow by name

_REGISTRY = SourceRegistry("schedule source", ENTRY_POINT_GROUP, first=ORDER)
_lock = threading.Lock()  # the cache of picks, the warnings given


class StaleScheduleError(BuildError):
    """What a schedule source raises when the schedule it holds for a program does not apply to it (a tuning
    record that an older compiler wrote): the build's error when that source was asked for by name
    (``schedule="tuned"``); otherwise :func:`choose_schedule` warns once and asks the next source.

    >>> issubclass(StaleScheduleError, BuildError)
    True
    """


_warned: set[str] = set()


def register_schedule_source(name: str, fn) -> None:
    """Add (or replace) a schedule source: ``fn(op, sizes, *, db, threads)`` returns a Schedule or None.

    >>> register_schedule_source("never", lambda op, sizes, **kw: None)
    >>> "never" in sources()
    True
    >>> unregister_schedule_source("never")
    """
    _REGISTRY.register(name, fn, "register_schedule_source")


def unregister_schedule_source(name: str) -> None:
    """Remove a schedule source added by :func:`register_schedule_source` (nothing if there is none).

    >>> unregister_schedule_source("no such source")
    """
    _REGISTRY.unregister(name)


def sources() -> dict:
    """The schedule sources in the order they are asked: name -> function.

    >>> list(sources())[:2]
    ['tuned', 'hand']
    """
    return _REGISTRY.sources()


_picks: dict = {}  # (program key, sizes, threads, target) -> the pick's primitives (the most recent 256)


def _auto(op, sizes: tuple, threads: int, target_key: str) -> list:
    # keyed by the program's text, not the Op: Ops that differ only in their `where` ranges compare equal
    key = (op.key, sizes, threads, target_key)
    with _lock:
        hit = _picks.get(key)
    if hit is not None:
        return hit
    from .autosched.space import generated_space
    space = generated_space(op, dict(sizes), threads)
    prims = list(space.schedule(op, dict(sizes), space.default()).primitives)
    with _lock:
        _picks[key] = prims
        while len(_picks) > 256:
            _picks.pop(next(iter(_picks)))
    return prims


def auto_schedule(op, sizes: dict, threads: int | None = None) -> Schedule:
    """The auto-scheduler's zero-trial pick for `op` at `sizes` (rules, no measurement; deterministic).

    >>> import tensorlang as tl
    >>> s = auto_schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] + 1.0"), {"N": 1000}, threads=1)
    >>> "# vectorized" in s.lower()
    True
    """
    from .target import host_target
    from .threadpool import num_threads
    prims = _auto(op, tuple(sorted(sizes.items())), threads or num_threads(), host_target().key)
    return Schedule(op, sizes, prims)  # a fresh schedule: the caller may change it


def _missing(schedule: str, sizes: dict, threads: int, db) -> str:
    """Why an explicit request found nothing, and what to do instead."""
    if schedule == "hand":
        return ("no built-in workload with a hand schedule has its loop structure (up to names); build it without "
                "schedule= for the auto-scheduler's pick")
    where = f"the tuning database {db}" if db is not None else \
        "the default tuning database (TENSORLANG_DB, else the cache folder's tuning.db)"
    at = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return (f"{where} has no record of it at {at} on this CPU with {threads} thread{'s' * (threads != 1)}; tune "
            "it first (tensorlang.tuner.tune, or tensorlang tune), or build it without schedule=")


def choose_schedule(op, sizes: dict, *, db=None, schedule: str | None = None,
                    threads: int | None = None) -> tuple[Schedule, str]:
    """The schedule `tl.build(op, **sizes)` compiles, and its source (see the module docstring).

    ``schedule``: None (choose), "naive", "auto" (skip the database and the hand schedules), "hand" or "tuned"
    (that source, or a BuildError saying why there is none: never another source). ``db``: the tuning database
    to look in (default: ``TENSORLANG_DB``, else the cache folder's); a missing or empty one is no error. A
    source's schedule that no longer applies (:class:`StaleScheduleError`) is an error when that source was asked
    for, else a warning (once) and the next source.

    >>> import tensorlang as tl
    >>> choose_schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]"), {"N": 4}, schedule="best")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tensorlang.errors.BuildError: build(schedule='best'): choose one of None (tuned, else hand, else auto), ...
    """
    from .threadpool import num_threads
    if schedule not in (None, "naive", "auto", "hand", "tuned"):
        raise BuildError(f"build(schedule={schedule!r}): choose one of None (tuned, else hand, else auto), "
                         "'tuned', 'hand', 'auto', 'naive'")
    if schedule == "naive":
        return Schedule(op, sizes), "naive"
    threads = threads or num_threads()
    if schedule != "auto":
        bound = Schedule(op, sizes).sizes  # checks the sizes before any source sees them
        for name, fn in sources().items():
            if schedule is not None and name != schedule:
                continue
            try:
                found = fn(op, dict(bound), db=db, threads=threads)
            except StaleScheduleError as e:
                if schedule is not None:  # asked for by name: an explicit request that cannot be met
                    raise
                with _lock:
                    first = str(e) not in _warned
                    _warned.add(str(e))
                if first:
                    warnings.warn(f"tensorlang: {e} (skipped: {op.name} gets the next schedule source)",
                                  stacklevel=3)
                continue
            if found is not None:
                return found, name if name in SOURCES else "given"
        if schedule is not None:
            raise BuildError(f"build(schedule={schedule!r}): {op.name} has no {schedule} schedule: "
                             + _missing(schedule, bound, threads, db))
    return auto_schedule(op, sizes, threads), "auto"
