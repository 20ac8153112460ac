"""A master's status, log and timeline agree with a recomputation from its subjobs' states.

The master's status is derived from its counter as its subjobs change; here it is
recomputed from scratch after every change, from every state the subjobs were in so far:
the status the design's rules give, except that a master that has shown running since it
last had no subjob live (submitting, waiting or running) stays running (it does not flap
back to submitted). Its log must hold exactly the changes of that recomputed status, and
its own timeline the times of the current run. Real masters and subjobs (the model's Job,
its transition table, its log) go through random legal changes, under both orders of the
design's first two rules.
"""

from __future__ import annotations

import itertools
import types
from dataclasses import dataclass
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from ganga_like.model import job as job_module
from ganga_like.model.counter import StatusCounter
from ganga_like.model.status import (
    TRANSITIONS,
    Status,
    master_status,
    set_master_status_order,
)
from ganga_like.model.times import ENDED

from .split_jobs import submitted_model_master

# Waiting: a subjob held by its workflow's throttle keeps its master's run going.
_LIVE = {Status.SUBMITTING, Status.SUBMITTED, Status.RUNNING, Status.COMPLETING, Status.WAITING}
_IDLE = {"new", *ENDED}


@dataclass
class _Clock:
    now: float = 1_800_000_000.0

    def time(self) -> float:
        return self.now


def _recomputed(snapshots: list[list[Status]]) -> Status:
    """The master's status after the last of ``snapshots`` (every subjob's state after
    each change so far), from all of them."""

    def counts(states: list[Status]) -> dict[Status, int]:
        found: dict[Status, int] = {}
        for state in states:
            found[state] = found.get(state, 0) + 1
        return found

    now = counts(snapshots[-1])
    status = master_status(now.items())
    if status is not Status.SUBMITTED:
        return status
    # The run goes on since the last moment no subjob was live.
    quiet = [i for i, states in enumerate(snapshots) if not _LIVE & set(states)]
    since = quiet[-1] + 1 if quiet else 0
    shown = any(
        master_status(counts(states).items()) is Status.RUNNING for states in snapshots[since:]
    )
    return Status.RUNNING if shown else status


def _changes(shown: list[tuple[float, str]]) -> list[tuple[float, str, str]]:
    """The changes of a sequence of (time, status): (time, old, new)."""
    changes = []
    for (_before, old), (when, new) in itertools.pairwise(shown):
        if new != old:
            changes.append((when, old, new))
    return changes


def _own_timeline(created: float, changes: list[tuple[float, str, str]]) -> dict[str, float]:
    """The times the master's tree shows, from its changes: its current run (from its last
    start out of new or an end), the first time it reached each state in it, and the time
    it reached the end it shows."""
    start = max(
        (i for i, (_w, old, new) in enumerate(changes) if old in _IDLE and new not in _IDLE),
        default=0,
    )
    stamps = {"new": created}
    for when, _old, new in changes[start:]:
        if new not in _IDLE:
            stamps.setdefault(new, when)
    last = changes[-1][2] if changes else "new"
    if last in ENDED:
        stamps[last] = max(when for when, _old, new in changes if new == last)
    return stamps


@given(
    st.integers(1, 4),
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10)), max_size=60),
    st.sampled_from(["running_first", "submitted_first"]),
)
def test_a_masters_status_log_and_timeline_agree_with_a_recomputation_from_its_subjobs(
    subjobs: int, steps: list[tuple[int, int]], order: str
) -> None:
    clock = _Clock()
    set_master_status_order(order)
    try:
        with mock.patch.object(job_module, "_time", types.SimpleNamespace(time=clock.time)):
            created = clock.now
            master, children = submitted_model_master(subjobs)
            snapshots = [[Status.SUBMITTED] * subjobs]
            shown = [(created, "new"), (created, "submitting"), (created, "submitted")]
            for index, choice in steps:
                clock.now += 1
                sj = children[index % subjobs]
                old = Status.parse(sj.status)
                # A subjob is never skipped: only a top-level job waits for others.
                possible = TRANSITIONS[old] - {Status.SKIPPED}
                targets = sorted(possible, key=lambda s: (s.order, s.label))
                sj.change_status(targets[choice % len(targets)], "test")
                snapshots.append([Status.parse(child.status) for child in children])
                expected = _recomputed(snapshots)
                assert master.current_status() is expected, (order, snapshots)
                master.indexed_as(master.current_status().label)  # as the registry does
                shown.append((clock.now, expected.label))
    finally:
        set_master_status_order("running_first")
    changes = _changes(shown)
    logged = [(when, old, new) for when, old, new, _cause in master.history if old != new]
    assert logged == changes
    if order == "running_first":
        assert not [c for c in changes if (c[1], c[2]) == ("running", "submitted")]
    assert master.own_timeline() == _own_timeline(created, changes)


def _walk(
    counter: StatusCounter, states: list[Status], moves: list[tuple[int, int]], mine: set[int]
) -> None:
    """Take the subjobs in ``mine`` through ``moves`` (legal ones, counted)."""
    for index, choice in moves:
        if index not in mine:
            continue
        old = states[index]
        targets = sorted(TRANSITIONS[old], key=lambda s: (s.order, s.label))
        states[index] = targets[choice % len(targets)]
        counter.move(old, states[index])


def _state(counter: StatusCounter) -> object:
    """The counter's state as ZODB stores it (and gives it to conflict resolution)."""
    return counter.__getstate__()


_moves = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 10)), max_size=20)


@given(_moves, _moves, _moves, st.sets(st.integers(0, 5)))
def test_two_sessions_changing_a_masters_subjobs_at_once_merge_as_one_then_the_other(
    before: list[tuple[int, int]],
    theirs: list[tuple[int, int]],
    ours: list[tuple[int, int]],
    their_subjobs: set[int],
) -> None:
    """The counter's conflict resolution: the merged counts are both sides' changes, and
    the merged status that of one side's changes followed by the other's (each side
    changes its own subjobs), or running when one side alone showed it running (whether
    the run went on is not always known from the two states: it is said to have)."""
    everyone = set(range(6))
    base, states = StatusCounter(), [Status.SUBMITTED] * 6
    base.add(Status.SUBMITTED, 6)
    _walk(base, states, before, everyone)
    old = _state(base)
    committed, their_states = StatusCounter(), list(states)
    committed.__setstate__(old)
    _walk(committed, their_states, theirs, their_subjobs)
    new, our_states = StatusCounter(), list(states)
    new.__setstate__(old)
    _walk(new, our_states, ours, everyone - their_subjobs)
    merged = StatusCounter()
    merged.__setstate__(base._p_resolveConflict(old, _state(committed), _state(new)))
    serials = []  # theirs then ours, ours then theirs
    for first, states_after, moves, subjobs in (
        (committed, their_states, ours, everyone - their_subjobs),
        (new, our_states, theirs, their_subjobs),
    ):
        serial = StatusCounter()
        serial.__setstate__(_state(first))
        _walk(serial, list(states_after), moves, subjobs)
        serials.append(serial)
    assert all(merged.counts == serial.counts for serial in serials)
    status = merged.derived_status()
    if status not in {serial.derived_status() for serial in serials}:
        # The one liberty: running, when one side alone showed it running.
        assert status is Status.RUNNING
        assert Status.RUNNING in {committed.derived_status(), new.derived_status()}


def test_a_counter_stored_as_an_attribute_dict_still_reads_and_merges() -> None:
    """Counters written before the compact form (an attribute dict) open as they were."""
    stored = {"counts": {"running": 1, "submitted": 2}, "run_seconds": 3.0}
    counter = StatusCounter()
    counter.__setstate__(dict(stored))
    assert counter.by_status() == {Status.RUNNING: 1, Status.SUBMITTED: 2}
    assert counter.run_seconds == 3.0 and counter.pending == {}
    assert counter.derived_status() is Status.RUNNING
    ours = StatusCounter()
    ours.__setstate__(dict(stored))
    ours.move(Status.SUBMITTED, Status.RUNNING)
    merged = StatusCounter()
    merged.__setstate__(counter._p_resolveConflict(stored, dict(stored), _state(ours)))
    assert merged.by_status() == {Status.RUNNING: 2, Status.SUBMITTED: 1}


def test_a_counter_stores_its_counts_and_pending_labels_as_status_codes() -> None:
    counter = StatusCounter()
    counter.add(Status.SUBMITTED, 3)
    counter.move(Status.SUBMITTED, Status.RUNNING)
    counter.pending = {7: "running"}
    stored = counter.__getstate__()
    assert isinstance(stored, tuple) and "running" not in repr(stored)
    again = StatusCounter()
    again.__setstate__(stored)
    assert again.counts == counter.counts and again.pending == {7: "running"}
    assert again.derived_status() is Status.RUNNING
