"""Conveniences scripts rely on: jobs by name, config sections by key, selecting by plugin
class, and a removed job that says so."""

from __future__ import annotations

import pytest

from ganga_like import Executable, Job, JobError, jobs
from ganga_like.runtime.session import Session


def test_jobs_by_name_is_the_most_recent_job_of_that_name(session: Session) -> None:
    first = Job(name="calib")
    other = Job(name="other")
    latest = Job(name="calib")
    assert jobs["calib"] is latest
    assert jobs["other"] is other
    assert first.id < latest.id
    # Integer keys keep their meaning: a position, as for a list.
    assert jobs[0] is first
    assert jobs[-1] is latest


def test_jobs_by_an_unknown_name_is_one_line_naming_it(session: Session) -> None:
    Job(name="calib")
    with pytest.raises(JobError, match="no job named 'nosuch'") as caught:
        jobs["nosuch"]
    assert isinstance(caught.value, KeyError)
    assert str(caught.value) == "no job named 'nosuch' in the repository"
    assert "\n" not in str(caught.value)
