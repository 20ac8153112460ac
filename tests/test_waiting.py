"""wait() and as_completed(): waiting for many jobs and subjobs, from any session.

Jobs run for real on Local, each held by a gate file the test creates when it wants the
job to end, so the order in which they finish is the test's. The waiting happens in
another process (``python -c``, ``ganga script.py``) that reads the repository the test's
session writes through the shared server.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from ganga_like import (
    ArgSplitter,
    Executable,
    GangaError,
    Job,
    JobError,
    SchemaError,
    WaitTimeoutError,
    as_completed,
    jobs,
    wait,
)
from ganga_like.config.store import store
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_local.settings import Local as LocalSection
from ganga_like_runner import client as runner_client

from .other_session import OtherSession


@pytest.fixture
def shared_session(gangadir: Path) -> Iterator[Session]:
    """A session in the default (shared) mode, so that other processes join it; Local runs
    four programs at once."""
    session = open_session(
        Settings(gangadir=gangadir),
        store.snapshot().replaced({LocalSection: {"max_concurrent": 4, "idle_exit": 5.0}}),
    )
    try:
        yield session
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))


def gated(gate: Path) -> list[str]:
    """Arguments of ``sh`` for a program that ends once ``gate`` exists."""
    return ["-c", f"while [ ! -e {gate} ]; do sleep 0.05; done"]


def start(
    code: str, env: dict[str, str], *, ganga: bool = False, where: Path
) -> subprocess.Popen[str]:
    if ganga:
        script = where / "waiter.py"
        script.write_text(code)
        argv = [str(Path(sys.executable).with_name("ganga")), str(script)]
    else:
        argv = [sys.executable, "-c", code]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=where
    )


def line_of(stream: IO[str] | None) -> str:
    assert stream is not None
    return stream.readline().strip()


def test_a_second_process_waits_for_jobs_the_first_submitted(
    shared_session: Session, env_for: dict[str, str], tmp_path: Path
) -> None:
    gates = [tmp_path / "gate0", tmp_path / "gate1"]
    for gate in gates:
        Job(application=Executable(exe="sh", args=gated(gate))).submit()
    waiter = start(
        "from ganga_like import *\n"
        "print('waiting', flush=True)\n"
        "first = wait([jobs(0), 1], return_when='any', timeout=120)\n"
        "print([j.fqid for j in first], [j.status for j in first], jobs(1).status, flush=True)\n"
        "every = wait(jobs, timeout=120)\n"
        "print([j.fqid for j in every], [j.status for j in every], flush=True)\n",
        env_for,
        where=tmp_path,
    )
    try:
        assert line_of(waiter.stdout) == "waiting"
        gates[0].touch()
        assert line_of(waiter.stdout) == "['0'] ['completed'] running"
        gates[1].touch()
        assert line_of(waiter.stdout) == "['0', '1'] ['completed', 'completed']"
        assert waiter.wait(60) == 0, waiter.stderr.read() if waiter.stderr else ""
    finally:
        waiter.kill()
        for gate in gates:
            gate.touch()


def test_as_completed_yields_every_subjob_once_as_each_ends(
    shared_session: Session, env_for: dict[str, str], tmp_path: Path
) -> None:
    gates = [tmp_path / f"gate{i}" for i in range(4)]
    j = Job(
        application=Executable(exe="sh"),
        splitter=ArgSplitter(args=[gated(gate) for gate in gates]),
    )
    j.submit()
    waiter = start(
        "from ganga_like import *\n"
        "print('waiting', flush=True)\n"
        "for sj in as_completed(jobs(0).subjobs, timeout=120):\n"
        "    print(sj.fqid, sj.status, flush=True)\n"
        "print('all', flush=True)\n",
        env_for,
        ganga=True,
        where=tmp_path,
    )
    try:
        assert line_of(waiter.stdout) == "waiting"
        for index in (2, 0, 3, 1):  # each released once the one before was yielded
            gates[index].touch()
            assert line_of(waiter.stdout) == f"0.{index} completed"
        assert line_of(waiter.stdout) == "all"
        assert waiter.wait(60) == 0, waiter.stderr.read() if waiter.stderr else ""
    finally:
        waiter.kill()
        for gate in gates:
            gate.touch()
    assert j.wait(timeout=60) == "completed"


def test_what_has_finished_already_comes_at_once_and_each_job_once(
    shared_session: Session, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    done = Job(application=Executable(exe="true"))
    done.submit()
    assert done.wait(timeout=60) == "completed"
    held = Job(application=Executable(exe="sh", args=gated(gate)))
    held.submit()
    try:
        assert wait([held, done, done, "0"], return_when="any", timeout=60) == [done]
        gate.touch()
        assert [j.id for j in as_completed([held, 0, held], timeout=60)] == [0, 1]
        assert wait([], timeout=1) == [] and list(as_completed([])) == []
    finally:
        gate.touch()


def test_a_timeout_says_how_many_are_not_final_and_the_jobs_go_on(
    shared_session: Session, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    j = Job(
        application=Executable(exe="sh"),
        splitter=ArgSplitter(args=[["-c", "true"], gated(gate), gated(gate)]),
    )
    j.submit()
    try:
        assert [sj.fqid for sj in wait(j.subjobs, return_when="any", timeout=60)] == ["0.0"]
        with pytest.raises(WaitTimeoutError) as caught:
            wait(j.subjobs, timeout=0.5)
        assert str(caught.value) == (
            "wait(): 2 of 3 not final after waiting 0.5 s (0.1, 0.2); they go on"
        )
        assert isinstance(caught.value, JobError) and isinstance(caught.value, TimeoutError)
        yielded = []
        with pytest.raises(WaitTimeoutError, match=r"as_completed\(\): 2 of 3 not final"):
            for sj in as_completed(j.subjobs, timeout=0.5):
                yielded.append(sj.fqid)
        assert yielded == ["0.0"]
        assert j.subjobs[1].status == "running"  # it goes on
    finally:
        gate.touch()
    assert j.wait(timeout=60) == "completed"


def test_waiting_sleeps_until_the_repository_changes(
    shared_session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No look at the repository without a transaction to see, but one a second at most:
    a job that does not change for two seconds is looked at a few times, not every 50 ms."""
    gate = tmp_path / "gate"
    j = Job(application=Executable(exe="sh", args=gated(gate)))
    j.submit()
    assert j.wait(timeout=60, until="running") == "running"
    looks = []
    sync = shared_session.sync
    monkeypatch.setattr(shared_session, "sync", lambda: (looks.append(1), sync())[1])
    try:
        with pytest.raises(WaitTimeoutError):
            wait(j, timeout=2)
        assert 2 <= len(looks) <= 6, len(looks)
    finally:
        gate.touch()


def test_the_change_signal_rises_at_another_sessions_commit(
    shared_session: Session, gangadir: Path, env_for: dict[str, str]
) -> None:
    signal = shared_session.repo.db.changes
    other = OtherSession(gangadir, env_for)
    try:
        seen = signal.serial
        other.do("create", "theirs", "completed", [])
        assert signal.wait_past(seen, 60)
        shared_session.sync()
        assert [j.name for j in jobs] == ["theirs"]
    finally:
        other.close()


@pytest.mark.parametrize(
    ("call", "line"),
    [
        (
            lambda: wait(3.5),
            "wait(): jobs expected a job, a subjob, a list or slice of them, or "
            "job ids (3, '3.1'), not the float 3.5",
        ),
        (lambda: wait([0, None]), "not the NoneType None"),
        (lambda: wait([[0]]), "not the list [0]"),
        (lambda: wait("scan"), "not the str 'scan'"),
        (lambda: wait(True), "not the bool True"),
        (
            lambda: wait(0, return_when="first"),
            "wait(): return_when expected 'all' or 'any', not the str 'first'",
        ),
        (
            lambda: wait(0, timeout=-1),
            "wait(): timeout expected a number of seconds, 0 or "
            "more (or None: no limit), not the int -1",
        ),
        (lambda: as_completed(0, timeout=float("nan")), "as_completed(): timeout expected"),
        (lambda: wait(0, progress="yes"), "wait(): progress expected True or False"),
        (lambda: wait(7), "no job 7 in the repository"),
        (lambda: wait("0.9"), "job 0 has no subjobs"),
    ],
)
def test_bad_input_is_one_line_before_any_waiting(
    call: object, line: str, session: Session
) -> None:
    Job(application=Executable(exe="true"))
    with pytest.raises(GangaError) as caught:
        call()  # type: ignore[operator]
    assert line in str(caught.value) and "\n" not in str(caught.value)


def test_a_removed_or_new_job_is_one_line_not_a_wait(session: Session) -> None:
    new = Job(application=Executable(exe="true"))
    with pytest.raises(JobError, match=r"^job 0 is new: submit it first; nothing to wait for$"):
        wait([new], timeout=60)
    removed = Job(application=Executable(exe="true"))
    removed.remove()
    with pytest.raises(JobError, match=r"^job 1 was removed: wait\(\) is not possible"):
        wait(removed, timeout=60)
    with pytest.raises(JobError, match=r"^job 1 was removed: as_completed\(\) is not"):
        as_completed([removed])
    with pytest.raises(SchemaError):
        wait(object())
