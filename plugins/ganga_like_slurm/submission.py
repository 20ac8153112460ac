"""From (job, RunSpec) pairs to sbatch calls: Slurm's side of the batch base.

:func:`plan` decides what is submitted how, without side effects (it may ask Slurm for
its partitions and its ``MaxArraySize``), through :func:`ganga_like.batch.planning.
plan_batches`: subjobs whose Slurm options are the same become ONE job array whose task
ids are their subjob ids, past ``MaxArraySize`` one array per that many subjobs; a job
without subjobs, and every subjob when ``bulk=False``, is a plain job. :func:`render_batch`
writes the script. Retries, the workspace and the submission log are the base's.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ganga_like.batch import planning
from ganga_like.batch.command_retry import retry as _retry
from ganga_like.batch.command_retry import submit_with_retry
from ganga_like.batch.planning import PlacementError, batch_name, plan_batches, render_pinned
from ganga_like.batch.records import SUBMISSION_LOG, log_submission, unconfirmed_submissions
from ganga_like.batch.records import prepare_workspace as _prepare_workspace
from ganga_like.batch.script import (
    COLLECT_FUNCTION,
    MISSING_OUTPUT_FILE,
    element_command,
    needs_collect,
)
from ganga_like.model.interfaces import RunSpec, SubmitContext
from ganga_like.model.job import Job
from ganga_like.model.launchers import (
    LAUNCHERS,
    launch_problem,
    launcher_words,
    resolve_launcher,
)

from . import slurm_commands
from .partitions import PartitionInfo, choose_partition
from .resource_spec import ResourceError, ResourceSpec
from .sbatch_script import BatchScriptSpec, ElementCommand, ScriptError, render_script
from .settings import Slurm as SlurmSection
from .slurm_commands import find_jobs_by_name

T = TypeVar("T")

__all__ = [
    "COLLECT_FUNCTION",
    "LOG_DIR",
    "MISSING_OUTPUT_FILE",
    "SUBMISSION_LOG",
    "Batch",
    "ClusterAnswers",
    "ClusterQuery",
    "Member",
    "Options",
    "element_links_dir",
    "find_jobs_by_name",
    "link_elements",
    "log_submission",
    "plan",
    "prepare_workspace",
    "render_batch",
    "retry",
    "sbatch_with_retry",
    "slurm_log_dir",
    "unconfirmed_submissions",
]


@dataclass(frozen=True)
class Options:
    """The job-level part of a batch script: what must be equal to share one array."""

    partition: str
    account: str
    reservation: str
    qos: str
    extra_options: tuple[str, ...]
    setup: tuple[str, ...]
    resources: ResourceSpec
    array_throttle: int | None
    bulk: bool

    @classmethod
    def of(cls, backend: Any) -> Options:
        resources = backend.resources
        return cls(
            partition=backend.partition,
            account=backend.account,
            reservation=backend.reservation,
            qos=backend.qos,
            extra_options=tuple(backend.extra_options),
            setup=tuple(backend.setup),
            resources=ResourceSpec() if resources is None else resources.to_spec(),
            array_throttle=backend.array_throttle,
            bulk=backend.bulk,
        )


Member = planning.Member[ElementCommand]
Batch = planning.Batch[Options, ElementCommand]

# The directory of a top-level job's workspace keeping its scripts and submission log.
LOG_DIR = "slurm"


def slurm_log_dir(top: str) -> str:
    """Where the batch scripts of a job and the submission log are kept."""
    return os.path.join(top, LOG_DIR)


# Replaced in tests so that retries do not really wait.
sleep: Callable[[float], None] = time.sleep


def retry(action: Callable[[], Any], settings: SlurmSection) -> Any:
    """:func:`ganga_like.batch.command_retry.retry` for Slurm's read-only commands."""
    return _retry(action, settings, lambda delay: sleep(delay))


def sbatch_with_retry(text: str, name: str, settings: SlurmSection) -> str:
    """Submit ``text`` and return the job id, retrying like :func:`retry`; after an
    ambiguous failure the job is looked up by its unique name before any new sbatch."""
    timeout = settings.command_timeout
    return submit_with_retry(
        lambda: slurm_commands.sbatch(text, timeout=timeout),
        lambda names: find_jobs_by_name(names, timeout=timeout),
        name,
        settings,
        never_sent=slurm_commands.NEVER_SENT,
        lookup_hint=f"squeue --me --name={name}",
        sleep=lambda delay: sleep(delay),
    )


class ClusterQuery(Generic[T]):
    """One of the cluster's answers that change rarely (its partitions, its limits), asked
    for at most once per ``partition_cache_seconds``: a loop of submissions asks once."""

    def __init__(self, ask: Callable[[float], T]) -> None:
        self._ask = ask  # called with the command timeout
        self._value: T | None = None
        self._when = 0.0

    def get(self, settings: SlurmSection) -> T:
        now = time.monotonic()
        if self._value is None or now - self._when > settings.partition_cache_seconds:
            self._value = retry(lambda: self._ask(settings.command_timeout), settings)
            self._when = now
        return self._value

    def clear(self) -> None:
        self._value = None


class ClusterAnswers:
    """The cluster's partitions and its MaxArraySize, asked at most once per
    ``partition_cache_seconds`` while the session lasts (``ctx.kept(ClusterAnswers)``)."""

    def __init__(self) -> None:
        self.partitions: ClusterQuery[list[PartitionInfo]] = ClusterQuery(
            lambda timeout: slurm_commands.scontrol_show_partitions(timeout=timeout)
        )
        self.array_limit: ClusterQuery[int] = ClusterQuery(
            lambda timeout: slurm_commands.scontrol_max_array_size(timeout=timeout)
        )


# -- planning -------------------------------------------------------------------------

# A new name for an sbatch (the pilot's too).
_new_name = batch_name


def _launcher(job: Job, process_count: int) -> str:
    """The launcher that starts ``job``'s processes: srun when there are several and the
    backend names none."""
    return resolve_launcher(job.backend.launcher, process_count, "srun")


def _launch_problems(pairs: Sequence[tuple[Job, RunSpec]]) -> dict[str, str]:
    """fqid -> why its launcher cannot start its processes, for the jobs that have one
    (each launcher, count and setup checked once)."""
    checked: dict[tuple[str, int, bool], str | None] = {}
    problems: dict[str, str] = {}
    for job, _spec in pairs:
        backend = job.backend
        resources = backend.resources
        count = 1 if resources is None else resources.process_count
        key = (_launcher(job, count), count, bool(backend.setup))
        if key not in checked:
            # An MPI the setup lines bring in (`module load mpich`) is not on PATH here.
            find = None if key[2] else shutil.which
            checked[key] = launch_problem(key[0], count, tuple(LAUNCHERS), find=find)
        problem = checked[key]
        if problem is not None:
            problems[job.fqid] = f"Slurm.launcher: {problem}"
    return problems


def _element(job: Job, spec: RunSpec, root: str, options: Options) -> ElementCommand:
    resources = options.resources
    count = resources.process_count
    words = launcher_words(_launcher(job, count), count, resources.cpu_cores_per_process)
    return element_command(job, spec, root, words)


def plan(
    ctx: SubmitContext,
    pairs: Sequence[tuple[Job, RunSpec]],
    settings: SlurmSection,
    partitions: Callable[[], list[PartitionInfo]],
    array_limit: Callable[[], int],
) -> tuple[list[Batch], dict[str, str]]:
    """The batches to submit, in subjob order, and fqid -> error for jobs that cannot be.

    ``partitions`` is called (once) only when some job leaves its partition unset, and
    ``array_limit`` (the cluster's MaxArraySize) only when there is an array to make.
    Raises :class:`~.commands.SlurmCommandError` when either cannot be read.
    """
    chosen: dict[ResourceSpec, str | ResourceError] = {}
    # A launcher that cannot start the processes fails its job before anything is sent.
    refused = _launch_problems(pairs)
    if refused:
        pairs = [pair for pair in pairs if pair[0].fqid not in refused]

    def options_of(job: Job) -> tuple[Options, str, bool]:
        options = Options.of(job.backend)
        return options, options.partition, options.bulk

    def place(options: Options) -> str:
        choice = chosen.get(options.resources)
        if choice is None:
            try:
                choice = choose_partition(partitions(), options.resources)
            except ResourceError as exc:
                choice = exc
            chosen[options.resources] = choice
        if isinstance(choice, ResourceError):
            raise PlacementError(f"Slurm.resources: {choice}")
        return choice

    batches, failed = plan_batches(
        ctx,
        pairs,
        options_of=options_of,
        place=place,
        command=_element,
        array_size=lambda: _array_size(array_limit(), settings),
        new_name=batch_name,
    )
    return batches, {**refused, **failed}


def _array_size(cluster_limit: int, settings: SlurmSection) -> int:
    """Subjobs per array: the cluster's MaxArraySize, or the setting if it is smaller."""
    wanted = settings.max_array_size
    return max(1, min(cluster_limit, wanted) if wanted > 0 else cluster_limit)


def element_links_dir(batch: Batch) -> str:
    """Where an array whose task ids are not subjob ids links task id -> subjob dir."""
    return os.path.join(slurm_log_dir(batch.top), batch.name)


def link_elements(batch: Batch, members: Sequence[Member]) -> None:
    """Make the task id -> subjob directory links of an array past MaxArraySize, so that
    Slurm's own messages (``%a`` in ``--output``) still land in each subjob's output."""
    if not batch.is_array or batch.first_id == 0:
        return
    links = element_links_dir(batch)
    os.makedirs(links, exist_ok=True)
    for member in members:  # batch names are unique: no link exists yet
        os.symlink(member.root, os.path.join(links, str(member.index)))


def _escape_pattern(path: str) -> str:
    # sbatch expands %A, %a, %j... in --output; a literal % is written %%.
    return path.replace("%", "%%")


def batch_spec(batch: Batch, members: Sequence[Member] | None = None) -> BatchScriptSpec:
    """The script spec of ``batch`` restricted to ``members`` (default: all)."""
    members = batch.members if members is None else members
    options = batch.options
    if batch.is_array:
        commands_: ElementCommand | dict[int, ElementCommand] = {
            m.index: m.command for m in members if m.index is not None
        }
        # Slurm's own messages land in each subjob's output: task ids are subjob ids,
        # or, past MaxArraySize, name links to the subjob directories.
        where = batch.top if batch.first_id == 0 else element_links_dir(batch)
        stdout = os.path.join(_escape_pattern(where), "%a", "output", "slurm.out")
    else:
        commands_ = members[0].command
        stdout = os.path.join(_escape_pattern(members[0].root), "output", "slurm.out")
    collect = needs_collect(m.command for m in members)
    return BatchScriptSpec(
        job_name=batch.name,
        commands=commands_,
        resources=options.resources,
        partition=batch.queue or None,
        account=options.account or None,
        reservation=options.reservation or None,
        qos=options.qos or None,
        extra_options=options.extra_options,
        setup=(*(COLLECT_FUNCTION if collect else ()), *options.setup),
        array_throttle=options.array_throttle if batch.is_array else None,
        stdout=stdout,
        workdir=batch.top,
    )


def render_batch(
    batch: Batch, members: Sequence[Member] | None = None
) -> tuple[str | None, dict[str, str]]:
    """The script text, and fqid -> error for members whose command cannot be written
    (see :func:`ganga_like.batch.planning.render_pinned`)."""
    return render_pinned(
        lambda chosen: render_script(batch_spec(batch, chosen)),
        batch.members if members is None else members,
        ScriptError,
    )


def prepare_workspace(member: Member) -> None:
    """Directories, input files, and the earlier run's output put aside (kept)."""
    _prepare_workspace(member.root, member.job.submit_count, member.inputs)
