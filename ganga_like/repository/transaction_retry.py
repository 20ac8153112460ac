"""Retried transactions: how every change of the GPI reaches the repository.

A transaction that fails with a transient error (another session changed the same records at
the same moment and the server could not merge the changes, or the shared server is being
restarted) is aborted and run again after a jittered, exponentially growing pause, so that
writers that collided do not collide again in lockstep. After the last attempt it is aborted
for good and one :class:`RepositoryConflictError` says so: a session is never left holding a
failed transaction (which would refuse every later change until the process exits).

Anything else (a validation error, a full disk) is not retried: the transaction is aborted
and the error goes to the caller as it was.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from transaction.interfaces import TransientError

from ganga_like.errors import RepositoryConflictError
from ganga_like.repository.pg_outage import is_disconnection

__all__ = ["RetryPolicy", "conflict_error", "is_transient", "repeat", "retried", "safe_commit"]

log = logging.getLogger("ganga_like")

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a transaction is tried.

    Pauses are drawn uniformly from ``[0, min(max_delay, first_delay * 2**n)]`` ("full
    jitter"). The defaults wait 2.3 s at most in all (1.1 s on average) before giving up:
    long enough to ride over a burst of writers or a restarting server (whose successor
    each call also waits for), short enough that a user at the prompt gets an answer.
    """

    attempts: int = 10
    first_delay: float = 0.005
    max_delay: float = 1.0

    def pause(self, failed: int, rng: random.Random) -> float:
        """Seconds to wait after the ``failed``-th failed attempt (1-based)."""
        return rng.uniform(0.0, min(self.max_delay, self.first_delay * 2 ** (failed - 1)))


DEFAULT_POLICY = RetryPolicy()
_rng = random.Random()
# What this process went through (for benchmarks and ``%monitor status``-like reports).
counts = {"retried": 0, "given_up": 0}


def is_transient(exc: BaseException) -> bool:
    """Whether trying the same transaction again may succeed: a conflict, or a shared
    server that went away (ZEO's ClientDisconnected is a TransientError too), or the
    PostgreSQL server of a repository there (the driver's own error)."""
    return isinstance(exc, TransientError) or is_disconnection(exc)


def conflict_error(what: str, exc: BaseException, attempts: int) -> RepositoryConflictError:
    """The one line the user gets when ``what`` failed ``attempts`` times."""
    if type(exc).__name__ == "ClientDisconnected" or is_disconnection(exc):
        why = "the repository server could not be reached"
    else:
        why = "other sessions kept changing the same records at the same moment"
    tries = f"{attempts} attempts" if attempts > 1 else "one attempt"
    return RepositoryConflictError(
        f"{what}: not saved, {why} ({tries}); it was rolled back, "
        "nothing of it was kept, and it can be done again"
    )


def repeat(
    action: Callable[[], T], *, what: str = "the change", policy: RetryPolicy = DEFAULT_POLICY
) -> T:
    """``action()``, called again after a pause each time it fails with a transient error;
    after ``policy.attempts`` failures, one RepositoryConflictError. ``action`` cleans up
    after itself when it fails (aborts its transaction, closes what it opened)."""
    failed = 0
    while True:
        try:
            return action()
        except BaseException as exc:
            if not is_transient(exc):
                raise
            failed += 1
            if failed >= policy.attempts:
                counts["given_up"] += 1
                raise conflict_error(what, exc, failed) from exc
            counts["retried"] += 1
            log.debug(
                "%s: attempt %d of %d failed: %s",
                what,
                failed,
                policy.attempts,
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            )
        time.sleep(policy.pause(failed, _rng))


def retried(
    tm: Any,
    action: Callable[[], T],
    *,
    what: str = "the change",
    policy: RetryPolicy = DEFAULT_POLICY,
    catch_up: Callable[[], object] | None = None,
    first: Callable[[], T] | None = None,
) -> T:
    """Run ``action`` in a transaction of ``tm`` and commit it, retrying transient failures.

    Each attempt begins a new transaction (it sees the latest commits), so nothing may be
    pending in ``tm`` when this is called. ``action`` must be safe to run again after an
    abort: it may change persistent objects (the abort undoes that), but must not have
    effects outside the repository. Whatever fails, the transaction is aborted.

    ``catch_up`` is called before each retry: a shared-mode client learns of other
    sessions' commits by messages from the server, which may still be on their way after
    a conflict; a round trip to the server makes sure the retry sees the commit it
    conflicted with, instead of meeting the same conflict again.

    ``first``, when given, is run by the first attempt instead of ``action``: it may have
    effects outside the repository, as it is never run again; ``action`` then records
    the same from what ``first`` left behind.
    """
    tries = 0

    def attempt() -> T:
        nonlocal tries
        tries += 1
        if tries > 1 and catch_up is not None:
            catch_up()
        tm.begin()
        try:
            result = first() if first is not None and tries == 1 else action()
            tm.commit()
        except BaseException:
            tm.abort()
            raise
        return result

    return repeat(attempt, what=what, policy=policy)


def safe_commit(tm: Any, what: str = "the change") -> None:
    """Commit what is pending; if that fails, abort it so the session stays usable.

    Pending changes cannot be replayed, so a conflict is not retried: it becomes one
    :class:`RepositoryConflictError` saying the changes were rolled back."""
    try:
        tm.commit()
    except BaseException as exc:
        tm.abort()
        if is_transient(exc):
            raise conflict_error(what, exc, 1) from exc
        raise
