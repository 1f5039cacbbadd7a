"""Suite-wide checks, and the environment every test starts from.

Trace round trip (as TVM's): every schedule that any test lowers is replayed from its JSON, and must give the
same loop IR. The check runs when the schedule is lowered, so it covers every schedule used in the suite.

The helpers in tests/support/ (program generators, oracles, fuzz harnesses, worker handlers) are imported by
their module names (``import progen``): this file puts that folder first on ``sys.path``, which worker processes
inherit as ``PYTHONPATH``.
"""
import os
import sys
import tempfile

import pytest

from tensorlang.schedule import Schedule

SUPPORT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "support")
if SUPPORT not in sys.path:
    sys.path.insert(0, SUPPORT)

#: The variables by which a user's shell changes what tensorlang does. The suite runs without them (a test that
#: needs one sets it), so that a user's exported setting neither fails a test nor gets written to.
USER_SETTINGS = ("TENSORLANG_NUM_THREADS", "TENSORLANG_SPIN_US", "TENSORLANG_THREAD_POOL", "TENSORLANG_PRINT_PASSES",
                 "TENSORLANG_CLUSTER", "TENSORLANG_TUNER_FAULTS", "TENSORLANG_CLUSTER_FAULTS",
                 "TENSORLANG_CLUSTER_TARGET", "TENSORLANG_MODEL_CACHE_MB")
SUITE_FOLDER = "TENSORLANG_TESTS_FOLDER"  # this run's folder, which pytest-xdist's workers take from their controller


def _suite_folder() -> str:
    inherited = os.environ.get(SUITE_FOLDER, "")
    if os.environ.get("PYTEST_XDIST_WORKER") and os.path.isdir(inherited):
        return inherited
    folder = tempfile.mkdtemp(prefix="tensorlang-tests-")
    os.mkdir(os.path.join(folder, "kernels"))
    return folder


for _name in USER_SETTINGS:
    os.environ.pop(_name, None)
os.environ[SUITE_FOLDER] = _suite_folder()
# no test writes to the user's tuning database, nor to their kernel cache, whatever their shell exports
os.environ["TENSORLANG_DB"] = os.path.join(os.environ[SUITE_FOLDER], "tuning.db")
os.environ["TENSORLANG_KERNEL_CACHE"] = os.path.join(os.environ[SUITE_FOLDER], "kernels")
# a library row of a bench or benchmark starts one process, not three to probe (the probing has its own test, with
# its process count given)
os.environ["TENSORLANG_BENCH_PROCESSES"] = "1"

_original_lowered = Schedule.lowered
_checked: set[str] = set()
_replaying = [False]


def _lowered_with_round_trip(self, strict: bool = False):
    func = _original_lowered(self, strict)
    key = self.to_json()
    if not _replaying[0] and key not in _checked:
        _replaying[0] = True
        try:
            again = Schedule.from_json(key)
            assert str(_original_lowered(again, strict)) == str(func), \
                f"schedule does not round-trip through JSON:\n{self}"
        finally:
            _replaying[0] = False
        _checked.add(key)
    return func


@pytest.fixture(autouse=True, scope="session")
def schedule_round_trip():
    Schedule.lowered = _lowered_with_round_trip
    yield
    Schedule.lowered = _original_lowered


def pytest_report_header(config):
    import fuzzenv
    return f"{fuzzenv.SLICE_NOTE} (the *_fresh_slice fuzz tests)"


def pytest_terminal_summary(terminalreporter):
    if _checked:
        terminalreporter.write_line(f"schedules replayed from JSON with identical loop IR: {len(_checked)}")
