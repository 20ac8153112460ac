"""Integrity of the repository file: a cheap check before opening, a full check, recovery.

FileStorage (``Data.fs``) is an append-only log of transactions. What can go wrong:

* a crash in the middle of a commit leaves an incomplete transaction at the end, still
  flagged as "being committed". It was never committed, so FileStorage drops it when the
  file is next opened (keeping the bytes in ``Data.fs.trN``). Normal; reported as a note.
* the file is truncated, or bytes are overwritten (a full disk, a bad copy, a broken
  filesystem): committed transactions are gone or unreadable. Opening refuses with a
  :class:`RepositoryCorruptError` that says what is wrong and how to recover, and changes
  nothing. FileStorage would otherwise cut the file at the first damaged byte by itself,
  losing everything after it without a word.

:func:`recover_repository` keeps what is intact: the damaged file is renamed to a backup,
``ZODB.fsrecover`` copies every undamaged transaction into a new ``Data.fs`` (the index is
rebuilt on opening), and the job registry is then checked object by object: a job that
lost records it needs is taken out of the registry and named in the report (its workspace
stays on disk).

What only the model knows of a job, the full check and the recovery ask of the
:class:`~ganga_like.repository.stored.JobChecks` their caller gives. Call them from
``ganga_like.runtime.repository_check``, which gives the model's (``ganga repository
check|recover`` do).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ZODB.FileStorage.FileStorage import packed_version as MAGIC

from ganga_like.errors import RepositoryError
from ganga_like.repository.checks.exclusive import hold_for_maintenance, take_file_lock
from ganga_like.repository.checks.file_check import (
    check_file,
    corrupt,
    data_path,
    describe,
    zodb_log_captured,
)
from ganga_like.repository.checks.fullcheck import CheckReport, check_file_deeply
from ganga_like.repository.stored import JobChecks

__all__ = [
    "RecoveryReport",
    "check_file",
    "corrupt",
    "full_check",
    "lock_for_maintenance",
    "recover_repository",
]

log = logging.getLogger("ganga_like")


# -- the full check -------------------------------------------------------------------


def full_check(gangadir: Path, checks: JobChecks) -> CheckReport:
    """Read every transaction, record and object (see
    :mod:`ganga_like.repository.checks.fullcheck`); the report: problems, notes and what was
    read. ``checks``: the model's part of checking a job."""
    from ganga_like.repository.checks.orphans import check_before_open, job_dirs

    gangadir = gangadir.expanduser().resolve()
    path = data_path(gangadir)
    workspace = gangadir / "workspace"
    try:
        check_before_open(path, workspace)
    except RepositoryError as exc:
        report = CheckReport()
        report.problem(str(exc))
        return report
    if not path.exists():
        return CheckReport()
    report = check_file_deeply(path, checks)
    if report.sound:
        orphaned = [i for i in job_dirs(workspace) if i >= report.next_id]
        if orphaned:
            report.problem(
                f"the workspace holds {len(orphaned)} job director"
                f"{'y' if len(orphaned) == 1 else 'ies'} at or above the next "
                f"job id ({report.next_id}): the repository has lost jobs; "
                "put back a copy of Data.fs, or run `ganga repository reset`"
            )
    return report


# -- recovery -------------------------------------------------------------------------


@dataclass
class RecoveryReport:
    """What :func:`recover_repository` did."""

    backup: Path
    bytes_removed: int = 0
    jobs_kept: int = 0
    lost_jobs: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [
            f"repository recovered: {self.jobs_kept} job(s) kept, "
            f"{self.bytes_removed} damaged byte(s) left out; the damaged file is kept "
            f"as {self.backup}"
        ]
        if self.lost_jobs:
            shown = ", ".join(str(i) for i in self.lost_jobs[:20])
            more = " ..." if len(self.lost_jobs) > 20 else ""
            lines.append(
                f"job(s) {shown}{more} could not be read back and were taken out of "
                "the registry (their workspaces are kept)"
            )
        lines.extend(self.notes)
        return "\n".join(lines)


def recover_repository(gangadir: Path, checks: JobChecks) -> RecoveryReport:
    """Rebuild ``Data.fs`` from its intact transactions, keeping the damaged file.

    The repository must not be open anywhere (close the sessions, ``ganga monitor stop``;
    the shared server exits by itself when idle). ``checks``: the model's part of reading
    a job back.
    """
    from ZODB import fsrecover

    from ganga_like.repository.checks.orphans import check_before_open

    path = data_path(gangadir.expanduser().resolve())
    check_before_open(path, path.parent.parent / "workspace")  # lost jobs: say so
    if not path.exists() or path.stat().st_size <= len(MAGIC):
        raise RepositoryError(f"no repository at {path} to recover (the file is missing or empty)")
    hold = hold_for_maintenance(path, "recovering")
    try:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        backup = path.with_name(f"{path.name}.damaged-{stamp}")
        target = path.with_name(f"{path.name}.recovering")
        for stale in (
            target,
            Path(f"{target}.index"),
            Path(f"{target}.lock"),
            Path(f"{target}.tmp"),
        ):
            stale.unlink(missing_ok=True)
        os.replace(path, backup)
        output = io.StringIO()
        try:
            with (
                contextlib.redirect_stdout(output),
                zodb_log_captured(),
                _fsrecover_scan_that_ends(fsrecover),
            ):
                fsrecover.recover(str(backup), str(target), verbose=0, partial=False, force=True)
        except (Exception, SystemExit) as exc:
            os.replace(backup, path)  # leave everything as it was
            raise RepositoryError(
                f"recovery of {path} failed ({describe(exc)}); the file was left unchanged"
            ) from None
        report = RecoveryReport(backup=backup, bytes_removed=_bytes_removed(output.getvalue()))
        for suffix in (".index", ".tmp"):
            old = Path(f"{path}{suffix}")
            if old.exists():
                os.replace(old, Path(f"{backup}{suffix}"))
        Path(f"{target}.index").unlink(missing_ok=True)
        Path(f"{target}.lock").unlink(missing_ok=True)
        Path(f"{target}.tmp").unlink(missing_ok=True)
        os.replace(target, path)
        path.chmod(0o600)
        backup.chmod(0o600)
        # The caches hold records of the old file, some of which it no longer has.
        hold.forget_caches()
        from ganga_like.repository.checks.fullcheck import zodb_silenced
        from ganga_like.repository.checks.repair import drop_history, revert_unreadable

        hold.lock.close()  # the repairs below open the file themselves, one at a time
        with zodb_silenced():  # what cannot be read is said in the report, once
            report.notes.extend(revert_unreadable(path))
            _check_registry(path, report, checks)
            report.notes.extend(drop_history(path))
    finally:
        hold.close()
    log.info("%s", report)  # the caller shows the report (the command prints it)
    return report


@contextlib.contextmanager
def _fsrecover_scan_that_ends(fsrecover: Any) -> Iterator[None]:
    """``fsrecover.scan`` with its endless loop fixed, while recovering.

    After damage, ``fsrecover`` looks for the next transaction by scanning for a pickle's
    last byte (``.``) followed by a plausible 8-byte length. When a ``.`` is among the
    last 8 bytes of the file its scan reads the same few bytes again for ever (a file
    cut just after such a byte made recovery hang). Here the end of the file ends the
    scan: nothing after it can be a transaction."""
    from ZODB.utils import u64

    def scan(f: Any, pos: int) -> int:
        while True:
            f.seek(pos)
            data: bytes = f.read(8096)
            if not data:
                return 0
            s = 0
            while True:
                dot = data.find(b".", s)
                if dot < 0:
                    pos += len(data)
                    break
                s = dot + 1
                if s > len(data) - 8:
                    if len(data) < 8096:
                        return 0  # the file ends within 8 bytes of this dot
                    pos += dot
                    break
                if u64(data[s : s + 8]) < pos:
                    return pos + s + 8

    original = fsrecover.scan
    fsrecover.scan = scan
    try:
        yield
    finally:
        fsrecover.scan = original


def _bytes_removed(text: str) -> int:
    for line in text.splitlines():
        if "bytes removed during recovery" in line:
            with contextlib.suppress(ValueError):
                return int(line.split()[0])
    return 0


def _check_registry(path: Path, report: RecoveryReport, checks: JobChecks) -> None:
    """Load every job and subjob; take out what cannot be read; rebuild the indexes."""
    import transaction
    import ZODB
    from ZODB.FileStorage import FileStorage

    from ganga_like.repository.registry import Registry

    if not _root_usable(path):
        _write_empty_root(path)
        report.notes.append("the root record could not be read as a mapping; it was written anew")
    storage = FileStorage(str(path))
    db = ZODB.DB(storage)
    tm = transaction.TransactionManager()
    conn = db.open(transaction_manager=tm)
    try:
        with tm:
            root = conn.root()
            problem = _layout_problem(conn)
            if problem is not None:
                # A root that reads but has the wrong shape: its entries cannot be
                # trusted, the tables found in the file can.
                report.notes.append(f"the root record had the wrong shape ({problem})")
                root.clear()
            if "jobs" not in root:
                _rebuild_root(conn, root, path, report)
            try:
                job_ids = list(root["jobs"].keys()) if "jobs" in root else []
            except Exception as exc:
                report.notes.append(
                    f"the job table could not be read ({describe(exc)}); it was started afresh"
                )
                job_ids = []
                del root["jobs"]
            Registry.initialise(root)
            jobs = root["jobs"]
            for job_id in job_ids:
                if _job_readable(jobs, job_id, report, checks):
                    report.jobs_kept += 1
                    continue
                report.lost_jobs.append(job_id)
                with contextlib.suppress(Exception):
                    del jobs[job_id]
            # The indexes are derived data: rebuild them from the jobs that are left.
            for key in ("by_status", "status_of", "by_name"):
                root.pop(key, None)
            active = root["active"]
            for key in list(active.keys()):
                if key[0] not in jobs:
                    del active[key]
            Registry.initialise(root)
            lost = set(report.lost_jobs)
            for key in list(root["submitting"].keys()):
                if key in lost:
                    del root["submitting"][key]
            _skip_used_ids(root, path.parent.parent / "workspace", report)
    finally:
        conn.close()
        db.close()


def _layout_problem(conn: Any) -> str | None:
    from ganga_like.repository.layout import layout_problem

    try:
        return layout_problem(conn)
    except Exception as exc:  # a table's record is missing, or cannot be read
        return f"a table it refers to cannot be read ({describe(exc)})"


def _root_usable(path: Path) -> bool:
    """Whether the root record loads as a mapping (a damaged class name loads as a broken
    object, a damaged state may not load at all: neither can be emptied in place)."""
    import transaction
    import ZODB
    from persistent.mapping import PersistentMapping
    from ZODB.FileStorage import FileStorage

    db = ZODB.DB(FileStorage(str(path)))
    tm = transaction.TransactionManager()
    conn = db.open(transaction_manager=tm)
    try:
        root = conn.root()
        root._p_activate()
        return isinstance(root, PersistentMapping) and isinstance(root.data, dict)
    except Exception:
        return False
    finally:
        tm.abort()
        conn.close()
        db.close()


def _write_empty_root(path: Path) -> None:
    """Write an empty mapping as the root record; the tables are then found again in the
    file by :func:`_rebuild_root`."""
    from persistent.mapping import PersistentMapping
    from ZODB.Connection import TransactionMetaData
    from ZODB.FileStorage import FileStorage
    from ZODB.utils import z64

    empty = pickle.dumps(PersistentMapping, protocol=3) + pickle.dumps({"data": {}}, protocol=3)
    storage = FileStorage(str(path))
    try:
        _data, serial = storage.load(z64)
        txn = TransactionMetaData(description="recovery: a new root record")
        storage.tpc_begin(txn)
        storage.store(z64, serial, empty, "", txn)
        storage.tpc_vote(txn)
        storage.tpc_finish(txn)
    finally:
        storage.close()


def _rebuild_root(conn: Any, root: Any, path: Path, report: RecoveryReport) -> None:
    """A root that lost the registry gets back the tables found in the file."""
    from ganga_like.repository.checks.repair import find_tables

    tables = find_tables(path)
    for key, oid in sorted(tables.items()):
        root[key] = conn.get(oid.to_bytes(8, "big"))
    if "jobs" in tables:
        report.notes.append(
            f"the root record was rebuilt from the tables found in the file "
            f"({', '.join(sorted(tables))})"
        )


def _skip_used_ids(root: Any, workspace: Path, report: RecoveryReport) -> None:
    """Ids of jobs lost with the damaged part may have workspaces: never give them out
    again (the workspaces stay where they are)."""
    from ganga_like.repository.checks.orphans import job_dirs

    used = [i for i in job_dirs(workspace) if i not in root["jobs"]]
    ids = root["ids"]
    if used and ids.next_id <= used[-1]:
        report.notes.append(
            f"the workspaces of {len(used)} job(s) the repository no longer "
            f"has are kept in {workspace}; new jobs start at id "
            f"{used[-1] + 1}"
        )
        ids.next_id = used[-1] + 1


def _job_readable(jobs: Any, job_id: int, report: RecoveryReport, checks: JobChecks) -> bool:
    try:
        job = jobs[job_id]
        job._p_activate()
        if not checks.is_job(job):
            return True  # a job of a missing plugin: kept, it lists as broken
        if checks.recount(job):
            report.notes.append(f"job {job_id}: its subjob counts were recomputed")
        return True
    except Exception:  # a record it needs was lost with a damaged transaction
        return False


def lock_for_maintenance(path: Path, doing: str) -> Any:
    """The repository file's lock, for a repair that needs every session gone (its idle
    server is asked to leave); a busy repository is one line saying so (``doing``:
    "recovering", "resetting")."""
    return take_file_lock(path, doing)
