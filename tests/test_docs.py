"""Every module's docstring examples run and give what they show; every public function, class and method has
a docstring, and every public module-level function's shows an example (``>>>``, or ``Example::`` for shell
commands and calls that take seconds).

A module-level name is public when it does not start with ``_``; a method when neither it nor its class does
(dunder methods excepted)."""
from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import io
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: each top-level folder and the import name it installs as (pyproject.toml's package-dir)
PACKAGES = {"tensorlang": "tensorlang", "schedules": "tensorlang.schedules", "tuner": "tensorlang.tuner",
            "cli": "tensorlang.cli"}


def _module_name(path: pathlib.Path) -> str:
    """The import name of a source file: ``tuner/features.py`` -> ``tensorlang.tuner.features``."""
    folder, *rest = path.relative_to(ROOT).with_suffix("").parts
    if rest and rest[-1] == "__init__":
        rest = rest[:-1]
    return ".".join([PACKAGES[folder], *rest])


#: every module but the command line's ``__main__`` (importing it runs the command)
MODULES = sorted(_module_name(p) for folder in PACKAGES for p in (ROOT / folder).rglob("*.py")
                 if p.name != "__main__.py")
_FILES = {_module_name(p): p for folder in PACKAGES for p in (ROOT / folder).rglob("*.py")}


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
    return _FILES[module]


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
    assert {m.split(".")[0] for m in MODULES} == {"tensorlang"}
    assert {"tensorlang.lower", "tensorlang.tuner.measure.local", "tensorlang.schedules.matmul",
            "tensorlang.cli.common", "tensorlang.tuner", "tensorlang.cli"} <= set(MODULES)
    assert all(importlib.util.find_spec(m).origin == str(_FILES[m]) for m in ("tensorlang.tuner.task",
                                                                             "tensorlang.schedules.matmul"))


def test_every_package_is_installed_under_its_import_name():
    import tomllib
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {name: folder for folder, name in PACKAGES.items()}
    found = {_module_name(p) for folder in PACKAGES for p in (ROOT / folder).rglob("__init__.py")}
    assert found == set(config["packages"]), f"pyproject.toml's packages differ: {found ^ set(config['packages'])}"


# ---- the docs site and the README (docs/, mkdocs.yml): what `mkdocs build --strict` does not check ----------------

DOCS = ROOT / "docs"
DATE_OR_SESSION = re.compile(r"20\d\d-\d\d-\d\d|session", re.IGNORECASE)
#: names in the code that look like variables but are C macros of the generated code
C_MACROS = {"TENSORLANG_JIT_RUNTIME", "TENSORLANG_RESTRICT"}


def _pages():
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted(DOCS.rglob("*.md"))]


def development_log_lines(path: pathlib.Path) -> list[str]:
    """The lines of a README or docs page that carry a date or a session account; on the benchmarks page a date is
    allowed on its "measured on" lines only.

    >>> import tempfile
    >>> page = pathlib.Path(tempfile.mkdtemp()) / "benchmarks.md"
    >>> day = "-".join(("2026", "12", "04"))
    >>> _ = page.write_text(f"Measured on {day}: 1.2x\\nFaster since {day}.\\n")
    >>> [hit.split(": ")[0] for hit in development_log_lines(page)]
    ['benchmarks.md:2']
    """
    found = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if DATE_OR_SESSION.search(line) and not (path.name == "benchmarks.md" and "measured on" in line.lower()):
            found.append(f"{path.name}:{n}: {line.strip()}")
    return found


def test_the_readme_is_a_front_door_of_at_most_350_lines():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 350, f"README.md has {len(lines)} lines; move the details to docs/"


def test_the_readme_and_docs_carry_no_development_log():
    found = [hit for page in _pages() for hit in development_log_lines(page)]
    assert not found, "dates or session accounts outside the benchmarks page's measured-on lines:\n" + "\n".join(found)


# ---- the code: no development log in docstrings and comments; one version source ------------------------------------

DATE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
#: the folders whose Python files' docstrings and comments are checked for dates
CODE_FOLDERS = (*PACKAGES, "benchmarks", "tutorials", "tests")


def dated_prose(path: pathlib.Path, root: pathlib.Path | None = None) -> list[str]:
    """The comments and docstrings (every string that stands alone as a statement) of a Python file that carry a
    date (YYYY-MM-DD), named by their path below `root` (else the file's name): a development log, whose place is
    the git history, with figures on docs/benchmarks.md.

    >>> import tempfile
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "m.py"
    >>> day = "-".join(("2026", "11", "28"))
    >>> _ = f.write_text(f'"Fast since {day}."\\nCREATED = "{day}"  # kept until {day}\\n')
    >>> [hit.split(": ")[0] for hit in dated_prose(f)]
    ['m.py:1', 'm.py:2']
    """
    text = path.read_text()
    found = [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(text).readline)
             if tok.type == tokenize.COMMENT and DATE.search(tok.string)]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found += [(node.lineno + i, line) for i, line in enumerate(node.value.value.splitlines())
                      if DATE.search(line)]
    name = path.relative_to(root) if root else path.name
    return [f"{name}:{n}: {line.strip()}" for n, line in sorted(found)]


def test_the_code_carries_no_dates_in_its_docstrings_and_comments():
    found = [hit for folder in CODE_FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))
             for hit in dated_prose(path, ROOT)]
    assert not found, ("dates in docstrings or comments (say why in one line; figures go to docs/benchmarks.md "
                       "with their command):\n" + "\n".join(found))


def test_the_version_has_one_source_that_the_build_reads():
    import tomllib

    import tensorlang
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in config["project"] and "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "tensorlang.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", tensorlang.__version__)
    # every other place that stores the version reads it from there: no module assigns one of its own
    assigned = [str(path.relative_to(ROOT)) for folder in PACKAGES for path in sorted((ROOT / folder).rglob("*.py"))
                for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Assign)
                and any(getattr(target, "id", None) == "__version__" for target in node.targets)]
    assert assigned == ["tensorlang/__init__.py"], assigned


def test_every_tutorial_is_a_page_of_the_docs_in_cells():
    spec = importlib.util.spec_from_file_location("tutorial_pages", DOCS / "_hooks" / "tutorial_pages.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)  # the mkdocs hook that renders the tutorials' pages
    nav = (ROOT / "mkdocs.yml").read_text()
    for path in sorted((ROOT / "tutorials").glob("*.py")):
        assert f"tutorials/{path.stem}.md" in nav, f"mkdocs.yml's nav lacks the tutorial {path.name}"
        source = path.read_text()
        titles = re.findall(r"^# %% (.+)$", source, re.MULTILINE)
        assert titles, f"{path.name} has no `# %% TITLE` cells"
        page = hook.render(source, path.name)
        assert all(f"## {t}" in page for t in titles), f"{path.name}: a cell's title is not a section of its page"
        code = [ln for ln in source.splitlines()[1:] if ln.strip() and not ln.startswith("#") and '"""' not in ln]
        missing = [ln for ln in code if ln not in page]
        assert not missing, f"{path.name}: lines of code missing from its page: {missing[:3]}"


def test_every_environment_variable_the_code_reads_is_documented():
    names = set()
    for folder in (*PACKAGES, "tests", "tutorials"):
        for path in (ROOT / folder).rglob("*.py"):
            names |= set(re.findall(r"(?<![\w-])TENSORLANG_[A-Z_]+", path.read_text()))
    documented = (DOCS / "user-guide" / "environment.md").read_text()
    missing = sorted(n for n in names - C_MACROS if f"`{n}`" not in documented)
    assert not missing, f"docs/user-guide/environment.md does not describe {', '.join(missing)}"
