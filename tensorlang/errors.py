"""Error types of tensorlang and the one `check` helper that raises them.

Every error says what is wrong and where: a DSL error points at the source text (line, column and a
caret line), a schedule error names the primitive, the stage and the axis, a build error names the
size or argument.
"""
from __future__ import annotations

import builtins
from dataclasses import dataclass


@dataclass(frozen=True)
class SourceLoc:
    """A range of DSL source text: 1-based line and columns, `end_col` exclusive.

    >>> SourceLoc(2, 5, 9).line
    2
    """

    line: int
    col: int
    end_col: int


class TensorlangError(Exception):
    """Base class of every error tensorlang raises on bad input."""


class DSLError(TensorlangError):
    """An error in DSL text, with the line, the column and a caret under the offending text.

    >>> import tensorlang as tl
    >>> try:
    ...     tl.op("def f(A: f32[N]) -> B:\\n    B[i] = Q[i]")
    ... except tl.DSLError as e:
    ...     (e.line, e.col)
    (2, 12)
    """

    def __init__(self, message: str, loc: SourceLoc | None = None, source: str | None = None,
                 file: str | None = None):
        self.message = message
        self.loc = loc
        self.file = file  # the file the text came from (a DSL file on the command line), named in the message
        self.source = source
        self.line = loc.line if loc else None
        self.col = loc.col if loc else None
        self.end_col = loc.end_col if loc else None
        self.source_line = None
        if loc and source is not None:
            lines = source.splitlines()
            if 1 <= loc.line <= len(lines):
                self.source_line = lines[loc.line - 1]
        super().__init__(self._render())

    def _render(self) -> str:
        where = f"{self.file}, " if self.file else ""
        if self.loc is None:
            return f"{self.file}: {self.message}" if self.file else self.message
        text = f"{where}line {self.line}, column {self.col}: {self.message}"
        if self.source_line is not None and self.col is not None:  # a source line comes with a location
            width = max(1, (self.end_col or self.col + 1) - self.col)
            # keep the line's tabs in the caret line so that the caret lines up however tabs are shown
            pad = "".join(ch if ch == "\t" else " " for ch in self.source_line[:self.col - 1])
            text += f"\n    {self.source_line}\n    {pad}{'^' * width}"
        return text


class ScheduleError(TensorlangError):
    """A schedule primitive that would change what the program computes, or names what does not exist.

    The message starts with the primitive, the stage and the axis: ``split(C, m): factor must be > 0``.
    """


class UsageError(TensorlangError, ValueError):
    """A value that a function, flag, option or environment variable does not take: an unknown workload, strategy
    or knob value, a malformed record, TENSORLANG_NUM_THREADS=0. The message names the argument and says what is
    legal. It is a ValueError too, so code that catches ValueError still catches it; the CLI prints any
    TensorlangError as one line and lets an error of any other kind (a bug) end in its traceback.

    >>> from tensorlang import schedules
    >>> try:
    ...     schedules.get("matmull")
    ... except UsageError as e:
    ...     str(e).split(";")[0]
    "unknown workload 'matmull'"
    """


class BuildError(TensorlangError):
    """Sizes, arguments or a target that a kernel cannot be built or called with."""


class IndexError(TensorlangError, builtins.IndexError):
    """A kernel (or `tl.reference`) read a tensor through an index value outside the dimension it indexes (a
    gather, `E[ids[t], d]`, with an `ids` element out of range): the message names the program, the index value,
    the tensor, its dimension and size, and the stage whose read it was. It is a Python IndexError too, as
    torch's and numpy's out-of-range indices are. The kernel never reads outside a tensor: it finishes the call with
    element 0 in place of each bad index, then reports the first bad index it met, and the outputs are unspecified.
    It is `tl.IndexError`, left out of ``tensorlang.__all__`` (a star import would hide Python's IndexError).

    >>> import numpy as np, tensorlang as tl
    >>> k = tl.build(tl.op("def f(T: f32[N], X: i32[M]) -> Y:\\n    Y[i] = T[X[i]]"), N=4, M=2)
    >>> try:
    ...     k(np.zeros(4, np.float32), np.array([1, 9], np.int32))
    ... except tl.IndexError as e:
    ...     print(e)
    f: index 9 is out of range for dimension 0 of T (size 4) in stage Y's read T[X[i]] (line 2, column 12)
    """


def check(cond: object, error: type[TensorlangError], message: str, *args) -> None:
    """Raise `error(message, *args)` unless `cond` holds.

    >>> check(1 + 1 == 2, BuildError, "arithmetic is broken")
    """
    if not cond:
        raise error(message, *args)
