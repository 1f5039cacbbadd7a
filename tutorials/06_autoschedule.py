"""Tutorial 6: a fused operator written as DSL text, scheduled by the auto-scheduler, tuned, and exported.

No hand-written schedule or search space: the auto-scheduler derives both from the program (docs: User guide,
"The auto-scheduler"). `tl.build` compiles its zero-trial pick; `tuner.tune` searches the generated space; after
tuning, `tl.build` takes the tuned record; the kernel leaves Python as a shared library.

Run it: `python tutorials/06_autoschedule.py` (the tests run it with TENSORLANG_TUTORIAL_TRIALS=8).
The same from the shell, with the program in a file:

    tensorlang tune dense_gelu.tl --size M=256,N=256,K=256 --trials 200
    tensorlang export dense_gelu.tl --size M=256,N=256,K=256 -o out/
"""
import os
import tempfile
import time

import numpy as np

import tensorlang as tl
from tensorlang import tuner

TRIALS = int(os.environ.get("TENSORLANG_TUTORIAL_TRIALS", "64"))
SIZE = int(os.environ.get("TENSORLANG_TUTORIAL_SIZE", "256"))
db_path = os.path.join(tempfile.mkdtemp(), "tutorial.db")   # default: TENSORLANG_DB, or ~/.cache/tensorlang

# %% 1. A fused operator
# A fused operator: a dense layer with bias and the tanh form of GELU, one program.
SOURCE = """
def dense_gelu(X: f32[M, K], W: f32[N, K], b: f32[N]) -> Y:
    D[m, n] += X[m, k] * W[n, k]
    Y[m, n] = 0.5 * (D[m, n] + b[n]) * (1.0 + tanh(0.7978845608 * ((D[m, n] + b[n])
                                                   + 0.044715 * (D[m, n] + b[n]) ** 3)))
"""
op = tl.op(SOURCE)
sizes = {"M": SIZE, "N": SIZE, "K": SIZE}
rng = np.random.default_rng(0)
X = rng.standard_normal((SIZE, SIZE), dtype=np.float32)
W = rng.standard_normal((SIZE, SIZE), dtype=np.float32)
b = rng.standard_normal(SIZE, dtype=np.float32)
d = X.astype(np.float64) @ W.T.astype(np.float64) + b
want = 0.5 * d * (1 + np.tanh(0.7978845608 * (d + 0.044715 * d ** 3)))


def gflops(kernel) -> float:
    kernel(X, W, b)
    t, n = time.perf_counter(), 0
    while time.perf_counter() - t < 0.2:
        kernel(X, W, b)
        n += 1
    return 2 * SIZE ** 3 * n / (time.perf_counter() - t) / 1e9


# %% 2. The zero-trial pick
# tl.build picks a schedule itself: no tuned record, no hand schedule, so the auto-scheduler's zero-trial pick.
# The rules tiled the matmul into a register tile (vectorized, unrolled), packed the weights, and computed the
# bias and GELU in the tile's write-back (the `epilogue` placement: D never goes through memory).
naive = tl.build(op, schedule="naive", **sizes)
auto = tl.build(op, db=db_path, **sizes)
print(f"schedule source: {auto.schedule_source}")
print(auto.schedule)                                  # the Python calls of the pick
np.testing.assert_allclose(auto(X, W, b), want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
print(f"naive loop nest {gflops(naive):.1f} GFLOPS, zero-trial pick {gflops(auto):.1f} GFLOPS")

# %% 3. Tune
# Tune: the generated space's first trial is the pick (strategy "auto"), then the model-guided search.
best = tuner.tune(SOURCE, trials=TRIALS, sizes=sizes, db=db_path, seed=0, progress=False)
print(f"best of {TRIALS} trials: {best.gflops:.1f} GFLOPS (one measurement), knobs {len(best.config)}")

# %% 4. tl.build takes the tuned record
# tl.build now takes the tuned record (the same program, sizes, CPU and thread count).
tuned = tl.build(op, db=db_path, **sizes)
assert tuned.schedule_source == "tuned"
np.testing.assert_allclose(tuned(X, W, b), want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
print(f"tuned: {gflops(tuned):.1f} GFLOPS")

# %% 5. Export it
# Export it: a shared library with a header and an example C program; tl.load reads it back.
out = tempfile.mkdtemp()
files = tuned.export(out)
loaded = tl.load(files["library"])
np.testing.assert_allclose(loaded(X, W, b), want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
print("exported:", ", ".join(os.path.basename(f) for f in files.values()))
