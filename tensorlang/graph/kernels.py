"""Compiling the programs of a model's nodes, with a disk cache of their machine code.

`compile_program(text)` is the one place where the graph compiler turns a node's program into machine code. A
program the cache has not seen gets the schedule `tl.build(op)` would choose (a tuned record of the tuning
database, else the hand schedule of a built-in workload, else the auto-scheduler's pick, else the naive loop nest;
`kernel.schedule_source` says which), compiled by LLVM once into an object file that the process loads and that
goes to the cache folder
(``$XDG_CACHE_HOME/tensorlang/kernels`` or ``~/.cache/tensorlang/kernels``; ``TENSORLANG_KERNEL_CACHE`` names
another folder, or ``off``), keyed by the program text, the target CPU, the tensorlang and llvmlite versions, a hash
of the compiler's own code and the tuning database's size and time (a tuning run that adds records makes every
kernel build again once, so that a tuned schedule is never hidden behind a cached one). A program it has seen loads
its object file (milliseconds instead of LLVM's optimisation and code generation).

>>> import numpy as np
>>> k = compile_program("def twice(X: f32[3]) -> Y:\\n    Y[i] = X[i] * 2.0\\n")
>>> x, y = np.arange(3, dtype=np.float32), np.empty(3, np.float32)
>>> k.call(x.ctypes.data, y.ctypes.data); y.tolist()
[0.0, 2.0, 4.0]
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import pathlib
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..target import MachineCode

CACHE_FORMAT = 1
_memory: dict[tuple[str, int, str], CompiledKernel] = {}
_lock = threading.Lock()


@dataclass
class CompiledKernel:
    """A node's program as machine code: `call(*addresses)` runs it on raw buffer addresses (inputs, then
    outputs); `schedule_source` says where its schedule came from; `cached` whether it came from the disk cache."""

    name: str
    text: str
    n_args: int
    fn: Callable[..., int]
    schedule_source: str
    schedule_json: str
    compile_seconds: float
    cached: bool
    keep: MachineCode | None = field(default=None, repr=False)  # the MachineCode that owns the machine code

    def call(self, *addresses: int) -> None:
        """Run the kernel on buffer addresses; the error of a nonzero status otherwise (`status_error`): MemoryError
        if it could not allocate its temporaries, `tl.IndexError` if an index it read from a tensor was out of
        range."""
        status = self.fn(*addresses)
        if status != 0:
            raise self.error(status)

    def error(self, status: int) -> Exception:
        """The exception for the nonzero `status` of a call (see `tensorlang.runtime.status_error`), naming the
        program's tensor, stage and index value for an index out of range.

        >>> k = compile_program("def f(T: f32[4], X: i32[2]) -> Y:\\n    Y[i] = T[X[i]]\\n")
        >>> k.error(1)
        MemoryError('f: the kernel could not allocate its temporary buffers')
        """
        import tensorlang as tl

        from ..codegen_llvm import INDEX_ERROR_SUFFIX
        from ..runtime import _INDEX_ERROR_FN, status_error
        assert self.keep is not None  # every kernel is built with its MachineCode (`_machine_code`)
        address = self.keep.engine.get_function_address(self.name + INDEX_ERROR_SUFFIX)
        op = tl.op(self.text)
        return status_error(op, status, _INDEX_ERROR_FN(address) if address else None,
                            lambda: tl.schedule(op).bound.shapes)


def cache_dir() -> pathlib.Path | None:
    """The kernel cache folder, or None when ``TENSORLANG_KERNEL_CACHE=off``.

    >>> cache_dir() is None or cache_dir().name in ("kernels",) or "TENSORLANG_KERNEL_CACHE" in os.environ
    True
    """
    env = os.environ.get("TENSORLANG_KERNEL_CACHE", "").strip()
    if env.lower() in ("off", "0", "none", "no"):
        return None
    if env:
        if not os.path.isabs(env):
            raise UsageError(f"TENSORLANG_KERNEL_CACHE={env!r} must be an absolute path, or 'off'")
        return pathlib.Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = pathlib.Path(xdg) if xdg and os.path.isabs(xdg) else pathlib.Path.home() / ".cache"
    return base / "tensorlang" / "kernels"


def clear_kernel_cache() -> int:
    """Delete the kernel cache's files, the model cache's with them (and forget the kernels this process loaded);
    returns how many files.

    Example::

        clear_kernel_cache()    # 42
    """
    with _lock:
        _memory.clear()
    folder = cache_dir()
    if folder is None or not folder.is_dir():
        return 0
    count = 0
    for p in folder.iterdir():
        if p.suffix in (".o", ".json", ".bin"):
            try:
                p.unlink()
                count += 1
            except OSError:
                pass
    return count


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """A hash of the compiler's own code (the core modules of tensorlang/ and its C runtime): machine code cached
    by another version of the compiler is not reused.

    >>> len(code_fingerprint())
    16
    """
    import importlib.util
    root = pathlib.Path(__file__).resolve().parent.parent
    h = hashlib.sha256()
    # the whole compiler (the auto-scheduler's rules decide schedules too), and the hand schedules tl.build may take
    # (schedules/ in a checkout, tensorlang/schedules/ in an install, where tuner/ and cli/ sit inside tensorlang/ too)
    spec = importlib.util.find_spec("tensorlang.schedules")
    assert spec is not None and spec.origin is not None  # a package of this install
    hand_dir = pathlib.Path(spec.origin).parent
    upper = [root / name for name in ("schedules", "tuner", "cli")]
    core = [p for p in root.rglob("*.py") if not any(d in p.parents for d in upper)]
    for p in sorted([*core, *root.glob("csrc/*")]) + sorted(hand_dir.glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def database_fingerprint() -> str:
    """The tuning database's path, size and modification time (`TENSORLANG_DB`, else the cache folder's): `tl.build`
    prefers a tuned record, so a database that changed may change a kernel's schedule.

    >>> isinstance(database_fingerprint(), str)
    True
    """
    path = os.environ.get("TENSORLANG_DB", "").strip()
    if not path:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = pathlib.Path(xdg) if xdg and os.path.isabs(xdg) else pathlib.Path.home() / ".cache"
        path = str(base / "tensorlang" / "tuning.db")
    try:
        st = os.stat(path)
    except OSError:
        return f"{path}:none"
    try:  # records committed but not yet checkpointed live in the write-ahead log (a tuner still running)
        wal = os.stat(path + "-wal")
        log = f":{wal.st_size}:{wal.st_mtime_ns}"
    except OSError:
        log = ""
    return f"{path}:{st.st_size}:{st.st_mtime_ns}{log}"


def _key(text: str, target, threads: int) -> str:
    import llvmlite

    import tensorlang
    blob = "\0".join((str(CACHE_FORMAT), tensorlang.__version__, llvmlite.__version__, code_fingerprint(),
                       database_fingerprint(), target.key, str(threads), text))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _function(address: int, n_args: int):
    return ctypes.CFUNCTYPE(ctypes.c_int32, *([ctypes.c_void_p] * n_args))(address)


def _machine_code(meta: dict, data: bytes, text: str, target, cached: bool, seconds: float) -> CompiledKernel:
    """The kernel of an object file (`meta`: its function's name and argument count, its schedule's source and
    JSON) loaded into an LLVM engine."""
    from ..target import MachineCode, load_object
    t0 = time.perf_counter()
    code = MachineCode(load_object(data, target), meta["name"])
    if not code.address:
        raise ValueError(f"the object file has no function {meta['name']}")
    return CompiledKernel(meta["name"], text, meta["n_args"], _function(code.address, meta["n_args"]),
                          meta["schedule_source"], meta["schedule"], seconds + time.perf_counter() - t0, cached,
                          code)


def _load(folder: pathlib.Path, key: str, text: str, target) -> CompiledKernel | None:
    meta_path, obj_path = folder / f"{key}.json", folder / f"{key}.o"
    try:
        meta = json.loads(meta_path.read_text())
        data = obj_path.read_bytes()
        if meta.get("text") != text or meta.get("format") != CACHE_FORMAT or \
                meta.get("sha256") != hashlib.sha256(data).hexdigest():
            return None  # not this program's, or damaged (LLVM would crash on a damaged object file)
    except (OSError, ValueError):
        return None
    try:
        return _machine_code(meta, data, text, target, True, 0.0)
    except Exception:  # an object file LLVM refuses: compile again (and overwrite it)
        return None


def _store(folder: pathlib.Path, key: str, meta: dict, text: str, obj: bytes) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for suffix, data in ((".o", obj), (".json", json.dumps({
                "format": CACHE_FORMAT, **meta, "text": text, "sha256": hashlib.sha256(obj).hexdigest()}).encode())):
            tmp = folder / f"{key}{suffix}.tmp{os.getpid()}.{threading.get_ident()}"
            tmp.write_bytes(data)
            os.replace(tmp, folder / f"{key}{suffix}")
    except OSError:
        pass  # a read-only or full cache folder costs the next compile time, nothing else


def build_object(text: str, target) -> tuple[dict, bytes]:
    """The object code of a program under the schedule `tl.build` chooses (a tuned record, a hand schedule, the
    auto-scheduler's pick, else the naive loop nest), compiled once, and its metadata: the function's name and
    argument count, the schedule's source and JSON.

    >>> from tensorlang.target import host_target
    >>> meta, obj = build_object("def f(X: f32[2]) -> Y:\\n    Y[i] = X[i]\\n", host_target())
    >>> meta["name"], meta["n_args"], meta["schedule_source"] in ("tuned", "hand", "auto", "naive"), obj[:4]
    ('f', 2, True, b'\\x7fELF')
    """
    import tensorlang as tl

    from ..choice import choose_schedule
    from ..runtime import llvm_ir_of
    from ..target import compile_object
    sched, source = choose_schedule(tl.op(text), {})
    func, llvm_ir = llvm_ir_of(sched, target)
    meta = {"name": func.name, "n_args": len(func.params), "schedule_source": source, "schedule": sched.to_json()}
    return meta, compile_object(llvm_ir, target)


def compile_program(text: str) -> CompiledKernel:
    """Machine code for a program with all its sizes given (the graph compiler writes shapes as numbers),
    from this process's kernels, the disk cache, or `tl.build`.

    >>> compile_program("def f(X: f32[2]) -> Y:\\n    Y[i] = X[i]\\n").n_args
    2
    """
    from ..target import host_target
    from ..threadpool import num_threads
    threads = num_threads()  # schedules (tuned or picked) are for a thread count
    # keyed by the tuning database's state too: a model compiled again after tuning in this process gets the tuned
    # schedules, not the kernels compiled before
    memory_key = (text, threads, database_fingerprint())
    with _lock:
        hit = _memory.get(memory_key)
    if hit is not None:
        return hit
    target = host_target()
    key = _key(text, target, threads)
    folder = cache_dir()
    compiled = _load(folder, key, text, target) if folder is not None else None
    if compiled is None:
        t0 = time.perf_counter()
        meta, obj = build_object(text, target)
        compiled = _machine_code(meta, obj, text, target, False, time.perf_counter() - t0)
        if folder is not None:
            _store(folder, key, meta, text, obj)
    with _lock:
        return _memory.setdefault(memory_key, compiled)
