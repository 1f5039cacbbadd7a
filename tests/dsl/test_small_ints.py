"""The small integer types u8, i8, u16, i16 and u32: bit-exact against numpy (same-dtype arithmetic wraps),
casts as numpy's astype between integers, float-to-integer casts and sat_* casts against a numpy formulation of
their definition (truncate toward zero, saturate, NaN -> 0), reductions, an 8-bit box blur, and the errors."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from small_ints import INTS, NP, SMALL, edge_values, float_edges

import tensorlang as tl
from tensorlang.choice import auto_schedule
from tensorlang.codegen_llvm import emit_module

N = 203  # not a multiple of any vector width: the loops' remainders run too


def build(src: str, **sizes):
    return tl.build(tl.op(src), **sizes)


@pytest.mark.parametrize("dt", SMALL)
def test_arithmetic_comparisons_and_min_max_match_numpy_bit_exactly(dt):
    src = (f"def f(A: {dt}[N], B: {dt}[N]) -> (S, D, P, Q, R, MX, MN, LT, GE, EQ, NG, AB):\n"
           "    S[i] = A[i] + B[i]\n    D[i] = A[i] - B[i]\n    P[i] = A[i] * B[i]\n"
           "    Q[i] = A[i] // B[i]\n    R[i] = A[i] % B[i]\n"
           "    MX[i] = max(A[i], B[i])\n    MN[i] = min(A[i], B[i])\n"
           "    LT[i] = A[i] < B[i]\n    GE[i] = A[i] >= B[i]\n    EQ[i] = A[i] == B[i]\n"
           "    NG[i] = -A[i]\n    AB[i] = abs(A[i])\n")
    k = build(src, N=N)
    rng = np.random.default_rng(1)
    a = edge_values(dt, N, rng)
    b = rng.permutation(edge_values(dt, N, rng))
    b[:4] = [0, 1, 0, 1]  # division by zero gives 0, as numpy's (without its warning)
    if dt[0] == "i":
        b[0:2] = -1  # the minimum divided by -1 wraps, as numpy's
    with np.errstate(all="ignore"):
        want = (a + b, a - b, a * b, a // b, a % b, np.maximum(a, b), np.minimum(a, b), a < b, a >= b, a == b,
                -a, np.abs(a))
    got = k(a, b)
    for name, g, w in zip(k.op.outputs, got, want):
        assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w, err_msg=f"{dt} {name}")


def test_u8_wraps_like_numpy():
    k = build("def f(A: u8[N], B: u8[N]) -> (C, D):\n    C[i] = A[i] + B[i]\n    D[i] = A[i] - B[i]", N=2)
    c, d = k(np.array([250, 3], np.uint8), np.array([10, 5], np.uint8))
    assert c.tolist() == [4, 8] and d.tolist() == [240, 254]


@pytest.mark.parametrize("dt", SMALL)
def test_literals_adapt_to_the_tensor_they_meet(dt):
    k = build(f"def f(A: {dt}[N]) -> (B, C, D):\n    B[i] = A[i] * 3 + 7\n    C[i] = A[i] - 1\n"
              "    D[i] = A[i] > 5\n", N=N)
    a = edge_values(dt, N, np.random.default_rng(2))
    t = NP[dt]
    b, c, d = k(a)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(b, a * t(3) + t(7))
        np.testing.assert_array_equal(c, a - t(1))
    np.testing.assert_array_equal(d, a > t(5))
    assert b.dtype == c.dtype == np.dtype(t)


@pytest.mark.parametrize("dt, literal", [("u8", 256), ("u8", -1), ("i8", 128), ("i8", -129), ("u16", 65536),
                                         ("i16", -32769), ("u32", 2**32), ("u32", -3)])
def test_a_literal_outside_the_type_is_an_error_naming_it(dt, literal):
    with pytest.raises(tl.BuildError, match=rf"the integer {literal} \(line 2, column \d+\) is computed as {dt} "
                                            r"here, where it does not fit"):
        build(f"def f(A: {dt}[N]) -> B:\n    B[i] = A[i] + {literal}", N=4)


def test_mixing_two_tensor_dtypes_needs_a_cast():
    with pytest.raises(tl.DSLError, match=r"dtype mismatch in `\+`: u8 and i8; convert one side with u8\(...\) "
                                          r"or i8\(...\)"):
        tl.op("def f(A: u8[N], B: i8[N]) -> C:\n    C[i] = A[i] + B[i]")
    with pytest.raises(tl.DSLError, match=r"dtype mismatch in `\+`: a float value with an u16 tensor"):
        tl.op("def f(A: u16[N]) -> C:\n    C[i] = A[i] + 0.5")
    with pytest.raises(tl.DSLError, match=r"`/` of u8 values"):
        tl.op("def f(A: u8[N]) -> C:\n    C[i] = A[i] / 2")


def pairs(sources, targets):
    """(src, dst) pairs of different types where one of them is a small integer type."""
    return [(a, b) for a in sources for b in targets if a != b and (a in SMALL or b in SMALL)]


@pytest.mark.parametrize("src, dst", pairs(INTS + ("bool",), INTS + ("f32", "f64", "bool")))
def test_integer_casts_are_numpys_astype(src, dst):
    k = build(f"def f(X: {src}[N]) -> Y:\n    Y[i] = {dst}(X[i])", N=N)
    rng = np.random.default_rng(3)
    x = rng.integers(0, 2, N).astype(bool) if src == "bool" else edge_values(src, N, rng)
    np.testing.assert_array_equal(k(x), x.astype(NP[dst]), err_msg=f"{src} -> {dst}")


def float_to_int(x: np.ndarray, dst: str) -> np.ndarray:
    """The definition of a float-to-integer cast, computed with Python integers: NaN gives 0, infinities the
    type's ends, other values truncated toward zero and clamped to the type's range."""
    info = np.iinfo(NP[dst])
    lo, hi = int(info.min), int(info.max)

    def one(v: float) -> int:
        if math.isnan(v):
            return 0
        if math.isinf(v):
            return hi if v > 0 else lo
        return min(max(math.trunc(v), lo), hi)
    return np.array([one(float(v)) for v in x], NP[dst])


@pytest.mark.parametrize("src", ("f32", "f64"))
@pytest.mark.parametrize("dst", INTS)
def test_float_to_integer_casts_truncate_and_saturate(src, dst):
    x = float_edges(src, np.random.default_rng(4))
    k = build(f"def f(X: {src}[N]) -> (Y, Z):\n    Y[i] = {dst}(X[i])\n    Z[i] = sat_{dst}(X[i])", N=len(x))
    y, z = k(x)
    want = float_to_int(x, dst)
    np.testing.assert_array_equal(y, want, err_msg=f"{src} -> {dst}")
    np.testing.assert_array_equal(z, want, err_msg=f"{src} -> sat_{dst}")


@pytest.mark.parametrize("src, dst", pairs(INTS, INTS))
def test_saturating_integer_casts_clamp(src, dst):
    k = build(f"def f(X: {src}[N]) -> Y:\n    Y[i] = sat_{dst}(X[i])", N=N)
    x = edge_values(src, N, np.random.default_rng(5))
    info = np.iinfo(NP[dst])
    want = np.array([min(max(int(v), int(info.min)), int(info.max)) for v in x], NP[dst])
    np.testing.assert_array_equal(k(x), want, err_msg=f"sat_{dst} of {src}")


def test_casts_of_literals_wrap_and_saturate():
    k = build("def f(A: u8[N]) -> (B, C, D, E):\n    B[i] = A[i] + u8(300)\n    C[i] = A[i] + u8(-1)\n"
              "    D[i] = A[i] + sat_u8(300)\n    E[i] = i16(A[i]) + sat_i16(-40000)\n", N=3)
    b, c, d, e = k(np.zeros(3, np.uint8))
    assert b.tolist() == [44] * 3 and c.tolist() == [255] * 3 and d.tolist() == [255] * 3
    assert e.tolist() == [-32768] * 3


@pytest.mark.parametrize("dt", SMALL)
def test_reductions_wrap_and_start_from_the_types_identity(dt):
    src = (f"def f(A: {dt}[M, K]) -> (S, W, MX, MN, P):\n    S[i] += A[i, k]\n    W[i] += i64(A[i, k])\n"
           "    MX[i] max= A[i, k]\n    MN[i] min= A[i, k]\n    P[i] *= A[i, k] where k in 0:3\n")
    k = build(src, M=5, K=37)
    a = edge_values(dt, 5 * 37, np.random.default_rng(6)).reshape(5, 37)
    s, w, mx, mn, p = k(a)
    np.testing.assert_array_equal(s, a.sum(axis=1, dtype=NP[dt]))
    np.testing.assert_array_equal(w, a.astype(np.int64).sum(axis=1))
    np.testing.assert_array_equal(mx, a.max(axis=1))
    np.testing.assert_array_equal(mn, a.min(axis=1))
    np.testing.assert_array_equal(p, a[:, :3].prod(axis=1, dtype=NP[dt]))
    # one value at a type's end: the identity of max= (the lowest value) and of min= (the highest) never wins
    info = np.iinfo(NP[dt])
    for v in (info.min, info.max):
        _, _, mx, mn, _ = k(np.full((5, 37), v, NP[dt]))
        assert mx.tolist() == [v] * 5 and mn.tolist() == [v] * 5


BLUR = """def blur(I: u8[H, W]) -> B:
    S[y, x] = (u16(I[y, x]) + u16(I[y, x + 1]) + u16(I[y, x + 2]) + u16(I[y + 1, x]) + u16(I[y + 1, x + 1])
               + u16(I[y + 1, x + 2]) + u16(I[y + 2, x]) + u16(I[y + 2, x + 1]) + u16(I[y + 2, x + 2]))
    B[y, x] = u8((S[y, x] + 4) // 9)
"""


def blur_numpy(img: np.ndarray) -> np.ndarray:
    h, w = img.shape
    s = sum(img[dy:h - 2 + dy, dx:w - 2 + dx].astype(np.uint16) for dy in range(3) for dx in range(3))
    return ((s + np.uint16(4)) // np.uint16(9)).astype(np.uint8)


def test_an_8_bit_box_blur_is_bit_exact_and_vectorized():
    op = tl.op(BLUR)
    img = np.random.default_rng(7).integers(0, 256, (67, 131), dtype=np.uint8)
    img[:3, :3] = 255  # the largest sum, 9 * 255, fits u16
    want = blur_numpy(img)
    assert tl.build(op, H=67, W=131)(img).tolist() == want.tolist()
    s = tl.schedule(op, H=67, W=131)
    s["S"].compute_inline()
    s["B"].split("x", 32)
    s["B"].vectorize("x_i")
    assert tl.build(s)(img).tolist() == want.tolist()
    picked = auto_schedule(op, {"H": 67, "W": 131}, threads=1)
    assert tl.build(picked)(img).tolist() == want.tolist()
    for sched in (s, picked):  # the 8-bit loads and 16-bit sums are vectors of at least 16 lanes, not scalars
        text = str(emit_module(sched.lowered()))
        i8 = {int(n) for n in re.findall(r"<(\d+) x i8>", text)}
        i16 = {int(n) for n in re.findall(r"<(\d+) x i16>", text)}
        assert i8 and i16 and max(i8) >= 16 and max(i16) >= 16, (i8, i16)


def test_a_u8_image_indexes_a_lookup_table():
    k = build("def f(I: u8[H, W], LUT: f32[256]) -> O:\n    O[y, x] = LUT[I[y, x]]", H=9, W=33)
    img = np.random.default_rng(8).integers(0, 256, (9, 33), dtype=np.uint8)
    lut = np.random.default_rng(9).standard_normal(256).astype(np.float32)
    np.testing.assert_array_equal(k(img, lut), lut[img])


@pytest.mark.parametrize("dt", SMALL)
def test_the_reference_matches_the_kernel(dt):
    src = (f"def f(A: {dt}[N], B: {dt}[N], X: f32[N]) -> (C, D):\n"
           f"    C[i] = max(A[i] * B[i] - 3, A[i] // B[i]) + {dt}(X[i])\n"
           f"    D[i] = sat_{dt}(i64(A[i]) * 1000 - 70000) + sat_{dt}(X[i] * 1000.0)\n")
    op = tl.op(src)
    rng = np.random.default_rng(10)
    a, b = edge_values(dt, N, rng), edge_values(dt, N, rng)
    x = float_edges("f32", rng)[:N]
    x = np.concatenate([x, np.zeros(N - len(x), np.float32)])
    got, want = tl.build(op, N=N)(a, b, x), tl.reference(op, N=N)(a, b, x)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_a_wrong_dtype_argument_is_named():
    k = build("def f(Img: u8[N]) -> B:\n    B[i] = Img[i] + 1", N=4)
    with pytest.raises(tl.BuildError, match=r"Img.*has dtype int8, expected uint8; convert with "
                                            r"Img\.astype\(np\.uint8\)"):
        k(np.zeros(4, np.int8))
    with pytest.raises(tl.BuildError, match=r"Img.*has dtype uint16, expected uint8"):
        k(np.zeros(4, np.uint16))


@pytest.mark.parametrize("dt", ["u8", "u16", "i16"])
def test_max_min_and_clamp_of_python_numbers_are_exact_before_the_conversion(dt):
    # `max(pad, i - 3)` of a size and an index is a Python number: max(2, -3) is 2, then converted; computed in
    # u16 it would be max(2, u16(-3)) = 65533 (the kernel and tl.reference both did that)
    op = tl.op(f"def f(X: {dt}[N], pad: int) -> T:\n"
               "    T[i] = X[i] + max(pad, i - 3) + min(-pad, i) + clamp(i - 5, -pad, pad)")
    X = np.arange(8, dtype=NP[dt]) * 10
    i = np.arange(8)
    with np.errstate(all="ignore"):
        want = (X.astype(np.int64) + np.maximum(2, i - 3) + np.minimum(-2, i) + np.clip(i - 5, -2, 2)).astype(NP[dt])
    np.testing.assert_array_equal(tl.build(op, N=8, pad=2)(X), want)
    np.testing.assert_array_equal(tl.reference(op, N=8, pad=2)(X), want)
