"""Taking a repository for a repair that needs every session gone (recovery, reset).

The file's lock is what keeps sessions out. When the repository's own server holds it
with no session connected (it stays up to ``Repository.server_idle_exit`` seconds after
the last one left), it is asked to leave at once instead of the repair being refused;
a server that has sessions says which, and the repair is refused naming them.

A repair changes which transactions the file holds (recovery drops the damaged ones and
may give their object ids to other objects; a reset may start a new file), so every
cache of the old file must go with it: the sessions' persistent client caches
(``zeo-cache/slot-N.zec``), which would otherwise answer reads with records the file no
longer has, and the jobs-table cache of ``ganga jobs``. Each cache slot has a lock held
by the session using it: a slot that is locked is a session still open (one waiting for a
server, say), and the repair is refused before anything is changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zc.lockfile

from ganga_like.errors import RepositoryBusyError, RepositoryError

__all__ = ["MaintenanceHold", "hold_for_maintenance", "take_file_lock"]

# The cache of ``ganga jobs`` (ganga_like.commands.jobs_cache), beside the file.
JOBS_TABLE_CACHE = "jobs-table.json"


@dataclass
class MaintenanceHold:
    """The file's lock and every client cache slot's lock, held during a repair."""

    repo_dir: Path
    lock: Any
    slots: list[tuple[Path, Any]] = field(default_factory=list)

    def forget_caches(self) -> None:
        """Delete what every cache of the repository holds (the slots stay locked)."""
        for slot, _lock in self.slots:
            for suffix in ("", ".index", ".bad", ".index.tmp"):
                Path(f"{slot}{suffix}").unlink(missing_ok=True)
        (self.repo_dir / JOBS_TABLE_CACHE).unlink(missing_ok=True)

    def close(self) -> None:
        for _slot, lock in self.slots:
            lock.close()
        self.slots = []
        self.lock.close()


def hold_for_maintenance(path: Path, doing: str) -> MaintenanceHold:
    """Hold ``path`` (``Data.fs``) and its client caches for a repair; a repository in
    use is one line saying by whom (``doing``: "recovering", "resetting")."""
    hold = MaintenanceHold(path.parent, take_file_lock(path, doing))
    try:
        hold.slots = _take_cache_slots(path.parent, doing)
    except BaseException:
        hold.close()
        raise
    return hold


def take_file_lock(path: Path, doing: str) -> Any:
    """The repository file's lock; its idle server is asked to leave first. Refused when
    a server of another host holds the file (its lock may not reach this host)."""
    from ganga_like.repository.zeo import shared
    from ganga_like.repository.zeo.host_claim import check_not_held_elsewhere

    check_not_held_elsewhere(path.parent)
    try:
        return _lock(path, doing)
    except zc.lockfile.LockError:
        pass
    answer = shared.stop_idle_server(path.parent)
    if answer is not None and not answer.stopped:
        pids = ", ".join(str(p) for p in answer.session_pids)
        raise RepositoryBusyError(
            f"repository {path.parent} is in use by {answer.sessions} session(s)"
            f"{f' (PID {pids})' if pids else ''} connected to its server; close them "
            f"(and stop the monitor daemon, `ganga monitor stop`) before {doing} it",
            pid=answer.session_pids[0] if answer.session_pids else None,
        )
    if answer is not None:
        lock = _lock_when_released(path, timeout=60.0)
        if lock is not None:
            return lock
    raise _busy(path, doing, answer is None and shared.server_pid(path.parent) is not None)


def _lock(path: Path, doing: str) -> Any:
    """The lock file of ``path``; a directory that cannot be written (a read-only
    filesystem, say) is one line: a repair writes, nothing can be done there."""
    try:
        return zc.lockfile.LockFile(f"{path}.lock")
    except zc.lockfile.LockError:
        raise
    except OSError as exc:
        raise RepositoryError(
            f"{doing} {path.parent} is not possible: it cannot be written "
            f"({exc.strerror or exc}); nothing was changed"
        ) from None


def _lock_when_released(path: Path, timeout: float) -> Any:
    """The lock, once the server that said it is leaving has closed the file (a pack in
    progress finishes first); None if someone else took it meanwhile."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            return _lock(path, "taking")
        except zc.lockfile.LockError:
            if time.monotonic() > deadline or _held_by_another(path):
                return None
            time.sleep(0.02)


def _held_by_another(path: Path) -> bool:
    """Whether the lock is now held by a process other than a server on its way out."""
    from ganga_like.repository.zeo import shared

    holder = _lock_holder(path)
    return holder is not None and holder != shared.server_pid(path.parent) and _alive(holder)


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock_holder(path: Path) -> int | None:
    try:
        first = Path(f"{path}.lock").read_text().split()
    except OSError:
        return None
    return int(first[0]) if first and first[0].isdigit() else None


def _busy(path: Path, doing: str, server_silent: bool) -> RepositoryBusyError:
    holder = _lock_holder(path)
    if server_silent:
        return RepositoryBusyError(
            f"repository {path.parent} is held by its server (PID {holder}), which did not "
            "answer; it leaves by itself once no session has used it for "
            f"Repository.server_idle_exit seconds: close every session, then try {doing} "
            "it again",
            pid=holder,
        )
    return RepositoryBusyError(
        f"repository {path.parent} is in use{f' by PID {holder}' if holder else ''}; close "
        f"every session using it (and stop the monitor daemon, `ganga monitor stop`) before "
        f"{doing} it",
        pid=holder,
    )


def _take_cache_slots(repo_dir: Path, doing: str) -> list[tuple[Path, Any]]:
    from ganga_like.repository.zeo.shared import CACHE_DIR

    taken: list[tuple[Path, Any]] = []
    try:
        for slot in sorted((repo_dir / CACHE_DIR).glob("slot-*.zec")):
            try:
                taken.append((slot, _lock(slot, doing)))
            except zc.lockfile.LockError:
                holder = _lock_holder(slot)
                raise RepositoryBusyError(
                    f"repository {repo_dir} is in use: a session"
                    f"{f' (PID {holder})' if holder else ''} still has it open; close every "
                    f"session using it before {doing} it",
                    pid=holder,
                ) from None
    except BaseException:
        for _slot, lock in taken:
            lock.close()
        raise
    return taken
