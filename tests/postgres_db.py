"""The PostgreSQL server the tests of the repository on PostgreSQL use: the one
``scripts/start-postgres.sh`` started (``$GANGA_TEST_POSTGRES``); each test gets a
database of its own, dropped after it."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

__all__ = ["admin", "fresh_database", "server_url"]


def server_url() -> str:
    """``$GANGA_TEST_POSTGRES`` (a login that may create databases), or skip."""
    url = os.environ.get("GANGA_TEST_POSTGRES", "")
    if not url:
        pytest.skip('no PostgreSQL: eval "$(bash scripts/start-postgres.sh)" first')
    pytest.importorskip("relstorage", reason="pip install -e '.[postgresql]'")
    return url


def database_url(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


@contextlib.contextmanager
def admin(url: str) -> Iterator[object]:
    """A cursor of ``url``'s login, outside any transaction (CREATE DATABASE needs it)."""
    import psycopg2

    from ganga_like.repository.postgres import dsn_of

    conn = psycopg2.connect(dsn_of(url))
    conn.autocommit = True
    try:
        with conn.cursor() as cursor:
            yield cursor
    finally:
        conn.close()


@contextlib.contextmanager
def fresh_database(cache: Path) -> Iterator[str]:
    """The URL of a new, empty database, dropped afterwards; RelStorage's client caches
    go under ``cache`` (``XDG_CACHE_HOME``), not into the user's."""
    url = server_url()
    name = f"ganga_test_{secrets.token_hex(6)}"
    with admin(url) as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')  # type: ignore[attr-defined]
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("XDG_CACHE_HOME", str(cache))
            yield database_url(url, name)
    finally:
        with admin(url) as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[attr-defined]
