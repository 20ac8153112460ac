"""What ``j.stats()`` returns: plain data about a job's (sub)jobs, ready for any view.

Every number is computed from the repository (``compute``); these classes only hold them
and turn them into dicts, JSON and the compact text the shell and scripts print (its
repr; the shell colours the same rows). Times are seconds; memory is bytes; instants are
unix times.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ganga_like.model.resources import ResourceUse
from ganga_like.runtime.stats.histogram import Histogram

__all__ = [
    "Distribution",
    "FailureGroup",
    "JobStats",
    "Requested",
    "ResourceSummary",
    "SlowRun",
    "SubjobResources",
    "counts_line",
    "duration",
    "left_line",
    "memory",
    "summary",
    "summary_rows",
    "title_line",
]

# The quantiles a distribution reports.
QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class Distribution:
    """Seconds over the (sub)jobs that have them: how many, and their spread."""

    count: int = 0
    mean: float | None = None
    min: float | None = None
    p50: float | None = None
    p90: float | None = None
    p99: float | None = None
    max: float | None = None

    @classmethod
    def of(cls, values: list[float]) -> Distribution:
        if not values:
            return cls()
        ordered = sorted(values)
        last = len(ordered) - 1
        # The nearest-rank quantile: always one of the values seen.
        p50, p90, p99 = (ordered[round(q * last)] for q in QUANTILES)
        mean = sum(ordered) / len(ordered)
        return cls(len(ordered), mean, ordered[0], p50, p90, p99, ordered[-1])

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class SlowRun:
    """One of the longest runs: which (sub)job, how long so far, and its status."""

    fqid: str
    seconds: float
    status: str

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class FailureGroup:
    """Failed (sub)jobs that failed alike: the same exit code and the same reason (the
    last line of what their backend said, such as ``exit code 3`` or Slurm's
    ``OUT_OF_MEMORY``)."""

    exit_code: int | None
    reason: str
    fqids: tuple[str, ...]
    # What the reason means (the backend says): "out_of_memory", "timeout" or "failed".
    cause: str = "failed"
    # Its place in ``JobStats.failures``, from 1: how ``ganga resubmit ID --group N``
    # and ``j.resubmit(group=N)`` name it.
    number: int = 0
    # Each (sub)job's failure, by the status changes its event log held when the stats
    # were taken (in the order of ``fqids``): one with more since ran again, and so is no
    # longer the failure the group saw, even once it failed alike again.
    changes: tuple[int, ...] = ()

    @property
    def count(self) -> int:
        return len(self.fqids)

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "reason": self.reason,
            "count": self.count,
            "fqids": list(self.fqids),
            "cause": self.cause,
            "number": self.number,
        }


@dataclass(frozen=True)
class Requested:
    """What a (sub)job's backend asked for: memory (bytes), walltime (seconds) and cores;
    None where it asked for nothing (Local asks for nothing)."""

    memory: int | None = None
    walltime: float | None = None
    cores: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class SubjobResources:
    """One (sub)job's run: what it asked for against what it used."""

    fqid: str
    requested: Requested
    used: ResourceUse | None

    def to_dict(self) -> dict[str, Any]:
        used = self.used.to_dict() if self.used is not None else None
        return {"fqid": self.fqid, "requested": self.requested.to_dict(), "used": used}


@dataclass(frozen=True)
class ResourceSummary:
    """What the runs used, summed and at most, over the (sub)jobs whose use was measured,
    with each one's requested and used (``per_subjob``)."""

    measured: int = 0
    user_cpu: float = 0.0
    system_cpu: float = 0.0
    wall: float = 0.0
    max_rss: int | None = None
    max_rss_fqid: str | None = None
    # The largest share of its requested memory and walltime a run used (1.0: all of it).
    max_memory_share: float | None = None
    max_walltime_share: float | None = None
    per_subjob: tuple[SubjobResources, ...] = ()

    @property
    def cpu(self) -> float:
        return self.user_cpu + self.system_cpu

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "per_subjob"}
        out["cpu"] = self.cpu
        out["per_subjob"] = [row.to_dict() for row in self.per_subjob]
        return out


@dataclass(frozen=True)
class JobStats:
    """How a job (a master's subjobs, or the jobs of a slice) is doing, as plain data:
    ``to_dict()`` and ``to_json()`` for scripts; its repr is a compact summary."""

    title: str
    total: int
    counts: dict[str, int]
    # Counts by status after each change the event logs record, sampled: (time, counts).
    over_time: tuple[tuple[float, dict[str, int]], ...]
    queue_wait: Distribution
    run_time: Distribution
    slowest: tuple[SlowRun, ...]
    # Seconds until every (sub)job has ended at the rate they have been ending; 0.0 when
    # all have, None when none has yet (no rate to go by).
    time_left: float | None
    failures: tuple[FailureGroup, ...]
    resources: ResourceSummary
    computed_at: float
    fqids: tuple[str, ...] = field(default=())  # the jobs asked about
    # What ``total`` counts: "subjobs" when a master was asked about, else "jobs".
    unit: str = "jobs"
    # How the run times spread, for plots: equal-width bins over the runs that ended.
    run_time_histogram: Histogram = field(default=Histogram())

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "jobs": list(self.fqids),
            "total": self.total,
            "unit": self.unit,
            "counts": dict(self.counts),
            "over_time": [[when, dict(counts)] for when, counts in self.over_time],
            "queue_wait": self.queue_wait.to_dict(),
            "run_time": self.run_time.to_dict(),
            "run_time_histogram": self.run_time_histogram.to_dict(),
            "slowest": [run.to_dict() for run in self.slowest],
            "time_left": self.time_left,
            "failures": [group.to_dict() for group in self.failures],
            "resources": self.resources.to_dict(),
            "computed_at": self.computed_at,
        }

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    def __repr__(self) -> str:
        return summary(self)


# -- the compact summary: the repr in scripts, the rows the shell's display colours ------

# Failure groups and ids shown before "… N more".
SHOWN_GROUPS = 5
SHOWN_IDS = 6


def duration(seconds: float | None) -> str:
    """``0.42s``, ``12.3s``, ``4m05s``, ``2h03m``, ``3d04h``; ``-`` for none."""
    if seconds is None:
        return "-"
    if seconds < 10:
        return f"{seconds:.2f}s"
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    minutes, secs = divmod(whole, 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s"


def memory(size: float | None) -> str:
    """Bytes in binary units: ``512 KiB``, ``1.5 GiB``; ``-`` for none."""
    if size is None:
        return "-"
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def _spread(dist: Distribution) -> str:
    if not dist.count:
        return "-"
    return (
        f"p50 {duration(dist.p50)}  p90 {duration(dist.p90)}  max {duration(dist.max)}"
        f"  (mean {duration(dist.mean)}, {dist.count})"
    )


def _ids(fqids: tuple[str, ...]) -> str:
    shown = ", ".join(fqids[:SHOWN_IDS])
    more = len(fqids) - SHOWN_IDS
    return f"{shown}, … {more} more" if more > 0 else shown


def counts_line(stats: JobStats) -> str:
    return "  ".join(f"{label} {n}" for label, n in sorted(stats.counts.items()))


def left_line(stats: JobStats) -> str:
    """``  time left ~4m05s``; empty when none is known or all have ended."""
    return f"  time left ~{duration(stats.time_left)}" if stats.time_left else ""


def title_line(stats: JobStats) -> str:
    unit = stats.unit if stats.total != 1 else stats.unit[:-1]
    return f"stats of {stats.title}: {stats.total} {unit}"


def summary_rows(stats: JobStats) -> list[tuple[str, str]]:
    """(label, text) rows of the summary, the first being the counts."""
    rows = [("status", f"{counts_line(stats) or 'nothing'}{left_line(stats)}")]
    rows.append(("queue wait", _spread(stats.queue_wait)))
    rows.append(("run time", _spread(stats.run_time)))
    if stats.slowest:
        slow = ", ".join(f"{run.fqid} {duration(run.seconds)}" for run in stats.slowest)
        rows.append(("slowest", slow))
    for group in stats.failures[:SHOWN_GROUPS]:
        shown = group.exit_code
        code = "" if shown is None or group.reason == f"exit code {shown}" else f" [exit {shown}]"
        text = f"{group.count}: {group.reason}{code}: {_ids(group.fqids)}"
        rows.append((f"failed #{group.number}" if group.number else "failed", text))
    hidden = stats.failures[SHOWN_GROUPS:]
    if hidden:
        rows.append(("failed", f"… {len(hidden)} more groups ({sum(g.count for g in hidden)})"))
    used = stats.resources
    if used.measured:
        rows.append(
            (
                "resources",
                f"cpu {duration(used.cpu)} (user {duration(used.user_cpu)}, system "
                f"{duration(used.system_cpu)})  peak memory {memory(used.max_rss)} "
                f"({used.max_rss_fqid})  measured {used.measured}/{stats.total}",
            )
        )
    shares = [
        f"{what} up to {share:.0%}"
        for what, share in (
            ("memory", used.max_memory_share),
            ("walltime", used.max_walltime_share),
        )
        if share is not None
    ]
    if shares:
        rows.append(("of request", ", ".join(shares)))
    return rows


def summary(stats: JobStats) -> str:
    """The compact text: a title line, then one labelled line per row."""
    lines = [title_line(stats)]
    lines.extend(f"  {label:<10} {text}" for label, text in summary_rows(stats))
    return "\n".join(lines)
