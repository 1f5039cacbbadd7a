"""Elementwise ops: activations, arithmetic with broadcasting and scalars, comparisons, `where`, casts.

Each lowers to an expression of its operands' elements (`Builder.elementwise`), so a chain of them becomes one
expression in one stage. Operands are converted to the result dtype first (torch's type promotion: a Python
number counts only where its category is higher than the tensors').

GELU's exact form needs erf, which the DSL lacks; it is written with Abramowitz and Stegun's 7.1.26 rational
approximation (absolute error below 1.5e-7), as XLA expands erf into a polynomial.

>>> from tensorlang.graph.ops import get
>>> get("gelu").kind, get("add.Tensor").kind
('elementwise', 'elementwise')
"""
from __future__ import annotations

import numpy as np

from ..builder import ExprRef, LiteralRef, cast, literal
from ..ir import DTYPES
from . import register
from .common import FLOAT, as_float, broadcast_shapes, fail, out, result_dtype

# Abramowitz and Stegun 7.1.26: erf(x) = 1 - (a1 t + ... + a5 t^5) exp(-x^2), t = 1 / (1 + p |x|), x >= 0
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def erf_expr(z: str, dt: str) -> str:
    """DSL text for erf(z) (z is read several times: pass a cheap expression, like a tensor read).

    >>> "exp" in erf_expr("x", "f32")
    True
    """
    a1, a2, a3, a4, a5 = (literal(a, dt) for a in _AS_A)
    t = f"(1.0 / (1.0 + {literal(_AS_P, dt)} * abs({z})))"
    poly = f"(((({a5} * {t} + {a4}) * {t} + {a3}) * {t} + {a2}) * {t} + {a1}) * {t}"
    y = f"(1.0 - {poly} * exp(-({z}) * ({z})))"
    return f"select({z} < 0.0, -{y}, {y})"


def _operand(b, node, refs, k: int, name: str):
    """Tensor operand `k`, or the Python number the node holds under `name` as a literal."""
    if k < len(refs) and refs[k] is not None:
        return refs[k]
    value = node.attrs.get(name)
    if value is None:
        raise fail(node, f"operand {name} is missing")
    return LiteralRef((), "bool" if isinstance(value, bool) else "i64" if isinstance(value, int) else "f32", value)


def _dtype(node, names=("self", "other")) -> str:
    tensors = [v.dtype for v in node.inputs if v is not None]
    scalars = [node.attrs[n] for n in names if isinstance(node.attrs.get(n), (int, float))]
    return result_dtype(tensors, scalars)


def _shape(node):
    return broadcast_shapes(*(v.shape for v in node.inputs if v is not None))


def _flops_per(k: int):
    return lambda node: k * node.outputs[0].type.numel


# ---- unary ----------------------------------------------------------------------------------------------------

def _unary(name: str, text, *, keep_int: bool = False, out_dtype: str | None = None, flops: int = 1, doc: str = "",
           family: str = "activation"):
    """Register a unary op: `text(a, dt, attrs)` is the output element from the input element `a` (in dtype dt);
    dt is the input's dtype where `keep_int`, else a float type; the output's is `out_dtype` if given, else dt."""
    def dtype_of(node):
        d = node.inputs[0].dtype
        return d if keep_int or out_dtype else as_float(d)

    def infer(node):
        return out(node.inputs[0].shape, out_dtype or dtype_of(node))

    def lower(b, node, refs):
        dt = dtype_of(node)
        src = refs[0].dtype
        return [b.elementwise(node.outputs[0].shape, out_dtype or dt, [refs[0]],
                              lambda a: text(cast(a, src, dt), dt, node.attrs))]
    register(name, "elementwise", infer, lower, _flops_per(flops), doc=doc, family=family)


def _lit(x, dt):
    t = literal(x, dt)
    return f"({t})" if t.startswith("-") else t


_unary("relu", lambda a, dt, at: f"max({a}, {_lit(0, dt)})", keep_int=True, doc="max(x, 0)")
_unary("hardtanh", lambda a, dt, at: f"min(max({a}, {_lit(at.get('min_val', -1.0), dt)}), "
       f"{_lit(at.get('max_val', 1.0), dt)})", keep_int=True, doc="min_val, max_val (ReLU6)")
_unary("sigmoid", lambda a, dt, at: f"1.0 / (1.0 + exp(-{a}))", flops=4, doc="1 / (1 + exp(-x))")
_unary("tanh", lambda a, dt, at: f"tanh({a})", flops=4, doc="")
_unary("silu", lambda a, dt, at: f"{a} / (1.0 + exp(-{a}))", flops=5, doc="x * sigmoid(x)")
_unary("gelu", lambda a, dt, at: (
    f"0.5 * {a} * (1.0 + tanh(0.7978845608028654 * ({a} + 0.044715 * {a} * {a} * {a})))"
    if at.get("approximate", "none") == "tanh" else f"0.5 * {a} * (1.0 + {erf_expr(f'{a} * 0.7071067811865476', dt)})"),
    flops=20, doc="approximate='none' (erf, by A&S 7.1.26) or 'tanh'")
_unary("erf", lambda a, dt, at: erf_expr(a, dt), flops=15, doc="A&S 7.1.26, error < 1.5e-7")
_unary("leaky_relu", lambda a, dt, at: f"select({a} > 0.0, {a}, {a} * {_lit(at.get('negative_slope', 0.01), dt)})",
       flops=2, doc="negative_slope")
_unary("elu", lambda a, dt, at: (
    f"select({a} > 0.0, {a} * {_lit(at.get('scale', 1), dt)}, "
    f"(exp({a} * {_lit(at.get('input_scale', 1), dt)}) - 1.0) * {_lit(at.get('alpha', 1) * at.get('scale', 1), dt)})"),
    flops=5, doc="alpha, scale, input_scale")
_unary("hardswish", lambda a, dt, at: f"{a} * min(max({a} + 3.0, 0.0), 6.0) / 6.0", flops=5, doc="")
_unary("hardsigmoid", lambda a, dt, at: f"min(max({a} + 3.0, 0.0), 6.0) / 6.0", flops=4, doc="")
_unary("softplus", lambda a, dt, at: (
    f"select({a} * {_lit(at.get('beta', 1), dt)} > {_lit(at.get('threshold', 20), dt)}, {a}, "
    f"log(1.0 + exp({a} * {_lit(at.get('beta', 1), dt)})) / {_lit(at.get('beta', 1), dt)})"), flops=6,
    doc="beta, threshold")
_unary("neg", lambda a, dt, at: f"-{a}", keep_int=True, family="arithmetic", doc="")
_unary("abs", lambda a, dt, at: f"abs({a})", keep_int=True, family="arithmetic", doc="")
_unary("exp", lambda a, dt, at: f"exp({a})", flops=4, family="math", doc="")
_unary("expm1", lambda a, dt, at: f"exp({a}) - 1.0", flops=4, family="math", doc="exp(x) - 1")
_unary("log", lambda a, dt, at: f"log({a})", flops=4, family="math", doc="")
_unary("log1p", lambda a, dt, at: f"log(1.0 + {a})", flops=4, family="math", doc="log(1 + x)")
_unary("sqrt", lambda a, dt, at: f"sqrt({a})", flops=2, family="math", doc="")
_unary("rsqrt", lambda a, dt, at: f"1.0 / sqrt({a})", flops=3, family="math", doc="")
_unary("reciprocal", lambda a, dt, at: f"1.0 / {a}", family="math", doc="")
_unary("sign", lambda a, dt, at: (f"select({a} > {_lit(0, dt)}, {_lit(1, dt)}, select({a} < {_lit(0, dt)}, "
                                  f"{_lit(-1, dt)}, {_lit(0, dt)}))"), keep_int=True, family="math", doc="")
_unary("logical_not", lambda a, dt, at: f"not {cast(a, dt, 'bool')}", out_dtype="bool", family="comparison",
       doc="")


# sin and cos (Cephes' sinf / cosf for f32, sin / cos for f64): x = n * pi/2 + r with |r| <= pi/4 (pi/2 in three
# parts whose products with n are exact for |x| up to about 8192 in f32), then sin or cos of r by n mod 4
_TRIG = {
    "f32": ((1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8),
            (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1),
            (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)),
    "f64": ((1.57079625129699707031, 7.54978941586159635336e-8, 5.39030285815811905290e-15),
            (1.58962301576546568060e-10, -2.50507477628578072866e-8, 2.75573136213857245213e-6,
             -1.98412698295895385996e-4, 8.33333333332211858878e-3, -1.66666666666666307295e-1),
            (-1.13585365213876817300e-11, 2.08757008419747316778e-9, -2.75573141792967388112e-7,
             2.48015872888517045348e-5, -1.38888888888730564116e-3, 4.16666666666665929218e-2)),
}


def _horner(coefficients, z: str, dt: str) -> str:
    text = literal(coefficients[0], dt)
    for c in coefficients[1:]:
        text = f"({text} * {z} + {_lit(c, dt)})"
    return text


def _trig_lower(shift: int):
    """sin (`shift` 0) or cos (1, a quarter turn on): three stages (the quadrant, the remainder, the value)."""
    def lower(b, node, refs):
        dt, src = node.outputs[0].dtype, refs[0].dtype
        shape = node.outputs[0].shape
        (c1, c2, c3), _sin_c, _cos_c = ([literal(c, dt) for c in cs] for cs in _TRIG[dt])
        x = b.stage_of(b.elementwise(shape, dt, [refs[0]], lambda a: cast(a, src, dt)))
        n = b.materialize(b.elementwise(shape, dt, [x], lambda a: f"({a} * {literal(2 / np.pi, dt)} + 0.5) // 1.0"))
        r = b.materialize(b.elementwise(shape, dt, [x, n], lambda a, k: f"{a} - {k} * {c1} - {k} * {c2} - {k} * {c3}"))

        def value(rr, k):
            z = f"{rr} * {rr}"
            sin = f"({_horner(_TRIG[dt][1], z, dt)} * {z} * {rr} + {rr})"
            cos = f"({_horner(_TRIG[dt][2], z, dt)} * {z} * {z} - 0.5 * {z} + 1.0)"
            q = f"(({k} + {literal(shift, dt)}) % 4.0)"
            return f"select({q} == 0.0, {sin}, select({q} == 1.0, {cos}, select({q} == 2.0, -{sin}, -{cos})))"
        return [b.elementwise(shape, dt, [r, n], value)]
    return lower


def _trig_eval(fn):
    return lambda node, arrays: [fn(arrays[0].astype(DTYPES[node.outputs[0].dtype]))]


for _name, _shift, _fn in (("sin", 0, np.sin), ("cos", 1, np.cos)):
    register(_name, "elementwise", lambda node: out(node.inputs[0].shape, as_float(node.inputs[0].dtype)),
             _trig_lower(_shift), _flops_per(20), evaluate=_trig_eval(_fn), family="math",
             doc="Cephes' polynomials: f32 within 1e-7 for |x| < 8192, f64 within 2e-16")


def _pow_text(a: str, e, dt: str) -> str:
    if e == 2:
        return f"{a} * {a}"
    if e == 3:
        return f"{a} * {a} * {a}"
    if e == 1:
        return a
    if e == 0:
        return _lit(1, dt)
    if e == 0.5:
        return f"sqrt({a})"
    if e == -1:
        return f"1.0 / {a}"
    if e == -0.5:
        return f"1.0 / sqrt({a})"
    return f"{a} ** {_lit(e, dt)}"


def _pow_infer(node):
    return out(node.inputs[0].shape, result_dtype([node.inputs[0].dtype], [node.attrs["exponent"]]))


def _pow_lower(b, node, refs):
    dt = _pow_infer(node)[0].dtype
    e = node.attrs["exponent"]
    if dt not in FLOAT and not (isinstance(e, int) and 0 <= e <= 3):
        raise fail(node, f"integer power with exponent {e} is not supported")
    src = refs[0].dtype
    return [b.elementwise(node.outputs[0].shape, dt, [refs[0]], lambda a: _pow_text(cast(a, src, dt), e, dt))]


register("pow.Tensor_Scalar", "elementwise", _pow_infer, _pow_lower, _flops_per(2), family="math",
         doc="x ** c (squares, cubes, square roots and reciprocals written out)")


def _pow_scalar_infer(node):
    base = node.attrs["self"]
    dt = result_dtype([node.inputs[0].dtype], [base])
    return out(node.inputs[0].shape, dt)


def _pow_scalar_lower(b, node, refs):
    dt = node.outputs[0].dtype
    if dt not in FLOAT:
        raise fail(node, f"an integer power of an integer ({node.attrs['self']} ** a {node.inputs[0].dtype} tensor) "
                         "is not supported")
    base, src = node.attrs["self"], refs[0].dtype
    return [b.elementwise(node.outputs[0].shape, dt, [refs[0]], lambda a: f"{_lit(base, dt)} ** {cast(a, src, dt)}")]


register("pow.Scalar", "elementwise", _pow_scalar_infer, _pow_scalar_lower, _flops_per(10), family="math",
         doc="c ** x (a number to a tensor's powers)")


def _tri_lower(upper: bool):
    """triu / tril: x where the column is on the kept side of diagonal `diagonal`, else 0."""
    def lower(b, node, refs):
        x = node.inputs[0]
        if x.type.rank < 2:
            raise fail(node, f"input {list(x.shape)}: triu and tril take a matrix or a batch of them")
        k, dt, ref = node.attrs.get("diagonal", 0), x.dtype, refs[0]
        if ref.lazy:
            ref = b.materialize(ref)

        def make(idx):
            keep = f"{idx[-1]} - ({idx[-2]}) {'>=' if upper else '<='} {k}"
            return f"select({keep}, {ref.read(idx)}, {_lit(0, dt) if dt != 'bool' else '1 == 0'})"
        return [ExprRef(b, x.shape, dt, make, [ref])]
    return lower


for _name, _up, _np in (("triu", True, np.triu), ("tril", False, np.tril)):
    register(_name, "elementwise", lambda node: [node.inputs[0].type], _tri_lower(_up), _flops_per(1),
             evaluate=lambda node, arrays, f=_np: [f(arrays[0], node.attrs.get("diagonal", 0))], family="layout",
             doc="diagonal (causal masks)")


def _cast_infer(node):
    return out(node.inputs[0].shape, node.attrs.get("dtype") or node.inputs[0].dtype)


def _cast_lower(b, node, refs):
    src, dt = refs[0].dtype, _cast_infer(node)[0].dtype
    return [b.elementwise(node.outputs[0].shape, dt, [refs[0]], lambda a: cast(a, src, dt))]


register("_to_copy", "elementwise", _cast_infer, _cast_lower, family="arithmetic",
         doc="dtype conversion between f32, f64, i32, i64, bool, u8, i8 and i16")


# ---- binary ---------------------------------------------------------------------------------------------------

def _binary(name: str, text, *, true_div: bool = False, compare: bool = False, doc: str = "",
            family: str = "arithmetic", names=("self", "other"), flops: int = 1, evaluate=None):
    """Register a binary op: `text(a, b, dt, attrs)` combines the operands' elements (both in dtype dt);
    `evaluate` folds it in numpy (see `OpDef`)."""
    def dtypes(node):
        dt = _dtype(node, names)
        if true_div:
            dt = as_float(dt)
        return dt, ("bool" if compare else dt)

    def infer(node):
        shapes = [v.shape for v in node.inputs if v is not None]
        return out(broadcast_shapes(*shapes) if shapes else (), dtypes(node)[1])

    def lower(b, node, refs):
        dt, _ = dtypes(node)
        a = _operand(b, node, refs, 0, names[0])
        c = _operand(b, node, refs, 1, names[1])
        return [b.elementwise(node.outputs[0].shape, dtypes(node)[1], [a, c],
                              lambda x, y: text(cast(x, a.dtype, dt), cast(y, c.dtype, dt), dt, node.attrs))]
    register(name, "elementwise", infer, lower, _flops_per(flops), evaluate=evaluate, doc=doc, family=family)


def _alpha(at, dt):
    a = at.get("alpha", 1)
    return "" if a == 1 else f" * {_lit(a, dt)}"


for _suffix in ("Tensor", "Scalar"):
    _binary(f"add.{_suffix}", lambda x, y, dt, at: f"{x} + {y}{_alpha(at, dt)}", doc="broadcasting, alpha")
    _binary(f"sub.{_suffix}", lambda x, y, dt, at: f"{x} - {y}{_alpha(at, dt)}", doc="broadcasting, alpha")
    _binary(f"mul.{_suffix}", lambda x, y, dt, at: f"{x} * {y}", doc="broadcasting")
    _binary(f"div.{_suffix}", lambda x, y, dt, at: f"{x} / {y}", true_div=True, doc="true division, broadcasting")
_binary("rsub.Scalar", lambda x, y, dt, at: f"{y} - {x}{_alpha(at, dt)}", doc="other - alpha * x")
_binary("maximum", lambda x, y, dt, at: f"max({x}, {y})", doc="broadcasting")
_binary("minimum", lambda x, y, dt, at: f"min({x}, {y})", doc="broadcasting")
_binary("pow.Tensor_Tensor", lambda x, y, dt, at: f"{x} ** {y}", doc="x ** y", family="math", flops=10)
for _name, _sym in (("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">=")):
    for _suffix in ("Tensor", "Scalar"):
        _binary(f"{_name}.{_suffix}", lambda x, y, dt, at, s=_sym: f"{x} {s} {y}", compare=True,
                family="comparison", doc=f"x {_sym} y, a bool tensor")
_binary("logical_and", lambda x, y, dt, at: f"{cast(x, dt, 'bool')} and {cast(y, dt, 'bool')}", compare=True,
        family="comparison", doc="")
_binary("logical_or", lambda x, y, dt, at: f"{cast(x, dt, 'bool')} or {cast(y, dt, 'bool')}", compare=True,
        family="comparison", doc="")
_binary("logical_xor", lambda x, y, dt, at: f"{cast(x, dt, 'bool')} != {cast(y, dt, 'bool')}", compare=True,
        family="comparison", doc="")


def _bitwise(name: str, text, np_fn, arity: int = 2):
    """Register bitwise op `name` (`name.Tensor` and `name.Scalar` when binary): `text` on bool operands (the DSL
    has no bit operators for integers, whose constants fold in numpy)."""
    names = ("self", "other")[:arity]

    def infer(node):
        return out(_shape(node) if node.inputs else (), _dtype(node, names))

    def lower(b, node, refs):
        if node.outputs[0].dtype != "bool":
            raise fail(node, f"{name} of {node.outputs[0].dtype} tensors: kernels compute bitwise ops on bool "
                             "tensors (integer ones only fold, when their operands are constants)")
        xs = [_operand(b, node, refs, k, n) for k, n in enumerate(names)]
        return [b.elementwise(node.outputs[0].shape, "bool", xs,
                              lambda *ts: text(*(cast(t, x.dtype, "bool") for t, x in zip(ts, xs))))]

    def evaluate(node, arrays):
        vals = [a if a is not None else np.asarray(node.attrs[n]) for a, n in zip(list(arrays) + [None], names)]
        return [np.asarray(np_fn(*vals)).astype(DTYPES[node.outputs[0].dtype])]
    for full in ([f"{name}.Tensor", f"{name}.Scalar"] if arity == 2 else [name]):
        register(full, "elementwise", infer, lower, _flops_per(1), evaluate=evaluate, family="comparison",
                 doc="bool tensors (integer ones fold when constant)")


_bitwise("bitwise_and", lambda x, y: f"{x} and {y}", np.bitwise_and)
_bitwise("bitwise_or", lambda x, y: f"{x} or {y}", np.bitwise_or)
_bitwise("bitwise_xor", lambda x, y: f"{x} != {y}", np.bitwise_xor)
_bitwise("bitwise_not", lambda x: f"not {x}", np.invert, arity=1)


def _clamp_infer(node):
    return out(node.inputs[0].shape, result_dtype([node.inputs[0].dtype],
                                                  [v for v in (node.attrs.get("min"), node.attrs.get("max"))
                                                   if v is not None]))


def _clamp_lower(b, node, refs):
    dt = _clamp_infer(node)[0].dtype
    lo, hi = node.attrs.get("min"), node.attrs.get("max")
    if len(refs) > 1 and any(r is not None for r in refs[1:]):
        raise fail(node, "clamp with tensor bounds is not supported; bounds are numbers")

    def text(a):
        a = cast(a, refs[0].dtype, dt)
        if lo is not None:
            a = f"max({a}, {_lit(lo, dt)})"
        if hi is not None:
            a = f"min({a}, {_lit(hi, dt)})"
        return a
    return [b.elementwise(node.outputs[0].shape, dt, [refs[0]], text)]


register("clamp", "elementwise", _clamp_infer, _clamp_lower, _flops_per(2), family="activation",
         doc="min and/or max (numbers)")


def _where_infer(node):
    c, x, y = node.inputs
    return out(broadcast_shapes(c.shape, x.shape, y.shape), result_dtype([x.dtype, y.dtype], []))


def _select_lower(b, node, c, x, y):
    dt = node.outputs[0].dtype
    return [b.elementwise(node.outputs[0].shape, dt, [c, x, y],
                          lambda cc, xx, yy: f"select({cast(cc, c.dtype, 'bool')}, {cast(xx, x.dtype, dt)}, "
                                             f"{cast(yy, y.dtype, dt)})")]


register("where.self", "elementwise", _where_infer, lambda b, node, refs: _select_lower(b, node, *refs),
         _flops_per(1), family="comparison", doc="select by a bool tensor, all three broadcasting")


def _masked_fill_infer(node):
    x, mask = node.inputs[:2]
    if mask.dtype != "bool":
        raise fail(node, f"mask {mask.name} has dtype {mask.dtype}; masked_fill takes a bool mask")
    shape = broadcast_shapes(x.shape, mask.shape)
    if shape != tuple(x.shape):
        raise fail(node, f"mask {list(mask.shape)} does not broadcast to the input {list(x.shape)}")
    if len(node.inputs) > 2 and node.inputs[2] is not None and node.inputs[2].type.rank:
        raise fail(node, f"value {list(node.inputs[2].shape)}: masked_fill takes a 0-d value")
    return out(x.shape, x.dtype)


def _masked_fill_lower(b, node, refs):
    value = refs[2] if len(refs) > 2 and refs[2] is not None else _operand(b, node, [], 0, "value")
    return _select_lower(b, node, refs[1], value, refs[0])


for _name in ("masked_fill.Scalar", "masked_fill.Tensor"):
    register(_name, "elementwise", _masked_fill_infer, _masked_fill_lower, _flops_per(1), family="comparison",
             doc="x where the bool mask is false, the value (a number or 0-d tensor) where it is true")
