"""Records: the tuning database (:mod:`~tensorlang.tuner.records.database`, SQLite, one record per measurement) and
datasets of measured configs for offline replay (:mod:`~tensorlang.tuner.records.dataset`).

Example::

    >>> from tensorlang.tuner.records.database import Database
    >>> Database(":memory:").count("no task")
    0
"""
