"""The ``tensorlang export`` command: choose a workload's schedule (hand, ``--best`` or ``--schedule FILE.json``)
and write its kernel ahead of time with :func:`tensorlang.export.export`.

Example::

    tensorlang export matmul --preset 512 --format so -o out/
"""
from __future__ import annotations

import json
import os
import shlex
import shutil

from tensorlang.errors import BuildError
from tensorlang.export import FORMATS, build_command, check_name, export

from .common import (
    DB_DEFAULT,
    CLIError,
    add_common,
    best_record,
    check_threads_flag,
    record_schedule,
    workload_and_sizes,
)


def register(subparsers) -> None:
    """Add ``export`` to the ``tensorlang`` parser's ``subparsers``.

    >>> import argparse
    >>> sub = argparse.ArgumentParser().add_subparsers(dest="command")
    >>> register(sub)
    >>> sorted(sub.choices)
    ['export']
    """
    sub = subparsers
    ex = sub.add_parser("export", help="write a kernel ahead of time: library, object, C, LLVM IR or assembly, "
                                       "with a header and an example C program",
                        description="Schedule: the one tl.build chooses (the best tuned record, else the "
                                    "workload's hand schedule, else the auto-scheduler's pick); --best or --schedule "
                                    "FILE.json choose another.")
    add_common(ex)
    ex.add_argument("--format", default="so", help="so (shared library, default), o (object file + runtime "
                                                   "source), c (C source), ll (LLVM IR) or asm (assembly)")
    ex.add_argument("-o", "--output", required=True, metavar="DIR", help="directory to write the files in")
    exs = ex.add_mutually_exclusive_group()
    exs.add_argument("--best", action="store_true", help="the best tuned record of the tuning database")
    exs.add_argument("--schedule", metavar="FILE.json", help="a schedule written by Schedule.to_json()")
    ex.add_argument("--name", help="the C function's name (default: the workload's)")
    ex.add_argument("--cc", help="C compiler that links format so (default: $CC, else cc)")
    ex.add_argument("--threads", type=int, help="with --best: the thread count it was tuned for (default: all CPUs)")
    ex.add_argument("--db", help=f"tuning database for --best {DB_DEFAULT}")
    ex.set_defaults(func=cmd_export)


def cmd_export(args) -> dict:
    """`tensorlang export`: choose the schedule (hand / --best / --schedule), export, and report the files.

    Returns the workload, sizes, format, C name, where the schedule came from, the files written ({role: path})
    and the command that builds the example program; bad flags raise CLIError.

    Example::

        tensorlang export matmul --preset 512 --format so -o out/
        args = make_parser().parse_args(["export", "matmul", "--best", "--format", "o", "-o", "out"])
        cmd_export(args)["files"]   # {'object': 'out/matmul.o', 'runtime': 'out/tensorlang_runtime.c', ...}
    """
    import tensorlang as tl
    if args.format not in FORMATS:
        raise CLIError(f"--format: unknown format {args.format!r}; formats: "
                       + ", ".join(f"{k} ({v})" for k, v in FORMATS.items()))
    if args.name is not None:
        try:
            check_name(args.name)
        except BuildError as e:
            raise CLIError(f"--name: {e}") from None
    for flag, value in (("--threads", args.threads), ("--db", args.db)):
        if value is not None and not args.best:
            raise CLIError(f"{flag}: only with --best (which tuning record to export)")
    w, sizes = workload_and_sizes(args)
    if args.format == "so":
        from tensorlang.codegen_c import find_c_compiler
        try:
            find_c_compiler(args.cc)
        except BuildError as e:
            raise CLIError(f"{'--cc' if args.cc else '--format so'}: {e}") from None
    created = check_output_directory(args.output)  # nothing is created before every check has passed
    op = tl.op(w.source)
    where = f" --preset {args.preset}" if args.preset else f" --size {args.size}" if args.size else ""
    if args.schedule:
        s, note = _schedule_file(args.schedule, w, op, sizes, bool(args.preset or args.size))
        where = ""
    elif args.best:
        check_threads_flag(args.threads)
        task, rec, path = best_record(w, sizes, args.threads, args.db)
        if rec is None:
            raise CLIError(f"--best: no tuning record for {task.describe()} in {path}; "
                           f"run: tensorlang tune {w.name}{where} --trials 100")
        s = record_schedule(rec, op, path)
        note = f"the best tuned record in {path} (trial {rec.trial}, {rec.gflops:.1f} GFLOPS when tuned)"
    else:  # what tl.build would compile: the best tuned record, else the hand schedule, else the auto pick
        from tensorlang.choice import choose_schedule
        s, source = choose_schedule(op, sizes)
        note = {"tuned": "the best tuned record of the tuning database",
                "hand": f"the hand schedule of schedules/{w.name}.py",
                "auto": "the auto-scheduler's zero-trial pick"}.get(source, f"a schedule from the {source} source")
    choice = " --best" if args.best else f" --schedule {shlex.quote(args.schedule)}" if args.schedule else ""
    name = f" --name {args.name}" if args.name else ""
    command = (f"tensorlang export {w.name}{where}{choice} --format {args.format}{name} "
               f"-o {shlex.quote(args.output)}")
    try:
        files = export(s, args.output, args.format, name=args.name, cc=args.cc, note=note, command=command)
    except BaseException:  # a failed compile or link leaves no folder behind that this command made
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise
    meta = {"name": args.name or op.name, "parallel": args.format == "c" and "# parallel" in s.lower()}
    shown = {k: s.sizes[k] for k in sorted(s.sizes, key=lambda k: list(sizes).index(k) if k in sizes else 99)}
    result = {"workload": w.name, "sizes": shown, "format": args.format, "name": meta["name"], "schedule": note,
              "files": files, "build_example": f"cd {shlex.quote(args.output)} && {build_command(meta, args.format)}"}
    if not args.json:
        print(f"exported {meta['name']} ({', '.join(f'{k}={v}' for k, v in shown.items())}; {note}) "
              f"as {FORMATS[args.format]}:")
        for role, path in files.items():
            print(f"  {path:<40} {role}")
        print(f"build and run the example:\n  {result['build_example']} && ./{meta['name']}_example")
        if args.format == "so":
            print(f"load it in Python:\n  tl.load({files['library']!r})")
    return result


def check_output_directory(path: str) -> str | None:
    """Check that ``-o`` `path` can be the output directory, creating nothing; returns the outermost of its
    folders that does not exist yet (None when `path` exists), which the export creates. A CLIError says why not.

    Example::

        >>> check_output_directory("/no-such-folder-here/out")
        '/no-such-folder-here'
        >>> check_output_directory("/dev/null")
        Traceback (most recent call last):
        ...
        tensorlang.cli.common.CLIError: -o: /dev/null exists and is not a directory; pass a directory to write ...
    """
    if not path:
        raise CLIError("-o: the output directory is an empty string")
    if os.path.exists(path) and not os.path.isdir(path):
        raise CLIError(f"-o: {path} exists and is not a directory; pass a directory to write the files in")
    missing, parent = None, os.path.abspath(path)
    while not os.path.exists(parent):
        missing, parent = parent, os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise CLIError(f"-o: cannot create the directory {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise CLIError(f"-o: cannot write to the directory {parent} (permission denied)")
    return missing


def _schedule_file(path: str, w, op, sizes: dict, sizes_given: bool):
    import tensorlang as tl
    from tensorlang.errors import TensorlangError
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        raise CLIError(f"--schedule: no such file {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CLIError(f"--schedule: cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:  # RecursionError: arrays nested thousands deep
        raise CLIError(f"--schedule: {path} is not JSON ({e}); write it with Schedule.to_json()") from None
    if not isinstance(data, dict) or not isinstance(data.get("source"), str) or "sizes" not in data:
        raise CLIError(f"--schedule: {path} is not a tensorlang schedule (write one with Schedule.to_json())")
    try:
        other = tl.op(data["source"])
    except TensorlangError as e:
        raise CLIError(f"--schedule: the program in {path} does not parse: {e}") from None
    if other.key != op.key:
        raise CLIError(f"--schedule: {path} is a schedule of the program {other.name!r}, not of the workload "
                       f"{w.name}; pass a schedule made for {w.name}")
    if sizes_given and data["sizes"] != sizes:
        given = ", ".join(f"{k}={v}" for k, v in sizes.items())
        order = list(sizes)  # the workload's order (the file's is alphabetical)
        theirs = ", ".join(f"{k}={data['sizes'][k]}" for k in sorted(
            data["sizes"], key=lambda k: order.index(k) if k in order else len(order))) \
            if isinstance(data["sizes"], dict) else repr(data["sizes"])
        raise CLIError(f"--schedule: {path} is for the sizes {theirs}, not {given}; drop --preset/--size to "
                       "export it at its own sizes")
    try:
        return tl.Schedule.from_json(text, op), f"from {path}"
    except TensorlangError as e:
        raise CLIError(f"--schedule: {path}: {e}") from None
