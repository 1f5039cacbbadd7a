"""Generate LLVM IR (llvmlite.ir objects, never strings) from the loop IR.

The kernel is `i32 NAME(ptr noalias A, ptr noalias B, ...)`: one pointer per buffer (inputs then outputs),
returning 0, or 1 when a temporary buffer could not be allocated. Indices are i64; float arithmetic carries
the `contract` flag so that LLVM fuses multiply-add into FMA.

>>> import tensorlang as tl
>>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=4)
>>> "fmul contract float" in str(emit_module(s.lowered()))
True
"""
from __future__ import annotations

import llvmlite.ir as ll

from . import ir
from .dtypes import DTYPES

I1, I8, I32, I64 = ll.IntType(1), ll.IntType(8), ll.IntType(32), ll.IntType(64)
F32, F64 = ll.FloatType(), ll.DoubleType()
PTR = ll.PointerType()
LL_TYPES = {"f32": F32, "f64": F64, "i32": I32, "i64": I64, "bool": I1}
FAST = ("contract",)
_FCMP = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "==": "==", "!=": "!="}
_ALIGN = 64


def ll_type(dtype: str) -> ll.Type:
    """The LLVM type of a dtype name."""
    return LL_TYPES[dtype]


def emit_module(func: ir.Func, triple: str = "", data_layout: str = "") -> ll.Module:
    """An llvmlite module holding `func` as an exported function of the same name."""
    module = ll.Module(name=func.name)
    if triple:
        module.triple = triple
    if data_layout:
        module.data_layout = data_layout
    _FunctionEmitter(module, func).emit()
    return module


class _FunctionEmitter:
    def __init__(self, module: ll.Module, func: ir.Func):
        self.module, self.func = module, func
        fnty = ll.FunctionType(I32, [PTR] * len(func.params))
        self.fn = ll.Function(module, fnty, name=func.name)
        self.ptrs: dict[str, ll.Value] = {}
        for arg, buf in zip(self.fn.args, func.params):
            arg.name = buf.name
            arg.add_attribute("noalias")
            self.ptrs[buf.name] = arg
        self.vars: dict[str, ll.Value] = {}
        self.allocated: list[ll.Value] = []
        self.b = ll.IRBuilder(self.fn.append_basic_block("entry"))
        self.fail_block = None

    def emit(self) -> None:
        self.stmt(self.func.body)
        self.b.ret(I32(0))
        if self.fail_block is not None:
            self.b.position_at_end(self.fail_block)
            self.b.ret(I32(1))

    # ---- helpers ----
    def intrinsic(self, name: str, ret: ll.Type, args: list[ll.Type], overload: list[ll.Type]):
        return self.module.declare_intrinsic(name, overload, ll.FunctionType(ret, args))

    def extern(self, name: str, ret: ll.Type, args: list[ll.Type]):
        if name in self.module.globals:
            return self.module.globals[name]
        return ll.Function(self.module, ll.FunctionType(ret, args), name=name)

    def address(self, buf: ir.Buffer, indices: list[ll.Value]) -> ll.Value:
        """Pointer to buf[indices] (row-major) from already-emitted i64 index values."""
        flat = None
        stride = 1
        for d in range(len(buf.shape) - 1, -1, -1):
            term = indices[d]
            if stride != 1:
                term = self.b.mul(term, I64(stride), flags=["nsw"])
            flat = term if flat is None else self.b.add(flat, term, flags=["nsw"])
            stride *= buf.shape[d]
        if flat is None:
            flat = I64(0)
        return self.b.gep(self.ptrs[buf.name], [flat], inbounds=True, source_etype=ll_type(buf.dtype))

    # ---- statements ----
    def stmt(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, ir.Store):
            value = self.expr(s.value)
            ptr = self.address(s.buffer, [self.expr(i) for i in s.indices])
            self.b.store(value, ptr, align=DTYPES[s.buffer.dtype].itemsize)
        elif isinstance(s, ir.For):
            self.loop(s)
        elif isinstance(s, ir.If):
            cond = self.expr(s.cond)
            if s.orelse is None:
                with self.b.if_then(cond):
                    self.stmt(s.then)
            else:
                with self.b.if_else(cond) as (then, orelse):
                    with then:
                        self.stmt(s.then)
                    with orelse:
                        self.stmt(s.orelse)
        elif isinstance(s, ir.Let):
            self.vars[s.var.name] = self.expr(s.value)
            self.stmt(s.body)
            del self.vars[s.var.name]
        elif isinstance(s, ir.Allocate):
            self.allocate(s)
        else:
            raise TypeError(f"codegen: unknown statement {s!r}")

    def allocate(self, s: ir.Allocate) -> None:
        buf = s.buffer
        nbytes = max(_ALIGN, -(-buf.size * DTYPES[buf.dtype].itemsize // _ALIGN) * _ALIGN)
        aligned_alloc = self.extern("aligned_alloc", PTR, [I64, I64])
        free = self.extern("free", ll.VoidType(), [PTR])
        ptr = self.b.call(aligned_alloc, [I64(_ALIGN), I64(nbytes)], name=buf.name)
        if self.fail_block is None:
            self.fail_block = self.fn.append_basic_block("out_of_memory")
        ok = self.fn.append_basic_block(f"{buf.name}_allocated")
        self.b.cbranch(self.b.icmp_unsigned("==", ptr, ll.Constant(PTR, None)), self.fail_block, ok)
        self.b.position_at_end(ok)
        self.ptrs[buf.name] = ptr
        self.stmt(s.body)
        self.b.call(free, [ptr])
        del self.ptrs[buf.name]

    def loop(self, s: ir.For) -> None:
        lo = self.expr(s.lo)
        hi = self.b.add(lo, self.expr(s.extent), flags=["nsw"])
        pre = self.b.block
        header = self.fn.append_basic_block(f"{s.var.name}_loop")
        body = self.fn.append_basic_block(f"{s.var.name}_body")
        after = self.fn.append_basic_block(f"{s.var.name}_end")
        self.b.branch(header)
        self.b.position_at_end(header)
        iv = self.b.phi(I64, name=s.var.name)
        iv.add_incoming(lo, pre)
        self.b.cbranch(self.b.icmp_signed("<", iv, hi), body, after)
        self.b.position_at_end(body)
        self.vars[s.var.name] = iv
        self.stmt(s.body)
        nxt = self.b.add(iv, I64(1), flags=["nsw"])
        iv.add_incoming(nxt, self.b.block)
        self.b.branch(header)
        self.b.position_at_end(after)
        del self.vars[s.var.name]

    # ---- expressions ----
    def expr(self, e: ir.Expr) -> ll.Value:
        b = self.b
        if isinstance(e, ir.IntImm):
            return ll_type(e.dtype)(e.value)
        if isinstance(e, ir.FloatImm):
            return ll_type(e.dtype)(e.value)
        if isinstance(e, ir.Var):
            return self.vars[e.name]
        if isinstance(e, ir.Load):
            return self.load(e)
        if isinstance(e, ir.BinOp):
            return self.binop(e.op, self.expr(e.a), self.expr(e.b), e.dtype)
        if isinstance(e, ir.Cmp):
            a, c = self.expr(e.a), self.expr(e.b)
            if DTYPES[e.a.dtype].is_float:
                return b.fcmp_ordered(_FCMP[e.op], a, c) if e.op != "!=" else b.fcmp_unordered("!=", a, c)
            return b.icmp_signed(e.op, a, c)
        if isinstance(e, ir.Logic):
            a, c = self.expr(e.a), self.expr(e.b)
            return b.and_(a, c) if e.op == "and" else b.or_(a, c)
        if isinstance(e, ir.Not):
            return b.xor(self.expr(e.a), I1(1))
        if isinstance(e, ir.Neg):
            a = self.expr(e.a)
            return b.fneg(a) if DTYPES[e.dtype].is_float else b.sub(a.type(0), a)
        if isinstance(e, ir.Select):
            return b.select(self.expr(e.cond), self.expr(e.t), self.expr(e.f))
        if isinstance(e, ir.Cast):
            return self.cast(self.expr(e.a), e.a.dtype, e.dtype)
        if isinstance(e, ir.Call):
            return self.call(e.fn, [self.expr(a) for a in e.args], e.dtype)
        raise TypeError(f"codegen: unknown expression {e!r}")

    def load(self, e: ir.Load) -> ll.Value:
        b = self.b
        if not any(e.guard):
            ptr = self.address(e.buffer, [self.expr(i) for i in e.indices])
            return b.load(ptr, align=DTYPES[e.buffer.dtype].itemsize, typ=ll_type(e.buffer.dtype))
        # guarded: out-of-range reads give 0; the address is clamped to a valid one so the load is safe
        ok = None
        safe = []
        for d, ix in enumerate(e.indices):
            v = self.expr(ix)
            if e.guard[d]:
                inside = b.and_(b.icmp_signed(">=", v, I64(0)), b.icmp_signed("<", v, I64(e.buffer.shape[d])))
                ok = inside if ok is None else b.and_(ok, inside)
                v = b.select(inside, v, I64(0))
            safe.append(v)
        value = b.load(self.address(e.buffer, safe), align=DTYPES[e.buffer.dtype].itemsize,
                       typ=ll_type(e.buffer.dtype))
        return b.select(ok, value, ll_type(e.buffer.dtype)(0))

    def binop(self, op: str, a: ll.Value, c: ll.Value, dtype: str) -> ll.Value:
        b = self.b
        if DTYPES[dtype].is_float:
            if op == "+":
                return b.fadd(a, c, flags=FAST)
            if op == "-":
                return b.fsub(a, c, flags=FAST)
            if op == "*":
                return b.fmul(a, c, flags=FAST)
            if op == "/":
                return b.fdiv(a, c, flags=FAST)
            if op in ("min", "max"):
                return self.call(op, [a, c], dtype)
            if op == "**":
                return self.call("pow", [a, c], dtype)
            if op == "//":
                return self.call("floor", [b.fdiv(a, c)], dtype)
            if op == "%":  # numpy: the result has the sign of the divisor
                r = b.frem(a, c)
                fix = b.and_(b.fcmp_unordered("!=", r, a.type(0)),
                             b.xor(b.fcmp_ordered("<", r, a.type(0)), b.fcmp_ordered("<", c, a.type(0))))
                return b.select(fix, b.fadd(r, c), r)
            raise TypeError(f"codegen: float op {op}")
        wide = dtype == "i64"
        flags = ["nsw"] if wide else []
        if op == "+":
            return b.add(a, c, flags=flags)
        if op == "-":
            return b.sub(a, c, flags=flags)
        if op == "*":
            return b.mul(a, c, flags=flags)
        if op in ("min", "max"):
            return b.select(b.icmp_signed("<" if op == "min" else ">", a, c), a, c)
        if op in ("/", "//", "%"):
            # division by zero gives 0 (like numpy's result, without its warning) instead of a crash
            zero = b.icmp_signed("==", c, a.type(0))
            safe = b.select(zero, a.type(1), c)
            q, r = b.sdiv(a, safe), b.srem(a, safe)
            if op == "/":
                out = q
            else:
                fix = b.and_(b.icmp_signed("!=", r, a.type(0)),
                             b.xor(b.icmp_signed("<", r, a.type(0)), b.icmp_signed("<", safe, a.type(0))))
                out = b.select(fix, b.sub(q, a.type(1)), q) if op == "//" else b.select(fix, b.add(r, safe), r)
            return b.select(zero, a.type(0), out)
        if op == "**":
            fa, fc = b.sitofp(a, F64), b.sitofp(c, F64)
            return b.fptosi(self.call("pow", [fa, fc], "f64"), a.type)
        raise TypeError(f"codegen: int op {op}")

    def call(self, fn: str, args: list[ll.Value], dtype: str) -> ll.Value:
        t = ll_type(dtype)
        if fn == "abs" and not DTYPES[dtype].is_float:
            f = self.intrinsic("llvm.abs", t, [t, I1], [t])
            return self.b.call(f, [args[0], I1(0)])
        name = {"abs": "llvm.fabs", "max": "llvm.maxnum", "min": "llvm.minnum", "exp": "llvm.exp",
                "log": "llvm.log", "sqrt": "llvm.sqrt", "tanh": "llvm.tanh", "pow": "llvm.pow",
                "floor": "llvm.floor"}[fn]
        f = self.intrinsic(name, t, [t] * len(args), [t])
        return self.b.call(f, args, fastmath=FAST)

    def cast(self, v: ll.Value, src: str, dst: str) -> ll.Value:
        b = self.b
        if src == dst:
            return v
        s, d = DTYPES[src], DTYPES[dst]
        t = ll_type(dst)
        if s.is_float and d.is_float:
            return b.fpext(v, t) if d.itemsize > s.itemsize else b.fptrunc(v, t)
        if s.is_float:  # saturating, NaN -> 0: never undefined behaviour
            f = self.intrinsic("llvm.fptosi.sat", t, [v.type], [t, v.type])
            return b.call(f, [v])
        if src == "bool":
            return b.uitofp(v, t) if d.is_float else b.zext(v, t)
        if d.is_float:
            return b.sitofp(v, t)
        if dst == "bool":
            return b.icmp_signed("!=", v, v.type(0))
        return b.sext(v, t) if d.itemsize > s.itemsize else b.trunc(v, t)
