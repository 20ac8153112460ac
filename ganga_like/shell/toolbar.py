"""The prompt (``ganga [3]:``) and the bottom toolbar of live job counts.

Counts come from the repository's status index (top-level jobs) and from the status
counters of the active masters (their subjobs): no job that is not running is loaded and
no subjob ever is, so the toolbar stays cheap with 100,000 jobs. They are refreshed while
the prompt waits, at most once per ``Shell.toolbar_interval``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from IPython.terminal.prompts import Prompts
from pygments.token import Token

from ganga_like.config.store import store
from ganga_like.errors import GangaError
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status
from ganga_like.repository.registry import Registry
from ganga_like.runtime.session import Session, existing_session

__all__ = ["GangaPrompts", "JobCounts", "Toolbar", "count_jobs", "summary"]

# prompt-toolkit draws toolbars in reverse video, which would turn status colours into
# backgrounds; the counts read better as coloured text.
_BASE = "noreverse"
_ACTIVE_MASTER = (Status.SUBMITTING, Status.SUBMITTED, Status.RUNNING, Status.COMPLETING)


class GangaPrompts(Prompts):
    """``ganga [3]: `` instead of ``In [3]: ``, so nobody mistakes the shell."""

    def in_prompt_tokens(self) -> list[tuple[Any, str]]:
        word = store.value("Shell", "prompt")
        return [
            (Token.Prompt, self.vi_mode()),  # type: ignore[no-untyped-call]
            (Token.Prompt, f"{word} ["),
            (Token.PromptNum, str(self.shell.execution_count)),
            (Token.Prompt, "]: "),
        ]


@dataclass
class JobCounts:
    jobs: dict[str, int] = field(default_factory=dict)  # top-level jobs by status
    subjobs: dict[str, int] = field(default_factory=dict)  # subjobs of active masters

    @property
    def total(self) -> int:
        return sum(self.jobs.values())


def count_jobs(registry: Registry) -> JobCounts:
    counts = JobCounts()
    for status in Status:
        n = len(registry.ids_with_status(status.label))
        if n:
            counts.jobs[status.label] = n
    for status in _ACTIVE_MASTER:
        for job_id in registry.ids_with_status(status.label):
            job = registry.get(job_id)
            if isinstance(job, JobImpl):
                for sub_status, n in job.counts().items():
                    counts.subjobs[sub_status.label] = counts.subjobs.get(sub_status.label, 0) + n
    return counts


def summary(counts: dict[str, int]) -> str:
    """``3 running, 12 completed`` in status order."""
    ordered = sorted(counts.items(), key=lambda kv: Status.parse(kv[0]).place)
    return ", ".join(f"{n} {label}" for label, n in ordered) or "none"


class Toolbar:
    """The callable prompt-toolkit asks for the toolbar's text at each redraw."""

    def __init__(self) -> None:
        self._text: list[tuple[str, str]] = []
        self._at = 0.0

    def __call__(self) -> list[tuple[str, str]]:
        if not store.value("Shell", "toolbar"):
            return []
        now = time.monotonic()
        if not self._text or now - self._at >= store.value("Shell", "toolbar_interval"):
            self._at = now
            self._text = self._render()
        return self._text

    def _render(self) -> list[tuple[str, str]]:
        session = existing_session()
        if session is None:
            return [(_BASE, " no repository open")]
        try:
            counts = self._counts(session)
        except GangaError as exc:
            return [(f"{_BASE} fg:ansired", f" {exc}")]
        colours = store.section("Display")
        palette = dict(colours.status_colours) if colours.colours else {}
        parts: list[tuple[str, str]] = [(_BASE, " jobs:")]
        parts += self._coloured(counts.jobs, palette) or [(_BASE, " none")]
        if counts.subjobs:
            parts.append((_BASE, "  │ subjobs:"))
            parts += self._coloured(counts.subjobs, palette)
        monitor = session.monitor
        parts.append((_BASE, "  │ monitor: "))
        parts.append((_BASE, "on") if monitor.running else (f"{_BASE} fg:ansired bold", "off"))
        if monitor.stale_backends:
            parts.append(
                (f"{_BASE} fg:ansired", f" ({', '.join(monitor.stale_backends)} unreachable)")
            )
        return parts

    @staticmethod
    def _counts(session: Session) -> JobCounts:
        # Between cells nothing of the user's is pending (the last cell committed), so
        # starting a fresh transaction here only brings in the monitor's commits.
        session.repo.abort()
        return count_jobs(session.registry())

    @staticmethod
    def _coloured(counts: dict[str, int], palette: dict[str, str]) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        ordered = sorted(counts.items(), key=lambda kv: Status.parse(kv[0]).place)
        for i, (label, n) in enumerate(ordered):
            colour = palette.get(label, "default")
            style = _BASE if colour == "default" else f"{_BASE} fg:{_pt_colour(colour)}"
            out.append((_BASE, ", " if i else " "))
            out.append((style, f"{n} {label}"))
        return out


def _pt_colour(name: str) -> str:
    """prompt-toolkit spells the basic colours ansigreen / ansibrightblue; #rrggbb as is."""
    if name.startswith("#"):
        return name
    base = name.removeprefix("bright_")
    known = {"black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"}
    if base in known:
        return f"ansibright{base}" if name.startswith("bright_") else f"ansi{base}"
    return "ansidefault"


def install(ip: Any) -> Toolbar | None:
    """Put the toolbar under ``ip``'s prompt (nothing for a simple, non-tty prompt)."""
    app = getattr(ip, "pt_app", None)
    if app is None:
        return None
    toolbar = Toolbar()
    app.bottom_toolbar = toolbar
    # prompt-toolkit redraws (and so asks the toolbar) this often while waiting for input.
    app.refresh_interval = store.value("Shell", "toolbar_interval")
    return toolbar
