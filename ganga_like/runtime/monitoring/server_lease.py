"""The monitor lease of a repository in PostgreSQL: an advisory lock of its database.

:class:`ganga_like.runtime.monitoring.lease.MonitorLease` uses this in place of the
gangadir's lock file when the repository is on a database server that sessions on
several hosts share (:mod:`ganga_like.repository.advisory_locks`).
"""

from __future__ import annotations

from ganga_like.repository.advisory_locks import (
    DAEMON_KEY,
    MONITOR_KEY,
    AdvisoryLock,
    LockLookup,
)

__all__ = ["ServerLease"]


class ServerLease:
    """The lease (and the question whether a daemon runs) for one process."""

    def __init__(self, uri: str, kind: str) -> None:
        self._lock = AdvisoryLock(uri, MONITOR_KEY, kind)
        self._lookup = LockLookup(uri)

    @property
    def held(self) -> bool:
        return self._lock.held

    def take(self) -> bool | None:
        """True: newly taken; None: kept; False: not held."""
        if self._lock.held:
            return None if self._lock.take() else False
        return self._lock.take() or False

    def release(self) -> None:
        self._lock.release()
        self._lookup.close()

    def daemon_running(self) -> bool:
        return self._lookup.holder(DAEMON_KEY) is not None

    def someone_holds(self) -> bool:
        return self._lookup.holder(MONITOR_KEY) is not None

    def daemon_here(self) -> tuple[int, str] | None:
        """``(pid, "daemon")`` of the lease's holder when it is a daemon on this host (the
        one a signal can wake)."""
        holder = self._lookup.holder(MONITOR_KEY)
        if holder is None or holder.kind != "daemon" or not holder.here:
            return None
        return holder.pid, holder.kind
