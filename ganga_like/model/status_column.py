"""Every subjob's status, per master, in a few compact records.

A subjob is its own record: reading 100,000 statuses by loading each costs 2.9 s and
242 MiB. So a master also keeps its subjobs' status labels in chunks of ``CHUNK``
positions (a subjob's id is its position), each chunk a small persistent record that
:meth:`ganga_like.model.job.Job.change_status` updates in the same transaction as the
subjob. Reading a status from here loads one chunk per ``CHUNK`` subjobs and no subjob.

Two sessions changing different subjobs of one chunk at once do not conflict: a chunk
merges the two changes position by position; only the same position changed two ways is
a conflict (and the subjob record itself conflicts then too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from persistent import Persistent
from ZODB.POSException import ConflictError

__all__ = [
    "CHUNK",
    "StatusChunk",
    "all_statuses",
    "build_chunks",
    "extend_chunks",
    "set_status",
    "status_of",
]

# Small enough that a commit changing a few subjobs rewrites little (about 2.5 kB per
# chunk), large enough that 1,000,000 subjobs take fewer than 1,000 records.
CHUNK = 1024


class StatusChunk(Persistent):  # type: ignore[misc]
    """The status labels of ``CHUNK`` consecutive subjobs."""

    def __init__(self, labels: list[str]) -> None:
        super().__init__()
        self.labels = labels

    def set(self, position: int, label: str) -> None:
        labels: list[str] = self.labels
        if labels[position] != label:
            labels[position] = label
            self._p_changed = True

    def _p_resolveConflict(
        self, old: dict[str, Any], committed: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        o, c, n = old["labels"], committed["labels"], new["labels"]
        if not len(o) == len(c) == len(n):
            raise ConflictError("subjob status chunk resized concurrently")
        merged = list(c)
        for position, (before, theirs, ours) in enumerate(zip(o, c, n, strict=True)):
            if ours != before:
                if theirs != before and theirs != ours:
                    raise ConflictError("the same subjob's status changed in two ways")
                merged[position] = ours
        return {**committed, "labels": merged}


def build_chunks(labels: Sequence[str]) -> tuple[StatusChunk, ...]:
    return tuple(
        StatusChunk(list(labels[start : start + CHUNK])) for start in range(0, len(labels), CHUNK)
    )


def extend_chunks(
    chunks: tuple[StatusChunk, ...], first: int, labels: Sequence[str]
) -> tuple[StatusChunk, ...] | None:
    """The chunks with subjobs ``first``, ``first + 1``, ... appended (a resplit adds
    subjobs after the last); None when ``first`` does not follow the last position (the
    chunks can no longer stand for every subjob, and the subjobs are read instead)."""
    total = sum(len(chunk.labels) for chunk in chunks)
    if first != total:
        return None
    remaining = list(labels)
    if chunks and len(chunks[-1].labels) < CHUNK:
        last = chunks[-1]
        room = CHUNK - len(last.labels)
        last.labels = [*last.labels, *remaining[:room]]  # a new list: the record is rewritten
        remaining = remaining[room:]
    return (*chunks, *build_chunks(remaining))


def status_of(chunks: tuple[StatusChunk, ...], index: int) -> str | None:
    chunk, position = divmod(index, CHUNK)
    if 0 <= chunk < len(chunks):
        labels = chunks[chunk].labels
        if position < len(labels):
            label: str = labels[position]
            return label
    return None


def set_status(chunks: tuple[StatusChunk, ...], index: int, label: str) -> None:
    chunk, position = divmod(index, CHUNK)
    if 0 <= chunk < len(chunks) and position < len(chunks[chunk].labels):
        chunks[chunk].set(position, label)


def all_statuses(chunks: tuple[StatusChunk, ...]) -> list[str]:
    result: list[str] = []
    for chunk in chunks:
        result.extend(chunk.labels)
    return result
