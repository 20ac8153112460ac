"""Split jobs that tests put into a given state before they look at the master."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status

from .waiting import wait_for


@contextmanager
def two_subjobs_running_one_waiting() -> Iterator[Job]:
    """A submitted master of three ``sleep 30`` subjobs: two run at once (the session's
    Local.max_concurrent), the third waits.  The job is killed on the way out."""
    j = Job(
        application=Executable(exe="sleep"), splitter=ArgSplitter(args=[["30"], ["30"], ["30"]])
    )
    j.submit()
    try:
        wait_for(
            lambda: sum(s.status == "running" for s in j.subjobs) == 2, 60, "two subjobs running"
        )
        assert j.subjobs[2].status == "submitted"
        yield j
    finally:
        j.kill()


def submitted_model_master(subjobs: int) -> tuple[JobImpl, list[JobImpl]]:
    """A master of the model (no repository) submitted with ``subjobs`` subjobs, all
    submitted, at the model's clock; the master and its subjobs."""
    master = JobImpl()
    master.change_status(Status.SUBMITTING, "user: submit")
    children = [JobImpl.new_subjob(master, i) for i in range(subjobs)]
    master.attach_subjobs(children)
    for sj in children:
        sj.change_status(Status.SUBMITTED, "user: submit")
    master.change_status(Status.SUBMITTED, "user: submit")
    return master, children
