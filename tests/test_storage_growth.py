"""The repository grows with the subjobs run, not with their square.

Subjobs run one after another (one slot, Local, a real runner and repository): between two
of them every subjob left is waiting. The master stays running through that (it does not
flap back to submitted), so its record and its log are written a few times per run, and
the file grows by a bounded number of bytes per subjob and per commit.

Each subjob sleeps 0.1 s so that the monitor sees most of them running and, between
two, often none: the order of states that made a master flap. What is asserted holds in
any order (tests/test_master_status_rule.py drives every order through the model).
"""

from __future__ import annotations

from pathlib import Path

from ZODB.FileStorage.FileStorage import FileIterator

from ganga_like import ArgSplitter, Executable, Job
from ganga_like.config.store import store
from ganga_like.gpi.job import unwrap_job
from ganga_like.runtime.session import close_session, open_session
from ganga_like.runtime.settings import Settings
from ganga_like_local.backend import runner_dir
from ganga_like_local.settings import Local as LocalSection
from ganga_like_runner import client as runner_client

# Enough that a master rewritten per subjob (or per commit) would show many times over
# MASTER_ENTRIES; each runs 0.1 s, one at a time.
SUBJOBS = 80
# What a run of a master logs: submitting, submitted, running, its end (and a margin for a
# master the monitor sees submitted again only while its submission is being recorded).
MASTER_ENTRIES = 6
# What the repository may grow by, from before submit() to the master ended: per subjob
# (its records at submit, leaving the active index, its end) and per commit (the subjob(s)
# it changed and the master's counter; never the master's record or a chunk of statuses).
# How many commits a subjob takes depends on how often the monitor sees it (one to two):
# 1,000 + 650 B a commit is 1.65 kB per subjob at 1 commit, 2.3 kB at 2. Before the master
# stayed running, each commit cost 15 kB or more.
PER_SUBJOB = 1000
PER_COMMIT = 650


def _writes_of(path: Path, start: int, oid: bytes) -> tuple[int, int]:
    """(transactions, records of ``oid``) from byte ``start`` on."""
    iterator = FileIterator(str(path), pos=start)
    transactions = writes = 0
    try:
        for txn in iterator:
            transactions += 1
            writes += sum(1 for record in txn if record.oid == oid)
    finally:
        iterator.close()
    return transactions, writes


def test_subjobs_run_one_after_another_log_and_rewrite_the_master_a_few_times(
    gangadir: Path,
) -> None:
    open_session(
        Settings(
            gangadir=gangadir,
            repository_mode="embedded",
            pack_threshold_mb=0,
        ),
        store.snapshot().replaced({LocalSection: {"max_concurrent": 1, "idle_exit": 5.0}}),
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
        commits, writes = _writes_of(data_fs, before, master._p_oid)
    finally:
        close_session()
        runner_client.stop(runner_dir(gangadir))
    assert len(entries) <= MASTER_ENTRIES, entries
    assert ("running", "submitted") not in entries
    assert writes <= MASTER_ENTRIES + 2, writes
    assert after - before <= SUBJOBS * PER_SUBJOB + commits * PER_COMMIT, (after - before, commits)
