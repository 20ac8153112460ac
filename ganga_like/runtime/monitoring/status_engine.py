"""The status engine: backend observations in, job transitions out.

Pure: no threads, no I/O. The monitor feeds it the reports of one poll cycle; tests feed it
reports directly. Applying the same report twice changes nothing, so a cycle whose commit
failed can simply be polled and applied again.
"""

from __future__ import annotations

from dataclasses import dataclass

from ganga_like.model.interfaces import StatusReport
from ganga_like.model.job import Job
from ganga_like.model.status import Status, path_to

__all__ = ["Applied", "apply_report", "describe"]


@dataclass(frozen=True)
class Applied:
    fqid: str
    path: tuple[Status, ...]
    # True when the report only brought what the ended run used (no status changed).
    used_only: bool = False

    @property
    def final(self) -> bool:
        return bool(self.path) and self.path[-1].final


def describe(backend: str, report: StatusReport) -> str:
    """The cause recorded in the event log for a monitored transition."""
    parts = [f"{backend}: {report.status}"]
    if report.exit_code is not None and "exit code" not in report.reason:
        parts.append(f"exit code {report.exit_code}")
    if report.reason:
        parts.append(report.reason)
    return ", ".join(parts)


def apply_report(job: Job, report: StatusReport, backend: str) -> Applied:
    """Move ``job`` along the path to the reported status, filling in missed states."""
    current = Status.parse(job.status)
    path = path_to(current, report.status, started=report.started)
    # What the run used, accounted after its end was (Slurm's steps): kept once.
    ended_as_said = not path and current is report.status and current.final
    if ended_as_said and report.usage is not None and job.resources_used() is None:
        _record_use(job, report)
        return Applied(job.fqid, (), used_only=True)
    if report.usage_only:
        return Applied(job.fqid, ())  # it moved on since (a retry): its old end is no news
    if path:
        cause = describe(backend, report)
        for step in path:
            when = report.time
            if step is Status.RUNNING and report.started_at is not None:
                when = min(report.started_at, report.time)
            # A state filled in on the way is only that; the report's reason (an exit
            # code, an error) is the reported state's.
            job.change_status(step, cause if step is path[-1] else f"{backend}: {step}", when=when)
        if report.exit_code is not None:
            job.exit_code = report.exit_code
        if report.usage is not None and report.status.final:
            _record_use(job, report)
    return Applied(job.fqid, tuple(path))


def _record_use(job: Job, report: StatusReport) -> None:
    assert report.usage is not None
    start = report.started_at
    if report.wall is not None:
        start = report.time - report.wall
    elif start is None:
        start = job.time.get(Status.RUNNING.label)
    job.record_use(report.usage, start, report.time)
