"""Disturbance: how much CPU other processes took while a measurement ran, so that the tuner and every benchmark
can mark the measurements a busy machine disturbed, time those again, and say so at the end.

A :class:`CpuSample` reads the idle time of the CPUs this process may run on from ``/proc/stat`` with our own
CPU time (this process's, every thread, plus that of the helper processes named, say a benchmark's library
workers) and the wall clock; two samples give :func:`others_cpus`: the average number of CPUs that other
processes (and, on a virtual machine, the hypervisor's steal) used in between. It is what the CPUs did that was
neither idle nor ours::

    others = cpus - (idle + iowait) / (ticks per second * wall seconds) - own CPU seconds / wall seconds

``/proc/stat`` counts in clock ticks (``SC_CLK_TCK``, 100 a second), and each counter may be off by up to a tick
over an interval, so a figure over a short interval is coarse: a :class:`Disturbance` carries that
``uncertainty`` (in CPUs) and :func:`busy` counts only what lies beyond it; an interval too short for a figure
within :data:`MAX_UNCERTAINTY` has none. Where ``/proc/stat`` cannot be read (not Linux) every figure is None
and nothing fails.

Example::

    >>> with Watch() as w:
    ...     _ = sum(range(100000))
    >>> w.disturbance is None or w.disturbance.others_cpus >= 0
    True
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass

__all__ = ["CpuSample", "Disturbance", "Tally", "Watch", "between", "busy", "busy_note", "others_cpus",
           "parse_stat", "process_ticks", "read_stat", "run_rounds", "sample", "slowdown"]

#: CPUs that other processes may use without a measurement counting as busy, beyond the CPUs it leaves free:
#: an idle machine's own background (kernel threads, daemons, the tuner's idle processes) takes a few hundredths
#: of a CPU, and a tenth keeps those from marking quiet measurements.
NOISE_CPUS = 0.1

#: The most a :func:`slowdown` bound says: a figure beyond it (others on every CPU) means "much slower", no more.
MAX_SLOWDOWN = 10.0

#: The coarsest figure kept (CPUs): over 0.04 s or less (4 ticks) the counters cannot tell more, and the
#: measurement's figure is unknown (None) instead.
MAX_UNCERTAINTY = 0.5

#: Rounds of an interleaved timing run again at most, when the machine was busy during rounds (:func:`run_rounds`).
EXTRA_ROUNDS = 3

STAT_PATH = "/proc/stat"


def _ticks_per_s() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100


TICKS_PER_S = _ticks_per_s()


def read_stat() -> str | None:
    """The text of ``/proc/stat``, or None where there is none (not Linux). The tests replace it with a fake.

    >>> text = read_stat()
    >>> text is None or text.startswith("cpu")
    True
    """
    try:
        with open(STAT_PATH) as f:
            return f.read()
    except OSError:
        return None


@dataclass(frozen=True)
class CpuSample:
    """The machine's CPU counters at one moment: ``wall_s`` (``time.perf_counter()``), ``own_s`` (our CPU
    seconds: this process's, all of its threads, ``time.process_time()``, plus the helper processes'),
    ``idle_ticks`` (idle plus iowait clock ticks of the CPUs this process may run on), ``cpus`` (how many CPUs
    those are) and ``lines`` (how many ``/proc`` lines of two counters were read: each counter may be off by up to
    a tick).

    Example::

        >>> CpuSample(wall_s=1.0, own_s=0.5, idle_ticks=300, cpus=2, lines=1).cpus
        2
    """

    wall_s: float
    own_s: float
    idle_ticks: int
    cpus: int
    lines: int = 1


def parse_stat(text: str, allowed: set | None = None) -> tuple[int, int, int] | None:
    """``(idle_ticks, cpus, lines)`` of a ``/proc/stat`` text: the aggregate ``cpu`` line where ``allowed`` (the
    CPU numbers this process may run on; None: all) holds every CPU, else the sum of the allowed CPUs' own lines.
    Idle is the ``idle`` plus the ``iowait`` column (a CPU waiting for a disk is free to run us). None when the
    text has no CPU lines it can read.

    Example::

        >>> text = "cpu  10 0 5 300 2 0 0 1\\ncpu0 5 0 2 100 1 0 0 0\\ncpu1 5 0 3 200 1 0 0 1\\nintr 7\\n"
        >>> parse_stat(text), parse_stat(text, {1})
        ((302, 2, 1), (201, 1, 1))
    """
    total = None
    per: dict[int, int] = {}
    try:
        for line in text.splitlines():
            if not line.startswith("cpu"):
                continue
            name, *fields = line.split()
            idle = int(fields[3]) + (int(fields[4]) if len(fields) > 4 else 0)
            if name == "cpu":
                total = idle
            else:
                per[int(name[3:])] = idle
    except (ValueError, IndexError):
        return None
    if total is None or not per:
        return None
    if allowed is None or set(per) <= set(allowed):
        return total, len(per), 1
    mine = [per[c] for c in sorted(allowed) if c in per]
    return (sum(mine), len(mine), len(mine)) if mine else None


def process_ticks(pid: int) -> int | None:
    """The CPU clock ticks (user plus system, every thread) process ``pid`` has used, from ``/proc/PID/stat``;
    None when it cannot be read (the process is gone, or not Linux).

    >>> ticks = process_ticks(os.getpid())
    >>> ticks is None or ticks >= 0
    True
    """
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # the command name, in parentheses, may hold spaces
        return int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return None


def sample(pids=()) -> CpuSample | None:
    """The CPU counters now, with the CPU time of the helper processes ``pids`` counted as ours; None where
    ``/proc/stat`` (or a helper's ``/proc/PID/stat``) cannot be read.

    >>> s = sample()
    >>> s is None or (s.cpus >= 1 and s.own_s > 0)
    True
    """
    text = read_stat()
    if not text:
        return None
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        allowed = None
    parsed = parse_stat(text, allowed)
    if parsed is None:
        return None
    idle, cpus, lines = parsed
    helpers = [process_ticks(p) for p in pids]
    if None in helpers:
        return None
    own = time.process_time() + sum(helpers) / TICKS_PER_S
    return CpuSample(time.perf_counter(), own, idle, cpus, lines + len(helpers))


def others_cpus(before: CpuSample | None, after: CpuSample | None) -> float | None:
    """The average number of CPUs other processes used between two samples (from 0 to the CPUs counted), or None
    when either is missing, no time passed, or the CPUs counted changed in between.

    >>> a = CpuSample(wall_s=10.0, own_s=1.0, idle_ticks=1000, cpus=2)
    >>> others_cpus(a, CpuSample(wall_s=11.0, own_s=2.0, idle_ticks=1050, cpus=2))   # 1 ours, 0.5 idle
    0.5
    >>> others_cpus(a, CpuSample(wall_s=11.0, own_s=2.0, idle_ticks=1100, cpus=2))   # the rest idle
    0.0
    >>> others_cpus(a, None) is None
    True
    """
    if before is None or after is None or before.cpus != after.cpus:
        return None
    wall = after.wall_s - before.wall_s
    if wall <= 0:
        return None
    idle = (after.idle_ticks - before.idle_ticks) / TICKS_PER_S
    own = after.own_s - before.own_s
    return min(float(after.cpus), max(0.0, after.cpus - (idle + own) / wall))


def busy(others: float, threads: int, cpus: int, uncertainty: float = 0.0) -> bool:
    """Whether other processes took CPU that ``threads`` threads needed: they used more than the CPUs those
    threads leave free, by more than :data:`NOISE_CPUS` and the figure's ``uncertainty``.

    >>> busy(0.05, threads=2, cpus=2), busy(1.0, threads=2, cpus=2), busy(1.0, threads=1, cpus=4)
    (False, True, False)
    """
    return others > max(0, cpus - threads) + NOISE_CPUS + uncertainty


def slowdown(others: float, threads: int, cpus: int) -> float:
    """How many times longer a time may read when other processes use ``others`` of ``cpus`` CPUs and ``threads``
    threads share the rest alike (at most :data:`MAX_SLOWDOWN`): 1 while the CPUs left are enough. A runtime that
    waits for a thread the scheduler does not run can lose more than this share says.

    >>> slowdown(1.0, threads=2, cpus=2), slowdown(1.0, threads=1, cpus=2), slowdown(2.0, threads=2, cpus=2)
    (2.0, 1.0, 10.0)
    """
    free = cpus - others
    if free >= threads:
        return 1.0
    return min(MAX_SLOWDOWN, threads / free) if free > 0 else MAX_SLOWDOWN


@dataclass(frozen=True)
class Disturbance:
    """What other processes took while one measurement ran: ``others_cpus`` (the average CPUs they used),
    ``cpus`` (the CPUs counted: those this process may run on), ``seconds`` (how long the measurement ran) and
    ``uncertainty`` (in CPUs: ``/proc/stat``'s tick rounding over that time).

    Example::

        >>> d = Disturbance(others_cpus=1.0, cpus=2, seconds=0.5, uncertainty=0.04)
        >>> d.busy(threads=2), d.busy(threads=1), d.slowdown(threads=2)
        (True, False, 2.0)
        >>> Disturbance.from_json(d.to_json()) == d
        True
    """

    others_cpus: float
    cpus: int
    seconds: float
    uncertainty: float = 0.0

    def __post_init__(self):
        for name in ("others_cpus", "seconds", "uncertainty"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise ValueError(f"Disturbance: {name} must be a finite number >= 0, got {value!r}")
        if isinstance(self.cpus, bool) or not isinstance(self.cpus, int) or self.cpus < 1:
            raise ValueError(f"Disturbance: cpus must be an integer >= 1, got {self.cpus!r}")

    def busy(self, threads: int) -> bool:
        """Whether other processes took CPU that ``threads`` threads needed (:func:`busy`).

        >>> Disturbance(0.0, 2, 1.0).busy(threads=2)
        False
        """
        return busy(self.others_cpus, threads, self.cpus, self.uncertainty)

    def slowdown(self, threads: int) -> float:
        """How many times longer a time may read (:func:`slowdown`).

        >>> Disturbance(1.5, 2, 1.0).slowdown(threads=1)
        2.0
        """
        return slowdown(self.others_cpus, threads, self.cpus)

    def to_json(self) -> dict:
        """The fields as a JSON-able dict.

        >>> Disturbance(0.25, 2, 0.1).to_json()
        {'others_cpus': 0.25, 'cpus': 2, 'seconds': 0.1, 'uncertainty': 0.0}
        """
        return asdict(self)

    @staticmethod
    def from_json(d: dict | None) -> Disturbance | None:
        """The Disturbance of :meth:`to_json`'s dict (None for None).

        >>> Disturbance.from_json({"others_cpus": 0.25, "cpus": 2, "seconds": 0.1}).uncertainty
        0.0
        """
        if d is None:
            return None
        return Disturbance(float(d["others_cpus"]), int(d["cpus"]), float(d["seconds"]),
                           float(d.get("uncertainty", 0.0)))

    @staticmethod
    def combine(parts) -> Disturbance | None:
        """One figure for several measurements: their CPUs used by others and uncertainty averaged by their
        seconds, their seconds added (None when none has a figure).

        >>> Disturbance.combine([Disturbance(1.0, 2, 0.25, 0.2), Disturbance(0.0, 2, 0.75, 0.0), None])
        Disturbance(others_cpus=0.25, cpus=2, seconds=1.0, uncertainty=0.05)
        """
        parts = [p for p in parts if p is not None]
        if not parts:
            return None
        seconds = sum(p.seconds for p in parts)
        if seconds <= 0:
            return Disturbance(max(p.others_cpus for p in parts), max(p.cpus for p in parts), 0.0,
                               max(p.uncertainty for p in parts))
        return Disturbance(sum(p.others_cpus * p.seconds for p in parts) / seconds, max(p.cpus for p in parts),
                           seconds, sum(p.uncertainty * p.seconds for p in parts) / seconds)


def between(before: CpuSample | None, after: CpuSample | None) -> Disturbance | None:
    """The :class:`Disturbance` of the time between two samples: None when :func:`others_cpus` is, or when the
    time was too short for a figure within :data:`MAX_UNCERTAINTY`.

    >>> a = CpuSample(wall_s=10.0, own_s=1.0, idle_ticks=1000, cpus=2)
    >>> between(a, CpuSample(wall_s=10.5, own_s=1.5, idle_ticks=1000, cpus=2))
    Disturbance(others_cpus=1.0, cpus=2, seconds=0.5, uncertainty=0.04)
    >>> between(a, CpuSample(wall_s=10.01, own_s=1.0, idle_ticks=1000, cpus=2)) is None
    True
    """
    others = others_cpus(before, after)
    if others is None:
        return None
    seconds = after.wall_s - before.wall_s
    uncertainty = 2 * after.lines / (TICKS_PER_S * seconds)
    return Disturbance(others, after.cpus, seconds, uncertainty) if uncertainty <= MAX_UNCERTAINTY else None


class Watch:
    """A context manager that samples the CPU counters around a timed block (the CPU time of the helper processes
    ``pids`` counted as ours): ``disturbance`` afterwards (None where unknown), also added to ``tally`` when one
    is given.

    Example::

        >>> tally = Tally(threads=1)
        >>> with Watch(tally) as w:
        ...     _ = sum(range(100000))
        >>> tally.measured == (w.disturbance is not None)
        True
    """

    def __init__(self, tally: Tally | None = None, pids=()):
        self.tally = tally
        self.pids = tuple(pids)
        self.disturbance: Disturbance | None = None
        self._before: CpuSample | None = None

    def __enter__(self) -> Watch:
        self._before = sample(self.pids)
        return self

    def __exit__(self, *exc) -> None:
        self.disturbance = between(self._before, sample(self.pids))
        if self.tally is not None:
            self.tally.add(self.disturbance)


class Tally:
    """Counts measurements by whether the machine was busy while they ran, for ``threads`` threads: how many
    had a figure (``measured``), how many of them were busy, and what others used meanwhile.

    Example::

        >>> t = Tally(threads=2)
        >>> t.add(Disturbance(0.0, 2, 0.1)), t.add(Disturbance(1.0, 2, 0.1)), t.add(None)
        (False, True, False)
        >>> t.to_json()["busy_fraction"], t.note()
        (0.5, 'the machine was busy during 50% of the measurements (other processes used 1.0 CPUs on average \
while they ran); figures may be off by up to 100%')
    """

    def __init__(self, threads: int):
        self.threads = threads
        self.measured = 0
        self.busy = 0
        self.cpus = 0
        self._busy_others = 0.0

    def add(self, d: Disturbance | None) -> bool:
        """Count one measurement's figure (None: unknown, not counted); whether it was busy."""
        if d is None:
            return False
        self.measured += 1
        self.cpus = max(self.cpus, d.cpus)
        if d.busy(self.threads):
            self.busy += 1
            self._busy_others += d.others_cpus
            return True
        return False

    def watch(self, pids=()) -> Watch:
        """A :class:`Watch` that adds its figure here."""
        return Watch(self, pids)

    def to_json(self) -> dict:
        """``{"threads", "measurements", "busy", "busy_fraction", "others_cpus", "cpus", "slowdown"}``:
        ``others_cpus`` is the average over the busy measurements (None when none was busy) and ``slowdown`` its
        :func:`slowdown` bound."""
        others = self._busy_others / self.busy if self.busy else None
        return {"threads": self.threads, "measurements": self.measured, "busy": self.busy,
                "busy_fraction": self.busy / self.measured if self.measured else 0.0, "others_cpus": others,
                "cpus": self.cpus,
                "slowdown": slowdown(others, self.threads, self.cpus) if others is not None else 1.0}

    def note(self) -> str | None:
        """The line to print at the end of a run (None when no measurement was busy): :func:`busy_note`."""
        return busy_note(self.to_json())


def busy_note(figures: dict | None) -> str | None:
    """The one line that says a run's measurements were disturbed, from :meth:`Tally.to_json`'s figures (None
    when none was busy): how many, how many CPUs the others used, and by how much a time may read long
    (:func:`slowdown`).

    >>> busy_note({"measurements": 40, "busy": 10, "busy_fraction": 0.25, "others_cpus": 0.9, "slowdown": 1.8})
    'the machine was busy during 25% of the measurements (other processes used 0.9 CPUs on average while they \
ran); figures may be off by up to 80%'
    >>> busy_note({"measurements": 40, "busy": 0}) is None
    True
    """
    if not figures or not figures.get("busy"):
        return None
    share = max(1, round(100 * figures["busy_fraction"]))
    return (f"the machine was busy during {share}% of the measurements (other processes used "
            f"{figures['others_cpus']:.1f} CPUs on average while they ran); figures may be off by up to "
            f"{(figures['slowdown'] - 1) * 100:.0f}%")


def run_rounds(rounds: int, run_round, extra: int = EXTRA_ROUNDS) -> list[int]:
    """Run ``run_round(k)`` for k = 0, 1, ...: ``rounds`` rounds, and one more for each round during which the
    machine was busy (``run_round`` returns True; False or None: quiet or unknown), at most ``extra`` more. Returns
    the rounds whose figures count: the quiet ones where there are any, else every one.

    >>> busy_rounds = {0}
    >>> run_rounds(3, lambda k: k in busy_rounds)
    [1, 2, 3]
    >>> run_rounds(2, lambda k: True, extra=1)
    [0, 1, 2]
    """
    quiet: list[int] = []
    k = 0
    while len(quiet) < rounds and k < rounds + extra:
        if not run_round(k):
            quiet.append(k)
        k += 1
    return quiet or list(range(k))
