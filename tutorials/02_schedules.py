"""Tutorial 2: schedule a kernel. A schedule changes how the loops run, never what they compute.

Run it: `python tutorials/02_schedules.py` (the tests run it too).
"""
import time

import numpy as np

import tensorlang as tl

# %% A matmul and its inputs
op = tl.op("""
def matmul(A: f32[M, K], B: f32[K, N]) -> C:
    C[m, n] += A[m, k] * B[k, n]
""")
M = N = K = 384
rng = np.random.default_rng(0)
A = rng.standard_normal((M, K), dtype=np.float32)
B = rng.standard_normal((K, N), dtype=np.float32)


def gflops(kernel):
    kernel(A, B)
    t = time.perf_counter()
    for _ in range(5):
        kernel(A, B)
    return 2 * M * N * K * 5 / (time.perf_counter() - t) / 1e9


# %% 1. The naive loop nest
# The naive loop nest: loops m, n, k in the order of the statement. (Without schedule="naive", tl.build picks
# a schedule itself: a tuned one, a hand-written one, or the auto-scheduler's; see tutorials/06_autoschedule.py.)
default = tl.build(op, M=M, N=N, K=K, schedule="naive")
print(f"naive loop nest: {gflops(default):.1f} GFLOPS")

# %% 2. Tile, vectorize and parallelise
# Tile, vectorize and parallelise. Each call checks its legality up front.
s = tl.schedule(op, M=M, N=N, K=K)
c = s["C"]
mo, no, mi, ni = c.tile("m", "n", 8, 32)
c.reorder(mo, no, "k", mi, ni)
c.vectorize(ni)           # 32 lanes of explicit LLVM vectors
c.unroll(mi)              # 8 rows replicated
c.parallel(mo)            # row tiles on the thread pool
print(s.lower())          # the loop nest, annotated
k = tl.build(s)
np.testing.assert_allclose(k(A, B), A @ B, rtol=1e-4, atol=1e-3)
print(f"tiled and vectorized: {gflops(k):.1f} GFLOPS")

# %% 3. A register tile and packed copies
# Keep the tile in registers (cache_write) and read packed copies of A and B (cache_read):
# the structure of a BLAS micro-kernel, written with the same public primitives.
c.cache_write(no)
c.cache_read("B", no, layout=((1, 32), (0, 0), (1, 0)))
k2 = tl.build(s)
np.testing.assert_allclose(k2(A, B), A @ B, rtol=1e-4, atol=1e-3)
print(f"with a register tile and packed B: {gflops(k2):.1f} GFLOPS")

# %% 4. An illegal primitive is refused
# An illegal primitive is refused with a message naming the primitive, the stage and the loop.
try:
    c.parallel("k")
except tl.ScheduleError as err:
    print("refused:", err)

# %% 5. A schedule is data
# A schedule is data: print it as Python, save it as JSON, replay it.
print(s)
again = tl.Schedule.from_json(s.to_json())
assert again.lower() == s.lower()
