"""Ending jobs: kill, force_status, remove."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ganga_like.errors import GangaError, JobError, UnknownStatusError, safe_repr
from ganga_like.model.base import GangaObject
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.model.stop_points import stop_point
from ganga_like.repository.workspace_removal import delete_behind, record_removal, set_aside
from ganga_like.runtime.monitoring.killed_followed import to_unfollow
from ganga_like.runtime.submission.handover import check_components
from ganga_like.runtime.submission.master_kill import HELD_CAUSE, KILL_CAUSE, kill_master
from ganga_like.runtime.submission.recording import record
from ganga_like.runtime.workflow import engine as workflow

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = ["force_status", "kill", "remove"]

log = logging.getLogger("ganga_like")


def kill(session: Session, job: Job, keep_going: bool = True, in_bulk: bool = True) -> bool:
    """Kill a job, a subjob, or every active subjob of a master: those still queued in
    bulk (``master_kill``) when the master keeps its subjobs' statuses in chunks, unless
    ``in_bulk`` is false (each subjob's record written in the call)."""
    check_components(job, "kill")
    statuses = job.subjob_statuses() if in_bulk and job.is_master else None
    if statuses is not None:
        errors = kill_master(session, job, statuses)
    else:
        errors = _kill_one_by_one(session, job)
    if errors:
        fqid, message = next(iter(errors.items()))
        text = f"job {job.fqid}: {len(errors)} kill(s) failed, first {fqid}: {message}"
        if not keep_going:
            raise JobError(text)
        log.warning(text)
    return True


def _kill_one_by_one(session: Session, job: Job) -> dict[str, str]:
    """Kill a job, a subjob or a master's active subjobs, writing each one's record."""
    subjobs = list(job.iter_subjobs()) if job.is_master else [job]
    targets = [sj for sj in subjobs if Status.parse(sj.status).active]
    # Subjobs held waiting by their workflow's throttle never reached the backend.
    held = [sj for sj in subjobs if sj.master is not None and sj.status == Status.WAITING.label]
    if not targets and not held:
        raise JobError(f"job {job.fqid} is {job.current_status()}: nothing to kill")
    backend = (job.master or job).backend
    errors = backend.kill_bulk(session.submit_context(backend), targets) if targets else {}

    def record_kill() -> None:
        registry = session.repo.registry()
        for subjob in held:
            if subjob.status == Status.WAITING.label:
                subjob.change_status(Status.KILLED, HELD_CAUSE)
        for target in targets:
            if target.fqid in errors:
                target.log_event(f"kill failed: {errors[target.fqid]}")
                continue
            if Status.parse(target.status).active:
                target.change_status(Status.KILLED, KILL_CAUSE)
            registry.unfollow(target)

    record(session, job.master or job, record_kill, f"recording the kill of job {job.fqid}")
    return errors


def remove(session: Session, job: Job) -> bool:
    """Remove a top-level job, its subjobs and its workspace (active ones are killed)."""
    if getattr(job, "master", None) is not None:
        log.error(
            "subjob %s cannot be removed on its own; remove its master %s",
            job.fqid,
            job.master.id if job.master else "?",
        )
        return False
    job_id = job.id
    if isinstance(job, Job) and isinstance(job.backend, GangaObject):
        try:
            if has_active(job):
                kill(session, job, keep_going=True)
        except GangaError as exc:
            log.warning("job %s: kill before removal failed: %s", job_id, exc)
    workspace = session.repo.workspace

    def forget() -> None:
        registry = session.repo.registry()
        registry.remove(job_id)  # its active entries too
        pending = to_unfollow(registry.root)
        if pending is not None and job_id in pending:
            # Else a later monitor cycle writes that a removed job has nothing to unfollow.
            pending.remove(job_id)
        workflow.upstream_removed(registry, job_id)  # what waited for it is skipped
        record_removal(registry.root, workspace, job_id)

    session.repo.in_transaction(forget, what=f"removing job {job_id}")
    stop_point("removal-committed")
    # The workspace is deleted behind (repository.workspace_removal): remove() returns.
    set_aside(workspace, job_id)
    delete_behind(workspace, pause=lambda: stop_point("workspace-deleting"))
    return True


def has_active(job: Job) -> bool:
    """Whether the job or one of its subjobs is active; a master's from its status counter,
    loading no subjob."""
    if job.is_master:
        counts = job.counts()
        if counts:
            return any(status.active for status, n in counts.items() if n)
    jobs = job.iter_subjobs() if job.is_master else iter([job])
    return any(Status.parse(sj.status).active for sj in jobs)


_FORCEABLE = (Status.COMPLETED, Status.FAILED)


_FORCEABLE_BY_NAME = {s.label: s for s in _FORCEABLE}


def force_status(session: Session, job: Job, status: str) -> bool:
    """Force a job (a master: each of its unfinished subjobs) to completed or failed."""
    target = _FORCEABLE_BY_NAME.get(status.lower()) if isinstance(status, str) else None
    if target is None:
        raise UnknownStatusError(
            f"force_status accepts 'completed' or 'failed', not {safe_repr(status)}"
        )
    jobs = list(job.iter_subjobs()) if job.is_master else [job]
    if job.current_status() in (Status.NEW, Status.SUBMITTING):
        raise JobError(f"job {job.fqid} is {job.current_status()}: submit it first")
    if job.current_status().frozen:
        raise JobError(f"job {job.fqid} is {job.current_status()}: unfreeze() it first")
    jobs = [j for j in jobs if not Status.parse(j.status).frozen]  # frozen results stand
    active = [j for j in jobs if Status.parse(j.status).active]
    if active:
        try:
            backend = (job.master or job).backend
            backend.kill_bulk(session.submit_context(backend), active)
        except GangaError as exc:
            log.warning("job %s: stopping the backend job failed: %s", job.fqid, exc)

    def record_forced() -> None:
        registry = session.repo.registry()
        if target is Status.COMPLETED and job.postprocessing_failed():
            job.forget_postprocessing_failure("forced by user")
        for j in jobs:
            if Status.parse(j.status) is not target and Status.parse(j.status) is not Status.NEW:
                j.change_status(target, "forced by user")
                registry.unfollow(j)

    record(session, job.master or job, record_forced, f"forcing the status of job {job.fqid}")
    return True
