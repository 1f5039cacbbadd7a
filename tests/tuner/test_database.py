"""The tuning records database (tuner/records/database.py): round trips, queries, paths, schema checks, refusals, and
crash safety (kill -9 of a writer) and several processes on one file."""
import json
import os
import pathlib
import queue
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import replace

import pytest

import tensorlang.tuner.records.database as database
from tensorlang.errors import UsageError
from tensorlang.tuner.records.database import (
    ERROR_KINDS,
    SCHEMA_VERSION,
    Database,
    DatabaseError,
    Record,
    default_db_path,
)

ROOT = pathlib.Path(__file__).resolve().parents[2]

# shared by this module and the child processes: record number i, deterministic in every field
_RECORD_SRC = '''
from tensorlang.tuner.records.database import Record

def numbered_record(i):
    return Record(task_key=f"task/{i % 3}", workload=f"w{i % 2}", sizes={"N": i, "M": 7}, target={"arch": "x86_64"},
                  config={"tile": i % 7, "vec": 2 ** (i % 5)}, schedule=f"[{i}, " + "\\"split\\", " * 300 + "0]",
                  times=tuple((i + k) * 1e-6 for k in range(1, 6)),
                  error_kind=None if i % 4 else "wrong", error=None if i % 4 else f"max error {i}",
                  strategy="random", seed=i, trial=i, threads=1 + i % 3, flops=1e6 * i, version="0.1.0",
                  created=1e9 + i)
'''
_ns: dict = {}
exec(_RECORD_SRC, _ns)
numbered_record = _ns["numbered_record"]


def rec(task_key="t", workload="w", times=(1e-3,), **kw):
    return Record(task_key, workload, kw.pop("sizes", {"N": 64}), kw.pop("target", {"arch": "x86_64"}),
                  kw.pop("config", {"vec": 4}), kw.pop("schedule", None), times, **kw)


@pytest.fixture
def db(tmp_path):
    with Database(tmp_path / "tuning.db") as d:
        yield d


# ---------------------------------------------------------------------------------------------------------------
# records in and out


def test_round_trip_of_every_field(tmp_path):
    path = tmp_path / "t.db"
    valid = Record(task_key="matmul/M=64,N=64,K=64/x86_64", workload="matmul", sizes={"M": 64, "N": 64, "K": 64},
                   target={"arch": "x86_64", "features": ["avx2", "fma"], "cpu": {"name": "znver3", "cores": 16}},
                   config={"tile_i": 32, "vec": 8, "parallel": True, "order": "ijk", "unroll": None},
                   schedule='{"steps": [["split", "C", "i", 32]], "note": "é ✓"}',
                   times=(3.5e-4, 1.25e-4, 2e-4), error_kind=None, error=None, strategy="xgb", seed=12345,
                   trial=17, threads=4, flops=2.0 * 64 ** 3, version="0.1.0", created=1700000000.25)
    failed = Record("matmul/M=64,N=64,K=64/x86_64", "matmul", {"M": 64, "N": 64, "K": 64}, {"arch": "x86_64"},
                    {"tile_i": 3}, None, times=(), error_kind="build_timeout", error="build ran past 30 s\nline 2",
                    strategy="random", seed=None, trial=18, threads=1, flops=0.0, version="0.0.9", created=5.5)
    with Database(path) as d:
        ids = [d.add(valid), d.add(failed)]
    with Database(path) as d:  # reopened: everything came from the file
        back = d.records()
    assert back == [replace(valid, id=ids[0]), replace(failed, id=ids[1])]
    assert isinstance(back[0].times, tuple) and isinstance(back[0].seed, int) and back[1].seed is None
    assert back[0].median_s == 2e-4 and back[0].gflops == pytest.approx(2.0 * 64 ** 3 / 2e-4 / 1e9)
    assert back[1].median_s is None and back[1].gflops is None and not back[1].ok
    # the columns: JSON text (no pickle), median and GFLOP/s as REAL (NULL for the invalid record), the config key
    raw = sqlite3.connect(path).execute(
        "SELECT sizes, target, config, times, median_s, gflops, config_key FROM records ORDER BY id").fetchall()
    assert json.loads(raw[0][1]) == valid.target and json.loads(raw[0][3]) == list(valid.times)
    assert raw[0][4] == 2e-4 and raw[0][5] == pytest.approx(valid.gflops)
    assert raw[0][6] == valid.config_key() == '{"order":"ijk","parallel":true,"tile_i":32,"unroll":null,"vec":8}'
    assert raw[1][4] is None and raw[1][5] is None


def test_the_disturbance_figure_round_trips_in_a_table_created_at_first_use(tmp_path):
    """A record's disturbance goes to the optional table ``disturbances`` (created by the first record that has
    one, in the same transaction as the record); records without a figure, and every record of a file written
    before the table existed, read back None."""
    from tensorlang.tuner.measure.disturbance import Disturbance
    path = tmp_path / "t.db"
    with Database(path) as d:
        old = d.add(rec(config={"v": 1}))  # an older file: records, no table
    tables = {n for (n,) in sqlite3.connect(path).execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "disturbances" not in tables
    with Database(path) as d:
        assert [r.disturbance for r in d.records()] == [None] and d.best("t").disturbance is None
        busy = Disturbance(others_cpus=1.25, cpus=2, seconds=0.0625, uncertainty=0.3)
        new = d.add(rec(config={"v": 2}, times=(1e-4,), disturbance=busy, threads=2))
        none = d.add(rec(config={"v": 3}))
    with Database(path, read_only=True) as d:
        back = {r.id: r.disturbance for r in d.records()}
        assert back == {old: None, new: busy, none: None}
        assert d.best("t").disturbance == busy  # the fastest
        assert [r.id for r in d.records("t", quiet_only=True)] == [old, none]  # 1.25 CPUs of 2 taken from 2 threads
    raw = sqlite3.connect(path).execute("SELECT * FROM disturbances").fetchall()
    assert raw == [(new, 1.25, 2, 0.0625, 0.3)]


def test_a_record_with_a_disturbance_that_cannot_be_written_is_not_added(db):
    from tensorlang.tuner.measure.disturbance import Disturbance
    with pytest.raises(UsageError, match=r"record disturbance must be a "
                                         r"tensorlang\.tuner\.measure\.disturbance\.Disturbance"):
        db.add(rec(disturbance={"others_cpus": 1.0}))
    db._db().execute("CREATE TABLE disturbances (record_id INTEGER PRIMARY KEY, others_cpus REAL NOT NULL "
                     "CHECK (others_cpus < 0), cpus INTEGER, seconds REAL, uncertainty REAL)")
    with pytest.raises(DatabaseError, match="cannot add a record"):
        db.add(rec(disturbance=Disturbance(0.5, 2, 0.1)))
    assert db.count("t") == 0  # the record and its figure together, or neither


def test_a_damaged_disturbance_figure_names_the_record(tmp_path):
    from tensorlang.tuner.measure.disturbance import Disturbance
    path = tmp_path / "t.db"
    with Database(path) as d:
        rid = d.add(rec(disturbance=Disturbance(0.5, 2, 0.1)))
    conn = sqlite3.connect(path)
    conn.execute("UPDATE disturbances SET cpus = 0")
    conn.commit()
    conn.close()
    with Database(path) as d, pytest.raises(DatabaseError, match=f"record {rid} is damaged.*cpus"):
        d.records()


def test_add_fills_created_and_version_and_returns_increasing_ids(db):
    before = time.time()
    first = db.add(rec())
    second = db.add(rec(created=42.0, version="9.9"))
    after = time.time()
    assert second > first
    r1, r2 = db.records()
    assert before <= r1.created <= after and r1.version == database._TENSORLANG_VERSION
    assert r2.created == 42.0 and r2.version == "9.9"


def test_record_properties():
    r = rec(times=[4e-3, 1e-3, 2e-3, 3e-3], flops=5e6)
    assert r.times == (4e-3, 1e-3, 2e-3, 3e-3) and r.ok
    assert r.median_s == pytest.approx(2.5e-3) and r.gflops == pytest.approx(2.0)
    assert rec(flops=0.0).gflops is None  # unknown flops
    assert rec(error_kind="crash", error="SIGSEGV", flops=5e6).median_s is None
    assert rec(config={"b": 1, "a": [1, 2]}).config_key() == '{"a":[1,2],"b":1}'


def test_records_come_back_in_insertion_order(db):
    # created times run backwards and medians at random: the order is still the order of add()
    order = [5, 1, 4, 2, 3, 0]
    ids = [db.add(rec(task_key=f"t{v % 2}", config={"v": v}, times=(v + 1.0,), created=100.0 - i))
           for i, v in enumerate(order)]
    assert [r.config["v"] for r in db.records()] == order
    assert [r.id for r in db.records()] == ids == sorted(ids)
    assert [r.config["v"] for r in db.records("t1")] == [v for v in order if v % 2]


def test_best_ignores_invalid_records_and_picks_the_lowest_median(db):
    assert db.best() is None
    db.add(rec(config={"v": "invalid-fast"}, times=(1e-9,), error_kind="wrong", error="max error 1.5"))
    assert db.best() is None  # only an invalid record so far
    db.add(rec(config={"v": "one-fast-repeat"}, times=(1e-6, 9e-3, 9e-3)))  # lowest minimum, high median
    db.add(rec(config={"v": "best"}, times=(3e-3, 2e-3, 2e-3)))
    db.add(rec(config={"v": "tie"}, times=(2e-3, 2e-3, 4e-3)))  # same median, later: loses the tie
    db.add(rec(config={"v": "slow"}, times=(5e-3,)))
    db.add(rec(config={"v": "timeout"}, times=(), error_kind="timeout", error="ran past 10 s"))
    db.add(rec(task_key="other", workload="w2", config={"v": "other-task"}, times=(1e-5,)))
    assert db.best("t").config == {"v": "best"}
    assert db.best(workload="w").config == {"v": "best"}
    assert db.best().config == {"v": "other-task"}
    assert db.best("other", workload="w") is None
    assert db.best("missing") is None


def test_records_filtered_by_task_workload_and_validity(db):
    db.add(rec("a", "w1", config={"n": 0}))
    db.add(rec("a", "w1", config={"n": 1}, times=(), error_kind="build", error="no"))
    db.add(rec("b", "w1", config={"n": 2}))
    db.add(rec("c", "w2", config={"n": 3}))
    db.add(rec("c", "w2", config={"n": 4}, times=(1.0,), error_kind="wrong", error="off"))

    def ns(**kw):
        return [r.config["n"] for r in db.records(**kw)]

    assert ns() == [0, 1, 2, 3, 4]
    assert ns(task_key="a") == [0, 1]
    assert ns(workload="w1") == [0, 1, 2]
    assert ns(workload="w2", valid_only=True) == [3]
    assert ns(valid_only=True) == [0, 2, 3]
    assert ns(task_key="a", workload="w2") == []
    assert ns(task_key="nope") == []
    assert all(r.ok for r in db.records(valid_only=True))


def test_count(db):
    assert db.count("a") == 0
    db.add(rec("a"))
    db.add(rec("a", times=(), error_kind="crash", error="SIGSEGV"))
    db.add(rec("b"))
    assert (db.count("a"), db.count("b"), db.count("c")) == (2, 1, 0)


def test_tasks_summary(db):
    assert db.tasks() == []
    db.add(rec("mm", "matmul", sizes={"N": 64}, times=(2e-3,), flops=2e6))        # 1 GFLOP/s
    db.add(rec("add", "add", sizes={"N": 10}, target={"arch": "aarch64"}, times=(), error_kind="build", error="x"))
    db.add(rec("mm", "matmul", sizes={"N": 64}, times=(5e-4,), flops=2e6))        # 4 GFLOP/s
    db.add(rec("mm", "matmul", sizes={"N": 64}, times=(1e-9,), flops=2e6, error_kind="wrong", error="bad"))
    assert db.tasks() == [
        {"task_key": "mm", "workload": "matmul", "sizes": {"N": 64}, "target": {"arch": "x86_64"},
         "trials": 3, "valid": 2, "best_gflops": pytest.approx(4.0)},
        {"task_key": "add", "workload": "add", "sizes": {"N": 10}, "target": {"arch": "aarch64"},
         "trials": 1, "valid": 0, "best_gflops": None},
    ]


# ---------------------------------------------------------------------------------------------------------------
# refusals


@pytest.mark.parametrize("kind", ["oops", "", "Build", "timeout "])
def test_bad_error_kind_is_refused(db, kind):
    with pytest.raises(ValueError, match="error_kind") as e:
        db.add(rec(times=(), error_kind=kind, error="x"))
    assert "build_timeout" in str(e.value)  # the message lists the allowed kinds
    assert db.count("t") == 0


@pytest.mark.parametrize("kind", ERROR_KINDS)
def test_every_error_kind_is_accepted(db, kind):
    rid = db.add(rec(times=(), error_kind=kind, error="message"))
    assert db.records()[0].error_kind == kind and db.records()[0].id == rid


def test_valid_record_without_times_is_refused(db):
    with pytest.raises(ValueError, match="no times"):
        db.add(rec(times=()))
    with pytest.raises(ValueError, match="error message"):
        db.add(rec(error="a message but no error_kind"))
    with pytest.raises(ValueError, match="finite"):
        db.add(rec(times=(1e-3, float("nan"))))
    with pytest.raises(ValueError, match="config"):
        db.add(rec(config={"f": object()}))
    assert db.records() == [] and db.tasks() == []


@pytest.mark.parametrize("fields,message", [
    ({"task_key": ""}, "record task_key must be a non-empty string, got ''"),
    ({"task_key": 7}, "record task_key must be a non-empty string, got 7"),
    ({"sizes": [64]}, "record field sizes must be a dict, got list"),
    ({"target": "znver4"}, "record field target must be a dict, got str"),
    ({"config": None}, "record field config must be a dict, got NoneType"),
    ({"seed": 2**63}, "record seed 9223372036854775808 does not fit in a signed 64-bit integer"),
    ({"times": (-1.0,)}, "record times must be finite and non-negative seconds, got -1.0"),
])
def test_malformed_record_is_refused_by_field(db, fields, message):
    with pytest.raises(ValueError) as e:
        db.add(rec(**fields))
    assert str(e.value) == message
    assert db.records() == []


@pytest.mark.parametrize("timings", [[], [({"v": 1}, ())], [({"v": 1}, (1e-3, 0.0))]])
def test_retiming_without_positive_times_is_refused(db, timings):
    with pytest.raises(ValueError, match="a re-timing needs at least one config, each with positive times"):
        db.add_retimes("t", timings)


# ---------------------------------------------------------------------------------------------------------------
# where the file lives, and what it must be


def test_default_path_honours_tensorlang_db(monkeypatch, tmp_path):
    target = tmp_path / "deep" / "er" / "mine.db"
    monkeypatch.setenv("TENSORLANG_DB", str(target))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the env var wins over XDG
    assert default_db_path() == target
    with Database() as d:  # None -> default_db_path(); the parent folders are created
        d.add(rec())
    assert target.is_file() and not (tmp_path / "xdg").exists()
    with Database(None) as d:
        assert d.count("t") == 1


def test_default_path_honours_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv("TENSORLANG_DB", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert default_db_path() == tmp_path / "cache" / "tensorlang" / "tuning.db"
    monkeypatch.setenv("TENSORLANG_DB", "")  # empty means unset
    assert default_db_path() == tmp_path / "cache" / "tensorlang" / "tuning.db"


def test_default_path_falls_back_to_home_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("TENSORLANG_DB", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert default_db_path() == tmp_path / "home" / ".cache" / "tensorlang" / "tuning.db"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # invalid per the XDG spec: ignored
    assert default_db_path() == tmp_path / "home" / ".cache" / "tensorlang" / "tuning.db"


def test_file_layout_wal_meta_and_indexes(tmp_path):
    path = tmp_path / "t.db"
    Database(path).close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert dict(conn.execute("SELECT key, value FROM meta"))["schema_version"] == str(SCHEMA_VERSION)
    indexed = {}
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'records'"):
        indexed[name] = tuple(row[2] for row in conn.execute(f"PRAGMA index_info({name})"))
    assert ("task_key",) in indexed.values() and ("task_key", "config_key") in indexed.values()
    # opening an existing database again neither fails nor changes its records
    with Database(path) as d:
        d.add(rec())
    with Database(path) as d:
        assert d.count("t") == 1


def test_newer_schema_version_is_refused(tmp_path):
    path = tmp_path / "t.db"
    with Database(path) as d:
        d.add(rec())
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(DatabaseError) as e:
        Database(path)
    msg = str(e.value)
    assert f"schema version {SCHEMA_VERSION + 1}" in msg and f"schema version {SCHEMA_VERSION}" in msg
    assert "upgrade tensorlang" in msg and str(path) in msg
    import tensorlang
    assert isinstance(e.value, tensorlang.TensorlangError)


@pytest.mark.parametrize("value", [None, "0", "one"])
def test_missing_or_bad_schema_version_is_refused(tmp_path, value):
    path = tmp_path / "t.db"
    with Database(path) as d:
        d.add(rec())
    with sqlite3.connect(path) as conn:
        if value is None:
            conn.execute("DELETE FROM meta WHERE key = 'schema_version'")
        else:
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (value,))
    with pytest.raises(DatabaseError, match=f"tuning database {path} has no valid schema_version in its meta table "
                                            f"\\(found {value!r}\\)"):
        Database(path)


def test_non_database_file_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "notes.db"
    content = b"these are my notes, not a database\n" * 100
    path.write_bytes(content)
    with pytest.raises(DatabaseError) as e:
        Database(path)
    assert str(path) in str(e.value)
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]  # no -wal/-shm left behind


def test_foreign_sqlite_database_is_refused(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE people (name TEXT)")
    with pytest.raises(DatabaseError, match="not a tensorlang tuning database") as e:
        Database(path)
    assert str(path) in str(e.value)


def test_a_folder_or_an_unknown_home_is_refused_by_name(tmp_path, monkeypatch):
    with pytest.raises(DatabaseError, match="it is a folder; name a file in it") as e:
        Database(tmp_path)
    assert str(tmp_path) in str(e.value)
    with pytest.raises(DatabaseError, match=r"~no-such-user-tl/x\.db"):
        Database("~no-such-user-tl/x.db")
    monkeypatch.setenv("TENSORLANG_DB", "~no-such-user-tl/x.db")
    with pytest.raises(DatabaseError, match=r"cannot expand ~ in '~no-such-user-tl/x\.db'"):
        default_db_path()


@pytest.mark.parametrize("column,value,message", [
    ("config", "not json", "Expecting value"),
    ("times", '["a"]', "could not convert string to float: 'a'"),
    ("sizes", "[1]", "sizes is a list"),
])
def test_a_damaged_record_is_a_database_error_naming_the_file_and_record(tmp_path, column, value, message):
    path = tmp_path / "damaged.db"
    with Database(path) as d:
        rid = d.add(rec())  # the best one too: the earliest of equal times
        d.add(rec())
    with sqlite3.connect(path) as conn:
        conn.execute(f"UPDATE records SET {column} = ? WHERE id = ?", (value, rid))
    with Database(path) as d:
        for read in (lambda: d.records("t"), lambda: d.best("t", "w")):
            with pytest.raises(DatabaseError) as e:
                read()
            assert str(e.value).startswith(f"tuning database {path}: record {rid} is damaged (")
            assert message in str(e.value)


def test_memory_database_and_closing():
    a, b = Database(":memory:"), Database(":memory:")
    a.add(rec())
    assert a.count("t") == 1 and b.count("t") == 0  # separate databases
    assert not pathlib.Path(":memory:").exists()
    a.close()
    a.close()
    with pytest.raises(DatabaseError, match="closed"):
        a.records()
    with b:
        pass
    with pytest.raises(DatabaseError, match="closed"):
        b.add(rec())


# ---------------------------------------------------------------------------------------------------------------
# crash safety and several processes


def _spawn(script: str, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-c", _RECORD_SRC + textwrap.dedent(script), *map(str, args)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _lines(proc: subprocess.Popen) -> tuple[queue.Queue, threading.Thread]:
    """A thread that puts each stdout line of proc in a queue, and None at the end."""
    q: queue.Queue = queue.Queue()

    def pump():
        for line in proc.stdout:
            q.put(line)
        q.put(None)

    t = threading.Thread(target=pump, daemon=True)
    t.start()
    return q, t


def _check_intact(path) -> dict[int, Record]:
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    with Database(path) as d:
        found = {r.id: r for r in d.records()}
    for rid, r in found.items():  # every row parses and is exactly the record that was written
        assert r == replace(numbered_record(r.trial), id=rid)
    return found


_ADD_FOREVER = """
import sys
from tensorlang.tuner.records.database import Database
db = Database(sys.argv[1])
i = int(sys.argv[2])
while True:
    rid = db.add(numbered_record(i))
    sys.stdout.write(f"{rid} {i}\\n")
    sys.stdout.flush()
    i += 1
"""


def test_kill_9_loses_no_committed_record(tmp_path):
    path = tmp_path / "killed.db"
    printed: dict[int, int] = {}
    for round_, wanted in enumerate((20, 37, 25)):  # kill at different moments, into the same file
        proc = _spawn(_ADD_FOREVER, path, 1000 * round_)
        q, pump = _lines(proc)
        seen = 0
        deadline = time.monotonic() + 60
        try:
            while seen < wanted:
                line = q.get(timeout=max(0.1, deadline - time.monotonic()))
                assert line is not None, f"writer ended early: {proc.stderr.read()}"
                rid, i = map(int, line.split())
                printed[rid] = i
                seen += 1
        finally:
            proc.send_signal(signal.SIGKILL)  # the writer is mid-loop: the kill lands anywhere in add()
            proc.wait(timeout=30)
        pump.join(timeout=30)
        while (line := q.get_nowait()) is not None:  # ids printed before the kill count as well
            if line.endswith("\n"):  # (a line cut by the kill is not a complete report)
                rid, i = map(int, line.split())
                printed[rid] = i
        proc.stdout.close()
        proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL

        found = _check_intact(path)
        missing = sorted(set(printed) - set(found))
        assert not missing, f"committed records lost after kill -9: {missing}"
        for rid, i in printed.items():
            assert found[rid].trial == i
        # at most the one record in flight (committed, not yet printed) is beyond what was printed
        assert len(set(found) - set(printed)) <= round_ + 1
    # the file is still usable: add after the crashes
    with Database(path) as d:
        rid = d.add(numbered_record(5000))
        assert rid > max(printed) and d.records()[-1] == replace(numbered_record(5000), id=rid)


_WRITE_N = """
import os, sys, time
from tensorlang.tuner.records.database import Database
db = Database(sys.argv[1])
start, n = int(sys.argv[2]), int(sys.argv[3])
waits = sys.argv[4:]  # files that readers create once they read: the writing starts while they read
deadline = time.monotonic() + 120
while not all(os.path.exists(w) for w in waits) and time.monotonic() < deadline:
    time.sleep(0.01)
for i in range(start, start + n):
    print(db.add(numbered_record(i)), i, flush=True)
    time.sleep(0.001)
"""

_READ_UNTIL = """
import json, sys, time
from dataclasses import replace
from tensorlang.tuner.records.database import Database
db = Database(sys.argv[1])
n = int(sys.argv[2])
deadline = time.monotonic() + 120
reads, lengths, last = 0, set(), 0
while True:
    recs = db.records()
    reads += 1
    ids = [r.id for r in recs]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), ids
    assert len(recs) >= last, (len(recs), last)  # a snapshot never goes back
    for r in recs:
        assert r == replace(numbered_record(r.trial), id=r.id)
    db.best(); db.tasks(); db.records(valid_only=True)
    if reads == 1 and len(sys.argv) > 3:
        open(sys.argv[3], "w").close()  # reading: the writer may start
    last = len(recs)
    lengths.add(last)
    if last >= n or time.monotonic() > deadline:
        break
print(json.dumps({"reads": reads, "lengths": len(lengths), "final": last}))
"""


def test_two_readers_while_one_writer_adds(tmp_path):
    path = tmp_path / "shared.db"
    Database(path).close()
    n = 150
    ready = [tmp_path / f"reader{k}.reading" for k in range(2)]
    readers = [_spawn(_READ_UNTIL, path, n, flag) for flag in ready]
    writer = _spawn(_WRITE_N, path, 0, n, *ready)  # starts once both read, so that they read while it adds
    w_out, w_err = writer.communicate(timeout=180)
    assert writer.returncode == 0, w_err
    for reader in readers:
        out, err = reader.communicate(timeout=180)
        assert reader.returncode == 0, err
        summary = json.loads(out)
        assert summary["final"] == n and summary["reads"] >= 2
    written = dict(map(int, line.split()) for line in w_out.splitlines())
    assert len(written) == n
    found = _check_intact(path)
    assert set(found) == set(written) and all(found[rid].trial == i for rid, i in written.items())


def test_two_writers_at_once_on_a_new_file(tmp_path):
    path = tmp_path / "new" / "two-writers.db"  # neither the file nor its folder exists: both create the schema
    n = 80
    writers = [_spawn(_WRITE_N, path, start, n) for start in (0, 10000)]
    written: dict[int, int] = {}
    for w in writers:
        out, err = w.communicate(timeout=180)
        assert w.returncode == 0, err
        ids = [tuple(map(int, line.split())) for line in out.splitlines()]
        assert len(ids) == n and [rid for rid, _ in ids] == sorted(rid for rid, _ in ids)
        written.update(ids)
    found = _check_intact(path)
    assert len(written) == 2 * n and set(found) == set(written)
    assert all(found[rid].trial == i for rid, i in written.items())


# a process that holds the (new) file in an open transaction: BEGIN IMMEDIATE (a write lock: readers go on, but the
# switch to WAL mode cannot be made) or BEGIN EXCLUSIVE (even reads wait); it ends the transaction after argv[3] s
_HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN " + sys.argv[2])
print("locked", flush=True)
time.sleep(float(sys.argv[3]))
conn.execute("COMMIT")
"""


def _hold_lock(path, mode: str, seconds: float) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(path), mode, str(seconds)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line == "locked\n", proc.communicate()[1]
    return proc


@pytest.mark.parametrize("mode", ["IMMEDIATE", "EXCLUSIVE"])
def test_opening_waits_for_another_process_that_holds_the_new_file_locked(tmp_path, mode):
    # SQLite answers "database is locked" at once, without the busy timeout, to the switch to WAL mode while
    # another process writes (it would upgrade a read lock): opening must wait all the same
    path = tmp_path / "held.db"
    holder = _hold_lock(path, mode, 1.0)
    try:
        start = time.monotonic()
        with Database(path) as d:
            waited = time.monotonic() - start
            d.add(rec())
    finally:
        holder.kill()
        holder.communicate()
    assert waited > 0.5  # it waited for the holder to let go, and did not fail at once
    with Database(path) as d:
        assert d.count("t") == 1
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("mode", ["IMMEDIATE", "EXCLUSIVE"])
def test_a_database_locked_past_the_timeout_is_named_as_locked(tmp_path, monkeypatch, mode):
    monkeypatch.setattr(database, "_BUSY_TIMEOUT_S", 0.5)
    path = tmp_path / "held.db"
    holder = _hold_lock(path, mode, 600)
    try:
        start = time.monotonic()
        with pytest.raises(DatabaseError) as e:
            Database(path)
        waited = time.monotonic() - start
        if mode == "EXCLUSIVE":  # reading waits too: not read without locks (immutable) as a file that is no database
            with pytest.raises(DatabaseError) as ro:
                Database(path, read_only=True)
            assert str(ro.value) == str(e.value)
    finally:
        holder.kill()
        holder.communicate()
    assert str(e.value) == (f"tuning database {path} is locked by another process: still 'database is locked' after "
                            f"waiting 0.5 s; try again once that process is done, or pass --db with another file")
    assert 0.4 < waited < 30
