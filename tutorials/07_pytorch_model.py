"""Tutorial 7: a PyTorch model, from torch to a C program that runs it with no Python at all.

Run it: `python tutorials/07_pytorch_model.py` (the tests run it too). It needs PyTorch (`pip install
'tensorlang[torch]'`) and a C compiler (`cc`). The network is the one of the PyTorch examples' MNIST
(pytorch/examples, mnist/main.py); its weights here are random, which changes nothing for the compiler.
The same from the command line:

    python -c "import torch; ...; torch.export.save(torch.export.export(net, (x,)), 'mnist.pt2')"
    tensorlang compile mnist.pt2 -o out --format c --print-passes
    tensorlang show-model mnist.pt2 --profile
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError:
    print("this tutorial imports a PyTorch model and needs PyTorch: pip install 'tensorlang[torch]'")
    sys.exit(0)

import tensorlang as tl

if shutil.which("cc") is None:
    print("this tutorial builds a C program and needs a C compiler (cc); install gcc or clang")
    sys.exit(0)


# %% The network
class Net(nn.Module):
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


torch.manual_seed(0)
net = Net().eval()
x = torch.randn(1, 1, 28, 28)

# %% 1. Compile it
# Compile it: torch.export captures the network, its ops become core ATen, the graph passes optimise it
# (dropout is gone in eval mode, the weight transposes of the linear layers are folded, each convolution takes
# its bias and ReLU into one kernel), and each node's tensorlang program is compiled. print_passes=True shows
# what each pass changed (as TENSORLANG_PRINT_PASSES=1 does).
model = tl.from_torch(net, (x,), print_passes=True, out=sys.stdout)
print(model.graph)                         # one line per node, with shapes; fused nodes show what they hold

# %% 2. Run it on numpy arrays
# Run it on numpy arrays: no torch involved. The result is torch's up to rounding.
y = model(x.numpy())
with torch.no_grad():
    want = net(x).numpy()
print("largest difference from torch:", float(np.max(np.abs(y - want))))
assert np.max(np.abs(y - want)) <= 1e-3 * max(1.0, float(np.max(np.abs(want))))

# %% 3. What runs
# What runs: each kernel's program, its schedule's source ("naive", "auto", "hand" or "tuned") and FLOPs; with
# inputs, a profile run adds each kernel's time and GFLOPS.
first = next(n for n in model.graph.nodes if n.op == "fused")
print(model.source(first))                 # the DSL program of the first convolution + bias + ReLU
print(model.summary(x.numpy()))

# %% 4. Save it
# Save it: one file (the graph as JSON, the weights as .npy); tl.load_model needs no torch to read it.
out = tempfile.mkdtemp(prefix="tensorlang-tutorial-")
again = tl.load_model(model.save(os.path.join(out, "mnist.tlm")))
assert np.array_equal(again(x.numpy()), y)

# %% 5. Export the whole network as C
# Export the whole network as C: mnist.c (every kernel from the C backend, and a driver that runs them over
# one arena), mnist.weights, mnist.h and mnist_example.c. format="so" writes one shared library instead, with
# the weights inside (tl.load reads it back).
files = model.export(out, format="c", name="mnist")
print("wrote", ", ".join(os.path.basename(f) for f in files.values()))
header = open(files["header"]).read()
print("\n".join(line for line in header.splitlines() if line.startswith(("mnist_model", "int32_t", "void"))))

# %% 6. Build the example program and run it
# Build the example program and run it: C only. It makes its input as tensorlang.export.example_inputs does,
# runs the network and writes the output; the same input through the Python model gives the same numbers.
from tensorlang.export import example_inputs  # noqa: E402
from tensorlang.graph.export import build_command  # noqa: E402

subprocess.run(build_command("mnist", "c"), shell=True, cwd=out, check=True)
run = subprocess.run(["./mnist_example", "out.bin"], cwd=out, capture_output=True, text=True, check=True)
print(run.stdout, end="")
c_out = np.fromfile(os.path.join(out, "out.bin"), np.float32).reshape(1, 10)
x_c = example_inputs({"inputs": [{"shape": [1, 1, 28, 28], "dtype": "f32"}]})[0]
with torch.no_grad():
    want_c = net(torch.from_numpy(x_c)).numpy()
print("C program against torch, largest difference:", float(np.max(np.abs(c_out - want_c))))
assert np.allclose(c_out, want_c, rtol=1e-4, atol=1e-4)
print(f"run it yourself: cd {out} && ./mnist_example")
