"""In words: why a job was skipped (the chain to the root failure), or what it waits for."""

from __future__ import annotations

from ganga_like.model.dependencies import fqid_parts
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.repository.registry import Registry
from ganga_like.runtime.workflow import engine
from ganga_like.runtime.workflow.condition import Verdict

__all__ = ["dependency_line", "explain", "waits_for"]

_SPOILT = ("failed", "killed", "failed_frozen")
# How many of a master's failed subjobs `why` names (the rest are counted).
_NAMED = 5


def explain(registry: Registry, job: Job, monitored: bool | None = None) -> str:
    """The chain from ``job`` to the root failure (a skipped job), or what it waits for
    (a waiting one): one line per job on the way. ``monitored``: whether a monitor holds
    the lease (None: not known), said when the waiting job waits for one."""
    lines: list[str] = []
    current: Job | None = job
    seen: set[str] = set()
    while current is not None and current.fqid not in seen:
        seen.add(current.fqid)
        status = current.current_status()
        if status is Status.SKIPPED and current._skipped_by is not None:
            by = current._skipped_by[0]
            lines.append(f"{current.fqid} skipped: it waited for {by} to be {current.when}")
            job_id, sub = fqid_parts(by)
            current = registry.lookup(job_id, sub)
            if current is not None and current.is_master:
                lines.append(f"{by} {current.current_status().label}")
                current = engine.first_spoilt(current)
            continue
        if status is Status.WAITING:
            waits = _waits_for(registry, current, monitored)
            lines.append(f"{current.fqid} waiting: {waits}")
            break
        if current.is_master and status.label in _SPOILT:
            lines.extend(_spoilt_master(current, status))
            break
        lines.append(_ended(current, status))
        break
    return "\n".join(lines)


def _ended(job: Job, status: Status) -> str:
    """``12 failed (exit 3): <the last line of its log>``."""
    code = f" (exit {job.exit_code})" if job.exit_code is not None else ""
    last = job.history[-1][3] if job.history else ""
    return f"{job.fqid} {status.label}{code}" + (f": {last}" if last else "")


def _spoilt_master(master: Job, status: Status) -> list[str]:
    """A failed (or killed) master: its subjobs that failed or were killed, the first few
    named with their exit codes and how many in all, then the first one's line as the
    root cause. Only those few subjobs are loaded (the rest are read from status chunks)."""
    labels = master.subjob_statuses()
    if labels is None:
        labels = [sj.status for sj in master.iter_subjobs()]
    spoilt = [i for i, label in enumerate(labels) if label in _SPOILT]
    named: list[str] = []
    first: Job | None = None
    for index_ in spoilt[:_NAMED]:
        sub = master.find_subjob(index_)
        if sub is None:
            continue
        first = first or sub
        said = Status.parse(sub.status).label
        if sub.exit_code is not None:  # "exit 3" says failed; "killed, exit -9" says more
            said = f"exit {sub.exit_code}" if said == "failed" else f"{said}, exit {sub.exit_code}"
        named.append(f"{sub.fqid} ({said})")
    more = f", and {len(spoilt) - len(named)} more" if len(spoilt) > len(named) else ""
    summary = (
        f"{master.fqid} {status.label}: {len(spoilt)} of {len(labels)} subjobs failed or "
        f"were killed: {', '.join(named)}{more}"
    )
    if first is None:
        return [summary]
    return [summary, _ended(first, Status.parse(first.status))]


def _waits_for(registry: Registry, job: Job, monitored: bool | None = None) -> str:
    """What a waiting job waits for and how far each upstream is; when its condition is
    already decided, that a monitor is to act on it (and whether one runs)."""
    parts = []
    for fqid in job.after:
        counts = engine.upstream_tally(registry, fqid)
        if counts is None:
            parts.append(f"{fqid} (removed)")
        else:
            parts.append(
                f"{fqid} ({counts.done} done, {counts.spoilt} failed, {counts.pending} to go)"
            )
    said = f"for {', '.join(parts)} to be {job.when}"
    if job._held:
        return said  # its condition held: it waits for room in its workflow
    decided, reason = engine.condition_of(registry, job)
    if decided is Verdict.WAIT:
        return said
    # Decided, not acted on yet: only a monitor's cycle submits or skips a waiting job.
    if decided is Verdict.GO:
        said += f"; that holds ({reason}): a monitor is to submit it"
    else:
        said += f"; that can no longer hold ({reason}): a monitor is to skip it"
    if monitored is False:
        said += ", and none is running (a session or `ganga monitor start` runs one)"
    return said


def waits_for(registry: Registry, job: Job) -> str:
    """What a job waits for, in words; empty when it waits for nothing."""
    return _waits_for(registry, job) if job.after else ""


def dependency_line(job: Job) -> str | None:
    """What a job's views show of what it waits for: the jobs and the condition, and how
    far they are (waiting) or the root failure (skipped); None for a job waiting for
    nothing."""
    if not job.after:
        return None
    allowed = f", allow_failed={job.allow_failed}" if job.allow_failed else ""
    line = f"{', '.join(job.after)} ({job.when}{allowed})"
    status = job.current_status()
    jar = getattr(job, "_p_jar", None)
    if status is Status.WAITING and jar is not None:
        return f"{line}; waiting {_waits_for(Registry(jar.root()), job)}"
    if status is Status.SKIPPED and job._skipped_by is not None:
        return f"{line}; skipped: {job._skipped_by[1]}"
    return line
