"""The command line (as a user runs it) and the tutorials (run as scripts)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def tensorlang(*args):
    return subprocess.run([sys.executable, "-m", "tensorlang.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def test_ops_lists_every_workload_with_presets():
    from tensorlang import schedules
    r = tensorlang("ops", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    names = [w["workload"] for w in data["workloads"]]
    assert names == list(schedules.WORKLOADS)
    conv = next(w for w in data["workloads"] if w["workload"] == "conv2d")
    assert conv["presets"][conv["default_preset"]] == dict(N=1, C=64, H=56, W=56, F=64, R=3, S=3, stride=1,
                                                          pad=1, dil=1)
    text = tensorlang("ops")
    assert "conv2d" in text.stdout and "resnet18_3x3" in text.stdout


def test_run_checks_against_numpy_and_reports_json():
    r = tensorlang("run", "matmul", "--size", "M=17,N=5,K=3", "--json", "--repeat", "2", "--min-time", "0")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["matches_numpy"] is True and data["sizes"] == {"M": 17, "N": 5, "K": 3}
    assert data["median_s"] > 0 and data["gflops"] > 0


def test_show_prints_loop_ir_and_llvm():
    r = tensorlang("show", "softmax", "--size", "N=2,D=3", "--schedule", "naive")
    assert r.returncode == 0 and "mx[n] = max(mx[n], X[n, d])" in r.stdout
    assert r.stdout.splitlines()[0] == "# schedule: naive (the naive loop nest)"
    r = tensorlang("show", "softmax", "--size", "N=2,D=3")  # what tl.build compiles: softmax's hand schedule
    assert r.returncode == 0 and r.stdout.startswith("# schedule: hand (the hand schedule)")
    assert "# parallel" in r.stdout
    r = tensorlang("show", "softmax", "--size", "N=2,D=3", "--schedule", "tuned")
    assert r.returncode == 2 and "--schedule: build(schedule='tuned'): softmax has no tuned schedule" in r.stderr
    r = tensorlang("show", "softmax", "--size", "N=2,D=3", "--llvm")
    assert r.returncode == 0 and "define" in r.stdout


@pytest.mark.parametrize("args,message", [
    (("run", "nosuch"), "unknown workload 'nosuch'; workloads: matmul"),
    (("run", "matmul", "--preset", "huge"), "--preset: matmul has no preset 'huge'; presets: 1024"),
    (("run", "matmul", "--size", "M"), "--size: expected NAME=INT pairs"),
    (("run", "matmul", "--size", "M=big"), "--size: M='big' is not an integer"),
    (("run", "matmul", "--size", "Q=3"), "--size: matmul has no size Q; sizes: M, N, K"),
    (("run", "matmul", "--size", "M=-2"), "size M=-2 must be >= 1"),
    (("run", "matmul", "--size", "M=8388608,N=8388608,K=1"),
     "tensorlang run: error: out of memory: matmul: cannot allocate the output C: float32[8388608, 8388608]"),
    (("run", "matmul", "--size", "M=281474976710656"), "size M=281474976710656 is too large"),
    (("run", "matmul", "--preset", "small", "--repeat", "0"), "--repeat: must be >= 1 timed run, got 0"),
    (("bench", "matmul", "--preset", "small", "--min-time", "-1"), "--min-time: must be a finite number of seconds"),
    (("run", "matmul", "--preset", "small", "--min-time", "nan"), "--min-time: must be a finite number of seconds"),
    (("show", "matmul", "--ir", "--asm"), "not allowed with argument"),
    (("frobnicate",), "invalid choice: 'frobnicate'"),
    (("run", "matmul", "--size", "M=1,M=2"), "tensorlang run: error: --size: M is given twice ('M=1,M=2')"),
    (("run", "matmul", "--size", ""), "tensorlang run: error: --size: no sizes given"),
    (("run", "matmul", "--seed", "4294967296"), "argument --seed: must be at most 2147483647 (2**31 - 1)"),
    (("bench", "matmul", "--threads", "100000"), "tensorlang bench: error: --threads: must be at most 1024 (the "
                                                 "most threads the thread pool runs), got 100000"),
    (("best", "matmul", "--threads", "0"), "tensorlang best: error: --threads: must be at least 1, got 0"),
    (("compare", "matmul", "--strategies", "random", "--trials", "2", "--threads", "-3"),
     "tensorlang compare: error: --threads: must be at least 1, got -3"),
    (("compare", "matmul", "--strategies", "random", "--trials", "2", "--jobs", "0"),
     "tensorlang compare: error: --jobs: must be at least 1, got 0"),
    (("costmodel", "eval", "--dataset", "datasets/matmul_512.csv", "--seed", "9223372036854775807"),
     "argument --seed: must be at most 2147483647"),
    (("export", "matmul", "--format", "so", "-o", "/tmp/tl-never-written", "--cc", "gcc '"),
     "tensorlang export: error: --cc: C compiler \"gcc '\" is not a command a shell can split"),
    (("dataset", "export", "matmul", "-o", "", "--db", ":memory:"),
     "tensorlang dataset: error: -o: cannot write a dataset to an empty path"),
    (("run", "conv2d", "--size", "stride=0"), "tensorlang run: error: conv2d: size stride=0 must be >= 1"),
    (("run", "maxpool2d", "--size", "KH=0"), "tensorlang run: error: maxpool2d: size KH=0 must be >= 1"),
    (("tune", "conv1d", "--trials", "2", "--size", "dil=0"), "tensorlang tune: error: conv1d: size dil=0 must be >= 1"),
    (("tune", "matmul", "--trials", "2", "--jobs", "100000"),
     "tensorlang tune: error: --jobs: must be at most 256 (each job is a Python process), got 100000"),
    (("show", "matmul", "--preset", "small", "--db", "never.db"), "tensorlang show: error: --db: only with --best"),
    (("export", "matmul", "--format", "c", "-o", "/tmp/tl-never-written", "--threads", "2"),
     "tensorlang export: error: --threads: only with --best"),
    (("dataset", "info", "/dev/zero"), "tensorlang dataset: error: FILE: cannot read dataset /dev/zero: not a regular "
                                       "file"),
])
def test_bad_flags_name_the_flag_without_traceback(args, message):
    r = tensorlang(*args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_input_is_one_line_but_a_bug_keeps_its_traceback(monkeypatch, capsys):
    import tensorlang as tl
    from tensorlang.cli import kernels
    from tensorlang.cli import main as cli

    def bad_input(args):
        raise tl.UsageError("--thing: 3 is not one of [1, 2]")

    def bug(args):
        raise ValueError("an index went wrong inside")  # not a TensorlangError: a bug, not the user's input

    monkeypatch.setattr(kernels, "cmd_run", bad_input)  # what `run` calls (registered when the parser is made)
    assert cli.main(["run", "matmul"]) == 2
    assert capsys.readouterr().err == "tensorlang run: error: --thing: 3 is not one of [1, 2]\n"
    monkeypatch.setattr(kernels, "cmd_run", bug)
    with pytest.raises(ValueError, match="an index went wrong inside"):
        cli.main(["run", "matmul"])
    assert issubclass(tl.UsageError, ValueError) and issubclass(tl.UsageError, tl.TensorlangError)


@pytest.mark.parametrize("path", sorted((ROOT / "tutorials").glob("*.py")), ids=lambda p: p.name)
def test_tutorial_runs(path):
    # tutorials 3 and 6 tune: short runs, small sizes in the tests
    env = dict(os.environ, TENSORLANG_TUTORIAL_TRIALS="12", TENSORLANG_TUTORIAL_SIZE="128")
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr


def test_bench_reports_every_row_in_json():
    r = tensorlang("bench", "softmax", "--size", "N=8,D=40", "--threads", "1", "--repeat", "2", "--min-time", "0",
                   "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["workload"] == "softmax" and data["threads"] == 1 and data["sizes"] == {"N": 8, "D": 40}
    names = [row["name"] for row in data["results"]]
    from tensorlang.tuner.bench import avx512_coretype, torch_available
    # OpenBLAS's AVX-512 kernel only where the CPU has AVX-512 (forced elsewhere it dies of SIGILL)
    assert names == ["naive", "auto", "hand", "numpy"] + (["numpy-avx512"] if avx512_coretype() else []) + \
        (["torch"] if torch_available() else [])
    assert data["rounds"] == 5
    for row in data["results"]:
        assert row["median_s"] > 0 and row["gflops"] > 0 and row["runs"] >= 5  # one burst a round at least
        assert row["max_rel_error"] < 1e-5
        lo, hi = row["spread"]
        assert lo <= 0 <= hi
    assert {row["name"] for row in data["results"] if "version" in row} == {"numpy", "numpy-avx512", "torch"} & \
        set(names)


def test_bench_times_pytorch_where_installed():
    pytest.importorskip("torch")
    r = tensorlang("bench", "conv2d", "--preset", "small", "--threads", "1", "--repeat", "2", "--min-time", "0")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header, torch_row, contract = lines[1], lines[-2], lines[-1]
    assert header.split()[-2:] == ["vs", "torch"] and torch_row.split()[0] == "torch"
    assert torch_row.split()[-1] == "1.00x"
    assert contract == "timed as: public calls with outputs allocated, 1 thread set for every library, 5 " \
                       "alternating rounds, medians"


class _HalfRow:
    """A library row whose outputs are halved (a baseline that computes something else)."""

    def __init__(self, row):
        self.row, self.name, self.extra = row, row.name, row.extra

    def first(self):
        return [o * 0.5 for o in self.row.first()]

    def burst(self, runs, min_time):
        return self.row.burst(runs, min_time)

    def close(self):
        self.row.close()


def test_bench_fails_a_baseline_that_computes_something_else(monkeypatch, capsys):
    from tensorlang.cli.main import main
    from tensorlang.tuner import bench
    real = bench.library_row

    bad = "numpy-avx512" if bench.avx512_coretype() else "numpy"  # the last numpy row this CPU runs

    def half_of_numpy(name, w, sizes, inputs, threads, kind="numpy", coretype=None):
        row = real(name, w, sizes, inputs, threads, kind, coretype)
        return _HalfRow(row) if name == bad else row
    monkeypatch.setattr(bench, "library_row", half_of_numpy)
    argv = ["bench", "softmax", "--size", "N=8,D=40", "--threads", "1", "--repeat", "1", "--min-time", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"softmax: {bad} (output 0: 320 of 320 elements differ" in err and \
        "does not match the numpy reference" in err, err


def test_bench_rejects_bad_thread_count():
    r = tensorlang("bench", "softmax", "--size", "N=8,D=40", "--threads", "0")
    assert r.returncode == 2 and "--threads: must be at least 1, got 0" in r.stderr and "Traceback" not in r.stderr


def test_bench_gives_the_process_its_thread_count_back(monkeypatch):
    from tensorlang import schedules
    from tensorlang.tuner.bench import run_bench
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "1")
    w = schedules.get("softmax")
    report = run_bench(w, {"N": 8, "D": 40}, threads=2, min_runs=1, min_time=0.0, log=lambda *a: None)
    assert report["threads"] == 2 and os.environ["TENSORLANG_NUM_THREADS"] == "1"
    monkeypatch.delenv("TENSORLANG_NUM_THREADS")
    run_bench(w, {"N": 8, "D": 40}, threads=2, min_runs=1, min_time=0.0, log=lambda *a: None)
    assert "TENSORLANG_NUM_THREADS" not in os.environ


def test_bench_computes_the_reference_after_every_timing(monkeypatch):
    """The float64 reference runs on BLAS threads that spin after it returns: bench computes it last, and still
    checks every row against it."""
    import dataclasses

    from tensorlang import schedules
    from tensorlang.tuner import bench
    events = []
    w = schedules.get("softmax")
    reference = w.reference
    w = dataclasses.replace(w, reference=lambda *a, **k: events.append("reference") or reference(*a, **k))
    for cls in (bench.KernelRow, bench.LibraryRow):
        real = cls.burst
        monkeypatch.setattr(cls, "burst", lambda self, *a, real=real: events.append("time") or real(self, *a))
    report = bench.run_bench(w, {"N": 8, "D": 40}, threads=1, min_runs=1, min_time=0.0, log=lambda *a: None,
                             rounds=2)
    assert events.count("time") == 2 * len(report["results"]) and events[-1] == "reference" and \
        events.count("reference") == 1
    assert all(r["max_rel_error"] < 1e-5 for r in report["results"]), report


def test_bench_interleaves_its_rows():
    """Each round times every row once, so that a slow spell of the machine hits every row alike (timed one after
    the other, the rows' ratios would follow the machine's spells instead)."""
    from tensorlang.tuner.bench import time_interleaved
    order = []

    class Row:
        def __init__(self, name):
            self.name = name

        def burst(self, runs, min_time):
            order.append(self.name)
            return [1e-3] * runs
    reports = time_interleaved([Row("a"), Row("b"), Row("c")], rounds=3, min_runs=3, min_time=0)
    assert order == ["a", "b", "c"] * 3 and all(r["runs"] == 3 for r in reports)


@pytest.mark.parametrize("args,message", [
    (("--workloads", "nosuch"), "--workloads: 'nosuch' is not a workload with a hand schedule and a torch_fast"),
    (("--workloads", "layernorm"), "--workloads: 'layernorm' is not a workload with a hand schedule"),
    (("--rounds", "0"), "--rounds: must be at least 1, got 0"),
])
def test_vs_torch_benchmark_refuses_bad_flags(args, message):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vs_torch.py"), *args], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr



@pytest.mark.parametrize("args,message", [
    (("--programs", "blurr"), "--programs: unknown program 'blurr' (known: dense_gelu,"),
    (("--parts", "progams"), "--parts: unknown part 'progams'"),
])
def test_autoschedule_benchmark_refuses_bad_flags_before_measuring(args, message):
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "autoschedule.py"), *args], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr and "FMA peak" not in r.stdout


def test_a_baseline_of_an_unknown_library_is_refused():
    import tensorlang as tl
    from tensorlang import schedules
    from tensorlang.tuner.bench import baseline
    with pytest.raises(tl.UsageError, match="baseline: kind is 'numpy' or 'torch', not 'jax'"):
        baseline(schedules.get("matmul"), {"M": 2, "N": 5, "K": 3}, [], 1, 1, 0.0, kind="jax")


def test_a_baseline_that_fails_in_its_worker_is_a_tensorlang_error_with_its_last_line():
    import numpy as np

    import tensorlang as tl
    from tensorlang import schedules
    from tensorlang.tuner.bench import BaselineError, baseline
    A, B = np.ones((2, 3), np.float32), np.ones((4, 5), np.float32)  # shapes numpy's matmul refuses
    with pytest.raises(BaselineError, match=r"numpy baseline failed: ValueError: matmul: .*mismatch") as e:
        baseline(schedules.get("matmul"), {"M": 2, "N": 5, "K": 3}, [A, B], 1, 1, 0.0)
    assert isinstance(e.value, tl.TensorlangError)


class _NaNKernel:
    """A built kernel whose outputs are then overwritten with NaN: all of them, or only the first element."""

    def __init__(self, kernel, only_first: bool):
        self.kernel, self.only_first = kernel, only_first

    def __call__(self, *args, **kwargs):
        import numpy as np
        out = self.kernel(*args, **kwargs)
        for o in out if isinstance(out, tuple) else (out,):
            if self.only_first:
                o.flat[0] = np.nan
            else:
                o.fill(np.nan)
        return out

    def __getattr__(self, name):
        return getattr(self.kernel, name)


def _build_nan_kernels(monkeypatch, only_first: bool) -> None:
    import tensorlang as tl
    real = tl.build
    monkeypatch.setattr(tl, "build", lambda *a, **k: _NaNKernel(real(*a, **k), only_first))


@pytest.mark.parametrize("only_first", [False, True])
def test_run_fails_a_kernel_whose_output_is_nan(monkeypatch, capsys, only_first):
    """An output of NaN never matches numpy (`max(0.0, nan)` is 0.0, so an error taken as that max would pass it)."""
    from tensorlang.cli.main import main
    _build_nan_kernels(monkeypatch, only_first)
    assert main(["run", "matmul", "--size", "M=4,N=5,K=3", "--repeat", "1", "--min-time", "0", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no JSON that says it matches
    n = 1 if only_first else 20
    assert "tensorlang run: error: matmul: the result does not match the numpy reference (max relative error " \
           f"inf, tolerance 9.28e-06): output 0: {n} NaN where the reference has a number (first at index (0, 0))" \
           in err, err


@pytest.mark.parametrize("only_first", [False, True])
def test_bench_fails_a_kernel_whose_output_is_nan(monkeypatch, capsys, only_first):
    import numpy as np

    from tensorlang.cli.main import main
    from tensorlang.tuner import bench
    _build_nan_kernels(monkeypatch, only_first)

    class NumpyInProcess:
        def __init__(self, name, w, sizes, inputs, threads, kind="numpy", coretype=None):
            self.name, self.extra = name, {"version": np.__version__}
            self.out = w.reference(*inputs, **sizes).astype(np.float32)

        def first(self):
            return [self.out]

        def burst(self, runs, min_time):
            return [1e-3] * runs

        def close(self):
            pass
    monkeypatch.setattr(bench, "library_row", NumpyInProcess)
    monkeypatch.setattr(bench, "torch_available", lambda: False)
    argv = ["bench", "softmax", "--size", "N=8,D=40", "--threads", "1", "--repeat", "1", "--min-time", "0"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    why = f"(output 0: {1 if only_first else 320} NaN where the reference has a number (first at index (0, 0)))"
    assert f"tensorlang bench: error: softmax: naive {why}, auto {why}, hand {why} do not match the numpy " \
           "reference" in err, err


def test_run_and_bench_catch_a_softmax_with_its_last_column_zeroed(monkeypatch, capsys):
    """The old check, a max error of 1e-3 relative to max(1, max|expected|), passed outputs below 1 that were off
    by up to 1e-3: a softmax over 1000 columns with its whole last column zeroed read as a match."""
    import numpy as np

    import tensorlang as tl
    from tensorlang.cli.main import main
    real = tl.build

    class ZeroLastColumn:
        def __init__(self, kernel):
            self.kernel = kernel

        def __call__(self, *a, **k):
            out = self.kernel(*a, **k)
            out[:, -1] = 0
            return out

        def __getattr__(self, name):
            return getattr(self.kernel, name)
    monkeypatch.setattr(tl, "build", lambda *a, **k: ZeroLastColumn(real(*a, **k)))
    assert main(["run", "softmax", "--size", "N=4,D=1000", "--repeat", "1", "--min-time", "0", "--json"]) == 2
    err = capsys.readouterr().err
    assert "softmax: the result does not match the numpy reference" in err and "4 of 4000 elements differ" in err, err
    Y = np.full((4, 1000), 1e-3, np.float32)
    assert np.abs(Y - np.where(np.arange(1000) == 999, 0, Y)).max() <= 1e-3  # what the old check let through


def test_run_checks_a_users_program_against_numpy_not_its_own_naive_nest(monkeypatch, tmp_path, capsys):
    """A lowering bug shared by the naive nest and the scheduled kernel read as "matches numpy: yes" while a
    user's program was checked against its own naive loop nest: the reference is numpy's evaluation of it."""
    import tensorlang as tl
    from tensorlang import lower
    from tensorlang.cli.main import main
    from tensorlang.program import Binary
    path = tmp_path / "axpy.tl"
    path.write_text("def axpy(X: f32[N], Y: f32[N]) -> Z:\n    Z[i] = X[i] * 2.0 + Y[i]\n")
    argv = ["run", str(path), "--size", "N=64", "--repeat", "1", "--min-time", "0", "--json"]
    assert main(argv) == 0
    assert '"matches_numpy": true' in capsys.readouterr().out
    real = lower.ValueLowering.__call__

    def broken(self, e, want):  # every `+` lowered as `-`, in every schedule the naive nest included
        if isinstance(e, Binary) and e.op == "+":
            e = Binary(e.dtype, e.weak, e.loc, "-", e.a, e.b, e.operand_dtype)
        return real(self, e, want)
    monkeypatch.setattr(lower.ValueLowering, "__call__", broken)
    tl.clear_cache()
    try:
        assert main(argv) == 2
        assert "axpy: the result does not match the numpy reference" in capsys.readouterr().err
    finally:
        monkeypatch.undo()
        tl.clear_cache()


def test_max_rel_error_never_lets_a_nan_or_infinity_pass():
    import numpy as np

    from tensorlang.tuner.bench import max_rel_error
    e = np.array([1.0, -2.0, np.nan, np.inf, 0.0])
    assert max_rel_error(e.copy(), e) == 0.0                     # the same special values in the same places
    for i, bad in [(0, np.nan), (4, np.inf), (3, -np.inf), (3, 5.0), (2, 0.0), (1, np.nan)]:
        o = e.copy()
        o[i] = bad
        assert max_rel_error(o, e) == np.inf, (i, bad)
        assert max_rel_error((e, o), (e, e)) == np.inf            # in any output of several
    assert max_rel_error(np.full(3, np.nan), np.ones(3)) == np.inf
