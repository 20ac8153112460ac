"""``ganga jobs`` answered from the jobs-table cache says exactly what reading the
repository says, and only while the repository holds what the cache was made from.

The property test builds random repositories through another session in a process of its
own (jobs, names, statuses, masters with subjobs, removals, renames, jobs the monitor
follows, submission intents) and, after each change, compares the cache's answer with the
plain path's output, and checks the cache answers again once the plain path has read a
settled repository. The other tests run the real command: a change made by another
process is seen, the output is byte for byte the same with and without the cache, and a
cache that is damaged, foreign or cannot be written changes nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from ganga_like.commands import jobs_cache, listing, table_server
from ganga_like.commands.context import using_settings
from ganga_like.config.choices import MASTER_STATUS_ORDERS
from ganga_like.repository import file_tail
from ganga_like.repository.options import socket_path
from ganga_like.repository.zeo import shared
from ganga_like.runtime.settings import Settings

from .conftest import CHILD_PYTHONPATH
from .other_session import STATUSES, OtherSession

# -- the file's stamp -------------------------------------------------------------------


def test_the_file_format_constants_are_zodbs() -> None:
    from ZODB.FileStorage.FileStorage import packed_version
    from ZODB.FileStorage.format import TRANS_HDR, TRANS_HDR_LEN

    assert packed_version == file_tail.MAGIC
    assert (file_tail.TRANS_HDR, file_tail.TRANS_HDR_LEN) == (TRANS_HDR, TRANS_HDR_LEN)


def _commit_one(path: Path, value: int) -> str:
    """Commit ``value`` under the root in the FileStorage at ``path``; the new tid in hex."""
    import transaction
    import ZODB
    from ZODB.FileStorage import FileStorage

    db = ZODB.DB(FileStorage(str(path)))
    try:
        with db.transaction() as conn:
            conn.root()["value"] = value
        return str(db.lastTransaction().hex())
    finally:
        db.close()
        transaction.abort()


def test_the_stamp_names_the_last_finished_transaction_and_nothing_else(tmp_path: Path) -> None:
    path = tmp_path / "Data.fs"
    assert file_tail.file_stamp(path) is None  # no file
    first = _commit_one(path, 1)
    stamp = file_tail.file_stamp(path)
    assert stamp is not None and stamp.tid == first and stamp.size == path.stat().st_size
    second = _commit_one(path, 2)
    again = file_tail.file_stamp(path)
    assert again is not None and again.tid == second and again.size > stamp.size
    intact = path.read_bytes()
    # The last transaction flagged "being committed": a commit half done.
    (length,) = struct.unpack(">Q", intact[-8:])
    status_at = len(intact) - 8 - length + 16
    path.write_bytes(intact[:status_at] + b"c" + intact[status_at + 1 :])
    assert file_tail.file_stamp(path) is None
    for damaged in (intact[:-3], intact + b"\0" * 40, b"FS21" + intact[4:], b""):
        path.write_bytes(damaged)
        assert file_tail.file_stamp(path) is None


# -- the property: the cache says what the repository says ---------------------------

# Any name a job may have: every character but NUL, which names refuse.
names = st.text(st.characters(blacklist_characters="\x00"), max_size=12) | st.sampled_from(
    ["", "scan", "x" * 60, "a\nb", "é✓", "id"]
)
indexes = st.integers(0, 50)
creates = st.tuples(
    st.just("create"),
    names,
    st.sampled_from(STATUSES),
    st.lists(st.sampled_from(STATUSES), max_size=4),
)
changes = st.one_of(
    st.just(("nothing",)),
    creates,
    st.tuples(st.just("rename"), indexes, names),
    st.tuples(st.just("remove"), indexes),
    st.tuples(st.sampled_from(["follow", "unfollow", "intent", "clear_intent"]), indexes),
)
# Mostly the default order: a cache made under one order must not answer for the other.
orders = st.sampled_from([*MASTER_STATUS_ORDERS, MASTER_STATUS_ORDERS[0]])
listings = st.tuples(st.booleans(), orders)


def _settings(gangadir: Path, order: str) -> Settings:
    return Settings(gangadir=gangadir, master_status_order=order)


def _plain(gangadir: Path, as_json: bool, order: str) -> str:
    """What the plain path prints (it also writes the cache when it may)."""
    out = io.StringIO()
    args = argparse.Namespace(query=[], json=as_json)
    with using_settings(lambda: _settings(gangadir, order)), contextlib.redirect_stdout(out):
        assert listing.list_jobs(args) == 0
    return out.getvalue()


def _fast(gangadir: Path, as_json: bool, order: str) -> str | None:
    shown = jobs_cache.cached_answer(_settings(gangadir, order), as_json=as_json)
    return None if shown is None else shown + "\n"


@contextlib.contextmanager
def _repository(env: dict[str, str]) -> Iterator[tuple[Path, OtherSession]]:
    work = Path(tempfile.mkdtemp(prefix="jobs-cache-"))
    gangadir = work / "gangadir"
    other = OtherSession(gangadir, env)
    try:
        yield gangadir, other
    finally:
        other.close()
        with contextlib.suppress(Exception):
            shared.stop_server(gangadir / "repository")
        shutil.rmtree(work, ignore_errors=True)


def _child_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "PYTHONPATH": CHILD_PYTHONPATH,
    }


@pytest.fixture(scope="module")
def child_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _child_env(tmp_path_factory.mktemp("env"))


# Each example starts another session's process and a repository server (about a second):
# 12 examples of up to 8 changes and listings each still draw every kind of change, both
# orders and both outputs, settled and unsettled repositories (the events say so).
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    first=st.lists(creates, max_size=4),
    script=st.lists(st.tuples(changes, listings), min_size=1, max_size=8),
)
def test_the_cache_answers_what_the_repository_holds(
    child_env: dict[str, str], first: list[Any], script: list[Any]
) -> None:
    with _repository(child_env) as (gangadir, other):
        for change in first:
            other.do(*change)
        for change, (as_json, order) in script:
            jobs, followed, intents = other.do(*change)
            before = _fast(gangadir, as_json, order)
            plain = _plain(gangadir, as_json, order)
            assert before is None or before == plain
            event("answered from the cache" if before is not None else "read from the repository")
            after = _fast(gangadir, as_json, order)
            if jobs and not followed and not intents:
                event("a settled repository listed")
                assert after == plain  # the plain path left a cache that answers
            else:
                event("an unsettled repository listed")
                assert after is None  # what opening or monitoring may change is not cached


# -- the real command -------------------------------------------------------------------

GANGA = Path(sys.executable).with_name("ganga")


def ganga_jobs(env: dict[str, str], *args: str, modules: Path | None = None) -> str:
    """``ganga jobs ARGS``'s output; with ``modules``, the modules it loaded are listed
    there (``GANGA_DEBUG_MODULES_FILE``)."""
    extra = {"GANGA_DEBUG_MODULES_FILE": str(modules)} if modules else {}
    done = subprocess.run(
        [str(GANGA), "jobs", *args],
        env={**env, **extra},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


def _opened_the_repository(modules: Path) -> bool:
    return "ZODB" in modules.read_text().split()


@pytest.fixture(scope="module")
def filled_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A gangadir holding a few jobs with odd names, a master with subjobs in several
    statuses and a removed job, made once by another process (its server stopped, never
    listed: no cache in it)."""
    work = tmp_path_factory.mktemp("filled")
    gangadir = work / "gangadir"
    other = OtherSession(gangadir, _child_env(work))
    try:
        other.do("create", "scan-a", "completed", [])
        other.do("create", "a name\nover two lines " + "x" * 50, "failed", [])
        other.do("create", "split", "new", ["completed", "failed", "running", "new"])
        other.do("create", "é✓ 名前", "killed", [])
        other.do("create", "gone", "new", [])
        other.do("remove", 4)
    finally:
        other.close()
        shared.stop_server(gangadir / "repository", timeout=60)
    return gangadir


@pytest.fixture
def filled(filled_once: Path, gangadir: Path, env_for: dict[str, str]) -> Iterator[dict[str, str]]:
    """A copy of that repository in this test's gangadir, where no jobs-table server can
    listen (a directory is in its socket's place, wherever that is: a gangadir too deep
    has it in the temporary directory): every miss of the cache is read from the
    repository (the table server's answers: test_jobs_table_server.py)."""
    shutil.copytree(filled_once, gangadir, symlinks=True)
    blocked = socket_path(
        gangadir / "repository", table_server.SOCKET_NAME, table_server.SHORT_SUFFIX
    )
    blocked.mkdir()
    try:
        yield env_for
    finally:
        shared.stop_server(gangadir / "repository", timeout=60)
        blocked.rmdir()


@pytest.mark.parametrize("mode", ["shared", "embedded"])
def test_the_output_is_the_same_byte_for_byte_with_and_without_the_cache(
    filled: dict[str, str], gangadir: Path, tmp_path: Path, mode: str
) -> None:
    env = {**filled, "GANGA_REPOSITORY_MODE": mode}
    if mode == "embedded":  # alone: the server the other session used is stopped first
        shared.stop_server(gangadir / "repository")
    modules = tmp_path / "modules.txt"
    shown = {}
    for args in ([], ["--json"]):
        jobs_cache.cache_path(gangadir.resolve()).unlink(missing_ok=True)
        plain = ganga_jobs(env, *args, modules=modules)
        assert _opened_the_repository(modules)
        cached = ganga_jobs(env, *args, modules=modules)
        assert not _opened_the_repository(modules)  # answered from the cache
        assert cached == plain
        shown[bool(args)] = plain
    table = shown[False]
    assert "4 (" in table and "é✓ 名前" in table and "over two lines" in table
    assert [row["name"] for row in json.loads(shown[True])][-1] == "é✓ 名前"


def test_a_change_by_another_process_is_seen_by_the_next_listing(
    filled: dict[str, str], gangadir: Path, tmp_path: Path
) -> None:
    modules = tmp_path / "modules.txt"
    ganga_jobs(filled)
    first = ganga_jobs(filled, modules=modules)
    assert not _opened_the_repository(modules) and "scan-a" in first
    other = OtherSession(gangadir, filled)
    try:
        other.do("rename", 0, "renamed-elsewhere")
        other.do("create", "made-elsewhere", "new", [])
        changed = ganga_jobs(filled, modules=modules)  # the cache cannot answer
        assert "renamed-elsewhere" in changed and "made-elsewhere" in changed
        assert "scan-a" not in changed
        assert ganga_jobs(filled, modules=modules) == changed
        assert not _opened_the_repository(modules)
        # A job the monitor follows: the listing reads the repository each time.
        other.do("follow", 1)
        ganga_jobs(filled)
        ganga_jobs(filled, modules=modules)
        assert _opened_the_repository(modules)
    finally:
        other.close()


def test_a_listing_the_cache_answers_reads_neither_the_configuration_nor_the_plugins(
    filled: dict[str, str], gangadir: Path, tmp_path: Path
) -> None:
    modules = tmp_path / "modules.txt"
    plain = ganga_jobs(filled)
    assert ganga_jobs(filled, modules=modules) == plain
    loaded = set(modules.read_text().split())
    assert not _opened_the_repository(modules)
    assert not loaded & {"traitlets", "importlib.metadata", "ganga_like.config.store"}
    # A config file the fast reading cannot be sure of: the configuration decides, and
    # the answer is the same.
    config = gangadir.parent / "xdg-config" / "ganga_like"
    config.mkdir(parents=True, exist_ok=True)
    (config / "ganga_config.py").write_text("c.Display.columns = ['fqid', 'status']\n")
    assert ganga_jobs(filled, modules=modules) == plain
    assert "traitlets" in modules.read_text().split()
    assert not _opened_the_repository(modules)


def _valid_cache(gangadir: Path, env: dict[str, str]) -> dict[str, Any]:
    ganga_jobs(env)
    loaded: dict[str, Any] = json.loads(jobs_cache.cache_path(gangadir.resolve()).read_text())
    return loaded


def _foreign(gangadir: Path, env: dict[str, str]) -> bytes:
    return json.dumps({**_valid_cache(gangadir, env), "format": 999}).encode()


def _rows_without_a_column(gangadir: Path, env: dict[str, str]) -> bytes:
    cache = _valid_cache(gangadir, env)
    del cache["rows"][0]["name"]
    return json.dumps(cache).encode()


def _a_row_of_the_wrong_type(gangadir: Path, env: dict[str, str]) -> bytes:
    cache = _valid_cache(gangadir, env)
    cache["rows"][1]["status"] = 3
    return json.dumps(cache).encode()


def _truncated(gangadir: Path, env: dict[str, str]) -> bytes:
    return json.dumps(_valid_cache(gangadir, env)).encode()[:-100]


def _stamped_for_another_file(gangadir: Path, env: dict[str, str]) -> bytes:
    cache = _valid_cache(gangadir, env)
    cache["stamp"][3] += 1
    return json.dumps(cache).encode()


DAMAGE = {
    "empty": lambda g, e: b"",
    "not JSON": lambda g, e: b"\xff\xfe{{{ not json",
    "a list": lambda g, e: b"[1, 2, 3]",
    "nested too deep": lambda g, e: b"[" * 100_000,
    "another version": _foreign,
    "cut short": _truncated,
    "a row without a column": _rows_without_a_column,
    "a cell that is not text": _a_row_of_the_wrong_type,
    "another file's stamp": _stamped_for_another_file,
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_or_foreign_cache_is_ignored_and_written_again(
    filled: dict[str, str], gangadir: Path, tmp_path: Path, damage: str
) -> None:
    path = jobs_cache.cache_path(gangadir.resolve())
    expected = ganga_jobs(filled)
    path.write_bytes(DAMAGE[damage](gangadir, filled))
    modules = tmp_path / "modules.txt"
    assert ganga_jobs(filled, modules=modules) == expected
    assert _opened_the_repository(modules)
    assert ganga_jobs(filled, modules=modules) == expected  # written again, and used
    assert not _opened_the_repository(modules)


def test_a_cache_that_cannot_be_written_is_skipped_without_a_word(
    filled: dict[str, str], gangadir: Path
) -> None:
    path = jobs_cache.cache_path(gangadir.resolve())
    expected = ganga_jobs(filled)
    path.unlink()
    path.mkdir()  # the rename over it fails, as on a read-only or full disk
    assert ganga_jobs(filled) == expected  # and nothing on stderr (checked there)
    assert path.is_dir()
    assert not [p for p in path.parent.iterdir() if p.name.startswith(f".{path.name}")]


def test_a_readonly_view_is_never_answered_from_the_cache(
    filled: dict[str, str], gangadir: Path
) -> None:
    order = Settings().master_status_order
    assert _fast(gangadir, False, order) is None
    _plain(gangadir, False, order)  # in this process: the cache is of this interpreter
    assert jobs_cache.cached_answer(Settings(gangadir=gangadir), as_json=False) is not None
    readonly = Settings(gangadir=gangadir, repository_mode="readonly")
    assert jobs_cache.cached_answer(readonly, as_json=False) is None
    assert jobs_cache.stamp_before_opening(readonly) is None


def test_a_table_showing_an_object_whose_class_is_gone_is_never_cached(
    gangadir_with_a_broken_job: Path,
) -> None:
    """Its plugin may come back (installed, or mended in place) without a stored change."""
    gangadir = gangadir_with_a_broken_job
    order = Settings().master_status_order
    try:
        shown = _plain(gangadir, False, order)
        assert "broken" in shown
        assert _fast(gangadir, False, order) is None
    finally:
        shared.stop_server(gangadir / "repository")


def test_rows_are_stored_only_under_the_stamp_of_the_transaction_they_were_read_from(
    gangadir: Path, child_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows read before another session's commit must never be stored under a stamp of
    the file after it (the stamp is taken before opening; a client of the shared server
    may still be a commit behind the file): the snapshot read must be the stamped one."""
    order = Settings().master_status_order
    other = OtherSession(gangadir, child_env)
    try:
        other.do("create", "before", "new", [])
        offer = listing._cache_if_settled

        def commit_then_offer(session: Any, stamp: Any, rows: list[dict[str, Any]]) -> None:
            other.do("rename", 0, "after")  # the rows read still say "before"
            newer = file_tail.file_stamp(Path(stamp.path))
            assert newer is not None and newer.tid != stamp.tid
            offer(session, newer, rows)

        monkeypatch.setattr(listing, "_cache_if_settled", commit_then_offer)
        assert "before" in _plain(gangadir, False, order)
        assert _fast(gangadir, False, order) is None
        monkeypatch.setattr(listing, "_cache_if_settled", offer)
        shown = _plain(gangadir, False, order)
        assert "after" in shown and _fast(gangadir, False, order) == shown
    finally:
        other.close()
        shared.stop_server(gangadir / "repository")
