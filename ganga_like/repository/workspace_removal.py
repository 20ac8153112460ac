"""Removed jobs' workspaces, deleted behind the removal.

Removing a job is one transaction; deleting its workspace (600,000 files for 100,000
subjobs) would take longer than the rest many times over, so it is done afterwards by a
thread of this process, and nothing waits for it:

1. the removal's transaction records the job's id in the root's ``workspaces_to_delete``
   (see :func:`record_removal`): committed together, the job is gone from the repository
   and its workspace is due for deletion;
2. after the commit, the workspace is renamed into ``workspace/.removed/`` (one ``rename``),
   so that nothing with the job's id is left in the workspace;
3. a background thread deletes whatever ``.removed/`` holds.

A crash after 1 leaves the id recorded, after 2 the directory in ``.removed/``: the next
opening of the repository (any session, any command that may write) sets aside the
workspaces still recorded and deletes ``.removed/`` behind it again.  Ids whose
workspace is gone are dropped from the record at the next removal.  A job id
is never given again (``checks.orphans.first_free_id``), so a recorded id never names a
newer job.  Several processes deleting the same directory at once is harmless.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ganga_like.repository.trees import IdSet

__all__ = [
    "REMOVED_DIR",
    "TO_DELETE_KEY",
    "delete_behind",
    "record_removal",
    "resume_removals",
    "set_aside",
]

log = logging.getLogger("ganga_like")

TO_DELETE_KEY = "workspaces_to_delete"
# Not a job id, so that the checks that look for job directories never see it.
REMOVED_DIR = ".removed"

_deleting = threading.Lock()  # one deleting thread per process at a time


def record_removal(root: Any, workspace: Path, job_id: int) -> None:
    """In the removal's transaction: the job's workspace is to be deleted; ids recorded
    earlier whose workspace is gone are forgotten."""
    recorded: IdSet | None = root.get(TO_DELETE_KEY)
    if recorded is None:
        recorded = root[TO_DELETE_KEY] = IdSet()
    _forget_deleted(recorded, workspace)
    recorded.add(job_id)


def _forget_deleted(recorded: IdSet, workspace: Path) -> bool:
    gone = [i for i in recorded if not os.path.lexists(workspace / str(i))]
    for job_id in gone:
        recorded.remove(job_id)
    return bool(gone)


def set_aside(workspace: Path, job_id: int) -> None:
    """Move a removed job's workspace out of the way of every job id (see the module)."""
    target = workspace / REMOVED_DIR
    try:
        target.mkdir(mode=0o700, exist_ok=True)
        os.rename(workspace / str(job_id), target / f"{job_id}.{time.time_ns()}")
    except FileNotFoundError:
        pass  # never had one, or another process set it aside first
    except OSError as exc:
        log.warning("the workspace of removed job %s could not be set aside: %s", job_id, exc)


def delete_behind(
    workspace: Path, pause: Callable[[], None] | None = None
) -> threading.Thread | None:
    """Start deleting what ``.removed/`` holds on a background thread (None: nothing to
    delete).  ``pause`` is called once part of a workspace is deleted (a test's stop)."""
    if not _has_entries(workspace / REMOVED_DIR):
        return None
    thread = threading.Thread(
        target=_delete_all,
        args=(workspace / REMOVED_DIR, pause),
        name="workspace deleter",
        daemon=True,
    )
    thread.start()
    return thread


def _has_entries(path: Path) -> bool:
    try:
        with os.scandir(path) as entries:
            return any(True for _ in entries)
    except FileNotFoundError:
        return False


def _delete_all(removed: Path, pause: Callable[[], None] | None) -> None:
    with _deleting:  # one thread at a time; each lists the directory again
        left: list[str] = []
        while True:
            try:
                names = sorted(os.listdir(removed))
            except FileNotFoundError:
                return
            if not names:
                return
            if names == left:
                # A pass deleted none of them (no permission, a busy mount): trying again
                # at once would spin; the next opening of the repository tries again.
                log.warning("%s could not be deleted: %s", removed, ", ".join(names))
                return
            for name in names:
                _delete_tree(removed / name, pause)
                pause = None
            left = names


def _delete_tree(path: Path, pause: Callable[[], None] | None) -> None:
    if pause is not None:
        try:
            with os.scandir(path) as entries:
                first = next(iter(entries), None)
        except FileNotFoundError:
            return  # another session deleting the same directory got there first
        if first is not None:
            shutil.rmtree(first.path, ignore_errors=True)
            pause()
    shutil.rmtree(path, ignore_errors=True)


def resume_removals(root: Any, workspace: Path) -> None:
    """At an opening: set aside the workspaces still recorded (a crash came between a
    removal's commit and its rename). The record is left as it is (the next removal
    forgets what is gone): an opening that wrote would make a new transaction each time
    one is opened after a removal, and the jobs table's cache would never answer."""
    recorded: IdSet | None = root.get(TO_DELETE_KEY)
    for job_id in list(recorded or ()):
        set_aside(workspace, job_id)
