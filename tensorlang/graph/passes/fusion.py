"""Operator fusion: groups of nodes become one fused node, whose program computes them all in one kernel.

The rules, in the spirit of TVM's FuseOps (each group has at most one *master*: an anchor with data reuse, such as
convolution, matmul or pooling, or a reduction):

1. An elementwise or injective node joins the group of the node that produces its operand when that operand (and
   every view of it) is read by this node alone: a convolution's bias, batch norm, residual add and ReLU go into
   its write-back (conv + BN + ReLU, conv + add + ReLU), a GELU into its matmul's (addmm + GELU), and chains of
   elementwise ops become one.
2. A reduction takes in the group of its operand's producer when that group has no master: an elementwise
   producer is read inside the reduction (``sum(x * x)``, residual add + layer norm).
3. An anchor takes in injective producers (permute, expand, slice, select) that only it reads: a batched matmul
   reads its transposed operand through the permute instead of a copy.
4. Views between fused nodes join the group (a reshape is a change of index inside a program); elsewhere they stay
   free aliases of their input's buffer.

A merge happens only if the group's program can be written (every index affine; a reshape that would need a
division keeps the nodes apart) and no cycle appears (a node outside the group between two of its nodes).

>>> from tensorlang.graph.ir import Graph, TensorType
>>> g = Graph("m")
>>> x = g.add_input("x", TensorType((4,), "f32"))
>>> a = g.add_node("exp", [x], {}, [TensorType((4,), "f32")], name="a").outputs[0]
>>> g.outputs = [g.add_node("relu", [a], {}, [TensorType((4,), "f32")], name="b").outputs[0]]
>>> run(g)
['fused exp_relu: a (exp), b (relu)']
>>> print(g)
graph m(%x: f32[4]) -> (%exp_relu: f32[4]):
  %exp_relu: f32[4] = fused exp_relu(%x) {
      %a: f32[4] = exp(%x)
      %b: f32[4] = relu(%a)
  }
"""
from __future__ import annotations

from .. import ops
from ..affine import NotAffine
from ..ir import Graph, Node, Value
from ..lowering import lower_nodes, program_kind

MAX_GROUP = 64  # nodes per group (programs stay small enough to compile quickly)


def _kind(node: Node) -> str:
    opdef = ops.REGISTRY.get(node.op)
    return opdef.kind if opdef is not None else "opaque"


class _Groups:
    """Union of nodes into groups, with each group's master and members in execution order."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.index = {id(n): i for i, n in enumerate(graph.nodes)}
        self.group = {id(n): i for i, n in enumerate(graph.nodes)}
        self.members = {i: [n] for i, n in enumerate(graph.nodes)}
        self.users: dict[int, list[Node]] = graph.users()
        self.outputs = {v.uid for v in graph.outputs}

    def of(self, node: Node) -> int:
        return self.group[id(node)]

    def master(self, g: int) -> Node | None:
        return next((n for n in self.members[g] if _kind(n) in ("anchor", "reduce")), None)

    def readers(self, v: Value) -> list[Node | None]:
        """The non-view nodes that read `v`, looking through views (None among them: a graph output)."""
        out: list[Node | None] = []
        for u in self.users.get(v.uid, []):
            if _kind(u) == "view":
                out += self.readers(u.outputs[0]) or [None]
            else:
                out.append(u)
        if v.uid in self.outputs:
            out.append(None)
        return out

    def views_between(self, v: Value, reader: Node) -> list[Node]:
        """The view nodes on the way from `v` to `reader`."""
        chain: list[Node] = []
        for u in self.users.get(v.uid, []):
            if _kind(u) == "view":
                sub = self.views_between(u.outputs[0], reader)
                if sub or any(r is reader for r in self.users.get(u.outputs[0].uid, [])):
                    chain += [u] + sub
        return chain

    def merged_nodes(self, a: int, b: int, extra: list[Node]) -> list[Node]:
        nodes = self.members[a] + self.members[b] + [n for n in extra if self.of(n) not in (a, b)]
        seen, out = set(), []
        for n in sorted(nodes, key=lambda n: self.index[id(n)]):
            if id(n) not in seen:
                seen.add(id(n))
                out.append(n)
        return out

    def creates_cycle(self, nodes: list[Node]) -> bool:
        """Whether a node outside `nodes` reads one of them and is read (directly or not) by one of them."""
        inside = {id(n) for n in nodes}
        first = min(self.index[id(n)] for n in nodes)
        stack = [v.producer for n in nodes for v in n.inputs
                 if v is not None and v.producer is not None and id(v.producer) not in inside]
        seen: set[int] = set()
        while stack:
            p = stack.pop()
            if id(p) in seen or self.index.get(id(p), -1) < first:
                continue
            seen.add(id(p))
            for v in p.inputs:
                if v is None or v.producer is None:
                    continue
                if id(v.producer) in inside:
                    return True
                stack.append(v.producer)
        return False

    def group_outputs(self, nodes: list[Node]) -> list[Value]:
        inside = {id(n) for n in nodes}
        outs = []
        for n in nodes:
            for v in n.outputs:
                if v.uid in self.outputs or any(id(u) not in inside for u in self.users.get(v.uid, [])):
                    outs.append(v)
        return outs

    def try_merge(self, a: int, b: int, extra: list[Node]) -> bool:
        nodes = self.merged_nodes(a, b, extra)
        if len(nodes) > MAX_GROUP or self.creates_cycle(nodes):
            return False
        try:
            lower_nodes(nodes, self.group_outputs(nodes))
        except NotAffine:
            return False
        for g in {a, b} | {self.of(n) for n in extra}:
            if g != a:
                for n in self.members.pop(g, []):
                    self.group[id(n)] = a
        for n in nodes:
            self.group[id(n)] = a
        self.members[a] = nodes
        return True


def run(graph: Graph, fuse_reductions: bool = True) -> list[str]:
    """Fuse the graph's nodes by the rules above; one line per fused node made. ``fuse_reductions=False`` leaves
    rule 2 out (a reduction and its elementwise producer stay two kernels: a pass option that model tuning
    measures, see `tensorlang.graph.pass_options`).

    Example::

        fusion.run(graph)    # ['fused convolution_relu: conv (convolution), r (relu)']
    """
    gs = _Groups(graph)
    for n in graph.nodes:
        kind = _kind(n)
        if kind in ("view", "creation", "opaque"):
            continue
        if kind in ("elementwise", "injective"):
            for v in n.inputs:
                if v is None:
                    continue
                p = _producer(v)
                if p is None or _kind(p) in ("view", "opaque") or gs.of(p) == gs.of(n):
                    continue
                if any(r is not n for r in gs.readers(p.outputs[0])) or (len(p.outputs) > 1 and \
                        any(gs.readers(o) for o in p.outputs[1:])):
                    continue
                views = gs.views_between(p.outputs[0], n)
                if gs.try_merge(gs.of(p), gs.of(n), views):
                    break
        elif kind == "reduce" and fuse_reductions:
            for v in n.inputs[:1]:
                p = _producer(v) if v is not None else None
                if p is None or _kind(p) not in ("elementwise", "injective") or gs.master(gs.of(p)) is not None:
                    continue
                if any(r is not n for r in gs.readers(p.outputs[0])):
                    continue
                gs.try_merge(gs.of(n), gs.of(p), gs.views_between(p.outputs[0], n))
        elif kind == "anchor":
            for v in n.inputs:
                p = _producer(v) if v is not None else None
                if p is None or _kind(p) != "injective" or any(_kind(m) != "injective" for m in gs.members[gs.of(p)]):
                    continue
                if any(r is not n for r in gs.readers(p.outputs[0])):
                    continue
                gs.try_merge(gs.of(n), gs.of(p), gs.views_between(p.outputs[0], n))
    return _materialise(graph, gs)


def _producer(v: Value) -> Node | None:
    """The node that computes `v`, looking through views."""
    p = v.producer
    while p is not None and _kind(p) == "view":
        p = p.inputs[0].producer
    return p


def _materialise(graph: Graph, gs: _Groups) -> list[str]:
    """Replace each group of two or more nodes by a fused node holding them."""
    changes = []
    done: set[int] = set()
    new_nodes: list[Node] = []
    for n in graph.nodes:
        g = gs.of(n)
        members = gs.members.get(g, [n])
        if len(members) < 2:
            new_nodes.append(n)
            continue
        if g in done:
            continue
        done.add(g)
        fused, rename = _fuse(graph, members, gs.group_outputs(members))
        # a fused node made earlier may read what this group computes (a group's later member reads another
        # group's value: a residual add, a concatenation of branches): it reads the new node's output now, so that
        # the order below puts it after this node
        for made in new_nodes:
            made.inputs = [rename.get(v.uid, v) if v is not None else None for v in made.inputs]
        new_nodes.append(fused)
        changes.append(f"fused {fused.attrs['name']}: {', '.join(f'{m.name} ({m.op})' for m in members)}")
    graph.nodes = topological(new_nodes)
    return changes


def topological(nodes: list[Node]) -> list[Node]:
    """`nodes` in an order where each comes after the producers of its operands, as close to the given order as
    that allows (a fused node sits where its first member was, and may have to wait for an operand).

    >>> topological([])
    []
    """
    import heapq
    position = {id(n): i for i, n in enumerate(nodes)}
    producer_of = {v.uid: n for n in nodes for v in n.outputs}
    waiting = {id(n): {id(producer_of[v.uid]) for v in n.inputs if v is not None and v.uid in producer_of}
               for n in nodes}
    readers: dict[int, list[Node]] = {}
    for n in nodes:
        for p in waiting[id(n)]:
            readers.setdefault(p, []).append(n)
    ready = [(position[id(n)], id(n), n) for n in nodes if not waiting[id(n)]]
    heapq.heapify(ready)
    out = []
    while ready:
        _, _, n = heapq.heappop(ready)
        out.append(n)
        for r in readers.get(id(n), []):
            waiting[id(r)].discard(id(n))
            if not waiting[id(r)]:
                heapq.heappush(ready, (position[id(r)], id(r), r))
    if len(out) != len(nodes):
        raise AssertionError("fusion made a cycle")
    return out


def _fuse(graph: Graph, members: list[Node], outputs: list[Value]) -> tuple[Node, dict]:
    """A fused node for `members`: its body holds them, reading fresh body inputs for the values from outside; and
    {uid of a member's output: the fused node's output that replaces it}, applied to the graph's other nodes and
    outputs here (nodes not in ``graph.nodes`` are the caller's to rename)."""
    kind = program_kind(members)
    body = Graph(kind)
    inside = {v.uid for m in members for v in m.outputs}
    outer: list[Value] = []
    inner: dict[int, Value] = {}
    for m in members:
        for i, v in enumerate(m.inputs):
            if v is None or v.uid in inside:
                continue
            if v.uid not in inner:
                inner[v.uid] = Value(v.name, v.type)
                body.inputs.append(inner[v.uid])
                body._names.add(v.name)
                outer.append(v)
            m.inputs[i] = inner[v.uid]
    for m in members:
        body._names.add(m.name)
        for v in m.outputs:
            body._names.add(v.name)
    body.nodes = list(members)
    body.outputs = list(outputs)
    node = graph.make_node("fused", outer, {"name": kind}, [v.type for v in outputs], name=kind)
    rename = {old.uid: new for old, new in zip(outputs, node.outputs)}
    members_ids = {id(m) for m in members}
    for n in graph.nodes:
        if id(n) not in members_ids:
            n.inputs = [rename.get(v.uid, v) if v is not None else None for v in n.inputs]
    graph.outputs = [rename.get(v.uid, v) for v in graph.outputs]
    node.body = body
    return node, rename
