"""Killing a master's subjobs from its status chunks, the queued ones in bulk.

Which subjobs are active is read from the master's status chunks (no subjob loaded). The
backend is asked to kill them all at once (:meth:`IBackend.kill_subjobs`); then one
transaction records the kill: subjobs still queued (``submitted``) are killed in bulk
(``Job.kill_in_bulk``: the master's counter and chunks, and the record of what was
killed; their own records are brought up to date when they next change, see
``ganga_like.model.bulk_kill``), the few others (running, being submitted, held by a
throttle) one by one as before. The status chunks are read again inside the transaction:
a subjob that started or ended meanwhile is recorded as it now is.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from itertools import compress
from typing import TYPE_CHECKING

from ganga_like.errors import JobError
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.model.stop_points import stop_point
from ganga_like.repository.registry import Registry
from ganga_like.runtime.monitoring.killed_followed import to_unfollow
from ganga_like.runtime.submission.recording import record

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = ["HELD_CAUSE", "KILL_CAUSE", "kill_master", "record_kill"]

KILL_CAUSE = "user: kill"
HELD_CAUSE = "user: kill (held by its workflow's throttle)"
_QUEUED = Status.SUBMITTED.label
_ACTIVE = frozenset(status.label for status in Status if status.active)


def kill_master(session: Session, master: Job, statuses: Sequence[str]) -> dict[str, str]:
    """Kill every active subjob of ``master`` (``statuses``: its subjobs' labels, from its
    chunks) and every one held waiting; fqid -> error for those the backend could not
    kill, recorded as the plain path records them."""
    targets = _where(statuses, _ACTIVE)
    held = _where(statuses, frozenset({Status.WAITING.label}))
    if not targets and not held:
        raise JobError(f"job {master.fqid} is {master.current_status()}: nothing to kill")
    backend = master.backend
    ctx = session.submit_context(backend)
    # This process's monitor makes no cycle between the backend's kill and its record:
    # it would read the ends of the killed runs and record each subjob's on its own.
    with session.repo.action_lock:
        errors = backend.kill_subjobs(ctx, master, targets, True) if targets else {}
        stop_point("kill-requested")
        when = time.time()

        def recorded() -> None:
            record_kill(session.repo.registry(), master, targets, held, errors, when)

        record(session, master, recorded, f"recording the kill of job {master.fqid}")
    return errors


def record_kill(
    registry: Registry,
    master: Job,
    targets: Sequence[int],
    held: Sequence[int],
    errors: Mapping[str, str],
    when: float,
) -> None:
    """Record the kill of ``master``'s subjobs ``targets`` (active when the backend was
    asked; ``errors``: those it could not kill) and ``held`` (waiting for their
    workflow), as their statuses are now: queued ones in bulk, the others one by one."""
    now = master.subjob_statuses()
    assert now is not None
    failed = {int(fqid.rpartition(".")[2]): error for fqid, error in errors.items()}
    # 100,000 targets: nothing per subjob but a look, in C (itertools.compress).
    in_bulk = list(compress(targets, map(_QUEUED.__eq__, map(now.__getitem__, targets))))
    if failed:
        in_bulk = [index for index in in_bulk if index not in failed]
    for index, error in failed.items():
        master.subjob(index).log_event(f"kill failed: {error}")
    for index in compress(targets, map(_QUEUED.__ne__, map(now.__getitem__, targets))):
        if index not in failed:  # running, or moved on since the backend was asked
            _kill_one(registry, master.subjob(index), when)
    master.kill_in_bulk(in_bulk, KILL_CAUSE, when)
    pending = to_unfollow(registry.root, create=bool(in_bulk))
    if in_bulk and pending is not None:
        pending.insert(master.id)
    for index in held:
        subjob = master.subjob(index)
        if subjob.status == Status.WAITING.label:
            subjob.change_status(Status.KILLED, HELD_CAUSE, when=when)


def _where(labels: Sequence[str], wanted: frozenset[str]) -> list[int]:
    """The positions of ``labels`` in ``wanted``."""
    return list(compress(range(len(labels)), map(wanted.__contains__, labels)))


def _kill_one(registry: Registry, subjob: Job, when: float) -> None:
    if Status.parse(subjob.status).active:
        subjob.change_status(Status.KILLED, KILL_CAUSE, when=when)
    registry.unfollow(subjob)
