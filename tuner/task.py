"""A tuning task: a workload at fixed sizes, for this CPU and thread count, with its key in the database.

Example::

    >>> t = Task.create("matmul", preset="small", threads=1)
    >>> t.sizes, len(t.key)
    ({'M': 64, 'N': 48, 'K': 32}, 16)
    >>> t.space.name, Task.create("matmul", preset="small", threads=1, space="hand").space.name
    ('auto:matmul', 'matmul')
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass

import tensorlang as tl
from tensorlang import schedules
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


def task_key(source: str, sizes: dict, target: dict, threads: int) -> str:
    """16 hex digits of a hash of the normalized DSL, the sizes, the target and the thread count: the task's key
    in the database (a built-in workload and a user's copy of its program share it).

    Example::

        >>> len(task_key("def f(A: f32[N]) -> B:\\n    B[i] = A[i]", {"N": 4}, {"cpu": "x"}, 1))
        16
    """
    text = json.dumps([normalized_source(source), dict(sizes), target, threads], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


SPACE_KINDS = ("default", "generated", "hand")


@dataclass(frozen=True)
class Task:
    """Workload name, sizes, target description and thread count; ``key`` identifies it in the database.

    ``source`` is the DSL text of a user's program (empty for a built-in workload, whose text the library holds);
    ``space_kind`` which search space the tuner uses: "generated" (derived from the program by the
    auto-scheduler's rules), "hand" (the workload's hand-written one) or "default" (the built-in workload's
    choice in :data:`tensorlang.schedules.SPACE_CHOICE`, measured; the generated one for a user's program). The space is
    not part of the key: records of both spaces describe the same task.
    """

    workload: str
    sizes: dict
    target: dict
    threads: int
    source: str = ""
    space_kind: str = "default"

    def __post_init__(self):
        if self.space_kind not in SPACE_KINDS:
            raise UsageError(f"space {self.space_kind!r}: choose one of {', '.join(SPACE_KINDS)}")

    @staticmethod
    def create(workload: str, preset: str | None = None, sizes: dict | None = None,
               threads: int | None = None, space: str = "default") -> Task:
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
        if space == "hand" and w.space is None:
            raise UsageError(f"workload {workload!r} has no hand-written search space; use the generated one")
        return Task(workload, bound, _target(), threads or num_threads(), space_kind=space)

    @staticmethod
    def from_source(source, sizes: dict, threads: int | None = None, space: str = "default") -> Task:
        """The task of any program (DSL text or an ``Op``) at ``sizes`` (every size given). A program that is a
        built-in workload's up to names, spacing and comments (:func:`tensorlang.schedules.lookup.workload_of`) is
        that workload's task, its sizes under the workload's names: its records are the workload's, so that the
        keys stored in databases and datasets stay those of the workload's text.

        Example::

            >>> t = Task.from_source("def twice(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0", {"N": 64}, threads=1)
            >>> t.workload, t.space.name
            ('twice', 'auto:twice')
            >>> mm = "def mm(X: f32[P, Q], Y: f32[Q, R]) -> Z:\\n    Z[m, n] += X[m, q] * Y[q, n]"
            >>> t = Task.from_source(mm, {"P": 64, "Q": 32, "R": 48}, threads=1)
            >>> t.workload, t.sizes, t.key == Task.create("matmul", preset="small", threads=1).key
            ('matmul', {'M': 64, 'N': 48, 'K': 32}, True)
        """
        from tensorlang.schedules.lookup import sizes_of, workload_of
        op = source if isinstance(source, tl.Op) else tl.op(source)
        try:
            bound = check_sizes(op, sizes)
        except BuildError as e:
            raise UsageError(str(e)) from None
        found = workload_of(op)
        if found is not None:
            return Task.create(found[0].name, sizes=sizes_of(found[2], bound), threads=threads, space=space)
        if space == "hand":
            raise UsageError(f"{op.name} is not a built-in workload: it has no hand-written search space")
        return Task(op.name, bound, _target(), threads or num_threads(), source=op.source, space_kind=space)

    @property
    def builtin(self) -> bool:
        """Whether the task is a built-in workload's."""
        return not self.source

    @property
    def program_source(self) -> str:
        """The DSL text of the task's program."""
        return self.source or schedules.get(self.workload).source

    @functools.cached_property
    def workload_def(self):
        """The :class:`tensorlang.schedules.Workload` (for a user's program,
        :func:`tensorlang.schedules.program.program_workload`)."""
        if self.source:
            from tensorlang.schedules.program import program_workload
            return program_workload(self.source, self.sizes)
        return schedules.get(self.workload)

    @functools.cached_property
    def op(self):
        """The parsed program."""
        return tl.op(self.program_source)

    @property
    def space_used(self) -> str:
        """"generated" or "hand": the search space the tuner uses for this task."""
        if self.space_kind != "default":
            return self.space_kind
        if self.source or self.workload_def.space is None:
            return "generated"
        return schedules.SPACE_CHOICE.get(self.workload, "generated")

    @functools.cached_property
    def space(self):
        """The task's search space at these sizes (see ``space_kind``)."""
        if self.space_used == "hand":
            return self.workload_def.space(self.sizes)
        from tensorlang.autosched.space import generated_space
        return generated_space(self.op, self.sizes, self.threads)

    @property
    def flops(self) -> float:
        """Floating-point operations of one run."""
        return float(self.workload_def.flops(self.sizes))

    @functools.cached_property
    def key(self) -> str:
        """16 hex digits of a hash of the normalized DSL, the sizes, the target and the thread count."""
        return task_key(self.program_source, self.sizes, self.target, self.threads)

    def describe(self) -> str:
        """``workload(K=V, ...) on CPU, N threads``."""
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"{self.workload}({sizes}) on {self.target['cpu']}, {self.threads} thread{'s' * (self.threads != 1)}"

    def to_dict(self) -> dict:
        """The task's fields as JSON-able data (``Task(**d)`` rebuilds it).

        Example::

            >>> t = Task.create("matmul", preset="small", threads=1)
            >>> Task(**t.to_dict()).key == t.key
            True
        """
        return {"workload": self.workload, "sizes": dict(self.sizes), "target": dict(self.target),
                "threads": self.threads, "source": self.source, "space_kind": self.space_kind}

    def __hash__(self) -> int:
        return hash(self.key)


def _target() -> dict:
    t = host_target()
    return {"triple": t.triple, "cpu": t.cpu, "features": t.features}
