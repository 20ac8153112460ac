"""The backends the conformance suite (tests/test_backend_conformance.py) runs against.

Every backend must pass that suite. Adding a backend is one entry in ``BACKENDS``: how to
build its GPI object for a test, the session settings that make its waits short, the pytest
marks it needs, and a check that skips (saying why) when what it runs on is not there.

A child process (the recovery test's submitter) finds its backend here by name, through
``open_case_session``, so that it runs with the same settings as the test.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ganga_like.config.store import store
from ganga_like.runtime.session import Session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_dask.settings import Dask as DaskSection
from ganga_like_local.settings import Local as LocalSection
from ganga_like_sge.settings import SGE as SGESection
from ganga_like_slurm.settings import Slurm as SlurmSection

from .slurm_up import slurm_answers

# Short batch waits (Slurm, SGE), so that each poll rule concludes within a test's
# patience.
BATCH_WAITS: dict[str, Any] = {
    "poll_interval": 0.3,
    "vanish_seconds": 3.0,
    "vanish_cycles": 3,
    "final_grace_seconds": 30.0,
    "submit_attempts": 2,
    "submit_backoff": 0.5,
    "submit_patience": 5.0,
    "command_timeout": 30.0,
}


@dataclass(frozen=True)
class BackendCase:
    name: str
    # The GPI backend object a test's jobs use (called once per job).
    make: Callable[[], Any]
    # Settings fields for the session, and the values of its backend's section.
    settings: dict[str, Any] = field(default_factory=dict)
    config: dict[type, dict[str, Any]] = field(default_factory=dict)
    marks: tuple[pytest.MarkDecorator, ...] = ()
    # Raises pytest's skip when the backend cannot run here (called in the test).
    available: Callable[[], None] = lambda: None
    # Ends what a test left running: given the gangadir and the backend ids of the
    # subjobs still active when its session closed.
    leftovers: Callable[[Path, list[str]], None] = lambda gangadir, ids: None
    # The points of a submission where a test stops the submitting process to kill it
    # (ganga_like.model.stop_points): the core's, and the backend's own.
    stop_points: tuple[str, ...] = ("handed-over", "before-commit")
    # What executes a subjob, given its program's pid: the process a test kills to kill
    # it (by default the program's parent: the Local runner, the pilot's runner, the
    # Dask worker); and what the subjob's cause then says.
    executor: Callable[[int], int] = lambda pid: _parent(pid)
    executor_killed: str = ""
    # Held while each of the backend's tests runs: what it runs on is not shared with
    # another test run's tests.
    exclusive: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        stat = f.read()
    return int(stat[stat.rfind(b")") + 2 :].split()[1])


def _local() -> Any:
    from ganga_like import Local

    return Local()


def _slurm() -> Any:
    from ganga_like import Slurm

    return Slurm(partition="debug")


def _slurm_pilot() -> Any:
    from ganga_like import Pilot, Slurm

    return Slurm(partition="debug", pilot=Pilot(cores=4, walltime="10"))


def _dask() -> Any:
    from ganga_like import Dask

    return Dask(address=os.environ[DASK_ADDRESS])


# The address of the scheduler the Dask case runs against: set by ``_dask_available`` in the
# test process (which starts a scheduler and two workers once, for all its tests) and
# inherited by the child processes a test starts.
DASK_ADDRESS = "GANGA_LIKE_TEST_DASK_ADDRESS"


def _dask_available() -> None:
    """Skip, saying why, unless ``distributed`` is installed; start the test cluster."""
    pytest.importorskip("distributed", reason="the Dask backend needs `pip install .[dask]`")
    if not os.environ.get(DASK_ADDRESS):
        from .dask_cluster import start_shared_cluster

        os.environ[DASK_ADDRESS] = start_shared_cluster().address


def _dask_leftovers(gangadir: Path, ids: list[str]) -> None:
    from .dask_cluster import kill_keys

    kill_keys(os.environ[DASK_ADDRESS], [i for i in ids if i])


def _local_leftovers(gangadir: Path, ids: list[str]) -> None:
    from ganga_like_local.backend import runner_dir
    from ganga_like_runner import client as runner_client

    runner_client.stop(runner_dir(gangadir))  # and with it whatever it still runs


def _slurm_leftovers(gangadir: Path, ids: list[str]) -> None:
    from ganga_like_slurm import slurm_commands

    arrays = sorted({i.split("_")[0] for i in ids if i})
    if arrays:
        slurm_commands.scancel(arrays)


def _slurm_available() -> None:
    """Skip, saying why, unless a Slurm controller answers (as tests/test_slurm_backend.py)."""

    if shutil.which("sbatch") is None:
        pytest.skip("sbatch is not on PATH: start Slurm with scripts/start-slurm.sh")
    if not slurm_answers():
        pytest.skip(
            "the Slurm controller does not answer `scontrol ping` "
            f"(SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})"
        )


def _sge_leftovers(gangadir: Path, ids: list[str]) -> None:
    """qdel the arrays of ``ids``, and every job Grid Engine still holds under the name of
    a script the gangadir kept: a submitter killed before it recorded its ids (or a test
    that failed before it opened a session) leaves jobs no repository names, which would
    hold the queue's slots for the next tests."""
    from ganga_like_sge.scheduler import SCHEDULER

    names = {script.stem for script in gangadir.glob("workspace/*/sge/*.sh")}
    listed = subprocess.run(["qstat", "-xml"], capture_output=True, text=True, timeout=30)
    held = {
        job.findtext("JB_job_number") or ""
        for job in ElementTree.fromstring(listed.stdout or "<none/>").iter("job_list")
        if job.findtext("JB_name") in names
    }
    arrays = {i.split(".")[0] for i in ids if i} | (held - {""})
    SCHEDULER.cancel(sorted(arrays), timeout=30)


# Grid Engine has one cell per machine: the tests of two test runs on it at once would
# share its slots, and one run's qmaster stop (tests/test_sge_backend.py) would fail the
# other's jobs. Each Grid Engine test holds this lock while it runs; another run's tests
# wait for it.
SGE_TESTS_LOCK = Path(os.environ.get("TMPDIR", "/tmp")) / "ganga-like-sge-tests.lock"


@contextlib.contextmanager
def _sge_exclusive() -> Iterator[None]:
    with open(SGE_TESTS_LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file is closed
        yield


def _sge_available() -> None:
    """Skip, saying why, unless a Grid Engine qmaster answers (scripts/start-sge.sh)."""
    if os.environ.get("GANGA_TEST_SKIP_SGE") == "1":
        pytest.skip("GANGA_TEST_SKIP_SGE=1: the Grid Engine tests are left out of this run")
    if shutil.which("qsub") is None:
        pytest.skip("qsub is not on PATH: start Grid Engine with scripts/start-sge.sh")
    try:
        answer = subprocess.run(["qstat"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        pytest.skip("the Grid Engine qmaster does not answer qstat within 30 s")
    if answer.returncode != 0:
        pytest.skip(f"the Grid Engine qmaster does not answer qstat: {answer.stderr.strip()}")


def _sge() -> Any:
    from ganga_like import SGE

    return SGE()


BATCH_STOP_POINTS = ("scheduler-accepted", "handed-over", "before-commit")

BACKENDS: list[BackendCase] = [
    BackendCase(
        "Local",
        _local,
        config={LocalSection: {"max_concurrent": 4, "idle_exit": 5.0}},
        leftovers=_local_leftovers,
        executor_killed="the runner died while it ran",
    ),
    BackendCase(
        "Slurm",
        _slurm,
        settings={"monitor_max_interval": 0.5},
        config={SlurmSection: BATCH_WAITS},
        marks=(pytest.mark.slurm,),
        available=_slurm_available,
        leftovers=_slurm_leftovers,
        stop_points=BATCH_STOP_POINTS,
        # The batch step runs the program itself (exec): killing it kills the step.
        executor=lambda pid: pid,
        executor_killed="(signal 9)",
    ),
    BackendCase(
        "SlurmPilot",
        _slurm_pilot,
        settings={"monitor_max_interval": 0.5},
        config={
            SlurmSection: {
                "poll_interval": 0.3,
                "vanish_seconds": 3.0,
                "vanish_cycles": 3,
                "submit_attempts": 2,
                "submit_backoff": 0.5,
                "command_timeout": 30.0,
            }
        },
        marks=(pytest.mark.slurm,),
        available=_slurm_available,
        leftovers=_slurm_leftovers,
        stop_points=BATCH_STOP_POINTS,
        # The pilot's runner, in the allocation: a new one there reports what it ran.
        executor_killed="the runner died while it ran",
    ),
    BackendCase(
        "SGE",
        _sge,
        settings={"monitor_max_interval": 0.5},
        config={SGESection: BATCH_WAITS},
        marks=(pytest.mark.sge,),
        available=_sge_available,
        leftovers=_sge_leftovers,
        exclusive=_sge_exclusive,
        stop_points=BATCH_STOP_POINTS,
        # The job script runs the program itself (exec): killing it ends the job with its
        # signal, which qacct records.
        executor=lambda pid: pid,
        executor_killed="(signal 9)",
    ),
    BackendCase(
        "Dask",
        _dask,
        settings={"monitor_max_interval": 0.5},
        config={DaskSection: {"timeout": 5.0}},
        available=_dask_available,
        leftovers=_dask_leftovers,
        # The worker running the program (its nanny starts another in its place).
        executor_killed="the Dask worker running it was lost",
    ),
]

CASES = {case.name: case for case in BACKENDS}


# Known defects of a backend, each skipping exactly the fault cases it breaks (see
# tests/test_backend_conformance.py); lifting one is deleting its line in KNOWN_DEFECTS.
# (backend, fault) or (backend, "fault[variant]") -> its mark; a fault (and its variants)
# is what case_params() is given.
KNOWN_DEFECTS: dict[tuple[str, str], pytest.MarkDecorator] = {}


def case_params(fault: str = "", variants: dict[str, Any] | None = None) -> list[Any]:
    """One pytest param per backend, with its id and marks; for the cases of ``fault``,
    the marks of its known defects too. With ``variants`` (id -> value), one param
    ``(case, value)`` per backend and variant."""
    params = []
    for case in BACKENDS:
        for variant, value in (variants or {"": None}).items():
            known = KNOWN_DEFECTS.get((case.name, fault)) or KNOWN_DEFECTS.get(
                (case.name, f"{fault}[{variant}]")
            )
            marks = (*case.marks, known) if known is not None else case.marks
            if variants is None:
                params.append(pytest.param(case, id=case.name, marks=marks))
            else:
                params.append(pytest.param(case, value, id=f"{case.name}-{variant}", marks=marks))
    return params


def open_case_session(case: BackendCase, gangadir: Path, **fields: Any) -> Session:
    """Open this process's session on ``gangadir`` with the case's settings."""
    return open_session(
        Settings(gangadir=gangadir, **{**case.settings, **fields}),
        store.snapshot().replaced(case.config),
    )


INTERRUPTED_SUBMITTER = textwrap.dedent("""
    import sys
    import time
    from pathlib import Path
    from tests.backends import CASES, open_case_session
    from ganga_like import ArgSplitter, Executable, Job, Retry

    case = CASES[sys.argv[1]]
    open_case_session(case, Path(sys.argv[2]))
    mode = sys.argv[5]
    gate = Path(sys.argv[6]) if mode == "resubmit" else None
    # To be resubmitted: each subjob fails (exit code 3) until the file "fixed" exists.
    extra = [3] if gate is not None else []
    j = Job(application=Executable(exe=sys.argv[3]),
            splitter=ArgSplitter(args=[[i, *extra] for i in range(int(sys.argv[4]))]),
            backend=case.make())
    if mode == "retry":
        j.retry = Retry(attempts=1, on=["failed"])
    j.submit()
    if mode == "retry":
        time.sleep(300)  # the monitor of this process retries, and is stopped there
    if gate is not None:
        gate.touch()
        assert j.wait(timeout=300) == "failed", j.status
        (gate.parent / "fixed").touch()
        gate.unlink()  # the runs again wait for it
        j.resubmit()
    print("the submission was not stopped", flush=True)
""")


def kill_9_submitter_at(
    case: BackendCase,
    gangadir: Path,
    env: dict[str, str],
    exe: Path,
    count: int,
    point: str,
    part: int = 0,
    resubmit_gate: Path | None = None,
    retry: bool = False,
) -> None:
    """Run a process submitting job 0 of ``count`` subjobs running ``exe <i>`` (handed
    over ``part`` at a time; 0: as usual) that stops at ``point`` (see
    ganga_like.model.stop_points), and kill -9 it there. With ``resubmit_gate`` (the
    gate file of tests.test_backend_conformance.Gated), the subjobs run ``exe <i> 3``,
    all fail, and the process resubmits them once fixed (its points are then reached a
    second time: ``point`` should say ``#2``). With ``retry``, the job has a
    ``Retry(attempts=1)`` and the process waits for its monitor to retry, and stop."""
    from ganga_like.model.stop_points import STOP_VARIABLE
    from ganga_like.runtime.submission.split_submission import TEST_PART_VARIABLE

    from .waiting import wait_for

    stopped = gangadir.parent / "stopped-here"
    env = {**env, STOP_VARIABLE: f"{point}:{stopped}"}
    if part:
        env[TEST_PART_VARIABLE] = str(part)
    args = [case.name, str(gangadir), str(exe), str(count)]
    if resubmit_gate is not None:
        args += ["resubmit", str(resubmit_gate)]
    else:
        args.append("retry" if retry else "submit")
    child = subprocess.Popen(
        [sys.executable, "-c", INTERRUPTED_SUBMITTER, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: stopped.exists() or child.poll() is not None, 300, f"the stop at {point}")
        assert child.poll() is None, child.communicate()
    finally:
        child.kill()  # SIGKILL: nothing of the submitter runs any more
        child.communicate()
