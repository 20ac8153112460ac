"""What ``ganga top`` writes in its cells: progress bars, rates, times, and a job's stats
as lines (rich Text, no Textual: usable and testable without a screen)."""

from __future__ import annotations

from rich.text import Text

from ganga_like.runtime.stats import JobStats
from ganga_like.runtime.stats.board import BoardRow
from ganga_like.runtime.stats.data import duration, summary_rows, title_line

__all__ = ["BAR_WIDTH", "JOB_COLUMNS", "bar", "counts_text", "job_cells", "stats_lines"]

BAR_WIDTH = 20
JOB_COLUMNS = ("id", "name", "status", "backend", "progress", "ended", "per min", "left", "counts")

# The bar's parts, in its order, each a colour; what is left of the bar is still to run.
_PARTS = (
    (("completed", "completed_frozen"), "green"),
    (("failed", "failed_frozen", "killed", "skipped"), "red"),
    (("running", "completing"), "blue"),
)
# The summary's rows the job screen shows as rows to pick instead.
_PICKED = frozenset({"slowest", "failed"})
_STATUS_STYLE = {
    "running": "bold blue",
    "completed": "green",
    "failed": "bold red",
    "killed": "red",
    "submitted": "yellow",
    "submitting": "yellow",
    "waiting": "magenta",
}


def bar(counts: dict[str, int], width: int = BAR_WIDTH) -> Text:
    """A bar of ``width`` cells: completed, failed, running, then what is still queued."""
    total = sum(counts.values())
    text = Text()
    used = 0
    for labels, colour in _PARTS:
        n = sum(counts.get(label, 0) for label in labels)
        cells = round(width * n / total) if total else 0
        cells = min(cells, width - used)
        text.append("█" * cells, style=colour)
        used += cells
    text.append("░" * (width - used), style="dim")
    return text


def counts_text(counts: dict[str, int]) -> str:
    return " ".join(f"{label} {n}" for label, n in sorted(counts.items()))


def job_cells(row: BoardRow, now: float) -> tuple[str | Text, ...]:
    """The cells of a job's line, in the order of ``JOB_COLUMNS``."""
    rate = row.rate(now)
    left = row.time_left(now)
    return (
        str(row.job_id),
        row.name or "",
        Text(row.status, style=_STATUS_STYLE.get(row.status, "")),
        row.backend,
        bar(row.counts),
        f"{row.done}/{row.total}",
        "-" if rate is None else f"{rate:.1f}",
        "-" if left is None else ("done" if left == 0 else duration(left)),
        counts_text(row.counts),
    )


def stats_lines(stats: JobStats) -> list[str]:
    """The open job's stats as ``j.stats()`` prints them, less the slowest subjobs and the
    failure groups: those are rows of their own, to pick."""
    rows = summary_rows(stats)
    kept = [(k, v) for k, v in rows if k.partition(" ")[0] not in _PICKED]  # "failed #2"
    return [title_line(stats)] + [f"{k:<10} {v}" for k, v in kept]
