"""A streaming map: ``inputdata=JobOutput(up, pattern, each=True)``.

The downstream job grows one subjob per completed piece of ``up`` (a subjob, or ``up``
itself when it is not split) while ``up`` runs. The transaction that records a change of
``up`` (whoever records it) notes the pieces that completed since (:func:`advance`, from
``engine.settle``) and marks the job in the pending table; the monitor holding the lease
then makes their subjobs, each with the files of its piece, and submits them
(``stream_driver.py``). The stream closes once ``up`` is final, or as soon as the
downstream's condition can no longer hold (too many failed pieces for ``allow_failed``);
the downstream master is final once it is closed and its subjobs ended. A failed piece
gives no subjob; a resubmitted ``up`` opens the stream again.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

from ganga_like.errors import JobError
from ganga_like.model.dependencies import fqid_parts
from ganga_like.model.job import Job
from ganga_like.model.job_output import JobOutput
from ganga_like.model.status import Status
from ganga_like.model.stream import NOTHING, WHOLE, Stream
from ganga_like.repository.registry import Registry
from ganga_like.runtime.submission.splitting import build_subjobs
from ganga_like.runtime.workflow import index
from ganga_like.runtime.workflow.condition import Verdict
from ganga_like.runtime.workflow.outputs import (
    dataset_of,
    matching_files,
    no_file_cause,
    shown,
)

__all__ = [
    "advance",
    "check_stream",
    "finish_if_closed",
    "is_streaming",
    "make_arrived",
    "new_subjobs",
    "stop",
    "stream_of",
]

_DONE = frozenset({Status.COMPLETED.label, Status.COMPLETED_FROZEN.label})
# Subjobs one pass makes at most: every piece due, as a rule (they are made in one
# transaction and handed over in one batch, as a master's first submission of as many
# subjobs is); the bound keeps a backlog's batch (a stream read by a monitor that
# started after its upstream ended) to what that submission holds in memory at once.
MAKE_AT_ONCE = 10_000


def is_streaming(job: Job) -> bool:
    """Whether ``job`` (top-level) reads another job's outputs one subjob at a time."""
    dataset = dataset_of(job)
    return dataset is not None and dataset.each and job.master is None


def check_stream(job: Job, dataset: JobOutput) -> None:
    """JobError (one line) when ``job`` cannot stream ``dataset``: it makes the subjobs
    itself (no splitter), waits for that job alone, and for it to complete or finish."""
    if job.stored().get("splitter") is not None:
        raise JobError(
            f"job {job.fqid}: {shown(dataset)} with each=True makes one subjob per "
            "completed subjob of it: give the job no splitter"
        )
    others = [fqid for fqid in job.after if fqid != dataset.job]
    if others:
        raise JobError(
            f"job {job.fqid}: {shown(dataset)} with each=True waits for job {dataset.job} "
            f"alone, not also for {', '.join(others)}"
        )
    if job.when == "failed":
        raise JobError(
            f"job {job.fqid}: {shown(dataset)} with each=True reads completed subjobs: "
            "when='completed' or 'finished', not 'failed'"
        )


def stream_of(job: Job) -> Stream:
    stream = job._stream
    if stream is None:
        stream = job._stream = Stream()
    return stream


def _completed_pieces(upstream: Job) -> Iterator[int]:
    """The pieces of ``upstream`` that completed: its subjobs' ids, or ``WHOLE``."""
    if not upstream.is_master:
        if upstream.current_status().label in _DONE:
            yield WHOLE
        return
    labels = upstream.subjob_statuses()
    if labels is None:
        labels = [sj.status for sj in upstream.iter_subjobs()]
    for piece, label in enumerate(labels):
        if label in _DONE:
            yield piece


def advance(registry: Registry, job: Job, decided: Verdict, reason: str, who: str) -> bool:
    """Streaming ``job``'s upstream changed, in this transaction: note its newly completed
    pieces, and close the stream (the upstream is final, or the condition can no longer
    hold) or open it again (the upstream runs again). Whether anything changed."""
    stream = stream_of(job)
    dataset = dataset_of(job)
    assert dataset is not None
    if stream.stopped:
        return False
    changed = False
    if decided is Verdict.WAIT and not stream.open:
        stream.open, stream.spoilt = True, None
        if Status.parse(job.status) is Status.SKIPPED and not job.is_master:
            job._skipped_by = None
            job.change_status(Status.WAITING, f"{who}: re-armed: {dataset.job} runs again")
        else:
            job.log_event(f"{who}: reading {shown(dataset)} again: it runs again")
        changed = True
    if decided is Verdict.NEVER and stream.open:
        stream.open, stream.spoilt = False, reason
        job.log_event(f"{who}: no more subjobs: {reason}")
        changed = True
    if stream.open:
        job_id, sub = fqid_parts(dataset.job)
        upstream = registry.lookup(job_id, sub)
        for piece in _completed_pieces(upstream) if isinstance(upstream, Job) else ():
            if not stream.seen(piece):
                stream.arrived[piece] = 1
                changed = True
    if decided is Verdict.GO and stream.open:
        stream.open = False
        changed = True
    if stream.arrived:
        table = index.pending(registry.root, create=True)
        assert table is not None
        table[job.id] = index.STREAM
    changed = finish_if_closed(job, who) or changed
    if changed:
        registry.reindex(job)
    return changed


def stop(job: Job) -> None:
    """Streaming ``job`` is killed: it grows no more subjobs (in the caller's
    transaction)."""
    if is_streaming(job) and not stream_of(job).stopped:
        stream_of(job).stop()
        job.log_event("user: kill: no more subjobs")


def make_arrived(registry: Registry, workspace: str, job: Job) -> int:
    """Make the subjobs of the pieces that arrived (at most ``MAKE_AT_ONCE``; new, not
    submitted), each with the files of its piece and the piece named as its source; how
    many."""
    stream = stream_of(job)
    dataset = dataset_of(job)
    assert dataset is not None
    variations, pieces = [], []
    for piece in list(islice(stream.arrived.keys(), MAKE_AT_ONCE)):
        del stream.arrived[piece]
        # Named by ids: the upstream subjobs are not loaded (thousands, over the network).
        source = dataset.job if piece == WHOLE else f"{dataset.job}.{piece}"
        files = matching_files(workspace, source, dataset.pattern)
        if not files:
            stream.made[piece] = NOTHING
            job.log_event(f"monitor: {source} left no output file matching {dataset.pattern!r}")
            continue
        chunk = dataset._copy()
        chunk._assign("files", files)
        chunk._assign("source", source)
        variations.append({"inputdata": chunk})
        pieces.append(piece)
    if not variations:
        return 0
    tree = job._subjobs
    made = build_subjobs(job, variations, first_id=tree.maxKey() + 1 if tree else 0)
    for sj, piece in zip(made, pieces, strict=True):
        stream.made[piece] = sj.id  # (each made for its first run: submit_count 1)
    if job.is_master:
        job.add_subjobs(made)
    else:
        job.attach_subjobs(made)
    registry.reindex(job)
    return len(made)


def new_subjobs(job: Job) -> list[Job]:
    """The subjobs of ``job`` made and not submitted yet (read from its status chunks)."""
    if not job.counts().get(Status.NEW):
        return []
    labels = job.subjob_statuses()
    if labels is None:
        return [sj for sj in job.iter_subjobs() if sj.status == Status.NEW.label]
    found = (job.find_subjob(i) for i, label in enumerate(labels) if label == Status.NEW.label)
    return [sj for sj in found if sj is not None]


def finish_if_closed(job: Job, who: str) -> bool:
    """A stream closed with no subjob made and none to make: the job is skipped, naming
    why (the root failure, or that nothing matched). Whether it was."""
    stream = job._stream
    dataset = dataset_of(job)
    if stream is None or dataset is None or stream.more_to_come() or job.is_master:
        return False
    if Status.parse(job.status) is not Status.WAITING:
        return False
    cause = stream.spoilt or no_file_cause(dataset)
    job._skipped_by = (dataset.job, cause)
    job.change_status(Status.SKIPPED, f"{who}: skipped: {cause}")
    return True
