"""A PostgreSQL server that went away (restarted, shutting down, cut off): how it is told
from other errors, waited for, and reported once per outage.
"""

from __future__ import annotations

import time

__all__ = ["is_disconnection", "outage_line", "wait_for_server"]


def wait_for_server(dsn: str, timeout: float) -> bool:
    """Wait until the server accepts a login again (at most ``timeout`` s); whether it
    does. Cheap when it is up: one login."""
    import psycopg2

    deadline = time.monotonic() + timeout
    pause = 0.05
    while True:
        try:
            psycopg2.connect(dsn).close()
            return True
        except psycopg2.Error:
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)  # a restart takes a second or two: ask again soon
            pause = min(pause * 2, 1.0)


def is_disconnection(exc: BaseException) -> bool:
    """Whether ``exc`` is the driver's saying the server went away (restarted, shutting
    down, or the connection broke): a transaction that met it may succeed when tried
    again. Told without importing the driver where it is not in use."""
    if not (type(exc).__module__ or "").startswith("psycopg2"):
        return False
    import psycopg2

    return isinstance(exc, psycopg2.OperationalError | psycopg2.InterfaceError)


# RelStorage says, for each of a process's connections, that it lost the server and
# could not reconnect yet: a restart of the server is one line per process (the first),
# then nothing more until the server has been back for a while.
OUTAGE_MESSAGES = ("Disconnected", "Reconnect", "Failed to get lock debug info")
OUTAGE_QUIET_SECONDS = 60.0
_last_outage = [-OUTAGE_QUIET_SECONDS]


def outage_line(message: str, failure: BaseException | None = None) -> str | None:
    """For RelStorage's ``message`` about a lost server (or with such a ``failure``): the
    one line to say (the first of an outage), or "" (said already); None for any other
    message."""
    lost = failure is not None and is_disconnection(failure)
    if not (lost or message.startswith(OUTAGE_MESSAGES)):
        return None
    now = time.monotonic()
    said = now - _last_outage[0] < OUTAGE_QUIET_SECONDS
    _last_outage[0] = now
    if said:
        return ""
    return (
        "the connection to the PostgreSQL server was lost; reads and changes wait for "
        "it and are tried again"
    )
