"""MkDocs hook: the API reference reads the packages as they install, under the one import name `tensorlang`.

The folders schedules/, tuner/ and cli/ become tensorlang.schedules, tensorlang.tuner and tensorlang.cli through
pyproject.toml's package-dir mapping, which griffe (mkdocstrings' reader, which reads folders and imports nothing)
does not know. Before the site is built this hook makes that layout out of links in a temporary folder, with
tensorlang/'s own entries beside the mapped folders, and points mkdocstrings at it.
"""
from __future__ import annotations

import atexit
import pathlib
import shutil
import tempfile
import tomllib

from mkdocs.plugins import event_priority

ROOT = pathlib.Path(__file__).resolve().parents[2]


def layout() -> pathlib.Path:
    """A folder holding `tensorlang/` as it installs: links to tensorlang/'s entries and to each mapped folder."""
    mapping = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    site = pathlib.Path(tempfile.mkdtemp(prefix="tensorlang-docs-"))
    atexit.register(shutil.rmtree, site, ignore_errors=True)
    package = site / "tensorlang"
    package.mkdir()
    for entry in (ROOT / mapping["tensorlang"]).iterdir():
        (package / entry.name).symlink_to(entry)
    for name, folder in mapping.items():
        if name != "tensorlang":
            (site / name.replace(".", "/")).symlink_to(ROOT / folder)
    return site


@event_priority(100)  # before mkdocstrings reads its configuration
def on_config(config):
    handler = config.plugins["mkdocstrings"].config.handlers.setdefault("python", {})
    handler["paths"] = [str(layout())]
    return config
