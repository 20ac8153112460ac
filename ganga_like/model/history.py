"""The event log entry of a job: when, from which status, to which, and why.

Entries are small tuples stored in the job's own record, so a master's history never loads
its subjobs'. The cause is bounded so the log stays cheap however chatty a backend is.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any, NamedTuple

__all__ = ["MAX_CAUSE", "History", "HistoryEntry", "make_entry"]

MAX_CAUSE = 240


class HistoryEntry(NamedTuple):
    time: float
    old: str
    new: str
    cause: str

    def __str__(self) -> str:
        when = _dt.datetime.fromtimestamp(self.time).isoformat(sep=" ", timespec="seconds")
        return f"{when}  {self.old:>10} -> {self.new:<10}  {self.cause}"


class History(list[HistoryEntry]):
    """A job's event log (``j.history``): a list of entries that shows as one line per
    entry, as ``ganga log`` prints it, rather than as tuples of unix times."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "\n".join(str(entry) for entry in self) if self else "[]"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:  # IPython's display
        printer.text(repr(self))


def make_entry(time: float, old: str, new: str, cause: str) -> tuple[float, str, str, str]:
    """A plain tuple (cheaper to pickle than the NamedTuple) with a bounded cause."""
    if len(cause) > MAX_CAUSE:
        cause = cause[: MAX_CAUSE - 1] + "…"
    return (time, old, new, cause)
