"""A few small models of issue 56's zoo against torch eager, through torch.export and torch.compile (marked `zoo`;
skipped where torchvision or timm is not installed): MobileNetV3-small, timm's ConvNeXt-atto at a small input
(as_strided, layer norms over channels), and a toy of torchvision's own Swin and ViT blocks (roll, the
shifted-window mask, the relative position bias gathered through its index, multi-head attention's mask checks
with any). The whole zoo is benchmarks/zoo.py's."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import zoo_models  # noqa: E402

import tensorlang as tl  # noqa: E402
from tensorlang.tuner.model.variants import compare_outputs  # noqa: E402

pytestmark = pytest.mark.zoo


def _needs(name: str) -> None:
    try:
        zoo_models.import_torchvision()
        if zoo_models.family(name) == "timm":
            import timm  # noqa: F401
    except ImportError as e:
        pytest.skip(f"{name} needs {e.name} (see docs/user-guide/models.md, 'The zoo')")


MODELS = [("mobilenet_v3_small", 96), ("timm_convnext_atto", 64), ("toy_swin_vit", 32)]


@pytest.fixture(scope="module", params=MODELS, ids=[m for m, _ in MODELS])
def model(request):
    name, size = request.param
    _needs(name)
    module, args = zoo_models.build(name, size=size)
    with torch.no_grad():
        ref = module(*args)
    return name, module, args, ref


def test_from_torch_matches_eager(model):
    name, module, args, ref = model
    compiled = tl.from_torch(module, args)
    error, why = compare_outputs(compiled(*[a.numpy() for a in args]), ref)
    assert not why, f"{name}: {why}"
    assert np.isfinite(error)


def test_torch_compile_matches_eager(model):
    name, module, args, ref = model
    if name != "toy_swin_vit":  # the others' ops are the same as through torch.export's: one model keeps CI short
        pytest.skip("torch.compile is checked on the toy transformer")
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            out = torch.compile(module, backend="tensorlang")(*args)
    finally:
        torch._dynamo.reset()
    _error, why = compare_outputs(out, ref)
    assert not why, f"{name} through torch.compile: {why}"


def test_the_toy_uses_the_ops_it_stands_for():
    """The toy exercises what Swin and ViT need (so that its passing means something)."""
    _needs("toy_swin_vit")
    from tensorlang.frontend.torch_import import export_program, graph_from_exported
    module, args = zoo_models.build("toy_swin_vit")
    ops = graph_from_exported(export_program(module, args)).op_counts()
    for op in ("roll", "index.Tensor", "any.dim", "slice_scatter"):
        assert op in ops, f"{op} not in {sorted(ops)}"


def _zoo_script():
    import pathlib
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
    import zoo
    return zoo


def test_zoo_exports_attention_to_onnx(tmp_path):
    """benchmarks/zoo.py exports a model with nn.MultiheadAttention in eval mode to ONNX (torch's fused inference
    path, aten._native_multi_head_attention, has no ONNX export), and from_onnx matches onnxruntime on it."""
    pytest.importorskip("onnxruntime")
    zoo = _zoo_script()

    class Attention(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)

        def forward(self, x):
            return self.mha(x, x, x, need_weights=False)[0]
    torch.manual_seed(0)
    module, args = Attention().eval(), (torch.randn(1, 5, 8),)
    path = str(tmp_path / "attention.onnx")
    session = zoo._onnx_session(module, args, path, threads=1)
    with torch.no_grad():
        want = module(*args)
    for got, what in ((session(), "onnxruntime"), (tl.from_onnx(path)(args[0].numpy()), "from_onnx")):
        _error, why = compare_outputs(got, want)
        assert not why, f"{what}: {why}"


def test_zoo_keeps_going_when_a_model_kills_its_process(tmp_path, monkeypatch):
    """A model whose process dies (here: killed after its torch.export check) is a FAIL row that keeps the checks it
    finished and names how the process ended, for the check it was in; the run goes on."""
    import signal
    import sys
    zoo = _zoo_script()
    child = tmp_path / "python"
    child.write_text("#!/bin/sh\n"  # writes the row of a finished export check to --row, then dies
                     "while [ \"$1\" != --row ]; do shift; done\n"
                     "echo '{\"model\": \"resnet18\", \"family\": \"torchvision\", "
                     "\"export\": {\"status\": \"ok\", \"error\": 0.0, \"why\": \"\"}}' > \"$2\"\n"
                     "echo 'compiling the dynamo graph' >&2\nkill -KILL $$\n")
    child.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(child))
    row = zoo.bench_in_child("resnet18", [], str(tmp_path), zoo.stages("resnet18", True, True, False))
    assert row["export"]["status"] == "ok"
    assert row["dynamo"]["status"] == "FAIL"
    why = row["dynamo"]["why"]
    assert f"signal {int(signal.SIGKILL)}" in why and "compiling the dynamo graph" in why
    assert "onnx" not in row
    assert any("resnet18 (dynamo)" in line for line in zoo.table([row], 1))


def test_zoo_batch_norms_describe_their_inputs():
    """The zoo's batch norms hold the statistics of their inputs (random ones, as a trained model's describe its
    activations), so that outputs stay of the order of 1: with arbitrary running statistics ResNet-50's grew to
    hundreds (Inception v3's to 1e12), leaving all but the largest outputs unchecked by a tolerance relative to
    the largest."""
    _needs("resnet50")
    module, args = zoo_models.build("resnet50", size=64)
    with torch.no_grad():
        y = module(*args)
    assert float(y.abs().max()) < 10
    norms = [m for m in module.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert norms and not module.training and not any(m.training for m in norms)
    assert all(m.running_mean.abs().max() > 0 and (m.running_var - 1).abs().max() > 1e-3 for m in norms)
