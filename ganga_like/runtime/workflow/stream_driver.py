"""The lease holder's part of a streaming map (``stream.py``): for a job marked
``STREAM`` in the pending table, make the subjobs of the pieces that arrived and submit
them, in three steps that a crash at any point leaves safe:

1. one transaction makes the subjobs (new; a few hundred at most, the rest at the next
   pass) and moves their pieces from ``arrived`` to ``made``: a piece is made once,
   whoever drives;
2. the job's new subjobs are submitted as ``submit()`` submits those of a master, with
   the submission's own intent and outcome (its recovery at the next start decides on a
   submission a crash interrupted);
3. one transaction drops the entry once nothing arrived meanwhile and no subjob is new.

A driver killed after step 1 leaves new subjobs and the entry: the next one submits
them (step 2 finds them by status), so none is lost and none submitted twice.
"""

from __future__ import annotations

import logging

from ganga_like.errors import GangaError
from ganga_like.model.job import Job
from ganga_like.model.stop_points import stop_point
from ganga_like.runtime.session import Session
from ganga_like.runtime.submission.resubmit import run_again
from ganga_like.runtime.workflow import engine, index, stream

__all__ = ["drive_stream"]

log = logging.getLogger("ganga_like.workflow")


def drive_stream(session: Session, job_id: int) -> int:
    """Make and submit the subjobs streaming job ``job_id`` is due; 1 when it acted."""
    found: list[tuple[Job, list[Job]]] = []

    def make() -> None:
        found.clear()
        registry = session.registry()
        table = index.pending(registry.root)
        if table is None or table.get(job_id) != index.STREAM:
            return  # acted on meanwhile (another session held the lease)
        job = registry.get(job_id)
        if not isinstance(job, Job) or not stream.is_streaming(job):
            del table[job_id]  # removed, or no longer reading a stream
            return
        stream.make_arrived(registry, str(session.repo.workspace), job)
        if stream.finish_if_closed(job, "monitor"):  # nothing matched at all
            registry.reindex(job)
            engine.upstream_changed(registry, [job], "monitor")
        news = stream.new_subjobs(job)
        if not news and not stream.stream_of(job).arrived:
            del table[job_id]
        found.append((job, news))

    session.repo.in_transaction(make, what=f"making the subjobs of streaming job {job_id}")
    if not found:
        return 0
    job, news = found[0]
    if not news:
        return 1
    stop_point("stream-subjobs-made")
    try:
        run_again(session, job, news, True, f"submit (reading {job.after[0]})", who="monitor")
    except GangaError as exc:
        # Those that could not be submitted are failed, with the reason in their logs.
        log.warning("job %s: submitting its streamed subjobs failed: %s", job_id, exc)
    stop_point("stream-subjobs-submitted")

    def finish() -> None:
        registry = session.registry()
        table = index.pending(registry.root)
        current = registry.get(job_id)
        if table is None or table.get(job_id) != index.STREAM or not isinstance(current, Job):
            return
        stream_state = current._stream
        if not stream.new_subjobs(current) and not (stream_state and stream_state.arrived):
            del table[job_id]

    session.repo.in_transaction(finish, what=f"recording the subjobs of streaming job {job_id}")
    return 1
