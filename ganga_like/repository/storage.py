"""Opening the job database from a storage URI in one of the repository modes.

``shared`` (the default of every session): a ZEO client of the repository's own server
(see :mod:`ganga_like.repository.zeo.shared`), started on demand, so any number of sessions use
one repository at once. ``auto``, the name older configurations use for it, is the same.
``embedded`` (an explicit choice; the default of this low-level module): a FileStorage in
this process, alone; another process gets a one-line error naming its PID. ``readonly``:
a read-only view of the same file, allowed beside a writer. The opening code takes a URI so
other storages slot in without changes elsewhere (``file:///path/Data.fs`` today).

Before a FileStorage is opened its file is checked (:mod:`ganga_like.repository.checks.integrity`):
a damaged file is refused with a :class:`RepositoryCorruptError` instead of being cut short.
"""

from __future__ import annotations

import errno
import logging
import os
import pickle
import struct
import sys
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import zc.lockfile
import ZODB
from ZEO.Exceptions import ClientStorageError
from ZODB.broken import Broken
from ZODB.Connection import Connection
from ZODB.FileStorage import FileStorage
from ZODB.FileStorage.format import CorruptedError
from ZODB.POSException import ConflictError, ConnectionStateError

from ganga_like.config.choices import MODES
from ganga_like.errors import (
    GangaError,
    RepositoryBusyError,
    RepositoryCorruptError,
    RepositoryError,
)
from ganga_like.private import touch_private
from ganga_like.repository import changes, pg_outage, postgres
from ganga_like.repository.checks.file_check import check_file, corrupt
from ganga_like.repository.file_storage import RepositoryFileStorage
from ganga_like.repository.options import StorageOptions, ensure_private_dir
from ganga_like.repository.packing import finish_interrupted_pack
from ganga_like.repository.savepoints import commit_savepoints
from ganga_like.repository.writer import install as install_record_writer
from ganga_like.repository.zeo.host_claim import check_not_held_elsewhere

__all__ = [
    "MODES",
    "NOT_DAMAGE",
    "StorageOptions",
    "database_mode",
    "default_uri",
    "ensure_private_dir",
    "open_database",
    "open_file_storage",
    "write_errno",
]

log = logging.getLogger("ganga_like")

install_record_writer()

# Large enough that a 10,000-subjob job (3 records per subjob) stays in memory between
# transactions; the default of 400 reloads it after every commit.
CACHE_SIZE = 100_000


def default_uri(gangadir: Path) -> str:
    return (gangadir / "repository" / "Data.fs").resolve().as_uri()


def database_mode(db: ZODB.DB) -> str:
    """The mode a database was actually opened in (``auto`` resolves to one of the others)."""
    mode: str = getattr(db, "ganga_mode", "embedded")
    return mode


def open_database(
    uri: str, mode: str = "embedded", options: StorageOptions | None = None
) -> ZODB.DB:
    """A ZODB.DB for ``uri`` in ``mode``; clear RepositoryErrors for every failure."""
    if mode not in MODES:
        raise RepositoryError(f"unknown repository mode {mode!r}; expected one of {MODES}")
    options = options or StorageOptions()
    parsed = urlparse(uri)
    if postgres.is_postgres(uri):
        return _open_postgres(uri, mode, options)
    if parsed.scheme != "file":
        raise RepositoryError(
            f"unsupported repository {postgres.redacted(uri)!r}: expected a file:// or "
            "postgresql:// URI"
        )
    path = Path(unquote(parsed.path))
    ensure_private_dir(path.parent, read_only=mode == "readonly")
    quiet_zodb_logging()
    storage: Any
    effective = mode
    if mode in ("shared", "auto"):
        from ganga_like.repository.zeo import shared

        storage = shared.open_client(path, options, spawn=True)
        effective = "shared"
    else:
        storage = open_file_storage(path, read_only=mode == "readonly")
    try:
        # The database reads the root record at once: damage there is reported like any.
        db = GuardedDB(storage, cache_size=CACHE_SIZE, large_record_size=1 << 26)
    except BaseException:
        # The file's lock is released, so recovery can take it; and creating the root
        # conflicts when sessions open a new repository at once: the caller tries again,
        # with the storage (and its client cache slot) released.
        storage.close()
        raise
    db.ganga_mode = effective
    return db


def _open_postgres(uri: str, mode: str, options: StorageOptions) -> ZODB.DB:
    """Every process a client of the database server, whatever the mode (but
    ``readonly``, which writes nothing)."""
    quiet_zodb_logging()
    storage = postgres.open_relstorage(
        uri, mode == "readonly", options.cache_mb, options.connect_timeout
    )
    try:
        db = GuardedDB(storage, cache_size=CACHE_SIZE, large_record_size=1 << 26)
    except BaseException:
        storage.close()
        raise
    db.ganga_mode = "readonly" if mode == "readonly" else "postgresql"
    return db


def open_file_storage(path: Path, read_only: bool = False) -> FileStorage:
    """Open ``Data.fs`` after checking it; busy and damaged files give one-line errors.

    Never for writing while a live server of another host holds it (a gangadir on a
    shared filesystem): that host's lock on the file may not reach this one."""
    if not read_only:
        check_not_held_elsewhere(path.parent)
        finish_interrupted_pack(path)
    if read_only and not path.exists():
        raise RepositoryError(f"no repository at {path} to open read-only")
    lock_probe = _probe_lock(path) if not read_only else None
    try:
        note = check_file(path)
    finally:
        if lock_probe is not None:
            lock_probe.close()  # FileStorage takes the lock itself right away
    if not read_only:
        # FileStorage would create these with the umask's mode (it reopens them in place).
        touch_private(path)
        touch_private(f"{path}.tmp")
    try:
        storage = RepositoryFileStorage(str(path), read_only=read_only, pack_keep_old=False)
    except zc.lockfile.LockError:
        raise _busy(path) from None
    except OSError as exc:
        raise RepositoryError(f"cannot open repository {path}: {exc.strerror}") from None
    except (CorruptedError, struct.error, pickle.UnpicklingError) as exc:
        raise corrupt(path, f"{type(exc).__name__}: {exc}") from None
    try:
        _check_root_header(storage)
    except RepositoryCorruptError:
        storage.close()
        raise
    if note is not None and not read_only:  # a read-only view drops nothing
        log.warning("repository %s: %s", path.parent, note)
        for kept in path.parent.glob(f"{path.name}.tr*"):  # the dropped commit's bytes
            kept.chmod(0o600)
    if not read_only:
        for suffix in ("", ".index", ".lock", ".tmp"):
            candidate = Path(str(path) + suffix)
            if candidate.exists():
                candidate.chmod(0o600)
    return storage


def _check_root_header(storage: FileStorage) -> None:
    """The root record must name the transaction it is in: a damaged id there makes every
    later commit of the root a conflict that can never be resolved."""
    try:
        pos = storage._lookup_pos(b"\0" * 8)
    except KeyError:
        return  # a new repository: no root yet
    try:
        header = storage._read_data_header(pos, b"\0" * 8)  # also checks the oid
        if not 0 < header.tloc < pos:
            raise ValueError(header.tloc)
        with storage._lock:
            storage._file.seek(header.tloc)
            tid = storage._file.read(8)
    except Exception as exc:  # a damaged header: anything its fields lead to
        raise corrupt(
            Path(storage.getName()),
            f"the root record's header cannot be read ({type(exc).__name__})",
        ) from None
    if header.tid != tid:
        raise corrupt(
            Path(storage.getName()),
            "the root record names another transaction than the one it is in",
        )


def _probe_lock(path: Path) -> zc.lockfile.LockFile:
    """Take the file's lock before checking it, so a busy repository is reported as busy
    (a live writer's unfinished commit is not damage)."""
    if path.exists() and path.stat().st_uid != os.getuid():
        raise RepositoryError(
            f"{path} belongs to another user (uid {path.stat().st_uid}); refusing to use it"
        )
    try:
        touch_private(f"{path}.lock")
        return zc.lockfile.LockFile(f"{path}.lock")
    except zc.lockfile.LockError:
        raise _busy(path) from None


def _busy(path: Path) -> RepositoryBusyError:
    from ganga_like.repository.zeo import shared

    pid = _lock_holder(path)
    server = shared.server_pid(path.parent)
    if pid is not None and pid == server:
        return RepositoryBusyError(
            f"repository {path.parent} is served by its server (PID {pid}) to the sessions "
            "using it; open this one in the default mode to join them (leave out "
            "--Repository.mode=embedded), or read-only (--Repository.mode=readonly)",
            pid=pid,
        )
    holder = f"PID {pid}" if pid else "another process"
    return RepositoryBusyError(
        f"repository {path.parent} is in use by {holder}, which opened it alone "
        "(--Repository.mode=embedded); close that session, or start it in the default "
        "mode so that sessions share the repository, or open this one read-only "
        "(--Repository.mode=readonly)",
        pid=pid,
    )


def _lock_holder(path: Path) -> int | None:
    try:
        text = Path(str(path) + ".lock").read_text().strip()
    except OSError:
        return None
    first = text.split()[0] if text else ""
    return int(first) if first.isdigit() else None


# What reading a record may raise that is not damage: a conflict to retry, a server that
# is away, a closed connection, our own errors, the disk itself failing.
NOT_DAMAGE = (ConflictError, ClientStorageError, ConnectionStateError, GangaError, OSError)


class GuardedConnection(Connection):  # type: ignore[misc]
    """A connection that reports an unreadable record as damage, in one line.

    A damaged record can fail in any way its bytes lead the unpickler or FileStorage to:
    a bad length (MemoryError, CorruptedDataError), bad text (UnicodeDecodeError), a bad
    opcode (UnpicklingError), a bad class name, a missing record (POSKeyError). Anything
    but the operational errors above is therefore damage of that record.
    """

    def setstate(self, obj: Any) -> None:
        try:
            super().setstate(obj)
            if isinstance(obj, Broken):
                self._check_broken(obj)
        except NOT_DAMAGE as exc:
            if not _server_read_damage(exc):
                raise
            raise _unreadable(self._storage_path(), obj._p_oid, type(obj).__name__, exc) from None
        except Exception as exc:
            if pg_outage.is_disconnection(exc):
                raise  # the database server went away: not damage, tried again
            raise _unreadable(self._storage_path(), obj._p_oid, type(obj).__name__, exc) from None

    def _check_broken(self, obj: Any) -> None:
        """A reference names the class of the object it refers to, and ZODB makes the
        object of that class without reading its record. A class that cannot be
        imported is a plugin that is not installed, unless the record itself names
        another class: then the name in the reference was damaged."""
        data, _serial = self._storage.load(obj._p_oid)
        named = self._reader.getClassName(data)
        expected = f"{type(obj).__module__}.{type(obj).__name__}"
        if named != expected:
            raise RecordClassError(
                f"a reference to it names the class {expected}, its record {named}"
            )

    def get(self, oid: bytes) -> Any:
        try:
            return super().get(oid)
        except (*NOT_DAMAGE, KeyError) as exc:  # KeyError: how a new database is detected
            if not _server_read_damage(exc):
                raise
            raise _unreadable(self._storage_path(), oid, "unknown class", exc) from None
        except Exception as exc:  # the class part of the record (its first pickle)
            if pg_outage.is_disconnection(exc):
                raise
            raise _unreadable(self._storage_path(), oid, "unknown class", exc) from None

    def _storage_path(self) -> Path:
        return Path(self.db().storage.getName())

    # The oids other connections' commits invalidated here, kept for a reader that asks
    # (the monitor's view of the active index), so that it looks at those records only
    # instead of at every record it holds. None while nobody asked, and when not known.
    _collecting = False
    _collected: set[bytes] | None = None

    def open(self, *args: Any, **kwargs: Any) -> None:
        # A pooled connection starts again: nobody collects until asked.
        self._collecting, self._collected = False, None
        super().open(*args, **kwargs)

    def collect_invalidations(self) -> set[bytes] | None:
        """The oids that other connections' commits invalidated in this connection since
        the last call; None on the first call, and when ZODB flushed the whole cache."""
        taken = self._collected if self._collecting else None
        self._collecting, self._collected = True, set()
        return taken

    def newTransaction(self, transaction: Any, sync: bool = True) -> None:
        # ZODB's own (ZODB.Connection.newTransaction), keeping the invalidated oids.
        self._readCurrent.clear()
        self._storage.sync(sync)
        invalidated = self._storage.poll_invalidations()
        if invalidated is None:
            # The transaction is so old that the whole cache is flushed: not known.
            invalidated = self._cache.cache_data.copy()
            self._collected = None
        elif self._collecting and self._collected is not None:
            self._collected.update(invalidated)
        self._cache.invalidate(invalidated)

    def _commit_savepoint(self, transaction: Any) -> None:
        # A large submission's savepoints (repository.savepoints) are committed without
        # ZODB's copies of their tables.
        if not commit_savepoints(self, transaction):
            super()._commit_savepoint(transaction)

    def _tpc_cleanup(self) -> None:
        super()._tpc_cleanup()
        self._creating: dict[bytes, bool] = {}  # it may have been a savepoint table

    def tpc_vote(self, transaction: Any) -> None:
        # Alone in the transaction, nothing can fail between this vote and the finish:
        # the shared-mode client may then commit at the vote, in one round trip.
        commit_at_vote = getattr(self._db.storage, "commit_at_vote", None)
        resources = getattr(transaction, "_resources", None)  # the transaction package's
        if (
            commit_at_vote is not None
            and resources is not None
            and len(resources) == 1
            and resources[0] is self
            and self._storage is self._normal_storage
        ):
            commit_at_vote(transaction.data(self), self._storage)
        super().tpc_vote(transaction)


def _server_read_damage(exc: BaseException) -> bool:
    """In shared mode the server's failure to read a record comes back as a
    ``ServerException`` naming the error's class: damage, unless the disk itself failed."""
    if type(exc).__name__ != "ServerException" or not exc.args:
        return False
    name = str(exc.args[0])
    return not (name.startswith("builtins.") and name.endswith(("OSError", "IOError")))


class GuardedDB(ZODB.DB):  # type: ignore[misc]
    """Every connection (also the one the database opens for itself) is guarded, and a
    class name that cannot be one of ours is damage, not a missing plugin."""

    klass = GuardedConnection

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # (module, name) -> (module object, class) of the classes found: set before the
        # database opens its first connection, which loads the root.
        self._classes: dict[tuple[str, str], tuple[Any, Any]] = {}
        super().__init__(*args, **kwargs)
        # Raised at every transaction the database learns of: waiters sleep on it.
        self.changes = changes.install(self)

    def classFactory(self, connection: Any, modulename: str, globalname: str) -> Any:
        """The class (or other global) a record names. Asked for every record loaded: one
        found before is answered from ``_classes`` while its module is still the one
        imported and still holds it under that name (what finding it again would check);
        a broken class is never kept (its plugin may be installed meanwhile)."""
        known = self._classes.get((modulename, globalname))
        if known is not None:
            module, cls = known
            if sys.modules.get(modulename) is module and module.__dict__.get(globalname) is cls:
                return cls
        found = self._find_class(connection, modulename, globalname)
        module = sys.modules.get(modulename)
        broken = isinstance(found, type) and issubclass(found, Broken)
        if module is not None and not broken and module.__dict__.get(globalname) is found:
            self._classes[(modulename, globalname)] = (module, found)
        return found

    def _find_class(self, connection: Any, modulename: str, globalname: str) -> Any:
        # ZODB gives a class it cannot import as a broken object, which is right for a
        # plugin that is not installed (its jobs list as broken). But a name that is no
        # dotted name at all, or one of this package's own modules, which are always
        # installed, can only be a damaged record; read as a broken object it would fail
        # later, anywhere, as a missing attribute.
        if not _dotted_name(modulename, globalname):
            raise RecordClassError(f"the class name {modulename}.{globalname} is not a name")
        found = super().classFactory(connection, modulename, globalname)
        if _own_module(modulename) and isinstance(found, type) and issubclass(found, Broken):
            raise RecordClassError(f"there is no class {modulename}.{globalname}")
        return found


class RecordClassError(Exception):
    """A record names a class that cannot exist (reported as damage of that record)."""


def _dotted_name(module: str, name: str) -> bool:
    return all(part.isidentifier() for part in (*module.split("."), *name.split(".")))


def _own_module(module: str) -> bool:
    """This package's modules, and names in its namespace that no plugin can have
    (plugins are ``ganga_like_<name>``)."""
    top = module.split(".", 1)[0]
    return top.startswith("ganga_like") and not top.startswith("ganga_like_")


def _unreadable(
    path: Path, raw_oid: bytes | None, kind: str, exc: BaseException
) -> RepositoryCorruptError:
    oid = int.from_bytes(raw_oid or b"", "big")
    what = f"record {oid:#x} ({kind}) cannot be read ({type(exc).__name__})"
    if not path.name.endswith(".fs"):  # a ZEO client: the file is on the server's side
        return RepositoryCorruptError(
            f"repository is damaged: {what}. Stop the sessions and run `ganga repository recover`",
            path=str(path),
        )
    return corrupt(path, what)


class _OneLine(logging.Handler):
    """ZODB and ZEO log problems with tracebacks; the user gets them as one line each."""

    # Benign: FileStorage rebuilds a stale index itself (a read-only view beside a
    # writer always finds one).
    # Reported by GuardedConnection in its own one line: not said twice.
    # RelStorage's failure to reach the PostgreSQL server: said in our one line
    # (ganga_like.repository.postgres.unreachable).
    BENIGN = (
        "Ignoring index for",
        "Couldn't load state for",
        "Unpickling error:",
        "Unable to connect:",
    )

    # Benign on a full disk, which the user has been told about: the index file is only
    # a cache that the next opening brings up to date from the data file.
    BENIGN_WHEN_FULL = ("Error saving index on close()",)

    # A session's client cache that ZEO found unreadable (moved aside: ours starts afresh,
    # see client_cache) or that describes other transactions than the server's file
    # (emptied): only a cache, nothing the user has to know or do.
    CACHE_ONLY = ("bad cache file", "dropping stale cache")

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            if record.getMessage().startswith(self.BENIGN):
                return
            if any(part in record.getMessage() for part in self.CACHE_ONLY):
                return
            if record.getMessage().startswith(self.BENIGN_WHEN_FULL) and _write_failure(record):
                return
            failure = record.exc_info[1] if record.exc_info else None
            outage = pg_outage.outage_line(record.getMessage(), failure)
            if record.name.startswith("relstorage") and outage is not None:
                if outage:
                    log.warning("repository: %s", outage)
                return
            text = record.getMessage().strip().splitlines()
            line = text[0] if text else record.levelname
            log.warning("repository: %s", line if len(line) < 200 else line[:197] + "...")


# Errors of the filesystem under the repository: the commit did not happen.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO})


def write_errno(exc: BaseException) -> int | None:
    """The errno of a failed write, here or on the shared server (which sends it back as
    ``ServerException('builtins.OSError', (errno, text))``)."""
    if isinstance(exc, OSError):
        return exc.errno if exc.errno in WRITE_ERRNOS else None
    if (
        type(exc).__name__ == "ServerException"
        and len(exc.args) == 2
        and exc.args[0] == "builtins.OSError"
    ):
        detail = exc.args[1]
        if isinstance(detail, tuple) and detail and detail[0] in WRITE_ERRNOS:
            return int(detail[0])
    return None


def _write_failure(record: logging.LogRecord) -> bool:
    """Whether a log record reports a failed write (a full disk) with its exception, or an
    error met while aborting after one: in shared mode the server has already dropped
    the transaction whose write failed, so the client's abort fails too (the failed
    write is then the context of that error)."""
    failure = record.exc_info[1] if record.exc_info else None
    for _depth in range(4):
        if not isinstance(failure, Exception):
            return False
        if write_errno(failure) is not None:
            return True
        failure = failure.__context__
    return False


class _AbortAfterWriteError(_OneLine):
    """The transaction package logs, with a traceback, an abort that failed after a
    commit that could not be written (a full disk fails both).  That commit is reported
    to the user as one RepositoryWriteError, so this second report is noise."""

    def emit(self, record: logging.LogRecord) -> None:
        # The transaction package logs a failed second phase from its except clause,
        # without the exception: it is the one being handled.
        failure = record.exc_info[1] if record.exc_info else sys.exc_info()[1]
        if failure is not None and pg_outage.is_disconnection(failure):
            # The database server went away during a commit: said once, as RelStorage's
            # own report of it (see pg_outage.outage_line); the commit is tried again.
            line = pg_outage.outage_line("Disconnected")
            if line:
                log.warning("repository: %s", line)
            return
        if not _write_failure(record):
            super().emit(record)


class _NotLostConnectionWrites(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != "socket.send() raised exception."


_quieted = False


def quiet_zodb_logging() -> None:
    """Route ZODB's and ZEO's warnings through our logger, one line each, unless the
    application configured those loggers itself."""
    global _quieted
    if _quieted:
        return
    _quieted = True
    for name in ("ZODB", "ZEO", "zc.lockfile", "relstorage"):
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(_OneLine())
            logger.propagate = False
    # A connection to the server that dropped in the middle of a transaction makes asyncio
    # log a line for each message it could then not send; the transaction itself fails
    # (and is retried, or reported in one line), which says it all.
    logging.getLogger("asyncio").addFilter(_NotLostConnectionWrites())
    txn = logging.getLogger("txn")  # its per-thread loggers ("txn.<id>") propagate here
    if not txn.handlers:
        txn.addHandler(_AbortAfterWriteError())
        txn.propagate = False
