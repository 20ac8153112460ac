"""``ganga repository recover`` and ``reset`` on a repository in PostgreSQL: recover says
in one line that a database server keeps its own data (nothing done); reset moves aside
only the workspaces of ids the database never gave out, never those of its jobs."""

from __future__ import annotations

from pathlib import Path

from ganga_like.model.job import Job
from ganga_like.repository.connection import Repository

from .test_repository_on_postgres import child_env, ganga, without_password


def _two_jobs(gangadir: Path, url: str) -> list[int]:
    repo = Repository(gangadir, "shared", uri=url)
    try:
        registry = repo.registry()
        repo.in_transaction(lambda: [registry.add(Job()) for _ in range(2)])
        ids = sorted(registry.jobs.keys())
        for job_id in ids:  # as a submission leaves them
            (gangadir / "workspace" / str(job_id) / "input").mkdir(parents=True, exist_ok=True)
        return ids
    finally:
        repo.close()


def test_recover_says_in_one_line_that_the_database_keeps_its_own_data(
    gangadir: Path, postgres_repository: str
) -> None:
    _two_jobs(gangadir, postgres_repository)
    done = ganga(["repository", "recover"], child_env(gangadir, postgres_repository))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, done.stdout
    assert lines[0].startswith("nothing to recover: the repository is in PostgreSQL")
    assert without_password(postgres_repository).split("@")[1].split("/")[0] in lines[0]
    assert not (gangadir / "repository" / "Data.fs").exists()


def test_reset_moves_aside_only_the_workspaces_the_database_never_gave_out(
    gangadir: Path, postgres_repository: str
) -> None:
    ids = _two_jobs(gangadir, postgres_repository)
    workspace = gangadir / "workspace"
    env = child_env(gangadir, postgres_repository)
    untouched = ganga(["repository", "reset"], env)
    assert untouched.returncode == 0, untouched.stderr
    assert untouched.stdout.startswith("nothing to reset: every workspace belongs to a job")
    assert all((workspace / str(i)).is_dir() for i in ids)
    (workspace / "500").mkdir()  # an id the database never gave out
    moved = ganga(["repository", "reset"], env)
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.startswith("moved 1 orphaned workspace directory (ids 500) into ")
    assert all((workspace / str(i)).is_dir() for i in ids)
    assert not (workspace / "500").exists()
    assert len(list(gangadir.glob("workspace-orphaned-*/500"))) == 1


def test_a_database_that_lost_jobs_is_refused_in_one_line_and_reset_makes_it_usable(
    gangadir: Path, postgres_repository: str
) -> None:
    """A new database beside a workspace that holds jobs (as a restore of an older dump
    leaves it): the opening says so, and reset moves the unknown directories aside."""
    for job_id in (0, 1):
        (gangadir / "workspace" / str(job_id)).mkdir(parents=True)
    env = child_env(gangadir, postgres_repository)
    refused = ganga(["jobs"], env)
    assert refused.returncode != 0
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "the repository in PostgreSQL" in lines[0] and "has lost jobs" in lines[0]
    assert "2 job directories (ids 0-1)" in lines[0] and "Data.fs" not in lines[0]
    moved = ganga(["repository", "reset"], env)
    assert moved.stdout.startswith("moved 2 orphaned workspace directories (ids 0-1)"), moved
    listed = ganga(["jobs"], env)
    assert listed.returncode == 0 and listed.stdout.startswith("jobs: 0"), listed
