"""PyTorch models through the graph compiler: the five reference models against torch eager, the module's input
and output structure, the torch.compile backend, .pt2 files, errors that name the op, node and user line, input
checks, calls from several threads, and what a model shows of itself."""
from __future__ import annotations

import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import reference_models as R  # noqa: E402

import tensorlang as tl  # noqa: E402
from tensorlang.errors import BuildError, UsageError  # noqa: E402
from tensorlang.frontend.torch_import import model_from_pt2  # noqa: E402


def numpy_args(args):
    return [[t.numpy() for t in a] if isinstance(a, list) else a.numpy() for a in args]


def check_against_eager(module, args, model=None, **options):
    """Every output within 1e-3 x max(1, max|reference|) of torch eager (the issue's bar)."""
    model = model or tl.from_torch(module, args, **options)
    with torch.no_grad():
        ref = module(*args)
    got = model(*numpy_args(args))
    refs = ref if isinstance(ref, tuple) else (ref,)
    gots = got if isinstance(got, tuple) else (got,)
    assert len(refs) == len(gots)
    for r, g in zip(refs, gots):
        r = r.numpy()
        assert g.shape == r.shape and g.dtype == r.dtype
        bound = 1e-3 * max(1.0, float(np.max(np.abs(r))))
        err = float(np.max(np.abs(g - r)))
        assert err <= bound, f"max error {err} above {bound}"
    return model


def test_mnist_net_batch_3():
    model = check_against_eager(*R.make_mnist(batch=3))
    assert model.graph.op_counts().get("convolution") == 2
    assert "fused convolution_relu" in str(model.graph)


def test_resnet18_small_images():
    model = check_against_eager(*R.make_resnet18(batch=2, size=40, classes=10))
    ops = model.graph.op_counts()
    assert "_native_batch_norm_legit_no_training" not in ops, "batch norms are folded into the convolutions"
    assert ops.get("convolution_blocked", 0) >= 15, ops


def test_mobilenet_v2_small_images():
    model = check_against_eager(*R.make_mobilenet_v2(size=32, classes=10))
    assert "hardtanh" in model.graph.op_counts()


def test_bert_layer():
    model = check_against_eager(*R.make_bert_layer(seq=24))
    names = [n.attrs.get("name") for n in model.graph.nodes if n.op == "fused"]
    assert "addmm_gelu" in names, names


def test_recurrent_net_over_a_list_of_inputs():
    module, args = R.make_recurrent(batch=3, steps=10)
    model = check_against_eager(module, args)
    assert len(model.graph.inputs) == 10
    _last, every = model(numpy_args(args)[0])
    assert every.shape == (3, 10, 64)
    with pytest.raises(UsageError, match=r"input\[0\]: expected a list of 10 items, got a list of 9"):
        model(numpy_args(args)[0][:9])


@pytest.mark.slow
def test_resnet18_full_size_and_its_arena():
    module, args = R.make_resnet18()
    model = check_against_eager(module, args)
    assert model.plan.arena_bytes <= 0.25 * model.model_bytes, model.plan.describe()


@pytest.mark.slow
def test_bert_layer_full_sequence():
    check_against_eager(*R.make_bert_layer(seq=128))


class Structured(torch.nn.Module):
    def forward(self, x, pair, scale=None):
        a, b = pair
        return {"sum": x + a, "parts": (a * b, torch.relu(x))}


def test_inputs_and_outputs_keep_the_module_structure():
    x, a, b = (torch.randn(2, 3) for _ in range(3))
    model = tl.from_torch(Structured().eval(), (x, (a, b)))
    out = model(x.numpy(), (a.numpy(), b.numpy()))
    assert set(out) == {"sum", "parts"} and isinstance(out["parts"], tuple)
    np.testing.assert_allclose(out["parts"][0], (a * b).numpy(), rtol=1e-6)
    with pytest.raises(UsageError, match=r"input\[1\]: expected a tuple of 2 items, got ndarray"):
        model(x.numpy(), a.numpy())


def test_input_checks_name_the_input():
    module, args = R.make_mnist()
    model = tl.from_torch(module, args)
    x = args[0].numpy()
    with pytest.raises(BuildError, match=r"input \[0\] \(x\) has dtype float64, expected float32"):
        model(x.astype(np.float64))
    with pytest.raises(BuildError, match=r"input \[0\] \(x\) has shape \(2, 1, 28, 28\), expected \(1, 1, 28, 28\)"):
        model(np.zeros((2, 1, 28, 28), np.float32))
    with pytest.raises(BuildError, match=r"not C-contiguous"):
        model(np.zeros((1, 1, 28, 56), np.float32)[:, :, :, ::2])
    with pytest.raises(BuildError, match="must be a numpy array, got list"):
        model([0.0])
    with pytest.raises(UsageError, match="expected a tuple of 1 items, got a tuple of 2"):
        model(x, x)


def test_calls_from_several_threads_give_the_same_results():
    module, args = R.make_mnist(batch=2)
    model = tl.from_torch(module, args)
    inputs = [np.random.default_rng(k).standard_normal((2, 1, 28, 28)).astype(np.float32) for k in range(8)]
    want = [model(x) for x in inputs]
    got = [None] * len(inputs)

    def work(k):
        for _ in range(3):
            got[k] = model(inputs[k])
    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


class Unsupported(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        return torch.sort(y, 1)[0]  # the line the error must name


def test_unsupported_op_names_the_op_the_node_and_the_users_line():
    with pytest.raises(UsageError) as e:
        tl.from_torch(Unsupported().eval(), (torch.randn(2, 3),))
    msg = str(e.value)
    assert "unsupported op: aten.sort (node sort at test_graph_models.py:" in msg
    assert "return torch.sort(y, 1)[0]  # the line the error must name" in msg
    assert "Supported ops: " in msg and "convolution" in msg


def test_an_unsupported_output_of_a_supported_op_is_named():
    class Argmax(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.max_pool2d(x, 2, return_indices=True)[1].float()
    with pytest.raises(UsageError, match=r"max_pool2d_with_indices .*its output .* \(i64\[1, 1, 2, 2\]\) is not "
                                         r"supported"):
        tl.from_torch(Argmax().eval(), (torch.randn(1, 1, 4, 4),))


def test_torch_compile_backend_through_its_entry_point():
    module, args = R.make_mnist(batch=2)
    fast = torch.compile(module, backend="tensorlang")
    with torch.no_grad():
        torch.testing.assert_close(fast(*args), module(*args), rtol=1e-4, atol=1e-4)
        module.fc2.bias.add_(1.0)  # weights changed in place: the backend compiles again
        torch.testing.assert_close(fast(*args), module(*args), rtol=1e-4, atol=1e-4)
    module, args = R.make_resnet18(size=32, classes=10)  # batch norms: torch's decompositions give native_batch_norm
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(module, backend="tensorlang")(*args), module(*args), rtol=1e-4,
                                   atol=1e-4)


def test_pt2_files(tmp_path):
    module, args = R.make_recurrent(batch=2, steps=3)
    path = tmp_path / "rec.pt2"
    torch.export.save(torch.export.export(module, args), str(path))
    check_against_eager(module, args, model=model_from_pt2(path))
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(UsageError, match=r"bad.pt2 is not a model saved by torch.export.save"):
        model_from_pt2(bad)
    with pytest.raises(UsageError, match=r"nothere\.pt2: no such file"):
        model_from_pt2(tmp_path / "nothere.pt2")


def test_source_summary_and_tasks():
    module, args = R.make_mnist()
    model = tl.from_torch(module, args)
    fused = next(n for n in model.graph.nodes if n.op == "fused")
    text = model.source(fused)
    assert text.startswith("def convolution_relu_") and "+=" in text and "max(" in text
    assert model.source(fused.body.nodes[1]) == text  # a node inside a fused node: its kernel's program
    tl.op(text)  # the program parses as it is
    summary = model.summary(*numpy_args(args))
    assert "schedule" in summary and "GFLOPS" in summary and "convolution_relu" in summary
    tasks = model.tasks()
    assert sum(n for _, _, n in tasks) == len(model.steps) and all(sizes == {} for _, sizes, _ in tasks)
    with pytest.raises(UsageError, match="has no node 'nosuch'"):
        model.source("nosuch")
