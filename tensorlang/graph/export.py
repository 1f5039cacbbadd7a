"""Whole-model export: one shared library (or one C source) for the whole network, with a header and an example C
program, the weights embedded (or in a side file), the arena allocated once per model handle.

``model.export(DIR, format="so")`` writes ``libNAME.so`` (every kernel through LLVM, PIC, the same schedules as the
model's kernels, linked with a driver that runs them in order over the planned arena, the C thread pool, and the
weights embedded with ``.incbin``), ``NAME.h`` and ``NAME_example.c``; ``format="c"`` writes ``NAME.c`` (every kernel
from the C backend, and the driver) and ``NAME.weights`` (the constants, read by ``NAME_create``). The C API::

    NAME_model *NAME_create(const char *weights_path);   /* NULL: the embedded weights (format so) */
    int32_t NAME(NAME_model *m, const float *x, ..., float *y, ...);   /* inputs, then outputs: 0 on success */
    void NAME_destroy(NAME_model *m);

A handle owns its arena (allocated once, in `NAME_create`); use one handle per thread. `tl.load(DIR)` reads a
library back as a model that numpy arrays go through, with a pool of handles (safe from several threads).

Example::

    files = model.export("out", format="so")    # {'library': 'out/libmnist.so', 'header': ..., 'example': ...}
    m2 = tl.load("out")                          # numpy in, numpy out, no Python compiler involved
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading

import numpy as np

from ..codegen_llvm import INDEX_ERROR_SUFFIX
from ..errors import BuildError
from ..export import (
    META_FORMAT,
    META_SUFFIX,
    RUNTIME_C,
    _c_string,
    _comment,
    _write,
    check_format,
    check_name,
    output_directory,
)
from .ir import DTYPES, STORAGE

C_TYPES = {"f32": "float", "f64": "double", "i32": "int32_t", "i64": "int64_t", "u8": "uint8_t", "i8": "int8_t",
           "i16": "int16_t"}
WEIGHTS_MAGIC = b"TLWEIGHT"
ALIGN = 64


def _weights_blob(model) -> tuple[bytes, list[int]]:
    """The constants as one blob (64-byte aligned each, after a 16-byte header: magic and payload size)."""
    parts, offsets, at = [], [], 0
    for c in model.constants:
        pad = (-at) % ALIGN
        parts.append(b"\0" * pad)
        at += pad
        offsets.append(at)
        data = np.ascontiguousarray(c).tobytes()
        parts.append(data)
        at += len(data)
    payload = b"".join(parts)
    return WEIGHTS_MAGIC + len(payload).to_bytes(8, "little") + b"\0" * 48 + payload, offsets


def _ctype(dtype: str) -> str:
    return C_TYPES[STORAGE[dtype]]


def metadata(model, name: str, fmt: str, weights: str, target) -> dict:
    """What the library says about itself (`NAME__tensorlang_meta()`): the model's inputs, outputs, structure,
    arena, weights and target.

    >>> from tensorlang.graph import compile_graph
    >>> from tensorlang.graph.ir import Graph, TensorType
    >>> from tensorlang.target import host_target
    >>> g = Graph("m"); x = g.add_input("x", TensorType((2,), "f32"))
    >>> g.outputs = [g.add_node("relu", [x], {}, [TensorType((2,), "f32")]).outputs[0]]
    >>> metadata(compile_graph(g), "m", "so", "embed", host_target())["inputs"]
    [{'name': 'x', 'dtype': 'f32', 'shape': [2]}]
    """
    import tensorlang
    g = model.graph
    return {"tensorlang_export": META_FORMAT, "kind": "model", "version": tensorlang.__version__, "name": name,
            "graph": g.name, "backend": "c" if fmt == "c" else "llvm", "weights": weights,
            "inputs": [{"name": v.name, "dtype": v.dtype, "shape": list(v.shape)} for v in g.inputs],
            "outputs": [{"name": v.name, "dtype": v.dtype, "shape": list(v.shape)} for v in g.outputs],
            "input_spec": g.input_spec, "output_spec": g.output_spec, "arena_bytes": model.plan.arena_bytes,
            "kernels": len(model.steps), "gathers": _gathers(model),
            "target": {"triple": target.triple, "cpu": target.cpu, "features": target.features}}


def _gathers(model) -> dict:
    """{kernel call number: {"node": where, "program": DSL text}} for the calls whose program reads through an
    index (the ones that may fail with an IndexError), so that a loaded library names the node and the read."""
    import tensorlang as tl

    from ..program import gather_sites
    from .model import _where, tensor_names
    return {str(k): {"node": _where(s.node), "program": s.program.text, "tensors": tensor_names(s.program)}
            for k, s in enumerate(model.steps) if gather_sites(tl.op(s.program.text))}


def _kernel_funcs(model, name: str):
    """For each distinct program: its C name and lowered function (the model's own schedule), in step order."""
    import dataclasses

    import tensorlang as tl
    funcs: list[tuple] = []
    names: dict[str, str] = {}
    for step in model.steps:
        if step.program.text in names:
            continue
        cname = f"{name}__k{len(funcs)}"
        names[step.program.text] = cname
        func = tl.Schedule.from_json(step.kernel.schedule_json).lowered()
        funcs.append((cname, dataclasses.replace(func, name=cname), len(step.program.inputs)))
    return funcs, names


def _driver(model, name: str, names: dict, offsets: list[int], funcs, fmt: str, weights: str) -> str:
    """The C code that creates a handle, runs every kernel over the arena and frees the handle."""
    g, plan = model.graph, model.plan
    n_in, n_out = len(g.inputs), len(g.outputs)
    protos = []
    for cname, func, n_inputs in funcs:
        args = [f"{'const ' if k < n_inputs else ''}{C_TYPES[p.dtype]} *a{k}" for k, p in enumerate(func.params)]
        protos.append(f"int32_t {cname}({', '.join(args)});")
        protos.append(f"int64_t {cname}{INDEX_ERROR_SUFFIX}(int64_t *value);")
    gathers = _gathers(model)
    cases = [f"    case {k}:\n        return {names[model.steps[int(k)].program.text]}{INDEX_ERROR_SUFFIX}(value);"
             for k in gathers]
    lines = []
    for call, step in enumerate(model.steps):
        args = []
        for base, off in step.args:
            if base == 0:
                args.append(f"m->arena + {off}")
            elif base <= n_in:
                args.append(f"(unsigned char *)in[{base - 1}]")
            elif base <= n_in + n_out:
                args.append(f"(unsigned char *)out[{base - 1 - n_in}]")
            else:
                args.append(f"(unsigned char *)(m->weights + {offsets[base - 1 - n_in - n_out]})")
        what = step.node.op if step.node.body is None else step.node.attrs["name"]
        lines.append(f"    /* {step.node.name}: {what} */")
        lines.append(f"    if ((tl_status = {names[step.program.text]}({', '.join(f'(void *)({a})' for a in args)})) "
                     f"!= 0) {{\n        m->failed = {call};\n        return tl_status;\n    }}")
    for k in plan.copies:
        v = g.outputs[k]
        loc = plan.locations[v.uid]
        src = {"arena": f"m->arena + {loc.offset}", "input": f"(const unsigned char *)in[{loc.index}]",
               "output": f"(const unsigned char *)out[{loc.index}]",
               "const": f"m->weights + {offsets[loc.index] if loc.kind == 'const' else 0}"}[loc.kind]
        lines.append(f"    memcpy(out[{k}], {src}, {v.type.nbytes});")
    params = [f"const {_ctype(v.dtype)} *x{k}" for k, v in enumerate(g.inputs)] + \
             [f"{_ctype(v.dtype)} *y{k}" for k, v in enumerate(g.outputs)]
    embedded = weights == "embed"
    if embedded:
        null_case = f"        m->weights = {name}__weights + 64;\n        return m;"
    else:
        null_case = (f'        fprintf(stderr, "{name}_create: this model keeps its weights in a file; pass its '
                     f'path\\n");\n        {name}_destroy(m);\n        return NULL;')
    return f"""
/* ---- the model: {len(model.steps)} kernel calls over an arena of {plan.arena_bytes} bytes ---- */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

{chr(10).join(protos)}

void {name}_destroy({name}_model *m);

struct {name}_model {{
    unsigned char *arena;            /* {plan.arena_bytes} bytes, allocated once */
    unsigned char *owned;            /* the weights read from a file, or NULL */
    const unsigned char *weights;    /* the constants (after the 64-byte header) */
    int32_t failed;                  /* the kernel call whose nonzero status the last run returned, or -1 */
}};

{"extern const unsigned char " + name + "__weights[];" if embedded else ""}

static void *{name}__aligned(size_t bytes) {{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
        return NULL;
    return p;
}}

{name}_model *{name}_create(const char *weights_path) {{
    {name}_model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->arena = {name}__aligned({plan.arena_bytes});
    if (!m->arena) {{
        free(m);
        return NULL;
    }}
    if (weights_path == NULL) {{
{null_case}
    }}
    FILE *f = fopen(weights_path, "rb");
    unsigned char head[64];
    if (!f || fread(head, 1, 64, f) != 64 || memcmp(head, "TLWEIGHT", 8) != 0) {{
        fprintf(stderr, "{name}_create: %s is not a tensorlang weights file\\n", weights_path);
        if (f)
            fclose(f);
        {name}_destroy(m);
        return NULL;
    }}
    unsigned long long size = 0;
    for (int i = 7; i >= 0; i--)
        size = (size << 8) | head[8 + i];
    if (size != {len(_weights_blob(model)[0]) - 64}ULL || !(m->owned = {name}__aligned((size_t)size)) ||
            fread(m->owned, 1, (size_t)size, f) != size) {{
        fprintf(stderr, "{name}_create: cannot read the weights in %s\\n", weights_path);
        fclose(f);
        {name}_destroy(m);
        return NULL;
    }}
    fclose(f);
    m->weights = m->owned;
    return m;
}}

void {name}_destroy({name}_model *m) {{
    if (!m)
        return;
    free(m->arena);
    free(m->owned);
    free(m);
}}

int32_t {name}({name}_model *m, {', '.join(params)}) {{
    const void *in[{max(n_in, 1)}] = {{{', '.join(f'x{k}' for k in range(n_in)) or '0'}}};
    void *out[{max(n_out, 1)}] = {{{', '.join(f'y{k}' for k in range(n_out))}}};
    int32_t tl_status;
    (void)in;
    m->failed = -1;
{chr(10).join(lines)}
    return 0;
}}

int32_t {name}_failed_call(const {name}_model *m) {{
    return m->failed;
}}

int64_t {name}{INDEX_ERROR_SUFFIX}(const {name}_model *m, int64_t *value) {{
    switch (m->failed) {{
{chr(10).join(cases)}
    default:
        return -1;
    }}
}}
"""


def _weights_asm(name: str, blob_path: str) -> str:
    return (f'    .section .rodata\n    .balign 64\n    .globl {name}__weights\n    .hidden {name}__weights\n'
            f'{name}__weights:\n    .incbin "{blob_path}"\n    .section .note.GNU-stack,"",@progbits\n')


def header(meta: dict, fmt: str, model) -> str:
    """NAME.h: the C API of the exported model, with its inputs, outputs, arena, weights and how to build.

    Example::

        text = header(metadata(model, "mnist", "so", "embed", host_target()), "so", model)
    """
    n = meta["name"]
    params = [f"const {_ctype(b['dtype'])} *x{k}" for k, b in enumerate(meta["inputs"])] + \
             [f"{_ctype(b['dtype'])} *y{k}" for k, b in enumerate(meta["outputs"])]
    rows = []
    for role, key, var in (("input", "inputs", "x"), ("output", "outputs", "y")):
        for k, b in enumerate(meta[key]):
            count = int(np.prod(b["shape"], dtype=np.int64))
            shape = ", ".join(map(str, b["shape"]))
            rows.append(f"  {var}{k}  {role:<6}  {b['dtype']} ({_ctype(b['dtype'])})  shape [{shape}]"
                        f"  ({b['name']}){'  bool as int32 0/1' if b['dtype'] == 'bool' else ''}  {count} elements")
    weights = ("the weights are embedded in the library: NAME_create(NULL)" if meta["weights"] == "embed" else
               f"the weights are in the file {n}.weights: NAME_create(\"path/to/{n}.weights\")").replace("NAME", n)
    text = [f"{n}.h: the model {meta['graph']} exported ahead of time by tensorlang {meta['version']}",
            f"({'one shared library (LLVM, PIC)' if fmt == 'so' else 'C source from the C backend'}), "
            f"{meta['kernels']} kernel calls.", "",
            "  " + f"{n}_model *m = {n}_create(NULL);   /* allocates the arena once; NULL if out of memory */",
            "  " + f"{n}(m, x0, ..., y0, ...);           /* 0 on success, 1 if a kernel's temporaries could not be "
                   f"allocated, 2 if an index read from a tensor was out of range ({n}{INDEX_ERROR_SUFFIX} tells "
                   "which) */",
            "  " + f"{n}_destroy(m);", "",
            f"Arena: {meta['arena_bytes']} bytes per handle. A handle is used by one thread at a time: give each "
            "thread its own.", f"Weights: {weights}.",
            "Arguments: dense row-major (C-order) arrays without padding; inputs are only read, outputs are "
            "written entirely.", *rows, "",
            f"Target: {meta['target']['triple']}, CPU {meta['target']['cpu']} and its features.", "",
            "Build and run the example program, in this directory:", f"  {build_command(n, fmt)}",
            f"  ./{n}_example"]
    body = "\n".join(" *" + (" " + _comment(line) if line else "") for line in text)
    guard = f"TENSORLANG_{n.upper()}_H"
    return f"""/*
{body}
 */
#ifndef {guard}
#define {guard}

#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

typedef struct {n}_model {n}_model;

{n}_model *{n}_create(const char *weights_path);
int32_t {n}({n}_model *m, {', '.join(params)});
void {n}_destroy({n}_model *m);
/* After {n} returned nonzero: the number of the kernel call (0, 1, ... in the order the model runs them) that
 * failed; -1 when the last run succeeded. */
int32_t {n}_failed_call(const {n}_model *m);
/* After {n} returned 2: the number of the gathered index that was out of range in the failing kernel's program
 * (the metadata's "gathers" holds each such program), its value stored at value; -1 otherwise. */
int64_t {n}{INDEX_ERROR_SUFFIX}(const {n}_model *m, int64_t *value);
/* JSON that describes the model (inputs, outputs, structure, arena, target); tensorlang.load() reads it. */
const char *{n}{META_SUFFIX}(void);

#ifdef __cplusplus
}}
#endif

#endif /* {guard} */
"""


def build_command(name: str, fmt: str) -> str:
    """The command, run in the export directory, that builds NAME_example.

    >>> build_command("mnist", "so")
    "cc -O2 -o mnist_example mnist_example.c -L. -lmnist -Wl,-rpath,'$ORIGIN'"
    """
    if fmt == "so":
        return f"cc -O2 -o {name}_example {name}_example.c -L. -l{name} -Wl,-rpath,'$ORIGIN'"
    from ..codegen_c import CFLAGS
    return f"cc {' '.join(CFLAGS)} -fopenmp -o {name}_example {name}_example.c {name}.c -lm"


def example(meta: dict, fmt: str) -> str:
    """NAME_example.c: makes the inputs as `tensorlang.export.example_inputs` does, runs the model once, prints
    each output's sum and first values, and writes the outputs to argv[1] if given.

    Example::

        text = example(metadata(model, "mnist", "so", "embed", host_target()), "so")
    """
    n = meta["name"]
    alloc, fill, show, dump = [], [], [], []
    bufs = [(f"x{k}", b, True) for k, b in enumerate(meta["inputs"])] + \
           [(f"y{k}", b, False) for k, b in enumerate(meta["outputs"])]
    for i, (var, b, is_in) in enumerate(bufs):
        ct = _ctype(b["dtype"])
        count = int(np.prod(b["shape"], dtype=np.int64))
        alloc.append(f"    {ct} *{var} = tl_alloc({count}, sizeof({ct}));")
        if is_in:
            value = f"((tl_i * 37 + {101 * i}) % 23 - 11)"
            value = f"({ct})({value}) / 8" if b["dtype"] in ("f32", "f64") else \
                f"({ct})({value} > 0)" if b["dtype"] == "bool" else f"({ct}){value}"
            fill.append(f"    for (int64_t tl_i = 0; tl_i < {count}; tl_i++)\n        {var}[tl_i] = {value};")
        else:
            kind = 1 if b["dtype"] in ("f32", "f64") else 2 if b["dtype"] == "u8" else 0  # float, unsigned, signed
            show.append(f'    tl_show("{b["name"]}", {var}, {count}, {kind}, sizeof({ct}));')
            dump.append(f"        ok = ok && fwrite({var}, sizeof({ct}), {count}, tl_f) == {count};")
    args = ", ".join(v for v, _, _ in bufs)
    weights = "NULL" if meta["weights"] == "embed" else f'"{n}.weights"'
    return f"""/* {n}_example.c: runs the tensorlang model {n} (see {n}.h) once on deterministic inputs.
 *
 * Build and run, in this directory:
 *   {build_command(n, fmt)}
 *   ./{n}_example [OUTPUT_FILE]
 *
 * Input number b, element i (row-major), is ((37*i + 101*b) % 23 - 11) / 8 (as tensorlang.export.example_inputs
 * makes them in numpy). Prints each output's sum and first values; with OUTPUT_FILE, writes the outputs there
 * (raw, in order, native byte order). Returns 0, or 1 if the model fails.
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

static void tl_show(const char *name, const void *data, int64_t count, int kind, size_t size) {{
    double sum = 0, first[4] = {{0, 0, 0, 0}};
    for (int64_t i = 0; i < count; i++) {{
        double x = kind == 1 ? (size == 4 ? ((const float *)data)[i] : ((const double *)data)[i])
                 : kind == 2 ? ((const uint8_t *)data)[i]
                 : (size == 1 ? ((const int8_t *)data)[i] : size == 2 ? ((const int16_t *)data)[i]
                    : size == 4 ? ((const int32_t *)data)[i] : (double)((const int64_t *)data)[i]);
        sum += x;
        if (i < 4)
            first[i] = x;
    }}
    printf("%s: sum %.9g, first", name, sum);
    for (int64_t i = 0; i < count && i < 4; i++)
        printf(" %.9g", first[i]);
    printf("\\n");
}}

int main(int argc, char **argv) {{
{chr(10).join(alloc)}
{chr(10).join(fill)}
    {n}_model *m = {n}_create({weights});
    if (!m)
        return 1;
    struct timespec tl_t0, tl_t1;
    clock_gettime(CLOCK_MONOTONIC, &tl_t0);
    int32_t tl_status = {n}(m, {args});
    clock_gettime(CLOCK_MONOTONIC, &tl_t1);
    if (tl_status == 2) {{
        int64_t tl_value = 0, tl_site = {n}{INDEX_ERROR_SUFFIX}(m, &tl_value);
        fprintf(stderr, "{n} failed: in kernel call %d, index %lld of gathered index %lld is out of range\\n",
                (int){n}_failed_call(m), (long long)tl_value, (long long)tl_site);
        return 1;
    }}
    if (tl_status != 0) {{
        fprintf(stderr, "{n} failed with status %d\\n", (int)tl_status);
        return 1;
    }}
    printf("{n} ran in %.3f ms\\n", (tl_t1.tv_sec - tl_t0.tv_sec) * 1e3 + (tl_t1.tv_nsec - tl_t0.tv_nsec) * 1e-6);
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
    {n}_destroy(m);
    return 0;
}}
"""


def _c_kernels(funcs) -> str:
    """Every kernel from the C backend in one translation unit: each kernel's helpers renamed apart."""
    from ..codegen_c import emit_c
    parts = []
    for k, (_, func, _) in enumerate(funcs):
        text = emit_c(func)
        text = re.sub(r"\btl_", f"tl_k{k}_", text)
        parts.append(text)
    return "\n".join(parts)


def export_model(model, path, format: str = "so", *, name: str | None = None, weights: str | None = None,
                 cc: str | None = None) -> dict[str, str]:
    """Write the whole model into the directory `path` (see the module's docstring); returns {role: file path}.

    `format` is "so" (default) or "c"; `weights` "embed" (format so only) or "file" (default: embed for so, file
    for c); `name` the C name (default: the model's name in lower case); `cc` the C compiler that links format so.

    Example::

        export_model(model, "out", format="c")   # out/mnist.c, out/mnist.weights, out/mnist.h, ...
    """
    from ..codegen_c import find_c_compiler
    from ..export import _compile_llvm
    from ..target import host_target
    if format not in ("so", "c"):
        check_format(format)
        raise BuildError(f"format {format!r}: a whole model exports as 'so' (a shared library) or 'c' (C source)")
    name = check_name(name if name is not None else re.sub(r"\W", "_", model.graph.name.lower()) or "model")
    weights = weights or ("embed" if format == "so" else "file")
    if weights not in ("embed", "file"):
        raise BuildError(f"weights={weights!r}: 'embed' (in the library) or 'file' (NAME.weights beside it)")
    if weights == "embed" and format == "c":
        raise BuildError("weights='embed' needs format 'so'; C source reads its weights from NAME.weights")
    directory = output_directory(path)
    target = host_target()
    blob, offsets = _weights_blob(model)
    funcs, names = _kernel_funcs(model, name)
    meta = metadata(model, name, format, weights, target)
    meta_json = json.dumps(meta)
    driver = _driver(model, name, names, offsets, funcs, format, weights)
    meta_fn = (f"/* what tensorlang.load() reads */\nconst char *{name}{META_SUFFIX}(void);\n"
               f"const char *{name}{META_SUFFIX}(void) {{\n  return\n{_c_string(meta_json)};\n}}\n")
    files: dict[str, str] = {}
    out = os.path.join(directory, name)
    if weights == "file":
        files["weights"] = _write(out + ".weights", blob)
    head = f'#define _POSIX_C_SOURCE 200112L\n#include <stdint.h>\n#include "{name}.h"\n'
    files["header"] = _write(out + ".h", header(meta, format, model))
    if format == "c":
        source = (f"/* {name}.c: the model {model.graph.name}, exported by tensorlang: {len(funcs)} kernels "
                  f"(C backend) and the driver that runs them. */\n")
        source += _c_kernels(funcs) + "\n" + head + driver + "\n" + meta_fn
        files["source"] = _write(out + ".c", source)
    else:
        compiler = find_c_compiler(cc)
        with tempfile.TemporaryDirectory(prefix="tensorlang-model-") as tmp:
            objects = []
            for cname, func, _ in funcs:
                obj = os.path.join(tmp, cname + ".o")
                with open(obj, "wb") as f:
                    f.write(_compile_llvm(func, None, target, "o"))
                objects.append(obj)
            driver_c = os.path.join(tmp, f"{name}_driver.c")
            with open(driver_c, "w") as f:
                f.write(head + driver + "\n" + meta_fn)
            sources = [driver_c]
            if weights == "embed":
                blob_path = os.path.join(tmp, f"{name}.weights")
                with open(blob_path, "wb") as f:
                    f.write(blob)
                asm = os.path.join(tmp, f"{name}_weights.s")
                with open(asm, "w") as f:
                    f.write(_weights_asm(name, blob_path))
                sources.append(asm)
            lib_tmp = os.path.join(tmp, f"lib{name}.so")
            cmd = [*compiler, "-shared", "-fPIC", "-O2", f"-I{directory}", "-o", lib_tmp, *sources, *objects,
                   RUNTIME_C, f'-DTENSORLANG_LIBRARY_KERNEL="{name}"', "-lpthread", "-lm"]
            if sys.platform.startswith("linux"):
                cmd += ["-Wl,-Bsymbolic", "-Wl,-z,noexecstack"]
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            except OSError as e:
                raise BuildError(f"export: cannot run the C compiler {compiler[0]}: {e}") from None
            if r.returncode != 0:
                raise BuildError(f"export: linking lib{name}.so failed:\n  {shlex.join(cmd)}\n{r.stderr.strip()}")
            with open(lib_tmp, "rb") as f:
                files["library"] = _write(os.path.join(directory, f"lib{name}.so"), f.read())
    files["example"] = _write(out + "_example.c", example(meta, format))
    return files


class LoadedModel:
    """A model exported as a shared library (`tl.load` returns one): numpy arrays in the model's input structure,
    numpy arrays out, with the same checks as a `tl.Model`; a pool of handles makes calls from several threads
    safe."""

    def __init__(self, path: str, lib, meta: dict):
        from .structure import flat_spec, leaf_paths
        self.path, self.metadata, self._lib = path, meta, lib
        n = meta["name"]
        self._create = getattr(lib, f"{n}_create")
        self._create.restype, self._create.argtypes = ctypes.c_void_p, [ctypes.c_char_p]
        self._destroy = getattr(lib, f"{n}_destroy")
        self._destroy.restype, self._destroy.argtypes = None, [ctypes.c_void_p]
        self._run = getattr(lib, n)
        self._run.restype = ctypes.c_int32
        self._run.argtypes = [ctypes.c_void_p] * (1 + len(meta["inputs"]) + len(meta["outputs"]))
        self._failed_call = getattr(lib, f"{n}_failed_call", None)  # none in libraries made before it was
        self._index_error = getattr(lib, f"{n}{INDEX_ERROR_SUFFIX}", None)
        if self._failed_call is not None and self._index_error is not None:
            self._failed_call.restype, self._failed_call.argtypes = ctypes.c_int32, [ctypes.c_void_p]
            self._index_error.restype, self._index_error.argtypes = ctypes.c_int64, [ctypes.c_void_p] * 2
        self.input_spec = meta.get("input_spec") or flat_spec(len(meta["inputs"]))
        self.output_spec = meta.get("output_spec")
        spec = self.input_spec
        self._paths = (leaf_paths(spec["items"][0]) + leaf_paths(spec["items"][1]) if spec.get("call")
                       else leaf_paths(spec))
        self._weights = None
        if meta["weights"] == "file":
            self._weights = os.path.join(os.path.dirname(path), f"{n}.weights").encode()
        self._handles: list[int] = []
        self._lock = threading.Lock()

    def _handle(self) -> int:
        with self._lock:
            if self._handles:
                return self._handles.pop()
        h = self._create(self._weights)
        if not h:
            raise BuildError(f"{self.path}: {self.metadata['name']}_create failed (out of memory, or the weights "
                             f"file {self._weights.decode() if self._weights else ''} is missing)")
        return h

    def __call__(self, *args, **kwargs):
        """Run the model (arguments as the original module took them)."""
        from .structure import flatten, unflatten
        spec = self.input_spec
        if spec.get("call"):
            leaves = flatten(spec["items"][0], tuple(args), "input") + flatten(spec["items"][1], kwargs, "input")
        else:
            leaves = flatten(spec, list(args) if spec["kind"] == "list" else tuple(args), "input")
        outs = self.run_flat(leaves)
        return unflatten(self.output_spec, outs) if self.output_spec else (outs[0] if len(outs) == 1 else
                                                                            tuple(outs))

    def run_flat(self, arrays: list) -> list[np.ndarray]:
        """Run on the flat list of inputs; returns the flat list of outputs."""
        from .model import check_inputs
        meta = self.metadata
        ins = check_inputs(meta["graph"], list(arrays), [(b["name"], b["dtype"], b["shape"]) for b in meta["inputs"]],
                           self._paths)
        outs = [np.empty(b["shape"], DTYPES[STORAGE.get(b["dtype"], b["dtype"])]) for b in meta["outputs"]]
        h = self._handle()
        try:
            status = self._run(h, *(a.ctypes.data for a in ins), *(o.ctypes.data for o in outs))
            if status != 0:
                raise self._error(h, status)
        finally:
            with self._lock:
                self._handles.append(h)
        return [o.astype(np.bool_) if b["dtype"] == "bool" else o for o, b in zip(outs, meta["outputs"])]

    def _error(self, h: int, status: int) -> Exception:
        """The exception for the nonzero `status` of a run on handle `h` (`tensorlang.runtime.status_error`),
        naming the node and the read whose index was out of range."""
        from types import SimpleNamespace
        from typing import cast

        import tensorlang as tl

        from ..program import Op
        from ..runtime import status_error
        from .model import index_error_message
        meta = self.metadata
        index_error = self._index_error
        if self._failed_call is None or index_error is None:  # a library has both or neither
            return status_error(SimpleNamespace(name=meta["name"]), status, None, dict)
        info = meta.get("gathers", {}).get(str(self._failed_call(h)))
        op = tl.op(info["program"]) if info else SimpleNamespace(name=meta["name"])
        # status_error asks for the shapes only of a program's gathered reads: `op` is an Op then
        err = status_error(op, status, lambda value: index_error(h, value),
                           lambda: tl.schedule(cast(Op, op)).bound.shapes)
        if info and isinstance(err, IndexError):
            return type(err)(index_error_message(meta["graph"], info["node"], info["tensors"], str(err)))
        return err

    def __del__(self):
        for h in getattr(self, "_handles", []):
            try:
                self._destroy(h)
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"<LoadedModel {self.metadata['graph']} from {self.path}>"
