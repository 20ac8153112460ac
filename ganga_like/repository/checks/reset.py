"""``ganga repository reset``: move aside the workspaces of jobs a repository has lost.

See ``orphans`` for how a repository that lost its jobs is recognised and refused.  Kept
apart from it: ``orphans`` is used when opening (and by the integrity checks), while this
takes the maintenance lock and checks the file first, through ``integrity``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ganga_like.repository.checks.exclusive import hold_for_maintenance
from ganga_like.repository.checks.file_check import check_file
from ganga_like.repository.checks.orphans import id_ranges, is_empty, job_dirs

__all__ = ["reset_orphans", "reset_orphans_in_database"]


def reset_orphans(gangadir: Path) -> str:
    """Move the workspaces the repository does not know aside; say what was done.

    The repository must not be open anywhere. An empty ``Data.fs`` is renamed (kept) so
    that a new one is started; nothing is deleted.
    """
    from ZODB.FileStorage import FileStorage

    from ganga_like.repository.storage import quiet_zodb_logging

    quiet_zodb_logging()
    gangadir = gangadir.expanduser().resolve()
    path = gangadir / "repository" / "Data.fs"
    workspace = gangadir / "workspace"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    hold = hold_for_maintenance(path, "resetting")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        if is_empty(path):
            if path.exists():
                os.replace(path, path.with_name(f"{path.name}.empty-{stamp}"))
            Path(f"{path}.index").unlink(missing_ok=True)
            orphaned = job_dirs(workspace)
        else:  # a read-only view takes no lock: ours keeps sessions out meanwhile
            check_file(path)  # a damaged file is refused: `recover` first
            next_id, known, _ = _next_and_known(FileStorage(str(path), read_only=True))
            orphaned = [i for i in job_dirs(workspace) if i >= next_id and i not in known]
        # A new file, or workspaces moved: the caches describe a repository that is gone.
        hold.forget_caches()
        if not orphaned:
            return "nothing to reset: every workspace belongs to a job of the repository"
        return _move_aside(orphaned, workspace, gangadir / f"workspace-orphaned-{stamp}")
    finally:
        hold.close()


def reset_orphans_in_database(gangadir: Path, uri: str) -> str:
    """The same for a repository in PostgreSQL: the workspaces of ids the database never
    gave out are moved aside. Sessions on other hosts may stay open: every id they use
    was reserved in the database first, so none of their workspaces is moved."""
    from ganga_like.repository import postgres
    from ganga_like.repository.shared_workspace import ROOT_KEY, check_shared_workspace

    workspace = gangadir.expanduser().resolve() / "workspace"
    next_id, known, marker = _next_and_known(postgres.open_relstorage(uri, read_only=True))
    if marker is not None:  # never the workspace of another repository
        check_shared_workspace({ROOT_KEY: marker}, workspace, uri)
    orphaned = [i for i in job_dirs(workspace) if i >= next_id and i not in known]
    if not orphaned:
        return (
            f"nothing to reset: every workspace belongs to a job of the repository in "
            f"PostgreSQL ({postgres.server_of(uri)})"
        )
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return _move_aside(orphaned, workspace, workspace.parent / f"workspace-orphaned-{stamp}")


def _next_and_known(storage: Any) -> tuple[int, set[int], str | None]:
    """The repository's next job id, the ids of its jobs and its workspace's marker (on a
    database server), read from ``storage`` (opened read-only; closed here)."""
    import transaction

    from ganga_like.repository.shared_workspace import ROOT_KEY
    from ganga_like.repository.storage import GuardedDB

    try:
        db = GuardedDB(storage)
    except BaseException:
        storage.close()
        raise
    tm = transaction.TransactionManager()
    conn = db.open(transaction_manager=tm)
    try:
        root = conn.root()
        ids = root.get("ids")
        next_id = ids.next_id if ids is not None else 0
        return next_id, set(root.get("jobs", {}).keys()), root.get(ROOT_KEY)
    finally:
        tm.abort()
        conn.close()
        db.close()


def _move_aside(orphaned: list[int], workspace: Path, target: Path) -> str:
    target.mkdir(mode=0o700)
    for job_id in orphaned:
        os.replace(workspace / str(job_id), target / str(job_id))
    return (
        f"moved {len(orphaned)} orphaned workspace director"
        f"{'y' if len(orphaned) == 1 else 'ies'} ({id_ranges(orphaned)}) into {target}; "
        "the repository can be used again"
    )
