"""The waits and limits every batch backend has, as a configuration section to extend and
the frozen values the base works from.

A backend's section subclasses :class:`BatchSection` (its options are set like any other:
``c.SGE.poll_interval = 10`` in the config file, ``config.SGE.poll_interval = 1`` at
runtime), and its settings subclass :class:`BatchWaits`, the same values as a frozen
dataclass that :meth:`BatchWaits.from_section` reads. Both may add options of their own.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from typing import Any, Self

from traitlets import Float, Int
from traitlets.config import Configurable

__all__ = ["BatchSection", "BatchWaits"]


@dataclass(frozen=True)
class BatchWaits:
    """Waits and limits; each field is the section's option of the same name."""

    # A submission to a scheduler that does not answer: this many attempts in all, the
    # first retry after ``submit_backoff`` seconds, each next one twice as late, and no new
    # attempt once ``submit_patience`` seconds have gone by.
    submit_attempts: int = 4
    submit_backoff: float = 2.0
    submit_patience: float = 20.0
    # Longest any single scheduler command may take.
    command_timeout: float = 60.0
    # The monitor may be woken often (wait() pokes it); the scheduler is asked at most once
    # per this many seconds, whoever asks...
    poll_interval: float = 5.0
    # ...and at most once per this many while (sub)jobs change state: the wait between
    # queries starts here after a change and doubles up to poll_interval while none is seen.
    min_poll_interval: float = 1.0
    # A job the queue shows as finished is reported as soon as the history confirms it
    # (with its exit code); if it has not after this long, the queue's word is taken.
    final_grace_seconds: float = 60.0
    # A job neither the queue nor the history lists is only concluded gone (cancelled while
    # pending, or lost) after being missing this long AND for this many poll cycles: the
    # history lags right after a job ends.
    vanish_seconds: float = 30.0
    vanish_cycles: int = 3

    @classmethod
    def from_section(cls, section: Any) -> Self:
        """The values of a configuration section declaring these options."""
        return cls(**{f.name: getattr(section, f.name) for f in fields(cls)})


def _default(name: str) -> Any:
    found = BatchWaits.__dataclass_fields__[name].default
    assert found is not MISSING
    return found


class BatchSection(Configurable):
    """How often a batch scheduler is asked, and how patiently (a backend's section
    subclasses it)."""

    submit_attempts = Int(
        _default("submit_attempts"),
        min=1,
        help="Submission attempts in all when the scheduler does not answer.",
    ).tag(config=True)
    submit_backoff = Float(
        _default("submit_backoff"),
        min=0.0,
        help="Seconds before the first submission retry; each next one waits twice as long.",
    ).tag(config=True)
    submit_patience = Float(
        _default("submit_patience"),
        min=0.0,
        help="No new submission attempt starts later than this many seconds after the first.",
    ).tag(config=True)
    command_timeout = Float(
        _default("command_timeout"),
        min=0.0,
        help="Longest, in seconds, any one scheduler command may take.",
    ).tag(config=True)
    poll_interval = Float(
        _default("poll_interval"),
        min=0.0,
        help="The scheduler is asked for job statuses at most once per this many seconds, "
        "however often the monitor wakes (more often while jobs change: min_poll_interval).",
    ).tag(config=True)
    min_poll_interval = Float(
        _default("min_poll_interval"),
        min=0.0,
        help="While (sub)jobs change state the scheduler is asked once per this many "
        "seconds; with nothing changing the wait doubles, up to poll_interval.",
    ).tag(config=True)
    final_grace_seconds = Float(
        _default("final_grace_seconds"),
        min=0.0,
        help="Seconds to wait for the scheduler's history to confirm a job its queue shows "
        "as finished (with its exit code) before the queue's word is taken.",
    ).tag(config=True)
    vanish_seconds = Float(
        _default("vanish_seconds"),
        min=0.0,
        help="A job neither the queue nor the history lists is concluded gone only after "
        "being missing this many seconds (and vanish_cycles polls).",
    ).tag(config=True)
    vanish_cycles = Int(
        _default("vanish_cycles"),
        min=1,
        help="A job neither the queue nor the history lists is concluded gone only after "
        "being missing this many polls (and vanish_seconds).",
    ).tag(config=True)
