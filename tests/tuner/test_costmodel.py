"""The auto-tuner's cost model: program features (tuner/features.py) and the models (tuner/search/costmodel.py).

Features: fixed length, finite and deterministic on every workload and hand schedule; each annotation and
memory feature checked on a loop nest whose value is known by hand. Models: learn a ranking, are
deterministic, predict zeros until trained; the registry and the ranking metrics on hand-made examples.

Run: ``.venv/bin/pytest tests/tuner/test_costmodel.py -q``
"""
from __future__ import annotations

import numpy as np
import pytest

import tensorlang as tl
from tensorlang import ir, schedules
from tensorlang.schedule import At
from tensorlang.tuner import features
from tensorlang.tuner.features import FEATURE_NAMES, PROGRAM_FEATURES, STORE_FEATURES, as_dict, extract, of_schedule
from tensorlang.tuner.search.costmodel import (
    COST_MODELS,
    ForestCostModel,
    NoCostModel,
    XGBCostModel,
    make_cost_model,
    normalise_per_task,
    ranking_quality,
    register_cost_model,
)

HAND_SCHEDULED = ["matmul", "conv2d", "depthwise_conv2d", "softmax", "maxpool2d"]
MATMUL = schedules.get("matmul")


def smallest_preset(w) -> str:
    """"small" when the workload has it, else the preset with the fewest elements in its sizes' product."""
    if "small" in w.presets:
        return "small"
    return min(w.presets, key=lambda p: np.prod([max(v, 1) for v in w.presets[p].values()]))


def workload_schedule(name: str, preset: str | None = None, hand: bool = False) -> tl.Schedule:
    w = schedules.get(name)
    s = tl.schedule(tl.op(w.source), **w.sizes(preset or smallest_preset(w)))
    if hand:
        w.hand_schedule(s)
    return s


def feats(s: tl.Schedule) -> dict[str, float]:
    """The features of `s` with counts, extents and bytes back on a linear scale."""
    return as_dict(of_schedule(s), linear=True)


def store_func(value_of, n: int = 16, extra: tuple = ()) -> ir.Func:
    """`for i in 0:n: Y[i] = value_of(i, A)` with A, Y f32[n] (and `extra` parameters)."""
    i = ir.Var("i")
    A = ir.Buffer("A", "f32", (n,), "input")
    Y = ir.Buffer("Y", "f32", (n,), "output")
    body = ir.For(i, ir.const(0), ir.const(n), ir.Store(Y, (i,), value_of(i, A)))
    return ir.Func("f", (A,) + extra + (Y,), body)


# ---- features: shape, finiteness, determinism -------------------------------------------------------------

def test_feature_names_are_unique_and_documented():
    assert len(set(FEATURE_NAMES)) == len(FEATURE_NAMES)
    assert FEATURE_NAMES == tuple(f"main_{n}" for n in STORE_FEATURES) + PROGRAM_FEATURES
    doc = features.__doc__
    for name in STORE_FEATURES + PROGRAM_FEATURES:
        documented = "b{k}" + name[2:] if name[:2] in ("b0", "b1", "b2", "b3") else name
        assert f"\n{documented} " in doc, f"feature {name} is not in the module docstring's table"


@pytest.mark.parametrize("name", list(schedules.WORKLOADS))
def test_features_of_every_default_schedule_are_fixed_length_and_finite(name):
    v = of_schedule(workload_schedule(name))
    assert v.dtype == np.float64 and v.shape == (len(FEATURE_NAMES),)
    assert np.all(np.isfinite(v))
    f = as_dict(v, linear=True)
    assert f["n_stores"] >= 1 and f["main_execs"] >= 1 and f["total_bytes"] > 0


@pytest.mark.parametrize("name", HAND_SCHEDULED)
def test_features_of_hand_schedules_are_finite_and_deterministic(name):
    v = of_schedule(workload_schedule(name, hand=True))
    assert v.shape == (len(FEATURE_NAMES),) and np.all(np.isfinite(v))
    again = of_schedule(workload_schedule(name, hand=True))      # a fresh schedule, lowered again
    assert np.array_equal(v, again)
    assert not np.array_equal(v, of_schedule(workload_schedule(name))), "the hand schedule changes nothing"


def test_features_of_hand_schedules_at_default_presets_are_finite():
    for name in ("matmul", "conv2d"):
        v = of_schedule(workload_schedule(name, schedules.get(name).default_preset, hand=True))
        assert np.all(np.isfinite(v))


# ---- features: values known by hand ------------------------------------------------------------------

def double(n: int = 64) -> tl.Schedule:
    return tl.schedule(tl.op("def f(A: f32[N]) -> B:\n    B[i] = A[i] * 2.0"), N=n)


def test_vectorized_schedule_shows_its_vector_width():
    plain = feats(double())
    assert plain["main_vec_width"] == 0 and plain["vec_frac"] == 0 and plain["n_vectorized"] == 0
    for width in (4, 16):
        s = double()
        _, vi = s["B"].split("i", width)
        s["B"].vectorize(vi)
        f = feats(s)
        assert f["main_vec_width"] == width and f["main_inner_extent"] == width
        assert f["vec_frac"] == 1.0 and f["n_vectorized"] == 1
        assert f["main_execs"] == 64 and f["total_flops"] == 64


def test_parallel_schedule_shows_its_extent_and_work_per_iteration():
    assert feats(double())["main_par_extent"] == 0
    s = double()
    io, _ii = s["B"].split("i", 16)
    s["B"].parallel(io)
    f = feats(s)
    assert f["main_par_extent"] == 4 and f["main_par_work"] == 16
    assert f["n_parallel"] == 1 and f["par_frac"] == 1.0


def test_unrolled_loops_multiply():
    s = tl.schedule(tl.op("def f(A: f32[M, N]) -> B:\n    B[m, n] = A[m, n]"), M=8, N=12)
    _, ni = s["B"].split("n", 4)
    s["B"].unroll(ni)
    s["B"].unroll("m")
    f = feats(s)
    assert f["main_unroll"] == 32 and f["n_unrolled"] == 2
    assert feats(tl.schedule(s.op, M=8, N=12))["main_unroll"] == 1


def test_op_counts_per_execution():
    def value(i, A):
        a = ir.Load(A, (i,))
        t = ir.BinOp("*", ir.Call("exp", (a,)), ir.FloatImm(2.0))
        f = ir.BinOp("-", ir.BinOp("/", a, ir.FloatImm(3.0)), ir.FloatImm(1.0))
        return ir.Select(ir.Cmp(">", a, ir.FloatImm(0.0)), t, f)

    f = as_dict(extract(store_func(value)), linear=True)
    counts = {k: f[f"main_{k}"] for k in ("add", "mul", "div", "math", "cmp", "cast", "loads", "flops")}
    assert counts == {"add": 1, "mul": 1, "div": 1, "math": 1, "cmp": 2, "cast": 0, "loads": 3, "flops": 6}
    assert f["main_execs"] == 16 and f["total_flops"] == 96 and f["main_accumulates"] == 0


def test_reduction_counts_init_and_update_and_picks_the_update_as_main():
    s = tl.schedule(tl.op("def f(A: f32[M, K]) -> B:\n    B[m] += A[m, k]"), M=8, K=4)
    f = feats(s)
    assert f["n_stores"] == 2 and f["main_execs"] == 32 and f["main_accumulates"] == 1
    assert f["total_execs"] == 8 + 32 and f["main_b0_reuse"] == 8   # B: 64 accesses (read + write) to 8 elements


def test_strides_and_footprints_of_a_transpose():
    f = feats(workload_schedule("transpose"))                        # Y[j, i] = X[i, j], X: f32[24, 40]
    assert (f["main_b0_stride_code"], f["main_b0_stride"]) == (1, 1)       # Y along i: unit stride
    assert (f["main_b1_stride_code"], f["main_b1_stride"]) == (2, 40)      # X along i: a row apart
    assert f["main_b0_bytes"] == f["main_b1_bytes"] == 24 * 40 * 4
    assert f["main_b0_reuse"] == f["main_b1_reuse"] == 1


def test_invariant_access_has_stride_code_zero():
    f = feats(tl.schedule(tl.op("def f(A: f32[M, K]) -> B:\n    B[m] += A[m, k]"), M=8, K=4))
    assert f["main_b0_stride_code"] == 0 and f["main_b1_stride_code"] == 1


def test_unanalysable_index_falls_back_to_the_whole_buffer():
    X = ir.Buffer("X", "f32", (100,), "input")
    IDX = ir.Buffer("IDX", "i32", (16,), "input")

    def gather(i, A):
        return ir.BinOp("+", ir.Load(A, (i,)), ir.Load(X, (ir.Cast("i64", ir.Load(IDX, (i,))),)))

    f = as_dict(extract(store_func(gather, extra=(X, IDX))), linear=True)
    assert f["main_b1_bytes"] == 400 and f["main_b1_stride_code"] == 2      # X: the largest footprint, unknown
    assert f["main_b2_bytes"] == 64 and f["main_b3_bytes"] == 64            # A and IDX: 16 elements of 4 bytes


def test_fused_loops_with_div_mod_indices_are_analysed():
    s = tl.schedule(tl.op(MATMUL.source), M=12, N=10, K=8)
    s["C"].fuse("i", "j")
    f = feats(s)
    assert f["main_b0_bytes"] == 12 * 10 * 4 and f["main_b0_stride_code"] == 0   # C[i_j // 10, i_j % 10]
    assert f["main_execs"] == 12 * 10 * 8


def test_cache_level_is_the_largest_nest_that_fits():
    fits = feats(tl.schedule(tl.op("def f(A: f32[N]) -> B:\n    B[i] = A[i]"), N=4096))   # 16 KiB + 16 KiB
    assert fits["main_l1_iters"] == 4096 and fits["main_l1_bytes"] == 32768
    too_big = feats(tl.schedule(tl.op("def f(A: f32[N]) -> B:\n    B[i] = A[i]"), N=8192))
    assert too_big["main_l1_iters"] == 1 and too_big["main_l1_bytes"] == 128    # one line of A and one of B
    assert too_big["main_l2_iters"] == 8192


def test_hand_matmul_moves_fewer_bytes_per_flop_into_l1_than_the_naive_one():
    per_flop = {}
    for hand in (False, True):
        f = feats(workload_schedule("matmul", "256", hand=hand))
        per_flop[hand] = f["main_l1_bytes_per_iter"] / f["main_flops"]
        per_flop[hand, "traffic"] = f["l1_traffic"] / f["total_flops"]
    assert per_flop[True] < per_flop[False] / 10
    assert per_flop[True, "traffic"] < per_flop[False, "traffic"]


def random_matmul_schedules(n: int, seed: int = 0) -> list[tl.Schedule]:
    """`n` matmul schedules at M=N=K=64: random tiles of i, j, k, loop orders, vectorize/unroll/parallel."""
    rng = np.random.default_rng(seed)
    op = tl.op(MATMUL.source)
    out = []
    for _ in range(n):
        s = tl.schedule(op, M=64, N=64, K=64)
        c = s["C"]
        io, ii = c.split("i", int(rng.choice([1, 4, 8, 16])))
        jo, ji = c.split("j", int(rng.choice([4, 8, 16, 32, 64])))
        ko, ki = c.split("k", int(rng.choice([1, 4, 8, 64])))
        j_inner = rng.random() < 0.7
        c.reorder(io, jo, ko, ii, ki, ji) if j_inner else c.reorder(io, jo, ko, ji, ii, ki)
        if j_inner and rng.random() < 0.7:
            c.vectorize(ji)
        if rng.random() < 0.5:
            c.unroll(ki if j_inner else ii)
        if rng.random() < 0.5:
            c.parallel(io)
        out.append(s)
    return out


def test_random_matmul_schedules_vary_the_features_that_describe_them():
    X = np.array([of_schedule(s) for s in random_matmul_schedules(40)])
    assert X.shape == (40, len(FEATURE_NAMES)) and np.all(np.isfinite(X))
    col = {name: X[:, i] for i, name in enumerate(FEATURE_NAMES)}
    for name in ("main_vec_width", "main_inner_extent", "main_par_extent", "main_l1_bytes_per_iter"):
        assert np.ptp(col[name]) > 0, f"{name} is constant over 40 different schedules"
    assert len({row.tobytes() for row in X}) > 20
    assert np.ptp(col["total_flops"]) == 0                  # the same computation every time


@pytest.mark.parametrize("name", ["conv2d", "dense_bias_relu", "softmax", "layernorm", "depthwise_conv2d"])
def test_features_of_allowed_configs_are_the_same_with_the_lowering_checks_at_the_end(name):
    # of_config skips the trial lowering after each primitive (tensorlang.schedule.lowering_checks_at_the_end):
    # the configs a generated space allows all lower, so their features are those of the checked schedule, and a
    # schedule that does not lower is still refused (None)
    from tensorlang.tuner.task import Task
    t = Task.create(name, threads=2, space="generated")
    sp, rng = t.space, np.random.default_rng(3)
    configs = list(sp.variants())
    while len(configs) < 40:
        c = sp.canonical(sp.random(rng))
        if sp.allowed(c):
            configs.append(c)
    assert any(isinstance(st.attach, At) for c in configs
               for st in sp.schedule(t.op, t.sizes, c).state().stages.values())  # trial lowerings did run
    for c in configs:
        assert np.array_equal(features.of_config(sp, t.op, t.sizes, c), of_schedule(sp.schedule(t.op, t.sizes, c)))


def test_a_schedule_that_does_not_lower_is_refused_with_the_checks_at_the_end_too():
    # T0 computed at T1's loop i, which goes parallel: the rows of T0 that its iterations need overlap
    # (test_schedule_placement.py's split-tail program): refused at parallel() when checked, at lowering when not
    from tensorlang.schedule import lowering_checks_at_the_end
    op = tl.op(OVERLAPPING_PROGRAM)

    def refused(s):
        s["T0"].compute_at(s["T1"], "i")
        s["T1"].parallel("i")

    with pytest.raises(tl.ScheduleError, match=r"parallel\(T1, i\): .*overlap"):
        refused(tl.schedule(op, N=2, M=2, K=7))
    with lowering_checks_at_the_end():
        s = tl.schedule(op, N=2, M=2, K=7)
        refused(s)  # not checked here
        with pytest.raises(tl.ScheduleError, match="overlap"):
            s.lowered()


OVERLAPPING_PROGRAM = """\
def prog(X: f64[N, 2], Y: f64[N, M], Z: f64[M, K, N]) -> T1:
    T0[i, j] += X[i, j + r + 1] * Y[s, i] where i in 0:1, j in 0:2
    T1[i, j] = select(min(T0[i, j + i], Z[i, 2*j + i, j + i + 1]) < min(X[j, i + 1], T0[j, i + j]), \\
        log(abs(f64(X[j, i])) + 1), T0[i, i]) where i in 0:N+2, j in 0:2
"""


# ---- models ----------------------------------------------------------------------------------------

def synthetic(n: int, seed: int = 0, d: int = 10):
    """Rows of 2 tasks whose throughput depends (nonlinearly) on 3 of `d` features; y normalised per task."""
    rng = np.random.default_rng(seed)
    X = rng.random((n, d))
    groups = np.arange(n) % 2
    gflops = (1 + 4 * X[:, 0] + 2 * np.sin(3 * X[:, 1]) + (X[:, 2] > 0.5)) * (1 + groups)
    return X, normalise_per_task(gflops, groups), groups


@pytest.mark.parametrize("name", ["xgb", "forest"])
def test_model_learns_a_ranking_that_holds_on_held_out_rows(name):
    X, y, groups = synthetic(300)
    m = make_cost_model(name, seed=0)
    m.fit(X[:200], y[:200], groups[:200])
    assert m.trained
    for task in (0, 1):
        rows = np.flatnonzero(groups[200:] == task) + 200
        assert ranking_quality(y[rows], m.predict(X[rows]))["spearman"] > 0.8


@pytest.mark.parametrize("cls", [XGBCostModel, ForestCostModel])
def test_models_are_deterministic_for_a_seed_and_fit_replaces_the_model(cls):
    X, y, _ = synthetic(80)
    a, b = cls(seed=3), cls(seed=3)
    a.fit(X, y)
    b.fit(X, y)
    assert np.array_equal(a.predict(X), b.predict(X))
    a.fit(X, 1 - y)                                        # retrain on the opposite ranking
    assert ranking_quality(y, a.predict(X))["spearman"] < -0.8


@pytest.mark.parametrize("name", ["xgb", "forest"])
def test_untrained_models_predict_zeros(name):
    X, y, _ = synthetic(40)
    m = make_cost_model(name)
    assert not m.trained and np.array_equal(m.predict(X), np.zeros(40))
    m.fit(X[:5], y[:5])                                    # too few rows
    assert not m.trained and np.array_equal(m.predict(X), np.zeros(40))
    m.fit(X, y)
    assert m.trained and np.ptp(m.predict(X)) > 0
    m.fit(X, np.full(40, 0.5))                             # constant y: nothing to learn, the old model is gone
    assert not m.trained and np.array_equal(m.predict(X), np.zeros(40))


def test_no_cost_model_never_learns():
    X, y, _ = synthetic(40)
    m = make_cost_model("none")
    m.fit(X, y)
    assert isinstance(m, NoCostModel) and not m.trained
    assert np.array_equal(m.predict(X), np.zeros(40))


def test_models_check_their_arrays():
    X, y, _ = synthetic(20)
    m = XGBCostModel()
    with pytest.raises(ValueError, match="one value per row"):
        m.fit(X, y[:-1])
    with pytest.raises(ValueError, match="non-finite"):
        m.fit(X, np.where(np.arange(20) == 3, np.nan, y))
    with pytest.raises(ValueError, match="2-D"):
        m.predict(X[0])
    m.fit(X, y)
    with pytest.raises(ValueError, match="trained on 10 features"):
        m.predict(X[:, :4])
    assert m.predict(X[:0]).shape == (0,)


def test_registry():
    assert set(COST_MODELS) >= {"xgb", "none", "forest"}
    assert type(make_cost_model("xgb", seed=7)) is XGBCostModel and make_cost_model("xgb", seed=7).seed == 7
    with pytest.raises(ValueError, match="cost models: xgb, none, forest"):
        make_cost_model("lightgbm")
    with pytest.raises(ValueError, match="registered already"):
        register_cost_model("xgb", XGBCostModel)
    for bad in ("", "Upper", "9lives", "has space", None):
        with pytest.raises(ValueError, match="cost model name"):
            register_cost_model(bad, XGBCostModel)
    with pytest.raises(ValueError, match="not a class with fit and predict"):
        register_cost_model("instance", XGBCostModel())
    with pytest.raises(ValueError, match="not a class with fit and predict"):
        register_cost_model("fitonly", type("FitOnly", (), {"fit": lambda self, X, y, groups=None: None}))
    assert "instance" not in COST_MODELS and "fitonly" not in COST_MODELS

    class Constant(NoCostModel):
        name = "constant"

    register_cost_model("constant", Constant)
    try:
        assert isinstance(make_cost_model("constant", seed=2), Constant)
    finally:
        del COST_MODELS["constant"]


# ---- ranking metrics and normalisation ---------------------------------------------------------------

def test_ranking_quality_of_a_perfect_ranking():
    q = ranking_quality([0.2, 1.0, 0.0, 0.5, 0.7, 0.1], [2, 9, 0, 4, 5, 1])
    assert q == {"spearman": 1.0, "ndcg@10": 1.0, "top1": 1.0, "top5": 1.0, "pairwise": 1.0}


def test_ranking_quality_of_a_reversed_ranking():
    q = ranking_quality([0.0, 0.25, 0.5, 0.75, 1.0, 0.9, 0.1], [7, 6, 5, 4, 1, 2, 6.5])
    assert q["spearman"] == pytest.approx(-1.0)
    assert q["pairwise"] == 0.0 and q["top1"] == 0.0 and q["top5"] == 0.0
    assert 0 < q["ndcg@10"] < 1


def test_ranking_quality_top_k_places_and_ties():
    truth = np.array([1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    fifth = np.array([3.0, 7.0, 6.0, 5.0, 4.0, 2.0, 1.0])     # the best row predicted fifth
    assert (ranking_quality(truth, fifth)["top1"], ranking_quality(truth, fifth)["top5"]) == (0.0, 1.0)
    sixth = np.array([3.0, 8.0, 7.0, 6.0, 5.0, 4.0, 1.0])     # sixth
    assert ranking_quality(truth, sixth)["top5"] == 0.0
    flat = ranking_quality(truth, np.zeros(7))                 # a model that knows nothing
    assert flat["top1"] == 0.0 and flat["top5"] == 0.0 and flat["pairwise"] == 0.5 and flat["spearman"] == 0.0
    tied_best = ranking_quality([1.0, 0.2, 1.0], [0.0, 0.5, 0.9])   # either true best counts
    assert tied_best["top1"] == 1.0 and tied_best["pairwise"] == 0.5


def test_ranking_quality_refuses_bad_input():
    with pytest.raises(ValueError, match="at least 2"):
        ranking_quality([1.0], [1.0])
    with pytest.raises(ValueError, match="equal length"):
        ranking_quality([1.0, 0.0], [1.0, 0.0, 2.0])


def test_normalise_per_task():
    y = normalise_per_task([5.0, 10.0, 0.0, 2.0, 1.0, -1.0, np.inf, 0.0], [0, 0, 0, 1, 1, 1, 1, 2])
    assert y.tolist() == [0.5, 1.0, 0.0, 1.0, 0.5, 0.0, 0.0, 0.0]
    assert normalise_per_task([1.0, 4.0]).tolist() == [0.25, 1.0]
    with pytest.raises(ValueError, match="one task id per throughput"):
        normalise_per_task([1.0, 2.0], [0])


def test_a_compiler_bug_in_a_config_warns_and_does_not_stop_featurizing(monkeypatch):
    """A config whose scheduling hits an internal error counts as unschedulable, with a warning naming the error,
    so that one compiler bug does not end a whole `tune-model` run."""
    from tensorlang.tuner.task import Task
    t = Task.create("matmul", preset="small", threads=1)
    cfg = t.space.config_at(0)
    assert features.of_config(t.space, t.op, t.sizes, cfg) is not None

    def broken(op, sizes, config):
        raise KeyError("t3")
    monkeypatch.setattr(t.space, "schedule", broken)
    with pytest.warns(RuntimeWarning, match=r"internal error \(KeyError: 't3'\)"):
        assert features.of_config(t.space, t.op, t.sizes, cfg) is None
