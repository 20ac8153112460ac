"""``j.report("run.html")``: one HTML file holding a job's figures and tables, that opens
with no network (Plotly's JavaScript is inlined once, each figure is its data).

The tables: the counts by status, the slowest runs, the failure groups and what the runs
used against what they asked for (as ``seff`` shows it). Every text is escaped.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from html import escape
from pathlib import Path

import plotly.io as pio
from plotly.offline import get_plotlyjs

from ganga_like.runtime.plots.figures import FIGURES, figures
from ganga_like.runtime.stats import JobStats
from ganga_like.runtime.stats.data import (
    SubjobResources,
    counts_line,
    duration,
    left_line,
    memory,
    title_line,
)
from ganga_like.runtime.stats.grid import SubjobGrid

__all__ = ["report_html", "write_report"]

# Rows of the resources table (the runs that used most memory) and ids a failure group lists.
RESOURCE_ROWS = 50
GROUP_IDS = 20
# No link to Plotly's site, no logo: the file stands alone.
_PLOT_CONFIG = {"displaylogo": False, "responsive": True}
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; }
th { background: #f4f4f4; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(520px, 1fr)); }
.note { color: #666; }
"""


def _table(head: Iterable[str], rows: Iterable[Iterable[object]], numeric: set[int]) -> str:
    top = "".join(f"<th>{escape(name)}</th>" for name in head)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="n">{escape(str(cell))}</td>'
            if i in numeric
            else f"<td>{escape(str(cell))}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><tr>{top}</tr>{body}</table>"


def _counts(stats: JobStats) -> str:
    rows = [(label, n) for label, n in sorted(stats.counts.items())]
    rows.append(("total", stats.total))
    spread = [
        (what, dist.count, duration(dist.p50), duration(dist.p90), duration(dist.max))
        for what, dist in (("queue wait", stats.queue_wait), ("run time", stats.run_time))
    ]
    return _table(("status", stats.unit), rows, {1}) + _table(
        ("", "runs", "p50", "p90", "max"), spread, {1}
    )


def _slowest(stats: JobStats) -> str:
    if not stats.slowest:
        return '<p class="note">No run has started.</p>'
    rows = [(run.fqid, duration(run.seconds), run.status) for run in stats.slowest]
    return _table(("job", "run time", "status"), rows, {1})


def _failures(stats: JobStats) -> str:
    if not stats.failures:
        return '<p class="note">Nothing failed.</p>'
    rows = []
    for group in stats.failures:
        ids = ", ".join(group.fqids[:GROUP_IDS])
        more = group.count - GROUP_IDS
        rows.append(
            (
                group.count,
                "" if group.exit_code is None else group.exit_code,
                group.reason,
                f"{ids}, … {more} more" if more > 0 else ids,
            )
        )
    return _table(("failed", "exit code", "cause", "jobs"), rows, {0, 1})


def _resource_row(row: SubjobResources) -> tuple[object, ...]:
    asked, used = row.requested, row.used
    return (
        row.fqid,
        memory(asked.memory),
        memory(used.max_rss if used else None),
        duration(asked.walltime),
        duration(used.wall if used else None),
        "-" if asked.cores is None else asked.cores,
        duration(used.cpu if used else None),
    )


def _resources(stats: JobStats) -> str:
    used = stats.resources
    if not used.per_subjob:
        return '<p class="note">No run was measured and none asked for resources.</p>'
    summary = _table(
        ("measured", "cpu", "user", "system", "wall (sum)", "peak memory", "of request"),
        [
            (
                f"{used.measured}/{stats.total}",
                duration(used.cpu),
                duration(used.user_cpu),
                duration(used.system_cpu),
                duration(used.wall),
                f"{memory(used.max_rss)} ({used.max_rss_fqid or '-'})",
                ", ".join(
                    f"{what} up to {share:.0%}"
                    for what, share in (
                        ("memory", used.max_memory_share),
                        ("walltime", used.max_walltime_share),
                    )
                    if share is not None
                )
                or "-",
            )
        ],
        {0},
    )
    rows = sorted(used.per_subjob, key=lambda r: -(r.used.max_rss if r.used else -1))
    shown = rows[:RESOURCE_ROWS]
    note = (
        f'<p class="note">The {len(shown)} runs that used most memory, of {len(rows)}.</p>'
        if len(rows) > len(shown)
        else ""
    )
    head = ("job", "memory asked", "memory used", "walltime asked", "wall used", "cores", "cpu")
    return summary + note + _table(head, (_resource_row(r) for r in shown), {1, 2, 3, 4, 5, 6})


def report_html(stats: JobStats, grid: SubjobGrid) -> str:
    """The whole report as one HTML document (Plotly's JavaScript inlined)."""
    figs = figures(stats, grid)
    plots = "".join(
        pio.to_html(figs[name], include_plotlyjs=False, full_html=False, config=_PLOT_CONFIG)
        for name in FIGURES
    )
    made = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stats.computed_at))
    title = escape(title_line(stats))
    return (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>{title}</title><style>{_STYLE}</style>"
        f'<script type="text/javascript">{get_plotlyjs()}</script></head><body>'
        f"<h1>{title}</h1>"
        f'<p class="note">As of {escape(made)}: {escape(counts_line(stats) or "nothing")}'
        f"{escape(left_line(stats))}</p>"
        f"<h2>Status</h2>{_counts(stats)}"
        f'<div class="plots">{plots}</div>'
        f"<h2>Slowest runs</h2>{_slowest(stats)}"
        f"<h2>Failures by cause</h2>{_failures(stats)}"
        f"<h2>Resources: asked for and used</h2>{_resources(stats)}"
        "</body></html>\n"
    )


def write_report(path: Path, stats: JobStats, grid: SubjobGrid) -> Path:
    """Write the report to ``path`` (written aside, then renamed: never seen half-written)."""
    text = report_html(stats, grid)
    aside = path.with_name(f".{path.name}.part")
    try:
        aside.write_text(text, encoding="utf-8")
        aside.replace(path)
    except OSError:
        aside.unlink(missing_ok=True)  # nothing left behind of a report not written
        raise
    return path
