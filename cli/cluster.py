"""The command line's side of distributed tuning: the ``--cluster`` and ``--cluster-timeout`` flags of ``tune``,
``compare`` and ``tune-model`` (their ``register`` adds them with :func:`add_cluster_flags`), and the connection
they open.

    tensorlang tune WORKLOAD --trials N --cluster tcp://HOST:8786 [--cluster-timeout S] ...
    TENSORLANG_CLUSTER=tcp://HOST:8786 tensorlang tune WORKLOAD --trials N ...
"""
from __future__ import annotations

import os

from tensorlang.tuner.measure import ADDRESS_ENV

from .common import TuneFlagError


def add_cluster_flags(parser) -> None:
    """Add ``--cluster ADDRESS`` and ``--cluster-timeout S`` to an argparse ``parser``.

    Example::

        >>> import argparse
        >>> p = argparse.ArgumentParser()
        >>> add_cluster_flags(p)
        >>> a = p.parse_args(["--cluster", "tcp://10.0.0.1:8786"])
        >>> a.cluster, a.cluster_timeout
        ('tcp://10.0.0.1:8786', 20.0)
    """
    parser.add_argument("--cluster", metavar="ADDRESS",
                        help="build and measure on the workers of this Dask scheduler (tcp://HOST:8786 or tls://...; "
                             "default: $TENSORLANG_CLUSTER, else this machine)")
    parser.add_argument("--cluster-timeout", type=float, default=20.0, metavar="S",
                        help="seconds to reach the scheduler, and to wait for a worker with this CPU (default 20)")


def cluster_address(args) -> tuple[str | None, str]:
    """(the scheduler address ``args`` ask for or None: this machine, where it came from: ``--cluster`` or
    ``TENSORLANG_CLUSTER``).

    Example::

        >>> import argparse
        >>> cluster_address(argparse.Namespace(cluster="tcp://10.0.0.1:8786"))
        ('tcp://10.0.0.1:8786', '--cluster')
    """
    if getattr(args, "cluster", None) is not None:
        return args.cluster, "--cluster"
    env = os.environ.get(ADDRESS_ENV)
    return (env, ADDRESS_ENV) if env else (None, "")


def open_cluster(args):
    """The :class:`tensorlang.tuner.measure.cluster.Cluster` that ``--cluster`` (or ``TENSORLANG_CLUSTER``) names,
    connected; None when neither is given. TuneFlagError naming the flag (or the variable) when the address is wrong or
    the scheduler cannot be reached within ``--cluster-timeout``.

    Example::

        >>> import argparse
        >>> open_cluster(argparse.Namespace(cluster="tcp://10.0.0.1", cluster_timeout=1.0))
        Traceback (most recent call last):
        ...
        tensorlang.cli.common.TuneFlagError: --cluster: 'tcp://10.0.0.1' is not a scheduler ... (the port is missing)
    """
    address, source = cluster_address(args)
    if address is None:
        return None
    timeout = getattr(args, "cluster_timeout", 20.0)
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise TuneFlagError(f"--cluster-timeout: must be a positive number of seconds, got {timeout}")
    try:
        from tensorlang.tuner.measure.cluster import Cluster, ClusterError, ClusterOptions, check_address
    except ModuleNotFoundError as e:
        raise TuneFlagError(f"{source}: tuning on a Dask cluster needs Dask's distributed ({e}): "
                            "pip install 'tensorlang[cluster]'") from None
    try:
        check_address(address)
        return Cluster(address, ClusterOptions(timeout=timeout))
    except ClusterError as e:
        raise TuneFlagError(f"{source}: {e}") from None
