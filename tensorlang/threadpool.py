"""The thread pool behind parallel loops.

Generated code calls `tensorlang_parallel_for(fn, closure, lo, extent)`, which runs `fn(begin, end, closure)` on
pieces of [lo, lo+extent) on a persistent pool, the calling thread included, and returns when every iteration
has run. Threads claim their pieces as they go, so a thread that does not get a CPU (another process, another
thread pool in this process) never holds a loop up: the others run its share. This module gives the JIT that
symbol:

- ``native`` (the default): the pthread pool of ``csrc/tensorlang_runtime.c`` (the one exported libraries
  carry; its header describes the scheduling), built once with the C compiler into the user cache folder and
  loaded with ctypes. Its threads spin for ``TENSORLANG_SPIN_US`` microseconds (default 500) before they sleep,
  so a parallel loop costs a few microseconds, not the system call that wakes a sleeping thread (slowest on a
  virtual machine). When its threads keep waiting for threads that lost their CPU, it says so once on stderr, naming
  ``TENSORLANG_NUM_THREADS``.
- ``python``: a ctypes callback into a ``ThreadPoolExecutor`` (ctypes releases the GIL while the machine code
  runs, so the pieces run at once), a thread wake-up per parallel loop. Used where no C compiler can build the
  native pool (with a warning that says why), or when ``TENSORLANG_THREAD_POOL=python``.

`TENSORLANG_NUM_THREADS` sets the number of threads (default: the CPUs this process may use). A value of these
three variables that they do not take is a UsageError when the JIT starts (:func:`check_settings`).
:func:`pool_stats` counts what the pool did (loops, pieces, steals, waits).

>>> num_threads() >= 1
True
>>> backend() in ("native", "python")
True
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import pathlib
import re
import subprocess
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

from .errors import UsageError

_CHUNK_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
_PARALLEL_FOR = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_lock = threading.Lock()


#: The most threads a parallel loop runs on (the C runtime's TL_MAX_THREADS): TENSORLANG_NUM_THREADS and the
#: --threads flags take at most this.
MAX_THREADS = 1024


def num_threads() -> int:
    """Threads parallel loops use: TENSORLANG_NUM_THREADS, else the CPUs available to this process. A value that
    is not an integer from 1 to MAX_THREADS is a UsageError.

    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"TENSORLANG_NUM_THREADS": "3"}):
    ...     num_threads()
    3
    """
    text = os.environ.get("TENSORLANG_NUM_THREADS", "").strip()
    if text:
        try:
            n = int(text)
        except ValueError:
            raise UsageError(f"TENSORLANG_NUM_THREADS={text!r} is not an integer") from None
        if n < 1:
            raise UsageError(f"TENSORLANG_NUM_THREADS={n} must be >= 1")
        if n > MAX_THREADS:
            raise UsageError(f"TENSORLANG_NUM_THREADS={n} is more than {MAX_THREADS}, the most threads the thread "
                             f"pool runs")
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


#: The longest spin TENSORLANG_SPIN_US may ask for, in microseconds (the C runtime's TL_MAX_SPIN_US).
MAX_SPIN_US = 1_000_000
DEFAULT_SPIN_US = 500
POOLS = ("native", "python")


def spin_us() -> int:
    """Microseconds the native pool's threads spin before they sleep: TENSORLANG_SPIN_US, else 500. A value that is
    not an integer from 0 to MAX_SPIN_US is a UsageError (the C runtime, which reads the variable at every
    parallel loop, would use 500 and say so on stderr).

    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"TENSORLANG_SPIN_US": "0"}):
    ...     spin_us()
    0
    >>> with mock.patch.dict(os.environ, {"TENSORLANG_SPIN_US": "junk"}):
    ...     spin_us()
    Traceback (most recent call last):
    ...
    tensorlang.errors.UsageError: TENSORLANG_SPIN_US='junk' is not an integer from 0 to 1000000 (microseconds the \
thread pool's threads spin before they sleep; default 500)
    """
    text = os.environ.get("TENSORLANG_SPIN_US", "").strip()
    if not text:
        return DEFAULT_SPIN_US
    if not re.fullmatch(r"[+-]?[0-9]+", text) or not 0 <= int(text) <= MAX_SPIN_US:
        raise UsageError(f"TENSORLANG_SPIN_US={text!r} is not an integer from 0 to {MAX_SPIN_US} (microseconds the "
                         f"thread pool's threads spin before they sleep; default {DEFAULT_SPIN_US})")
    return int(text)


def pool_choice() -> str:
    """The thread pool asked for: TENSORLANG_THREAD_POOL, "native" (the default) or "python" (any case); another
    value is a UsageError.

    >>> from unittest import mock
    >>> with mock.patch.dict(os.environ, {"TENSORLANG_THREAD_POOL": "Python"}):
    ...     pool_choice()
    'python'
    >>> with mock.patch.dict(os.environ, {"TENSORLANG_THREAD_POOL": "pyhton"}):
    ...     pool_choice()
    Traceback (most recent call last):
    ...
    tensorlang.errors.UsageError: TENSORLANG_THREAD_POOL='pyhton' is not a thread pool; use native (the default) or \
python
    """
    text = os.environ.get("TENSORLANG_THREAD_POOL", "").strip()
    if not text:
        return "native"
    if text.lower() not in POOLS:
        raise UsageError(f"TENSORLANG_THREAD_POOL={text!r} is not a thread pool; use native (the default) or python")
    return text.lower()


def check_settings() -> None:
    """Refuse, with a UsageError naming the variable, a TENSORLANG_NUM_THREADS, TENSORLANG_SPIN_US or
    TENSORLANG_THREAD_POOL value that the thread pools do not take (the JIT calls this when it starts).

    >>> check_settings()
    """
    num_threads()
    spin_us()
    pool_choice()


def _get_pool(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size != n:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(max_workers=max(1, n - 1), thread_name_prefix="tensorlang")
            _pool_size = n
        return _pool


#: Pieces a parallel loop is cut into per thread (the C runtime's TL_PIECES_PER_THREAD).
PIECES_PER_THREAD = 8
STATS = ("loops", "caller_pieces", "worker_pieces", "steals", "late", "caller_sleeps", "stalls", "spins_given_up")
_py_stats = dict.fromkeys(STATS, 0)
_local = threading.local()  # .in_chunk: this thread runs a piece (a parallel loop inside runs serially)


def _count(key: str, k: int = 1) -> None:
    with _lock:
        _py_stats[key] += k


class _Loop:
    """One parallel loop on the Python pool: the caller and the pool's threads claim pieces in order from a shared
    position; the loop is over when every iteration has run, whichever threads ran them, so a pool thread that
    starts late (or never) holds nothing up."""

    def __init__(self, fn, closure, lo: int, extent: int, n: int):
        self.fn, self.closure = fn, closure
        self.next, self.end, self.left = lo, lo + extent, extent
        self.piece = -(-extent // (PIECES_PER_THREAD * n))
        self.status = 0
        self.lock = threading.Lock()
        self.over = threading.Event()

    def run(self) -> int:
        """Run pieces until none is left to claim; return how many this thread ran."""
        pieces = 0
        _local.in_chunk = True
        try:
            while True:
                with self.lock:
                    begin = self.next
                    if begin >= self.end:
                        return pieces
                    self.next = end = min(self.end, begin + self.piece)
                status = self.fn(begin, end, self.closure)
                pieces += 1
                with self.lock:
                    self.status = max(self.status, status)
                    self.left -= end - begin
                    if self.left == 0:
                        self.over.set()
        finally:
            _local.in_chunk = False

    def work(self) -> None:
        """A pool thread's part."""
        pieces = self.run()
        if pieces:
            _count("worker_pieces", pieces)
        else:
            _count("late")


def _parallel_for(fn_addr, closure, lo, extent) -> int:
    if extent <= 0:
        return 0
    fn = _CHUNK_FN(fn_addr)
    n = min(num_threads(), extent)
    if n == 1 or getattr(_local, "in_chunk", False):
        return fn(lo, lo + extent, closure)
    loop = _Loop(fn, closure, lo, extent, n)
    pool = _get_pool(n)
    for _ in range(n - 1):
        pool.submit(loop.work)
    _count("loops")
    _count("caller_pieces", loop.run())  # this thread claims pieces too
    if not loop.over.is_set():
        _count("caller_sleeps")
        loop.over.wait()
    return loop.status


_callback = _PARALLEL_FOR(_parallel_for)  # kept alive for the life of the process


RUNTIME_C = pathlib.Path(__file__).with_name("csrc") / "tensorlang_runtime.c"


def runtime_cache_dir() -> pathlib.Path:
    """Where the native pool's shared library is cached: ``$XDG_CACHE_HOME/tensorlang/runtime`` (when that is
    an absolute path), else ``~/.cache/tensorlang/runtime``.

    >>> runtime_cache_dir().name
    'runtime'
    """
    xdg = os.environ.get("XDG_CACHE_HOME")
    cache = pathlib.Path(xdg) if xdg and os.path.isabs(xdg) else pathlib.Path.home() / ".cache"
    return cache / "tensorlang" / "runtime"


STALE_DAYS = 30
"""A cached runtime library unused for this many days (another tensorlang version's, another compiler's) is
deleted when a new one is built in its folder."""


def _touch(path: pathlib.Path) -> None:
    try:
        os.utime(path)  # its modification time says when it was last used
    except OSError:
        pass


def _prune_stale(directory: pathlib.Path, keep: pathlib.Path) -> list[pathlib.Path]:
    """Delete the runtime libraries in `directory` other than `keep` unused for STALE_DAYS; return them."""
    cutoff = time.time() - STALE_DAYS * 86400
    gone = []
    for old in directory.glob("tensorlang_runtime-*.so"):
        try:
            if old != keep and old.stat().st_mtime < cutoff:
                old.unlink()
                gone.append(old)
        except OSError:
            pass  # in use elsewhere, or already gone: a process that loaded it keeps its mapping either way
    return gone


def _build_native(cc: list[str], c_file: pathlib.Path = RUNTIME_C) -> pathlib.Path:
    """Build the runtime (or another version of its C file, `c_file`) as a shared library, once per source,
    compiler and flags, and return its path."""
    source = pathlib.Path(c_file).read_bytes()
    flags = ["-O2", "-shared", "-fPIC", "-pthread", "-DTENSORLANG_JIT_RUNTIME"]
    digest = hashlib.sha256(source + repr((cc, flags)).encode()).hexdigest()[:16]
    for directory in (runtime_cache_dir(), pathlib.Path(tempfile.gettempdir()) / f"tensorlang-runtime-{os.getuid()}"):
        path = directory / f"tensorlang_runtime-{digest}.so"
        if path.exists():
            _touch(path)
            return path
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=directory)
            os.close(fd)
        except OSError:
            continue  # not writable: try the next folder
        try:
            r = subprocess.run([*cc, *flags, "-o", tmp, str(c_file)], capture_output=True, text=True,
                               timeout=120)
            if r.returncode != 0:
                tail = (r.stderr or r.stdout).strip().splitlines()[-5:]
                raise RuntimeError(f"{' '.join(cc)} failed: {' '.join(tail)}")
            os.replace(tmp, path)  # atomic: processes building at once each install a whole file
            _prune_stale(directory, path)
            return path
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    raise RuntimeError(f"no writable folder for the runtime library (tried {runtime_cache_dir()} and the "
                       "temporary folder)")


@functools.cache
def _native_library() -> tuple[ctypes.CDLL | None, str]:
    """(the native pool's library or None, why not)."""
    if pool_choice() == "python":
        return None, "TENSORLANG_THREAD_POOL=python"
    from .codegen_c import find_c_compiler
    try:
        lib = ctypes.CDLL(str(_build_native(find_c_compiler())), mode=ctypes.RTLD_LOCAL)
        lib.tensorlang_pool_stats.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_int32]
        lib.tensorlang_pool_stats.restype = ctypes.c_int32
        return lib, ""
    except Exception as e:  # no compiler, a failed build, a library that does not load: say so, use Python's
        return None, str(e)


def _native_address() -> tuple[int | None, str]:
    """(address of the native `tensorlang_parallel_for` or None, why not)."""
    lib, why = _native_library()
    return (None, why) if lib is None else (ctypes.cast(lib.tensorlang_parallel_for, ctypes.c_void_p).value, "")


def pool_stats() -> dict[str, int]:
    """What the pool that runs this process's parallel loops (see :func:`backend`) did so far: ``loops`` run on
    it, pieces the callers and the workers ran (``caller_pieces``, ``worker_pieces``), ``steals`` (a thread took
    part of another's range; the native pool only), ``late`` (a worker arrived after all the work was taken),
    ``caller_sleeps`` (a caller had to wait for pieces other threads held) and ``stalls`` (such waits long enough
    to mean a thread lost its CPU; the native pool only, which warns after 8 within 10 s) and ``spins_given_up``
    (a thread waiting between loops found its CPU wanted by another thread and slept instead of spinning; the
    native pool only). Loops of one thread,
    and loops inside a piece, run without the pool and are not counted.

    >>> sorted(pool_stats()) == sorted(STATS)
    True
    """
    lib, _ = _native_library()
    if lib is None:
        with _lock:
            return dict(_py_stats)
    values = (ctypes.c_int64 * len(STATS))()
    lib.tensorlang_pool_stats(values, len(STATS))
    return dict(zip(STATS, values))


def backend() -> str:
    """"native" when parallel loops run on the C pool, "python" when on the Python fallback (see the module).

    >>> backend()  # doctest: +SKIP
    'native'
    """
    return "native" if _native_address()[0] is not None else "python"


def parallel_for_address() -> int:
    """The address generated code calls as `tensorlang_parallel_for`: the native pool's, else (with a warning
    naming the reason, unless TENSORLANG_THREAD_POOL=python asked for it) the Python pool's.

    >>> parallel_for_address() > 0
    True
    """
    check_settings()  # a bad setting is an error here, at start-up (the C pool would use its default)
    address, why = _native_address()
    if address is not None:
        return address
    if why != "TENSORLANG_THREAD_POOL=python":
        warnings.warn(f"tensorlang: parallel loops run on the Python thread pool, which adds about 0.1 ms per "
                      f"parallel loop, because the native pool could not be built: {why}. Install gcc or clang "
                      "(or set CC), or set TENSORLANG_THREAD_POOL=python to silence this.", RuntimeWarning,
                      stacklevel=2)
    address = ctypes.cast(_callback, ctypes.c_void_p).value
    assert address is not None  # a ctypes callback has an address
    return address
