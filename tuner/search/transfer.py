"""Transfer between tasks: one cost model trained on the measurements of every task, so that later tasks start warm.

Alone, a task's model-guided search measures random configs until its cost model has seen a few of its own
(``min_train``), and its model knows only that task. In model tuning every task's search asks one
:class:`SharedCostModel` instead (as Ansor shares one XGBoost model between the tasks of a network): it is
trained on the rows of

- every task of this run (each task's measured configs: loop-IR features, throughput divided by that task's best),
- the tasks tuned before, in the tuning database (up to ``per_task`` records of each, the best and a spread of the
  rest, for this CPU), and
- the shipped datasets measured on this CPU (``datasets/*.csv``: thousands of measured matmul and conv2d configs;
  up to ``per_dataset`` rows of each; a dataset of another CPU is left out),

with throughput normalised per task, so that rows of different tasks share one scale (the best of each task
scores 1, a failed config 0). The loop-IR features describe what a schedule does (vector width, parallel work,
register tile, footprints per cache level) in terms that mean the same in every program, which is what lets a
ranking learned on one convolution guide the first trials of the next. The model is retrained once per round (when
a task's rows changed). With it, a task's very first proposals are ranked by the model
(:class:`TransferGenetic`, ``min_train=0``) instead of drawn at random; as a task's own measurements come, a model
of its own rows takes a growing share of its scores (:class:`TaskView`).

The features of earlier records and datasets are computed once and kept in the kernel cache folder
(``transfer/`` in it), keyed by what they were computed from and the compiler's code.

Example::

    prior = prior_rows(db, datasets=default_datasets())
    shared = SharedCostModel("xgb", seed=0, prior=prior)
    strategy = TransferGenetic(task.space, seed=0, cost_model=shared.view(task.key), featurize=featurize)
"""
from __future__ import annotations

import hashlib
import os
import pathlib
from dataclasses import dataclass, field

import numpy as np

from tensorlang.tuner.search.costmodel import CostModel, make_cost_model, normalise_per_task
from tensorlang.tuner.search.strategies import ModelGuidedGenetic


@dataclass
class PriorData:
    """Training rows from elsewhere: features ``X``, normalised throughputs ``y``, a task id per row (``groups``),
    per source, how many rows it gave (``sources``: name -> count), and the datasets left out (``skipped``: name
    -> why).

    Example::

        >>> PriorData.empty().n
        0
    """

    X: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    sources: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)  # dataset name -> why its rows were left out

    @staticmethod
    def empty() -> PriorData:
        """No rows."""
        from tensorlang.tuner.features import FEATURE_NAMES
        return PriorData(np.zeros((0, len(FEATURE_NAMES))), np.zeros(0), np.zeros(0, dtype=object), {})

    @property
    def n(self) -> int:
        """Rows."""
        return int(self.X.shape[0])


class SharedCostModel:
    """Cost models of kind ``kind`` (``make_cost_model``) trained on the prior rows and every task's rows; a task's
    strategy uses :meth:`view` (a :class:`CostModel` whose ``fit`` hands that task's rows in and whose ``predict``
    asks :meth:`model_for` the task). The model a task asks is trained on everything but that task's own rows
    (those train the task's own model, :class:`TaskView`), and again, lazily, when another task's rows changed.

    Why not one model of every row: the rows of a task are normalised by its best so far, so a task still in the
    basin of its first configs labels that basin 1.0, as good as the best of any task; trained on those rows the
    shared model ranked that basin first and kept the search there, below a better structure that the model of
    the other tasks alone ranks above it.

    Example::

        >>> rng = np.random.default_rng(0)
        >>> shared = SharedCostModel("xgb", seed=0)
        >>> a, b = shared.view("a"), shared.view("b")
        >>> X = rng.random((20, 3))
        >>> a.fit(X, X[:, 0] / X[:, 0].max())
        >>> b.trained, bool(b.predict(X[:2]).shape == (2,)), shared.fits, shared.trained("a")
        (True, True, 1, False)
    """

    def __init__(self, kind: str = "xgb", seed: int = 0, prior: PriorData | None = None):
        self.kind = kind
        self.seed = seed
        self.prior = prior if prior is not None else PriorData.empty()
        self.rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.fits = 0
        self._models: dict[str | None, CostModel] = {}  # by the task left out (None: none), until rows change

    def set_rows(self, task_id: str, X: np.ndarray, y: np.ndarray) -> None:
        """Replace the rows of one task (its features and throughputs normalised by its best)."""
        self.rows[task_id] = (np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64))
        self._models = {k: m for k, m in self._models.items() if k == task_id}  # its own model does not use them

    def training_set(self, exclude: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(X, y, groups) of the prior rows and of every task's rows, but the rows of task `exclude` (its rows of
        this run and its prior rows from the database).

        >>> shared = SharedCostModel("none", prior=PriorData(np.ones((3, 2)), np.ones(3), np.array(["a", "b", "b"])))
        >>> shared.set_rows("c", np.ones((2, 2)), np.ones(2))
        >>> len(shared.training_set()[0]), len(shared.training_set(exclude="b")[0])
        (5, 3)
        """
        Xs, ys, gs = [], [], []
        if self.prior.n:
            keep = np.array([g not in self.rows and g != exclude for g in self.prior.groups], dtype=bool)
            Xs, ys, gs = [self.prior.X[keep]], [self.prior.y[keep]], [self.prior.groups[keep]]
        for task_id, (X, y) in self.rows.items():
            if len(X) and task_id != exclude:
                Xs.append(X)
                ys.append(y)
                gs.append(np.array([task_id] * len(X), dtype=object))
        if not Xs:
            return np.zeros((0, 0)), np.zeros(0), np.zeros(0, dtype=object)
        return np.vstack(Xs), np.concatenate(ys), np.concatenate(gs)

    def model_for(self, task_id: str | None = None) -> CostModel:
        """The model trained on every row but task `task_id`'s (None: every row), trained now if rows changed
        since (untrained while there are fewer than ``MIN_ROWS`` such rows).

        >>> rng = np.random.default_rng(0)
        >>> shared = SharedCostModel("forest")
        >>> shared.set_rows("a", rng.random((20, 3)), rng.random(20))
        >>> shared.model_for("b").trained, shared.model_for("a").trained, shared.model_for("b") is shared.model_for("b")
        (True, False, True)
        """
        model = self._models.get(task_id)
        if model is None:
            model = make_cost_model(self.kind, self.seed)
            X, y, groups = self.training_set(exclude=task_id)
            if len(X):
                model.fit(X, y, groups)
                self.fits += 1
            self._models[task_id] = model
        return model

    def trained(self, task_id: str | None = None) -> bool:
        """Whether the model for task `task_id` can rank (after retraining on what changed)."""
        return self.model_for(task_id).trained

    def predict(self, X: np.ndarray, task_id: str | None = None) -> np.ndarray:
        """Scores of feature rows (higher = faster) by the model for task `task_id`."""
        return self.model_for(task_id).predict(X)

    def view(self, task_id: str, own_rows: int = 16) -> TaskView:
        """The :class:`CostModel` one task's strategy uses (``own_rows``: see :class:`TaskView`)."""
        return TaskView(self, task_id, own_rows)


class TaskView(CostModel):
    """One task's window on a :class:`SharedCostModel`: ``fit`` stores the task's rows in it (for the other tasks'
    models) and trains a model of the task's own rows beside it; ``predict`` blends the model of the other tasks'
    rows (:meth:`SharedCostModel.model_for`) with the task's own, ``n / (n + own_rows)`` of the task's own model
    for a task with ``n`` valid rows of its own (none below ``MIN_OWN`` rows): the other tasks rank a task's first
    trials, and the task's own measurements take over as they come. (The shared model alone would keep ranking a
    task's configs as the other tasks' rows do, thousands against the task's own hundred.)

    Example::

        >>> v = SharedCostModel("none").view("t")
        >>> v.fit(np.ones((2, 3)), np.ones(2)); v.predict(np.ones((1, 3))).tolist()
        [0.0]
        >>> v.own_share(), round(SharedCostModel("none").view("u", own_rows=16).own_share(16), 2)
        (0.0, 0.5)
    """

    MIN_OWN = 8

    def __init__(self, shared: SharedCostModel, task_id: str, own_rows: int = 16):
        super().__init__(shared.seed)
        self.shared, self.task_id, self.own_rows = shared, task_id, own_rows
        self.own = make_cost_model(shared.kind, shared.seed)
        self.n_own = 0
        self.name = f"shared {shared.kind}"

    @property
    def trained(self) -> bool:
        """Whether the model of the other tasks can rank, or the task's own."""
        return self.shared.trained(self.task_id) or self.own.trained

    def own_share(self, n: int | None = None) -> float:
        """The weight of the task's own model in the scores with ``n`` (default: its current count) valid rows."""
        n = self.n_own if n is None else n
        return 0.0 if n < self.MIN_OWN else n / (n + self.own_rows)

    def fit(self, X, y, groups=None) -> None:
        """Hand this task's rows to the shared model (the other tasks' models retrain at their next prediction)
        and train the task's own model on them once it has ``MIN_OWN`` valid ones."""
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
        self.shared.set_rows(self.task_id, X, y)
        self.n_own = int(np.sum(y > 0))
        if self.own_share() > 0:
            self.own.fit(X, y)

    def predict(self, X) -> np.ndarray:
        """The blend of the other tasks' model's scores and the task's own model's (both predict throughput divided
        by the task's best)."""
        X = np.asarray(X, dtype=np.float64)
        shared = self.shared.predict(X, self.task_id)
        w = self.own_share()
        if w == 0 or not self.own.trained:
            return shared
        return w * self.own.predict(X) + (1 - w) * shared


class TransferGenetic(ModelGuidedGenetic):
    """``xgb-genetic`` for a shared, pre-trained model: ranks candidates by the model from the first proposal
    (``min_train=0``); before a task has a valid measurement of its own, its proposals are the best-predicted of a
    pool of random configs (plus the usual share of random exploration).

    Example::

        strategy = TransferGenetic(task.space, seed=0, cost_model=shared.view(task.key), featurize=featurize)
    """

    name = "xgb-genetic"

    def __init__(self, space, seed: int = 0, cost_model=None, featurize=None, min_train: int = 0, **kw):
        super().__init__(space, seed, cost_model=cost_model, featurize=featurize, min_train=min_train, **kw)

    def _propose(self, n: int) -> list[dict]:
        if self._dirty:
            self._train()
        if any(o.valid for o in self.history) or not self.cost_model.trained:
            return super()._propose(n)
        n_explore = int(round(n * self.exploration))
        pool = self.random_unseen(self.population * (self.generations + 1))
        scores = self.predict(pool)
        order = np.argsort(-scores, kind="stable")
        picks = [pool[i] for i in order if scores[i] > -1][: n - n_explore]
        chosen = {_key(c) for c in picks}
        return picks + [c for c in pool if _key(c) not in chosen][: n - len(picks)]


def _key(config: dict) -> str:
    from tensorlang.space import config_key
    return config_key(config)


# ---------------------------------------------------------------- prior rows and their feature cache


def default_datasets() -> list[pathlib.Path]:
    """The shipped datasets (``datasets/*.csv`` beside the package; none when tensorlang is installed without
    them).

    >>> all(p.suffix == ".csv" for p in default_datasets())
    True
    """
    folder = pathlib.Path(__file__).resolve().parents[2] / "datasets"  # tuner/search/ -> the checkout's root
    return sorted(folder.glob("*.csv")) if folder.is_dir() else []


def _cache_folder() -> pathlib.Path | None:
    from tensorlang.graph.kernels import cache_dir
    folder = cache_dir()
    return None if folder is None else folder / "transfer"


def _fingerprint() -> str:
    from tensorlang.graph.kernels import code_fingerprint
    from tensorlang.tuner import features
    h = hashlib.sha256(code_fingerprint().encode())
    h.update(pathlib.Path(features.__file__).read_bytes())
    return h.hexdigest()[:16]


def _cached(name: str, compute):
    """(X, y) from the cache file `name` or `compute()` (then stored; a folder that cannot be written is no error)."""
    folder = _cache_folder()
    path = None if folder is None else folder / f"{name}-{_fingerprint()}.npz"
    if path is not None and path.is_file():
        try:
            with np.load(path, allow_pickle=False) as z:
                return z["X"], z["y"]
        except (OSError, ValueError, KeyError):
            pass
    X, y = compute()
    if path is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}.npz")
            np.savez(tmp, X=X, y=y)
            os.replace(tmp, path)
        except OSError:
            pass
    return X, y


def sample_rows(gflops: list, n: int) -> list[int]:
    """Indices of at most `n` rows to learn from: the best quarter of `n` by throughput, then rows spread evenly
    over the rest (in their order), so the sample holds the top and the range. Deterministic.

    >>> sample_rows([1.0, 5.0, None, 3.0, 2.0], 3)
    [1, 0, 3]
    """
    order = sorted(range(len(gflops)), key=lambda i: -(gflops[i] or 0.0))
    if len(order) <= n:
        return order
    top = order[: max(1, n // 4)]
    rest = [i for i in range(len(gflops)) if i not in set(top)]
    k = n - len(top)
    picks = [rest[int(j * len(rest) / k)] for j in range(k)]
    return top + picks


def _features_of(schedules: list) -> tuple[list[int], list[np.ndarray]]:
    from tensorlang.tuner import features
    keep, rows = [], []
    for i, s in enumerate(schedules):
        try:
            rows.append(features.of_schedule(s()))
            keep.append(i)
        except Exception:  # a record another version of the compiler wrote may not lower now: leave it out
            continue
    return keep, rows


def dataset_rows(path, per_dataset: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """(features, throughput / the dataset's best) of up to `per_dataset` rows of a dataset file (see
    :func:`sample_rows`), computed from each config's schedule in the dataset's search space.

    Example::

        X, y = dataset_rows("datasets/matmul_512.csv", per_dataset=64)
    """
    from tensorlang.tuner.records.dataset import Dataset
    from tensorlang.tuner.task import Task
    data = pathlib.Path(path).read_bytes()
    name = f"dataset-{hashlib.sha256(data).hexdigest()[:16]}-{per_dataset}"

    def compute():
        ds = Dataset.load(os.fspath(path))
        task = Task.create(ds.workload, sizes=ds.sizes, threads=int(ds.header.get("threads") or 1),
                           space=ds.header.get("space", "hand"))
        rows = ds.rows()
        picks = sample_rows([g for _, g, _ in rows], per_dataset)
        makers = [lambda c=rows[i][0]: task.space.schedule(task.op, task.sizes, c) for i in picks]
        keep, feats = _features_of(makers)
        g = [rows[picks[i]][1] or 0.0 for i in keep]
        if not feats:
            return PriorData.empty().X, np.zeros(0)
        return np.array(feats), normalise_per_task(g)
    return _cached(name, compute)


def record_rows(db, task_key: str, per_task: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """(features, throughput / the task's best) of up to `per_task` of a task's records in the database `db`.

    Example::

        X, y = record_rows(Database(), task.key)
    """
    import tensorlang as tl
    records = [r for r in db.records(task_key) if r.schedule]
    if not records:
        return PriorData.empty().X, np.zeros(0)
    name = f"records-{task_key}-{records[-1].id}-{len(records)}-{per_task}"

    def compute():
        picks = sample_rows([r.gflops for r in records], per_task)
        op = tl.Schedule.from_json(records[picks[0]].schedule).op
        makers = [lambda r=records[i]: tl.Schedule.from_json(r.schedule, op) for i in picks]
        keep, feats = _features_of(makers)
        if not feats:
            return PriorData.empty().X, np.zeros(0)
        return np.array(feats), normalise_per_task([records[picks[i]].gflops or 0.0 for i in keep])
    return _cached(name, compute)


def prior_rows(db, datasets=(), per_task: int = 32, per_dataset: int = 256, target: dict | None = None,
               progress=None, exclude=()) -> PriorData:
    """The prior rows of transfer: up to `per_task` records of every task in the database `db` and up to
    `per_dataset` rows of each dataset file in `datasets`, measured on this CPU (`target`: its description,
    default this machine's): rows of another CPU rank configs by another machine's caches and vector units, so a
    dataset measured elsewhere is left out (``skipped`` says so). ``exclude`` holds ``(workload, sizes)`` pairs
    whose rows are left out as well (a benchmark of transfer leaves out the tasks it tunes: their own rows would
    be reuse, not transfer). ``progress(text)`` hears what is being read.

    Example::

        prior = prior_rows(Database(), datasets=default_datasets())
        print(prior.sources, prior.skipped)  # {'database': 640, 'matmul_512.csv': 256}, {}
    """
    from tensorlang.tuner.records.dataset import Dataset
    from tensorlang.tuner.task import _target
    target = target or _target()
    left_out = {_identity(w, sizes) for w, sizes in exclude}
    Xs, ys, gs, sources, skipped = [], [], [], {}, {}
    tasks = [t for t in db.tasks() if t["valid"] and t["target"].get("cpu") == target.get("cpu")
             and _identity(t["workload"], t["sizes"]) not in left_out]
    if tasks and progress:
        progress(f"features of earlier records: {len(tasks)} tasks")
    n_db = 0
    for t in tasks:
        X, y = record_rows(db, t["task_key"], per_task)
        if len(X):
            Xs.append(X)
            ys.append(y)
            gs.append(np.array([t["task_key"]] * len(X), dtype=object))
            n_db += len(X)
    if tasks:
        sources["database"] = n_db
    for path in datasets:
        name = pathlib.Path(path).name
        header = Dataset.load(os.fspath(path)).header
        cpu = (header.get("target") or {}).get("cpu")
        if cpu != target.get("cpu"):
            skipped[name] = f"measured on {cpu}, not {target.get('cpu')}"
            continue
        if _identity(header.get("workload"), header.get("sizes") or {}) in left_out:
            skipped[name] = "a task left out"
            continue
        if progress:
            progress(f"features of dataset {name}")
        X, y = dataset_rows(path, per_dataset)
        if len(X):
            Xs.append(X)
            ys.append(y)
            gs.append(np.array([f"dataset:{name}"] * len(X), dtype=object))
        sources[name] = len(X)
    if not Xs:
        return PriorData(PriorData.empty().X, np.zeros(0), np.zeros(0, dtype=object), sources, skipped)
    return PriorData(np.vstack(Xs), np.concatenate(ys), np.concatenate(gs), sources, skipped)


def _identity(workload, sizes: dict) -> tuple:
    return workload, tuple(sorted((sizes or {}).items()))


def describe_prior(prior: PriorData) -> str:
    """One line: where the prior rows came from, and which datasets were left out.

    >>> describe_prior(PriorData(np.zeros((3, 2)), np.zeros(3), np.zeros(3), {"database": 1, "m.csv": 2}))
    '3 rows (database 1, m.csv 2)'
    >>> describe_prior(PriorData(np.zeros((0, 2)), np.zeros(0), np.zeros(0), {}, {"c.csv": "measured on znver4"}))
    '0 rows; left out: c.csv (measured on znver4)'
    """
    parts = ", ".join(f"{k} {v}" for k, v in prior.sources.items())
    text = f"{prior.n} rows ({parts})" if parts else f"{prior.n} rows"
    if prior.skipped:
        text += "; left out: " + ", ".join(f"{k} ({why})" for k, why in prior.skipped.items())
    return text

