"""A master's ``j.time`` reads in order and is its current period, whatever its subjobs do.

Real masters and subjobs (the model's Job, its transition table, its log) driven through
random legal state changes, as a session and a backend would make them. The session's
clock is a controlled one (times recorded by the model), so that every run is repeatable;
a backend reports its own times, which may lag or lead the session's. The same with real
Local jobs in a real repository: tests/test_job_lifecycle.py.
"""

from __future__ import annotations

import datetime as dt
import types
from dataclasses import dataclass
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from ganga_like.model import job as job_module
from ganga_like.model.job import Job
from ganga_like.model.status import TRANSITIONS, Status
from ganga_like.model.times import ENDED

from .split_jobs import submitted_model_master

_TIMELINE = ("new", "submitting", "submitted", "running", *ENDED)
# A subjob's states, in the order a job reaches them.
_ORDER = (*_TIMELINE[:4], "completing", *ENDED, "completed_frozen", "failed_frozen")
_IDLE = {"new", *ENDED}
# States a backend reports (the monitor records them at the backend's time).
_REPORTED_FROM = {Status.SUBMITTED, Status.RUNNING, Status.COMPLETING}
# Only a job of its own waits for others (or is skipped because they failed): a master's
# subjobs are made when it stops waiting, so a subjob's walk never takes these (a waiting
# master's own timeline: tests/test_job_timeline.py and tests/test_workflows.py).
_NOT_A_SUBJOBS = {Status.WAITING, Status.SKIPPED}


def _shown(when: dt.datetime) -> str:
    return when.isoformat(sep=" ", timespec="milliseconds")


@dataclass
class _Clock:
    now: float = 1_800_000_000.0

    def time(self) -> float:
        return self.now


@dataclass
class _Step:
    subjob: int
    choice: int
    tick: float  # seconds the session's clock moves on before it
    lag: float  # a reported time: the session's clock plus this
    logged: bool  # a user's resubmission also logged on the master


_steps = st.builds(
    _Step,
    st.integers(0, 3),
    st.integers(0, 10),
    st.floats(0.001, 2.0),
    st.floats(-3.0, 3.0),
    st.booleans(),
)


def _drive(subjobs: int, steps: list[_Step], skewed: bool) -> tuple[Job, dict[str, float]]:
    """A submitted master of ``subjobs`` subjobs taken through ``steps``; what it saw:
    when its current period began after its previous one ended ("since") and whether a
    subjob reached running in it ("ran": 1.0)."""
    clock = _Clock()
    with mock.patch.object(job_module, "_time", types.SimpleNamespace(time=clock.time)):
        clock.now += 1
        master, children = submitted_model_master(subjobs)
        seen = {"since": float("-inf"), "ran": 0.0}
        idle_since = float("-inf")
        label = master.current_status().label
        for step in steps:
            clock.now += step.tick
            sj = children[step.subjob % subjobs]
            old = Status.parse(sj.status)
            targets = sorted(TRANSITIONS[old] - _NOT_A_SUBJOBS, key=lambda s: (s.order, s.label))
            new = targets[step.choice % len(targets)]
            when = clock.now + step.lag if skewed and old in _REPORTED_FROM else None
            if step.logged and old.final and new is Status.SUBMITTING:
                master.log_event("user: resubmit of 1 subjob(s)")
            sj.change_status(new, "test", when)
            if new is Status.RUNNING:
                seen["ran"] = 1.0
            master.indexed_as(master.current_status().label)  # as the registry does
            now = master.current_status().label
            if now in _IDLE and label not in _IDLE:
                idle_since = clock.now
            elif label in _IDLE and now not in _IDLE:
                seen["since"], seen["ran"] = idle_since, 0.0
            label = now
    return master, seen


@given(st.integers(1, 4), st.lists(_steps, max_size=40), st.booleans())
def test_a_masters_timeline_is_in_order_whatever_its_subjobs_do(
    subjobs: int, steps: list[_Step], skewed: bool
) -> None:
    master, _seen = _drive(subjobs, steps, skewed)
    t = master.times()
    shown = [name for name, _value in t.rows() if name in t]
    assert shown == [label for label in _TIMELINE if label in t]
    assert len([label for label in shown if label in ENDED]) <= 1
    stamps = [t[label] for label in shown]
    assert stamps == sorted(stamps)
    assert list(t) == shown  # the mapping, in time order, agrees with the rows
    status = master.current_status().label
    assert (status in t) if status in ENDED else not set(ENDED) & set(t)
    for duration in (t.runtime(), t.waittime()):
        assert duration is None or duration.total_seconds() >= 0


@given(st.integers(1, 4), st.lists(_steps, max_size=40))
def test_a_masters_timeline_is_its_current_period(subjobs: int, steps: list[_Step]) -> None:
    # Every time on one clock: what is shown belongs to the period the master is in.
    master, seen = _drive(subjobs, steps, skewed=False)
    t = master.times()
    for label in t:
        if label != "new":
            assert t[label].timestamp() >= seen["since"] - 1e-6, (label, master.history)
    assert ("running" in t) == bool(seen["ran"])


@given(st.integers(1, 4), st.lists(_steps, max_size=40), st.booleans())
def test_a_masters_table_of_subjobs_spans_what_each_subjob_shows(
    subjobs: int, steps: list[_Step], skewed: bool
) -> None:
    master, _seen = _drive(subjobs, steps, skewed)
    shown = [sj.times() for sj in master.iter_subjobs()]
    spans = []
    for label in _ORDER:
        times = [t[label] for t in shown if label in t]
        if times:
            first, last = (_shown(when) for when in (min(times), max(times)))
            spans.append((label, first, last))
    assert master.times().subjob_rows() == spans
