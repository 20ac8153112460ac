"""An unsplit job's or a subjob's ``j.time`` reads in order and is its current round,
whatever states it went through.

Real jobs (the model's Job, its transition table, its log) driven through random legal
state changes, as a session, a backend and a user would make them: resubmissions,
postprocessing failures, forced states, freezing and unfreezing. The session's clock is a
controlled one, so that every run is repeatable; a backend reports its own times, which
may lag or lead the session's. The same with real Local jobs in a real repository:
tests/test_job_lifecycle.py.
"""

from __future__ import annotations

import datetime as dt
import types
from dataclasses import dataclass
from unittest import mock

from hypothesis import assume, given
from hypothesis import strategies as st

from ganga_like.model import job as job_module
from ganga_like.model.job import Job
from ganga_like.model.periods import _JOB_TIMELINE, _in_order, _job_in_order
from ganga_like.model.status import TRANSITIONS, Status
from ganga_like.model.times import ROUND_ENDS

_FROZEN = ("completed_frozen", "failed_frozen")
_ORDER = ("new", "waiting", "submitting", "submitted", "running", "completing")
_ORDER += (*ROUND_ENDS, *_FROZEN)
_IDLE = {"new", *ROUND_ENDS, *_FROZEN}
# States a backend reports (the monitor records them at the backend's time).
_REPORTED_FROM = {Status.SUBMITTED, Status.RUNNING, Status.COMPLETING}
# Only a job of its own waits for others (or is skipped because they failed): a subjob is
# made when its master stops waiting, so a subjob's walk never takes these.
_NOT_A_SUBJOBS = {Status.WAITING, Status.SKIPPED}
_MS = dt.timedelta(milliseconds=1)


@dataclass
class _Clock:
    now: float = 1_800_000_000.0

    def time(self) -> float:
        return self.now


@dataclass
class _Step:
    choice: int
    tick: float  # seconds the session's clock moves on before it
    lag: float  # a reported time: the session's clock plus this
    noted: bool  # an event logged besides (a kill asked for, a resubmission...)


_steps = st.builds(
    _Step, st.integers(0, 10), st.floats(0.001, 2.0), st.floats(-3.0, 3.0), st.booleans()
)


def _drive(steps: list[_Step], skewed: bool, subjob: bool) -> tuple[Job, dict[str, float]]:
    """An unsplit job (or a subjob, made by its master's submission) taken through
    ``steps``; what it should show when every time is on one clock: the plain reading of
    its round, each state as the test saw it reached."""
    clock = _Clock()
    with mock.patch.object(job_module, "_time", types.SimpleNamespace(time=clock.time)):
        if subjob:
            master = Job()
            clock.now += 1
            master.change_status(Status.SUBMITTING, "user: submit")
            job = Job.new_subjob(master, 0)
            master.attach_subjobs([job])
        else:
            job = Job()
        created = clock.now
        expected: dict[str, float] = {}
        ends: dict[str, float] = {}
        for step in steps:
            clock.now += step.tick
            old = Status.parse(job.status)
            left_out = _NOT_A_SUBJOBS if subjob else set()
            targets = sorted(TRANSITIONS[old] - left_out, key=lambda s: (s.order, s.label))
            new = targets[step.choice % len(targets)]
            when = clock.now + step.lag if skewed and old in _REPORTED_FROM else clock.now
            if step.noted:
                job.log_event("user: note")
            job.change_status(new, "test", when)
            if old.label in _IDLE and new.label not in _IDLE:
                expected, ends = {}, {}  # a new round
            if new.label in ROUND_ENDS:
                # Unfreezing gives back the end it had (its time too), if it had that one.
                if old.label not in _FROZEN or new.label not in ends:
                    ends[new.label] = when
            elif new.label in _FROZEN:
                ends[new.label] = when
            elif new is not Status.NEW:
                expected[new.label] = when
        status = job.status
        end = job.frozen_from().label if status in _FROZEN else status
        expected.update({label: ends[label] for label in (end, status) if label in ends})
        if subjob:  # made by its master's submission: its first logged change says when
            created = job.history[0][0] if job.history else None
        if created is not None:
            expected["new"] = created
    return job, expected


@given(st.lists(_steps, max_size=30), st.booleans(), st.booleans())
def test_a_jobs_rows_are_in_order_whatever_states_it_went_through(
    steps: list[_Step], skewed: bool, subjob: bool
) -> None:
    job, _expected = _drive(steps, skewed, subjob)
    t = job.times()
    shown = [name for name, _value in t.rows() if name in t]
    assert shown == [label for label in _ORDER if label in t]
    stamps = [t[label] for label in shown]
    assert stamps == sorted(stamps)
    assert list(t) == shown  # the mapping, in time order, agrees with the rows
    assert len(set(shown) & set(ROUND_ENDS)) <= 1 and len(set(shown) & set(_FROZEN)) <= 1
    status = job.status
    if status in ROUND_ENDS:
        assert status in t
    elif status in _FROZEN:
        assert status in t and job.frozen_from().label in t
    else:
        assert not (set(ROUND_ENDS) | set(_FROZEN)) & set(t)
    # The durations are the rows'.
    end = next((t[label] for label in ROUND_ENDS if label in t), None)
    runtime, waittime = t.runtime(), t.waittime()
    assert (runtime is None) == (end is None or t.running is None)
    if runtime is not None and end is not None and t.running is not None:
        assert abs(runtime - (end - t.running)) < _MS
    assert (waittime is None) == (t.running is None or t.submitted is None)
    if waittime is not None and t.running is not None and t.submitted is not None:
        assert abs(waittime - (t.running - t.submitted)) < _MS


@given(st.lists(_steps, max_size=30), st.booleans())
def test_a_jobs_rows_are_its_current_round(steps: list[_Step], subjob: bool) -> None:
    # Every time on one clock: each state shown is when the job reached it in this round.
    job, expected = _drive(steps, skewed=False, subjob=subjob)
    t = job.times()
    assert set(t) == set(expected)
    for label, when in expected.items():
        assert abs(t[label].timestamp() - when) < 1e-5, (label, job.history)


_labels = st.sampled_from(_JOB_TIMELINE)


@given(st.dictionaries(_labels, st.floats(0.0, 10.0), max_size=len(_JOB_TIMELINE)))
def test_the_shortcut_for_stamps_already_in_order_reads_as_the_plain_ordering(
    stamps: dict[str, float],
) -> None:
    # Any insertion order: the shortcut must answer as the plain ordering (values and order).
    # A timeline holds one end state and one frozen state at most.
    assume(len(set(stamps) & set(ROUND_ENDS)) <= 1 and len(set(stamps) & set(_FROZEN)) <= 1)
    plain = _in_order(stamps, _JOB_TIMELINE)
    assert list(_job_in_order(dict(stamps)).items()) == list(plain.items())
