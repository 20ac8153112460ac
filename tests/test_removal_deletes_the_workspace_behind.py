"""remove(): the repository's change is one transaction, the workspace is deleted behind
it by a background thread; a process killed before the deletion is done leaves nothing
the repository points to, and the next opening of the repository finishes the deletion.
A removal never touches another job."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ganga_like import ArgSplitter, Executable, Job, jobs
from ganga_like.model.stop_points import STOP_VARIABLE
from ganga_like.repository import workspace_removal
from ganga_like.repository.connection import Repository
from ganga_like.repository.workspace_removal import REMOVED_DIR, TO_DELETE_KEY
from ganga_like.runtime.session import Session

TIMEOUT = 120.0  # a guard against a hang, never reached unless something is wrong


def wait_until_empty(path: Path) -> None:
    deadline = time.monotonic() + TIMEOUT
    while path.exists() and os.listdir(path):
        assert time.monotonic() < deadline, f"{path} still holds {os.listdir(path)}"
        time.sleep(0.01)


def files_under(path: Path) -> dict[str, bytes]:
    return {
        str(Path(root, name).relative_to(path)): Path(root, name).read_bytes()
        for root, _, names in os.walk(path)
        for name in names
    }


def test_remove_sets_the_workspace_aside_at_once_and_deletes_it_behind(
    session: Session,
) -> None:
    j = Job(
        application=Executable(exe="/bin/echo"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(5)]),
    )
    j.submit()
    assert j.wait(timeout=TIMEOUT) == "completed"
    workspace = session.repo.workspace
    job_id = j.id
    assert (workspace / str(job_id) / "4" / "output" / "stdout").exists()
    j.remove()
    assert not (workspace / str(job_id)).exists()
    assert job_id not in [k.id for k in jobs]
    wait_until_empty(workspace / REMOVED_DIR)
    # The record of workspaces to delete forgets the ones gone, at the next removal.
    other = Job(application=Executable(exe="/bin/true"))
    other.remove()
    recorded = session.repo.connection().root()[TO_DELETE_KEY]
    assert job_id not in recorded


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(removed=st.lists(st.booleans(), min_size=1, max_size=5))
def test_removing_some_jobs_leaves_the_others_and_their_files_alone(
    session: Session, removed: list[bool]
) -> None:
    workspace = session.repo.workspace
    made = [Job(application=Executable(exe="/bin/true")) for _ in removed]
    for job in made:  # something of each in its workspace
        (workspace / str(job.id) / "input").mkdir(parents=True, exist_ok=True)
        (workspace / str(job.id) / "input" / "data").write_text(f"job {job.id}")
    kept = {
        job.id: files_under(workspace / str(job.id))
        for job, r in zip(made, removed, strict=True)
        if not r
    }
    for job, remove in zip(made, removed, strict=True):
        if remove:
            job.remove()
    wait_until_empty(workspace / REMOVED_DIR)
    ids = {job.id for job in jobs}
    for job, remove in zip(made, removed, strict=True):
        assert (job.id in ids) is not remove
        assert (workspace / str(job.id)).exists() is not remove
    for job_id, files in kept.items():
        assert files_under(workspace / str(job_id)) == files
        assert jobs(job_id).application.exe == "/bin/true"


REMOVER = textwrap.dedent("""
    import sys, time
    from ganga_like import ArgSplitter, Executable, Job
    neighbour = Job(application=Executable(exe="/bin/echo"), name="neighbour")
    j = Job(application=Executable(exe="/bin/echo"),
            splitter=ArgSplitter(args=[[str(i)] for i in range(int(sys.argv[1]))]))
    for job in (neighbour, j):
        job.submit()
        assert job.wait(timeout=120) == "completed"
    print(j.id, neighbour.id, flush=True)
    j.remove()
    time.sleep(300)  # killed by the test while its deleting thread is held
""")


def killed_while_removing(gangadir: Path, env: dict[str, str], point: str) -> tuple[int, int]:
    """Run a process that removes a job, kill -9 it at ``point``; the ids of the removed
    job and of its neighbour."""
    stop_file = gangadir.parent / "stopped"
    env = {**env, STOP_VARIABLE: f"{point}:{stop_file}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", REMOVER, "30"], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        removed, neighbour = (int(word) for word in proc.stdout.readline().split())
        deadline = time.monotonic() + TIMEOUT
        while not stop_file.exists():
            assert proc.poll() is None, "the removing process ended before its stop"
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return removed, neighbour


def reopen_and_check(gangadir: Path, removed: int, neighbour: int) -> None:
    """The next opening finishes the deletion; the neighbour keeps everything."""
    workspace = gangadir / "workspace"
    neighbour_files = files_under(workspace / str(neighbour))
    with Repository(gangadir, mode="auto") as repo:
        registry = repo.registry()
        assert removed not in registry.jobs
        assert neighbour in registry.jobs
        assert not (workspace / str(removed)).exists()
        wait_until_empty(workspace / REMOVED_DIR)
    assert files_under(workspace / str(neighbour)) == neighbour_files
    assert neighbour_files


def test_a_process_killed_while_deleting_behind_leaves_it_to_the_next_opening(
    gangadir: Path, env_for: dict[str, str]
) -> None:
    removed, neighbour = killed_while_removing(gangadir, env_for, "workspace-deleting")
    workspace = gangadir / "workspace"
    assert not (workspace / str(removed)).exists()
    left = os.listdir(workspace / REMOVED_DIR)
    assert len(left) == 1 and files_under(workspace / REMOVED_DIR / left[0])  # partly deleted
    reopen_and_check(gangadir, removed, neighbour)


def test_a_process_killed_between_the_commit_and_setting_aside_leaves_it_to_the_next_opening(
    gangadir: Path, env_for: dict[str, str]
) -> None:
    removed, neighbour = killed_while_removing(gangadir, env_for, "removal-committed")
    assert (gangadir / "workspace" / str(removed)).exists()  # the repository forgot it
    reopen_and_check(gangadir, removed, neighbour)


def _removed_tree(tmp_path: Path, *names: str) -> Path:
    removed = tmp_path / "workspace" / REMOVED_DIR
    for name in names:
        (removed / name / "0" / "output").mkdir(parents=True)
        (removed / name / "0" / "output" / "stdout").write_text("x")
    return removed


def test_a_workspace_another_session_deleted_first_is_no_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two sessions delete the same .removed/ at once: the other one deletes an entry
    # between this one's listing and its look inside the entry.
    removed = _removed_tree(tmp_path, "7.1", "8.2")
    real_listdir = os.listdir

    def listing_then_the_other_session_deletes(path: str | os.PathLike[str]) -> list[str]:
        names = real_listdir(path)
        first = min(names, default=None)  # the one this session looks into first
        if Path(path) == removed and first is not None and (removed / first).exists():
            shutil.rmtree(removed / first)
        return names

    monkeypatch.setattr(workspace_removal.os, "listdir", listing_then_the_other_session_deletes)
    paused: list[bool] = []
    thread = workspace_removal.delete_behind(removed.parent, pause=lambda: paused.append(True))
    assert thread is not None
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    assert real_listdir(removed) == []
    assert paused == []  # the entry looked into first was gone: nothing of it deleted here


def test_a_workspace_that_cannot_be_deleted_ends_the_deleter_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # root deletes whatever it likes, so "cannot" is the deletion doing nothing here.
    removed = _removed_tree(tmp_path, "9.3")
    monkeypatch.setattr(workspace_removal.shutil, "rmtree", lambda *a, **k: None)
    thread = workspace_removal.delete_behind(removed.parent)
    assert thread is not None
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    assert "could not be deleted: 9.3" in caplog.text
