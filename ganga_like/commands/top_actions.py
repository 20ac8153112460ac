"""What ``ganga top`` does to jobs once the user confirmed: each returns the one line the
screen shows, or raises the error whose first line it shows instead (run on the reading
thread, :mod:`ganga_like.commands.top_source`)."""

from __future__ import annotations

from ganga_like.gpi import workflow
from ganga_like.model.job import Job
from ganga_like.runtime.failure_groups import GROWS, kill_job_group, resubmit_job_group
from ganga_like.runtime.session import Session
from ganga_like.runtime.stats.data import FailureGroup

__all__ = ["grown", "kill_group", "kill_job", "resubmit_group"]


def kill_job(session: Session, job_id: int) -> str:
    """Kill a job (a master: its active subjobs), as ``ganga kill ID`` does."""
    job = session.registry().get(job_id)
    if not isinstance(job, Job):
        return f"no job {job_id}; nothing killed"
    how = "ganga kill --dependents skip|keep"
    done = workflow.kill(session, job, True, None, how)
    return f"job {job_id} killed" if done else f"job {job_id}: nothing to kill"


def grown(group: FailureGroup) -> str:
    """What the group's resubmission gives more of, as words (empty: nothing)."""
    more = GROWS.get(group.cause)
    return f" with twice the {more}" if more else ""


def resubmit_group(session: Session, job_id: int, group: FailureGroup) -> str:
    """Resubmit exactly the (sub)jobs of failure group ``group`` of job ``job_id``, as
    ``j.resubmit(group=N)`` does: with more of what its cause ran out of; a group that
    changed since its stats were read is refused (stale), nothing done."""
    job = session.registry().get(job_id)
    if not isinstance(job, Job):
        return f"no job {job_id}; nothing resubmitted"
    resubmit_job_group(session, job, group, None, {})
    session.poke_monitor()
    return (
        f"resubmitted the {group.count} subjob(s) of failure group {group.number} of job "
        f"{job_id} ({group.reason}){grown(group)}"
    )


def kill_group(session: Session, job_id: int, group: FailureGroup) -> str:
    """Kill those (sub)jobs of failure group ``group`` of job ``job_id`` that run again
    (resubmitted since), as ``j.kill(group=g)`` does; none running is refused."""
    job = session.registry().get(job_id)
    if not isinstance(job, Job):
        return f"no job {job_id}; nothing killed"
    kill_job_group(session, job, group)
    session.poke_monitor()
    return (
        f"killed those of the {group.count} subjob(s) of failure group {group.number} of "
        f"job {job_id} ({group.reason}) that ran again"
    )
