"""``j.kill()`` and ``j.resubmit()``: of the job (a master: its subjobs), or of exactly the
subjobs of one failure group of ``j.stats()``, resubmitted with more memory or walltime
(runtime.failure_groups). Defined here and set on the GPI Job (``Job.kill``,
``Job.resubmit``)."""

from __future__ import annotations

from typing import Any

from ganga_like.gpi import callbacks, workflow
from ganga_like.gpi.arguments import keyword_options
from ganga_like.gpi.proxy import current_session
from ganga_like.gpi.slices import resubmit_backend
from ganga_like.model.status import Status
from ganga_like.runtime import failure_groups
from ganga_like.runtime.submission import actions

__all__ = ["kill", "resubmit"]


@keyword_options
def kill(
    self: Any, *, keep_going: bool = True, dependents: str | None = None, group: Any = None
) -> bool:
    """Kill the job (a master: all its active subjobs).

    ``dependents``: what becomes of the jobs waiting for it, "skip" or "keep"
    (waiting for a resubmission); needed when some wait (the shell asks).
    ``group``: the failure group of ``stats()`` that was resubmitted, itself (never its
    number: numbers move once a group is resubmitted): only those of its subjobs that
    run again since are killed (``g = j.stats().failures[0]; j.resubmit(group=g);
    j.kill(group=g)``)."""
    job = self._live("kill()")
    session = current_session()
    if group is not None:
        return failure_groups.kill_job_group(session, job, group)
    return workflow.kill(session, job, keep_going, dependents)


@keyword_options
def resubmit(
    self: Any,
    *,
    keep_going: bool = True,
    backend: Any = None,
    group: Any = None,
    memory: Any = None,
    walltime: Any = None,
) -> bool:
    """Resubmit a failed/killed job; for a master, its failed/killed subjobs.

    ``backend``: a changed copy of the job's backend, e.g. ``Slurm(resources=
    Resources(memory="4G"))``; of the same type, changing only what may change at
    resubmission (see each attribute's help). Each resubmitted (sub)job keeps it.

    ``group``: one failure group of ``stats()``, by its number (from 1, as ``ganga stats``
    shows it) or itself: exactly its subjobs are resubmitted, after out_of_memory with
    twice the memory they asked for, after timeout with twice the walltime, or with
    ``memory=`` / ``walltime=`` as given (docs/stats.md)."""
    job = callbacks.not_an_iterate(self._live("resubmit()"))
    session = current_session()
    if group is not None or memory is not None or walltime is not None:
        sizes = {"memory": memory, "walltime": walltime}
        return failure_groups.resubmit_job_group(session, job, group, backend, sizes)
    if job.master is None and job.current_status() is Status.SKIPPED:
        return workflow.resubmit_skipped(session, job)  # it waits again
    return actions.resubmit(session, job, keep_going, resubmit_backend(backend))
