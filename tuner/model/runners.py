"""The runners of model tuning: one per task (:class:`LocalRunners` by default, any ``factory(task) -> runner``
otherwise, a cluster's say), at most a few open at once (:class:`RunnerPool`).

Example::

    pool = RunnerPool(LocalRunners(jobs=2), max_open=2)
    runner = pool.get(task)
    pool.close()
"""
from __future__ import annotations

import time
from collections import Counter, OrderedDict

from tensorlang.tuner.measure.local import LocalRunner, MeasureOptions
from tensorlang.tuner.task import Task


class LocalRunners:
    """The default ``runner_factory``: a :class:`tensorlang.tuner.measure.local.LocalRunner` per task, which keeps each
    task's expected outputs (the unscheduled loop nest's) so that a runner opened again for the task does not compute
    them again. Any callable ``factory(task) -> runner`` (the runner has ``measure(configs, on_result)`` and
    ``close()``; ``retime`` and ``features`` are used when it has them) can replace it.

    Example::

        factory = LocalRunners(jobs=2, options=MeasureOptions(run_timeout=10), seed=0)
        runner = factory(task)
    """

    def __init__(self, jobs: int | None = None, options: MeasureOptions | None = None, seed: int = 0):
        self.jobs, self.options, self.seed = jobs, options or MeasureOptions(), seed
        self.expected: dict[str, list] = {}

    def __call__(self, task: Task):
        runner = LocalRunner(task, self.jobs, self.options, expected=self.expected.get(task.key), seed=self.seed)
        self.expected[task.key] = runner.expected
        return runner


class RunnerPool:
    """Runners by task, at most `max_open` open at once (the least recently used is closed first): each holds
    worker processes, and the scheduler may return to a task many rounds later.

    Example::

        pool = RunnerPool(LocalRunners(jobs=2), max_open=2)
        runner = pool.get(task)
        pool.close()
    """

    def __init__(self, factory, max_open: int = 4):
        self.factory, self.max_open = factory, max(1, max_open)
        self.open: OrderedDict = OrderedDict()
        self.phase_s: Counter = Counter()  # the runners' seconds by phase (build, run), and starting them

    def get(self, task: Task):
        """The open runner of `task`, or a new one."""
        if task.key in self.open:
            self.open.move_to_end(task.key)
            return self.open[task.key]
        while len(self.open) >= self.max_open:
            _, old = self.open.popitem(last=False)
            self._close(old)
        t0 = time.perf_counter()
        runner = self.factory(task)
        self.phase_s["start runners"] += time.perf_counter() - t0
        self.open[task.key] = runner
        return runner

    def _close(self, runner) -> None:
        self.phase_s.update(getattr(runner, "phase_s", None) or {})
        runner.close()

    def close(self) -> None:
        """Close every open runner."""
        while self.open:
            _, r = self.open.popitem(last=False)
            self._close(r)
