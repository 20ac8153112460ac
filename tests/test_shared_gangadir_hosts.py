"""A gangadir on a filesystem several hosts share: the second host is real namespaces.

"Host B" runs in its own UTS namespace (another hostname) and its own PID namespace (its
PIDs mean nothing to host A and the other way round), on the same directory, as root:
``unshare --uts --pid --fork --mount-proc``. The heartbeat is made short for the tests.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ganga_like.hosts import BOOT_ID, HEARTBEAT_VARIABLE, read_record, stale_after, take_over
from ganga_like.model.job import Job
from ganga_like.repository.connection import Repository
from ganga_like.repository.zeo import shared
from ganga_like.repository.zeo.host_claim import PID_NAME
from ganga_like.runtime.session import Session

from .waiting import wait_until

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="needs root and unshare(1) for the second host's namespaces",
)

HEARTBEAT = "0.2"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def hosts_env(env_for: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """Both hosts' environment: shared mode, a short heartbeat."""
    monkeypatch.setenv(HEARTBEAT_VARIABLE, HEARTBEAT)
    monkeypatch.delenv("GANGA_REPOSITORY_MODE", raising=False)
    yield {**env_for, HEARTBEAT_VARIABLE: HEARTBEAT}


def on_host_b(
    argv: list[str], env: dict[str, str], name: str = "hostb", boot_id: Path | None = None
) -> subprocess.Popen[str]:
    """``argv`` run as host B: hostname ``name``, its own PIDs, and the boot id in the
    file ``boot_id`` (bound over the kernel's in its own mount of /proc) when given."""
    script = f'hostname {name} && exec "$@"'
    if boot_id is not None:
        script = f"mount --bind {boot_id} {BOOT_ID} && {script}"
    return subprocess.Popen(
        ["unshare", "--uts", "--pid", "--fork", "--mount-proc", "sh", "-c", script, "sh", *argv],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def b_session(gangadir: Path, mode: str, *options: str) -> list[str]:
    return [sys.executable, "-m", "tests.host_b_session", str(gangadir), mode, *options]


def finished(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def servers_of(gangadir: Path) -> list[int]:
    """Every repository server process of ``gangadir`` on the machine, whatever its
    namespace (this test runs in the first one: it sees them all)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if shared.SERVER_MODULE.encode() in args and str(gangadir).encode() in args:
            found.append(int(entry.name))
    return found


def a_repository_with(gangadir: Path, *names: str) -> Repository:
    """Host A's session (this process) with jobs named ``names``; its server runs here."""
    repo = Repository(gangadir, mode="shared")
    for name in names:
        repo.in_transaction(lambda name=name: repo.registry().add(Job(name=name)))
    return repo


def test_host_b_finding_a_live_server_on_host_a_says_so_in_one_line_and_touches_nothing(
    gangadir: Path, hosts_env: dict[str, str]
) -> None:
    repo = a_repository_with(gangadir, "a-1")
    try:
        data = gangadir / "repository" / "Data.fs"
        before = data.stat()
        [server] = servers_of(gangadir)
        for mode in ("shared", "embedded"):
            code, out, err = finished(on_host_b(b_session(gangadir, mode, "--add", "b"), hosts_env))
            assert code == 1, (out, err)
            [line] = out.splitlines()
            assert f"held by its server on host {socket.gethostname()} (PID {server}" in line
            assert "--Repository.mode=readonly" in line and "postgresql://" in line
        after = data.stat()
        assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        assert servers_of(gangadir) == [server]
        # Read-only, host B sees host A's jobs.
        code, out, err = finished(on_host_b(b_session(gangadir, "readonly"), hosts_env))
        assert (code, out) == (0, "JOBS a-1\n"), err
    finally:
        repo.close()


def test_ganga_commands_on_host_b_list_host_a_jobs_and_refuse_changes_in_one_line(
    gangadir: Path, hosts_env: dict[str, str], tmp_path: Path
) -> None:
    repo = a_repository_with(gangadir, "a-1")
    try:
        ganga = str(Path(sys.executable).with_name("ganga"))
        code, out, err = finished(on_host_b([ganga, "jobs", "--json"], hosts_env))
        assert code == 0 and '"a-1"' in out, err
        definition = tmp_path / "b.json"
        definition.write_text(json.dumps({"format": "ganga_like.job/1", "job": {"name": "b"}}))
        data = gangadir / "repository" / "Data.fs"
        before = data.stat()
        for command in (["import", str(definition)], ["repository", "recover"]):
            code, out, err = finished(on_host_b([ganga, *command], hosts_env))
            assert code != 0
            [line] = err.strip().splitlines()
            assert f"held by its server on host {socket.gethostname()}" in line, err
        after = data.stat()
        assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
            before.st_ino,
            before.st_size,
            before.st_mtime_ns,
        )
    finally:
        repo.close()


def kill_server_and_age_its_record(gangadir: Path) -> float:
    """Host A's server killed -9; returns when its record has missed its heartbeats
    (the time that took, from the kill)."""
    [server] = servers_of(gangadir)
    killed_at = time.monotonic()
    os.kill(server, signal.SIGKILL)
    assert wait_until(lambda: not Path(f"/proc/{server}/cmdline").read_bytes(), 10)
    record = gangadir / "repository" / PID_NAME
    assert wait_until(lambda: (r := read_record(record)) is not None and r.age > stale_after())
    return time.monotonic() - killed_at


def test_host_b_takes_over_the_repository_of_a_host_whose_server_died(
    gangadir: Path, hosts_env: dict[str, str]
) -> None:
    a_repository_with(gangadir, "a-1", "a-2").close()
    aged = kill_server_and_age_its_record(gangadir)
    started = time.monotonic()
    code, out, err = finished(on_host_b(b_session(gangadir, "shared", "--add", "b-1"), hosts_env))
    assert (code, out) == (0, "JOBS a-1,a-2,b-1\n"), err
    taken = time.monotonic() - started
    print(f"record aged in {aged:.2f} s, host B open+commit+close in {taken:.2f} s")
    # Host B's server went with its PID namespace (host B is gone): once its record has
    # missed its heartbeats, host A takes the repository back and finds everything.
    assert wait_until(lambda: not servers_of(gangadir), 10)
    record = gangadir / "repository" / PID_NAME
    assert wait_until(lambda: (r := read_record(record)) is not None and r.age > stale_after())
    with Repository(gangadir, mode="shared") as repo:
        assert sorted(j.name for j in repo.registry().jobs.values()) == ["a-1", "a-2", "b-1"]


def test_a_host_that_rebooted_takes_its_repository_back_without_waiting_for_heartbeats(
    gangadir: Path, hosts_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(HEARTBEAT_VARIABLE, "600")  # its record would stay fresh for 30 min
    a_repository_with(gangadir, "a-1").close()
    [server] = servers_of(gangadir)
    os.kill(server, signal.SIGKILL)
    assert wait_until(lambda: not Path(f"/proc/{server}/cmdline").read_bytes(), 10)
    new_boot = tmp_path / "boot_id"
    new_boot.write_text("00000000-1111-2222-3333-444444444444\n")
    rebooted = on_host_b(
        b_session(gangadir, "shared", "--add", "after-reboot"),
        {**hosts_env, HEARTBEAT_VARIABLE: "600"},
        name=socket.gethostname(),
        boot_id=new_boot,
    )
    code, out, err = finished(rebooted)
    assert (code, out) == (0, "JOBS a-1,after-reboot\n"), err


def test_two_sessions_of_host_b_racing_to_take_over_start_exactly_one_server(
    gangadir: Path, hosts_env: dict[str, str], tmp_path: Path
) -> None:
    a_repository_with(gangadir, "a-1").close()
    kill_server_and_age_its_record(gangadir)
    go, close = tmp_path / "go", tmp_path / "close"
    opened = [tmp_path / "opened-1", tmp_path / "opened-2"]
    session = (
        f"{sys.executable} -m tests.host_b_session {gangadir} shared --wait-for {go} "
        f"--close-after {close}"
    )
    both = (
        f"{session} --add b-1 --opened {opened[0]} & "
        f"{session} --add b-2 --opened {opened[1]} & wait"
    )
    host_b = on_host_b(["sh", "-c", both], hosts_env)
    try:
        go.touch()
        assert wait_until(lambda: all(p.exists() for p in opened), 60), host_b.stderr
        assert len(servers_of(gangadir)) == 1
        record = read_record(gangadir / "repository" / PID_NAME)
        assert record is not None and record.host is not None and record.host.name == "hostb"
    finally:
        close.touch()
        code, out, err = finished(host_b)
    assert code == 0, err
    seen = sorted(out.split())
    assert seen[0] == "JOBS" and "a-1" in out and "b-1" in out and "b-2" in out, out


def test_a_server_cut_off_while_another_host_took_over_leaves_at_its_next_heartbeat(
    gangadir: Path, hosts_env: dict[str, str]
) -> None:
    a_repository_with(gangadir, "a-1").close()
    [server] = servers_of(gangadir)
    path = gangadir / "repository" / PID_NAME
    os.kill(server, signal.SIGSTOP)  # cut off: no heartbeat
    try:
        assert wait_until(lambda: (r := read_record(path)) is not None and r.age > stale_after())
        record = read_record(path)
        assert record is not None and take_over(record)
        path.write_text("4242 /elsewhere/zeo.sock host=hostb boot=b\n")  # host B's claim
    finally:
        os.kill(server, signal.SIGCONT)
    assert wait_until(lambda: server not in servers_of(gangadir), 30)
    assert path.read_text() == "4242 /elsewhere/zeo.sock host=hostb boot=b\n"  # left alone
    log = (gangadir / "repository" / "zeo.log").read_text()
    assert "is no longer this server's" in log


# -- the Local runner and the monitor daemon ---------------------------------------------


def processes_running(module: str, directory: Path) -> list[int]:
    """Every process of ``module`` serving ``directory``, whatever its namespace."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if module.encode() in args and str(directory).encode() in args:
            found.append(int(entry.name))
    return found


ON_B_RUNNER = """
import sys
from pathlib import Path
from ganga_like_runner import client
from ganga_like_runner.client import TaskSpec
d = Path(sys.argv[1])
print("revived", client.revive(d))
print("pid", client.runner_pid(d))
print("elsewhere", client.runner_elsewhere(d).host.name)
task = TaskSpec("b", ["true"], {}, sys.argv[2], sys.argv[2], [], [], sys.argv[3])
try:
    client.submit(d, [task], {}, 1)
except OSError as exc:
    print("refused", exc)
client.kill(d, ["a"])
print("kill queued")
"""


def test_a_runner_alive_on_host_a_is_never_restarted_from_host_b_which_may_kill_its_tasks(
    tmp_path: Path, hosts_env: dict[str, str]
) -> None:
    from ganga_like_runner.client import TaskSpec, read_events, runner_pid, stop, submit

    runner = tmp_path / "local-runner"
    journal = tmp_path / "journal.jsonl"
    work = str(tmp_path / "a")
    task = TaskSpec("a", ["sleep", "60"], {}, work, work, [], [], str(journal))
    submit(runner, [task], {"PATH": os.environ["PATH"]}, 1)
    try:
        assert wait_until(lambda: any(e.event == "started" for e in read_events(journal, 0)[0]), 30)
        a_runner = runner_pid(runner)
        assert a_runner is not None
        host_b = on_host_b(
            [sys.executable, "-c", ON_B_RUNNER, str(runner), str(tmp_path / "b"), str(journal)],
            hosts_env,
        )
        code, out, err = finished(host_b)
        assert code == 0, err
        lines = out.splitlines()
        assert lines[:3] == ["revived False", "pid None", f"elsewhere {socket.gethostname()}"]
        assert lines[3].startswith(f"refused the Local runner of {runner} runs on host ")
        assert lines[4] == "kill queued"
        # Host A's runner read host B's kill request at its next heartbeat: no signal
        # crossed the hosts, and no second runner was started.
        assert wait_until(lambda: any(e.event == "killed" for e in read_events(journal, 0)[0]), 30)
        assert processes_running("ganga_like_runner", runner) == [a_runner]
        assert not (tmp_path / "b").exists()  # host B's task was never queued
    finally:
        stop(runner)


ON_B_REVIVE = """
import sys, time
from pathlib import Path
from ganga_like.hosts import read_record
from ganga_like_runner import client
d, journal = Path(sys.argv[1]), Path(sys.argv[2])
print("revived", client.revive(d))
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    ended = [e for e in client.read_events(journal, 0)[0] if e.event == "failed"]
    if ended:
        print("failed", ended[0].reason)
        break
    time.sleep(0.02)
print("runner on", read_record(d / "runner.pid").host.name)
"""


def test_host_b_takes_over_the_runner_of_a_gone_host_and_signals_none_of_its_pids(
    tmp_path: Path, hosts_env: dict[str, str]
) -> None:
    from ganga_like_runner.client import TaskSpec, read_events, runner_pid, submit

    runner = tmp_path / "local-runner"
    journal = tmp_path / "journal.jsonl"
    work = str(tmp_path / "a")
    task = TaskSpec("a", ["sleep", "60"], {}, work, work, [], [], str(journal))
    submit(runner, [task], {"PATH": os.environ["PATH"]}, 1)
    assert wait_until(lambda: any(e.event == "started" for e in read_events(journal, 0)[0]), 30)
    task_pid = json.loads((Path(work) / "__run__").read_text())["pid"]
    try:
        a_runner = runner_pid(runner)
        assert a_runner is not None
        os.kill(a_runner, signal.SIGKILL)
        record = runner / "runner.pid"
        assert wait_until(lambda: (r := read_record(record)) is not None and r.age > stale_after())
        host_b = on_host_b(
            [sys.executable, "-c", ON_B_REVIVE, str(runner), str(journal)], hosts_env
        )
        code, out, err = finished(host_b)
        assert code == 0, err
        here = socket.gethostname()
        assert out.splitlines() == [
            "revived True",
            f"failed the runner died on host {here} while it ran (pid {task_pid})",
            "runner on hostb",
        ]
        assert not (runner / "taken-over").exists()
        assert Path(f"/proc/{task_pid}").exists()  # host A's process: not host B's to kill
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(task_pid, signal.SIGKILL)


def test_host_b_shows_a_daemon_alive_on_host_a_and_neither_starts_nor_stops_it(
    gangadir: Path, hosts_env: dict[str, str]
) -> None:
    from ganga_like.runtime.monitoring import daemon
    from ganga_like.runtime.monitoring.lease import lease_holder
    from ganga_like.runtime.settings import Settings

    settings = Settings(gangadir=gangadir, repository_mode="shared")
    a_daemon = daemon.start(settings)
    try:
        assert wait_until(lambda: lease_holder(gangadir) is not None, 30)
        module = "ganga_like.runtime.monitoring.daemon"
        here = socket.gethostname()
        code, out, err = finished(
            on_host_b([sys.executable, "-m", module, "status", str(gangadir)], hosts_env)
        )
        assert code == 0, err
        assert out.startswith(f"monitor daemon: running on host {here} (PID {a_daemon},"), out
        assert f"monitor lease: held by PID {a_daemon} (daemon on {here})" in out, out
        for command in ("start", "stop"):
            code, out, err = finished(
                on_host_b([sys.executable, "-m", module, command, str(gangadir)], hosts_env)
            )
            assert code == 1, (out, err)
            [line] = err.splitlines()
            assert f"runs on host {here} (PID {a_daemon}," in line
        assert processes_running(module, gangadir) == [a_daemon]
        assert daemon.daemon_pid(gangadir) == a_daemon
    finally:
        daemon.stop(gangadir)


# The session fixture's, for the one test that submits through the GPI: host A's session
# shares its repository, as every session does by default.
SESSION_SETTINGS = {"repository_mode": "shared", "monitoring": False}


def test_local_jobs_submitted_on_host_a_are_shown_on_host_b_as_running_on_host_a(
    session: Session, hosts_env: dict[str, str], tmp_path: Path
) -> None:
    from ganga_like import ArgSplitter, Executable, Job

    gate = tmp_path / "gate"
    program = tmp_path / "wait.sh"
    program.write_text(f"#!/bin/sh\nwhile [ ! -e {gate} ]; do sleep 0.05; done\n")
    program.chmod(0o755)
    try:
        j = Job(application=Executable(exe=str(program)), splitter=ArgSplitter(args=[[1], [2]]))
        j.submit()
        script = tmp_path / "show.py"
        script.write_text(
            f"j = jobs({j.id})\n"
            "print(j.backend.host, sorted({s.backend.host for s in j.subjobs}))\n"
        )
        ganga = str(Path(sys.executable).with_name("ganga"))
        code, out, err = finished(on_host_b([ganga, "--readonly", str(script)], hosts_env))
        assert code == 0, err
        here = socket.gethostname()
        assert out.split("\n")[-2] == f"{here} ['{here}']", out
    finally:
        gate.touch()
