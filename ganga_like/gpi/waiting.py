"""Waiting for a job: ``j.wait()`` and what shows its progress meanwhile."""

from __future__ import annotations

import time
from typing import Any

from ganga_like.errors import JobError
from ganga_like.gpi.progress import Progress
from ganga_like.gpi.progress import progress as show_progress
from ganga_like.gpi.proxy import current_session
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status

__all__ = ["wait_for_job"]


def wait_for_job(
    job: JobImpl, timeout: float | None, until: str | None, progress: bool | None
) -> str:
    target = Status.parse(until) if until else None
    try:
        return _wait(job, target, timeout, progress)
    except KeyboardInterrupt:
        # Ctrl-C stops the waiting, never the job: say so in the one line shown.
        raise KeyboardInterrupt(
            f"wait() for job {job.fqid} stopped; the job goes on ({job.current_status()})"
        ) from None


def _wait(job: JobImpl, target: Status | None, timeout: float | None, progress: bool | None) -> str:
    session = current_session()
    deadline = None if timeout is None else time.monotonic() + timeout
    with show_progress(f"job {job.fqid}", show=progress) as bar:
        while True:
            seen = session.monitor.commits
            # Waiting is an action, like submit: inside a shell cell it commits what the
            # cell changed so far, so that the monitor's new commits become visible.
            session.sync()
            status = job.current_status()
            done = status.reached(target) or status.final if target else status.final
            if done and status is Status.COMPLETED and job.postprocessing_pending():
                done = target is not None and not target.final  # merging, checking: wait
            _report_progress(bar, job, status)
            if done:
                return status.label
            if status is Status.NEW and target is not Status.NEW:
                # Never submitted, or its submission was rolled back, or (a master) the
                # subjobs it did submit have finished and the others never were: nothing
                # will change until submit().
                if job.is_master:
                    never = job.counts().get(Status.NEW, 0)
                    raise JobError(
                        f"job {job.fqid} is new: {never} of its subjobs were never "
                        "submitted (the others have finished); submit() runs "
                        "them; nothing to wait for"
                    )
                raise JobError(f"job {job.fqid} is new: submit it first; nothing to wait for")
            if status is Status.SUBMITTING:
                _check_left_submitting(session, job)
            if deadline is not None and time.monotonic() >= deadline:
                raise JobError(f"job {job.fqid}: still {status} after waiting {timeout} s")
            session.poke_monitor()
            # Woken by this process's monitor as soon as it commits; the timeout covers
            # commits made by another process (the lease holder).
            session.monitor.wait_for_commit(seen, 0.05)


def _check_left_submitting(session: Any, job: JobImpl) -> None:
    """A job this session said stays submitting until ganga next starts: nothing changes
    before then, so waiting says that line again at once."""
    for fqid in (job.fqid, job.master.fqid if job.master is not None else None):
        line = session.left_submitting.get(fqid)
        if line is not None:
            raise JobError(f"{line}; nothing to wait for")


def _report_progress(bar: Progress, job: JobImpl, status: Status) -> None:
    counts = job.counts()
    if not counts:
        bar.update(0, None, str(status), {status.label: 1})
        return
    total = sum(counts.values())
    finished = sum(n for s, n in counts.items() if s.final)
    ordered = sorted(counts.items(), key=lambda kv: kv[0].place)
    detail = ", ".join(f"{n} {s}" for s, n in ordered)
    bar.update(finished, total, detail, {s.label: n for s, n in ordered})
