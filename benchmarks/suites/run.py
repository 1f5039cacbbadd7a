"""Run the suites of benchmarks/suites/ (issue 57) under one timing contract:

    python benchmarks/suites/run.py [--trials 200] [--suites polybench,ansor,halide,membound,random]
                                    [--programs 'gemm,C2D-*,halide/blur'] [--threads 2] [--quick]
                                    [--random-count 300] [--random-trials 64] [--out DIR] [--db PATH]

For each program: its DSL text is written to a file and tuned as a user tunes it (``tensorlang tune FILE --size ...
--trials N --db DB``, in a process of its own); the zero-trial pick (``tl.build(op, schedule="auto")``), the tuned
best (``tl.build(op, db=DB, schedule="tuned")``), the library formulations (numpy, scipy, PyTorch, each in a worker
process with the same thread count) and, for Halide's apps, Halide's pipelines under each of its CPU
auto-schedulers (``HL_NUM_THREADS`` set) run once, are timed in alternating rounds (medians over the rounds' runs,
with their spread), and are checked against the program's numpy reference (float64 where that is the oracle) at
the tolerance of the output dtype and the reduction length, where a NaN never passes. A row that does not match is
reported as wrong and no ratio uses it.

The report, per program and as distributions per suite: pick / tuned, tuned / the best library row, tuned and pick
/ Halide's best auto-scheduler, and for the memory-bound kernels their bandwidth as a share of the triad's (the best
of the triad's rows in the same run). A kernel whose one call takes longer than ``--slow`` seconds is timed by
that call alone (and marked so). ``--quick`` runs each program at its small sizes with a few trials: a smoke test
of the harness, not a measurement. Tuning records go to ``--db`` (a rerun resumes them); the results to
``DIR/suites.json`` (written after each program) and ``DIR/suites.md``. Run it on a quiet machine: it times
kernels.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import platform
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # benchmarks/, where the package `suites` is


import suites  # noqa: E402
import tensorlang as tl  # noqa: E402
from suites import common, halide_apps, halide_worker  # noqa: E402
from tensorlang.tuner import bench  # noqa: E402
from tensorlang.tuner.measure.worker import WorkerCrash, WorkerTimeout  # noqa: E402

#: The issue's bars, each a ratio of the report: the level a program should reach, and the share of programs that
#: should reach it (with the floor none should fall below), or the geometric mean it should reach.
BARS = {
    "tuned_vs_library": {"level": 1.0, "share": 0.9, "floor": 0.7},
    "pick_vs_tuned": {"level": 0.5, "share": 0.9, "floor": 0.25},
    "pick_vs_halide": {"level": 1.0, "share": 1.0},
    "tuned_vs_halide": {"geomean": 1.5},
    "tuned_vs_halide_hand": {"level": 1.0, "share": 1.0},
    "share_of_triad": {"level": 0.8, "share": 1.0},
}
RATIOS = ("pick_vs_tuned", "tuned_vs_library", "tuned_vs_halide", "pick_vs_halide", "tuned_vs_halide_hand",
          "share_of_triad")


# ------------------------------------------------------------------------------------------------ rows


# ------------------------------------------------------------------------------------------------ one program


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def run_program(p, args, work: str, ceiling: dict) -> dict:
    """Build, tune, time and check one program (see the module docstring): its record for the report, with its
    DSL file written to the folder ``work``."""
    sizes = p.small if args.quick else p.sizes
    kind, amount = p.work(sizes)
    rec = {"suite": p.suite, "name": p.name, "what": p.what, "origin": p.origin, "notes": p.notes, "sizes": sizes,
           "work": {kind: amount}, "rows": {}, "errors": {}, "ratios": {}}
    file = os.path.join(work, f"{_safe(p.suite)}-{_safe(p.name)}.tl")
    with open(file, "w") as f:
        f.write(p.source)
    inputs = common.make_inputs(p, sizes, args.seed)
    rows = contenders(p, args, sizes, inputs, file, rec)
    outputs, timed = measure(rows, args, rec)
    # the float64 reference after the timings: its BLAS threads spin for a while after a call
    expected = p.reference(*inputs, **sizes)
    for name, t in timed.items():
        check = common.check(p, sizes, outputs[name], expected)
        row = {**t, "matches": check.ok, "max_rel_error": check.error, "tolerance": check.tolerance}
        if not check.ok:
            row["mismatch"] = check.why
        if amount:
            row["gbps" if kind == "bytes" else "gflops"] = amount / t["median_s"] / 1e9
        rec["rows"][name] = row
    rec["ratios"] = ratios(rec, ceiling)
    return rec


def contenders(p, args, sizes: dict, inputs: list, file: str, rec: dict) -> list:
    """The rows of one program: the zero-trial pick, the tuned best (tuning ``file`` first), its library
    formulations and, for a Halide app, Halide's pipelines; what cannot run goes to ``rec["errors"]``."""
    threads = args.threads
    rows = []
    try:
        rows.append(bench.KernelRow("pick", tl.build(p.op, schedule="auto", **sizes), inputs))
    except tl.TensorlangError as e:
        rec["errors"]["pick"] = str(e)
    trials = args.random_trials if p.suite == "random" else args.trials
    if trials > 0:
        t0 = time.perf_counter()
        try:
            summary = common.tune(file, sizes, trials, args.db, threads, args.seed, args.jobs, args.timeout)
            rec["tuning"] = {"trials": summary.get("trials"), "wall_s": time.perf_counter() - t0,
                             "errors": summary.get("errors_this_run"), "space": summary.get("space")}
            rows.append(bench.KernelRow("tuned", tl.build(p.op, db=args.db, schedule="tuned", **sizes), inputs))
        except (common.TuneFailed, tl.TensorlangError) as e:
            rec["errors"]["tuned"] = str(e)
    for name, b in p.baselines.items():
        if b.lib == "torch" and not bench.torch_available():
            rec["errors"][name] = "PyTorch is not installed"
            continue
        init = {"suite": p.suite, "program": p.name, "baseline": name, "sizes": sizes, "threads": threads}
        row = bench.WorkerRow(name, "suites.library:handler", init, inputs,
                              bench.library_env(threads, bench.avx512_coretype()),
                              processes=bench.library_processes())
        row.extra["allocates"] = b.allocates
        rows.append(row)
    if p.halide is not None and args.halide:
        if not halide_worker.available():
            rec["errors"]["halide"] = "Halide's Python package is not installed (the suites extra)"
        else:
            hand = [halide_worker.HAND] if p.name in halide_apps.HAND_SCHEDULED else []
            for sched in list(args.halide_schedulers) + hand:
                rows.append(bench.WorkerRow(f"halide-{sched}", "suites.halide_worker:handler",
                                            {"program": p.name, "sizes": sizes, "scheduler": sched,
                                             "threads": threads},
                                            inputs, {"HL_NUM_THREADS": str(threads)},
                                            first_timeout=args.halide_timeout))
    return rows


def measure(rows: list, args, rec: dict) -> tuple[dict, dict]:
    """Run each row once (its outputs), then time them in alternating rounds; a row whose one call took longer
    than ``--slow`` is timed by that call alone. Returns (outputs by row, timings by row); a row whose worker
    failed goes to ``rec["errors"]``. Every row's process is stopped at the end."""
    outputs, ran, slow = {}, [], []
    failures = (WorkerCrash, WorkerTimeout)
    try:
        for r in rows:
            try:
                outputs[r.name] = r.first()
            except failures as e:
                rec["errors"][r.name] = f"{type(e).__name__}: {e}".strip()
                continue
            (slow if getattr(r, "first_s", 0.0) > args.slow else ran).append(r)
        timed = bench.time_interleaved(ran, args.rounds, args.min_runs, args.min_time) if ran else []
    finally:
        for r in rows:
            r.close()
    out = {r.name: {"median_s": t["median_s"], "spread": t["spread"], "runs": t["runs"],
                    "busy_rounds": t["busy_rounds"], "one_call": False, **r.extra} for r, t in zip(ran, timed)}
    out.update({r.name: {"median_s": r.first_s, "spread": [0.0, 0.0], "runs": 1, "busy_rounds": None,
                         "one_call": True, **r.extra} for r in slow})
    return outputs, out


def _best(rows: dict, prefix_or_names) -> tuple[str | None, float | None]:
    """The fastest matching row among ``prefix_or_names`` (a name prefix, or names): (name, seconds)."""
    found = [(r["median_s"], n) for n, r in rows.items() if r["matches"]
             and (n.startswith(prefix_or_names) if isinstance(prefix_or_names, str) else n in prefix_or_names)]
    if not found:
        return None, None
    t, n = min(found)
    return n, t


def ratios(rec: dict, ceiling: dict) -> dict:
    """The speed ratios of one program's record (above 1: the first named is faster), from matching rows only:
    pick / tuned, tuned / the best library row, tuned and pick / Halide's best auto-scheduler, tuned / the app's own
    Halide schedule (the ``halide-hand`` row), and (memory-bound programs, once the triad has run) the tuned
    bandwidth's share of the ceiling.

    >>> rows = {"pick": {"median_s": 2.0, "matches": True}, "tuned": {"median_s": 1.0, "matches": True},
    ...         "numpy": {"median_s": 1.5, "matches": True}, "torch": {"median_s": 0.5, "matches": False}}
    >>> ratios({"rows": rows, "work": {"flops": 1.0}}, {})
    {'pick_vs_tuned': 0.5, 'tuned_vs_library': 1.5, 'library': 'numpy'}
    >>> rows["torch"].update(matches=True, allocates=False)  # a preallocated output: outside the contract
    >>> ratios({"rows": rows, "work": {"flops": 1.0}}, {})["library"]
    'numpy'
    >>> rows["halide-hand"] = {"median_s": 0.5, "matches": True}
    >>> r = ratios({"rows": rows, "work": {"flops": 1.0}}, {})
    >>> r["tuned_vs_halide_hand"], "halide" in r  # the hand schedule is no auto-scheduler
    (0.5, False)

    """
    rows = rec["rows"]
    t = {n: r["median_s"] for n, r in rows.items() if r["matches"]}
    out: dict = {}
    if "pick" in t and "tuned" in t:
        out["pick_vs_tuned"] = t["tuned"] / t["pick"]
    lib, t_lib = _best(rows, [n for n, r in rows.items() if n not in ("pick", "tuned") and not n.startswith("halide-")
                              and r.get("allocates", True)])
    if lib is not None and "tuned" in t:
        out["tuned_vs_library"] = t_lib / t["tuned"]
        out["library"] = lib
    hal, t_hal = _best(rows, [n for n in rows if n.startswith("halide-") and n != f"halide-{halide_worker.HAND}"])
    if hal is not None:
        out["halide"] = hal[len("halide-"):]
        if "tuned" in t:
            out["tuned_vs_halide"] = t_hal / t["tuned"]
        if "pick" in t:
            out["pick_vs_halide"] = t_hal / t["pick"]
    if f"halide-{halide_worker.HAND}" in t and "tuned" in t:
        out["tuned_vs_halide_hand"] = t[f"halide-{halide_worker.HAND}"] / t["tuned"]
    nbytes = rec["work"].get("bytes")
    if nbytes and ceiling.get("gbps") and "tuned" in t:
        out["share_of_triad"] = nbytes / t["tuned"] / 1e9 / ceiling["gbps"]
    return out


def triad_ceiling(rec: dict) -> dict:
    """The bandwidth ceiling from the triad's record: its fastest matching row's GB/s.

    >>> triad_ceiling({"rows": {"tuned": {"gbps": 30.0, "matches": True}, "torch-out": {"gbps": 40.0, "matches": True},
    ...                         "numpy": {"gbps": 50.0, "matches": False}}})
    {'gbps': 40.0, 'row': 'torch-out'}
    """
    found = [(r["gbps"], n) for n, r in rec["rows"].items() if r["matches"] and r.get("gbps")]
    if not found:
        return {}
    gbps, row = max(found)
    return {"gbps": gbps, "row": row}


# ------------------------------------------------------------------------------------------------ the report


def distribution(values: list[tuple[str, float]], bar: dict | None = None) -> dict:
    """The distribution of one ratio over programs, ``values`` as (program, ratio): count, geometric mean, median,
    least and most (with their programs) and, against the issue's ``bar``, the share of programs at its level and
    whether the bar is met.

    >>> d = distribution([("a", 0.5), ("b", 2.0), ("c", 1.0)], {"level": 1.0, "share": 0.9, "floor": 0.7})
    >>> d["geomean"], d["median"], d["least"], d["at_level"], d["meets"]
    (1.0, 1.0, ['a', 0.5], 0.6666666666666666, False)
    """
    if not values:
        return {"n": 0}
    xs = [v for _, v in values]
    least, most = min(values, key=lambda x: x[1]), max(values, key=lambda x: x[1])
    out = {"n": len(xs), "geomean": math.exp(statistics.fmean(math.log(x) for x in xs)),
           "median": statistics.median(xs), "least": list(least), "most": list(most)}
    if bar:
        meets = True
        if "level" in bar:
            out["at_level"] = sum(x >= bar["level"] for x in xs) / len(xs)
            meets &= out["at_level"] >= bar["share"]
        if "floor" in bar:
            out["below_floor"] = [n for n, x in values if x < bar["floor"]]
            meets &= not out["below_floor"]
        if "geomean" in bar:
            meets &= out["geomean"] >= bar["geomean"]
        out["bar"], out["meets"] = bar, meets
    return out


def summarize(records: list[dict]) -> dict:
    """Per suite and over every suite but the random one (the issue's bars are over the suites; the random programs
    have their own), the distribution of each ratio (:func:`distribution`).

    >>> s = summarize([{"suite": "x", "name": "a", "ratios": {"pick_vs_tuned": 0.8}}])
    >>> s["x"]["pick_vs_tuned"]["n"], s["suites"]["pick_vs_tuned"]["n"]
    (1, 1)
    """
    groups: dict = {}
    for rec in records:
        for group in (rec["suite"], "suites" if rec["suite"] != "random" else None):
            if group is None:
                continue
            for key in RATIOS:
                if key in rec.get("ratios", {}):
                    groups.setdefault(group, {}).setdefault(key, []).append((rec["name"], rec["ratios"][key]))
    return {g: {k: distribution(v, BARS.get(k)) for k, v in per.items()} for g, per in groups.items()}


def _ms(row: dict | None) -> str:
    if not row:
        return ""
    return (f"{row['median_s'] * 1e3:.3f}" + (" (one call)" if row.get("one_call") else "")
            + ("" if row["matches"] else " (wrong)"))


def _x(v) -> str:
    return "" if v is None else f"{v:.2f}x"


def markdown(report: dict) -> str:
    """The report as markdown: per suite a table of programs (times in ms, ratios, wrong rows and errors), the
    distributions against the issue's bars, then what the DSL cannot write."""
    lines = [f"# Suites: {len(report['programs'])} programs, {report['threads']} threads, {report['trials']} trials "
             f"({report['random_trials']} for random programs){' (--quick: small sizes)' if report['quick'] else ''}",
             "", f"Timing contract: {report['contract']}. Host: {report['host']}.", ""]
    if report.get("ceiling"):
        lines += [f"Bandwidth ceiling (the triad's best row, `{report['ceiling']['row']}`, a preallocated output "
                  f"counting as STREAM times it): {report['ceiling']['gbps']:.1f} GB/s.", ""]
    by_suite: dict = {}
    for rec in report["programs"]:
        by_suite.setdefault(rec["suite"], []).append(rec)
    for suite, recs in by_suite.items():
        lines += [f"## {suite}", "", "| program | pick ms | tuned ms | best library | best Halide | pick / tuned | "
                  "tuned / library | tuned / Halide | pick / Halide | tuned / Halide hand | share of triad | notes |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for rec in recs:
            rows, r = rec.get("rows", {}), rec.get("ratios", {})
            lib = r.get("library")
            hal = r.get("halide")
            notes = [f"{n} wrong: {row['mismatch']}" for n, row in rows.items() if not row["matches"]]
            notes += [f"{n}: {e.splitlines()[0][:160]}" for n, e in rec.get("errors", {}).items()]
            lib_cell = "" if lib is None else f"{lib} {_ms(rows[lib])}"
            hal_cell = "" if hal is None else f"{hal} {_ms(rows['halide-' + hal])}"
            share = "" if r.get("share_of_triad") is None else f"{r['share_of_triad']:.2f}"
            cells = [rec["name"], _ms(rows.get("pick")), _ms(rows.get("tuned")), lib_cell, hal_cell,
                     _x(r.get("pick_vs_tuned")), _x(r.get("tuned_vs_library")), _x(r.get("tuned_vs_halide")),
                     _x(r.get("pick_vs_halide")), _x(r.get("tuned_vs_halide_hand")), share,
                     "; ".join(notes).replace("|", "/")]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [""] + _distribution_lines(report["summary"].get(suite, {})) + [""]
    if report["summary"].get("suites"):
        lines += ["## All suites but the random programs", ""] + _distribution_lines(report["summary"]["suites"]) + [""]
    if report.get("random_skipped"):
        lines += ["Random programs skipped: " + ", ".join(f"{n} {why}" for why, n in report["random_skipped"].items()),
                  ""]
    lines += ["## Not expressible in the DSL yet", ""]
    for suite, items in report["not_written"].items():
        for name, why in items.items():
            lines.append(f"- {suite} / {name}: {why}")
    return "\n".join(lines) + "\n"


def _distribution_lines(summary: dict) -> list[str]:
    out = []
    for key in RATIOS:
        d = summary.get(key)
        if not d or not d.get("n"):
            continue
        text = (f"- {key.replace('_', ' ')}: {d['n']} programs, geomean {d['geomean']:.2f}, median {d['median']:.2f}, "
                f"least {d['least'][1]:.2f} ({d['least'][0]}), most {d['most'][1]:.2f} ({d['most'][0]})")
        if "bar" in d:
            bar = d["bar"]
            parts = []
            if "level" in bar:
                parts.append(f"{d['at_level'] * 100:.0f}% at >= {bar['level']} (bar: {bar['share'] * 100:.0f}%)")
            if "floor" in bar:
                parts.append(f"{len(d['below_floor'])} below {bar['floor']}")
            if "geomean" in bar:
                parts.append(f"geomean bar {bar['geomean']}")
            text += f"; {', '.join(parts)}: {'meets the bar' if d['meets'] else 'misses the bar'}"
        out.append(text)
    return out


# ------------------------------------------------------------------------------------------------ main


def host() -> str:
    """This machine in a few words: the CPU's model name where Linux says it, the architecture, the CPU count.

    >>> "CPUs" in host()
    True
    """
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs"


def select(args) -> tuple[list, dict]:
    """The programs the flags ask for, the triad first (its speed is the others' ceiling), and the random
    programs' skip reasons."""
    chosen, skipped = [], {}
    patterns = [x.strip() for x in args.programs.split(",")] if args.programs else None

    def wanted(p) -> bool:
        return patterns is None or any(fnmatch.fnmatch(p.name, pat) or fnmatch.fnmatch(p.key, pat)
                                       for pat in patterns)
    for suite in args.suites:
        if suite == "random":
            names = (f"r{args.random_seed}-{k}" for k in range(50 * args.random_count))
            if patterns is not None and not any(fnmatch.fnmatch(n, pat) or fnmatch.fnmatch(f"random/{n}", pat)
                                                for n in names for pat in patterns):
                continue  # no random program could match --programs: draw none
            programs, why = suites.module("random").draw(args.random_count, seed=args.random_seed)
            skipped = dict(why)
        else:
            programs = suites.programs(suite)
        chosen += [p for p in programs if wanted(p)]
    triad = suites.module("membound").TRIAD
    chosen.sort(key=lambda p: not (p.suite == "membound" and p.name == triad))
    if any(p.suite == "membound" for p in chosen) and not any(p.name == triad and p.suite == "membound"
                                                             for p in chosen):
        chosen.insert(0, suites.find("membound", triad))  # the ceiling of the memory-bound kernels
    return chosen, skipped


def _suite_list(text: str) -> list[str]:
    """``--suites``: names of suites, comma-separated (argparse names the flag otherwise).

    >>> _suite_list("polybench,halide")
    ['polybench', 'halide']
    """
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in suites.MODULES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"{(unknown or [text])[0]!r}: the suites are {', '.join(suites.MODULES)}")
    return names


def _scheduler_list(text: str) -> list[str]:
    """``--halide-schedulers``: Halide's CPU auto-schedulers, comma-separated.

    >>> _scheduler_list("Li2018")
    ['Li2018']
    """
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in halide_worker.SCHEDULERS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"{(unknown or [text])[0]!r}: Halide's CPU auto-schedulers are "
                                         f"{', '.join(halide_worker.SCHEDULERS)}")
    return names


def parse_args(argv=None):
    """The command line (see the module docstring); ``--quick`` lowers every default that makes a run long."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, help="tuning trials per program (default 200; 2 with --quick)")
    p.add_argument("--suites", type=_suite_list, default=list(suites.MODULES),
                   help=f"comma-separated suites (default all: {','.join(suites.MODULES)})")
    p.add_argument("--programs", help="comma-separated names or patterns (C2D-*, polybench/gemm)")
    p.add_argument("--threads", type=int, default=2, help="threads of every contender (default 2)")
    p.add_argument("--quick", action="store_true", help="small sizes, few trials, short timings: a smoke test")
    p.add_argument("--random-count", type=int, help="random programs to draw (default 300; 3 with --quick)")
    p.add_argument("--random-seed", type=int, default=0, help="seed of the random programs (default 0)")
    p.add_argument("--random-trials", type=int, help="tuning trials per random program (default 64; 2 with --quick)")
    p.add_argument("--no-halide", dest="halide", action="store_false", help="leave out Halide's rows")
    p.add_argument("--halide-schedulers", type=_scheduler_list, default=list(halide_worker.SCHEDULERS),
                   help="Halide's auto-schedulers to run (default all three CPU ones)")
    p.add_argument("--halide-timeout", type=float, default=1800.0,
                   help="seconds a Halide auto-scheduler and its compilation may take (default 1800)")
    p.add_argument("--rounds", type=int, help="interleaved timing rounds (default 5; 2 with --quick)")
    p.add_argument("--min-runs", type=int, help="timed runs of each row in all (default 10; 2 with --quick)")
    p.add_argument("--min-time", type=float, help="seconds of each row in all (default 1.0; 0.01 with --quick)")
    p.add_argument("--slow", type=float, default=20.0,
                   help="a kernel whose one call takes longer (seconds) is timed by that call alone (default 20)")
    p.add_argument("--seed", type=int, default=0, help="seed of the inputs and of the tuning (default 0)")
    p.add_argument("--jobs", type=int, help="build processes of the tuning (default: the CPU count)")
    p.add_argument("--timeout", type=float, help="seconds one tuning candidate may run (tune's default)")
    p.add_argument("--out", help="folder of the results (default benchmarks/suites/results, or results-quick)")
    p.add_argument("--db", help="tuning database (default OUT/tuning.db)")
    args = p.parse_args(argv)
    quick = args.quick
    for name, full, small in (("trials", 200, 2), ("random_count", 300, 3), ("random_trials", 64, 2),
                              ("rounds", 5, 2), ("min_runs", 10, 2), ("min_time", 1.0, 0.01)):
        if getattr(args, name) is None:
            setattr(args, name, small if quick else full)
    for name in ("trials", "random_trials"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be 0 or more")
    for name in ("threads", "rounds", "min_runs", "random_count"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    args.out = args.out or os.path.join(HERE, "results-quick" if quick else "results")
    args.db = args.db or os.path.join(args.out, "tuning.db")
    return args


def main(argv=None) -> dict:
    """Run the suites the command line asks for and write the report; returns it."""
    args = parse_args(argv)
    os.environ["TENSORLANG_NUM_THREADS"] = str(args.threads)
    os.makedirs(args.out, exist_ok=True)
    work = os.path.join(args.out, "programs")
    os.makedirs(work, exist_ok=True)
    programs, skipped = select(args)
    if not programs:
        raise SystemExit("no program matches --programs in the suites asked for")
    report = {"threads": args.threads, "trials": args.trials, "random_trials": args.random_trials, "quick": args.quick,
              "contract": bench.contract(args.threads, args.rounds),
              "host": host(),
              "programs": [], "random_skipped": skipped, "not_written": suites.not_written(), "ceiling": {}}
    json_path, md_path = os.path.join(args.out, "suites.json"), os.path.join(args.out, "suites.md")
    for i, p in enumerate(programs):
        print(f"[{i + 1}/{len(programs)}] {p.key}: {p.what}", flush=True)
        rec = run_program(p, args, work, report["ceiling"])
        if p.suite == "membound" and p.name == suites.module("membound").TRIAD:
            report["ceiling"] = triad_ceiling(rec)
            rec["ratios"] = ratios(rec, report["ceiling"])
        report["programs"].append(rec)
        r = rec["ratios"]
        print("    " + ", ".join(f"{k} {v:.2f}" for k, v in r.items() if isinstance(v, float))
              + "".join(f"; {n}: {e.splitlines()[0][:120]}" for n, e in rec["errors"].items())
              + "".join(f"; {n} wrong" for n, row in rec["rows"].items() if not row["matches"]), flush=True)
        report["summary"] = summarize(report["programs"])
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1, default=str)
    with open(md_path, "w") as f:
        f.write(markdown(report))
    print(f"wrote {json_path} and {md_path}")
    return report


if __name__ == "__main__":
    main()
