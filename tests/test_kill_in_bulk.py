"""A master's queued subjobs killed in bulk read as if each had been killed on its own.

``j.kill()`` of a master kills its queued subjobs by changing the master's records alone
(``model.bulk_kill``); a subjob's own record is written when it next changes. Whatever
the states of the subjobs before, every reader must see what the plain path (each
subjob's record written in the call) leaves: statuses, event logs, counts, the status
chunks and the master's status, in the same connection and in another; a later change
(a resubmission) must go on from killed; and only the subjobs that were active change.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import transaction
import ZODB
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ZODB.FileStorage import FileStorage
from ZODB.POSException import ConflictError

from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status
from ganga_like.repository.registry import Registry
from ganga_like.runtime.monitoring.killed_followed import unfollow_killed
from ganga_like.runtime.submission.master_kill import HELD_CAUSE, KILL_CAUSE, record_kill

# Paths from new to each state a subjob may be in when its master is killed.
PATHS = {
    "new": [],
    "waiting": [Status.WAITING],
    "submitted": [Status.SUBMITTING, Status.SUBMITTED],
    "running": [Status.SUBMITTING, Status.SUBMITTED, Status.RUNNING],
    "completing": [Status.SUBMITTING, Status.SUBMITTED, Status.RUNNING, Status.COMPLETING],
    "completed": [Status.SUBMITTING, Status.SUBMITTED, Status.RUNNING, Status.COMPLETED],
    "failed": [Status.SUBMITTING, Status.SUBMITTED, Status.FAILED],
    "killed": [Status.SUBMITTING, Status.SUBMITTED, Status.KILLED],
}
ACTIVE = {"submitted", "running", "completing"}

states = st.lists(st.sampled_from(sorted(PATHS)), min_size=1, max_size=40)


@contextmanager
def two_masters(labels: list[str]) -> Iterator[tuple[Any, Any]]:
    """Masters 1 and 2, alike, their subjobs in ``labels``, in a real FileStorage; two
    connections to it."""
    with tempfile.TemporaryDirectory() as tmp:
        db = ZODB.DB(FileStorage(str(Path(tmp) / "Data.fs")))
        a = db.open(transaction.TransactionManager())
        b = db.open(transaction.TransactionManager())
        with a.transaction_manager:
            root = a.root()
            Registry.initialise(root)
            for master_id in (1, 2):
                master = JobImpl.__new__(JobImpl)
                JobImpl.__init__(master)
                master.__dict__["id"] = master_id
                master.attach_subjobs([JobImpl.new_subjob(master, i) for i in range(len(labels))])
                root["jobs"][master_id] = master
                for index, label in enumerate(labels):
                    for step in PATHS[label]:
                        master.subjob(index).change_status(step, "test", when=100.0)
                    if label in ACTIVE:
                        Registry(root).follow(master.subjob(index), None)
        try:
            yield a, b
        finally:
            a.close()
            b.close()
            db.close()


def kill_plainly(master: Any, failed: set[int]) -> None:
    """What the plain path records: each active subjob killed in its own record (those
    the backend could not kill, ``failed``, say so in their logs)."""
    registry = Registry(master._p_jar.root())
    for subjob in master.iter_subjobs():
        if Status.parse(subjob.status).active and subjob.id in failed:
            subjob.log_event("kill failed: unreachable", when=200.0)
        elif Status.parse(subjob.status).active:
            subjob.change_status(Status.KILLED, KILL_CAUSE, when=200.0)
            registry.unfollow(subjob)
        elif subjob.status == Status.WAITING.label:
            subjob.change_status(Status.KILLED, HELD_CAUSE, when=200.0)


def kill_in_bulk(master: Any, failed: set[int]) -> None:
    statuses = master.subjob_statuses()
    targets = [i for i, label in enumerate(statuses) if label in ACTIVE]
    held = [i for i, label in enumerate(statuses) if label == "waiting"]
    errors = {f"{master.id}.{i}": "unreachable" for i in targets if i in failed}
    record_kill(Registry(master._p_jar.root()), master, targets, held, errors, 200.0)


def seen(master: Any) -> dict[str, Any]:
    """Everything a reader sees of the master and its subjobs (times of changes made by
    the kill aside: the plain path stamps them when it runs)."""
    subjobs = list(master.iter_subjobs())
    return {
        "statuses": [sj.status for sj in subjobs],
        "logs": [[(old, new, cause) for _when, old, new, cause in sj.history] for sj in subjobs],
        "kill times": [
            [when for when, _old, new, _cause in sj.history if new == "killed"] for sj in subjobs
        ],
        "chunks": master.subjob_statuses(),
        "counts": master.counts(),
        "master": master.current_status(),
        "followed": sorted(
            key[1] for key in Registry(master._p_jar.root()).active if key[0] == master.id
        ),
    }


def both(connection: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    connection.transaction_manager.begin()
    jobs = connection.root()["jobs"]
    return seen(jobs[1]), seen(jobs[2])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(states, st.lists(st.integers(0, 39), max_size=10), st.sets(st.integers(0, 39)))
def test_a_kill_in_bulk_reads_as_the_plain_kill_before_and_after_a_resubmission(
    labels: list[str], resubmitted: list[int], failed: set[int]
) -> None:
    with two_masters(labels) as (a, b):
        a.transaction_manager.begin()
        before = seen(a.root()["jobs"][1])
        kill_in_bulk(a.root()["jobs"][1], failed)
        kill_plainly(a.root()["jobs"][2], failed)
        a.transaction_manager.commit()
        # The monitor's next cycle stops following what was killed in bulk.
        a.transaction_manager.begin()
        unfollow_killed(Registry(a.root()))
        a.transaction_manager.commit()
        for connection in (a, b):  # the writer, and another connection reading afresh
            bulk, plain = both(connection)
            assert bulk == plain
            for index, label in enumerate(labels):  # only what was active changed
                if label not in ACTIVE and label != "waiting":
                    assert bulk["logs"][index] == before["logs"][index]
                    assert bulk["statuses"][index] == label
            connection.transaction_manager.abort()
        # A resubmission of some killed subjobs, in the other connection: it goes on from
        # killed and writes the subjob's record.
        b.transaction_manager.begin()
        for master_id in (1, 2):
            master = b.root()["jobs"][master_id]
            for index in resubmitted:
                if index < len(labels) and master.subjob(index).status == "killed":
                    master.subjob(index).change_status(Status.SUBMITTING, "user: resubmit")
                    master.subjob(index).change_status(Status.SUBMITTED, "test")
        b.transaction_manager.commit()
        for connection in (a, b):
            bulk, plain = both(connection)
            assert bulk == plain
            connection.transaction_manager.abort()


def test_a_subjob_that_starts_while_its_master_is_killed_in_bulk_makes_one_side_retry() -> None:
    with two_masters(["submitted"] * 5) as (a, b):
        a.transaction_manager.begin()
        b.transaction_manager.begin()
        kill_in_bulk(a.root()["jobs"][1], set())
        b.root()["jobs"][1].subjob(2).change_status(Status.RUNNING, "monitor")
        b.transaction_manager.commit()
        with pytest.raises(ConflictError):
            a.transaction_manager.commit()
        a.transaction_manager.abort()
        a.transaction_manager.begin()
        kill_in_bulk(a.root()["jobs"][1], set())  # retried: the running one killed on its own
        a.transaction_manager.commit()
        b.transaction_manager.begin()
        master = b.root()["jobs"][1]
        assert [sj.status for sj in master.iter_subjobs()] == ["killed"] * 5
        assert master.counts() == {Status.KILLED: 5}
        assert [e[1:3] for e in master.subjob(2).history][-2:] == [
            ("submitted", "running"),
            ("running", "killed"),
        ]
        b.transaction_manager.abort()


def test_a_subjob_ending_after_a_kill_in_bulk_committed_conflicts_and_stays_killed() -> None:
    with two_masters(["submitted"] * 3) as (a, b):
        b.transaction_manager.begin()
        ended = b.root()["jobs"][1].subjob(1)
        assert ended.status == "submitted"  # loaded before the kill: cached in b
        a.transaction_manager.begin()
        kill_in_bulk(a.root()["jobs"][1], set())
        a.transaction_manager.commit()
        ended.change_status(Status.RUNNING, "monitor")  # b saw it start before the kill
        with pytest.raises(ConflictError):
            b.transaction_manager.commit()
        b.transaction_manager.abort()
        b.transaction_manager.begin()
        assert ended.status == "killed"  # read again: killed, never running
        assert b.root()["jobs"][1].counts() == {Status.KILLED: 3}
        b.transaction_manager.abort()
