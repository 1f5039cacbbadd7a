"""The machine's FMA peak: independent chains of register-wide f32 FMAs (no memory traffic) in LLVM IR for this
CPU, run on 1 and on 2 threads at once (ctypes releases the GIL); the best of 3 runs each, in GFLOPS. The vector
is the target's widest register (16 lanes with AVX-512, 8 with AVX2) and the chains fit its register file (24 of 32
zmm, 12 of 16 ymm): more chains than registers spill, and the "peak" would read low.

Run with nothing else on the machine: ``.venv/bin/python benchmarks/fma_peak.py``.
"""
from __future__ import annotations

import ctypes
import threading
import time

from tensorlang.target import compile_ir, host_target

STEPS = 20_000_000


def shape(target=None) -> tuple[int, int]:
    """(lanes, chains) for `target` (the host by default): a register's f32 lanes, and independent chains that fit
    the register file with room to spare, enough to cover the FMA latency of current x86 cores.

    >>> shape()[0] in (4, 8, 16)
    True
    """
    bits = (target or host_target()).vector_bits()
    return bits // 32, 24 if bits == 512 else 12


def kernel_ir(lanes: int = 16, chains: int = 24) -> str:
    """``float peak(i64 n)``: n steps of `chains` independent ``<lanes x float>`` FMAs, summed at the end."""
    v = f"<{lanes} x float>"
    lines = ["define float @peak(i64 %n) {", "entry:", "  br label %loop", "loop:",
             "  %i = phi i64 [0, %entry], [%i1, %loop]"]
    lines += [f"  %a{c} = phi {v} [splat (float {1.0 + c / 1024}), %entry], [%b{c}, %loop]" for c in range(chains)]
    lines += [f"  %b{c} = call {v} @llvm.fma.v{lanes}f32({v} %a{c}, {v} splat (float 0.9990234375), "
              f"{v} splat (float 0.0009765625))" for c in range(chains)]
    lines += ["  %i1 = add i64 %i, 1", "  %c = icmp slt i64 %i1, %n", "  br i1 %c, label %loop, label %done", "done:"]
    acc = "%b0"
    for c in range(1, chains):
        lines.append(f"  %s{c} = fadd {v} {acc}, %b{c}")
        acc = f"%s{c}"
    lines += [f"  %r = extractelement {v} {acc}, i32 0", "  ret float %r", "}",
              f"declare {v} @llvm.fma.v{lanes}f32({v}, {v}, {v})"]
    return "\n".join(lines)


def measure(steps: int = STEPS, threads=(1, 2)) -> dict:
    """{threads: GFLOPS} of the FMA kernel, each the best of 3 runs of `steps` iterations on every thread."""
    lanes, chains = shape()
    engine, _ = compile_ir(kernel_ir(lanes, chains), host_target())
    fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("peak"))
    fn(1000)
    flops = 2 * lanes * chains * steps
    out = {}
    for n in threads:
        best = 0.0
        for _ in range(3):
            pool = [threading.Thread(target=fn, args=(steps,)) for _ in range(n)]
            t0 = time.perf_counter()
            for t in pool:
                t.start()
            for t in pool:
                t.join()
            best = max(best, n * flops / (time.perf_counter() - t0) / 1e9)
        out[n] = best
    return out


def main() -> None:
    for threads, gflops in measure().items():
        print(f"FMA peak, {threads} thread{'s' * (threads > 1)}: {gflops:.1f} GFLOPS")


if __name__ == "__main__":
    main()
