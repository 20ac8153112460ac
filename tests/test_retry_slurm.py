"""Retries and resubmission with a changed backend on a real Slurm (tests marked ``slurm``):
a subjob over its walltime comes back with twice the walltime, a job over its memory with
twice the memory (when the cluster enforces memory: SLURM_TEST_MEMORY_LIMITS=1)."""

from __future__ import annotations

import os
import subprocess
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from ganga_like import (
    ArgSplitter,
    Executable,
    Job,
    JobError,
    Local,
    Resources,
    Retry,
    Slurm,
)
from ganga_like.config.store import store
from ganga_like.gpi.proxy import unwrap
from ganga_like.runtime.session import Session, close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_slurm import slurm_commands
from ganga_like_slurm.settings import Slurm as SlurmSection

from .conftest import findings_of
from .slurm_up import slurm_answers

pytestmark = pytest.mark.slurm

FAST: dict[str, Any] = {
    "poll_interval": 0.3,
    "final_grace_seconds": 30.0,
    "submit_attempts": 2,
    "submit_backoff": 0.5,
    "command_timeout": 30.0,
}


@pytest.fixture(scope="module")
def slurm_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    if subprocess.run(["which", "sbatch"], capture_output=True).returncode != 0:
        pytest.skip("sbatch is not on PATH: start Slurm with scripts/start-slurm.sh")
    if not slurm_answers():
        pytest.skip(
            "the Slurm controller does not answer `scontrol ping` "
            f"(SLURM_CONF={os.environ.get('SLURM_CONF', 'unset')})"
        )
    gangadir = tmp_path_factory.mktemp("slurm-retry") / "gangadir"
    session = open_session(
        Settings(gangadir=gangadir, monitor_max_interval=0.5),
        store.snapshot().replaced({SlurmSection: FAST}),
    )
    try:
        yield session
    finally:
        active = [str(data.get("id")) for (_b, _r, data) in session.registry().active.values()]
        close_session()
        if active:
            slurm_commands.scancel({a.split("_")[0] for a in active if a})


def program(directory: Path, body: str) -> str:
    path = directory / "prog.sh"
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return str(path)


def fails_first(directory: Path) -> str:
    """Fails its first run (per argument), succeeds after."""
    return program(
        directory,
        f"""\
        runs="{directory}/runs-$1"
        echo run >> "$runs"
        [ "$(wc -l < "$runs")" -ge 2 ] || exit 3
        """,
    )


def causes(j: Job) -> list[str]:
    return [entry.cause for entry in j.history]


def slurm_field(scheduler_id: str, field: str) -> str:
    """A field of ``scontrol show job`` (the controller's answer: accounting may lag)."""
    out = subprocess.run(
        ["scontrol", "show", "job", scheduler_id], capture_output=True, text=True, check=True
    )
    for word in out.stdout.split():
        name, _, value = word.partition("=")
        if name == field:
            return value
    raise AssertionError(f"scontrol shows no {field} for {scheduler_id}")


def memory_enforced() -> bool:
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True).stdout
    return "task/cgroup" in config and "MEMORY" in config.upper().split("SELECTTYPEPARAMETERS")[1]


def test_a_subjob_over_its_walltime_comes_back_with_twice_the_walltime_and_completes(
    slurm_timeout_retry: tuple[subprocess.Popen[str], Path] | None,
) -> None:
    # Slurm's limits are whole minutes, checked about every 30 s: a 1-minute walltime
    # ends a 95-second run after 60-90 s. That wait overlaps the rest of the run: the job
    # runs in a ganga process of its own started by the first Slurm test (conftest.py).
    found = findings_of(slurm_timeout_retry, timeout=420)
    assert found["status"] == "completed", found
    assert (
        "monitor: retry 1 of 1 after timeout; grown: resources.walltime 0:01:00 -> 0:02:00"
        in found["slow"]
    )
    assert any(c.startswith("Slurm: failed, walltime exceeded") for c in found["slow"])
    assert found["walltimes"] == ["0:02:00", "0:01:00"]  # the quick one was not retried
    assert found["time_limit"] == ["00:02:00"]
    assert not [c for c in found["quick"] if c.startswith("monitor: retry")]
    assert "failed" not in found["master"]  # the master never was


def test_a_job_over_its_memory_comes_back_with_twice_the_memory_and_completes(
    slurm_session: Session, tmp_path: Path
) -> None:
    if not memory_enforced():
        pytest.skip(
            "this Slurm does not enforce memory (start it with SLURM_TEST_MEMORY_LIMITS=1: "
            "cgroups and memory as a consumable resource)"
        )
    eat = tmp_path / "eat.py"
    eat.write_text(
        "x = bytearray(150 * 1024 * 1024)\nfor i in range(0, len(x), 4096):\n    x[i] = 1\n"
    )
    j = Job(
        application=Executable(exe="python3", args=[str(eat)]),
        backend=Slurm(resources=Resources(memory="100M")),
        retry=Retry(attempts=2, on=["out_of_memory"], grow={"memory": 2.0}),
    )
    j.submit()
    assert j.wait(timeout=240) == "completed"
    assert [c for c in causes(j) if c.startswith("monitor: retry 1")] == [
        "monitor: retry 1 of 2 after out_of_memory; grown: resources.memory 100M -> 200M"
    ]
    assert any(c.startswith("Slurm: failed") and "memory limit exceeded" in c for c in causes(j))
    assert j.backend.resources.memory == 200 * 1024 * 1024
    assert slurm_field(j.backend.id, "MinMemoryNode") == "200M"


def test_resubmit_with_more_walltime_records_the_backend_on_each_resubmitted_subjob(
    slurm_session: Session, tmp_path: Path
) -> None:
    j = Job(
        application=Executable(exe=fails_first(tmp_path)),
        splitter=ArgSplitter(args=[["a"], ["b"]]),
        backend=Slurm(resources=Resources(walltime="5")),
    )
    j.submit()
    assert j.wait(timeout=120) == "failed"
    history = causes(j.subjobs[0])
    # Another type, or an attribute not changeable at resubmission: refused, nothing changes.
    with pytest.raises(JobError, match=r"needs a Slurm backend \(the job's\), not Local"):
        j.resubmit(backend=Local())
    with pytest.raises(JobError, match=r"cannot change backend\.bulk; only partition, "):
        j.resubmit(backend=Slurm(resources=Resources(walltime="10"), bulk=False))
    assert causes(j.subjobs[0]) == history and j.status == "failed"
    assert j.subjobs[0].backend.resources.walltime == timedelta(minutes=5)

    assert j.resubmit(backend=Slurm(resources=Resources(walltime="10", memory="300M")))
    assert j.wait(timeout=120) == "completed"
    for sj in j.subjobs:
        unwrap(sj)._p_deactivate()  # read back from the repository
        assert sj.backend.resources.walltime == timedelta(minutes=10)
        assert sj.backend.resources.memory == 300 * 1024 * 1024
        assert slurm_field(sj.backend.id, "TimeLimit") == "00:10:00"
    assert any(
        c.startswith("user: resubmit with backend.resources Resources(walltime=")
        for c in causes(j.subjobs[1])
    )


def test_resubmit_of_one_subjob_with_a_new_backend_changes_only_that_subjob(
    slurm_session: Session, tmp_path: Path
) -> None:
    j = Job(
        application=Executable(exe=fails_first(tmp_path)),
        splitter=ArgSplitter(args=[["a"], ["b"]]),
        backend=Slurm(resources=Resources(walltime="5")),
    )
    j.submit()
    assert j.wait(timeout=120) == "failed"
    first = j.subjobs[0]
    changed = first.backend.copy()  # the subjob's own options, to change
    changed.resources.walltime = "7"
    assert first.resubmit(backend=changed)
    assert first.wait(timeout=120) == "completed"
    assert first.backend.resources.walltime == timedelta(minutes=7)
    assert j.subjobs[1].backend.resources.walltime == timedelta(minutes=5)
    assert j.subjobs[1].status == "failed"


def teardown_module() -> None:
    close_session()
