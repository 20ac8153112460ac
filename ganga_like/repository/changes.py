"""A signal raised whenever the database learns of a new transaction.

Whoever waits for the repository to change (``wait()``, ``as_completed()``) sleeps on it
instead of waking at fixed intervals to look. ZODB tells the database's MVCC adapter of
every transaction it must make visible: a commit by another connection of this process
(the monitor's), and, in shared mode, every commit another session sends the server, which
the server passes on as invalidations. Both reach :meth:`CommitSignal.notify`, after the
invalidations are recorded, so a waiter that wakes and begins a new transaction sees the
commit that woke it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["CommitSignal", "install"]


class CommitSignal:
    """A count of transactions this database was told of, and waiters on it."""

    def __init__(self) -> None:
        self.serial = 0
        self._changed = threading.Condition()
        self._callbacks: set[Callable[[], None]] = set()

    def notify(self) -> None:
        with self._changed:
            self.serial += 1
            self._changed.notify_all()
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback()

    def wait_past(self, seen: int, timeout: float | None) -> bool:
        """Return once ``serial`` has moved past ``seen`` (True), or after ``timeout``
        seconds (False)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.serial != seen, timeout)

    def subscribe(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (from whichever thread learns of a transaction: it must be
        quick and must not raise) at every transaction from now on."""
        with self._changed:
            self._callbacks.add(callback)

    def unsubscribe(self, callback: Callable[[], None]) -> None:
        with self._changed:
            self._callbacks.discard(callback)


def install(db: Any) -> CommitSignal:
    """The signal of ``db``: its MVCC adapter's ways of hearing of transactions notify it."""
    signal = CommitSignal()
    adapter = db._mvcc_storage
    for name in ("invalidate", "_invalidate_finish", "invalidateCache"):
        heard = getattr(adapter, name, None)
        if heard is not None:
            setattr(adapter, name, _then_notify(heard, signal))
    return signal


def _then_notify(heard: Callable[..., Any], signal: CommitSignal) -> Callable[..., Any]:
    def hear(*args: Any, **kwargs: Any) -> Any:
        try:
            return heard(*args, **kwargs)
        finally:
            signal.notify()

    return hear
