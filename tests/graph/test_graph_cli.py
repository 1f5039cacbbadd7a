"""The model commands as a user runs them: tensorlang compile, show-model and bench-model, and their flag errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import reference_models as R  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tensorlang(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "tensorlang.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


@pytest.fixture(scope="module")
def mnist_pt2(tmp_path_factory):
    path = tmp_path_factory.mktemp("pt2") / "mnist.pt2"
    module, args = R.make_mnist()
    torch.export.save(torch.export.export(module, args), str(path))
    return path


def test_compile_to_a_saved_model_and_show_it(mnist_pt2, tmp_path):
    r = tensorlang("compile", mnist_pt2, "-o", tmp_path, "--print-passes", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["format"] == "tlm" and data["kernels"] == 6 and os.path.isfile(data["files"]["model"])
    assert "[fusion] 3 changes" in r.stderr and "fused convolution_relu" in r.stderr
    r = tensorlang("show-model", data["files"]["model"], "--profile")
    assert r.returncode == 0, r.stderr
    assert "fused convolution_relu" in r.stdout and "GFLOPS" in r.stdout and "schedule" in r.stdout
    r = tensorlang("show-model", data["files"]["model"], "--source", "convolution_relu")
    assert r.returncode == 0 and r.stdout.startswith("def convolution_relu_")


def test_compile_and_show_an_onnx_model(tmp_path):
    """`tensorlang compile model.onnx` goes through tl.from_onnx; its saved model matches onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    module, args = R.make_mnist()
    path = tmp_path / "mnist.onnx"
    torch.onnx.export(module, args, str(path), dynamo=False, input_names=["x"])
    r = tensorlang("compile", path, "-o", tmp_path / "out", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["format"] == "tlm" and data["kernels"] >= 1
    import tensorlang as tl
    x = args[0].numpy()
    got = tl.load_model(data["files"]["model"])(x)
    want = ort.InferenceSession(str(path)).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
    r = tensorlang("show-model", path)
    assert r.returncode == 0 and "fused" in r.stdout, r.stderr


@pytest.mark.parametrize("fmt", ["so", "c"])
def test_compile_to_a_library_or_c_source(mnist_pt2, tmp_path, fmt):
    r = tensorlang("compile", mnist_pt2, "-o", tmp_path, "--format", fmt, "--skip-pass", "layout")
    assert r.returncode == 0, r.stderr
    assert "build the example program: cd" in r.stdout
    assert os.path.isfile(tmp_path / ("libmnist.so" if fmt == "so" else "mnist.c"))
    assert os.path.isfile(tmp_path / "mnist.h") and os.path.isfile(tmp_path / "mnist_example.c")


def test_bench_model_times_tensorlang_against_torch(mnist_pt2):
    from tensorlang.tuner.model.baselines import TORCH_COMPILE
    r = tensorlang("bench-model", mnist_pt2, "--threads", "1", "--rounds", "2", "--min-time", "0", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    rows = {row["name"]: row for row in data["results"]}
    assert list(rows)[:2] == ["tensorlang", "torch eager"] and data["reference"] == "torch eager"
    assert rows["torch eager"]["median_s"] > 0 and rows["tensorlang"]["max_rel_error"] < 1e-4
    assert data["threads"] == 1 and {row["threads"] for row in rows.values()} == {1}
    assert TORCH_COMPILE in rows or TORCH_COMPILE in data["not_run"]
    assert "onnxruntime" in rows or "onnxruntime" in data["not_run"]


@pytest.fixture(scope="module")
def two_output_pt2(tmp_path_factory):
    from model_faults import two_output_net
    path = tmp_path_factory.mktemp("pt2") / "two.pt2"
    net, args = two_output_net()
    torch.export.save(torch.export.export(net, args), str(path))
    return path


def test_bench_model_runs_every_contender_on_one_thread_count_and_inductor_with_freezing(two_output_pt2, monkeypatch,
                                                                                          capsys):
    import torch._inductor.config as inductor_config
    from model_faults import probe_torch_compile

    from tensorlang.cli.main import main
    from tensorlang.graph.model import Model
    from tensorlang.threadpool import num_threads
    from tensorlang.tuner.model.baselines import TORCH_COMPILE
    compiles = probe_torch_compile(monkeypatch)
    ran = []  # tensorlang's thread count at each run of the model
    run_flat = Model.run_flat
    monkeypatch.setattr(Model, "run_flat", lambda self, arrays: ran.append(num_threads()) or run_flat(self, arrays))
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "3")  # no --threads: tensorlang's default, for every contender
    saved = torch.get_num_threads()
    torch.set_num_threads(1)  # torch's own default is another count
    try:
        code = main(["bench-model", str(two_output_pt2), "--rounds", "1", "--min-time", "0", "--json"])
        assert torch.get_num_threads() == 1 and inductor_config.freezing is False  # both put back
    finally:
        torch.set_num_threads(saved)
    out = capsys.readouterr()
    assert code == 0, out.err
    data = json.loads(out.out)
    assert data["threads"] == 3
    assert {row["name"]: row["threads"] for row in data["results"]} == {"tensorlang": 3, "torch eager": 3,
                                                                        TORCH_COMPILE: 3, "onnxruntime": 3}
    assert set(ran) == {3} and compiles and set(compiles) == {(True, 3)}
    assert all(row["max_rel_error"] < 1e-4 for row in data["results"] if row["name"] != "torch eager")


def test_bench_model_fails_on_a_nan_in_a_later_output(two_output_pt2, monkeypatch, capsys):
    from model_faults import nan_in_output, probe_torch_compile

    from tensorlang.cli import models as model_cli
    from tensorlang.cli.main import main
    probe_torch_compile(monkeypatch)
    load = model_cli.load

    def faulty_load(args, **kwargs):
        model, seconds = load(args, **kwargs)
        return nan_in_output(model, 1), seconds
    monkeypatch.setattr(model_cli, "load", faulty_load)
    code = main(["bench-model", str(two_output_pt2), "--threads", "1", "--rounds", "1", "--min-time", "0"])
    out = capsys.readouterr()
    assert code == 2
    assert (f"tensorlang bench-model: error: {two_output_pt2}: outputs differ from torch eager's: tensorlang: output "
            "1: 1 NaN where the reference has a number (first at index (0, 0, 0, 0))") in out.err
    assert "Traceback" not in out.err


@pytest.mark.parametrize("args,message", [
    (("compile", "{pt2}", "-o", "{tmp}", "--format", "zip"), "--format: unknown format 'zip'; formats: tlm"),
    (("compile", "{pt2}", "-o", "{tmp}", "--skip-pass", "fusoin"), "--skip-pass: unknown pass 'fusoin'; passes: dce"),
    (("compile", "{tmp}/nothere.pt2", "-o", "{tmp}"), "nothere.pt2: no such file"),
    (("compile", "{tmp}/junk.pt2", "-o", "{tmp}"), "junk.pt2 is not a model saved by torch.export.save"),
    (("compile", "{pt2}", "-o", "{tmp}", "--name", "my-net"), "is not a C identifier"),
    (("bench-model", "{pt2}", "--threads", "0"), "--threads: must be from 1 to 1024, got 0"),
    (("bench-model", "{pt2}", "--rounds", "0"), "--rounds: must be >= 1, got 0"),
    (("show-model", "{pt2}", "--source", "nosuch"), "has no node 'nosuch'"),
])
def test_flag_errors_are_one_line(mnist_pt2, tmp_path, args, message):
    (tmp_path / "junk.pt2").write_text("junk")
    r = tensorlang(*(a.format(pt2=mnist_pt2, tmp=tmp_path) for a in args))
    assert r.returncode == 2
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_compiled_library_runs_with_tl_load(mnist_pt2, tmp_path):
    import tensorlang as tl
    assert tensorlang("compile", mnist_pt2, "-o", tmp_path, "--format", "so").returncode == 0
    module, args = R.make_mnist()
    with torch.no_grad():
        want = module(*args).numpy()
    np.testing.assert_allclose(tl.load(tmp_path)(args[0].numpy()), want, rtol=1e-4, atol=1e-4)
