"""Models that take 8-bit images and hold small integer constants: a uint8 input converted as the first op
(`x.float() / 255`, `x.to(torch.float32)`, ONNX `Cast`), int8 and int16 weights dequantized by a cast, a uint8
output made by a cast; torch eager and onnxruntime are the oracles. Computing in those types is refused, naming
the node."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tensorlang as tl  # noqa: E402
from tensorlang.errors import UsageError  # noqa: E402

RNG = np.random.default_rng(59)


class ImageNet(torch.nn.Module):
    """An HWC uint8 image, permuted to CHW and scaled to [0, 1], through a conv whose weights are int8 with a
    per-channel scale and whose bias is int16 (a quantized layer, dequantized by casts), to a uint8 image."""

    def __init__(self, first_op: str):
        super().__init__()
        self.first_op = first_op
        gen = torch.Generator().manual_seed(59)
        self.register_buffer("w8", torch.randint(-128, 128, (4, 3, 3, 3), generator=gen, dtype=torch.int8))
        self.register_buffer("b16", torch.randint(-3000, 3000, (4,), generator=gen, dtype=torch.int16))
        self.scale = torch.nn.Parameter(torch.rand(4, 1, 1, 1, generator=gen) / 64)

    def forward(self, img):
        x = img.permute(0, 3, 1, 2)
        x = x.float() / 255 if self.first_op == "float" else x.to(torch.float32) * (1 / 255)
        y = torch.nn.functional.conv2d(x, self.w8.float() * self.scale, self.b16.float() / 1000, padding=1)
        probs = torch.sigmoid(y)
        return (probs * 255).to(torch.uint8), y.mean(dim=(2, 3))


def _image(n=2, h=9, w=7):
    return torch.from_numpy(RNG.integers(0, 256, (n, h, w, 3), dtype=np.uint8))


def _check_eager(module, img, model):
    with torch.no_grad():
        want_u8, want_f = (t.numpy() for t in module(img))
    got_u8, got_f = model(img.numpy())
    assert got_u8.dtype == np.uint8 and got_u8.shape == want_u8.shape
    # the uint8 output truncates sigmoid * 255: an element one rounding away from an integer may differ by 1
    assert np.max(np.abs(got_u8.astype(np.int32) - want_u8.astype(np.int32))) <= 1
    assert np.mean(got_u8 == want_u8) > 0.97
    assert got_f.dtype == np.float32 and got_f.shape == want_f.shape
    err = np.abs(got_f.astype(np.float64) - want_f)
    assert np.all(err <= 1e-4 * max(1.0, float(np.max(np.abs(want_f))))), float(np.max(err))  # False on NaN


@pytest.mark.parametrize("first_op", ["float", "to"])
def test_torch_model_with_a_uint8_image_input_and_int8_int16_constants(first_op):
    module = ImageNet(first_op).eval()
    img = _image()
    model = tl.from_torch(module, (img,))
    assert model.graph.inputs[0].type.dtype == "u8"
    _check_eager(module, img, model)
    with pytest.raises(tl.BuildError, match="uint8"):  # the input's dtype is checked, as for any input
        model(img.numpy().astype(np.float32))


def test_torch_model_computing_in_uint8_is_refused_naming_the_node():
    class Brighten(torch.nn.Module):
        def forward(self, img):
            return (img + 10).float()  # u8 arithmetic (wrapping) before the cast

    with pytest.raises(UsageError, match=r"add\.Tensor \(node add.*\): computes in u8; .*convert first"):
        tl.from_torch(Brighten().eval(), (_image(),))


# ---- ONNX, with onnxruntime as the oracle --------------------------------------------------------------------------
onnx_mark = pytest.mark.skipif(not all(__import__("importlib").util.find_spec(m) for m in ("onnx", "onnxruntime")),
                               reason="needs onnx and onnxruntime")


def _ort(model_bytes: bytes, feeds: dict):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(model_bytes, so, providers=["CPUExecutionProvider"]).run(None, feeds)


@onnx_mark
def test_onnx_export_of_the_uint8_model_against_onnxruntime(tmp_path):
    import warnings
    module = ImageNet("float").eval()
    img = _image()
    path = tmp_path / "image.onnx"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (img,), str(path), dynamo=False, opset_version=17, input_names=["img"])
    want_u8, want_f = _ort(path.read_bytes(), {"img": img.numpy()})
    model = tl.from_onnx(str(path))
    assert model.graph.inputs[0].type.dtype == "u8"
    got_u8, got_f = model(img.numpy())
    assert got_u8.dtype == np.uint8 and got_u8.shape == want_u8.shape
    assert np.max(np.abs(got_u8.astype(np.int32) - want_u8.astype(np.int32))) <= 1
    assert np.mean(got_u8 == want_u8) > 0.97
    err = np.abs(got_f.astype(np.float64) - want_f)
    assert np.all(err <= 1e-4 * max(1.0, float(np.max(np.abs(want_f))))), float(np.max(err))


def _onnx_model(nodes, inits):
    from onnx import TensorProto, helper
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [2, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@onnx_mark
def test_onnx_cast_from_uint8_and_int8_int16_initializers_exactly():
    from onnx import TensorProto, helper, numpy_helper
    w8 = RNG.integers(-128, 128, (2, 5), dtype=np.int8)
    b16 = RNG.integers(-32768, 32768, (5,), dtype=np.int16)
    nodes = [helper.make_node("Cast", ["x"], ["xf"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["w8"], ["wf"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["b16"], ["bf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["xf", "wf"], ["p"]), helper.make_node("Add", ["p", "bf"], ["y"])]
    model = _onnx_model(nodes, [numpy_helper.from_array(w8, "w8"), numpy_helper.from_array(b16, "b16")])
    x = np.array([[0, 1, 127, 128, 255], [254, 3, 200, 64, 9]], np.uint8)
    (want,) = _ort(model.SerializeToString(), {"x": x})
    got = tl.from_onnx(model)(x)
    np.testing.assert_array_equal(got, want)  # products of small integers plus an integer: exact in f32


@onnx_mark
def test_onnx_arithmetic_in_uint8_is_refused():
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Add", ["x", "x"], ["s"]), helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)]
    with pytest.raises(UsageError, match=r"computes in u8; .*convert first"):
        tl.from_onnx(_onnx_model(nodes, []))


def test_the_uint8_model_exported_to_c_runs_and_matches(tmp_path):
    """The C export: uint8_t and int8_t buffers, the example program's uint8 inputs (its numbers wrapped, as numpy's
    astype) and its printout of a uint8 output (unsigned: 200 prints as 200)."""
    import subprocess

    from tensorlang.export import example_inputs
    from tensorlang.graph.export import build_command

    module = ImageNet("float").eval()
    model = tl.from_torch(module, (_image(1, 5, 4),))
    model.export(tmp_path, format="c", name="img")
    header = (tmp_path / "img.h").read_text()
    assert "const uint8_t *" in header and "uint8_t *" in header
    r = subprocess.run(f"{build_command('img', 'c')} && ./img_example outputs.bin", shell=True, cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    (x,) = example_inputs({"inputs": [{"shape": list(v.shape), "dtype": v.dtype} for v in model.graph.inputs]})
    assert x.dtype == np.uint8 and x.min() < 20 and x.max() > 240  # -11 .. 11 wrapped
    want_u8, want_f = model(x)
    raw = (tmp_path / "outputs.bin").read_bytes()
    np.testing.assert_array_equal(np.frombuffer(raw[:want_u8.nbytes], np.uint8).reshape(want_u8.shape), want_u8)
    np.testing.assert_allclose(np.frombuffer(raw[want_u8.nbytes:], np.float32).reshape(want_f.shape), want_f,
                               rtol=1e-5, atol=1e-5)
    first = [float(v) for v in r.stdout.splitlines()[1].split("first")[1].split()]
    assert first == want_u8.reshape(-1)[:4].astype(float).tolist() and want_u8.max() > 127, r.stdout
