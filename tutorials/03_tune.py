"""Tutorial 3: let the auto-tuner find the schedule.

A search space is knobs (split factors, loop orders, packing on/off, the parallel loop, ...) and a function that
turns one setting of the knobs (a *config*) into a Schedule with public primitives. The auto-scheduler derives one
from any program (tensorlang/autosched/); a workload in `schedules/` may also declare a hand-written one.
`tuner.tune` proposes configs, builds them in worker processes, runs each one alone in an isolated process, checks
its output against the default schedule's, times it, and commits every measurement to a SQLite database at once.

Run it: `python tutorials/03_tune.py` (the tests run it with TENSORLANG_TUTORIAL_TRIALS=12).
The same from the shell: `tensorlang tune conv2d --preset resnet18_3x3 --trials 200`.
"""
import os
import tempfile

import numpy as np

import tensorlang as tl
from tensorlang import schedules, tuner
from tensorlang.tuner.records.database import Database
from tensorlang.tuner.task import Task

TRIALS = int(os.environ.get("TENSORLANG_TUTORIAL_TRIALS", "48"))
db_path = os.path.join(tempfile.mkdtemp(), "tutorial.db")   # default: TENSORLANG_DB, or ~/.cache/tensorlang

# %% 1. The task and its search space
# The task: a workload at fixed sizes, on this CPU, with a thread count. Its space is a product of knobs.
task = Task.create("conv2d", sizes={"C": 32, "F": 32, "H": 28, "W": 28}, threads=1)
print(task.describe())
print(task.space.describe())

# %% 2. Tune
# Tune. The first candidate is the auto-scheduler's zero-trial pick (in the workload's hand-written space,
# space="hand", it is the hand schedule's config; hand_start=False: search from nothing). The default strategy,
# xgb-genetic, measures random configs next, then trains an XGBoost model on features of each candidate's loop
# IR and measures the configs the model ranks best (plus some random ones). A run ends by timing its 5 fastest
# configs again, longer and interleaved: that re-timing chooses the best (one short measurement each is biased
# by the machine's noise), and it is the figure to quote.
best = tuner.tune("conv2d", trials=TRIALS, sizes=task.sizes, threads=1, db=db_path, seed=0, progress=False)


def retimed_gflops(config_key: str) -> float:
    with Database(db_path) as db:
        return task.flops / db.retimed(task.key)[config_key] / 1e9


first_best = retimed_gflops(best.config_key())
print(f"best after {TRIALS} trials: {first_best:.1f} GFLOPS (re-timed), knobs {best.config}")

# %% 3. A record holds everything
# A record holds everything: the config, the schedule as JSON, every repeat time, the strategy and the seed.
s = tl.Schedule.from_json(best.schedule, task.op)
print(s)                                   # the Python calls that rebuild it
kernel = tl.build(s)
w = schedules.get("conv2d")
I, Wt = w.make_inputs(task.sizes, np.random.default_rng(1))
np.testing.assert_allclose(kernel(I, Wt), w.reference(I, Wt, **task.sizes), rtol=1e-4, atol=1e-3)
print("the tuned kernel matches numpy")

# %% 4. Tuning again resumes
# Tuning the same task again resumes: earlier records count towards `trials` and warm-start the search.
again = tuner.tune("conv2d", trials=TRIALS + 4, sizes=task.sizes, threads=1, db=db_path, seed=0, progress=False)
with Database(db_path) as db:
    records = db.records(task.key)
    retimed = db.retimed(task.key)
now = retimed_gflops(again.config_key())
print(f"{len(records)} records after resuming; best {now:.1f} GFLOPS (re-timed)")
if now < first_best:
    # the re-timing times the last run's winner again, next to the new candidates: a lower figure is the machine
    # measuring slower now, not a worse schedule; the same config's two timings say by how much
    then_winner_now = retimed_gflops(best.config_key())
    print(f"  lower than the first run's {first_best:.1f}: its winner re-timed now runs at {then_winner_now:.1f} "
          f"({(then_winner_now / first_best - 1) * 100:+.0f}% on this machine's timings), so the new best is the "
          "fastest of today's timings")
assert len(records) == TRIALS + 4 and again.ok
first = min(records, key=lambda r: r.trial)
# (a trial can also fail: on a machine busy enough, even the pick's config can run past the time limit)
print(f"trial 0 measured the {first.strategy} config: "
      + (f"{first.gflops:.1f} GFLOPS" if first.ok else f"{first.error_kind} ({first.error})"))
assert first.strategy == "auto" and first.config == task.space.default()
print("re-timed:", ", ".join(f"{task.flops / m / 1e9:.1f}" for m in sorted(retimed.values())), "GFLOPS")
assert again.config_key() == min(retimed, key=retimed.get) and best.config_key() in retimed

# %% 5. Bad candidates are records too
# Bad candidates never stop tuning: they are records too, with the kind of error and its message.
kinds = sorted({r.error_kind for r in records if not r.ok})
print("invalid candidates by kind:", kinds or "none")
