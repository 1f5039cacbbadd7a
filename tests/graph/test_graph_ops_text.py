"""The ops of the transformer models against torch: reads through an index (embedding, gather, index_select), where
and masked_fill in every broadcasting form, bitwise and trigonometric ops, triu / tril, the `*_like` and `new_*`
creation ops, and integer (int64) arithmetic; an index out of range is a `tl.IndexError` naming the node, from a
model and from an exported library."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch._dynamo  # noqa: E402,F811  (torch.compile state, reset between tests)
from oracle import assert_close  # noqa: E402
from test_graph_ops import Wrap, _f64, check_case  # noqa: E402

import tensorlang as tl  # noqa: E402
from tensorlang.errors import UsageError  # noqa: E402
from tensorlang.frontend.torch_import import export_program, graph_from_exported  # noqa: E402
from tensorlang.graph import compile_graph  # noqa: E402

aten = torch.ops.aten
G = torch.Generator().manual_seed(56)


def r(*shape, lo=-2.0, hi=2.0):
    return torch.rand(*shape, generator=G) * (hi - lo) + lo


def ids(high, *shape, dtype=torch.int64):
    return torch.randint(0, high, shape, generator=G, dtype=dtype)


def boolean(*shape):
    return torch.rand(*shape, generator=G) > 0.5


CASES = [
    # (op, function of the inputs, inputs, reduction length), checked by test_graph_ops.check_case
    ("embedding", lambda w, i: aten.embedding(w, i), [r(11, 5), ids(11, 3, 4)], 1),
    ("embedding", lambda w, i: aten.embedding(w, i), [r(7, 3), ids(7, 9)], 1),
    ("embedding", lambda w, i: aten.embedding(w, i, 0), [r(6, 4), ids(6, 2, 3, dtype=torch.int32)], 1),
    ("gather", lambda x, i: aten.gather(x, 1, i), [r(4, 6), ids(6, 4, 3)], 1),
    ("gather", lambda x, i: aten.gather(x, 0, i), [r(5, 3), ids(5, 2, 2)], 1),
    ("gather", lambda x, i: aten.gather(x, -1, i), [r(2, 3, 7), ids(7, 2, 3, 5)], 1),
    ("index_select", lambda x, i: aten.index_select(x, 0, i), [r(5, 7), torch.tensor([4, 0, 4, 2])], 1),
    ("index_select", lambda x, i: aten.index_select(x, -1, i), [r(2, 3, 6), ids(6, 9)], 1),
    ("index_select", lambda x, i: aten.index_select(x, 1, i), [r(3, 5), torch.tensor(3)], 1),
    ("masked_fill.Scalar", lambda x, m: aten.masked_fill(x, m, -1e9), [r(3, 4), boolean(1, 4)], 1),
    ("masked_fill.Scalar", lambda x, m: aten.masked_fill(x, m, float("-inf")), [r(2, 3, 4), boolean(3, 1)], 1),
    ("masked_fill.Tensor", lambda x, m, v: aten.masked_fill(x, m, v), [r(3, 4), boolean(3, 4), r(())], 1),
    ("where.self", lambda c, x, y: aten.where(c, x, y), [boolean(3, 1), r(1, 4), r(())], 1),
    ("where.self", lambda c, x, y: aten.where(c, x, y), [boolean(2, 1, 5), r(3, 1), r(5)], 1),
    ("where.self", lambda c, x, y: aten.where(c, x, y), [boolean(4), ids(9, 3, 4), ids(9, 4)], 1),
    ("logical_xor", lambda a, b: aten.logical_xor(a, b), [boolean(3, 4), boolean(4)], 1),
    ("bitwise_and.Tensor", lambda a, b: aten.bitwise_and(a, b), [boolean(3, 4), boolean(3, 1)], 1),
    ("bitwise_and.Scalar", lambda a: aten.bitwise_and.Scalar(a, True), [boolean(5)], 1),
    ("bitwise_or.Tensor", lambda a, b: aten.bitwise_or(a, b), [boolean(2, 3), boolean(3)], 1),
    ("bitwise_or.Scalar", lambda a: aten.bitwise_or.Scalar(a, False), [boolean(5)], 1),
    ("bitwise_xor.Tensor", lambda a, b: aten.bitwise_xor(a, b), [boolean(4, 1), boolean(4, 3)], 1),
    ("bitwise_xor.Scalar", lambda a: aten.bitwise_xor.Scalar(a, True), [boolean(5)], 1),
    ("bitwise_not", lambda a: aten.bitwise_not(a), [boolean(3, 5)], 1),
    ("sin", lambda x: aten.sin(x), [r(5, 61, lo=-100, hi=100)], 1),
    ("cos", lambda x: aten.cos(x), [r(5, 61, lo=-100, hi=100)], 1),
    ("cos", lambda x: aten.cos(x), [r(3, 7, lo=-3, hi=3).double()], 1),
    ("pow.Scalar", lambda x: aten.pow(2.0, x), [r(3, 5)], 1),
    ("triu", lambda x: aten.triu(x), [r(2, 5, 6)], 1),
    ("triu", lambda x: aten.triu(x, 2), [r(4, 5)], 1),
    ("tril", lambda x: aten.tril(x, -1), [r(3, 6, 5)], 1),
    ("tril", lambda x: aten.tril(x), [boolean(4, 4)], 1),
    ("zeros_like", lambda x: x + aten.zeros_like(x), [r(2, 3)], 1),
    ("ones_like", lambda x: x * aten.ones_like(x) * 2, [r(2, 3)], 1),
    ("empty_like", lambda x: aten.where(x > 100.0, aten.empty_like(x), x), [r(2, 3)], 1),
    ("new_zeros", lambda x: aten.new_zeros(x, [3]) + x, [r(2, 3)], 1),
    ("new_ones", lambda x: aten.new_ones(x, [2, 1]) * x, [r(2, 3)], 1),
    ("new_full", lambda x: aten.new_full(x, [3], 4.5) * x, [r(2, 3)], 1),
    ("new_empty", lambda x: aten.where(x > 100.0, aten.new_empty(x, [3]), x), [r(2, 3)], 1),
    # int64 arithmetic: inputs, sums, casts and comparisons of int64 tensors
    ("add.Tensor", lambda a, b: aten.add(a, b), [ids(1000, 3, 4), ids(1000, 4)], 1),
    ("mul.Tensor", lambda a: aten.mul(a, 3_000_000_000), [ids(1000, 5)], 1),
    ("sum.dim_IntList", lambda a: aten.sum(a, [1]), [ids(9, 3, 7)], 1),
    ("sum.dim_IntList", lambda a: aten.sum(a, [0]), [boolean(6, 2)], 1),
    ("_to_copy", lambda x: aten._to_copy(x, dtype=torch.int64), [r(3, 4, lo=-50, hi=50)], 1),
    ("_to_copy", lambda x: aten._to_copy(x, dtype=torch.int64), [boolean(3, 4)], 1),
    ("lt.Scalar", lambda a: aten.lt(a, 500), [ids(1000, 9)], 1),
    ("abs", lambda a: aten.abs(a), [ids(9, 7) - 4], 1),
    ("minimum", lambda a, b: aten.minimum(a, b), [ids(9, 2, 5), ids(9, 5)], 1),
    ("split_with_sizes", lambda x, w, b: aten.split_with_sizes(aten.addmm(b, x, w), [2, 3, 2], 1),
     [r(3, 4), r(4, 7), r(7)], 4),
]


@pytest.mark.parametrize("op,fn,inputs,red", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_op_against_torch(op, fn, inputs, red):
    check_case(op, fn, inputs, red)


VIEW_CASES = [
    # the ops on non-contiguous views, and as the models use them, through torch.export and every pass
    ("embedding of transposed ids", lambda w, i: torch.nn.functional.embedding(i.t(), w), [r(9, 4), ids(9, 3, 5)], 1),
    ("embedding of a slice of ids, plus positions", lambda w, p, i: torch.nn.functional.embedding(i[:, 1:], w) +
     torch.nn.functional.embedding(torch.arange(4), p), [r(9, 6), r(5, 6), ids(9, 2, 5)], 1),
    ("gather of a permuted input", lambda x, i: torch.gather(x.permute(1, 0, 2), 2, i),
     [r(3, 4, 5), ids(5, 4, 3, 2)], 1),
    ("index_select of an expression", lambda x, i: torch.index_select(torch.exp(x) + 1, 1, i),
     [r(3, 5), torch.tensor([4, 1])], 1),
    ("embedding into layer norm", lambda w, i: torch.nn.functional.layer_norm(
        torch.nn.functional.embedding(i, w), (8,)), [r(20, 8), ids(20, 2, 6)], 8),
    ("masked_fill of a causal mask", lambda x: x.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
     .softmax(-1), [r(2, 5, 5)], 5),
    ("rotary embedding", lambda x, f: x * torch.cos(torch.arange(6)[:, None] * f) +
     torch.cat([-x[..., 2:], x[..., :2]], -1) * torch.sin(torch.arange(6)[:, None] * f), [r(2, 6, 4), r(4)], 1),
    ("cos and sin of a computed angle", lambda x, f: torch.cos(x * f) + torch.sin(x - f), [r(3, 8, lo=-9, hi=9),
                                                                                           r(8)], 1),
]


@pytest.mark.parametrize("what,fn,inputs,red", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_ops_on_views_and_as_models_use_them(what, fn, inputs, red):
    graph = graph_from_exported(export_program(Wrap(fn).eval(), tuple(inputs)))
    got = compile_graph(graph).run_flat([t.numpy() for t in inputs])
    with torch.no_grad():
        want = fn(*[_f64(t) for t in inputs]).numpy().astype(np.float32)
    assert_close(got[0], want, red, err_msg=what)


def _model(fn, inputs):
    return compile_graph(graph_from_exported(export_program(Wrap(fn).eval(), tuple(inputs))))


@pytest.mark.parametrize("op,fn,shape,size,dim", [
    ("embedding", lambda w, i: torch.nn.functional.embedding(i, w) * 2, (11, 5), 11, 0),
    ("gather", lambda x, i: torch.gather(x, 1, i) + 1, (4, 6), 6, 1),
    ("index_select", lambda x, i: torch.index_select(x, 0, i[0]), (7, 3), 7, 0),
])
@pytest.mark.parametrize("bad", [1, -1])
def test_an_index_out_of_range_is_an_index_error(op, fn, shape, size, dim, bad):
    """Never a read outside the tensor: tl.IndexError (a Python IndexError) naming the model, the node, the
    tensor it reads and the value, as torch raises an IndexError."""
    x, i = r(*shape), ids(min(shape[dim], 4), 2, 3)
    model = _model(fn, [x, i])
    assert_close(model.run_flat([x.numpy(), i.numpy()])[0], fn(x, i).numpy(), 1)
    wrong = i.numpy().copy()
    wrong[0, 2] = size - 1 + bad if bad > 0 else -1
    with pytest.raises(tl.IndexError, match=rf"model: nodes? .*\({op}\).* at test_graph_ops.py:\d+: return "
                                            rf"self.fn\(\*xs\): .*index {wrong[0, 2]} is out of range for dimension "
                                            rf"{dim} of in\d+ = xs_0 \(size {size}\)"):
        model.run_flat([x.numpy(), wrong])
    assert_close(model.run_flat([x.numpy(), i.numpy()])[0], fn(x, i).numpy(), 1)  # the next call is right again


def test_an_exported_model_reports_an_index_out_of_range(tmp_path):
    """A model exported as a shared library returns status 2 and `tl.load` raises the same tl.IndexError."""
    w, i = r(10, 4), ids(10, 3)
    model = _model(lambda w, i: torch.nn.functional.embedding(i, w), [w, i])
    files = model.export(tmp_path, format="so")
    loaded = tl.load(files["library"])
    assert_close(loaded(w.numpy(), i.numpy()), torch.nn.functional.embedding(i, w).numpy(), 1)
    header = open(files["header"]).read()
    assert "model_failed_call(const model_model *m)" in header and "model_index_error(const model_model *m" in header
    with pytest.raises(tl.IndexError, match=r"model: node embedding\w* \(embedding\) at test_graph_ops.py:\d+: .*"
                                            r"index 10 is out of range for dimension 0 of in\d+ = xs_0 \(size 10\)"):
        loaded(w.numpy(), np.array([1, 10, 2]))
    assert_close(loaded(w.numpy(), i.numpy()), torch.nn.functional.embedding(i, w).numpy(), 1)


def test_a_constant_index_out_of_range_fails_at_compile_time():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(r(5, 3))
            self.register_buffer("i", torch.tensor([0, 5]))

        def forward(self, x):
            return x + torch.nn.functional.embedding(self.i, self.w)
    with pytest.raises(tl.IndexError, match=r"embedding \(node .*\): index 5 is out of range for dimension 0 of the "
                                            r"embedding table w \(size 5\)"):
        tl.from_torch(M(), (r(2, 3),))


def test_indices_must_be_integers():
    with pytest.raises(UsageError, match=r"gather \(node .*\): indices .* have dtype f32; indices are integer"):
        from tensorlang.graph.ir import Graph, TensorType
        g = Graph("m")
        x, i = g.add_input("x", TensorType((3,), "f32")), g.add_input("i", TensorType((3,), "f32"))
        from tensorlang.graph import ops
        ops.get("gather").infer(g.make_node("gather", [x, i], {"dim": 0}, [], name="g1"))


def test_integer_bitwise_ops_fold_and_otherwise_are_a_clear_error():
    x = ids(16, 6)
    folded = _model(lambda x: x + (torch.arange(6) & 3) + (~torch.arange(6) | 8), [x])
    assert not [n for n in folded.graph.all_nodes() if "bitwise" in n.op]
    assert_close(folded.run_flat([x.numpy()])[0], (x + (torch.arange(6) & 3) + (~torch.arange(6) | 8)).numpy())
    with pytest.raises(UsageError, match=r"bitwise_and of i64 tensors: kernels compute bitwise ops on bool tensors"):
        _model(lambda x: x & 3, [x])


def test_a_dropout_probability_that_changes_between_modules_compiles():
    """dynamo passes a float attribute it saw change (a dropout's p, from the second module on) as a 0-d tensor
    that the graph reads with .item(): it is compiled in, and the models match torch."""
    import torch._dynamo

    class M(torch.nn.Module):
        def __init__(self, p):
            super().__init__()
            self.lin, self.drop = torch.nn.Linear(4, 3), torch.nn.Dropout(p)

        def forward(self, x):
            return self.drop(self.lin(x))
    torch._dynamo.reset()
    x = r(2, 4)
    for p in (0.1, 0.2, 0.3):
        m = M(p).eval()
        with torch.no_grad():
            assert_close(torch.compile(m, backend="tensorlang")(x).numpy(), m(x).numpy(), 4)


def test_rms_norm_through_torch_compile():
    """torch.compile's decomposition of rms_norm writes in place (add_): it is functionalised, and the nodes keep
    the user's line."""
    from tensorlang.frontend.torch_import import graph_from_fx

    def fn(x, w):
        return torch.nn.functional.rms_norm(x, (8,), w, 1e-6) * 2
    captured = []

    def capture(gm, example_inputs):
        captured.append((gm, example_inputs))
        return gm
    x, w = r(3, 5, 8), r(8)
    torch._dynamo.reset()
    torch.compile(fn, backend=capture, fullgraph=True)(x, w)
    graph, positions, _ = graph_from_fx(*captured[0])
    assert not [n.op for n in graph.nodes if "_." in n.op or n.op.endswith("_")], graph.op_counts()
    assert "add.Scalar" in graph.op_counts()
    assert all("test_graph_ops_text.py" in n.source and "rms_norm" in n.source for n in graph.nodes)
    got = compile_graph(graph).run_flat([[x, w][k].numpy() for k in positions])[0]
    assert_close(got, fn(x.double(), w.double()).numpy().astype(np.float32), 8)
    torch._dynamo.reset()
    m = torch.nn.RMSNorm(8, eps=1e-6)
    with torch.no_grad():
        assert_close(torch.compile(m, backend="tensorlang", fullgraph=True)(x).numpy(), m(x).numpy(), 8)


def test_a_filled_tensor_that_only_broadcasts_is_one_number():
    """The decomposed attention's where(empty row, zeros_like(p), p): the zeros are a 0-d constant (read as a
    number), not a buffer of the attention's size; a filled tensor that is an output or reduced keeps its shape."""
    x = r(2, 3, 40, 40)
    model = _model(lambda x: torch.where(x > 1.9, torch.zeros_like(x), x) + torch.full_like(x, 0.5), [x])
    assert [c.type.shape for c in model.graph.constants] == [(), ()]
    assert_close(model.run_flat([x.numpy()])[0], (torch.where(x > 1.9, 0.0, x) + 0.5).numpy())
    kept = _model(lambda x: (x + 1, torch.ones_like(x), torch.full_like(x, 2.0).sum(0) * x), [x])
    assert sorted(c.type.shape for c in kept.graph.constants) == [(2, 3, 40, 40), (3, 40, 40)]
    got = kept.run_flat([x.numpy()])
    assert_close(got[1], np.ones(x.shape, np.float32), exact=True)
    assert_close(got[2], (4 * x).numpy(), exact=True)
