"""The lease holder's part of a streaming map (``stream.py``): for a job marked
``STREAM`` in the pending table, make the subjobs of the pieces that arrived and submit
them as one batch, in two transactions that a crash at any point leaves safe:

1. one transaction makes every subjob due (new), moves their pieces from ``arrived`` to
   ``made`` (a piece is made once, whoever drives) and records the submission's intent
   naming them (kind ``stream``);
2. the batch is handed to the backend in one call (as a master's first submission hands
   its subjobs), then one transaction records the outcome (each subjob submitted, or
   failed with the backend's reason), drops the intent and, once nothing arrived
   meanwhile and no subjob is new, the job's entry.

A driver killed after step 1 leaves the intent: the next start's recovery records the
subjobs the backend received as submitted and leaves the others new (their submission
never began, nothing of it is recorded), and the entry, still there, has the next pass
submit them. So none is lost and none submitted twice, however far the hand-over got.
"""

from __future__ import annotations

import logging
import time

from ganga_like.errors import RepositoryWriteError
from ganga_like.model.interfaces import SubmitOutcome
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.model.stop_points import stop_point
from ganga_like.runtime.session import Session
from ganga_like.runtime.submission.handover import hand_to_backend
from ganga_like.runtime.submission.intents import Intent, ours
from ganga_like.runtime.submission.recording import undo_submission
from ganga_like.runtime.submission.recovery import recover_own_submission
from ganga_like.runtime.workflow import engine, index, stream

__all__ = ["drive_stream"]

log = logging.getLogger("ganga_like.workflow")

# What the history of each streamed subjob says submitted it.
_VERB = "monitor: submit (reading {})"


def drive_stream(session: Session, job_id: int) -> int:
    """Make and submit the subjobs streaming job ``job_id`` is due; 1 when it acted."""
    found: list[tuple[Job, list[Job]]] = []

    def make() -> None:
        found.clear()
        registry = session.registry()
        table = index.pending(registry.root)
        if table is None or table.get(job_id) != index.STREAM:
            return  # acted on meanwhile (another session held the lease)
        if registry.submitting.get(job_id) is not None:
            return  # a submission of the job is under way (or its recovery is due)
        job = registry.get(job_id)
        if not isinstance(job, Job) or not stream.is_streaming(job):
            del table[job_id]  # removed, or no longer reading a stream
            return
        stream.make_arrived(registry, str(session.repo.workspace), job)
        if stream.finish_if_closed(job, "monitor"):  # nothing matched at all
            registry.reindex(job)
            engine.upstream_changed(registry, [job], "monitor")
        news = stream.new_subjobs(job)
        if news:
            ids = tuple(sj.id for sj in news)
            registry.submitting[job_id] = Intent.now("stream", ids).stored()
            engine.runs_again(registry, job)
        elif not stream.stream_of(job).arrived:
            del table[job_id]
        found.append((job, news))

    if _recovered(session, job_id):
        return 1
    session.repo.in_transaction(make, what=f"making the subjobs of streaming job {job_id}")
    if not found:
        return 0
    job, news = found[0]
    if news:
        stop_point("stream-subjobs-made")
        began = time.time()
        outcome = hand_to_backend(session, job, news, keep_going=True)
        _record(session, job, news, outcome, began)
        stop_point("stream-subjobs-submitted")
    return 1


def _recovered(session: Session, job_id: int) -> bool:
    """An intent of this process's left by a pass that stopped between its two steps (an
    error it did not expect) is recovered as a crash's would be at the next start."""
    session.repo.abort()
    if not ours(session.registry().submitting.get(job_id)):
        return False
    line = recover_own_submission(session.repo, session.submit_context, job_id)
    if line is not None:
        log.warning("%s", line)
    return True


def _record(
    session: Session, job: Job, news: list[Job], outcome: SubmitOutcome, began: float
) -> None:
    """The outcome of the hand-over of ``news`` (subjobs of ``job``), which ``began`` then
    (each subjob's ``submitting`` time), in one transaction; should the repository refuse
    it, what the backend received is cancelled and the subjobs stay new, for a later
    pass."""
    verb = _VERB.format(job.after[0])

    def record_outcome() -> None:
        registry = session.registry()
        if registry.submitting.pop(job.id, None) is None:
            return  # an attempt whose answer was lost did commit
        for sj in news:
            message = outcome.failed.get(sj.fqid)
            sj.change_status(Status.SUBMITTING, verb, when=began)
            if message is not None or sj.fqid in outcome.not_attempted:
                sj.change_status(Status.FAILED, f"submission failed: {message}")
            else:
                sj.change_status(Status.SUBMITTED, verb)
                registry.follow(sj, sj.backend.monitor_data(sj))
        table = index.pending(registry.root)
        state = job._stream
        if table is not None and not (state and state.arrived) and not stream.new_subjobs(job):
            table.pop(job.id, None)
        registry.reindex(job)
        engine.upstream_changed(registry, [job], "monitor")
        stop_point("before-commit")

    def roll_back() -> None:
        session.registry().submitting.pop(job.id, None)  # new again: a later pass submits

    what = f"recording the streamed subjobs of job {job.id}"
    try:
        session.repo.in_transaction(record_outcome, what=what)
    except RepositoryWriteError as exc:
        error = undo_submission(
            session, job, news, outcome, exc, roll_back, "they are new again", "submitted"
        )
        log.warning("job %s: %s", job.id, error)
    if outcome.failed:
        first = next(iter(outcome.failed.items()))
        log.warning("job %s: submitting its streamed subjobs failed: %s: %s", job.id, *first)
    session.poke_monitor()
