"""Distributed tuning on a Dask cluster: candidates are built and measured on the workers of a Dask ``distributed``
scheduler, and the tuner's process keeps the database and commits each result as it arrives.

A :class:`DaskRunner` stands in for :class:`tensorlang.tuner.measure.local.LocalRunner` (the same ``measure``,
``retime``, ``measure_schedule``, ``close`` and ``phase_s``), and adds ``submit`` / ``wait``, so that the tuner proposes
the next round while the last one is measured. A :class:`Cluster` is the connection: several runners (tasks) share it,
and :func:`measure_many` measures several tasks at once, each on the workers that match its target.

What runs where:

- The tuner sends only references to the functions of :mod:`tensorlang.tuner.measure.cluster_worker` and JSON text (the
  task as ``dataclasses.asdict``, its seed, the measure options, a config); workers answer JSON text.
- Each candidate is two Dask tasks: a build (``schedule`` + compile in the worker's isolated builder processes;
  it holds one unit of the worker's target resource, i.e. one core) and a run (output check and timing in the
  worker's isolated runner process; it holds ``measure=1`` and as many target units as the task has threads),
  so a worker measures one candidate at a time while its other cores build.
- Every worker advertises its target (:class:`tensorlang.tuner.measure.cluster_worker.TargetPlugin`): a resource named
  after its triple, CPU and features. A task's tasks ask for the resource of the task's own target, so they run only on
  matching workers; a cluster with none is a :class:`ClusterError` naming both.

Faults: a worker that dies mid-candidate: Dask runs the candidate again on another worker; when the scheduler's
``distributed.scheduler.allowed-failures`` (default 3) more workers died with it, it is recorded with error kind
``lost``. A worker that started a build or a run and has not answered within that step's time limit plus
``margin`` seconds, or whose heartbeats stopped for ``margin`` seconds, counts as hung: its candidates go to the
other workers (no more are sent to it; one the scheduler gives it later, having sent it before it was suspected, is
taken back within seconds) and after ``max_tries`` such moves a candidate is ``lost``. A scheduler that cannot be
reached, dies or stops answering is a :class:`ClusterError` within ``timeout`` seconds; every result committed before
it stays in the database.

Example::

    from tensorlang.tuner.measure.cluster import Cluster, DaskRunner
    from tensorlang.tuner.task import Task
    task = Task.create("conv2d", threads=1)
    with Cluster("tcp://10.0.0.1:8786") as cluster:
        with DaskRunner(task, cluster) as runner:
            results = runner.measure([task.space.config_at(i) for i in range(8)])
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import math
import queue
import time
import uuid
from dataclasses import dataclass

from tensorlang.errors import TensorlangError
from tensorlang.tuner.measure import ADDRESS_ENV  # the variable --cluster falls back to (spelled without Dask)
from tensorlang.tuner.measure import cluster_worker as cw
from tensorlang.tuner.measure.disturbance import Disturbance
from tensorlang.tuner.measure.local import RETIME_OPTIONS, MeasureOptions, Result

__all__ = [
    "ADDRESS_ENV",
    "Batch",
    "Cluster",
    "ClusterError",
    "ClusterOptions",
    "DaskRunner",
    "WorkerInfo",
    "check_address",
    "measure_many",
]


class ClusterError(TensorlangError):
    """The Dask cluster cannot be used: a bad address, a scheduler that cannot be reached, died or stopped
    answering, no worker with the task's target, or a worker that failed in tensorlang's own code. ``resumable``
    is true when it happened while tuning ran (tuning the same way again resumes, once the cluster is back).

    Example::

        >>> try:
        ...     check_address("tcp://example.org")
        ... except ClusterError as e:
        ...     print(e)
        'tcp://example.org' is not a scheduler address like tcp://HOST:PORT or tls://HOST:PORT (the port is missing)
    """

    resumable = False


@dataclass(frozen=True)
class ClusterOptions:
    """How long the tuner waits for the cluster, and how it treats workers that do not answer.

    Attributes:
        timeout: seconds to reach the scheduler, to wait for a worker with the task's target, and to wait for an
            answer of a scheduler that went quiet.
        margin: seconds a worker may take beyond a build's or a run's own time limit before it counts as hung.
        max_tries: times a candidate is sent again after its worker hung before it is recorded as ``lost``.

    Example::

        >>> ClusterOptions(timeout=5).margin
        30.0
        >>> ClusterOptions(timeout=0)
        Traceback (most recent call last):
        ...
        tensorlang.tuner.measure.cluster.ClusterError: ClusterOptions: timeout must be a positive number of ... got 0
    """

    timeout: float = 20.0
    margin: float = 30.0
    max_tries: int = 3

    def __post_init__(self):
        for name in ("timeout", "margin"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or not math.isfinite(v):
                raise ClusterError(f"ClusterOptions: {name} must be a positive number of seconds, got {v!r}")
        if isinstance(self.max_tries, bool) or not isinstance(self.max_tries, int) or self.max_tries < 1:
            raise ClusterError(f"ClusterOptions: max_tries must be an integer >= 1, got {self.max_tries!r}")


def check_address(address) -> str:
    """The scheduler address ``address`` in Dask's form (``tcp://`` added to a bare ``HOST:PORT``); ClusterError
    saying what is wrong with it otherwise.

    Example::

        >>> check_address("10.0.0.1:8786"), check_address("tls://sched.example.org:8786")
        ('tcp://10.0.0.1:8786', 'tls://sched.example.org:8786')
        >>> check_address("http://10.0.0.1:8786")
        Traceback (most recent call last):
        ...
        tensorlang.tuner.measure.cluster.ClusterError: 'http://10.0.0.1:8786' is not a scheduler ... (protocol 'http')
    """
    if not isinstance(address, str) or not address.strip():
        raise ClusterError(f"the Dask scheduler address is empty; give tcp://HOST:PORT (got {address!r})")
    text = address.strip()
    full = text if "://" in text else "tcp://" + text
    scheme, rest = full.split("://", 1)
    host, sep, port = rest.rpartition(":")
    why = None
    if scheme not in ("tcp", "tls"):
        why = f"protocol {scheme!r}"
    elif not sep or not host or "/" in rest:
        why = "the port is missing" if not sep or not host else "it has a path"
    elif not port.isdigit() or not 0 < int(port) < 65536:
        why = f"port {port!r}"
    if why:
        raise ClusterError(f"{address!r} is not a scheduler address like tcp://HOST:PORT or tls://HOST:PORT ({why})")
    return full


@dataclass(frozen=True)
class WorkerInfo:
    """A worker of the cluster as the tuner sees it: address, name, target (``TRIPLE/CPU/HASH`` or None when it
    has not advertised one: it cannot load tensorlang), cores (its target resource) and measure slots."""

    address: str
    name: str
    target: str | None
    cores: int
    slots: int


def _connect(address: str, timeout: float):
    """A ``distributed.Client`` of the scheduler at ``address``; ClusterError when it cannot be reached."""
    try:
        from distributed import Client
    except ImportError:
        raise ClusterError("distributed tuning needs Dask: pip install 'tensorlang[cluster]'") from None
    client = Client.__new__(Client)
    try:
        client.__init__(address, timeout=timeout, set_as_default=False)
        return client
    except BaseException as e:
        # closed here and now: a client that failed half-way, left to the garbage collector, closes itself in
        # whatever thread collects it, and can block the event loop of the next client long enough to kill it
        _close_quietly(client)
        if isinstance(e, OSError):
            raise ClusterError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({e}); is `dask "
                               "scheduler` running there and its port open?") from None
        if isinstance(e, AssertionError):  # distributed's client thread did not start within its 10 s
            raise ClusterError(f"cannot connect to the Dask scheduler at {address}: the Dask client did not start "
                               "(is this machine overloaded?)") from None
        if isinstance(e, (TypeError, ValueError)) and address.startswith("tls://"):
            raise ClusterError(f"{address}: a tls:// scheduler needs Dask's TLS configuration (the CA file, this "
                               "client's certificate and key: distributed.comm.tls.* or a distributed.Security; "
                               f"see the README, Distributed tuning): {e}") from None
        if isinstance(e, (TypeError, ValueError)):
            raise ClusterError(f"cannot connect to the Dask scheduler at {address}: {e}") from None
        raise
    finally:
        del client


#: distributed's loggers that report a lost scheduler at INFO level with a traceback (``Batched Comm Closed``,
#: ``Lost connection to``): the tuner's own error says it once, with the database and the resume command
_TRACEBACK_AT_INFO = ("distributed.batched", "distributed.core")


def _quiet_info_tracebacks() -> list:
    """Raise distributed's loggers that print tracebacks at INFO to WARNING while the tuner's client lives,
    unless a user asked for DEBUG; ``[(logger, level before)]`` for :func:`_restore_levels`.

    Example::

        >>> import logging
        >>> saved = _quiet_info_tracebacks()
        >>> logging.getLogger("distributed.batched").getEffectiveLevel() >= logging.WARNING
        True
        >>> _restore_levels(saved)
    """
    import logging
    loggers = [logging.getLogger(n) for n in _TRACEBACK_AT_INFO]
    return _set_levels([lg for lg in loggers if logging.DEBUG < lg.getEffectiveLevel() < logging.WARNING
                        or lg.getEffectiveLevel() == logging.NOTSET], logging.WARNING)


def _set_levels(loggers: list, level: int) -> list:
    """Set every logger's level to `level`; ``[(logger, level before)]`` for :func:`_restore_levels`."""
    saved = [(lg, lg.level) for lg in loggers]
    for lg in loggers:
        lg.setLevel(level)
    return saved


def _restore_levels(saved: list) -> None:
    """Put back the levels :func:`_set_levels` changed."""
    for lg, level in saved:
        lg.setLevel(level)


def _close_quietly(client) -> None:
    """Close a ``distributed.Client`` without the pages of log a client whose scheduler is gone writes."""
    import logging
    saved = _set_levels([logging.getLogger(n) for n in ["distributed", *logging.root.manager.loggerDict]
                         if n == "distributed" or n.startswith("distributed.")], logging.CRITICAL)
    try:
        client.close(timeout=2)
    except Exception:  # closing a client that never connected, or whose scheduler is gone
        pass
    finally:
        _restore_levels(saved)


class Batch:
    """Configs of one runner submitted together: ``results[i]`` is the :class:`tensorlang.tuner.measure.local.Result` of
    ``configs[i]`` once it arrived (None before); ``complete`` when all have.

    Example::

        >>> b = Batch(None, [{"a": 1}], None)
        >>> b.complete, b.results
        (False, [None])
    """

    def __init__(self, runner, configs: list, on_result):
        self.runner = runner
        self.configs = list(configs)
        self.on_result = on_result
        self.results: list = [None] * len(self.configs)
        self.left = len(self.configs)

    @property
    def complete(self) -> bool:
        """Every result has arrived."""
        return self.left == 0


@dataclass
class _Candidate:
    """One config in flight: its batch and index, its job (JSON-ready), what it is (measure, retime,
    simulate), its tries after hung workers, the attempt id of its current futures and the step a worker said it
    started (phase, time, worker)."""

    batch: Batch
    index: int
    job: dict
    kind: str
    uid: str
    tries: int = 0
    attempt: str = ""
    futures: tuple = ()
    started: tuple | None = None
    built_on: str = ""
    build_done: bool = False
    finished_at: float | None = None
    done: bool = False


class Cluster:
    """The tuner's connection to a Dask scheduler: an address (``tcp://HOST:8786``, ``tls://...``) or a
    ``distributed.Client`` (which it does not close). It registers
    :class:`tensorlang.tuner.measure.cluster_worker.TargetPlugin` on the workers, listens to their progress, and waits
    for the candidates of every :class:`DaskRunner` that uses it (:meth:`wait`), committing nothing itself: each result
    goes to its batch's ``on_result`` as it arrives. ``broken`` names the workers that could not load tensorlang (they
    get no candidates) and why.

    Example::

        with Cluster("tcp://127.0.0.1:8786", ClusterOptions(timeout=5)) as cluster:
            print([(w.address, w.target, w.slots) for w in cluster.workers()])
    """

    def __init__(self, cluster, options: ClusterOptions | None = None):
        self.options = options or ClusterOptions()
        self._closed = False
        self._own = False
        self._quieted: list = []
        try:
            from distributed import Client
        except ImportError:
            raise ClusterError("distributed tuning needs Dask: pip install 'tensorlang[cluster]'") from None
        if isinstance(cluster, Client):
            self.client = cluster
            self.address = getattr(cluster.scheduler, "address", None) or str(cluster)
        elif isinstance(cluster, str):
            self.address = check_address(cluster)
            self._quieted = _quiet_info_tracebacks()
            try:
                self.client, self._own = _connect(self.address, self.options.timeout), True
            except BaseException:
                _restore_levels(self._quieted)
                raise
        else:
            raise ClusterError(f"cluster must be a scheduler address (tcp://HOST:PORT) or a distributed.Client, "
                               f"got {type(cluster).__name__}")
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._inflight: dict[str, _Candidate] = {}
        self._suspects: dict[str, str] = {}  # worker address -> why it is no longer sent candidates
        self._allowed_cache: dict = {}
        self._last_seen: dict = {}  # worker address -> its last heartbeat, in the scheduler's clock
        self._heartbeats: dict = {}  # worker address -> (that heartbeat, when this process first saw it)
        self._known: dict[str, str] = {}  # worker address -> the target it advertised when first seen
        self._seq = itertools.count()
        self._last_progress = time.monotonic()
        self._last_check = self._last_nudge = 0.0
        self._stall_s = max(5.0, self.options.timeout / 2)  # nothing moved this long: resend what waits
        try:
            self.broken = self._register()
            self.client.subscribe_topic(cw.PROGRESS_TOPIC, lambda event: self._events.put(("event", event[1])))
        except BaseException:
            self.close()
            raise

    def _register(self) -> dict[str, str]:
        """Register the target plugin on every worker (and the scheduler keeps it for the workers to come);
        ``{address: why}`` of the workers where it failed."""
        from distributed.protocol.pickle import dumps
        answers = self._sync(self.client.scheduler.register_worker_plugin, plugin=dumps(cw.TargetPlugin()),
                             name=cw.TargetPlugin.name, idempotent=False)
        return {addr: f"{a.get('exception') or a.get('text') or 'failed'}" for addr, a in (answers or {}).items()
                if isinstance(a, dict) and a.get("status") != "OK"}

    # ----------------------------------------------------------------------------------------------------------
    # the scheduler and the workers

    def _lost(self, why: str | None = None) -> ClusterError:
        if why is None:
            why = {"connecting": "it closed the connection: did it stop, or the network fail?",
                   "closed": "the connection is closed"}.get(self.client.status, f"the client is {self.client.status}")
        e = ClusterError(f"lost the Dask scheduler at {self.address}: {why}")
        e.resumable = True
        return e

    def _sync(self, fn, **kw):
        """``await fn(**kw)`` on the client's loop, or ClusterError when the scheduler is gone or does not
        answer within ``timeout``."""
        if self.client.status != "running":
            raise self._lost()
        try:
            return self.client.sync(fn, callback_timeout=self.options.timeout, **kw)
        except (OSError, TimeoutError) as e:
            why = f"{type(e).__name__} {e}".strip()
            raise self._lost(f"no answer within {self.options.timeout:g} s ({why})") from None

    def workers(self) -> list[WorkerInfo]:
        """Every worker of the cluster now, with the target it advertises (None before the plugin ran there, or
        when it cannot load tensorlang)."""
        out = []
        for addr, w in sorted(self._sync(self.client.scheduler.identity, n_workers=-1).get("workers", {}).items()):
            self._last_seen[addr] = w.get("last_seen")
            res = w.get("resources") or {}
            targets = [k for k in res if k.startswith(cw.TARGET_PREFIX)]
            target = targets[0][len(cw.TARGET_PREFIX):] if targets else None
            out.append(WorkerInfo(addr, str(w.get("name", addr)), target, int(res[targets[0]]) if targets else 0,
                                  int(res.get(cw.MEASURE, 0))))
        return out

    def matching(self, task, everyone: list[WorkerInfo] | None = None) -> list[WorkerInfo]:
        """The workers with ``task``'s target that measure (a ``measure`` slot and at least the task's threads of
        cores), those that stopped answering left out."""
        name = cw.target_name(task.target)
        return [w for w in (self.workers() if everyone is None else everyone)
                if w.target == name and w.slots >= 1 and w.cores >= task.threads and w.address not in self._suspects]

    def check(self, task) -> list[WorkerInfo]:
        """Wait up to ``timeout`` seconds for a worker that can measure ``task``; its matching workers, or
        ClusterError naming the task's target and those of the workers (at once when every worker has said
        its target and none matches)."""
        t0 = time.monotonic()
        while True:
            everyone = self.workers()
            good = self.matching(task, everyone)
            if good:
                self._known.update({w.address: w.target for w in everyone if w.target})
                return good
            waited = time.monotonic() - t0
            settled = everyone and all(w.target is not None or w.address in self.broken for w in everyone)
            if waited > self.options.timeout or (settled and waited > 1.0):
                raise ClusterError(self._no_match(task, everyone))
            time.sleep(0.2)

    def _no_match(self, task, everyone: list[WorkerInfo]) -> str:
        name = cw.target_name(task.target)
        head = f"no worker of the Dask cluster at {self.address} can measure {task.describe()} (target {name})"
        if not everyone:
            return f"{head}: the cluster has no workers; start some with: dask worker {self.address} --resources " \
                   "measure=1"
        same = [w for w in everyone if w.target == name]
        if not same:
            def say(w):
                if w.target:
                    return f"{w.address}: {w.target}"
                why = self.broken.get(w.address, "it did not advertise one: is tensorlang installed there?")
                return f"{w.address}: no target ({why})"
            listed = "; ".join(say(w) for w in everyone[:8])
            more = f" and {len(everyone) - 8} more" if len(everyone) > 8 else ""
            cpu = name.split("/")[1]
            hint = " (the same CPU name with other features: a VM that hides some, or another LLVM)" \
                if any(w.target and w.target.split("/")[1] == cpu for w in everyone) else ""
            return f"{head}: the workers' targets are {listed}{more}{hint}"
        if all(w.address in self._suspects for w in same):
            return f"{head}: every worker with that target stopped answering (" + "; ".join(
                f"{w.address}: {self._suspects[w.address]}" for w in same) + ")"
        if not any(w.slots >= 1 for w in same):
            return f"{head}: its workers have no measure slot (start them with --resources measure=1)"
        most = max(w.cores for w in same)
        return f"{head}: it runs {task.threads} threads, and its workers have at most {most} cores " \
               f"(tune with --threads {most})"

    # ----------------------------------------------------------------------------------------------------------
    # candidates

    def submit(self, runner, configs: list, on_result=None, kind: str = "measure", extra: dict | None = None) \
            -> Batch:
        """Send ``configs`` of ``runner``'s task to the workers (without waiting) and return their
        :class:`Batch`; ``on_result(result)`` is called (by :meth:`wait`) as each result arrives. ``kind``:
        ``measure``, ``retime`` or ``simulate``; ``extra`` adds fields to each job."""
        batch = Batch(runner, configs, on_result)
        field = "configs" if kind == "features" else "config"  # features: each item is a list of configs
        for i, c in enumerate(batch.configs):
            self._send(_Candidate(batch, i, {**runner.job, **(extra or {}), field: c}, kind, _uid()))
        return batch

    def _send(self, cand: _Candidate) -> None:
        runner = cand.batch.runner
        cand.attempt = f"{cand.uid}-{cand.tries}"
        cand.started, cand.built_on, cand.build_done, cand.finished_at = None, "", False, None
        text = json.dumps(dict(cand.job, id=cand.attempt, best_s=runner.best_s))
        seq = next(self._seq)
        common = dict(pure=False, workers=self._allowed(runner), allow_other_workers=False)
        res = runner.resource
        submit = self.client.submit
        if cand.kind == "measure":
            b = submit(cw.build, text, key=f"tensorlang-build-{cand.attempt}", resources={res: 1},
                       priority=-2 * seq, **common)
            r = submit(cw.run, text, b, key=f"tensorlang-run-{cand.attempt}",
                       resources={cw.MEASURE: 1, res: runner.task.threads}, priority=-2 * seq + 1, **common)
            cand.futures = (b, r)
            b.add_done_callback(lambda f, c=cand, a=cand.attempt: self._events.put(("built", (c, a, f))))
        elif cand.kind == "features":  # the tuner waits for these: before any build or run
            r = submit(cw.features, text, key=f"tensorlang-features-{cand.attempt}", resources={res: 1},
                       priority=1 << 40, **common)
            cand.futures = (r,)
        else:
            fn = cw.retime if cand.kind == "retime" else cw.simulate
            resources = {cw.MEASURE: 1} if cand.kind == "simulate" else {cw.MEASURE: 1, res: runner.task.threads}
            r = submit(fn, text, key=f"tensorlang-{cand.kind}-{cand.attempt}", resources=resources,
                       priority=-2 * seq + 1, **common)
            cand.futures = (r,)
        self._inflight[cand.uid] = cand
        attempt = cand.attempt
        r.add_done_callback(lambda f, c=cand, a=attempt: self._events.put(("done", (c, a, f))))

    def _allowed(self, runner) -> list[str] | None:
        """The workers a candidate may go to: any with the resources (None) while no worker is suspected of
        hanging, else the matching ones that are not (asked of the scheduler at most once a second)."""
        if not self._suspects:
            return None
        t, good = self._allowed_cache.get(id(runner), (0.0, None))
        if good is None or time.monotonic() - t > 1.0:
            good = [w.address for w in self.matching(runner.task)]
            self._allowed_cache[id(runner)] = (time.monotonic(), good)
        if not good:
            e = ClusterError(self._no_match(runner.task, self.workers()))
            e.resumable = True
            raise e
        return good

    def wait(self, batches: list[Batch]) -> None:
        """Wait until every batch of ``batches`` is complete, handling each result of any batch as it arrives
        (its ``on_result`` is called at once), and the faults of workers and scheduler (see the module)."""
        while not all(b.complete for b in batches):
            self._step()

    def wait_any(self, batches: list[Batch]) -> list[Batch]:
        """Wait until at least one of ``batches`` is complete (handling every result as it arrives, as
        :meth:`wait` does) and return the complete ones: a tuner of several tasks observes each task's round
        as soon as it is in, and proposes that task's next one while the others measure.

        Example::

            pending = [runner_a.submit(configs_a, commit_a), runner_b.submit(configs_b, commit_b)]
            for batch in cluster.wait_any(pending):
                pending.remove(batch)                  # observe batch.results, submit that task's next round
        """
        while True:
            done = [b for b in batches if b.complete]
            if done or not batches:
                return done
            self._step()

    def _step(self) -> None:
        try:
            items = [self._events.get(timeout=0.25)]
        except queue.Empty:
            items = []
        while True:
            try:
                items.append(self._events.get_nowait())
            except queue.Empty:
                break
        for what, data in items:
            if what == "event":
                self._on_event(data)
            elif what == "built":
                c, a, f = data
                if c.attempt == a and not c.done and f.status == "finished":
                    c.build_done = True  # its run may wait for a measure slot: no time limit runs meanwhile
                    if c.started and c.started[0] == "build":
                        c.built_on, c.started = c.started[2], None
            else:
                self._on_done(*data)
        self._watchdog()

    def _on_event(self, msg: dict) -> None:
        """A worker started a step of a candidate, or sent its answer."""
        attempt = str(msg.get("id", ""))
        cand = self._inflight.get(attempt.rsplit("-", 1)[0])
        if cand is None or cand.attempt != attempt or cand.done:
            return
        self._last_progress = time.monotonic()
        if msg.get("phase") == "answer":
            self._finish(cand, json.loads(msg["answer"]))
        elif msg.get("phase") == "build" and cand.build_done:  # the build's end came first
            cand.built_on = msg.get("worker", "")
        else:
            cand.started = (msg.get("phase"), time.monotonic(), msg.get("worker", ""))

    def _on_done(self, c: _Candidate, attempt: str, f) -> None:
        """The candidate's last future ended: its answer is on its way as an event (when it finished), or it
        failed."""
        from distributed import KilledWorker
        if c.done or c.attempt != attempt:
            return
        self._last_progress = time.monotonic()
        if f.status == "finished":
            c.finished_at = time.monotonic()  # the watchdog fetches the answer if its event does not come
        elif f.status == "error":
            exc = f.exception()
            if isinstance(exc, KilledWorker):
                self._finish(c, None, f"the Dask workers that ran it died ({exc})")
                return
            if "deserialization of the task graph" in str(exc):
                e = ClusterError(f"the Dask scheduler at {self.address} cannot load tensorlang's functions: "
                                 "install tensorlang[cluster] (this version) on its machine too")
            else:
                import traceback
                frames = traceback.extract_tb(f.traceback()) if f.traceback() else []
                where = f" (at {frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
                e = ClusterError(f"the cluster failed in tensorlang's code on {c.batch.runner.task.describe()}: "
                                 f"{type(exc).__name__}: {exc}{where}")
            e.resumable = True
            raise e
        elif f.status == "cancelled":
            if self.client.status != "running":
                raise self._lost()
            self._retry(c, "the scheduler cancelled it", count=False)

    def _fetch(self, cand: _Candidate) -> None:
        """Fetch the answer of a finished candidate whose answer event did not come (an event can be dropped):
        from its worker, within ``timeout``; the candidate is sent again when that fails."""
        try:
            text = cand.futures[-1].result(timeout=self.options.timeout)
        except Exception as e:  # a worker that held it died or froze, or the scheduler did
            if self.client.status != "running":
                raise self._lost() from None
            self._retry(cand, f"its answer could not be fetched ({type(e).__name__})", count=False)
            return
        self._finish(cand, json.loads(text))

    def _finish(self, cand: _Candidate, answer, lost: str | None = None) -> None:
        cand.done = True
        self._inflight.pop(cand.uid, None)
        cand.futures = ()
        batch = cand.batch
        result = batch.runner._result(cand, answer, lost)
        batch.results[cand.index] = result
        batch.left -= 1
        if batch.on_result is not None:
            batch.on_result(result)

    def _drop(self, cand: _Candidate) -> None:
        """Forget the candidate's current futures (cancelled on the scheduler)."""
        self._inflight.pop(cand.uid, None)
        futures, cand.futures = list(cand.futures), ()
        if futures and self.client.status == "running":
            try:
                self.client.cancel(futures, force=True)
            except Exception:  # a scheduler that is gone cancels nothing; the watchdog tells
                pass

    def _retry(self, cand: _Candidate, why: str, count: bool = True) -> None:
        """Send the candidate again (to the workers not suspected of hanging) as a new attempt, or, when
        ``count`` and it was sent to ``max_tries`` hung workers, record it as lost."""
        self._drop(cand)
        if count:
            cand.tries += 1
            if cand.tries >= self.options.max_tries:
                self._finish(cand, None, f"sent to {cand.tries} workers that did not answer (the last: {why})")
                return
        cand.uid = _uid()
        self._send(cand)

    def _watchdog(self) -> None:
        now = time.monotonic()
        if self.client.status != "running":
            raise self._lost()
        for cand in list(self._inflight.values()):
            if cand.finished_at is not None and now - cand.finished_at > 5.0 and not cand.done:
                self._fetch(cand)
            if cand.started is None or cand.done:
                continue
            phase, t0, worker = cand.started
            if now - t0 > cand.batch.runner.limit(cand, phase) + self.options.margin:
                self._hung(worker, f"its {phase} of a candidate started {now - t0:.0f} s ago and did not end")
        if not self._inflight or now - self._last_check < 2.0:
            return
        self._last_check = now
        everyone = self.workers()  # a ClusterError when the scheduler does not answer within the timeout
        alive = {w.address for w in everyone}
        for addr in alive - set(self._suspects):  # a worker whose heartbeats stopped (frozen, cut off) is hung
            seen, since = self._heartbeats.get(addr, (None, now))
            if self._last_seen.get(addr) != seen:
                self._heartbeats[addr] = (self._last_seen.get(addr), now)
            elif now - since > self.options.margin:
                self._hung(addr, f"no heartbeat for {now - since:.0f} s")
        if self._suspects.keys() & alive:
            self._reclaim([w for w in self._suspects if w in alive])
        for cand in self._inflight.values():  # a step started, or a build kept, on a worker that left: redone
            if cand.started is not None and cand.started[2] not in alive:
                cand.started = None
            if cand.built_on and cand.built_on not in alive:
                cand.built_on, cand.build_done = "", False  # Dask builds it again
        self._welcome([w for w in everyone if w.target and w.address not in self._known])
        if now - self._last_progress > self._stall_s and now - self._last_nudge > self._stall_s:
            self._last_nudge = now  # nothing moved for a while: the waiting candidates may have no worker
            self._resend_waiting(None)
        if now - self._last_progress > self.options.timeout:
            for runner in {c.batch.runner for c in self._inflight.values()}:
                if not self.matching(runner.task, everyone):
                    e = ClusterError(self._no_match(runner.task, everyone) +
                                     f"; nothing came back for {now - self._last_progress:.0f} s")
                    e.resumable = True
                    raise e

    def _reclaim(self, suspects: list[str]) -> None:
        """Send again the candidates that the scheduler has given to ``suspects`` (workers suspected of hanging that
        are still in the cluster) since they were suspected: one sent before any worker was suspected may go to any
        worker, and the scheduler still counts a frozen worker's free slots (its run, after a build elsewhere,
        would wait there for ever)."""
        try:
            queued = self._sync(self.client.scheduler.processing, workers=suspects)
        except ClusterError:
            raise
        except Exception:  # the scheduler's view is a help, not a need: the next look tries again
            return
        keys = {k for ks in (queued or {}).values() for k in ks}
        for cand in list(self._inflight.values()):
            if not cand.done and {f.key for f in cand.futures} & keys:
                self._retry(cand, "the scheduler gave it to a worker that stopped answering", count=False)

    def _welcome(self, new: list[WorkerInfo]) -> None:
        """Workers that advertised their target since the last look (started, or restarted after a death): the
        scheduler does not look again at the candidates that had no worker before their resources came (Dask
        checks waiting tasks when a worker registers, and a worker's target resource may come after that), so
        the candidates of their target that have not started anywhere are sent again, and now find them."""
        if not new:
            return
        self._known.update({w.address: w.target for w in new})
        self._resend_waiting({w.target for w in new})

    def _resend_waiting(self, targets: set | None) -> None:
        """Send again the candidates (of ``targets``; None: all) that no worker has started a step of."""
        for cand in list(self._inflight.values()):
            if cand.done or cand.started is not None or cand.built_on or cand.finished_at is not None:
                continue
            if targets is None or cw.target_name(cand.batch.runner.task.target) in targets:
                self._retry(cand, "sent again to find a worker", count=False)

    def _hung(self, worker: str, why: str) -> None:
        """Stop sending candidates to ``worker`` and send its candidates (started there, or waiting there) to
        the others."""
        self._suspects[worker] = why
        self._allowed_cache.clear()
        try:
            queued = set(self._sync(self.client.scheduler.processing, workers=[worker]).get(worker, ()))
        except ClusterError:
            raise
        except Exception:  # the scheduler's view is a help, not a need
            queued = set()
        for cand in list(self._inflight.values()):
            on_it = (cand.started is not None and cand.started[2] == worker) or cand.built_on == worker
            if not cand.done and (on_it or {f.key for f in cand.futures} & queued):
                self._retry(cand, f"{worker}: {why}")

    def cancel(self, runner) -> None:
        """Cancel every candidate of ``runner`` still in flight (they are dropped, not recorded)."""
        for c in [c for c in self._inflight.values() if c.batch.runner is runner]:
            c.done = True
            self._drop(c)

    def close(self) -> None:
        """Cancel what is in flight and close the client if this object opened it."""
        if self._closed:
            return
        self._closed = True
        for runner in {c.batch.runner for c in getattr(self, "_inflight", {}).values()}:
            self.cancel(runner)
        if self._own:
            _close_quietly(self.client)  # a client whose scheduler died says so at length; the error has said it
        _restore_levels(self._quieted)
        self._quieted = []

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _uid() -> str:
    return uuid.uuid4().hex[:12]


class DaskRunner:
    """Measures a task's candidates on a Dask cluster, with the interface of
    :class:`tensorlang.tuner.measure.local.LocalRunner` (``measure``, ``retime``, ``measure_schedule``, ``close``,
    ``phase_s``, ``best_s``), plus ``submit`` and ``wait`` (and :attr:`parallelism`) for a tuner that proposes while it
    measures.

    ``cluster`` is a scheduler address, a ``distributed.Client`` or a :class:`Cluster` (shared by several runners,
    which then measure their tasks at the same time). ``seed`` makes the inputs, on every worker alike.
    ``simulate`` (seconds) replaces every measurement by a sleep of that long and a made-up time, without a
    build (``benchmarks/cluster_scaling.py``). On creation it waits for a worker that can measure the task
    (ClusterError otherwise). ``phase_s`` holds the seconds the workers spent building and running (summed over
    workers, so more than the wall time on a cluster) and ``wait``, the tuner's seconds waiting for results.
    ``measured_by`` counts the results by the worker that ran them.
    """

    def __init__(self, task, cluster, options: MeasureOptions | None = None, seed: int = 0,
                 cluster_options: ClusterOptions | None = None, simulate: float | None = None):
        self.task = task
        self.options = options or MeasureOptions()
        self._own = not isinstance(cluster, Cluster)
        self.cluster = Cluster(cluster, cluster_options) if self._own else cluster
        try:
            self.workers = self.cluster.check(task)
        except BaseException:
            self.close()
            raise
        self.simulate = simulate
        self.resource = cw.target_resource(task.target)
        self.job = {"task": dataclasses.asdict(task), "seed": seed, "options": dataclasses.asdict(self.options)}
        if simulate is not None:
            self.job["simulate"] = float(simulate)
        self.best_s: float | None = None
        self.phase_s = {"build": 0.0, "run": 0.0, "wait": 0.0}
        from collections import Counter
        self.measured_by: Counter = Counter()
        self._closed = False

    @property
    def parallelism(self) -> int:
        """How many candidates the matching workers measure at once (their measure slots)."""
        return max(1, sum(w.slots for w in self.workers))

    def limit(self, cand: _Candidate, phase: str) -> float:
        """Seconds a worker may take for ``phase`` of the candidate before the watchdog's margin starts."""
        o = self.options
        if cand.kind == "retime":
            n = len(cand.job.get("configs", ())) * cand.job.get("rounds", 1)
            return o.build_timeout + n * o.run_timeout
        if cand.kind == "simulate":
            return float(cand.job.get("simulate", 0.0))
        if cand.kind == "features":
            return o.build_timeout
        return o.build_timeout if phase == "build" else o.run_timeout

    def submit(self, configs: list[dict], on_result=None) -> Batch:
        """Send ``configs`` to the cluster now and return their :class:`Batch` (see :meth:`wait`).

        Example::

            batch = runner.submit(configs, on_result=commit)   # the workers start at once
            more = strategy.propose(16)                         # meanwhile
            results = runner.wait(batch)
        """
        kind = "simulate" if self.simulate is not None else "measure"
        return self.cluster.submit(self, configs, on_result, kind)

    def wait(self, batch: Batch) -> list[Result]:
        """Wait for ``batch`` (results of other batches that arrive meanwhile are handled too, their
        ``on_result`` called at once) and return its results in order."""
        t0 = time.perf_counter()
        try:
            self.cluster.wait([batch])
        finally:
            self.phase_s["wait"] += time.perf_counter() - t0
        return list(batch.results)

    def measure(self, configs: list[dict], on_result=None) -> list[Result]:
        """Measure ``configs`` on the cluster; one :class:`tensorlang.tuner.measure.local.Result` each, in order, each
        passed to ``on_result`` as soon as it arrives."""
        return self.wait(self.submit(configs, on_result))

    @property
    def spare_cores(self) -> int:
        """Cores of the matching workers that measurements leave free: where :meth:`features` computes (none
        when measurements are simulated: a simulated worker stands for a machine it is not, and the benchmark
        measures the tuner's own loop)."""
        if self.simulate is not None:
            return 0
        return sum(max(0, w.cores - w.slots * self.task.threads) for w in self.workers)

    def features(self, configs: list[dict], local) -> list:
        """The loop-IR features of ``configs`` (None where a config cannot be scheduled), for the cost model:
        computed on the workers' spare cores, in shares of at least 8 configs (a share whose worker fails is
        computed here with ``local(config)``), or all here with ``local`` when the workers have no core to spare
        (each core measures: the tuner's own process is then the better place). The same vectors either way.

        Example::

            got = runner.features(configs, lambda c: tuner.featurize(c))
        """
        import numpy as np
        n = min(self.spare_cores, -(-len(configs) // 8))
        if n < 1:
            return [local(c) for c in configs]
        shares = [configs[i::n] for i in range(n)]
        batch = self.cluster.submit(self, shares, None, "features")
        self.cluster.wait([batch])  # results of measurements that arrive meanwhile are committed meanwhile
        answers = batch.results
        out: list = [None] * len(configs)
        for i, (share, answer) in enumerate(zip(shares, answers)):
            got = answer if isinstance(answer, list) else [local(c) for c in share]
            for j, f in enumerate(got):
                out[i + j * n] = None if f is None else np.asarray(f, dtype=np.float64)
        return out

    def measure_schedule(self, schedule) -> Result:
        """Measure one ``tl.Schedule`` exactly like a candidate."""
        batch = self.cluster.submit(self, [{}], None, "measure", extra={"schedule": schedule.to_json()})
        return self.wait(batch)[0]

    def retime(self, configs: list[dict], rounds: int = 3, options: MeasureOptions | None = None) -> list[Result]:
        """Time ``configs`` again in ``rounds`` interleaved rounds, all on one worker (times of different machines are
        not compared); see :meth:`tensorlang.tuner.measure.local.LocalRunner.retime`. A retiming whose workers died
        gives results with error kind ``lost``."""
        opts = options or RETIME_OPTIONS
        extra = {"configs": [dict(c) for c in configs], "rounds": rounds,
                 "options": {**dataclasses.asdict(opts), "build_timeout": self.options.build_timeout,
                             "run_timeout": self.options.run_timeout}}
        batch = self.cluster.submit(self, [{}], None, "retime", extra=extra)
        answer = self.wait(batch)[0]
        if isinstance(answer, Result):  # lost
            return [Result(dict(c), None, (), answer.error_kind, answer.error) for c in configs]
        return answer

    def _result(self, cand: _Candidate, answer, lost: str | None):
        """The Result (a list of them for a re-timing) of a candidate's answer, or a ``lost`` one."""
        if cand.kind == "features":  # the vectors, or None: computed by the tuner instead
            return None if answer is None or "features" not in answer else answer["features"]
        if answer is None:
            return Result(dict(cand.job.get("config") or {}), None, (), "lost", lost)
        if cand.kind == "retime":
            return [self._one(a) for a in answer]
        return self._one(answer, track=True)

    def _one(self, a: dict, track: bool = False) -> Result:
        extra = {"worker": a.get("worker", ""), "built_on": a.get("built_on", "")}
        if "round_disturbances" in a:
            extra["round_disturbances"] = [Disturbance.from_json(d) for d in a["round_disturbances"]]
        r = Result(dict(a.get("config") or {}), a.get("schedule"), tuple(a.get("times") or ()),
                   a.get("error_kind"), a.get("error"), float(a.get("build_s") or 0.0), extra,
                   Disturbance.from_json(a.get("disturbance")))
        if track:
            self.phase_s["build"] += r.build_s
            self.phase_s["run"] += float(a.get("run_s") or 0.0)
            if a.get("worker"):
                self.measured_by[a["worker"]] += 1
            m = r.median_s
            if m is not None and (self.best_s is None or m < self.best_s):
                self.best_s = m
        return r

    def close(self) -> None:
        """Cancel this runner's candidates in flight; close the connection if the runner opened it."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        if not self.cluster._closed:
            self.cluster.cancel(self)
        if self._own:
            self.cluster.close()

    def __enter__(self) -> DaskRunner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def measure_many(jobs, on_result=None) -> list[list[Result]]:
    """Measure several tasks' configs at the same time: ``jobs`` is a list of ``(runner, configs)`` whose runners
    share one :class:`Cluster`; each task goes to the workers of its target, so different workers measure
    different tasks at once. ``on_result(runner, result)`` is called as each result arrives (commit it there).
    Returns each job's results, in order.

    Example::

        with Cluster("tcp://10.0.0.1:8786") as cluster:
            a, b = DaskRunner(conv_task, cluster), DaskRunner(matmul_task, cluster)
            ra, rb = measure_many([(a, conv_configs), (b, matmul_configs)],
                                  on_result=lambda runner, r: db.add(record_of(runner.task, r, "random", 0, 0)))
    """
    jobs = list(jobs)
    if not jobs:
        return []
    clusters = {id(runner.cluster) for runner, _ in jobs}
    if len(clusters) != 1:
        raise ClusterError("measure_many: the runners must share one Cluster")
    batches = []
    for runner, configs in jobs:
        cb = None if on_result is None else (lambda r, runner=runner: on_result(runner, r))
        batches.append(runner.submit(configs, cb))
    t0 = time.perf_counter()
    jobs[0][0].cluster.wait(batches)
    for runner, _ in jobs:
        runner.phase_s["wait"] += time.perf_counter() - t0
    return [list(b.results) for b in batches]
