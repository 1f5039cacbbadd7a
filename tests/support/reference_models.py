"""Reference PyTorch models for the graph compiler's tests and `benchmarks/models.py`: the PyTorch examples'
MNIST net, ResNet-18 and MobileNetV2 (written here in plain torch: torchvision does not install beside
torch==2.13.0), a BERT-base encoder layer and a recurrent net over a list of inputs.

Each `make_*` returns (module in eval mode with seeded weights, example inputs as a tuple). Batch norm layers
get random running statistics, so that folding them into convolutions is tested on something other than the
identity.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class MNISTNet(nn.Module):
    """The network of pytorch/examples mnist/main.py."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return F.log_softmax(self.fc2(x), dim=1)


class BasicBlock(nn.Module):
    """ResNet's two 3x3 convolutions with a shortcut."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    """ResNet-18 as torchvision defines it (ImageNet head: 1000 classes)."""

    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.layers(x)
        x = F.adaptive_avg_pool2d(x, 1)
        return self.fc(torch.flatten(x, 1))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expansion, 3x3 depthwise, 1x1 projection, ReLU6, shortcut when shapes agree."""

    def __init__(self, cin, cout, stride, expand):
        super().__init__()
        hidden = cin * expand
        layers = []
        if expand != 1:
            layers += [nn.Conv2d(cin, hidden, 1, bias=False), nn.BatchNorm2d(hidden), nn.ReLU6()]
        layers += [nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False), nn.BatchNorm2d(hidden),
                   nn.ReLU6(), nn.Conv2d(hidden, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)
        self.shortcut = stride == 1 and cin == cout

    def forward(self, x):
        return x + self.body(x) if self.shortcut else self.body(x)


class MobileNetV2(nn.Module):
    """MobileNetV2 (width 1.0) as torchvision defines it."""

    def __init__(self, classes=1000):
        super().__init__()
        settings = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                    (6, 320, 1, 1))
        layers = [nn.Conv2d(3, 32, 3, 2, 1, bias=False), nn.BatchNorm2d(32), nn.ReLU6()]
        cin = 32
        for t, c, n, s in settings:
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += [nn.Conv2d(cin, 1280, 1, bias=False), nn.BatchNorm2d(1280), nn.ReLU6()]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, classes))

    def forward(self, x):
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


class BertLayer(nn.Module):
    """A BERT-base encoder layer: 12-head self-attention and a GELU feed-forward, post-layer-norm."""

    def __init__(self, d=768, heads=12, ff=3072):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.f1, self.f2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        b, s, d = x.shape
        h, dh = self.heads, d // self.heads
        q = self.q(x).view(b, s, h, dh).transpose(1, 2)
        k = self.k(x).view(b, s, h, dh).transpose(1, 2)
        v = self.v(x).view(b, s, h, dh).transpose(1, 2)
        a = self.drop(torch.softmax(q @ k.transpose(-1, -2) / dh ** 0.5, dim=-1))
        c = (a @ v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.drop(self.o(c)))
        return self.ln2(x + self.drop(self.f2(F.gelu(self.f1(x)))))


class RecurrentNet(nn.Module):
    """Linear + sigmoid unrolled over a list of steps: h = sigmoid(W x_t + U h); returns (last h, every h)."""

    def __init__(self, d_in=32, d_hidden=64):
        super().__init__()
        self.w = nn.Linear(d_in, d_hidden)
        self.u = nn.Linear(d_hidden, d_hidden, bias=False)
        self.d_hidden = d_hidden

    def forward(self, xs):
        h = torch.zeros(xs[0].shape[0], self.d_hidden)
        outs = []
        for x in xs:
            h = torch.sigmoid(self.w(x) + self.u(h))
            outs.append(h)
        return h, torch.stack(outs, 1)


def _randomise_batch_norms(module: nn.Module, gen: torch.Generator) -> None:
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
            m.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.weight.data.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
            m.bias.data.copy_(torch.randn(c, generator=gen) * 0.1)


def _seeded(cls, seed, *args, **kwargs):
    torch.manual_seed(seed)
    m = cls(*args, **kwargs)
    _randomise_batch_norms(m, torch.Generator().manual_seed(seed))
    return m.eval()


def make_mnist(batch=1, seed=0):
    """The MNIST net and one batch of 1x28x28 images."""
    m = _seeded(MNISTNet, seed)
    return m, (torch.randn(batch, 1, 28, 28, generator=torch.Generator().manual_seed(seed + 1)),)


def make_resnet18(batch=1, size=224, seed=0, classes=1000):
    """ResNet-18 and a batch of 3 x size x size images."""
    m = _seeded(ResNet18, seed, classes=classes)
    return m, (torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed + 1)),)


def make_mobilenet_v2(batch=1, size=224, seed=0, classes=1000):
    """MobileNetV2 and a batch of 3 x size x size images."""
    m = _seeded(MobileNetV2, seed, classes=classes)
    return m, (torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed + 1)),)


def make_bert_layer(batch=1, seq=128, seed=0):
    """A BERT-base encoder layer (768 wide, 12 heads) and a batch of `seq` token vectors."""
    m = _seeded(BertLayer, seed)
    return m, (torch.randn(batch, seq, 768, generator=torch.Generator().manual_seed(seed + 1)),)


def make_recurrent(batch=4, steps=10, seed=0):
    """The recurrent net and a list of `steps` inputs of [batch, 32]."""
    m = _seeded(RecurrentNet, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    return m, ([torch.randn(batch, 32, generator=gen) for _ in range(steps)],)


MODELS = {"mnist": make_mnist, "resnet18": make_resnet18, "mobilenet_v2": make_mobilenet_v2,
          "bert_layer": make_bert_layer, "recurrent": make_recurrent}
