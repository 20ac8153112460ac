"""The busy repository that the check and pack benchmarks measure.

1,000 small jobs and a master of 10,000 subjobs, then monitor-like commits, each changing
the event log of 500 subjobs.  FileStorage appends, so every cycle grows ``Data.fs``.
Imported by the benchmarks beside it (run as scripts, their folder is on ``sys.path``).
"""

from __future__ import annotations

from pathlib import Path

from ganga_like.repository.connection import Repository
from ganga_like.repository.storage import StorageOptions
from ganga_like.runtime.settings import Settings

SMALL_JOBS = 1000
SUBJOBS = 10_000
PER_CYCLE = 500


def never_pack() -> StorageOptions:
    """Storage options with automatic packing off, so the history the cycles write stays."""
    return Settings(pack_threshold_mb=0).storage_options()


def build(repo: Repository) -> int:
    """Add the small jobs and the master with its subjobs; return the master's id."""
    from ganga_like.model.job import Job
    from ganga_like.repository.registry import Registry

    def add_all() -> int:
        registry = Registry(repo.connection().root())
        for i in range(SMALL_JOBS):
            job = Job()
            job.name = f"job{i}"
            registry.add(job)
        master = Job()
        subjobs = [Job.new_subjob(master, k) for k in range(SUBJOBS)]
        for sj in subjobs:
            sj.__dict__["status"] = "submitted"
        master.attach_subjobs(subjobs)
        return registry.add(master)

    return repo.in_transaction(add_all)


def churn(repo: Repository, master_id: int, cycles: int, label: str = "cycle") -> None:
    """Commit ``cycles`` times, each logging an event on the next 500 subjobs."""
    master = repo.registry().get(master_id)
    assert master is not None
    subjobs = list(master.iter_subjobs())
    for c in range(cycles):
        start = (c * PER_CYCLE) % SUBJOBS
        for sj in subjobs[start : start + PER_CYCLE]:
            sj.log_event(f"{label} {c}")
        repo.commit()


def data_fs(gangadir: Path) -> Path:
    return gangadir / "repository" / "Data.fs"
