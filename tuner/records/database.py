"""The tuning records database: every measured (or failed) trial of the auto-tuner, in one SQLite file.

A record holds the task key, the workload, its sizes, the target, the knob values (config), the schedule's JSON, every
timed repeat, the error if the trial failed, the search strategy, the seed, the tensorlang version, the time it was
measured and, where it is known, its disturbance: what other processes took while it was timed (a
:class:`tensorlang.tuner.measure.disturbance.Disturbance`: the CPUs they used on average, the CPUs counted, the seconds
timed and the figure's uncertainty), so that research can leave out measurements a busy machine disturbed
(``records(..., quiet_only=True)``). The file is ``$TENSORLANG_DB`` or an explicit path; by default it lies in the
user's cache folder (``$XDG_CACHE_HOME/tensorlang/tuning.db``, else ``~/.cache/tensorlang/tuning.db``).

Storage is the standard :mod:`sqlite3` module (never pickle): dict and tuple fields are JSON text columns, the
median time and the GFLOP/s are REAL columns for sorting. The schema is versioned in a ``meta`` table. The file
is in WAL mode with ``synchronous=NORMAL`` and every record is committed in its own transaction, so killing the
tuner (even with ``kill -9``) at any moment loses at most the record in flight; a power loss may drop the last
few commits but never corrupts the file. Several processes may open the same file at once (readers while a
writer adds, or several writers creating a new file together); a busy timeout makes writers wait for each other,
and a file another process still holds locked after it is reported as locked.

Example::

    >>> db = Database(":memory:")
    >>> rid = db.add(Record("matmul/N=64", "matmul", {"N": 64}, {"arch": "x86_64"}, {"tile": 8}, None,
    ...                     times=(0.002, 0.001, 0.003), flops=2 * 64 ** 3))
    >>> best = db.best("matmul/N=64")
    >>> best.id == rid, best.median_s, round(best.gflops, 3)
    (True, 0.002, 0.262)
    >>> db.close()
"""
from __future__ import annotations

import json
import math
import os
import pathlib
import sqlite3
import statistics
import time
from dataclasses import dataclass
from typing import Any

from tensorlang import __version__ as _TENSORLANG_VERSION
from tensorlang.errors import TensorlangError, UsageError
from tensorlang.space import config_key as _config_key
from tensorlang.tuner.measure.disturbance import Disturbance

__all__ = ["ERROR_KINDS", "SCHEMA_VERSION", "Database", "DatabaseError", "Record", "default_db_path"]

#: Version of the database layout. A file with a newer version is refused (upgrade tensorlang to read it).
SCHEMA_VERSION = 1

#: What went wrong in a failed trial: the schedule was refused, the build failed or ran past its time limit, the kernel
#: crashed, ran past its time limit, gave a wrong result, or failed at run time in another way; or, on a Dask cluster
#: (tuner/measure/cluster.py), the workers measuring it died or stopped answering too many times (lost).
ERROR_KINDS = ("schedule", "build", "build_timeout", "crash", "timeout", "wrong", "runtime", "lost")

_MEMORY = ":memory:"
_BUSY_TIMEOUT_S = 60.0

_SCHEMA = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE records (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    task_key   TEXT NOT NULL,
    workload   TEXT NOT NULL,
    sizes      TEXT NOT NULL,   -- JSON object
    target     TEXT NOT NULL,   -- JSON object
    config     TEXT NOT NULL,   -- JSON object: knob values
    config_key TEXT NOT NULL,   -- canonical JSON of config
    schedule   TEXT,            -- the Schedule's JSON text
    times      TEXT NOT NULL,   -- JSON array: every timed repeat, seconds
    median_s   REAL,            -- NULL for invalid records
    gflops     REAL,            -- NULL for invalid records or unknown flops
    error_kind TEXT,            -- NULL when valid
    error      TEXT,
    strategy   TEXT NOT NULL,
    seed       INTEGER,
    trial      INTEGER NOT NULL,
    threads    INTEGER NOT NULL,
    flops      REAL NOT NULL,
    version    TEXT NOT NULL,   -- tensorlang version
    created    REAL NOT NULL    -- unix time
);
CREATE INDEX records_task ON records (task_key);
CREATE INDEX records_task_config ON records (task_key, config_key);
"""

# Optional since schema version 1 (created at the first re-timing; older tensorlang versions ignore it): the top
# candidates of a task timed again, longer and interleaved, to choose the best without the luck of one short
# measurement. A batch covers the task's records up to ``upto_id``.
_RETIMES = """
CREATE TABLE IF NOT EXISTS retimes (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    task_key   TEXT NOT NULL,
    batch      INTEGER NOT NULL,
    upto_id    INTEGER NOT NULL, -- the highest records.id of the task when the batch was timed
    config_key TEXT NOT NULL,
    times      TEXT NOT NULL,    -- JSON array: every timed repeat of every round, seconds
    median_s   REAL NOT NULL,
    created    REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS retimes_task ON retimes (task_key, batch);
"""

# Optional since schema version 1 (created by the first record that has a disturbance figure; older tensorlang
# versions ignore it): what other processes took while a record was timed (tuner/measure/disturbance.py).
_DISTURBANCES = """
CREATE TABLE IF NOT EXISTS disturbances (
    record_id   INTEGER PRIMARY KEY, -- records.id
    others_cpus REAL NOT NULL,       -- CPUs other processes used on average while it was timed
    cpus        INTEGER NOT NULL,    -- the CPUs counted (those the measuring process could run on)
    seconds     REAL NOT NULL,       -- how long it was timed
    uncertainty REAL NOT NULL        -- CPUs the figure may be off by (/proc/stat's tick rounding)
)
"""
_DISTURBANCE_COLUMNS = ("others_cpus", "cpus", "seconds", "uncertainty")

_COLUMNS = ("id", "task_key", "workload", "sizes", "target", "config", "schedule", "times", "error_kind", "error",
            "strategy", "seed", "trial", "threads", "flops", "version", "created")


class DatabaseError(TensorlangError):
    """The tuning database cannot be used: the file is not a SQLite database, it was written by a newer
    tensorlang, it cannot be opened, or the Database was closed.

    Example::

        >>> db = Database(":memory:")
        >>> db.close()
        >>> try:
        ...     db.count("t")
        ... except DatabaseError as e:
        ...     print(e)
        tuning database :memory: is closed
    """


def _locked(e: sqlite3.Error) -> bool:
    """True when SQLite answered SQLITE_BUSY ("database is locked"): another connection holds a lock that this one
    needs, and trying again later may succeed."""
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF == sqlite3.SQLITE_BUSY
    return "database is locked" in str(e)


def _locked_error(path, e: sqlite3.Error) -> DatabaseError:
    return DatabaseError(f"tuning database {path} is locked by another process: still {str(e)!r} after waiting "
                         f"{_BUSY_TIMEOUT_S:g} s; try again once that process is done, or pass --db with another "
                         "file")


def _writable(path) -> bool:
    if not isinstance(path, pathlib.Path):
        return True
    target = path if path.exists() else path.parent
    return os.access(target, os.W_OK)


def default_db_path() -> pathlib.Path:
    """Where the tuning database lives when no path is given: ``$TENSORLANG_DB`` if set (and not blank), else
    ``$XDG_CACHE_HOME/tensorlang/tuning.db`` (when that is an absolute path), else ``~/.cache/tensorlang/tuning.db``.

    Example::

        >>> import os
        >>> from unittest import mock
        >>> with mock.patch.dict(os.environ, {"TENSORLANG_DB": "/tmp/my-tuning.db"}):
        ...     print(default_db_path())
        /tmp/my-tuning.db
        >>> with mock.patch.dict(os.environ, {"TENSORLANG_DB": " ", "XDG_CACHE_HOME": "/tmp/cache"}):
        ...     print(default_db_path())
        /tmp/cache/tensorlang/tuning.db
    """
    env = os.environ.get("TENSORLANG_DB")
    if env and env.strip():  # empty or blank: unset
        try:
            return pathlib.Path(env).expanduser()
        except RuntimeError as e:  # ~user that does not exist
            raise DatabaseError(f"cannot expand ~ in {env!r}: {e}") from None
    xdg = os.environ.get("XDG_CACHE_HOME")
    # the XDG spec says a relative path in $XDG_CACHE_HOME is invalid and must be ignored
    cache = pathlib.Path(xdg) if xdg and os.path.isabs(xdg) else pathlib.Path.home() / ".cache"
    return cache / "tensorlang" / "tuning.db"


@dataclass(frozen=True)
class Record:
    """One trial of the tuner: what was built (task, workload, sizes, target, config, schedule) and what came of
    it (every timed repeat, or the kind of error and its message).

    ``config`` is the knob values (a JSON-able dict), ``schedule`` the Schedule's JSON text, ``times`` every timed
    repeat in seconds. ``error_kind`` is None for a valid record, else one of :data:`ERROR_KINDS`. ``flops`` is the
    floating point operations of one run (0 when unknown). ``created`` (unix time) and ``version`` (the tensorlang
    version) are filled by :meth:`Database.add` when left at 0 and ""; ``id`` is filled when read back. ``disturbance``
    is what other processes took while it was timed (:class:`tensorlang.tuner.measure.disturbance.Disturbance`; None
    where unknown: an invalid record, another OS, or a record of an older tensorlang).

    Example::

        >>> r = Record("add/N=1000", "add", {"N": 1000}, {}, {"vec": 8}, None, times=[3e-6, 1e-6, 2e-6], flops=1000)
        >>> r.ok, r.times, r.median_s, r.gflops
        (True, (3e-06, 1e-06, 2e-06), 2e-06, 0.5)
        >>> Record("add/N=1000", "add", {"N": 1000}, {}, {"vec": 8}, None, (), "build", "no LLVM").median_s is None
        True
    """

    task_key: str
    workload: str
    sizes: dict
    target: dict
    config: dict
    schedule: str | None
    times: tuple[float, ...] = ()
    error_kind: str | None = None
    error: str | None = None
    strategy: str = ""
    seed: int | None = None
    trial: int = 0
    threads: int = 1
    flops: float = 0.0
    version: str = ""
    created: float = 0.0
    id: int | None = None
    disturbance: Disturbance | None = None

    def __post_init__(self):
        # accept any sequence of numbers for times; store a tuple of floats so records compare and read back equal
        object.__setattr__(self, "times", tuple(float(t) for t in self.times))

    @property
    def ok(self) -> bool:
        """True when the trial is valid (it built, ran and gave the right result).

        Example::

            >>> Record("t", "w", {}, {}, {}, None, (), "crash", "SIGSEGV").ok
            False
        """
        return self.error_kind is None

    @property
    def median_s(self) -> float | None:
        """The median of the timed repeats in seconds; None for an invalid record or one without times.

        Example::

            >>> Record("t", "w", {}, {}, {}, None, (4.0, 1.0, 2.0, 3.0)).median_s
            2.5
        """
        if not self.ok or not self.times:
            return None
        return float(statistics.median(self.times))

    @property
    def gflops(self) -> float | None:
        """GFLOP/s at the median time (``flops / median_s / 1e9``); None when invalid or the flops are unknown.

        Example::

            >>> Record("t", "w", {}, {}, {}, None, (0.5,), flops=2e9).gflops
            4.0
        """
        median = self.median_s
        if median is None or median <= 0 or self.flops <= 0:
            return None
        return self.flops / median / 1e9

    def config_key(self) -> str:
        """The canonical JSON text of the config (see :func:`tensorlang.space.config_key`): equal configs, equal keys.

        Example::

            >>> Record("t", "w", {}, {}, {"vec": 8, "tile": 4}, None, (1.0,)).config_key()
            '{"tile":4,"vec":8}'
        """
        return _config_key(self.config)


def _json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as e:
        raise UsageError(f"record field {what} is not JSON-able: {e}") from None


def _validate(record: Record) -> None:
    if not isinstance(record.task_key, str) or not record.task_key:
        raise UsageError(f"record task_key must be a non-empty string, got {record.task_key!r}")
    for name in ("sizes", "target", "config"):
        if not isinstance(getattr(record, name), dict):
            raise UsageError(f"record field {name} must be a dict, got {type(getattr(record, name)).__name__}")
    if record.error_kind is not None and record.error_kind not in ERROR_KINDS:
        raise UsageError(f"unknown error_kind {record.error_kind!r}; expected None (valid) or one of "
                         f"{', '.join(ERROR_KINDS)}")
    bad = [t for t in record.times if not (math.isfinite(t) and t >= 0)]
    if bad:
        raise UsageError(f"record times must be finite and non-negative seconds, got {bad[0]!r}")
    if record.disturbance is not None and not isinstance(record.disturbance, Disturbance):
        raise UsageError(f"record disturbance must be a tensorlang.tuner.measure.disturbance.Disturbance or None, got "
                         f"{type(record.disturbance).__name__}")
    if record.seed is not None and not -2**63 <= int(record.seed) < 2**63:
        raise UsageError(f"record seed {record.seed} does not fit in a signed 64-bit integer")
    if record.error_kind is None:
        if not record.times:
            raise UsageError(f"valid record for task {record.task_key!r} has no times (name its error_kind)")
        if record.error:
            raise UsageError(f"valid record (error_kind None) has an error message {record.error!r}; "
                             f"name its error_kind")


def _from_row(row: tuple, path) -> Record:
    d = dict(zip(_COLUMNS, row))
    figure = row[len(_COLUMNS):]  # the disturbances columns, NULL where the record has none
    try:
        for name in ("sizes", "target", "config", "times"):
            d[name] = json.loads(d[name])
            if not isinstance(d[name], list if name == "times" else dict):
                raise TypeError(f"{name} is a {type(d[name]).__name__}")
        if figure and figure[0] is not None:
            d["disturbance"] = Disturbance.from_json(dict(zip(_DISTURBANCE_COLUMNS, figure)))
        return Record(**d)
    except (ValueError, TypeError, RecursionError) as e:  # a damaged file: bad JSON, times that are not numbers
        raise DatabaseError(f"tuning database {path}: record {d['id']} is damaged ({e})") from None


class Database:
    """The tuning records of one SQLite file (or ``":memory:"``), opened or created.

    ``path`` None means :func:`default_db_path`; missing parent folders are created. Opening checks the schema
    version: a file written by a newer tensorlang, or one that is not a SQLite database, raises
    :class:`DatabaseError` naming the file. Use the object from one thread (the ``sqlite3`` default); other
    processes may open the same file at the same time (opening waits up to 60 s for another process that holds it
    locked, then raises :class:`DatabaseError` saying so). A context manager closes it.

    Example::

        >>> with Database(":memory:") as db:
        ...     _ = db.add(Record("t", "w", {"N": 8}, {}, {"vec": 4}, None, (1e-3,)))
        ...     db.count("t")
        1
    """

    def __init__(self, path: str | os.PathLike | None = None, read_only: bool = False):
        if path is None:
            path = default_db_path()
        memory = os.fspath(path) == _MEMORY
        self.read_only = read_only and not memory
        if self.read_only:
            self._open_read_only(path)
            return
        try:
            self.path: pathlib.Path | str = _MEMORY if memory else pathlib.Path(path).expanduser()
        except RuntimeError as e:  # ~user that does not exist
            raise DatabaseError(f"cannot open tuning database {os.fspath(path)}: {e}") from None
        self._conn: sqlite3.Connection | None = None
        if not memory:
            if self.path.is_dir():
                raise DatabaseError(f"cannot open tuning database {self.path}: it is a folder; name a file in it")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise DatabaseError(f"cannot create the folder of tuning database {self.path}: {e}") from None
        try:
            # isolation_level=None: autocommit, each statement is its own transaction unless we BEGIN one
            conn = sqlite3.connect(self.path if memory else os.fspath(self.path), timeout=_BUSY_TIMEOUT_S,
                                   isolation_level=None)
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot open tuning database {self.path}: {e}") from None
        try:
            self._open(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _open_read_only(self, path) -> None:
        """Open an existing file for reading only (``best``, ``bench --db``, ``tl.build``'s tuned schedules): no
        folder, schema or journal is created, and a file on read-only media is read as it is."""
        try:
            self.path = pathlib.Path(path).expanduser()
        except RuntimeError as e:
            raise DatabaseError(f"cannot open tuning database {os.fspath(path)}: {e}") from None
        self._conn = None
        if self.path.is_dir():
            raise DatabaseError(f"cannot open tuning database {self.path}: it is a folder; name a file in it")
        if not self.path.is_file():
            raise DatabaseError(f"tuning database {self.path} does not exist")
        uri = self.path.resolve().as_uri()
        last = None
        for query in ("?mode=ro", "?immutable=1"):  # immutable: a WAL file on media where no -shm can be made
            conn = None
            try:
                conn = sqlite3.connect(uri + query, uri=True, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
                tables = self._tables(conn)
                if "meta" not in tables:
                    conn.close()
                    raise DatabaseError(f"{self.path} is a SQLite database but not a tensorlang tuning database "
                                        f"(it has no meta table)")
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                if row is None or not str(row[0]).isdigit() or int(row[0]) > SCHEMA_VERSION:
                    conn.close()
                    raise DatabaseError(f"tuning database {self.path} has schema version "
                                        f"{row[0] if row else None!r}; tensorlang {_TENSORLANG_VERSION} reads "
                                        f"version {SCHEMA_VERSION}")
                self._conn = conn
                return
            except sqlite3.DatabaseError as e:
                if conn is not None:
                    conn.close()
                if _locked(e):  # a writer holds it (past the busy timeout): immutable would read it mid-write
                    raise _locked_error(self.path, e) from None
                last = e
        raise DatabaseError(f"cannot read tuning database {self.path}: {last} (is it a tensorlang tuning "
                            "database?)")

    def _open(self, conn: sqlite3.Connection) -> None:
        # Several processes may open (and create) the file at once. Most statements wait for another's lock with
        # the busy timeout, but SQLite answers SQLITE_BUSY at once, without waiting, where waiting could deadlock:
        # "PRAGMA journal_mode = WAL" on a file not yet in WAL mode takes a read lock and then upgrades it to a
        # write lock, so it fails at once while another process creates the schema or switches the mode itself.
        # So a locked open is tried again from the start (every step is idempotent, the schema is created in one
        # transaction), with a growing pause, until the busy timeout has passed in all.
        deadline = time.monotonic() + _BUSY_TIMEOUT_S
        pause = 0.001
        while True:
            try:
                # the busy timeout first, before any statement touches the file; no attempt waits past the deadline
                conn.execute(f"PRAGMA busy_timeout = {max(1, int((deadline - time.monotonic()) * 1000))}")
                row = self._open_once(conn)
                conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT_S * 1000)}")  # for every later statement
                break
            except sqlite3.DatabaseError as e:
                if "readonly" in str(e).lower() or "read-only" in str(e).lower() or not _writable(self.path):
                    raise DatabaseError(f"tuning database {self.path} is read-only ({e}); tuning needs to write to "
                                        "it: copy it somewhere writable, or pass --db with another file (best, "
                                        "bench --db, show --best and export --best read it as it is)") from None
                if not _locked(e):
                    raise DatabaseError(f"cannot use tuning database {self.path}: {e} "
                                        f"(is it a tensorlang tuning database?)") from None
                left = deadline - time.monotonic()
                if left <= 0:
                    raise _locked_error(self.path, e) from None
                time.sleep(min(pause, left))
                pause = min(2 * pause, 0.1)
        try:
            version = int(row[0]) if row is not None else None
        except ValueError:
            version = None
        if version is None or version < 1:
            raise DatabaseError(f"tuning database {self.path} has no valid schema_version in its meta table "
                                f"(found {row[0] if row else None!r})")
        if version > SCHEMA_VERSION:
            raise DatabaseError(f"tuning database {self.path} has schema version {version}, newer than schema "
                                f"version {SCHEMA_VERSION} that tensorlang {_TENSORLANG_VERSION} reads: "
                                f"upgrade tensorlang to use it")
        # version < SCHEMA_VERSION: migrations go here once there is more than one schema version

    def _open_once(self, conn: sqlite3.Connection) -> tuple | None:
        """One attempt at opening: WAL mode, the schema created when the file has none; the schema_version row."""
        # read before anything writes: a file that is not a database fails here and is left untouched
        tables = self._tables(conn)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        if "meta" not in tables:
            conn.execute("BEGIN IMMEDIATE")  # another process may be creating the schema right now: wait for it
            try:
                tables = self._tables(conn)
                if "meta" not in tables:
                    if tables - {"sqlite_sequence"}:
                        raise DatabaseError(f"{self.path} is a SQLite database but not a tensorlang tuning "
                                            f"database (it has tables {', '.join(sorted(tables))} and no meta)")
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)",
                                     [("schema_version", str(SCHEMA_VERSION)),
                                      ("created_by", f"tensorlang {_TENSORLANG_VERSION}")])
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()

    @staticmethod
    def _tables(conn: sqlite3.Connection) -> set[str]:
        return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _writing(self) -> None:
        if self.read_only:
            raise DatabaseError(f"tuning database {self.path} was opened read-only; nothing can be written to it")

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise DatabaseError(f"tuning database {self.path} is closed")
        return self._conn

    def __repr__(self) -> str:
        return f"Database({os.fspath(self.path)!r})"

    def add(self, record: Record) -> int:
        """Insert one record and commit it (its own transaction); returns its id.

        ``created`` is set to now when 0 and ``version`` to the running tensorlang's when "". Raises UsageError for
        an ``error_kind`` not in :data:`ERROR_KINDS`, a valid record without times, or fields that are not JSON-able.

        Example::

            >>> db = Database(":memory:")
            >>> db.add(Record("t", "w", {}, {}, {"vec": 4}, None, (1e-3, 2e-3)))
            1
            >>> db.add(Record("t", "w", {}, {}, {"vec": 8}, None, (), "timeout", "ran past 10 s"))
            2
            >>> db.add(Record("t", "w", {}, {}, {"vec": 8}, None, ()))
            Traceback (most recent call last):
            ...
            tensorlang.errors.UsageError: valid record for task 't' has no times (name its error_kind)
        """
        self._writing()
        _validate(record)
        row = {
            "task_key": record.task_key, "workload": record.workload,
            "sizes": _json(record.sizes, "sizes"), "target": _json(record.target, "target"),
            "config": _json(record.config, "config"), "config_key": record.config_key(),
            "schedule": record.schedule, "times": _json(list(record.times), "times"),
            "median_s": record.median_s, "gflops": record.gflops,
            "error_kind": record.error_kind, "error": record.error, "strategy": record.strategy,
            "seed": None if record.seed is None else int(record.seed), "trial": int(record.trial),
            "threads": int(record.threads), "flops": float(record.flops),
            "version": record.version or _TENSORLANG_VERSION, "created": float(record.created or time.time()),
        }
        sql = f"INSERT INTO records ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})"
        conn = self._db()
        try:
            if record.disturbance is None:
                # autocommit mode: the INSERT is its own transaction, committed when execute returns
                return int(conn.execute(sql, tuple(row.values())).lastrowid)
            conn.execute("BEGIN IMMEDIATE")  # the record and its figure together, or neither
            try:
                conn.execute(_DISTURBANCES)
                rid = int(conn.execute(sql, tuple(row.values())).lastrowid)
                d = record.disturbance
                conn.execute(f"INSERT INTO disturbances (record_id, {', '.join(_DISTURBANCE_COLUMNS)}) "
                             "VALUES (?, ?, ?, ?, ?)", (rid, d.others_cpus, d.cpus, d.seconds, d.uncertainty))
                conn.execute("COMMIT")
                return rid
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot add a record to tuning database {self.path}: {e}") from None

    def _select(self, where: list[str], args: list, tail: str = "") -> list[Record]:
        conn = self._db()
        try:
            sql = f"SELECT {', '.join('records.' + c for c in _COLUMNS)}"
            if "disturbances" in self._tables(conn):
                sql += (f", {', '.join('disturbances.' + c for c in _DISTURBANCE_COLUMNS)} FROM records LEFT JOIN "
                        "disturbances ON disturbances.record_id = records.id")
            else:
                sql += " FROM records"
            if where:
                sql += " WHERE " + " AND ".join(where)
            rows = conn.execute(sql + " " + tail, args).fetchall()
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot read tuning database {self.path}: {e}") from None
        return [_from_row(row, self.path) for row in rows]

    @staticmethod
    def _filters(task_key: str | None, workload: str | None) -> tuple[list[str], list]:
        where, args = [], []
        if task_key is not None:
            where.append("task_key = ?")
            args.append(task_key)
        if workload is not None:
            where.append("workload = ?")
            args.append(workload)
        return where, args

    def records(self, task_key: str | None = None, workload: str | None = None,
                valid_only: bool = False, quiet_only: bool = False) -> list[Record]:
        """The records, in insertion order, of one task key and/or one workload (all when None); only the valid
        ones with ``valid_only``; with ``quiet_only``, without those timed while other processes took CPU their threads
        needed (:meth:`tensorlang.tuner.measure.disturbance.Disturbance.busy`; records without a figure are kept).

        Example::

            >>> from tensorlang.tuner.measure.disturbance import Disturbance
            >>> db = Database(":memory:")
            >>> for vec, kind in ((4, None), (8, "wrong"), (16, None)):
            ...     _ = db.add(Record("t", "w", {}, {}, {"vec": vec}, None, (1.0,), kind))
            >>> [r.config["vec"] for r in db.records("t")], [r.config["vec"] for r in db.records(valid_only=True)]
            ([4, 8, 16], [4, 16])
            >>> _ = db.add(Record("t", "w", {}, {}, {"vec": 32}, None, (1.0,), disturbance=Disturbance(2.0, 2, 0.1)))
            >>> [r.config["vec"] for r in db.records("t", valid_only=True, quiet_only=True)]
            [4, 16]
        """
        where, args = self._filters(task_key, workload)
        if valid_only:
            where.append("error_kind IS NULL")
        found = self._select(where, args, "ORDER BY records.id")
        if quiet_only:
            found = [r for r in found if r.disturbance is None or not r.disturbance.busy(r.threads)]
        return found

    def add_retimes(self, task_key: str, timings: list[tuple[dict, tuple]]) -> int:
        """Store one re-timing of a task's top candidates, ``[(config, times), ...]``, in one transaction; return
        its batch number. From then on :meth:`best` of the task follows it while no newer valid record exists.

        Example::

            >>> db = Database(":memory:")
            >>> _ = db.add(Record("t", "w", {}, {}, {"vec": 4}, None, (1.0,)))
            >>> _ = db.add(Record("t", "w", {}, {}, {"vec": 8}, None, (2.0,)))
            >>> db.best("t").config
            {'vec': 4}
            >>> db.add_retimes("t", [({"vec": 4}, (3.0, 3.1)), ({"vec": 8}, (2.5, 2.4))])
            1
            >>> db.best("t").config, db.retimed("t")[_config_key({"vec": 8})]
            ({'vec': 8}, 2.45)
        """
        self._writing()
        if not timings or any(not times or min(times) <= 0 for _, times in timings):
            raise UsageError("a re-timing needs at least one config, each with positive times")
        conn = self._db()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _RETIMES.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                (batch,) = conn.execute("SELECT COALESCE(MAX(batch), 0) + 1 FROM retimes WHERE task_key = ?",
                                        (task_key,)).fetchone()
                (upto,) = conn.execute("SELECT COALESCE(MAX(id), 0) FROM records WHERE task_key = ?",
                                       (task_key,)).fetchone()
                now = time.time()
                conn.executemany(
                    "INSERT INTO retimes (task_key, batch, upto_id, config_key, times, median_s, created) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(task_key, batch, upto, _config_key(c), json.dumps(list(t)), statistics.median(t), now)
                     for c, t in timings])
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot write tuning database {self.path}: {e}") from None
        return int(batch)

    def retimed(self, task_key: str, current_only: bool = True) -> dict[str, float]:
        """``{config key: median seconds}`` of the task's latest re-timing (empty when there is none); with
        ``current_only``, only while it still covers every valid record of the task."""
        conn = self._db()
        try:
            if "retimes" not in self._tables(conn):
                return {}
            row = conn.execute("SELECT batch, upto_id FROM retimes WHERE task_key = ? ORDER BY batch DESC LIMIT 1",
                               (task_key,)).fetchone()
            if row is None:
                return {}
            batch, upto = row
            if current_only:
                (newer,) = conn.execute("SELECT COUNT(*) FROM records WHERE task_key = ? AND id > ? AND "
                                        "error_kind IS NULL", (task_key, upto)).fetchone()
                if newer:
                    return {}
            rows = conn.execute("SELECT config_key, median_s FROM retimes WHERE task_key = ? AND batch = ?",
                                (task_key, batch)).fetchall()
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot read tuning database {self.path}: {e}") from None
        return {k: float(m) for k, m in rows}

    def best(self, task_key: str | None = None, workload: str | None = None) -> Record | None:
        """The valid record with the lowest median time (the earliest on a tie), or None when there is none.
        For one task whose top candidates were re-timed (:meth:`add_retimes`) after its last valid record, the
        re-timing decides: the fastest re-timed config's fastest record.

        Example::

            >>> db = Database(":memory:")
            >>> _ = db.add(Record("t", "w", {}, {}, {"vec": 4}, None, (3.0, 2.0, 9.0)))
            >>> _ = db.add(Record("t", "w", {}, {}, {"vec": 8}, None, (1.5, 1.0, 1.0)))
            >>> _ = db.add(Record("t", "w", {}, {}, {"vec": 16}, None, (0.1,), "wrong", "max error 3.2"))
            >>> db.best("t").config, db.best("other")
            ({'vec': 8}, None)
        """
        where, args = self._filters(task_key, workload)
        where += ["error_kind IS NULL", "median_s IS NOT NULL"]
        retimed = self.retimed(task_key) if task_key is not None and workload is None else {}
        if retimed:
            winner = min(retimed, key=lambda k: (retimed[k], k))
            found = self._select(where + ["config_key = ?"], args + [winner], "ORDER BY median_s, records.id LIMIT 1")
            if found:
                return found[0]
        found = self._select(where, args, "ORDER BY median_s, records.id LIMIT 1")
        return found[0] if found else None

    def count(self, task_key: str) -> int:
        """How many records (valid or not) the task key has.

        Example::

            >>> db = Database(":memory:")
            >>> _ = db.add(Record("t", "w", {}, {}, {}, None, (), "build", "llvm said no"))
            >>> db.count("t"), db.count("u")
            (1, 0)
        """
        try:
            (n,) = self._db().execute("SELECT COUNT(*) FROM records WHERE task_key = ?", (task_key,)).fetchone()
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot read tuning database {self.path}: {e}") from None
        return int(n)

    def tasks(self) -> list[dict]:
        """One summary per task key, in the order the tasks first appeared: ``task_key``, ``workload``, ``sizes``
        and ``target`` (of its first record), ``trials`` (all records), ``valid`` (valid records) and
        ``best_gflops`` (None when no valid record has known flops).

        Example::

            >>> db = Database(":memory:")
            >>> _ = db.add(Record("t", "w", {"N": 8}, {}, {}, None, (0.5,), flops=1e9))
            >>> _ = db.add(Record("t", "w", {"N": 8}, {}, {}, None, (), "crash", "SIGSEGV"))
            >>> (task,) = db.tasks()
            >>> task["task_key"], task["sizes"], task["trials"], task["valid"], task["best_gflops"]
            ('t', {'N': 8}, 2, 1, 2.0)
        """
        sql = """
            SELECT r.task_key, r.workload, r.sizes, r.target, g.trials, g.valid, g.best_gflops
            FROM (SELECT task_key, MIN(id) AS first, COUNT(*) AS trials,
                         COUNT(CASE WHEN error_kind IS NULL THEN 1 END) AS valid,
                         MAX(CASE WHEN error_kind IS NULL THEN gflops END) AS best_gflops
                  FROM records GROUP BY task_key) AS g
            JOIN records AS r ON r.id = g.first
            ORDER BY g.first
        """
        try:
            rows = self._db().execute(sql).fetchall()
        except sqlite3.Error as e:
            raise DatabaseError(f"cannot read tuning database {self.path}: {e}") from None
        return [{"task_key": task_key, "workload": workload, "sizes": json.loads(sizes), "target": json.loads(target),
                 "trials": trials, "valid": valid, "best_gflops": best_gflops}
                for task_key, workload, sizes, target, trials, valid, best_gflops in rows]

    def close(self) -> None:
        """Close the file (a second close does nothing); the Database cannot be used afterwards.

        Example::

            >>> db = Database(":memory:")
            >>> db.close(); db.close()
        """
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

