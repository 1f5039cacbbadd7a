"""What the schedule primitive tests (tests/schedule/test_schedule_*.py) share: the registry of the schedules they
build, a strict run against the program's numpy oracle, the check that a refused primitive leaves the schedule
unchanged, and the JSON / printed-Python round trip.

Every schedule those tests build comes from `new()`, which keeps it in `BUILT`; the named schedules of the primitive
tests come from builders registered with `case()` in `CASES`, so that the round-trip tests
(test_schedule_roundtrip.py) can rebuild each one in whatever process (pytest-xdist worker) runs them.

Example::

    >>> s = new("scale", N=10)
    >>> _ = s["B"].split("i", 4)
    >>> s in BUILT
    True
    >>> roundtrip(s)
    >>> msg = refuse(s, lambda: s["B"].split("zz", 2), "split(B, zz)", "no loop 'zz'")
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from oracle import assert_close
from schedule_cases import PROGRAMS, make_inputs

import tensorlang as tl

__all__ = ["BUILT", "CASES", "case", "default_text", "llvm", "lower_or_error", "new", "refuse", "roundtrip", "run"]

BUILT: list[tl.Schedule] = []             # every schedule the primitive tests built (in this process)
CASES: dict[str, object] = {}             # name -> builder of a schedule used by a primitive test


def new(program: str, **sizes) -> tl.Schedule:
    """The default schedule of PROGRAMS[program] at `sizes`, remembered for the round-trip test."""
    s = tl.schedule(PROGRAMS[program].op, **sizes)
    BUILT.append(s)
    return s


def case(name: str):
    """Register a schedule builder under `name` (for the round-trip test)."""
    def deco(fn):
        assert name not in CASES, name
        CASES[name] = fn
        return fn
    return deco


def run(s: tl.Schedule, seed: int | None = None):
    """Lower `s` strictly, build it, run it on random inputs and compare with the program's numpy oracle.

    The inputs' seed comes from the schedule unless given, so that a kernel that reads a temporary it never
    wrote cannot pass by finding there the values an earlier test's run of the same program left in freed
    memory. Returns (loop IR text, kernel)."""
    func = s.lowered(strict=True)
    assert func.guards == 0
    text = s.lower()
    prog = PROGRAMS[s.op.name]
    inputs = make_inputs(s, zlib.crc32(s.to_json().encode()) if seed is None else seed)
    k = tl.build(s)
    # outputs start as NaN (or a sentinel): an element the kernel never writes cannot pass as a fresh zero page
    outs = [np.full(k.output_shapes[o], np.nan if np.issubdtype(k.output_dtypes[o], np.floating) else -77,
                    k.output_dtypes[o]) for o in s.op.outputs]
    got = k(*inputs, out=outs[0] if len(outs) == 1 else tuple(outs))
    assert_close(got, prog.reference(*inputs, **s.sizes), prog.red_len(s.sizes), exact=prog.exact,
                 err_msg=f"schedule:\n{s}\nloop IR:\n{text}")
    return text, k


def llvm(k) -> str:
    """The kernel's LLVM IR before optimisation."""
    return k.source("llvm-unoptimized")


def default_text(s: tl.Schedule) -> str:
    """The loop IR of the default schedule of `s`'s program at its sizes."""
    return tl.schedule(s.op, **s.sizes).lower()


def refuse(s: tl.Schedule, action, *needles):
    """`action()` raises ScheduleError whose message holds every needle (a tuple: any of its strings), and `s` is
    unchanged (same primitives, same loop IR)."""
    prims = list(s.primitives)
    text = s.lower()
    with pytest.raises(tl.ScheduleError) as info:
        action()
    msg = str(info.value)
    for n in needles:
        alts = n if isinstance(n, tuple) else (n,)
        assert any(a in msg for a in alts), f"{alts!r} not in {msg!r}"
    assert s.primitives == prims
    assert s.lower() == text
    return msg


def lower_or_error(s: tl.Schedule) -> str:
    """The loop IR text, or the ScheduleError that lowering raises (a schedule an error test left stale)."""
    try:
        return s.lower()
    except tl.ScheduleError as e:
        return f"ScheduleError: {e}"


def roundtrip(s: tl.Schedule) -> None:
    """`s` rebuilt from its JSON (with and without its op) and from its printed Python gives the same primitives
    and the same loop IR."""
    text = lower_or_error(s)
    again = tl.Schedule.from_json(s.to_json())
    assert again.primitives == s.primitives
    assert again.to_json() == s.to_json()
    assert lower_or_error(again) == text
    assert lower_or_error(tl.Schedule.from_json(s.to_json(), op=s.op)) == text
    ns = {"tl": tl, "op": s.op}
    exec(str(s), ns)                                                   # our own printed schedule
    assert ns["s"].primitives == s.primitives
    assert lower_or_error(ns["s"]) == text
