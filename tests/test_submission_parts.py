"""A split job's first submission made, handed over and recorded a part at a time.

The parts are written to savepoints of the one transaction that records the outcome: the
result must be what one part would give, a conflict at that commit is retried with the
subjobs made again (the backend is not called again), and a split that fails in a later
part still stores nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import transaction
import ZODB
from hypothesis import given, settings
from hypothesis import strategies as st
from ZODB.FileStorage import FileStorage
from ZODB.utils import p64

from ganga_like import ArgSplitter, Executable, GenericSplitter, Job
from ganga_like.errors import JobError
from ganga_like.repository.savepoints import _AppendingStore, _Table, write_out
from ganga_like.runtime.session import Session
from ganga_like.runtime.submission.split_submission import (
    ONE_PART_MAX,
    TEST_PART_VARIABLE,
    check_split,
)
from tests.test_conflicts import conflict_when_the_subjobs_are_recorded

# The default mode, the one large submissions are measured in.
SESSION_SETTINGS = {"repository_mode": "shared"}
COUNT = 11  # three parts of 4: two full, one not


@pytest.fixture
def parts_of_four(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TEST_PART_VARIABLE, "4")


@pytest.fixture
def appender(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A program that appends its argument to a file: each run leaves one line."""
    ran = tmp_path / "ran"
    program = tmp_path / "append.sh"
    program.write_text(f'#!/bin/sh\necho "$1" >> "{ran}"\n')
    program.chmod(0o755)
    yield program, ran


def _split_job(program: Path) -> Job:
    return Job(
        application=Executable(exe=str(program)),
        splitter=ArgSplitter(args=[[str(i)] for i in range(COUNT)]),
    )


def _runs(ran: Path) -> list[int]:
    return sorted(int(line) for line in ran.read_text().split())


@pytest.mark.usefixtures("parts_of_four")
def test_a_submission_of_several_parts_records_every_subjob_as_one_part_would(
    session: Session, appender: tuple[Path, Path]
) -> None:
    program, ran = appender
    j = _split_job(program)
    j.submit()
    assert j.wait(timeout=60) == "completed"
    assert _runs(ran) == list(range(COUNT))  # each handed over once
    assert [sj.id for sj in j.subjobs] == list(range(COUNT))
    assert [list(sj.application.args) for sj in j.subjobs] == [[str(i)] for i in range(COUNT)]
    impl = j._job
    assert impl.subjob_statuses() == [sj.status for sj in j.subjobs] == ["completed"] * COUNT
    assert sum(impl.counts().values()) == COUNT
    transitions = [(o, n) for _t, o, n, _c in j.subjobs[0].history]
    assert all([(o, n) for _t, o, n, _c in sj.history] == transitions for sj in j.subjobs)
    assert session.registry().submitting.get(j.id) is None


@pytest.mark.usefixtures("parts_of_four")
def test_a_conflict_when_the_parts_are_recorded_is_retried_with_the_subjobs_made_again(
    session: Session, appender: tuple[Path, Path]
) -> None:
    program, ran = appender
    j = _split_job(program)
    impl = j._job
    # Another session changes the master between the last part and the commit: the
    # savepoints are dropped with the transaction, the retry splits again.
    maker = conflict_when_the_subjobs_are_recorded(session, j)
    j.submit()
    maker.stop()
    assert maker.made == 1
    assert j.wait(timeout=60) == "completed"
    assert _runs(ran) == list(range(COUNT))  # the retry did not call the backend again
    assert [list(sj.application.args) for sj in j.subjobs] == [[str(i)] for i in range(COUNT)]
    assert impl.subjob_statuses() == ["completed"] * COUNT
    changes = [(o, n) for _t, o, n, _c in j.subjobs[COUNT - 1].history]
    assert changes == [("new", "submitted"), ("submitted", "running"), ("running", "completed")]


@pytest.mark.usefixtures("parts_of_four")
def test_a_first_attempt_interrupted_part_way_leaves_the_parts_not_reached_new(
    session: Session,
    appender: tuple[Path, Path],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from ZODB.POSException import ConflictError

    from ganga_like.runtime.submission.split_submission import SplitSubmission

    program, ran = appender
    record_part = SplitSubmission._record_part
    calls = []

    def interrupted(self: SplitSubmission, part: list[Job]) -> None:
        # Beside the real conflict above: a transient error while the second part (handed
        # over already) is recorded, which only a conflict at the commit makes for real.
        calls.append(len(part))
        if len(calls) == 2:
            raise ConflictError("interrupted")
        record_part(self, part)

    monkeypatch.setattr(SplitSubmission, "_record_part", interrupted)
    j = _split_job(program)
    j.submit()
    monkeypatch.undo()
    assert "3 subjob(s) were not handed over" in caplog.text
    assert [sj.status for sj in j.subjobs][8:] == ["new"] * 3
    with pytest.raises(JobError, match="3 of its subjobs were never submitted"):
        j.wait(timeout=60)
    j.submit()  # the ones never handed over, and only those
    assert j.wait(timeout=60) == "completed"
    assert _runs(ran) == list(range(COUNT))


@pytest.mark.usefixtures("parts_of_four")
def test_a_split_that_fails_in_a_later_part_stores_nothing(
    session: Session, appender: tuple[Path, Path]
) -> None:
    program, ran = appender
    values: list[object] = [[str(i)] for i in range(COUNT)]
    values[9] = "not a list"
    j = Job(
        application=Executable(exe=str(program)),
        splitter=GenericSplitter(attribute="application.args", values=values),
    )
    with pytest.raises(JobError, match="subjob 9"):
        j.submit()
    assert j.status == "new" and len(j.subjobs) == 0
    assert not ran.exists()
    assert session.registry().submitting.get(j.id) is None


@pytest.mark.parametrize("count", [ONE_PART_MAX, ONE_PART_MAX + 1])
def test_a_split_keeps_its_first_subjobs_made_and_checks_the_others_without_making_them(
    session: Session, count: int
) -> None:
    j = Job(
        application=Executable(exe="true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(count)]),
    )
    first, counted = check_split(j._job)
    assert counted == count
    # Kept whole up to one part; of a larger split, the first ones made while it could
    # have fitted, handed over first; the others are made once, as they are submitted.
    expected = min(count, ONE_PART_MAX)
    assert [sj.id for sj in first] == list(range(expected))
    assert list(first[-1].application.args) == [str(expected - 1)]


# -- the savepoints -----------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Iterator[ZODB.DB]:
    database = ZODB.DB(FileStorage(str(tmp_path / "Data.fs")))
    yield database
    database.close()


def _fill(db: ZODB.DB, parts: int) -> tuple[transaction.TransactionManager, object]:
    from BTrees.IOBTree import IOBTree
    from persistent.mapping import PersistentMapping

    tm = transaction.TransactionManager()
    conn = db.open(transaction_manager=tm)
    tree = conn.root()["tree"] = IOBTree()
    for part in range(parts):
        for i in range(part * 100, (part + 1) * 100):
            tree[i] = PersistentMapping(value=i)
        write_out(conn)
        assert not conn._cache.ringlen() or all(
            o._p_changed is not True for o in conn._cache.lru_items()
        )
    return tm, conn


def test_what_was_written_out_is_committed_whole(db: ZODB.DB) -> None:
    tm, conn = _fill(db, 5)
    tm.commit()
    conn.close()
    other = db.open()
    tree = other.root()["tree"]
    assert [tree[i]["value"] for i in range(500)] == list(range(500))
    other.close()


def test_what_was_written_out_is_dropped_whole_by_an_abort(db: ZODB.DB) -> None:
    tm, conn = _fill(db, 5)
    tm.abort()
    assert "tree" not in conn.root()
    conn.root()["after"] = 1  # the connection goes on working
    tm.commit()
    conn.close()


def _write_calls() -> int:
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("syscw:"))


def test_a_part_written_out_takes_a_few_writes_not_one_per_record(db: ZODB.DB) -> None:
    from BTrees.IOBTree import IOBTree
    from persistent.mapping import PersistentMapping

    tm = transaction.TransactionManager()
    conn = db.open(transaction_manager=tm)
    tree = conn.root()["tree"] = IOBTree()
    for i in range(3000):
        tree[i] = PersistentMapping(value=i)
    before = _write_calls()
    write_out(conn)
    assert _write_calls() - before < 300  # 3,000 records of about 100 B each
    tm.commit()
    assert [conn.root()["tree"][i]["value"] for i in range(0, 3000, 7)] == list(range(0, 3000, 7))
    conn.close()


# Stores (an oid of 8 bytes, data) and loads of an oid stored before, in any order.
_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("store"), st.integers(0, 20), st.binary(max_size=300)),
        st.tuples(st.just("load"), st.integers(0, 20), st.just(b"")),
    ),
    max_size=60,
)


@settings(max_examples=60, deadline=None)
@given(_STEPS)
def test_an_appending_store_holds_what_zodbs_temporary_store_holds(
    steps: list[tuple[str, int, bytes]],
) -> None:
    from ZODB.Connection import TmpStore
    from ZODB.MappingStorage import MappingStorage

    stores = [TmpStore(MappingStorage()), _AppendingStore(MappingStorage())]
    try:
        for action, number, data in steps:
            oid = p64(number)
            for store in stores:
                if action == "store":
                    store.store(oid, None, data, "", None)
                elif oid in store.index:
                    store.load(oid)
            loads = [s.load(oid) for s in stores] if oid in stores[0].index else []
            assert loads[:1] == loads[1:]
        contents = []
        for store in stores:
            store._file.seek(0)
            contents.append((store._file.read(), store.position, dict(store.index)))
        assert contents[0] == contents[1]
    finally:
        for store in stores:
            store.close()


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.integers(0, 2**48), st.integers(0, 2**47), max_size=300))
def test_a_compact_table_answers_as_a_dict(entries: dict[int, int]) -> None:
    plain = {p64(oid): value for oid, value in entries.items()}
    table = _Table()
    for oid, value in plain.items():
        table[oid] = value
    assert len(table) == len(plain)
    assert sorted(table.keys()) == sorted(plain) == list(table)
    assert all(table[oid] == value and oid in table for oid, value in plain.items())
    assert table.get(p64(2**49)) is None and p64(2**49) not in table
    # What the pickle cache's invalidate walks: a sequence of the ids.
    assert sorted(table[i] for i in range(len(table))) == sorted(plain)
    assert dict(table.items()) == plain


def test_another_connection_of_the_process_sees_a_commit_that_also_created_records(
    session: Session,
) -> None:
    from ganga_like.repository.registry import Registry

    j = Job(name="before")
    # The other connections of this process are told only of the records that existed
    # before a commit: what they had read must still be read again.
    tm = transaction.TransactionManager()
    conn = session.repo.db.open(transaction_manager=tm)
    try:
        assert Registry(conn.root()).jobs[j.id].name == "before"
        tm.abort()
        j.name = "after"
        k = Job(name="new")  # a commit that creates records
        tm.begin()
        seen = Registry(conn.root()).jobs
        assert seen[j.id].name == "after" and seen[k.id].name == "new"
    finally:
        tm.abort()
        conn.close()
