"""The registry keeps jobs through what it needs of them (StoredJob), the model's Job decides
what they are listed under, and an object whose class is gone is left as it is."""

from __future__ import annotations

from pathlib import Path

import pytest
from ZODB.broken import Broken

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.model.job import Job as JobImpl
from ganga_like.repository.connection import Repository
from ganga_like.repository.registry import Registry
from ganga_like.repository.stored import StoredJob
from ganga_like.runtime.session import Session


def test_a_model_job_has_all_the_registry_needs_of_a_stored_job() -> None:
    job = JobImpl()
    assert isinstance(job, StoredJob)
    assert job.index_label() == "new"
    sub = JobImpl.new_subjob(job, 0)
    assert isinstance(sub, StoredJob) and sub.index_label() is None
    job.attach_subjobs([sub])
    assert job.find_subjob(0) is sub and job.find_subjob(1) is None
    assert JobImpl().find_subjob(0) is None


def test_an_object_whose_class_is_gone_stays_listed_and_is_never_indexed_anew(
    gangadir_with_a_broken_job: Path,
) -> None:
    repo = Repository(gangadir_with_a_broken_job)
    try:
        registry = repo.registry()
        broken = registry.get(1)
        assert isinstance(broken, Broken) and not isinstance(broken, StoredJob)
        registry.reindex(broken)
        assert registry.indexed_status(1) == "new"
        assert registry.lookup(1, None) is broken
        # Indexes rebuilt from the jobs (as for a repository older than them): the model's
        # job is listed, the broken object is not.
        root = registry.root
        for key in ("by_status", "status_of", "by_name"):
            del root[key]
        Registry.initialise(root)
        assert list(registry.ids_with_status("new")) == [0]
        assert registry.indexed_status(1) is None
        registry.remove(1)
        assert registry.get(1) is None
        repo.abort()
    finally:
        repo.close()


def test_a_master_logs_the_changes_of_its_derived_status(session: Session) -> None:
    j = Job(application=Executable(exe="true"), splitter=ArgSplitter(args=[["1"], ["2"], ["3"]]))
    j.submit()
    assert j.wait(timeout=60) == "completed"
    derived = [e for e in j.history if e.cause == "derived from its subjobs"]
    assert derived and derived[-1].new == "completed"
    assert all(e.old != e.new for e in derived)
    assert j.time["completed"].timestamp() == pytest.approx(derived[-1].time)
    # The registry lists it under the status it shows.
    assert session.repo.registry().indexed_status(j.id) == "completed"
