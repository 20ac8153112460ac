"""``Iterate(job, until="module:name", max_iterations=N)``: a job repeated from the
previous iteration's outputs until ``until`` says it converged (the monitor drives it:
``runtime.workflow.iterate``). The Iterate is ``job`` itself, returned: submit it, wait
for it, list it, make others wait for it (``after=fit``) as any job; ``fit.iterations``
are the iterations' jobs."""

from __future__ import annotations

from typing import Any

from ganga_like.errors import JobError, SchemaError
from ganga_like.gpi.arguments import given
from ganga_like.gpi.job import Job, job_removed
from ganga_like.gpi.proxy import current_session, unwrap
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status
from ganga_like.runtime.workflow.callbacks import make_due_table
from ganga_like.runtime.workflow.user_functions import check_function_path

__all__ = ["Iterate"]


def _checked_job(job: Any) -> JobImpl:
    impl = unwrap(job) if isinstance(job, Job) else None
    if not isinstance(impl, JobImpl) or job_removed(impl):
        raise SchemaError(f"Iterate.job: expected a new job (a Job), not {given(job)}")
    if impl.master is not None:
        raise JobError(f"Iterate.job: job {impl.fqid} is a subjob; iterate a whole job")
    if impl.current_status() is not Status.NEW:
        raise JobError(
            f"Iterate.job: job {impl.fqid} is {impl.current_status()}; a new job is iterated "
            "(make one: Job(j))"
        )
    if impl.splitter is not None:
        raise JobError(f"Iterate.job: job {impl.fqid} has a splitter; a job iterated is not split")
    if impl._iteration_of is not None:
        raise JobError(f"Iterate.job: job {impl.fqid} is iterated already")
    return impl


def Iterate(job: Any, until: Any, max_iterations: Any = 10) -> Job:
    """Repeat ``job`` until the function ``until`` (``"module:name"``, importable by the
    monitor: called with a view of each completed iteration, ``iteration.outputdir``,
    ``iteration.files("*.txt")``, ``iteration.iteration``) returns true, at most
    ``max_iterations`` times; each next iteration is a copy of the previous one with
    its output files added to its input files. Returns ``job``, now the Iterate: it shows
    ``running`` until the iteration ends ``completed`` (converged) or ``failed``."""
    impl = _checked_job(job)
    path = check_function_path("Iterate.until", until)
    whole = isinstance(max_iterations, int) and not isinstance(max_iterations, bool)
    if not whole or max_iterations < 1:
        raise SchemaError(
            f"Iterate.max_iterations: expected an int, 1 or more, not {given(max_iterations)}"
        )
    session = current_session()

    def store() -> None:
        impl._iterate = (path, max_iterations, (impl.id,), True)
        impl._iteration_of = (impl.id, 1)
        make_due_table(session.registry().root)  # then an iteration's end only adds to it

    session.repo.in_transaction(store, what=f"making job {impl.fqid} an Iterate")
    return job  # type: ignore[no-any-return]
