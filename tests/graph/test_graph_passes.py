"""The graph passes, each before and after: what it changes in the graph, and that the model computes the same
(the same graph compiled without any pass is the reference). A fuzzer runs every pass, and the whole pipeline, on
random graphs (tests/support/graphgen.py); the memory planner's plans are checked for overlaps on them too."""
from __future__ import annotations

import os

import numpy as np
import pytest
from graphgen import inputs_for, random_graph
from oracle import assert_close
from schedule_cases import _conv2d

from tensorlang.graph import compile_graph, intermediate_bytes
from tensorlang.graph.ir import Graph, TensorType
from tensorlang.graph.ops import get
from tensorlang.graph.pass_options import check_pass_options, describe_pass_options
from tensorlang.graph.passes import (
    PIPELINE,
    cse,
    dce,
    fold_batch_norm,
    fold_constants,
    fusion,
    layout,
    noop,
    select,
    simplify,
    winograd,
)
from tensorlang.graph.passes.memory_plan import plan_memory
from tensorlang.graph.verify import GraphError, verify

RNG = np.random.default_rng(0)


def node(g, op, inputs, attrs=None, name=None):
    attrs = attrs or {}
    probe = g.make_node(op, inputs, attrs, [])
    g._node_names.discard(probe.name)
    return g.add_node(op, inputs, attrs, get(op).infer(probe), name=name or op.split(".")[0]).outputs[0]


def const(g, shape, lo=-1.0, hi=1.0, name="w"):
    return g.add_constant(name, RNG.uniform(lo, hi, shape).astype(np.float32))


def same_result(build, pass_fn, expect_change=True, rtol=1e-5):
    """Build the graph twice; run one as is and one after `pass_fn`; return the changes and the pass's graph."""
    global RNG
    RNG = np.random.default_rng(0)
    ref_graph = build()
    RNG = np.random.default_rng(0)
    ins = inputs_for(ref_graph)
    want = compile_graph(ref_graph, passes=[]).run_flat(ins)
    g = build()
    changes = pass_fn(g)
    g.prune_constants()
    verify(g)
    if expect_change:
        assert changes, "the pass changed nothing"
    else:
        assert not changes, changes
    got = compile_graph(g, passes=[]).run_flat(ins)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * max(1.0, float(np.max(np.abs(b)))))
    return changes, g


def ops_of(g):
    return [n.op for n in g.nodes]


def conv_attrs(pad=1, groups=1):
    return {"stride": [1, 1], "padding": [pad, pad], "dilation": [1, 1], "transposed": False,
            "output_padding": [0, 0], "groups": groups}


# ---- DCE ----

def test_dce_removes_dead_chains_and_keeps_what_outputs_need():
    def build():
        g = Graph("dce")
        x = g.add_input("x", TensorType((3, 4), "f32"))
        dead = node(g, "exp", [x], name="dead1")
        node(g, "relu", [dead], name="dead2")
        g.outputs = [node(g, "neg", [x], name="live")]
        return g
    changes, g = same_result(build, dce.run)
    assert ops_of(g) == ["neg"] and len(changes) == 2


def test_dce_keeps_a_graph_without_dead_code():
    def build():
        g = Graph("dce")
        x = g.add_input("x", TensorType((3,), "f32"))
        g.outputs = [node(g, "exp", [x])]
        return g
    same_result(build, dce.run, expect_change=False)


# ---- CSE ----

def test_cse_merges_repeated_nodes_and_constants():
    def build():
        g = Graph("cse")
        x = g.add_input("x", TensorType((3, 4), "f32"))
        w1 = g.add_constant("w1", np.ones((4, 4), np.float32))
        w2 = g.add_constant("w2", np.ones((4, 4), np.float32))
        a = node(g, "mm", [x, node(g, "permute", [w1], {"dims": [1, 0]})])
        b = node(g, "mm", [x, node(g, "permute", [w2], {"dims": [1, 0]})])
        g.outputs = [node(g, "add.Tensor", [a, b])]
        return g
    changes, g = same_result(build, cse.run)
    dce.run(g)
    assert ops_of(g) == ["permute", "mm", "add.Tensor"]
    assert any("constant w2 equals w1" in c for c in changes)


def test_cse_keeps_nodes_with_different_attrs():
    def build():
        g = Graph("cse")
        x = g.add_input("x", TensorType((3, 4), "f32"))
        a = node(g, "mul.Tensor", [x, None], {"other": 2.0})
        b = node(g, "mul.Tensor", [x, None], {"other": 3.0})
        g.outputs = [node(g, "add.Tensor", [a, b])]
        return g
    same_result(build, cse.run, expect_change=False)


# ---- constant folding ----

def test_fold_constants_folds_weight_permutes_and_arithmetic_on_constants():
    def build():
        g = Graph("fold")
        x = g.add_input("x", TensorType((2, 4), "f32"))
        w = const(g, (3, 4))
        scaled = node(g, "mul.Tensor", [node(g, "permute", [w], {"dims": [1, 0]}), None], {"other": 2.0})
        g.outputs = [node(g, "mm", [x, node(g, "exp", [scaled])])]
        return g
    changes, g = same_result(build, fold_constants.run)
    assert ops_of(g) == ["mm"] and len(changes) == 3
    assert g.nodes[0].inputs[1].is_constant and g.nodes[0].inputs[1].shape == (4, 3)


def test_fold_constants_leaves_an_expand_that_would_grow_the_constants():
    def build():
        g = Graph("fold")
        x = g.add_input("x", TensorType((512, 512), "f32"))
        big = node(g, "expand", [const(g, (1, 1))], {"size": [512, 512]})
        g.outputs = [node(g, "add.Tensor", [x, big])]
        return g
    same_result(build, fold_constants.run, expect_change=False)


# ---- batch norm into convolution ----

def _conv_bn(bias: bool, extra_use: bool = False):
    def build():
        g = Graph("convbn")
        x = g.add_input("x", TensorType((2, 3, 7, 6), "f32"))
        c = node(g, "convolution", [x, const(g, (5, 3, 3, 3)), const(g, (5,)) if bias else None], conv_attrs())
        stats = [const(g, (5,)), const(g, (5,)), const(g, (5,)), const(g, (5,), 0.5, 2.0)]
        y = node(g, "_native_batch_norm_legit_no_training", [c, *stats], {"momentum": 0.1, "eps": 1e-5})
        g.outputs = [node(g, "relu", [y])] + ([c] if extra_use else [])
        return g
    return build


@pytest.mark.parametrize("bias", [True, False])
def test_fold_batch_norm_into_the_convolution(bias):
    changes, g = same_result(_conv_bn(bias), fold_batch_norm.run, rtol=1e-5)
    assert ops_of(g) == ["convolution", "relu"] and "folded into" in changes[0]
    assert g.nodes[0].inputs[2] is not None


def test_fold_batch_norm_refuses_when_the_convolution_is_used_elsewhere():
    same_result(_conv_bn(True, extra_use=True), fold_batch_norm.run, expect_change=False)


# ---- no-op elimination ----

def test_noop_removes_copies_identity_ops_and_transpose_pairs():
    def build():
        g = Graph("noop")
        x = g.add_input("x", TensorType((2, 3, 4), "f32"))
        a = node(g, "clone", [x])
        a = node(g, "mul.Tensor", [a, None], {"other": 1.0})
        a = node(g, "add.Tensor", [a, g.add_constant("zero", np.zeros((4,), np.float32))])
        a = node(g, "permute", [a], {"dims": [0, 2, 1]})
        a = node(g, "permute", [a], {"dims": [0, 2, 1]})
        a = node(g, "slice.Tensor", [a], {"dim": 1, "start": 0, "end": 3, "step": 1})
        a = node(g, "view", [a], {"size": [2, 3, 4]})
        a = node(g, "constant_pad_nd", [a], {"pad": [0, 0], "value": 0.0})
        g.outputs = [node(g, "exp", [a])]
        return g
    changes, g = same_result(build, noop.run)
    dce.run(g)
    assert ops_of(g) == ["exp"], changes


def test_noop_composes_permutes_and_views():
    def build():
        g = Graph("noop")
        x = g.add_input("x", TensorType((2, 3, 4), "f32"))
        a = node(g, "permute", [node(g, "permute", [x], {"dims": [1, 0, 2]})], {"dims": [0, 2, 1]})
        b = node(g, "view", [node(g, "view", [x], {"size": [6, 4]})], {"size": [24]})
        g.outputs = [node(g, "exp", [a]), node(g, "neg", [b])]
        return g
    _changes, g = same_result(build, noop.run)
    dce.run(g)
    assert ops_of(g) == ["permute", "view", "exp", "neg"] and g.nodes[0].attrs["dims"] == [1, 2, 0]
    assert g.nodes[1].inputs[0].name == "x"


def test_noop_keeps_a_multiplication_that_broadcasts():
    def build():
        g = Graph("noop")
        x = g.add_input("x", TensorType((3,), "f32"))
        g.outputs = [node(g, "mul.Tensor", [x, g.add_constant("ones", np.ones((2, 3), np.float32))])]
        return g
    same_result(build, noop.run, expect_change=False)


# ---- algebraic simplification ----

def test_simplify_makes_addmm_and_cheaper_arithmetic():
    def build():
        g = Graph("simplify")
        x = g.add_input("x", TensorType((3, 4), "f32"))
        y = node(g, "add.Tensor", [node(g, "mm", [x, const(g, (4, 5))]), const(g, (5,))])
        y = node(g, "div.Tensor", [y, None], {"other": 4.0})
        y = node(g, "mul.Tensor", [node(g, "mul.Tensor", [y, None], {"other": 3.0}), None], {"other": 0.5})
        y = node(g, "neg", [node(g, "neg", [y])])
        y = node(g, "sub.Tensor", [y, node(g, "neg", [x[:0] if False else y])])
        g.outputs = [node(g, "rsqrt", [node(g, "abs", [y])]), node(g, "reciprocal", [node(g, "sqrt",
                                                                                        [node(g, "abs", [x])])])]
        return g
    changes, g = same_result(build, simplify.run)
    dce.run(g)
    text = " ".join(ops_of(g))
    assert "addmm" in text and "div" not in text and " mm" not in text
    assert ops_of(g).count("mul.Tensor") == 1 and "rsqrt" in text and "reciprocal" not in text, changes


# ---- fusion ----

def residual_block(name, shape):
    """relu(conv(relu(conv(x, W1, b1)), W2) + x): a ResNet basic block's convolutions, input `shape` (N, C, H, W)."""
    c = shape[1]
    g = Graph(name)
    x = g.add_input("x", TensorType(shape, "f32"))
    y = node(g, "relu", [node(g, "convolution", [x, const(g, (c, c, 3, 3)), const(g, (c,))], conv_attrs())])
    z = node(g, "convolution", [y, const(g, (c, c, 3, 3)), None], conv_attrs())
    g.outputs = [node(g, "relu", [node(g, "add.Tensor", [z, x])])]
    return g


def test_fusion_puts_bias_relu_and_residual_add_into_the_convolution():
    _changes, g = same_result(lambda: residual_block("fuse", (1, 4, 6, 6)), fusion.run)
    assert [n.attrs["name"] for n in g.nodes] == ["convolution_relu", "convolution_add_relu"]
    assert "fused convolution_add_relu" in str(g)


def test_fusion_of_matmul_and_gelu_through_a_view_and_of_a_reduction_with_its_producer():
    def build():
        g = Graph("fuse")
        x = g.add_input("x", TensorType((6, 8), "f32"))
        a = node(g, "addmm", [const(g, (8,)), x, const(g, (8, 8))])
        v = node(g, "view", [a], {"size": [2, 3, 8]})
        gl = node(g, "gelu", [v])
        sq = node(g, "mul.Tensor", [x, x])
        g.outputs = [gl, node(g, "sum.dim_IntList", [sq], {"dim": [1]})]
        return g
    _changes, g = same_result(build, fusion.run)
    assert [n.op for n in g.nodes] == ["fused", "fused"]
    assert [m.op for m in g.nodes[0].body.nodes] == ["addmm", "view", "gelu"]
    assert [m.op for m in g.nodes[1].body.nodes] == ["mul.Tensor", "sum.dim_IntList"]


def test_fusion_refuses_a_reshape_that_needs_a_division():
    def build():
        g = Graph("fuse")
        x = g.add_input("x", TensorType((4, 6), "f32"))
        t = node(g, "permute", [node(g, "exp", [x])], {"dims": [1, 0]})   # [6, 4]
        v = node(g, "view", [t], {"size": [4, 6]})                        # a merge that splits another way
        g.outputs = [node(g, "relu", [v])]
        return g
    _changes, g = same_result(build, fusion.run)
    assert "view" in [n.op for n in g.nodes], "the view must stay between two kernels"


def test_fusion_keeps_a_value_with_two_readers_as_an_output():
    def build():
        g = Graph("fuse")
        x = g.add_input("x", TensorType((5,), "f32"))
        a = node(g, "exp", [x])
        g.outputs = [node(g, "neg", [a]), node(g, "relu", [a])]
        return g
    _changes, _g = same_result(build, fusion.run, expect_change=False)



def test_fusion_places_a_group_after_a_group_that_one_of_its_later_members_reads():
    """A group whose first member comes first but whose later member reads another group's value (ResNet-50's
    residual add, GoogLeNet's concatenated branches, ShuffleNet's channel shuffle) ran before that group: the group
    made first kept reading the value the later group's fused node replaced."""
    def build():
        g = Graph("fuse")
        x = g.add_input("x", TensorType((5,), "f32"))
        r = node(g, "relu", [x], name="r")                       # group A starts here
        e = node(g, "neg", [node(g, "exp", [x], name="e")], name="e2")  # group B, after A's first member
        g.outputs = [node(g, "add.Tensor", [r, e], {"alpha": 1}, name="s")]  # A's second member reads B
        return g
    changes, g = same_result(build, fusion.run)
    assert len(changes) == 2 and [n.op for n in g.nodes] == ["fused", "fused"], changes
    assert [n.attrs["name"] for n in g.nodes] == ["exp_neg", "relu_add"]

# ---- layout ----

def test_layout_runs_a_conv_chain_in_blocks_with_conversions_only_at_its_ends():
    def build():
        g = Graph("layout")
        x = g.add_input("x", TensorType((2, 8, 6, 5), "f32"))
        a = node(g, "relu", [node(g, "convolution", [x, const(g, (8, 8, 3, 3)), const(g, (8,))], conv_attrs())])
        b = node(g, "convolution", [a, const(g, (8, 1, 3, 3)), None], conv_attrs(groups=8))
        c = node(g, "add.Tensor", [b, x])
        d = node(g, "hardtanh", [node(g, "convolution", [c, const(g, (16, 8, 1, 1)), None], conv_attrs(pad=0))],
                 {"min_val": 0.0, "max_val": 6.0})
        g.outputs = [node(g, "mean.dim", [d], {"dim": [2, 3]})]
        return g
    changes, g = same_result(build, lambda g: layout.run(g, block=8))
    ops = ops_of(g)
    assert ops.count("layout_to_blocked") == 1 and ops.count("layout_from_blocked") == 1, ops
    assert ops.count("convolution_blocked") == 3 and "convolution" not in ops
    assert "NCHW8c" in changes[0]


def test_layout_leaves_convolutions_whose_channels_do_not_divide_by_the_block():
    def build():
        g = Graph("layout")
        x = g.add_input("x", TensorType((1, 3, 6, 6), "f32"))
        a = node(g, "relu", [node(g, "convolution", [x, const(g, (6, 3, 3, 3)), None], conv_attrs())])
        g.outputs = [node(g, "convolution", [a, const(g, (6, 6, 3, 3)), None], conv_attrs())]
        return g
    same_result(build, lambda g: layout.run(g, block=8), expect_change=False)


# ---- Winograd ----

def _winograd_everywhere(g):
    return winograd.run(g, min_channels=1, min_tiles=1)


def test_winograd_rewrites_3x3_convolutions_and_their_bias_relu_and_residual_fuse_into_the_output_transform():
    def build():
        return residual_block("winograd", (2, 8, 6, 10))
    changes, g = same_result(build, lambda g: winograd.run(g, min_channels=8, min_tiles=30), rtol=1e-5)
    assert ops_of(g) == ["winograd_input", "bmm", "winograd_output", "relu",
                         "winograd_input", "bmm", "winograd_output", "add.Tensor", "relu"]
    assert changes[0].endswith("30 tiles, weights transformed to [16, 8, 8]"), changes
    # the transformed weights: G g Gᵀ of the convolution's own weights, [16, F, C]
    u = g.nodes[1].inputs[0].data
    assert u.shape == (16, 8, 8) and u.dtype == np.float32
    # after fusion, bias + ReLU and residual add + ReLU are in the output transforms' write-back
    changes, g = same_result(build, lambda g: _winograd_everywhere(g) + fusion.run(g), rtol=1e-5)
    assert [n.attrs["name"] for n in g.nodes if n.body is not None] == \
        ["winograd_output_relu", "winograd_output_add_relu"], str(g)


@pytest.mark.parametrize("case", ["stride 2", "5x5", "odd output", "groups", "dilation", "weights computed",
                                  "few channels", "few tiles"])
def test_winograd_leaves_convolutions_it_cannot_or_should_not_rewrite(case):
    def build():
        g = Graph("winograd")
        c, hw = (4, 6) if case != "odd output" else (4, 7)
        x = g.add_input("x", TensorType((1, c, hw, hw), "f32"))
        attrs = conv_attrs(groups=2 if case == "groups" else 1)
        k = 5 if case == "5x5" else 3
        if case == "stride 2":
            attrs["stride"] = [2, 2]
        if case == "dilation":
            attrs["dilation"], attrs["padding"] = [2, 2], [2, 2]
        if case == "5x5":
            attrs["padding"] = [2, 2]
        w = const(g, (4, c // (2 if case == "groups" else 1), k, k))
        if case == "weights computed":
            w = node(g, "neg", [w])
        g.outputs = [node(g, "convolution", [x, w, None], attrs)]
        return g
    thresholds = {"few channels": (8, 1), "few tiles": (1, 10)}.get(case, (1, 1))
    same_result(build, lambda g: winograd.run(g, *thresholds), expect_change=False)


def test_winograd_default_thresholds_take_resnets_56_28_and_14_layers_not_its_7s():
    def conv(c, hw):
        g = Graph("w")
        x = g.add_input("x", TensorType((1, c, hw, hw), "f32"))
        w = g.add_constant("w", np.zeros((c, c, 3, 3), np.float32))
        return g.add_node("convolution", [x, w, None], conv_attrs(), [TensorType((1, c, hw, hw), "f32")])
    shapes = [(64, 56), (128, 28), (256, 14), (512, 7), (512, 8), (32, 56)]
    assert [winograd.eligible(conv(c, hw)) for c, hw in shapes] == [True, True, True, False, False, False]


def test_winograd_ops_name_the_node_when_the_shapes_do_not_fit():
    g = Graph("w")
    m = g.add_input("m", TensorType((16, 8, 12), "f32"))
    bad = g.make_node("winograd_output", [m, None], {"tiles": [3, 3], "out": [1, 8, 6, 6]}, [], name="conv_out")
    with pytest.raises(Exception, match=r"winograd_output \(node conv_out\): products \[16, 8, 12\] do not fit "
                                        r"the output \[1, 8, 6, 6\] in 2x2 tiles"):
        get("winograd_output").infer(bad)
    x = g.add_input("x", TensorType((8, 6, 6), "f32"))
    bad = g.make_node("winograd_input", [x], {"tiles": [3, 3], "padding": [1, 1]}, [], name="conv_in")
    with pytest.raises(Exception, match=r"winograd_input \(node conv_in\): input \[8, 6, 6\]: an NCHW tensor"):
        get("winograd_input").infer(bad)


def test_winograd_pass_option_turns_the_pass_off():
    assert "winograd" in [n for n, _ in select()]
    assert "winograd" not in [n for n, _ in select(options={"winograd": False})]
    assert describe_pass_options({"winograd": False}).endswith(", no Winograd")
    with pytest.raises(Exception, match="pass option winograd=1: must be True or False"):
        check_pass_options({"winograd": 1})


# ---- the pipeline, the verifier, memory planning ----

def test_pipeline_prints_what_each_pass_changed(capsys):
    g = random_graph(3)
    compile_graph(g, print_passes=True)
    err = capsys.readouterr().err
    for name, _ in PIPELINE:
        assert f"[{name}]" in err


def test_print_passes_from_the_environment(monkeypatch, capsys):
    monkeypatch.setenv("TENSORLANG_PRINT_PASSES", "1")
    compile_graph(random_graph(4))
    assert "[fusion]" in capsys.readouterr().err
    monkeypatch.setenv("TENSORLANG_PRINT_PASSES", "yes please")
    with pytest.raises(Exception, match="TENSORLANG_PRINT_PASSES"):
        compile_graph(random_graph(4))


def test_unknown_pass_name_is_an_error():
    with pytest.raises(Exception, match="unknown pass 'fusoin'; passes: dce, cse"):
        select(skip=("fusoin",))


def test_verifier_catches_a_broken_graph():
    g = Graph("bad")
    x = g.add_input("x", TensorType((2,), "f32"))
    n = g.add_node("relu", [x], {}, [TensorType((3,), "f32")])
    g.outputs = [n.outputs[0]]
    with pytest.raises(GraphError, match=r"outputs \[f32\[3\]\] but its op gives \[f32\[2\]\]"):
        verify(g)
    g.nodes[0].outputs[0].type = TensorType((2,), "f32")
    g.nodes.insert(0, g.make_node("exp", [n.outputs[0]], {}, [TensorType((2,), "f32")]))
    with pytest.raises(GraphError, match="not defined before it"):
        verify(g, after="fusion")


# ---- branchy graphs: every pass, and the pipeline, against numpy ----

def through_every_pass(build, reference, reduction_len):
    """Each pass alone, and the whole pipeline, on `build()`'s graph compute what numpy's `reference` does on the
    graph's inputs; the memory plan of each has no overlaps."""
    ins = inputs_for(build())
    want = reference(*ins)
    for passes in [[p] for p in PIPELINE] + [None]:
        g = build()
        got = compile_graph(g, passes=passes).run_flat(ins)
        assert_close(got[0], want, reduction_len, err_msg=passes[0][0] if passes else "pipeline")
        check_plan(g)


BRANCH_W = {k: np.random.default_rng(56).uniform(-1, 1, shape).astype(np.float32) for k, shape in
            [("w1", (4, 8, 1, 1)), ("b1", (4,)), ("w3", (6, 8, 3, 3)), ("w2", (8, 10, 1, 1))]}


def conv_relu(g, x, w, b=None, pad=0):
    ws = [g.add_constant(k, BRANCH_W[k]) if k else None for k in (w, b)]
    return node(g, "relu", [node(g, "convolution", [x, *ws], conv_attrs(pad))])


def test_a_concatenation_of_two_branches_of_one_value_survives_every_pass():
    """GoogLeNet's and DenseNet's shape: two convolutions read one value, their outputs concatenated by channel."""
    def build():
        g = Graph("concat")
        x = g.add_input("x", TensorType((2, 8, 6, 5), "f32"))
        cat = node(g, "cat", [conv_relu(g, x, "w1", "b1"), conv_relu(g, x, "w3", pad=1)], {"dim": 1})
        g.outputs = [node(g, "convolution", [cat, g.add_constant("w2", BRANCH_W["w2"]), None], conv_attrs(0))]
        return g

    def reference(x):
        a = np.maximum(_conv2d(x, BRANCH_W["w1"], stride=1, pad=0, dil=1) + BRANCH_W["b1"][:, None, None], 0)
        b = np.maximum(_conv2d(x, BRANCH_W["w3"], stride=1, pad=1, dil=1), 0)
        return _conv2d(np.concatenate([a, b], 1), BRANCH_W["w2"], stride=1, pad=0, dil=1)
    through_every_pass(build, reference, 8 * 9 * 10)


def test_a_channel_shuffle_survives_every_pass():
    """ShuffleNetV2's shuffle of a convolution's output: view into groups, swap the group dims, view back."""
    def build():
        g = Graph("shuffle")
        x = g.add_input("x", TensorType((2, 8, 6, 5), "f32"))
        y = node(g, "cat", [conv_relu(g, x, "w1", "b1"), x], {"dim": 1})
        t = node(g, "permute", [node(g, "view", [y], {"size": [2, 3, 4, 6, 5]})], {"dims": [0, 2, 1, 3, 4]})
        g.outputs = [node(g, "mul.Tensor", [node(g, "view", [t], {"size": [2, 12, 6, 5]}), None], {"other": 2.0})]
        return g

    def reference(x):
        a = np.maximum(_conv2d(x, BRANCH_W["w1"], stride=1, pad=0, dil=1) + BRANCH_W["b1"][:, None, None], 0)
        y = np.concatenate([a, x], 1)
        return 2 * y.reshape(2, 3, 4, 6, 5).transpose(0, 2, 1, 3, 4).reshape(2, 12, 6, 5)
    through_every_pass(build, reference, 8)


def test_a_residual_add_through_a_permute_and_its_inverse_survives_every_pass():
    """A residual branch that runs channels-last between the producer and the add."""
    def build():
        g = Graph("residual")
        x = g.add_input("x", TensorType((2, 8, 6, 5), "f32"))
        y = conv_relu(g, x, "w1", "b1")
        t = node(g, "tanh", [node(g, "permute", [y], {"dims": [0, 2, 3, 1]})])
        branch = node(g, "permute", [t], {"dims": [0, 3, 1, 2]})
        g.outputs = [node(g, "relu", [node(g, "add.Tensor", [y, branch])])]
        return g

    def reference(x):
        y = np.maximum(_conv2d(x, BRANCH_W["w1"], stride=1, pad=0, dil=1) + BRANCH_W["b1"][:, None, None], 0)
        return np.maximum(y + np.tanh(y.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2), 0)
    through_every_pass(build, reference, 8)


FUZZ = int(os.environ.get("TENSORLANG_GRAPH_FUZZ", "25"))


@pytest.mark.parametrize("seed", range(FUZZ))
def test_every_pass_keeps_what_random_graphs_compute(seed):
    ref_graph = random_graph(seed)
    ins = inputs_for(ref_graph, seed)
    want = compile_graph(ref_graph, passes=[]).run_flat(ins)
    variants = [[p] for p in PIPELINE] + [None]
    for passes in variants:
        g = random_graph(seed)
        model = compile_graph(g, passes=passes)
        got = model.run_flat(ins)
        label = passes[0][0] if passes else "pipeline"
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4 * max(1.0, float(np.max(np.abs(b)))),
                                       err_msg=f"seed {seed}, {label}")
        check_plan(g)


@pytest.mark.parametrize("seed", range(FUZZ))
def test_winograd_keeps_what_random_graphs_compute(seed):
    """The winograd pass on every 3x3 convolution it can take (thresholds 1), alone and before the rest of the
    pipeline, on random graphs of 6x8 images (even, so that the rewrite applies)."""
    ins = inputs_for(random_graph(seed, spatial=(6, 8)), seed)
    want = compile_graph(random_graph(seed, spatial=(6, 8)), passes=[]).run_flat(ins)
    rest = [p for p in PIPELINE if p[0] != "winograd"]
    for label, passes in [("winograd", []), ("winograd + pipeline", rest)]:
        g = random_graph(seed, spatial=(6, 8))
        changes = _winograd_everywhere(g)
        verify(g)
        model = compile_graph(g, passes=passes)
        assert all(n.op != "convolution" or not winograd.eligible(n, 1, 1) for n in g.nodes), changes
        for a, b in zip(model.run_flat(ins), want):
            np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-4 * max(1.0, float(np.max(np.abs(b)))),
                                       err_msg=f"seed {seed}, {label}: {changes}")
        check_plan(g)


def test_the_winograd_fuzz_reaches_the_rewrite():
    assert sum(bool(_winograd_everywhere(random_graph(s, spatial=(6, 8)))) for s in range(FUZZ)) >= FUZZ // 4


def test_the_fuzz_draws_branchy_graphs():
    """Concatenated branches, channel shuffles and residual adds fed by a permute or a view all occur."""
    graphs = [random_graph(s) for s in range(25)]
    assert any(n.op == "cat" and len(n.inputs) > 1 for g in graphs for n in g.nodes)
    assert any(n.op == "permute" and list(n.attrs["dims"]) == [0, 2, 1, 3, 4] for g in graphs for n in g.nodes)
    assert any(n.op == "add.Tensor" and any(v is not None and v.producer is not None and
                                            v.producer.op in ("permute", "view") for v in n.inputs)
               for g in graphs for n in g.nodes)


def check_plan(g):
    """No two arena buffers alive at the same step overlap in bytes; every buffer fits the arena."""
    plan = plan_memory(g)
    bufs = plan.buffers
    for i, (na, sa, ea, oa, ba) in enumerate(bufs):
        assert oa % 64 == 0 and oa + ba <= plan.arena_bytes
        for nb, sb, eb, ob, bb in bufs[i + 1:]:
            if sa <= eb and sb <= ea:
                assert oa + ba <= ob or ob + bb <= oa, f"{na} and {nb} overlap while both alive"


def test_memory_plan_reuses_buffers_and_computes_in_place():
    g = Graph("chain")
    x = g.add_input("x", TensorType((1024,), "f32"))
    a = x
    for _ in range(6):
        a = node(g, "exp", [node(g, "mm", [node(g, "view", [a], {"size": [32, 32]}), const(g, (32, 32))])])
        a = node(g, "view", [a], {"size": [1024]})
    g.outputs = [a]
    plan = plan_memory(g)
    # exp writes over its operand (the mm's result): two buffers live at once (the mm's operand and result)
    assert plan.arena_bytes == 2 * 4096 and plan.value_bytes == 11 * 4096
    assert len(plan.inplace) == 5
    check_plan(g)
    assert plan_memory(g, inplace=False).arena_bytes == 2 * 4096  # exp's operand dies there anyway
    g = Graph("elementwise")
    a = g.add_input("x", TensorType((1024,), "f32"))
    for op in ("exp", "neg", "abs", "relu", "exp"):
        a = node(g, op, [a])
    g.outputs = [node(g, "sigmoid", [a])]
    assert plan_memory(g).arena_bytes == 4096 and plan_memory(g, inplace=False).arena_bytes == 2 * 4096
    check_plan(g)


def test_memory_plan_keeps_a_value_alive_while_a_view_of_it_is_read():
    g = Graph("views")
    x = g.add_input("x", TensorType((4, 8), "f32"))
    a = node(g, "exp", [x])
    v = node(g, "view", [a], {"size": [32]})
    b = node(g, "neg", [x])
    c = node(g, "relu", [b])
    g.outputs = [node(g, "add.Tensor", [node(g, "view", [c], {"size": [32]}), v])]
    plan = plan_memory(g)
    ends = {name.split("/")[0]: end for name, start, end, off, _ in plan.buffers}
    add_step = len(g.nodes) - 1  # the add reads exp's result through the view: exp's buffer lives until then
    assert ends["exp"] == add_step, plan.buffers
    check_plan(g)
    ins = inputs_for(g)
    out = compile_graph(g, passes=[]).run_flat(ins)[0]
    np.testing.assert_allclose(out, (np.maximum(-ins[0], 0) + np.exp(ins[0])).reshape(32), rtol=1e-6)


def test_intermediate_bytes_counts_what_a_naive_runtime_allocates():
    g = random_graph(1)
    assert intermediate_bytes(g) > 0
