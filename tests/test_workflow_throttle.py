"""A throttle on a workflow: at most N of its (sub)jobs submitted or running at once, the
rest held ``waiting`` and handed over by the monitor as others end. The cap is checked
against every (sub)job's event log; the counts the monitor reads from status counters are
checked against counting, and its hand-overs against a cap that random ends never see
exceeded."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ganga_like import ArgSplitter, Executable, Job, SchemaError, throttle
from ganga_like.model.counter import StatusCounter
from ganga_like.model.status import Status
from ganga_like.runtime.session import Session
from ganga_like.runtime.workflow.throttle import ACTIVE, Member, active_and_held, handovers
from ganga_like.runtime.workflow.throttle_pass import run_throttles

from .waiting import wait_for


def _gated(tmp_path: Path) -> Executable:
    """A program that ends (exit 0) once the test opens the gate (creates ``gate``)."""
    script = tmp_path / "gated.sh"
    script.write_text(f"#!/bin/sh\nwhile ! test -e {tmp_path / 'gate'}; do sleep 0.05; done\n")
    script.chmod(0o755)
    return Executable(exe=str(script))


def _units(*jobs: Job) -> list[Job]:
    return [sj for j in jobs for sj in (j.subjobs if len(j.subjobs) else [j])]


def _most_active(units: list[Job]) -> int:
    """The most (sub)jobs active at once, from their event logs: +1 when one is handed
    to submission, -1 when it ends (an end before a start at the same instant)."""
    steps = []
    for unit in units:
        for entry in unit.history:
            if entry.new == "submitting":
                steps.append((entry.time, 1))
            elif Status.parse(entry.new).final:
                steps.append((entry.time, -1))
    now = most = 0
    for _time, step in sorted(steps):
        now += step
        most = max(most, now)
    return most


def _active(units: list[Job]) -> int:
    return sum(Status.parse(u.status) in ACTIVE for u in units)


def test_a_throttled_workflow_never_has_more_than_its_cap_active(
    session: Session, tmp_path: Path
) -> None:
    throttle("scan", 2)
    a = Job(application=_gated(tmp_path), splitter=ArgSplitter(args=[[]] * 5), workflow="scan")
    c = Job(application=_gated(tmp_path), splitter=ArgSplitter(args=[[]] * 3), workflow="scan")
    d = Job(application=_gated(tmp_path), workflow="scan", after=a)
    free = Job(application=_gated(tmp_path))  # in no workflow: never held
    for j in (a, c, d, free):
        assert j.submit()
    units = _units(a, c)
    assert d.status == "waiting" and free.status in ("submitted", "running")
    wait_for(lambda: _active(units) == 2, 60, "the monitor to hand two subjobs over")
    assert [u.status for u in units].count("waiting") == 6

    (tmp_path / "gate").touch()
    for j in (a, c, d, free):
        assert j.wait(timeout=180) == "completed"
    everything = _units(a, c, d)
    assert _most_active(everything) == 2  # the cap was used, and never exceeded
    assert [sum(e.new == "submitting" for e in u.history) for u in everything] == [1] * 9
    assert "monitor: throttle: room in workflow 'scan'" in [e.cause for e in a.subjobs[4].history]


def test_lifting_a_throttle_hands_over_everything_held(session: Session, tmp_path: Path) -> None:
    throttle("lifted", 1)
    a = Job(application=_gated(tmp_path), splitter=ArgSplitter(args=[[]] * 4), workflow="lifted")
    a.submit()
    wait_for(lambda: _active(_units(a)) == 1, 60, "one subjob handed over")
    assert throttle("lifted") == 1
    throttle("lifted", None)
    assert throttle("lifted") is None
    wait_for(lambda: _active(_units(a)) == 4, 60, "the rest handed over")
    (tmp_path / "gate").touch()
    assert a.wait(timeout=120) == "completed"


def test_killing_a_throttled_master_ends_its_held_subjobs(session: Session, tmp_path: Path) -> None:
    throttle("killed", 1)
    a = Job(application=_gated(tmp_path), splitter=ArgSplitter(args=[[]] * 3), workflow="killed")
    a.submit()
    wait_for(lambda: _active(_units(a)) == 1, 60, "one subjob handed over")
    a.kill()
    assert a.status == "killed"
    assert [sj.status for sj in a.subjobs] == ["killed"] * 3
    held = [e.cause for sj in a.subjobs for e in sj.history if e.new == "killed"]
    assert held.count("user: kill (held by its workflow's throttle)") == 2


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: throttle("", 2), "throttle(): workflow expected a workflow's name, not ''"),
        (lambda: throttle(3, 2), "throttle(): workflow expected a workflow's name, not 3"),
        (lambda: throttle("w", 0), "throttle(): limit expected an int >= 1 or None, not 0"),
        (lambda: throttle("w", 2.5), "throttle(): limit expected an int >= 1 or None, not 2.5"),
        (lambda: throttle("w", True), "throttle(): limit expected an int >= 1 or None, not True"),
    ],
)
def test_a_bad_throttle_is_one_line_and_changes_nothing(
    session: Session, call: object, message: str
) -> None:
    throttle("w", 3)
    with pytest.raises(SchemaError) as raised:
        call()  # type: ignore[operator]
    assert str(raised.value) == message
    assert throttle("w") == 3


# -- what the monitor's pass reads and decides ------------------------------------------

_LEGAL_ENDS = [Status.COMPLETED, Status.FAILED, Status.KILLED]


@settings(max_examples=200, deadline=None)
@given(
    limit=st.integers(1, 6),
    sizes=st.lists(st.integers(1, 8), min_size=1, max_size=4),
    data=st.data(),
)
def test_hand_overs_from_counters_never_exceed_the_cap_and_hand_everything_over(
    limit: int, sizes: list[int], data: st.DataObject
) -> None:
    """Masters whose subjobs all start held; subjobs end in a random order between the
    monitor's passes. Each pass decides from the masters' status counters, as the monitor
    does; the statuses themselves are counted alongside."""
    statuses = [[Status.WAITING] * n for n in sizes]
    counters = []
    for n in sizes:
        counter = StatusCounter()
        counter.add(Status.WAITING, n)
        counters.append(counter)

    def move(master: int, sub: int, new: Status) -> None:
        counters[master].move(statuses[master][sub], new)
        statuses[master][sub] = new

    while True:
        members = []
        for i, counter in enumerate(counters):
            active, held = active_and_held(counter.by_status())
            counted = sum(s in ACTIVE for s in statuses[i]), statuses[i].count(Status.WAITING)
            assert (active, held) == counted  # the counter answers as counting would
            members.append(Member(i, active, held))
        for master, how_many in handovers(limit, members):
            held_ones = [k for k, s in enumerate(statuses[master]) if s is Status.WAITING]
            for sub in held_ones[:how_many]:
                move(master, sub, Status.SUBMITTING)
                move(master, sub, Status.SUBMITTED)
        running = [
            (i, k) for i, row in enumerate(statuses) for k, s in enumerate(row) if s in ACTIVE
        ]
        assert len(running) <= limit
        if not running:
            break
        # Some of the active ones end (at least one: the pass runs after a change).
        ending = data.draw(st.sets(st.sampled_from(running), min_size=1))
        for master, sub in ending:
            move(master, sub, Status.RUNNING)
            move(master, sub, data.draw(st.sampled_from(_LEGAL_ENDS)))
    assert all(s.final for row in statuses for s in row)  # nothing is left held


@given(
    limit=st.integers(1, 50),
    members=st.lists(
        st.builds(Member, st.integers(0, 1000), st.integers(0, 60), st.integers(0, 60)),
        unique_by=lambda m: m.job_id,
        max_size=6,
    ),
)
def test_hand_overs_fill_the_room_oldest_job_first(limit: int, members: list[Member]) -> None:
    chosen = handovers(limit, members)
    room = max(limit - sum(m.active for m in members), 0)
    by_id = {m.job_id: m for m in members}
    assert sum(n for _, n in chosen) == min(room, sum(m.held for m in members))
    assert all(0 < n <= by_id[i].held for i, n in chosen)
    ids = [i for i, _ in chosen]
    assert ids == sorted(ids)
    # Only the last job chosen may keep held ones while a later job got some.
    for i in ids[:-1]:
        assert dict(chosen)[i] == by_id[i].held


def test_the_throttles_pass_opens_no_transaction_while_no_workflow_has_members(
    session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every monitor cycle runs the pass: without throttled jobs it only looks whether any
    workflow has members, in the state it just caught up with."""
    here = threading.get_ident()
    opened: list[str] = []
    real = session.repo.in_transaction

    def counted(action: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == here:  # not the monitor thread's own passes
            opened.append(kwargs.get("what", ""))
        return real(action, **kwargs)

    monkeypatch.setattr(session.repo, "in_transaction", counted)
    assert Job(application=Executable(exe="/bin/true")).submit()  # in no workflow
    opened.clear()
    assert run_throttles(session) == 0
    assert opened == []

    throttle("counted", 1)
    j = Job(application=_gated(tmp_path), splitter=ArgSplitter(args=[[]] * 2), workflow="counted")
    j.submit()
    opened.clear()
    run_throttles(session)
    assert "counting the throttled workflows' active jobs" in opened
    (tmp_path / "gate").touch()
    assert j.wait(timeout=120) == "completed"
