"""Compiled kernels: `tl.build(...)` returns a `Kernel` that checks its numpy arguments and runs machine code.

>>> import numpy as np, tensorlang as tl
>>> k = tl.build(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=3)
>>> k(np.arange(3, dtype=np.float32)).tolist()
[0.0, 2.0, 4.0]
"""
from __future__ import annotations

import ctypes
import dataclasses
import functools
import itertools
import math
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from . import errors
from .codegen_llvm import INDEX_ERROR_STATUS, INDEX_ERROR_SUFFIX, emit_module
from .dtypes import DTYPES
from .errors import BuildError
from .ir import Func
from .program import Op, gather_sites
from .schedule import Schedule
from .symbolic import VERSION_SIZE, Dim, SymbolicRefusal, evaluate, is_symbolic, representative, size_name, size_source
from .symbolic_call import fast_call
from .target import MachineCode, Target, compile_ir, host_target, target_machine

if TYPE_CHECKING:
    from .graph.export import LoadedModel

CACHE_SIZE = 64
"""How many of the kernels most recently built or found :func:`build` keeps alive (about 1 MB each with its
LLVM engine). A kernel still referenced elsewhere is found by :func:`build` however many came after it."""

_recent: OrderedDict[tuple, Kernel] = OrderedDict()
_alive: weakref.WeakValueDictionary[tuple, Kernel] = weakref.WeakValueDictionary()
_cache_lock = threading.Lock()


def _cached(key: tuple) -> Kernel | None:
    """The kernel built for `key` if it is still alive, marked as most recently used (hold `_cache_lock`)."""
    kernel = _alive.get(key)
    if kernel is not None:
        _recent[key] = kernel
        _recent.move_to_end(key)
        while len(_recent) > CACHE_SIZE:
            _recent.popitem(last=False)
    return kernel


def clear_cache() -> None:
    """Forget the kernels :func:`build` keeps (kernels referenced elsewhere stay valid and are still found).

    >>> import tensorlang as tl
    >>> tl.clear_cache()
    """
    with _cache_lock:
        _recent.clear()


def _data_offset() -> int | None:
    """Where an ndarray's data pointer lies in its object: numpy's array struct puts it right after the object
    header, which CPython's ``id`` addresses. Probed on two arrays (one a view at an offset); None where this
    interpreter lays arrays out otherwise, and then :func:`data_address` asks ``a.ctypes.data``."""
    base = np.empty(4, np.float32)
    for off in (16, 32):
        if all(ctypes.c_void_p.from_address(id(a) + off).value == a.ctypes.data for a in (base, base[1:])):
            return off
    return None


_DATA_OFFSET = _data_offset()
_INDEX_ERROR_FN = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)
_from_address = ctypes.c_void_p.from_address


def status_error(op, status: int, index_error, shapes) -> Exception:
    """The exception for a kernel's nonzero `status`: MemoryError (1: a temporary buffer could not be allocated),
    or `tl.IndexError` (2: an index read from a tensor was out of range), whose details `index_error` gives (the
    kernel's `NAME_index_error` function, as a ctypes function of a pointer to an int64) and `shapes()` (the bound
    tensors' shapes) complete.

    >>> import tensorlang as tl
    >>> status_error(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]"), 1, None, dict)
    MemoryError('f: the kernel could not allocate its temporary buffers')
    """
    if status == 1:
        return MemoryError(f"{op.name}: the kernel could not allocate its temporary buffers")
    if status != INDEX_ERROR_STATUS:
        return BuildError(f"{op.name}: the kernel returned status {status}, which this tensorlang does not know")
    value = ctypes.c_int64(0)
    site = index_error(ctypes.byref(value)) if index_error is not None else -1
    sites = gather_sites(op) if isinstance(op, Op) else ()
    if not 0 <= site < len(sites):
        return errors.IndexError(f"{op.name}: an index read from a tensor was out of range (value {value.value}, "
                                 f"gathered index number {site})")
    g = sites[site]
    return errors.IndexError(g.message(op.name, value.value, shapes()[g.tensor][g.dim]))


def data_address(a: np.ndarray) -> int:
    """The address of ``a``'s first element, as ``a.ctypes.data`` but without building a ctypes object: a kernel
    call passes one per argument, and a small kernel runs in microseconds.

    >>> a = np.arange(4, dtype=np.float32)
    >>> data_address(a) == a.ctypes.data and data_address(a[1:]) == a.ctypes.data + 4
    True
    """
    if _DATA_OFFSET is None:
        return a.ctypes.data
    return _from_address(id(a) + _DATA_OFFSET).value or 0


class Kernel:
    """A compiled program for fixed sizes: call it with numpy arrays (inputs in parameter order).

    `k(*inputs)` returns the output (a tuple when there are several); `k(*inputs, out=arr)` fills `arr`.
    """

    def __init__(self, schedule: Schedule, func: Func, llvm_ir: str, engine, module_ref, target: Target,
                 compile_seconds: float, schedule_source: str = "given"):
        self.schedule = schedule
        self.schedule_source = schedule_source
        self.op: Op | SimpleNamespace = schedule.op  # its names only, where a library's program no longer parses
        self.func: Func | None = func  # None, and no IR or machine code here, for a kernel loaded from a library
        self.target = target
        self.compile_seconds = compile_seconds
        self._llvm_ir: str | None = llvm_ir
        self._engine: MachineCode | None = MachineCode(engine, func.name)  # keeps the code alive, frees its workspace
        self._module = module_ref
        bound = schedule.bound
        self.input_shapes = {p.name: bound.shapes[p.name] for p in self.op.params}
        self.output_shapes = {o: bound.shapes[o] for o in self.op.outputs}
        self.input_dtypes = {p.name: DTYPES[p.dtype].numpy for p in self.op.params}
        self.output_dtypes = {o: DTYPES[bound.dtypes[o]].numpy for o in self.op.outputs}
        n = len(func.params)
        self._fn = ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.c_void_p] * n),
                                    *([ctypes.c_int64] * len(func.sizes)))(self._engine.address)
        self._index_error: Any = _INDEX_ERROR_FN(engine.get_function_address(func.name + INDEX_ERROR_SUFFIX))
        self._set_specs()

    def _set_specs(self) -> None:
        """What a call checks, in parameter order (see the fast path of ``__call__``)."""
        self._in_specs = tuple((tuple(self.input_shapes[p]), np.dtype(self.input_dtypes[p])) for p in self.op.inputs)
        self._out_specs = tuple((tuple(self.output_shapes[o]), np.dtype(self.output_dtypes[o]))
                                for o in self.op.outputs)

    @property
    def sizes(self) -> dict:
        """The bound sizes."""
        return dict(self.schedule.sizes)

    def __call__(self, *inputs, out=None):
        if out is None and self._plain(inputs):
            try:  # the common call: checked in a few attribute reads per array
                outs = [np.empty(shape, dtype) for shape, dtype in self._out_specs]
            except MemoryError:
                outs = self._outputs(None, inputs)  # raises the error that names the output
        else:  # anything unusual (a subclass, a wrong shape or dtype, a strided view, out=): checked one by one
            names = self.op.inputs
            if len(inputs) != len(names):
                raise BuildError(f"{self.op.name}: expected {len(names)} input array{'s' if len(names) != 1 else ''}"
                                 f" ({', '.join(names)}), got {len(inputs)}")
            for name, a in zip(names, inputs):
                self._check(name, a, self.input_shapes[name], self.input_dtypes[name], "input")
            outs = self._outputs(out, inputs)
        status = self._fn(*map(data_address, inputs), *map(data_address, outs))
        if status != 0:
            raise status_error(self.op, status, self._index_error, lambda: self.schedule.bound.shapes)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _plain(self, inputs: tuple) -> bool:
        """Whether ``inputs`` are plain C-contiguous ndarrays of the expected shapes and dtypes, in number."""
        return len(inputs) == len(self._in_specs) and all(
            type(a) is np.ndarray and a.shape == shape and a.dtype == dtype and a.flags.c_contiguous
            for a, (shape, dtype) in zip(inputs, self._in_specs))

    def _new_output(self, name: str) -> np.ndarray:
        shape, dtype = self.output_shapes[name], np.dtype(self.output_dtypes[name])
        try:
            return np.empty(shape, dtype)
        except MemoryError:
            size = float(np.prod(shape, dtype=np.float64)) * dtype.itemsize
            raise MemoryError(f"{self.op.name}: cannot allocate the output {name}: {dtype.name}"
                              f"[{', '.join(map(str, shape))}], {size / 2**30:.3g} GiB") from None

    def _outputs(self, out, inputs) -> list[np.ndarray]:
        names = list(self.op.outputs)
        if out is None:
            return [self._new_output(n) for n in names]
        if len(names) == 1:
            outs = [out]  # one output: out= is that array
        elif isinstance(out, (tuple, list)) and len(out) == len(names):
            outs = list(out)
        else:
            got = f"{len(out)} items" if isinstance(out, (tuple, list)) else type(out).__name__
            raise BuildError(f"{self.op.name}: out= needs a tuple of {len(names)} arrays ({', '.join(names)}), "
                             f"got {got}")
        for name, o in zip(names, outs):
            self._check(name, o, self.output_shapes[name], self.output_dtypes[name], "output")
            if not o.flags.writeable:
                raise BuildError(f"{self.op.name}: output {name} (out=) is read-only")
            for iname, a in zip(self.op.inputs, inputs):
                if np.shares_memory(o, a):
                    raise BuildError(f"{self.op.name}: output {name} (out=) overlaps input {iname}; "
                                     "pass a separate array")
        return outs

    def _check(self, name, a, shape, dtype, role) -> None:
        where = f"{self.op.name}: {role} {name}"
        if not isinstance(a, np.ndarray):
            raise BuildError(f"{where} must be a numpy array, got {type(a).__name__}")
        if a.dtype != dtype:
            fix = (f"convert with {name}.astype(np.{dtype.name})" if role == "input" else
                   f"pass an array of that dtype, like np.empty({tuple(shape)}, np.{dtype.name})")
            raise BuildError(f"{where} has dtype {a.dtype}, expected {dtype}; {fix}")
        if a.shape != tuple(shape):
            raise BuildError(f"{where} has shape {a.shape}, expected {tuple(shape)} "
                             f"(sizes {', '.join(f'{k}={v}' for k, v in self.sizes.items())})")
        if not a.flags.c_contiguous:
            raise BuildError(f"{where} is not C-contiguous; pass np.ascontiguousarray({name})")

    def source(self, kind: str = "llvm") -> str:
        """The kernel as text: "ir" (loop IR), "llvm" (optimised LLVM IR), "llvm-unoptimized", "asm", or "c" (a
        C99 translation unit computing the same, see `tensorlang.codegen_c`)."""
        func, llvm_ir = self.func, self._llvm_ir
        assert func is not None and llvm_ir is not None  # a built kernel's (LoadedKernel has its own source())
        if kind == "ir":
            return str(func)
        if kind == "c":
            from .codegen_c import emit_c
            return emit_c(func)
        if kind == "llvm":
            return str(self._module)
        if kind == "llvm-unoptimized":
            return llvm_ir
        if kind == "asm":
            return target_machine(self.target).emit_assembly(self._module)
        raise BuildError(f"source(kind={kind!r}): kind is one of 'ir', 'llvm', 'llvm-unoptimized', 'asm', 'c'")

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"<Kernel {self.op.name}({sizes}) for {self.target.cpu}>"

    def export(self, path, format: str = "so", *, name: str | None = None, cc: str | None = None) -> dict:
        """Write the kernel ahead of time into the directory `path` (created if needed) as "so" (a shared
        library that `tl.load` reads back), "o", "c", "ll" or "asm", with NAME.h and NAME_example.c; returns
        {role: file path}. `name` is the C function's name (default: the program's). See tensorlang/export.py.

        >>> k.export("out")  # doctest: +SKIP
        {'library': 'out/libmatmul.so', 'header': 'out/matmul.h', 'example': 'out/matmul_example.c'}
        """
        from .export import export
        return export(self, path, format, name=name, cc=cc)


class SymbolicKernel(Kernel):
    """A kernel built for symbolic sizes (`tl.Dim`): each call reads the sizes from its inputs' shapes, checks
    they lie in range and agree across inputs, allocates the outputs for them and passes them to the code.

    >>> import numpy as np, tensorlang as tl
    >>> k = tl.build(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=tl.Dim(1, 100))
    >>> k(np.ones(3, np.float32)).tolist(), k(np.ones(5, np.float32)).shape
    ([2.0, 2.0, 2.0], (5,))
    """

    def __init__(self, schedule: Schedule, func: Func, llvm_ir: str, engine, module_ref, target: Target,
                 compile_seconds: float, schedule_source: str = "given", versions: tuple = ()):
        self.versions: tuple[SizeVersion, ...] = versions or (
            SizeVersion({n: representative(v) for n, v in schedule.sizes.items()}, schedule_source, schedule),)
        super().__init__(schedule, func, llvm_ir, engine, module_ref, target, compile_seconds, schedule_source)

    def _set_specs(self) -> None:
        self._call = threading.local()
        # each dimension of each input and output: an int, a size's name, or a Sym computed from the sizes
        self._io_dims = {k: tuple(size_name(d) or d for d in v)
                         for k, v in {**self.input_shapes, **self.output_shapes}.items()}
        self.ranges = {n: (v.sizes()[n]) for n, v in self.schedule.sizes.items() if is_symbolic(v)}
        # with versions: a call runs version j where the product of its symbolic sizes squared is at most
        # thresholds[j], the product of versions j's and j+1's (nearest by the product's logarithm)
        reps = [math.prod(v.sizes[n] for n in self.ranges) for v in self.versions]
        self.thresholds: tuple[int, ...] = tuple(a * b for a, b in itertools.pairwise(reps))
        # where each symbolic size is read: the first input dimension that is exactly that size
        self._sources: dict[str, tuple[str, int]] = {}
        for p in self.op.inputs:
            for d, ext in enumerate(self.input_shapes[p]):
                name = size_name(ext)
                if name is not None:
                    self._sources.setdefault(name, (p, d))
        unread = [n for n in self.ranges if n not in self._sources]
        if unread:
            raise BuildError(f"{self.op.name}: size {', '.join(unread)} is symbolic but no input has it as a whole "
                             "dimension, so a call cannot read it; bind it to an integer")
        assert self.func is not None  # a symbolic kernel is built here, never loaded
        self._size_params = self.func.sizes  # the generated function's size parameters, in order
        op, index_error, io_dims = self.op, self._index_error, self._io_dims

        def fail(status: int, env: dict):  # the kernel's own state only: a cycle through it would let the garbage
            # collector free the machine code before the kernel's release of its workspace runs
            raise status_error(op, status, index_error, lambda: _shapes_for(io_dims, env))
        self._fast = fast_call(self, data_address, fail, _DATA_OFFSET)

    @property
    def sizes(self) -> dict:
        """The sizes: ints where bound, ``(lo, hi)`` ranges where symbolic."""
        return {k: (self.ranges[k] if k in self.ranges else v) for k, v in self.schedule.sizes.items()}

    def call_sizes(self, inputs) -> dict[str, int]:
        """The symbolic sizes of a call with these inputs (a BuildError naming the input, dimension and the
        size's range when one lies outside it or two inputs disagree)."""
        names = self.op.inputs
        if len(inputs) != len(names):
            raise BuildError(f"{self.op.name}: expected {len(names)} input array{'s' if len(names) != 1 else ''}"
                             f" ({', '.join(names)}), got {len(inputs)}")
        arrays = dict(zip(names, inputs))
        env = {}
        for n, (p, d) in self._sources.items():
            a = arrays[p]
            if not isinstance(a, np.ndarray):
                raise BuildError(f"{self.op.name}: input {p} must be a numpy array, got {type(a).__name__}")
            if a.ndim != len(self.input_shapes[p]):
                raise BuildError(f"{self.op.name}: input {p} has {a.ndim} dimensions, expected "
                                 f"{len(self.input_shapes[p])}")
            lo, hi = self.ranges[n]
            v = a.shape[d]
            if not lo <= v <= hi:
                raise BuildError(f"{self.op.name}: input {p} dimension {d} is {v}, but size {n} must lie in "
                                 f"{lo}..{hi} for this kernel (built with {n}=tl.Dim({lo}, {hi}))")
            env[n] = v
        return env

    def __call__(self, *inputs, out=None):
        if out is None:  # the common call: checked by Python written for this kernel (tensorlang/symbolic_call.py)
            got = self._fast(inputs)
            if got is not None:
                return got
        env = self.call_sizes(inputs)
        shapes = self._shapes_for(env)
        if self.thresholds:
            env[VERSION_SIZE] = self.version_for(env)
        self._call.shapes = shapes  # per thread: calls of other sizes may run at the same time
        for name, a in zip(self.op.inputs, inputs):
            try:
                self._check(name, a, shapes[name], self.input_dtypes[name], "input")
            except BuildError as e:
                raise BuildError(f"{e} ({self._explain(env)})") from None
        outs = self._outputs(out, inputs)
        status = self._fn(*map(data_address, inputs), *map(data_address, outs),
                          *(env[n] for n in self._size_params))
        if status != 0:
            raise status_error(self.op, status, self._index_error, lambda: shapes)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def version_for(self, sizes: dict) -> int:
        """The number of the version (in `versions`) a call with these symbolic sizes runs: the one whose
        representative sizes' product is nearest theirs (by its logarithm); 0 for a kernel of one version.

        >>> import tensorlang as tl
        >>> k = tl.build(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=tl.Dim(1, 4096, like=(8, 1024)))
        >>> k.version_for({"N": 90}), k.version_for({"N": 91})
        (0, 1)
        """
        q = math.prod(sizes[n] for n in self.ranges) ** 2
        return next((j for j, t in enumerate(self.thresholds) if q <= t), len(self.thresholds))

    def _shapes_for(self, env: dict) -> dict:
        return _shapes_for(self._io_dims, env)

    def _explain(self, env: dict) -> str:
        return ", ".join(f"{n}={env[n]} from input {p} dimension {d}" for n, (p, d) in self._sources.items())

    def _new_output(self, name: str) -> np.ndarray:
        return np.empty(self._call.shapes[name], np.dtype(self.output_dtypes[name]))

    def _check(self, name, a, shape, dtype, role) -> None:
        super()._check(name, a, self._call.shapes[name], dtype, role)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={v}" if k not in self.ranges else f"{k}={v[0]}..{v[1]}"
                          for k, v in self.sizes.items())
        return f"<Kernel {self.op.name}({sizes}) for {self.target.cpu}>"

    def export(self, path, format: str = "so", *, name: str | None = None, cc: str | None = None) -> dict:
        """Not available for symbolic sizes (a BuildError): export a build with integer sizes."""
        raise BuildError(f"{self.op.name}: export of a kernel with symbolic sizes ({', '.join(self.ranges)}) is "
                         "not supported; build it with integer sizes to export")

    def source(self, kind: str = "llvm") -> str:
        """As :meth:`Kernel.source`; kind "c" is refused for symbolic sizes."""
        if kind == "c":
            raise BuildError(f"{self.op.name}: the C backend does not take symbolic sizes "
                             f"({', '.join(self.ranges)}); build with integer sizes for C")
        return super().source(kind)


def _shapes_for(io_dims: dict, env: dict) -> dict:
    """The shapes of a symbolic kernel's inputs and outputs for the sizes `env` (`io_dims`: each dimension an int,
    a size's name, or a Sym)."""
    return {k: tuple(env[d] if d.__class__ is str else evaluate(d, env) for d in v) for k, v in io_dims.items()}


@dataclass(frozen=True)
class SizeVersion:
    """One version of a kernel built for symbolic sizes with several representative sizes (``tl.Dim(lo, hi,
    like=(a, b))``): the representative `sizes` its schedule was chosen for, the schedule's `source` and the
    `schedule` itself, replayed on the symbolic sizes. `kernel.versions` lists them; a call runs the one whose
    sizes are nearest its own.

    >>> import tensorlang as tl
    >>> k = tl.build(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=tl.Dim(1, 4096, like=(8, 1024)))
    >>> [v.sizes for v in k.versions]
    [{'N': 8}, {'N': 1024}]
    """

    sizes: dict
    source: str
    schedule: Schedule


def _symbolic_build(op: Op, sizes: dict, options: dict) -> list[SizeVersion]:
    """The versions of a build with symbolic sizes: for each representative value of the Dims' `like` (one, unless
    a `like` is a tuple; a plain `like` serves every version), the schedule chosen (auto, hand, tuned or naive) for
    those sizes, then replayed on the symbolic sizes. Consecutive versions with the same primitives are one."""
    from .choice import choose_schedule
    counts = {len(v.likes) for v in sizes.values() if isinstance(v, Dim)} - {1}
    if len(counts) > 1:
        raise BuildError(f"{op.name}: the sizes give different numbers of representative sizes "
                         f"({_sizes_text(sizes)}); give each Dim one `like` or the same number")
    versions: list[SizeVersion] = []
    for j in range(max(counts, default=1)):
        like = {k: (v.likes[j if len(v.likes) > 1 else 0] if isinstance(v, Dim) else v) for k, v in sizes.items()}
        dims = {k: (Dim(v.lo, v.hi, like=like[k]) if isinstance(v, Dim) else v) for k, v in sizes.items()}
        rep, source = choose_schedule(op, like, **options)
        if versions and versions[-1].schedule.primitives == rep.primitives:
            continue
        try:
            versions.append(SizeVersion(like, source, Schedule(op, dims, rep.primitives)))
        except SymbolicRefusal as e:
            raise SymbolicRefusal(f"{op.name}: the {source} schedule (made for {_sizes_text(like)}) does not apply "
                                  f"to symbolic sizes: {e}") from None
    return versions


def _versioned_func(versions: list[SizeVersion]) -> Func:
    """The loop IR of a kernel with several versions: each version's, run where the `VERSION_SIZE` parameter
    (the call's choice) is its number."""
    from . import ir
    from .symbolic import size_var
    funcs = [v.schedule.lowered() for v in versions]
    body = funcs[-1].body
    for j in range(len(funcs) - 2, -1, -1):
        body = ir.If(ir.Cmp("==", size_var(VERSION_SIZE), ir.const(j)), funcs[j].body, body)
    return dataclasses.replace(funcs[0], body=body, sizes=funcs[0].sizes + (VERSION_SIZE,),
                               guards=sum(f.guards for f in funcs))


def _sizes_text(sizes: dict) -> str:
    return ", ".join(f"{k}={size_source(v)}" for k, v in sizes.items())


def llvm_ir_of(sched: Schedule, target: Target) -> tuple[Func, str]:
    """The loop IR of a schedule and its LLVM IR text (unoptimised) for `target`, as `build` compiles them.

    >>> import tensorlang as tl
    >>> func, text = llvm_ir_of(tl.schedule(tl.op("def f(A: f32[4]) -> B:\\n    B[i] = A[i]")), host_target())
    >>> func.name, "define" in text
    ('f', True)
    """
    try:
        func = sched.lowered()
        return func, str(emit_module(func, vector_bits=target.vector_bits()))
    except RecursionError:  # the passes recurse on expressions: inlining hundreds of stages into one goes too deep
        raise BuildError(f"{sched.op.name}: an expression of the scheduled program is nested too deeply to compile "
                         f"(stages inlined into one another add up); compute_root some of them") from None


def build(what: Op | Schedule, **sizes) -> Kernel:
    """Compile a program at `sizes`, or a Schedule, for this CPU.

    A program gets, in order: the best tuned record of the tuning database (``db=PATH`` overrides
    ``TENSORLANG_DB`` and the cache folder's; a missing or empty database is no error), the hand schedule of a
    built-in workload of the same loop structure (names do not matter), or the auto-scheduler's zero-trial pick;
    ``schedule="naive"`` asks for the plain loop nest, ``"auto"`` for the pick without looking further,
    ``"tuned"`` / ``"hand"`` for that source only, or an error saying why there is none (see
    :mod:`tensorlang.choice`). ``kernel.schedule_source`` says which ("tuned", "hand",
    "auto", "naive", or "given" for a Schedule). A program whose sizes are called ``db`` or ``schedule`` takes
    them as sizes.

    Cached: the same program, sizes, schedule and CPU give the same Kernel while it is alive, and the last
    `CACHE_SIZE` (64) kernels built stay alive (`tl.clear_cache()` lets them go).

    >>> import tensorlang as tl
    >>> op = tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i]")
    >>> tl.build(op, N=4) is tl.build(op, N=4)
    True
    >>> tl.build(op, N=4).schedule_source, tl.build(op, N=4, schedule="naive").schedule_source
    ('auto', 'naive')
    """
    if isinstance(what, Schedule):
        if sizes:
            raise BuildError("build(schedule): the schedule already has its sizes; pass no sizes")
        sched, source = what, "given"
        versions = [SizeVersion({}, source, sched)]
    elif isinstance(what, Op):
        from .choice import choose_schedule
        options = {k: sizes.pop(k) for k in ("db", "schedule") if k in sizes and k not in what.size_names}
        if any(isinstance(v, Dim) for v in sizes.values()):
            versions = _symbolic_build(what, sizes, options)
            sched, source = versions[0].schedule, versions[0].source
        else:
            sched, source = choose_schedule(what, sizes, **options)
            versions = [SizeVersion(sizes, source, sched)]
    else:
        raise BuildError(f"build() takes an Op (from tl.op) or a Schedule, not {type(what).__name__}")
    target = host_target()
    key = (sched.op.key, tuple(sorted(sched.sizes.items())), tuple(v.schedule.key() for v in versions), target.key,
           source)
    with _cache_lock:
        hit = _cached(key)
    if hit is not None:
        return hit
    t0 = time.perf_counter()
    try:
        if len(versions) > 1:
            func = _versioned_func(versions)
            llvm_ir = str(emit_module(func, vector_bits=target.vector_bits()))
        else:
            func, llvm_ir = llvm_ir_of(sched, target)
    except SymbolicRefusal as e:
        raise SymbolicRefusal(f"{sched.op.name}: the {source} schedule cannot be lowered for the symbolic sizes "
                              f"{_sizes_text(sched.sizes)}: {e}") from None
    engine, mod = compile_ir(llvm_ir, target)
    if func.sizes:
        kernel: Kernel = SymbolicKernel(sched, func, llvm_ir, engine, mod, target, time.perf_counter() - t0, source,
                                        versions=tuple(versions) if len(versions) > 1 else ())
    else:
        kernel = Kernel(sched, func, llvm_ir, engine, mod, target, time.perf_counter() - t0, source)
    with _cache_lock:
        _alive.setdefault(key, kernel)  # a thread that built the same kernel meanwhile wins
        built = _cached(key)
    assert built is not None  # held by `kernel` or by the thread that won
    return built


class LoadedKernel(Kernel):
    """A kernel from a shared library that `tensorlang export` or `Kernel.export` made (see :func:`load`).

    Calls go through ctypes to the library's function, with the same argument checks as a built kernel.
    `metadata` holds what the library says about itself; `schedule` is rebuilt from it on first use.
    """

    def __init__(self, path: str, lib, meta: dict):
        from .errors import TensorlangError
        from .parse import parse
        self.path, self.metadata, self._lib = path, meta, lib
        self.schedule_source = "given"
        try:
            self.op = parse(meta["source"])
        except TensorlangError:  # a program this version no longer reads: the checks need only names
            self.op = SimpleNamespace(name=meta["op"], inputs=tuple(b["name"] for b in meta["inputs"]),
                                      outputs=tuple(b["name"] for b in meta["outputs"]))
        self.func, self._llvm_ir, self._engine, self._module = None, None, None, None
        self.target = Target(**meta["target"])
        self.compile_seconds = 0.0
        self.input_shapes = {b["name"]: tuple(b["shape"]) for b in meta["inputs"]}
        self.output_shapes = {b["name"]: tuple(b["shape"]) for b in meta["outputs"]}
        self.input_dtypes = {b["name"]: DTYPES[b["dtype"]].numpy for b in meta["inputs"]}
        self.output_dtypes = {b["name"]: DTYPES[b["dtype"]].numpy for b in meta["outputs"]}
        self._fn = getattr(lib, meta["name"])
        self._fn.restype = ctypes.c_int32
        self._fn.argtypes = [ctypes.c_void_p] * (len(meta["inputs"]) + len(meta["outputs"]))
        self._index_error = getattr(lib, meta["name"] + INDEX_ERROR_SUFFIX, None)  # none in older libraries
        if self._index_error is not None:
            self._index_error.restype = ctypes.c_int64
            self._index_error.argtypes = [ctypes.c_void_p]
        self._set_specs()

    @property
    def sizes(self) -> dict:
        """The bound sizes."""
        return dict(self.metadata["sizes"])

    @functools.cached_property
    def schedule(self) -> Schedule:  # type: ignore[override]  # replayed on first use, not set when loaded
        """The schedule the library was made with (replayed from its JSON)."""
        return Schedule.from_json(self.metadata["schedule"])

    def source(self, kind: str = "llvm") -> str:
        """"ir": the loop IR the library was compiled from; other kinds are not stored in a library."""
        if kind == "ir":
            return self.metadata["ir"]
        raise BuildError(f"source(kind={kind!r}): {self.path} holds machine code and the loop IR ('ir') only; "
                         f"export with format='ll', 'asm' or 'c' for those, or use tl.build(k.schedule).source()")

    def __repr__(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        return f"<Kernel {self.op.name}({sizes}) for {self.target.cpu}, loaded from {self.path}>"


def load(path, *, name: str | None = None) -> LoadedKernel | LoadedModel:
    """Load a shared library made by `tensorlang export --format so` or `kernel.export(dir)` as a Kernel.

    `path` is the .so file (or a directory holding exactly one). The library carries its metadata (program,
    sizes, schedule, buffers, target), so no other file is needed; a library built for CPU features this
    machine lacks is refused. `name` is the kernel's function name, needed only for a library linked by hand
    under another file name than libNAME.so.

    >>> k = tl.load("out/libmatmul.so")  # doctest: +SKIP
    >>> C = k(A, B)                      # doctest: +SKIP
    """
    from .export import check_cpu, read_library
    path, lib, meta = read_library(path, name)
    check_cpu(meta, path, host_target())
    if meta.get("kind") == "model":  # a whole model (`model.export`): numpy in and out, as a tl.Model
        from .graph.export import LoadedModel
        return LoadedModel(path, lib, meta)
    return LoadedKernel(path, lib, meta)
