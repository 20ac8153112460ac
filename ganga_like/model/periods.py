"""A master's timeline: the times of its current period, from its log and its subjobs'.

A master's period starts when it is submitted and starts again each time it leaves an
ended state (or ``new``) for a waiting or running one: a resubmission of its failed
subjobs, the submission of subjobs it never submitted, a resplit. In its current period:

- ``submitting``, ``submitted``, ``running``: the first time the master or any subjob
  reached the state in that period (only the subjobs run in it count);
- its end state (``completed``, ``failed`` or ``killed``, once it shows one): when it
  reached it, that is when the last subjob run in the period ended.

Which subjob run belongs to the period is read from the logs, never from comparing the
times a backend reported: a subjob's run counts from its first (re)submission logged after
the master's previous period ended (both times are recorded by a session, on one clock).

A backend reports when a subjob started and ended on its own clock, which may be a moment
behind the session's: a state is never shown later than the state after it (its time is
that one's), so the timeline always reads in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ganga_like.model.times import ENDED

__all__ = ["MasterPeriod"]

# One log entry: (unix time, old status label, new status label, cause).
Entry = tuple[float, str, str, str]

# The states a master's timeline shows before its end, in order.
_STEPS = ("submitting", "submitted", "running")
# Where a run is going on (a master shows running while a subjob is completing).
_ACTIVE = frozenset({*_STEPS, "completing"})
# Where no run is going on: leaving one of these for an active state starts a run.
_IDLE = frozenset({"new", *ENDED, "completed_frozen", "failed_frozen"})
# The order of a master's timeline; the end states are alternatives, one at most shown.
_TIMELINE = ("new", *_STEPS, *ENDED)


def _starts_run(old: str, new: str) -> bool:
    return old in _IDLE and new in _ACTIVE


def _period_start(history: Sequence[Entry]) -> tuple[int, float | None]:
    """(index of the entry that started the current period, when the previous period
    ended) for a master's log; the previous end is None in its first period.

    The previous period ended when the master last reached the state the new one left
    (an end state or, after a partial submission, ``new``)."""
    start, left = 0, None
    for index, (_when, old, new, _cause) in enumerate(history):
        if old != new and _starts_run(old, new):
            start, left = index, old
    for when, old, new, _cause in reversed(history[:start]):
        if new == left and old != new:
            return start, when
    return start, None


def _run_entries(history: Sequence[Entry], since: float | None) -> Sequence[Entry]:
    """A subjob's entries from its first run started since ``since`` (all of them when
    None); none when no run of it started since.

    A start at the very time ``since`` counts: a clock too coarse to tell them apart more
    likely hides a resubmission right after the master ended (a script's ``wait()`` then
    ``resubmit()``) than a whole run of the previous period before that end."""
    if since is None:
        return history
    for index, (when, old, new, _cause) in enumerate(history):
        if old != new and _starts_run(old, new) and when >= since:
            return history[index:]
    return ()


def _in_order(stamps: Mapping[str, float]) -> dict[str, float]:
    """``stamps`` in the order of the timeline, each no later than the one after it."""
    ordered: dict[str, float] = {}
    later = float("inf")
    for label in reversed(_TIMELINE):
        if label in stamps:
            ordered[label] = later = min(stamps[label], later)
    return dict(reversed(ordered.items()))


class MasterPeriod:
    """Collects a master's current period from its log, then its subjobs' one by one."""

    def __init__(self, history: Sequence[Entry]) -> None:
        start, self._since = _period_start(history)
        self._firsts: dict[str, float] = {}
        self._own_ends: dict[str, float] = {}
        self._ends: list[float] = []
        for when, old, new, _cause in history[start:]:
            if old == new:
                continue
            self._arrive(new, when)
            if new in ENDED:
                self._own_ends[new] = when

    def _arrive(self, label: str, when: float) -> None:
        if label in _STEPS and (label not in self._firsts or when < self._firsts[label]):
            self._firsts[label] = when

    def add_subjob(self, history: Sequence[Entry]) -> None:
        """Count a subjob's run(s) in the period, if it ran in it."""
        ended: float | None = None
        for when, old, new, _cause in _run_entries(history, self._since):
            if old == new:
                continue
            self._arrive(new, when)
            if new in ENDED:
                ended = when
            elif new in _ACTIVE:
                ended = None  # run again: its end is that run's
        if ended is not None:
            self._ends.append(ended)

    def stamps(self, created: float | None, end: str | None) -> dict[str, float]:
        """The timeline: ``new`` (``created``), the steps reached in the period and, when
        the master shows the end state ``end``, when it reached it."""
        stamps = {} if created is None else {"new": created}
        stamps.update(self._firsts)
        if end is not None:
            when = max(self._ends) if self._ends else self._own_ends.get(end)
            if when is not None:
                stamps[end] = when
        return _in_order(stamps)
