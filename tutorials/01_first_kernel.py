"""Tutorial 1: write a tensor computation in the DSL, compile it, call it on numpy arrays.

Run it: `python tutorials/01_first_kernel.py` (the tests run it too).
"""
import numpy as np

import tensorlang as tl

# %% 1. A program in the DSL
# A program is a Python-like `def` whose body is Einstein statements. An index that appears only on the
# right side (k) is summed over; `+=` starts from 0. Sizes (M, N, K) stay symbolic until build time.
matmul = tl.op("""
def matmul(A: f32[M, K], B: f32[K, N]) -> C:
    C[m, n] += A[m, k] * B[k, n]
""")
print("inputs:", matmul.inputs, "outputs:", matmul.outputs, "sizes:", matmul.size_names)

# %% 2. Compile it and call it
# Bind sizes and compile for this CPU (LLVM O2, host CPU features). Kernels are cached.
kernel = tl.build(matmul, M=64, N=48, K=32)
rng = np.random.default_rng(0)
A = rng.standard_normal((64, 32), dtype=np.float32)
B = rng.standard_normal((32, 48), dtype=np.float32)
C = kernel(A, B)
np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)
print("matmul matches numpy; compiled in", round(kernel.compile_seconds * 1000), "ms")

# %% 3. A pipeline of stages, with padding
# Several statements make a pipeline of named stages. `where` widens a range; reads outside the input
# then give 0, which is how padding is written. `max=` starts from -inf.
pool = tl.op("""
def padded_maxpool(I: f32[H, W]) -> O:
    P[y, x] = I[y - 1, x - 1] where y in 0:H+2, x in 0:W+2
    O[h, w] max= P[2*h + r, 2*w + s] where r in 0:3, s in 0:3
""")
print(pool.lower(H=4, W=4))          # the loop nest the default schedule produces
I = rng.standard_normal((9, 9), dtype=np.float32)
O = tl.build(pool, H=9, W=9)(I)
P = np.pad(I, 1)
expected = np.array([[P[2 * h:2 * h + 3, 2 * w:2 * w + 3].max() for w in range(O.shape[1])]
                     for h in range(O.shape[0])])
np.testing.assert_allclose(O, expected)
print("padded max-pool matches numpy, output shape", O.shape)

# %% 4. Errors point at the text
# Mistakes get an error that points at the text.
try:
    tl.op("""
def oops(A: f32[M, K], B: f32[K, N]) -> C:
    C[m, n] = A[m, k] * B[k, n]
""")
except tl.DSLError as err:
    print(err)
