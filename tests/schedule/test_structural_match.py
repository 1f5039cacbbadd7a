"""Hand schedules are matched by a program's structure, not its text: the README's matmul and the DSL guide's softmax
get their hand schedules, with the built-in's loop IR up to names; a program that differs in structure does not."""
import json
import re

import numpy as np
import pytest
from oracle import assert_close

import tensorlang as tl
from tensorlang import schedules
from tensorlang.schedules.lookup import workload_of

#: the README's first kernel: the built-in matmul with other index names
README_MATMUL = """
def matmul(A: f32[M, K], B: f32[K, N]) -> C:
    C[m, n] += A[m, k] * B[k, n]
"""
#: the DSL guide's softmax: divides by the row sum where the built-in multiplies by its reciprocal
GUIDE_SOFTMAX = """
def softmax(X: f32[N, D]) -> Y:
    mx[n] max= X[n, d]
    e[n, d] = exp(X[n, d] - mx[n])
    sm[n] += e[n, d]
    Y[n, d] = e[n, d] / sm[n]
"""
#: the built-in softmax with every name changed, other spacing and comments
RENAMED_SOFTMAX = """
def probs(logits: f32[Rows, Cols]) -> out:   # row-wise
    peak[r]   max= logits[r, c]
    ex[r, c] = exp(logits[r, c] - peak[r])
    total[r] += ex[r, c]        # the row sums
    out[r, c] = ex[r, c] * (1.0 / total[r])
"""
#: the built-in matmul with every name changed, and index names that the renamed schedule's loops would take
RENAMED_MATMUL = "def mm(X: f32[P, Q], Y: f32[Q, R]) -> Z:\n    Z[a, a_o] += X[a, a_i] * Y[a_i, a_o]\n"


def up_to_names(text: str) -> str:
    """`text` with each name replaced by the order of its first appearance: equal for two texts exactly when one is
    the other with its names changed one for one."""
    seen: dict = {}
    return re.sub(r"[A-Za-z_][A-Za-z0-9_.]*", lambda m: seen.setdefault(m.group(0), f"x{len(seen)}"), text)


def builtin_hand(name: str, sizes: dict) -> tl.Schedule:
    w = schedules.get(name)
    s = tl.schedule(tl.op(w.source), **sizes)
    w.hand_schedule(s)
    return s


@pytest.mark.parametrize("source,sizes", [(README_MATMUL, dict(M=64, N=96, K=32)),
                                          (RENAMED_MATMUL, dict(P=13, Q=40, R=70))])
def test_a_matmul_in_other_names_gets_the_hand_schedule(source, sizes):
    op = tl.op(source)
    k = tl.build(op, **sizes)
    assert k.schedule_source == "hand"
    _, _, names = workload_of(op)
    ref = builtin_hand("matmul", {w: sizes[mine] for w, mine in names.sizes.items()})
    assert up_to_names(k.schedule.lower()) == up_to_names(ref.lower())
    assert "C_local" in ref.lower() and "# parallel" in k.schedule.lower()
    rng = np.random.default_rng(0)
    (m, q), (_, r) = k.input_shapes[op.inputs[0]], k.input_shapes[op.inputs[1]]
    A = rng.standard_normal((m, q), dtype=np.float32)
    B = rng.standard_normal((q, r), dtype=np.float32)
    got = k(A, B)
    np.testing.assert_array_equal(got, tl.build(ref)(A, B))  # the same loops: the same sums in the same order
    assert_close(got, schedules.get("matmul").reference(A, B), reduction_len=q)


def test_renamed_stages_and_spacing_get_the_softmax_hand_schedule():
    op = tl.op(RENAMED_SOFTMAX)
    k = tl.build(op, Rows=7, Cols=200)
    assert k.schedule_source == "hand"
    ref = builtin_hand("softmax", dict(N=7, D=200))
    assert up_to_names(k.schedule.lower()) == up_to_names(ref.lower())
    assert 's["ex"].compute_at(s["out"], "r")' in str(k.schedule)
    X = 2 * np.random.default_rng(1).standard_normal((7, 200), dtype=np.float32)
    np.testing.assert_array_equal(k(X), tl.build(ref)(X))
    assert_close(k(X), schedules.get("softmax").reference(X), reduction_len=200)


def test_the_dsl_guides_softmax_gets_the_hand_schedule():
    op = tl.op(GUIDE_SOFTMAX)
    assert workload_of(op) is None  # not the built-in program: it divides
    k = tl.build(op, N=9, D=100)
    assert k.schedule_source == "hand"
    ref = builtin_hand("softmax", dict(N=9, D=100))
    assert str(k.schedule).splitlines()[1:] == str(ref).splitlines()[1:]  # the same primitives, the same names
    ours, theirs = k.schedule.lower().splitlines(), ref.lower().splitlines()
    differ = [(a, b) for a, b in zip(ours, theirs) if a != b]
    assert len(ours) == len(theirs) and differ == [  # in the whole vectors' copy and in the last one's
        ("          Y[n, d] = e[0, d_i + d_o*64]/sm[0]", "          Y[n, d] = e[0, d_i + d_o*64]*(1f/sm[0])"),
        ("            Y[n, d] = e[0, d_i + d_o*64]/sm[0]", "            Y[n, d] = e[0, d_i + d_o*64]*(1f/sm[0])")]
    X = 2 * np.random.default_rng(2).standard_normal((9, 100), dtype=np.float32)
    assert_close(k(X), schedules.get("softmax").reference(X), reduction_len=100)


def test_other_arithmetic_on_the_same_loops_gets_the_hand_schedule_and_computes_its_own_program():
    op = tl.op("def f(A: f32[M, K], B: f32[K, N]) -> C:\n    C[i, j] += abs(A[i, k] - B[k, j])")
    k = tl.build(op, M=20, N=40, K=12)
    assert k.schedule_source == "hand" and "C_local" in k.schedule.lower()
    A = np.random.default_rng(3).standard_normal((20, 12), dtype=np.float32)
    B = np.random.default_rng(4).standard_normal((12, 40), dtype=np.float32)
    want = np.abs(A[:, :, None].astype(np.float64) - B[None, :, :]).sum(axis=1).astype(np.float32)
    assert_close(k(A, B), want, reduction_len=12)


@pytest.mark.parametrize("source", [
    "def mm(A: f32[M, K], B: f32[N, K]) -> C:\n    C[m, n] += A[m, k] * B[n, k]",     # another index pattern
    "def mm(A: f32[M, K], B: f32[K, N]) -> C:\n    C[m, n] max= A[m, k] * B[k, n]",    # another reduction
    "def mm(A: f64[M, K], B: f64[K, N]) -> C:\n    C[m, n] += A[m, k] * B[k, n]",      # another dtype
    "def mm(A: f32[M, K], B: f32[K, M]) -> C:\n    C[m, n] += A[m, k] * B[k, n]",      # sizes tied otherwise
    "def sm(X: f32[N, D]) -> Y:\n    mx[n] max= X[n, d]\n    Y[n, d] = exp(X[n, d] - mx[n])",  # fewer stages
])
def test_a_program_of_another_structure_gets_no_hand_schedule(source):
    op = tl.op(source)
    sizes = {n: 8 for n in op.size_names}
    assert tl.build(op, **sizes).schedule_source == "auto"
    with pytest.raises(tl.BuildError, match=r"build\(schedule='hand'\): (mm|sm) has no hand schedule: no built-in "
                                            r"workload with a hand schedule has its loop structure"):
        tl.build(op, schedule="hand", **sizes)


def test_a_conv2d_in_other_names_gets_the_hand_schedule():
    w = schedules.get("conv2d")
    source = """
def conv(img: f32[B, Ci, Hh, Ww], k: f32[Co, Ci, Kh, Kw], st: int, p: int, dl: int) -> out:
    pad[b, ci, yy, xx] = img[b, ci, yy - p, xx - p] where yy in 0:Hh+2*p, xx in 0:Ww+2*p
    out[b, co, y, x] += pad[b, ci, y*st + kh*dl, x*st + kw*dl] * k[co, ci, kh, kw]
"""
    op = tl.op(source)
    mine = dict(B=1, Ci=3, Hh=7, Ww=11, Co=5, Kh=3, Kw=3, st=1, p=1, dl=1)
    sizes = dict(N=1, C=3, H=7, W=11, F=5, R=3, S=3, stride=1, pad=1, dil=1)
    k = tl.build(op, **mine)
    assert k.schedule_source == "hand"
    ref = builtin_hand("conv2d", sizes)
    # the loop IR prints a sum's terms in the order of their names (co_i + co_o*16, but f_o*16 + f_i): compare the
    # primitives and the loops (with their extents and annotations) up to names
    assert up_to_names(json.dumps([p.to_json() for p in k.schedule.primitives])) == \
        up_to_names(json.dumps([p.to_json() for p in ref.primitives]))
    loops = [[ln for ln in s.lower().splitlines() if ln.lstrip().startswith(("for ", "allocate "))]
             for s in (k.schedule, ref)]
    assert len(loops[0]) > 10 and up_to_names("\n".join(loops[0])) == up_to_names("\n".join(loops[1]))
    I, Wt = w.make_inputs(sizes, np.random.default_rng(5))
    np.testing.assert_array_equal(k(I, Wt), tl.build(ref)(I, Wt))
    assert_close(k(I, Wt), w.reference(I, Wt, **sizes), reduction_len=27)


def test_structure_ignores_names_spacing_and_comments_but_not_what_is_computed():
    base = tl.op("def f(A: f32[N, M]) -> B:\n    T[i, j] = A[i, j] * 2.0\n    B[i] += T[i, j]")
    same = tl.op("def g(X: f32[P, Q]) -> Y:   # sums\n\n    U[a, b]   =  X[a, b]*2.0\n    Y[a] += U[a, b]  # rows")
    assert same.structure.key == base.structure.key and same.key != base.key
    for other in ["def f(A: f32[N, M]) -> B:\n    T[i, j] = A[i, j] * 3.0\n    B[i] += T[i, j]",  # a constant
                  "def f(A: f32[N, M]) -> B:\n    T[i, j] = A[i, j] * 2.0\n    B[j] += T[i, j]",  # the summed index
                  "def f(A: f32[N, N]) -> B:\n    T[i, j] = A[i, j] * 2.0\n    B[i] += T[i, j]",  # a size
                  "def f(A: f32[N, M]) -> B:\n    T[i, j] = A[i, j] * 2.0 where j in 0:M-1\n    B[i] += T[i, j]"]:
        assert tl.op(other).structure.key != base.structure.key, other
    assert tl.op("def f(A: f32[N, M]) -> B:\n    T[i, j] = A[i, j] + 2.0\n    B[i] += T[i, j]").loop_structure.key \
        == base.loop_structure.key  # arithmetic apart, the same loops
    names = base.structure.renaming(same.structure)
    assert names.tensors == {"A": "X", "T": "U", "B": "Y"} and names.sizes == {"N": "P", "M": "Q"}
    assert names.axes == {"T": {"i": "a", "j": "b"}, "B": {"i": "a", "j": "b"}}


def test_a_renamed_schedule_takes_fresh_names_where_the_new_ones_are_taken():
    s = tl.schedule(tl.op(schedules.get("matmul").source), M=8, N=8, K=8)
    s["C"].split("i", 4)
    s["C"].fuse("i_i", "j", fused="i_i_j")
    op = tl.op(RENAMED_MATMUL)
    r = s.renamed(op, s.op.structure.renaming(op.structure))
    assert str(r).splitlines()[1:] == ['s["Z"].split("a", 4, outer="a_o_", inner="a_i_")',
                                       's["Z"].fuse("a_i_", "a_o", fused="a_i__a_o")']
    assert up_to_names(r.lower()) == up_to_names(s.lower())


def test_a_hand_schedule_that_does_not_apply_is_skipped_with_a_warning_or_refused_when_asked_for(monkeypatch):
    import dataclasses

    from tensorlang.choice import StaleScheduleError
    from tensorlang.schedules import lookup

    def refuses(s):
        s["Y"].vectorize("no_such_loop")
    broken = tuple((dataclasses.replace(w, hand_schedule=refuses) if w.name == "softmax" else w, op)
                   for w, op in lookup._builtins())
    monkeypatch.setattr(lookup, "_builtins", lambda: broken)
    op = tl.op(RENAMED_SOFTMAX)
    with pytest.warns(UserWarning, match=r"the hand schedule of softmax does not apply to probs.*no_such_loop.*"
                                         r"\(skipped: probs gets the next schedule source\)"):
        assert tl.build(op, Rows=3, Cols=17).schedule_source == "auto"
    with pytest.raises(StaleScheduleError, match="the hand schedule of softmax does not apply to probs"):
        tl.build(op, Rows=3, Cols=17, schedule="hand")
