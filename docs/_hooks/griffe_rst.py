"""Griffe extension for the API reference: turn the docstrings' reStructuredText habits into Markdown.

The docstrings are written for `help()` and doctest: ``>>>`` examples, literal blocks after ``::`` and roles such
as :func:`name`. Here a doctest becomes a fenced ``pycon`` block, a literal block a fenced block, and a role plain
code. The docstrings themselves are not changed.
"""
from __future__ import annotations

import re
import textwrap

import griffe

ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|obj|exc):`~?([^`]+)`")


def _fence(block: list[str], lang: str) -> list[str]:
    return ["", f"```{lang}", *textwrap.dedent("\n".join(block)).splitlines(), "```", ""]


def markdown(doc: str) -> str:
    """The Markdown of one docstring."""
    lines = ROLE.sub(r"`\1`", doc).splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            out.append(line.rstrip()[:-1])                      # "before and after::" -> "before and after:"
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            indent = len(lines[i]) - len(lines[i].lstrip())
            block = []
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
                block.append(lines[j])
                j += 1
            while block and not block[-1].strip():
                block.pop()
            if block:
                lang = "pycon" if textwrap.dedent("\n".join(block)).lstrip().startswith(">>>") else "text"
                out += _fence(block, lang)
            i = j
        elif line.lstrip().startswith(">>>"):
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i])
                i += 1
            out += _fence(block, "pycon")
        else:
            out.append(line)
            i += 1
    return "\n".join(out)


class RstToMarkdown(griffe.Extension):
    """Rewrites every loaded object's docstring with `markdown`."""

    def on_instance(self, *, obj, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
