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

One process per repository (a lock file), leaving after ``--idle-exit`` seconds without a
request (so that the repository's server can go idle too). Only the default (shared)
mode of a repository file has one.
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
from pathlib import Path
from typing import Any

from ganga_like.commands import jobs_cache

__all__ = ["IDLE_EXIT", "LOCK_NAME", "SOCKET_NAME", "answer", "main"]

SOCKET_NAME = "jobs-table.sock"
LOCK_NAME = "jobs-table.lock"
LOG_NAME = "jobs-table.log"
IDLE_EXIT = 60.0
CHECK = 0.5  # how often, when no request comes, it looks whether the server is still there
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
        _listen(repo_dir / SOCKET_NAME, session, args.idle_exit)
    except OSError as exc:  # the socket's place is taken: the listings read the repository
        print(f"the jobs-table server cannot listen: {exc}", file=sys.stderr)
    finally:
        close_session()
    return 0


def _listen(path: Path, session: Any, idle_exit: float) -> None:
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
            with contextlib.suppress(Exception):
                answer(session, {"settings": jobs_cache.settings_key(session.settings)})
            _serve(listener, session, idle_exit)
        finally:
            with contextlib.suppress(OSError):
                if path.stat().st_ino == inode:  # ours, not a later server's
                    path.unlink()
    finally:
        listener.close()


def _serve(listener: socket.socket, session: Any, idle_exit: float) -> None:
    """Answer until idle for ``idle_exit`` seconds, or until the repository's server has
    gone (this client keeps it neither alive nor restarts it)."""
    storage = session.repo.db.storage
    listener.settimeout(CHECK)
    last = time.monotonic()
    while storage.is_connected() and time.monotonic() - last < idle_exit:
        try:
            client, _ = listener.accept()
        except TimeoutError:
            continue
        with client:
            client.settimeout(REQUEST_TIMEOUT)
            try:
                request = json.loads(_read_line(client))
                if not storage.is_connected():
                    # Its server left: reading would wait for one the listing is yet to
                    # start. No answer sends the listing to the plain read at once.
                    break
                reply = answer(session, request)
            except (OSError, ValueError):
                continue
            except Exception as exc:  # a read that failed: the plain path says why
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


def answer(session: Any, request: Any) -> dict[str, Any]:
    """The rows of every job as the plain path reads them now, or ``rows: None``."""
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
    last = storage._call("lastTransaction")
    repo.abort()
    conn = repo.connection()
    conn.transaction_manager.begin()  # a new snapshot, holding ``last`` at least
    try:
        table = table_of(session)
        held = snapshot_tid(conn)
        if table is None or held is None or held < last.hex():
            return {"rows": None, "why": "not settled"}
        next_id, rows = table
        return {
            "columns": list(COLUMNS),
            "rows": rows,
            "next_id": next_id,
            "settings": jobs_cache.settings_key(settings),
            "interpreter": [os.path.realpath(sys.executable), sys.version],
            "package": str(Path(jobs_cache.__file__).resolve().parents[1]),
            "code": jobs_cache.loaded_code(),
        }
    finally:
        repo.abort()


if __name__ == "__main__":
    sys.exit(main())
