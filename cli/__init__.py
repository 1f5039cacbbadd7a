"""The ``tensorlang`` command line (:mod:`tensorlang.cli.main`), one module per command group, each with a
``register(subparsers)``; :mod:`tensorlang.cli.common` holds what they share. It is the top floor: no module of
the core, the schedules or the tuner imports it.

Example::

    python -m tensorlang.cli ops        # the same as: tensorlang ops
"""
