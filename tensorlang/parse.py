"""Parse DSL text into an `Op`: Python's `ast` reads each side of a statement, never `eval`.

The text is cut into the `def` header and one statement a line; each statement is split at its
assignment operator (`=`, `+=`, `*=`, `max=`, `min=`) and its `where` clause, and each piece is parsed
with `ast` at its own column, so that every error points into the original source.
"""
from __future__ import annotations

import ast
import math
import re
import typing
from dataclasses import dataclass

from .check import check_program
from .dtypes import DTYPES, INT_DTYPES, TENSOR_DTYPES
from .errors import DSLError, SourceLoc
from .program import (
    BOUNDARY_FUNCS,
    Access,
    Binary,
    BoundaryIndex,
    Call,
    Expr,
    GatherIndex,
    IndexExpr,
    IntValue,
    Literal,
    Op,
    Param,
    Stage,
    Unary,
    WhereRange,
    affine_indices,
    index_vars_of,
    walk,
)
from .sizes import SizePoly

MATH_FUNCS = ("exp", "log", "sqrt", "tanh")
CASTS = TENSOR_DTYPES
#: `sat_u8(x)`: x converted to u8 with values below or above its range clamped to its lowest or highest value
SATURATING_CASTS = tuple(f"sat_{t}" for t in INT_DTYPES)
FUNCS = MATH_FUNCS + CASTS + SATURATING_CASTS + ("abs", "max", "min", "clamp", "select")
_ARITY = {"select": 3, "clamp": 3, "max": 2, "min": 2}
CONSTANTS = ("inf",)
#: Halide's boundary conditions as reads of a whole input: `repeat_edge(I)[y - 1, x]` brings every index inside its
#: dimension with clamp, min, max and abs (see `_Parser.boundary_read`).
BOUNDARY_MODES = ("repeat_edge", "mirror_interior", "mirror_image", "constant_exterior")
_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
_CMP = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_ASSIGN_OPS = (("max=", "max"), ("min=", "min"), ("+=", "+"), ("*=", "*"), ("=", None))


@dataclass
class _Piece:
    """A piece of one source line: its text and where it starts (1-based line, 0-based column)."""

    text: str
    line: int
    col0: int


def parse(source: str) -> Op:
    """Parse and check a DSL program.

    >>> op = parse("def f(A: f32[N]) -> B:\\n    B[i] = A[i] + 1.0")
    >>> op.stages[0].name, op.stages[0].lhs_vars
    ('B', ('i',))
    """
    if not isinstance(source, str):
        raise DSLError(f"a program is DSL text (a str), not {type(source).__name__}")
    try:
        return _Parser(source).parse()
    except RecursionError:  # an expression of about a thousand terms (or levels): Python's own parser gives up
        raise DSLError("an expression is nested too deeply to parse (about 1000 terms or levels); compute it in "
                       "several stages") from None


def _is_boundary_index(node: ast.AST) -> bool:
    """Whether an index (one that reads no tensor) is a boundary index: it calls clamp, min, max or abs, or divides
    (`//`, `%`); else it is affine."""
    return any(isinstance(n, ast.Call) or (isinstance(n, ast.BinOp) and isinstance(n.op, (ast.FloorDiv, ast.Mod)))
               for n in ast.walk(node))


class _Parser:
    def __init__(self, source: str):
        self.source = source
        self.lines = source.splitlines()
        self.sizes: dict[str, SourceLoc] = {}
        self.int_params: list[str] = []
        self.params: dict[str, Param] = {}
        self.stage_ranks: dict[str, int] = {}
        self.size_locs: dict[str, SourceLoc] = {}

    # ---- errors and positions ----
    def error(self, message: str, loc: SourceLoc | None) -> DSLError:
        return DSLError(message, loc, self.source)

    def loc_of(self, node: ast.expr | ast.stmt | ast.arg, piece: _Piece) -> SourceLoc:
        line = piece.line + node.lineno - 1
        col = node.col_offset + (piece.col0 if node.lineno == 1 else 0)
        end = (node.end_col_offset or node.col_offset + 1) + (piece.col0 if node.end_lineno == 1 else 0)
        if node.end_lineno != node.lineno:
            end = len(self.lines[line - 1])
        return SourceLoc(line, col + 1, max(end + 1, col + 2))

    @typing.overload
    def parse_piece(self, piece: _Piece, mode: typing.Literal["eval"], what: str) -> ast.Expression: ...
    @typing.overload
    def parse_piece(self, piece: _Piece, mode: typing.Literal["exec"], what: str) -> ast.Module: ...

    def parse_piece(self, piece: _Piece, mode: str, what: str) -> ast.AST:
        try:
            return ast.parse(piece.text, mode=mode)
        except SyntaxError as e:
            if not e.offset or not e.lineno:  # Python gives no position for some errors at the end of the text
                stripped = piece.text.rstrip()
                e.lineno = stripped.count("\n") + 1
                e.offset = len(stripped) - (stripped.rfind("\n") + 1)
                e.end_offset = e.offset + 1
            line = piece.line + (e.lineno or 1) - 1
            col = (e.offset or 1) + (piece.col0 if (e.lineno or 1) == 1 else 0)
            end = col + 1
            if e.end_offset and e.end_lineno == e.lineno and e.end_offset > e.offset:
                end = e.end_offset + (piece.col0 if (e.lineno or 1) == 1 else 0)
            raise self.error(f"syntax error in {what}: {e.msg}", SourceLoc(line, col, end)) from None

    # ---- top level ----
    def parse(self) -> Op:
        code = [(i + 1, _strip_comment(t)) for i, t in enumerate(self.lines)]
        code = [(n, t) for n, t in code if t.strip()]
        if not code:
            raise self.error("empty program: expected `def NAME(INPUTS) -> OUTPUT:` and statements", None)
        first_no, first = code[0]
        indent = len(first) - len(first.lstrip())
        if not first.lstrip().startswith("def "):
            raise self.error("a program starts with `def NAME(INPUTS) -> OUTPUT:`",
                             SourceLoc(first_no, indent + 1, len(first) + 1))
        # the header may continue over lines (blank and comment lines included) until its brackets close
        header, last = first[indent:], first_no
        while _depth(header) > 0 and last < len(self.lines):
            header += "\n" + _strip_comment(self.lines[last])
            last += 1
        name, outputs, out_locs = self.parse_header(_Piece(header, first_no, indent))
        statements = self.join_statements(last + 1, indent)
        if not statements:
            raise self.error(f"empty program: `{name}` has no statements", SourceLoc(first_no, indent + 1,
                                                                                 len(first) + 1))
        raw = [self.split_statement(p) for p in statements]
        for r in raw:
            lhs_name, rank, loc = r[0], r[1], r[2]
            if lhs_name in self.stage_ranks:
                prev = next(q for q in raw if q[0] == lhs_name)
                raise self.error(f"stage `{lhs_name}` is written twice (first at line {prev[2].line}); "
                                 "each stage has one statement", loc)
            self.stage_ranks[lhs_name] = rank
        self.stage_dtypes: dict[str, str] = {}
        stages = [self.parse_statement(r) for r in self.dependency_order(raw)]
        op = Op(name=name, source=self.source, params=tuple(self.params.values()),
                int_params=tuple(self.int_params), stages=tuple(stages), outputs=tuple(outputs),
                size_names=tuple(self.sizes))
        return check_program(op, out_locs, self.error, self.size_locs)

    def dependency_order(self, raw):
        """Statements ordered so that each comes after the stages it reads; a cycle is an error."""
        reads: dict[str, list[tuple[str, SourceLoc]]] = {}
        for r in raw:
            rhs_p = r[3][5]
            tree = self.parse_piece(_Piece(rhs_p.text.rstrip(), rhs_p.line, rhs_p.col0), "eval", "the right side")
            found = []
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and node.id in self.stage_ranks:
                    found.append((node.id, self.loc_of(node, rhs_p)))
            for ix in r[3][2]:  # a scatter's left index reads too (`H[b := S[y]]`)
                if isinstance(ix, ast.NamedExpr):
                    found += [(n.id, self.loc_of(n, r[3][0])) for n in ast.walk(ix.value)
                              if isinstance(n, ast.Name) and n.id in self.stage_ranks]
            found.sort(key=lambda t: (t[1].line, t[1].col))
            reads[r[0]] = found
        order: list[str] = []
        state: dict[str, str] = {}

        def visit(name, path):
            if state.get(name) == "done":
                return
            if state.get(name) == "active":
                cycle = path[path.index(name):] + [name]
                reader = path[-1]
                loc = next(lc for n, lc in reads[reader] if n == name)
                raise self.error(f"cycle between stages: {' -> '.join(reversed(cycle))} "
                                 "(a stage cannot depend on itself)", loc)
            state[name] = "active"
            for dep, _ in reads[name]:
                if dep != name:  # a stage reading itself is a scan, checked in _Parser.recurrence
                    visit(dep, path + [name])
            state[name] = "done"
            order.append(name)

        for r in raw:
            visit(r[0], [])
        by_name = {r[0]: r for r in raw}
        return [by_name[n] for n in order]

    def join_statements(self, start: int, indent: int) -> list[_Piece]:
        """One piece per statement from line `start` on; a statement continues over the next lines, kept as
        they are so that positions stay right, while a bracket is open (and the next line is indented more)
        or the line ends in a backslash."""
        pieces: list[_Piece] = []
        no = start
        while no <= len(self.lines):
            text = _strip_comment(self.lines[no - 1])
            if not text.strip():
                no += 1
                continue
            ind = len(text) - len(text.lstrip())
            if ind <= indent:
                raise self.error("statements must be indented under the `def` (one program per source)",
                                 SourceLoc(no, ind + 1, len(text) + 1))
            body, last = text[ind:], no
            while last < len(self.lines):
                if body.endswith("\\"):
                    pass
                elif _depth(body) > 0:
                    nxt = _strip_comment(self.lines[last])
                    if nxt.strip() and len(nxt) - len(nxt.lstrip()) <= ind:
                        break  # the next statement: leave the bracket unclosed for a clear syntax error
                else:
                    break
                body += "\n" + _strip_comment(self.lines[last])
                last += 1
            pieces.append(_Piece(body.rstrip(), no, ind))
            no = last + 1
        return pieces

    def parse_header(self, piece: _Piece):
        tree = self.parse_piece(_Piece(piece.text + "\n    pass", piece.line, piece.col0), "exec", "the def line")
        fn = tree.body[0]
        if not isinstance(fn, ast.FunctionDef) or len(tree.body) != 1:
            raise self.error("expected `def NAME(INPUTS) -> OUTPUT:`", SourceLoc(piece.line, piece.col0 + 1,
                                                                               piece.col0 + 4))
        args = fn.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
            raise self.error("inputs are plain `NAME: DTYPE[SIZES]` or `NAME: int`", self.loc_of(fn, piece))
        if not args.args:
            raise self.error(f"`{fn.name}` has no inputs", self.loc_of(fn, piece))
        for a in args.args:
            self.parse_param(a, piece)
        if fn.returns is None:
            raise self.error("missing output: write `-> NAME` (or `-> (NAME1, NAME2)`) after the inputs",
                             self.loc_of(fn, piece))
        rets = fn.returns.elts if isinstance(fn.returns, ast.Tuple) else [fn.returns]
        outputs, locs = [], {}
        for r in rets:
            if not isinstance(r, ast.Name):
                raise self.error("an output is the name of a stage", self.loc_of(r, piece))
            if r.id in outputs:
                raise self.error(f"output `{r.id}` is listed twice", self.loc_of(r, piece))
            outputs.append(r.id)
            locs[r.id] = self.loc_of(r, piece)
        return fn.name, outputs, locs

    def parse_param(self, a: ast.arg, piece: _Piece) -> None:
        loc = self.loc_of(a, piece)
        name = a.arg
        if name in self.params or name in self.sizes:
            raise self.error(f"`{name}` is declared twice", loc)
        self.check_name(name, loc, "an input")
        ann = a.annotation
        if isinstance(ann, ast.Name) and ann.id == "int":
            self.sizes[name] = loc
            self.size_locs[name] = loc
            self.int_params.append(name)
            return
        if isinstance(ann, ast.Name) and ann.id in TENSOR_DTYPES:  # `X: f32` is a scalar (0-d) input
            self.params[name] = Param(name, ann.id, (), loc)
            return
        if not (isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name)):
            raise self.error(f"input `{name}` needs a type: `{name}: f32[N, M]` ({', '.join(TENSOR_DTYPES)}) "
                             f"or `{name}: int` for a size", loc)
        dt = ann.value.id
        if dt not in TENSOR_DTYPES:
            raise self.error(f"unknown dtype `{dt}`; use one of {', '.join(TENSOR_DTYPES)}",
                             self.loc_of(ann.value, piece))
        dims = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        shape = tuple(self.size_expr(d, piece, declare=True) for d in dims)
        self.params[name] = Param(name, dt, shape, loc)

    def check_name(self, name: str, loc: SourceLoc, what: str) -> None:
        if name in FUNCS or name in CONSTANTS or name in BOUNDARY_MODES or name in ("where", "int") + TENSOR_DTYPES:
            raise self.error(f"`{name}` is a reserved word and cannot name {what}", loc)

    # ---- size expressions (shapes and where bounds) ----
    def size_expr(self, node: ast.expr, piece: _Piece, declare: bool = False) -> SizePoly:
        loc = self.loc_of(node, piece)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return SizePoly.const(node.value)
        if isinstance(node, ast.Name):
            if node.id not in self.sizes:
                if not declare:
                    raise self.error(f"unknown size `{node.id}`: sizes are the names in the input shapes "
                                     "and the `int` inputs", loc)
                self.check_name(node.id, loc, "a size")
                if node.id in self.params:
                    raise self.error(f"`{node.id}` is an input, not a size", loc)
                self.sizes[node.id] = loc
            return SizePoly.symbol(node.id)
        if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult):
            a, b = self.size_expr(node.left, piece, declare), self.size_expr(node.right, piece, declare)
            return {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}[type(node.op)]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.size_expr(node.operand, piece, declare)
        raise self.error("a size is a name, an integer, or + - * of them", loc)

    # ---- statements ----
    def split_statement(self, p: _Piece):
        """Split into (lhs name, rank, lhs loc, (lhs piece, op text, reduce op, rhs piece, where piece))."""
        text = p.text
        bad = _unmatched_close(text)
        if bad is not None:
            q = _sub(p, bad, bad + 1)
            raise self.error(f"unmatched '{text[bad]}'", SourceLoc(q.line, q.col0 + 1, q.col0 + 2))
        at, op_text, red = _find_assign(text)
        if at is None:
            raise self.error("expected a statement `NAME[i, ...] = EXPR` (or +=, *=, max=, min=)",
                             SourceLoc(p.line, p.col0 + 1, p.col0 + len(text) + 1))
        lhs = _sub(p, 0, at)
        rest_at = at + len(op_text)
        w = _find_where(text[rest_at:])
        rhs = _sub(p, rest_at, None if w is None else rest_at + w)
        where = None if w is None else _sub(p, rest_at + w + len("where"))
        lhs_s, rhs_s = _lstrip_piece(lhs), _lstrip_piece(rhs)
        if not lhs_s.text.strip():
            raise self.error("missing left side before the assignment",
                             SourceLoc(p.line, p.col0 + at + 1, p.col0 + at + len(op_text) + 1))
        if not rhs_s.text.strip():
            raise self.error("missing right side after the assignment",
                             SourceLoc(p.line, p.col0 + at + 1, p.col0 + at + len(op_text) + 1))
        tree = self.parse_piece(_Piece(lhs_s.text.rstrip(), lhs_s.line, lhs_s.col0), "eval", "the left side")
        node = tree.body
        if isinstance(node, ast.Name):
            name, idx = node.id, []
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            name = node.value.id
            idx = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        else:
            raise self.error("the left side is `NAME[i, j, ...]` or `NAME`", self.loc_of(node, lhs_s))
        name_node = node if isinstance(node, ast.Name) else node.value
        loc = self.loc_of(name_node, lhs_s)
        if name in self.params:
            raise self.error(f"`{name}` is an input and cannot be written", loc)
        if name in self.sizes:
            raise self.error(f"`{name}` is a size and cannot be written", loc)
        self.check_name(name, loc, "a stage")
        op_loc = SourceLoc(p.line, p.col0 + at + 1, p.col0 + at + len(op_text) + 1)
        return name, len(idx), loc, (lhs_s, node, idx, op_text, red, rhs_s, where, p, op_loc)

    def parse_statement(self, raw) -> Stage:
        name, _, loc, (lhs_p, _lhs_node, idx_nodes, op_text, red, rhs_p, where_p, whole, op_loc) = raw
        lhs_vars: list[str] = []
        var_locs: dict[str, SourceLoc] = {}
        self._var_locs = var_locs
        scatter: dict[int, ast.NamedExpr] = {}  # left index position -> `b := VALUE`
        for k, ix in enumerate(idx_nodes):
            iloc = self.loc_of(ix, lhs_p)
            if isinstance(ix, ast.NamedExpr):
                scatter[k] = ix
                ix = ix.target
                iloc = self.loc_of(ix, lhs_p)
            elif self.reads_a_tensor(ix):
                raise self.error(f"a left-side index computed from data (a scatter) needs a name and a range, "
                                 f"which give the output's size: write `{name}[b := {ast.unparse(ix)}] "
                                 f"{op_text} ... where b in 0:SIZE`", iloc)
            if not isinstance(ix, ast.Name) or ix.id in self.sizes or ix.id in self.stage_ranks \
                    or ix.id in self.params:
                raise self.error("a left-side index is a plain index variable (like `i`); "
                                 "arithmetic belongs on the right side", iloc)
            self.check_name(ix.id, iloc, "an index")
            if ix.id in lhs_vars:
                raise self.error(f"index `{ix.id}` appears twice on the left side", iloc)
            lhs_vars.append(ix.id)
            var_locs[ix.id] = iloc
        rhs_tree = self.parse_piece(_Piece(rhs_p.text.rstrip(), rhs_p.line, rhs_p.col0), "eval", "the right side")
        depth = _ast_depth(rhs_tree.body)
        if depth > MAX_EXPR_DEPTH:
            raise self.error(f"the right side is nested {depth} levels deep, more than {MAX_EXPR_DEPTH} (a chain "
                             f"like `a + b + c` is a level a term): compute parts of it in stages of their own",
                             self.loc_of(rhs_tree.body, rhs_p))
        rhs = self.value(rhs_tree.body, rhs_p)
        if any(isinstance(n, Access) and n.tensor == name for n in walk(rhs)):
            rhs = self.recurrence(name, rhs, rhs_tree.body, rhs_p, lhs_vars, red, op_text)
        lhs = self.scatter_lhs(name, rhs.dtype, loc, lhs_vars, scatter, lhs_p, red) if scatter else None
        if rhs.dtype == "bool" and red is not None:
            raise self.error(f"`{op_text}` of true/false values: reduce numbers, like `{op_text} i32(...)` (for "
                             "`any`, `max= i32(cond)`; for `all`, `min= i32(cond)`)", rhs.loc)
        dtype = rhs.dtype
        values = [rhs] if lhs is None else [rhs] + [ix.value for ix in lhs.indices if isinstance(ix, GatherIndex)]
        used = list(dict.fromkeys(v for e in values for v in index_vars_of(e)))
        red_vars = tuple(v for v in used if v not in lhs_vars)
        reads = [n for e in values for n in walk(e) if isinstance(n, Access)]
        read_vars = {v for a in reads for ix in affine_indices(a) for v in ix.variables()}
        where = self.parse_where(where_p, lhs_vars, used, var_locs) if where_p else {}
        for k in scatter:
            v = lhs_vars[k]
            if v in used:
                raise self.error(f"`{v}` is computed from data (one value for each point of the right side), so the "
                                 f"right side cannot use it; use the value it is computed from instead",
                                 var_locs[v])
            if v not in where:
                raise self.error(f"`{v}` is computed from data, so nothing gives its range (the size of "
                                 f"{name}'s dimension {k}): give it with `where {v} in 0:SIZE`", var_locs[v])
        gathered = {v for a in reads for ix in a.indices
                    if isinstance(ix, GatherIndex) for v in index_vars_of(ix.value)}
        boundary = {v for a in (n for n in walk(rhs) if isinstance(n, Access)) for ix in a.indices
                    if isinstance(ix, BoundaryIndex) for v in ix.variables()}
        for v in red_vars:
            if v not in read_vars and v not in where:
                if v in gathered:
                    raise self.error(f"index `{v}` is used only in an index computed from a tensor read, which does "
                                     f"not give its range; give it with `where {v} in LO:HI`", var_locs[v])
                if v in boundary:
                    raise self.error(f"index `{v}` is used only in a boundary index ({', '.join(BOUNDARY_FUNCS)}), "
                                     f"which does not give its range; give it with `where {v} in LO:HI`", var_locs[v])
                raise self.error(f"unknown name `{v}`: not an input ({', '.join(self.params)}), a stage, a size, "
                                 "or an index that reads a tensor", var_locs[v])
        if red is None and red_vars:
            v = red_vars[0]
            raise self.error(f"`{v}` appears only on the right side, so it is a reduction index, but the "
                             f"statement assigns with `=`; reduce with `+=`, `*=`, `max=` or `min=`",
                             var_locs[v])
        if red is not None and not red_vars and lhs is None:
            raise self.error(f"`{op_text}` reduces over indices that appear only on the right side, and "
                             f"there are none: every index ({', '.join(lhs_vars) or 'none'}) is on the left "
                             f"side; use `=`, or leave the reduction index off the left side", op_loc)
        self.stage_dtypes[name] = dtype
        return Stage(name=name, dtype=dtype, lhs_vars=tuple(lhs_vars), reduce_op=red, rhs=rhs,
                     red_vars=red_vars, where=where, loc=loc, var_locs=var_locs, text=whole.text, lhs=lhs)

    def scatter_lhs(self, name: str, dtype: str, loc: SourceLoc, lhs_vars: list[str], scatter: dict, p: _Piece,
                    red: str | None) -> Access:
        """The left side of a scatter (`H[b := I[y, x]] += 1`) as an access: its named data-dependent indices
        as GatherIndex, the others as plain index variables."""
        if red is None:
            raise self.error("`=` through an index computed from data would leave which of several updates of "
                             "one element wins to the loop order; accumulate with `+=`, `*=`, `max=` or "
                             "`min=` (a histogram, a scatter-add)", loc)
        indices: list = [IndexExpr.var(v) for v in lhs_vars]
        for k, node in scatter.items():
            vloc = self.loc_of(node.value, p)
            if not self.reads_a_tensor(node.value):
                raise self.error(f"`{lhs_vars[k]} := ...` names a left index computed from data, but "
                                 f"`{ast.unparse(node.value)}` reads no tensor; write a plain index variable",
                                 vloc)
            ix = self.index_expr(node.value, p)
            assert isinstance(ix, GatherIndex)  # it reads a tensor
            for v in index_vars_of(ix.value):
                if v in lhs_vars:
                    raise self.error(f"the left index `{lhs_vars[k]}` is computed from `{v}`, another left "
                                     "index; index it with reduction indices only (those of the right side)",
                                     vloc)
            indices[k] = ix
        locs = tuple(self.loc_of(scatter[k].value, p) if k in scatter else self._var_locs[v]
                     for k, v in enumerate(lhs_vars))
        return Access(dtype, False, loc, name, tuple(indices), locs)

    def recurrence(self, name: str, rhs: Expr, node: ast.expr, p: _Piece, lhs_vars: list, red, op_text) -> Expr:
        """The right side of a stage that reads itself (a scan), typed again with its own dtype, after checking
        that each read of itself is `S[.., v - c, ..]`: every index the left side's, except one, the same for
        every read, that is `v - c` with `c` a positive integer (an element computed earlier along `v`).
        Its first pass typed the reads of itself as a Python number (they take the dtype of the rest)."""
        scan: tuple[str, SourceLoc] | None = None
        for a in (n for n in walk(rhs) if isinstance(n, Access) and n.tensor == name):
            if red is not None:
                raise self.error(f"stage `{name}` reads itself and reduces with `{op_text}`: a reduction cannot "
                                 "read its own result; compute the recurrence in a stage written with `=` (a scan, "
                                 f"`{name}[i] = {name}[i - 1] + X[i]`) and reduce in another", a.loc)
            if not a.indices:
                raise self.error(f"stage `{name}` reads the element it writes (it has no index to run along); a "
                                 f"recurrence reads an earlier element, like `{name}[i - 1]`", a.loc)
            offset_dims = []
            for d, (v, ix, iloc) in enumerate(zip(lhs_vars, a.indices, a.index_locs)):
                if isinstance(ix, IndexExpr) and ix.is_plain_var() == v:
                    continue
                c = -ix.const.evaluate({}) if isinstance(ix, IndexExpr) and ix.const.is_constant() else None
                if not (isinstance(ix, IndexExpr) and ix.terms == ((v, SizePoly.const(1)),) and c is not None):
                    raise self.error(f"stage `{name}` reads itself at index {d} `{ix}`: a recurrence reads "
                                     f"`{v}` (the left side's index) or `{v} - c` with c a positive integer, like "
                                     f"`{name}[{', '.join(lhs_vars[:d] + [v + ' - 1'] + lhs_vars[d + 1:])}]`",
                                     iloc)
                if c <= 0:
                    raise self.error(f"stage `{name}` reads itself at `{ix}`, an element computed after "
                                     f"`{name}[{', '.join(lhs_vars)}]`: a recurrence reads earlier elements only, "
                                     f"at `{v} - c` with c a positive integer (it runs along `{v}` in increasing "
                                     "order)", iloc)
                offset_dims.append((v, iloc))
                if scan is not None and scan[0] != v:
                    raise self.error(f"stage `{name}` reads itself along two indices, `{scan[0]}` (line "
                                     f"{scan[1].line}, column {scan[1].col}) and `{v}`: a recurrence runs along one "
                                     f"index; compute the other direction in a stage of its own", iloc)
                scan = scan or (v, iloc)
            if not offset_dims:
                raise self.error(f"stage `{name}` reads the element it writes, `{name}[{', '.join(lhs_vars)}]`; a "
                                 f"recurrence reads an earlier element, like `{v} - 1` in one of its indices", a.loc)
        self.stage_dtypes[name] = rhs.dtype
        typed = self.value(node, p)
        if typed.dtype != rhs.dtype:
            raise self.error(f"stage `{name}` reads itself, and its type depends on that read ({rhs.dtype} without "
                             f"it, {typed.dtype} with it); convert the right side, like `{typed.dtype}(...)`",
                             typed.loc)
        return typed

    def parse_where(self, p: _Piece, lhs_vars, used, var_locs) -> dict[str, WhereRange]:
        out: dict[str, WhereRange] = {}
        for part in _split_top(p):
            m = re.match(r"\s*([A-Za-z_]\w*)\s+in\s+", part.text)
            full = SourceLoc(part.line, part.col0 + 1, part.col0 + len(part.text.rstrip()) + 1)
            if not m:
                raise self.error("a where clause is `where v in LO:HI, ...`", full)
            var = m.group(1)
            vloc = SourceLoc(part.line, part.col0 + m.start(1) + 1, part.col0 + m.end(1) + 1)
            if var not in used and var not in lhs_vars:
                raise self.error(f"where gives a range for `{var}`, which the statement does not use", vloc)
            if var in out:
                raise self.error(f"where gives the range of `{var}` twice", vloc)
            rng = part.text[m.end():]
            colon = _find_top_colon(rng)
            if colon is None:
                raise self.error(f"a range is `LO:HI` (like `0:N+2`), in `{var} in ...`", full)
            lo_p = _lstrip_piece(_sub(part, m.end(), m.end() + colon))
            hi_p = _lstrip_piece(_sub(part, m.end() + colon + 1))
            lo_node = self.parse_piece(_Piece(lo_p.text.rstrip(), lo_p.line, lo_p.col0), "eval", "a range").body
            hi_node = self.parse_piece(_Piece(hi_p.text.rstrip(), hi_p.line, hi_p.col0), "eval", "a range").body
            lo, hi = self.size_expr(lo_node, lo_p), self.size_expr(hi_node, hi_p)
            if var in lhs_vars and lo != SizePoly():
                raise self.error(f"`{var}` is a left-side index, so its range starts at 0 (not {lo})",
                                 self.loc_of(lo_node, lo_p))
            out[var] = WhereRange(lo, hi, full)
            var_locs.setdefault(var, vloc)
        return out

    # ---- value expressions ----
    def value(self, node: ast.expr, p: _Piece) -> Expr:
        loc = self.loc_of(node, p)
        if isinstance(node, ast.Subscript):
            if isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) and \
                    node.value.func.id in BOUNDARY_MODES:
                return self.boundary_read(node, p)
            if not isinstance(node.value, ast.Name):
                raise self.error("only a tensor name can be indexed", loc)
            idx = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return self.access(node.value.id, idx, node, p)
        if isinstance(node, ast.Name):
            n = node.id
            if n in self.params or n in self.stage_ranks:
                return self.access(n, [], node, p)
            if n in self.sizes:
                return IntValue("i32", True, loc, IndexExpr.size(SizePoly.symbol(n)))
            if n == "inf":
                return Literal("f32", True, loc, math.inf)
            if n in FUNCS:
                raise self.error(f"`{n}` is a function: call it as `{n}(...)`", loc)
            self._var_locs.setdefault(n, loc)
            return IntValue("i32", True, loc, IndexExpr.var(n))
        if isinstance(node, ast.Constant):
            if type(node.value) is int:
                return Literal("i32", True, loc, node.value)
            if type(node.value) is float:
                return Literal("f32", True, loc, node.value)
            raise self.error(f"unsupported constant {node.value!r}: use int or float literals", loc)
        if isinstance(node, ast.UnaryOp):
            x = self.value(node.operand, p)
            if isinstance(node.op, ast.UAdd):
                return x
            if isinstance(node.op, ast.USub):
                if isinstance(x, Literal):
                    return Literal(x.dtype, True, loc, -x.value)
                self.need_numeric(x, "-")
                return Unary(x.dtype, x.weak, loc, "neg", x)
            if isinstance(node.op, ast.Not):
                self.need_bool(x, "not")
                return Unary("bool", False, loc, "not", x)
            raise self.error("unsupported operator `~`", loc)
        if isinstance(node, ast.BinOp):
            op = _ARITH.get(type(node.op))
            if op is None:
                raise self.error("unsupported operator; use + - * / // % **", loc)
            a, b = self.value(node.left, p), self.value(node.right, p)
            return self.arith(op, a, b, loc, lambda: self.operator_loc(node, p, op))
        if isinstance(node, ast.Compare):
            parts = []
            left = self.value(node.left, p)
            for cop, comp in zip(node.ops, node.comparators):
                if type(cop) not in _CMP:
                    raise self.error("unsupported comparison; use < <= > >= == !=", loc)
                right = self.value(comp, p)
                dt, _ = self.unify(left, right, loc, _CMP[type(cop)], bools=type(cop) in (ast.Eq, ast.NotEq))
                parts.append(Binary("bool", False, loc, _CMP[type(cop)], left, right, dt))
                left = right
            out: Expr = parts[0]
            for q in parts[1:]:
                out = Binary("bool", False, loc, "and", out, q, "bool")
            return out
        if isinstance(node, ast.BoolOp):
            word = "and" if isinstance(node.op, ast.And) else "or"
            vals = [self.value(v, p) for v in node.values]
            for v in vals:
                self.need_bool(v, word)
            out = vals[0]
            for v in vals[1:]:
                out = Binary("bool", False, loc, word, out, v, "bool")
            return out
        if isinstance(node, ast.IfExp):
            return self.call("select", [self.value(node.test, p), self.value(node.body, p),
                                        self.value(node.orelse, p)], loc, loc)
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name):
                raise self.error("only built-in functions can be called", loc)
            if node.func.id in BOUNDARY_MODES:
                raise self.error(f"`{node.func.id}(...)` is read like a tensor: `{node.func.id}(I)[i, ...]`", loc)
            if node.keywords:
                raise self.error(f"`{node.func.id}` takes no keyword arguments", loc)
            return self.call(node.func.id, [self.value(a, p) for a in node.args], loc, self.loc_of(node.func, p))
        raise self.error("unsupported expression: use tensor reads, numbers, arithmetic, comparisons and "
                         f"the functions {', '.join(FUNCS)}", loc)

    def access(self, name: str, idx_nodes, node: ast.expr, p: _Piece) -> Access:
        name_node = node.value if isinstance(node, ast.Subscript) else node
        nloc = self.loc_of(name_node, p)
        if name in self.params:
            param = self.params[name]
            rank, dtype = len(param.shape), param.dtype
            decl = f"{name} is declared `{param}`"
        elif name in self.stage_ranks:
            # a stage reading itself is typed as a Python number until its dtype is known (_Parser.recurrence)
            rank, dtype = self.stage_ranks[name], self.stage_dtypes.get(name, "i32")
            decl = f"stage {name} has {rank} indices"
        else:
            raise self.error(f"unknown tensor `{name}`: not an input ({', '.join(self.params)}) "
                             f"nor a stage ({', '.join(self.stage_ranks)})", nloc)
        if len(idx_nodes) != rank:
            raise self.error(f"wrong number of indices for `{name}`: {len(idx_nodes)} given, {rank} expected "
                             f"({decl})", self.loc_of(node, p))
        indices = tuple(self.index_expr(ix, p) for ix in idx_nodes)
        locs = tuple(self.loc_of(ix, p) for ix in idx_nodes)
        return Access(dtype, name not in self.params and name not in self.stage_dtypes, self.loc_of(node, p), name,
                      indices, locs)

    def index_expr(self, node: ast.expr, p: _Piece) -> IndexExpr | GatherIndex | BoundaryIndex:
        if self.reads_a_tensor(node):
            loc = self.loc_of(node, p)
            value = self.value(node, p)
            if not DTYPES[value.dtype].is_int:
                fix = "; convert with i32(...) or i64(...)" if value.dtype != "bool" else ""
                raise self.error(f"an index computed from a tensor read must be an integer (i32, i64, u8, ...), got "
                                 f"{'a comparison' if value.dtype == 'bool' else value.dtype}{fix}", loc)
            return GatherIndex(value, ast.unparse(node))
        if _is_boundary_index(node):
            return BoundaryIndex(self.boundary_value(node, p), ast.unparse(node))
        return self.affine_index(node, p)

    def boundary_read(self, node: ast.Subscript, p: _Piece) -> Expr:
        """A read of an input through one of Halide's boundary conditions (BOUNDARY_MODES), each affine index `x` of
        dimension `D` brought inside it: repeat_edge `clamp(x, 0, D - 1)`, mirror_interior
        `D - 1 - abs(D - 1 - abs(x))`, mirror_image `min(m, 2*D - 1 - m)` with `m = max(x, -1 - x)`;
        constant_exterior(I, c) reads `c` where an index is outside, through a `select` of the clamped read."""
        call = node.value
        assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)  # the caller's check
        mode, loc = call.func.id, self.loc_of(node, p)
        usage = f"`{mode}(I, c)[i, ...]`" if mode == "constant_exterior" else f"`{mode}(I)[i, ...]`"
        if call.keywords or len(call.args) != (2 if mode == "constant_exterior" else 1) or \
                not isinstance(call.args[0], ast.Name) or call.args[0].id not in self.params:
            raise self.error(f"{usage} reads an input I (its sizes are known from its declaration)"
                             f"{' with c the value outside' if mode == 'constant_exterior' else ''}",
                             self.loc_of(call, p))
        param = self.params[call.args[0].id]
        idx_nodes = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if len(idx_nodes) != len(param.shape):
            raise self.error(f"wrong number of indices for `{param.name}`: {len(idx_nodes)} given, "
                             f"{len(param.shape)} expected ({param.name} is declared `{param}`)", loc)

        def size(poly: SizePoly) -> IntValue:
            return IntValue("i32", True, loc, IndexExpr.size(poly))

        def call_of(fn: str, *args: Expr) -> Expr:
            return Call("i32", True, loc, fn, args, "i32")

        def minus(a: Expr, b: Expr) -> Expr:
            return Binary("i32", True, loc, "-", a, b, "i32")

        indices, inside = [], []
        for ix, extent in zip(idx_nodes, param.shape):
            if self.reads_a_tensor(ix):
                raise self.error(f"an index of {usage} is affine in index variables and sizes", self.loc_of(ix, p))
            x, last = self.boundary_value(ix, p), size(extent - SizePoly.const(1))
            if mode == "mirror_interior":
                value = minus(last, call_of("abs", minus(last, call_of("abs", x))))
            elif mode == "mirror_image":
                m = call_of("max", x, minus(size(SizePoly.const(-1)), x))
                value = call_of("min", m, minus(size(extent * SizePoly.const(2) - SizePoly.const(1)), m))
            else:
                value = call_of("clamp", x, size(SizePoly()), last)
            indices.append(BoundaryIndex(value, f"{mode}({ast.unparse(ix)})"))
            for op, bound in ((">=", size(SizePoly())), ("<", size(extent))):
                inside.append(Binary("bool", False, loc, op, x, bound, "i32"))
        locs = tuple(self.loc_of(ix, p) for ix in idx_nodes)
        read = Access(param.dtype, False, loc, param.name, tuple(indices), locs)
        if mode != "constant_exterior":
            return read
        cond = inside[0]
        for c in inside[1:]:
            cond = Binary("bool", False, loc, "and", cond, c, "bool")
        return self.call("select", [cond, read, self.value(call.args[1], p)], loc, loc)

    def boundary_value(self, node: ast.expr, p: _Piece) -> Expr:
        """The expression of a boundary index: clamp, min, max and abs nested over affine forms (the leaves, as
        IntValue), combined with + - and products by sizes and integers, and floor division and remainder by
        positive integers (`I[y // 2, x]`, an upsampling; `x % 4`)."""
        loc = self.loc_of(node, p)
        if not _is_boundary_index(node):
            return IntValue("i32", True, loc, self.affine_index(node, p))
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.FloorDiv, ast.Mod)):
            d = node.right
            if not (isinstance(d, ast.Constant) and type(d.value) is int and d.value > 0):
                sign = "//" if isinstance(node.op, ast.FloorDiv) else "%"
                raise self.error(f"an index divides only by a positive integer (`y {sign} 2`), not by "
                                 f"`{ast.unparse(d)}`", self.loc_of(d, p))
            dividend = self.boundary_value(node.left, p)
            divisor = IntValue("i32", True, self.loc_of(d, p), IndexExpr.size(SizePoly.const(d.value)))
            return Binary("i32", True, loc, _ARITH[type(node.op)], dividend, divisor, "i32")
        if isinstance(node, ast.Call):
            fn = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            if fn not in BOUNDARY_FUNCS:
                raise self.error(f"`{fn}` cannot be called in an index: a boundary condition uses "
                                 f"{', '.join(BOUNDARY_FUNCS)} over affine forms (`clamp(y - 1, 0, H - 1)`)", loc)
            if node.keywords:
                raise self.error(f"`{fn}` takes no keyword arguments", loc)
            arity = _ARITY.get(fn, 1)
            if len(node.args) != arity:
                raise self.error(f"`{fn}` takes {arity} argument{'s' if arity > 1 else ''}, {len(node.args)} "
                                 "given", loc)
            return Call("i32", True, loc, fn, tuple(self.boundary_value(a, p) for a in node.args), "i32")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            x = self.boundary_value(node.operand, p)
            return Unary("i32", True, loc, "neg", x) if isinstance(node.op, ast.USub) else x
        if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult):
            a, b = self.boundary_value(node.left, p), self.boundary_value(node.right, p)
            if isinstance(node.op, ast.Mult) and not any(isinstance(x, IntValue) and not x.expr.terms for x in (a, b)):
                raise self.error("non-affine index: a product of index expressions "
                                 f"(`{ast.unparse(node)}`); a boundary index multiplies only by sizes and integers",
                                 loc)
            return Binary("i32", True, loc, _ARITH[type(node.op)], a, b, "i32")
        raise self.error("a boundary index is clamp, min, max and abs over affine forms in index variables and "
                         "sizes, with + - and products by sizes and integers, and // and % by positive integers",
                         loc)

    def affine_index(self, node: ast.expr, p: _Piece) -> IndexExpr:
        """An index that reads no tensor (nor do its parts): affine in index variables and sizes."""
        loc = self.loc_of(node, p)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return IndexExpr.size(SizePoly.const(node.value))
        if isinstance(node, ast.Name):
            n = node.id
            if n in self.sizes:
                return IndexExpr.size(SizePoly.symbol(n))
            if n in self.params or n in self.stage_ranks:  # one of rank 0 reads a tensor: a gather (above)
                raise self.error(f"a tensor (`{n}`) cannot be used as an index; read one of its elements, like "
                                 f"{n}[i]", loc)
            self.check_name(n, loc, "an index")
            self._var_locs.setdefault(n, loc)
            return IndexExpr.var(n)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            x = self.affine_index(node.operand, p)
            return -x if isinstance(node.op, ast.USub) else x
        if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult):
            a, b = self.affine_index(node.left, p), self.affine_index(node.right, p)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if a.terms and b.terms:
                raise self.error("non-affine index: a product of index variables "
                                 f"(`{ast.unparse(node)}`); indices are affine, like `2*h + r`", loc)
            return (a * b.const) if a.terms or not b.terms else (b * a.const)
        raise self.error("an index is affine in index variables (names, sizes, integers, + - and *), a boundary "
                         f"condition over such forms ({', '.join(BOUNDARY_FUNCS)}: `clamp(y - 1, 0, H - 1)`), such "
                         "forms divided by a positive integer (`y // 2`, `x % 4`), or an integer computed from "
                         "tensor reads (`E[ids[t], d]`)", loc)

    def reads_a_tensor(self, node: ast.AST) -> bool:
        """Whether an index expression reads an element of a tensor (then it is a gathered index): a subscript of
        a tensor, or a tensor of rank 0 by its name."""
        for n in ast.walk(node):
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and \
                    (n.value.id in self.params or n.value.id in self.stage_ranks):
                return True
            if isinstance(n, ast.Name) and self.rank_of(n.id) == 0:
                return True
        return False

    def rank_of(self, name: str) -> int | None:
        """The rank of tensor `name` (an input or a stage), None for anything else."""
        if name in self.params:
            return len(self.params[name].shape)
        return self.stage_ranks.get(name)

    # ---- typing ----
    def need_bool(self, x: Expr, what: str) -> None:
        if x.dtype != "bool":
            raise self.error(f"`{what}` needs a comparison (true/false), got a {x.dtype} value", x.loc)

    def need_numeric(self, x: Expr, what: str) -> None:
        if x.dtype == "bool":
            raise self.error(f"`{what}` needs a number, got a comparison", x.loc)

    def unify(self, a: Expr, b: Expr, loc: SourceLoc, what: str, bools: bool = False) -> tuple[str, bool]:
        """The dtype two operands are computed in; literals, sizes and indices adapt to tensors. With `bools`
        (`==`, `!=`, `select`), two true/false values are computed as such."""
        if bools and a.dtype == "bool" and b.dtype == "bool":
            return "bool", False
        self.need_numeric(a, what)
        self.need_numeric(b, what)
        if not a.weak and not b.weak:
            if a.dtype != b.dtype:
                raise self.error(f"dtype mismatch in `{what}`: {a.dtype} and {b.dtype}; convert one side "
                                 f"with {a.dtype}(...) or {b.dtype}(...)", loc)
            return a.dtype, False
        if a.weak and b.weak:
            return ("f32" if "f32" in (a.dtype, b.dtype) else "i32"), True
        strong, weak = (a, b) if not a.weak else (b, a)
        if weak.dtype == "f32" and not DTYPES[strong.dtype].is_float:
            raise self.error(f"dtype mismatch in `{what}`: a float value with an {strong.dtype} tensor; convert "
                             f"with f32(...) or {strong.dtype}(...)", loc)
        return strong.dtype, False

    def operator_loc(self, node: ast.BinOp, p: _Piece, token: str) -> SourceLoc:
        """Where the operator `token` of `node` is: the first `token` between its operands' text."""
        def at(line: int, col: int) -> tuple[int, int]:  # a position of the piece's text in the source (0-based col)
            return p.line + line - 1, col + (p.col0 if line == 1 else 0)

        end_line, end_col = node.left.end_lineno, node.left.end_col_offset
        assert end_line is not None and end_col is not None  # ast.parse sets every position
        line, col = at(end_line, end_col)
        last, stop = at(node.right.lineno, node.right.col_offset)
        while line <= last:
            text = self.lines[line - 1][:stop if line == last else None]
            found = text.find(token, col)
            if found >= 0:
                return SourceLoc(line, found + 1, found + len(token) + 1)
            line, col = line + 1, 0
        return self.loc_of(node, p)

    def arith(self, op: str, a: Expr, b: Expr, loc: SourceLoc, op_loc=None) -> Expr:
        """The typed node of `a op b`; `op_loc()` gives the operator's position for an error about it."""
        dt, weak = self.unify(a, b, loc, op)
        if op == "/":
            if weak:  # Python numbers: true division, a float (weak: computed in the dtype of the tensors it meets)
                return Binary("f32", True, loc, op, a, b, "f32")
            if not DTYPES[dt].is_float:
                raise self.error(f"`/` of {dt} values: numpy's `/` gives a float and tensorlang does not truncate "
                                 "silently; write `//` for floor division, or convert first with f32(...) or "
                                 "f64(...) for true division", op_loc() if op_loc else loc)
        if op == "**" and not DTYPES[dt].is_float:
            dt = "f32" if weak else dt
            if not weak:
                raise self.error("`**` needs float operands; convert with f32(...)", loc)
        return Binary(dt, weak, loc, op, a, b, dt)

    def call(self, fn: str, args: list[Expr], loc: SourceLoc, fn_loc: SourceLoc) -> Expr:
        arity = _ARITY.get(fn, 1)
        if fn not in FUNCS:
            raise self.error(f"unknown function `{fn}`; the functions are {', '.join(FUNCS)}", fn_loc)
        if len(args) != arity:
            raise self.error(f"`{fn}` takes {arity} argument{'s' if arity > 1 else ''}, {len(args)} given", loc)
        if fn in CASTS:  # any value converts, as numpy's astype: a comparison to 0 or 1, a number to bool as != 0
            return Call(fn, False, loc, fn, tuple(args), args[0].dtype)
        if fn in SATURATING_CASTS:
            return Call(fn[len("sat_"):], False, loc, fn, tuple(args), args[0].dtype)
        if fn == "select":
            self.need_bool(args[0], "select")
            dt, weak = self.unify(args[1], args[2], loc, "select", bools=True)
            return Call(dt, weak, loc, fn, tuple(args), dt)
        if fn in ("max", "min"):
            dt, weak = self.unify(args[0], args[1], loc, fn)
            return Call(dt, weak, loc, fn, tuple(args), dt)
        if fn == "clamp":  # clamp(x, lo, hi) = min(max(x, lo), hi), numpy's clip
            dt, weak = self.unify(args[0], args[1], loc, fn)
            below = Call(dt, weak, loc, "max", (args[0], args[1]), dt)  # max(x, lo): typed as the min takes it
            dt, weak = self.unify(below, args[2], loc, fn)
            return Call(dt, weak, loc, fn, tuple(args), dt)
        x = args[0]
        self.need_numeric(x, fn)
        if fn == "abs":
            return Call(x.dtype, x.weak, loc, fn, (x,), x.dtype)
        if not DTYPES[x.dtype].is_float and not x.weak:
            raise self.error(f"`{fn}` needs a float argument, got {x.dtype}; convert with f32(...)", loc)
        dt = "f32" if x.weak else x.dtype
        return Call(dt, x.weak, loc, fn, (x,), dt)


# ---- text helpers ----

#: The deepest right side a statement may have, in levels of the expression tree: the compiler's passes recurse
#: on the tree, and a few hundred levels is far beyond any real kernel.
MAX_EXPR_DEPTH = 256


def _ast_depth(node: ast.AST) -> int:
    """The number of levels of the expression tree under `node` (its value nodes: a subscript's index and an
    operator node do not add a level), counted without recursion."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        n, d = stack.pop()
        deepest = max(deepest, d)
        for child in ast.iter_child_nodes(n):
            if isinstance(child, ast.expr):
                stack.append((child, d + 1))
    return deepest


def _strip_comment(text: str) -> str:
    return text.split("#", 1)[0].rstrip()


def _scan(text: str):
    """(position, character, bracket depth) for each character; top-level characters have depth 0 and a
    closing bracket that closes nothing has depth -1."""
    depth = 0
    for i, ch in enumerate(text):
        if ch in ")]}":
            depth -= 1
        yield i, ch, depth
        if ch in "([{":
            depth += 1


def _depth(text: str) -> int:
    return sum(1 if ch in "([{" else -1 for ch in text if ch in "()[]{}")


def _find_assign(text: str):
    """Position, text and reduce op of the top-level assignment operator, or (None, None, None)."""
    depth = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            for tok, red in _ASSIGN_OPS:
                if text.startswith(tok, i):
                    if tok == "=":
                        prev = text[i - 1] if i else ""
                        nxt = text[i + 1] if i + 1 < len(text) else ""
                        if prev in "=!<>+-*/%" or nxt == "=":
                            break
                    elif tok in ("max=", "min=") and i and (text[i - 1].isalnum() or text[i - 1] == "_"):
                        continue
                    return i, tok, red
        i += 1
    return None, None, None


def _find_where(text: str):
    depth = 0
    for m in re.finditer(r"[()\[\]{}]|\bwhere\b", text):
        t = m.group(0)
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
        elif depth == 0:
            return m.start()
    return None


def _split_top(p: _Piece) -> list[_Piece]:
    cuts = [i for i, ch, d in _scan(p.text) if ch == "," and d == 0]
    bounds = zip([0] + [c + 1 for c in cuts], cuts + [None])
    return [_lstrip_piece(_sub(p, a, b)) for a, b in bounds]


def _find_top_colon(text: str):
    return next((i for i, ch, d in _scan(text) if ch == ":" and d == 0), None)


def _lstrip_piece(p: _Piece) -> _Piece:
    return _sub(p, len(p.text) - len(p.text.lstrip()))


def _sub(p: _Piece, start: int, end: int | None = None) -> _Piece:
    """The piece of `p` from `start` to `end`, with its own line and column (`p` may span lines)."""
    newlines = p.text.count("\n", 0, start)
    if newlines == 0:
        return _Piece(p.text[start:end], p.line, p.col0 + start)
    return _Piece(p.text[start:end], p.line + newlines, start - (p.text.rfind("\n", 0, start) + 1))


def _unmatched_close(text: str) -> int | None:
    """Position of a closing bracket that closes nothing, or None."""
    return next((i for i, ch, d in _scan(text) if d < 0), None)
