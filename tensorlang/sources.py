"""A registry of named sources: functions registered at run time, and plug-ins found through an entry point group.

``tl.build`` asks its schedule sources (``tensorlang/choice.py``) and a model's compile its pass option sources
(``tensorlang/graph/pass_options.py``) in turn; both keep their sources in a :class:`SourceRegistry`. A source
registered at run time replaces an entry point of the same name; a plug-in that cannot be loaded is a
``UsageError`` naming it.

Example::

    >>> reg = SourceRegistry("schedule source", "tensorlang.no_such_group", first=("tuned",))
    >>> reg.register("mine", lambda *a, **kw: None)
    >>> list(reg.sources())
    ['mine']
    >>> reg.unregister("mine")
"""
from __future__ import annotations

import functools
import threading

from .errors import UsageError


@functools.cache
def _entry_points(group: str) -> dict:
    from importlib.metadata import entry_points
    return {ep.name: ep for ep in entry_points(group=group)}


class SourceRegistry:
    """Named sources of one kind (`what`, for messages) from run-time registration and the entry point `group`,
    asked in the order: the names of `first` that are present, then the others by name."""

    def __init__(self, what: str, group: str, first: tuple = ()):
        self.what, self.group, self.first = what, group, tuple(first)
        self._registered: dict = {}
        self._lock = threading.Lock()

    def register(self, name: str, fn, caller: str = "register") -> None:
        """Add (or replace) the source `name`; `caller` names the public function, for the error.

        >>> SourceRegistry("source", "g").register("x", 1, "register_source")
        Traceback (most recent call last):
        ...
        tensorlang.errors.UsageError: register_source('x'): the source must be callable
        """
        if not callable(fn):
            raise UsageError(f"{caller}({name!r}): the source must be callable")
        with self._lock:
            self._registered[name] = fn

    def unregister(self, name: str) -> None:
        """Remove a source added by :meth:`register` (nothing if there is none).

        >>> SourceRegistry("source", "g").unregister("no such source")
        """
        with self._lock:
            self._registered.pop(name, None)

    def sources(self) -> dict:
        """name -> function, in the order they are asked.

        >>> SourceRegistry("source", "tensorlang.no_such_group").sources()
        {}
        """
        found = {}
        for name, ep in _entry_points(self.group).items():
            if name not in self._registered:
                try:
                    found[name] = ep.load()
                except Exception as e:  # a broken plug-in is the user's to fix, and they must hear of it
                    raise UsageError(f"{self.what} {name!r} (entry point {ep.value}) cannot be loaded: "
                                     f"{type(e).__name__}: {e}") from None
        with self._lock:
            found.update(self._registered)
        names = [n for n in self.first if n in found] + sorted(n for n in found if n not in self.first)
        return {n: found[n] for n in names}
