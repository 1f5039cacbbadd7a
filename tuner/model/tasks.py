"""The tuning tasks of a model: its kernels, deduplicated, weighted by how often each runs, with their share of time.

Each kernel call of a `tl.Model` runs a fused node's program, written with its shapes as numbers. Two calls whose
programs are the same (up to comments and spacing) at the same sizes, for the same CPU and thread count, are one tuning
task (:class:`tensorlang.tuner.task.Task`, keyed by :func:`tensorlang.tuner.task.task_key`): tuning it once makes both
faster. A task's *weight* is its number of calls in one run of the model, so the model's latency is about ``sum(weight x
task time)``, the sum model tuning minimises.

Example::

    tasks = model_tasks(tl.from_torch(net, (x,)))
    for t in tasks:
        print(t.name, t.weight, t.flops, t.schedule_source)
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tensorlang.tuner.task import Task


@dataclass
class ModelTask:
    """One tuning task of a model: the :class:`Task`, its weight (kernel calls per model run), the FLOPs of one
    call (counted from its program, as its tuning records count them), the indices of its calls in
    ``model.steps``, the schedule source its kernels have now ("auto", "tuned", ...) and, after
    :func:`profile_tasks`, the seconds of one call now (the median over its calls) and of all its calls together.

    Example::

        >>> t = ModelTask(Task.from_source("def f(X: f32[8]) -> Y:\\n    Y[i] = X[i]", {}, threads=1), 2, 8.0, [0, 3],
        ...               "auto")
        >>> t.name, t.weight, t.kind
        ('f', 2, 'f')
    """

    task: Task
    weight: int
    flops: float
    steps: list = field(default_factory=list)
    schedule_source: str = "auto"
    seconds_now: float | None = None
    seconds_calls: float | None = None

    @property
    def name(self) -> str:
        """The program's name (its kind and a hash of its text, as the graph compiler names it)."""
        return self.task.workload

    @property
    def kind(self) -> str:
        """The program's kind without its hash (``convolution_blocked_relu``): tasks of one kind are similar."""
        head, _, tail = self.name.rpartition("_")
        return head if head and len(tail) == 10 and all(c in "0123456789abcdef" for c in tail) else self.name

    @property
    def key(self) -> str:
        """The task's key in the tuning database."""
        return self.task.key


def model_tasks(model, threads: int | None = None) -> list[ModelTask]:
    """The distinct tuning tasks of `model`'s kernels, in the order of their first call; each task's weight is how
    many calls share it. `threads` (default: ``TENSORLANG_NUM_THREADS`` or all CPUs) is part of the task: a
    schedule is tuned for a thread count.

    Example::

        >>> import numpy as np
        >>> from tensorlang.graph import compile_graph
        >>> from tensorlang.graph.ir import Graph, TensorType
        >>> g = Graph("m")
        >>> x = g.add_input("x", TensorType((64,), "f32"))
        >>> a = g.add_node("exp", [x], {}, [TensorType((64,), "f32")]).outputs[0]
        >>> b = g.add_node("sum.default", [a], {}, [TensorType((), "f32")]).outputs[0]
        >>> g.outputs = [b]
        >>> [(t.weight, t.flops) for t in model_tasks(compile_graph(g), threads=1)]
        [(1, 128.0)]
    """
    out: dict[str, ModelTask] = {}
    by_text: dict[str, str] = {}
    for i, step in enumerate(model.steps):
        text = step.program.text
        key = by_text.get(text)
        if key is None:
            task = Task.from_source(text, {}, threads=threads)
            key = by_text[text] = task.key
            if key not in out:
                out[key] = ModelTask(task, 0, task.flops, [], step.kernel.schedule_source)
        t = out[key]
        t.weight += 1
        t.steps.append(i)
    return list(out.values())


def random_model_inputs(model, seed: int = 0) -> list[np.ndarray]:
    """Random arrays for the model's flat inputs (standard normal floats, small integers, booleans), as
    ``tensorlang show-model --profile`` times it.

    Example::

        inputs = random_model_inputs(model)
        model.run_flat(inputs)
    """
    return random_graph_inputs(model.graph, seed)


def random_graph_inputs(graph, seed: int = 0) -> list[np.ndarray]:
    """Random arrays for a graph's inputs (see :func:`random_model_inputs`).

    >>> from tensorlang.graph.ir import Graph, TensorType
    >>> g = Graph("m"); _ = g.add_input("x", TensorType((2, 3), "f32")); _ = g.add_input("n", TensorType((2,), "i32"))
    >>> [(a.dtype.name, a.shape) for a in random_graph_inputs(g)]
    [('float32', (2, 3)), ('int32', (2,))]
    """
    rng = np.random.default_rng(seed)
    out = []
    for v in graph.inputs:
        dt = v.type.numpy_dtype
        if np.issubdtype(dt, np.floating):
            out.append(rng.standard_normal(v.shape).astype(dt))
        elif dt == np.bool_:
            out.append(rng.integers(0, 2, v.shape).astype(dt))
        else:
            out.append(rng.integers(0, 8, v.shape).astype(dt))
    return out


def profile_tasks(model, tasks: list[ModelTask], inputs: list | None = None, repeat: int = 5) -> float:
    """Time every kernel call of `model` (a profile run, `repeat` runs, median per call) and set each task's
    ``seconds_now`` (the median over its calls) and ``seconds_calls`` (the sum over its calls); returns the model's
    total (the sum over all calls).

    Example::

        total = profile_tasks(model, tasks)
        shares = {t.name: t.weight * t.seconds_now / total for t in tasks}
    """
    times = model.profile_flat(inputs if inputs is not None else random_model_inputs(model), repeat=repeat)
    for t in tasks:
        t.seconds_now = float(np.median([times[i] for i in t.steps]))
        t.seconds_calls = float(sum(times[i] for i in t.steps))
    return float(sum(times))


def tasks_table(rows: list[dict]) -> str:
    """The table ``tensorlang tasks`` prints, from :func:`task_rows` rows.

    Example::

        >>> print(tasks_table([{"index": 0, "name": "f_0123456789", "weight": 2, "mflop": 1.5,
        ...     "schedule_source": "auto", "ms_now": 0.25, "share": 0.5, "trials": 0, "best_ms": None}]))
        #  task          calls  MFLOP  schedule  ms now (each)  share  trials  tuned best ms
        0  f_0123456789  2      1.50   auto      0.250          50.0%  0       -
    """
    head = ("#", "task", "calls", "MFLOP", "schedule", "ms now (each)", "share", "trials", "tuned best ms")
    table = [head]
    for r in rows:
        table.append((str(r["index"]), r["name"], str(r["weight"]), f"{r['mflop']:.2f}", r["schedule_source"],
                      "-" if r.get("ms_now") is None else f"{r['ms_now']:.3f}",
                      "-" if r.get("share") is None else f"{100 * r['share']:.1f}%", str(r.get("trials", 0)),
                      "-" if r.get("best_ms") is None else f"{r['best_ms']:.3f}"))
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table)


def task_rows(tasks: list[ModelTask], total_s: float | None, db=None) -> list[dict]:
    """One JSON-able row per task (``tensorlang tasks --json``): index, name, kind, task key, weight, MFLOP of one
    call, schedule source, ms of one call now, share of the model's time (its calls' time over ``total_s``, after
    :func:`profile_tasks`), and with a database ``db`` the trials recorded and the best record's ms.

    Example::

        rows = task_rows(tasks, profile_tasks(model, tasks), Database())
    """
    rows = []
    for i, t in enumerate(tasks):
        row = {"index": i, "name": t.name, "kind": t.kind, "task_key": t.key, "weight": t.weight,
               "mflop": t.flops / 1e6, "schedule_source": t.schedule_source,
               "ms_now": None if t.seconds_now is None else t.seconds_now * 1e3,
               # its calls' own time: identical calls at different places of the model can take different times
               "share": t.seconds_calls / total_s if t.seconds_calls is not None and total_s else None,
               "trials": 0, "best_ms": None}
        if db is not None:
            row["trials"] = db.count(t.key)
            best = db.best(t.key)  # the record tl.build compiles; its time from its re-timing when one is in force
            row["best_ms"] = db.retimed(t.key).get(best.config_key(), best.median_s) * 1e3 if best else None
        rows.append(row)
    return rows
