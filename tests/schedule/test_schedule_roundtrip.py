"""Printing and round trips: the docstring example of each primitive checked against `lower()`, and every
schedule the primitive tests build rebuilt from its JSON and from its printed Python with the same loop IR.

This file imports the primitive tests' files, so that `CASES` holds every registered case whatever else is
collected, and sorts after them, so that `test_zz_roundtrip_every_schedule_built` replays every schedule they built
in this process.

Run: ``.venv/bin/pytest tests/schedule/test_schedule_roundtrip.py -q``
"""
from __future__ import annotations

import pytest

# the primitive tests' files (the same modules pytest collects): importing them registers their cases
import test_schedule_annotations  # noqa: F401
import test_schedule_caches  # noqa: F401
import test_schedule_errors  # noqa: F401
import test_schedule_loops  # noqa: F401
import test_schedule_placement  # noqa: F401
from schedule_cases import encloses, loop_header, loop_order
from schedule_checks import BUILT, CASES, default_text, lower_or_error, new, roundtrip


# =====================================================================================================
# the docstring examples of each primitive, checked against lower()
# =====================================================================================================
def test_doc_split():
    s = new("scale", N=10)
    s["B"].split("i", 4)
    text = s.lower()
    assert loop_header(text, "i_o") == "for i_o in 0:3:" and loop_header(text, "i_i") == "for i_i in 0:4:"
    assert "i = i_i + i_o*4" in text and "if i <= 9:" in text           # the docstring's `if i < 10`


def test_doc_tile():
    s = new("mm", M=64, N=64, K=4)
    s["C"].tile("m", "n", 32, 32)
    text = s.lower()
    assert loop_order(text) == ["m_o", "n_o", "m_i", "n_i", "k"]
    assert loop_header(text, "m_o") == "for m_o in 0:2:" and loop_header(text, "n_i") == "for n_i in 0:32:"


def test_doc_reorder():
    s = new("mm", M=4, N=4, K=4)
    s["C"].reorder("k", "n")
    # the update nest is m, k, n; k now encloses an output loop, so C is initialised by a nest of its own
    assert loop_order(s.lower()) == ["m", "n", "m", "k", "n"]
    assert encloses(s.lower(), "k", "n")


def test_doc_fuse():
    s = new("tri", M=3, N=4)       # B[j, i]: j in 0:4, i in 0:3, as the docstring's m in 0:4, n in 0:3
    s["B"].fuse("j", "i")
    text = s.lower()
    assert loop_header(text, "j_i") == "for j_i in 0:12:"
    assert "j = j_i//3" in text and "i = j_i%3" in text


def test_doc_vectorize():
    s = new("scale", N=64)
    s["B"].split("i", 16)
    s["B"].vectorize("i_i")
    assert "for i_i in 0:16:  # vectorized\n      i = i_i + i_o*16\n      B[i] = A[i]*2f + 1f" in s.lower()


def test_doc_unroll():
    s = new("rowsum", M=3, K=8)
    s["B"].split("k", 2)
    s["B"].unroll("k_i")
    text = s.lower()
    # lower() keeps the loop, marked; the copies are made by the code generator
    assert loop_header(text, "k_i") == "for k_i in 0:2:  # unrolled"
    assert "B[m] = B[m] + A[m, k]" in text


def test_doc_parallel():
    s = new("mm", M=64, N=4, K=4)
    s["C"].split("m", 8)
    s["C"].parallel("m_o")
    assert loop_header(s.lower(), "m_o") == "for m_o in 0:8:  # parallel"


def test_doc_serial():
    s = new("scale", N=64)
    s["B"].split("i", 16)
    before = s.lower()
    s["B"].vectorize("i_i")
    assert s.lower() != before
    s["B"].serial("i_i")
    assert s.lower() == before


def test_doc_compute_at():
    s = new("blur_i32", N=6)       # P[i] = A[i - 1] where i in 0:N+2, as the docstring's P[y] = I[y-1]
    s["P"].compute_at(s["B"], "i")
    text = s.lower()
    assert encloses(text, "i", "P.i") and loop_header(text, "P.i") == "for P.i in 0:3:"
    # rows i .. i+2 of P, never past its end (i + 2 <= 7): no guard
    assert "P:i = P.i + i" in text and "min(" not in text and "if " not in text
    assert "allocate P: i32[3]" in text and "B[i] = P[0] + 2*P[1] + P[2]" in text  # stored in the loop


def test_doc_compute_inline():
    s = new("chain", N=2, M=2)
    s["T2"].compute_inline()
    s["T1"].compute_inline()
    assert "E[i, j] = " in s.lower() and "A[i, j]*2f + B[i, j]" in s.lower()


def test_doc_compute_root():
    s = new("stencil3", N=13)
    s["B"].compute_at(s["C"], "i")
    s["B"].compute_root()
    assert s.lower() == default_text(s)


def test_doc_cache_write():
    s = new("mm", M=8, N=8, K=4)
    s["C"].tile("m", "n", 4, 4)
    s["C"].reorder("m_o", "n_o", "k", "m_i", "n_i")
    s["C"].cache_write("n_o")
    text = s.lower()
    assert "C_local[m_i, n_i] = 0f" in text
    assert "C_local[m_i, n_i] = C_local[m_i, n_i] + A[m, k]*B[k, n]" in text
    assert "C[m, n] = C_local[m_i, n_i]" in text


def test_doc_cache_read():
    s = new("mm", M=32, N=32, K=512)
    s["C"].split("k", 256)
    s["C"].split("n", 16)
    s["C"].reorder("k_o", "m", "n_o", "k_i", "n_i")
    s["C"].cache_read("B", "k_o", layout=((1, 16), (0, 0), (1, 0)))
    text = s.lower()
    assert "allocate B_C_local: f32[2, 256, 16]" in text
    assert "B_C_local[B_C_local_0, B_C_local_1, B_C_local_2] = B[B_C_local_1 + k_o*256, B_C_local_0*16 + " \
        "B_C_local_2]" in text
    assert "B_C_local[n_o, k_i, n_i]" in text


# =====================================================================================================
# round trips: JSON and the printed Python rebuild the same loop IR
# =====================================================================================================
@pytest.mark.parametrize("name", sorted(CASES))
def test_roundtrip_case(name):
    s = CASES[name]()
    assert not lower_or_error(s).startswith("ScheduleError")
    roundtrip(s)


def test_zz_roundtrip_every_schedule_built():
    """Runs last: every schedule the primitive tests built in this process (the cases at least; this file
    sorts after theirs)."""
    if len(BUILT) < len(CASES):             # run alone or on a worker that got few tests
        for name in sorted(CASES):
            CASES[name]()
    assert len(BUILT) >= len(CASES)
    seen = set()
    for s in BUILT:
        key = s.to_json()
        if key in seen:
            continue
        seen.add(key)
        roundtrip(s)


