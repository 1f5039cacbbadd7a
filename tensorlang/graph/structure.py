"""How a model's flat inputs and outputs nest: tuples, lists and dicts of tensors, as plain JSON data.

A spec is ``{"kind": "leaf"}`` (a tensor), ``{"kind": "tuple" | "list", "items": [...]}``,
``{"kind": "dict", "keys": [...], "items": [...]}`` or ``{"kind": "const", "value": V}`` (a number or None that
the model was exported with, which a call must pass again). `flatten` checks a call's arguments against it and
returns the tensors in order; `unflatten` builds the nested result.

>>> spec = {"kind": "tuple", "items": [{"kind": "leaf"}, {"kind": "list", "items": [{"kind": "leaf"}] * 2}]}
>>> flatten(spec, ("a", ["b", "c"]), "input")
['a', 'b', 'c']
>>> unflatten(spec, [1, 2, 3])
(1, [2, 3])
"""
from __future__ import annotations

from ..errors import UsageError


def leaf_count(spec: dict) -> int:
    """How many tensors the spec holds.

    >>> leaf_count({"kind": "list", "items": [{"kind": "leaf"}, {"kind": "const", "value": 3}]})
    1
    """
    if spec["kind"] == "leaf":
        return 1
    return sum(leaf_count(s) for s in spec.get("items", ()))


def leaf_paths(spec: dict, prefix: str = "") -> list[str]:
    """A readable path for each leaf: ``[0]``, ``[1][2]``, ``["mask"]``.

    >>> leaf_paths({"kind": "tuple", "items": [{"kind": "leaf"}, {"kind": "dict", "keys": ["m"],
    ...                                        "items": [{"kind": "leaf"}]}]})
    ['[0]', '[1]["m"]']
    """
    kind = spec["kind"]
    if kind == "leaf":
        return [prefix or "[0]"]
    out: list[str] = []
    if kind == "dict":
        for k, s in zip(spec["keys"], spec["items"]):
            out += leaf_paths(s, f'{prefix}["{k}"]')
    elif kind in ("tuple", "list"):
        for i, s in enumerate(spec["items"]):
            out += leaf_paths(s, f"{prefix}[{i}]")
    return out


def flatten(spec: dict, obj, what: str, path: str = "") -> list:
    """The leaves of `obj` in order, checked against `spec` (UsageError naming the place that differs).

    >>> flatten({"kind": "list", "items": [{"kind": "leaf"}]}, [1, 2], "input")
    Traceback (most recent call last):
    ...
    tensorlang.errors.UsageError: input: expected a list of 1 items, got a list of 2
    """
    kind = spec["kind"]
    where = f"{what}{path}"
    if kind == "leaf":
        return [obj]
    if kind == "const":
        if obj != spec["value"]:
            raise UsageError(f"{where}: the model was exported with {spec['value']!r} here, got {obj!r}")
        return []
    if kind in ("tuple", "list"):
        if not isinstance(obj, (tuple, list)) or len(obj) != len(spec["items"]):
            got = f"a {type(obj).__name__} of {len(obj)}" if isinstance(obj, (tuple, list)) else type(obj).__name__
            raise UsageError(f"{where}: expected a {kind} of {len(spec['items'])} items, got {got}")
        out: list = []
        for i, (s, o) in enumerate(zip(spec["items"], obj)):
            out += flatten(s, o, what, f"{path}[{i}]")
        return out
    if kind == "dict":
        if not isinstance(obj, dict) or set(obj) != set(spec["keys"]):
            got = str(sorted(obj)) if isinstance(obj, dict) else type(obj).__name__
            raise UsageError(f"{where}: expected a dict with keys {spec['keys']}, got {got}")
        out = []
        for k, s in zip(spec["keys"], spec["items"]):
            out += flatten(s, obj[k], what, f'{path}["{k}"]')
        return out
    raise UsageError(f"{where}: unknown structure kind {kind!r}")


def unflatten(spec: dict, leaves: list):
    """The nested object that `spec` describes, with `leaves` in order.

    >>> unflatten({"kind": "dict", "keys": ["a"], "items": [{"kind": "leaf"}]}, [5])
    {'a': 5}
    """
    it = iter(leaves)

    def build(s):
        kind = s["kind"]
        if kind == "leaf":
            return next(it)
        if kind == "const":
            return s["value"]
        if kind == "tuple":
            return tuple(build(c) for c in s["items"])
        if kind == "list":
            return [build(c) for c in s["items"]]
        return {k: build(c) for k, c in zip(s["keys"], s["items"])}
    return build(spec)


def flat_spec(n: int, kind: str = "tuple") -> dict:
    """A spec of `n` tensors side by side.

    >>> flat_spec(2)["items"]
    [{'kind': 'leaf'}, {'kind': 'leaf'}]
    """
    return {"kind": kind, "items": [{"kind": "leaf"} for _ in range(n)]}
