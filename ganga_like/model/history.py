"""The event log entry of a job: when, from which status, to which, and why.

Entries are small tuples stored in the job's own record, so a master's history never loads
its subjobs'. The cause is bounded so the log stays cheap however chatty a backend is.

A long log does not stay whole in the job's record, which every change rewrites: once
``2 * CHUNK_ENTRIES`` entries gather there, the oldest move to ``HistoryChunk`` records of
``CHUNK_ENTRIES`` each, written once and linked newest first. Appending then rewrites fewer
than ``2 * CHUNK_ENTRIES`` entries, however long the log.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, NamedTuple

from persistent import Persistent
from ZODB.POSException import ConflictError

__all__ = [
    "CHUNK_ENTRIES",
    "MAX_CAUSE",
    "History",
    "HistoryChunk",
    "HistoryEntry",
    "align_moved_history",
    "make_entry",
    "spill",
]

MAX_CAUSE = 240
CHUNK_ENTRIES = 32

# One log entry: (unix time, old status label, new status label, cause).
Entry = tuple[float, str, str, str]


class HistoryEntry(NamedTuple):
    time: float
    old: str
    new: str
    cause: str

    def __str__(self) -> str:
        when = _dt.datetime.fromtimestamp(self.time).isoformat(sep=" ", timespec="seconds")
        return f"{when}  {self.old:>10} -> {self.new:<10}  {self.cause}"


class History(list[HistoryEntry]):
    """A job's event log (``j.history``): a list of entries that shows as one line per
    entry, as ``ganga log`` prints it, rather than as tuples of unix times."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "\n".join(str(entry) for entry in self) if self else "[]"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's display
        printer.text(repr(self))


def make_entry(time: float, old: str, new: str, cause: str) -> tuple[float, str, str, str]:
    """A plain tuple (cheaper to pickle than the NamedTuple) with a bounded cause."""
    if len(cause) > MAX_CAUSE:
        cause = cause[: MAX_CAUSE - 1] + "…"
    return (time, old, new, cause)


class HistoryChunk(Persistent):  # type: ignore[misc]
    """``CHUNK_ENTRIES`` consecutive older entries of a job's log, and the chunk before."""

    def __init__(self, entries: tuple[Entry, ...], previous: HistoryChunk | None) -> None:
        super().__init__()
        self.entries = entries
        self.previous = previous

    def all_entries(self) -> list[Entry]:
        """Every entry of this chunk and the ones before it, oldest first."""
        chunks: list[HistoryChunk] = []
        chunk: HistoryChunk | None = self
        while chunk is not None:  # a loop, not recursion: a log may have many chunks
            chunks.append(chunk)
            chunk = chunk.previous
        return [entry for older in reversed(chunks) for entry in older.entries]


def spill(
    tail: tuple[Entry, ...], older: HistoryChunk | None
) -> tuple[tuple[Entry, ...], HistoryChunk | None, int]:
    """(the entries left in the record, the newest chunk, how many moved) once ``tail``
    holds ``2 * CHUNK_ENTRIES`` entries or more; else ``tail`` as it is."""
    moved = 0
    while len(tail) - moved >= 2 * CHUNK_ENTRIES:
        older = HistoryChunk(tail[moved : moved + CHUNK_ENTRIES], older)
        moved += CHUNK_ENTRIES
    return tail[moved:], older, moved


_RECENT, _OLDER, _MOVED = "history", "_history_older", "_history_moved"


def align_moved_history(
    old: dict[str, Any], committed: dict[str, Any], new: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Three states of a job for conflict resolution, the old one and the side that did
    not move entries into chunks shown as if it had moved the same ones, so that the log
    merges as any append-only tuple: both sides' new entries, after the old ones. A side
    that moved entries the other never saw (its own new ones), or both sides moving, is a
    conflict (retried)."""
    moved = [state.get(_MOVED, 0) for state in (old, committed, new)]
    if moved[1] == moved[0] == moved[2]:
        return old, committed, new
    both = moved[1] != moved[0] and moved[2] != moved[0]
    if both and moved[1] != moved[2]:
        raise ConflictError("both sides moved different parts of a job's event log")
    mover = committed if moved[1] != moved[0] else new
    count = mover.get(_MOVED, 0) - moved[0]
    before: tuple[Any, ...] = old.get(_RECENT, ())
    if count > len(before):
        raise ConflictError("a job's event log moved into chunks with entries of its own")
    if both:
        # The same old entries, each side into a chunk of its own: the committed side's
        # chunk stays (ours is left unreferenced).
        return as_shown(old, count, committed), committed, {**new, _OLDER: committed[_OLDER]}

    old = as_shown(old, count, mover)
    if mover is committed:
        return old, committed, as_shown(new, count, mover)
    return old, as_shown(committed, count, mover), new


def as_shown(state: dict[str, Any], count: int, mover: dict[str, Any]) -> dict[str, Any]:
    """``state`` as if its first ``count`` recent entries had moved as ``mover``'s did."""
    shown = dict(state)
    shown[_RECENT] = state.get(_RECENT, ())[count:]
    shown[_OLDER], shown[_MOVED] = mover.get(_OLDER), mover.get(_MOVED)
    return shown
