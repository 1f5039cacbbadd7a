"""A disk cache of compiled models: the optimised graph of a model (after every pass) and its constants, so that
compiling the same model again skips what comes before the kernels (for a torch module: decomposing the exported
program, importing it, the graph passes), and the kernels come from the kernel cache.

The caller names an entry by a key that stands for everything the optimised graph depends on
(`tensorlang.frontend.torch_cache.exported_key`: the exported program, its weights, the compile options, the
compiler's code, the target CPU). An entry is two files in the kernel cache folder (`kernels.cache_dir()`):
``KEY.model.json`` (the graph as `serialize.graph_to_json` writes it, what the passes did, the pass options and the
imported graph's key) and ``KEY.model.bin`` (the constants, 64-byte aligned, mapped into memory copy-on-write when
loaded, not read into new memory). The ``.bin`` files together stay under ``TENSORLANG_MODEL_CACHE_MB`` megabytes
(default 4096; 0 turns the cache off): storing an entry removes the least recently used ones beyond it, and a model
larger than that is not stored.

>>> from tensorlang.graph import compile_graph
>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((3,), "f32"))
>>> g.outputs = [g.add_node("add.Tensor", [x, g.add_constant("w", np.ones(3, np.float32))], {},
...                          [TensorType((3,), "f32")]).outputs[0]]
>>> store_model("0123abcd", compile_graph(g))
True
>>> m = load_cached_model("0123abcd", {})
>>> m.cached, m(np.arange(3, dtype=np.float32)).tolist()
(True, [1.0, 2.0, 3.0])
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import threading
import time

import numpy as np

from ..errors import UsageError
from .kernels import cache_dir

FORMAT = 1
ALIGN = 64
_lock = threading.Lock()


def cache_limit() -> int:
    """The most bytes the cached models' constants may take (``TENSORLANG_MODEL_CACHE_MB``, default 4096 MB; 0:
    no model cache), or UsageError for a value that is not a whole number.

    >>> cache_limit() >= 0
    True
    """
    text = os.environ.get("TENSORLANG_MODEL_CACHE_MB", "").strip()
    if not text:
        return 4096 << 20
    try:
        mb = int(text)
    except ValueError:
        mb = -1
    if mb < 0:
        raise UsageError(f"TENSORLANG_MODEL_CACHE_MB={text!r}: set it to a whole number of megabytes (0 turns the "
                         "model cache off)")
    return mb << 20


def enabled() -> bool:
    """Whether compiles go through the model cache (the kernel cache is on and ``TENSORLANG_MODEL_CACHE_MB`` is not
    0).

    >>> isinstance(enabled(), bool)
    True
    """
    return _folder() is not None


def _folder() -> pathlib.Path | None:
    folder = cache_dir()
    return folder if folder is not None and cache_limit() > 0 else None


def _paths(folder: pathlib.Path, key: str) -> tuple[pathlib.Path, pathlib.Path]:
    return folder / f"{key}.model.json", folder / f"{key}.model.bin"


def store_model(key: str, model) -> bool:
    """Keep `model` (a freshly compiled `tl.Model`: its optimised graph, constants, pass reports and options) under
    `key`; False where the cache is off, the model is larger than the cache, or the folder cannot be written (a
    later compile then costs time, nothing else).

    Example::

        store_model(key, model)
    """
    from .serialize import graph_to_json
    folder = _folder()
    if folder is None:
        return False
    layout, offset = [], 0
    for c in model.graph.constants:
        offset += -offset % ALIGN
        layout.append(offset)
        offset += c.data.nbytes
    if offset > cache_limit():
        return False
    meta = {"format": FORMAT, "key": key, "bytes": offset, "offsets": layout, "graph": graph_to_json(model.graph),
            "model_bytes": model.model_bytes, "graph_key": model.graph_key, "pass_options": model.pass_options,
            "pass_options_source": model.pass_options_source,
            "passes": [{"name": r.name, "changes": r.changes, "nodes_before": r.nodes_before,
                        "nodes_after": r.nodes_after, "seconds": r.seconds} for r in model.passes]}
    meta_path, bin_path = _paths(folder, key)
    tag = f".tmp{os.getpid()}.{threading.get_ident()}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        h = hashlib.sha256()
        with open(str(bin_path) + tag, "wb") as f:
            written = 0
            for c, at in zip(model.graph.constants, layout):
                pad = bytes(at - written)
                buf = np.ascontiguousarray(c.constant_data).data.cast("B")  # the array's bytes, as memoryview(array)
                for chunk in (pad, buf):
                    f.write(chunk)
                    h.update(chunk)
                written = at + c.data.nbytes
        meta["sha256"] = h.hexdigest()
        pathlib.Path(str(meta_path) + tag).write_text(json.dumps(meta))
        os.replace(str(bin_path) + tag, bin_path)  # the data first: a .json names a complete .bin
        os.replace(str(meta_path) + tag, meta_path)
    except OSError:
        for p in (str(bin_path) + tag, str(meta_path) + tag):
            try:
                os.unlink(p)
            except OSError:
                pass
        return False
    _evict(folder, cache_limit(), keep=key)
    return True


def _evict(folder: pathlib.Path, limit: int, keep: str) -> None:
    """Remove the least recently used entries until the .bin files take at most `limit` bytes (never `keep`)."""
    with _lock:
        entries = []
        for meta_path in folder.glob("*.model.json"):
            bin_path = meta_path.with_name(meta_path.name[:-len(".json")] + ".bin")
            try:
                entries.append((meta_path.stat().st_mtime, bin_path.stat().st_size, meta_path, bin_path))
            except OSError:
                continue
        total = sum(e[1] for e in entries)
        for _, size, meta_path, bin_path in sorted(entries, key=lambda e: e[0]):
            if total <= limit:
                break
            if meta_path.name == f"{keep}.model.json":
                continue
            for p in (meta_path, bin_path):
                try:
                    p.unlink()
                except OSError:
                    pass
            total -= size


def _read(folder: pathlib.Path, key: str) -> tuple[dict, dict[str, np.ndarray]] | None:
    """The entry's JSON and its constants (views of the mapped .bin), or None where there is none or it is
    damaged (its JSON unreadable, its .bin of another size or other bytes than it was written with)."""
    meta_path, bin_path = _paths(folder, key)
    try:
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != FORMAT or meta.get("key") != key:
            return None
        size = bin_path.stat().st_size
        if size != meta["bytes"]:
            return None
        raw = np.memmap(bin_path, dtype=np.uint8, mode="c") if size else np.zeros(0, np.uint8)
        if hashlib.sha256(raw.data).hexdigest() != meta["sha256"]:
            return None
        from .ir import DTYPES
        constants = {}
        for spec, at in zip(meta["graph"]["constants"], meta["offsets"]):
            dtype = DTYPES[spec["dtype"]]
            n = int(np.prod(spec["shape"], dtype=np.int64)) * dtype.itemsize
            constants[spec["name"]] = raw[at:at + n].view(dtype).reshape(spec["shape"])
        os.utime(meta_path)  # most recently used
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return meta, constants


def load_cached_model(key: str, options: dict, source=None):
    """The `tl.Model` stored under `key` (`model.cached` is True), or None where there is none, it is damaged, or
    the pass options a compile with `options` (`compile_graph`'s ``skip``, ``pass_options``, ``inplace``) would
    use now differ from the ones it was compiled with (a tuning run stored new ones). `source` is a function that
    imports the graph again, for `model.source_graph` (model tuning) when it is asked for.

    Example::

        model = load_cached_model(key, {}, source=lambda: graph_from_exported(ep))
    """
    from . import resolve_pass_options
    from .model import Model
    from .passes import PassReport
    from .serialize import graph_from_json
    from .verify import GraphError, verify
    folder = _folder()
    if folder is None:
        return None
    t0 = time.perf_counter()
    found = _read(folder, key)
    if found is None:
        return None
    meta, constants = found
    chosen = resolve_pass_options(meta["graph_key"], options.get("skip", ()), options.get("pass_options"))
    if list(chosen) != [meta["pass_options"], meta["pass_options_source"]]:
        return None
    try:
        graph = graph_from_json(meta["graph"], constants)
        verify(graph)
    except (GraphError, KeyError, ValueError, TypeError):
        return None
    model = Model(graph, [PassReport(**r) for r in meta["passes"]], time.perf_counter() - t0,
                  inplace=options.get("inplace", True), model_bytes=meta["model_bytes"])
    model.graph_key, model.pass_options, model.pass_options_source = meta["graph_key"], *chosen
    model.cached = True
    if source is not None:
        model.source_graph_from(source)
    return model
