"""The models of issue 56's zoo, with random weights (no downloads), batch 1, fp32, in eval mode: every named
torchvision classifier, the timm models and the Hugging Face transformers (random init from config classes,
sequence 128; GPT-2 and Llama with ``use_cache=False``, whose cache is not an exportable output), and the small
models the suite's zoo tests use. `build(name)` gives ``(module, example_args)``; `import_torchvision()` imports
torchvision beside a CPU torch.

Install (torchvision's wheel names a torch of its own, and links a CUDA libtorch whose ``_C.so`` does not load
beside the CPU torch: the classifiers never call its ops, so only the ``nms`` schemas are defined here)::

    pip install torchvision==0.28.0 --no-deps
    printf 'torch==2.13.0\\n' > pin.txt; pip install -c pin.txt timm transformers

Example::

    module, args = build("mobilenet_v3_small")
    y = module(*args)
"""
from __future__ import annotations

import sys

TORCHVISION = ["alexnet", "vgg11", "resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2", "densenet121",
               "googlenet", "inception_v3", "squeezenet1_1", "shufflenet_v2_x1_0", "mobilenet_v2", "mobilenet_v3_small",
               "mobilenet_v3_large", "mnasnet0_5", "efficientnet_b0", "efficientnet_v2_s", "regnet_x_400mf",
               "regnet_y_400mf", "convnext_tiny", "vit_b_16", "swin_t", "maxvit_t"]
TIMM = ["resnet18", "efficientnet_lite0", "mobilenetv3_large_100", "convnext_atto", "vit_tiny_patch16_224",
        "mixer_s16_224", "regnetx_002"]
HF = ["bert", "gpt2", "llama", "t5", "vit", "whisper"]
#: every named model: torchvision's by name, timm's as timm_NAME, Hugging Face's as hf_NAME
NAMES = TORCHVISION + [f"timm_{n}" for n in TIMM] + [f"hf_{n}" for n in HF]

_schemas = []  # the torch.library that defines torchvision's nms schemas lives as long as the process


def import_torchvision():
    """torchvision, imported beside a CPU torch: where its compiled ops do not load (`torchvision::nms does not
    exist`), the ``nms`` and ``qnms`` schemas are defined first (the classifiers never call them). ImportError
    where torchvision is not installed.

    Example::

        tv = import_torchvision()
        net = tv.models.resnet18(weights=None)
    """
    import torch
    try:
        import torchvision
        return torchvision
    except RuntimeError as e:
        if "nms" not in str(e):
            raise
    for k in [k for k in sys.modules if k == "torchvision" or k.startswith("torchvision.")]:
        del sys.modules[k]
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _schemas.append(lib)
    import torchvision
    return torchvision


def family(name: str) -> str:
    """'torchvision', 'timm', 'hf' or 'toy' for a model name.

    >>> family("timm_resnet18"), family("hf_bert"), family("resnet18")
    ('timm', 'hf', 'torchvision')
    """
    if name.startswith("timm_"):
        return "timm"
    if name.startswith("hf_"):
        return "hf"
    return "toy" if name.startswith("toy_") else "torchvision"


def build(name: str, size: int | None = None, seed: int = 0):
    """(module in eval mode, example args) of model `name` (see NAMES; `size` overrides an image model's input
    height and width), random weights drawn with `seed`. Weights that a model initialises to zeros (ViT's head, its
    class token) are drawn too, so that no output is zero whatever the layers before it compute, and batch norms get
    the running statistics of a batch of eight other random inputs (as a trained model's describe its activations:
    other than 0 and 1, so that folding them into convolutions changes something, and the activations stay of the
    order of 1 instead of growing layer after layer, to 1e12 in Inception v3, which would leave every output but the
    largest unchecked by a tolerance relative to the largest).

    Example::

        module, args = build("timm_convnext_atto", size=64)
    """
    module, args = _build(name, size, seed)
    _no_zero_weights(module, seed)
    _calibrate_batch_norms(module, args, seed)
    return module, args


def _no_zero_weights(module, seed: int) -> None:
    import torch
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if (p.dim() >= 2 or name.endswith("weight")) and p.numel() and not p.any():
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)


def _calibrate_batch_norms(module, args, seed: int) -> None:
    """Each batch norm's running statistics set to those of its input on a batch of eight random inputs shaped as
    `args` (the rest of the module in eval mode)."""
    import torch
    norms = [m for m in module.modules()
             if isinstance(m, torch.nn.modules.batchnorm._BatchNorm) and m.track_running_stats]
    if not norms:
        return
    g = torch.Generator().manual_seed(seed + 1)
    batch = tuple(torch.randn((8, *a.shape[1:]), generator=g) for a in args)
    momenta = [m.momentum for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None  # a cumulative average: after one batch, its statistics
        m.train()
    try:
        with torch.no_grad():
            module(*batch)
    finally:
        for m, momentum in zip(norms, momenta):
            m.momentum = momentum
            m.eval()


def _build(name: str, size: int | None, seed: int):
    import torch
    torch.manual_seed(seed)
    fam = family(name)
    if fam == "torchvision":
        tv = import_torchvision()
        if name not in TORCHVISION:
            raise KeyError(f"unknown model {name!r}")
        module = getattr(tv.models, name)(weights=None)
        s = size or (299 if name == "inception_v3" else 224)
        return module.eval(), (torch.randn(1, 3, s, s),)
    if fam == "timm":
        import_torchvision()  # timm imports it
        import timm
        module = timm.create_model(name[len("timm_"):], pretrained=False)
        s = size or 224
        return module.eval(), (torch.randn(1, 3, s, s),)
    if fam == "hf":
        return _hf(name[len("hf_"):])
    return TOYS[name](size)


def _hf(kind: str):
    import torch
    try:
        import_torchvision()  # transformers imports it where installed
    except ImportError:
        pass
    import transformers as T
    ids = torch.randint(0, 1000, (1, 128))
    if kind == "bert":
        return T.BertModel(T.BertConfig()).eval(), (ids,)
    if kind == "gpt2":
        return T.GPT2Model(T.GPT2Config(use_cache=False)).eval(), (ids,)
    if kind == "llama":
        return T.LlamaModel(T.LlamaConfig(hidden_size=512, num_hidden_layers=8, num_attention_heads=8,
                                          intermediate_size=1376, vocab_size=32000, use_cache=False)).eval(), (ids,)
    if kind == "t5":
        cfg = T.T5Config.from_dict({"d_model": 512, "d_ff": 2048, "num_layers": 6, "num_heads": 8,
                                    "vocab_size": 32128, "d_kv": 64})
        return T.T5EncoderModel(cfg).eval(), (ids,)
    if kind == "vit":
        return T.ViTModel(T.ViTConfig()).eval(), (torch.randn(1, 3, 224, 224),)
    if kind == "whisper":
        cfg = T.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, decoder_layers=4,
                              decoder_attention_heads=6, num_mel_bins=80)
        return T.WhisperModel(cfg).get_encoder().eval(), (torch.randn(1, 80, 3000),)
    raise KeyError(f"unknown model hf_{kind!r}")


def _toy_transformer(size):
    """A patch embedding, one shifted-window Swin block and one ViT encoder block from torchvision's own building
    blocks (roll, the shifted-window mask, the relative position bias gathered through its index, multi-head
    attention with its mask checks), small enough for the suite."""
    import torch
    from torch import nn
    import_torchvision()
    from torchvision.models.swin_transformer import SwinTransformerBlock
    from torchvision.models.vision_transformer import EncoderBlock
    s = size or 32

    class Toy(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv2d(3, 16, 4, stride=4)
            self.swin = SwinTransformerBlock(16, 2, window_size=[4, 4], shift_size=[2, 2], stochastic_depth_prob=0.0)
            self.vit = EncoderBlock(2, 16, 32, 0.0, 0.0)
            self.head = nn.Linear(16, 10)

        def forward(self, x):
            y = self.swin(self.embed(x).permute(0, 2, 3, 1))
            y = self.vit(y.flatten(1, 2))
            return self.head(y.mean(1))
    return Toy().eval(), (torch.randn(1, 3, s, s),)


TOYS = {"toy_swin_vit": _toy_transformer}
