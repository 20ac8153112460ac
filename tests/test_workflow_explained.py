"""What ``why`` and a waiting job's log say once its condition is decided but no monitor
has acted on it yet, and when failures allow_failed tolerates let it go."""

from __future__ import annotations

from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.gpi.proxy import unwrap
from ganga_like.runtime.session import Session
from ganga_like.runtime.workflow.explain import explain

from .waiting import wait_for

SESSION_SETTINGS = {"monitoring": False}


def test_a_decided_waiting_job_says_its_condition_holds_and_a_monitor_is_to_submit_it(
    session: Session, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    a = Job(
        application=Executable(exe="/bin/sh"),
        splitter=ArgSplitter(args=[["-c", "exit 0"], ["-c", "exit 0"], ["-c", "exit 3"]]),
    )
    b = Job(application=Executable(exe="/bin/true"), after=a, allow_failed=1)
    a.submit()
    b.submit()
    # Cycles that record what ran, without the passes that act on decided waiting jobs:
    # the state a repository is in between a monitor's cycle and its next pass.
    monkeypatch.setattr(session.monitor, "_passes", [])

    def ended() -> bool:
        session.monitor.run_once()
        return a.status == "failed"

    wait_for(ended, 120, "the split job to end")
    assert b.status == "waiting"
    said = explain(session.registry(), unwrap(b), monitored=False)
    assert said == (
        f"{b.id} waiting: for {a.id} (2 done, 1 failed, 0 to go) to be completed; that holds "
        f"({a.id} ended, 1 failed of 3 (allow_failed=1)): a monitor is to submit it, "
        "and none is running (a session or `ganga monitor start` runs one)"
    )
    assert explain(session.registry(), unwrap(b), monitored=True).endswith(
        "a monitor is to submit it"
    )
    logged = [cause for *_, cause in unwrap(b).history if "to be submitted" in cause]
    assert logged == [f"monitor: {a.id} ended, 1 failed of 3 (allow_failed=1): to be submitted"]


def test_why_a_split_job_failed_names_its_failed_subjobs_and_the_first_ones_cause(
    session: Session,
) -> None:
    args = [["-c", f"exit {code}"] for code in (0, 3, 0, 3, 7, 3, 3, 3, 3)]
    j = Job(application=Executable(exe="/bin/sh"), splitter=ArgSplitter(args=args))
    j.submit()

    def ended() -> bool:
        session.monitor.run_once()
        return j.status == "failed"

    wait_for(ended, 120, "the split job to end")
    lines = explain(session.registry(), unwrap(j)).splitlines()
    assert lines[0] == (
        f"{j.id} failed: 7 of 9 subjobs failed or were killed: {j.id}.1 (exit 3), "
        f"{j.id}.3 (exit 3), {j.id}.4 (exit 7), {j.id}.5 (exit 3), "
        f"{j.id}.6 (exit 3), and 2 more"
    )
    first = unwrap(j.subjobs[1])
    assert lines[1] == f"{j.id}.1 failed (exit 3): {first.history[-1][3]}"
    assert len(lines) == 2
