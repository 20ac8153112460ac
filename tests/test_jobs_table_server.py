"""``ganga jobs`` answered by the jobs-table server says exactly what reading the repository
says, shows every change another process committed before it was asked, and never keeps
the repository's server from leaving.

The property test changes a repository at random through another session in a process of
its own (jobs, names, statuses, masters with subjobs, removals, renames, jobs the monitor
follows, submission intents) and, after each change, compares the table server's answer
with the plain path's output. The other tests run the real command and the real server.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ganga_like.commands import table_client, table_server
from ganga_like.config.choices import MASTER_STATUS_ORDERS
from ganga_like.repository.zeo import shared

from .other_session import OtherSession
from .test_jobs_listing_cache import (
    _opened_the_repository,
    _plain,
    _repository,
    _settings,
    changes,
    creates,
    ganga_jobs,
)

ORDER = MASTER_STATUS_ORDERS[0]


def test_client_and_server_name_the_same_socket() -> None:
    assert table_client.SOCKET_NAME == table_server.SOCKET_NAME
    assert table_client.SHORT_SUFFIX == table_server.SHORT_SUFFIX
    assert table_client.LOG_NAME == table_server.LOG_NAME


def _socket(gangadir: Path) -> Path:
    """The socket the listings ask (in the gangadir unless its path is too long)."""
    return table_client._socket_path(_settings(gangadir, ORDER))


def _wait_for(condition: Any, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"still not {what}"
        time.sleep(0.05)


def _answers(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except OSError:
            return False
    return True


def _served(gangadir: Path, as_json: bool) -> str | None:
    shown = table_client.asked_answer(_settings(gangadir, ORDER), as_json=as_json)
    return None if shown is None else shown + "\n"


# Each example starts another session's process, a repository server and a table server
# (a few seconds under load): 8 examples of up to 6 changes still draw every kind.
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    first=st.lists(creates, min_size=1, max_size=3),
    script=st.lists(st.tuples(changes, st.booleans()), min_size=1, max_size=6),
)
def test_the_table_server_answers_what_the_repository_holds(
    child_env: dict[str, str], first: list[Any], script: list[Any]
) -> None:
    with _repository(child_env) as (gangadir, other):
        for change in first:
            other.do(*change)
        _plain(gangadir, False, ORDER)  # starts the table server
        _wait_for(lambda: _answers(_socket(gangadir)), "answering")
        for change, as_json in script:
            jobs, followed, intents = other.do(*change)
            served = _served(gangadir, as_json)
            plain = _plain(gangadir, as_json, ORDER)
            assert served is None or served == plain
            if jobs and not followed and not intents:
                event("a settled repository")
                assert served == plain  # answered, and right
            else:
                event("an unsettled repository")
                assert served is None  # what monitoring may change is read afresh


@pytest.fixture(scope="module")
def child_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from .test_jobs_listing_cache import _child_env

    return _child_env(tmp_path_factory.mktemp("env"))


@pytest.fixture
def listed(gangadir: Path, env_for: dict[str, str]) -> Iterator[OtherSession]:
    """A repository of two jobs made by another session, listed once (which started its
    table server), and that other session, still open."""
    other = OtherSession(gangadir, env_for)
    try:
        other.do("create", "first", "completed", [])
        other.do("create", "split", "new", ["completed", "failed"])
        ganga_jobs(env_for)
        _wait_for(lambda: _answers(_socket(gangadir)), "answering")
        yield other
    finally:
        other.close()


def test_a_change_by_another_process_is_answered_without_opening_the_repository(
    listed: OtherSession, gangadir: Path, env_for: dict[str, str], tmp_path: Path
) -> None:
    modules = tmp_path / "modules.txt"
    for change, seen in (
        (("rename", 0, "renamed-elsewhere"), "renamed-elsewhere"),
        (("create", "made-elsewhere", "failed", []), "made-elsewhere"),
    ):
        listed.do(*change)
        shown = ganga_jobs(env_for, modules=modules)
        assert not _opened_the_repository(modules)  # the table server answered
        assert seen in shown
    listed.do("remove", 0)
    shown = ganga_jobs(env_for, modules=modules)
    assert not _opened_the_repository(modules)
    assert "renamed-elsewhere" not in shown and "made-elsewhere" in shown
    jobs_json = json.loads(ganga_jobs(env_for, "--json"))
    assert [row["name"] for row in jobs_json] == ["split", "made-elsewhere"]


def test_the_first_listing_after_another_process_made_the_jobs_is_answered_by_the_table_server(
    gangadir: Path, env_for: dict[str, str], tmp_path: Path
) -> None:
    """No listing before: the repository's server started the table server, which read
    the jobs as they were made."""
    from ganga_like.repository.zeo.table_helper import LOG_NAME

    assert LOG_NAME == table_server.LOG_NAME
    modules = tmp_path / "modules.txt"
    other = OtherSession(gangadir, env_for)
    try:
        other.do("create", "before-it-started", "completed", [])
        _wait_for(lambda: _answers(_socket(gangadir)), "started by the repository's server")
        other.do("create", "after-it-started", "failed", [])
        other.do("rename", 0, "renamed-after")
        shown = ganga_jobs(env_for, modules=modules)
        assert not _opened_the_repository(modules)
        assert "renamed-after" in shown and "after-it-started" in shown
        assert "before-it-started" not in shown
    finally:
        other.close()


def test_after_the_repository_server_left_the_table_it_kept_answers_without_starting_it(
    listed: OtherSession, gangadir: Path, env_for: dict[str, str], tmp_path: Path
) -> None:
    """The table server writes the jobs-table cache whenever it reads a settled table as
    of the repository file's last transaction."""
    from ganga_like.commands import jobs_cache
    from ganga_like.repository.file_tail import file_stamp

    resolved = gangadir.resolve()
    listed.do("rename", 0, "renamed-before-it-left")
    listed.close()

    def written() -> bool:
        stamp = file_stamp(jobs_cache.repository_file(resolved))
        try:
            cached = json.loads(jobs_cache.cache_path(resolved).read_text())
        except (OSError, ValueError):
            return False
        return stamp is not None and cached.get("stamp") == stamp.as_list()

    _wait_for(written, "written by the table server")
    assert json.loads(jobs_cache.cache_path(resolved).read_text())["writer"] == (
        jobs_cache.SERVER_WRITER
    )
    repo_dir = resolved / "repository"
    assert shared.stop_server(repo_dir)
    modules = tmp_path / "modules.txt"
    shown = ganga_jobs(env_for, modules=modules)
    assert not _opened_the_repository(modules) and "renamed-before-it-left" in shown
    assert shared.server_pid(repo_dir) is None  # not started


def test_a_gangadir_too_deep_for_a_socket_in_it_is_answered_by_its_table_server(
    tmp_path: Path, env_for: dict[str, str]
) -> None:
    gangadir = tmp_path / ("deep" * 20) / "gangadir"
    env = {**env_for, "GANGA_DIR": str(gangadir)}
    modules = tmp_path / "modules.txt"
    other = OtherSession(gangadir, env)
    try:
        other.do("create", "deep-down", "completed", [])
        ganga_jobs(env)  # starts the table server
        sock = _socket(gangadir)
        assert not sock.is_relative_to(gangadir.resolve())  # too long a path for a socket
        _wait_for(lambda: _answers(sock), "answering")
        shown = ganga_jobs(env, modules=modules)
        assert not _opened_the_repository(modules)  # the table server answered
        assert "deep-down" in shown
    finally:
        other.close()
        shared.stop_server(gangadir / "repository", timeout=60)


def test_the_table_server_keeps_neither_the_repository_server_nor_maintenance_waiting(
    listed: OtherSession, gangadir: Path
) -> None:
    from ganga_like.repository.checks.exclusive import hold_for_maintenance

    listed.close()  # the other session leaves: only the table server is connected
    assert _answers(_socket(gangadir))
    # What `ganga repository recover|reset` takes first: the server leaves at once (the
    # table server is no session), and every client cache slot is free.
    hold = hold_for_maintenance(gangadir.resolve() / "repository" / "Data.fs", "checking")
    hold.close()
    _wait_for(lambda: not _socket(gangadir).exists(), "gone with the repository's server")
    assert shared.server_pid(gangadir.resolve() / "repository") is None  # not restarted


@contextlib.contextmanager
def _answering(path: Path, reply: bytes) -> Iterator[None]:
    """Something else on the table server's socket, answering ``reply`` to anyone."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):  # a client gone first: a probe
                client, _ = listener.accept()
                with client:
                    client.recv(65536)
                    client.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        listener.close()
        path.unlink(missing_ok=True)


@pytest.mark.parametrize(
    "reply",
    [b"garbage", b'{"rows": [{"fqid": "0"}], "columns": ["fqid"], "next_id": 1}', b""],
)
def test_a_foreign_or_damaged_answer_is_ignored(
    gangadir: Path, env_for: dict[str, str], reply: bytes
) -> None:
    other = OtherSession(gangadir, env_for)
    try:
        other.do("create", "first", "completed", [])
    finally:
        other.close()
    with _answering(_socket(gangadir), reply):
        shown = ganga_jobs(env_for)
        (gangadir / "repository" / "jobs-table.json").unlink()
        assert ganga_jobs(env_for) == shown
    assert "first" in shown


def test_an_embedded_repository_has_no_table_server(
    gangadir: Path, env_for: dict[str, str]
) -> None:
    env = {**env_for, "GANGA_REPOSITORY_MODE": "embedded"}
    ganga_jobs(env)
    assert not (gangadir / "repository" / table_server.LOCK_NAME).exists()


def test_a_listing_after_the_repository_server_left_is_sent_to_the_plain_read_at_once(
    listed: OtherSession, gangadir: Path
) -> None:
    """Reading for it would wait for a repository server that only the listing, once
    given up on the table server, starts: the table server answers nothing and leaves."""
    listed.close()
    repo_dir = gangadir.resolve() / "repository"
    assert shared.stop_server(repo_dir)
    # Before, the table server took the request and read, waiting for its server to come
    # back, then answered that the read failed; the listing waited all that time.
    assert table_client._ask(_socket(gangadir), {"settings": None}) is None
    _wait_for(lambda: not _socket(gangadir).exists(), "gone with the repository's server")
    assert shared.server_pid(repo_dir) is None  # not restarted
