"""Hugging Face transformer models (issue 56's BertModel, GPT2Model, LlamaModel, T5EncoderModel, ViTModel,
WhisperEncoder) in small configs (one layer, hidden 32, sequence 16), random weights from their config classes,
through `tl.from_torch` (torch.export) and `torch.compile(backend="tensorlang")`: every output within 1e-4 x
max(1, max|reference|) of torch eager. The models' default attention (scaled-dot-product, decomposed) and their
eager attention both. The full-size configs are benchmarks/zoo.py's. Skipped where transformers is missing."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch.utils._pytree as pytree  # noqa: E402

import tensorlang as tl  # noqa: E402
from tensorlang.graph import ops  # noqa: E402

pytestmark = pytest.mark.zoo
SEQ = 16


def _transformers():
    """transformers, imported after torchvision's nms schemas are defined where torchvision is installed (its
    wheel's _C.so does not load beside the CPU torch, and transformers imports torchvision when it finds it)."""
    import importlib.util
    if importlib.util.find_spec("torchvision") is not None and not hasattr(torch.ops.torchvision, "nms"):
        lib = torch.library.Library("torchvision", "DEF")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _transformers.lib = lib  # the schemas live as long as the library object
    import transformers
    return transformers


def _ids(vocab):
    return (torch.randint(0, vocab, (1, SEQ), generator=torch.Generator().manual_seed(1)),)


def make(name: str, attention: str):
    """(module in eval mode, example inputs) of a small config of the model `name`."""
    T = _transformers()
    torch.manual_seed(0)
    small = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64}
    if name == "bert":
        model, args = T.BertModel(T.BertConfig(vocab_size=100, **small)), _ids(100)
    elif name == "gpt2":
        model, args = T.GPT2Model(T.GPT2Config(vocab_size=100, n_embd=32, n_layer=1, n_head=2, use_cache=False)), \
            _ids(100)
    elif name == "llama":
        model, args = T.LlamaModel(T.LlamaConfig(vocab_size=100, use_cache=False, **small)), _ids(100)
    elif name == "t5":
        model, args = T.T5EncoderModel(T.T5Config(vocab_size=100, d_model=32, d_ff=64, d_kv=16, num_layers=1,
                                                  num_heads=2)), _ids(100)
    elif name == "vit":
        model, args = T.ViTModel(T.ViTConfig(image_size=32, patch_size=8, **small)), \
            (torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(1)),)
    else:  # the Whisper encoder: 80 mel bins, 2 x 16 frames (its convolution halves them)
        config = T.WhisperConfig(d_model=32, encoder_layers=1, encoder_attention_heads=2, decoder_layers=1,
                                 decoder_attention_heads=2, encoder_ffn_dim=64, num_mel_bins=80,
                                 max_source_positions=SEQ)
        model, args = T.WhisperModel(config).get_encoder(), \
            (torch.randn(1, 80, 2 * SEQ, generator=torch.Generator().manual_seed(1)),)
    model.set_attn_implementation(attention)
    return model.eval(), args


# ops that another part of issue 56 brings (the decomposed attention's fully-masked-row test, the causal mask's
# cumulative sum and advanced indexing): the models that need them wait for them
NEEDS = {("bert", "sdpa"): ["any.dim"], ("gpt2", "sdpa"): ["any.dim", "cumsum", "index.Tensor"],
         ("llama", "sdpa"): ["any.dim", "cumsum", "index.Tensor"], ("t5", "sdpa"): ["any.dim"],
         ("vit", "sdpa"): ["any.dim"], ("whisper", "sdpa"): ["any.dim"],
         ("gpt2", "eager"): ["cumsum", "index.Tensor"], ("llama", "eager"): ["cumsum", "index.Tensor"]}


def _skip_without_ops(name, attention):
    missing = [op for op in NEEDS.get((name, attention), []) if op not in ops.REGISTRY]
    if missing:
        pytest.skip(f"needs aten.{', aten.'.join(missing)}")


def assert_matches(outputs, reference, what: str):
    """Every output within 1e-4 x max(1, max|reference|) of torch's (NaN or inf where torch's is finite fails)."""
    refs = [r.detach().numpy() for r in pytree.tree_leaves(reference) if isinstance(r, torch.Tensor)]
    outs = [np.asarray(o) for o in pytree.tree_leaves(outputs) if isinstance(o, (np.ndarray, torch.Tensor))]
    assert len(outs) == len(refs) > 0, f"{what}: {len(outs)} outputs, torch gives {len(refs)}"
    for k, (o, r) in enumerate(zip(outs, refs)):
        assert o.shape == r.shape and o.dtype == r.dtype, f"{what} output {k}: {o.dtype}{o.shape} != {r.dtype}{r.shape}"
        assert np.isfinite(r).all()
        bound = 1e-4 * max(1.0, float(np.abs(r).max()))
        err = np.abs(o.astype(np.float64) - r)
        worst = "nan" if np.isnan(err).all() else f"{np.nanmax(err):.3g}"
        assert (err <= bound).all(), f"{what} output {k}: error {worst} ({int(np.isnan(err).sum())} NaN) > {bound:.3g}"


MODELS = ["bert", "gpt2", "llama", "t5", "vit", "whisper"]


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("name", MODELS)
def test_from_torch_matches_torch(name, attention):
    _skip_without_ops(name, attention)
    model, args = make(name, attention)
    with torch.no_grad():
        want = model(*args)
    compiled = tl.from_torch(model, args)
    assert_matches(compiled(*[a.numpy() for a in args]), want, f"{name} ({attention})")


@pytest.mark.parametrize("name", MODELS)
def test_torch_compile_matches_torch(name):
    _skip_without_ops(name, "sdpa")
    import torch._dynamo
    torch._dynamo.reset()  # no cached graph: the whole model goes through the backend (fullgraph: in one graph)
    model, args = make(name, "sdpa")
    with torch.no_grad():
        want = model(*args)
        got = torch.compile(model, backend="tensorlang", fullgraph=True)(*args)
    assert_matches(got, want, f"{name} through torch.compile")


def test_the_comparison_can_fail():
    """A model compiled before one of its weights changed no longer matches (the check is not vacuous)."""
    model, args = make("bert", "eager")
    compiled = tl.from_torch(model, args)
    with torch.no_grad():
        model.encoder.layer[0].output.dense.weight[0, 0] += 1.0
        want = model(*args)
    with pytest.raises(AssertionError, match="output 0: error"):
        assert_matches(compiled(*[a.numpy() for a in args]), want, "bert")


def test_an_out_of_range_token_is_an_index_error():
    model, args = make("bert", "eager")
    compiled = tl.from_torch(model, args)
    ids = args[0].numpy().copy()
    ids[0, 3] = 100
    with pytest.raises(tl.IndexError, match=r"BertModel: nodes? embedding\w* \(embedding\).* at modeling_bert.py:\d+: "
                                            r".*index 100 is out of range for dimension 0 of in\d+ = "
                                            r"embeddings_word_embeddings_weight \(size 100\)"):
        compiled(ids)
