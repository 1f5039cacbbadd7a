"""The graph passes and the order they run in.

Each pass is a module of its own with one function ``run(graph) -> list[str]`` that changes the graph in place
and returns one line per change it made (what it removed, folded, fused, ...). A pass either keeps what the model
computes or leaves the graph alone. `PIPELINE` is the documented order; `run_pipeline` runs it, verifies the graph
after each pass, and prints what each pass changed when asked (``print_passes=True`` or
``TENSORLANG_PRINT_PASSES=1``).

>>> [name for name, _ in PIPELINE][:3]
['dce', 'cse', 'fold_constants']
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

from ...errors import UsageError
from . import cse, dce, fold_batch_norm, fold_constants, fusion, layout, noop, simplify, winograd

#: (name, pass function) in the order `compile_graph` runs them; see README "Models: the graph compiler"
PIPELINE = [
    ("dce", dce.run),
    ("cse", cse.run),
    ("fold_constants", fold_constants.run),
    ("fold_batch_norm", fold_batch_norm.run),
    ("noop", noop.run),
    ("simplify", simplify.run),
    ("fold_constants_again", fold_constants.run),
    ("dce_again", dce.run),
    ("winograd", winograd.run),
    ("layout", layout.run),
    ("fusion", fusion.run),
]
PASS_NAMES = tuple(dict.fromkeys(n.removesuffix("_again") for n, _ in PIPELINE))


@dataclass
class PassReport:
    """What one pass did: its name, the change lines, nodes before and after, and its time."""

    name: str
    changes: list[str] = field(default_factory=list)
    nodes_before: int = 0
    nodes_after: int = 0
    seconds: float = 0.0

    def __str__(self) -> str:
        head = (f"[{self.name}] {len(self.changes)} change{'s' if len(self.changes) != 1 else ''}, nodes "
                f"{self.nodes_before} -> {self.nodes_after} ({self.seconds * 1e3:.1f} ms)")
        return "\n".join([head] + [f"  {c}" for c in self.changes[:200]] +
                         ([f"  ... and {len(self.changes) - 200} more"] if len(self.changes) > 200 else []))


def print_requested(flag: bool | None = None) -> bool:
    """Whether to print the passes' changes: `flag` if given, else TENSORLANG_PRINT_PASSES (0 or 1).

    >>> print_requested(True), print_requested(False)
    (True, False)
    """
    if flag is not None:
        return bool(flag)
    text = os.environ.get("TENSORLANG_PRINT_PASSES", "").strip()
    if text in ("", "0"):
        return False
    if text == "1":
        return True
    raise UsageError(f"TENSORLANG_PRINT_PASSES={text!r}: set it to 1 (print what each pass changed) or 0")


def select(skip=(), options: dict | None = None) -> list:
    """The pipeline without the passes named in `skip` (names from PASS_NAMES), with the pass `options` of
    `tensorlang.graph.pass_options` (``layout_block``: 0 leaves the layout pass out, else its block;
    ``fuse_reductions``; ``winograd``: False leaves the winograd pass out), or UsageError.

    >>> [n for n, _ in select(skip=("layout", "fusion"))][-1]
    'winograd'
    >>> "layout" in [n for n, _ in select(options={"layout_block": 0})]
    False
    """
    import functools

    from ..pass_options import check_pass_options
    unknown = set(skip) - set(PASS_NAMES)
    if unknown:
        raise UsageError(f"unknown pass {sorted(unknown)[0]!r}; passes: {', '.join(PASS_NAMES)}")
    options = check_pass_options(options or {})
    out = []
    for n, f in PIPELINE:
        if (n.removesuffix("_again") in skip or (n == "layout" and options.get("layout_block") == 0)
                or (n == "winograd" and options.get("winograd") is False)):
            continue
        if n == "layout" and options.get("layout_block"):
            f = functools.partial(layout.run, block=options["layout_block"])
        if n == "fusion" and options.get("fuse_reductions") is False:
            f = functools.partial(fusion.run, fuse_reductions=False)
        out.append((n, f))
    return out


def run_pipeline(graph, passes=None, print_passes: bool | None = None, out=None) -> list[PassReport]:
    """Run `passes` (default: PIPELINE) over `graph` in place, verifying it after each; returns the reports.

    Example::

        reports = run_pipeline(graph, print_passes=True)   # prints "[dce] 2 changes, nodes 40 -> 38 ..."
    """
    from ..verify import verify
    show = print_requested(print_passes)
    reports = []
    for name, fn in (PIPELINE if passes is None else passes):
        before = len(list(graph.all_nodes()))
        t0 = time.perf_counter()
        changes = fn(graph)
        graph.prune_constants()
        report = PassReport(name, changes, before, len(list(graph.all_nodes())), time.perf_counter() - t0)
        verify(graph, after=name)
        reports.append(report)
        if show:
            print(report, file=out or sys.stderr)
    return reports
