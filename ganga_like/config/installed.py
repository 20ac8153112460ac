"""What the installed distributions declare to ganga_like: their entry points, read once.

Plugin classes (``ganga_like.plugins``) and plugin configuration sections
(``ganga_like.config``) are both found through entry points. Reading them means opening
the metadata of every installed distribution; the ``ganga`` shell needs both groups at
start-up, so one reading serves the two (each group is then a selection from it).
"""

from __future__ import annotations

import functools
import importlib.metadata
from typing import Protocol

__all__ = ["entry_points", "reset"]


class _EveryEntryPoint(Protocol):
    # ``importlib.metadata.entry_points()``: a ``SelectableGroups`` on Python 3.11, an
    # ``EntryPoints`` from 3.12; both select a group the same way.
    def select(self, *, group: str) -> importlib.metadata.EntryPoints: ...


@functools.cache
def _every_entry_point() -> _EveryEntryPoint:
    # What ``importlib.metadata.entry_points(group=...)`` selects from: the entry points
    # of every distribution (the first of a name on the path).
    return importlib.metadata.entry_points()


def entry_points(group: str) -> importlib.metadata.EntryPoints:
    """The entry points of ``group``: ``importlib.metadata.entry_points(group=group)``."""
    return _every_entry_point().select(group=group)


def reset() -> None:
    """Read the metadata again on next use (e.g. after installing a plugin at runtime)."""
    _every_entry_point.cache_clear()
