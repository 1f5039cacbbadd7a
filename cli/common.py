"""What the commands of the ``tensorlang`` command line share: the error of a bad command line, the flags every
command takes (:func:`add_common`), the checks of shared flags (``--size``, ``--seed``, ``--threads``, ``--jobs``,
``--plot``, ``--db``, plug-in names), the workload and sizes a command line names, and the tuning database and
best record it reads. Every command module (:mod:`tensorlang.cli.kernels`, :mod:`tensorlang.cli.tune`, ...) uses
these; none imports another command module's helpers.

Example::

    >>> from tensorlang.cli.common import parse_sizes
    >>> parse_sizes("M=64,N=32")
    {'M': 64, 'N': 32}
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys

from tensorlang.errors import UsageError
from tensorlang.tuner.task import Task


class CLIError(UsageError):
    """A bad command line: the message names the flag and what is legal."""


DB_DEFAULT = "(default: TENSORLANG_DB or the user cache folder)"


MAX_SEED = 2**31 - 1


def seed_value(text: str) -> int:
    """The value of a --seed flag: an integer from 0 to MAX_SEED (what numpy's, optuna's, scikit-learn's and
    XGBoost's generators all take, with room for `costmodel eval` to add the split number); argparse prints an
    ArgumentTypeError as "argument --seed: ...".

    >>> seed_value("42")
    42
    >>> seed_value("-1")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be an integer >= 0, got '-1'
    >>> seed_value("99999999999")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: must be at most 2147483647 (2**31 - 1), got '99999999999'
    """
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    if value > MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_SEED} (2**31 - 1), got {text!r}")
    return value


def parse_sizes(text: str) -> dict[str, int]:
    """Parse `--size M=1024,N=1024` into a dict; a CLIError names a malformed pair, an empty entry or a size given
    twice.

    >>> parse_sizes("M=4, N=8")
    {'M': 4, 'N': 8}
    >>> parse_sizes("M=4,M=8")
    Traceback (most recent call last):
    ...
    tensorlang.cli.common.CLIError: --size: M is given twice ('M=4,M=8')
    >>> parse_sizes("M=4,,N=8")
    Traceback (most recent call last):
    ...
    tensorlang.cli.common.CLIError: --size: an empty entry in 'M=4,,N=8' (two commas in a row, or a comma at an end)
    """
    if not text.strip():
        raise CLIError("--size: no sizes given; expected NAME=INT pairs like M=1024,N=512")
    out: dict[str, int] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise CLIError(f"--size: an empty entry in {text!r} (two commas in a row, or a comma at an end)")
        name, eq, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not name.isidentifier():
            raise CLIError(f"--size: expected NAME=INT pairs separated by commas (like M=1024,N=512), got {part!r}")
        if name in out:
            raise CLIError(f"--size: {name} is given twice ({text!r})")
        try:
            out[name] = int(value)
        except ValueError:
            raise CLIError(f"--size: {name}={value!r} is not an integer") from None
    return out


def check_timing_flags(args) -> None:
    """Refuse a --repeat below 1 or a --min-time below 0 (or not a number) with a CLIError naming the flag.

    >>> from tensorlang.cli.main import make_parser
    >>> check_timing_flags(make_parser().parse_args(["run", "matmul", "--repeat", "0"]))
    Traceback (most recent call last):
    ...
    tensorlang.cli.common.CLIError: --repeat: must be >= 1 timed run, got 0
    """
    if args.repeat < 1:
        raise CLIError(f"--repeat: must be >= 1 timed run, got {args.repeat}")
    if not args.min_time >= 0 or args.min_time == float("inf"):
        raise CLIError(f"--min-time: must be a finite number of seconds >= 0, got {args.min_time}")


def is_program_file(name: str) -> bool:
    """Whether the WORKLOAD argument names a DSL file rather than a built-in workload: not a workload's name, and
    it ends in ``.tl``, has a folder in it, or is an existing file.

    >>> is_program_file("matmul"), is_program_file("my_op.tl")
    (False, True)
    """
    import os

    from tensorlang import schedules
    if name in schedules.WORKLOADS:
        return False
    return name.endswith(".tl") or os.sep in name or os.path.isfile(name)


def program_from_file(path: str, size_text: str | None, preset: str | None) -> tuple:
    """The workload and sizes of a DSL file given as WORKLOAD: every size comes from --size (a file has no
    presets); a program that is a built-in workload's up to names, spacing and comments is that workload (its
    sizes under the workload's names), with its numpy baselines and hand schedule. A CLIError names a missing
    file, a missing size or --preset; a DSLError points into the file.

    Example::

        tensorlang tune my_gelu_dense.tl --size M=512,N=512,K=512 --trials 200
    """
    import tensorlang as tl
    from tensorlang.schedules.program import program_workload
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        raise CLIError(f"WORKLOAD: no workload and no file called {path!r} (workloads: tensorlang ops)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CLIError(f"WORKLOAD: cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    if preset is not None:
        raise CLIError(f"--preset: {path} is a DSL file, which has no presets; give every size with --size")
    try:
        op = tl.op(text)
    except tl.DSLError as e:
        raise tl.DSLError(e.message, e.loc, text, file=path) from None
    sizes = parse_sizes(size_text) if size_text else {}
    missing = [n for n in op.size_names if n not in sizes]
    if missing:
        example = ",".join(f"{n}=..." for n in op.size_names)
        raise CLIError(f"--size: {path} needs every size of {op.name}: {', '.join(missing)} missing "
                       f"(--size {example})")
    unknown = [n for n in sizes if n not in op.size_names]
    if unknown:
        raise CLIError(f"--size: {op.name} has no size {', '.join(unknown)}; sizes: {', '.join(op.size_names)}")
    from tensorlang.schedules.lookup import sizes_of, workload_of
    found = workload_of(op)
    if found is not None:
        w, _, names = found
        sizes = sizes_of(names, sizes)
        w.check_sizes(sizes)
        return w, sizes
    try:
        tl.schedule(op, **sizes)
    except tl.TensorlangError as e:
        raise CLIError(f"--size: {e}") from None
    return program_workload(text, sizes), dict(sizes)


def is_builtin(w) -> bool:
    """Whether workload `w` is one of the library's (not a user's program from a file).

    >>> from tensorlang import schedules
    >>> is_builtin(schedules.get("matmul"))
    True
    """
    from tensorlang import schedules
    return schedules.WORKLOADS.get(w.name) is w


def workload_and_sizes(args) -> tuple:
    """The workload and its sizes from WORKLOAD, --preset and --size (which overrides preset values); a CLIError
    names an unknown workload, preset or size. WORKLOAD may be a DSL file (see :func:`program_from_file`).

    >>> from tensorlang.cli.main import make_parser
    >>> args = make_parser().parse_args(["run", "matmul", "--preset", "small", "--size", "K=16"])
    >>> w, sizes = workload_and_sizes(args)
    >>> w.name, sizes
    ('matmul', {'M': 64, 'N': 48, 'K': 16})
    """
    from tensorlang import schedules
    if is_program_file(args.workload):
        return program_from_file(args.workload, args.size, args.preset)
    if args.workload not in schedules.WORKLOADS:
        raise CLIError(f"unknown workload {args.workload!r}; workloads: {', '.join(schedules.WORKLOADS)} "
                       "(or a DSL file, NAME.tl)")
    w = schedules.WORKLOADS[args.workload]
    if args.preset is not None and args.preset not in w.presets:
        raise CLIError(f"--preset: {w.name} has no preset {args.preset!r}; presets: {', '.join(w.presets)}")
    sizes = w.sizes(args.preset)
    if args.size is not None:
        extra = parse_sizes(args.size)
        unknown = [k for k in extra if k not in sizes]
        if unknown:
            raise CLIError(f"--size: {w.name} has no size {', '.join(unknown)}; sizes: {', '.join(sizes)}")
        sizes.update(extra)
        w.check_sizes(sizes)
    return w, sizes


SCHEDULE_SOURCES = {"tuned": "the best tuned record of the tuning database", "hand": "the hand schedule",
                    "auto": "the auto-scheduler's zero-trial pick", "naive": "the naive loop nest",
                    "given": "a schedule source plug-in"}


class Parser(argparse.ArgumentParser):
    """The parser class of the ``tensorlang`` command and its subcommands: a bad command line prints the usage and
    one line naming the problem (exit status 2, no traceback), and a misspelt flag is named before argparse
    complains of a missing one.

    >>> p = Parser(prog="tensorlang demo")
    >>> _ = p.add_argument("--trials", type=int)
    >>> p.parse_args(["--trials", "3"]).trials
    3
    """

    def error(self, message):
        """argparse's own errors: the usage line and the message, exit status 2, no traceback."""
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")

    def parse_args(self, args=None, namespace=None):
        """argparse's, after :func:`unknown_flag` has looked for a flag the command does not have (argparse
        would first complain of a required flag that a misspelt one was meant to give)."""
        argv = list(sys.argv[1:] if args is None else args)
        problem = unknown_flag(self, argv)
        if problem is not None:
            parser, message = problem
            parser.print_usage(sys.stderr)
            parser.exit(2, f"{parser.prog}: error: {message}\n")
        return super().parse_args(argv, namespace)


def _subparsers(parser) -> dict:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices
    return {}


def unknown_flag(parser, argv: list[str]):
    """(the parser of the command, a message) for the first flag in `argv` that its command does not take, naming
    the closest one it does; None when every flag is known.

    >>> from tensorlang.cli.main import make_parser
    >>> p = make_parser()
    >>> unknown_flag(p, ["tune", "conv2d", "--trails", "10"])[1]
    'unknown flag --trails for tensorlang tune; did you mean --trials? (tensorlang tune --help lists its flags)'
    >>> unknown_flag(p, ["tune", "conv2d", "--trials", "10"]) is None
    True
    """
    import difflib
    current, i = parser, 0
    while i < len(argv):
        token = argv[i]
        subs = _subparsers(current)
        if token == "--":
            return None
        if not token.startswith("-") and token in subs:
            current = subs[token]
        elif token.startswith("--"):
            name = token.split("=", 1)[0]
            known = [o for a in current._actions for o in a.option_strings]
            if name not in known and not any(k.startswith(name) for k in known if k.startswith("--")):
                close = difflib.get_close_matches(name, [k for k in known if k.startswith("--")], n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]}?" if close else ""
                return current, (f"unknown flag {name} for {current.prog}{hint} ({current.prog} --help lists its "
                                 "flags)")
        i += 1
    return None


def add_common(parser, sizes: bool = True) -> None:
    """Add the flags every command takes to a command's ``parser``: ``--json`` and, with ``sizes``, the WORKLOAD
    argument with ``--preset`` and ``--size``.

    >>> p = argparse.ArgumentParser()
    >>> add_common(p)
    >>> a = p.parse_args(["matmul", "--preset", "small", "--json"])
    >>> a.workload, a.preset, a.size, a.json
    ('matmul', 'small', None, True)
    """
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    if sizes:
        parser.add_argument("workload", metavar="WORKLOAD",
                            help="a workload (see `tensorlang ops`) or a DSL file (NAME.tl, every size with --size)")
        parser.add_argument("--preset", help="a size preset of the workload")
        parser.add_argument("--size", help="sizes as NAME=INT,... (override the preset's)")


class TuneFlagError(UsageError):
    """A bad flag of ``tune`` or ``best``: the message names the flag and the legal values."""


def check_plot_flag(path: str | None) -> None:
    """Refuse a ``--plot`` file that is not a .png, whose folder does not exist, or that cannot be written (None:
    no plot). The check opens the file as the plot will: permissions do not tell (root may write a read-only
    folder, and nobody may write some that say otherwise); a file it creates it removes again.

    Example::

        >>> check_plot_flag(None)
        >>> check_plot_flag("/no/such/folder/curve.png")
        Traceback (most recent call last):
        ...
        tensorlang.cli.common.TuneFlagError: --plot: folder '/no/such/folder' does not exist
    """
    if path is None:
        return
    if not path.lower().endswith(".png"):
        raise TuneFlagError(f"--plot: the file must end in .png, got {path!r}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise TuneFlagError(f"--plot: folder {folder!r} does not exist")
    if os.path.isdir(path):
        raise TuneFlagError(f"--plot: {path!r} is a folder, not a file")
    existed = os.path.exists(path)
    try:
        with open(path, "ab"):
            pass
    except OSError as e:
        raise TuneFlagError(f"--plot: cannot write {path!r}: {e.strerror or e}") from None
    if not existed:
        os.unlink(path)


#: The most build processes ``--jobs`` starts (each is a Python process of about 100 MB).
MAX_JOBS = 256


def check_threads_flag(threads: int | None, flag: str = "--threads") -> None:
    """Refuse a thread count (None: not given) below 1 or above :data:`tensorlang.threadpool.MAX_THREADS`, the
    most threads the thread pool runs, with a TuneFlagError naming ``flag``.

    Example::

        >>> check_threads_flag(None); check_threads_flag(8)
        >>> check_threads_flag(100000)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        tensorlang.cli.common.TuneFlagError: --threads: must be at most 1024 (the most threads ...), got 100000
    """
    from tensorlang.threadpool import MAX_THREADS
    _check_count(threads, flag, MAX_THREADS, "the most threads the thread pool runs")


def check_jobs_flag(jobs: int | None, flag: str = "--jobs") -> None:
    """Refuse a number of build processes (None: not given, the CPU count) below 1 or above :data:`MAX_JOBS`
    with a TuneFlagError naming ``flag``.

    Example::

        >>> check_jobs_flag(None); check_jobs_flag(4)
        >>> check_jobs_flag(0)
        Traceback (most recent call last):
        ...
        tensorlang.cli.common.TuneFlagError: --jobs: must be at least 1, got 0
    """
    _check_count(jobs, flag, MAX_JOBS, "each job is a Python process")


def _check_count(value: int | None, flag: str, most: int, why: str) -> None:
    if value is None:
        return
    if value < 1:
        raise TuneFlagError(f"{flag}: must be at least 1, got {value}")
    if value > most:
        raise TuneFlagError(f"{flag}: must be at most {most} ({why}), got {value}")


def check_plugin_flags(strategies, cost_models, strategy_flag: str = "--strategy",
                       cost_model_flag: str = "--cost-model") -> None:
    """Resolve every strategy and cost model name (registered, entry point or ``package.module:Class``) before
    anything starts; TuneFlagError naming the flag otherwise (``strategy_flag`` or ``cost_model_flag``: the
    commands that take lists pass ``--strategies`` or ``--models``).

    Example::

        >>> check_plugin_flags(["random", "tensorlang.tuner.search.strategies:GridSearch"], ["xgb"])
        >>> check_plugin_flags(["annealing"], [], strategy_flag="--strategies")
        Traceback (most recent call last):
        ...
        tensorlang.cli.common.TuneFlagError: --strategies: unknown strategy 'annealing'; strategies: random, grid, ...
    """
    from tensorlang.tuner.search.plugins import resolve_cost_model, resolve_strategy
    for flag, names, resolve in ((strategy_flag, strategies, resolve_strategy),
                                 (cost_model_flag, cost_models, resolve_cost_model)):
        for name in names:
            try:
                resolve(name)
            except ValueError as e:
                raise TuneFlagError(f"{flag}: {e}") from None


def db_source(path) -> str:
    """Where the tuning database path came from, for error messages: ``--db``, ``TENSORLANG_DB`` or the
    default.

    >>> db_source("runs.db")
    '--db'
    """
    if path is not None:
        return "--db"
    return "TENSORLANG_DB" if os.environ.get("TENSORLANG_DB", "").strip() else "the default tuning database"


def open_db(path, read_only: bool = False):
    """The tuning database of ``--db`` (None: ``TENSORLANG_DB`` or the default), opened; TuneFlagError naming where
    the path came from when it is empty or cannot be opened.

    >>> open_db(":memory:").count("no task")
    0
    """
    from tensorlang.tuner.records.database import Database, DatabaseError
    check_db_flag(path)
    try:
        return Database(path, read_only=read_only)
    except DatabaseError as e:
        raise TuneFlagError(f"{db_source(path)}: {e}") from None


def task_for(workload, sizes: dict, threads: int | None, space: str = "default") -> Task:
    """The tuning task of a workload from the command line: a built-in one by name, a user's program (from a
    DSL file) by its text.

    Example::

        >>> from tensorlang import schedules
        >>> task_for(schedules.get("matmul"), {"M": 64, "N": 48, "K": 32}, 1).key == \\
        ...     Task.create("matmul", preset="small", threads=1).key
        True
    """
    from tensorlang import schedules
    if schedules.WORKLOADS.get(workload.name) is workload:
        return Task.create(workload.name, sizes=sizes, threads=threads, space=space)
    return Task.from_source(workload.source, sizes, threads=threads, space=space)


def check_db_flag(path) -> None:
    """Refuse an empty ``--db`` (None: not given) with a TuneFlagError.

    >>> check_db_flag(None); check_db_flag("runs.db")
    >>> check_db_flag(" ")
    Traceback (most recent call last):
    ...
    tensorlang.cli.common.TuneFlagError: --db: the path is empty; name a tuning database file
    """
    if path is not None and not str(path).strip():
        raise TuneFlagError("--db: the path is empty; name a tuning database file")


def existing_db(db_path):
    """(the path ``db_path`` or the default resolves to, the opened Database or None when no file is there yet:
    reading never creates one); TuneFlagError naming where the path came from.

    >>> existing_db("/no/such/folder/runs.db")
    ('/no/such/folder/runs.db', None)
    """
    from tensorlang.tuner.records.database import DatabaseError, default_db_path
    check_db_flag(db_path)
    try:
        path = db_path or default_db_path()
    except DatabaseError as e:
        raise TuneFlagError(f"{db_source(db_path)}: {e}") from None
    if path != ":memory:" and not os.path.exists(os.path.expanduser(path)):
        return path, None
    return path, open_db(db_path, read_only=path != ":memory:")


def record_schedule(rec, op, path):
    """The :class:`tensorlang.Schedule` of a tuning record ``rec`` of the program ``op``, read from the database
    at ``path``; TuneFlagError naming the database and the record when its schedule cannot be rebuilt (a damaged
    file, or one written for another version of the program).

    Example::

        >>> import tensorlang as tl
        >>> from tensorlang.tuner.records.database import Record
        >>> op = tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]")
        >>> good = Record("t", "f", {}, {}, {}, tl.schedule(op, N=4).to_json(), (1.0,), id=3)
        >>> record_schedule(good, op, "runs.db").sizes
        {'N': 4}
        >>> record_schedule(Record("t", "f", {}, {}, {}, "{}", (1.0,), id=3, trial=7), op, "runs.db")
        Traceback (most recent call last):
        ...
        tensorlang.cli.common.TuneFlagError: tuning database runs.db: the schedule of record 3 (trial 7) cannot be ...
    """
    import tensorlang as tl
    from tensorlang.errors import TensorlangError
    try:
        return tl.Schedule.from_json(rec.schedule, op)
    except TensorlangError as e:
        raise TuneFlagError(f"tuning database {path}: the schedule of record {rec.id} (trial {rec.trial}) cannot be "
                            f"rebuilt: {e}") from None


def resume_command(args) -> str:
    """The command line that continues this tuning run, quoted for the shell: the arguments
    :func:`tensorlang.cli.main.main` was given (``args.argv``; this process's ``sys.argv`` when there is none). The
    same flags resume, since earlier records count.

    Example::

        >>> from tensorlang.cli.main import make_parser
        >>> argv = ["tune", "matmul", "--trials", "500", "--db", "my tuning.db"]
        >>> args = make_parser().parse_args(argv)
        >>> args.argv = argv
        >>> resume_command(args)
        "tensorlang tune matmul --trials 500 --db 'my tuning.db'"
    """
    argv = getattr(args, "argv", None)
    argv = sys.argv[1:] if argv is None else argv
    return "tensorlang " + " ".join(shlex.quote(a) for a in argv) if argv else "tensorlang tune ..."


def best_record(workload, sizes, threads, db_path):
    """(task, its best valid record or None, the database path) for the workload at sizes, this CPU, threads.
    A database file that does not exist yet is not created. ``db_path`` None:
    :func:`tensorlang.tuner.records.database.default_db_path`.

    Example::

        >>> from tensorlang import schedules
        >>> task, rec, path = best_record(schedules.get("matmul"), {"M": 64, "N": 48, "K": 32}, 1, "/no/such.db")
        >>> task.describe().split(" on ")[0], rec, path
        ('matmul(M=64, N=48, K=32)', None, '/no/such.db')
    """
    task, rec, path, _ = best_and_retimed(workload, sizes, threads, db_path)
    return task, rec, path


def best_and_retimed(workload, sizes, threads, db_path):
    """As :func:`best_record`, and the re-timed medians by config key in force for the task (empty when none).

    >>> from tensorlang import schedules
    >>> best_and_retimed(schedules.get("matmul"), {"M": 64, "N": 48, "K": 32}, 1, "/no/such.db")[1:]
    (None, '/no/such.db', {})
    """
    task = task_for(workload, sizes, threads)
    path, db = existing_db(db_path)
    if db is None:
        return task, None, path, {}
    try:
        return task, db.best(task.key), db.path, db.retimed(task.key)
    finally:
        db.close()
