"""Acting on the waiting jobs a transaction decided on: the lease holder's pass.

After each cycle the monitor holding the lease (a session's, or the daemon's) runs
:func:`run_pending`. For a job its condition made ``DECIDED`` it records, in one
transaction, that it hands the job over (the entry becomes ``HANDING``), then submits it
as ``submit()`` does, the job going from ``waiting`` to ``submitting`` (the submission's
own intent and outcome make that step safe against a crash), then drops the entry. A
driver that dies anywhere in between leaves the entry: the next one finds the job still
``waiting`` or ``new`` (its submission never began, or the submission's recovery rolled
it back: submitted now), ``submitting`` (the submission's recovery at the next start
decides; the entry waits for it), or beyond (done: the entry goes).
So each waiting job is submitted once, whoever drives and however often it is killed.

A ``CHECK`` entry (a job that just started waiting, or was re-armed) is looked at in a
transaction of its own: an upstream change committed while the job started waiting is
seen here, and the job goes on, is skipped, or waits.
"""

from __future__ import annotations

import logging
import time

import transaction

from ganga_like.errors import GangaError, JobError
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.model.stop_points import stop_point
from ganga_like.repository.registry import Registry
from ganga_like.runtime.session import Session, add_monitor_pass
from ganga_like.runtime.submission import actions
from ganga_like.runtime.workflow import callbacks as _callbacks  # noqa: F401 (its pass too)
from ganga_like.runtime.workflow import engine, index, outputs, throttle_pass
from ganga_like.runtime.workflow.engine import settle
from ganga_like.runtime.workflow.stream_driver import drive_stream

__all__ = ["run_pending"]

log = logging.getLogger("ganga_like.workflow")

_SUBMIT = "submit"
_DONE = "done"


def run_pending(session: Session) -> int:
    """Act on every pending entry; how many were acted on."""
    repo = session.repo
    # This thread's connection with a manager of its own (not the thread-local default):
    # the session's close, from another thread, can then close it too.
    repo.connection(transaction.TransactionManager())
    repo.abort()  # what was committed since this thread last looked
    done = _sweep(session)
    table = index.pending(repo.connection().root())
    if not table:
        return done
    for job_id, state in list(table.items()):
        try:
            if state == index.STREAM:
                done += drive_stream(session, job_id)
                continue
            done += _drive(session, job_id)
        except GangaError as exc:
            log.warning("job %s (waiting for others): %s", job_id, exc)
    return done


# How often the lease holder looks again at every waiting job (see _sweep), in seconds.
SWEEP_SECONDS = 30.0
_swept: dict[int, float] = {}  # id(session) -> when it last swept


def _sweep(session: Session) -> int:
    """Every ``SWEEP_SECONDS``, decide again on every waiting job (found through the status
    index: the cost follows the waiting jobs, not the repository).

    A safety net: two sessions can commit at once a change of an upstream and the start
    of a job waiting for it, each transaction reading the other's tables as they were
    before; the decisions are taken in those transactions and by the check that follows a
    job's start, but this pass closes whatever window is left, within its period."""
    now = time.monotonic()
    if now - _swept.get(id(session), -SWEEP_SECONDS) < SWEEP_SECONDS:
        return 0
    _swept[id(session)] = now
    decided: list[int] = []

    def sweep() -> None:
        registry = session.registry()
        decided[:] = [settle(registry, list(registry.ids_with_status("waiting")), "monitor")]

    session.repo.in_transaction(sweep, what="looking again at the waiting jobs")
    return decided[0] if decided else 0


def _drive(session: Session, job_id: int) -> int:
    step: list[str] = []
    found: list[Job] = []

    def start() -> None:
        step.clear()
        found.clear()
        registry = session.registry()
        table = index.pending(registry.root)
        state = table.get(job_id) if table is not None else None
        if state is None:
            return  # acted on meanwhile (another session held the lease)
        assert table is not None
        job = registry.get(job_id)
        if not isinstance(job, Job):
            del table[job_id]  # removed
            step.append(_DONE)
            return
        status = Status.parse(job.status)
        if state == index.CHECK:
            del table[job_id]
            if status is Status.WAITING:
                settle(registry, [job_id], "monitor")  # may decide it at once
            step.append(_DONE)
            return
        if status is Status.WAITING:
            if not _found_files(registry, str(session.repo.workspace), job):
                del table[job_id]  # skipped: its dataset found no file
                step.append(_DONE)
                return
            table[job_id] = index.HANDING
        elif not (status is Status.NEW and state == index.HANDING):
            if status is not Status.SUBMITTING:
                del table[job_id]  # submitted (or acted on by the user) before
                step.append(_DONE)
            return  # submitting: the submission's recovery decides, the entry waits
        found.append(job)
        step.append(_SUBMIT)

    session.repo.in_transaction(start, what=f"handing waiting job {job_id} to submission")
    if not step:
        return 0
    if step[0] == _DONE:
        again = index.pending(session.repo.connection().root())
        if again is not None and again.get(job_id) == index.DECIDED:
            return 1 + _drive(session, job_id)  # a check that found its condition holds
        if again is not None and again.get(job_id) == index.STREAM:
            return 1 + drive_stream(session, job_id)  # a check that found pieces done
        return 1
    stop_point("waiting-job-handed")
    try:
        handed = f"monitor: submit ({', '.join(found[0].after)} {found[0].when})"
        actions.submit(session, found[0], keep_going=False, handed_over=handed)
    except GangaError as exc:
        # The job is new again with the reason in its log, as after any failed submit().
        log.warning("job %s: submitting it after what it waited for failed: %s", job_id, exc)

    stop_point("waiting-job-submitted")

    def finish() -> None:
        table = index.pending(session.registry().root)
        if table is not None:
            table.pop(job_id, None)

    session.repo.in_transaction(finish, what=f"recording the submission of waiting job {job_id}")
    return 1


def _found_files(registry: Registry, workspace: str, job: Job) -> bool:
    """Before waiting ``job`` is handed over to submission, in that transaction: its
    dataset's files found (``JobOutput``); False when there is none, and the job is then
    skipped, naming why (and what waits for it decided on)."""
    try:
        outputs.resolve(registry, workspace, job)
    except JobError:
        dataset = outputs.dataset_of(job)
        assert dataset is not None
        engine.skip(registry, job, (dataset.job, outputs.no_file_cause(dataset)), "monitor")
        return False
    return True


# Every session's monitor (the daemon's too) acts on the waiting jobs after its cycles,
# then hands over what the throttled workflows have room for.
add_monitor_pass("waiting jobs", run_pending)
add_monitor_pass("throttles", throttle_pass.run_throttles)
