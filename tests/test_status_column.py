"""A master's status chunks always say what loading each subjob says.

``[s.status for s in j.subjobs]`` reads the master's status chunks instead of loading every
subjob (``model.status_column``). Whatever sequence of status changes, commits, aborts and
concurrent changes of two connections came before, the chunks must hold exactly the
statuses of the subjob records; and the GPI's fast path must answer as the slow one does.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import transaction
import ZODB
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ZODB.FileStorage import FileStorage
from ZODB.POSException import ConflictError

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.config.store import store
from ganga_like.model import status_column
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import TRANSITIONS, Status
from ganga_like.runtime.session import close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_local.settings import Local as LocalSection
from ganga_like_runner import client as runner_client

CHUNK = 8  # chunks as small as this in the property test, so that it stays fast
SUBJOBS = 2 * CHUNK + 5  # three chunks, the last partly filled

changes = st.lists(
    st.tuples(
        st.sampled_from(["mine", "theirs", "both", "abort", "add"]),
        st.integers(0, SUBJOBS - 1),
        st.integers(0, SUBJOBS - 1),
        st.integers(0, 100),
    ),
    max_size=40,
)


@contextmanager
def _chunks_of(size: int, pending: int = 3) -> Iterator[None]:
    """Chunks of ``size`` labels, written once ``pending`` changes gather (small, so that
    the property test writes them often, concurrent changes too)."""
    saved = status_column.CHUNK, status_column.PENDING
    status_column.CHUNK, status_column.PENDING = size, pending
    try:
        yield
    finally:
        status_column.CHUNK, status_column.PENDING = saved


@contextmanager
def two_connections() -> Iterator[tuple[Any, Any]]:
    """A master of SUBJOBS subjobs in a real FileStorage, open in two connections."""
    with tempfile.TemporaryDirectory() as tmp, _chunks_of(CHUNK):
        db = ZODB.DB(FileStorage(str(Path(tmp) / "Data.fs")))
        a = db.open(transaction.TransactionManager())
        b = db.open(transaction.TransactionManager())
        with a.transaction_manager:
            master = JobImpl.__new__(JobImpl)
            JobImpl.__init__(master)
            master.__dict__["id"] = 1
            subjobs = [JobImpl.new_subjob(master, i) for i in range(SUBJOBS)]
            master.attach_subjobs(subjobs)
            a.root()["master"] = master
        try:
            yield a, b
        finally:
            a.close()
            b.close()
            db.close()


def _move(connection: Any, index: int, choice: int) -> None:
    """Subjob ``index`` one legal step on (the ``choice``-th allowed next status)."""
    subjob = connection.root()["master"].subjob(index)
    allowed = sorted(TRANSITIONS[Status.parse(subjob.status)], key=lambda s: s.label)
    if allowed:
        subjob.change_status(allowed[choice % len(allowed)], "test")


def _agrees(connection: Any) -> bool:
    master = connection.root()["master"]
    return master.subjob_statuses() == [sj.status for sj in master.iter_subjobs()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes)
def test_the_status_chunks_always_equal_the_subjob_records(ops: list[Any]) -> None:
    with two_connections() as (a, b):
        for kind, i, j, choice in ops:
            a.transaction_manager.begin()
            b.transaction_manager.begin()
            if kind == "mine":
                _move(a, i, choice)
                a.transaction_manager.commit()
            elif kind == "theirs":
                _move(b, i, choice)
                b.transaction_manager.commit()
            elif kind == "add":
                # Subjobs appended after the last (as a resplit adds its pieces), filling
                # the last chunk and starting new ones.
                master = a.root()["master"]
                start = master.subjob_count()
                extra = [JobImpl.new_subjob(master, start + k) for k in range(choice % 4 + 1)]
                master.add_subjobs(extra)
                a.transaction_manager.commit()
            elif kind == "abort":
                _move(a, i, choice)
                a.transaction_manager.abort()
            elif i != j:
                # Two sessions change two subjobs (often of one chunk) at once: the chunk
                # merges both changes.
                _move(a, i, choice)
                _move(b, j, choice + 1)
                a.transaction_manager.commit()
                try:
                    b.transaction_manager.commit()
                except ConflictError:
                    # Both wrote the pending labels into the chunks at once: retried, as
                    # every conflict is.
                    b.transaction_manager.abort()
                    b.transaction_manager.begin()
                    _move(b, j, choice + 1)
                    b.transaction_manager.commit()
            for connection in (a, b):
                connection.transaction_manager.begin()
                assert _agrees(connection)
                connection.transaction_manager.abort()


def test_subjob_statuses_read_through_the_gpi_match_the_loaded_subjobs(gangadir: Path) -> None:
    session = open_session(
        Settings(gangadir=gangadir, monitoring=False),
        store.snapshot().replaced({LocalSection: {"max_concurrent": 1}}),
    )
    try:
        j = Job(
            application=Executable(exe="/bin/sleep"),
            splitter=ArgSplitter(args=[["600"] for _ in range(12)]),
        )
        j.submit()
        j.subjobs[3].kill()
        j.subjobs[7].kill()
        session.repo.connection().cacheMinimize()  # every subjob a ghost again
        fast = [s.status for s in j.subjobs]
        master = object.__getattribute__(j, "_impl")
        assert all(sj._p_changed is None for sj in master.iter_subjobs())  # none loaded
        loaded = [sj.status for sj in master.iter_subjobs()]
        assert fast == loaded
        assert fast.count("killed") == 2 and fast[3] == fast[7] == "killed"
        held = j.subjobs[5]
        assert [s for s in j.subjobs][5] == held and [s.fqid for s in j.subjobs][5] == held.fqid
        j.kill()
        session.repo.connection().cacheMinimize()
        assert {s.status for s in j.subjobs} == {"killed"}
        assert held.status == "killed"
        kept = list(j.subjobs)
        j.remove()
        assert {s.status for s in kept} == {"removed"}  # asked again in a new transaction
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))


def test_a_chunk_stored_as_a_list_of_labels_still_reads_and_merges() -> None:
    """Chunks written before labels were stored a byte each open as they were."""
    stored = {"labels": ["submitted", "running", "submitted"]}
    chunk = status_column.StatusChunk([])
    chunk.__setstate__(dict(stored))
    assert chunk.labels == ["submitted", "running", "submitted"]
    ours = status_column.StatusChunk(list(chunk.labels))
    ours.set(2, "completed")
    theirs = {"labels": ["completed", "running", "submitted"]}
    merged = status_column.StatusChunk([])
    merged.__setstate__(chunk._p_resolveConflict(stored, theirs, ours.__getstate__()))
    assert merged.labels == ["completed", "running", "completed"]
    assert len(ours.__getstate__()["codes"]) == 3
