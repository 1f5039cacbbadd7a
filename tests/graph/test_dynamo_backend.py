"""The torch.compile backend (`backend="tensorlang"`) against torch eager: every batch size once dynamo makes the
batch symbolic, weights changed in place or through `.data`, graph breaks, and the clear errors of a module in
training mode, of a graph that writes into its buffers and of backward()."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tensorlang.graph  # noqa: E402
from tensorlang.errors import UsageError  # noqa: E402
from tensorlang.frontend.torch_import import dynamo_backend  # noqa: E402

nn = torch.nn


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.25)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        y = nn.functional.max_pool2d(self.bn(self.conv(x)).relu(), 2)
        return self.fc(self.drop(y.reshape(x.shape[0], -1)))  # the batch size as an int: a SymInt once dynamic


def small_cnn():
    torch.manual_seed(0)
    m = SmallCNN()
    with torch.no_grad():  # statistics other than the initial 0 and 1, so that batch norm does something
        m.bn.running_mean.uniform_(-0.5, 0.5)
        m.bn.running_var.uniform_(0.5, 2.0)
    return m.eval()


def images(batch):
    return torch.randn(batch, 3, 8, 8, generator=torch.Generator().manual_seed(batch))


def check(fast, module, x):
    with torch.no_grad():
        torch.testing.assert_close(fast(x), module(x), rtol=1e-4, atol=1e-4)


@pytest.fixture
def compiles(monkeypatch):
    """The number of graphs the backend has compiled so far (a list of one counter)."""
    count = [0]
    real = tensorlang.graph.compile_graph

    def counting(graph, **kw):
        count[0] += 1
        return real(graph, **kw)
    monkeypatch.setattr(tensorlang.graph, "compile_graph", counting)
    return count


def test_every_batch_size_after_dynamo_makes_the_batch_symbolic(compiles):
    module = small_cnn()
    seen = []

    def backend(gm, example_inputs):
        seen.append(example_inputs)
        return dynamo_backend(gm, example_inputs)
    fast = torch.compile(module, backend=backend)
    for batch in (4, 8, 16, 4, 32):
        check(fast, module, images(batch))
    assert any(isinstance(x, torch.SymInt) for inputs in seen for x in inputs), "dynamo gave no symbolic graph"
    done = compiles[0]
    for batch in (32, 4, 8, 16):  # one model per shape, kept
        check(fast, module, images(batch))
    assert compiles[0] == done


def test_the_registered_backend_on_every_batch_size_with_a_size_among_the_outputs():
    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 4)

        def forward(self, x):
            return self.b(self.a(x).relu()), x.shape[0] * 2  # an int output: a SymInt of the dynamic graph

    torch.manual_seed(0)
    module = MLP().eval()
    fast = torch.compile(module, backend="tensorlang")
    for batch in (4, 8, 16, 4, 32):
        x = torch.randn(batch, 16)
        with torch.no_grad():
            got, size = fast(x)
            torch.testing.assert_close(got, module(x)[0], rtol=1e-4, atol=1e-4)
        assert size == 2 * batch


def _scale_through_data(m):
    m.fc.weight.data.mul_(2)  # neither _version nor the data pointer changes


def _replace_data(m):
    m.conv.weight.data = torch.randn_like(m.conv.weight)  # a new tensor under the parameter


def _in_place(m):
    with torch.no_grad():
        m.bn.running_var.mul_(3.0)  # a buffer
        m.fc.bias.add_(1.0)


@pytest.mark.parametrize("change", [_scale_through_data, _replace_data, _in_place])
def test_weights_changed_in_place_or_through_data(change, compiles):
    module = small_cnn()
    fast = torch.compile(module, backend="tensorlang")
    x = images(4)
    check(fast, module, x)
    done = compiles[0]
    check(fast, module, x)
    assert compiles[0] == done  # unchanged weights: no compile
    change(module)
    check(fast, module, x)
    check(fast, module, images(8))


def test_graph_breaks_stay_torchs_business():
    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 4)

        def forward(self, x):
            y = self.a(x).relu()
            torch._dynamo.graph_break()
            return self.b(y).sigmoid()

    torch.manual_seed(0)
    module = Broken().eval()
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return dynamo_backend(gm, example_inputs)
    fast = torch.compile(module, backend=backend)
    for batch in (2, 3, 5, 2):
        check(fast, module, torch.randn(batch, 16))
    assert len(graphs) >= 2


def test_a_module_in_training_mode_is_told_to_call_eval():
    module = small_cnn().train()
    state = {k: v.clone() for k, v in module.state_dict().items()}
    fast = torch.compile(module, backend="tensorlang")
    with torch.no_grad(), pytest.raises(Exception, match=(
            r"the module runs in training mode: aten\.native_batch_norm \(node \w+ at test_dynamo_backend\.py:\d+: "
            r"y = nn\.functional\.max_pool2d\(self\.bn\(self\.conv\(x\)\)\.relu\(\), 2\)\) normalises with the "
            r"batch's statistics .*aten\.bernoulli\.p \(node \w+ at test_dynamo_backend\.py:\d+: return self\.fc"
            r".*draws random numbers \(dropout in training\)\. Call \.eval\(\) on the module: tensorlang compiles "
            r"inference graphs")):
        fast(images(4))
    for k, v in module.state_dict().items():  # the failed compile left the running statistics alone
        assert torch.equal(v, state[k]), k
    module.eval()
    check(fast, module, images(4))


def test_a_graph_that_writes_into_its_buffer_is_refused():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("calls", torch.zeros(1))

        def forward(self, x):
            self.calls.add_(1)
            return x * 2

    fast = torch.compile(Counter().eval(), backend="tensorlang")
    with torch.no_grad(), pytest.raises(Exception, match=r"the graph writes into input \w*calls\w* \(node \w+ at "
                                                         r"test_dynamo_backend\.py:\d+: self\.calls\.add_\(1\)\) in "
                                                         r"place; tensorlang compiles inference graphs"):
        fast(torch.randn(2, 3))


def test_backward_says_training_is_not_supported():
    module = small_cnn()
    fast = torch.compile(module, backend="tensorlang")
    x = images(4)
    y = fast(x)  # grad mode on, the parameters require grad: so do torch's outputs
    assert y.requires_grad
    torch.testing.assert_close(y.detach(), module(x).detach(), rtol=1e-4, atol=1e-4)
    with pytest.raises(UsageError, match=r'backward\(\) through a torch\.compile\(backend="tensorlang"\) graph: '
                                         r"training is not supported, tensorlang compiles inference graphs"):
        y.sum().backward()
    with torch.no_grad():
        assert not fast(x).requires_grad
