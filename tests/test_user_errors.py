"""What a user's setup gets wrong, and what says so: the test suite run from a shell that exports tensorlang's
variables, a stale tuning record, keyword inputs to a model, a folder or a corrupted file given as a model."""
from __future__ import annotations

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SUITE_PROBE = '''
import json
import os
from tuner.database import Database, Record, default_db_path

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
