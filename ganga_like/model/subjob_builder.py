"""A master's subjob structures (tree, counter, status chunks) built a part at a time.

A large submission adds its subjobs some thousands at a time, so that the ones already
added can be written out and leave memory before the rest are made; the structures must
come out exactly as if every subjob had been attached at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from BTrees.IOBTree import IOBTree

from ganga_like.model.counter import StatusCounter
from ganga_like.model.status_column import CHUNK, StatusChunk, build_chunks

__all__ = ["SubjobsBuilder"]


class _Subjob(Protocol):
    """What the builder reads of a subjob (a Job, which imports this module)."""

    @property
    def id(self) -> int: ...

    @property
    def status(self) -> str: ...


class SubjobsBuilder:
    """Collects subjobs (ids 0..N-1 in order, for the status chunks) for one master."""

    def __init__(self) -> None:
        self.tree = IOBTree()
        self._counts: dict[str, int] = {}
        self._chunks: list[StatusChunk] = []
        self._labels: list[str] = []  # of the subjobs not in a full chunk yet
        self._next = 0  # the id the next subjob has if ids are positions
        self._positions = True

    def __len__(self) -> int:
        return self._next

    def add(self, subjobs: Iterable[_Subjob]) -> None:
        """Add ``subjobs`` in their current status (later status changes are not seen)."""
        tree, counts, labels = self.tree, self._counts, self._labels
        for sj in subjobs:
            tree[sj.id] = sj
            status = sj.status
            counts[status] = counts.get(status, 0) + 1
            if sj.id != self._next:
                self._positions = False
            self._next += 1
            labels.append(status)
        full = len(labels) - len(labels) % CHUNK
        if full:
            # Whole chunks only: the last one fills up with the next part.
            self._chunks.extend(build_chunks(labels[:full]))
            del labels[:full]

    def structures(self) -> tuple[Any, StatusCounter, tuple[StatusChunk, ...] | None]:
        """The master's subjob tree, counter and status chunks (None when the ids are not
        positions), for :meth:`Job.take_subjobs`."""
        counter = StatusCounter()
        counter.counts = dict(self._counts)
        chunks = (*self._chunks, *build_chunks(self._labels))
        return self.tree, counter, chunks if self._positions else None
