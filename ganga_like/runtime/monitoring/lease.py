"""The monitor lease: exactly one process polls the backends of a gangadir at a time.

The lease is an exclusive ``flock`` on ``<gangadir>/monitor.lease``, held for as long as
the holder monitors; the file names the holder (``PID KIND host=NAME boot=ID``, kind
``session`` or ``daemon``; the host as :mod:`ganga_like.hosts` writes it, so that a holder
on another host sharing the gangadir is never signalled from here). The kernel releases
the lock when the holder exits or is killed, so another session's monitor takes it at its
next cycle (within ``Settings.monitor_lease_timeout``). Across hosts the lock itself is
only as good as the shared filesystem's: in the default mode only the host holding the
repository writes, so only its sessions ever hold the lease.

The monitor daemon (``ganga monitor start``) has priority: while it runs (it holds
``monitor-daemon.lock``), sessions give the lease up and only read. A session that needs
a poll soon (after a submission, while waiting) wakes the daemon with SIGUSR1.

A repository in PostgreSQL is shared by hosts that need not share a lock on a file: there
the lease and the daemon's lock are advisory locks of the database
(:mod:`ganga_like.repository.advisory_locks`), released when the holder's connection
ends, and within a bounded time when its host dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import time
from pathlib import Path
from typing import NamedTuple

from ganga_like.hosts import host_words, read_record
from ganga_like.runtime.monitoring.server_lease import ServerLease

__all__ = [
    "DAEMON_LOCK",
    "LEASE_NAME",
    "LeaseHolder",
    "MonitorLease",
    "daemon_running",
    "lease_holder",
]

LEASE_NAME = "monitor.lease"
DAEMON_LOCK = "monitor-daemon.lock"
DAEMON_MODULE = "ganga_like.runtime.monitoring.daemon"
# How long an answer to "is a daemon running?" is reused (it is asked every cycle).
DAEMON_CHECK_SECONDS = 1.0
WAKE_EVERY_SECONDS = 0.5


def _locked_by_someone(path: Path) -> bool:
    """Whether another open file holds an exclusive lock on ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the shared lock, if it was taken
    return False


def daemon_running(gangadir: Path) -> bool:
    return _locked_by_someone(gangadir / DAEMON_LOCK)


class LeaseHolder(NamedTuple):
    pid: int
    kind: str
    host: str  # "" for this host


def lease_holder(gangadir: Path) -> LeaseHolder | None:
    """The live holder, or None when the lease is free."""
    path = gangadir / LEASE_NAME
    if not _locked_by_someone(path):
        return None
    record = read_record(path)
    if record is None or not record.words:
        return None  # being written right now
    return LeaseHolder(record.pid, record.words[0], "" if record.here else str(record.host))


class MonitorLease:
    """This process's side of the lease."""

    def __init__(self, gangadir: Path, kind: str = "session", uri: str | None = None) -> None:
        """``uri``: a repository in PostgreSQL, whose lease is the database's (see the
        module's docstring); None: the gangadir's file."""
        self.gangadir = gangadir
        self.kind = kind
        self._fd: int | None = None
        self._on_server = ServerLease(uri, kind) if uri else None
        self._daemon_seen = (0.0, False)
        self._woken_at = 0.0
        self.acquisitions = 0

    @property
    def held(self) -> bool:
        return self._fd is not None or (self._on_server is not None and self._on_server.held)

    def anyone_holds(self) -> bool:
        """Whether a monitor, of this process or another, holds the lease now."""
        if self.held:
            return True
        if self._on_server is not None:
            return self._on_server.someone_holds()
        return lease_holder(self.gangadir) is not None

    def hold(self) -> bool:
        """Keep or take the lease, unless the daemon should have it; True when held."""
        if self.kind != "daemon" and self._daemon_alive():
            self.release()
            return False
        if self._on_server is not None:
            taken = self._on_server.take()
            self.acquisitions += taken is True
            return taken is not False
        if self._fd is not None:
            return True
        fd = os.open(self.gangadir / LEASE_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {self.kind} {host_words()}\n".encode(), 0)
        self._fd = fd
        self.acquisitions += 1
        return True

    def release(self) -> None:
        if self._on_server is not None:
            self._on_server.release()
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the only descriptor releases the lock

    def wake_holder(self) -> None:
        """Ask the daemon, if it holds the lease, to poll now (at most twice a second)."""
        now = time.monotonic()
        if self._fd is not None or now - self._woken_at < WAKE_EVERY_SECONDS:
            return
        self._woken_at = now
        if self._on_server is not None:
            holder = self._on_server.daemon_here()
        else:
            on_file = lease_holder(self.gangadir)
            # A signal reaches no other host.
            holder = on_file[:2] if on_file is not None and not on_file.host else None
        if holder is None or holder[1] != "daemon" or not _is_daemon(holder[0]):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(holder[0], signal.SIGUSR1)

    def _daemon_alive(self) -> bool:
        checked_at, alive = self._daemon_seen
        now = time.monotonic()
        if now - checked_at > DAEMON_CHECK_SECONDS:
            if self._on_server is not None:
                alive = self._on_server.daemon_running()
            else:
                alive = daemon_running(self.gangadir)
            self._daemon_seen = (now, alive)
        return alive


def _is_daemon(pid: int) -> bool:
    """Whether ``pid`` runs our daemon (a pid can be reused; a signal must not go astray)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return DAEMON_MODULE.encode() in f.read()
    except OSError:
        return False
