"""Lower a bound program to the loop IR.

Each stage becomes a loop nest over its indices (left-side indices in order, reduction indices innermost);
a reduction initialises each output element with the identity just before its reduction loops. Every
intermediate stage is a buffer allocated around the whole function.

>>> import tensorlang as tl
>>> print(tl.op("def s(X: f32[N, D]) -> T:\\n    T[n] += X[n, d]").lower(N=2, D=3))
def s(X: f32[2, 3], T: f32[2]):
  for n in 0:2:
    T[n] = 0f
    for d in 0:3:
      T[n] = T[n] + X[n, d]
"""
from __future__ import annotations

import math

from . import ir
from .bind import BoundOp, BoundStage
from .dtypes import DTYPES
from .program import Access, Binary, Call, Expr, IndexExpr, IntValue, Literal, Unary
from .simplify import simplify


def buffers_of(bound: BoundOp) -> dict[str, ir.Buffer]:
    """One IR buffer per tensor: inputs, outputs and intermediate (temp) stages."""
    out = {}
    for p in bound.op.params:
        out[p.name] = ir.Buffer(p.name, p.dtype, bound.shapes[p.name], "input")
    for s in bound.op.stages:
        role = "output" if s.name in bound.op.outputs else "temp"
        out[s.name] = ir.Buffer(s.name, s.dtype, bound.shapes[s.name], role)
    return out


def index_to_ir(ix: IndexExpr, sizes: dict, env: dict[str, ir.Expr]) -> ir.Expr:
    """An affine DSL index as an i64 IR expression over the loop variables in `env`."""
    coeffs, const = ix.evaluate(sizes)
    e: ir.Expr = ir.IntImm(const)
    for v, c in coeffs.items():
        e = ir.BinOp("+", e, ir.BinOp("*", env[v], ir.IntImm(c)))
    return simplify(e)


class ValueLowering:
    """Turns a stage's value expression into IR, given IR expressions for its index variables."""

    def __init__(self, bound: BoundOp, stage: BoundStage, buffers: dict, env: dict[str, ir.Expr]):
        self.bound, self.stage, self.buffers, self.env = bound, stage, buffers, env
        self.pads = dict(zip(map(id, stage.stage.accesses()), stage.padded))

    def __call__(self, e: Expr, want: str) -> ir.Expr:
        """Lower `e` computed in dtype `want` (literals and index values adapt; tensors must match)."""
        dt = want if e.weak else e.dtype
        if isinstance(e, Access):
            idx = tuple(index_to_ir(ix, self.bound.sizes, self.env) for ix in e.indices)
            return self._convert(ir.Load(self.buffers[e.tensor], idx, pad=self.pads[id(e)]), dt)
        if isinstance(e, Literal):
            return _constant(e.value, dt)
        if isinstance(e, IntValue):
            return self._convert(index_to_ir(e.expr, self.bound.sizes, self.env), dt)
        if isinstance(e, Unary):
            if e.op == "not":
                return ir.Not(self(e.x, "bool"))
            return ir.Neg(self(e.x, dt))
        if isinstance(e, Binary):
            if e.op in ("and", "or"):
                return ir.Logic(e.op, self(e.a, "bool"), self(e.b, "bool"))
            if e.dtype == "bool":  # comparison: operands in their common dtype
                odt = e.operand_dtype
                return ir.Cmp(e.op, self(e.a, odt), self(e.b, odt))
            return ir.BinOp(e.op, self(e.a, dt), self(e.b, dt))
        if isinstance(e, Call):
            if e.fn in ("f32", "f64", "i32"):
                a = e.args[0]
                return self._convert(self(a, a.dtype), e.fn)
            if e.fn == "select":
                return ir.Select(self(e.args[0], "bool"), self(e.args[1], dt), self(e.args[2], dt))
            if e.fn in ("max", "min"):
                return ir.BinOp(e.fn, self(e.args[0], dt), self(e.args[1], dt))
            return ir.Call(e.fn, (self(e.args[0], dt),), dt)
        raise TypeError(f"cannot lower {e!r}")

    @staticmethod
    def _convert(x: ir.Expr, dtype: str) -> ir.Expr:
        if x.dtype == dtype:
            return x
        if isinstance(x, ir.IntImm):
            return _constant(x.value, dtype)
        return ir.Cast(dtype, x)


def _constant(value, dtype: str) -> ir.Expr:
    if DTYPES[dtype].is_float:
        return ir.FloatImm(float(value), dtype)
    if isinstance(value, float) and not math.isfinite(value):
        value = DTYPES[dtype].identity("max" if value < 0 else "min")
    return ir.IntImm(int(value), dtype)


def combine(op: str, acc: ir.Expr, value: ir.Expr) -> ir.Expr:
    """acc (op) value for a reduction op + * max min."""
    return ir.BinOp(op, acc, value)


def lower_stage(bound: BoundOp, name: str, buffers: dict) -> ir.Stmt:
    """The loop nest that computes stage `name` with the default schedule."""
    bs = bound.stages[name]
    s = bs.stage
    env = {v: ir.Var(v) for v in s.all_vars}
    out = buffers[name]
    value = ValueLowering(bound, bs, buffers, env)(s.rhs, s.dtype)
    lhs = tuple(env[v] for v in s.lhs_vars)
    if s.reduce_op is None:
        body: ir.Stmt = ir.Store(out, lhs, value)
    else:
        body = ir.Store(out, lhs, combine(s.reduce_op, ir.Load(out, lhs), value))
    for v in reversed(s.red_vars):
        lo, ext = bs.ranges[v]
        body = ir.For(env[v], ir.const(lo), ir.const(ext), body)
    if s.reduce_op is not None:
        init = ir.Store(out, lhs, _constant(DTYPES[s.dtype].identity(s.reduce_op), s.dtype))
        body = ir.seq(init, body)
    for v in reversed(s.lhs_vars):
        lo, ext = bs.ranges[v]
        body = ir.For(env[v], ir.const(lo), ir.const(ext), body)
    return body


def lower(bound: BoundOp) -> ir.Func:
    """The whole function: every stage at the root in dependency order, temporaries allocated around it."""
    buffers = buffers_of(bound)
    body = ir.seq(*(lower_stage(bound, s.name, buffers) for s in bound.op.stages))
    for s in reversed(bound.op.stages):
        if buffers[s.name].role == "temp":
            body = ir.Allocate(buffers[s.name], body)
    params = tuple(buffers[p.name] for p in bound.op.params) + tuple(buffers[o] for o in bound.op.outputs)
    return ir.Func(bound.op.name, params, body)
