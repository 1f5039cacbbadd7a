"""Where a model to tune comes from (a ``tl.Model``, a ``.pt2`` file or a saved model: :func:`resolve_model`), and
the environment its compiles run in (:func:`environment`: the tuning database and the thread count).

Example::

    src = resolve_model("net.pt2")
    with environment("runs.db", 2):
        model = src.compile(None)
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass

from tensorlang.errors import UsageError


@contextlib.contextmanager
def environment(db_path, threads: int):
    """Within: ``TENSORLANG_DB`` is `db_path` (where ``tl.build`` looks for tuned schedules and ``compile_graph``
    for pass options) and ``TENSORLANG_NUM_THREADS`` is `threads` (the kernels' thread count).

    Example::

        with environment("runs.db", 2):
            model = tl.load_model("net.tlm")      # the tuned schedules of runs.db, for 2 threads
    """
    saved = {k: os.environ.get(k) for k in ("TENSORLANG_DB", "TENSORLANG_NUM_THREADS")}
    os.environ["TENSORLANG_DB"] = os.fspath(db_path)
    os.environ["TENSORLANG_NUM_THREADS"] = str(threads)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass
class ModelSource:
    """Where the model came from: a compiled ``model`` (or None while only its imported graph is known), the imported
    graph (``snapshot``: JSON and constants; None for a saved model, whose passes are baked in), its key, its name,
    the torch module for the baselines (None without torch) and the pass options the caller fixed (None: choose).

    Example::

        src = resolve_model("net.pt2")
    """

    model: object
    snapshot: tuple | None
    key: str | None
    name: str
    torch_module: object = None
    given_options: dict | None = None

    def graph(self):
        """The imported graph (a saved model's optimised one): its inputs are the model's flat inputs."""
        if self.snapshot is None:
            return self.model.graph
        from tensorlang.graph.serialize import graph_from_json
        return graph_from_json(*self.snapshot)

    def compile(self, options: dict | None):
        """A fresh model of the imported graph under pass `options` (None: those the database chose)."""
        from tensorlang.graph import compile_graph
        from tensorlang.graph.serialize import graph_from_json, graph_to_json
        if self.snapshot is None:  # a saved model: its optimised graph again, kernels chosen now
            from tensorlang.graph.model import Model
            graph = self.model.graph
            return Model(graph_from_json(graph_to_json(graph), {c.name: c.data for c in graph.constants}),
                         model_bytes=self.model.model_bytes)
        data, constants = self.snapshot
        return compile_graph(graph_from_json(data, constants), pass_options=options)


def _is_saved_model(path: str) -> bool:
    import zipfile
    try:
        with zipfile.ZipFile(path) as z:
            return "graph.json" in z.namelist()
    except (zipfile.BadZipFile, OSError):
        return False


def resolve_model(model, name: str | None = None) -> ModelSource:
    """The :class:`ModelSource` of what ``tune_model`` was given: a ``tl.Model``, a ``.pt2`` file (torch.export.save)
    or a saved model (``model.save``); UsageError naming the file otherwise. ``tune_model`` takes its result too.

    Example::

        >>> resolve_model("/no/such/model.pt2")
        Traceback (most recent call last):
        ...
        tensorlang.errors.UsageError: /no/such/model.pt2: no such file
    """
    from tensorlang.graph.model import Model
    if isinstance(model, Model):
        given = model.pass_options if model.pass_options_source == "given" else None
        return ModelSource(model, model.source_graph, model.graph_key, name or model.graph.name, None, given)
    if not isinstance(model, (str, os.PathLike)):
        raise UsageError(f"tune_model takes a tl.Model or the path of a .pt2 file or saved model, not "
                         f"{type(model).__name__}")
    path = os.fspath(model)
    if not os.path.exists(path):
        raise UsageError(f"{path}: no such file")
    label = name or os.path.splitext(os.path.basename(path))[0] or "model"
    if _is_saved_model(path):
        import tensorlang as tl
        m = tl.load_model(path)
        return ModelSource(m, None, None, label)
    try:
        from tensorlang.frontend.torch_import import graph_from_exported, load_pt2
    except ImportError:
        raise UsageError(f"{path}: reading .pt2 files needs PyTorch (pip install 'tensorlang[torch]')") from None
    from tensorlang.graph.pass_options import graph_key
    from tensorlang.graph.serialize import graph_to_json
    from tensorlang.graph.verify import verify
    ep = load_pt2(path)
    graph = graph_from_exported(ep, name=label)
    verify(graph)
    snapshot = (graph_to_json(graph), {c.name: c.data for c in graph.constants})
    return ModelSource(None, snapshot, graph_key(graph), label, ep.module())


def zero_trial_db() -> str:
    """A database path where nothing is: within ``environment`` of it, kernels get zero-trial schedules and the
    default pass options.

    >>> os.path.exists(zero_trial_db())
    False
    """
    return os.path.join(tempfile.mkdtemp(prefix="tensorlang-zero-trial-"), "none.db")
