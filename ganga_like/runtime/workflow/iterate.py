"""Iterate: a job repeated from the previous iteration's outputs until a user's function
says it converged, or ``max_iterations``; the lease holder's monitor drives it.

The Iterate is its first job: it shows ``running`` until the iteration ends, then
``completed`` (converged) or ``failed`` (an iteration failed, ``until`` raised, or
``max_iterations`` ran out), with the cause in its event log. Iteration ``k + 1`` is a
new job, a copy of iteration ``k`` whose input files are those of ``k`` plus the files
``k`` wrote in its output directory (replacing an input of the same name).

When an iteration ends, the transaction that records it adds an ``iterate`` entry to the
due table (``model.callbacks``). Acting on it: ``until`` is called with a view of the
ended iteration (outside any transaction: it may read files); then one transaction either
ends the Iterate, or creates the next iteration's job and marks the entry ``starting``
with its id; the job is submitted as ``submit()`` does (its own intent and outcome make
that step safe); a last transaction drops the entry. A monitor killed after the job was
created finds the entry ``starting``: it submits that job if it is still new, and never
creates another. So no iteration starts twice, whoever drives and however often killed.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ganga_like.errors import GangaError
from ganga_like.model import plugin_registry
from ganga_like.model.callbacks import DUE, due_table, end_iterate
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.model.stop_points import stop_point
from ganga_like.repository.registry import Registry
from ganga_like.runtime.session import Session
from ganga_like.runtime.submission import actions
from ganga_like.runtime.workflow import engine
from ganga_like.runtime.workflow.user_functions import load_function, view_of

__all__ = ["STARTING", "end", "step"]

log = logging.getLogger("ganga_like.workflow")

STARTING = "starting"
Key = tuple[int, int]


def end(registry: Registry, first: Job, shown: Status, cause: str) -> None:
    """The Iterate of ``first`` ends ``shown`` (completed or failed), saying why; what
    waits for it is decided in this transaction."""
    end_iterate(first, shown is Status.FAILED, f"monitor: {cause}")
    registry.reindex(first)
    engine.upstream_changed(registry, [first], "monitor")


def _ended(job: Job, iteration: int) -> str | None:
    """Why the Iterate ends with iteration ``iteration`` (job ``job``) not completed."""
    status = Status.parse(job.status)
    if status is Status.COMPLETED:
        return None
    failed = status is Status.FAILED and job.exit_code is not None
    code = f" (exit {job.exit_code})" if failed else ""  # a kill's signal says nothing more
    return f"iteration {iteration} (job {job.id}) {status.label}{code}"


def _decide(session: Session, job: Job, until: str, iteration: int) -> tuple[Status, str] | None:
    """How the Iterate ends after iteration ``iteration`` completed, or None: go on."""
    try:
        converged = load_function(until)(view_of(job, session.repo.workspace))
    except (Exception, SystemExit) as exc:  # the user's function: never the monitor's end
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return Status.FAILED, f"until {until} raised {type(exc).__name__}: {text}".rstrip(": ")
    if converged:
        return Status.COMPLETED, f"converged at iteration {iteration} (job {job.id})"
    return None


def _next_job(session: Session, job: Job, first: Job, iteration: int) -> Job:
    """Iteration ``iteration + 1``: a copy of ``job`` fed on its outputs, stored (in
    the caller's transaction)."""
    clone = job._copy()
    assert isinstance(clone, Job)
    clone._drop("after")  # what the first waited for is done
    output = view_of(job, session.repo.workspace).outputdir
    produced = [p for p in sorted(output.glob("*")) if p.is_file() and _is_output(p)]
    local_file = plugin_registry.find("LocalFile", "files")
    names = {p.name for p in produced}
    kept = [f for f in job.inputfiles if Path(str(getattr(f, "namePattern", ""))).name not in names]
    clone._assign("inputfiles", [*kept, *(local_file(namePattern=str(p)) for p in produced)])
    clone._iteration_of = (first.id, iteration + 1)
    session.registry().add(clone)
    clone.log_event(
        f"monitor: iteration {iteration + 1} of {first.id}: "
        f"iteration {iteration} (job {job.id}) did not converge"
    )
    return clone


def _is_output(path: Path) -> bool:
    return path.name not in ("stdout", "stderr") and not path.name.startswith("__")


Plan = tuple[str, Status, str]  # ("drop" | "end" | "next", how it ends, why)


def _plan(session: Session, key: Key) -> Plan:
    """What the ``iterate`` entry ``key`` leads to; ``until`` is called here, outside
    any transaction (called again if the monitor dies before the plan is recorded: it
    only looks)."""
    registry = session.registry()
    job = registry.get(key[0])
    where = job._iteration_of if isinstance(job, Job) else None
    first = registry.get(where[0]) if where is not None else None
    state = first._iterate if isinstance(first, Job) else None
    if job is None or where is None or state is None or not state[3]:
        return ("drop", Status.NEW, "")  # the job, or its Iterate, is gone or has ended
    assert isinstance(job, Job)
    until, most, ids, _going = state
    if where[1] != len(ids):
        return ("drop", Status.NEW, "")  # not the latest iteration (one resubmitted)
    failed = _ended(job, where[1])
    if failed is not None:
        return ("end", Status.FAILED, failed)
    decided = _decide(session, job, until, where[1])
    if decided is not None:
        return ("end", *decided)
    if where[1] >= most:
        return ("end", Status.FAILED, f"not converged after {most} iterations")
    return ("next", Status.NEW, "")


def step(session: Session, key: Key) -> int:
    """Act on the ``iterate`` entry ``key``; how many were acted on (0 or 1)."""
    found = due_table(session.repo.connection().root())
    value = found.get(key) if found is not None else None
    if value is None:
        return 0
    if value[3] == STARTING:
        _start(session, key, value[4])
        return 1
    stop_point("iteration-due")
    plan = _plan(session, key)
    started: list[int] = []

    def record() -> None:
        started.clear()
        registry = session.registry()
        table = due_table(registry.root)
        current = table.get(key) if table is not None else None
        if current is None or current[3] != DUE:
            return  # acted on meanwhile
        assert table is not None
        job = registry.get(key[0])
        if plan[0] == "next" and isinstance(job, Job) and job._iteration_of is not None:
            first = registry.get(job._iteration_of[0])
            assert isinstance(first, Job) and first._iterate is not None
            clone = _next_job(session, job, first, job._iteration_of[1])
            until, most, ids, going = first._iterate
            first._iterate = (until, most, (*ids, clone.id), going)
            first.log_event(
                f"monitor: iterate: iteration {len(ids)} (job {job.id}) did not converge; "
                f"iteration {len(ids) + 1} is job {clone.id}"
            )
            table[key] = (*current[:3], STARTING, clone.id)
            started.append(clone.id)
            return
        if plan[0] == "end" and isinstance(job, Job) and job._iteration_of is not None:
            first = registry.get(job._iteration_of[0])
            assert isinstance(first, Job)
            end(registry, first, plan[1], f"iterate: {plan[2]}")
        del table[key]

    session.repo.in_transaction(record, what=f"iterating after job {key[0]}")
    if started:
        stop_point("iteration-created")
        _start(session, key, started[0])
    return 1


def _start(session: Session, key: Key, job_id: int) -> None:
    """Submit iteration job ``job_id`` unless that was done; then drop the entry."""
    job = session.registry().get(job_id)
    status = Status.parse(job.status) if isinstance(job, Job) else None
    if status is Status.SUBMITTING:
        return  # the submission's recovery decides; the entry waits for it
    problem = ""
    if status is Status.NEW:
        assert isinstance(job, Job)
        where = job._iteration_of or (job.id, 0)
        handed = f"monitor: submit (iteration {where[1]} of {where[0]})"
        try:
            actions.submit(session, job, keep_going=False, handed_over=handed)
        except GangaError as exc:
            problem = f"iteration job {job_id} could not be submitted: {exc}"
            log.warning("%s", problem)
    stop_point("iteration-submitted")

    def finish() -> None:
        registry = session.registry()
        table = due_table(registry.root)
        if table is not None:
            table.pop(key, None)
        stored = registry.get(job_id)
        where = stored._iteration_of if isinstance(stored, Job) else None
        first = registry.get(where[0]) if where is not None else None
        if problem and isinstance(first, Job) and first._iterate and first._iterate[3]:
            end(registry, first, Status.FAILED, f"iterate: {problem}")

    session.repo.in_transaction(finish, what=f"recording the start of iteration job {job_id}")
