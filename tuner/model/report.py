"""What ``tune_model`` reports: one :class:`TaskReport` per task and the :class:`ModelTuneSummary` of the run
(``to_json()`` is what ``tensorlang tune-model --json`` prints), and the table of the tasks' best times.

Example::

    >>> print(task_table([TaskReport(0, "f_0123456789", "f", "k", 2, 1e6, 0, 16, None, 1e-3, 2e-3, "auto")]))
      #  task          calls  trials  best ms  GFLOPS  share
      0  f_0123456789  2      16      1.0000   1.0     100.0%
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class TaskReport:
    """One task in the summary: index, name, kind, key, weight, FLOPs of one call, trials before this run and now,
    best seconds before this run and now (None: no valid record), seconds of one call in the profile run at the
    start, the schedule source its kernels had then, and what stopped it (``note``: a runner that could not
    start, a search space used up).

    Example::

        >>> TaskReport(0, "f_0123456789", "f", "k", 2, 1e6, 0, 16, None, 1e-3, 2e-3, "auto").gflops
        1.0
    """

    index: int
    name: str
    kind: str
    key: str
    weight: int
    flops: float
    trials_before: int
    trials: int
    best_s_before: float | None
    best_s: float | None
    seconds_now: float | None
    schedule_source: str
    note: str = ""

    @property
    def gflops(self) -> float | None:
        """GFLOPS of the best record."""
        return self.flops / self.best_s / 1e9 if self.best_s else None


@dataclass
class ModelTuneSummary:
    """What ``tune_model`` did (``to_json()`` is what ``tensorlang tune-model --json`` prints).

    ``curve``: the estimated end-to-end latency after every round, ``[(trials of the model's tasks, seconds)]``,
    starting with the estimate before this run's first round; ``rounds``: one dict per round (task, trials, best);
    ``latency``: the end-to-end timings at the end, name -> ``{"median_s", "times", "error"}`` ("tuned", "zero-trial"
    and, for a model from torch, "torch eager" and :data:`TORCH_COMPILE`); ``variants``: the pass variants measured
    (``{"options", "median_s", "error", "max_rel_error"}``), ``variant`` the options used and ``variant_how`` how they
    were chosen. ``reference`` is what the outputs were compared with ("torch eager", or why they were not),
    ``max_rel_error`` each compiled contender's largest difference from it (relative to max(1, max |reference|),
    :func:`tensorlang.tuner.model.variants.compare_outputs`) and ``mismatch`` what differs when the tuned model's
    outputs are not within the tolerance ("" when they are).
    """

    model: str
    graph_key: str | None
    threads: int
    db: str
    trials: int
    scheduler: str
    strategy: str
    cost_model: str
    seed: int
    transfer: str | None = None
    trials_before: int = 0
    trials_done: int = 0
    tasks: list = field(default_factory=list)
    variant: dict = field(default_factory=dict)
    variant_how: str = ""
    variants: list = field(default_factory=list)
    curve: list = field(default_factory=list)
    warmup_trials: int | None = None  # the trial count when every task had had its first round
    rounds: list = field(default_factory=list)
    latency: dict = field(default_factory=dict)
    reference: str = ""
    max_rel_error: dict = field(default_factory=dict)
    mismatch: str = ""
    schedule_sources: dict = field(default_factory=dict)  # the tuned model's kernels by schedule source
    errors: Counter = field(default_factory=Counter)
    interrupted: bool = False
    exhausted: bool = False
    wall_s: float = 0.0
    phase_s: dict = field(default_factory=dict)

    @property
    def estimated_s(self) -> float | None:
        """The estimated end-to-end latency now (the curve's last point)."""
        return self.curve[-1][1] if self.curve else None

    def speedups(self) -> dict:
        """Each other contender's median over the tuned model's (how many times faster the tuned model is).

        >>> s = ModelTuneSummary("m", None, 2, "db", 8, "gradient", "xgb-genetic", "xgb", 0)
        >>> s.latency = {"tuned": {"median_s": 0.01}, "torch eager": {"median_s": 0.02}}
        >>> s.speedups()
        {'torch eager': 2.0}
        """
        tuned = (self.latency.get("tuned") or {}).get("median_s")
        if not tuned:
            return {}
        return {k: v["median_s"] / tuned for k, v in self.latency.items() if k != "tuned" and v.get("median_s")}

    def to_json(self) -> dict:
        """The summary as one JSON-able dict.

        >>> s = ModelTuneSummary("m", None, 2, "db", 8, "gradient", "xgb-genetic", "xgb", 0)
        >>> sorted(s.to_json())[:4]
        ['cost_model', 'curve', 'db', 'errors_this_run']
        """
        return {
            "model": self.model, "graph_key": self.graph_key, "threads": self.threads, "db": self.db,
            "trials": self.trials_before + self.trials_done, "trials_target": self.trials,
            "trials_this_run": self.trials_done, "scheduler": self.scheduler, "strategy": self.strategy,
            "cost_model": self.cost_model, "seed": self.seed, "transfer": self.transfer,
            "variant": self.variant, "variant_how": self.variant_how,
            "variants": [{k: v for k, v in e.items() if k != "model"} for e in self.variants],
            "tasks": [dict(t.__dict__, gflops=t.gflops) for t in self.tasks],
            "estimated_s": {"start": self.curve[0][1] if self.curve else None, "end": self.estimated_s},
            "curve": [list(p) for p in self.curve], "warmup_trials": self.warmup_trials, "rounds": self.rounds,
            "latency": {k: {"median_s": v.get("median_s"), "error": v.get("error")} for k, v in self.latency.items()},
            "speedup": self.speedups(), "reference": self.reference, "max_rel_error": self.max_rel_error,
            "mismatch": self.mismatch,
            "schedule_sources": self.schedule_sources,
            "errors_this_run": dict(self.errors), "interrupted": self.interrupted, "exhausted": self.exhausted,
            "wall_s": self.wall_s, "phase_s": self.phase_s,
        }


def task_table(tasks: list[TaskReport], estimate: float | None = None) -> str:
    """Each task's trials, best time, GFLOPS and share of the estimated latency, one row each.

    >>> print(task_table([TaskReport(0, "f_0123456789", "f", "k", 2, 1e6, 0, 16, None, 1e-3, 2e-3, "auto")]))
      #  task          calls  trials  best ms  GFLOPS  share
      0  f_0123456789  2      16      1.0000   1.0     100.0%
    """
    total = estimate or sum(t.weight * (t.best_s or t.seconds_now or 0.0) for t in tasks) or 1.0
    rows = [("#", "task", "calls", "trials", "best ms", "GFLOPS", "share")]
    for t in tasks:
        cost = t.best_s or t.seconds_now or 0.0
        rows.append((str(t.index), t.name, str(t.weight), str(t.trials),
                     "-" if t.best_s is None else f"{t.best_s * 1e3:.4f}",
                     "-" if t.gflops is None else f"{t.gflops:.1f}", f"{100 * t.weight * cost / total:.1f}%"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)
