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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tensorlang(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "tuner.cli", *map(str, args)], capture_output=True, text=True,
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


@pytest.mark.parametrize("fmt", ["so", "c"])
def test_compile_to_a_library_or_c_source(mnist_pt2, tmp_path, fmt):
    r = tensorlang("compile", mnist_pt2, "-o", tmp_path, "--format", fmt, "--skip-pass", "layout")
    assert r.returncode == 0, r.stderr
    assert "build the example program: cd" in r.stdout
    assert os.path.isfile(tmp_path / ("libmnist.so" if fmt == "so" else "mnist.c"))
    assert os.path.isfile(tmp_path / "mnist.h") and os.path.isfile(tmp_path / "mnist_example.c")


def test_bench_model_times_tensorlang_against_torch(mnist_pt2):
    r = tensorlang("bench-model", mnist_pt2, "--threads", "1", "--rounds", "2", "--min-time", "0", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    names = [row["name"] for row in data["results"]]
    assert names[:2] == ["tensorlang", "torch eager"]
    eager = data["results"][1]
    assert eager["median_s"] > 0 and eager["max_abs_diff"] < 1e-4
    assert "torch.compile (inductor)" in names or "torch.compile (inductor)" in data["not_run"]
    assert "onnxruntime" in names or "onnxruntime" in data["not_run"]


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
