"""tensorlang: a tensor compiler. Einstein-notation DSL -> loop IR -> LLVM machine code.

>>> import numpy as np, tensorlang as tl
>>> op = tl.op('''
... def matmul(A: f32[M, K], B: f32[K, N]) -> C:
...     C[m, n] += A[m, k] * B[k, n]
... ''')
>>> k = tl.build(op, M=2, N=3, K=4)
>>> A, B = np.ones((2, 4), np.float32), np.ones((4, 3), np.float32)
>>> k(A, B).tolist()
[[4.0, 4.0, 4.0], [4.0, 4.0, 4.0]]
"""
from .errors import (
    BuildError,
    DSLError,
    IndexError,  # noqa: F401 (tl.IndexError; kept out of __all__, see its docstring)
    ScheduleError,
    TensorlangError,
    UsageError,
)
from .parse import parse as _parse
from .program import Op
from .schedule import Schedule, schedule
from .symbolic import Dim

#: the version every tuning record, dataset, saved model and exported library stores; the build reads it from here
__version__ = "0.2.0"


def op(source: str) -> Op:
    """Parse and check a DSL program; sizes stay symbolic.

    >>> op("def double(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0").outputs
    ('Y',)
    """
    return _parse(source)


_LAZY = {"reference": ".numpy_reference",
         "build": ".runtime", "Kernel": ".runtime", "load": ".runtime", "clear_cache": ".runtime",
         "Model": ".graph.model", "load_model": ".graph.serialize",
         "from_torch": ".frontend.torch_import", "from_exported": ".frontend.torch_import",
         "from_onnx": ".frontend.onnx_import"}


#: the packages above the core, installed under this name (tl.schedules, tl.tuner, tl.cli); the core never imports
#: them itself
_UPPER = ("schedules", "tuner", "cli")


def __getattr__(name):
    # the LLVM side (build, Kernel, load, clear_cache), the graph compiler and the PyTorch and ONNX importers are
    # imported on first use, so that `tl.op` starts fast and `import tensorlang` never imports torch or onnx
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    if name in _UPPER:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'tensorlang' has no attribute {name!r}")


__all__ = [
    "BuildError",
    "DSLError",
    "Dim",
    "Kernel",
    "Model",
    "Op",
    "Schedule",
    "ScheduleError",
    "TensorlangError",
    "UsageError",
    "build",
    "clear_cache",
    "from_exported",
    "from_onnx",
    "from_torch",
    "load",
    "load_model",
    "op",
    "reference",
    "schedule",
]
