"""Progress displays for the GPI's long operations: rich bars on a terminal, a live HTML
display in notebooks. Installed with :func:`ganga_like.gpi.progress.set_progress_factory`.
"""

from __future__ import annotations

import html
import sys
import time
from collections.abc import Mapping
from typing import Any

from ganga_like.config.store import store
from ganga_like.gpi.progress import NullProgress, PlainProgress, Progress, ProgressFactory
from ganga_like.shell.display import SHORT, status_css

__all__ = ["NotebookProgress", "RichProgress", "notebook_factory", "terminal_factory"]


def _wanted(show: bool | None) -> bool:
    return store.value("Shell", "progress") if show is None else show


def _colours() -> dict[str, str] | None:
    display = store.section("Display")
    return dict(display.status_colours) if display.colours else None


class RichProgress:
    """A rich progress bar on stderr, started only once ``delay`` has passed."""

    def __init__(self, title: str, delay: float) -> None:
        self._title = title
        self._delay = delay
        self._start = time.monotonic()
        self._bar: Any = None
        self._task: Any = None

    def _begin(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self._bar = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            console=Console(file=sys.stderr),
            refresh_per_second=8,
        )
        self._bar.start()
        self._task = self._bar.add_task(self._title, total=None, detail="")

    def update(
        self,
        done: int,
        total: int | None,
        detail: str = "",
        counts: Mapping[str, int] | None = None,
    ) -> None:
        if self._bar is None:
            if time.monotonic() - self._start < self._delay:
                return
            self._begin()
        text = _markup_counts(counts) if counts else _escape(detail)
        self._bar.update(self._task, completed=done, total=total, detail=text)

    def close(self, summary: str = "") -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _markup_counts(counts: Mapping[str, int]) -> str:
    colours = _colours()
    parts = []
    for label, n in counts.items():
        colour = colours.get(label, "default") if colours else "default"
        text = f"{SHORT.get(label, label)}:{n}"
        parts.append(text if colour == "default" else f"[{colour}]{text}[/]")
    return " ".join(parts)


def terminal_factory(title: str, *, show: bool | None, delay: float) -> Progress:
    if not _wanted(show):
        return NullProgress()
    if sys.stderr.isatty():
        return RichProgress(title, delay)
    # Asked for explicitly but not on a terminal (output piped): the plain line.
    return PlainProgress(title, delay) if show else NullProgress()


class NotebookProgress:
    """A live HTML display in the notebook, updated at most a few times a second."""

    MIN_INTERVAL = 0.25

    def __init__(self, title: str, delay: float) -> None:
        self._title = title
        self._delay = delay
        self._start = time.monotonic()
        self._handle: Any = None
        self._shown_at = 0.0
        self._pending: str | None = None

    def update(
        self,
        done: int,
        total: int | None,
        detail: str = "",
        counts: Mapping[str, int] | None = None,
    ) -> None:
        now = time.monotonic()
        if self._handle is None and now - self._start < self._delay:
            return
        self._pending = self._html(done, total, detail, counts, now - self._start)
        if self._handle is None or now - self._shown_at >= self.MIN_INTERVAL:
            self._show(now)

    def _show(self, now: float) -> None:
        import IPython.display

        ipd: Any = IPython.display  # untyped module
        if self._pending is None:
            return
        if self._handle is None:
            self._handle = ipd.display(ipd.HTML(self._pending), display_id=True)
        else:
            self._handle.update(ipd.HTML(self._pending))
        self._shown_at = now
        self._pending = None

    def close(self, summary: str = "") -> None:
        # The last state always reaches the notebook, even if it came in quick succession.
        if self._handle is not None or self._pending is not None:
            self._show(time.monotonic())

    def _html(
        self,
        done: int,
        total: int | None,
        detail: str,
        counts: Mapping[str, int] | None,
        elapsed: float,
    ) -> str:
        colours = _colours()
        if total is None:
            bar = '<progress style="width:240px"></progress>'
            amount = ""
        else:
            bar = f'<progress style="width:240px" value="{done}" max="{max(total, 1)}"></progress>'
            amount = f" {done}/{total}"
        badges = ""
        if counts:
            spans = []
            for label, n in counts.items():
                css = status_css(label, colours)
                style = (
                    f"color:white;background:{css};border-radius:3px;padding:0 4px"
                    if css
                    else "padding:0 4px"
                )
                spans.append(
                    f'<span style="{style}">{html.escape(SHORT.get(label, label))}:{n}</span>'
                )
            badges = " ".join(spans)
        elif detail:
            badges = html.escape(detail)
        return (
            f'<div class="ganga-progress" style="font-family:monospace;font-size:12px">'
            f"<b>{html.escape(self._title)}</b> {bar}{amount} {badges} "
            f'<span style="color:#888">{elapsed:.1f}s</span></div>'
        )


def notebook_factory(title: str, *, show: bool | None, delay: float) -> Progress:
    return NotebookProgress(title, delay) if _wanted(show) else NullProgress()


FACTORIES: dict[str, ProgressFactory] = {"terminal": terminal_factory, "notebook": notebook_factory}
