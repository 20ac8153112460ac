"""Starting the jobs-table server beside the repository's server.

``ganga jobs`` is answered without reading the repository by the jobs-table server
(``python -m ganga_like.commands.table_server``), which keeps the jobs table of the
repository up to date with every commit. Started by the first listing, it would miss the
first listing after another process created or changed the jobs; so the repository's
server starts it too, once it has run for :data:`START_AFTER` seconds (a server that lives
less, as a script's or a test's, costs nothing more), with the same
interpreter, import path and environment. It leaves with the repository's server (it is
a follower: it keeps that one alive no longer) and is started by name, as a process: this
layer imports nothing of the commands.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from pathlib import Path

from ganga_like.detached import start_detached

__all__ = ["START_AFTER", "start_table_server_later"]

MODULE = "ganga_like.commands.table_server"
LOG_NAME = "jobs-table.log"  # the table server's (a test checks they agree)
START_AFTER = 2.0


def start_table_server_later(repo_dir: Path, stop: threading.Event) -> threading.Thread:
    """Start the jobs-table server of ``repo_dir`` in :data:`START_AFTER` seconds unless
    ``stop`` is set first; never raises (the listings then start it themselves)."""

    def start() -> None:
        if stop.wait(START_AFTER):
            return
        argv = [sys.executable, "-m", MODULE, str(repo_dir.parent)]
        argv += ["--idle-exit", "inf"]
        with contextlib.suppress(Exception):
            # Waited for here, so that one that leaves first is no zombie of this server.
            start_detached(argv, repo_dir / LOG_NAME).proc.wait()

    thread = threading.Thread(target=start, name="jobs-table start", daemon=True)
    thread.start()
    return thread
