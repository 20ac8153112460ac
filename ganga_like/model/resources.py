"""What a (sub)job's run used of the machine: peak memory, CPU time, wall time.

Recorded once, when the run ends, by whoever learns of the end (the Local runner's reap,
through the same journal line as the exit code). A subjob keeps it in its own record as a
plain tuple under ``_used``, four numbers: records are written by the thousand, so no class
reference and no attribute names are stored with it (``Job._state_fields``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["ResourceUse", "stored_use", "use_from_stored"]

_KIB = 1024


class ResourceUse(NamedTuple):
    """What one run used: its process tree's peak resident memory (bytes, as far as the
    reaping ``wait4`` reports it: the largest of the process and the descendants it
    waited for), its user and system CPU seconds, and its wall-clock seconds."""

    max_rss: int
    user_cpu: float
    system_cpu: float
    wall: float

    @property
    def cpu(self) -> float:
        """User and system CPU seconds together."""
        return self.user_cpu + self.system_cpu

    def to_dict(self) -> dict[str, float]:
        return {
            "max_rss": self.max_rss,
            "user_cpu": self.user_cpu,
            "system_cpu": self.system_cpu,
            "wall": self.wall,
        }


def stored_use(
    usage: Any, start: float | None, end: float
) -> tuple[int, float, float, float] | None:
    """The tuple a record keeps for a runner's ``usage`` (``[KiB, user s, system s]``) of a
    run from ``start`` to ``end``; peak memory stays in KiB, the smallest pickle. None for
    a usage that is not three numbers (a journal line damaged on disk)."""
    wall = round(max(0.0, end - start), 3) if start is not None else 0.0
    try:
        kib, user, system = usage
        return (int(kib), float(user), float(system), wall)
    except (TypeError, ValueError):
        return None


def use_from_stored(stored: tuple[Any, ...] | None) -> ResourceUse | None:
    """The :class:`ResourceUse` a record's ``_used`` tuple holds, or None."""
    if stored is None:
        return None
    kib, user, system, wall = stored
    return ResourceUse(int(kib) * _KIB, float(user), float(system), float(wall))
