"""A pilot's life: its submission (one sbatch), its kill, and its part of the poll.

Submission writes the (sub)jobs as ONE batch of the runner's file protocol into the
pilot's runner directory, ``<workspace>/<job>/pilot/<name>/`` (on the shared file system),
and submits a batch script that runs ``python -m ganga_like_runner`` on it with the
allocation's size (``--cores``, ``--memory``).  The runner appends each task's events to
``<workspace>/<job>/pilot-events.jsonl``, which the poll reads as the Local backend reads its
journal: only new lines, by offset, matched to the followed subjobs through a map kept from
the monitor's change log.  The pilot's own Slurm job is asked about (squeue, sacct for an
ended one) at most once per ``poll_interval``: once it has ended, the subjobs it did not
finish are concluded from their ``__run__`` records: killed when they never started (a
``resubmit()`` runs them in a new pilot), failed when the allocation ended while they ran.

The runner is a plugin of its own, the one the Local backend uses too; its file protocol
(``ganga_like_runner.protocol``) is imported only when a pilot is used: without that
plugin, pilots say so in one line and the rest of the Slurm backend works.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ganga_like.batch.records import handover_key, keep_handover, log_submission
from ganga_like.errors import BackendError
from ganga_like.hosts import read_record
from ganga_like.model.interfaces import (
    ActiveRef,
    PollContext,
    RunSpec,
    StatusReport,
    SubmitContext,
    SubmitOutcome,
)
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.model.stop_points import stop_point
from ganga_like.private import make_private_dirs

from . import submission
from .pilot_poller import PilotPoller
from .pilot_script import (
    Slurm,
    choose,
    render,
    resources_of,
    runner_dir,
    task_key,
    task_row,
)
from .sbatch_script import ScriptError
from .scheduler import SCHEDULER
from .settings import Slurm as SlurmSection
from .slurm_commands import SlurmCommandError

if TYPE_CHECKING:
    from .pilot import Pilot


__all__ = ["HANDOVER_PILOT", "JOURNAL", "kill", "poll", "submit"]

JOURNAL = "pilot-events.jsonl"
# In a pilot's kept hand-over (see ganga_like.batch.records): it is a pilot, whose name
# is the subjobs' ``pilot_run``.
HANDOVER_PILOT = "pilot"
_sequence = itertools.count()


def _protocol() -> ModuleType:
    try:
        from ganga_like_runner import protocol
    except ImportError as exc:
        raise BackendError(
            f"Slurm.pilot needs the runner plugin (ganga_like_runner), which "
            f"cannot be imported: {exc}"
        ) from None
    return protocol


def _journals() -> ModuleType:
    """How the runner's journals read as reports: the runner plugin's, as Local reads them."""
    try:
        from ganga_like_runner import journal_reports
    except ImportError as exc:
        raise BackendError(
            f"Slurm.pilot needs the runner plugin (ganga_like_runner), which "
            f"cannot be imported: {exc}"
        ) from None
    return journal_reports


def submit(
    backend: Slurm,
    ctx: SubmitContext,
    jobs: Sequence[tuple[Job, RunSpec]],
    keep_going: bool,
    settings: SlurmSection,
) -> SubmitOutcome:
    """Every job of ``jobs`` into ONE new pilot: one sbatch."""
    protocol = _protocol()
    pilot = backend.pilot
    assert pilot is not None
    outcome = SubmitOutcome(real_bulk=True)
    partition, chosen = choose(ctx, backend, pilot, settings)
    first = jobs[0][0]
    top_job = first.master or first
    top = ctx.paths(top_job).location
    name = submission._new_name(top_job)
    tasks = _tasks(protocol, ctx, jobs, pilot, os.path.join(top, JOURNAL), keep_going, outcome)
    if tasks is None:
        return outcome
    rows, members = tasks
    if not rows:
        return outcome
    text = render(backend, name, top, partition)
    log_dir = submission.slurm_log_dir(top)
    try:
        _write_files(protocol, runner_dir(top, name), rows, log_dir, name, text)
        keep_handover(
            log_dir,
            name,
            {handover_key(job): None for job in members},
            partition,
            {HANDOVER_PILOT: True},
        )
    except (OSError, ScriptError) as exc:
        message = f"cannot write the pilot's files: {exc}"
        outcome.failed.update({j.fqid: message for j in members})
        return outcome
    try:
        pilot_id = submission.sbatch_with_retry(text, name, settings)
        stop_point("scheduler-accepted")
    except SlurmCommandError as exc:
        message = exc.as_submit_failure("sbatch")
        log_submission(log_dir, name, "not submitted: " + message.replace("\n", " "))
        outcome.failed.update({j.fqid: message for j in members})
        return outcome
    for job in members:
        job.backend._assign("id", pilot_id)
        job.backend._assign("actual_partition", partition)
        job.backend._assign("pilot_run", name)
    backend._assign("id", pilot_id)
    backend._assign("actual_partition", partition)
    how = " (chosen)" if chosen else ""
    log_submission(
        log_dir,
        name,
        f"submitted {pilot_id} partition={partition}{how} pilot of {len(members)} "
        f"task(s), {pilot.describe()}",
    )
    return outcome


def _tasks(
    protocol: ModuleType,
    ctx: SubmitContext,
    jobs: Sequence[tuple[Job, RunSpec]],
    pilot: Pilot,
    events: str,
    keep_going: bool,
    outcome: SubmitOutcome,
) -> tuple[list[list[Any]], list[Job]] | None:
    """The runner's rows of the jobs that can run in the pilot, and those jobs; the others
    are recorded failed in ``outcome``. None: one failed without ``keep_going``, so
    nothing is submitted (the rest recorded not attempted)."""
    per_node = pilot.cores
    rows: list[list[Any]] = []
    members: list[Job] = []
    for index, (job, spec) in enumerate(jobs):
        needs = resources_of(job)
        problem = None
        if per_node is not None and needs.total_cores > per_node:
            problem = (
                f"needs {needs.total_cores} cores, the pilot has {per_node} per node "
                "(Slurm.pilot.cores)"
            )
        if problem is None:
            try:
                rows.append(task_row(protocol, ctx, job, spec, pilot, events))
                members.append(job)
                continue
            except (OSError, ValueError) as exc:
                problem = f"preparing the workspace failed: {exc}"
        outcome.failed[job.fqid] = problem
        if not keep_going:
            outcome.not_attempted = [j.fqid for j, _ in jobs[index + 1 :]]
            return None
    return rows, members


def _write_files(
    protocol: ModuleType, directory: str, rows: list[list[Any]], log_dir: str, name: str, text: str
) -> None:
    """The pilot's batch of tasks into its runner's queue, and its script kept (BEFORE it
    is submitted: a script without a log line is a submission whose outcome nobody saw,
    which startup recovery cancels)."""
    queue = os.path.join(directory, protocol.QUEUE_DIR)
    make_private_dirs(queue)
    batch_id = f"{time.time_ns():020d}-{os.getpid()}-{next(_sequence)}"
    payload = {
        "format": protocol.FORMAT_VERSION,
        "id": batch_id,
        "idle_exit_seconds": 0.0,
        "tasks": rows,
    }
    protocol.write_atomic(Path(queue), batch_id + protocol.BATCH_SUFFIX, protocol.dumps(payload))
    os.makedirs(log_dir, exist_ok=True)
    with open(os.path.join(log_dir, name + ".sh"), "w", encoding="utf-8") as f:
        f.write(text)


# -- kill ------------------------------------------------------------------------------


def kill(ctx: SubmitContext, jobs: Sequence[Job], settings: SlurmSection) -> dict[str, str]:
    """Kill pilot (sub)jobs: a pilot all of whose unfinished subjobs are killed is
    cancelled (scancel); otherwise the runner is asked to kill just those."""
    groups: dict[tuple[str, str], list[Job]] = {}
    for job in jobs:
        top = ctx.paths(job.master or job).location
        groups.setdefault((top, job.backend.pilot_run), []).append(job)
    errors: dict[str, str] = {}
    cancel: dict[str, list[Job]] = {}
    for (top, name), killed in groups.items():
        if _whole(killed, name):
            cancel.setdefault(killed[0].backend.id, []).extend(killed)
            continue
        try:
            _ask_runner_to_kill(runner_dir(top, name), [task_key(j) for j in killed])
        except (OSError, BackendError) as exc:
            errors.update({j.fqid: f"the pilot could not be asked: {exc}" for j in killed})
    if cancel:
        try:
            submission.retry(
                lambda: SCHEDULER.cancel(sorted(cancel), timeout=settings.command_timeout),
                settings,
            )
        except SlurmCommandError as exc:
            for killed in cancel.values():
                errors.update({j.fqid: f"scancel: {exc.message}" for j in killed})
    return errors


def _whole(jobs: Sequence[Job], name: str) -> bool:
    """Whether ``jobs`` are all the unfinished (sub)jobs the pilot ``name`` runs."""
    master = jobs[0].master
    if master is None:
        return True
    targeted = {id(job) for job in jobs}
    for sj in master.iter_subjobs():
        if id(sj) in targeted or not Status.parse(sj.status).active:
            continue
        if sj.backend.pilot_run == name:
            return False
    return True


def _ask_runner_to_kill(directory: str, keys: list[str]) -> None:
    """A kill request in the runner's queue. It may run on another machine: it reads its
    queue every ``SCAN_SECONDS``; on this one it is woken at once."""
    protocol = _protocol()
    queue = os.path.join(directory, protocol.QUEUE_DIR)
    name = f"{time.time_ns():020d}-{os.getpid()}-{next(_sequence)}{protocol.KILL_SUFFIX}"
    protocol.write_atomic(
        Path(queue), name, protocol.dumps({"format": protocol.FORMAT_VERSION, "keys": keys})
    )
    _wake(directory, protocol.PID_NAME, protocol.RUNNER_MODULES)


def _wake(directory: str, pid_name: str, modules: Sequence[str]) -> None:
    """SIGUSR1 to the pilot's runner if it runs on this machine (its pid file names this
    host and a process whose command line is the runner's on ``directory``); else
    nothing."""
    record = read_record(Path(directory) / pid_name)
    if record is None or not record.here:
        return
    pid = record.pid
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = [os.fsdecode(a) for a in f.read().split(b"\0")]
    except (OSError, ValueError):
        return
    ours = any(m in args for m in modules)
    if ours and os.path.realpath(directory) in {os.path.realpath(a) for a in args}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGUSR1)


# -- poll ------------------------------------------------------------------------------


def poll(
    ctx: PollContext, poller: PilotPoller, refs: Sequence[ActiveRef], settings: SlurmSection
) -> tuple[list[StatusReport], int]:
    """Reports for the followed pilot (sub)jobs, and how many of ``refs`` are those."""
    followed = poller.followed
    followed.follow(refs)
    runs, members = followed.runs, followed.members
    if not runs:
        return [], 0
    journals = _journals()
    # The pilots' state first, the journals after: an event written before a pilot ended
    # is read in the same cycle that concludes what it left.
    ended = _ended_pilots(poller, members, followed.ids, settings)
    reports, offsets, pending = journals.read_journals(
        ctx.workspace, JOURNAL, followed.masters, runs, poller.offsets.value, poller.pending.value
    )
    poller.offsets.stage(offsets)
    poller.pending.stage(pending)
    if ended:
        final = {r.fqid for r in reports if r.status.final}
        for (job_id, _name), (slurm_id, why) in ended.items():
            for fqid in sorted(members.get((job_id, _name), ())):
                if fqid not in final:
                    reports.append(_leftover(ctx, fqid, slurm_id, why))
    return reports, len(runs)


def _ended_pilots(
    poller: PilotPoller,
    members: Mapping[tuple[int, str], set[str]],
    ids: Mapping[tuple[int, str], str],
    settings: SlurmSection,
) -> dict[tuple[int, str], tuple[str, str]]:
    """The followed pilots whose Slurm job has ended: key -> (Slurm id, what ended it).
    Slurm is asked at most once per ``poll_interval``: squeue, then sacct for the pilots
    squeue no longer lists or shows ended; a pilot neither lists is taken as ended only
    after ``vanish_seconds``."""
    now = time.monotonic()
    last = poller.polled_at.value
    if last is not None and now - last < settings.poll_interval:
        return {}
    poller.polled_at.stage(now)
    wanted = {ids[key] for key in members if key in ids}
    if not wanted:
        return {}
    try:
        queue = SCHEDULER.query(sorted(wanted), timeout=settings.command_timeout)
    except SlurmCommandError as exc:
        raise BackendError(f"squeue: {exc.message}", transient=exc.transient) from None
    done: dict[str, str] = {}
    ask: list[str] = []
    for slurm_id in wanted:
        row = queue.get(slurm_id)
        seen = row.observation if row is not None else None
        if seen is not None and seen.status in ("submitted", "running", "completing"):
            continue
        if seen is not None:
            done[slurm_id] = seen.reason
        else:
            ask.append(slurm_id)
    missing = dict(poller.missing.value)
    if ask:
        try:
            history = SCHEDULER.history(sorted(ask), timeout=settings.command_timeout)
        except SlurmCommandError:
            history = {}  # asked again next time
        for slurm_id in ask:
            row = history.get(slurm_id)
            seen = row.observation if row is not None else None
            if seen is not None and seen.status in ("completed", "failed", "killed"):
                done[slurm_id] = seen.reason
            elif seen is None:
                since = missing.setdefault(slurm_id, now)
                if now - since >= settings.vanish_seconds:
                    done[slurm_id] = "Slurm no longer lists it"
    poller.missing.stage({k: v for k, v in missing.items() if k not in done})
    return {key: (ids[key], done[ids[key]]) for key in members if ids.get(key) in done}


def _leftover(ctx: PollContext, fqid: str, slurm_id: str, why: str) -> StatusReport:
    """What became of a subjob its pilot left unfinished, from its ``__run__`` record."""
    job_id, _, sub = fqid.partition(".")
    parts = [str(ctx.workspace), job_id, *([sub] if sub else []), "output", "__run__"]
    try:
        with open(os.path.join(*parts), "rb") as f:
            record = json.loads(f.read() or b"{}")
    except (OSError, ValueError):
        record = {}
    now = time.time()
    state = record.get("state") if isinstance(record, dict) else None
    states = _journals().STATES
    if isinstance(state, str) and state in states:  # ended; its journal line was lost
        return StatusReport(
            fqid,
            states[state],
            float(record.get("end") or now),
            reason=str(record.get("reason") or ""),
            exit_code=record.get("exit_code"),
            started_at=record.get("start"),
        )
    ended = f"the pilot (Slurm job {slurm_id}) ended" + (f" ({why})" if why else "")
    if isinstance(record, dict) and record.get("pid") is not None:
        return StatusReport(fqid, Status.FAILED, now, reason=f"{ended} while it ran")
    return StatusReport(
        fqid,
        Status.KILLED,
        now,
        reason=f"not run: {ended} before its turn; resubmit() runs it in a new pilot",
        started=False,
    )
