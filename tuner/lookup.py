"""The "tuned" schedule source of :mod:`tensorlang.choice`: the best record of a program in the tuning database.

``tl.build(op, **sizes)`` (and the graph compiler) ask it first. It reads the database given (``db=``) or the
default one (``TENSORLANG_DB``, else the cache folder's), read-only; a missing database, or one without a record
for the task (program, sizes, this CPU, the thread count), answers None. Answers are kept until the file changes.

Example::

    >>> import tensorlang as tl
    >>> op = tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]")
    >>> tuned_schedule(op, {"N": 8}, db="/no/such/file.db", threads=1) is None
    True
"""
from __future__ import annotations

import os
import threading

import tensorlang as tl
from tensorlang.target import host_target
from tuner.database import Database, DatabaseError, default_db_path
from tuner.task import task_key

_cache: dict = {}
_lock = threading.Lock()


def tuned_schedule(op, sizes: dict, *, db=None, threads: int, **_) -> "tl.Schedule | None":
    """The schedule of the best valid record of `op` at `sizes` for this CPU and `threads` in the database `db`
    (default: the default database), or None when there is none. A file that is not a tuning database is a
    ``UsageError`` naming it.

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
    key = task_key(op.source, sizes, {"triple": t.triple, "cpu": t.cpu, "features": t.features}, threads)
    with _lock:
        hit = _cache.get((path, key))
    if hit is not None and hit[0] == stamp:
        text = hit[1]
    else:
        try:
            with Database(path, read_only=True) as database:
                rec = database.best(key)
        except DatabaseError as e:
            raise tl.UsageError(f"tuned schedules: {e}") from None
        text = rec.schedule if rec is not None else None
        with _lock:
            _cache[(path, key)] = (stamp, text)
    return tl.Schedule.from_json(text, op) if text else None
