"""A tuning task: a workload at fixed sizes, for this CPU and thread count, with its key in the database.

Example::

    >>> t = Task.create("matmul", preset="small", threads=1)
    >>> t.sizes, len(t.key)
    ({'M': 64, 'N': 48, 'K': 32}, 16)
    >>> t.space.name
    'matmul'
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass

import schedules
import tensorlang as tl
from tensorlang.bind import check_sizes
from tensorlang.errors import BuildError, UsageError
from tensorlang.target import host_target
from tensorlang.threadpool import num_threads


def normalized_source(source: str) -> str:
    """The DSL text with comments, blank lines and trailing spaces removed (what the task key hashes).

    Example::

        >>> normalized_source("def f(A: f32[N]) -> B:   # doubles\\n\\n    B[i] = A[i] * 2.0\\n")
        'def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0'
    """
    lines = []
    for line in source.splitlines():
        code = line.split("#", 1)[0].rstrip()
        if code.strip():
            lines.append(code)
    return "\n".join(lines)


@dataclass(frozen=True)
class Task:
    """Workload name, sizes, target description and thread count; ``key`` identifies it in the database."""

    workload: str
    sizes: dict
    target: dict
    threads: int

    @staticmethod
    def create(workload: str, preset: str | None = None, sizes: dict | None = None,
               threads: int | None = None) -> "Task":
        """The task for ``workload`` at ``preset`` (default preset) or explicit ``sizes`` on this machine.

        ``sizes`` may set a subset; the rest come from the default preset. Raises UsageError naming the
        workload, preset or size that is wrong.
        """
        w = schedules.get(workload)
        if preset is not None and sizes:
            raise UsageError("give a preset or sizes, not both")
        bound = w.sizes(preset)
        if sizes:
            unknown = sorted(set(sizes) - set(bound))
            if unknown:
                raise UsageError(f"workload {workload!r} has no size {unknown[0]!r}; sizes: {', '.join(bound)}")
            bound.update(sizes)
            w.check_sizes(bound)
        try:
            check_sizes(tl.op(w.source), bound)
        except BuildError as e:
            raise UsageError(str(e)) from None
        if w.space is None:
            raise UsageError(f"workload {workload!r} has no search space")
        t = host_target()
        target = {"triple": t.triple, "cpu": t.cpu, "features": t.features}
        return Task(workload, bound, target, threads or num_threads())

    @property
    def workload_def(self):
        """The :class:`schedules.Workload`."""
        return schedules.get(self.workload)

    @functools.cached_property
    def op(self):
        """The parsed program."""
        return tl.op(self.workload_def.source)

    @functools.cached_property
    def space(self):
        """The workload's search space at these sizes."""
        return self.workload_def.space(self.sizes)

    @property
    def flops(self) -> float:
        """Floating-point operations of one run."""
        return float(self.workload_def.flops(self.sizes))

    @functools.cached_property
    def key(self) -> str:
        """16 hex digits of a hash of the normalized DSL, the sizes, the target and the thread count."""
        text = json.dumps([normalized_source(self.workload_def.source), self.sizes, self.target, self.threads],
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def describe(self) -> str:
        """``workload(K=V, ...) on CPU, N threads``."""
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"{self.workload}({sizes}) on {self.target['cpu']}, {self.threads} thread{'s' * (self.threads != 1)}"

    def __hash__(self) -> int:
        return hash(self.key)
