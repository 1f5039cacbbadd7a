"""Halide's application pipelines, each written in the DSL and in Halide's Python frontend (the ``halide`` package)
to be scheduled by Halide's CPU auto-schedulers (:mod:`halide_worker`), in the apps' types (float32 images, the
camera pipe's and histogram equalization's u16 and u8 ones) at the sizes of the apps' estimates (1536 x 2560, three
channels where the app has them; the camera pipeline's 2592 x 1968 raw mosaic):

- ``blur``: apps/blur, the separable 3 x 3 box blur (valid region, as the app computes it);
- ``harris``: apps/harris, gray, Sobel gradients, their products summed over 3 x 3, the corner response;
- ``demosaic``: the demosaic stage of apps/camera_pipe (green interpolated along the direction of least change, red
  and blue corrected by green's second derivative, diagonals chosen the same way) on a GRBG mosaic, valid region
  as the app's (its output is smaller than its raw input); in float32 where the app computes in int16;
- ``max-filter``: apps/max_filter, a circular max filter of radius 26: the image's logarithmic vertical slices
  (slice k the maximum of 2**k rows, each from two reads of the one before), each column offset's filter height
  and the slice it reads (the app's ``log(2t + 1) / log 2``), and the maximum over the offsets of two samples of
  that slice. The app's ``vert_log`` is one Func updated slice by slice; in the DSL, whose scans read along their
  own index only, the slices are six stages stacked into one tensor that the output reads through each offset's
  slice (a gather);
- ``stencil-chain``: apps/stencil_chain, eight 5 x 5 stencils in a row, weights ``(i+3)(j+3)``, normalised by their
  sum (the app wraps in uint16); each stage a sum over its 5 x 5 window with the weight computed from the window's
  indices (written as 25 explicit taps a stage, as the app writes them, the zero-trial pick inlines the stages into
  one expression of 25^8 terms: building 3 stages takes over a minute);
- ``unsharp``: apps/unsharp, a Gaussian blur of gray (sigma 1.5) sharpening each channel by a ratio;
- ``iir-blur``: apps/iir_blur, a first-order IIR filter (alpha 0.1) causal then anticausal down the columns, then
  along the rows: four scans, the anticausal ones over a reversed index (``Cy[c, H - 1 - j, x]``);
- ``histogram-equalize``: apps/hist on a u8 RGB image: the luma's histogram (a scatter-add), its cumulative sum (a
  scan), the lookup of each pixel's luma in it (a gather), and the colour rebuilt from the chroma, saturated to u8;
  luma and chroma in 8-bit fixed point where the app uses float32, so that every implementation gives the same
  integers;
- ``camera-pipe``: the stages of apps/camera_pipe after its demosaic, on the demosaiced 10-bit image (u16): the
  Q8.8 colour correction matrix (i32 arithmetic, i16 result), the tone curve as a 1024-entry u8 table read at each
  value (a gather; an input here, where the app computes it from its parameters in a stage) and the u8 sharpen;
- ``camera-pipe-raw``: the whole of apps/camera_pipe from its raw 10-bit GRBG mosaic (u16): hot pixel suppression
  (each value clamped to the range of its four neighbours of the same colour), the demosaic in int16 with the app's
  means rounded up, then the stages of ``camera-pipe``; the mosaic read as quads ``[H, 2, W, 2]`` and the output
  written as ``[3, H - 8, 2, W - 8, 2]``, the memory of the app's ``[2H, 2W]`` and ``[3, 2(H - 8), 2(W - 8)]``, so that
  every read is affine (the sharpen's neighbours across a quad's edge are a select on the site);
- ``interpolate``: apps/interpolate, an RGBA image premultiplied by its alpha and downsampled nine times by
  [1 2 1] / 4, then rebuilt from the coarsest level up, each level blending in the upsampled coarser one (the mean of
  its pixels at ``x // 2`` and ``(x + 1) // 2``) where its alpha leaves room, and divided by alpha at the end; the
  image is 2^9 H x 2^9 W so that each level's size is a size expression, and each level repeats its edge where a tap
  falls outside it (the app's levels extend past the image instead);
- ``local-laplacian``: apps/local_laplacian on a u16 RGB image: gray remapped by a detail-enhancing curve around
  each of 8 intensity levels, the 8-level Laplacian pyramid of each remapped image and the Gaussian pyramid of gray;
  each output level blends the two remapped pyramids its gray value falls between (a gather along the intensity
  levels), the output pyramid is collapsed and the colour reintroduced; 100 stages. As for ``interpolate``, the
  image is 2^7 H x 2^7 W and each level repeats its edge; the curve is evaluated at gray where the app reads it
  from a table of 256 entries a level, and the output is float in [0, 1] where the app converts to u16 (either
  truncation flips between float32 implementations that round gray one ulp apart);
- ``bilateral-grid``: apps/bilateral_grid: each pixel scattered into the grid cell (8 x 8 pixels) and the intensity
  bin its value selects, 5-tap blurs along the grid's three axes, and a trilinear slice that gathers the grid at each
  pixel's value. Where the app's histogram loops over each cell's pixels (``histogram(x, y, zi, c) +=``), the DSL's
  scatter may not compute an index from another left index, so it loops over the pixels and gathers each one's cell
  from a table ``cy[v] = v // 8``; and since ``y // 8`` is no index, the output is written per cell and position in
  it, ``[GH, 8, GW, 8]`` (the memory of ``[8 GH, 8 GW]``).

Harris, unsharp, max-filter, stencil-chain and bilateral-grid read their input through ``repeat_edge`` and give a
full-size output, as the apps do (the DSL's ``repeat_edge(I)[...]``); Halide's side reads every input through
``repeat_edge`` as well, so that an auto-scheduler's tiles rounded up past a valid region read in bounds. A mosaic
input holds integer values (0..1023), so the demosaic's comparisons and averages are exact in float32; the bilateral
grid's pixels are multiples of 1/256, so its bins are exact in float32; the integer pipelines are compared bit for
bit. :data:`NOT_WRITTEN` lists the apps the DSL cannot express yet (none now).

Example::

    >>> [p.name for p in PROGRAMS][:6]
    ['blur', 'harris', 'demosaic', 'max-filter', 'stencil-chain', 'unsharp']
    >>> [p.name for p in PROGRAMS][6:10]
    ['iir-blur', 'histogram-equalize', 'camera-pipe', 'camera-pipe-raw']
    >>> [p.name for p in PROGRAMS][10:]
    ['interpolate', 'local-laplacian', 'bilateral-grid']
"""
from __future__ import annotations

import math

import numpy as np

from .common import Baseline, Program, call

ORIGIN = "Halide apps (github.com/halide/Halide/apps)"

#: The apps whose Halide side also carries the app's own CPU schedule (its generator's branch that does not
#: auto-schedule), ported to the Python frontend: ``halide(hl, sizes, hand=True)`` applies it.
HAND_SCHEDULED = ("iir-blur", "histogram-equalize", "bilateral-grid", "local-laplacian")

#: Halide's applications the DSL cannot write yet, and why.
NOT_WRITTEN: dict[str, str] = {}
"""The apps the DSL cannot write yet, with why: none (every app above is written as it computes)."""

H, W = 2560, 1536  # the apps' estimates: 1536 wide, 2560 tall
RAW_H, RAW_W = 1968, 2592  # camera_pipe's raw input


def _f32(v: float) -> str:
    """A float32 constant as a literal that reads back to the same float32."""
    return repr(float(np.float32(v)))


def _image_inputs(program_name, low=0.0, high=1.0):
    """Uniform float32 pixels in [low, high) of the program's input shapes."""
    def make(sizes, rng):
        from .common import input_specs
        p = next(q for q in PROGRAMS if q.name == program_name)
        return [rng.uniform(low, high, shape).astype(np.float32) for _, shape, _ in input_specs(p.op, sizes)]
    return make


def _edge(hl, param):
    """The input read through ``repeat_edge``, as Halide's apps read theirs: a schedule that computes past the valid
    region (a tile rounded up) then reads in bounds; the valid region's values are the same."""
    return hl.BoundaryConditions.repeat_edge(param)


# ------------------------------------------------------------------------------------------------ blur


def _blur(I, dtype):
    I = np.asarray(I, dtype)
    t = I[:, :-2] + I[:, 1:-1]
    t += I[:, 2:]
    t /= dtype(3)
    b = t[:-2] + t[1:-1]
    b += t[2:]
    b /= dtype(3)
    return b


def _blur_torch_setup(inputs, sizes):
    import torch
    (I,) = inputs
    kx = torch.full((1, 1, 1, 3), 1.0 / 3)
    ky = torch.full((1, 1, 3, 1), 1.0 / 3)
    x = I.view(1, 1, *I.shape)
    return lambda: torch.nn.functional.conv2d(torch.nn.functional.conv2d(x, kx), ky)[0, 0]


def _blur_hl(hl, sizes):
    x, y = hl.Var("x"), hl.Var("y")
    I = hl.ImageParam(hl.Float(32), 2, "input")
    I_edge = _edge(hl, I)
    bx, by = hl.Func("blur_x"), hl.Func("blur_y")
    bx[x, y] = (I_edge[x, y] + I_edge[x + 1, y] + I_edge[x + 2, y]) / 3
    by[x, y] = (bx[x, y] + bx[x, y + 1] + bx[x, y + 2]) / 3
    return [(I, (sizes["H"], sizes["W"]))], by, (sizes["H"] - 2, sizes["W"] - 2)


BLUR = """\
def blur(I: f32[H, W]) -> B:
    T[y, x] = (I[y, x] + I[y, x + 1] + I[y, x + 2]) / 3.0
    B[y, x] = (T[y, x] + T[y + 1, x] + T[y + 2, x]) / 3.0
"""


# ------------------------------------------------------------------------------------------------ harris

_GRAY = (0.299, 0.587, 0.114)
# the app's gradient taps: (weight in twelfths, dx, dy)
_IY = ((-1, -1, -1), (1, -1, 1), (-2, 0, -1), (2, 0, 1), (-1, 1, -1), (1, 1, 1))
_IX = ((-1, -1, -1), (1, 1, -1), (-2, -1, 0), (2, 1, 0), (-1, -1, 1), (1, 1, 1))


def _harris(I, dtype):
    I = np.asarray(I, dtype)
    c = [dtype(np.float32(v)) for v in _GRAY]
    g = c[0] * I[0] + c[1] * I[1] + c[2] * I[2]
    h, w = g.shape

    def grad(taps):
        out = np.zeros((h - 2, w - 2), dtype)
        for k, dx, dy in taps:
            out += g[1 + dy:h - 1 + dy, 1 + dx:w - 1 + dx] * dtype(np.float32(k / 12))
        return out
    ix, iy = grad(_IX), grad(_IY)

    def box(a):
        out = np.zeros((h - 4, w - 4), dtype)
        for a_ in range(3):
            for b_ in range(3):
                out += a[a_:a_ + h - 4, b_:b_ + w - 4]
        return out
    sxx, syy, sxy = box(ix * ix), box(iy * iy), box(ix * iy)
    trace = sxx + syy
    return sxx * syy - sxy * sxy - dtype(np.float32(0.04)) * trace * trace


def _harris_source() -> str:
    def taps(t):
        return " + ".join(f"g[y + {1 + dy}, x + {1 + dx}] * {_f32(k / 12)}" for k, dx, dy in t)
    gray = " + ".join(f"{_f32(c)} * repeat_edge(I)[{i}, y, x]" for i, c in enumerate(_GRAY))
    return f"""\
def harris(I: f32[3, H, W]) -> R:
    g[y, x] = {gray} where y in 0:H+4, x in 0:W+4
    Ix[y, x] = {taps(_IX)}
    Iy[y, x] = {taps(_IY)}
    Ixx[y, x] = Ix[y, x] * Ix[y, x]
    Iyy[y, x] = Iy[y, x] * Iy[y, x]
    Ixy[y, x] = Ix[y, x] * Iy[y, x]
    Sxx[y, x] += Ixx[y + a, x + b] where a in 0:3, b in 0:3
    Syy[y, x] += Iyy[y + a, x + b] where a in 0:3, b in 0:3
    Sxy[y, x] += Ixy[y + a, x + b] where a in 0:3, b in 0:3
    det[y, x] = Sxx[y, x] * Syy[y, x] - Sxy[y, x] * Sxy[y, x]
    trace[y, x] = Sxx[y, x] + Syy[y, x]
    R[y, x] = det[y, x] - {_f32(0.04)} * trace[y, x] * trace[y, x]
"""


def _harris_hl(hl, sizes):
    x, y = hl.Var("x"), hl.Var("y")
    I = hl.ImageParam(hl.Float(32), 3, "input")
    I_edge = _edge(hl, I)
    f = hl.f32
    gray, ix, iy = hl.Func("gray"), hl.Func("Ix"), hl.Func("Iy")
    gray[x, y] = f(_GRAY[0]) * I_edge[x, y, 0] + f(_GRAY[1]) * I_edge[x, y, 1] + f(_GRAY[2]) * I_edge[x, y, 2]

    def taps(t):
        e = None
        for k, dx, dy in t:
            term = gray[x + dx, y + dy] * f(float(np.float32(k / 12)))
            e = term if e is None else e + term
        return e
    iy[x, y] = taps(_IY)
    ix[x, y] = taps(_IX)
    ixx, iyy, ixy = hl.Func("Ixx"), hl.Func("Iyy"), hl.Func("Ixy")
    ixx[x, y] = ix[x, y] * ix[x, y]
    iyy[x, y] = iy[x, y] * iy[x, y]
    ixy[x, y] = ix[x, y] * iy[x, y]

    def sum3x3(fn):
        e = None
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                e = fn[x + dx, y + dy] if e is None else e + fn[x + dx, y + dy]
        return e
    sxx, syy, sxy = hl.Func("Sxx"), hl.Func("Syy"), hl.Func("Sxy")
    sxx[x, y] = sum3x3(ixx)
    syy[x, y] = sum3x3(iyy)
    sxy[x, y] = sum3x3(ixy)
    det, trace, harris, out = hl.Func("det"), hl.Func("trace"), hl.Func("harris"), hl.Func("output")
    det[x, y] = sxx[x, y] * syy[x, y] - sxy[x, y] * sxy[x, y]
    trace[x, y] = sxx[x, y] + syy[x, y]
    harris[x, y] = det[x, y] - f(float(np.float32(0.04))) * trace[x, y] * trace[x, y]
    out[x, y] = harris[x + 2, y + 2]
    return [(I, (3, sizes["H"], sizes["W"]))], out, (sizes["H"], sizes["W"])


# ------------------------------------------------------------------------------------------------ demosaic

# the GRBG mosaic's quad planes: (row, column) of each site in a 2 x 2 quad
_SITE = {"gr": (0, 0), "r": (0, 1), "b": (1, 0), "gb": (1, 1)}


def _demosaic(raw, dtype, avg=None):
    """The camera pipe's demosaic on quad planes, in numpy; raw [2H, 2W] -> [3, 2(H-4), 2(W-4)]. ``avg(a, b)``: the
    mean of two values (default ``(a + b) / 2``; the app's integer one rounds up)."""
    raw = np.asarray(raw, dtype)
    h, w = raw.shape[0] // 2, raw.shape[1] // 2
    q = raw.reshape(h, 2, w, 2)
    plane = {k: q[:, a, :, b] for k, (a, b) in _SITE.items()}
    half = dtype(0.5)

    def at(p, dx, dy, m=2):  # the plane around the interior, shifted by (dx, dy) quads; margin m
        a = plane[p] if isinstance(p, str) else p
        return a[m + dy:a.shape[0] - m + dy, m + dx:a.shape[1] - m + dx]

    if avg is None:
        def avg(a, b):
            return (a + b) * half
    gr, gb = plane["gr"], plane["gb"]
    # green at red and blue sites, margin 1
    g_r = np.where(np.abs(at(gr, 1, 0, 1) - at(gr, 0, 0, 1)) < np.abs(at(gb, 0, -1, 1) - at(gb, 0, 0, 1)),
                   avg(at(gr, 1, 0, 1), at(gr, 0, 0, 1)), avg(at(gb, 0, -1, 1), at(gb, 0, 0, 1)))
    g_b = np.where(np.abs(at(gb, -1, 0, 1) - at(gb, 0, 0, 1)) < np.abs(at(gr, 0, 1, 1) - at(gr, 0, 0, 1)),
                   avg(at(gb, -1, 0, 1), at(gb, 0, 0, 1)), avg(at(gr, 0, 1, 1), at(gr, 0, 0, 1)))
    gR = np.pad(g_r, 1)  # margin 1 -> indexable with margin 2 through `at`
    gB = np.pad(g_b, 1)
    r_gr = at("gr", 0, 0) - avg(at(gR, 0, 0), at(gR, -1, 0)) + avg(at("r", -1, 0), at("r", 0, 0))
    b_gr = at("gr", 0, 0) - avg(at(gB, 0, 0), at(gB, 0, -1)) + avg(at("b", 0, 0), at("b", 0, -1))
    r_gb = at("gb", 0, 0) - avg(at(gR, 0, 0), at(gR, 0, 1)) + avg(at("r", 0, 0), at("r", 0, 1))
    b_gb = at("gb", 0, 0) - avg(at(gB, 0, 0), at(gB, 1, 0)) + avg(at("b", 0, 0), at("b", 1, 0))
    rp = at(gB, 0, 0) - avg(at(gR, 0, 0), at(gR, -1, 1)) + avg(at("r", 0, 0), at("r", -1, 1))
    rn = at(gB, 0, 0) - avg(at(gR, -1, 0), at(gR, 0, 1)) + avg(at("r", -1, 0), at("r", 0, 1))
    r_b = np.where(np.abs(at("r", 0, 0) - at("r", -1, 1)) < np.abs(at("r", -1, 0) - at("r", 0, 1)), rp, rn)
    bp = at(gR, 0, 0) - avg(at(gB, 0, 0), at(gB, 1, -1)) + avg(at("b", 0, 0), at("b", 1, -1))
    bn = at(gR, 0, 0) - avg(at(gB, 1, 0), at(gB, 0, -1)) + avg(at("b", 1, 0), at("b", 0, -1))
    b_r = np.where(np.abs(at("b", 0, 0) - at("b", 1, -1)) < np.abs(at("b", 1, 0) - at("b", 0, -1)), bp, bn)
    out = np.empty((3, h - 4, 2, w - 4, 2), dtype)
    for c, quad in enumerate(((r_gr, at("r", 0, 0), r_b, r_gb), (at("gr", 0, 0), at(gR, 0, 0), at(gB, 0, 0),
                                                                  at("gb", 0, 0)),
                              (b_gr, b_r, at("b", 0, 0), b_gb))):
        for k, v in enumerate(quad):
            out[c, :, k // 2, :, k % 2] = v
    return out.reshape(3, 2 * (h - 4), 2 * (w - 4))


def _demosaic_stages(src: str, avg, less: int = 0) -> tuple[str, str, str, str]:
    """The demosaic's stages read from the quad planes of ``src`` (``[H - less, 2, W - less, 2]``) and ``avg(a, b)``
    (DSL text of the mean of two values): the lines of its interpolation stages and the expressions of the red, green
    and blue of an output quad's site ``(dy, dx)``."""
    def p(site, dx, dy, m=2):  # a plane read at the output's quad (margin m) shifted by (dx, dy)
        a, b = _SITE[site]
        return f"{src}[y + {m + dy}, {a}, x + {m + dx}, {b}]"

    def g(name, dx, dy):  # g_r / g_b (margin 1) read from a margin-2 stage
        return f"{name}[y + {1 + dy}, x + {1 + dx}]"

    def sel(a1, a2, b1, b2, yes, no):
        return f"select(abs({a1} - {a2}) < abs({b1} - {b2}), {yes}, {no})"
    g_r = sel(p("gr", 1, 0, 1), p("gr", 0, 0, 1), p("gb", 0, -1, 1), p("gb", 0, 0, 1),
              avg(p("gr", 1, 0, 1), p("gr", 0, 0, 1)), avg(p("gb", 0, -1, 1), p("gb", 0, 0, 1)))
    g_b = sel(p("gb", -1, 0, 1), p("gb", 0, 0, 1), p("gr", 0, 1, 1), p("gr", 0, 0, 1),
              avg(p("gb", -1, 0, 1), p("gb", 0, 0, 1)), avg(p("gr", 0, 1, 1), p("gr", 0, 0, 1)))

    def corr(green, ga, gb_, ca, cb):  # green - avg(green's interpolation) + avg(the colour's)
        return f"{green} - {avg(ga, gb_)} + {avg(ca, cb)}"
    r_gr = corr(p("gr", 0, 0), g("g_r", 0, 0), g("g_r", -1, 0), p("r", -1, 0), p("r", 0, 0))
    b_gr = corr(p("gr", 0, 0), g("g_b", 0, 0), g("g_b", 0, -1), p("b", 0, 0), p("b", 0, -1))
    r_gb = corr(p("gb", 0, 0), g("g_r", 0, 0), g("g_r", 0, 1), p("r", 0, 0), p("r", 0, 1))
    b_gb = corr(p("gb", 0, 0), g("g_b", 0, 0), g("g_b", 1, 0), p("b", 0, 0), p("b", 1, 0))
    r_b = sel(p("r", 0, 0), p("r", -1, 1), p("r", -1, 0), p("r", 0, 1),
              corr(g("g_b", 0, 0), g("g_r", 0, 0), g("g_r", -1, 1), p("r", 0, 0), p("r", -1, 1)),
              corr(g("g_b", 0, 0), g("g_r", -1, 0), g("g_r", 0, 1), p("r", -1, 0), p("r", 0, 1)))
    b_r = sel(p("b", 0, 0), p("b", 1, -1), p("b", 1, 0), p("b", 0, -1),
              corr(g("g_r", 0, 0), g("g_b", 0, 0), g("g_b", 1, -1), p("b", 0, 0), p("b", 1, -1)),
              corr(g("g_r", 0, 0), g("g_b", 1, 0), g("g_b", 0, -1), p("b", 1, 0), p("b", 0, -1)))

    def quad(q00, q01, q10, q11):
        return f"select(dy == 0, select(dx == 0, {q00}, {q01}), select(dx == 0, {q10}, {q11}))"
    red = quad("r_gr[y, x]", p("r", 0, 0), "r_b[y, x]", "r_gb[y, x]")
    green = quad(p("gr", 0, 0), g("g_r", 0, 0), g("g_b", 0, 0), p("gb", 0, 0))
    blue = quad("b_gr[y, x]", "b_r[y, x]", p("b", 0, 0), "b_gb[y, x]")
    margin = f"where y in 0:H-{less + 2}, x in 0:W-{less + 2}"
    inner = f"where y in 0:H-{less + 4}, x in 0:W-{less + 4}"
    lines = f"""\
    g_r[y, x] = {g_r} {margin}
    g_b[y, x] = {g_b} {margin}
    r_gr[y, x] = {r_gr} {inner}
    b_gr[y, x] = {b_gr} {inner}
    r_gb[y, x] = {r_gb} {inner}
    b_gb[y, x] = {b_gb} {inner}
    r_b[y, x] = {r_b} {inner}
    b_r[y, x] = {b_r} {inner}
"""
    return lines, red, green, blue


def _demosaic_source() -> str:
    lines, red, green, blue = _demosaic_stages("raw", lambda a, b: f"({a} + {b}) * 0.5")
    return f"""\
def demosaic(raw: f32[H, 2, W, 2]) -> O:
{lines}    O[c, y, dy, x, dx] = select(c == 0, {red}, select(c == 1, {green}, {blue})) \
where c in 0:3, y in 0:H-4, dy in 0:2, x in 0:W-4, dx in 0:2
"""


def _demosaic_hl(hl, sizes):
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    raw = hl.ImageParam(hl.Float(32), 2, "raw")
    raw_edge = _edge(hl, raw)
    g_gr, r_r, b_b, g_gb = (hl.Func(n) for n in ("g_gr", "r_r", "b_b", "g_gb"))
    g_gr[x, y] = raw_edge[2 * x, 2 * y]
    r_r[x, y] = raw_edge[2 * x + 1, 2 * y]
    b_b[x, y] = raw_edge[2 * x, 2 * y + 1]
    g_gb[x, y] = raw_edge[2 * x + 1, 2 * y + 1]
    half = hl.f32(0.5)
    r, g, b = _demosaic_hl_rgb(hl, (g_gr, r_r, b_b, g_gb), lambda a, b: (a + b) * half)
    out = hl.Func("output")
    out[x, y, c] = hl.select(c == 0, r[x + 4, y + 4], hl.select(c == 1, g[x + 4, y + 4], b[x + 4, y + 4]))
    return [(raw, (2 * sizes["H"], 2 * sizes["W"]))], out, (3, 2 * (sizes["H"] - 4), 2 * (sizes["W"] - 4))


def _demosaic_hl_rgb(hl, planes, avg):
    """The demosaic in Halide from the quad ``planes`` (Funcs of the GR, R, B and GB sites, indexed by quad) and
    ``avg(a, b)``: the red, green and blue Funcs of the full-resolution image (pixel ``(x, y)`` of the mosaic)."""
    x, y = hl.Var("x"), hl.Var("y")
    g_gr, r_r, b_b, g_gb = planes

    def absd(a, b):
        return hl.abs(a - b)
    g_r, g_b = hl.Func("g_r"), hl.Func("g_b")
    g_r[x, y] = hl.select(absd(g_gr[x + 1, y], g_gr[x, y]) < absd(g_gb[x, y - 1], g_gb[x, y]),
                          avg(g_gr[x + 1, y], g_gr[x, y]), avg(g_gb[x, y - 1], g_gb[x, y]))
    g_b[x, y] = hl.select(absd(g_gb[x - 1, y], g_gb[x, y]) < absd(g_gr[x, y + 1], g_gr[x, y]),
                          avg(g_gb[x - 1, y], g_gb[x, y]), avg(g_gr[x, y + 1], g_gr[x, y]))
    r_gr, b_gr, r_gb, b_gb, r_b, b_r = (hl.Func(n) for n in ("r_gr", "b_gr", "r_gb", "b_gb", "r_b", "b_r"))
    r_gr[x, y] = g_gr[x, y] - avg(g_r[x, y], g_r[x - 1, y]) + avg(r_r[x - 1, y], r_r[x, y])
    b_gr[x, y] = g_gr[x, y] - avg(g_b[x, y], g_b[x, y - 1]) + avg(b_b[x, y], b_b[x, y - 1])
    r_gb[x, y] = g_gb[x, y] - avg(g_r[x, y], g_r[x, y + 1]) + avg(r_r[x, y], r_r[x, y + 1])
    b_gb[x, y] = g_gb[x, y] - avg(g_b[x, y], g_b[x + 1, y]) + avg(b_b[x, y], b_b[x + 1, y])
    rp = g_b[x, y] - avg(g_r[x, y], g_r[x - 1, y + 1]) + avg(r_r[x, y], r_r[x - 1, y + 1])
    rn = g_b[x, y] - avg(g_r[x - 1, y], g_r[x, y + 1]) + avg(r_r[x - 1, y], r_r[x, y + 1])
    r_b[x, y] = hl.select(absd(r_r[x, y], r_r[x - 1, y + 1]) < absd(r_r[x - 1, y], r_r[x, y + 1]), rp, rn)
    bp = g_r[x, y] - avg(g_b[x, y], g_b[x + 1, y - 1]) + avg(b_b[x, y], b_b[x + 1, y - 1])
    bn = g_r[x, y] - avg(g_b[x + 1, y], g_b[x, y - 1]) + avg(b_b[x + 1, y], b_b[x, y - 1])
    b_r[x, y] = hl.select(absd(b_b[x, y], b_b[x + 1, y - 1]) < absd(b_b[x + 1, y], b_b[x, y - 1]), bp, bn)

    def interleave(f00, f01, f10, f11, name):
        out = hl.Func(name)
        qx, qy = x / 2, y / 2
        out[x, y] = hl.select(y % 2 == 0, hl.select(x % 2 == 0, f00[qx, qy], f01[qx, qy]),
                              hl.select(x % 2 == 0, f10[qx, qy], f11[qx, qy]))
        return out
    return (interleave(r_gr, r_r, r_b, r_gb, "r"), interleave(g_gr, g_r, g_b, g_gb, "g"),
            interleave(b_gr, b_r, b_b, b_gb, "b"))


def _mosaic(sizes, rng):
    return [rng.integers(0, 1024, (sizes["H"], 2, sizes["W"], 2)).astype(np.float32)]


# ------------------------------------------------------------------------------------------------ max filter


MAX_FILTER_SLICES = 6
"""The vertical slices of apps/max_filter at its radius of 26 (``ceil(log2(radius)) + 1``): slice k is the maximum
of 2**k rows. The DSL text holds that many stages, which serve radii up to 30 (a larger one reads a taller slice);
the app's own count is this one from radius 17 to 32, and the small sizes use 17."""


def _filter_heights(R: int) -> np.ndarray:
    """The app's ``filter_height`` at each column offset ``dx`` in -R..R, clamped to 0..R+1 as the app reads it: the
    number of ``dy`` in 0..R inside the disc of radius R + 1/4."""
    dx = np.arange(-R, R + 1)[:, None]
    dy = np.arange(R + 1)[None, :]
    return np.clip(np.sum(dx * dx + dy * dy < (R + 0.25) ** 2, axis=1), 0, R + 1)


def _max_filter_np(I, R, **s):
    """apps/max_filter's result from its definition: at column offset dx the maximum over rows y - t .. y + t of the
    edge-repeated image, t the filter height there; then the maximum over dx (not the app's slices)."""
    t = _filter_heights(R)
    top = int(t.max())
    P = np.pad(I, ((0, 0), (top, top), (R, R)), mode="edge")
    h = I.shape[1]
    vert, v = {}, P[:, top:top + h].copy()
    for k in range(1, top + 1):  # v: the maximum over rows y - k .. y + k
        np.maximum(v, P[:, top - k:top - k + h], out=v)
        np.maximum(v, P[:, top + k:top + k + h], out=v)
        if k in t:
            vert[k] = v.copy()
    w = I.shape[2]
    out = vert[t[0]][:, :, 0:w].copy()
    for d in range(1, 2 * R + 1):
        np.maximum(out, vert[t[d]][:, :, d:d + w], out=out)
    return out


def _max_filter_source() -> str:
    """apps/max_filter in the DSL: the filter heights and the slice each reads (the app's ``log(2t + 1) / log 2``),
    the image's logarithmic vertical slices (slice k the maximum of slice k - 1 at rows y and y + 2**(k - 1)), kept
    in one tensor ``V[k, ...]`` that the output reads through each offset's slice, two samples of 2**slice rows
    that cover its 2t + 1. Rows are stored from y = -R - 1 and columns from x = -R."""
    n = MAX_FILTER_SLICES
    slices = "\n".join(f"    L{k}[c, y, x] = max(L{k - 1}[c, y, x], L{k - 1}[c, min(y + {2 ** (k - 1)}, H + R + 1), x])"
                       for k in range(1, n))
    stack = "L0[c, y, x]"
    for k in reversed(range(1, n)):
        stack = f"select(k == {k}, L{k}[c, y, x], {stack})"
    return f"""\
def max_filter(I: f32[3, H, W], R: int) -> O:
    FH[d] += i32(select((d - R) * (d - R) + e * e < (R + 0.25) * (R + 0.25), 1, 0)) where d in 0:2*R+1, e in 0:R+1
    T[d] = clamp(FH[d], 0, R + 1)
    S[d] = clamp(i32(log(f32(2 * T[d] + 1)) / 0.6931472), 0, {n - 1})
    P[d] *= i32(select(k < S[d], 2, 1)) where k in 0:{n - 1}
    L0[c, y, x] = repeat_edge(I)[c, y - R - 1, x - R] where c in 0:3, y in 0:H+R+2, x in 0:W+2*R
{slices}
    V[k, c, y, x] = {stack} where k in 0:{n}
    O[c, y, x] max= max(V[S[d], c, y + R + 1 - T[d], x + d], \
V[S[d], c, y + R + 2 + T[d] - min(P[d], 2 * R), x + d]) where c in 0:3, y in 0:H, x in 0:W
"""


def _max_filter_hl(hl, sizes):
    """apps/max_filter as the app writes it: ``vert_log`` updated slice by slice over an RDom, ``slice_for_radius``,
    ``vert`` for every radius t, ``filter_height``, and the horizontal maximum of ``vert`` at each offset's height."""
    x, y, c, t = hl.Var("x"), hl.Var("y"), hl.Var("c"), hl.Var("t")
    I = hl.ImageParam(hl.Float(32), 3, "input")
    inp = _edge(hl, I)
    R, h = sizes["R"], sizes["H"]
    slices = math.ceil(math.log2(R)) + 1
    vert_log, slice_for_radius, vert = hl.Func("vert_log"), hl.Func("slice_for_radius"), hl.Func("vert")
    filter_height, out = hl.Func("filter_height"), hl.Func("output")
    vert_log[x, y, c, t] = inp[x, y, c]
    r = hl.RDom([(-R, h + R), (1, slices - 1)])
    vert_log[x, r.x, c, r.y] = hl.max(vert_log[x, r.x, c, r.y - 1],
                                      vert_log[x, r.x + hl.clamp(1 << (r.y - 1), 0, 2 * R), c, r.y - 1])
    slice_for_radius[t] = hl.i32(hl.floor(hl.log(hl.f32(2 * t + 1)) / hl.f32(math.log(2.0))))
    sl = hl.clamp(slice_for_radius[t], 0, slices)
    vert[x, y, c, t] = hl.max(vert_log[x, y - t, c, sl], vert_log[x, y + t + 1 - hl.clamp(1 << sl, 0, 2 * R), c, sl])
    dy = hl.RDom([(0, R + 1)])
    filter_height[x] = hl.sum(hl.select(x * x + dy.x * dy.x < hl.f32((R + 0.25) * (R + 0.25)), 1, 0))
    dx = hl.RDom([(-R, 2 * R + 1)])
    out[x, y, c] = hl.maximum(vert[x + dx.x, y, c, hl.clamp(filter_height[dx.x], 0, R + 1)])
    return [(I, (3, sizes["H"], sizes["W"]))], out, (3, sizes["H"], sizes["W"])


# ------------------------------------------------------------------------------------------------ stencil chain

STAGES = 8
_WEIGHTS = [[(i + 3) * (j + 3) / 225 for j in range(-2, 3)] for i in range(-2, 3)]  # [i (x offset)][j (y offset)]


def _stencil_chain(I, dtype):
    a = np.pad(np.asarray(I, dtype), 2 * STAGES, mode="edge")
    for _ in range(STAGES):
        h, w = a.shape
        out = np.zeros((h - 4, w - 4), dtype)
        for i in range(5):
            for j in range(5):
                out += a[j:j + h - 4, i:i + w - 4] * dtype(np.float32(_WEIGHTS[i][j]))
        a = out
    return a


def _stencil_chain_torch_setup(inputs, sizes):
    import torch
    (I,) = inputs
    k = torch.tensor(np.array(_WEIGHTS, np.float32).T.copy()).view(1, 1, 5, 5)  # [y][x]

    def run():
        a = torch.nn.functional.pad(I.view(1, 1, *I.shape), (2 * STAGES,) * 4, mode="replicate")
        for _ in range(STAGES):
            a = torch.nn.functional.conv2d(a, k)
        return a[0, 0]
    return run


def _stencil_chain_source() -> str:
    pad = 2 * STAGES
    lines = [f"def stencil_chain(I: f32[H, W]) -> S{STAGES}:",
             f"    S0[y, x] = repeat_edge(I)[y - {pad}, x - {pad}] where y in 0:H+{2 * pad}, x in 0:W+{2 * pad}"]
    for s in range(1, STAGES + 1):
        lines.append(f"    S{s}[y, x] += S{s - 1}[y + j, x + i] * (f32((i + 1) * (j + 1)) / 225.0) "
                     "where i in 0:5, j in 0:5")
    return "\n".join(lines) + "\n"


def _stencil_chain_hl(hl, sizes):
    x, y = hl.Var("x"), hl.Var("y")
    I = hl.ImageParam(hl.Float(32), 2, "input")
    I_edge = _edge(hl, I)
    prev = hl.Func("input_wrap")
    prev[x, y] = I_edge[x - 2 * STAGES, y - 2 * STAGES]
    for s in range(STAGES):
        f = hl.Func(f"stage_{s}")
        e = None
        for i in range(5):
            for j in range(5):
                term = prev[x + i, y + j] * hl.f32(float(np.float32(_WEIGHTS[i][j])))
                e = term if e is None else e + term
        f[x, y] = e
        prev = f
    return [(I, (sizes["H"], sizes["W"]))], prev, (sizes["H"], sizes["W"])


# ------------------------------------------------------------------------------------------------ unsharp

SIGMA = 1.5
_KERNEL = [math.exp(-x * x / (2 * SIGMA * SIGMA)) / (math.sqrt(2 * math.pi) * SIGMA) for x in range(4)]


def _unsharp(I, dtype):
    I = np.asarray(I, dtype)
    c = [dtype(np.float32(v)) for v in _GRAY]
    k = [dtype(np.float32(v)) for v in _KERNEL]
    g = c[0] * I[0] + c[1] * I[1] + c[2] * I[2]
    h, w = g.shape
    by = k[0] * g[3:h - 3]
    for d in (1, 2, 3):
        by = by + k[d] * (g[3 - d:h - 3 - d] + g[3 + d:h - 3 + d])
    bx = k[0] * by[:, 3:w - 3]
    for d in (1, 2, 3):
        bx = bx + k[d] * (by[:, 3 - d:w - 3 - d] + by[:, 3 + d:w - 3 + d])
    gc = g[3:h - 3, 3:w - 3]
    ratio = (dtype(2) * gc - bx) / gc
    return ratio * I[:, 3:h - 3, 3:w - 3]


def _unsharp_source() -> str:
    k = [_f32(v) for v in _KERNEL]
    gray = " + ".join(f"{_f32(c)} * repeat_edge(I)[{i}, y - 3, x - 3]" for i, c in enumerate(_GRAY))
    by = f"{k[0]} * g[y + 3, x]" + "".join(f" + {k[d]} * (g[y + {3 - d}, x] + g[y + {3 + d}, x])" for d in (1, 2, 3))
    bx = f"{k[0]} * by[y, x + 3]" + "".join(f" + {k[d]} * (by[y, x + {3 - d}] + by[y, x + {3 + d}])"
                                           for d in (1, 2, 3))
    return f"""\
def unsharp(I: f32[3, H, W]) -> O:
    g[y, x] = {gray} where y in 0:H+6, x in 0:W+6
    by[y, x] = {by}
    bx[y, x] = {bx}
    sharpen[y, x] = 2.0 * g[y + 3, x + 3] - bx[y, x]
    ratio[y, x] = sharpen[y, x] / g[y + 3, x + 3]
    O[c, y, x] = ratio[y, x] * I[c, y, x]
"""


def _unsharp_hl(hl, sizes):
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    I = hl.ImageParam(hl.Float(32), 3, "input")
    I_edge = _edge(hl, I)
    f = hl.f32
    k = [f(float(np.float32(v))) for v in _KERNEL]
    gray, blur_y, blur_x, sharpen, ratio, out = (hl.Func(n) for n in
                                                 ("gray", "blur_y", "blur_x", "sharpen", "ratio", "output"))
    gray[x, y] = f(_GRAY[0]) * I_edge[x, y, 0] + f(_GRAY[1]) * I_edge[x, y, 1] + f(_GRAY[2]) * I_edge[x, y, 2]
    blur_y[x, y] = (k[0] * gray[x, y] + k[1] * (gray[x, y - 1] + gray[x, y + 1])
                    + k[2] * (gray[x, y - 2] + gray[x, y + 2]) + k[3] * (gray[x, y - 3] + gray[x, y + 3]))
    blur_x[x, y] = (k[0] * blur_y[x, y] + k[1] * (blur_y[x - 1, y] + blur_y[x + 1, y])
                    + k[2] * (blur_y[x - 2, y] + blur_y[x + 2, y]) + k[3] * (blur_y[x - 3, y] + blur_y[x + 3, y]))
    sharpen[x, y] = 2 * gray[x, y] - blur_x[x, y]
    ratio[x, y] = sharpen[x, y] / gray[x, y]
    out[x, y, c] = ratio[x, y] * I_edge[x, y, c]
    return [(I, (3, sizes["H"], sizes["W"]))], out, (3, sizes["H"], sizes["W"])


# ------------------------------------------------------------------------------------------------ IIR blur

ALPHA = np.float32(0.1)  # the app's estimate of its ``alpha`` parameter
_BETA = np.float32(1) - ALPHA  # 1 - alpha in float32, as the app computes it


def _iir_blur(I, dtype):
    """apps/iir_blur in numpy: a causal then an anticausal first-order pass down the columns, then the same along the
    rows; [3, H, W] -> [3, H, W]."""
    a, b = dtype(ALPHA), dtype(_BETA)

    def columns(X):  # along axis 1 of [c, y, x]
        out = np.array(X, dtype)
        for y in range(1, out.shape[1]):
            out[:, y] = b * out[:, y - 1] + a * out[:, y]
        for y in range(out.shape[1] - 2, -1, -1):
            out[:, y] = b * out[:, y + 1] + a * out[:, y]
        return out
    return np.swapaxes(columns(np.swapaxes(columns(I), 1, 2)), 1, 2)


def _iir_blur_source() -> str:
    a, b = _f32(ALPHA), _f32(_BETA)
    return f"""\
def iir_blur(I: f32[3, H, W]) -> O:
    Cy[c, y, x] = I[c, y, x] if y == 0 else {b} * Cy[c, y - 1, x] + {a} * I[c, y, x]
    Ay[c, j, x] = Cy[c, H - 1, x] if j == 0 else {b} * Ay[c, j - 1, x] + {a} * Cy[c, H - 1 - j, x]
    Cx[c, y, x] = Ay[c, H - 1 - y, 0] if x == 0 else {b} * Cx[c, y, x - 1] + {a} * Ay[c, H - 1 - y, x]
    Ax[c, y, j] = Cx[c, y, W - 1] if j == 0 else {b} * Ax[c, y, j - 1] + {a} * Cx[c, y, W - 1 - j]
    O[c, y, x] = Ax[c, y, W - 1 - x]
"""


def _iir_blur_hl(hl, sizes, hand=False):
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    I = hl.ImageParam(hl.Float(32), 3, "input")
    alpha = hl.f32(float(ALPHA))
    vec = hl.get_jit_target_from_environment().natural_vector_size(hl.Float(32))

    def blur_cols_transpose(inp, height, name):  # the app's function of the same name
        blur = hl.Func(f"blur_{name}")
        blur[x, y, c] = hl.undef(hl.Float(32))
        blur[x, 0, c] = inp[x, 0, c]
        ry = hl.RDom([(1, height - 1)])
        blur[x, ry.x, c] = (1 - alpha) * blur[x, ry.x - 1, c] + alpha * inp[x, ry.x, c]
        flip = height - ry.x - 1
        blur[x, flip, c] = (1 - alpha) * blur[x, flip + 1, c] + alpha * blur[x, flip, c]
        transpose = hl.Func(f"transpose_{name}")
        transpose[x, y, c] = blur[y, x, c]
        if hand:  # the app's CPU schedule: strips of columns on threads, the scans vectorized across them
            xo, yo = hl.Var("xo"), hl.Var("yo")
            transpose.compute_root().tile(x, y, xo, yo, x, y, vec, vec * 4).vectorize(x).parallel(yo).parallel(c)
            blur.compute_at(transpose, yo)
            blur.update(1).reorder(x, ry.x).vectorize(x)
            blur.update(2).reorder(x, ry.x).vectorize(x)
        return transpose
    inp = hl.Func("input_f")
    inp[x, y, c] = I[x, y, c]
    out = blur_cols_transpose(blur_cols_transpose(inp, sizes["H"], "y"), sizes["W"], "x")
    return [(I, (3, sizes["H"], sizes["W"]))], out, (3, sizes["H"], sizes["W"])


# ------------------------------------------------------------------------------------------------ histogram equalize

# apps/hist's luma and chroma coefficients in 8-bit fixed point (x 256), so that every implementation computes the
# same integers: Y = 0.299 R + 0.587 G + 0.114 B, Cr = 0.713 (R - Y), Cb = 0.564 (B - Y), and back to RGB
_LUMA = (77, 150, 29)
_CR, _CB = 183, 144
_TO_R, _TO_G_CB, _TO_G_CR, _TO_B = 358, 88, 182, 452


def _histeq(I, **s):
    """Histogram equalization of the luma of a u8 [3, H, W] image, colour kept, in numpy's int64."""
    I = I.astype(np.int64)
    Y = (_LUMA[0] * I[0] + _LUMA[1] * I[1] + _LUMA[2] * I[2] + 128) // 256
    cdf = np.cumsum(np.bincount(Y.ravel(), minlength=256))
    eq = cdf[Y] * 255 // Y.size
    cr, cb = (I[0] - Y) * _CR // 256, (I[2] - Y) * _CB // 256
    rgb = np.stack([eq + _TO_R * cr // 256, eq - (_TO_G_CB * cb + _TO_G_CR * cr) // 256, eq + _TO_B * cb // 256])
    return np.clip(rgb, 0, 255).astype(np.uint8)


HISTEQ = f"""\
def histogram_equalize(I: u8[3, H, W]) -> O:
    Y[y, x] = ({_LUMA[0]} * i32(I[0, y, x]) + {_LUMA[1]} * i32(I[1, y, x]) + {_LUMA[2]} * i32(I[2, y, x]) + 128) // 256
    hist[b := Y[y, x]] += 1 where b in 0:256
    cdf[b] = cdf[b - 1] + hist[b]
    eq[y, x] = cdf[Y[y, x]] * 255 // (H * W)
    Cr[y, x] = (i32(I[0, y, x]) - Y[y, x]) * {_CR} // 256
    Cb[y, x] = (i32(I[2, y, x]) - Y[y, x]) * {_CB} // 256
    O[c, y, x] = sat_u8(select(c == 0, eq[y, x] + {_TO_R} * Cr[y, x] // 256, \
select(c == 1, eq[y, x] - ({_TO_G_CB} * Cb[y, x] + {_TO_G_CR} * Cr[y, x]) // 256, \
eq[y, x] + {_TO_B} * Cb[y, x] // 256))) where c in 0:3
"""


def _histeq_hl(hl, sizes, hand=False):
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    h, w = sizes["H"], sizes["W"]
    I = hl.ImageParam(hl.UInt(8), 3, "input")
    i32 = hl.i32
    luma, cr, cb = hl.Func("Y"), hl.Func("Cr"), hl.Func("Cb")
    luma[x, y] = (_LUMA[0] * i32(I[x, y, 0]) + _LUMA[1] * i32(I[x, y, 1]) + _LUMA[2] * i32(I[x, y, 2]) + 128) / 256
    cr[x, y] = (i32(I[x, y, 0]) - luma[x, y]) * _CR / 256
    cb[x, y] = (i32(I[x, y, 2]) - luma[x, y]) * _CB / 256
    hist_rows, hist, cdf, eq = hl.Func("hist_rows"), hl.Func("hist"), hl.Func("cdf"), hl.Func("equalize")
    hist_rows[x, y] = 0
    rx = hl.RDom([(0, w)])
    hist_rows[hl.clamp(luma[rx.x, y], 0, 255), y] += 1
    hist[x] = 0
    ry = hl.RDom([(0, h)])
    hist[x] += hist_rows[x, ry.x]
    cdf[x] = hist[0]
    b = hl.RDom([(1, 255)])
    cdf[b.x] = cdf[b.x - 1] + hist[b.x]
    eq[x, y] = cdf[hl.clamp(luma[x, y], 0, 255)] * 255 / (h * w)
    red = eq[x, y] + _TO_R * cr[x, y] / 256
    green = eq[x, y] - (_TO_G_CB * cb[x, y] + _TO_G_CR * cr[x, y]) / 256
    blue = eq[x, y] + _TO_B * cb[x, y] / 256
    out = hl.Func("output")
    out[x, y, c] = hl.u8(hl.clamp(hl.select(c == 0, red, c == 1, green, blue), 0, 255))
    if hand:  # the app's CPU schedule
        cdf.bound(x, 0, 256)
        luma.compute_root().parallel(y, 8).vectorize(x, 8)
        hist_rows.compute_root().vectorize(x, 8).parallel(y, 8).update().parallel(y, 8)
        hist.compute_root().vectorize(x, 8).update().reorder(x, ry.x).vectorize(x, 8).unroll(x, 4).parallel(x) \
            .reorder(ry.x, x)
        cdf.compute_root()
        eq.compute_at(out, x).unroll(x)
        cb.compute_at(out, x).vectorize(x)
        cr.compute_at(out, x).vectorize(x)
        out.reorder(c, x, y).bound(c, 0, 3).unroll(c).parallel(y, 8).vectorize(x, 8)
    return [(I, (3, h, w))], out, (3, h, w)


def _u8_image(sizes, rng):
    return [rng.integers(0, 256, (3, sizes["H"], sizes["W"])).astype(np.uint8)]


# ------------------------------------------------------------------------------------------------ camera pipe

# apps/camera_pipe's calibration (its process.cpp) at its defaults: colour temperature 3700 K, gamma 2, contrast 50,
# black level 25, white level 1023, sharpening strength 1
_MATRIX_3200 = ((1.6697, -0.2693, -0.4004, -42.4346), (-0.3576, 1.0615, 1.5949, -37.1158),
                (-0.2175, -1.8751, 6.9640, -26.6970))
_MATRIX_7000 = ((2.2997, -0.4478, 0.1706, -39.0923), (-0.3826, 1.5906, -0.2080, -25.4311),
                (-0.0888, -0.7344, 2.2832, -20.0826))
COLOR_TEMP, GAMMA, CONTRAST, BLACK, WHITE, SHARPEN_X32 = 3700.0, 2.0, 50.0, 25, 1023, 32


def _color_matrix() -> np.ndarray:
    """The app's Q8.8 colour matrix, [3 rows][r, g, b, offset], interpolated by inverse kelvin in float32."""
    f = np.float32
    alpha = (f(1) / f(COLOR_TEMP) - f(1) / f(3200)) / (f(1) / f(7000) - f(1) / f(3200))
    m = np.array(_MATRIX_3200, f) * alpha + np.array(_MATRIX_7000, f) * (f(1) - alpha)
    return (m * f(256)).astype(np.int16).astype(np.int64)


def _tone_curve() -> np.ndarray:
    """The app's tone curve as its 1024-entry u8 lookup table (gamma, then a piecewise quadratic contrast curve)."""
    f = np.float32
    v = np.arange(1024)
    xf = np.clip((v - BLACK).astype(f) * (f(1) / f(WHITE - BLACK)), f(0), f(1))
    g = np.power(xf, f(1) / f(GAMMA))
    b = f(2) - np.power(f(2), f(CONTRAST) / f(100))
    a = f(2) - f(2) * b
    z = np.where(g > f(0.5), f(1) - (a * (f(1) - g) * (f(1) - g) + b * (f(1) - g)), a * g * g + b * g)
    val = np.clip(z * f(255) + f(0.5), f(0), f(255)).astype(np.uint8)
    return np.where(v <= BLACK, 0, np.where(v > WHITE, 255, val)).astype(np.uint8)


def _camera_pipe(I, curve, **s):
    """The stages of apps/camera_pipe after its demosaic, in numpy: [3, H, W] u16 -> [3, H - 2, W - 2] u8."""
    m = _color_matrix()
    I = I.astype(np.int64)
    corrected = np.stack([(m[k, 3] + m[k, 0] * I[0] + m[k, 1] * I[1] + m[k, 2] * I[2]) // 256 for k in range(3)])
    corrected = corrected.astype(np.int16)
    curved = curve[np.clip(corrected, 0, 1023)].astype(np.int64)

    def avg(a, b):  # the app's average of two u8 values, rounding up
        return (a + b + 1) // 2
    uy = avg(avg(curved[:, :-2], curved[:, 2:]), curved[:, 1:-1])
    un = avg(avg(uy[:, :, :-2], uy[:, :, 2:]), uy[:, :, 1:-1])
    centre = curved[:, 1:-1, 1:-1]
    mask = centre - un
    return np.clip(centre + mask * SHARPEN_X32 // 32, 0, 255).astype(np.uint8)


def _colour_rows(read) -> list[str]:
    """DSL text of the Q8.8 colour matrix's three rows, channel ``k`` of the input read as ``read(k)``."""
    m = _color_matrix()
    return [f"({m[k, 3]} + {m[k, 0]} * i32({read(0)}) + {m[k, 1]} * i32({read(1)}) + {m[k, 2]} * i32({read(2)}))"
            " // 256" for k in range(3)]


def _blur121(a: str, b: str, c: str) -> str:
    """DSL text of the app's [1 2 1] blur of u8 values ``a``, ``b``, ``c`` (``b`` the centre): two averages that
    round up."""
    def avg(p, q):
        return f"u8((u16({p}) + u16({q}) + 1) // 2)"
    return avg(avg(a, c), b)


def _camera_pipe_source() -> str:
    rows = _colour_rows(lambda k: f"I[{k}, y, x]")
    blur121 = _blur121
    return f"""\
def camera_pipe(I: u16[3, H, W], curve: u8[1024]) -> O:
    corrected[c, y, x] = i16(select(c == 0, {rows[0]}, select(c == 1, {rows[1]}, {rows[2]}))) where c in 0:3
    curved[c, y, x] = curve[clamp(corrected[c, y, x], 0, 1023)]
    unsharp_y[c, y, x] = {blur121("curved[c, y, x]", "curved[c, y + 1, x]", "curved[c, y + 2, x]")}
    unsharp[c, y, x] = {blur121("unsharp_y[c, y, x]", "unsharp_y[c, y, x + 1]", "unsharp_y[c, y, x + 2]")}
    mask[c, y, x] = i16(curved[c, y + 1, x + 1]) - i16(unsharp[c, y, x])
    O[c, y, x] = sat_u8(i16(curved[c, y + 1, x + 1]) + mask[c, y, x] * {SHARPEN_X32} // 32)
"""


def _camera_pipe_hl(hl, sizes):
    x, y = hl.Var("x"), hl.Var("y")
    h, w = sizes["H"], sizes["W"]
    I = hl.ImageParam(hl.UInt(16), 3, "input")
    curve = hl.ImageParam(hl.UInt(8), 1, "curve")
    out = _after_demosaic_hl(hl, [I[x, y, k] for k in range(3)], curve, 1)
    return [(I, (3, h, w)), (curve, (1024,))], out, (3, h - 2, w - 2)


def _after_demosaic_hl(hl, rgb, curve, shift: int):
    """The camera pipe's stages after its demosaic in Halide, from the red, green and blue of pixel ``(x, y)`` (three
    Exprs in ``x`` and ``y``): the Q8.8 colour matrix, the tone curve ``curve`` and the u8 sharpen; the output Func
    reads the sharpened image ``shift`` pixels in."""
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    m = _color_matrix()
    ir, ig, ib = (hl.i32(v) for v in rgb)
    rows = [hl.i16((int(m[k, 3]) + int(m[k, 0]) * ir + int(m[k, 1]) * ig + int(m[k, 2]) * ib) / 256)
            for k in range(3)]
    corrected, curved = hl.Func("corrected"), hl.Func("curved")
    corrected[x, y, c] = hl.select(c == 0, rows[0], c == 1, rows[1], rows[2])
    curved[x, y, c] = curve[hl.i32(hl.clamp(corrected[x, y, c], 0, 1023))]

    def avg(a, b):  # the app's: average two positive values rounding up
        return hl.u8((hl.u16(a) + b + 1) / 2)

    def blur121(a, b, c_):
        return avg(avg(a, c_), b)
    unsharp_y, unsharp, mask, out = hl.Func("unsharp_y"), hl.Func("unsharp"), hl.Func("mask"), hl.Func("output")
    unsharp_y[x, y, c] = blur121(curved[x, y - 1, c], curved[x, y, c], curved[x, y + 1, c])
    unsharp[x, y, c] = blur121(unsharp_y[x - 1, y, c], unsharp_y[x, y, c], unsharp_y[x + 1, y, c])
    mask[x, y, c] = hl.i16(curved[x, y, c]) - hl.i16(unsharp[x, y, c])
    sharpened = hl.Func("sharpened")
    sharpened[x, y, c] = hl.u8_sat(curved[x, y, c] + (mask[x, y, c] * hl.u8(SHARPEN_X32)) / 32)
    out[x, y, c] = sharpened[x + shift, y + shift, c]
    return out


def _camera_inputs(sizes, rng):
    """A demosaiced 10-bit image (the app's raw values) and the app's tone curve."""
    return [rng.integers(0, 1024, (3, sizes["H"], sizes["W"])).astype(np.uint16), _tone_curve()]


# ------------------------------------------------------------------------------------------------ camera pipe, whole

def _hot_pixels(raw):
    """The camera pipe's hot pixel suppression on quads ``[H, 2, W, 2]`` (int64): each value clamped to the range of
    its four neighbours of the same colour (two pixels away: one quad); ``[H - 2, 2, W - 2, 2]``."""
    around = [raw[:-2, :, 1:-1], raw[2:, :, 1:-1], raw[1:-1, :, :-2], raw[1:-1, :, 2:]]
    return np.clip(raw[1:-1, :, 1:-1], np.minimum.reduce(around), np.maximum.reduce(around))


def _camera_pipe_raw(raw, curve, **s):
    """apps/camera_pipe from its raw GRBG mosaic, in numpy (int64, then the app's types): hot pixel suppression, the
    demosaic in integers (means rounded up), then :func:`_camera_pipe`'s colour correction, tone curve and sharpen;
    raw u16 ``[H, 2, W, 2]`` (the quads of ``[2H, 2W]``) -> u8 ``[3, H - 8, 2, W - 8, 2]`` (``[3, 2(H-8), 2(W-8)]``)."""
    h, w = raw.shape[0], raw.shape[2]
    denoised = _hot_pixels(np.asarray(raw, np.int64)).reshape(2 * (h - 2), 2 * (w - 2))
    demosaiced = _demosaic(denoised, np.int64, avg=lambda a, b: (a + b + 1) // 2)
    sharpened = _camera_pipe(demosaiced, curve)[:, 1:-1, 1:-1]
    return sharpened.reshape(3, h - 8, 2, w - 8, 2)


def _camera_pipe_raw_source() -> str:
    def clamp_by(site_reads):
        centre, around = site_reads[0], site_reads[1:]
        lo = f"min(min({around[0]}, {around[1]}), min({around[2]}, {around[3]}))"
        hi = f"max(max({around[0]}, {around[1]}), max({around[2]}, {around[3]}))"
        return f"min(max({centre}, {lo}), {hi})"
    reads = [f"raw[y + {1 + dy}, a, x + {1 + dx}, b]" for dy, dx in ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1))]
    lines, red, green, blue = _demosaic_stages(
        "denoised", lambda a, b: f"i16((i32({a}) + i32({b}) + 1) // 2)", less=2)
    q = "y, dy, x, dx"
    rows = _colour_rows(lambda k: f"dem[{k}, {q}]")
    blur121 = _blur121
    # the pixel above and below an output quad's site (dy) and left and right of it (dx), in quads; a margin of one
    up = "select(dy == 1, curved[c, y + 1, 0, x, dx], curved[c, y, 1, x, dx])"
    down = "select(dy == 0, curved[c, y + 1, 1, x, dx], curved[c, y + 2, 0, x, dx])"
    left = "select(dx == 1, unsharp_y[c, y, dy, x + 1, 0], unsharp_y[c, y, dy, x, 1])"
    right = "select(dx == 0, unsharp_y[c, y, dy, x + 1, 1], unsharp_y[c, y, dy, x + 2, 0])"
    centre = "curved[c, y + 1, dy, x + 1, dx]"
    quads = "where c in 0:3, y in 0:H-6, dy in 0:2, x in 0:W-6, dx in 0:2"
    rows_in = "where c in 0:3, y in 0:H-8, dy in 0:2, x in 0:W-6, dx in 0:2"
    out = "where c in 0:3, y in 0:H-8, dy in 0:2, x in 0:W-8, dx in 0:2"
    return f"""\
def camera_pipe_raw(raw: u16[H, 2, W, 2], curve: u8[1024]) -> O:
    denoised[y, a, x, b] = i16({clamp_by(reads)}) where y in 0:H-2, a in 0:2, x in 0:W-2, b in 0:2
{lines}    dem[c, y, dy, x, dx] = select(c == 0, {red}, select(c == 1, {green}, {blue})) {quads}
    corrected[c, {q}] = i16(select(c == 0, {rows[0]}, select(c == 1, {rows[1]}, {rows[2]}))) {quads}
    curved[c, {q}] = curve[clamp(corrected[c, {q}], 0, 1023)] {quads}
    unsharp_y[c, {q}] = {blur121(up, "curved[c, y + 1, dy, x, dx]", down)} {rows_in}
    unsharp[c, {q}] = {blur121(left, "unsharp_y[c, y, dy, x + 1, dx]", right)} {out}
    mask[c, {q}] = i16({centre}) - i16(unsharp[c, {q}]) {out}
    O[c, {q}] = sat_u8(i16({centre}) + mask[c, {q}] * {SHARPEN_X32} // 32) {out}
"""


def _camera_pipe_raw_hl(hl, sizes):
    x, y = hl.Var("x"), hl.Var("y")
    h, w = sizes["H"], sizes["W"]
    raw = hl.ImageParam(hl.UInt(16), 2, "raw")
    curve = hl.ImageParam(hl.UInt(8), 1, "curve")
    raw_edge = _edge(hl, raw)
    denoised = hl.Func("denoised")  # in the mosaic's pixels: the same colour is two pixels away
    around = [raw_edge[x - 2, y], raw_edge[x + 2, y], raw_edge[x, y - 2], raw_edge[x, y + 2]]
    denoised[x, y] = hl.clamp(raw_edge[x, y], hl.min(hl.min(around[0], around[1]), hl.min(around[2], around[3])),
                              hl.max(hl.max(around[0], around[1]), hl.max(around[2], around[3])))
    planes = [hl.Func(n) for n in ("g_gr", "r_r", "b_b", "g_gb")]
    for f, (a, b) in zip(planes, ((0, 0), (0, 1), (1, 0), (1, 1))):
        f[x, y] = hl.i16(denoised[2 * x + b, 2 * y + a])
    rgb = _demosaic_hl_rgb(hl, planes, lambda p, q: hl.i16((hl.i32(p) + hl.i32(q) + 1) / 2))
    # the demosaic's output starts 3 quads (6 pixels) in, the sharpened image one more quad
    out = _after_demosaic_hl(hl, [f[x + 6, y + 6] for f in rgb], curve, 2)
    return [(raw, (2 * h, 2 * w)), (curve, (1024,))], out, (3, 2 * (h - 8), 2 * (w - 8))


def _raw_inputs(sizes, rng):
    """A 10-bit raw mosaic as quads (the app's raw values; one in a thousand a hot pixel at the top of the range)
    and the app's tone curve."""
    raw = rng.integers(0, 1024, (sizes["H"], 2, sizes["W"], 2))
    raw[rng.random(raw.shape) < 0.001] = 1023
    return [raw.astype(np.uint16), _tone_curve()]


# ------------------------------------------------------------------------------------------------ bilateral grid

S_SIGMA = 8  # the app's grid cell, in pixels
INV_R_SIGMA = 10.0  # 1 / r_sigma for the app's estimate r_sigma = 0.1
_GRID_Z = 16  # the histogram's z from -2 to 13, stored from 0
_PAD = 2  # the grid's x and y stored from -2


def _bilateral_grid(I, dtype, **s):
    """apps/bilateral_grid in numpy: I [8 GH, 8 GW] -> [8 GH, 8 GW]."""
    I = np.asarray(I, dtype)
    gh, gw = I.shape[0] // S_SIGMA, I.shape[1] // S_SIGMA
    # the grid's cells from -2 to GH + 2 (and GW + 2), each reading 8 x 8 pixels of the edge-repeated input
    ys = np.clip(np.arange(-_PAD * S_SIGMA - S_SIGMA // 2, (gh + 3) * S_SIGMA - S_SIGMA // 2), 0, I.shape[0] - 1)
    xs = np.clip(np.arange(-_PAD * S_SIGMA - S_SIGMA // 2, (gw + 3) * S_SIGMA - S_SIGMA // 2), 0, I.shape[1] - 1)
    val = np.clip(I[np.ix_(ys, xs)], 0, 1)
    zi = (val * dtype(INV_R_SIGMA) + dtype(0.5)).astype(np.int64) + _PAD
    cy, cx = np.meshgrid(np.arange(len(ys)) // S_SIGMA, np.arange(len(xs)) // S_SIGMA, indexing="ij")
    grid = np.zeros((gh + 5, gw + 5, _GRID_Z, 2), dtype)
    np.add.at(grid, (cy, cx, zi, 0), val)
    np.add.at(grid, (cy, cx, zi, 1), dtype(1))

    def blur5(a, axis, n):  # 1 4 6 4 1 along axis, n outputs
        t = [np.take(a, range(k, k + n), axis=axis) for k in range(5)]
        return t[0] + t[1] * dtype(4) + t[2] * dtype(6) + t[3] * dtype(4) + t[4]
    blurred = blur5(blur5(blur5(grid, 2, 12), 1, gw + 1), 0, gh + 1)
    val = np.clip(I, 0, 1)
    zv = val * dtype(INV_R_SIGMA)
    zi = zv.astype(np.int64)
    zf = zv - zi
    y, x = np.meshgrid(np.arange(I.shape[0]), np.arange(I.shape[1]), indexing="ij")
    yi, xi = y // S_SIGMA, x // S_SIGMA
    yf, xf = (y % S_SIGMA).astype(dtype) / S_SIGMA, (x % S_SIGMA).astype(dtype) / S_SIGMA

    def lerp(a, b, wt):
        return a * (1 - wt) + b * wt

    def at(dy, dx, dz, c):
        return blurred[yi + dy, xi + dx, zi + dz, c]

    def tri(c):
        return lerp(lerp(lerp(at(0, 0, 0, c), at(0, 1, 0, c), xf), lerp(at(1, 0, 0, c), at(1, 1, 0, c), xf), yf),
                    lerp(lerp(at(0, 0, 1, c), at(0, 1, 1, c), xf), lerp(at(1, 0, 1, c), at(1, 1, 1, c), xf), yf),
                    zf)
    return tri(0) / tri(1)


def _bilateral_grid_source() -> str:
    half, inv = S_SIGMA // 2, repr(INV_R_SIGMA)
    off = _PAD * S_SIGMA + half  # the grid's first cell reads from this many pixels before the image

    def blur5(name, fmt):
        return " + ".join(f"{name}[{fmt(k)}]" + ("" if w == 1 else f" * {w}.0")
                          for k, w in enumerate((1, 4, 6, 4, 1)))

    def at(dy, dx, dz, c):
        zi = "ZI[8 * gy + py, 8 * gx + px]" + (f" + {dz}" if dz else "")
        return f"blury[gy + {dy}, gx + {dx}, {zi}, {c}]"

    def lerp(a, b, wt):
        return f"({a}) * (1.0 - {wt}) + ({b}) * {wt}"

    def tri(c):
        xf, yf = "f32(px) / 8.0", "f32(py) / 8.0"
        return lerp(lerp(lerp(at(0, 0, 0, c), at(0, 1, 0, c), xf), lerp(at(1, 0, 0, c), at(1, 1, 0, c), xf), yf),
                    lerp(lerp(at(0, 0, 1, c), at(0, 1, 1, c), xf), lerp(at(1, 0, 1, c), at(1, 1, 1, c), xf), yf),
                    "ZF[8 * gy + py, 8 * gx + px]")
    return f"""\
def bilateral_grid(I: f32[8 * GH, 8 * GW]) -> O:
    V[y, x] = clamp(repeat_edge(I)[y - {off}, x - {off}], 0.0, 1.0) where y in 0:8*GH+40, x in 0:8*GW+40
    Z[y, x] = i32(V[y, x] * {inv} + 0.5) + {_PAD}
    cy[v] = v // 8 where v in 0:8*GH+40
    cx[v] = v // 8 where v in 0:8*GW+40
    hist[gy := cy[v], gx := cx[u], z := Z[v, u], c] += select(c == 0, V[v, u], 1.0) \
where gy in 0:GH+5, gx in 0:GW+5, z in 0:{_GRID_Z}, c in 0:2
    blurz[gy, gx, z, c] = {blur5("hist", lambda k: f"gy, gx, z + {k}, c")} where z in 0:12
    blurx[gy, gx, z, c] = {blur5("blurz", lambda k: f"gy, gx + {k}, z, c")}
    blury[gy, gx, z, c] = {blur5("blurx", lambda k: f"gy + {k}, gx, z, c")}
    ZI[y, x] = i32(clamp(I[y, x], 0.0, 1.0) * {inv})
    ZF[y, x] = clamp(I[y, x], 0.0, 1.0) * {inv} - f32(ZI[y, x])
    O[gy, py, gx, px] = ({tri(0)}) / ({tri(1)}) where py in 0:8, px in 0:8
"""


def _bilateral_grid_hl(hl, sizes, hand=False):
    x, y, z, c = hl.Var("x"), hl.Var("y"), hl.Var("z"), hl.Var("c")
    h, w = S_SIGMA * sizes["GH"], S_SIGMA * sizes["GW"]
    I = hl.ImageParam(hl.Float(32), 2, "input")
    clamped = _edge(hl, I)
    s = S_SIGMA
    r = hl.RDom([(0, s), (0, s)])
    val = hl.clamp(clamped[x * s + r.x - s // 2, y * s + r.y - s // 2], hl.f32(0), hl.f32(1))
    zi = hl.i32(val * hl.f32(INV_R_SIGMA) + hl.f32(0.5))
    histogram = hl.Func("histogram")
    histogram[x, y, z, c] = hl.f32(0)
    histogram[x, y, zi, c] += hl.select(c == 0, val, hl.f32(1))
    blurz, blurx, blury = hl.Func("blurz"), hl.Func("blurx"), hl.Func("blury")
    blurz[x, y, z, c] = (histogram[x, y, z - 2, c] + histogram[x, y, z - 1, c] * 4 + histogram[x, y, z, c] * 6
                         + histogram[x, y, z + 1, c] * 4 + histogram[x, y, z + 2, c])
    blurx[x, y, z, c] = (blurz[x - 2, y, z, c] + blurz[x - 1, y, z, c] * 4 + blurz[x, y, z, c] * 6
                         + blurz[x + 1, y, z, c] * 4 + blurz[x + 2, y, z, c])
    blury[x, y, z, c] = (blurx[x, y - 2, z, c] + blurx[x, y - 1, z, c] * 4 + blurx[x, y, z, c] * 6
                         + blurx[x, y + 1, z, c] * 4 + blurx[x, y + 2, z, c])
    val = hl.clamp(I[x, y], hl.f32(0), hl.f32(1))
    zv = val * hl.f32(INV_R_SIGMA)
    zi = hl.i32(zv)
    zf = zv - zi
    xf, yf = hl.f32(x % s) / s, hl.f32(y % s) / s
    xi, yi = x / s, y / s

    lerp = hl.lerp
    interpolated = hl.Func("interpolated")
    interpolated[x, y, c] = lerp(
        lerp(lerp(blury[xi, yi, zi, c], blury[xi + 1, yi, zi, c], xf),
             lerp(blury[xi, yi + 1, zi, c], blury[xi + 1, yi + 1, zi, c], xf), yf),
        lerp(lerp(blury[xi, yi, zi + 1, c], blury[xi + 1, yi, zi + 1, c], xf),
             lerp(blury[xi, yi + 1, zi + 1, c], blury[xi + 1, yi + 1, zi + 1, c], xf), yf), zf)
    out = hl.Func("bilateral_grid")
    out[x, y] = interpolated[x, y, 0] / interpolated[x, y, 1]
    histogram.set_estimate(z, -2, 16)
    for f in (blurz, blurx, blury):
        f.set_estimate(z, 0, 12)
    if hand:  # the app's CPU schedule
        blurz.compute_at(blurx, y).reorder(c, z, x, y).vectorize(x, 8).unroll(c)
        histogram.compute_at(blurz, y)
        histogram.update().reorder(c, r.x, r.y, x, y).unroll(c)
        blurx.compute_root().reorder(c, x, z, y).parallel(y).vectorize(x, 8).unroll(c)
        blury.compute_at(out, y).store_in(hl.MemoryType.Stack).reorder(c, x, y, z).reorder_storage(c, z, x, y) \
            .vectorize(x, 8).unroll(c)
        out.compute_root().parallel(y, 8).vectorize(x, 8)
    return [(I, (h, w))], out, (h, w)


def _unit_image(sizes, rng):
    """Pixels k / 256 in [0, 1]: the grid's cell ``val * 10 + 0.5`` and the slice's ``val * 10`` are exact in float32,
    so every implementation bins each pixel alike."""
    shape = (S_SIGMA * sizes["GH"], S_SIGMA * sizes["GW"])
    return [(rng.integers(0, 257, shape) / 256).astype(np.float32)]


# ------------------------------------------------------------------------------------------------ interpolate

LEVELS = 10  # the app's pyramid levels


def _interpolate(I, dtype):
    """apps/interpolate on an RGBA image [4, 2^9 H, 2^9 W]: the colour premultiplied by alpha, downsampled by
    [1 2 1] / 4 along x then y nine times, then from the coarsest level up each level gets the upsampled coarser
    one (the mean of the two nearest coarse pixels, x // 2 and (x + 1) // 2) where its alpha leaves room, and the
    finest level's colour is divided by its alpha. Each level repeats its edge where a tap falls outside it (the
    app's levels extend past the image, computed from the clamped input)."""
    I = np.asarray(I, dtype)
    q, h = dtype(0.25), dtype(0.5)
    down = [np.concatenate([I[:3] * I[3:4], I[3:4]])]
    for _ in range(1, LEVELS):
        d = down[-1]
        n = d.shape[2] // 2
        x = np.arange(n)
        dx = (d[:, :, np.maximum(2 * x - 1, 0)] + dtype(2) * d[:, :, 2 * x]
              + d[:, :, np.minimum(2 * x + 1, d.shape[2] - 1)]) * q
        m = d.shape[1] // 2
        y = np.arange(m)
        down.append((dx[:, np.maximum(2 * y - 1, 0)] + dtype(2) * dx[:, 2 * y]
                     + dx[:, np.minimum(2 * y + 1, dx.shape[1] - 1)]) * q)
    interp = down[-1]
    for d in reversed(down[:-1]):
        x = np.arange(d.shape[2])
        ux = (interp[:, :, x // 2] + interp[:, :, np.minimum((x + 1) // 2, interp.shape[2] - 1)]) * h
        y = np.arange(d.shape[1])
        up = (ux[:, y // 2] + ux[:, np.minimum((y + 1) // 2, ux.shape[1] - 1)]) * h
        interp = d + (dtype(1) - d[3:4]) * up
    return interp[:3] / interp[3:4]


def _interpolate_source() -> str:
    top = 2 ** (LEVELS - 1)

    def dims(level):  # the level's height and width as size expressions
        k = top >> level
        return (f"{k}*H", f"{k}*W") if k > 1 else ("H", "W")
    lines = [f"def interpolate(I: f32[4, {top}*H, {top}*W]) -> O:",
             "    d0[c, y, x] = select(c < 3, I[c, y, x] * I[3, y, x], I[3, y, x]) where c in 0:4"]
    for lv in range(1, LEVELS):
        (ph, pw), (h, w) = dims(lv - 1), dims(lv)
        p = f"d{lv - 1}"
        lines.append(f"    dx{lv}[c, y, x] = ({p}[c, y, clamp(2*x - 1, 0, {pw} - 1)] + 2.0 * {p}[c, y, 2*x] "
                     f"+ {p}[c, y, clamp(2*x + 1, 0, {pw} - 1)]) * 0.25 where x in 0:{w}")
        lines.append(f"    d{lv}[c, y, x] = (dx{lv}[c, clamp(2*y - 1, 0, {ph} - 1), x] + 2.0 * dx{lv}[c, 2*y, x] "
                     f"+ dx{lv}[c, clamp(2*y + 1, 0, {ph} - 1), x]) * 0.25 where y in 0:{h}")
    coarse = f"d{LEVELS - 1}"
    for lv in range(LEVELS - 2, -1, -1):
        (ch, cw), (h, w) = dims(lv + 1), dims(lv)
        lines.append(f"    ux{lv}[c, y, x] = ({coarse}[c, y, x // 2] + {coarse}[c, y, min((x + 1) // 2, {cw} - 1)]) "
                     f"* 0.5 where x in 0:{w}")
        lines.append(f"    up{lv}[c, y, x] = (ux{lv}[c, y // 2, x] + ux{lv}[c, min((y + 1) // 2, {ch} - 1), x]) * 0.5 "
                     f"where y in 0:{h}")
        lines.append(f"    it{lv}[c, y, x] = d{lv}[c, y, x] + (1.0 - d{lv}[3, y, x]) * up{lv}[c, y, x]")
        coarse = f"it{lv}"
    lines.append("    O[c, y, x] = it0[c, y, x] / it0[3, y, x] where c in 0:3")
    return "\n".join(lines) + "\n"


def _interpolate_hl(hl, sizes):
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    top = 2 ** (LEVELS - 1)
    H, W = top * sizes["H"], top * sizes["W"]
    I = hl.ImageParam(hl.Float(32), 3, "input")
    f = hl.f32
    d = [hl.Func("d0")]
    d[0][x, y, c] = hl.select(c < 3, I[x, y, c] * I[x, y, 3], I[x, y, 3])
    for lv in range(1, LEVELS):
        pw, ph = W >> (lv - 1), H >> (lv - 1)
        p, dx, dn = d[-1], hl.Func(f"dx{lv}"), hl.Func(f"d{lv}")
        dx[x, y, c] = (p[hl.clamp(2 * x - 1, 0, pw - 1), y, c] + f(2) * p[2 * x, y, c]
                       + p[hl.clamp(2 * x + 1, 0, pw - 1), y, c]) * f(0.25)
        dn[x, y, c] = (dx[x, hl.clamp(2 * y - 1, 0, ph - 1), c] + f(2) * dx[x, 2 * y, c]
                       + dx[x, hl.clamp(2 * y + 1, 0, ph - 1), c]) * f(0.25)
        d.append(dn)
    coarse = d[-1]
    for lv in range(LEVELS - 2, -1, -1):
        cw, ch = W >> (lv + 1), H >> (lv + 1)
        ux, up, it = hl.Func(f"ux{lv}"), hl.Func(f"up{lv}"), hl.Func(f"it{lv}")
        ux[x, y, c] = (coarse[x / 2, y, c] + coarse[hl.min((x + 1) / 2, cw - 1), y, c]) * f(0.5)
        up[x, y, c] = (ux[x, y / 2, c] + ux[x, hl.min((y + 1) / 2, ch - 1), c]) * f(0.5)
        it[x, y, c] = d[lv][x, y, c] + (f(1) - d[lv][x, y, 3]) * up[x, y, c]
        coarse = it
    out = hl.Func("output")
    out[x, y, c] = coarse[x, y, c] / coarse[x, y, 3]
    return [(I, (4, H, W))], out, (3, H, W)


def _rgba_image(sizes, rng):
    """An RGBA image [4, 2^9 H, 2^9 W]: colour in [0, 1), alpha in [0.1, 1) (the normalization divides by it)."""
    top = 2 ** (LEVELS - 1)
    img = rng.uniform(0.0, 1.0, (4, top * sizes["H"], top * sizes["W"])).astype(np.float32)
    img[3] = rng.uniform(0.1, 1.0, img[3].shape).astype(np.float32)
    return [img]


# ------------------------------------------------------------------------------------------------ local Laplacian

LL_LEVELS = 8  # the app's pyramid levels (J) and intensity levels (its `levels` input, 8 in its estimates)
LL_ALPHA, LL_BETA = 1.0, 1.0  # its `alpha` and `beta` inputs, as its estimates and its process.cpp set them


def _local_laplacian(I, dtype):
    """apps/local_laplacian on a u16 RGB image [3, 2^7 H, 2^7 W]: gray, remapped at 8 intensity levels (a curve
    around each level), the Laplacian pyramid of each remapped image and the Gaussian pyramid of gray; each output
    level interpolates between the two remapped pyramids its gray value falls between (a gather along the
    intensity levels), the output pyramid is collapsed, and the colour reintroduced. Each level repeats its edge
    where a tap falls outside it (the app's levels extend past the image). The remapping curve is evaluated at gray
    itself where the app reads it from a table of 256 entries a level, and the output is float in [0, 1] where the
    app converts to u16: both truncations would flip between float32 implementations that round gray one ulp
    apart."""
    J, K = LL_LEVELS, LL_LEVELS
    f = np.asarray(I).astype(dtype) / dtype(65535)
    gray = dtype(0.299) * f[0] + dtype(0.587) * f[1] + dtype(0.114) * f[2]

    def down(a):  # [..., h, w] -> [..., h/2, w/2]: (f(2x-1) + 3 (f(2x) + f(2x+1)) + f(2x+2)) / 8 along each axis
        for axis in (-1, -2):
            n = a.shape[axis] // 2
            x = np.arange(n)

            def at(i, a=a, axis=axis):
                return np.take(a, np.clip(i, 0, a.shape[axis] - 1), axis=axis)
            a = (at(2 * x - 1) + dtype(3) * (at(2 * x) + at(2 * x + 1)) + at(2 * x + 2)) / dtype(8)
        return a

    def up(a):  # [..., h, w] -> [..., 2h, 2w]: 0.25 f(x/2 - 1 + 2 (x%2)) + 0.75 f(x/2) along each axis
        for axis in (-1, -2):
            n = a.shape[axis] * 2
            x = np.arange(n)

            def at(i, a=a, axis=axis):
                return np.take(a, np.clip(i, 0, a.shape[axis] - 1), axis=axis)
            a = dtype(0.25) * at(x // 2 - 1 + 2 * (x % 2)) + dtype(0.75) * at(x // 2)
        return a

    k = np.arange(K, dtype=dtype)[:, None, None]
    level = k * dtype(1.0 / (K - 1))
    fx = gray[None] * dtype(K - 1) - k  # the remapping curve's argument (see the module docstring)
    g = [dtype(LL_BETA) * (gray[None] - level) + level + dtype(LL_ALPHA) * fx * np.exp(-fx * fx / dtype(2))]
    ing = [gray]
    for _ in range(1, J):
        g.append(down(g[-1]))
        ing.append(down(ing[-1]))
    lap = [g[j] - up(g[j + 1]) for j in range(J - 1)] + [g[J - 1]]
    out_l = []
    for j in range(J):
        lv = ing[j] * dtype(K - 1)
        li = np.clip(lv.astype(np.int32), 0, K - 2)
        lf = lv - li.astype(dtype)
        lo = np.take_along_axis(lap[j], li[None], 0)[0]
        hi = np.take_along_axis(lap[j], li[None] + 1, 0)[0]
        out_l.append((dtype(1) - lf) * lo + lf * hi)
    out = out_l[J - 1]
    for j in range(J - 2, -1, -1):
        out = up(out) + out_l[j]
    eps = dtype(0.01)
    color = out[None] * (f + eps) / (gray[None] + eps)
    return np.clip(color, dtype(0), dtype(1))


def _local_laplacian_source() -> str:
    J, K = LL_LEVELS, LL_LEVELS
    top = 2 ** (J - 1)

    def dims(level):  # the level's height and width as size expressions
        n = top >> level
        return (f"{n}*H", f"{n}*W") if n > 1 else ("H", "W")

    def down(name, src, lv, lead):  # two stages: along x, then along y; `lead`: leading indices ("k, " or "")
        (ph, pw), (h, w) = dims(lv - 1), dims(lv)
        return [f"    {name}x[{lead}y, x] = ({src}[{lead}y, clamp(2*x - 1, 0, {pw} - 1)] + 3.0 * ({src}[{lead}y, 2*x] "
                f"+ {src}[{lead}y, 2*x + 1]) + {src}[{lead}y, clamp(2*x + 2, 0, {pw} - 1)]) / 8.0 where x in 0:{w}",
                f"    {name}[{lead}y, x] = ({name}x[{lead}clamp(2*y - 1, 0, {ph} - 1), x] "
                f"+ 3.0 * ({name}x[{lead}2*y, x] + {name}x[{lead}2*y + 1, x]) "
                f"+ {name}x[{lead}clamp(2*y + 2, 0, {ph} - 1), x]) / 8.0 where y in 0:{h}"]

    def up(name, src, lv, lead):  # `src` at level lv + 1 upsampled to level lv: two stages
        (ch, cw), (h, w) = dims(lv + 1), dims(lv)
        return [f"    {name}x[{lead}y, x] = 0.25 * {src}[{lead}y, clamp(x // 2 - 1 + 2 * (x % 2), 0, {cw} - 1)] "
                f"+ 0.75 * {src}[{lead}y, x // 2] where x in 0:{w}",
                f"    {name}[{lead}y, x] = 0.25 * {name}x[{lead}clamp(y // 2 - 1 + 2 * (y % 2), 0, {ch} - 1), x] "
                f"+ 0.75 * {name}x[{lead}y // 2, x] where y in 0:{h}"]
    fl = [f"(f32(I[{c}, y, x]) / 65535.0)" for c in range(3)]
    lines = [f"def local_laplacian(I: u16[3, {top}*H, {top}*W]) -> O:",
             f"    gray[y, x] = 0.299 * {fl[0]} + 0.587 * {fl[1]} + 0.114 * {fl[2]}",
             f"    fx[k, y, x] = gray[y, x] * {K - 1}.0 - f32(k) where k in 0:{K}",
             f"    g0[k, y, x] = {LL_BETA} * (gray[y, x] - f32(k) * (1.0 / {K - 1}.0)) + f32(k) * (1.0 / {K - 1}.0) "
             f"+ {LL_ALPHA} * fx[k, y, x] * exp(-fx[k, y, x] * fx[k, y, x] / 2.0)",
             "    ing0[y, x] = gray[y, x]"]
    for lv in range(1, J):
        lines += down(f"g{lv}", f"g{lv - 1}", lv, "k, ")
        lines += down(f"ing{lv}", f"ing{lv - 1}", lv, "")
    for lv in range(J - 1):
        lines += up(f"gu{lv}", f"g{lv + 1}", lv, "k, ")
        lines.append(f"    lap{lv}[k, y, x] = g{lv}[k, y, x] - gu{lv}[k, y, x]")
    lap = [f"lap{lv}" for lv in range(J - 1)] + [f"g{J - 1}"]
    for lv in range(J):
        lines.append(f"    li{lv}[y, x] = clamp(i32(ing{lv}[y, x] * {K - 1}.0), 0, {K - 2})")
        lines.append(f"    lf{lv}[y, x] = ing{lv}[y, x] * {K - 1}.0 - f32(li{lv}[y, x])")
        lines.append(f"    ol{lv}[y, x] = (1.0 - lf{lv}[y, x]) * {lap[lv]}[li{lv}[y, x], y, x] "
                     f"+ lf{lv}[y, x] * {lap[lv]}[li{lv}[y, x] + 1, y, x]")
    coarse = f"ol{J - 1}"
    for lv in range(J - 2, -1, -1):
        lines += up(f"ou{lv}", coarse, lv, "")
        lines.append(f"    og{lv}[y, x] = ou{lv}[y, x] + ol{lv}[y, x]")
        coarse = f"og{lv}"
    lines.append(f"    O[c, y, x] = clamp({coarse}[y, x] * (f32(I[c, y, x]) / 65535.0 + 0.01) / (gray[y, x] + 0.01), "
                 "0.0, 1.0) where c in 0:3")
    return "\n".join(lines) + "\n"


def _local_laplacian_hl(hl, sizes, hand=False):
    x, y, c, k = hl.Var("x"), hl.Var("y"), hl.Var("c"), hl.Var("k")
    J, K = LL_LEVELS, LL_LEVELS
    top = 2 ** (J - 1)
    H, W = top * sizes["H"], top * sizes["W"]
    I = hl.ImageParam(hl.UInt(16), 3, "input")
    f = hl.f32

    def down(src, lv, name):
        pw, ph = W >> (lv - 1), H >> (lv - 1)
        dx, dy = hl.Func(f"{name}x"), hl.Func(name)
        dx[x, y, k] = (src[hl.clamp(2 * x - 1, 0, pw - 1), y, k] + f(3) * (src[2 * x, y, k] + src[2 * x + 1, y, k])
                       + src[hl.clamp(2 * x + 2, 0, pw - 1), y, k]) / f(8)
        dy[x, y, k] = (dx[x, hl.clamp(2 * y - 1, 0, ph - 1), k] + f(3) * (dx[x, 2 * y, k] + dx[x, 2 * y + 1, k])
                       + dx[x, hl.clamp(2 * y + 2, 0, ph - 1), k]) / f(8)
        return dy

    def up(src, lv, name):  # src at level lv + 1, upsampled to level lv
        cw, ch = W >> (lv + 1), H >> (lv + 1)
        ux, uy = hl.Func(f"{name}x"), hl.Func(name)
        ux[x, y, k] = f(0.25) * src[hl.clamp(x / 2 - 1 + 2 * (x % 2), 0, cw - 1), y, k] + f(0.75) * src[x / 2, y, k]
        uy[x, y, k] = f(0.25) * ux[x, hl.clamp(y / 2 - 1 + 2 * (y % 2), 0, ch - 1), k] + f(0.75) * ux[x, y / 2, k]
        return uy

    clamped = _edge(hl, I)
    floating = hl.Func("floating")
    floating[x, y, c] = f(clamped[x, y, c]) / f(65535)
    gray = hl.Func("gray")
    gray[x, y, k] = f(0.299) * floating[x, y, 0] + f(0.587) * floating[x, y, 1] + f(0.114) * floating[x, y, 2]
    fx = gray[x, y, 0] * f(K - 1) - f(k)
    level = f(k) * f(1.0 / (K - 1))
    g = [hl.Func("g0")]
    g[0][x, y, k] = f(LL_BETA) * (gray[x, y, 0] - level) + level + f(LL_ALPHA) * fx * hl.exp(-fx * fx / f(2))
    ing = [gray]
    for lv in range(1, J):
        g.append(down(g[-1], lv, f"g{lv}"))
        ing.append(down(ing[-1], lv, f"ing{lv}"))
    lap = []
    for lv in range(J - 1):
        gu = up(g[lv + 1], lv, f"gu{lv}")
        lp = hl.Func(f"lap{lv}")
        lp[x, y, k] = g[lv][x, y, k] - gu[x, y, k]
        lap.append(lp)
    lap.append(g[J - 1])
    ol = []
    for lv in range(J):
        lvl = ing[lv][x, y, 0] * f(K - 1)
        li = hl.clamp(hl.i32(lvl), 0, K - 2)
        lf = lvl - f(li)
        o = hl.Func(f"ol{lv}")
        o[x, y, k] = (f(1) - lf) * lap[lv][x, y, li] + lf * lap[lv][x, y, li + 1]
        ol.append(o)
    og = {J - 1: ol[J - 1]}  # the output's Gaussian pyramid
    for lv in range(J - 2, -1, -1):
        ou = up(og[lv + 1], lv, f"ou{lv}")
        og[lv] = hl.Func(f"og{lv}")
        og[lv][x, y, k] = ou[x, y, k] + ol[lv][x, y, k]
    coarse = og[0]
    out = hl.Func("output")
    out[x, y, c] = hl.clamp(coarse[x, y, 0] * (floating[x, y, c] + f(0.01)) / (gray[x, y, 0] + f(0.01)), f(0), f(1))
    if hand:  # the app's CPU schedule (its remap table is no stage here)
        yo = hl.Var("yo")
        out.reorder(c, x, y).split(y, yo, y, 64).parallel(yo).vectorize(x, 8)
        gray.compute_root().parallel(y, 32).vectorize(x, 8)
        for j in range(1, 5):
            ing[j].compute_root().parallel(y, 32).vectorize(x, 8)
            g[j].compute_root().reorder_storage(x, k, y).reorder(k, y).parallel(y, 8).vectorize(x, 8)
            og[j].store_at(out, yo).compute_at(out, y).fold_storage(y, 8).vectorize(x, 8)
        og[0].compute_at(out, y).vectorize(x, 8)
        for j in range(5, J):
            ing[j].compute_root()
            g[j].compute_root().parallel(k)
            og[j].compute_root()
    return [(I, (3, H, W))], out, (3, H, W)


def _u16_image(sizes, rng):
    """A u16 RGB image [3, 2^7 H, 2^7 W] of smooth gradients under noise (a photograph's range of values: the
    remapping curve acts on detail around each intensity level)."""
    top = 2 ** (LL_LEVELS - 1)
    h, w = top * sizes["H"], top * sizes["W"]
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    base = np.stack([0.5 + 0.4 * np.sin(3 * xx + c) * np.cos(2 * yy - c) for c in range(3)])
    img = np.clip(base + rng.normal(0, 0.05, base.shape), 0, 1)
    return [np.round(img * 65535).astype(np.uint16)]


# ------------------------------------------------------------------------------------------------ the programs


def _np(fn):
    """numpy's float32 formulation of an app written once for any dtype."""
    return call("numpy", lambda *a, **s: fn(*a, np.float32))


def _ref(fn):
    """The float64 reference of an app written once for any dtype."""
    return lambda *a, **s: fn(*a, np.float64)


def _edged(fn, before, after):
    """An app written for its valid region, run on the [C, H, W] image padded by repeating its edge ``before`` pixels
    before and ``after`` after each row and column (Halide's ``repeat_edge``), so that its output is full size."""
    return lambda I, dtype: fn(np.pad(I, ((0, 0), (before, after), (before, after)), mode="edge"), dtype)


def _image_flops(per_pixel, *, channels=1, shrink=0):
    return lambda s: float(per_pixel) * channels * (s["H"] - shrink) * (s["W"] - shrink)


PROGRAMS = [
    Program("blur", "halide", BLUR, {"H": H, "W": W}, {"H": 20, "W": 24}, _ref(_blur),
            {"numpy": _np(_blur), "torch": Baseline("torch", _blur_torch_setup, "two F.conv2d")},
            flops=_image_flops(6, shrink=2), inputs=_image_inputs("blur"), halide=_blur_hl,
            what="separable 3x3 box blur (apps/blur)", origin=ORIGIN),
    Program("harris", "halide", _harris_source(), {"H": H, "W": W}, {"H": 20, "W": 24},
            _ref(_edged(_harris, 0, 4)), {"numpy": _np(_edged(_harris, 0, 4))},
            flops=_image_flops(5 + 22 + 3 + 24 + 7),
            inputs=_image_inputs("harris"), halide=_harris_hl,
            what="Harris corner response (apps/harris)", origin=ORIGIN),
    Program("demosaic", "halide", _demosaic_source(), {"H": RAW_H // 2, "W": RAW_W // 2}, {"H": 16, "W": 20},
            lambda raw, **s: _demosaic(raw.reshape(2 * s["H"], 2 * s["W"]), np.float64).reshape(
                3, s["H"] - 4, 2, s["W"] - 4, 2),
            {"numpy": call("numpy", lambda raw, **s: _demosaic(raw.reshape(2 * s["H"], 2 * s["W"]), np.float32))},
            flops=lambda s: 4.0 * 60 * (s["H"] - 4) * (s["W"] - 4), inputs=_mosaic, halide=_demosaic_hl,
            what="the camera pipe's demosaic of a GRBG mosaic (apps/camera_pipe)", origin=ORIGIN,
            notes="the mosaic as [H, 2, W, 2] quads and the output as [3, H-4, 2, W-4, 2]: the memory of "
                  "[2H, 2W] and [3, 2(H-4), 2(W-4)]"),
    Program("max-filter", "halide", _max_filter_source(), {"H": H, "W": W, "R": 26}, {"H": 12, "W": 20, "R": 17},
            lambda I, R, **s: _max_filter_np(np.asarray(I, np.float64), R),
            {"numpy": call("numpy", _max_filter_np)},
            flops=lambda s: 2.0 * (2 * s["R"] + 1) * 3 * s["H"] * s["W"],
            inputs=_image_inputs("max-filter"), halide=_max_filter_hl,
            what="circular max filter of radius 26 from logarithmic vertical slices (apps/max_filter)",
            origin=ORIGIN),
    Program("stencil-chain", "halide", _stencil_chain_source(), {"H": H, "W": W}, {"H": 40, "W": 44},
            _ref(_stencil_chain),
            {"numpy": _np(_stencil_chain), "torch": Baseline("torch", _stencil_chain_torch_setup, "8 F.conv2d 5x5")},
            flops=lambda s: 50.0 * sum((s["H"] + 4 * k) * (s["W"] + 4 * k) for k in range(STAGES)),
            inputs=_image_inputs("stencil-chain"), halide=_stencil_chain_hl,
            what="eight chained 5x5 stencils (apps/stencil_chain)", origin=ORIGIN),
    Program("unsharp", "halide", _unsharp_source(), {"H": H, "W": W}, {"H": 20, "W": 24},
            _ref(_edged(_unsharp, 3, 3)), {"numpy": _np(_edged(_unsharp, 3, 3))},
            flops=_image_flops(5 + 13 + 13 + 2 + 1 + 3),
            inputs=_image_inputs("unsharp", 0.1, 1.0), halide=_unsharp_hl,
            what="unsharp mask: Gaussian blur of gray, sharpening ratio per channel (apps/unsharp)", origin=ORIGIN),
    # small: at least the app's hand schedule's tiles (4 x 16 vectors of float32 with AVX-512) in each dimension
    Program("iir-blur", "halide", _iir_blur_source(), {"H": H, "W": W}, {"H": 68, "W": 72}, _ref(_iir_blur),
            {"numpy": _np(_iir_blur)}, flops=_image_flops(4 * 3, channels=3), inputs=_image_inputs("iir-blur"),
            halide=_iir_blur_hl,
            what="first-order IIR blur, causal and anticausal, down the columns then along the rows (apps/iir_blur)",
            origin=ORIGIN),
    Program("histogram-equalize", "halide", HISTEQ, {"H": H, "W": W}, {"H": 16, "W": 20}, _histeq,
            {"numpy": call("numpy", _histeq)}, flops=_image_flops(30), inputs=_u8_image, halide=_histeq_hl,
            what="histogram equalization of a u8 RGB image's luma: histogram, cumulative scan, lookup (apps/hist)",
            origin=ORIGIN, notes="luma and chroma in 8-bit fixed point where the app computes them in float32"),
    Program("camera-pipe", "halide", _camera_pipe_source(), {"H": 1922, "W": 2562}, {"H": 12, "W": 14},
            _camera_pipe, {"numpy": call("numpy", _camera_pipe)}, flops=_image_flops(30, channels=3, shrink=2),
            inputs=_camera_inputs, halide=_camera_pipe_hl,
            what="the camera pipe after its demosaic: Q8.8 colour matrix, u8 tone curve lookup, sharpen "
                 "(apps/camera_pipe)", origin=ORIGIN,
            notes="input: the demosaic's 10-bit image as u16; the tone curve is an input table"),
    Program("camera-pipe-raw", "halide", _camera_pipe_raw_source(), {"H": RAW_H // 2, "W": RAW_W // 2},
            {"H": 16, "W": 20}, _camera_pipe_raw, {"numpy": call("numpy", _camera_pipe_raw)},
            flops=lambda s: (4.0 * (7 + 60) + 4 * 3 * 30) * (s["H"] - 8) * (s["W"] - 8),
            inputs=_raw_inputs, halide=_camera_pipe_raw_hl,
            what="the whole camera pipe from its raw mosaic: hot pixel suppression, integer demosaic, colour "
                 "matrix, tone curve, sharpen (apps/camera_pipe)", origin=ORIGIN,
            notes="the mosaic as [H, 2, W, 2] quads (u16) and the output as [3, H-8, 2, W-8, 2] (u8): the memory "
                  "of [2H, 2W] and [3, 2(H-8), 2(W-8)]; the tone curve is an input table"),
    Program("interpolate", "halide", _interpolate_source(), {"H": 5, "W": 3}, {"H": 1, "W": 1},
            _ref(_interpolate), {"numpy": _np(_interpolate)},
            flops=lambda s: 4.0 * 4**(LEVELS - 1) * s["H"] * s["W"] * (1 + 2 * 12 / 3 + 10),
            inputs=_rgba_image, halide=_interpolate_hl,
            what="multi-scale interpolation of an RGBA image: a 10-level pyramid down by [1 2 1] / 4, up by x // 2 "
                 "and (x + 1) // 2, blended by alpha (apps/interpolate)", origin=ORIGIN,
            notes="the image is 2^9 H x 2^9 W so every level's size is a size expression (the app's 1536 x 2560: "
                  "H=5, W=3); each level repeats its edge where a tap falls outside it"),
    Program("local-laplacian", "halide", _local_laplacian_source(), {"H": 20, "W": 12}, {"H": 1, "W": 1},
            _ref(_local_laplacian), {"numpy": _np(_local_laplacian)},
            flops=lambda s: 4.0**(LL_LEVELS - 1) * s["H"] * s["W"] * (LL_LEVELS * 40 + 60),
            inputs=_u16_image, halide=_local_laplacian_hl,
            what="local Laplacian filter: gray remapped at 8 intensity levels, their Laplacian pyramids blended by "
                 "the gray Gaussian pyramid (a gather), collapsed, colour reintroduced (apps/local_laplacian)",
            origin=ORIGIN,
            notes="the image is 2^7 H x 2^7 W so every level's size is a size expression (the app's 1536 x 2560: "
                  "H=20, W=12); each level repeats its edge where a tap falls outside it; the remapping curve "
                  "evaluated at gray, not read from a table of 256 entries a level, and float output in [0, 1] "
                  "where the app converts to u16 (each truncation flips between float32 implementations)"),
    Program("bilateral-grid", "halide", _bilateral_grid_source(), {"GH": H // S_SIGMA, "GW": W // S_SIGMA},
            {"GH": 3, "GW": 4}, lambda I, **s: _bilateral_grid(I, np.float64),
            {"numpy": call("numpy", lambda I, **s: _bilateral_grid(I, np.float32))},
            flops=lambda s: 60.0 * S_SIGMA * S_SIGMA * s["GH"] * s["GW"], inputs=_unit_image,
            halide=_bilateral_grid_hl,
            what="bilateral grid: scatter into cells by value, 5-tap blurs, trilinear slice (apps/bilateral_grid)",
            origin=ORIGIN,
            notes="the output as [GH, 8, GW, 8] (the memory of [8 GH, 8 GW]): the slice reads the grid at y // 8"),
]
