"""The two tables of workflows in the repository's root.

``workflow_dependents``: upstream fqid -> the ids of the jobs that wait for it (an
``IdSet`` per fqid), so that a change of a job costs a lookup of its own dependents and
of its subjobs' (one range of keys), never a scan of the repository. Entries are written
when a job starts waiting, in that transaction, and stay while the job exists (a
resubmitted upstream re-arms its skipped dependents through them); one whose job is gone
is dropped when met.

``workflow_pending``: job id -> what is still to do for it after a transaction decided it:
``CHECK`` (it started waiting: look at its condition again, in a transaction that began
after the one that recorded it, so that an upstream change committed meanwhile is not
missed), ``DECIDED`` (its condition holds: hand it to submission) or ``HANDING`` (a
driver is handing it over; one that died doing it left this), or ``STREAM`` (a streaming
map whose upstream completed pieces it has not made subjobs for, or whose subjobs are not
submitted yet: ``stream.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ganga_like.repository.trees import IdMap, IdSet, KeyMap

__all__ = [
    "CHECK",
    "DECIDED",
    "DEPENDENTS_KEY",
    "HANDING",
    "PENDING_KEY",
    "STREAM",
    "add_dependent",
    "dependents",
    "dependents_of_tree",
    "pending",
]

DEPENDENTS_KEY = "workflow_dependents"
PENDING_KEY = "workflow_pending"
CHECK = 0
DECIDED = 1
HANDING = 2
STREAM = 3


def _dependents(root: Any, create: bool = False) -> KeyMap | None:
    found: KeyMap | None = root.get(DEPENDENTS_KEY)
    if found is None and create:
        found = root[DEPENDENTS_KEY] = KeyMap()  # merges concurrent inserts
    return found


def pending(root: Any, create: bool = False) -> IdMap | None:
    found: IdMap | None = root.get(PENDING_KEY)
    if found is None and create:
        found = root[PENDING_KEY] = IdMap()
    return found


def add_dependent(root: Any, upstream: str, job_id: int) -> None:
    table = _dependents(root, create=True)
    assert table is not None
    ids = table.get(upstream)
    if ids is None:
        ids = table[upstream] = IdSet()
    ids.insert(job_id)


def dependents(root: Any, upstream: str) -> list[int]:
    """The ids of the jobs waiting for exactly ``upstream``."""
    table = _dependents(root)
    ids = table.get(upstream) if table is not None else None
    return list(ids) if ids is not None else []


def dependents_of_tree(root: Any, job_id: int) -> Iterator[tuple[str, int]]:
    """(upstream fqid, dependent id) for job ``job_id`` and each of its subjobs that some
    job waits for: one lookup and one range of keys ("12." up to "12/")."""
    table = _dependents(root)
    if table is None:
        return
    top = str(job_id)
    for dependent in table.get(top, ()):
        yield top, dependent
    for key, ids in table.items(min=f"{top}.", max=f"{top}/", excludemax=True):
        for dependent in ids:
            yield key, dependent
