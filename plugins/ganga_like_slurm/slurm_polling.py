"""One monitoring cycle for every active Slurm (sub)job: one squeue, at most one sacct.

squeue is the queue, sacct the history of :mod:`ganga_like.batch.tracker`, whose rules
decide (a job squeue shows finished waits for sacct's exit code; a job neither lists is
concluded gone only after a while).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ganga_like.batch import polling as batch_polling
from ganga_like.batch.script import read_missing_output
from ganga_like.model.interfaces import ActiveRef, PollContext, StatusReport

from .scheduler import SCHEDULER
from .settings import Slurm as SlurmSection

__all__ = ["MAX_QUERY_CHARS", "poll", "query_ids"]

# Ids of arrays, not of elements, are asked for: a split over several calls only happens
# with many thousands of separately submitted jobs.
MAX_QUERY_CHARS = SCHEDULER.max_query_chars


def query_ids(slurm_ids: Iterable[str]) -> list[list[str]]:
    """The ids to ask about (an array's id covers all its elements), in batches that
    fit one command line."""
    return batch_polling.query_ids(SCHEDULER, slurm_ids)


def poll(ctx: PollContext, refs: Sequence[ActiveRef]) -> list[StatusReport]:
    """Reports for the (sub)jobs of ``refs`` whose status changed since the last cycle."""
    return batch_polling.poll(
        SCHEDULER,
        ctx,
        refs,
        ctx.config[SlurmSection],
        read_missing_output,
    )
