"""Typed wrappers around the Slurm client commands.

Every command runs as an argument list, never through a shell, through :data:`RUNNER`,
which counts them by program name (``RUNNER.counts``).  Queries take many job ids and
make ONE call, so a monitoring cycle costs the same number of commands for 1 job or
10,000.
Failures raise :class:`SlurmCommandError`, which says whether retrying later
can help (``transient``) or the request itself is wrong.
"""

from __future__ import annotations

import re
import subprocess
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ganga_like.batch.scheduler_commands import CommandError, command_failure, run_command

from .accounting import USAGE_FIELDS, SacctUsage, kibibytes, seconds, step_of
from .partitions import (
    SINFO_FORMAT,
    PartitionInfo,
    parse_scontrol_partitions,
    parse_sinfo_nodes,
)
from .sbatch_script import expand_indices
from .states import normalise_state

__all__ = [
    "DEFAULT_TIMEOUT",
    "ERROR_PATTERNS",
    "NEVER_SENT",
    "RUNNER",
    "SACCT_FIELDS",
    "SACCT_USAGE_FIELDS",
    "SQUEUE_FORMAT",
    "CommandRunner",
    "SacctRow",
    "SlurmCommandError",
    "SqueueRow",
    "find_by_name_command",
    "find_jobs_by_name",
    "is_transient",
    "parse_max_array_size",
    "parse_names",
    "parse_sacct",
    "parse_sbatch_output",
    "parse_squeue",
    "ping",
    "sacct",
    "sacct_command",
    "sbatch",
    "sbatch_command",
    "scancel",
    "scancel_command",
    "scontrol_max_array_size",
    "scontrol_show_partitions",
    "squeue",
    "squeue_command",
]

# With the controller down, each client retries for about MessageTimeout
# (squeue took 18 s in tests); a minute leaves room for a busy controller.
DEFAULT_TIMEOUT = 60.0

# One line per job; "|" never occurs in these fields (job names are not asked for).
SQUEUE_FORMAT = "%i|%A|%F|%K|%T|%r"
SACCT_FIELDS = ("JobID", "JobIDRaw", "State", "ExitCode", "Reason", "Start", "End")
# The state fields, then what the job used (accounting.py): asked in the monitor's sacct.
SACCT_USAGE_FIELDS = SACCT_FIELDS + USAGE_FIELDS

# Plain ids, array elements, compressed ranges and heterogeneous components;
# anything else (e.g. "-u") could be taken for an option.
_JOB_ID_RE = re.compile(r"^\d+(?:_(?:\d+|\[[\d,\-%:]+\])|\+\d+)?$")
_ELEMENT_RE = re.compile(r"^(\d+)_(\d+|\[[^\]]*\])$")


class SlurmCommandError(CommandError):
    """A Slurm command failed; ``transient`` says whether a later retry may succeed."""


# (pattern, transient, why).  First match wins, so transient causes come first:
# "Batch job submission failed: Unable to contact slurm controller" is transient
# although it also starts like a refusal.  Messages quoted in the comments are
# Slurm 22.05's own.
ERROR_PATTERNS: tuple[tuple[re.Pattern[str], bool, str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), transient, why)
    for pattern, transient, why in (
        # "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"
        (r"Unable to contact slurm controller", True, "controller unreachable"),
        (r"Socket timed out on send/recv", True, "controller busy"),
        (r"Connection refused", True, "daemon not listening"),
        (r"Connection timed out|Network is unreachable|No route to host", True, "network"),
        (r"Transport endpoint is not connected", True, "network"),
        (r"Zero Bytes were transmitted or received", True, "connection dropped"),
        (r"Communication connection failure", True, "connection dropped"),
        (r"backup controller in standby mode", True, "controller fail-over"),
        (r"temporarily unable to accept job|Resource temporarily unavailable", True, "busy"),
        (r"slurmctld is not responding|Slurmctld.* is DOWN", True, "controller down"),
        # "sacct: error: Problem talking to the database: Connection refused"
        (r"Problem talking to the database|slurm_persist_conn_open", True, "slurmdbd down"),
        (r"Munge (?:encode|decode) failed|Protocol authentication error", True, "munge"),
        (r"timed out after", True, "command timed out"),
        # "sbatch: error: invalid partition specified: nosuch"
        (r"invalid partition", False, "no such partition"),
        (r"Invalid account", False, "no such account or account/partition combination"),
        (r"Invalid qos", False, "no such QOS"),
        (r"Requested reservation is invalid", False, "no such reservation"),
        (r"Requested node configuration is not available", False, "no node can fit it"),
        (r"Memory specification can not be satisfied", False, "memory"),
        (r"Invalid generic resource", False, "gres/GPUs"),
        (r"Invalid job array specification", False, "array too large or malformed"),
        (r"Invalid --\w+ specification|unrecognized option|invalid option", False, "option"),
        (r"violates accounting/QOS policy", False, "account/QOS limits"),
        (r"Invalid job id specified", False, "unknown job"),
        (r"Could not establish a configuration source", False, "no slurm.conf"),
        (r"accounting storage is disabled", False, "no accounting"),
        (r"not found on PATH", False, "Slurm client not installed"),
    )
)


# Failures after which sbatch cannot have reached the controller: retrying is safe.
# Any other transient failure (a timeout, a dropped connection) may hide a job the
# controller accepted, so the retry first looks for it by its unique name.
NEVER_SENT = re.compile(
    r"Unable to contact slurm controller|Connection refused|Network is unreachable|"
    r"No route to host|Munge encode failed|temporarily unable to accept job|"
    r"Could not establish a configuration source|not found on PATH",
    re.IGNORECASE,
)


def is_transient(message: str) -> bool:
    """True when the failure behind ``message`` may go away by itself.

    Unrecognised messages count as permanent: they are then reported to the user
    with Slurm's wording instead of being retried forever.
    """
    for pattern, transient, _why in ERROR_PATTERNS:
        if pattern.search(message):
            return transient
    return False


def _check_ids(job_ids: Iterable[str]) -> list[str]:
    ids = [str(job_id).strip() for job_id in job_ids]
    bad = [job_id for job_id in ids if not _JOB_ID_RE.match(job_id)]
    if bad:
        raise ValueError(f"not Slurm job ids: {bad!r}")
    return list(dict.fromkeys(ids))  # drop repeats, keep order


class CommandRunner:
    """Runs Slurm's client commands, and counts them by program name: what a test or a
    benchmark reads to see how many calls something cost."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def run(
        self, args: Sequence[str], *, timeout: float, input_text: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_command(
            args,
            timeout=timeout,
            input_text=input_text,
            counts=self.counts,
            error=SlurmCommandError,
        )


# The one runner of the process: the Slurm commands of every session and monitor in it
# are counted together, as the cluster sees them.
RUNNER = CommandRunner()


def _run(
    args: Sequence[str], *, timeout: float, input_text: str | None = None
) -> subprocess.CompletedProcess[str]:
    return RUNNER.run(args, timeout=timeout, input_text=input_text)


def _fail(args: Sequence[str], result: subprocess.CompletedProcess[str]) -> CommandError:
    return command_failure(args, result, is_transient, SlurmCommandError)


# --- sbatch -----------------------------------------------------------------


def parse_sbatch_output(text: str) -> str:
    """``--parsable`` prints ``jobid`` or ``jobid;cluster``; return the job id."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise SlurmCommandError("sbatch printed no job id", transient=False)
    job_id = lines[-1].split(";", 1)[0]
    if not job_id.isdigit():
        raise SlurmCommandError(f"sbatch printed {lines[-1]!r}, not a job id", transient=False)
    return job_id


def sbatch_command(extra_args: Sequence[str] = ()) -> list[str]:
    """sbatch reading the script on stdin, printing only the job id."""
    return ["sbatch", "--parsable", *extra_args]


def sbatch(
    script_text: str, *, extra_args: Sequence[str] = (), timeout: float = DEFAULT_TIMEOUT
) -> str:
    """Submit ``script_text`` (given on stdin) and return the job id.

    A timeout is reported as transient, but the job may have been accepted
    before the client gave up; a caller retrying should look for it first.
    """
    args = sbatch_command(extra_args)
    result = _run(args, timeout=timeout, input_text=script_text)
    if result.returncode != 0:
        raise _fail(args, result)
    return parse_sbatch_output(result.stdout)


# --- squeue -----------------------------------------------------------------


@dataclass(frozen=True)
class SqueueRow:
    """One job or array element as squeue shows it.

    ``job_id`` is ``"123"`` or ``"123_4"``; ``raw_job_id`` is Slurm's own id
    (pending elements share the array's id until they start).
    """

    job_id: str
    raw_job_id: str
    array_job_id: str | None
    array_task_id: int | None
    state: str
    reason: str | None


def _none_if_na(value: str) -> str | None:
    value = value.strip()
    return None if value in {"", "N/A", "None", "(null)", "Unknown"} else value


def parse_squeue(text: str) -> dict[str, SqueueRow]:
    """Parse ``squeue -h -o SQUEUE_FORMAT`` output, expanding ``123_[0-99%5]`` rows."""
    rows: dict[str, SqueueRow] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        job_id, raw_id, array_id, task_id, state, reason = line.split("|", 5)
        base = SqueueRow(
            job_id=job_id,
            raw_job_id=raw_id,
            array_job_id=None,
            array_task_id=None,
            state=normalise_state(state),
            reason=_none_if_na(reason),
        )
        task = _none_if_na(task_id)
        if task is None:
            rows[job_id] = base
            continue
        # Without --array, pending elements come as one row "123_[1-5%1]" with %K "1-5%1".
        for index in expand_indices(task):
            element = f"{array_id}_{index}"
            rows[element] = replace(
                base, job_id=element, array_job_id=array_id, array_task_id=index
            )
    return rows


def squeue_command(ids: Sequence[str]) -> list[str]:
    """``--states=all`` keeps finished jobs visible for MinJobAge; ``--array`` lists
    pending elements one per line."""
    return [
        "squeue",
        "--noheader",
        "--array",
        "--states=all",
        f"--jobs={','.join(ids)}",
        f"--format={SQUEUE_FORMAT}",
    ]


def squeue(job_ids: Iterable[str], *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, SqueueRow]:
    """State of the given jobs (an array id brings all its elements) in ONE call.

    ``--states=all`` keeps finished jobs visible for MinJobAge; ``--array``
    lists pending elements one per line.  Unknown ids are simply absent.
    """
    ids = _check_ids(job_ids)
    if not ids:
        return {}
    args = squeue_command(ids)
    result = _run(args, timeout=timeout)
    if result.returncode != 0:
        # With a single unknown id squeue fails ("Invalid job id specified");
        # with several it prints the known ones and succeeds.  Same meaning.
        if "Invalid job id specified" in result.stderr and not result.stdout.strip():
            return {}
        raise _fail(args, result)
    return parse_squeue(result.stdout)


# --- sacct ------------------------------------------------------------------


@dataclass(frozen=True)
class SacctRow:
    """One job or array element from the accounting database.

    ``state`` is normalised (``"CANCELLED by 0"`` -> ``"CANCELLED"``, the uid in
    ``cancelled_by``); ``exit_code`` stays Slurm's ``"status:signal"``.
    """

    job_id: str
    raw_job_id: str
    array_job_id: str | None
    array_task_id: int | None
    state: str
    cancelled_by: str | None
    exit_code: str | None
    reason: str | None
    start: str | None
    end: str | None
    # What it used (accounting.py), when asked for: CPU and elapsed from its own line, the
    # peak memory from its steps' lines, and whether any step had ended (its use known).
    user_cpu: float | None = None
    system_cpu: float | None = None
    elapsed: float | None = None
    max_rss_kib: int | None = None
    step_ended: bool = False

    @property
    def raw_state(self) -> str:
        return self.state if self.cancelled_by is None else f"{self.state} by {self.cancelled_by}"

    @property
    def usage(self) -> SacctUsage | None:
        """What the job used, once a step of it has ended (accounted); None before."""
        user, system, elapsed = self.user_cpu, self.system_cpu, self.elapsed
        if not self.step_ended or user is None or system is None or elapsed is None:
            return None
        return SacctUsage(self.max_rss_kib or 0, user, system, elapsed)


def parse_sacct(text: str) -> dict[str, SacctRow]:
    """Parse ``sacct -n -P -o SACCT_FIELDS`` (or ``SACCT_USAGE_FIELDS``), expanding pending
    ``123_[1-3,5%1]`` rows; steps' lines (with usage fields) are folded into their job's.

    sacct (22.05) has no ``--array``: pending elements stay compressed.
    """
    rows: dict[str, SacctRow] = {}
    steps: dict[str, tuple[int | None, bool]] = {}  # job id -> (peak KiB, a step ended)
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("|")
        step = step_of(fields[0])
        if step is not None:
            if len(fields) == len(SACCT_USAGE_FIELDS):
                steps[step[0]] = _fold_step(steps.get(step[0]), fields)
            continue
        base = _sacct_row(fields)
        match = _ELEMENT_RE.match(base.job_id)
        if match is None:
            rows[base.job_id] = base
            continue
        array_id, task = match.groups()
        for index in expand_indices(task):
            element = f"{array_id}_{index}"
            rows[element] = replace(
                base, job_id=element, array_job_id=array_id, array_task_id=index
            )
    for job_id, (peak, ended) in steps.items():
        row = rows.get(job_id)
        if row is not None:
            rows[job_id] = replace(row, max_rss_kib=peak, step_ended=ended)
    return rows


def _sacct_row(fields: list[str]) -> SacctRow:
    job_id, raw_id, state, exit_code, reason, start, end = fields[:7]
    words = state.split()
    used = [seconds(value) for value in fields[8:11]] if len(fields) >= 11 else [None] * 3
    return SacctRow(
        job_id=job_id,
        raw_job_id=raw_id,
        array_job_id=None,
        array_task_id=None,
        state=normalise_state(state),
        cancelled_by=words[2] if len(words) >= 3 and words[1] == "by" else None,
        exit_code=_none_if_na(exit_code),
        reason=_none_if_na(reason),
        start=_none_if_na(start),
        end=_none_if_na(end),
        user_cpu=used[0],
        system_cpu=used[1],
        elapsed=used[2],
    )


def _fold_step(
    before: tuple[int | None, bool] | None, fields: list[str]
) -> tuple[int | None, bool]:
    """The peak memory over a job's steps so far and whether one has ended, with one
    more step's line."""
    peak, ended = before or (None, False)
    sample = kibibytes(fields[7])
    if sample is not None:
        peak = sample if peak is None else max(peak, sample)
    return peak, ended or _none_if_na(fields[6]) is not None


def sacct_command(ids: Sequence[str], usage: bool = False) -> list[str]:
    """One ``|``-separated line per job: allocations only, or with ``usage`` also their
    steps' lines and what they used."""
    fields = SACCT_USAGE_FIELDS if usage else SACCT_FIELDS
    return [
        "sacct",
        "--noheader",
        "--parsable2",
        *(() if usage else ("--allocations",)),
        f"--jobs={','.join(ids)}",
        f"--format={','.join(fields)}",
    ]


def sacct(
    job_ids: Iterable[str], *, timeout: float = DEFAULT_TIMEOUT, usage: bool = False
) -> dict[str, SacctRow]:
    """Accounting records of the given jobs in ONE call; with ``usage``, what each used
    (``SacctRow.usage``, known once a step of it has ended).

    sacct trails squeue by a few seconds: a job just finished may be missing or
    still RUNNING here, and its steps' use trails its own line.
    """
    ids = _check_ids(job_ids)
    if not ids:
        return {}
    args = sacct_command(ids, usage)
    result = _run(args, timeout=timeout)
    if result.returncode != 0:
        raise _fail(args, result)
    return parse_sacct(result.stdout)


# --- scancel ----------------------------------------------------------------

# Cancelling is idempotent for us: a job already gone needs nothing more.
_ALREADY_DONE = re.compile(r"already completing or completed|Invalid job id specified", re.I)


def scancel_command(ids: Sequence[str]) -> list[str]:
    return ["scancel", *ids]


def scancel(job_ids: Iterable[str], *, timeout: float = DEFAULT_TIMEOUT) -> None:
    """Cancel whole jobs (``"123"``) or array elements (``"123_4"``) in ONE call.

    A pending element cancelled this way vanishes: squeue and sacct no longer
    list it at all.
    """
    ids = _check_ids(job_ids)
    if not ids:
        return
    args = scancel_command(ids)
    result = _run(args, timeout=timeout)
    if result.returncode == 0:
        return
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if not _ALREADY_DONE.search(line)]
    if errors or not lines:
        raise _fail(args, result)


# --- jobs by name -----------------------------------------------------------


def find_by_name_command(names: Sequence[str]) -> list[str]:
    return [
        "squeue",
        "--noheader",
        "--me",
        "--states=all",
        f"--name={','.join(names)}",
        # %F: an array's own id on every row (%A is each running element's own job id).
        "--format=%F|%j",
    ]


def parse_names(text: str, names: Sequence[str]) -> dict[str, str]:
    """name -> job id from ``find_by_name_command``'s output (the first id of a name)."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        job_id, _, name = line.strip().partition("|")
        if job_id.isdigit() and name in names:
            found.setdefault(name, job_id)
    return found


def find_jobs_by_name(names: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT) -> dict[str, str]:
    """Our jobs called one of ``names``: name -> job id (an array's id for an array), in
    ONE squeue call; names not found are absent."""
    if not names:
        return {}
    args = find_by_name_command(names)
    result = _run(args, timeout=timeout)
    if result.returncode != 0:
        raise _fail(args, result)
    return parse_names(result.stdout, names)


# How far back the accounting is searched for a job of a given name: a session killed
# while submitting may be followed by the next one days later.
HISTORY_SEARCH = "now-30days"


def find_ended_by_name_command(names: Sequence[str]) -> list[str]:
    return [
        "sacct",
        "--noheader",
        "--parsable2",
        "--allocations",
        f"--starttime={HISTORY_SEARCH}",
        f"--name={','.join(names)}",
        "--format=JobID,JobName",
    ]


def find_ended_jobs_by_name(
    names: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, str]:
    """As :func:`find_jobs_by_name`, from the accounting (jobs squeue has forgotten):
    name -> job id (an array's id for an array element), in ONE sacct call."""
    if not names:
        return {}
    args = find_ended_by_name_command(names)
    result = _run(args, timeout=timeout)
    if result.returncode != 0:
        raise _fail(args, result)
    found: dict[str, str] = {}
    for line in result.stdout.splitlines():
        job_id, _, name = line.strip().partition("|")
        base = job_id.split("_", 1)[0]
        if base.isdigit() and name in names:
            found.setdefault(name, base)
    return found


# --- partitions and ping ----------------------------------------------------


def scontrol_show_partitions(*, timeout: float = DEFAULT_TIMEOUT) -> list[PartitionInfo]:
    """Partitions in Slurm's order, with their nodes' CPUs, memory and GPUs (2 commands)."""
    args = ["scontrol", "show", "partition", "--oneliner"]
    result = _run(args, timeout=timeout)
    if result.returncode != 0:
        raise _fail(args, result)
    partitions = parse_scontrol_partitions(result.stdout)

    node_args = ["sinfo", "--noheader", "--Node", f"--format={SINFO_FORMAT}"]
    nodes_result = _run(node_args, timeout=timeout)
    if nodes_result.returncode != 0:
        raise _fail(node_args, nodes_result)
    nodes = parse_sinfo_nodes(nodes_result.stdout)
    return [replace(p, nodes=tuple(nodes.get(p.name, ()))) for p in partitions]


# Slurm's own default, for a configuration that does not name the limit.
DEFAULT_MAX_ARRAY_SIZE = 1001
_MAX_ARRAY_SIZE = re.compile(r"^MaxArraySize\s*=\s*(\d+)\s*$", re.MULTILINE)


def parse_max_array_size(text: str) -> int:
    """``MaxArraySize`` from ``scontrol show config``: array task ids must stay below it."""
    found = _MAX_ARRAY_SIZE.search(text)
    return int(found.group(1)) if found else DEFAULT_MAX_ARRAY_SIZE


def scontrol_max_array_size(*, timeout: float = DEFAULT_TIMEOUT) -> int:
    """The cluster's ``MaxArraySize`` (one command)."""
    args = ["scontrol", "show", "config"]
    result = _run(args, timeout=timeout)
    if result.returncode != 0:
        raise _fail(args, result)
    return parse_max_array_size(result.stdout)


def ping(*, timeout: float = 10.0) -> bool:
    """True when the controller answers ``scontrol ping``."""
    try:
        result = _run(["scontrol", "ping"], timeout=timeout)
    except SlurmCommandError:
        return False
    return result.returncode == 0 and "is UP" in result.stdout
