"""What a backend keeps between monitor cycles: its poller.

Each backend class names a :class:`Poller` subclass (``IBackend.poller_class``); the monitor
makes one per backend the first time it polls it and keeps it from cycle to cycle (a new
one when it takes the monitoring lease again). A poll reads what the poller kept and
changes it in two ways:

- :class:`Staged` fields (journal offsets, what was last reported): the poll *stages* a new
  value, which becomes the value only once the monitor tells the poller that the cycle's
  transaction committed (:meth:`Poller.cycle_committed`). A cycle abandoned (a conflict, a
  full disk, the backend unreachable) drops it (:meth:`Poller.cycle_abandoned`), so the
  next poll reports the same again and nothing is lost.
- plain attributes (maps derived from the followed refs, when the runner was restarted):
  what happened whether or not the commit succeeds, kept at once.
"""

from __future__ import annotations

from typing import Generic, TypeVar

__all__ = ["Poller", "Staged"]

T = TypeVar("T")


class Staged(Generic[T]):
    """A value a poll changes only provisionally: :attr:`value` stays what the last
    committed cycle left until :meth:`commit`."""

    __slots__ = ("_next", "_staged", "value")

    def __init__(self, value: T) -> None:
        self.value = value
        self._next = value
        self._staged = False

    @property
    def staged(self) -> bool:
        """True when this cycle staged a value not yet kept."""
        return self._staged

    @property
    def latest(self) -> T:
        """The value this cycle staged, else the kept one."""
        return self._next if self._staged else self.value

    def stage(self, value: T) -> None:
        self._next = value
        self._staged = True

    def commit(self) -> None:
        if self._staged:
            self.value = self._next
            self._staged = False

    def abandon(self) -> None:
        if self._staged:
            self._next = self.value
            self._staged = False

    def __repr__(self) -> str:
        staged = f", staged={self._next!r}" if self._staged else ""
        return f"Staged({self.value!r}{staged})"


class Poller:
    """A backend's state between monitor cycles (see the module's doc).

    Subclasses declare their fields in ``__init__``: :class:`Staged` ones are kept or
    dropped with the cycle, and so are those of a nested Poller (a backend polling two
    kinds of jobs keeps one per kind); anything else is the subclass's to keep."""

    def keeps_following(self) -> bool:
        """True while the poller follows (sub)jobs that are no longer active (an ended
        one whose use its scheduler has not accounted yet): the monitor then polls its
        backend even with no active (sub)job."""
        return False

    def cycle_committed(self) -> None:
        """The cycle's transaction committed: keep what the poll staged."""
        for value in vars(self).values():
            if isinstance(value, Staged):
                value.commit()
            elif isinstance(value, Poller):
                value.cycle_committed()

    def cycle_abandoned(self) -> None:
        """The cycle was abandoned (its commit failed, or the poll failed): drop what the
        poll staged, so the next poll starts from what the last committed cycle left."""
        for value in vars(self).values():
            if isinstance(value, Staged):
                value.abandon()
            elif isinstance(value, Poller):
                value.cycle_abandoned()
