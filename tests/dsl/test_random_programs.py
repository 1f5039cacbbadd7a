"""Property test: random Einstein programs, compiled by tensorlang, against an independent numpy evaluation.

The generator and the numpy evaluator live in ``progen.py`` (no tensorlang inside).  Each hypothesis example is
a program of 1-3 stages over 1-3 small input tensors with random index patterns (permutations, diagonals,
broadcasting, affine offsets and strides, reversal, constants, ``where``-widened ranges that read padding),
reductions (``+= *= max= min=``) and elementwise math; the DSL text is attached to failures with ``note``.

Environment:

* ``TENSORLANG_FUZZ_EXAMPLES`` -- number of examples (default 350).
* ``TENSORLANG_FUZZ_RANDOM=1`` -- explore new random examples instead of the fixed (derandomized) CI set.
* ``TENSORLANG_FUZZ_SLICE_SEED=N`` -- the seed of the fresh slice (``test_random_program_fresh_slice``: 300
  examples that CI adds to its fixed set, drawn from a seed derived from the commit; see ``fuzzenv.py``).
* ``TENSORLANG_FUZZ_TRACE=PATH`` -- before each build, write the program and sizes to PATH, so that a crash of the
  process (an abort in LLVM, a segfault) leaves the program that caused it.

Reproduce a failure by pasting the noted DSL text into ``check_text(text, sizes, seed)``.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import subprocess

import fuzzenv
import numpy as np
import progen
import pytest
from hypothesis import HealthCheck, event, given, note, reject, settings
from hypothesis import seed as fixed_seed
from hypothesis import strategies as st
from oracle import assert_close

FUZZ_EXAMPLES = fuzzenv.count("TENSORLANG_FUZZ_EXAMPLES", 350)
DERANDOMIZE = not fuzzenv.flag("TENSORLANG_FUZZ_RANDOM")
TRACE = fuzzenv.path("TENSORLANG_FUZZ_TRACE")  # a file: the program about to be compiled, if the process dies
SLICE_EXAMPLES = 300  # the fresh slice (see fuzzenv.py): under a minute of one core (an example builds the auto-
# scheduler's pick, vectorized and unrolled, which takes a few times the naive nest's build)
EPS32 = float(np.finfo(np.float32).eps)


# ------------------------------------------------------------------------------------------ helpers
def _oracle_len(prog, expected):
    """reduction_len for oracle.assert_close that buys the error budget of a multi-stage program.

    The budget is ``4*eps*(sum of reduction lengths + expression nodes)`` relative to the largest magnitude
    seen anywhere in the evaluation (cancellation between large intermediates), expressed as the ``n`` of
    oracle's ``8*eps*sqrt(n) + 64*eps`` rule, relative to the rms of the expected output.
    """
    nodes = sum(sum(1 for _ in s.expr.walk()) for s in prog.stages)
    e = expected.astype(np.float64)
    e = e[np.isfinite(e)]
    rms = float(np.sqrt(np.mean(e * e))) if e.size else 0.0
    scale = rms if rms > 0 else 1.0
    units = 4.0 * (prog.total_reduction_len() + nodes) * max(1.0, prog.magnitude / scale)
    return max(prog.total_reduction_len(), int(math.ceil(max(units - 64.0, 8.0) / 8.0) ** 2))


def run_compiled(text, sizes, inputs):
    import tensorlang as tl

    if TRACE:
        with open(TRACE, "w") as f:
            f.write(f"{text}\nsizes = {sizes}\n")
    op = tl.op(text)
    kernel = tl.build(op, **sizes)
    outs = kernel(*[inputs[name] for name in op.inputs])
    if len(op.outputs) == 1:
        outs = (outs,)
    return op, kernel, dict(zip(op.outputs, outs))


def tl_reference(op, sizes, inputs):
    import tensorlang as tl

    outs = tl.reference(op, **sizes)(*[inputs[name] for name in op.inputs])
    return dict(zip(op.outputs, outs if isinstance(outs, tuple) else (outs,)))


def check_program(prog, seed):
    """Compile ``prog`` and compare every output with the numpy evaluation.  Raises progen.Reject."""
    inputs = progen.make_inputs(prog, seed)
    expected = prog.evaluate(inputs)  # before compiling: a rejected example costs no compile
    copies = {k: v.copy() for k, v in inputs.items()}
    op, kernel, got = run_compiled(prog.text, prog.env, inputs)
    assert list(op.inputs) == [d.name for d in prog.inputs]
    assert list(op.outputs) == prog.outputs
    assert set(op.size_names) == set(prog.env)
    for name, arr in inputs.items():
        np.testing.assert_array_equal(arr, copies[name], err_msg=f"input {name} was modified")
    # a second call into prefilled out= arrays must give the same results (reductions start from the identity)
    garbage = [np.full(kernel.output_shapes[n], np.nan if prog.stage(n).dtype in progen.FLOAT_DTYPES else 7,
                       dtype=kernel.output_dtypes[n]) for n in op.outputs]
    res = kernel(*[inputs[name] for name in op.inputs], out=garbage[0] if len(garbage) == 1 else tuple(garbage))
    res = (res,) if len(garbage) == 1 else res
    for name, r, g in zip(op.outputs, res, garbage):
        assert r is g, f"out= array for {name} not returned"
        np.testing.assert_array_equal(g, got[name], err_msg=f"output {name}: call with out= differs")
    if seed % 10 == 0:
        assert isinstance(op.lower(**prog.env), str)
    # tl.reference, the numpy evaluation `tensorlang run` checks users' programs against, agrees with this one
    ref = tl_reference(op, prog.env, inputs)
    for name in prog.outputs:
        exp, out, mine = expected[name], np.asarray(got[name]), ref[name]
        assert mine.dtype == exp.dtype and mine.shape == exp.shape, f"tl.reference {name}: {mine.dtype}{mine.shape}"
        if exp.dtype == np.float64 and prog.uses_f32():
            mine, exp32 = mine.astype(np.float32), exp.astype(np.float32)
        else:
            exp32 = exp
        assert_close(mine, exp32, reduction_len=_oracle_len(prog, exp32), err_msg=f"tl.reference output {name}")
    for name in prog.outputs:
        exp, out = expected[name], np.asarray(got[name])
        assert tuple(kernel.output_shapes[name]) == exp.shape, f"output {name} shape"
        assert np.dtype(kernel.output_dtypes[name]) == exp.dtype, f"output {name} dtype"
        assert out.dtype == exp.dtype and out.shape == exp.shape, f"output {name}: {out.dtype}{out.shape}"
        if exp.dtype == np.float64 and prog.uses_f32():
            # an f64 output computed from f32 intermediates carries f32 rounding: compare at f32 tolerance
            out, exp = out.astype(np.float32), exp.astype(np.float32)
        assert_close(out, exp, reduction_len=_oracle_len(prog, exp), err_msg=f"output {name}")


def describe(prog, seed):
    inputs = progen.make_inputs(prog, seed)
    lines = [prog.text, f"sizes = {prog.env}", f"input seed = {seed}"]
    for d in prog.inputs:
        lines.append(f"{d.name} = np.{inputs[d.name].dtype}({inputs[d.name].tolist()!r})")
    return "\n".join(lines)


class _Shown:
    """Wraps a drawn Program so that hypothesis prints its DSL text, not the whole structure."""

    def __init__(self, prog):
        self.prog = prog

    def __repr__(self):
        return f"<program sizes={self.prog.env}:\n{self.prog.text}>"


@st.composite
def programs(draw):
    small = draw(st.integers(0, 9), label="small integer types") == 9  # one program in ten: u8, i8, ..., u32
    return _Shown(progen.generate(progen.Src.from_hypothesis(draw), extras=True, small_ints=small))


# ------------------------------------------------------------------------------------------ property test
FUZZ_SETTINGS = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=True,
)


@settings(
    max_examples=FUZZ_EXAMPLES,
    derandomize=DERANDOMIZE,
    database=None if DERANDOMIZE else settings.default.database,
    **FUZZ_SETTINGS,
)
@given(data=st.data())
def test_random_program(data):
    _random_program(data)


# The fresh slice: new examples at every commit, the same ones for a given commit (the seed is in pytest's header
# and in a failure's notes; TENSORLANG_FUZZ_SLICE_SEED=N reproduces it).
@pytest.mark.slow
@fixed_seed(fuzzenv.SLICE_SEED)
@settings(max_examples=SLICE_EXAMPLES, derandomize=False, database=None, **FUZZ_SETTINGS)
@given(data=st.data())
def test_random_program_fresh_slice(data):
    note(fuzzenv.SLICE_NOTE)
    _random_program(data)


def _random_program(data):
    prog = data.draw(programs(), label="program").prog
    seed = data.draw(st.integers(0, 2**32 - 1), label="input seed")
    note(describe(prog, seed))
    try:
        check_program(prog, seed)
    except progen.Reject as e:
        event(f"rejected: {e}")
        reject()
    event(f"stages: {len(prog.stages)}")


# ------------------------------------------------------------------------------------------ evaluator self-checks
def _scalar(node, pt, env, tensors, domain):
    """A deliberately naive, element-at-a-time interpreter (independent of the vectorized evaluator)."""
    ev = lambda n: _scalar(n, pt, env, tensors, domain)  # noqa: E731
    if isinstance(node, progen.Read):
        arr = tensors[node.tensor]
        if not node.idx:
            return arr[()].item()
        ix = []
        for a, n in zip(node.idx, arr.shape):
            if isinstance(a, progen.Gather):  # in range by construction (or clamped)
                v = int(_scalar(a.read, pt, env, tensors, domain)) + a.offset
                ix.append(v if a.clamp is None else min(max(v, 0), a.clamp.ev(env) - 1))
                continue
            if isinstance(a, progen.Edge):  # clamp(inner, 0, D - 1): inside by construction
                v = a.inner.const.ev(env) + sum(c.ev(env) * pt[var] for c, var in a.inner.terms)
                ix.append(min(max(v, 0), n - 1))
                continue
            v = a.const.ev(env) + sum(c.ev(env) * pt[var] for c, var in a.terms)
            if not 0 <= v < n:
                return 0
            ix.append(v)
        return arr[tuple(ix)].item()
    if isinstance(node, progen.Lit):
        return float(node.value) if domain == "float" else int(node.value)
    if isinstance(node, progen.Var):
        return float(pt[node.name]) if domain == "float" else pt[node.name]
    if isinstance(node, progen.Size):
        return float(env[node.name]) if domain == "float" else env[node.name]
    if isinstance(node, progen.Un):
        x = ev(node.x)
        return {"neg": lambda: -x, "abs": lambda: abs(x), "exp": lambda: math.exp(x), "log": lambda: math.log(x),
                "sqrt": lambda: math.sqrt(x), "tanh": lambda: math.tanh(x)}[node.op]()
    if isinstance(node, progen.Bin):
        a, b = ev(node.a), ev(node.b)
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                "//": lambda: a // b, "%": lambda: a % b, "**": lambda: float(a) ** b,
                "max": lambda: max(a, b), "min": lambda: min(a, b)}[node.op]()
    if isinstance(node, progen.Cmp):
        a, b = ev(node.a), ev(node.b)
        return {">": a > b, "<": a < b, ">=": a >= b, "<=": a <= b, "==": a == b, "!=": a != b}[node.op]
    if isinstance(node, progen.Chain):
        xs = [ev(x) for x in node.xs]
        ops = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b}
        return all(ops[op](a, b) for op, a, b in zip(node.ops, xs, xs[1:]))
    if isinstance(node, progen.Logic):
        return (ev(node.a) and ev(node.b)) if node.op == "and" else (ev(node.a) or ev(node.b))
    if isinstance(node, progen.Not):
        return not ev(node.x)
    if isinstance(node, progen.Sel):
        return ev(node.a) if ev(node.cond) else ev(node.b)
    if isinstance(node, progen.Cast):
        x = ev(node.x)
        if node.dtype == "bool":
            return x != 0
        if node.dtype == "i32" and isinstance(x, int):  # wraps, as numpy's astype
            return (x + 2**31) % 2**32 - 2**31
        if node.dtype in progen.INT_DTYPES:
            return int(math.trunc(x))
        return float(np.float32(x)) if node.dtype == "f32" else float(x)
    raise AssertionError(type(node))


def naive_evaluate(prog, inputs):
    tensors = {d.name: np.asarray(inputs[d.name]) for d in prog.inputs}
    for stg in prog.stages:
        domain = "int" if stg.value_dtype in progen.INT_DTYPES else "float"
        out = np.zeros(stg.shape, dtype=bool if stg.dtype == "bool" else np.int64 if domain == "int" else np.float64)
        rng = lambda v, stg=stg: range(stg.ranges[v][0], stg.ranges[v][1] + 1)  # noqa: E731
        for lp in itertools.product(*[rng(v) for v in stg.lhs]):
            vals = []
            for rp in itertools.product(*[rng(v) for v in stg.red]):
                pt = dict(zip(stg.lhs + stg.red, lp + rp))
                vals.append(_scalar(stg.expr, pt, prog.env, tensors, domain))
            if stg.op == "=":
                acc = vals[0]
            elif stg.op == "+=":
                acc = sum(vals)
            elif stg.op == "*=":
                acc = math.prod(vals)
            else:
                acc = max(vals) if stg.op == "max=" else min(vals)
            out[lp] = acc
        if stg.dtype == "f32":
            out = out.astype(np.float32)
        tensors[stg.name] = out
    return {n: tensors[n].astype(progen.NP_DTYPES[prog.stage(n).dtype]) for n in prog.outputs}


def test_random_programs_in_small_integer_types():
    """Programs whose stages and inputs are u8, i8, u16, i16 or u32 (other inputs cast to it, wrapping or
    saturating), checked against the evaluator's wrapping int64 arithmetic and against tl.reference."""
    rnd = random.Random(59)
    checked, types = 0, set()
    for seed in range(40):
        prog = progen.generate(progen.Src.from_random(rnd), extras=True, small_ints=True)
        try:
            check_program(prog, seed)
        except progen.Reject:
            continue
        checked += 1
        types |= {stg.value_dtype for stg in prog.stages}
    assert checked >= 35 and types == set(progen.SMALL_DTYPES), (checked, types)


def test_evaluator_matches_naive_interpreter():
    rnd = random.Random(1234)
    checked = 0
    for seed in range(300):
        prog = progen.generate(progen.Src.from_random(rnd), extras=True)
        inputs = progen.make_inputs(prog, seed)
        try:
            fast = prog.evaluate(inputs)
        except progen.Reject:
            continue
        points = sum(math.prod(hi - lo + 1 for lo, hi in stg.ranges.values()) for stg in prog.stages)
        if points > 3000:  # keep the element-at-a-time interpreter quick
            continue
        slow = naive_evaluate(prog, inputs)
        for name in prog.outputs:
            a, b = fast[name], slow[name]
            assert a.shape == b.shape and a.dtype == b.dtype, prog.text
            if np.issubdtype(a.dtype, np.floating):
                # f32 roundings of intermediates can differ by an ulp between summation orders
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * (1 + np.abs(b).max()), err_msg=prog.text)
            else:
                np.testing.assert_array_equal(a, b, err_msg=prog.text)
        checked += 1
    assert checked > 240


def _einsum_prog(spec, shapes):
    """'ir,rj->ij' with input shapes -> a one-stage progen.Program equivalent to np.einsum."""
    ins, out = spec.split("->")
    ins = ins.split(",")
    names = ["X", "Y", "Z"]
    one = progen.SE.lit(1)
    env, decls, expr = {}, [], None
    for n, sub, shape in zip(names, ins, shapes):
        dims = []
        for ax, size in enumerate(shape):
            sname = f"S{n}{ax}"
            env[sname] = size
            dims.append(progen.SE.name(sname))
        decls.append(progen.InputDecl(n, "f64", dims))
        r = progen.Read(n, tuple(progen.Affine(((one, v),)) for v in sub))
        expr = r if expr is None else progen.Bin("*", expr, r)
    red = sorted(set("".join(ins)) - set(out))
    ranges = {}
    for sub, shape in zip(ins, shapes):
        for v, size in zip(sub, shape):
            ranges[v] = (0, size - 1)
    stg = progen.Stage("T0", list(out), red, "+=" if red else "=", expr, "f64", ranges)
    return progen.Program("e", decls, [], env, [stg], ["T0"])


@pytest.mark.parametrize(
    "spec,shapes",
    [
        ("ir,rj->ij", [(3, 4), (4, 5)]),
        ("ij->ji", [(2, 7)]),
        ("ii->i", [(5, 5)]),
        ("i,j->ij", [(3,), (4,)]),
        ("ijr,jrk->ik", [(2, 3, 4), (3, 4, 5)]),
        ("bir,brj->bij", [(2, 3, 4), (2, 4, 1)]),
        ("ij->", [(3, 5)]),
        ("i,i,i->i", [(6,), (6,), (6,)]),
    ],
)
def test_evaluator_matches_einsum(spec, shapes):
    prog = _einsum_prog(spec, shapes)
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal(s) for s in shapes]
    got = prog.evaluate({d.name: a for d, a in zip(prog.inputs, arrs)})["T0"]
    np.testing.assert_allclose(got, np.einsum(spec, *arrs), rtol=1e-12, atol=1e-12)


def test_generator_renders_and_reaches_features():
    """The generator produces every feature the property test is meant to cover."""
    rnd = random.Random(99)
    seen = set()
    for _ in range(400):
        prog = progen.generate(progen.Src.from_random(rnd), extras=True)
        text = prog.text
        for stg in prog.stages:
            seen.add(stg.op)
            seen.add(f"stages{len(prog.stages)}")
            if len(stg.red) == 2:
                seen.add("two reductions")
            if stg.where:
                seen.add("where")
            if any(lo.ev(prog.env) < 0 for lo, _ in stg.where.values()):
                seen.add("negative where start")
            inferred = set(stg.lhs + stg.red) - set(stg.where)
            if inferred:
                seen.add("inferred")
            if stg.dtype == "bool":
                seen.add("bool stage")
            for r in stg.reads():
                if any(isinstance(a, progen.Edge) for a in r.idx):
                    seen.add("edge")
                if any(isinstance(a, progen.Gather) for a in r.idx):
                    seen.add("clamp" if any(getattr(a, "clamp", None) is not None for a in r.idx) else "gather")
                vs = [v for a in r.idx for v in a.vars()]
                if len(vs) != len(set(vs)):
                    seen.add("repeated index")
                if any(len(a.vars()) > 1 for a in r.idx):
                    seen.add("i + j")
                if any(a.const.ev(prog.env) != 0 and a.terms for a in r.idx):
                    seen.add("offset")
                if not r.idx:
                    seen.add("0-d read")
            for n in stg.expr.walk():
                seen.add(type(n).__name__ + ":" + str(getattr(n, "op", getattr(n, "dtype", ""))))
                if isinstance(n, progen.Cast) and isinstance(n.x, progen.Bin) and n.x.op == "/":
                    seen.add(f"{n.dtype}(... / ...)")  # true division converted back (in an i32 stage)
                if isinstance(n, progen.Cast) and not n.x.typed:
                    seen.add("cast of a weak value")
        if max(prog.env.values(), default=0) >= 16:
            seen.add("big size")
        if len(prog.outputs) == 2:
            seen.add("two outputs")
        if "pad" in prog.env or "st" in prog.env:
            seen.add("int param")
        for d in prog.inputs:
            seen.add(d.dtype)
        inputs = progen.make_inputs(prog, 0)
        tensors = dict(inputs)
        # padding: some read of some stage goes out of bounds
        for stg in prog.stages:
            for r in stg.reads():
                shape = (tensors[r.tensor].shape if r.tensor in tensors
                         else prog.stage(r.tensor).shape)
                for a, n in zip(r.idx, shape):
                    lo, hi = a.bounds(prog.env, stg.ranges)
                    if lo < 0 or hi >= n:
                        seen.add("padding")
        assert text.startswith("def prog(")
    want = {"=", "+=", "*=", "max=", "min=", "two reductions", "where", "inferred", "repeated index", "i + j",
            "offset", "0-d read", "two outputs", "int param", "f32", "f64", "i32", "padding", "stages1",
            "stages2", "stages3", "Un:exp", "Un:log", "Un:sqrt", "Un:tanh", "Un:abs", "Un:neg", "Bin:/",
            "Bin:max", "Bin:min", "Bin:**", "Bin://", "Bin:%", "Chain:", "Sel:", "Logic:and", "Logic:or",
            "Not:", "Cast:f32", "Cast:f64",
            "Cast:i32", "Var:", "Size:", "negative where start", "big size", "i32(... / ...)", "cast of a weak value",
            "i64", "bool", "Cast:bool", "gather", "clamp", "bool stage", "edge"}
    assert want <= seen, want - seen


# ------------------------------------------------------------------------------------------ regression examples
def check_text(text, sizes, inputs, expected, reduction_len=1):
    """Compile DSL text, run on inputs (dict), compare each output (dict name -> expected array)."""
    _, kernel, got = run_compiled(text, sizes, inputs)
    for name, exp in expected.items():
        assert tuple(kernel.output_shapes[name]) == exp.shape
        assert_close(got[name], exp, reduction_len=reduction_len, err_msg=name)


def _q(shape, seed=0, dtype=np.float32):
    """Inputs that are multiples of 1/8 in [-2, 2]."""
    return (np.random.default_rng(seed).integers(-16, 17, size=shape) / 8.0).astype(dtype)


def test_regression_matmul():
    X, Y = _q((3, 4)), _q((4, 5), 1)
    check_text(
        "def mm(X: f32[M, K], Y: f32[K, N]) -> C:\n    C[i, j] += X[i, r] * Y[r, j]\n",
        dict(M=3, K=4, N=5), dict(X=X, Y=Y), dict(C=(X.astype(np.float64) @ Y).astype(np.float32)), 4,
    )


def test_regression_transpose_diagonal_broadcast():
    X, Y = _q((5, 5)), _q((3,), 1)
    text = (
        "def f(X: f32[N, N], Y: f32[M]) -> (T, D, B):\n"
        "    T[i, j] = X[j, i]\n"
        "    D[i] = X[i, i]\n"
        "    B[i, j] = X[i, 0] + Y[j]\n"
    )
    check_text(text, dict(N=5, M=3), dict(X=X, Y=Y), dict(T=X.T.copy(), D=np.diag(X).copy(), B=X[:, :1] + Y[None, :]))


def test_regression_inferred_offsets_stride_reverse():
    X, W = _q((7,)), _q((3,), 1)
    text = (
        "def f(X: f32[N], W: f32[R]) -> (A, C, V):\n"
        "    A[i] = X[i + 1] - X[i]\n"  # i in 0:N-1
        "    C[h] += X[2*h + r] * W[r]\n"  # r in 0:R, h in 0:(N-R)//2+1
        "    V[i] = X[N - 1 - i]\n"
    )
    X64, W64 = X.astype(np.float64), W.astype(np.float64)
    C = np.array([sum(X64[2 * h + r] * W64[r] for r in range(3)) for h in range((7 - 3) // 2 + 1)])
    check_text(text, dict(N=7, R=3), dict(X=X, W=W),
               dict(A=(X64[1:] - X64[:-1]).astype(np.float32), C=C.astype(np.float32), V=X[::-1].copy()), 3)


def test_regression_padding_where():
    X = _q((5,))
    text = "def pad1(X: f32[N]) -> P:\n    P[i] = X[i - 1] where i in 0:N+2\n"
    exp = np.concatenate([[0], X, [0]]).astype(np.float32)
    check_text(text, dict(N=5), dict(X=X), dict(P=exp))


def test_regression_reduction_ops_two_indices():
    X = (1 + _q((3, 4, 2)) / 8).astype(np.float32)
    X64 = X.astype(np.float64)
    text = (
        "def red(X: f32[A, B, C]) -> (S, P, H, L, Z):\n"
        "    S[i] += X[i, r, s]\n"
        "    P[i] *= X[i, r, s]\n"
        "    H[i] max= X[i, r, s]\n"
        "    L[i] min= X[i, r, s]\n"
        "    Z += X[i, j, k]\n"
    )
    exp = dict(S=X64.sum((1, 2)), P=X64.prod((1, 2)), H=X64.max((1, 2)), L=X64.min((1, 2)), Z=X64.sum())
    check_text(text, dict(A=3, B=4, C=2), dict(X=X), {k: v.astype(np.float32) for k, v in exp.items()}, 24)


def test_regression_elementwise_math():
    X, Y = _q((6,)), _q((6,), 1)
    x, y = X.astype(np.float64), Y.astype(np.float64)
    text = (
        "def m(X: f32[N], Y: f32[N]) -> O:\n"
        "    O[i] = exp(tanh(X[i])) + log(abs(Y[i]) + 1) * sqrt(abs(X[i])) - X[i] / (abs(Y[i]) + 1)"
        " + max(X[i], Y[i]) * min(X[i], 0.5) + select(X[i] > Y[i] and not Y[i] < 0 or X[i] == 2, 2, -1.5)\n"
    )
    exp = (np.exp(np.tanh(x)) + np.log(np.abs(y) + 1) * np.sqrt(np.abs(x)) - x / (np.abs(y) + 1)
           + np.maximum(x, y) * np.minimum(x, 0.5) + np.where(((x > y) & ~(y < 0)) | (x == 2), 2, -1.5))
    check_text(text, dict(N=6), dict(X=X, Y=Y), dict(O=exp.astype(np.float32)), 4)


def test_regression_int32_division():
    # `/` of i32 values is an error (C's truncation would differ from numpy); floor division is `//`, truncation a
    # cast of `/`'s float
    X = np.array([-7, -3, 0, 5, 9], np.int32)
    Y = np.array([1, -2, 3, 3, -4], np.int32)
    text = ("def d(X: i32[N], Y: i32[N]) -> (Q, R, T):\n    Q[i] = X[i] // (abs(Y[i]) + 1)\n"
            "    R[i] = i32(f64(X[i]) / f64(abs(Y[i]) + 1))\n    T += X[r] * Y[r]\n")
    q = X // (np.abs(Y) + 1)
    r = (X / (np.abs(Y) + 1)).astype(np.int32)
    check_text(text, dict(N=5), dict(X=X, Y=Y), dict(Q=q, R=r, T=np.array(int(X @ Y), np.int32)))


def test_regression_f64_and_casts():
    X, Y = _q((4,), 0, np.float64), np.array([1, -2, 3, 0], np.int32)
    text = (
        "def c(X: f64[N], Y: i32[N]) -> (A, B):\n"
        "    A[i] = X[i] * f64(Y[i]) + f64(f32(X[i]))\n"
        "    B[i] = f32(X[i]) + f32(i32(X[i] * 3))\n"
    )
    exp_b = (X + np.trunc(X * 3)).astype(np.float32)
    check_text(text, dict(N=4), dict(X=X, Y=Y), dict(A=X * Y + X, B=exp_b))


def test_regression_multistage_any_order_two_outputs():
    X, Y = _q((3, 4)), _q((4,), 1)
    x, y = X.astype(np.float64), Y.astype(np.float64)
    text = (
        "def ms(X: f32[M, K], Y: f32[K]) -> (U, V):\n"
        "    V[i] = U[i] * 2 + T[i, 0]  # reads stages defined later\n"
        "    U[i] += T[i, r] * Y[r]\n"
        "    T[i, j] = tanh(X[i, j])\n"
    )
    t = np.tanh(x).astype(np.float32).astype(np.float64)
    u = (t @ y).astype(np.float32)
    v = (u.astype(np.float64) * 2 + t[:, 0]).astype(np.float32)
    check_text(text, dict(M=3, K=4), dict(X=X, Y=Y), dict(U=u, V=v), 4)


def test_regression_index_and_size_values_and_params():
    X = _q((4, 4))
    x = X.astype(np.float64)
    text = (
        "def iv(X: f32[N, N], pad: int) -> (L, W, P):\n"
        "    L[i, j] = select(i >= j, X[i, j], 0)\n"
        "    W[i] = X[i, 0] * i + N\n"
        "    P[i] = X[i - pad, 0] where i in 0:N+2*pad\n"
    )
    p = np.concatenate([np.zeros(2), x[:, 0], np.zeros(2)])
    check_text(text, dict(N=4, pad=2), dict(X=X),
               dict(L=np.tril(X), W=(x[:, 0] * np.arange(4) + 4).astype(np.float32), P=p.astype(np.float32)))


def test_regression_rank0_input_literal_rhs_and_inf():
    X, Y = np.array(1.5, np.float32), _q((3,))
    text = (
        "def z(X: f32[()], Y: f32[N]) -> (A, B, C):\n"
        "    A[i] = Y[i] * X\n"
        "    B[i] = 1.5 where i in 0:N\n"
        "    C max= max(Y[r], -inf)\n"
    )
    check_text(text, dict(N=3), dict(X=X, Y=Y),
               dict(A=Y * X, B=np.full(3, 1.5, np.float32), C=np.array(Y.max(), np.float32)))


# ------------------------------------------------------------------------------------------ regressions
# Found by test_random_program: LLVM 22's loop vectorizer miscompiled `max=` / `min=` reductions emitted with
# `llvm.maxnum` / `llvm.minnum` (dropped the last iterations, or aborted the process on an assertion). The
# combine was then emitted as compare + select, and is now llvm.maximum / llvm.minimum (NaN-propagating, like
# numpy; see test_regression_a_min_reduction_invariant_in_the_vectorized_loop_builds for why not compare + select).
@pytest.mark.parametrize("n", [7, 9, 13])
def test_max_reduction_keeps_its_last_iterations(n):
    X = np.full(n, -3.0, np.float32)
    X[-1] = 0.5  # the maximum is the last element
    check_text("def p(X: f32[N]) -> T:\n    T max= exp(X[r])\n", dict(N=n), dict(X=X),
               dict(T=np.array(np.exp(0.5), np.float32)))


def test_min_reduction_with_an_intermediate_keeps_its_last_iteration():
    X = np.zeros((16, 16))
    X[14, 15] = -5.0  # only r = 15, the last of r in 1:16, gives 1.5 - 5
    text = (
        "def prog(X: f64[N, N], Y: f64[M, N]) -> T1:\n"
        "    T0[i, j, k] = f32(X[i, i]) where j in 0:N, k in 0:N\n"
        "    T1 min= 1.5 + T0[0, r, 0] + f32(Y[0, r]) + f32(X[r - 1, r]) / (abs(T0[r, 0, 0]) + 1)\n"
    )
    check_text(text, dict(N=16, M=1), dict(X=X, Y=np.zeros((1, 16))), dict(T1=np.array(-3.5, np.float32)))


def test_padded_max_reduction_builds_without_aborting_llvm():
    import subprocess
    import sys

    code = (
        "import numpy as np, tensorlang as tl\n"
        "k = tl.build(tl.op('def p(X: f32[N]) -> T:\\n    T max= X[r - 1] where r in 0:N\\n'), N=29)\n"
        "print(float(k(np.arange(29, dtype=np.float32))))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr[-500:]
    assert float(p.stdout) == 27.0


def test_oracle_rejects_a_floor_of_an_integer_quotient_of_rounded_values():
    """A modulo of a rounded quotient can land on either side of a multiple of the divisor (the oracle's -2.75 gives
    0, the kernel's one ulp beside it 2.7499995: both right, 2.75 apart), so such a program is rejected, not failed;
    the same modulo of exact values (inputs, sums, products) stays in."""
    ctx = progen.Ctx({}, {}, {"T": np.array(-2.75), "X": np.array(-2.75)}, "float",
                     {"mag": 0.0, "exact": {"X"}})
    den = progen.Bin("+", progen.Un("abs", progen.Lit(1.75)), progen.Lit(1))
    with pytest.raises(progen.Reject, match="integer quotient of rounded values"):
        progen.Bin("%", progen.Read("T", ()), den).ev(ctx)
    assert progen.Bin("%", progen.Read("X", ()), den).ev(ctx) == 0.0
    assert progen.Bin("//", progen.Read("X", ()), den).ev(ctx) == -1.0
    # a quotient of rounded values away from an integer is no jump: kept
    assert progen.Bin("%", progen.Read("T", ()), progen.Lit(2)).ev(ctx) == 1.25


ODD_LANES_PROGRAM = """\
def prog(X: f32[N], Y: f32[N + 2, N + 1], Z: f32[N]) -> (T0, T1):
    T0[i] += f64(X[i]) * f64(Y[r, r]) where i in 0:N-1, r in 0:N+2
    T1[i, j, k] = select(f32(T0[i]) < 1 + Z[2*i] <= Y[i, i] + X[i], X[2*i], X[i]) where i in 0:4, j in 0:N, k in 0:N
"""


def test_regression_a_vectorized_loop_of_three_lanes_builds():
    """A vectorized loop of 3 lanes goes as vectors of powers of two (3 = 2 + 1): a `<3 x float>` load widened to 4
    lanes makes the x86 backend abort the process (combineX86ShufflesRecursively). Built in a child process first,
    so that a regression fails this test instead of killing the test run."""
    import subprocess
    import sys

    import tensorlang as tl

    code = ("import tensorlang as tl, sys\nop = tl.op(sys.stdin.read())\ns = tl.schedule(op, N=4)\n"
            "s['T0'].vectorize('i')\ns['T1'].vectorize('k')\ntl.build(s)\nprint('built')\n")
    done = subprocess.run([sys.executable, "-c", code], input=ODD_LANES_PROGRAM, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "built" in done.stdout, done.stderr[-2000:]
    op = tl.op(ODD_LANES_PROGRAM)
    s = tl.schedule(op, N=4)
    s["T0"].vectorize("i")
    s["T1"].vectorize("k")
    rng = np.random.default_rng(0)
    X, Y, Z = (rng.standard_normal(n).astype(np.float32) for n in ((4,), (6, 5), (4,)))
    got, want = tl.build(s)(X, Y, Z), tl.build(op, schedule="naive", N=4)(X, Y, Z)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)


INVARIANT_CHAIN_PROGRAM = """\
def prog(T0: f32[5], Y: f32[2]) -> T2:
    T1[i] = T0[i] * 2.0 where i in 0:5
    T2[i, j] min= T1[i] + T1[r] + Y[s] where i in 0:7, j in 0:4, s in 0:5
"""


@pytest.mark.parametrize("op, dtype, window", [("min", "f32", 5), ("max", "f32", 9), ("min", "i32", 9)])
def test_regression_a_min_reduction_invariant_in_the_vectorized_loop_builds(op, dtype, window):
    """min and max are llvm.minimum/maximum (smin/smax for integers), one read of the accumulator each: LLVM unrolls
    the r and s loops into one chain of min updates invariant in j, vectorizes j and walks every path through the
    chain (vputils::isSingleScalar), and a compare-and-select min, three reads, makes 4**25 paths that never finish
    building. Longer windows (81-long chains), max and integers too. Built in a child process with a timeout, then
    checked against numpy."""
    import sys

    import tensorlang as tl

    if dtype == "f32":
        text = INVARIANT_CHAIN_PROGRAM.replace("min=", f"{op}=").replace("0:5\n", f"0:{window}\n")
    else:
        text = (f"def prog(T0: i32[5], Y: i32[2]) -> T2:\n    T1[i] = T0[i] * 2 where i in 0:5\n"
                f"    T2[i, j] {op}= T1[i] + T1[r] + Y[s] where i in 0:7, j in 0:4, s in 0:{window}\n")
    code = "import sys, tensorlang as tl\ntl.build(tl.op(sys.stdin.read()), schedule='naive')\nprint('built')\n"
    done = subprocess.run([sys.executable, "-c", code], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "built" in done.stdout, done.stderr[-2000:]
    rng, np_dtype = np.random.default_rng(3), {"f32": np.float32, "i32": np.int32}[dtype]
    T0 = (rng.integers(-9, 9, 5) if dtype == "i32" else rng.standard_normal(5)).astype(np_dtype)
    Y = (rng.integers(-9, 9, 2) if dtype == "i32" else rng.standard_normal(2)).astype(np_dtype)
    T1 = T0 * 2
    padded_T1 = np.concatenate([T1, np.zeros(2, np_dtype)])  # T1[i] for i in 5:7 reads as 0 (outside T1)
    padded_Y = np.concatenate([Y, np.zeros(window - 2, np_dtype)])
    terms = padded_T1[:, None, None] + T1[None, :, None] + padded_Y[None, None, :]
    want = np.broadcast_to((terms.min if op == "min" else terms.max)(axis=(1, 2))[:, None], (7, 4))
    got = tl.build(tl.op(text), schedule="naive")(T0, Y)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_regression_slp_vectorizer_miscompiled_a_clamp_of_selects_over_a_cached_input():
    """LLVM 22's SLP vectorizer miscompiles the zero-trial pick of this program (r split and unrolled, j vectorized
    six lanes wide, Y copied into a local buffer at r's outer loop: 1 where numpy gives -1), so it is off
    (tensorlang.target.optimize)."""
    import tensorlang as tl

    op = tl.op("def prog(st: int, X: i32[N], Y: i32[N + 1], Z: i32[N]) -> T0:\n"
               "    T0[i, j] *= max(min(select(0 > X[r] + Y[r], Z[i + j] + X[i], select(X[st*i + j] > X[r + i], "
               "select(X[r] > X[i + 1] + X[i], X[j], X[i]), 1 + X[i + j])), 1), -1) where r in 0:6\n")
    s = tl.schedule(op, N=6, st=1)
    t = s["T0"]
    ro, ri = t.split("r", 6)
    t.reorder(ro, "i", ri, "j")
    t.unroll(ri)
    t.vectorize("j")
    t.cache_read("Y", ro)
    X, Y, Z = np.int32([2, 1, 0, -2, -1, -3]), np.int32([-3, -3, -2, 2, 1, 3, 0]), np.int32([1, 3, 2, 1, 0, 0])
    i = 0  # st = 1: X[st*i + j] is X[i + j]
    terms = [[max(min(Z[i + j] + X[i] if 0 > X[r] + Y[r] else
                      (X[j] if X[r] > X[i + 1] + X[i] else X[i]) if X[i + j] > X[r + i] else 1 + X[i + j], 1), -1)
              for r in range(6)] for j in range(6)]
    want = np.array([np.prod(t, dtype=np.int32) for t in terms], np.int32).reshape(1, 6)
    assert want.tolist() == [[1, 1, 1, 1, 0, -1]]
    np.testing.assert_array_equal(tl.build(s)(X, Y, Z), want)
    rng = np.random.default_rng(0)
    naive = tl.build(op, schedule="naive", N=6, st=1)
    for _ in range(20):
        X, Z, Y = rng.integers(-3, 4, 6, dtype=np.int32), rng.integers(-3, 4, 6, dtype=np.int32), \
            rng.integers(-3, 4, 7, dtype=np.int32)
        np.testing.assert_array_equal(tl.build(s)(X, Y, Z), naive(X, Y, Z))


def test_regression_vectorized_select_of_casts_from_f64_and_f32_builds():
    """A vector select of two saturating float-to-int casts of different source types aborts LLVM's optimizer with
    the intrinsic, so the casts are spelled out, with the same meaning (toward zero, saturating, NaN gives 0) in
    every lane."""
    import tensorlang as tl

    op = tl.op("def prog(X: f64[N], Z: f32[N]) -> T:\n"
               "    T[i] = select(i > 3, i32(X[N - 1 - i]), i32(Z[i])) + i32(Z[i]) * 0\n")
    s = tl.schedule(op, N=8)
    s["T"].vectorize("i")
    X = np.array([np.nan, -np.inf, np.inf, 3e9, -3e9, 2147483647.9, -2147483648.7, -2.5])
    Z = np.array([np.nan, 2.9, -2.9, 3e9, -3e9, np.inf, -np.inf, 7.5], np.float32)
    want = [0, 2, -2, 2147483647,  # i <= 3: Z[i] (NaN gives 0, toward zero, saturating)
            2147483647, 2147483647, -2147483648, 0]  # i > 3: X[7 - i] = 3e9, inf, -inf, NaN
    assert tl.build(s)(X, Z).tolist() == want
    assert tl.build(op, schedule="naive", N=8)(X, Z).tolist() == want
    edge = tl.op("def f(X: f64[N]) -> T:\n    T[i] = i32(X[i])\n")
    e = tl.schedule(edge, N=4)
    e["T"].vectorize("i")
    assert tl.build(e)(np.array([2147483647.9, -2147483648.7, 2147483648.0, -2147483649.0])).tolist() == \
        [2147483647, -2147483648, 2147483647, -2147483648]
