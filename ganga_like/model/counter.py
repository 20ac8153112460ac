"""The per-master count of subjobs by status, from which the master's status is derived.

It is a small record of its own so the monitor and a user's resubmit can both change it at
once: conflicts are resolved by adding both sides' deltas, like ``BTrees.Length``.
"""

from __future__ import annotations

from typing import Any

from persistent import Persistent

from ganga_like.model.status import Status, master_status

__all__ = ["StatusCounter"]


class StatusCounter(Persistent):  # type: ignore[misc]
    """Subjob counts by status label."""

    # Seconds subjobs spent running (from running to their end), summed as they finish:
    # `ganga status` shows it without loading any subjob.
    run_seconds: float = 0.0

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[str, int] = {}

    def add(self, status: Status, n: int = 1) -> None:
        counts = dict(self.counts)
        counts[status.label] = counts.get(status.label, 0) + n
        if counts[status.label] == 0:
            del counts[status.label]
        self.counts = counts

    def move(self, old: Status, new: Status) -> None:
        counts = dict(self.counts)
        for label, delta in ((old.label, -1), (new.label, 1)):
            counts[label] = counts.get(label, 0) + delta
            if counts[label] == 0:
                del counts[label]
        self.counts = counts

    def get(self, status: Status) -> int:
        return self.counts.get(status.label, 0)

    def total(self) -> int:
        return sum(self.counts.values())

    def by_status(self) -> dict[Status, int]:
        return {Status.parse(label): n for label, n in self.counts.items() if n}

    def derived_status(self) -> Status:
        return master_status(self.by_status().items())

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
        return state
