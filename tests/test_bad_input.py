"""Bad input gets one clear error and changes nothing stored."""

from __future__ import annotations

import pytest
import transaction

from ganga_like import (
    ArgSplitter,
    DatasetSplitter,
    Executable,
    GenericSplitter,
    Job,
    JobError,
    PluginError,
    SchemaError,
    jobs,
)
from ganga_like.repository.registry import Registry
from ganga_like.runtime.session import Session


def stored_state(session: Session, job_id: int) -> tuple[object, ...]:
    """The job as another connection sees it on disk."""
    conn = session.repo.db.open(transaction_manager=transaction.TransactionManager())
    try:
        job = Registry(conn.root()).get(job_id)
        assert job is not None
        return (job.status, job.subjob_count(), job.history, job.submit_count, job.name)
    finally:
        conn.close()


def test_submitting_a_job_twice_is_refused(session: Session) -> None:
    j = Job(application=Executable(exe="true"))
    j.submit()
    before = stored_state(session, j.id)
    with pytest.raises(JobError, match=r"only a new job can be submitted; use resubmit\(\)"):
        j.submit()
    assert stored_state(session, j.id) == before


@pytest.mark.parametrize(
    ("splitter", "message"),
    [
        (DatasetSplitter(files_per_subjob=2), "DatasetSplitter needs job.inputdata"),
        (
            GenericSplitter(multi_attrs={"application.args": [["1"]], "name": ["a", "b"]}),
            "value lists differ in length",
        ),
        (GenericSplitter(), "set attribute and values, or multi_attrs"),
        (
            GenericSplitter(attribute="application.args", values=["not-a-list"]),
            r"subjob 0: Executable\.args: expected a list",
        ),
        (GenericSplitter(attribute="status", values=["completed"]), "cannot set 'status'"),
        (ArgSplitter(args=[]), "produced no subjobs"),
    ],
)
def test_impossible_splits_leave_the_job_new_and_unchanged(
    session: Session, splitter: object, message: str
) -> None:
    j = Job(application=Executable(exe="echo"), splitter=splitter)
    before = stored_state(session, j.id)
    with pytest.raises(JobError, match=message):
        j.submit()
    assert j.status == "new" and j.subjobs == []
    assert stored_state(session, j.id) == before


def test_wrong_values_in_constructors_store_no_job(session: Session) -> None:
    with pytest.raises(SchemaError, match=r"Job\.name"):
        Job(name=3)
    with pytest.raises(SchemaError, match="Job has no attribute 'aplication'"):
        Job(aplication=Executable())
    with pytest.raises(PluginError, match="no plugin named 'Nope'"):
        Job(backend="Nope")
    assert len(jobs) == 0


def test_wrong_splitter_values_are_refused_at_assignment(session: Session) -> None:
    j = Job()
    with pytest.raises(SchemaError, match=r"ArgSplitter\.args"):
        j.splitter = ArgSplitter(args=["flat"])
    with pytest.raises(SchemaError, match=r"DatasetSplitter\.files_per_subjob"):
        DatasetSplitter(files_per_subjob=0)
    assert j.splitter is None


def test_killing_or_resubmitting_in_the_wrong_state(session: Session) -> None:
    j = Job()
    with pytest.raises(JobError, match="nothing to kill"):
        j.kill()
    with pytest.raises(JobError, match="only failed, killed or completed"):
        j.resubmit()
    with pytest.raises(JobError, match="force_status accepts"):
        j.force_status("running")


def test_bad_job_ids(session: Session) -> None:
    with pytest.raises(JobError, match="no job 42"):
        jobs(42)
    with pytest.raises(JobError, match="not a job id"):
        jobs("x.y")
    with pytest.raises(JobError, match="out of range"):
        jobs[5]
