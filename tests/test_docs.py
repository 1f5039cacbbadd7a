"""Every module's docstring examples run and give what they show; every public function, class and method has
a docstring, and every public module-level function's shows an example (``>>>``, or ``Example::`` for shell
commands and calls that take seconds).

A module-level name is public when it does not start with ``_``; a method when neither it nor its class does
(dunder methods excepted)."""
from __future__ import annotations

import ast
import doctest
import importlib
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("tensorlang", "tuner", "schedules")
MODULES = sorted(str(p.relative_to(ROOT).with_suffix("")).replace("/", ".")
                 for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _public_definitions(path: pathlib.Path):
    """(qualified name, node, whether it is defined at module level) for each public def and class in a file."""
    def walk(body, prefix, top):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                    not node.name.startswith("_"):
                yield f"{prefix}{node.name}", node, top
                if isinstance(node, ast.ClassDef):
                    yield from walk(node.body, f"{prefix}{node.name}.", False)
    yield from walk(ast.parse(path.read_text()).body, "", True)


def _module_path(module: str) -> pathlib.Path:
    return ROOT / (module.replace(".", "/") + ".py")


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module),
                             optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{module}: {result.failed} of {result.attempted} docstring examples failed"


@pytest.mark.parametrize("module", MODULES)
def test_every_public_definition_is_documented(module):
    missing, without_example = [], []
    for name, node, top in _public_definitions(_module_path(module)):
        doc = ast.get_docstring(node)
        if not doc:
            missing.append(name)
        elif top and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                and ">>>" not in doc and "Example" not in doc:
            without_example.append(name)
    assert not missing, f"{module}: no docstring on {', '.join(missing)}"
    assert not without_example, f"{module}: no example in the docstring of {', '.join(without_example)}"


def test_the_checks_see_every_package():
    assert {m.split(".")[0] for m in MODULES} == set(PACKAGES)
    assert "tensorlang.lower" in MODULES and "tuner.measure" in MODULES and "schedules.matmul" in MODULES
