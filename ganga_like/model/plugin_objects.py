"""Objects plugins keep for as long as a session lasts.

A plugin keeps nothing in module globals (state shared by every session of the process,
outliving them): what it keeps from call to call beyond a poll's cycle (the Dask
backend's client per scheduler) it asks its context for, ``ctx.kept(Kind)``, which gives
the session's one ``Kind()``, made on first use. The session closes them when it closes:
whatever has a ``close()`` method has it called.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, TypeVar

__all__ = ["PluginObjects"]

Kind = TypeVar("Kind")


class PluginObjects:
    """One object of each kind plugins ask for, made on first use (see the module)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._made: dict[type[Any], Any] = {}

    def of(self, kind: type[Kind]) -> Kind:
        with self._lock:
            made = self._made.get(kind)
            if made is None:
                made = self._made[kind] = kind()
        assert isinstance(made, kind)
        return made

    def close(self) -> None:
        """Close what was made, the latest first; one that fails to close does not keep
        the others open."""
        with self._lock:
            made = list(self._made.values())
            self._made.clear()
        for thing in reversed(made):
            close = getattr(thing, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
