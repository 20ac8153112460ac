"""Throttles: at most N (sub)jobs of a workflow submitted or running at once.

A throttle is set on a workflow's name (``throttle("higgs", 50)``) and stored in the
repository's ``workflow_throttles`` table; a job belongs to a workflow by its ``workflow``
attribute. submit() of a job of a throttled workflow hands nothing to its backend: its
subjobs (or, unsplit, the job itself) are held ``waiting``, and the job is listed in the
workflow's row of ``workflow_members``. After each cycle the monitor holding the lease (a
session's or the daemon's: only one, so two monitors never fill the same room) counts
each throttled workflow's active (sub)jobs from its members' status counters (never
reading a subjob) and hands over as many held ones as the cap leaves room for, the oldest
job first and its subjobs in order. A hand-over is a submission of those subjobs, its
intent and outcome recorded as any resubmission's, so a monitor killed in between leaves
them to the submission's recovery, never submitted twice; what was not yet handed over is
still held, for the next monitor.

A resubmission (by hand or by a ``Retry``) is not held: it may take the workflow over its
cap until those (sub)jobs end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.repository.registry import Registry
from ganga_like.repository.trees import IdSet, KeyMap

__all__ = [
    "ACTIVE",
    "LIMITS_KEY",
    "MEMBERS_KEY",
    "Member",
    "handovers",
    "hold",
    "limit_of",
    "member_of",
    "members",
    "set_limit",
]

LIMITS_KEY = "workflow_throttles"
MEMBERS_KEY = "workflow_members"
# What a throttle counts: (sub)jobs handed to their backend and not ended yet.
ACTIVE = frozenset({Status.SUBMITTING, Status.SUBMITTED, Status.RUNNING, Status.COMPLETING})


def _table(root: Any, key: str, create: bool = False) -> KeyMap | None:
    found: KeyMap | None = root.get(key)
    if found is None and create:
        found = root[key] = KeyMap()
    return found


def limit_of(root: Any, workflow: str) -> int | None:
    """The cap of ``workflow``; None when it has none (or the job belongs to none)."""
    table = _table(root, LIMITS_KEY)
    if not workflow or table is None:
        return None
    found = table.get(workflow)
    return None if found is None else int(found)


def set_limit(root: Any, workflow: str, limit: int | None) -> None:
    """Set (or, None, lift) the cap of ``workflow``, in the caller's transaction."""
    table = _table(root, LIMITS_KEY, create=limit is not None)
    if limit is not None:
        assert table is not None
        table[workflow] = limit
    elif table is not None:
        table.pop(workflow, None)


def hold(registry: Registry, job: Job, cause: str) -> None:
    """``job`` (unsplit, new or waiting) is held for room, in the caller's transaction."""
    limit = limit_of(registry.root, job.workflow)
    held = f"{cause}; held: workflow {job.workflow!r} runs at most {limit} at once"
    if job.current_status() is Status.WAITING:
        job.log_event(held)
    else:
        job.change_status(Status.WAITING, held)
    job._held = True
    join(registry.root, job)
    registry.reindex(job)


def join(root: Any, job: Job) -> None:
    """``job`` is counted, and its held (sub)jobs handed over, with its workflow's."""
    table = _table(root, MEMBERS_KEY, create=True)
    assert table is not None
    ids = table.get(job.workflow)
    if ids is None:
        ids = table[job.workflow] = IdSet()
    ids.insert(job.id)


# -- what the monitor's pass (throttle_pass.py) counts and decides -------------------------


@dataclass(frozen=True)
class Member:
    """A job of a throttled workflow: how many of its (sub)jobs are active and held."""

    job_id: int
    active: int
    held: int


def active_and_held(counts: Mapping[Status, int]) -> tuple[int, int]:
    """(active, held) of a master, from its subjob counts."""
    return sum(n for s, n in counts.items() if s in ACTIVE), counts.get(Status.WAITING, 0)


def member_of(job: Job) -> Member:
    """What ``job`` counts for in its workflow: from its status counter (a master, O(1))
    or its own status."""
    if job.is_master:
        return Member(job.id, *active_and_held(job.counts()))
    status = job.current_status()
    held = status is Status.WAITING and job._held
    return Member(job.id, int(status in ACTIVE), int(held))


def handovers(limit: int, members: Sequence[Member]) -> list[tuple[int, int]]:
    """(job id, how many of its held (sub)jobs to hand over) so that no more than
    ``limit`` are active: the oldest job first, while there is room."""
    room = limit - sum(m.active for m in members)
    chosen: list[tuple[int, int]] = []
    for member in sorted(members, key=lambda m: m.job_id):
        if room <= 0:
            break
        taken = min(room, member.held)
        if taken:
            chosen.append((member.job_id, taken))
            room -= taken
    return chosen


def members(registry: Registry, workflow: str, ids: IdSet) -> list[Member]:
    """The members of ``workflow`` as they are now; the ended and removed ones leave."""
    found: list[Member] = []
    for job_id in list(ids):
        job = registry.get(job_id)
        if not isinstance(job, Job) or job.workflow != workflow:
            ids.remove(job_id)
            continue
        member = member_of(job)
        if not member.active and not member.held and job.current_status().final:
            ids.remove(job_id)
            continue
        found.append(member)
    return found
