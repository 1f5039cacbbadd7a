"""Saved models (`model.save`, `tl.load_model`): the round trip, a process where torch cannot be imported, and
damaged or foreign files, each named in its error."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from graphgen import inputs_for, random_graph

import tensorlang as tl
from tensorlang.graph import compile_graph
from tensorlang.graph.serialize import ModelFileError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_round_trip_of_a_fused_and_planned_random_graph(tmp_path):
    for seed in range(4):
        model = compile_graph(random_graph(seed))
        ins = inputs_for(model.graph, seed)
        want = model.run_flat(ins)
        path = model.save(tmp_path / f"m{seed}.tlm")
        again = tl.load_model(path)
        assert str(again.graph) == str(model.graph)
        assert again.plan.arena_bytes == model.plan.arena_bytes
        for a, b in zip(again.run_flat(ins), want):
            np.testing.assert_array_equal(a, b)


def test_a_saved_pytorch_model_runs_where_torch_cannot_be_imported(tmp_path):
    torch = pytest.importorskip("torch")
    import reference_models as R
    module, args = R.make_recurrent(batch=2, steps=4)
    model = tl.from_torch(module, args)
    path = model.save(tmp_path / "rec.tlm")
    xs = [a.numpy() for a in args[0]]
    np.savez(tmp_path / "inputs.npz", *xs)
    script = f"""
import sys
sys.modules["torch"] = None          # `import torch` now raises ImportError
import numpy as np, tensorlang as tl
try:
    import torch
    raise SystemExit("torch was importable")
except ImportError:
    pass
xs = list(np.load({str(tmp_path / 'inputs.npz')!r}).values())
last, every = tl.load_model({path!r})(xs)
np.save({str(tmp_path / 'last.npy')!r}, last)
np.save({str(tmp_path / 'every.npy')!r}, every)
assert "torch" not in [m for m in sys.modules if sys.modules[m] is not None]
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    with torch.no_grad():
        last, every = module(*args)
    np.testing.assert_allclose(np.load(tmp_path / "last.npy"), last.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.load(tmp_path / "every.npy"), every.numpy(), rtol=1e-5, atol=1e-6)


def test_importing_tensorlang_does_not_import_torch():
    r = subprocess.run([sys.executable, "-c", "import sys, tensorlang as tl; tl.Model; tl.load_model; "
                        "import tensorlang.graph.passes; print('torch' in sys.modules)"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


def _damage(path, tmp_path, name, edit):
    out = tmp_path / name
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(out, "w") as zout:
        for item in zin.infolist():
            data = edit(item.filename, zin.read(item.filename))
            if data is not None:
                zout.writestr(item.filename, data)
    return out


def test_damaged_and_foreign_files_are_named_in_the_error(tmp_path):
    model = next(m for m in (compile_graph(random_graph(s)) for s in range(20)) if m.graph.constants)
    path = model.save(tmp_path / "good.tlm")
    (tmp_path / "text.tlm").write_text("hello")
    with pytest.raises(ModelFileError, match=r"text.tlm is not a tensorlang model file \(not a zip archive"):
        tl.load_model(tmp_path / "text.tlm")
    with pytest.raises(ModelFileError, match=r"missing.tlm: no such file"):
        tl.load_model(tmp_path / "missing.tlm")
    other = tmp_path / "other.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("readme.txt", "hi")
    with pytest.raises(ModelFileError, match=r"other.zip is a zip archive but not a tensorlang model"):
        tl.load_model(other)

    def version(name, data):
        if name == "graph.json":
            d = json.loads(data)
            d["version"] = 99
            return json.dumps(d)
        return data
    with pytest.raises(ModelFileError, match="format version 99"):
        tl.load_model(_damage(path, tmp_path, "v99.tlm", version))
    with pytest.raises(ModelFileError, match=r"lost.tlm is a damaged tensorlang model file \(KeyError"):
        tl.load_model(_damage(path, tmp_path, "lost.tlm", lambda n, d: None if n == "constants/0.npy" else d))

    def retype(name, data):
        if name == "graph.json":
            d = json.loads(data)
            d["graph"]["nodes"][0]["outputs"][0]["shape"][0] += 1
            return json.dumps(d)
        return data
    with pytest.raises(ModelFileError, match=r"retyped.tlm: the graph is damaged: .*has outputs"):
        tl.load_model(_damage(path, tmp_path, "retyped.tlm", retype))
    with pytest.raises(ModelFileError, match=r"cut.tlm is a damaged tensorlang model file"):
        tl.load_model(_damage(path, tmp_path, "cut.tlm", lambda n, d: d[:-10] if n == "graph.json" else d))


def _flip_a_byte(path, tmp_path, name, member):
    """A copy of the model file with one bit of `member`'s stored bytes flipped: its CRC-32 no longer matches."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(member)
    with open(path, "rb") as f:
        data = bytearray(f.read())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)  # after the local header
    data[start + info.compress_size // 2] ^= 0x01
    out = tmp_path / name
    out.write_bytes(bytes(data))
    return out


def test_a_folder_a_corrupted_file_and_a_cut_file_are_named_as_such(tmp_path):
    model = next(m for m in (compile_graph(random_graph(s)) for s in range(20)) if m.graph.constants)
    path = model.save(tmp_path / "net.tlm")
    with pytest.raises(ModelFileError, match=rf"^{tmp_path} is a folder: tl.load_model takes a model file, the "
                                             r"\.tlm that model\.save wrote \(it holds net\.tlm\)$"):
        tl.load_model(tmp_path)
    for member in ("graph.json", "constants/0.npy"):
        bad = _flip_a_byte(path, tmp_path, "flipped.tlm", member)
        with pytest.raises(ModelFileError, match=rf"flipped.tlm is corrupted: checksum mismatch \(Bad CRC-32 for "
                                                 rf"file '{member}'\); the file changed after model.save wrote it"):
            tl.load_model(bad)
    cut = tmp_path / "half.tlm"
    with open(path, "rb") as f:
        whole = f.read()
    cut.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(ModelFileError, match=r"half.tlm is a damaged tensorlang model file \(it starts as a zip "
                                             r"archive but the rest is unreadable: cut short\?\)"):
        tl.load_model(cut)
