"""The Grid Engine backend: its reading of qstat and qacct, its ids and scripts (pure), and
against a real Grid Engine (scripts/start-sge.sh) what the conformance suite does not
cover: a 20-task array, exit codes in the causes, the kill of a running array, and a
qmaster that is down at submit or stops while jobs run.

The conformance suite (tests/test_backend_conformance.py) runs SGE's entry of
tests/backends.py; these tests skip as it does when no qmaster answers.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.batch.planning import Batch, Member, consecutive_arrays
from ganga_like.batch.tracker import Observation
from ganga_like.errors import GangaError, JobError
from ganga_like.runtime.session import Session, close_session
from ganga_like_sge.scheduler import SCHEDULER, expand_tasks, parse_qacct, parse_qstat
from ganga_like_sge.script import format_walltime
from ganga_like_sge.states import finished, queued

from . import test_docs
from .backends import CASES, open_case_session
from .conftest import ROOT
from .waiting import wait_for

PATIENCE = 120

# -- pure: what Grid Engine's commands print, read ----------------------------------------

QSTAT = """<?xml version='1.0'?>
<job_info>
  <queue_info>
    <job_list state="running">
      <JB_job_number>12</JB_job_number><JB_name>ganga-3-a1b2c3</JB_name>
      <state>r</state><tasks>2</tasks>
    </job_list>
  </queue_info>
  <job_info>
    <job_list state="pending">
      <JB_job_number>12</JB_job_number><JB_name>ganga-3-a1b2c3</JB_name>
      <state>qw</state><tasks>3-5:1</tasks>
    </job_list>
    <job_list state="pending">
      <JB_job_number>13</JB_job_number><JB_name>ganga-4-d4e5f6</JB_name>
      <state>Eqw</state>
    </job_list>
    <job_list state="pending">
      <JB_job_number>14</JB_job_number><JB_name>ganga-5-0a0b0c</JB_name>
      <state>hqw</state>
    </job_list>
  </job_info>
</job_info>
"""


def test_qstat_rows_are_read_by_task_and_by_job() -> None:
    rows = parse_qstat(QSTAT)
    assert sorted(rows) == ["12.2", "12.3", "12.4", "12.5", "13", "14"]
    assert rows["12.2"].observation == Observation("running", "running")
    assert rows["12.5"].observation == Observation("submitted", "waiting in the queue")
    error = rows["13"].observation
    assert error is not None and error.status == "failed" and "(Eqw)" in error.reason
    held = rows["14"].observation
    assert held is not None and held.status == "submitted" and "qrls" in held.reason
    found = SCHEDULER.parse_found(QSTAT, ["ganga-4-d4e5f6", "ganga-9-999999"])
    assert found == {"ganga-4-d4e5f6": "13"}


def test_task_lists_expand_with_ranges_steps_and_commas() -> None:
    assert list(expand_tasks("1-5:2,8,10-11:1")) == [1, 3, 5, 8, 10, 11]


def _qacct_record(task: str, failed: str, exit_status: str, start: str) -> str:
    return textwrap.dedent(f"""\
        ==============================================================
        qname        all.q
        jobname      ganga-3-a1b2c3
        jobnumber    12
        taskid       {task}
        start_time   {start}
        end_time     Sat Nov 28 21:16:44 2026
        failed       {failed}
        exit_status  {exit_status}
        """)


def test_qacct_records_give_exit_codes_and_grid_engine_failure_reasons() -> None:
    text = "".join(
        [
            _qacct_record("1", "0    ", "0", "Sat Nov 28 21:16:40 2026"),
            _qacct_record("2", "0    ", "3", "Sat Nov 28 21:16:40 2026"),
            _qacct_record(
                "3", "100 : assumedly after job", "137    (Killed)", "Sat Nov 28 21:16:40 2026"
            ),
            _qacct_record("4", "37  : qmaster enforced h_rt, h_cpu, or h_vmem limit", "137", "x"),
            _qacct_record("5", "26  : opening input/output file", "0", "-/-"),
        ]
    )
    rows = parse_qacct(text)
    assert rows["12.1"].observation == Observation("completed", "finished with exit code 0", 0)
    assert rows["12.2"].observation == Observation("failed", "finished with exit code 3", 3)
    killed = rows["12.3"].observation
    assert killed is not None and killed.exit_code == 137 and "(signal 9)" in killed.reason
    walltime = rows["12.4"].observation
    assert walltime is not None and walltime.cause == "timeout" and "h_rt" in walltime.reason
    never = rows["12.5"]
    assert never.started is False and never.observation is not None
    assert never.observation.exit_code is None
    assert "could not start it: opening input/output file (failed 26)" in never.observation.reason
    assert rows["12.1"].ended_at is not None


def test_every_qstat_state_letter_has_a_meaning() -> None:
    for state in ("qw", "hqw", "r", "t", "Rr", "s", "S", "T", "dr", "Eqw", "hRwq"):
        assert queued(state) is not None, state
    assert queued("?") is None
    assert finished("0", 0, True).status == "completed"


@given(st.integers(min_value=1, max_value=10**9), st.integers(min_value=0, max_value=10**6))
def test_an_element_id_splits_back_into_its_array_and_index(array: int, index: int) -> None:
    element = SCHEDULER.element_id(str(array), index)
    assert SCHEDULER.valid_id(element)
    assert SCHEDULER.split_id(element) == (str(array), index)


@given(st.sets(st.integers(min_value=0, max_value=60), min_size=1))
def test_a_qdel_target_names_exactly_the_tasks_of_the_elements(indices: set[int]) -> None:
    words = SCHEDULER.cancel_command([SCHEDULER.elements_target("7", sorted(indices))])[1:]
    tasks = {t for word in words for t in expand_tasks(word.removeprefix("7."))}
    assert tasks == {i + 1 for i in indices}
    assert all("," not in word for word in words)  # a comma would name another job


def test_walltimes_are_written_as_h_rt_reads_them() -> None:
    assert format_walltime(timedelta(days=2, seconds=61.2)) == "48:01:02"


class _Job:
    def __init__(self, subjob: int) -> None:
        self.id, self.fqid, self.master = subjob, f"0.{subjob}", self


@given(st.lists(st.sets(st.integers(min_value=0, max_value=40), min_size=1), min_size=1))
def test_arrays_cut_into_consecutive_runs_keep_every_member_once_in_order(
    arrays: list[set[int]],
) -> None:
    names = iter(range(10**6))
    batches = [
        Batch(f"b{n}", "/top", (), "", [Member(_Job(i), i, "", None, ()) for i in sorted(indices)])  # type: ignore[arg-type]
        for n, indices in enumerate(arrays)
    ]
    cut = consecutive_arrays(batches, lambda job: f"new{next(names)}")
    assert [m.index for b in cut for m in b.members] == [i for a in arrays for i in sorted(a)]
    for batch in cut:
        indices = [m.index or 0 for m in batch.members]
        assert indices == list(range(indices[0], indices[0] + len(indices)))
    assert len({b.name for b in cut}) == len(cut)


def test_the_sge_script_asks_a_parallel_environment_for_the_processes_it_starts() -> None:
    from ganga_like import SGE

    def preview(**backend: object) -> str:
        j = Job(
            application=Executable(exe="/bin/hostname"),
            backend=SGE(process_count=3, parallel_environment="smp", **backend),
        )
        return str(j.backend.preview())

    multiple = preview(launcher="multiple")
    assert "#$ -pe smp 3" in multiple
    assert "' ganga-multiple 3 /bin/hostname >" in multiple
    if shutil.which("mpiexec") is not None:
        assert "exec mpiexec -n 3 /bin/bash -c " in preview(launcher="mpiexec")


def test_several_processes_without_a_parallel_environment_are_refused_before_qsub(
    session: Session,
) -> None:
    from ganga_like import SGE

    j = Job(application=Executable(exe="/bin/true"), backend=SGE(process_count=2))
    with pytest.raises(JobError, match=r"SGE\.parallel_environment: process_count=2 needs") as e:
        j.submit()
    assert "\n" not in str(e.value) and j.status == "new"
    j.backend.parallel_environment = "smp"
    j.backend.launcher = "single"
    with pytest.raises(JobError, match=r"SGE\.launcher: the single launcher starts one process"):
        j.submit()
    assert j.status == "new"


# -- against a real Grid Engine ---------------------------------------------------------

CASE = CASES["SGE"]
START, STOP = ROOT / "scripts" / "start-sge.sh", ROOT / "scripts" / "stop-sge.sh"


@pytest.fixture(autouse=True)
def one_test_run_at_a_time_on_grid_engine(request: pytest.FixtureRequest) -> Iterator[None]:
    """The tests marked sge hold the machine's Grid Engine (see tests/backends.py)."""
    if request.node.get_closest_marker("sge") is None:
        yield
        return
    with CASE.exclusive():
        yield


@pytest.fixture
def sge_session(gangadir: Path) -> Iterator[Session]:
    CASE.available()
    session = open_case_session(CASE, gangadir, repository_mode="embedded")
    try:
        yield session
    finally:
        active = [
            str(data.get("id") or "") for (_b, _r, data) in session.registry().active.values()
        ]
        close_session()
        CASE.leftovers(gangadir, active)


def _script(tmp_path: Path, body: str) -> str:
    exe = tmp_path / "program.sh"
    exe.write_text("#!/bin/sh\n" + body)
    exe.chmod(0o755)
    return str(exe)


def _qstat_lists(array: str) -> bool:
    out = subprocess.run(["qstat", "-xml"], capture_output=True, text=True, check=True).stdout
    return array in parse_qstat(out) or any(k.startswith(array + ".") for k in parse_qstat(out))


@pytest.mark.sge
def test_an_array_of_20_subjobs_is_one_qsub_and_completes_with_their_exit_codes(
    sge_session: Session, gangadir: Path, tmp_path: Path
) -> None:
    exe = _script(tmp_path, 'echo "task $1"\n')
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[[i] for i in range(20)]),
        backend=CASE.make(),
    )
    j.submit()
    array = j.backend.id
    assert SCHEDULER.valid_id(array) and "." not in array
    assert [s.backend.id for s in j.subjobs] == [f"{array}.{i + 1}" for i in range(20)]
    assert j.wait(timeout=PATIENCE) == "completed"
    assert [s.exit_code for s in j.subjobs] == [0] * 20
    assert [(s.outputdir / "stdout").read_text() for s in j.subjobs] == [
        f"task {i}\n" for i in range(20)
    ]
    log = gangadir / "workspace" / str(j.id) / "sge" / "submissions.log"
    submitted = [line for line in log.read_text().splitlines() if " submitted " in line]
    assert len(submitted) == 1 and f"submitted {array} " in submitted[0], submitted


@pytest.mark.sge
def test_a_failing_subjob_fails_with_its_exit_code_in_its_cause(
    sge_session: Session, tmp_path: Path
) -> None:
    exe = _script(tmp_path, 'exit "$1"\n')
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[[0], [7]]),
        backend=CASE.make(),
    )
    j.submit()
    assert j.wait(timeout=PATIENCE) == "failed"
    assert [s.status for s in j.subjobs] == ["completed", "failed"]
    assert j.subjobs[1].exit_code == 7
    assert j.subjobs[1].history[-1].cause == "SGE: failed, finished with exit code 7"


@pytest.mark.sge
def test_a_walltime_over_fails_with_grid_engine_s_reason_and_cause_timeout(
    sge_session: Session, tmp_path: Path
) -> None:
    from ganga_like import SGE

    j = Job(application=Executable(exe="/bin/sleep", args=["60"]), backend=SGE(walltime=2))
    j.submit()
    assert j.wait(timeout=PATIENCE) == "failed"
    cause = j.history[-1].cause
    assert "qmaster enforced h_rt" in cause, cause


@pytest.mark.sge
def test_killing_a_running_array_ends_every_task_at_grid_engine(
    sge_session: Session, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    exe = _script(tmp_path, f'touch "{started}.$1"\nexec sleep 300\n')
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[[i] for i in range(4)]),
        backend=CASE.make(),
    )
    j.submit()
    wait_for(lambda: Path(f"{started}.0").exists(), PATIENCE, "the first task to start")
    assert j.kill()
    assert [s.status for s in j.subjobs] == ["killed"] * 4, [
        [(h.new, h.cause) for h in s.history] for s in j.subjobs
    ]
    wait_for(lambda: not _qstat_lists(j.backend.id), 60, "qstat to forget the array")


def _names() -> set[str]:
    """The names of the jobs Grid Engine holds, ended lately ones too."""
    out = subprocess.run(
        ["qstat", "-xml", "-s", "prsz"], capture_output=True, text=True, check=True
    ).stdout
    return {name for name in re.findall(r"<JB_name>(.*?)</JB_name>", out)}


def _start_again() -> None:
    # After a qmaster restart, execd reports in within its load report interval (40 s),
    # longer on a busy machine.
    restart = subprocess.run(
        ["bash", str(START)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SGE_TEST_TIMEOUT": "240"},
    )
    assert restart.returncode == 0, restart.stderr


def _stop_qmaster() -> None:
    if os.geteuid() != 0:
        pytest.skip("stopping and starting Grid Engine needs root")
    stop = subprocess.run(
        ["bash", str(STOP), "--qmaster-only"], capture_output=True, text=True, timeout=120
    )
    assert stop.returncode == 0, stop.stderr


@pytest.mark.sge
def test_a_qmaster_down_at_submit_is_one_line_and_nothing_is_submitted(
    sge_session: Session, tmp_path: Path
) -> None:
    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[[i] for i in range(3)]),
        backend=CASE.make(),
    )
    before = _names()
    _stop_qmaster()
    try:
        with pytest.raises(GangaError) as raised:
            j.submit()
    finally:
        _start_again()
    message = str(raised.value)
    assert "\n" not in message and "qmaster" in message, message
    assert j.status == "new" and all(s.status == "new" for s in j.subjobs)
    assert not any(s.backend.id for s in j.subjobs)
    assert _names() <= before  # nothing reached Grid Engine


@pytest.mark.sge
def test_a_qmaster_stopped_mid_monitoring_is_transient_and_the_jobs_complete_after_it_is_back(
    sge_session: Session, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    exe = _script(tmp_path, f'while [ ! -e "{gate}" ]; do sleep 0.2; done\necho "done $1"\n')
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[[i] for i in range(2)]),
        backend=CASE.make(),
    )
    j.submit()
    assert j.wait(timeout=PATIENCE, until="running") == "running"
    wait_for(lambda: all(s.status == "running" for s in j.subjobs), PATIENCE, "both to run")
    monitor = sge_session.monitor
    _stop_qmaster()
    try:
        wait_for(lambda: "SGE" in monitor.stale_backends, 60, "the backend to be stale", 0.3)
        assert "qmaster" in monitor.stale_backends["SGE"], monitor.stale_backends
        gate.touch()  # the tasks end while nobody can see them
        assert all(s.status == "running" for s in j.subjobs)
    finally:
        _start_again()
    assert j.wait(timeout=PATIENCE) == "completed"
    wait_for(lambda: "SGE" not in monitor.stale_backends, 30, "the backend to recover", 0.3)
    assert [(s.outputdir / "stdout").read_text() for s in j.subjobs] == ["done 0\n", "done 1\n"]
    assert not any(e.new == "failed" for s in j.subjobs for e in s.history)


@pytest.mark.sge
def test_the_examples_of_the_sge_page_run(sge_session: Session) -> None:
    test_docs.test_every_example_of_the_page_runs("backends/sge.md", sge_session)


def test_a_retry_grows_memory_and_walltime_and_leaves_the_queue_s_defaults() -> None:
    from ganga_like_sge.backend import SGE

    backend = SGE(memory="1G", walltime=60)
    assert backend.grow({"memory": 1.5, "walltime": 2.0}) == [
        "memory 1024M -> 1536M",
        "walltime 0:01:00 -> 0:02:00",
    ]
    assert (backend.memory, backend.walltime) == (1536 * 1024**2, timedelta(minutes=2))
    assert SGE().grow({"memory": 2.0, "walltime": 2.0}) == []  # the queue's: not grown


@pytest.mark.sge
def test_a_subjob_over_its_walltime_is_retried_with_a_grown_walltime_and_completes(
    sge_session: Session, tmp_path: Path
) -> None:
    from ganga_like import SGE, Retry

    j = Job(
        application=Executable(exe="/bin/sleep", args=["5"]),
        backend=SGE(walltime=2),
        retry=Retry(attempts=1, on=["timeout"], grow={"walltime": 60.0}),
    )
    j.submit()
    assert j.wait(timeout=PATIENCE) == "completed", [h.cause for h in j.history][3:]
    causes = [h.cause for h in j.history]
    assert any("qmaster enforced h_rt" in c for c in causes), causes
    assert any("grown: walltime 0:00:02 -> 0:02:00" in c for c in causes), causes


@pytest.mark.sge
def test_a_task_this_process_deleted_is_left_to_the_kill_that_records_it(
    sge_session: Session, tmp_path: Path
) -> None:
    """A monitor cycle between kill()'s qdel and its record must record nothing: not the
    kill in Grid Engine's words, not a failure (qacct records a deleted running task as any
    task a signal ended). The kill records it, as the user's."""
    started = tmp_path / "started"
    exe = _script(tmp_path, f'touch "{started}.$1"\nexec sleep 300\n')
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[[0], [1]]),
        backend=CASE.make(),
    )
    j.submit()
    victim = j.subjobs[0]
    assert victim.wait(timeout=PATIENCE, until="running") == "running"
    monitor = sge_session.monitor
    monitor.stop()
    element = victim.backend.id
    SCHEDULER.cancel([element], timeout=30)  # what kill() sends, before it records
    wait_for(
        lambda: element in SCHEDULER.history([element], timeout=30),
        60,
        "qacct to record the deleted task",
        0.3,
    )
    monitor.run_once()  # the cycle in between
    assert victim.status == "running", [(h.new, h.cause) for h in victim.history]
    assert victim.kill()
    assert (victim.history[-1].new, victim.history[-1].cause) == ("killed", "user: kill")


@pytest.mark.sge
def test_recovery_finds_a_submission_whose_job_has_ended_already(sge_session: Session) -> None:
    """A script whose outcome nobody saw is looked up by name; its job may have ended,
    and qacct is written only every flush_time: qstat's zombies cover that gap."""
    name = f"ganga-recovery-{os.getpid()}"
    script = f"#!/bin/sh\n#$ -N {name}\n#$ -o /dev/null\n#$ -j y\ntrue\n"
    job_id = SCHEDULER.submit(script, timeout=30)
    wait_for(lambda: not _qstat_lists(job_id), 60, "the job to end", 0.3)
    assert SCHEDULER.find_submitted([name, "ganga-never-sent"], timeout=30) == {name: job_id}


@pytest.mark.sge
def test_a_job_script_runs_in_a_plain_shell_that_reads_no_login_profile(tmp_path: Path) -> None:
    """Grid Engine runs a script as a login shell when its shell is in login_shells: the
    user's profile then runs before every task, and a slow one (or one waiting on a lock
    that a task deleted in the middle left behind) delays each start. The cell of
    scripts/start-sge.sh runs job scripts in a plain shell."""
    CASE.available()
    said = tmp_path / "said"
    script = (
        "#!/bin/bash\n#$ -S /bin/bash\n#$ -o /dev/null\n#$ -j y\n"
        "shopt -q login_shell && shell=login || shell=plain\n"
        f'echo "$shell" > "{said}.part" && mv "{said}.part" "{said}"\n'
    )
    SCHEDULER.submit(script, timeout=30)
    wait_for(said.exists, PATIENCE, "the job to say which shell ran it")
    assert said.read_text() == "plain\n"


@pytest.mark.sge
def test_the_processes_of_a_job_run_on_the_slots_of_its_parallel_environment(
    sge_session: Session, tmp_path: Path
) -> None:
    from ganga_like import SGE

    exe = _script(tmp_path, 'echo "rank $GANGA_RANK of $GANGA_SIZE on $NSLOTS slots"\n')
    j = Job(
        application=Executable(exe=exe),
        backend=SGE(process_count=2, launcher="multiple", parallel_environment="smp"),
    )
    j.submit()
    assert j.wait(timeout=PATIENCE) == "completed", [h.cause for h in j.history]
    lines = sorted((j.outputdir / "stdout").read_text().splitlines())
    assert lines == ["rank 0 of 2 on 2 slots", "rank 1 of 2 on 2 slots"]
