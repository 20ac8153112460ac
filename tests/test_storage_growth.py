"""The repository grows with the subjobs run, not with their square.

Subjobs run one after another (one slot, Local, a real runner and repository): between two
of them every subjob left is waiting. The master stays running through that (it does not
flap back to submitted), so its record and its log are written a few times per run, and
the file grows by a bounded number of bytes per subjob.

Each subjob sleeps 0.1 s so that the monitor sees most of them running and, between
two, often none: the order of states that made a master flap. What is asserted holds in
any order (tests/test_master_status_rule.py drives every order through the model).
"""

from __future__ import annotations

from pathlib import Path

from ZODB.FileStorage.FileStorage import FileIterator

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.gpi.job import unwrap_job
from ganga_like.runtime.session import close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_local.runner import client as runner_client

SUBJOBS = 200
# What a run of a master logs: submitting, submitted, running, its end (and a margin for a
# master the monitor sees submitted again only while its submission is being recorded).
MASTER_ENTRIES = 6
# Bytes the repository may grow by per subjob (1.5 kB of 1,024 bytes), from before
# submit() to the master ended.
BUDGET = 1536


def _writes_of(path: Path, start: int, oid: bytes) -> int:
    """How many records of ``oid`` the transactions from byte ``start`` on wrote."""
    iterator = FileIterator(str(path), pos=start)
    try:
        return sum(1 for txn in iterator for record in txn if record.oid == oid)
    finally:
        iterator.close()


def test_subjobs_run_one_after_another_log_and_rewrite_the_master_a_few_times(
    gangadir: Path,
) -> None:
    open_session(
        Settings(
            gangadir=gangadir,
            repository_mode="embedded",
            local_max_concurrent=1,
            local_idle_exit=5.0,
            pack_threshold_mb=0,
        )
    )
    data_fs = gangadir / "repository" / "Data.fs"
    try:
        j = Job(
            application=Executable(exe="sleep"),
            splitter=ArgSplitter(args=[["0.1"] for _ in range(SUBJOBS)]),
        )
        before = data_fs.stat().st_size
        j.submit()
        assert j.wait(timeout=600, progress=False) == "completed"
        master = unwrap_job(j)
        entries = [(old, new) for _when, old, new, _cause in master.history]
        after = data_fs.stat().st_size
        writes = _writes_of(data_fs, before, master._p_oid)
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))
    assert len(entries) <= MASTER_ENTRIES, entries
    assert ("running", "submitted") not in entries
    assert writes <= MASTER_ENTRIES + 2, writes
    assert (after - before) / SUBJOBS <= BUDGET, (after - before) / SUBJOBS
