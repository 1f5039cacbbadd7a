"""Values at the edges of the small integer types and of floats, for the tests of u8, i8, u16, i16 and u32."""
from __future__ import annotations

import numpy as np

SMALL = ("u8", "i8", "u16", "i16", "u32", "u64")
INTS = SMALL + ("i32", "i64")
NP = {"u8": np.uint8, "i8": np.int8, "u16": np.uint16, "i16": np.int16, "u32": np.uint32, "u64": np.uint64,
      "i32": np.int32, "i64": np.int64, "f32": np.float32, "f64": np.float64, "bool": np.bool_}


def edge_values(dt: str, n: int, rng) -> np.ndarray:
    """`n` values of `dt`: its ends and their neighbours, 0, +-1, then random values over the whole range."""
    info = np.iinfo(NP[dt])
    lo, hi = int(info.min), int(info.max)
    edges = [v for v in (lo, lo + 1, -1, 0, 1, 2, 7, hi - 1, hi, hi // 2, hi // 2 + 1) if lo <= v <= hi]
    rest = rng.integers(lo, hi, n - len(edges), endpoint=True, dtype=NP[dt])
    return np.concatenate([np.array(edges, NP[dt]), rest])


def float_edges(src: str, rng) -> np.ndarray:
    """Floats of dtype `src` at and around every integer type's ends (halves, powers of two), far outside them,
    infinities and NaN, then random values."""
    edges = [0.0, -0.0, 0.5, -0.5, 0.99, -0.99, 1.0, -1.0, 126.9, 127.0, 127.5, 128.0, -128.0, -128.9, -129.0,
             254.9, 255.0, 255.5, 256.0, 32767.5, 32768.0, -32768.5, -32769.0, 65535.9, 65536.0, 2.0**31 - 128,
             2.0**31, -2.0**31, -2.0**31 - 512, 2.0**32 - 256, 2.0**32, 2.0**40, -2.0**40, 2.0**63, -2.0**63, 1e30,
             -1e30, np.inf, -np.inf, np.nan]
    x = np.concatenate([np.array(edges), rng.uniform(-70000, 70000, 60), rng.uniform(-300, 300, 60)])
    return x.astype(NP[src])
