"""Tuned records are found by a program's structure: a record of the built-in matmul serves the same program in
other names (replayed in its names), tuning that program records under the built-in's task, and the task keys that
databases and datasets already hold stay what they were."""
import numpy as np
import pytest

import tensorlang as tl
from tensorlang import schedules
from tensorlang.choice import StaleScheduleError
from tensorlang.tuner.records.database import Database, Record
from tensorlang.tuner.task import Task, task_key

RENAMED = "def mm(X: f32[P, Q], Y: f32[Q, R]) -> Z:   # mine\n    Z[m, n] += X[m, q] * Y[q, n]\n"
MINE = {"P": 24, "Q": 16, "R": 40}
THEIRS = {"M": 24, "K": 16, "N": 40}


def add_record(db, task: Task, schedule: tl.Schedule, **kw) -> int:
    with Database(db) as d:
        return d.add(Record(task.key, task.workload, task.sizes, task.target, {}, schedule.to_json(), (1e-4,),
                            flops=task.flops, threads=task.threads, **kw))


def builtin_schedule() -> tl.Schedule:
    s = tl.schedule(tl.op(schedules.get("matmul").source), **THEIRS)
    _, ji = s["C"].split("j", 8)
    s["C"].reorder("i", "k", "j_o", ji)
    s["C"].vectorize(ji)
    return s


def test_the_task_key_of_a_builtin_program_is_its_texts_as_before():
    w = schedules.get("matmul")
    t = Task.create("matmul", sizes=THEIRS, threads=1)
    assert t.key == task_key(w.source, t.sizes, t.target, 1)  # what stored records and the datasets are keyed by
    mine = Task.from_source(RENAMED, MINE, threads=1)
    assert (mine.workload, mine.sizes, mine.key) == ("matmul", t.sizes, t.key)


def test_a_record_of_the_builtin_is_found_for_the_program_in_other_names(tmp_path):
    db = tmp_path / "t.db"
    ref = builtin_schedule()
    add_record(db, Task.create("matmul", sizes=THEIRS), ref)
    op = tl.op(RENAMED)
    k = tl.build(op, db=str(db), **MINE)
    assert k.schedule_source == "tuned"
    assert str(k.schedule).splitlines()[1:] == ['s["Z"].split("n", 8, outer="n_o", inner="n_i")',
                                                's["Z"].reorder("m", "q", "n_o", "n_i")', 's["Z"].vectorize("n_i")']
    X = np.random.default_rng(0).standard_normal((24, 16), dtype=np.float32)
    Y = np.random.default_rng(1).standard_normal((16, 40), dtype=np.float32)
    np.testing.assert_array_equal(k(X, Y), tl.build(ref)(X, Y))
    want = (X.astype(np.float64) @ Y.astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(k(X, Y), want, rtol=1e-5, atol=1e-5)
    assert tl.build(op, db=str(db), schedule="tuned", **MINE).schedule_source == "tuned"
    other = {"P": 24, "Q": 16, "R": 48}  # no record at these sizes: an explicit request is an error
    with pytest.raises(tl.BuildError, match=rf"build\(schedule='tuned'\): mm has no tuned schedule: the tuning "
                                            rf"database {db} has no record of it at P=24, Q=16, R=48"):
        tl.build(op, db=str(db), schedule="tuned", **other)
    assert tl.build(op, db=str(db), **other).schedule_source == "hand"


def test_tuning_the_program_in_other_names_records_what_the_builtin_finds(tmp_path):
    db = tmp_path / "t.db"
    task = Task.from_source(RENAMED, MINE)
    s = task.space.schedule(task.op, task.sizes, task.space.default())  # what the tuner measures and records
    add_record(db, task, s)
    k = tl.build(tl.op(schedules.get("matmul").source), db=str(db), **THEIRS)
    assert k.schedule_source == "tuned" and k.schedule.primitives == s.primitives
    mine = tl.build(tl.op(RENAMED), db=str(db), **MINE)
    assert mine.schedule_source == "tuned" and len(mine.schedule.primitives) == len(s.primitives) > 0


def test_a_record_under_the_programs_own_text_is_still_found_first(tmp_path):
    db = tmp_path / "t.db"
    op = tl.op(RENAMED)
    own = tl.schedule(op, **MINE)
    own["Z"].split("m", 4)
    t = Task.create("matmul", sizes=THEIRS)
    with Database(db) as d:  # as a database written before programs were matched by structure holds it
        d.add(Record(task_key(RENAMED, MINE, t.target, t.threads), "mm", MINE, t.target, {}, own.to_json(), (1e-3,),
                     threads=t.threads))
    add_record(db, t, builtin_schedule())
    k = tl.build(op, db=str(db), **MINE)
    assert k.schedule_source == "tuned" and k.schedule.primitives == own.primitives


def test_a_stale_record_of_the_builtin_names_the_builtins_task(tmp_path):
    db = tmp_path / "t.db"
    t = Task.create("matmul", sizes=THEIRS)
    stale = builtin_schedule().to_json().replace('"k", ', '"zz", ')  # reorders a loop the program lacks
    with Database(db) as d:
        rid = d.add(Record(t.key, "matmul", t.sizes, t.target, {}, stale, (1e-4,), threads=t.threads, trial=3))
    with pytest.raises(StaleScheduleError, match=rf"record {rid} \(trial 3.*of task {t.key} no longer applies to mm"):
        tl.build(tl.op(RENAMED), db=str(db), schedule="tuned", **MINE)
