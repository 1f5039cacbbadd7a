"""Vector loads whose lanes sit at the same constant offsets from the first lane in every vector, but at no single
stride (a fused loop over an interleaved pair, ``x = o*32 + i // 2``; an upsampling read ``X[x // 2]``), are one
contiguous load of the elements they span and a shuffle (`codegen_llvm._Emitter._shuffled_load`), not a gather:
checked against numpy for several dtypes, vector widths (including vectors split into pieces), offsets either side
and pairs read across the pair's edge; and the simplification that makes such indices visible,
``(o*64 + i) // 2 == o*32 + i // 2``, against Python's own floor division."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import tensorlang as tl
from tensorlang.codegen_llvm import MAX_SHUFFLED_SPAN
from tensorlang.ir import BinOp, IntImm, Neg, Var
from tensorlang.runtime import llvm_ir_of
from tensorlang.simplify import simplify
from tensorlang.target import host_target

NP = {"f32": np.float32, "u8": np.uint8, "i16": np.int16, "f64": np.float64}


def _pairs(dt: str, M: int, vector: int):
    """B[y, x, d] = A[y, x, d] + the other element of the pair (across the pair's edge for d = 1), (x, d) fused and
    vectorized `vector` wide."""
    op = tl.op(f"def f(A: {dt}[N, M, 2]) -> B:\n"
               f"    B[y, x, d] = A[y, x, d] + select(d == 0, A[y, x, 1], A[y, x + 1, 0]) "
               f"where y in 0:N, x in 0:M-1, d in 0:2")
    s = tl.schedule(op, N=3, M=M)
    h = s["B"]
    _o, inner = h.split(h.fuse("x", "d"), vector)
    h.vectorize(inner)
    return s


@pytest.mark.parametrize("dt", list(NP))
@pytest.mark.parametrize("vector", [8, 16, 32, 64])
def test_a_fused_interleaved_pair_is_read_by_shuffles_not_gathers(dt, vector):
    M = vector + 1  # (M - 1) * 2 elements a row: a whole number of vectors
    s = _pairs(dt, M, vector)
    A = np.random.default_rng(vector).integers(0, 50, (3, M, 2)).astype(NP[dt])
    want = np.empty((3, M - 1, 2), NP[dt])
    want[:, :, 0] = A[:, :-1, 0] + A[:, :-1, 1]
    want[:, :, 1] = A[:, :-1, 1] + A[:, 1:, 0]
    np.testing.assert_array_equal(tl.build(s)(A), want)
    ir = llvm_ir_of(s, host_target())[1]
    assert "masked.gather" not in ir and "shufflevector" in ir


@pytest.mark.parametrize("offset", [-3, 0, 1, 5])
@pytest.mark.parametrize("dt", ["f32", "u8"])
def test_an_upsampling_read_is_numpy_repeat(offset, dt):
    # O[x] = X[(x + offset) // 2]: each element read by two neighbouring lanes, the pattern shifted by the offset
    N = 64
    n = (N - 1 + offset) // 2 + 1
    lo = min(0, offset // 2)
    op = tl.op(f"def f(X: {dt}[{n - lo}]) -> O:\n    O[x] = X[(x + {offset}) // 2 - {lo}] where x in 0:{N}")
    s = tl.schedule(op)
    _o, inner = s["O"].split("x", 16)
    s["O"].vectorize(inner)
    X = np.arange(n - lo).astype(NP[dt])
    want = X[(np.arange(N) + offset) // 2 - lo]
    np.testing.assert_array_equal(tl.build(s)(X), want)
    assert "masked.gather" not in llvm_ir_of(s, host_target())[1]


def test_lanes_spread_wider_than_the_span_limit_still_gather():
    # lanes (x // 2) * 2 * k apart in pairs: the span of one vector is 16 * k elements
    k = MAX_SHUFFLED_SPAN + 1
    op = tl.op(f"def f(X: f32[{32 * k}]) -> O:\n    O[x] = X[(x // 2) * {2 * k}] where x in 0:32")
    s = tl.schedule(op)
    _o, inner = s["O"].split("x", 16)
    s["O"].vectorize(inner)
    X = np.arange(32 * k, dtype=np.float32)
    np.testing.assert_array_equal(tl.build(s)(X), X[(np.arange(32) // 2) * 2 * k])
    assert "masked.gather" in llvm_ir_of(s, host_target())[1]


@pytest.mark.parametrize("op", ["//", "%"])
def test_multiples_of_the_divisor_come_out_of_a_floor_division(op):
    o, i = Var("o"), Var("i")
    fn = {"//": lambda a, b: a // b, "%": lambda a, b: a % b}[op]
    for m, d, c in itertools.product((64, 6, -4), (2, 3, 4), (-7, 0, 5)):
        e = simplify(BinOp(op, BinOp("+", BinOp("+", BinOp("*", o, IntImm(m)), i), IntImm(c)), IntImm(d)))
        for ov, iv in itertools.product((-3, 0, 2), (-5, 0, 1, 7)):
            got = _evaluate(e, {"o": ov, "i": iv})
            assert got == fn(ov * m + iv + c, d), (str(e), ov, iv)


def _evaluate(e, env):
    if isinstance(e, IntImm):
        return e.value
    if isinstance(e, Var):
        return env[e.name]
    if isinstance(e, Neg):
        return -_evaluate(e.a, env)
    a, b = _evaluate(e.a, env), _evaluate(e.b, env)
    return {"+": a + b, "-": a - b, "*": a * b, "//": a // b if b else 0, "%": a % b if b else 0}[e.op]
