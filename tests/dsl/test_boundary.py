"""Boundary conditions as read modes: `clamp`, `min`, `max` and `abs` in an index (Halide's repeat_edge,
mirror_interior, mirror_image and constant_exterior).

Every result is compared with numpy written here (np.pad with mode "edge", "reflect" or "symmetric", np.clip), never
with tensorlang's own path; the JIT kernel (LLVM), `tl.reference`, the C backend (compiled and called through ctypes)
and an exported shared library each compute them. Integer programs and sums in the order numpy adds are compared
bit for bit.
"""

from __future__ import annotations

import ctypes
import random
import re

import numpy as np
import progen
import pytest
import schedfuzz
from schedule_cases import BOUNDARY_PROGRAMS, PROGRAMS
from schedule_checks import run

import tensorlang as tl
from tensorlang.codegen_c import compile_c, find_c_compiler

try:
    CC = find_c_compiler()
except tl.BuildError:
    CC = None
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler found (gcc, clang or $CC)")

BLUR = ("def blur(I: f32[H, W]) -> O:\n"
        "    O[y, x] = I[clamp(y - 1, 0, H - 1), x] + I[y, x] + I[clamp(y + 1, 0, H - 1), x]")
HBLUR = ("def hblur(I: f32[H, W]) -> O:\n"
         "    O[y, x] = I[y, clamp(x - 1, 0, W - 1)] + I[y, x] + I[y, clamp(x + 1, 0, W - 1)]")
# Halide's mirror_interior (np.pad "reflect") and mirror_image (np.pad "symmetric"), two taps out on each side
MIRROR = ("def mirror(A: i32[N]) -> B:\n"
          "    B[i] = A[N - 1 - abs(N - 1 - abs(i - 2))] + 3 * A[i] + A[N - 1 - abs(N - 1 - abs(i + 2))]")
SYMMETRIC = ("def sym(A: i32[N]) -> B:\n"
             "    B[i] += A[min(max(i + r - 2, 1 - i - r), 2*N - 1 - max(i + r - 2, 1 - i - r))] where r in 0:5, "
             "i in 0:N")
# constant_exterior with a value other than 0: select keeps the value, clamp keeps the read inside
CONSTANT = ("def const_ext(A: f32[N]) -> B:\n"
            "    B[i] = select(i - 1 >= 0, A[max(i - 1, 0)], 7.0) + A[i] where i in 0:N")


def rng(seed=0):
    return np.random.default_rng(seed)


def edge3(a, axis):
    """a[i - 1] + a[i] + a[i + 1] along `axis`, the edge repeated (np.pad "edge"), added left to right."""
    p = np.pad(a, [(1, 1) if d == axis else (0, 0) for d in range(a.ndim)], mode="edge")
    n = a.shape[axis]
    return np.take(p, range(n), axis=axis) + np.take(p, range(1, n + 1), axis=axis) + \
        np.take(p, range(2, n + 2), axis=axis)


def mirror_want(A):
    p = np.pad(A.astype(np.int64), 2, mode="reflect")
    return (p[:-4] + 3 * p[2:-2] + p[4:]).astype(np.int32)


def symmetric_want(A):
    p = np.pad(A.astype(np.int64), 2, mode="symmetric")
    return sum(p[k:k + len(A)] for k in range(5)).astype(np.int32)


# ---- results ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("H,W", [(1, 1), (2, 3), (13, 37), (5, 64)])
@pytest.mark.parametrize("src", [BLUR, HBLUR], ids=["vertical", "horizontal"])
def test_repeat_edge_is_np_pad_edge(src, H, W):
    I = rng(H * W).standard_normal((H, W)).astype(np.float32)
    want = edge3(I, 0 if src is BLUR else 1)
    np.testing.assert_array_equal(tl.build(tl.op(src), H=H, W=W)(I), want)
    np.testing.assert_array_equal(tl.reference(tl.op(src), H=H, W=W)(I), want)


@pytest.mark.parametrize("N", [3, 4, 7, 64, 101])
def test_mirror_interior_is_np_pad_reflect(N):
    A = rng(N).integers(-1000, 1000, N).astype(np.int32)
    op = tl.op(MIRROR)
    np.testing.assert_array_equal(tl.build(op, N=N)(A), mirror_want(A))
    np.testing.assert_array_equal(tl.reference(op, N=N)(A), mirror_want(A))


@pytest.mark.parametrize("N", [2, 3, 16, 35])
def test_mirror_image_is_np_pad_symmetric(N):
    A = rng(N).integers(-1000, 1000, N).astype(np.int32)
    op = tl.op(SYMMETRIC)
    # proven in the loop IR too (max(x, -1 - x) >= 0 as x + (-1 - x) is constant): no guard
    assert tl.schedule(op, N=N).lowered(strict=True).guards == 0
    np.testing.assert_array_equal(tl.build(op, N=N)(A), symmetric_want(A))
    np.testing.assert_array_equal(tl.reference(op, N=N)(A), symmetric_want(A))


def test_constant_exterior_with_select_and_a_clamped_read():
    A = rng(1).standard_normal(19).astype(np.float32)
    want = np.concatenate([[np.float32(7)], A[:-1]]) + A
    op = tl.op(CONSTANT)
    np.testing.assert_array_equal(tl.build(op, N=19)(A), want)
    np.testing.assert_array_equal(tl.reference(op, N=19)(A), want)


def test_clamp_to_a_window_inside_the_tensor_is_np_clip():
    op = tl.op("def win(A: f32[N]) -> B:\n    B[i] = A[clamp(2*i - 3, 2, N - 3)] where i in 0:N")
    A = rng(2).standard_normal(23).astype(np.float32)
    want = A[np.clip(2 * np.arange(23) - 3, 2, 20)]
    np.testing.assert_array_equal(tl.build(op, N=23)(A), want)
    np.testing.assert_array_equal(tl.reference(op, N=23)(A), want)


def test_boundary_index_in_a_two_stage_pipeline_with_a_reduction():
    op = PROGRAMS["box_sym"].op
    A = rng(3).standard_normal((4, 9)).astype(np.float32)
    got = tl.build(op, M=4, N=9)(A)
    np.testing.assert_allclose(got, PROGRAMS["box_sym"].reference(A), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode,np_mode", [("repeat_edge", "edge"), ("mirror_interior", "reflect"),
                                          ("mirror_image", "symmetric")])
def test_a_boundary_mode_reads_a_whole_input_as_np_pad(mode, np_mode):
    op = tl.op(f"def f(I: f32[H, W]) -> O:\n    O[y, x] = {mode}(I)[y - 2, x + 1] + {mode}(I)[y, 2*x] + I[y, x]")
    I = rng(12).standard_normal((6, 9)).astype(np.float32)
    P = np.pad(I, ((2, 0), (0, 9)), mode=np_mode)
    want = P[:6, 1:10] + P[2:8, 0:18:2] + I
    np.testing.assert_array_equal(tl.build(op, H=6, W=9)(I), want)
    np.testing.assert_array_equal(tl.reference(op, H=6, W=9)(I), want)
    assert str(op.stage("O").rhs.a.a.indices[0]) == f"{mode}(y - 2)"


@pytest.mark.parametrize("H,W", [(7, 10), (1, 33)])
def test_a_box_filter_over_a_repeated_edge(H, W):
    op = tl.op("def box3x3(I: f32[H, W]) -> O:\n"
               "    O[y, x] += repeat_edge(I)[y + r - 1, x + s - 1] where y in 0:H, x in 0:W, r in 0:3, s in 0:3")
    I = rng(14).standard_normal((H, W)).astype(np.float32)
    P = np.pad(I.astype(np.float64), 1, mode="edge")
    want = sum(P[r:r + H, s:s + W] for r in range(3) for s in range(3))
    np.testing.assert_allclose(tl.build(op, H=H, W=W)(I), want, rtol=1e-5, atol=1e-5)


def test_constant_exterior_reads_the_value_outside():
    op = tl.op("def f(I: i32[H, W]) -> O:\n    O[y, x] = constant_exterior(I, -5)[y - 1, x + 1] where y in 0:H+1, "
               "x in 0:W")
    I = rng(13).integers(-100, 100, (4, 5)).astype(np.int32)
    want = np.pad(I, ((1, 1), (0, 1)), constant_values=-5)[:5, 1:6]
    np.testing.assert_array_equal(tl.build(op, H=4, W=5)(I), want)
    np.testing.assert_array_equal(tl.reference(op, H=4, W=5)(I), want)


@pytest.mark.parametrize("text,needle", [
    ("repeat_edge(B)[y]", "`repeat_edge(I)[i, ...]` reads an input I"),
    ("repeat_edge(I, 1)[y]", "`repeat_edge(I)[i, ...]` reads an input I"),
    ("constant_exterior(I)[y]", "`constant_exterior(I, c)[i, ...]` reads an input I"),
    ("repeat_edge(I)[y, y]", "wrong number of indices for `I`: 2 given, 1 expected"),
    ("repeat_edge(I)[J[y]]", "an index of `repeat_edge(I)[i, ...]` is affine"),
    ("repeat_edge(I) + 1.0", "`repeat_edge(...)` is read like a tensor"),
])
def test_boundary_mode_errors(text, needle):
    msg = dsl_error(tl.op, f"def f(I: f32[H], J: i32[H]) -> O:\n    B[y] = I[y] + f32(J[y])\n    O[y] = {text} + B[y]")
    assert needle in msg and "line 3, column" in msg, msg
    assert "reserved word" in dsl_error(tl.op, "def f(repeat_edge: f32[H]) -> O:\n    O[y] = repeat_edge[y]")


# ---- ranges and the bounds proof ------------------------------------------------------------------------------------

def dsl_error(fn, *args, **kw) -> str:
    with pytest.raises(tl.DSLError) as info:
        fn(*args, **kw)
    return str(info.value)


def test_an_index_only_in_boundary_indices_needs_where():
    msg = dsl_error(tl.op, "def f(I: f32[H]) -> O:\n    O[y] = I[clamp(y - 1, 0, H - 1)]")
    assert "cannot infer the range of `y`" in msg and "boundary indices" in msg and "where y in" in msg
    assert "line 2, column 7" in msg
    msg = dsl_error(tl.op, "def f(I: f32[H]) -> O:\n    O += I[clamp(r - 1, 0, H - 1)]")
    assert "index `r` is used only in a boundary index" in msg and "where r in" in msg
    op = tl.op("def f(I: f32[H]) -> O:\n    O[y] = I[clamp(y - 1, 0, H - 1)] where y in 0:H + 2")
    I = rng(4).standard_normal(5).astype(np.float32)
    np.testing.assert_array_equal(tl.build(op, H=5)(I), I[np.clip(np.arange(7) - 1, 0, 4)])


def test_the_range_comes_from_the_other_reads_not_the_boundary_one():
    op = tl.op("def f(I: f32[H], J: f32[K]) -> O:\n    O[y] = I[min(y, H - 1)] + J[y]")
    assert tl.schedule(op, H=3, K=8).bound.shapes["O"] == (8,)  # from J, not narrowed by I
    I, J = rng(5).standard_normal(3).astype(np.float32), rng(6).standard_normal(8).astype(np.float32)
    np.testing.assert_array_equal(tl.build(op, H=3, K=8)(I, J), I[np.minimum(np.arange(8), 2)] + J)


@pytest.mark.parametrize("index,col,shown", [
    ("min(y + 1, H)", 14, "1..5"),                       # one past the end
    ("max(y - 1, -1)", 14, "-1..3"),                     # one before the start
    ("H - 1 - abs(H - 1 - abs(y - 9))", 14, "-1..3"),   # a mirror that reflects too far for H=5
])
def test_a_boundary_index_that_may_leave_its_tensor_is_an_error(index, col, shown):
    op = tl.op(f"def f(I: f32[H], J: f32[H]) -> O:\n    O[y] = I[{index}] + J[y]")
    msg = dsl_error(tl.build, op, H=5)
    assert f"line 2, column {col}" in msg, msg
    assert f"`I` dimension 0 may be read at {shown}" in msg and "has extent 5" in msg, msg
    with pytest.raises(tl.DSLError):
        tl.reference(op, H=5)


def test_a_mirror_that_fits_some_sizes_only():
    op = tl.op(MIRROR)
    assert "may be read at" in dsl_error(tl.build, op, N=2)  # reflecting 2 out needs 3 elements
    tl.build(op, N=3)


@pytest.mark.parametrize("index,needle", [
    ("floor(y)", "`floor` cannot be called in an index"),
    ("clamp(y, 0)", "`clamp` takes 3 arguments, 2 given"),
    ("abs(y) * abs(y)", "non-affine index: a product of index expressions"),
    ("y * min(y, 2)", "non-affine index: a product of index expressions"),
    ("min(y // H, H - 1)", "an index divides only by a positive integer (`y // 2`), not by `H`"),
    ("y % 0", "an index divides only by a positive integer (`y % 2`), not by `0`"),
    ("y // -2", "an index divides only by a positive integer"),
    ("y / 2", "an index is affine in index variables"),
    ("min(y, H - 1, key=1)", "takes no keyword arguments"),
])
def test_malformed_boundary_indices_are_errors(index, needle):
    msg = dsl_error(tl.op, f"def f(I: f32[H], J: f32[H]) -> O:\n    O[y] = I[{index}] + J[y]")
    assert needle in msg and "line 2, column" in msg, msg


def test_a_boundary_index_is_proven_without_a_guard_for_odd_splits():
    s = tl.schedule(tl.op(HBLUR), H=3, W=13)
    _xo, xi = s["O"].split("x", 8)
    s["O"].vectorize(xi)
    func = s.lowered(strict=True)  # strict: a read that needed a guard would raise
    assert func.guards == 0
    I = rng(7).standard_normal((3, 13)).astype(np.float32)
    np.testing.assert_array_equal(tl.build(s)(I), edge3(I, 1))


MIRROR_BY_ONE = ("def mirror(A: i32[N]) -> B:\n"
                 "    B[i] = A[N - 1 - abs(N - 1 - abs(i - 1))] + 2 * A[i] + A[N - 1 - abs(N - 1 - abs(i + 1))]\n")


@pytest.mark.parametrize("N", [2, 4, 5])
def test_a_cached_tile_that_runs_past_the_domain_holds_the_boundary_reads_there(N):
    """A split of 3 over N points computes its whole last tile into the cache_write buffer, also past N, where the
    mirror of i + 1 is -1: the cache_read region reaches there too (read as 0 outside A), so strict lowering proves
    every read inside the local buffer (it once held only 0..N-1) and the kept points are np.pad's reflect."""
    s = tl.schedule(tl.op(MIRROR_BY_ONE), N=N)
    s["B"].split("i", 3)
    s["B"].cache_read("A", "i_i")
    s["B"].cache_write("i_i")
    s["B"].reorder("i_i", "i_o")
    s.lowered(strict=True)
    A = rng(N).integers(-50, 50, N).astype(np.int32)
    p = np.pad(A.astype(np.int64), 1, mode="reflect")
    np.testing.assert_array_equal(tl.build(s)(A), (p[:-2] + 2 * p[1:-1] + p[2:]).astype(np.int32))


# ---- // and % by integers: upsampling and tiling -------------------------------------------------------------------

UPSAMPLE = "def up(I: f32[H, W]) -> O:\n    O[y, x] = I[y // 2, x // 2] where y in 0:2*H, x in 0:2*W"


@pytest.mark.parametrize("vector", [None, 4, 8])
@pytest.mark.parametrize("H, W", [(5, 7), (1, 1), (16, 33)])
def test_an_upsampling_by_floor_division_is_np_repeat(H, W, vector):
    s = tl.schedule(tl.op(UPSAMPLE), H=H, W=W)
    if vector:
        _xo, xi = s["O"].split("x", vector)
        s["O"].vectorize(xi)
        s["O"].parallel("y")
    s.lowered(strict=True)  # proven inside: y // 2 lies in 0..H-1 for y in 0..2H-1
    I = rng(3).standard_normal((H, W)).astype(np.float32)
    np.testing.assert_array_equal(tl.build(s)(I), np.repeat(np.repeat(I, 2, axis=0), 2, axis=1))


def test_a_remainder_index_tiles_a_tensor_as_np_tile():
    op = tl.op("def tile(A: i32[3, M], N: int) -> B:\n    B[i, j] = A[i % 3, j] - A[(i + 2) % 3, j] where i in 0:N")
    A = rng(4).integers(-50, 50, size=(3, 6)).astype(np.int32)
    want = np.tile(A, (4, 1))[:10] - np.tile(np.roll(A, -2, axis=0), (4, 1))[:10]
    np.testing.assert_array_equal(tl.build(op, M=6, N=10)(A), want)


def test_a_floor_division_that_may_leave_its_tensor_is_an_error():
    # (y - 1) // 2 is -1 at y = 0: refused with the values it may take, and a clamp brings it in
    msg = dsl_error(tl.build, tl.op("def f(I: f32[H]) -> O:\n    O[y] = I[(y - 1) // 2] where y in 0:2*H"), H=4)
    assert "`I` dimension 0 may be read at -1..3 by the boundary index `(y - 1) // 2`" in msg, msg
    k = tl.build(tl.op("def f(I: f32[H]) -> O:\n    O[y] = I[max(y - 1, 0) // 2] where y in 0:2*H"), H=4)
    I = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(k(I), I[np.maximum(np.arange(8) - 1, 0) // 2])


@needs_cc
def test_the_c_backend_floor_divides_an_index(tmp_path):
    k = tl.build(tl.op(UPSAMPLE), H=3, W=5)
    I = rng(5).standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_array_equal(_c_call(k, tmp_path, I), np.repeat(np.repeat(I, 2, axis=0), 2, axis=1))


# ---- vector code -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("W,split", [(32, 16), (13, 8), (3, 4), (40, 40)])
def test_a_clamp_along_the_vector_loop_loads_the_interior_and_gathers_the_borders(W, split):
    s = tl.schedule(tl.op(HBLUR), H=4, W=W)
    _xo, xi = s["O"].split("x", split)
    s["O"].vectorize(xi)
    assert "# vectorized" in s.lower()
    k = tl.build(s)
    text = k.source("llvm-unoptimized")
    # each clamped read: a contiguous vector load where every lane is inside the clamp, else a gather of the lanes
    gathers = len(re.findall(r'call <\d+ x float> @"llvm\.masked\.gather', text))
    loads = len(re.findall(r'= load <\d+ x float>|call <\d+ x float> @"llvm\.masked\.load', text))
    assert gathers >= 2 and loads > gathers, text  # a load for each gather, and those of the plain read I[y, x]
    assert re.search(r"fadd contract <\d+ x float>", text)  # the arithmetic stays in vectors
    I = rng(8).standard_normal((4, W)).astype(np.float32)
    np.testing.assert_array_equal(k(I), edge3(I, 1))


def test_the_auto_scheduler_vectorizes_a_blur_with_edges():
    k = tl.build(tl.op(BLUR), H=64, W=64)
    assert k.schedule_source == "auto" and "# vectorized" in k.schedule.lower()
    I = rng(9).standard_normal((64, 64)).astype(np.float32)
    np.testing.assert_array_equal(k(I), edge3(I, 0))


# ---- schedules --------------------------------------------------------------------------------------------------

def _split_vectorize_parallel(s):
    yo, yi = s["O"].split("y", 4)
    s["O"].parallel(yo)
    xo, xi = s["O"].split("x", 8)
    s["O"].reorder(yo, yi, xo, xi)
    s["O"].vectorize(xi)


def _compute_at(s):
    yo, _yi = s["O"].split("y", 3)
    s["B"].compute_at(s["O"], yo)


def _compute_at_inner(s):
    s["B"].compute_at(s["O"], "x")


def _inline(s):
    s["B"].compute_inline()
    s["O"].vectorize("x")


def _cache_read(s):
    yo, _yi = s["O"].split("y", 4)
    s["O"].cache_read("B", yo)


def _reorder_unroll(s):
    s["O"].reorder("x", "y")
    s["B"].unroll("x") if s.sizes["W"] <= 8 else s["B"].split("x", 4)


@pytest.mark.parametrize("schedule", [_split_vectorize_parallel, _compute_at, _compute_at_inner, _inline, _cache_read,
                                      _reorder_unroll])
@pytest.mark.parametrize("sizes", [dict(H=7, W=13), dict(H=1, W=5)])
def test_schedules_of_an_edge_blur(schedule, sizes):
    s = tl.schedule(PROGRAMS["blur_edge"].op, **sizes)
    schedule(s)
    run(s)  # strict lowering, no guard, against np.pad(mode="edge")


@pytest.mark.parametrize("name", BOUNDARY_PROGRAMS)
@pytest.mark.parametrize("seed", range(3))
def test_fuzzed_schedules_of_boundary_programs(name, seed):
    src = progen.Src.from_random(random.Random(100 * seed + BOUNDARY_PROGRAMS.index(name)))
    case = schedfuzz.program_case(name, src)
    try:
        for outcome in schedfuzz.run_schedule(case, src):
            assert outcome.startswith(("checked", "skipped (known bug")), outcome
    finally:
        tl.clear_cache()


# ---- the C backend and exported libraries --------------------------------------------------------------------------

def _c_call(k, tmp_path, *inputs):
    """Run kernel `k` through the C backend (its source compiled by the system C compiler, called by ctypes)."""
    fn = getattr(ctypes.CDLL(str(compile_c(k.source("c"), tmp_path / f"{k.op.name}.so"))), k.op.name)
    fn.restype, fn.argtypes = ctypes.c_int32, [ctypes.c_void_p] * (len(inputs) + 1)
    (o,) = k.op.outputs
    out = np.full(k.output_shapes[o], -77, k.output_dtypes[o])
    assert fn(*[a.ctypes.data for a in inputs], out.ctypes.data) == 0
    return out


@needs_cc
@pytest.mark.parametrize("vectorize", [False, True])
def test_the_c_backend(vectorize, tmp_path):
    s = tl.schedule(tl.op(MIRROR), N=37)
    h = tl.schedule(tl.op(HBLUR), H=3, W=29)
    if vectorize:
        _io, ii = s["B"].split("i", 8)
        s["B"].vectorize(ii)
        _xo, xi = h["O"].split("x", 8)
        h["O"].vectorize(xi)
    A = rng(10).integers(-1000, 1000, 37).astype(np.int32)
    np.testing.assert_array_equal(_c_call(tl.build(s), tmp_path, A), mirror_want(A))
    I = rng(15).standard_normal((3, 29)).astype(np.float32)
    np.testing.assert_array_equal(_c_call(tl.build(h), tmp_path, I), edge3(I, 1))


@needs_cc
def test_an_exported_library(tmp_path):
    s = tl.schedule(tl.op(HBLUR), H=5, W=29)
    _xo, xi = s["O"].split("x", 8)
    s["O"].vectorize(xi)
    tl.build(s).export(tmp_path, "so")
    k = tl.load(tmp_path)
    I = rng(11).standard_normal((5, 29)).astype(np.float32)
    np.testing.assert_array_equal(k(I), edge3(I, 1))
