"""The tests' own comparisons against numpy (oracle.assert_close and the schedule fuzzer's judges): a NaN or an
infinity where numpy has a number, or a number where numpy has NaN, never passes."""
import random

import numpy as np
import progen
import pytest
import schedfuzz
from oracle import assert_close

EXPECTED = np.array([1.0, -2.0, 0.5, np.nan, np.inf], np.float32)


def wrong_values():
    for i, v in [(0, np.nan), (1, np.inf), (2, -np.inf), (3, 0.5), (4, np.nan), (4, -np.inf), (4, 1e30)]:
        got = EXPECTED.copy()
        got[i] = v
        yield got


def test_assert_close_passes_the_same_special_values():
    assert_close(EXPECTED.copy(), EXPECTED)
    assert_close(EXPECTED.copy(), EXPECTED, exact=True)


@pytest.mark.parametrize("exact", [False, True])
def test_assert_close_fails_a_nan_or_infinity_that_numpy_does_not_have(exact):
    for got in wrong_values():
        with pytest.raises(AssertionError):
            assert_close(got, EXPECTED, reduction_len=10**6, exact=exact)
    with pytest.raises(AssertionError):  # all NaN, as an output that was never written
        assert_close(np.full(5, np.nan, np.float32), np.ones(5, np.float32), reduction_len=10**6)


def test_the_schedule_fuzzers_lenient_judges_fail_a_nan_too():
    """The judges that accept a rounding difference beyond the plain tolerance (an ill-conditioned reference, a sum
    that cancelled, an element that amplifies rounding) must still fail a NaN or an infinity."""
    def compute(x):
        return x.astype(np.float64)
    x = EXPECTED.copy()
    with np.errstate(invalid="ignore"):  # inf - inf
        assert schedfuzz.within_rounding_spread(compute, [x], compute(x), EXPECTED.copy(), EXPECTED, 1e-6, 1e9)
        for got in wrong_values():
            assert not schedfuzz.within_rounding_spread(compute, [x], compute(x), got, EXPECTED, 1e-6, 1e9)
    src = progen.Src.from_random(random.Random(5))
    case = schedfuzz.workload_case("matmul", src)
    want = case.baseline["C"]
    got = want.copy()
    got.flat[0] = np.nan
    assert not schedfuzz.cancelled(case, "C", got, want, None)
    assert not schedfuzz.agrees_with_numpy(case, "C", got)
    assert not schedfuzz.rounding_sensitive(case, "C", got, want)
