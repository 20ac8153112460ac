"""One monitoring cycle for every active Slurm (sub)job: one squeue, at most one sacct.

squeue knows queued, running and recently finished jobs; sacct (the accounting
database) knows exit codes and jobs squeue has forgotten, but trails squeue by a few
seconds.  So a job squeue shows as finished is reported once sacct confirms it, with
its exit code; a job neither lists is only concluded gone after it stayed missing for
a while (a pending array element cancelled by hand vanishes from both: it was killed).

Only changes are reported: what was last reported is kept in the poll memory, which
the monitor keeps only once the cycle's commit succeeded.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ganga_like.errors import BackendError
from ganga_like.model.interfaces import ActiveRef, PollContext, StatusReport
from ganga_like.model.status import Status

from . import commands
from .commands import SacctRow, SlurmCommandError, SqueueRow
from .settings import SlurmSettings
from .states import Observation, UnknownStateError, classify
from .submission import MISSING_OUTPUT_FILE

__all__ = ["MAX_QUERY_CHARS", "poll", "query_ids"]

log = logging.getLogger("ganga_like.slurm")

# Linux refuses a single argument longer than 128 KiB (MAX_ARG_STRLEN): a longer id list
# is split over several calls.  Ids of arrays, not of elements, are asked for, so this
# only happens with many thousands of separately submitted jobs.
MAX_QUERY_CHARS = 100_000

_FINAL = frozenset({"completed", "failed", "killed"})
_ID_RE = re.compile(r"^\d+(?:_\d+)?$")


@dataclass(frozen=True)
class _Seen:
    """What the memory keeps about one Slurm id between cycles."""

    reported: str | None = None  # the status last reported
    final_since: float | None = None  # squeue said finished, sacct not yet
    missing_since: float | None = None  # listed by neither command
    missing_cycles: int = 0


def query_ids(slurm_ids: Iterable[str]) -> list[list[str]]:
    """The ids to ask about (an array's id covers all its elements), in batches that
    fit one command line."""
    bases = sorted({sid.split("_", 1)[0] for sid in slurm_ids}, key=int)
    batches: list[list[str]] = []
    size = MAX_QUERY_CHARS + 1
    for base in bases:
        if size + len(base) + 1 > MAX_QUERY_CHARS:
            batches.append([])
            size = 0
        batches[-1].append(base)
        size += len(base) + 1
    return batches


def _query(command: Callable[..., Mapping[str, Any]], ids: Iterable[str],
           timeout: float) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for batch in query_ids(ids):
        rows.update(command(batch, timeout=timeout))
    return rows


def _timestamp(text: str | None, default: float) -> float:
    if text is None:
        return default
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return default


def _observe(row: SqueueRow | SacctRow) -> Observation | None:
    exit_code = row.exit_code if isinstance(row, SacctRow) else None
    state = row.raw_state if isinstance(row, SacctRow) else row.state
    try:
        return classify(state, row.reason, exit_code)
    except UnknownStateError as exc:
        log.warning("%s: %s; its status is left as it is", row.job_id, exc)
        return None


def poll(ctx: PollContext, refs: Sequence[ActiveRef]) -> list[StatusReport]:
    """Reports for the (sub)jobs of ``refs`` whose status changed since the last cycle."""
    settings = SlurmSettings.from_mapping(ctx.settings)
    previous: dict[str, _Seen] = ctx.memory.get("seen", {})
    sacct_off: str | None = ctx.memory.get("sacct_off")
    now, wall = time.monotonic(), time.time()

    last = ctx.memory.get("polled_at")
    if last is not None and now - last < settings.poll_interval:
        return []  # too soon: a busy controller serves many users
    ctx.staged["polled_at"] = now

    tracked: dict[str, ActiveRef] = {}
    for ref in refs:
        slurm_id = str(ref.backend_data.get("id") or "")
        if _ID_RE.match(slurm_id):
            tracked[slurm_id] = ref
        else:  # one bad record must not stop the monitoring of all the others
            log.warning("%s: no usable Slurm id (%r); its status is left as it is",
                        ref.fqid, slurm_id)
    if not tracked:
        return []

    try:
        queue: dict[str, SqueueRow] = _query(commands.squeue, tracked, settings.command_timeout)
    except SlurmCommandError as exc:
        raise BackendError(f"squeue: {exc.message}", transient=exc.transient) from None

    seen: dict[str, _Seen] = {}
    reports: list[StatusReport] = []
    squeue_final: dict[str, Observation] = {}
    ask_sacct: list[str] = []

    def report(slurm_id: str, observation: Observation, when: float, started: bool) -> None:
        ref = tracked[slurm_id]
        if observation.status == "failed" and observation.exit_code == 1:
            observation = _missing_output(ctx, ref, observation)
        if previous.get(slurm_id, _Seen()).reported != observation.status:
            # "running: running" says nothing; "failed: walltime exceeded" does.
            reason = "" if observation.reason == observation.status else observation.reason
            reports.append(StatusReport(
                fqid=ref.fqid, status=Status.parse(observation.status), time=when,
                reason=reason, exit_code=observation.exit_code, started=started))
        seen[slurm_id] = _Seen(reported=observation.status)

    for slurm_id in tracked:
        row = queue.get(slurm_id)
        observation = _observe(row) if row is not None else None
        if row is not None and observation is None:  # unknown state: keep as it is
            seen[slurm_id] = previous.get(slurm_id, _Seen())
        elif observation is not None and observation.status not in _FINAL:
            report(slurm_id, observation, wall, True)
        else:
            if observation is not None:
                squeue_final[slurm_id] = observation
            ask_sacct.append(slurm_id)

    accounting: dict[str, SacctRow] | None = None
    if ask_sacct and sacct_off is None:
        try:
            accounting = _query(commands.sacct, ask_sacct, settings.command_timeout)
        except SlurmCommandError as exc:
            if "accounting storage is disabled" in exc.message:
                sacct_off = exc.message
                ctx.staged["sacct_off"] = sacct_off
                log.info("sacct is not available (%s): exit codes are not known", exc.message)
            else:
                log.warning("sacct failed (%s); finished jobs are confirmed later", exc)

    for slurm_id in ask_sacct:
        before = previous.get(slurm_id, _Seen())
        record = accounting.get(slurm_id) if accounting is not None else None
        confirmed = _observe(record) if record is not None else None
        if record is not None and confirmed is not None and confirmed.status in _FINAL:
            report(slurm_id, confirmed, _timestamp(record.end, wall), record.start is not None)
            continue
        in_queue = squeue_final.get(slurm_id)
        if in_queue is not None:
            # Finished in squeue, not (yet) in sacct: wait for the exit code a while.
            since = before.final_since if before.final_since is not None else now
            if sacct_off is not None or now - since >= settings.final_grace_seconds:
                if in_queue.status == "completed":
                    in_queue = Observation("completed", in_queue.reason, 0)
                started = not (in_queue.status == "killed" and before.reported == "submitted")
                report(slurm_id, in_queue, wall, started)
            else:
                seen[slurm_id] = _Seen(before.reported, final_since=since)
            continue
        if accounting is None and sacct_off is None:
            seen[slurm_id] = before  # sacct did not answer: nothing can be concluded
            continue
        first = before.missing_since if before.missing_since is not None else now
        cycles = before.missing_cycles + 1
        if now - first >= settings.vanish_seconds and cycles >= settings.vanish_cycles:
            report(slurm_id, _vanished(before.reported), wall, before.reported != "submitted")
        else:
            seen[slurm_id] = _Seen(before.reported, missing_since=first, missing_cycles=cycles)

    ctx.staged["seen"] = seen
    return reports


def _vanished(last_reported: str | None) -> Observation:
    if last_reported in ("running", "completing"):
        return Observation("failed", "lost: Slurm no longer lists it (neither squeue nor sacct)")
    # Only a pending array element cancelled with scancel disappears this way.
    return Observation("killed", "cancelled while pending: Slurm no longer lists it")


def _missing_output(ctx: PollContext, ref: ActiveRef, observation: Observation) -> Observation:
    """An element whose program succeeded but whose output pattern matched nothing
    exits 1 and leaves a note: report that, with the program's exit code 0."""
    parts = [str(ctx.workspace), str(ref.job_id)]
    if ref.subjob_id is not None:
        parts.append(str(ref.subjob_id))
    try:
        with open(os.path.join(*parts, "output", MISSING_OUTPUT_FILE), encoding="utf-8") as f:
            reason = f.read().strip()
    except OSError:
        return observation
    return Observation("failed", reason or observation.reason, 0)
