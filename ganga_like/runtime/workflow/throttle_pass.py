"""The monitor's pass of throttles: after each cycle, the lease holder hands over the held
(sub)jobs each throttled workflow has room for (``throttle.py`` says how they are held and
counted)."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ganga_like.errors import GangaError
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.runtime.session import Session
from ganga_like.runtime.submission import actions
from ganga_like.runtime.workflow import throttle

__all__ = ["run_throttles"]

log = logging.getLogger("ganga_like.workflow")


def _held_subjobs(master: Job, how_many: int) -> list[Job]:
    """The first ``how_many`` held subjobs of ``master``, read from its status chunks."""
    labels = master.subjob_statuses()
    ids: Iterable[int]
    if labels is None:
        ids = (sj.id for sj in master.iter_subjobs() if sj.status == Status.WAITING.label)
    else:
        ids = (i for i, label in enumerate(labels) if label == Status.WAITING.label)
    chosen: list[Job] = []
    for sub in ids:
        subjob = master.find_subjob(sub)
        if subjob is not None and subjob.status == Status.WAITING.label:
            chosen.append(subjob)
            if len(chosen) == how_many:
                break
    return chosen


def run_throttles(session: Session) -> int:
    """Hand over what the throttled workflows have room for; how many (sub)jobs."""
    repo = session.repo
    repo.abort()  # what was committed since this thread last looked
    if not repo.connection().root().get(throttle.MEMBERS_KEY):
        return 0  # no workflow has members: no transaction, paid after every cycle
    plans: list[tuple[int, int]] = []

    def plan() -> None:
        plans.clear()
        registry = session.registry()
        members = registry.root.get(throttle.MEMBERS_KEY)
        for workflow, ids in list(members.items()) if members is not None else []:
            limit = throttle.limit_of(registry.root, workflow)
            if limit is None:
                limit = 1 << 30  # the throttle was lifted: everything held goes
            plans.extend(throttle.handovers(limit, throttle.members(registry, workflow, ids)))

    repo.in_transaction(plan, what="counting the throttled workflows' active jobs")
    done = 0
    for job_id, how_many in plans:
        try:
            done += _hand_over(session, job_id, how_many)
        except GangaError as exc:
            log.warning("job %s (held by its workflow's throttle): %s", job_id, exc)
    return done


def _hand_over(session: Session, job_id: int, how_many: int) -> int:
    job = session.registry().get(job_id)
    if not isinstance(job, Job):
        return 0
    cause = f"monitor: throttle: room in workflow {job.workflow!r}"
    if not job.is_master:
        actions.submit(session, job, keep_going=False, handed_over=cause)
        return 1
    subjobs = _held_subjobs(job, how_many)
    if subjobs:
        actions.release_held(session, job, subjobs, cause)
    return len(subjobs)
