"""Progress of long GPI operations: waiting for a job, bulk actions on a slice, submitting
a split job.

The GPI only reports (``update(done, total, detail)``); who shows it is decided by the
factory installed here. The default writes one self-overwriting line to stderr when stderr
is a terminal (asked to show it elsewhere, a line every few seconds). The shell installs
rich progress bars and the notebook extension a live HTML display, without this module
knowing about either.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Protocol

__all__ = [
    "NullProgress",
    "PlainProgress",
    "Progress",
    "ProgressFactory",
    "progress",
    "set_progress_factory",
]


class Progress(Protocol):
    """One operation's progress display."""

    def update(
        self,
        done: int,
        total: int | None,
        detail: str = "",
        counts: Mapping[str, int] | None = None,
    ) -> None:
        """``done`` of ``total`` steps (``total`` None: unknown, show a spinner/text).

        ``detail`` is a plain-text summary; ``counts`` (subjobs by status label), when
        given, lets a richer display colour the same information.
        """

    def close(self, summary: str = "") -> None:
        """The operation ended; ``summary`` is a last line to leave (may be empty)."""


class ProgressFactory(Protocol):
    def __call__(self, title: str, *, show: bool | None, delay: float) -> Progress:
        """A display for an operation called ``title``.

        ``show`` True/False forces it on or off; None lets the factory decide (is someone
        watching?). ``delay``: show nothing until the operation has lasted that long, so
        quick operations do not flash a bar.
        """


class NullProgress:
    """Shows nothing."""

    def update(
        self,
        done: int,
        total: int | None,
        detail: str = "",
        counts: Mapping[str, int] | None = None,
    ) -> None:
        pass

    def close(self, summary: str = "") -> None:
        pass


class PlainProgress:
    """Plain-text progress on stderr: at a terminal one line rewritten in place; into a
    file or a pipe (asked for explicitly) a new line at most every ``LOG_INTERVAL``
    seconds, so that a log reads line by line instead of as one line of carriage returns."""

    LOG_INTERVAL = 2.0

    def __init__(self, title: str, delay: float = 0.0) -> None:
        self._title = title
        self._last = ""
        self._start = time.monotonic()
        self._delay = delay
        self._in_place = sys.stderr.isatty()
        self._logged = ""  # not in place: the last line written, and when
        self._logged_at = 0.0

    def update(
        self,
        done: int,
        total: int | None,
        detail: str = "",
        counts: Mapping[str, int] | None = None,
    ) -> None:
        now = time.monotonic()
        if now - self._start < self._delay:
            return
        line = self._title
        if total is not None:
            line += f": {done}/{total}"
        if detail:
            line += f" ({detail})" if total is not None else f": {detail}"
        if line == self._last:
            return
        previous, self._last = self._last, line
        if self._in_place:
            sys.stderr.write("\r" + line.ljust(len(previous)))
            sys.stderr.flush()
        elif now - self._logged_at >= self.LOG_INTERVAL:
            self._log(line, now)

    def _log(self, line: str, now: float) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
        self._logged, self._logged_at = line, now

    def close(self, summary: str = "") -> None:
        if self._in_place and self._last:
            sys.stderr.write("\n")
            sys.stderr.flush()
        elif self._last and self._last != self._logged:
            self._log(self._last, time.monotonic())  # where it ended
        self._last = ""


def _plain_factory(title: str, *, show: bool | None, delay: float) -> Progress:
    visible = sys.stderr.isatty() if show is None else show
    return PlainProgress(title, delay) if visible else NullProgress()


_factory: ProgressFactory = _plain_factory


def set_progress_factory(factory: ProgressFactory | None) -> ProgressFactory:
    """Install ``factory`` (None: the plain default); return the previous one."""
    global _factory
    previous = _factory
    _factory = factory if factory is not None else _plain_factory
    return previous


@contextmanager
def progress(title: str, *, show: bool | None = None, delay: float = 0.0) -> Iterator[Progress]:
    """A progress display for the duration of the block; it is closed however it ends."""
    bar = _factory(title, show=show, delay=delay)
    try:
        yield bar
    finally:
        bar.close()
