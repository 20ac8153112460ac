"""Quantities a batch job requests that every batch system reads the same way: a memory
size (``"2G"``, bytes)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Final

__all__ = ["MAX_MEMORY", "ResourceError", "parse_memory"]

# The largest request a job may make, far beyond any node: a larger value is a mistake (a
# size in bytes given as "G"), and a Retry that grows the memory stops there.
MAX_MEMORY = 1024**5  # 1 PiB

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
