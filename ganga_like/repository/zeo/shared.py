"""Shared mode, client side: find the repository's ZEO server, start it when missing.

One server per repository serves every session of the user (``server``). It is started
by the first session that needs it, with this interpreter and ``sys.path`` (it resolves
write conflicts with our own classes), detached, and exits after ``idle_exit`` seconds with
no client. Files in ``<gangadir>/repository/``:

``zeo.sock``        the server's Unix socket, mode 0600 in a 0700 directory
``zeo.pid``         ``PID ADDRESS host=NAME boot=ID`` of the live server: its claim on the
                    repository, made before it opens the file, refreshed every heartbeat
                    (:mod:`ganga_like.repository.zeo.host_claim`)
``zeo.spawn.lock``  flock held while a client looks for a server or starts one
``zeo.log``         the server's log
``zeo-cache/``      persistent client caches (``slot-N.zec``), one per open session, so a
                    session reopened later starts with a warm cache

A server on another host (a gangadir on a shared filesystem) is never started beside, nor
its socket used: the session says which host holds the repository. A socket that does
not answer is a dead server's: it is removed and a new server started,
under the spawn lock so that two sessions never start two servers. A socket or a server
owned by another user is refused. TCP is used only when an address is configured.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zc.lockfile

from ganga_like.errors import RepositoryBusyError, RepositoryCorruptError, RepositoryError
from ganga_like.hosts import read_record
from ganga_like.private import touch_private
from ganga_like.repository.options import StorageOptions, socket_path
from ganga_like.repository.zeo.client_storage import client_storage_class
from ganga_like.repository.zeo.host_claim import PID_NAME, check_not_held_elsewhere

__all__ = [
    "Address",
    "ServerKeeper",
    "ensure_server",
    "open_client",
    "parse_address",
    "probe",
    "server_address",
    "server_pid",
    "stop_idle_server",
    "stop_server",
]

SOCKET_NAME = "zeo.sock"
SPAWN_LOCK = "zeo.spawn.lock"
LOG_NAME = "zeo.log"
CACHE_DIR = "zeo-cache"
CACHE_SLOTS = 16
# A maintenance command asks an idle server to leave: it writes a token to STOP_REQUEST;
# the server answers in STOP_ANSWER, "TOKEN stopping" (no session was connected) or
# "TOKEN declined N PID...", and ignores a request older than STOP_REQUEST_LIFETIME.
STOP_REQUEST = "zeo.stop-if-idle"
STOP_ANSWER = "zeo.stop-answer"
STOP_REQUEST_LIFETIME = 30.0
SERVER_MODULE = "ganga_like.repository.zeo.server"
# What a live server's command line may name: this module, or the one earlier versions
# started (a server they started may still be serving; it is found and waited for as before).
SERVER_MODULES = (SERVER_MODULE, "ganga_like.repository.zeo_server")

log = logging.getLogger("ganga_like")

Address = str | tuple[str, int]

# Servers started by this process, kept so they can be reaped when they exit (no zombies
# that would look alive).
_spawned: list[subprocess.Popen[bytes]] = []


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise RepositoryError(f"repository server address {text!r} is not HOST:PORT")
    return host.strip("[]"), int(port)


def server_address(repo_dir: Path, address: str = "") -> Address:
    """Where the server of ``repo_dir`` listens: ``zeo.sock`` in it, or, when that path is
    too long for a socket, a name derived from it in a private directory of ours under
    the temporary directory."""
    if address:
        return parse_address(address)
    return str(socket_path(repo_dir, SOCKET_NAME, ".sock"))


# -- is a server there? ---------------------------------------------------------------


def probe(address: Address, timeout: float = 2.0) -> bool:
    """Whether a server of ours answers at ``address``; refuse anything not ours."""
    _reap()
    if isinstance(address, tuple):
        try:
            with socket.create_connection(address, timeout=timeout):
                return True
        except OSError:
            return False
    try:
        info = os.lstat(address)
    except FileNotFoundError:
        return False
    if not stat.S_ISSOCK(info.st_mode):
        raise RepositoryError(f"{address} exists and is not a socket; refusing to use it")
    if info.st_uid != os.getuid():
        raise RepositoryError(
            f"{address} belongs to another user (uid {info.st_uid}); refusing to use it"
        )
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(address)
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError as exc:
        if exc.errno in (errno.ECONNREFUSED, errno.ENOENT) or isinstance(exc, TimeoutError):
            return False
        raise RepositoryError(
            f"cannot reach the repository server at {address}: {exc.strerror or exc}"
        ) from None
    finally:
        sock.close()
    _pid, uid, _gid = struct.unpack("3i", creds)
    if uid != os.getuid():
        raise RepositoryError(
            f"the repository server at {address} runs as another user "
            f"(uid {uid}); refusing to use it"
        )
    return True


def server_pid(repo_dir: Path) -> int | None:
    """PID of the live server of ``repo_dir`` on this host (from ``zeo.pid``, checked),
    or None (a PID written on another host means nothing here)."""
    record = read_record(repo_dir / PID_NAME)
    if record is None or not record.here:
        return None
    pid = record.pid
    _reap()
    args = _cmdline(pid)
    if args is None or not _runs_server(args):
        return None  # gone, a zombie, or a reused pid
    return pid if _served_dir(args) == repo_dir.resolve() else None


def _cmdline(pid: int) -> list[str] | None:
    """The arguments of a live process (None when it is gone or a zombie)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return [os.fsdecode(a) for a in raw.split(b"\0")] if raw else None


def _runs_server(args: list[str]) -> bool:
    return any(m in args for m in SERVER_MODULES)


def _served_dir(args: list[str]) -> Path | None:
    """The repository directory a server's command line names."""
    position = args.index(next(m for m in SERVER_MODULES if m in args)) + 1
    if position >= len(args):
        return None
    return Path(args[position]).resolve() / "repository"


# -- starting one ---------------------------------------------------------------------


def ensure_server(repo_dir: Path, options: StorageOptions) -> bool:
    """Make sure a server answers for ``repo_dir``; True when one had to be started.

    A server that stopped answering may still be on its way out (its idle timer fired
    as this session started): it holds the file until it has exited, so it is waited for
    and a new one started after it, rather than the session failing as "busy".
    """
    address = server_address(repo_dir, options.address)
    deadline = time.monotonic() + options.connect_timeout
    with _spawn_lock(repo_dir, options.connect_timeout):
        while True:
            check_not_held_elsewhere(repo_dir)  # before the socket: it may be another host's
            if probe(address):
                return False
            _wait_for_exit(server_pid(repo_dir), deadline)
            if isinstance(address, str):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(address)  # a dead server's socket (probe checked it is ours)
            try:
                _start_server(repo_dir, options)
            except RepositoryBusyError as exc:
                # The file is still held by the server that was exiting (it closes the
                # file a moment before its process ends): wait for it, then start again.
                if (
                    exc.pid is None
                    or not _is_server_process(exc.pid, repo_dir)
                    or time.monotonic() > deadline
                ):
                    raise
                _wait_for_exit(exc.pid, deadline)
                continue
            return True


def _is_server_process(pid: int, repo_dir: Path) -> bool:
    """Whether ``pid`` is (or, gone now, was last seen as) this repository's server."""
    args = _cmdline(pid)
    if args is None:
        return True  # it exited meanwhile: whoever held the file let it go
    return _runs_server(args) and _served_dir(args) == repo_dir.resolve()


def _wait_for_exit(pid: int | None, deadline: float) -> None:
    """Wait (until ``deadline``) for an exiting server process to be gone."""
    if pid is None:
        return
    while time.monotonic() < deadline:
        _reap()
        args = _cmdline(pid)
        if args is None or not _runs_server(args):
            return
        time.sleep(0.01)


@contextlib.contextmanager
def _spawn_lock(repo_dir: Path, timeout: float) -> Iterator[None]:
    from ganga_like.detached import flock_within

    fd = os.open(repo_dir / SPAWN_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        if not flock_within(fd, fcntl.LOCK_EX, timeout):
            raise RepositoryError(
                f"another process has been starting the repository server of "
                f"{repo_dir} for {timeout:.0f} s; see {repo_dir / LOG_NAME}"
            )
        yield
    finally:
        os.close(fd)  # releases the lock


def _start_server(repo_dir: Path, options: StorageOptions) -> int:
    """Start a detached server; wait until it listens or says why it cannot."""
    gangadir = repo_dir.parent
    argv = [
        sys.executable,
        "-m",
        SERVER_MODULE,
        str(gangadir),
        "--idle-exit",
        str(options.idle_exit),
        "--pack-threshold-mb",
        str(options.pack_threshold_mb),
        "--pack-keep-days",
        str(options.pack_keep_days),
    ]
    if options.address:
        argv += ["--address", options.address]
    # Imported here: most sessions find their server running and start none.
    from ganga_like.detached import HelperNotReady, start_detached

    # The same import path as ours: the server unpickles our classes to resolve conflicts.
    try:
        started = start_detached(argv, repo_dir / LOG_NAME, ready_timeout=options.connect_timeout)
    except HelperNotReady as exc:
        _spawned.append(exc.proc)  # reaped later, like one that started
        raise RepositoryError(
            f"the repository server of {repo_dir} did not start: "
            f"{exc.reason}; see {repo_dir / LOG_NAME}: "
            f"{_last_log_line(repo_dir)}"
        ) from None
    proc = started.proc
    _spawned.append(proc)
    line = started.ready_line or ""
    kind, _, rest = line.partition(" ")
    if kind == "ready":
        return proc.pid
    path = repo_dir / "Data.fs"
    if kind == "busy":
        pid_text, _, message = rest.partition(" ")
        raise RepositoryBusyError(message, pid=int(pid_text) if pid_text.isdigit() else None)
    if kind == "corrupt":
        raise RepositoryCorruptError(rest, path=str(path))
    if kind == "error":
        raise RepositoryError(rest)
    raise RepositoryError(
        f"the repository server of {repo_dir} did not start"
        f"{': ' + rest if rest else ''}; see {repo_dir / LOG_NAME}: "
        f"{_last_log_line(repo_dir)}"
    )


def _last_log_line(repo_dir: Path) -> str:
    try:
        lines = (repo_dir / LOG_NAME).read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


def _reap() -> None:
    for proc in list(_spawned):
        if proc.poll() is not None:
            _spawned.remove(proc)


# -- connecting -----------------------------------------------------------------------


def open_client(path: Path, options: StorageOptions, spawn: bool) -> Any:
    """A ZEO ClientStorage for the repository holding ``path``; None when ``spawn`` is
    false and no server runs (``auto`` mode then opens the file itself)."""
    from ZEO.Exceptions import ClientDisconnected

    ClientStorage = client_storage_class()
    repo_dir = path.parent
    address = server_address(repo_dir, options.address)
    for _attempt in range(3):
        check_not_held_elsewhere(repo_dir)  # before the socket: it may be another host's
        if not probe(address):
            if not spawn:
                return None
            ensure_server(repo_dir, options)
        cache = _cache_slot(repo_dir, options.cache_mb, options.follower)
        _forget_if_ahead_of(cache, path)
        try:
            # The server answered just now: a short first wait tells a server that went
            # away meanwhile from a slow one; later calls wait up to connect_timeout.
            storage = ClientStorage(
                address,
                cache=cache,
                wait_timeout=min(5.0, options.connect_timeout),
                client_label=f"ganga pid {os.getpid()}{' follower' if options.follower else ''}",
            )
        except ClientDisconnected:
            cache.close()
            continue
        except BaseException:
            cache.close()
            raise
        storage._server.timeout = options.connect_timeout
        return storage
    raise RepositoryError(
        f"cannot connect to the repository server of {repo_dir}; see "
        f"{repo_dir / LOG_NAME}: {_last_log_line(repo_dir)}"
    )


# Caches of this process by path: a slot whose cache is open here is taken, even though
# its file lock (per open file) would not tell.
_caches: dict[str, Any] = {}


def _cache_slot(repo_dir: Path, cache_mb: float, follower: bool = False) -> Any:
    """A persistent client cache in the first free slot (each file has a lock); a
    follower's is temporary: it holds no slot a maintenance command would wait for."""
    from ganga_like.repository.zeo.client_cache import ResilientClientCache as ClientCache

    size = int(cache_mb * 1024 * 1024)
    if follower:
        return ClientCache(None, size)
    cache_dir = repo_dir / CACHE_DIR
    with contextlib.suppress(FileExistsError):
        cache_dir.mkdir(mode=0o700)
    for slot in range(CACHE_SLOTS):
        name = str(cache_dir / f"slot-{slot}.zec")
        mine = _caches.get(name)
        handle = getattr(mine, "f", None)  # None once the cache was closed
        if handle is not None and not handle.closed:
            continue
        try:
            touch_private(f"{name}.lock")
            cache = ClientCache(name, size)
        except zc.lockfile.LockError:
            continue
        os.chmod(name, 0o600)
        _caches[name] = cache
        return cache
    return ClientCache(None, size)  # every slot in use: a temporary cache


def _forget_if_ahead_of(cache: Any, path: Path) -> None:
    """Empty a cache that has seen a transaction the file does not hold (an older copy
    of the file was put back): ZEO would refuse to connect with it, for ever."""
    from ganga_like.repository.file_tail import MAGIC, tail

    cached = cache.getLastTid()
    if not cached or cached == b"\0" * 8:
        return
    try:
        with open(path, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                return
            last = tail(f, os.fstat(f.fileno()).st_size)
    except (OSError, struct.error):
        return  # the file is not here (a server elsewhere): nothing to compare with
    if last is not None and cached > last[0]:
        log.info("the client cache %s was ahead of %s: emptied", cache.path, path)
        cache.clear()


# -- stopping -------------------------------------------------------------------------


def stop_server(repo_dir: Path, timeout: float = 10.0) -> bool:
    """Ask the live server to exit (clients reconnect to a new one); True if one ran."""
    pid = server_pid(repo_dir)
    if pid is None:
        return False
    from ganga_like.detached import stop_detached

    if not stop_detached(pid, lambda: server_pid(repo_dir) == pid, timeout):
        raise TimeoutError(f"repository server {pid} did not exit within {timeout} s")
    return True


@dataclass(frozen=True)
class IdleAnswer:
    """What the server said when asked to leave if idle."""

    pid: int
    stopped: bool
    sessions: int = 0  # connected when it declined
    session_pids: tuple[int, ...] = ()


def stop_idle_server(repo_dir: Path, timeout: float = 20.0) -> IdleAnswer | None:
    """Ask the live server of ``repo_dir`` to exit if no session is connected to it.

    None when no server runs or it did not answer within ``timeout`` (a server of an
    older version does not know the request); otherwise its answer. ``stopped``: it has
    left (or is leaving: it closes the file before its process ends)."""
    pid = server_pid(repo_dir)
    if pid is None:
        return None
    token = f"{os.getpid()}-{time.monotonic_ns()}"
    answer_path = repo_dir / STOP_ANSWER
    request = repo_dir / STOP_REQUEST
    answer_path.unlink(missing_ok=True)
    tmp = repo_dir / f".{STOP_REQUEST}.{os.getpid()}"
    tmp.write_text(token + "\n")
    os.replace(tmp, request)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                words = answer_path.read_text().split()
            except OSError:
                words = []
            if words[:1] == [token]:
                answer_path.unlink(missing_ok=True)
                if words[1:2] == ["stopping"]:
                    return IdleAnswer(pid, stopped=True)
                counts = [int(w) for w in words[2:] if w.isdigit()]
                return IdleAnswer(pid, False, counts[0] if counts else 0, tuple(counts[1:]))
            if server_pid(repo_dir) != pid:
                return IdleAnswer(pid, stopped=True)  # it left by itself meanwhile
            time.sleep(0.02)
        return None
    finally:
        request.unlink(missing_ok=True)


# -- keeping a server -----------------------------------------------------------------


class ServerKeeper(threading.Thread):
    """Watches a session's connection: when the server is gone (killed, crashed), starts a
    new one; the ZEO client reconnects to it by itself. Meanwhile reads and commits wait
    (up to ``connect_timeout``) instead of failing."""

    CHECK = 0.5

    def __init__(self, storage: Any, repo_dir: Path, options: StorageOptions) -> None:
        super().__init__(name="ganga-zeo-keeper", daemon=True)
        self.storage = storage
        self.repo_dir = repo_dir
        self.options = options
        self._stop_event = threading.Event()
        self.restarts = 0

    def stop(self) -> None:
        self._stop_event.set()

    def run(self) -> None:
        down_since: float | None = None
        warned = False
        while not self._stop_event.wait(self.CHECK):
            if self.storage.is_connected():
                down_since = None
                warned = False
                continue
            now = time.monotonic()
            if down_since is None:
                down_since = now  # give a restarting server a moment first
                continue
            if now - down_since < 2 * self.CHECK:
                continue
            try:
                if ensure_server(self.repo_dir, self.options):
                    self.restarts += 1
                    log.warning(
                        "the repository server of %s was gone: a new one was started", self.repo_dir
                    )
                down_since = time.monotonic()
            except Exception as exc:  # keep trying; say it once
                if not warned:
                    log.warning(
                        "the repository server of %s is gone and could not be restarted: %s",
                        self.repo_dir,
                        exc,
                    )
                    warned = True
