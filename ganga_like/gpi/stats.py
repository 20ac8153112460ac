"""``job_stats([...])``: the stats of a job, a slice or a list of jobs, as ``j.stats()``
and ``jobs.select(...).stats()`` give them (``ganga_like.runtime.stats``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ganga_like.errors import JobError
from ganga_like.gpi.arguments import given
from ganga_like.gpi.job import Job, job_removed, removed_message
from ganga_like.gpi.proxy import current_session, unwrap
from ganga_like.gpi.slices import JobSlice
from ganga_like.model.job import Job as JobImpl
from ganga_like.runtime.stats import JobStats
from ganga_like.runtime.stats import job_stats as compute

__all__ = ["job_stats"]

# Jobs a title names before "…".
_NAMED = 5


def job_stats(jobs: Any) -> JobStats:
    """The stats of a job, a slice or a list of jobs: counts by status now and over time,
    queue-wait and run-time spreads with the slowest runs, the time left, failures grouped
    by cause and the resources used (docs/stats.md). A master stands for its subjobs."""
    if isinstance(jobs, Job | JobSlice):
        return jobs.stats()
    if isinstance(jobs, str | bytes) or not isinstance(jobs, Iterable):
        raise JobError(f"job_stats(): expected a job, a slice or a list of jobs, not {given(jobs)}")
    impls: list[JobImpl] = []
    for item in jobs:
        impl = unwrap(item) if isinstance(item, Job) else None
        if not isinstance(impl, JobImpl):
            raise JobError(f"job_stats(): expected a list of jobs, found {given(item)} in it")
        impls.append(impl)
    current_session().refresh()
    for impl in impls:
        if job_removed(impl):
            raise JobError(removed_message(impl, "stats()"))
    named = ", ".join(impl.fqid for impl in impls[:_NAMED])
    more = ", …" if len(impls) > _NAMED else ""
    return compute(impls, f"jobs {named}{more}" if impls else "no jobs")
