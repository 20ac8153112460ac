"""The server's one way into the repository: a session used by one thread of its own.

A ZODB connection belongs to the thread that opened it, and the GPI's actions expect one
session per process: so every read and action runs in the reader's thread, one after
another, each in a fresh transaction (it sees every commit made before it). The event
loop hands work over and awaits it, so slow reads never stall other requests' sockets.

The session monitors jobs as any session does (it takes part in the monitor lease), so a
job progresses on the page while no shell is open.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from ganga_like.errors import RepositoryError
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like.runtime.settings import Settings

__all__ = ["Reader", "StatsCache"]

T = TypeVar("T")

# How long stopping waits for a read under way before closing the session under it.
CLOSE_WAIT = 3.0


class Reader:
    """Runs functions of the session in the reader thread."""

    def __init__(self, settings: Settings) -> None:
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="ganga-web-repository")
        self._closing = False
        self._acting = 0  # actions (kill, resubmit) under way or waiting their turn
        try:
            self.session: Session = self._pool.submit(open_session, settings).result()
        except BaseException:
            self._pool.shutdown(wait=False)
            raise

    def last_commit(self) -> bytes:
        """The id of the last transaction this process knows of: changes whenever any
        session commits (a shared repository's server tells every client at once)."""
        tid: bytes = self.session.repo.db.lastTransaction()
        return tid

    async def run(self, read: Callable[..., T], *args: Any) -> T:
        """``read(session, *args)`` in the reader thread, in a fresh transaction."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(self._fresh, read, *args))

    def _fresh(self, read: Callable[..., T], *args: Any) -> T:
        if self._closing:
            raise RepositoryError("the server is stopping")  # queued reads: not run
        self.session.repo.abort()
        try:
            return read(self.session, *args)
        finally:
            self.session.repo.abort()  # nothing read stays pinned, nothing is left pending

    async def act(self, action: Callable[..., T], *args: Any) -> T:
        """``action(session, *args)``: as ``run``, but stopping waits for it to end."""
        self._acting += 1
        try:
            return await self.run(action, *args)
        finally:
            self._acting -= 1

    def close(self) -> bool:
        """Close the session in the reader thread once the work under way ends; False when
        a read (the first stats of a large job) was still going after ``CLOSE_WAIT``
        seconds: the session is left to the process's end then (a read changes nothing),
        so that Ctrl-C is not kept waiting. An action under way is always waited for."""
        self._closing = True
        closed = self._pool.submit(close_session)
        try:
            closed.result(timeout=None if self._acting else CLOSE_WAIT)
        except TimeoutError:
            return False
        self._pool.shutdown()
        return True


class StatsCache:
    """A job's stats, computed again only when something was committed since, and then
    not more often than ``SPACING`` times what the last computation took: the stats of
    100,000 subjobs read every one of them, and many pages may ask at once."""

    SPACING = 4.0

    def __init__(self) -> None:
        self._kept: dict[int, tuple[bytes, float, float, dict[str, Any]]] = {}

    def fresh(
        self, job_id: int, commit: bytes, now: float | None = None
    ) -> tuple[dict[str, Any], bool] | None:
        """The kept stats if still good enough to show, and whether they are of the last
        commit ``commit``; None when they must be computed again."""
        kept = self._kept.get(job_id)
        if kept is None:
            return None
        seen, at, took, summary = kept
        now = time.monotonic() if now is None else now
        if seen == commit:
            return summary, True
        if now - at < self.SPACING * took:
            return summary, False
        return None

    def keep(self, job_id: int, commit: bytes, took: float, summary: dict[str, Any]) -> None:
        self._kept[job_id] = (commit, time.monotonic(), took, summary)
