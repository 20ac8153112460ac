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

from typing import Any

from persistent import Persistent

from ganga_like.model.status import Status, master_status

__all__ = ["StatusCounter", "derive"]

# Subjobs being submitted, waiting or running: while any is, a master's run goes on.
_LIVE = frozenset({Status.SUBMITTING, Status.SUBMITTED, Status.RUNNING, Status.COMPLETING})


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

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

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

    def get(self, status: Status) -> int:
        return self.counts.get(status.label, 0)

    def total(self) -> int:
        return sum(self.counts.values())

    def by_status(self) -> dict[Status, int]:
        return {Status.parse(label): n for label, n in self.counts.items() if n}

    def derived_status(self) -> Status:
        return derive(self.by_status(), self.started)

    def _p_resolveConflict(
        self, old: dict[str, Any], committed: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
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
        # Three-way, then as the merged counts say: the fact is dropped when no subjob is
        # live any more, set when the counts alone show running.
        before, theirs, ours = (s.get("started", False) for s in (old, committed, new))
        started = ours if theirs == before else theirs
        counts = {Status.parse(label): n for label, n in merged.items() if n}
        if _shows_running(counts, started):
            state["started"] = True
        return state
