"""Faults and probes for the tests of the model commands (tune-model, bench-model): a net with two outputs, a
compiled model whose later output gets a NaN, and a torch.compile that records, at each call, whether inductor
would freeze the weights and how many threads torch runs on.

Example::

    calls = probe_torch_compile(monkeypatch)     # then run bench-model: calls == [(True, 2), ...]
"""
from __future__ import annotations

import numpy as np


def two_output_net():
    """A 3x3 convolution and ReLU on 8x8 images; outputs its per-channel mean and the feature map itself.

    Example::

        net, args = two_output_net()
        mean, features = net(*args)
    """
    import torch
    nn = torch.nn

    class TwoOutputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            y = torch.relu(self.conv(x))
            return y.mean(dim=(2, 3)), y
    torch.manual_seed(0)
    return TwoOutputs().eval(), (torch.randn(1, 3, 8, 8),)


def nan_in_output(model, k: int):
    """`model` (a tl.Model), its ``run_flat`` made to return a NaN as the first element of output `k`.

    Example::

        model = nan_in_output(tl.from_torch(*two_output_net()), 1)
    """
    run_flat = model.run_flat

    def faulty(arrays):
        outs = [np.array(o, copy=True) for o in run_flat(arrays)]
        outs[k].flat[0] = np.nan
        return outs
    model.run_flat = faulty
    return model


def probe_torch_compile(monkeypatch) -> list:
    """Replace ``torch.compile`` by a stand-in that runs the module eagerly (no C++ toolchain, no minutes of
    inductor) and, at each call of the compiled module, records ``(torch._inductor.config.freezing,
    torch.get_num_threads())``; returns the list it fills.

    Example::

        calls = probe_torch_compile(monkeypatch)
    """
    import torch
    import torch._inductor.config as inductor_config
    calls = []

    def compile(module, *args, **kwargs):
        def compiled(*a, **kw):
            calls.append((inductor_config.freezing, torch.get_num_threads()))
            return module(*a, **kw)
        return compiled
    monkeypatch.setattr(torch, "compile", compile)
    return calls
