"""``j.stats()``: one pass over the (sub)jobs asked about, read from the repository.

A master's subjobs are read once each (their event log, status, exit code and recorded
resource use); its counts by status come from its status counter, which is kept as the
subjobs change (O(1)), never from counting them again. Nothing here reads a backend or a
file: what the stats show is what the repository holds.
"""

from __future__ import annotations

import heapq
import re
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from ganga_like.model.interfaces import IBackend
from ganga_like.model.job import Job
from ganga_like.model.periods import job_timeline
from ganga_like.model.status import Status
from ganga_like.model.times import ENDED
from ganga_like.runtime.stats.data import (
    Distribution,
    FailureGroup,
    JobStats,
    Requested,
    ResourceSummary,
    SlowRun,
    SubjobResources,
)
from ganga_like.runtime.stats.histogram import Histogram

__all__ = [
    "SLOWEST",
    "TIMELINE_POINTS",
    "failure_key",
    "job_stats",
    "plain_counts",
    "status_changes",
]

# How many of the longest runs are named, and how many points the counts over time keep.
SLOWEST = 5
TIMELINE_POINTS = 60
# Subjob records asked for from the storage at once.
PREFETCH = 500
_FAILED = frozenset({Status.FAILED.label, Status.FAILED_FROZEN.label})
_FINAL = frozenset(status.label for status in Status if status.final)
# What the monitor puts before a backend's reason in the event log ("Local: failed, ").
_BACKEND_PREFIX = re.compile(r"^[A-Za-z_][\w.]*: failed(?:, |$)")


def plain_counts(jobs: Iterable[Job]) -> dict[str, int]:
    """Counts by status label of ``jobs`` read one by one: what a master's counter keeps."""
    return dict(Counter(job.status for job in jobs))


def failure_reason(cause: str) -> str:
    """The last line of a failure's cause, without the backend's name in front."""
    lines = [line.strip() for line in cause.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return _BACKEND_PREFIX.sub("", last, count=1) or "failed"


def status_changes(history: Any) -> int:
    """How many status changes an event log holds: what identifies one run's failure."""
    return sum(1 for _w, old, new, _c in history if old != new)


def failure_key(job: Job, history: Any = None) -> tuple[int | None, str]:
    """What a failed (sub)job's failure group is known by: its exit code and the reason of
    its last failure (``failure_reason``)."""
    entries = job.history if history is None else history
    cause = next((c for _w, _o, new, c in reversed(entries) if new == "failed"), "")
    return job.exit_code, failure_reason(cause)


class _Pass:
    """What the pass over the (sub)jobs gathers."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.counts: Counter[str] = Counter()
        self.total = 0
        self.changes: list[tuple[float, str | None, str]] = []
        self.waits: list[float] = []
        self.runs: list[float] = []
        self.slow: list[tuple[float, str, str]] = []
        self.first_start: float | None = None
        self.ended = 0
        self.failures: dict[tuple[int | None, str], list[str]] = {}
        self.failed_changes: dict[tuple[int | None, str], list[int]] = {}  # by failure key
        self.causes: dict[tuple[int | None, str], str] = {}  # by failure key
        self.usage: list[SubjobResources] = []
        self.requests: dict[int, Requested] = {}  # by backend object: shared by subjobs
        self.masters = 0

    def add_master(self, master: Job) -> None:
        self.masters += 1
        counts = master.counts()  # the status counter's (O(1))
        self.counts.update({status.label: n for status, n in counts.items() if n})
        self.total += master.subjob_count()
        jar = master._p_jar
        batch: list[Job] = []
        for subjob in master.iter_subjobs():
            batch.append(subjob)
            if len(batch) == PREFETCH:
                self.add_batch(jar, batch)
                batch = []
        self.add_batch(jar, batch)

    def add_batch(self, jar: Any, subjobs: list[Job]) -> None:
        ghosts = [subjob for subjob in subjobs if subjob._p_changed is None]
        if jar is not None and ghosts:
            # Asked for together: from a repository server, one round trip for the batch
            # instead of one per subjob (a storage in this process ignores it).
            jar.prefetch(ghosts)
        for subjob in subjobs:
            self.add(subjob)

    def add_single(self, job: Job) -> None:
        self.counts[job.status] += 1
        self.total += 1
        self.add(job)

    def add(self, job: Job) -> None:
        history, status, fqid = job.history, job.status, job.fqid
        if history:
            self.changes.append((history[0][0], None, history[0][1]))
            self.changes.extend((w, old, new) for w, old, new, _c in history if old != new)
        stamps = job_timeline(history, None, status)
        queued, started = stamps.get(Status.SUBMITTED.label), stamps.get(Status.RUNNING.label)
        if queued is not None:
            if self.first_start is None or queued < self.first_start:
                self.first_start = queued
            if started is not None:
                self.waits.append(max(0.0, started - queued))
        end = next((stamps[label] for label in ENDED if label in stamps), None)
        if end is not None:
            self.ended += 1
        if started is not None and end is not None:
            self.runs.append(max(0.0, end - started))
            self.slow.append((end - started, fqid, status))
        elif started is not None and status not in _FINAL:
            self.slow.append((self.now - started, fqid, status))
        if status in _FAILED:
            self.add_failure(job, fqid, history)
        self.add_usage(job, fqid)

    def add_failure(self, job: Job, fqid: str, history: Any) -> None:
        key = failure_key(job, history)
        if key not in self.failures:
            backend = job.backend
            kind = type(backend) if isinstance(backend, IBackend) else IBackend
            self.causes[key] = kind.failure_cause(key[1])
        self.failures.setdefault(key, []).append(fqid)
        self.failed_changes.setdefault(key, []).append(status_changes(history))

    def add_usage(self, job: Job, fqid: str) -> None:
        backend = job.backend
        requested = self.requests.get(id(backend))
        if requested is None:
            asked = backend.requested() if isinstance(backend, IBackend) else {}
            memory, walltime, cores = (asked.get(k) for k in ("memory", "walltime", "cores"))
            requested = Requested(
                int(memory) if memory else None,
                float(walltime) if walltime else None,
                int(cores) if cores else None,
            )
            self.requests[id(backend)] = requested
        used = job.resources_used()
        if used is not None or requested != Requested():
            self.usage.append(SubjobResources(fqid, requested, used))

    def result(self, title: str, fqids: tuple[str, ...]) -> JobStats:
        remaining = sum(n for label, n in self.counts.items() if label not in _FINAL)
        remaining -= self.counts.get(Status.NEW.label, 0)
        return JobStats(
            title=title,
            total=self.total,
            counts=dict(self.counts),
            over_time=_over_time(self.changes),
            queue_wait=Distribution.of(self.waits),
            run_time=Distribution.of(self.runs),
            slowest=tuple(
                SlowRun(fqid, seconds, status)
                for seconds, fqid, status in heapq.nlargest(SLOWEST, self.slow)
            ),
            time_left=self.time_left(remaining),
            failures=tuple(
                FailureGroup(
                    code,
                    reason,
                    tuple(ids),
                    self.causes[code, reason],
                    number,
                    tuple(self.failed_changes[code, reason]),
                )
                for number, ((code, reason), ids) in enumerate(
                    sorted(self.failures.items(), key=lambda item: (-len(item[1]), item[1][0])),
                    start=1,
                )
            ),
            resources=_summary(self.usage),
            computed_at=self.now,
            fqids=fqids,
            unit="subjobs" if self.masters else "jobs",
            run_time_histogram=Histogram.of(self.runs),
        )

    def time_left(self, remaining: int) -> float | None:
        if remaining <= 0:
            # None still to end: all ended (0.0), or none ever submitted (no time to tell).
            ended = sum(n for label, n in self.counts.items() if label in _FINAL)
            return 0.0 if ended else None
        if not self.ended or self.first_start is None:
            return None
        rate = self.ended / max(self.now - self.first_start, 1e-6)
        return remaining / rate


def _over_time(
    changes: list[tuple[float, str | None, str]],
) -> tuple[tuple[float, dict[str, int]], ...]:
    """The counts by status after each change, at most ``TIMELINE_POINTS`` of them (evenly
    spread over the changes, the last always among them)."""
    if not changes:
        return ()
    changes.sort(key=lambda change: change[0])
    step = max(1, -(-len(changes) // TIMELINE_POINTS))
    counts: Counter[str] = Counter()
    points: list[tuple[float, dict[str, int]]] = []
    last = len(changes) - 1
    for index, (when, old, new) in enumerate(changes):
        if old is not None:
            counts[old] -= 1
        counts[new] += 1
        if index == last or (last - index) % step == 0:
            points.append((when, {label: n for label, n in counts.items() if n > 0}))
    return tuple(points)


def _summary(rows: list[SubjobResources]) -> ResourceSummary:
    measured = [row for row in rows if row.used is not None]
    if not measured:
        return ResourceSummary(per_subjob=tuple(rows))
    peak = max(measured, key=lambda row: row.used.max_rss if row.used else 0)
    memory_shares = [
        row.used.max_rss / row.requested.memory
        for row in measured
        if row.used is not None and row.requested.memory
    ]
    wall_shares = [
        row.used.wall / row.requested.walltime
        for row in measured
        if row.used is not None and row.requested.walltime
    ]
    assert peak.used is not None
    return ResourceSummary(
        measured=len(measured),
        user_cpu=sum(row.used.user_cpu for row in measured if row.used is not None),
        system_cpu=sum(row.used.system_cpu for row in measured if row.used is not None),
        wall=sum(row.used.wall for row in measured if row.used is not None),
        max_rss=peak.used.max_rss,
        max_rss_fqid=peak.fqid,
        max_memory_share=max(memory_shares) if memory_shares else None,
        max_walltime_share=max(wall_shares) if wall_shares else None,
        per_subjob=tuple(rows),
    )


def job_stats(jobs: Iterable[Job], title: str, now: float | None = None) -> JobStats:
    """The stats of ``jobs``: a master stands for its subjobs, any other job for itself."""
    found = _Pass(time.time() if now is None else now)
    fqids = []
    for job in jobs:
        fqids.append(job.fqid)
        if job.is_master:
            found.add_master(job)
        else:
            found.add_single(job)
    return found.result(title, tuple(fqids))
