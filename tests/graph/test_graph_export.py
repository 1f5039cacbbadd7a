"""Whole-model export: one shared library or one C source for the whole network, built with its example C
program, run with no Python, and compared with the model; `tl.load` of the library; errors."""
from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from graphgen import random_graph

import tensorlang as tl
from tensorlang.errors import BuildError
from tensorlang.export import example_inputs
from tensorlang.graph import compile_graph
from tensorlang.graph.export import build_command
from tensorlang.graph.ir import Graph, TensorType


def run_example(directory, name, fmt, model):
    r = subprocess.run(f"{build_command(name, fmt)} && ./{name}_example outputs.bin", shell=True, cwd=directory,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    ins = example_inputs({"inputs": [{"shape": list(v.shape), "dtype": v.dtype} for v in model.graph.inputs]})
    want = model.run_flat(ins)
    raw = np.fromfile(os.path.join(directory, "outputs.bin"), np.uint8)
    at = 0
    for w in want:
        n = w.nbytes
        got = raw[at:at + n].view(w.dtype).reshape(w.shape)
        at += n
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)
    assert at == raw.size
    return r.stdout, ins, want


@pytest.mark.parametrize("fmt", ["so", "c"])
def test_a_random_model_exports_runs_in_c_and_matches(tmp_path, fmt):
    for seed in (0, 5):
        model = compile_graph(random_graph(seed))
        d = tmp_path / f"{fmt}{seed}"
        files = model.export(d, format=fmt, name=f"net{seed}")
        assert {"header", "example"} <= set(files)
        assert ("library" if fmt == "so" else "source") in files
        assert ("weights" in files) == (fmt == "c")
        stdout, ins, want = run_example(d, f"net{seed}", fmt, model)
        assert f"net{seed} ran in" in stdout
        if fmt == "so":
            loaded = tl.load(d)
            for a, b in zip(loaded.run_flat(ins), want):
                np.testing.assert_array_equal(a, b)


def test_the_library_can_keep_its_weights_in_a_file(tmp_path):
    model = next(m for m in (compile_graph(random_graph(s)) for s in range(20)) if m.graph.constants)
    files = model.export(tmp_path, format="so", weights="file", name="sidefile")
    assert os.path.getsize(files["weights"]) > 64
    assert os.path.getsize(files["library"]) < os.path.getsize(files["weights"]) + 200_000
    run_example(tmp_path, "sidefile", "so", model)
    loaded = tl.load(files["library"])
    ins = [np.ones(v.shape, np.float32) for v in model.graph.inputs]
    np.testing.assert_array_equal(loaded.run_flat(ins)[0], model.run_flat(ins)[0])


def test_header_declares_the_api(tmp_path):
    g = Graph("tiny")
    x = g.add_input("x", TensorType((2, 3), "f32"))
    g.outputs = [g.add_node("relu", [x], {}, [TensorType((2, 3), "f32")]).outputs[0], x]
    model = compile_graph(g)
    files = model.export(tmp_path, format="so")
    text = open(files["header"]).read()
    assert "tiny_model *tiny_create(const char *weights_path);" in text
    assert "int32_t tiny(tiny_model *m, const float *x0, float *y0, float *y1);" in text
    _, ins, want = run_example(tmp_path, "tiny", "so", model)   # an output that is an input: copied
    np.testing.assert_array_equal(want[1], ins[0])


def test_export_errors(tmp_path):
    model = compile_graph(random_graph(1))
    with pytest.raises(BuildError, match="a whole model exports as 'so'"):
        model.export(tmp_path, format="ll")
    with pytest.raises(BuildError, match="format 'zip' is not one of"):
        model.export(tmp_path, format="zip")
    with pytest.raises(BuildError, match="weights='embed' needs format 'so'"):
        model.export(tmp_path, format="c", weights="embed")
    with pytest.raises(BuildError, match="is not a C identifier"):
        model.export(tmp_path, name="my-net")
    (tmp_path / "file").write_text("x")
    with pytest.raises(BuildError, match="exists and is not a directory"):
        model.export(tmp_path / "file")


def test_mnist_from_torch_to_a_c_program(tmp_path):
    torch = pytest.importorskip("torch")
    import reference_models as R
    module, args = R.make_mnist()
    model = tl.from_torch(module, args)
    model.export(tmp_path, format="c", name="mnist")
    _stdout, ins, want = run_example(tmp_path, "mnist", "c", model)
    with torch.no_grad():
        ref = module(torch.from_numpy(ins[0])).numpy()
    np.testing.assert_allclose(want[0], ref, rtol=1e-4, atol=1e-4)
