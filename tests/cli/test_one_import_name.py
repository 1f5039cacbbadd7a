"""Everything installs under the one import name ``tensorlang``: a user's own ``schedules/`` or ``tuner/`` folder, or a
``tuner.py``, in the working directory shadows nothing. The command line and ``tl.build`` run there, with the working
directory first on ``sys.path`` (as ``python -c`` and ``python -m`` put it)."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np

README_MATMUL = '''
import json, sys
import numpy as np
import tensorlang as tl
import tensorlang.schedules, tensorlang.tuner

op = tl.op("""
def matmul(A: f32[M, K], B: f32[K, N]) -> C:
    C[m, n] += A[m, k] * B[k, n]
""")
k = tl.build(op, M=64, N=48, K=32)
A = np.random.default_rng(0).random((64, 32), dtype=np.float32)
B = np.random.default_rng(1).random((32, 48), dtype=np.float32)
np.save("C.npy", k(A, B))
print(json.dumps({"cwd": sys.path[0], "files": [tensorlang.schedules.__file__, tensorlang.tuner.__file__],
                  "schedule": k.schedule_source}))
'''


def user_folder(tmp_path: pathlib.Path) -> pathlib.Path:
    """A working directory holding what would shadow top-level packages of those names: empty schedules/ and
    tuner/ folders (namespace packages to Python) and a tuner.py that fails when imported."""
    for name in ("schedules", "tuner"):
        (tmp_path / name).mkdir()
    (tmp_path / "tuner.py").write_text("raise ImportError('the user tuner.py was imported')\n")
    return tmp_path


def test_a_users_schedules_and_tuner_shadow_nothing(tmp_path):
    here = user_folder(tmp_path)
    env = dict(os.environ, TENSORLANG_DB=str(here / "x.db"))
    r = subprocess.run([sys.executable, "-c", README_MATMUL], cwd=here, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["cwd"] == ""  # the working directory was first on sys.path
    assert out["schedule"] == "hand"  # the built-in matmul in other index names: its hand schedule
    assert not any(f.startswith(str(here)) for f in out["files"]), out["files"]
    A = np.random.default_rng(0).random((64, 32), dtype=np.float32)
    B = np.random.default_rng(1).random((32, 48), dtype=np.float32)
    np.testing.assert_allclose(np.load(here / "C.npy"), A.astype(np.float64) @ B, rtol=1e-5)


def test_the_command_line_runs_in_a_folder_with_a_users_tuner(tmp_path):
    here = user_folder(tmp_path)
    script = pathlib.Path(sys.executable).with_name("tensorlang")  # the console script of this install

    def tune(trials: int) -> list[str]:
        return ["tune", "conv2d", "--preset", "small", "--trials", str(trials), "--db", "x.db", "--jobs", "1",
                "--threads", "1", "--no-baselines", "--json"]
    commands = [[sys.executable, "-m", "tensorlang.cli", *tune(4)]]  # -m puts the working directory on sys.path
    if script.exists():
        commands.append([str(script), *tune(5)])  # resumes: one trial more
    for trials, command in zip((4, 5), commands):
        r = subprocess.run(command, cwd=here, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout)
        assert report["workload"] == "conv2d" and report["trials"] == trials, report
        assert os.path.samefile(os.path.join(here, report["db"]), here / "x.db")


def test_the_upper_packages_are_attributes_of_tensorlang():
    import tensorlang as tl
    from tensorlang.schedules import WORKLOADS
    from tensorlang.tuner.tuning import tune
    assert tl.tuner.tune is tune and tl.schedules.WORKLOADS is WORKLOADS and tl.cli.__name__ == "tensorlang.cli"
