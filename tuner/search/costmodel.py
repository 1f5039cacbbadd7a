"""Cost models: learn from measured configs which unmeasured ones are worth measuring.

A cost model maps feature vectors (``tensorlang.tuner.features``) to a score, higher = faster. It is trained on
``y``, the measured throughput normalised per task (the best config of each task scores 1, an invalid or
failed one 0, see :func:`normalise_per_task`), so that rows from different workloads can share one model.
Only the order of the predictions matters to the tuner; :func:`ranking_quality` measures it.

Models are looked up by name (``make_cost_model("xgb", seed=0)``) in ``COST_MODELS``; a new one is added
with :func:`register_cost_model`. Every model is deterministic given its seed and single-threaded (the
machine's cores belong to the measurements).

========  =======================================================================================
name      model
========  =======================================================================================
xgb       gradient-boosted trees (xgboost, squared error), the default
forest    a random forest (scikit-learn), a second learner to compare with
none      never learns; predicts zeros (the search then runs without a model)
========  =======================================================================================

Example::

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.random((64, 3))
    >>> y = normalise_per_task(1.0 + 3 * X[:, 0] + X[:, 1], np.zeros(64, dtype=int))
    >>> m = make_cost_model("xgb", seed=0)
    >>> m.fit(X, y)
    >>> q = ranking_quality(y, m.predict(X))
    >>> m.trained, q["spearman"] > 0.9, q["top5"]
    (True, True, 1.0)
"""
from __future__ import annotations

import re

import numpy as np

from tensorlang.errors import UsageError

__all__ = ["COST_MODELS", "CostModel", "ForestCostModel", "NoCostModel", "XGBCostModel", "make_cost_model",
           "normalise_per_task", "ranking_quality", "register_cost_model"]

MIN_ROWS = 8          # fewer training rows than this leave a model untrained


class CostModel:
    """The interface of a cost model: ``fit`` on normalised throughputs, ``predict`` scores (higher = faster).

    Subclasses implement ``_fit(X, y, groups)`` (train from scratch, replacing any earlier model) and
    ``_predict(X)``; the base class checks the arrays, leaves the model untrained when the data cannot teach
    anything (fewer than ``MIN_ROWS`` rows, or every ``y`` equal) and predicts zeros until trained.
    ``groups`` (a task id per row) is optional; models that do not use it ignore it.

    Example::

        >>> class Mean(CostModel):
        ...     name = "mean"
        ...     def _fit(self, X, y, groups):
        ...         self._w = X.mean(axis=0)
        ...     def _predict(self, X):
        ...         return X @ self._w
        >>> m = Mean()
        >>> m.predict(np.ones((2, 3))).tolist(), m.trained
        ([0.0, 0.0], False)
        >>> m.fit(np.eye(8, 3), np.arange(8.0))
        >>> m.trained, m.predict(np.ones((1, 3))).round(3).tolist()
        (True, [0.375])
    """

    name: str = "base"

    def __init__(self, seed: int = 0):
        self.seed = int(seed)
        self._trained = False
        self._n_features: int | None = None

    @property
    def trained(self) -> bool:
        """True once a fit has produced a model (predictions are then no longer all zero)."""
        return self._trained

    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> None:
        """Train on feature rows ``X`` (n x d) and normalised throughputs ``y`` (n), replacing the old model.

        With fewer than ``MIN_ROWS`` rows, or a constant ``y``, the model is left untrained.
        """
        X, y = _check_rows(X), np.asarray(y, dtype=np.float64)
        if y.shape != (X.shape[0],):
            raise UsageError(f"{self.name}: y must have one value per row of X ({X.shape[0]}), got shape {y.shape}")
        if not np.all(np.isfinite(y)):
            raise UsageError(f"{self.name}: y has non-finite values; mark invalid configs with 0")
        if groups is not None and np.shape(groups) != (X.shape[0],):
            raise UsageError(f"{self.name}: groups must have one task id per row of X ({X.shape[0]}), "
                             f"got shape {np.shape(groups)}")
        self._trained = False
        self._n_features = X.shape[1]
        if X.shape[0] < MIN_ROWS or np.ptp(y) == 0.0:
            return
        self._fit(X, y, None if groups is None else np.asarray(groups))
        self._trained = True

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Scores of the rows of ``X``, higher = faster (float64, one per row; zeros before any fit)."""
        X = _check_rows(X)
        if not self._trained:
            return np.zeros(X.shape[0], dtype=np.float64)
        if X.shape[1] != self._n_features:
            raise UsageError(f"{self.name}: the model was trained on {self._n_features} features, X has "
                             f"{X.shape[1]}")
        if X.shape[0] == 0:
            return np.zeros(0, dtype=np.float64)
        return np.asarray(self._predict(X), dtype=np.float64).reshape(X.shape[0])

    def _fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None) -> None:
        raise NotImplementedError

    def _predict(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed}, trained={self.trained})"


def _check_rows(X) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise UsageError(f"X must be a 2-D array of feature rows, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise UsageError("X has non-finite values")
    return X


class XGBCostModel(CostModel):
    """Gradient-boosted regression trees: ``xgb.train(params, DMatrix, num_boost_round)``, one thread.

    ``params`` and ``num_boost_round`` are attributes a caller may change before ``fit``. Deterministic for a
    given seed (row subsampling draws from it).

    Example::

        >>> X = np.arange(40.0).reshape(20, 2)
        >>> m = XGBCostModel(seed=1)
        >>> m.fit(X, X[:, 0] / 38.0)
        >>> p = m.predict(X)
        >>> bool(p[-1] > p[0]), bool(np.array_equal(p, m.predict(X)))
        (True, True)
    """

    name = "xgb"

    def __init__(self, seed: int = 0):
        super().__init__(seed)
        self.params = {"objective": "reg:squarederror", "max_depth": 6, "eta": 0.2, "subsample": 0.8,
                       "colsample_bytree": 1.0, "min_child_weight": 1.0, "lambda": 1.0, "tree_method": "hist",
                       "nthread": 1, "seed": self.seed, "verbosity": 0}
        self.num_boost_round = 100
        self._booster = None

    def _fit(self, X, y, groups) -> None:
        import xgboost as xgb
        self._booster = xgb.train(dict(self.params), xgb.DMatrix(X, label=y, nthread=1),
                                  num_boost_round=self.num_boost_round)

    def _predict(self, X) -> np.ndarray:
        import xgboost as xgb
        return self._booster.predict(xgb.DMatrix(X, nthread=1))


class ForestCostModel(CostModel):
    """A random forest (``sklearn.ensemble.RandomForestRegressor``, ``random_state=seed``, ``n_jobs=1``;
    ``n_estimators`` trees, an attribute a caller may change before ``fit``).

    Example::

        >>> X = np.arange(40.0).reshape(20, 2)
        >>> m = ForestCostModel(seed=0)
        >>> m.fit(X, X[:, 0] / 38.0)
        >>> p = m.predict(X)
        >>> bool(p[-1] > p[0])
        True
    """

    name = "forest"

    def __init__(self, seed: int = 0):
        super().__init__(seed)
        self.n_estimators = 64
        self._forest = None

    def _fit(self, X, y, groups) -> None:
        from sklearn.ensemble import RandomForestRegressor
        self._forest = RandomForestRegressor(n_estimators=self.n_estimators, random_state=self.seed, n_jobs=1)
        self._forest.fit(X, y)

    def _predict(self, X) -> np.ndarray:
        return self._forest.predict(X)


class NoCostModel(CostModel):
    """The absence of a model: ``fit`` learns nothing and ``predict`` returns zeros.

    Example::

        >>> m = NoCostModel()
        >>> m.fit(np.eye(10), np.arange(10.0))
        >>> m.trained, m.predict(np.eye(2)).tolist()
        (False, [0.0, 0.0])
    """

    name = "none"

    def fit(self, X, y, groups=None) -> None:
        """Check nothing, learn nothing."""

    def predict(self, X) -> np.ndarray:
        """Zeros, one per row of ``X``."""
        return np.zeros(len(X), dtype=np.float64)


COST_MODELS: dict[str, type] = {"xgb": XGBCostModel, "none": NoCostModel, "forest": ForestCostModel}


def register_cost_model(name: str, cls: type) -> None:
    """Add a cost model class under ``name`` (lower-case letters, digits, ``_`` and ``-``, starting with a
    letter). ``cls`` must be a class with ``fit`` and ``predict`` methods taking ``seed`` in its constructor.
    UsageError on a bad name, a name taken, or a class that is not a cost model.

    Example::

        >>> class Zero(NoCostModel):
        ...     name = "zero"
        >>> register_cost_model("zero", Zero)
        >>> make_cost_model("zero").predict(np.ones((1, 2))).tolist()
        [0.0]
        >>> register_cost_model("zero", Zero)
        Traceback (most recent call last):
        ...
        tensorlang.errors.UsageError: a cost model called 'zero' is registered already
        >>> del COST_MODELS["zero"]
    """
    if not isinstance(name, str) or not (re.fullmatch(r"[a-z][a-z0-9_\-]*", name)
                                         or re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", name)):
        raise UsageError(f"a cost model name is lower-case letters, digits, '_' and '-', starting with a letter "
                         f"(or a plug-in spec package.module:Class); got {name!r}")
    if name in COST_MODELS:
        raise UsageError(f"a cost model called {name!r} is registered already")
    if not isinstance(cls, type) or not all(callable(getattr(cls, m, None)) for m in ("fit", "predict")):
        raise UsageError(f"cost model {name!r}: {cls!r} is not a class with fit and predict methods")
    if issubclass(cls, CostModel):
        missing = [f"_{m}" for m in ("fit", "predict")  # the base's fit / predict call an unimplemented _fit / _predict
                   if getattr(cls, m) is getattr(CostModel, m) and getattr(cls, f"_{m}") is getattr(CostModel, f"_{m}")]
        if missing:
            raise UsageError(f"cost model {name!r}: {cls.__name__} does not implement {' and '.join(missing)} (is "
                             f"it the abstract base class?)")
    COST_MODELS[name] = cls


def make_cost_model(name: str, seed: int = 0) -> CostModel:
    """A new, untrained cost model of the kind called ``name``; UsageError naming the legal names.

    Example::

        >>> make_cost_model("forest", seed=3)
        ForestCostModel(seed=3, trained=False)
        >>> make_cost_model("gbm")
        Traceback (most recent call last):
        ...
        tensorlang.errors.UsageError: unknown cost model 'gbm'; cost models: xgb, none, forest...
    """
    cls = COST_MODELS.get(name) if isinstance(name, str) else None
    if cls is None:
        from tensorlang.tuner.search.plugins import resolve_cost_model
        cls = resolve_cost_model(name)
    return cls(seed=seed)


def ranking_quality(y_true, y_pred) -> dict[str, float]:
    """How well ``y_pred`` orders the rows the way ``y_true`` (non-negative, higher = better) does.

    * ``spearman``: Spearman's rank correlation (0.0 where it is undefined: a constant input);
    * ``ndcg@10``: ``sklearn.metrics.ndcg_score`` with ``k=10``, gains ``y_true``;
    * ``top1``: 1.0 when a row with the highest ``y_true`` gets the highest prediction, else 0.0;
    * ``top5``: 1.0 when a row with the highest ``y_true`` is among the 5 highest predictions, else 0.0;
    * ``pairwise``: over the pairs with different ``y_true``, the fraction that the prediction orders the
      same way (a tied prediction counts one half; 0.5 when there is no such pair).

    For top1 and top5 a tie in the prediction counts against the model: a row's place is 1 + the number of
    other rows predicted at least as high. Raises UsageError for fewer than 2 rows or unequal lengths.

    Example::

        >>> q = ranking_quality([0.1, 0.5, 1.0, 0.0], [1, 2, 3, 0])
        >>> q["spearman"], q["ndcg@10"], q["top1"], q["top5"], q["pairwise"]
        (1.0, 1.0, 1.0, 1.0, 1.0)
        >>> ranking_quality([0.1, 0.5, 1.0, 0.0], [3, 2, 1, 0])["top1"]
        0.0
    """
    from scipy.stats import spearmanr
    from sklearn.metrics import ndcg_score

    t, p = np.asarray(y_true, dtype=np.float64), np.asarray(y_pred, dtype=np.float64)
    if t.ndim != 1 or t.shape != p.shape:
        raise UsageError(f"y_true and y_pred must be 1-D of equal length, got shapes {t.shape} and {p.shape}")
    if len(t) < 2:
        raise UsageError(f"ranking quality needs at least 2 rows, got {len(t)}")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p))):
        raise UsageError("ranking quality of non-finite values")
    rho = float(spearmanr(t, p).statistic) if np.ptp(t) > 0 and np.ptp(p) > 0 else 0.0
    return {"spearman": rho, "ndcg@10": float(ndcg_score(t[None, :], p[None, :], k=10)),
            "top1": _best_within(t, p, 1), "top5": _best_within(t, p, 5), "pairwise": _pairwise(t, p)}


def _best_within(t: np.ndarray, p: np.ndarray, k: int) -> float:
    """1.0 when some truly best row has place <= k in the prediction (ties placed against the model)."""
    best = np.flatnonzero(t == t.max())
    places = np.array([np.count_nonzero(p >= p[i]) for i in best])   # itself included: 1 + others at least as high
    return float(places.min() <= k)


def _pairwise(t: np.ndarray, p: np.ndarray, chunk: int = 1024) -> float:
    right, pairs = 0.0, 0
    for start in range(0, len(t), chunk):
        ti, pi = t[start:start + chunk, None], p[start:start + chunk, None]
        better = ti > t[None, :]                     # ordered pairs (i, j) with t_i > t_j: each pair once
        pairs += int(better.sum())
        right += float((better & (pi > p[None, :])).sum()) + 0.5 * float((better & (pi == p[None, :])).sum())
    return right / pairs if pairs else 0.5


def normalise_per_task(gflops, groups=None) -> np.ndarray:
    """Throughputs divided by the best of their task (``groups``: a task id per row; None: one task).

    Invalid throughputs (non-finite or not positive) become 0; a task without a valid one is all 0.

    Example::

        >>> normalise_per_task([10.0, 20.0, 0.0, 3.0, float("nan")], ["a", "a", "a", "b", "b"]).tolist()
        [0.5, 1.0, 0.0, 1.0, 0.0]
    """
    g = np.asarray(gflops, dtype=np.float64)
    if g.ndim != 1:
        raise UsageError(f"gflops must be 1-D, got shape {g.shape}")
    g = np.where(np.isfinite(g) & (g > 0), g, 0.0)
    if groups is None:
        groups = np.zeros(len(g), dtype=np.int64)
    groups = np.asarray(groups)
    if groups.shape != g.shape:
        raise UsageError(f"groups must have one task id per throughput ({len(g)}), got shape {groups.shape}")
    out = np.zeros_like(g)
    for task in np.unique(groups):
        rows = groups == task
        best = g[rows].max()
        if best > 0:
            out[rows] = g[rows] / best
    return out
