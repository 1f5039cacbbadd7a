"""Whole-program checks after parsing: outputs, unused inputs and stages, and ranges that can be inferred.

Run by the parser; each failure is a `DSLError` pointing at the text.
"""
from __future__ import annotations

from .program import Access, BoundaryIndex, GatherIndex, IntValue, Op, affine_indices, index_vars_of, walk


def check_program(op: Op, output_locs: dict, error, int_param_locs: dict | None = None) -> Op:
    """Check `op` as a whole and return it; `error(message, loc)` builds the DSLError to raise.

    >>> import tensorlang as tl
    >>> tl.op("def f(A: f32[N], B: f32[N]) -> C:\\n    C[i] = A[i]")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    DSLError: line 1, column 18: input `B` is never used
    """
    stage_names = {s.name for s in op.stages}
    for out in op.outputs:
        if out not in stage_names:
            raise error(f"output `{out}` is not computed by any statement "
                        f"(stages: {', '.join(s.name for s in op.stages)})", output_locs[out])
    read = {t for s in op.stages for t in s.reads() if t != s.name}  # a scan's read of itself is no use
    for p in op.params:
        if p.name not in read:
            raise error(f"input `{p.name}` is never used", p.loc)
    for s in op.stages:
        if s.name not in read and s.name not in op.outputs:
            raise error(f"stage `{s.name}` is computed but never used: read it in another statement or "
                        f"return it with `-> ({', '.join(op.outputs + (s.name,))})`", s.loc)
    used_sizes = _sizes_used(op)
    for name in op.int_params:
        if name not in used_sizes:
            raise error(f"size input `{name}` is never used", (int_param_locs or {}).get(name))
    for s in op.stages:
        _check_inferable(op, s, error)
        _check_exact_ranges(op, s, error)
    return op


def _sizes_used(op: Op) -> set[str]:
    used: set[str] = set()
    for s in op.stages:
        for w in s.where.values():
            used |= w.lo.symbols() | w.hi.symbols()
        for node in (n for e in s.values() for n in walk(e)):
            exprs = affine_indices(node) if isinstance(node, Access) else \
                (node.expr,) if isinstance(node, IntValue) else ()
            for e in exprs:
                used |= e.const.symbols()
                for _, c in e.terms:
                    used |= c.symbols()
    return used


def _check_inferable(op: Op, s, error) -> None:
    """Every index must get a range: from `where`, or by being the only unknown in an affine dimension of a read."""
    known = set(s.where)
    # a scan's reads of itself bound nothing: its shape comes from its other reads
    dims = [ix.variables() for a in s.accesses() if a.tensor != s.name for ix in affine_indices(a)]
    changed = True
    while changed:
        changed = False
        for vs in dims:
            unknown = [v for v in vs if v not in known]
            if len(unknown) == 1:
                known.add(unknown[0])
                changed = True
    in_reads = {v for vs in dims for v in vs}
    for v in s.all_vars:
        if v in known:
            continue
        gathered = {u for a in s.accesses() for ix in a.indices if isinstance(ix, GatherIndex)
                    for u in index_vars_of(ix.value)}
        boundary = {u for a in s.accesses() for ix in a.indices if isinstance(ix, BoundaryIndex)
                    for u in ix.variables()}
        if v not in in_reads and v in gathered:
            why = "it is used only in an index computed from a tensor read, which does not bound it"
        elif v not in in_reads and v in boundary:
            why = "it is used only in boundary indices (clamp, min, max, abs), which do not bound it"
        elif v not in in_reads:
            why = "it is not used to read any tensor"
        else:
            why = "it is never the only unknown index of a dimension it reads"
        raise error(f"cannot infer the range of `{v}` in stage `{s.name}`: {why}; "
                    f"give it with `where {v} in LO:HI`", s.var_locs.get(v, s.loc))


def _check_exact_ranges(op: Op, s, error) -> None:
    """An index used alone as a whole dimension of two inputs must range over sizes that agree."""
    seen: dict[str, tuple] = {}
    for a in s.accesses():
        p = op.param(a.tensor)
        if p is None:
            continue
        for d, ix in enumerate(a.indices):
            v = ix.is_plain_var()
            if v is None or v in s.where:
                continue
            extent = p.shape[d]
            if v in seen and seen[v][0] != extent:
                prev_extent, prev_tensor, prev_dim = seen[v]
                raise error(f"index `{v}` ranges over 0:{extent} in {a.tensor} (dimension {d}) but over "
                            f"0:{prev_extent} in {prev_tensor} (dimension {prev_dim}); the sizes must agree, "
                            f"or give the range with `where {v} in LO:HI`", a.index_locs[d])
            seen.setdefault(v, (extent, a.tensor, d))
