"""Postprocessing: a job's postprocessors, run once when it (a master: all of it) completes.

The monitor notices the completion in the cycle that commits it and records, in the same
transaction, the job as *pending* (its ``_postprocessing`` state, and its id in a small set
in the repository root). After the cycle it runs the pending jobs' postprocessors, in
Ganga's order (mergers, then checkers), and records the outcome with the state *done* (or
*failed*) in one more transaction. A crash in between leaves the job pending: the next
monitor to hold the lease runs its postprocessors again (allowed to replace what the
interrupted run wrote), and a job recorded done is never run again by the monitor.
``j.runPostProcessors()`` runs them by hand, through the same steps.

A by-hand run records the job pending too (so that a crash in it is resumed by the
monitor), which the monitor would take for its own work and run at the same moment, into
the same files. Whoever runs a job's postprocessors holds ``<workspace>/<id>/
postprocessing.lock`` (an exclusive ``flock``, released by the kernel when its holder dies)
from the first transaction to the last: the monitor leaves a job whose lock is held
pending for a later cycle; a by-hand run waits for the lock (the monitor holds it only
while it looks at or runs the job's postprocessors; a by-hand run is refused beforehand
when the job is seen pending).

Postprocessors only read the repository's objects and write files; every change to the
repository is made here, in the transactions above.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import transaction
from BTrees.IIBTree import IITreeSet

from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.errors import GangaError, JobError
from ganga_like.model.interfaces import (
    POSTPROCESSOR_KINDS,
    IPostProcessor,
    PostProcessContext,
    config_of,
)
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.repository.registry import Registry
from ganga_like.repository.transaction_retry import RetryPolicy, retried
from ganga_like.repository.trees import IdSet
from ganga_like.runtime.workflow import engine as workflow

__all__ = [
    "METADATA_FILE",
    "PENDING_KEY",
    "note_completed",
    "postprocess",
    "run_pending",
]

log = logging.getLogger("ganga_like.postprocessing")

PENDING_KEY = "postprocessing_pending"
# Retried at once, three times: see run_pending.
_AT_ONCE = RetryPolicy(attempts=3, first_delay=0.0)
METADATA_FILE = "__metadata__.json"
# Postprocessing run without a session's configuration (by hand, in tests): every plugin
# finds its sections missing, and says so, rather than reading defaults silently.
NO_CONFIG = ConfigSnapshot({})

T = TypeVar("T")
Transact = Callable[[Callable[[], T]], T]


def _notifiers(job: Job) -> list[IPostProcessor]:
    return [
        pp for pp in job.postprocessors if isinstance(pp, IPostProcessor) and pp.kind == "notifier"
    ]


def _pending(root: Any, create: bool = False) -> IITreeSet | None:
    found: IITreeSet | None = root.get(PENDING_KEY)
    if found is None and create:
        found = root[PENDING_KEY] = IdSet()  # merges concurrent inserts
    return found


def note_completed(registry: Registry, top: Job) -> bool:
    """Called by the monitor for a top-level job its cycle changed: when it has just
    completed and has postprocessors, record it pending (in the cycle's transaction)."""
    if not isinstance(top, Job) or top.master is not None:
        return False
    state = top._postprocessing
    if state is not None and state[0]:
        return False  # pending, done or failed for this run already
    if not top.postprocessors:
        return False
    status = top.current_status()
    # A failed job has only its notifiers to run (nothing to merge or check).
    if status is not Status.COMPLETED and not (status is Status.FAILED and _notifiers(top)):
        return False
    top._postprocessing = ("pending", 0, "", state[3] if state is not None else ())
    pending = _pending(registry.root, create=True)
    assert pending is not None
    pending.insert(top.id)
    return True


@dataclass
class Outcome:
    """What one run of a job's postprocessors found; applied in one transaction."""

    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    merger_error: str | None = None
    failed: dict[str, str] = field(default_factory=dict)  # fqid -> why a checker failed it


def _targets(job: Job) -> list[Job]:
    """What mergers and checkers look at: each subjob (a frozen one's result stands as it
    is, and a resplit one's work was done again by its pieces), or the job itself when it
    was not split."""
    if not job.is_master:
        return [job]
    return [sj for sj in job.iter_subjobs() if not Status.parse(sj.status).frozen]


def _read_metadata(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc)
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        log.warning("%s is not JSON (%s): metadata ignored", path, exc)
        return None
    return data if isinstance(data, dict) else {"value": data}


def _for(pp: IPostProcessor, ctx: PostProcessContext, config: ConfigSnapshot) -> PostProcessContext:
    """``ctx`` as ``pp`` is given it: with its configuration sections and no other."""
    return replace(ctx, config=config_of(pp, config))


def _describe(pp: Any, exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if not isinstance(exc, GangaError):
        text = f"{type(exc).__name__}: {text}"
    return f"{type(pp).__name__}: {text}"


def run_postprocessors(
    job: Job,
    workspace: Path,
    resumed: bool,
    written: frozenset[str],
    merge_and_check: bool = True,
    config: ConfigSnapshot = NO_CONFIG,
) -> Outcome:
    """Read metadata and run ``job``'s mergers and checkers in Ganga's order (none when not
    ``merge_and_check``), each given its part of ``config``; change nothing in the
    repository (the outcome says what to change)."""
    outcome = Outcome()
    plain = PostProcessContext(workspace)
    for target in [job, *job.iter_subjobs()] if job.is_master else [job]:
        found = _read_metadata(plain.paths(target).output / METADATA_FILE)
        if found is not None:
            outcome.metadata[target.fqid] = found
    if not merge_and_check:
        return outcome
    ctx = PostProcessContext(workspace, written, resumed, outcome.metadata)
    ordered = sorted(
        (pp for pp in job.postprocessors if isinstance(pp, IPostProcessor)),
        key=lambda pp: POSTPROCESSOR_KINDS.index(pp.kind),
    )
    subjobs = _targets(job) if job.is_master else []
    for pp in ordered:
        if pp.kind != "merger":
            continue
        if not subjobs:
            continue  # nothing to merge: the job was not split
        try:
            outcome.written.extend(pp.merge(job, subjobs, _for(pp, ctx, config)))
        except (Exception, SystemExit) as exc:  # user code (CustomMerger) may raise anything
            outcome.merger_error = _describe(pp, exc)
            return outcome
    for pp in ordered:
        if pp.kind != "checker":
            continue
        for target in pp.check_targets(job):
            if target.fqid in outcome.failed:
                continue
            try:
                reason = pp.check(target, _for(pp, ctx, config))
            except (Exception, SystemExit) as exc:  # user code may raise anything, even exit
                reason = _describe(pp, exc)
            else:
                reason = f"{type(pp).__name__}: {reason}" if reason else None
            if reason:
                outcome.failed[target.fqid] = reason
    return outcome


def _apply(registry: Registry, job: Job, outcome: Outcome) -> None:
    for target in [job, *job.iter_subjobs()] if job.is_master else [job]:
        found = outcome.metadata.get(target.fqid)
        if found is not None:
            target.metadata = found
    state = job._postprocessing
    attempts = state[1] if state is not None else 0
    earlier = state[3] if state is not None else ()
    written = tuple(dict.fromkeys((*earlier, *outcome.written)))
    if outcome.merger_error is not None:
        job.fail_postprocessing(outcome.merger_error, written)
        registry.reindex(job)
        return
    for target in _targets(job):
        reason = outcome.failed.get(target.fqid)
        if reason and Status.parse(target.status) is Status.COMPLETED:
            target.change_status(Status.FAILED, f"postprocessing: {reason}")
    master_reason = outcome.failed.pop(job.fqid, None) if job.is_master else None
    if master_reason is not None:
        # A checker of the master's own (merged) output: the master fails as when a merger
        # fails, whatever its subjobs say.
        job.fail_postprocessing(master_reason, written)
    else:
        job._postprocessing = ("done", attempts, "", written)
    registry.reindex(job)
    if job.is_master and outcome.failed:
        listed = ", ".join(f"{fqid} ({why})" for fqid, why in list(outcome.failed.items())[:5])
        more = len(outcome.failed) - 5
        tail = f" and {more} more" if more > 0 else ""
        job.log_event(f"postprocessing failed {len(outcome.failed)} subjob(s): {listed}{tail}")


LOCK_NAME = "postprocessing.lock"


@contextlib.contextmanager
def running_here(workspace: Path, job_id: int, wait: bool) -> Iterator[bool]:
    """Hold the lock of job ``job_id``'s postprocessing while the block runs: True, or
    False when another run (a thread or process of any session) holds it now and not
    ``wait``. A job without a workspace directory has nothing to merge into: True, with
    no lock."""
    try:
        fd = os.open(
            os.path.join(workspace, str(job_id), LOCK_NAME),
            os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
            0o600,
        )
    except FileNotFoundError:
        yield True
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True  # closing the descriptor releases the lock
    finally:
        os.close(fd)


def postprocess(
    job_id: int,
    registry: Callable[[], Registry],
    transact: Transact[Any],
    workspace: Path,
    by_hand: bool = False,
    config: ConfigSnapshot = NO_CONFIG,
) -> bool:
    """Run the postprocessors of job ``job_id`` through the recorded steps; False when
    there was nothing to do (the monitor: the job is no longer pending, or another run of
    them is under way: it is left pending)."""
    with running_here(workspace, job_id, wait=by_hand) as mine:
        if not mine or not _run_steps(job_id, registry, transact, workspace, by_hand, config):
            return False
    if not by_hand:
        _notify(job_id, registry, transact, workspace, config)
    return True


def _run_steps(
    job_id: int,
    registry: Callable[[], Registry],
    transact: Transact[Any],
    workspace: Path,
    by_hand: bool,
    config: ConfigSnapshot,
) -> bool:
    """The recorded steps of :func:`postprocess`, under the job's lock: pending, run,
    outcome; False when there was nothing to do."""

    def start() -> tuple[bool, frozenset[str], bool] | None:
        reg = registry()
        job = reg.get(job_id)
        pending = _pending(reg.root, create=by_hand)
        if not isinstance(job, Job):
            if pending is not None and job_id in pending:
                pending.remove(job_id)
            return None
        state = job._postprocessing
        if not by_hand and (state is None or state[0] != "pending"):
            if pending is not None and job_id in pending:
                pending.remove(job_id)
            return None
        attempts = state[1] if state is not None and state[0] == "pending" else 0
        written = state[3] if state is not None else ()
        job._postprocessing = ("pending", attempts + 1, "", written)
        assert pending is not None
        pending.insert(job_id)
        # The monitor has only the notifiers of a job that failed by itself to run.
        ended_failed = job.current_status() is Status.FAILED
        return attempts > 0, frozenset(written), by_hand or not ended_failed

    started = transact(start)
    if started is None:
        return False
    resumed, written, merge_and_check = started
    job = registry().get(job_id)
    outcome = run_postprocessors(job, workspace, resumed, written, merge_and_check, config)

    def finish() -> None:
        reg = registry()
        stored = reg.get(job_id)
        if isinstance(stored, Job):
            _apply(reg, stored, outcome)
            # What waits for a job with postprocessors waits for them: decided now.
            workflow.upstream_changed(reg, [stored], "monitor")
        pending = _pending(reg.root)
        if pending is not None and job_id in pending:
            pending.remove(job_id)

    transact(finish)
    return True


def _notify(
    job_id: int,
    registry: Callable[[], Registry],
    transact: Transact[Any],
    workspace: Path,
    config: ConfigSnapshot,
) -> None:
    """Run the notifiers of a job whose outcome is recorded (done: never again, so a mail
    is sent at most once); a mail not sent is one line in the job's event log."""
    job = registry().get(job_id)
    if not isinstance(job, Job):
        return
    ctx = PostProcessContext(workspace)
    problems: list[str] = []
    for pp in _notifiers(job):
        try:
            problems.extend(pp.notify(job, _for(pp, ctx, config)))
        except (Exception, SystemExit) as exc:  # a notifier must never stop the monitor
            problems.append(_describe(pp, exc))
    if not problems:
        return
    for line in problems:
        log.warning("job %s: %s", job_id, line)

    def record() -> None:
        stored = registry().get(job_id)
        if isinstance(stored, Job):
            for line in problems:
                stored.log_event(line)

    transact(record)


def run_pending(
    conn: Any,
    tm: transaction.TransactionManager,
    workspace: Path,
    config: ConfigSnapshot = NO_CONFIG,
) -> int:
    """The monitor's pass after its cycle: postprocess every pending job; how many."""

    def transact(action: Callable[[], T]) -> T:
        # A conflict (a user changing the job meanwhile) is retried at once: redoing the
        # postprocessing because its outcome could not be recorded is what is avoided.
        return retried(tm, action, what="postprocessing", policy=_AT_ONCE)

    def registry() -> Registry:
        return Registry(conn.root(), workspace)

    # Read without a transaction of its own: this cycle's commit (which recorded what
    # just completed) is in view, and what another process recorded shows next cycle.
    pending = _pending(conn.root())
    if not pending:
        return 0
    ids = list(pending)
    done = 0
    for job_id in ids:
        try:
            done += postprocess(job_id, registry, transact, workspace, config=config)
        except GangaError as exc:
            log.warning("postprocessing job %s: %s", job_id, exc)
    return done


def check_can_postprocess(job: Job) -> None:
    """``runPostProcessors()`` needs a top-level job that has ended (completed or failed)."""
    if job.master is not None:
        raise JobError(f"job {job.fqid} is a subjob: run the postprocessors of its master")
    status = job.current_status()
    if status not in (Status.COMPLETED, Status.FAILED):
        raise JobError(f"job {job.fqid} is {status}: postprocessors run once it has ended")


def run_by_hand(repo: Any, job: Job, config: ConfigSnapshot = NO_CONFIG) -> bool:
    """``j.runPostProcessors()``: run them again now, in this process; True when the job
    is completed afterwards."""
    check_can_postprocess(job)
    if not job.postprocessors:
        raise JobError(f"job {job.fqid} has no postprocessors")
    if job.postprocessing_pending():
        # Running them here too would merge twice at once, into the same files.
        raise JobError(
            f"job {job.fqid}: its postprocessors are being run by the monitor; wait() for them"
        )
    top_id = job.id

    def transact(action: Callable[[], T]) -> T:
        result: T = repo.in_transaction(action, what=f"postprocessing job {top_id}")
        return result

    postprocess(top_id, repo.registry, transact, repo.workspace, by_hand=True, config=config)
    return job.current_status() is Status.COMPLETED
