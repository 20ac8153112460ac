"""Functions run inside the Dask scheduler (``client.run_on_scheduler``, which passes the
scheduler as the keyword ``dask_scheduler``): one call each for many keys, whichever client
asks.

A future lives only while some client holds it, and a session's client ends with the
session. So every submitted key is also held by a name of our own (``HOLDER``), as
``publish_dataset`` holds its futures: the task and its result stay at the scheduler until
the poll has written the outcome into the subjob's output directory (or the job is
killed), whatever session comes next.
"""

from __future__ import annotations

import time
from typing import Any

from ganga_like_dask.claim import STARTED_ATTRIBUTE

__all__ = [
    "HOLDER",
    "KILL_RECORD_PATIENCE",
    "cancel",
    "hold",
    "known",
    "observe",
    "release",
    "states",
]

HOLDER = "ganga_like-held"
# Keys cancelled by a kill, and when: a poll that comes between the cancel and the killing
# session's record of the kill must not call them failed (``states`` says "cancelled"); one
# that comes this many seconds later says "killed" (that session died before recording).
CANCELLED_ATTRIBUTE = "_ganga_like_cancelled"
KILL_RECORD_PATIENCE = 120.0
# How long a cancelled key is remembered at all.
CANCEL_MEMORY = 86400.0


def _noted(dask_scheduler: Any, name: str) -> dict[str, float]:
    """A dict kept on the scheduler under ``name`` (made on first use)."""
    noted: dict[str, float] | None = getattr(dask_scheduler, name, None)
    if noted is None:
        noted = {}
        setattr(dask_scheduler, name, noted)
    return noted


def hold(keys: list[str], dask_scheduler: Any = None) -> list[str]:
    """Hold ``keys``; those the scheduler does not know yet (their graph still on the
    way: the caller tries them again)."""
    present = [k for k in keys if k in dask_scheduler.tasks]
    if present:
        dask_scheduler.client_desires_keys(keys=present, client=HOLDER)
        # A key given again (after an interrupted submission was rolled back) is new.
        cancelled = _noted(dask_scheduler, CANCELLED_ATTRIBUTE)
        for key in present:
            cancelled.pop(key, None)
    return [k for k in keys if k not in dask_scheduler.tasks]


def known(keys: list[str], dask_scheduler: Any = None) -> list[str]:
    """The ``keys`` the scheduler knows, or whose program has started (its task may be
    forgotten since: its submitting client died before the task was held)."""
    started: dict[str, float] = getattr(dask_scheduler, STARTED_ATTRIBUTE, {})
    return [k for k in keys if k in dask_scheduler.tasks or k in started]


def release(keys: list[str], dask_scheduler: Any = None) -> None:
    """Drop our hold of ``keys`` (their outcome is written): the scheduler forgets them."""
    _release(dask_scheduler, keys)
    _forget_starts(dask_scheduler, keys)


def _forget_starts(dask_scheduler: Any, keys: list[str]) -> None:
    started: dict[str, float] = getattr(dask_scheduler, STARTED_ATTRIBUTE, {})
    for key in keys:
        started.pop(key, None)


def _release(dask_scheduler: Any, keys: list[str]) -> None:
    holder = dask_scheduler.clients.get(HOLDER)
    if holder is None:
        return
    held = [
        k
        for k in keys
        if (ts := dask_scheduler.tasks.get(k)) is not None and ts in holder.wants_what
    ]
    if held:
        dask_scheduler.client_releases_keys(keys=held, client=HOLDER)


def states(
    keys: list[str], topic: str, dask_scheduler: Any = None
) -> dict[str, tuple[str, float | None, str]]:
    """Per key: the task's state (``"unknown"`` when the scheduler does not know it), when
    its program started (from the workers' start events) and, for an erred task, its
    exception."""
    claimed: dict[str, float] = getattr(dask_scheduler, STARTED_ATTRIBUTE, {})
    started = {k: claimed[k] for k in keys if k in claimed}
    # A task that could not claim its start logged it as an event instead.
    wanted = {
        k
        for k in keys
        if k not in started and (ts := dask_scheduler.tasks.get(k)) and ts.state == "processing"
    }
    if wanted:
        for _stamp, msg in dask_scheduler.get_events(topic):
            if isinstance(msg, dict) and msg.get("key") in wanted:
                started[msg["key"]] = msg["time"]
    cancelled = _noted(dask_scheduler, CANCELLED_ATTRIBUTE)
    now = time.time()
    answer: dict[str, tuple[str, float | None, str]] = {}
    for key in keys:
        if key in cancelled:
            late = now - cancelled[key] > KILL_RECORD_PATIENCE
            answer[key] = ("killed" if late else "cancelled", started.get(key), "")
            continue
        ts = dask_scheduler.tasks.get(key)
        if ts is None:
            answer[key] = ("unknown", None, "")
            continue
        error = str(ts.exception_text or "") if ts.state == "erred" else ""
        answer[key] = (ts.state, started.get(key), error)
    return answer


# States of a task whose poll says nothing yet: queued somewhere, or its program not started.
_NO_NEWS = ("waiting", "queued", "no-worker", "processing")


def observe(
    keys: list[str], done: list[str], topic: str, dask_scheduler: Any = None
) -> dict[str, tuple[str, float | None, str]]:
    """One call per poll: release ``done`` (their outcome is written), then ``states``
    of ``keys``, but only of those with news (ended, unknown, cancelled, or whose program
    has started): the answer of each cycle is as small as what changed."""
    if done:
        release(done, dask_scheduler)
    return {
        key: state
        for key, state in states(keys, topic, dask_scheduler).items()
        if state[1] is not None or state[0] not in _NO_NEWS
    }


def cancel(keys: list[str], dask_scheduler: Any = None) -> None:
    """Cancel ``keys`` for every client (queued ones never start) and drop our hold."""
    cancelled = _noted(dask_scheduler, CANCELLED_ATTRIBUTE)
    now = time.time()
    for key in [k for k, when in cancelled.items() if now - when > CANCEL_MEMORY]:
        del cancelled[key]
    cancelled.update((k, now) for k in keys)
    wanted = [k for k in keys if (ts := dask_scheduler.tasks.get(k)) is not None and ts.who_wants]
    if wanted and HOLDER in dask_scheduler.clients:
        # force: released for every client that holds it, the submitting one included.
        dask_scheduler.stimulus_cancel(
            wanted, HOLDER, force=True, reason="killed through ganga_like", msg=None
        )
    _forget_starts(dask_scheduler, keys)
