"""Vector accumulators (tensorlang/accumulate.py): a vectorized reduction into one element inside a serial loop
accumulates in a vector and combines its lanes once; the result stays numpy's, tails and NaNs included, and
the rewrite leaves alone what it must not reorder."""
from __future__ import annotations

import numpy as np
import pytest
from oracle import assert_close

import tensorlang as tl


def rowwise(src: str, N: int, D: int, width: int = 16, *, parallel: bool = False, unroll: bool = False):
    out = tl.op(src).outputs[0]
    s = tl.schedule(tl.op(src), N=N, D=D)
    s[out].split("d", width, outer="d_o", inner="d_i")
    s[out].vectorize("d_i")
    if unroll:
        s[out].unroll("d_o")
    if parallel:
        s[out].parallel("n")
    return s


def run(s, *inputs):
    k = tl.build(s)
    out = np.full(k.output_shapes[k.op.outputs[0]], np.nan if k.output_dtypes[k.op.outputs[0]] != np.int32 else -77,
                  k.output_dtypes[k.op.outputs[0]])
    k(*inputs, out=out)
    return out


@pytest.mark.parametrize("D", [64, 61, 16, 7])
@pytest.mark.parametrize("op,npf", [("+=", np.sum), ("max=", np.max), ("min=", np.min), ("*=", np.prod)])
def test_float_reductions_accumulate_in_a_vector_and_match_numpy(op, npf, D):
    src = f"def r(X: f32[N, D]) -> Y:\n    Y[n] {op} X[n, d]"
    s = rowwise(src, 5, D)
    text = s.lower()
    assert "allocate Y_acc: f32[16]" in text and "Y[n] = " in text.split("allocate Y_acc")[1].split("d_o")[-1]
    X = np.random.default_rng(D).uniform(0.5, 1.5, (5, D)).astype(np.float32)
    assert_close(run(s, X), npf(X.astype(np.float64), axis=1).astype(np.float32), D, exact=op in ("max=", "min="))


def test_integer_sum_wraps_like_numpy_and_max_keeps_nan():
    X = np.random.default_rng(1).integers(-2**31, 2**31 - 1, (3, 40), dtype=np.int64).astype(np.int32)
    s = rowwise("def r(X: i32[N, D]) -> Y:\n    Y[n] += X[n, d]", 3, 40, 8)
    assert "Y_acc" in s.lower()
    np.testing.assert_array_equal(run(s, X), X.sum(axis=1, dtype=np.int32))
    F = np.random.default_rng(2).standard_normal((4, 50)).astype(np.float32)
    F[1, 3], F[2, 49] = np.nan, np.nan  # in a full vector and in the tail
    got = run(rowwise("def r(X: f32[N, D]) -> Y:\n    Y[n] max= X[n, d]", 4, 50), F)
    np.testing.assert_array_equal(got, np.max(F, axis=1))


@pytest.mark.parametrize("parallel,unroll", [(True, False), (False, True)])
def test_inside_a_parallel_loop_and_around_an_unrolled_one(parallel, unroll):
    X = np.random.default_rng(3).standard_normal((33, 100)).astype(np.float32)
    s = rowwise("def r(X: f32[N, D]) -> Y:\n    Y[n] += X[n, d] * X[n, d]", 33, 100, 32, parallel=parallel,
                unroll=unroll)
    assert "Y_acc" in s.lower()
    assert_close(run(s, X), (X.astype(np.float64) ** 2).sum(axis=1).astype(np.float32), 100)


def test_softmax_hand_schedule_accumulates_its_max_and_sum():
    from tensorlang import schedules
    w = schedules.get("softmax")
    s = tl.schedule(tl.op(w.source), N=8, D=200)
    w.hand_schedule(s)
    text = s.lower()
    assert "allocate mx_acc: f32[64]" in text and "allocate sm_acc: f32[64]" in text
    (X,) = w.make_inputs({"N": 8, "D": 200}, np.random.default_rng(4))
    assert_close(run(s, X), w.reference(X, N=8, D=200), 200)


def test_left_alone_when_the_element_moves_or_is_read_in_the_loop():
    # the output element depends on the serial loop: not a reduction into one element
    s = tl.schedule(tl.op("def c(X: f32[N, D]) -> Y:\n    Y[n, e] += X[n, d] * 2.0 where e in 0:2"), N=2, D=32)
    s["Y"].split("d", 16, outer="d_o", inner="d_i")
    s["Y"].vectorize("d_i")
    s["Y"].reorder("n", "d_o", "e", "d_i")
    assert "_acc" not in s.lower()
    # no serial loop of its own around the vectorized loop
    s = tl.schedule(tl.op("def r(X: f32[N, D]) -> Y:\n    Y[n] += X[n, d]"), N=3, D=16)
    s["Y"].vectorize("d")
    assert "_acc" not in s.lower()
    X = np.random.default_rng(5).standard_normal((3, 16)).astype(np.float32)
    assert_close(run(s, X), X.sum(axis=1), 16)


def test_the_accumulator_name_does_not_clash():
    src = "def r(X: f32[N, D]) -> Y:\n    Y_acc[n] = X[n, 0]\n    Y[n] += X[n, d] + Y_acc[n]"
    s = rowwise(src, 3, 48)
    text = s.lower()
    assert "allocate Y_acc1: f32[16]" in text
    X = np.random.default_rng(6).standard_normal((3, 48)).astype(np.float32)
    assert_close(run(s, X), (X + X[:, :1]).sum(axis=1), 48)
