"""The research kit: strategies side by side (:mod:`~tensorlang.tuner.research.comparison`), replay of a dataset
instead of measuring (:mod:`~tensorlang.tuner.research.replay`), cost models on held-out configs
(:mod:`~tensorlang.tuner.research.evaluate`) and tuning curves from the database
(:mod:`~tensorlang.tuner.research.run_curves`).

Example::

    from tensorlang.tuner.research.comparison import compare
    result = compare(["random", "xgb-genetic"], trials=64, seeds=5, replay=Dataset.load("datasets/matmul_512.csv"))
"""
