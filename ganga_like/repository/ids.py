"""Job ids in shared mode: each session reserves a block of ids at a time.

Ids come from one counter in the repository (``root["ids"]``, an ``IdAllocator``). In
embedded mode the creating transaction takes the next one itself: one process, nobody to
collide with. In shared mode that counter would make every two sessions creating jobs at
the same moment conflict on it. Instead a session reserves a block of ids in a short
transaction of its own (retried like any other) and hands them out in order: 8 ids first,
twice as many at each new reservation while it keeps creating jobs, at most 64.

So ids stay unique and increase within a session; sessions creating jobs at the same time
get interleaved blocks. An id whose creating transaction is aborted (a conflict elsewhere in
the transaction) returns to the session's block and the retry reuses it. When a session
closes, the unused end of its last block is given back if no other session reserved after
it, so one session after another still numbers jobs 0, 1, 2, ... without gaps.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
from collections.abc import Callable
from typing import Any

import transaction

from ganga_like.repository.transaction_retry import RetryPolicy, retried

__all__ = ["IdBlocks"]


class IdBlocks:
    """The job ids one session of a shared repository reserved and has not used yet."""

    FIRST = 8
    LARGEST = 64

    def __init__(
        self, db: Any, policy: RetryPolicy, catch_up: Callable[[], object] | None = None
    ) -> None:
        self._db = db
        self._policy = policy
        self._catch_up = catch_up
        self._free: list[int] = []  # reserved and unused, ascending
        self._end = 0  # end of the last block reserved (exclusive)
        self._size = self.FIRST
        self._lock = threading.Lock()
        self.reservations = 0

    def take(self, root: Any) -> int:
        """The next id for a job created in the transaction ``root`` belongs to."""
        with self._lock:
            if not self._free:
                self._reserve()
            job_id = self._free.pop(0)
        # An abort (a conflict, the last attempt failing, an error) gives the id back.
        root._p_jar.transaction_manager.get().addAfterAbortHook(self._put_back, (job_id,))
        return job_id

    def _put_back(self, job_id: int) -> None:
        with self._lock:
            if job_id not in self._free:
                bisect.insort(self._free, job_id)

    def _reserve(self) -> None:
        """Reserve the next block in a transaction of its own (the caller's transaction is
        in the middle of its work and stays untouched)."""
        size = self._size
        tm = transaction.TransactionManager()
        conn = self._db.open(transaction_manager=tm)
        try:
            start: int = retried(
                tm,
                lambda: conn.root()["ids"].reserve(size),
                what="reserving job ids",
                policy=self._policy,
                catch_up=self._catch_up,
            )
        finally:
            conn.close()
        self._free.extend(range(start, start + size))
        self._end = start + size
        self._size = min(self.LARGEST, size * 2)
        self.reservations += 1

    def close(self) -> None:
        """Give back the unused end of the last block when nobody reserved after it."""
        with self._lock:
            free, end = self._free, self._end
            self._free = []
        start = end
        for job_id in reversed(free):
            if job_id != start - 1:
                break
            start = job_id
        if start == end:
            return
        tm = transaction.TransactionManager()
        # Best effort at close: if it fails those ids are only skipped, never reused.
        with contextlib.suppress(Exception):
            conn = self._db.open(transaction_manager=tm)
            try:
                retried(
                    tm,
                    lambda: conn.root()["ids"].release(start, end),
                    what="giving back job ids",
                    policy=self._policy,
                )
            finally:
                conn.close()
