"""The C backend (tensorlang/codegen_c.py): the C it emits from the loop IR computes what the LLVM kernel computes.

Kernels are emitted with ``emit_c(func, name=...)``, compiled in batches with ``compile_c`` (one shared library
per batch, one translation unit per kernel, two batches at once) and called through ctypes with numpy arrays:

* every workload of ``tensorlang.schedules`` at its small preset, default and hand schedule, against numpy;
* hand schedules at sizes their tiles do not divide (tails, guards), against numpy, and under AddressSanitizer
  with arrays of exactly their size (no read or write out of bounds);
* random valid schedules of workloads and random programs (the schedule fuzzer of test_schedule_fuzz.py),
  against the LLVM kernel of the same schedule;
* integer and float semantics at special values (division by zero, floor division and modulo of negatives,
  NaN in max/min, saturating casts, exp), against the LLVM kernel;
* parallel loops with and without OpenMP; the readability of the text; errors.

Skipped when there is no C compiler. Run: ``.venv/bin/pytest tests/codegen/test_codegen_c.py -q``
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import random
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
from oracle import assert_close

import tensorlang as tl
from tensorlang import ir, schedules
from tensorlang.codegen_c import compile_c, emit_c, find_c_compiler
from tensorlang.dtypes import DTYPES

try:
    CC = find_c_compiler()
except tl.BuildError:
    CC = None

pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler found (gcc, clang or $CC)")

EXACT = {"maxpool2d", "transpose"}  # copies of input values: bit-exact
ODD = {  # sizes the hand schedules' tiles do not divide
    "matmul": [dict(M=97, N=131, K=61), dict(M=1, N=7, K=13)],
    "conv2d": [dict(N=1, C=3, H=7, W=11, F=5, R=3, S=3, stride=1, pad=1, dil=1)],
    "depthwise_conv2d": [dict(N=1, C=3, H=7, W=19, R=3, S=3, stride=1, pad=1)],
    "softmax": [dict(N=7, D=33)],
    "maxpool2d": [dict(N=1, C=3, H=7, W=37, KH=2, KW=2, stride=2)],
}


# ---- building and calling --------------------------------------------------------------------------------------

class CKernels:
    """Compiled C kernels by name: `run(name, inputs)` returns the outputs (a list)."""

    def __init__(self, funcs: dict, workdir: Path, jobs: int = 2, openmp: bool = True, flags=()):
        self.funcs = funcs
        names = list(funcs)
        groups = [names[i::jobs] for i in range(jobs) if names[i::jobs]]

        def build(i):
            sources = [emit_c(funcs[n], name=n) for n in groups[i]]
            return compile_c(sources, workdir / f"batch{i}.so", openmp=openmp, extra_flags=flags)

        with concurrent.futures.ThreadPoolExecutor(len(groups)) as pool:
            libs = [ctypes.CDLL(str(p)) for p in pool.map(build, range(len(groups)))]
        self.fns = {}
        for group, lib in zip(groups, libs):
            for n in group:
                fn = getattr(lib, n)
                fn.restype = ctypes.c_int32
                fn.argtypes = [ctypes.c_void_p] * len(funcs[n].params)
                self.fns[n] = fn

    def run(self, name: str, inputs) -> list:
        func = self.funcs[name]
        outs = []
        for b in func.params[len(inputs):]:
            dt = DTYPES[b.dtype].numpy
            outs.append(np.full(b.shape, np.nan if np.issubdtype(dt, np.floating) else 7, dt))
        for b, a in zip(func.params, inputs):
            assert a.dtype == DTYPES[b.dtype].numpy and a.shape == tuple(b.shape) and a.flags.c_contiguous
        saved = [a.copy() for a in inputs]
        status = self.fns[name](*[a.ctypes.data for a in inputs], *[o.ctypes.data for o in outs])
        assert status == 0, f"{name} returned {status}"
        for a, b in zip(inputs, saved):
            np.testing.assert_array_equal(a, b, err_msg=f"{name} modified an input")
        return outs


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def reduction_len(s) -> int:
    import schedfuzz
    return schedfuzz.total_reduction_len(s)


def workload_schedule(w, sizes, hand: bool):
    s = tl.schedule(tl.op(w.source), **sizes)
    if hand:
        w.hand_schedule(s)
    return s


def workload_cases():
    """(kernel name, workload, sizes, hand?) for the small presets and the odd sizes."""
    out = []
    for w in schedules.WORKLOADS.values():
        out.append((f"{w.name}_default", w, w.sizes("small"), False))
        if w.hand_schedule is not None:
            out.append((f"{w.name}_hand", w, w.sizes("small"), True))
        for i, sizes in enumerate(ODD.get(w.name, [])):
            out.append((f"{w.name}_odd{i}", w, sizes, True))
    return out


WORKLOAD_CASES = workload_cases()


@pytest.fixture(scope="module")
def workload_kernels(tmp_path_factory):
    funcs = {name: workload_schedule(w, sizes, hand).lowered() for name, w, sizes, hand in WORKLOAD_CASES}
    return CKernels(funcs, tmp_path_factory.mktemp("c_workloads"))


@pytest.mark.parametrize("name,w,sizes,hand", WORKLOAD_CASES, ids=[c[0] for c in WORKLOAD_CASES])
def test_workload_matches_numpy(workload_kernels, name, w, sizes, hand):
    s = workload_schedule(w, sizes, hand)
    inputs = w.make_inputs(sizes, np.random.default_rng(11))
    got = workload_kernels.run(name, inputs)
    want = as_tuple(w.reference(*inputs, **sizes))
    assert len(got) == len(want)
    for g, e in zip(got, want):
        assert_close(g, e, reduction_len(s), exact=w.name in EXACT, err_msg=f"C kernel {name} {sizes}")


# ---- random schedules: C == LLVM -------------------------------------------------------------------------------

FUZZ_SEEDS = range(40)


def fuzz_cases():
    """Random valid schedules of workloads (tiny sizes) and random programs, from the schedule fuzzer."""
    import progen
    import schedfuzz

    names = list(schedules.WORKLOADS)
    cases = []
    for seed in FUZZ_SEEDS:
        src = progen.Src.from_random(random.Random(90_001 + seed))
        try:
            case = schedfuzz.workload_case(names[seed % len(names)], src) if seed % 2 == 0 else \
                schedfuzz.progen_case(src)
        except progen.Reject:
            continue
        fz = schedfuzz.Fuzzer(case, src)
        try:
            for _ in range(src.int(2, 8)):
                fz.step()
            func = fz.s.lowered()
            kernel = tl.build(fz.s)
        except (schedfuzz.FuzzFailure, tl.TensorlangError):
            continue  # the schedule fuzzer's own tests report those
        cases.append((f"fuzz{seed}", case, fz.s, func, kernel))
    tl.clear_cache()  # a fuzzed kernel lives no longer than its example
    return cases


@pytest.mark.slow
def test_random_schedules_match_llvm(tmp_path):
    cases = fuzz_cases()
    assert len(cases) >= 25, f"only {len(cases)} random schedules were valid"
    kinds = {k for _, _, _, func, _ in cases for k in re.findall(r"# (\w+)", str(func))}
    assert {"vectorized", "unrolled", "parallel"} <= kinds, kinds
    lib = CKernels({name: func for name, _, _, func, _ in cases}, tmp_path)
    for name, case, s, _, kernel in cases:
        got = lib.run(name, case.inputs)
        want = as_tuple(kernel(*case.inputs))
        for o, g, e in zip(case.op.outputs, got, want):
            if case.compare_f32.get(o):
                g, e = g.astype(np.float32), e.astype(np.float32)
            assert_close(g, e, case.reduction_len[o], exact=case.exact[o],
                         err_msg=f"C and LLVM differ for {o}\n{case.describe()}\n{s}")


def tuner_cases(per_workload: int = 3):
    """Random configs of every workload's tuning space at its small preset (register tiles, packing, vector
    widths, parallel loops), with inputs."""
    cases = []
    rng = np.random.default_rng(17)
    for w in schedules.WORKLOADS.values():
        if w.space is None:
            continue
        sizes = w.sizes("small")
        space, op = w.space(sizes), tl.op(w.source)
        found = 0
        for _ in range(50):
            cfg = space.random(rng)
            if not space.allowed(cfg):
                continue
            try:
                s = space.schedule(op, sizes, cfg)
                func = s.lowered()
            except tl.TensorlangError:
                continue
            cases.append((f"{w.name}_cfg{found}", w, sizes, s, func))
            found += 1
            if found == per_workload:
                break
    return cases


@pytest.mark.slow
def test_tuner_configs_match_llvm(tmp_path):
    cases = tuner_cases()
    assert len(cases) >= 20
    lib = CKernels({name: func for name, _, _, _, func in cases}, tmp_path)
    vector_code = 0
    for name, w, sizes, s, func in cases:
        vector_code += "tl_load_" in emit_c(func)
        inputs = w.make_inputs(sizes, np.random.default_rng(1))
        got = lib.run(name, inputs)
        want = as_tuple(tl.build(s)(*inputs))
        for g, e in zip(got, want):
            assert_close(g, e, reduction_len(s), exact=w.name in EXACT, err_msg=f"C and LLVM differ: {name}\n{s}")
    assert vector_code >= 5  # vectorized loops written with vector types


# ---- semantics at special values: C == LLVM --------------------------------------------------------------------

SEMANTICS = {
    "intdiv": ("def intdiv(A: i32[N], B: i32[N]) -> C:\n"
               "    C[i] = A[i] // B[i] + A[i] % B[i] * 1000 + i32(f64(A[i]) / f64(B[i])) * 1000000"
               " + abs(A[i] - B[i]) * 7"),
    # `/` of weak values (indices, literals) is true division, computed in double inside a cast
    "weakdiv": ("def weakdiv(X: f64[N]) -> Z:\n"
                "    Z[i] = X[i] * (i / 3) + f64(-1 / 2) + select(i / 4 >= 1, 1, 0) + f64(i32(i / 3)) + f64(f32(0.1))"),
    # in an f32 loop: the comparison of weak values in double, the casts' weak floats in double
    "weakcmp": ("def weakcmp(X: f32[N]) -> Z:\n"
                "    Z[i] = select(i / 4 >= 1.5, X[i], 0.5) + f32(i / 3) + X[i] * (i / 7)"),
    "intmix": ("def intmix(A: i32[N], B: i32[N]) -> C:\n"
               "    C[i] = max(A[i], B[i]) * 3 - min(A[i], -B[i]) + i32(f32(A[i]) * 0.5)"),
    "floatmath": ("def floatmath(X: f32[N], Y: f32[N]) -> Z:\n"
                  "    Z[i] = max(X[i], Y[i]) + min(X[i], 0.5) + exp(X[i]) + X[i] % Y[i] + X[i] // Y[i] + "
                  "select(X[i] != Y[i], tanh(X[i]), sqrt(abs(Y[i])))"),
    "floatmath64": ("def floatmath64(X: f64[N], Y: f64[N]) -> Z:\n"
                    "    Z[i] = max(X[i], Y[i]) * exp(X[i] * 0.01) + log(abs(Y[i]) + 1.0) - X[i] % Y[i]"),
    "casts": ("def casts(X: f32[N]) -> Z:\n"
              "    Z[i] = i32(X[i]) + i32(f64(X[i]) * 2.0)"),
    "sum0d": "def sum0d(X: f32[N]) -> S:\n    S += X[i] * 0.5",  # a 0-d output; a reduction over the lanes
    "max0d": "def max0d(X: f32[N]) -> S:\n    S max= X[i]",
    "min0d": "def min0d(X: f64[N]) -> S:\n    S min= X[i] - 1.0",
}


def special_inputs(op, n: int, rng) -> list:
    out = []
    for k, p in enumerate(op.params):
        if p.dtype == "i32":
            a = rng.integers(-20, 21, n).astype(np.int32)
            a[:8] = [0, -7, 7, 2**31 - 1, -2**31 + 1, 5, -2**31, -1]
            if k == 1:
                a[6] = -1  # the minimum divided by -1: wraps, must not trap
        else:
            a = (rng.standard_normal(n) * 4).astype(DTYPES[p.dtype].numpy)
            a[:9] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 3e9, -3e9, 100.0, -100.0]
        out.append(a)
    return out


@pytest.mark.parametrize("vectorize", [False, True])
def test_special_values_match_llvm(tmp_path, vectorize):
    n = 64
    funcs, kernels = {}, {}
    for name, text in SEMANTICS.items():
        s = tl.schedule(tl.op(text), N=n)
        if vectorize:
            out = s.op.outputs[0]
            s[out].split("i", 16)
            s[out].vectorize("i_i")
            assert "# vectorized" in str(s.lowered())
        funcs[name], kernels[name] = s.lowered(), tl.build(s)
    lib = CKernels(funcs, tmp_path)
    rng = np.random.default_rng(5)
    for name, k in kernels.items():
        sets = [special_inputs(k.op, n, rng)]
        if name.endswith("0d"):  # one NaN makes a reduction NaN: also finite values
            sets.append([np.where(np.isfinite(a) & (np.abs(a) < 1e6), a, 1.5).astype(a.dtype) for a in sets[0]])
        for inputs in sets:
            with np.errstate(all="ignore"):
                want = k(*inputs)
                got = lib.run(name, inputs)[0]
            if np.issubdtype(want.dtype, np.integer):
                np.testing.assert_array_equal(got, want, err_msg=name)
            else:
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=name)


def small_int_program(dt: str) -> str:
    """Every operation on the small integer type `dt`, its casts both ways, sat_* casts and its reductions."""
    return (f"def small_{dt}(A: {dt}[N], B: {dt}[N], X: f32[N]) -> (S, T, R, U, V):\n"
            f"    S[i] = max(A[i] * B[i] - 3, A[i] // B[i]) + A[i] % B[i] + min(-A[i], abs(B[i]))\n"
            f"    T[i] = select(A[i] < B[i], {dt}(X[i]), sat_{dt}(i64(A[i]) * 1000 - 70000)) + sat_{dt}(X[i] * 1e3)\n"
            f"    R[i] max= A[j] + B[i] where j in 0:16\n"
            f"    U[i] = u8(A[i]) + u8(sat_i16(B[i]))\n"
            f"    V[i] = f64(A[i]) * 0.5 + f64(i16(B[i]))\n")


@pytest.mark.parametrize("vectorize", [False, True])
def test_small_integer_types_match_llvm(tmp_path, vectorize):
    from small_ints import SMALL, edge_values, float_edges
    n = 64
    funcs, kernels = {}, {}
    for dt in SMALL:
        s = tl.schedule(tl.op(small_int_program(dt)), N=n)
        if vectorize:
            for out in s.op.outputs:
                s[out].split("i", 16)
                s[out].vectorize("i_i")
        funcs[f"small_{dt}"], kernels[dt] = s.lowered(), tl.build(s)
    lib = CKernels(funcs, tmp_path)
    rng = np.random.default_rng(11)
    for dt, k in kernels.items():
        a, b = edge_values(dt, n, rng), edge_values(dt, n, rng)[::-1].copy()
        x = float_edges("f32", rng)[:n]
        with np.errstate(all="ignore"):
            want = k(a, b, x)
        for got in (lib.run(f"small_{dt}", [a, b, x]), tl.reference(k.op, N=n)(a, b, x)):
            for name, g, w in zip(k.op.outputs, got, want):
                np.testing.assert_array_equal(g, w, err_msg=f"{dt} {name}")


# ---- parallel loops, with and without OpenMP -------------------------------------------------------------------

@pytest.mark.parametrize("openmp", [True, False])
def test_parallel_loops_with_and_without_openmp(tmp_path, openmp):
    w = schedules.get("matmul")
    sizes = dict(M=97, N=131, K=61)
    s = workload_schedule(w, sizes, True)
    func = s.lowered()
    src = emit_c(func)
    assert "#pragma omp parallel for schedule(static)" in src
    lib = CKernels({"mm": func}, tmp_path, jobs=1, openmp=openmp)
    inputs = w.make_inputs(sizes, np.random.default_rng(2))
    got = lib.run("mm", inputs)[0]
    assert_close(got, w.reference(*inputs, **sizes), sizes["K"])
    if shutil.which("nm"):  # the library calls OpenMP's runtime only when compiled with it
        symbols = subprocess.run(["nm", "-D", str(tmp_path / "batch0.so")], capture_output=True, text=True).stdout
        assert ("GOMP_parallel" in symbols) == openmp


# ---- readability -----------------------------------------------------------------------------------------------

def hand_matmul_source(**sizes):
    w = schedules.get("matmul")
    return emit_c(workload_schedule(w, sizes or dict(M=64, N=64, K=64), True).lowered(), vector_bytes=64)


def test_prototype_has_restrict_pointers_inputs_const():
    src = hand_matmul_source()
    assert "int32_t matmul(const float *restrict A, const float *restrict B, float *restrict C)\n{" in src
    assert "return status;" in src
    for flag in ("-O3", "-march=native", "-fopenmp"):
        assert flag in src.split("*/")[0]  # the header says how to compile it


def test_loop_kinds_are_visible():
    src = hand_matmul_source(M=64, N=256, K=64)  # two column blocks: the threads split those
    lines = src.splitlines()
    i = next(k for k, line in enumerate(lines) if "#pragma omp parallel for" in line)
    assert re.match(r"\s*for \(int64_t j_o = 0; j_o < \d+; j_o\+\+\) \{  /\* parallel \*/", lines[i + 1])
    from tensorlang.schedules.matmul import hand_tile
    assert f"/* vectorized: j_i_i in 0:{hand_tile()[0]} */" in src  # the hand tile's columns follow the registers
    assert "/* unrolled: i_i_i in 0:6 */" in src
    # the register tile: 6 rows of nr / 16 vectors of 16 lanes (64-byte vectors; 24 with AVX-512's 64 columns,
    # 6 with AVX2's 16), no array
    n = hand_tile()[0] // 16 * 6
    assert "tl_f32x16 C_local_v0 = {0}" in src and f"C_local_v{n - 1} = {{0}};" in src and f"C_local_v{n}" not in src
    assert not re.search(r"\bC_local\[", src)
    assert re.search(r"C_local_v\d+ \+= A_C_local\[.*\] \* tl_load_f32x16\(&B_C_local\[", src)
    # one statement per line, indented by blocks
    body = src[src.index("{\n    int32_t status"):]
    assert all(len(line) - len(line.lstrip()) in range(0, 200, 4) for line in body.splitlines())


def test_plain_vectorized_loop_gets_omp_simd():
    op = tl.op("def f(X: f32[N]) -> Y:\n    Y[i] = tanh(X[i]) + 1.0")
    s = tl.schedule(op, N=64)
    s["Y"].split("i", 16)
    s["Y"].vectorize("i_i")
    src = emit_c(s.lowered())
    assert "#pragma omp simd\n" in src
    assert re.search(r"#pragma omp simd\n\s*for \(int64_t i_i = 0; i_i < 16; i_i\+\+\) \{  /\* vectorized \*/", src)


@pytest.mark.parametrize("n,split", [(64, True), (61, True), (16, False)])
def test_lane_reduction(tmp_path, n, split):
    """A vectorized reduction loop: its lanes update one element, so never `omp simd` (it would race). Inside a
    serial loop it accumulates in a vector (tensorlang/accumulate.py; lanes of a tail guarded one by one) whose
    lanes are reduced once (tl_reduce_add); alone, each vector's lanes are reduced."""
    op = tl.op("def g(X: f32[M, N]) -> Y:\n    Y[m] += X[m, n]")
    s = tl.schedule(op, M=3, N=n)
    if split:
        s["Y"].split("n", 16)
    s["Y"].vectorize("n_i" if split else "n")
    func = s.lowered()
    src = emit_c(func, vector_bytes=64)
    assert "#pragma omp simd\n" not in src
    if not split:
        assert re.search(r"Y\[m\] \+= tl_reduce_add_f32x16\(tl_load_f32x16\(&X\[", src)
    else:
        assert "Y[m] += tl_reduce_add_f32x16(Y_acc_v0);" in src
        assert ("Y_acc_v0 += tl_load_f32x16(&X[m * 64 + n]);" in src) == (n == 64)
    X = np.random.default_rng(0).standard_normal((3, n)).astype(np.float32)
    got = CKernels({"g": func}, tmp_path, jobs=1).run("g", [X])[0]
    assert_close(got, tl.build(s)(X), n)
    assert_close(got, X.sum(axis=1), n)


def test_kernel_source_c():
    k = tl.build(tl.op("def f(A: f32[N]) -> B:\n    B[i] = A[i] * 2.0"), N=8)
    assert k.source("c") == emit_c(k.func)
    with pytest.raises(tl.BuildError, match="'c'"):
        k.source("fortran")


# ---- errors ----------------------------------------------------------------------------------------------------

def test_unsupported_ir_names_the_node():
    X = ir.Buffer("X", "f32", (4,), "output")
    bad_call = ir.Store(X, (ir.const(0),), ir.Call("erf", (ir.FloatImm(1.0),), "f32"))
    with pytest.raises(tl.BuildError, match=r"Call 'erf'"):
        emit_c(ir.Func("f", (X,), bad_call))

    class Barrier(ir.Stmt):
        pass

    with pytest.raises(tl.BuildError, match="unsupported IR node Barrier"):
        emit_c(ir.Func("f", (X,), ir.Seq((Barrier(),))))
    with pytest.raises(tl.BuildError, match="kind 'tiled'"):
        emit_c(ir.Func("f", (X,), ir.For(ir.Var("i"), ir.const(0), ir.const(4), bad_call, "tiled")))
    with pytest.raises(tl.BuildError, match="cannot be the name of a C function"):
        emit_c(ir.Func("f", (X,), ir.Store(X, (ir.const(0),), ir.FloatImm(1.0))), name="double")


def test_compile_errors_are_build_errors(tmp_path, monkeypatch):
    with pytest.raises(tl.BuildError, match=r"C compiler failed.*\n.*") as info:
        compile_c("int32_t f(void) { return undefined_thing; }\n", tmp_path / "bad.so")
    assert "undefined_thing" in str(info.value) and "-O3" in str(info.value)
    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    with pytest.raises(tl.BuildError, match="no-such-compiler-xyz"):
        compile_c("int f;\n", tmp_path / "x.so")


# ---- no access out of bounds (AddressSanitizer) ----------------------------------------------------------------

HARNESS = """#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
int32_t {name}({proto});
int main(int argc, char **argv)
{{
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    void *p[{n}];
    size_t sizes[{n}] = {{{sizes}}};
    for (int i = 0; i < {n}; i++) {{
        p[i] = malloc(sizes[i]);  /* exactly the array: one byte more or less is a heap-buffer-overflow */
        if (i < {n_in} && fread(p[i], 1, sizes[i], in) != sizes[i])
            return 2;
    }}
    int32_t status = {name}({args});
    for (int i = {n_in}; i < {n}; i++)
        fwrite(p[i], 1, sizes[i], out);
    fclose(out);
    return status;
}}
"""


def asan_available() -> bool:
    with tempfile.TemporaryDirectory() as d:
        c = Path(d, "t.c")
        c.write_text("#include <stdlib.h>\nint main(void) { char *p = malloc(4); p[0] = 1; free(p); return 0; }\n")
        r = subprocess.run([*CC, "-fsanitize=address", str(c), "-o", str(Path(d, "t"))], capture_output=True)
        return r.returncode == 0 and subprocess.run([str(Path(d, "t"))], capture_output=True).returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("wname", ["matmul", "conv2d", "softmax"])
def test_no_out_of_bounds_access_under_asan(tmp_path, wname):
    if not asan_available():
        pytest.skip("AddressSanitizer is not available with this C compiler")
    w = schedules.get(wname)
    sizes = ODD[wname][0]
    func = workload_schedule(w, sizes, True).lowered()
    n_in = len(w.make_inputs(sizes, np.random.default_rng(0)))
    params = func.params
    kernel_c, harness_c = tmp_path / "kernel.c", tmp_path / "main.c"
    kernel_c.write_text(emit_c(func))
    harness_c.write_text(HARNESS.format(
        name=func.name, proto=", ".join(["void *"] * len(params)), n=len(params), n_in=n_in,
        sizes=", ".join(str(b.size * DTYPES[b.dtype].itemsize) for b in params),
        args=", ".join(f"p[{i}]" for i in range(len(params)))))
    exe = tmp_path / "prog"
    cmd = [*CC, "-O2", "-g", "-march=native", "-std=gnu99", "-fopenmp-simd", "-fsanitize=address",
           "-fno-omit-frame-pointer", str(kernel_c), str(harness_c), "-o", str(exe), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True)
    inputs = w.make_inputs(sizes, np.random.default_rng(4))
    (tmp_path / "in.bin").write_bytes(b"".join(a.tobytes() for a in inputs))
    r = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], capture_output=True,
                       text=True, env={"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0"})
    assert r.returncode == 0, r.stderr[-3000:]
    out = params[n_in]
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), DTYPES[out.dtype].numpy).reshape(out.shape)
    s = workload_schedule(w, sizes, True)
    assert_close(got, as_tuple(w.reference(*inputs, **sizes))[0], reduction_len(s))


# ---- a transposing copy: tiles transposed in registers ----------------------------------------------------------

MT = "def mt(A: f32[M, K], B: f32[N, K]) -> C:\n    C[i, j] += A[i, k] * B[j, k]\n"


def transposed_copy_schedule(M: int, N: int, K: int) -> tl.Schedule:
    """B[j, k] copied at each row i as [k][j] (j innermost: strided by K in B): a transposing copy."""
    s = tl.schedule(tl.op(MT), M=M, N=N, K=K)
    s["C"].cache_read("B", "i", layout=((1, 0), (0, 0)))
    return s


@pytest.mark.parametrize("M,N,K", [(3, 16, 16), (4, 48, 40), (5, 37, 19), (2, 10, 40), (2, 40, 9)])
def test_a_transposing_copy_is_transposed_in_registers(tmp_path, M, N, K):
    """16 x 16 tiles (and plain loops for what is left of either dimension) where both dimensions hold a tile;
    the same result as numpy from the LLVM and the C backend, and shuffles, not gathers, in the LLVM code."""
    s = transposed_copy_schedule(M, N, K)
    func = s.lowered()
    tiled = N >= 16 and K >= 16
    assert ("B_C_local_q_o" in str(func)) == tiled, str(func)
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((N, K), dtype=np.float32)
    want = (A.astype(np.float64) @ B.T.astype(np.float64)).astype(np.float32)
    k = tl.build(s)
    assert_close(k(A, B), want, K)
    if tiled and k.target.vector_bits() == 512:
        asm = k.source("asm")
        assert re.search(r"vperm[ti]2ps", asm), "no two-vector shuffle: the tile was not transposed in registers"
    lib = CKernels({"mt": func}, tmp_path, jobs=1)
    assert_close(lib.run("mt", [A, B])[0], want, K)


@pytest.mark.slow
def test_a_transposing_copy_stays_inside_its_buffers_under_asan(tmp_path):
    if not asan_available():
        pytest.skip("AddressSanitizer is not available with this C compiler")
    M, N, K = 5, 37, 19  # tails in both dimensions
    func = transposed_copy_schedule(M, N, K).lowered()
    assert "B_C_local_q_o" in str(func)
    params = func.params
    (tmp_path / "kernel.c").write_text(emit_c(func))
    (tmp_path / "main.c").write_text(HARNESS.format(
        name=func.name, proto=", ".join(["void *"] * len(params)), n=len(params), n_in=2,
        sizes=", ".join(str(b.size * DTYPES[b.dtype].itemsize) for b in params),
        args=", ".join(f"p[{i}]" for i in range(len(params)))))
    exe = tmp_path / "prog"
    subprocess.run([*CC, "-O2", "-g", "-march=native", "-std=gnu99", "-fopenmp-simd", "-fsanitize=address",
                    "-fno-omit-frame-pointer", str(tmp_path / "kernel.c"), str(tmp_path / "main.c"), "-o", str(exe),
                    "-lm"], check=True, capture_output=True)
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((N, K), dtype=np.float32)
    (tmp_path / "in.bin").write_bytes(A.tobytes() + B.tobytes())
    r = subprocess.run([str(exe), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")], capture_output=True,
                       text=True, env={"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0"})
    assert r.returncode == 0, r.stderr[-3000:]
    got = np.frombuffer((tmp_path / "out.bin").read_bytes(), np.float32).reshape(M, N)
    assert_close(got, (A.astype(np.float64) @ B.T.astype(np.float64)).astype(np.float32), K)


def test_a_transposing_copy_of_a_reduction_block_is_transposed_in_registers(tmp_path):
    """B[j, k] copied per block of 32 of k (K = 80: the last block reads past B, so it stays a guarded copy)."""
    M, N, K = 3, 40, 80
    s = tl.schedule(tl.op(MT), M=M, N=N, K=K)
    ko, _ = s["C"].split("k", 32)
    s["C"].reorder(ko, "i", "j", "k_i")
    s["C"].cache_read("B", ko, layout=((1, 0), (0, 0)))
    func = s.lowered()
    assert "B_C_local_q_o" in str(func)
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((N, K), dtype=np.float32)
    want = (A.astype(np.float64) @ B.T.astype(np.float64)).astype(np.float32)
    assert_close(tl.build(s)(A, B), want, K)
    assert_close(CKernels({"mt": func}, tmp_path, jobs=1).run("mt", [A, B])[0], want, K)
