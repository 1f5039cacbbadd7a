"""The torch side of model tuning: torch eager's outputs (what every compiled variant is checked against) and the
torch contenders of the end-to-end timing (eager and ``torch.compile``), run like for like (same threads, weights
frozen).

Example::

    with torch_like_for_like(2):
        contenders = torch_contenders(module, inputs, model.graph.input_spec)
"""
from __future__ import annotations

import contextlib

import numpy as np

from .source import ModelSource
from .variants import flat_outputs

#: the name of torch.compile's row: inductor with weight freezing, which folds the weights (and batch norms into
#: convolutions) at compile time as tensorlang's passes do, so that both compile the same thing
TORCH_COMPILE = "torch.compile (inductor, freezing)"


@contextlib.contextmanager
def torch_like_for_like(threads: int):
    """Within: torch runs on `threads` threads (``torch.set_num_threads``) and inductor freezes the weights
    (``torch._inductor.config.freezing``); both are put back after. Compile and time torch within it.

    Example::

        with torch_like_for_like(2):
            for name, fn in torch_contenders(module, inputs, model.graph.input_spec):
                ...
    """
    import torch
    import torch._inductor.config as inductor_config
    saved = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with inductor_config.patch(freezing=True):
            yield
    finally:
        torch.set_num_threads(saved)


def torch_arguments(inputs: list, spec: dict | None) -> tuple[tuple, dict]:
    """The positional and keyword arguments of the torch module whose flat inputs (in graph input order) are
    `inputs` (numpy arrays), as the graph's ``input_spec`` arranges them.

    >>> import numpy as np
    >>> args, kwargs = torch_arguments([np.zeros(2, np.float32)], None)
    >>> [tuple(a.shape) for a in args], kwargs
    ([(2,)], {})
    """
    import torch

    from tensorlang.graph.structure import leaf_count, unflatten
    tensors = [torch.from_numpy(np.ascontiguousarray(a)) for a in inputs]
    if spec and spec.get("call"):
        n = leaf_count(spec["items"][0])
        return tuple(unflatten(spec["items"][0], tensors[:n])), unflatten(spec["items"][1], tensors[n:])
    if spec and spec.get("kind") in ("tuple", "list"):
        return tuple(unflatten(spec, tensors)), {}
    return tuple(tensors), {}


def torch_contenders(module, inputs: list, spec: dict | None, inductor: bool = True) -> list:
    """(name, callable or error text) for torch eager and (with `inductor`) :data:`TORCH_COMPILE` on the model's
    flat `inputs`; call it, and time the callables, within :func:`torch_like_for_like` (inductor compiles on the
    first call, made here).

    Example::

        with torch_like_for_like(threads):
            contenders = torch_contenders(ep.module(), inputs, model.graph.input_spec)
    """
    import torch
    args, kwargs = torch_arguments(inputs, spec)
    out = []

    def eager():
        with torch.no_grad():
            return module(*args, **kwargs)
    out.append(("torch eager", eager))
    if not inductor:
        return out
    try:
        compiled = torch.compile(module)
        with torch.no_grad():
            compiled(*args, **kwargs)

        def inductor():
            with torch.no_grad():
                return compiled(*args, **kwargs)
        out.append((TORCH_COMPILE, inductor))
    except Exception as e:  # inductor needs a C++ toolchain; say why it did not run
        out.append((TORCH_COMPILE, f"failed here: {type(e).__name__}: {str(e).splitlines()[0][:160]}"))
    return out


def reference_outputs(src: ModelSource, inputs: list, spec: dict | None) -> tuple[list | None, str]:
    """Torch eager's outputs on `inputs` (flat arrays) and "torch eager"; or None and why there are none.

    Example::

        reference, how = reference_outputs(resolve_model("net.pt2"), inputs, graph.input_spec)
    """
    if src.torch_module is None:
        return None, ("not checked: a saved model has no torch module to compare with" if src.snapshot is None else
                      "not checked: no torch module to compare with (give torch_module)")
    import torch
    args, kwargs = torch_arguments(inputs, spec)
    with torch.no_grad():
        return flat_outputs(src.torch_module(*args, **kwargs)), "torch eager"
