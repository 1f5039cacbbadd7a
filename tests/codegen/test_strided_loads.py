"""Vector loads whose lanes lie 2 to 4 elements apart (a window at a stride: strided convolutions, pools, a
pyramid's downsampling) are one wide masked load and a shuffle (`codegen_llvm._Emitter._strided_load`), not a
gather: checked against numpy for every stride, dtype, vector width and tail, under per-lane guards and tail
masks, and, in a child process, with the input's first and last elements next to pages that may not be read."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.codegen_llvm import MAX_DEINTERLEAVED_STRIDE
from tensorlang.runtime import llvm_ir_of
from tensorlang.target import host_target

NP = {"f32": np.float32, "f64": np.float64, "u8": np.uint8, "i16": np.int16, "i32": np.int32}


def strided(s: int, dt: str, N: int, vector: int, offset: int = 0):
    """O[i] = X[s*i + offset] over i in 0:N, X exactly as long as the last read needs, x vectorized by `vector`."""
    op = tl.op(f"def f(X: {dt}[{s * (N - 1) + offset + 1}]) -> O:\n    O[i] = X[{s}*i + {offset}] where i in 0:{N}")
    sched = tl.schedule(op)
    if vector < N:
        _o, inner = sched["O"].split("i", vector)
        sched["O"].vectorize(inner)
    else:
        sched["O"].vectorize("i")
    return sched


@pytest.mark.parametrize("s", range(2, MAX_DEINTERLEAVED_STRIDE + 1))
@pytest.mark.parametrize("dt", list(NP))
@pytest.mark.parametrize("N, vector", [(64, 16), (37, 16), (14, 14), (7, 8), (33, 32)])
def test_a_strided_read_is_np_slicing_and_no_gather(s, dt, N, vector):
    sched = strided(s, dt, N, vector, offset=1)
    X = (np.random.default_rng(s * N).integers(0, 100, s * (N - 1) + 2)).astype(NP[dt])
    np.testing.assert_array_equal(tl.build(sched)(X), X[1::s][:N])
    _func, ir = llvm_ir_of(sched, host_target())
    assert "masked.gather" not in ir and "masked.load" in ir


def test_a_wider_stride_still_gathers():
    s = MAX_DEINTERLEAVED_STRIDE + 1
    sched = strided(s, "f32", 32, 16)
    X = np.arange(s * 31 + 1, dtype=np.float32)
    np.testing.assert_array_equal(tl.build(sched)(X), X[::s])
    assert "masked.gather" in llvm_ir_of(sched, host_target())[1]


@pytest.mark.parametrize("N", [16, 21, 40])
def test_strided_reads_under_per_lane_guards_read_zero_outside(N):
    # X[2*i - 3] and X[3*i + 1] leave X at both ends for some lanes: zero there, as the padded numpy array
    L = 2 * N
    op = tl.op(f"def f(X: f32[{L}]) -> O:\n    O[i] = X[2*i - 3] * 2.0 + X[3*i + 1] where i in 0:{N}")
    sched = tl.schedule(op)
    _o, inner = sched["O"].split("i", 8)
    sched["O"].vectorize(inner)
    X = np.random.default_rng(N).standard_normal(L).astype(np.float32)
    pad = np.concatenate([np.zeros(3, np.float32), X, np.zeros(3 * N + 4, np.float32)])
    want = pad[np.arange(N) * 2] * 2 + pad[np.arange(N) * 3 + 4]
    np.testing.assert_allclose(tl.build(sched)(X), want, rtol=1e-6)


@pytest.mark.parametrize("W", [33, 64])
def test_strided_reads_under_a_row_guard_and_a_tail(W):
    # X[2*y - 1, ..] leaves X above the first row: a guard the same for every lane (a scalar mask), the tail of
    # the split a mask per lane, and neither in the second read's rows
    op = tl.op(f"def f(X: f32[9, {2 * W}]) -> O:\n"
               f"    O[y, x] = X[2*y - 1, 2*x] + X[y + 3, 2*x + 1] where y in 0:5, x in 0:{W}")
    sched = tl.schedule(op)
    _o, inner = sched["O"].split("x", 16)
    sched["O"].vectorize(inner)
    X = np.random.default_rng(W).standard_normal((9, 2 * W)).astype(np.float32)
    pad = np.concatenate([np.zeros((1, 2 * W), np.float32), X, np.zeros((4, 2 * W), np.float32)])
    want = pad[np.arange(5) * 2][:, ::2] + pad[np.arange(5) + 4][:, 1::2]
    np.testing.assert_array_equal(tl.build(sched)(X), want)
    assert "masked.gather" not in llvm_ir_of(sched, host_target())[1]


def test_a_strided_convolution_vectorized_along_x_matches_numpy():
    src = ("def c(X: f32[C, H, W], F: f32[C, 3, 3]) -> O:\n"
           "    O[c, y, x] += X[c, 2*y + ky, 2*x + kx] * F[c, ky, kx] where y in 0:14, x in 0:17")
    sched = tl.schedule(tl.op(src), C=3, H=29, W=35)
    sched["O"].reorder("c", "y", "ky", "kx", "x")
    sched["O"].vectorize("x")
    rng = np.random.default_rng(2)
    X = rng.standard_normal((3, 29, 35)).astype(np.float32)
    F = rng.standard_normal((3, 3, 3)).astype(np.float32)
    want = sum(X[:, ky:ky + 27:2, kx:kx + 33:2] * F[:, ky, kx][:, None, None] for ky in range(3) for kx in range(3))
    np.testing.assert_allclose(tl.build(sched)(X, F), want, rtol=1e-5, atol=1e-5)


GUARD_PAGES = textwrap.dedent("""
    import ctypes, mmap, sys
    import numpy as np
    import tensorlang as tl
    page = mmap.PAGESIZE
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for s in (2, 3, 4):
        for N in (16, 37, 64):
            L = s * (N - 1) + 1
            nbytes = L * 4
            mm = mmap.mmap(-1, 4 * page)
            base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
            # no access to the page before the buffer and the page after it
            assert libc.mprotect(base, page, 0) == 0 and libc.mprotect(base + 3 * page, page, 0) == 0
            for offset in (page, 3 * page - nbytes):  # the first element after a closed page; the last before one
                X = np.frombuffer(mm, np.float32, L, offset)
                X[:] = np.arange(L, dtype=np.float32)
                # the second program's lanes leave X at both ends (zero there): the masked lanes' neighbours
                # are the buffer's first and last elements
                pad = np.concatenate([np.zeros(s, np.float32), X, np.zeros(s, np.float32)])
                for body, want in ((f"X[{s}*i]", X[::s]),
                                   (f"X[{s}*i + {s}] + X[{s}*i - {s}]", pad[2 * s::s][:N] + pad[::s][:N])):
                    op = tl.op(f"def f(X: f32[{L}]) -> O:\\n    O[i] = {body} where i in 0:{N}")
                    sched = tl.schedule(op)
                    _o, inner = sched["O"].split("i", 16)
                    sched["O"].vectorize(inner)
                    got = tl.build(sched)(X)
                    assert np.array_equal(got, want), (s, N, offset, body)
                del X, got
    print("ok")
""")


def test_strided_loads_read_nothing_outside_the_buffer():
    # a read past the span of the lanes would touch a page that may not be read: the child dies of SIGSEGV
    r = subprocess.run([sys.executable, "-c", GUARD_PAGES], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stderr[-2000:])
