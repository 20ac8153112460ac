"""The jobs-table server: ``python -m ganga_like.commands.table_server GANGADIR``.

    python -m ganga_like.commands.table_server GANGADIR [--idle-exit S]

``ganga jobs`` in a fresh process pays for importing ZODB, ZEO and the model and for
reading every job before it prints a row; the jobs-table cache
(:mod:`ganga_like.commands.jobs_cache`) spares that only while nothing has changed. This
process keeps a session of the repository open (a client of the repository's server like
any other, started with the same interpreter, import path and environment as the
``ganga jobs`` that started it) and answers ``ganga jobs`` on a private Unix socket,
``<gangadir>/repository/jobs-table.sock``: its jobs stay loaded, ZEO's invalidations tell
it which of them another session changed, and so a listing costs reading those again and
building the rows, done by the same functions as the plain path
(:func:`ganga_like.commands.listing.table_of`).

Never stale: before each answer the server is asked for its last transaction (one round
trip, so every invalidation it sent before has been applied here) and the rows are read
in a new transaction that holds at least that one; a listing that starts after another
session's commit returned therefore shows that commit. Only a settled repository is
answered (what the cache requires: no job followed by the monitor, no submission,
retry or postprocessing pending, no broken row), so the plain path's monitoring cycle
would have changed nothing; otherwise the answer is "ask the plain path".

Kept ahead of the listings: when another session's commits stop (nothing new for one
short tick) or every two seconds while they go on, the table is read again as of
the last transaction, and kept with its transaction's id; a request finding that id still
the server's last answers with it at once. So the first listing after another process
created or changed jobs reads nothing. The repository's server starts one of these once
it has run for a few seconds (:mod:`ganga_like.repository.zeo.table_helper`), so that one
is ready before the first listing.

One process per repository (a lock file), leaving after ``--idle-exit`` seconds without a
request (``inf``: only with the repository's server), and always when the repository's
server leaves: it never keeps that one alive. Only the default (shared) mode of a
repository file has one.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ganga_like.commands import jobs_cache
from ganga_like.repository.file_tail import file_stamp
from ganga_like.repository.options import socket_path

__all__ = ["IDLE_EXIT", "LOCK_NAME", "SOCKET_NAME", "Table", "answer", "main"]

SOCKET_NAME = "jobs-table.sock"
SHORT_SUFFIX = ".jobs-table.sock"  # its name when SOCKET_NAME's path is too long
LOCK_NAME = "jobs-table.lock"
LOG_NAME = "jobs-table.log"
IDLE_EXIT = 60.0
CHECK = 0.5  # how often, when no request comes, it looks whether the server is still there
TICK = 0.05  # how soon, once another session's commits stop, the table is read again
REFRESH_EVERY = 2.0  # how often at most while they go on
REQUEST_TIMEOUT = 5.0  # a client that connects and says nothing is dropped after this


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m " + __spec__.name if __spec__ else None)
    parser.add_argument("gangadir", type=Path)
    parser.add_argument("--idle-exit", type=float, default=IDLE_EXIT)
    parser.add_argument("--master-status-order", default="")
    args = parser.parse_args(argv)
    os.umask(0o077)
    repo_dir = args.gangadir.expanduser().resolve() / "repository"
    lock = os.open(repo_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another one serves this repository
    from ganga_like.commands.context import configured_settings
    from ganga_like.runtime.session import close_session, open_session

    settings = configured_settings()
    settings.gangadir = args.gangadir
    settings.monitoring = False
    settings.repository_follower = True
    if args.master_status_order:  # the listing's that started it, whatever the files say
        settings.master_status_order = args.master_status_order
    if jobs_cache.stamp_before_opening(settings) is None or settings.repository_mode not in (
        "shared",
        "auto",
    ):
        return 0
    session = open_session(settings)
    try:
        _listen(socket_path(repo_dir, SOCKET_NAME, SHORT_SUFFIX), session, args.idle_exit, repo_dir)
    except OSError as exc:  # the socket's place is taken: the listings read the repository
        print(f"the jobs-table server cannot listen: {exc}", file=sys.stderr)
    finally:
        close_session()
    return 0


def _listen(path: Path, session: Any, idle_exit: float, repo_dir: Path) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a dead one's: we hold the lock
        listener.bind(str(path))
        inode = path.stat().st_ino
        try:
            path.chmod(0o600)
            listener.listen(16)
            # Every job read once now (a listing meanwhile waits in the backlog): later
            # answers read again only what other sessions change.
            table = Table()
            with contextlib.suppress(Exception):
                table.refresh(session)
            _serve(listener, session, idle_exit, table, lambda: _server_gone(session, repo_dir))
        finally:
            with contextlib.suppress(OSError):
                if path.stat().st_ino == inode:  # ours, not a later server's
                    path.unlink()
    finally:
        listener.close()


def _server_gone(session: Any, repo_dir: Path) -> bool:
    """Whether the repository's server has left. The client hears of it from its I/O
    thread a moment after the process has gone, so the server's pid record on this host
    is asked too (a server on another host has only the connection to tell)."""
    if not session.repo.db.storage.is_connected():
        return True
    from ganga_like.hosts import read_record
    from ganga_like.repository.zeo import shared
    from ganga_like.repository.zeo.host_claim import PID_NAME

    record = read_record(repo_dir / PID_NAME)
    if record is None:
        return True
    return record.here and shared.server_pid(repo_dir) is None


def _serve(
    listener: socket.socket,
    session: Any,
    idle_exit: float,
    table: Table,
    server_gone: Callable[[], bool],
) -> None:
    """Answer until idle for ``idle_exit`` seconds, or until the repository's server has
    gone (this client keeps it neither alive nor restarts it); between requests, keep
    the table up to date with other sessions' commits."""
    storage = session.repo.db.storage
    last = time.monotonic()
    seen = storage.lastTransaction()  # the last the server told of: no round trip
    refreshed = time.monotonic()
    while storage.is_connected() and time.monotonic() - last < idle_exit:
        behind = storage.lastTransaction().hex() != table.tid
        listener.settimeout(TICK if behind else CHECK)
        try:
            client, _ = listener.accept()
        except TimeoutError:
            newest = storage.lastTransaction()
            now = time.monotonic()
            if behind and (newest == seen or now - refreshed >= REFRESH_EVERY):
                with contextlib.suppress(Exception):  # a request will say why
                    table.refresh(session)
                refreshed = now
            seen = newest
            continue
        with client:
            client.settimeout(REQUEST_TIMEOUT)
            try:
                request = json.loads(_read_line(client))
                if server_gone():
                    # Its server left: reading would wait for one the listing is yet to
                    # start. No answer sends the listing to the plain read at once.
                    break
                reply = answer(session, request, table)
            except (OSError, ValueError):
                continue
            except Exception as exc:  # a read that failed: the plain path says why
                if server_gone():
                    break  # its server left while it read: as above
                reply = {"rows": None, "why": f"{type(exc).__name__}: {exc}"}
            with contextlib.suppress(OSError):
                client.sendall(json.dumps(reply, separators=(",", ":")).encode())
        last = time.monotonic()


def _read_line(client: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = client.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


class Table:
    """The last answer read, and the id of the transaction it was read as of."""

    def __init__(self) -> None:
        self.tid: str | None = None
        self.reply: dict[str, Any] = {"rows": None, "why": "not read yet"}

    def refresh(self, session: Any) -> None:
        answer(session, {"settings": jobs_cache.settings_key(session.settings)}, self)


def _save(session: Any, held: str, found: tuple[int, list[dict[str, Any]]]) -> None:
    """Write the jobs-table cache too, when the repository file's last transaction is
    the one the rows were read as of (the plain path's rule): a listing after the
    repository's server left then reads it instead of starting the server again."""
    from ganga_like.gpi.job_table import COLUMNS

    gangadir = jobs_cache.gangadir_of(session.settings)
    stamp = file_stamp(jobs_cache.repository_file(gangadir))
    if stamp is not None and stamp.tid == held:
        next_id, rows = found
        jobs_cache.save(gangadir, stamp, session.settings, next_id, COLUMNS, rows, by_server=True)


def answer(session: Any, request: Any, table: Table | None = None) -> dict[str, Any]:
    """The rows of every job as the plain path reads them now, or ``rows: None``; the
    ``table``'s when nothing was committed since it was read (and then kept in it)."""
    from ganga_like.commands.listing import snapshot_tid, table_of
    from ganga_like.gpi.job_table import COLUMNS

    settings = session.settings
    if not isinstance(request, dict) or request.get("settings") != jobs_cache.settings_key(
        settings
    ):
        return {"rows": None, "why": "other settings"}
    repo = session.repo
    storage = repo.db.storage
    # One round trip: every invalidation the server sent before its answer is applied.
    last = storage._call("lastTransaction").hex()
    if table is not None and table.tid == last:
        return table.reply
    repo.abort()
    conn = repo.connection()
    conn.transaction_manager.begin()  # a new snapshot, holding ``last`` at least
    try:
        found = table_of(session)
        held = snapshot_tid(conn)
        if held is None or held < last:
            return {"rows": None, "why": "behind the server"}
        reply: dict[str, Any] = {"rows": None, "why": "not settled"}
        if found is not None:
            next_id, rows = found
            reply = {
                "columns": list(COLUMNS),
                "rows": rows,
                "next_id": next_id,
                "settings": jobs_cache.settings_key(settings),
                **jobs_cache.running_code(),
                "code": jobs_cache.loaded_code(),
            }
        if table is not None:
            table.tid, table.reply = held, reply
            if found is not None:
                _save(session, held, found)
        return reply
    finally:
        repo.abort()


if __name__ == "__main__":
    sys.exit(main())
