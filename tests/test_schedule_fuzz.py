"""Schedule fuzzer: random schedules must change how a program runs, never what it computes.

Each hypothesis example takes a program at tiny sizes -- a workload of ``schedules.WORKLOADS`` (shape sizes
1..7 with primes, now and then one of 8..17; usual strides, paddings, dilations) or a random Einstein
program from ``progen.py`` -- and applies several random schedules to it, each a sequence of 1 to 8
primitives (split, tile, reorder, fuse, vectorize, unroll, parallel, serial, compute_at, compute_inline,
compute_root, cache_write, cache_read with random layouts) whose arguments come from the current loops of a
random stage, with invalid arguments now and then. The rules (see ``schedfuzz.py``):

* the unscheduled kernel matches numpy (the workload's ``reference`` or progen's evaluator);
* a primitive either raises ``tl.ScheduleError`` and leaves the schedule unchanged, or is accepted;
  clearly legal calls (a split of a serial loop with fresh names, a reorder of distinct loops, ...) are
  accepted and clearly illegal ones (a loop that does not exist, a factor of 0, fusing loops that are not
  adjacent, vectorizing a reduction loop, inlining a reduction, ...) raise;
* a schedule whose primitives were all accepted is rebuilt by ``print(s)`` and by its JSON, lowers with
  ``s.lowered(strict=True)`` and computes the unscheduled kernel's results (``oracle.assert_close``; ints
  and copies exactly), into ``out=`` arrays prefilled with NaN / 7, leaving its inputs alone.

A failure report holds the DSL text, the sizes, ``print(s)`` and every call made (rejected ones included).

Environment:

* ``TENSORLANG_SCHEDULE_FUZZ`` -- number of hypothesis examples over the two tests together (default 1000,
  as in CI; each example checks ``SCHEDULES_PER_EXAMPLE`` schedules). Long mode::

      TENSORLANG_SCHEDULE_FUZZ=20000 pytest tests/test_schedule_fuzz.py

* ``TENSORLANG_SCHEDULE_FUZZ_RANDOM=1`` -- new random examples instead of the fixed (derandomized) CI set.
* ``TENSORLANG_SCHEDULE_FUZZ_KNOWN=1`` -- do not skip the known compiler bugs (``schedfuzz.KNOWN_BUGS``).

``pytest tests/test_schedule_fuzz.py --hypothesis-show-statistics`` shows how often each outcome occurred.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, event, given, note, reject, settings
from hypothesis import strategies as st

import progen
import schedfuzz

EXAMPLES = int(os.environ.get("TENSORLANG_SCHEDULE_FUZZ", "1000"))
DERANDOMIZE = os.environ.get("TENSORLANG_SCHEDULE_FUZZ_RANDOM", "0") != "1"
SCHEDULES_PER_EXAMPLE = 2

# the two tests share the examples: workloads get 40%, random programs the rest
WORKLOAD_EXAMPLES = max(1, (EXAMPLES * 2) // 5)
PROGRAM_EXAMPLES = max(1, EXAMPLES - WORKLOAD_EXAMPLES)

FUZZ_SETTINGS = dict(
    deadline=None,
    derandomize=DERANDOMIZE,
    database=None if DERANDOMIZE else settings.default.database,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=True,
)


def _choices(data):
    """Every random choice of an example, from one hypothesis-controlled (so shrinkable) random.Random."""
    return progen.Src.from_random(data.draw(st.randoms(use_true_random=False), label="choices"))


def _schedules(case, src):
    note(case.describe())
    for _ in range(SCHEDULES_PER_EXAMPLE):
        event(schedfuzz.run_schedule(case, src))


@pytest.mark.slow
@settings(max_examples=WORKLOAD_EXAMPLES, **FUZZ_SETTINGS)
@given(data=st.data())
def test_workload_schedules(data):
    import schedules

    name = data.draw(st.sampled_from(list(schedules.WORKLOADS)), label="workload")
    src = _choices(data)
    _schedules(schedfuzz.workload_case(name, src), src)


@pytest.mark.slow
@settings(max_examples=PROGRAM_EXAMPLES, **FUZZ_SETTINGS)
@given(data=st.data())
def test_random_program_schedules(data):
    src = _choices(data)
    try:
        case = schedfuzz.progen_case(src)
    except progen.Reject as e:
        event(f"rejected program: {e}")
        reject()
    _schedules(case, src)
