"""One task's search across the rounds the task scheduler gives it: its strategy (warm-started from the task's
records), the start configs, its trial count and best record; each round commits every record at once.

Example::

    search = TaskSession(model_task, db, strategy="xgb-genetic", cost_model="xgb", seed=0)
    added = search.run_round(16, runner)
"""
from __future__ import annotations

import time
from collections import Counter

from tensorlang.errors import UsageError
from tensorlang.space import config_key
from tensorlang.tuner import features as feature_extraction
from tensorlang.tuner.records.database import Database
from tensorlang.tuner.task import Task
from tensorlang.tuner.tuning import hand_start_configs, observation_of, record_of, start_name

from .tasks import ModelTask


class _Features:
    """A task's ``featurize(config)``, with ``many(configs)`` on the current runner's idle builder processes."""

    def __init__(self, task: Task):
        self.task = task
        self.runner = None
        self._builders_ok = task.space.same_as(Task(**task.to_dict()).space)

    def __call__(self, config: dict):
        return feature_extraction.of_config(self.task.space, self.task.op, self.task.sizes, config)

    def many(self, configs: list[dict]) -> list:
        if self.runner is not None and self._builders_ok and len(configs) > 1 and hasattr(self.runner, "features"):
            return self.runner.features(configs, self)
        return [self(c) for c in configs]


class TaskSession:
    """The search of one task across the rounds it gets: its strategy (warm-started from the task's records in the
    database), the start configs not yet measured (the zero-trial pick), its trial count and best record. Each
    :meth:`run_round` measures through the runner it is given and commits each record at once.

    Example::

        search = TaskSession(model_task, db, strategy="xgb-genetic", cost_model="xgb", seed=0)
        added = search.run_round(16, runner)
    """

    def __init__(self, mtask: ModelTask, db: Database, strategy: str = "xgb-genetic", cost_model: str = "xgb",
                 seed: int = 0, shared=None):
        from tensorlang.tuner.search.costmodel import make_cost_model
        from tensorlang.tuner.search.strategies import make_strategy
        from tensorlang.tuner.search.transfer import TransferGenetic
        self.mtask, self.task, self.db, self.seed = mtask, mtask.task, db, seed
        self.strategy_name = strategy
        self.featurize = _Features(self.task)
        model = shared.view(self.task.key) if shared is not None else make_cost_model(cost_model, seed)
        if shared is not None and strategy == "xgb-genetic":
            self.strategy = TransferGenetic(self.task.space, seed, cost_model=model, featurize=self.featurize)
        else:
            self.strategy = make_strategy(strategy, self.task.space, seed=seed, cost_model=model,
                                          featurize=self.featurize)
        earlier = db.records(self.task.key)
        self.strategy.observe([observation_of(r) for r in earlier if self._fits(r.config)])
        self.trials = len(earlier)
        self.earlier_best = [r.median_s if r.ok else None for r in earlier]
        measured = {r.config_key() for r in earlier}
        self.start_configs = hand_start_configs(self.task)
        self.start = [c for c in self.start_configs if config_key(c) not in measured]
        self.start_name = start_name(self.task)
        self.refresh_best()
        self.errors: Counter = Counter()
        self.exhausted = False
        self.propose_s = 0.0  # seconds in the strategy (proposing, learning), for the summary
        self.round_times: list[float | None] = []  # the last round's measured seconds (None: invalid), in order

    def _fits(self, config: dict) -> bool:
        try:
            self.task.space.validate(dict(config))
        except UsageError:
            return False
        return True

    def refresh_best(self) -> None:
        """Read the task's best record from the database (the one ``tl.build`` would compile) and its time: the
        median of its last re-timing where one is in force, else its own measurement."""
        self.best = self.db.best(self.task.key)
        self.best_s: float | None = None
        if self.best is not None:
            self.best_s = self.db.retimed(self.task.key).get(self.best.config_key(), self.best.median_s)

    def run_round(self, n: int, runner) -> int:
        """Measure up to `n` configs (the start configs first, then the strategy's proposals) through `runner`,
        committing each record as it comes; returns how many were measured (0: the space is used up)."""
        self.featurize.runner = runner
        self.round_times = []
        done = 0
        try:
            if self.best_s is not None and hasattr(runner, "best_s"):
                runner.best_s = self.best_s
            if self.start:
                configs, self.start = self.start[:n], self.start[n:]
                done += self._measure(runner, configs, self.start_name)
            if n - done > 0:
                t0 = time.perf_counter()
                configs = self.strategy.propose(n - done)
                self.propose_s += time.perf_counter() - t0
                if not configs:
                    self.exhausted = done == 0
                else:
                    done += self._measure(runner, configs, self.strategy_name)
        finally:
            self.featurize.runner = None
        return done

    def _measure(self, runner, configs: list[dict], name: str) -> int:
        batch = []
        runner.measure(configs, on_result=lambda r: batch.append(self._commit(r, name)))
        t0 = time.perf_counter()
        self.strategy.observe(batch)
        self.propose_s += time.perf_counter() - t0
        return len(batch)

    def _commit(self, result, name: str):
        rec = record_of(self.task, result, name, self.seed, self.trials)
        self.db.add(rec)
        self.trials += 1
        self.round_times.append(rec.median_s if rec.ok else None)
        if rec.ok:
            if self.best_s is None or rec.median_s < self.best_s:
                self.best, self.best_s = rec, rec.median_s
        else:
            self.errors[rec.error_kind] += 1
        return observation_of(rec)

    def retime_candidates(self, top: int) -> list[dict]:
        """The `top` fastest distinct configs of the task's valid records (those its space holds), and the start
        configs that were measured."""
        out: dict[str, dict] = {}
        valid = sorted((r for r in self.db.records(self.task.key, valid_only=True) if self._fits(r.config)),
                       key=lambda r: (r.median_s, r.id))
        for rec in valid:
            if len(out) >= top:
                break
            out.setdefault(rec.config_key(), rec.config)
        measured = {r.config_key() for r in valid}
        for c in self.start_configs[:1]:  # the pick (or hand config); the other start configs by speed
            if config_key(c) in measured:
                out.setdefault(config_key(c), c)
        return list(out.values())
