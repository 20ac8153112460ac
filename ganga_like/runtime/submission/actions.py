"""Job actions: submit, resubmit, kill, remove, copy, force_status.

Every action that reaches a backend runs in three steps so that a conflict retry never
repeats a side effect: (1) a retried transaction records the intent (split, status
submitting); (2) the backend is called once; (3) a retried transaction records the outcome.
Failures before the backend is reached roll back completely. The retried parts only change
persistent objects, which an abort restores; new objects (a resplit's pieces) have their
state put back by hand before each attempt (``recording.record``'s ``fresh``). A split
job's first submission hands its subjobs to the backend a part at a time inside the first
attempt of (3), which a retry never repeats (``split_submission``). A transaction that
still conflicts after the last attempt is aborted and reported in one line
(RepositoryConflictError); the session goes on working.

The steps live beside this module: ``intents`` and ``recording``, ``handover`` (the backend
call), ``resubmit``, ``removal`` (kill, force_status, remove).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ganga_like.errors import JobError, RepositoryWriteError
from ganga_like.model.interfaces import SubmitOutcome
from ganga_like.model.job import Job
from ganga_like.model.parts import job_parts
from ganga_like.model.status import Status
from ganga_like.model.stop_points import stop_point
from ganga_like.runtime.submission.handover import (
    check_components,
    hand_over,
    hand_to_backend,
    interrupted,
    prepare,
    summarise,
)
from ganga_like.runtime.submission.intents import Intent, ours
from ganga_like.runtime.submission.recording import record, undo_submission
from ganga_like.runtime.submission.removal import force_status, kill, remove
from ganga_like.runtime.submission.resubmit import describe_job, resubmit, run_again
from ganga_like.runtime.submission.split_submission import SplitSubmission, check_split
from ganga_like.runtime.submission.splitting import build_subjobs, calling_splitter
from ganga_like.runtime.workflow import throttle

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = ["copy_job", "force_status", "kill", "preview", "remove", "resubmit", "submit"]

log = logging.getLogger("ganga_like")


def submit(
    session: Session, job: Job, keep_going: bool = False, handed_over: str | None = None
) -> bool:
    """Split, prepare and submit ``job``; the splitting design's rules in full.

    ``handed_over``: the job is a waiting one whose condition holds, handed over by a
    monitor (ganga_like.runtime.workflow.driver); the cause its log gives the submission."""
    try:
        return _submit(session, job, keep_going, handed_over)
    except KeyboardInterrupt:
        raise interrupted(session, job, "submit()") from None


def _submit(session: Session, job: Job, keep_going: bool, handed_over: str | None = None) -> bool:
    if job.master is not None:
        log.error(
            "subjob %s cannot be submitted on its own; resubmit it, or copy() it to a new job",
            job.fqid,
        )
        return False
    check_components(job, "submit")
    status = job.current_status()
    if job.is_master and (
        status is Status.NEW
        or (status.active and job.counts().get(Status.NEW, 0) > 0)  # counters: no subjob read
    ):
        # Some subjobs were never submitted (a submission stopped part way, or keep_going):
        # submit exactly those, never split again, without waiting for the others to end.
        never = [sj for sj in job.iter_subjobs() if Status.parse(sj.status) is Status.NEW]
        return run_again(session, job, never, keep_going, "submit")
    if status is not Status.NEW and not (handed_over and status is Status.WAITING):
        raise JobError(
            f"job {job.fqid} is {status}: only a new job can be submitted; use "
            "resubmit(), or copy() it"
        )
    required = job_parts().required
    if any(getattr(job, part.name) is None for part in required):
        needed = " and ".join(_with_article(part.name) for part in required)
        raise JobError(f"job {job.fqid} needs {needed} to be submitted")
    _check_inputs(job)
    job.application.check_before_submit()
    for postprocessor in job.postprocessors:
        postprocessor.check_before_submit()

    cause = handed_over or "user: submit"
    if _throttled(session, job):
        # Held for room in its workflow; the monitor hands it over.
        if job.splitter is not None:
            return _submit_split(session, job, keep_going, cause, held=True)
        what = f"holding job {job.fqid} for room in its workflow"
        session.repo.in_transaction(
            lambda: throttle.hold(session.registry(), job, cause), what=what
        )
        session.poke_monitor()
        return True
    if job.splitter is not None:
        return _submit_split(session, job, keep_going, cause)
    record(session, job, _intent_recorder(session, job, 0, cause), f"submitting job {job.fqid}")
    outcome = hand_to_backend(session, job, [job], keep_going)

    def record_outcome() -> None:
        registry = session.repo.registry()
        if registry.submitting.pop(job.id, None) is None:
            return  # an attempt whose answer was lost (the server died) did commit
        message = outcome.failed.get(job.fqid)
        if message is not None:
            job.change_status(Status.NEW, f"submission failed: {message}")
            return
        job.change_status(Status.SUBMITTED, "user: submit")
        registry.follow(job, job.backend.monitor_data(job))
        stop_point("before-commit")

    try:
        record(session, job, record_outcome, f"recording the submission of job {job.fqid}")
    except RepositoryWriteError as exc:
        raise undo_submission(
            session, job, [job], outcome, exc, _roll_back(session, job), "the job is new again"
        ) from None
    session.poke_monitor()
    if outcome.failed:
        raise JobError(f"job {job.fqid} could not be submitted: {summarise(outcome, job.fqid)}")
    return True


def _throttled(session: Session, job: Job) -> bool:
    """Whether ``job`` is to be held for room in its throttled workflow (not when it is
    the one held job the monitor now hands over)."""
    if job._held or not job.workflow:
        return False
    return throttle.limit_of(session.repo.connection().root(), job.workflow) is not None


def release_held(session: Session, master: Job, subjobs: Sequence[Job], cause: str) -> bool:
    """Hand ``master``'s held ``subjobs`` over to its backend: the monitor's part of a
    throttle (ganga_like.runtime.workflow.throttle), recorded as a submission of them."""
    who, _, verb = cause.partition(": ")
    return run_again(session, master, subjobs, True, verb, who=who)


def _submit_split(
    session: Session, job: Job, keep_going: bool, cause: str, held: bool = False
) -> bool:
    """Submit a new job's subjobs, made by its splitter, a part at a time
    (split_submission says how the submission stays all or nothing); ``held``: each
    subjob is held waiting for room in the job's workflow instead."""
    # Checked a part at a time before anything is stored: a failing or empty split
    # changes nothing stored.
    first, count = check_split(job)
    record(session, job, _intent_recorder(session, job, count, cause), f"submitting job {job.fqid}")
    hold = f"{cause}; held: workflow {job.workflow!r} runs a few at once" if held else None
    plan = SplitSubmission(session, job, first, count, keep_going, hold)

    def hand_over_part(part: Sequence[Job], first_part: bool) -> SubmitOutcome:
        if first_part:  # an early start for the first subjobs, as for any submission
            return hand_to_backend(session, job, part, keep_going)
        return hand_over(session, job, part, keep_going)

    try:
        record(
            session,
            job,
            plan.record_again,
            f"recording the submission of job {job.fqid}",
            first=lambda: plan.hand_over_and_record(hand_over_part),
        )
    except RepositoryWriteError as exc:
        raise undo_submission(
            session,
            job,
            plan.handed,
            plan.outcome,
            exc,
            _roll_back(session, job),
            "the job is new again",
        ) from None
    session.poke_monitor()
    outcome = plan.outcome
    if outcome.not_attempted and not outcome.failed:
        # The first attempt was interrupted part way and recorded again: the parts it had
        # not reached were never handed over.
        log.warning(
            "job %s: %d subjob(s) were not handed over (recording the submission was "
            "interrupted); submit() submits them",
            job.fqid,
            len(outcome.not_attempted),
        )
    if outcome.failed:
        summary = summarise(outcome, job.fqid)
        if Status.parse(job.status) is Status.NEW:  # rolled back (stored, not derived)
            raise JobError(
                f"job {job.fqid}: no subjob could be submitted, the job is new again: {summary}"
            )
        if not keep_going:
            raise JobError(f"job {job.fqid}: submission stopped: {summary}")
        log.warning("job %s: %s", job.fqid, summary)
    return True


def _intent_recorder(session: Session, job: Job, count: int, cause: str) -> Callable[[], None]:
    """What records the intent of submitting ``job`` (``count`` subjobs, 0 unsplit)."""

    def record_intent() -> None:
        # The only record before the backend is reached: a crash from here on leaves the
        # job "submitting" with no subjobs, which startup recovery rolls back (cancelling
        # whatever the backend may have received under this job's keys).
        if ours(session.registry().submitting.get(job.id)):
            return  # an attempt whose answer was lost (the server died) did commit
        job.change_status(Status.SUBMITTING, cause)
        job._held = False  # handed over from its workflow's throttle, if it was held
        job.submit_count = job.submit_count + 1
        job._described = describe_job(job)
        session.registry().submitting[job.id] = Intent.now("submit", count).stored()

    return record_intent


def _roll_back(session: Session, job: Job) -> Callable[[], None]:
    """What records a submission of ``job`` whose outcome could not be recorded as rolled
    back (what the backend received was cancelled)."""

    def roll_back() -> None:
        session.registry().submitting.pop(job.id, None)
        if Status.parse(job.status) is Status.SUBMITTING:
            job.change_status(
                Status.NEW,
                "submission failed: the repository could not be written; cancelled and rolled back",
            )

    return roll_back


def preview(session: Session, job: Job) -> str:
    """What submitting ``job`` would send to its backend; nothing is stored or submitted."""
    check_components(job, "preview")
    if job.current_status() is not Status.NEW:
        raise JobError(
            f"job {job.fqid} is {job.current_status()}: only a new job can be "
            "submitted (see backend.preview() for a resubmission)"
        )
    if job.is_master:  # what submit() would send: the subjobs never submitted
        targets = [sj for sj in job.iter_subjobs() if Status.parse(sj.status) is Status.NEW]
    else:
        targets = _split(job) if job.splitter is not None else [job]
    pairs, outcome = prepare(session, targets, keep_going=True, stage=False)
    if outcome.failed:
        raise JobError(f"job {job.fqid} could not be prepared: {summarise(outcome, job.fqid)}")
    return str(job.backend.preview_bulk(session.submit_context(job.backend), pairs))


def _split(job: Job) -> list[Job]:
    variations = calling_splitter(job, lambda: job.splitter.variations(job))
    if not variations:
        raise JobError(f"job {job.fqid}: the splitter produced no subjobs")
    return build_subjobs(job, variations)


def _with_article(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _check_inputs(job: Job) -> None:
    for f in job.inputfiles:
        if f.remote:
            continue  # fetched where the job runs, which then fails if it is missing
        path = f.input_path()
        if not os.path.isfile(path):
            raise JobError(f"job {job.fqid}: input file not found: {path}")


def copy_job(session: Session, job: Job) -> Job:
    """A new top-level job with the same description (a subjob's copy is top-level too)."""
    check_components(job, "copy")
    clone = job._copy()
    assert isinstance(clone, Job)
    if job.master is not None:
        for part in job_parts().master_only:  # what split its master is not the copy's
            clone._drop(part.name)
    session.repo.in_transaction(
        lambda: session.repo.registry().add(clone), what=f"copying job {job.fqid}"
    )
    return clone
