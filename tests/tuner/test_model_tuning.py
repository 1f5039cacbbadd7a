"""Model tuning: a model's tasks, the task scheduler, transfer between tasks, pass variants stored and
found again, tune_model end to end (records, resume, kill -9, the tuned schedules picked up afterwards) and the
tasks / tune-model commands."""
from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time

import numpy as np
import pytest

from tensorlang.errors import UsageError
from tensorlang.tuner.model.task_scheduler import TaskScheduler, TaskState

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---------------------------------------------------------------- the task scheduler (no measuring)


def simulate(states_args, curves, trials, strategy, round_trials=8, seed=0):
    """Run the scheduler on tasks whose best time after n trials is curves[i](n); returns the estimated latency
    after each round as [(trials, latency)]."""
    states = [TaskState(*a) for a in states_args]
    s = TaskScheduler(states, strategy, round_trials=round_trials, seed=seed)
    spent, out = 0, []
    while spent < trials:
        i = s.next_task()
        n = min(round_trials, trials - spent)
        s.record(i, n, curves[i](states[i].trials + n))
        spent += n
        out.append((spent, s.estimated_latency()))
    return out


def curve(start, floor, tau):
    return lambda n: start * (floor + (1 - floor) * math.exp(-n / tau))


def test_warmup_gives_every_task_a_round_first_then_the_largest_expected_gain():
    s = TaskScheduler([TaskState(1, 1e6, "a", 1e-3), TaskState(4, 1e6, "b", 1e-3), TaskState(1, 1e6, "c", 1e-4)],
                      round_trials=4)
    order = []
    for _ in range(3):
        i = s.next_task()
        order.append(i)
        s.record(i, 4, s.states[i].seconds_now * 0.9)
    assert order == [0, 1, 2]
    # task 1 holds 4 calls of the same time as task 0: the largest share, the largest gain
    assert s.next_task() == 1
    g = s.gradients()
    assert g[1] < g[0] < g[2] <= 0


def test_a_task_whose_curve_flattened_gives_way():
    s = TaskScheduler([TaskState(1, 1e6, None, 1e-3), TaskState(1, 1e6, None, 1e-3)], round_trials=4, window=2)
    for _ in range(4):  # task 0 stuck at 1.0 ms for four rounds, task 1 falling to 1.0 ms
        s.record(0, 4, 1e-3)
    for t in (1.3e-3, 1.2e-3, 1.1e-3, 1.0e-3):
        s.record(1, 4, t)
    g = s.gradients()
    assert g[1] < g[0]
    assert s.next_task() == 1


def test_a_large_task_whose_fastest_configs_agree_gives_way_to_a_small_task_still_spread_wide():
    # ResNet-18's case: a 2-call task at 0.5 ms after 100 trials whose 8 fastest configs lie within 0.4% (its curve
    # is flat), against a 1-call task at 0.06 ms after its warm-up whose fastest lie 10% apart. The forward guess
    # c * r / n alone would promise the large task 0.16 ms a round and starve the small one.
    s = TaskScheduler([TaskState(2, 1e9, None, 6e-4), TaskState(1, 1e8, None, 1e-4)], round_trials=16)
    s.record(0, 100, 5.0e-4, times=[5.0e-4 + k * 2.5e-7 for k in range(8)] + [7e-4] * 92)
    s.record(1, 16, 6.0e-5, times=[6.0e-5 * (1 + 0.1 * k) for k in range(16)])
    assert s.states[0].spread == pytest.approx(2.5e-7) and s.states[1].spread == pytest.approx(6e-6)
    assert s.next_task() == 1
    # and the invalid configs of a round (None) and one without times (its best stands for them) are taken
    s.record(1, 16, 5.0e-5, times=[None] * 15 + [5.0e-5])
    assert s.states[1].lowest[0] == 5.0e-5
    s.record(0, 16, 4.0e-4)
    assert s.states[0].lowest[0] == 4.0e-4 and len(s.states[0].lowest) == 8


def test_a_slow_task_of_a_group_is_pushed_towards_its_group_best():
    # same kind, same FLOPs: task 1 runs at a quarter of task 0's throughput, so it has room to gain
    s = TaskScheduler([TaskState(1, 1e9, "conv", 4e-3), TaskState(1, 1e9, "conv", 4e-3)], round_trials=8)
    s.record(0, 64, 1e-3)
    s.record(1, 64, 4e-3)
    g = s.gradients()
    assert g[1] < g[0]


def test_round_robin_takes_turns_and_dead_tasks_are_skipped():
    s = TaskScheduler([TaskState(1, 1.0, None, 1.0) for _ in range(3)], "round-robin", round_trials=2)
    seen = []
    for _ in range(6):
        i = s.next_task()
        seen.append(i)
        s.record(i, 2, 0.5, exhausted=(i == 1))
    assert seen == [0, 1, 2, 0, 2, 0]
    assert TaskScheduler([TaskState(1, 1.0)], round_trials=1).next_task() == 0


def test_bad_scheduler_arguments_are_usage_errors():
    with pytest.raises(UsageError, match="choose one of gradient, round-robin"):
        TaskScheduler([TaskState(1, 1.0)], "fastest")
    with pytest.raises(UsageError, match="at least one task"):
        TaskScheduler([])


def test_the_gradient_rule_reaches_round_robins_latency_in_fewer_trials():
    # 12 tasks: a few large ones with slow curves, many small ones; weights 1 to 3
    rng = np.random.default_rng(1)
    args, curves = [], []
    for i in range(12):
        start = float(rng.choice([5e-3, 1e-3, 2e-4, 5e-5]))
        w = int(rng.integers(1, 4))
        args.append((w, 1e8, f"k{i % 3}", start))
        curves.append(curve(start, float(rng.uniform(0.2, 0.6)), float(rng.uniform(20, 200))))
    rr = simulate(args, curves, 800, "round-robin")
    target = rr[-1][1]
    grad = simulate(args, curves, 800, "gradient")
    reached = next(t for t, lat in grad if lat <= target * 1.0000001)
    assert reached <= 0.7 * 800, (reached, target, grad[-1])


def test_the_hindsight_ceiling_never_needs_more_than_the_run_and_finds_the_wasted_rounds(tmp_path):
    from tensorlang.tuner.records.database import Database, Record
    from tensorlang.tuner.research.run_curves import hindsight_trials, task_curves
    # a round-robin run over three tasks, 4 rounds of 4 each: "flat" stops improving after its first round, "slow"
    # improves every round, "tiny" weighs little
    times = {"flat": [3.0, 2.0, 2.5, 2.2] + [2.1] * 12, "slow": [4.0 - 0.2 * k for k in range(16)],
             "tiny": [0.3] * 8 + [0.1] * 8}
    with Database(tmp_path / "rr.db") as db:
        for rnd in range(4):
            for key, ts in times.items():
                for k, t in enumerate(ts[rnd * 4:rnd * 4 + 4]):
                    db.add(Record(key, "w", {}, {}, {"n": rnd * 4 + k}, None, (t,)))
    curves = task_curves(tmp_path / "rr.db")
    assert curves["flat"][-1] == 2.0 and curves["slow"][-1] == pytest.approx(1.0) and len(curves["tiny"]) == 16
    weights = {"flat": 1, "slow": 1, "tiny": 1}
    final = sum(c[-1] for c in curves.values())
    # round-robin's own allocation is one of those tried: never more than its 48 trials
    assert hindsight_trials(curves, weights, final, round_trials=4) <= 48
    # "flat" needs 1 round, "tiny" 3, "slow" all 4: 32 trials
    assert hindsight_trials(curves, weights, final, round_trials=4) == 32
    assert hindsight_trials(curves, weights, final - 0.01, round_trials=4) is None


def test_restore_rebuilds_rounds_from_records():
    s = TaskScheduler([TaskState(1, 1.0)], round_trials=3)
    s.restore(0, [None, 5.0, 4.0, 6.0, 3.0])
    assert s.states[0].trials == 5 and s.states[0].best_s == 3.0
    assert s.states[0].history == [(3, 4.0), (5, 3.0)]
    assert s.warmup_pending() == []


# ---------------------------------------------------------------- transfer (no measuring)


def test_a_shared_model_trained_on_other_tasks_ranks_a_new_task():
    from tensorlang.tuner.search.costmodel import ranking_quality
    from tensorlang.tuner.search.transfer import PriorData, SharedCostModel
    rng = np.random.default_rng(0)

    def task_rows(n, scale):
        X = rng.random((n, 4))
        speed = 1 + 3 * X[:, 0] - X[:, 1]
        return X * [1, 1, scale, 1], speed / speed.max()
    Xa, ya = task_rows(200, 1.0)
    Xb, yb = task_rows(60, 5.0)   # another task: different sizes (feature 2), the same rule
    shared = SharedCostModel("xgb", seed=0, prior=PriorData(Xa, ya, np.array(["a"] * 200, dtype=object)))
    view = shared.view("b")
    assert view.trained  # before the task has a single row of its own
    q = ranking_quality(yb, view.predict(Xb))
    assert q["spearman"] > 0.7, q
    view.fit(Xb[:10], yb[:10])  # the task's own rows join, for the other tasks' models: its own stays as it was
    view.predict(Xb[:1])
    assert shared.fits == 1 and len(shared.training_set()[0]) == 210
    assert len(shared.training_set(exclude="b")[0]) == 200
    shared.view("c").predict(Xb[:1])  # another task's model learns from them
    assert shared.fits == 2


def test_a_tasks_own_rows_take_over_its_scores_from_the_shared_model_as_they_come():
    from tensorlang.tuner.search.costmodel import ranking_quality
    from tensorlang.tuner.search.transfer import PriorData, SharedCostModel
    rng = np.random.default_rng(1)
    Xa = rng.random((2000, 4))
    ya = Xa[:, 0] / Xa[:, 0].max()          # the other tasks: feature 0 is fast
    Xb = rng.random((300, 4))
    yb = (1.2 - Xb[:, 0]) / 1.2             # this task: the opposite
    shared = SharedCostModel("xgb", seed=0, prior=PriorData(Xa, ya, np.array(["a"] * 2000, dtype=object)))
    view = shared.view("b", own_rows=16)
    test_rows = rng.random((200, 4))
    truth = (1.2 - test_rows[:, 0]) / 1.2
    view.fit(Xb[:4], yb[:4])                # below MIN_OWN: the shared model alone
    assert view.own_share() == 0.0
    assert ranking_quality(truth, view.predict(test_rows))["spearman"] < -0.5
    view.fit(Xb, yb)                        # 300 rows of its own: 300 / 316 of the score is the task's model
    assert view.own_share() == pytest.approx(300 / 316)
    assert ranking_quality(truth, view.predict(test_rows))["spearman"] > 0.8
    assert len(shared.training_set()[0]) == 2300  # the other tasks' models still learn from the task's rows
    assert len(shared.training_set(exclude="b")[0]) == 2000


def test_a_tasks_share_of_the_scores_comes_from_a_model_of_the_other_tasks_rows_only():
    # the task's rows are normalised by its best so far: a task still in a slow region labels it 1.0, and a model
    # trained on those rows too cannot tell that region from a faster one; the model of the other tasks ranks as
    # they measured
    from tensorlang.tuner.search.transfer import PriorData, SharedCostModel
    rng = np.random.default_rng(2)
    Xa = rng.random((400, 3))
    ya = Xa[:, 0] / Xa[:, 0].max()             # the other tasks: feature 0 large is fast
    shared = SharedCostModel("xgb", seed=0, prior=PriorData(Xa, ya, np.array(["a"] * 400, dtype=object)))
    Xb = rng.random((40, 3)) * [0.2, 1, 0] + [0, 0, 5]  # this task (feature 2: its size): only slow configs so far,
    view = shared.view("b")
    view.fit(Xb, rng.uniform(0.95, 1.0, 40))  # each close to its best so far
    fast, slow = np.array([[0.9, 0.5, 5.0]]), np.array([[0.1, 0.5, 5.0]])
    others = shared.model_for("b")
    assert others.predict(fast)[0] - others.predict(slow)[0] > 0.5
    every_row = shared.model_for(None)
    assert abs(every_row.predict(fast)[0] - every_row.predict(slow)[0]) < 0.1
    assert view.own_share() == pytest.approx(40 / 56)
    assert view.predict(fast)[0] - view.predict(slow)[0] > 0.1  # the blend: the task's own model, and the others


def test_transfer_genetic_proposes_the_best_predicted_before_any_measurement():
    from tensorlang.space import Knob, Space
    from tensorlang.tuner.search.transfer import PriorData, SharedCostModel, TransferGenetic
    space = Space("toy", [Knob("a", tuple(range(16))), Knob("b", tuple(range(16)))], lambda s, c: None)
    X = np.array([[a, b] for a in range(16) for b in range(16)], dtype=float)
    y = X[:, 0] / 15.0   # "a" large is fast
    shared = SharedCostModel("xgb", seed=0, prior=PriorData(X, y, np.array(["other"] * len(X), dtype=object)))
    featurize = lambda c: np.array([c["a"], c["b"]], dtype=float)  # noqa: E731
    strategy = TransferGenetic(space, seed=0, cost_model=shared.view("t"), featurize=featurize)
    picks = strategy.propose(8)
    assert len(picks) == 8
    assert sum(c["a"] >= 13 for c in picks) >= 7, picks  # one in eight is random exploration
    random_picks = TransferGenetic(space, seed=0, cost_model=SharedCostModel("none").view("t"),
                                   featurize=featurize).propose(8)
    assert sum(c["a"] >= 13 for c in random_picks) < 7


def test_prior_rows_come_from_earlier_records_and_datasets(tmp_path):
    from tensorlang.tuner.records.database import Database
    from tensorlang.tuner.search.transfer import default_datasets, prior_rows
    from tensorlang.tuner.tuning import tune
    db_path = tmp_path / "t.db"
    tune("matmul", trials=6, preset="small", strategy="random", db=str(db_path), jobs=1, threads=1, progress=False,
         retime_top=0)
    datasets = [p for p in default_datasets() if p.name == "matmul_512.csv"]
    assert datasets, "the shipped datasets are missing"
    from tensorlang.tuner.records.dataset import Dataset
    from tensorlang.tuner.task import _target
    here, there = _target(), Dataset.load(str(datasets[0])).header["target"]
    with Database(db_path) as db:
        # as if this machine were the dataset's CPU: its rows come in, and the database's of another CPU do not
        prior = prior_rows(db, datasets=datasets, per_task=4, per_dataset=12, target=there)
        assert prior.sources == ({"database": 4} if here["cpu"] == there["cpu"] else {}) | {"matmul_512.csv": 12}
        assert prior.X.shape == (sum(prior.sources.values()), prior.X.shape[1]) and np.all(np.isfinite(prior.X))
        for g in set(prior.groups):  # throughput normalised per task: each task's best is 1
            assert prior.y[prior.groups == g].max() == pytest.approx(1.0)
        # a dataset measured on another CPU is left out, and says so
        elsewhere = dict(there, cpu="another-cpu")
        prior = prior_rows(db, datasets=datasets, per_task=4, per_dataset=12, target=elsewhere)
        assert prior.n == 0 and prior.skipped == {"matmul_512.csv": f"measured on {there['cpu']}, not another-cpu"}
        # the tasks a transfer benchmark tunes are left out, database and datasets alike
        prior = prior_rows(db, datasets=datasets, per_task=4, per_dataset=12, target=here,
                           exclude=[("matmul", {"M": 512, "N": 512, "K": 512}), ("matmul", _matmul_small_sizes())])
        assert prior.n == 0 and "database" not in prior.sources


def _matmul_small_sizes() -> dict:
    from tensorlang import schedules
    return schedules.get("matmul").sizes("small")


# ---------------------------------------------------------------- models (torch)


def _torch():
    return pytest.importorskip("torch")


def small_net():
    """Four 3x3 convolutions on 8x8 images (the last three identical: one task of several calls), a mean and a
    linear layer."""
    torch = _torch()
    nn = torch.nn

    class Small(nn.Module):
        def __init__(self):
            super().__init__()
            self.c0 = nn.Conv2d(3, 16, 3, padding=1)
            self.c = nn.ModuleList([nn.Conv2d(16, 16, 3, padding=1) for _ in range(3)])
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            y = torch.relu(self.c0(x))
            for c in self.c:
                y = torch.relu(c(y))
            return self.fc(y.mean(dim=(2, 3)))
    torch.manual_seed(0)
    return Small().eval(), (torch.randn(1, 3, 8, 8),)


@pytest.fixture(scope="module")
def small_pt2(tmp_path_factory):
    torch = _torch()
    path = tmp_path_factory.mktemp("pt2") / "small.pt2"
    net, args = small_net()
    torch.export.save(torch.export.export(net, args), str(path))
    return path


def test_a_models_tasks_are_its_distinct_kernels_weighted_by_calls():
    import tensorlang as tl
    from tensorlang.tuner.model.tasks import model_tasks, profile_tasks, task_rows
    net, args = small_net()
    model = tl.from_torch(net, args, pass_options={"layout_block": 0})
    tasks = model_tasks(model, threads=1)
    assert sum(t.weight for t in tasks) == len(model.steps)
    assert len({t.key for t in tasks}) == len(tasks)
    conv = [t for t in tasks if t.weight == 3]  # the three identical 16 -> 16 convolutions and their ReLUs
    assert len(conv) == 1 and conv[0].kind == "convolution_relu" and conv[0].flops == conv[0].task.flops > 0
    total = profile_tasks(model, tasks)
    assert total > 0 and all(t.seconds_now > 0 for t in tasks)
    # what profile_tasks makes of a profile run, on times of our own (a real run's per-call times are noise; under
    # a loaded machine one preempted call took the sum 3.7x past the tasks' medians)
    fake = [1e-3 * (k + 1) for k in range(len(model.steps))]
    fake[conv[0].steps[0]] = 1.0  # one slow call of the convolution: the median over its calls ignores it
    model.profile_flat = lambda inputs, repeat=5: list(fake)
    assert profile_tasks(model, tasks) == pytest.approx(sum(fake))
    for t in tasks:
        assert t.seconds_now == pytest.approx(float(np.median([fake[i] for i in t.steps])))
        assert t.seconds_calls == pytest.approx(sum(fake[i] for i in t.steps))
    assert conv[0].seconds_now < 0.1
    # the shares are of the calls' own times: they add up to the whole, slow call included
    rows = task_rows(tasks, sum(fake))
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert rows[tasks.index(conv[0])]["share"] > 0.9


def test_pass_options_change_the_passes_and_never_what_the_model_computes():
    import tensorlang as tl
    torch = _torch()
    net, args = small_net()
    want = net(*args).detach().numpy()
    x = args[0].numpy()
    outs = {}
    for options in ({}, {"layout_block": 0}, {"layout_block": 4}, {"layout_block": 8}, {"fuse_reductions": False}):
        model = tl.from_torch(net, args, pass_options=options)
        assert model.pass_options == options and model.pass_options_source == ("given" if options else "default")
        ops = {n.op for n in model.graph.all_nodes()}
        assert ("convolution_blocked" in ops) == (options.get("layout_block") != 0), options
        outs[json.dumps(options)] = model(x)
        np.testing.assert_allclose(outs[json.dumps(options)], want, rtol=1e-4, atol=1e-4)
    assert any("NCHW4c" in c for r in tl.from_torch(net, args, pass_options={"layout_block": 4}).passes
               for c in r.changes)
    with pytest.raises(UsageError, match="layout_block=3"):
        tl.from_torch(net, args, pass_options={"layout_block": 3})
    with pytest.raises(UsageError, match="unknown pass option 'blocks'"):
        tl.from_torch(net, args, pass_options={"blocks": 8})
    del torch


def test_fuse_reductions_false_keeps_a_reduction_apart_from_its_producer():
    from tensorlang.graph import compile_graph
    from tensorlang.graph.ir import Graph, TensorType

    def build():
        g = Graph("m")
        x = g.add_input("x", TensorType((4, 64), "f32"))
        sq = g.add_node("mul.Tensor", [x, x], {}, [TensorType((4, 64), "f32")]).outputs[0]
        g.outputs = [g.add_node("sum.dim_IntList", [sq], {"dim": [1], "keepdim": False},
                                [TensorType((4,), "f32")]).outputs[0]]
        return g
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    fused = compile_graph(build())
    apart = compile_graph(build(), pass_options={"fuse_reductions": False})
    assert len(fused.steps) == 1 and len(apart.steps) == 2
    np.testing.assert_allclose(fused.run_flat([x])[0], (x * x).sum(1), rtol=1e-5)
    np.testing.assert_allclose(apart.run_flat([x])[0], (x * x).sum(1), rtol=1e-5)


def test_the_graph_key_is_the_same_from_torch_and_from_a_saved_pt2(small_pt2):
    import tensorlang as tl
    from tensorlang.frontend.torch_import import model_from_pt2
    net, args = small_net()
    a = tl.from_torch(net, args)
    b = model_from_pt2(small_pt2)
    assert a.graph_key == b.graph_key and len(a.graph_key) == 16
    net.c0 = _torch().nn.Conv2d(3, 16, 5, padding=2)  # another network: another key
    assert tl.from_torch(net, args).graph_key != a.graph_key


def test_a_stored_variant_is_what_from_torch_compiles_afterwards(tmp_path, monkeypatch):
    import tensorlang as tl
    from tensorlang.tuner.model.tasks import random_graph_inputs
    from tensorlang.tuner.model.variants import (
        candidate_variants,
        flat_outputs,
        measure_variants,
        store_choice,
        stored_choice,
    )
    from tensorlang.tuner.records.database import Database
    net, args = small_net()
    model = tl.from_torch(net, args)
    variants = candidate_variants(model.source_graph)
    assert [o for o, _ in variants][:2] == [{}, {"layout_block": 0}] and len(variants) >= 3
    inputs = random_graph_inputs(variants[0][1])
    reference = flat_outputs(net(_torch().from_numpy(inputs[0])))
    timed = measure_variants(variants, inputs, reference, rounds=2, min_time=0.0)
    assert all(e["median_s"] > 0 and e["error"] is None and e["max_rel_error"] < 1e-4 for e in timed)
    # make "no layout pass" the winner, whatever this machine measured, to see that compiles follow the database
    for e in timed:
        e["median_s"] = 1.0 if e["options"] == {"layout_block": 0} else 2.0
    db_path = tmp_path / "t.db"
    with Database(db_path) as db:
        assert store_choice(db, "Small", model.graph_key, 1, timed)["options"] == {"layout_block": 0}
        assert stored_choice(db, model.graph_key, 1)["options"] == {"layout_block": 0}
        assert stored_choice(db, model.graph_key, 2) is None  # another thread count: no choice
    monkeypatch.setenv("TENSORLANG_DB", str(db_path))
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "1")
    again = tl.from_torch(net, args)
    assert again.pass_options == {"layout_block": 0} and again.pass_options_source == "tuned"
    assert "convolution_blocked" not in {n.op for n in again.graph.all_nodes()}
    explicit = tl.from_torch(net, args, skip=("fold_batch_norm",))  # the caller chose the passes: no look-up
    assert explicit.pass_options_source == "default" and "convolution_blocked" in {
        n.op for n in explicit.graph.all_nodes()}
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "2")
    assert tl.from_torch(net, args).pass_options_source == "default"


def test_records_still_in_the_write_ahead_log_change_the_kernel_cache_key(tmp_path, monkeypatch):
    from tensorlang.graph import kernels
    from tensorlang.tuner.records.database import Database, Record
    db_path = tmp_path / "t.db"
    monkeypatch.setenv("TENSORLANG_DB", str(db_path))
    db = Database(db_path)  # stays open: what it adds sits in the -wal file until the last connection closes
    db.add(Record("t", "w", {}, {}, {"a": 1}, None, (1e-3,)))
    before = kernels.database_fingerprint()
    db.add(Record("t", "w", {}, {}, {"a": 2}, None, (1e-3,)))
    assert os.path.exists(str(db_path) + "-wal")
    assert kernels.database_fingerprint() != before
    db.close()


def _records(db_path) -> int:
    if not os.path.exists(db_path):
        return 0
    con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def test_run_curves_value_each_runs_deployed_configs_at_times_measured_again_side_by_side(tmp_path):
    import tensorlang as tl
    from tensorlang.tuner.model.tasks import model_tasks
    from tensorlang.tuner.records.database import Database, Record
    from tensorlang.tuner.research.run_curves import best_steps, latency_curve, retime_steps
    from tensorlang.tuner.search.strategies import RandomSearch
    from tensorlang.tuner.tuning import hand_start_configs
    net, args = small_net()
    tasks = model_tasks(tl.from_torch(net, args, pass_options={"layout_block": 0}), threads=1)
    task = max(tasks, key=lambda t: t.flops).task
    configs = hand_start_configs(task)[:1] + RandomSearch(task.space, seed=0).random_unseen(2)
    assert len(configs) == 3
    runs = {"a": [(configs[0], 2.0), (configs[1], 1.0), (configs[2], 1.5)], "b": [(configs[2], 3.0)]}
    steps = {}
    for name, timed in runs.items():
        with Database(tmp_path / f"{name}.db") as db:
            for c, t in timed:
                db.add(Record(task.key, task.workload, {}, {}, c, None, (t,), flops=task.flops))
        steps[name] = best_steps(tmp_path / f"{name}.db")
    assert [len(s) for s, _ in steps.values()] == [2, 1] and [n for _, n in steps.values()] == [3, 1]
    retimed = retime_steps(tasks, [s for s, _ in steps.values()], rounds=2, jobs=1)
    keys = {(task.key, s.config_key) for ss, _ in steps.values() for s in ss}
    assert set(retimed) == keys and all(0 < v < 1.0 for v in retimed.values())
    weights = {t.task.key: t.weight for t in tasks}
    start = {t.task.key: 1.0 for t in tasks}
    own = latency_curve(steps["a"][0], weights, start)
    again = latency_curve(steps["a"][0], weights, start, retimed)
    w = weights[task.key]
    rest = sum(weights.values()) - w
    assert own == [(0, rest + w), (1, rest + 2.0 * w), (2, rest + 1.0 * w)]
    last = (task.key, steps["a"][0][-1].config_key)
    assert again[-1] == (2, pytest.approx(rest + w * retimed[last]))
    with pytest.raises(UsageError, match="tasks the model does not have"):
        latency_curve(steps["a"][0], {}, {})


@pytest.mark.slow
def test_tune_model_tunes_every_task_resumes_and_from_torch_picks_up_the_tuned_schedules(small_pt2, tmp_path,
                                                                                         monkeypatch):
    import tensorlang as tl
    from tensorlang.tuner.model.tune import tune_model
    from tensorlang.tuner.records.database import Database
    db_path = tmp_path / "t.db"
    rounds = []
    s = tune_model(small_pt2, trials=10, db=str(db_path), jobs=1, threads=1, batch=2, retime_top=2, rounds=2,
                   min_time=0.01, progress=None, torch_compile=False, datasets=[], on_round=rounds.append)
    assert s.trials_before == 0 and s.trials_done == 10 and not s.interrupted
    assert "measured in this run" in s.variant_how and len(s.variants) >= 3
    n_tasks = len(s.tasks)
    assert n_tasks >= 4 and sum(t.trials for t in s.tasks) == 10 and all(t.trials >= 1 for t in s.tasks)
    assert all(t.best_s and t.best_s > 0 for t in s.tasks)
    assert len(rounds) == len(s.rounds) and s.curve[0][0] == 0 and s.curve[-1][0] == 10
    assert s.curve[-1][1] <= s.curve[n_tasks][1]  # the estimate never rises once every task is measured
    with Database(db_path) as db:
        assert sum(db.count(t.key) for t in s.tasks) == 10
        strategies = {r.strategy for t in s.tasks for r in db.records(t.key)}
        assert "auto" in strategies  # the zero-trial pick is measured first
    assert set(s.latency) == {"tuned", "zero-trial", "torch eager"}
    assert all(v["median_s"] > 0 for v in s.latency.values())
    assert s.reference == "torch eager" and not s.mismatch
    assert set(s.max_rel_error) == {"tuned", "zero-trial"} and all(v < 1e-4 for v in s.max_rel_error.values())
    assert s.schedule_sources == {"tuned": sum(t.weight for t in s.tasks)}
    report = s.to_json()
    assert report["trials"] == 10 and report["speedup"]["zero-trial"] > 0
    # afterwards tl.from_torch, in a fresh compile, gets the chosen variant and a tuned schedule for every kernel
    monkeypatch.setenv("TENSORLANG_DB", str(db_path))
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "1")
    net, args = small_net()
    model = tl.from_torch(net, args)
    assert model.pass_options == s.variant and model.pass_options_source == "tuned"
    assert {st.kernel.schedule_source for st in model.steps} == {"tuned"}
    np.testing.assert_allclose(model(args[0].numpy()), net(*args).detach().numpy(), rtol=1e-4, atol=1e-4)
    # a second run resumes: the trials already spent count, the variant is the stored one
    s2 = tune_model(small_pt2, trials=13, db=str(db_path), jobs=1, threads=1, batch=2, retime_top=0,
                    measure=False, progress=None, transfer=False)
    assert s2.trials_before == 10 and s2.trials_done == 3
    assert s2.variant == s.variant and s2.variant_how == "chosen in an earlier run"
    assert _records(db_path) == 13


@pytest.mark.slow
def test_kill_9_of_a_tune_model_process_group_loses_nothing_and_a_rerun_resumes(small_pt2, tmp_path):
    from tensorlang.tuner.model.tune import tune_model
    db_path = tmp_path / "t.db"
    env = dict(os.environ, TENSORLANG_DB=str(tmp_path / "other.db"))
    proc = subprocess.Popen([sys.executable, "-m", "tensorlang.cli", "tune-model", str(small_pt2), "--trials", "400",
                             "--batch", "2", "--jobs", "1", "--threads", "1", "--db", str(db_path),
                             "--no-measure", "--no-transfer"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while _records(db_path) < 5:
            assert proc.poll() is None, "tune-model ended before it was killed"
            assert time.monotonic() < deadline, "no records after 300 s"
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the tuner, its builder and runner processes: all at once
        proc.wait(30)
    n = _records(db_path)
    assert n >= 5
    con = sqlite3.connect(str(db_path))
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()
    s = tune_model(small_pt2, trials=n + 2, db=str(db_path), jobs=1, threads=1, batch=2, retime_top=0,
                   measure=False, progress=None, transfer=False)
    assert s.trials_before == n and s.trials_done == 2 and s.variant_how == "chosen in an earlier run"
    assert _records(db_path) == n + 2


def _sigint_as_in_a_terminal():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
def test_ctrl_c_stops_tune_model_keeps_its_records_and_says_how_to_resume(small_pt2, tmp_path):
    db_path = tmp_path / "t.db"
    # as a terminal starts it: with SIGINT not ignored (a suite started in the background by a non-interactive
    # shell, `pytest &`, runs with SIGINT and SIGQUIT ignored, and so would the command, rightly deaf to Ctrl-C)
    proc = subprocess.Popen([sys.executable, "-m", "tensorlang.cli", "tune-model", str(small_pt2), "--trials", "400",
                             "--batch", "2", "--jobs", "1", "--threads", "1", "--db", str(db_path), "--no-transfer",
                             "--json"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_as_in_a_terminal)
    try:
        deadline = time.monotonic() + 300
        while _records(db_path) < 3:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:  # say where it is stuck (tensorlang.cli prints its stacks on SIGUSR1)
            with open(f"/proc/{proc.pid}/status") as f:  # SIGINT blocked, ignored or pending?
                sig = "\n".join(line for line in f.read().splitlines() if line.startswith(("Sig", "ShdPnd")))
            proc.send_signal(signal.SIGUSR1)
            time.sleep(3)
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"tune-model did not stop within 240 s of Ctrl-C; its signal state:\n{sig}\nthe start of "
                        f"its stderr:\n{err[:3000]}\nits stacks:\n{err[-6000:]}")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    data = json.loads(out)
    assert data["interrupted"] is True and data["trials"] == _records(db_path) >= 3
    assert "interrupted: " in err and "resume with: tensorlang tune-model" in err and "Traceback" not in err


def test_a_ctrl_c_that_something_swallowed_still_stops_tune_model_at_the_next_round(small_pt2, tmp_path):
    # Python drops a KeyboardInterrupt raised inside a finalizer or a callback from C ("Exception ignored");
    # tensorlang.tuner.interrupt remembers the Ctrl-C and raises it again between rounds
    from tensorlang.tuner.model.tune import tune_model
    # Python's own handler, as a program started from a terminal has (a suite started with `pytest &` from a
    # non-interactive shell inherits SIGINT ignored; the tuner then leaves it so)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    swallowed = []

    def on_round(summary):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:
            swallowed.append(len(summary.rounds))  # what a callback from C does with it

    try:
        s = tune_model(small_pt2, trials=40, db=str(tmp_path / "t.db"), threads=1, batch=2, variants=False,
                       transfer=False, measure=False, retime_top=0, progress=None, on_round=on_round)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    finally:
        signal.signal(signal.SIGINT, previous)
    assert swallowed == [1] and s.interrupted and len(s.rounds) == 1
    assert s.trials_done == s.rounds[0]["trials"] == _records(tmp_path / "t.db") < 40


@pytest.mark.slow
def test_tune_model_measures_on_a_dask_cluster_through_its_runner_factory(small_pt2, tmp_path):
    pytest.importorskip("distributed")
    from dask_cluster import LocalDask

    from tensorlang.tuner.measure.cluster import Cluster, DaskRunner
    from tensorlang.tuner.model.tune import tune_model
    runners = []
    with LocalDask(tmp_path / "dask") as dk:
        dk.start_scheduler()
        dk.start_worker("a", cpu=0)
        dk.wait_for_workers(1)
        with Cluster(dk.address) as cluster:
            def factory(task):
                runners.append(DaskRunner(task, cluster, seed=0))
                return runners[-1]
            s = tune_model(small_pt2, trials=6, db=str(tmp_path / "t.db"), threads=1, batch=2, variants=False,
                           transfer=False, measure=False, retime_top=0, progress=None, runner_factory=factory)
    assert s.trials_done == 6 and not s.errors and all(t.best_s for t in s.tasks[:3])
    assert runners and sum(sum(r.measured_by.values()) for r in runners) == 6
    assert _records(tmp_path / "t.db") == 6


# ---------------------------------------------------------------- outputs checked against torch


def _wrong_variants(monkeypatch):
    """Every pass variant but the default computes a wrong result: its largest constant scaled by 1.5."""
    from tensorlang.tuner.model import variants as model_variants
    candidates = model_variants.candidate_variants

    def faulty(snapshot):
        out = candidates(snapshot)
        for _, graph in out[1:]:
            c = max(graph.constants, key=lambda v: v.data.size)
            c.data = c.data * np.float32(1.5)
        return out
    monkeypatch.setattr(model_variants, "candidate_variants", faulty)


def test_a_pass_variant_whose_outputs_differ_from_torch_is_an_error_and_never_chosen(small_pt2, tmp_path,
                                                                                     monkeypatch):
    import torch._inductor.config as inductor_config
    from model_faults import probe_torch_compile

    from tensorlang.cli.model_tune import format_model_summary
    from tensorlang.graph.pass_options import describe_pass_options
    from tensorlang.tuner.model.baselines import TORCH_COMPILE
    from tensorlang.tuner.model.tune import tune_model
    torch = _torch()
    _wrong_variants(monkeypatch)
    compiles = probe_torch_compile(monkeypatch)
    db_path = tmp_path / "t.db"
    threads_before = torch.get_num_threads()
    s = tune_model(small_pt2, trials=1, db=str(db_path), jobs=1, threads=1, transfer=False, retime_top=0, rounds=1,
                   min_time=0.0, progress=None)
    wrong = [v for v in s.variants if v["options"]]
    assert len(wrong) >= 2 and s.variant == {} and "measured in this run" in s.variant_how
    for v in wrong:
        assert v["median_s"] is None and v["max_rel_error"] > 1e-4
        assert v["error"].startswith("wrong result: output 0: largest |difference|"), v["error"]
    assert s.variants[0]["error"] is None and s.variants[0]["max_rel_error"] < 1e-4
    con = sqlite3.connect(str(db_path))
    rows = con.execute("SELECT options, error, chosen, median_s FROM model_variants").fetchall()
    con.close()
    assert [json.loads(o) for o, _, chosen, _ in rows if chosen] == [{}]
    assert all(e.startswith("wrong result: output 0") and m is None for o, e, _, m in rows if json.loads(o))
    text = format_model_summary(s)
    assert all(f"not chosen: {describe_pass_options(v['options'])}: {v['error']}" in text for v in wrong)
    # the tuned model matches torch eager's outputs; torch.compile ran with freezing on tensorlang's thread count
    assert s.reference == "torch eager" and not s.mismatch and s.max_rel_error["tuned"] < 1e-4
    assert TORCH_COMPILE in s.latency and compiles and set(compiles) == {(True, 1)}
    assert torch.get_num_threads() == threads_before and inductor_config.freezing is False  # put back


@pytest.fixture(scope="module")
def two_output_pt2(tmp_path_factory):
    from model_faults import two_output_net
    torch = _torch()
    path = tmp_path_factory.mktemp("pt2") / "two.pt2"
    net, args = two_output_net()
    torch.export.save(torch.export.export(net, args), str(path))
    return path


def test_tune_model_fails_when_a_later_output_of_the_tuned_model_is_nan(two_output_pt2, tmp_path, monkeypatch,
                                                                         capsys):
    from model_faults import nan_in_output

    from tensorlang.cli.main import main
    from tensorlang.tuner.model.source import ModelSource
    compile_model = ModelSource.compile
    monkeypatch.setattr(ModelSource, "compile", lambda self, options: nan_in_output(compile_model(self, options), 1))
    code = main(["tune-model", str(two_output_pt2), "--trials", "1", "--jobs", "1", "--threads", "1", "--db",
                 str(tmp_path / "t.db"), "--no-variants", "--no-transfer", "--retime-top", "0", "--no-measure"])
    out = capsys.readouterr()
    assert code == 2, out.err[-2000:]
    assert (f"tensorlang tune-model: error: {two_output_pt2}: the tuned model's outputs differ from torch eager's: "
            "output 1: 1 NaN where the reference has a number (first at index (0, 0, 0, 0))") in out.err
    assert "WRONG: the tuned model's outputs differ" in out.out and "Traceback" not in out.err


# ---------------------------------------------------------------- the commands


def tensorlang(*args, env=None, timeout=900):
    return subprocess.run([sys.executable, "-m", "tensorlang.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout, env=env)


def test_tasks_lists_each_task_with_its_share(small_pt2, tmp_path):
    r = tensorlang("tasks", small_pt2, "--threads", "1", "--db", tmp_path / "t.db", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    rows = data["tasks"]
    assert sum(row["weight"] for row in rows) == data["kernels"] and len(rows) >= 4
    assert sum(row["share"] for row in rows) == pytest.approx(1.0)  # every call is a task's
    assert all(row["schedule_source"] == "auto" and row["trials"] == 0 and row["mflop"] > 0 for row in rows)
    r = tensorlang("tasks", small_pt2, "--threads", "1", "--db", tmp_path / "t.db")
    assert r.returncode == 0 and "share" in r.stdout and "tune them: tensorlang tune-model" in r.stdout


@pytest.mark.slow
def test_tune_model_command_prints_a_summary_and_a_plot(small_pt2, tmp_path):
    plot = tmp_path / "curve.png"
    r = tensorlang("tune-model", small_pt2, "--trials", "6", "--batch", "1", "--jobs", "1", "--threads", "1",
                   "--db", tmp_path / "t.db", "--no-variants", "--no-transfer", "--rounds", "1", "--retime-top", "0",
                   "--no-torch-compile", "--plot", plot, "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["trials"] == 6 and data["variant_how"] == "default (variants not measured)"
    assert data["latency"]["tuned"]["median_s"] > 0 and "torch eager" in data["latency"]
    assert "round 1: task 0" in r.stderr and "estimated end-to-end" in r.stderr
    assert plot.stat().st_size > 1000
    r = tensorlang("tune-model", small_pt2, "--trials", "6", "--threads", "1", "--db", tmp_path / "t.db",
                   "--no-measure", "--no-variants")
    assert r.returncode == 0, r.stderr
    assert "6 trials" in r.stdout and "(0 in this run)" in r.stdout
    # tensorlang compile, and tl.load_model of what it wrote, compile every kernel with its tuned schedule
    env = dict(os.environ, TENSORLANG_DB=str(tmp_path / "t.db"), TENSORLANG_NUM_THREADS="1")
    r = tensorlang("compile", small_pt2, "-o", tmp_path / "out", "--json", env=env)
    assert r.returncode == 0, r.stderr
    compiled = json.loads(r.stdout)
    assert compiled["schedules"] == {"tuned": compiled["kernels"]}
    code = ("import tensorlang as tl; m = tl.load_model({!r}); "
            "print(sorted({{s.kernel.schedule_source for s in m.steps}}))").format(compiled["files"]["model"])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0 and r.stdout.strip() == "['tuned']", r.stderr


@pytest.mark.parametrize("argv, message", [
    (["tune-model", "MISSING", "--trials", "4"], "no such file"),
    (["tune-model", "PT2", "--trials", "0"], "--trials: must be at least 1"),
    (["tune-model", "PT2", "--trials", "4", "--plot", "x.txt"], "--plot: the file must end in .png"),
    (["tune-model", "PT2", "--trials", "4", "--strategy", "annealing"], "--strategy: unknown strategy"),
    (["tune-model", "PT2", "--trials", "4", "--batch", "0"], "--batch: must be at least 1"),
    (["tasks", "PT2", "--repeat", "0"], "--repeat: must be at least 1"),
])
def test_bad_flags_are_one_line_errors(small_pt2, tmp_path, argv, message):
    argv = [str(small_pt2) if a == "PT2" else str(tmp_path / "missing.pt2") if a == "MISSING" else a for a in argv]
    r = tensorlang(*argv, "--db", tmp_path / "t.db")
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_tune_model_refuses_bad_arguments(tmp_path):
    from tensorlang.tuner.model.tune import tune_model
    with pytest.raises(UsageError, match="trials must be an integer >= 1"):
        tune_model("x.pt2", trials=0, db=str(tmp_path / "t.db"))
    with pytest.raises(UsageError, match="scheduler 'fastest'"):
        tune_model("x.pt2", trials=4, scheduler="fastest", db=str(tmp_path / "t.db"))
    with pytest.raises(UsageError, match="needs a database file"):
        tune_model("x.pt2", trials=4, db=":memory:")
    with pytest.raises(UsageError, match="no such file"):
        tune_model(str(tmp_path / "x.pt2"), trials=4, db=str(tmp_path / "t.db"))
    with pytest.raises(UsageError, match=r"takes a tl\.Model or the path"):
        tune_model(42, trials=4, db=str(tmp_path / "t.db"))


@pytest.mark.parametrize("argv", [["tasks"], ["tune-model", "--trials", "4"]])
def test_a_file_that_is_no_model_leaves_no_database_behind(tmp_path, capsys, argv):
    _torch()
    from tensorlang.cli.main import main
    from tensorlang.tuner.model.tune import tune_model
    junk = tmp_path / "junk.pt2"
    junk.write_text("junk")
    db = tmp_path / "dbs" / "t.db"
    assert main([argv[0], str(junk), *argv[1:], "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"{junk} is not a model saved by torch.export.save" in err and "Traceback" not in err
    assert not db.parent.exists()
    with pytest.raises(UsageError, match=r"junk\.pt2 is not a model saved by torch\.export\.save"):
        tune_model(str(junk), trials=4, db=str(db))
    assert not db.parent.exists()
