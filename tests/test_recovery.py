"""Submissions interrupted by a crash (kill -9) are recovered at the next start.

The submitting process is killed at random points of a large split submission, in both the
embedded and the shared repository mode; after a restart every job must be either ``new``
with no subjobs (rolled back, nothing of it left running at the backend) or fully recorded
(every subjob submitted, followed, counted). The full-scale version (10,000 subjobs, many
kill points) is marked slow: ``GANGA_SLOW_TESTS=1 python -m pytest tests/test_recovery.py``.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ganga_like import JobError, jobs
from ganga_like.config.store import store
from ganga_like.model.status import Status
from ganga_like.repository.zeo import shared
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import JOURNAL, runner_dir
from ganga_like_local.settings import Local as LocalSection
from ganga_like_runner import client as runner_client

SUBMITTER = textwrap.dedent("""
    import sys
    from ganga_like import *
    j = Job(application=Executable(exe="sleep"),
            splitter=ArgSplitter(args=[["0.2"] for _ in range(int(sys.argv[1]))]))
    print("created", flush=True)
    j.submit()
    print("submitted", flush=True)
    import time
    time.sleep(60)
""")


def test_kill_9_during_submit_leaves_new_or_fully_recorded(
    gangadir: Path, env_for: dict[str, str]
) -> None:
    _kill_during_submit(gangadir, env_for, "embedded", count=1500, attempts=4, seed=7)


def test_kill_9_during_a_shared_mode_submit_leaves_new_or_fully_recorded(
    gangadir: Path, env_for: dict[str, str]
) -> None:
    _kill_during_submit(gangadir, env_for, "shared", count=1500, attempts=3, seed=8)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["embedded", "shared"])
def test_kill_9_at_many_points_of_a_10000_subjob_submit(
    mode: str, gangadir: Path, env_for: dict[str, str]
) -> None:
    if not os.environ.get("GANGA_SLOW_TESTS"):
        pytest.skip("slow: set GANGA_SLOW_TESTS=1 to run the full-scale version")
    _kill_during_submit(gangadir, env_for, mode, count=10_000, attempts=15, seed=9)


def _kill_during_submit(
    gangadir: Path, env_for: dict[str, str], mode: str, count: int, attempts: int, seed: int
) -> None:
    rng = random.Random(seed)
    env = dict(env_for, GANGA_REPOSITORY_MODE=mode)
    outcomes = []
    duration = 0.0  # of a whole submission, measured by the first attempt
    try:
        for attempt in range(attempts):
            child = subprocess.Popen(
                [sys.executable, "-c", SUBMITTER, str(count)],
                env=env,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert child.stdout is not None and child.stdout.readline().strip() == "created"
            started = time.monotonic()
            if attempt == 0:
                assert child.stdout.readline().strip() == "submitted"
                duration = time.monotonic() - started
            else:
                # Kill points spread over the whole submission (and a little after).
                time.sleep(rng.uniform(0.0, 1.2 * duration))
            child.send_signal(signal.SIGKILL)
            child.wait()
            session = open_session(
                Settings(
                    gangadir=gangadir,
                    repository_mode=mode,
                    zeo_idle_exit=2.0,
                ),
                store.snapshot().replaced({LocalSection: {"max_concurrent": 2}}),
            )
            try:
                j = jobs[-1]
                if j.status == "new":
                    _check_rolled_back(session, j.id)
                    outcomes.append("rolled back")
                else:
                    _check_fully_recorded(session, j.id, count)
                    outcomes.append("recorded")
                    j.kill()
            finally:
                close_session()
    finally:
        with contextlib.suppress(Exception):
            runner_client.stop(runner_dir(gangadir))
        with contextlib.suppress(Exception):
            shared.stop_server(gangadir / "repository")
    print(mode, f"a whole submission of {count} subjobs takes {duration:.1f} s;", outcomes)
    assert len(outcomes) == attempts  # each attempt ended in one of the two consistent states


def _check_rolled_back(session: Session, job_id: int) -> None:
    j = jobs(job_id)
    assert j.subjobs == []
    assert job_id not in session.registry().submitting
    assert not list(session.registry().active.keys(min=(job_id, -1), max=(job_id, 2**31 - 1)))
    # Nothing of this job may run unrecorded: the runner was told to cancel it all.
    journal = session.repo.workspace / str(job_id) / JOURNAL

    def unfinished() -> set[str]:
        events, _ = runner_client.read_events(journal, 0)
        finished = {e.key for e in events if e.event != "started"}
        return {e.key for e in events if e.event == "started"} - finished

    # Whatever had started ends soon (killed): a large batch takes the runner a moment.
    deadline = time.monotonic() + 30
    while unfinished() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not unfinished()


def _check_fully_recorded(session: Session, job_id: int, count: int) -> None:
    registry = session.registry()
    master = registry.get(job_id)
    assert master is not None
    assert master.subjob_count() == count
    counts: dict[str, int] = {}
    for sj in master.iter_subjobs():
        assert Status.parse(sj.status) is not Status.SUBMITTING, sj.fqid
        counts[sj.status] = counts.get(sj.status, 0) + 1
    assert master._counter is not None and master._counter.counts == counts
    assert job_id not in registry.submitting
    active = len(list(registry.active.keys(min=(job_id, -1), max=(job_id, 2**31 - 1))))
    assert active == sum(n for label, n in counts.items() if Status.parse(label).active)
    assert registry.indexed_status(job_id) == master.current_status().label


RECORDING_SUBMITTER = textwrap.dedent("""
    import sys
    from ganga_like import *
    j = Job(application=Executable(exe=sys.argv[1]),
            splitter=ArgSplitter(args=[[str(i)] for i in range(int(sys.argv[2]))]))
    print("created", flush=True)
    j.submit()
    print("submitted", flush=True)
""")


@pytest.mark.parametrize("part", [None, 80], ids=["one part", "parts of 80"])
def test_subjobs_that_ran_before_a_kill_9_of_their_submission_are_recorded_never_rerun(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path, part: int | None
) -> None:
    from ganga_like.runtime.submission.handover import TEST_PAUSE_VARIABLE
    from ganga_like.runtime.submission.split_submission import TEST_PART_VARIABLE
    from ganga_like_local.backend import Local

    count = Local.early_start_batch + 36
    ran = tmp_path / "ran"
    program = tmp_path / "append.sh"
    program.write_text(f'#!/bin/sh\necho "$1" >> "{ran}"\n')
    program.chmod(0o755)
    # The submitter stops once the runner has the first slice: it runs, nothing is recorded.
    env = dict(env_for, **{TEST_PAUSE_VARIABLE: "120"})
    if part is not None:  # killed in the first of two parts, the second never made
        env[TEST_PART_VARIABLE] = str(part)
    child = subprocess.Popen(
        [sys.executable, "-c", RECORDING_SUBMITTER, str(program), str(count)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "created"
        deadline = time.monotonic() + 60
        while _lines(ran) < Local.early_start_batch:  # the whole first slice has run
            assert time.monotonic() < deadline, _lines(ran)
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    session = open_session(
        Settings(gangadir=gangadir),
        store.snapshot().replaced({LocalSection: {"max_concurrent": 2}}),
    )
    try:
        j = jobs[-1]
        assert j.status != "new"  # recovered by recording what ran, not rolled back
        assert len(j.subjobs) == count
        statuses = [sj.status for sj in j.subjobs]
        assert all(s != "new" for s in statuses[: Local.early_start_batch]), statuses
        assert statuses[Local.early_start_batch :] == ["new"] * 36  # never handed over
        # Once the first slice finished, the master says part of it never ran: new, not
        # completed; its description stays frozen (its subjobs were made from it).
        with pytest.raises(JobError, match="is new: 36 of its subjobs were never submitted"):
            j.wait(timeout=60)
        assert j.status == "new"
        assert j.subjobs[0].status == "completed"
        with pytest.raises(JobError, match=r"has subjobs: application\.args can no longer"):
            j.application.args = ["x"]
        j.submit()  # the ones never handed over, and only those
        assert j.wait(timeout=60) == "completed"
        assert all(sj.status == "completed" for sj in j.subjobs)
        assert all(sj.exit_code == 0 for sj in j.subjobs)
        assert session.registry().submitting.get(j.id) is None
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))
    # Each subjob ran exactly once overall.
    assert sorted(int(line) for line in ran.read_text().split()) == list(range(count))


def _lines(path: Path) -> int:
    try:
        return len(path.read_text().split())
    except FileNotFoundError:
        return 0


RESUBMITTER = textwrap.dedent("""
    from ganga_like import *
    j = jobs[-1]
    print("resubmitting", flush=True)
    j.resubmit()
    print("resubmitted", flush=True)
""")


def test_subjobs_that_ran_before_a_kill_9_of_their_resubmission_are_recorded_never_rerun(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path
) -> None:
    from ganga_like.runtime.submission.handover import TEST_PAUSE_VARIABLE
    from ganga_like_local.backend import Local

    early = Local.early_start_batch
    count = early + 16
    ran, second = tmp_path / "ran", tmp_path / "second-run"
    program = tmp_path / "append.sh"
    # Fails on its first run, succeeds on its second.
    program.write_text(f'#!/bin/sh\necho "$1" >> "{ran}"\n[ -e "{second}" ]\n')
    program.chmod(0o755)
    open_session(
        Settings(gangadir=gangadir),
        store.snapshot().replaced({LocalSection: {"max_concurrent": 2}}),
    )
    try:
        from ganga_like import ArgSplitter, Executable, Job

        j = Job(
            application=Executable(exe=str(program)),
            splitter=ArgSplitter(args=[[str(i)] for i in range(count)]),
        )
        j.submit()
        assert j.wait(timeout=60) == "failed"
    finally:
        close_session()
    second.touch()
    env = dict(env_for, **{TEST_PAUSE_VARIABLE: "120"})
    child = subprocess.Popen(
        [sys.executable, "-c", RESUBMITTER], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "resubmitting"
        deadline = time.monotonic() + 60
        while _lines(ran) < count + early:  # the whole first slice has run again
            assert time.monotonic() < deadline, _lines(ran)
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    open_session(
        Settings(gangadir=gangadir),
        store.snapshot().replaced({LocalSection: {"max_concurrent": 2}}),
    )
    try:
        j = jobs[-1]
        assert j.wait(timeout=60) in ("completed", "failed")
        statuses = [sj.status for sj in j.subjobs]
        assert statuses[:early] == ["completed"] * early  # recorded, not run again
        assert statuses[early:] == ["failed"] * 16  # never handed over: resubmit them
        assert "the resubmission was interrupted" in j.subjobs[early].history[-1].cause
        j.resubmit()
        assert j.wait(timeout=60) == "completed"
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))
    runs = sorted(int(line) for line in ran.read_text().split())
    assert runs == sorted([*range(count), *range(count)])  # twice each: failed, then done
