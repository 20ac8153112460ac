"""Every subjob's status, per master, in a few compact records.

A subjob is its own record: reading 100,000 statuses by loading each costs 2.9 s and
242 MiB. So a master also keeps its subjobs' status labels in chunks of ``CHUNK``
positions (a subjob's id is its position), each chunk a small persistent record that
:meth:`ganga_like.model.job.Job.change_status` updates in the same transaction as the
subjob. Reading a status from here loads one chunk per ``CHUNK`` subjobs and no subjob.

Two sessions changing different subjobs of one chunk at once do not conflict: a chunk
merges the two changes position by position; only the same position changed two ways is
a conflict (and the subjob record itself conflicts then too).

A chunk of ``CHUNK`` labels is a few kB: rewriting it at every change of one subjob made
subjobs run one after another cost kilobytes each. So a change goes first into the
master's status counter (``model.counter``), a record every change rewrites anyway, as a
pending label by subjob id; once ``PENDING`` of them gather they are written into their
chunks at once. A reader takes the chunks with the pending labels over them
(:class:`StatusColumn`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from persistent import Persistent
from ZODB.POSException import ConflictError

from ganga_like.model.status import Status

__all__ = [
    "CHUNK",
    "CODES",
    "CODE_OF",
    "PENDING",
    "StatusChunk",
    "StatusColumn",
    "all_statuses",
    "build_chunks",
    "extend_chunks",
    "rewrite",
    "set_status",
    "status_of",
]

# Small enough that a commit changing a few subjobs rewrites little (about 2.5 kB per
# chunk), large enough that 1,000,000 subjobs take fewer than 1,000 records.
CHUNK = 1024
# Pending changes the counter holds before they are written into the chunks: a change then
# rewrites about 6 bytes per pending label, and a chunk once per PENDING changes.
PENDING = 32


# Labels as stored: one byte each, the state's place in Status (whose states are only ever
# added at the end). A chunk of 1,024 labels stores in about 1.1 kB, not 2.1 kB.
CODES = tuple(status.label for status in Status)
CODE_OF = {label: code for code, label in enumerate(CODES)}


def _encoded(labels: list[str]) -> bytes | None:
    """The labels as bytes; None if one has no code (stored as a list then)."""
    try:
        return bytes(CODE_OF[label] for label in labels)
    except KeyError:
        return None


def _labels_of(state: dict[str, Any]) -> list[str]:
    """The labels a stored state holds, as bytes (``codes``) or, as chunks were first
    stored, as a list (``labels``)."""
    codes = state.get("codes")
    if codes is None:
        return list(state["labels"])
    return [CODES[code] for code in codes]


class StatusChunk(Persistent):  # type: ignore[misc]
    """The status labels of ``CHUNK`` consecutive subjobs."""

    def __init__(self, labels: list[str]) -> None:
        super().__init__()
        self.labels = labels

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = dict(super().__getstate__())
        codes = _encoded(state["labels"])
        if codes is not None:
            del state["labels"]
            state["codes"] = codes
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        state["labels"] = _labels_of(state)
        state.pop("codes", None)
        super().__setstate__(state)

    def set(self, position: int, label: str) -> None:
        labels: list[str] = self.labels
        if labels[position] != label:
            labels[position] = label
            self._p_changed = True

    def _p_resolveConflict(
        self, old: dict[str, Any], committed: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        o, c, n = (_labels_of(state) for state in (old, committed, new))
        if not len(o) == len(c) == len(n):
            raise ConflictError("subjob status chunk resized concurrently")
        merged = list(c)
        for position, (before, theirs, ours) in enumerate(zip(o, c, n, strict=True)):
            if ours != before:
                if theirs != before and theirs != ours:
                    raise ConflictError("the same subjob's status changed in two ways")
                merged[position] = ours
        resolved = {k: v for k, v in committed.items() if k not in ("labels", "codes")}
        codes = _encoded(merged)
        if codes is None:
            return {**resolved, "labels": merged}
        return {**resolved, "codes": codes}


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
    total = _length(chunks)
    if first != total:
        return None
    remaining = list(labels)
    if chunks and len(chunks[-1].labels) < CHUNK:
        last = chunks[-1]
        room = CHUNK - len(last.labels)
        last.labels = [*last.labels, *remaining[:room]]  # a new list: the record is rewritten
        remaining = remaining[room:]
    return (*chunks, *build_chunks(remaining))


class StatusColumn(NamedTuple):
    """Every subjob's status as a reader sees it: the chunks, and the labels changed since
    they were written (by subjob id), which win."""

    chunks: tuple[StatusChunk, ...]
    pending: Mapping[int, str]


def status_of(column: StatusColumn | tuple[StatusChunk, ...], index: int) -> str | None:
    if isinstance(column, StatusColumn):
        pending = column.pending.get(index)
        return pending if pending is not None else status_of(column.chunks, index)
    chunk, position = divmod(index, CHUNK)
    if 0 <= chunk < len(column):
        labels = column[chunk].labels
        if position < len(labels):
            label: str = labels[position]
            return label
    return None


def set_status(chunks: tuple[StatusChunk, ...], index: int, label: str) -> None:
    chunk, position = divmod(index, CHUNK)
    if 0 <= chunk < len(chunks) and position < len(chunks[chunk].labels):
        chunks[chunk].set(position, label)


def rewrite(chunks: tuple[StatusChunk, ...], labels: Sequence[str]) -> None:
    """The chunks hold ``labels`` (every subjob's, in order): those that differ are
    rewritten, each at once."""
    for number, chunk in enumerate(chunks):
        written = list(labels[number * CHUNK : number * CHUNK + len(chunk.labels)])
        if written != chunk.labels:
            chunk.labels = written  # a new list: the record is rewritten


def all_statuses(column: StatusColumn | tuple[StatusChunk, ...]) -> list[str]:
    chunks, pending = column if isinstance(column, StatusColumn) else (column, {})
    result: list[str] = []
    for chunk in chunks:
        result.extend(chunk.labels)
    for index, label in pending.items():
        if index < len(result):
            result[index] = label
    return result


def _length(chunks: tuple[StatusChunk, ...]) -> int:
    return sum(len(chunk.labels) for chunk in chunks)
