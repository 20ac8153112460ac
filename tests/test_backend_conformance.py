"""What every backend must do, run through the GPI against real processes.

Each test runs once per entry of ``tests/backends.py``'s ``BACKENDS`` (Local, and Slurm
when a cluster answers): a new backend passes this suite by adding its entry there, and
needs no test of its own for these behaviours.

The programs the jobs run wait on a gate file the test creates, so a test decides when
they end and never sleeps for a fixed time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ganga_like import ArgSplitter, Executable, Job, PythonFunction, Retry, XRootDFile
from ganga_like.runtime.session import Session, close_session

from .backends import BackendCase, case_params, kill_9_submitter_at, open_case_session
from .waiting import wait_for
from .xrootd_server import put, readonly_url, remote_text, shared_url

# Longest a job of a few short subjobs may take to end on a loaded machine.
PATIENCE = 120


@pytest.fixture(params=case_params())
def case(request: pytest.FixtureRequest) -> Iterator[BackendCase]:
    chosen: BackendCase = request.param
    chosen.available()
    with chosen.exclusive():
        yield chosen


@pytest.fixture
def backend_session(case: BackendCase, gangadir: Path) -> Iterator[Session]:
    """An open session (embedded repository, monitoring on) with the case's settings."""
    session = open_case_session(case, gangadir, repository_mode="embedded")
    try:
        yield session
    finally:
        _cleanup(case, session, gangadir)


def _cleanup(case: BackendCase, session: Session | None, gangadir: Path) -> None:
    """Close the session; end whatever its jobs left running at the backend."""
    active: list[str] = []
    if session is not None:
        with contextlib.suppress(Exception):
            active = [
                str(data.get("id") or "") for (_b, _r, data) in session.registry().active.values()
            ]
    close_session()
    with contextlib.suppress(Exception):
        case.leftovers(gangadir, active)


class Gated:
    """A program that records its pid, waits for a gate file, prints ``done <arg1>`` and
    exits with ``<arg2>`` (default 0), or exits 0 at once with ``<arg2>`` = ``now``. The pid
    file appears whole (written aside, then renamed): a reader never sees it empty."""

    def __init__(self, tmp_path: Path) -> None:
        self.dir = tmp_path
        self.gate = tmp_path / "gate"
        self.exe = tmp_path / "gated.sh"
        self.exe.write_text(
            textwrap.dedent(f"""\
            #!/bin/sh
            echo $$ > "{tmp_path}/pid.$1.part" && mv "{tmp_path}/pid.$1.part" "{tmp_path}/pid.$1"
            echo "$1" >> "{tmp_path}/ran"
            code=${{2:-0}}
            if [ "$code" = now ]; then
                code=0
            else
                n=0
                while [ ! -e "{self.gate}" ] && [ $n -lt 3000 ]; do sleep 0.1; n=$((n+1)); done
            fi
            echo "done $1"
            [ -e "{tmp_path}/fixed" ] && exit 0
            exit "$code"
            """)
        )
        self.exe.chmod(0o755)

    def job(self, case: BackendCase, args: list[list[Any]]) -> Any:
        return Job(
            application=Executable(exe=str(self.exe)),
            splitter=ArgSplitter(args=args),
            backend=case.make(),
        )

    def open(self) -> None:
        self.gate.touch()

    def fix(self) -> None:
        """From now on every run exits 0."""
        (self.dir / "fixed").touch()

    def pid(self, arg: object) -> int:
        path = self.dir / f"pid.{arg}"
        wait_for(path.exists, 60, f"the program for {arg} to start")
        return int(path.read_text())

    def runs(self) -> list[str]:
        path = self.dir / "ran"
        return sorted(path.read_text().split()) if path.exists() else []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def _histories(job: Any) -> dict[int, list[tuple[str, str]]]:
    return {s.id: [(h.new, h.cause) for h in s.history] for s in job.subjobs}


def _stdout(job: Any) -> str:
    return (job.outputdir / "stdout").read_text()


@pytest.fixture
def gated(tmp_path: Path) -> Gated:
    return Gated(tmp_path)


def test_one_job_completes_with_its_stdout_in_the_output_dir(
    case: BackendCase, backend_session: Session, tmp_path: Path
) -> None:
    exe = tmp_path / "hello.sh"
    exe.write_text('#!/bin/sh\necho "hello $1"\n')
    exe.chmod(0o755)
    j = Job(application=Executable(exe=str(exe), args=["world"]), backend=case.make())
    j.submit()
    assert j.wait(timeout=PATIENCE) == "completed"
    assert _stdout(j) == "hello world\n"
    assert j.exit_code == 0
    assert j.history[-1].new == "completed"


def test_a_split_job_completes_every_subjob_and_then_its_master(
    case: BackendCase, backend_session: Session, gated: Gated
) -> None:
    gated.open()
    j = gated.job(case, [[i] for i in range(4)])
    j.submit()
    assert len(j.subjobs) == 4
    assert j.wait(timeout=PATIENCE) == "completed"
    assert [s.status for s in j.subjobs] == ["completed"] * 4
    assert [_stdout(s) for s in j.subjobs] == [f"done {i}\n" for i in range(4)]
    assert all(s.exit_code == 0 for s in j.subjobs)


def test_a_failing_program_fails_with_its_exit_code_and_a_resubmission_completes(
    case: BackendCase, backend_session: Session, gated: Gated
) -> None:
    gated.open()
    j = Job(application=Executable(exe=str(gated.exe), args=["solo", 3]), backend=case.make())
    j.submit()
    assert j.wait(timeout=PATIENCE) == "failed"
    assert j.exit_code == 3
    assert _stdout(j) == "done solo\n"
    gated.fix()
    j.resubmit()
    assert j.wait(timeout=PATIENCE) == "completed"
    assert j.exit_code == 0


def test_failed_subjobs_resubmitted_alone_or_through_their_master_complete(
    case: BackendCase, backend_session: Session, gated: Gated
) -> None:
    gated.open()
    j = gated.job(case, [[0, 0], [1, 5], [2, 4]])
    j.submit()
    assert j.wait(timeout=PATIENCE) == "failed"
    assert [s.status for s in j.subjobs] == ["completed", "failed", "failed"]
    assert [s.exit_code for s in j.subjobs] == [0, 5, 4]
    gated.fix()
    # One failed subjob resubmitted alone: it completes, the master stays failed.
    assert j.subjobs[1].resubmit()
    assert j.subjobs[1].wait(timeout=PATIENCE) == "completed"
    assert j.wait(timeout=PATIENCE) == "failed"
    assert gated.runs() == ["0", "1", "1", "2"]
    # The failed master resubmitted: only its failed subjob runs again.
    j.resubmit()
    assert j.wait(timeout=PATIENCE) == "completed"
    assert [s.status for s in j.subjobs] == ["completed"] * 3
    assert [s.exit_code for s in j.subjobs] == [0, 0, 0]
    assert gated.runs() == ["0", "1", "1", "2", "2"]


def test_killing_one_running_subjob_kills_only_that_one(
    case: BackendCase, backend_session: Session, gated: Gated
) -> None:
    j = gated.job(case, [[0], [1], [2]])
    j.submit()
    victim = j.subjobs[0]
    assert victim.wait(timeout=PATIENCE, until="running") == "running"
    pid = gated.pid(0)
    assert victim.kill()
    assert victim.status == "killed"
    wait_for(lambda: not _alive(pid), 60, "the killed subjob's process to end")
    gated.open()
    assert j.wait(timeout=PATIENCE) == "completed"  # killed and completed: completed
    assert [s.status for s in j.subjobs] == ["killed", "completed", "completed"]
    assert [_stdout(s) for s in j.subjobs[1:]] == ["done 1\n", "done 2\n"]
    assert victim.history[-1].new == "killed"


def test_killing_the_master_kills_every_subjob(
    case: BackendCase, backend_session: Session, gated: Gated
) -> None:
    j = gated.job(case, [[0], [1], [2]])
    j.submit()
    assert j.subjobs[0].wait(timeout=PATIENCE, until="running") == "running"
    pid = gated.pid(0)
    assert j.kill()
    assert j.status == "killed"
    assert [s.status for s in j.subjobs] == ["killed"] * 3
    wait_for(lambda: not _alive(pid), 60, "the running subjob's process to end")
    backend_session.monitor.run_once()  # what the backend now reports changes nothing
    assert j.status == "killed" and [s.status for s in j.subjobs] == ["killed"] * 3
    assert all(s.history[-1].cause == "user: kill" for s in j.subjobs)


def test_a_python_function_job_returns_each_value_and_a_raising_call_fails(
    case: BackendCase, backend_session: Session
) -> None:
    j = Job(
        application=PythonFunction(function="tests.pyfunctions.divide"),
        splitter=ArgSplitter(args=[[1, 2], [3, 4], [1, 0]]),
        backend=case.make(),
    )
    j.submit()
    assert j.wait(timeout=PATIENCE) == "failed"
    assert [s.status for s in j.subjobs] == ["completed", "completed", "failed"]
    assert [s.result() for s in j.subjobs[:2]] == [0.5, 0.75]
    bad = j.subjobs[2]
    assert bad.exit_code == 1
    stderr = (bad.outputdir / "stderr").read_text()
    assert "Traceback" in stderr and "ZeroDivisionError: division by zero" in stderr


SUBMITTER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tests.backends import CASES, open_case_session
    from ganga_like import ArgSplitter, Executable, Job

    case = CASES[sys.argv[1]]
    open_case_session(case, Path(sys.argv[2]))
    j = Job(application=Executable(exe=sys.argv[3]),
            splitter=ArgSplitter(args=[[0], [1], [2]]), backend=case.make())
    j.submit()
    print(j.id, j.status, flush=True)
""")


def test_jobs_submitted_by_a_process_that_exited_complete_under_the_next_one(
    case: BackendCase, gangadir: Path, env_for: dict[str, str], gated: Gated
) -> None:
    # The submitter ends (its session closed at exit) while its subjobs still wait on the
    # gate. Both processes use the default repository mode, as a script and a shell would.
    session: Session | None = None
    try:
        done = subprocess.run(
            [sys.executable, "-c", SUBMITTER, case.name, str(gangadir), str(gated.exe)],
            env=env_for,
            capture_output=True,
            text=True,
            timeout=PATIENCE,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["0", "submitted"]
        gated.pid(0)  # running at the backend, with nobody watching
        gated.open()
        session = open_case_session(case, gangadir)
        from ganga_like import jobs

        j = jobs(0)
        assert j.wait(timeout=PATIENCE) == "completed"
        assert [_stdout(s) for s in j.subjobs] == [f"done {i}\n" for i in range(3)]
        assert gated.runs() == ["0", "1", "2"]  # each ran once
    finally:
        _cleanup(case, session, gangadir)


def test_a_monitor_stopped_mid_run_and_restarted_loses_and_repeats_nothing(
    case: BackendCase, backend_session: Session, gated: Gated
) -> None:
    j = gated.job(case, [[0], [1], [2], [3, "now"]])
    j.submit()
    assert j.subjobs[0].wait(timeout=PATIENCE, until="running") == "running"
    monitor = backend_session.monitor
    monitor.stop()
    assert not monitor.running
    # While nobody watches, every subjob ends.
    gated.open()
    for i in range(4):
        gated.pid(i)
    wait_for(
        lambda: (
            len(gated.runs()) == 4
            and all(
                (gated.dir / f"pid.{i}").exists() and not _alive(gated.pid(i)) for i in range(4)
            )
        ),
        PATIENCE,
        "every program to end",
    )
    monitor.start()
    assert j.wait(timeout=PATIENCE) == "completed"
    for s in j.subjobs:
        steps = [e.new for e in s.history]
        assert steps[0] == "submitted" and steps[-1] == "completed", steps
        assert len(steps) == len(set(steps)), steps  # no transition applied twice
    assert gated.runs() == ["0", "1", "2", "3"]


# -- faults: a process killed (kill -9) at the worst moments ---------------------------------

SUBJOBS = 5


# (stop point, subjobs handed over per part (0: one part), subjobs never handed over)
SUBMITTER_KILLS = [
    ("scheduler-accepted", 0, 0),
    ("handed-over", 0, 0),
    ("handed-over#2", 2, 1),
    ("before-commit", 0, 0),
]


@pytest.mark.parametrize("case", case_params("submitter-killed"), indirect=True)
@pytest.mark.parametrize(
    "point, part, never", [pytest.param(*kill, id=kill[0]) for kill in SUBMITTER_KILLS]
)
def test_kill_9_of_the_submitter_after_the_hand_over_runs_each_subjob_exactly_once(
    case: BackendCase,
    gangadir: Path,
    env_for: dict[str, str],
    gated: Gated,
    point: str,
    part: int,
    never: int,
) -> None:
    if point.partition("#")[0] not in case.stop_points:
        pytest.skip(f"{case.name} has no {point} point")
    session: Session | None = None
    try:
        kill_9_submitter_at(case, gangadir, env_for, gated.exe, SUBJOBS, point, part)
        session = open_case_session(case, gangadir)  # recovers the interrupted submission
        from ganga_like import jobs

        j = jobs(0)
        recovered = [(s.id, s.status) for s in j.subjobs]
        if j.status == "new" or any(status == "new" for _, status in recovered):
            j.submit()  # the one user action: submit what the backend never received
        gated.open()
        assert j.wait(timeout=PATIENCE) == "completed"
        assert gated.runs() == [str(i) for i in range(SUBJOBS)]  # each ran once
        assert [_stdout(s) for s in j.subjobs] == [f"done {i}\n" for i in range(SUBJOBS)]
        # What the backend had received was recorded, not rolled back.
        assert len(recovered) == SUBJOBS
        assert sum(status == "new" for _, status in recovered) == never, recovered
    finally:
        _cleanup(case, session, gangadir)


@pytest.mark.parametrize("case", case_params("submitter-killed"), indirect=True)
@pytest.mark.parametrize("point", ["scheduler-accepted", "handed-over", "before-commit"])
def test_kill_9_of_the_resubmitter_after_the_hand_over_runs_each_subjob_once_more(
    case: BackendCase, gangadir: Path, env_for: dict[str, str], gated: Gated, point: str
) -> None:
    """As above, for a resubmission of failed subjobs: what the backend received is
    recorded and followed, never run a third time."""
    if point not in case.stop_points:
        pytest.skip(f"{case.name} has no {point} point")
    session: Session | None = None
    try:
        kill_9_submitter_at(
            case, gangadir, env_for, gated.exe, SUBJOBS, f"{point}#2", resubmit_gate=gated.gate
        )
        session = open_case_session(case, gangadir)  # recovers the interrupted resubmission
        from ganga_like import jobs

        j = jobs(0)
        recovered = [(s.id, s.status) for s in j.subjobs]
        if any(status in ("failed", "killed") for _, status in recovered):
            j.resubmit()  # what a user does with what was not received
        gated.open()
        assert j.wait(timeout=PATIENCE) == "completed", _histories(j)
        assert gated.runs() == sorted([str(i) for i in range(SUBJOBS)] * 2)  # once more each
        # What the backend had received was recorded, not failed.
        assert all(status in ("submitted", "running") for _, status in recovered), recovered
    finally:
        _cleanup(case, session, gangadir)


@pytest.mark.parametrize("case", case_params("submitter-killed"), indirect=True)
@pytest.mark.parametrize("point", ["scheduler-accepted", "handed-over"])
def test_kill_9_of_the_monitor_handing_a_retry_over_runs_it_once(
    case: BackendCase, gangadir: Path, env_for: dict[str, str], tmp_path: Path, point: str
) -> None:
    """The monitor's retry of a failed subjob, its process killed once the backend has it:
    the next session's monitor records it received instead of handing it over again."""
    if point not in case.stop_points:
        pytest.skip(f"{case.name} has no {point} point")
    ran = tmp_path / "ran"
    exe = tmp_path / "fails-first.sh"
    exe.write_text(
        f'#!/bin/sh\necho "$1" >> "{ran}"\n'
        f'[ -e "{tmp_path}/ok.$1" ] && exit 0\ntouch "{tmp_path}/ok.$1"\nexit 3\n'
    )
    exe.chmod(0o755)
    # The first hand-over is the submission's, the second a retry's.
    session: Session | None = None
    try:
        kill_9_submitter_at(case, gangadir, env_for, exe, SUBJOBS, f"{point}#2", retry=True)
        session = open_case_session(case, gangadir)  # its monitor finishes the retries
        from ganga_like import jobs

        j = jobs(0)
        assert j.wait(timeout=PATIENCE) == "completed", _histories(j)
        assert [s.status for s in j.subjobs] == ["completed"] * SUBJOBS, _histories(j)
        assert sorted(ran.read_text().split()) == sorted([str(i) for i in range(SUBJOBS)] * 2)
        for s in j.subjobs:
            attempts = [h.new for h in s.history].count("submitted")
            assert attempts == 2, [(h.new, h.cause) for h in s.history]
    finally:
        _cleanup(case, session, gangadir)


@pytest.mark.parametrize(
    "case, retried",
    case_params("executor-killed", {"no-retry": False, "retry": True}),
    indirect=["case"],
)
def test_kill_9_of_what_runs_a_subjob_ends_it_with_the_reason_and_records_every_run(
    case: BackendCase, backend_session: Session, gated: Gated, retried: bool
) -> None:
    """What executes a subjob (the Local runner, the Slurm job step, the pilot's
    allocation, the Dask worker) killed while it runs: the subjob ends saying why, and a
    run again (a Retry's, or the backend's own) is an attempt its history records: the
    program ran exactly as many times as the history shows the subjob ``submitted``."""
    j = gated.job(case, [[0], [1]])
    if retried:
        j.retry = Retry(attempts=1, on=["failed"])
    j.submit()
    victim = j.subjobs[0]
    assert victim.wait(timeout=PATIENCE, until="running") == "running"
    program = gated.pid(0)
    # Both programs have recorded their run: the kill may end subjob 1's too (it may run
    # under the same executor), and one killed before it wrote its line would have run unseen.
    wait_for(lambda: gated.runs() == ["0", "1"], PATIENCE, "both programs to record their run")
    os.kill(case.executor(program), signal.SIGKILL)

    def ended() -> bool:
        backend_session.sync()
        return any(h.new in ("failed", "killed") for h in victim.history)

    wait_for(ended, PATIENCE, "the subjob to end")
    # Ended means ended: no program of it runs on, unrecorded, beside a run again.
    wait_for(lambda: not _alive(program), 60, "the killed subjob's program to end")
    gated.open()
    final = j.wait(timeout=PATIENCE)
    histories = {s.id: [(h.new, h.cause) for h in s.history] for s in j.subjobs}
    ends = [cause for new, cause in histories[0] if new in ("failed", "killed")]
    assert ends and all(case.executor_killed in cause for cause in ends[:1]), histories[0]
    runs = gated.runs()
    for s in j.subjobs:
        attempts = [new for new, _ in histories[s.id]].count("submitted")
        assert runs.count(str(s.id)) == attempts, (s.id, runs, histories[s.id])
    if retried:
        assert final == "completed", histories
        assert runs.count("0") == 2


def test_xrootd_files_are_fetched_and_uploaded_where_each_subjob_runs(
    case: BackendCase, backend_session: Session, tmp_path: Path
) -> None:
    """An input fetched, one passed by URL, and outputs uploaded to a pattern, the
    subjobs keeping the URLs: the transfers run in the subjob's run, on any backend."""
    area = f"{shared_url()}/conformance/{tmp_path.name}-{os.getpid()}"
    put(f"{area}/in/calib.txt", "calibrated\n")
    put(f"{area}/in/stream.txt", "streamed\n")
    program = 'cat calib.txt > "hist_$1.txt"; xrdcp --nopbar "$GANGA_INPUT_URLS" - >> "hist_$1.txt"'
    j = Job(
        application=Executable(exe="/bin/sh"),
        splitter=ArgSplitter(args=[["-c", program, "sh", "a"], ["-c", program, "sh", "b"]]),
        inputfiles=[
            XRootDFile(f"{area}/in/calib.txt"),
            XRootDFile(f"{area}/in/stream.txt", stage=False),
        ],
        outputfiles=[XRootDFile(f"{area}/out/{{jid}}/{{sid}}/{{name}}", "hist_*.txt")],
        backend=case.make(),
    )
    j.submit()
    assert j.wait(timeout=PATIENCE) == "completed", _histories(j)
    for sj, arg in zip(j.subjobs, "ab", strict=True):
        url = f"{area}/out/{j.id}/{sj.id}/hist_{arg}.txt"
        assert sj.outputfiles[0].locations == [url]
        assert remote_text(url) == "calibrated\nstreamed\n"


def test_a_failed_xrootd_transfer_fails_the_subjob_naming_the_url(
    case: BackendCase, backend_session: Session, tmp_path: Path
) -> None:
    """A missing input, and an upload the server refuses: each subjob fails, its cause
    naming the URL and the server's reason."""
    missing = f"{shared_url()}/conformance/{tmp_path.name}-{os.getpid()}/absent.txt"
    refused = f"{readonly_url()}/{tmp_path.name}-{os.getpid()}/out.txt"
    fetching = Job(
        application=Executable(exe="true"),
        inputfiles=[XRootDFile(missing)],
        backend=case.make(),
    )
    uploading = Job(
        application=Executable(exe="/bin/sh", args=["-c", "echo x > out.txt"]),
        outputfiles=[XRootDFile(refused)],
        backend=case.make(),
    )
    fetching.submit()
    uploading.submit()
    assert fetching.wait(timeout=PATIENCE) == "failed"
    assert uploading.wait(timeout=PATIENCE) == "failed"
    fetch_cause, upload_cause = fetching.history[-1].cause, uploading.history[-1].cause
    assert f"input {missing} not fetched: no such file or directory" in fetch_cause
    assert f"not uploaded to {refused}: permission denied" in upload_cause
    assert uploading.outputfiles[0].locations == []
