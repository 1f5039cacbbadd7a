"""The common call of a kernel with symbolic sizes, as one Python function written for that kernel.

A symbolic kernel reads its sizes from its inputs' shapes at every call, checks them, allocates its outputs and
passes sizes and addresses to the machine code. Done with general loops over the kernel's description this costs
microseconds, as much as a small kernel's whole run; so the checks are written out as straight-line Python for
the kernel's own inputs and dimensions (as `collections.namedtuple` and `dataclasses` write their methods) and
compiled once. The function returns None for anything it does not accept (a wrong rank, dtype, size, a strided
or subclassed array); the kernel's general path then checks that call and names what is wrong.

>>> import numpy as np, tensorlang as tl
>>> k = tl.build(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=tl.Dim(1, 100))
>>> print(fast_call_source(k), end="")
def fast(inputs):
    if len(inputs) != 1:
        return None
    a0, = inputs
    if a0.__class__ is not ndarray:
        return None
    s0 = a0.shape
    if len(s0) != 1:
        return None
    z0 = s0[0]
    if not (1 <= z0 <= 100):
        return None
    if (a0.dtype is not t0 and a0.dtype != t0):
        return None
    if not (a0.flags.c_contiguous):
        return None
    o0 = empty((z0,), u0)
    status = fn(address(a0), address(o0), z0)
    if status:
        fail(status, {'N': z0})
    return o0
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

import numpy as np

from .symbolic import VERSION_SIZE, Sym, _Div, _Ext, _Mul, _Size

if TYPE_CHECKING:
    from .runtime import SymbolicKernel


def _python(x, names: dict[str, str]) -> str:
    """A size expression (an int or a Sym) as Python over the local variables in `names` (size -> variable).

    >>> n = Sym.size("N", 1, 99)
    >>> _python((n + 7) // 8 * 3 - 1, {"N": "z0"})
    '((z0 + 7) // 8)*3 - 1'
    """
    if not isinstance(x, Sym):
        return repr(int(x))
    parts = []
    for atom, c in sorted(x.terms.values(), key=lambda t: repr(t[0].key())):
        if isinstance(atom, _Size):
            s = names[atom.name]
        elif isinstance(atom, _Div):
            s = f"(({_python(atom.num, names)}) // {atom.c})" if not isinstance(atom.num, Sym) or \
                atom.num.const or len(atom.num.terms) != 1 else f"({_python(atom.num, names)} // {atom.c})"
        elif isinstance(atom, _Mul):
            s = f"(({_python(atom.a, names)}) * ({_python(atom.b, names)}))"
        else:
            assert isinstance(atom, _Ext)
            s = f"{atom.op}({_python(atom.a, names)}, {_python(atom.b, names)})"
        parts.append(s if c == 1 else f"{s}*{c}")
    text = " + ".join(parts)
    if x.const:
        text += f" + {x.const}" if x.const > 0 else f" - {-x.const}"
    return text.replace("+ -", "- ")


def fast_call_source(kernel: SymbolicKernel, offset: int | None = None) -> str:
    """The Python source of `kernel`'s common call (see the module docstring); `offset`: where an ndarray's data
    address lies in its object (see `runtime.data_address`), read there directly, else asked of `address`.

    >>> import tensorlang as tl
    >>> k = tl.build(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=tl.Dim(1, 100))
    >>> "z0 = s0[0]" in fast_call_source(k)
    True
    """
    inputs, outputs = list(kernel.op.inputs), list(kernel.op.outputs)
    position = {p: i for i, p in enumerate(inputs)}
    names = {n: f"z{j}" for j, n in enumerate(kernel._sources)}
    read_at = {(position[p], d): n for n, (p, d) in kernel._sources.items()}
    ins = [f"a{i}" for i in range(len(inputs))]
    lines = ["def fast(inputs):",
             f"    if len(inputs) != {len(inputs)}:", "        return None"]
    if ins:
        lines.append(f"    {', '.join(ins)}, = inputs")
        lines += [f"    if {' or '.join(f'{a}.__class__ is not ndarray' for a in ins)}:", "        return None"]
        lines += [f"    s{i} = a{i}.shape" for i in range(len(ins))]
        lines += [f"    if {' or '.join(f'len(s{i}) != {len(kernel.input_shapes[p])}' for i, p in enumerate(inputs))}:",
                  "        return None"]
    for (i, d), n in sorted(read_at.items()):
        lines.append(f"    {names[n]} = s{i}[{d}]")
    if names:
        lo_hi = " and ".join(f"{lo} <= {names[n]} <= {hi}" for n, (lo, hi) in kernel.ranges.items())
        lines += [f"    if not ({lo_hi}):", "        return None"]
    others = []
    for i, p in enumerate(inputs):
        for d, ext in enumerate(kernel.input_shapes[p]):
            if (i, d) not in read_at:
                others.append(f"s{i}[{d}] != {_python(ext, names)}")
    if others:
        lines += [f"    if {' or '.join(others)}:", "        return None"]
    if kernel.thresholds:  # several versions: the one nearest the call's sizes (see SymbolicKernel.version_for)
        product = " * ".join(names[n] for n in kernel.ranges)
        pick = f"{len(kernel.thresholds)}"
        for j in range(len(kernel.thresholds) - 1, -1, -1):
            pick = f"{j} if q <= {kernel.thresholds[j]} else ({pick})"
        lines += [f"    q = ({product}) ** 2", f"    ver = {pick}"]
        names = {**names, VERSION_SIZE: "ver"}
    if ins:
        lines += [f"    if {' or '.join(f'({a}.dtype is not t{i} and {a}.dtype != t{i})' for i, a in enumerate(ins))}:",
                  "        return None",
                  f"    if not ({' and '.join(f'{a}.flags.c_contiguous' for a in ins)}):", "        return None"]
    for j, o in enumerate(outputs):
        dims = [_python(e, names) for e in kernel.output_shapes[o]]
        lines.append(f"    o{j} = empty(({', '.join(dims)}{',' if len(dims) == 1 else ''}), u{j})")
    at = "address({})" if offset is None else f"(at(id({{}}) + {offset}).value or 0)"
    args = [at.format(a) for a in ins] + [at.format(f"o{j}") for j in range(len(outputs))] + \
        [names[n] for n in kernel._size_params]
    env = "{" + ", ".join(f"{n!r}: {names[n]}" for n in kernel._sources) + \
        (f", {VERSION_SIZE!r}: ver" if kernel.thresholds else "") + "}"
    lines += [f"    status = fn({', '.join(args)})", "    if status:", f"        fail(status, {env})"]
    outs = [f"o{j}" for j in range(len(outputs))]
    lines.append(f"    return {outs[0]}" if len(outs) == 1 else f"    return ({', '.join(outs)})")
    return "\n".join(lines) + "\n"


def fast_call(kernel: SymbolicKernel, address, fail, offset: int | None = None) -> Any:
    """`kernel`'s common call as a function of the tuple of inputs: the output (a tuple when there are several),
    or None for a call it does not accept. `address(array)` gives an array's data address, `fail(status, sizes)`
    raises the error of a failed call; `offset` as for `fast_call_source`.

    >>> import numpy as np, tensorlang as tl
    >>> from tensorlang.runtime import data_address
    >>> k = tl.build(tl.op("def f(A: f32[N]) -> B:\\n    B[i] = A[i] * 2.0"), N=tl.Dim(1, 100))
    >>> f = fast_call(k, data_address, None)
    >>> f((np.ones(3, np.float32),)).tolist(), f((np.ones(3, np.float64),))
    ([2.0, 2.0, 2.0], None)
    """
    space: dict[str, Any] = {"ndarray": np.ndarray, "empty": np.empty, "fn": kernel._fn, "address": address,
                             "fail": fail, "at": ctypes.c_void_p.from_address}
    for i, p in enumerate(kernel.op.inputs):
        space[f"t{i}"] = np.dtype(kernel.input_dtypes[p])
    for j, o in enumerate(kernel.op.outputs):
        space[f"u{j}"] = np.dtype(kernel.output_dtypes[o])
    exec(compile(fast_call_source(kernel, offset), f"<fast call of {kernel.op.name}>", "exec"), space)
    return space["fast"]
