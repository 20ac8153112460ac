"""A repository that lost its jobs while their workspaces exist is refused, never reused."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ganga_like.errors import RepositoryError
from ganga_like.model.job import Job as JobImpl
from ganga_like.repository.checks.reset import reset_orphans
from ganga_like.repository.connection import Repository
from ganga_like.runtime.repository_check import check_repository

from .conftest import child_env


def _add_jobs(gangadir: Path, count: int) -> list[int]:
    """``count`` jobs, each with a workspace file, as a submission leaves them."""
    repo = Repository(gangadir)
    try:
        ids = [repo.in_transaction(lambda: repo.registry().add(JobImpl())) for _ in range(count)]
    finally:
        repo.close()
    for job_id in ids:
        output = gangadir / "workspace" / str(job_id) / "output"
        output.mkdir(parents=True)
        (output / "stdout").write_text(f"job {job_id}\n")
    return ids


def _ganga(gangadir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ganga_like.cli", *args],
        env=child_env(gangadir, mode="embedded"),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_empty_repository_file_beside_job_workspaces_is_refused(gangadir: Path) -> None:
    _add_jobs(gangadir, 3)
    path = gangadir / "repository" / "Data.fs"
    path.write_bytes(b"")
    listing = _ganga(gangadir, "jobs")
    assert listing.returncode != 0
    lines = listing.stderr.strip().splitlines()
    assert len(lines) == 1 and "has lost jobs" in lines[0], listing.stderr
    assert "ganga repository reset" in lines[0] and "ids 0-2" in lines[0]
    assert path.stat().st_size == 0  # nothing was changed
    check = _ganga(gangadir, "repository", "check")
    assert check.returncode == 1 and "sound" not in check.stdout
    with pytest.raises(RepositoryError, match="has lost jobs"):
        Repository(gangadir)
    # The offered way out: the workspaces move aside, untouched; the next job is 0 again
    # and writes into a new workspace.
    reset = _ganga(gangadir, "repository", "reset")
    assert reset.returncode == 0 and "moved 3" in reset.stdout, reset.stderr
    aside = next(gangadir.glob("workspace-orphaned-*"))
    assert (aside / "0" / "output" / "stdout").read_text() == "job 0\n"
    assert _ganga(gangadir, "jobs").returncode == 0
    assert check_repository(gangadir) == []
    assert _add_jobs(gangadir, 1) == [0]


def test_a_missing_repository_file_beside_job_workspaces_is_refused(gangadir: Path) -> None:
    _add_jobs(gangadir, 2)
    for name in ("Data.fs", "Data.fs.index"):
        (gangadir / "repository" / name).unlink()
    with pytest.raises(RepositoryError, match=r"Data\.fs is missing"):
        Repository(gangadir)
    assert not (gangadir / "repository" / "Data.fs").exists()


def test_a_repository_put_back_to_an_older_copy_is_refused(gangadir: Path) -> None:
    _add_jobs(gangadir, 3)
    repo_dir = gangadir / "repository"
    shutil.copy(repo_dir / "Data.fs", gangadir / "old.fs")
    _add_jobs(gangadir, 2)
    shutil.copy(gangadir / "old.fs", repo_dir / "Data.fs")
    (repo_dir / "Data.fs.index").unlink()
    with pytest.raises(RepositoryError, match=r"next job id is 3 .* \(ids 3-4\)"):
        Repository(gangadir)
    assert any("ganga repository reset" in p for p in check_repository(gangadir))
    assert "(ids 3-4)" in reset_orphans(gangadir)
    assert _add_jobs(gangadir, 1) == [3]


def test_a_new_job_never_takes_an_id_whose_workspace_exists(gangadir: Path) -> None:
    repo = Repository(gangadir)
    try:
        for job_id in (0, 1, 3):  # left by something else while the repository was open
            (gangadir / "workspace" / str(job_id)).mkdir()
        ids = [repo.in_transaction(lambda: repo.registry().add(JobImpl())) for _ in range(3)]
    finally:
        repo.close()
    assert ids == [2, 4, 5]


def test_recover_of_an_empty_file_beside_workspaces_points_to_reset(gangadir: Path) -> None:
    _add_jobs(gangadir, 2)
    (gangadir / "repository" / "Data.fs").write_bytes(b"")
    result = _ganga(gangadir, "repository", "recover")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "ganga repository reset" in lines[0], result.stderr


def test_reset_refuses_a_damaged_file_in_one_line(gangadir: Path) -> None:
    _add_jobs(gangadir, 2)
    path = gangadir / "repository" / "Data.fs"
    with open(path, "r+b") as f:
        f.truncate(path.stat().st_size - 50)
    result = _ganga(gangadir, "repository", "reset")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is damaged" in lines[0], result.stderr
    assert (gangadir / "workspace" / "0").exists()  # nothing was moved
