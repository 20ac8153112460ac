"""Handing jobs to their backend: each job's run specification prepared, then one bulk
call (or an early first part, then the rest); what a Ctrl-C during it leaves."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ganga_like.errors import BackendError, BrokenObjectError, GangaError
from ganga_like.model.base import GangaObject
from ganga_like.model.hand_over_memo import one_hand_over
from ganga_like.model.interfaces import RunSpec, SubmitOutcome
from ganga_like.model.job import Job
from ganga_like.model.parts import job_parts
from ganga_like.model.stop_points import stop_point
from ganga_like.model.workspace import run_spec

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = [
    "TEST_PAUSE_VARIABLE",
    "check_components",
    "check_not_broken",
    "hand_over",
    "hand_to_backend",
    "interrupted",
    "prepare",
    "summarise",
]

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


def check_components(job: Job, action: str) -> None:
    check_not_broken(job, action)
    for part in job_parts().components:
        value = job.stored().get(part.name)
        if value is not None and not isinstance(value, GangaObject):
            raise BrokenObjectError(
                f"cannot {action} job {job.fqid}: its {part.name} "
                f"({describe_broken(value)}) comes from a missing plugin"
            )


def interrupted(session: Session, job: Job, action: str) -> KeyboardInterrupt:
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


def prepare(
    session: Session, targets: Sequence[Job], keep_going: bool, stage: bool = True
) -> tuple[list[tuple[Job, RunSpec]], SubmitOutcome]:
    """Each target's run specification; failures recorded as the splitting design says.
    ``stage=False`` (a preview): the files an application generates are not written."""
    ctx = session.submit_context()  # for its paths alone: handed to no plugin
    pairs: list[tuple[Job, RunSpec]] = []
    outcome = SubmitOutcome()
    with one_hand_over():  # what every target looks up the same, looked up once
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


def hand_to_backend(
    session: Session, job: Job, targets: Sequence[Job], keep_going: bool
) -> SubmitOutcome:
    """Prepare each target and submit them in bulk (never raises).

    A backend with an ``early_start_batch`` gets its first few targets as soon as they are
    prepared, then the rest in one more call: the first subjobs run while the others are
    prepared, instead of after."""
    early = type(job.backend).early_start_batch
    if 0 < early < len(targets):
        outcome = hand_over(session, job, targets[:early], keep_going)
        _test_pause()
        if outcome.failed and not keep_going:
            outcome.not_attempted.extend(t.fqid for t in targets[early:])
            return outcome
        rest = hand_over(session, job, targets[early:], keep_going)
        outcome.failed.update(rest.failed)
        outcome.not_attempted.extend(rest.not_attempted)
        outcome.real_bulk = outcome.real_bulk or rest.real_bulk
        return outcome
    return hand_over(session, job, targets, keep_going)


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


def hand_over(
    session: Session, job: Job, targets: Sequence[Job], keep_going: bool
) -> SubmitOutcome:
    """Prepare ``targets`` and submit them in one bulk call (never raises)."""
    pairs, outcome = prepare(session, targets, keep_going)
    if pairs:
        try:
            result = job.backend.submit_bulk(session.submit_context(job.backend), pairs, keep_going)
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


def summarise(outcome: SubmitOutcome, job_fqid: str) -> str:
    """The first failure, naming the subjob it came from (not the job the message names
    already: an unsplit job's failure is its own)."""
    first_fqid, first = next(iter(outcome.failed.items()))
    others = len(outcome.failed) - 1
    more = f" (and {others} more)" if others else ""
    skipped = f"; {len(outcome.not_attempted)} not attempted" if outcome.not_attempted else ""
    where = "" if first_fqid == job_fqid else f"{first_fqid}: "
    return f"{where}{first}{more}{skipped}"
