"""Expected-error tests for ``tl.build`` (sizes that do not fit) and for calling a Kernel (arrays that do not
fit), plus positive tests of the calling conventions: out=, several outputs, 0-d outputs, the kernel cache
and calls from several threads.

Run: ``.venv/bin/pytest tests/codegen/test_build_errors.py -q``
"""

from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest

import tensorlang as tl

MATMUL = "def matmul(A: f32[M, K], B: f32[K, N]) -> C:\n    C[m, n] += A[m, k] * B[k, n]"
SCALE = "def scale(X: f32[N]) -> Y:\n    Y[i] = X[i] * 2.0"


@pytest.fixture(scope="module")
def matmul():
    return tl.op(MATMUL)


@pytest.fixture(scope="module")
def mm_kernel(matmul):
    return tl.build(matmul, M=2, K=3, N=4)


@pytest.fixture(scope="module")
def scale_kernel():
    return tl.build(tl.op(SCALE), N=4)


def mm_args():
    rng = np.random.default_rng(0)
    return rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)


def build_error(op, **sizes) -> str:
    with pytest.raises(tl.BuildError) as info:
        tl.build(op, **sizes)
    return str(info.value)


def call_error(kernel, *args, **kw) -> str:
    with pytest.raises(tl.BuildError) as info:
        kernel(*args, **kw)
    return str(info.value)


# ---- sizes at build -----------------------------------------------------------------------------------------


def test_missing_size_lists_missing_name_and_all_sizes(matmul):
    msg = build_error(matmul, M=2, K=3)
    assert "missing size N" in msg
    assert "M=..., K=..., N=..." in msg


def test_missing_sizes_plural(matmul):
    msg = build_error(matmul, M=2)
    assert "missing sizes K, N" in msg


def test_no_sizes_at_all(matmul):
    msg = build_error(matmul)
    assert "missing sizes M, K, N" in msg


def test_unknown_size_name(matmul):
    msg = build_error(matmul, M=2, K=3, N=4, Q=1)
    assert "unknown size Q" in msg
    assert "the sizes are M, K, N" in msg


@pytest.mark.parametrize("bad", [0, -1, -7])
def test_non_positive_size_in_shape(matmul, bad):
    msg = build_error(matmul, M=bad, K=3, N=4)
    assert f"size M={bad} must be >= 1" in msg


def test_size_too_large_for_64_bit_indices(matmul):
    assert "size M=281474976710656 is too large: indices are 64-bit" in build_error(matmul, M=2**48, K=3, N=4)
    msg = build_error(matmul, M=2**24, K=2**24, N=4)
    assert "input A would have 2.81e+14 elements (16777216 x 16777216); at most 2**48" in msg


def test_output_too_large_for_memory_is_a_clear_memory_error():
    outer = tl.op("def outer(X: f32[N], Y: f32[M]) -> Z:\n    Z[i, j] = X[i] * Y[j]")
    k = tl.build(outer, N=2**23, M=2**23)  # 2**46 floats: 256 TiB
    x = np.zeros(2**23, np.float32)
    with pytest.raises(MemoryError, match=r"outer: cannot allocate the output Z: float32\[8388608, 8388608\], "
                                          r"2.62e\+05 GiB"):
        k(x, x)


def test_kernel_that_cannot_allocate_its_intermediate_is_a_memory_error():
    # T (2**40 floats, 4 TiB) is allocated by the kernel itself: its status says so, and the call raises
    op = tl.op("def f(X: f32[N]) -> S:\n    T[i, j] = X[i] + X[j]\n    S[i] = T[i, 0]\n")
    k = tl.build(tl.schedule(op, N=2**20))  # every stage at the root: T is a buffer
    with pytest.raises(MemoryError, match="f: the kernel could not allocate its temporary buffers"):
        k(np.ones(2**20, np.float32))


def test_negative_int_parameter():
    op = tl.op("def f(A: f32[N], pad: int) -> C:\n    C[i] = A[i - pad] where i in 0:N + 2*pad")
    msg = build_error(op, N=3, pad=-1)
    assert "size pad=-1 must be >= 0" in msg


def test_zero_int_parameter_is_fine():
    op = tl.op("def f(A: f32[N], pad: int) -> C:\n    C[i] = A[i - pad] where i in 0:N + 2*pad")
    k = tl.build(op, N=3, pad=0)
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(k(x), x)


@pytest.mark.parametrize("bad", [2.5, 2.0, "3", True, None])
def test_non_integer_size(matmul, bad):
    msg = build_error(matmul, M=bad, K=3, N=4)
    assert f"size M={bad!r} must be an integer" in msg


def test_numpy_integer_size_is_accepted(matmul):
    k = tl.build(matmul, M=np.int64(2), K=np.int32(3), N=4)
    assert k.output_shapes == {"C": (2, 4)}
    assert all(type(v) is int for v in k.sizes.values())


def test_empty_inferred_range_kernel_larger_than_image():
    op = tl.op("def conv(I: f32[H], W: f32[R]) -> O:\n    O[h] += I[h + r] * W[r]")
    msg = build_error(op, H=2, R=3)
    assert "range of `h` in stage `O`" in msg
    assert "is empty" in msg
    assert "H=2, R=3" in msg
    assert "line 2" in msg


def test_empty_inferred_range_2d_conv():
    op = tl.op("def conv(I: f32[H, W], K: f32[R, S]) -> O:\n    O[y, x] += I[y + r, x + s] * K[r, s]")
    assert tl.build(op, H=3, W=3, R=3, S=3).output_shapes == {"O": (1, 1)}
    msg = build_error(op, H=3, W=2, R=3, S=3)
    assert "range of `x`" in msg and "is empty" in msg


def test_empty_where_range():
    op = tl.op("def f(A: f32[N], p: int) -> C:\n    C[i] = A[i] where i in 0:N - p")
    msg = build_error(op, N=2, p=3)
    assert "range of `i`" in msg and "is empty" in msg


@pytest.mark.parametrize("n,value", [(2, 0), (1, -1)])
def test_input_dimension_expression_below_one(n, value):
    op = tl.op("def f(A: f32[N - 2]) -> C:\n    C[i] = A[i]")
    msg = build_error(op, N=n)
    assert f"input A dimension 0 is N - 2 = {value}" in msg
    assert "must be >= 1" in msg


def test_input_dimension_expression_fits():
    op = tl.op("def f(A: f32[N - 2]) -> C:\n    C[i] = A[i]")
    assert tl.build(op, N=3).input_shapes == {"A": (1,)}


def test_build_of_neither_op_nor_schedule():
    for bad in ("def f(A: f32[N]) -> B:\n    B[i] = A[i]", None, 3):
        with pytest.raises(tl.BuildError) as info:
            tl.build(bad, N=3)
        assert "takes an Op (from tl.op) or a Schedule" in str(info.value)
        assert type(bad).__name__ in str(info.value)


def test_build_of_schedule_with_sizes():
    op = tl.op(SCALE)
    with pytest.raises(tl.BuildError, match="already has its sizes"):
        tl.build(tl.schedule(op, N=4), N=4)


def test_source_with_bad_kind(scale_kernel):
    with pytest.raises(tl.BuildError) as info:
        scale_kernel.source("bogus")
    msg = str(info.value)
    assert "'bogus'" in msg
    for kind in ("'ir'", "'llvm'", "'llvm-unoptimized'", "'asm'"):
        assert kind in msg


def test_source_good_kind(scale_kernel):
    assert "for i" in scale_kernel.source("ir")


# ---- arguments at call time ---------------------------------------------------------------------------------


def test_too_few_arrays(mm_kernel):
    A, _ = mm_args()
    msg = call_error(mm_kernel, A)
    assert "expected 2 input arrays (A, B), got 1" in msg


def test_too_many_arrays(mm_kernel):
    A, B = mm_args()
    msg = call_error(mm_kernel, A, B, A)
    assert "expected 2 input arrays (A, B), got 3" in msg


def test_list_instead_of_ndarray(mm_kernel):
    A, B = mm_args()
    msg = call_error(mm_kernel, A.tolist(), B)
    assert "input A must be a numpy array, got list" in msg


def test_wrong_dtype_suggests_astype(mm_kernel):
    A, B = mm_args()
    msg = call_error(mm_kernel, A, B.astype(np.float64))
    assert "input B has dtype float64, expected float32" in msg
    assert "B.astype(np.float32)" in msg


def test_wrong_shape_names_expected_shape(mm_kernel):
    A, B = mm_args()
    msg = call_error(mm_kernel, A.reshape(3, 2), B)
    assert "input A has shape (3, 2), expected (2, 3)" in msg
    assert "M=2" in msg and "K=3" in msg and "N=4" in msg


def test_wrong_rank(mm_kernel):
    A, B = mm_args()
    msg = call_error(mm_kernel, A.reshape(6), B)
    assert "input A has shape (6,), expected (2, 3)" in msg


def test_non_contiguous_transposed_view(mm_kernel):
    A, B = mm_args()
    At = np.ascontiguousarray(A.T).T  # right shape and dtype, Fortran order
    assert At.shape == A.shape and not At.flags.c_contiguous
    msg = call_error(mm_kernel, At, B)
    assert "input A is not C-contiguous" in msg
    assert "np.ascontiguousarray(A)" in msg


def test_non_contiguous_strided_view(scale_kernel):
    x = np.arange(8, dtype=np.float32)[::2]
    msg = call_error(scale_kernel, x)
    assert "not C-contiguous" in msg


def test_out_with_wrong_shape(mm_kernel):
    A, B = mm_args()
    msg = call_error(mm_kernel, A, B, out=np.empty((4, 2), np.float32))
    assert "output C has shape (4, 2), expected (2, 4)" in msg


def test_out_with_wrong_dtype(mm_kernel):
    A, B = mm_args()
    msg = call_error(mm_kernel, A, B, out=np.empty((2, 4), np.float64))
    assert "output C has dtype float64, expected float32" in msg


def test_out_not_contiguous(mm_kernel):
    A, B = mm_args()
    out = np.empty((4, 2), np.float32).T
    msg = call_error(mm_kernel, A, B, out=out)
    assert "output C is not C-contiguous" in msg


def test_read_only_out(mm_kernel):
    A, B = mm_args()
    out = np.zeros((2, 4), np.float32)
    out.flags.writeable = False
    msg = call_error(mm_kernel, A, B, out=out)
    assert "output C (out=) is read-only" in msg
    assert not out.any()


def test_out_same_array_as_input(scale_kernel):
    x = np.arange(4, dtype=np.float32)
    msg = call_error(scale_kernel, x, out=x)
    assert "output Y (out=) overlaps input X" in msg
    np.testing.assert_array_equal(x, np.arange(4, dtype=np.float32))


def test_out_overlapping_view_of_input(scale_kernel):
    buf = np.arange(8, dtype=np.float32)
    msg = call_error(scale_kernel, buf[:4], out=buf[2:6])
    assert "overlaps input X" in msg


def test_out_wrong_count_for_several_outputs():
    k = tl.build(tl.op("def f(A: f32[N]) -> (B, C):\n    B[i] = A[i] + 1.0\n    C[i] = A[i] * 2.0"), N=3)
    msg = call_error(k, np.zeros(3, np.float32), out=np.empty(3, np.float32))
    assert "out= needs a tuple of 2 arrays (B, C), got ndarray" in msg


def test_out_list_of_numbers(scale_kernel):
    msg = call_error(scale_kernel, np.zeros(4, np.float32), out=[0.0, 0.0, 0.0, 0.0])
    assert "must be a numpy array" in msg


# ---- positive tests -----------------------------------------------------------------------------------------


def test_out_is_filled_and_returned(mm_kernel):
    A, B = mm_args()
    out = np.full((2, 4), np.nan, np.float32)
    r = mm_kernel(A, B, out=out)
    assert r is out
    np.testing.assert_allclose(out, A @ B, rtol=1e-5, atol=1e-6)


def test_returns_new_array_without_out(mm_kernel):
    A, B = mm_args()
    r1, r2 = mm_kernel(A, B), mm_kernel(A, B)
    assert isinstance(r1, np.ndarray) and r1.dtype == np.float32 and r1.shape == (2, 4)
    assert not np.shares_memory(r1, r2)
    np.testing.assert_allclose(r1, A @ B, rtol=1e-5, atol=1e-6)


def test_several_outputs_return_a_tuple():
    k = tl.build(tl.op("def f(A: f32[N]) -> (B, C):\n    B[i] = A[i] + 1.0\n    C[i] = A[i] * 2.0"), N=3)
    x = np.arange(3, dtype=np.float32)
    r = k(x)
    assert isinstance(r, tuple) and len(r) == 2
    np.testing.assert_array_equal(r[0], x + 1)
    np.testing.assert_array_equal(r[1], x * 2)


def test_several_outputs_with_out_tuple():
    k = tl.build(tl.op("def f(A: f32[N]) -> (B, C):\n    B[i] = A[i] + 1.0\n    C[i] = A[i] * 2.0"), N=3)
    x = np.arange(3, dtype=np.float32)
    b, c = np.empty(3, np.float32), np.empty(3, np.float32)
    k(x, out=(b, c))
    np.testing.assert_array_equal(b, x + 1)
    np.testing.assert_array_equal(c, x * 2)


def test_zero_d_output():
    k = tl.build(tl.op("def f(A: f32[N]) -> S:\n    S += A[i]"), N=5)
    assert k.output_shapes == {"S": ()}
    A = np.arange(1, 6, dtype=np.float32)
    r = k(A)
    assert isinstance(r, np.ndarray) and r.shape == () and r.dtype == np.float32
    assert r == A.sum() == 15.0


def test_zero_d_output_with_out():
    k = tl.build(tl.op("def f(A: f32[N]) -> S:\n    S += A[i]"), N=5)
    out = np.zeros((), np.float32)
    A = np.arange(1, 6, dtype=np.float32)
    assert k(A, out=out) is out
    assert out == 15.0


def test_data_address_is_the_first_element_for_every_kind_of_array():
    # the kernel call reads the data pointer from the array object (five times faster than a.ctypes.data);
    # it must agree with ctypes on views at an offset, read-only, 0-d, empty, Fortran-ordered and memmapped arrays
    from tensorlang.runtime import data_address
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    ro = base.copy()
    ro.flags.writeable = False
    arrays = [base, base[1:], base[:, 2:], base[2], base[1, 3:4], np.ones((), np.float32), ro,
              np.empty((0, 3), np.float32), np.asfortranarray(base), np.frombuffer(b"abcdefgh", np.uint8)[3:],
              np.ma.masked_array(base)]
    for a in arrays:
        assert data_address(a) == a.ctypes.data, a


def test_fast_and_checked_calls_agree_and_errors_still_name_the_argument(mm_kernel):
    # a plain call takes the fast path; a subclass or an odd array takes the checked one: same results, and the
    # checked one still says what is wrong with which argument
    A, B = mm_args()
    fast = mm_kernel(A, B)
    checked = mm_kernel(np.asarray(A).view(np.ndarray), np.ma.masked_array(B).data)
    np.testing.assert_array_equal(fast, checked)
    with pytest.raises(tl.BuildError, match="input B has dtype float64"):
        mm_kernel(A, B.astype(np.float64))
    with pytest.raises(tl.BuildError, match="input A has shape"):
        mm_kernel(A[:1], B)
    with pytest.raises(tl.BuildError, match="input A is not C-contiguous"):
        mm_kernel(np.asfortranarray(A), B)
    with pytest.raises(tl.BuildError, match="input A must be a numpy array"):
        mm_kernel(A.tolist(), B)


def test_kernel_cache_returns_same_kernel():
    op = tl.op(SCALE)
    k1 = tl.build(op, N=5)
    assert tl.build(op, N=5) is k1
    assert tl.build(tl.op(SCALE), N=5) is k1  # same program text, same sizes
    k2 = tl.build(op, N=6)
    assert k2 is not k1
    assert k2.input_shapes == {"X": (6,)}


def test_kernel_called_from_two_threads():
    k = tl.build(tl.op(SCALE), N=64)
    inputs = [np.arange(64, dtype=np.float32) + t for t in range(16)]

    def run(x):
        for _ in range(20):
            y = k(x)
        return y

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, inputs))
    for x, y in zip(inputs, results):
        np.testing.assert_array_equal(y, x * 2)


def test_kernel_with_temporaries_called_from_two_threads():
    # an intermediate stage is a buffer inside the kernel: calls at once must not share it
    k = tl.build(tl.op("def f(A: f32[N]) -> C:\n    T[i] = A[i] + 1.0\n    C[i] = T[i] * T[i]"), N=32)
    inputs = [np.full(32, t, np.float32) for t in range(16)]

    def run(x):
        for _ in range(20):
            y = k(x)
        return y

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(run, inputs))
    for x, y in zip(inputs, results):
        np.testing.assert_array_equal(y, (x + 1) ** 2)


def test_out_list_for_one_output_is_not_an_array(scale_kernel):
    msg = call_error(scale_kernel, np.zeros(4, np.float32), out=[np.empty(4, np.float32)])
    assert "must be a numpy array, got list" in msg


def test_out_wrong_dtype_suggests_an_array_of_that_dtype_not_astype(scale_kernel):
    msg = call_error(scale_kernel, np.zeros(4, np.float32), out=np.empty(4, np.float64))
    assert "expected float32" in msg and "np.empty((4,), np.float32)" in msg and "astype" not in msg


def test_inlining_hundreds_of_stages_into_one_is_a_build_error_not_a_recursion_error():
    n = 400
    lines = [f"def f(A: f32[N]) -> T{n}:", "    T0[i] = A[i] + 1.0"]
    lines += [f"    T{k}[i] = T{k - 1}[i] * 0.5 + 1.0" for k in range(1, n + 1)]
    s = tl.schedule(tl.op("\n".join(lines)), N=8)
    for k in range(n):
        s[f"T{k}"].compute_inline()
    with pytest.raises(tl.BuildError, match=r"nested too deeply to compile .*compute_root some of them"):
        tl.build(s)
    s = tl.schedule(tl.op("\n".join(lines)), N=8)
    for k in range(0, n, 2):  # every other stage inlined: shallow enough
        s[f"T{k}"].compute_inline()
    got = tl.build(s)(np.zeros(8, np.float32))
    want = np.float32(0)
    for _ in range(n + 1):
        want = np.float32(want * np.float32(0.5) + np.float32(1))
    np.testing.assert_allclose(got, np.full(8, want), rtol=1e-6)
