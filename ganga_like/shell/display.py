"""How jobs look in the shell (rich, coloured) and in notebooks (HTML).

Both renderers share one model: the rows of :func:`ganga_like.gpi.job_table.job_row` for the
configured columns, plus each master's subjob counts by status so they can be coloured.
Long tables show their first and last rows only; subjob tables then read just those
subjobs. Scripts keep the plain ``repr`` of the GPI: these displays are registered with
IPython's formatters by the extension, never on the classes themselves.
"""

from __future__ import annotations

import html
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ganga_like.config.store import store
from ganga_like.gpi.job import Job, SubjobSlice
from ganga_like.gpi.job_table import cell, header, job_row
from ganga_like.gpi.proxy import unwrap, wrap
from ganga_like.gpi.slices import JobSlice
from ganga_like.gpi.table_text import shown_columns
from ganga_like.gpi.workflow_graph import WorkflowGraph
from ganga_like.model.base import Component, GangaObject, schema_items
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.parts import job_parts
from ganga_like.model.times import JobTimes
from ganga_like.runtime.stats.data import JobStats
from ganga_like.runtime.workflow.explain import dependency_line
from ganga_like.shell.terminal import shell_colours

if TYPE_CHECKING:
    from rich.console import RenderableType

__all__ = [
    "TableModel",
    "job_html",
    "job_text",
    "slice_html",
    "slice_text",
    "status_css",
    "table_model",
    "times_html",
    "unregister",
]

SHORT = {
    "completed": "done",
    "failed": "fail",
    "running": "run",
    "submitted": "sub",
    "killed": "kill",
    "new": "new",
    "submitting": "subm",
    "completing": "cmpl",
    "completed_frozen": "cfrz",
    "failed_frozen": "ffrz",
    "waiting": "wait",
    "skipped": "skip",
}


# -- the shared model -----------------------------------------------------------------


@dataclass
class Row:
    cells: dict[str, str]
    status: str
    counts: list[tuple[str, int]] = field(default_factory=list)  # subjobs by status label


@dataclass
class TableModel:
    title: str
    total: int
    columns: list[str]
    head: list[Row]
    tail: list[Row]

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)


def _row(job: object) -> Row:
    cells = {column: cell(value) for column, value in job_row(job).items()}
    counts: list[tuple[str, int]] = []
    if isinstance(job, JobImpl):
        counts = [(s.label, n) for s, n in sorted(job.counts().items(), key=lambda kv: kv[0].place)]
        if counts:
            cells["subjobs"] = str(sum(n for _, n in counts))
    return Row(cells, cells["status"], counts)


def _pick(obj: JobSlice, limit: int) -> tuple[int, list[object], list[object]]:
    """(total, first rows, last rows); a subjob table loads only the subjobs shown."""
    if isinstance(obj, SubjobSlice):
        master: JobImpl = obj._master
        total = master.subjob_count()
        if total <= limit:
            return total, list(master.iter_subjobs()), []
        half = limit // 2
        return (
            total,
            [master.subjob(i) for i in range(half)],
            [master.subjob(i) for i in range(total - half, total)],
        )
    impls: list[object] = list(obj._impls())
    if len(impls) <= limit:
        return len(impls), impls, []
    half = limit // 2
    return len(impls), impls[:half], impls[-half:]


def table_model(obj: JobSlice) -> TableModel:
    display = store.section("Display")
    total, head, tail = _pick(obj, display.max_rows)
    rows = [_row(j) for j in head], [_row(j) for j in tail]
    columns = shown_columns([r.cells for r in (*rows[0], *rows[1])], display.columns)
    return TableModel(obj._title, total, columns, *rows)


def _colours() -> dict[str, str] | None:
    display = store.section("Display")
    return dict(display.status_colours) if display.colours else None


# -- rich, for the terminal -----------------------------------------------------------


def _status_text(label: str, colours: dict[str, str] | None) -> Any:
    from rich.text import Text

    style = colours.get(label, "") if colours else ""
    return Text(label, style="" if style == "default" else style)


def _counts_text(
    total: str, counts: Sequence[tuple[str, int]], colours: dict[str, str] | None
) -> Any:
    from rich.text import Text

    text = Text(total)
    if counts:
        text.append(" (")
        for i, (label, n) in enumerate(counts):
            if i:
                text.append(" ")
            style = colours.get(label, "") if colours else ""
            text.append(f"{SHORT.get(label, label)}:{n}", style="" if style == "default" else style)
        text.append(")")
    return text


def rich_table(model: TableModel, colours: dict[str, str] | None) -> RenderableType:
    from rich import box
    from rich.table import Table

    table = Table(
        title=f"{model.title}: {model.total}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        header_style="bold" if colours else "",
        title_style="bold" if colours else "",
        pad_edge=False,
    )
    for column in model.columns:
        # One line per job: a cell too wide for the terminal is cut, never wrapped.
        table.add_column(
            header(column),
            justify="right" if column == "fqid" else "left",
            no_wrap=True,
            overflow="ellipsis",
        )

    def add(row: Row) -> None:
        cells: list[Any] = []
        for column in model.columns:
            if column == "status":
                cells.append(_status_text(row.status, colours))
            elif column == "subjobs":
                cells.append(_counts_text(row.cells["subjobs"], row.counts, colours))
            else:
                cells.append(row.cells[column])
        table.add_row(*cells)

    for row in model.head:
        add(row)
    if model.omitted:
        table.add_row(
            *[f"… {model.omitted} more" if i == 0 else "…" for i in range(len(model.columns))],
            style="dim",
        )
    for row in model.tail:
        add(row)
    return table


def render_ansi(renderable: RenderableType, colour: bool) -> str:
    """``renderable`` as text for the terminal (ANSI colours when ``colour``)."""
    from rich.console import Console

    width = shutil.get_terminal_size((100, 24)).columns
    console = Console(
        width=width,
        force_terminal=colour,
        no_color=not colour,
        color_system="standard" if colour else None,
        highlight=False,
        emoji=False,
    )
    with console.capture() as capture:
        console.print(renderable)
    return capture.get().rstrip("\n")


def _terminal_colours() -> dict[str, str] | None:
    # Input or output piped, or NO_COLOR set: no escape codes (ganga_like.shell.terminal).
    return _colours() if shell_colours() else None


def slice_text(obj: JobSlice) -> str:
    colours = _terminal_colours()
    return render_ansi(rich_table(table_model(obj), colours), colours is not None)


def job_text(job: Job) -> str:
    colours = _terminal_colours()
    return render_ansi(_job_tree(unwrap(job), colours), colours is not None)


def _job_tree(job: JobImpl, colours: dict[str, str] | None) -> RenderableType:
    from rich.text import Text
    from rich.tree import Tree

    status = job.current_status().label
    head = Text(f"Job {job.fqid}", style="bold" if colours else "")
    if job.name:
        head.append(f" {job.name!r}")
    head.append("  ")
    head.append_text(_status_text(status, colours))
    tree = Tree(head, guide_style="dim" if colours else "")
    for name, value in job_fields(job):
        _add_branch(tree, name, value, colours)
    return tree


def _add_branch(tree: Any, name: str, value: Any, colours: dict[str, str] | None) -> None:
    from rich.text import Text

    if isinstance(value, GangaObject):
        branch = tree.add(
            Text.assemble((f"{name}: ", "bold" if colours else ""), type(value).__name__)
        )
        for sub_name, sub_value in component_fields(value):
            _add_branch(branch, sub_name, sub_value, colours)
        return
    if isinstance(value, _Counts):
        tree.add(
            Text.assemble(
                (f"{name}: ", "bold" if colours else ""),
                _counts_text(str(value.total), value.counts, colours),
            )
        )
        return
    tree.add(Text.assemble((f"{name}: ", "bold" if colours else ""), _short_repr(value)))


# -- what a job shows -----------------------------------------------------------------


@dataclass
class _Counts:
    total: int
    counts: list[tuple[str, int]]


def job_fields(job: JobImpl) -> list[tuple[str, Any]]:
    """What a job's tree shows, in reading order: what runs where, how it is split, what
    came of it. Unset optional parts (no splitter, no comment) are left out."""
    out: list[tuple[str, Any]] = []
    stored = job.stored()  # never __dict__: a job not yet read in this transaction is a ghost
    parts = job_parts()
    for part in parts.components:
        value = stored.get(part.name)
        if value is not None:
            out.append((part.name, value))
    for part in parts.lists:
        if stored.get(part.name):
            out.append((part.name, getattr(job, part.name)))
    waits = dependency_line(job)
    if waits is not None:
        out.append(("after", _Text(waits)))
    if job.is_master:
        counts = [(s.label, n) for s, n in sorted(job.counts().items(), key=lambda kv: kv[0].place)]
        out.append(("subjobs", _Counts(job.subjob_count(), counts)))
    elif job.exit_code is not None:
        out.append(("exit_code", job.exit_code))
    if job.comment:
        out.append(("comment", job.comment))
    # Not job.times(): that reads every subjob (seconds for a large master) to show a line.
    times = job.own_timeline()
    if times:
        import datetime as dt

        out.append(
            (
                "time",
                _Text(
                    ", ".join(
                        f"{label} {dt.datetime.fromtimestamp(t).strftime('%Y-%m-%d %H:%M:%S')}"
                        for label, t in sorted(times.items(), key=lambda kv: kv[1])
                    )
                ),
            )
        )
    return out


@dataclass
class _Text:
    """Shown as is, not as a repr."""

    text: str


def component_fields(obj: GangaObject) -> list[tuple[str, Any]]:
    """A component's attributes that differ from their defaults (all of them are noise
    otherwise), or the first two when nothing was set."""
    items = list(schema_items(type(obj)))
    stored = obj.stored()
    chosen = [(n, getattr(obj, n)) for n, t in items if n in stored or isinstance(t, Component)]
    return [(n, v) for n, v in chosen if v is not None] or [
        (n, getattr(obj, n)) for n, _ in items[:2]
    ]


def _short_repr(value: Any, limit: int = 6) -> str:
    if isinstance(value, _Text):
        return value.text
    if isinstance(value, tuple | list):
        items = list(value)
        shown = ", ".join(_short_repr(v) for v in items[:limit])
        more = f", … {len(items) - limit} more" if len(items) > limit else ""
        return f"[{shown}{more}]"
    if isinstance(value, GangaObject):
        return repr(wrap(value))
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "…"


# -- HTML, for notebooks --------------------------------------------------------------

# The terminal's basic colours, as shades that read well on a white page with white text
# on top (the terminal's own #0000ff blue or #ffff00 yellow do not).
_CSS_NAMES: dict[str, str] = {
    "black": "#424242",
    "red": "#c62828",
    "green": "#2e7d32",
    "yellow": "#b7860b",
    "blue": "#1565c0",
    "magenta": "#8e24aa",
    "cyan": "#00838f",
    "white": "#9e9e9e",
    "bright_black": "#757575",
    "bright_red": "#e53935",
    "bright_green": "#43a047",
    "bright_yellow": "#c9a227",
    "bright_blue": "#1e88e5",
    "bright_magenta": "#ab47bc",
    "bright_cyan": "#0097a7",
    "bright_white": "#bdbdbd",
}


def status_css(label: str, colours: dict[str, str] | None) -> str:
    """A CSS colour for a status, from the same colour names the terminal uses."""
    if not colours:
        return ""
    name = colours.get(label, "default")
    if name == "default":
        return ""
    css = _CSS_NAMES.get(name)
    if css is None:
        from rich.color import Color

        css = Color.parse(name).get_truecolor().hex
        _CSS_NAMES[name] = css
    return css


_STYLE = "border-collapse:collapse;font-family:monospace;font-size:12px;margin:2px 0"
_CELL = "padding:2px 10px;text-align:left;border-bottom:1px solid #ddd"
_TREE_CELL = "padding:1px 8px;text-align:left;vertical-align:top;border:none"


def _badge(label: str, text: str, colours: dict[str, str] | None) -> str:
    css = status_css(label, colours)
    style = (
        f"color:white;background:{css};border-radius:3px;padding:0 4px" if css else "padding:0 4px"
    )
    return f'<span style="{style}">{html.escape(text)}</span>'


def slice_html(obj: JobSlice) -> str:
    model = table_model(obj)
    colours = _colours()
    head = "".join(f'<th style="{_CELL}">{header(c)}</th>' for c in model.columns)
    body: list[str] = []

    def add(row: Row) -> None:
        cells = []
        for column in model.columns:
            if column == "status":
                content = _badge(row.status, row.status, colours)
            elif column == "subjobs":
                parts = [html.escape(row.cells["subjobs"])]
                parts += [
                    _badge(label, f"{SHORT.get(label, label)}:{n}", colours)
                    for label, n in row.counts
                ]
                content = " ".join(parts)
            else:
                content = html.escape(row.cells[column])
            cells.append(f'<td style="{_CELL}">{content}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")

    for row in model.head:
        add(row)
    if model.omitted:
        body.append(
            f'<tr><td style="{_CELL};color:#888" colspan="{len(model.columns)}">'
            f"… {model.omitted} more …</td></tr>"
        )
    for row in model.tail:
        add(row)
    caption = (
        f'<caption style="text-align:left;font-weight:bold;padding:2px 0">'
        f"{html.escape(model.title)}: {model.total}</caption>"
    )
    return (
        f'<table class="ganga-jobs" style="{_STYLE}">{caption}<thead><tr>{head}'
        f"</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def job_html(job: Job) -> str:
    impl: JobImpl = unwrap(job)
    colours = _colours()
    status = impl.current_status().label
    name = f" {html.escape(repr(impl.name))}" if impl.name else ""
    title = f"<b>Job {html.escape(impl.fqid)}</b>{name} {_badge(status, status, colours)}"
    return (
        f'<div class="ganga-job" style="font-family:monospace;font-size:12px">{title}'
        f"{_fields_html(job_fields(impl), colours)}</div>"
    )


def times_html(times: JobTimes) -> str:
    """``j.time`` in a notebook: the rows of ``details()`` as a table."""
    cell_style = 'style="text-align:left;padding:0 8px"'

    def row(*cells: str) -> str:
        return "<tr>" + "".join(f"<td {cell_style}>{html.escape(c)}</td>" for c in cells) + "</tr>"

    body = [row(name, shown) for name, shown in times.rows()]
    subjobs = times.subjob_rows()
    if subjobs is not None:
        body.append(
            f"<tr><th {cell_style}>subjobs ({times.subjob_count})</th>"
            f"<th {cell_style}>first</th><th {cell_style}>last</th></tr>"
        )
        body.extend(row(*cells) for cells in subjobs)
    caption = f'<caption style="text-align:left">times of job {html.escape(times.fqid)}</caption>'
    return (
        f'<table class="ganga-times" style="{_STYLE}">{caption}'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _fields_html(fields: Iterable[tuple[str, Any]], colours: dict[str, str] | None) -> str:
    rows = []
    for name, value in fields:
        if isinstance(value, GangaObject):
            inner = (
                f"{html.escape(type(value).__name__)}"
                f"{_fields_html(component_fields(value), colours)}"
            )
        elif isinstance(value, _Counts):
            inner = " ".join(
                [str(value.total)]
                + [
                    _badge(label, f"{SHORT.get(label, label)}:{n}", colours)
                    for label, n in value.counts
                ]
            )
        else:
            inner = html.escape(_short_repr(value))
        rows.append(
            f'<tr style="background:none"><td style="{_TREE_CELL};font-weight:bold">'
            f'{html.escape(name)}</td><td style="{_TREE_CELL}">{inner}</td></tr>'
        )
    return (
        f'<table style="{_STYLE};margin-left:10px;border-left:2px solid #e0e0e0">'
        f"{''.join(rows)}</table>"
    )


# -- registration (the extension registers lazily; this is the way back) ----------------


def _slice_classes() -> list[type[JobSlice]]:
    found: list[type[JobSlice]] = []
    pending: list[type[JobSlice]] = [JobSlice]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def unregister(ip: Any) -> None:
    formatters = ip.display_formatter.formatters
    for mime in ("text/html", "text/plain"):
        for cls in (*_slice_classes(), Job, JobStats, WorkflowGraph):
            formatters[mime].pop(cls, None)
