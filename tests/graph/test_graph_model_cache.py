"""The model cache: a torch module compiled again (in this process or a fresh one) skips the decomposition, the
import and the graph passes and gets every kernel from the kernel cache, with the same outputs; other weights,
options or a damaged entry compile again; the cache stays under its size."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tensorlang as tl  # noqa: E402
from tensorlang.errors import UsageError  # noqa: E402
from tensorlang.frontend import torch_import  # noqa: E402
from tensorlang.graph import kernels, model_cache  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self, width=8):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, width, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(width)
        self.fc = torch.nn.Linear(width, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean((2, 3)))


def net(seed=0, width=8):
    torch.manual_seed(seed)
    module = Net(width).eval()
    with torch.no_grad():
        module.bn.running_mean.uniform_(-0.5, 0.5)
        module.bn.running_var.uniform_(0.5, 1.5)
    return module, (torch.randn(1, 3, 12, 12),)


def check(model, module, args):
    with torch.no_grad():
        ref = module(*args).numpy()
    got = model(*[a.numpy() for a in args])
    assert np.isfinite(got).all() and got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(ref).max())))
    return got


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty kernel (and model) cache of this test, and a count of the imports (decomposition included)."""
    monkeypatch.setenv("TENSORLANG_KERNEL_CACHE", str(tmp_path / "kernels"))
    monkeypatch.delenv("TENSORLANG_MODEL_CACHE_MB", raising=False)
    kernels._memory.clear()
    imports = []
    real = torch_import.graph_from_exported

    def counted(*args, **kwargs):
        imports.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(torch_import, "graph_from_exported", counted)
    yield imports
    kernels._memory.clear()


COMPILE = r"""
import json, sys
import numpy as np, torch
sys.path.insert(0, {tests!r})
from graph.test_graph_model_cache import net
import tensorlang as tl
from tensorlang.frontend import torch_import
imports = []
real = torch_import.graph_from_exported
torch_import.graph_from_exported = lambda *a, **k: imports.append(1) or real(*a, **k)
module, args = net()
model = tl.from_torch(module, args)
out = model(*[a.numpy() for a in args])
print(json.dumps({{"cached": getattr(model, "cached", False), "imports": len(imports), "kernels": len(model.steps),
                  "kernels_cached": sum(s.kernel.cached for s in model.steps), "out": out.tolist(),
                  "passes": [r.name for r in model.passes], "graph_key": model.graph_key}}))
"""


def test_a_second_compile_in_a_fresh_process_skips_the_import_and_the_passes(tmp_path):
    env = dict(os.environ, TENSORLANG_KERNEL_CACHE=str(tmp_path / "kernels"))
    env.pop("TENSORLANG_MODEL_CACHE_MB", None)
    script = COMPILE.format(tests=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

    def compile_once():
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads(r.stdout.strip().splitlines()[-1])
    cold, warm = compile_once(), compile_once()
    assert not cold["cached"] and cold["imports"] == 1 and cold["kernels_cached"] == 0
    assert warm["imports"] == 0 and warm["cached"], "the warm compile decomposed and imported the program again"
    assert warm["kernels_cached"] == warm["kernels"] == cold["kernels"] > 0
    assert warm["out"] == cold["out"]  # the same kernels on the same constants: the same bits
    assert warm["passes"] == cold["passes"] and warm["graph_key"] == cold["graph_key"]
    module, args = net()
    with torch.no_grad():
        ref = module(*args).numpy()
    np.testing.assert_allclose(np.array(warm["out"], np.float32), ref, rtol=1e-4, atol=1e-4)


def test_a_compile_again_comes_from_the_cache_and_keeps_what_the_model_shows(cache):
    module, args = net()
    first = tl.from_torch(module, args)
    again = tl.from_torch(module, args)
    assert not first.cached and again.cached and len(cache) == 1
    assert str(again.graph) == str(first.graph) and again.summary_table() == first.summary_table()
    assert [(r.name, r.changes) for r in again.passes] == [(r.name, r.changes) for r in first.passes]
    assert (again.graph_key, again.pass_options, again.pass_options_source, again.model_bytes) == \
        (first.graph_key, first.pass_options, first.pass_options_source, first.model_bytes)
    np.testing.assert_array_equal(check(again, module, args), first(*[a.numpy() for a in args]))
    # model tuning's imported graph: imported when asked for, the same as the first compile's
    assert len(cache) == 1
    assert json.dumps(again.source_graph[0], sort_keys=True) == json.dumps(first.source_graph[0], sort_keys=True)
    assert len(cache) == 2
    assert all(np.array_equal(again.source_graph[1][k], v) for k, v in first.source_graph[1].items())


def test_other_weights_other_options_or_a_damaged_entry_compile_again(cache, tmp_path):
    module, args = net(seed=0)
    tl.from_torch(module, args)
    other, _ = net(seed=1)  # the same graph, other weights
    model = tl.from_torch(other, args)
    assert not model.cached
    check(model, other, args)
    with torch.no_grad():
        module.fc.bias[0] += 1.0  # a weight changed in place after the compile
    model = tl.from_torch(module, args)
    assert not model.cached
    check(model, module, args)
    model = tl.from_torch(module, args, pass_options={"layout_block": 0})
    assert not model.cached and model.pass_options == {"layout_block": 0}
    assert tl.from_torch(module, args, pass_options={"layout_block": 0}).cached
    imports = len(cache)
    for path in (tmp_path / "kernels").glob("*.model.bin"):
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    model = tl.from_torch(module, args)
    assert not model.cached and len(cache) == imports + 1
    check(model, module, args)
    assert tl.from_torch(module, args).cached  # stored again


def test_printing_the_passes_runs_them(cache, capsys):
    module, args = net()
    tl.from_torch(module, args)
    model = tl.from_torch(module, args, print_passes=True)
    assert not model.cached and "[fusion]" in capsys.readouterr().err


def test_the_cache_stays_under_its_size_and_can_be_off(cache, tmp_path, monkeypatch):
    folder = tmp_path / "kernels"
    monkeypatch.setenv("TENSORLANG_MODEL_CACHE_MB", "1")
    big = [net(seed=s, width=48) for s in range(2)]
    for module, args in big:
        module.fc = torch.nn.Linear(48, 3000)  # 576 KB of weights: one model fits in 1 MB, two do not
        tl.from_torch(module.eval(), args)
    entries = list(folder.glob("*.model.bin"))
    assert len(entries) == 1 and entries[0].stat().st_size <= 1 << 20
    assert tl.from_torch(*big[1]).cached and not tl.from_torch(*big[0]).cached  # the older one went
    monkeypatch.setenv("TENSORLANG_MODEL_CACHE_MB", "0")
    module, args = net(seed=2)
    tl.from_torch(module, args)
    assert not tl.from_torch(module, args).cached
    assert kernels.clear_kernel_cache() > 0 and not list(folder.glob("*.model.*"))
    monkeypatch.setenv("TENSORLANG_MODEL_CACHE_MB", "lots")
    with pytest.raises(UsageError, match="TENSORLANG_MODEL_CACHE_MB='lots'"):
        model_cache.cache_limit()
