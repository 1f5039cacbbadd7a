"""Generate readable C99 from the loop IR (the C backend behind ``kernel.source("c")``), and compile it.

The kernel is ``int32_t NAME(const float *restrict A, ..., float *restrict C)``: one pointer per buffer, inputs
then outputs in ``func.params`` order (the ABI of the LLVM kernel), returning 0, 1 when a temporary buffer
could not be allocated, or 2 when an index read from a tensor was out of range (``int64_t NAME_index_error(int64_t
*value)`` then tells which gathered index and its value, as the LLVM kernel's function does). The translation
unit includes standard headers only and defines, before the kernel, the few static inline helpers it uses (floor
division, numpy's float max and min, the LLVM backend's ``exp``, ...), so that it computes what the LLVM backend
computes: integers exactly, floats up to rounding (FMA contraction and the order of lane reductions).

Loops:

* serial loops are plain ``for`` loops over ``int64_t`` indices;
* unrolled loops are ``#pragma GCC unroll N`` loops, or are replicated (one block per index value, the index a
  constant) when they hold accesses to a register tile;
* a vectorized loop whose lane-varying values are float arithmetic (+ - * /) on contiguous or strided loads,
  stored contiguously or reduced into one element (`acc = acc + x[lane]`, with + * max min), under conditions
  that are the same for every lane, is written with GCC vector extensions, like the LLVM backend's explicit
  vectors: one statement per vector of the C compiler's register width (``vector_size`` 64 bytes with AVX-512),
  several for a wider loop. Any other vectorized loop (math calls, selects, casts, lanes guarded one by one) is
  a plain loop, under ``#pragma omp simd`` when its lanes are independent, which the C compiler vectorizes;
* parallel loops get ``#pragma omp parallel for schedule(static)``; without OpenMP they run serially, with the
  same result.

A small temporary buffer (a ``cache_write`` register tile) whose every access is at a constant offset, once the
unrolled loops around it are replicated, becomes local variables (vectors of the register width) instead of an
array, so that the C compiler keeps it in registers as LLVM does.

Compiler flags, written at the top of every file: ``-O3 -march=native -std=gnu99 -ffp-contract=fast
-fno-math-errno -fopenmp`` (see :func:`compile_c`).

>>> import tensorlang as tl
>>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=4)
>>> src = emit_c(s.lowered())
>>> "int32_t f(const float *restrict A, float *restrict B)" in src
True
>>> print(src[src.index("    for"):src.index("    return")].rstrip())
    for (int64_t i = 0; i < 4; i++) {
        B[i] = A[i] * 2.0f;
    }
"""
from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np

from . import ir
from .codegen_llvm import INDEX_ERROR_STATUS, INDEX_ERROR_SUFFIX, RELEASE_SUFFIX, WORKSPACE_MIN_BYTES
from .dtypes import DTYPES
from .errors import BuildError
from .simplify import _linear, simplify

#: C type of each dtype in memory (bool is one byte, as LLVM stores an i1).
C_TYPES = {"f32": "float", "f64": "double", "i32": "int32_t", "i64": "int64_t", "bool": "uint8_t", "u8": "uint8_t",
           "i8": "int8_t", "u16": "uint16_t", "i16": "int16_t", "u32": "uint32_t", "u64": "uint64_t"}
_VALUE_TYPES = dict(C_TYPES, bool="int")
_FLOATS = ("f32", "f64")
_ALIGN = 64
_MAX_REGISTERS = 64         # vectors (or scalars) one register tile may become
_MAX_REGISTER_ELEMENTS = 4096
#: the flags compile_c always passes (the generated file's header repeats them)
CFLAGS = ("-O3", "-march=native", "-std=gnu99", "-ffp-contract=fast", "-fno-math-errno")

_KEYWORDS = set("""auto break case char const continue default do double else enum extern float for goto if inline int
long register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
_Bool _Complex _Imaginary bool true false asm typeof""".split())
_RESERVED = _KEYWORDS | set("""status main free malloc calloc realloc aligned_alloc posix_memalign memcpy memset abs
labs fabs fabsf exp expf log logf sqrt sqrtf tanh tanhf pow powf floor floorf fmod fmodf rint rintf NULL INFINITY
NAN int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t errno""".split())

# C operator precedences (higher binds tighter)
_ATOM, _UNARY, _MUL, _ADD, _REL, _EQ, _AND, _OR, _COND = 16, 15, 13, 12, 10, 9, 5, 4, 3
_BIN_PREC = {"*": _MUL, "/": _MUL, "+": _ADD, "-": _ADD}
_CMP_PREC = {"<": _REL, "<=": _REL, ">": _REL, ">=": _REL, "==": _EQ, "!=": _EQ}


def emit_c(func: ir.Func, name: str | None = None, *, vector_bytes: int | None = None) -> str:
    """One self-contained C99 translation unit defining the kernel `name` (default: the function's name).

    Vector code uses vectors of `vector_bytes` bytes (default: the widest SIMD registers of this CPU, 64 with
    AVX-512), the size the C compiler keeps in one register; a vectorized loop of more lanes is written as
    several vectors.

    >>> import tensorlang as tl
    >>> op = tl.op("def add(A: f32[N], B: f32[N]) -> C:\\n    C[i] = A[i] + B[i]")
    >>> src = emit_c(tl.schedule(op, N=8).lowered(), name="add8")
    >>> "int32_t add8(const float *restrict A, const float *restrict B, float *restrict C)" in src
    True

    Raises BuildError naming the node for IR this backend cannot translate.
    """
    name = func.name if name is None else name
    if func.sizes:
        raise BuildError(f"C backend: {func.name} has symbolic sizes ({', '.join(func.sizes)}), which it does not "
                         "take; build with integer sizes for C")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in _RESERVED or name.startswith("tl_"):
        raise BuildError(f"C backend: {name!r} cannot be the name of a C function; pass emit_c(func, name=...)")
    if vector_bytes is None:
        vector_bytes = _host_vector_bytes()
    if vector_bytes < 8 or vector_bytes & (vector_bytes - 1):
        raise BuildError(f"C backend: vector_bytes={vector_bytes} must be a power of two, at least 8")
    return _Emitter(func, name, vector_bytes).source()


@functools.cache
def _host_vector_bytes() -> int:
    from .target import host_target
    return host_target().vector_bits() // 8


# ---- compiling -------------------------------------------------------------------------------------

def find_c_compiler(cc: str | None = None) -> list[str]:
    """The C compiler command: ``cc`` if given (``--cc``), else ``$CC`` (both split like a shell would), else
    ``cc``, ``gcc`` or ``clang`` on PATH. BuildError naming where the command came from when it is not found.

    >>> isinstance(find_c_compiler(), list)  # doctest: +SKIP
    True
    """
    text = (cc or os.environ.get("CC", "")).strip()
    if text:
        source = "" if cc else " ($CC)"
        try:
            cmd = shlex.split(text)
        except ValueError as e:  # an unclosed quote
            raise BuildError(f"C compiler {text!r}{source} is not a command a shell can split: {e}") from None
        if not cmd or shutil.which(cmd[0]) is None:
            raise BuildError(f"C compiler {text!r}{source} not found on PATH")
        return cmd
    for cand in ("cc", "gcc", "clang"):
        path = shutil.which(cand)
        if path:
            return [path]
    raise BuildError("no C compiler found (looked for $CC, cc, gcc, clang): install gcc or clang, set CC, or pass "
                     "cc=... (--cc)")


@functools.cache
def _supports(cc: tuple, flag: str) -> bool:
    """Whether the compiler builds and links a small shared object (with an OpenMP loop) with `flag`."""
    code = "int f(int n)\n{\n    int s = 0;\n#pragma omp parallel for reduction(+:s)\n" \
           "    for (int i = 0; i < n; i++)\n        s += i;\n    return s;\n}\n"
    with tempfile.TemporaryDirectory(prefix="tensorlang-cc-") as d:
        src = Path(d, "probe.c")
        src.write_text(code)
        r = subprocess.run([*cc, flag, "-fPIC", "-shared", str(src), "-o", str(Path(d, "probe.so"))],
                           capture_output=True, timeout=120)
        return r.returncode == 0


def compile_c(source, out_path, *, shared: bool = True, openmp: bool = True, cc=None, extra_flags=()) -> Path:
    """Compile C source text (or a list of texts, one translation unit each) with the system C compiler.

    Flags: ``-O3 -march=native -std=gnu99 -ffp-contract=fast -fno-math-errno -fPIC``, ``-fopenmp`` when `openmp`
    and the compiler supports it (else ``-fopenmp-simd``, so that ``#pragma omp simd`` still vectorizes), then
    `extra_flags`; ``-shared ... -lm`` makes a shared library, ``shared=False`` an object file (``-c``, one
    source). `cc` is a command (text or list); default: :func:`find_c_compiler`. Returns the output path.
    Raises BuildError with the command and the end of the compiler's messages when it fails.

    >>> import ctypes, tempfile, tensorlang as tl
    >>> op = tl.op("def twice(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0")
    >>> so = compile_c(emit_c(tl.schedule(op, N=4).lowered()), tempfile.mkdtemp() + "/twice.so")
    >>> ctypes.CDLL(str(so)).twice is not None
    True
    """
    cmd = (shlex.split(cc) if isinstance(cc, str) else list(cc)) if cc else find_c_compiler()
    sources = [source] if isinstance(source, str) else list(source)
    if not shared and len(sources) != 1:
        raise BuildError("compile_c(shared=False) makes one object file from one source")
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    flags = [*CFLAGS, "-fPIC"]
    if openmp and _supports(tuple(cmd), "-fopenmp"):
        flags.append("-fopenmp")
    elif _supports(tuple(cmd), "-fopenmp-simd"):
        flags.append("-fopenmp-simd")
    with tempfile.TemporaryDirectory(prefix="tensorlang-c-") as d:
        files = []
        for i, text in enumerate(sources):
            files.append(str(Path(d, f"{out.stem}_{i}.c")))
            Path(files[-1]).write_text(text)
        full = [*cmd, *flags, *extra_flags, *(["-shared"] if shared else ["-c"]), *files, "-o", str(out)]
        full += ["-lm"] if shared else []
        r = subprocess.run(full, capture_output=True, text=True)
    if r.returncode != 0:
        tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-25:])
        raise BuildError(f"C compiler failed (exit {r.returncode}): {shlex.join(full)}\n{tail}")
    return out


# ---- literals and names ----------------------------------------------------------------------------

def _float_lit(value: float, dtype: str) -> str:
    """A C literal for a float constant: the f32 value exactly (rounded once, as LLVM rounds it)."""
    v = float(np.float32(value)) if dtype == "f32" else float(value)
    if v != v:
        return "NAN" if dtype == "f32" else "(double)NAN"
    if v in (float("inf"), float("-inf")):
        text = "INFINITY" if dtype == "f32" else "(double)INFINITY"
        return text if v > 0 else "-" + text
    return repr(v) + ("f" if dtype == "f32" else "")


def _int_lit(value: int, dtype: str) -> str:
    if dtype == "i64" and value == -2**63:
        return "INT64_MIN"
    if dtype == "i32" and value == -2**31:
        return "INT32_MIN"
    if DTYPES[dtype].is_unsigned:  # (past 2**63 a decimal constant has no C type but an unsigned one)
        return f"{int(value)}u"
    return str(int(value))


def _c_ident(name: str) -> str:
    text = re.sub(r"\W", "_", name)
    if not text or text[0].isdigit():
        text = "_" + text
    if text in _RESERVED or text.startswith(("tl_", "TL_")):
        text += "_"
    return text


def _flat(buf: ir.Buffer, indices) -> ir.Expr:
    """The row-major offset of buf[indices], simplified (as the LLVM backend computes it)."""
    e: ir.Expr = ir.IntImm(0)
    stride = 1
    for d in range(len(buf.shape) - 1, -1, -1):
        e = ir.BinOp("+", e, ir.BinOp("*", indices[d], ir.IntImm(stride)))
        stride *= buf.shape[d]
    return simplify(e)


def _expand(e: ir.Expr, defs: dict) -> ir.Expr:
    names = ir.expr_vars(e) & defs.keys()
    return simplify(ir.substitute(e, {n: defs[n] for n in names})) if names else e


def _lane_stride(flat: ir.Expr, lane: str) -> int | None:
    """The step of an (expanded) flat index from one lane to the next: 0, 1, another constant, or None."""
    if lane not in ir.expr_vars(flat):
        return 0
    terms, _ = _linear(flat)
    step = 0
    for atom, coef in terms.items():
        if isinstance(atom, ir.Var) and atom.name == lane:
            step = coef
        elif lane in ir.expr_vars(atom):
            return None
    return step


def _vector_bytes_ok(dtype: str, lanes: int) -> bool:
    n = lanes * DTYPES[dtype].itemsize
    return dtype in _FLOATS and lanes >= 2 and n & (n - 1) == 0


class _NotVector(Exception):
    """Why a vectorized loop cannot be written with vector types (it becomes a plain loop)."""


@dataclass
class _Lanes:
    """The vectorized loop being emitted: its index, first index, width, and whether as vector values."""

    var: str
    lo: ir.Expr
    width: int
    vector: bool
    dependent: set      # names whose value differs between lanes (the index and Lets computed from it)
    offset: int = 0     # with vectors: the first lane of the vector being written
    part_lo: int | None = None  # as a plain loop: the constant first index of the loop being written


@dataclass
class _Registers:
    """A buffer kept in local variables: `names[k]` holds elements k*width .. k*width + width - 1 (a vector
    when width > 1)."""

    width: int
    names: list
    dtype: str


# ---- the emitter -----------------------------------------------------------------------------------

class _Emitter:
    """Emits the C text of one function."""

    def __init__(self, func: ir.Func, name: str, vector_bytes: int):
        self.func, self.name, self.vbytes = func, name, vector_bytes
        self.body: list[str] = []
        self.depth = 1
        self.workspace: list[str] = []          # static slots of the temporaries kept between calls
        self.helpers: dict[str, str] = {}      # helper name -> its C definition, in order of first use
        self.scopes: list[set] = []            # C names declared in each open block
        self.vars: dict[str, str] = {}         # IR variable -> C name
        self.ptrs: dict[str, str] = {}         # IR buffer -> C name
        self.regs: dict[str, _Registers] = {}  # buffers kept in registers
        self.consts: dict[str, int] = {}       # indices of replicated unrolled loops
        self.lane0: dict[str, int] = {}        # the index of a vectorized loop written with vectors, at lane 0
        self.defs: dict[str, ir.Expr] = {}     # Let-bound variables as expressions of loop indices
        self.lanes: _Lanes | None = None
        self.in_parallel = False
        self.in_simd = False
        self._vector_why: dict[int, str | None] = {}
        self._buffers_used: dict[int, set] = {}
        self.checks = any(True for _ in ir.index_checks(func.body))  # indices read from memory, checked
        # whether the integer arithmetic being written is a value of the program (i64 wraps, as numpy's and the
        # LLVM backend's) rather than an address or a loop bound (plain C arithmetic)
        self.in_value = False

    # ---- output ----
    def line(self, text: str) -> None:
        self.body.append("    " * self.depth + text)

    def need(self, name: str) -> str:
        """Register the helper `name` (and what it needs); returns the name."""
        if name not in self.helpers:
            text = _helper(name, self)  # registers what it needs first, so that those come before it
            self.helpers[name] = text
        return name

    def source(self) -> str:
        self.scopes.append(set())
        params = []
        for buf in self.func.params:
            c = self.declare(buf.name, self.ptrs)
            const = "const " if buf.role == "input" else ""
            params.append(f"{const}{C_TYPES[buf.dtype]} *restrict {c}")
        self.stmt(self.func.body)
        sig = ", ".join(params)
        shapes = "\n".join(f" *   {b.name}: {b.dtype}[{', '.join(map(str, b.shape))}] ({b.role})"
                           for b in self.func.params)
        head = f"""/* Generated by tensorlang's C backend from the loop IR of `{self.func.name}`.
 *
 * Compile with:
 *   cc {' '.join(CFLAGS)} -fPIC -shared -fopenmp kernel.c -o kernel.so -lm
 * -O3 -march=native: the vector code is only fast on the vector units of this CPU.
 * -ffp-contract=fast (the default of GNU C): multiply-adds fuse into FMA, as in the LLVM backend.
 * -fopenmp: parallel loops run on OpenMP threads (OMP_NUM_THREADS; OMP_WAIT_POLICY=passive keeps idle threads
 *   from spinning between calls); without it they run serially with the same result. Without -fopenmp, pass
 *   -fopenmp-simd so that `#pragma omp simd` loops are vectorized.
 *
 * int32_t {self.name}({sig})
{shapes}
 *   Row-major, C-contiguous arrays. Returns 0, 1 when a temporary buffer could not be allocated, or 2 when an
 *   index read from a tensor was out of range ({self.name}{INDEX_ERROR_SUFFIX} tells which).
 */
#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200112L  /* posix_memalign */
#endif
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
"""
        helpers = [t for t in self.helpers.values() if t]
        out = [head] + [h.rstrip() + "\n" for h in helpers]
        if self.workspace:
            out.append("/* temporaries kept between calls (one per allocation site; NULL while a call holds it) */\n" +
                       "".join(f"static void *{w};\n" for w in self.workspace))
        last = ("/* the last index error of a call that returned 2 (number of the gathered index + 1; its value) */\n"
                "static int64_t tl_last_error[2];\n")
        out.append(last + f"int32_t {self.name}({sig})\n{{\n    int32_t status = 0;")
        if self.checks:
            out.append("    int64_t tl_error[2] = {0, 0};  /* this call's first index out of range */")
        out.append("\n".join(self.body))
        if self.checks:
            out.append(f"    if (status == 0 && tl_error[0] != 0) {{\n"
                       "        __atomic_store_n(&tl_last_error[1], tl_error[1], __ATOMIC_RELAXED);\n"
                       "        __atomic_store_n(&tl_last_error[0], tl_error[0], __ATOMIC_RELAXED);\n"
                       f"        status = {INDEX_ERROR_STATUS};\n    }}")
        out.append("    return status;\n}\n")
        out.append(f"/* after a call that returned {INDEX_ERROR_STATUS}: which gathered index was out of range "
                   "(-1: none), its value at *value */\n"
                   f"int64_t {self.name}{INDEX_ERROR_SUFFIX}(int64_t *value)\n{{\n"
                   "    if (value != NULL)\n"
                   "        *value = __atomic_load_n(&tl_last_error[1], __ATOMIC_RELAXED);\n"
                   "    return __atomic_load_n(&tl_last_error[0], __ATOMIC_RELAXED) - 1;\n}\n")
        frees = "".join(f"    free(__atomic_exchange_n(&{w}, NULL, __ATOMIC_ACQ_REL));\n" for w in self.workspace)
        dtor = "__attribute__((destructor)) " if self.workspace else ""
        what = " (also run when the library is unloaded)" if frees else ": none"
        out.append(f"/* frees the temporaries {self.name} keeps between calls{what} */\n"
                   f"{dtor}void {self.name}{RELEASE_SUFFIX}(void)\n{{\n{frees}}}\n")
        return "\n".join(out)

    # ---- names ----
    def taken(self, c: str) -> bool:
        return c in _RESERVED or any(c in s for s in self.scopes)

    def fresh(self, base: str) -> str:
        """A C name not visible here (base, base_2, ...), declared in the current block."""
        base = _c_ident(base)
        c, k = base, 1
        while self.taken(c):
            k += 1
            c = f"{base}_{k}"
        self.scopes[-1].add(c)
        return c

    def declare(self, name: str, table: dict) -> str:
        c = self.fresh(name)
        table[name] = c
        return c

    def shadow(self, name: str):
        """Forget what the IR variable `name` meant (a new binding hides it); returns what to restore."""
        return self.vars.pop(name, None), self.defs.pop(name, None), self.consts.pop(name, None), \
            self.lane0.pop(name, None)

    def bind(self, name: str):
        """Declare the IR variable `name` here; returns (C name, what to restore)."""
        old = self.shadow(name)
        return self.declare(name, self.vars), old

    def unbind(self, name: str, old) -> None:
        tables: tuple[dict, ...] = (self.vars, self.defs, self.consts, self.lane0)
        for table, value in zip(tables, old):
            if value is None:
                table.pop(name, None)
            else:
                table[name] = value

    def fold(self, e: ir.Expr) -> ir.Expr:
        """An index expression with the constant indices (replicated loops, lane 0) folded in."""
        known = (self.consts.keys() | self.lane0.keys()) & ir.expr_vars(e)
        if not known:
            return e
        return simplify(ir.substitute(e, {n: ir.IntImm(self.consts[n] if n in self.consts else self.lane0[n])
                                          for n in known}))

    def index(self, buf: ir.Buffer, indices, offset: int = 0) -> str:
        """C text of the flat (row-major) index of buf[indices], plus `offset`."""
        flat = _flat(buf, indices)
        if offset:
            flat = simplify(ir.BinOp("+", flat, ir.IntImm(offset)))
        return self.text(self.fold(flat), value=False)

    def text(self, e: ir.Expr, value: bool) -> str:
        """C text of `e` as a value of the program (`value`: its i64 arithmetic wraps) or as an address or bound."""
        saved, self.in_value = self.in_value, value
        try:
            return self.x(e)[0]
        finally:
            self.in_value = saved

    def vector_lanes(self, dtype: str) -> int:
        """Lanes of one vector of `dtype` in the vectorized loop being written."""
        assert self.lanes is not None
        return min(self.lanes.width, self.vbytes // DTYPES[dtype].itemsize)

    def open_block(self, text: str = "{") -> None:
        self.line(text)
        self.depth += 1
        self.scopes.append(set())

    def close_block(self, text: str = "}") -> None:
        self.scopes.pop()
        self.depth -= 1
        self.line(text)

    def fail(self) -> None:
        """Report an allocation failure (status 1), from any thread."""
        if self.in_parallel and not self.in_simd:
            self.line("#pragma omp atomic write")
        self.line("status = 1;  /* out of memory */")

    # ---- analyses ----
    def expand(self, e: ir.Expr) -> ir.Expr:
        return _expand(e, self.defs)

    def buffers_used(self, s: ir.Stmt) -> set:
        key = id(s)
        if key not in self._buffers_used:
            self._buffers_used[key] = set(ir.stmt_buffers(s))
        return self._buffers_used[key]

    def vector_why_not(self, s: ir.For) -> str | None:
        """None when the vectorized loop `s` can be written with vector types, else the reason it cannot."""
        key = id(s)
        if key not in self._vector_why:
            try:
                _check_vector(s)
                self._vector_why[key] = None
            except _NotVector as e:
                self._vector_why[key] = str(e)
        return self._vector_why[key]

    def simd_why_not(self, s: ir.For) -> str | None:
        """None when the lanes of the vectorized loop `s` are independent (`#pragma omp simd` is safe)."""
        if any(True for _ in ir.index_checks(s.body)):
            return "checks indices read from memory (an atomic record of the first one out of range)"
        lane = s.var.name
        stores: dict[str, set] = {}
        loads: dict[str, set] = {}
        defs: dict = {}

        def exprs(*es):
            for e in es:
                for ld in ir.loads(e):
                    loads.setdefault(ld.buffer.name, set()).add(str(_expand(_flat(ld.buffer, ld.indices), defs)))

        def walk(x):
            if isinstance(x, ir.Seq):
                return next((r for r in map(walk, x.stmts) if r), None)
            if isinstance(x, ir.Let):
                exprs(x.value)
                defs[x.var.name] = _expand(x.value, defs)
                return walk(x.body)
            if isinstance(x, ir.If):
                exprs(x.cond)
                return walk(x.then) or (walk(x.orelse) if x.orelse is not None else None)
            if isinstance(x, ir.For):
                if x.kind in ("vectorized", "parallel"):
                    return f"holds a {x.kind} loop"
                exprs(x.lo, x.extent)
                return walk(x.body)
            if isinstance(x, ir.Store):
                if x.buffer.name in self.regs:
                    return f"writes the register tile {x.buffer.name}"
                flat = _expand(_flat(x.buffer, x.indices), defs)
                step = _lane_stride(flat, lane)
                if step == 0:
                    return f"reduces over the lanes into {x.buffer.name}"
                if step is None:
                    return f"stores to {x.buffer.name} at irregular offsets"
                stores.setdefault(x.buffer.name, set()).add(str(flat))
                exprs(x.value, *x.indices)
                return None
            return f"holds {type(x).__name__}"

        why = walk(s.body)
        if why:
            return why
        for b, offs in stores.items():
            if len(offs | loads.get(b, set())) > 1:
                return f"accesses {b} at different offsets"
        return None

    def register_plan(self, s: ir.Allocate) -> int | None:
        """The lane width when the stack buffer of `s` can live in local variables (1: scalars), else None.

        Every access must be at a constant offset once replicated unrolled loops fix their indices: either one
        element, or `width` contiguous elements (starting at a multiple of `width`) indexed by a vectorized loop
        of that width."""
        buf = s.buffer
        if buf.size > _MAX_REGISTER_ELEMENTS or buf.dtype == "bool":
            return None
        found: list = []

        def exprs(loops, defs, *es):
            for e in es:
                for ld in ir.loads(e):
                    if ld.buffer.name == buf.name:
                        if any(ld.guard):
                            raise _NotVector("guarded read")
                        found.append((ld.indices, loops, defs))

        def walk(x, loops, defs):
            if isinstance(x, ir.Seq):
                for y in x.stmts:
                    walk(y, loops, defs)
            elif isinstance(x, ir.Let):
                exprs(loops, defs, x.value)
                walk(x.body, loops, {**defs, x.var.name: _expand(x.value, defs)})
            elif isinstance(x, ir.If):
                exprs(loops, defs, x.cond)
                walk(x.then, loops, defs)
                if x.orelse is not None:
                    walk(x.orelse, loops, defs)
            elif isinstance(x, ir.For):
                if x.kind == "parallel":
                    raise _NotVector("parallel loop")
                exprs(loops, defs, x.lo, x.extent)
                walk(x.body, loops + [x], {k: v for k, v in defs.items() if k != x.var.name})
            elif isinstance(x, ir.Store):
                exprs(loops, defs, x.value, *x.indices)
                if x.buffer.name == buf.name:
                    found.append((x.indices, loops, defs))
            elif isinstance(x, ir.Allocate):
                if x.buffer.name == buf.name:
                    raise _NotVector("allocated again inside")
                walk(x.body, loops, defs)

        try:
            walk(s.body, [], dict(self.defs))
        except _NotVector:
            return None
        width = None
        consts = {k: ir.IntImm(v) for k, v in self.consts.items()}
        for indices, loops, defs in found:
            flat = simplify(ir.substitute(_expand(_flat(buf, indices), defs), consts))
            terms, c = _linear(flat)
            vec = next((lp for lp in reversed(loops) if lp.kind == "vectorized"), None)
            lane_coef, unrolled = 0, []
            for atom, coef in terms.items():
                if coef == 0:
                    continue
                if not isinstance(atom, ir.Var):
                    return None
                if vec is not None and atom.name == vec.var.name:
                    lane_coef = coef
                    continue
                lp = next((q for q in reversed(loops) if q.var.name == atom.name), None)
                if lp is None or lp.kind != "unrolled" or not isinstance(lp.lo, ir.IntImm) or \
                        not isinstance(lp.extent, ir.IntImm):
                    return None
                unrolled.append((coef, lp.lo.value))
            if lane_coef == 0:
                continue
            assert vec is not None  # lane_coef is set from its index only
            if lane_coef != 1 or not isinstance(vec.extent, ir.IntImm):
                return None
            lo = simplify(ir.substitute(vec.lo, consts))
            w = vec.extent.value
            if not isinstance(lo, ir.IntImm) or width not in (None, w) or not _vector_bytes_ok(buf.dtype, w):
                return None
            if (c + lo.value + sum(k * v for k, v in unrolled)) % w or any(k % w for k, _ in unrolled):
                return None
            width = w
        width = width or 1
        if buf.size % width or buf.size // width > _MAX_REGISTERS:
            return None
        return width

    # ---- statements ----
    def stmt(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, ir.Store):
            self.store(s)
        elif isinstance(s, ir.For):
            if s.kind == "serial":
                self.loop(s)
            elif s.kind == "unrolled":
                self.unrolled(s)
            elif s.kind == "vectorized":
                self.vectorized(s)
            elif s.kind == "parallel":
                self.parallel(s)
            else:
                raise BuildError(f"C backend: unsupported IR node For with kind {s.kind!r} (loop {s.var.name})")
        elif isinstance(s, ir.If):
            self.open_block(f"if ({self.x(self.fold(s.cond))[0]}) {{")
            self.stmt(s.then)
            if s.orelse is not None:
                self.close_block("} else {")
                self.scopes.append(set())
                self.depth += 1
                self.stmt(s.orelse)
            self.close_block()
        elif isinstance(s, ir.Let):
            value = self.x(self.fold(s.value) if s.value.dtype == "i64" else s.value)[0]
            expanded = self.expand(s.value)
            # the vectorized loop when the value differs between its lanes
            lanes = self.lanes if self.lanes is not None and ir.expr_vars(s.value) & self.lanes.dependent else None
            c, old = self.bind(s.var.name)
            note = "  /* at lane 0 */" if lanes is not None and lanes.vector else ""
            self.line(f"const {_VALUE_TYPES[s.var.dtype]} {c} = {value};{note}")
            self.defs[s.var.name] = expanded
            if lanes is not None:
                lanes.dependent.add(s.var.name)
            self.stmt(s.body)
            if lanes is not None:
                lanes.dependent.discard(s.var.name)
            self.unbind(s.var.name, old)
        elif isinstance(s, ir.Allocate):
            self.allocate(s)
        else:
            raise BuildError(f"C backend: unsupported IR node {type(s).__name__}: {_short(s)}")

    def loop(self, s: ir.For, pragma: str | None = None, note: str | None = None) -> None:
        lo = self.x(self.fold(s.lo))[0]
        hi = self.x(self.fold(simplify(ir.BinOp("+", s.lo, s.extent))))[0]
        if pragma:
            self.line(pragma)
        self.scopes.append(set())
        v, old = self.bind(s.var.name)
        self.line(f"for (int64_t {v} = {lo}; {v} < {hi}; {v}++) {{" + (f"  /* {note} */" if note else ""))
        self.depth += 1
        self.stmt(s.body)
        self.depth -= 1
        self.line("}")
        self.unbind(s.var.name, old)
        self.scopes.pop()

    def unrolled(self, s: ir.For) -> None:
        extent = s.extent.value if isinstance(s.extent, ir.IntImm) else None
        if extent is None:
            self.loop(s, note="unrolled (extent not constant: a plain loop)")
            return
        if not (self.buffers_used(s.body) & self.regs.keys()):
            self.loop(s, pragma=f"#pragma GCC unroll {extent}", note="unrolled")
            return
        # replicated, with the index a constant, so that register tile accesses have constant offsets
        lo = self.fold(s.lo)
        lo_text = self.x(lo)[0]
        block = not isinstance(lo, ir.IntImm) or _declares(s.body)
        self.line(f"/* unrolled: {s.var.name} in {self.loop_range(s)} */")
        for i in range(extent):
            if isinstance(lo, ir.IntImm):
                if block:
                    self.open_block(f"{{  /* {s.var.name} = {lo.value + i} */")
                else:
                    self.line(f"/* {s.var.name} = {lo.value + i} */")
                old = self.shadow(s.var.name)
                self.consts[s.var.name] = lo.value + i
            else:
                self.open_block()
                v, old = self.bind(s.var.name)
                self.line(f"const int64_t {v} = {lo_text} + {i};")
            self.stmt(s.body)
            self.unbind(s.var.name, old)
            if block:
                self.close_block()

    def loop_range(self, s: ir.For) -> str:
        if isinstance(s.lo, ir.IntImm) and isinstance(s.extent, ir.IntImm):
            return f"{s.lo.value}:{s.lo.value + s.extent.value}"
        return f"{ir.expr_str(s.lo)}:{ir.expr_str(simplify(ir.BinOp('+', s.lo, s.extent)))}"

    def vectorized(self, s: ir.For) -> None:
        if self.lanes is not None:
            self.loop(s, note="vectorized, inside another vectorized loop: serial")
            return
        why = self.vector_why_not(s)
        w = s.extent.value if isinstance(s.extent, ir.IntImm) else 0
        self.lanes = _Lanes(s.var.name, s.lo, w, why is None, {s.var.name})
        try:
            if why is None:
                self.vector_loop(s)
                return
            # a plain loop; one per register vector when it reads a register tile lane by lane
            lo = self.fold(s.lo)
            parts = [(lo.value if isinstance(lo, ir.IntImm) else None, s)]
            widths = [self.regs[b].width for b in self.buffers_used(s.body) & self.regs.keys()
                      if 1 < self.regs[b].width < w]
            if widths and isinstance(lo, ir.IntImm):
                n = min(widths)
                parts = [(lo.value + k, ir.For(s.var, ir.IntImm(lo.value + k), ir.IntImm(n), s.body, s.kind))
                         for k in range(0, w, n)]
            simd = self.simd_why_not(s)
            for start, loop in parts:
                self.lanes.part_lo = start
                if simd is None:
                    self.in_simd = True
                    self.loop(loop, pragma="#pragma omp simd", note="vectorized")
                    self.in_simd = False
                else:
                    self.loop(loop, note=f"vectorized: a plain loop ({why}; {simd})")
        finally:
            self.lanes = None

    def vector_loop(self, s: ir.For) -> None:
        lo = self.fold(s.lo)
        block = not isinstance(lo, ir.IntImm) or _declares(s.body)
        self.line(f"/* vectorized: {s.var.name} in {self.loop_range(s)} */")
        if block:
            self.open_block()
        if isinstance(lo, ir.IntImm):  # the index at lane 0 is a constant: folded into the addresses
            old = self.shadow(s.var.name)
            self.lane0[s.var.name] = lo.value
        else:
            v, old = self.bind(s.var.name)
            self.line(f"const int64_t {v} = {self.x(lo)[0]};  /* lane 0 */")
        self.stmt(s.body)
        self.unbind(s.var.name, old)
        if block:
            self.close_block()

    def parallel(self, s: ir.For) -> None:
        if self.in_parallel or self.in_simd or self.lanes is not None:
            self.loop(s, note="parallel, nested in a parallel or vectorized loop: serial")
            return
        self.in_parallel = True
        self.loop(s, pragma="#pragma omp parallel for schedule(static)", note="parallel")
        self.in_parallel = False

    def allocate(self, s: ir.Allocate) -> None:
        buf = s.buffer
        shape = f"{buf.name}: {buf.dtype}[{', '.join(map(str, buf.shape))}]"
        ctype = C_TYPES[buf.dtype]
        width = self.register_plan(s) if buf.role == "stack" else None
        if width is not None:
            width = min(width, self.vbytes // DTYPES[buf.dtype].itemsize)
            n = buf.size // width
            names = [self.fresh(f"{buf.name}_v{k}" if width > 1 else f"{buf.name}_{k}") for k in range(n)]
            vtype = self.need(_vtype(buf.dtype, width)) if width > 1 else ctype
            init = "{0}" if width > 1 else "0"
            what = f"{n} vector{'s' * (n > 1)} of {width} lanes" if width > 1 else f"{n} scalar{'s' * (n > 1)}"
            self.line(f"/* {shape} in registers: {what} */")
            for k in range(0, n, 6):
                self.line(f"{vtype} " + ", ".join(f"{c} = {init}" for c in names[k:k + 6]) + ";")
            self.regs[buf.name] = _Registers(width, names, buf.dtype)
            self.stmt(s.body)
            del self.regs[buf.name]
            return
        old = self.ptrs.get(buf.name)
        if buf.role == "stack":
            c = self.declare(buf.name, self.ptrs)
            self.line(f"{ctype} {c}[{max(1, buf.size)}] {self.need('TL_ALIGNED')};  /* {shape} */")
            self.stmt(s.body)
        else:
            nbytes = max(_ALIGN, -(-buf.size * DTYPES[buf.dtype].itemsize // _ALIGN) * _ALIGN)
            c = self.declare(buf.name, self.ptrs)
            slot = None
            if nbytes >= WORKSPACE_MIN_BYTES:  # kept between calls, as the LLVM backend does (see its allocate)
                slot = f"tl_workspace_{len(self.workspace)}"
                self.workspace.append(slot)
                self.line(f"{ctype} *restrict {c} = {self.need('tl_workspace_take')}(&{slot}, {nbytes});"
                          f"  /* {shape} */")
            else:
                self.line(f"{ctype} *restrict {c} = {self.need('tl_alloc')}({nbytes});  /* {shape} */")
            self.open_block(f"if ({c} != NULL) {{")
            self.stmt(s.body)
            if slot is not None:
                self.line(f"free(__atomic_exchange_n(&{slot}, (void *){c}, __ATOMIC_ACQ_REL));")
            else:
                self.line(f"free({c});")
            self.close_block("} else {")
            self.depth += 1
            self.fail()
            self.depth -= 1
            self.line("}")
        if old is None:
            self.ptrs.pop(buf.name, None)
        else:
            self.ptrs[buf.name] = old

    # ---- stores ----
    def store(self, s: ir.Store) -> None:
        buf = s.buffer
        if self.lanes is not None and self.lanes.vector:
            self.vector_store(s)
            return
        update = self.update_of(s)
        if buf.name in self.regs:
            kind, ref, lane = self.register_ref(buf, s.indices)
            if kind == "lanes":  # one lane of a register vector, from a plain loop over the lanes
                fn = self.need(f"tl_set_{_vtype(buf.dtype, self.regs[buf.name].width)[3:]}")
                self.line(f"{ref} = {fn}({ref}, {lane}, {self.text(s.value, value=True)});")
                return
            target = ref
        else:
            target = f"{self.ptrs[buf.name]}[{self.index(buf, s.indices)}]"
        if update is not None:
            self.line(f"{target} {update[0]}= {self.text(update[1], value=True)};")
        else:
            self.line(f"{target} = {self.text(s.value, value=True)};")

    @staticmethod
    def update_of(s: ir.Store):
        """(op, rhs) when the store is `X[i] = X[i] op rhs` of floats, where C's `X[i] op= rhs` means the same
        (integers wrap: a helper function computes them)."""
        v = s.value
        if isinstance(v, ir.BinOp) and v.op in ("+", "-", "*", "/") and isinstance(v.a, ir.Load) and \
                v.a.buffer == s.buffer and v.a.indices == s.indices and not any(v.a.guard) and \
                s.buffer.dtype in _FLOATS:
            return v.op, v.b
        return None

    def vector_store(self, s: ir.Store) -> None:
        """One statement per vector of the loop's lanes."""
        buf = s.buffer
        v = self.vector_lanes(buf.dtype)
        vt = _vtype(buf.dtype, v)
        update = self.update_of(s)
        if self.lane_step(s) == 0:
            self.lane_reduction(s, v, vt)
            return
        assert self.lanes is not None
        for offset in range(0, self.lanes.width, v):
            self.lanes.offset = offset
            if buf.name in self.regs:
                ref = self.register_ref(buf, s.indices)[1]
                if update is not None:
                    self.line(f"{ref} {update[0]}= {self.vector_value(update[1], vt)};")
                else:
                    self.line(f"{ref} = {self.vector_value(s.value, vt)};")
            else:
                addr = f"&{self.ptrs[buf.name]}[{self.index(buf, s.indices, offset)}]"
                self.line(f"{self.need('tl_store_' + vt[3:])}({addr}, {self.vector_value(s.value, vt)});")
        self.lanes.offset = 0

    def lane_reduction(self, s: ir.Store, v: int, vt: str) -> None:
        """`X[i] = X[i] op f(lane)` for every lane, as `X[i] = X[i] op reduce(f(lanes))` (like the LLVM backend:
        a float sum is reassociated)."""
        op, rhs = _lane_reduction(s)
        parts = []
        assert self.lanes is not None
        for offset in range(0, self.lanes.width, v):
            self.lanes.offset = offset
            parts.append(self.vector_value(rhs, vt))
        self.lanes.offset = 0
        name = {"+": "add", "*": "mul", "max": "max", "min": "min"}[op]
        while len(parts) > 1:  # combine the vectors lane by lane, then the lanes
            if op in ("+", "*"):
                parts = [f"({a}) {op} ({b})" for a, b in zip(parts[::2], parts[1::2])]
            else:
                parts = [f"{self.need(f'tl_v{name}_{vt[3:]}')}({a}, {b})" for a, b in zip(parts[::2], parts[1::2])]
        total = f"{self.need(f'tl_reduce_{name}_{vt[3:]}')}({parts[0]})"
        target = self.register_ref(s.buffer, s.indices)[1] if s.buffer.name in self.regs else \
            f"{self.ptrs[s.buffer.name]}[{self.index(s.buffer, s.indices)}]"
        if op in ("+", "*"):
            self.line(f"{target} {op}= {total};")
        else:
            self.line(f"{target} = {self.need(f'tl_{name}_{s.buffer.dtype}')}({target}, {total});")

    def vector_value(self, e: ir.Expr, vt: str) -> str:
        text, _, is_vec = self.vx(e)
        return text if is_vec else f"{self.need('tl_splat_' + vt[3:])}({text})"

    # ---- registers ----
    def register_ref(self, buf: ir.Buffer, indices):
        """("lanes", vector name, lane index text) or ("element", C expression of one element, None)."""
        regs = self.regs[buf.name]
        consts = {k: ir.IntImm(v) for k, v in self.consts.items()}
        flat = simplify(ir.substitute(self.expand(_flat(buf, indices)), consts))
        terms, c = _linear(flat)
        lane = None
        for atom, coef in terms.items():
            if coef == 0:
                continue
            if coef == 1 and self.lanes is not None and isinstance(atom, ir.Var) and atom.name == self.lanes.var:
                lane = atom.name
            else:
                raise BuildError(f"C backend: register tile {buf.name} accessed at a varying offset {flat}")
        if lane is None:
            if regs.width == 1:
                return "element", regs.names[c], None
            return "element", f"{regs.names[c // regs.width]}[{c % regs.width}]", None
        assert self.lanes is not None  # lane is set from its index only
        if self.lanes.vector:  # the vector of lanes offset .. offset + width - 1
            lo = simplify(ir.substitute(self.lanes.lo, consts))
            assert isinstance(lo, ir.IntImm)  # register_plan keeps a tile read by lanes from a constant start only
            return "lanes", regs.names[(c + lo.value + self.lanes.offset) // regs.width], None
        # one lane, from a plain loop whose indices all fall in one vector
        assert self.lanes.part_lo is not None  # such a loop starts at a constant (register_plan)
        k = (c + self.lanes.part_lo) // regs.width
        shift = k * regs.width - c
        lane_c = self.vars[lane]
        return "lanes", regs.names[k], (lane_c if shift == 0 else f"{lane_c} - {shift}" if shift > 0 else
                                        f"{lane_c} + {-shift}")

    # ---- expressions ----
    def x(self, e: ir.Expr) -> tuple[str, int]:
        """C text of a scalar expression and its precedence."""
        if isinstance(e, ir.IntImm):
            text = _int_lit(e.value, e.dtype)
            return text, (_UNARY if text.startswith("-") else _ATOM)
        if isinstance(e, ir.FloatImm):
            text = _float_lit(e.value, e.dtype)
            return text, (_UNARY if text.startswith("-") or text.startswith("(") else _ATOM)
        if isinstance(e, ir.Var):
            known = self.consts.get(e.name, self.lane0.get(e.name))
            if known is not None:
                return self.x(ir.IntImm(known, e.dtype))
            if e.name not in self.vars:
                raise BuildError(f"C backend: variable {e.name} is used outside its loop or let")
            return self.vars[e.name], _ATOM
        if isinstance(e, ir.Load):
            return self.load(e)
        if isinstance(e, ir.BinOp):
            return self.binop(e)
        if isinstance(e, ir.Cmp):
            if e.op not in _CMP_PREC:
                raise BuildError(f"C backend: unsupported IR node Cmp with op {e.op!r}: {_short(e)}")
            p = _CMP_PREC[e.op]
            return f"{self.p(e.a, p)} {e.op} {self.p(e.b, p + 1)}", p
        if isinstance(e, ir.Logic):
            if e.op not in ("and", "or"):
                raise BuildError(f"C backend: unsupported IR node Logic with op {e.op!r}: {_short(e)}")
            p = _AND if e.op == "and" else _OR
            return f"{self.p(e.a, p)} {'&&' if e.op == 'and' else '||'} {self.p(e.b, p)}", p
        if isinstance(e, ir.Not):
            return "!" + self.p(e.a, _UNARY), _UNARY
        if isinstance(e, ir.IndexCheck):
            site = str(e.site) if e.when is None else f"({self.x(e.when)[0]}) ? {e.site} : -1"
            return f"{self.need('tl_check_index')}({self.text(e.a, value=True)}, {e.extent}, {site}, tl_error)", _ATOM
        if isinstance(e, ir.Neg):
            if DTYPES[e.dtype].is_int and (e.dtype != "i64" or self.in_value):
                return self.call(f"tl_neg_{e.dtype}", e.a), _ATOM
            a = self.p(e.a, _UNARY)
            return ("-(" + a + ")" if a.startswith("-") else "-" + a), _UNARY
        if isinstance(e, ir.Select):
            return f"{self.p(e.cond, _OR)} ? {self.x(e.t)[0]} : {self.p(e.f, _COND)}", _COND
        if isinstance(e, ir.Cast):
            return self.cast(e)
        if isinstance(e, ir.Call):
            return self.math(e)
        raise BuildError(f"C backend: unsupported IR node {type(e).__name__}: {_short(e)}")

    def p(self, e: ir.Expr, prec: int) -> str:
        """`e` in parentheses when it binds less tightly than `prec`."""
        text, q = self.x(e)
        return text if q >= prec else f"({text})"

    def call(self, fn: str, *args: ir.Expr) -> str:
        if fn.startswith("tl_"):
            self.need(fn)
        return f"{fn}({', '.join(self.x(a)[0] for a in args)})"

    def load(self, e: ir.Load) -> tuple[str, int]:
        buf = e.buffer
        if buf.name in self.regs:
            kind, ref, lane = self.register_ref(buf, e.indices)
            if kind == "lanes":
                fn = self.need(f"tl_get_{_vtype(buf.dtype, self.regs[buf.name].width)[3:]}")
                return f"{fn}({ref}, {lane})", _ATOM
            return ref, _ATOM
        if buf.name not in self.ptrs:
            raise BuildError(f"C backend: buffer {buf.name} is read outside its allocation")
        text = f"{self.ptrs[buf.name]}[{self.index(buf, e.indices)}]"
        if not any(e.guard):
            return text, _ATOM
        return f"({self.guard(e)}) ? {text} : {_zero(buf.dtype)}", _COND

    def guard(self, e: ir.Load) -> str:
        """The condition that the guarded dimensions of a read are in range."""
        parts = []
        saved, self.in_value = self.in_value, False
        for d, ix in enumerate(e.indices):
            if d < len(e.guard) and e.guard[d]:
                i = self.p(self.fold(ix), _REL + 1)
                parts.append(f"{i} >= 0 && {i} < {e.buffer.shape[d]}")
        self.in_value = saved
        return " && ".join(parts)

    def binop(self, e: ir.BinOp) -> tuple[str, int]:
        op, dt = e.op, e.dtype
        if dt in _FLOATS:
            f = "f" if dt == "f32" else ""
            if op in _BIN_PREC:
                p = _BIN_PREC[op]
                return f"{self.p(e.a, p)} {op} {self.p(e.b, p + 1)}", p
            if op in ("min", "max"):
                return self.call(f"tl_{op}_{dt}", e.a, e.b), _ATOM
            if op == "**":
                return self.call(f"pow{f}", e.a, e.b), _ATOM
            if op == "//":
                return f"floor{f}({self.p(e.a, _MUL)} / {self.p(e.b, _MUL + 1)})", _ATOM
            if op == "%":
                return self.call(f"tl_mod_{dt}", e.a, e.b), _ATOM
        elif DTYPES[dt].is_int:
            if op in ("+", "-", "*") and dt == "i64" and not self.in_value:  # an address: it does not overflow
                p = _BIN_PREC[op]
                if op == "+" and isinstance(e.b, ir.IntImm) and e.b.value < 0 and e.b.value != -2**63:
                    return f"{self.p(e.a, p)} - {-e.b.value}", p
                return f"{self.p(e.a, p)} {op} {self.p(e.b, p + 1)}", p
            # no "/": the DSL refuses `/` of integers (it would truncate where numpy gives a float)
            name = {"+": "add", "-": "sub", "*": "mul", "//": "floordiv", "%": "mod", "min": "min",
                    "max": "max"}.get(op)
            if name is not None:
                return self.call(f"tl_{name}_{dt}", e.a, e.b), _ATOM
            if op == "**":  # as the LLVM backend: through double, then truncated
                ct = C_TYPES[dt]
                return f"({ct})pow((double){self.p(e.a, _UNARY)}, (double){self.p(e.b, _UNARY)})", _UNARY
        raise BuildError(f"C backend: unsupported IR node BinOp {op!r} on {dt}: {_short(e)}")

    def math(self, e: ir.Call) -> tuple[str, int]:
        dt, fn = e.dtype, e.fn
        if dt in _FLOATS:
            f = "f" if dt == "f32" else ""
            if fn == "exp" and dt == "f32":
                return self.call("tl_exp_f32", *e.args), _ATOM
            if fn in ("max", "min") and len(e.args) == 2:
                return self.call(f"tl_{fn}_{dt}", *e.args), _ATOM
            names = {"exp": "exp", "log": "log", "sqrt": "sqrt", "tanh": "tanh", "abs": "fabs", "floor": "floor",
                     "pow": "pow"}
            arity = 2 if fn == "pow" else 1
            if fn in names and len(e.args) == arity:
                return self.call(names[fn] + f, *e.args), _ATOM
        elif DTYPES[dt].is_int:
            if (fn == "abs" and len(e.args) == 1) or (fn in ("max", "min") and len(e.args) == 2):
                return self.call(f"tl_{fn}_{dt}", *e.args), _ATOM
        raise BuildError(f"C backend: unsupported IR node Call {fn!r} on {dt}: {_short(e)}")

    def cast(self, e: ir.Cast) -> tuple[str, int]:
        src, dst = e.a.dtype, e.dtype
        if src == dst:
            return self.x(e.a)
        if src not in C_TYPES or dst not in C_TYPES:
            raise BuildError(f"C backend: unsupported IR node Cast from {src} to {dst}: {_short(e)}")
        if dst == "bool":  # numpy's: nonzero is True (a float NaN too)
            return f"{self.p(e.a, _EQ)} != 0", _EQ
        if src in _FLOATS and dst not in _FLOATS:  # saturating, NaN -> 0, as llvm.fptosi.sat
            return self.call(f"tl_{src}_to_{dst}", e.a), _ATOM
        return f"({_VALUE_TYPES[dst]}){self.p(e.a, _UNARY)}", _UNARY

    # ---- vector expressions ----
    def vx(self, e: ir.Expr) -> tuple[str, int, bool]:
        """C text of an expression inside a vectorized loop written with vector types: (text, precedence,
        whether it is a vector). Lane-invariant parts are scalars (C broadcasts them in mixed operations)."""
        step = self.lane_step(e) if isinstance(e, ir.Load) else 0
        if step and isinstance(e, ir.Load):
            assert self.lanes is not None
            buf = e.buffer
            if buf.name in self.regs:
                return self.register_ref(buf, e.indices)[1], _ATOM, True
            vt = _vtype(buf.dtype, self.vector_lanes(buf.dtype))
            addr = f"&{self.ptrs[buf.name]}[{self.index(buf, e.indices, self.lanes.offset * step)}]"
            if step == 1:
                text = f"{self.need('tl_load_' + vt[3:])}({addr})"
            else:  # lanes `step` elements apart
                text = f"{self.need('tl_gather_' + vt[3:])}({addr}, {step})"
            if any(e.guard):  # a guard of the lane-invariant dimensions (a varying guard is not vector code)
                return f"({self.guard(e)}) ? {text} : ({self.need(vt)}){{0}}", _COND, True
            return text, _ATOM, True
        if isinstance(e, ir.BinOp) and e.dtype in _FLOATS and e.op in _BIN_PREC:
            a, b = self.vx(e.a), self.vx(e.b)
            if a[2] or b[2]:
                p = _BIN_PREC[e.op]
                at = a[0] if a[1] >= p else f"({a[0]})"
                bt = b[0] if b[1] > p else f"({b[0]})"
                return f"{at} {e.op} {bt}", p, True
        if isinstance(e, ir.Neg) and e.dtype in _FLOATS:
            a = self.vx(e.a)
            if a[2]:
                return "-" + (a[0] if a[1] >= _UNARY else f"({a[0]})"), _UNARY, True
        text, prec = self.x(e)
        return text, prec, False

    def lane_step(self, e) -> int | None:
        assert self.lanes is not None
        return _lane_stride(self.expand(_flat(e.buffer, e.indices)), self.lanes.var)


def _lane_reduction(s: ir.Store):
    """(op, rhs) when the store is the update `X[i] = X[i] op rhs` of a float reduction (+ * max min)."""
    v = s.value
    if isinstance(v, ir.BinOp) and v.op in ("+", "*", "max", "min") and s.buffer.dtype in _FLOATS and \
            isinstance(v.a, ir.Load) and v.a.buffer == s.buffer and v.a.indices == s.indices and not any(v.a.guard):
        return v.op, v.b
    return None


def _zero(dtype: str) -> str:
    return {"f32": "0.0f", "f64": "0.0"}.get(dtype, "0")


def _short(node) -> str:
    try:
        text = str(node)
    except Exception:  # an unknown node may not print
        text = repr(node)
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


def _vtype(dtype: str, lanes: int) -> str:
    return f"tl_{dtype}x{lanes}"


def _declares(s: ir.Stmt) -> bool:
    """Whether `s` declares a C name in the block it is written in (a Let or an Allocate at its top)."""
    if isinstance(s, ir.Seq):
        return any(_declares(x) for x in s.stmts)
    return isinstance(s, (ir.Let, ir.Allocate))


def _check_vector(loop: ir.For) -> None:
    """Raise _NotVector unless every lane-varying value of the vectorized `loop` is float arithmetic (+ - * /,
    negation) on contiguous loads, stored contiguously, under conditions that are the same for every lane."""
    if not isinstance(loop.extent, ir.IntImm):
        raise _NotVector("extent not constant")
    w = loop.extent.value
    lane = loop.var.name
    defs: dict = {}

    def stride(buf, indices) -> int | None:
        if any(True for ix in indices for _ in ir.loads(ix)):
            raise _NotVector("an index reads memory")
        return _lane_stride(_expand(_flat(buf, indices), defs), lane)

    def invariant(e) -> bool:
        return lane not in ir.expr_vars(_expand(e, defs))

    def varying(e) -> bool:
        if isinstance(e, ir.Load):
            step = stride(e.buffer, e.indices)
            if step == 0:
                return False
            if step is None:
                raise _NotVector(f"reads {e.buffer.name} at irregular offsets")
            if not _vector_bytes_ok(e.buffer.dtype, w):
                raise _NotVector(f"{w} lanes of {e.buffer.dtype}")
            if any(g and not invariant(ix) for g, ix in zip(e.guard, e.indices)):
                raise _NotVector(f"a read of {e.buffer.name} is guarded lane by lane")
            return True
        if isinstance(e, ir.Var):
            if not invariant(e):
                raise _NotVector(f"uses the index {e.name} as a value")
            return False
        kids = [varying(k) for k in ir.children(e)]
        if not any(kids):
            return False
        if (isinstance(e, ir.BinOp) and e.dtype in _FLOATS and e.op in _BIN_PREC) or \
                (isinstance(e, ir.Neg) and e.dtype in _FLOATS):
            return True
        raise _NotVector(f"{type(e).__name__} {getattr(e, 'op', getattr(e, 'fn', ''))} on lanes".replace("  ", " "))

    def walk(x) -> None:
        if isinstance(x, ir.Seq):
            for y in x.stmts:
                walk(y)
        elif isinstance(x, ir.Let):
            if any(True for _ in ir.loads(x.value)):
                raise _NotVector("a let reads memory")
            defs[x.var.name] = _expand(x.value, defs)
            walk(x.body)
        elif isinstance(x, ir.If):
            if not invariant(x.cond) or varying(x.cond):
                raise _NotVector("a condition differs between lanes")
            walk(x.then)
            if x.orelse is not None:
                walk(x.orelse)
        elif isinstance(x, ir.For):
            if x.kind not in ("serial", "unrolled"):
                raise _NotVector(f"holds a {x.kind} loop")
            if not invariant(x.lo) or not invariant(x.extent):
                raise _NotVector("an inner loop's bounds differ between lanes")
            walk(x.body)
        elif isinstance(x, ir.Store):
            if x.buffer.dtype not in _FLOATS or not _vector_bytes_ok(x.buffer.dtype, w):
                raise _NotVector(f"stores {w} lanes of {x.buffer.dtype}")
            step = stride(x.buffer, x.indices)
            if step == 0 and _lane_reduction(x) is not None:  # X[i] = X[i] op f(lanes): reduce the lanes
                varying(cast(ir.BinOp, x.value).b)  # an update, as _lane_reduction checked
                return
            if step != 1:
                raise _NotVector(f"reduces over the lanes into {x.buffer.name}" if step == 0 else
                                 f"stores to {x.buffer.name} with lane stride {step}")
            varying(x.value)
        else:
            raise _NotVector(f"holds {type(x).__name__}")

    walk(loop.body)


# ---- helpers: C text of each static function the kernel may use ------------------------------------

def _helper(name: str, em: _Emitter) -> str:
    if name == "TL_ALIGNED":
        return ("#if defined(__GNUC__)\n#define TL_ALIGNED __attribute__((aligned(64)))\n#else\n"
                "#define TL_ALIGNED\n#endif\n")
    if name == "tl_workspace_take":
        return ("/* the block a call of this kernel left in *slot (taking it), else a fresh one of nbytes, or NULL */\n"
                f"static void *tl_workspace_take(void **slot, size_t nbytes)\n{{\n"
                "    void *p = __atomic_exchange_n(slot, NULL, __ATOMIC_ACQ_REL);\n"
                f"    return p != NULL ? p : {em.need('tl_alloc')}(nbytes);\n}}\n")
    if name == "tl_alloc":
        return ("/* 64-byte aligned memory for a temporary buffer, or NULL */\n"
                "static void *tl_alloc(size_t nbytes)\n{\n    void *p = NULL;\n"
                "    return posix_memalign(&p, 64, nbytes) == 0 ? p : NULL;\n}\n")
    m = re.fullmatch(r"tl_(f32|f64)x(\d+)", name)
    if m:
        dt, w = m.group(1), int(m.group(2))
        return f"typedef {C_TYPES[dt]} {name} __attribute__((vector_size({w * DTYPES[dt].itemsize})));\n"
    m = re.fullmatch(r"tl_(i32|i64|u8|i8|u16|i16|u32|u64)x(\d+)", name)
    if m:
        dt, w = m.group(1), int(m.group(2))
        return f"typedef {C_TYPES[dt]} {name} __attribute__((vector_size({w * DTYPES[dt].itemsize})));\n"
    m = re.fullmatch(r"tl_(vmax|vmin)_((f32|f64)x(\d+))", name)
    if m:  # lane by lane, numpy's max/min (NaN if either is NaN), as a blend of the bits
        what, vt, dt, w = m.group(1), "tl_" + m.group(2), m.group(3), int(m.group(4))
        mt = em.need(f"tl_{'i32' if dt == 'f32' else 'i64'}x{w}")
        em.need(vt)
        cmp = ">" if what == "vmax" else "<"
        return (f"static inline {vt} {name}({vt} a, {vt} b)\n{{\n"
                f"    {mt} keep_a = (a {cmp} b) | (a != a);\n"
                f"    return ({vt})((keep_a & ({mt})a) | (~keep_a & ({mt})b));\n}}\n")
    m = re.fullmatch(r"tl_reduce_(add|mul|max|min)_((f32|f64)x(\d+))", name)
    if m:
        what, vt, dt, w = m.group(1), "tl_" + m.group(2), m.group(3), int(m.group(4))
        em.need(vt)
        t = C_TYPES[dt]
        step = {"add": "t[k] + t[k + n]", "mul": "t[k] * t[k + n]"}.get(what) or \
            f"{em.need(f'tl_{what}_{dt}')}(t[k], t[k + n])"
        return (f"/* the lanes combined pairwise: lane k with lane k + n, for n = {w // 2}, ..., 2, 1 */\n"
                f"static inline {t} {name}({vt} v)\n{{\n    {t} t[{w}];\n    memcpy(t, &v, sizeof t);\n"
                f"    for (int n = {w // 2}; n >= 1; n /= 2)\n        for (int k = 0; k < n; k++)\n"
                f"            t[k] = {step};\n    return t[0];\n}}\n")
    m = re.fullmatch(r"tl_(load|store|splat|get|set|gather)_((f32|f64)x(\d+))", name)
    if m:
        what, vt, dt, w = m.group(1), "tl_" + m.group(2), m.group(3), int(m.group(4))
        em.need(vt)
        t = C_TYPES[dt]
        if what == "load":
            return (f"static inline {vt} {name}(const {t} *p)\n{{\n    {vt} v;\n    memcpy(&v, p, sizeof v);\n"
                    "    return v;\n}\n")
        if what == "store":
            return f"static inline void {name}({t} *p, {vt} v)\n{{\n    memcpy(p, &v, sizeof v);\n}}\n"
        if what == "splat":
            return f"static inline {vt} {name}({t} x)\n{{\n    return ({vt}){{{', '.join(['x'] * w)}}};\n}}\n"
        if what == "gather":
            elems = [f"p[{k} * stride]" for k in range(w)]
            rows = ",\n        ".join(", ".join(elems[k:k + 8]) for k in range(0, w, 8))
            return (f"static inline {vt} {name}(const {t} *p, int64_t stride)\n{{\n"
                    f"    return ({vt}){{\n        {rows}}};\n}}\n")
        if what == "get":
            return f"static inline {t} {name}({vt} v, int64_t lane)\n{{\n    return v[lane];\n}}\n"
        return (f"static inline {vt} {name}({vt} v, int64_t lane, {t} x)\n{{\n    v[lane] = x;\n"
                "    return v;\n}\n")
    if name == "tl_check_index":
        return ("/* an index read from a tensor, checked against the extent n of the dimension it indexes: itself\n"
                " * when 0 <= i < n, else 0, and gathered index number `site` (unless -1) recorded as out of range\n"
                " * with value i in error, if nothing is recorded there yet (the first wins, whichever thread) */\n"
                "static inline int64_t tl_check_index(int64_t i, int64_t n, int64_t site, int64_t *error)\n{\n"
                "    if ((uint64_t)i < (uint64_t)n)\n        return i;\n    int64_t none = 0;\n"
                "    if (site >= 0 && __atomic_compare_exchange_n(&error[0], &none, site + 1, 0, __ATOMIC_ACQ_REL,\n"
                "                                                 __ATOMIC_RELAXED))\n"
                "        __atomic_store_n(&error[1], i, __ATOMIC_RELAXED);\n    return 0;\n}\n")
    m = re.fullmatch(r"tl_(f32|f64)_to_(i32|i64|u8|i8|u16|i16|u32|u64)", name)
    if m:
        src, dst = m.group(1), m.group(2)
        t, ct = C_TYPES[src], C_TYPES[dst]
        lo, hi = DTYPES[dst].int_range
        low, high = _float_lit(float(lo), src), _float_lit(float(hi + 1), src)  # powers of two: exact
        return (f"/* saturating conversion toward zero, NaN -> 0 (llvm.fpto[su]i.sat) */\n"
                f"static inline {ct} {name}({t} x)\n{{\n    if (x != x)\n        return 0;\n"
                f"    if (x <= {low})\n        return ({ct}){_int_lit(lo, dst)};\n"
                f"    if (x >= {high})\n        return ({ct}){_int_lit(hi, dst)};\n    return ({ct})x;\n}}\n")
    m = re.fullmatch(r"tl_(\w+)_(f32|f64|i32|i64|u8|i8|u16|i16|u32|u64)", name)
    if m:
        return _scalar_helper(m.group(1), m.group(2), name)
    raise AssertionError(f"no C helper {name}")


def _scalar_helper(what: str, dt: str, name: str) -> str:
    t = C_TYPES[dt]
    u = "uint64_t" if DTYPES[dt].itemsize == 8 else "uint32_t"  # wide enough that products of small types wrap
    if dt in _FLOATS:
        if what in ("max", "min"):
            op = ">" if what == "max" else "<"
            return (f"/* {what} as numpy's: NaN if either is NaN */\n"
                    f"static inline {t} {name}({t} a, {t} b)\n{{\n    return (a {op} b || a != a) ? a : b;\n}}\n")
        if what == "mod":
            f = "f" if dt == "f32" else ""
            return ("/* the remainder with the sign of the divisor (numpy's %) */\n"
                    f"static inline {t} {name}({t} a, {t} b)\n{{\n    {t} r = fmod{f}(a, b);\n"
                    "    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;\n}\n")
        if what == "exp" and dt == "f32":
            return _exp_f32()
    else:
        if what in ("add", "sub", "mul"):
            op = {"add": "+", "sub": "-", "mul": "*"}[what]
            note = "/* wrapping integer arithmetic (as LLVM's add/sub/mul without nsw) */\n" if what == "add" else ""
            return f"{note}static inline {t} {name}({t} a, {t} b)\n{{\n    return ({t})(({u})a {op} ({u})b);\n}}\n"
        if what == "neg":
            return f"static inline {t} {name}({t} a)\n{{\n    return ({t})(({u})0 - ({u})a);\n}}\n"
        if what == "abs":
            return f"static inline {t} {name}({t} a)\n{{\n    return a < 0 ? ({t})(({u})0 - ({u})a) : a;\n}}\n"
        if what in ("floordiv", "mod") and DTYPES[dt].is_unsigned:
            op = "/" if what == "floordiv" else "%"
            return (f"/* unsigned {what}: x {op} 0 gives 0 */\n"
                    f"static inline {t} {name}({t} a, {t} b)\n{{\n    return b == 0 ? 0 : ({t})(a {op} b);\n}}\n")
        if what in ("max", "min"):
            op = ">" if what == "max" else "<"
            return f"static inline {t} {name}({t} a, {t} b)\n{{\n    return a {op} b ? a : b;\n}}\n"
        # by -1: the wrapping negation (the minimum / -1 would trap), remainder 0
        if what in ("floordiv", "mod"):
            note = ("/* floor division (Python's //): x // 0 gives 0, x // -1 wraps */\n" if what == "floordiv" else
                    "/* the remainder with the sign of the divisor (Python's %): x % 0 gives 0 */\n")
            decl = f"{t} q = a / b, r = a % b;" if what == "floordiv" else f"{t} r = a % b;"
            ret = "q - 1 : q" if what == "floordiv" else "r + b : r"
            minus_one = f"({t})(({u})0 - ({u})a)" if what == "floordiv" else "0"
            return (f"{note}static inline {t} {name}({t} a, {t} b)\n{{\n    if (b == 0)\n        return 0;\n"
                    f"    if (b == -1)\n        return {minus_one};\n"
                    f"    {decl}\n    return (r != 0 && (r < 0) != (b < 0)) ? {ret};\n}}\n")
    raise AssertionError(f"no C helper {name}")


def _exp_f32() -> str:
    """exp for f32 exactly as the LLVM backend computes it (no libm call, so that loops vectorize)."""
    def c(v):
        return _float_lit(v, "f32")
    lines = [
        "/* exp for float, as the LLVM backend computes it: x = n*ln2 + r, exp(r) by a degree-6 polynomial",
        " * (Cephes' coefficients, about 1 ulp), times 2**n built in the exponent bits */",
        "static inline float tl_bits_f32(uint32_t b)\n{\n    float f;\n    memcpy(&f, &b, sizeof f);\n"
        "    return f;\n}\n",
        "static inline float tl_exp_f32(float x)\n{",
        f"    float xc = x < {c(-87.33654)} ? {c(-87.33654)} : x;",
        f"    xc = xc > {c(88.72283)} ? {c(88.72283)} : xc;",
        f"    float n = rintf(xc * {c(1.44269504088896341)});",
        f"    float r = n * {c(-0.693359375)} + xc;",
        f"    r = n * {c(2.12194440e-4)} + r;",
        f"    float p = {c(1.9875691500e-4)};",
    ]
    for k in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        lines.append(f"    p = p * r + {c(k)};")
    lines += [
        f"    p = p * (r * r) + (r + {c(1.0)});",
        "    int32_t ni = (int32_t)n;",
        "    int32_t n1 = ni >> 1;  /* 2**n as 2**n1 * 2**n2: each factor stays a normal float */",
        "    int32_t n2 = ni - n1;",
        "    p = p * tl_bits_f32((uint32_t)(n1 + 127) << 23);",
        "    p = p * tl_bits_f32((uint32_t)(n2 + 127) << 23);",
        f"    float y = x > {c(88.72283)} ? INFINITY : p;",
        f"    y = x < {c(-87.33654)} ? 0.0f : y;",
        "    return x != x ? x : y;",
        "}",
    ]
    return "\n".join(lines) + "\n"
