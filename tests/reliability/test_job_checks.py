"""The model's part of the full check and of recovery: what does not fit in a job is named,
an object whose class is gone is told from one that is not a job, subjob counts are
recomputed."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from persistent.mapping import PersistentMapping

from ganga_like.model.job import Job
from ganga_like.repository.connection import Repository
from ganga_like.runtime.repository_check import full_check, recover_repository

from .conftest import child_env


def _repository(gangadir: Path, jobs: int, change: Callable[[Repository], None]) -> None:
    """``jobs`` jobs (ids 0..jobs-1), then ``change`` in a transaction of its own."""
    repo = Repository(gangadir)
    try:

        def add() -> None:
            registry = repo.registry()
            for _ in range(jobs):
                registry.add(Job())

        repo.in_transaction(add)
        repo.in_transaction(lambda: change(repo))
    finally:
        repo.close()


def test_the_full_check_names_what_does_not_fit_in_a_job(gangadir: Path) -> None:
    def spoil(repo: Repository) -> None:
        table = repo.registry().jobs
        table[1].__dict__["id"] = 7
        table[2].__dict__["status"] = "bogus"
        for job_id in (1, 2):
            table[job_id]._p_changed = True
        table[3] = PersistentMapping()

    _repository(gangadir, 4, spoil)
    problems = full_check(gangadir).problems
    assert problems[0].startswith("job 1 says it is job 7")
    assert problems[1].startswith(
        "job 2 is inconsistent (UnknownStatusError: unknown status 'bogus'"
    )
    assert problems[2].startswith("job 3 is a PersistentMapping, not a job")
    assert len(problems) == 3


def test_an_object_whose_class_is_gone_is_noted_by_the_check_and_kept_by_recovery(
    gangadir: Path, vanishing_class: type
) -> None:
    def replace(repo: Repository) -> None:
        repo.registry().jobs[1] = vanishing_class()

    _repository(gangadir, 2, replace)
    sys.modules.pop(vanishing_class.__module__)
    report = full_check(gangadir)
    assert report.sound, report.problems
    assert report.jobs == 2
    assert "job 1 is of a class that is not installed (Gone): it lists as broken" in report.notes
    recovered = recover_repository(gangadir)
    assert (recovered.jobs_kept, recovered.lost_jobs) == (2, [])
    assert full_check(gangadir).sound


def test_recovery_recomputes_the_subjob_counts_of_a_master(gangadir: Path) -> None:
    def split(repo: Repository) -> None:
        master = repo.registry().get(0)
        subjobs = [Job.new_subjob(master, k) for k in range(3)]
        for sj, status in zip(subjobs, ("completed", "completed", "failed"), strict=True):
            sj.__dict__["status"] = status
        master.attach_subjobs(subjobs)
        master._counter.counts = {"completed": 3}  # wrong: one of them failed

    _repository(gangadir, 2, split)
    assert full_check(gangadir).sound  # counts are not checked, only recomputed
    report = recover_repository(gangadir)
    assert (report.jobs_kept, report.lost_jobs) == (2, [])
    assert "job 0: its subjob counts were recomputed" in report.notes
    assert not any("job 1" in note for note in report.notes)
    repo = Repository(gangadir)
    try:
        master = repo.registry().get(0)
        assert master._counter.counts == {"completed": 2, "failed": 1}
        assert repo.registry().indexed_status(0) == "failed"
    finally:
        repo.close()


def test_the_check_runs_as_a_module(gangadir: Path) -> None:
    _repository(gangadir, 1, lambda repo: None)
    command = [sys.executable, "-m", "ganga_like.runtime.repository_check"]
    env = child_env(gangadir)
    done = subprocess.run(
        [*command, "check", str(gangadir)], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("repository is sound: ")
    mended = subprocess.run(
        [*command, "recover", str(gangadir)], env=env, capture_output=True, text=True, timeout=120
    )
    assert mended.returncode == 0, mended.stderr
    assert mended.stdout.startswith("repository recovered: 1 job(s) kept")
    wrong = subprocess.run(
        [*command, "mend", str(gangadir)], env=env, capture_output=True, text=True, timeout=120
    )
    assert wrong.returncode == 2
    assert wrong.stderr.strip() == (
        "usage: python -m ganga_like.runtime.repository_check check|recover GANGADIR"
    )
