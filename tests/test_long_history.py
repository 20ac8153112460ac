"""A long event log costs a bounded rewrite of its job's record, and reads as one log.

Jobs in a real FileStorage: their log grows by thousands of entries, was written whole in
the record (as repositories stored it before older entries moved to chunks), or grows in
two connections at once across the point where entries move.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import transaction
import ZODB
from ZODB.FileStorage import FileStorage

from ganga_like.model.history import CHUNK_ENTRIES
from ganga_like.model.job import Job
from ganga_like.model.status import Status


@contextmanager
def _database() -> Iterator[Any]:
    with tempfile.TemporaryDirectory() as tmp:
        db = ZODB.DB(FileStorage(str(Path(tmp) / "Data.fs")))
        try:
            yield db
        finally:
            db.close()


def _record_size(db: Any, job: Job) -> int:
    data, _serial = db.storage.load(job._p_oid)
    return len(data)


def _entry(n: int) -> tuple[float, str, str, str]:
    return (1_800_000_000.0 + n, "running", "running", f"event {n}")


def test_appending_to_a_long_log_rewrites_a_bounded_record_and_reads_the_whole_log() -> None:
    with _database() as db:
        tm = transaction.TransactionManager()
        conn = db.open(tm)
        job = Job()
        conn.root()["job"] = job
        tm.commit()
        sizes = []
        for n in range(3000):
            job.log_event(f"event {n}", when=1_800_000_000.0 + n)
            tm.commit()
            sizes.append(_record_size(db, job))
        # However long the log, the record holds fewer than 2 * CHUNK_ENTRIES entries (a
        # little longer each: "event 2999" against "event 60").
        assert max(sizes) < 1.25 * max(sizes[: 2 * CHUNK_ENTRIES])
        conn.close()
        again = db.open(transaction.TransactionManager()).root()["job"]
        assert [entry[3] for entry in again.history] == [f"event {n}" for n in range(3000)]
        assert again.time == job.time


def test_a_log_stored_whole_in_the_record_reads_and_grows_as_before() -> None:
    with _database() as db:
        tm = transaction.TransactionManager()
        conn = db.open(tm)
        job = Job()
        # The shape records had before older entries moved to chunks: the whole log in the
        # job's own record, and no chunk.
        old_log = tuple(_entry(n) for n in range(500))
        job.__dict__["history"] = old_log
        conn.root()["job"] = job
        tm.commit()
        whole = _record_size(db, job)
        conn.close()

        tm = transaction.TransactionManager()
        job = db.open(tm).root()["job"]
        assert job.history == old_log
        job.log_event("after", when=1_800_001_000.0)
        tm.commit()
        assert job.history == (*old_log, job.history[-1])
        assert job.history[-1][3] == "after"
        assert _record_size(db, job) < whole / 4  # the older entries left the record
        job.change_status(Status.SUBMITTING, "user: submit")
        tm.commit()
        assert [entry[2] for entry in job.history[-2:]] == ["new", "submitting"]


def test_two_connections_appending_across_a_move_into_chunks_keep_both_sides_entries() -> None:
    with _database() as db:
        tm_a, tm_b = transaction.TransactionManager(), transaction.TransactionManager()
        a, b = db.open(tm_a), db.open(tm_b)
        job = Job()
        a.root()["job"] = job
        for n in range(2 * CHUNK_ENTRIES - 1):
            job.log_event(f"before {n}", when=float(n))
        tm_a.commit()
        tm_b.begin()
        theirs = b.root()["job"]
        job.log_event("mine", when=1000.0)  # reaches the limit: older entries move
        theirs.log_event("theirs", when=1001.0)  # the same, in a chunk of its own
        tm_a.commit()
        tm_b.commit()  # a conflict, resolved: both appended
        tm_a.begin()
        more = [f"mine {k}" for k in range(len(job.stored()["history"]), 2 * CHUNK_ENTRIES)]
        for k, cause in enumerate(more):
            job.log_event(cause, when=1002.0 + k)  # the last one moves entries again
        tm_b.begin()
        theirs.log_event("theirs again", when=2000.0)  # nothing moves here
        tm_b.commit()
        tm_a.commit()  # ours moved entries, theirs not: resolved
        tm_a.begin()
        causes = [entry[3] for entry in job.history]
        expected = [f"before {n}" for n in range(2 * CHUNK_ENTRIES - 1)]
        assert causes == [*expected, "mine", "theirs", "theirs again", *more]
        assert job._history_moved == 2 * CHUNK_ENTRIES
        a.close()
        b.close()
