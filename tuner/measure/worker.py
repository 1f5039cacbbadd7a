"""Isolated worker processes: a request goes over a pipe, and a crash or a hang of the worker is an error
of that kind for that request, never a crash of the tuner. A dead or killed worker is restarted on the
next request.

Example::

    >>> w = Worker("tensorlang.tuner.measure.worker:echo_handler", {})
    >>> w.call({"x": 1}, timeout=30)
    {'x': 1}
    >>> w.close()
"""
from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection


class WorkerCrash(Exception):
    """The worker process died while it handled the request (a segfault, an abort, out of memory)."""


class WorkerTimeout(Exception):
    """The worker did not answer within the timeout; it was killed."""


def echo_handler(init: dict):
    """A handler factory for tests: returns a handler that answers each request with itself (``init`` is
    ignored).

    Example::

        >>> echo_handler({})({"x": 1})
        {'x': 1}
    """
    return lambda request: request


def _child_main(fd: int, handler_path: str, init_json: str) -> None:
    """The worker process's main loop (started by :class:`Worker` as ``python -c``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the tuner's to handle; it stops workers itself
    conn = Connection(fd)
    module, name = handler_path.split(":")
    handler = getattr(importlib.import_module(module), name)(json.loads(init_json))
    conn.send({"ready": True})
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        conn.send(handler(request))


def describe_exit(code: int | None) -> str:
    """Say how a process ended, from its exit code (negative: killed by that signal).

    Example::

        >>> describe_exit(-11)
        'killed by signal SIGSEGV'
    """
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"


class Worker:
    """One process that runs ``handler_path`` (``"module:factory"``; ``factory(init)`` returns the handler)."""

    def __init__(self, handler_path: str, init: dict, start_timeout: float = 120.0, env: dict | None = None):
        self.handler_path = handler_path
        self.init = init
        self.env = dict(env or {})  # set in the process's environment before anything is imported there
        self.start_timeout = start_timeout
        self._proc = None
        self._conn = None
        self._started = False
        self.restarts = 0  # processes started after the first (after a crash, a timeout or close)

    def _start(self) -> None:
        # a fresh interpreter (not fork: no threads or LLVM state inherited), which imports only the handler
        parent, child = socket.socketpair()
        self._stderr = tempfile.TemporaryFile()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p), **self.env}
        code = ("import sys; from tensorlang.tuner.measure.worker import _child_main; "
                "_child_main(int(sys.argv[1]), sys.argv[2], sys.argv[3])")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", code, str(child.fileno()), self.handler_path, json.dumps(self.init)],
            pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
            env=env)
        child.close()
        self._conn = Connection(parent.detach())
        if not self._conn.poll(self.start_timeout):
            self.kill()
            raise WorkerTimeout(f"the worker did not start within {self.start_timeout:g} s")
        try:
            self._conn.recv()
        except EOFError:
            code = self._wait_exit()
            tail = self.stderr_tail()
            self._drop()
            raise WorkerCrash(f"the worker failed to start ({describe_exit(code)}){tail}") from None

    def stderr_tail(self, lines: int = 5) -> str:
        """The last lines the worker wrote to stderr (with a leading newline), or ''."""
        if getattr(self, "_stderr", None) is None:
            return ""
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace").strip().splitlines()[-lines:]
        return ("\n" + "\n".join(text)) if text else ""

    def _wait_exit(self) -> int | None:
        try:
            return self._proc.wait(5)
        except subprocess.TimeoutExpired:
            return None

    @property
    def alive(self) -> bool:
        """Whether the process is running."""
        return self._proc is not None and self._proc.poll() is None

    def ensure_started(self) -> None:
        """Start the process now if it is not running (so that its start-up is not counted in a timeout)."""
        if not self.alive:
            if self._proc is not None:
                self._drop()
            # count every start after the first: a crash or a timeout has already dropped the process (_proc None)
            if self._started:
                self.restarts += 1
            self._started = True
            self._start()

    def call(self, request, timeout: float):
        """Send ``request`` and return the answer; WorkerCrash or WorkerTimeout (the worker is then gone)."""
        self.ensure_started()
        try:
            self._conn.send(request)
        except (BrokenPipeError, OSError):
            raise self._crashed() from None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise WorkerTimeout(f"no answer within {timeout:g} s")
            try:
                if self._conn.poll(min(left, 0.5)):
                    return self._conn.recv()
            except (EOFError, OSError):
                raise self._crashed() from None
            if self._proc.poll() is not None:
                raise self._crashed()

    def _crashed(self) -> WorkerCrash:
        code = self._wait_exit()
        tail = self.stderr_tail(3) if code is not None and code > 0 else ""  # a Python error: say which
        self._drop()
        return WorkerCrash(describe_exit(code) + tail)

    def kill(self) -> None:
        """Kill the process at once (SIGKILL)."""
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
            self._wait_exit()
        self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None
        if getattr(self, "_stderr", None) is not None:
            self._stderr.close()
            self._stderr = None

    def close(self) -> None:
        """Ask the process to exit, and kill it if it does not within a second."""
        if self.alive:
            try:
                self._conn.send(None)
            except OSError:
                pass
            try:
                self._proc.wait(1)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
