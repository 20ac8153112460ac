"""One monitoring cycle for every active Slurm (sub)job: one squeue, at most one sacct.

squeue is the queue, sacct the history of :mod:`ganga_like.batch.tracker`, whose rules
decide (a job squeue shows finished waits for sacct's exit code; a job neither lists is
concluded gone only after a while). Here: reading an output collection's failure note.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from ganga_like.batch import polling as batch_polling
from ganga_like.batch.tracker import Observation
from ganga_like.model.interfaces import ActiveRef, PollContext, StatusReport

from .scheduler import SCHEDULER
from .settings import SlurmSettings
from .submission import MISSING_OUTPUT_FILE

__all__ = ["MAX_QUERY_CHARS", "poll", "query_ids", "read_missing_output"]

# Ids of arrays, not of elements, are asked for: a split over several calls only happens
# with many thousands of separately submitted jobs.
MAX_QUERY_CHARS = SCHEDULER.max_query_chars


def query_ids(slurm_ids: Iterable[str]) -> list[list[str]]:
    """The ids to ask about (an array's id covers all its elements), in batches that
    fit one command line."""
    return batch_polling.query_ids(SCHEDULER, slurm_ids)


def poll(ctx: PollContext, refs: Sequence[ActiveRef]) -> list[StatusReport]:
    """Reports for the (sub)jobs of ``refs`` whose status changed since the last cycle."""
    return batch_polling.poll(SCHEDULER, ctx, refs, SlurmSettings.from_mapping(ctx.settings),
                              read_missing_output)


def read_missing_output(ctx: PollContext, ref: ActiveRef,
                        observation: Observation) -> Observation:
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
