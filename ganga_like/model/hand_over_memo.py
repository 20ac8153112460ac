"""What a run's preparation finds the same for every subjob of one hand-over: found once.

Preparing a subjob's run looks things up on the machine (where its program is on PATH);
the subjobs of one hand-over mostly look up the same. Within ``one_hand_over()`` a lookup
through ``remembered`` is made once per key and kept until the hand-over ends; outside
one (a single job's preview, a plugin's own call) it is made every time, as before. The
scope is per thread: the monitor hands over waiting subjobs while a session submits.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

__all__ = ["one_hand_over", "remembered"]

T = TypeVar("T")

_MEMO: ContextVar[dict[Hashable, object] | None] = ContextVar("hand_over_memo", default=None)


@contextmanager
def one_hand_over() -> Iterator[None]:
    """A scope in which each ``remembered`` key is looked up once (nested: the outer)."""
    if _MEMO.get() is not None:
        yield
        return
    token = _MEMO.set({})
    try:
        yield
    finally:
        _MEMO.reset(token)


def remembered(key: Hashable, look_up: Callable[[], T]) -> T:
    """``look_up()``, made once per ``key`` within one hand-over."""
    memo = _MEMO.get()
    if memo is None:
        return look_up()
    try:
        return memo[key]  # type: ignore[return-value]
    except KeyError:
        value = memo[key] = look_up()
        return value
