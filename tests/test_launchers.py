"""Launchers: a (sub)job of ``process_count`` processes, started by ``single``, ``multiple``,
``mpirun``/``mpiexec`` or ``srun``, each process seeing its rank as GANGA_RANK.

Real processes throughout: the Local runner, the MPI installed by scripts/install-mpi.sh
(tests needing it skip, saying so, where there is none) and, for the tests marked
``slurm``, a real Slurm (``eval "$(bash scripts/start-slurm.sh)"``); those come last, as
they share one session.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from ganga_like import ArgSplitter, Executable, Job, JobError, Local, LocalFile, SchemaError, Slurm
from ganga_like.model.launchers import launch_problem, resolve_launcher
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_dask.settings import Dask as DaskSection
from ganga_like_local.backend import LAUNCHERS as LOCAL_LAUNCHERS

from .slurm_up import slurm_answers
from .test_slurm_backend import fast_config
from .waiting import wait_for

RANK_SCRIPT = 'echo "rank $GANGA_RANK of $GANGA_SIZE"\necho "$GANGA_RANK" > "rank$GANGA_RANK.dat"\n'
MPIRUN = shutil.which("mpirun")
needs_mpi = pytest.mark.skipif(
    MPIRUN is None, reason="no mpirun on PATH: install an MPI with scripts/install-mpi.sh"
)


def script(directory: Path, name: str, body: str) -> str:
    path = directory / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return str(path)


def ranks(j: Job) -> list[str]:
    return sorted((j.outputdir / "stdout").read_text().splitlines())


# --- the vocabulary (pure) ------------------------------------------------------------------


def test_no_launcher_named_means_the_backends_default_for_several_processes_else_single() -> None:
    assert resolve_launcher("", 1, "srun") == "single"
    assert resolve_launcher("", 2, "srun") == "srun"
    assert resolve_launcher("", 2, "multiple") == "multiple"
    assert resolve_launcher("mpirun", 1, "srun") == "mpirun"


def test_each_impossible_launch_is_said_in_one_line() -> None:
    allowed = ("single", "multiple", "mpirun")
    assert launch_problem("multiple", 4, allowed) is None
    problems = [
        launch_problem("srun", 2, allowed),
        launch_problem("multiple", 0, allowed),
        launch_problem("single", 3, allowed),
        launch_problem("mpirun", 2, allowed, find=lambda name: None),
    ]
    assert problems == [
        "unknown launcher 'srun': use 'single', 'multiple' or 'mpirun'",
        "process_count must be a positive integer, got 0",
        "the single launcher starts one process, but process_count is 3: use the multiple "
        "launcher (or leave launcher empty for the default)",
        "the mpirun launcher is not installed here: no mpirun on PATH (install an MPI)",
    ]
    # Where the program is looked for on the nodes, not here, it is not looked for.
    assert launch_problem("mpirun", 2, allowed, find=None) is None


def test_a_launcher_or_count_a_backend_cannot_use_is_refused_on_assignment() -> None:
    with pytest.raises(SchemaError, match=r"^Local\.launcher: expected one of 'single', "):
        Local(launcher="srun")  # srun needs a Slurm allocation
    with pytest.raises(SchemaError, match=r"^Local\.process_count: "):
        Local(process_count=0)
    with pytest.raises(SchemaError, match=r"^Slurm\.launcher: expected one of "):
        Slurm(launcher="aprun")
    b = Local(process_count=3, launcher="mpirun")
    with pytest.raises(SchemaError):
        b.launcher = "mpi"
    assert (b.process_count, b.launcher) == (3, "mpirun")  # nothing changed
    assert set(LOCAL_LAUNCHERS) == {"single", "multiple", "mpirun", "mpiexec"}


# --- Local ------------------------------------------------------------------------------------


def test_a_local_job_of_2_processes_runs_two_copies_each_with_its_rank(
    session: Session, tmp_path: Path
) -> None:
    exe = script(tmp_path, "rank.sh", RANK_SCRIPT)
    j = Job(
        application=Executable(exe=exe),
        backend=Local(process_count=2),
        outputfiles=[LocalFile("*.dat")],
    )
    j.submit()
    assert j.wait(timeout=60) == "completed"
    assert ranks(j) == ["rank 0 of 2", "rank 1 of 2"]
    # Output files are collected once, after every copy ended.
    assert sorted(p.name for p in j.outputdir.glob("*.dat")) == ["rank0.dat", "rank1.dat"]


def test_each_subjob_of_a_split_local_job_runs_its_own_copies(
    session: Session, tmp_path: Path
) -> None:
    exe = script(tmp_path, "rank.sh", 'echo "$1 rank $GANGA_RANK of $GANGA_SIZE"\n')
    j = Job(
        application=Executable(exe=exe),
        splitter=ArgSplitter(args=[["a"], ["b"]]),
        backend=Local(process_count=3, launcher="multiple"),
    )
    j.submit()
    assert j.wait(timeout=60) == "completed"
    for sj, arg in zip(j.subjobs, "ab", strict=True):
        assert ranks(sj) == [f"{arg} rank {r} of 3" for r in range(3)]


def test_the_exit_code_is_the_first_failing_copys_in_rank_order(
    session: Session, tmp_path: Path
) -> None:
    exe = script(tmp_path, "fail.sh", '[ "$GANGA_RANK" = 0 ] && exit 0; exit $((GANGA_RANK + 3))\n')
    j = Job(application=Executable(exe=exe), backend=Local(process_count=3))
    j.submit()
    assert j.wait(timeout=60) == "failed"
    assert j.exit_code == 4


def test_a_kill_ends_every_copy(session: Session, tmp_path: Path) -> None:
    exe = script(tmp_path, "sleepy.sh", f"echo $$ > {tmp_path}/pid.$GANGA_RANK; exec sleep 300\n")
    j = Job(application=Executable(exe=exe), backend=Local(process_count=2))
    j.submit()
    pids = [tmp_path / "pid.0", tmp_path / "pid.1"]
    wait_for(lambda: all(p.exists() and p.read_text() for p in pids), 60, "both copies")
    assert j.kill() and j.status == "killed"
    wait_for(lambda: not any(_alive(int(p.read_text())) for p in pids), 30, "both copies to end")


def _alive(pid: int) -> bool:
    # A zombie (ended, not yet reaped by its parent) counts as ended.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@needs_mpi
@pytest.mark.parametrize("launcher", ["mpirun", "mpiexec"])
def test_a_local_job_started_by_mpirun_has_one_process_per_rank(
    session: Session, tmp_path: Path, launcher: str
) -> None:
    exe = script(tmp_path, "rank.sh", RANK_SCRIPT)
    j = Job(application=Executable(exe=exe), backend=Local(process_count=2, launcher=launcher))
    j.submit()
    assert j.wait(timeout=60) == "completed"
    assert ranks(j) == ["rank 0 of 2", "rank 1 of 2"]


def test_a_single_launcher_for_several_processes_is_refused_at_submit_and_nothing_changes(
    session: Session,
) -> None:
    j = Job(
        application=Executable(exe="/bin/true"),
        splitter=ArgSplitter(args=[["1"], ["2"]]),
        backend=Local(process_count=2, launcher="single"),
    )
    with pytest.raises(JobError) as caught:
        j.submit()
    message = str(caught.value)
    assert "\n" not in message and "the single launcher starts one process" in message
    assert j.status == "new" and j.subjobs == []
    j.backend.launcher = "multiple"  # fixed, it goes
    j.submit()
    assert j.wait(timeout=60) == "completed"


def test_mpirun_missing_is_said_at_submit_and_nothing_changes(
    session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no mpirun there
    j = Job(
        application=Executable(exe="/bin/true"), backend=Local(process_count=2, launcher="mpirun")
    )
    with pytest.raises(JobError, match="the mpirun launcher is not installed here") as caught:
        j.submit()
    assert "\n" not in str(caught.value)
    assert j.status == "new"


# --- Dask -------------------------------------------------------------------------------------

SESSION_CONFIG = {DaskSection: {"n_workers": 1, "timeout": 10.0}}


def test_a_dask_job_of_2_processes_runs_two_copies_on_its_worker(
    session: Session, tmp_path: Path
) -> None:
    pytest.importorskip("distributed", reason="the Dask backend needs `pip install .[dask]`")
    from ganga_like import Dask

    exe = script(tmp_path, "rank.sh", RANK_SCRIPT)
    bad = Job(application=Executable(exe=exe), backend=Dask(process_count=2, launcher="single"))
    with pytest.raises(JobError, match="the single launcher starts one process") as caught:
        bad.submit()
    assert "\n" not in str(caught.value) and bad.status == "new"
    j = Job(
        application=Executable(exe=exe),
        backend=Dask(process_count=2),
        outputfiles=[LocalFile("*.dat")],
    )
    j.submit()
    assert j.wait(timeout=120) == "completed"
    assert ranks(j) == ["rank 0 of 2", "rank 1 of 2"]
    assert sorted(p.name for p in j.outputdir.glob("*.dat")) == ["rank0.dat", "rank1.dat"]


# --- Slurm: the script (no cluster needed) -------------------------------------------------


def test_the_slurm_script_starts_the_processes_with_the_launcher_named() -> None:
    def preview(**backend: object) -> str:
        j = Job(
            application=Executable(exe="/bin/hostname"),
            backend=Slurm(partition="debug", resources={"process_count": 3}, **backend),
        )
        return str(j.backend.preview())

    assert "exec srun --ntasks=3 -- /bin/bash -c " in preview()
    assert "' ganga-multiple 3 /bin/hostname >" in preview(launcher="multiple")
    if MPIRUN is not None:
        assert "exec mpiexec -n 3 /bin/bash -c " in preview(launcher="mpiexec")
    assert "#SBATCH --ntasks=3" in preview(launcher="multiple")


def test_a_slurm_launcher_that_cannot_start_the_processes_sends_nothing(
    session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No Slurm command may run (this test is not marked slurm): refused before sbatch.
    j = Job(
        application=Executable(exe="/bin/true"),
        backend=Slurm(partition="debug", launcher="single", resources={"process_count": 2}),
    )
    with pytest.raises(JobError, match=r"Slurm\.launcher: the single launcher") as caught:
        j.submit()
    assert "\n" not in str(caught.value) and j.status == "new"
    monkeypatch.setenv("PATH", str(tmp_path))
    j.backend.launcher = "mpirun"
    with pytest.raises(JobError, match="the mpirun launcher is not installed here"):
        j.submit()
    assert j.status == "new"


# --- a real Slurm (last: one session for all) ----------------------------------------------


@pytest.fixture(scope="module")
def slurm_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    if shutil.which("sbatch") is None:
        pytest.skip("sbatch is not on PATH: start Slurm with scripts/start-slurm.sh")
    if not slurm_answers():
        pytest.skip(
            "the Slurm controller does not answer `scontrol ping` "
            f"(SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})"
        )
    gangadir = tmp_path_factory.mktemp("slurm-launch") / "gangadir"
    session = open_session(Settings(gangadir=gangadir, monitor_max_interval=0.5), fast_config())
    try:
        yield session
    finally:
        active = [str(data.get("id")) for (_b, _r, data) in session.registry().active.values()]
        close_session()
        if active:
            subprocess.run(["scancel", *{a.split("_")[0] for a in active if a}], check=False)


@pytest.mark.slurm
@pytest.mark.parametrize(
    "launcher",
    ["", "multiple", pytest.param("mpirun", marks=needs_mpi)],
)
def test_a_slurm_job_of_2_processes_prints_two_ranks(
    slurm_session: Session, tmp_path: Path, launcher: str
) -> None:
    exe = script(tmp_path, "rank.sh", RANK_SCRIPT)
    j = Job(
        application=Executable(exe=exe),
        outputfiles=[LocalFile("*.dat")],
        backend=Slurm(partition="debug", launcher=launcher, resources={"process_count": 2}),
    )
    j.submit()
    assert j.wait(timeout=120) == "completed", (j.outputdir / "stderr").read_text()
    assert ranks(j) == ["rank 0 of 2", "rank 1 of 2"]
    assert sorted(p.name for p in j.outputdir.glob("*.dat")) == ["rank0.dat", "rank1.dat"]
