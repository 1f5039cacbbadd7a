"""The `tensorlang` command line.

    tensorlang ops [--json]                               workloads and their size presets
    tensorlang run WORKLOAD [--preset P | --size K=V,...]  compile, run, check against numpy, time it
    tensorlang bench WORKLOAD [--threads N]                default vs hand schedule vs numpy, one table
    tensorlang show WORKLOAD [--ir | --llvm | --asm]       the loop IR or generated code
    tensorlang tune WORKLOAD --trials N [...]              auto-tune a workload's schedule (see tuner/tune_cli.py)
    tensorlang best WORKLOAD                               the best tuned record and its schedule as Python
    tensorlang compare WORKLOAD --strategies A,B --trials N  search strategies side by side (tuner/research_cli.py)
    tensorlang dataset export WORKLOAD -o FILE.csv         a task's records as a dataset for offline replay
    tensorlang costmodel eval --dataset FILE.csv           rank held-out configs with each cost model
    tensorlang export WORKLOAD --format so|o|c|ll|asm -o DIR  the kernel ahead of time, a header, an example program
    tensorlang tasks MODEL / tune-model MODEL --trials N  a model's tuning tasks; tune them all (model_tune_cli.py)

Every command takes `--json` and then prints one JSON object on stdout. Bad flags name the flag and the
legal values; errors never end in a traceback.
"""
from __future__ import annotations

import argparse
import faulthandler
import json
import signal
import sys
import time

from tensorlang.errors import TensorlangError, UsageError


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
    tuner.cli.CLIError: --size: M is given twice ('M=4,M=8')
    >>> parse_sizes("M=4,,N=8")
    Traceback (most recent call last):
    ...
    tuner.cli.CLIError: --size: an empty entry in 'M=4,,N=8' (two commas in a row, or a comma at an end)
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

    >>> check_timing_flags(make_parser().parse_args(["run", "matmul", "--repeat", "0"]))
    Traceback (most recent call last):
    ...
    tuner.cli.CLIError: --repeat: must be >= 1 timed run, got 0
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

    import schedules
    if name in schedules.WORKLOADS:
        return False
    return name.endswith(".tl") or os.sep in name or os.path.isfile(name)


def program_from_file(path: str, size_text: str | None, preset: str | None) -> tuple:
    """The workload and sizes of a DSL file given as WORKLOAD: every size comes from --size (a file has no
    presets); a program that is a built-in workload's (the same text up to comments and spacing) is that
    workload, with its numpy baselines and hand schedule. A CLIError names a missing file, a missing size or
    --preset; a DSLError points into the file.

    Example::

        tensorlang tune my_gelu_dense.tl --size M=512,N=512,K=512 --trials 200
    """
    import tensorlang as tl
    from schedules.program import program_workload
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
    import schedules
    for w in schedules.WORKLOADS.values():
        if tl.op(w.source).key == op.key:
            w.check_sizes(sizes)
            return w, dict(sizes)
    try:
        tl.schedule(op, **sizes)
    except tl.TensorlangError as e:
        raise CLIError(f"--size: {e}") from None
    return program_workload(text, sizes), dict(sizes)


def is_builtin(w) -> bool:
    """Whether workload `w` is one of the library's (not a user's program from a file).

    >>> import schedules
    >>> is_builtin(schedules.get("matmul"))
    True
    """
    import schedules
    return schedules.WORKLOADS.get(w.name) is w


def workload_and_sizes(args) -> tuple:
    """The workload and its sizes from WORKLOAD, --preset and --size (which overrides preset values); a CLIError
    names an unknown workload, preset or size. WORKLOAD may be a DSL file (see :func:`program_from_file`).

    >>> args = make_parser().parse_args(["run", "matmul", "--preset", "small", "--size", "K=16"])
    >>> w, sizes = workload_and_sizes(args)
    >>> w.name, sizes
    ('matmul', {'M': 64, 'N': 48, 'K': 16})
    """
    import schedules
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


def cmd_ops(args) -> dict:
    """`tensorlang ops`: every workload with its description and size presets (with --spaces, also its search
    space at the default preset); prints them unless --json. Returns {"workloads": [one dict per workload]}.

    >>> workloads = cmd_ops(make_parser().parse_args(["ops", "--json"]))["workloads"]
    >>> workloads[0]["workload"], workloads[0]["presets"]["small"]
    ('matmul', {'M': 64, 'N': 48, 'K': 32})
    """
    import schedules
    rows = []
    for w in schedules.WORKLOADS.values():
        row = {"workload": w.name, "description": w.description, "default_preset": w.default_preset,
               "presets": w.presets}
        if args.spaces and w.space is not None:
            space = w.space(w.sizes())
            row["space"] = {"knobs": {k.name: list(k.values) for k in space.knobs}, "size": space.size,
                            "allowed": space.allowed_size}
            row["space_text"] = space.describe()
        rows.append(row)
    if not args.json:
        for r in rows:
            print(f"{r['workload']:<18} {r['description']}")
            for name, sizes in r["presets"].items():
                mark = "*" if name == r["default_preset"] else " "
                print(f"  {mark} {name:<16} {', '.join(f'{k}={v}' for k, v in sizes.items())}")
            if "space_text" in r:
                print("    " + r["space_text"].replace("\n", "\n    ") + "  (at the default preset)")
        print("\n(* default preset)  run one: tensorlang run conv2d --preset resnet18_3x3"
              + ("" if args.spaces else "; search spaces: tensorlang ops --spaces"))
    for r in rows:
        r.pop("space_text", None)
    return {"workloads": rows}


def cmd_run(args) -> dict:
    """`tensorlang run`: build the workload with the default schedule, run it on random inputs (--seed), check the
    result against the numpy reference (a built-in workload's own, or numpy's evaluation of a user's program:
    :func:`tensorlang.reference`) at the tolerance of its dtype and reduction length, and time at least --repeat
    runs and --min-time seconds. Returns the sizes, compile time, median time, GFLOPS, error and tolerance; a
    result that does not match raises CLIError.

    >>> args = make_parser().parse_args(["run", "matmul", "--size", "M=4,N=4,K=4", "--repeat", "1", "--min-time", "0",
    ...                                  "--json"])
    >>> cmd_run(args)["matches_numpy"]
    True
    """
    import numpy as np

    import tensorlang as tl

    check_timing_flags(args)
    w, sizes = workload_and_sizes(args)
    op = tl.op(w.source)
    t0 = time.perf_counter()
    kernel = tl.build(op, **sizes)
    compile_s = time.perf_counter() - t0
    inputs = w.make_inputs(sizes, np.random.default_rng(args.seed))
    out = kernel(*inputs)
    times = []
    deadline = time.perf_counter() + args.min_time
    while len(times) < args.repeat or time.perf_counter() < deadline:
        t = time.perf_counter()
        kernel(*inputs)
        times.append(time.perf_counter() - t)
    median = float(np.median(times))
    check = w.check(out, w.reference(*inputs, **sizes), sizes)
    gflops = w.flops(sizes) / median / 1e9
    result = {"workload": w.name, "sizes": sizes, "schedule": kernel.schedule_source, "compile_s": compile_s,
              "median_s": median, "gflops": gflops, "runs": len(times), "max_rel_error": check.error,
              "tolerance": check.tolerance, "matches_numpy": check.ok}
    if not args.json:
        print(f"{w.name} ({', '.join(f'{k}={v}' for k, v in sizes.items())})")
        print(f"  compiled in {compile_s * 1000:.0f} ms ({SCHEDULE_SOURCES[kernel.schedule_source]}, "
              f"{kernel.target.cpu})")
        print(f"  median of {len(times)} runs (public calls, outputs allocated): {median * 1000:.3f} ms, "
              f"{gflops:.2f} GFLOPS")
        print(f"  {check.describe()}")
    if not check.ok:
        raise CLIError(f"{w.name}: the result {check.describe()}")
    return result


def cmd_bench(args) -> dict:
    """`tensorlang bench`: time the naive loop nest, the auto-scheduler's pick, the hand schedule, the best tuned
    record of --db (if any), numpy and PyTorch on --threads threads in --rounds interleaved rounds (see
    :func:`tuner.bench.run_bench`) and print the table; a kernel whose result differs from the reference raises
    CLIError. Returns the bench report.

    Example::

        tensorlang bench conv2d --threads 2
        cmd_bench(make_parser().parse_args(["bench", "conv2d", "--threads", "2", "--json"]))["results"]
    """
    from tuner.tune_cli import check_threads_flag

    from .bench import format_table, run_bench
    check_timing_flags(args)
    w, sizes = workload_and_sizes(args)
    check_threads_flag(args.threads)
    threads = args.threads or __import__("tensorlang.threadpool", fromlist=["x"]).num_threads()
    log = (lambda *a: print(*a, file=sys.stderr)) if args.json else (lambda *a: None)
    extra = []
    if w.space is not None:
        from tuner.tune_cli import best_record, record_schedule
        task, rec, path = best_record(w, sizes, threads, args.db)
        if rec is not None:
            extra.append(("tuned", record_schedule(rec, task.op, path)))
    if args.rounds < 1:
        raise CLIError(f"--rounds: must be at least 1, got {args.rounds}")
    report = run_bench(w, sizes, threads, min_runs=args.repeat, min_time=args.min_time, extra=extra, log=log,
                       rounds=args.rounds)
    if not args.json:
        print(format_table(report))
    bad = [f"{r['name']} ({r['mismatch']})" for r in report["results"] if not r["matches_reference"]]
    if bad:
        raise CLIError(f"{w.name}: {', '.join(bad)} do{'es' * (len(bad) == 1)} not match the numpy reference")
    return report


def cmd_show(args) -> dict:
    """`tensorlang show`: the workload's loop IR (default), optimised LLVM IR (--llvm) or assembly (--asm), for the
    schedule `tl.build` chooses (tuned, else hand, else the auto-scheduler's pick; ``--schedule`` asks for one),
    or with --best the best tuned one; printed unless --json (with a first line saying which schedule), and
    returned under "text" with the schedule's source under "schedule".

    >>> args = make_parser().parse_args(["show", "matmul", "--size", "M=2,N=3,K=4", "--schedule", "naive", "--json"])
    >>> print(cmd_show(args)["text"])
    def matmul(A: f32[2, 4], B: f32[4, 3], C: f32[2, 3]):
      for i in 0:2:
        for j in 0:3:
          C[i, j] = 0f
          for k in 0:4:
            C[i, j] = C[i, j] + A[i, k]*B[k, j]
    """
    import tensorlang as tl
    from tensorlang.choice import choose_schedule
    if args.db is not None and not args.best:
        raise CLIError("--db: only with --best (the database whose best record is shown)")
    if args.best and args.schedule:
        raise CLIError("--schedule: not with --best (which shows the best tuned record)")
    w, sizes = workload_and_sizes(args)
    op = tl.op(w.source)
    kind = "llvm" if args.llvm else "asm" if args.asm else "ir"
    try:
        s, source = choose_schedule(op, sizes, schedule=args.schedule)
    except tl.BuildError as e:
        raise CLIError(f"--schedule: {e}") from None
    if args.best:
        source = "tuned"
        from tuner.tune_cli import best_record, record_schedule
        task, rec, path = best_record(w, sizes, None, args.db)
        if rec is None:
            where = f" --preset {args.preset}" if args.preset else f" --size {args.size}" if args.size else ""
            raise CLIError(f"--best: no tuning record for {task.describe()} in {path}; "
                           f"run: tensorlang tune {w.name}{where} --trials 100")
        s = record_schedule(rec, op, path)
    text = s.lower() if kind == "ir" else tl.build(s).source(kind)
    if not args.json:
        print(f"# schedule: {source} ({SCHEDULE_SOURCES[source]})")
        print(text)
    return {"workload": w.name, "sizes": sizes, "kind": kind, "schedule": source, "text": text}


SCHEDULE_SOURCES = {"tuned": "the best tuned record of the tuning database", "hand": "the hand schedule",
                    "auto": "the auto-scheduler's zero-trial pick", "naive": "the naive loop nest",
                    "given": "a schedule source plug-in"}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own errors: usage line and the message, exit 2, no traceback
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


def make_parser() -> argparse.ArgumentParser:
    """The argument parser of the `tensorlang` command: one subcommand per entry of COMMANDS, each with its flags
    and their defaults.

    >>> args = make_parser().parse_args(["run", "softmax", "--preset", "small"])
    >>> args.command, args.workload, args.preset, args.repeat, args.min_time
    ('run', 'softmax', 'small', 10, 0.2)
    """
    p = _Parser(prog="tensorlang", description="tensorlang: a tensor compiler with an auto-tuner")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def common(sp, sizes=True):
        sp.add_argument("--json", action="store_true", help="print one JSON object on stdout")
        if sizes:
            sp.add_argument("workload", metavar="WORKLOAD",
                            help="a workload (see `tensorlang ops`) or a DSL file (NAME.tl, every size with --size)")
            sp.add_argument("--preset", help="a size preset of the workload")
            sp.add_argument("--size", help="sizes as NAME=INT,... (override the preset's)")

    o = sub.add_parser("ops", help="list workloads and their size presets")
    common(o, sizes=False)
    o.add_argument("--spaces", action="store_true", help="also show each workload's search space and its size")
    r = sub.add_parser("run", help="compile a workload, run it, check it against numpy and time it")
    common(r)
    r.add_argument("--repeat", type=int, default=10, help="at least this many timed runs (default 10)")
    r.add_argument("--min-time", type=float, default=0.2, help="and at least this many seconds (default 0.2)")
    r.add_argument("--seed", type=seed_value, default=0, help="seed of the random inputs")
    b = sub.add_parser("bench", help="time the naive loop nest, the auto-scheduler's pick, the hand and tuned "
                                     "schedules, numpy and PyTorch in one table, in interleaved rounds")
    common(b)
    b.add_argument("--threads", type=int, help="threads for tensorlang and OpenBLAS (default: all CPUs)")
    b.add_argument("--repeat", type=int, default=10, help="at least this many timed runs each (default 10)")
    b.add_argument("--min-time", type=float, default=0.3, help="and at least this many seconds each")
    b.add_argument("--rounds", type=int, default=5,
                   help="rounds, each row timed once a round, so that a slow spell hits every row (default 5)")
    b.add_argument("--db", help=f"tuning database whose best record is timed too {DB_DEFAULT}")
    s = sub.add_parser("show", help="print the loop IR (default), LLVM IR or assembly")
    common(s)
    g = s.add_mutually_exclusive_group()
    g.add_argument("--ir", action="store_true", help="the loop IR (default)")
    g.add_argument("--llvm", action="store_true", help="the optimised LLVM IR")
    g.add_argument("--asm", action="store_true", help="the assembly")
    s.add_argument("--best", action="store_true", help="the best tuned schedule")
    s.add_argument("--schedule", choices=("auto", "naive", "hand", "tuned"),
                   help="which schedule (default: the one tl.build chooses: tuned, else hand, else auto)")
    s.add_argument("--db", help="tuning database for --best")
    t = sub.add_parser("tune", help="auto-tune a workload: search schedules, measure them, keep every record")
    common(t)
    t.add_argument("--trials", type=int, required=True, help="tune until the task has this many records")
    t.add_argument("--strategy", default="xgb-genetic",
                   help="random, grid, genetic, bayesian or xgb-genetic (default); or a plug-in: an entry point "
                        "name or package.module:Class")
    t.add_argument("--cost-model", default="xgb",
                   help="xgb (default), forest or none; or a plug-in (entry point name or package.module:Class)")
    t.add_argument("--sampler", help="with --strategy bayesian: an optuna sampler class (default TPESampler)")
    t.add_argument("--seed", type=seed_value, default=0, help="seed of the search (same seed, same proposals)")
    t.add_argument("--db", help=f"tuning database file {DB_DEFAULT}")
    t.add_argument("--jobs", type=int, help="build processes (default: the CPU count)")
    t.add_argument("--timeout", type=float, default=10.0, help="seconds one candidate may run (default 10)")
    t.add_argument("--threads", type=int, help="threads the kernels use (default: all CPUs)")
    t.add_argument("--batch", type=int, default=16,
                   help="candidates proposed and measured per round (at most 8 for the first 64 trials)")
    t.add_argument("--retime-top", type=int, default=5,
                   help="at the end, time the K fastest configs again (3 interleaved rounds) and let that choose "
                        "the best (default 5; 0: no re-timing)")
    t.add_argument("--no-hand-start", action="store_true",
                   help="do not measure a starting config first (the hand schedule's, or in a generated space the "
                        "auto-scheduler's zero-trial pick): search starts from nothing")
    t.add_argument("--space", default="default", choices=("default", "generated", "hand"),
                   help="the search space: generated from the program by the auto-scheduler's rules, the "
                        "workload's hand-written one, or default (the generated one, or the space a built-in "
                        "workload's measurements chose)")
    t.add_argument("--plot", help="write a PNG of the best GFLOPS so far against trials")
    t.add_argument("--no-baselines", action="store_true",
                   help="skip timing the default and hand schedules and numpy at the end")
    from tuner.cluster_cli import add_cluster_flags
    add_cluster_flags(t)
    bst = sub.add_parser("best", help="the best tuned record of a workload and its schedule as Python")
    common(bst)
    bst.add_argument("--threads", type=int, help="the thread count it was tuned for (default: all CPUs)")
    bst.add_argument("--db", help=f"tuning database file {DB_DEFAULT}")
    c = sub.add_parser("compare", help="compare search strategies over seeds, on replay of a dataset or live")
    common(c)
    c.add_argument("--strategies", required=True,
                   help="strategies separated by commas: names, entry points or package.module:Class")
    c.add_argument("--trials", type=int, required=True, help="trials per run")
    c.add_argument("--seeds", type=int, default=5, help="runs per strategy, with seeds 0..K-1 (default 5)")
    c.add_argument("--replay", metavar="DATASET", help="answer from this dataset (CSV) instead of measuring")
    c.add_argument("--cost-model", default="xgb", help="cost model of model-guided strategies (default xgb)")
    c.add_argument("--jobs", type=int, help="processes sharing the runs on replay (default: the CPU count)")
    c.add_argument("--threads", type=int, help="threads the kernels use when live (default: all CPUs)")
    c.add_argument("--timeout", type=float, default=10.0, help="seconds one candidate may run, live (default 10)")
    c.add_argument("--plot", help="write a PNG of the best-so-far curves (median and 25-75%% over seeds)")
    c.add_argument("--space", default="default", choices=("default", "generated", "hand"),
                   help="live: the search space (as for tune)")
    add_cluster_flags(c)
    d = sub.add_parser("dataset", help="export tuning records as a dataset for offline replay, or describe one")
    dsub = d.add_subparsers(dest="dataset_command", metavar="ACTION", parser_class=_Parser)
    dsub.required = True
    de = dsub.add_parser("export", help="write one task's records as a CSV table with a JSON header")
    common(de)
    de.add_argument("-o", "--output", required=True, help="the CSV file to write")
    de.add_argument("--threads", type=int, help="the thread count it was tuned for (default: all CPUs)")
    de.add_argument("--db", help=f"tuning database file {DB_DEFAULT}")
    de.add_argument("--note", help="free text stored in the header (how the records were made)")
    de.add_argument("--space", default="default", choices=("default", "generated", "hand"),
                    help="export the records of this search space (as for tune)")
    di = dsub.add_parser("info", help="describe a dataset file")
    common(di, sizes=False)
    di.add_argument("file", metavar="FILE", help="a dataset CSV")
    cm = sub.add_parser("costmodel", help="evaluate cost models on a dataset")
    csub = cm.add_subparsers(dest="costmodel_command", metavar="ACTION", parser_class=_Parser)
    csub.required = True
    ce = csub.add_parser("eval", help="train each cost model on part of a dataset, rank the rest")
    common(ce, sizes=False)
    ce.add_argument("--dataset", required=True, help="a dataset CSV (see `tensorlang dataset export`)")
    ce.add_argument("--models", help="cost models separated by commas (default: every registered one)")
    ce.add_argument("--train-fraction", type=float, default=0.5, help="share of configs to train on (default 0.5)")
    ce.add_argument("--splits", type=int, default=5, help="random train/test splits to average (default 5)")
    ce.add_argument("--seed", type=seed_value, default=0, help="seed of the splits and the models")
    ex = sub.add_parser("export", help="write a kernel ahead of time: library, object, C, LLVM IR or assembly, "
                                       "with a header and an example C program",
                        description="Schedule: the one tl.build chooses (the best tuned record, else the "
                                    "workload's hand schedule, else the auto-scheduler's pick); --best or --schedule "
                                    "FILE.json choose another.")
    common(ex)
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
    from tuner.model_cli import add_parsers  # compile, bench-model, show-model
    add_parsers(sub, common)
    from tuner.model_tune_cli import add_parsers as add_model_tuning  # tasks, tune-model
    add_model_tuning(sub, common)
    return p


def cmd_tune(args) -> dict:
    """`tensorlang tune`: auto-tune the workload at its sizes (see :func:`tuner.tune_cli.cmd_tune`) and return the
    summary of the run.

    Example::

        tensorlang tune conv2d --trials 64
        cmd_tune(make_parser().parse_args(["tune", "matmul", "--preset", "512", "--trials", "64", "--json"]))
    """
    from tuner.tune_cli import cmd_tune as tune
    return tune(args, *workload_and_sizes(args))


def cmd_best(args) -> dict:
    """`tensorlang best`: the best tuned record of the workload at its sizes in the tuning database, and its
    schedule as Python (see :func:`tuner.tune_cli.cmd_best`).

    Example::

        tensorlang best conv2d
        cmd_best(make_parser().parse_args(["best", "matmul", "--preset", "512", "--json"]))
    """
    from tuner.tune_cli import cmd_best as best
    return best(args, *workload_and_sizes(args))


def cmd_export(args) -> dict:
    """`tensorlang export`: write the workload's kernel ahead of time, with a header and an example program (see
    :func:`tensorlang.export.cmd_export`); returns what it wrote.

    Example::

        tensorlang export matmul --preset 512 --format so -o out/
        cmd_export(make_parser().parse_args(["export", "matmul", "--format", "c", "-o", "out", "--json"]))
    """
    from tuner.export_cli import cmd_export as export
    return export(args)


def cmd_compare(args) -> dict:
    """`tensorlang compare`: run search strategies side by side over several seeds, live or on replay of a dataset
    (see :func:`tuner.research_cli.cmd_compare`).

    Example::

        tensorlang compare matmul --preset 512 --strategies random,xgb-genetic --trials 64 \\
            --replay datasets/matmul_512.csv
    """
    from tuner.research_cli import cmd_compare as compare
    return compare(args, *workload_and_sizes(args))


def cmd_dataset(args) -> dict:
    """`tensorlang dataset export|info`: write a task's tuning records as a dataset CSV, or describe one (see
    :func:`tuner.research_cli.cmd_dataset`).

    Example::

        tensorlang dataset export matmul --preset 512 -o matmul_512.csv
        cmd_dataset(make_parser().parse_args(["dataset", "info", "datasets/matmul_512.csv", "--json"]))
    """
    from tuner.research_cli import cmd_dataset as dataset
    return dataset(args)


def cmd_costmodel(args) -> dict:
    """`tensorlang costmodel eval`: train each cost model on part of a dataset and rank the held-out configs (see
    :func:`tuner.research_cli.cmd_costmodel`).

    Example::

        tensorlang costmodel eval --dataset datasets/matmul_512.csv --models xgb,forest
    """
    from tuner.research_cli import cmd_costmodel as costmodel
    return costmodel(args)


COMMANDS = {"ops": cmd_ops, "run": cmd_run, "bench": cmd_bench, "show": cmd_show, "tune": cmd_tune,
            "best": cmd_best, "compare": cmd_compare, "dataset": cmd_dataset, "costmodel": cmd_costmodel}
COMMANDS["export"] = cmd_export


def _model_commands():
    from tuner.model_cli import COMMANDS as model_commands
    from tuner.model_tune_cli import COMMANDS as model_tuning_commands
    return {**model_commands, **model_tuning_commands}


COMMANDS.update(_model_commands())


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
        result = COMMANDS[args.command](args)
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
