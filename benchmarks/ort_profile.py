"""onnxruntime's own profile of a model, in the op categories of tensorlang's (``tensorlang.graph.profile``): an
``InferenceSession`` with ``enable_profiling`` and ``intra_op_num_threads`` set runs the model (warm-up calls
first), and the JSON trace it writes is read back: each node's kernel time in each timed run (the runs' events
``model_run``, the nodes' ``*_kernel_time``, whose ``args`` name the op type and the input and output shapes), the
median per node over the timed runs (as ``Model.profile`` takes each kernel's), summed by category and by op type.

Example::

    p = profile_onnx("resnet18.onnx", [x], threads=2, calls=25)
    p["by_category"]    # {'conv': 0.0061, '1x1 conv/GEMM': 0.0004, 'pooling': 0.0002, ...} seconds per call
"""
from __future__ import annotations

import json
import os
import statistics
import tempfile
import time

from tensorlang.graph.profile import CATEGORIES, conv_category, reduction_category

_CONV = {"Conv", "FusedConv", "NhwcConv", "NhwcFusedConv"}
_GEMM = {"Gemm", "FusedGemm"}
_MATMUL = {"MatMul", "FusedMatMul"}
_ATTENTION = {"Softmax", "LogSoftmax", "Attention", "MultiHeadAttention", "GroupQueryAttention"}
_NORM = {"BatchNormalization", "LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization",
         "SkipSimplifiedLayerNormalization", "InstanceNormalization", "GroupNorm", "GroupNormalization",
         "LpNormalization", "RMSNormalization", "EmbedLayerNormalization"}
_POOL = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool"}
_LAYOUT = {"Transpose", "Reshape", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND", "Squeeze",
           "Unsqueeze", "Flatten", "Identity", "Expand", "Pad", "Tile", "ReorderInput", "ReorderOutput", "Shape",
           "ConstantOfShape", "Range", "ScatterND", "ScatterElements", "Dropout", "DepthToSpace", "SpaceToDepth",
           "Trilu", "CumSum"}
_ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Reciprocal", "Relu", "LeakyRelu", "Clip", "Sigmoid",
                "HardSigmoid", "HardSwish", "Tanh", "Erf", "Gelu", "FastGelu", "BiasGelu", "QuickGelu", "Exp", "Log",
                "Neg", "Abs", "Where", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And",
                "Or", "Xor", "Cast", "Max", "Min", "Sum", "Mean", "Softplus", "Elu", "Selu", "Floor", "Ceil", "Round",
                "Sin", "Cos", "IsNaN", "IsInf", "Sign", "Mod", "PRelu", "Mish", "BiasAdd", "BiasSoftmax"}


def op_category(op: str, inputs: list, outputs: list, parameter_bytes: int = 0) -> str:
    """The category (one of ``CATEGORIES``) of an onnxruntime node from its op type, its input and output shapes
    (lists, None where unknown) and the bytes of the initializers it reads: a matrix product with a weight is a
    GEMM, one of two activations a matmul (a weight that onnxruntime packed ahead is missing from the trace's
    inputs, and from its parameter bytes).

    >>> op_category("Conv", [[1, 32, 56, 56], [32, 1, 3, 3], [32]], [[1, 32, 56, 56]])
    'depthwise conv'
    >>> op_category("MatMul", [[1, 128, 768]], [[1, 128, 768]]), op_category("MatMul", [[1, 4, 8], [1, 8, 4]], [])
    ('1x1 conv/GEMM', 'matmul')
    >>> op_category("ReduceMean", [[1, 64, 7, 7]], [[1, 64, 1, 1]]), op_category("Softmax", [], [])
    ('pooling', 'softmax/attention')
    """
    if op in _CONV and len(inputs) > 1 and inputs[0] and inputs[1] and len(inputs[1]) == len(inputs[0]):
        return conv_category(inputs[1], inputs[0][1])
    if op in _CONV or op == "ConvTranspose":
        return "conv"
    if op in _GEMM:
        return "1x1 conv/GEMM"
    if op in _MATMUL:
        return "1x1 conv/GEMM" if parameter_bytes > 0 or len(inputs) < 2 else "matmul"
    if op in _ATTENTION:
        return "softmax/attention"
    if op in _NORM:
        return "norm"
    if op in _POOL:
        return "pooling"
    if op.startswith("Reduce") or op in ("ArgMax", "ArgMin"):
        return reduction_category(inputs[0], outputs[0]) if inputs and outputs and inputs[0] and outputs[0] \
            else "other"
    if op in _LAYOUT:
        return "layout/copy"
    if op in _ELEMENTWISE:
        return "elementwise"
    return "other"


def _shapes(items) -> list:
    """[{"float": [1, 3, 8, 8]}, ...] (a trace's input_type_shape) as [[1, 3, 8, 8], ...]."""
    out = []
    for item in items or []:
        shape = next(iter(item.values()), None) if isinstance(item, dict) else None
        out.append(list(shape) if isinstance(shape, list) else None)
    return out


def read_trace(events: list, warmup: int) -> dict:
    """The profile of a trace's runs after the first `warmup`: {runs, run_s (the median run), kernels_s (the
    nodes' times summed), by_category and by_op (seconds per call), nodes ([{node, op, category, seconds}])}, each
    node's seconds the median over the timed runs of its kernel time in that run.

    >>> ev = [{"cat": "Session", "name": "model_run", "ts": t, "dur": 100} for t in (0, 1000)]
    >>> ev += [{"cat": "Node", "name": "r_kernel_time", "ts": t + 10, "dur": d, "args": {"op_name": "Relu"}}
    ...        for t, d in ((0, 90), (1000, 40))]
    >>> p = read_trace(ev, warmup=1)
    >>> p["runs"], p["by_category"], p["run_s"]
    (1, {'elementwise': 4e-05}, 0.0001)
    """
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: e["ts"])
    if len(runs) <= warmup:
        raise ValueError(f"the onnxruntime trace has {len(runs)} runs (model_run events), {warmup} of them warm-up: "
                         "none to profile")
    timed = runs[warmup:]
    kernels = [e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")]
    per_node: dict[str, list] = {}
    info: dict[str, tuple] = {}
    for k, run in enumerate(timed):
        for e in kernels:
            if run["ts"] <= e["ts"] <= run["ts"] + run["dur"]:
                name = e["name"][:-len("_kernel_time")]
                times = per_node.setdefault(name, [0.0] * len(timed))
                times[k] += e["dur"] / 1e6
                if name not in info:
                    a = e.get("args", {})
                    op = a.get("op_name", "?")
                    category = op_category(op, _shapes(a.get("input_type_shape")), _shapes(a.get("output_type_shape")),
                                           int(a.get("parameter_size", 0) or 0))
                    info[name] = (op, category)
    nodes = [{"node": n, "op": info[n][0], "category": info[n][1], "seconds": statistics.median(t)}
             for n, t in per_node.items()]
    by_category = {c: 0.0 for c in CATEGORIES}
    by_op: dict[str, float] = {}
    for n in nodes:
        by_category[n["category"]] += n["seconds"]
        by_op[n["op"]] = by_op.get(n["op"], 0.0) + n["seconds"]
    return {"runs": len(timed), "run_s": statistics.median(r["dur"] / 1e6 for r in timed),
            "kernels_s": sum(n["seconds"] for n in nodes),
            "by_category": {c: s for c, s in by_category.items() if s > 0},
            "by_op": dict(sorted(by_op.items(), key=lambda kv: -kv[1])), "nodes": nodes}


def profile_onnx(path: str, inputs: list, threads: int, calls: int, warmup: int = 2) -> dict:
    """onnxruntime's profile (`read_trace`) of the ONNX model at `path` on `inputs` (numpy arrays in the model's
    input order): `warmup` untimed calls then `calls` timed ones, in a session with ``intra_op_num_threads`` =
    `threads` and the default graph optimizations; the trace file is removed afterwards. The profiler costs time
    in every node it records, which its node times partly carry (microsoft/onnxruntime#20238), so the same calls
    in a session without it give ``unprofiled_run_s``, their median.

    Example::

        profile_onnx("model.onnx", [x], threads=2, calls=25)["by_op"]    # {'Conv': 0.0042, 'Add': 0.0003, ...}
    """
    import onnxruntime as ort
    if calls < 1:
        raise ValueError(f"calls must be at least 1, got {calls}")

    def session(profile_prefix: str | None):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        if profile_prefix:
            opts.enable_profiling = True
            opts.profile_file_prefix = profile_prefix
        s = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
        return s, {i.name: a for i, a in zip(s.get_inputs(), inputs)}
    plain, feed = session(None)
    seconds = []
    for k in range(warmup + calls):
        t0 = time.perf_counter()
        plain.run(None, feed)
        if k >= warmup:
            seconds.append(time.perf_counter() - t0)
    del plain
    with tempfile.TemporaryDirectory(prefix="tensorlang-ort-profile-") as tmp:
        profiled, feed = session(os.path.join(tmp, "ort"))
        for _ in range(warmup + calls):
            profiled.run(None, feed)
        with open(profiled.end_profiling()) as f:
            events = json.load(f)
    return {**read_trace(events, warmup), "unprofiled_run_s": statistics.median(seconds), "threads": threads}
