"""The board of ``ganga top`` (which jobs it lists, read through the status index and the
newest ids) against a plain pass over every job of a real repository, and its rates."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ganga_like import Job
from ganga_like.errors import JobError
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status, check_transition
from ganga_like.runtime.session import Session
from ganga_like.runtime.stats.board import NEWEST, BoardRow, board_row, board_rows

_TARGETS = [s for s in Status if s not in (Status.NEW, Status.COMPLETED_FROZEN)]


def _move(job: JobImpl, target: Status, when: float) -> None:
    current = Status.parse(job.status)
    try:
        check_transition(current, target)
    except JobError:
        return
    if current is not target:
        job.change_status(target, "test", when=when)


def _every_row(session: Session, now: float, recent: float) -> list[BoardRow]:
    """The slow path: every job read, kept when live or ended within ``recent``."""
    registry = session.registry()
    rows = [board_row(job) for job in registry.jobs.values() if isinstance(job, JobImpl)]
    kept = [r for r in rows if r.live or (r.ended is not None and now - r.ended <= recent)]
    return sorted(kept, key=lambda r: -r.job_id)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    new_jobs=st.integers(0, 8),
    moves=st.lists(st.tuples(st.integers(0, 200), st.sampled_from(_TARGETS)), max_size=40),
    recent=st.sampled_from([1.0, 5.0, 30.0, 1000.0]),
)
def test_the_board_lists_what_a_pass_over_every_job_finds(
    session: Session, new_jobs: int, moves: list[tuple[int, Status]], recent: float
) -> None:
    for _ in range(new_jobs):
        Job(name="b")
    registry = session.registry()
    ids = list(registry.jobs.keys())
    now = 1_000_000.0 + len(ids) * 100
    for index, target in moves:
        job = registry.get(ids[index % len(ids)]) if ids else None
        if isinstance(job, JobImpl):
            now += 1.0
            _move(job, target, now)
            registry.reindex(job)
    session.repo.commit()
    every = _every_row(session, now, recent)
    # Told every id (as a view that showed them all), it lists exactly what the pass finds.
    assert board_rows(registry, now, recent, also=ids) == every
    # On its own: every live job, and those ended lately among the newest ids; nothing else.
    alone = board_rows(registry, now, recent)
    newest = set(sorted(ids)[-NEWEST:])
    assert {r.job_id for r in alone} == {r.job_id for r in every if r.live or r.job_id in newest}


def test_rate_and_time_left_from_a_job_s_counts_and_times() -> None:
    row = BoardRow(
        1, "x", "running", "Local", {"completed": 30, "running": 10, "submitted": 20}, 0.0
    )
    assert row.total == 60 and row.done == 30 and row.remaining == 30
    assert row.rate(now=600.0) == pytest.approx(3.0)  # 30 ended in 10 minutes
    assert row.time_left(now=600.0) == pytest.approx(600.0)
    ended = BoardRow(2, "y", "completed", "Local", {"completed": 4}, 0.0, 120.0)
    assert ended.rate(now=10_000.0) == pytest.approx(2.0)  # up to its end, not now
    assert ended.time_left(now=10_000.0) == 0.0
    nothing_yet = BoardRow(3, "z", "submitted", "Local", {"submitted": 5}, 0.0)
    assert nothing_yet.rate(now=60.0) is None and nothing_yet.time_left(now=60.0) is None
    # Never submitted: nothing ended, so nothing to tell ("-"), not "done".
    never = BoardRow(4, "n", "new", "Local", {"new": 3})
    assert never.time_left(now=60.0) is None
