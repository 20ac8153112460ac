"""The rows of ``ganga top``: the repository's active jobs and those that ended lately,
each with its counts by status, how fast its subjobs end and how long is left.

Read to be refreshed every second or two while other processes change the repository, so
it never loads a subjob: the jobs come from the status index (the live labels) and a look
at the newest few ids, a master's counts from its status counter, its start and end from
its own event log. What it costs is one record per job shown, whatever their subjobs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.model.times import ROUND_ENDS

__all__ = ["LIVE", "NEWEST", "BoardRow", "board_rows"]

# The labels of a job that is not done: what the status index is asked for.
LIVE = (
    Status.SUBMITTING.label,
    Status.SUBMITTED.label,
    Status.RUNNING.label,
    Status.COMPLETING.label,
    Status.WAITING.label,
)
_LIVE = frozenset(LIVE)
# How many of the newest job ids are looked at for jobs that ended lately.
NEWEST = 20


@dataclass(frozen=True)
class BoardRow:
    """One job of the board, plain data. ``counts`` are by status label: a master's over
    its subjobs, any other job's its own (one)."""

    job_id: int
    name: str
    status: str
    backend: str
    counts: dict[str, int] = field(default_factory=dict)
    started: float | None = None  # first submitted in its event log
    ended: float | None = None  # when its current round ended, if it has

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def done(self) -> int:
        """(Sub)jobs whose run ended (completed, failed, killed, frozen, skipped)."""
        return sum(n for label, n in self.counts.items() if Status.parse(label).final)

    @property
    def remaining(self) -> int:
        """(Sub)jobs still to end: submitting, queued, waiting, running, completing."""
        return sum(n for label, n in self.counts.items() if label in _LIVE)

    @property
    def live(self) -> bool:
        return self.status in _LIVE

    def rate(self, now: float) -> float | None:
        """(Sub)jobs ended per minute since it was first submitted; None before any."""
        if self.started is None or not self.done:
            return None
        until = self.ended if self.ended is not None and not self.live else now
        return self.done / max((until - self.started) / 60.0, 1e-6)

    def time_left(self, now: float) -> float | None:
        """Seconds until the last ends at that rate: 0 when all have, None when unknown
        (none ever submitted included)."""
        if not self.remaining:
            return 0.0 if self.done else None
        rate = self.rate(now)
        return None if not rate else self.remaining / rate * 60.0


def board_rows(
    registry: Any, now: float, recent: float, also: Iterable[int] = ()
) -> list[BoardRow]:
    """The live jobs, and those that ended within ``recent`` seconds before ``now`` (among
    the newest ids and ``also``, the ids a view showed before), newest first."""
    ids: set[int] = set(also)
    for label in LIVE:
        ids.update(registry.ids_with_status(label))
    ids.update(_newest(registry.jobs, NEWEST))
    rows = []
    for job_id in sorted(ids, reverse=True):
        job = registry.get(job_id)
        if not isinstance(job, Job):
            continue  # removed since, or a broken object: nothing to show of it
        row = board_row(job)
        if row.live or (row.ended is not None and now - row.ended <= recent):
            rows.append(row)
    return rows


def board_row(job: Job) -> BoardRow:
    status = job.current_status().label
    counts = {s.label: n for s, n in job.counts().items() if n} or {status: 1}
    started = ended = None
    for when, old, new, _cause in job.history:
        if old != new:
            if new == Status.SUBMITTED.label and started is None:
                started = when
            if new in ROUND_ENDS:
                ended = when
            elif new in _LIVE:
                ended = None  # resubmitted: the round it ended is over
    return BoardRow(
        job_id=job.id,
        name=job.name,
        status=status,
        backend=_class_name(job.stored().get("backend")),
        counts=counts,
        started=started,
        ended=ended,
    )


def _class_name(value: object) -> str:
    # The class of a referenced object is known without loading its record.
    return "" if value is None else type(value).__name__


def _newest(jobs: Any, count: int) -> list[int]:
    """The ``count`` highest keys of a BTree, read from its end."""
    found: list[int] = []
    try:
        key = jobs.maxKey()
    except ValueError:  # empty
        return found
    while len(found) < count:
        found.append(key)
        try:
            key = jobs.maxKey(key - 1)
        except ValueError:
            break
    return found
