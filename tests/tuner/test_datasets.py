"""The shipped replay datasets (datasets/): each loads, holds at least 2,000 valid configurations of the workload's
current search space at its preset's sizes, and its header describes the task it was measured for; replaying the
best configuration answers with the table's best. Run: ``.venv/bin/pytest tests/tuner/test_datasets.py -q``.
"""
from __future__ import annotations

import pathlib

import pytest

from tensorlang import schedules
from tensorlang.tuner.records.dataset import Dataset
from tensorlang.tuner.research.replay import ReplayRunner, replay_task

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHIPPED = [("matmul_512.csv", "matmul", "512"), ("conv2d_resnet18_3x3.csv", "conv2d", "resnet18_3x3")]


@pytest.mark.parametrize("name,workload,preset", SHIPPED)
def test_shipped_dataset_describes_its_task(name, workload, preset):
    ds = Dataset.load(str(ROOT / "datasets" / name))
    w = schedules.get(workload)
    assert ds.workload == workload and ds.sizes == w.sizes(preset)
    assert ds.valid_count >= 2000 and len(ds) == len(set(map(str, ds.configs)))
    space = w.space(ds.sizes)
    assert ds.knobs == {k.name: list(k.values) for k in space.knobs}   # replay searches today's space
    for c in ds.configs:
        space.validate(c)
    h = ds.header
    assert h["threads"] >= 1 and h["flops"] == pytest.approx(w.flops(ds.sizes))
    assert h["target"]["cpu"] and h["target"]["features"] and h["tensorlang_version"] and h["note"]
    assert h["strategies"] == ["random"]
    for config, gflops, _ in ds.rows():
        if gflops is not None:
            # the time and the throughput agree, and no throughput is beyond reason for a 2-core CPU
            assert 0 < gflops < 2000 and ds.median_s(config) == pytest.approx(h["flops"] / gflops / 1e9)
    task = replay_task(ds)
    # the key hashes the workload's DSL text, the sizes, the target and the threads: same key, same program
    assert task.key == h["task_key"], "the workload's DSL changed since the dataset was measured"
    [r] = ReplayRunner(ds).measure([ds.best_config])
    assert r.ok and h["flops"] / r.median_s / 1e9 == pytest.approx(ds.best_gflops)
