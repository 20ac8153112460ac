"""From (job, RunSpec) pairs to sbatch calls.

:func:`plan` decides what is submitted how, without side effects (it may ask Slurm for
its partitions and its ``MaxArraySize``): subjobs whose Slurm options are the same become
ONE job array whose task ids are their subjob ids (real bulk), or, past the cluster's
``MaxArraySize``, one array per that many subjobs; a job without subjobs, and every subjob
when ``bulk=False``, is a plain job of its own.  :func:`prepare_workspace` and
:func:`sbatch_with_retry` are the side effects, run by the backend in order.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from ganga_like.model.interfaces import RunSpec, SubmitContext
from ganga_like.model.job import Job
from ganga_like.private import copy_private

from . import commands
from .commands import SlurmCommandError
from .partitions import PartitionInfo, choose_partition
from .resource_spec import ResourceError, ResourceSpec
from .script import BatchScriptSpec, ElementCommand, ScriptError, render_script
from .settings import SlurmSettings

T = TypeVar("T")

__all__ = [
    "ARRAY_LIMIT",
    "COLLECT_FUNCTION",
    "MISSING_OUTPUT_FILE",
    "PARTITIONS",
    "Batch",
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
    "sbatch_with_retry",
    "slurm_log_dir",
    "unconfirmed_submissions",
]

# Written by the batch script when an output pattern matched nothing; the poll reads it
# (only for elements that failed with exit code 1) to report the real reason.
MISSING_OUTPUT_FILE = "__ganga_output_missing__"

# Output files must be moved out of the work directory after the program ends, so a job
# with output patterns runs its program under this function instead of through `exec`.
# It is exported so the `exec /bin/bash -c` of each array element sees it: the script
# defines it once, not once per element. As with Local, a file keeps its path relative to
# the work directory (`sub/out.txt` -> `output/sub/out.txt`; a file outside it, by an
# absolute or `../` pattern, goes by its name), and nothing in the output directory is ever
# overwritten: a file whose place is taken stays in the work directory and the element
# fails, saying why. A match inside a directory already moved went with it.
COLLECT_FUNCTION = (
    "__ganga_collect() {  # usage: OUTDIR N PATTERN... PROGRAM ARG...",
    '    local out=$1 n=$2; shift 2',
    '    local patterns=("${@:1:n}"); shift "$n"',
    '    "$@"; local rc=$?',
    '    [ "$rc" -eq 0 ] || return "$rc"',
    "    local p f place problem= IFS=",
    "    shopt -s nullglob dotglob",
    '    for p in "${patterns[@]}"; do',
    "        local files=($p) present=",
    "        for f in \"${files[@]}\"; do  # a literal name stays even when it is absent",
    '            { [ -e "$f" ] || [ -L "$f" ]; } && present=1',
    "        done",
    '        if [ -z "$present" ]; then',
    "            problem=${problem:-\"output pattern '$p' matched no file\"}; continue",
    "        fi",
    '        for f in "${files[@]}"; do',
    '            [ -e "$f" ] || [ -L "$f" ] || continue',
    '            case $f in /*|../*|..) place=${f##*/} ;; *) place=${f#./} ;; esac',
    '            if [ -e "$out/$place" ] || [ -L "$out/$place" ]; then',
    '                problem=${problem:-"output $f not collected: $place already exists in '
    'the output directory (the file stays in the work directory)"}',
    "                continue",
    "            fi",
    '            mkdir -p -- "$(dirname -- "$out/$place")" && mv -- "$f" "$out/$place" \\',
    '                || problem=${problem:-"cannot collect output $f"}',
    "        done",
    "    done",
    '    [ -z "$problem" ] && return 0',
    "    printf '%s\\n' \"$problem\" "
    f'| tee "$out/{MISSING_OUTPUT_FILE}" >&2',
    "    return 1",
    "}",
    "export -f __ganga_collect",
)
_COLLECT_CALL = '__ganga_collect "$@"'


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


@dataclass
class Member:
    """One (sub)job in a batch: its array index (None in a plain job) and command."""

    job: Job
    index: int | None
    root: str  # its workspace directory
    command: ElementCommand
    inputs: tuple[str, ...]


@dataclass
class Batch:
    """One sbatch call: a plain job (one member) or an array (members by index)."""

    name: str
    top: str  # workspace directory of the top-level job
    options: Options
    partition: str  # the partition used: options.partition, or the one chosen
    members: list[Member] = field(default_factory=list)
    partition_chosen: bool = False

    @property
    def is_array(self) -> bool:
        return bool(self.members) and self.members[0].index is not None

    @property
    def first_id(self) -> int:
        """The subjob id of array task 0: non-zero for the arrays past the cluster's
        MaxArraySize, whose task ids start again from 0 (0 for a plain job)."""
        first = self.members[0] if self.members else None
        if first is None or first.index is None:
            return 0
        return first.job.id - first.index


def slurm_log_dir(top: str) -> str:
    """Where the batch scripts of a job and the submission log are kept."""
    return os.path.join(top, "slurm")


class ClusterQuery(Generic[T]):
    """One of the cluster's answers that change rarely (its partitions, its limits), asked
    for at most once per ``partition_cache_seconds``: a loop of submissions asks once."""

    def __init__(self, ask: Callable[[float], T]) -> None:
        self._ask = ask  # called with the command timeout
        self._value: T | None = None
        self._when = 0.0

    def get(self, settings: SlurmSettings) -> T:
        now = time.monotonic()
        if self._value is None or now - self._when > settings.partition_cache_seconds:
            self._value = retry(lambda: self._ask(settings.command_timeout), settings)
            self._when = now
        return self._value

    def clear(self) -> None:
        self._value = None


PARTITIONS: ClusterQuery[list[PartitionInfo]] = ClusterQuery(
    lambda timeout: commands.scontrol_show_partitions(timeout=timeout))
ARRAY_LIMIT: ClusterQuery[int] = ClusterQuery(
    lambda timeout: commands.scontrol_max_array_size(timeout=timeout))


# -- planning -------------------------------------------------------------------------


def _new_name(job: Job) -> str:
    # Unique per sbatch: a retry after an ambiguous failure looks the job up by name.
    return f"ganga-{job.fqid}-{secrets.token_hex(3)}"


def _element(job: Job, spec: RunSpec, root: str, resources: ResourceSpec) -> ElementCommand:
    master = job.master
    env = dict(spec.env)
    env.update(
        GANGA_JOB_ID=str(job.id),
        GANGA_FQID=job.fqid,
        GANGA_MASTER_ID=str(master.id) if master is not None else "",
        GANGA_SUBJOB_ID=str(job.id) if master is not None else "",
    )
    output = os.path.join(root, "output")
    # srun inside the collecting wrapper: the files are collected once, after every
    # process has ended.
    argv: tuple[str, ...] = (*resources.launcher(), *spec.argv)
    if spec.output_patterns:
        patterns = spec.output_patterns
        argv = ("/bin/bash", "-c", _COLLECT_CALL, "ganga-collect", output, str(len(patterns)),
                *patterns, *argv)
    return ElementCommand(
        argv=argv,
        env=env,
        workdir=os.path.join(root, "work"),
        stdout=os.path.join(output, "stdout"),
        stderr=os.path.join(output, "stderr"),
    )


def plan(
    ctx: SubmitContext,
    pairs: Sequence[tuple[Job, RunSpec]],
    settings: SlurmSettings,
    partitions: Callable[[], list[PartitionInfo]],
    array_limit: Callable[[], int],
) -> tuple[list[Batch], dict[str, str]]:
    """The batches to submit, in subjob order, and fqid -> error for jobs that cannot be.

    ``partitions`` is called (once) only when some job leaves its partition unset, and
    ``array_limit`` (the cluster's MaxArraySize) only when there is an array to make.
    Raises :class:`SlurmCommandError` when either cannot be read.
    """
    batches: list[Batch] = []
    arrays: dict[tuple[str, Options, int], Batch] = {}
    array_size: int | None = None
    failed: dict[str, str] = {}
    chosen: dict[ResourceSpec, str | ResourceError] = {}
    for job, spec in pairs:
        options = Options.of(job.backend)
        master = job.master
        top = ctx.paths(master).location if master is not None else ctx.paths(job).location
        root = ctx.paths(job).location
        partition = options.partition
        if not partition:
            choice = chosen.get(options.resources)
            if choice is None:
                try:
                    choice = choose_partition(partitions(), options.resources)
                except ResourceError as exc:
                    choice = exc
                chosen[options.resources] = choice
            if isinstance(choice, ResourceError):
                failed[job.fqid] = f"Slurm.resources: {choice}"
                continue
            partition = choice
        member = Member(job, None, root, _element(job, spec, root, options.resources),
                        spec.inputs)
        if master is not None and options.bulk:
            if array_size is None:
                array_size = _array_size(array_limit(), settings)
            # Task id = subjob id below the limit; past it, one more array per
            # ``array_size`` subjobs, each with task ids from 0.
            chunk, member.index = divmod(job.id, array_size)
            key = (top, options, chunk)
            batch = arrays.get(key)
            if batch is None:
                batch = Batch(_new_name(master), top, options, partition,
                              partition_chosen=not options.partition)
                arrays[key] = batch
                batches.append(batch)
            batch.members.append(member)
        else:
            batches.append(Batch(_new_name(job), top, options, partition, [member],
                                 partition_chosen=not options.partition))
    return batches, failed


def _array_size(cluster_limit: int, settings: SlurmSettings) -> int:
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
    needs_collect = any(m.command.argv[2:3] == (_COLLECT_CALL,) for m in members)
    return BatchScriptSpec(
        job_name=batch.name,
        commands=commands_,
        resources=options.resources,
        partition=batch.partition or None,
        account=options.account or None,
        reservation=options.reservation or None,
        qos=options.qos or None,
        extra_options=options.extra_options,
        setup=(*(COLLECT_FUNCTION if needs_collect else ()), *options.setup),
        array_throttle=options.array_throttle if batch.is_array else None,
        stdout=stdout,
        workdir=batch.top,
    )


def render_batch(batch: Batch, members: Sequence[Member] | None = None
                 ) -> tuple[str | None, dict[str, str]]:
    """The script text, and fqid -> error for members whose command cannot be written.

    A script error is pinned on the members that cause it (rendering each alone, which
    only happens on that rare path), so the others can still be submitted.
    """
    members = list(batch.members if members is None else members)
    try:
        return render_script(batch_spec(batch, members)), {}
    except ScriptError as exc:
        whole = str(exc)
    bad: dict[str, str] = {}
    for member in members:
        try:
            render_script(batch_spec(batch, [member]))
        except ScriptError as exc:
            bad[member.job.fqid] = f"cannot write the batch script: {exc}"
    good = [m for m in members if m.job.fqid not in bad]
    if not bad:  # the job-level part is wrong: every member fails with it
        return None, {m.job.fqid: f"cannot write the batch script: {whole}" for m in members}
    if not good:
        return None, bad
    text, more = render_batch(batch, good)
    return text, {**bad, **more}


# -- side effects ---------------------------------------------------------------------


def prepare_workspace(member: Member) -> None:
    """Directories, input files, and the earlier run's output put aside (kept)."""
    root = member.root
    output = os.path.join(root, "output")
    count = member.job.submit_count
    if count > 1 and os.path.exists(output):
        os.rename(output, os.path.join(root, f"output.{count - 1}"))
    work = os.path.join(root, "work")
    os.makedirs(output, exist_ok=True)
    os.makedirs(work, exist_ok=True)
    if member.inputs:
        input_dir = os.path.join(root, "input")
        os.makedirs(input_dir, exist_ok=True)
        for source in member.inputs:
            name = os.path.basename(source.rstrip("/"))
            kept = os.path.join(input_dir, name)
            # Copies, never links: a program writing to its input must change neither
            # the user's file nor the copy kept in input/.
            _copy(source, kept)
            _copy(kept, os.path.join(work, name))


def _copy(source: str, target: str) -> None:
    if os.path.isdir(source):
        shutil.copytree(source, target, dirs_exist_ok=True)
        return
    copy_private(source, target)


# Failures after which sbatch cannot have reached the controller: retrying is safe.
# Any other transient failure (a timeout, a dropped connection) may hide a job the
# controller accepted, so the retry first looks for it by its unique name.
_NEVER_SENT = re.compile(
    r"Unable to contact slurm controller|Connection refused|Network is unreachable|"
    r"No route to host|Munge encode failed|temporarily unable to accept job|"
    r"Could not establish a configuration source|not found on PATH",
    re.IGNORECASE,
)

# Replaced in tests so that retries do not really wait.
sleep: Callable[[float], None] = time.sleep


def retry(action: Callable[[], Any], settings: SlurmSettings) -> Any:
    """Run ``action``, retrying transient Slurm failures with doubling back-off.

    Stops after ``submit_attempts`` attempts, or when the next attempt would start more
    than ``submit_patience`` seconds after the first; the last error is then raised.
    Only for read-only commands: sbatch has :func:`sbatch_with_retry`.
    """
    started = time.monotonic()
    delay = settings.submit_backoff
    attempt = 1
    while True:
        try:
            return action()
        except SlurmCommandError as exc:
            elapsed = time.monotonic() - started
            if _give_up(exc, attempt, elapsed + delay, settings):
                raise
            sleep(delay)
            delay *= 2
            attempt += 1


def _give_up(exc: SlurmCommandError, attempt: int, next_start: float,
             settings: SlurmSettings) -> bool:
    if not exc.transient:
        return True
    if attempt >= settings.submit_attempts or next_start > settings.submit_patience:
        if attempt > 1:
            exc.message += f" (gave up after {attempt} attempts)"
        return True
    return False


def sbatch_with_retry(text: str, name: str, settings: SlurmSettings) -> str:
    """Submit ``text`` and return the job id, retrying like :func:`retry`.

    After a failure that may hide an accepted job (a timeout, a dropped connection),
    the job is looked up by its unique name before anything is submitted again; as long
    as that look-up cannot be made, nothing is resubmitted.
    """
    started = time.monotonic()
    delay = settings.submit_backoff
    attempt = 1
    unresolved = False  # an earlier attempt may have been accepted
    while True:
        try:
            if unresolved:
                found = find_jobs_by_name([name], timeout=settings.command_timeout)
                if name in found:
                    return found[name]
                unresolved = False
            return commands.sbatch(text, timeout=settings.command_timeout)
        except SlurmCommandError as exc:
            unresolved = unresolved or not _NEVER_SENT.search(exc.message)
            elapsed = time.monotonic() - started
            if _give_up(exc, attempt, elapsed + delay, settings):
                if unresolved:
                    exc.message += (f"; the job may have been accepted all the same: "
                                    f"look for it with `squeue --me --name={name}`")
                raise
            sleep(delay)
            delay *= 2
            attempt += 1


def find_jobs_by_name(names: Sequence[str], *, timeout: float = commands.DEFAULT_TIMEOUT
                      ) -> dict[str, str]:
    """Our jobs called one of ``names``: name -> job id (an array's id for an array), in
    ONE squeue call; names not found are absent."""
    if not names:
        return {}
    args = ["squeue", "--noheader", "--me", "--states=all", f"--name={','.join(names)}",
            "--format=%A|%j"]
    result = commands._run(args, timeout=timeout)
    if result.returncode != 0:
        raise commands._fail(args, result)
    found: dict[str, str] = {}
    for line in result.stdout.splitlines():
        job_id, _, name = line.strip().partition("|")
        if job_id.isdigit() and name in names:
            found.setdefault(name, job_id)
    return found


# -- the submission log ---------------------------------------------------------------

SUBMISSION_LOG = "submissions.log"


def log_submission(log_dir: str, name: str, outcome: str) -> None:
    """One line per sbatch in ``slurm/submissions.log``, after the outcome is known.

    It keeps earlier Slurm ids findable after a resubmission replaced them, and tells
    an interrupted submission (a script with no line) from a finished one.
    """
    when = datetime.now().isoformat(sep=" ", timespec="seconds")
    try:
        with open(os.path.join(log_dir, SUBMISSION_LOG), "a", encoding="utf-8") as f:
            f.write(f"{when} {name} {outcome}\n")
    except OSError:
        pass  # bookkeeping only: the ids are on the subjobs


def unconfirmed_submissions(log_dir: str) -> list[str]:
    """Names of the scripts kept in ``log_dir`` whose sbatch outcome was never logged:
    the process stopped while submitting them."""
    try:
        scripts = {n[:-3] for n in os.listdir(log_dir) if n.endswith(".sh")}
    except OSError:
        return []
    try:
        with open(os.path.join(log_dir, SUBMISSION_LOG), encoding="utf-8") as f:
            logged = {line.split(" ", 3)[2] for line in f if line.count(" ") >= 3}
    except OSError:
        logged = set()
    return sorted(scripts - logged)
