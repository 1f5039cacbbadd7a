"""Suite-wide checks.

Trace round trip (as TVM's): every schedule that any test lowers is replayed from its JSON, and must give the
same loop IR. The check runs when the schedule is lowered, so it covers every schedule used in the suite.
"""
import os
import tempfile

import pytest

from tensorlang.schedule import Schedule

# no test writes to the user's tuning database: anything that opens the default one gets a throwaway file
os.environ.setdefault("TENSORLANG_DB", os.path.join(tempfile.mkdtemp(prefix="tensorlang-tests-"), "tuning.db"))
# nor to the user's kernel cache: the graph compiler's compiled kernels go to a folder of this session
os.environ.setdefault("TENSORLANG_KERNEL_CACHE", tempfile.mkdtemp(prefix="tensorlang-kernels-"))

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
