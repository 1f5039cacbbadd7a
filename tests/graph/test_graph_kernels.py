"""The graph compiler's kernels: one function compiles every node's program through tl.build, and a disk cache
keeps their machine code (keyed so that a changed compiler or tuning database never serves stale code)."""
from __future__ import annotations

import numpy as np
import pytest

from tensorlang.graph import kernels

PROGRAM = "def triple(X: f32[5]) -> Y:\n    Y[i] = X[i] * 3.0\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORLANG_KERNEL_CACHE", str(tmp_path / "kernels"))
    kernels._memory.clear()
    yield tmp_path / "kernels"
    kernels._memory.clear()


def run(k):
    x, y = np.arange(5, dtype=np.float32), np.empty(5, np.float32)
    k.call(x.ctypes.data, y.ctypes.data)
    return y


def test_a_program_is_built_once_then_loaded_from_the_disk_cache(cache):
    first = kernels.compile_program(PROGRAM)
    assert not first.cached and first.schedule_source in ("tuned", "hand", "auto", "naive")
    assert len(list(cache.glob("*.o"))) == 1
    kernels._memory.clear()
    again = kernels.compile_program(PROGRAM)
    assert again.cached and again.schedule_json == first.schedule_json
    np.testing.assert_array_equal(run(again), np.arange(5) * 3.0)
    assert kernels.compile_program(PROGRAM) is again  # this process keeps it


def test_a_damaged_object_file_is_built_again(cache):
    kernels.compile_program(PROGRAM)
    for obj in cache.glob("*.o"):
        obj.write_bytes(b"not an object file")
    kernels._memory.clear()
    k = kernels.compile_program(PROGRAM)
    assert not k.cached
    np.testing.assert_array_equal(run(k), np.arange(5) * 3.0)


def test_a_changed_tuning_database_or_compiler_changes_the_key(cache, tmp_path, monkeypatch):
    from tensorlang.target import host_target
    db = tmp_path / "tuning.db"
    monkeypatch.setenv("TENSORLANG_DB", str(db))
    before = kernels._key(PROGRAM, host_target(), 2)
    assert kernels._key(PROGRAM, host_target(), 1) != before  # schedules are chosen for a thread count
    db.write_bytes(b"records")
    assert kernels._key(PROGRAM, host_target(), 2) != before
    monkeypatch.setattr(kernels, "code_fingerprint", lambda: "another compiler")
    assert kernels._key(PROGRAM, host_target(), 2) != before


def test_the_cache_can_be_off_and_cleared(cache, monkeypatch):
    kernels.compile_program(PROGRAM)
    assert kernels.clear_kernel_cache() == 2 and not list(cache.glob("*"))
    monkeypatch.setenv("TENSORLANG_KERNEL_CACHE", "off")
    kernels._memory.clear()
    assert kernels.cache_dir() is None and not kernels.compile_program(PROGRAM).cached
    monkeypatch.setenv("TENSORLANG_KERNEL_CACHE", "relative/path")
    with pytest.raises(Exception, match="TENSORLANG_KERNEL_CACHE='relative/path' must be an absolute path"):
        kernels.cache_dir()


def test_a_new_kernel_is_compiled_to_machine_code_once(cache, monkeypatch):
    """One LLVM code generation per new kernel: the object file the process loads is the one the cache keeps."""
    import llvmlite.binding as llvm
    codegens = []
    emit, engine = llvm.TargetMachine.emit_object, llvm.create_mcjit_compiler

    def counted_emit(self, module):
        codegens.append("object")
        return emit(self, module)

    def counted_engine(module, tm):
        if any(not f.is_declaration for f in module.functions):  # an engine that generates the code itself
            codegens.append("jit")
        return engine(module, tm)
    monkeypatch.setattr(llvm.TargetMachine, "emit_object", counted_emit)
    monkeypatch.setattr(llvm, "create_mcjit_compiler", counted_engine)
    k = kernels.compile_program("def once(X: f32[5]) -> Y:\n    Y[i] = X[i] * 3.0 + 1.0\n")  # built nowhere else
    assert codegens == ["object"] and not k.cached
    np.testing.assert_array_equal(run(k), np.arange(5) * 3.0 + 1.0)
    assert len(list(cache.glob("*.o"))) == 1
