"""The thread pool behind parallel loops.

Generated code calls `tensorlang_parallel_for(fn, closure, lo, extent)`; this module provides that symbol
as a ctypes callback. It cuts [lo, lo+extent) into one chunk per thread and runs `fn(begin, end, closure)`
for each on a persistent pool; ctypes releases the GIL while the machine code runs, so the chunks run at
once. `TENSORLANG_NUM_THREADS` sets the number of threads (default: the CPUs this process may use).

>>> num_threads() >= 1
True
"""
from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor

_CHUNK_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p)
_PARALLEL_FOR = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_lock = threading.Lock()


def num_threads() -> int:
    """Threads parallel loops use: TENSORLANG_NUM_THREADS, else the CPUs available to this process."""
    text = os.environ.get("TENSORLANG_NUM_THREADS", "").strip()
    if text:
        try:
            n = int(text)
        except ValueError:
            raise ValueError(f"TENSORLANG_NUM_THREADS={text!r} is not an integer") from None
        if n < 1:
            raise ValueError(f"TENSORLANG_NUM_THREADS={n} must be >= 1")
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _get_pool(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size != n:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(max_workers=max(1, n - 1), thread_name_prefix="tensorlang")
            _pool_size = n
        return _pool


def _parallel_for(fn_addr, closure, lo, extent) -> int:
    if extent <= 0:
        return 0
    fn = _CHUNK_FN(fn_addr)
    n = min(num_threads(), extent)
    if n == 1:
        return fn(lo, lo + extent, closure)
    bounds = [lo + (extent * i) // n for i in range(n + 1)]
    pool = _get_pool(n)
    futures = [pool.submit(fn, bounds[i], bounds[i + 1], closure) for i in range(1, n)]
    status = fn(bounds[0], bounds[1], closure)  # this thread takes the first chunk
    for f in futures:
        status = max(status, f.result())
    return status


_callback = _PARALLEL_FOR(_parallel_for)  # kept alive for the life of the process


def parallel_for_address() -> int:
    """The address generated code calls as `tensorlang_parallel_for`."""
    return ctypes.cast(_callback, ctypes.c_void_p).value
