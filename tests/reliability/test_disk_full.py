"""Disk full during a commit: a clear error, the transaction aborted, the repository usable;
disk full under the Local runner: no event lost.

The gangadir lives on a 2 MB tmpfs (mounting needs root; the test is skipped, with the
reason, where that is impossible).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ganga_like.config.store import store
from ganga_like.errors import RepositoryWriteError
from ganga_like.model.job import Job as JobImpl
from ganga_like.repository.connection import Repository
from ganga_like.repository.registry import Registry
from ganga_like.repository.zeo import shared
from ganga_like.runtime.repository_check import check_repository
from ganga_like_local.settings import Local as LocalSection

from ..conftest import CHILD_PYTHONPATH
from ..test_local_runner import paused_runner
from ..waiting import wait_until
from .conftest import shared_settings


@contextlib.contextmanager
def _tmpfs(mount: Path, size: str) -> Iterator[Path]:
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with _tmpfs(tmp_path / "small", "2m") as mount:
        yield mount


def _fill_until_full(repo: Repository) -> tuple[int, RepositoryWriteError]:
    """Add 20 kB jobs until a commit fails; return how many were saved and the error."""
    for i in range(1000):

        def add(i: int = i) -> None:
            job = JobImpl()
            job.comment = f"{i:05d}" + "x" * 20_000
            Registry(repo.connection().root()).add(job)

        try:
            repo.in_transaction(add)
        except RepositoryWriteError as exc:
            return i, exc
    raise AssertionError("the disk never filled up")


@pytest.mark.parametrize("mode", ["embedded", "shared"])
def test_a_full_disk_aborts_the_commit_and_the_repository_stays_usable(
    mode: str, small_disk: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    gangadir = small_disk / "gangadir"
    ballast = small_disk / "ballast"
    ballast.write_bytes(b"\0" * 300_000)  # room to give back once the disk is full
    options = shared_settings(gangadir, zeo_cache_mb=1).storage_options()
    repo = Repository(gangadir, mode, options=options)
    try:
        saved, error = _fill_until_full(repo)
        message = str(error)
        assert "\n" not in message
        assert "could not be written (No space left on device)" in message
        assert "this change was not saved" in message
        assert saved > 10
        repo.abort()
        assert len(repo.registry().jobs) == saved  # the failed commit left nothing behind
        ballast.unlink()
        repo.in_transaction(lambda: Registry(repo.connection().root()).add(JobImpl()))
        assert len(repo.registry().jobs) == saved + 1
    finally:
        repo.close()
    with contextlib.suppress(Exception):
        from ganga_like.repository.zeo import shared

        shared.stop_server(gangadir / "repository")
    assert check_repository(gangadir) == []
    reopened = Repository(gangadir)
    try:
        jobs = reopened.registry().jobs
        assert len(jobs) == saved + 1
        assert [j.comment[:5] for j in list(jobs.values())[:saved]] == [
            f"{i:05d}" for i in range(saved)
        ]
    finally:
        reopened.close()


class _FullDisk:
    """A cache file on a disk that just filled up: every write or flush fails."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.closed = False

    def _full(self, *_args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    write = flush = seek = truncate = _full

    def fileno(self) -> int:
        return int(self.real.fileno())

    def close(self) -> None:
        self.closed = True
        self.real.close()


def test_a_client_cache_that_cannot_be_written_switches_itself_off(tmp_path: Path) -> None:
    from ganga_like.repository.zeo.client_cache import ResilientClientCache

    path = tmp_path / "slot-0.zec"
    cache = ResilientClientCache(str(path), 1 << 20)
    oid, tid = b"\0" * 7 + b"\1", b"\0" * 7 + b"\2"
    cache.store(oid, tid, None, b"data")
    assert cache.load(oid) == (b"data", tid)
    cache.f = _FullDisk(cache.f)

    cache.store(oid, b"\0" * 7 + b"\3", None, b"newer")  # fails inside: the cache goes off
    assert cache.disabled
    assert not path.exists()  # the next session starts with a fresh file
    assert cache.load(oid) is None  # never the stale copy: every read goes to the server
    cache.setLastTid(b"\0" * 7 + b"\4")
    assert cache.getLastTid() == b"\0" * 7 + b"\4"
    cache.invalidate(oid, b"\0" * 7 + b"\5")
    cache.close()


def _fill(path: Path) -> None:
    """Write ``path`` until its file system is full."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    try:
        while True:
            os.write(fd, b"\0" * 512)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)


def test_a_full_disk_while_subjobs_run_loses_no_event_and_every_outcome_is_recorded(
    tmp_path: Path,
) -> None:
    """The runner's journals fill up while 64 subjobs end and 16 more wait for their turn;
    nothing is lost once space returns.  The repository stays on a roomy disk (only the
    workspace and the runner's directory are on the small one), so that the runner alone
    meets the full disk."""
    from ganga_like import ArgSplitter, Executable, Job
    from ganga_like.runtime.session import close_session, open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like_local.backend import JOURNAL, runner_dir
    from ganga_like_runner import client as runner_client

    running, count = 64, 80
    gate = tmp_path / "gate"
    exe = tmp_path / "prog.sh"
    exe.write_text(f'#!/bin/sh\nwhile [ ! -e "{gate}" ]; do sleep 0.5; done\nexit $(($1 % 3))\n')
    exe.chmod(0o755)
    with _tmpfs(tmp_path / "small", "4m") as small:
        gangadir = tmp_path / "gangadir"
        gangadir.mkdir()
        for name in ("workspace", "local-runner"):
            (small / name).mkdir()
            (gangadir / name).symlink_to(small / name)
        open_session(
            Settings(gangadir=gangadir),
            store.snapshot().replaced(
                {LocalSection: {"max_concurrent": running, "idle_exit": 5.0}}
            ),
        )
        try:
            j = Job(
                application=Executable(exe=str(exe)),
                splitter=ArgSplitter(args=[[str(i)] for i in range(count)]),
            )
            j.submit()
            assert wait_until(lambda: [sj.status for sj in j.subjobs].count("running") == running)
            journal = small / "workspace" / str(j.id) / JOURNAL
            ballast = small / "ballast"
            _fill(ballast)
            gate.touch()  # the running subjobs end now, on a full disk; the others wait
            records = [
                small / "workspace" / str(j.id) / str(i) / "output" / "__run__"
                for i in range(running)
            ]
            assert wait_until(lambda: all(b'"state"' in r.read_bytes() for r in records))
            finals = _finals(journal)
            assert len(finals) < running  # the full disk held events back
            ballast.unlink()

            assert j.wait(timeout=60) == "failed"
            for i, sj in enumerate(j.subjobs):
                assert sj.exit_code == i % 3, sj.fqid
                assert sj.status == ("completed" if i % 3 == 0 else "failed"), sj.fqid
            assert len(_finals(journal)) == count
            # Every line of the journal is whole: nothing half-written was left behind.
            for line in journal.read_bytes().splitlines():
                json.loads(line)
        finally:
            close_session()
            runner_client.stop(runner_dir(gangadir))


def _finals(journal: Path) -> list[str]:
    from ganga_like_runner import client as runner_client

    events, _ = runner_client.read_events(journal, 0)
    return [e.key for e in events if e.event in runner_client.TERMINAL_EVENTS]


SUBMIT_ON_A_FULL_DISK = """
import os, sys, time
from ganga_like.errors import GangaError

j = Job(application=Executable(exe="/bin/sleep"),
        splitter=ArgSplitter(args=[["30"] for _ in range(300)]))
ballast = sys.argv[1]
fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o600)
try:
    while True:
        os.write(fd, b"\\0" * 4096)
except OSError:
    pass
os.close(fd)
os.truncate(ballast, os.path.getsize(ballast) - int(sys.argv[2]))  # room for a small commit
try:
    j.submit()
finally:
    print("STATUS", j.status, flush=True)
    started = time.monotonic()
    try:
        j.wait(timeout=float(sys.argv[3]))
    except GangaError as exc:
        print("WAITED", round(time.monotonic() - started), exc, flush=True)
"""


@pytest.mark.parametrize("mode", ["embedded", "shared"])
def test_a_submission_whose_outcome_cannot_be_written_is_rolled_back_in_one_line(
    mode: str, tmp_path: Path
) -> None:
    from ganga_like.repository.connection import Repository as Repo
    from ganga_like_local.backend import runner_dir

    env = dict(os.environ)
    env["PYTHONPATH"] = CHILD_PYTHONPATH
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env["GANGA_REPOSITORY_MODE"] = mode  # shared: the default
    script = tmp_path / "submit.py"
    script.write_text(SUBMIT_ON_A_FULL_DISK)
    with _tmpfs(tmp_path / "small", "4m") as small:
        gangadir = small / "gangadir"
        env["GANGA_DIR"] = str(gangadir)
        try:
            # Shared mode leaves the job submitting: its wait can only run out, so it is
            # kept short there (its one-line outcome is still checked).
            patience = "30" if mode == "embedded" else "1"
            # The runner, alive and stopped (SIGSTOP), keeps what it is sent queued: nothing
            # it would write (the tasks' files and events, their cancellation) takes room
            # on the disk meanwhile, however the machine schedules the processes.
            with paused_runner(tmp_path, runner_dir(gangadir)):
                result = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "ganga_like.cli",
                        str(script),
                        str(small / "ballast"),
                        "60000",
                        patience,
                    ],
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
        finally:
            _free_and_stop(small, gangadir)
        assert result.returncode == 1, result
        # One line for the user: no traceback of the failed commit's abort, no log noise.
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith("ERROR: job 0 could not be submitted: the repository")
        assert "No space left on device" in result.stderr
        line = result.stderr.rstrip()
        # Both modes alike: the file storage (the session's, or the server's) gives back
        # what its failed commit took, and the rollback fits (the runner, paused, writes
        # nothing of the tasks it received and of their cancellation meanwhile)...
        if not line.endswith("the job is new again"):
            # ...unless, with the server, another writer of the same small disk (the
            # client cache) took that room first: then the job is left submitting, the
            # line says so, and the next start recovers it.
            assert mode == "shared" and line.endswith("which recovers it"), line
            again = subprocess.run(
                [sys.executable, "-m", "ganga_like.cli", "jobs"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            _free_and_stop(small, gangadir)
            assert again.returncode == 0, again.stderr
        else:
            # The session saw what the repository holds, and waiting said at once why not.
            assert "STATUS new" in result.stdout, result.stdout
            assert "WAITED 0 job 0 is new" in result.stdout, result.stdout
        repo = Repo(gangadir, "readonly")
        try:
            job = repo.registry().get(0)
            assert job is not None and job.current_status().label == "new"
            assert job.subjob_count() == 0
            assert 0 not in repo.registry().submitting
        finally:
            repo.close()


def test_an_append_cut_short_by_a_full_disk_is_taken_back_whole(tmp_path: Path) -> None:
    from ganga_like_runner.journal import append_whole

    with _tmpfs(tmp_path / "small", "1m") as small:
        journal = small / "journal"
        journal.write_bytes(b'{"first": 1}\n')
        _fill(small / "ballast")
        lines = b"".join(b'{"line": %d}\n' % i for i in range(1000))  # more than a page
        fd = os.open(journal, os.O_WRONLY | os.O_APPEND)
        try:
            # The rest of the journal's page takes part of it, then the disk is full.
            with pytest.raises(OSError) as failure:
                append_whole(fd, lines)
            assert failure.value.errno == errno.ENOSPC
            assert journal.read_bytes() == b'{"first": 1}\n'  # no half-written line left
            (small / "ballast").unlink()
            append_whole(fd, lines)
        finally:
            os.close(fd)
        assert journal.read_bytes() == b'{"first": 1}\n' + lines


def _free_and_stop(small: Path, gangadir: Path) -> None:
    """After a full-disk run: the space given back, the runner and the default mode's
    server (if any) stopped."""
    from ganga_like_local.backend import runner_dir
    from ganga_like_runner import client as runner_client

    with contextlib.suppress(FileNotFoundError):
        (small / "ballast").unlink()
    with contextlib.suppress(Exception):
        runner_client.stop(runner_dir(gangadir))
    with contextlib.suppress(Exception):
        shared.stop_server(gangadir / "repository")


def _gated_env(tmp_path: Path, mode: str) -> tuple[dict[str, str], Path]:
    """The environment of a script that pauses its (re)submission after the first slice
    until the test creates the gate file it returns (once the disk is full)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = CHILD_PYTHONPATH
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env["GANGA_REPOSITORY_MODE"] = mode  # shared: the default
    gate = tmp_path / "gate"
    env["TEST_GATE"] = str(gate)  # the script pauses on it
    return env, gate


def _gated_script(
    env: dict[str, str], gangadir: Path, script: Path, text: str
) -> subprocess.Popen[str]:
    script.write_text(text)
    return subprocess.Popen(
        [sys.executable, "-m", "ganga_like.cli", str(script)],
        env={**env, "GANGA_DIR": str(gangadir)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


RESUBMIT_ON_A_FULL_DISK = """
import os
import sys
from ganga_like import *

j = Job(application=Executable(exe="/bin/false"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(80)]))
j.submit()
assert j.wait(timeout=60) == "failed"
print("resubmitting", flush=True)
os.environ["GANGA_LIKE_TEST_PAUSE_AFTER_FIRST_SLICE"] = os.environ["TEST_GATE"]
try:
    j.resubmit()  # the disk fills up while it pauses after the first slice
finally:
    print("STATUSES", sorted({sj.status for sj in j.subjobs}), flush=True)
"""


@pytest.mark.parametrize("mode", ["embedded", "shared"])
def test_a_resubmission_whose_outcome_cannot_be_written_leaves_the_session_as_the_repository(
    mode: str, tmp_path: Path
) -> None:
    from ganga_like.repository.connection import Repository as Repo
    from ganga_like_local.backend import JOURNAL

    env, gate = _gated_env(tmp_path, mode)
    with _tmpfs(tmp_path / "small", "4m") as small:
        gangadir = small / "gangadir"
        runners = gangadir / "local-runner"
        child = _gated_script(env, gangadir, tmp_path / "resubmit.py", RESUBMIT_ON_A_FULL_DISK)
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "resubmitting"
            journal = gangadir / "workspace" / "0" / JOURNAL
            before = journal.stat().st_size

            def first_slice_handed_over() -> bool:
                # Its batch is queued or accepted, or (80 /bin/false run fast) it already
                # ran, and was removed, and its events are in the job's journal.
                return journal.stat().st_size > before or any(
                    name.endswith(".batch.json") and not name.startswith(".")
                    for sub in ("queue", "accepted")
                    if (runners / sub).is_dir()
                    for name in os.listdir(runners / sub)
                )

            assert wait_until(first_slice_handed_over)
            _fill(small / "ballast")  # while the submitter pauses: its outcome cannot fit
            gate.touch()
            out, err = child.communicate(timeout=120)
        finally:
            if child.poll() is None:
                child.kill()
            _free_and_stop(small, gangadir)
        assert child.returncode == 1, (out, err)
        assert err.count("\n") == 1, err
        assert err.startswith("ERROR: job 0 could not be resubmitted: the repository"), err
        assert "what the backend received was cancelled" in err, err
        seen = out.split("STATUSES", 1)[1].strip()
        repo = Repo(gangadir, "readonly")
        try:
            job = repo.registry().get(0)
            assert job is not None
            assert seen == str(sorted({sj.status for sj in job.iter_subjobs()}))
            assert "submitting" not in seen or 0 in repo.registry().submitting
        finally:
            repo.close()


LEFT_SUBMITTING = """
import os
import time
from ganga_like import *

j = Job(application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(100)]))
os.environ["GANGA_LIKE_TEST_PAUSE_AFTER_FIRST_SLICE"] = os.environ["TEST_GATE"]
print("submitting", flush=True)
try:
    j.submit()  # the disk fills up and the runner's queue goes while it pauses
except GangaError as exc:
    print("SUBMIT", exc, flush=True)
started = time.monotonic()
try:
    j.wait(timeout=120)
except GangaError as exc:
    print("WAITED", round(time.monotonic() - started), exc, flush=True)
"""


def test_waiting_on_a_job_left_submitting_says_so_at_once(tmp_path: Path) -> None:
    """A submission whose outcome cannot be written and whose hand-over cannot be
    cancelled leaves the job submitting for the next start: ``wait()`` in the same session
    answers with that line at once, not after its whole timeout."""
    env, gate = _gated_env(tmp_path, "shared")
    with _tmpfs(tmp_path / "small", "4m") as small:
        gangadir = small / "gangadir"
        queue = gangadir / "local-runner" / "queue"
        child = _gated_script(env, gangadir, tmp_path / "left.py", LEFT_SUBMITTING)
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "submitting"
            journal = gangadir / "workspace" / "0"
            assert wait_until(lambda: journal.is_dir() and queue.is_dir())
            # The first slice is handed over; the cancellation will find no queue to
            # post to, and the outcome no room.
            queue.rename(queue.with_name("queue.gone"))
            queue.write_text("")
            _fill(small / "ballast")
            gate.touch()
            out, err = child.communicate(timeout=240)
        finally:
            if child.poll() is None:
                child.kill()
            _free_and_stop(small, gangadir)
    submitted = next(line for line in out.splitlines() if line.startswith("SUBMIT "))
    assert "stays submitting until ganga next starts, which recovers it" in submitted, out
    waited = next(line for line in out.splitlines() if line.startswith("WAITED "))
    assert waited == f"WAITED 0 {submitted.removeprefix('SUBMIT ')}; nothing to wait for", (
        out,
        err,
    )
