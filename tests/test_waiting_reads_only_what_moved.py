"""What a waiter reads of a master's subjobs: only what moved, and the same answer as
loading every subjob.

``SubjobGroup`` (``runtime.waiting``) skips a master whose status counter did not move and
otherwise reads only the chunks whose serial moved and the labels the counter holds over
them. Whatever sequence of changes, commits, aborts and resplits of two connections came
before, the subjobs it has seen final must be exactly those loading each subjob at the
same moments has seen final.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import transaction
import ZODB
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ZODB.FileStorage import FileStorage

from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status
from ganga_like.runtime.waiting import FINAL_LABELS, SubjobGroup

from .test_status_column import SUBJOBS, _chunks_of, _move, two_connections

steps = st.lists(
    st.tuples(
        st.sampled_from(["theirs", "mine", "abort", "add", "look"]),
        st.integers(0, SUBJOBS - 1),
        st.integers(0, 100),
    ),
    max_size=30,
)


def _finished_by_loading(master: Any, ids: set[int]) -> set[int]:
    return {i for i in ids if master.subjob(i).status in FINAL_LABELS}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, st.sets(st.integers(0, SUBJOBS + 7), min_size=1))
def test_subjobs_seen_final_are_those_loading_every_subjob_sees(
    ops: list[Any], chosen: set[int]
) -> None:
    with two_connections() as (writer, reader):
        reader.transaction_manager.begin()
        master = reader.root()["master"]
        ids = {i for i in chosen if i < master.subjob_count()}
        group = SubjobGroup(master, ids)
        fast: set[int] = set()
        slow: set[int] = set()
        for kind, index, choice in ops:
            writer.transaction_manager.begin()
            if kind == "theirs":
                _move(writer, index, choice)
                writer.transaction_manager.commit()
            elif kind == "mine":  # the waiter's own session changes a subjob, and commits
                _move(reader, index, choice)
                reader.transaction_manager.commit()
            elif kind == "abort":
                _move(writer, index, choice)
                writer.transaction_manager.abort()
            elif kind == "add":
                top = writer.root()["master"]
                start = top.subjob_count()
                top.add_subjobs([JobImpl.new_subjob(top, start + k) for k in range(choice % 3 + 1)])
                writer.transaction_manager.commit()
            reader.transaction_manager.begin()
            fast.update(group.newly_finished())
            slow.update(_finished_by_loading(master, ids))
            assert fast == slow
            assert group.waiting == ids - fast


def test_a_look_where_nothing_moved_reads_no_label_and_one_change_reads_one_chunk(
    tmp_path: Path,
) -> None:
    subjobs = 3 * 16 + 2
    with _chunks_of(16, pending=4):
        db = ZODB.DB(FileStorage(str(tmp_path / "Data.fs")))
        try:
            writer = db.open(transaction.TransactionManager())
            reader = db.open(transaction.TransactionManager())
            with writer.transaction_manager:
                master = JobImpl.__new__(JobImpl)
                JobImpl.__init__(master)
                master.__dict__["id"] = 1
                master.attach_subjobs([JobImpl.new_subjob(master, i) for i in range(subjobs)])
                for sj in master.iter_subjobs():
                    sj.change_status(Status.SUBMITTED, "test")
                writer.root()["master"] = master
            reader.transaction_manager.begin()
            group = SubjobGroup(reader.root()["master"], range(subjobs))
            assert group.newly_finished() == [] and group.labels_read == subjobs  # the first look
            reader.transaction_manager.begin()
            assert group.newly_finished() == [] and group.labels_read == subjobs  # nothing moved
            for step in range(5):  # the fifth change writes the pending labels into chunk 0
                with writer.transaction_manager:
                    writer.root()["master"].subjob(step).change_status(Status.FAILED, "test")
                reader.transaction_manager.begin()
                before = group.labels_read
                assert group.newly_finished() == [step]
                assert group.labels_read - before <= 16 + 4  # one chunk and the pending ones
            subjob_records = list(reader.root()["master"]._subjobs.values())
            assert all(sj._p_changed is None for sj in subjob_records)  # no subjob loaded
        finally:
            db.close()


def test_a_final_label_folded_into_a_chunk_that_already_said_so_is_seen() -> None:
    """Subjob 0 failed, was resubmitted and failed again: its pending label goes into a
    chunk that still said failed, which is not rewritten. The look after that finds the
    label no longer pending and its chunk unmoved, and must still see it final."""
    s = Status
    with two_connections() as (writer, reader), _chunks_of(8, pending=3):

        def moves(*changes: tuple[int, list[Status]]) -> None:
            with writer.transaction_manager:
                master = writer.root()["master"]
                for index, path in changes:
                    for status in path:
                        master.subjob(index).change_status(status, "test")

        moves((0, [s.SUBMITTED, s.FAILED]), (8, [s.SUBMITTED]), (16, [s.SUBMITTED]))  # folded
        moves((0, [s.SUBMITTING]))  # resubmitted: pending again
        reader.transaction_manager.begin()
        group = SubjobGroup(reader.root()["master"], {0})
        assert group.newly_finished() == []
        moves((0, [s.FAILED]), (9, [s.SUBMITTED]), (17, [s.SUBMITTED]))  # folded: chunk 0 unmoved
        reader.transaction_manager.begin()
        assert group.newly_finished() == [0]
