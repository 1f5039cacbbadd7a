"""The "tuned" schedule source of :mod:`tensorlang.choice`: the best record of a program in the tuning database.

``tl.build(op, **sizes)`` (and the graph compiler) ask it first. It reads the database given (``db=``) or the
default one (``TENSORLANG_DB``, else the cache folder's), read-only; a missing database, or one without a record
for the task (program, sizes, this CPU, the thread count), answers None. Answers are kept until the file changes.
A best record whose schedule no longer applies to the program is a :class:`tensorlang.choice.StaleScheduleError`
naming the database, the record and the fix.

Records are keyed by the program's text (:func:`tensorlang.tuner.task.task_key`), so the keys that databases and
datasets already hold stay valid. A program with no record under its own text that is a built-in workload's up to
names (:func:`tensorlang.schedules.lookup.workload_of`) takes that workload's best record, whose schedule is replayed
in the program's names (:meth:`tensorlang.Schedule.renamed`); tuning such a program records under the workload's
task (:meth:`tensorlang.tuner.task.Task.from_source`), so either finds the other's records.

Example::

    >>> import tensorlang as tl
    >>> op = tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]")
    >>> tuned_schedule(op, {"N": 8}, db="/no/such/file.db", threads=1) is None
    True
"""
from __future__ import annotations

import os
import shlex
import threading

import tensorlang as tl
from tensorlang.choice import StaleScheduleError
from tensorlang.schedules.lookup import sizes_of, workload_of
from tensorlang.target import host_target
from tensorlang.tuner.records.database import Database, DatabaseError, default_db_path
from tensorlang.tuner.task import task_key

_cache: dict = {}
_lock = threading.Lock()


def tuned_schedule(op, sizes: dict, *, db=None, threads: int, **_) -> tl.Schedule | None:
    """The schedule of the best valid record of `op` at `sizes` for this CPU and `threads` in the database `db`
    (default: the default database), or None when there is none. A file that is not a tuning database is a
    ``UsageError`` naming it; a record whose schedule no longer applies to `op`, a ``StaleScheduleError`` naming
    the database, the record and the fix.

    Example::

        s = tuned_schedule(op, {"M": 512, "N": 512, "K": 512}, threads=2)   # after tensorlang tune ...
    """
    path = os.fspath(db) if db is not None else os.fspath(default_db_path())
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        return None
    try:  # records not yet checkpointed into the file are in its write-ahead log
        wal = os.stat(path + "-wal")
        stamp = (stamp, wal.st_size, wal.st_mtime_ns)
    except OSError:
        pass
    t = host_target()
    target = {"triple": t.triple, "cpu": t.cpu, "features": t.features}
    key = task_key(op.source, sizes, target, threads)
    rec, names = _best(path, stamp, key), None
    if rec is None and (found := workload_of(op)) is not None:  # the built-in workload's, in other names
        w, wop, names = found
        key = task_key(w.source, sizes_of(names, sizes), target, threads)
        rec = _best(path, stamp, key)
    if rec is None or not rec.schedule:
        return None
    try:
        if names is None:
            return tl.Schedule.from_json(rec.schedule, op)
        return tl.Schedule.from_json(rec.schedule, wop).renamed(op, names)
    except tl.ScheduleError as e:  # a record of an older compiler, whose primitives replay differently
        raise StaleScheduleError(
            f"tuning database {path}: record {rec.id} (trial {rec.trial}, tuned by tensorlang {rec.version}) of "
            f"task {key} no longer applies to {op.name}: {e}; delete the task's records (sqlite3 {shlex.quote(path)} "
            f"\"DELETE FROM records WHERE task_key = '{key}'\") and tune it again") from None


def _best(path: str, stamp, key: str):
    """The best record of task `key` in the database at `path` (kept while its file's `stamp` holds), or None."""
    with _lock:
        hit = _cache.get((path, key))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    try:
        with Database(path, read_only=True) as database:
            rec = database.best(key)
    except DatabaseError as e:
        raise tl.UsageError(f"tuned schedules: {e}") from None
    with _lock:
        _cache[(path, key)] = (stamp, rec)
    return rec
