"""RelStorage that waits for a PostgreSQL server that went away, as a shared-mode session
waits for its repository server.

A restart of the database server breaks every connection of every session. RelStorage
reconnects by itself at the next use, but a use while the server is still down fails at
once, anywhere: in a read, in the poll that begins each transaction, in the one that ends
it (after a commit that did happen). Here those calls wait for the server instead (up to
``Repository``'s connect timeout, 30 s by default), saying so in one line per outage, and
are made again; commits themselves are not made again here: a transaction that failed is
retried whole by :mod:`ganga_like.repository.transaction_retry`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

from ganga_like.repository import pg_outage

__all__ = ["patient_storage_class"]

log = logging.getLogger("ganga_like")

T = TypeVar("T")


@functools.cache
def patient_storage_class() -> type:
    """The RelStorage subclass (made on first use: RelStorage is an optional extra)."""
    from relstorage.storage import RelStorage

    class PatientRelStorage(RelStorage):  # type: ignore[misc]
        ganga_dsn = ""
        ganga_wait = 30.0

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            # RelStorage copies its loader's methods onto each instance.
            load: Callable[..., Any] = self.load  # type: ignore[has-type]
            self.load = lambda *a: self._patiently(load, *a)
            prefetch = getattr(self, "prefetch", None)
            if prefetch is not None:
                self.prefetch = lambda *a: self._patiently(prefetch, *a)

        def new_instance(self, before: Any = None) -> Any:
            other = super().new_instance(before)
            other.ganga_dsn, other.ganga_wait = self.ganga_dsn, self.ganga_wait
            return other

        def sync(self, force: bool = True) -> Any:
            return self._patiently(super().sync, force)

        def poll_invalidations(self) -> Any:
            return self._patiently(super().poll_invalidations)

        def lastTransaction(self) -> Any:
            return self._patiently(super().lastTransaction)

        def _patiently(self, call: Callable[..., T], *args: Any) -> T:
            try:
                return call(*args)
            except Exception as exc:
                if not pg_outage.is_disconnection(exc):
                    raise
                line = pg_outage.outage_line("Disconnected")
                if line:
                    log.warning("repository: %s", line)
                if not pg_outage.wait_for_server(self.ganga_dsn, self.ganga_wait):
                    raise
            return call(*args)

    return PatientRelStorage
