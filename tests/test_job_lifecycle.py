"""Settling finished jobs (freeze, unfreeze, resplit) and the times of a job's states,
with real Local jobs in a real repository; a fresh process reads back what was recorded."""

from __future__ import annotations

import datetime as dt
import html
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ganga_like import ArgSplitter, Executable, GenericSplitter, Job, Local, TextMerger, jobs
from ganga_like.errors import GangaError, IllegalTransitionError, JobError
from ganga_like.gpi.job_table import _SHORT
from ganga_like.gpi.proxy import unwrap
from ganga_like.model.counter import StatusCounter
from ganga_like.model.status import Status, check_transition, freezing, master_status
from ganga_like.model.times import JobTimes
from ganga_like.runtime.session import Session, close_session
from ganga_like.shell.display import SHORT, times_html

from .waiting import wait_for


def exits(*codes: int) -> Job:
    """A submitted master of one ``sh -c 'exit N'`` subjob per code."""
    j = Job(
        application=Executable(exe="sh"),
        splitter=ArgSplitter(args=[["-c", f"exit {code}"] for code in codes]),
    )
    j.submit()
    return j


def finished(j: Job, expected: str) -> Job:
    assert j.wait(timeout=120) == expected, [s.history[-1] for s in j.subjobs]
    return j


# -- freeze ------------------------------------------------------------------------------


def test_freezing_its_failed_subjob_makes_the_master_completed(session: Session) -> None:
    j = finished(exits(0, 3, 0), "failed")
    counter = unwrap(j)._counter
    ran = counter.run_seconds

    assert j.subjobs[1].freeze()

    assert j.subjobs[1].status == "failed_frozen"
    assert j.status == "completed"
    assert counter.run_seconds == ran  # the frozen run is not counted twice
    assert j in list(jobs.select(status="completed"))
    assert "ffrz:1" in repr(jobs)  # the jobs table counts it under its own label
    assert j.id in jobs.query("subjobs.failed_frozen=1").ids()


def test_a_masters_resubmit_passes_its_frozen_subjobs_by(session: Session) -> None:
    j = finished(exits(3, 3, 0), "failed")
    j.subjobs[0].freeze()

    j.resubmit()

    finished(j, "failed")  # subjob 1 fails again; subjob 0 was never run again
    assert [s.info["submit_count"] for s in j.subjobs] == [1, 2, 1]
    assert j.subjobs[0].status == "failed_frozen"
    assert [e.new for e in j.subjobs[0].history] == [
        "submitted",
        "running",
        "failed",
        "failed_frozen",
    ]


def test_unfreeze_gives_back_the_state_the_job_was_frozen_in(session: Session) -> None:
    j = finished(exits(0, 3), "failed")
    done, bad = j.subjobs
    done.freeze()
    bad.freeze()
    # Nothing else counts: one of them completed, so the master did.
    assert (done.status, bad.status, j.status) == ("completed_frozen", "failed_frozen", "completed")

    done.unfreeze()
    bad.unfreeze()

    assert (done.status, bad.status, j.status) == ("completed", "failed", "failed")
    bad.resubmit(keep_going=False)  # an unfrozen subjob is an ordinary one again
    finished(j, "failed")


def test_a_killed_job_freezes_as_failed_and_unfreezes_as_killed(session: Session) -> None:
    j = Job(application=Executable(exe="sleep", args=["30"]))
    j.submit()
    j.wait(timeout=60, until="running")
    j.kill()
    assert j.wait(timeout=60) == "killed"

    j.freeze()

    assert j.status == "failed_frozen"
    assert j in list(jobs.select(status="failed_frozen"))
    assert jobs.query("status=failed_frozen").ids() == [j.id]  # the status index knows it
    with pytest.raises(JobError, match="is failed_frozen: unfreeze"):
        j.force_status("completed")
    j.unfreeze()
    assert j.status == "killed"
    assert jobs.query("status=failed_frozen").ids() == []


def test_slices_freeze_and_unfreeze_in_bulk_collecting_the_refusals(session: Session) -> None:
    j = finished(exits(3, 0, 3), "failed")
    assert j.subjobs.select(status="failed").freeze() == []
    assert [s.status for s in j.subjobs] == ["failed_frozen", "completed", "failed_frozen"]
    assert j.status == "completed"
    errors = j.subjobs.unfreeze()
    assert errors == [f"{j.id}.1: job {j.id}.1 is completed: only a frozen job can be unfrozen"]
    assert [s.status for s in j.subjobs] == ["failed", "completed", "failed"]
    with pytest.raises(JobError, match="only a frozen job"):
        j.subjobs.unfreeze(keep_going=False)


def test_force_status_of_a_master_leaves_its_frozen_subjobs_as_they_are(session: Session) -> None:
    j = finished(exits(3, 3), "failed")
    j.subjobs[0].freeze()
    j.force_status("completed")
    assert [s.status for s in j.subjobs] == ["failed_frozen", "completed"]


# -- resplit -----------------------------------------------------------------------------


def test_a_resplit_subjob_runs_as_new_subjobs_and_the_master_completes(session: Session) -> None:
    # Subjob 1 is `sh -c 'exit 3'` (the master's exe is `true`): its pieces must keep its
    # own exe, as if the subjob were the job being split.
    j = Job(
        application=Executable(exe="true", args=["-c", "exit 3"]),
        splitter=GenericSplitter(attribute="application.exe", values=["true", "sh"]),
    )
    j.submit()
    finished(j, "failed")

    assert j.subjobs[1].resplit(ArgSplitter(args=[["-c", "echo a"], ["-c", "echo b"]]))

    assert len(j.subjobs) == 4
    assert j.subjobs[1].status == "failed_frozen"
    pieces = j.subjobs[2], j.subjobs[3]
    assert [p.fqid for p in pieces] == [f"{j.id}.2", f"{j.id}.3"]
    assert all(p.master is j and p.application.exe == "sh" for p in pieces)
    finished(j, "completed")
    assert [(p.outputdir / "stdout").read_text() for p in pieces] == ["a\n", "b\n"]
    assert [p.info["submit_count"] for p in pieces] == [1, 1]
    assert "resplit of subjob" in " ".join(e.cause for e in j.history)


def test_resplitting_an_active_subjob_a_master_or_with_no_splitter_is_refused(
    session: Session,
) -> None:
    j = Job(application=Executable(exe="sleep"), splitter=ArgSplitter(args=[["30"], ["0"]]))
    j.submit()
    wait_for(lambda: j.subjobs[0].status == "running", 60, "subjob 0 running")
    splitter = ArgSplitter(args=[["1"]])
    try:
        with pytest.raises(JobError, match=r"is running: only a completed, failed or killed"):
            j.subjobs[0].resplit(splitter)
        with pytest.raises(JobError, match="is a master: resplit one of its subjobs"):
            j.resplit(splitter)
        j.subjobs[1].wait(timeout=60)
        with pytest.raises(GangaError, match=r"Job\.splitter: .*splitter"):
            j.subjobs[1].resplit(Local())
        with pytest.raises(GangaError, match=r"Job\.splitter"):
            j.subjobs[1].resplit(3)
        with pytest.raises(JobError, match="resplit needs a splitter"):
            j.subjobs[1].resplit(None)
        with pytest.raises(JobError, match="the splitter produced no subjobs"):
            j.subjobs[1].resplit(ArgSplitter(args=[]))
        alone = Job(application=Executable(exe="true"))
        with pytest.raises(JobError, match="is not a subjob"):
            alone.resplit(splitter)
        assert len(j.subjobs) == 2  # nothing was added
        assert j.subjobs[1].status == "completed"  # nor frozen
    finally:
        j.kill()


def merged_job(*scripts: str) -> Job:
    j = Job(
        application=Executable(exe="sh"),
        splitter=ArgSplitter(args=[["-c", script] for script in scripts]),
        postprocessors=[TextMerger(files=["stdout"])],
    )
    j.submit()
    return j


def test_freezing_the_failed_subjob_merges_the_others_outputs(session: Session) -> None:
    j = finished(merged_job("echo a", "echo b; exit 3"), "failed")
    j.subjobs[1].freeze()
    assert j.wait(timeout=120) == "completed"  # once its mergers have run
    merged = (j.outputdir / "stdout").read_text()
    assert f"subjob {j.id}.0" in merged and "a\n" in merged
    assert f"subjob {j.id}.1" not in merged and "b\n" not in merged


def test_the_mergers_of_a_resplit_master_take_the_pieces_not_the_frozen_subjob(
    session: Session,
) -> None:
    j = finished(merged_job("echo a", "echo b; exit 3"), "failed")
    j.subjobs[1].resplit(ArgSplitter(args=[["-c", "echo c"], ["-c", "echo d"]]))
    assert j.wait(timeout=120) == "completed"
    merged = (j.outputdir / "stdout").read_text()
    headers = [line for line in merged.splitlines() if line.startswith("# ==>")]
    assert [h.split()[3] for h in headers] == [f"{j.id}.{i}:" for i in (0, 2, 3)]


# -- bad input ---------------------------------------------------------------------------


def test_freezing_a_new_or_running_job_or_a_master_is_refused_in_one_line(
    session: Session,
) -> None:
    fresh = Job(application=Executable(exe="true"))
    with pytest.raises(JobError, match=r"is new: only a completed, failed or killed job"):
        fresh.freeze()
    with pytest.raises(JobError, match=r"is new: only a frozen job can be unfrozen"):
        fresh.unfreeze()
    j = Job(application=Executable(exe="sleep"), splitter=ArgSplitter(args=[["30"]]))
    j.submit()
    wait_for(lambda: j.subjobs[0].status == "running", 60, "subjob running")
    try:
        with pytest.raises(JobError, match=r"is running: only a completed, failed or killed"):
            j.subjobs[0].freeze()
        with pytest.raises(JobError, match="is a master: freeze its subjobs"):
            j.freeze()
        assert (j.subjobs[0].status, fresh.status) == ("running", "new")
    finally:
        j.kill()
    j.wait(timeout=60)
    j.subjobs[0].freeze()
    with pytest.raises(JobError, match="is failed_frozen already"):
        j.subjobs[0].freeze()
    # A master is never frozen itself: unfreezing it says so, not a stale status of its own.
    with pytest.raises(JobError, match=rf"^job {j.id} is a master: unfreeze its subjobs"):
        j.unfreeze()


def test_resubmitting_a_frozen_subjob_says_to_unfreeze_it(session: Session) -> None:
    j = finished(exits(3), "failed")
    j.subjobs[0].freeze()
    with pytest.raises(
        JobError, match=r"^job \d+\.0 is failed_frozen: unfreeze\(\) it to resubmit"
    ):
        j.subjobs[0].resubmit()
    with pytest.raises(JobError, match="no failed or killed subjob to resubmit"):
        j.resubmit()
    assert j.subjobs[0].info["submit_count"] == 1


def test_a_completed_master_resubmitted_runs_its_subjobs_again_but_not_the_frozen(
    session: Session,
) -> None:
    j = finished(exits(0, 3, 0), "failed")
    j.subjobs[1].freeze()
    assert j.status == "completed"
    j.resubmit()
    assert finished(j, "completed") is j
    counts = [sj.info["submit_count"] for sj in j.subjobs]
    assert counts == [2, 1, 2]
    assert j.subjobs[1].status == "failed_frozen"


# -- times -------------------------------------------------------------------------------


def test_a_job_records_when_it_was_created_and_each_state_it_reached(session: Session) -> None:
    before = dt.datetime.now()
    j = Job(application=Executable(exe="sleep", args=["0.3"]))
    assert before <= j.time.new <= dt.datetime.now()
    assert j.time.submitted is None and j.time.runtime() is None and j.time.waittime() is None
    j.submit()
    assert j.wait(timeout=60) == "completed"

    t = j.time
    assert set(t) == {"new", "submitting", "submitted", "running", "completed"}
    assert t["running"] == t.running and t.failed is None
    assert t.new <= t.submitting <= t.submitted and t.running <= t.completed
    runtime, waittime = t.runtime(), t.waittime()
    assert runtime is not None and waittime is not None
    assert dt.timedelta(seconds=0.3) <= runtime
    assert abs(runtime - (t.completed - t.running)) < dt.timedelta(milliseconds=1)
    assert dt.timedelta(0) <= waittime < dt.timedelta(seconds=30)
    assert [line.split()[0] for line in str(t.details()).splitlines()] == [
        "job", "new", "submitting", "submitted", "running", "completed", "runtime", "waittime",
    ]  # fmt: skip
    with pytest.raises(AttributeError, match="they are: new, waiting, submitting"):
        _ = t.submited  # type: ignore[attr-defined]


def test_a_time_not_reached_or_not_a_state_is_one_line_and_still_a_key_or_attribute_error(
    session: Session,
) -> None:
    j = Job()
    with pytest.raises(JobError, match=rf"^job {j.id} has not been failed$") as never:
        j.time["failed"]
    assert isinstance(never.value, KeyError)
    with pytest.raises(JobError, match=r"^job times have no 'finished'; they are: new, ") as bad:
        j.time["finished"]
    assert isinstance(bad.value, KeyError)
    assert j.time.get("failed") is None and "failed" not in j.time  # a mapping still
    # A mistyped attribute too: one line in the shell, an AttributeError for Python.
    with pytest.raises(JobError, match=r"^job times have no 'finished'; they are: new, ") as typo:
        _ = j.time.finished
    assert isinstance(typo.value, AttributeError)
    assert not hasattr(j.time, "finished") and getattr(j.time, "finished", 1) == 1


def test_a_masters_times_span_its_subjobs(session: Session) -> None:
    j = finished(exits(0, 0), "completed")
    t, subs = j.time, [s.time for s in j.subjobs]
    assert t.running == min(s.running for s in subs)
    assert t.completed == max(s.completed for s in subs)
    runtime = t.runtime()
    assert runtime is not None
    assert abs(runtime - (t.completed - t.running)) < dt.timedelta(milliseconds=1)
    details = str(t.details())
    assert "subjobs (2)" in details and "first" in details
    j.subjobs[0].freeze()  # a frozen subjob still ended when it ended
    assert j.time.completed == t.completed
    assert j.subjobs[0].time.runtime() == subs[0].runtime()


def failing_until(marker: Path, before: int = 0, after: int = 0) -> Job:
    """A split job with one subjob that fails until ``marker`` exists, behind ``before``
    subjobs and ahead of ``after`` that pass."""
    args = [
        *[["-c", "exit 0"]] * before,
        ["-c", f"test -e {marker}"],
        *[["-c", "exit 0"]] * after,
    ]
    return Job(application=Executable(exe="sh"), splitter=ArgSplitter(args=args))


def _timeline(t: JobTimes) -> list[tuple[str, dt.datetime]]:
    return [(name, t[name]) for name, _shown in t.rows() if name in t]


def test_a_resubmitted_masters_times_are_its_new_period_in_order(
    session: Session, tmp_path: Path
) -> None:
    second_try = tmp_path / "second-try"  # subjob 1 fails until it exists
    j = failing_until(second_try, before=1, after=1)
    j.submit()
    first = finished(j, "failed").time
    steps = ["new", "submitting", "submitted", "running"]
    assert [name for name, _ in _timeline(first)] == [*steps, "failed"]
    assert [when for _, when in _timeline(first)] == sorted(when for _, when in _timeline(first))

    second_try.touch()
    resubmitted = dt.datetime.now()
    j.resubmit()
    t, rerun = finished(j, "completed").time, j.subjobs[1].time
    # The new period alone, in order: the earlier failure is no longer the master's.
    assert [name for name, _ in _timeline(t)] == [*steps, "completed"]
    assert "failed" not in t and t.failed is None
    assert t.new == first.new
    assert first.failed <= resubmitted <= t.submitting <= t.submitted <= t.running
    assert t.running == rerun.running and t.completed == rerun.completed  # it alone ran
    runtime, waittime = t.runtime(), t.waittime()
    assert runtime is not None and waittime is not None
    assert abs(runtime - (rerun.completed - rerun.running)) < dt.timedelta(milliseconds=1)
    assert abs(waittime - (t.running - t.submitted)) < dt.timedelta(milliseconds=1)
    # The subjobs' table spans what each subjob shows (its own round: no failed now).
    assert _subjob_table(t) == _spanned([s.time for s in j.subjobs])
    assert "failed" not in _subjob_table(t)
    assert _notebook_rows(t) == [[html.escape(c) for c in row] for row in t.rows()]


def _notebook_rows(t: JobTimes) -> list[list[str]]:
    """The rows of ``j.time`` in a notebook, as its cells show them."""
    shown = [
        re.findall(r"<td[^>]*>(.*?)</td>", row)
        for row in re.findall(r"<tr>(.*?)</tr>", times_html(t))
    ]
    return shown[: len(t.rows())]


def _subjob_table(t: JobTimes) -> dict[str, tuple[str, str]]:
    return {label: (first, last) for label, first, last in t.subjob_rows() or []}


def _spanned(subjobs: list[JobTimes]) -> dict[str, tuple[str, str]]:
    """The first and last time of each state over what the subjobs show, as shown."""
    rows: dict[str, tuple[str, str]] = {}
    for label in {label for t in subjobs for label in t}:
        times = [t[label] for t in subjobs if label in t]
        first, last = (
            when.isoformat(sep=" ", timespec="milliseconds") for when in (min(times), max(times))
        )
        rows[label] = (first, last)
    return rows


def _in_order(t: JobTimes) -> None:
    """Its rows are its states in their natural order, their times in clock order, with
    one end state at most; the mapping and the notebook agree with them."""
    order = ["new", "submitting", "submitted", "running", "completing", "completed", "failed"]
    order += ["killed", "completed_frozen", "failed_frozen"]
    names = [name for name, _ in _timeline(t)]
    assert names == [label for label in order if label in t] and list(t) == names
    assert len(set(names) & {"completed", "failed", "killed"}) <= 1
    assert [when for _, when in _timeline(t)] == sorted(when for _, when in _timeline(t))
    assert _notebook_rows(t) == [[html.escape(c) for c in row] for row in t.rows()]


def test_a_resubmitted_jobs_times_are_its_new_round_in_order(
    session: Session, tmp_path: Path
) -> None:
    second_try = tmp_path / "second-try"  # the job fails until it exists
    j = Job(application=Executable(exe="sh", args=["-c", f"test -e {second_try}"]))
    j.submit()
    first = finished(j, "failed").time
    _in_order(first)
    assert list(first) == ["new", "submitting", "submitted", "running", "failed"]

    second_try.touch()
    resubmitted = dt.datetime.now()
    j.resubmit()
    waiting = j.time  # whatever it has reached by now: this round's states alone
    _in_order(waiting)
    assert "failed" not in waiting and waiting.runtime() is None
    assert resubmitted <= waiting.submitting <= waiting.submitted
    t = finished(j, "completed").time
    _in_order(t)
    assert list(t) == ["new", "submitting", "submitted", "running", "completed"]
    assert t.failed is None and t.new == first.new
    assert first.failed <= resubmitted <= t.submitting <= t.submitted <= t.running <= t.completed
    runtime, waittime = t.runtime(), t.waittime()
    assert runtime is not None and waittime is not None
    assert abs(runtime - (t.completed - t.running)) < dt.timedelta(milliseconds=1)
    assert abs(waittime - (t.running - t.submitted)) < dt.timedelta(milliseconds=1)
    # The earlier round is in the log, the failure first.
    news = [e.new for e in j.history]
    assert news == ["submitting", "submitted", "running", "failed", *news[4:]]
    assert news[4:] == ["submitting", "submitted", "running", "completed"]
    assert j.history[3].time == pytest.approx(first.failed.timestamp(), abs=1e-5)


def test_a_resubmitted_subjobs_times_are_its_new_round_in_order(
    session: Session, tmp_path: Path
) -> None:
    second_try = tmp_path / "second-try"  # subjob 1 fails until it exists
    j = failing_until(second_try, before=1)
    j.submit()
    finished(j, "failed")
    sj = j.subjobs[1]
    first = sj.time
    _in_order(first)
    assert first.failed is not None and first.completed is None

    second_try.touch()
    resubmitted = dt.datetime.now()
    assert sj.resubmit()
    _in_order(sj.time)
    assert "failed" not in sj.time
    finished(j, "completed")
    t = sj.time
    _in_order(t)
    assert list(t) == ["new", "submitting", "submitted", "running", "completed"]
    assert t.new == first.new  # when the first submission made it
    assert first.failed <= resubmitted <= t.submitting <= t.running <= t.completed
    runtime = t.runtime()
    assert runtime is not None
    assert abs(runtime - (t.completed - t.running)) < dt.timedelta(milliseconds=1)
    assert "failed" in [e.new for e in sj.history]  # the earlier round, in its log
    # The master's table of its subjobs spans what they show now.
    assert _subjob_table(j.time) == _spanned([s.time for s in j.subjobs])


def test_a_fresh_process_sees_frozen_states_resplit_subjobs_and_times(
    session: Session, gangadir: Path, env_for: dict[str, str]
) -> None:
    j = finished(exits(0, 3), "failed")
    j.subjobs[1].resplit(ArgSplitter(args=[["-c", "exit 0"]]))
    finished(j, "completed")
    j.subjobs[0].freeze()
    created = j.time.new
    close_session()

    script = textwrap.dedent(
        f"""
        import json
        from pathlib import Path
        from ganga_like.runtime.session import open_session
        from ganga_like.runtime.settings import Settings
        open_session(Settings(gangadir=Path({str(gangadir)!r}), repository_mode="embedded",
                              monitoring=False))
        from ganga_like import jobs
        j = jobs({j.id})
        print(json.dumps({{
            "status": j.status,
            "subjobs": [s.status for s in j.subjobs],
            "new": j.time.new.isoformat(),
            "runtime": j.time.runtime().total_seconds(),
            "completed": jobs.select(status="completed").ids(),
        }}))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=env_for, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["status"] == "completed"
    assert seen["subjobs"] == ["completed_frozen", "failed_frozen", "completed"]
    assert seen["new"] == created.isoformat()
    assert seen["runtime"] >= 0 and seen["completed"] == [j.id]
    table = ganga(["jobs", "subjobs.failed_frozen=1"], env_for)
    assert table.returncode == 0, table.stderr
    assert "cfrz:1" in table.stdout and "ffrz:1" in table.stdout


def ganga(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ganga_freeze_and_unfreeze_act_on_the_subjobs_named(
    session: Session, env_for: dict[str, str]
) -> None:
    j = finished(exits(0, 3), "failed")
    fresh = Job(application=Executable(exe="true"))
    close_session()

    frozen = ganga(["freeze", "--yes", f"{j.id}.1"], env_for)
    assert frozen.returncode == 0, frozen.stderr
    assert "freeze: 1 of 1 job(s) done" in frozen.stdout
    assert "ffrz:1" in ganga(["jobs", str(j.id)], env_for).stdout
    assert ganga(["jobs", "status=completed"], env_for).stdout.startswith("jobs: 1\n")

    refused = ganga(["freeze", "--yes", str(fresh.id)], env_for)
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        f"ganga: job {fresh.id} is new: only a completed, failed or killed job can be frozen"
    ]
    thawed = ganga(["unfreeze", "--yes", f"{j.id}.1"], env_for)
    assert thawed.returncode == 0, thawed.stderr
    assert ganga(["jobs", "status=failed"], env_for).stdout.startswith("jobs: 1\n")


# -- the status model, for any counts ----------------------------------------------------

_UNFROZEN = [s for s in Status if not s.frozen]
_FROZEN = [s for s in Status if s.frozen]
_counts = st.dictionaries(st.sampled_from(_UNFROZEN), st.integers(1, 5000), min_size=1)
_frozen_counts = st.dictionaries(st.sampled_from(_FROZEN), st.integers(1, 5000))


@given(_counts, _frozen_counts, st.sampled_from(["running_first", "submitted_first"]))
def test_frozen_subjobs_never_change_a_masters_status(
    counts: dict[Status, int], frozen: dict[Status, int], order: str
) -> None:
    together = {**counts, **frozen}
    assert master_status(together.items(), order) is master_status(counts.items(), order)


@given(st.dictionaries(st.sampled_from(_FROZEN), st.integers(1, 5000), min_size=1))
def test_a_master_of_frozen_subjobs_only_is_completed_if_one_completed(
    frozen: dict[Status, int],
) -> None:
    expected = Status.COMPLETED if Status.COMPLETED_FROZEN in frozen else Status.FAILED
    assert master_status(frozen.items()) is expected


@given(
    st.lists(st.sampled_from([Status.COMPLETED, Status.FAILED, Status.KILLED]), min_size=1),
    st.data(),
)
def test_freezing_and_unfreezing_moves_counts_and_keeps_the_total(
    ended: list[Status], data: st.DataObject
) -> None:
    counter = StatusCounter()
    for status in ended:
        counter.add(status)
    chosen = data.draw(st.sets(st.integers(0, len(ended) - 1)))
    for index in chosen:
        frozen = freezing(ended[index])
        assert frozen is not None
        check_transition(ended[index], frozen)
        counter.move(ended[index], frozen)
    assert counter.total() == len(ended)
    assert counter.get(Status.COMPLETED_FROZEN) + counter.get(Status.FAILED_FROZEN) == len(chosen)
    unfrozen = [s for i, s in enumerate(ended) if i not in chosen]
    if unfrozen:
        assert counter.derived_status() is master_status((s, 1) for s in unfrozen)
    for index in chosen:
        frozen = freezing(ended[index])
        assert frozen is not None
        check_transition(frozen, ended[index])  # unfreezing goes back where it was
        counter.move(frozen, ended[index])
    assert counter.by_status() == {s: ended.count(s) for s in set(ended)}


@given(_frozen_counts, _frozen_counts, _frozen_counts)
def test_counter_conflicts_over_frozen_states_add_both_sides(
    old: dict[Status, int], theirs: dict[Status, int], mine: dict[Status, int]
) -> None:
    def state(counts: dict[Status, int]) -> dict[str, object]:
        return {"counts": {s.label: n for s, n in counts.items()}}

    merged = StatusCounter()._p_resolveConflict(state(old), state(theirs), state(mine))
    for status in _FROZEN:
        expected = theirs.get(status, 0) + mine.get(status, 0) - old.get(status, 0)
        assert merged["counts"].get(status.label, 0) == expected


def test_frozen_states_are_left_only_by_unfreezing_and_have_table_labels() -> None:
    for frozen in _FROZEN:
        assert frozen.final
        for other in Status:
            if other not in (Status.COMPLETED, Status.FAILED, Status.KILLED):
                with pytest.raises(IllegalTransitionError):
                    check_transition(frozen, other)
        assert frozen in _SHORT and frozen.label in SHORT
    for active in (Status.NEW, Status.SUBMITTED, Status.RUNNING, Status.COMPLETING):
        assert freezing(active) is None


def test_a_jobs_history_shows_one_readable_line_per_event(session: Session) -> None:
    from IPython.lib.pretty import pretty

    j = finished(exits(0), "completed")
    history = j.history
    assert history[0].new == "submitting" and history[-1].new == "completed"
    lines = repr(history).splitlines()
    assert lines == [str(e) for e in history]  # as `ganga log` prints it
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +new -> submitting +user: submit$", lines[0])
    assert pretty(history) == repr(history)  # the shell's and notebooks' display
    assert "HistoryEntry" not in repr(history)
    assert Job().history == []


def test_a_resubmitted_jobs_tree_gives_its_current_round_as_j_time_does(
    session: Session, tmp_path: Path
) -> None:
    """The tree and ``ganga show`` read ``own_timeline()``: for a job without subjobs it is
    the round ``j.time`` shows."""
    from ganga_like.shell.display import job_fields

    second_try = tmp_path / "second-try"  # the job fails until it exists
    j = Job(application=Executable(exe="sh", args=["-c", f"test -e {second_try}"]))
    j.submit()
    finished(j, "failed")
    second_try.touch()
    j.resubmit()
    t = finished(j, "completed").time
    impl = unwrap(j)
    own = impl.own_timeline()
    assert list(own) == list(t) == ["new", "submitting", "submitted", "running", "completed"]
    assert list(own.values()) == sorted(own.values())
    line = dict(job_fields(impl))["time"].text
    assert [part.split(" ")[0] for part in line.split(", ")] == list(t)


def test_a_resubmitted_masters_tree_shows_its_current_period_in_order(
    session: Session, tmp_path: Path
) -> None:
    from ganga_like.shell.display import job_fields

    second_try = tmp_path / "second-try"  # subjob 1 fails until it exists
    j = failing_until(second_try, before=1)
    j.submit()
    first = finished(j, "failed").time
    second_try.touch()
    j.resubmit()
    finished(j, "completed")
    master = unwrap(j)
    line = dict(job_fields(master))["time"].text
    labels = [part.split(" ")[0] for part in line.split(", ")]
    # The resubmission's period, as the master's own log has it: nothing of the first
    # (its submitting, its failure), and in the order of the states.
    assert labels[0] == "new" and labels[-1] == "completed" and "failed" not in labels
    assert labels == [
        s for s in ["new", "submitting", "submitted", "running", "completed"] if s in labels
    ]
    shown = master.own_timeline()
    assert list(shown.values()) == sorted(shown.values())
    resubmitted = next(e.time for e in j.history if e.cause.startswith("user: resubmit"))
    assert first.failed is not None
    assert all(when >= resubmitted for label, when in shown.items() if label != "new")
