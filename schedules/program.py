"""Any DSL program as a :class:`Workload`, so that the tuner, ``bench``, ``show`` and ``export`` serve a user's own
program as they serve the built-in ones.

Its oracle is numpy's evaluation of the program (:func:`tensorlang.reference`: nothing of the compiler's lowering
is shared, so a lowering bug cannot match itself), its inputs are random (standard normal floats, integers in
-8..8), its FLOP count is counted from the program (:func:`tensorlang.autosched.analysis.flop_count`), and its
search space is the generated one.

Example::

    >>> import numpy as np
    >>> w = program_workload("def scale(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0\\n", {"N": 4})
    >>> w.name, w.sizes(), w.flops({"N": 4})
    ('scale', {'N': 4}, 4.0)
    >>> X, = w.make_inputs({"N": 4}, np.random.default_rng(0))
    >>> bool(np.allclose(w.reference(X, N=4), 2 * X))
    True
"""
from __future__ import annotations

import numpy as np

import tensorlang as tl
from tensorlang.autosched.analysis import flop_count
from tensorlang.dtypes import DTYPES
from tensorlang.schedules.workload import Workload


def random_inputs(op, sizes: dict, rng: np.random.Generator) -> list[np.ndarray]:
    """One random array per input of `op` at `sizes`: standard normal floats, integers in -8..8.

    Example::

        >>> import tensorlang as tl
        >>> op = tl.op("def f(A: i32[N], B: f64[N]) -> C:\\n    C[i] = f64(A[i]) + B[i]")
        >>> [(a.dtype.name, a.shape) for a in random_inputs(op, {"N": 3}, np.random.default_rng(0))]
        [('int32', (3,)), ('float64', (3,))]
    """
    s = tl.schedule(op, **sizes)
    out = []
    for p in op.params:
        shape, dt = s.bound.shapes[p.name], DTYPES[p.dtype]
        if dt.is_float:
            out.append(rng.standard_normal(shape).astype(dt.numpy))
        else:
            out.append(rng.integers(-8, 9, shape).astype(dt.numpy))
    return out


def program_workload(source: str, sizes: dict) -> Workload:
    """The program `source` as a workload whose one preset ("given") is `sizes` (see the module docstring).

    Example::

        >>> program_workload("def f(A: f32[N]) -> B:\\n    B[i] = A[i]\\n", {"N": 8}).default_preset
        'given'
    """
    op = tl.op(source)

    def reference(*inputs, **bound):
        return tl.reference(op, **bound)(*inputs)

    def space(at: dict):
        from tensorlang.autosched.space import generated_space
        return generated_space(op, at)

    return Workload(
        name=op.name, source=source, presets={"given": dict(sizes)}, default_preset="given",
        reference=reference, make_inputs=lambda at, rng: random_inputs(op, at, rng),
        flops=lambda at: flop_count(op, at),
        description=f"a user's program ({op.name}), checked against numpy's evaluation of it",
        space=space)
