"""Schedule fuzzer: random schedules must change how a program runs, never what it computes.

Each hypothesis example takes a program at tiny sizes -- a workload of ``tensorlang.schedules.WORKLOADS`` (shape sizes
1..7 with primes, now and then one of 8..17; usual strides, paddings, dilations), a random Einstein
program from ``progen.py`` (one in ten in a small integer type, u8 ... u64, whose outputs are compared
bit-exactly), or (tests of their own) a program with boundary conditions in its indices from
``schedule_cases.BOUNDARY_PROGRAMS`` or a scan of ``schedule_cases.PROGRAMS`` (``test_scan_schedules``,
``test_fuzzer_scans``: a stage that reads itself, whose scan loops the fuzzer's model expects never to be parallel,
vectorized or computed elsewhere) -- and applies several random schedules to it, each a sequence of 1 to 8
primitives (split, tile, reorder, fuse, vectorize, unroll, parallel, serial, compute_at, compute_inline,
compute_root, cache_write, cache_read with random layouts, store_at / store_root, fold_storage) whose arguments
come from the current loops of a random stage, with invalid arguments now and then. The rules (see ``schedfuzz.py``):

* the unscheduled kernel matches numpy (the workload's ``reference`` or progen's evaluator);
* a primitive either raises ``tl.ScheduleError`` and leaves the schedule unchanged, or is accepted;
  clearly legal calls (a split of a serial loop with fresh names, a reorder of distinct loops, ...) are
  accepted and clearly illegal ones (a loop that does not exist, a factor of 0, fusing loops that are not
  adjacent, parallelising a reduction loop, inlining a reduction, ...) raise; split, tile, fuse and reorder
  return the documented loop names and change only their stage's ``loops()`` as documented;
* a schedule whose primitives were all accepted is rebuilt by ``print(s)`` and by its JSON, lowers with
  ``s.lowered(strict=True)`` and computes the unscheduled kernel's results (``oracle.assert_close``; ints
  and copies exactly), into ``out=`` arrays prefilled with NaN / 7, leaving its inputs alone.

A failure report holds the DSL text, the sizes, ``print(s)``, every call made (rejected ones included) and
the schedule and sizes shrunk by ``schedfuzz.minimize``; hypothesis adds an ``@reproduce_failure`` blob.
Failures of compiler bugs that are known and still open are excused and counted (``schedfuzz.KNOWN_BUGS``).

Environment:

* ``TENSORLANG_SCHEDULE_FUZZ`` -- number of hypothesis examples over the two tests together (default 600,
  as in CI; each example checks ``SCHEDULES_PER_EXAMPLE`` schedules: 2000 schedules, about 3 minutes of one
  core, half that with ``-n 2``). Long mode (about an hour of one core; the process grows by about 0.4 MB an
  example: llvmlite's O2 pipeline keeps about 80 KB of native memory per kernel built, freed or not)::

      TENSORLANG_SCHEDULE_FUZZ=20000 pytest tests/schedule/test_schedule_fuzz.py

* ``TENSORLANG_SCHEDULE_FUZZ_RANDOM=1`` -- new random examples instead of the fixed (derandomized) CI set.
* ``TENSORLANG_FUZZ_SLICE_SEED=N`` -- the seed of the fresh slice (``*_fresh_slice``: 240 examples that CI adds to
  its fixed set, drawn from a seed derived from the commit; see ``fuzzenv.py``).
* ``TENSORLANG_SCHEDULE_FUZZ_KNOWN=1`` -- excuse no failure as a known compiler bug (``schedfuzz.KNOWN_BUGS``).
* ``TENSORLANG_SCHEDULE_FUZZ_TRACE=PATH`` -- before each build, write the program, sizes and schedule to PATH,
  so that a crash of the whole process (a fatal error inside LLVM) leaves its repro there.
* ``TENSORLANG_SCHEDULE_FUZZ_SHRINK=1`` -- make the random choices through hypothesis and let it shrink a
  failing example (slow: minutes, and hypothesis' preference for extreme values makes the examples bigger
  and slower). By default an example's choices come from a ``random.Random`` seeded by hypothesis (uniform
  as ``progen`` and ``schedfuzz`` intend), a failure is not shrunk by hypothesis, and its report carries the
  schedule and sizes shrunk by ``schedfuzz.minimize`` instead.

``pytest tests/schedule/test_schedule_fuzz.py --hypothesis-show-statistics`` shows how often each outcome occurred.
"""

from __future__ import annotations

import random

import fuzzenv
import numpy as np
import progen
import pytest
import schedfuzz
from hypothesis import HealthCheck, Phase, event, given, note, reject, seed, settings
from hypothesis import strategies as st

import tensorlang as tl

EXAMPLES = fuzzenv.count("TENSORLANG_SCHEDULE_FUZZ", 250)
DERANDOMIZE = not fuzzenv.flag("TENSORLANG_SCHEDULE_FUZZ_RANDOM")
SCHEDULES_PER_EXAMPLE = 2
# the fresh slice (see fuzzenv.py): examples of a seed derived from the commit, about a minute of one core
SLICE_WORKLOAD_EXAMPLES, SLICE_PROGRAM_EXAMPLES = 100, 140

# the two tests share the examples: workloads get 40%, random programs the rest
WORKLOAD_EXAMPLES = max(1, (EXAMPLES * 2) // 5)
PROGRAM_EXAMPLES = max(1, EXAMPLES - WORKLOAD_EXAMPLES)
BOUNDARY_EXAMPLES = max(1, EXAMPLES // 10)  # besides those: the programs with clamp, min, max, abs indices

# See TENSORLANG_SCHEDULE_FUZZ_SHRINK above.
SHRINK = fuzzenv.flag("TENSORLANG_SCHEDULE_FUZZ_SHRINK")
PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target] + ([Phase.shrink, Phase.explain] if SHRINK else [])

FUZZ_SETTINGS = dict(
    phases=PHASES,
    deadline=None,
    derandomize=DERANDOMIZE,
    database=None if DERANDOMIZE else settings.default.database,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=True,
)


def _choices(data):
    """Every random choice of an example comes from one random.Random, drawn from hypothesis: seeded by it, or
    (TENSORLANG_SCHEDULE_FUZZ_SHRINK=1) making each choice through it, so that it can shrink them."""
    return progen.Src.from_random(data.draw(st.randoms(use_true_random=not SHRINK), label="choices"))


def _schedules(case, src):
    note(case.describe())
    try:
        for _ in range(SCHEDULES_PER_EXAMPLE):
            for outcome in schedfuzz.run_schedule(case, src):
                event(outcome)
    finally:
        tl.clear_cache()  # a fuzzed kernel lives no longer than its example


def _workload_schedules(data):
    from tensorlang import schedules

    name = data.draw(st.sampled_from(list(schedules.WORKLOADS)), label="workload")
    src = _choices(data)
    _schedules(schedfuzz.workload_case(name, src), src)


def _random_program_schedules(data):
    small = data.draw(st.integers(0, 9), label="small integer types") == 9  # one program in ten: u8, ..., u64
    src = _choices(data)
    try:
        case = schedfuzz.progen_case(src, small_ints=small)
        if small:
            event("a program in a small integer type")
    except progen.Reject as e:
        event(f"rejected program: {e}")
        reject()
    _schedules(case, src)


def _boundary_schedules(data):
    from schedule_cases import BOUNDARY_PROGRAMS

    name = data.draw(st.sampled_from(BOUNDARY_PROGRAMS), label="program")
    src = _choices(data)
    _schedules(schedfuzz.program_case(name, src), src)


@pytest.mark.slow
@settings(max_examples=BOUNDARY_EXAMPLES, **FUZZ_SETTINGS)
@given(data=st.data())
def test_boundary_program_schedules(data):
    _boundary_schedules(data)


@pytest.mark.slow
@settings(max_examples=WORKLOAD_EXAMPLES, **FUZZ_SETTINGS)
@given(data=st.data())
def test_workload_schedules(data):
    _workload_schedules(data)


@pytest.mark.slow
@settings(max_examples=PROGRAM_EXAMPLES, **FUZZ_SETTINGS)
@given(data=st.data())
def test_random_program_schedules(data):
    _random_program_schedules(data)


# The fresh slice: new examples at every commit, the same ones for a given commit (the seed is in pytest's header
# and in a failure's notes; TENSORLANG_FUZZ_SLICE_SEED=N reproduces it).
SLICE_SETTINGS = dict(FUZZ_SETTINGS, derandomize=False, database=None)


@pytest.mark.slow
@seed(fuzzenv.SLICE_SEED)
@settings(max_examples=SLICE_WORKLOAD_EXAMPLES, **SLICE_SETTINGS)
@given(data=st.data())
def test_workload_schedules_fresh_slice(data):
    note(fuzzenv.SLICE_NOTE)
    _workload_schedules(data)


@pytest.mark.slow
@seed(fuzzenv.SLICE_SEED)
@settings(max_examples=SLICE_PROGRAM_EXAMPLES, **SLICE_SETTINGS)
@given(data=st.data())
def test_random_program_schedules_fresh_slice(data):
    note(fuzzenv.SLICE_NOTE)
    _random_program_schedules(data)


# ------------------------------------------------------------------------------------------ quick checks
@pytest.mark.parametrize("seed", range(3))
def test_fuzzer_smoke(seed):
    """A few fixed schedules of every workload, for runs that skip the slow tests."""
    from tensorlang import schedules

    for i, name in enumerate(schedules.WORKLOADS):
        src = progen.Src.from_random(random.Random(1000 * seed + i))
        case = schedfuzz.workload_case(name, src)
        try:
            for outcome in schedfuzz.run_schedule(case, src):
                assert outcome.startswith(("checked", "skipped (known bug")), outcome
        finally:
            tl.clear_cache()  # a fuzzed kernel lives no longer than its example


SCAN_PROGRAMS = ("cumsum", "cumsumi", "fib", "iir_col", "iir_first", "scan_row", "scan_pipe")
"""The scans (stages that read themselves) of schedule_cases.PROGRAMS: their loops along the scan index run in order."""


@pytest.mark.parametrize("seed", range(4))
def test_fuzzer_scans(seed):
    """Random schedules of every scan: the refusals the fuzzer's model expects (a parallel or vectorized scan loop,
    compute_at, compute_inline or cache_write of a scan) and otherwise the unscheduled kernel's results."""
    for i, name in enumerate(SCAN_PROGRAMS):
        src = progen.Src.from_random(random.Random(7000 + 100 * seed + i))
        case = schedfuzz.program_case(name, src)
        try:
            for _ in range(SCHEDULES_PER_EXAMPLE * 2):
                for outcome in schedfuzz.run_schedule(case, src):
                    assert outcome.startswith(("checked", "skipped (known bug")), outcome
        finally:
            tl.clear_cache()


@pytest.mark.slow
@settings(max_examples=max(1, EXAMPLES // 6), **FUZZ_SETTINGS)
@given(data=st.data())
def test_scan_schedules(data):
    name = data.draw(st.sampled_from(SCAN_PROGRAMS), label="scan")
    src = _choices(data)
    _schedules(schedfuzz.program_case(name, src), src)


def test_fuzzer_reports_wrong_results():
    """The oracle itself: a kernel that differs from the baseline fails with the program, sizes, print(s)."""
    src = progen.Src.from_random(random.Random(5))
    case = schedfuzz.workload_case("matmul", src)
    case.baseline["C"] = case.baseline["C"] + np.float32(1)  # as if the schedule had changed the result
    case.oracle["C"] = case.baseline["C"]  # (which then differs from numpy's too)
    fz = schedfuzz.Fuzzer(case, src)
    fz.s["C"].split("i", 2)
    with pytest.raises(schedfuzz.FuzzFailure) as info:
        schedfuzz.check_schedule(fz)
    text = str(info.value)
    assert "WRONG RESULT" in text and "def matmul" in text and str(case.sizes) in text
    assert 's["C"].split("i", 2, outer="i_o", inner="i_i")' in text
    assert "does not reproduce" in text  # the minimizer compares against the (correct) unscheduled kernel


def _cancelling_case(baseline_value: float):
    """Row sums of rows that sum to exactly 0 (the fuzzer's inputs are multiples of 1/8), with a baseline that
    differs from the kernel's exact 0 by `baseline_value`."""
    op = tl.op("def rs(A: f32[M, K]) -> T:\n    T[m] += A[m, k]\n")
    row = np.array([0.125, -0.25, 1.5, -1.375], np.float32)
    A = np.stack([row, -row, row[::-1]])
    assert not tl.build(op, M=3, K=4)(A).any()
    base = {"T": np.full(3, baseline_value, np.float32)}
    return schedfuzz.Case("rows that cancel", op.source, {"M": 3, "K": 4}, op, [A], base, {"T": 4}, {"T": False})


def test_fuzzer_accepts_rounding_in_a_sum_that_cancelled():
    """A sum of multiples of 1/8 that cancels exactly: the unscheduled kernel gives 2**-26 where the vectorized one
    gives 0 (a fused multiply-add rounds differently), far beyond a tolerance scaled by the expected values, so
    such a difference is judged against the output's typical size (its size on other random inputs); a real wrong
    value still fails."""
    case = _cancelling_case(2.0 ** -26)
    fz = schedfuzz.Fuzzer(case, progen.Src.from_random(random.Random(5)))
    fz.s["T"].split("k", 2)
    assert schedfuzz.check_schedule(fz) == "checked"
    wrong = _cancelling_case(0.5)
    fz = schedfuzz.Fuzzer(wrong, progen.Src.from_random(random.Random(5)))
    fz.s["T"].split("k", 2)
    with pytest.raises(schedfuzz.FuzzFailure, match="WRONG RESULT"):
        schedfuzz.check_schedule(fz)


def test_fuzzer_accepts_a_result_that_agrees_with_numpy_where_the_sum_always_cancels():
    """`T0[i, j, k] += tanh(f32(r)) * X` over r in -1:2 with a 0-d X: the terms cancel whatever X is, the unscheduled
    kernel gives 1.49e-8 (scalar tanh) and the vectorized one the exact 0 (vector tanh), so the output's typical
    size is rounding noise too, and the input perturbation must keep the 0-d X an array. The kernel's result is
    accepted where it agrees with numpy's own within the budget the unscheduled kernel met; a wrong value still
    fails."""
    op = tl.op("def prog(X: f32[()]) -> T1:\n    T0[i, j, k] += tanh(f32(r)) * X where i in 0:4, j in 0:2, "
               "k in 0:4, r in -1:2\n    T1 = T0[3, 0, 0]\n")
    X = np.array(-1.625, np.float32)
    oracle = np.float64(sum(np.tanh(r) for r in (-1.0, 0.0, 1.0)) * -1.625)
    for baseline, ok in ((np.float32(1.4901161e-08), True), (np.float32(0.5), False)):
        case = schedfuzz.Case("cancels always", op.source, {}, op, [X], {"T1": np.array(baseline)}, {"T1": 4},
                              {"T1": False}, oracle={"T1": np.array(oracle)})
        fz = schedfuzz.Fuzzer(case, progen.Src.from_random(random.Random(5)))
        fz.s["T0"].vectorize("j")
        if ok:
            assert schedfuzz.check_schedule(fz) == "checked"
        else:  # the baseline is numpy's result then, and the kernel's 0 is not
            case.oracle["T1"] = np.array(np.float64(0.5))
            with pytest.raises(schedfuzz.FuzzFailure, match="WRONG RESULT"):
                schedfuzz.check_schedule(fz)


def test_fuzzer_judges_an_ill_conditioned_reference_by_its_sensitivity():
    """A 20,000-example run failed on the UNSCHEDULED layernorm at N=5, D=2: where a row's two values nearly
    agree, `x - mean` cancels and `sqrt(var + 1e-5)` magnifies the float32 rounding to a relative 5e-5, five
    times the oracle's tolerance. Such an element is judged by how far the float64 reference itself moves when
    each input moves by one unit in the last place; a real wrong value still fails."""
    from tensorlang import schedules

    w = schedules.WORKLOADS["layernorm"]
    sizes = {"N": 5, "D": 2}
    rng = np.random.default_rng(0)
    X = rng.standard_normal((5, 2)).astype(np.float32)
    X[:, 1] = X[:, 0] + np.float32(2e-3) * rng.standard_normal(5).astype(np.float32)
    gamma, beta = rng.standard_normal(2).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    got = tl.build(tl.op(w.source), **sizes)(X, gamma, beta)
    want = w.reference(X, gamma, beta, **sizes)
    with pytest.raises(AssertionError):  # the plain oracle: too tight here
        schedfuzz.assert_close(got, want, 4)
    assert schedfuzz.input_rounding_explains(w, [X, gamma, beta], sizes, 0, got, want, 4)
    wrong = got.copy()
    wrong[0, 0] += 0.01
    assert not schedfuzz.input_rounding_explains(w, [X, gamma, beta], sizes, 0, wrong, want, 4)


def test_fuzzer_judges_an_amplified_rounding_by_the_kernels_sensitivity():
    """A long random run failed on sqrt(|T0|) where T0[1] is a sum of five terms of about 0.5 that cancels
    exactly: the unscheduled kernel left 2**-28 of rounding, the vectorized one (another order) 2**-25, and
    the root turned that into 6e-5 against 1.7e-4. Such an element is judged by how far the unscheduled
    kernel's own result moves when the inputs move by one unit in the last place."""
    src = progen.Src.from_random(random.Random(5149368609))
    case = schedfuzz.progen_case(src)
    assert "abs(T0[i]) ** 0.5" in case.text
    fz = schedfuzz.Fuzzer(case, src)
    fz.s["T0"].vectorize("r")
    assert schedfuzz.check_schedule(fz) == "checked"
    wrong = case.baseline["T1"].copy()
    wrong[2, 0] += 0.01  # a well-conditioned element: no rounding explains that
    assert not schedfuzz.rounding_sensitive(case, "T1", wrong, case.baseline["T1"])
