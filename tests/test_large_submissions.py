"""What keeps a submission of a million subjobs linear and within memory.

* The repository's record writer starts each record with a new pickler memo: ZODB's own
  clears one memo for the whole commit, at a cost that grows with the largest record
  pickled before (a splitter with a million arguments made each later record cost 10 ms).
* The Local runner's batch is written one task at a time, from a generator: nothing holds
  every task's description at once.
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
import ZODB.Connection

from ganga_like.repository import storage
from ganga_like.repository.writer import RecordWriter
from ganga_like_local.runner.client import TaskSpec, stop, submit
from ganga_like_local.runner.protocol import QUEUE_DIR
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
