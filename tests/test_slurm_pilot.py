"""Slurm pilots: a submission's subjobs inside ONE allocation, run by the Local runner.

The attribute checks need no Slurm; the others run against a real one (marked ``slurm``,
skipped, saying why, without it) in one module-scoped session so that the slow waits
overlap: the walltime test's pilot is submitted by the first test and checked by the last.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job, JobError, LocalFile, Pilot, SchemaError, Slurm
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like.shell.display import job_html, job_text
from ganga_like_runner import protocol
from ganga_like_slurm import slurm_commands

from .conftest import findings_of
from .slurm_up import slurm_answers
from .test_slurm_backend import fast_config
from .waiting import wait_for


def script(directory: Path, name: str, body: str) -> str:
    path = directory / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return str(path)


def sbatch_calls() -> int:
    return slurm_commands.RUNNER.counts["sbatch"]


# --- the attribute (no Slurm needed) ---------------------------------------------------


def test_a_pilot_validates_each_attribute_and_names_it() -> None:
    pilot = Pilot(nodes=1, cores=None, walltime="1:00:00")
    assert pilot.walltime == timedelta(hours=1) and pilot.cores is None
    backend = Slurm(pilot={"cores": 8, "walltime": "30"})
    assert backend.pilot.cores == 8 and backend.pilot.walltime == timedelta(minutes=30)
    with pytest.raises(SchemaError, match=r"Pilot\.nodes: expected an int \(at least 1, .*got 0"):
        Pilot(nodes=0)
    with pytest.raises(SchemaError, match=r"Pilot\.walltime: expected a datetime.timedelta"):
        Pilot(walltime="soon")
    with pytest.raises(SchemaError, match=r"Pilot\.cores"):
        backend.pilot.cores = 0
    assert backend.pilot.cores == 8  # nothing changed
    with pytest.raises(SchemaError, match=r"Slurm\.pilot: expected a Pilot object"):
        backend.pilot = "big"
    with pytest.raises(SchemaError, match="did you mean 'cores'"):
        Pilot(core=4)
    assert Slurm().pilot is None


def test_a_pilot_shows_in_the_job_display(tmp_path: Path) -> None:
    open_session(Settings(gangadir=tmp_path / "gangadir"), fast_config())
    try:
        j = Job(
            application=Executable(exe="/bin/true"),
            splitter=ArgSplitter(args=[["a"], ["b"], ["c"]]),
            backend=Slurm(partition="debug", pilot=Pilot(cores=2, walltime="10")),
        )
        assert "pilot" in job_text(j) and "cores" in job_text(j)
        assert "pilot" in job_html(j) and "cores" in job_html(j)
    finally:
        close_session()


def test_the_runner_as_a_pilot_packs_tasks_by_cores_and_memory_first_in_first_out(
    tmp_path: Path,
) -> None:
    """The runner started as a pilot's batch script starts it, without Slurm: tasks take
    cores and memory from ``--cores``/``--memory``; one that can never fit fails at once;
    the tasks see the runner's environment; it leaves when the work is done."""
    runner = tmp_path / "runner"
    queue = runner / protocol.QUEUE_DIR
    queue.mkdir(parents=True)
    journal = tmp_path / "events.jsonl"
    span = "date +%s.%N; sleep 0.5; date +%s.%N; echo $PILOT_MARK"

    def task(key: str, cores: int, memory: int = 0) -> list[object]:
        spec = protocol.TaskSpec(
            key=key,
            argv=["/bin/sh", "-c", span],
            env={},
            workdir=str(tmp_path / key / "work"),
            output_dir=str(tmp_path / key / "output"),
            inputs=[],
            output_patterns=[],
            events=str(journal),
            cores=cores,
            memory=memory,
        )
        return protocol.task_row(spec)

    rows = [task(f"c{i}", 2) for i in range(4)]
    rows.append(task("huge", 8))
    rows += [task(f"m{i}", 1, 600) for i in range(2)]
    payload = {"format": protocol.FORMAT_VERSION, "id": f"{time.time_ns():020d}-1-0", "tasks": rows}
    protocol.write_atomic(queue, "a" + protocol.BATCH_SUFFIX, protocol.dumps(payload))
    env = {**os.environ, "PILOT_MARK": "inherited"}
    argv = [sys.executable, "-m", "ganga_like_runner", str(runner), "--cores=4"]
    argv += ["--memory=1000", "--inherit-env", "--scan-interval=0.2", "--idle-exit=0"]
    subprocess.run(argv, env=env, timeout=60, check=True)  # exits once all have ended
    events, _ = protocol.read_events(journal, 0)
    final = {e.key: e for e in events if e.event in protocol.TERMINAL_EVENTS}
    assert final["huge"].event == "failed"
    assert final["huge"].reason == "needs 8 cores, the runner has 4"
    assert all(final[k].event == "completed" for k in final if k != "huge")

    def spans(keys: list[str]) -> list[tuple[float, float]]:
        found = []
        for key in keys:
            start, end, mark = (tmp_path / key / "output" / "stdout").read_text().split()
            assert mark == "inherited"
            found.append((float(start), float(end)))
        return found

    cores = spans([f"c{i}" for i in range(4)])
    assert max(sum(1 for a, b in cores if a <= t < b) for t, _ in cores) == 2
    memory = spans(["m0", "m1"])
    assert memory[1][0] >= memory[0][1] - 0.05  # 600 + 600 > 1000: one after the other


# --- a real Slurm -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slurm() -> None:
    if subprocess.run(["which", "sbatch"], capture_output=True).returncode != 0:
        pytest.skip("sbatch is not on PATH: start Slurm with scripts/start-slurm.sh")
    if not slurm_answers():
        pytest.skip(
            "the Slurm controller does not answer `scontrol ping` "
            f"(SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})"
        )


@pytest.fixture(scope="module")
def pilot_session(slurm: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    gangadir = tmp_path_factory.mktemp("pilot") / "gangadir"
    session = open_session(Settings(gangadir=gangadir, monitor_max_interval=0.5), fast_config())
    try:
        yield session
    finally:
        active = {str(data.get("id")) for (_b, _r, data) in session.registry().active.values()}
        close_session()
        if active - {""}:
            slurm_commands.scancel({a.split("_")[0] for a in active if a})


@pytest.mark.slurm
def test_a_split_job_of_60_subjobs_runs_in_one_pilot_from_one_sbatch(
    pilot_session: Session, tmp_path: Path
) -> None:
    exe = script(tmp_path, "show.sh", 'echo "$1 $GANGA_FQID $(pwd)"; echo x > r$1.dat\n')
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[[i] for i in range(60)]),
        backend=Slurm(pilot=Pilot(cores=4, walltime="10")),
        outputfiles=[LocalFile("*.dat")],
    )
    before = sbatch_calls()
    j.submit()
    assert sbatch_calls() - before == 1
    pilot_id = j.backend.id
    assert pilot_id.isdigit()
    assert {s.backend.id for s in j.subjobs} == {pilot_id}
    assert j.wait(timeout=120) == "completed"
    for s in j.subjobs:
        work = pilot_session.repo.workspace / str(j.id) / str(s.id) / "work"
        assert (s.outputdir / "stdout").read_text() == f"{s.id} {j.id}.{s.id} {work}\n"
        assert (s.outputdir / f"r{s.id}.dat").exists()  # collected from work/
        assert s.exit_code == 0
    # Slurm saw one job: the pilot (its batch step, no step per subjob).
    log = pilot_session.repo.workspace / str(j.id) / "slurm" / "submissions.log"
    assert log.read_text().count(" submitted ") == 1
    assert f"submitted {pilot_id} " in log.read_text()
    wait_for(lambda: _state(pilot_id) == "COMPLETED", 60, "the pilot to end by itself")


@pytest.mark.slurm
def test_subjobs_are_packed_on_the_pilots_cores_by_what_each_needs(
    pilot_session: Session, tmp_path: Path
) -> None:
    exe = script(tmp_path, "span.sh", "date +%s.%N; sleep 1; date +%s.%N\n")
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[[]] * 6),
        backend=Slurm(pilot=Pilot(cores=4, walltime="10"), resources={"cpu_cores_per_process": 2}),
    )
    j.submit()
    assert j.wait(timeout=120) == "completed"
    spans = [tuple(map(float, (s.outputdir / "stdout").read_text().split())) for s in j.subjobs]
    most = max(sum(1 for a, b in spans if a <= t < b) for t, _ in spans)
    assert most == 2  # 4 cores, 2 per subjob: two at a time, never three
    assert min(a for a, _ in spans[2:]) >= min(b for _, b in spans[:2]) - 0.05  # FIFO


@pytest.mark.slurm
def test_a_pilots_preview_shows_its_script_and_submits_nothing(pilot_session: Session) -> None:
    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[["a"], ["b"], ["c"]]),
        backend=Slurm(pilot=Pilot(cores=2, walltime="10")),
    )
    before = sbatch_calls()
    preview = j.backend.preview()
    assert "1 sbatch call, a pilot (1 node(s), 2 cores per node" in preview
    assert "running 3 (sub)job(s)" in preview
    assert "# partition debug: the first that fits" in preview
    assert "#SBATCH --partition=debug" in preview
    assert "#SBATCH --ntasks-per-node=2" in preview
    assert "-m ganga_like_runner" in preview
    assert j.status == "new" and sbatch_calls() == before


@pytest.mark.slurm
def test_a_job_without_subjobs_runs_in_a_pilot_too(pilot_session: Session) -> None:
    j = Job(
        application=Executable(exe="/bin/echo", args=["alone"]),
        backend=Slurm(pilot=Pilot(cores=1, walltime="5")),
    )
    before = sbatch_calls()
    j.submit()
    assert sbatch_calls() - before == 1
    assert j.wait(timeout=90) == "completed"
    assert (j.outputdir / "stdout").read_text() == "alone\n"


@pytest.mark.slurm
@pytest.mark.parametrize("launcher", ["", "multiple"])
def test_a_subjob_of_2_processes_in_a_pilot_prints_two_ranks(
    pilot_session: Session, tmp_path: Path, launcher: str
) -> None:
    exe = script(tmp_path, "rank.sh", 'echo "rank $GANGA_RANK of $GANGA_SIZE"\n')
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[["a"], ["b"]]),
        backend=Slurm(
            launcher=launcher,
            resources={"process_count": 2},
            pilot=Pilot(cores=2, walltime="5"),
        ),
    )
    j.submit()
    assert j.wait(timeout=120) == "completed", (j.subjobs[0].outputdir / "stderr").read_text()
    for sj in j.subjobs:
        lines = sorted((sj.outputdir / "stdout").read_text().splitlines())
        assert lines == ["rank 0 of 2", "rank 1 of 2"]


@pytest.mark.slurm
def test_killing_one_subjob_kills_it_inside_the_pilot_and_the_master_cancels_it(
    pilot_session: Session,
) -> None:
    j = Job(
        application=Executable(exe="/bin/sleep", args=["120"]),
        splitter=ArgSplitter(args=[["120"]] * 3),
        backend=Slurm(pilot=Pilot(cores=4, walltime="10")),
    )
    j.submit()
    for s in j.subjobs:
        s.wait(timeout=60, until="running")
    pilot_id = j.backend.id
    j.subjobs[1].kill()
    record = j.subjobs[1].outputdir / protocol.RUN_FILE
    wait_for(lambda: '"killed"' in record.read_text(), 30, "the runner to kill subjob 1")
    assert [s.status for s in j.subjobs] == ["running", "killed", "running"]
    assert _state(pilot_id) == "RUNNING"  # the other two still run in it
    j.kill()
    assert [s.status for s in j.subjobs] == ["killed"] * 3
    wait_for(lambda: _state(pilot_id) == "CANCELLED", 60, "the pilot to be cancelled")


@pytest.mark.slurm
def test_bad_pilots_are_refused_in_one_line_and_leave_the_job_new(
    pilot_session: Session,
) -> None:
    too_big = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[["a"], ["b"]]),
        backend=Slurm(pilot=Pilot(cores=4096)),
    )
    with pytest.raises(JobError, match=r"Slurm\.pilot: no partition fits") as caught:
        too_big.submit()
    assert "\n" not in str(caught.value)
    assert too_big.status == "new" and len(too_big.subjobs) == 0
    named = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[["a"]]),
        backend=Slurm(partition="debug", pilot=Pilot(nodes=64)),
    )
    with pytest.raises(JobError, match=r"Slurm\.pilot: partition debug cannot hold 64 node"):
        named.submit()
    assert named.status == "new"
    greedy = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[["a"]]),
        backend=Slurm(pilot=Pilot(cores=2), resources={"cpu_cores_per_process": 3}),
    )
    before = sbatch_calls()
    with pytest.raises(JobError, match="needs 3 cores, the pilot has 2 per node"):
        greedy.submit()
    assert sbatch_calls() == before and greedy.status == "new"
    # A partition Slurm does not know: its refusal, said plainly in one line.
    unknown = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[["a"]]),
        backend=Slurm(partition="no_such_partition", pilot=Pilot(cores=1)),
    )
    with pytest.raises(JobError, match="sbatch refused it: invalid partition") as caught:
        unknown.submit()
    assert "\n" not in str(caught.value) and "accepted all the same" not in str(caught.value)
    assert unknown.status == "new"


@pytest.mark.slurm
def test_a_pilot_past_its_walltime_leaves_its_unfinished_subjobs_to_a_new_pilot(
    slurm_pilot_walltime: tuple[subprocess.Popen[str], Path] | None,
) -> None:
    # A one-core pilot of 1 minute whose first subjob outlasts it: Slurm's limits are whole
    # minutes, checked about every 30 s, so it ends after 60-90 s. That wait overlaps the
    # rest of the run: the job runs in a ganga process of its own started by the first
    # Slurm test (conftest.py), which then resubmits it to a pilot of 5 minutes.
    found = findings_of(slurm_pilot_walltime, timeout=600)
    assert found["status"] == "failed", found
    assert found["slow"][0] == "failed"
    assert "ended (walltime exceeded) while it ran" in found["slow"][1]
    assert [status for status, _ in found["quick"]] == ["killed", "killed"]
    assert "before its turn; resubmit() runs it in a new pilot" in found["quick"][0][1]
    assert found["sbatch_calls"] == 1 and found["five_minute_scripts"] == 1
    first, second, of_subjobs = found["pilots"]
    assert second != first and of_subjobs == [second]
    assert found["end"] == "completed"
    assert found["stdout"] == ["slow\n", "quick\n", "quick\n"]


def _state(slurm_id: str) -> str:
    rows = slurm_commands.squeue([slurm_id])
    row = rows.get(slurm_id)
    return row.state.split()[0] if row is not None else "?"


@pytest.mark.slurm
def test_a_pilot_without_cores_packs_on_every_core_slurm_gives(pilot_session: Session) -> None:
    """Last: an exclusive allocation waits for the node to be free of the others."""
    cpus = next(
        p.total_cpus for p in slurm_commands.scontrol_show_partitions() if p.name == "debug"
    )
    j = Job(
        application=Executable(exe="/bin/sh", args=["-c", "echo $SLURM_CPUS_ON_NODE"]),
        splitter=ArgSplitter(args=[["-c", "echo $SLURM_CPUS_ON_NODE"]] * 2),
        backend=Slurm(partition="debug", pilot=Pilot(walltime="5")),
    )
    j.submit()
    assert j.wait(timeout=150) == "completed"
    assert {(s.outputdir / "stdout").read_text() for s in j.subjobs} == {f"{cpus}\n"}
    script = next((pilot_session.repo.workspace / str(j.id) / "slurm").glob("*.sh")).read_text()
    assert "#SBATCH --exclusive" in script and "cores=${SLURM_CPUS_ON_NODE:-1}" in script
    # The runner's capacity is what Slurm gave: a subjob needing one core more never fits.
    greedy = Job(
        application=Executable(exe="/bin/true"),
        backend=Slurm(
            partition="debug",
            pilot=Pilot(walltime="5"),
            resources={"cpu_cores_per_process": cpus + 1},
        ),
    )
    greedy.submit()
    assert greedy.wait(timeout=150) == "failed"
    assert greedy.history[-1].cause.endswith(f"needs {cpus + 1} cores, the runner has {cpus}")
