"""Startup recovery of submissions a crash interrupted.

Every submission records its intent before the backend is reached and removes it when the
outcome is recorded. An intent still there whose owner process is gone means the process
died in between. The rule:

* a first submission is rolled back: the job is ``new`` again with no subjobs, and the
  backend is asked to cancel whatever it may have received under the job's task keys, so
  nothing runs unrecorded and nothing is run twice when the user submits again;
* a resubmission marks the subjobs still ``submitting`` as ``failed`` (cause: the
  resubmission was interrupted), after the same cancellation; the user resubmits them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import psutil

from ganga_like.errors import GangaError
from ganga_like.model.base import GangaObject
from ganga_like.model.job import Job
from ganga_like.model.status import Status

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = ["owner_alive", "recover_interrupted_submissions"]

log = logging.getLogger("ganga_like")


def owner_alive(pid: int, started: float) -> bool:
    try:
        return bool(abs(psutil.Process(pid).create_time() - started) < 1.0)
    except psutil.Error:
        return False


def recover_interrupted_submissions(session: Session) -> list[str]:
    """Recover every interrupted submission; return one line per job recovered."""
    registry = session.registry()
    stale = [(job_id, value) for job_id, value in registry.submitting.items()
             if not owner_alive(value[2], value[3])]
    if not stale:
        return []
    lines: list[str] = []

    def recover() -> None:
        lines.clear()
        for job_id, (kind, detail, _pid, _started) in stale:
            if registry.submitting.pop(job_id, None) is None:
                continue  # recovered meanwhile by another session (shared mode)
            job = registry.get(job_id)
            if not isinstance(job, Job) or not isinstance(job.backend, GangaObject):
                continue
            if kind == "submit":
                lines.append(_roll_back(session, job, int(detail)))
            else:
                lines.append(_fail_resubmission(session, job, tuple(detail)))
            registry.reindex(job)

    session.repo.in_transaction(recover)
    for line in lines:
        log.warning("%s", line)
    return lines


def _cancel(session: Session, job: Job, targets: list[Job]) -> None:
    try:
        job.backend.kill_bulk(session.submit_context(), targets)
    except GangaError as exc:
        log.warning("job %s: cancelling an interrupted submission failed: %s", job.fqid, exc)


def _roll_back(session: Session, job: Job, count: int) -> str:
    if count:
        targets = []
        for index in range(count):
            skeleton = Job.new_subjob(job, index)
            skeleton.__dict__["submit_count"] = 1
            targets.append(skeleton)
    else:
        targets = [job]
    _cancel(session, job, targets)
    if Status.parse(job.status) is Status.SUBMITTING:
        job.change_status(Status.NEW, "recovered: the submission was interrupted; rolled back")
    return f"job {job.fqid}: an interrupted submission was rolled back; the job is new"


def _fail_resubmission(session: Session, job: Job, ids: tuple[Any, ...]) -> str:
    targets = [job.subjob(i) for i in ids] if ids else [job]
    pending = [t for t in targets if Status.parse(t.status) is Status.SUBMITTING]
    _cancel(session, job, pending)
    for target in pending:
        target.change_status(Status.FAILED, "recovered: the resubmission was interrupted")
    return f"job {job.fqid}: {len(pending)} interrupted resubmission(s) marked failed"
