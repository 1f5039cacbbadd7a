"""Pass variants of a model: the pass options (`tensorlang.graph.pass_options`) that model tuning measures end to
end, and where the chosen one is kept so that every later compile of the model uses it.

The layout pass's block (or no layout change) and whether a reduction takes in its elementwise producer are
choices the passes cannot settle alone: their worth depends on the kernels each gives. ``candidate_variants``
runs the passes under each combination on a copy of the imported graph and keeps the distinct results (a block
no convolution chain divides by gives the same graph as no layout pass, and is measured once);
``measure_variants`` compiles each with zero-trial schedules (the auto-scheduler's picks: every variant on equal
terms), compares its outputs with the reference (torch eager's, :func:`compare_outputs`: a variant that differs is
an error, never timed nor chosen) and times the others in alternating rounds; the fastest is stored in the tuning
database's ``model_variants`` table (one row per variant measured, ``chosen`` = 1 on the winner), keyed by the
imported graph's key (:func:`tensorlang.graph.pass_options.graph_key`), the target CPU and the thread count.
``tuned_pass_options`` is the pass option source (entry point ``tensorlang.pass_options``: ``tuned``) through which
``compile_graph``, and so ``tl.from_torch``, ``tl.from_exported`` and ``tensorlang compile``, find it.

Example::

    variants = candidate_variants(model.source_graph)      # [(options, optimised graph), ...]
    timed = measure_variants(variants, inputs, reference)   # [{"options", "median_s", "error", ...}, ...]
    store_choice(db, model, threads, timed)
    tuned_pass_options(model.graph_key, threads=2)          # the winner's options, for compile_graph
"""
from __future__ import annotations

import json
import os
import statistics
import threading
import time

import numpy as np

from tensorlang.errors import TensorlangError, UsageError
from tensorlang.target import host_target
from tensorlang.tuner.bench import max_rel_error, reference_mismatch

_TABLE = """
CREATE TABLE IF NOT EXISTS model_variants (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    graph_key TEXT NOT NULL,    -- tensorlang.graph.pass_options.graph_key of the imported graph
    model     TEXT NOT NULL,    -- the model's name, for people reading the file
    target    TEXT NOT NULL,    -- JSON object: triple, cpu, features
    threads   INTEGER NOT NULL,
    batch     INTEGER NOT NULL, -- the variants of one comparison share a batch number
    options   TEXT NOT NULL,    -- JSON object: the pass options
    times     TEXT NOT NULL,    -- JSON array: seconds per model run, one per round (empty when it failed)
    median_s  REAL,
    error     TEXT,             -- why it was not timed: it failed, or its outputs differ from the reference
    chosen    INTEGER NOT NULL, -- 1 for the variant compiles use
    created   REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS model_variants_key ON model_variants (graph_key, threads)
"""

#: layout blocks tried (0: no layout pass); the fusion choice is tried both ways
LAYOUT_CHOICES = (None, 0, 4, 8, 16)
FUSION_CHOICES = (True, False)

#: a model's outputs match the reference when every output is within TOLERANCE x max(1, max |reference output|)
#: of it (f32: the reference models differ from torch eager by at most 5e-7 of that; summing in another order
#: moves the last bits, a wrong result moves the leading ones)
TOLERANCE = 1e-4

_cache: dict = {}
_lock = threading.Lock()


class OutputMismatch(TensorlangError):
    """A compiled model whose outputs differ from the reference (torch eager's) by more than the tolerance."""


def flat_outputs(x) -> list[np.ndarray]:
    """The arrays of a model's outputs, in order: torch tensors (as numpy arrays) and numpy arrays in nested tuples,
    lists and dicts.

    >>> [a.shape for a in flat_outputs((np.zeros(2), [np.ones((1, 3))]))]
    [(2,), (1, 3)]
    """
    if isinstance(x, (list, tuple)):
        return [a for y in x for a in flat_outputs(y)]
    if isinstance(x, dict):
        return [a for y in x.values() for a in flat_outputs(y)]
    if hasattr(x, "detach"):
        return [x.detach().numpy()]
    return [np.asarray(x)]


def compare_outputs(got, reference, tolerance: float = TOLERANCE) -> tuple[float, str]:
    """Compare a model's outputs with the reference's (anything :func:`flat_outputs` takes): ``(error, why)``, the
    largest ``|difference| / max(1, max |reference|)`` of any output (:func:`tensorlang.tuner.bench.max_rel_error`: a
    NaN or an infinity where the reference has a number is an infinite error) and "" when it is within `tolerance`, else
    what differs, naming the output.

    >>> compare_outputs([np.ones(2), np.array([1.0, np.nan])], [np.ones(2), np.array([1.0, 2.0])])
    (inf, 'output 1: 1 NaN where the reference has a number (first at index (1,))')
    >>> compare_outputs([np.ones(2), np.full(2, 1.5)], [np.ones(2), np.ones(2)])
    (0.5, 'output 1: largest |difference| 5.0e-01 x max(1, max |reference|), tolerance 1e-04')
    """
    got, reference = tuple(flat_outputs(got)), tuple(flat_outputs(reference))
    error = max_rel_error(got, reference)
    if error <= tolerance:
        return error, ""
    why = reference_mismatch(got, reference)  # a count, a shape, a NaN or an infinity
    if not why:
        errors = [max_rel_error(g, r) for g, r in zip(got, reference)]
        i = int(np.argmax(errors))
        why = f"output {i}: largest |difference| {errors[i]:.1e} x max(1, max |reference|), tolerance {tolerance:.0e}"
    return error, why


def target_json() -> str:
    """This CPU as the tuning records describe it (triple, CPU name, features), as JSON text.

    >>> sorted(json.loads(target_json()))
    ['cpu', 'features', 'triple']
    """
    t = host_target()
    return json.dumps({"triple": t.triple, "cpu": t.cpu, "features": t.features}, sort_keys=True)


def candidate_variants(snapshot) -> list[tuple[dict, object]]:
    """The distinct pass variants of an imported graph (`snapshot`: the JSON and constants that ``compile_graph``
    keeps as ``model.source_graph``): ``[(pass options, the optimised graph), ...]``, the default options first;
    combinations whose optimised graphs are identical count once (the first).

    Example::

        for options, graph in candidate_variants(model.source_graph):
            print(describe_pass_options(options), len(graph.nodes))
    """
    from tensorlang.graph.pass_options import graph_key
    from tensorlang.graph.passes import run_pipeline, select
    from tensorlang.graph.serialize import graph_from_json
    data, constants = snapshot
    out, seen = [], set()
    for block in LAYOUT_CHOICES:
        for fuse in FUSION_CHOICES:
            options = {} if block is None else {"layout_block": block}
            if not fuse:
                options["fuse_reductions"] = False
            graph = graph_from_json(data, constants)
            run_pipeline(graph, select((), options), print_passes=False)
            key = graph_key(graph)
            if key not in seen:
                seen.add(key)
                out.append((options, graph))
    return out


def time_alternating(contenders: list[tuple[str, object]], rounds: int = 5, min_time: float = 0.1) -> dict:
    """Median seconds per call of each ``(name, fn)`` over ``rounds`` rounds, each round calling every contender
    for at least ``min_time`` seconds in turn (so that a slow spell of the machine hits them all); a contender
    that raises gets its error text instead.

    >>> out = time_alternating([("noop", lambda: None)], rounds=2, min_time=0.001)
    >>> out["noop"]["median_s"] >= 0, len(out["noop"]["times"])
    (True, 2)
    """
    times: dict[str, list] = {name: [] for name, _ in contenders}
    errors: dict[str, str] = {}
    for _ in range(rounds):
        for name, fn in contenders:
            if name in errors:
                continue
            try:
                fn()
                calls, t0 = 0, time.perf_counter()
                while True:
                    fn()
                    calls += 1
                    if time.perf_counter() - t0 >= min_time:
                        break
                times[name].append((time.perf_counter() - t0) / calls)
            except Exception as e:  # a contender that fails (torch.compile at run time, say) is reported, not fatal
                errors[name] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
    return {name: {"median_s": statistics.median(times[name]) if times[name] else None, "times": times[name],
                   "error": errors.get(name)} for name, _ in contenders}


def measure_variants(variants: list[tuple[dict, object]], inputs: list, reference: list, rounds: int = 5,
                     min_time: float = 0.1, compile_model=None) -> list[dict]:
    """Compile each variant's optimised graph (``compile_model(graph)``, default ``tl.Model(graph)``: the caller
    chooses which schedules its kernels get), run it on `inputs` and compare its outputs with `reference` (torch
    eager's outputs on `inputs`, :func:`compare_outputs`), then time those that match end to end in alternating
    rounds; returns ``[{"options", "median_s", "times", "error", "max_rel_error", "model"}, ...]`` in the order
    given. A variant whose outputs differ gets the difference as its error ("wrong result: output 0: ...") and no
    time, so it is never chosen.

    Example::

        timed = measure_variants(candidate_variants(model.source_graph), inputs, flat_outputs(net(*args)))
    """
    from tensorlang.graph.model import Model
    compile_model = compile_model or Model
    compiled, out = [], []
    for options, graph in variants:
        entry = {"options": options, "median_s": None, "times": [], "error": None, "max_rel_error": None,
                 "model": None}
        try:
            entry["model"] = compile_model(graph)
            entry["max_rel_error"], why = compare_outputs(entry["model"].run_flat(inputs), reference)
            if why:
                entry["error"] = f"wrong result: {why}"
            else:
                compiled.append((len(out), entry["model"]))
        except (TensorlangError, MemoryError) as e:
            entry["error"] = f"{type(e).__name__}: {e}"
        out.append(entry)
    timed = time_alternating([(str(i), (lambda m=m: m.run_flat(inputs))) for i, m in compiled], rounds, min_time)
    for i, _ in compiled:
        t = timed[str(i)]
        out[i].update(median_s=t["median_s"], times=t["times"], error=t["error"])
    return out


def _connection(db):
    conn = db._db()  # the tuning database's own connection (same file, same transactions)
    for statement in _TABLE.split(";"):
        if statement.strip():
            conn.execute(statement)
    return conn


def store_choice(db, model_name: str, key: str, threads: int, timed: list[dict]) -> dict | None:
    """Store one comparison of variants (``measure_variants``' entries) in the database `db` (a
    :class:`tensorlang.tuner.records.database.Database`) in one transaction, the fastest of those without an error
    marked chosen; returns the chosen entry (None when none ran and matched the reference).

    Example::

        chosen = store_choice(db, "ResNet18", model.graph_key, 2, timed)
    """
    ok = [e for e in timed if e["median_s"] is not None and not e["error"]]
    best = min(ok, key=lambda e: e["median_s"]) if ok else None
    if best is None:
        return None
    db._writing()
    conn = _connection(db)
    conn.execute("BEGIN IMMEDIATE")
    try:
        (batch,) = conn.execute("SELECT COALESCE(MAX(batch), 0) + 1 FROM model_variants").fetchone()
        now, target = time.time(), target_json()
        conn.executemany(
            "INSERT INTO model_variants (graph_key, model, target, threads, batch, options, times, median_s, error, "
            "chosen, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(key, model_name, target, threads, batch, json.dumps(e["options"], sort_keys=True),
              json.dumps(list(e["times"])), e["median_s"], e["error"], int(e is best), now) for e in timed])
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return best


def stored_choice(db, key: str, threads: int) -> dict | None:
    """The latest chosen variant of the graph `key` for this CPU and `threads` in `db` (an open
    :class:`tensorlang.tuner.records.database.Database`, read-only or not): ``{"options", "median_s", "variants":
    [{"options", "median_s", "error"}, ...]}`` of its comparison, or None.

    Example::

        >>> from tensorlang.tuner.records.database import Database
        >>> stored_choice(Database(":memory:"), "0123456789abcdef", 2) is None
        True
    """
    conn = db._db()
    if "model_variants" not in db._tables(conn):
        return None
    row = conn.execute("SELECT batch FROM model_variants WHERE graph_key = ? AND threads = ? AND target = ? AND "
                       "chosen = 1 ORDER BY id DESC LIMIT 1", (key, threads, target_json())).fetchone()
    if row is None:
        return None
    rows = conn.execute("SELECT options, median_s, error, chosen FROM model_variants WHERE batch = ? ORDER BY id",
                        (row[0],)).fetchall()
    variants = [{"options": json.loads(o), "median_s": m, "error": e} for o, m, e, _ in rows]
    chosen = next(v for v, r in zip(variants, rows) if r[3])
    return {"options": chosen["options"], "median_s": chosen["median_s"], "variants": variants}


def tuned_pass_options(key: str, *, threads: int, db=None, **_) -> dict | None:
    """The pass option source "tuned" of `tensorlang.graph.pass_options`: the options model tuning chose for the
    graph `key` on this CPU at `threads`, from the database `db` (default: ``TENSORLANG_DB``, else the cache
    folder's), read-only; None when there is no such file or no choice in it. Answers are kept until the file
    (or its write-ahead log) changes.

    Example::

        >>> tuned_pass_options("0123456789abcdef", threads=1, db="/no/such/file.db") is None
        True
    """
    from tensorlang.tuner.records.database import Database, DatabaseError, default_db_path
    path = os.fspath(db) if db is not None else os.fspath(default_db_path())
    try:
        stamp = [os.stat(path).st_mtime_ns]
    except OSError:
        return None
    try:
        wal = os.stat(path + "-wal")
        stamp += [wal.st_size, wal.st_mtime_ns]
    except OSError:
        pass
    with _lock:
        hit = _cache.get((path, key, threads))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    try:
        with Database(path, read_only=True) as database:
            found = stored_choice(database, key, threads)
    except DatabaseError as e:
        raise UsageError(f"tuned pass options: {e}") from None
    options = found["options"] if found else None
    with _lock:
        _cache[(path, key, threads)] = (stamp, options)
    return options
