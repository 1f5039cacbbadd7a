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


def compile_graph(graph: Graph, *, passes=None, skip=(), print_passes: bool | None = None, inplace: bool = True,
                  out=None) -> Model:
    """Optimise `graph` in place with the pass pipeline (`passes`, default all of `passes.PIPELINE` but those
    named in `skip`) and compile it into a Model. `print_passes` (or TENSORLANG_PRINT_PASSES=1) prints what each
    pass changed to `out` (default stderr).

    Example::

        model = compile_graph(graph, skip=("layout",), print_passes=True)
    """
    from .passes import run_pipeline, select
    from .verify import verify
    t0 = time.perf_counter()
    verify(graph)
    imported = intermediate_bytes(graph)
    reports = run_pipeline(graph, passes if passes is not None else select(skip), print_passes, out)
    return Model(graph, reports, time.perf_counter() - t0, inplace=inplace, model_bytes=imported)


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
