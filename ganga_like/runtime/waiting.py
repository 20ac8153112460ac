"""Waiting for jobs and subjobs to finish, by reading the repository.

A waiter never asks a backend anything: the monitor (of this session, of another, or the
daemon) records what the backends say, and the waiter reads what was recorded. It sleeps
until the database learns of a new transaction (``repository.changes``), begins a new
transaction to see it, and looks again; it pokes the monitor so that the lease holder
polls soon.

Looking again is cheap whatever the number of subjobs: a master's subjob statuses are read
from its status chunks (``model.status_column``), never by loading subjobs, and only where
something moved. Every change of a subjob's status rewrites its master's status counter,
so a counter whose serial did not move means no subjob of that master changed; when it
did move, only the chunks whose serial moved are read again, with the few labels the
counter holds over them (:class:`SubjobGroup`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from ganga_like.errors import JobError, WaitTimeoutError
from ganga_like.model import status_column
from ganga_like.model.callbacks import due_table
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.repository.changes import CommitSignal
from ganga_like.runtime.workflow import index as workflow_index

__all__ = [
    "FINAL_LABELS",
    "RECHECK",
    "SubjobGroup",
    "Watch",
    "callbacks_due",
    "finished",
    "nothing_to_wait_for",
    "watch",
    "watch_async",
]

T = TypeVar("T")
Key = tuple[int, int | None]

# The labels of the states that end a run, as the status module declares them (a new
# final state is one of them without a change here).
FINAL_LABELS = frozenset(status.label for status in Status if status.final)
# Longest a waiter sleeps without a word from the database before it looks anyway (a
# transaction it could not be told of: a server it lost and found again).
RECHECK = 1.0


def finished(job: Job) -> bool:
    """A top-level job's run is over: a final status, and, completed, its postprocessors
    (mergers, checkers) have run, which may still turn it failed; and the callbacks
    (``j.on``) of the status it reached have been called, which may resubmit it."""
    status = job.current_status()
    if not status.final:
        return False
    if status is Status.COMPLETED and job.postprocessing_pending():
        return False
    return not callbacks_due(job)


def callbacks_due(job: Job) -> bool:
    """Whether a callback of top-level ``job`` is due or being called (an entry of the
    repository's due table): only its own entries are read, O(log n)."""
    jar = getattr(job, "_p_jar", None)
    if not job._callbacks or jar is None:
        return False
    table = due_table(jar.root())
    if table is None:
        return False
    entries = table.values(min=(job.id, 0), max=(job.id, sys.maxsize))
    return any(entry[0] == "call" for entry in entries)


def nothing_to_wait_for(session: Any, job: Job, status: Status) -> str | None:
    """Why waiting for ``job`` (now in ``status``) would only run out its timeout: never
    submitted (a master: the subjobs it did submit have finished and the others never
    were), or left submitting by this session until ganga next starts; else None. A job
    the monitor is handing to submission, what it waited for having ended, is ``new`` for
    a moment: it will move."""
    if status is Status.NEW:
        top = job.master or job
        handing = workflow_index.pending(session.registry().root)
        if handing is not None and top.id in handing:
            return None
        if job.is_master:
            never = job.counts().get(Status.NEW, 0)
            return (
                f"job {job.fqid} is new: {never} of its subjobs were never submitted (the "
                "others have finished); submit() runs them; nothing to wait for"
            )
        return f"job {job.fqid} is new: submit it first; nothing to wait for"
    if status is Status.SUBMITTING:
        left: Mapping[str, str] = session.left_submitting
        for fqid in (job.fqid, job.master.fqid if job.master is not None else None):
            line = left.get(fqid) if fqid is not None else None
            if line is not None:
                return f"{line}; nothing to wait for"
    return None


def _serial(record: Any) -> tuple[bytes | None, bytes]:
    """Which record, and which committed version of it, ``record`` is (loaded if a ghost:
    the serial of a ghost is not known)."""
    record._p_activate()
    return record._p_oid, record._p_serial


class SubjobGroup:
    """Subjobs of one master waited for, and which of them reached a final status.

    ``waiting`` holds those not seen final yet. A subjob's status as readers see it is the
    counter's pending label if it has one, else its chunk's label; so a status changed
    since the last look is in a chunk whose serial moved, or among the pending labels of
    the counter then or now. Only those are read again."""

    def __init__(self, master: Job, ids: Iterable[int]) -> None:
        self.master = master
        self.waiting = set(ids)
        self._token: tuple[Any, ...] | None = None
        self._chunk_marks: dict[int, tuple[bytes | None, bytes]] = {}
        self._pending_before: frozenset[int] = frozenset()
        self.labels_read = 0  # for tests: how many subjob statuses were looked at

    def newly_finished(self) -> list[int]:
        """The waited-for subjobs seen final for the first time, by id."""
        if not self.waiting:
            return []
        master = self.master
        counter = master._counter
        token = (_serial(master), _serial(counter) if counter is not None else None)
        if token == self._token:
            return []  # no subjob of this master changed since the last look
        self._token = token
        column = master.status_chunks()
        if column is None:  # no chunks (ids that are not positions): load the subjobs
            done = [i for i in self.waiting if _subjob_final(master, i)]
            self.labels_read += len(self.waiting)
        else:
            candidates = self._moved(column) & self.waiting
            self.labels_read += len(candidates)
            done = [i for i in candidates if status_column.status_of(column, i) in FINAL_LABELS]
        self.waiting.difference_update(done)
        return sorted(done)

    def _moved(self, column: status_column.StatusColumn) -> set[int]:
        """The positions whose label may differ from the last look."""
        moved = set(self._pending_before) | set(column.pending)
        self._pending_before = frozenset(column.pending)
        size = status_column.CHUNK
        for index, chunk in enumerate(column.chunks):
            mark = _serial(chunk)
            if self._chunk_marks.get(index) != mark:
                self._chunk_marks[index] = mark
                first = index * size
                moved.update(range(first, first + len(chunk.labels)))
        return moved


def _subjob_final(master: Job, index: int) -> bool:
    subjob = master.find_subjob(index)
    return subjob is not None and subjob.current_status().final


class Watch:
    """Jobs and subjobs waited for, in the order given, and which of them have finished.

    A top-level job (a master as a whole too) has finished when :func:`finished` says so;
    a subjob when its status is final. Each is reported once, the first time it is seen
    so, even if it is resubmitted afterwards."""

    def __init__(self, keys: list[Key], tops: Mapping[int, Job], masters: Mapping[int, Job]):
        self.keys = keys
        self._place = {key: n for n, key in enumerate(keys)}
        self._tops = dict(tops)
        wanted: dict[int, list[int]] = {job_id: [] for job_id in masters}
        for job_id, subjob_id in keys:
            if subjob_id is not None:
                wanted[job_id].append(subjob_id)
        self._groups = {job_id: SubjobGroup(masters[job_id], wanted[job_id]) for job_id in masters}
        self.left = len(keys)
        self.checks = 0  # for tests: how often it looked

    def newly_finished(self, present: Callable[[Job], bool], session: Any) -> list[Key]:
        """The jobs and subjobs seen finished for the first time, in the order given.
        ``present`` says whether a top-level job is still in the repository; a removed
        one, or one that nothing will move, is one line."""
        self.checks += 1
        done: list[Key] = []
        for job_id, job in list(self._tops.items()):
            if not present(job):
                raise JobError(f"job {job.fqid} was removed; nothing to wait for")
            if finished(job):
                del self._tops[job_id]
                done.append((job_id, None))
                continue
            problem = nothing_to_wait_for(session, job, job.current_status())
            if problem is not None:
                raise JobError(problem)
        for job_id, group in self._groups.items():
            if not group.waiting:
                continue
            if not present(group.master):
                raise JobError(f"job {job_id} was removed; nothing to wait for")
            done.extend((job_id, index) for index in group.newly_finished())
            if group.waiting:
                master = group.master
                problem = nothing_to_wait_for(session, master, master.current_status())
                if problem is not None:
                    raise JobError(problem)
        done.sort(key=self._place.__getitem__)
        self.left -= len(done)
        return done

    def unfinished(self, most: int = 3) -> list[str]:
        """Up to ``most`` of those not finished yet, by fqid, in the order given."""
        shown: list[str] = []
        for job_id, subjob_id in self.keys:
            if len(shown) == most:
                break
            if subjob_id is None:
                if job_id in self._tops:
                    shown.append(str(job_id))
            elif subjob_id in self._groups[job_id].waiting:
                shown.append(f"{job_id}.{subjob_id}")
        return shown


class _Looks:
    """The looking part of a wait, shared by :func:`watch` and :func:`watch_async`: each
    :meth:`look` sees the latest commits and asks ``check()``; between two, the waiter
    sleeps until ``signal.serial`` moves past ``seen``, for ``sleep`` seconds at most."""

    def __init__(
        self,
        session: Any,
        check: Callable[[], T | None],
        timeout: float | None,
        timed_out: Callable[[], str],
    ) -> None:
        self.session, self.check, self.timed_out = session, check, timed_out
        self.deadline = None if timeout is None else time.monotonic() + timeout
        self.signal: CommitSignal = session.repo.db.changes
        self.seen = 0
        self.sleep = RECHECK

    def look(self) -> Any:
        self.seen = self.signal.serial
        # Waiting is an action, like submit: inside a shell cell it commits what the
        # cell changed so far, so that new commits become visible.
        self.session.sync()
        answer = self.check()
        if answer is not None:
            return answer
        if self.deadline is not None:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise WaitTimeoutError(self.timed_out())
            self.sleep = min(remaining, RECHECK)
        self.session.poke_monitor()
        return None


def watch(
    session: Any, check: Callable[[], T | None], timeout: float | None, timed_out: Callable[[], str]
) -> T:
    """Look (``check()``) until it answers something other than None, in a new transaction
    each time, sleeping in between until the repository may have changed; after
    ``timeout`` seconds, WaitTimeoutError with the line ``timed_out()`` gives."""
    looks = _Looks(session, check, timeout, timed_out)
    while (answer := looks.look()) is None:
        looks.signal.wait_past(looks.seen, looks.sleep)
    found: T = answer
    return found


async def watch_async(
    session: Any, check: Callable[[], T | None], timeout: float | None, timed_out: Callable[[], str]
) -> T:
    """:func:`watch` for an event loop: the sleeping in between is awaited, so the loop
    (a notebook's kernel) goes on meanwhile. The looking itself runs on the loop's thread,
    whose connection the jobs were read in."""
    looks = _Looks(session, check, timeout, timed_out)
    while (answer := looks.look()) is None:
        await _changed_past(looks.signal, looks.seen, looks.sleep)
    found: T = answer
    return found


async def _changed_past(signal: CommitSignal, seen: int, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    woken: asyncio.Future[None] = loop.create_future()

    def settle() -> None:
        if not woken.done():
            woken.set_result(None)

    def wake() -> None:  # from whichever thread heard of the transaction
        # A loop closed meanwhile (RuntimeError) has nobody waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle)

    signal.subscribe(wake)
    try:
        if signal.serial == seen:
            await asyncio.wait([woken], timeout=timeout)
    finally:
        signal.unsubscribe(wake)
        woken.cancel()
