"""What keeps a submission of a million subjobs linear and within memory.

* The repository's record writer starts each record with a new pickler memo: ZODB's own
  clears one memo for the whole commit, at a cost that grows with the largest record
  pickled before (a splitter with a million arguments made each later record cost 10 ms).
* The Local runner's batch is written one task at a time, from a generator: nothing holds
  every task's description at once.
* The shared server, starting, reads the oids of recent transactions only up to a bound:
  not the 2,000,000 records of a submission that came last.
"""

from __future__ import annotations

import gc
import io
import json
import os
import pickle
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
import transaction
import ZODB
import ZODB.Connection
from BTrees.IOBTree import IOBTree
from persistent.mapping import PersistentMapping
from ZODB.FileStorage import FileStorage

from ganga_like.repository import file_storage, storage
from ganga_like.repository.writer import RecordWriter
from ganga_like_runner.client import TaskSpec, stop, submit
from ganga_like_runner.protocol import QUEUE_DIR
from tests.test_local_runner import BASE_ENV, Journal, make_task


def test_connections_write_records_with_the_writer_that_forgets_large_memos() -> None:
    assert storage.open_database is not None  # importing the repository installs it
    assert ZODB.Connection.ObjectWriter is RecordWriter


def test_a_large_record_leaves_no_memo_behind_for_the_next_ones() -> None:
    # The memo table is what each record's start pays for; what stays allocated after a
    # large record, once it is gone, is that table (stock writer: 8 MB here).
    tracemalloc.start()
    try:
        writer = RecordWriter()
        before = tracemalloc.get_traced_memory()[0]
        large = tuple((str(i),) for i in range(100_000))
        writer._dump(tuple, large)
        del large
        data = writer._dump(tuple, ("small", 1))
        gc.collect()
        left = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert left < 1_000_000
    unpickler = pickle.Unpickler(io.BytesIO(data))
    assert (unpickler.load(), unpickler.load()) == (tuple, ("small", 1))


@pytest.fixture
def runner_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "runner"
    yield path
    stop(path)


def test_a_batch_made_by_a_generator_runs_every_task(tmp_path: Path, runner_dir: Path) -> None:
    journal = Journal(tmp_path / "events.jsonl")
    keys = [f"9.{i}" for i in range(50)]
    made: list[str] = []

    def tasks() -> Iterator[TaskSpec]:
        for key in keys:
            made.append(key)
            yield make_task(tmp_path, key, ["true"], journal)

    submit(runner_dir, tasks(), BASE_ENV, max_concurrent=4)
    assert made == keys
    final = journal.wait(keys)
    assert all(final[key].event == "completed" for key in keys)


def test_an_empty_generator_queues_nothing(runner_dir: Path) -> None:
    submit(runner_dir, iter(()), BASE_ENV, max_concurrent=1)
    queue = runner_dir / QUEUE_DIR
    assert not queue.exists() or not list(queue.iterdir())


def test_a_task_refused_midway_leaves_no_batch_behind(tmp_path: Path, runner_dir: Path) -> None:
    journal = Journal(tmp_path / "events.jsonl")

    def tasks() -> Iterator[TaskSpec]:
        yield make_task(tmp_path, "9.0", ["true"], journal)
        yield TaskSpec("9.1", [], {}, "/w", "/o", [], [], "/e")  # no command: refused

    with pytest.raises(ValueError, match="argv must not be empty"):
        submit(runner_dir, tasks(), BASE_ENV, max_concurrent=1)
    queue = runner_dir / QUEUE_DIR
    assert not queue.exists() or not [p for p in queue.iterdir() if json.loads(p.read_bytes())]
    assert not os.path.exists(tmp_path / "events.jsonl")


def test_the_server_start_reads_recent_transactions_only_up_to_a_large_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(file_storage, "INVALIDATIONS_READ_MAX", 50_000)
    fs = file_storage.RepositoryFileStorage(str(tmp_path / "Data.fs"))
    db = ZODB.DB(fs)
    try:
        connection = db.open()
        connection.root()["records"] = records = IOBTree()
        transaction.commit()
        sizes = [1, 2, 2000, 3, 4]  # the third: 2,000 records of 100 bytes, 200 kB
        for size in sizes:
            for i in range(size):
                records[size * 10_000 + i] = PersistentMapping(data="x" * 100)
            transaction.commit()
        stock = FileStorage.lastInvalidations(fs, 100)
        ours = fs.lastInvalidations(100)
        assert [len(oids) for _tid, oids in stock][-3:][1:] == [3 + 1, 4 + 1]
        assert len(stock[-3][1]) > 2000
        assert ours == stock[-2:]  # what came after the large one, as ZODB reads it
        connection.close()
    finally:
        db.close()
