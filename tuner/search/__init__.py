"""Search: the strategies that propose configs (:mod:`~tensorlang.tuner.search.strategies`), the cost models that
rank them (:mod:`~tensorlang.tuner.search.costmodel`) on loop-IR features (:mod:`~tensorlang.tuner.features`),
plug-ins found by name or entry point (:mod:`~tensorlang.tuner.search.plugins`), and transfer learning across tasks
(:mod:`~tensorlang.tuner.search.transfer`).

Example::

    >>> from tensorlang.tuner.search.strategies import STRATEGIES
    >>> "xgb-genetic" in STRATEGIES
    True
"""
