"""The task scheduler of model tuning: which task gets the next round of trials.

A model's latency is about ``L = sum_i w_i * c_i``: ``w_i`` the weight of task i (its kernel calls per model run),
``c_i`` the best time measured for it so far (before its first valid measurement, its time in a profile run of the
model). Tuning is rounds: a round gives one task ``r`` more trials. First every task gets one round (warm-up, the
auto-scheduler's zero-trial pick first: every ``c_i`` is then a measurement). Then, in the manner of Ansor's task
scheduler (Zheng et al., OSDI 2020, section 6), each round goes to the task whose next round is expected to lower
``L`` the most:

``gain_i = w_i * (alpha * r * backward_i + (1 - alpha) * (next_i - c_i))``  (negative: the most negative wins)

- ``w_i``: dL/dc_i, the chain rule through the weighted sum;
- ``backward_i``: the slope of task i's best-so-far curve over its last ``window`` rounds (seconds per trial, <= 0);
- ``next_i``: a guess of ``c_i`` after one more round, fitted to the task's own measurements: ``c_i - f_i *
  max(spread_i, c_i - beta * flops_i / best_group_flops)`` with ``f_i = r / (n_i + r)`` (``n_i`` the task's trials
  so far). ``spread_i`` is the mean gap between the task's fastest measured times (the fastest 8): if the next
  trials were drawn like the earlier ones, one of ``r`` more beats all ``n_i`` with probability about ``f_i``, and
  by about that gap. A task still spread wide (few trials, a search that keeps finding faster regions) is promised
  much; a task whose fastest configs lie within the noise of one another, little, however long it takes. The
  second term is the room to the time the task would take at ``1/beta`` of the best throughput reached by a task of
  its kind (its *group*: the same program kind, as ``convolution_blocked_relu``). With fewer than 3 valid times
  the whole ``c_i`` is the room.

Both terms are seconds of the model's time: the scheduler spends trials where the time is and where the task's own
measurements say it still falls. (Ansor's forward term, ``c_i * r / n_i``, assumes every task's whole time is
room: it kept promising a large task on a flat curve more than a small task had left to give, and starved five of
ResNet-18's tasks.) A task that keeps far below its group's throughput after many more rounds than the others
leaves the group (it is not similar after all); a task whose search space is used up is dead.
``strategy="round-robin"`` gives the rounds in turn instead (to compare).

Example::

    >>> s = TaskScheduler([TaskState(weight=2, flops=1e9, seconds_now=0.010), TaskState(weight=1, flops=1e6,
    ...                                                                              seconds_now=0.001)])
    >>> s.warmup_pending()
    [0, 1]
    >>> s.record(0, trials=16, best_s=0.008); s.record(1, trials=16, best_s=0.0005)
    >>> s.next_task(), round(s.estimated_latency() * 1e3, 2)
    (0, 16.5)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from tensorlang.errors import UsageError

STRATEGIES = ("gradient", "round-robin")
LOWEST_KEPT = 8  # the fastest times a task keeps, for the spread of its forward term


@dataclass
class TaskState:
    """What the scheduler knows of one task: weight, FLOPs of one call, similarity group, trials so far, best
    seconds so far (``math.inf`` before a valid measurement), the seconds of one call in a profile run (used until
    then), the best after each round ``[(trials, best_s)]``, its fastest valid times (sorted, at most
    ``LOWEST_KEPT``), and whether it is dead (nothing left to try).

    Example::

        >>> TaskState(weight=3, flops=1e6, seconds_now=0.002).cost
        0.002
    """

    weight: float
    flops: float
    group: str | None = None
    seconds_now: float | None = None
    trials: int = 0
    best_s: float = math.inf
    history: list = field(default_factory=list)
    lowest: list = field(default_factory=list)
    dead: bool = False

    @property
    def cost(self) -> float:
        """The task's time in the latency estimate: its best measurement, else its profiled time (else 1 s)."""
        if math.isfinite(self.best_s):
            return self.best_s
        return self.seconds_now if self.seconds_now else 1.0

    @property
    def rounds(self) -> int:
        """Rounds the task has had."""
        return len(self.history)

    def keep_times(self, times) -> None:
        """Add valid measured seconds to the task's fastest times (None and non-finite ones are skipped).

        Example::

            >>> st = TaskState(1, 1.0); st.keep_times([3.0, None, 1.0, 2.0]); st.lowest
            [1.0, 2.0, 3.0]
        """
        ok = [float(t) for t in times if t is not None and math.isfinite(t) and t > 0]
        self.lowest = sorted(self.lowest + ok)[:LOWEST_KEPT]

    @property
    def spread(self) -> float | None:
        """The mean gap between the task's fastest measured times (None with fewer than 3).

        Example::

            >>> st = TaskState(1, 1.0); st.keep_times([1.0, 1.5, 3.0]); st.spread
            1.0
        """
        if len(self.lowest) < 3:
            return None
        return (self.lowest[-1] - self.lowest[0]) / (len(self.lowest) - 1)


def round_size(batch: int, trials: int, n_tasks: int) -> int:
    """Trials in one round: `batch`, fewer when the budget of `trials` cannot give each of `n_tasks` a round of it.

    >>> round_size(16, 2000, 19), round_size(16, 64, 19), round_size(16, 5, 19)
    (16, 3, 1)
    """
    return max(1, min(batch, trials // max(1, n_tasks)))


class TaskScheduler:
    """Chooses the task of each round (see the module docstring). ``strategy``: "gradient" or "round-robin";
    ``alpha`` weighs the backward slope against the forward guess; ``beta`` bounds the throughput a task may hope
    for against its group's best; ``window`` rounds make the backward slope; ``round_trials`` is ``r``; ``seed``
    breaks ties.

    Example::

        >>> s = TaskScheduler([TaskState(1, 1e6, seconds_now=1e-3)] * 1, strategy="round-robin")
        >>> s.record(0, 8, 1e-3); s.next_task()
        0
    """

    def __init__(self, states: list[TaskState], strategy: str = "gradient", alpha: float = 0.2, beta: float = 2.0,
                 window: int = 3, round_trials: int = 16, seed: int = 0):
        if strategy not in STRATEGIES:
            raise UsageError(f"task scheduler {strategy!r}: choose one of {', '.join(STRATEGIES)}")
        if not states:
            raise UsageError("the task scheduler needs at least one task")
        if not 0.0 <= alpha <= 1.0 or beta < 1.0 or window < 1 or round_trials < 1:
            raise UsageError(f"task scheduler: alpha in [0, 1], beta >= 1, window >= 1 and round_trials >= 1, got "
                             f"{alpha}, {beta}, {window}, {round_trials}")
        self.states = states
        self.strategy, self.alpha, self.beta, self.window = strategy, alpha, beta, window
        self.round_trials = round_trials
        self.rng = np.random.default_rng(seed)
        self._last = -1

    def estimated_latency(self) -> float:
        """``sum(weight x cost)`` over the tasks: the model's latency as the measurements so far estimate it.

        Example::

            >>> TaskScheduler([TaskState(2, 1.0, seconds_now=0.5)]).estimated_latency()
            1.0
        """
        return float(sum(s.weight * s.cost for s in self.states))

    def warmup_pending(self) -> list[int]:
        """The tasks that have had no trial yet (each gets one round before any choice), in order.

        Example::

            >>> TaskScheduler([TaskState(1, 1.0, trials=5), TaskState(1, 1.0)]).warmup_pending()
            [1]
        """
        return [i for i, s in enumerate(self.states) if s.trials == 0 and not s.dead]

    def record(self, index: int, trials: int, best_s: float | None, exhausted: bool = False,
               times: list | None = None) -> None:
        """After a round of task ``index``: ``trials`` more trials, its best seconds now (None: still none valid),
        ``times`` the round's measured seconds (None for an invalid config; left out, the best stands for them);
        ``exhausted``: its search space is used up (the task is dead from now on).

        Example::

            >>> s = TaskScheduler([TaskState(1, 1.0)])
            >>> s.record(0, 4, None, exhausted=True); s.next_task() is None
            True
        """
        st = self.states[index]
        st.trials += trials
        st.keep_times(times if times is not None else [best_s])
        if best_s is not None and best_s < st.best_s:
            st.best_s = best_s
        st.history.append((st.trials, st.best_s))
        if exhausted or trials == 0:
            st.dead = True
        self._last = index
        if self.strategy == "gradient":
            self._leave_group_if_unlike(index)

    def restore(self, index: int, records_best: list[float | None]) -> None:
        """Rebuild a task's state from its records in the database (a resumed run): ``records_best`` holds, per
        record in the order measured, its seconds (None for an invalid one); they count as rounds of
        ``round_trials``.

        Example::

            >>> s = TaskScheduler([TaskState(1, 1.0)], round_trials=2)
            >>> s.restore(0, [3.0, None, 2.0, 1.0, 4.0])
            >>> s.states[0].trials, s.states[0].best_s, s.states[0].history
            (5, 1.0, [(2, 3.0), (4, 1.0), (5, 1.0)])
        """
        st = self.states[index]
        st.keep_times(records_best)
        best = math.inf
        for k, t in enumerate(records_best, 1):
            if t is not None and t < best:
                best = t
            if k % self.round_trials == 0 or k == len(records_best):
                st.history.append((k, best))
        st.trials, st.best_s = len(records_best), best

    def gradients(self) -> list[float]:
        """Each task's expected change of the latency estimate per round (seconds, <= 0; 0 for a dead task).

        Example::

            >>> s = TaskScheduler([TaskState(1, 1e6, trials=16, best_s=1e-3), TaskState(1, 1e6, trials=16,
            ...                                                                          best_s=2e-3)])
            >>> [round(g * 1e3, 3) for g in s.gradients()]  # no spread known yet: the whole time is room
            [-0.4, -0.8]
            >>> s.states[1].keep_times([2e-3, 2.1e-3, 2.2e-3])  # task 1's fastest lie 5% apart
            >>> [round(g * 1e3, 3) for g in s.gradients()]
            [-0.4, -0.04]
        """
        out = []
        r = self.round_trials
        for i, s in enumerate(self.states):
            if s.dead:
                out.append(0.0)
                continue
            c = s.cost
            backward = 0.0
            if len(s.history) > self.window:
                (t1, b1), (t0, b0) = s.history[-1], s.history[-1 - self.window]
                if t1 > t0 and math.isfinite(b1) and math.isfinite(b0):
                    backward = (b1 - b0) / (t1 - t0)
            room = s.spread if s.spread is not None else c
            best_flops = self._group_best_flops(i)
            if best_flops:
                room = max(room, c - self.beta * s.flops / best_flops)
            forward = -min(room, c) * r / (s.trials + r)
            out.append(s.weight * (self.alpha * r * backward + (1 - self.alpha) * forward))
        return out

    def _group(self, index: int) -> list[int]:
        g = self.states[index].group
        if g is None:
            return []
        return [j for j, s in enumerate(self.states) if s.group == g]

    def _group_best_flops(self, index: int) -> float | None:
        members = self._group(index)
        if len(members) < 2:
            return None
        rates = [self.states[j].flops / self.states[j].best_s for j in members
                 if math.isfinite(self.states[j].best_s) and self.states[j].best_s > 0]
        return max(rates) if rates else None

    def _leave_group_if_unlike(self, index: int) -> None:
        st = self.states[index]
        members = self._group(index)
        if len(members) < 2 or not math.isfinite(st.best_s):
            return
        best = self._group_best_flops(index)
        others = max(self.states[j].rounds for j in members if j != index)
        if best and st.flops / st.best_s < best / self.beta and st.rounds > 5 + others:
            st.group = None

    def next_task(self) -> int | None:
        """The task of the next round: a warm-up task first, then by the strategy; None when every task is dead.

        Example::

            >>> s = TaskScheduler([TaskState(1, 1.0), TaskState(1, 1.0)])
            >>> s.next_task()
            0
        """
        alive = [i for i, s in enumerate(self.states) if not s.dead]
        if not alive:
            return None
        pending = self.warmup_pending()
        if pending:
            return pending[0]
        if self.strategy == "round-robin":
            later = [i for i in alive if i > self._last]
            return later[0] if later else alive[0]
        g = self.gradients()
        scores = [g[i] for i in alive]
        if max(scores) == min(scores):
            return alive[int(self.rng.integers(len(alive)))]
        return alive[int(np.argmin(scores))]
