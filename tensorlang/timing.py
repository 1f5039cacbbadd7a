"""Timing: warm up, then repeat a call until both a minimum count and a minimum time are reached.

>>> times = measure(lambda: sum(range(100)), min_runs=10, min_time=0.0)
>>> len(times) >= 10
True
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def measure(fn: Callable[[], object], min_runs: int = 10, min_time: float = 0.2, warmup: int = 2,
            max_time: float = 60.0) -> list[float]:
    """Seconds of each timed call of `fn` after `warmup` untimed calls: at least `min_runs` calls and at least
    `min_time` seconds in all (stopping early only when `max_time` is exceeded after three calls).

    >>> len(measure(lambda: None, min_runs=5, min_time=0.0))
    5
    """
    for _ in range(warmup):
        fn()
    times: list[float] = []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        spent = time.perf_counter() - start
        if (len(times) >= min_runs and spent >= min_time) or (len(times) >= 3 and spent > max_time):
            return times


def median(times: list[float]) -> float:
    """The median of a list of times (the mean of the middle two for an even count).

    >>> median([0.3, 0.1, 0.2]), median([0.1, 0.2, 0.4, 0.3])
    (0.2, 0.25)
    """
    return statistics.median(times)
