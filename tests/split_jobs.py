"""Split jobs that tests put into a given state before they look at the master."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ganga_like import ArgSplitter, Executable, Job

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
