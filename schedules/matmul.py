"""Dense matrix multiplication ``C = A @ B`` (f32).

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules.matmul import WORKLOAD
    >>> sizes = WORKLOAD.sizes("small")
    >>> A, B = WORKLOAD.make_inputs(sizes, np.random.default_rng(0))
    >>> WORKLOAD.reference(A, B, **sizes).shape
    (64, 48)
"""

from __future__ import annotations

import numpy as np

from tensorlang.schedules.workload import Workload
from tensorlang.space import Knob, Space, vector_registers

SOURCE = """\
def matmul(A: f32[M, K], B: f32[K, N]) -> C:
    C[i, j] += A[i, k] * B[k, j]
"""


def reference(A: np.ndarray, B: np.ndarray, **sizes: int) -> np.ndarray:
    """``A @ B`` computed in float64 and rounded to float32.

    Example::

        >>> import numpy as np
        >>> reference(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)).tolist()[0]
        [3.0, 3.0, 3.0, 3.0]
    """
    return np.matmul(A.astype(np.float64), B.astype(np.float64)).astype(np.float32)


def make_inputs(sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """Standard-normal ``A[M, K]`` and ``B[K, N]``.

    Example::

        >>> import numpy as np
        >>> [a.shape for a in make_inputs({"M": 2, "N": 3, "K": 4}, np.random.default_rng(0))]
        [(2, 4), (4, 3)]
    """
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    A = rng.standard_normal((M, K), dtype=np.float32)
    B = rng.standard_normal((K, N), dtype=np.float32)
    return [A, B]


def flops(sizes: dict) -> float:
    """``2*M*N*K``.

    Example::

        >>> flops({"M": 2, "N": 3, "K": 4})
        48.0
    """
    return 2.0 * sizes["M"] * sizes["N"] * sizes["K"]


def hand_tile() -> tuple[int, int]:
    """The hand schedule's register tile on this CPU, (columns, rows): 64 x 6 where there are 32 vector registers
    (AVX-512: 24 accumulators), two vectors by 6 rows where there are 16 (AVX2: 16 x 6, 12 accumulators, BLIS's
    Haswell tile; the AVX-512 tile would spill there).

    Example::

        >>> hand_tile() in ((64, 6), (16, 6))
        True
    """
    lanes, registers = vector_registers()
    return (4 * lanes, 6) if registers >= 32 else (max(16, 2 * lanes), 6)


def hand_schedule(s) -> None:
    """BLIS-style schedule: packed panels of A (6 rows) and B (64 columns), a 6x64 register tile (24
    `<16 x float>` accumulators: 4 vector loads of B and 6 broadcasts of A per 24 FMAs; 6 x 16 with AVX2, see
    :func:`hand_tile`), K unrolled by 4,
    KC=K up to 1024, MC=6 (MC=12 where KC <= 512: the A panel is 24 KB either way); from N = 1024, NC=1024
    with the threads splitting the row blocks, below it NC=512 or half of N with the threads splitting the
    column blocks.
    Why, each choice against its alternative side by side: 6x64 beats a 12x32 tile on every preset (tall_skinny
    most); a longer KC writes C back less often (at KC=K once, with no read-back); the smaller MC keeps the 24 KB A
    panel in half of L1, leaving the other half to the streamed B panel; NC=N with the threads on the row blocks
    packs A once, not once per column block; below N = 1024 two column blocks suit two threads better.

    Example::

        >>> import tensorlang as tl
        >>> s = tl.schedule(tl.op(SOURCE), M=64, N=256, K=64)
        >>> hand_schedule(s)
        >>> "# parallel" in s.lower() and "C_local" in s.lower()
        True
    """
    M, N, K = s.sizes["M"], s.sizes["N"], s.sizes["K"]
    nr, mr = hand_tile()
    c = s["C"]
    nc, kc, mc, parallel = _hand_blocks(M, N, K)
    jo, j1 = c.split("j", nc)
    jm, ji = c.split(j1, nr)
    ko, k1 = c.split("k", kc)
    kk, ku = c.split(k1, 4)
    io, i1 = c.split("i", min(mc, _round_up(M, mr)))
    im, ii = c.split(i1, mr)
    c.reorder(jo, ko, io, jm, im, kk, ku, ii, ji)
    c.unroll(ku)
    c.unroll(ii)
    c.vectorize(ji)
    c.cache_write(im)
    c.cache_read("B", ko, layout=((1, nr), (0, 0), (1, 0)))
    c.cache_read("A", io, layout=((0, mr), (1, 0), (0, 0)))
    c.parallel(jo if parallel == "jo" else io)


def hand_config(sizes: dict) -> dict | None:
    """The config of :func:`space` whose schedule is :func:`hand_schedule` (the same loop IR), or None where the
    space cannot express it (fewer rows than the register tile, fewer columns than it or than a column block, a
    column block the ``nc`` knob lacks, a k extent the unrolling does not divide).

    Example::

        >>> hand_config({"M": 1024, "N": 1024, "K": 1024})["nc"], hand_config({"M": 4, "N": 64, "K": 8})
        (1024, None)
    """
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    nc, kc, mc, parallel = _hand_blocks(M, N, K)
    nr, mr = hand_tile()
    if M < mr or N < max(nr, nc) or (K <= kc and K % 4) or (nc < N and nc not in (64, 128, 256, 512, 1024)):
        return None
    return {"nr": nr, "mr": mr, "nc": nc if nc < N else N, "kc": kc, "mc": mc if M > mc else M,
            "ku": 4, "pack_a": True, "pack_b": True, "parallel": parallel}


def _hand_blocks(M: int, N: int, K: int) -> tuple[int, int, int, str]:
    """The hand schedule's blocks and parallel loop: (nc, kc, mc, "io" or "jo"). The k block is all of K up to
    1024 and an A panel holds 6 rows (12 where the k block is at most 512), so that it stays at most 24 KB, in
    L1. Where N >= 1024 and there are 8 row blocks or more, a column block is all of N up to 1024 and the
    threads split the row blocks (A is packed once, not once per column block); else two column blocks of at
    most 512, which two threads share (where A is small, repacking it per column block is cheap).

    Example::

        >>> _hand_blocks(1024, 1024, 1024), _hand_blocks(12, 1024, 256)
        ((1024, 1024, 6, 'io'), (512, 256, 12, 'jo'))
    """
    kc = min(K, 1024)
    mc = 6 if kc > 512 else 12
    if N >= 1024 and -(-M // mc) >= 8:
        return min(N, 1024), kc, mc, "io"
    nc = min(512, _round_up(N, 128) // 2)
    return nc, kc, mc, "jo" if N > nc else "io"


def _round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def space(sizes: dict) -> Space:
    """The tuner's space: the hand schedule's BLIS structure (an ``mr`` x ``nr`` register tile accumulated in a
    local buffer, packed panels of A and B, blocks of ``mc`` rows, ``nc`` columns and ``kc`` steps of k) with every
    size, the k unrolling, each packing and the parallel loop as knobs.

    Example::

        >>> space(WORKLOAD.sizes("1024")).size
        268800
        >>> import tensorlang as tl
        >>> sz = WORKLOAD.sizes("small")
        >>> "C_local" in space(sz).schedule(tl.op(SOURCE), sz, space(sz).config_at(0)).lower()
        True
    """
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    knobs = [
        Knob("nr", tuple(v for v in (16, 32, 48, 64) if v <= max(N, 16)), "columns per register tile (vectorized)"),
        Knob("mr", tuple(v for v in (1, 2, 4, 6, 8, 10, 12, 14) if v <= M), "rows per register tile (unrolled)"),
        Knob("nc", tuple(v for v in (64, 128, 256, 512, 1024) if v < N) + (N,), "columns per block (rounded up to nr)"),
        Knob("kc", tuple(v for v in (64, 128, 256, 512, 1024) if v < K) + (K,), "k steps per packed panel"),
        # 6 rows only where k blocks can be longer than 512 (the A panel of 6 x 1024 fills L1 as 12 x 512 does)
        Knob("mc", tuple(v for v in (6,) * (K > 512) + (12, 24, 48, 96, 192) if v < M) + (M,),
             "rows per packed A panel (rounded up to mr)"),
        Knob("ku", (1, 2, 4, 8), "k steps unrolled inside the tile"),
        Knob("pack_a", (True, False), "copy each A panel into mr-row strips"),
        Knob("pack_b", (True, False), "copy each B panel into nr-column strips"),
        Knob("parallel", ("jo", "io", "none"),
             "the loop the threads split: column blocks, row blocks (inside the column and k blocks), or none"),
    ]
    lanes, registers = vector_registers()
    return Space("matmul", knobs, apply_config,
                 constraint=lambda c: -(-c["nr"] // lanes) * c["mr"] <= registers,
                 constraint_doc=f"register tile of at most {registers} {lanes}-lane accumulators")


def apply_config(s, cfg: dict) -> None:
    """Apply a config of :func:`space` to the schedule ``s`` (public primitives only). Each block is rounded up
    to whole tiles (``nc`` to ``nr``, ``mc`` to ``mr``, ``kc`` to ``ku``) and kept to its extent rounded up
    likewise; ``ku`` is at most K.

    Example::

        >>> import tensorlang as tl
        >>> s = tl.schedule(tl.op(SOURCE), M=24, N=64, K=32)
        >>> apply_config(s, {"nr": 16, "mr": 4, "nc": 64, "kc": 32, "mc": 12, "ku": 2,
        ...                  "pack_a": False, "pack_b": True, "parallel": "io"})
        >>> s["C"].loops()
        ['j_o', 'k_o', 'i_o', 'j_i_o', 'i_i_o', 'k_i_o', 'k_i_i', 'i_i_i', 'j_i_i']
        >>> "allocate B_C_local: f32[4, 32, 16]" in s.lower(), "for i_o in 0:2:  # parallel" in s.lower()
        (True, True)
    """
    M, N, K = s.sizes["M"], s.sizes["N"], s.sizes["K"]
    mr, nr, ku = cfg["mr"], cfg["nr"], min(cfg["ku"], K)
    c = s["C"]
    jo, j1 = c.split("j", min(_round_up(cfg["nc"], nr), _round_up(N, nr)))
    jm, ji = c.split(j1, nr)
    ko, k1 = c.split("k", min(_round_up(cfg["kc"], ku), _round_up(K, ku)))
    kk, ku_ = c.split(k1, ku)
    io, i1 = c.split("i", min(_round_up(cfg["mc"], mr), _round_up(M, mr)))
    im, ii = c.split(i1, mr)
    c.reorder(jo, ko, io, jm, im, kk, ku_, ii, ji)
    c.unroll(ku_)
    c.unroll(ii)
    c.vectorize(ji)
    c.cache_write(im)
    if cfg["pack_b"]:
        c.cache_read("B", ko, layout=((1, nr), (0, 0), (1, 0)))
    if cfg["pack_a"]:
        c.cache_read("A", io, layout=((0, mr), (1, 0), (0, 0)))
    if cfg["parallel"] != "none":
        c.parallel(jo if cfg["parallel"] == "jo" else io)


def numpy_fast(A, B, **sizes):
    """``A @ B`` in float32 (OpenBLAS sgemm).

    Example::

        >>> import numpy as np
        >>> A, B = make_inputs({"M": 5, "N": 3, "K": 4}, np.random.default_rng(0))
        >>> C = numpy_fast(A, B)
        >>> C.dtype, bool(np.allclose(C, reference(A, B), atol=1e-5))
        (dtype('float32'), True)
    """
    return A @ B


def torch_fast(torch, A, B, **sizes):
    """``torch.mm(A, B)`` in float32 (PyTorch's CPU BLAS sgemm: MKL or oneDNN).

    ``torch`` is the PyTorch module; takes the other arguments of :func:`reference` as CPU tensors and gives the
    same ``C[M, N]``, in the inputs' dtype.

    Example::

        import numpy as np
        import torch
        A, B = make_inputs({"M": 5, "N": 3, "K": 4}, np.random.default_rng(0))
        C = torch_fast(torch, torch.from_numpy(A), torch.from_numpy(B))   # torch.float32, (5, 3)
    """
    return torch.mm(A, B)


WORKLOAD = Workload(
    name="matmul",
    source=SOURCE,
    presets={
        "1024": {"M": 1024, "N": 1024, "K": 1024},
        "512": {"M": 512, "N": 512, "K": 512},
        "256": {"M": 256, "N": 256, "K": 256},
        "tall_skinny": {"M": 4096, "N": 64, "K": 256},
        "small": {"M": 64, "N": 48, "K": 32},
    },
    default_preset="1024",
    reference=reference,
    make_inputs=make_inputs,
    flops=flops,
    description="Dense f32 matrix multiplication C[M, N] = A[M, K] @ B[K, N].",
    hand_schedule=hand_schedule,
    hand_config=hand_config,
    numpy_fast=numpy_fast,
    torch_fast=torch_fast,
    space=space,
)
