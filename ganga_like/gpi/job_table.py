"""Plain-text tables of jobs (the shell adds colour on top of the same rows)."""

from __future__ import annotations

from collections.abc import Iterable

from ganga_like.gpi.table_text import (
    CELL_WIDTH,
    WAITS_COLUMN,
    cell,
    header,
    render_table,
    shorten,
)
from ganga_like.model.base import GangaObject
from ganga_like.model.job import Job
from ganga_like.model.parts import job_parts
from ganga_like.model.status import Status
from ganga_like.model.template import TEMPLATE_STATUS, JobTemplate

__all__ = ["CELL_WIDTH", "COLUMNS", "cell", "header", "job_row", "shorten", "table", "waits_cell"]

# The parts tagged ``column`` in Job's schema follow the job's own columns.
COLUMNS = ("fqid", "status", "name", "subjobs", *job_parts().columns)

_SHORT = {
    Status.COMPLETED: "done",
    Status.FAILED: "fail",
    Status.RUNNING: "run",
    Status.SUBMITTED: "sub",
    Status.KILLED: "kill",
    Status.NEW: "new",
    Status.SUBMITTING: "subm",
    Status.COMPLETING: "cmpl",
    Status.COMPLETED_FROZEN: "cfrz",
    Status.FAILED_FROZEN: "ffrz",
    Status.WAITING: "wait",
    Status.SKIPPED: "skip",
}


def _component_name(job: Job | JobTemplate, name: str) -> str:
    # The class of a referenced object is known without loading its record.
    value = job.stored().get(name)
    if value is None:
        return ""
    cls = type(value)
    return cls.__name__ if issubclass(cls, GangaObject) else f"broken:{cls.__name__}"


def job_row(job: object) -> dict[str, str]:
    """One table row; never loads the subjobs (counts come from the master's counter)."""
    if isinstance(job, JobTemplate):
        return {
            "fqid": job.fqid,
            "status": TEMPLATE_STATUS,
            "name": job.name,
            "subjobs": "",
            **{name: _component_name(job, name) for name in job_parts().columns},
            WAITS_COLUMN: "",
        }
    if not isinstance(job, Job):
        cls = type(job)
        return {
            "fqid": "?",
            "status": "broken",
            "name": f"{cls.__module__}.{cls.__name__}",
            "subjobs": "",
            **dict.fromkeys(job_parts().columns, ""),
            WAITS_COLUMN: "",
        }
    counts = job.counts()
    sub = ""
    if counts:
        total = sum(counts.values())
        detail = " ".join(
            f"{_SHORT[s]}:{n}" for s, n in sorted(counts.items(), key=lambda kv: kv[0].place)
        )
        sub = f"{total} ({detail})"
    return {
        "fqid": job.fqid,
        "status": job.current_status().label,
        "name": job.name,
        "subjobs": sub,
        **{name: _component_name(job, name) for name in job_parts().columns},
        WAITS_COLUMN: waits_cell(job),
    }


def waits_cell(job: Job) -> str:
    """What a job waits for, as its row shows it: ``waits for 12 (completed)`` while it
    waits, the root failure once skipped, ``12 (completed)`` otherwise; empty for a job
    that waits for nothing. From the job's own fields: no other job is read."""
    if not job.after:
        return ""
    allowed = f", allow_failed={job.allow_failed}" if job.allow_failed else ""
    what = f"{', '.join(job.after)} ({job.when}{allowed})"
    status = job.current_status()
    if status is Status.WAITING:
        return f"waits for {what}"
    if status is Status.SKIPPED and job._skipped_by is not None:
        return job._skipped_by[1]
    return what


def table(jobs: Iterable[object], title: str = "jobs") -> str:
    return render_table([job_row(j) for j in jobs], COLUMNS, title)
