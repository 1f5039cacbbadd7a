"""Writing a tensorlang program (DSL text) for a group of graph nodes.

Op lowerings (``tensorlang/graph/ops``) do not print DSL text directly: they combine *refs*, each of which says how
to read a value at an index inside the program being written.

- `TensorRef`: a tensor of the program, an input (``in0``) or a stage (``t3``, ``out0``), declared with a shape
  that may split the value's own (a grouped convolution writes [N, G, F/G, H, W] for its [N, F, H, W] output).
- `ExprRef`: an elementwise expression not yet written anywhere; a consumer reads it by substituting the
  expression (so a chain of elementwise ops becomes one expression), and it becomes a stage of its own when it is
  read more than once, read as padding, or is an output of the group.
- `MapRef`: an injective op (permute, expand, slice, select, reshape): the read of another ref at a mapped index.
- `LiteralRef`: a constant with one element, written into the expression as a number.

>>> from tensorlang.graph.ir import Value, TensorType
>>> b = Builder("double")
>>> x = b.param(Value("x", TensorType((4,), "f32")))
>>> y = b.elementwise((4,), "f32", [x], lambda a: f"{a} * 2.0")
>>> b.set_outputs([y])
>>> print(b.text())
def double(in0: f32[4]) -> out0:
    out0[i0] = (in0[i0] * 2.0) where i0 in 0:4
<BLANKLINE>
"""
from __future__ import annotations

import math
import re

import numpy as np

from ..errors import UsageError
from .affine import Aff, NotAffine, refine, reshape_index
from .ir import STORAGE, Value


def literal(value, dtype: str) -> str:
    """A number as DSL text for a tensor of `dtype` (floats always with a point or exponent).

    >>> literal(2, "f32"), literal(1e-5, "f32"), literal(float("-inf"), "f32"), literal(3, "i32")
    ('2.0', '1e-05', '-inf', '3')
    """
    if dtype in ("f32", "f64"):
        x = float(value)
        if math.isnan(x):
            raise UsageError("a NaN constant cannot be written into a tensorlang program")
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        text = repr(x)
        return text if any(ch in text for ch in ".en") else text + ".0"
    if dtype == "bool":
        return "1" if value else "0"
    return str(int(value))


def cast(expr: str, src: str, dst: str) -> str:
    """`expr` (of dtype `src`) converted to `dst` in DSL text.

    >>> cast("x", "f32", "f64"), cast("x", "f32", "f32"), cast("c", "bool", "f32")
    ('f64(x)', 'x', 'select(c, 1.0, 0.0)')
    """
    if src == dst:
        return expr
    if src == "bool":  # 1 and 0 are weak numbers, f32 or i32 where they meet no tensor
        chosen = f"select({expr}, {literal(1, dst)}, {literal(0, dst)})"
        return chosen if dst in ("f32", "i32") else f"{dst}({chosen})"
    if dst == "bool":
        return f"({expr} != {literal(0, src)})"
    return f"{dst}({expr})"


class Ref:
    """How to read a value inside the program being written: `read(idx)` gives DSL text for the element at `idx`
    (one affine index per dimension of `shape`)."""

    shape: tuple[int, ...]
    dtype: str
    lazy = False  # reading it substitutes an expression (read it once, or make it a stage first)

    def read(self, idx: list[Aff]) -> str:
        """DSL text of the element at `idx`."""
        raise NotImplementedError

    def hints(self) -> set[tuple[int, ...]]:
        """Shapes that split `shape` and that a stage writing this value could loop over (see `TensorRef`)."""
        return set()


class TensorRef(Ref):
    """A tensor of the program named `name`, declared with shape `decl` (same element count as `shape`).

    >>> b = Builder("f")
    >>> t = TensorRef(b, "t0", (2, 6), "f32", decl=(2, 2, 3))
    >>> t.read([Aff.var("i0"), Aff.var("i1")])  # doctest: +SKIP
    """

    def __init__(self, builder: Builder, name: str, shape, dtype: str, decl=None):
        self.b, self.name, self.shape, self.dtype = builder, name, tuple(shape), dtype
        self.decl = tuple(decl) if decl is not None else self.shape

    def read(self, idx: list[Aff]) -> str:
        """The element at `idx`, through the declared shape."""
        idx = reshape_index(idx, self.shape, self.decl, self.b.ranges)
        text = self.name if not self.decl else f"{self.name}[{', '.join(map(str, idx))}]"
        return f"({text} != 0)" if self.dtype == "bool" else text

    def hints(self) -> set[tuple[int, ...]]:
        """The declared shape when it is not `shape` itself."""
        return {self.decl} if self.decl != self.shape else set()


class LiteralRef(Ref):
    """A value with one element, known at compile time: reads give the number."""

    def __init__(self, shape, dtype: str, value):
        self.shape, self.dtype, self.value = tuple(shape), dtype, value

    def read(self, idx: list[Aff]) -> str:
        """The number (any index)."""
        text = literal(self.value, self.dtype)
        if self.dtype == "bool":
            return "(1 == 1)" if self.value else "(1 == 0)"
        return text if not text.startswith("-") else f"({text})"


class ExprRef(Ref):
    """An elementwise expression: `make(idx)` writes the element at `idx` by reading its inputs there.

    Read it at most once (the builder makes a stage of it before a second read).
    """

    lazy = True

    def __init__(self, builder: Builder, shape, dtype: str, make, inputs=()):
        self.b, self.shape, self.dtype, self.make = builder, tuple(shape), dtype, make
        self.inputs = tuple(inputs)
        self.reads = 0

    def read(self, idx: list[Aff]) -> str:
        """The expression at `idx` (once)."""
        self.reads += 1
        if self.reads > 1:
            raise AssertionError("an ExprRef was read twice; Builder.stage_of() it first")
        return f"({self.make(idx)})"

    def hints(self) -> set[tuple[int, ...]]:
        """The hints of the inputs of the same shape."""
        out: set[tuple[int, ...]] = set()
        for r in self.inputs:
            if r.shape == self.shape:
                out |= r.hints()
        return out


class MapRef(Ref):
    """The read of `base` at `fn(idx)`: permute, expand, slice, select, reshape."""

    def __init__(self, base: Ref, shape, fn, dtype: str | None = None):
        self.base, self.shape, self.fn = base, tuple(shape), fn
        self.dtype = dtype or base.dtype
        self.lazy = base.lazy

    def read(self, idx: list[Aff]) -> str:
        """`base` read at the mapped index."""
        return self.base.read(self.fn(list(idx)))


class Builder:
    """Collects the inputs and stages of one program and prints it as DSL text.

    `param(value)` declares an input, `stage(...)` / `elementwise(...)` / `materialize(ref)` write statements,
    `set_outputs(refs)` names the outputs, `text()` prints the program (stages nobody reads are left out).
    """

    def __init__(self, name: str, literals: bool = True):
        self.name = name
        self.literals = literals  # constants with one element are written as numbers
        self.params: list[tuple[str, Value, tuple]] = []  # (name, value, declared shape)
        self._param_by_uid: dict[int, TensorRef] = {}
        self.stages: list[dict] = []
        self.ranges: dict[str, int] = {}
        self.outputs: list[TensorRef] = []
        self._count = 0

    # ---- inputs ----
    def param(self, value: Value) -> Ref:
        """The ref of an input value of the group (a constant with one element becomes a literal)."""
        if value.uid in self._param_by_uid:
            return self._param_by_uid[value.uid]
        if self.literals and value.is_constant and value.type.numel == 1 and value.dtype in STORAGE:
            return LiteralRef(value.shape, value.dtype, np.asarray(value.data).reshape(-1)[0].item())
        name = f"in{len(self.params)}"
        decl = value.shape if value.shape else (1,)
        ref = TensorRef(self, name, value.shape, value.dtype, decl=decl)
        self.params.append((name, value, decl))
        self._param_by_uid[value.uid] = ref
        return ref

    # ---- stages ----
    def _fresh(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def stage(self, shape, dtype: str, body, *, reduce: str | None = None, red=(), decl=None,
              where_extra: dict | None = None) -> TensorRef:
        """Write a stage over `shape` (looping over `decl`, a shape that splits it, when given) and return its ref.

        `body(idx, ridx)` gets the output index (affine in the loop variables, one per dimension of `shape`) and
        the reduction variables (one per extent in `red`) and returns the right side; `reduce` is None for ``=``,
        else ``+``, ``max``, ``min`` or ``*``. A bool stage is stored as 0/1 (i32).
        """
        shape = tuple(shape)
        decl = tuple(decl) if decl is not None else shape
        name = self._fresh("t")
        loop = [f"i{k}" for k in range(len(decl))]
        rvars = [f"r{k}" for k in range(len(red))]
        saved = dict(self.ranges)
        self.ranges = {**{v: n for v, n in zip(loop, decl)}, **{v: n for v, n in zip(rvars, red)}}
        try:
            decl_idx = [Aff.var(v) for v in loop]
            idx = reshape_index(decl_idx, decl, shape, self.ranges) if decl != shape else decl_idx
            rhs = body(idx, [Aff.var(v) for v in rvars])
        finally:
            self.ranges = saved
        storage = STORAGE[dtype]
        if dtype == "bool":
            rhs = f"select({rhs}, 1, 0)"
        unused = [v for v in rvars if not re.search(rf"\b{v}\b", rhs)]
        if unused:  # a reduction over a broadcast dim (mean of an expand): each index still counts once
            zero = " + ".join(f"f32({v}) * 0.0" if storage in ("f32", "f64") else f"{v} * 0" for v in unused)
            rhs = f"{rhs} + {cast(zero, 'f32', storage) if storage == 'f64' else zero}"
        ranges = [f"{v} in 0:{n}" for v, n in zip(loop, decl)] + [f"{v} in 0:{n}" for v, n in zip(rvars, red)]
        self.stages.append({"name": name, "vars": loop, "op": reduce, "rhs": rhs, "where": ranges,
                            "dtype": storage})
        return TensorRef(self, name, shape, dtype, decl=decl if decl else None)

    def elementwise(self, shape, dtype: str, inputs: list[Ref], fn) -> ExprRef:
        """An elementwise op: `fn(*texts)` combines its inputs' elements (read at the broadcast index) into the
        output's. Nothing is written until a consumer reads it (or it is made a stage). An input whose text `fn`
        repeats (gelu's x) is made a stage first when it is an expression."""
        shape = tuple(shape)
        marks = [f"\x00{k}\x00" for k in range(len(inputs))]
        probe = fn(*marks)
        inputs = [self.stage_of(r) if probe.count(m) > 1 else r for r, m in zip(inputs, marks)]

        def make(idx):
            return fn(*(r.read(broadcast_index(idx, shape, r.shape)) for r in inputs))
        return ExprRef(self, shape, dtype, make, inputs)

    def materialize(self, ref: Ref) -> TensorRef:
        """Write `ref` as a stage of its own (over a shape that splits it where its inputs' layouts ask) and return
        the stage's ref."""
        decl = None
        for hint in sorted(ref.hints()):
            decl = refine(ref.shape, hint)
            if decl is not None:
                break
        return self.stage(ref.shape, ref.dtype, lambda idx, _: ref.read(idx), decl=decl)

    def stage_of(self, ref: Ref) -> Ref:
        """`ref` itself when reading it several times costs nothing extra, else a stage of it."""
        return self.materialize(ref) if ref.lazy else ref

    def tensor_of(self, ref: Ref) -> TensorRef:
        """A tensor (input or stage) declared with `ref`'s own shape, for reads that may fall outside it (padding:
        those read 0 only from a tensor)."""
        if isinstance(ref, TensorRef) and ref.decl == ref.shape:
            return ref
        return self.stage(ref.shape, ref.dtype, lambda idx, _: ref.read(idx))

    def set_outputs(self, refs: list[Ref]) -> None:
        """The program's outputs, in order: each is a stage of its own, printed as out0, out1, ... ."""
        self.outputs = []
        for k, r in enumerate(refs):
            st = self._stage(r.name) if isinstance(r, TensorRef) else None
            if st is None or "out_name" in st:  # an input, not a stage yet, or already another output
                r = self.materialize(r)
                st = self._stage(r.name)
            assert isinstance(r, TensorRef) and st is not None  # a stage's ref: given as one, or just written
            st["out_name"] = f"out{k}"
            self.outputs.append(r)

    def _stage(self, name: str) -> dict | None:
        return next((s for s in self.stages if s["name"] == name), None)

    # ---- text ----
    def text(self) -> str:
        """The program: only stages that an output depends on, stages renamed outK where they are outputs."""
        rename: dict[str, str] = {s["name"]: s["out_name"] for s in self.stages if "out_name" in s}
        needed = {s["name"] for s in self.stages if "out_name" in s}
        # walk backwards: a stage is needed when a needed stage reads it
        token = re.compile(r"\b(t\d+|in\d+)\b")
        used_params: set[str] = set()
        for s in reversed(self.stages):
            if s["name"] in needed:
                for tok in token.findall(s["rhs"]):
                    (used_params if tok.startswith("in") else needed).add(tok)

        def sub(text):
            return token.sub(lambda m: rename.get(m.group(1), m.group(1)), text)
        params = [f"{n}: {self._storage(v)}[{', '.join(map(str, decl))}]" for n, v, decl in self.params
                  if n in used_params]
        outs = [rename[o.name] for o in self.outputs]
        result = outs[0] if len(outs) == 1 else f"({', '.join(outs)})"
        lines = [f"def {self.name}({', '.join(params)}) -> {result}:"]
        for s in self.stages:
            if s["name"] not in needed:
                continue
            name = rename.get(s["name"], s["name"])
            lhs = f"{name}[{', '.join(s['vars'])}]" if s["vars"] else name
            op = {None: "=", "+": "+=", "*": "*=", "max": "max=", "min": "min="}[s["op"]]
            where = f" where {', '.join(s['where'])}" if s["where"] else ""
            lines.append(f"    {lhs} {op} {sub(s['rhs'])}{where}")
        return "\n".join(lines) + "\n"

    @staticmethod
    def _storage(v: Value) -> str:
        return STORAGE[v.dtype]

    def used_params(self) -> list[tuple[str, Value, tuple]]:
        """The inputs the printed program reads, in order (call `text()` first)."""
        text = self.text()
        header = text.split("->", 1)[0]
        return [p for p in self.params if f"{p[0]}:" in header]


def broadcast_index(idx: list[Aff], out_shape, in_shape) -> list[Aff]:
    """The index into an operand of shape `in_shape` broadcast (numpy rules) to `out_shape`.

    >>> [str(e) for e in broadcast_index([Aff.var("a"), Aff.var("b")], (2, 3), (1, 3))]
    ['0', 'b']
    """
    out_shape, in_shape = tuple(out_shape), tuple(in_shape)
    lead = len(out_shape) - len(in_shape)
    if lead < 0:
        raise NotAffine(f"cannot broadcast {list(in_shape)} to {list(out_shape)}")
    return [Aff() if n == 1 and out_shape[lead + k] != 1 else idx[lead + k] for k, n in enumerate(in_shape)]


__all__ = ["Aff", "Builder", "ExprRef", "LiteralRef", "MapRef", "NotAffine", "Ref", "TensorRef", "broadcast_index",
           "cast", "literal"]
