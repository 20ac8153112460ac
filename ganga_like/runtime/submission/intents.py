"""The intent of a submission, recorded before the backend is reached (see ``actions`` for
the three steps) and read by crash recovery."""

from __future__ import annotations

import os
from typing import Any, NamedTuple

__all__ = ["Intent", "ours"]


class Intent(NamedTuple):
    """A submission in progress, as the registry's ``submitting`` table records it before
    the backend is reached: what a crash recovery needs to know, and whose it is (pid and
    process start time, so that a live session's submission is never "recovered").

    Stored as a plain tuple of these four fields in this order (``stored()``), as it
    always was: repositories read alike whichever version wrote them."""

    kind: str  # "submit" or "resubmit"
    # submit: how many subjobs (0: unsplit); resubmit: the subjob ids (none: the job itself)
    detail: Any
    pid: int
    started: float  # the owner process's start time

    @classmethod
    def now(cls, kind: str, detail: int | tuple[int, ...]) -> Intent:
        """An intent of this process."""
        return cls(kind, detail, os.getpid(), _process_started())

    @classmethod
    def read(cls, recorded: Any) -> Intent:
        """The intent a ``submitting`` entry holds."""
        return cls._make(recorded)

    def stored(self) -> tuple[str, Any, int, float]:
        """What the ``submitting`` table keeps."""
        return (self.kind, self.detail, self.pid, self.started)

    def owner_alive(self) -> bool:
        """Whether the process that recorded this intent is still running."""
        # Imported here: psutil costs ~16 ms of CPU, and most sessions find nothing to
        # recover.
        import psutil

        try:
            return bool(abs(psutil.Process(self.pid).create_time() - self.started) < 1.0)
        except psutil.Error:
            return False


def ours(recorded: Any) -> bool:
    """Whether a recorded intent (or None) is this process's."""
    if not recorded:
        return False
    intent = Intent.read(recorded)
    return intent.pid == os.getpid() and abs(intent.started - _process_started()) < 1.0


def _process_started() -> float:
    import psutil

    return float(psutil.Process().create_time())
