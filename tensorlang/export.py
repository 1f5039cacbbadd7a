"""Ahead-of-time export: a kernel as a shared library, an object file, C source, LLVM IR or assembly.

Every format writes, into one directory, the kernel in that format plus `NAME.h` (the C prototype, with each
buffer's shape, dtype and layout, the sizes and the schedule) and `NAME_example.c` (a program that fills the
inputs, calls the kernel and prints a checksum; its first comment has the exact `cc` command that builds it).
The kernel keeps the JIT's ABI: `int32_t NAME(const float *restrict A, ..., float *restrict C)`, inputs then
outputs, returning 0, 1 when a temporary buffer could not be allocated, or 2 when an index read from a tensor was
out of range (`int64_t NAME_index_error(int64_t *value)` tells which gathered index, and the value).

| format | writes | needs |
|---|---|---|
| `so`  | `libNAME.so`: the kernel (LLVM, PIC), the thread pool, the metadata `tl.load` reads | a C compiler |
| `o`   | `NAME.o` (PIC) and `tensorlang_runtime.c` (the thread pool) to link with it | |
| `c`   | `NAME.c`: C99 from the C backend, parallel loops as OpenMP pragmas | |
| `ll`  | `NAME.ll`: the optimised LLVM IR | |
| `asm` | `NAME.s`: the assembly (GNU syntax) and `tensorlang_runtime.c` | |

>>> import os, tempfile
>>> import tensorlang as tl
>>> k = tl.build(tl.op("def scale(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0"), N=8)
>>> files = k.export(tempfile.mkdtemp(), format="ll")
>>> sorted(files), os.path.basename(files["llvm"])
(['example', 'header', 'llvm', 'runtime'], 'scale.ll')
>>> print([line for line in open(files["header"]) if line.startswith("int32_t")][0], end="")
int32_t scale(const float *TENSORLANG_RESTRICT X, float *TENSORLANG_RESTRICT Y);

A shared library loads back as a Kernel, with the same argument checks: `tl.load("out/libscale.so")`.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

import numpy as np

from .codegen_c import C_TYPES, find_c_compiler
from .codegen_llvm import INDEX_ERROR_SUFFIX, RELEASE_SUFFIX
from .dtypes import DTYPES
from .errors import BuildError, UsageError

FORMATS = {"so": "shared library", "o": "object file", "c": "C source", "ll": "LLVM IR", "asm": "assembly"}
META_SUFFIX = "__tensorlang_meta"   # `const char *NAME__tensorlang_meta(void)` returns the metadata JSON
META_FORMAT = 1
LIBRARY_KERNEL = "tensorlang_library_kernel"  # in libraries made by format "so": names the kernel
RUNTIME_C = os.path.join(os.path.dirname(__file__), "csrc", "tensorlang_runtime.c")

_C_KEYWORDS = set("""auto break case char const continue default do double else enum extern float for goto if inline
int long register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
_Bool _Complex _Imaginary _Alignas _Alignof _Atomic _Generic _Noreturn _Static_assert _Thread_local bool true false
alignas alignof constexpr nullptr static_assert thread_local typeof typeof_unqual""".split())
# names the kernel, its runtime or the example program use: a kernel of that name would replace them
_C_TAKEN = set("""main malloc calloc realloc free aligned_alloc posix_memalign memcpy memmove memset abort exit
printf fprintf puts perror fopen fwrite fclose clock_gettime exp expf log logf sqrt sqrtf tanh tanhf pow powf
fabs fabsf fmax fmaxf fmin fminf floor floorf erf erff sin sinf cos cosf abs labs fmod fmodf rint rintf status errno
asm argc argv int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t stdin stdout stderr FILE NULL
EOF INFINITY NAN timespec""".split())


def check_name(name) -> str:
    """The function name if it can be one in C, else BuildError saying why.

    >>> check_name("matmul_1024")
    'matmul_1024'
    >>> check_name("mat-mul")
    Traceback (most recent call last):
    ...
    tensorlang.errors.BuildError: name 'mat-mul' is not a C identifier (ASCII letters, digits and _, ...)
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise BuildError(f"name {name!r} is not a C identifier (ASCII letters, digits and _, not starting with a "
                         "digit)")
    if name in _C_KEYWORDS:
        raise BuildError(f"name {name!r} is a C keyword; pick another name")
    if name in _C_TAKEN or name.startswith(("tensorlang_", "tl_")):
        raise BuildError(f"name {name!r} is taken by the C library or tensorlang's runtime; pick another name")
    if len(name) > 200:
        raise BuildError(f"name {name[:20]!r}... is {len(name)} characters long; at most 200")
    return name


def check_format(fmt) -> str:
    """`fmt` if it is one of FORMATS, else BuildError listing them.

    >>> check_format("so")
    'so'
    >>> check_format("zip")
    Traceback (most recent call last):
    ...
    tensorlang.errors.BuildError: format 'zip' is not one of so (shared library), o (object file), ...
    """
    if fmt not in FORMATS:
        raise BuildError(f"format {fmt!r} is not one of {', '.join(f'{k} ({v})' for k, v in FORMATS.items())}")
    return fmt


def output_directory(path, flag: str = "path") -> str:
    """Create the directory `path` (and its parents) if needed, check that it is writable and return it as a str;
    a BuildError, starting with `flag` (the argument's name), says why it cannot be used.

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     os.path.isdir(output_directory(os.path.join(tmp, "out", "lib")))
    True
    """
    path = os.fspath(path)
    if not path:
        raise BuildError(f"{flag}: the output directory is an empty string")
    if os.path.exists(path) and not os.path.isdir(path):
        raise BuildError(f"{flag}: {path} exists and is not a directory; pass a directory to write the files in")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise BuildError(f"{flag}: cannot create the directory {path}: {e.strerror or e}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise BuildError(f"{flag}: cannot write to the directory {path} (permission denied)")
    return path


def export(what, path, format: str = "so", *, name: str | None = None, cc: str | None = None,
           note: str | None = None, command: str | None = None) -> dict[str, str]:
    """Write a kernel (a Kernel or a Schedule) ahead of time into the directory `path` (created if needed).

    `format` is one of FORMATS; `name` is the C function's name (default: the program's name); `cc` is the C
    compiler that links format "so" (default: $CC or cc); `note` says in the header where the schedule came from
    and `command` what made the files. Existing files of the same names are replaced. Returns {role: path} with
    roles "library", "object", "source", "llvm", "asm", "runtime", "header", "example".

    >>> import tempfile, tensorlang as tl
    >>> s = tl.schedule(tl.op("def add1(X: f32[N]) -> Y:\\n    Y[i] = X[i] + 1.0"), N=100)
    >>> sorted(export(s, tempfile.mkdtemp(), "asm", name="plus_one"))
    ['asm', 'example', 'header', 'runtime']
    """
    from .runtime import Kernel
    from .schedule import Schedule
    from .target import host_target
    schedule = what.schedule if isinstance(what, Kernel) else what
    if not isinstance(schedule, Schedule):
        raise BuildError(f"export() takes a Kernel (from tl.build) or a Schedule, not {type(what).__name__}")
    check_format(format)
    name = check_name(schedule.op.name if name is None else name)
    directory = output_directory(path)
    compiler = find_c_compiler(cc) if format == "so" else None
    func = dataclasses.replace(getattr(what, "func", None) or schedule.lowered(), name=name)
    meta = metadata(schedule, func, host_target(), "c" if format == "c" else "llvm", note)
    meta_json = json.dumps(meta)
    out = os.path.join(directory, name)
    files: dict[str, str] = {}
    if format == "c":
        try:
            from .codegen_c import emit_c
        except ImportError as e:
            raise BuildError(f"format 'c' needs the C backend (tensorlang.codegen_c), which is missing: {e}") from None
        files["source"] = _write(out + ".c", emit_c(func).rstrip("\n") + "\n\n" + _c_meta_function(name, meta_json))
    else:
        code = _compile_llvm(func, meta_json, host_target(), "o" if format == "so" else format)
        if format == "so":
            assert compiler is not None  # found above, before compiling
            files["library"] = _link(code, directory, name, compiler)
        else:
            role, ext = {"o": ("object", ".o"), "ll": ("llvm", ".ll"), "asm": ("asm", ".s")}[format]
            files[role] = _write(out + ext, code)
            with open(RUNTIME_C) as f:
                files["runtime"] = _write(os.path.join(directory, "tensorlang_runtime.c"), f.read())
    files["header"] = _write(out + ".h", header(meta, format, command))
    files["example"] = _write(out + "_example.c", example(meta, format))
    return files


def metadata(schedule, func, target, backend: str, note: str | None = None) -> dict:
    """What a library says about itself (`NAME__tensorlang_meta()` returns it as JSON): program, sizes, schedule,
    buffers in argument order, target, loop IR. `func` is the lowered function (its name is the C name), `backend`
    "llvm" or "c", and `note` says where the schedule came from.

    >>> import tensorlang as tl
    >>> from tensorlang.target import host_target
    >>> s = tl.schedule(tl.op("def scale(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0"), N=8)
    >>> meta = metadata(s, s.lowered(), host_target(), "llvm")
    >>> meta["name"], meta["sizes"], meta["inputs"], meta["parallel"]
    ('scale', {'N': 8}, [{'name': 'X', 'dtype': 'f32', 'shape': [8]}], False)
    """
    import tensorlang
    bufs = [{"name": b.name, "dtype": b.dtype, "shape": list(b.shape)} for b in func.params]
    n_in = len(schedule.op.inputs)
    return {"tensorlang_export": META_FORMAT, "version": tensorlang.__version__, "name": func.name,
            "op": schedule.op.name, "source": schedule.op.source, "sizes": dict(schedule.sizes),
            "schedule": schedule.to_json(), "schedule_python": str(schedule), "note": note, "backend": backend,
            "inputs": bufs[:n_in], "outputs": bufs[n_in:], "parallel": "# parallel" in str(func),
            "target": {"triple": target.triple, "cpu": target.cpu, "features": target.features},
            "ir": str(func)}


def _write(path: str, data) -> str:
    # a new file replaces the old one (a library another process has mapped must not change under it)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except OSError as e:
        raise BuildError(f"export: cannot write {path}: {e.strerror or e}") from None
    return path


def _compile_llvm(func, meta_json: str | None, target, fmt: str):
    """The kernel through LLVM for a shared object: PIC, the default code model, helpers internal; with a
    `NAME__tensorlang_meta` function returning `meta_json` unless that is None."""
    import llvmlite.ir as ll

    from .codegen_llvm import I8, PTR, emit_module
    from .target import _lock, optimized_module, target_machine
    module = emit_module(func, vector_bits=target.vector_bits())
    public = (func.name, func.name + RELEASE_SUFFIX, func.name + INDEX_ERROR_SUFFIX)
    for f in module.functions:  # outlined parallel bodies are private to the library
        if f.name not in public and not f.is_declaration:
            f.linkage = "internal"
    if meta_json is not None:
        data = bytearray(meta_json.encode() + b"\0")
        gv = ll.GlobalVariable(module, ll.ArrayType(I8, len(data)), name=func.name + META_SUFFIX + "_json")
        gv.global_constant, gv.linkage = True, "private"
        gv.initializer = ll.Constant(ll.ArrayType(I8, len(data)), data)
        getter = ll.Function(module, ll.FunctionType(PTR, []), name=func.name + META_SUFFIX)
        b = ll.IRBuilder(getter.append_basic_block("entry"))
        b.ret(gv if gv.type == PTR else b.bitcast(gv, PTR))
    with _lock:
        tm = target_machine(target, "pic", "default")  # the JIT's code model would break a shared object
        mod = optimized_module(str(module), target, tm)
        if fmt == "ll":
            return str(mod)
        return tm.emit_assembly(mod) if fmt == "asm" else tm.emit_object(mod)


def _link(obj: bytes, directory: str, name: str, cc: list[str]) -> str:
    lib = os.path.join(directory, f"lib{name}.so")
    with tempfile.TemporaryDirectory(prefix="tensorlang-export-") as tmp:
        obj_path = os.path.join(tmp, name + ".o")
        with open(obj_path, "wb") as f:
            f.write(obj)
        out = os.path.join(tmp, os.path.basename(lib))
        cmd = [*cc, "-shared", "-fPIC", "-O2", "-o", out, obj_path, RUNTIME_C,
               f'-D{LIBRARY_KERNEL.upper()}="{name}"', "-lpthread", "-lm"]
        if sys.platform.startswith("linux"):
            cmd += ["-Wl,-Bsymbolic", "-Wl,-z,noexecstack"]  # calls inside the library stay inside it
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except OSError as e:
            raise BuildError(f"export: cannot run the C compiler {cc[0]}: {e}") from None
        if r.returncode != 0:
            raise BuildError(f"export: linking {lib} failed:\n  {shlex.join(cmd)}\n{r.stderr.strip()}")
        with open(out, "rb") as f:
            return _write(lib, f.read())


def _c_string(text: str, indent: str = "    ") -> str:
    """`text` as adjacent C string literals, 96 characters a line (non-ASCII as octal escapes)."""
    lines, cur = [], ""
    for byte in text.encode():
        ch = chr(byte)
        piece = ("\\" + ch if ch in '"\\?' else ch) if 32 <= byte < 127 else \
            {10: "\\n", 9: "\\t"}.get(byte, f"\\{byte:03o}")
        cur += piece
        if len(cur) >= 96 or byte == 10:
            lines.append(cur)
            cur = ""
    if cur or not lines:
        lines.append(cur)
    return "\n".join(f'{indent}"{line}"' for line in lines)


def _c_meta_function(name: str, meta_json: str) -> str:
    return (f"/* tensorlang metadata (program, sizes, schedule, buffers, target) for tensorlang.load() */\n"
            f"const char *{name}{META_SUFFIX}(void);\n"
            f"const char *{name}{META_SUFFIX}(void) {{\n  return\n{_c_string(meta_json)};\n}}\n")


def _comment(text: str) -> str:
    return text.replace("*/", "* /")


def _c_var(name: str) -> str:
    """A buffer name as a C variable (a keyword or a name the example uses gets a trailing _)."""
    return name + "_" if name in _C_KEYWORDS or name in _C_TAKEN or name.startswith("tl_") else name


def build_command(meta: dict, fmt: str) -> str:
    """The shell command, run in the export directory, that builds NAME_example from the files of format `fmt`;
    `meta` needs only "name" and, for format "c", "parallel" (which adds -fopenmp).

    >>> build_command({"name": "scale", "parallel": False}, "o")
    'cc -O2 -o scale_example scale_example.c scale.o tensorlang_runtime.c -lpthread -lm'
    """
    n = meta["name"]
    if fmt == "so":
        rpath = "@loader_path" if sys.platform == "darwin" else "'$ORIGIN'"
        return f"cc -O2 -o {n}_example {n}_example.c -L. -l{n} -Wl,-rpath,{rpath}"
    if fmt == "c":
        from .codegen_c import CFLAGS  # the flags the C backend compiles with
        omp = " -fopenmp" if meta["parallel"] else ""
        return f"cc {' '.join(CFLAGS)}{omp} -o {n}_example {n}_example.c {n}.c -lm"
    kernel, cc = {"o": (f"{n}.o", "cc"), "asm": (f"{n}.s", "cc"), "ll": (f"{n}.ll", "clang")}[fmt]
    return f"{cc} -O2 -o {n}_example {n}_example.c {kernel} tensorlang_runtime.c -lpthread -lm"


def _buffer_lines(meta: dict) -> list[str]:
    rows = [("input", b) for b in meta["inputs"]] + [("output", b) for b in meta["outputs"]]
    width = max(len(b["name"]) for _, b in rows)
    out = []
    for role, b in rows:
        count = int(np.prod(b["shape"], dtype=np.int64))
        nbytes = count * DTYPES[b["dtype"]].itemsize
        out.append(f"{b['name']:<{width}}  {role:<6}  {b['dtype']} ({C_TYPES[b['dtype']]})  shape "
                   f"[{', '.join(map(str, b['shape']))}]  {count} elements, {nbytes} bytes")
    return out


def _gather_lines(meta: dict) -> list[str]:
    """One line per gathered index of the program (`E[ids[t], d]`), by the number a kernel reports it with."""
    from .bind import bind
    from .parse import parse
    from .program import gather_sites
    op = parse(meta["source"])
    shapes = bind(op, meta["sizes"]).shapes
    return [f"  {k}: dimension {g.dim} of {g.tensor} (size {shapes[g.tensor][g.dim]}), read by stage {g.stage}: "
            f"{g.tensor}[{', '.join(str(ix) for ix in g.access.indices)}]" for k, g in enumerate(gather_sites(op))]


def _prototype(meta: dict) -> str:
    args = [f"const {C_TYPES[b['dtype']]} *TENSORLANG_RESTRICT {_c_var(b['name'])}" for b in meta["inputs"]]
    args += [f"{C_TYPES[b['dtype']]} *TENSORLANG_RESTRICT {_c_var(b['name'])}" for b in meta["outputs"]]
    return f"int32_t {meta['name']}({', '.join(args)});"


def header(meta: dict, fmt: str, command: str | None = None) -> str:
    """The text of NAME.h: include guard, prototype, and a comment on buffers, sizes, schedule and threads;
    `command`, when given, is the command line that made the files.

    >>> import tensorlang as tl
    >>> from tensorlang.target import host_target
    >>> s = tl.schedule(tl.op("def scale(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0"), N=8)
    >>> meta = metadata(s, s.lowered(), host_target(), "llvm")
    >>> [line for line in header(meta, "ll").splitlines() if "Sizes" in line]
    [' * Sizes (fixed at export): N=8']
    """
    n, sizes = meta["name"], ", ".join(f"{k}={v}" for k, v in meta["sizes"].items())
    sched = meta["schedule_python"]
    if not meta["parallel"]:
        threads = "Threads: no parallel loop; the kernel runs on the calling thread and is reentrant."
    elif meta["backend"] == "c":
        threads = ("Threads: parallel loops are OpenMP `parallel for` loops (build with -fopenmp); OMP_NUM_THREADS\n"
                   "sets the thread count.")
    else:
        threads = ("Threads: parallel loops run on a pool of TENSORLANG_NUM_THREADS threads (read at each call;\n"
                   "default: the CPUs this process may use), started on the first call. Calls from several\n"
                   "threads at once are safe (their parallel loops take turns).")
    made = {"c": "C source from tensorlang's C backend", "so": "a shared library (LLVM, PIC)",
            "o": "an object file (LLVM, PIC; link tensorlang_runtime.c with it)", "ll": "LLVM IR",
            "asm": "assembly (LLVM)"}[fmt]
    t = meta["target"]
    lines = [f"{n}.h: a tensorlang kernel exported ahead of time (tensorlang {meta['version']}),", f"as {made}."]
    if command:
        lines += ["", f"  {command}"]
    lines += ["", "Program:"] + ["  " + line for line in meta["source"].strip("\n").splitlines()]
    lines += [f"Sizes (fixed at export): {sizes}", f"Schedule:{' ' + meta['note'] + ':' if meta['note'] else ''}"]
    lines += ["  " + line for line in sched.splitlines()]
    lines += [f"Target: {t['triple']}, CPU {t['cpu']}, with that CPU's features (AVX-512 and so on): run it on a",
              "CPU that has them all (tensorlang.load() checks).", "",
              "Arguments: the inputs, then the outputs. Each is a pointer to the first element of a dense row-major",
              "(C-order) array without padding: element [i0][i1]...[ik] of shape [d0, d1, ..., dk] is at offset",
              "((i0*d1 + i1)*d2 + ...)*dk + ik. Any alignment of the element type works. Inputs are only read;",
              "outputs are overwritten entirely and must not overlap the inputs or each other (restrict)."]
    lines += ["  " + line for line in _buffer_lines(meta)]
    sites = _gather_lines(meta)
    lines += ["", "Returns 0 on success, 1 if a temporary buffer could not be allocated, or 2 if an index read from",
              f"a tensor was out of its dimension (the outputs are then unspecified; {n}{INDEX_ERROR_SUFFIX} tells",
              "which)." + (" The gathered indices, by number:" if sites else "")] + sites
    lines += [threads, "", "Build and run the example program, in this directory:",
              f"  {build_command(meta, fmt)}", f"  ./{n}_example"]
    guard = f"TENSORLANG_{n.upper()}_H"
    lines = [part for line in lines for part in line.split("\n")]
    body = "\n".join(" *" + (" " + _comment(line) if line else "") for line in lines)
    return f"""/*
{body}
 */
#ifndef {guard}
#define {guard}

#include <stdint.h>

#ifndef TENSORLANG_RESTRICT
#ifdef __cplusplus
#define TENSORLANG_RESTRICT __restrict
#else
#define TENSORLANG_RESTRICT restrict
#endif
#endif

#ifdef __cplusplus
extern "C" {{
#endif

{_prototype(meta)}

/* Frees the temporary buffers of 64 KiB or more that {n} keeps from one call to the next (a later call allocates
   them again); also run when the library is unloaded. */
void {n}{RELEASE_SUFFIX}(void);

/* After a call of {n} that returned 2: the number of the gathered index that was out of range (listed above;
   -1 if none) and, at *value when not NULL, the value. It tells of the last call that failed so. */
int64_t {n}{INDEX_ERROR_SUFFIX}(int64_t *value);

/* JSON that describes the kernel (program, sizes, schedule, buffers, target); tensorlang.load() reads it. */
const char *{n}{META_SUFFIX}(void);

#ifdef __cplusplus
}}
#endif

#endif /* {guard} */
"""


def example(meta: dict, fmt: str) -> str:
    """The text of NAME_example.c: fill the inputs as `example_inputs` does, call the kernel, print a checksum and
    the first values of each output, write the outputs to argv[1] if given; exit 1 if the kernel fails.

    >>> import tensorlang as tl
    >>> from tensorlang.target import host_target
    >>> s = tl.schedule(tl.op("def scale(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0"), N=8)
    >>> meta = metadata(s, s.lowered(), host_target(), "llvm")
    >>> [line.strip() for line in example(meta, "ll").splitlines() if "tl_status = " in line]
    ['int32_t tl_status = scale(X, Y);']
    """
    n = meta["name"]
    alloc, fill, show, dump, free = [], [], [], [], []
    for i, b in enumerate(meta["inputs"] + meta["outputs"]):
        v, ct = _c_var(b["name"]), C_TYPES[b["dtype"]]
        count = int(np.prod(b["shape"], dtype=np.int64))
        alloc.append(f"    {ct} *{v} = tl_alloc({count}, sizeof({ct}));")
        free.append(f"    free({v});")
        if i < len(meta["inputs"]):
            value = f"((tl_i * 37 + {101 * i}) % 23 - 11)"
            value = f"({ct})({value}) / 8" if DTYPES[b["dtype"]].is_float else f"({ct}){value}"
            fill.append(f"    for (int64_t tl_i = 0; tl_i < {count}; tl_i++)\n        {v}[tl_i] = {value};")
            continue
        d = DTYPES[b["dtype"]]
        kind = 1 if d.is_float else 2 if d.is_unsigned or d.name == "bool" else 0
        show.append(f'    tl_show("{b["name"]}", "[{", ".join(map(str, b["shape"]))}]", {v}, {count}, {kind}, '
                    f"sizeof({ct}));")
        dump.append(f"        ok = ok && fwrite({v}, sizeof({ct}), {count}, tl_f) == {count};")
    sizes = ", ".join(f"{k}={v}" for k, v in meta["sizes"].items())
    args = ", ".join(_c_var(b["name"]) for b in meta["inputs"] + meta["outputs"])
    return f"""/* {n}_example.c: calls the tensorlang kernel {n} (see {n}.h) on deterministic inputs.
 *
 * Build and run, in this directory:
 *   {build_command(meta, fmt)}
 *   ./{n}_example [OUTPUT_FILE]
 *
 * Input number b (in argument order), element i (row-major), is ((37*i + 101*b) % 23 - 11) / 8 (integers: no
 * division); tensorlang.export.example_inputs() makes the same arrays in numpy. The program prints, for each
 * output, the sum of its elements and its first values, and with OUTPUT_FILE also writes the outputs there (raw,
 * in argument order, native byte order). It returns 0, or 1 if the kernel fails.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "{n}.h"

static void *tl_alloc(size_t count, size_t size) {{
    void *p = malloc(count * size);
    if (!p) {{
        fprintf(stderr, "{n}_example: out of memory\\n");
        exit(2);
    }}
    return p;
}}

/* kind: 1 float, 2 unsigned integer (or bool), 0 signed integer */
static void tl_show(const char *name, const char *shape, const void *data, int64_t count, int kind, size_t size) {{
    double sum = 0, first[4];
    for (int64_t i = 0; i < count; i++) {{
        double x = kind == 1 ? (size == 4 ? ((const float *)data)[i] : ((const double *)data)[i])
                 : kind == 2 ? (size == 1 ? ((const uint8_t *)data)[i] : size == 2 ? ((const uint16_t *)data)[i]
                    : size == 4 ? ((const uint32_t *)data)[i] : (double)((const uint64_t *)data)[i])
                 : (size == 1 ? ((const int8_t *)data)[i] : size == 2 ? ((const int16_t *)data)[i]
                    : size == 4 ? ((const int32_t *)data)[i] : (double)((const int64_t *)data)[i]);
        sum += x;
        if (i < 4)
            first[i] = x;
    }}
    printf("%s: shape %s, sum %.9g, first", name, shape, sum);
    for (int64_t i = 0; i < count && i < 4; i++)
        printf(" %.9g", first[i]);
    printf("\\n");
}}

int main(int argc, char **argv) {{
{chr(10).join(alloc)}
{chr(10).join(fill)}

    struct timespec tl_t0, tl_t1;
    clock_gettime(CLOCK_MONOTONIC, &tl_t0);
    int32_t tl_status = {n}({args});
    clock_gettime(CLOCK_MONOTONIC, &tl_t1);
    if (tl_status == 2) {{
        int64_t tl_value = 0, tl_site = {n}{INDEX_ERROR_SUFFIX}(&tl_value);
        fprintf(stderr, "{n} failed: index %lld of gathered index %lld (see {n}.h) is out of range\\n",
                (long long)tl_value, (long long)tl_site);
        return 1;
    }}
    if (tl_status != 0) {{
        fprintf(stderr, "{n} failed with status %d: a temporary buffer could not be allocated\\n", (int)tl_status);
        return 1;
    }}
    printf("{n}({sizes}) ran in %.3f ms\\n",
           (tl_t1.tv_sec - tl_t0.tv_sec) * 1e3 + (tl_t1.tv_nsec - tl_t0.tv_nsec) * 1e-6);
{chr(10).join(show)}
    if (argc > 1) {{
        FILE *tl_f = fopen(argv[1], "wb");
        int ok = tl_f != NULL;
{chr(10).join(dump)}
        if (!tl_f || fclose(tl_f) != 0 || !ok) {{
            perror(argv[1]);
            return 2;
        }}
    }}
{chr(10).join(free)}
    return 0;
}}
"""


def example_inputs(what) -> list[np.ndarray]:
    """The inputs NAME_example.c makes, as numpy arrays: input b, element i is ((37*i + 101*b) % 23 - 11) / 8.

    `what` is a Kernel, a Schedule or a library's metadata dict.

    >>> import tensorlang as tl
    >>> s = tl.schedule(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]"), N=3)
    >>> example_inputs(s)[0].tolist()
    [-1.375, 0.375, -0.75]
    """
    if isinstance(what, dict):
        specs = [(b["shape"], DTYPES[b["dtype"]]) for b in what["inputs"]]
    elif hasattr(what, "input_shapes"):
        by_numpy = {d.numpy: d for d in DTYPES.values()}
        specs = [(what.input_shapes[n], by_numpy[np.dtype(what.input_dtypes[n])]) for n in what.input_shapes]
    else:
        specs = [(what.bound.shapes[p.name], DTYPES[p.dtype]) for p in what.op.params]
    out = []
    for b, (shape, dt) in enumerate(specs):
        v = (np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64) * 37 + 101 * b) % 23 - 11
        out.append((v / 8 if dt.is_float else v).astype(dt.numpy).reshape(shape))
    return out


def read_library(path, name: str | None = None):
    """Open a shared library made by `export` with ctypes; return (path, CDLL, metadata dict), or BuildError naming
    the file. `path` is the .so file or a directory holding exactly one; `name` is the kernel's name when the
    library does not say (one linked by hand from format "o" or "c": default, the file name without lib and .so).

    Example::

        kernel = tl.build(tl.op("def scale(X: f32[N]) -> Y:\n    Y[i] = X[i] * 2.0"), N=8)
        kernel.export("out", format="so")       # writes out/libscale.so (links with the C compiler)
        path, lib, meta = read_library("out")    # ('out/libscale.so', <CDLL ...>, {'name': 'scale', ...})
    """
    import ctypes
    path = os.fspath(path)
    if os.path.isdir(path):
        libs = sorted(f for f in os.listdir(path) if f.endswith(".so"))
        if len(libs) != 1:
            found = f"found {', '.join(libs)}" if libs else "found none"
            raise BuildError(f"load: {path} is a directory; pass the .so file to load ({found})")
        path = os.path.join(path, libs[0])
    if not os.path.isfile(path):
        raise BuildError(f"load: no such file {path}")
    try:
        lib = ctypes.CDLL(os.path.abspath(path))
    except OSError as e:
        raise BuildError(f"load: {path} is not a shared library this process can load: {e}") from None
    if name is None:
        if hasattr(lib, LIBRARY_KERNEL):
            getter = getattr(lib, LIBRARY_KERNEL)
            getter.restype = ctypes.c_char_p
            name = getter().decode()
        else:
            name = os.path.basename(path).split(".so")[0]
            name = name[3:] if name.startswith("lib") else name
    try:
        getter = getattr(lib, name + META_SUFFIX)
    except AttributeError:
        raise BuildError(f"load: {path} is not a tensorlang library (it has no {name}{META_SUFFIX} function); "
                         "make one with `tensorlang export` or kernel.export()") from None
    getter.restype = ctypes.c_char_p
    try:
        meta = json.loads(getter().decode())
        if meta.get("tensorlang_export") != META_FORMAT:
            raise UsageError(f"metadata format {meta.get('tensorlang_export')!r}, expected {META_FORMAT}")
        if not hasattr(lib, meta["name"]):
            raise UsageError(f"no function {meta['name']}")
    except (ValueError, KeyError, AttributeError, UnicodeDecodeError) as e:
        raise BuildError(f"load: {path} has unreadable tensorlang metadata ({e}); export it again with this "
                         "tensorlang version") from None
    return path, lib, meta


def check_cpu(meta: dict, path: str, host) -> None:
    """BuildError if the library at `path` (its metadata `meta`) needs CPU features that the `host` Target lacks
    (calling it could crash the process).

    >>> from tensorlang.target import Target
    >>> meta = {"target": {"cpu": "sapphirerapids", "features": "+avx2,+avx512f"}}
    >>> check_cpu(meta, "libscale.so", Target("x86_64-unknown-linux-gnu", "haswell", "+avx2,-avx512f"))
    Traceback (most recent call last):
    ...
    tensorlang.errors.BuildError: load: libscale.so was compiled for the CPU sapphirerapids, and this CPU (haswell)
    lacks its features avx512f; export it again on this machine
    """
    wanted = {f[1:] for f in meta["target"]["features"].split(",") if f.startswith("+")}
    have = {f[1:] for f in host.features.split(",") if f.startswith("+")}
    missing = sorted(wanted - have)
    if missing:
        raise BuildError(f"load: {path} was compiled for the CPU {meta['target']['cpu']}, and this CPU "
                         f"({host.cpu}) lacks its features {', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''}"
                         "; export it again on this machine")
