"""A repository that lost its jobs while their workspaces are still on disk.

Job ids are never reused, so ``workspace/<id>/`` exists only for ids the repository gave
out. A repository whose file is missing or empty, or whose next id is one that already has
a workspace (the file was replaced by an older copy, or emptied), has lost jobs: opening
it as if nothing happened would give the next job id 0 and write into the old job's
workspace. Such a repository is refused with one line saying what to do:

* put back a copy of ``Data.fs`` (backups found beside it are named), or
* ``ganga repository reset`` (module ``reset``): the orphaned workspaces are moved, untouched,
  into ``<gangadir>/workspace-orphaned-<time>/`` and the repository is used as it is.

Whatever happens, a new job never takes an id whose workspace exists (:func:`first_free_id`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ganga_like.errors import RepositoryError

__all__ = [
    "check_after_open",
    "check_before_open",
    "first_free_id",
    "id_ranges",
    "is_empty",
    "job_dirs",
]


def job_dirs(workspace: Path) -> list[int]:
    """The job ids that have a workspace directory, sorted."""
    try:
        entries = list(os.scandir(workspace))
    except FileNotFoundError:
        return []
    return sorted(
        int(e.name) for e in entries if e.name.isdigit() and e.is_dir(follow_symlinks=False)
    )


def first_free_id(take: Callable[[], int], workspace: Path | None) -> int:
    """The next id from ``take`` whose workspace directory does not exist yet."""
    job_id = take()
    while workspace is not None and os.path.lexists(os.path.join(workspace, str(job_id))):
        job_id = take()
    return job_id


def is_empty(path: Path) -> bool:
    """Missing, zero-length, or the bare FileStorage header: holds no transaction."""
    try:
        return path.stat().st_size <= 4
    except FileNotFoundError:
        return True


def check_before_open(path: Path, workspace: Path) -> None:
    """Refuse an empty or missing ``Data.fs`` beside job workspaces (before the database
    would create a new, empty one)."""
    if not is_empty(path):
        return
    ids = job_dirs(workspace)
    if ids:
        state = "is empty" if path.exists() else "is missing"
        raise _lost(path, f"{path.name} {state}", ids)


def check_after_open(root: Any, path: Path, workspace: Path, database: str = "") -> None:
    """Refuse a repository whose next id already has a workspace (``database``: the
    server and database a repository in PostgreSQL is in, as messages name it).

    Cheap at every opening: one ``stat``; the workspace is listed only when the job table
    is empty.
    """
    ids = root.get("ids")
    jobs = root.get("jobs")
    next_id: int = ids.next_id if ids is not None else 0
    if jobs is not None and len(jobs) and not (workspace / str(next_id)).exists():
        return
    orphaned = [i for i in job_dirs(workspace) if i >= next_id]
    if orphaned and database:
        raise RepositoryError(
            f"the repository in PostgreSQL {database} has lost jobs: its next job id is "
            f"{next_id} but the workspace holds {_directories(orphaned)} it does not know "
            "(a database restored from an older dump?). Nothing was changed. Either restore "
            f"a newer dump, or run {_RESET}"
        )
    if orphaned:
        raise _lost(path, f"its next job id is {next_id}", orphaned)


def _lost(path: Path, state: str, ids: list[int]) -> RepositoryError:
    backups = _backups(path)
    found = f" (found beside it: {', '.join(backups)})" if backups else ""
    return RepositoryError(
        f"repository {path.parent} has lost jobs: {state} but the workspace holds "
        f"{_directories(ids)} the repository does not know. Nothing was changed. With every "
        f"session closed, either put back a copy of {path.name}{found} and delete "
        f"{path.name}.index, or run {_RESET}"
    )


_RESET = (
    "`ganga repository reset` to move those directories aside (into "
    "workspace-orphaned-<time>/) and use the repository as it is"
)


def _directories(ids: list[int]) -> str:
    return f"{len(ids)} job director{'y' if len(ids) == 1 else 'ies'} ({id_ranges(ids)})"


def id_ranges(ids: list[int]) -> str:
    parts: list[str] = []
    start = prev = ids[0]
    for value in [*ids[1:], None]:
        if value is not None and value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if value is not None:
            start = prev = value
    text = ", ".join(parts[:5])
    return f"ids {text}{' ...' if len(parts) > 5 else ''}"


def _backups(path: Path) -> list[str]:
    found = [
        p.name
        for p in sorted(path.parent.glob(f"{path.name}.*"))
        if p.is_file() and p.stat().st_size > 4 and not p.name.endswith((".index", ".lock", ".tmp"))
    ]
    return found[:5]
