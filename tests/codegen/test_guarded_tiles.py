"""A register tile whose vector runs past the extent (the last tile of a split that does not divide its variable):
its guarded lanes are read and written as whole vectors with a select, so that LLVM keeps the tile in registers;
numpy is the oracle."""
from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.runtime import llvm_ir_of
from tensorlang.target import host_target, optimized_module, target_machine

DEPTHWISE = """def dw(I: f32[C, H + 2, W + 2], K: f32[C, 3, 3]) -> O:
    O[c, h, w] += I[c, h + r, w + s] * K[c, r, s]
"""


def depthwise(W: int, split: int, dtype: str = "f32"):
    op = tl.op(DEPTHWISE.replace("f32", dtype))
    s = tl.schedule(op, C=3, H=5, W=W)
    s["O"].split("w", split, outer="w_o", inner="w_i")
    s["O"].reorder("c", "w_o", "r", "s", "h", "w_i")
    s["O"].unroll("h")
    s["O"].unroll("r")
    s["O"].unroll("s")
    s["O"].vectorize("w_i")
    s["O"].cache_write("w_o")
    return s


def numpy_depthwise(I, K, H, W, acc=np.float64):
    """The 3x3 depthwise convolution of `I` by `K`, accumulated in `acc` (float64, or int64 for integers)."""
    out = np.zeros((I.shape[0], H, W), acc)
    for r in range(3):
        for s in range(3):
            out += I[:, r:r + H, s:s + W].astype(acc) * K[:, r, s, None, None]
    return out


@pytest.mark.parametrize("W,split", [(28, 16), (13, 8), (7, 16), (33, 32), (16, 16)])
def test_a_tile_that_runs_past_the_extent_matches_numpy(W, split):
    rng = np.random.default_rng(W * 100 + split)
    I = rng.standard_normal((3, 7, W + 2)).astype(np.float32)
    K = rng.standard_normal((3, 3, 3)).astype(np.float32)
    got = tl.build(depthwise(W, split))(I, K)
    np.testing.assert_allclose(got, numpy_depthwise(I, K, 5, W), rtol=1e-5, atol=1e-5)


def test_the_guarded_tile_is_kept_in_registers():
    """No masked store into the tile and no stack slot left after LLVM's optimisation: only the output's last
    vector of each row is masked (5 rows)."""
    t = host_target()
    if t.vector_bits() < 256:
        pytest.skip("needs a vector register of 8 floats or more")
    text = llvm_ir_of(depthwise(28, 16), t)[1]
    optimized = str(optimized_module(text, t, target_machine(t)))
    assert " alloca " not in optimized
    assert optimized.count("call void @llvm.masked.store") <= 5


def test_an_integer_tile_past_the_extent_wraps_as_numpy():
    """The blended lanes keep what the tile held: an i32 sum that wraps, checked element by element."""
    rng = np.random.default_rng(7)
    I = rng.integers(-2**30, 2**30, (3, 7, 15)).astype(np.int32)
    K = rng.integers(-5, 6, (3, 3, 3)).astype(np.int32)
    got = tl.build(depthwise(13, 8, "i32"))(I, K)
    want = numpy_depthwise(I, K, 5, 13, np.int64)
    np.testing.assert_array_equal(got, ((want + 2**31) % 2**32 - 2**31).astype(np.int32))
