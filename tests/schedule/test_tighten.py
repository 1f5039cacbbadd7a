"""The loop-tightening step of lowering (tensorlang/tighten.py): loops whose tail iterations only fail a guard
are shortened, the result is unchanged, and a nest of such loops no longer stalls LLVM."""

import subprocess
import sys
import textwrap

import numpy as np

import tensorlang as tl
from tensorlang import ir
from tensorlang.tighten import tighten_loops


def _loop(var, extent, body, kind="serial"):
    return ir.For(ir.Var(var), ir.const(0), ir.const(extent), body, kind)


def test_a_split_past_the_extent_is_shortened_before_and_after():
    op = tl.op("def f(X: f32[N]) -> Y:\n    Y[i] = X[i] * 2.0\n")
    s = tl.schedule(op, N=5)
    s["Y"].split("i", 8)
    text = str(s.lowered())
    assert "for i_o in 0:1:" in text and "for i_i in 0:5:" in text and "if i <= 4" in text
    x = np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(tl.build(s)(x), x * 2)


def test_the_bound_holds_for_every_value_of_the_outer_loops():
    # v + 3*o <= 10 with o in 0:3: v up to 10 is needed (o = 0), not 4 (o = 2)
    guard = ir.If(ir.Cmp("<=", ir.BinOp("+", ir.Var("v"), ir.BinOp("*", ir.Var("o"), ir.const(3))), ir.const(10)),
                  ir.Seq(()))
    nest = _loop("o", 3, _loop("v", 16, guard))
    assert tighten_loops(nest).body.extent.value == 11


def test_what_is_left_alone():
    cond = ir.Cmp("<=", ir.Var("v"), ir.const(1))
    vec = _loop("v", 8, ir.If(cond, ir.Seq(())), "vectorized")
    assert tighten_loops(vec).extent.value == 8  # a vector loop keeps its width
    store = ir.Store(ir.Buffer("Y", "f32", (8,)), (ir.Var("v"),), ir.FloatImm(1.0, "f32"))
    more = _loop("v", 8, ir.Seq((ir.If(cond, ir.Seq(())), store)))
    assert tighten_loops(more).extent.value == 8  # the body does more than the guarded part
    other = _loop("v", 8, ir.If(ir.Cmp("<=", ir.Var("u"), ir.const(1)), ir.Seq(())))
    assert tighten_loops(other).extent.value == 8  # the guard is not on this loop's variable
    els = _loop("v", 8, ir.If(cond, ir.Seq(()), store))
    assert tighten_loops(els).extent.value == 8  # an else branch runs where the guard fails


def test_a_nest_of_splits_past_their_extents_builds_quickly():
    """Without tightened loops, LLVM's loop unroller runs for minutes and takes gigabytes on this nest. Built in a
    child process, so that a regression fails, not hangs."""
    code = textwrap.dedent('''
        import numpy as np, tensorlang as tl
        op = tl.op("def maxpool2d(I: f32[N, C, H, W], KH: int, KW: int, stride: int) -> O:\\n"
                   "    O[n, c, h, w] max= I[n, c, h*stride + r, w*stride + s] where r in 0:KH, s in 0:KW\\n")
        sz = dict(N=1, C=7, H=2, W=5, KH=2, KW=1, stride=3)
        s = tl.schedule(op, **sz)
        s["O"].vectorize("n")
        s["O"].split("w", 8, outer="w_o", inner="w_i")
        s["O"].split("h", 7, outer="h_o", inner="h_i")
        s["O"].reorder("c", "h_i", "r", "h_o", "s")
        s["O"].split("r", 8, outer="r_o", inner="r_i")
        s["O"].split("s", 8, outer="s_o", inner="s_i")
        s["O"].reorder("r_o", "s_o", "r_i", "s_i")
        s["O"].unroll("s_o")
        x = np.random.default_rng(0).standard_normal((1, 7, 2, 5)).astype(np.float32)
        got = tl.build(s)(x)
        want = tl.build(op, schedule="naive", **sz)(x)
        assert np.array_equal(got, want)
        print("ok")
    ''')
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
