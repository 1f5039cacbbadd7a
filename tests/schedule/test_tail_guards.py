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
