"""Job actions: submit, resubmit, kill, remove, copy, force_status.

Every action that reaches a backend runs in three steps so that a conflict retry never
repeats a side effect: (1) a retried transaction records the intent (split, status
submitting); (2) the backend is called once; (3) a retried transaction records the outcome.
Failures before the backend is reached roll back completely. The retried parts only change
persistent objects, which an abort restores; new objects (a resplit's pieces) have their
state put back by hand before each attempt (``_record``'s ``fresh``). A split job's first
submission hands its subjobs to the backend a part at a time inside the first attempt of
(3), which a retry never repeats (``split_submission``). A transaction that still
conflicts after the last attempt is aborted and reported in one line
(RepositoryConflictError); the session goes on working.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ganga_like.errors import (
    BackendError,
    BrokenObjectError,
    GangaError,
    JobError,
    RepositoryWriteError,
    UnknownStatusError,
    safe_repr,
)
from ganga_like.model.base import GangaObject
from ganga_like.model.interfaces import RunSpec, SubmitOutcome
from ganga_like.model.job import Job
from ganga_like.model.parts import job_parts
from ganga_like.model.status import Status
from ganga_like.model.stop_points import stop_point
from ganga_like.model.workspace import run_spec
from ganga_like.runtime.submission.split_submission import SplitSubmission, check_split
from ganga_like.runtime.submission.splitting import build_subjobs, calling_splitter

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = ["copy_job", "force_status", "kill", "preview", "remove", "resubmit", "submit"]

log = logging.getLogger("ganga_like")


def check_not_broken(obj: object, action: str) -> None:
    if not isinstance(obj, GangaObject):
        raise BrokenObjectError(
            f"cannot {action} {describe_broken(obj)}: its plugin is "
            "missing; it can only be listed and removed"
        )


def describe_broken(obj: object) -> str:
    cls = type(obj)
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__name__', '?')}"


def _check_components(job: Job, action: str) -> None:
    check_not_broken(job, action)
    for part in job_parts().components:
        value = job.stored().get(part.name)
        if value is not None and not isinstance(value, GangaObject):
            raise BrokenObjectError(
                f"cannot {action} job {job.fqid}: its {part.name} "
                f"({describe_broken(value)}) comes from a missing plugin"
            )


# -- submit ---------------------------------------------------------------------------


def submit(session: Session, job: Job, keep_going: bool = False) -> bool:
    """Split, prepare and submit ``job``; the splitting design's rules in full."""
    try:
        return _submit(session, job, keep_going)
    except KeyboardInterrupt:
        raise _interrupted(session, job, "submit()") from None


def _interrupted(session: Session, job: Job, action: str) -> KeyboardInterrupt:
    """Ctrl-C stopped ``action`` of ``job``: what the backend had received is recorded
    now, as crash recovery would at the next start (otherwise this session would show the
    job ``submitting`` until then); the one line to show says what became of it."""
    from ganga_like.runtime.submission.recovery import recover_own_submission

    master = job.master or job
    line = recover_own_submission(session.repo, session.submit_context, master.id)
    session.poke_monitor()
    if line is None:
        # Nothing of this process's was pending: the interruption came before the intent
        # was recorded or after the outcome was committed; either way nothing is half done.
        return KeyboardInterrupt(
            f"{action} of job {job.fqid} stopped; nothing was left half done: "
            f"the job is {job.current_status().label}"
        )
    return KeyboardInterrupt(f"{action} stopped; {line}")


def _submit(session: Session, job: Job, keep_going: bool) -> bool:
    if job.master is not None:
        log.error(
            "subjob %s cannot be submitted on its own; resubmit it, or copy() it to a new job",
            job.fqid,
        )
        return False
    _check_components(job, "submit")
    status = job.current_status()
    if job.is_master and (
        status is Status.NEW
        or (status.active and job.counts().get(Status.NEW, 0) > 0)  # counters: no subjob read
    ):
        # Some subjobs were never submitted (a submission stopped part way, or keep_going):
        # submit exactly those, never split again, without waiting for the others to end.
        never = [sj for sj in job.iter_subjobs() if Status.parse(sj.status) is Status.NEW]
        return _run_again(session, job, never, keep_going, "submit")
    if status is not Status.NEW:
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

    if job.splitter is not None:
        return _submit_split(session, job, keep_going)
    _record(session, job, _intent_recorder(session, job, 0), f"submitting job {job.fqid}")
    outcome = _hand_to_backend(session, job, [job], keep_going)

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
        _record(session, job, record_outcome, f"recording the submission of job {job.fqid}")
    except RepositoryWriteError as exc:
        raise _undo_submission(
            session, job, [job], outcome, exc, _roll_back(session, job), "the job is new again"
        ) from None
    session.poke_monitor()
    if outcome.failed:
        raise JobError(f"job {job.fqid} could not be submitted: {_summarise(outcome)}")
    return True


def _submit_split(session: Session, job: Job, keep_going: bool) -> bool:
    """Submit a new job's subjobs, made by its splitter, a part at a time
    (split_submission says how the submission stays all or nothing)."""
    # Checked a part at a time before anything is stored: a failing or empty split
    # changes nothing stored.
    first, count = check_split(job)
    _record(session, job, _intent_recorder(session, job, count), f"submitting job {job.fqid}")
    plan = SplitSubmission(session, job, first, count, keep_going)

    def hand_over(part: Sequence[Job], first_part: bool) -> SubmitOutcome:
        if first_part:  # an early start for the first subjobs, as for any submission
            return _hand_to_backend(session, job, part, keep_going)
        return _hand_over(session, job, part, keep_going)

    try:
        _record(
            session,
            job,
            plan.record_again,
            f"recording the submission of job {job.fqid}",
            first=lambda: plan.hand_over_and_record(hand_over),
        )
    except RepositoryWriteError as exc:
        raise _undo_submission(
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
        summary = _summarise(outcome)
        if Status.parse(job.status) is Status.NEW:  # rolled back (stored, not derived)
            raise JobError(
                f"job {job.fqid}: no subjob could be submitted, the job is new again: {summary}"
            )
        if not keep_going:
            raise JobError(f"job {job.fqid}: submission stopped: {summary}")
        log.warning("job %s: %s", job.fqid, summary)
    return True


def _intent_recorder(session: Session, job: Job, count: int) -> Callable[[], None]:
    """What records the intent of submitting ``job`` (``count`` subjobs, 0 unsplit)."""

    def record_intent() -> None:
        # The only record before the backend is reached: a crash from here on leaves the
        # job "submitting" with no subjobs, which startup recovery rolls back (cancelling
        # whatever the backend may have received under this job's keys).
        if _ours(session.registry().submitting.get(job.id)):
            return  # an attempt whose answer was lost (the server died) did commit
        job.change_status(Status.SUBMITTING, "user: submit")
        job.submit_count = job.submit_count + 1
        job._described = describe_job(job)
        session.registry().submitting[job.id] = intent("submit", count)

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


def _undo_submission(
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
        problems = job.backend.kill_bulk(session.submit_context(), handed) if handed else {}
    except GangaError as exc:
        problems = {job.fqid: str(exc)}
    reason = f"job {job.fqid} could not be {action}: {error}"
    if problems:
        session.repo.abort()
        first = next(iter(problems.values()))
        return _left_submitting(
            session,
            job,
            f"{reason}; what the backend received could not be cancelled "
            f"({first}): it stays submitting until ganga next starts, which "
            "recovers it",
        )
    try:
        _record(session, job, roll_back, f"rolling back the submission of job {job.fqid}")
    except RepositoryWriteError:
        session.repo.abort()
        return _left_submitting(
            session,
            job,
            f"{reason}; what the backend received was cancelled, and it stays "
            "submitting until ganga next starts, which recovers it",
        )
    return JobError(f"{reason}; what the backend received was cancelled and {result}")


def _left_submitting(session: Session, job: Job, line: str) -> JobError:
    """The error saying ``job`` stays submitting; the session remembers the line, which
    ``wait()`` on the job answers at once."""
    session.left_submitting[job.fqid] = line
    return JobError(line)


def describe_job(job: Job) -> dict[str, str]:
    """The editable description of a job, flattened: ``{"application.args": "['1']"}``.

    Only the parts a (sub)job runs with: the splitter does not act on a resubmission."""
    flat: dict[str, str] = {}
    for part in job_parts().run_with:
        if part.many:
            flat[part.name] = repr([type(f).__name__ for f in getattr(job, part.name)])[:80]
            continue
        component = job.stored().get(part.name)
        if isinstance(component, GangaObject):
            for attr, trait in type(component)._schema.items():
                if trait.metadata.get("protected"):
                    continue  # backend bookkeeping (scheduler ids) is no user change
                value = getattr(component, attr)
                shown = list(value) if isinstance(value, tuple) else value
                flat[f"{part.name}.{attr}"] = repr(shown)[:80]
    return flat


def describe_changes(before: dict[str, str], after: dict[str, str]) -> str:
    changed = [
        f"{k} {before.get(k, '-')} -> {after.get(k, '-')}"
        for k in sorted(set(before) | set(after))
        if before.get(k) != after.get(k)
    ]
    return "; ".join(changed)


def _record(
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
    saved = [dict(obj.__dict__) for obj in fresh]

    def recorded() -> None:
        for obj, state in zip(fresh, saved, strict=True):
            obj.__dict__.clear()
            obj.__dict__.update(state)
        action()
        session.repo.registry().reindex(top)

    def recorded_first() -> None:
        assert first is not None
        first()
        session.repo.registry().reindex(top)

    session.repo.in_transaction(
        recorded, what=what, first=recorded_first if first is not None else None
    )


def intent(kind: str, detail: int | tuple[int, ...]) -> tuple[str, Any, int, float]:
    """What a crash recovery needs to know about a submission in progress, and whose it is
    (pid and process start time, so a live session's submission is never "recovered")."""
    return (kind, detail, os.getpid(), _process_started())


def _ours(recorded: Any) -> bool:
    """Whether a recorded intent is this process's (see ``intent``)."""
    return bool(
        recorded and recorded[2] == os.getpid() and abs(recorded[3] - _process_started()) < 1.0
    )


def _process_started() -> float:
    import psutil

    return float(psutil.Process().create_time())


def _split(job: Job) -> list[Job]:
    variations = calling_splitter(job, lambda: job.splitter.variations(job))
    if not variations:
        raise JobError(f"job {job.fqid}: the splitter produced no subjobs")
    return build_subjobs(job, variations)


def _summarise(outcome: SubmitOutcome) -> str:
    first_fqid, first = next(iter(outcome.failed.items()))
    others = len(outcome.failed) - 1
    more = f" (and {others} more)" if others else ""
    skipped = f"; {len(outcome.not_attempted)} not attempted" if outcome.not_attempted else ""
    return f"{first_fqid}: {first}{more}{skipped}"


def _with_article(noun: str) -> str:
    return f"{'an' if noun[:1] in 'aeiou' else 'a'} {noun}"


def _check_inputs(job: Job) -> None:
    for f in job.inputfiles:
        path = f.input_path()
        if not os.path.isfile(path):
            raise JobError(f"job {job.fqid}: input file not found: {path}")


def _prepare(
    session: Session, targets: Sequence[Job], keep_going: bool, stage: bool = True
) -> tuple[list[tuple[Job, RunSpec]], SubmitOutcome]:
    """Each target's run specification; failures recorded as the splitting design says.
    ``stage=False`` (a preview): the files an application generates are not written."""
    ctx = session.submit_context()
    pairs: list[tuple[Job, RunSpec]] = []
    outcome = SubmitOutcome()
    for index, target in enumerate(targets):
        try:
            spec = run_spec(target, ctx.paths(target), stage)
        except GangaError as exc:
            outcome.failed[target.fqid] = str(exc)
            if not keep_going:
                outcome.not_attempted = [t.fqid for t in targets[index + 1 :]]
                break
            continue
        pairs.append((target, spec))
    return pairs, outcome


def _hand_to_backend(
    session: Session, job: Job, targets: Sequence[Job], keep_going: bool
) -> SubmitOutcome:
    """Prepare each target and submit them in bulk (never raises).

    A backend with an ``early_start_batch`` gets its first few targets as soon as they are
    prepared, then the rest in one more call: the first subjobs run while the others are
    prepared, instead of after."""
    early = type(job.backend).early_start_batch
    if 0 < early < len(targets):
        outcome = _hand_over(session, job, targets[:early], keep_going)
        _test_pause()
        if outcome.failed and not keep_going:
            outcome.not_attempted.extend(t.fqid for t in targets[early:])
            return outcome
        rest = _hand_over(session, job, targets[early:], keep_going)
        outcome.failed.update(rest.failed)
        outcome.not_attempted.extend(rest.not_attempted)
        outcome.real_bulk = outcome.real_bulk or rest.real_bulk
        return outcome
    return _hand_over(session, job, targets, keep_going)


# Test hook: seconds to pause after a backend received the first slice of a submission,
# before the rest is prepared and anything is recorded, so that a test can kill the
# submitting process at the worst moment.  Unset (always, outside tests) it does nothing.
TEST_PAUSE_VARIABLE = "GANGA_LIKE_TEST_PAUSE_AFTER_FIRST_SLICE"


def _test_pause() -> None:
    """Seconds to sleep, or a file to wait for (at most 300 s): tests use a file so that
    what they do in the pause does not race a clock on a loaded machine."""
    pause = os.environ.get(TEST_PAUSE_VARIABLE)
    if pause:
        import time

        try:
            time.sleep(float(pause))
        except ValueError:
            deadline = time.monotonic() + 300
            while not os.path.exists(pause) and time.monotonic() < deadline:
                time.sleep(0.05)


def _hand_over(
    session: Session, job: Job, targets: Sequence[Job], keep_going: bool
) -> SubmitOutcome:
    """Prepare ``targets`` and submit them in one bulk call (never raises)."""
    pairs, outcome = _prepare(session, targets, keep_going)
    if pairs:
        try:
            result = job.backend.submit_bulk(session.submit_context(), pairs, keep_going)
        except BackendError as exc:
            result = SubmitOutcome(failed={t.fqid: str(exc) for t, _ in pairs})
        except Exception as exc:  # a plugin bug must not leave the job in submitting
            log.exception("backend %s failed", type(job.backend).__name__)
            result = SubmitOutcome(
                failed={t.fqid: f"{type(exc).__name__}: {exc}" for t, _ in pairs}
            )
        outcome.failed.update(result.failed)
        outcome.not_attempted.extend(result.not_attempted)
        outcome.real_bulk = result.real_bulk
        stop_point("handed-over")
    return outcome


def preview(session: Session, job: Job) -> str:
    """What submitting ``job`` would send to its backend; nothing is stored or submitted."""
    _check_components(job, "preview")
    if job.current_status() is not Status.NEW:
        raise JobError(
            f"job {job.fqid} is {job.current_status()}: only a new job can be "
            "submitted (see backend.preview() for a resubmission)"
        )
    if job.is_master:  # what submit() would send: the subjobs never submitted
        targets = [sj for sj in job.iter_subjobs() if Status.parse(sj.status) is Status.NEW]
    else:
        targets = _split(job) if job.splitter is not None else [job]
    pairs, outcome = _prepare(session, targets, keep_going=True, stage=False)
    if outcome.failed:
        raise JobError(f"job {job.fqid} could not be prepared: {_summarise(outcome)}")
    return str(job.backend.preview_bulk(session.submit_context(), pairs))


# -- resubmit -------------------------------------------------------------------------

_RESUBMITTABLE = (Status.FAILED, Status.KILLED)


def resubmit(
    session: Session, job: Job, keep_going: bool = True, backend: GangaObject | None = None
) -> bool:
    """Resubmit a failed/killed job or subjob; for a master, its failed/killed subjobs.

    ``backend``: a changed copy of the job's backend (same type; only its attributes
    declared ``changeable_at_resubmit`` may differ), recorded on every (sub)job
    resubmitted before it is handed over."""
    try:
        return _resubmit(session, job, keep_going, backend)
    except KeyboardInterrupt:
        raise _interrupted(session, job, "resubmit()") from None


def _resubmit(session: Session, job: Job, keep_going: bool, backend: GangaObject | None) -> bool:
    _check_components(job, "resubmit")
    if job.is_master:
        targets = [
            sj
            for sj in job.iter_subjobs()
            if Status.parse(sj.status) in (*_RESUBMITTABLE, Status.NEW)
        ]
        if not targets and job.current_status() is Status.COMPLETED:
            # As in Ganga: a completed master runs again whole (its frozen subjobs aside).
            targets = [
                sj for sj in job.iter_subjobs() if Status.parse(sj.status) is Status.COMPLETED
            ]
        if not targets:
            why = ""
            if job.postprocessing_failed():
                why = " (its postprocessing failed: fix that and call runPostProcessors())"
            raise JobError(f"job {job.fqid}: no failed or killed subjob to resubmit{why}")
    else:
        status = job.current_status()
        if status.frozen:
            raise JobError(f"job {job.fqid} is {status}: unfreeze() it to resubmit it")
        allowed = {*_RESUBMITTABLE, Status.COMPLETED}
        if job.master is not None:
            allowed.add(Status.NEW)  # a subjob whose submission failed
        if status not in allowed:
            raise JobError(
                f"job {job.fqid} is {status}: only failed, killed or completed "
                "jobs can be resubmitted"
            )
        targets = [job]
    changes = _backend_changes(job, backend) if backend is not None else {}
    return _run_again(session, job, targets, keep_going, "resubmit", changes)


def _backend_changes(job: Job, new: GangaObject) -> dict[str, Any]:
    """The attributes ``new`` changes of ``job``'s backend; JobError (nothing changed) when
    it is of another type or changes an attribute not declared changeable at resubmit."""
    current = job.backend
    check_not_broken(new, "resubmit with")
    if type(new) is not type(current):
        raise JobError(
            f"job {job.fqid}: resubmit(backend=...) needs a {type(current).__name__} backend "
            f"(the job's), not {type(new).__name__}; copy() the job to run it elsewhere"
        )
    before, after = describe_component(current), describe_component(new)
    changed = [name for name in type(new)._schema if before.get(name) != after.get(name)]
    schema = type(new)._schema
    fixed = [n for n in changed if not schema[n].metadata.get("changeable_at_resubmit")]
    if fixed:
        allowed = [n for n, t in schema.items() if t.metadata.get("changeable_at_resubmit")]
        raise JobError(
            f"job {job.fqid}: resubmit(backend=...) cannot change backend.{fixed[0]}; "
            f"only {', '.join(allowed) or 'nothing'} may change at resubmission"
        )
    state = new.stored()
    return {name: state.get(name) for name in changed}


def describe_component(component: GangaObject) -> dict[str, str]:
    """A plugin object's user-set attributes (not its bookkeeping), each shown as text."""
    shown: dict[str, str] = {}
    for attr, trait in type(component)._schema.items():
        if trait.metadata.get("protected"):
            continue  # backend bookkeeping (scheduler ids) is no user change
        value = getattr(component, attr)
        shown[attr] = repr(list(value) if isinstance(value, tuple) else value)
    return shown


def _change_backend(job: Job, changes: dict[str, Any]) -> str:
    """Give ``job``'s backend the ``changes`` (own copies of the values); what changed."""
    backend = job.backend
    before = describe_component(backend)
    for name, value in changes.items():
        if value is None:
            backend.__dict__.pop(name, None)  # back to the default
            backend._p_changed = True
        else:
            backend._assign(name, value._copy() if isinstance(value, GangaObject) else value)
    after = describe_component(backend)
    return describe_changes(
        {f"backend.{k}": v[:80] for k, v in before.items()},
        {f"backend.{k}": v[:80] for k, v in after.items()},
    )


def _run_again(
    session: Session,
    job: Job,
    targets: Sequence[Job],
    keep_going: bool,
    verb: str,
    backend_changes: dict[str, Any] | None = None,
) -> bool:
    """Submit ``targets`` (a job, or subjobs of ``job``) that exist already: a resubmission,
    or the submission of the subjobs a master never submitted (``verb`` says which, for
    the history). Recorded as a resubmission, so an interrupted one is recovered alike."""
    master = job.master or job

    def record_intent() -> None:
        if _ours(session.registry().submitting.get(master.id)):
            return  # an attempt whose answer was lost did commit
        if job.is_master:
            changed = _change_backend(job, backend_changes) if backend_changes else ""
            with_changes = f" with {changed}" if changed else ""
            job.log_event(f"user: {verb} of {len(targets)} subjob(s){with_changes}")
        for target in targets:
            cause = f"user: {verb}"
            changed = _change_backend(target, backend_changes) if backend_changes else ""
            if changed:
                cause = f"user: {verb} with {changed}"
            if target.master is None:
                # Only top-level jobs can be edited between runs: say what changed.
                now = describe_job(target)
                changes = describe_changes(getattr(target, "_described", None) or {}, now)
                target._described = now
                if changes:
                    cause = f"user: resubmit with {changes}"
            target.change_status(Status.SUBMITTING, cause)
            target.submit_count = target.submit_count + 1
        ids = tuple(t.id for t in targets) if targets[0] is not master else ()
        session.registry().submitting[master.id] = intent("resubmit", ids)

    _record(session, master, record_intent, f"resubmitting job {job.fqid}")
    outcome = _hand_to_backend(session, master, targets, keep_going)

    def record_outcome() -> None:
        registry = session.repo.registry()
        if registry.submitting.pop(master.id, None) is None:
            return  # an attempt whose answer was lost did commit
        for target in targets:
            message = outcome.failed.get(target.fqid)
            if message is not None or target.fqid in outcome.not_attempted:
                target.change_status(Status.FAILED, f"resubmission failed: {message}")
            elif Status.parse(target.status) is Status.SUBMITTING:
                target.change_status(Status.SUBMITTED, f"user: {verb}")
                registry.follow(target, target.backend.monitor_data(target))
        stop_point("before-commit")

    def roll_back() -> None:
        session.registry().submitting.pop(master.id, None)
        for target in targets:
            if Status.parse(target.status) is Status.SUBMITTING:
                target.change_status(
                    Status.FAILED,
                    "resubmission failed: the repository could not be written; cancelled",
                )

    try:
        _record(session, master, record_outcome, f"recording the resubmission of job {job.fqid}")
    except RepositoryWriteError as exc:
        raise _undo_submission(
            session,
            master,
            targets,
            outcome,
            exc,
            roll_back,
            "the resubmitted jobs are failed again",
            "resubmitted",
        ) from None
    session.poke_monitor()
    if outcome.failed and not keep_going:
        what = "resubmission" if verb == "resubmit" else "submission"
        raise JobError(f"job {job.fqid}: {what} failed: {_summarise(outcome)}")
    return True


# -- kill -----------------------------------------------------------------------------


def kill(session: Session, job: Job, keep_going: bool = True) -> bool:
    """Kill a job, a subjob, or every active subjob of a master."""
    _check_components(job, "kill")
    if job.is_master:
        targets = [sj for sj in job.iter_subjobs() if Status.parse(sj.status).active]
    else:
        targets = [job] if Status.parse(job.status).active else []
    if not targets:
        raise JobError(f"job {job.fqid} is {job.current_status()}: nothing to kill")
    backend = (job.master or job).backend
    errors = backend.kill_bulk(session.submit_context(), targets)

    def record() -> None:
        registry = session.repo.registry()
        for target in targets:
            if target.fqid in errors:
                target.log_event(f"kill failed: {errors[target.fqid]}")
                continue
            if Status.parse(target.status).active:
                target.change_status(Status.KILLED, "user: kill")
            registry.unfollow(target)

    _record(session, job.master or job, record, f"recording the kill of job {job.fqid}")
    if errors:
        fqid, message = next(iter(errors.items()))
        text = f"job {job.fqid}: {len(errors)} kill(s) failed, first {fqid}: {message}"
        if not keep_going:
            raise JobError(text)
        log.warning(text)
    return True


# -- remove, copy, force_status -------------------------------------------------------


def remove(session: Session, job: Job) -> bool:
    """Remove a top-level job, its subjobs and its workspace (active ones are killed)."""
    if getattr(job, "master", None) is not None:
        log.error(
            "subjob %s cannot be removed on its own; remove its master %s",
            job.fqid,
            job.master.id if job.master else "?",
        )
        return False
    job_id = job.id
    if isinstance(job, Job) and isinstance(job.backend, GangaObject):
        try:
            if any(
                Status.parse(sj.status).active
                for sj in (job.iter_subjobs() if job.is_master else [job])
            ):
                kill(session, job, keep_going=True)
        except GangaError as exc:
            log.warning("job %s: kill before removal failed: %s", job_id, exc)

    session.repo.in_transaction(
        lambda: session.repo.registry().remove(job_id), what=f"removing job {job_id}"
    )
    shutil.rmtree(session.repo.workspace / str(job_id), ignore_errors=True)
    return True


def copy_job(session: Session, job: Job) -> Job:
    """A new top-level job with the same description (a subjob's copy is top-level too)."""
    _check_components(job, "copy")
    clone = job._copy()
    assert isinstance(clone, Job)
    if job.master is not None:
        for part in job_parts().master_only:  # what split its master is not the copy's
            clone.__dict__.pop(part.name, None)
    session.repo.in_transaction(
        lambda: session.repo.registry().add(clone), what=f"copying job {job.fqid}"
    )
    return clone


_FORCEABLE = (Status.COMPLETED, Status.FAILED)
_FORCEABLE_BY_NAME = {s.label: s for s in _FORCEABLE}


def force_status(session: Session, job: Job, status: str) -> bool:
    """Force a job (a master: each of its unfinished subjobs) to completed or failed."""
    target = _FORCEABLE_BY_NAME.get(status.lower()) if isinstance(status, str) else None
    if target is None:
        raise UnknownStatusError(
            f"force_status accepts 'completed' or 'failed', not {safe_repr(status)}"
        )
    jobs = list(job.iter_subjobs()) if job.is_master else [job]
    if job.current_status() in (Status.NEW, Status.SUBMITTING):
        raise JobError(f"job {job.fqid} is {job.current_status()}: submit it first")
    if job.current_status().frozen:
        raise JobError(f"job {job.fqid} is {job.current_status()}: unfreeze() it first")
    jobs = [j for j in jobs if not Status.parse(j.status).frozen]  # frozen results stand
    active = [j for j in jobs if Status.parse(j.status).active]
    if active:
        try:
            (job.master or job).backend.kill_bulk(session.submit_context(), active)
        except GangaError as exc:
            log.warning("job %s: stopping the backend job failed: %s", job.fqid, exc)

    def record() -> None:
        registry = session.repo.registry()
        if target is Status.COMPLETED and job.postprocessing_failed():
            job.forget_postprocessing_failure("forced by user")
        for j in jobs:
            if Status.parse(j.status) is not target and Status.parse(j.status) is not Status.NEW:
                j.change_status(target, "forced by user")
                registry.unfollow(j)

    _record(session, job.master or job, record, f"forcing the status of job {job.fqid}")
    return True
