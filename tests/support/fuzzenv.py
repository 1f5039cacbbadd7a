"""The fuzzers' settings from the environment, and the seed of the fresh slice that CI adds to their fixed set.

Every variable takes only the values it documents: anything else stops the test run with an error naming the
variable and its legal values (a typo like ``TENSORLANG_FUZZ_RANDOM=yes`` would otherwise run the fixed set and
look like a random run).

The fresh slice: besides the fixed (derandomized) examples, each fuzz test file has a test that draws new
examples from a seed derived from the commit under test (``git rev-parse HEAD``), so that every commit covers
examples no earlier commit ran while a given commit's run stays deterministic. The seed is printed in pytest's
header, and ``TENSORLANG_FUZZ_SLICE_SEED=N`` reproduces a slice (or picks another). Without git (an exported
tarball, no git program) the seed is a fixed one, and the header says so.

Example::

    >>> import os
    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"TENSORLANG_FUZZ_EXAMPLES": "20000"}):
    ...     count("TENSORLANG_FUZZ_EXAMPLES", 500)
    20000
    >>> with mock.patch.dict(os.environ, {"TENSORLANG_FUZZ_RANDOM": "yes"}):
    ...     flag("TENSORLANG_FUZZ_RANDOM")
    Traceback (most recent call last):
    ...
    fuzzenv.BadSetting: TENSORLANG_FUZZ_RANDOM='yes': use 1 (on) or 0 (off, the default)
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED_ENV = "TENSORLANG_FUZZ_SLICE_SEED"
FIXED_SEED = 18  # the slice's seed where there is no git commit to derive one from


class BadSetting(ValueError):
    """An environment variable of the fuzzers has a value it does not take."""


def count(name: str, default: int, lo: int = 1) -> int:
    """The integer ``>= lo`` in variable `name` (``default`` when unset or empty)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not re.fullmatch(r"[0-9]+", text) or int(text) < lo:
        raise BadSetting(f"{name}={text!r}: use an integer >= {lo} (default {default})")
    return int(text)


def flag(name: str) -> bool:
    """Whether variable `name` is 1 (0 or unset: off)."""
    text = os.environ.get(name, "").strip()
    if text not in ("", "0", "1"):
        raise BadSetting(f"{name}={text!r}: use 1 (on) or 0 (off, the default)")
    return text == "1"


def path(name: str) -> str:
    """A file path in variable `name` ("" when unset); its folder must exist."""
    text = os.environ.get(name, "").strip()
    if text and not os.path.isdir(os.path.dirname(os.path.abspath(text))):
        raise BadSetting(f"{name}={text!r}: the folder of that file does not exist")
    return text


def _commit() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    sha = r.stdout.strip()
    return sha if r.returncode == 0 and re.fullmatch(r"[0-9a-f]{40,64}", sha) else None


def slice_seed() -> tuple[int, str]:
    """(seed, where it came from) of the fresh slice: ``$TENSORLANG_FUZZ_SLICE_SEED``, else a hash of the commit,
    else FIXED_SEED."""
    if os.environ.get(SEED_ENV, "").strip():
        return count(SEED_ENV, 0, lo=0), f"from {SEED_ENV}"
    sha = _commit()
    if sha is None:
        return FIXED_SEED, "a fixed seed: no git commit found to derive one from"
    return int(hashlib.sha256(sha.encode()).hexdigest()[:8], 16), f"from commit {sha[:12]}"


SLICE_SEED, SLICE_ORIGIN = slice_seed()
SLICE_NOTE = (f"fresh fuzz slice seed {SLICE_SEED} ({SLICE_ORIGIN}); reproduce with "
              f"{SEED_ENV}={SLICE_SEED}")
