"""Compiling an exported program through the model cache (`tensorlang.graph.model_cache`): a program compiled
before, with the same weights, options, compiler and CPU, skips the decomposition, the import and the graph passes,
and its kernels come from the kernel cache. What is left of a compile in a fresh process is torch.export itself,
hashing the weights and mapping the cached constants.

The key (`exported_key`) hashes every node of the exported graph (its op, arguments, value types and the Python
line it came from), the graph's signature and input/output structure, every parameter, buffer and constant tensor
(name, dtype, shape and bytes), the compile options, the model's name, the torch, tensorlang and numpy versions,
the hash of the compiler's code and the target CPU. A program it cannot key (a constant that is not a plain CPU
tensor) compiles as without the cache.

Example::

    ep = torch.export.export(net.eval(), (x,))
    model = compile_exported(ep, "net", {}, lambda: graph_from_exported(ep, name="net"))
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import torch

from ..graph import compile_graph
from ..graph.model_cache import enabled, load_cached_model, store_model

#: compile_graph options a cached model can stand for (not `passes`, functions; printing the passes runs them)
_KEYED = ("skip", "pass_options", "inplace")
_UNKEYED = ("print_passes", "out")  # nothing to key where the passes are not printed


def _type_text(val) -> str:
    if isinstance(val, torch.Tensor):
        return f"{val.dtype}{tuple(val.shape)}{tuple(val.stride())}"
    if isinstance(val, (list, tuple)):
        return "(" + ",".join(_type_text(v) for v in val) + ")"
    return repr(val)


def _tensor_bytes(t) -> np.ndarray | None:
    """The bytes of a CPU tensor as a flat uint8 array (no copy for a contiguous one), or None."""
    if not isinstance(t, torch.Tensor) or t.layout != torch.strided or t.is_quantized or t.device.type != "cpu":
        return None
    t = t.detach().resolve_conj().resolve_neg().contiguous()
    return t.reshape(-1).view(torch.uint8).numpy()


def exported_key(ep, name: str, options: dict) -> str | None:
    """32 hex digits that stand for everything the optimised graph of `ep` compiled with `options` depends on (see
    the module's docstring), or None where the model cache cannot stand for this compile (options it does not key,
    a constant it cannot hash).

    Example::

        exported_key(torch.export.export(net.eval(), (x,)), "net", {})    # '3f0c...'
    """
    import llvmlite

    import tensorlang

    from ..graph.kernels import code_fingerprint
    from ..graph.passes import print_requested
    from ..target import host_target
    if any(k not in _KEYED + _UNKEYED for k in options) or print_requested(options.get("print_passes")):
        return None
    keyed = {k: options[k] for k in _KEYED if k in options}
    h = hashlib.sha256()
    head = [tensorlang.__version__, torch.__version__, np.__version__, llvmlite.__version__, code_fingerprint(),
            host_target().key, name, json.dumps(keyed, sort_keys=True, default=list),
            str(ep.graph_signature), str(ep.call_spec.in_spec), str(ep.call_spec.out_spec)]
    h.update("\0".join(head).encode())
    for node in ep.graph.nodes:
        h.update(f"\0{node.format_node()}\0{_type_text(node.meta.get('val'))}\0"
                 f"{node.meta.get('stack_trace') or ''}".encode())
    for kind, tensors in (("state", ep.state_dict), ("constant", ep.constants)):
        for k in sorted(tensors):
            data = _tensor_bytes(tensors[k])
            if data is None:
                return None
            t = tensors[k]
            h.update(f"\0{kind}:{k}:{t.dtype}:{tuple(t.shape)}\0".encode())
            h.update(data.data)
    return h.hexdigest()[:32]


def compile_exported(ep, name: str, options: dict, import_graph):
    """The `tl.Model` of the exported program `ep`: from the model cache when it holds this compile, else
    `compile_graph(import_graph(), **options)`, stored in the cache for the next time.

    Example::

        model = compile_exported(ep, "net", {}, lambda: graph_from_exported(ep, name="net"))
    """
    key = exported_key(ep, name, options) if enabled() else None
    if key is not None:
        model = load_cached_model(key, options, source=import_graph)
        if model is not None:
            return model
    model = compile_graph(import_graph(), **options)
    if key is not None:
        store_model(key, model)
    return model
