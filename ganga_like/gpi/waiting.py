"""Waiting for a job: ``j.wait()`` and what shows its progress meanwhile.

The waiting itself is ``runtime.waiting``'s, which ``wait()`` and ``as_completed()``
(``gpi.completion``) share: it reads the repository and sleeps until it changes.
"""

from __future__ import annotations

from ganga_like.errors import JobError
from ganga_like.gpi.progress import Progress
from ganga_like.gpi.progress import progress as show_progress
from ganga_like.gpi.proxy import current_session
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status
from ganga_like.runtime import waiting

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
    with show_progress(f"job {job.fqid}", show=progress) as bar:

        def reached() -> str | None:
            status = job.current_status()
            _report_progress(bar, job, status)
            if target is not None and not target.final:
                done = status.reached(target) or status.final  # merging, checking: done
            else:
                done = waiting.finished(job)
            if done:
                return status.label
            problem = waiting.nothing_to_wait_for(session, job, status)
            if problem is not None:
                raise JobError(problem)
            return None

        def timed_out() -> str:
            return f"job {job.fqid}: still {job.current_status()} after waiting {timeout} s"

        return waiting.watch(session, reached, timeout, timed_out)


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
