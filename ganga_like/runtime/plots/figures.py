"""The figures of a job's stats: status counts over time, the run-time histogram, the
subjob grid and the failure groups; each a Plotly figure built from plain data
(``JobStats``, ``SubjobGrid``) that any view renders: the HTML report, the notebook's
dashboard, a web page (``fig.to_json()``) or ``fig.show()``.

The grid is one heatmap trace whatever its size (one cell per subjob, coloured by
status), never a shape per subjob: 100,000 cells are one array the browser paints at once.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import numpy as np
import plotly.graph_objects as go

from ganga_like.model.status_column import CODE_OF, CODES
from ganga_like.runtime.stats import JobStats
from ganga_like.runtime.stats.data import FailureGroup, duration
from ganga_like.runtime.stats.grid import SubjobGrid

__all__ = [
    "FIGURES",
    "STATUS_COLOURS",
    "failure_groups",
    "figures",
    "grid_shape",
    "run_time_histogram",
    "status_over_time",
    "subjob_grid",
]

# Web colours of the statuses (the terminal's are names a terminal knows, not these).
STATUS_COLOURS = {
    "new": "#bdbdbd",
    "submitting": "#9ecae1",
    "submitted": "#4292c6",
    "running": "#fd8d3c",
    "completing": "#fdae6b",
    "completed": "#31a354",
    "failed": "#d62728",
    "killed": "#636363",
    "completed_frozen": "#006d2c",
    "failed_frozen": "#67000d",
    "waiting": "#dadaeb",
    "skipped": "#9e9ac8",
}
# The figures ``figures()`` builds, by name, in the order views show them.
FIGURES = ("status_over_time", "run_time", "grid", "failures")
# Failure groups drawn as bars (the rest are counted in the last bar).
SHOWN_GROUPS = 15
# Cells per grid row for each row: a grid about 2.5 times as wide as high.
GRID_ASPECT = 2.5
_LAYOUT: dict[str, Any] = {
    "template": "plotly_white",
    "margin": {"l": 60, "r": 20, "t": 50, "b": 40},
    "height": 360,
}


def _colour(label: str) -> str:
    return STATUS_COLOURS.get(label, "#969696")


def status_over_time(stats: JobStats) -> go.Figure:
    """(Sub)jobs in each status as their counts changed: stacked areas."""
    times = [datetime.fromtimestamp(when) for when, _ in stats.over_time]
    labels = sorted({label for _, counts in stats.over_time for label in counts}, key=_order)
    fig = go.Figure(layout={**_LAYOUT, "title": f"Status over time: {stats.title}"})
    for label in labels:
        fig.add_trace(
            go.Scatter(
                x=times,
                y=[counts.get(label, 0) for _, counts in stats.over_time],
                name=label,
                mode="lines",
                line={"shape": "hv", "width": 0.5, "color": _colour(label)},
                stackgroup="status",
            )
        )
    fig.update_layout(yaxis_title=stats.unit, hovermode="x unified")
    return fig


def run_time_histogram(stats: JobStats) -> go.Figure:
    """How many runs took how long: the stats' equal-width bins as bars."""
    hist = stats.run_time_histogram
    lows, highs = hist.edges[:-1], hist.edges[1:]
    fig = go.Figure(layout={**_LAYOUT, "title": f"Run time: {stats.run_time.count} runs"})
    fig.add_trace(
        go.Bar(
            x=[(low + high) / 2 for low, high in zip(lows, highs, strict=True)],
            y=list(hist.counts),
            width=[high - low for low, high in zip(lows, highs, strict=True)],
            hovertext=[
                f"{duration(low)} to {duration(high)}: {n}"
                for low, high, n in zip(lows, highs, hist.counts, strict=True)
            ],
            hoverinfo="text",
            marker={"color": _colour("completed"), "line": {"width": 0}},
            name="runs",
        )
    )
    fig.update_layout(xaxis_title="seconds", yaxis_title="runs", bargap=0)
    return fig


def grid_shape(cells: int) -> tuple[int, int]:
    """(rows, columns) of the grid of ``cells``: about GRID_ASPECT times as wide as high."""
    columns = max(1, min(cells, math.ceil(math.sqrt(cells * GRID_ASPECT))))
    return max(1, -(-cells // columns)), columns


def subjob_grid(grid: SubjobGrid, failures: tuple[FailureGroup, ...] = ()) -> go.Figure:
    """One cell per (sub)job, row by row in id order, coloured by status; hovering a cell
    names it with its status, and for a failed one its exit code and cause."""
    cells = len(grid)
    rows, columns = grid_shape(cells)
    codes = np.full(rows * columns, np.nan)
    codes[:cells] = np.fromiter((CODE_OF.get(label, -1) for label in grid.labels), float, cells)
    why = {fqid: group for group in failures for fqid in group.fqids}
    hover = np.full(rows * columns, "", dtype=object)
    hover[:cells] = [
        _cell_text(name, label, why.get(name))
        for name, label in zip(grid.names(), grid.labels, strict=True)
    ]
    stops = len(CODES)
    scale = [
        [edge / stops, _colour(label)]
        for code, label in enumerate(CODES)
        for edge in (code, code + 1)
    ]
    fig = go.Figure(layout={**_LAYOUT, "title": f"{cells} (sub)jobs by status"})
    fig.add_trace(
        go.Heatmap(
            z=codes.reshape(rows, columns),
            text=hover.reshape(rows, columns),
            hovertemplate="%{text}<extra></extra>",
            colorscale=scale,
            zmin=-0.5,
            zmax=stops - 0.5,
            showscale=False,
            hoverongaps=False,
            xgap=1 if columns <= 100 else 0,
            ygap=1 if columns <= 100 else 0,
        )
    )
    counts: dict[str, int] = {}
    for label in grid.labels:
        counts[label] = counts.get(label, 0) + 1
    for label in sorted(counts, key=_order):  # the legend: one entry per status present
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                marker={"symbol": "square", "size": 12, "color": _colour(label)},
                name=f"{label} {counts[label]}",
            )
        )
    hidden = {"showticklabels": False, "showgrid": False, "zeroline": False}
    fig.update_layout(
        xaxis=hidden,
        yaxis={**hidden, "autorange": "reversed", "scaleanchor": "x"},
        plot_bgcolor="white",
    )
    return fig


def _cell_text(name: str, label: str, group: FailureGroup | None) -> str:
    if group is None:
        return f"{name} {label}"
    code = "" if group.exit_code is None else f"exit code {group.exit_code}<br>"
    return f"{name} {label}<br>{code}{group.reason}"


def failure_groups(stats: JobStats) -> go.Figure:
    """The failure groups, largest first: how many failed alike, and why."""
    shown = list(stats.failures[:SHOWN_GROUPS])
    names = [_group_name(group) for group in shown]
    counts = [group.count for group in shown]
    ids = [", ".join(group.fqids[:8]) + (", …" if group.count > 8 else "") for group in shown]
    rest = stats.failures[SHOWN_GROUPS:]
    if rest:
        names.append(f"{len(rest)} more groups")
        counts.append(sum(group.count for group in rest))
        ids.append("")
    failed = sum(counts)
    fig = go.Figure(layout={**_LAYOUT, "title": f"Failures by cause: {failed} failed"})
    fig.add_trace(
        go.Bar(
            x=counts,
            y=names,
            orientation="h",
            customdata=ids,
            hovertemplate="%{y}: %{x}<br>%{customdata}<extra></extra>",
            marker={"color": _colour("failed")},
            name="failed",
        )
    )
    fig.update_layout(yaxis={"autorange": "reversed", "automargin": True}, xaxis_title="failed")
    return fig


def _group_name(group: FailureGroup) -> str:
    code = group.exit_code
    if code is None or group.reason == f"exit code {code}":
        return group.reason
    return f"{group.reason} [exit {code}]"


def _order(label: str) -> int:
    return CODE_OF.get(label, len(CODES))


def figures(stats: JobStats, grid: SubjobGrid) -> dict[str, go.Figure]:
    """Every figure of a job, by name (``FIGURES`` is their order)."""
    return {
        "status_over_time": status_over_time(stats),
        "run_time": run_time_histogram(stats),
        "grid": subjob_grid(grid, stats.failures),
        "failures": failure_groups(stats),
    }
