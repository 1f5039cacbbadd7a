"""The model's kernel calls as one machine-code function (tensorlang/graph/driver.py): kernels run in order on
base + offset addresses, the first nonzero status stops the run and names its step; numpy is the oracle."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import tensorlang as tl
from tensorlang.graph.driver import compile_steps, emit_steps
from tensorlang.graph.kernels import compile_program

TWICE = "def twice(X: f32[4]) -> Y:\n    Y[i] = X[i] * 2.0\n"
ADD = "def add(X: f32[4], Z: f32[4]) -> Y:\n    Y[i] = X[i] + Z[i]\n"
LOOKUP = "def lookup(T: f32[4], I: i32[4]) -> Y:\n    Y[i] = T[I[i]]\n"


def test_the_steps_run_in_order_on_base_plus_offset_addresses():
    """A chain through one scratch block at byte offsets: y = 2x at 0, z = 2y at 16, w = y + z into the output."""
    twice, add = compile_program(TWICE), compile_program(ADD)
    steps = compile_steps([(twice, [(1, 0), (0, 0)]), (twice, [(0, 0), (0, 16)]), (add, [(0, 0), (0, 16), (2, 0)])])
    x = np.array([1.0, -2.0, 3.5, 0.25], np.float32)
    scratch, out = np.full(8, np.nan, np.float32), np.zeros(4, np.float32)
    assert steps.run([scratch.ctypes.data, x.ctypes.data, out.ctypes.data]) == (0, -1)
    np.testing.assert_array_equal(scratch, np.concatenate([2 * x, 4 * x]))
    np.testing.assert_array_equal(out, 6 * x)


def test_the_first_failing_step_stops_the_run_and_is_named():
    """An index out of range in the second of three steps: its status (2) and number (1); the third never ran."""
    twice, lookup = compile_program(TWICE), compile_program(LOOKUP)
    steps = compile_steps([(twice, [(0, 0), (1, 0)]), (lookup, [(1, 0), (2, 0), (3, 0)]),
                           (twice, [(3, 0), (4, 0)])])
    x = np.arange(4, dtype=np.float32)
    y, z, w = np.zeros(4, np.float32), np.zeros(4, np.float32), np.full(4, 7.0, np.float32)
    good, bad = np.array([3, 2, 1, 0], np.int32), np.array([0, 1, 4, 0], np.int32)
    assert steps.run([a.ctypes.data for a in (x, y, good, z, w)]) == (0, -1)
    np.testing.assert_array_equal(w, 2 * (2 * x)[good])
    w[:] = 7.0
    status, failed = steps.run([a.ctypes.data for a in (x, y, bad, z, w)])
    assert (status, failed) == (2, 1)
    np.testing.assert_array_equal(w, np.full(4, 7.0, np.float32))  # step 2 did not run
    assert isinstance(lookup.error(status), tl.IndexError)


def test_too_few_base_addresses_are_refused_before_anything_runs():
    twice = compile_program(TWICE)
    steps = compile_steps([(twice, [(0, 0), (2, 0)])])
    with pytest.raises(ValueError, match="2 base addresses given, the steps use 3"):
        steps.run([0, 0])


def test_the_emitted_function_loads_each_base_once_and_calls_each_kernel():
    text = str(emit_steps("run", [("k0", [(0, 0), (1, 8)]), ("k1", [(1, 8), (0, 64)])]))
    assert text.count('call i32 @"k0"(') == 1 and text.count('call i32 @"k1"(') == 1
    assert text.count("load ptr") == 2
    assert text.count("declare i32 @") == 2


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 6 * 6, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1)).softmax(-1)


def test_a_model_run_through_its_compiled_steps_matches_torch_from_many_threads():
    torch.manual_seed(0)
    net = _Net().eval()
    xs = [torch.randn(2, 3, 6, 6) for _ in range(6)]
    model = tl.from_torch(net, (xs[0],))
    assert len(model.steps) >= 2
    expected = [net(x).detach().numpy() for x in xs]
    got: dict[int, np.ndarray] = {}

    def call(i: int) -> None:
        for _ in range(20):
            got[i] = model(xs[i].numpy())

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, want in enumerate(expected):
        np.testing.assert_allclose(got[i], want, rtol=1e-5, atol=1e-6)
