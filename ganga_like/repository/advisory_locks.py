"""Locks of a repository in PostgreSQL that every host sees: session advisory locks.

What a gangadir on one host does with ``flock`` (the monitor lease, the daemon's lock)
a repository in PostgreSQL does with an advisory lock of its database, held by a
connection of its own for as long as the holder holds it. The server releases it when
that connection ends: at once when the holder exits or is killed (its host closes the
connection), and within :data:`DEAD_PEER_SECONDS` when the holder's host dies or is cut
off (the server's TCP keepalives, set for this connection alone, find the peer gone).
The holder names itself in the connection's ``application_name`` (kind, host, pid), which
:func:`holder_of` reads back from ``pg_stat_activity``.
"""

from __future__ import annotations

import contextlib
import os
import socket
from typing import Any

from ganga_like.repository import postgres

__all__ = [
    "DAEMON_KEY",
    "DEAD_PEER_SECONDS",
    "MONITOR_KEY",
    "AdvisoryLock",
    "Holder",
    "LockLookup",
    "holder_of",
]

# The first half of every key: ours, among whatever else uses advisory locks there.
NAMESPACE = 0x67616E67  # "gang"
MONITOR_KEY = 1
DAEMON_KEY = 2

# The server's keepalives on a lock's connection: first probe after IDLE seconds of
# silence, then COUNT probes INTERVAL seconds apart; unacknowledged data gives up after
# USER_TIMEOUT ms. A dead host's lock is free after at most about this many seconds.
KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT = 5, 2, 3
USER_TIMEOUT_MS = 10_000
DEAD_PEER_SECONDS = KEEPALIVE_IDLE + KEEPALIVE_INTERVAL * KEEPALIVE_COUNT

PREFIX = "ganga_like"


class Holder:
    """Who holds a lock: ``kind`` (``session``, ``daemon``), ``host`` and ``pid``."""

    def __init__(self, kind: str, host: str, pid: int) -> None:
        self.kind, self.host, self.pid = kind, host, pid

    @property
    def here(self) -> bool:
        return self.host == socket.gethostname()

    def __repr__(self) -> str:
        return f"PID {self.pid} ({self.kind}) on {self.host}"


class AdvisoryLock:
    """One lock (``key``) of the database ``uri`` names, taken without waiting."""

    def __init__(self, uri: str, key: int, kind: str) -> None:
        self.uri, self.key, self.kind = uri, key, kind
        self._conn: Any = None

    @property
    def held(self) -> bool:
        return self._conn is not None

    def take(self) -> bool:
        """Keep the lock (its connection still answers) or take it; True when held. A
        server that cannot be reached just means not held (the caller tries again)."""
        import psycopg2

        try:
            if self._conn is not None:
                with self._conn.cursor() as cursor:
                    cursor.execute("SELECT 1")
                return True
            conn = _connect(self.uri, f"{PREFIX} {self.kind} {socket.gethostname()} {os.getpid()}")
            with conn.cursor() as cursor:
                cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", (NAMESPACE, self.key))
                taken = bool(cursor.fetchone()[0])
            if not taken:
                conn.close()
                return False
            self._conn = conn
            return True
        except psycopg2.Error:
            self.release()  # the connection is gone, and the lock with it
            return False

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()  # ending the connection releases the lock


def _connect(uri: str, name: str) -> Any:
    import psycopg2

    conn = psycopg2.connect(postgres.dsn_of(uri), application_name=name[:63])
    conn.autocommit = True
    with conn.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('tcp_keepalives_idle', %s, false),"
            " set_config('tcp_keepalives_interval', %s, false),"
            " set_config('tcp_keepalives_count', %s, false),"
            " set_config('tcp_user_timeout', %s, false)",
            tuple(
                str(v)
                for v in (KEEPALIVE_IDLE, KEEPALIVE_INTERVAL, KEEPALIVE_COUNT, USER_TIMEOUT_MS)
            ),
        )
    return conn


class LockLookup:
    """Asks the server who holds a lock, over one connection kept for these questions
    (a monitor asks every second whether the daemon runs)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self._conn: Any = None

    def holder(self, key: int) -> Holder | None:
        """Who holds ``key`` now; None when nobody does or the server cannot be asked."""
        import psycopg2

        try:
            if self._conn is None:
                self._conn = _connect(self.uri, f"{PREFIX} looking")
            with self._conn.cursor() as cursor:
                cursor.execute(_HOLDER_QUERY, (NAMESPACE, key))
                row = cursor.fetchone()
        except psycopg2.Error:
            self.close()
            return None
        return None if row is None else _holder_named(str(row[0] or ""))

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


_HOLDER_QUERY = (
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s"
    " AND l.objsubid = 2"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


def _holder_named(name: str) -> Holder:
    parts = name.split()
    if len(parts) != 4 or parts[0] != PREFIX or not parts[3].isdigit():
        return Holder("unknown", "an unknown host", 0)  # names hidden from this role
    return Holder(parts[1], parts[2], int(parts[3]))


def holder_of(uri: str, key: int) -> Holder | None:
    """Who holds ``key`` now, asked once (None: nobody, or the server cannot be asked)."""
    lookup = LockLookup(uri)
    try:
        return lookup.holder(key)
    finally:
        lookup.close()
