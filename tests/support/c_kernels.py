"""A kernel's C source compiled and loaded with ctypes, for the tests of the C backend's index errors
(tests/dsl/test_gather.py, test_scatter.py); ``needs_cc`` skips a test where no C compiler is found."""
import ctypes

import pytest

import tensorlang as tl
from tensorlang.codegen_c import compile_c, find_c_compiler

try:
    CC = find_c_compiler()
except tl.BuildError:
    CC = None
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler found (gcc, clang or $CC)")


def c_kernel(k, tmp_path):
    """(the kernel's C function, its NAME_index_error function), compiled from ``k.source("c")`` into `tmp_path`."""
    so = compile_c(k.source("c"), tmp_path / f"{k.op.name}.so")
    lib = ctypes.CDLL(str(so))
    fn = getattr(lib, k.op.name)
    fn.restype, fn.argtypes = ctypes.c_int32, [ctypes.c_void_p] * len(k.func.params)
    err = getattr(lib, k.op.name + "_index_error")
    err.restype, err.argtypes = ctypes.c_int64, [ctypes.c_void_p]
    return fn, err
