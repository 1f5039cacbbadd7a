"""Ahead-of-time export (tensorlang/export.py, `tensorlang export`, `kernel.export`, `tl.load`): every hand-scheduled
workload in every format, built and run from C and loaded back into Python, compared with numpy."""
import ctypes.util
import json
import os
import re
import shutil
import subprocess
import threading

import llvmlite.binding as llvm
import numpy as np
import pytest
from oracle import assert_close

import tensorlang as tl
from tensorlang import export as ex
from tensorlang import schedules
from tensorlang.cli.main import main

CC = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc, gcc or clang) on PATH")
HAND = [w for w in schedules.WORKLOADS.values() if w.hand_schedule is not None]
OTHERS = [w for w in schedules.WORKLOADS.values() if w.hand_schedule is None]


def reduction_len(w, sizes):
    return {"matmul": sizes.get("K", 1), "conv2d": sizes.get("C", 1) * sizes.get("R", 1) * sizes.get("S", 1),
            "depthwise_conv2d": sizes.get("R", 1) * sizes.get("S", 1), "softmax": sizes.get("D", 1)}.get(w.name, 1)


def hand(w, preset="small"):
    s = tl.schedule(tl.op(w.source), **w.sizes(preset))
    w.hand_schedule(s)
    return s


def reference(w, sizes, inputs):
    ref = w.reference(*inputs, **sizes)
    return list(ref) if isinstance(ref, tuple) else [ref]


def build_and_run(files, threads=None):
    """Build NAME_example with the exact command its first comment gives, run it, and read back the outputs."""
    d = os.path.dirname(files["example"])
    text = open(files["example"]).read()
    command = text.split("Build and run, in this directory:\n *   ", 1)[1].split("\n", 1)[0]
    r = subprocess.run(command, shell=True, cwd=d, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{command}\n{r.stderr}"
    name = os.path.basename(files["example"])[:-len("_example.c")]
    env = dict(os.environ)
    if threads is not None:
        env["TENSORLANG_NUM_THREADS"] = env["OMP_NUM_THREADS"] = str(threads)
    out = os.path.join(d, "out.bin")
    r = subprocess.run([f"./{name}_example", out], cwd=d, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout, np.fromfile(out, dtype=np.uint8)


def split_outputs(raw, kernel):
    outs, at = [], 0
    for n in kernel.output_shapes:
        dt, shape = np.dtype(kernel.output_dtypes[n]), kernel.output_shapes[n]
        size = int(np.prod(shape)) * dt.itemsize
        outs.append(raw[at:at + size].view(dt).reshape(shape))
        at += size
    assert at == raw.size
    return outs


def check_example(files, w, sizes, kernel, threads=None):
    stdout, raw = build_and_run(files, threads)
    inputs = ex.example_inputs(kernel)
    got = split_outputs(raw, kernel)
    for g, e in zip(got, reference(w, sizes, inputs)):
        assert_close(g, e, reduction_len(w, sizes))
    first = next(iter(kernel.output_shapes))
    assert f"{first}: shape [" in stdout and "ran in" in stdout
    # the printed checksum is the sum of the output
    printed = float(stdout.split(f"{first}: shape ", 1)[1].split("sum ", 1)[1].split(",")[0])
    assert printed == pytest.approx(float(got[0].astype(np.float64).sum()), rel=1e-6, abs=1e-6)


@needs_cc
@pytest.mark.parametrize("w", HAND, ids=lambda w: w.name)
def test_shared_library_loads_back_and_runs_from_c(w, tmp_path):
    s = hand(w)
    files = ex.export(s, tmp_path, "so")
    assert sorted(files) == ["example", "header", "library"]
    assert os.path.basename(files["library"]) == f"lib{w.name}.so"
    k = tl.load(files["library"])
    assert k.sizes == s.sizes and k.op.name == w.name
    assert k.output_shapes == {o: s.bound.shapes[o] for o in s.op.outputs}
    inputs = w.make_inputs(s.sizes, np.random.default_rng(5))
    for got, e in zip([k(*inputs)], reference(w, s.sizes, inputs)):
        assert_close(got, e, reduction_len(w, s.sizes))
    check_example(files, w, s.sizes, k)
    header = open(files["header"]).read()
    assert f"#ifndef TENSORLANG_{w.name.upper()}_H" in header and '#include <stdint.h>' in header
    assert 'extern "C"' in header and "row-major" in header and "Returns 0 on success" in header
    assert "s = tl.schedule(op" in header  # the schedule, as the Python calls that rebuild it
    for b in k.input_shapes:
        assert f"const float *TENSORLANG_RESTRICT {b}" in header


@needs_cc
@pytest.mark.parametrize("w", HAND, ids=lambda w: w.name)
def test_object_and_assembly_link_into_the_example(w, tmp_path):
    s = hand(w)
    k = tl.build(s)
    files = ex.export(k, tmp_path / "o", "o")
    assert sorted(files) == ["example", "header", "object", "runtime"]
    check_example(files, w, s.sizes, k)
    files = ex.export(k, tmp_path / "asm", "asm")
    asm = open(files["asm"]).read()
    assert f"{w.name}:" in asm and f".globl\t{w.name}" in asm
    check_example(files, w, s.sizes, k)  # the GNU assembler reads LLVM's assembly


@pytest.mark.parametrize("w", HAND, ids=lambda w: w.name)
def test_llvm_ir_parses(w, tmp_path):
    files = ex.export(hand(w), tmp_path, "ll")
    text = open(files["llvm"]).read()
    mod = llvm.parse_assembly(text)
    mod.verify()
    names = {f.name for f in mod.functions}
    assert w.name in names and f"{w.name}__tensorlang_meta" in names
    assert os.path.isfile(files["runtime"]) and os.path.isfile(files["example"])


@needs_cc
@pytest.mark.parametrize("w", HAND, ids=lambda w: w.name)
def test_c_source_builds_and_runs(w, tmp_path):
    s = hand(w)
    k = tl.build(s)
    files = ex.export(k, tmp_path, "c")
    assert sorted(files) == ["example", "header", "source"]
    example = open(files["example"]).read()
    assert "-O3 -march=native" in example
    assert ("-fopenmp" in example) == ("# parallel" in s.lower())
    check_example(files, w, s.sizes, k)


@needs_cc
@pytest.mark.parametrize("w", OTHERS, ids=lambda w: w.name)
def test_default_schedules_export_too(w, tmp_path):
    sizes = w.sizes("small")
    tl.build(tl.op(w.source), **sizes).export(tmp_path)
    k = tl.load(tmp_path)
    inputs = w.make_inputs(sizes, np.random.default_rng(2))
    for got, e in zip([k(*inputs)], reference(w, sizes, inputs)):
        assert_close(got, e, 10 ** 4)


@needs_cc
@pytest.mark.parametrize("threads", [1, 2])
def test_parallel_kernel_runs_on_the_library_pool(threads, tmp_path, monkeypatch):
    w = schedules.get("matmul")
    s = hand(w)
    assert "# parallel" in s.lower()
    files = ex.export(s, tmp_path, "so")
    k = tl.load(files["library"])
    assert not hasattr(k._lib, "tensorlang_parallel_for")  # hidden: the library uses its own pool, exports none
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", str(threads))
    inputs = w.make_inputs(s.sizes, np.random.default_rng(1))
    assert_close(k(*inputs), w.reference(*inputs), s.sizes["K"])
    check_example(files, w, s.sizes, k, threads=threads)
    # concurrent callers take turns on the pool
    results = [None] * 4

    def call(i):
        results[i] = k(*inputs)
    ts = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, results[0])


@needs_cc
def test_loaded_kernel_checks_arguments_like_a_built_one(tmp_path):
    w = schedules.get("matmul")
    s = hand(w)
    jit = tl.build(s)
    k = tl.load(jit.export(tmp_path, name="mm")["library"])
    assert "loaded from" in repr(k) and k.source("ir").startswith("def mm(")
    with pytest.raises(tl.BuildError, match="holds machine code"):
        k.source("asm")
    A, B = w.make_inputs(s.sizes, np.random.default_rng(0))
    C = np.empty((64, 48), np.float32)
    assert k(A, B, out=C) is C
    assert_close(C, w.reference(A, B), 32)
    bad = [((A,), {}), ((A, B, A), {}), ((A.astype(np.float64), B), {}), ((A[:, :16], B), {}),
           ((np.asfortranarray(A), B), {}), ((A.tolist(), B), {}), ((A, B), {"out": np.empty((64, 48))}),
           ((A, B), {"out": np.empty((48, 64), np.float32)}), ((A, B), {"out": np.empty((64, 96), np.float32)[:, ::2]}),
           ((A, B), {"out": np.frombuffer(bytes(64 * 48 * 4), np.float32).reshape(64, 48)})]
    for args, kw in bad:
        with pytest.raises(tl.BuildError) as want:
            jit(*args, **kw)
        with pytest.raises(tl.BuildError) as got:
            k(*args, **kw)
        assert str(got.value) == str(want.value)
    # a kernel with two outputs: a tuple back, out= a tuple, the example writes both
    two = tl.schedule(tl.op("def two(A: f32[N], B: f32[N]) -> (S, D):\n    S[i] = A[i] + B[i]\n"
                            "    D[i] = A[i] - B[i]"), N=10)
    files = ex.export(two, tmp_path / "two")
    k2 = tl.load(tmp_path / "two")
    a, b = ex.example_inputs(k2)
    S, D = k2(a, b)
    np.testing.assert_array_equal(S, a + b)
    np.testing.assert_array_equal(D, a - b)
    with pytest.raises(tl.BuildError) as got:
        k2(a, b, out=S)
    with pytest.raises(tl.BuildError) as want:
        tl.build(two)(a, b, out=S)
    assert str(got.value) == str(want.value)
    _, raw = build_and_run(files)
    np.testing.assert_array_equal(np.concatenate(split_outputs(raw, k2)), np.concatenate([a + b, a - b]))


def test_load_refuses_what_is_not_a_tensorlang_library(tmp_path):
    with pytest.raises(tl.BuildError, match=r"no such file .*nothing\.so"):
        tl.load(tmp_path / "nothing.so")
    fake = tmp_path / "libfake.so"
    fake.write_text("not an ELF file")
    with pytest.raises(tl.BuildError, match=re.escape(f"load: {fake} is not a shared library this process can load")):
        tl.load(fake)
    (tmp_path / "empty").mkdir()
    with pytest.raises(tl.BuildError, match=r"is a directory; pass the \.so file to load \(found none\)"):
        tl.load(tmp_path / "empty")
    libm = ctypes.util.find_library("m")
    if libm:
        path = next((os.path.join(d, libm) for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                                                     "/lib64", "/usr/lib64") if os.path.exists(os.path.join(d, libm))),
                    None)
        if path:
            with pytest.raises(tl.BuildError, match=re.escape(f"load: {path} is not a tensorlang library")):
                tl.load(path)


def test_check_cpu_compares_the_features():
    host = tl.build(tl.op("def f(A: f32[N]) -> B:\n    B[i] = A[i]"), N=2).target
    meta = {"target": {"cpu": "futurecpu", "features": host.features + ",+avx9000"}}
    with pytest.raises(tl.BuildError, match=r"compiled for the CPU futurecpu, and this CPU .* lacks its features "
                                            r"avx9000; export it again"):
        ex.check_cpu(meta, "lib.so", host)
    ex.check_cpu({"target": {"cpu": "older", "features": "+sse2,-avx512f"}}, "lib.so", host)


@needs_cc
def test_load_refuses_a_library_for_missing_cpu_features(tmp_path, monkeypatch):
    """Through tl.load itself (a test of check_cpu alone would stay green with the check deleted from tl.load): a
    library whose metadata says it was compiled for a feature this CPU lacks is refused, the same library with
    this CPU's features loads."""
    s = tl.schedule(tl.op("def scale(X: f32[N]) -> Y:\n    Y[i] = X[i] * 2.0"), N=8)
    ok = ex.export(s, tmp_path / "ok", "so")["library"]
    assert tl.load(ok)(np.ones(8, np.float32)).tolist() == [2.0] * 8
    real = ex.metadata

    def from_the_future(*args, **kwargs):
        meta = real(*args, **kwargs)
        meta["target"] = dict(meta["target"], cpu="futurecpu", features=meta["target"]["features"] + ",+avx9000")
        return meta
    monkeypatch.setattr(ex, "metadata", from_the_future)
    lib = ex.export(s, tmp_path / "future", "so")["library"]
    with pytest.raises(tl.BuildError, match=re.escape(f"load: {lib} was compiled for the CPU futurecpu, and this CPU")
                       + r" .* lacks its features avx9000; export it again on this machine"):
        tl.load(lib)


@pytest.mark.parametrize("bad", ["9lives", "mat-mul", "", "int", "free", "tensorlang_x", "x" * 201])
def test_bad_names_are_refused(bad, tmp_path, capsys):
    assert main(["export", "matmul", "--preset", "small", "--format", "ll", "-o", str(tmp_path), "--name", bad]) == 2
    err = capsys.readouterr().err
    assert "--name: name" in err and "Traceback" not in err


def export_error(capsys, *args):
    code = main(["export", *args])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    return err


def test_cli_errors_name_the_flag(tmp_path, capsys):
    d = str(tmp_path / "out")
    assert "unknown workload 'nosuch'; workloads: matmul" in export_error(capsys, "nosuch", "-o", d)
    assert ("--format: unknown format 'exe'; formats: so (shared library), o (object file), c (C source), "
            "ll (LLVM IR), asm (assembly)") in export_error(capsys, "matmul", "--format", "exe", "-o", d)
    missing = str(tmp_path / "missing.json")
    assert f"--schedule: no such file {missing}" in export_error(capsys, "matmul", "--schedule", missing, "-o", d)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert f"--schedule: {bad} is not JSON" in export_error(capsys, "matmul", "--schedule", str(bad), "-o", d)
    bad.write_text("[" * 100000 + "]" * 100000)
    assert f"--schedule: {bad} is not JSON (maximum recursion depth" in export_error(capsys, "matmul", "--schedule",
                                                                                    str(bad), "-o", d)
    bad.write_text('{"a": 1}')
    assert f"--schedule: {bad} is not a tensorlang schedule" in export_error(capsys, "matmul", "--schedule",
                                                                             str(bad), "-o", d)
    other = tmp_path / "softmax.json"
    other.write_text(hand(schedules.get("softmax")).to_json())
    err = export_error(capsys, "matmul", "--schedule", str(other), "-o", d)
    assert f"--schedule: {other} is a schedule of the program 'softmax', not of the workload matmul" in err
    mine = tmp_path / "matmul.json"
    mine.write_text(hand(schedules.get("matmul")).to_json())
    err = export_error(capsys, "matmul", "--preset", "512", "--schedule", str(mine), "-o", d)
    assert "is for the sizes M=64, N=48, K=32, not M=512, N=512, K=512" in err
    db = str(tmp_path / "empty.db")
    err = export_error(capsys, "matmul", "--preset", "small", "--best", "--db", db, "-o", d)
    assert "--best: no tuning record for matmul(M=64, N=48, K=32) on" in err
    assert "run: tensorlang tune matmul --preset small --trials 100" in err and not os.path.exists(db)
    afile = tmp_path / "afile"
    afile.write_text("")
    assert f"-o: {afile} exists and is not a directory" in export_error(capsys, "matmul", "-o", str(afile))
    assert f"-o: cannot create the directory {afile}/sub" in export_error(capsys, "matmul", "-o", f"{afile}/sub")
    err = export_error(capsys, "matmul", "--preset", "small", "-o", d, "--cc", "no-such-cc")
    assert "--cc: C compiler 'no-such-cc' not found on PATH" in err
    err = export_error(capsys, "matmul", "--preset", "small", "-o", d, "--cc", "gcc '")
    assert "--cc: C compiler \"gcc '\" is not a command a shell can split: No closing quotation" in err
    for prim, what in (({"prim": "reorder", "stage": "C", "axes": 5}, "reorder axes must be a list of loop names"),
                       ({"prim": "cache_read", "stage": "C", "tensor": "B", "axis": "k", "layout": 5},
                        "cache_read layout must be a list of [dimension, block] pairs"),
                       ({"prim": "compute_at", "stage": "C", "consumer": ["x"], "axis": "i"},
                        "compute_at consumer must be a name (a string)")):
        bad.write_text(json.dumps(dict(json.loads(mine.read_text()), primitives=[prim])))
        assert f"--schedule: {bad}: from_json: {what}, got " in export_error(capsys, "matmul", "--schedule",
                                                                               str(bad), "-o", d)
    with pytest.raises(SystemExit) as e:
        main(["export", "matmul", "--best", "--schedule", str(mine), "-o", d])
    assert e.value.code == 2
    assert not os.path.exists(d)  # every check comes before the folder is made


@pytest.mark.skipif(shutil.which("false") is None, reason="needs the `false` program")
def test_cli_export_that_fails_midway_removes_the_folder_it_made_and_only_that(tmp_path, capsys):
    made = tmp_path / "new" / "out"
    err = export_error(capsys, "softmax", "--preset", "small", "--format", "so", "--cc", "false", "-o", str(made))
    assert "export: linking" in err and not (tmp_path / "new").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("kept")
    export_error(capsys, "softmax", "--preset", "small", "--format", "so", "--cc", "false", "-o", str(mine / "out"))
    assert os.listdir(mine) == ["notes.txt"]


def test_python_api_errors(tmp_path):
    s = hand(schedules.get("softmax"))
    with pytest.raises(tl.BuildError, match=r"format 'dll' is not one of so \(shared library\)"):
        ex.export(s, tmp_path, "dll")
    with pytest.raises(tl.BuildError, match="export\\(\\) takes a Kernel"):
        ex.export("softmax", tmp_path)
    with pytest.raises(tl.BuildError, match="is a C keyword"):
        tl.build(s).export(tmp_path, name="while")
    with pytest.raises(tl.BuildError, match="path: the output directory is an empty string"):
        ex.export(s, "", "c")


@pytest.mark.skipif(shutil.which("false") is None, reason="needs the `false` program")
def test_a_link_that_fails_is_a_build_error_with_the_command(tmp_path):
    s = hand(schedules.get("softmax"))
    with pytest.raises(tl.BuildError, match=r"export: linking .*libsoftmax.so failed:\n  false .*-shared"):
        ex.export(s, tmp_path, "so", cc="false")


@needs_cc
@pytest.mark.parametrize("change,message", [
    ({"tensorlang_export": 999}, "metadata format 999, expected 1"),
    ({"name": "not_there"}, "no function not_there"),
])
def test_load_refuses_a_library_with_metadata_of_another_format(tmp_path, monkeypatch, change, message):
    real = ex.metadata
    monkeypatch.setattr(ex, "metadata", lambda *a, **k: dict(real(*a, **k), **change))
    lib = ex.export(tl.schedule(tl.op("def scale(X: f32[N]) -> Y:\n    Y[i] = X[i] * 2.0"), N=8), tmp_path)["library"]
    with pytest.raises(tl.BuildError, match=re.escape(f"load: {lib} has unreadable tensorlang metadata ({message}); "
                                                      "export it again with this tensorlang version")):
        tl.load(lib)


@needs_cc
def test_cli_exports_with_each_schedule_source(tmp_path, capsys):
    from tensorlang.tuner.records.database import Database, Record
    from tensorlang.tuner.task import Task
    # default: the hand schedule
    assert main(["export", "softmax", "--preset", "small", "-o", str(tmp_path / "a"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["format"] == "so" and out["schedule"] == "the hand schedule of schedules/softmax.py"
    assert "-lsoftmax" in out["build_example"]
    k = tl.load(out["files"]["library"])
    x = ex.example_inputs(k)[0]
    assert_close(k(x), schedules.get("softmax").reference(x), 33)
    assert "Schedule: the hand schedule of schedules/softmax.py" in open(out["files"]["header"]).read()
    # --schedule FILE (at the file's sizes), with another name
    mm = hand(schedules.get("matmul"))
    path = tmp_path / "mm.json"
    path.write_text(mm.to_json())
    assert main(["export", "matmul", "--schedule", str(path), "--format", "ll", "--name", "mm64",
                 "-o", str(tmp_path / "b")]) == 0
    text = capsys.readouterr().out
    assert "exported mm64 (M=64, N=48, K=32; from" in text and "mm64.ll" in text
    # --best: the best record of the database
    task = Task.create("matmul", sizes=mm.sizes, threads=1)
    db = str(tmp_path / "t.db")
    with Database(db) as d:
        d.add(Record(task.key, "matmul", task.sizes, task.target, {}, mm.to_json(), times=(1e-4,), trial=7,
                     threads=1, flops=2.0 * 64 * 48 * 32))
    assert main(["export", "matmul", "--preset", "small", "--best", "--threads", "1", "--db", db, "--format", "asm",
                 "-o", str(tmp_path / "c"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schedule"].startswith(f"the best tuned record in {db} (trial 7")
    assert "Schedule: the best tuned record" in open(out["files"]["header"]).read()


SMALL_INTS = """def small(A: u8[N], B: i8[N], C: u16[N], D: i16[N], E: u32[N], F: u64[N]) -> (P, Q, R, S, T, U):
    P[i] = A[i] * 3 + u8(B[i])
    Q[i] = B[i] - 100
    R[i] = max(C[i], u16(A[i])) // 3
    S[i] = D[i] * 300 + i16(B[i])
    T[i] = E[i] - u32(C[i])
    U[i] = F[i] // 7 + u64(E[i])
"""


@needs_cc
@pytest.mark.parametrize("fmt", ["so", "c"])
def test_small_integer_types_export_and_run(fmt, tmp_path):
    k = tl.build(tl.op(SMALL_INTS), N=37)
    files = ex.export(k, tmp_path, fmt)
    stdout, raw = build_and_run(files)
    want = k(*ex.example_inputs(k))
    for name, got, w in zip(k.output_shapes, split_outputs(raw, k), want):
        np.testing.assert_array_equal(got, w, err_msg=name)
        # the example prints each output's sum and first values in its own type (signed, unsigned, 1 to 4 bytes)
        line = stdout.split(f"{name}: shape [37], sum ", 1)[1].split("\n", 1)[0]
        assert line == f"{float(w.astype(np.float64).sum()):.9g}, first " + " ".join(f"{v:.9g}" for v in w[:4])
    header = open(files["header"]).read()
    for ct, name in [("uint8_t", "A"), ("int8_t", "B"), ("uint16_t", "C"), ("int16_t", "D"), ("uint32_t", "E"),
                     ("uint64_t", "F")]:
        assert f"const {ct} *TENSORLANG_RESTRICT {name}" in header
