"""What users meet every day: a master's status while its subjobs run, a submitted job's
frozen description, and one clear line for every mistake."""

from __future__ import annotations


from ganga_like import ArgSplitter, Executable, Job, jobs
from ganga_like.runtime.session import Session

from .waiting import wait_for


def test_a_split_job_is_running_as_soon_as_one_subjob_runs_while_others_wait(
        session: Session) -> None:
    # Two subjobs run at once (the session's Local.max_concurrent): the third waits.
    j = Job(application=Executable(exe="sleep"),
            splitter=ArgSplitter(args=[["30"], ["30"], ["30"]]))
    j.submit()
    try:
        wait_for(lambda: sum(s.status == "running" for s in j.subjobs) == 2, 60,
                 "two subjobs running")
        assert j.subjobs[2].status == "submitted"
        assert j.status == "running"
        # The status index (queries, the toolbar, `ganga list`) says the same.
        wait_for(lambda: j.id in jobs.query("status=running").ids(), 30,
                 "the index to say running")
    finally:
        j.kill()
