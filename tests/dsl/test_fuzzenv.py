"""The fuzzers' environment settings and the seed of CI's fresh fuzz slice (tests/support/fuzzenv.py)."""
import hashlib
import subprocess

import fuzzenv
import pytest


def test_slice_seed_comes_from_the_commit(monkeypatch):
    monkeypatch.delenv(fuzzenv.SEED_ENV, raising=False)
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=fuzzenv.ROOT, capture_output=True, text=True).stdout.strip()
    if not sha:
        pytest.skip("not a git checkout")
    seed, origin = fuzzenv.slice_seed()
    assert seed == int(hashlib.sha256(sha.encode()).hexdigest()[:8], 16) and origin == f"from commit {sha[:12]}"
    assert fuzzenv.slice_seed() == (seed, origin)  # the same commit, the same slice


def test_slice_seed_without_git_is_a_fixed_one_and_says_so(monkeypatch):
    monkeypatch.delenv(fuzzenv.SEED_ENV, raising=False)

    def no_git(*args, **kwargs):
        raise FileNotFoundError("git")
    monkeypatch.setattr(fuzzenv.subprocess, "run", no_git)
    assert fuzzenv.slice_seed() == (fuzzenv.FIXED_SEED, "a fixed seed: no git commit found to derive one from")
    monkeypatch.setattr(fuzzenv.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 128, "", "no repo"))
    assert fuzzenv.slice_seed()[0] == fuzzenv.FIXED_SEED


def test_slice_seed_from_the_variable(monkeypatch):
    monkeypatch.setenv(fuzzenv.SEED_ENV, "12345")
    assert fuzzenv.slice_seed() == (12345, f"from {fuzzenv.SEED_ENV}")
    monkeypatch.setenv(fuzzenv.SEED_ENV, "0x12")
    with pytest.raises(fuzzenv.BadSetting, match="TENSORLANG_FUZZ_SLICE_SEED='0x12': use an integer >= 0"):
        fuzzenv.slice_seed()


@pytest.mark.parametrize("name,value", [("TENSORLANG_FUZZ_RANDOM", "yes"), ("TENSORLANG_SCHEDULE_FUZZ_KNOWN", "true"),
                                        ("TENSORLANG_SCHEDULE_FUZZ_SHRINK", "2")])
def test_flags_take_0_or_1(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(fuzzenv.BadSetting, match=f"{name}='{value}': use 1 \\(on\\) or 0"):
        fuzzenv.flag(name)
    monkeypatch.setenv(name, "1")
    assert fuzzenv.flag(name)
    monkeypatch.setenv(name, "0")
    assert not fuzzenv.flag(name)


@pytest.mark.parametrize("value", ["many", "0", "-5", "2e4", "20,000"])
def test_counts_are_positive_integers(monkeypatch, value):
    monkeypatch.setenv("TENSORLANG_SCHEDULE_FUZZ", value)
    with pytest.raises(fuzzenv.BadSetting, match=f"TENSORLANG_SCHEDULE_FUZZ='{value}': use an integer >= 1"):
        fuzzenv.count("TENSORLANG_SCHEDULE_FUZZ", 1000)
    monkeypatch.setenv("TENSORLANG_SCHEDULE_FUZZ", " 20000 ")
    assert fuzzenv.count("TENSORLANG_SCHEDULE_FUZZ", 1000) == 20000


def test_trace_file_needs_an_existing_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("TENSORLANG_SCHEDULE_FUZZ_TRACE", str(tmp_path / "nosuch" / "trace.txt"))
    with pytest.raises(fuzzenv.BadSetting, match="the folder of that file does not exist"):
        fuzzenv.path("TENSORLANG_SCHEDULE_FUZZ_TRACE")
    monkeypatch.setenv("TENSORLANG_SCHEDULE_FUZZ_TRACE", str(tmp_path / "trace.txt"))
    assert fuzzenv.path("TENSORLANG_SCHEDULE_FUZZ_TRACE") == str(tmp_path / "trace.txt")
