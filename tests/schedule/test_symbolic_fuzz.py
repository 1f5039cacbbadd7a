"""Random schedules (the schedule fuzzer's primitives, drawn at tiny integer sizes) replayed on symbolic sizes:
each either is refused with a clear error (a ScheduleError or a SymbolicRefusal naming what is symbolic) or builds
one kernel that agrees with numpy at the representative sizes, the ends of the range and sizes in between."""
import random

import numpy as np
import pytest
import schedfuzz
from oracle import assert_close
from progen import Src

import tensorlang as tl
from tensorlang import schedules
from tensorlang.symbolic import SymbolicRefusal

SEEDS = range(24)
SYMBOLIC = {"matmul": ("M", "N", "K"), "conv2d": ("N", "H", "W")}


@pytest.mark.parametrize("name", sorted(SYMBOLIC))
def test_random_schedules_on_symbolic_sizes_agree_with_numpy_or_are_refused(name):
    w = schedules.WORKLOADS[name]
    built = refused = 0
    for seed in SEEDS:
        src = Src.from_random(random.Random(seed))
        case = schedfuzz.workload_case(name, src)
        fz = schedfuzz.Fuzzer(case, src)
        for _ in range(src.int(1, 8)):
            fz.step()
        like = case.sizes
        sym = SYMBOLIC[name]
        dims = {k: (tl.Dim(v, 3 * v + 2, like=v) if k in sym else v) for k, v in like.items()}
        try:
            s = tl.Schedule(case.op, dims, list(fz.s.primitives))
            k = tl.build(s)
        except (SymbolicRefusal, tl.ScheduleError) as e:
            assert "symbolic" in str(e), f"seed {seed}: {e}\n{fz.s}"
            refused += 1
            continue
        built += 1
        rng = np.random.default_rng(seed)
        # the representative sizes, the top of the range, and sizes in between
        for extra in ({n: 0 for n in sym}, {n: 2 * like[n] + 2 for n in sym},
                      {n: (4 * i + 3) % 7 for i, n in enumerate(sym)},
                      {n: 2 * like[n] + 1 - i for i, n in enumerate(sym)}):
            sizes = {n: (v + extra[n] if n in sym else v) for n, v in like.items()}
            try:
                tl.schedule(case.op, **sizes)
            except (tl.BuildError, tl.DSLError):  # a window that does not fit these sizes
                continue
            inputs = w.make_inputs(sizes, rng)
            got = k(*inputs)
            want = w.reference(*inputs, **sizes)
            assert_close(got, want, schedfuzz.total_reduction_len(tl.schedule(case.op, **sizes)),
                         err_msg=f"seed {seed} at {sizes}\n{fz.s}")
    assert built >= len(SEEDS) // 2, f"{refused} of {len(SEEDS)} random schedules refused"
