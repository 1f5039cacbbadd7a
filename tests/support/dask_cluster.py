"""A real Dask cluster on loopback for the tests of distributed tuning (tests/tuner/test_cluster.py): a ``dask
scheduler`` and ``dask worker`` processes started from this interpreter (``python -m dask``), each in its own
process group (a worker's nanny and the worker die together), with their logs in a folder, and all of them
stopped at the end even when a test fails.

    with LocalDask(tmp_path) as dask_:
        address = dask_.start_scheduler()
        dask_.start_worker("a", cpu=0)
        dask_.wait_for_workers(1)
"""
from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalDask:
    """Scheduler and workers as subprocesses; ``close()`` (or the end of ``with``) kills every one of them."""

    def __init__(self, folder, tls: list[str] | None = None, security=None):
        self.tls = list(tls or ())  # --tls-ca-file, --tls-cert, --tls-key for every process (tls:// then)
        self.security = security  # the distributed.Security this process's own clients use
        self.folder = pathlib.Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen] = {}
        self.address: str | None = None
        self.port: int | None = None

    def _env(self, extra: dict | None) -> dict:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        env.update(extra or {})
        return env

    def _start(self, name: str, args: list, env: dict | None = None, cpu: int | None = None) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "ab")
        cpus = None
        if cpu is not None and hasattr(os, "sched_setaffinity"):
            cpus = {cpu % (os.cpu_count() or 1)}
        proc = subprocess.Popen([sys.executable, "-m", "dask", *args], cwd=ROOT, env=self._env(env),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)
        log.close()
        self.procs[name] = proc
        return proc

    def start_scheduler(self, env: dict | None = None, port: int | None = None) -> str:
        """Start the scheduler on loopback (on ``port``, else a free one) and return its address. A port this
        picked can be taken between the pick and the scheduler's bind (by another test's process on the same
        machine: seen once in CI as "[Errno 98] Address already in use"): then it tries up to two other ports."""
        chosen = port or self.port
        log = self.folder / "scheduler.log"
        for attempt in range(3):
            start = log.stat().st_size if log.exists() else 0
            try:
                return self._start_scheduler_on(chosen or free_port(), env)
            except RuntimeError:
                with open(log, "rb") as f:  # what this attempt wrote
                    f.seek(start)
                    taken = b"Address already in use" in f.read()
                if chosen is not None or attempt == 2 or not taken:
                    raise
        raise AssertionError("unreachable")

    def _start_scheduler_on(self, port: int, env: dict | None) -> str:
        self.port = port
        file = self.folder / "scheduler.json"
        if file.exists():
            file.unlink()
        protocol = ["--protocol", "tls", *self.tls] if self.tls else []
        self._start("scheduler", ["scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--no-dashboard",
                                  "--scheduler-file", str(file), *protocol], env)
        deadline = time.monotonic() + 60
        while True:  # the file appears before the scheduler has written it
            try:
                self.address = json.loads(file.read_text())["address"]
                return self.address
            except (OSError, ValueError, KeyError):
                pass
            if self.procs["scheduler"].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the scheduler did not start:\n{self.log('scheduler')}")
            time.sleep(0.05)

    def start_worker(self, name: str, cpu: int | None = None, env: dict | None = None, nthreads: int = 1,
                     resources: str | None = "measure=1", nanny: bool = True) -> subprocess.Popen:
        """Start ``dask worker`` called ``name`` (pinned to ``cpu`` when given) on the scheduler."""
        args = ["worker", self.address, "--name", name, "--nthreads", str(nthreads), "--no-dashboard",
                "--host", "127.0.0.1", "--local-directory", str(self.folder / f"{name}-space")]
        if resources:
            args += ["--resources", resources]
        if not nanny:
            args.append("--no-nanny")
        args += self.tls
        return self._start(f"worker-{name}", args, env, cpu)

    def wait_for_workers(self, n: int, timeout: float = 120) -> list[str]:
        """Wait until the scheduler has ``n`` workers; their names."""
        from distributed import Client
        with Client(self.address, timeout=30, set_as_default=False, security=self.security) as client:
            deadline = time.monotonic() + timeout
            while True:
                info = client.scheduler_info(n_workers=-1)["workers"]
                if len(info) >= n:
                    return sorted(str(w["name"]) for w in info.values())
                if time.monotonic() > deadline:
                    logs = "\n".join(self.log(k) for k in self.procs)
                    raise RuntimeError(f"only {len(info)} of {n} workers joined:\n{logs}")
                time.sleep(0.1)

    def worker_address(self, name: str) -> str:
        """The address of the worker called ``name``."""
        from distributed import Client
        with Client(self.address, timeout=30, set_as_default=False, security=self.security) as client:
            for addr, w in client.scheduler_info(n_workers=-1)["workers"].items():
                if str(w["name"]) == name:
                    return addr
        raise KeyError(name)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the process group of ``name`` (``scheduler`` or ``worker-NAME``)."""
        proc = self.procs[name]
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        if sig == signal.SIGKILL:
            proc.wait(30)

    def log(self, name: str, lines: int = 30) -> str:
        """The last lines of a process's log."""
        path = self.folder / f"{name}.log"
        text = path.read_text(errors="replace").splitlines()[-lines:] if path.exists() else []
        return f"--- {name}\n" + "\n".join(text)

    def close(self) -> None:
        """Kill every process (SIGKILL to each group; stopped ones included)."""
        for name in list(self.procs):
            proc = self.procs.pop(name)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self) -> LocalDask:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
