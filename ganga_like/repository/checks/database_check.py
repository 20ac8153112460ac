"""The full check of a repository in PostgreSQL: every record, every object, the layout.

The file-level pass of :mod:`ganga_like.repository.checks.fullcheck` (lengths, trailers,
back pointers) has no counterpart in a database, which keeps its own rows consistent; the
other two passes are the same: every current record is loaded through a database
connection with its real classes, as a session would load it, and the registry's layout
is checked (every B-tree consistent, every job under its id, below the next id).
"""

from __future__ import annotations

from typing import Any

from ganga_like.repository.checks.fullcheck import (
    CheckReport,
    _check_layout,
    _describe,
    zodb_silenced,
)
from ganga_like.repository.stored import JobChecks

__all__ = ["check_storage"]


def check_storage(storage: Any, checks: JobChecks) -> CheckReport:
    """Read every record of ``storage`` (opened by the caller, closed here)."""
    import transaction

    from ganga_like.errors import RepositoryCorruptError
    from ganga_like.repository.storage import GuardedDB, quiet_zodb_logging

    quiet_zodb_logging()
    report = CheckReport()
    oids: list[bytes] = []
    for txn in storage.iterator():
        report.transactions += 1
        for record in txn:
            report.records += 1
            if record.data is not None:
                oids.append(record.oid)
    with zodb_silenced():
        db = GuardedDB(storage, cache_size=10_000)
        tm = transaction.TransactionManager()
        conn = db.open(transaction_manager=tm)
        try:
            for oid in oids:
                number = int.from_bytes(oid, "big")
                try:
                    conn.get(oid)._p_activate()
                    report.objects += 1
                except RepositoryCorruptError as exc:
                    report.problem(str(exc), number)
                except Exception as exc:
                    what = f"record {number:#x} cannot be loaded ({_describe(exc)})"
                    report.problem(what, number)
                if report.objects % 5000 == 0:
                    conn.cacheGC()
            try:
                _check_layout(conn, report, {}, checks)
            except Exception as exc:
                report.problem(f"the job registry cannot be read ({_describe(exc)})")
        finally:
            tm.abort()
            conn.close()
            db.close()
    return report
