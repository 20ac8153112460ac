"""The shared-mode client cache reopens from the index saved at close, not by a scan.

A reopened cache must answer exactly what a scan of the same file answers; a file changed
after the index was saved (or a session that died with it open) falls back to the scan.
"""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ZODB.utils import p64

from ganga_like.repository.zeo.client_cache import INDEX_SUFFIX, ResilientClientCache

SIZE = 64 * 1024  # small: writes wrap around and evict

steps = st.lists(
    st.tuples(st.integers(1, 40), st.binary(max_size=3000), st.booleans()), max_size=120
)


def _fill(
    cache: ResilientClientCache, ops: list[tuple[int, bytes, bool]], tid: int = 1
) -> dict[int, object]:
    """Stores and invalidations as a client makes them; what each oid's current record
    is (a cache may answer that, or nothing)."""
    truth: dict[int, object] = {}
    for oid, data, invalidate in ops:
        tid += 1
        key = p64(oid)
        if invalidate and cache.current.get(key) is not None:
            cache.invalidate(key, p64(tid))  # the stored record becomes an older revision
            truth[oid] = None
        elif cache.current.get(key) is None:
            cache.store(key, p64(tid), None, data or b"x")
            truth[oid] = (data or b"x", p64(tid))
        cache.setLastTid(p64(tid))
    return truth


def _consistent(cache: ResilientClientCache, truth: dict[int, object]) -> bool:
    return all(cache.load(p64(oid)) in (None, truth.get(oid)) for oid in range(1, 41))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps)
def test_a_cache_reopened_from_its_saved_index_answers_as_a_scan_does(
    tmp_path: Path, ops: list[tuple[int, bytes, bool]]
) -> None:
    work = tmp_path / f"case-{len(list(tmp_path.iterdir()))}"
    work.mkdir()
    path = str(work / "slot.zec")
    cache = ResilientClientCache(path, SIZE)
    truth = _fill(cache, ops)
    cache.close()
    assert Path(path + INDEX_SUFFIX).exists()
    scanned_path = str(work / "scanned.zec")
    shutil.copyfile(path, scanned_path)  # no index beside it: read by a scan
    reopened = ResilientClientCache(path, SIZE)
    assert not Path(path + INDEX_SUFFIX).exists()  # consumed: never trusted twice
    scanned = ResilientClientCache(scanned_path, SIZE)
    try:
        assert dict(reopened.current.items()) == dict(scanned.current.items())
        assert len(reopened) == len(scanned)
        assert reopened.getLastTid() == scanned.getLastTid()
        # (A load may move a record forward, so each cache is only checked against
        # what was stored.)
        assert _consistent(reopened, truth) and _consistent(scanned, truth)
        for oid, answer in _fill(reopened, ops, 1000).items():  # it goes on working
            truth[oid] = answer
        assert _consistent(reopened, truth)
    finally:
        reopened.close()
        scanned.close()
    Path(path + INDEX_SUFFIX).unlink()
    rescanned = ResilientClientCache(path, SIZE)  # what it wrote is a sound file
    try:
        assert _consistent(rescanned, truth)
    finally:
        rescanned.close()


def test_a_cache_changed_after_its_index_was_saved_is_scanned(tmp_path: Path) -> None:
    path = str(tmp_path / "slot.zec")
    cache = ResilientClientCache(path, SIZE)
    _fill(cache, [(1, b"one", False), (2, b"two", False)])
    cache.close()
    index = Path(path + INDEX_SUFFIX).read_bytes()
    cache = ResilientClientCache(path, SIZE)
    _fill(cache, [(3, b"three", False)], 10)
    cache.f.flush()
    Path(path + INDEX_SUFFIX).write_bytes(index)  # a stale index, as if left by a crash
    cache._lock_file.close()  # the session dies with the cache open
    cache.f.close()
    reopened = ResilientClientCache(path, SIZE)
    try:
        assert reopened.load(p64(3)) is not None  # found by the scan; the stale index ignored
        assert reopened.load(p64(1)) is not None
    finally:
        reopened.close()


def test_a_commit_larger_than_half_the_cache_fills_half_of_it_and_reads_back(
    gangadir: Path,
) -> None:
    from ganga_like.model.job import Job as JobImpl
    from ganga_like.repository.connection import Repository
    from ganga_like.repository.options import StorageOptions

    repo = Repository(gangadir, "shared", options=StorageOptions(cache_mb=1, idle_exit=2.0))
    try:

        def add() -> None:
            registry = repo.registry()
            for i in range(300):  # 3 MB of records through a 1 MB cache
                job = JobImpl()
                job.comment = f"{i:04d}" + "x" * 10_000
                registry.add(job)

        repo.in_transaction(add)
        cache = repo.db.storage._cache
        held = 0
        for offset in cache.current.values():  # each record's size, from its header
            cache.f.seek(offset + 1)
            held += struct.unpack(">I", cache.f.read(4))[0]
        assert held <= cache.maxsize // 2 + 50_000  # stored until half full, not churned
        repo.connection().cacheMinimize()
        repo.abort()
        comments = [j.comment[:4] for j in repo.registry().jobs.values()]
        assert comments == [f"{i:04d}" for i in range(300)]
    finally:
        repo.close()
