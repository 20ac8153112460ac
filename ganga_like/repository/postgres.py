"""The repository in a PostgreSQL database, through RelStorage.

``postgresql://[user[:password]@]host[:port]/dbname[?param=value...]`` opens the job
repository in a PostgreSQL database instead of ``<gangadir>/repository/Data.fs``: every
process is a client of the database server, so sessions on several hosts share one
repository. The storage is RelStorage's, history-free (no undo, nothing to pack: a changed
record replaces the old one); the database is prepared on first use.

Credentials come from the URI, a ``~/.pgpass`` file or the ``PG*`` environment (libpq
reads both); a password is never written anywhere by this module and never appears in a
message (:func:`redacted`). Connection failures are one line naming the server.

RelStorage and a PostgreSQL driver are an optional extra (``pip install
'ganga_like[postgresql]'``); without them such a URI is refused in one line.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ganga_like.config.environment import cache_home
from ganga_like.errors import RepositoryError

__all__ = [
    "SCHEMES",
    "PostgresUnreachableError",
    "cache_dir",
    "dsn_of",
    "is_postgres",
    "open_relstorage",
    "redacted",
    "server_of",
]

log = logging.getLogger("ganga_like")

SCHEMES = ("postgresql", "postgres")

# How libpq begins a failed connection's message: 'connection to server at "h", port 5
# failed: ' or 'connection to server on socket "/run/.s.PGSQL.5432" failed: '.
_SERVER_PREFIX = re.compile(r"^connection to server (at|on) .*? failed: ")

# The first half of the advisory lock key under which the tables are created (the same as
# ganga_like.repository.advisory_locks', whose second halves are above 0).
SCHEMA_LOCK_NAMESPACE = 0x67616E67

# Seconds a login may take before the server counts as unreachable.
CONNECT_TIMEOUT = 10


class PostgresUnreachableError(RepositoryError):
    """The database server refused the login, or could not be reached."""


def is_postgres(uri: str) -> bool:
    return urlsplit(uri).scheme in SCHEMES


def redacted(uri: str) -> str:
    """``uri`` without its password (for every message and log line)."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def server_of(uri: str) -> str:
    """``host:port/dbname`` of ``uri``, as messages name the server (libpq's defaults
    when the URI leaves them out: the environment's ``PGHOST``, ``PGPORT``...)."""
    params = _params(uri)
    host = params.get("host") or os.environ.get("PGHOST") or "localhost"
    port = params.get("port") or os.environ.get("PGPORT") or "5432"
    dbname = params.get("dbname") or os.environ.get("PGDATABASE") or params.get("user") or ""
    return f"{host}:{port}/{dbname}"


def dsn_of(uri: str) -> str:
    """The libpq ``key='value'`` string of ``uri`` (RelStorage adds its own keys to it,
    which a URI cannot take). What the URI leaves out, libpq takes from the environment
    and ``.pgpass``, as for ``psql``."""
    params = _params(uri)
    params.setdefault("connect_timeout", str(CONNECT_TIMEOUT))
    return " ".join(f"{key}={_quoted(value)}" for key, value in params.items())


def _params(uri: str) -> dict[str, str]:
    try:
        from psycopg2.extensions import parse_dsn
    except ImportError:
        raise _missing_extra(uri) from None
    try:
        params: dict[str, str] = parse_dsn(uri)
    except Exception as exc:  # psycopg2.ProgrammingError: the URI's syntax
        raise RepositoryError(
            f"repository {redacted(uri)!r}: not a PostgreSQL URI "
            f"({str(exc).strip().splitlines()[0]}); expected "
            "postgresql://user@host:port/dbname"
        ) from None
    return params


def _quoted(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def _missing_extra(uri: str) -> RepositoryError:
    return RepositoryError(
        f"repository {redacted(uri)}: the PostgreSQL mode needs RelStorage and psycopg2, "
        "which are not installed (pip install 'ganga_like[postgresql]')"
    )


def cache_dir(uri: str) -> Path:
    """Where this host keeps RelStorage's persistent client cache of ``uri``'s database:
    on a local disk (``$XDG_CACHE_HOME``), never in a gangadir that other hosts share."""
    key = hashlib.sha256(server_of(uri).encode()).hexdigest()[:16]
    return cache_home() / "ganga_like" / "relstorage" / key


def open_relstorage(
    uri: str, read_only: bool = False, cache_mb: float = 100.0, wait: float = 30.0
) -> Any:
    """A history-free RelStorage of the database ``uri`` names, which waits up to ``wait``
    seconds for a server that went away; one line naming the server when it cannot be
    reached or refuses the login at open."""
    try:
        from relstorage.adapters.postgresql import PostgreSQLAdapter
        from relstorage.options import Options

        from ganga_like.repository.patient_storage import patient_storage_class
    except ImportError:
        raise _missing_extra(uri) from None
    dsn = dsn_of(uri)
    local_cache = cache_dir(uri)
    local_cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    options = Options(
        keep_history=False,
        read_only=read_only,
        create_schema=not read_only,
        cache_local_mb=max(1, int(cache_mb)),
        cache_local_dir=str(local_cache),
        # A commit waits this long for another session's commit lock before it conflicts.
        commit_lock_timeout=30,
    )
    import psycopg2

    try:
        with _schema_lock(dsn, read_only):
            adapter = PostgreSQLAdapter(dsn=dsn, options=options)
            storage = patient_storage_class()(adapter, options=options)
    except psycopg2.Error as exc:
        raise unreachable(uri, exc) from None
    storage.ganga_dsn, storage.ganga_wait = dsn, wait
    return storage


@contextlib.contextmanager
def _schema_lock(dsn: str, read_only: bool) -> Iterator[None]:
    """Held while RelStorage creates its tables in a new database: sessions that open it
    at the same moment would otherwise create them at once, and all but one fail."""
    import psycopg2

    if read_only:
        yield
        return
    conn = psycopg2.connect(dsn)
    try:
        conn.autocommit = True
        with conn.cursor() as cursor:
            cursor.execute("SELECT to_regclass('object_state') IS NOT NULL")
            if cursor.fetchone()[0]:
                conn.close()  # prepared already: nothing to wait for
                yield
                return
            cursor.execute("SELECT pg_advisory_lock(%s, 0)", (SCHEMA_LOCK_NAMESPACE,))
        yield  # the lock goes with the connection, closed below
    finally:
        conn.close()


def unreachable(uri: str, exc: BaseException) -> PostgresUnreachableError:
    """One line for a server that cannot be reached or refused the login (libpq's own
    first line says which; it never holds the password)."""
    lines = str(exc).strip().splitlines() or [type(exc).__name__]
    # libpq's first line names the server the way the message below does already.
    detail = " ".join(_SERVER_PREFIX.sub("", lines[0]).replace("FATAL:", "").split())
    return PostgresUnreachableError(
        f"the repository's PostgreSQL server {server_of(uri)} cannot be used: {detail}"
    )
