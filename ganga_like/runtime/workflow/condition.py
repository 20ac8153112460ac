"""Whether a waiting job may go, from the counts of what it waits for. Pure: no I/O.

Every upstream job or subjob contributes its (sub)jobs' counts by status (a master's come
from its status counter, read in O(1)); their sum is a :class:`Tally`. A ``completed``
condition goes once nothing is pending and no more failed than ``allow_failed`` tolerates,
and can no longer hold as soon as more failed than that (the rest need not end first);
``finished`` goes once nothing is pending; ``failed`` goes once nothing is pending and more
failed than tolerated, and can no longer hold when everything ended with too few failures.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from ganga_like.model.status import Status

__all__ = ["Tally", "Verdict", "tally", "tolerated", "verdict"]

_DONE = frozenset({Status.COMPLETED, Status.COMPLETED_FROZEN})
_SPOILT = frozenset({Status.FAILED, Status.KILLED, Status.FAILED_FROZEN, Status.SKIPPED})


class Verdict(enum.Enum):
    WAIT = "wait"  # not decided yet
    GO = "go"  # the condition holds: submit the waiting job
    NEVER = "never"  # the condition can no longer hold: skip it


@dataclass(frozen=True)
class Tally:
    """How many upstream (sub)jobs are done, spoilt (failed, killed, skipped) or not
    final yet."""

    done: int = 0
    spoilt: int = 0
    pending: int = 0

    @property
    def total(self) -> int:
        return self.done + self.spoilt + self.pending

    def __add__(self, other: Tally) -> Tally:
        return Tally(
            self.done + other.done, self.spoilt + other.spoilt, self.pending + other.pending
        )


def tally(counts: Iterable[tuple[Status, int]]) -> Tally:
    """The tally of (status, count) pairs."""
    done = spoilt = pending = 0
    for status, n in counts:
        if status in _DONE:
            done += n
        elif status in _SPOILT:
            spoilt += n
        else:
            pending += n
    return Tally(done, spoilt, pending)


def tolerated(allow_failed: int | float, total: int) -> int:
    """How many failures ``allow_failed`` tolerates out of ``total``: the count itself, or
    the fraction of ``total`` rounded down (computed exactly: 0.02 of 100 is 2)."""
    if isinstance(allow_failed, int):
        return allow_failed
    return math.floor(Fraction(str(allow_failed)) * total)


def verdict(counts: Tally, when: str, allow_failed: int | float = 0) -> Verdict:
    """What a job waiting with condition ``when`` does given the upstream ``counts``."""
    too_many = counts.spoilt > tolerated(allow_failed, counts.total)
    if when == "completed":
        if too_many:
            return Verdict.NEVER
        return Verdict.WAIT if counts.pending else Verdict.GO
    if counts.pending:
        return Verdict.WAIT
    if when == "finished":
        return Verdict.GO
    return Verdict.GO if too_many else Verdict.NEVER
