"""Tail guards taken out of unrolled and vectorized loops (tensorlang/tail_guards.py): the loop a guard first
depends on runs a copy without it wherever the guard holds at its loops' extremes; guards on loaded values, or
hoisted through a parallel loop or one of unknown extent, stay where they are."""
import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ir
from tensorlang.symbolic import Sym
from tensorlang.tail_guards import hoist_tail_guards

A = ir.Buffer("A", "f32", (64,))
IDX = ir.Buffer("I", "i64", (64,))
M = Sym.size("M", 1, 64, 16)


def _loop(var, extent, body, kind="serial"):
    return ir.For(ir.Var(var), ir.const(0), ir.const(extent), body, kind)


def _index():  # i = i_i + i_o*4
    return ir.BinOp("+", ir.Var("i_i"), ir.BinOp("*", ir.Var("i_o"), ir.const(4)))


def _store_if(cond):
    return ir.Let(ir.Var("i"), _index(), ir.If(cond, ir.Store(A, (ir.Var("i"),), ir.FloatImm(1.0))))


def test_the_guard_moves_to_the_loop_it_first_depends_on():
    """A guard on `i` inside `for i_i (unrolled)` inside `for i_o`: versioned at i_i (i_o's extent is symbolic)."""
    guard = ir.Cmp("<=", ir.Var("i"), ir.const(M - 1))
    nest = ir.For(ir.Var("i_o"), ir.const(0), ir.const((M + 3) // 4), _loop("i_i", 4, _store_if(guard), "unrolled"))
    out = hoist_tail_guards(nest)
    assert isinstance(out, ir.For) and isinstance(out.body, ir.If)
    assert str(out.body.cond) == "i_o*4 + 3 <= M - 1"
    assert "if" not in str(out.body.then)  # the copy for whole blocks: no guard
    assert out.body.orelse == nest.body  # the partial block: as it was


def test_a_guard_through_several_constant_loops_is_checked_once_above_them():
    """`for i_o in 0:8: for i_i in 0:4 (unrolled)` with a guard on i and a symbolic bound: one check above i_o."""
    guard = ir.Cmp("<", ir.Var("i"), ir.const(M))
    nest = _loop("i_o", 8, _loop("i_i", 4, _store_if(guard), "unrolled"))
    out = hoist_tail_guards(nest)
    assert isinstance(out, ir.If) and str(out.cond) == "31 < M"
    assert out.orelse == nest


def test_a_guard_that_holds_at_every_iteration_is_removed_and_one_that_fails_somewhere_is_kept():
    holds = _loop("i_o", 2, _loop("i_i", 4, _store_if(ir.Cmp("<=", ir.Var("i"), ir.const(7))), "vectorized"))
    assert "if" not in str(hoist_tail_guards(holds))
    fails = _loop("i_o", 2, _loop("i_i", 4, _store_if(ir.Cmp("<=", ir.Var("i"), ir.const(6))), "vectorized"))
    out = hoist_tail_guards(fails)  # above i_o the clean copy would never run: versioned at i_i, per i_o
    assert isinstance(out, ir.For) and isinstance(out.body, ir.If) and str(out.body.cond) == "i_o*4 + 3 <= 6"
    assert "if" not in str(out.body.then) and out.body.orelse == fails.body


def test_a_guard_on_a_loaded_value_stays():
    """`if I[i] < M`: the value can change as the loop runs (or be anything), so there is no extreme to test."""
    guard = ir.Cmp("<", ir.Load(IDX, (ir.Var("i"),)), ir.const(M))
    nest = ir.For(ir.Var("i_o"), ir.const(0), ir.const(M), _loop("i_i", 4, _store_if(guard), "unrolled"))
    assert hoist_tail_guards(nest) == nest


def test_no_copy_is_made_through_a_parallel_loop_or_without_an_unrolled_or_vectorized_one():
    guard = ir.Cmp("<=", ir.Var("i"), ir.const(M - 1))
    parallel = _loop("i_o", 8, _loop("i_i", 4, _store_if(guard), "unrolled"), "parallel")
    out = hoist_tail_guards(parallel)
    assert out.kind == "parallel" and isinstance(out.body, ir.If)  # versioned inside it, at i_i
    serial = ir.For(ir.Var("i_o"), ir.const(0), ir.const(M), _loop("i_i", 4, _store_if(guard)))
    assert hoist_tail_guards(serial) == serial


@pytest.mark.parametrize("n", [1, 7, 16, 17, 100, 1563])
def test_at_fixed_sizes_whole_vectors_run_unmasked_and_the_last_one_masked(n):
    """A 3-tap stencil in vectors of 16 at a size 16 may not divide: the vector loop is versioned per block,
    the tail block keeps its lane guard (no copy where no block is whole), and the result is numpy's at every
    size."""
    op = tl.op("def st(X: f32[N]) -> Y:\n    Y[i] = X[i] + 2.0 * X[i + 1] + X[i + 2]")
    s = tl.schedule(op, N=n + 2)  # n outputs
    s["Y"].split("i", 16)
    s["Y"].vectorize("i_i")
    text = str(s.lowered(strict=True))
    if n < 16:  # no whole vector: no copy that never runs
        assert text.count("if ") == 1
    elif n % 16:
        assert f"if i_o*16 + 15 <= {n - 1}:" in text and text.count(f"<= {n - 1}") == 2
    else:
        assert "if" not in text
    X = np.random.default_rng(n).standard_normal(n + 2).astype(np.float32)
    np.testing.assert_allclose(tl.build(s)(X), X[:-2] + 2 * X[1:-1] + X[2:], rtol=1e-6, atol=1e-6)


def _edge_sum(X: np.ndarray, offsets) -> np.ndarray:
    padded, n = np.pad(X, 8, mode="edge"), len(X)
    return sum(padded[8 + d:8 + d + n] for d in offsets)


@pytest.mark.parametrize("n", [5, 16, 22, 40, 100, 1563])
def test_an_edge_clamp_is_taken_out_of_the_vectors_that_lie_inside_the_image(n):
    """repeat_edge clamps `i - 3` and `i + 3` to the image; in vectors of 16, a copy of the vector loop reads
    without the clamps wherever every lane of the vector lies inside (contiguous loads), the vectors at the edges
    keep them, and the result is numpy's at every size (none, one or many vectors inside)."""
    op = tl.op("def e(X: f32[N]) -> Y:\n    Y[i] = repeat_edge(X)[i - 3] + 2.0 * repeat_edge(X)[i + 3] where i in 0:N")
    s = tl.schedule(op, N=n)
    s["Y"].split("i", 16)
    s["Y"].vectorize("i_i")
    text = str(s.lowered(strict=True))
    inside = [o for o in range(-(-n // 16)) if o * 16 - 3 >= 0 and o * 16 + 15 + 3 <= n - 1 and o * 16 + 15 < n]
    if inside:  # the copy without the clamps (made also where the clamps and the tail each pass somewhere)
        assert "X[i - 3] + 2f*X[i + 3]" in text, text
    assert "max(i - 3, 0)" in text  # the first vector keeps its clamp (a clamp that always holds goes)
    X = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(tl.build(s)(X), _edge_sum(X, [-3]) + 2 * _edge_sum(X, [3]), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", [50, 1563])
def test_a_check_that_a_reduction_loop_does_not_move_is_made_once_above_it(n):
    """A max over 5 taps with the tap loop outside the vector loop (`for r: for i_i (vectorized)`): the tail
    guard and the clamp do not change with r, so the tap loop is versioned as a whole (once a vector of outputs,
    its accumulator free of branches) rather than each vector step inside it."""
    op = tl.op("def m(X: f32[N]) -> Y:\n    Y[i] max= repeat_edge(X)[i + r - 2] where i in 0:N, r in 0:5")
    s = tl.schedule(op, N=n)
    s["Y"].split("i", 16)
    s["Y"].reorder("i_o", "r", "i_i")
    s["Y"].vectorize("i_i")
    lowered = s.lowered(strict=True)
    text = str(lowered)
    tap_loops = [line for line in text.splitlines() if line.strip().startswith("for r in")]
    versioned = [line for line in text.splitlines() if line.strip().startswith("if i_o*16")]
    assert len(tap_loops) == 2 and versioned, text  # the copy without checks and the one with them
    assert all(len(v) - len(v.lstrip()) < len(t) - len(t.lstrip()) for v in versioned for t in tap_loops), text
    X = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    X[n // 2] = np.nan  # the max propagates a NaN, as numpy's
    want = np.max([_edge_sum(X, [d]) for d in range(-2, 3)], axis=0)
    np.testing.assert_allclose(tl.build(s)(X), want, rtol=0, atol=0)


def test_a_clamped_read_at_twice_the_index_is_proven_inside_without_its_clamp():
    """A pyramid's downsampling read `X[clamp(2*i - 1, 0, 2*N - 1)]` in vectors of 16: the copy for i_o >= 1
    reads `X[i*2 - 1]`, proven inside X by the check on the loops (`i_o*32 - 1 >= 0`) with `i` expanded to them;
    strict lowering refuses any guard it could not prove."""
    op = tl.op("def d(X: f32[2*N]) -> Y:\n    Y[i] = X[clamp(2*i - 1, 0, 2*N - 1)] + X[2*i] where i in 0:N")
    s = tl.schedule(op, N=128)
    s["Y"].split("i", 16)
    s["Y"].vectorize("i_i")
    text = str(s.lowered(strict=True))
    assert "if i_o*32 - 1 >= 0:" in text and "Y[i] = X[i*2 - 1] + X[i*2]" in text, text
    X = np.random.default_rng(3).standard_normal(256).astype(np.float32)
    np.testing.assert_allclose(tl.build(s)(X), X[np.maximum(np.arange(128) * 2 - 1, 0)] + X[0::2], rtol=1e-6)
