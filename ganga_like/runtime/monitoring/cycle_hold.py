"""Test hook: the monitor stops at a chosen point inside a cycle, so that a test can kill it
exactly there instead of at a moment it hopes falls inside one (on a loaded machine a
cycle is over long before a timer fires).

``GANGA_LIKE_TEST_HOLD_MONITOR_CYCLE=POINT:DIR``: every cycle of the process that changes
a job stops at POINT, creates ``DIR/POINT`` and waits (at most 300 s) for ``DIR/POINT.go``.
The points, in the order a cycle passes them:

* ``applied``: the backends' reports are applied to the jobs, nothing is committed;
* ``voted``: the storage has written and voted the cycle's commit, which is not finished
  (the middle of the two-phase commit);
* ``committed``: the commit is done, and the monitor has not yet remembered what the
  backends read (their journal offsets).

Unset (always, outside tests) it does nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

__all__ = ["POINTS", "TEST_HOLD_VARIABLE", "after_commit", "before_commit"]

TEST_HOLD_VARIABLE = "GANGA_LIKE_TEST_HOLD_MONITOR_CYCLE"
POINTS = ("applied", "voted", "committed")
LONGEST_HOLD = 300.0


def before_commit(tm: Any, changed: int) -> None:
    """At ``applied`` hold now; at ``voted`` join the commit to hold after the vote."""
    place = _place("applied", changed)
    if place is not None:
        _hold(place, "applied")
    place = _place("voted", changed)
    if place is not None:
        tm.get().join(_HoldAfterVote(tm, place))


def after_commit(changed: int) -> None:
    place = _place("committed", changed)
    if place is not None:
        _hold(place, "committed")


def _place(point: str, changed: int) -> Path | None:
    """The directory to signal in, when the hook asks to hold at ``point`` of this cycle."""
    wanted = os.environ.get(TEST_HOLD_VARIABLE)
    if not wanted or not changed:
        return None
    asked, _, place = wanted.partition(":")
    return Path(place) if asked == point else None


def _hold(place: Path, point: str) -> None:
    (place / point).touch()
    go = place / f"{point}.go"
    deadline = time.monotonic() + LONGEST_HOLD
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


class _HoldAfterVote:
    """A resource of the commit that sorts after every storage: the transaction calls its
    ``tpc_vote`` once the storages have voted, and their ``tpc_finish`` only after it."""

    def __init__(self, tm: Any, place: Path) -> None:
        self.transaction_manager = tm
        self._place = place

    def sortKey(self) -> str:
        return "~ after every storage"

    def tpc_vote(self, txn: Any) -> None:
        _hold(self._place, "voted")

    def tpc_begin(self, txn: Any) -> None:
        pass

    def commit(self, txn: Any) -> None:
        pass

    def tpc_finish(self, txn: Any) -> None:
        pass

    def tpc_abort(self, txn: Any) -> None:
        pass

    def abort(self, txn: Any) -> None:
        pass
