"""The monitor's incremental view of the active index, proven against a full read of it.

The fast path (``ActiveView.refresh``: only what changed, found through the index's own
records) must always hold what the slow path (reading the whole index) holds, whatever
mix of the monitor's own removals, other sessions' additions, removals and resubmissions,
and cache evictions came before. So must the Local backend's run map, kept from the refs'
change log.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import transaction
import ZODB
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ZODB.FileStorage import FileStorage

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.config.store import store
from ganga_like.model.interfaces import ActiveRef, ActiveRefs
from ganga_like.model.ref_follower import RefFollower
from ganga_like.repository.storage import GuardedDB
from ganga_like.repository.trees import KeyMap
from ganga_like.runtime.monitoring.active_view import ActiveView, index_records
from ganga_like.runtime.session import close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_local.settings import Local as LocalSection
from ganga_like_runner import client as runner_client
from tests.waiting import wait_until

BACKENDS = ("Local", "Slurm")
keys = st.tuples(st.integers(0, 3), st.integers(-1, 120))
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), keys, st.sampled_from(BACKENDS)),
        st.tuples(st.just("add_many"), keys, st.integers(1, 80)),
        st.tuples(st.just("remove"), keys),
        st.tuples(st.just("remove_many"), keys, st.integers(1, 80)),
        st.tuples(st.just("resubmit"), keys),
        st.tuples(st.just("monitor_removes"), keys, st.integers(1, 40)),
        st.tuples(st.just("monitor_commits_elsewhere")),
        st.tuples(st.just("evict")),
        st.tuples(st.just("cycle")),
    ),
    max_size=40,
)


@contextmanager
def two_connections(told: bool = False) -> Iterator[tuple[Any, Any, Any, Any]]:
    """A real FileStorage opened by the monitor's connection and another session's;
    ``told``: connections that tell the view which records were invalidated, as the
    repository's do."""
    with tempfile.TemporaryDirectory() as tmp:
        storage = FileStorage(str(Path(tmp) / "Data.fs"))
        db = GuardedDB(storage) if told else ZODB.DB(storage)
        other_tm, monitor_tm = transaction.TransactionManager(), transaction.TransactionManager()
        other, monitor = db.open(other_tm), db.open(monitor_tm)
        with other_tm:
            other.root()["active"] = KeyMap()
            other.root()["other"] = KeyMap()
        try:
            yield db, other, monitor, monitor_tm
        finally:
            other.close()
            monitor.close()
            db.close()


def _keys_from(tree: Any, start: tuple[int, int], count: int) -> list[Any]:
    found = []
    for key in tree.keys(min=start):
        if len(found) == count:
            break
        found.append(key)
    return found


def _cycle(db: Any, monitor: Any, tm: Any, view: ActiveView, derived: dict[str, Any]) -> None:
    last = db.lastTransaction()
    tm.begin()
    tree = monitor.root()["active"]
    collect = getattr(monitor, "collect_invalidations", None)
    view.refresh(tree, last, collect() if collect is not None else None)
    assert view.matches(tree)
    for backend, refs in view.backends.items():
        followed = derived.setdefault(backend, RefFollower())
        followed.follow(refs)
        rebuilt = RefFollower()
        rebuilt.follow(list(refs))
        assert (followed.runs, followed.masters) == (rebuilt.runs, rebuilt.masters)


@pytest.mark.parametrize("told", [False, True], ids=["records-looked-at", "oids-told"])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations)
def test_the_incremental_view_always_equals_a_full_read_of_the_index(
    told: bool, ops: list[Any]
) -> None:
    with two_connections(told) as (db, other, monitor, tm):
        view = ActiveView()
        derived: dict[str, Any] = {}
        _cycle(db, monitor, tm, view, derived)
        for op in ops:
            kind = op[0]
            other.transaction_manager.begin()  # another session's next action
            theirs = other.root()["active"]
            if kind == "add":
                theirs[op[1]] = (op[2], 1, {"id": str(op[1])})
            elif kind == "add_many":
                (job, sub), count = op[1], op[2]
                for i in range(sub, sub + count):
                    theirs[(job, i)] = (BACKENDS[i % 2], 1, {})
            elif kind == "remove":
                theirs.pop(op[1], None)
            elif kind == "remove_many":
                for key in _keys_from(theirs, op[1], op[2]):
                    del theirs[key]
            elif kind == "resubmit":
                if op[1] in theirs:
                    backend, run, data = theirs[op[1]]
                    theirs[op[1]] = (backend, run + 1, data)
            elif kind == "monitor_removes":
                # Jobs that reached a final status: removed by the monitor's own commit.
                _cycle(db, monitor, tm, view, derived)
                ours = monitor.root()["active"]
                gone = _keys_from(ours, op[1], op[2])
                for key in gone:
                    del ours[key]
                tm.commit()
                view.discard(gone)
            elif kind == "monitor_commits_elsewhere":
                # Status changes that leave the index alone still move the last transaction.
                _cycle(db, monitor, tm, view, derived)
                monitor.root()["other"][time.monotonic()] = 1
                tm.commit()
            elif kind == "evict":
                monitor.cacheMinimize()
            else:
                _cycle(db, monitor, tm, view, derived)
            if kind not in ("monitor_removes", "monitor_commits_elsewhere", "evict", "cycle"):
                other.transaction_manager.commit()
        _cycle(db, monitor, tm, view, derived)
        tm.abort()


def _follow_many(other: Any, count: int) -> None:
    """Another session's commit of ``count`` followed subjobs of job 1: a many-bucket index."""
    with other.transaction_manager:
        tree = other.root()["active"]
        for i in range(count):
            tree[(1, i)] = ("Local", 1, {})


@pytest.mark.parametrize("told", [False, True], ids=["records-looked-at", "oids-told"])
def test_another_sessions_change_rereads_only_the_records_it_changed(told: bool) -> None:
    with two_connections(told) as (db, other, monitor, tm):
        _follow_many(other, 20_000)
        view = ActiveView()
        for _ in range(5):
            _cycle(db, monitor, tm, view, {})
        assert view.resyncs == 1
        assert len(index_records(monitor.root()["active"])) > 100  # a many-bucket tree
        with other.transaction_manager:
            del other.root()["active"][(1, 7)]
        _cycle(db, monitor, tm, view, {})
        assert (view.resyncs, view.partial_reads, view.records_reread) == (1, 1, 1)
        assert view.backends["Local"].get(1, 7) is None
        assert len(view.backends["Local"]) == 19_999
        with other.transaction_manager:  # enough new keys to split buckets
            for i in range(20_000, 20_100):
                other.root()["active"][(1, i)] = ("Local", 1, {})
        _cycle(db, monitor, tm, view, {})
        assert view.resyncs == 1 and view.partial_reads == 2
        assert view.records_reread < 10
        assert len(view.backends["Local"]) == 20_099
        tm.abort()


def test_the_monitors_own_commits_cost_nothing_to_a_view_told_what_was_invalidated() -> None:
    """The monitor commits every cycle that found a change, which moves the database's
    last transaction: a view that must look for ghosts then looks at every record of the
    index, one told the invalidated oids at none."""
    for told, expected in ((True, 0), (False, None)):
        with two_connections(told) as (db, other, monitor, tm):
            _follow_many(other, 20_000)
            view = ActiveView()
            _cycle(db, monitor, tm, view, {})
            records = len(index_records(monitor.root()["active"]))
            for _ in range(5):  # status changes recorded by the monitor itself
                _cycle(db, monitor, tm, view, {})
                monitor.root()["other"][time.monotonic()] = 1
                tm.commit()
            _cycle(db, monitor, tm, view, {})
            if expected is None:
                assert view.records_checked >= 5 * records
            else:
                assert view.records_checked == expected
            with other.transaction_manager:
                del other.root()["active"][(1, 7)]
            before = view.records_checked
            _cycle(db, monitor, tm, view, {})
            assert view.backends["Local"].get(1, 7) is None
            if told:  # the bucket that lost the key (and nothing else another commit made)
                assert view.records_checked - before == 1
            tm.abort()


def test_refs_tell_a_backend_what_changed_or_that_it_must_rebuild() -> None:
    refs = ActiveRefs([ActiveRef(1, i, 1, {}) for i in range(3)])
    start = refs.version
    refs.discard(1, 0)
    refs.add(ActiveRef(1, 1, 2, {}))  # a resubmission replaces the earlier run
    assert list(refs.changes_since(start) or ()) == [
        (False, ActiveRef(1, 0, 1, {})),
        (False, ActiveRef(1, 1, 1, {})),
        (True, ActiveRef(1, 1, 2, {})),
    ]
    assert sorted(r.subjob_id or 0 for r in refs) == [1, 2]
    for i in range(3 * ActiveRefs.LOG_MIN):
        refs.add(ActiveRef(2, None, i, {}))
    assert refs.changes_since(start) is None  # too far behind: rebuild from the refs


def test_the_monitor_follows_a_kill_from_the_session_reading_only_what_changed(
    gangadir: Path,
) -> None:
    session = open_session(
        Settings(gangadir=gangadir, monitoring=False),
        store.snapshot().replaced({LocalSection: {"max_concurrent": 1, "idle_exit": 5.0}}),
    )
    try:
        j = Job(
            application=Executable(exe="/bin/sleep"),
            splitter=ArgSplitter(args=[["600"] for _ in range(40)]),
        )
        j.submit()
        monitor = session.monitor
        assert wait_until(
            lambda: monitor.run_once() is not None and j.subjobs[0].status == "running"
        )
        resyncs, partial = monitor.view.resyncs, monitor.view.partial_reads
        for _ in range(3):
            monitor.run_once()
        # Nothing changed: the index is not read again.
        assert (monitor.view.resyncs, monitor.view.partial_reads) == (resyncs, partial)
        assert len(monitor.view.backends["Local"]) == 40
        j.subjobs[5].kill()  # committed by the session's connection, not the monitor's
        monitor.run_once()
        assert monitor.view.resyncs == resyncs  # only the changed records were read
        assert monitor.view.partial_reads == partial + 1
        assert monitor.view.backends["Local"].get(j.id, 5) is None
        assert len(monitor.view.backends["Local"]) == 39
        j.kill()
        monitor.run_once()
        assert not monitor.view.backends["Local"]
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))
