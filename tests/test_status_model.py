"""The status enum, its one transition table, filling in missed states, master status."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ganga_like.errors import IllegalTransitionError
from ganga_like.model.counter import StatusCounter
from ganga_like.model.status import (
    TRANSITIONS,
    Status,
    check_transition,
    master_status,
    master_status_order,
    path_to,
    set_master_status_order,
)


def test_every_status_has_a_row_in_the_transition_table() -> None:
    assert set(TRANSITIONS) == set(Status)


def test_final_flags_and_order() -> None:
    assert [s for s in Status if s.final] == [
        Status.COMPLETED,
        Status.FAILED,
        Status.KILLED,
        Status.COMPLETED_FROZEN,
        Status.FAILED_FROZEN,
        Status.SKIPPED,
    ]
    assert [s for s in Status if s.frozen] == [Status.COMPLETED_FROZEN, Status.FAILED_FROZEN]
    assert Status.NEW.order < Status.SUBMITTED.order < Status.RUNNING.order
    assert Status.RUNNING.order < Status.COMPLETING.order < Status.COMPLETED.order
    # A waiting job is no further along than a new one, and no backend follows it.
    assert Status.WAITING.order == Status.NEW.order and not Status.WAITING.active


def test_a_waiting_job_is_submitted_skipped_or_killed() -> None:
    assert TRANSITIONS[Status.WAITING] == {Status.SUBMITTING, Status.SKIPPED, Status.KILLED}
    assert Status.WAITING in TRANSITIONS[Status.SKIPPED]  # re-armed
    with pytest.raises(IllegalTransitionError, match="from waiting to submitted"):
        check_transition(Status.WAITING, Status.SUBMITTED)


def test_illegal_transitions_raise() -> None:
    with pytest.raises(IllegalTransitionError, match="from new to completed"):
        check_transition(Status.NEW, Status.COMPLETED)
    with pytest.raises(IllegalTransitionError):
        check_transition(Status.RUNNING, Status.SUBMITTED)


def test_a_job_seen_completed_without_running_passes_through_running() -> None:
    assert path_to(Status.SUBMITTED, Status.COMPLETED) == [Status.RUNNING, Status.COMPLETED]
    assert path_to(Status.SUBMITTED, Status.COMPLETING) == [Status.RUNNING, Status.COMPLETING]


def test_a_program_that_never_started_does_not_invent_running() -> None:
    assert path_to(Status.SUBMITTED, Status.FAILED, started=False) == [Status.FAILED]


def test_stale_or_repeated_observations_change_nothing() -> None:
    assert path_to(Status.RUNNING, Status.SUBMITTED) == []
    assert path_to(Status.COMPLETED, Status.RUNNING) == []
    assert path_to(Status.RUNNING, Status.RUNNING) == []


def test_wait_order_running_is_reached_by_completed_not_by_failed_for_completed() -> None:
    assert Status.COMPLETED.reached(Status.RUNNING)
    assert not Status.FAILED.reached(Status.COMPLETED)
    assert not Status.SUBMITTED.reached(Status.RUNNING)


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ({Status.SUBMITTED: 1, Status.RUNNING: 5, Status.FAILED: 2}, Status.SUBMITTED),
        ({Status.SUBMITTING: 1, Status.COMPLETED: 5}, Status.SUBMITTED),
        ({Status.RUNNING: 1, Status.FAILED: 3}, Status.RUNNING),
        ({Status.COMPLETING: 1, Status.COMPLETED: 3}, Status.RUNNING),
        ({Status.FAILED: 1, Status.COMPLETED: 9, Status.KILLED: 1}, Status.FAILED),
        ({Status.COMPLETED: 9, Status.KILLED: 1}, Status.COMPLETED),
        ({Status.KILLED: 4}, Status.KILLED),
        ({}, Status.NEW),
        # never-submitted subjobs: waiting or running ones still decide, else the master is new
        ({Status.NEW: 2936, Status.SUBMITTED: 64}, Status.SUBMITTED),
        ({Status.NEW: 2936, Status.RUNNING: 1, Status.COMPLETED: 63}, Status.RUNNING),
        ({Status.NEW: 2936, Status.COMPLETED: 64}, Status.NEW),
        ({Status.NEW: 1, Status.FAILED: 1, Status.KILLED: 1}, Status.NEW),
    ],
)
def test_master_status_rules_of_the_splitting_design(
    counts: dict[Status, int], expected: Status
) -> None:
    assert master_status(counts.items(), order="submitted_first") is expected


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ({Status.SUBMITTED: 4998, Status.RUNNING: 2}, Status.RUNNING),
        ({Status.SUBMITTING: 1, Status.COMPLETING: 1, Status.COMPLETED: 5}, Status.RUNNING),
        ({Status.SUBMITTED: 1, Status.FAILED: 3}, Status.SUBMITTED),
        ({Status.SUBMITTING: 1, Status.COMPLETED: 5}, Status.SUBMITTED),
        ({Status.FAILED: 1, Status.COMPLETED: 9, Status.KILLED: 1}, Status.FAILED),
        ({Status.COMPLETED: 9, Status.KILLED: 1}, Status.COMPLETED),
        ({Status.KILLED: 4}, Status.KILLED),
        ({}, Status.NEW),
        ({Status.NEW: 2936, Status.SUBMITTED: 63, Status.RUNNING: 1}, Status.RUNNING),
        ({Status.NEW: 2936, Status.COMPLETED: 64}, Status.NEW),
    ],
)
def test_a_master_is_running_by_default_as_soon_as_any_subjob_runs(
    counts: dict[Status, int], expected: Status
) -> None:
    assert master_status_order() == "running_first"
    assert master_status(counts.items()) is expected
    assert master_status(counts.items(), order="running_first") is expected


def test_the_master_status_order_is_one_of_the_two_known_ones() -> None:
    with pytest.raises(ValueError, match="running_first, submitted_first"):
        set_master_status_order("whatever")
    assert master_status_order() == "running_first"


def test_counter_conflicts_merge_both_sides_deltas() -> None:
    counter = StatusCounter()
    old = {"counts": {"submitted": 10}}
    mine = {"counts": {"submitted": 8, "completed": 2}}
    theirs = {"counts": {"submitted": 9, "killed": 1}}
    merged = counter._p_resolveConflict(old, theirs, mine)
    assert merged == {"counts": {"submitted": 7, "completed": 2, "killed": 1}}


def test_status_parse_gives_a_clear_error() -> None:
    assert Status.parse("FAILED") is Status.FAILED
    with pytest.raises(ValueError, match="unknown status 'done'; expected one of"):
        Status.parse("done")


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(list(Status)), st.integers(1, 9), min_size=1), st.randoms())
def test_counts_are_shown_in_one_order_whatever_order_they_were_stored_in(
    counts: dict[Status, int], rnd: random.Random
) -> None:
    """States of one step (completed, failed, killed) tie on ``order``: ``place`` breaks the
    tie by declaration, so the subjobs column does not follow how a counter was stored."""
    items = list(counts.items())
    rnd.shuffle(items)
    shown = sorted(dict(items).items(), key=lambda kv: kv[0].place)
    assert shown == sorted(counts.items(), key=lambda kv: kv[0].place)
    assert [s.order for s, _ in shown] == sorted(s.order for s, _ in shown)
    declared = list(Status)
    for (a, _), (b, _) in itertools.pairwise(shown):
        assert a.order < b.order or declared.index(a) < declared.index(b)
