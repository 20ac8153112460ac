"""The rules of a batch poll, pure: what the scheduler's rows say in, changes out.

A batch system answers about a job in two places: its queue (fast, knows queued,
running and recently finished jobs) and its history (accounting: knows exit codes and
jobs the queue forgot, but trails the queue by a few seconds). A job the queue shows as
finished is reported once the history confirms it with its exit code, or after
``final_grace_seconds`` on the queue's word; a job neither lists is only concluded gone
after staying missing ``vanish_seconds`` AND ``vanish_cycles`` cycles (a pending array
element cancelled by hand vanishes from both: it was killed; a running one was lost).

Only changes are reported. What was last reported is kept in the memory a cycle returns,
which the caller keeps only once the cycle's results are committed. No processes, no
clock: the caller passes the times in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "FINAL",
    "Change",
    "Observation",
    "Seen",
    "Sighting",
    "Tracker",
    "TrackerSettings",
    "vanished",
]

FINAL = frozenset({"completed", "failed", "killed"})


@dataclass(frozen=True)
class Observation:
    """What one look at the scheduler says about a job or array element.

    ``status`` is one of the job model's statuses (submitted, running, completing,
    completed, failed, killed). ``exit_code`` is the program's exit status, or
    ``128 + signal`` when a signal ended it; ``None`` while the job has not ended, and
    when the scheduler's zero belongs to a job that did not succeed.
    """

    status: str
    reason: str
    exit_code: int | None = None
    # Why a failed job failed, machine-readable (see StatusReport.cause); "" for "failed".
    cause: str = ""


@dataclass(frozen=True)
class Sighting:
    """One row of the queue or of the history, read. ``observation`` None: a state the
    backend does not know (the job's status is then left as it is)."""

    observation: Observation | None
    started: bool = True  # history rows: the program started
    ended_at: float | None = None  # history rows: when it ended (wall clock)


@dataclass(frozen=True)
class Seen:
    """What the memory keeps about one scheduler id between cycles."""

    reported: str | None = None  # the status last reported
    final_since: float | None = None  # the queue said finished, the history not yet
    missing_since: float | None = None  # listed by neither
    missing_cycles: int = 0


@dataclass(frozen=True)
class Change:
    """A status to report for one scheduler id."""

    scheduler_id: str
    observation: Observation
    time: float  # wall clock
    started: bool  # False: the program never ran


class TrackerSettings(Protocol):
    @property
    def final_grace_seconds(self) -> float: ...
    @property
    def vanish_seconds(self) -> float: ...
    @property
    def vanish_cycles(self) -> int: ...


@dataclass
class Tracker:
    """One cycle: :meth:`queue` with the queue's rows, which returns the ids to ask the
    history about; then :meth:`history` with its rows (or ``None`` when it could not be
    asked); then :attr:`changes` and :attr:`seen` (the memory to keep)."""

    settings: TrackerSettings
    previous: Mapping[str, Seen]
    now: float  # monotonic: measures how long a job has been missing
    wall: float  # the time of reports the scheduler gives no time for
    history_off: bool = False  # the scheduler keeps no history: believe the queue at once
    lost: str = "lost: the scheduler no longer lists it"  # reasons of vanished jobs
    cancelled: str = "cancelled while pending: the scheduler no longer lists it"
    changes: list[Change] = field(default_factory=list)
    seen: dict[str, Seen] = field(default_factory=dict)
    _queue_final: dict[str, Observation] = field(default_factory=dict)
    _ask: list[str] = field(default_factory=list)

    def _report(self, sid: str, observation: Observation, when: float, started: bool) -> None:
        if self.previous.get(sid, Seen()).reported != observation.status:
            self.changes.append(Change(sid, observation, when, started))
        self.seen[sid] = Seen(reported=observation.status)

    def queue(self, tracked: Iterable[str], rows: Mapping[str, Sighting]) -> list[str]:
        """Read the queue's rows for the ``tracked`` ids; the ids the history must
        confirm or find (finished or missing in the queue) are returned."""
        for sid in tracked:
            row = rows.get(sid)
            observation = row.observation if row is not None else None
            if row is not None and observation is None:  # unknown state: keep as it is
                self.seen[sid] = self.previous.get(sid, Seen())
            elif observation is not None and observation.status not in FINAL:
                self._report(sid, observation, self.wall, True)
            else:
                if observation is not None:
                    self._queue_final[sid] = observation
                self._ask.append(sid)
        return list(self._ask)

    def ended_in_queue(self) -> set[str]:
        """The ids the queue showed ended after running (completed or failed), after
        :meth:`queue`; killed ones may have been cancelled while pending."""
        return {sid for sid, seen in self._queue_final.items() if seen.status != "killed"}

    def history(self, rows: Mapping[str, Sighting] | None) -> None:
        """Conclude for the ids :meth:`queue` returned; ``rows`` None: the history did
        not answer (then nothing is concluded about missing jobs)."""
        settings, now = self.settings, self.now
        for sid in self._ask:
            before = self.previous.get(sid, Seen())
            record = rows.get(sid) if rows is not None else None
            confirmed = record.observation if record is not None else None
            if record is not None and confirmed is not None and confirmed.status in FINAL:
                when = record.ended_at if record.ended_at is not None else self.wall
                self._report(sid, confirmed, when, record.started)
                continue
            in_queue = self._queue_final.get(sid)
            if in_queue is not None:
                # Finished in the queue, not (yet) in the history: wait for the exit code.
                since = before.final_since if before.final_since is not None else now
                if self.history_off or now - since >= settings.final_grace_seconds:
                    if in_queue.status == "completed":
                        in_queue = Observation("completed", in_queue.reason, 0)
                    started = not (in_queue.status == "killed" and before.reported == "submitted")
                    self._report(sid, in_queue, self.wall, started)
                else:
                    self.seen[sid] = Seen(before.reported, final_since=since)
                continue
            if rows is None and not self.history_off:
                self.seen[sid] = before  # the history did not answer: nothing concluded
                continue
            if record is not None and confirmed is None:  # unknown record: keep as it is
                self.seen[sid] = before
                continue
            first = before.missing_since if before.missing_since is not None else now
            cycles = before.missing_cycles + 1
            if now - first >= settings.vanish_seconds and cycles >= settings.vanish_cycles:
                gone = vanished(before.reported, self.lost, self.cancelled)
                self._report(sid, gone, self.wall, before.reported != "submitted")
            else:
                self.seen[sid] = Seen(before.reported, missing_since=first, missing_cycles=cycles)


def vanished(last_reported: str | None, lost: str, cancelled: str) -> Observation:
    """What a job listed nowhere any more became: lost if it was running; else it was
    cancelled while pending (the one way a pending array element disappears)."""
    if last_reported in ("running", "completing"):
        return Observation("failed", lost)
    return Observation("killed", cancelled)
