"""Asking the jobs-table server (:mod:`ganga_like.commands.table_server`) for ``ganga jobs``.

Used when the jobs-table cache cannot answer (something changed since the table was last
read): one request on the server's socket instead of importing ZODB and the model and
reading every job. The answer is used only if it was computed as this process would
compute it: the same settings, interpreter and ``ganga_like`` package, every module file
the server loaded unchanged since, and the repository opening as before
(:func:`ganga_like.commands.jobs_cache.opens_as_before`). Anything else, or no server, or
an answer that is not whole, means the plain path, which starts the server for the next
listing (:func:`start_server`). Imports nothing heavier than the jobs-table cache does.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ganga_like.commands import jobs_cache
from ganga_like.gpi.table_text import render_table
from ganga_like.repository.options import socket_path

if TYPE_CHECKING:
    from ganga_like.config.fast_settings import ListingSettings

__all__ = ["ANSWER_TIMEOUT", "asked_answer", "served", "start_server"]

SOCKET_NAME = "jobs-table.sock"  # table_server's (a test checks they agree)
SHORT_SUFFIX = ".jobs-table.sock"  # its name when SOCKET_NAME's path is too long
LOG_NAME = "jobs-table.log"
SERVER_MODULE = "ganga_like.commands.table_server"
# A first answer reads every job (as the plain path would): under load it takes seconds.
# A server that hangs costs a listing this long, then the plain path answers.
ANSWER_TIMEOUT = 10.0


def served(settings: ListingSettings) -> bool:
    """Whether a repository opened with ``settings`` can have a jobs-table server: the
    default (shared) mode of a repository file."""
    return settings.repository_mode in ("shared", "auto") and not settings.repository_url


def _socket_path(settings: ListingSettings) -> Path:
    return socket_path(jobs_cache.gangadir_of(settings) / "repository", SOCKET_NAME, SHORT_SUFFIX)


def asked_answer(settings: ListingSettings, *, as_json: bool) -> str | None:
    """What ``ganga jobs`` (``--json``) prints, from the jobs-table server; None when it
    cannot say (no server, another code or settings, a repository not settled)."""
    if not served(settings):
        return None
    reply = _ask(_socket_path(settings), {"settings": jobs_cache.settings_key(settings)})
    if not isinstance(reply, dict):
        return None
    columns: Any = reply.get("columns")
    rows: Any = reply.get("rows")
    next_id = reply.get("next_id")
    if not (jobs_cache.well_formed(columns, rows) and isinstance(next_id, int)):
        return None
    if reply.get("settings") != jobs_cache.settings_key(settings):
        return None
    if {k: reply.get(k) for k in ("interpreter", "package")} != jobs_cache.running_code():
        return None
    if not jobs_cache.code_unchanged(reply.get("code")):
        return None
    gangadir = jobs_cache.gangadir_of(settings)
    if not jobs_cache.opens_as_before(gangadir, jobs_cache.repository_file(gangadir), next_id):
        return None
    if as_json:
        return json.dumps(rows, indent=1)
    return render_table(rows, columns)


def _ask(path: Path, request: dict[str, Any]) -> Any:
    """The server's reply to ``request``, or None (no server, no whole answer)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(ANSWER_TIMEOUT)
            sock.connect(str(path))
            sock.sendall(json.dumps(request).encode() + b"\n")
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := sock.recv(1 << 20):
                chunks.append(chunk)
        return json.loads(b"".join(chunks))
    except (OSError, ValueError, RecursionError):
        return None


def start_server(settings: ListingSettings) -> None:
    """Start the jobs-table server of this repository, detached, if none answers; it
    leaves by itself (idle, or with the repository's server). Never raises."""
    if not served(settings):
        return
    path = _socket_path(settings)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(path))
        return  # one runs
    except OSError:
        pass
    from ganga_like.detached import start_detached

    try:
        argv = [sys.executable, "-m", SERVER_MODULE, str(jobs_cache.gangadir_of(settings))]
        argv += ["--idle-exit", str(settings.zeo_idle_exit)]
        argv += ["--master-status-order", settings.master_status_order]
        start_detached(argv, path.with_name(LOG_NAME))
    except OSError:
        pass
