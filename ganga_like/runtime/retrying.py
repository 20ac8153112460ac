"""Retries: the monitor resubmits a (sub)job that failed, as its job's ``retry`` says.

In the poll cycle that records the failure, and in the same transaction, the monitor
decides: when the top-level job's ``retry`` wants the failure's cause retried and its
attempts are not used up, the (sub)job goes on at once to ``submitting``, with an event
saying ``retry N of M after CAUSE`` and what was grown, and its key goes in a small
table in the repository root (``retry_pending``). The count of retries is read from the
event log, so it is committed with the decision: however often the monitor restarts,
a (sub)job is retried at most ``attempts`` times. A master is never final meanwhile (its
subjob is ``submitting``), so it does not turn failed between a failure and its retry.

After the cycle the lease holder hands the pending (sub)jobs to their backends, in the
steps of a user's resubmission: it records that it is handing one over, calls the
backend once, and records the outcome (submitted and followed, or failed). A holder that
finds a (sub)job recorded as being handed over (its predecessor died in the call) asks
the backend whether it received it; if it did, it is followed, otherwise whatever may
have reached the backend is cancelled and it is handed over again.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import transaction

from ganga_like.errors import GangaError
from ganga_like.model.base import GangaObject
from ganga_like.model.interfaces import (
    FAILURE_CAUSES,
    IBackend,
    IRetry,
    StatusReport,
    SubmitContext,
    SubmitOutcome,
)
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.model.stop_points import stop_point
from ganga_like.model.workspace import run_spec
from ganga_like.repository.registry import Registry, active_key
from ganga_like.repository.transaction_retry import RetryPolicy, retried
from ganga_like.repository.trees import KeyMap

__all__ = ["PENDING_KEY", "RETRY_PREFIX", "note_failed", "retries_done", "run_pending"]

log = logging.getLogger("ganga_like.retrying")

PENDING_KEY = "retry_pending"
RETRY_PREFIX = "monitor: retry "
# The states of a pending retry: decided (not handed over yet), or being handed over.
_DECIDED = 0
_HANDING = 1
_AT_ONCE = RetryPolicy(attempts=3, first_delay=0.0)
# Test hook: the process exits right after recording that it hands a retry over (as a
# crash would), so that a test can check what the next monitor does.  Unset outside tests.
TEST_EXIT_VARIABLE = "GANGA_LIKE_TEST_EXIT_WHILE_RETRYING"

T = TypeVar("T")


def _pending(root: Any, create: bool = False) -> KeyMap | None:
    found: KeyMap | None = root.get(PENDING_KEY)
    if found is None and create:
        found = root[PENDING_KEY] = KeyMap()  # merges concurrent inserts
    return found


def retries_done(job: Job) -> int:
    """How many times the monitor retried ``job`` since the user last (re)submitted it: the
    retries logged after its latest other move to ``submitting``."""
    count = 0
    for _when, _old, new, cause in reversed(job.history):
        if new != Status.SUBMITTING.label:
            continue
        if not cause.startswith(RETRY_PREFIX):
            break
        count += 1
    return count


def note_failed(registry: Registry, job: Job, report: StatusReport) -> bool:
    """Called by the monitor, in its cycle's transaction, for a (sub)job the cycle just
    moved to failed: retry it if its job's ``retry`` says so (True)."""
    top = job.master or job
    policy = top.stored().get("retry")
    if not isinstance(policy, IRetry) or not isinstance(job.backend, IBackend):
        return False
    cause = report.cause if report.cause in FAILURE_CAUSES else "failed"
    done = retries_done(job)
    if not policy.wants(cause, done):
        if done and policy.wants(cause, 0):
            job.log_event(f"monitor: not retried after {cause}: {done} retries done")
        return False
    grown = job.backend.grow(policy.factors())
    what = f"{RETRY_PREFIX}{done + 1} of {policy.limit()} after {cause}"
    if grown:
        what += f"; grown: {', '.join(grown)}"
    job.change_status(Status.SUBMITTING, what)
    job.submit_count = job.submit_count + 1
    pending = _pending(registry.root, create=True)
    assert pending is not None
    pending[active_key(job)] = _DECIDED
    return True


def has_pending(root: Any) -> bool:
    pending = _pending(root)
    return bool(pending)


def run_pending(
    conn: Any,
    tm: transaction.TransactionManager,
    context: Callable[[IBackend], SubmitContext],
    workspace: Path,
) -> int:
    """The lease holder's pass after its cycle: hand every pending retry to its backend;
    how many were handed over (or found received)."""
    pending = _pending(conn.root())
    if not pending:
        return 0
    done = 0
    for key in list(pending.keys()):
        try:
            done += _retry(conn, tm, context, workspace, key)
        except GangaError as exc:
            log.warning("retrying job %s: %s", _fqid(key), exc)
    return done


def _fqid(key: tuple[int, int]) -> str:
    job_id, sub = key
    return f"{job_id}.{sub}" if sub >= 0 else str(job_id)


def _retry(
    conn: Any,
    tm: transaction.TransactionManager,
    context: Callable[[IBackend], SubmitContext],
    workspace: Path,
    key: tuple[int, int],
) -> int:
    def transact(action: Callable[[], T]) -> T:
        # A conflict (a user acting on the job meanwhile) is retried at once.
        return retried(tm, action, what=f"retrying job {_fqid(key)}", policy=_AT_ONCE)

    def registry() -> Registry:
        return Registry(conn.root(), workspace)

    def find() -> Job | None:
        reg = registry()
        job_id, sub = key
        found = reg.lookup(job_id, sub if sub >= 0 else None)
        return found if isinstance(found, Job) else None

    def start() -> int | None:
        pending = _pending(conn.root())
        if pending is None or key not in pending:
            return None
        job = find()
        if (
            job is None
            or Status.parse(job.status) is not Status.SUBMITTING
            or not isinstance((job.master or job).backend, IBackend)
        ):
            del pending[key]  # removed, killed or recovered meanwhile: nothing to do
            return None
        state: int = pending[key]
        pending[key] = _HANDING
        return state

    state = transact(start)
    if state is None:
        return 0
    if os.environ.get(TEST_EXIT_VARIABLE):
        os._exit(75)
    job = find()
    assert job is not None
    top = job.master or job
    backend: IBackend = top.backend
    ctx = context(backend)
    if state == _HANDING:
        # The previous holder died while handing it over: did the backend get it?
        try:
            received = backend.received_bulk(ctx, [job]) or set()
        except (GangaError, OSError) as exc:
            log.warning("job %s: cannot ask the backend what it received: %s", job.fqid, exc)
            received = set()
        if job.fqid in received:
            # What the backend recorded on it (its scheduler id) is in this transaction:
            # committed first, as after a hand-over, or the job is followed by its old id.
            _commit(tm)
            transact(lambda: _record(registry(), find(), key, None, "received before a restart"))
            return 1
        try:
            backend.kill_bulk(ctx, [job])  # what may have reached it, unrecorded
        except GangaError as exc:
            log.warning("job %s: cancelling an interrupted retry failed: %s", job.fqid, exc)
    outcome = _hand_over(ctx, backend, job)
    message = outcome.failed.get(job.fqid)
    if message is None and job.fqid in outcome.not_attempted:
        message = "not attempted"
    # What the backend stored (scheduler ids) is in this transaction: commit it first,
    # then record the outcome (retried on conflicts, without calling the backend again).
    _commit(tm)
    transact(lambda: _record(registry(), find(), key, message, ""))
    return 1


def _commit(tm: transaction.TransactionManager) -> None:
    try:
        tm.commit()
    except Exception:
        tm.abort()
        raise


def _hand_over(ctx: SubmitContext, backend: IBackend, job: Job) -> SubmitOutcome:
    try:
        spec = run_spec(job, ctx.paths(job))
        outcome = backend.submit_bulk(ctx, [(job, spec)], keep_going=True)
        stop_point("handed-over")
        return outcome
    except GangaError as exc:
        return SubmitOutcome(failed={job.fqid: str(exc)})
    except Exception as exc:  # a plugin's bug must not leave the job submitting
        log.exception("backend %s failed", type(backend).__name__)
        return SubmitOutcome(failed={job.fqid: f"{type(exc).__name__}: {exc}"})


def _record(
    registry: Registry, job: Job | None, key: tuple[int, int], failed: str | None, how: str
) -> None:
    pending = _pending(registry.root)
    if pending is not None and key in pending:
        del pending[key]
    if job is None or Status.parse(job.status) is not Status.SUBMITTING:
        return
    if failed is not None:
        job.change_status(Status.FAILED, f"monitor: retry submission failed: {failed}")
    else:
        suffix = f" ({how})" if how else ""
        job.change_status(Status.SUBMITTED, f"monitor: retry submitted{suffix}")
        backend = job.backend
        assert isinstance(backend, GangaObject) and isinstance(backend, IBackend)
        registry.follow(job, backend.monitor_data(job))
    registry.reindex(job.master or job)
