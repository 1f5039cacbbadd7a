"""MkDocs hook: render the runnable tutorials (`tutorials/*.py`) as pages of the site at build time.

A tutorial is a Python script in cells, as Triton's and sphinx-gallery's are: the module docstring is the page's
introduction (its first line the title), a line `# %% TITLE` starts a cell (a section titled TITLE), the comment
lines that open a cell are its prose (Markdown), and the rest of the cell is its code. Code before the first
`# %%` (the imports) is shown as it is. The scripts stay runnable (the tests run them); nothing is executed here.
"""
from __future__ import annotations

import ast
import pathlib
import re

from mkdocs.structure.files import File

CELL = re.compile(r"^# %%(?P<title>.*)$")


def render(source: str, name: str) -> str:
    """The Markdown page of one tutorial's source."""
    tree = ast.parse(source)
    doc = ast.get_docstring(tree) or name
    lines = source.splitlines()
    if tree.body and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant):
        lines = lines[tree.body[0].end_lineno:]
    title, _, intro = doc.partition("\n")
    page = [f"# {title.strip()}", "", intro.strip(), ""]
    cells: list[tuple[str, list[str]]] = [("", [])]
    for line in lines:
        m = CELL.match(line)
        if m:
            cells.append((m["title"].strip(), []))
        else:
            cells[-1][1].append(line)
    for cell_title, body in cells:
        while body and not body[0].strip():
            body.pop(0)
        prose = []
        while body and body[0].startswith("#"):
            prose.append(body.pop(0)[1:].removeprefix(" "))
        while body and not body[-1].strip():
            body.pop()
        if cell_title:
            page += [f"## {cell_title}", ""]
        if prose:
            page += prose + [""]
        if body:
            page += ["```python", *body, "```", ""]
    return "\n".join(page)


def on_files(files, config):
    """Add one generated page per tutorial, `tutorials/NAME.md`."""
    root = pathlib.Path(config.config_file_path).parent
    for path in sorted((root / "tutorials").glob("*.py")):
        files.append(File.generated(config, f"tutorials/{path.stem}.md", content=render(path.read_text(), path.name)))
    return files
