"""Settling finished jobs: freeze, unfreeze, and resplit a subjob into new subjobs.

Freezing says "this result stands": a frozen subjob no longer counts in its master's
status and a master's resubmission passes it by. Resplitting splits a finished subjob
again with another splitter; its pieces join the same master as new subjobs (the next
ids) and are submitted at once, while the subjob itself is frozen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ganga_like.errors import GangaError, JobError
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.runtime import postprocessing
from ganga_like.runtime.submission.handover import check_not_broken
from ganga_like.runtime.submission.recording import record
from ganga_like.runtime.submission.resubmit import run_again
from ganga_like.runtime.submission.splitting import build_subjobs

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = ["freeze", "resplit", "unfreeze"]

_RESPLITTABLE = (Status.COMPLETED, Status.FAILED, Status.KILLED)


def freeze(session: Session, job: Job) -> bool:
    """Completed -> completed_frozen; failed or killed -> failed_frozen."""
    check_not_broken(job, "freeze")
    _settle(session, job, job.freeze, f"freezing job {job.fqid}")
    return True


def unfreeze(session: Session, job: Job) -> bool:
    """A frozen job or subjob back to the state it was frozen in."""
    check_not_broken(job, "unfreeze")
    _settle(session, job, job.unfreeze, f"unfreezing job {job.fqid}")
    return True


def _settle(session: Session, job: Job, change: Callable[[], None], what: str) -> None:
    """Make ``change`` to ``job``; a master it makes completed is postprocessed (by the
    monitor, as when its last subjob completes): its mergers see the subjobs that count."""
    top = job.master or job

    def record_settled() -> None:
        before = top.current_status()
        change()
        now = top.current_status()
        if top.is_master and before is not now is Status.COMPLETED and top.postprocessors:
            top._forget_postprocessing()
            postprocessing.note_completed(session.repo.registry(), top)

    record(session, top, record_settled, what)
    session.poke_monitor()


def resplit(session: Session, job: Job, splitter: Any) -> bool:
    """Split the finished subjob ``job`` again with ``splitter``: the pieces are new
    subjobs of its master, submitted at once; ``job`` is frozen."""
    check_not_broken(job, "resplit")
    master = job.master
    if master is None:
        what = "a master: resplit one of its subjobs" if job.is_master else "not a subjob"
        raise JobError(f"job {job.fqid} is {what}; only a finished subjob can be resplit")
    status = Status.parse(job.status)
    if status not in _RESPLITTABLE:
        raise JobError(
            f"job {job.fqid} is {status}: only a completed, failed or killed subjob can be resplit"
        )
    chosen = Job._validate("splitter", splitter)
    if chosen is None:
        raise JobError(f"job {job.fqid}: resplit needs a splitter, e.g. ArgSplitter(args=...)")
    pieces = _split(job, master, chosen)
    first, last = pieces[0].id, pieces[-1].id

    def record_pieces() -> None:
        master.add_subjobs(pieces)
        job.freeze(f"user: resplit into subjobs {first}-{last}")
        master.log_event(f"user: resplit of subjob {job.fqid} into {len(pieces)} subjob(s)")

    record(session, master, record_pieces, f"resplitting job {job.fqid}", fresh=pieces)
    return run_again(session, master, pieces, False, "submit")


def _split(job: Job, master: Job, splitter: Any) -> list[Job]:
    """The pieces of ``job``, numbered after its master's last subjob (nothing stored)."""
    try:
        variations = splitter.variations(job)
    except GangaError as exc:
        raise JobError(f"job {job.fqid}: splitting failed: {exc}") from None
    except Exception as exc:  # a splitter plugin's bug is reported, nothing is stored
        raise JobError(f"job {job.fqid}: the splitter failed: {type(exc).__name__}: {exc}") from exc
    if not variations:
        raise JobError(f"job {job.fqid}: the splitter produced no subjobs")
    tree = master._subjobs
    first_id = tree.maxKey() + 1 if tree else 0
    pieces = build_subjobs(master, variations, origin=job, first_id=first_id)
    for piece in pieces:
        piece._put("submit_count", 0)  # their submission below counts the first
    return pieces
