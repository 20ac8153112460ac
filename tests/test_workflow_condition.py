"""The condition of a waiting job, decided from status counters, against a plain recount
of the upstream (sub)jobs' statuses one by one (hypothesis)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ganga_like.model.counter import StatusCounter
from ganga_like.model.status import TRANSITIONS, Status
from ganga_like.runtime.workflow.condition import Verdict, tally, tolerated, verdict

SUBJOB_STATES = [s for s in Status if s not in (Status.WAITING,)]
WHENS = st.sampled_from(["completed", "finished", "failed"])
ALLOWANCES = st.one_of(
    st.integers(min_value=0, max_value=6),
    st.floats(min_value=0.01, max_value=0.99, allow_nan=False).map(lambda x: round(x, 2)),
)


def recount(statuses: list[Status], when: str, allow_failed: int | float) -> Verdict:
    """The rule in words, one (sub)job at a time."""
    finished = [s for s in statuses if s.final]
    failed = [
        s
        for s in statuses
        if s in (Status.FAILED, Status.KILLED, Status.FAILED_FROZEN, Status.SKIPPED)
    ]
    if isinstance(allow_failed, int):
        limit = allow_failed
    else:
        limit = round(allow_failed * 100) * len(statuses) // 100  # allow_failed has 2 decimals
    all_ended = len(finished) == len(statuses)
    if when == "completed":
        if len(failed) > limit:
            return Verdict.NEVER
        return Verdict.GO if all_ended else Verdict.WAIT
    if not all_ended:
        return Verdict.WAIT
    if when == "finished":
        return Verdict.GO
    return Verdict.GO if len(failed) > limit else Verdict.NEVER


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[Status], list[tuple[int, Status]]]:
    """Subjobs' first states, and legal moves of them afterwards."""
    first = draw(st.lists(st.sampled_from(SUBJOB_STATES), min_size=1, max_size=12))
    moves = []
    current = list(first)
    for _ in range(draw(st.integers(0, 30))):
        index = draw(st.integers(0, len(current) - 1))
        choices = sorted(TRANSITIONS[current[index]] - {Status.WAITING}, key=lambda s: s.label)
        if not choices:
            continue
        new = draw(st.sampled_from(choices))
        moves.append((index, new))
        current[index] = new
    return first, moves


@given(runs(), WHENS, ALLOWANCES)
def test_the_verdict_from_a_counter_is_the_recount_of_every_subjob(
    run: tuple[list[Status], list[tuple[int, Status]]], when: str, allow_failed: int | float
) -> None:
    first, moves = run
    counter = StatusCounter()
    statuses = list(first)
    for status in first:
        counter.add(status)
    for index, new in moves:
        counter.move(statuses[index], new)
        statuses[index] = new
        counted = tally(counter.by_status().items())
        assert counted.total == len(statuses)
        assert verdict(counted, when, allow_failed) is recount(statuses, when, allow_failed)
    assert verdict(tally(counter.by_status().items()), when, allow_failed) is recount(
        statuses, when, allow_failed
    )


@given(st.lists(st.sampled_from(SUBJOB_STATES), min_size=1, max_size=20), ALLOWANCES)
def test_a_completed_condition_that_cannot_hold_never_holds_as_the_rest_ends(
    statuses: list[Status], allow_failed: int | float
) -> None:
    """Once too many failed, the subjobs still running ending any way changes nothing:
    skipping at once is never wrong."""
    if verdict(tally((s, 1) for s in statuses), "completed", allow_failed) is not Verdict.NEVER:
        return
    for ending in (Status.COMPLETED, Status.FAILED):
        ended = [s if s.final else ending for s in statuses]
        assert verdict(tally((s, 1) for s in ended), "completed", allow_failed) is Verdict.NEVER


def test_a_fraction_tolerates_its_share_rounded_down_exactly() -> None:
    assert tolerated(0.02, 100) == 2
    assert tolerated(0.1, 30) == 3  # 0.1 * 30 is 3.0000000000000004 in floats
    assert tolerated(0.5, 3) == 1
    assert tolerated(3, 1) == 3
