"""The command line matches a DSL file to a built-in workload by structure, as ``tl.build`` does: the matmul in other
names is the matmul workload (its sizes under the workload's names), with its hand schedule and its tuned records;
an explicit ``--schedule`` that cannot be met is an error."""
import json

import tensorlang as tl
from tensorlang.cli.main import main
from tensorlang.tuner.records.database import Database, Record
from tensorlang.tuner.task import Task

RENAMED = "def mm(X: f32[P, Q], Y: f32[Q, R]) -> Z:\n    Z[m, n] += X[m, q] * Y[q, n]\n"
GUIDE_SOFTMAX = """def softmax(X: f32[N, D]) -> Y:
    mx[n] max= X[n, d]
    e[n, d] = exp(X[n, d] - mx[n])
    sm[n] += e[n, d]
    Y[n, d] = e[n, d] / sm[n]
"""


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 and "--json" in argv else out), err


def test_show_and_best_take_a_renamed_matmul_as_the_matmul_workload(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TENSORLANG_DB", str(tmp_path / "none.db"))
    path = tmp_path / "mm.tl"
    path.write_text(RENAMED)
    rc, out, err = run(capsys, "show", path, "--size", "P=24,Q=16,R=40", "--json")
    assert rc == 0, err
    assert (out["workload"], out["sizes"], out["schedule"]) == ("matmul", {"M": 24, "K": 16, "N": 40}, "hand")
    rc, _, err = run(capsys, "show", path, "--size", "P=24,Q=16,R=40", "--schedule", "tuned")
    assert rc == 2 and "--schedule: build(schedule='tuned'): matmul has no tuned schedule" in err, err
    db = tmp_path / "t.db"
    task = Task.create("matmul", sizes={"M": 24, "K": 16, "N": 40}, threads=1)
    s = tl.schedule(task.op, **task.sizes)
    s["C"].vectorize("j")
    with Database(db) as d:
        d.add(Record(task.key, "matmul", task.sizes, task.target, {}, s.to_json(), (1e-4,), threads=1))
    rc, out, err = run(capsys, "best", path, "--size", "P=24,Q=16,R=40", "--threads", 1, "--db", db, "--json")
    assert rc == 0 and out["task_key"] == task.key and 'vectorize("j")' in out["python"], err


def test_show_gives_the_dsl_guides_softmax_its_hand_schedule(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TENSORLANG_DB", str(tmp_path / "none.db"))
    path = tmp_path / "softmax.tl"
    path.write_text(GUIDE_SOFTMAX)
    rc, out, err = run(capsys, "show", path, "--size", "N=16,D=128", "--json")
    assert rc == 0 and out["schedule"] == "hand" and "# parallel" in out["text"], err
    rc, out, err = run(capsys, "show", path, "--size", "N=16,D=128", "--schedule", "hand", "--json")
    assert rc == 0 and out["schedule"] == "hand", err
