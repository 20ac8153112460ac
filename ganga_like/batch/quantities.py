"""Quantities a batch job requests that every batch system reads the same way: a memory
size (``"2G"``, bytes)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Final

__all__ = [
    "MAX_MEMORY",
    "MAX_WALLTIME",
    "ResourceError",
    "grown",
    "grown_all",
    "parse_memory",
    "shown",
]

# The largest request a job may make, far beyond any node: a larger value is a mistake (a
# size in bytes given as "G"), and a Retry that grows the memory stops there.
MAX_MEMORY = 1024**5  # 1 PiB
# The longest walltime a job may request: a longer one is a mistake (a walltime in seconds
# given as minutes), and a Retry that grows it stops there.
MAX_WALLTIME = timedelta(days=365)
_MIB = 1024**2

# Batch systems count memory in binary units (Slurm's ``--mem=1G`` and Grid Engine's
# ``h_vmem=1G`` are 1024 MiB), so the suffixes are binary whether or not the user writes
# the ``i``.
_MEMORY_UNITS: Final[Mapping[str, int]] = {
    "": 1,
    "B": 1,
    "K": 1024,
    "M": 1024**2,
    "G": 1024**3,
    "T": 1024**4,
    "P": 1024**5,
}
_MEMORY_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(?:I?B)?\s*$", re.IGNORECASE)


class ResourceError(ValueError):
    """A resource request that no scheduler could satisfy, or that does not fit a queue."""


def parse_memory(value: int | str) -> int:
    """Return a memory size in bytes.

    Accepts an int (bytes) or a string such as ``"2G"``, ``"500M"``, ``"1.5GiB"``,
    ``"2048"`` (bytes).  Units are binary.
    """
    if isinstance(value, bool):
        raise ResourceError(f"memory must be a size, not {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ResourceError(f"memory must not be negative, got {value}")
        return value
    match = _MEMORY_RE.match(value)
    if match is None:
        if value.strip().startswith("-"):
            raise ResourceError(f"memory must not be negative, got {value!r}")
        raise ResourceError(
            f"cannot read memory size {value!r}: use bytes or a number with K, M, G, T or P"
        )
    number, unit = match.groups()
    return math.ceil(float(number) * _MEMORY_UNITS[unit.upper()])


def grown(value: int | timedelta, factor: float) -> int | timedelta:
    """What a Retry grows a memory size (bytes, rounded up to a MiB) or a walltime
    (rounded up to a second) to: ``value`` times ``factor``, at most the largest request
    the attribute takes."""
    if isinstance(value, timedelta):
        seconds = min(value.total_seconds() * factor, MAX_WALLTIME.total_seconds())
        return timedelta(seconds=math.ceil(seconds))
    return min(math.ceil(value * factor / _MIB) * _MIB, MAX_MEMORY)


def grown_all(
    values: Mapping[str, int | timedelta | None], factors: Mapping[str, float]
) -> dict[str, int | timedelta]:
    """The new values of the resources ``factors`` names among ``values`` (a Retry's
    ``grow``), those that change only: one left to the queue's default (None), or already
    at the largest request, has nothing to grow."""
    changed: dict[str, int | timedelta] = {}
    for name, factor in factors.items():
        value = values.get(name)
        if value is not None and factor != 1 and (new := grown(value, factor)) != value:
            changed[name] = new
    return changed


def shown(value: object) -> str:
    """A memory size or walltime as a user reads it: '0:02:00', '4096M'."""
    if isinstance(value, timedelta):
        return str(value)
    if isinstance(value, int):
        return f"{math.ceil(value / _MIB)}M"
    return repr(value)
