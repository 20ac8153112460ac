"""A job's timeline: the times of its current period (round), in order.

A job's round starts each time it leaves an ended state (or ``new``) for a waiting or
running one: its submission, each resubmission, a skipped job re-armed to wait again. An
unsplit job's or a subjob's timeline (``job_timeline``) is ``new`` (when it was created),
then the states of its current round:

- ``waiting`` (for other jobs), ``submitting``, ``submitted``, ``running``,
  ``completing``: when it reached them in the round (once each: a round only goes forward);
- once it has ended, the end state it shows (``completed``, ``failed``, ``killed`` or
  ``skipped``; a frozen job, the one it was frozen in): when it last reached it in the
  round (a job failed
  by its postprocessing, when that failed), not counting unfreezing, which gives back the
  state it had; and a frozen job's frozen state, when it was frozen.

States of earlier rounds are left out (the job's log, ``j.history``, keeps them).

A master's period starts when it is submitted and starts again each time it leaves an
ended state (or ``new``) for a waiting or running one: a resubmission of its failed
subjobs, the submission of subjobs it never submitted, a resplit. In its current period:

- ``waiting``, ``submitting``, ``submitted``, ``running``: the first time the master or
  any subjob reached the state in that period (only the subjobs run in it count; only a
  master waits for other jobs, its subjobs are made when it stops waiting);
- its end state (``completed``, ``failed``, ``killed`` or ``skipped``, once it shows
  one): when it
  reached it, that is when the last subjob run in the period ended (as for a single job,
  unfreezing a subjob gives back when it ended, it does not end it again).

Which subjob run belongs to the period is read from the logs, never from comparing the
times a backend reported: a subjob's run counts from its first (re)submission logged after
the master's previous period ended (both times are recorded by a session, on one clock).

A backend reports when a subjob started and ended on its own clock, which may be a moment
behind the session's: a state is never shown later than the state after it (its time is
that one's), so the timeline always reads in order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ganga_like.model.times import ROUND_ENDS

__all__ = ["MasterPeriod", "job_timeline"]

# One log entry: (unix time, old status label, new status label, cause).
Entry = tuple[float, str, str, str]

# The states a master's timeline shows before its end, in order.
_STEPS = ("waiting", "submitting", "submitted", "running")
# Where a run is going on (a master shows running while a subjob is completing).
_ACTIVE = frozenset({*_STEPS, "completing"})
_FROZEN = frozenset({"completed_frozen", "failed_frozen"})
# Where no run is going on: leaving one of these for an active state starts a run.
_IDLE = frozenset({"new", *ROUND_ENDS, *_FROZEN})
# The order of a master's timeline; the end states are alternatives, one at most shown.
_TIMELINE = ("new", *_STEPS, *ROUND_ENDS)
# The order of a single job's timeline: its own states, ``completing`` and the frozen
# states too (one end state and one frozen state at most).
_JOB_TIMELINE = (
    "new",
    *_STEPS,
    "completing",
    *ROUND_ENDS,
    "completed_frozen",
    "failed_frozen",
)
# Each label's place in it; the end states share one, and so do the frozen ones.
_JOB_RANK = {
    label: rank
    for rank, labels in enumerate(
        (("new",), *((step,) for step in _STEPS), ("completing",), ROUND_ENDS, sorted(_FROZEN))
    )
    for label in labels
}


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


def _in_order(stamps: Mapping[str, float], order: Sequence[str] = _TIMELINE) -> dict[str, float]:
    """``stamps`` in the order of the timeline, each no later than the one after it."""
    ordered: dict[str, float] = {}
    later = float("inf")
    for label in reversed(order):
        if label in stamps:
            ordered[label] = later = min(stamps[label], later)
    return dict(reversed(ordered.items()))


def _job_in_order(stamps: dict[str, float]) -> dict[str, float]:
    """``_in_order(stamps, _JOB_TIMELINE)``, without a copy when they already are (as a
    log of one clock gives them): a master of many subjobs builds one per subjob."""
    rank, previous = -1, float("-inf")
    for label, when in stamps.items():
        this = _JOB_RANK[label]
        if this < rank or when < previous:
            return _in_order(stamps, _JOB_TIMELINE)
        rank, previous = this, when
    return stamps


def job_timeline(history: Sequence[Entry], created: float | None, status: str) -> dict[str, float]:
    """An unsplit job's or a subjob's timeline (see above), from its log, when it was
    created and the status it shows now."""
    steps: dict[str, float] = {}
    ends: dict[str, float] = {}
    frozen: dict[str, float] = {}
    last_end = None  # the end state the round reached last (a frozen job's, before it)
    for when, old, new, _cause in history:
        if old == new:
            continue
        if new in _ACTIVE:
            if old in _IDLE:  # a new round: the earlier one's states are left out
                steps, ends, frozen, last_end = {}, {}, {}, None
            if new not in steps:
                steps[new] = when
        elif new in ROUND_ENDS:
            if old not in _FROZEN or new not in ends:  # unfreezing gives back its end
                ends[new] = when
            last_end = new
        elif new in _FROZEN:
            frozen[new] = when
    stamps = {} if created is None else {"new": created}
    stamps.update(steps)
    end = status if status in ROUND_ENDS else last_end if status in _FROZEN else None
    if end is not None and end in ends:
        stamps[end] = ends[end]
        if status in frozen:
            stamps[status] = frozen[status]
    return _job_in_order(stamps)


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
            if new in ROUND_ENDS and old not in _FROZEN:  # unfreezing gives back, never ends
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
            if new in ROUND_ENDS:
                if old not in _FROZEN:  # unfreezing gives back the end it had
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
