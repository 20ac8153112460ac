"""The shared-mode server of one repository: ``python -m ganga_like.repository.zeo_server``.

    python -m ganga_like.repository.zeo_server GANGADIR [--idle-exit S] [--address HOST:PORT]
        [--ready-fd N] [--pack-threshold-mb M] [--pack-keep-days D]

It opens ``GANGADIR/repository/Data.fs`` (checked first, like an embedded session does),
serves it with ZEO's StorageServer on the private Unix socket ``zeo.sock`` (or on TCP when
an address is given), writes ``zeo.pid``, and exits after ``--idle-exit`` seconds without a
client, or on SIGTERM/SIGINT. It runs with the sessions' ``sys.path`` (PYTHONPATH), so
write conflicts on our objects are resolved here with their own ``_p_resolveConflict``.

``--ready-fd`` is the write end of a pipe from the session that started it: one line,
``ready PID``, ``busy PID MESSAGE``, ``corrupt MESSAGE`` or ``error MESSAGE``, then closed.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ganga_like.errors import RepositoryBusyError, RepositoryCorruptError, RepositoryError
from ganga_like.repository.packing import PackPolicy, maybe_pack_in_background
from ganga_like.repository.shared import MAX_OID_BATCH, PID_NAME, server_address
from ganga_like.repository.storage import ensure_private_dir, open_file_storage

log = logging.getLogger("ganga_like.zeo_server")

# Commits are bounded: a client that stops in the middle of one (a stopped process) loses
# its transaction after this long, instead of blocking every other session.
TRANSACTION_TIMEOUT = 60.0
# Transactions whose changed objects the server remembers, so a client that reconnects
# (or a session reopened with its persistent cache) revalidates quickly.
INVALIDATION_QUEUE = 10_000
IDLE_CHECK = 0.25


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m " + __spec__.name if __spec__ else None)
    parser.add_argument("gangadir", type=Path)
    parser.add_argument("--idle-exit", type=float, default=60.0)
    parser.add_argument("--address", default="")
    parser.add_argument("--ready-fd", type=int, default=-1)
    parser.add_argument("--pack-threshold-mb", type=float, default=0.0)
    parser.add_argument("--pack-keep-days", type=float, default=7.0)
    args = parser.parse_args(argv)
    os.umask(0o077)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(process)d %(levelname)s %(name)s %(message)s")
    logging.getLogger("ganga_like").setLevel(logging.INFO)  # packing reports too
    # A session that exits drops its connection: ZEO logs that as an error; it is not.
    logging.getLogger("ZEO.asyncio.server").addFilter(_NotClientExits())
    ready = _Ready(args.ready_fd)
    try:
        return serve(args.gangadir.expanduser().resolve(), args.idle_exit, args.address,
                     PackPolicy(args.pack_threshold_mb, args.pack_keep_days), ready)
    except RepositoryBusyError as exc:
        ready.send(f"busy {exc.pid or 0} {exc}")
    except RepositoryCorruptError as exc:
        ready.send(f"corrupt {exc}")
    except RepositoryError as exc:
        ready.send(f"error {exc}")
    except Exception as exc:  # tell the waiting session, and leave a traceback in the log
        log.exception("the repository server failed")
        ready.send(f"error the repository server failed: {type(exc).__name__}: {exc}")
    return 1


class _NotClientExits(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not (text.startswith("Disconnected") and "ConnectionResetError" in text)


class _Ready:
    """The one-line answer to the session waiting for this server."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, line: str) -> None:
        log.info("%s", line)
        if self.fd < 0:
            return
        with contextlib.suppress(OSError):
            os.write(self.fd, (" ".join(line.split()) + "\n").encode())
            os.close(self.fd)
        self.fd = -1


def serve(gangadir: Path, idle_exit: float, address_text: str, policy: PackPolicy,
          ready: _Ready) -> int:
    _Server = _server_class()
    repo_dir = gangadir / "repository"
    ensure_private_dir(gangadir)
    ensure_private_dir(repo_dir)
    storage = open_file_storage(repo_dir / "Data.fs")
    address = server_address(repo_dir, address_text)
    if isinstance(address, str):
        # We hold the file's lock, so no other server of this repository is alive: a
        # socket left here is a dead one's.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    try:
        server = _Server(address, {"1": storage},
                               invalidation_queue_size=INVALIDATION_QUEUE,
                               transaction_timeout=TRANSACTION_TIMEOUT)
    except OSError as exc:
        storage.close()
        raise RepositoryError(f"the repository server cannot listen on {address}: "
                              f"{exc.strerror or exc}") from None
    socket_inode = None
    if isinstance(address, str):
        os.chmod(address, 0o600)
        socket_inode = os.stat(address).st_ino
    pid_file = repo_dir / PID_NAME
    shown = address if isinstance(address, str) else f"{address[0]}:{server.addr[1]}"
    tmp = repo_dir / f".{PID_NAME}.{os.getpid()}"
    tmp.write_text(f"{os.getpid()} {shown}\n")
    os.replace(tmp, pid_file)
    server.start_thread(daemon=True)
    ready.send(f"ready {os.getpid()}")
    packer = maybe_pack_in_background(storage, repo_dir / "Data.fs", policy)
    try:
        _wait_until_idle(server, idle_exit, stop)
    finally:
        if packer is not None:
            packer.join()  # a pack cannot be interrupted; it finishes before the storage closes
        with contextlib.suppress(Exception):
            server.close()
        if socket_inode is not None and isinstance(address, str):
            with contextlib.suppress(FileNotFoundError):
                if os.stat(address).st_ino == socket_inode:
                    os.unlink(address)
        with contextlib.suppress(OSError, ValueError, IndexError):
            if int(pid_file.read_text().split()[0]) == os.getpid():
                pid_file.unlink()
        log.info("stopped")
    return 0


def _server_class() -> Any:
    """ZEO's StorageServer, giving new object ids in batches of up to MAX_OID_BATCH (ZEO's
    own cap is 100), which our clients ask for when they create many objects at once."""
    from ZEO.StorageServer import StorageServer, ZEOStorage

    class BatchZEOStorage(ZEOStorage):  # type: ignore[misc]
        def new_oids(self, n: int = 100) -> list[bytes]:
            if self.read_only:
                return list(super().new_oids(n))  # raises ReadOnlyError
            return [self.storage.new_oid() for _ in range(max(1, min(n, MAX_OID_BATCH)))]

    class BatchStorageServer(StorageServer):  # type: ignore[misc]
        def create_client_handler(self) -> Any:
            return BatchZEOStorage(self, self.read_only)

    return BatchStorageServer


def _wait_until_idle(server: Any, idle_exit: float, stop: threading.Event) -> None:
    idle_since: float | None = None
    while not stop.wait(IDLE_CHECK):
        clients = sum(len(c) for c in server.zeo_storages_by_storage_id.values())
        now = time.monotonic()
        if clients:
            idle_since = None
        elif idle_since is None:
            idle_since = now
        elif now - idle_since >= idle_exit:
            log.info("no client for %.0f s: exiting", idle_exit)
            return


if __name__ == "__main__":
    sys.exit(main())
