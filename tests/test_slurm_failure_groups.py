"""Resubmitting one failure group on a real Slurm (tests marked ``slurm``): the group's
subjobs go again with the memory or walltime given or, after OUT_OF_MEMORY, with twice the
memory (when the cluster enforces memory: SLURM_TEST_MEMORY_LIMITS=1); the other subjobs
and the master keep theirs."""

from __future__ import annotations

import sys
from datetime import timedelta

import pytest

from ganga_like import ArgSplitter, Executable, Job, JobError, Resources, Slurm
from ganga_like.gpi.proxy import unwrap
from ganga_like.runtime.session import Session
from ganga_like_slurm.backend import Slurm as SlurmBackend
from ganga_like_slurm.settings import Slurm as SlurmSection

from .test_retry_slurm import FAST, memory_enforced, slurm_field
from .test_slurm_resources_used import (
    SESSION_SETTINGS,  # noqa: F401 (the session's)
    slurm,  # noqa: F401 (the fixture)
)

pytestmark = pytest.mark.slurm
SESSION_CONFIG = {SlurmSection: FAST}
MIB = 1024**2

# Holds $1 MiB, then exits with $2.
EAT = (
    "import sys\n"
    "block = bytearray(int(sys.argv[1]) * 1024 * 1024)\n"
    "for i in range(0, len(block), 4096): block[i] = 1\n"
    "sys.exit(int(sys.argv[2]))\n"
)


def eating(runs: list[tuple[int, int]], memory: str) -> Job:
    return Job(
        application=Executable(exe=sys.executable),
        splitter=ArgSplitter(args=[["-c", EAT, str(mib), str(code)] for mib, code in runs]),
        backend=Slurm(resources=Resources(memory=memory, walltime="5")),
    )


def memories(j: Job) -> list[int | None]:
    for sj in j.subjobs:
        unwrap(sj)._p_deactivate()
    return [sj.backend.resources.memory for sj in j.subjobs]


def test_the_slurm_reasons_of_timeout_and_out_of_memory_are_their_causes() -> None:
    assert SlurmBackend.failure_cause("memory limit exceeded") == "out_of_memory"
    assert SlurmBackend.failure_cause("walltime exceeded") == "timeout"
    assert SlurmBackend.failure_cause("finished with exit code 3") == "failed"


def test_a_group_resubmitted_with_a_walltime_given_runs_with_it_the_others_keep_theirs(
    slurm: Session,  # noqa: F811
) -> None:
    j = eating([(1, 3), (1, 0), (1, 3)], "200M")
    j.submit()
    assert j.wait(timeout=180) == "failed"
    group = j.stats().failures[0]
    assert (group.reason, group.cause) == ("finished with exit code 3", "failed")
    with pytest.raises(JobError, match=r"Resources\.memory"):
        j.resubmit(group=1, memory="lots")
    assert memories(j) == [200 * MIB] * 3
    assert j.resubmit(group=1, walltime="30")
    assert slurm_field(j.subjobs[0].backend.id, "TimeLimit") == "00:30:00"
    assert j.wait(timeout=180) == "failed"
    assert [sj.backend.resources.walltime for sj in j.subjobs] == [
        timedelta(minutes=30),
        timedelta(minutes=5),
        timedelta(minutes=30),
    ]
    assert j.backend.resources.walltime == timedelta(minutes=5)  # the master keeps its own


def test_an_out_of_memory_group_resubmitted_gets_twice_the_memory_and_completes(
    slurm: Session,  # noqa: F811
) -> None:
    if not memory_enforced():
        pytest.skip(
            "this Slurm does not enforce memory (start it with SLURM_TEST_MEMORY_LIMITS=1: "
            "cgroups and memory as a consumable resource)"
        )
    j = eating([(150, 0), (5, 0), (150, 0)], "100M")
    j.submit()
    assert j.wait(timeout=180) == "failed"
    assert [sj.status for sj in j.subjobs] == ["failed", "completed", "failed"]
    group = j.stats().failures[0]
    assert group.cause == "out_of_memory" and group.number == 1
    assert group.fqids == (f"{j.id}.0", f"{j.id}.2")
    assert j.resubmit(group=1)
    assert j.wait(timeout=180) == "completed"
    assert memories(j) == [200 * MIB, 100 * MIB, 200 * MIB]
    assert slurm_field(j.subjobs[0].backend.id, "MinMemoryNode") == "200M"
    assert j.backend.resources.memory == 100 * MIB
    assert any("user: resubmit with backend.resources" in e.cause for e in j.subjobs[2].history)
