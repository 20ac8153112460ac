"""The waits and limits every batch backend has, as a configuration section to extend.

A backend's section subclasses :class:`BatchSection` and may add options of its own; they
are set like any other (``c.SGE.poll_interval = 10`` in the config file,
``config.SGE.poll_interval = 1`` at runtime), and the backend reads them from the frozen
section its context carries (``ctx.config[SGE].poll_interval``).
"""

from __future__ import annotations

from typing import TypeVar

from traitlets import Float, Int
from traitlets.config import Configurable

from ganga_like.config.snapshot import ConfigSnapshot

__all__ = ["BatchSection", "single_attempt"]


class BatchSection(Configurable):
    """How often a batch scheduler is asked, and how patiently (a backend's section
    subclasses it)."""

    # A submission to a scheduler that does not answer: this many attempts in all, the
    # first retry after ``submit_backoff`` seconds, each next one twice as late, and no new
    # attempt once ``submit_patience`` seconds have gone by.
    submit_attempts = Int(
        4,
        min=1,
        help="Submission attempts in all when the scheduler does not answer.",
    ).tag(config=True)
    submit_backoff = Float(
        2.0,
        min=0.0,
        help="Seconds before the first submission retry; each next one waits twice as long.",
    ).tag(config=True)
    submit_patience = Float(
        20.0,
        min=0.0,
        help="No new submission attempt starts later than this many seconds after the first.",
    ).tag(config=True)
    command_timeout = Float(
        60.0,
        min=0.0,
        help="Longest, in seconds, any one scheduler command may take.",
    ).tag(config=True)
    # The monitor may be woken often (wait() pokes it); the scheduler is asked at most once
    # per poll_interval, whoever asks, and at most once per min_poll_interval while (sub)jobs
    # change state: the wait between queries starts there after a change and doubles up to
    # poll_interval while none is seen.
    poll_interval = Float(
        5.0,
        min=0.0,
        help="The scheduler is asked for job statuses at most once per this many seconds, "
        "however often the monitor wakes (more often while jobs change: min_poll_interval).",
    ).tag(config=True)
    min_poll_interval = Float(
        1.0,
        min=0.0,
        help="While (sub)jobs change state the scheduler is asked once per this many "
        "seconds; with nothing changing the wait doubles, up to poll_interval.",
    ).tag(config=True)
    # A job the queue shows as finished is reported as soon as the history confirms it
    # (with its exit code); if it has not after this long, the queue's word is taken.
    final_grace_seconds = Float(
        60.0,
        min=0.0,
        help="Seconds to wait for the scheduler's history to confirm a job its queue shows "
        "as finished (with its exit code) before the queue's word is taken.",
    ).tag(config=True)
    # What an ended job used reaches some schedulers' history later than its end (Slurm's
    # steps): its status is reported at once, and its use is looked for this much longer.
    usage_grace_seconds = Float(
        120.0,
        min=0.0,
        help="Seconds an ended job is still looked for in the scheduler's history until "
        "what it used (memory, CPU) is accounted there; then it is left unmeasured.",
    ).tag(config=True)
    # A job neither the queue nor the history lists is only concluded gone (cancelled while
    # pending, or lost) after being missing this long AND for this many poll cycles: the
    # history lags right after a job ends.
    vanish_seconds = Float(
        30.0,
        min=0.0,
        help="A job neither the queue nor the history lists is concluded gone only after "
        "being missing this many seconds (and vanish_cycles polls).",
    ).tag(config=True)
    vanish_cycles = Int(
        3,
        min=1,
        help="A job neither the queue nor the history lists is concluded gone only after "
        "being missing this many polls (and vanish_seconds).",
    ).tag(config=True)


Section = TypeVar("Section", bound=BatchSection)


def single_attempt(declared: type[Section], section: Section) -> Section:
    """``section`` (of the class ``declared``) but for a single submission attempt: a
    preview should not wait out a scheduler that is down."""
    alone = ConfigSnapshot({declared: section})
    return alone.replaced({declared: {"submit_attempts": 1}})[declared]
