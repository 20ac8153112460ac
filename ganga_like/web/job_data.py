"""What each of the server's JSON answers holds, read from an open session.

Each function is handed the session by the reader (``reader``), in the one thread that
uses the repository, after a fresh transaction: it sees every commit made before it.
Nothing here changes a job but ``kill`` and ``resubmit``, which the GPI's own actions do.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ganga_like.errors import JobError
from ganga_like.gpi import workflow
from ganga_like.gpi.job_table import job_row
from ganga_like.model.job import Job
from ganga_like.runtime.plots import figures
from ganga_like.runtime.session import Session
from ganga_like.runtime.stats import job_stats
from ganga_like.runtime.stats.compute import failure_reason
from ganga_like.runtime.stats.grid import subjob_grid as cells
from ganga_like.runtime.submission import actions
from ganga_like.runtime.workflow import engine
from ganga_like.web.grid_bytes import grid_payload

__all__ = [
    "TAIL_BYTES",
    "TAIL_LINES",
    "check",
    "find",
    "job_summary",
    "jobs_table",
    "kill",
    "resubmit",
    "subjob_detail",
    "subjob_grid",
    "subjob_output",
]

# What a peek at a subjob's output shows: its last lines, read from its end.
TAIL_LINES = 40
TAIL_BYTES = 64 * 1024


def find(session: Session, job_id: int, sub: int | None = None) -> Job:
    """The job or subjob; a JobError (a 404) when there is none."""
    found = session.registry().lookup(job_id, sub)
    if not isinstance(found, Job):
        fqid = f"{job_id}" if sub is None else f"{job_id}.{sub}"
        raise JobError(f"no job {fqid}")
    return found


def check(session: Session, job_id: int, sub: int | None = None) -> None:
    """Nothing when the job or subjob is there; a JobError (a 404) when it is not."""
    find(session, job_id, sub)


def jobs_table(session: Session) -> list[dict[str, Any]]:
    """Every job's row of ``ganga jobs``, with its id and subjob counts: read from each
    job and its master's counter, no subjob loaded."""
    rows = []
    for job in session.registry().jobs.values():
        row: dict[str, Any] = job_row(job)
        if isinstance(job, Job):
            row["id"] = job.id
            row["counts"] = {status.label: n for status, n in job.counts().items() if n}
        rows.append(row)
    return rows


def job_summary(session: Session, job_id: int) -> dict[str, Any]:
    """A job's row, stats (``j.stats()``) and figures (Plotly's JSON); the resources used
    summed but not listed per subjob (100,000 of them are the grid's to show), and the
    grid drawn by the page itself (a canvas that names the cell under the pointer)."""
    job = find(session, job_id)
    stats = job_stats([job], f"job {job.fqid}")
    plain = stats.to_dict()
    per_subjob = plain["resources"].pop("per_subjob", [])
    plain["resources"]["listed"] = len(per_subjob)
    row: dict[str, Any] = job_row(job)
    shown = [
        json.loads(make(stats).to_json())
        for make in (figures.status_over_time, figures.run_time_histogram, figures.failure_groups)
    ]
    # The jobs waiting for it: a kill asks what becomes of them.
    waiting = engine.waiting_dependents(session.registry(), job)
    return {"id": job.id, "row": row, "stats": plain, "figures": shown, "dependents": waiting}


def subjob_grid(session: Session, job_id: int) -> dict[str, Any]:
    """Every subjob's status for the grid, from the master's status column (no subjob is
    loaded); a job without subjobs is a grid of one cell, itself."""
    job = find(session, job_id)
    return grid_payload(job.id, cells([job]).labels, single=not job.is_master)


def subjob_detail(session: Session, job_id: int, sub: int | None) -> dict[str, Any]:
    """What hovering a cell shows: the (sub)job's status, exit code and, when it failed,
    the cause (the last line of what its backend said)."""
    job = find(session, job_id, sub)
    status = job.current_status().label  # a master's: derived from its subjobs
    cause = None
    if status in ("failed", "failed_frozen"):
        said = next((c for _w, _o, new, c in reversed(job.history) if new == "failed"), "")
        cause = failure_reason(said)
    return {"fqid": job.fqid, "status": status, "exit_code": job.exit_code, "cause": cause}


def subjob_output(session: Session, job_id: int, sub: int | None) -> dict[str, Any]:
    """The last lines of the (sub)job's stdout and stderr, as far as they were written."""
    job = find(session, job_id, sub)
    output = Path(session.submit_context().paths(job).output)
    return {
        "fqid": job.fqid,
        "stdout": _tail(output / "stdout"),
        "stderr": _tail(output / "stderr"),
    }


def _tail(path: Path) -> list[str] | None:
    """The last ``TAIL_LINES`` lines of ``path``, reading at most ``TAIL_BYTES`` from its
    end; None when there is no such file."""
    try:
        with path.open("rb") as stream:
            size = stream.seek(0, os.SEEK_END)
            stream.seek(max(0, size - TAIL_BYTES))
            data = stream.read(TAIL_BYTES)
    except OSError:
        return None
    lines = data.decode(errors="replace").splitlines()
    if len(data) == TAIL_BYTES and size > TAIL_BYTES:
        lines = lines[1:]  # the first one is cut
    return lines[-TAIL_LINES:]


def kill(session: Session, job_id: int, sub: int | None, options: Mapping[str, Any]) -> str:
    """Kill the (sub)job; ``options["dependents"]`` ("skip" or "keep") says what becomes
    of the jobs that wait for it (without it, a kill of a job others wait for is refused)."""
    job = find(session, job_id, sub)
    done = workflow.kill(
        session,
        job,
        True,
        options.get("dependents"),
        'choose "skip" or "keep" (the body\'s "dependents")',
    )
    session.poke_monitor()
    return f"job {job.fqid} killed" if done is not False else f"job {job.fqid}: nothing done"


def resubmit(session: Session, job_id: int, sub: int | None, options: Mapping[str, Any]) -> str:
    """Resubmit the (sub)job (``options``: none so far)."""
    job = find(session, job_id, sub)
    done = actions.resubmit(session, job, keep_going=True)
    session.poke_monitor()
    return f"job {job.fqid} resubmitted" if done else f"job {job.fqid}: nothing resubmitted"
