"""``j.graph()`` in the shell (the text rows, statuses coloured by rich) and in a notebook
(an SVG drawn here, no graphviz, nothing fetched: it shows offline).

The SVG places each job one column right of the deepest job it waits for, draws an arrow
from each job to what waits for it, and colours each box's border with the job's status
and a bar under its name with its subjobs' mix of statuses, in the status colours of
tables (``Display.status_colours``).
"""

from __future__ import annotations

import html
from typing import Any

from ganga_like.config.store import store
from ganga_like.gpi.workflow_graph import WorkflowGraph, label, mix_text, rows
from ganga_like.runtime.workflow.graph import Graph, Node
from ganga_like.shell.display import SHORT, render_ansi, status_css
from ganga_like.shell.terminal import shell_colours

__all__ = ["graph_html", "graph_text"]


def _colours() -> dict[str, str] | None:
    display = store.section("Display")
    return dict(display.status_colours) if display.colours else None


def graph_text(graph: WorkflowGraph) -> str:
    """The rows of ``repr(graph)``, statuses coloured when the terminal shows colours."""
    from rich.text import Text

    colours = _colours() if shell_colours() else None  # no escape codes into a pipe

    def styled(status: str) -> str:
        style = colours.get(status, "") if colours else ""
        return "" if style == "default" else style

    text = Text(graph.title, style="bold" if colours else "")
    for row in rows(graph.structure):
        node = row.node
        text.append("\n" + ("    " * (row.depth - 1) + "└─▶ " if row.depth else ""))
        text.append(label(node))
        if row.repeated:
            text.append(" (above)", style="dim" if colours else "")
            continue
        text.append(" ")
        text.append(node.status, style=styled(node.status))
        if mix_text(node):
            text.append(" (")
            for i, (status, n) in enumerate(node.counts):
                text.append((" " if i else "") + f"{SHORT.get(status, status)}:{n}", styled(status))
            text.append(")")
    return render_ansi(text, colours is not None)


# -- the SVG ----------------------------------------------------------------------------

_BOX_W, _BOX_H, _GAP_X, _GAP_Y, _PAD = 170, 46, 60, 18, 10
_GREY = "#999999"


def _positions(graph: Graph) -> dict[int, tuple[int, int]]:
    """The top-left corner of each job's box."""
    placed: dict[int, tuple[int, int]] = {}
    for column, ids in enumerate(graph.layers()):
        for place, job_id in enumerate(ids):
            placed[job_id] = (
                _PAD + column * (_BOX_W + _GAP_X),
                _PAD + 18 + place * (_BOX_H + _GAP_Y),
            )
    return placed


def _box(node: Node, x: int, y: int, colours: dict[str, str] | None, focus: bool) -> str:
    border = status_css(node.status, colours) or _GREY
    width = 3 if focus else 1.5
    parts = [
        f'<g class="job" data-job="{node.job_id}" data-status="{node.status}">',
        f"<title>{html.escape(label(node))}: {node.status}"
        + (f" ({html.escape(mix_text(node))})" if mix_text(node) else "")
        + "</title>",
        f'<rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="5" fill="white" '
        f'stroke="{border}" stroke-width="{width}"/>',
        f'<text x="{x + 8}" y="{y + 17}">{html.escape(_cut(label(node), 22))}</text>',
        f'<text x="{x + _BOX_W - 8}" y="{y + 17}" text-anchor="end" fill="{border}">'
        f"{node.status}</text>",
    ]
    total = sum(n for _s, n in node.counts) or 1
    left = float(x + 8)
    span = _BOX_W - 16
    for status, n in node.counts:  # the status mix: one bar, a segment per status
        wide = span * n / total
        fill = status_css(status, colours) or _GREY
        parts.append(
            f'<rect class="mix" data-status="{status}" data-count="{n}" x="{left:.1f}" '
            f'y="{y + 27}" width="{wide:.1f}" height="10" fill="{fill}"/>'
        )
        left += wide
    parts.append("</g>")
    return "".join(parts)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _arrow(start: tuple[int, int], end: tuple[int, int], ids: tuple[int, int]) -> str:
    x1, y1 = start[0] + _BOX_W, start[1] + _BOX_H // 2
    x2, y2 = end[0], end[1] + _BOX_H // 2
    if x2 <= x1:  # (only in a cycle, which submit() refuses): from the box's bottom
        x1, y1 = start[0] + _BOX_W // 2, start[1] + _BOX_H
    return (
        f'<line class="edge" data-from="{ids[0]}" data-to="{ids[1]}" x1="{x1}" y1="{y1}" '
        f'x2="{x2 - 2}" y2="{y2}" stroke="#555" marker-end="url(#ganga-arrow)"/>'
    )


def graph_html(graph: WorkflowGraph) -> str:
    """The graph as an inline SVG, with its title."""
    colours = _colours()
    inner: Graph = graph.structure
    placed = _positions(inner)
    width = max((x for x, _y in placed.values()), default=0) + _BOX_W + _PAD
    height = max((y for _x, y in placed.values()), default=0) + _BOX_H + _PAD
    body: list[Any] = [
        '<defs><marker id="ganga-arrow" viewBox="0 0 10 10" refX="9" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#555"/></marker></defs>',
        f'<text x="{_PAD}" y="{_PAD + 6}" font-weight="bold">{html.escape(graph.title)}</text>',
    ]
    body += [_arrow(placed[up], placed[down], (up, down)) for up, down in sorted(inner.edges)]
    body += [
        _box(node, *placed[job_id], colours, job_id == graph.focus)
        for job_id, node in sorted(inner.nodes.items())
    ]
    return (
        f'<svg class="ganga-graph" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" font-family="monospace" font-size="12">{"".join(body)}</svg>'
    )
