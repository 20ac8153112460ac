"""A pilot's batch script and what it hands its runner: the partition chosen for the
allocation, each subjob's row of the runner's batch (its workspace prepared), and the script
that starts the runner (again, should it be killed) on the allocation."""

from __future__ import annotations

import os
import shlex
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from ganga_like.errors import BackendError
from ganga_like.model.interfaces import (
    RunSpec,
    SubmitContext,
)
from ganga_like.model.job import Job
from ganga_like.model.launchers import launcher_words, resolve_launcher
from ganga_like.model.workspace import keep_earlier_output, run_environment, stage_inputs

from . import submission
from .partitions import choose_partition, rejection_reasons
from .resource_spec import ResourceError, ResourceSpec
from .sbatch_script import _directive_value
from .settings import Slurm as SlurmSection
from .slurm_commands import SlurmCommandError

if TYPE_CHECKING:
    from .pilot import Pilot

__all__ = [
    "PILOT_DIR",
    "Slurm",
    "choose",
    "launcher",
    "render",
    "resources_of",
    "runner_dir",
    "task_row",
]


class Slurm(Protocol):
    """What of the Slurm backend a pilot uses (the backend imports this module)."""

    pilot: Pilot | None
    partition: str
    account: str
    reservation: str
    qos: str
    extra_options: tuple[str, ...]
    setup: tuple[str, ...]

    def _assign(self, name: str, value: Any) -> None: ...


PILOT_DIR = "pilot"


RUNNER_MODULE = "ganga_like_runner"


# The runner looks at its queue this often (kill requests: its clients cannot signal it
# from another machine).
SCAN_SECONDS = 1.0


# How many times a pilot starts its runner: again after it was killed, twice at most.
RUNNER_STARTS = 3


def runner_dir(top: str, name: str) -> str:
    return os.path.join(top, PILOT_DIR, name)


def task_key(job: Job) -> str:
    return f"{job.fqid}@{job.submit_count}"


def launcher(pilot: Pilot, resources: ResourceSpec, name: str = "") -> tuple[str, ...]:
    """The words starting a subjob's program inside the pilot, through the job's launcher
    (``name``; empty: srun above one process). One process on a one-node pilot needs none
    (the runner starts it); srun runs a step of exactly the subjob's share (``--exact``) on
    one node, which also places a single process on a node of a larger pilot."""
    chosen = resolve_launcher(name, resources.process_count, "srun")
    if chosen == "single" and pilot.nodes > 1:
        chosen = "srun"
    words = launcher_words(chosen, resources.process_count, resources.cpu_cores_per_process)
    if chosen == "srun":
        return (words[0], "--nodes=1", "--exact", *words[1:])
    return words


def choose(
    ctx: SubmitContext, backend: Slurm, pilot: Pilot, settings: SlurmSection
) -> tuple[str, bool]:
    """The partition the pilot goes to (and whether it was chosen); BackendError (one
    line) when none can hold it."""
    wanted = pilot.allocation()
    try:
        partitions = ctx.kept(submission.ClusterAnswers).partitions.get(settings)
    except SlurmCommandError as exc:
        if backend.partition:
            return backend.partition, False  # not checked: sbatch says what is wrong
        raise BackendError(
            f"cannot read the cluster's partitions: {exc.message}", transient=exc.transient
        ) from None
    try:
        if not backend.partition:
            return choose_partition(partitions, wanted), True
    except ResourceError as exc:
        raise BackendError(f"Slurm.pilot: {exc}") from None
    named = [p for p in partitions if p.name == backend.partition]
    if named:
        reasons = rejection_reasons(named[0], wanted)
        if reasons:
            raise BackendError(
                f"Slurm.pilot: partition {backend.partition} cannot hold "
                f"{pilot.describe()}: {', '.join(reasons)}"
            )
    return backend.partition, False  # unknown: sbatch says what is wrong with it


def resources_of(job: Job) -> ResourceSpec:
    resources = job.backend.resources
    return ResourceSpec() if resources is None else resources.to_spec()


def task_row(
    protocol: ModuleType, ctx: SubmitContext, job: Job, spec: RunSpec, pilot: Pilot, events: str
) -> list[Any]:
    """The runner's row for ``job``; its workspace prepared as the Local backend does
    (the runner makes the directories)."""
    root = ctx.paths(job).location
    output = keep_earlier_output(root, job.submit_count)
    inputs = stage_inputs(root, spec.inputs)
    needs = resources_of(job)
    row: list[Any] = protocol.task_row(
        protocol.TaskSpec(
            key=task_key(job),
            argv=[*spec.wrapper, *launcher(pilot, needs, job.backend.launcher), *spec.argv],
            env=run_environment(job, spec),
            workdir=os.path.join(root, "work"),
            output_dir=output,
            inputs=inputs,
            output_patterns=list(spec.output_patterns),
            events=events,
            cores=needs.total_cores,
            memory=needs.memory or 0,
        )
    )
    return row


def render(backend: Slurm, name: str, top: str, partition: str) -> str:
    """The pilot's batch script: the allocation, then the runner on it."""
    pilot = backend.pilot
    assert pilot is not None
    directory = runner_dir(top, name)
    lines = ["#!/bin/bash", f"#SBATCH --job-name={_directive_value(name, '--job-name')}"]
    for option, value in (
        ("--partition", partition),
        ("--account", backend.account),
        ("--reservation", backend.reservation),
        ("--qos", backend.qos),
    ):
        if value:
            lines.append(f"#SBATCH {option}={_directive_value(value, option)}")
    lines.extend(pilot.sbatch_lines())
    output = os.path.join(directory, "slurm.out").replace("%", "%%")
    lines.append(f"#SBATCH --output={_directive_value(output, '--output')}")
    lines.append(f"#SBATCH --chdir={_directive_value(top, '--chdir')}")
    for option in backend.extra_options:
        lines.append("#SBATCH " + option.removeprefix("#SBATCH").strip())
    lines.extend(backend.setup)
    if pilot.cores is not None:
        lines.append(f"cores={pilot.nodes * pilot.cores}")
    elif pilot.nodes == 1:
        lines.append("cores=${SLURM_CPUS_ON_NODE:-1}  # what Slurm gave")
    else:
        # "16(x2),8": the cores of every node of the allocation, added up.
        lines += [
            "cores=0",
            "for part in ${SLURM_JOB_CPUS_PER_NODE//,/ }; do",
            "    count=${part%%(*}; times=1; [[ $part == *x* ]] && times=${part##*x} "
            "&& times=${times%)}",
            "    cores=$((cores + count * times))",
            "done",
        ]
    # SLURM_MEM_PER_NODE is in MiB; unset (memory is no consumable): no limit.
    lines.append("memory=$(( ${SLURM_MEM_PER_NODE:-0} * 1048576 * ${SLURM_JOB_NUM_NODES:-1} ))")
    words = [
        sys.executable,
        "-m",
        RUNNER_MODULE,
        directory,
        "--inherit-env",
        f"--scan-interval={SCAN_SECONDS:g}",
        "--idle-exit=0",
        "--kill-tasks-on-exit",
    ]
    runner = " ".join(shlex.quote(w) for w in words) + ' --cores="$cores" --memory="$memory"'
    # A runner killed (kill -9, the OOM killer) leaves its tasks running, orphaned, and the
    # tasks it had not started undone: a new one in the same allocation finds them in its
    # directory, kills and reports the first (failed, "the runner died while it ran") and
    # runs the others, as the Local backend revives its runner. At most RUNNER_STARTS.
    lines += [
        f"for start in $(seq {RUNNER_STARTS}); do",
        f"    {runner} && exit 0",
        "done",
        "exit 1",
    ]
    return "\n".join(lines) + "\n"
