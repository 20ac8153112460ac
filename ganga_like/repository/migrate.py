"""Copying a repository from one storage to another: a FileStorage into PostgreSQL, and
back (``ganga repository migrate TO_URI``).

Every record is copied with ZODB's own ``copyTransactionsFrom`` (history and all, into a
file; the current records, into a history-free database), then both sides get the full
check and must agree on the jobs and the next id. Nothing is deleted: the source stays as
it was, and a target that already holds anything is refused. Sessions should be closed
meanwhile: what they commit during the copy may be missing from it (the check of the
target then shows fewer jobs or a lower next id than the source's).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from ganga_like.errors import RepositoryError
from ganga_like.repository import postgres
from ganga_like.repository.checks.fullcheck import CheckReport
from ganga_like.repository.stored import JobChecks

__all__ = ["MigrationReport", "check_location", "migrate"]


@dataclass
class MigrationReport:
    source: str
    target: str
    source_check: CheckReport
    target_check: CheckReport

    @property
    def sound(self) -> bool:
        s, t = self.source_check, self.target_check
        return s.sound and t.sound and (s.jobs, s.next_id) == (t.jobs, t.next_id)

    def lines(self) -> list[str]:
        out = [f"source {self.source}: {self.source_check.summary()}"]
        out += [f"  {line}" for line in self.source_check.lines()]
        out.append(f"target {self.target}: {self.target_check.summary()}")
        out += [f"  {line}" for line in self.target_check.lines()]
        s, t = self.source_check, self.target_check
        if self.sound:
            out.append(
                f"copied: {t.jobs} job(s), next id {t.next_id}, {t.objects} object(s); "
                f"the source is left as it was"
            )
        else:
            out.append(
                f"the copy does not match: source {s.jobs} job(s), next id {s.next_id}; "
                f"target {t.jobs} job(s), next id {t.next_id}; nothing was deleted"
            )
        return out


def _file_path(uri: str) -> Path:
    return Path(unquote(urlsplit(uri).path))


def _label(uri: str) -> str:
    return postgres.redacted(uri) if postgres.is_postgres(uri) else str(_file_path(uri))


def _open(uri: str, read_only: bool) -> Any:
    if postgres.is_postgres(uri):
        return postgres.open_relstorage(uri, read_only=read_only)
    if urlsplit(uri).scheme != "file":
        raise RepositoryError(
            f"migrate: {_label(uri)!r} is neither a file:// nor a postgresql:// URI"
        )
    from ZODB.FileStorage import FileStorage

    path = _file_path(uri)
    if read_only and not path.exists():
        raise RepositoryError(f"migrate: there is no repository at {path} to copy")
    if not read_only:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return FileStorage(str(path), read_only=read_only)


def _refuse_unless_empty(storage: Any, uri: str) -> None:
    if storage.lastTransaction() != b"\0" * 8:
        storage.close()
        raise RepositoryError(
            f"migrate: {_label(uri)} already holds a repository; nothing was copied or "
            "deleted (give an empty database or a new file)"
        )


def migrate(source: str, target: str, checks: JobChecks) -> MigrationReport:
    """Copy ``source`` into the empty ``target``, then check both."""
    if postgres.is_postgres(source) == postgres.is_postgres(target) and source == target:
        raise RepositoryError("migrate: the source and the target are the same")
    into = _open(target, read_only=False)
    _refuse_unless_empty(into, target)
    try:
        origin = _open(source, read_only=True)
        try:
            into.copyTransactionsFrom(origin)
        finally:
            origin.close()
    finally:
        into.close()
    checked = (check_location(source, checks), check_location(target, checks))
    return MigrationReport(_label(source), _label(target), *checked)


def check_location(uri: str, checks: JobChecks) -> CheckReport:
    """The full check of the repository at ``uri`` (a file, or a database)."""
    if postgres.is_postgres(uri):
        from ganga_like.repository.checks.database_check import check_storage

        return check_storage(postgres.open_relstorage(uri, read_only=True), checks)
    from ganga_like.repository.checks.fullcheck import check_file_deeply

    return check_file_deeply(_file_path(uri), checks)
