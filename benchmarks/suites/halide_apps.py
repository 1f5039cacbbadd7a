"""Halide's application pipelines that the DSL can write today, each also written in Halide's Python frontend (the
``halide`` package) to be scheduled by Halide's CPU auto-schedulers (:mod:`halide_worker`), on float32 images at the
sizes of the apps' estimates (1536 x 2560, three channels where the app has them; the camera pipeline's 2592 x 1968
raw mosaic):

- ``blur``: apps/blur, the separable 3 x 3 box blur;
- ``harris``: apps/harris, gray, Sobel gradients, their products summed over 3 x 3, the corner response;
- ``demosaic``: the demosaic stage of apps/camera_pipe (green interpolated along the direction of least change, red
  and blue corrected by green's second derivative, diagonals chosen the same way) on a GRBG mosaic;
- ``max-filter``: a square max filter of radius 26 as two separable passes (apps/max_filter computes a circular
  one from logarithmic slices, an update recursion and a lookup table the DSL cannot write);
- ``stencil-chain``: apps/stencil_chain, eight 5 x 5 stencils in a row, weights ``(i+3)(j+3)``, normalised by their
  sum (the app wraps in uint16); each stage a sum over its 5 x 5 window with the weight computed from the window's
  indices (written as 25 explicit taps a stage, as the app writes them, the zero-trial pick inlines the stages into
  one expression of 25^8 terms: building 3 stages takes over a minute);
- ``unsharp``: apps/unsharp, a Gaussian blur of gray (sigma 1.5) sharpening each channel by a ratio.

Every output is the valid region (the apps clamp reads at the image's edge with ``repeat_edge``, which the DSL cannot
write yet); Halide's side still reads its inputs through ``repeat_edge``, so that an auto-scheduler's tiles rounded
up past the valid region read in bounds (Adams2019 reads 6 pixels before the image in Harris otherwise). A mosaic
input holds integer values (0..1023), so the demosaic's comparisons and averages are exact in
float32 and every implementation gives the same bits. :data:`NOT_WRITTEN` lists the apps the DSL cannot express yet.

Example::

    >>> [p.name for p in PROGRAMS]
    ['blur', 'harris', 'demosaic', 'max-filter', 'stencil-chain', 'unsharp']
"""
from __future__ import annotations

import math

import numpy as np

from .common import Baseline, Program, call

ORIGIN = "Halide apps (github.com/halide/Halide/apps)"

#: Halide's applications the DSL cannot write yet, and why.
NOT_WRITTEN = {
    "bilateral_grid": "needs gathers: the grid is built by scattering each pixel into the cell its value selects "
                      "(a data-dependent update) and sliced by reading at data-dependent positions",
    "local_laplacian": "needs gathers: the remapping looks up a table at each pixel's value, and the pyramids' "
                       "upsampling reads at x/2 (not affine)",
    "interpolate": "upsampling in the pyramid reads at x/2 (not affine); written per stride phase it would be "
                   "expressible, but not as the app writes it",
    "iir_blur": "a recursive (IIR) filter: each row depends on the previous one (a scan)",
    "histogram_equalize": "a histogram (a scatter with an update at data-dependent positions), its cumulative sum "
                          "(a scan) and a lookup at each pixel's value (a gather)",
    "camera_pipe": "beyond the demosaic stage: uint16/uint8 images and a tone curve read at each pixel's value "
                   "(a gather); its demosaic stage is here",
    "max_filter (as the app computes it)": "logarithmic vertical slices built by an update recursion and a filter "
                                           "height read from a table; the square separable filter is here",
}

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
    gray = " + ".join(f"{_f32(c)} * I[{i}, y, x]" for i, c in enumerate(_GRAY))
    return f"""\
def harris(I: f32[3, H, W]) -> R:
    g[y, x] = {gray}
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
    return [(I, (3, sizes["H"], sizes["W"]))], out, (sizes["H"] - 4, sizes["W"] - 4)


# ------------------------------------------------------------------------------------------------ demosaic

# the GRBG mosaic's quad planes: (row, column) of each site in a 2 x 2 quad
_SITE = {"gr": (0, 0), "r": (0, 1), "b": (1, 0), "gb": (1, 1)}


def _demosaic(raw, dtype):
    """The camera pipe's demosaic on quad planes, in numpy; raw [2H, 2W] -> [3, 2(H-4), 2(W-4)]."""
    raw = np.asarray(raw, dtype)
    h, w = raw.shape[0] // 2, raw.shape[1] // 2
    q = raw.reshape(h, 2, w, 2)
    plane = {k: q[:, a, :, b] for k, (a, b) in _SITE.items()}
    half = dtype(0.5)

    def at(p, dx, dy, m=2):  # the plane around the interior, shifted by (dx, dy) quads; margin m
        a = plane[p] if isinstance(p, str) else p
        return a[m + dy:a.shape[0] - m + dy, m + dx:a.shape[1] - m + dx]

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


def _demosaic_source() -> str:
    def p(site, dx, dy, m=2):  # a plane read at the output's quad (margin m) shifted by (dx, dy)
        a, b = _SITE[site]
        return f"raw[y + {m + dy}, {a}, x + {m + dx}, {b}]"

    def g(name, dx, dy):  # g_r / g_b (margin 1) read from a margin-2 stage
        return f"{name}[y + {1 + dy}, x + {1 + dx}]"

    def avg(a, b):
        return f"({a} + {b}) * 0.5"

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
    inner = "where y in 0:H-4, x in 0:W-4"
    return f"""\
def demosaic(raw: f32[H, 2, W, 2]) -> O:
    g_r[y, x] = {g_r} where y in 0:H-2, x in 0:W-2
    g_b[y, x] = {g_b} where y in 0:H-2, x in 0:W-2
    r_gr[y, x] = {r_gr} {inner}
    b_gr[y, x] = {b_gr} {inner}
    r_gb[y, x] = {r_gb} {inner}
    b_gb[y, x] = {b_gb} {inner}
    r_b[y, x] = {r_b} {inner}
    b_r[y, x] = {b_r} {inner}
    O[c, y, dy, x, dx] = select(c == 0, {red}, select(c == 1, {green}, {blue})) \
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

    def avg(a, b):
        return (a + b) * half

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
    r = interleave(r_gr, r_r, r_b, r_gb, "r")
    g = interleave(g_gr, g_r, g_b, g_gb, "g")
    b = interleave(b_gr, b_r, b_b, b_gb, "b")
    out = hl.Func("output")
    out[x, y, c] = hl.select(c == 0, r[x + 4, y + 4], hl.select(c == 1, g[x + 4, y + 4], b[x + 4, y + 4]))
    return [(raw, (2 * sizes["H"], 2 * sizes["W"]))], out, (3, 2 * (sizes["H"] - 4), 2 * (sizes["W"] - 4))


def _mosaic(sizes, rng):
    return [rng.integers(0, 1024, (sizes["H"], 2, sizes["W"], 2)).astype(np.float32)]


# ------------------------------------------------------------------------------------------------ max filter


def _max_filter_np(I, K, **s):
    h, w = I.shape[1] - K + 1, I.shape[2] - K + 1
    v = I[:, 0:h].copy()
    for r in range(1, K):
        np.maximum(v, I[:, r:r + h], out=v)
    o = v[:, :, 0:w].copy()
    for r in range(1, K):
        np.maximum(o, v[:, :, r:r + w], out=o)
    return o


def _max_filter_scipy_setup(inputs, sizes):
    from scipy.ndimage import maximum_filter1d
    (I,) = inputs
    K = sizes["K"]
    lo, hi = K // 2, I.shape[1] - (K - 1 - K // 2)
    lo2, hi2 = K // 2, I.shape[2] - (K - 1 - K // 2)

    def run():
        v = maximum_filter1d(I, K, axis=1)[:, lo:hi]
        return maximum_filter1d(v, K, axis=2)[:, :, lo2:hi2]
    return run


def _max_filter_hl(hl, sizes):
    x, y, c = hl.Var("x"), hl.Var("y"), hl.Var("c")
    I = hl.ImageParam(hl.Float(32), 3, "input")
    I_edge = _edge(hl, I)
    r = hl.RDom([(0, sizes["K"])])
    vert, out = hl.Func("vert"), hl.Func("output")
    vert[x, y, c] = hl.maximum(I_edge[x, y + r.x, c])
    out[x, y, c] = hl.maximum(vert[x + r.x, y, c])
    return [(I, (3, sizes["H"], sizes["W"]))], out, (3, sizes["H"] - sizes["K"] + 1, sizes["W"] - sizes["K"] + 1)


# ------------------------------------------------------------------------------------------------ stencil chain

STAGES = 8
_WEIGHTS = [[(i + 3) * (j + 3) / 225 for j in range(-2, 3)] for i in range(-2, 3)]  # [i (x offset)][j (y offset)]


def _stencil_chain(I, dtype):
    a = np.asarray(I, dtype)
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
        a = I.view(1, 1, *I.shape)
        for _ in range(STAGES):
            a = torch.nn.functional.conv2d(a, k)
        return a[0, 0]
    return run


def _stencil_chain_source() -> str:
    lines = [f"def stencil_chain(S0: f32[H, W]) -> S{STAGES}:"]
    for s in range(1, STAGES + 1):
        lines.append(f"    S{s}[y, x] += S{s - 1}[y + j, x + i] * (f32((i + 1) * (j + 1)) / 225.0) "
                     "where i in 0:5, j in 0:5")
    return "\n".join(lines) + "\n"


def _stencil_chain_hl(hl, sizes):
    x, y = hl.Var("x"), hl.Var("y")
    I = hl.ImageParam(hl.Float(32), 2, "input")
    I_edge = _edge(hl, I)
    prev = hl.Func("input_wrap")
    prev[x, y] = I_edge[x, y]
    for s in range(STAGES):
        f = hl.Func(f"stage_{s}")
        e = None
        for i in range(5):
            for j in range(5):
                term = prev[x + i, y + j] * hl.f32(float(np.float32(_WEIGHTS[i][j])))
                e = term if e is None else e + term
        f[x, y] = e
        prev = f
    return [(I, (sizes["H"], sizes["W"]))], prev, (sizes["H"] - 4 * STAGES, sizes["W"] - 4 * STAGES)


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
    gray = " + ".join(f"{_f32(c)} * I[{i}, y, x]" for i, c in enumerate(_GRAY))
    by = f"{k[0]} * g[y + 3, x]" + "".join(f" + {k[d]} * (g[y + {3 - d}, x] + g[y + {3 + d}, x])" for d in (1, 2, 3))
    bx = f"{k[0]} * by[y, x + 3]" + "".join(f" + {k[d]} * (by[y, x + {3 - d}] + by[y, x + {3 + d}])"
                                           for d in (1, 2, 3))
    return f"""\
def unsharp(I: f32[3, H, W]) -> O:
    g[y, x] = {gray}
    by[y, x] = {by}
    bx[y, x] = {bx}
    sharpen[y, x] = 2.0 * g[y + 3, x + 3] - bx[y, x]
    ratio[y, x] = sharpen[y, x] / g[y + 3, x + 3]
    O[c, y, x] = ratio[y, x] * I[c, y + 3, x + 3]
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
    out[x, y, c] = ratio[x + 3, y + 3] * I_edge[x + 3, y + 3, c]
    return [(I, (3, sizes["H"], sizes["W"]))], out, (3, sizes["H"] - 6, sizes["W"] - 6)


# ------------------------------------------------------------------------------------------------ the programs


def _np(fn):
    """numpy's float32 formulation of an app written once for any dtype."""
    return call("numpy", lambda *a, **s: fn(*a, np.float32))


def _ref(fn):
    """The float64 reference of an app written once for any dtype."""
    return lambda *a, **s: fn(*a, np.float64)


def _image_flops(per_pixel, *, channels=1, shrink=0):
    return lambda s: float(per_pixel) * channels * (s["H"] - shrink) * (s["W"] - shrink)


PROGRAMS = [
    Program("blur", "halide", BLUR, {"H": H, "W": W}, {"H": 20, "W": 24}, _ref(_blur),
            {"numpy": _np(_blur), "torch": Baseline("torch", _blur_torch_setup, "two F.conv2d")},
            flops=_image_flops(6, shrink=2), inputs=_image_inputs("blur"), halide=_blur_hl,
            what="separable 3x3 box blur (apps/blur)", origin=ORIGIN),
    Program("harris", "halide", _harris_source(), {"H": H, "W": W}, {"H": 20, "W": 24}, _ref(_harris),
            {"numpy": _np(_harris)}, flops=_image_flops(5 + 22 + 3 + 24 + 7, shrink=4),
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
    Program("max-filter", "halide", """\
def max_filter(I: f32[3, H, W], K: int) -> O:
    V[c, y, x] max= I[c, y + r, x] where r in 0:K
    O[c, y, x] max= V[c, y, x + r] where r in 0:K
""", {"H": H, "W": W, "K": 53}, {"H": 16, "W": 18, "K": 5},
            lambda I, K, **s: _max_filter_np(np.asarray(I, np.float64), K),
            {"numpy": call("numpy", _max_filter_np),
             "scipy": Baseline("scipy", _max_filter_scipy_setup, "scipy.ndimage.maximum_filter1d")},
            flops=lambda s: 2.0 * s["K"] * 3 * (s["H"] - s["K"] + 1) * (s["W"] - s["K"] + 1),
            inputs=_image_inputs("max-filter"), halide=_max_filter_hl,
            what="square max filter of radius 26, separable (after apps/max_filter)", origin=ORIGIN),
    Program("stencil-chain", "halide", _stencil_chain_source(), {"H": H, "W": W}, {"H": 40, "W": 44},
            _ref(_stencil_chain),
            {"numpy": _np(_stencil_chain), "torch": Baseline("torch", _stencil_chain_torch_setup, "8 F.conv2d 5x5")},
            flops=lambda s: 50.0 * sum((s["H"] - 4 * k) * (s["W"] - 4 * k) for k in range(1, STAGES + 1)),
            inputs=_image_inputs("stencil-chain"), halide=_stencil_chain_hl,
            what="eight chained 5x5 stencils (apps/stencil_chain)", origin=ORIGIN),
    Program("unsharp", "halide", _unsharp_source(), {"H": H, "W": W}, {"H": 20, "W": 24}, _ref(_unsharp),
            {"numpy": _np(_unsharp)}, flops=_image_flops(5 + 13 + 13 + 2 + 1 + 3, shrink=6),
            inputs=_image_inputs("unsharp", 0.1, 1.0), halide=_unsharp_hl,
            what="unsharp mask: Gaussian blur of gray, sharpening ratio per channel (apps/unsharp)", origin=ORIGIN),
]
