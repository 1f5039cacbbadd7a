"""Temporaries of 64 KiB or more are kept from one call of a kernel to the next (`codegen_llvm._Emitter.allocate`,
the C backend's `tl_workspace_take`): no page faults on repeated calls, the right result from threads calling at
once, and `NAME_release_workspace` frees what is kept (the kernel allocates it again on its next call)."""
from __future__ import annotations

import concurrent.futures
import ctypes
import resource
import subprocess

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.codegen_c import compile_c, emit_c, find_c_compiler
from tensorlang.codegen_llvm import RELEASE_SUFFIX

# two temporaries of 4 MB at the root: freed at the end of a call, glibc unmapped or trimmed them, and the next call
# faulted their 2,048 pages in again (39,347 minor faults in 20 calls before the change, 0 after)
SRC = "def chain(A: f32[N]) -> C:\n    B[i] = A[i] * 2.0\n    T[i] = B[i] + 1.0\n    C[i] = T[i] * B[i] - A[i]\n"
N = 1 << 20


def inputs(seed):
    """Small integers: every step is exact in f32, with or without a fused multiply-add."""
    return np.random.default_rng(seed).integers(-50, 50, N).astype(np.float32)


def expected(A):
    B = A * np.float32(2)
    return (B + np.float32(1)) * B - A


def test_repeated_calls_fault_no_pages_in():
    k = tl.build(tl.schedule(tl.op(SRC), N=N))
    A = inputs(0)
    out = np.empty_like(A)
    k(A, out=out)
    k(A, out=out)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        k(A, out=out)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert faults < 500, f"{faults} page faults in 20 calls: the temporaries were mapped again"
    np.testing.assert_array_equal(out, expected(A))


def test_only_large_temporaries_are_kept():
    from tensorlang.codegen_llvm import emit_module
    for n, kept in ((N, 2), (4096, 0)):
        text = str(emit_module(tl.schedule(tl.op(SRC), N=n).lowered()))
        assert sum(f"@\"tl.workspace.{i}\" = internal global ptr null" in text for i in range(4)) == kept, text[:400]
        assert f"chain{RELEASE_SUFFIX}" in text  # defined either way: exports declare it


def _concurrent_calls(call, A, threads=4, calls=12):
    want = expected(A)

    def work(_):
        out = np.full_like(A, np.nan)
        call(A, out)
        return np.array_equal(out, want) or float(np.max(np.abs(out - want)))
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(work, range(threads * calls)))


def test_threads_calling_at_once_get_the_right_result_llvm():
    s = tl.schedule(tl.op(SRC), N=N)
    s["C"].parallel("i")
    k = tl.build(s)
    A = inputs(1)
    want = expected(A)
    k(A)  # the kept blocks exist: calls at once take them, or allocate their own
    results = _concurrent_calls(lambda a, out: k(a, out=out), A)
    assert all(r is True for r in results), results
    k._engine.release()  # freed; the next call allocates again
    np.testing.assert_array_equal(k(A), want)


def test_threads_calling_at_once_get_the_right_result_c(tmp_path):
    try:
        find_c_compiler()
    except tl.BuildError:
        pytest.skip("no C compiler found (gcc, clang or $CC)")
    func = tl.schedule(tl.op(SRC), N=N).lowered()
    src = emit_c(func)
    assert src.count("tl_workspace_take(&tl_workspace_") == 2 and "__attribute__((destructor))" in src
    lib = ctypes.CDLL(str(compile_c([src], tmp_path / "chain.so")))
    fn = lib.chain
    fn.restype, fn.argtypes = ctypes.c_int32, [ctypes.c_void_p, ctypes.c_void_p]
    A = inputs(2)

    def call(a, out):
        assert fn(a.ctypes.data, out.ctypes.data) == 0
    results = _concurrent_calls(call, A)
    assert all(r is True for r in results), results
    getattr(lib, f"chain{RELEASE_SUFFIX}")()
    out = np.empty_like(A)
    call(A, out)
    np.testing.assert_array_equal(out, expected(A))


HARNESS = """
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
int32_t chain(const float *A, float *C);
void chain_release_workspace(void);
int main(void) {
    size_t n = %d;
    float *A = malloc(n * sizeof *A), *C = malloc(n * sizeof *C);
    for (size_t i = 0; i < n; i++) A[i] = (float)(i %% 13) - 6.0f;
    for (int r = 0; r < 3; r++) {
        if (chain(A, C) != 0) return 2;
        for (size_t i = 0; i < n; i++) {
            float b = A[i] * 2.0f;
            if (C[i] != (b + 1.0f) * b - A[i]) { printf("wrong at %%zu\\n", i); return 3; }
        }
        if (r == 1) chain_release_workspace();  /* freed mid-way: the next call allocates again */
    }
    chain_release_workspace();
    free(A); free(C);
    return 0;
}
"""


@pytest.mark.slow
def test_kept_temporaries_neither_leak_nor_double_free_under_asan(tmp_path):
    try:
        cc = find_c_compiler()
    except tl.BuildError:
        pytest.skip("no C compiler found (gcc, clang or $CC)")
    from test_codegen_c import asan_available
    if not asan_available():
        pytest.skip("AddressSanitizer is not available with this C compiler")
    (tmp_path / "kernel.c").write_text(emit_c(tl.schedule(tl.op(SRC), N=N).lowered()))
    (tmp_path / "main.c").write_text(HARNESS % N)
    exe = tmp_path / "prog"
    subprocess.run([*cc, "-O1", "-g", "-std=gnu99", "-fsanitize=address", "-fno-omit-frame-pointer",
                    str(tmp_path / "kernel.c"), str(tmp_path / "main.c"), "-o", str(exe), "-lm"],
                   check=True, capture_output=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True,
                         env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0"})
    assert run.returncode == 0, run.stdout[-500:] + run.stderr[-3000:]
