"""A backend's poller keeps what a poll staged only once the monitor's cycle committed.

A cycle abandoned because its commit failed (here a real conflict: another connection
changes the same job's status between the poll and the commit) leaves the poller as it
was before the cycle, so the next cycle reads the same events again and nothing is lost.
The shared ref follower (what the Local backend and the Slurm pilots derive from the refs
they follow, kept from the refs' change log) is proven against reading every ref.
"""

from __future__ import annotations

import copy
import threading
from pathlib import Path
from typing import Any

import pytest
import transaction
from hypothesis import given, settings
from hypothesis import strategies as st

from ganga_like import Executable, Job
from ganga_like.model.interfaces import ActiveRef, ActiveRefs, Poller, Staged
from ganga_like.model.ref_follower import RefFollower
from ganga_like.repository.registry import Registry
from ganga_like.runtime.monitoring.cycle_hold import TEST_HOLD_VARIABLE
from ganga_like.runtime.session import Session
from ganga_like_local.backend import JOURNAL, LocalPoller
from ganga_like_slurm.pilot_poller import PilotRefs, is_pilot_ref

from .waiting import wait_for

SESSION_SETTINGS = {"monitoring": False}


def kept(poller: Poller) -> dict[str, Any]:
    """The values a poller keeps from cycle to cycle (its staged fields), copied."""
    return {
        name: copy.deepcopy(value.value)
        for name, value in vars(poller).items()
        if isinstance(value, Staged)
    }


def finished_in_journal(session: Session, job: Any) -> bool:
    journal = Path(session.repo.workspace) / str(job.id) / JOURNAL
    return journal.exists() and '"completed"' in journal.read_text()


def test_an_abandoned_cycle_leaves_the_poller_as_before_and_the_next_reads_it_again(
    session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monitor = session.monitor
    first = Job(application=Executable(exe="/bin/true"))
    first.submit()
    wait_for(lambda: finished_in_journal(session, first), 60, "the first job's end")
    monitor.run_once()
    assert first.status == "completed"
    poller = monitor.poller("Local")
    assert isinstance(poller, LocalPoller) and poller.offsets.value
    before = kept(poller)

    second = Job(application=Executable(exe="/bin/true"))
    second.submit()
    wait_for(lambda: finished_in_journal(session, second), 60, "the second job's end")
    # The next cycle that changes a job stops once its reports are applied; meanwhile
    # another connection changes the same job's status: the cycle's commit conflicts.
    monkeypatch.setenv(TEST_HOLD_VARIABLE, f"applied:{tmp_path}")
    cycle = threading.Thread(target=monitor.run_once)
    cycle.start()
    wait_for(lambda: (tmp_path / "applied").exists(), 60, "the cycle to apply its reports")
    assert poller.offsets.staged  # read, not yet kept
    tm = transaction.TransactionManager()
    conn = session.repo.db.open(transaction_manager=tm)
    Registry(conn.root()).jobs[second.id].status = "running"
    tm.commit()
    conn.close()
    (tmp_path / "applied.go").touch()
    cycle.join(60)
    assert not cycle.is_alive()

    assert kept(poller) == before
    assert not any(v.staged for v in vars(poller).values() if isinstance(v, Staged))
    monkeypatch.delenv(TEST_HOLD_VARIABLE)
    monitor.run_once()  # the same events, read again from the offsets kept
    assert second.status == "completed"
    assert kept(poller) != before


# -- the ref follower ---------------------------------------------------------------------

pilots = st.sampled_from([None, "p1", "p2"])
# A job is followed either by a ref of its own (not split: even ids here) or by one per
# subjob (split: odd ids), never by both at once. The (sub)jobs a pilot runs share its one
# Slurm id; other refs carry their own.
refs_of = st.builds(
    lambda job, sub, run, pilot: ActiveRef(
        job,
        None if job % 2 == 0 else sub,
        run,
        {"id": f"pilot_{job}_{pilot}", "pilot": pilot}
        if pilot
        else {"id": f"{job}_{None if job % 2 == 0 else sub}"},
    ),
    st.integers(0, 3),
    st.integers(0, 6),
    st.integers(1, 3),
    pilots,
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("add"), refs_of),
        st.tuples(st.just("discard"), refs_of),
        st.tuples(st.just("poll"), st.none()),
        st.tuples(st.just("new refs"), st.none()),  # a new tenure: another ActiveRefs
    ),
    max_size=80,
)


def derived(follower: RefFollower) -> tuple[Any, ...]:
    maps: tuple[Any, ...] = (follower.runs, follower.masters)
    if isinstance(follower, PilotRefs):
        maps += (follower.members, follower.ids)
    return maps


@settings(max_examples=300, deadline=None)
@given(ops=steps, log_min=st.sampled_from([2, 8, 4096]), pilot=st.booleans())
def test_the_ref_follower_holds_what_reading_every_ref_gives(
    ops: list[tuple[str, Any]], log_min: int, pilot: bool
) -> None:
    # A short change log makes the follower fall behind it and read every ref again.
    kind_of_refs = type("ShortLog", (ActiveRefs,), {"LOG_MIN": log_min})
    refs = kind_of_refs()
    follower = PilotRefs() if pilot else RefFollower()
    for kind, ref in [*ops, ("poll", None)]:
        if kind == "add":
            refs.add(ref)
        elif kind == "discard":
            refs.discard(ref.job_id, ref.subjob_id)
        elif kind == "new refs":
            refs = kind_of_refs(list(refs))
        else:
            follower.follow(refs)
            full = PilotRefs() if pilot else RefFollower()
            full.follow(list(refs))
            assert derived(follower) == derived(full)
            if pilot:
                assert set(follower.runs) == {r.fqid for r in refs if is_pilot_ref(r)}
            else:
                assert follower.runs == {r.fqid: r.run for r in refs}
