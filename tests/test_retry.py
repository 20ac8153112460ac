"""Retries and resubmission with a changed backend, end to end: real Local jobs in the
runner, the monitor deciding and resubmitting, a monitor process dying mid-retry."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ganga_like import (
    ArgSplitter,
    Executable,
    Job,
    JobError,
    Local,
    Resources,
    Retry,
    SchemaError,
    Slurm,
    jobs,
)
from ganga_like.gpi.proxy import unwrap
from ganga_like.model.parts import job_parts
from ganga_like.runtime.retrying import TEST_EXIT_VARIABLE, retries_done
from ganga_like.runtime.session import Session, close_session, current_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

from .waiting import wait_until


def flaky(tmp_path: Path, failures: int) -> str:
    """A program that fails its first ``failures`` runs (per argument), then succeeds;
    each run appends a line to ``runs-<arg>`` in ``tmp_path``."""
    path = tmp_path / "flaky.sh"
    path.write_text(
        textwrap.dedent(f"""\
            #!/bin/sh
            runs="{tmp_path}/runs-$1"
            echo run >> "$runs"
            count=$(wc -l < "$runs")
            if [ "$count" -le {failures} ]; then echo "run $count fails" >&2; exit 3; fi
            echo "run $count succeeds"
        """)
    )
    path.chmod(0o755)
    return str(path)


def runs(tmp_path: Path, arg: str = "x") -> int:
    path = tmp_path / f"runs-{arg}"
    return len(path.read_text().splitlines()) if path.exists() else 0


def causes(j: Job) -> list[str]:
    return [entry.cause for entry in j.history]


def retried(j: Job) -> list[str]:
    return [c for c in causes(j) if c.startswith("monitor: retry ")]


def test_a_job_failing_twice_completes_after_two_retries_each_in_its_event_log(
    session: Session, tmp_path: Path
) -> None:
    j = Job(application=Executable(exe=flaky(tmp_path, 2), args=["x"]), retry=Retry(attempts=3))
    j.submit()
    assert j.wait(timeout=120) == "completed"
    assert runs(tmp_path) == 3
    assert retried(j) == [
        "monitor: retry 1 of 3 after failed",
        "monitor: retry submitted",
        "monitor: retry 2 of 3 after failed",
        "monitor: retry submitted",
    ]
    assert unwrap(j).submit_count == 3
    assert retries_done(unwrap(j)) == 2


def test_a_failing_subjob_is_retried_and_its_master_never_turns_failed(
    session: Session, tmp_path: Path
) -> None:
    j = Job(
        application=Executable(exe=flaky(tmp_path, 1)),
        splitter=ArgSplitter(args=[["a"], ["b"], ["c"]]),
        retry=Retry(attempts=1, on=["failed"]),
    )
    j.submit()
    assert j.wait(timeout=120) == "completed"
    assert [runs(tmp_path, a) for a in "abc"] == [2, 2, 2]
    for sj in j.subjobs:
        assert retried(sj)[0] == "monitor: retry 1 of 1 after failed"
    # The master's status is derived: a subjob is submitting again in the same commit
    # that records its failure, so the master never showed failed.
    assert "failed" not in [entry.new for entry in j.history]


def test_retries_used_up_leave_the_job_failed_with_every_retry_logged(
    session: Session, tmp_path: Path
) -> None:
    j = Job(application=Executable(exe=flaky(tmp_path, 99), args=["x"]), retry=Retry(attempts=2))
    j.submit()
    assert wait_until(lambda: runs(tmp_path) == 3 and j.status == "failed", timeout=120)
    assert [c for c in retried(j) if "after" in c] == [
        "monitor: retry 1 of 2 after failed",
        "monitor: retry 2 of 2 after failed",
    ]
    assert causes(j)[-1] == "monitor: not retried after failed: 2 retries done"
    for _ in range(3):  # later cycles change nothing
        current_session().monitor.run_once()
    assert j.status == "failed" and runs(tmp_path) == 3


def test_a_cause_not_named_in_on_is_not_retried(session: Session, tmp_path: Path) -> None:
    j = Job(
        application=Executable(exe=flaky(tmp_path, 1), args=["x"]),
        retry=Retry(attempts=3, on=["timeout", "out_of_memory"]),
    )
    j.submit()
    assert j.wait(timeout=120) == "failed"
    assert runs(tmp_path) == 1 and retried(j) == []


def test_a_killed_job_is_never_retried(session: Session, tmp_path: Path) -> None:
    started = tmp_path / "started"
    j = Job(
        application=Executable(exe="sh", args=["-c", f"touch {started}; sleep 300"]),
        retry=Retry(attempts=3, on=["failed", "timeout", "out_of_memory"]),
    )
    j.submit()
    assert wait_until(started.exists, timeout=120)
    j.kill()
    assert j.wait(timeout=60) == "killed"
    for _ in range(3):
        current_session().monitor.run_once()
    assert j.status == "killed" and retried(j) == []


def test_a_users_resubmission_gives_the_retries_afresh(session: Session, tmp_path: Path) -> None:
    j = Job(application=Executable(exe=flaky(tmp_path, 3), args=["x"]), retry=Retry(attempts=1))
    j.submit()
    assert wait_until(lambda: runs(tmp_path) == 2 and j.status == "failed", timeout=120)
    j.resubmit()
    assert j.wait(timeout=120) == "completed"  # run 3 fails, its retry (run 4) succeeds
    assert runs(tmp_path) == 4
    assert len([c for c in retried(j) if "after" in c]) == 2


SUBMITTER = """\
import sys, time
from ganga_like import Executable, Job, Retry
j = Job(application=Executable(exe=sys.argv[1], args=["x"]), retry=Retry(attempts=1))
j.submit()
print(j.id, flush=True)
time.sleep(300)  # the monitor exits the process once it has decided the retry
"""


def test_a_monitor_dying_mid_retry_is_followed_by_one_that_never_counts_it_twice(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path
) -> None:
    program = flaky(tmp_path, 99)  # always fails: attempts=1 allows two runs, never three
    env = dict(env_for, GANGA_REPOSITORY_MODE="embedded", **{TEST_EXIT_VARIABLE: "1"})
    child = subprocess.Popen(
        [sys.executable, "-c", SUBMITTER, program], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        job_id = int(child.stdout.readline())
        assert child.wait(timeout=120) == 75  # exited between deciding and handing over
    finally:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        child.wait()
    assert runs(tmp_path) == 1
    open_session(Settings(gangadir=gangadir, repository_mode="embedded"))
    try:
        j = jobs(job_id)
        assert wait_until(lambda: runs(tmp_path) == 2 and j.status == "failed", timeout=120)
        for _ in range(3):
            current_session().monitor.run_once()
        assert runs(tmp_path) == 2 and j.status == "failed"
        assert [c for c in retried(j) if "after" in c] == ["monitor: retry 1 of 1 after failed"]
    finally:
        close_session()
        with contextlib.suppress(Exception):
            runner_client.stop(runner_dir(gangadir))


WATCHER = """\
import os, sys, time
from ganga_like import jobs
from ganga_like.runtime.session import current_session
len(jobs)  # opens the session: its monitor runs, and takes the lease when it is free
print("open", flush=True)
while not os.path.exists(sys.argv[1]):
    current_session().monitor.poke()
    time.sleep(0.05)
"""


def test_two_sessions_monitoring_one_repository_retry_a_job_only_as_often_as_allowed(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path
) -> None:
    # Both sessions run a monitor; only the lease holder polls and retries.
    stop = tmp_path / "stop"
    watcher = subprocess.Popen(
        [sys.executable, "-c", WATCHER, str(stop)], env=env_for, stdout=subprocess.PIPE, text=True
    )
    try:
        assert watcher.stdout is not None and watcher.stdout.readline() == "open\n"
        open_session(Settings(gangadir=gangadir))  # shared, like the watcher
        try:
            j = Job(
                application=Executable(exe=flaky(tmp_path, 99), args=["x"]),
                retry=Retry(attempts=2),
            )
            j.submit()
            assert wait_until(lambda: runs(tmp_path) == 3 and j.status == "failed", timeout=120)
            for _ in range(3):
                current_session().monitor.run_once()
            assert runs(tmp_path) == 3 and j.status == "failed"
            assert len([c for c in retried(j) if "after" in c]) == 2
        finally:
            close_session()
            with contextlib.suppress(Exception):
                runner_client.stop(runner_dir(gangadir))
    finally:
        stop.touch()
        watcher.wait(timeout=60)


# -- the Retry object and bad input --------------------------------------------------


def test_retry_is_a_part_of_a_job_shown_in_its_displays(session: Session) -> None:
    from ganga_like.shell.display import job_html, job_text

    assert "retry" in {p.name for p in job_parts().parts}
    j = Job(retry=Retry(attempts=3, on=["timeout"], grow={"walltime": 2}))
    text, html = job_text(j), job_html(j)
    assert "retry: Retry\n│   ├── attempts: 3\n│   ├── on: ['timeout']\n" in text
    assert "grow: {'walltime': 2.0}" in text
    assert "Retry" in html and "attempts" in html and "&#x27;walltime&#x27;: 2.0" in html
    unwrap(j)._p_deactivate()  # read back from the repository
    assert j.retry.attempts == 3 and list(j.retry.on) == ["timeout"]
    assert j.copy().retry.grow == {"walltime": 2.0}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"attempts": -1}, r"Retry\.attempts: expected an int \(at least 0, at most 100\), got -1"),
        ({"attempts": "3"}, r"Retry\.attempts: expected an int, not the str '3'"),
        ({"on": ["oom"]}, r"Retry\.on: .*got 'oom' \(a cause Retry does not know\)"),
        ({"on": 3}, r"Retry\.on: expected a list"),
        ({"grow": {"cpus": 2.0}}, r"Retry\.grow: .*got 'cpus': no backend grows it"),
        ({"grow": {"memory": 0.5}}, r"Retry\.grow: .*got 0\.5 for 'memory' \(below 1\)"),
        ({"grow": {"memory": "2"}}, r"Retry\.grow: .*got '2' for 'memory' \(not a number\)"),
        ({"grow": ["memory"]}, r"Retry\.grow: expected a dict"),
    ],
)
def test_bad_retry_settings_are_refused_in_one_line_and_nothing_changes(
    session: Session, given: dict[str, object], expected: str
) -> None:
    j = Job(retry=Retry(attempts=2))
    with pytest.raises(SchemaError, match=expected):
        Retry(**given)
    name, value = next(iter(given.items()))
    with pytest.raises(SchemaError, match=expected):
        setattr(j.retry, name, value)
    assert j.retry.attempts == 2 and list(j.retry.on) == ["failed"] and j.retry.grow == {}
    with pytest.raises(SchemaError, match=r"Job\.retry: expected a retry object"):
        j.retry = 3
    assert j.retry.attempts == 2


# -- resubmit(backend=...) -------------------------------------------------------------


def test_resubmit_with_a_backend_of_another_type_is_refused_and_nothing_changes(
    session: Session, tmp_path: Path
) -> None:
    j = Job(application=Executable(exe=flaky(tmp_path, 1), args=["x"]))
    j.submit()
    assert j.wait(timeout=120) == "failed"
    history = causes(j)
    with pytest.raises(JobError, match=r"needs a Local backend \(the job's\), not Slurm"):
        j.resubmit(backend=Slurm(resources=Resources(memory="1G")))
    with pytest.raises(SchemaError, match=r"Job\.backend: expected a backend object"):
        j.resubmit(backend=3)
    assert (
        j.status == "failed"
        and causes(j) == history
        and type(unwrap(j.backend)).__name__ == "Local"
    )
    assert j.resubmit(backend=Local())
    assert j.wait(timeout=120) == "completed"
