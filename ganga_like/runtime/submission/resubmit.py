"""Resubmission: failed or killed (sub)jobs run again, with what changed since their
last run recorded, and optionally a changed backend; also the submission of the subjobs
a master never submitted, which is recorded the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ganga_like.errors import JobError, RepositoryWriteError
from ganga_like.model.base import GangaObject
from ganga_like.model.job import Job
from ganga_like.model.parts import job_parts
from ganga_like.model.status import Status
from ganga_like.model.stop_points import stop_point
from ganga_like.runtime.submission.handover import (
    check_components,
    check_not_broken,
    hand_to_backend,
    interrupted,
    summarise,
)
from ganga_like.runtime.submission.intents import Intent, ours
from ganga_like.runtime.submission.recording import record, undo_submission
from ganga_like.runtime.workflow import engine as workflow

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = [
    "backend_changes",
    "describe_changes",
    "describe_component",
    "describe_job",
    "resubmit",
    "run_again",
]


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
        raise interrupted(session, job, "resubmit()") from None


def _resubmit(session: Session, job: Job, keep_going: bool, backend: GangaObject | None) -> bool:
    check_components(job, "resubmit")
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
    changes = backend_changes(job, backend) if backend is not None else {}
    return run_again(session, job, targets, keep_going, "resubmit", changes)


def backend_changes(job: Job, new: GangaObject) -> dict[str, Any]:
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
            backend._drop(name)  # back to the default
            backend._p_changed = True
        else:
            backend._assign(name, value._copy() if isinstance(value, GangaObject) else value)
    after = describe_component(backend)
    return describe_changes(
        {f"backend.{k}": v[:80] for k, v in before.items()},
        {f"backend.{k}": v[:80] for k, v in after.items()},
    )


def run_again(
    session: Session,
    job: Job,
    targets: Sequence[Job],
    keep_going: bool,
    verb: str,
    backend_changes: dict[str, Any] | None = None,
    who: str = "user",
    master_too: bool = True,
) -> bool:
    """Submit existing ``targets`` (a job, or subjobs of ``job``; ``who``, ``verb`` for the history)
    as a resubmission; ``backend_changes`` go to each and, if ``master_too``, the master."""
    master = job.master or job

    def record_intent() -> None:
        if ours(session.registry().submitting.get(master.id)):
            return  # an attempt whose answer was lost did commit
        if job.is_master:
            done = _change_backend(job, backend_changes) if backend_changes and master_too else ""
            with_changes = f" with {done}" if done else ""
            job.log_event(f"{who}: {verb} of {len(targets)} subjob(s){with_changes}")
        for target in targets:
            cause = f"{who}: {verb}"
            changed = _change_backend(target, backend_changes) if backend_changes else ""
            if changed:
                cause = f"{who}: {verb} with {changed}"
            if target.master is None:
                # Only top-level jobs can be edited between runs: say what changed.
                now = describe_job(target)
                changes = describe_changes(getattr(target, "_described", None) or {}, now)
                target._described = now
                if changes:
                    cause = f"{who}: resubmit with {changes}"
            target.change_status(Status.SUBMITTING, cause)
            target.submit_count = target.submit_count + 1
        _resubmitting(session, master, targets)

    record(session, master, record_intent, f"resubmitting job {job.fqid}")
    outcome = hand_to_backend(session, master, targets, keep_going)

    def record_outcome() -> None:
        registry = session.repo.registry()
        if registry.submitting.pop(master.id, None) is None:
            return  # an attempt whose answer was lost did commit
        for target in targets:
            message = outcome.failed.get(target.fqid)
            if message is not None or target.fqid in outcome.not_attempted:
                target.change_status(Status.FAILED, f"resubmission failed: {message}")
            elif Status.parse(target.status) is Status.SUBMITTING:
                target.change_status(Status.SUBMITTED, f"{who}: {verb}")
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
        record(session, master, record_outcome, f"recording the resubmission of job {job.fqid}")
    except RepositoryWriteError as exc:
        raise undo_submission(
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
        raise JobError(f"job {job.fqid}: {what} failed: {summarise(outcome, job.fqid)}")
    return True


def _resubmitting(session: Session, master: Job, targets: Sequence[Job]) -> None:
    """The intent of resubmitting ``targets`` (of ``master``), and what waits for it
    kept waiting no more: its next end decides for them."""
    ids = tuple(t.id for t in targets) if targets[0] is not master else ()
    session.registry().submitting[master.id] = Intent.now("resubmit", ids).stored()
    workflow.runs_again(session.registry(), master)


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
