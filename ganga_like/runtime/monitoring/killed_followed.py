"""Subjobs killed in bulk that the monitor still follows.

A kill in bulk (``ganga_like.runtime.submission.master_kill``) does not remove its
subjobs' entries from the active index: at 100,000 subjobs they fill thousands of the
index's records, which its transaction would write. It notes the master here instead,
and the monitor removes them before its next poll (:func:`unfollow_killed`), in a
commit of its own.
"""

from __future__ import annotations

from typing import Any

from ganga_like.repository.registry import IdSet, Registry

__all__ = ["UNFOLLOW_KEY", "to_unfollow", "unfollow_killed"]

# The root's set of masters whose subjobs killed in bulk the monitor still follows.
UNFOLLOW_KEY = "unfollow_killed"


def to_unfollow(root: Any, create: bool = False) -> IdSet | None:
    found: IdSet | None = root.get(UNFOLLOW_KEY)
    if found is None and create:
        found = root[UNFOLLOW_KEY] = IdSet()  # merges concurrent inserts
    return found


def unfollow_killed(registry: Registry) -> list[tuple[int, int]]:
    """The monitor follows no subjob killed in bulk any more: their entries of the active
    index go (each master's a range of it, in key order); the keys removed."""
    pending = to_unfollow(registry.root)
    if not pending:
        return []
    active = registry.active
    removed: list[tuple[int, int]] = []
    for master_id in list(pending):
        master = registry.jobs.get(master_id)
        mark = getattr(master, "_killed_in_bulk", None)
        if mark is not None:
            keys = list(active.keys(min=(master_id, 0), max=(master_id, 2**31 - 1)))
            for key in keys:
                if mark.covering(key[1]) is not None:
                    del active[key]
                    removed.append(key)
        pending.remove(master_id)
    return removed
