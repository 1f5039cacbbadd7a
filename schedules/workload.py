"""The :class:`Workload` record shared by every module of the workload library.

A workload bundles a tensorlang DSL program with everything needed to run and check it: named size presets,
an independent NumPy reference implementation, an input generator and a FLOP count.

Example::

    >>> import numpy as np
    >>> from tensorlang.schedules import get
    >>> w = get("matmul")
    >>> sizes = w.sizes("small")
    >>> A, B = w.make_inputs(sizes, np.random.default_rng(0))
    >>> w.reference(A, B, **sizes).shape == (sizes["M"], sizes["N"])
    True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from tensorlang.errors import UsageError
from tensorlang.space import Knob, factors

__all__ = ["Workload", "conv_output_size", "register_tile_knobs"]


@dataclass(frozen=True)
class Workload:
    """One benchmark/test workload: a DSL program plus sizes, an oracle, inputs and a FLOP count.

    Attributes:
        name: the workload name; equal to the name of the DSL ``def``.
        source: the DSL program text (see the tensorlang DSL contract).
        presets: preset name -> sizes. Every preset binds *all* sizes of the program (the names used in tensor
            shapes and the ``int`` parameters), so ``tl.build(tl.op(w.source), **w.sizes(p))`` works as is.
        default_preset: the preset :meth:`sizes` returns when called without a name.
        reference: ``reference(*inputs, **sizes)`` computes the output(s) with NumPy, independently of the DSL
            (a tuple when the program has several outputs).
        make_inputs: ``make_inputs(sizes, rng)`` returns the input tensors, in parameter order, as
            C-contiguous arrays of the program's dtypes.
        flops: ``flops(sizes)`` the conventional floating-point operation count of one run.
        description: one or two sentences on what the workload computes.
        hand_schedule: ``hand_schedule(s)`` applies the hand-written schedule to ``s = tl.schedule(op, **sizes)``
            with public primitives only (None: the workload has none).
        numpy_fast: ``numpy_fast(*inputs, **sizes)`` the fastest reasonable numpy formulation, in the inputs'
            dtype, used as the speed baseline by ``tensorlang bench`` (None: use ``reference``).
        torch_fast: ``torch_fast(torch, *inputs, **sizes)`` the fastest reasonable PyTorch formulation (``torch``
            is the module, the inputs are CPU tensors that share the numpy inputs' memory), used as a speed
            baseline by ``tensorlang bench`` where PyTorch is installed (None: no PyTorch row).
        space: ``space(sizes) -> tensorlang.space.Space`` the tuner's search space at these sizes: knobs and a
            config -> schedule function using public primitives only.
        hand_config: ``hand_config(sizes) -> dict | None`` the config of ``space(sizes)`` whose schedule is the
            hand schedule (None where the space cannot express it); ``tensorlang tune`` measures it first.
        size_min: the least value of each ``int`` parameter that makes sense for the workload, beyond the DSL's
            own ``>= 0`` (a stride or a window of 0): ``{"stride": 1}``; :meth:`check_sizes` enforces it.

    Example::

        >>> import numpy as np
        >>> w = Workload(
        ...     name="scale",
        ...     source="def scale(X: f32[N]) -> Y:\\n    Y[i] = X[i] * 2.0\\n",
        ...     presets={"small": {"N": 4}},
        ...     default_preset="small",
        ...     reference=lambda X, **sizes: (X.astype(np.float64) * 2).astype(np.float32),
        ...     make_inputs=lambda sizes, rng: [rng.standard_normal(sizes["N"]).astype(np.float32)],
        ...     flops=lambda sizes: float(sizes["N"]),
        ...     description="Doubles a vector.",
        ... )
        >>> w.sizes()
        {'N': 4}
    """

    name: str
    source: str
    presets: dict[str, dict[str, int]]
    default_preset: str
    reference: Callable[..., np.ndarray | tuple]
    make_inputs: Callable[[dict, np.random.Generator], list[np.ndarray]]
    flops: Callable[[dict], float]
    description: str
    hand_schedule: Callable | None = None
    numpy_fast: Callable | None = None
    torch_fast: Callable | None = None
    space: Callable | None = None
    hand_config: Callable | None = None
    size_min: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.presets:
            raise UsageError(f"workload {self.name!r} has no presets")
        if self.default_preset not in self.presets:
            raise UsageError(
                f"workload {self.name!r}: default preset {self.default_preset!r} is not one of "
                f"{sorted(self.presets)}"
            )
        keys = set(self.presets[self.default_preset])
        for preset, sizes in self.presets.items():
            if set(sizes) != keys:
                raise UsageError(
                    f"workload {self.name!r}: preset {preset!r} binds {sorted(sizes)}, "
                    f"but preset {self.default_preset!r} binds {sorted(keys)}"
                )
            for size, value in sizes.items():
                # 0 is a legal `int` parameter (pad=0); shape sizes below 1 are refused by tl.build
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise UsageError(
                        f"workload {self.name!r}: preset {preset!r} size {size}={value!r} "
                        "is not a non-negative int"
                    )
            try:
                self.check_sizes(sizes)
            except UsageError as e:
                raise UsageError(f"workload {self.name!r}: preset {preset!r}: {e}") from None

    def check_sizes(self, sizes: dict) -> None:
        """UsageError naming the size when one of ``sizes`` is below its :attr:`size_min` (the DSL program
        itself takes any ``int`` parameter >= 0, and a stride of 0 would only fail later, as a loop range the
        compiler cannot infer).

        Example::

            >>> from tensorlang.schedules import get
            >>> get("maxpool2d").check_sizes({"stride": 2, "KH": 2})
            >>> get("maxpool2d").check_sizes({"stride": 0})
            Traceback (most recent call last):
            ...
            tensorlang.errors.UsageError: maxpool2d: size stride=0 must be >= 1
        """
        for name, least in self.size_min.items():
            value = sizes.get(name)
            if isinstance(value, int) and value < least:
                raise UsageError(f"{self.name}: size {name}={value} must be >= {least}")

    def check(self, outputs, expected, sizes: dict):
        """Compare a kernel's ``outputs`` with ``expected`` (what :attr:`reference` gave) at the tolerance of the
        outputs' dtypes and the program's reduction lengths at ``sizes``: a
        :class:`tensorlang.compare.Comparison` (NaN or infinity where the reference has a number never matches).

        Example::

            >>> import numpy as np
            >>> from tensorlang.schedules import get
            >>> w = get("softmax")
            >>> sizes = w.sizes("small")
            >>> X, = w.make_inputs(sizes, np.random.default_rng(0))
            >>> Y = w.reference(X, **sizes).astype(np.float32)
            >>> w.check(Y, w.reference(X, **sizes), sizes).ok
            True
            >>> Y[:, -1] = 0                 # the last column zeroed
            >>> w.check(Y, w.reference(X, **sizes), sizes).ok
            False
        """
        import tensorlang as tl
        from tensorlang.compare import compare
        outs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
        op = tl.op(self.source)
        lengths = tl.reference(op, **sizes).reduction_lengths
        return compare(tuple(outs), expected, tuple(np.asarray(o).dtype for o in outs),
                       tuple(lengths.get(n, 1) for n in op.outputs[:len(outs)]) or 1)

    def sizes(self, preset: str | None = None) -> dict[str, int]:
        """Return a fresh copy of the sizes of ``preset`` (the default preset when ``None``).

        Raises UsageError naming the legal presets when ``preset`` is unknown.

        Example::

            >>> from tensorlang.schedules import get
            >>> get("matmul").sizes("512")
            {'M': 512, 'N': 512, 'K': 512}
        """
        if preset is None:
            preset = self.default_preset
        try:
            return dict(self.presets[preset])
        except (KeyError, TypeError):
            legal = ", ".join(repr(p) for p in self.presets)
            raise UsageError(
                f"workload {self.name!r} has no preset {preset!r}; legal presets: {legal}"
            ) from None


def conv_output_size(size: int, kernel: int, stride: int = 1, pad: int = 0, dil: int = 1) -> int:
    """Output length of a sliding window along one axis (the PyTorch/ONNX convolution formula).

    ``(size + 2*pad - dil*(kernel - 1) - 1) // stride + 1``; may be <= 0 when the window does not fit.

    Example::

        >>> conv_output_size(56, 3, stride=2, pad=1)
        28
        >>> conv_output_size(7, 3, stride=1, pad=0, dil=2)
        3
    """
    return (size + 2 * pad - dil * (kernel - 1) - 1) // stride + 1


def register_tile_knobs(sizes: dict) -> list[Knob]:
    """The knobs of a matmul-like register tile: ``nr`` columns (vectorized), ``mr`` rows (unrolled) and ``ku`` k
    steps unrolled inside the tile, each from the divisors and powers of two of ``N``, ``M`` and ``K``.

    Example::

        >>> [(k.name, k.values) for k in register_tile_knobs({"M": 6, "N": 8, "K": 2})]
        [('nr', (4, 8)), ('mr', (1, 2, 3, 4, 6)), ('ku', (1, 2))]
    """
    M, N, K = sizes["M"], sizes["N"], sizes["K"]
    return [
        Knob("nr", tuple(v for v in factors(N, 64) if v >= 4 or v == N), "columns per register tile (vectorized)"),
        Knob("mr", factors(M, 8, extra=(6,)), "rows per register tile (unrolled)"),
        Knob("ku", factors(K, 8), "k steps unrolled inside the tile"),
    ]


def fixed_config(space: Callable, config: dict) -> Callable[[dict], dict | None]:
    """A ``hand_config`` for a workload whose hand schedule has the same knob values at every size: ``config``
    where ``space(sizes)`` has those values, else None.

    Example::

        >>> from tensorlang.space import Knob, Space
        >>> toy = lambda values: (lambda sizes: Space("toy", [Knob("v", values)], lambda s, c: None))
        >>> fixed_config(toy((8, 16)), {"v": 16})({}), fixed_config(toy((8,)), {"v": 16})({})
        ({'v': 16}, None)
    """
    def hand_config(sizes: dict) -> dict | None:
        try:
            space(sizes).validate(config)
        except ValueError:
            return None
        return dict(config)
    return hand_config
