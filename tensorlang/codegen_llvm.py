"""Generate LLVM IR (llvmlite.ir objects, never strings) from the loop IR.

The kernel is `i32 NAME(ptr noalias A, ptr noalias B, ...)`: one pointer per buffer (inputs then outputs),
returning 0, 1 when a buffer could not be allocated, or 2 when an index read from a tensor was out of range
(`i64 NAME_index_error(ptr value)` then gives the number of that gathered index and its value, see
:func:`_index_error_function`). Indices are i64; float arithmetic carries the `contract` flag so that LLVM fuses
multiply-add into FMA. A bool is an `i1` value and one byte (0 or 1) in memory.

Loops: serial loops are plain loops; unrolled loops are replicated with the index as a constant;
vectorized loops are emitted with every value that depends on the index as an explicit LLVM vector
(contiguous loads and stores become vector loads and stores, others gathers and scatters, and a guard that
depends on the index becomes a lane mask), once per register-wide chunk of lanes when the loop is wider than
a register (48 f32 lanes become three `<16 x float>` chunks with AVX-512: LLVM's own legalisation of a
`<48 x float>` goes through the stack); a parallel loop's body is outlined
into a function of a chunk range `(begin, end, closure)` that the runtime's thread pool calls through
`tensorlang_parallel_for`.

>>> import tensorlang as tl
>>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=4)
>>> "fmul contract float" in str(emit_module(s.lowered()))
True
"""
from __future__ import annotations

from typing import cast

import llvmlite.ir as ll

from . import ir
from .dtypes import DTYPES
from .errors import BuildError
from .loopnest import substitute, variables
from .simplify import _linear, simplify
from .symbolic import is_symbolic, size_var, upper_bound

I1, I8, I16, I32, I64 = ll.IntType(1), ll.IntType(8), ll.IntType(16), ll.IntType(32), ll.IntType(64)
F32, F64 = ll.FloatType(), ll.DoubleType()
PTR = ll.PointerType()
# signed and unsigned integers share LLVM's types; the instructions on them say which they are
LL_TYPES = {"f32": F32, "f64": F64, "i32": I32, "i64": I64, "bool": I1, "u8": I8, "i8": I8, "u16": I16, "i16": I16,
            "u32": I32, "u64": I64}
FAST = ("contract",)
# a division may become a multiply by the divisor's reciprocal (one division per loop-invariant or repeated divisor,
# a constant divisor's reciprocal folded): x/768 and x/sqrt(v) in a loop cost a vdivps a vector otherwise
DIV_FLAGS = ("contract", "arcp")
_ALIGN = 64
PARALLEL_FOR = "tensorlang_parallel_for"
MAX_DEINTERLEAVED_STRIDE = 4
"""A vector load whose lanes lie at most this many elements apart is one wide load and a shuffle (see
`_Emitter._strided_load`); farther apart, a gather (the wide load would read more than it keeps)."""
MAX_SHUFFLED_SPAN = 2
"""The most vectors of elements that one load spans where its lanes sit at constant offsets that are no single
stride (``_Emitter._shuffled_load``); wider, the lanes are gathered."""
WORKSPACE_MIN_BYTES = 64 * 1024  # temporaries this large are kept between calls (see `_Emitter.allocate`)
RELEASE_SUFFIX = "_release_workspace"  # the function that frees what a kernel keeps: NAME + RELEASE_SUFFIX
INDEX_ERROR_SUFFIX = "_index_error"  # the function that tells which index was out of range: NAME + INDEX_ERROR_SUFFIX
INDEX_ERROR_STATUS = 2  # what a kernel returns when an index read from a tensor was out of range
_ERROR_RECORD = "tl.error"  # the pointer (in `_Emitter.ptrs`) to a call's record of its first index error
_REDUCE_IDENTITY = ("+", "*", "max", "min")


def ll_type(dtype: str) -> ll.Type:
    """The llvmlite type of a dtype name ("f32", "f64", "i32", "u8", "bool", ...) as a value.

    >>> str(ll_type("f32")), str(ll_type("bool"))
    ('float', 'i1')
    """
    return LL_TYPES[dtype]


def mem_type(dtype: str) -> ll.Type:
    """The llvmlite type of a dtype in memory: a bool is a byte there (numpy's bool_; LLVM packs a vector of `i1`
    into bits in memory).

    >>> str(mem_type("bool")), str(mem_type("f64"))
    ('i8', 'double')
    """
    return I8 if dtype == "bool" else LL_TYPES[dtype]


_CONSTANTS: dict[tuple, ll.Constant] = {}


def transpose_vectors(b: ll.IRBuilder, rows: list) -> list:
    """The columns of the n x n matrix whose rows are the n-lane vectors `rows` (n a power of two): log2(n)
    rounds, each swapping the off-diagonal blocks of every pair of rows `d` apart with two-vector shuffles
    (`vpermt2ps` on AVX-512).

    >>> fn = ll.Function(ll.Module(), ll.FunctionType(ll.VoidType(), []), "f")
    >>> block = fn.append_basic_block()
    >>> rows = [constant(I64, [4 * r + c for c in range(4)], 4) for r in range(4)]
    >>> cols = transpose_vectors(ll.IRBuilder(block), rows)
    >>> len(cols), len(block.instructions)  # 4 log2(4) shuffles
    (4, 8)
    """
    n = len(rows)
    out = list(rows)
    d = n // 2
    while d:
        nxt = list(out)
        for i in range(n):
            if i & d:
                continue
            lo_mask = [c if not c & d else n + c - d for c in range(n)]
            hi_mask = [c + d if not c & d else n + c for c in range(n)]
            nxt[i] = b.shuffle_vector(out[i], out[i + d], constant(I32, lo_mask, n))
            nxt[i + d] = b.shuffle_vector(out[i], out[i + d], constant(I32, hi_mask, n))
        out = nxt
        d //= 2
    return out


def vector_pieces(w: int, chunk: int) -> list[tuple[int, int]]:
    """(first lane, lanes) of each vector a vectorized loop of `w` lanes is emitted as: chunks of `chunk` lanes
    (one register), and a rest split into powers of two. A vector of 3, 5 or 7 lanes is legal LLVM, but the x86
    backend aborts the process on some shuffles of them (`combineX86ShufflesRecursively`: "Can only combine
    shuffles upto size of the root op" on a `<3 x float>` load widened to 4).
    A piece of one lane is emitted as scalar code.

    >>> vector_pieces(48, 16), vector_pieces(7, 16), vector_pieces(20, 16)
    ([(0, 16), (16, 16), (32, 16)], [(0, 4), (4, 2), (6, 1)], [(0, 16), (16, 4)])
    """
    out = []
    for start in range(0, w, chunk):
        n = min(chunk, w - start)
        while n:
            p = 1 << (n.bit_length() - 1)
            out.append((start, p))
            start, n = start + p, n - p
    return out


def constant(t: ll.Type, value, lanes: int = 0) -> ll.Constant:
    """The constant `value` of scalar type `t`, or, with `lanes`, the vector of `lanes` copies of it; a list
    `value` with `lanes` is a vector of those elements. Made once and shared (llvmlite then formats it once too:
    a module of unrolled vector code uses the same few constants thousands of times).

    Example::

        >>> str(constant(F32, 1.0, lanes=2))
        '<2 x float> <float 0x3ff0000000000000, float 0x3ff0000000000000>'
        >>> constant(F32, -0.0) is constant(F32, 0.0)
        False
    """
    key = (str(t), repr(value), lanes)  # repr: -0.0 is not 0.0
    c = _CONSTANTS.get(key)
    if c is None:
        if len(_CONSTANTS) > 100_000:  # a long tuning run builds many kernels: keep the table small
            _CONSTANTS.clear()
        if lanes:
            values = value if isinstance(value, list) else [value] * lanes
            c = ll.Constant(ll.VectorType(t, lanes), [ll.Constant(t, v) for v in values])
        else:
            c = ll.Constant(t, value)
        _CONSTANTS[key] = c
    return c


def _int_values(v: ll.Value):
    """The Python int of an integer constant, or the list of them of a constant integer vector; else None."""
    if not isinstance(v, ll.Constant):
        return None
    k = v.constant
    if isinstance(k, int) and isinstance(v.type, ll.IntType):
        return k
    if isinstance(k, list) and isinstance(v.type, ll.VectorType) and isinstance(v.type.element, ll.IntType) \
            and all(isinstance(x, ll.Constant) and isinstance(x.constant, int) for x in k):
        return [x.constant for x in k]
    return None


def _operand_key(v: ll.Value):
    """What identifies an operand for merging instructions: a constant by its type and value (llvmlite makes a new
    object for each), another value by its identity."""
    return ("const", str(v.type), v.constant if not isinstance(v.constant, list) else tuple(map(str, v.constant))) \
        if isinstance(v, ll.Constant) else id(v)


def _fold_int(op: str, a: ll.Value, c: ll.Value) -> ll.Value | None:
    """`a op c` (+, - or *, operands of one integer type) as a constant or as one of the operands where that is
    exact, else None. Folded values wrap to the type's width, as the instruction would.

    Example::

        >>> x = ll.Argument(ll.Function(ll.Module(), ll.FunctionType(I64, [I64]), "f"), I64)
        >>> _fold_int("*", I64(3), I64(576)).constant, _fold_int("+", I64(0), x) is x, _fold_int("*", x, x)
        (1728, True, None)
        >>> str(_fold_int("+", constant(I64, 0, 2), constant(I64, [0, 1], 2)))
        '<2 x i64> <i64 0, i64 1>'
    """
    va, vc = _int_values(a), _int_values(c)
    if va is not None and vc is not None:
        elem = a.type.element if isinstance(a.type, ll.VectorType) else a.type
        bits = elem.width

        def wrap(x: int) -> int:
            x &= (1 << bits) - 1
            return x - (1 << bits) if bits > 1 and x >> (bits - 1) else x

        f = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}[op]
        if isinstance(va, list) or isinstance(vc, list):
            if not (isinstance(va, list) and isinstance(vc, list)) or len(va) != len(vc):
                return None
            return constant(elem, [wrap(f(x, y)) for x, y in zip(va, vc)], len(va))
        return constant(elem, wrap(f(va, vc)))

    def uniform(v, n):  # a constant scalar, or vector of n copies
        return v == n or (isinstance(v, list) and all(x == n for x in v))

    if op in ("+", "-") and uniform(vc, 0):
        return a
    if op == "+" and uniform(va, 0):
        return c
    if op == "*" and uniform(vc, 1):
        return a
    if op == "*" and uniform(va, 1):
        return c
    if op == "*" and (uniform(va, 0) or uniform(vc, 0)):
        return a if uniform(va, 0) else c
    return None


def _runtime(e: ir.Expr) -> ir.Expr:
    """`e`, or the expression over the size parameters that a symbolic IntImm stands for."""
    return e.value.to_ir() if isinstance(e, ir.IntImm) and is_symbolic(e.value) else e


def emit_module(func: ir.Func, triple: str = "", data_layout: str = "", vector_bits: int = 0) -> ll.Module:
    """An llvmlite module holding `func` as an exported function of the same name. With `vector_bits` (the
    target's widest register, e.g. 512), a vectorized loop wider than one register is emitted in chunks of that
    width; 0 emits each vectorized loop as one vector.

    A 32-lane loop of f32 becomes four `<8 x float>` chunks for 256-bit registers, one `<32 x float>` without:

    >>> import tensorlang as tl
    >>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=32)
    >>> s["B"].vectorize("i")
    >>> [str(emit_module(s.lowered(), vector_bits=bits)).count("fmul contract <") for bits in (256, 0)]
    [4, 1]
    >>> str(emit_module(s.lowered())).splitlines()[4]
    'define i32 @"f"(ptr noalias %"A", ptr noalias %"B") "reciprocal-estimates"="none" "stackrealign"'
    """
    module = ll.Module(name=func.name)
    if triple:
        module.triple = triple
    if data_layout:
        module.data_layout = data_layout
    fn = ll.Function(module, ll.FunctionType(I32, [PTR] * len(func.params) + [I64] * len(func.sizes)),
                     name=func.name)
    ptrs = {}
    for arg, buf in zip(fn.args, func.params):
        arg.name = buf.name
        arg.add_attribute("noalias")
        ptrs[buf.name] = arg
    sizes = {}
    for arg, name in zip(fn.args[len(func.params):], func.sizes):
        arg.name = name
        sizes[size_var(name).name] = arg
    em = _Emitter(module, fn, ptrs, sizes, func.name, vector_bits)
    if any(True for _ in ir.index_checks(func.body)):
        em.ptrs[_ERROR_RECORD] = em.error_record()
    em.emit(func.body)
    _release_function(module, func.name)
    _index_error_function(module, func.name)
    for defined in module.functions:
        if not defined.is_declaration:
            _kernel_attributes(defined)
    return module


def _declare(module: ll.Module, name: str, ret: ll.Type, args: list[ll.Type]):
    """The function `name` of `module`, declared (as returning `ret` from `args`) where the module lacks it."""
    if name in module.globals:
        return module.globals[name]
    return ll.Function(module, ll.FunctionType(ret, args), name=name)


def _workspace_slots(module: ll.Module) -> list:
    return [g for g in module.global_values if g.name.startswith("tl.workspace.")]


def _release_function(module: ll.Module, name: str) -> None:
    """Define `void NAME_release_workspace(void)`, which frees the temporaries the kernel keeps between calls (see
    `_Emitter.allocate`; it does nothing in a kernel that keeps none): whoever unloads the machine code calls it
    first.

    >>> import tensorlang as tl
    >>> s = tl.schedule(tl.op("def f(A: f32[N]) -> C:\\n    B[i] = A[i] * 2.0\\n    C[i] = B[i] + B[i]"), N=65536)
    >>> [str(emit_module(s.lowered())).count("atomicrmw xchg") for s in (s, tl.schedule(s.op, N=64))]
    [3, 0]
    """
    slots = _workspace_slots(module)
    fn = ll.Function(module, ll.FunctionType(ll.VoidType(), []), name=name + RELEASE_SUFFIX)
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    free = _declare(module, "free", ll.VoidType(), [PTR])
    for slot in slots:
        b.call(free, [b.atomic_rmw("xchg", slot, ll.Constant(PTR, None), "acq_rel")])
    b.ret_void()
    if not slots:
        return
    # also run when a shared library made of the module is unloaded (a JIT engine never runs it: its owner calls
    # the function, see `target.MachineCode`)
    entry = ll.LiteralStructType([I32, PTR, PTR])
    dtors = ll.GlobalVariable(module, ll.ArrayType(entry, 1), name="llvm.global_dtors")
    dtors.linkage = "appending"
    dtors.initializer = ll.Constant(ll.ArrayType(entry, 1),
                                    [ll.Constant(entry, [I32(65535), fn, ll.Constant(PTR, None)])])


def _last_error(module: ll.Module, name: str) -> ll.GlobalVariable:
    """The record of the last index error of kernel `name` (the gathered index's number + 1, 0 for none; the
    value), as a call that failed left it."""
    key = f"{name}.index_error"
    if key in module.globals:
        return module.globals[key]
    g = ll.GlobalVariable(module, ll.ArrayType(I64, 2), name=key)
    g.linkage = "internal"
    g.initializer = ll.Constant(ll.ArrayType(I64, 2), [I64(0), I64(0)])
    return g


def _index_error_function(module: ll.Module, name: str) -> None:
    """Define `i64 NAME_index_error(ptr value)`: after a call of NAME that returned 2, the number of the gathered
    index that was out of range (`tensorlang.program.gather_sites`), its value stored at `value` (when not NULL);
    -1 when no call has failed so. It tells of the last failing call of the process: calls of one kernel from
    several threads at once, both failing, may see each other's.

    >>> import tensorlang as tl
    >>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]"), N=4)
    >>> 'define i64 @"f_index_error"(ptr %"value")' in str(emit_module(s.lowered()))
    True
    """
    g = _last_error(module, name)
    fn = ll.Function(module, ll.FunctionType(I64, [PTR]), name=name + INDEX_ERROR_SUFFIX)
    fn.args[0].name = "value"
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    site = b.load_atomic(g, "monotonic", 8, typ=I64)
    with b.if_then(b.icmp_unsigned("!=", fn.args[0], ll.Constant(PTR, None))):
        slot = b.gep(g, [I64(0), I64(1)], inbounds=True, source_etype=g.value_type)
        b.store(b.load_atomic(slot, "monotonic", 8, typ=I64), fn.args[0], align=8)
    b.ret(b.sub(site, I64(1)))


def _report_function(module: ll.Module) -> ll.Function:
    """`void tl.report_index(ptr record, i64 site, i64 value)`: record an index out of range in a call's record,
    if it holds none yet (the first one wins, whichever thread finds it)."""
    if "tl.report_index" in module.globals:
        return module.globals["tl.report_index"]
    fn = ll.Function(module, ll.FunctionType(ll.VoidType(), [PTR, I64, I64]), name="tl.report_index")
    fn.linkage = "internal"
    fn.attributes.add("cold")
    fn.attributes.add("noinline")
    rec, site, value = fn.args
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    first = b.extract_value(b.cmpxchg(rec, I64(0), b.add(site, I64(1)), "acq_rel", "monotonic"), 1)
    with b.if_then(first):
        b.atomic_rmw("xchg", b.gep(rec, [I64(1)], inbounds=True, source_etype=I64), value, "monotonic")
    b.ret_void()
    return fn


def _kernel_attributes(fn: ll.Function) -> None:
    """Give `fn` the string attributes every generated function carries:

    - `"stackrealign"`: its prologue aligns the stack to what its frame needs (64 bytes where 512-bit registers
      are spilled), so that spills are aligned whatever the caller's stack alignment. Without it, a function that
      spills zmm registers keeps the 16-byte alignment the ABI promises, and its spills straddle two cache lines in
      half the stack positions, so that its speed would depend on where ASLR put the stack and on the thread.
    - `"reciprocal-estimates"="none"`: a division marked `arcp` (see `DIV_FLAGS`) becomes a multiply by a
      reciprocal computed with a real division, never by the 12-bit `vrcp14ps` / `vrsqrt14ps` estimates and a
      Newton step that x86 would use otherwise (1/sqrt(0) would then be NaN, not inf, and 1 ulp less exact).

    llvmlite's attribute sets take only a fixed list of names, which lacks these, so they go in as their IR text.

    >>> m = ll.Module()
    >>> f = ll.Function(m, ll.FunctionType(I32, []), name="f")
    >>> _ = ll.IRBuilder(f.append_basic_block()).ret(I32(0))
    >>> _kernel_attributes(f)
    >>> str(f).splitlines()[0]
    'define i32 @"f"() "reciprocal-estimates"="none" "stackrealign"'
    """
    for text in ('"stackrealign"', '"reciprocal-estimates"="none"'):
        set.add(fn.attributes, text)


def _mangle(t: ll.Type) -> str:
    if isinstance(t, ll.VectorType):
        return f"v{t.count}{_mangle(t.element)}"
    if isinstance(t, ll.PointerType):
        return "p0"
    return {F32: "f32", F64: "f64"}.get(t) or f"i{t.width}"


def _is_vec(v: ll.Value) -> bool:
    return isinstance(v.type, ll.VectorType)


def _buffers_named(s: ir.Stmt, name: str) -> list[ir.Buffer]:
    """The distinct buffers called `name` that the statements in `s` read or write (one, unless some are views)."""
    out: list[ir.Buffer] = []

    def see(b: ir.Buffer) -> None:
        if b.name == name and b not in out:
            out.append(b)

    def stores(st: ir.Stmt) -> None:
        if isinstance(st, ir.Store):
            see(st.buffer)
        elif isinstance(st, ir.Seq):
            for x in st.stmts:
                stores(x)
        elif isinstance(st, ir.If):
            stores(st.then)
            if st.orelse is not None:
                stores(st.orelse)
        elif isinstance(st, (ir.For, ir.Let, ir.Allocate)):
            stores(st.body)
    stores(s)
    for e in ir.stmt_exprs(s):
        for ld in ir.loads(e):
            see(ld.buffer)
    return out


class _Emitter:
    """Emits one LLVM function body from a loop-IR statement."""

    def __init__(self, module: ll.Module, fn: ll.Function, ptrs: dict, vars: dict, base_name: str,
                 vector_bits: int = 0):
        self.module, self.fn, self.base_name = module, fn, base_name
        self._cse: dict[tuple, tuple] = {}  # see int_arith
        self.vector_bits = vector_bits
        self.ptrs = dict(ptrs)
        self.vars = dict(vars)
        self.entry = fn.append_basic_block("entry")
        self.b = ll.IRBuilder(self.entry)
        self.fail_block = None
        self.lanes = 0            # width of the vectorized loop being emitted (0: scalar code)
        self.lane_var: str | None = None  # its index variable
        self.mask = None          # lanes a vector guard leaves active
        self.defs: dict[str, ir.Expr] = {}  # Let-bound index variables and their IR definitions
        # temporaries over symbolic sizes laid out with each dimension at its largest extent (see `allocate`)
        self.padded: dict[str, ir.Buffer] = {}
        self._addr_cache: dict = {}
        self.n_outlined = 0
        self.int_divisions = 0    # integer divisions and remainders of the program emitted so far (see `loop`)
        # whether the integer arithmetic being emitted computes an address or a loop bound (may assume it does not
        # overflow: `nsw`), or a value of the program (i64 values wrap, as numpy's)
        self.in_index = True

    def emit(self, body: ir.Stmt) -> None:
        self.stmt(body)
        rec = self.ptrs.get(_ERROR_RECORD)
        if rec is not None:  # an index out of range: the record goes where NAME_index_error reads it, status 2
            site = self.b.load(rec, typ=I64)
            failed, ok = self.fn.append_basic_block("index_error"), self.fn.append_basic_block("done")
            self.b.cbranch(self.b.icmp_unsigned("!=", site, I64(0)), failed, ok)
            self.b.position_at_end(failed)
            g = _last_error(self.module, self.fn.name)
            value = self.b.load(self.b.gep(rec, [I64(1)], inbounds=True, source_etype=I64), typ=I64)
            # (atomic stores, as exchanges: llvmlite's store_atomic wants typed pointers)
            self.b.atomic_rmw("xchg", self.b.gep(g, [I64(0), I64(1)], inbounds=True, source_etype=g.value_type),
                              value, "monotonic")
            self.b.atomic_rmw("xchg", g, site, "monotonic")
            self.b.ret(I32(INDEX_ERROR_STATUS))
            self.b.position_at_end(ok)
        self.b.ret(I32(0))
        if self.fail_block is not None:
            self.b.position_at_end(self.fail_block)
            self.b.ret(I32(1))

    def error_record(self) -> ll.Value:
        """A call's record of its first index error (the gathered index's number + 1, 0 for none; the value), on
        the kernel's stack and cleared as the call starts."""
        with self.b.goto_block(self.entry):
            self.b.position_at_start(self.entry)
            rec = self.b.alloca(ll.ArrayType(I64, 2), name="index_error")
            rec.align = 8
            rec.type = PTR
            self.b.store(I64(0), rec)
            self.b.store(I64(0), self.b.gep(rec, [I64(1)], inbounds=True, source_etype=I64))
        return rec

    def index_check(self, e: ir.IndexCheck) -> ll.Value:
        """An index read from data (a scalar or a vector of lanes) where it is in 0..extent-1, else 0; the first
        lane out of range among those in use reports it (`tl.report_index`, a cold call)."""
        b = self.b
        saved, self.in_index = self.in_index, False
        v = self.expr(e.a)
        self.in_index = saved
        outside = b.icmp_unsigned(">=", v, self.const("i64", e.extent, v))  # negative values too
        report = outside
        active = self.mask
        if e.when is not None:
            w = self.expr(e.when)
            active = w if active is None else b.and_(*self.match(active, w))
        if active is not None:
            if _is_vec(active) and not _is_vec(report):
                active = self.any_lane(active)
            report = b.and_(*self.match(report, active))
        bad = self.any_lane(report) if _is_vec(report) else report
        with b.if_then(bad, likely=False):
            value = v
            if _is_vec(v):
                n = v.type.count
                bits = b.bitcast(report, ll.IntType(n))
                first = b.call(self.intrinsic("llvm.cttz", ll.IntType(n), [ll.IntType(n), I1], [ll.IntType(n)]),
                               [bits, I1(1)])
                value = b.extract_element(v, first)
            b.call(_report_function(self.module), [self.ptrs[_ERROR_RECORD], I64(e.site), value])
        return b.select(outside, self.const("i64", 0, v), v)

    def any_lane(self, mask: ll.Value) -> ll.Value:
        """Whether some lane of the i1 vector `mask` is set."""
        vt = mask.type
        return self.b.call(self.intrinsic("llvm.vector.reduce.or", I1, [vt], [vt]), [mask])

    # ---- helpers ----
    def intrinsic(self, name: str, ret: ll.Type, args: list[ll.Type], overload: list[ll.Type]):
        """Declare an overloaded LLVM intrinsic, e.g. llvm.exp.v16f32 (llvmlite cannot mangle vector types)."""
        full = ".".join([name] + [_mangle(t) for t in overload])
        if full in self.module.globals:
            return self.module.globals[full]
        return ll.Function(self.module, ll.FunctionType(ret, args), name=full)

    def extern(self, name: str, ret: ll.Type, args: list[ll.Type]):
        return _declare(self.module, name, ret, args)

    def fail_if(self, cond: ll.Value) -> None:
        if self.fail_block is None:
            self.fail_block = self.fn.append_basic_block("fail")
        ok = self.fn.append_basic_block("ok")
        self.b.cbranch(cond, self.fail_block, ok)
        self.b.position_at_end(ok)

    def bind(self, name: str, value):
        old = self.vars.get(name)
        self.vars[name] = value
        return old

    def unbind(self, name: str, old) -> None:
        if old is None:
            self.vars.pop(name, None)
        else:
            self.vars[name] = old

    def splat(self, v: ll.Value, lanes: int | None = None) -> ll.Value:
        """`v` as a vector of the current width (a vector stays as it is)."""
        lanes = lanes or self.lanes
        if _is_vec(v):
            return v
        if isinstance(v, ll.Constant) and isinstance(v.constant, (int, float)):
            return constant(v.type, v.constant, lanes)
        vt = ll.VectorType(v.type, lanes)
        if isinstance(v, ll.Constant):
            return ll.Constant(vt, [v] * lanes)
        block = self.b.block
        at_end = self.b._anchor == len(block.instructions)  # private: see int_arith
        key = ("splat", id(block), id(v), lanes)
        hit = self._cse.get(key) if at_end else None
        if hit is not None:
            return hit[2]
        undef = ll.Constant(vt, ll.Undefined)
        one = self.b.insert_element(undef, v, I32(0))
        out = self.b.shuffle_vector(one, undef, constant(I32, 0, lanes))
        if at_end:
            self._cse[key] = (v, None, out, block)
        return out

    def match(self, a: ll.Value, c: ll.Value):
        if _is_vec(a) and not _is_vec(c):
            c = self.splat(c, a.type.count)
        elif _is_vec(c) and not _is_vec(a):
            a = self.splat(a, c.type.count)
        return a, c

    def const(self, dtype: str, value, like: ll.Value | None = None) -> ll.Value:
        c = self.expr(ir.const(value, dtype)) if is_symbolic(value) else constant(ll_type(dtype), value)
        return self.splat(c, like.type.count) if like is not None and _is_vec(like) else c

    # ---- statements ----
    def stmt(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, ir.Store):
            self.store(s)
        elif isinstance(s, ir.For):
            if any(isinstance(x, ir.IntImm) and is_symbolic(x.value) for x in (s.lo, s.extent)):
                # bounds known at run time only: as expressions, never taken for constants
                s = ir.For(s.var, _runtime(s.lo), _runtime(s.extent), s.body, s.kind)
            if s.kind == "unrolled":
                if not self.transposed_store(s):
                    self.unrolled(s)
            elif s.kind == "vectorized":
                self.vectorized(s)
            elif s.kind == "parallel":
                self.parallel(s)
            elif not self.transposed_tile(s) and not self.transposed_store(s):
                self.loop(s)
        elif isinstance(s, ir.If):
            self.if_(s)
        elif isinstance(s, ir.Let):
            old = self.bind(s.var.name, self.expr(s.value))
            old_def = self.defs.get(s.var.name)
            self.defs[s.var.name] = self.expand(s.value)
            self.stmt(s.body)
            self.unbind(s.var.name, old)
            if old_def is None:
                self.defs.pop(s.var.name, None)
            else:
                self.defs[s.var.name] = old_def
        elif isinstance(s, ir.Allocate):
            self.allocate(s)
        else:
            raise TypeError(f"codegen: unknown statement {s!r}")

    def if_(self, s: ir.If) -> None:
        cond = self.expr(s.cond)
        if _is_vec(cond):  # a guard on vector lanes: predicate the body instead of branching
            outer = self.mask
            self.mask = cond if outer is None else self.b.and_(outer, cond)
            self.stmt(s.then)
            if s.orelse is not None:
                inv = self.b.xor(cond, self.splat(I1(1), cond.type.count))
                self.mask = inv if outer is None else self.b.and_(outer, inv)
                self.stmt(s.orelse)
            self.mask = outer
            return
        if s.orelse is None:
            with self.b.if_then(cond):
                self.stmt(s.then)
        else:
            with self.b.if_else(cond) as (then, orelse):
                with then:
                    self.stmt(s.then)
                with orelse:
                    self.stmt(s.orelse)

    def allocate(self, s: ir.Allocate) -> None:
        """A temporary for the statements inside. One over symbolic sizes is laid out with each dimension at its
        largest extent (the room it gets anyway): its strides are then constants, as in a kernel for fixed sizes,
        so that a micro-kernel's rows are a constant offset apart rather than held in registers of their own.
        Not where the body reads it through a view of another shape (a transposed copy's merged dimensions)."""
        buf = s.buffer
        padded = any(is_symbolic(d) for d in buf.shape[1:]) and \
            all(b == buf for b in _buffers_named(s.body, buf.name))
        if padded:
            self.padded[buf.name] = buf
        try:
            self._allocate(s)
        finally:
            if padded:
                del self.padded[buf.name]

    def _allocate(self, s: ir.Allocate) -> None:
        buf = s.buffer
        itemsize = DTYPES[buf.dtype].itemsize
        if buf.role == "stack":
            # in the entry block, so that a loop does not grow the stack and LLVM can promote it to registers
            with self.b.goto_block(self.entry):
                self.b.position_at_start(self.entry)
                ptr = self.b.alloca(ll.ArrayType(mem_type(buf.dtype), max(1, upper_bound(buf.size))), name=buf.name)
                ptr.align = _ALIGN
                ptr.type = PTR  # an opaque pointer, like the parameters (llvmlite would type it)
            self.ptrs[buf.name] = ptr
            self.stmt(s.body)
            del self.ptrs[buf.name]
            return
        # a buffer over symbolic sizes gets room for the largest: one block serves every call (and the kept workspace)
        nbytes = max(_ALIGN, -(-upper_bound(buf.size) * itemsize // _ALIGN) * _ALIGN)
        aligned_alloc = self.extern("aligned_alloc", PTR, [I64, I64])
        free = self.extern("free", ll.VoidType(), [PTR])
        null = ll.Constant(PTR, None)
        slot = None
        if nbytes >= WORKSPACE_MIN_BYTES:
            # kept between calls, one block per allocation site: a fresh allocation this large is mapped pages
            # that fault on first touch (glibc maps it, or trims its heap once the kernel frees it), on every call.
            # A call takes the block (an atomic exchange with null; a concurrent call finds null and allocates its
            # own) and puts it back when done, freeing whatever another call put back meanwhile.
            slot = ll.GlobalVariable(self.module, PTR, name=f"tl.workspace.{len(_workspace_slots(self.module))}")
            slot.linkage = "internal"
            slot.initializer = null
            kept = self.b.atomic_rmw("xchg", slot, null, "acq_rel")
            before = self.b.block
            with self.b.if_then(self.b.icmp_unsigned("==", kept, null), likely=False):
                fresh = self.b.call(aligned_alloc, [I64(_ALIGN), I64(nbytes)])
                fresh_block = self.b.block
            ptr = self.b.phi(PTR, name=buf.name)
            ptr.add_incoming(kept, before)
            ptr.add_incoming(fresh, fresh_block)
        else:
            ptr = self.b.call(aligned_alloc, [I64(_ALIGN), I64(nbytes)], name=buf.name)
        self.fail_if(self.b.icmp_unsigned("==", ptr, null))
        self.ptrs[buf.name] = ptr
        self.stmt(s.body)
        if slot is not None:
            self.b.call(free, [self.b.atomic_rmw("xchg", slot, ptr, "acq_rel")])
        else:
            self.b.call(free, [ptr])
        del self.ptrs[buf.name]

    def loop(self, s: ir.For, begin=None, end=None) -> None:
        lo = self.expr(s.lo) if begin is None else begin
        hi = self.int_arith("+", lo, self.expr(s.extent), ["nsw"]) if end is None else end
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
        old = self.bind(s.var.name, iv)
        divisions = self.int_divisions
        self.stmt(s.body)
        nxt = self.int_arith("+", iv, I64(1), ["nsw"])
        iv.add_incoming(nxt, self.b.block)
        latch = self.b.branch(header)
        if self.int_divisions > divisions:
            # LLVM 22's loop vectorizer can abort the process on a loop of guarded integer divisions (its two cost
            # models disagree: an assertion, enabled in llvmlite's build); x86 has no vector integer division
            # anyway, so such a loop is left to the other optimisations
            latch.set_metadata("llvm.loop", self.loop_id(("llvm.loop.vectorize.enable", False)))
        self.b.position_at_end(after)
        self.unbind(s.var.name, old)

    def loop_id(self, *hints: tuple) -> ll.Value:
        """A new loop ID for `!llvm.loop` (self-referential, as LLVM wants it) carrying `hints` (name, bool)."""
        ops = [self.module.add_metadata([ll.MetaDataString(self.module, name), I1(int(value))])
               for name, value in hints]
        loop_id = ll.values.MDValue(self.module, [], name=str(len(self.module.metadata)))
        loop_id.operands = (loop_id, *ops)
        return loop_id

    def unrolled(self, s: ir.For) -> None:
        if not isinstance(s.extent, ir.IntImm):
            raise BuildError(f"codegen: unrolled loop {s.var.name} needs a constant extent")
        lo = self.expr(s.lo)
        old = self.vars.get(s.var.name)
        for i in range(s.extent.value):
            self.vars[s.var.name] = self.int_arith("+", lo, I64(i), ["nsw"]) if i else lo
            self.stmt(s.body)
        self.unbind(s.var.name, old)

    def vectorized(self, s: ir.For) -> None:
        if not isinstance(s.extent, ir.IntImm):
            raise BuildError(f"codegen: vectorized loop {s.var.name} needs a constant extent")
        if self.lanes:
            raise BuildError(f"codegen: vectorized loop {s.var.name} inside another vectorized loop")
        w = s.extent.value
        lo = self.expr(s.lo)
        chunk = self.chunk_lanes(s.body, w)
        old = self.vars.get(s.var.name)
        self._addr_cache = {}  # symbolic addresses (in terms of the lane variable) serve every chunk
        for start, n in vector_pieces(w, chunk):  # lanes [start, start + n) as one vector; iterations independent
            base = self.int_arith("+", lo, I64(start), ["nsw"]) if start else lo
            if n == 1:  # one lane: scalar code (a one-lane gather is no vector load)
                self.vars[s.var.name] = base
                self.lanes, self.lane_var = 0, None
            else:
                ramp = self.int_arith("+", self.splat(base, n), constant(I64, list(range(n)), n), ["nsw"])
                self.vars[s.var.name] = ramp
                self.lanes, self.lane_var = n, s.var.name
            self.stmt(s.body)
        self.lanes, self.lane_var = 0, None
        self.unbind(s.var.name, old)

    def stride_along(self, var: str, flat: ir.Expr) -> int | None:
        """The step of the flat index `flat` from one lane to the next were `var` the vectorized variable."""
        saved, self.lane_var = self.lane_var, var
        step = self.lane_stride(flat)
        self.lane_var = saved
        return step

    def lanes_along(self, lane: str, lo_lane: ll.Value, n: int, fixed: str, lo_fixed: ll.Value, k: int) -> None:
        """Emit what follows as n-lane vectors along `lane` (lo_lane .. lo_lane + n - 1) at `fixed` = lo_fixed + k:
        one row or column of a tile transposed in registers."""
        self.vars[fixed] = self.int_arith("+", lo_fixed, I64(k), ["nsw"]) if k else lo_fixed
        self.vars[lane] = self.int_arith("+", self.splat(lo_lane, n), constant(I64, list(range(n)), n), ["nsw"])
        self.lanes, self.lane_var, self._addr_cache = n, lane, {}

    def transposed_tile(self, s: ir.For) -> bool:
        """Emit `for a in lo:lo+n: for b in lo':lo'+n (vectorized): dst[..] = src[..]` as a transpose in registers
        when the read is contiguous along `a` and the write along `b` (a copy into a layout whose innermost
        dimension is strided in the source: a convolution's filters packed with the output channels innermost):
        n contiguous loads, n log2(n) two-vector shuffles, n contiguous stores, in place of n gathers of n lanes
        (a large share of a strided convolution's time) or n x n scalar copies. Anything else
        (another width, a guard, a mask, other strides) returns False and is emitted as written.

        `lower` writes such tiles for a transposing cache_read (see `lower._transposed_copy`)."""
        inner = s.body
        if self.lanes or self.mask is not None or not isinstance(inner, ir.For) or inner.kind != "vectorized":
            return False
        st = inner.body
        if not (isinstance(s.extent, ir.IntImm) and isinstance(inner.extent, ir.IntImm)
                and isinstance(st, ir.Store) and isinstance(st.value, ir.Load) and not any(st.value.guard)
                and st.value.buffer.dtype == st.buffer.dtype != "bool"):
            return False
        n = s.extent.value
        if inner.extent.value != n or n not in (4, 8, 16) or self.chunk_lanes(inner.body, n) != n:
            return False
        ld, a, b = st.value, s.var.name, inner.var.name
        if not (self.stride_along(a, self.flat_index(ld.buffer, ld.indices)) == 1
                and self.stride_along(b, self.flat_index(st.buffer, st.indices)) == 1):
            return False
        lo_a, lo_b = self.expr(s.lo), self.expr(inner.lo)
        old_a, old_b = self.vars.get(a), self.vars.get(b)
        rows = []
        for j in range(n):  # row j: src at b = lo_b + j, a = lo_a .. lo_a + n - 1 (one contiguous vector)
            self.lanes_along(a, lo_a, n, b, lo_b, j)
            rows.append(self.load(ld))
        cols = transpose_vectors(self.b, rows)
        for i in range(n):  # column i: dst at a = lo_a + i, b = lo_b .. lo_b + n - 1 (one contiguous vector)
            self.lanes_along(b, lo_b, n, a, lo_a, i)
            _, _, lane0 = self.address_parts(st, st.buffer, list(st.indices))
            self.b.store(cols[i], self.pointer(st.buffer, self.expr(lane0)), align=DTYPES[st.buffer.dtype].itemsize)
        self.lanes, self.lane_var, self._addr_cache = 0, None, {}
        self.unbind(a, old_a)
        self.unbind(b, old_b)
        return True

    def transposed_store(self, s: ir.For) -> bool:
        """Emit `for a in lo:lo+m: for b in lo':lo'+w (vectorized): dst[..] = value` as transposes in registers
        when the store is contiguous along `a` and strided along `b`, with m >= n/2 for the register's n lanes
        and w a multiple of n: for each n lanes of `b` and each group of at most n values of `a`, the group's
        values computed as vectors along `b` as written, transposed (n log2(n) two-vector shuffles) and stored as
        n runs along `a` (a masked store where the group is shorter than n), in place of m scatters of n lanes
        (AVX2 has no scatter instruction: a tile of 14 pixels by 8 filters would be 112 single-element stores).
        This is the write-back of a register tile vectorized along one output dimension into a tensor where
        another is contiguous (a convolution's tile of 16 filters x 14 pixels into `O[n, f, h, w]`, 28 scatters of
        16 lanes a tile otherwise).

        The values are all computed before any is stored, so the value may read the destination only at the
        element it stores (an update `O[i] = O[i] + t[i]`), and the elements must be distinct (`b`'s stride in
        the destination at least m). Anything else returns False and is emitted as written::

            for w in 0:14:  # unrolled              14 vectors v[w] = O_local[0, w, 0:16]
              for f in 0:16:  # vectorized          t = transpose(v[0..13], 2 undefined)
                O[f, h, w] = O_local[0, w, f]       O[f, h, 0:14] = t[f] (masked), for each f
        """
        inner, lets = s.body, []
        while isinstance(inner, ir.Let):  # index variables defined around or in the vectorized loop (n = ...)
            lets.append(inner)
            inner = inner.body
        if self.lanes or self.mask is not None or not isinstance(inner, ir.For) or inner.kind != "vectorized":
            return False
        st = inner.body
        while isinstance(st, ir.Let):
            lets.append(st)
            st = st.body
        if not (isinstance(s.extent, ir.IntImm) and isinstance(inner.extent, ir.IntImm) and isinstance(st, ir.Store)) \
                or st.buffer.dtype == "bool":  # (bools are bytes in memory, i1 values in registers)
            return False
        m, w = s.extent.value, inner.extent.value
        n = self.chunk_lanes(inner.body, w)
        if n not in (4, 8, 16) or w % n or m < n // 2:
            return False
        if any(ld.buffer.name == st.buffer.name and ld.indices != st.indices for ld in ir.loads(st.value)):
            return False
        a, b = s.var.name, inner.var.name
        saved_defs = dict(self.defs)
        for let in lets:
            self.defs[let.var.name] = self.expand(let.value)
        flat = self.flat_index(st.buffer, st.indices)
        along_a, along_b = self.stride_along(a, flat), self.stride_along(b, flat)
        if along_a != 1 or along_b is None or abs(along_b) < m:
            self.defs = saved_defs
            return False

        def bind_lets() -> list:
            return [self.bind(let.var.name, self.expr(let.value)) for let in lets]

        def unbind_lets(olds: list) -> None:
            for let, old in reversed(list(zip(lets, olds))):
                self.unbind(let.var.name, old)

        t = ll_type(st.buffer.dtype)
        vt = ll.VectorType(t, n)
        lo_a, lo_b = self.expr(s.lo), self.expr(inner.lo)
        old_a, old_b = self.vars.get(a), self.vars.get(b)
        for p in range(0, w, n):  # each register of lanes of b
            lo_p = self.int_arith("+", lo_b, I64(p), ["nsw"]) if p else lo_b
            for q in range(0, m, n):  # each group of at most n values of a
                mq = min(n, m - q)
                lo_q = self.int_arith("+", lo_a, I64(q), ["nsw"]) if q else lo_a
                rows = []
                for j in range(mq):  # row j: the value at a = lo_q + j, b = lo_p .. lo_p + n - 1
                    self.lanes_along(b, lo_p, n, a, lo_q, j)
                    olds = bind_lets()
                    rows.append(self.splat(self.value(st.value), n))
                    unbind_lets(olds)
                cols = transpose_vectors(self.b, rows + [ll.Constant(vt, ll.Undefined)] * (n - mq))
                keep = constant(I1, [1] * mq + [0] * (n - mq), n)
                for i in range(n):  # column i: the values at b = lo_p + i, a = lo_q .. lo_q + mq - 1 (contiguous)
                    self.lanes_along(a, lo_q, n, b, lo_p, i)
                    olds = bind_lets()
                    _, _, lane0 = self.address_parts(st, st.buffer, list(st.indices))
                    ptr = self.pointer(st.buffer, self.expr(lane0), inbounds=mq == n)
                    unbind_lets(olds)
                    if mq == n:
                        self.b.store(cols[i], ptr, align=DTYPES[st.buffer.dtype].itemsize)
                    else:
                        f = self.intrinsic("llvm.masked.store", ll.VoidType(), [vt, PTR, ll.VectorType(I1, n)],
                                           [vt, PTR])
                        self.b.call(f, [cols[i], ptr, keep])
        self.lanes, self.lane_var, self._addr_cache = 0, None, {}
        self.defs = saved_defs
        self.unbind(a, old_a)
        self.unbind(b, old_b)
        return True

    def chunk_lanes(self, body: ir.Stmt, w: int) -> int:
        """Lanes per vector for a vectorized loop of `w` lanes: one register of the widest element the body
        stores or loads (`w` itself without a known register width, or when `w` fits one register)."""
        if not self.vector_bits:
            return w
        bits = max((DTYPES[b.dtype].itemsize * 8 for b in ir.stmt_buffers(body).values() if b.dtype != "bool"),
                   default=32)
        return max(1, min(w, self.vector_bits // bits))

    def parallel(self, s: ir.For) -> None:
        """Outline the loop body into `i32 f(i64 begin, i64 end, ptr closure)` and hand it to the thread pool.

        `f` unpacks the closure and calls `f_body(begin, end, scalars..., ptr noalias buffers...)`, which runs the
        chunk: the buffers' pointers arrive as `noalias` arguments, as in the kernel itself, so that LLVM knows
        they do not overlap (loaded from the closure, they would lose that, and the body would vectorize worse than
        the same loop not parallel)."""
        scalars = [(n, v) for n, v in self.vars.items() if not _is_vec(v)]
        ptrs = list(self.ptrs.items())
        slots = [v.type for _, v in scalars] + [PTR for _ in ptrs]   # every slot is 8 bytes (i64 or ptr)
        self.n_outlined += 1
        name = f"{self.base_name}_par{self.n_outlined}_{s.var.name}"
        fn = ll.Function(self.module, ll.FunctionType(I32, [I64, I64, PTR]), name=name)
        # caller: pack the closure, call the runtime
        with self.b.goto_block(self.entry):
            self.b.position_at_start(self.entry)
            closure = self.b.alloca(ll.ArrayType(I64, max(1, len(slots))), name=f"{name}_closure")
            closure.type = PTR
        for i, (_, v) in enumerate(scalars + ptrs):
            self.b.store(v, self.b.gep(closure, [I64(i)], inbounds=True, source_etype=slots[i]))
        lo = self.expr(s.lo)
        extent = self.expr(s.extent)
        run = self.extern(PARALLEL_FOR, I32, [PTR, PTR, I64, I64])
        status = self.b.call(run, [fn, closure, lo, extent])
        self.fail_if(self.b.icmp_signed("!=", status, I32(0)))
        # callee: unpack the closure and call the chunk's function with the buffers as noalias arguments
        body_fn = ll.Function(self.module, ll.FunctionType(I32, [I64, I64] + slots), name=f"{name}_body")
        body_fn.linkage = "internal"
        unpack = ll.IRBuilder(fn.append_basic_block("entry"))
        begin, end, cl = fn.args
        values = [unpack.load(unpack.gep(cl, [I64(i)], inbounds=True, source_etype=t), typ=t)
                  for i, t in enumerate(slots)]
        unpack.ret(unpack.call(body_fn, [begin, end, *values]))
        sub = _Emitter(self.module, body_fn, {}, {}, name, self.vector_bits)
        begin, end, *args = body_fn.args
        for (n, _), arg in zip(scalars, args):
            sub.vars[n] = arg
        for (n, _), arg in zip(ptrs, args[len(scalars):]):
            if n != _ERROR_RECORD:  # every thread may write the call's error record
                arg.add_attribute("noalias")
            sub.ptrs[n] = arg
        sub.defs = dict(self.defs)
        sub.padded = dict(self.padded)
        sub.n_outlined = self.n_outlined * 100
        sub.loop(ir.For(s.var, s.lo, s.extent, s.body, "serial"), begin=begin, end=end)
        sub.b.ret(I32(0))
        if sub.fail_block is not None:
            sub.b.position_at_end(sub.fail_block)
            sub.b.ret(I32(1))

    # ---- memory ----
    def flat_index(self, buf: ir.Buffer, indices) -> ir.Expr:
        """The row-major offset of buf[indices] as an IR expression."""
        e: ir.Expr = ir.IntImm(0)
        stride = 1
        padded = self.padded.get(buf.name) == buf
        for d in range(len(buf.shape) - 1, -1, -1):
            e = ir.BinOp("+", e, ir.BinOp("*", indices[d], ir.IntImm(stride)))
            stride *= upper_bound(buf.shape[d]) if padded else buf.shape[d]
        return simplify(e)

    def expand(self, e: ir.Expr) -> ir.Expr:
        """`e` with Let-bound variables replaced by their definitions (in terms of loop variables)."""
        names = variables(e) & self.defs.keys()
        return simplify(substitute(e, {n: self.defs[n] for n in names})) if names else e

    def lane_stride(self, flat: ir.Expr) -> int | None:
        """The flat index's step from one vector lane to the next: 0, 1, another constant, or None (varies)."""
        if self.lane_var is None:
            return 0
        flat = self.expand(flat)
        if self.lane_var not in variables(flat):
            return 0
        terms, _ = _linear(flat)
        step = 0
        for atom, coef in terms.items():
            if isinstance(atom, ir.Var) and atom.name == self.lane_var:
                if is_symbolic(coef):  # a step known at run time: handled as one that varies
                    return None
                step = coef
            elif self.lane_var in variables(atom):
                return None
        return step

    def pointer(self, buf: ir.Buffer, offset: ll.Value, inbounds: bool = True) -> ll.Value:
        return self.b.gep(self.ptrs[buf.name], [offset], inbounds=inbounds, source_etype=mem_type(buf.dtype))

    def address_parts(self, node, buf: ir.Buffer, indices):
        """(flat index, lane stride, flat index at lane 0) of a load or store; the symbolic work is done once per
        IR node and vectorized loop, not once per unrolled copy."""
        key = (id(node), self.lane_var)
        hit = self._addr_cache.get(key)
        if hit is None or hit[0] is not node:
            flat = self.flat_index(buf, indices)
            stride = self.lane_stride(flat) if self.lanes else 0
            lane0 = self._at_lane0(flat) if stride == 1 else None
            hit = (node, flat, stride, lane0)
            self._addr_cache[key] = hit
        return hit[1], hit[2], hit[3]

    def load(self, e: ir.Load) -> ll.Value:
        """The value of a load (scalar, or a vector in a vectorized loop); its address is index arithmetic."""
        saved, self.in_index = self.in_index, True
        v = self._load(e)
        self.in_index = saved
        if e.buffer.dtype == "bool":  # a byte in memory
            v = self.b.icmp_unsigned("!=", v, constant(I8, 0, v.type.count) if _is_vec(v) else I8(0))
        return v

    def _load(self, e: ir.Load) -> ll.Value:
        b = self.b
        t = mem_type(e.buffer.dtype)
        align = DTYPES[e.buffer.dtype].itemsize
        cond = None
        indices = list(e.indices)
        if any(e.guard):
            for d, ix in enumerate(e.indices):
                if e.guard[d]:
                    v = self.expr(ix)
                    inside = b.and_(b.icmp_signed(">=", v, self.const("i64", 0, v)),
                                    b.icmp_signed("<", v, self.const("i64", e.buffer.shape[d], v)))
                    cond = inside if cond is None else b.and_(*self.match(cond, inside))
        flat, stride, lane0 = self.address_parts(e, e.buffer, indices)
        if stride == 0 and cond is None:
            # the same element for every lane: one scalar load, at a valid address if no lane is active
            off = self.expr(flat)
            if self.mask is not None and _is_vec(self.mask):
                w = self.mask.type.count
                any_on = b.call(self.intrinsic("llvm.vector.reduce.or", I1, [ll.VectorType(I1, w)],
                                               [ll.VectorType(I1, w)]), [self.mask])
                off = b.select(any_on, off, I64(0))
            return b.load(self.pointer(e.buffer, off), align=align, typ=t)
        if stride == 0 and not _is_vec(cond) and self.mask is not None and _is_vec(self.mask):
            # the same element for every lane, read under a guard that is the same for every lane too (a padded
            # read): one scalar load, as above, not a gather of one address (a vector where a reduction into the
            # element needs its scalar value)
            w = self.mask.type.count
            any_on = b.call(self.intrinsic("llvm.vector.reduce.or", I1, [ll.VectorType(I1, w)],
                                           [ll.VectorType(I1, w)]), [self.mask])
            safe = b.select(b.and_(cond, any_on), self.expr(flat), I64(0))
            return b.select(cond, b.load(self.pointer(e.buffer, safe), align=align, typ=t), t(0))
        mask = self.mask
        if cond is not None:
            mask = cond if mask is None else b.and_(*self.match(mask, cond))
        if stride == 0 and not _is_vec(mask):
            safe = b.select(mask, self.expr(flat), I64(0))  # a scalar guard: read a valid element, then choose 0
            return b.select(mask, b.load(self.pointer(e.buffer, safe), align=align, typ=t), t(0))
        w = self.lanes
        vt = ll.VectorType(t, w)
        if stride == 1:
            base = self.expr(lane0)
            whole = mask is not None and self._whole_vector_inside(e.buffer, base, w)
            ptr = self.pointer(e.buffer, base, inbounds=mask is None or whole)
            if mask is None:
                return b.load(ptr, align=align, typ=vt)
            if whole:  # a register tile's guarded lanes: a plain load, which LLVM keeps in registers, then the mask
                return b.select(self.splat(mask, w), b.load(ptr, align=align, typ=vt), constant(t, 0, w))
            f = self.intrinsic("llvm.masked.load", vt, [PTR, ll.VectorType(I1, w), vt], [vt, PTR])
            return b.call(f, [ptr, self.splat(mask, w), constant(t, 0, w)])
        if stride is not None and 2 <= stride <= MAX_DEINTERLEAVED_STRIDE:
            return self._strided_load(e.buffer, flat, stride, mask, t)
        if stride is None and mask is None:
            offsets = self._lane_offsets(e, flat)
            if offsets is not None:
                return self._shuffled_load(e.buffer, offsets, t)
        # any other pattern: a gather of per-lane addresses (masked lanes read nothing)
        interior = self._interior(flat) if cond is None else None
        off = self.splat(self.expr(flat), w)
        if mask is not None:
            off = b.select(self.splat(mask, w), off, self.splat(I64(0), w))
        ptrs = b.gep(self.ptrs[e.buffer.name], [off], source_etype=t)
        ptrs.type = ll.VectorType(PTR, w)  # llvmlite types a GEP over a vector index as a scalar pointer
        m = self.splat(mask, w) if mask is not None else self.splat(I1(1), w)
        f = self.intrinsic("llvm.masked.gather", vt, [ll.VectorType(PTR, w), ll.VectorType(I1, w), vt],
                           [vt, ll.VectorType(PTR, w)])
        if interior is None:
            return b.call(f, [ptrs, m, constant(t, 0, w)])
        # a boundary index (a clamp) that leaves every lane of this vector as it is: one contiguous load, the
        # gather only for vectors at the borders
        inside, base = self.expr(interior[0]), self.expr(interior[1])
        ptr = self.pointer(e.buffer, base, inbounds=False)
        with b.if_else(inside, likely=True) as (then, otherwise):
            with then:
                if mask is None:
                    fast = b.load(ptr, align=align, typ=vt)
                else:
                    load = self.intrinsic("llvm.masked.load", vt, [PTR, ll.VectorType(I1, w), vt], [vt, PTR])
                    fast = b.call(load, [ptr, m, constant(t, 0, w)])  # m: the mask's lanes, made before the branch
                fast_block = b.block
            with otherwise:
                slow = b.call(f, [ptrs, m, constant(t, 0, w)])
                slow_block = b.block
        v = b.phi(vt)
        v.add_incoming(fast, fast_block)
        v.add_incoming(slow, slow_block)
        return v

    def _whole_vector_inside(self, buf: ir.Buffer, base: ll.Value, w: int) -> bool:
        """Whether the `w` contiguous elements from `base` all lie in `buf` and belong to this thread alone: a
        temporary on the stack of the function being emitted (a register tile; not one a parallel loop's threads
        share through its closure) at a constant offset. Its guarded lanes are then read with a plain load and
        written by blending into the vector there, not with masked loads and stores: LLVM keeps a tile in memory
        that a masked intrinsic touches, and the last tile of a split that does not divide its variable is all
        guarded lanes."""
        first = _int_values(base)
        ptr = self.ptrs.get(buf.name)
        return buf.role == "stack" and isinstance(ptr, ll.AllocaInstr) and ptr.parent.parent is self.fn and \
            isinstance(first, int) and 0 <= first and first + w <= buf.size

    def _strided_load(self, buf: ir.Buffer, flat: ir.Expr, s: int, mask, t: ll.Type) -> ll.Value:
        """A vector load whose lanes are `s` elements apart (a window at stride 2: a strided convolution, a pool, a
        pyramid's downsampling), as one load of the `w * s` elements the lanes span, then a shuffle that keeps
        every `s`-th: `s` vector loads and a few shuffles where a gather loads every lane by itself. The wide load
        is masked so that it reads no element outside the span of the lanes it serves: an element between two
        lanes is read only where both lanes are (a masked lane's address may lie outside the buffer), and none
        after the last one (the buffer may end there)."""
        b = self.b
        w = self.lanes
        n = w * s
        ceil_ = [-(-j // s) for j in range(n)]  # the lane at or after each element of the span
        if mask is None or not _is_vec(mask):
            span = constant(I1, [c < w for c in ceil_], n)  # the elements from the first lane's to the last's
            wide_mask = span if mask is None else b.select(mask, span, constant(I1, 0, n))
        else:
            # the mask with a lane w that is off (the lane after the last), then each element's lanes either side
            padded = b.shuffle_vector(mask, constant(I1, 0, w), constant(I32, list(range(w + 1)), w + 1))
            lo = b.shuffle_vector(padded, ll.Constant(padded.type, None), constant(I32, [j // s for j in range(n)], n))
            hi = b.shuffle_vector(padded, ll.Constant(padded.type, None), constant(I32, ceil_, n))
            wide_mask = b.and_(lo, hi)
        wt = ll.VectorType(t, n)
        ptr = self.pointer(buf, self.expr(self._at_lane0(flat)), inbounds=False)
        f = self.intrinsic("llvm.masked.load", wt, [PTR, ll.VectorType(I1, n), wt], [wt, PTR])
        wide = b.call(f, [ptr, wide_mask, constant(t, 0, n)])
        return b.shuffle_vector(wide, ll.Constant(wt, None), constant(I32, [i * s for i in range(w)], w))

    def _lane_offsets(self, node, flat: ir.Expr) -> tuple[ir.Expr, list[int]] | None:
        """For a flat index that moves with the vector lanes by the same constant offsets in every vector (a fused
        loop's ``x = o*32 + i // 2`` reading ``A[y, x, 1]``: offsets 0, 0, 2, 2, ...), the index at the first lane
        and each lane's offset from it, when they span at most :data:`MAX_SHUFFLED_SPAN` vectors; else None. The
        lanes' values of the vectorized variable must be constants (a loop of one vector from 0)."""
        lane = self.lane_var
        values = _int_values(self.vars[lane]) if lane is not None and lane in self.vars else None
        if lane is None or not isinstance(values, list) or len(values) != self.lanes:
            return None
        key = (id(node), lane, tuple(values))  # a vector split in pieces: each its own lanes
        hit = self._addr_cache.get(key)
        if hit is not None and hit[0] is node:
            return hit[1]
        out = None
        expanded = self.expand(flat)
        first = simplify(substitute(expanded, {lane: ir.IntImm(values[0], "i64")}))
        offsets = []
        for v in values:
            d = simplify(ir.BinOp("-", substitute(expanded, {lane: ir.IntImm(v, "i64")}), first))
            if not isinstance(d, ir.IntImm) or is_symbolic(d.value):
                break
            offsets.append(d.value)
        else:
            lo, hi = min(offsets), max(offsets)
            if hi - lo < MAX_SHUFFLED_SPAN * self.lanes:
                out = (simplify(ir.BinOp("+", first, ir.IntImm(lo, "i64"))), [o - lo for o in offsets])
        self._addr_cache[key] = (node, out)
        return out

    def _shuffled_load(self, buf: ir.Buffer, at: tuple[ir.Expr, list[int]], t: ll.Type) -> ll.Value:
        """The lanes of a load whose lanes sit at constant offsets from its first element (:meth:`_lane_offsets`), all
        active: one contiguous load of the elements from the lowest offset to the highest (in the buffer, since
        both ends are elements the lanes read), then a shuffle that puts each lane's element in place."""
        base, offsets = at
        n = max(offsets) + 1
        wt = ll.VectorType(t, n)
        wide = self.b.load(self.pointer(buf, self.expr(base), inbounds=False), align=DTYPES[buf.dtype].itemsize,
                           typ=wt)
        return self.b.shuffle_vector(wide, ll.Constant(wt, None), constant(I32, offsets, self.lanes))

    def _interior(self, flat: ir.Expr) -> tuple[ir.Expr, ir.Expr] | None:
        """For a flat index that depends on the vector lanes only through `min` and `max` of an index moving one
        element a lane against bounds the lanes do not move (a boundary index's clamp), (the condition, at lane 0,
        that every lane of the vector lies inside those bounds; the flat index at lane 0 without them); else None.

        >>> e = _Emitter.__new__(_Emitter)
        >>> e.lane_var, e.lanes, e.defs = "x", 8, {}
        >>> cond, base = e._interior(ir.BinOp("min", ir.BinOp("max", ir.BinOp("-", ir.Var("x"), ir.const(1)),
        ...                                                          ir.const(0)), ir.const(15)))
        >>> str(cond), str(base)
        ('x.lane0 + 6 <= 15 and x.lane0 - 1 >= 0', 'x.lane0 - 1')
        """
        lane = self.lane_var
        assert lane is not None  # called for vector loads only
        terms, const = _linear(self.expand(flat))
        bounds: list[tuple[str, ir.Expr, ir.Expr]] = []  # (min or max, the index inside them all, the bound)
        out: ir.Expr = ir.IntImm(const)
        for atom, coef in terms.items():
            ops = []
            while isinstance(atom, ir.BinOp) and atom.op in ("min", "max") and lane in variables(atom):
                inner, bound = (atom.a, atom.b) if lane in variables(atom.a) else (atom.b, atom.a)
                if lane in variables(bound):
                    return None
                ops.append((atom.op, bound))
                atom = inner
            # where the innermost index lies within every bound, each min and max leaves it as it is
            bounds += [(op, atom, bound) for op, bound in ops]
            out = ir.BinOp("+", out, ir.BinOp("*", atom, ir.const(coef)))
        out = simplify(out)
        if not bounds or self.lane_stride(out) != 1:
            return None
        at0 = {lane: ir.Var(f"{lane}.lane0")}
        conds = []
        for op, inner, bound in bounds:
            step = self.lane_stride(inner)
            if step is None:
                return None
            first = simplify(substitute(self.expand(inner), at0))
            # the lane where the index is largest (for a min) or smallest (for a max)
            extreme = (step > 0) == (op == "min")
            x = simplify(ir.BinOp("+", first, ir.const(step * (self.lanes - 1)))) if extreme else first
            conds.append(ir.Cmp("<=" if op == "min" else ">=", x, substitute(bound, at0)))
        cond: ir.Expr = conds[0]
        for c in conds[1:]:
            cond = ir.Logic("and", cond, c)
        return cond, substitute(out, at0)

    def _at_lane0(self, flat: ir.Expr) -> ir.Expr:
        """The flat index with the vector index at its first lane: emitted as a scalar."""
        assert self.lane_var is not None  # called inside a vectorized loop
        return substitute(self.expand(flat), {self.lane_var: ir.Var(f"{self.lane_var}.lane0")})

    def value(self, e: ir.Expr) -> ll.Value:
        """The value of a program's expression (its i64 arithmetic wraps, as numpy's)."""
        saved, self.in_index = self.in_index, False
        v = self.expr(e)
        self.in_index = saved
        return v

    def store(self, s: ir.Store) -> None:
        if s.buffer.dtype == "bool":  # a byte in memory: the value widened as it is stored
            value = self.value(s.value)
            t = ll.VectorType(I8, value.type.count) if _is_vec(value) else I8
            self._store(s, self.b.zext(value, t))
        else:
            self._store(s)

    def _store(self, s: ir.Store, stored: ll.Value | None = None) -> None:
        """Store `s` (its value already computed as `stored`, when given)."""
        b = self.b
        t = mem_type(s.buffer.dtype)
        align = DTYPES[s.buffer.dtype].itemsize
        flat, stride, lane0 = self.address_parts(s, s.buffer, list(s.indices))
        if stride == 0 and self.mask is not None and _is_vec(self.mask):
            # one element from guarded lanes: store only if some lane is active (a chunk of lanes may be all
            # off, and its loads of the element then read a safe address, not the element)
            w = self.mask.type.count
            any_on = b.call(self.intrinsic("llvm.vector.reduce.or", I1, [ll.VectorType(I1, w)],
                                           [ll.VectorType(I1, w)]), [self.mask])
            with b.if_then(any_on):
                b.store(self.reduce_lanes(s), self.pointer(s.buffer, self.expr(flat)), align=align)
            return
        if stride == 0 and self.lanes and self._is_update(s):
            b.store(self.reduce_lanes(s), self.pointer(s.buffer, self.expr(flat)), align=align)
            return
        value = stored if stored is not None else self.value(s.value)
        if stride == 0:
            if _is_vec(value):
                value = self.reduce_lanes(s)
            b.store(value, self.pointer(s.buffer, self.expr(flat)), align=align)
            return
        w = self.lanes
        vt = ll.VectorType(t, w)
        value = self.splat(value, w)
        if stride == 1:
            base = self.expr(lane0)
            whole = self.mask is not None and self._whole_vector_inside(s.buffer, base, w)
            ptr = self.pointer(s.buffer, base, inbounds=self.mask is None or whole)
            if self.mask is None:
                b.store(value, ptr, align=align)
            elif whole:  # the guarded lanes of a register tile: blend them into the vector that is there
                old = b.load(ptr, align=align, typ=vt)
                b.store(b.select(self.splat(self.mask, w), value, old), ptr, align=align)
            else:
                f = self.intrinsic("llvm.masked.store", ll.VoidType(), [vt, PTR, ll.VectorType(I1, w)], [vt, PTR])
                b.call(f, [value, ptr, self.splat(self.mask, w)])
            return
        off = self.splat(self.expr(flat), w)
        ptrs = b.gep(self.ptrs[s.buffer.name], [off], source_etype=t)
        ptrs.type = ll.VectorType(PTR, w)
        m = self.splat(self.mask, w) if self.mask is not None else self.splat(I1(1), w)
        f = self.intrinsic("llvm.masked.scatter", ll.VoidType(), [vt, ll.VectorType(PTR, w), ll.VectorType(I1, w)],
                           [vt, ll.VectorType(PTR, w)])
        b.call(f, [value, ptrs, m])

    @staticmethod
    def _is_update(s: ir.Store) -> bool:
        v = s.value
        return isinstance(v, ir.BinOp) and v.op in _REDUCE_IDENTITY and isinstance(v.a, ir.Load) and \
            v.a.buffer == s.buffer and v.a.indices == s.indices

    def reduce_lanes(self, s: ir.Store) -> ll.Value:
        """A reduction into one element from a vectorized (reduction) loop: combine the lanes, then the element.

        `acc = acc (op) f(lane)` for every lane becomes `acc = acc (op) reduce(f(lanes))`, which reorders a float
        sum (float reassociation); masked-off lanes contribute the identity.
        """
        if not self._is_update(s):
            raise BuildError(f"codegen: the store to {s.buffer.name} does not depend on the vectorized loop "
                             f"{self.lane_var} but its value does, and it is not a reduction")
        saved, self.in_index = self.in_index, False  # a value of the program: an i64 sum wraps
        try:
            return self._reduce_lanes(s)
        finally:
            self.in_index = saved

    def _reduce_lanes(self, s: ir.Store) -> ll.Value:
        value = cast(ir.BinOp, s.value)  # an update, as reduce_lanes checked
        op, dtype = value.op, s.buffer.dtype
        acc = self.expr(value.a)
        vals = self.splat(self.expr(value.b))  # a value the same in every lane still counts once a lane
        w = vals.type.count
        if self.mask is not None and _is_vec(self.mask):
            ident = DTYPES[dtype].identity(op)
            vals = self.b.select(self.mask, vals, self.splat(ll_type(dtype)(ident), w))
        is_float = DTYPES[dtype].is_float
        u = "u" if DTYPES[dtype].is_unsigned else "s"
        name = {"+": "fadd" if is_float else "add", "*": "fmul" if is_float else "mul",
                "max": "fmaximum" if is_float else f"{u}max", "min": "fminimum" if is_float else f"{u}min"}[op]
        vt = vals.type
        if op in ("+", "*") and is_float:
            f = self.intrinsic(f"llvm.vector.reduce.{name}", vt.element, [vt.element, vt], [vt])
            return self.b.call(f, [acc, vals], fastmath=("reassoc", "contract"))
        f = self.intrinsic(f"llvm.vector.reduce.{name}", vt.element, [vt], [vt])
        return self.binop(op, acc, self.b.call(f, [vals]), dtype)

    # ---- expressions ----
    def expr(self, e: ir.Expr) -> ll.Value:
        b = self.b
        if isinstance(e, ir.IntImm):
            if is_symbolic(e.value):  # a size known at run time: computed from the size parameters
                return self.expr(e.value.to_ir())
            return ll_type(e.dtype)(e.value)
        if isinstance(e, ir.FloatImm):
            return ll_type(e.dtype)(e.value)
        if isinstance(e, ir.Var):
            if self.lane_var is not None and e.name == f"{self.lane_var}.lane0":
                lanes = self.vars[self.lane_var]
                values = _int_values(lanes)
                return constant(lanes.type.element, values[0]) if isinstance(values, list) \
                    else b.extract_element(lanes, I32(0))
            return self.vars[e.name]
        if isinstance(e, ir.Load):
            return self.load(e)
        if isinstance(e, ir.IndexCheck):
            return self.index_check(e)
        if isinstance(e, ir.BinOp):
            if e.op == "**" and DTYPES[e.dtype].is_float and isinstance(e.b, ir.FloatImm) \
                    and e.b.value in (2.0, 3.0, 4.0):
                # a small whole power as multiplications (what LLVM does only with approximate-math flags): a call
                # of pow per element would cost more than the rest of a GELU epilogue together
                x = self.expr(e.a)
                y = b.fmul(x, x, flags=FAST)
                if e.b.value == 3.0:
                    y = b.fmul(y, x, flags=FAST)
                elif e.b.value == 4.0:
                    y = b.fmul(y, y, flags=FAST)
                return y
            a, c = self.match(self.expr(e.a), self.expr(e.b))
            return self.binop(e.op, a, c, e.dtype)
        if isinstance(e, ir.Cmp):
            a, c = self.match(self.expr(e.a), self.expr(e.b))
            if DTYPES[e.a.dtype].is_float:
                return b.fcmp_ordered(e.op, a, c) if e.op != "!=" else b.fcmp_unordered("!=", a, c)
            if DTYPES[e.a.dtype].is_unsigned:
                return b.icmp_unsigned(e.op, a, c)
            return b.icmp_signed(e.op, a, c)
        if isinstance(e, ir.Logic):
            a, c = self.match(self.expr(e.a), self.expr(e.b))
            return b.and_(a, c) if e.op == "and" else b.or_(a, c)
        if isinstance(e, ir.Not):
            a = self.expr(e.a)
            return b.xor(a, self.const("bool", 1, a))
        if isinstance(e, ir.Neg):
            a = self.expr(e.a)
            return b.fneg(a) if DTYPES[e.dtype].is_float else b.sub(self.const(e.dtype, 0, a), a)
        if isinstance(e, ir.Select):
            cond, t, f = self.expr(e.cond), self.expr(e.t), self.expr(e.f)
            t, f = self.match(t, f)
            if _is_vec(cond) and not _is_vec(t):
                t, f = self.splat(t, cond.type.count), self.splat(f, cond.type.count)
            elif _is_vec(t) and not _is_vec(cond):
                pass
            return b.select(cond, t, f)
        if isinstance(e, ir.Cast):
            return self.cast(self.expr(e.a), e.a.dtype, e.dtype)
        if isinstance(e, ir.Call):
            return self.call(e.fn, [self.expr(a) for a in e.args], e.dtype)
        raise TypeError(f"codegen: unknown expression {e!r}")

    def binop(self, op: str, a: ll.Value, c: ll.Value, dtype: str) -> ll.Value:
        b = self.b
        zero, one = self.const(dtype, 0, a), self.const(dtype, 1, a)
        if DTYPES[dtype].is_float:
            if op == "+":
                return b.fadd(a, c, flags=FAST)
            if op == "-":
                return b.fsub(a, c, flags=FAST)
            if op == "*":
                return b.fmul(a, c, flags=FAST)
            if op == "/":
                return b.fdiv(a, c, flags=DIV_FLAGS)
            if op in ("min", "max"):
                return self.fminmax(op, a, c)
            if op == "**":
                return self.call("pow", [a, c], dtype)
            if op == "//":
                return self.call("floor", [b.fdiv(a, c)], dtype)
            if op == "%":  # numpy: the result has the sign of the divisor
                r = b.frem(a, c)
                fix = b.and_(b.fcmp_unordered("!=", r, zero),
                             b.xor(b.fcmp_ordered("<", r, zero), b.fcmp_ordered("<", c, zero)))
                return b.select(fix, b.fadd(r, c), r)
            raise TypeError(f"codegen: float op {op}")
        flags = ["nsw"] if dtype == "i64" and self.in_index else []
        if op in ("+", "-", "*"):
            return self.int_arith(op, a, c, flags)
        unsigned = DTYPES[dtype].is_unsigned
        if op in ("min", "max"):  # the intrinsic reads each operand once (see fminmax)
            return self.call_intrinsic(f"llvm.{'u' if unsigned else 's'}{op}", [a, c])
        if op == "/":  # the DSL refuses `/` of integers (it would truncate where numpy gives a float)
            raise TypeError(f"codegen: `/` of {dtype} values (the DSL gives `/` a float type)")
        if op in ("//", "%") and unsigned:  # no rounding toward minus infinity to fix; x // 0 and x % 0 give 0
            self.int_divisions += 1
            is_zero = b.icmp_unsigned("==", c, zero)
            safe = b.select(is_zero, one, c)
            return b.select(is_zero, zero, b.udiv(a, safe) if op == "//" else b.urem(a, safe))
        if op in ("//", "%"):
            if isinstance(c, ll.Constant) and not _is_vec(c) and c.constant > 0 and dtype == "i64":
                # index arithmetic by a positive constant (fused and packed loops): no zero check needed
                q, r = b.sdiv(a, c), b.srem(a, c)
                fix = b.icmp_signed("<", r, zero)
                return b.select(fix, b.sub(q, one), q) if op == "//" else b.select(fix, b.add(r, c), r)
            self.int_divisions += 1
            # division by zero gives 0 (like numpy's result, without its warning) instead of a crash, and by -1
            # the negation (wrapping, like numpy: INT_MIN / -1 would trap): the divisor of sdiv is never 0 or -1,
            # so the division is safe to run for any operands
            is_zero = b.icmp_signed("==", c, zero)
            minus_one = b.icmp_signed("==", c, b.sub(zero, one))
            safe = b.select(b.or_(is_zero, minus_one), one, c)
            q = b.select(minus_one, b.sub(zero, a), b.sdiv(a, safe))
            r = b.srem(a, safe)
            fix = b.and_(b.icmp_signed("!=", r, zero),
                         b.xor(b.icmp_signed("<", r, zero), b.icmp_signed("<", safe, zero)))
            out = b.select(fix, b.sub(q, one), q) if op == "//" else b.select(fix, b.add(r, safe), r)
            return b.select(is_zero, zero, out)
        if op == "**":
            ft = ll.VectorType(F64, a.type.count) if _is_vec(a) else F64
            fa, fc = b.sitofp(a, ft), b.sitofp(c, ft)
            return b.fptosi(self.call("pow", [fa, fc], "f64"), a.type)
        raise TypeError(f"codegen: int op {op}")

    def int_arith(self, op: str, a: ll.Value, c: ll.Value, flags: list[str]) -> ll.Value:
        """`a op c` for integers (`op` one of + - *): folded where both are constants or one is the identity
        (index arithmetic of unrolled and vectorized loops is full of ``0 + x``, ``x * 1`` and ``3 * 576``), and
        the same instruction of the same operands in one basic block emitted once. LLVM would fold and merge them
        too, but every instruction it is given costs it time: a tuner builds hundreds of kernels."""
        folded = _fold_int(op, a, c)
        if folded is not None:
            return folded
        b = self.b
        block = b.block
        at_end = b._anchor == len(block.instructions)  # private: llvmlite keeps the insertion point there
        key = (op, tuple(flags), id(block), _operand_key(a), _operand_key(c))
        hit = self._cse.get(key) if at_end else None
        if hit is not None:
            return hit[2]
        out = {"+": b.add, "-": b.sub, "*": b.mul}[op](a, c, flags=flags)
        if at_end:
            self._cse[key] = (a, c, out, block)  # the operands and block held, so that their ids stay theirs
        return out

    def fminmax(self, op: str, a: ll.Value, c: ll.Value) -> ll.Value:
        """max/min of floats as numpy computes them (a NaN in either operand gives NaN): llvm.maximum/minimum.

        Not llvm.maxnum/minnum (they drop a NaN; LLVM 22's loop vectorizer also miscompiled reductions over them)
        and not a compare and select: that reads each operand three times, and a reduction that LLVM unrolls into
        a chain of them, invariant in the loop it vectorizes, made the vectorizer walk every path of the chain
        (vputils::isSingleScalar, 4**length: such a kernel never finishes building). With no signed zeros (`nsz`):
        of -0 and +0 either may come back, as in numpy (which returns its first operand), and x86 computes it as
        its max instruction and one NaN fix-up (three instructions a vector; ordering the zeros costs three more,
        the max filter's vertical pass ran 1.6x slower with them)."""
        t = a.type
        name = "llvm.maximum" if op == "max" else "llvm.minimum"
        return self.b.call(self.intrinsic(name, t, [t, t], [t]), [a, c], fastmath=("nsz",))

    def call_intrinsic(self, name: str, args: list[ll.Value]) -> ll.Value:
        """A call of an LLVM intrinsic overloaded on its arguments' one type (e.g. llvm.smax.v16i32)."""
        t = args[0].type
        return self.b.call(self.intrinsic(name, t, [t] * len(args), [t]), args)

    def call(self, fn: str, args: list[ll.Value], dtype: str) -> ll.Value:
        t = args[0].type
        if fn == "exp" and dtype == "f32":
            return self.exp_f32(args[0])
        if fn == "tanh" and dtype == "f32":
            return self.tanh_f32(args[0])
        if fn in ("max", "min") and DTYPES[dtype].is_float:
            return self.fminmax(fn, args[0], args[1])
        if fn == "abs" and DTYPES[dtype].is_unsigned:
            return args[0]
        if fn == "abs" and not DTYPES[dtype].is_float:
            f = self.intrinsic("llvm.abs", t, [t, I1], [t])
            return self.b.call(f, [args[0], I1(0)])
        name = {"abs": "llvm.fabs", "max": "llvm.maxnum", "min": "llvm.minnum", "exp": "llvm.exp",
                "log": "llvm.log", "sqrt": "llvm.sqrt", "tanh": "llvm.tanh", "pow": "llvm.pow",
                "floor": "llvm.floor"}[fn]
        f = self.intrinsic(name, t, [t] * len(args), [t])
        return self.b.call(f, args, fastmath=FAST)

    def exp_f32(self, x: ll.Value) -> ll.Value:
        """exp for f32 (scalars and vectors) without a libm call: x = n*ln2 + r, exp(r) by a degree-6
        polynomial (Cephes' coefficients, about 1 ulp), times 2**n. With AVX-512, 2**n is `llvm.ldexp`
        (one vscalefps, which also gives inf above the range and subnormals and 0 below it); elsewhere, where
        ldexp would be a libm call a lane, it is built in the exponent bits and the ends are selected."""
        b = self.b
        scalef = self.vector_bits >= 512

        def c(v):
            return self.const("f32", v, x)

        def fma(p, q, r):
            return b.fadd(b.fmul(p, q, flags=FAST), r, flags=FAST)

        # past lo the result is 0 and past hi inf; between -104 and -87.34 it is subnormal (2**n as two normal
        # factors below, so that only the last product rounds); scalef gives inf past 88.72 by itself
        lo, hi = (-104.0, 89.0) if scalef else (-104.0, 88.72283)
        xc = b.select(b.fcmp_ordered("<", x, c(lo)), c(lo), x)
        xc = b.select(b.fcmp_ordered(">", xc, c(hi)), c(hi), xc)
        t = xc.type
        n = self.b.call(self.intrinsic("llvm.roundeven", t, [t], [t]), [b.fmul(xc, c(1.44269504088896341))])
        r = fma(n, c(-0.693359375), xc)
        r = fma(n, c(2.12194440e-4), r)
        p = c(1.9875691500e-4)
        for k in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
            p = fma(p, r, c(k))
        p = fma(p, b.fmul(r, r, flags=FAST), b.fadd(r, c(1.0), flags=FAST))
        it = ll.VectorType(I32, x.type.count) if _is_vec(x) else I32
        ni = b.fptosi(n, it)
        if scalef:
            y = b.call(self.intrinsic("llvm.ldexp", t, [t, it], [t, it]), [p, ni])
        else:
            n1 = b.ashr(ni, self.const("i32", 1, ni))  # 2**n as 2**n1 * 2**n2: each factor stays a normal float
            n2 = b.sub(ni, n1)
            for part in (n1, n2):
                bits = b.shl(b.add(part, self.const("i32", 127, ni)), self.const("i32", 23, ni))
                p = b.fmul(p, b.bitcast(bits, t))  # not reassociated: 2**n1 * 2**n2 alone would underflow
            y = b.select(b.fcmp_ordered(">", x, c(hi)), c(float("inf")), p)
            y = b.select(b.fcmp_ordered("<", x, c(lo)), c(0.0), y)
        return b.select(b.fcmp_unordered("uno", x, x), x, y)

    def tanh_f32(self, x: ll.Value) -> ll.Value:
        """tanh for f32 (scalars and vectors) without a libm call, branch-free (Cephes' tanhf): for |x| < 0.625
        an odd polynomial, x + x*z*P(z) with z = x*x; above, sign(x) * (1 - 2/(exp(2|x|) + 1)) with
        :meth:`exp_f32` (exp overflows to inf past |x| = 44, giving exactly 1). NaN stays NaN. A vectorized
        loop calls it a vector at a time; llvm.tanh was a libm call a lane."""
        b = self.b

        def c(v):
            return self.const("f32", v, x)

        t = x.type
        ax = self.b.call(self.intrinsic("llvm.fabs", t, [t], [t]), [x])
        z = b.fmul(x, x, flags=FAST)
        p = c(-5.70498872745e-3)
        for k in (2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1):
            p = b.fadd(b.fmul(p, z, flags=FAST), c(k), flags=FAST)
        small = b.fadd(b.fmul(b.fmul(p, z, flags=FAST), x, flags=FAST), x, flags=FAST)
        e = self.exp_f32(b.fadd(ax, ax))
        big = b.fsub(c(1.0), b.fdiv(c(2.0), b.fadd(e, c(1.0))))
        y = b.select(b.fcmp_ordered("<", ax, c(0.625)), small, b.select(b.fcmp_unordered("uno", x, x), x, big))
        return self.b.call(self.intrinsic("llvm.copysign", t, [t, t], [t]), [y, x])  # odd: tanh(-0.0) is -0.0

    def float_to_int(self, v: ll.Value, src: str, dst: str, t: ll.Type) -> ll.Value:
        """Float to int as ``llvm.fptosi.sat`` / ``llvm.fptoui.sat`` compute it (toward zero, saturating to the
        type's range, NaN gives 0), spelled out in compares and selects. Not the intrinsic: LLVM's InstCombine
        folds a vector select of two fptosi.sat calls of different source types (f64 and f32) into an invalid
        shufflevector and aborts the process (``select(c, i32(X[1 - i]), i32(Z[i]))`` vectorized)."""
        b = self.b
        lo, hi = DTYPES[dst].int_range
        low = b.fcmp_ordered("<", v, self.const(src, float(lo), v))
        high = b.fcmp_ordered(">=", v, self.const(src, float(hi + 1), v))  # a power of two: exact in a float
        outside = b.or_(b.or_(low, high), b.fcmp_unordered("uno", v, v))
        inside = b.select(outside, self.const(src, 0.0, v), v)  # NaN stays 0
        r = b.fptoui(inside, t) if DTYPES[dst].is_unsigned else b.fptosi(inside, t)
        r = b.select(high, self.const(dst, hi, r), r)
        return b.select(low, self.const(dst, lo, r), r)

    def cast(self, v: ll.Value, src: str, dst: str) -> ll.Value:
        b = self.b
        if src == dst:
            return v
        s, d = DTYPES[src], DTYPES[dst]
        t = ll_type(dst)
        if _is_vec(v):
            t = ll.VectorType(t, v.type.count)
        if s.is_float and d.is_float:
            return b.fpext(v, t) if d.itemsize > s.itemsize else b.fptrunc(v, t)
        if s.is_float and dst == "bool":  # numpy: nonzero is True, NaN included
            return b.fcmp_unordered("!=", v, self.const(src, 0.0, v))
        if s.is_float:  # to an integer: saturating, NaN -> 0, never undefined behaviour
            return self.float_to_int(v, src, dst, t)
        if src == "bool" or s.is_unsigned:
            return b.uitofp(v, t) if d.is_float else b.zext(v, t) if d.itemsize > s.itemsize or src == "bool" \
                else self.int_narrow(v, s, d, t)
        if d.is_float:
            return b.sitofp(v, t)
        if dst == "bool":
            return b.icmp_signed("!=", v, self.const(src, 0, v))
        return b.sext(v, t) if d.itemsize > s.itemsize else self.int_narrow(v, s, d, t)

    def int_narrow(self, v: ll.Value, s, d, t: ll.Type) -> ll.Value:
        """An integer to one of the same size (the same bits: u32 and i32) or a smaller one (the low bits: it wraps,
        as numpy's astype)."""
        if d.name == "bool":
            return self.b.icmp_unsigned("!=", v, self.const(s.name, 0, v))
        return v if d.itemsize == s.itemsize else self.b.trunc(v, t)
