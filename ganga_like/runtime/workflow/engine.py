"""Deciding on waiting jobs, in the transaction that records what they wait for.

Whoever records a change of a job (the monitor's cycle, a user's kill or resubmission)
calls :func:`upstream_changed` in that same transaction: the jobs waiting for it or its
subjobs (found through the reverse index, ``index.py``) are looked at again. A waiting job
whose condition holds is marked ``DECIDED`` in the pending table, for a driver to hand to
submission (``driver.py``); one whose condition can no longer hold is ``skipped``, naming
the root failure, and its own dependents are looked at in turn (so they are skipped with
the same root cause); a skipped job whose upstream was resubmitted is ``waiting`` again
(re-armed), and its own dependents with it.

:func:`start_waiting` is ``submit()`` of a job with ``after=``: it checks what the job
waits for (each exists, not itself, no cycle), records its dependencies in the index and
either lets it be submitted now, skips it, or leaves it waiting.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ganga_like.errors import JobError
from ganga_like.model.dependencies import fqid_parts
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.repository.registry import Registry
from ganga_like.runtime.workflow import index, stream
from ganga_like.runtime.workflow.condition import Tally, Verdict, tally, verdict

__all__ = [
    "check_upstreams",
    "condition_of",
    "first_spoilt",
    "keeping_dependents",
    "rearm",
    "root_cause",
    "runs_again",
    "settle",
    "skip",
    "start_waiting",
    "upstream_changed",
    "upstream_removed",
    "waiting_dependents",
]

_SPOILT_LABELS = ("failed", "killed", "failed_frozen", "skipped")
_local = threading.local()


@contextmanager
def keeping_dependents() -> Iterator[None]:
    """Within it, the jobs waiting for what this thread changes are kept waiting (a kill
    with ``dependents="keep"``): each records the upstream, whose failure no longer skips
    it until that upstream runs again (a resubmission), whoever looks at it later."""
    _local.keep = True
    try:
        yield
    finally:
        _local.keep = False


# -- what a job waits for -------------------------------------------------------------


def _read_current(obj: Any) -> None:
    """Make this transaction fail at commit if ``obj`` was changed by a commit after we
    read it: a decision is never made on a state another session has just replaced."""
    jar = getattr(obj, "_p_jar", None)
    if jar is not None and getattr(obj, "_p_oid", None) is not None:
        jar.readCurrent(obj)


def _top(registry: Registry, fqid: str) -> Job | None:
    job_id, _ = fqid_parts(fqid)
    found = registry.get(job_id)
    return found if isinstance(found, Job) else None


def upstream_tally(registry: Registry, fqid: str) -> Tally | None:
    """The counts of upstream ``fqid`` (None when it does not exist): a master's from
    its status counter, a subjob's from its master's status chunks, O(1) either way."""
    top = _top(registry, fqid)
    if top is None:
        return None
    _, sub = fqid_parts(fqid)
    if sub is None and top.postprocessing_pending():
        # Completed, its mergers and checkers still to run: it may yet fail.
        return Tally(pending=max(top.subjob_count(), 1))
    if sub is None:
        if top.is_master:
            _read_current(top._counter)
            status = top.current_status()
            if status is Status.FAILED and top.postprocessing_failed():
                return Tally(spoilt=top.subjob_count())  # its merged result is wrong
            return tally(top.counts().items()) + _stream_tally(top)
        _read_current(top)
        return tally([(top.current_status(), 1)])
    label = top.subjob_status(sub)
    subjob = top.find_subjob(sub)
    if subjob is None:
        return None
    _read_current(subjob)
    return tally([(Status.parse(label or subjob.status), 1)])


def _stream_tally(top: Job) -> Tally:
    """What a streaming master adds to its subjobs' counts: one to go while it may still
    grow, one failed when what it read failed too often."""
    stream = top._stream
    if stream is None:
        return Tally()
    _read_current(stream)
    if stream.more_to_come():
        return Tally(pending=1)
    return Tally(spoilt=1) if stream.spoilt is not None else Tally()


def condition_of(registry: Registry, job: Job) -> tuple[Verdict, str]:
    """Whether ``job``'s condition holds, can no longer hold, or is undecided; with the
    reason (the root failure when it can no longer hold)."""
    total = Tally()
    for fqid in job.after:
        counts = upstream_tally(registry, fqid)
        if counts is None:
            return Verdict.NEVER, f"upstream {fqid} was removed"
        if counts.spoilt and not counts.pending and fqid_parts(fqid)[0] in job._kept_for:
            counts = Tally(pending=counts.total)  # kept waiting for its resubmission
        total = total + counts
    decided = verdict(total, job.when, job.allow_failed)
    if decided is Verdict.NEVER:
        return decided, root_cause(registry, job)[1]
    shown = ", ".join(job.after)
    if decided is Verdict.GO and job.when == "completed" and total.spoilt:
        # Held despite failures allow_failed tolerates: say so, not "completed".
        failed = f"{total.spoilt} failed of {total.total}"
        return decided, f"{shown} ended, {failed} (allow_failed={job.allow_failed})"
    return decided, f"{shown} {job.when}"


def _failure(job: Job) -> str:
    """How ``job`` (not a master) spoilt what waits for it, as its dependents say it."""
    status = Status.parse(job.status)
    if job.postprocessing_failed():
        return f"upstream {job.fqid} failed (its postprocessing failed)"
    if status is Status.FAILED:
        why = next((c for _t, _o, new, c in reversed(job.history) if new == "failed"), "")
        if why.startswith("postprocessing"):  # a checker rejected what it wrote
            return f"upstream {job.fqid} failed ({why})"
    if status is Status.SKIPPED and job._skipped_by is not None:
        return job._skipped_by[1]
    if status is Status.SKIPPED:
        return f"upstream {job.fqid} was skipped"
    if status is Status.KILLED:
        return f"upstream {job.fqid} was killed"
    code = f" (exit {job.exit_code})" if job.exit_code is not None else ""
    return f"upstream {job.fqid} {status.label.replace('_frozen', '')}{code}"


def first_spoilt(top: Job) -> Job | None:
    """A master's first failed, killed or skipped subjob (read from its status chunks)."""
    labels = top.subjob_statuses()
    if labels is None:
        found = (sj for sj in top.iter_subjobs() if sj.status in _SPOILT_LABELS)
        return next(found, None)
    for index_, label in enumerate(labels):
        if label in _SPOILT_LABELS:
            return top.find_subjob(index_)
    return None


def root_cause(registry: Registry, job: Job) -> tuple[str, str]:
    """(the upstream that spoilt ``job``'s condition, the root failure in words)."""
    for fqid in job.after:
        top = _top(registry, fqid)
        if top is None:
            return fqid, f"upstream {fqid} was removed"
        _, sub = fqid_parts(fqid)
        upstream = top if sub is None else top.find_subjob(sub)
        if upstream is None:
            return fqid, f"upstream {fqid} was removed"
        if upstream.is_master:
            spoilt = first_spoilt(upstream)
            if spoilt is not None:
                return fqid, _failure(spoilt)
            if upstream.postprocessing_failed():
                return fqid, f"upstream {fqid} failed (its postprocessing failed)"
            read = upstream._stream
            if read is not None and read.spoilt is not None:
                return fqid, read.spoilt  # what it streamed failed too often
        elif upstream.status in _SPOILT_LABELS:
            return fqid, _failure(upstream)
    first = job.after[0] if job.after else "?"
    if job.when == "failed":
        return first, f"upstream {', '.join(job.after)} ended with nothing failed"
    return first, f"upstream {first} cannot satisfy '{job.when}'"


# -- deciding -------------------------------------------------------------------------


def _skip(registry: Registry, job: Job, who: str) -> None:
    by, cause = root_cause(registry, job)
    job._skipped_by = (by, cause)
    job.change_status(Status.SKIPPED, f"{who}: skipped: {cause}")


def skip(registry: Registry, job: Job, because: tuple[str, str], who: str) -> None:
    """Waiting ``job`` is skipped for ``because`` (the upstream, the cause in words) found
    as it was to be submitted; what waits for it is decided on, in the caller's
    transaction."""
    job._skipped_by = because
    job.change_status(Status.SKIPPED, f"{who}: skipped: {because[1]}")
    registry.reindex(job)
    upstream_changed(registry, [job], who)


def settle(registry: Registry, candidates: Iterable[int], who: str) -> int:
    """Look again at the waiting and skipped jobs ``candidates`` and, transitively, at
    what waits for those that change; how many changed. In the caller's transaction."""
    root = registry.root
    queue = deque(candidates)
    seen: set[int] = set()
    changed = 0
    while queue:
        job_id = queue.popleft()
        if job_id in seen:
            continue
        seen.add(job_id)
        job = registry.get(job_id)
        if not isinstance(job, Job) or not job.after:
            continue
        if stream.is_streaming(job):  # grows, closes or opens again as what it reads
            decided, reason = condition_of(registry, job)
            if stream.advance(registry, job, decided, reason, who):
                queue.extend(d for _up, d in index.dependents_of_tree(root, job_id))
                changed += 1
            continue
        status = Status.parse(job.status)
        if status not in (Status.WAITING, Status.SKIPPED) or job._held:
            continue  # (a held job's condition held: it waits for room in its workflow)
        decided, reason = condition_of(registry, job)
        if status is Status.WAITING:
            if decided is Verdict.GO:
                table = index.pending(root, create=True)
                assert table is not None
                if table.get(job_id) in (None, index.CHECK):  # not decided yet
                    table[job_id] = index.DECIDED
                    job.log_event(f"{who}: {reason}: to be submitted")
                    changed += 1
                continue
            if decided is Verdict.NEVER:
                _skip(registry, job, who)
                registry.reindex(job)
                queue.extend(index.dependents(root, str(job_id)))
                changed += 1
            continue
        if decided is not Verdict.NEVER:  # skipped, and what it waited for runs again
            rearm(registry, job, who)
            queue.extend(index.dependents(root, str(job_id)))
            changed += 1
    return changed


def rearm(registry: Registry, job: Job, who: str) -> None:
    """Skipped ``job`` waits again; the driver looks at its condition next (in the
    caller's transaction)."""
    job._skipped_by = None
    job.change_status(Status.WAITING, f"{who}: re-armed: waiting for {', '.join(job.after)}")
    table = index.pending(registry.root, create=True)
    assert table is not None
    table[job.id] = index.CHECK
    registry.reindex(job)


def upstream_changed(registry: Registry, tops: Iterable[Job], who: str) -> int:
    """``tops`` (top-level jobs) or their subjobs changed in this transaction: decide on
    what waits for them. Costs the dependents of what changed, not the repository."""
    if getattr(_local, "keep", False):
        for top in tops:
            _keep_waiting(registry, top)
        return 0
    candidates = [
        dependent
        for top in tops
        for _upstream, dependent in index.dependents_of_tree(registry.root, top.id)
    ]
    return settle(registry, candidates, who) if candidates else 0


def _keep_waiting(registry: Registry, top: Job) -> None:
    """The jobs waiting for ``top`` or its subjobs wait for its resubmission."""
    for dependent in waiting_dependents(registry, top):
        job = registry.get(dependent)
        if isinstance(job, Job) and top.id not in job._kept_for:
            job._kept_for = (*job._kept_for, top.id)


def runs_again(registry: Registry, top: Job) -> None:
    """``top`` is resubmitted (or waits again) in this transaction: the jobs kept waiting
    for it stop being kept, so its next end decides for them as any upstream's does."""
    for _upstream, dependent in index.dependents_of_tree(registry.root, top.id):
        job = registry.get(dependent)
        if isinstance(job, Job) and top.id in job._kept_for:
            job._kept_for = tuple(kept for kept in job._kept_for if kept != top.id)


def upstream_removed(registry: Registry, job_id: int) -> int:
    """Job ``job_id`` was removed in this transaction: what waited for it (or for one of
    its subjobs) is skipped, and it no longer waits itself."""
    table = index.pending(registry.root)
    if table is not None:
        table.pop(job_id, None)
    candidates = [dependent for _up, dependent in index.dependents_of_tree(registry.root, job_id)]
    return settle(registry, candidates, "user") if candidates else 0


def waiting_dependents(registry: Registry, top: Job) -> list[int]:
    """The ids of the waiting jobs that wait for ``top`` or one of its subjobs."""
    found: list[int] = []
    for _upstream, dependent in index.dependents_of_tree(registry.root, top.id):
        job = registry.get(dependent)
        waiting = isinstance(job, Job) and Status.parse(job.status) is Status.WAITING
        if waiting and dependent not in found:
            found.append(dependent)
    return found


# -- submitting a job that waits --------------------------------------------------------


def check_upstreams(registry: Registry, job: Job | None, fqids: Iterable[str]) -> None:
    """JobError (one line) unless each of ``fqids`` exists and is not ``job`` itself."""
    own = None if job is None or job._p_jar is None else job.id
    for fqid in fqids:
        job_id, sub = fqid_parts(fqid)
        if own is not None and job_id == own:
            raise JobError(f"job {own} cannot wait for itself ({fqid})")
        top = registry.get(job_id)
        if not isinstance(top, Job):
            raise JobError(f"job {fqid} does not exist (removed?): a job cannot wait for it")
        if sub is not None and top.find_subjob(sub) is None:
            raise JobError(
                f"job {job_id} has no subjob {sub} (a job's subjobs exist once it is submitted)"
            )


def _check_no_cycle(registry: Registry, job: Job) -> None:
    """JobError naming the cycle when ``job`` waits, through others, for itself."""
    stack: list[tuple[int, tuple[int, ...]]] = [(job.id, (job.id,))]
    visited: set[int] = set()
    while stack:
        current, path = stack.pop()
        found = registry.get(current)
        if not isinstance(found, Job):
            continue
        for fqid in found.after:
            upstream, _ = fqid_parts(fqid)
            if upstream == job.id:
                chain = " -> ".join(str(i) for i in (*path, upstream))
                raise JobError(f"job {job.id} waits for itself through a cycle: {chain}")
            if upstream not in visited:
                visited.add(upstream)
                stack.append((upstream, (*path, upstream)))


def start_waiting(registry: Registry, job: Job) -> Verdict:
    """``submit()`` of new job ``job`` with ``after=``, in the caller's transaction: its
    dependencies go in the index; it is skipped (NEVER), left for submission now (GO), or
    waiting (WAIT), with a check by the driver of a transaction after this one."""
    check_upstreams(registry, job, job.after)
    _check_no_cycle(registry, job)
    runs_again(registry, job)
    for fqid in job.after:
        index.add_dependent(registry.root, fqid, job.id)
    decided, reason = condition_of(registry, job)
    if decided is Verdict.GO and stream.is_streaming(job):
        decided = Verdict.WAIT  # its first pieces are made by the check that follows
    if decided is Verdict.NEVER:
        _skip(registry, job, "user: submit")
    elif decided is Verdict.WAIT:
        job.change_status(Status.WAITING, f"user: submit; waiting for {reason}")
        table = index.pending(registry.root, create=True)
        assert table is not None
        table[job.id] = index.CHECK
    registry.reindex(job)
    return decided
