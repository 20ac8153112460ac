"""The status engine (no threads) and the monitoring service around it."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.config.store import store
from ganga_like.model import plugin_registry
from ganga_like.model.interfaces import StatusReport
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status
from ganga_like.runtime.monitoring.monitor import FINISHING_INTERVAL, CycleResult, next_interval
from ganga_like.runtime.monitoring.status_engine import Applied, apply_report
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_local.settings import Local as LocalSection
from ganga_like_runner import client as runner_client


def _master(n: int) -> JobImpl:
    master = JobImpl()
    subjobs = [JobImpl.new_subjob(master, i) for i in range(n)]
    master.attach_subjobs(subjobs)
    for sj in subjobs:
        sj.change_status(Status.SUBMITTED, "test")
    return master


def _cycle(polled: int, finished: int) -> CycleResult:
    result = CycleResult()
    result.polled, result.changed, result.finished = polled, finished, finished
    return result


def test_the_end_of_a_run_of_short_subjobs_is_polled_sooner() -> None:
    # 40 ended in the last 50 ms and 4 are left: they should end within 5 ms.
    assert next_interval(_cycle(44, 40), 0.05, 0.05) == FINISHING_INTERVAL
    # 10 ended, 10 are left: expected in 40 ms, sooner than the minimum interval.
    assert next_interval(_cycle(20, 10), 0.04, 0.05) == pytest.approx(0.04)


def test_long_running_or_idle_jobs_keep_the_minimum_interval() -> None:
    assert next_interval(_cycle(1000, 2), 0.05, 0.05) == 0.05
    assert next_interval(_cycle(10, 0), 0.05, 0.05) == 0.05
    assert next_interval(_cycle(0, 0), 0.05, 0.05) == 0.05


def test_engine_fills_in_running_and_updates_the_master_counter_without_any_io() -> None:
    master = _master(3)
    sj = master.subjob(1)
    applied = apply_report(sj, StatusReport("0.1", Status.COMPLETED, 10.0, exit_code=0), "X")
    assert applied.path == (Status.RUNNING, Status.COMPLETED) and applied.final
    assert [e[2] for e in sj.history] == ["submitted", "running", "completed"]
    # The filled-in running state is not said to have come with an exit code.
    assert [e[3] for e in sj.history][1:] == ["X: running", "X: completed, exit code 0"]
    assert sj.exit_code == 0
    assert master.counts() == {Status.SUBMITTED: 2, Status.COMPLETED: 1}
    # A subjob ran (the filled-in state counts): the master has started running and stays
    # so while the others wait.
    assert master.current_status() is Status.RUNNING


def test_engine_is_idempotent_and_ignores_stale_reports() -> None:
    master = _master(1)
    sj = master.subjob(0)
    report = StatusReport("0.0", Status.FAILED, 5.0, exit_code=2, reason="exit code 2")
    apply_report(sj, report, "X")
    before = sj.history
    assert apply_report(sj, report, "X").path == ()
    assert apply_report(sj, StatusReport("0.0", Status.RUNNING, 6.0), "X").path == ()
    assert sj.history == before
    assert master.current_status() is Status.FAILED


def test_what_an_ended_run_used_never_moves_a_subjob_retried_since_back_to_its_end() -> None:
    master = _master(2)
    retried, ended = master.subjob(0), master.subjob(1)
    for sj in (retried, ended):
        apply_report(sj, StatusReport(sj.fqid, Status.FAILED, 5.0, exit_code=3), "X")
    retried.change_status(Status.SUBMITTING, "monitor: retry 1 of 1 after failed")
    before = retried.history
    late = [
        StatusReport(sj.fqid, Status.FAILED, 5.0, usage=(2048, 1.0, 0.5), usage_only=True)
        for sj in (retried, ended)
    ]
    assert apply_report(retried, late[0], "X") == Applied(retried.fqid, ())
    assert retried.history == before and retried.resources_used() is None
    assert apply_report(ended, late[1], "X").used_only
    assert ended.resources_used() is not None and ended.status == "failed"


def test_engine_applies_ten_thousand_changes_in_well_under_a_second_of_cpu() -> None:
    master = _master(10_000)
    reports = [StatusReport(f"0.{i}", Status.COMPLETED, 1.0, exit_code=0) for i in range(10_000)]
    started = time.process_time()
    for sj, report in zip(master.iter_subjobs(), reports, strict=True):
        apply_report(sj, report, "X")
    cpu = time.process_time() - started
    assert master.current_status() is Status.COMPLETED
    print(f"10,000 status changes: {cpu:.3f} s CPU")  # budget figure, not asserted


def test_one_cycle_applies_all_changes_in_one_transaction(gangadir: Path) -> None:
    session = open_session(
        Settings(gangadir=gangadir, monitoring=False),
        store.snapshot().replaced({LocalSection: {"max_concurrent": 2, "idle_exit": 5}}),
    )
    try:
        j = Job(
            application=Executable(exe="true"),
            splitter=ArgSplitter(args=[[str(i)] for i in range(20)]),
        )
        j.submit()
        journal = session.repo.workspace / "0" / "runner-events.jsonl"
        deadline = time.time() + 30
        while time.time() < deadline:
            events, _ = runner_client.read_events(journal, 0) if journal.exists() else ([], 0)
            if sum(e.event == "completed" for e in events) == 20:
                break
            time.sleep(0.05)
        before = _transactions(session)
        result = session.monitor.run_once()
        assert result.polled == 20 and result.changed >= 20
        assert _transactions(session) == before + 1
        assert j.status == "completed"
        assert len(session.registry().active) == 0
        assert session.monitor.run_once().polled == 0  # nothing left to follow
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))


def _transactions(session: Session) -> int:
    return sum(1 for _ in session.repo.db.storage.iterator())


FLAKY = '''
import time
from pathlib import Path
from typing import Any, ClassVar
from ganga_like.errors import BackendError
from ganga_like.model.interfaces import IBackend, StatusReport, SubmitOutcome
from ganga_like.model.status import Status

class Flaky(IBackend):
    """Accepts everything; its status service is "down" while <gangadir>/down exists."""
    _schema: ClassVar[dict[str, Any]] = {}

    def submit_bulk(self, ctx, jobs, keep_going):
        return SubmitOutcome()

    def kill_bulk(self, ctx, jobs):
        return {}

    @classmethod
    def poll(cls, ctx, refs):
        if (ctx.gangadir / "down").exists():
            raise BackendError("status service unreachable", transient=True)
        return [StatusReport(r.fqid, Status.COMPLETED, time.time(), exit_code=0) for r in refs]
'''


@pytest.fixture
def flaky_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    plug = tmp_path / "flakyplug"
    info = plug / "flaky_backend-1.0.dist-info"
    info.mkdir(parents=True)
    (plug / "flaky_backend.py").write_text(FLAKY)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: flaky-backend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ganga_like.plugins]\nFlaky = flaky_backend:Flaky\n")
    monkeypatch.syspath_prepend(str(plug))
    plugin_registry.reset()
    yield
    plugin_registry.reset()


def test_a_backend_that_is_down_leaves_jobs_stale_not_failed_and_recovers(
    gangadir: Path, flaky_plugin: None
) -> None:
    session = open_session(Settings(gangadir=gangadir, monitoring=False))
    try:
        (gangadir / "down").write_text("")
        j = Job(
            backend="Flaky",
            application=Executable(exe="true"),
            splitter=ArgSplitter(args=[["1"], ["2"]]),
        )
        j.submit()
        for _ in range(3):
            result = session.monitor.run_once()
            assert "status service unreachable" in result.stale_backends["Flaky"]
        assert j.status == "submitted"
        assert all(s.status == "submitted" for s in j.subjobs)
        (gangadir / "down").unlink()
        session.monitor.run_once()
        assert j.status == "completed"
        assert session.monitor.stale_backends == {}
    finally:
        close_session()


def test_the_monitor_backs_off_when_nothing_changes(gangadir: Path) -> None:
    session = open_session(
        Settings(
            gangadir=gangadir, monitoring=False, monitor_min_interval=0.05, monitor_max_interval=0.8
        )
    )
    monitor = session.monitor
    starts: list[float] = []
    run_once = monitor.run_once

    def timed_cycle() -> CycleResult:  # the monitor's own cycle, its start noted
        starts.append(time.monotonic())
        return run_once()

    monitor.run_once = timed_cycle  # type: ignore[method-assign]
    try:
        Job()
        monitor.start()
        deadline = time.monotonic() + 60  # a guard against a monitor that stopped polling
        while len(starts) < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(starts) >= 6
        gaps = [later - earlier for earlier, later in itertools.pairwise(starts[:6])]
        # Waits of 0.1, 0.2, 0.4, 0.8 and 0.8 s between the cycles, not 0.05 s each; a slow
        # machine only makes them longer.
        assert all(
            gap >= wait - 0.01 for gap, wait in zip(gaps, [0.1, 0.2, 0.4, 0.8, 0.8], strict=True)
        ), gaps
    finally:
        close_session()
