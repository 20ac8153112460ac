"""Jobs that wait for other jobs (``after=``), on the real Local backend in one session:
waiting, submitted by the monitor once the condition holds, skipped naming the root
failure, re-armed by a resubmission, and refused in one line when given nonsense."""

from __future__ import annotations

from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job, SchemaError, jobs, why
from ganga_like.errors import GangaError
from ganga_like.runtime.session import Session
from ganga_like.runtime.workflow import driver, index


def _script(tmp_path: Path, body: str, name: str = "step.sh") -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def _ok(tmp_path: Path) -> Executable:
    return Executable(exe=_script(tmp_path, "exit 0", "ok.sh"))


def _gated(tmp_path: Path) -> Executable:
    """A program that ends (exit 0) once the test opens the gate (creates ``gate``)."""
    gate = tmp_path / "gate"
    return Executable(exe=_script(tmp_path, f"while ! test -e {gate}; do sleep 0.05; done"))


def _fails_until(tmp_path: Path, marker: Path) -> Executable:
    """A program that waits for the gate, then exits 3 until ``marker`` exists (so a
    resubmission can succeed)."""
    gate = tmp_path / "gate"
    body = f"while ! test -e {gate}; do sleep 0.05; done\ntest -e {marker} || exit 3"
    return Executable(exe=_script(tmp_path, body, "flaky.sh"))


def _submits(job: Job) -> int:
    """How many times the event log shows the job handed to submission."""
    return sum(1 for e in job.history if e.new == "submitting")


def test_a_three_stage_chain_waits_then_runs_to_the_end(session: Session, tmp_path: Path) -> None:
    a = Job(application=_gated(tmp_path), splitter=ArgSplitter(args=[["1"], ["2"], ["3"]]))
    b = Job(application=_ok(tmp_path), after=a)
    c = Job(application=_ok(tmp_path), after=b)
    assert a.submit() and b.submit() and c.submit()
    assert b.status == "waiting" and c.status == "waiting"
    assert jobs.select(status="waiting").ids() == [b.id, c.id]
    (tmp_path / "gate").touch()
    assert c.wait(timeout=120) == "completed"
    assert [j.status for j in (a, b, c)] == ["completed"] * 3
    assert [_submits(j) for j in (a, b, c)] == [1, 1, 1]
    assert c.upstream.ids() == [b.id] and a.downstream.ids() == [b.id]
    assert not index.pending(session.repo.connection().root())


def test_a_failed_upstream_subjob_skips_the_chain_naming_the_root_failure(
    session: Session, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flaky = _fails_until(tmp_path, tmp_path / "fixed")
    a = Job(application=flaky, splitter=ArgSplitter(args=[["1"], ["2"]]))
    b = Job(application=_ok(tmp_path), after=a)
    c = Job(application=_ok(tmp_path), after=b)
    for j in (a, b, c):
        j.submit()
    (tmp_path / "gate").touch()
    assert c.wait(timeout=120) == "skipped"
    assert b.status == "skipped"
    for j in (b, c):
        assert j.history[-1].cause == f"monitor: skipped: upstream {a.id}.0 failed (exit 3)"
    why(c)
    chain = capsys.readouterr().out.splitlines()
    assert chain[0] == f"{c.id} skipped: it waited for {b.id} to be completed"
    assert chain[-1].startswith(f"{a.id}.0 failed (exit 3)")
    # Its times show when it started waiting and when it was skipped, nothing it never did.
    skipped_times = [name for name, _value in c.time.rows() if name in c.time]
    assert skipped_times == ["new", "waiting", "skipped"]
    assert c.time.waiting <= c.time.skipped

    # Resubmitting the upstream re-arms the skipped chain, which then completes.
    (tmp_path / "fixed").touch()
    (tmp_path / "gate").unlink()
    a.resubmit()
    assert b.status == "waiting" and c.status == "waiting"
    assert [name for name, _value in c.time.rows() if name in c.time] == ["new", "waiting"]
    (tmp_path / "gate").touch()
    assert c.wait(timeout=120) == "completed"
    assert [_submits(j) for j in (b, c)] == [1, 1]
    shown = [name for name, _value in c.time.rows() if name in c.time]
    assert shown == ["new", "waiting", "submitting", "submitted", "running", "completed"]


def test_allow_failed_tolerates_a_count_and_when_finished_any_outcome(
    session: Session, tmp_path: Path
) -> None:
    flaky = _fails_until(tmp_path, tmp_path / "never")
    a = Job(application=flaky, splitter=ArgSplitter(args=[["1"]]))
    tolerant = Job(application=_ok(tmp_path), after=a, allow_failed=1)
    anyway = Job(application=_ok(tmp_path), after=a, when="finished")
    cleanup = Job(application=_ok(tmp_path), after=a, when="failed")
    strict = Job(application=_ok(tmp_path), after=a)
    for j in (a, tolerant, anyway, cleanup, strict):
        j.submit()
    (tmp_path / "gate").touch()
    for j in (tolerant, anyway, cleanup):
        assert j.wait(timeout=120) == "completed"
    assert strict.wait(timeout=120) == "skipped"


def test_a_job_whose_upstream_already_failed_is_skipped_at_submit(
    session: Session, tmp_path: Path
) -> None:
    a = Job(application=_fails_until(tmp_path, tmp_path / "never"))
    (tmp_path / "gate").touch()
    a.submit()
    assert a.wait(timeout=60) == "failed"
    b = Job(application=_ok(tmp_path), after=a)
    assert b.submit() is False
    assert b.status == "skipped"
    done = Job(application=_ok(tmp_path))
    done.submit()
    assert done.wait(timeout=60) == "completed"
    c = Job(application=_ok(tmp_path), after=[done])
    assert c.submit() and c.status in ("submitted", "running", "completed")


def test_bad_dependencies_are_refused_in_one_line_and_nothing_is_made(
    session: Session, tmp_path: Path
) -> None:
    a = Job(application=_ok(tmp_path))
    before = len(jobs)
    for bad, words in (
        (dict(after=1.5), "Job.after: expected a job"),
        (dict(after="x"), "Job.after: expected a job id"),
        (dict(after=999), "Job.after: job 999 does not exist"),
        (dict(after=f"{a.id}.4"), f"job {a.id} has no subjob 4"),
        (dict(after=a, when="done"), "Job.when: expected one of 'completed'"),
        (dict(after=a, allow_failed=-1), "Job.allow_failed: expected a count"),
        (dict(after=a, allow_failed=1.5), "Job.allow_failed: expected a count"),
        (dict(after=a, allow_failed="2"), "Job.allow_failed: expected a count"),
    ):
        with pytest.raises(SchemaError) as refused:
            Job(application=_ok(tmp_path), **bad)
        assert words in str(refused.value) and "\n" not in str(refused.value)
    assert len(jobs) == before
    with pytest.raises(SchemaError, match="cannot wait for itself"):
        a.after = a
    assert a.after == []


def test_a_cycle_is_refused_at_submit_and_nothing_is_submitted(
    session: Session, tmp_path: Path
) -> None:
    a = Job(application=_ok(tmp_path))
    b = Job(application=_ok(tmp_path), after=a)
    a.after = b
    with pytest.raises(GangaError) as refused:
        a.submit()
    assert f"cycle: {a.id} -> {b.id} -> {a.id}" in str(refused.value)
    assert a.status == "new" and b.status == "new"
    assert not session.registry().root.get(index.DEPENDENTS_KEY)


def test_killing_an_upstream_with_waiting_dependents_needs_a_decision(
    session: Session, tmp_path: Path
) -> None:
    a = Job(application=_gated(tmp_path))
    b = Job(application=_ok(tmp_path), after=a)
    a.submit()
    b.submit()
    with pytest.raises(GangaError) as refused:
        a.kill()
    assert "kill(dependents='skip') or kill(dependents='keep')" in str(refused.value)
    assert a.status in ("submitted", "running") and b.status == "waiting"
    with pytest.raises(SchemaError, match="dependents expected one of"):
        a.kill(dependents="drop")
    a.kill(dependents="keep")
    assert a.status == "killed" and b.status == "waiting"
    # Kept for good: a later look at every waiting job (the lease holder's periodic one)
    # leaves it waiting for a's resubmission.
    driver._swept.clear()
    session.monitor.run_once()
    assert b.status == "waiting" and b._impl._kept_for == (a.id,)
    (tmp_path / "gate").touch()
    a.resubmit()
    assert b._impl._kept_for == ()  # a's next end decides for it, as any upstream's
    assert b.wait(timeout=120) == "completed"

    c = Job(application=_gated(tmp_path))
    d = Job(application=_ok(tmp_path), after=c)
    (tmp_path / "gate").unlink()
    c.submit()
    d.submit()
    c.kill(dependents="skip")
    assert d.status == "skipped"
    assert d.history[-1].cause == f"user: skipped: upstream {c.id} was killed"


def test_a_waiting_job_killed_ends_killed_and_what_waits_for_it_is_decided(
    session: Session, tmp_path: Path
) -> None:
    a = Job(application=_gated(tmp_path))
    b = Job(application=_ok(tmp_path), after=a)
    c = Job(application=_ok(tmp_path), after=b)
    for j in (a, b, c):
        j.submit()
    b.kill(dependents="skip")
    assert (a.status in ("submitted", "running"), b.status, c.status) == (True, "killed", "skipped")
    assert c.history[-1].cause == f"user: skipped: upstream {b.id} was killed"
    a.kill()  # nothing waits for it any more: no decision needed
    assert a.status == "killed"


def test_waiting_jobs_are_found_by_status_and_by_what_they_wait_for_and_shown_so(
    session: Session, tmp_path: Path
) -> None:
    from ganga_like.runtime.workflow.explain import dependency_line
    from ganga_like.shell.display import job_html

    a = Job(application=_gated(tmp_path), splitter=ArgSplitter(args=[["1"], ["2"]]))
    b = Job(application=_ok(tmp_path), after=a, allow_failed=1)
    other = Job(application=_ok(tmp_path))
    a.submit()
    b.submit()
    assert jobs.query("status=waiting").ids() == [b.id]
    assert jobs.query(f"after={a.id}").ids() == [b.id]
    assert (
        jobs.query("allow_failed=1").ids() == [b.id]
        and other.id not in jobs.query(f"after={a.id}").ids()
    )
    line = dependency_line(b._impl)
    assert line is not None
    assert line.startswith(f"{a.id} (completed, allow_failed=1); waiting for {a.id} (0 done")
    assert "waiting for" in job_html(b)
    (tmp_path / "gate").touch()
    assert b.wait(timeout=120) == "completed"


def test_removing_what_a_job_waits_for_skips_it(session: Session, tmp_path: Path) -> None:
    a = Job(application=_ok(tmp_path))  # never submitted: what waits for it waits
    b = Job(application=_ok(tmp_path), after=a)
    c = Job(application=_ok(tmp_path), after=b)
    b.submit()
    c.submit()
    assert (b.status, c.status) == ("waiting", "waiting")
    a.remove()
    assert (b.status, c.status) == ("skipped", "skipped")
    assert c.history[-1].cause == f"user: skipped: upstream {a.id} was removed"
    with pytest.raises(SchemaError, match=f"job {a.id} does not exist"):
        Job(after=a.id)


def test_a_job_waits_for_one_subjob_and_a_template_refers_to_jobs_without_holding_them(
    session: Session, tmp_path: Path
) -> None:
    from ganga_like import JobTemplate

    flaky = _fails_until(tmp_path, tmp_path / "never")
    a = Job(application=flaky, splitter=ArgSplitter(args=[["1"], ["2"]]))
    a.submit()
    good = Job(application=_ok(tmp_path), after=a.subjobs[0], when="finished")
    assert good.submit() and good.status == "waiting"
    template = JobTemplate(after=[a])
    assert template.after == [str(a.id)] and Job(template).after == [str(a.id)]
    assert object.__getattribute__(a, "_owner") is None  # referred to, not held
    assert a.downstream.ids() == [good.id]  # through its subjob
    (tmp_path / "gate").touch()
    assert good.wait(timeout=120) == "completed"
    assert a.wait(timeout=120) == "failed"


def test_what_waits_for_a_job_with_postprocessors_waits_for_them_too(
    session: Session, tmp_path: Path
) -> None:
    from ganga_like import FileChecker, TextMerger

    said = Executable(exe=_script(tmp_path, "echo ERROR", "says_error.sh"))
    rejects = FileChecker(files=["stdout"], searchStrings=["ERROR"], failIfFound=True)
    checked = Job(application=said, postprocessors=[rejects])
    merged = Job(
        application=_ok(tmp_path),
        splitter=ArgSplitter(args=[["1"], ["2"]]),
        postprocessors=[TextMerger(files=["stdout"])],
    )
    after_checked = Job(application=_ok(tmp_path), after=checked)
    after_merged = Job(application=_ok(tmp_path), after=merged)
    for j in (checked, merged, after_checked, after_merged):
        j.submit()
    assert after_checked.wait(timeout=120) == "skipped"
    assert after_checked.history[-1].cause.startswith(
        f"monitor: skipped: upstream {checked.id} failed (postprocessing: "
    )
    assert after_merged.wait(timeout=120) == "completed"
    # Submitted only once the merger had written the merged output.
    merged_file = (merged.outputdir / "stdout").stat().st_mtime
    submitted = next(e.time for e in after_merged.history if e.new == "submitting")
    assert submitted >= merged_file


def test_resubmitting_a_skipped_job_makes_it_wait_again(session: Session, tmp_path: Path) -> None:
    a = Job(application=_fails_until(tmp_path, tmp_path / "fixed"))
    b = Job(application=_ok(tmp_path), after=a)
    a.submit()
    b.submit()
    (tmp_path / "gate").touch()
    assert b.wait(timeout=120) == "skipped"
    b.resubmit()  # what it waits for still failed: skipped again, by the monitor
    assert b.wait(timeout=120) == "skipped"
    assert [e.new for e in b.history][-2:] == ["waiting", "skipped"]
    (tmp_path / "fixed").touch()
    a.resubmit()
    assert b.wait(timeout=120) == "completed"


def test_a_waiting_job_whose_decision_was_missed_is_found_by_the_periodic_look(
    session: Session, tmp_path: Path
) -> None:
    """Two sessions committing at once an upstream's end and the start of a job waiting
    for it can each miss the other; the lease holder looks at every waiting job again
    periodically. Made here by recording a job waiting with no decision pending."""
    from ganga_like.model.status import Status

    a = Job(application=_ok(tmp_path))
    a.submit()
    assert a.wait(timeout=60) == "completed"
    b = Job(application=_ok(tmp_path), after=a)

    def missed() -> None:
        index.add_dependent(session.registry().root, str(a.id), b.id)
        b._impl.change_status(Status.WAITING, "test: started waiting, decision missed")
        session.registry().reindex(b._impl)

    session.repo.in_transaction(missed)
    driver._swept.clear()  # the period is over
    session.poke_monitor()
    assert b.wait(timeout=120) == "completed"
