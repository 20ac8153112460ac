"""``ganga repository reset``: move aside the workspaces of jobs a repository has lost.

See ``orphans`` for how a repository that lost its jobs is recognised and refused.  Kept
apart from it: ``orphans`` is used when opening (and by the integrity checks), while this
takes the maintenance lock and checks the file first, through ``integrity``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ganga_like.repository.checks.exclusive import hold_for_maintenance
from ganga_like.repository.checks.file_check import check_file
from ganga_like.repository.checks.orphans import id_ranges, is_empty, job_dirs

__all__ = ["reset_orphans"]


def reset_orphans(gangadir: Path) -> str:
    """Move the workspaces the repository does not know aside; say what was done.

    The repository must not be open anywhere. An empty ``Data.fs`` is renamed (kept) so
    that a new one is started; nothing is deleted.
    """
    import transaction
    from ZODB.FileStorage import FileStorage

    from ganga_like.repository.storage import GuardedDB, quiet_zodb_logging

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
            storage = FileStorage(str(path), read_only=True)
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
                known = set(root["jobs"].keys()) if "jobs" in root else set()
            finally:
                tm.abort()
                conn.close()
                db.close()
            orphaned = [i for i in job_dirs(workspace) if i >= next_id and i not in known]
        # A new file, or workspaces moved: the caches describe a repository that is gone.
        hold.forget_caches()
        if not orphaned:
            return "nothing to reset: every workspace belongs to a job of the repository"
        target = gangadir / f"workspace-orphaned-{stamp}"
        target.mkdir(mode=0o700)
        for job_id in orphaned:
            os.replace(workspace / str(job_id), target / str(job_id))
    finally:
        hold.close()
    return (
        f"moved {len(orphaned)} orphaned workspace director"
        f"{'y' if len(orphaned) == 1 else 'ies'} ({id_ranges(orphaned)}) into {target}; "
        "the repository can be used again"
    )
