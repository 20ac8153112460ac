"""The runner's journals read as status reports: by the Local backend, and by a Slurm
pilot, which runs the same runner inside an allocation and keeps its journals beside the
job's workspace.

Each task key is ``<fqid>@<submit count>``: an event reports the run the monitor follows,
or is kept a while for a run whose submission is still being recorded, or is stale.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from ganga_like.errors import BackendError
from ganga_like.model.interfaces import StatusReport
from ganga_like.model.status import Status
from ganga_like_runner.protocol import Event, read_events

__all__ = ["PENDING_EVENT_SECONDS", "STATES", "Pending", "read_journals"]

# Events for a task the monitor does not follow yet (its submission is being recorded) are
# kept this long before being dropped as belonging to a finished run.
PENDING_EVENT_SECONDS = 60.0

# A journal event (or a run record's state) and the status it reports.
STATES: Final[Mapping[str, Status]] = {
    "started": Status.RUNNING,
    "completed": Status.COMPLETED,
    "failed": Status.FAILED,
    "killed": Status.KILLED,
}

# Per master id: the events kept for runs not followed yet, with when they were first seen.
Pending = dict[int, list[tuple[float, Event]]]


def read_journals(
    workspace: Path,
    journal: str,
    masters: Iterable[int],
    runs: Mapping[str, int],
    offsets: Mapping[int, int],
    pending: Mapping[int, list[tuple[float, Event]]],
) -> tuple[list[StatusReport], dict[int, int], Pending]:
    """The reports in the new lines of each master's journal (``workspace/<id>/journal``)
    and in the events kept from earlier cycles; the offsets and kept events to stage for
    the next cycle."""
    new_offsets = dict(offsets)
    new_pending: Pending = {}
    now = time.monotonic()
    reports: list[StatusReport] = []
    for job_id in sorted(masters):
        path = workspace / str(job_id) / journal
        try:
            events, offset = read_events(path, offsets.get(job_id, 0))
        except OSError as exc:
            raise BackendError(f"cannot read {path}: {exc}", transient=True) from exc
        new_offsets[job_id] = offset
        keep = []
        for seen, event in [*pending.get(job_id, []), *((now, e) for e in events)]:
            found = _report(event, runs)
            if found is not None:
                reports.append(found)
            elif now - seen < PENDING_EVENT_SECONDS and _may_become_active(event, runs):
                keep.append((seen, event))
        if keep:
            new_pending[job_id] = keep
    return reports, new_offsets, new_pending


def _split_key(key: str) -> tuple[str, int]:
    fqid, _, run = key.partition("@")
    return fqid, int(run or 0)


def _report(event: Event, runs: Mapping[str, int]) -> StatusReport | None:
    """What ``event`` reports of the run followed (``runs``: fqid -> submit count); None
    for another run, or an event that reports no status."""
    fqid, run = _split_key(event.key)
    if runs.get(fqid) != run:
        return None
    status = STATES.get(event.event)
    if status is None:
        return None
    return StatusReport(
        fqid=fqid,
        status=status,
        time=event.time,
        reason=event.reason or "",
        exit_code=event.exit_code,
        started=event.exit_code is not None or status is Status.RUNNING,
        started_at=event.start,
        usage=event.usage,
    )


def _may_become_active(event: Event, runs: Mapping[str, int]) -> bool:
    fqid, run = _split_key(event.key)
    current = runs.get(fqid)
    return current is None or run > current
