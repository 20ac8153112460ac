"""The shared-mode server of one repository: ``python -m ganga_like.repository.zeo.server``.

    python -m ganga_like.repository.zeo.server GANGADIR [--idle-exit S] [--address HOST:PORT]
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ganga_like.errors import RepositoryBusyError, RepositoryCorruptError, RepositoryError
from ganga_like.hosts import Heartbeat, beat, read_record, write_record
from ganga_like.repository.packing import PackPolicy, maybe_pack_in_background
from ganga_like.repository.storage import ensure_private_dir, open_file_storage
from ganga_like.repository.zeo.client_storage import (
    FEATURES,
    MAX_OID_BATCH,
    STORE_BATCHES,
    VOTE_FINISH,
)
from ganga_like.repository.zeo.host_claim import PID_NAME, claim_for_server
from ganga_like.repository.zeo.shared import (
    STOP_ANSWER,
    STOP_REQUEST,
    STOP_REQUEST_LIFETIME,
    server_address,
    server_pid,
)
from ganga_like.repository.zeo.table_helper import start_table_server_later

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
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(process)d %(levelname)s %(name)s %(message)s",
    )
    logging.getLogger("ganga_like").setLevel(logging.INFO)  # packing reports too
    # A session that exits drops its connection (the server may be writing to it then):
    # ZEO logs that as an error; it is not.
    logging.getLogger("ZEO.asyncio.server").addFilter(_NotClientExits())
    ready = _Ready(args.ready_fd)
    try:
        return serve(
            args.gangadir.expanduser().resolve(),
            args.idle_exit,
            args.address,
            PackPolicy(args.pack_threshold_mb, args.pack_keep_days),
            ready,
        )
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
        return not (
            text.startswith("Disconnected")
            and ("ConnectionResetError" in text or "BrokenPipeError" in text)
        )


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


def serve(
    gangadir: Path, idle_exit: float, address_text: str, policy: PackPolicy, ready: _Ready
) -> int:
    repo_dir = gangadir / "repository"
    ensure_private_dir(gangadir)
    ensure_private_dir(repo_dir)
    stop = threading.Event()
    # The claim comes first: a live server of another host holding the file is found by
    # its record (its lock on the file may not reach this host on NFS).
    pid_file = claim_for_server(repo_dir, lambda pid: server_pid(repo_dir) == pid)
    heartbeat = Heartbeat(pid_file, lambda: _lost_claim(pid_file, stop))
    heartbeat.start()
    try:
        return _serve_claimed(repo_dir, idle_exit, address_text, policy, ready, stop)
    finally:
        heartbeat.stop()
        record = read_record(pid_file)
        if record is not None and record.pid == os.getpid() and record.here:
            pid_file.unlink(missing_ok=True)


def _lost_claim(pid_file: Path, stop: threading.Event) -> None:
    log.error(
        "the record %s is no longer this server's (another host took the repository "
        "over while this one missed its heartbeats): leaving",
        pid_file,
    )
    stop.set()


def _serve_claimed(
    repo_dir: Path,
    idle_exit: float,
    address_text: str,
    policy: PackPolicy,
    ready: _Ready,
    stop: threading.Event,
) -> int:
    _Server = _server_class()
    storage = open_file_storage(repo_dir / "Data.fs")
    address = server_address(repo_dir, address_text)
    if isinstance(address, str):
        # We hold the file's lock, so no other server of this repository is alive: a
        # socket left here is a dead one's.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(address)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    try:
        server = _Server(
            address,
            {"1": storage},
            invalidation_queue_size=INVALIDATION_QUEUE,
            transaction_timeout=TRANSACTION_TIMEOUT,
        )
    except OSError as exc:
        storage.close()
        raise RepositoryError(
            f"the repository server cannot listen on {address}: {exc.strerror or exc}"
        ) from None
    socket_inode = None
    if isinstance(address, str):
        os.chmod(address, 0o600)
        socket_inode = os.stat(address).st_ino
    # A request left by a maintenance command that gave up waiting was for another server.
    (repo_dir / STOP_REQUEST).unlink(missing_ok=True)
    shown = address if isinstance(address, str) else f"{address[0]}:{server.addr[1]}"
    if beat(repo_dir / PID_NAME, os.getpid()):  # still ours: now naming where it listens
        write_record(repo_dir / PID_NAME, os.getpid(), shown)
    server.start_thread(daemon=True)
    ready.send(f"ready {os.getpid()}")
    packer = maybe_pack_in_background(storage, repo_dir / "Data.fs", policy)
    start_table_server_later(repo_dir, stop)
    try:
        _wait_until_idle(server, idle_exit, stop, repo_dir)
        stop.set()  # leaving: no jobs-table server is started now
        # Leaving: first no new session can connect (a session starting now finds no
        # server and waits for this process to be gone before it starts the next one:
        # the file stays held until then), then the sessions still connected are
        # dropped (they reconnect to the next server) and the file is closed.
        _test_hold("exiting")
        _stop_listening(server)
        if socket_inode is not None and isinstance(address, str):
            _unlink_if(address, socket_inode)
        _test_hold("stopped-listening")
    finally:
        if packer is not None:
            packer.join()  # a pack cannot be interrupted; it finishes before the storage closes
        with contextlib.suppress(Exception):
            server.close()
        if socket_inode is not None and isinstance(address, str):
            _unlink_if(address, socket_inode)
        log.info("stopped")
    return 0


def _unlink_if(path: str, inode: int) -> None:
    """Remove our socket (not one a later server made in its place)."""
    with contextlib.suppress(FileNotFoundError):
        if os.stat(path).st_ino == inode:
            os.unlink(path)


def _stop_listening(server: Any) -> None:
    """Close the listening socket, in the server's thread; connected sessions stay."""
    stopped = threading.Event()
    loop = server.acceptor.event_loop

    def close() -> None:
        try:
            server.acceptor.server.close()
        finally:
            stopped.set()

    with contextlib.suppress(RuntimeError):  # the loop is closed already: nothing listens
        loop.call_soon_threadsafe(close)
        stopped.wait(5)


# Test hook: a directory. At each step of leaving (``exiting``: the idle timer fired,
# sessions can still connect; ``stopped-listening``: none can, the file is still held)
# the server creates DIR/STEP and waits (at most 300 s) for DIR/STEP.go, so that a test
# can start sessions at exactly that moment. Unset (always, outside tests) it does nothing.
TEST_HOLD_VARIABLE = "GANGA_LIKE_TEST_HOLD_SERVER_EXIT"


def _test_hold(step: str) -> None:
    place = os.environ.get(TEST_HOLD_VARIABLE)
    if not place:
        return
    with contextlib.suppress(OSError):
        (Path(place) / step).touch()
    go = Path(place) / f"{step}.go"
    deadline = time.monotonic() + 300
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def _server_class() -> Any:
    """ZEO's StorageServer, with what our clients ask of it beyond ZEO's protocol
    (:mod:`ganga_like.repository.zeo.client_storage`): new object ids in batches of up to
    MAX_OID_BATCH (ZEO's own cap is 100), records in batches (``storeb``), a commit's
    vote and finish in one call (``vote_finish``), a transaction's records kept in memory
    until the vote (ZEO pickles each into a temporary file and reads it back), and a
    client that leaves always forgotten."""
    from ZEO.StorageServer import StorageServer

    zeo_storage = _zeo_storage_class()

    class BatchStorageServer(StorageServer):  # type: ignore[misc]
        def create_client_handler(self) -> Any:
            return zeo_storage(self, self.read_only)

        def invalidate(
            self, zeo_storage: Any, storage_id: str, tid: bytes, invalidated: list[bytes]
        ) -> None:
            # ZEO's, but from the server's own thread (a commit) the other clients are
            # told at once, while the commit is made durable, rather than after it has
            # answered: those that had the records ask for them again sooner.
            invq = self.invq[storage_id]
            if len(invq) >= self.invq_bound:
                invq.pop()
            invq.insert(0, (tid, invalidated))
            here = threading.current_thread() is self.ganga_loop_thread
            for zs in self.zeo_storages_by_storage_id[storage_id]:
                if zs is not zeo_storage:
                    send = zs.async_ if here else zs.async_threadsafe
                    send("invalidateTransaction", tid, invalidated)

        ganga_loop_thread: threading.Thread | None = None

        def start_thread(self, daemon: bool = True) -> None:
            super().start_thread(daemon)
            self.ganga_loop_thread = self._StorageServer__thread

    return BatchStorageServer


def _zeo_storage_class() -> Any:
    """ZEO's handler of one client, answering the calls ``_server_class`` describes; the
    commit's steps that need nothing of ZEO's own are the functions below it."""
    from ZEO.StorageServer import ZEOStorage, registered_methods

    methods = frozenset(registered_methods | {STORE_BATCHES, VOTE_FINISH})

    class BatchZEOStorage(ZEOStorage):  # type: ignore[misc]
        def setup_delegation(self) -> None:
            super().setup_delegation()
            self.connection.methods = methods

        def get_info(self) -> dict[str, Any]:
            info: dict[str, Any] = super().get_info()
            if not self.client_conflict_resolution:  # vote_finish resolves them here
                info[FEATURES] = (STORE_BATCHES, VOTE_FINISH)
            return info

        def getInvalidations(self, tid: bytes) -> Any:
            # ZEO answers with the changes since ``tid`` if it is within the transactions
            # it remembers, even when no transaction of this file has that id: a client
            # cache of another file (one a recovery replaced) would keep its records.
            # Not knowing the transaction makes the client empty its cache instead.
            known = self.server.invq[self.storage_id]
            if tid != self.storage.lastTransaction() and not any(t == tid for t, _ in known):
                return None
            return super().getInvalidations(tid)

        def new_oids(self, n: int = 100) -> list[bytes]:
            if self.read_only:
                return list(super().new_oids(n))  # raises ReadOnlyError
            return [self.storage.new_oid() for _ in range(max(1, min(n, MAX_OID_BATCH)))]

        tpc_begin = _begin_in_memory
        storeb = _store_batch
        vote_finish = _vote_finish_locked
        _vote_finish = _vote_and_finish

        def notify_disconnected(self) -> None:
            # ZEO's aborts the client's transaction first: when that fails (a full
            # disk), the client would stay registered for ever and the server never
            # go idle.
            try:
                super().notify_disconnected()
            except Exception as exc:
                log.warning(
                    "a client left in the middle of a transaction that could not be aborted: %s",
                    exc,
                )
                self.transaction = None
                self.connected = False
                self.server.close_conn(self)

    return BatchZEOStorage


def _begin_in_memory(
    zs: Any,
    id: int,
    user: bytes,
    description: bytes,
    ext: Any,
    tid: bytes | None = None,
    status: str = " ",
) -> None:
    """``BatchZEOStorage.tpc_begin``: ZEO's, with the commit log in memory."""
    from ZODB.Connection import TransactionMetaData
    from ZODB.POSException import ReadOnlyError, StorageTransactionError

    if zs.read_only:
        raise ReadOnlyError()
    current: Any = getattr(zs, "transaction", None)
    if current is not None:
        if current.id == id:
            zs.log(f"duplicate tpc_begin({id!r})")
            return
        raise StorageTransactionError("Multiple simultaneous tpc_begin requests from one client.")
    t = TransactionMetaData(user, description, ext)
    t.id = id
    zs.serials = []
    zs.conflicts = {}
    zs.invalidated = []
    zs.txnlog = MemoryCommitLog()
    zs.blob_log = []
    zs.tid = tid
    zs.status = status
    zs.stats.active_txns += 1
    zs.transaction = t


def _store_batch(zs: Any, records: list[tuple[bytes, bytes, bytes]], id: int) -> None:
    """``BatchZEOStorage.storeb``: records of the transaction, many in one call."""
    from ZODB.POSException import StorageTransactionError

    zs._check_tid(id, exc=StorageTransactionError)
    zs.stats.stores += len(records)
    txnlog = zs.txnlog
    for oid, serial, data in records:
        txnlog.store(oid, serial, data)


def _vote_finish_locked(zs: Any, id: int) -> Any:
    """``BatchZEOStorage.vote_finish``: the vote and the finish in one call, under the
    storage's commit lock."""
    from ZODB.POSException import StorageTransactionError

    zs._check_tid(id, exc=StorageTransactionError)
    return zs.lock_manager.lock(zs, zs._vote_finish)


def _vote_and_finish(zs: Any) -> tuple[list[bytes], bytes] | None:
    """``BatchZEOStorage._vote_finish``: run under the lock; None when the client left."""
    resolved = zs._vote()
    if not zs.locked:
        return None  # the client left meanwhile
    try:
        # ZEO's tpc_finish. The lock is released before the answer is sent, but a client
        # waiting for it runs only after this call has answered (the same thread), so no
        # later commit is announced to this client first.
        zs.stats.commits += 1
        zs.storage.tpc_finish(zs.transaction, zs._invalidate)
        zs.async_("info", zs.get_size_info())
        tid: bytes = zs.storage.lastTransaction()
    finally:
        zs._clear_transaction()
    return list(resolved or ()), tid


# Bytes of one transaction's records the server keeps in memory before the rest goes to
# ZEO's temporary file.
MEMORY_LOG = 256 << 20


class MemoryCommitLog:
    """ZEO's CommitLog (a client's records between its stores and its vote) in memory,
    until it grows past MEMORY_LOG."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, tuple[Any, ...]]] = []
        self.stores = 0
        self.bytes = 0
        self.spilled: Any = None

    def size(self) -> int:
        return self.bytes

    def _add(self, op: str, args: tuple[Any, ...], size: int) -> None:
        self.stores += 1
        self.bytes += size
        if self.spilled is not None:
            self.spilled.pickler.dump((op, args))
            return
        self.ops.append((op, args))
        if self.bytes > MEMORY_LOG:
            from ZEO.StorageServer import CommitLog

            self.spilled = CommitLog()
            for entry in self.ops:
                self.spilled.pickler.dump(entry)
            self.ops = []

    def store(self, oid: bytes, serial: bytes, data: bytes | None) -> None:
        self._add("_store", (oid, serial, data), len(data or b"") + 16)

    def delete(self, oid: bytes, serial: bytes) -> None:
        self._add("_delete", (oid, serial), 16)

    def checkread(self, oid: bytes, serial: bytes) -> None:
        self._add("_checkread", (oid, serial), 16)

    def restore(self, oid: bytes, serial: bytes, data: bytes | None, prev_txn: bytes) -> None:
        self._add("_restore", (oid, serial, data, prev_txn), len(data or b"") + 24)

    def undo(self, transaction_id: bytes) -> None:
        self._add("_undo", (transaction_id,), 8)

    def __iter__(self) -> Iterator[tuple[str, tuple[Any, ...]]]:
        if self.spilled is not None:
            self.spilled.stores = self.stores
            return iter(self.spilled)
        return iter(self.ops)

    def close(self) -> None:
        self.ops = []
        if self.spilled is not None:
            self.spilled.close()
            self.spilled = None


def live_clients(server: Any) -> int:
    """How many clients are still connected.

    ZEO forgets a client when its connection drops, but not when the server closed the
    connection itself (it does when an asynchronous call fails, e.g. a client's second
    tpc_begin after a transaction that could not be aborted on a full disk): such a
    client is not counted, and is forgotten here, in the server's thread (its
    transaction aborted, as for any client that leaves)."""
    live = 0
    for clients in list(server.zeo_storages_by_storage_id.values()):
        for zs in list(clients):
            connection = getattr(zs, "connection", None)
            if connection is not None and connection.connected:
                live += not _follower(zs)
            elif connection is not None and not getattr(zs, "ganga_forgotten", False):
                zs.ganga_forgotten = True
                with contextlib.suppress(RuntimeError):  # the loop is already closed
                    server.acceptor.event_loop.call_soon_threadsafe(zs.notify_disconnected)
    return live


def _follower(zs: Any) -> bool:
    """A client that keeps nothing alive (``StorageOptions.follower``): its label is
    ``ganga pid N follower``."""
    return str(getattr(zs, "log_label", "")).split()[3:4] == ["follower"]


def _wait_until_idle(server: Any, idle_exit: float, stop: threading.Event, repo_dir: Path) -> None:
    idle_since: float | None = None
    while not stop.wait(IDLE_CHECK):
        clients = live_clients(server)
        if _asked_to_stop_if_idle(server, clients, repo_dir):
            return
        now = time.monotonic()
        if clients:
            idle_since = None
        elif idle_since is None:
            idle_since = now
        elif now - idle_since >= idle_exit:
            log.info("no client for %.0f s: exiting", idle_exit)
            return


def _asked_to_stop_if_idle(server: Any, clients: int, repo_dir: Path) -> bool:
    """Answer a maintenance command (``ganga repository recover|reset``) that needs the
    file: leave now if no session is connected, else say which are (their PIDs)."""
    request = repo_dir / STOP_REQUEST
    try:
        age = time.time() - request.stat().st_mtime
        token = request.read_text().strip()
        request.unlink()
    except OSError:
        return False
    if not token or age > STOP_REQUEST_LIFETIME:
        return False
    if clients:
        answer = f"{token} declined {clients} {' '.join(str(p) for p in client_pids(server))}"
    else:
        answer = f"{token} stopping"
    tmp = repo_dir / f".{STOP_ANSWER}.{os.getpid()}"
    tmp.write_text(answer + "\n")
    os.replace(tmp, repo_dir / STOP_ANSWER)
    if clients:
        log.info("asked to stop for maintenance: %d session(s) connected, staying", clients)
        return False
    log.info("asked to stop for maintenance: no session connected, exiting")
    return True


def client_pids(server: Any) -> list[int]:
    """The PIDs connected sessions gave in their label (``ganga pid N``), where known."""
    pids: list[int] = []
    for clients in list(server.zeo_storages_by_storage_id.values()):
        for zs in list(clients):
            words = str(getattr(zs, "log_label", "")).split()
            if (
                len(words) >= 3
                and words[:2] == ["ganga", "pid"]
                and words[2].isdigit()
                and not _follower(zs)
            ):
                pids.append(int(words[2]))
    return sorted(set(pids))


if __name__ == "__main__":
    sys.exit(main())
