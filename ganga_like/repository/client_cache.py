"""The shared-mode client cache, made to survive a full disk.

ZEO's persistent client cache writes into the gangadir.  When that disk fills up, its writes
fail with ``OSError`` - possibly in the second phase of a commit the server already made,
which would leave the session unsure of what it saved.  This subclass turns the first such
failure into a cache that is off for the rest of the session: it forgets the file (so that
the next session starts with a fresh one), answers every read with a miss, and drops every
write.  Nothing is lost: the server has all the data; reads are only slower.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Callable
from typing import Any

from ZEO.cache import ClientCache

__all__ = ["ResilientClientCache"]

log = logging.getLogger("ganga_like")


def _off_on_write_error(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` of a cache that may be off: then, or when it fails, a miss (None)."""

    @functools.wraps(method)
    def guarded(self: ResilientClientCache, *args: Any, **kwargs: Any) -> Any:
        if self.disabled:
            return None
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            self._disable(exc)
            return None

    return guarded


class ResilientClientCache(ClientCache):  # type: ignore[misc]
    """A ZEO client cache that switches itself off instead of failing a commit."""

    disabled = False

    def _disable(self, exc: OSError) -> None:
        if self.disabled:
            return
        self.disabled = True
        log.warning(
            "the repository client cache cannot be written (%s); going on without "
            "it for this session",
            exc.strerror or exc,
        )
        path = getattr(self, "path", None)
        if path:
            with contextlib.suppress(OSError):
                os.unlink(path)

    load = _off_on_write_error(ClientCache.load)
    loadBefore = _off_on_write_error(ClientCache.loadBefore)
    store = _off_on_write_error(ClientCache.store)
    invalidate = _off_on_write_error(ClientCache.invalidate)
    clear = _off_on_write_error(ClientCache.clear)

    def setLastTid(self, tid: bytes) -> None:
        if not self.disabled:
            try:
                super().setLastTid(tid)
                return
            except OSError as exc:
                self._disable(exc)
        current: bytes | None = self.getLastTid()
        if tid and (current is None or tid > current):
            self.tid = tid  # still the client's idea of where it is

    def close(self) -> None:
        try:
            super().close()
        except OSError as exc:
            self._disable(exc)
            handle = getattr(self, "f", None)
            if handle is not None:
                with contextlib.suppress(OSError):
                    handle.close()
            lock = getattr(self, "_lock_file", None)
            if lock is not None:
                lock.close()
