"""``j.result()``: what a job's function returned, read back from its output directory.

A (sub)job has a result once it completed (frozen there or not); a master's result is the
list of its subjobs' results in subjob order, frozen subjobs left out, once every other
subjob completed. Anything else is one line saying
which (sub)jobs have none yet and why.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ganga_like.errors import JobError
from ganga_like.model.interfaces import IApplication, JobPaths
from ganga_like.model.job import Job
from ganga_like.model.status import Status

__all__ = ["ResultError", "result_of"]

# A job that ran to completion, frozen there or not, has its result.
_DONE = (Status.COMPLETED, Status.COMPLETED_FROZEN)
# Subjobs named in the message when several have no result.
_NAMED = 3


class ResultError(JobError):
    """A job has no result to give: not completed yet, failed, or not a function's job."""


def result_of(job: Job, paths: Callable[[Job], JobPaths]) -> Any:
    application = job.application
    if not isinstance(application, IApplication):
        # A broken object (its plugin is missing) has none of the interface.
        raise ResultError(f"job {job.fqid}: its application gives no result()")
    if not application.has_result:
        _read(job, paths)  # the application's own line: it has no result to give
    if not job.is_master:
        if job.current_status() not in _DONE:
            raise ResultError(f"job {_why(job, paths)}: it has no result{_yet(job)}")
        return _read(job, paths)
    # Frozen subjobs are left out, as the master's status and its mergers leave them out:
    # a piece that failed and was resplit gives its place to the pieces.
    subjobs = [sj for sj in job.iter_subjobs() if not sj.current_status().frozen]
    if not subjobs:
        raise ResultError(f"job {job.fqid}: every subjob is frozen, so it has no result")
    missing = [sj for sj in subjobs if sj.current_status() is not Status.COMPLETED]
    if missing:
        named = ", ".join(_why(sj, paths) for sj in missing[:_NAMED])
        more = f" and {len(missing) - _NAMED} more" if len(missing) > _NAMED else ""
        raise ResultError(
            f"job {job.fqid}: {len(missing)} of {len(subjobs)} subjobs have no result"
            f"{_yet(job)}: {named}{more}"
        )
    return [_read(sj, paths) for sj in subjobs]


def _yet(job: Job) -> str:
    return "" if job.current_status().final else " yet"


def _read(job: Job, paths: Callable[[Job], JobPaths]) -> Any:
    try:
        return job.application.read_result(job, paths(job))
    except ResultError:
        raise
    except JobError as exc:
        raise ResultError(str(exc)) from None


def _why(job: Job, paths: Callable[[Job], JobPaths]) -> str:
    """``3.1 failed (exit code 1: ZeroDivisionError: ...)``, ``3.2 is running``."""
    status = job.current_status()
    if status is not Status.FAILED:
        return f"{job.fqid} is {status.label}"
    detail = [f"exit code {job.exit_code}"] if job.exit_code is not None else []
    last = _last_line(paths(job).output / "stderr")
    if last:
        detail.append(last)
    return f"{job.fqid} failed" + (f" ({': '.join(detail)})" if detail else "")


def _last_line(path: Path) -> str:
    """The last line of a (sub)job's stderr: where a failed call says why."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - 4096))
            tail = handle.read().decode(errors="replace")
    except OSError:
        return ""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return last if len(last) <= 200 else last[:199] + "…"
