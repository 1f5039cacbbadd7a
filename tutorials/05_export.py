"""Tutorial 5: export a kernel ahead of time, call it from C, and load the library back into Python.

Run it: `python tutorials/05_export.py` (the tests run it too). It needs a C compiler (`cc`).
The same from the command line: `tensorlang export matmul --preset small --format so -o out`.
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import tensorlang as tl

if shutil.which("cc") is None:
    print("this tutorial calls the kernel from C and needs a C compiler (cc); install gcc or clang")
    sys.exit(0)

# %% 1. A kernel
# A kernel: a 64x64 matmul whose rows of tiles run in parallel and whose columns are vectorized.
op = tl.op("""
def matmul(A: f32[M, K], B: f32[K, N]) -> C:
    C[m, n] += A[m, k] * B[k, n]
""")
s = tl.schedule(op, M=64, N=64, K=64)
c = s["C"]
mo, no, mi, ni = c.tile("m", "n", 8, 16)
c.reorder(mo, no, mi, "k", ni)
c.vectorize(ni)
c.parallel(mo)
kernel = tl.build(s)

# %% 2. Export it as a shared library
# Export it as a shared library. The directory gets libmatmul.so, matmul.h (the prototype, and a comment on
# each buffer's shape, dtype and layout) and matmul_example.c (its first comment says how to build it).
# Other formats: "o" (object file + the runtime's C source), "c" (C source), "ll" (LLVM IR), "asm".
out = tempfile.mkdtemp(prefix="tensorlang-tutorial-")
files = kernel.export(out, format="so")
header = open(files["header"]).read()
print("wrote", ", ".join(os.path.basename(f) for f in files.values()))
print(next(line for line in header.splitlines() if line.startswith("int32_t matmul(")))

# %% 3. Call it from C
# Call it from our own C program: fill A and B, call matmul(A, B, C), print C. Link with -lmatmul; the rpath
# lets the program find the library next to it.
with open(os.path.join(out, "caller.c"), "w") as f:
    f.write(r"""
#include <stdio.h>
#include "matmul.h"

static float A[64 * 64], B[64 * 64], C[64 * 64];

int main(void) {
    for (int i = 0; i < 64 * 64; i++) {
        A[i] = (float)(i % 7) - 3.0f;
        B[i] = (float)(i % 5) * 0.5f;
    }
    if (matmul(A, B, C) != 0)
        return 1;  /* a temporary buffer could not be allocated */
    for (int i = 0; i < 64 * 64; i++)
        printf("%.9g\n", C[i]);
    return 0;
}
""")
build = "cc -O2 -o caller caller.c -L. -lmatmul -Wl,-rpath,'$ORIGIN'"
subprocess.run(build, shell=True, cwd=out, check=True)
run = subprocess.run(["./caller"], cwd=out, capture_output=True, text=True, check=True,
                     env=dict(os.environ, TENSORLANG_NUM_THREADS="2"))   # the library's thread pool reads it
C = np.array(run.stdout.split(), dtype=np.float32).reshape(64, 64)
A = (np.arange(64 * 64) % 7 - 3.0).astype(np.float32).reshape(64, 64)
B = ((np.arange(64 * 64) % 5) * 0.5).astype(np.float32).reshape(64, 64)
np.testing.assert_allclose(C, A @ B, rtol=1e-6)
print(f"C from C: C[0, :4] = {C[0, :4]}, matches numpy")

# %% 4. The generated example program
# The generated example program does the same with deterministic inputs and prints a checksum.
command = open(files["example"]).read().split("Build and run, in this directory:\n *   ")[1].split("\n")[0]
subprocess.run(command, shell=True, cwd=out, check=True)
print(subprocess.run(["./matmul_example"], cwd=out, capture_output=True, text=True, check=True).stdout.strip())

# %% 5. Load the library back
# Load the library back: a Kernel with the same argument checks as tl.build's, no side files needed.
loaded = tl.load(files["library"])
print(loaded)
np.testing.assert_allclose(loaded(A, B), A @ B, rtol=1e-6)
try:
    loaded(A.astype(np.float64), B)
except tl.BuildError as e:
    print("a wrong dtype:", e)
shutil.rmtree(out)
