"""The graph compiler: models in, optimised graphs, kernels per node, a planned-memory runtime, save and export.

::

    torch.nn.Module --torch.export + core ATen--> Graph --passes--> fused nodes, each a tensorlang program
        --tl.build (tuned > hand > auto)--> kernels --> tl.Model (numpy in and out, one arena, no torch)

This package never imports torch (`tensorlang.frontend.torch_import` does the import). `compile_graph(graph)` runs
the pass pipeline and builds a `Model`.

>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((4,), "f32"))
>>> g.outputs = [g.add_node("relu", [x], {}, [TensorType((4,), "f32")]).outputs[0]]
>>> compile_graph(g).steps[0].node.op
'relu'
"""
from __future__ import annotations

import time

from .ir import Graph, Node, TensorType, Value
from .model import Model


def compile_graph(graph: Graph, *, passes=None, skip=(), pass_options: dict | None = None,
                  print_passes: bool | None = None, inplace: bool = True, out=None) -> Model:
    """Optimise `graph` in place with the pass pipeline (`passes`, default all of `passes.PIPELINE` but those
    named in `skip`, with `pass_options`: see `tensorlang.graph.pass_options`) and compile it into a Model.
    When the caller gives none of `passes`, `skip` and `pass_options`, the pass options come from the registered
    pass option sources (those model tuning measured and stored for this graph), else the defaults;
    `model.pass_options` and `model.pass_options_source` ("tuned", "given" or "default") say which.
    `print_passes` (or TENSORLANG_PRINT_PASSES=1) prints what each pass changed to `out` (default stderr).

    Example::

        model = compile_graph(graph, skip=("layout",), print_passes=True)
        model = compile_graph(graph, pass_options={"layout_block": 8})
    """
    from .pass_options import graph_key
    from .passes import run_pipeline, select
    from .verify import verify
    t0 = time.perf_counter()
    verify(graph)
    imported = intermediate_bytes(graph)
    key = graph_key(graph)
    # the graph as imported, so that model tuning can compile it again under other pass options (constants shared)
    source = snapshot(graph)
    options, origin = resolve_pass_options(key, skip, pass_options, passes)
    reports = run_pipeline(graph, passes if passes is not None else select(skip, options), print_passes, out)
    model = Model(graph, reports, time.perf_counter() - t0, inplace=inplace, model_bytes=imported)
    model.graph_key, model.pass_options, model.pass_options_source = key, options, origin
    model.source_graph = source
    return model


def resolve_pass_options(key: str, skip=(), pass_options: dict | None = None, passes=None) -> tuple[dict, str]:
    """The pass options `compile_graph` uses for the imported graph with key `key` and where they came from:
    those the registered sources know for it ("tuned") when the caller chose none of `passes`, `skip` and
    `pass_options`, else the given ones ("given") or the defaults ("default").

    >>> resolve_pass_options("0000000000000000", pass_options={"layout_block": 0})
    ({'layout_block': 0}, 'given')
    """
    from .pass_options import check_pass_options, choose_pass_options
    if passes is None and not skip and pass_options is None:
        return choose_pass_options(key)
    return check_pass_options(pass_options or {}), "given" if pass_options else "default"


def snapshot(graph: Graph) -> tuple[dict, dict]:
    """(graph JSON, {constant name: array}) of `graph` as it is now (the arrays shared, not copied).

    >>> g = Graph("m"); _ = g.add_input("x", TensorType((2,), "f32")); g.outputs = list(g.inputs)
    >>> snapshot(g)[0]["name"], snapshot(g)[1]
    ('m', {})
    """
    from .serialize import graph_to_json
    return graph_to_json(graph), {c.name: c.data for c in graph.constants}


def intermediate_bytes(graph: Graph) -> int:
    """Bytes of the intermediate tensors a runtime without planning allocates: every output of every node that
    computes (views cost nothing), that something reads, one buffer each.

    >>> g = Graph("m")
    >>> x = g.add_input("x", TensorType((4,), "f32"))
    >>> g.outputs = [g.add_node("relu", [x], {}, [TensorType((4,), "f32")]).outputs[0]]
    >>> intermediate_bytes(g)
    16
    """
    from .passes.memory_plan import is_alias
    used = {v.uid for n in graph.all_nodes() for v in n.inputs if v is not None} | {v.uid for v in graph.outputs}
    return sum(v.type.nbytes for n in graph.all_nodes() if n.op != "fused" and not is_alias(n)
               for v in n.outputs if v.uid in used)


__all__ = ["Graph", "Model", "Node", "TensorType", "Value", "compile_graph"]
