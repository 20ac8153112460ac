"""The repository's full check and its recovery, with the part that knows the model's jobs.

The repository checks and repairs what is its own, the file, its records, its tables and
their layout (:mod:`ganga_like.repository.checks.integrity`,
:mod:`ganga_like.repository.checks.fullcheck`), and asks what only the model knows of
:data:`MODEL_JOBS`: which objects are jobs, that a job's status is one of the model's,
where a master keeps its subjobs and how they are counted. Call them from here (``ganga
repository check|recover`` does), or run
``python -m ganga_like.runtime.repository_check check|recover GANGADIR``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ganga_like.errors import RepositoryError
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.repository.checks import fullcheck, integrity
from ganga_like.repository.checks.fullcheck import CheckReport
from ganga_like.repository.checks.integrity import RecoveryReport

__all__ = [
    "MODEL_JOBS",
    "ModelJobs",
    "check_file_deeply",
    "check_repository",
    "full_check",
    "main",
    "recover_repository",
]


class ModelJobs:
    """The model's part of checking and recovering jobs
    (:class:`ganga_like.repository.stored.JobChecks`)."""

    def is_job(self, obj: object) -> bool:
        return isinstance(obj, Job)

    def validate(self, job: Any) -> None:
        Status.parse(job.status)

    def subjobs(self, job: Any) -> Any:
        # The subjob table itself (not Job.iter_subjobs): the check tests the B-tree and
        # names the records it owns.
        return job._subjobs

    def recount(self, job: Any) -> bool:
        subjobs = job._subjobs
        if not subjobs:
            return False
        counts: dict[str, int] = {}
        for sj in subjobs.values():
            sj._p_activate()
            counts[sj.status] = counts.get(sj.status, 0) + 1
        counter = job._counter
        if counter is None or counter.counts == counts:
            return False
        counter.counts = counts
        return True


MODEL_JOBS = ModelJobs()


def check_file_deeply(path: Path) -> CheckReport:
    """The full check of one ``Data.fs`` (see :mod:`ganga_like.repository.checks.fullcheck`)."""
    return fullcheck.check_file_deeply(path, MODEL_JOBS)


def full_check(gangadir: Path) -> CheckReport:
    """Read every transaction, record and object of a gangadir's repository, and its
    workspace's job directories; the report (problems, notes and what was read)."""
    return integrity.full_check(gangadir, MODEL_JOBS)


def check_repository(gangadir: Path) -> list[str]:
    """The problems the full check finds (empty: sound)."""
    return full_check(gangadir).problems


def recover_repository(gangadir: Path) -> RecoveryReport:
    """Rebuild a damaged repository from what is intact, keeping the damaged file (see
    :func:`ganga_like.repository.checks.integrity.recover_repository`)."""
    return integrity.recover_repository(gangadir, MODEL_JOBS)


def main(argv: list[str] | None = None) -> int:
    """``python -m ganga_like.runtime.repository_check check|recover GANGADIR``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] not in ("check", "recover"):
        print(
            "usage: python -m ganga_like.runtime.repository_check check|recover GANGADIR",
            file=sys.stderr,
        )
        return 2
    gangadir = Path(args[1])
    try:
        if args[0] == "check":
            report = full_check(gangadir)
            for line in report.lines():
                print(line)
            print(report.summary())
            return 0 if report.sound else 1
        print(recover_repository(gangadir))
    except RepositoryError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
