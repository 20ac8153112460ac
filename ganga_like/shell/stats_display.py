"""How ``j.stats()`` looks in the shell: the summary's rows as a rich table, the counts in
the status colours. Scripts print the plain summary (its repr)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ganga_like.config.store import store
from ganga_like.runtime.stats.data import left_line, summary_rows, title_line
from ganga_like.shell.display import render_ansi
from ganga_like.shell.terminal import shell_colours

if TYPE_CHECKING:
    from rich.console import RenderableType

    from ganga_like.runtime.stats import JobStats

__all__ = ["stats_text"]


def _renderable(stats: JobStats, colours: dict[str, str] | None) -> RenderableType:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title_line(stats), title_justify="left", box=box.SIMPLE, show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    counts = Text()
    for index, (label, n) in enumerate(sorted(stats.counts.items())):
        style = colours.get(label, "") if colours else ""
        counts.append(("  " if index else "") + f"{label} {n}", style=style.replace("default", ""))
    counts.append(left_line(stats))
    table.add_row("status", counts)
    for label, text in summary_rows(stats)[1:]:
        failed = label.startswith("failed") and colours is not None
        table.add_row(label, Text(text, style="red" if failed else ""))
    return table


def stats_text(stats: JobStats) -> str:
    """The summary for the terminal (colours unless piped or NO_COLOR)."""
    display = store.section("Display")
    colours = dict(display.status_colours) if display.colours and shell_colours() else None
    return render_ansi(_renderable(stats, colours), colours is not None)
