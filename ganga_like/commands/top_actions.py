"""What ``ganga top`` does to jobs once the user confirmed: each returns the one line the
screen shows (run on the reading thread, :mod:`ganga_like.commands.top_source`)."""

from __future__ import annotations

from ganga_like.gpi import workflow
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.runtime.session import Session
from ganga_like.runtime.submission.resubmit import run_again

__all__ = ["kill_job", "resubmit_subjobs"]

_FAILED = frozenset({Status.FAILED, Status.KILLED})


def kill_job(session: Session, job_id: int) -> str:
    """Kill a job (a master: its active subjobs), as ``ganga kill ID`` does."""
    job = session.registry().get(job_id)
    if not isinstance(job, Job):
        return f"no job {job_id}; nothing killed"
    how = "ganga kill --dependents skip|keep"
    done = workflow.kill(session, job, True, None, how)
    return f"job {job_id} killed" if done else f"job {job_id}: nothing to kill"


def resubmit_subjobs(session: Session, job_id: int, fqids: tuple[str, ...], what: str) -> str:
    """Resubmit the subjobs ``fqids`` of job ``job_id`` (a failure group, ``what``) that
    are still failed or killed; those resubmitted since are left as they are."""
    job = session.registry().get(job_id)
    if not isinstance(job, Job):
        return f"no job {job_id}; nothing resubmitted"
    found = [job.find_subjob(int(f.rpartition(".")[2])) for f in fqids] if job.is_master else [job]
    chosen = [sj for sj in found if sj is not None and sj.current_status() in _FAILED]
    if chosen:
        # One resubmission of the group, handed to the backend at once (a master's own
        # resubmit() takes every failed subjob; this takes those of the group only).
        run_again(session, job, chosen, True, "resubmit")
        session.poke_monitor()
    line = f"resubmitted {len(chosen)} of {len(fqids)} subjobs of job {job_id} ({what})"
    if len(chosen) < len(fqids):
        line += f"; {len(fqids) - len(chosen)} no longer failed"
    return line
