"""Static memory planning: every intermediate value gets an offset in one arena, allocated once per model call.

1. **Aliases.** A view node (view, reshape, squeeze, clone, ...) outside a fused node costs nothing: its output
   is its input's buffer (every value is dense and row-major). A chain of views shares one *root* buffer.
2. **Where a root lives.** A graph input in the caller's array, a constant in the model's array, a graph output
   in the array the call returns (the kernel writes there directly), anything else in the arena.
3. **Liveness.** A root in the arena lives from the step that writes it to the last step that reads it or any of
   its views.
4. **In place.** A node whose kernel only computes elementwise (the same index of every same-shaped operand) may
   write its output over an operand of the same size that dies at this node, so both share one interval.
5. **Offsets.** Greedy by size (as TFLite's arena planner): the largest buffers first, each at the lowest
   64-byte-aligned offset where it overlaps no buffer alive at the same time.

The plan reports the arena's bytes against one buffer per intermediate value.

>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("chain")
>>> x = g.add_input("x", TensorType((256,), "f32"))
>>> a = g.add_node("exp", [x], {}, [TensorType((256,), "f32")]).outputs[0]
>>> b = g.add_node("neg", [a], {}, [TensorType((256,), "f32")]).outputs[0]
>>> c = g.add_node("abs", [b], {}, [TensorType((256,), "f32")]).outputs[0]
>>> g.outputs = [c]
>>> plan = plan_memory(g)
>>> plan.arena_bytes, plan.value_bytes, len(plan.inplace)
(1024, 2048, 1)
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import ops
from ..ir import Graph, Node, Value

ALIGN = 64


@dataclass(frozen=True)
class Location:
    """Where a value's bytes are: kind "arena", "input", "output" or "const"; `index` the input's, output's or
    constant's position (0 for the arena); `offset` in bytes."""

    kind: str
    index: int
    offset: int


@dataclass
class MemoryPlan:
    """Every value's `Location` (by value uid), the arena's size, the bytes one buffer per intermediate would take,
    the (node, operand, output) names computed in place, and each arena buffer's (name, first step, last step,
    offset, bytes)."""

    locations: dict[int, Location]
    arena_bytes: int
    value_bytes: int
    inplace: list[tuple[str, str, str]] = field(default_factory=list)
    buffers: list[tuple[str, int, int, int, int]] = field(default_factory=list)
    copies: list[int] = field(default_factory=list)  # output positions the call copies (inputs, constants, twins)

    def describe(self) -> str:
        """One line: the arena against one buffer per value.

        >>> MemoryPlan({}, 1024, 4096).describe()
        'arena 1.0 KiB for intermediates of 4.0 KiB (0.25x), 0 in place'
        """
        ratio = self.arena_bytes / self.value_bytes if self.value_bytes else 0.0
        return (f"arena {_kib(self.arena_bytes)} for intermediates of {_kib(self.value_bytes)} ({ratio:.2f}x), "
                f"{len(self.inplace)} in place")


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n < 2**20 else f"{n / 2**20:.1f} MiB"


def is_alias(node: Node) -> bool:
    """Whether a top-level node is a view: its output shares its input's buffer.

    >>> from tensorlang.graph.ir import Node
    >>> is_alias(Node("view", [], {}, [])), is_alias(Node("relu", [], {}, []))
    (True, False)
    """
    opdef = ops.REGISTRY.get(node.op)
    return node.body is None and opdef is not None and opdef.kind == "view"


def elementwise_only(node: Node) -> bool:
    """Whether every op the node computes (itself, or its fused body's) is elementwise or a view: then each output
    element reads only the same element of a same-shaped operand, and may overwrite it.

    >>> from tensorlang.graph.ir import Node
    >>> elementwise_only(Node("relu", [], {}, [])), elementwise_only(Node("mm", [], {}, []))
    (True, False)
    """
    nodes = node.body.nodes if node.body is not None else [node]
    return all(ops.REGISTRY.get(n.op) is not None and ops.REGISTRY[n.op].kind in ("elementwise", "view")
               for n in nodes)


def plan_memory(graph: Graph, inplace: bool = True) -> MemoryPlan:
    """Plan where every value of `graph` lives (see the module's docstring).

    `inplace=False` gives every node's output a buffer of its own.

    Example::

        plan = plan_memory(model.graph)
        plan.describe()      # 'arena 3.8 MiB for intermediates of 10.2 MiB (0.37x), 0 in place'
    """
    root: dict[int, Value] = {}
    for v in graph.inputs + graph.constants:
        root[v.uid] = v
    for n in graph.nodes:
        for v in n.outputs:
            root[v.uid] = root[n.inputs[0].uid] if is_alias(n) else v
    locations: dict[int, Location] = {}
    for k, v in enumerate(graph.inputs):
        locations[v.uid] = Location("input", k, 0)
    for k, v in enumerate(graph.constants):
        locations[v.uid] = Location("const", k, 0)
    copies: list[int] = []
    claimed: set[int] = set()
    for k, v in enumerate(graph.outputs):
        r = root.get(v.uid, v)
        if r.uid in locations or r.uid in claimed or v.type.nbytes != r.type.nbytes:
            copies.append(k)
            continue
        claimed.add(r.uid)
        locations[r.uid] = Location("output", k, 0)
    end = len(graph.nodes)
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for t, n in enumerate(graph.nodes):
        for v in n.inputs:
            if v is not None:
                last[root[v.uid].uid] = t
        if not is_alias(n):
            for v in n.outputs:
                first.setdefault(v.uid, t)
                last.setdefault(v.uid, t)
    for v in graph.outputs:
        last[root[v.uid].uid] = end
    # arena roots, merged into shared slots where computed in place
    used = {v.uid for n in graph.nodes for v in n.inputs if v is not None} | {v.uid for v in graph.outputs}
    slot_of: dict[int, int] = {}
    slots: list[dict] = []
    done_inplace: list[tuple[str, str, str]] = []
    value_bytes = 0
    for t, n in enumerate(graph.nodes):
        if is_alias(n):
            continue
        for v in n.outputs:
            if v.uid in locations or v.type.nbytes == 0 or v.uid not in used:
                continue
            value_bytes += v.type.nbytes
            target = None
            if inplace and elementwise_only(n):
                for u in n.inputs:
                    if u is None:
                        continue
                    ru = root[u.uid]
                    s = slot_of.get(ru.uid)
                    if (s is not None and last.get(ru.uid) == t and u.shape == v.shape and ru.type.nbytes ==
                            v.type.nbytes and slots[s]["end"] <= t and not slots[s].get("taken_at") == t):
                        target = s
                        done_inplace.append((n.name, u.name, v.name))
                        break
            if target is None:
                slots.append({"bytes": _aligned(v.type.nbytes), "start": first[v.uid], "end": last[v.uid],
                              "names": [v.name]})
                slot_of[v.uid] = len(slots) - 1
            else:
                slot = slots[target]
                slot["end"] = max(slot["end"], last[v.uid])
                slot["taken_at"] = t
                slot["names"].append(v.name)
                slot_of[v.uid] = target
    offsets = _place(slots)
    buffers = []
    for uid, s in slot_of.items():
        locations[uid] = Location("arena", 0, offsets[s])
    for slot, off in zip(slots, offsets):
        buffers.append(("/".join(slot["names"]), slot["start"], slot["end"], off, slot["bytes"]))
    for n in graph.nodes:
        if is_alias(n):
            for v in n.outputs:
                locations[v.uid] = locations.get(root[v.uid].uid, Location("arena", 0, 0))
    arena = max((off + s["bytes"] for s, off in zip(slots, offsets)), default=0)
    return MemoryPlan(locations, arena, value_bytes, done_inplace, buffers, copies)


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _place(slots: list[dict]) -> list[int]:
    """Offsets for the slots: largest first, each at the lowest offset free during its whole interval."""
    order = sorted(range(len(slots)), key=lambda i: (-slots[i]["bytes"], slots[i]["start"]))
    offsets = [0] * len(slots)
    placed: list[int] = []
    for i in order:
        s = slots[i]
        busy = sorted((offsets[j], offsets[j] + slots[j]["bytes"]) for j in placed
                      if slots[j]["start"] <= s["end"] and s["start"] <= slots[j]["end"])
        at = 0
        for lo, hi in busy:
            if at + s["bytes"] <= lo:
                break
            at = max(at, hi)
        offsets[i] = at
        placed.append(i)
    return offsets
