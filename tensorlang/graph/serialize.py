"""Saving and loading compiled models: `model.save(path)` and `tl.load_model(path)`.

A saved model is one file (a zip archive, ``.tlm`` by convention) holding ``graph.json`` (the optimised graph:
inputs, constants' shapes and dtypes, nodes with their ops, attrs and fused bodies, outputs, the input and output
structure) and one ``.npy`` file per constant. Nothing is pickled: the JSON is read with `json`, the arrays with
``numpy.lib.format.read_array(allow_pickle=False)``. Loading needs neither torch nor the original model; it
compiles the nodes' programs again (from the kernel cache when it has them). A file that is not a saved model, or
is damaged, is an error that names the file and what is wrong.

>>> import os, tempfile, numpy as np
>>> from tensorlang.graph import compile_graph
>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((3,), "f32"))
>>> g.outputs = [g.add_node("relu", [x], {}, [TensorType((3,), "f32")]).outputs[0]]
>>> path = os.path.join(tempfile.mkdtemp(), "m.tlm")
>>> _ = save_model(compile_graph(g), path)
>>> load_model(path)(np.array([-1, 0, 2], np.float32)).tolist()
[0.0, 0.0, 2.0]
"""
from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np

from ..errors import UsageError
from .ir import DTYPES, Graph, Node, TensorType, Value

FORMAT = "tensorlang-model"
VERSION = 1


class ModelFileError(UsageError):
    """A file that is not a saved tensorlang model, or a damaged one."""


def _type(v: Value) -> dict:
    return {"shape": list(v.shape), "dtype": v.dtype}


def graph_to_json(graph: Graph) -> dict:
    """The graph as JSON-able data; constants are listed by name, shape and dtype (their data goes elsewhere).

    >>> g = Graph("m"); _ = g.add_input("x", TensorType((2,), "f32")); g.outputs = list(g.inputs)
    >>> graph_to_json(g)["inputs"]
    [{'name': 'x', 'shape': [2], 'dtype': 'f32'}]
    """
    names: set[str] = set()

    def name_of(v: Value) -> str:
        return v.name

    def define(v: Value) -> None:
        if v.name in names:
            raise ValueError(f"graph {graph.name}: two values are called {v.name}")
        names.add(v.name)

    for v in graph.inputs + graph.constants:
        define(v)
    nodes = []
    for n in graph.nodes:
        for v in n.outputs:
            define(v)
        entry = {"op": n.op, "name": n.name, "inputs": [None if v is None else name_of(v) for v in n.inputs],
                 "attrs": n.attrs, "outputs": [{"name": v.name, **_type(v)} for v in n.outputs]}
        if n.source:
            entry["source"] = n.source
        if n.input_names:
            entry["input_names"] = list(n.input_names)
        if n.body is not None:
            entry["body"] = graph_to_json(n.body)
        nodes.append(entry)
    return {"name": graph.name, "inputs": [{"name": v.name, **_type(v)} for v in graph.inputs],
            "constants": [{"name": c.name, **_type(c)} for c in graph.constants], "nodes": nodes,
            "outputs": [name_of(v) for v in graph.outputs], "input_spec": graph.input_spec,
            "output_spec": graph.output_spec}


def graph_from_json(data: dict, constants: dict[str, np.ndarray] | None = None) -> Graph:
    """The graph that `graph_to_json` wrote; `constants` maps constant names to their arrays (a body's constants
    are none: fused bodies read everything as inputs).

    >>> g = graph_from_json({"name": "m", "inputs": [{"name": "x", "shape": [2], "dtype": "f32"}],
    ...                      "constants": [], "nodes": [], "outputs": ["x"]})
    >>> g.outputs[0].type
    f32[2]
    """
    g = Graph(data["name"])
    values: dict[str, Value] = {}
    for spec in data["inputs"]:
        values[spec["name"]] = g.add_input(spec["name"], TensorType(tuple(spec["shape"]), spec["dtype"]))
    for spec in data["constants"]:
        arr = (constants or {})[spec["name"]]
        values[spec["name"]] = g.add_constant(spec["name"], arr)
    for spec in data["nodes"]:
        inputs = [None if name is None else values[name] for name in spec["inputs"]]
        node = Node(spec["op"], inputs, dict(spec["attrs"]), [], name=spec["name"], source=spec.get("source", ""),
                    input_names=tuple(spec.get("input_names", ())))
        g._node_names.add(node.name)
        for o in spec["outputs"]:
            v = Value(o["name"], TensorType(tuple(o["shape"]), o["dtype"]), producer=node)
            g._names.add(v.name)
            node.outputs.append(v)
            values[v.name] = v
        if "body" in spec:
            node.body = graph_from_json(spec["body"])
        g.nodes.append(node)
    g.outputs = [values[name] for name in data["outputs"]]
    g.input_spec, g.output_spec = data.get("input_spec"), data.get("output_spec")
    return g


def save_model(model, path) -> str:
    """Write `model` (a tl.Model) to the file `path` (a zip of graph.json and constants/*.npy); returns the path.

    Example::

        model.save("net.tlm")
    """
    path = os.fspath(path)
    data = {"format": FORMAT, "version": VERSION, "graph": graph_to_json(model.graph),
            "model_bytes": model.model_bytes}
    import tensorlang
    data["tensorlang"] = tensorlang.__version__
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED) as z:
            z.writestr("graph.json", json.dumps(data, indent=1))
            for k, c in enumerate(model.graph.constants):
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.ascontiguousarray(c.data), allow_pickle=False)
                z.writestr(f"constants/{k}.npy", buf.getvalue())
        os.replace(tmp, path)
    except OSError as e:
        raise UsageError(f"cannot write the model to {path}: {e.strerror or e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def read_model_file(path) -> tuple[dict, dict[str, np.ndarray]]:
    """(graph.json's data, {constant name: array}) of a saved model, or ModelFileError naming the file.

    Example::

        data, constants = read_model_file("net.tlm")
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        inside = sorted(f for f in os.listdir(path) if f.endswith(".tlm"))
        hint = f" (it holds {', '.join(inside[:3])}{', ...' if len(inside) > 3 else ''})" if inside else ""
        raise ModelFileError(f"{path} is a folder: tl.load_model takes a model file, the .tlm that model.save "
                             f"wrote{hint}")
    if not os.path.isfile(path):
        raise ModelFileError(f"{path}: no such file")
    try:
        with open(path, "rb") as f:
            zip_start = f.read(4) == b"PK\x03\x04"
        with zipfile.ZipFile(path) as z:
            try:
                data = json.loads(z.read("graph.json"))
            except KeyError:
                raise ModelFileError(f"{path} is a zip archive but not a tensorlang model (no graph.json)") from None
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ModelFileError(f"{path} is not a tensorlang model (graph.json has no format "
                                     f"{FORMAT!r})")
            if data.get("version") != VERSION:
                raise ModelFileError(f"{path} is a tensorlang model of format version {data.get('version')}; this "
                                     f"tensorlang reads version {VERSION}: save it again with this version")
            constants = {}
            for k, spec in enumerate(data["graph"]["constants"]):
                with z.open(f"constants/{k}.npy") as member:
                    arr = np.lib.format.read_array(io.BytesIO(member.read()), allow_pickle=False)
                if list(arr.shape) != spec["shape"] or arr.dtype != DTYPES[spec["dtype"]]:
                    raise ModelFileError(f"{path}: constant {spec['name']} holds {arr.dtype}{list(arr.shape)}, "
                                         f"the graph says {spec['dtype']}{spec['shape']}")
                constants[spec["name"]] = arr
    except ModelFileError:
        raise
    except zipfile.BadZipFile as e:
        if "CRC" in str(e):  # a member's bytes no longer match the checksum saved with them
            raise ModelFileError(f"{path} is corrupted: checksum mismatch ({e}); the file changed after "
                                 "model.save wrote it: save the model again") from None
        if zip_start:
            raise ModelFileError(f"{path} is a damaged tensorlang model file (it starts as a zip archive but the "
                                 "rest is unreadable: cut short?); save the model again") from None
        raise ModelFileError(f"{path} is not a tensorlang model file (not a zip archive; save one with "
                             "model.save)") from None
    except (KeyError, ValueError, TypeError, OSError, EOFError, zipfile.LargeZipFile) as e:
        raise ModelFileError(f"{path} is a damaged tensorlang model file ({type(e).__name__}: {e})") from None
    return data, constants


def load_model(path, **options):
    """Load a model saved by `model.save(path)`: a `tl.Model`, ready to call (no torch needed). `options` go to
    `Model` (as ``inplace=False``).

    Example::

        model = tl.load_model("net.tlm")
        y = model(x)
    """
    from .model import Model
    from .verify import GraphError, verify
    data, constants = read_model_file(path)
    try:
        graph = graph_from_json(data["graph"], constants)
        verify(graph)
    except GraphError as e:
        raise ModelFileError(f"{os.fspath(path)}: the graph is damaged: {e}") from None
    except UsageError as e:
        raise ModelFileError(f"{os.fspath(path)}: {e}") from None
    except (KeyError, ValueError, TypeError) as e:
        raise ModelFileError(f"{os.fspath(path)} is a damaged tensorlang model file ({type(e).__name__}: "
                             f"{e})") from None
    return Model(graph, model_bytes=data.get("model_bytes"), **options)
