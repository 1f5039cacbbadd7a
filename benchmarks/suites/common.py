"""What every suite shares: a program's description (:class:`Program`), the library formulation it is timed against
(:class:`Baseline`), inputs, the check against the numpy oracle, and the few places where the harness meets code that
is being moved (the command line's module, the bench's timing rows, the random program generator).

Example::

    >>> import numpy as np
    >>> p = Program("scale", "demo", "def scale(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0\\n", {"N": 1000},
    ...             {"N": 8}, reference=lambda X, **s: 2.0 * X.astype(np.float64))
    >>> X, = make_inputs(p, p.small, seed=0)
    >>> check(p, p.small, tl.build(p.op, schedule="auto", **p.small)(X), p.reference(X, **p.small)).ok
    True
"""
from __future__ import annotations

import functools
import importlib
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import tensorlang as tl

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
NUMPY_DTYPES = {"f32": np.float32, "f64": np.float64, "i32": np.int32}


@dataclass(frozen=True)
class Baseline:
    """A library's formulation of a program, timed against it. ``lib`` is "numpy", "scipy" or "torch" (each in a
    process of its own with the same thread count); ``setup(inputs, sizes)`` gets the inputs (numpy arrays, torch
    tensors for torch) and returns the call that computes the outputs, which is what is timed. What a user of the
    library does once (a weight moved into the library's layout) belongs in ``setup``. A call that writes into an
    output it was given (STREAM's triad) says so with ``allocates=False``: it is no library row of the contract.

    >>> b = Baseline("numpy", lambda ins, sizes: (lambda: ins[0] * 2))
    >>> b.setup([np.ones(2)], {})().tolist()
    [2.0, 2.0]
    """

    lib: str
    setup: Callable
    what: str = ""
    allocates: bool = True  # False: the call writes into an output it was given (outside the timing contract)


def call(lib: str, fn: Callable, what: str = "") -> Baseline:
    """A :class:`Baseline` whose timed call is ``fn(*inputs, **sizes)`` (``fn(torch, *tensors, **sizes)`` for
    torch), with nothing prepared ahead.

    >>> call("numpy", lambda X, **s: X + 1).setup([np.zeros(1)], {})().tolist()
    [1.0]
    """
    if lib == "torch":
        def setup(inputs, sizes):
            import torch
            return lambda: fn(torch, *inputs, **sizes)
    else:
        def setup(inputs, sizes):
            return lambda: fn(*inputs, **sizes)
    return Baseline(lib, setup, what)


@dataclass(frozen=True)
class Program:
    """One program of a suite: its DSL ``source``, the benchmark ``sizes`` (sizes and int parameters) and ``small``
    ones for tests and ``--quick``, a numpy ``reference(*inputs, **sizes)`` (the oracle: float64 for float programs,
    computed without tensorlang), the library ``baselines`` by row name, and its work: ``flops(sizes)`` (arithmetic
    operations, conventional counts) or, for memory-bound programs, ``bytes(sizes)`` (each input read and each output
    written once). ``inputs(sizes, rng)`` replaces the default random inputs (standard normal floats) where a program
    needs others (positive pixels, integer-valued mosaics); ``halide(hl, sizes)`` writes the same algorithm in Halide's
    Python frontend (see :mod:`halide_apps`).

    >>> p = Program("f", "demo", "def f(X: f32[N]) -> Y:\\n    Y[i] = X[i]\\n", {"N": 4}, {"N": 2},
    ...             reference=lambda X, **s: X)
    >>> p.key, p.op.outputs
    ('demo/f', ('Y',))
    """

    name: str
    suite: str
    source: str
    sizes: dict
    small: dict
    reference: Callable
    baselines: dict = field(default_factory=dict)
    flops: Callable | None = None
    bytes: Callable | None = None
    inputs: Callable | None = None
    halide: Callable | None = None
    what: str = ""
    origin: str = ""
    notes: str = ""

    @property
    def key(self) -> str:
        """``suite/name``, unique over the suites."""
        return f"{self.suite}/{self.name}"

    @functools.cached_property
    def op(self):
        """The parsed program (``tl.op(source)``)."""
        return tl.op(self.source)

    def work(self, sizes: dict) -> tuple[str, float | None]:
        """("bytes", n) for a memory-bound program, else ("flops", n); n is None where the program has no count.

        >>> Program("f", "d", "", {}, {}, reference=None, bytes=lambda s: 8.0).work({})
        ('bytes', 8.0)
        """
        if self.bytes is not None:
            return "bytes", float(self.bytes(sizes))
        return "flops", None if self.flops is None else float(self.flops(sizes))


def input_specs(op, sizes: dict) -> list[tuple[str, tuple, str]]:
    """(name, shape, dtype) of each input of ``op`` at ``sizes``, in parameter order.

    >>> input_specs(tl.op("def f(A: f32[N, 2], B: i32[N]) -> C:\\n    C[i] = A[i, 0] + f32(B[i])"), {"N": 3})
    [('A', (3, 2), 'f32'), ('B', (3,), 'i32')]
    """
    shapes = tl.reference(op, **sizes).bound.shapes
    return [(p.name, tuple(shapes[p.name]), p.dtype) for p in op.params]


def output_specs(op, sizes: dict) -> list[tuple[str, tuple, str]]:
    """(name, shape, dtype) of each output of ``op`` at ``sizes``.

    >>> output_specs(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i + 1] - A[i]"), {"N": 5})
    [('B', (4,), 'f32')]
    """
    shapes = tl.reference(op, **sizes).bound.shapes
    return [(name, tuple(shapes[name]), op.stage(name).dtype) for name in op.outputs]


def make_inputs(program: Program, sizes: dict, seed: int = 0) -> list[np.ndarray]:
    """The inputs of ``program`` at ``sizes``: its own ``inputs`` where it has them, else standard normal floats
    and integers in -8..8 of the declared shapes and dtypes, from ``seed``.

    >>> p = Program("f", "d", "def f(A: f64[N]) -> B:\\n    B[i] = A[i]\\n", {}, {}, reference=None)
    >>> [(a.dtype.name, a.shape) for a in make_inputs(p, {"N": 3})]
    [('float64', (3,))]
    """
    rng = np.random.default_rng(seed)
    if program.inputs is not None:
        return [np.array(a, order="C") for a in program.inputs(sizes, rng)]
    out = []
    for _, shape, dtype in input_specs(program.op, sizes):
        if dtype == "i32":
            out.append(rng.integers(-8, 9, shape).astype(np.int32))
        else:
            out.append(rng.standard_normal(shape).astype(NUMPY_DTYPES[dtype]))
    return out


def check(program: Program, sizes: dict, outputs, expected):
    """``outputs`` against ``expected`` (the reference's) at the tolerance of the program's output dtypes and
    reduction lengths (:func:`tensorlang.compare.compare`: a NaN or infinity where the reference has a number never
    passes); outputs of another shape with as many elements (a library's ``[N, 2H, 2W, C]`` for the program's
    ``[N, H, 2, W, 2, C]``) are compared in the program's shape. Returns the :class:`tensorlang.compare.Comparison`.

    >>> p = Program("f", "d", "def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 3.0\\n", {}, {}, reference=None)
    >>> check(p, {"N": 2}, np.array([3, np.nan], np.float32), np.array([3.0, 6.0])).ok
    False
    """
    from tensorlang.compare import compare
    op = program.op
    specs = output_specs(op, sizes)
    outs, exps = _shaped(outputs, specs), _shaped(expected, specs)
    lengths = tl.reference(op, **sizes).reduction_lengths
    return compare(outs, exps, tuple(s[2] for s in specs), tuple(lengths.get(s[0], 1) for s in specs))


def _shaped(arrays, specs) -> tuple:
    """``arrays`` (one or a sequence) as a tuple, each in its output's shape where it has that many elements."""
    arrays = tuple(arrays) if isinstance(arrays, (tuple, list)) else (arrays,)
    if len(arrays) != len(specs):
        return arrays
    return tuple(np.asarray(a).reshape(s[1]) if np.size(a) == math.prod(s[1]) else np.asarray(a)
                 for a, s in zip(arrays, specs))


def tune_command(file: str, sizes: dict, trials: int, db: str, threads: int, seed: int = 0,
                 jobs: int | None = None, timeout: float | None = None) -> list[str]:
    """The command that tunes the DSL program in ``file`` as a user does (``tensorlang tune FILE --size ...
    --trials N --db DB --json``), without the run's own baselines (the suite times them).

    >>> tune_command("gemm.tl", {"M": 8, "N": 4}, 200, "t.db", 2)[3:7]
    ['tune', 'gemm.tl', '--size', 'M=8,N=4']
    """
    size = ",".join(f"{k}={v}" for k, v in sizes.items())
    cmd = [sys.executable, "-m", "tensorlang.cli", "tune", file, "--size", size,
           "--trials", str(trials), "--db", db, "--threads", str(threads), "--seed", str(seed), "--json",
           "--no-baselines"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    if timeout:
        cmd += ["--timeout", str(timeout)]
    return cmd


class TuneFailed(RuntimeError):
    """``tensorlang tune`` exited with an error; the message ends with its last line of stderr (the error)."""


def tune(file: str, sizes: dict, trials: int, db: str, threads: int, seed: int = 0, jobs: int | None = None,
         timeout: float | None = None) -> dict:
    """Run :func:`tune_command` and return the JSON summary it prints (``best``, ``trials``, ``wall_s``, ...);
    :class:`TuneFailed` with its stderr's tail when it fails.

    Example::

        summary = tune("out/gemm.tl", {"NI": 1000, "NJ": 1100, "NK": 1200}, 200, "suites.db", threads=2)
        summary["best"]["best_gflops"]
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    r = subprocess.run(tune_command(file, sizes, trials, db, threads, seed, jobs, timeout), capture_output=True,
                       text=True, env=env)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise TuneFailed(f"tensorlang tune {os.path.basename(file)} failed (exit status {r.returncode}): {last}")
    return json.loads(r.stdout)


def load_progen():
    """The random program generator of the tests (``tests/support/progen.py``).

    >>> hasattr(load_progen(), "generate")
    True
    """
    path = os.path.join(REPO, "tests", "support")
    if not os.path.exists(os.path.join(path, "progen.py")):
        raise ImportError(f"no progen.py in {path}: the random suite needs the repository's tests folder")
    if path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module("progen")
