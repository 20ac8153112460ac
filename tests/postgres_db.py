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

__all__ = ["admin", "fresh_database", "private_server", "server_script", "server_url"]


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


ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def private_server() -> Iterator[tuple[str, Path]]:
    """A PostgreSQL cluster of the test's own (to restart or stop), started by the
    project's script on a free port: (URL of its database ``ganga``, its directory);
    stopped and removed after. Needs root (or the postgres binaries) like the script."""
    import subprocess
    import tempfile

    from .xrootd_server import free_port

    server_url()  # skips where the shared one is not set up either
    # Under /tmp itself: the postgres user cannot enter pytest's private directories.
    directory = Path(tempfile.mkdtemp(prefix="ganga-pg-test-", dir="/tmp"))
    directory.chmod(0o755)
    env = {**os.environ, "PG_TEST_PORT": str(free_port())}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "start-postgres.sh"), str(directory)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    url = done.stdout.strip().split("=", 1)[1]
    try:
        yield url, directory
    finally:
        server_script("stop", directory, "--purge")


def server_script(what: str, directory: Path, *options: str) -> None:
    """Run ``scripts/{what}-postgres.sh`` on ``directory`` (the cluster keeps its port)."""
    import subprocess

    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / f"{what}-postgres.sh"), *options, str(directory)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PG_TEST_PORT": str(urlsplit(_url_of(directory)).port)},
    )
    assert done.returncode == 0, done.stderr


def _url_of(directory: Path) -> str:
    return (directory / "env.sh").read_text().strip().split("=", 1)[1]
