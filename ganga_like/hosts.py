"""Records of helper processes that any host sharing the gangadir can judge.

A gangadir may sit on a filesystem that several hosts see (the login nodes of a cluster).
The records of its detached helpers (the repository server's ``zeo.pid``, the monitor
daemon's ``monitor-daemon.pid``, the Local runner's ``runner.pid``) therefore name the host
that wrote them, as its hostname and its boot id (``/proc/sys/kernel/random/boot_id``, so
that a host that rebooted is not taken for the one that wrote the record): a PID means
something only there. A record line is ``PID [WORDS...] host=NAME boot=ID``; a record of
an earlier version names no host and is read as this host's.

Liveness from another host is a heartbeat: the holder refreshes the record's mtime every
``heartbeat_seconds()`` (``GANGA_LIKE_HEARTBEAT_SECONDS``, 10 by default). A record of
another host not refreshed for ``MISSED_BEATS`` heartbeats is a host that is gone (or cut
off from the filesystem), and may be taken over: by renaming the record away, which only
one taker can do. Locks (``flock``, ``fcntl``) are not relied on across hosts: on NFS they
may not reach the other host at all. The hosts' clocks are assumed to agree to well within
the bound (NTP), since an age is the reader's clock minus the mtime the server stamped.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "HEARTBEAT_VARIABLE",
    "MISSED_BEATS",
    "Heartbeat",
    "Host",
    "Record",
    "beat",
    "heartbeat_seconds",
    "host_words",
    "live_elsewhere",
    "read_record",
    "stale_after",
    "take_over",
    "this_host",
    "write_record",
]

HEARTBEAT_VARIABLE = "GANGA_LIKE_HEARTBEAT_SECONDS"
DEFAULT_HEARTBEAT = 10.0
MISSED_BEATS = 3
BOOT_ID = "/proc/sys/kernel/random/boot_id"


@dataclass(frozen=True)
class Host:
    """A host as long as it runs: its name and the id of its current boot."""

    name: str
    boot_id: str

    def __str__(self) -> str:
        return self.name


def this_host() -> Host:
    return Host(socket.gethostname(), _boot_id())


@functools.cache
def _boot_id() -> str:
    """Read once: a process never outlives its host's boot."""
    try:
        with open(BOOT_ID) as f:
            return f.read().strip()
    except OSError:
        return "unknown"


def host_words(host: Host | None = None) -> str:
    """How a record names ``host`` (this one by default)."""
    host = host or this_host()
    return f"host={host.name} boot={host.boot_id}"


def heartbeat_seconds() -> float:
    """How often holders refresh their records (tests make it short)."""
    try:
        value = float(os.environ.get(HEARTBEAT_VARIABLE, DEFAULT_HEARTBEAT))
    except ValueError:
        return DEFAULT_HEARTBEAT
    return value if value > 0 else DEFAULT_HEARTBEAT


def stale_after() -> float:
    """Age past which another host's record is of a host that is gone."""
    return MISSED_BEATS * heartbeat_seconds()


@dataclass(frozen=True)
class Record:
    """A helper's record as read from its file."""

    path: Path
    pid: int
    words: tuple[str, ...]  # what the record says besides its pid and host
    host: Host | None  # None: written by a version that named no host
    mtime: float
    inode: int

    @property
    def age(self) -> float:
        """Seconds since the holder's last heartbeat."""
        return max(0.0, time.time() - self.mtime)

    @property
    def here(self) -> bool:
        """Written on this host in this boot: its PID can be checked here."""
        return self.host is None or self.host == this_host()

    @property
    def rebooted(self) -> bool:
        """Written on this host before it last booted: its process is gone."""
        return self.host is not None and not self.here and self.host.name == this_host().name

    @property
    def gone(self) -> bool:
        """Another host's record whose holder is gone (missed its heartbeats)."""
        return not self.here and (self.rebooted or self.age > stale_after())

    def where(self) -> str:
        """``host NAME (PID N, last heartbeat S s ago)``, for messages."""
        return f"host {self.host} (PID {self.pid}, last heartbeat {self.age:.0f} s ago)"


def read_record(path: Path) -> Record | None:
    """The record at ``path``; None when there is none or it cannot be read as one."""
    try:
        with open(path) as f:
            text = f.read()
            info = os.fstat(f.fileno())
    except OSError:
        return None
    words = text.split()
    if not words or not words[0].isdigit():
        return None
    keyed = dict(w.split("=", 1) for w in words[1:] if w.startswith(("host=", "boot=")))
    rest = tuple(w for w in words[1:] if not w.startswith(("host=", "boot=")))
    host = Host(keyed["host"], keyed.get("boot", "")) if "host" in keyed else None
    return Record(path, int(words[0]), rest, host, info.st_mtime, info.st_ino)


def write_record(path: Path, pid: int, *words: str, exclusive: bool = False) -> bool:
    """Write ``path`` naming ``pid`` on this host (readers never see it half written).

    ``exclusive``: only if there is no record yet (the record is then the claim itself,
    made by ``link``, which is atomic on NFS too); False when there was one."""
    tmp = path.with_name(f".{path.name}.{pid}.{time.monotonic_ns()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, (" ".join((str(pid), *words, host_words())) + "\n").encode())
    finally:
        os.close(fd)
    if not exclusive:
        os.replace(tmp, path)
        return True
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


def beat(path: Path, pid: int) -> bool:
    """Refresh the record of ``pid`` at ``path``; False when it is no longer ours (taken
    over by another host, or removed): the holder must then stop."""
    record = read_record(path)
    if record is None or record.pid != pid or not record.here:
        return False
    with contextlib.suppress(OSError):
        os.utime(path)
    return True


def take_over(record: Record) -> bool:
    """Remove another host's stale ``record`` so that this host may start in its place.

    The record is renamed to a name of this process's: of several takers only one finds
    it. Should it turn out to be another record than the one judged (replaced in the
    meantime) or to have been refreshed (its holder is alive after all), it is put back
    and False returned."""
    aside = record.path.with_name(f".{record.path.name}.taken.{os.getpid()}.{time.monotonic_ns()}")
    try:
        os.rename(record.path, aside)
    except FileNotFoundError:
        return False  # another taker was first
    try:
        info = os.stat(aside)
        if info.st_ino == record.inode and info.st_mtime == record.mtime:
            return True
        with contextlib.suppress(FileExistsError):
            os.link(aside, record.path)  # not ours to remove: back where it was
        return False
    finally:
        os.unlink(aside)


def live_elsewhere(path: Path) -> Record | None:
    """The record at ``path`` of a holder alive on another host; a gone host's record is
    taken over (of several takers, one succeeds) and None returned, as when the record is
    this host's or there is none."""
    record = read_record(path)
    if record is None or record.here:
        return None
    if not record.gone:
        return record
    take_over(record)
    return None


class Heartbeat(threading.Thread):
    """Refreshes a holder's record every heartbeat; calls ``on_lost`` once (and stops)
    when the record is no longer the holder's: another host took it over while this
    one was cut off, so the holder must leave before it writes anything more."""

    def __init__(self, path: Path, on_lost: Callable[[], None], pid: int | None = None) -> None:
        super().__init__(name=f"ganga_like-heartbeat-{path.name}", daemon=True)
        self.path = path
        self.pid = os.getpid() if pid is None else pid
        self.on_lost = on_lost
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.wait(heartbeat_seconds()):
            if not beat(self.path, self.pid):
                if not self._stop_event.is_set():
                    self.on_lost()
                return
