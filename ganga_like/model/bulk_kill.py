"""Subjobs killed in bulk: killed for everyone at once, their own records written later.

Killing a master of 100,000 waiting subjobs by changing each subjob's record costs a
commit of 100,000 records (24 s). Instead the kill changes what the master holds (its
status counter and status chunks) and records here which subjobs it killed, when and
why: one byte per subjob. A subjob whose own record still says it waits and whose byte
is set *is* killed: :class:`ganga_like.model.job.Job` reads its status and
event log through this record, in every session, since the master's records are what
the kill committed. The subjob's own record is brought up to date the next time it
changes (its byte is then cleared in the same transaction), e.g. when it is resubmitted.

Stored as a list of kills, each ``[when, cause, flags, count]``: byte ``i`` of ``flags``
stands for subjob ``i``; ``count`` of them are set. A byte, not a bit, per subjob: the
flags of 100,000 subjobs (100 kB) are made from their status labels in C, not in a
Python loop over them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any

from persistent import Persistent
from ZODB.POSException import ConflictError

from ganga_like.errors import JobError
from ganga_like.model.history import make_entry
from ganga_like.model.status import Status
from ganga_like.model.status_column import all_statuses

__all__ = ["KilledInBulk", "KilledInBulkView"]

# The states a kill in bulk may leave in a subjob's own record: waiting in its backend's
# queue.
_KILLABLE_IN_BULK = frozenset({Status.SUBMITTED.label})

# One kill: when, why, a byte per subjob (1: killed by it, its record not written since)
# and how many bytes are 1.
Kill = list[Any]


class KilledInBulk(Persistent):  # type: ignore[misc]
    """Which subjobs of one master were killed without their records being written."""

    def __init__(self) -> None:
        super().__init__()
        self.kills: list[Kill] = []

    def add(self, flags: bytearray, when: float, cause: str) -> None:
        """The subjobs whose byte of ``flags`` is 1 were killed at ``when`` for ``cause``."""
        count = len(flags) - flags.count(0)
        if count:
            self.kills = [*self.kills, [when, cause, flags, count]]

    def covering(self, index: int) -> tuple[float, str] | None:
        """When and why subjob ``index`` was killed in bulk; None if it was not (or its
        record has been written since)."""
        for when, cause, flags, _count in reversed(self.kills):
            if index < len(flags) and flags[index]:
                return when, cause
        return None

    def forget(self, index: int) -> None:
        """Subjob ``index``'s own record now says what happened to it."""
        for kill in self.kills:
            flags = kill[2]
            if index < len(flags) and flags[index]:
                flags[index] = 0
                kill[3] -= 1
                self._p_changed = True
        if self._p_changed:
            self.kills = [kill for kill in self.kills if kill[3]]

    def _p_resolveConflict(
        self, old: dict[str, Any], committed: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        """Two sessions that each wrote some subjobs' records (cleared their bytes) merge;
        a kill added meanwhile is retried (the master's counter conflicts then too)."""
        o, c, n = (state.get("kills", []) for state in (old, committed, new))
        if not len(o) == len(c) == len(n) or any(
            a[:2] != b[:2] or a[:2] != d[:2] for a, b, d in zip(o, c, n, strict=True)
        ):
            raise ConflictError("subjobs killed in bulk while others were brought up to date")
        merged = []
        for (when, cause, _flags, _n), theirs, ours in zip(o, c, n, strict=True):
            size = max(len(theirs[2]), len(ours[2]))
            both = int.from_bytes(theirs[2], "little") & int.from_bytes(ours[2], "little")
            flags = bytearray(both.to_bytes(size, "little"))
            count = len(flags) - flags.count(0)
            if count:
                merged.append([when, cause, flags, count])
        return {**committed, "kills": merged}


class KilledInBulkView:
    """What a job reads through a kill in bulk (mixed into ``model.job.Job``): a subjob's
    status and event log, and a master's kill of its queued subjobs."""

    # A master's subjobs killed without their own records written.
    _killed_in_bulk: KilledInBulk | None = None
    if TYPE_CHECKING:  # of the job
        _master: Any
        _counter: Any
        _status_chunks: Any
        id: int
        __dict__: dict[str, Any]

        @property
        def fqid(self) -> str: ...

        def stored(self) -> dict[str, Any]: ...

        def _keep_recent(self, recent: tuple[Any, ...]) -> None: ...

    @property
    def status(self) -> str:
        """The status label: as stored, or killed when the master's kill in bulk covers
        this subjob and its record was not written since."""
        stored: str = self.__dict__.get("status", "new")
        if stored in _KILLABLE_IN_BULK and self._bulk_kill() is not None:
            return Status.KILLED.label
        return stored

    @status.setter
    def status(self, label: str) -> None:
        self.__dict__["status"] = label

    def _bulk_kill(self) -> tuple[float, str] | None:
        """When and why a kill in bulk killed this subjob, if its record says nothing of it."""
        master = self._master
        mark: KilledInBulk | None = master._killed_in_bulk if master is not None else None
        if mark is None or self.__dict__.get("status", "new") not in _KILLABLE_IN_BULK:
            return None
        return mark.covering(self.id)

    def _write_bulk_kill(self) -> None:
        """Bring this subjob's record up to date with a kill in bulk that covers it (the
        counter and chunks already count it killed), before it changes again."""
        found = self._bulk_kill()
        if found is None:
            return
        when, cause = found
        stored = self.__dict__.get("status", "new")
        self.status = Status.KILLED.label
        self._keep_recent(
            (*self.stored().get("history", ()), make_entry(when, stored, "killed", cause))
        )
        master = self._master
        assert master is not None and master._killed_in_bulk is not None
        master._killed_in_bulk.forget(self.id)

    def kill_in_bulk(self, ids: Sequence[int], cause: str, when: float) -> None:
        """Kill this master's subjobs ``ids``, each waiting in its backend's queue, by
        changing the master's records alone: counter, chunks and the record of what was
        killed; no subjob is loaded."""
        counter, chunks = self._counter, self._status_chunks
        if not ids:
            return
        if counter is None or chunks is None:
            raise JobError(f"job {self.fqid} keeps no status chunks: kill its subjobs one by one")
        labels = all_statuses(counter.column(chunks))
        if not all(map(_KILLABLE_IN_BULK.__contains__, map(labels.__getitem__, ids))):
            unfit = next(i for i in ids if labels[i] not in _KILLABLE_IN_BULK)
            raise JobError(f"subjob {self.id}.{unfit} is {labels[unfit]}: not killable in bulk")
        queued = Status.SUBMITTED.label
        if len(ids) == labels.count(queued):
            # Every queued subjob (the usual case): flags and labels made in C.
            flags = bytearray(map({queued: 1}.get, labels, repeat(0)))
            written = list(map({queued: Status.KILLED.label}.get, labels, labels))
        else:
            flags = bytearray(len(labels))
            written = list(labels)
            for index in ids:
                flags[index] = 1
                written[index] = Status.KILLED.label
        counter.kill_in_bulk(chunks, written, {Status.SUBMITTED: len(ids)})
        mark = self._killed_in_bulk
        if mark is None:
            mark = self._killed_in_bulk = KilledInBulk()
        mark.add(flags, when, cause)
