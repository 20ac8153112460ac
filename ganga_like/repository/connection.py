"""One open repository: the database, one connection per thread, retried transactions."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import transaction
import ZODB
from ZODB.Connection import Connection

from ganga_like.errors import RepositoryError
from ganga_like.repository.registry import Registry
from ganga_like.repository.storage import default_uri, ensure_private_dir, open_database

__all__ = ["Repository"]

T = TypeVar("T")


class Repository:
    """The repository of one gangadir, opened in one mode."""

    def __init__(self, gangadir: Path, mode: str = "embedded", uri: str | None = None) -> None:
        self.gangadir = gangadir.expanduser().resolve()
        ensure_private_dir(self.gangadir)
        self.workspace = self.gangadir / "workspace"
        ensure_private_dir(self.workspace)
        self.mode = mode
        self.uri = uri or default_uri(self.gangadir)
        self.db: ZODB.DB = open_database(self.uri, mode)
        self._local = threading.local()
        self._closed = False
        if mode != "readonly":
            tm = transaction.TransactionManager()
            conn = self.db.open(transaction_manager=tm)
            try:
                with tm:
                    Registry.initialise(conn.root())
            finally:
                conn.close()

    @property
    def read_only(self) -> bool:
        return self.mode == "readonly"

    def connection(self, tm: transaction.TransactionManager | None = None) -> Connection:
        """This thread's connection (opened on first use with ``tm`` or the default)."""
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise RepositoryError("the repository is closed")
            conn = self.db.open(transaction_manager=tm or transaction.manager)
            self._local.conn = conn
        return conn

    def registry(self) -> Registry:
        return Registry(self.connection().root())

    def in_transaction(self, action: Callable[[], T], *, attempts: int = 5) -> T:
        """Run ``action`` in its own transaction, retried on conflicts; commit on success.

        Pending changes of the caller are committed first, so a retry never throws away
        what the user did before the action.
        """
        tm = self.connection().transaction_manager
        tm.commit()
        for attempt in tm.attempts(attempts):
            with attempt:
                result = action()
        return result

    def commit(self) -> None:
        self.connection().transaction_manager.commit()

    def abort(self) -> None:
        self.connection().transaction_manager.abort()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            try:
                conn.transaction_manager.abort()
                conn.close()
            except Exception:  # closing must never hang or raise at exit
                pass
        self.db.close()

    def __enter__(self) -> Repository:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
