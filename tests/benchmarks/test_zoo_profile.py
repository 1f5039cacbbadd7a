"""`benchmarks/zoo.py --profile`: where each millisecond goes on both sides, tensorlang's kernels and onnxruntime's
own profile (benchmarks/ort_profile.py), by op category. These tests check the structure and that each side's
categories sum to its profiled total; they assert no timing."""
from __future__ import annotations

import json
import math
import pathlib
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import ort_profile  # noqa: E402

from tensorlang.graph.profile import CATEGORIES  # noqa: E402


def _run(start: int, node_durations: list) -> list:
    """A model_run event at `start` and one kernel event per (node, op, microseconds)."""
    events = [{"cat": "Session", "name": "model_run", "ts": start, "dur": 1000}]
    events += [{"cat": "Node", "name": f"{n}_kernel_time", "ts": start + 10 + k, "dur": d,
                "args": {"op_name": op, "input_type_shape": [{"float": [1, 8, 8, 8]}, {"float": [8, 1, 3, 3]}]}}
               for k, (n, op, d) in enumerate(node_durations)]
    events += [{"cat": "Node", "name": f"{n}_fence_before", "ts": start + 5, "dur": 0, "args": {"op_name": op}}
               for n, op, _ in node_durations]
    return events


def test_the_trace_drops_warm_up_runs_and_takes_each_node_s_median():
    events = _run(0, [("c", "Conv", 900), ("r", "Relu", 90)])  # a warm-up run: slow, left out
    events += _run(2000, [("c", "Conv", 100), ("r", "Relu", 10)])
    events += _run(4000, [("c", "Conv", 300), ("r", "Relu", 30)])
    events += _run(6000, [("c", "Conv", 200), ("r", "Relu", 50)])
    events.append({"cat": "Node", "name": "x_kernel_time", "ts": 9000, "dur": 5000, "args": {"op_name": "Add"}})
    p = ort_profile.read_trace(events, warmup=1)
    assert p["runs"] == 3
    assert p["by_category"] == pytest.approx({"depthwise conv": 200e-6, "elementwise": 30e-6})
    assert p["by_op"] == pytest.approx({"Conv": 200e-6, "Relu": 30e-6})
    assert p["kernels_s"] == pytest.approx(230e-6) and p["run_s"] == pytest.approx(1000e-6)
    with pytest.raises(ValueError, match=r"has 4 runs .* 4 of them warm-up"):
        ort_profile.read_trace(events, warmup=4)


@pytest.mark.parametrize("op, inputs, outputs, params, category", [
    ("FusedConv", [[1, 16, 8, 8], [32, 16, 3, 3]], [[1, 32, 8, 8]], 0, "conv"),
    ("Conv", [[1, 16, 8, 8], [32, 16, 1, 1]], [[1, 32, 8, 8]], 0, "1x1 conv/GEMM"),
    ("Gemm", [[1, 32], [10, 32]], [[1, 10]], 1280, "1x1 conv/GEMM"),
    ("MatMul", [[2, 8, 4], [2, 4, 8]], [[2, 8, 8]], 0, "matmul"),
    ("MatMul", [[1, 4, 16]], [[1, 4, 32]], 0, "1x1 conv/GEMM"),  # its weight packed ahead: not in the trace
    ("MatMul", [[1, 4, 16], [16, 32]], [[1, 4, 32]], 2048, "1x1 conv/GEMM"),
    ("FusedConv", [[1, 16, 8, 8], [16]], [[1, 16, 8, 8]], 0, "conv"),  # no weight shape: no finer category
    ("GlobalAveragePool", [[1, 8, 4, 4]], [[1, 8, 1, 1]], 0, "pooling"),
    ("ReduceMean", [[1, 128, 768]], [[1, 128, 1]], 0, "other"),
    ("LayerNormalization", [[1, 128, 768]], [[1, 128, 768]], 0, "norm"),
    ("ReorderOutput", [[1, 16, 8, 8]], [[1, 16, 8, 8]], 0, "layout/copy"),
    ("HardSigmoid", [[1, 16]], [[1, 16]], 0, "elementwise"),
    ("NonMaxSuppression", [], [], 0, "other"),
])
def test_onnxruntime_ops_fall_into_tensorlang_s_categories(op, inputs, outputs, params, category):
    assert ort_profile.op_category(op, inputs, outputs, params) == category


def _markdown_sums(lines: list, model: str) -> tuple[dict, dict]:
    """{column: sum of the category rows} and {column: the total row} of a model's profile table."""
    start = lines.index(f"### {model}: where the milliseconds go (per call)")
    rows = []
    for line in lines[start + 4:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    total = rows.pop()
    assert total[0] == "**kernels total**" and all(r[0] in CATEGORIES for r in rows)
    sums = {col: sum(float(r[col]) for r in rows if r[col] != "-") for col in (1, 3)}
    return sums, {col: float(total[col]) for col in (1, 3)}


def test_zoo_profile_writes_both_breakdowns(tmp_path, capsys, monkeypatch):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import zoo_models
    try:
        zoo_models.import_torchvision()
    except ImportError as e:
        pytest.skip(f"the toy model needs {e.name} (see docs/user-guide/models.md, 'The zoo')")
    import zoo
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the run's work folder (ONNX file, kernel cache)
    out = tmp_path / "zoo.json"
    status = zoo.main(["--models", "toy_swin_vit", "--no-dynamo", "--profile", "--profile-calls", "3",
                       "--peak-gflops", "100", "--bandwidth-gbps", "20", "--json", str(out)])
    printed = capsys.readouterr().out
    assert status == 0, printed
    report = json.loads(out.read_text())
    assert report["profile"] == {"calls": 3, "peak_gflops": 100.0, "bandwidth_gbps": 20.0}
    row = report["models"][0]
    p = row["profile"]
    tl_side, ort = p["tensorlang"], p["onnxruntime"]
    assert "error" not in tl_side and "error" not in ort, p
    assert tl_side["runs"] == 3 and ort["runs"] == 3 and ort["threads"] == 2
    assert tl_side["call_s"] > 0 and ort["run_s"] > 0 and ort["unprofiled_run_s"] > 0
    for side in (tl_side, ort):
        assert side["by_category"] and set(side["by_category"]) <= set(CATEGORIES)
        assert math.isclose(sum(side["by_category"].values()), side["kernels_s"], rel_tol=1e-9)
    assert math.isclose(sum(ort["by_op"].values()), ort["kernels_s"], rel_tol=1e-9)
    kernels = tl_side["kernels"]
    assert len(kernels) == row["kernels"]
    assert math.isclose(sum(k["seconds"] for k in kernels), tl_side["kernels_s"], rel_tol=1e-9)
    assert all(k["bound"] in ("compute", "memory") and k["share"] > 0 and k["bytes"] > 0 for k in kernels)
    assert {"conv", "1x1 conv/GEMM", "matmul", "softmax/attention", "norm"} <= set(tl_side["by_category"])
    lines = printed.splitlines()
    sums, totals = _markdown_sums(lines, "toy_swin_vit")
    for col in (1, 3):  # ms printed to 3 decimals: each row rounds by at most 0.0005
        assert abs(sums[col] - totals[col]) <= 0.0005 * (len(CATEGORIES) + 1), (col, sums, totals)
    assert totals[1] == pytest.approx(tl_side["kernels_s"] * 1e3, abs=6e-4)
    assert any(line.startswith("- tensorlang's slowest kernels: ") for line in lines)
    assert any(line.startswith("- the whole call (median): tensorlang ") and "without its profiler" in line
               for line in lines)
