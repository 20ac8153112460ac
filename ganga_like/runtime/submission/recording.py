"""Recording a submission's steps in retried transactions, and undoing a submission whose
outcome could not be recorded (see ``actions`` for the three steps)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ganga_like.errors import GangaError, JobError, RepositoryWriteError
from ganga_like.model.interfaces import SubmitOutcome
from ganga_like.model.job import Job
from ganga_like.runtime.workflow import engine as workflow

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = ["left_submitting", "record", "undo_submission"]


def record(
    session: Session,
    top: Job,
    action: Callable[[], None],
    what: str,
    fresh: Sequence[Job] = (),
    first: Callable[[], None] | None = None,
) -> None:
    """Run ``action`` in a retried transaction, then update the top-level job's index entry
    in the same transaction.

    ``fresh`` are objects not stored yet that ``action`` changes: an abort does not restore
    them (they are not in the database), so their state is saved here and put back before
    each attempt. ``first``: what the first attempt runs instead of ``action`` (it may
    reach a backend: it is never run again).
    """
    saved = [obj._state_copy() for obj in fresh]

    def recorded() -> None:
        for obj, state in zip(fresh, saved, strict=True):
            obj._put_back(state)
        action()
        _reindexed(session, top)

    def recorded_first() -> None:
        assert first is not None
        first()
        _reindexed(session, top)

    session.repo.in_transaction(
        recorded, what=what, first=recorded_first if first is not None else None
    )


def _reindexed(session: Session, top: Job) -> None:
    """The index entry of ``top`` brought up to date, and the jobs waiting for it decided
    on, in the transaction that records the action."""
    registry = session.repo.registry()
    registry.reindex(top)
    workflow.upstream_changed(registry, [top], "user")


def undo_submission(
    session: Session,
    job: Job,
    targets: Sequence[Job] | Callable[[], list[Job]],
    outcome: SubmitOutcome,
    error: RepositoryWriteError,
    roll_back: Callable[[], None],
    result: str,
    action: str = "submitted",
) -> JobError:
    """The outcome of a (re)submission could not be recorded (a full disk): what the
    backend received is cancelled and ``roll_back`` records the jobs as crash recovery
    would (``result`` says how), so that nothing runs unrecorded and this session shows
    what the repository holds.

    ``targets``: the jobs submitted, or what gives the ones the backend received.
    Returns the one-line error to raise.  Should the cancellation or the rollback fail
    too, the jobs stay ``submitting`` with their intent, which the next start recovers.
    """
    if callable(targets):
        handed = targets()  # what the backend received, made again
    else:
        skipped = set(outcome.not_attempted)
        handed = [t for t in targets if t.fqid not in outcome.failed and t.fqid not in skipped]
    try:
        problems = (
            job.backend.kill_bulk(session.submit_context(job.backend), handed) if handed else {}
        )
    except GangaError as exc:
        problems = {job.fqid: str(exc)}
    reason = f"job {job.fqid} could not be {action}: {error}"
    if problems:
        session.repo.abort()
        first = next(iter(problems.values()))
        return left_submitting(
            session,
            job,
            f"{reason}; what the backend received could not be cancelled "
            f"({first}): it stays submitting until ganga next starts, which "
            "recovers it",
        )
    try:
        record(session, job, roll_back, f"rolling back the submission of job {job.fqid}")
    except RepositoryWriteError:
        session.repo.abort()
        return left_submitting(
            session,
            job,
            f"{reason}; what the backend received was cancelled, and it stays "
            "submitting until ganga next starts, which recovers it",
        )
    return JobError(f"{reason}; what the backend received was cancelled and {result}")


def left_submitting(session: Session, job: Job, line: str) -> JobError:
    """The error saying ``job`` stays submitting; the session remembers the line, which
    ``wait()`` on the job answers at once."""
    session.left_submitting[job.fqid] = line
    return JobError(line)
