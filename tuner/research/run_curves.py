"""The estimated end-to-end latency curve of a model-tuning run, rebuilt from its records, with the times of the
run or with times measured again side by side.

A run's own curve sums each task's best time as measured during the run. Two runs made one after the other (the
task scheduler against round-robin) are then compared across minutes, and a machine whose speed drifts by a few
percent between them (a shared machine's does) decides the comparison instead of the schedulers. Here each step of a
curve is the moment a task's best config changed (as the run saw it); :func:`retime_steps` times every config
that was ever a task's best, in either run, again in interleaved rounds task by task, and :func:`latency_curve`
values both curves with those times: each point is then what the model would run at with the configs that run
would deploy at that point, timed in one window.

Example::

    steps, trials = best_steps("rr-0.db")
    curve = latency_curve(steps, weights, start_s)                      # the run's own times
    curve = latency_curve(steps, weights, start_s, retimed)             # the times measured again
    ceiling = hindsight_trials(task_curves("rr-0.db"), weights, curve[-1][1])  # the fewest trials any
                                                                         # allocation of its rounds needed

:func:`hindsight_trials` is the ceiling of any task scheduler on a run's own per-task curves: the fewest trials in
which some allocation of rounds over the tasks (each task's best after ``n`` of its own trials read off the run)
reaches a target latency.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tensorlang.errors import UsageError


@dataclass(frozen=True)
class BestStep:
    """A record that lowered its task's best time in a run: the run's trial count with it, the task key, the
    config (and its key) and the time the run measured.

    Example::

        >>> BestStep(16, "t", '{"a": 1}', {"a": 1}, 2e-3).seconds
        0.002
    """

    trials: int
    task_key: str
    config_key: str
    config: dict
    seconds: float


def _records(db_or_path) -> list:
    """Every record of a run's database (a path, opened read-only and closed again, or an open Database), in the
    order measured."""
    from tensorlang.tuner.records.database import Database
    if isinstance(db_or_path, Database):
        return db_or_path.records()
    with Database(db_or_path, read_only=True) as db:
        return db.records()


def best_steps(db_or_path) -> tuple[list[BestStep], int]:
    """The records of a run's database (a path or a :class:`tensorlang.tuner.records.database.Database`) that lowered
    their task's best time, in the order measured, and the number of records (the run's trials, for a run from an empty
    database).

    >>> from tensorlang.tuner.records.database import Database, Record
    >>> db = Database(":memory:")
    >>> for task, vec, t in (("a", 4, 3.0), ("b", 4, 1.0), ("a", 8, 2.0), ("a", 16, 2.5)):
    ...     _ = db.add(Record(task, "w", {}, {}, {"vec": vec}, None, (t,)))
    >>> steps, n = best_steps(db)
    >>> [(s.trials, s.task_key, s.config["vec"], s.seconds) for s in steps], n
    ([(1, 'a', 4, 3.0), (2, 'b', 4, 1.0), (3, 'a', 8, 2.0)], 4)
    """
    records = _records(db_or_path)
    best: dict[str, float] = {}
    steps = []
    for n, r in enumerate(records, 1):
        if r.ok and r.median_s < best.get(r.task_key, math.inf):
            best[r.task_key] = r.median_s
            steps.append(BestStep(n, r.task_key, r.config_key(), dict(r.config), r.median_s))
    return steps, len(records)


def deployed_steps(db_or_path) -> dict[str, list]:
    """Per task of a run's database, after each of its own trials, its best record so far (the config the run
    would deploy): a :class:`BestStep` whose ``trials`` counts the task's own records from 1, or None before its
    first valid record.

    >>> from tensorlang.tuner.records.database import Database, Record
    >>> db = Database(":memory:")
    >>> for task, vec, t in (("a", 4, None), ("b", 4, 1.0), ("a", 8, 2.0), ("a", 16, 2.5)):
    ...     bad = {"error_kind": "wrong", "error": "wrong output"} if t is None else {}
    ...     _ = db.add(Record(task, "w", {}, {}, {"vec": vec}, None, (t,) if t else (), **bad))
    >>> {k: [s and (s.trials, s.config["vec"]) for s in v] for k, v in deployed_steps(db).items()}
    {'a': [None, (2, 8), (2, 8)], 'b': [(1, 4)]}
    """
    out: dict[str, list] = {}
    for r in _records(db_or_path):
        curve = out.setdefault(r.task_key, [])
        best = curve[-1] if curve else None
        if r.ok and (best is None or r.median_s < best.seconds):
            best = BestStep(len(curve) + 1, r.task_key, r.config_key(), dict(r.config), r.median_s)
        curve.append(best)
    return out


def task_curves(db_or_path) -> dict[str, list[float]]:
    """Each task's best-so-far curve in a run's database: ``{task key: [best seconds after each of its own
    trials]}`` (``math.inf`` until its first valid record).

    >>> from tensorlang.tuner.records.database import Database, Record
    >>> db = Database(":memory:")
    >>> for task, vec, t in (("a", 4, 3.0), ("b", 4, 1.0), ("a", 8, 2.0), ("a", 16, 2.5)):
    ...     _ = db.add(Record(task, "w", {}, {}, {"vec": vec}, None, (t,)))
    >>> task_curves(db)
    {'a': [3.0, 2.0, 2.0], 'b': [1.0]}
    """
    return {k: [math.inf if s is None else s.seconds for s in steps] for k, steps in deployed_steps(db_or_path).items()}


def hindsight_trials(curves: dict, weights: dict, target: float, round_trials: int = 16) -> int | None:
    """The fewest trials in which an allocation of rounds of ``round_trials`` over the tasks reaches ``target``
    seconds of ``sum(weight x best)``, each task's best after ``n`` trials read off ``curves``
    (:func:`task_curves`; every task gets at least one round, none more than its curve holds). A scheduler that
    knew every curve in advance needs this many; None: no allocation gets there.

    >>> curves = {"a": [4.0] * 16 + [2.0] * 16, "b": [1.0] * 16 + [0.9] * 16}
    >>> hindsight_trials(curves, {"a": 1, "b": 1}, 3.0)  # a's second round gives 2.0, b's only 0.1
    48
    >>> hindsight_trials(curves, {"a": 1, "b": 1}, 2.5) is None
    True
    """
    best = {0: 0.0}  # trials spent -> the lowest latency so far over the tasks done
    for key, curve in curves.items():
        if not curve:
            continue
        points = sorted({min(n, len(curve)) for n in range(round_trials, len(curve) + round_trials, round_trials)})
        options = [(n, weights[key] * curve[n - 1]) for n in points]
        nxt: dict[int, float] = {}
        for spent, lat in best.items():
            for n, part in options:
                if lat + part < nxt.get(spent + n, math.inf):
                    nxt[spent + n] = lat + part
        best = nxt
    reached = [spent for spent, lat in best.items() if lat <= target * (1 + 1e-12)]
    return min(reached) if reached else None


def latency_curve(steps: list[BestStep], weights: dict, start_s: dict, retimed: dict | None = None) -> list:
    """``[(trials, seconds)]``: the sum over tasks of weight x time of the task's current best, from the start
    (each task at ``start_s``, its time before tuning) and after each step. With ``retimed``
    (``{(task key, config key): seconds}``) a step's config is valued at its time measured again (a config
    missing there keeps the task at its previous time: it could not be timed again); else at the run's time.

    >>> steps = [BestStep(1, "a", "x", {}, 3.0), BestStep(2, "b", "y", {}, 1.0), BestStep(5, "a", "z", {}, 2.0)]
    >>> latency_curve(steps, {"a": 2, "b": 1}, {"a": 4.0, "b": 2.0})
    [(0, 10.0), (1, 8.0), (2, 7.0), (5, 5.0)]
    >>> latency_curve(steps, {"a": 2, "b": 1}, {"a": 4.0, "b": 2.0}, {("a", "x"): 3.5, ("a", "z"): 2.5})
    [(0, 10.0), (1, 9.0), (2, 9.0), (5, 7.0)]
    """
    unknown = sorted({s.task_key for s in steps} - set(weights))
    if unknown:
        raise UsageError(f"latency_curve: records of tasks the model does not have: {', '.join(unknown)}")
    cost = {k: float(start_s[k]) for k in weights}
    curve = [(0, sum(weights[k] * cost[k] for k in weights))]
    for s in steps:
        if retimed is None:
            cost[s.task_key] = s.seconds
        elif (s.task_key, s.config_key) in retimed:
            cost[s.task_key] = retimed[(s.task_key, s.config_key)]
        curve.append((s.trials, sum(weights[k] * cost[k] for k in weights)))
    return curve


def retime_steps(tasks: list, step_lists: list, rounds: int = 3, jobs: int | None = None) -> dict:
    """Time again every config in ``step_lists`` (lists of :class:`BestStep`, one per run), task by task: each task's
    configs of every run together, in ``rounds`` interleaved rounds
    (:meth:`tensorlang.tuner.measure.local.LocalRunner.retime`), so that runs made at different times are compared in
    one window. ``tasks``: the model's
    :class:`tensorlang.tuner.model.tasks.ModelTask` list. Returns ``{(task key, config key): median seconds}``.

    Example::

        retimed = retime_steps(model_tasks(model, 2), [best_steps("rr-0.db")[0], best_steps("gradient-0.db")[0]])
    """
    from tensorlang.space import config_key
    from tensorlang.tuner.measure.local import LocalRunner
    by_task: dict[str, dict] = {}
    for steps in step_lists:
        for s in steps:
            by_task.setdefault(s.task_key, {})[s.config_key] = s.config
    out = {}
    for t in tasks:
        configs = by_task.get(t.task.key)
        if not configs:
            continue
        with LocalRunner(t.task, jobs) as runner:
            for r in runner.retime(list(configs.values()), rounds):
                if r.ok and r.times:
                    out[(t.task.key, config_key(r.config))] = float(np.median(r.times))
    return out
