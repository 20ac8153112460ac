"""Retrying scheduler commands with doubling back-off, and submitting without ever
submitting twice."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from .scheduler_commands import CommandError

__all__ = ["RetrySettings", "retry", "submit_with_retry"]


class RetrySettings(Protocol):
    """How long a backend keeps trying a scheduler that does not answer."""

    @property
    def submit_attempts(self) -> int: ...  # attempts in all
    @property
    def submit_backoff(self) -> float: ...  # seconds before the first retry, then doubled
    @property
    def submit_patience(self) -> float: ...  # no new attempt this long after the first


def retry(
    action: Callable[[], Any], settings: RetrySettings, sleep: Callable[[float], None] = time.sleep
) -> Any:
    """Run ``action``, retrying transient :class:`CommandError`\\ s with doubling back-off.

    Stops after ``submit_attempts`` attempts, or when the next attempt would start more
    than ``submit_patience`` seconds after the first; the last error is then raised.
    Only for commands that change nothing: a submission has :func:`submit_with_retry`.
    """
    started = time.monotonic()
    delay = settings.submit_backoff
    attempt = 1
    while True:
        try:
            return action()
        except CommandError as exc:
            if _give_up(exc, attempt, time.monotonic() - started + delay, settings):
                raise
            sleep(delay)
            delay *= 2
            attempt += 1


def _give_up(exc: CommandError, attempt: int, next_start: float, settings: RetrySettings) -> bool:
    if not exc.transient:
        return True
    if attempt >= settings.submit_attempts or next_start > settings.submit_patience:
        if attempt > 1:
            exc.message += f" (gave up after {attempt} attempts)"
        return True
    return False


def submit_with_retry(
    submit: Callable[[], str],
    find_by_name: Callable[[Sequence[str]], dict[str, str]],
    name: str,
    settings: RetrySettings,
    *,
    never_sent: re.Pattern[str],
    lookup_hint: str,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Submit (``submit()`` returns the scheduler's id), retrying like :func:`retry`.

    Every submission carries a unique job ``name``. After a failure that may hide a job
    the scheduler accepted (a timeout, a dropped connection: anything ``never_sent`` does
    not match), the job is looked up by that name before anything is submitted again; as
    long as that look-up cannot be made, nothing is resubmitted. ``lookup_hint`` tells
    the user how to look for it when giving up.
    """
    started = time.monotonic()
    delay = settings.submit_backoff
    attempt = 1
    unresolved = False  # an earlier attempt may have been accepted
    while True:
        try:
            if unresolved:
                found = find_by_name([name])
                if name in found:
                    return found[name]
                unresolved = False
            return submit()
        except CommandError as exc:
            # Only a failure without an answer can hide an accepted job: a refusal is the
            # scheduler's answer, and a message that never left cannot have been accepted.
            unresolved = unresolved or (exc.transient and not never_sent.search(exc.message))
            if _give_up(exc, attempt, time.monotonic() - started + delay, settings):
                if unresolved:
                    exc.message += (
                        f"; the job may have been accepted all the same: "
                        f"look for it with `{lookup_hint}`"
                    )
                raise
            sleep(delay)
            delay *= 2
            attempt += 1
