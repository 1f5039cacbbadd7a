"""Halide's side of the Halide suite: an app's algorithm (written in Halide's Python frontend in
:mod:`halide_apps`) scheduled by one of Halide's CPU auto-schedulers (Adams2019, Li2018, Mullapudi2016; Anderson2021
is for GPUs), JIT-compiled for this CPU, and run on numpy inputs. The auto-schedulers are plugins shipped inside the
``halide`` wheel (``halide/lib64/libautoschedule_*.so``), loaded with ``hl.load_plugin``; each is told the thread
count as its ``parallelism``, and Halide's thread pool takes ``HL_NUM_THREADS`` from the environment of the process
it starts in (the run sets it for every Halide worker).

Example::

    import numpy as np
    from suites import halide_apps
    p = next(q for q in halide_apps.PROGRAMS if q.name == "blur")
    X = np.random.default_rng(0).random((20, 24), dtype=np.float32)
    pipe = HalidePipeline(p, p.small, scheduler="Adams2019", threads=2)
    pipe.set_inputs([X]); out, = pipe()
"""
from __future__ import annotations

import glob
import os
import time

import numpy as np

#: Halide's CPU auto-schedulers, by the name ``apply_autoscheduler`` takes, and their plugin libraries.
SCHEDULERS = {"Adams2019": "autoschedule_adams2019", "Li2018": "autoschedule_li2018",
              "Mullapudi2016": "autoschedule_mullapudi2016"}
#: The row of an app's own schedule (:data:`halide_apps.HAND_SCHEDULED`), beside the auto-schedulers'.
HAND = "hand"
_loaded: set = set()


def available() -> bool:
    """Whether Halide's Python package can be imported here.

    >>> available() in (True, False)
    True
    """
    try:
        import halide  # noqa: F401
    except ImportError:
        return False
    return True


def plugin_path(hl, plugin: str) -> str:
    """The file of an auto-scheduler ``plugin`` (``"autoschedule_adams2019"``) inside the installed wheel.

    Example::

        plugin_path(hl, "autoschedule_li2018")   # .../site-packages/halide/lib64/libautoschedule_li2018.so
    """
    root = hl.install_dir()
    found = [f for pattern in (f"lib*/lib{plugin}.so", f"lib*/lib{plugin}.dylib", f"bin/{plugin}.dll")
             for f in glob.glob(os.path.join(root, pattern))]
    if not found:
        raise FileNotFoundError(f"Halide's auto-scheduler plugin lib{plugin} is not in {root}")
    return found[0]


def load_scheduler(hl, scheduler: str) -> None:
    """Load the plugin of ``scheduler`` (a key of :data:`SCHEDULERS`) once per process."""
    if scheduler not in SCHEDULERS:
        raise ValueError(f"no Halide auto-scheduler {scheduler!r}; the CPU ones: {', '.join(SCHEDULERS)}")
    if scheduler not in _loaded:
        hl.load_plugin(plugin_path(hl, SCHEDULERS[scheduler]))
        _loaded.add(scheduler)


class HalidePipeline:
    """A program's Halide algorithm at ``sizes`` (``program.halide(hl, sizes)`` gives its input parameters with the
    numpy shape each takes, its output Func and the output's numpy shape), scheduled by ``scheduler`` (None:
    Halide's default schedule, every stage inlined into the output; :data:`HAND`: the app's own schedule, for the
    apps of :data:`halide_apps.HAND_SCHEDULED`) for ``threads`` threads and JIT-compiled;
    ``schedule_s`` is how long the auto-scheduler and the compilation took. Call :meth:`set_inputs` with the numpy
    inputs, then call it for the outputs (a new buffer each call, as a user's ``realize`` allocates).
    """

    def __init__(self, program, sizes: dict, scheduler: str | None = None, threads: int = 1):
        import halide as hl
        self.hl = hl
        t0 = time.perf_counter()
        if scheduler == HAND:
            from .halide_apps import HAND_SCHEDULED
            if program.name not in HAND_SCHEDULED:
                raise ValueError(f"{program.name} has no hand schedule; the apps that have one: "
                                 f"{', '.join(HAND_SCHEDULED)}")
            params, out, shape = program.halide(hl, sizes, hand=True)
        else:
            params, out, shape = program.halide(hl, sizes)
        self.params = [param for param, _ in params]
        self.in_shapes = [tuple(s) for _, s in params]
        self.out_shape = tuple(shape)
        self.extent = list(reversed(self.out_shape))  # Halide's dimensions run from the innermost
        self.pipeline = hl.Pipeline(out)
        target = hl.get_jit_target_from_environment()
        if scheduler not in (None, HAND):
            load_scheduler(hl, scheduler)
            for param, shape in zip(self.params, self.in_shapes):
                param.set_estimates([(0, e) for e in reversed(shape)])
            out.set_estimates([(0, e) for e in self.extent])
            self.pipeline.apply_autoscheduler(target, hl.AutoschedulerParams(scheduler, {"parallelism": str(threads)}))
        self.pipeline.compile_jit(target)
        self.schedule_s = time.perf_counter() - t0
        self._buffers: list = []

    def set_inputs(self, arrays: list) -> None:
        """Bind the numpy ``arrays`` (the program's inputs, in its order) to the pipeline's inputs, each viewed in
        the shape Halide's algorithm takes (the same memory: a mosaic's ``[H, 2, W, 2]`` as ``[2H, 2W]``)."""
        self._buffers = [self.hl.Buffer(np.ascontiguousarray(a).reshape(s)) for a, s in zip(arrays, self.in_shapes)]
        for param, buf in zip(self.params, self._buffers):
            param.set(buf)

    def realize(self):
        """Run the pipeline once into a new output buffer (what is timed)."""
        return self.pipeline.realize(self.extent)

    def __call__(self) -> tuple:
        """The outputs as numpy arrays (copies), in the program's layout."""
        out = np.array(self.realize(), copy=True)
        if out.shape != self.out_shape:
            raise ValueError(f"Halide's output has shape {out.shape}, the program's has {self.out_shape}")
        return (out,)


def version() -> str:
    """The installed halide package's version.

    >>> isinstance(version(), str)
    True
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version
    try:
        return dist_version("halide")
    except PackageNotFoundError:
        return "not installed"


def handler(init: dict):
    """Worker factory (the tuner's ``Worker``): one app's Halide pipeline under one auto-scheduler, scheduled and
    compiled on the first request (an auto-scheduler may take minutes, longer than a worker's start-up allows).
    ``init``: ``program`` (a name of :data:`halide_apps.PROGRAMS`), ``sizes``, ``scheduler``,
    ``threads``, the ``inputs`` as ``.npy`` files and a ``folder``. ``{"first": True}`` writes the output to
    ``folder/out0.npy`` and answers its count, the version, this process's ``pid`` and ``schedule_s``;
    ``{"runs": n, "min_time": t}`` answers the times of at least n runs and t seconds.

    Example::

        Worker("suites.halide_worker:handler", {"program": "blur", "scheduler": "Li2018", ...},
               env={"HL_NUM_THREADS": "2"})
    """
    from tensorlang.timing import measure

    from .halide_apps import PROGRAMS
    program = next(p for p in PROGRAMS if p.name == init["program"])
    inputs = [np.load(f) for f in init["inputs"]]
    state: dict = {}

    def pipeline() -> HalidePipeline:
        if "pipe" not in state:
            pipe = HalidePipeline(program, init["sizes"], init["scheduler"], init["threads"])
            pipe.set_inputs(inputs)
            state["pipe"] = pipe
        return state["pipe"]

    def handle(request: dict) -> dict:
        pipe = pipeline()
        if request.get("first"):
            (out,) = pipe()
            np.save(os.path.join(init["folder"], "out0.npy"), out)
            return {"outputs": 1, "version": version(), "pid": os.getpid(), "schedule_s": pipe.schedule_s}
        return {"times": measure(pipe.realize, min_runs=request["runs"], min_time=request["min_time"])}

    return handle
