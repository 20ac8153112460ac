"""Waiting on a condition in tests: generous timeouts, never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(
    condition: Callable[[], object], timeout: float, what: str, interval: float = 0.05
) -> None:
    """Return as soon as ``condition()`` is true; fail naming ``what`` after ``timeout`` s.
    ``interval`` spaces the checks (wider for a check that asks a server, like squeue)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def wait_until(condition: Callable[[], bool], timeout: float = 60.0) -> bool:
    """Whether ``condition()`` became true within ``timeout`` s, for ``assert wait_until(...)``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
