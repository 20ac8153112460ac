"""Every assert and rule of the job-splitting design, against a real repository and runner.

The design lets the first two rules of a master's status be swapped, and the default does
(``Jobs.master_status_order``); this module runs under the design's own order."""

from __future__ import annotations

import logging

import pytest

from ganga_like import (
    ArgSplitter,
    Executable,
    GenericSplitter,
    Job,
    JobError,
    LocalFile,
    jobs,
)
from ganga_like.runtime.session import Session
from ganga_like_local.backend import Local as LocalBackend

from .split_jobs import two_subjobs_running_one_waiting

SESSION_SETTINGS = {"master_status_order": "submitted_first"}


def split_job(n: int = 5, exe: str = "echo") -> Job:
    return Job(
        application=Executable(exe=exe), splitter=ArgSplitter(args=[[str(i)] for i in range(n)])
    )


def test_subjobs_do_not_exist_before_submit_and_have_parent_links_after(session: Session) -> None:
    j = split_job()
    assert j.subjobs == []
    assert j.parent is None
    j.submit()
    assert j.subjobs != []
    for s in j.subjobs:
        assert s.parent is j
        assert s.master is j


def test_subjobs_cannot_be_removed_or_submitted_alone(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    j = split_job()
    j.submit()
    with caplog.at_level(logging.ERROR, logger="ganga_like"):
        assert not j.subjobs[1].remove()
        assert not j.subjobs[1].submit()
    assert "cannot be removed on its own" in caplog.text
    assert "cannot be submitted on its own" in caplog.text
    assert len(j.subjobs) == 5


def test_copy_of_a_subjob_is_a_new_top_level_job(session: Session) -> None:
    j = split_job()
    j.submit()
    j2 = j.subjobs[2].copy()
    assert j2.parent is None
    assert j2.id != j.id
    assert j2.status == "new"
    assert j2.application.args == ["2"]
    assert j2.splitter is None


def test_subjobs_can_be_killed_and_resubmitted_individually(session: Session) -> None:
    j = Job(application=Executable(exe="sleep"), splitter=ArgSplitter(args=[["30"], ["30"], ["0"]]))
    j.submit()
    assert j.subjobs[0].kill()
    assert j.subjobs[0].status == "killed"
    assert j.subjobs[0].resubmit()
    assert j.subjobs[0].status in ("submitted", "running")
    j.kill()
    assert j.status == "killed" or j.status == "completed"


def test_subjob_ids_are_ordered_from_zero_and_reachable_from_registry(session: Session) -> None:
    j = split_job(7)
    j.submit()
    for i in range(len(j.subjobs)):
        assert j.subjobs[i].id == i
    for s in j.subjobs:
        assert j.subjobs(s.id) is s
    assert jobs(j.id) is j
    for i in range(len(j.subjobs)):
        assert jobs((j.id, i)) is j.subjobs[i]
        assert jobs(f"{j.id}.{i}") is j.subjobs[i]
        assert j.subjobs[i].fqid == f"{j.id}.{i}"


def test_master_status_follows_subjobs_to_completed(session: Session) -> None:
    j = split_job(6)
    j.submit()
    assert j.status in ("submitted", "running", "completed")
    assert j.wait(timeout=60) == "completed"
    assert all(s.status == "completed" for s in j.subjobs)
    assert all(s.exit_code == 0 for s in j.subjobs)


def test_a_master_with_a_waiting_subjob_is_submitted_even_while_others_run(
    session: Session,
) -> None:
    with two_subjobs_running_one_waiting() as j:
        assert j.status == "submitted"


def test_master_fails_when_a_subjob_fails_and_resubmit_moves_it_back(session: Session) -> None:
    j = Job(
        application=Executable(exe="sh"),
        splitter=ArgSplitter(args=[["-c", "exit 0"], ["-c", "exit 3"]]),
    )
    j.submit()
    assert j.wait(timeout=60) == "failed"
    failed = j.subjobs[1]
    assert failed.status == "failed" and failed.exit_code == 3
    assert "exit code 3" in failed.history[-1].cause
    j.resubmit()
    assert j.status == "submitted"  # master goes from failed to submitted on resubmit
    assert j.subjobs[0].status == "completed"  # only failed subjobs are resubmitted
    assert j.wait(timeout=60) == "failed"
    assert failed.history[-1].new == "failed"
    assert j.subjobs[1].info["submit_count"] == 2


def test_splitter_failure_rolls_back_to_new_with_no_subjobs(session: Session) -> None:
    j = Job(
        application=Executable(exe="echo"),
        splitter=GenericSplitter(attribute="application.no_such", values=[1, 2]),
    )
    with pytest.raises(JobError, match="no_such"):
        j.submit()
    assert j.status == "new"
    assert j.subjobs == []
    j2 = Job(splitter=ArgSplitter(args=[]))
    with pytest.raises(JobError, match="no subjobs"):
        j2.submit()
    assert j2.status == "new" and j2.subjobs == []


def test_emulated_bulk_keep_going_false_stops_at_first_failure(
    session: Session, tmp_path: object
) -> None:
    good = _input_file(session, "good.txt")
    j = Job(
        application=Executable(exe="cat"),
        splitter=GenericSplitter(
            attribute="inputfiles",
            values=[[LocalFile(good)], [LocalFile("/no/such/file")], [LocalFile(good)]],
        ),
    )
    with pytest.raises(JobError, match="stopped"):
        j.submit(keep_going=False)
    assert [s.status for s in j.subjobs] == ["submitted", "new", "new"] or j.subjobs[0].status in (
        "running",
        "completed",
    )
    assert j.subjobs[1].status == "new" and j.subjobs[2].status == "new"
    assert j.status != "new"


def test_emulated_bulk_keep_going_true_submits_the_rest(session: Session) -> None:
    good = _input_file(session, "good.txt")
    j = Job(
        application=Executable(exe="cat"),
        splitter=GenericSplitter(
            attribute="inputfiles",
            values=[[LocalFile(good)], [LocalFile("/no/such/file")], [LocalFile(good)]],
        ),
    )
    assert j.submit(keep_going=True)
    assert j.subjobs[1].status == "new"
    assert "submission failed" in j.subjobs[1].history[-1].cause
    # Once the others finished, the master is new, not completed: one subjob never ran.
    with pytest.raises(JobError, match="1 of its subjobs were never submitted"):
        j.wait(timeout=60)
    assert j.status == "new"
    assert [s.status for s in j.subjobs] == ["completed", "new", "completed"]


@pytest.mark.parametrize("bad", [1, 66])
def test_keep_going_false_stops_at_the_failure_when_the_first_subjobs_start_early(
    session: Session, bad: int
) -> None:
    # Local hands its first subjobs over before the others are prepared: the rule holds
    # for a failure among those and for one after them alike.
    assert 0 < LocalBackend.early_start_batch < 70
    good = _input_file(session, "good.txt")
    values = [[LocalFile(good)] for _ in range(70)]
    values[bad] = [LocalFile("/no/such/file")]
    j = Job(
        application=Executable(exe="cat"),
        splitter=GenericSplitter(attribute="inputfiles", values=values),
    )
    with pytest.raises(JobError, match="stopped"):
        j.submit(keep_going=False)
    assert all(s.status == "new" for s in j.subjobs[bad:])
    assert all(s.status != "new" for s in j.subjobs[:bad])
    with pytest.raises(JobError, match=f"{70 - bad} of its subjobs were never submitted"):
        j.wait(timeout=60)
    assert j.status == "new"


def test_keep_going_true_submits_every_good_subjob_across_early_and_later_batches(
    session: Session,
) -> None:
    good = _input_file(session, "good.txt")
    values = [[LocalFile(good)] for _ in range(70)]
    for bad in (3, 67):
        values[bad] = [LocalFile("/no/such/file")]
    j = Job(
        application=Executable(exe="cat"),
        splitter=GenericSplitter(attribute="inputfiles", values=values),
    )
    assert j.submit(keep_going=True)
    assert [s.id for s in j.subjobs if s.status == "new"] == [3, 67]
    with pytest.raises(JobError, match="2 of its subjobs were never submitted"):
        j.wait(timeout=60)
    assert j.status == "new"
    assert sum(s.status == "completed" for s in j.subjobs) == 68
    assert j.subjobs[66].status == j.subjobs[69].status == "completed"


def test_all_subjobs_failing_to_submit_rolls_the_master_back(session: Session) -> None:
    j = Job(
        application=Executable(exe="cat"),
        splitter=GenericSplitter(
            attribute="inputfiles", values=[[LocalFile("/no/such/a")], [LocalFile("/no/such/b")]]
        ),
    )
    with pytest.raises(JobError, match="no subjob could be submitted"):
        j.submit(keep_going=True)
    assert j.status == "new"
    assert j.subjobs == []


def test_subjobs_are_never_new_after_a_successful_submit(session: Session) -> None:
    j = split_job(20)
    j.submit()
    assert all(s.status != "new" for s in j.subjobs)


def _input_file(session: Session, name: str) -> str:
    path = session.repo.gangadir.parent / name
    path.write_text("content\n")
    return str(path)


def test_a_resubmitted_job_runs_what_it_was_submitted_with(session: Session) -> None:
    j = Job(application=Executable(exe="sh", args=["-c", "exit 2"]))
    j.submit()
    assert j.wait(timeout=60) == "failed"
    with pytest.raises(JobError, match=r"job .* is failed: application\.args can no longer"):
        j.application.args = ["-c", "exit 0"]
    j.comment = "second try"  # user metadata still changes
    j.resubmit()
    assert j.wait(timeout=60) == "failed"
    assert j.application.args == ["-c", "exit 2"]
    causes = [e.cause for e in j.history if e.new == "submitting"]
    assert causes == ["user: submit", "user: resubmit"]
