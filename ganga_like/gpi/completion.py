"""``wait()`` and ``as_completed()``: waiting for several jobs and subjobs at once.

``wait(jobs, return_when="all", timeout=None)`` returns the list of those that finished
(every one of them for "all"; those finished when it returns, at least one, for "any").
``as_completed(jobs, timeout=None)`` yields each as it finishes, once. ``jobs`` is a job, a
subjob, a list of them, a slice (``jobs.select(...)``, ``j.subjobs``) or ids (``3``,
``"3.1"``). ``wait_async`` and ``as_completed_async`` are the same for an event loop (a
notebook: ``await wait_async(j)``, ``async for sj in as_completed_async(j.subjobs)``),
which goes on while they wait.

They read the repository (``runtime.waiting``), so they work from any session of the
gangadir; the monitor of whichever session holds the lease does the polling.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from ganga_like.errors import JobError, SchemaError
from ganga_like.gpi.arguments import given
from ganga_like.gpi.job import (
    Job,
    SubjobSlice,
    job_removed,
    removed_message,
    subjob_place,
    subjob_proxy,
)
from ganga_like.gpi.jobs_registry import jobs as job_registry
from ganga_like.gpi.lookups import check_timeout, is_whole
from ganga_like.gpi.progress import progress as show_progress
from ganga_like.gpi.proxy import current_session, unwrap, wrap
from ganga_like.gpi.slices import JobSlice
from ganga_like.model.job import Job as JobImpl
from ganga_like.runtime import waiting
from ganga_like.runtime.waiting import Watch

__all__ = ["as_completed", "as_completed_async", "wait", "wait_async"]

RETURN_WHEN = ("all", "any")
Key = tuple[int, int | None]
_EXPECTED = "a job, a subjob, a list or slice of them, or job ids (3, '3.1')"


class _Targets:
    """What to wait for, in the order given, once each, and the GPI object to give back
    for each (the one given, when a job object was given)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.keys: list[Key] = []
        self.place: dict[Key, int] = {}
        self.shown: dict[Key, Any] = {}  # a Job object, or (master, id) of a subjob
        self.tops: dict[int, JobImpl] = {}
        self.masters: dict[int, JobImpl] = {}

    def add_job(self, impl: JobImpl, proxy: Job | None = None) -> None:
        master = impl.master
        if master is not None:
            self.add_subjob(master, impl.id, proxy)
            return
        self._live(impl)
        key = (impl.id, None)
        if key not in self.shown:
            self.place[key] = len(self.keys)
            self.keys.append(key)
            self.tops[impl.id] = impl
            self.shown[key] = proxy if proxy is not None else impl

    def add_subjob(self, master: JobImpl, index: int, proxy: Job | None = None) -> None:
        key = (master.id, index)
        if key in self.shown:
            return
        if master.id not in self.masters:
            self._live(master)
            self.masters[master.id] = master
        self.place[key] = len(self.keys)
        self.keys.append(key)
        self.shown[key] = proxy if proxy is not None else (master, index)

    def _live(self, impl: JobImpl) -> None:
        if job_removed(impl):
            raise JobError(removed_message(impl, self.where))

    def job(self, key: Key) -> Job:
        shown = self.shown[key]
        if isinstance(shown, Job):
            return shown
        if isinstance(shown, tuple):
            return subjob_proxy(*shown)
        found: Job = wrap(shown)
        return found


def _targets(where: str, given_jobs: object) -> _Targets:
    targets = _Targets(where)
    if _one(given_jobs):
        _add(targets, given_jobs)
    elif isinstance(given_jobs, Iterable) and not isinstance(given_jobs, str | bytes | dict):
        for item in list(given_jobs):
            if not _one(item):
                raise SchemaError(f"{where}: jobs expected {_EXPECTED}, not {given(item)}")
            _add(targets, item)
    else:
        raise SchemaError(f"{where}: jobs expected {_EXPECTED}, not {given(given_jobs)}")
    return targets


def _one(item: object) -> bool:
    """A job, a slice, or an id (not a list of them)."""
    return isinstance(item, Job | JobSlice | str) or is_whole(item)


def _add(targets: _Targets, item: Any) -> None:
    if isinstance(item, SubjobSlice):
        master = item._master
        targets._live(master)
        statuses = master.subjob_statuses()
        ids = (
            range(len(statuses)) if statuses is not None else (i for i, _ in master.subjob_items())
        )
        for index in ids:
            targets.add_subjob(master, index)
    elif isinstance(item, JobSlice):
        for impl in item._impls():
            targets.add_job(impl)
    elif isinstance(item, Job):
        place = subjob_place(item)
        if place is not None:
            targets.add_subjob(*place, proxy=item)
        else:
            targets.add_job(unwrap(item), item)
    else:
        if isinstance(item, str) and not _an_id(item):
            raise SchemaError(f"{targets.where}: jobs expected {_EXPECTED}, not {given(item)}")
        _add(targets, job_registry(item))


def _an_id(text: str) -> bool:
    head, _, tail = text.strip().partition(".")
    return head.isdigit() and (tail == "" or tail.isdigit())


def _check_return_when(where: str, return_when: object) -> str:
    if isinstance(return_when, str) and return_when in RETURN_WHEN:
        return return_when
    raise SchemaError(f"{where}: return_when expected 'all' or 'any', not {given(return_when)}")


def _timed_out(where: str, watch: Watch, timeout: float | None) -> str:
    shown = watch.unfinished()
    more = ", ..." if watch.left > len(shown) else ""
    return (
        f"{where}: {watch.left} of {len(watch.keys)} not final after waiting {timeout} s "
        f"({', '.join(shown)}{more}); they go on"
    )


def _watch(targets: _Targets) -> Watch:
    return Watch(targets.keys, targets.tops, targets.masters)


def _looker(watch: Watch) -> Any:
    """What each look does: the jobs and subjobs seen finished since the last."""
    session = current_session()

    def present(job: JobImpl) -> bool:
        return not job_removed(job)

    def look() -> list[Key]:
        return watch.newly_finished(present, session)

    return look


def wait(
    jobs: Any, return_when: str = "all", timeout: float | None = None, progress: bool | None = None
) -> list[Job]:
    """Wait until every one of ``jobs`` has finished (``return_when="all"``, the default)
    or until one has (``"any"``); return those finished, in the order given (for "any",
    every one finished by then). A job has finished in a final status, its postprocessors
    run; a subjob in a final status. Raises WaitTimeoutError after ``timeout`` seconds,
    saying how many are not final; the jobs go on."""
    where = "wait()"
    when = _check_return_when(where, return_when)
    limit = check_timeout(where, timeout)
    if progress is not None and not isinstance(progress, bool):
        raise SchemaError(f"{where}: progress expected True or False, not {given(progress)}")
    targets = _targets(where, jobs)
    watch = _watch(targets)
    look = _looker(watch)
    done: list[Key] = []
    total = len(targets.keys)
    try:
        with show_progress(f"waiting for {total} jobs", show=progress) as bar:

            def check() -> list[Key] | None:
                done.extend(look())
                bar.update(len(done), total, f"{watch.left} not final")
                if watch.left == 0 or (when == "any" and done):
                    return done
                return None

            if total:
                waiting.watch(
                    current_session(), check, limit, lambda: _timed_out(where, watch, timeout)
                )
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"{where} stopped; the jobs go on ({watch.left} of {total} not final)"
        ) from None
    return [targets.job(key) for key in sorted(done, key=targets.place.__getitem__)]


async def wait_async(
    jobs: Any, return_when: str = "all", timeout: float | None = None
) -> list[Job]:
    """:func:`wait` for an event loop (``await wait_async(j)`` in a notebook): the loop
    goes on while it waits."""
    where = "wait_async()"
    when = _check_return_when(where, return_when)
    limit = check_timeout(where, timeout)
    targets = _targets(where, jobs)
    watch = _watch(targets)
    look = _looker(watch)
    done: list[Key] = []

    def check() -> list[Key] | None:
        done.extend(look())
        return done if watch.left == 0 or (when == "any" and done) else None

    if targets.keys:
        await waiting.watch_async(
            current_session(), check, limit, lambda: _timed_out(where, watch, timeout)
        )
    return [targets.job(key) for key in sorted(done, key=targets.place.__getitem__)]


def as_completed(jobs: Any, timeout: float | None = None) -> Iterator[Job]:
    """Yield each of ``jobs`` (see :func:`wait`) as it finishes, once each, until all
    have; those finished already come first. Raises WaitTimeoutError once ``timeout``
    seconds have passed since the call with some not final."""
    where = "as_completed()"
    limit = check_timeout(where, timeout)
    targets = _targets(where, jobs)
    return _completed(where, targets, limit)


def _completed(where: str, targets: _Targets, limit: float | None) -> Iterator[Job]:
    watch = _watch(targets)
    look = _looker(watch)
    deadline = None if limit is None else time.monotonic() + limit
    while watch.left:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        found = waiting.watch(
            current_session(), lambda: look() or None, left, lambda: _timed_out(where, watch, limit)
        )
        for key in found:
            yield targets.job(key)


def as_completed_async(jobs: Any, timeout: float | None = None) -> AsyncIterator[Job]:
    """:func:`as_completed` for an event loop: ``async for sj in as_completed_async(...)``."""
    where = "as_completed_async()"
    limit = check_timeout(where, timeout)
    targets = _targets(where, jobs)
    return _completed_async(where, targets, limit)


async def _completed_async(
    where: str, targets: _Targets, limit: float | None
) -> AsyncIterator[Job]:
    watch = _watch(targets)
    look = _looker(watch)
    deadline = None if limit is None else time.monotonic() + limit
    while watch.left:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        found = await waiting.watch_async(
            current_session(), lambda: look() or None, left, lambda: _timed_out(where, watch, limit)
        )
        for key in found:
            yield targets.job(key)
