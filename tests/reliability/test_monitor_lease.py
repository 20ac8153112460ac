"""One process polls at a time; the lease passes on when its holder dies; the daemon."""

from __future__ import annotations

import bisect
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job, config, jobs
from ganga_like.model.status import Status
from ganga_like.repository.connection import Repository
from ganga_like.runtime.monitoring import cycle_hold, daemon
from ganga_like.runtime.monitoring.lease import LeaseHolder, lease_holder
from ganga_like.runtime.monitoring.monitor import CycleResult
from ganga_like.runtime.session import close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import JOURNAL
from ganga_like_runner import client as runner_client

from .conftest import child_env, kill_tree, python, shared_settings, wait_until

HOLDER = """
    import sys, time
    from ganga_like.runtime.session import current_session
    session = current_session()
    for _ in range(100):
        session.monitor.run_once()  # take the lease now rather than after a backoff
        if session.monitor.lease.held or len(sys.argv) > 1:
            break
        time.sleep(0.05)
    print("holding" if session.monitor.lease.held else "following", flush=True)
    time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 120)
    print(session.monitor.lease.held, session.monitor.cycles, flush=True)
"""


def test_only_the_lease_holder_polls(gangadir: Path, cleanup: list[subprocess.Popen[str]]) -> None:
    session = open_session(shared_settings(gangadir))
    assert wait_until(lambda: session.monitor.lease.held, 5)
    child = python(HOLDER, child_env(gangadir), argv=("1.5",))
    cleanup.append(child)
    out, err = child.communicate(timeout=60)
    first, second = out.split("\n")[:2]
    assert first == "following", err
    assert second == "False 0"  # it never polled a backend
    assert lease_holder(gangadir) == LeaseHolder(os.getpid(), "session", host="")


def test_a_dead_holders_lease_is_taken_over_by_the_next_cycle(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    holder = python(HOLDER, child_env(gangadir))
    cleanup.append(holder)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
    session = open_session(shared_settings(gangadir))
    monitor = session.monitor
    cycles: list[tuple[float, float, bool]] = []  # each cycle's start, end, lease held after
    run_once = monitor.run_once

    def noted_cycle() -> CycleResult:
        started = time.monotonic()
        result = run_once()
        cycles.append((started, time.monotonic(), monitor.lease.held))
        return result

    monitor.run_once = noted_cycle  # type: ignore[method-assign]
    j = Job(
        application=Executable(exe="sleep"), splitter=ArgSplitter(args=[["0.3"] for _ in range(4)])
    )
    j.submit()
    assert wait_until(lambda: len(cycles) >= 2, 60)  # cycles while the holder lives
    assert not monitor.lease.held
    assert lease_holder(gangadir) == LeaseHolder(holder.pid, "session", host="")
    killed = time.monotonic()
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    died = time.monotonic()
    assert wait_until(lambda: monitor.lease.held, 60)  # a guard against a hang
    takeover = time.monotonic() - died
    print(f"lease taken over {takeover:.2f} s after its holder was killed")
    assert wait_until(lambda: any(start > died for start, _end, _held in cycles), 60)
    # No cycle took the lease while its holder lived; the first cycle that started after
    # it died took it (if the one under way then had not). The monitor of a session
    # without the lease tries every Monitor.lease_timeout (0.5 s here): on an idle machine
    # the takeover is that soon, and the figure above says how soon it was.
    assert not any(held for _start, end, held in cycles if end < killed), cycles
    assert [held for start, _end, held in cycles if start > died][:1] == [True], cycles
    assert j.wait(timeout=60) == "completed"


def test_the_daemon_follows_jobs_after_every_shell_exited(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    pid = daemon.start(shared_settings(gangadir))
    assert daemon.start(shared_settings(gangadir)) == pid  # one per gangadir
    submit = python(
        """
        from ganga_like import *
        j = Job(application=Executable(exe="sleep"),
                splitter=ArgSplitter(args=[["0.2"] for _ in range(6)]))
        j.submit()
        print(j.id, flush=True)
    """,
        child_env(gangadir),
    )
    cleanup.append(submit)
    out, err = submit.communicate(timeout=60)
    assert submit.returncode == 0, err
    job_id = int(out.strip())
    # No shell is left; only the daemon polls. Read the outcome without monitoring.
    session = open_session(shared_settings(gangadir, monitoring=False))

    def done() -> bool:
        session.sync()
        return jobs(job_id).status == "completed"

    assert wait_until(done, 30)
    assert session.monitor.cycles == 0
    text = str(daemon.status(gangadir))
    assert f"running, PID {pid}" in text and f"held by PID {pid} (daemon)" in text
    close_session()
    assert daemon.stop(gangadir)
    assert "not running" in str(daemon.status(gangadir))
    assert lease_holder(gangadir) is None


def test_sessions_give_the_lease_to_the_daemon(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    session = open_session(shared_settings(gangadir))
    assert wait_until(lambda: session.monitor.lease.held, 5)
    pid = daemon.start(shared_settings(gangadir))
    assert wait_until(lambda: lease_holder(gangadir) == LeaseHolder(pid, "daemon", host=""), 10)
    assert not session.monitor.lease.held
    j = Job(application=Executable(exe="true"))
    j.submit()
    assert j.wait(timeout=30) == "completed"  # the daemon was woken, the session read
    daemon.stop(gangadir)
    assert wait_until(lambda: session.monitor.lease.held, 10)  # and back to the session


# -- kill -9 of the monitor in the middle of its cycles ---------------------------------

MONITOR = """
    from ganga_like.runtime.session import current_session
    session = current_session()
    print("open", flush=True)
    import time
    time.sleep(120)
"""


# Each subjob waits for the gate of its batch: the test opens one batch per kill, so that
# the jobs are partly done at every kill, however fast or slow the machine.
GATED = 'while [ ! -e "$1" ]; do sleep 0.05; done'


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_kill_9_of_the_monitor_mid_cycle_loses_and_repeats_nothing(
    mode: str, gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    _kill_monitors_while_jobs_finish(mode, gangadir, cleanup, subjobs=150, kills=9)


@pytest.mark.slow
def test_kill_9_of_the_monitor_at_many_points_full_scale(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    _kill_monitors_while_jobs_finish("shared", gangadir, cleanup, subjobs=2000, kills=60)


def _kill_monitors_while_jobs_finish(
    mode: str, gangadir: Path, cleanup: list[subprocess.Popen[str]], subjobs: int, kills: int
) -> None:
    """Kill -9 a monitor at each point of its cycle in turn (cycle_hold), each time after
    the next batch of subjobs has ended, and check that what was recorded is exactly what
    the killed cycles committed, and in the end exactly what the runner did."""
    settings = shared_settings(gangadir, repository_mode=mode, monitoring=False)
    config.Local.max_concurrent = 1  # the daemon started below carries it too
    open_session(settings)
    gates = gangadir.parent / "gates"
    gates.mkdir()
    ends = [subjobs * (k + 1) // kills for k in range(kills)]  # batch k: [ends[k-1], ends[k])
    j = Job(
        application=Executable(exe="sh"),
        splitter=ArgSplitter(
            args=[
                ["-c", GATED, "sh", str(gates / str(bisect.bisect_right(ends, i)))]
                for i in range(subjobs)
            ]
        ),
    )
    j.submit()
    job_id = j.id
    close_session()  # from now on only the killed monitors write
    env = child_env(gangadir, mode=mode)
    code = MONITOR.replace(
        "current_session()",
        (
            "__import__('ganga_like.runtime.session', fromlist=['x']).open_session("
            "__import__('ganga_like.runtime.settings', fromlist=['x']).Settings("
            "monitor_min_interval=0.005, monitor_max_interval=0.02, "
            "monitor_lease_timeout=0.1))"
        ),
    )
    journal = gangadir / "workspace" / str(job_id) / JOURNAL
    recorded = 0
    seen = []
    for k in range(kills):
        (gates / str(k)).touch()
        assert _wait_finished(journal, ends[k])
        point = cycle_hold.POINTS[k % len(cycle_hold.POINTS)]
        _kill_monitor_at(point, gangadir.parent / f"holds-{k}", code, env, cleanup)
        done = _recorded_done(gangadir, job_id)
        seen.append((point, done))
        # A cycle killed before its commit finished recorded nothing; one killed after it
        # recorded every subjob the runner had ended.
        assert done == (ends[k] if point == "committed" else recorded), seen
        recorded = done
    print(f"subjobs recorded done after each kill -9 of the monitor: {seen}")
    assert any(0 < done < subjobs for _point, done in seen)
    session = open_session(Settings(gangadir=gangadir, repository_mode=mode, monitoring=False))
    assert journal == session.repo.workspace / str(job_id) / JOURNAL
    assert _wait_finished(journal, subjobs)
    for _ in range(3):
        session.monitor.run_once()
    _check_against_the_runner(session, job_id, journal)


def _kill_monitor_at(
    point: str,
    holds: Path,
    code: str,
    env: dict[str, str],
    cleanup: list[subprocess.Popen[str]],
) -> None:
    """Start a monitor that stops at ``point`` of its first cycle that changes a job, and
    kill -9 it there."""
    holds.mkdir()
    child = python(code, dict(env, **{cycle_hold.TEST_HOLD_VARIABLE: f"{point}:{holds}"}))
    cleanup.append(child)
    assert wait_until(lambda: (holds / point).exists() or child.poll() is not None, 120)
    assert (holds / point).exists(), child.communicate()[1]
    kill_tree(child)


def _wait_finished(journal: Path, count: int) -> bool:
    """Whether the runner ends ``count`` subjobs (a guard against a hang, not a limit)."""
    return wait_until(lambda: _finished(journal) >= count, 120)


def _recorded_done(gangadir: Path, job_id: int) -> int:
    snapshot = Repository(gangadir, "readonly")
    try:
        master = snapshot.registry().get(job_id)
        assert master is not None
        return master.counts().get(Status.COMPLETED, 0)
    finally:
        snapshot.close()


def _finished(journal: Path) -> int:
    events, _ = runner_client.read_events(journal, 0)
    return sum(1 for e in events if e.event in runner_client.TERMINAL_EVENTS)


def _check_against_the_runner(session: object, job_id: int, journal: Path) -> None:
    from ganga_like.runtime.session import Session

    assert isinstance(session, Session)
    session.repo.abort()  # see what the monitor (its own connection) committed
    events, _ = runner_client.read_events(journal, 0)
    truth = {
        e.key.split("@")[0]: e.event for e in events if e.event in runner_client.TERMINAL_EVENTS
    }
    master = session.registry().get(job_id)
    assert master is not None
    counts: dict[str, int] = {}
    for sj in master.iter_subjobs():
        assert sj.status == truth[sj.fqid], sj.fqid
        counts[sj.status] = counts.get(sj.status, 0) + 1
        changes = [(old, new) for _t, old, new, _cause in sj.history if old != new]
        assert len(changes) == len(set(changes)), f"{sj.fqid} applied twice: {sj.history}"
        assert [new for _old, new in changes] == ["submitted", "running", "completed"]
    assert master._counter is not None and master._counter.counts == counts
    assert not any(Status.parse(s).active for s in counts)
    assert len(session.registry().active) == 0


def test_a_job_left_completing_is_finished_by_the_next_monitor(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    """``completing`` is an active state: it stays in the active index (written in the same
    transaction), so whichever monitor holds the lease next finishes it."""
    session = open_session(shared_settings(gangadir, monitoring=False))
    j = Job(application=Executable(exe="true"), splitter=ArgSplitter(args=[["1"], ["2"]]))
    j.submit()
    journal = session.repo.workspace / str(j.id) / JOURNAL
    assert wait_until(lambda: _finished(journal) == 2, 30)

    def leave_completing() -> None:  # what a monitor killed between two cycles leaves
        master = session.registry().get(j.id)
        assert master is not None
        for sj in master.iter_subjobs():
            sj.change_status(Status.RUNNING, "test")
            sj.change_status(Status.COMPLETING, "test")

    session.repo.in_transaction(leave_completing)
    close_session()
    follower = open_session(shared_settings(gangadir))
    assert j.id in [x.id for x in jobs]
    assert wait_until(lambda: (follower.sync(), jobs(j.id).status)[1] == "completed", 10)
    assert [s.status for s in jobs(j.id).subjobs] == ["completed", "completed"]


def test_the_daemon_receives_the_configuration_but_its_command_line_shows_none_of_it(
    gangadir: Path,
) -> None:
    """Anyone on the machine reads a process's command line (ps); the notifier's password
    and the other options reach the daemon through a private file it inherits."""
    from ganga_like.config.snapshot import ConfigSnapshot
    from ganga_like.config.store import store
    from ganga_like_local.settings import Local
    from ganga_like_std.notifier_settings import Notifier

    config.Notifier.password = "pw-never-in-ps"  # the store is reset after each test
    config.Local.max_concurrent = 3
    pid = daemon.start(shared_settings(gangadir))
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
        assert b"pw-never-in-ps" not in command_line
        assert b"max_concurrent" not in command_line
        assert daemon.HANDED_FD_OPTION.encode() in command_line
        assert "running" in str(daemon.status(gangadir))
    finally:
        assert daemon.stop(gangadir)
    # What the daemon reads back from the handed file is the snapshot it was given.
    handed = {
        "settings": {"gangadir": str(gangadir)},
        "config": daemon._sections_as_json(store.snapshot()),
    }
    with daemon._handed_over(handed) as fd:
        read = daemon._read_handed(os.dup(fd))
    snapshot = daemon._config_from_json(read["config"])
    assert isinstance(snapshot, ConfigSnapshot)
    assert snapshot[Notifier].password == "pw-never-in-ps"
    assert snapshot[Local].max_concurrent == 3
    assert daemon._settings_from_json(read["settings"]).gangadir == gangadir
