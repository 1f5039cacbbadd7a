"""Where a model's time goes: one typed row per kernel call (`KernelRow`: its op category, FLOPs, bytes moved,
time, speed, and the share of the FMA peak or of the memory bandwidth, whichever bounds it), and the roll-up of
the times by op category. `Model.summary()` prints these rows; benchmarks read them as JSON (`KernelRow.as_dict`).

The categories are named by what a kernel computes, so that another runtime's profile (onnxruntime's, in
benchmarks/ort_profile.py) sums into the same ones: `conv_category` and `reduction_category` decide from shapes
alone, which both sides have.

>>> rows = [KernelRow("c", "convolution", "conv", "f32[1, 8, 4, 4]", "auto", 2000, 1000, 1e-6),
...         KernelRow("r", "relu", "elementwise", "f32[1, 8, 4, 4]", "auto", 128, 1024, 1e-6)]
>>> by_category(rows)
{'conv': 1e-06, 'elementwise': 1e-06}
>>> [r.bound for r in with_ceilings(rows, peak_gflops=100.0, bandwidth_gbps=10.0)]
['memory', 'memory']
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..errors import UsageError
from . import ops

#: The op categories, in the order tables list them.
CATEGORIES = ("conv", "depthwise conv", "1x1 conv/GEMM", "matmul", "elementwise", "pooling", "norm",
              "softmax/attention", "layout/copy", "other")

# which member names a fused kernel: the first category of this order among its nodes' (an anchor's epilogue is
# the anchor's; a copy that also computes is elementwise)
_PRIORITY = ("conv", "depthwise conv", "1x1 conv/GEMM", "matmul", "pooling", "softmax/attention", "norm", "other",
             "elementwise", "layout/copy")

_MATMULS = {"mm", "bmm", "addmm", "baddbmm"}
_WINOGRAD = {"winograd_input", "winograd_output"}


def conv_category(weight_shape, in_channels: int) -> str:
    """The category of a convolution from its weight shape [F, C/groups, k...] and its input's channel count:
    "depthwise conv" (one input channel per group, several channels), "1x1 conv/GEMM" (every kernel dim 1) or
    "conv".

    >>> conv_category((32, 1, 3, 3), 32), conv_category((64, 32, 1, 1), 32), conv_category((16, 3, 3, 3), 3)
    ('depthwise conv', '1x1 conv/GEMM', 'conv')
    """
    weight_shape = tuple(weight_shape)
    if len(weight_shape) >= 3 and weight_shape[1] == 1 and in_channels > 1:
        return "depthwise conv"
    if all(k == 1 for k in weight_shape[2:]):
        return "1x1 conv/GEMM"
    return "conv"


def reduction_category(in_shape, out_shape) -> str:
    """"pooling" for a reduction of an image [N, C, H, W] over its whole H and W (a global average pool written as
    a mean), "other" for any other reduction.

    >>> reduction_category((1, 64, 7, 7), (1, 64, 1, 1)), reduction_category((1, 128, 768), (1, 128, 1))
    ('pooling', 'other')
    """
    in_shape, out_shape = tuple(in_shape), tuple(out_shape)
    if len(in_shape) == 4 and out_shape in (in_shape[:2], in_shape[:2] + (1, 1)) and in_shape[2] * in_shape[3] > 1:
        return "pooling"
    return "other"


def node_category(node, outer=None) -> str:
    """The category of one graph node (not a fused one: see `kernel_category`); `outer` maps the uid of a fused
    body's input to the value it stands for (whether a matrix product's operand is a weight).

    >>> from tensorlang.graph.ir import Node, Value, TensorType
    >>> x, w = Value("x", TensorType((1, 8, 6, 6), "f32")), Value("w", TensorType((8, 1, 3, 3), "f32"))
    >>> node_category(Node("convolution", [x, w, None], {"groups": 8}, [])), node_category(Node("relu", [x], {}, []))
    ('depthwise conv', 'elementwise')
    """
    op = node.op
    d = ops.REGISTRY.get(op)
    if op == "convolution":
        return "conv" if node.attrs.get("transposed") else conv_category(node.inputs[1].shape, node.inputs[0].shape[1])
    if op == "convolution_blocked":  # weight [F/b, C/b, R, S, b, b], depthwise [C/b, R, S, b]
        w = node.inputs[1].shape
        return "depthwise conv" if node.attrs.get("depthwise") else "1x1 conv/GEMM" if w[2:4] == (1, 1) else "conv"
    if op in _WINOGRAD:
        return "conv"
    if op in _MATMULS:
        a, b = ((outer or {}).get(v.uid, v) for v in node.inputs[-2:])
        producer = b.producer.op if b.producer is not None else ""
        if producer == "winograd_input":  # the products of a convolution written as Winograd's
            return "conv"
        return "1x1 conv/GEMM" if a.is_constant or b.is_constant else "matmul"
    if op in ("_softmax", "_log_softmax"):
        return "softmax/attention"
    family = d.family if d is not None else ""
    if family == "normalisation":
        return "norm"
    if family == "pooling":
        return "pooling"
    if family == "reduction":
        return reduction_category(node.inputs[0].shape, node.outputs[0].shape)
    if family in ("layout", "index", "view", "creation") or op in ("layout_to_blocked", "layout_from_blocked"):
        return "layout/copy"
    if d is not None and d.kind == "elementwise":
        return "elementwise"
    return "other"


def kernel_category(node) -> str:
    """The category of the kernel that computes `node`; for a fused node, the first of its members' categories in
    the order anchors, pooling, softmax, norms, other, elementwise, copies.

    >>> import numpy as np
    >>> from tensorlang.graph.ir import Graph, TensorType
    >>> g = Graph("m"); x = g.add_input("x", TensorType((1, 8, 6, 6), "f32"))
    >>> w = g.add_constant("w", np.zeros((4, 8, 3, 3), np.float32))
    >>> kernel_category(g.add_node("convolution", [x, w, None], {}, [TensorType((1, 4, 4, 4), "f32")]))
    'conv'
    """
    if node.body is None:
        return node_category(node)
    outer = dict(zip((v.uid for v in node.body.inputs), node.inputs))
    found = {node_category(n, outer) for n in node.body.nodes
             if ops.REGISTRY.get(n.op) is None or ops.REGISTRY[n.op].kind != "view"}
    return next((c for c in _PRIORITY if c in found), "layout/copy")


@dataclass(frozen=True)
class KernelRow:
    """One kernel call of a model: the node that names it, its ops, category (one of `CATEGORIES`), output type,
    schedule source, FLOPs, bytes moved (its inputs, weights included, and outputs, each once) and, where profiled,
    its seconds; with the machine's ceilings (`with_ceilings`), what bounds it ("compute": its arithmetic intensity
    is at least the machine balance, peak / bandwidth; else "memory") and its share of that ceiling.

    >>> r = KernelRow("mm", "mm", "matmul", "f32[64, 64]", "auto", 2 * 64 ** 3, 3 * 4 * 64 * 64, 1e-5)
    >>> round(r.gflops, 1), round(r.gbps, 2), round(r.intensity, 2)
    (52.4, 4.92, 10.67)
    """

    node: str
    ops: str
    category: str
    output: str
    schedule: str
    flops: int
    bytes: int
    seconds: float | None = None
    bound: str | None = None
    share: float | None = None  # of the FMA peak (bound "compute") or of the memory bandwidth ("memory")

    @property
    def gflops(self) -> float | None:
        """FLOPs per second / 1e9 (None without a time)."""
        return self.flops / self.seconds / 1e9 if self.seconds else None

    @property
    def gbps(self) -> float | None:
        """Bytes moved per second / 1e9 (None without a time)."""
        return self.bytes / self.seconds / 1e9 if self.seconds else None

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved."""
        return self.flops / self.bytes if self.bytes else 0.0

    def as_dict(self) -> dict:
        """The row's fields and speeds, for JSON.

        >>> sorted(KernelRow("n", "relu", "elementwise", "f32[2]", "auto", 2, 16).as_dict())[:4]
        ['bound', 'bytes', 'category', 'flops']
        """
        return {**dataclasses.asdict(self), "gflops": self.gflops, "gbps": self.gbps, "intensity": self.intensity}


def with_ceilings(rows: list[KernelRow], peak_gflops: float, bandwidth_gbps: float) -> list[KernelRow]:
    """The timed rows with `bound` and `share` set against the machine's FMA peak (GFLOPS) and memory bandwidth
    (GB/s), both as measured for the thread count the times were taken with.

    >>> r = KernelRow("mm", "mm", "matmul", "f32[64, 64]", "auto", 2 * 64 ** 3, 3 * 4 * 64 * 64, 1e-5)
    >>> r = with_ceilings([r], peak_gflops=100.0, bandwidth_gbps=20.0)[0]
    >>> r.bound, round(r.share, 2)
    ('compute', 0.52)
    """
    if not (peak_gflops > 0 and bandwidth_gbps > 0):
        raise UsageError(f"the FMA peak ({peak_gflops} GFLOPS) and the memory bandwidth ({bandwidth_gbps} GB/s) "
                         "must both be positive")
    balance = peak_gflops / bandwidth_gbps
    out = []
    for r in rows:
        if not r.seconds:
            out.append(r)
            continue
        compute = r.intensity >= balance
        share = r.flops / r.seconds / 1e9 / peak_gflops if compute else r.bytes / r.seconds / 1e9 / bandwidth_gbps
        out.append(dataclasses.replace(r, bound="compute" if compute else "memory", share=share))
    return out


def by_category(rows: list[KernelRow]) -> dict[str, float]:
    """Seconds per category (those with any time), in `CATEGORIES` order; they sum to the rows' total.

    >>> by_category([KernelRow("a", "relu", "elementwise", "", "", 0, 0, 2e-3),
    ...              KernelRow("b", "cat", "layout/copy", "", "", 0, 0, 1e-3),
    ...              KernelRow("c", "exp", "elementwise", "", "", 0, 0, 1e-3)])
    {'elementwise': 0.003, 'layout/copy': 0.001}
    """
    sums = {c: 0.0 for c in CATEGORIES}
    for r in rows:
        sums[r.category] += r.seconds or 0.0
    return {c: s for c, s in sums.items() if s > 0}


def table(rows: list[KernelRow]) -> list[str]:
    """The rows as aligned text lines (a header first), then one line of the time per category where timed.

    >>> print("\\n".join(table([KernelRow("n", "relu", "elementwise", "f32[2]", "auto", 2, 16)])))
    node  ops   category     output  schedule  MFLOP  MB
    n     relu  elementwise  f32[2]  auto      0.00   0.00
    """
    timed = any(r.seconds for r in rows)
    bounded = any(r.bound for r in rows)
    total = sum(r.seconds or 0.0 for r in rows)
    cells = [("node", "ops", "category", "output", "schedule", "MFLOP", "MB")
             + (("time", "share", "GFLOPS", "GB/s") if timed else ()) + (("bound", "of ceiling") if bounded else ())]
    for r in rows:
        row: tuple[str, ...] = (r.node, r.ops[:48], r.category, r.output, r.schedule, f"{r.flops / 1e6:.2f}",
                                f"{r.bytes / 1e6:.2f}")
        if timed:
            s = r.seconds or 0.0
            row += (f"{s * 1e3:.3f} ms", f"{100 * s / total:.1f}%" if total else "-", f"{r.gflops:.2f}",
                    f"{r.gbps:.2f}") if s else ("-",) * 4
        if bounded:
            row += (r.bound, f"{100 * r.share:.1f}%") if r.bound and r.share is not None else ("-", "-")
        cells.append(row)
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    if timed:
        lines.append("by category: " + ", ".join(f"{c} {s * 1e3:.3f} ms ({100 * s / total:.1f}%)"
                                                 for c, s in by_category(rows).items()))
    return lines
