"""One open repository: the database, one connection per thread, retried transactions.

Every change the GPI makes goes through :meth:`Repository.in_transaction` (actions, job
creation, attribute changes outside a shell cell) and is retried on conflicts with
jittered back-off (:mod:`ganga_like.repository.transaction_retry`); opening the repository
(connecting to or starting the shared server, creating the root) is retried the same way.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

import transaction
import ZODB
from ZODB.Connection import Connection
from ZODB.POSException import POSKeyError

from ganga_like.errors import RepositoryConflictError, RepositoryError, RepositoryWriteError
from ganga_like.repository import pg_outage, postgres
from ganga_like.repository.checks.file_check import corrupt
from ganga_like.repository.checks.orphans import check_after_open, check_before_open
from ganga_like.repository.ids import IdBlocks
from ganga_like.repository.layout import layout_problem
from ganga_like.repository.packing import PackPolicy, maybe_pack_in_background
from ganga_like.repository.registry import Registry
from ganga_like.repository.shared_workspace import check_shared_workspace
from ganga_like.repository.storage import (
    NOT_DAMAGE,
    StorageOptions,
    database_mode,
    default_uri,
    ensure_private_dir,
    open_database,
    write_errno,
)
from ganga_like.repository.transaction_retry import (
    RetryPolicy,
    is_transient,
    repeat,
    retried,
    safe_commit,
)
from ganga_like.repository.workspace_removal import delete_behind, resume_removals

__all__ = ["Repository", "write_errors"]

log = logging.getLogger("ganga_like")

T = TypeVar("T")


class Repository:
    """The repository of one gangadir, opened in one mode."""

    def __init__(
        self,
        gangadir: Path,
        mode: str = "embedded",
        uri: str | None = None,
        options: StorageOptions | None = None,
    ) -> None:
        self.gangadir = gangadir.expanduser().resolve()
        self.uri = uri or default_uri(self.gangadir)
        # In a database server, the jobs have no file: messages name the database.
        self.on_server = postgres.is_postgres(self.uri)
        path = (
            Path(postgres.server_of(self.uri))
            if self.on_server
            else Path(unquote(urlparse(self.uri).path))
        )
        if mode == "readonly" and not self.on_server and not path.exists():
            raise RepositoryError(f"no repository at {path} to open read-only")
        # A read-only view writes nothing, so it also opens an archived gangadir on a
        # read-only filesystem; it creates nothing either.
        ensure_private_dir(self.gangadir, read_only=mode == "readonly")
        self.workspace = self.gangadir / "workspace"
        if mode != "readonly":
            ensure_private_dir(self.workspace)
        self.mode = mode
        self.options = options or StorageOptions()
        if mode != "readonly" and not self.on_server:
            check_before_open(path, self.workspace)
        self.retry_policy = RetryPolicy()
        self.db: ZODB.DB = repeat(
            lambda: self._open(path),
            what=f"opening the repository in {self.gangadir}",
            policy=self.retry_policy,
        )
        # "auto" resolves to the mode actually used ("shared" or "embedded").
        self.effective_mode = database_mode(self.db)
        # Shared mode: ids are reserved a block at a time, so that sessions creating jobs
        # at once do not all conflict on the one counter.
        self._ids = (
            IdBlocks(self.db, self.retry_policy, self.catch_up)
            if self.effective_mode in ("shared", "postgresql")
            else None
        )
        self._local = threading.local()
        self._closed = False
        # Held while a GPI action commits: this process's monitor skips a cycle rather
        # than conflict with it (a kill of 10,000 subjobs is one long transaction).
        self.action_lock = threading.RLock()
        self._background: list[Any] = []  # a pack thread, the shared server's keeper
        if mode != "readonly":
            # Left to run at close: what it has not deleted, the next opening deletes.
            delete_behind(self.workspace)
        if self.effective_mode == "embedded":
            # The file is ours alone: pack it here if due (the shared server does it there).
            policy = PackPolicy(self.options.pack_threshold_mb, self.options.pack_keep_days)
            packer = maybe_pack_in_background(self.db.storage, path, policy)
            if packer is not None:
                self._background.append(packer)
        elif self.effective_mode == "shared" and not self.options.follower:
            from ganga_like.repository.zeo.shared import ServerKeeper

            keeper = ServerKeeper(self.db.storage, self.gangadir / "repository", self.options)
            keeper.start()
            self._background.append(keeper)

    def _open(self, path: Path) -> ZODB.DB:
        """One attempt at opening the database, checking it still holds its jobs and
        creating its layout; sessions that start at the same moment on a new repository
        conflict here, and try again. A failure closes the database, so the file is
        released (for recovery, when its root is damaged)."""
        db = open_database(self.uri, self.mode, self.options)
        tm = transaction.TransactionManager()
        try:
            conn = db.open(transaction_manager=tm)
            try:
                tm.begin()
                with layout_damage(path):
                    check_layout(conn, path)
                    if self.mode != "readonly":
                        if self.on_server:
                            check_shared_workspace(conn.root(), self.workspace, self.uri)
                        database = postgres.server_of(self.uri) if self.on_server else ""
                        check_after_open(conn.root(), path, self.workspace, database)
                        Registry.initialise(conn.root())
                        resume_removals(conn.root(), self.workspace)
                if self.mode != "readonly":
                    tm.commit()
            except BaseException:
                tm.abort()
                raise
            finally:
                conn.close()
        except BaseException:
            db.close()
            raise
        return db

    def catch_up(self) -> None:
        """Before a retry: in shared mode, a round trip to the server, after which every
        commit made before it is visible (its invalidations arrived first). In
        PostgreSQL: a server that went away (restarted) is waited for, as a shared-mode
        session waits for its server, so that the retry does not fail on it again."""
        if self.on_server:
            pg_outage.wait_for_server(postgres.dsn_of(self.uri), self.options.connect_timeout)
            return
        ping = getattr(self.db.storage, "ping", None)  # ZEO's, once connected
        if ping is not None:
            ping()

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
        ids = self._ids
        return Registry(
            self.connection().root(), self.workspace, ids.take if ids is not None else None
        )

    def in_transaction(
        self,
        action: Callable[[], T],
        *,
        what: str = "the change",
        attempts: int | None = None,
        first: Callable[[], T] | None = None,
    ) -> T:
        """Run ``action`` in its own transaction, retried on conflicts; commit on success.

        ``action`` is run again after a conflict, so it must have no effect outside the
        repository. Pending changes of the caller (a shell cell's) are committed first, so
        a retry never throws away what the user did before the action; if they conflict,
        they are rolled back and the action is not done. Whatever happens, no failed
        transaction is left behind: the error is one line (``what`` names the action).

        ``first``: what the first attempt runs instead of ``action`` (see ``retried``).
        """
        if self.read_only:
            raise RepositoryError(
                f"{what}: not possible, the repository of {self.gangadir} is open read-only "
                "(--Repository.mode=readonly); nothing was changed"
            )
        tm = self.connection().transaction_manager
        policy = self.retry_policy
        if attempts is not None:
            policy = RetryPolicy(attempts, policy.first_delay, policy.max_delay)
        try:
            with self.action_lock, write_errors(self.gangadir):
                try:
                    tm.commit()
                except BaseException as exc:
                    tm.abort()
                    if not is_transient(exc):
                        raise
                    raise RepositoryConflictError(
                        f"{what}: not done, because the changes made before it conflicted "
                        "with another session's changes to the same jobs; they were rolled "
                        "back, make them again"
                    ) from exc
                return retried(
                    tm, action, what=what, policy=policy, catch_up=self.catch_up, first=first
                )
        except RepositoryWriteError:
            # Never leave the caller in a failed transaction: its objects show again
            # what the repository holds.
            tm.abort()
            self.release_failed_write()
            raise

    def commit(self, what: str = "the change") -> None:
        """Commit what is pending; a conflict rolls it back (one RepositoryConflictError)
        instead of leaving a failed transaction behind."""
        try:
            with write_errors(self.gangadir):
                safe_commit(self.connection().transaction_manager, what)
        except RepositoryWriteError:
            self.release_failed_write()
            raise

    def release_failed_write(self) -> None:
        """Give back the disk space a commit that could not be written still holds.

        FileStorage writes a transaction to its temporary file first and keeps that file
        at its largest size; after a commit failed on a full disk, the temporary file
        fills the disk so that not even a small commit (a rollback) fits.  Emptying it
        is safe between transactions: the next one writes it from the start again.
        Only the embedded mode has the file here (the shared server has its own).
        """
        storage = getattr(self.db, "storage", None)
        tfile = getattr(storage, "_tfile", None)
        lock = getattr(storage, "_commit_lock", None)  # held through a whole commit
        if tfile is None or lock is None or not lock.acquire(False):
            return  # another thread is committing: it writes the file from the start
        try:
            os.ftruncate(tfile.fileno(), 0)
            tfile.seek(0)  # what was left in its buffer now fits, and is overwritten
        except (OSError, ValueError):
            pass
        finally:
            lock.release()

    def abort(self) -> None:
        self.connection().transaction_manager.abort()

    @property
    def kind(self) -> str:
        """How the shell's banner names the repository after the gangadir: the mode, or
        the database server (without the password) for a repository in PostgreSQL."""
        if self.on_server:
            return f"repository in PostgreSQL {postgres.server_of(self.uri)}"
        return self.mode

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._ids is not None:
            self._ids.close()
        conn: Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            try:
                conn.transaction_manager.abort()
                conn.close()
            except Exception:  # closing must never hang or raise at exit
                pass
        for worker in self._background:
            stop = getattr(worker, "stop", None)
            if stop is not None:
                stop()
            elif worker.is_alive():
                log.warning("waiting for the repository pack to finish before closing")
            worker.join()  # a pack cannot be interrupted: it ends before the file closes
        self.db.close()

    def __enter__(self) -> Repository:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def check_layout(conn: Connection, path: Path) -> None:
    """Refuse a root of the wrong shape (:mod:`ganga_like.repository.layout`)."""
    problem = layout_problem(conn)
    if problem is not None:
        raise corrupt(path, problem)


@contextlib.contextmanager
def layout_damage(path: Path) -> Iterator[None]:
    """Reading the root and the registry's layout at opening: whatever fails there that is
    not a conflict, the server being away, the disk, or already one of our errors, is
    damage of the root record (an AttributeError of a table whose class was lost, a
    TypeError or KeyError of a table loaded from the wrong record): one line that names
    the recovery command."""
    try:
        yield
    except (*NOT_DAMAGE, POSKeyError) as exc:
        if isinstance(exc, POSKeyError):  # a table's record is missing
            raise corrupt(
                path, f"the root refers to a record that is not in the file ({exc})"
            ) from None
        raise
    except Exception as exc:
        raise corrupt(
            path,
            f"the registry's layout in the root cannot be read "
            f"({type(exc).__name__}: {_short(exc)})",
        ) from None


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 80 else text[:77] + "..."


@contextlib.contextmanager
def write_errors(gangadir: Path) -> Iterator[None]:
    """Turn a failed write of a commit into one clear RepositoryWriteError.

    FileStorage truncates what it had written of the transaction, and the transaction
    manager aborts it, so the repository is unchanged and stays usable.
    """
    try:
        yield
    except Exception as exc:
        code = write_errno(exc)
        if code is None:
            raise
        raise RepositoryWriteError(
            f"the repository in {gangadir} could not be written ({os.strerror(code)}); "
            "this change was not saved and the repository is unchanged; free some space "
            "(or fix the filesystem) and try again"
        ) from None
