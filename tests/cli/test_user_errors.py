"""What a user's setup gets wrong, and what says so: the test suite run from a shell that exports tensorlang's
variables, a stale tuning record, keyword inputs to a model, a folder or a corrupted file given as a model."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.choice import StaleScheduleError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SUITE_PROBE = '''
import json
import os
from tensorlang.tuner.records.database import Database, Record, default_db_path

def test_the_default_database_and_settings():
    with Database(default_db_path()) as db:
        db.add(Record("t", "w", {}, {}, {}, None, (1.0,)))
    print("database", default_db_path())
    print("kernels", os.environ["TENSORLANG_KERNEL_CACHE"])
    print("set", json.dumps(sorted(k for k in os.environ if k.startswith("TENSORLANG_"))))
'''


def test_the_suite_ignores_what_the_users_shell_exports(tmp_path):
    """A test that opens the default tuning database writes to the suite's own, not to the user's
    ``TENSORLANG_DB``; the user's kernel cache and settings (threads, cluster, ...) are left out too."""
    from conftest import USER_SETTINGS
    user = tmp_path / "user"
    user.mkdir()
    (tmp_path / "test_probe.py").write_text(SUITE_PROBE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.join(ROOT, "tests")]),
               TENSORLANG_DB=str(user / "tuning.db"), TENSORLANG_KERNEL_CACHE=str(user / "kernels"),
               **{name: "junk" for name in USER_SETTINGS})
    env.pop("PYTEST_XDIST_WORKER", None)
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "-s",
                        "-n", "0", "test_probe.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.listdir(user) == []  # neither the database nor the kernel cache was made in the user's folder
    seen = dict(line.split(" ", 1) for line in r.stdout.splitlines() if line.startswith(("database ", "kernels ")))
    assert seen["database"].endswith("tuning.db") and not seen["database"].startswith(str(user)), r.stdout
    assert not seen["kernels"].startswith(str(user)), r.stdout
    (names,) = [line for line in r.stdout.splitlines() if line.startswith("set ")]
    assert not set(USER_SETTINGS) & set(json.loads(names[4:])), names


# ------------------------------------------------------------------------------------------ a stale tuned record
SCALE = "def scale(A: f32[N, M]) -> C:\n    C[i, j] = A[i, j] * 2.0\n"
SIZES = {"N": 16, "M": 32}


def stale_database(tmp_path):
    """A tuning database whose best record of SCALE splits a loop the program does not have (as a record that an
    older compiler wrote); returns its path, the record's id and the task key."""
    from tensorlang.tuner.records.database import Database, Record
    from tensorlang.tuner.task import Task
    task = Task.from_source(SCALE, SIZES)
    s = tl.schedule(tl.op(SCALE), **SIZES)
    s["C"].split("j", 8)
    db = tmp_path / "stale.db"
    with Database(db) as d:
        rid = d.add(Record(task.key, task.workload, SIZES, task.target, {}, s.to_json().replace('"j"', '"zz"'),
                           (1e-6,), flops=task.flops, trial=7, threads=task.threads))
    return db, rid, task.key


def test_a_stale_tuned_record_asked_for_is_an_error_naming_the_database_and_the_record(tmp_path):
    db, rid, key = stale_database(tmp_path)
    with pytest.raises(tl.BuildError) as e:
        tl.build(tl.op(SCALE), db=str(db), schedule="tuned", **SIZES)
    message = str(e.value)
    assert isinstance(e.value, StaleScheduleError), message
    assert message.startswith(f"tuning database {db}: record {rid} (trial 7, tuned by tensorlang "), message
    assert f"of task {key} no longer applies to scale: split(C, zz): stage C has no loop 'zz'" in message
    assert f"DELETE FROM records WHERE task_key = '{key}'" in message and "tune it again" in message
    (tmp_path / "scale.tl").write_text(SCALE)
    r = subprocess.run([sys.executable, "-m", "tensorlang.cli", "show", str(tmp_path / "scale.tl"), "--size",
                        "N=16,M=32", "--schedule", "tuned"], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, TENSORLANG_DB=str(db), PYTHONPATH=ROOT))
    assert r.returncode == 2 and f"record {rid} (trial 7" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_stale_tuned_record_is_skipped_with_one_warning_naming_it(tmp_path):
    db, rid, _key = stale_database(tmp_path)
    op = tl.op(SCALE)
    with pytest.warns(UserWarning, match=rf"tuning database .*stale.db: record {rid} \(trial 7.*no longer applies "
                                         r"to scale.*\(skipped: scale gets the next schedule source\)"):
        k = tl.build(op, db=str(db), **SIZES)
    assert k.schedule_source == "auto"
    A = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    np.testing.assert_array_equal(k(A), A * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once: the next build says nothing
        assert tl.build(op, db=str(db), **SIZES).schedule_source == "auto"


# ------------------------------------------------------------------------------------------ calling a model
def test_keyword_inputs_are_refused_naming_the_inputs_the_model_takes(tmp_path):
    from tensorlang.graph import compile_graph
    from tensorlang.graph.ir import Graph, TensorType
    g = Graph("pair")
    x, y = g.add_input("x", TensorType((3,), "f32")), g.add_input("y", TensorType((3,), "f32"))
    g.outputs = [g.add_node("add.Tensor", [x, y], {}, [TensorType((3,), "f32")]).outputs[0]]
    a, b = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    for model in (compile_graph(g), tl.load_model(compile_graph(g).save(tmp_path / "pair.tlm"))):
        with pytest.raises(tl.BuildError, match=r"^pair: keyword inputs x, y not taken: the model takes its inputs "
                                                r"by position, in the order x, y$"):
            model(x=a, y=b)
        with pytest.raises(tl.BuildError, match=r"^pair: keyword input y not taken: .* in the order x, y$"):
            model(a, y=b)
        np.testing.assert_array_equal(model(a, b), a + b)


def test_keyword_inputs_of_an_imported_module_name_those_it_takes():
    torch = pytest.importorskip("torch")

    class Scaled(torch.nn.Module):
        def forward(self, x, *, bias):
            return torch.relu(x) + bias

    x, bias = torch.randn(2, 3), torch.randn(3)
    model = tl.from_torch(Scaled().eval(), (x,), {"bias": bias})
    a, b = x.numpy(), bias.numpy()
    np.testing.assert_allclose(model(a, bias=b), np.maximum(a, 0) + b, rtol=1e-6)
    with pytest.raises(tl.BuildError, match=r"^Scaled: keyword input x not taken: the model takes its inputs by "
                                            r"position, in the order x; its keyword inputs are bias$"):
        model(x=a, bias=b)
