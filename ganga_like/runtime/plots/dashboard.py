"""``j.dashboard()``: a job's figures in a notebook, redrawn as the job moves, without
holding the kernel.

It shows a summary (the counts, time left and failure groups as a static HTML table, the
plain summary as text) and one display per figure (Plotly's mimetype, which JupyterLab,
Notebook 7 and VS Code draw), each a display handle made in the cell. A task on the
kernel's event loop draws them first (so the cell returns at once), then looks again
every ``interval`` seconds (longer when reading the stats took long: at most a quarter of
the kernel's time goes to it), in a new transaction, as ``wait_async`` does, and updates
the displays in place; it stops after drawing a job whose (sub)jobs all ended, or on
``stop()``. The cells run meanwhile. Without Plotly only the summary is drawn.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib.util
import json
import time
from collections.abc import Callable
from html import escape
from typing import Any

from ganga_like.model.status import Status
from ganga_like.runtime.stats import JobStats
from ganga_like.runtime.stats.data import counts_line, left_line, summary, title_line
from ganga_like.runtime.stats.grid import SubjobGrid

__all__ = ["PLOTLY_MIMETYPE", "Dashboard", "summary_bundle"]

PLOTLY_MIMETYPE = "application/vnd.plotly.v1+json"
FINAL_LABELS = frozenset(status.label for status in Status if status.final)
# Share of the kernel's time the looking may take: the next look waits at least this many
# times as long as the last one took.
_PATIENCE = 3.0
_SHOWN_GROUPS = 5

Source = Callable[[], tuple[JobStats, SubjobGrid]]


def summary_bundle(stats: JobStats, note: str = "") -> dict[str, str]:
    """The summary as a display bundle: a static HTML table and the plain text."""
    rows = [f"<tr><th>status</th><td>{escape(counts_line(stats) or 'nothing')}"]
    rows.append(f"{escape(left_line(stats))}</td></tr>")
    for group in stats.failures[:_SHOWN_GROUPS]:
        shown = ", ".join(group.fqids[:6]) + (", …" if group.count > 6 else "")
        rows.append(
            f"<tr><th>failed</th><td>{group.count}: {escape(group.reason)}: "
            f"{escape(shown)}</td></tr>"
        )
    tail = f"<p><i>{escape(note)}</i></p>" if note else ""
    html = f"<b>{escape(title_line(stats))}</b><table>{''.join(rows)}</table>{tail}"
    return {"text/html": html, "text/plain": summary(stats) + (f"\n{note}" if note else "")}


def _figure_bundles(stats: JobStats, grid: SubjobGrid) -> dict[str, dict[str, Any]]:
    try:
        from ganga_like.runtime.plots.figures import figures
    except ImportError:  # plotly or numpy not installed: the summary only
        return {}
    return {
        name: {PLOTLY_MIMETYPE: json.loads(fig.to_json()), "text/plain": f"<{name} figure>"}
        for name, fig in figures(stats, grid).items()
    }


def all_ended(stats: JobStats) -> bool:
    return bool(stats.counts) and all(label in FINAL_LABELS for label in stats.counts)


def _can_plot() -> bool:
    return all(importlib.util.find_spec(name) is not None for name in ("plotly", "numpy"))


class Dashboard:
    """The live displays of one job (or slice) in a notebook; ``stop()`` ends the updates."""

    def __init__(
        self, source: Source, sync: Callable[[], None], interval: float, title: str
    ) -> None:
        self._source, self._sync, self.interval, self.title = source, sync, interval, title
        self._handles: dict[str, Any] = {}
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._stopped = False
        self.updates = 0  # how many times the displays were drawn
        self.error: str | None = None
        self.stats: JobStats | None = None

    @property
    def live(self) -> bool:
        return self._task is not None and not self._task.done() and not self._stopped

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Show the displays (empty yet) and draw them from a task on ``loop`` (the
        kernel's): the cell returns at once, however long reading the stats takes."""
        import IPython.display

        display: Any = IPython.display.display  # untyped
        self._handles["summary"] = display(self._note("reading…"), raw=True, display_id=True)
        if _can_plot():
            from ganga_like.runtime.plots.figures import FIGURES

            for name in FIGURES:
                waiting = {"text/plain": f"<{name} figure: drawing…>"}
                self._handles[name] = display(waiting, raw=True, display_id=True)
        # A context of its own (not the cell's): the kernel then sends its display updates
        # as part of the request it serves now, where frontends and nbclient look, not as
        # part of the long-finished cell that started it. The displays themselves were
        # made here, in the cell, so that they stay in its output.
        self._task = loop.create_task(self._run(), context=contextvars.Context())

    def _note(self, note: str) -> dict[str, str]:
        text = f"stats of {self.title}: {note}"
        return {"text/html": f"<i>{escape(text)}</i>", "text/plain": text}

    def _draw(self) -> tuple[JobStats, float]:
        started = time.monotonic()
        self._sync()
        self.stats, self._grid = self._source()
        self.updates += 1
        return self.stats, time.monotonic() - started

    async def _run(self) -> None:
        cost = None
        try:
            while True:
                if cost is not None:
                    await asyncio.sleep(max(self.interval, _PATIENCE * cost))
                stats, cost = self._draw()
                ended = all_ended(stats)
                self._update(stats, final=ended)
                self._changed.set()
                if ended:
                    return
        except asyncio.CancelledError:
            raise
        except Exception as error:  # shown in the summary: a task has nobody to raise to
            self.error = f"{type(error).__name__}: {error}"
            if self.stats is None:
                self._handles["summary"].update(self._note(f"stopped: {self.error}"), raw=True)
            else:
                self._update(self.stats, final=True)
            self._changed.set()

    def _update(self, stats: JobStats, final: bool) -> None:
        note = f"stopped: {self.error}" if self.error else ("ended" if final else "live")
        self._handles["summary"].update(summary_bundle(stats, note), raw=True)
        for name, bundle in _figure_bundles(stats, self._grid).items():
            handle = self._handles.get(name)
            if handle is not None:
                handle.update(bundle, raw=True)

    async def next_update(self, timeout: float | None = None) -> JobStats:
        """Wait (without holding the loop) until the displays are drawn again."""
        self._changed.clear()
        await asyncio.wait_for(self._changed.wait(), timeout)
        assert self.stats is not None
        return self.stats

    def stop(self) -> None:
        """Stop updating; the displays keep what they show."""
        task = self._task
        if task is None or task.done() or self._stopped:
            return
        self._stopped = True
        task.cancel()
        stats = self.stats
        bundle = self._note("stopped") if stats is None else summary_bundle(stats, "stopped")
        with contextlib.suppress(Exception):  # a display gone with its kernel: nothing to do
            self._handles["summary"].update(bundle, raw=True)

    def __repr__(self) -> str:
        what = title_line(self.stats) if self.stats is not None else "nothing"
        state = "live" if self.live else "stopped"
        return f"<dashboard of {what}: {state}, drawn {self.updates} times>"
