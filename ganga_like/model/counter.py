"""The per-master count of subjobs by status, from which the master's status is derived.

It is a small record of its own so the monitor and a user's resubmit can both change it at
once: conflicts are resolved by adding both sides' deltas, like ``BTrees.Length``.

Besides the counts it keeps one fact the counts cannot tell: whether the master has shown
``running`` since it last had no subjob waiting or running. A master that has started
running stays ``running`` until its last subjob ends, even while every subjob left is
waiting (one slot, subjobs run one after another): its status, its log and the status
index then change a few times per run, not twice per subjob.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from persistent import Persistent
from ZODB.POSException import ConflictError

from ganga_like.model import status_column
from ganga_like.model.compact_state import pack_state, unpack_state
from ganga_like.model.status import Status, master_status

__all__ = ["StatusCounter", "derive"]

_NONE_PENDING: Mapping[int, str] = MappingProxyType({})

# Subjobs being submitted, waiting (queued, or held by a throttle) or running: while any
# is, a master's run goes on.
_LIVE = frozenset(
    {Status.SUBMITTING, Status.SUBMITTED, Status.RUNNING, Status.COMPLETING, Status.WAITING}
)


def _live(counts: dict[Status, int]) -> bool:
    return any(status in _LIVE for status in counts)


def _shows_running(counts: dict[Status, int], started: bool) -> bool:
    """Whether ``started`` holds after a change that left ``counts``: set when the master
    shows running by its counts alone, kept while a subjob is live, dropped when none is."""
    if not _live(counts):
        return False
    return started or master_status(counts.items()) is Status.RUNNING


def derive(counts: dict[Status, int], started: bool) -> Status:
    """A master's status from its subjob counts and whether it has started running in
    its current run (the no-flap rule: it does not go back to submitted)."""
    status = master_status(counts.items())
    if status is Status.SUBMITTED and started and _live(counts):
        return Status.RUNNING
    return status


class StatusCounter(Persistent):  # type: ignore[misc]
    """Subjob counts by status label."""

    # Seconds subjobs spent running (from running to their end), summed as they finish:
    # `ganga status` shows it without loading any subjob.
    run_seconds: float = 0.0
    # True once the master has shown running since it last had no subjob live (stored
    # only while true).
    started: bool = False
    # Subjob status labels by id not yet written into the master's status chunks
    # (model.status_column); stored only while there are some.
    pending: Mapping[int, str] = _NONE_PENDING
    # How many times the pending labels were written into the chunks (a conflict tells a
    # side that wrote them from one that only added to them).
    folds: int = 0
    # How many kills in bulk changed the counts (model.bulk_kill): such a kill writes no
    # subjob record, so a concurrent change of one of its subjobs would merge here
    # unnoticed; a change of this number makes every concurrent change a conflict.
    kills: int = 0

    # Stored as a tuple of these (model.compact_state): the record every subjob change
    # rewrites carries no attribute names. Append-only.
    _state_fields = ("counts", "run_seconds", "started", "pending", "folds", "kills")

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def __getstate__(self) -> Any:
        return _stored(super().__getstate__())

    def __setstate__(self, state: Any) -> None:
        super().__setstate__(_read(state))

    def add(self, status: Status, n: int = 1) -> None:
        counts = dict(self.counts)
        counts[status.label] = counts.get(status.label, 0) + n
        if counts[status.label] == 0:
            del counts[status.label]
        self.counts = counts
        self._note_started()

    def move(self, old: Status, new: Status) -> None:
        counts = dict(self.counts)
        for label, delta in ((old.label, -1), (new.label, 1)):
            counts[label] = counts.get(label, 0) + delta
            if counts[label] == 0:
                del counts[label]
        self.counts = counts
        self._note_started()

    def _note_started(self) -> None:
        started = _shows_running(self.by_status(), self.started)
        if started != self.started:
            if started:
                self.started = True
            else:
                del self.started  # back to the class default: not stored

    def note_status(
        self, chunks: tuple[status_column.StatusChunk, ...], index: int, label: str
    ) -> None:
        """Subjob ``index`` now has status ``label``: pending, or written into ``chunks``
        with the others pending once there are ``status_column.PENDING`` of them."""
        if index not in self.pending and status_column.status_of(chunks, index) == label:
            return  # what its chunk says already
        # Kept even when back to what its chunk says: a conflict tells each side's changes
        # by the labels that differ from the old state's.
        pending = {**self.pending, index: label}
        if len(pending) < status_column.PENDING:
            self._set_pending(pending)
            return
        for subjob, written in pending.items():
            status_column.set_status(chunks, subjob, written)
        self._set_pending({})
        self.folds += 1

    def _set_pending(self, pending: dict[int, str]) -> None:
        if pending:
            self.pending = pending
        elif "pending" in self.__dict__:
            del self.pending  # none: back to the class default, not stored

    def kill_in_bulk(
        self,
        chunks: tuple[status_column.StatusChunk, ...],
        labels: Sequence[str],
        moved: Mapping[Status, int],
    ) -> None:
        """Subjobs are killed (``moved``: how many from each status): counted so, and
        ``labels`` (every subjob's, the killed ones' killed) written into ``chunks``, the
        pending labels with them."""
        counts = dict(self.counts)
        for old, n in moved.items():
            counts[old.label] = counts.get(old.label, 0) - n
            if not counts[old.label]:
                del counts[old.label]
            counts[Status.KILLED.label] = counts.get(Status.KILLED.label, 0) + n
        self.counts = counts
        self._note_started()
        status_column.rewrite(chunks, labels)
        self._set_pending({})
        self.folds += 1
        self.kills += 1

    def column(self, chunks: tuple[status_column.StatusChunk, ...]) -> status_column.StatusColumn:
        """The master's subjob statuses as a reader sees them (``chunks`` and the pending
        labels over them)."""
        return status_column.StatusColumn(chunks, self.pending)

    def get(self, status: Status) -> int:
        return self.counts.get(status.label, 0)

    def total(self) -> int:
        return sum(self.counts.values())

    def by_status(self) -> dict[Status, int]:
        return {Status.parse(label): n for label, n in self.counts.items() if n}

    def derived_status(self) -> Status:
        return derive(self.by_status(), self.started)

    def _p_resolveConflict(self, old: Any, committed: Any, new: Any) -> Any:
        packed = any(isinstance(state, tuple) for state in (old, committed, new))
        merged = _merge(*(_read(state) for state in (old, committed, new)))
        return _stored(merged) if packed else merged


_FIELDS = StatusCounter._state_fields


def _stored(state: Mapping[str, Any]) -> tuple[Any, ...]:
    """The state as stored: a tuple of its fields (no attribute names), the counts a
    tuple by status code, the pending labels as codes (model.status_column)."""
    stored = dict(state)
    counts = stored.get("counts")
    if counts:
        by_code = [0] * len(status_column.CODES)
        for label, n in counts.items():
            by_code[status_column.CODE_OF[label]] = n
        while by_code and not by_code[-1]:
            by_code.pop()
        stored["counts"] = tuple(by_code)
    pending = stored.get("pending")
    if pending:
        stored["pending"] = {i: status_column.CODE_OF[label] for i, label in pending.items()}
    return pack_state(stored, _FIELDS)


def _read(stored: Any) -> dict[str, Any]:
    """The attribute dict of a stored state: as :func:`_stored` wrote it, or as counters
    were written before (a dict of attributes, counts and pending by label)."""
    state = unpack_state(stored, _FIELDS)
    counts = state.get("counts")
    if isinstance(counts, tuple):
        state["counts"] = {status_column.CODES[code]: n for code, n in enumerate(counts) if n}
    pending = state.get("pending")
    if pending and isinstance(next(iter(pending.values())), int):
        state["pending"] = {i: status_column.CODES[code] for i, code in pending.items()}
    return state


def _merge(old: dict[str, Any], committed: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Two sides' changes of a counter (its attribute dicts) from a common old state."""
    if committed.get("kills", 0) != old.get("kills", 0) or new.get("kills", 0) != old.get(
        "kills", 0
    ):
        raise ConflictError("subjobs killed in bulk while others changed")
    o, c, n = old["counts"], committed["counts"], new["counts"]
    merged = {}
    for label in set(o) | set(c) | set(n):
        value = c.get(label, 0) + n.get(label, 0) - o.get(label, 0)
        if value:
            merged[label] = value
    state: dict[str, Any] = {"counts": merged}
    seconds = (
        committed.get("run_seconds", 0.0)
        + new.get("run_seconds", 0.0)
        - old.get("run_seconds", 0.0)
    )
    if seconds:
        state["run_seconds"] = seconds
    # Either side's (a side that dropped it saw no subjob live but its own: the other
    # side's live ones say the run went on), then as the merged counts say: dropped when
    # no subjob is live, set when they show running. When each side alone would have
    # shown a different status, the master shows running if either did.
    started = bool(committed.get("started", False) or new.get("started", False))
    counts = {Status.parse(label): n for label, n in merged.items() if n}
    if _shows_running(counts, started):
        state["started"] = True
    if committed.get("kills"):
        state["kills"] = committed["kills"]  # the same on every side (see above)
    folds, pending = _merge_pending(old, committed, new)
    if folds:
        state["folds"] = folds
    if pending:
        state["pending"] = pending
    return state


def _merge_pending(
    old: dict[str, Any], committed: dict[str, Any], new: dict[str, Any]
) -> tuple[int, dict[int, str]]:
    """The pending labels of two sides that changed different subjobs: one side's changes
    over the other's pending labels, that of the side which wrote them into the chunks if
    one did (both at once is a conflict, retried as every conflict is)."""
    o, c, n = (s.get("pending", {}) for s in (old, committed, new))
    fo, fc, fn = (s.get("folds", 0) for s in (old, committed, new))
    if fc != fo and fn != fo:
        # Both wrote the pending labels into the chunks, each with the old labels of the
        # other's subjobs: no merge of the chunks can tell those from changes. Retried.
        raise ConflictError("both sides wrote a master's pending subjob statuses")
    # A label is never dropped from pending but by writing it: what differs from the old
    # state is what a side changed.
    base, changes, folds = (n, c, fn) if fn != fo else (c, n, fc)
    neither_wrote = fc == fo == fn
    merged = dict(base)
    for index, label in changes.items():
        before = o.get(index)
        if label == before:
            continue
        theirs = base.get(index, before)
        if neither_wrote and theirs != before and theirs != label:
            raise ConflictError("the same subjob's status changed in two ways")
        merged[index] = label
    return folds, merged
