"""Which host holds a repository: the server's record (``zeo.pid``) is its claim.

The server writes its record (``PID ADDRESS host=NAME boot=ID``) before it opens
``Data.fs``, by an exclusive link, and refreshes it every heartbeat while it runs (see
:mod:`ganga_like.hosts`). A session, a server or a maintenance command on another host
that finds a live record there never opens the file for writing and never starts a
server: the file lock alone cannot be trusted to reach across hosts on NFS. A record of
another host that has missed its heartbeats (that host is gone or cut off) is taken over
by renaming it away, which only one taker achieves.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from ganga_like.errors import RepositoryBusyError, RepositoryError, RepositoryOnAnotherHostError
from ganga_like.hosts import Record, read_record, take_over, write_record

__all__ = ["PID_NAME", "check_not_held_elsewhere", "claim_for_server", "served_elsewhere"]

PID_NAME = "zeo.pid"
# A server's record not yet naming its address (it is opening the file).
NO_ADDRESS = "-"
CLAIM_ATTEMPTS = 20

log = logging.getLogger("ganga_like")


def served_elsewhere(repo_dir: Path, record: Record) -> RepositoryOnAnotherHostError:
    """The one line for a repository whose live server is on another host."""
    return RepositoryOnAnotherHostError(
        f"repository {repo_dir} is held by its server on {record.where()}; from this host "
        "open it read-only (--Repository.mode=readonly), or work on that host, or keep the "
        "repository on PostgreSQL (repository = postgresql://...) to use it from several hosts",
        host=str(record.host),
    )


def check_not_held_elsewhere(repo_dir: Path) -> None:
    """Refuse (one line) when a live server on another host holds ``repo_dir``; take a
    gone host's record over, so that this host may serve the file."""
    record = read_record(repo_dir / PID_NAME)
    if record is None or record.here:
        return
    if not record.gone:
        raise served_elsewhere(repo_dir, record)
    if take_over(record):
        log.warning(
            "the repository server of %s on %s is gone: this host takes the repository over",
            repo_dir,
            record.where(),
        )


def claim_for_server(repo_dir: Path, alive_here: Callable[[int], bool]) -> Path:
    """Make the record of this (server) process, before the file is opened.

    Refused when a live server holds the repository: on this host (``alive_here(pid)``,
    busy with its PID, so that a server on its way out is waited for) or on another.
    A dead server's record (this host) or a gone host's is taken over."""
    path = repo_dir / PID_NAME
    for _attempt in range(CLAIM_ATTEMPTS):
        if write_record(path, os.getpid(), NO_ADDRESS, exclusive=True):
            return path
        record = read_record(path)
        if record is None:
            # Removed meanwhile, or not a record at all (records are written whole).
            with contextlib.suppress(FileNotFoundError):
                if not path.read_text().split()[:1] or not path.read_text().split()[0].isdigit():
                    path.unlink()
            continue
        if record.here:
            if alive_here(record.pid):
                raise RepositoryBusyError(
                    f"repository {repo_dir} is served by its server (PID {record.pid})",
                    pid=record.pid,
                )
            take_over(record)  # a dead server's (this host): the file's lock agrees
        elif record.gone:
            take_over(record)
        else:
            raise served_elsewhere(repo_dir, record)
    raise RepositoryError(f"the record {path} kept changing; is another server starting?")
