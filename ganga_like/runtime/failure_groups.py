"""Acting on one failure group of ``j.stats()``: resubmitting exactly its (sub)jobs, with
more of what its cause ran out of, or killing those of them that run again.

A group is what the stats saw when they were taken. Before it is resubmitted its (sub)jobs
are read again: a group whose (sub)jobs are no longer the failures it saw (one was
resubmitted, even if it failed alike again, removed, or failed otherwise since) is stale
and refused, with nothing changed. A kill takes the group itself, never its number: the
numbers are counted again at each ``j.stats()`` and move once a group is resubmitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ganga_like.errors import GangaError, JobError
from ganga_like.model.interfaces import IBackend
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.runtime.stats.compute import failure_key, job_stats, status_changes
from ganga_like.runtime.stats.data import FailureGroup
from ganga_like.runtime.submission import actions
from ganga_like.runtime.submission.resubmit import backend_changes, run_again

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = [
    "GROWN_BY",
    "GROWS",
    "group_of",
    "kill_group",
    "kill_job_group",
    "planned_resubmission",
    "resubmit_group",
    "resubmit_job_group",
]

# What a group's cause ran out of, grown at its resubmission unless given...
GROWS: Mapping[str, str] = {"out_of_memory": "memory", "timeout": "walltime"}
# ...by this factor: twice what the (sub)jobs asked for.
GROWN_BY = 2.0


def group_of(stats_failures: tuple[FailureGroup, ...], number: Any, where: str) -> FailureGroup:
    """Group ``number`` (from 1, as ``ganga stats`` shows it) of a job's failure groups."""
    if isinstance(number, FailureGroup):
        return number
    if isinstance(number, bool) or not isinstance(number, int):
        raise JobError(f"{where}: group: expected a group number or a FailureGroup, not {number!r}")
    if not 1 <= number <= len(stats_failures):
        count = len(stats_failures)
        have = {0: "none", 1: "only group 1"}.get(count, f"groups 1 to {count}")
        raise JobError(f"{where}: no failure group {number}; it has {have}")
    return stats_failures[number - 1]


def resubmit_job_group(
    session: Session, job: Job, group: Any, backend: Any, more: Mapping[str, Any]
) -> bool:
    """``j.resubmit(group=N, memory=..., walltime=...)``: group N of ``j.stats()`` (or a
    FailureGroup of it), checked to be of ``job``."""
    where = f"job {job.fqid}: resubmit()"
    if group is None:
        raise JobError(f"{where}: memory= and walltime= go with group=N (a failure group)")
    if backend is not None:
        raise JobError(f"{where}: give backend= or group=, not both")
    if not isinstance(group, FailureGroup):
        session.refresh()
        group = group_of(job_stats([job], job.fqid).failures, group, where)
    return resubmit_group(session, group, more.get("memory"), more.get("walltime"), job)


def kill_job_group(session: Session, job: Job, group: Any) -> bool:
    """``j.kill(group=g)``: those of the FailureGroup ``g`` (checked to be of ``job``) that
    run again. Never by number: numbers are counted again at each ``j.stats()``, and a
    resubmitted group leaves them, so after ``j.resubmit(group=1)`` "group 1" is another."""
    where = f"job {job.fqid}: kill()"
    if not isinstance(group, FailureGroup):
        raise JobError(
            f"{where}: group= takes the group you resubmitted, not a number ({group!r}; "
            "numbers move once a group is resubmitted): g = j.stats().failures[0]; "
            "j.resubmit(group=g); j.kill(group=g)"
        )
    _check_of(session, job, group)
    return kill_group(session, group, job)


def _check_of(session: Session, job: Job, group: FailureGroup) -> None:
    """JobError unless every (sub)job of ``group`` is ``job`` or one of its subjobs."""
    top = job.master or job
    for fqid in group.fqids:
        owner = fqid.partition(".")[0]
        if owner != str(top.id) or (job.master is not None and fqid != job.fqid):
            raise JobError(
                f"job {job.fqid}: {_name(group)} is not of this job ({fqid} is of job "
                f"{owner}); nothing done"
            )


def _name(group: FailureGroup) -> str:
    number = f" {group.number}" if group.number else ""
    return f"failure group{number} ({group.reason})"


def _members(session: Session, group: FailureGroup, where: str) -> list[Job]:
    """The group's (sub)jobs as they are now, each one checked to still be there."""
    registry = session.registry()
    members: list[Job] = []
    for fqid in group.fqids:
        top, _, sub = fqid.partition(".")
        job = registry.lookup(int(top), int(sub) if sub else None)
        if job is None:
            raise JobError(
                f"{where}: {_name(group)} is stale: {fqid} no longer exists; "
                "take j.stats() again (nothing done)"
            )
        members.append(job)
    return members


def _by_master(members: list[Job]) -> dict[int, tuple[Job, list[Job]]]:
    grouped: dict[int, tuple[Job, list[Job]]] = {}
    for job in members:
        top = job.master or job
        grouped.setdefault(top.id, (top, []))[1].append(job)
    return grouped


def resubmit_group(
    session: Session,
    group: FailureGroup,
    memory: Any = None,
    walltime: Any = None,
    job: Job | None = None,
) -> bool:
    """Resubmit exactly ``group``'s (sub)jobs (of ``job``, when given). After
    out_of_memory their memory is doubled, after timeout their walltime, unless
    ``memory`` / ``walltime`` give the value; either may also be given for any cause."""
    grouped, changes = planned_resubmission(session, group, memory, walltime, job)
    for top_id, (top, targets) in grouped.items():
        run_again(session, top, targets, True, "resubmit", changes[top_id], master_too=False)
    return True


Plan = tuple[dict[int, tuple[Job, list[Job]]], dict[int, dict[str, Any]]]


def planned_resubmission(
    session: Session,
    group: FailureGroup,
    memory: Any = None,
    walltime: Any = None,
    job: Job | None = None,
) -> Plan:
    """What ``resubmit_group`` would do, nothing changed: the group's (sub)jobs by master
    and each master's backend changes. A JobError when it would be refused (a stale group,
    a group of another job, a resource the backend has not, a bad value), so that a
    command can refuse before it asks for a confirmation."""
    where = f"job {job.fqid}: resubmit()" if job is not None else "resubmit(group=...)"
    if not isinstance(group, FailureGroup):
        raise JobError(f"{where}: expected a FailureGroup of j.stats().failures, not {group!r}")
    session.refresh()
    members = _members(session, group, where)
    if job is not None:
        _check_of(session, job, group)
    for member, now in zip(members, _since(group, members), strict=True):
        if now:
            raise JobError(
                f"{where}: {_name(group)} is stale: {member.fqid} {now} since; take "
                "j.stats() again (nothing done)"
            )
    grouped = _by_master(members)
    changes = {
        top_id: _grown(top, targets, group.cause, memory, walltime)
        for top_id, (top, targets) in grouped.items()
    }
    return grouped, changes


def _since(group: FailureGroup, members: list[Job]) -> list[str]:
    """For each member, what became of it since the group's stats were taken ("" for
    nothing): a member that ran again is no longer the group's failure, even once it
    failed alike again."""
    changes: tuple[int | None, ...] = group.changes or (None,) * len(members)
    since: list[str] = []
    for member, then in zip(members, changes, strict=True):
        status = member.current_status()
        if status is not Status.FAILED:
            since.append(f"is {status}")
        elif failure_key(member) != (group.exit_code, group.reason):
            since.append("failed otherwise")
        elif then is not None and status_changes(member.history) != then:
            since.append("ran and failed again")
        else:
            since.append("")
    return since


def _grown(top: Job, targets: list[Job], cause: str, memory: Any, walltime: Any) -> dict[str, Any]:
    """The backend changes the group's resubmission makes: the values given, and twice
    the largest the targets asked for of what its cause ran out of."""
    given = {name: value for name, value in (("memory", memory), ("walltime", walltime))}
    given = {name: value for name, value in given.items() if value is not None}
    grow = GROWS.get(cause)
    if not given and grow is None:
        return {}
    largest = max(targets, key=lambda t: _asked(t.backend, grow) if grow else 0)
    backend = largest.backend
    assert isinstance(backend, IBackend)
    kind = type(backend).__name__
    for name in given.keys() | ({grow} if grow else set()):
        if name not in type(backend).growable:
            raise JobError(
                f"job {top.fqid}: its {kind} backend has no {name} to give (nothing done)"
            )
    new = backend._copy()
    assert isinstance(new, IBackend)
    try:
        new.set_resources(given)
    except GangaError as exc:
        raise JobError(f"resubmit(group=...): {exc} (nothing done)") from None
    if grow is not None and grow not in given and not new.grow({grow: GROWN_BY}):
        raise JobError(
            f"job {top.fqid}: {cause}, but its {kind} backend asks for no {grow} to double; "
            f"give {grow}=... (nothing done)"
        )
    return backend_changes(largest, new)


def _asked(backend: Any, name: str) -> float:
    asked = backend.requested() if isinstance(backend, IBackend) else {}
    return float(asked.get(name) or 0)


def kill_group(session: Session, group: FailureGroup, job: Job | None = None) -> bool:
    """Kill those of ``group``'s (sub)jobs (of ``job``, when given) that run again
    (resubmitted since)."""
    where = f"job {job.fqid}: kill()" if job is not None else "kill(group=...)"
    if not isinstance(group, FailureGroup):
        raise JobError(f"{where}: expected a FailureGroup of j.stats().failures, not {group!r}")
    session.refresh()
    active = [m for m in _members(session, group, where) if not m.current_status().final]
    if not active:
        raise JobError(f"{where}: none of {_name(group)} runs again; nothing to kill")
    for member in active:
        actions.kill(session, member, True)
    return True
