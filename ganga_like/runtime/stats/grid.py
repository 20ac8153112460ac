"""The subjob grid's data: one cell per (sub)job, in order, with its name and status.

A master's statuses come from its status column (``model.status_column``): a few compact
records per 1,024 subjobs, no subjob loaded, so 100,000 cells cost one pass over a list.
Only a master stored before it kept a column has its subjobs read one by one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from ganga_like.model.job import Job

__all__ = ["GridPart", "SubjobGrid", "subjob_grid"]


class GridPart(NamedTuple):
    """Consecutive cells: a master's subjobs (``subjobs`` of them, named ``name.0``,
    ``name.1``, ...), or one job named ``name`` (``subjobs`` is None)."""

    name: str
    subjobs: int | None


@dataclass(frozen=True)
class SubjobGrid:
    """Each cell's status label, in order, and the parts that name the cells."""

    labels: tuple[str, ...]
    parts: tuple[GridPart, ...]

    def __len__(self) -> int:
        return len(self.labels)

    def names(self) -> Iterator[str]:
        """Each cell's fqid, in order."""
        for name, subjobs in self.parts:
            if subjobs is None:
                yield name
            else:
                prefix = f"{name}."
                yield from (f"{prefix}{index}" for index in range(subjobs))


def subjob_grid(jobs: Iterable[Job]) -> SubjobGrid:
    """The grid of ``jobs``: a master stands for its subjobs, any other job for itself."""
    labels: list[str] = []
    parts: list[GridPart] = []
    for job in jobs:
        if not job.is_master:
            labels.append(job.status)
            parts.append(GridPart(job.fqid, None))
            continue
        column = job.subjob_statuses()
        # The status counter's total (one record), not the subjob tree's length, which
        # loads every bucket of the tree (4 s for 100,000 subjobs read from the file).
        if column is not None and len(column) == sum(job.counts().values()):
            labels.extend(column)
            parts.append(GridPart(job.fqid, len(column)))
            continue
        for index, subjob in job.subjob_items():  # no column: read each subjob
            labels.append(subjob.status)
            parts.append(GridPart(f"{job.fqid}.{index}", None))
    return SubjobGrid(tuple(labels), tuple(parts))
