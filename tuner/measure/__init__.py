"""Measurement: the local runner (:mod:`~tensorlang.tuner.measure.local`: build in a pool of worker processes, run
one candidate at a time in an isolated process), the worker processes (:mod:`~tensorlang.tuner.measure.worker`),
what other processes took while a candidate was timed (:mod:`~tensorlang.tuner.measure.disturbance`), and the
Dask cluster's runner and workers (:mod:`~tensorlang.tuner.measure.cluster`,
:mod:`~tensorlang.tuner.measure.cluster_worker`; they need the ``cluster`` extra).

Example::

    >>> from tensorlang.tuner.measure import ADDRESS_ENV
    >>> ADDRESS_ENV
    'TENSORLANG_CLUSTER'
"""

#: the environment variable naming the Dask scheduler to measure on when ``--cluster`` is not given (here, not in
#: :mod:`~tensorlang.tuner.measure.cluster`, which needs Dask)
ADDRESS_ENV = "TENSORLANG_CLUSTER"
