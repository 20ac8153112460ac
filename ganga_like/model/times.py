"""When a job reached each of its states: ``j.time.submitted``, ``j.time.runtime()``.

Built from the event log when asked (nothing more is stored than the log and a job's
creation time). Every job's times are a timeline that reads in order: ``new`` (when it
was created), then the states of its current round, from its latest submission or
resubmission (ganga_like.model.periods). States of earlier rounds are left out
(``j.history`` keeps them); no time is later than the next state's.

An unsplit job or a subjob shows when it reached each state in the round (``completing``
and a frozen state too) and, once it has ended, the end state it shows. A master shows
``submitting``, ``submitted`` and ``running`` when the master or any subjob first reached
them in its current period, and the end state it shows (``completed``, ``failed`` or
``killed``) when its last subjob run in the period ended. ``details()`` adds the range of
each state over its subjobs: the first and last time over what each subjob shows (its own
current round).

It reads as a mapping too (``j.time["running"]``, ``set(j.time)``), by status label.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Iterator, Mapping

from ganga_like.errors import JobError

__all__ = [
    "ENDED",
    "ROUND_ENDS",
    "JobTimes",
    "NoSuchTimeAttributeError",
    "NoSuchTimeError",
    "TimeTable",
    "end_of_run",
]

# The states a run ends in (frozen states are a user's decision about a run that ended).
ENDED = ("completed", "failed", "killed")
# The states a round ends in: a run's, or ``skipped`` (a job that waited for others and
# will not run because they failed).
ROUND_ENDS = (*ENDED, "skipped")

# The states a table of times shows, in the order a job reaches them.
_ORDER = (
    "new",
    "waiting",
    "submitting",
    "submitted",
    "running",
    "completing",
    "completed",
    "failed",
    "killed",
    "skipped",
    "completed_frozen",
    "failed_frozen",
)


class NoSuchTimeError(JobError, KeyError):
    """``j.time["failed"]`` of a job never failed: one line, and a KeyError as for any
    mapping (so ``get`` and ``in`` work as usual)."""

    # KeyError quotes its message; the one line shown should read as written.
    __str__ = Exception.__str__


class NoSuchTimeAttributeError(JobError, AttributeError):
    """``j.time.bogus``: one line in the shell (a GangaError), and an AttributeError as
    for any object (so ``hasattr`` and ``getattr`` with a default work as usual)."""


def end_of_run(stamps: Mapping[str, float]) -> float | None:
    """When the latest run ended: the latest time a run-ending state was reached."""
    ends = [stamps[label] for label in ENDED if label in stamps]
    return max(ends) if ends else None


def _when(stamp: float | None) -> _dt.datetime | None:
    return None if stamp is None else _dt.datetime.fromtimestamp(stamp)


def _shown(stamp: float | None) -> str:
    when = _when(stamp)
    return "-" if when is None else when.isoformat(sep=" ", timespec="milliseconds")


class TimeTable(str):
    """A table as text that shows as itself (not quoted) in a shell or notebook."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


class JobTimes(Mapping[str, _dt.datetime]):
    """The times of one job's states (local time, naive datetimes as ``fromtimestamp``).

    ``stamps``: unix time by status label, its timeline in order. ``started``/``ended``:
    when the current round (a master: its current period) started running and when it
    ended; ``queued``: when it was submitted (the timeline's running, end state and
    submitted). ``subjobs``: for a master, the (first, last) unix time of each state over
    its subjobs' timelines.
    """

    def __init__(
        self,
        fqid: str,
        stamps: Mapping[str, float],
        *,
        queued: float | None = None,
        started: float | None = None,
        ended: float | None = None,
        subjobs: Mapping[str, tuple[float, float]] | None = None,
        subjob_count: int = 0,
    ) -> None:
        self._fqid = fqid
        self._stamps = dict(stamps)
        self._queued, self._started, self._ended = queued, started, ended
        self._subjobs = dict(subjobs) if subjobs is not None else None
        self._count = subjob_count

    # -- the mapping: status label -> datetime ------------------------------------------

    def __getitem__(self, label: str) -> _dt.datetime:
        if label not in self._stamps:
            if label in _ORDER:
                raise NoSuchTimeError(f"job {self._fqid} has not been {label}")
            raise NoSuchTimeError(f"job times have no {label!r}; they are: {', '.join(_ORDER)}")
        return _dt.datetime.fromtimestamp(self._stamps[label])

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._stamps, key=self._stamps.__getitem__))

    def __len__(self) -> int:
        return len(self._stamps)

    # -- attributes: j.time.submitted ---------------------------------------------------

    def __getattr__(self, name: str) -> _dt.datetime | None:
        if name in _ORDER:
            return _when(self._stamps.get(name))
        known = ", ".join(_ORDER)
        raise NoSuchTimeAttributeError(f"job times have no {name!r}; they are: {known}")

    def __dir__(self) -> Iterable[str]:
        return [*super().__dir__(), *_ORDER]

    # -- durations -----------------------------------------------------------------------

    def runtime(self) -> _dt.timedelta | None:
        """How long the current round took, from running to its end state as the rows show
        them (a master: its current period, from the first subjob's start to the last
        one's end); None until it has ended."""
        started, ended = self._started, self._ended
        if started is None or ended is None:
            return None
        return _dt.timedelta(seconds=max(0.0, ended - started))

    def waittime(self) -> _dt.timedelta | None:
        """How long the current round (a master: its current period) waited, from
        submitted to running as the rows show them; None until it ran.

        A backend may report a start a moment before the submission was recorded: that
        counts as no wait, never as a negative one."""
        queued, started = self._queued, self._started
        if queued is None or started is None:
            return None
        return _dt.timedelta(seconds=max(0.0, started - queued))

    @property
    def fqid(self) -> str:
        return self._fqid

    def rows(self) -> list[tuple[str, str]]:
        """(name, shown value) of each time reached and of the two durations, in the order
        a job goes through them: what ``details()`` shows, for other renderings."""
        rows = [(label, _shown(self._stamps[label])) for label in _ORDER if label in self._stamps]
        for name, value in (("runtime", self.runtime()), ("waittime", self.waittime())):
            rows.append((name, "-" if value is None else str(value)))
        return rows

    def subjob_rows(self) -> list[tuple[str, str, str]] | None:
        """For a master, (state, first, last) over its subjobs; None for any other job."""
        if self._subjobs is None:
            return None
        return [
            (label, _shown(self._subjobs[label][0]), _shown(self._subjobs[label][1]))
            for label in _ORDER
            if label in self._subjobs
        ]

    @property
    def subjob_count(self) -> int:
        return self._count

    def details(self) -> TimeTable:
        """Every time as a table (for a master, also the range over its subjobs)."""
        lines = [f"job {self._fqid}"]
        lines.extend(f"  {name:<17} {shown}" for name, shown in self.rows())
        subjobs = self.subjob_rows()
        if subjobs is not None:
            head = f"subjobs ({self._count})"
            lines.append(f"{head:<20}{'first':<23}  last")
            lines.extend(f"  {label:<17} {first:<23}  {last}" for label, first, last in subjobs)
        return TimeTable("\n".join(lines))

    def __repr__(self) -> str:
        return str(self.details())
