"""The Dask backend end to end, beyond the conformance suite (which runs it against a real
scheduler and two workers, see tests/backends.py): the LocalCluster a session starts by
default, an unreachable scheduler, and a scheduler that stops answering for a while."""

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
from ganga_like.runtime.session import Session

from .dask_cluster import DaskCluster, start_cluster
from .waiting import wait_for

SESSION_SETTINGS = {"dask_n_workers": 2, "dask_timeout": 2.0, "monitor_max_interval": 0.5}


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
    assert ok.backend.scheduler.startswith("tcp://127.0.0.1:")
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


@pytest.fixture
def own_cluster() -> Iterator[DaskCluster]:
    cluster = start_cluster(n_workers=1, nthreads=2)
    try:
        yield cluster
    finally:
        from ganga_like_dask import connection

        connection.forget(cluster.address)  # no client left reconnecting to it
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


LOCAL_SUBMITTER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from ganga_like.runtime.session import open_session
    from ganga_like.runtime.settings import Settings
    from ganga_like import Dask, Executable, Job

    open_session(Settings(gangadir=Path(sys.argv[1]), dask_n_workers=1))
    program = "echo $$ > " + sys.argv[2] + "; sleep 60"
    j = Job(application=Executable(exe="sh", args=["-c", program]), backend=Dask())
    j.submit()
    j.wait(timeout=60, until="running")
    print(j.id, j.status, flush=True)
""")


def test_jobs_left_on_the_local_cluster_of_an_ended_process_are_failed_by_the_next_one(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path
) -> None:
    pid_file = tmp_path / "pid"
    done = subprocess.run(
        [sys.executable, "-c", LOCAL_SUBMITTER, str(gangadir), str(pid_file)],
        env=env_for,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "running"]
    # Its program did not outlive the process (its worker killed it on the way out).
    wait_for(lambda: not _alive(int(pid_file.read_text())), 30, "the program to end")
    from ganga_like.runtime.session import close_session, open_session
    from ganga_like.runtime.settings import Settings

    open_session(Settings(gangadir=gangadir, dask_timeout=2.0, monitor_max_interval=0.5))
    try:
        from ganga_like import jobs

        j = jobs(0)
        assert j.wait(timeout=120) == "failed"
        assert "LocalCluster of process" in j.history[-1].cause
    finally:
        close_session()


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
    ctx = PollContext(gangadir, gangadir / "workspace", {"dask_timeout": 5.0})
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
