"""Random schedules for tensorlang programs, and the checks that a schedule changes nothing but speed.

Used by ``test_schedule_fuzz.py``. The pieces:

* :class:`Case` -- a program bound to tiny sizes, its inputs, and the unscheduled kernel's outputs (which are
  first checked against numpy: the workload's ``reference`` or ``progen``'s independent evaluator).
  :func:`workload_case` builds one from ``tensorlang.schedules.WORKLOADS``, :func:`progen_case` from a random program of
  ``progen.py``, :func:`program_case` from ``schedule_cases.PROGRAMS`` (the scans: stages that read themselves).
* :class:`Fuzzer` -- applies 1..8 random primitives to ``tl.schedule(op, **sizes)``, choosing each primitive's
  arguments from the *current* loops of a random stage (``loops()``), sometimes with arguments that are
  invalid on purpose. Every call is logged as the Python that makes it. A primitive that raises
  ``tl.ScheduleError`` must leave the schedule as it was; one that the rules of the schedule API clearly
  allow must not raise, and one that they clearly forbid must raise (see ``expect`` in ``Fuzzer``).
* :func:`check_schedule` -- the oracle: the schedule round-trips through ``print(s)`` and JSON, lowers with
  ``s.lowered(strict=True)``, and its kernel (called into ``out=`` arrays full of NaN / 7) gives the
  unscheduled kernel's results (floats within ``oracle.assert_close``, ints and copies exactly) without
  touching the inputs.

Every random choice of an example comes from one ``random.Random`` (drawn from hypothesis in the tests),
through ``progen.Src``. A failure's report is shrunk by :func:`minimize` (fewer primitives, smaller sizes and
split factors, the same kind of failure).

Failures that match a known compiler bug (``KNOWN_BUGS``: the kind of failure and a pattern in the schedule)
are excused and counted as a hypothesis ``event``; a strict lowering that cannot prove an index in range is
excused only that far: the kernel (whose build guards that access) must still compute the right result.
``TENSORLANG_SCHEDULE_FUZZ_KNOWN=1`` excuses nothing, to check whether the bugs are fixed.

Reproduce a failure by hand::

    import tensorlang as tl
    op = tl.op(DSL_TEXT)
    exec(PRINTED_SCHEDULE)        # the `s = tl.schedule(op, ...)` lines of the failure report
    print(s.lower())
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
import traceback
from dataclasses import dataclass, field

import fuzzenv
import numpy as np
import progen
from oracle import assert_close, tolerance

import tensorlang as tl
from tensorlang.ir import expr_vars
from tensorlang.primitives import Split
from tensorlang.program import BoundaryIndex, scan_axis
from tensorlang.schedule import At, Root


def _at(attach, consumer: str) -> bool:
    """Whether a stage attached by `attach` is computed at a loop of `consumer`."""
    return isinstance(attach, At) and attach.consumer == consumer

# --------------------------------------------------------------------------------------------- known bugs
# Compiler bugs the fuzzer has found and reported that are still open, which would otherwise fail most runs
# and hide new ones. A failure is excused (counted as the hypothesis event "skipped (known bug NAME)") only
# when it is of the bug's kind and the schedule matches the bug's pattern (`known_failure`).
# TENSORLANG_SCHEDULE_FUZZ_KNOWN=1 excuses nothing, to see whether they are fixed; remove an entry and its
# pattern when its bug is fixed. (Fixed so far: tile not atomic, flat cache_read layouts raising TypeError,
# cache_read of a stage inlined later, lane-invariant vectorized reductions, cache_write dropping the guard
# of a reduction tail, cache_read copying a stage before compute_at computes it, cache_read regions missing
# padded reads, inlined padded reads, loop names clashing with those of computed-at stages, reorder moving
# a vectorized loop around a cache_read, compute_at at a loop that a later split removes, "cannot bound the
# region" for a stage computed inside another that reads a tensor at two different starts.)
KNOWN_BUGS = {
    "strict-cache_write": "cache_write at a split of a fused loop whose splits leave tails: the tile falls back to "
                          "the whole fused dimension and strict lowering cannot prove the tile index in range, e.g. "
                          "Y with fuse('j', 'i'), split('j_i', 1), split('j_i_o', 3), cache_write('j_i_o_o') "
                          "(the split-tail case C[i, j] += A[j] - B[r], cache_write('j'), split('i', 2) is fixed)",
    "strict-compute_at-padded": "compute_at of a stage with a cache_read, which its consumer reads outside its "
                                "domain (padding): strict lowering cannot prove the copy's reads in range, e.g. "
                                "T0.cache_read('X', 'k'), T0.compute_at(T1, 'j') (the case without cache_read, "
                                "T[i] = X[2*i] + X[i]; B[i] = T[i - 2] with T.compute_at(B, 'i'), is fixed)",
    "strict-cache_read-fused": "cache_read, then a fuse of loops inside it (the region falls back to the whole "
                               "dimension) with padded reads: strict lowering cannot prove the copy's reads, e.g. "
                               "B[i] += Y[s] * X[r] where i in 0:1, r in 1:N+2 with cache_read('X', 'i'), "
                               "fuse('s', 'r')",
}
CHECK_KNOWN = fuzzenv.flag("TENSORLANG_SCHEDULE_FUZZ_KNOWN")
TRACE = fuzzenv.path("TENSORLANG_SCHEDULE_FUZZ_TRACE")  # a file: what is about to be compiled, if it crashes


def trace(text: str) -> None:
    """With TENSORLANG_SCHEDULE_FUZZ_TRACE=PATH, overwrite PATH with `text` (the program and schedule about to be
    compiled), so that a crash of the whole process (a fatal error inside LLVM, say) leaves its repro there."""
    if TRACE:
        with open(TRACE, "w") as f:
            f.write(text + "\n")
_UNPROVEN = re.compile(r"cannot prove the (read|write) (\w+)\[(.*)\] inside")


def known_failure(s, kind: str, error: BaseException | None = None) -> str | None:
    """The KNOWN_BUGS entry that explains a failure of `kind` ("lower-crash", "late-ScheduleError",
    "strict-BuildError", "build-error", "wrong-result") of the finished schedule `s`, or None."""
    if CHECK_KNOWN:
        return None
    stages = s.state().stages
    if kind == "strict-BuildError":
        m = _UNPROVEN.search(str(error))
        if m is None:
            return None
        buf, idx = m.group(2), m.group(3)
        fused = {n for n, x in stages.items() if any(p.NAME == "fuse" and p.stage == n for p in s.primitives)}
        if any(buf == f"{tensor}_{n}_local" for n in fused for tensor, _a, _l in stages[n].cache_reads):
            return "strict-cache_read-fused"
        writers = {n for n, x in stages.items() if x.cache_write}
        if buf in writers or buf in {f"{n}_local" for n in writers}:
            return "strict-cache_write"
        if any(re.search(rf"\b{n}[.:]", idx) for n, x in stages.items() if isinstance(x.attach, At)):
            return "strict-compute_at-padded"
    return None


# --------------------------------------------------------------------------------------------- cases
@dataclass
class Case:
    """A program at fixed sizes with inputs and the results of its unscheduled kernel."""

    label: str
    text: str
    sizes: dict
    op: object
    inputs: list  # in op.inputs order
    baseline: dict  # output name -> array (unscheduled kernel)
    reduction_len: dict  # output name -> reduction_len for assert_close
    exact: dict  # output name -> bool (compare bit-exactly)
    compare_f32: dict = field(default_factory=dict)  # output name -> compare an f64 output at f32 precision
    oracle: dict = field(default_factory=dict)  # output name -> numpy's result (float64 where it computes so)

    def describe(self) -> str:
        return f"{self.label}\n{self.text.rstrip()}\nsizes = {self.sizes}"


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def total_reduction_len(s) -> int:
    """Sum over the stages of the number of terms reduced into one element (at least 1)."""
    total = 0
    for st in s.op.stages:
        bs = s.bound.stages[st.name]
        total += math.prod(bs.ranges[v][1] for v in st.red_vars) if st.red_vars else 0
    return max(total, 1)


# Values of sizes for the workloads: shape sizes shrink toward 1, int parameters toward their usual value.
SHAPE_VALUES = [1, 2, 3, 5, 4, 7, 6]
BIG_SHAPE_VALUES = [8, 11, 13, 16, 17]
PARAM_VALUES = {"stride": [1, 2, 3], "pad": [1, 0, 2], "dil": [1, 2], "KH": [2, 1, 3], "KW": [2, 1, 3]}
EXACT_WORKLOADS = {"maxpool2d", "transpose"}  # the results are copies of input values


def workload_sizes(w, op, src: progen.Src) -> dict:
    """Tiny sizes for workload `w`: small shape sizes (1 and primes included, now and then one of 8..17),
    usual int parameters; redrawn until the program binds (windows fit)."""
    sizes = draw_sizes(op, src)
    if sizes is not None:
        return sizes
    # windows that never fit in 20 draws: the small preset, every shape size capped at 7
    sizes = w.sizes("small")
    return {k: (v if k in op.int_params else min(v, 7)) for k, v in sizes.items()}


def draw_sizes(op, src: progen.Src) -> dict | None:
    """Tiny sizes for `op` as :func:`workload_sizes` draws them, or None when 20 draws never bind."""
    for _ in range(20):
        sizes = {}
        big = src.pick([n for n in op.size_names if n not in op.int_params]) if src.chance(15) else None
        for n in op.size_names:
            if n in op.int_params:
                sizes[n] = src.pick(PARAM_VALUES.get(n, [1, 2]))
            elif n in ("R", "S"):  # filter taps
                sizes[n] = src.pick([3, 1, 2])
            else:
                sizes[n] = src.pick(BIG_SHAPE_VALUES if n == big else SHAPE_VALUES)
        try:
            tl.schedule(op, **sizes)
            return sizes
        except (tl.BuildError, tl.DSLError):  # a window or a boundary index that does not fit these sizes
            continue
    return None


def workload_case(name: str, src: progen.Src) -> Case:
    """Workload `name` at random tiny sizes; its unscheduled kernel checked against the workload's reference."""
    from tensorlang import schedules

    w = schedules.WORKLOADS[name]
    op = tl.op(w.source)
    sizes = workload_sizes(w, op, src)
    inputs = w.make_inputs(sizes, np.random.default_rng(src.int(0, 2**32 - 1)))
    s0 = tl.schedule(op, **sizes)
    rlen = total_reduction_len(s0)
    exact = name in EXACT_WORKLOADS
    case = Case(f"workload {name}", w.source, sizes, op, inputs, {}, {o: rlen for o in op.outputs},
                {o: exact for o in op.outputs})
    trace(f"{case.describe()}\n(unscheduled)")
    kernel = tl.build(op, schedule="naive", **sizes)
    got = _as_tuple(kernel(*inputs))
    want = _as_tuple(w.reference(*inputs, **sizes))
    for i, (o, g, e) in enumerate(zip(op.outputs, got, want)):
        try:
            assert_close(g, e, rlen, exact=exact,
                         err_msg=f"the UNSCHEDULED kernel differs from numpy for {o}\n{case.describe()}")
        except AssertionError:
            if exact or not input_rounding_explains(w, inputs, sizes, i, g, e, rlen):
                raise
        case.baseline[o] = g
        case.oracle[o] = e
    return case


def program_case(name: str, src: progen.Src) -> Case:
    """Program `name` of ``schedule_cases.PROGRAMS`` (boundary conditions, scatters and scans among them) at random tiny
    sizes; its unscheduled kernel checked against the program's numpy oracle."""
    from schedule_cases import PROGRAMS, make_inputs

    prog = PROGRAMS[name]
    sizes = draw_sizes(prog.op, src)
    assert sizes is not None, f"{name}: no tiny sizes bind"
    s0 = tl.schedule(prog.op, **sizes)
    inputs = make_inputs(s0, src.int(0, 2**32 - 1))
    rlen = max(1, prog.red_len(sizes))
    case = Case(f"program {name} (tests/support/schedule_cases.py)", prog.source, sizes, prog.op, inputs, {},
                {o: rlen for o in prog.op.outputs}, {o: prog.exact for o in prog.op.outputs})
    trace(f"{case.describe()}\n(unscheduled)")
    got = _as_tuple(tl.build(prog.op, schedule="naive", **sizes)(*inputs))
    want = _as_tuple(prog.reference(*inputs, **sizes))
    for o, g, e in zip(prog.op.outputs, got, want):
        assert_close(g, e, rlen, exact=prog.exact,
                     err_msg=f"the UNSCHEDULED kernel differs from numpy for {o}\n{case.describe()}")
        case.baseline[o] = g
        case.oracle[o] = e
    return case


def input_rounding_explains(w, inputs: list, sizes: dict, i: int, got, want, rlen: int) -> bool:
    """Whether output `i`'s mismatch with the float64 reference is the reference's own sensitivity to rounding:
    where a result is ill-conditioned (layernorm of two nearly equal values: `x - mean` cancels, and
    `sqrt(var + 1e-5)` magnifies it), moving each input by one unit in the last place moves the reference about
    as far as float32 arithmetic does. Each element's difference must be within the oracle's tolerance plus
    4 * `rlen` times the largest move of that element over four such perturbations."""
    def reference(*arrays):
        return _as_tuple(w.reference(*arrays, **sizes))[i]
    return within_rounding_spread(reference, inputs, want, got, want, tolerance(np.asarray(want).dtype, rlen),
                                  4 * rlen)


def within_rounding_spread(compute, inputs: list, base, got, want, tol: float, factor: float,
                           eps: float | None = None) -> bool:
    """Whether every finite element of `got` is within ``tol * (|want| + rms(want))`` plus `factor` times how far
    ``compute(*inputs)`` moves from `base` when each float input moves by up to `eps` relative (default: one unit
    in its own last place), over four random draws; non-finite elements must agree exactly."""
    g64, w64, b64 = (np.asarray(x, np.float64) for x in (got, want, base))
    fin = np.isfinite(w64)
    if not np.array_equal(np.isfinite(g64), fin) or not np.array_equal(g64[~fin], w64[~fin], equal_nan=True):
        return False
    rng = np.random.default_rng(0)
    spread = np.zeros_like(w64)
    for _ in range(4):
        moved = [np.asarray(a.astype(np.float64) * (1 + rng.uniform(-1, 1, a.shape) * (eps or np.finfo(a.dtype).eps)),
                            a.dtype)  # a 0-d input stays an array
                 if np.issubdtype(a.dtype, np.floating) else a for a in inputs]
        out = np.asarray(compute(*moved), np.float64)
        if not np.array_equal(np.isfinite(out), fin):
            return False
        spread = np.maximum(spread, np.where(fin, np.abs(out - b64), 0.0))
    rms = float(np.sqrt(np.mean(w64[fin] ** 2))) if fin.any() else 0.0
    return bool(np.all(np.abs(g64[fin] - w64[fin]) <= tol * (np.abs(w64[fin]) + rms) + factor * spread[fin]))


def progen_case(src: progen.Src, small_ints: bool = False) -> Case:
    """A random program from progen.py (`small_ints`: in one of the small integer types, u8 ... u64, whose outputs
    are compared bit-exactly); raises progen.Reject for numerically fragile ones."""
    prog = progen.generate(src, small_ints=small_ints)
    seed = src.int(0, 2**32 - 1)
    arrays = progen.make_inputs(prog, seed)
    expected = prog.evaluate(arrays)  # raises Reject before any compile
    op = tl.op(prog.text)
    sizes = dict(prog.env)
    inputs = [arrays[n] for n in op.inputs]
    nodes = sum(sum(1 for _ in stg.expr.walk()) for stg in prog.stages)
    case = Case("random program (tests/support/progen.py)", prog.text, sizes, op, inputs, {}, {}, {})
    trace(f"{case.describe()}\n(unscheduled)")
    kernel = tl.build(op, schedule="naive", **sizes)
    got = dict(zip(op.outputs, _as_tuple(kernel(*inputs))))
    for o in op.outputs:
        exp, out = expected[o], np.asarray(got[o])
        f32 = exp.dtype == np.float64 and prog.uses_f32()
        case.compare_f32[o] = f32
        case.exact[o] = not np.issubdtype(exp.dtype, np.floating)
        case.reduction_len[o] = _progen_oracle_len(prog, exp, nodes)
        a, b = (out.astype(np.float32), exp.astype(np.float32)) if f32 else (out, exp)
        assert_close(a, b, case.reduction_len[o],
                     err_msg=f"the UNSCHEDULED kernel differs from numpy for {o}\n{case.describe()}")
        case.baseline[o] = out
        case.oracle[o] = exp
    return case


def _progen_oracle_len(prog, expected, nodes) -> int:
    """The error budget test_random_programs.py gives a program (sums of reduction lengths and expression
    nodes, scaled by the largest intermediate magnitude over the output's rms), as an assert_close length."""
    e = expected.astype(np.float64)
    e = e[np.isfinite(e)]
    rms = float(np.sqrt(np.mean(e * e))) if e.size else 0.0
    scale = rms if rms > 0 else 1.0
    units = 4.0 * (prog.total_reduction_len() + nodes) * max(1.0, prog.magnitude / scale)
    return max(prog.total_reduction_len(), int(math.ceil(max(units - 64.0, 8.0) / 8.0) ** 2))


# --------------------------------------------------------------------------------------------- the fuzzer
def _q(x) -> str:
    return repr(x).replace("'", '"')


class FuzzFailure(AssertionError):
    """A schedule broke a rule of the schedule API (the message holds the repro)."""


class Fuzzer:
    """Applies random primitives to a schedule, logging each call; see the module docstring."""

    WEIGHTS = (("split", 18), ("tile", 6), ("reorder", 11), ("fuse", 9), ("vectorize", 10), ("unroll", 7),
               ("parallel", 8), ("serial", 2), ("compute_at", 14), ("compute_inline", 7), ("compute_root", 3),
               ("cache_write", 7), ("cache_read", 9), ("rfactor", 5), ("store_at", 5), ("fold_storage", 3),
               ("bad_stage", 1))
    MAX_UNROLLED = 256  # the fuzzer keeps the product of unrolled extents of a stage below this (compile time)

    def __init__(self, case: Case, src: progen.Src):
        self.case, self.src = case, src
        self.s = tl.schedule(case.op, **case.sizes)
        self.log: list[str] = [str(self.s)]
        self.counter = 0
        self.excused: list[str] = []  # known bugs met while applying primitives

    # ---- views of the current state (read-only) ----
    @property
    def op(self):
        """The program as scheduled: the case's, with the partial stages that rfactor added."""
        return self.s.state().bound.op

    @property
    def stage_names(self) -> list[str]:
        return [st.name for st in self.op.stages]

    def nest(self, stage):
        return self.s.state().stages[stage].nest

    def loop(self, stage, name):
        return next((lp for lp in self.nest(stage).loops if lp.name == name), None)

    def attach(self, stage):
        return self.s.state().stages[stage].attach

    def reads(self, stage) -> list[str]:
        return list(self.op.stage(stage).reads())

    def readers(self, tensor) -> list[str]:
        return [st.name for st in self.op.stages if tensor in st.reads()]

    def rank(self, tensor) -> int:
        return len(self.s.state().bound.shapes[tensor])

    def named_loops(self, stage) -> set[str]:
        """Loops of `stage` that a compute_at (of another stage), its cache_write or a cache_read names."""
        st = self.s.state()
        out = {o.attach.axis for o in st.stages.values() if isinstance(o.attach, At) and o.attach.consumer == stage}
        out |= {o.store_at for o in st.stages.values() if _at(o.attach, stage) and o.store_at}
        if st.stages[stage].cache_write:
            out.add(st.stages[stage].cache_write)
        out |= {axis for _t, axis, _l in st.stages[stage].cache_reads}
        return out

    def scan(self, stage) -> str | None:
        """The index a scan stage runs along (its loops run in order), or None."""
        found = scan_axis(self.op.stage(stage))
        return found[0] if found else None

    def runs_scan(self, stage, axis) -> bool:
        """Whether loop `axis` of `stage` is one its scan index is computed from (never parallel nor vectorized)."""
        v = self.scan(stage)
        return v is not None and axis in expr_vars(self.nest(stage).exprs[v])

    def fresh(self, stage, name) -> bool:
        return (isinstance(name, str) and name.isidentifier() and name not in self.s[stage].loops()
                and name not in self.op.stage(stage).all_vars)

    # ---- choices ----
    def any_loop(self, stage) -> str:
        """A current loop of `stage` (95%), else a name that is not one (a removed loop, another stage's)."""
        loops = self.s[stage].loops()
        if loops and not self.src.chance(5):
            return self.src.pick(loops)
        others = [v for v in self.op.stage(stage).all_vars if v not in loops]
        others += [lp for n in self.stage_names if n != stage for lp in self.s[n].loops() if lp not in loops]
        return self.src.pick(others or ["nope"])

    def factor(self, stage, axis) -> int:
        lp = self.loop(stage, axis)
        k = self.src.weighted([("small", 84), ("big", 12), ("bad", 4)])
        if k == "small" or lp is None:
            return self.src.int(1, 9)
        if k == "big":
            return lp.extent + self.src.int(0, 3)
        return self.src.pick([0, -1])

    def new_name(self, stage, base) -> str:
        """A loop name for split/fuse: usually fresh, sometimes one that clashes or is not an identifier."""
        self.counter += 1
        kind = self.src.weighted([("fresh", 70), ("clash", 12), ("other_prefix", 12), ("bad", 6)])
        if kind == "fresh":
            return f"{base}{self.counter}"
        if kind == "clash":
            return self.src.pick(self.s[stage].loops() + list(self.op.stage(stage).all_vars) or [base])
        if kind == "other_prefix":  # the names tensorlang gives a computed-at stage's loops (`P_n`)
            other = self.src.pick(self.stage_names)
            return f"{other}_{self.src.pick(list(self.op.stage(other).all_vars) or ['x'])}"
        return self.src.pick(["1x", "a.b", "", "for"])

    # ---- one primitive ----
    def step(self) -> None:
        """Draw a primitive and its arguments, apply it, check the ScheduleError rules."""
        kind = self.src.weighted(self.WEIGHTS)
        if (kind in ("compute_at", "compute_inline") and set(self.stage_names) <= set(self.op.outputs)
                and not self.src.chance(15)):  # nothing to attach: mostly draw again
            kind = self.src.weighted(self.WEIGHTS)
        stage = self.src.pick(self.stage_names)
        call = getattr(self, "p_" + kind)(stage)
        if call is None:
            return
        text, fn, expect = call[:3]
        want = call[3] if len(call) > 3 else None  # (loops before, result) -> the stage's loops after
        before = list(self.s.primitives)
        names = self.stage_names  # an rfactor adds a stage: its loops are the new stage's own
        before_loops = {n: self.s[n].loops() for n in names}
        try:
            result = fn()
        except tl.ScheduleError as e:
            self.log.append(f"{text}  # ScheduleError: {e}")
            if expect == "legal":
                self.fail(f"false rejection: {text} is legal by the schedule API's rules but raised ScheduleError",
                          e)
            if list(self.s.primitives) != before:
                self.fail(f"{text} raised ScheduleError but changed the schedule's primitives", e)
            after_loops = {n: self.s[n].loops() for n in names}
            if after_loops != before_loops:
                self.fail(f"{text} raised ScheduleError but changed the loops: {before_loops} -> {after_loops}")
            return
        except Exception as e:
            self.log.append(f"{text}  # {type(e).__name__}: {e}")
            e.add_note(self.report(f"the primitive call {text} raised {type(e).__name__}, not tl.ScheduleError"))
            raise
        self.log.append(text)
        if expect == "illegal":
            self.fail(f"{text} was accepted, but the schedule API's rules forbid it")
        # the loops: only the stage whose loops the primitive rearranges changes, as its docstring says
        after_loops = {n: self.s[n].loops() for n in names}
        target = stage if want is not None else None
        for n in names:
            try:
                expected = want(before_loops[n], result) if n == target else before_loops[n]
            except AssertionError as e:
                self.fail(f"{text}: {e}")
            if after_loops[n] != expected:
                self.fail(f"after {text} (returned {result!r}) stage {n} has the loops {after_loops[n]}, "
                          f"expected {expected} (before: {before_loops[n]})")

    def p_split(self, stage):
        axis = self.any_loop(stage)
        factor = self.factor(stage, axis)
        named = self.src.chance(20)
        outer = self.new_name(stage, axis + "_o") if named else None
        inner = self.new_name(stage, axis + "_i") if named else None
        lp = self.loop(stage, axis)
        o, i = outer or f"{axis}_o", inner or f"{axis}_i"
        if lp is None or factor <= 0 or (named and (o == i or not o.isidentifier() or not i.isidentifier()
                                                    or o in self.s[stage].loops() or i in self.s[stage].loops())):
            expect = "illegal"
        elif (lp.kind == "serial" and self.fresh(stage, o) and self.fresh(stage, i) and o != i
              and axis not in self.named_loops(stage)):
            expect = "legal"
        else:
            expect = None
        extra = f", outer={_q(outer)}, inner={_q(inner)}" if named else ""
        text = f"s[{_q(stage)}].split({_q(axis)}, {factor}{extra})"

        def want(loops, result):
            assert result == (o, i), f"split returned {result!r}, not {(o, i)!r}"
            k = loops.index(axis)
            return loops[:k] + [o, i] + loops[k + 1:]
        return text, lambda: self.s[stage].split(axis, factor, outer, inner), expect, want

    def p_tile(self, stage):
        x, y = self.any_loop(stage), self.any_loop(stage)
        fx, fy = self.factor(stage, x), self.factor(stage, y)
        text = f"s[{_q(stage)}].tile({_q(x)}, {_q(y)}, {fx}, {fy})"
        expect = "illegal" if x == y or fx <= 0 or fy <= 0 else None

        def want(loops, result):
            names = (f"{x}_o", f"{y}_o", f"{x}_i", f"{y}_i")
            assert result == names, f"tile returned {result!r}, not {names!r}"
            out = []
            for lp in loops:
                out += [f"{lp}_o", f"{lp}_i"] if lp in (x, y) else [lp]
            pos = sorted(out.index(n) for n in names)
            for p, n in zip(pos, names):
                out[p] = n
            return out
        return text, lambda: self.s[stage].tile(x, y, fx, fy), expect, want

    def p_reorder(self, stage):
        loops = self.s[stage].loops()
        k = self.src.weighted([("perm", 90), ("one", 4), ("dup", 3), ("missing", 3)])
        if k == "perm" and len(loops) >= 2:
            n = self.src.int(2, len(loops))
            pool = list(loops)
            axes = []
            for _ in range(n):
                axes.append(pool.pop(self.src.int(0, len(pool) - 1)))
            # legal, unless a vectorized or parallel loop moves relative to others, the stage copies a stage
            # computed inside it, or a stage computed at one of its loops is stored at another, which must stay
            # outside (those rules are re-checked after a reorder)
            st = self.s.state().stages
            copies_computed = any(t in st and _at(st[t].attach, stage) for t, _a, _l in st[stage].cache_reads)
            stored_here = any(_at(o.attach, stage) and o.store_at for o in st.values())
            plain = all(lp.kind in ("serial", "unrolled") for lp in self.nest(stage).loops)
            # a scan keeps the outer part of each split of its index outside the inner part
            expect = "legal" if plain and not copies_computed and not stored_here and self.scan(stage) is None \
                else None
        elif k == "dup" and loops:
            a = self.src.pick(loops)
            axes = [a, a]
            expect = "illegal"
        elif k == "missing" or not loops:
            axes = [self.src.pick(loops or ["nope"]), "nope"]
            expect = "illegal"
        else:
            axes = [self.src.pick(loops)]
            expect = "illegal"
        text = f"s[{_q(stage)}].reorder({', '.join(_q(a) for a in axes)})"

        def want(loops, result):
            out = list(loops)
            for p, n in zip(sorted(loops.index(a) for a in axes), axes):
                out[p] = n
            return out
        return text, lambda: self.s[stage].reorder(*axes), expect, want

    def p_fuse(self, stage):
        loops = self.s[stage].loops()
        if len(loops) >= 2 and self.src.chance(85):
            i = self.src.int(0, len(loops) - 2)
            a, b = loops[i], loops[i + 1]
        else:
            a, b = self.any_loop(stage), self.any_loop(stage)
        named = self.src.chance(15)
        fused = self.new_name(stage, f"{a}_{b}") if named else None
        la, lb = self.loop(stage, a), self.loop(stage, b)
        f = fused or f"{a}_{b}"
        adjacent = la is not None and lb is not None and loops.index(b) == loops.index(a) + 1
        if not adjacent:
            expect = "illegal"
        elif (la.reduction == lb.reduction and la.kind == lb.kind == "serial" and self.fresh(stage, f)
              and not {a, b} & self.named_loops(stage)):
            expect = "legal"
        else:
            expect = None
        extra = f", fused={_q(fused)}" if named else ""
        text = f"s[{_q(stage)}].fuse({_q(a)}, {_q(b)}{extra})"

        def want(loops, result):
            assert result == f, f"fuse returned {result!r}, not {f!r}"
            k = loops.index(a)
            return loops[:k] + [f] + loops[k + 2:]
        return text, lambda: self.s[stage].fuse(a, b, fused), expect, want

    def _annotate(self, stage, verb):
        axis = self.any_loop(stage)
        lp = self.loop(stage, axis)
        nest = self.nest(stage)
        expect = None
        if lp is None:
            expect = "illegal"
        elif verb == "parallel" and lp.reduction:
            expect = "illegal"
        elif verb in ("parallel", "vectorize") and self.runs_scan(stage, axis):
            expect = "illegal"
        elif verb == "serial":
            expect = "legal"
        elif verb in ("unroll", "vectorize") and isinstance(self.attach(stage), At):
            pass  # its loops run over the region its readers use, whose extents this model does not know
        elif verb == "unroll":
            copies = math.prod(q.extent for q in nest.loops if q.kind == "unrolled" and q is not lp) * lp.extent
            if copies > self.MAX_UNROLLED:
                return None  # legal, but slow to compile: not worth it
            expect = "legal"
        elif verb == "vectorize" and self.op.stage(stage).lhs is not None and not self.plain_lanes(stage, axis):
            expect = "illegal"  # a scatter's lanes could update one element
        elif verb == "vectorize":
            i = nest.names().index(axis)
            if (lp.extent <= 64 and not lp.reduction
                    and not any(q.kind == "vectorized" for q in nest.loops if q is not lp)
                    and not any(q.kind == "parallel" for q in nest.loops[i + 1:])
                    and not set(nest.names()[i:]) & self.named_loops(stage)):
                expect = "legal"
        elif verb == "parallel":
            i = nest.names().index(axis)
            computed_here = {o.attach.axis for o in self.s.state().stages.values() if _at(o.attach, stage)}
            if (not isinstance(self.attach(stage), At)
                    and not any(q.kind == "parallel" for q in nest.loops if q is not lp)
                    and not any(q.kind == "vectorized" for q in nest.loops[:i])
                    and not set(nest.names()[i:]) & computed_here):  # (those need disjoint regions)
                expect = "legal"
        text = f"s[{_q(stage)}].{verb}({_q(axis)})"
        return text, lambda: getattr(self.s[stage], verb)(axis), expect

    def plain_lanes(self, stage, axis) -> bool:
        """Whether loop `axis` of scatter `stage` runs over plain left-side indices only (its lanes update distinct
        elements)."""
        st = self.op.stage(stage)
        plain = set(st.lhs_vars) - set(st.scatter_vars)
        return {v for v, e in self.nest(stage).exprs.items() if axis in expr_vars(e)} <= plain

    def p_vectorize(self, stage):
        return self._annotate(stage, "vectorize")

    def p_unroll(self, stage):
        return self._annotate(stage, "unroll")

    def p_parallel(self, stage):
        return self._annotate(stage, "parallel")

    def p_serial(self, stage):
        return self._annotate(stage, "serial")

    def p_compute_at(self, stage):
        producer = stage
        if self.src.chance(85):  # mostly a producer that is not an output
            inner = [n for n in self.stage_names if n not in self.op.outputs]
            if inner:
                producer = self.src.pick(inner)
        readers = self.readers(producer)
        if readers and self.src.chance(80):
            consumer = self.src.pick(readers)
        else:
            consumer = self.src.pick(self.stage_names)
        axis = self.any_loop(consumer)
        expect = None
        if producer in self.op.outputs or consumer == producer or self.loop(consumer, axis) is None \
                or self.scan(producer):
            expect = "illegal"
        text = f"s[{_q(producer)}].compute_at(s[{_q(consumer)}], {_q(axis)})"
        return text, lambda: self.s[producer].compute_at(self.s[consumer], axis), expect

    def p_store_at(self, stage):
        """store_at (at a loop of the consumer outside the compute loop, or another loop) or store_root, mostly of
        a stage computed at a consumer's loop."""
        at = [n for n in self.stage_names if isinstance(self.attach(n), At)]
        if at and self.src.chance(90):
            stage = self.src.pick(at)
        a = self.attach(stage)
        if not isinstance(a, At):
            return f"s[{_q(stage)}].store_root()", lambda: self.s[stage].store_root(), "illegal"
        loops = self.s[a.consumer].loops()
        outside = loops[:loops.index(a.axis)] if a.axis in loops else []
        if self.src.chance(35) or not (outside or self.src.chance(20)):
            return f"s[{_q(stage)}].store_root()", lambda: self.s[stage].store_root(), None
        axis = self.src.pick(outside) if outside and self.src.chance(85) else self.any_loop(a.consumer)
        expect = "illegal" if axis not in outside else None
        text = f"s[{_q(stage)}].store_at(s[{_q(a.consumer)}], {_q(axis)})"
        return text, lambda: self.s[stage].store_at(self.s[a.consumer], axis), expect

    def p_fold_storage(self, stage):
        """fold_storage of a dimension of a stage, mostly one with a store_at, by a small factor (now and then 0)."""
        stored = [n for n in self.stage_names if self.s.state().stages[n].store_at is not None]
        if stored and self.src.chance(90):
            stage = self.src.pick(stored)
        dims = list(self.op.stage(stage).lhs_vars)
        dim = self.src.pick(dims) if dims and self.src.chance(95) else "nope"
        size = self.s.state().bound.shapes[stage][dims.index(dim)] if dim in dims else 1  # rfactor's stages too
        # small (may be below the rows live at once), or the whole dimension (always enough), or 0
        factor = self.src.weighted([(self.src.int(1, 9), 50), (size + self.src.int(0, 2), 42), (0, 8)])
        expect = None
        if self.s.state().stages[stage].store_at is None or dim not in dims or factor < 1:
            expect = "illegal"
        text = f"s[{_q(stage)}].fold_storage({_q(dim)}, {factor})"
        return text, lambda: self.s[stage].fold_storage(dim, factor), expect

    def p_compute_inline(self, stage):
        if self.src.chance(80):
            inner = [n for n in self.stage_names if n not in self.op.outputs]
            if inner:
                stage = self.src.pick(inner)
        st = self.op.stage(stage)
        expect = "illegal" if stage in self.op.outputs or st.reduce_op is not None or self.scan(stage) else None
        return f"s[{_q(stage)}].compute_inline()", lambda: self.s[stage].compute_inline(), expect

    def p_compute_root(self, stage):
        # legal, unless a stage computed at another's loop would be left with a reader computed elsewhere
        at = any(isinstance(o.attach, At) for o in self.s.state().stages.values())
        return f"s[{_q(stage)}].compute_root()", lambda: self.s[stage].compute_root(), None if at else "legal"

    def p_cache_write(self, stage):
        axis = self.any_loop(stage)
        expect = "illegal" if self.loop(stage, axis) is None or self.scan(stage) else None
        return f"s[{_q(stage)}].cache_write({_q(axis)})", lambda: self.s[stage].cache_write(axis), expect

    def layout(self, rank):
        """(layout, valid): a random cache_read layout, valid (by CacheRead's rules) or not."""
        src = self.src
        k = src.weighted([("none", 35), ("perm", 30), ("blocked", 22), ("bad", 13)])
        dims = list(range(rank))
        if k == "none":
            return (), True
        if k in ("perm", "blocked") and rank:
            keep = [d for d in dims if src.chance(80)] or [src.pick(dims)]
            order = []
            while keep:
                order.append(keep.pop(src.int(0, len(keep) - 1)))
            lay = [(d, 0) for d in order]
            if k == "blocked":
                d = src.pick(order)
                pos = src.int(0, lay.index((d, 0)))
                lay.insert(pos, (d, src.int(1, 5)))
            return tuple(lay), True
        bad = src.weighted([("dim", 30), ("neg", 20), ("twice", 20), ("two_blocks", 15), ("flat", 10),
                            ("short", 5)])
        if bad == "dim":
            return ((src.pick([rank, rank + 1, -1]), 0),), False
        if bad == "neg":
            return ((src.pick(dims or [0]), -2),), False
        if bad == "twice":
            d = src.pick(dims or [0])
            return ((d, 0), (d, 0)), False
        if bad == "two_blocks":
            d = src.pick(dims or [0])
            return ((d, 2), (d, 3)), False
        if bad == "flat":  # the nesting forgotten: layout=(0, 1)
            return tuple(dims) or (0,), False
        if bad == "short":
            return ((src.pick(dims or [0]),),), False
        raise AssertionError(bad)

    def p_cache_read(self, stage):
        reads = self.reads(stage)
        others = [t for t in list(self.op.inputs) + self.stage_names if t not in reads]
        tensor = self.src.pick(reads) if reads and (not others or self.src.chance(90)) else self.src.pick(others)
        axis = self.any_loop(stage)
        layout, valid = self.layout(self.rank(tensor))
        expect = None
        if tensor not in reads or self.loop(stage, axis) is None or not valid or (tensor == stage and self.scan(stage)):
            expect = "illegal"
        extra = f", layout={layout!r}" if layout else ""
        text = f"s[{_q(stage)}].cache_read({_q(tensor)}, {_q(axis)}{extra})"
        return text, lambda: self.s[stage].cache_read(tensor, axis, layout=layout), expect

    def p_rfactor(self, stage):
        """rfactor over a reduction loop (mostly); legal where the stage is a reduction at the root whose loops only
        splits of its reduction loops made, with nothing cached or computed at them."""
        st, state = self.op.stage(stage), self.s.state()
        red_loops = [lp.name for lp in self.nest(stage).loops if lp.reduction]
        axis = self.src.pick(red_loops) if red_loops and self.src.chance(85) else self.any_loop(stage)
        lp = self.loop(stage, axis)
        red = set(st.red_vars)
        for q in state.loop_prims[stage]:
            red = red | {q.outer, q.inner} if isinstance(q, Split) and q.axis in red else set()
        # a boundary index proven in range over the reduction's domain may leave its tensor over a split's tail,
        # which the partial stage reads (refused, naming the read)
        boundary = any(isinstance(ix, BoundaryIndex) for a in st.accesses() for ix in a.indices)
        if st.reduce_op is None or lp is None or not lp.reduction:
            expect = "illegal"
        elif boundary:
            expect = None
        elif (red and state.stages[stage].attach == Root() and not state.stages[stage].cache_write
              and not state.stages[stage].cache_reads and not self.named_loops(stage)
              and not any(getattr(o.attach, "producer", None) == stage for o in state.stages.values())):
            expect = "legal"
        else:
            expect = None
        lhs = list(st.lhs_vars)

        def want(loops, result):
            return lhs + [axis]
        return f"s[{_q(stage)}].rfactor({_q(axis)})", lambda: self.s[stage].rfactor(axis), expect, want

    def p_bad_stage(self, stage):
        name = self.src.pick(list(self.op.inputs) + ["nope"])
        return f"s[{_q(name)}]", lambda: self.s[name], "illegal"

    # ---- reporting ----
    def report(self, what: str) -> str:
        calls = "\n".join(self.log[1:]) or "(none)"
        return (f"{what}\n--- program: {self.case.describe()}\n--- schedule (print(s)):\n{self.s}\n"
                f"--- every call made, rejected ones included:\n{calls}")

    def fail(self, what: str, exc: BaseException | None = None, minimize: bool = False):
        msg = self.report(what)
        if exc is not None:
            msg += f"\n--- the error: {type(exc).__name__}: {exc}"
        if minimize:
            msg += "\n" + minimized_report(self.case, self.s)
        raise FuzzFailure(msg)


# --------------------------------------------------------------------------------------------- minimizing
def random_inputs(op, s, seed=0) -> list:
    """Inputs for `op` at the sizes of schedule `s`: multiples of 1/8 in [-2, 2], ints in [-3, 3]."""
    rng = np.random.default_rng(seed)
    out = []
    for p in op.params:
        shape = s.bound.shapes[p.name]
        if p.dtype in progen.INT_DTYPES:  # (an unsigned type's -3 wraps to its top: numpy's astype)
            out.append(np.asarray(rng.integers(-3, 4, size=shape)).astype(progen.NP_DTYPES[p.dtype]))
        else:
            out.append(np.asarray(rng.integers(-16, 17, size=shape) / 8.0, dtype=progen.NP_DTYPES[p.dtype]))
    return out


def agrees_with_numpy(case: Case, o: str, got) -> bool:
    """Whether float output `o` of a scheduled kernel is within the oracle's tolerance of numpy's own result, the
    budget the unscheduled kernel had to meet: where a sum cancels whatever the inputs are (tanh(-1) + tanh(0) +
    tanh(1)), the unscheduled kernel's result is rounding noise (2**-26) and a reordered one may be the exact 0."""
    want = case.oracle.get(o)
    if want is None:
        return False
    a, b = (np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32)) if case.compare_f32.get(o) \
        else (np.asarray(got), np.asarray(want))
    try:
        assert_close(a, b.astype(a.dtype), case.reduction_len[o])
    except AssertionError:
        return False
    return True


def cancelled(case: Case, o: str, got, want, s) -> bool:
    """Whether a mismatch of float output `o` is rounding in a sum that cancelled: the inputs are multiples of
    1/8, so a reduction often sums to exactly 0 and leaves only the rounding of its terms, which a reordering or
    a fused multiply-add changes (0 against 2**-26, say); the oracle's tolerance, scaled by the expected values,
    is then far too tight. The difference must be NaN-free and within the tolerance scaled by the output's
    typical size: the root-mean-square of the unscheduled kernel's output on two other random inputs."""
    g64, w64 = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not np.array_equal(np.isfinite(g64), np.isfinite(w64)):
        return False
    fin = np.isfinite(w64)
    if not np.array_equal(g64[~fin], w64[~fin], equal_nan=True):
        return False
    unscheduled = tl.build(case.op, schedule="naive", **case.sizes)
    typical = []
    for seed in (1, 2):
        i = case.op.outputs.index(o)
        out = np.asarray(_as_tuple(unscheduled(*random_inputs(case.op, s, seed)))[i], np.float64)
        typical.append(out[np.isfinite(out)])
    typical = np.concatenate(typical)
    scale = float(np.sqrt(np.mean(typical * typical))) if typical.size else 0.0
    diff = float(np.max(np.abs(g64[fin] - w64[fin]))) if fin.any() else 0.0
    return scale > 0.0 and diff <= tolerance(np.asarray(want).dtype, case.reduction_len[o]) * scale


def rounding_sensitive(case: Case, o: str, got, want) -> bool:
    """Whether a mismatch of float output `o` is within how far the unscheduled kernel's own result moves when each
    float input moves by about one unit in the last place: an element that amplifies rounding (the square root of
    a sum that cancels to 0: 2**-28 against 2**-25 before the root, 6e-5 against 1.7e-4 after) is judged by that
    spread, four draws, times 4; a wrong value on a well-conditioned element still fails."""
    unscheduled = tl.build(case.op, schedule="naive", **case.sizes)
    i = case.op.outputs.index(o)

    def run(*arrays):
        return _as_tuple(unscheduled(*arrays))[i]
    f32 = np.asarray(want).dtype == np.float32 or case.compare_f32.get(o, False)
    return within_rounding_spread(run, case.inputs, run(*case.inputs), got, want,
                                  tolerance(np.asarray(want).dtype, case.reduction_len[o]), 4,
                                  eps=np.finfo(np.float32 if f32 else np.float64).eps)


def failure_kind(op, sizes: dict, prims: list) -> str | None:
    """How the schedule `prims` of `op` at `sizes` fails (a short label), or None: it is refused by a primitive
    (not a legal schedule) or it computes what the unscheduled kernel computes (random inputs, loose tolerance:
    this is for shrinking failures that were found with the strict oracle)."""
    try:
        s = tl.Schedule(op, sizes, list(prims))
    except (tl.ScheduleError, tl.BuildError):
        return None
    try:
        s.lowered(strict=True)
    except tl.ScheduleError:
        return "late-ScheduleError"
    except tl.BuildError as e:
        m = _UNPROVEN.search(str(e))
        return f"strict-BuildError {m.group(1)} {m.group(2)}" if m else f"strict-BuildError {str(e)[:40]}"
    except Exception as e:
        return f"lower-crash {type(e).__name__}"
    try:
        kernel = tl.build(s)
    except Exception as e:
        return f"build-error {type(e).__name__}"
    inputs = random_inputs(op, s)
    want = _as_tuple(tl.build(op, schedule="naive", **sizes)(*inputs))
    outs = [np.full(w.shape, np.nan if np.issubdtype(w.dtype, np.floating) else 7, w.dtype) for w in want]
    got = _as_tuple(kernel(*inputs, out=outs[0] if len(outs) == 1 else tuple(outs)))
    for o, g, w in zip(op.outputs, got, want):
        if not np.issubdtype(w.dtype, np.floating):
            if not np.array_equal(g, w):
                return f"wrong-result {o}"
            continue
        w64, g64 = w.astype(np.float64), g.astype(np.float64)
        fin = w64[np.isfinite(w64)]
        scale = float(np.sqrt(np.mean(fin * fin))) if fin.size else 1.0
        if not np.allclose(g64, w64, rtol=1e-3, atol=1e-3 * (scale or 1.0), equal_nan=True):
            return f"wrong-result {o}"
    return None


def minimize(op, sizes: dict, prims: list, budget_s: float = 60.0):
    """Shrink a failing schedule: drop primitives, lower sizes, lower split factors, keeping its failure_kind.
    Returns (sizes, prims, kind); kind is None when the failure does not reproduce."""
    t0 = time.perf_counter()
    target = failure_kind(op, sizes, prims)
    if target is None:
        return sizes, prims, None
    sizes, prims = dict(sizes), list(prims)

    def same(sz, ps):
        return time.perf_counter() - t0 < budget_s and failure_kind(op, sz, ps) == target

    def bindable(sz):
        try:
            tl.schedule(op, **sz)
            return True
        except tl.TensorlangError:
            return False

    progress = True
    while progress and time.perf_counter() - t0 < budget_s:
        progress = False
        for i in range(len(prims)):
            if same(sizes, prims[:i] + prims[i + 1:]):
                prims = prims[:i] + prims[i + 1:]
                progress = True
                break
        if progress:
            continue
        for n, v in sizes.items():
            cands = list(range(1, v)) + ([0] if n in op.int_params and v > 0 else [])
            for c in cands:
                sz = dict(sizes, **{n: c})
                if bindable(sz) and same(sz, prims):
                    sizes, progress = sz, True
                    break
            if progress:
                break
        if progress:
            continue
        for i, p in enumerate(prims):
            if p.NAME == "split" and p.factor > 1:
                for f in range(1, p.factor):
                    q = dataclasses.replace(p, factor=f)
                    if same(sizes, prims[:i] + [q] + prims[i + 1:]):
                        prims[i], progress = q, True
                        break
            if progress:
                break
    return sizes, prims, target


def minimized_report(case: Case, s) -> str:
    """The failing schedule, shrunk by `minimize`, as text for a failure message."""
    try:
        sizes, prims, kind = minimize(case.op, case.sizes, list(s.primitives))
    except Exception as e:  # the report must not hide the failure
        return f"--- (minimizing failed: {type(e).__name__}: {e})"
    if kind is None:
        return "--- (the failure does not reproduce with other inputs: not minimized)"
    small = tl.Schedule(case.op, sizes, prims)
    return f"--- minimized ({kind}), for op = tl.op(<the program above>):\n{small}"


# --------------------------------------------------------------------------------------------- the oracle
def run_schedule(case: Case, src: progen.Src) -> list[str]:
    """Apply 1..8 random primitives to a fresh schedule of `case`, then check it. Returns outcome labels."""
    fz = Fuzzer(case, src)
    for _ in range(src.int(1, 8)):
        fz.step()
    return [check_schedule(fz)] + [f"skipped (known bug {b})" for b in fz.excused]


def check_schedule(fz: Fuzzer) -> str:
    """The schedule round-trips, lowers strictly, and computes what the unscheduled kernel computes."""
    s, case = fz.s, fz.case
    # print(s) is the repro: it must rebuild the same schedule, and so must the JSON form
    ns = {"tl": tl, "op": case.op}
    exec(str(s), ns)  # the text is tensorlang's own printout
    if ns["s"].key() != s.key():
        fz.fail("print(s) does not rebuild the schedule")
    if tl.Schedule.from_json(s.to_json()).key() != s.key():
        fz.fail("Schedule.from_json(s.to_json()) is not the schedule")
    unproven = None  # a known limit of the bounds prover: the build guards the access, the result must be right
    try:
        s.lowered(strict=True)
    except tl.ScheduleError as e:
        if bug := known_failure(s, "late-ScheduleError", e):
            return f"skipped (known bug {bug})"
        fz.fail("s.lowered(strict=True) raised ScheduleError: an illegal schedule must be refused at the "
                "primitive call", e, minimize=True)
    except tl.BuildError as e:
        unproven = known_failure(s, "strict-BuildError", e)
        if unproven is None:
            fz.fail("s.lowered(strict=True) raised BuildError for a schedule whose primitives were all accepted", e,
                    minimize=True)
    except Exception as e:
        if bug := known_failure(s, "lower-crash", e):
            return f"skipped (known bug {bug})"
        e.add_note(fz.report(f"s.lowered(strict=True) crashed with {type(e).__name__}:\n"
                             + "".join(traceback.format_exception_only(e))) + "\n" + minimized_report(case, s))
        raise
    trace(f"{case.describe()}\n{s}")
    try:
        kernel = tl.build(s)
    except Exception as e:
        if bug := known_failure(s, "build-error", e):
            return f"skipped (known bug {bug})"
        e.add_note(fz.report(f"tl.build(s) raised {type(e).__name__} after s.lowered(strict=True) worked") + "\n"
                   + minimized_report(case, s))
        raise
    inputs = case.inputs
    saved = [a.copy() for a in inputs]
    outs = []
    for o in case.op.outputs:
        dt = kernel.output_dtypes[o]
        fill = np.nan if np.issubdtype(dt, np.floating) else 7
        outs.append(np.full(kernel.output_shapes[o], fill, dtype=dt))
    res = _as_tuple(kernel(*inputs, out=outs[0] if len(outs) == 1 else tuple(outs)))
    for name, a, b in zip(case.op.inputs, inputs, saved):
        if not np.array_equal(a, b, equal_nan=True):
            fz.fail(f"the scheduled kernel modified input {name}")
    for o, got, buf in zip(case.op.outputs, res, outs):
        if got is not buf:
            fz.fail(f"the kernel did not return the out= array of {o}")
        want = case.baseline[o]
        a, b = (got.astype(np.float32), want.astype(np.float32)) if case.compare_f32.get(o) else (got, want)
        try:
            assert_close(a, b, case.reduction_len[o], exact=case.exact[o], err_msg=o)
        except AssertionError as e:
            if not case.exact[o] and (agrees_with_numpy(case, o, got) or cancelled(case, o, a, b, s)
                                      or rounding_sensitive(case, o, a, b)):
                continue
            if bug := known_failure(s, "wrong-result", e):
                return f"skipped (known bug {bug})"
            fz.fail(f"WRONG RESULT: output {o} of the scheduled kernel differs from the unscheduled kernel\n{e}",
                    minimize=True)
    return "checked" if unproven is None else f"checked, guarded (known bug {unproven})"
