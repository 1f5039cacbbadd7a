"""The thread pool behind parallel loops (tensorlang/threadpool.py, csrc/tensorlang_runtime.c): the native pool
is the one the JIT uses where a C compiler exists; the Python pool still computes the same results, and falling
back to it says why. Each case that changes the environment runs in a fresh interpreter.

Run: ``.venv/bin/pytest tests/codegen/test_threadpool.py -q``
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import tensorlang as tl

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: `python -c` running the command line as the console script does
CLI_MAIN = "import sys, tensorlang.cli.main; sys.exit(tensorlang.cli.main.main())"
HAVE_CC = any(shutil.which(c) for c in ("cc", "gcc", "clang"))

# a parallel loop inside another parallel stage's loop nest, and a reduction: results any pool must get right
PROGRAM = """
import os, sys, warnings
import numpy as np
import tensorlang as tl
from tensorlang import threadpool
op = tl.op("def f(A: f32[M, N]) -> B:\\n    T[m, n] = A[m, n] * 2.0\\n    B[m] += T[m, n]\\n")
s = tl.schedule(op, M=37, N=29)
s["T"].parallel("m")
mo, mi = s["B"].split("m", 5)
s["B"].parallel(mo)
A = np.random.default_rng(0).standard_normal((37, 29)).astype(np.float32)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    got = tl.build(s)(A)
np.testing.assert_allclose(got, (2 * A.astype(np.float64)).sum(1), rtol=1e-5, atol=1e-4)
print("backend", threadpool.backend())
for w in caught:
    print("warning", w.message)
"""


def run_program(tmp_path, code=PROGRAM, **env) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=ROOT, XDG_CACHE_HOME=str(tmp_path / "cache"), TENSORLANG_NUM_THREADS="3")
    full.update(env)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler: the native pool cannot be built")
def test_native_pool_is_built_once_into_the_cache(tmp_path):
    r = run_program(tmp_path)
    assert "backend native" in r.stdout and "warning" not in r.stdout
    built = list((tmp_path / "cache" / "tensorlang" / "runtime").glob("tensorlang_runtime-*.so"))
    assert len(built) == 1
    inode = built[0].stat().st_ino
    run_program(tmp_path)                                              # a second process reuses the library
    assert built[0].stat().st_ino == inode                             # (a rebuild would install a new file)
    assert list((tmp_path / "cache" / "tensorlang" / "runtime").glob("tensorlang_runtime-*.so")) == built


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler: the native pool cannot be built")
def test_building_the_runtime_deletes_libraries_unused_for_30_days(tmp_path):
    from tensorlang.threadpool import STALE_DAYS
    folder = tmp_path / "cache" / "tensorlang" / "runtime"
    folder.mkdir(parents=True)
    stale, recent, other = (folder / "tensorlang_runtime-old.so", folder / "tensorlang_runtime-recent.so",
                            folder / "unrelated.so")
    for f in (stale, recent, other):
        f.write_bytes(b"not a library")
    old = os.path.getmtime(stale) - (STALE_DAYS + 1) * 86400
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    run_program(tmp_path)
    assert not stale.exists() and recent.exists() and other.exists()
    built = [f for f in folder.glob("tensorlang_runtime-*.so") if f != recent]
    assert len(built) == 1
    # using the library marks it as used: an old build in use is never the stale one
    os.utime(built[0], (old, old))
    run_program(tmp_path)
    assert os.path.getmtime(built[0]) > old + STALE_DAYS * 86400


def test_python_pool_on_request_computes_the_same_without_a_warning(tmp_path):
    r = run_program(tmp_path, TENSORLANG_THREAD_POOL="python")
    assert "backend python" in r.stdout and "warning" not in r.stdout


def test_no_compiler_falls_back_to_the_python_pool_and_says_why(tmp_path):
    r = run_program(tmp_path, CC="/nonexistent/cc")
    assert "backend python" in r.stdout
    warning = next(line for line in r.stdout.splitlines() if line.startswith("warning"))
    assert "Python thread pool" in warning and "'/nonexistent/cc'" in warning and "TENSORLANG_THREAD_POOL" in warning


@pytest.mark.skipif(shutil.which("false") is None, reason="needs the `false` program")
def test_a_compiler_that_fails_falls_back_to_the_python_pool_and_says_so(tmp_path):
    r = run_program(tmp_path, CC="false")
    assert "backend python" in r.stdout
    warning = next(line for line in r.stdout.splitlines() if line.startswith("warning"))
    assert "the native pool could not be built: false failed" in warning, warning


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler: the native pool cannot be built")
@pytest.mark.parametrize("spin", ["0", "1", "100000", ""])
def test_spin_setting_any_value_gives_the_same_results(tmp_path, spin):
    r = run_program(tmp_path, TENSORLANG_SPIN_US=spin)
    assert "backend native" in r.stdout and "warning" not in r.stdout


# A kernel `k` with one parallel loop of 4 iterations (B = A * 3 + 1) and its input `A`, for the programs below.
PARALLEL_G = """op = tl.op("def g(A: f32[N]) -> B:\\n    B[i] = A[i] * 3.0 + 1.0\\n")
s = tl.schedule(op, N=256)
io, _ = s["B"].split("i", 64)
s["B"].parallel(io)
k = tl.build(s)
A = np.arange(256, dtype=np.float32)
"""

# After a parallel loop the pool's worker spins for TENSORLANG_SPIN_US microseconds before it sleeps (or until a
# yield shows its CPU wanted by another thread): the process's CPU time while the main thread sleeps is that spinning.
IDLE_CPU = """
import time
import numpy as np
import tensorlang as tl
from tensorlang.threadpool import pool_stats
""" + PARALLEL_G + """\
for _ in range(3):
    np.testing.assert_array_equal(k(A), A * 3 + 1)
t0 = time.process_time()
time.sleep(1.0)
print("given_up", pool_stats()["spins_given_up"], "idle_cpu", time.process_time() - t0)
"""


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler: the native pool cannot be built")
def test_spin_setting_sets_how_long_the_workers_spin(tmp_path):
    """The variable takes effect (the test above passes with a runtime that ignores it): a worker told to spin for
    a second keeps a CPU busy while the caller sleeps, unless a yield shows that another thread wants the CPU
    (then it gives the spin up: counted); told 0, it sleeps at once and never spins."""
    def idle_cpu(spin):
        out = run_program(tmp_path, IDLE_CPU, TENSORLANG_NUM_THREADS="2", TENSORLANG_SPIN_US=spin).stdout
        return int(out.split()[1]), float(out.split("idle_cpu")[1])
    given_up, quiet = idle_cpu("0")
    assert quiet < 0.05 and given_up == 0, (given_up, quiet)
    # about 1 s on an idle CPU; where other processes want the CPU (the suite's other workers) the spin is given
    # up at the first yield that hands them the CPU; a runtime that ignores the variable spins its default 500 us
    # and gives about 0.001 s
    given_up, busy = idle_cpu("1000000")
    assert (busy > 0.004 and busy > 5 * quiet) or given_up >= 1, (busy, quiet, given_up)


@pytest.mark.parametrize("name,value,message", [
    ("TENSORLANG_SPIN_US", "junk", "TENSORLANG_SPIN_US='junk' is not an integer from 0 to 1000000"),
    ("TENSORLANG_SPIN_US", "-1", "TENSORLANG_SPIN_US='-1' is not an integer from 0 to 1000000"),
    ("TENSORLANG_SPIN_US", "2000000", "TENSORLANG_SPIN_US='2000000' is not an integer from 0 to 1000000"),
    ("TENSORLANG_THREAD_POOL", "pyhton", "TENSORLANG_THREAD_POOL='pyhton' is not a thread pool; use native (the "
                                         "default) or python"),
])
def test_bad_pool_settings_are_errors_naming_the_variable(tmp_path, name, value, message):
    """As TENSORLANG_NUM_THREADS (below): the JIT refuses a value the pool does not take when it starts, in the API
    and in the CLI, instead of using its default silently."""
    env = dict(os.environ, PYTHONPATH=ROOT, XDG_CACHE_HOME=str(tmp_path / "cache"), **{name: value})
    code = "import tensorlang as tl\ntry:\n    tl.build(tl.op('def f(A: f32[N]) -> B:\\n    B[i] = A[i]\\n'), N=4)\n" \
           "except ValueError as e:\n    print('ValueError', e)\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith(f"ValueError {message}"), r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-c", CLI_MAIN, "run",
                        "matmul", "--preset", "small"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr and f"tensorlang run: error: {message}" in r.stderr, \
        r.stderr


# The C runtime as an exported library uses it, with no Python: a parallel loop summing 0..999 in chunks.
C_CALLER = r"""
#include "tensorlang_runtime.c"
static long long sums[1024];
static int32_t chunk(int64_t begin, int64_t end, void *closure) {
    (void)closure;
    for (int64_t i = begin; i < end; i++)
        sums[begin] += i;
    return 0;
}
int main(void) {
    for (int call = 0; call < 3; call++) {
        for (int i = 0; i < 1024; i++)
            sums[i] = 0;
        if (tensorlang_parallel_for(chunk, NULL, 0, 1000) != 0)
            return 1;
        long long total = 0;
        for (int i = 0; i < 1024; i++)
            total += sums[i];
        printf("%lld\n", total);
    }
    return 0;
}
"""


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler: the native pool cannot be built")
def test_c_runtime_says_once_on_stderr_that_it_ignores_a_bad_setting(tmp_path):
    """Exported libraries have no Python to raise a UsageError: a bad value gives the default and one line on stderr
    per variable, naming it and the values it takes."""
    from tensorlang.codegen_c import find_c_compiler
    from tensorlang.threadpool import RUNTIME_C
    (tmp_path / "caller.c").write_text(C_CALLER)
    exe = tmp_path / "caller"
    subprocess.run([*find_c_compiler(), "-O1", "-pthread", f"-I{RUNTIME_C.parent}", "-o", str(exe),
                    str(tmp_path / "caller.c")], check=True, capture_output=True, timeout=120)
    env = dict(os.environ, TENSORLANG_NUM_THREADS="lots", TENSORLANG_SPIN_US="junk")
    r = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["499500"] * 3, r.stdout + r.stderr
    assert r.stderr.splitlines() == [
        'tensorlang: TENSORLANG_NUM_THREADS="lots" is not an integer from 1 to 1024; using the CPU count',
        'tensorlang: TENSORLANG_SPIN_US="junk" is not an integer from 0 to 1000000; using 500'], r.stderr
    env = dict(os.environ, TENSORLANG_NUM_THREADS="2", TENSORLANG_SPIN_US="100")
    r = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stdout.split() == ["499500"] * 3 and r.stderr == "", r.stdout + r.stderr


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler: the native pool cannot be built")
def test_pool_works_in_a_forked_child(tmp_path):
    code = PROGRAM + """
pid = os.fork()
if pid == 0:
    try:
        ok = np.allclose(tl.build(s)(A), got)
    finally:
        os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
print("child ok")
"""
    assert "child ok" in run_program(tmp_path, code).stdout


def test_concurrent_callers_take_turns():
    """Parallel kernels called from several Python threads at once (ctypes releases the GIL) all get their own
    results: parallel regions take turns on the pool."""
    op = tl.op("def g(A: f32[N]) -> B:\n    B[i] = A[i] * 3.0 + 1.0\n")
    s = tl.schedule(op, N=4099)
    io, _ = s["B"].split("i", 64)
    s["B"].parallel(io)
    k = tl.build(s)
    inputs = [np.random.default_rng(i).standard_normal(4099).astype(np.float32) for i in range(6)]
    expected = [k(x) for x in inputs]  # one caller at a time
    for x, e in zip(inputs, expected):
        np.testing.assert_allclose(e, x.astype(np.float64) * 3 + 1, rtol=1e-6, atol=1e-6)
    bad = []

    def work(i):
        for _ in range(200):
            if not np.array_equal(k(inputs[i]), expected[i]):
                bad.append(i)
                return

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


# Put the pool's worker on the caller's CPU, free to leave it, and call a parallel kernel: the worker must move
# itself off (else both run their chunks on one CPU, one after the other).
COLOCATED = """
import os, time
import numpy as np
import tensorlang as tl
from tensorlang.threadpool import pool_stats
""" + PARALLEL_G + """\
def picked_up():                                                  # loops the worker has taken up (work or not)
    stats = pool_stats()
    return stats["worker_pieces"] + stats["late"]
def call_and_let_the_worker_see_it():                             # the caller may run the loop alone: the
    seen = picked_up()                                            # worker moves when it takes the loop up
    np.testing.assert_array_equal(k(A), A * 3 + 1)
    for _ in range(10000):
        if picked_up() > seen:
            return
        time.sleep(0.001)
call_and_let_the_worker_see_it()                                  # starts the pool
names = {t: open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")}
workers = [int(t) for t, n in names.items() if n == "tensorlang-1"]
assert len(workers) == 1, names
worker, cpus = workers[0], sorted(os.sched_getaffinity(0))
def cpu_of(tid):
    return int(open(f"/proc/self/task/{tid}/stat").read().rsplit(")", 1)[1].split()[36])
here = cpus[0]
os.sched_setaffinity(0, {here})                                   # the caller stays on one CPU
tries = moved = 0
for _ in range(50):
    time.sleep(0.25)                                              # a worker that gave its spin up (its yields
    call_and_let_the_worker_see_it()                              # ran the caller) spins again within 0.2 s
    os.sched_setaffinity(worker, {here})                          # the worker joins it there ...
    os.sched_setaffinity(worker, set(cpus))                       # ... free to leave
    if cpu_of(worker) != here:
        continue
    tries += 1
    call_and_let_the_worker_see_it()
    moved += cpu_of(worker) != here
    if tries == 10:
        break
print("tries", tries, "moved", moved)
"""


@pytest.mark.skipif(not HAVE_CC, reason="no C compiler: the native pool cannot be built")
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2
                    or not os.path.isdir("/proc/self/task"), reason="needs Linux and two CPUs")
def test_worker_on_the_callers_cpu_moves_to_another(tmp_path):
    out = run_program(tmp_path, COLOCATED, TENSORLANG_NUM_THREADS="2", TENSORLANG_SPIN_US="100000").stdout
    tries, moved = (int(w) for w in out.split()[1::2])
    assert tries >= 5 and moved == tries, out


@pytest.mark.parametrize("value", ["abc", "0", "-2", "100000"])
def test_bad_thread_count_is_an_error_naming_the_variable(tmp_path, value):
    """The C pool would ignore a bad TENSORLANG_NUM_THREADS; the JIT refuses it when it starts, in the API and
    in the CLI, with one line that names the variable and the value."""
    env = dict(os.environ, PYTHONPATH=ROOT, XDG_CACHE_HOME=str(tmp_path / "cache"), TENSORLANG_NUM_THREADS=value)
    code = "import tensorlang as tl\ntry:\n    tl.build(tl.op('def f(A: f32[N]) -> B:\\n    B[i] = A[i]\\n'), N=4)\n" \
           "except ValueError as e:\n    print('ValueError', e)\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.startswith("ValueError TENSORLANG_NUM_THREADS=") and value in r.stdout, \
        r.stdout + r.stderr
    r = subprocess.run([sys.executable, "-c", CLI_MAIN, "run",
                        "matmul", "--preset", "small"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "tensorlang run: error: TENSORLANG_NUM_THREADS=" in r.stderr and value in r.stderr


def test_parallel_chunk_gets_its_buffers_as_noalias_arguments(monkeypatch):
    """The outlined chunk function unpacks the closure and calls `..._body(begin, end, scalars, buffers)` with
    every buffer a `noalias` argument, as in the kernel itself; the result is numpy's on 1 and 3 threads."""
    op = tl.op("def f(A: f32[N, M], B: f32[N, M]) -> C:\n    C[i, j] = A[i, j] * B[i, j] + 1.0")
    s = tl.schedule(op, N=37, M=19)
    s["C"].parallel("i")
    k = tl.build(s)
    text = k.source("llvm-unoptimized")
    body = next(line for line in text.splitlines() if line.startswith("define internal i32 @\"f_par1_i_body\""))
    assert body.count("ptr noalias") == 3, body                # A, B and C
    A = np.random.default_rng(0).standard_normal((37, 19), dtype=np.float32)
    B = np.random.default_rng(1).standard_normal((37, 19), dtype=np.float32)
    for threads in ("1", "3"):
        monkeypatch.setenv("TENSORLANG_NUM_THREADS", threads)
        # mul + add may fuse into one FMA: one rounding fewer than numpy's
        np.testing.assert_allclose(k(A, B), A * B + 1, rtol=1e-6, atol=1e-6)


# ---- dynamic scheduling: a thread that does not run holds no loop up ----

DRIVER_C = os.path.join(ROOT, "tests", "support", "runtime_driver.c")


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    """tests/support/runtime_driver.c linked with the runtime compiled as `tensorlang export` compiles it (-O2, no
    TENSORLANG_JIT_RUNTIME: hidden symbols)."""
    from tensorlang.codegen_c import find_c_compiler
    from tensorlang.threadpool import RUNTIME_C
    out = tmp_path_factory.mktemp("driver")
    cc = find_c_compiler()
    subprocess.run([*cc, "-O2", "-c", str(RUNTIME_C), "-o", str(out / "runtime.o")], check=True,
                   capture_output=True, timeout=120)
    subprocess.run([*cc, "-O2", "-pthread", "-o", str(out / "driver"), DRIVER_C, str(out / "runtime.o")],
                   check=True, capture_output=True, timeout=120)
    return out / "driver"


def run_driver(driver, mode, threads) -> tuple[dict, str]:
    env = dict(os.environ, TENSORLANG_NUM_THREADS=str(threads))
    r = subprocess.run([str(driver), mode], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith(f"ok {mode}"), (r.returncode, r.stdout, r.stderr)
    words = r.stdout.split()[2:]
    return {k: int(v) for k, v in zip(words[::2], words[1::2])}, r.stderr


needs_linux_cc = pytest.mark.skipif(not HAVE_CC or not sys.platform.startswith("linux"),
                                    reason="needs a C compiler and Linux (/proc, tgkill)")
STALL_LINE = ("tensorlang: parallel loops keep waiting for threads that do not get a CPU (2 threads; other programs, "
              "or another thread pool in this process, use the CPUs); fewer threads may be faster: set "
              "TENSORLANG_NUM_THREADS (e.g. to 1)")


@needs_linux_cc
@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("mode", ["check", "nested", "concurrent", "fork"])
def test_exported_runtime_runs_every_iteration_once(driver, mode, threads):
    """Loops of every extent (up to past 2**20, where a unit is a run of iterations), failing pieces, a loop
    inside a piece, four threads calling at once, a forked child: each iteration runs exactly once."""
    stats, err = run_driver(driver, mode, threads)
    assert err == "" and stats["loops"] > 0, (stats, err)


@needs_linux_cc
@pytest.mark.parametrize("threads", [2, 3])
def test_exported_runtime_runs_a_stopped_workers_share(driver, threads):
    """Worker 1 stopped (a signal handler that blocks) before the loops start: every loop completes with its share
    run by the other threads, where one fixed chunk per thread would wait for it forever (the driver's alarm ends
    it)."""
    stats, err = run_driver(driver, "park", threads)
    assert stats["steals"] > 0 and err == "", (stats, err)


@needs_linux_cc
def test_exported_runtime_says_once_that_its_threads_stall(driver):
    """A worker that stops inside a piece it claimed is waited for (the loop is not over without it), and each
    such wait long enough to mean the thread lost its CPU is a stall: after 8 of them the runtime names
    TENSORLANG_NUM_THREADS in one line on stderr, once."""
    stats, err = run_driver(driver, "stall", 2)
    assert stats["stalls"] >= 8 and stats["caller_sleeps"] >= 8, stats
    assert err.splitlines() == [STALL_LINE], err


@needs_linux_cc
def test_exported_runtime_keeps_quiet_about_stalls_that_cost_little(driver):
    """The same stalls, half a second apart: counted, but they take a few percent of the time (as a virtual
    machine's host taking a CPU away now and then does), so nothing is said."""
    stats, err = run_driver(driver, "sparse", 2)
    assert stats["stalls"] >= 8, stats
    assert err == "", err


# A kernel called from four Python threads while one pool thread is stopped (a signal handler that blocks until
# released), then after it is released: every result right, and a watchdog ends a run that hangs.
HOLD_C = r"""
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
static volatile sig_atomic_t held, release;
static void hold(int sig) {
    (void)sig;
    held = 1;
    while (!release) {
        struct timespec t = {0, 100000};
        nanosleep(&t, 0);
    }
    held = 0;
}
int hold_thread(int tid) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = hold;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, 0) != 0)
        return -1;
    return (int)syscall(SYS_tgkill, getpid(), tid, SIGUSR1);
}
int is_held(void) { return held; }
void let_go(void) { release = 1; }
"""

STOPPED_WORKER = """
import ctypes, faulthandler, json, os, sys, threading, time
import numpy as np
import tensorlang as tl
from tensorlang import threadpool
faulthandler.dump_traceback_later(60, exit=True)                  # a hang fails the test
hold = ctypes.CDLL(sys.argv[1])
op = tl.op("def g(A: f32[N]) -> B:\\n    B[i] = A[i] * 3.0 + 1.0\\n")
s = tl.schedule(op, N=4099)
io, _ = s["B"].split("i", 16)
s["B"].parallel(io)
k = tl.build(s)
inputs = [np.random.default_rng(i).standard_normal(4099).astype(np.float32) for i in range(4)]
expected = [x.astype(np.float64) * 3 + 1 for x in inputs]
def check(i):
    np.testing.assert_allclose(k(inputs[i]), expected[i], rtol=1e-6, atol=1e-6)
check(0)                                                          # starts the pool
def pool_threads():
    if threadpool.backend() == "python":
        return [t.native_id for t in threading.enumerate() if t.name.startswith("tensorlang")]
    for _ in range(10000):                                        # a worker names itself when it starts
        names = {int(t): open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")}
        found = [t for t, n in names.items() if n.startswith("tensorlang-")]
        if found:
            return found
        time.sleep(0.001)
stopped = pool_threads()[0]
assert hold.hold_thread(stopped) == 0
while not hold.is_held():
    time.sleep(0.001)
before = threadpool.pool_stats()
def calls(i, n):
    for _ in range(n):
        check(i)
threads = [threading.Thread(target=calls, args=(i, 100)) for i in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
calls(0, 20)
stats = threadpool.pool_stats()
print("backend", threadpool.backend())
print("while stopped", json.dumps({key: stats[key] - before[key] for key in stats}))
hold.let_go()
while hold.is_held():
    time.sleep(0.001)
calls(1, 50)
"""


@needs_linux_cc
@pytest.mark.parametrize("pool", ["native", "python"])
def test_jit_loops_complete_while_a_pool_thread_is_stopped(tmp_path, pool):
    """The JIT's pools (native and Python) with one of their threads stopped: kernels called from four Python
    threads at once still complete, right, their share run by the threads that run; and so after the thread is
    released (one fixed chunk per thread would wait for the stopped thread forever)."""
    from tensorlang.codegen_c import find_c_compiler
    (tmp_path / "hold.c").write_text(HOLD_C)
    lib = tmp_path / "hold.so"
    subprocess.run([*find_c_compiler(), "-O2", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "hold.c")],
                   check=True, capture_output=True, timeout=120)
    full = dict(os.environ, PYTHONPATH=ROOT, XDG_CACHE_HOME=str(tmp_path / "cache"), TENSORLANG_NUM_THREADS="2",
                TENSORLANG_THREAD_POOL=pool)
    r = subprocess.run([sys.executable, "-c", STOPPED_WORKER, str(lib)], capture_output=True, text=True, env=full,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"backend {pool}" in r.stdout, r.stdout
    stats = json.loads(r.stdout.split("while stopped")[1])
    # 420 calls of one parallel loop each, every piece run by the callers (the only worker is stopped)
    assert stats["loops"] == 420 and stats["worker_pieces"] == 0 and stats["caller_pieces"] >= 2 * 420, stats
    if pool == "native":  # the caller takes the stopped worker's home range
        assert stats["steals"] >= 420, stats


CROWDED = """
import os, subprocess, sys, time
import numpy as np
import tensorlang as tl
from tensorlang.threadpool import pool_stats
cpu = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {cpu})                    # the caller, and the worker it starts, on one CPU ...
""" + PARALLEL_G + """\
busy = subprocess.Popen([sys.executable, "-c", "while True:\\n    pass"],
                        preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))   # ... with a busy process there
try:
    for _ in range(200):
        np.testing.assert_array_equal(k(A), A * 3 + 1)
        time.sleep(0.002)                         # the worker spins meanwhile, yielding to the busy process
    stats = pool_stats()
    print("loops", stats["loops"], "given_up", stats["spins_given_up"], "worker_pieces", stats["worker_pieces"])
finally:
    busy.kill()
    busy.wait()
"""


@needs_linux_cc
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_a_worker_stops_spinning_where_another_process_wants_its_cpu(tmp_path):
    """A worker told to spin 0.1 s between loops, on one CPU with a busy process: its yields hand that process the
    CPU, which the runtime notices (the yield came back late, after an involuntary switch): it gives the spin up
    and sleeps until the next loop; every result stays right."""
    out = run_program(tmp_path, CROWDED, TENSORLANG_NUM_THREADS="2", TENSORLANG_SPIN_US="100000").stdout
    values = dict(zip(out.split()[::2], (int(v) for v in out.split()[1::2])))
    assert values["loops"] == 200 and values["given_up"] >= 1, out


def test_pool_stats_count_the_parallel_loops(monkeypatch):
    """pool_stats() counts each parallel loop run on the pool, whichever pool the process uses, and the pieces of
    each are run by the caller or the workers."""
    from tensorlang.threadpool import pool_stats
    op = tl.op("def g(A: f32[N]) -> B:\n    B[i] = A[i] * 3.0 + 1.0\n")
    s = tl.schedule(op, N=1000)
    io, _ = s["B"].split("i", 10)
    s["B"].parallel(io)
    k = tl.build(s)
    A = np.arange(1000, dtype=np.float32)
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "2")
    before = pool_stats()
    for _ in range(5):
        np.testing.assert_array_equal(k(A), A * 3 + 1)
    after = pool_stats()
    assert after["loops"] - before["loops"] == 5, (before, after)
    pieces = (after["caller_pieces"] + after["worker_pieces"]) - (before["caller_pieces"] + before["worker_pieces"])
    assert pieces >= 5 * 2, (before, after)
    monkeypatch.setenv("TENSORLANG_NUM_THREADS", "1")                # one thread: no pool
    k(A)
    assert pool_stats()["loops"] == after["loops"]


# ---- benchmarks/shared_cpu.py ----

SHARED_CPU = os.path.join(ROOT, "benchmarks", "shared_cpu.py")


@pytest.mark.parametrize("args,message", [
    (("--cases", "mnist,nosuch"), "--cases: unknown case 'nosuch'; cases: conv2d, matmul"),
    (("--threads", "1"), "--threads: 1; give 2 or more"),
    (("--rounds", "0"), "--rounds must be at least 1"),
    (("--baseline-commit", "no-such-commit", "--cases", "softmax"),
     "--baseline-commit no-such-commit: git cannot show its tensorlang/csrc/tensorlang_runtime.c"),
])
def test_shared_cpu_benchmark_refuses_bad_flags(args, message):
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, SHARED_CPU, *args], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr, r.stderr


# The benchmark's switch: the same kernel on the current runtime and on a baseline's (the newest committed version
# of the runtime other than the checkout's that the JIT can load), chosen call by call, each right.
SWITCHED = """
import pathlib, sys, tempfile
import numpy as np
sys.path.insert(0, BENCHMARKS)
import shared_cpu
runtimes = shared_cpu.Runtimes(COMMIT, pathlib.Path(tempfile.mkdtemp()))
import tensorlang as tl
from tensorlang.threadpool import pool_stats
op = tl.op("def g(A: f32[N]) -> B:\\n    B[i] = A[i] * 3.0 + 1.0\\n")
s = tl.schedule(op, N=4099)
io, _ = s["B"].split("i", 16)
s["B"].parallel(io)
k = tl.build(s)
A = np.arange(4099, dtype=np.float32)
loops = []
for rt in runtimes.names * 3:
    runtimes.use(rt)
    before = pool_stats()["loops"]
    np.testing.assert_array_equal(k(A), A * 3 + 1)
    loops.append((rt, pool_stats()["loops"] - before))
print(loops)
"""


@pytest.mark.skipif(not HAVE_CC or shutil.which("git") is None
                    or not os.path.exists(os.path.join(ROOT, ".git")), reason="needs a C compiler and a git checkout")
def test_shared_cpu_benchmark_switches_runtimes_call_by_call(tmp_path):
    from tensorlang.threadpool import RUNTIME_C
    path = "tensorlang/csrc/tensorlang_runtime.c"
    commits = subprocess.run(["git", "-C", ROOT, "log", "--format=%H", "--", path], capture_output=True,
                             text=True).stdout.split()
    current = RUNTIME_C.read_text()
    older = [c for c in commits if (text := subprocess.run(["git", "-C", ROOT, "show", f"{c}:{path}"],
                                                           capture_output=True, text=True).stdout) != current
             and "TENSORLANG_JIT_RUNTIME" in text]
    if not older:
        pytest.skip("the checkout's history has no other version of the runtime the JIT can load")
    code = SWITCHED.replace("BENCHMARKS", repr(os.path.join(ROOT, "benchmarks"))).replace("COMMIT", repr(older[0]))
    r = run_program(tmp_path, code, TENSORLANG_NUM_THREADS="2")
    # the current runtime counts its loop; the baseline's (another library) does not touch its counters
    assert r.stdout.strip() == str([("current", 1), ("baseline", 0)] * 3), r.stdout
