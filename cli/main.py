"""The ``tensorlang`` command: its parser and :func:`main`. Each command group is a module of this package with a
``register(subparsers)`` that adds its commands and sets each one's ``func`` (the function that runs it and
returns the JSON object of ``--json``); :data:`COMMAND_MODULES` lists them in the order ``tensorlang --help``
shows them.

    tensorlang ops | run | bench | show          kernels of the workload library (tensorlang.cli.kernels)
    tensorlang tune | best                       auto-tuning a kernel (tensorlang.cli.tune)
    tensorlang compare | dataset | costmodel     the research kit (tensorlang.cli.research)
    tensorlang export                            a kernel ahead of time (tensorlang.cli.export)
    tensorlang compile | bench-model | show-model  PyTorch models (tensorlang.cli.models)
    tensorlang tasks | tune-model                model tuning (tensorlang.cli.model_tune)

Every command takes `--json` and then prints one JSON object on stdout. Bad flags name the flag and the
legal values; errors never end in a traceback.
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import signal
import sys

from tensorlang.errors import TensorlangError

from . import export, kernels, model_tune, models, research, tune
from .common import Parser

#: the command modules, each with ``register(subparsers)``, in the order of ``tensorlang --help``
COMMAND_MODULES = (kernels, tune, research, export, models, model_tune)


def make_parser() -> argparse.ArgumentParser:
    """The argument parser of the `tensorlang` command: the commands every module of :data:`COMMAND_MODULES`
    registers, each with its flags and their defaults and the function that runs it (``func``).

    >>> args = make_parser().parse_args(["run", "softmax", "--preset", "small"])
    >>> args.command, args.workload, args.preset, args.repeat, args.min_time, args.func.__name__
    ('run', 'softmax', 'small', 10, 0.2, 'cmd_run')
    """
    p = Parser(prog="tensorlang", description="tensorlang: a tensor compiler with an auto-tuner")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for module in COMMAND_MODULES:
        module.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tensorlang` console script: parse `argv` (default: sys.argv[1:]), run the command and,
    with --json, print its result as one JSON object. Returns the exit status: 0, 2 when the command fails (the
    error printed on stderr without a traceback) or 130 when interrupted (a tune that Ctrl-C stopped prints its
    summary, and its JSON with "interrupted": true, first); a flag argparse rejects exits with
    status 2 (SystemExit) after printing the usage.

    Example::

        main(["run", "matmul", "--preset", "small"])   # what `tensorlang run matmul --preset small` does; 0
    """
    args = make_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # what a "resume with:" line repeats
    if argv is None and hasattr(signal, "SIGUSR1"):  # `kill -USR1 PID` prints every thread's stack: a stuck run
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        result = args.func(args)
    except TensorlangError as e:  # CLIError, UsageError, DSLError, ...: bad input, one line; a bug keeps its traceback
        print(f"tensorlang {args.command}: error: {e}", file=sys.stderr)
        return 2
    except MemoryError as e:  # sizes too big for this machine: the arrays, or the kernel's temporary buffers
        print(f"tensorlang {args.command}: error: out of memory: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tensorlang {args.command}: interrupted", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps(result))
    return 130 if isinstance(result, dict) and result.get("interrupted") else 0  # a tune stopped by Ctrl-C


if __name__ == "__main__":
    sys.exit(main())
