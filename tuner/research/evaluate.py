"""Cost-model evaluation on a dataset: train each model on part of the measured configs, rank the rest.

For each of ``splits`` seeded random splits, a model is trained on ``train_fraction`` of the configs (features of the
lowered loop IR, target = throughput / the best of the table, invalid = 0) and predicts the others; the prediction's
ranking is scored with :func:`tensorlang.tuner.search.costmodel.ranking_quality`. The report is the mean over splits:
top-1 and top-5 hit rates (how often the best held-out config is the model's first, or among its first five), Spearman's
rank correlation, NDCG@10 and pairwise accuracy, plus training seconds.

Example::

    >>> import numpy as np
    >>> X = np.random.default_rng(0).random((60, 3)); y = X[:, 0]
    >>> rep = evaluate_models(X, y, ["forest", "none"], splits=2)
    >>> rep["forest"]["spearman"] > 0.8, rep["none"]["spearman"]
    (True, 0.0)
"""
from __future__ import annotations

import time

import numpy as np

from tensorlang.errors import UsageError
from tensorlang.tuner.search.costmodel import make_cost_model, ranking_quality

__all__ = ["evaluate_dataset", "evaluate_models", "format_report"]

METRICS = ("top1", "top5", "spearman", "ndcg@10", "pairwise")


def evaluate_models(X: np.ndarray, y: np.ndarray, models, train_fraction: float = 0.5, splits: int = 5,
                    seed: int = 0) -> dict:
    """``{model: {metric: mean over splits, "fit_s": mean training seconds}}`` for rows ``X`` with targets ``y``.

    Each of ``splits`` seeded random splits trains a fresh model (seed ``seed + split``) on ``train_fraction`` of
    the rows and scores the ranking of the rest. UsageError when the fraction is not in (0, 1), ``splits`` is
    below 1, either side of the split would have fewer than 2 rows, or a model name is unknown.

    Example::

        >>> X = np.arange(20.0).reshape(10, 2)
        >>> rep = evaluate_models(X, X[:, 0], ["none"], splits=3)
        >>> rep["none"]["train_rows"], rep["none"]["test_rows"], rep["none"]["pairwise"]
        (5, 5, 0.5)
        >>> evaluate_models(X[:3], X[:3, 0], ["none"])
        Traceback (most recent call last):
        ...
        tensorlang.errors.UsageError: 3 rows are too few to split 50% / 50%
    """
    if not 0.0 < train_fraction < 1.0:
        raise UsageError(f"train fraction must be between 0 and 1, got {train_fraction}")
    if splits < 1:
        raise UsageError(f"splits must be at least 1, got {splits}")
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n_train = int(round(len(X) * train_fraction))
    if n_train < 2 or len(X) - n_train < 2:
        raise UsageError(f"{len(X)} rows are too few to split {train_fraction:.0%} / {1 - train_fraction:.0%}")
    models = list(models)
    for m in models:
        make_cost_model(m)  # unknown name -> UsageError before any work
    out = {m: {k: [] for k in (*METRICS, "fit_s")} for m in models}
    for split in range(splits):
        order = np.random.default_rng(seed + split).permutation(len(X))
        train, test = order[:n_train], order[n_train:]
        for m in models:
            model = make_cost_model(m, seed=seed + split)
            t0 = time.perf_counter()
            model.fit(X[train], y[train])
            out[m]["fit_s"].append(time.perf_counter() - t0)
            q = ranking_quality(y[test], model.predict(X[test]))
            for k in METRICS:
                out[m][k].append(q[k])
    return {m: {k: float(np.mean(v)) for k, v in scores.items()} | {"splits": splits, "train_rows": n_train,
                                                                    "test_rows": len(X) - n_train}
            for m, scores in out.items()}


def evaluate_dataset(dataset, models=None, train_fraction: float = 0.5, splits: int = 5, seed: int = 0) -> dict:
    """:func:`evaluate_models` on a :class:`tensorlang.tuner.records.dataset.Dataset` (configs that cannot be scheduled
    are left out). ``models`` defaults to every registered cost model, entry points included. The targets are each
    config's GFLOPS over the table's best (invalid configs 0); the features are those of the lowered loop IR.

    Example::

        >>> from tensorlang.tuner.records.dataset import Dataset
        >>> from tensorlang.tuner.task import Task
        >>> t = Task.create("matmul", preset="small", threads=1, space="hand")
        >>> configs = [t.space.config_at(i) for i in range(8)]
        >>> ds = Dataset({"workload": "matmul", "sizes": t.sizes, "threads": 1, "flops": t.flops, "space": "hand",
        ...               "knobs": {k.name: list(k.values) for k in t.space.knobs}},
        ...              [(c, float(i + 1), None) for i, c in enumerate(configs)])
        >>> rep = evaluate_dataset(ds, ["none"], splits=2)
        >>> rep["none"]["train_rows"], rep["none"]["test_rows"]
        (4, 4)
    """
    from tensorlang.space import config_key
    from tensorlang.tuner.research.replay import replay_task, table_features
    from tensorlang.tuner.search.costmodel import COST_MODELS
    from tensorlang.tuner.search.plugins import load_entry_points
    if models is None:
        load_entry_points("cost model")
        models = list(COST_MODELS)
    if not dataset.valid_count:
        from tensorlang.tuner.records.dataset import DatasetError
        where = f"dataset {dataset.path}" if dataset.path else "the dataset"
        raise DatasetError(f"{where} has no valid config to rank (0 of its {len(dataset)} rows are valid)")
    task = replay_task(dataset)
    feats = table_features(dataset, task)
    best = dataset.best_gflops
    rows, ys = [], []
    for config, gflops, _ in dataset.rows():
        f = feats.get(config_key(config))
        if f is not None:
            rows.append(f)
            ys.append(gflops / best if gflops is not None and best > 0 else 0.0)
    return evaluate_models(np.array(rows), np.array(ys), models, train_fraction, splits, seed)


def format_report(report: dict) -> str:
    """The report as an aligned text table, one line per model.

    Example::

        >>> print(format_report({"m": {"top1": 0.5, "top5": 1.0, "spearman": 0.9, "ndcg@10": 0.8,
        ...                            "pairwise": 0.85, "fit_s": 0.01, "splits": 2, "train_rows": 10,
        ...                            "test_rows": 10}}).splitlines()[-1])
        m                0.50   1.00     0.900    0.800    0.850     10 ms
    """
    head = f"{'model':<14} {'top-1':>6} {'top-5':>6} {'Spearman':>9} {'NDCG@10':>8} {'pairwise':>8} {'fit':>9}"
    first = next(iter(report.values()), {})
    lines = [f"{first.get('splits', 0)} random splits, {first.get('train_rows', 0)} configs to train on and "
             f"{first.get('test_rows', 0)} to rank in each; means over splits", head, "-" * len(head)]
    for m, r in report.items():
        fit = f"{r['fit_s'] * 1e3:.0f} ms" if r["fit_s"] < 1 else f"{r['fit_s']:.1f} s"
        lines.append(f"{m:<14} {r['top1']:>6.2f} {r['top5']:>6.2f} {r['spearman']:>9.3f} {r['ndcg@10']:>8.3f} "
                     f"{r['pairwise']:>8.3f} {fit:>9}")
    return "\n".join(lines)
