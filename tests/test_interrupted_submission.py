"""Ctrl-C in the middle of a submission: the session that was interrupted records at once
what the backend had received (as the next start would after a crash), says so in one
line, and goes on working; nothing runs twice and nothing is lost."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.runtime.session import Session
from ganga_like_local.backend import runner_dir
from ganga_like_runner import client as runner_client

# The pause hook waits for a file: the script creates it once interrupted, so that the
# submission of the rest does not pause again. The subjobs wait for another file, so
# that the master is still active when the rest is submitted.
SUBMITTER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from ganga_like import *
    from ganga_like.model.status import Status
    program, count = sys.argv[1], int(sys.argv[2])
    pause, release = Path(sys.argv[3]), Path(sys.argv[4])
    j = Job(application=Executable(exe=program),
            splitter=ArgSplitter(args=[[str(i)] for i in range(count)]))
    print("created", flush=True)
    try:
        j.submit()
        print("not interrupted", flush=True)
    except KeyboardInterrupt as stop:
        print(f"KeyboardInterrupt: {stop}", flush=True)
    pause.touch()
    sj = j.subjobs
    print(j.status, len(sj), sum(1 for s in sj if s.status == "new"), flush=True)
    j.submit()  # the rest, while the first ones still run
    release.touch()
    print(j.wait(timeout=120), flush=True)
""")


def _lines(path: Path) -> int:
    try:
        return len(path.read_text().split())
    except FileNotFoundError:
        return 0


def test_ctrl_c_during_a_split_submission_records_what_the_backend_received_at_once(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path
) -> None:
    from ganga_like.runtime.submission.handover import TEST_PAUSE_VARIABLE
    from ganga_like_local.backend import Local

    early = Local.early_start_batch
    count = early + 20
    ran, pause, release = tmp_path / "ran", tmp_path / "go-on", tmp_path / "release"
    program = tmp_path / "append.sh"
    program.write_text(
        f'#!/bin/sh\necho "$1" >> "{ran}"\nwhile [ ! -e "{release}" ]; do sleep 0.05; done\n'
    )
    program.chmod(0o755)
    env = dict(env_for, **{TEST_PAUSE_VARIABLE: str(pause)})
    child = subprocess.Popen(
        [sys.executable, "-c", SUBMITTER, str(program), str(count), str(pause), str(release)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "created"
        deadline = time.monotonic() + 60
        while _lines(ran) < 1:  # the backend has the first slice, nothing is recorded
            assert time.monotonic() < deadline, _lines(ran)
            time.sleep(0.05)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=180)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        release.touch()  # a failed run must not leave its subjobs waiting for ever
        runner_client.stop(runner_dir(gangadir))
    assert child.returncode == 0, err
    said, counts, final = out.splitlines()[:3]
    # One line, saying what became of the job.
    assert said == (
        "KeyboardInterrupt: submit() stopped; job 0: an interrupted submission was recorded: "
        f"the {early} subjob(s) the backend had received are followed; 20 it never received "
        "are new (submit() runs them)"
    )
    # In the same session at once: not "submitting" until the next start.
    status, made, new = counts.split()
    assert status in ("submitted", "running") and int(made) == count and int(new) == 20
    assert final == "completed"
    # Each subjob ran exactly once.
    assert sorted(int(line) for line in ran.read_text().split()) == list(range(count))


def test_ctrl_c_after_the_submission_was_recorded_says_the_job_is_submitted(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The interruption lands after the commit (at the monitor's poke that follows it):
    nothing is pending, nothing is undone, and the line says so rather than 'nothing
    changed'."""
    pokes = {"n": 0}
    poke = session.poke_monitor

    def interrupted_once() -> None:
        pokes["n"] += 1
        if pokes["n"] == 1:
            raise KeyboardInterrupt
        poke()

    monkeypatch.setattr(session, "poke_monitor", interrupted_once)
    j = Job(application=Executable(exe="/bin/true"), splitter=ArgSplitter(args=[[], []]))
    with pytest.raises(KeyboardInterrupt) as stop:
        j.submit()
    assert str(stop.value).startswith(
        "submit() of job 0 stopped; nothing was left half done: the job is "
    )
    assert str(stop.value).split()[-1] in ("submitted", "running", "completed")
    assert len(j.subjobs) == 2
    assert j.wait(timeout=60) == "completed"
