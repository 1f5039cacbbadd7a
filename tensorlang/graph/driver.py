"""A model's kernel calls as one machine-code function, so that a call of the model crosses from Python to machine
code once rather than once a kernel.

A model runs its kernels in a fixed order on addresses that are a buffer's base (the arena, an input, an output, a
constant) plus a fixed byte offset (see :class:`~tensorlang.graph.model.Step`). Looping over them in Python costs a
few microseconds a kernel (the addresses as Python ints, a ctypes call): about 0.2 ms a call for a MobileNet of a
hundred kernels that run 1.5 ms in all. :func:`compile_steps` emits ``i32 tl_steps_N(ptr bases, ptr failed)``,
which loads each base from the array ``bases``, calls each kernel on its addresses and stops at the first nonzero
status, writing that step's number to ``*failed``; the kernels are called at their addresses in this process (each
declared as a symbol bound to its address), so the function is made when the model is, and lives as long as its
kernels.

>>> from tensorlang.graph.kernels import compile_program
>>> import numpy as np
>>> k = compile_program("def twice(X: f32[3]) -> Y:\\n    Y[i] = X[i] * 2.0\\n")
>>> steps = compile_steps([(k, [(0, 0), (1, 4)])])  # Y = twice(X) on base 0, written 4 bytes into base 1
>>> x, y = np.arange(3, dtype=np.float32), np.zeros(4, np.float32)
>>> steps.run([x.ctypes.data, y.ctypes.data]), y.tolist()
((0, -1), [0.0, 0.0, 2.0, 4.0])
"""
from __future__ import annotations

import ctypes
import itertools
import threading
from typing import TYPE_CHECKING

import llvmlite.binding as llvm
import llvmlite.ir as ll

if TYPE_CHECKING:
    from .kernels import CompiledKernel

I32, I64, I8, PTR = ll.IntType(32), ll.IntType(64), ll.IntType(8), ll.PointerType()
_numbers = itertools.count()
_lock = threading.Lock()


class CompiledSteps:
    """Kernel calls in order as one function: `run(bases)` returns (0, -1) when every kernel returned 0, else
    (status, number of the step that returned it), the steps after it not run. Holds the kernels (their machine
    code must outlive the function that calls it).

    Example::

        steps = compile_steps([(kernel, [(0, 0), (1, 0)])])
        status, failed = steps.run([x.ctypes.data, y.ctypes.data])
    """

    def __init__(self, engine, name: str, kernels: list, n_bases: int):
        self._engine = engine
        self._kernels = kernels
        self._n_bases = n_bases
        self._fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p)(
            engine.get_function_address(name))

    def run(self, bases: list[int]) -> tuple[int, int]:
        """Run every step on the base addresses `bases` (as many as the steps index); (status, failing step)."""
        if len(bases) < self._n_bases:
            raise ValueError(f"compiled steps: {len(bases)} base addresses given, the steps use {self._n_bases}")
        table = (ctypes.c_uint64 * max(1, len(bases)))(*bases)
        failed = ctypes.c_int32(-1)
        status = self._fn(table, ctypes.byref(failed))
        return status, failed.value


def emit_steps(name: str, calls: list[tuple[str, list[tuple[int, int]]]]) -> ll.Module:
    """The LLVM module of ``i32 name(ptr bases, ptr failed)`` calling, in order, each external function named in
    `calls` (``i32 f(ptr, ...)``) on ``bases[b] + offset`` for its (b, offset) arguments.

    >>> print(emit_steps("run", [("k", [(0, 8)])]).get_global("run").args[0].type)
    ptr
    """
    module = ll.Module(name=name)
    fn = ll.Function(module, ll.FunctionType(I32, [PTR, PTR]), name)
    bases, failed = fn.args
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    loaded: dict[int, ll.Value] = {}
    for i, (callee, args) in enumerate(calls):
        addresses = []
        for base, offset in args:
            if base not in loaded:
                loaded[base] = b.load(b.gep(bases, [I64(base)], source_etype=I64, inbounds=True), typ=PTR)
            addresses.append(b.gep(loaded[base], [I64(offset)], source_etype=I8) if offset else loaded[base])
        kernel = ll.Function(module, ll.FunctionType(I32, [PTR] * len(args)), callee)
        status = b.call(kernel, addresses)
        bad = fn.append_basic_block(f"step{i}_failed")
        ok = fn.append_basic_block(f"step{i}_done")
        b.cbranch(b.icmp_signed("!=", status, I32(0)), bad, ok)
        b.position_at_end(bad)
        b.store(I32(i), failed)
        b.ret(status)
        b.position_at_end(ok)
    b.ret(I32(0))
    return module


def compile_steps(steps: list[tuple[CompiledKernel, list[tuple[int, int]]]]) -> CompiledSteps:
    """The function running `steps` ((kernel, [(base index, byte offset) of each argument]), in order).

    Example::

        run = compile_steps([(k1, [(1, 0), (0, 0)]), (k2, [(0, 0), (2, 0)])])   # arena, input, output
        status, failed = run.run([arena_address, x_address, y_address])
    """
    from ..target import compile_ir, host_target
    with _lock:
        number = next(_numbers)
    name = f"tl_steps_{number}"
    calls = []
    for i, (kernel, args) in enumerate(steps):
        symbol = f"{name}_k{i}"
        assert kernel.keep is not None  # every compiled kernel holds its MachineCode (kernels._machine_code)
        llvm.add_symbol(symbol, kernel.keep.address)
        calls.append((symbol, list(args)))
    engine, _ = compile_ir(str(emit_steps(name, calls)), host_target())
    n_bases = 1 + max((base for _, args in steps for base, _ in args), default=-1)
    return CompiledSteps(engine, name, [k for k, _ in steps], n_bases)
