"""The benchmark scripts compare like with like: their docstring examples run, the auto-scheduler benchmark gives
both search spaces their start configuration, and the strategy comparison never reports a ratio it did not
measure. (The scripts time kernels; these tests only check how they are set up.)"""
from __future__ import annotations

import argparse
import doctest
import importlib
import math
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.mark.parametrize("module", ["compare_strategies", "transfer", "autoschedule", "zoo", "ort_profile", "ceilings"])
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0, module


def test_random_never_reaching_the_mark_is_a_bound_not_a_ratio_of_zero():
    import compare_strategies
    text = compare_strategies.trials_ratio(40, math.inf, 200)
    assert "< 0.20" in text and "upper bound" in text and "0.00" not in text


def test_both_spaces_start_from_their_own_start_configuration(monkeypatch, tmp_path):
    """The hand-written space had been tuned from nothing while the generated one started from the zero-trial
    pick: the comparison of the two (the basis of which space `tune` uses) favoured the generated space."""
    import autoschedule

    class Stop(Exception):
        pass
    starts = []

    def record(task, trials, seed, db, start=True, log=print):
        starts.append((task.space_used, start))
        if len(starts) == 2:
            raise Stop
        return None
    monkeypatch.setattr(autoschedule, "tune", record)
    args = argparse.Namespace(threads=1, workloads="matmul", trials=1, seed=0, db=str(tmp_path / "bench.db"))
    with pytest.raises(Stop):
        autoschedule.part_builtins(args, None, {}, lambda *a: None)
    assert starts == [("generated", True), ("hand", True)]


def test_symbolic_sizes_checks_both_kernels_and_compiles_the_symbolic_one_once(monkeypatch, capsys):
    import json

    import symbolic_sizes
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "1")  # restored after the test (the script sets it)
    assert symbolic_sizes.main(["--base", "6", "--scales", "1,3", "--rounds", "1", "--min-runs", "1", "--threads",
                                "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["workload"], r["scale"], r["sizes"]) for r in rows] == [
        ("matmul", 1, {"M": 6, "N": 6, "K": 6}), ("matmul", 3, {"M": 18, "N": 18, "K": 18}),
        ("conv2d", 1, {"H": 6, "W": 6}), ("conv2d", 3, {"H": 18, "W": 18})]
    assert all(r["symbolic_s"] > 0 and r["specialized_s"] > 0 and r["version_scale"] == 1 for r in rows)
    # with a version for 4x the base too: each size runs the nearer one
    assert symbolic_sizes.main(["--workload", "matmul", "--base", "5", "--scales", "1,3", "--versions", "1,4",
                                "--rounds", "1", "--min-runs", "1", "--threads", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["scale"], r["version_scale"]) for r in rows] == [(1, 1), (3, 4)]
