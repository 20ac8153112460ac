"""Startup recovery of submissions a crash interrupted.

Every submission records its intent before the backend is reached and removes it when the
outcome is recorded. An intent still there whose owner process is gone means the process
died in between. The rule:

* what the backend had already received (it may have run, or be running) is recorded,
  never cancelled and run again: a first submission is split again and the subjobs the
  backend received are recorded ``submitted`` and followed, so their outcomes are
  recorded as usual; the others stay ``new``, for the user to resubmit;
* a first submission of which the backend received nothing (or a backend that cannot
  tell) is rolled back: the job is ``new`` again with no subjobs, and the backend is asked
  to cancel whatever it may have received under the job's task keys;
* a resubmission: the subjobs the backend received are recorded ``submitted``; those
  still ``submitting`` otherwise are marked ``failed`` (cause: the resubmission was
  interrupted), after the same cancellation; the user resubmits them;
* a streaming map's batch (``runtime/workflow/stream_driver``): the subjobs the backend
  received are recorded ``submitted``; the others, after the same cancellation, stay
  ``new`` with nothing of the interrupted submission recorded, and the next pass of the
  stream submits them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ganga_like.errors import GangaError
from ganga_like.model.base import GangaObject
from ganga_like.model.interfaces import SubmitContext
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.repository.connection import Repository
from ganga_like.repository.registry import Registry
from ganga_like.runtime.submission.intents import Intent
from ganga_like.runtime.submission.splitting import build_subjobs

__all__ = ["recover_interrupted_submissions", "recover_own_submission"]

log = logging.getLogger("ganga_like")


@dataclass(frozen=True)
class _Scope:
    """What recovery uses of the session opening the repository (the session itself is
    not imported here: it is the one that calls recovery)."""

    repo: Repository
    submit_context: Callable[[object], SubmitContext]

    def registry(self) -> Registry:
        return self.repo.registry()


def recover_interrupted_submissions(
    repo: Repository, submit_context: Callable[[object], SubmitContext]
) -> list[str]:
    """Recover every interrupted submission; return one line per job recovered.

    ``submit_context(backend)`` gives the context handed to backends asked what they
    received or to cancel."""
    session = _Scope(repo, submit_context)
    registry = session.registry()
    recorded = ((job_id, Intent.read(value)) for job_id, value in registry.intents())
    stale = [(job_id, intent) for job_id, intent in recorded if not intent.owner_alive()]
    if not stale:
        return []
    lines: list[str] = []

    def recover() -> None:
        lines.clear()
        for job_id, intent in stale:
            if registry.submitting.pop(job_id, None) is None:
                continue  # recovered meanwhile by another session (shared mode)
            line = _recover_one(session, registry, job_id, intent.kind, intent.detail)
            if line is not None:
                lines.append(line)

    # Cancelling is idempotent, so a conflict retry may ask the backend again.
    session.repo.in_transaction(recover, what="recovering interrupted submissions")
    for line in lines:
        log.warning("%s", line)
    return lines


def recover_own_submission(
    repo: Repository, submit_context: Callable[[object], SubmitContext], job_id: int
) -> str | None:
    """Recover the submission of job ``job_id`` that this process was making when Ctrl-C
    stopped it, as the next start would recover it after a crash, so that this session
    shows at once what the backend received; the line saying what was done, or None when
    no submission of this process was recorded (nothing had reached the backend)."""
    session = _Scope(repo, submit_context)
    repo.abort()  # what the interrupted attempt changed and did not commit
    lines: list[str] = []

    def recover() -> None:
        lines.clear()
        registry = session.registry()
        value = registry.submitting.get(job_id)
        intent = Intent.read(value) if value is not None else None
        # Only this process's intent: another session may be submitting it now.
        if intent is None or intent.pid != os.getpid():
            return
        del registry.submitting[job_id]
        line = _recover_one(session, registry, job_id, intent.kind, intent.detail)
        if line is not None:
            lines.append(line)

    repo.in_transaction(recover, what=f"recovering the interrupted submission of job {job_id}")
    return lines[0] if lines else None


def _recover_one(
    session: _Scope, registry: Registry, job_id: int, kind: str, detail: Any
) -> str | None:
    job = registry.get(job_id)
    if not isinstance(job, Job) or not isinstance(job.backend, GangaObject):
        return None
    if kind == "submit":
        line = _roll_back(session, job, int(detail))
    elif kind == "stream":
        line = _recover_stream(session, job, tuple(detail))
    else:
        line = _fail_resubmission(session, job, tuple(detail))
    registry.reindex(job)
    return line


def _cancel(session: _Scope, job: Job, targets: list[Job]) -> None:
    try:
        job.backend.kill_bulk(session.submit_context(job.backend), targets)
    except GangaError as exc:
        log.warning("job %s: cancelling an interrupted submission failed: %s", job.fqid, exc)


def _received(session: _Scope, job: Job, targets: list[Job]) -> set[str]:
    """The fqids of ``targets`` the backend says it received; none if it cannot tell."""
    if not targets:
        return set()
    try:
        received = job.backend.received_bulk(session.submit_context(job.backend), targets)
    except (GangaError, OSError) as exc:
        log.warning("job %s: cannot ask the backend what it received: %s", job.fqid, exc)
        return set()
    return received or set()


def _split_again(job: Job, count: int) -> list[Job] | None:
    """The subjobs the interrupted submission made, made again; None if impossible."""
    try:
        targets = build_subjobs(job, job.splitter.variations(job))
    except Exception as exc:  # a splitter's failure only means: roll back instead
        log.warning("job %s: cannot split it again to recover it: %s", job.fqid, exc)
        return None
    return targets if len(targets) == count else None


def _roll_back(session: _Scope, job: Job, count: int) -> str:
    rebuilt = _split_again(job, count) if count else [job]
    received = _received(session, job, rebuilt) if rebuilt is not None else set()
    if rebuilt is not None and received and Status.parse(job.status) is Status.SUBMITTING:
        return _roll_forward(session, job, rebuilt, received, split=bool(count))
    if rebuilt is not None:
        targets = rebuilt
    else:
        targets = []
        for index in range(count):
            skeleton = Job.new_subjob(job, index)
            skeleton._put("submit_count", 1)
            targets.append(skeleton)
    _cancel(session, job, targets)
    if Status.parse(job.status) is Status.SUBMITTING:
        job.change_status(Status.NEW, "recovered: the submission was interrupted; rolled back")
    return f"job {job.fqid}: an interrupted submission was rolled back; the job is new"


def _roll_forward(
    session: _Scope, job: Job, targets: list[Job], received: set[str], split: bool
) -> str:
    """Record an interrupted first submission as far as the backend received it."""
    registry = session.registry()
    cause = "recovered: the submission was interrupted after the backend received it"
    if not split:
        job.change_status(Status.SUBMITTED, cause)
        registry.follow(job, job.backend.monitor_data(job))
        return f"job {job.fqid}: an interrupted submission was recorded (the backend had it)"
    for sj in targets:
        if sj.fqid in received:
            sj.change_status(Status.SUBMITTED, cause)
            registry.follow(sj, sj.backend.monitor_data(sj))
        else:
            sj.log_event(
                "recovered: the submission was interrupted before the backend "
                "received this subjob; resubmit it"
            )
    job.attach_subjobs(targets)
    job.change_status(Status.SUBMITTED, cause)
    missing = len(targets) - len(received)
    rest = f"; {missing} it never received are new (submit() runs them)" if missing else ""
    return (
        f"job {job.fqid}: an interrupted submission was recorded: the {len(received)} "
        f"subjob(s) the backend had received are followed{rest}"
    )


def _fail_resubmission(session: _Scope, job: Job, ids: tuple[Any, ...]) -> str:
    targets = [job.subjob(i) for i in ids] if ids else [job]
    pending = [t for t in targets if Status.parse(t.status) is Status.SUBMITTING]
    received = _received(session, job, pending)
    registry = session.registry()
    for target in pending:
        if target.fqid in received:
            target.change_status(
                Status.SUBMITTED,
                "recovered: the resubmission was interrupted after the backend received it",
            )
            registry.follow(target, target.backend.monitor_data(target))
    lost = [t for t in pending if t.fqid not in received]
    _cancel(session, job, lost)
    for target in lost:
        target.change_status(Status.FAILED, "recovered: the resubmission was interrupted")
    kept = f", {len(received)} the backend had received are followed" if received else ""
    return f"job {job.fqid}: {len(lost)} interrupted resubmission(s) marked failed{kept}"


def _recover_stream(session: _Scope, job: Job, ids: tuple[Any, ...]) -> str:
    """A streaming map's batch (subjobs ``ids``, made new) was being handed over."""
    found = (job.find_subjob(i) for i in ids)
    pending = [t for t in found if t is not None and Status.parse(t.status) is Status.NEW]
    received = _received(session, job, pending)
    registry = session.registry()
    cause = "recovered: the submission was interrupted after the backend received it"
    for target in pending:
        if target.fqid in received:
            target.change_status(Status.SUBMITTING, cause)
            target.change_status(Status.SUBMITTED, cause)
            registry.follow(target, target.backend.monitor_data(target))
    lost = [t for t in pending if t.fqid not in received]
    _cancel(session, job, lost)
    later = f", {len(lost)} it never received are submitted next" if lost else ""
    return (
        f"job {job.fqid}: an interrupted submission of streamed subjobs was recorded: "
        f"{len(received)} the backend had received are followed{later}"
    )
