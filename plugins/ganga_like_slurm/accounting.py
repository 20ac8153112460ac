"""What Slurm's accounting says a finished job used: sacct's MaxRSS, UserCPU, SystemCPU and
Elapsed, read from the same sacct call as the job's state (pure: text in, numbers out).

The allocation's line (``123_4``) carries the CPU times and the elapsed time, summed over
its steps; the peak memory is only on the steps' lines (``123_4.batch``, ``123_4.extern``,
one per srun), sampled every ``JobAcctGatherFrequency`` seconds. A step's line reaches the
accounting database after its allocation's: until then the allocation shows COMPLETED with
zero CPU. So the use of a job counts as known only once one of its steps has ended.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["USAGE_FIELDS", "SacctUsage", "kibibytes", "seconds", "step_of"]

# Asked after the state fields, in this order.
USAGE_FIELDS = ("MaxRSS", "UserCPU", "SystemCPU", "Elapsed")

_DURATION_RE = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$")
_SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$")
_UNITS = ("K", "M", "G", "T", "P")  # KiB, MiB, ... (a bare number counts bytes)


@dataclass(frozen=True)
class SacctUsage:
    """One finished job's use as sacct accounted it."""

    max_rss_kib: int  # 0 when no sample was taken (a run shorter than the sampling)
    user_cpu: float
    system_cpu: float
    elapsed: float


def seconds(text: str) -> float | None:
    """sacct's ``[DD-][HH:]MM:SS[.mmm]`` in seconds; None for anything else."""
    match = _DURATION_RE.match(text.strip())
    if match is None:
        return None
    days, hours, minutes, secs = match.groups()
    return (int(days or 0) * 24 + int(hours or 0)) * 3600 + int(minutes) * 60 + float(secs)


def kibibytes(text: str) -> int | None:
    """sacct's sizes (``20552K``, ``1.50M``, a bare count of bytes) in KiB; None if empty."""
    match = _SIZE_RE.match(text.strip())
    if match is None:
        return None
    number, unit = match.groups()
    scale = 1024 ** _UNITS.index(unit) if unit else 1 / 1024
    return round(float(number) * scale)


def step_of(job_id: str) -> tuple[str, str] | None:
    """``("123_4", "batch")`` for a step's id ``123_4.batch``; None for an allocation."""
    base, dot, step = job_id.partition(".")
    return (base, step) if dot else None
