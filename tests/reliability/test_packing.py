"""Automatic packing keeps the append-only repository file from growing without end."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ganga_like.model.job import Job as JobImpl
from ganga_like.repository import packing
from ganga_like.repository.connection import Repository
from ganga_like.repository.registry import Registry
from ganga_like.runtime.settings import Settings

from .conftest import shared_settings, wait_until


def _grow(gangadir: Path, updates: int) -> int:
    """Ten jobs, then ``updates`` commits rewriting one of them; returns the file size."""
    repo = Repository(gangadir, options=Settings(pack_threshold_mb=0).storage_options())
    try:
        registry = repo.registry()
        for i in range(10):

            def add(i: int = i) -> None:
                job = JobImpl()
                job.name = f"job{i}"
                Registry(repo.connection().root()).add(job)

            repo.in_transaction(add)
        for n in range(updates):

            def update(n: int = n) -> None:
                registry.get(3).comment = f"{n}:" + "y" * 2000  # type: ignore[union-attr]

            repo.in_transaction(update)
    finally:
        repo.close()
    return (gangadir / "repository" / "Data.fs").stat().st_size


def test_a_large_file_is_packed_when_opened_and_nothing_current_is_lost(gangadir: Path) -> None:
    before = _grow(gangadir, 300)
    path = gangadir / "repository" / "Data.fs"
    policy = Settings(pack_threshold_mb=before / 2**20 / 2, pack_keep_days=0)
    repo = Repository(gangadir, options=policy.storage_options())
    repo.close()  # waits for the pack
    after = path.stat().st_size
    assert after < before / 10
    state = json.loads((path.parent / packing.STATE_NAME).read_text())
    assert state["size_before"] == before and state["size_after"] == after
    assert (path.stat().st_mode & 0o777) == 0o600
    reopened = Repository(gangadir, options=policy.storage_options())
    try:
        registry = reopened.registry()
        assert sorted(j.name for j in registry.jobs.values()) == [f"job{i}" for i in range(10)]
        assert registry.get(3).comment.startswith("299:")  # type: ignore[union-attr]
    finally:
        reopened.close()
    assert path.stat().st_size == after  # not packed again: it has not grown since


def test_recent_history_is_kept(gangadir: Path) -> None:
    before = _grow(gangadir, 100)
    policy = Settings(pack_threshold_mb=before / 2**20 / 2, pack_keep_days=7)
    Repository(gangadir, options=policy.storage_options()).close()
    path = gangadir / "repository" / "Data.fs"
    assert path.stat().st_size > before * 0.9  # a week of history is all of it
    snapshot = Repository(gangadir, "readonly")
    try:
        job = snapshot.registry().get(3)
        assert job is not None
        history = snapshot.db.storage.history(job._p_oid, size=1000)
        assert len(history) > 100  # every state of the last week, for undo
    finally:
        snapshot.close()


def test_the_shared_server_packs_when_it_starts(
    gangadir: Path, cleanup: list[subprocess.Popen[str]]
) -> None:
    before = _grow(gangadir, 300)
    path = gangadir / "repository" / "Data.fs"
    settings = shared_settings(gangadir, pack_threshold_mb=before / 2**20 / 2, pack_keep_days=0)
    repo = Repository(gangadir, "shared", options=settings.storage_options())
    try:
        assert wait_until(lambda: (path.parent / packing.STATE_NAME).exists(), 30)
        assert path.stat().st_size < before / 10
        repo.abort()
        assert repo.registry().get(3).comment.startswith("299:")  # type: ignore[union-attr]
    finally:
        repo.close()
