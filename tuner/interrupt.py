"""Ctrl-C for the long runs (``Tuner.run``, ``tune_model``): stop at once, and never go on tuning.

Python turns SIGINT into a KeyboardInterrupt raised wherever the main thread happens to be. Where that is inside
a finalizer, a weakref callback or a callback from C (a library's logging hook, say), Python only prints
"Exception ignored" and the interrupt is gone: the run would go on to its last trial. While :func:`ctrl_c_stops`
is in force, SIGINT also sets a flag, and :func:`check` (called between rounds) raises KeyboardInterrupt again
while it is set; so a run stops within one round of Ctrl-C whatever the first KeyboardInterrupt ran into.

Example::

    with ctrl_c_stops():
        for batch in rounds:
            check()          # raises KeyboardInterrupt if Ctrl-C came and was swallowed
            measure(batch)
"""
from __future__ import annotations

import contextlib
import functools
import signal
import threading

_pressed = threading.Event()


def _on_sigint(signum, frame) -> None:
    _pressed.set()
    raise KeyboardInterrupt


@contextlib.contextmanager
def ctrl_c_stops():
    """While the block runs, SIGINT raises KeyboardInterrupt as Python's own handler does and is remembered for
    :func:`check`. Only in the main thread and only over Python's default handler: a program that installed its
    own handler, or ignores SIGINT (started in the background by a shell), keeps it.

    Example::

        >>> with ctrl_c_stops():
        ...     check()      # no Ctrl-C: nothing happens
    """
    previous = None
    if (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
        previous = signal.signal(signal.SIGINT, _on_sigint)
        _pressed.clear()
    try:
        yield
    finally:
        if previous is not None:  # the outermost block only: a nested one keeps the outer's Ctrl-C
            signal.signal(signal.SIGINT, previous)
            _pressed.clear()


def check() -> None:
    """Raise KeyboardInterrupt if Ctrl-C came while :func:`ctrl_c_stops` is in force (a safe point: between rounds).

    Example::

        >>> check()          # outside ctrl_c_stops, or no Ctrl-C: returns
    """
    if _pressed.is_set():
        raise KeyboardInterrupt


def stops_on_ctrl_c(fn):
    """Decorator: `fn` runs under :func:`ctrl_c_stops`.

    Example::

        @stops_on_ctrl_c
        def tune_model(model, trials): ...
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with ctrl_c_stops():
            return fn(*args, **kwargs)
    return wrapper
