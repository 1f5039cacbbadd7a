"""Handler factories for the worker tests in test_tuner.py (imported by ``tensorlang.tuner.measure.worker.Worker`` in a
fresh interpreter as ``worker_handlers:FACTORY``; the test puts this folder on ``sys.path``, which the worker gets as
``PYTHONPATH``)."""
import os
import signal
import time


def obedient(init: dict):
    """A handler that does what each request says: ``{"do": "echo" | "segfault" | "abort" | "hang" | "raise" |
    "exit", ...}``; an echo answers with the request, the worker's pid and the init dict."""

    def handle(request: dict):
        what = request.get("do", "echo")
        if what == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif what == "abort":
            os.abort()
        elif what == "hang":
            while True:
                time.sleep(1)
        elif what == "raise":
            raise ValueError("the handler refused this request")
        elif what == "exit":
            os._exit(3)
        return {"pid": os.getpid(), "request": request, "init": init}

    return handle


def broken(init: dict):
    """A factory that fails: the worker never becomes ready."""
    raise RuntimeError("this factory cannot make a handler")


def slow_start(init: dict):
    """A factory that takes far longer than any start timeout of the tests."""
    time.sleep(600)
    return lambda request: request


def ranked(init: dict):
    """A row handler (the protocol of ``tensorlang.tuner.bench.WorkerRow``) whose k-th process to start claims rank k
    (a file made exclusively in ``init["ranks"]``) and reports every call as taking ``init["speeds"][k]`` seconds;
    its output is an array holding k."""
    import numpy as np
    k = 0
    while True:
        try:
            os.close(os.open(os.path.join(init["ranks"], str(k)), os.O_CREAT | os.O_EXCL))
            break
        except FileExistsError:
            k += 1

    def handle(request: dict):
        if request.get("first"):
            np.save(os.path.join(init["folder"], "out0.npy"), np.array([k]))
            return {"outputs": 1, "version": "1", "pid": os.getpid()}
        return {"times": [init["speeds"][k]] * request["runs"]}

    return handle
