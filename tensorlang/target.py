"""The compilation target: this machine's CPU, and the one place where target choices are made.

LLVM gets the host CPU name and its features (without them the code is many times slower), opt level 3,
and the new pass manager.

>>> t = host_target()
>>> t.cpu == __import__("llvmlite.binding", fromlist=["x"]).get_host_cpu_name()
True
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import llvmlite.binding as llvm

_lock = threading.Lock()


@dataclass(frozen=True)
class Target:
    """A CPU to compile for: LLVM triple, CPU name and feature string."""

    triple: str
    cpu: str
    features: str

    @property
    def key(self) -> str:
        """A short stable text that identifies the target (for caches and tuning records)."""
        import hashlib
        return f"{self.triple}/{self.cpu}/{hashlib.sha256(self.features.encode()).hexdigest()[:12]}"

    def vector_bits(self) -> int:
        """The widest SIMD register in bits (512 with AVX-512, 256 with AVX2, else 128)."""
        f = self.features
        if "+avx512f" in f:
            return 512
        if "+avx2" in f or "+avx" in f:
            return 256
        return 128


@functools.cache
def _initialise() -> None:
    # llvmlite 0.50: llvm.initialize() raises; targets and printers are initialised explicitly
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    from .codegen_llvm import PARALLEL_FOR
    from .threadpool import parallel_for_address
    llvm.add_symbol(PARALLEL_FOR, parallel_for_address())


def host_target() -> Target:
    """The machine this process runs on (LLVM's process triple, host CPU name and host features).

    >>> t = host_target()
    >>> t.triple == llvm.get_process_triple(), t.vector_bits() in (128, 256, 512)
    (True, True)
    """
    _initialise()
    return Target(llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten())


def new_target_machine(target: Target, reloc: str = "default", codemodel: str = "jitdefault"):
    """A new LLVM TargetMachine for `target` at opt level 3 (shared objects need reloc='pic', codemodel='default').

    An MCJIT engine takes ownership of the target machine it is given, so each engine needs its own.

    >>> t = host_target()
    >>> new_target_machine(t) is new_target_machine(t), new_target_machine(t, "pic", "default").triple == t.triple
    (False, True)
    """
    _initialise()
    t = llvm.Target.from_triple(target.triple)
    return t.create_target_machine(cpu=target.cpu, features=target.features, opt=3, reloc=reloc,
                                   codemodel=codemodel)


@functools.cache
def target_machine(target: Target, reloc: str = "default", codemodel: str = "jitdefault"):
    """A shared TargetMachine for optimising and printing (never hand it to an engine), one per (target, reloc,
    codemodel).

    >>> target_machine(host_target()) is target_machine(host_target())
    True
    """
    return new_target_machine(target, reloc, codemodel)


def optimize(module_ref, tm) -> None:
    """Run the O2 pipeline of the new pass manager (with the loop vectorizer, without the SLP vectorizer) over a
    parsed module, in place. Not O3: on the hand schedules O2 runs as fast or faster (O3's extra loop
    transformations hurt conv2d's register tile) and builds faster. Not the SLP vectorizer: LLVM 22's miscompiled
    an integer clamp of selects read from a cached copy of an input; our vectorized loops are vectors already, and
    the tuned and picked kernels run as fast without it.

    >>> mod = llvm.parse_assembly("define i32 @five() {\\n  %a = add i32 2, 3\\n  ret i32 %a\\n}")
    >>> optimize(mod, target_machine(host_target()))
    >>> "ret i32 5" in str(mod)
    True
    """
    pto = llvm.create_pipeline_tuning_options(speed_level=2)
    pto.loop_vectorization = True
    pto.slp_vectorization = False
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    try:
        mpm.run(module_ref, pb)
    finally:
        # close in this order, now: a pass builder collected after its module frees the module's analyses twice
        mpm.close()
        pb.close()
        pto.close()


def optimized_module(llvm_ir: str, target: Target, tm):
    """Parse LLVM IR text for `target`, verify it and run O2 on it with the target machine `tm` (hold `_lock`);
    return the module ref.

    >>> t, ir = host_target(), "define i32 @five() {\\n  %a = add i32 2, 3\\n  ret i32 %a\\n}"
    >>> with _lock:
    ...     mod = optimized_module(ir, t, target_machine(t))
    >>> mod.triple == t.triple, "ret i32 5" in str(mod)
    (True, True)
    """
    mod = llvm.parse_assembly(llvm_ir)
    mod.triple = target.triple
    mod.data_layout = str(tm.target_data)
    mod.verify()
    optimize(mod, tm)
    return mod


def compile_ir(llvm_ir: str, target: Target):
    """Parse, verify, optimise and JIT-compile LLVM IR text; return (engine, optimised module ref).

    >>> import ctypes
    >>> ir = "define i32 @add1(i32 %x) {\\n  %y = add i32 %x, 1\\n  ret i32 %y\\n}"
    >>> engine, mod = compile_ir(ir, host_target())
    >>> ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(engine.get_function_address("add1"))(41)
    42
    """
    with _lock:
        mod = optimized_module(llvm_ir, target, target_machine(target))
        engine = llvm.create_mcjit_compiler(mod, new_target_machine(target))
        engine.finalize_object()
        return engine, mod


def compile_object(llvm_ir: str, target: Target) -> bytes:
    """Parse, verify and optimise LLVM IR text, and return the machine code as an object file (for the JIT's
    code model: load it in another process with :func:`load_object`).

    >>> ir = "define i32 @add1(i32 %x) {\\n  %y = add i32 %x, 1\\n  ret i32 %y\\n}"
    >>> compile_object(ir, host_target())[:4]
    b'\\x7fELF'
    """
    with _lock:
        tm = target_machine(target)
        return tm.emit_object(optimized_module(llvm_ir, target, tm))


def load_object(data: bytes, target: Target):
    """Load an object file made by :func:`compile_object` into a new MCJIT engine and return the engine
    (look functions up with ``engine.get_function_address(name)``).

    >>> import ctypes
    >>> ir = "define i32 @add1(i32 %x) {\\n  %y = add i32 %x, 1\\n  ret i32 %y\\n}"
    >>> engine = load_object(compile_object(ir, host_target()), host_target())
    >>> ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(engine.get_function_address("add1"))(1)
    2
    """
    with _lock:
        tm = target_machine(target)
        empty = llvm.parse_assembly(f'target triple = "{target.triple}"\n')
        empty.data_layout = str(tm.target_data)
        engine = llvm.create_mcjit_compiler(empty, new_target_machine(target))
        engine.add_object_file(llvm.ObjectFileRef.from_data(data))
        engine.finalize_object()
        return engine


class MachineCode:
    """Machine code in an LLVM engine, and the kernel function `name` in it; frees the temporaries the kernel
    keeps between calls (its `NAME_release_workspace`, see `codegen_llvm._Emitter.allocate`) before the code goes.
    Hold it as long as the function may run.

    >>> import tensorlang as tl
    >>> from tensorlang.codegen_llvm import emit_module
    >>> s = tl.schedule(tl.op("def f(A: f32[N]) -> C:\\n    B[i] = A[i] * 2.0\\n    C[i] = B[i] + 1.0"), N=65536)
    >>> engine, _ = compile_ir(str(emit_module(s.lowered(), host_target().triple)), host_target())
    >>> code = MachineCode(engine, "f")
    >>> code.address != 0
    True
    >>> del code  # frees the kept block, then the engine
    """

    def __init__(self, engine, name: str):
        import ctypes

        from .codegen_llvm import RELEASE_SUFFIX
        self.engine = engine
        self.address = engine.get_function_address(name)
        release = engine.get_function_address(name + RELEASE_SUFFIX)  # none in object files made before it was
        self._release = ctypes.CFUNCTYPE(None)(release) if release else None

    def release(self) -> None:
        """Free the temporaries the kernel keeps (a later call allocates them again)."""
        if self._release is not None:
            self._release()

    def __del__(self):
        self.release()


@functools.cache
def cache_sizes() -> tuple[int, int]:
    """(L1 data cache, L2 cache) of this machine's first CPU in bytes, from /sys (32 KiB and 1 MiB where it does
    not say). The auto-scheduler sizes its blocks and rules out configs with them.

    >>> l1, l2 = cache_sizes()
    >>> 8 * 1024 <= l1 <= l2
    True
    """
    import glob
    found = {}
    for d in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(f"{d}/level") as f:
                level = int(f.read())
            with open(f"{d}/type") as f:
                kind = f.read().strip()
            with open(f"{d}/size") as f:
                text = f.read().strip().upper()
        except (OSError, ValueError):
            continue
        scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
        try:
            size = int(text.rstrip("KM")) * scale
        except ValueError:
            continue
        if kind in ("Data", "Unified"):
            found[level] = size
    return found.get(1, 32 * 1024), found.get(2, 1024 * 1024)
