"""What a job reading another's outputs one subjob at a time (``JobOutput(job, pattern,
each=True)``, a streaming map) has recorded of that job's pieces.

A *piece* of the upstream is one of its subjobs (by id), or the upstream itself when it is
not split (``WHOLE``). The transaction that records a piece completed adds it to
``arrived``; a monitor then makes the downstream subjob for it and moves it to ``made``
(the downstream subjob's id, or ``NOTHING`` when the piece left no matching file). A piece
is in one of the two at most, so each is mapped once, whoever records it.

The stream is ``open`` while the upstream may complete more pieces; it closes when the
upstream is final, or when the downstream's condition can no longer hold (``spoilt``
names the root failure). Until it is closed and every arrived piece is made, the
downstream master is not final.
"""

from __future__ import annotations

from BTrees.IOBTree import IOBTree
from persistent import Persistent

from ganga_like.model.status import Status

__all__ = ["NOTHING", "WHOLE", "Stream", "streamed"]

WHOLE = -1  # the piece of an upstream that is not split: the job itself
NOTHING = -1  # made: the piece left no file matching the pattern, no subjob for it


class Stream(Persistent):  # type: ignore[misc]
    """The pieces of one upstream seen by one downstream job."""

    open = True
    spoilt: str | None = None
    stopped = False  # killed by the user: it grows no more, whatever what it reads does

    def __init__(self) -> None:
        self.arrived = IOBTree()  # piece -> 1: completed, its subjob not made yet
        self.made = IOBTree()  # piece -> the downstream subjob's id, or NOTHING

    def more_to_come(self) -> bool:
        """Whether the downstream may still get subjobs (so its master is not final)."""
        return self.open or bool(self.arrived)

    def stop(self) -> None:
        self.open, self.stopped = False, True
        self.arrived.clear()

    def seen(self, piece: int) -> bool:
        return piece in self.made or piece in self.arrived


def streamed(stream: Stream | None, derived: Status) -> Status:
    """A master's status derived from its subjobs, as its stream shows it: not final while
    it may grow (``running``), failed when what it read failed too often."""
    if stream is None:
        return derived
    if derived.final and stream.more_to_come():
        return Status.RUNNING  # what it reads still runs: more subjobs to come
    if derived is Status.COMPLETED and stream.spoilt is not None:
        return Status.FAILED
    return derived
