"""The Dask backend end to end, beyond the conformance suite (which runs it against a real
scheduler and two workers, see tests/backends.py): an unreachable scheduler, one that stops
answering for a while, one killed, a worker killed mid-run. The gangadir's own cluster
(``Dask()`` with no address) is tests/test_dask_default_cluster.py's."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("distributed", reason="the Dask backend needs `pip install .[dask]`")

from ganga_like import ArgSplitter, Dask, Executable, GangaError, Job, LocalFile
from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.runtime.session import Session, existing_session
from ganga_like_dask.dask_clients import DaskConnections
from ganga_like_dask.settings import Dask as DaskSection

from .dask_cluster import DaskCluster, start_cluster
from .waiting import wait_for

SESSION_SETTINGS = {"monitor_max_interval": 0.5}
SESSION_CONFIG = {DaskSection: {"n_workers": 2, "timeout": 2.0}}


def test_importing_ganga_like_imports_no_dask() -> None:
    code = (
        "import sys, ganga_like\n"
        "from ganga_like import Dask\n"
        "Dask(address='tcp://127.0.0.1:1')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"


def test_with_no_address_a_local_cluster_runs_the_job_and_brings_back_its_files(
    session: Session, tmp_path: Path
) -> None:
    data = tmp_path / "numbers.txt"
    data.write_text("42\n")
    exe = tmp_path / "prog.sh"
    exe.write_text(
        textwrap.dedent("""\
        #!/bin/sh
        cat numbers.txt
        echo "err $1" >&2
        echo "$1 $GANGA_FQID" > "result.$1.dat"
        exit "$2"
        """)
    )
    exe.chmod(0o755)
    j = Job(
        application=Executable(exe=str(exe)),
        splitter=ArgSplitter(args=[["a", 0], ["b", 6]]),
        inputfiles=[LocalFile(str(data))],
        outputfiles=[LocalFile("*.dat")],
        backend=Dask(),
    )
    j.submit()
    assert j.wait(timeout=120) == "failed"
    ok, bad = j.subjobs
    assert [ok.status, bad.status] == ["completed", "failed"]
    assert [ok.exit_code, bad.exit_code] == [0, 6]
    assert (ok.outputdir / "stdout").read_text() == "42\n"
    assert (bad.outputdir / "stderr").read_text() == "err b\n"
    assert (ok.outputdir / "result.a.dat").read_text() == f"a {j.id}.0\n"
    assert (ok.inputdir / "numbers.txt").read_text() == "42\n"
    assert ok.backend.scheduler.startswith("tls://127.0.0.1:")  # the gangadir's own cluster
    assert ok.backend.key and ok.backend.key != bad.backend.key
    assert ok.time["running"] <= ok.time["completed"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_scheduler_refuses_the_submission_in_one_line_and_changes_nothing(
    session: Session,
) -> None:
    address = f"tcp://127.0.0.1:{_free_port()}"
    j = Job(
        application=Executable(exe="echo"),
        splitter=ArgSplitter(args=[["1"], ["2"]]),
        backend=Dask(address=address),
    )
    with pytest.raises(GangaError) as caught:
        j.submit()
    message = str(caught.value)
    assert f"cannot reach the Dask scheduler at {address}" in message
    assert "\n" not in message
    assert j.status == "new"
    assert len(j.subjobs) == 0


def forget_clients_of(cluster: DaskCluster) -> None:
    """No client of the open session (if any) left reconnecting to ``cluster``."""
    session = existing_session()
    if session is not None:
        session.plugin_objects.of(DaskConnections).forget(cluster.address)


@pytest.fixture
def own_cluster() -> Iterator[DaskCluster]:
    cluster = start_cluster(n_workers=1, nthreads=2)
    try:
        yield cluster
    finally:
        forget_clients_of(cluster)
        cluster.stop()


def test_a_scheduler_that_stops_answering_leaves_jobs_as_they_are_until_it_answers(
    session: Session, tmp_path: Path, own_cluster: DaskCluster
) -> None:
    gate = tmp_path / "gate"
    exe = tmp_path / "gated.sh"
    exe.write_text(f'#!/bin/sh\nwhile [ ! -e "{gate}" ]; do sleep 0.1; done\necho "done $1"\n')
    exe.chmod(0o755)
    j = Job(
        application=Executable(exe=str(exe)),
        splitter=ArgSplitter(args=[["0"], ["1"]]),
        backend=Dask(address=own_cluster.address),
    )
    j.submit()
    assert j.wait(timeout=120, until="running") == "running"
    wait_for(lambda: all(s.status == "running" for s in j.subjobs), 120, "both to run")
    monitor = session.monitor
    monitor.stop()
    os.killpg(own_cluster.scheduler.pid, signal.SIGSTOP)
    try:
        gate.touch()  # the programs end while the scheduler cannot hear of it
        for _ in range(2):
            monitor.run_once()  # each call gives up after dask_timeout
        assert [s.status for s in j.subjobs] == ["running", "running"]
    finally:
        os.killpg(own_cluster.scheduler.pid, signal.SIGCONT)
    monitor.start()
    assert j.wait(timeout=120) == "completed"
    assert [(s.outputdir / "stdout").read_text() for s in j.subjobs] == ["done 0\n", "done 1\n"]


def test_jobs_of_an_in_session_cluster_of_an_ended_process_are_failed(
    session: Session, tmp_path: Path
) -> None:
    """What an earlier version left: jobs on a LocalCluster kept inside a session, whose
    process has ended (the gangadir's own cluster, a process of its own, replaced it)."""
    from ganga_like.model.interfaces import ActiveRef, PollContext
    from ganga_like.model.status import Status
    from ganga_like_dask.backend import Dask as DaskBackend

    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        text=True,
        capture_output=True,
        check=True,
    )
    owner = int(ended.stdout)
    gangadir = session.settings.gangadir
    ctx = PollContext(
        gangadir,
        gangadir / "workspace",
        ConfigSnapshot.of({DaskSection: {"timeout": 1.0}}),
        plugin_objects=session.plugin_objects,
    )
    address = f"tcp://127.0.0.1:{_free_port()}"
    ref = ActiveRef(0, None, 1, {"id": "ganga_like-0@1-x", "address": address, "owner": owner})
    [report] = DaskBackend.poll(ctx, [ref])
    assert report.status is Status.FAILED
    assert report.reason == f"the Dask LocalCluster of process {owner} ended with it"


def test_a_recorded_outcome_is_released_at_the_scheduler_and_read_back_from_disk(
    session: Session, own_cluster: DaskCluster
) -> None:
    from distributed import Client

    from ganga_like.model.interfaces import ActiveRef, PollContext
    from ganga_like.model.status import Status
    from ganga_like_dask.backend import Dask as DaskBackend

    j = Job(
        application=Executable(exe="sh", args=["-c", "echo out; exit 3"]),
        backend=Dask(address=own_cluster.address),
    )
    j.submit()
    assert j.wait(timeout=120) == "failed"
    key = j.backend.key

    def known(dask_scheduler: object = None) -> bool:
        return key in dask_scheduler.tasks  # type: ignore[attr-defined]

    with Client(own_cluster.address, timeout=30) as client:
        # Nothing stays held once the outcome is in the output directory.
        wait_for(lambda: not client.run_on_scheduler(known), 60, "the key to be released")
    # A cycle whose commit failed follows the job again: its outcome comes from disk.
    gangadir = session.settings.gangadir
    ctx = PollContext(
        gangadir,
        gangadir / "workspace",
        ConfigSnapshot.of({DaskSection: {"timeout": 5.0}}),
        plugin_objects=session.plugin_objects,
    )
    ref = ActiveRef(j.id, None, 1, {"id": key, "address": own_cluster.address, "owner": 0})
    [report] = DaskBackend.poll(ctx, [ref])
    assert (report.status, report.exit_code) == (Status.FAILED, 3)
    assert report.reason == "exit code 3"


def test_a_submission_in_parts_retried_after_a_conflict_keeps_each_subjobs_task_key(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ganga_like.runtime.submission.split_submission import TEST_PART_VARIABLE

    from .test_conflicts import conflict_when_the_subjobs_are_recorded

    monkeypatch.setenv(TEST_PART_VARIABLE, "4")
    j = Job(
        application=Executable(exe="true"),
        splitter=ArgSplitter(args=[[str(i)] for i in range(9)]),
        backend=Dask(),
    )
    # The retry makes the subjobs again: the task key the backend gave each (per-job
    # state) must come back with it, or the monitor could not find the tasks.
    maker = conflict_when_the_subjobs_are_recorded(session, j)
    j.submit()
    maker.stop()
    assert maker.made == 1
    keys = [sj.backend.key for sj in j.subjobs]
    assert all(keys) and len(set(keys)) == 9
    assert j.wait(timeout=120) == "completed"


@pytest.fixture
def two_workers() -> Iterator[DaskCluster]:
    """A scheduler and two workers of one thread each (no nanny: a killed worker stays
    dead), so that each of two subjobs runs on its own worker."""
    cluster = start_cluster(n_workers=2, nthreads=1)
    try:
        yield cluster
    finally:
        forget_clients_of(cluster)
        cluster.stop()


def _gated(where: Path) -> tuple[Path, Path]:
    """A program that records its run, starts a child that waits for the gate (deaf to
    SIGTERM) and records both pids, then waits for the child; and the gate."""
    gate = where / "gate"
    exe = where / "gated.sh"
    exe.write_text(
        textwrap.dedent(f"""\
        #!/bin/sh
        echo "$1" >> "{where}/ran"
        ( trap '' TERM; while [ ! -e "{gate}" ]; do sleep 0.1; done ) &
        echo $! > "{where}/child.$1"
        echo $$ > "{where}/pid.$1.new" && mv "{where}/pid.$1.new" "{where}/pid.$1"
        wait
        echo "done $1"
        """)
    )
    exe.chmod(0o755)
    return exe, gate


def _pids(where: Path, arg: object) -> tuple[int, int]:
    """The program's pid and its child's, once both run."""
    wait_for((where / f"pid.{arg}").exists, 120, f"the program of subjob {arg} to start")
    return int((where / f"pid.{arg}").read_text()), int((where / f"child.{arg}").read_text())


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        text = handle.read()
    return int(text[text.rfind(b")") + 2 :].split()[1])


def _kill_the_worker_of_subjob_0(where: Path, cluster: DaskCluster) -> None:
    """Once both programs run, SIGKILL the worker running subjob 0's."""
    tree = _pids(where, 0)
    _pids(where, 1)
    worker = _parent(tree[0])
    assert worker in [w.pid for w in cluster.workers]
    os.kill(worker, signal.SIGKILL)
    # Its program and the program's child end with it: they would otherwise run on,
    # unseen, beside a second attempt.
    wait_for(lambda: not any(map(_alive, tree)), 60, "the program of the killed worker to end")


@pytest.mark.parametrize("retried", [False, True], ids=["alone", "with Retry"])
def test_a_subjob_whose_worker_is_killed_fails_with_the_reason_and_is_never_run_twice_silently(
    session: Session, tmp_path: Path, two_workers: DaskCluster, retried: bool
) -> None:
    from ganga_like import Retry

    exe, gate = _gated(tmp_path)
    j = Job(
        application=Executable(exe=str(exe)),
        splitter=ArgSplitter(args=[["0"], ["1"]]),
        backend=Dask(address=two_workers.address),
        retry=Retry(attempts=1, on=["failed"]) if retried else None,
    )
    j.submit()
    _kill_the_worker_of_subjob_0(tmp_path, two_workers)
    # Dask sends the task again, to the worker left (it runs it once subjob 1 is done).
    gate.touch()
    lost, survivor = j.subjobs
    assert survivor.wait(timeout=120) == "completed"
    if not retried:
        assert j.wait(timeout=120) == "failed"
        assert lost.status == "failed"
        causes = [entry.cause for entry in lost.history]
        assert "the Dask worker running it was lost" in causes[-1]
        assert "not run a second time" in causes[-1]
        assert sorted((tmp_path / "ran").read_text().split()) == ["0", "1"]
        return
    # Retried: a second attempt, said so in its history, after the first one's failure.
    assert j.wait(timeout=120) == "completed"
    assert sorted((tmp_path / "ran").read_text().split()) == ["0", "0", "1"]
    failed_at = next(i for i, e in enumerate(lost.history) if e.new == "failed")
    assert "the Dask worker running it was lost" in lost.history[failed_at].cause
    assert [e.new for e in lost.history[failed_at + 1 :]][-1] == "completed"
    assert "@2-" in lost.backend.key  # its second run, a task of its own
    assert (lost.outputdir / "stdout").read_text() == "done 0\n"


KILLED_SCHEDULER_WAITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from ganga_like.runtime.session import open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like import Dask, Executable, GangaError, Job

    from ganga_like import config
    config.Dask.timeout = 2.0
    open_session(Settings(gangadir=Path(sys.argv[1]), monitor_max_interval=0.5))
    j = Job(application=Executable(exe=sys.argv[3], args=["0"]),
            backend=Dask(address=sys.argv[2]))
    j.submit()
    j.wait(timeout=120, until="running")
    print("running", flush=True)
    sys.stdin.readline()  # the scheduler is killed meanwhile
    try:
        j.wait(timeout=float(sys.argv[4]))
    except GangaError:
        pass  # still running when the wait ended: the one line is the monitor's
    print(j.status, flush=True)
""")


def test_a_killed_scheduler_is_one_line_on_the_stderr_of_a_session_that_waits(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path, own_cluster: DaskCluster
) -> None:
    exe, gate = _gated(tmp_path)
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            KILLED_SCHEDULER_WAITER,
            str(gangadir),
            own_cluster.address,
            str(exe),
            "8",
        ],
        env=env_for,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "running"
        os.killpg(own_cluster.scheduler.pid, signal.SIGKILL)
        own_cluster.scheduler.wait(30)
        child.stdin.write("go\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=120)
    finally:
        gate.touch()
        if child.poll() is None:
            child.kill()
    assert out.strip() == "running", err  # still: nothing says otherwise
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"cannot reach the Dask scheduler at {own_cluster.address}" in lines[0]


def test_a_poll_between_the_cancel_and_the_record_of_a_kill_leaves_the_job_to_the_kill(
    session: Session, tmp_path: Path, own_cluster: DaskCluster
) -> None:
    from ganga_like.gpi.proxy import unwrap
    from ganga_like.model.interfaces import ActiveRef, PollContext
    from ganga_like_dask.backend import Dask as DaskBackend

    exe, gate = _gated(tmp_path)
    j = Job(
        application=Executable(exe=str(exe), args=["0"]), backend=Dask(address=own_cluster.address)
    )
    j.submit()
    try:
        assert j.wait(timeout=120, until="running") == "running"
        tree = _pids(tmp_path, 0)
        # What kill() does first (cancel, stop the program), and a monitor cycle (this
        # session's, or another's) that comes before kill() has recorded it.
        session.monitor.stop()
        impl = unwrap(j)
        assert impl.backend.kill_bulk(session.submit_context(impl.backend), [impl]) == {}
        # The program and its child, deaf to SIGTERM, which the SIGKILL after it reaches.
        wait_for(lambda: not any(map(_alive, tree)), 60, "the kill")
        gangadir = session.settings.gangadir
        ctx = PollContext(
            gangadir,
            gangadir / "workspace",
            ConfigSnapshot.of({DaskSection: {"timeout": 5.0}}),
            plugin_objects=session.plugin_objects,
        )
        ref = ActiveRef(j.id, None, 1, impl.backend.monitor_data(impl))
        assert DaskBackend.poll(ctx, [ref]) == []  # not "failed": the kill is recorded next
    finally:
        gate.touch()
    assert j.kill()
    assert j.status == "killed" and j.history[-1].cause == "user: kill"


def test_a_recovering_session_finds_at_the_scheduler_what_an_interrupted_submission_sent(
    session: Session, tmp_path: Path, own_cluster: DaskCluster
) -> None:
    from ganga_like.gpi.proxy import unwrap

    exe, gate = _gated(tmp_path)
    j = Job(
        application=Executable(exe=str(exe)),
        splitter=ArgSplitter(args=[["0"], ["1"]]),
        backend=Dask(address=own_cluster.address),
    )
    j.submit()
    try:
        master = unwrap(j)
        keys = [sj.backend.key for sj in j.subjobs]
        # What a session recovering the submission has: the subjobs made again, without
        # their keys, and (here) a third one that was never sent.
        ctx = session.submit_context(master.backend)
        assert ctx.build_subjobs is not None
        rebuilt = ctx.build_subjobs(master, [{}, {}, {}])
        for sj in rebuilt:
            sj.__dict__["submit_count"] = 1
        found = master.backend.received_bulk(ctx, rebuilt)
        assert found == {f"{j.id}.0", f"{j.id}.1"}
        assert [sj.backend.key for sj in rebuilt] == [*keys, ""]
        assert rebuilt[0].backend.scheduler == own_cluster.address
    finally:
        gate.touch()
    assert j.wait(timeout=120) == "completed"
