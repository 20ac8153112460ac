"""The least a design following DESIGN.md's persistence rules can cost, against the same
plain subprocess pool as ``bench_local_vs_pool.py``.

    python scripts/bench/bench_floor.py [N] [--rounds R] [--layout local|flat] [--dir PATH]

The "floor" keeps only what the rules and the issue require of a Local run of N
``/bin/echo`` subjobs, each done in the cheapest way:

* one repository record per subjob (a ``PersistentMapping`` holding the command, status,
  exit code and a one-entry event log) in an ``IOBTree``, written by one commit before
  anything runs;
* the real detached runner (``ganga_like_runner``), handed the whole batch in one
  request: per task its directories, ``stdout``, ``stderr`` and ``__run__`` record, and one
  journal line;
* a monitor thread with its own connection that every 50 ms reads the journal, sets status,
  exit code and two event-log entries on each ended subjob's record and commits once.

No GPI, no validation, no splitter, no status counter or indexes, no workspace preparation.
``--layout local`` gives each task the Local backend's three directories (``<n>/``,
``<n>/work``, ``<n>/output``); ``--layout flat`` runs it in ``<n>/`` and keeps two.  Each
round times the pool, then the floor, as the main benchmark does; the ratio printed last is
the median of the rounds' ratios.  If the floor's ratio is above a budget on some machine,
no implementation of the same design meets that budget there.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import transaction
import ZODB
from BTrees.IOBTree import IOBTree
from persistent.mapping import PersistentMapping
from ZODB.FileStorage import FileStorage

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins"))

from bench_local_vs_pool import plain_pool  # the same pool as the main benchmark
from bench_runner import make_tasks, wait_for
from fs_probe import describe

from ganga_like_runner.client import (
    TERMINAL_EVENTS,
    read_events,
    stop,
    submit,
)

ECHO = "/bin/echo"
CONCURRENCY = os.cpu_count() or 1
MONITOR_INTERVAL = 0.05
# The whole environment, as the Local backend passes it and as the pool's processes inherit
# it: with PATH alone each echo skips loading the locale LANG names, and the floor would be
# compared with a pool doing more work per task.
TASK_ENV = dict(os.environ)


def follow(db: ZODB.DB, name: str, journal: Path, n: int, cpu: list[float]) -> None:
    """The monitor: one connection of its own, one commit per cycle."""
    cpu_before = time.thread_time()
    tm = transaction.TransactionManager()
    conn = db.open(transaction_manager=tm)
    offset, left = 0, n
    while left:
        time.sleep(MONITOR_INTERVAL)
        tm.begin()
        records = conn.root()[name]
        events, offset = read_events(journal, offset)
        for event in events:
            if event.event not in TERMINAL_EVENTS:
                continue
            record = records[int(event.key.rpartition(".")[2])]
            record["status"] = event.event
            record["exit_code"] = event.exit_code
            record["history"] = (
                *record["history"],
                (event.start, "submitted", "running", "monitor"),
                (event.time, "running", event.event, "monitor"),
            )
            left -= 1
        tm.commit()
    conn.close()
    cpu.append(time.thread_time() - cpu_before)


def floor_run(
    db: ZODB.DB, runner: Path, base: Path, n: int, name: str, flat: bool
) -> tuple[float, float, float]:
    """Wall seconds submit -> all recorded, seconds until the hand-off, monitor CPU."""
    journal = base / f"{name}.jsonl"
    cpu: list[float] = []
    started = time.perf_counter()
    conn = db.open()
    records = IOBTree()
    now = time.time()
    for i in range(n):
        records[i] = PersistentMapping(
            argv=(ECHO, "task", str(i)),
            status="submitted",
            exit_code=None,
            history=((now, "new", "submitted", "user: submit"),),
        )
    conn.root()[name] = records
    transaction.commit()
    submit(runner, make_tasks(base, name, n, journal, flat), TASK_ENV, CONCURRENCY)
    handed_off = time.perf_counter() - started
    monitor = threading.Thread(target=follow, args=(db, name, journal, n, cpu))
    monitor.start()
    monitor.join()
    wall = time.perf_counter() - started
    conn.close()
    return wall, handed_off, cpu[0]


def warm_up(runner: Path, base: Path) -> None:
    """Start the runner before timing, as bench_local_vs_pool.py does."""
    journal = base / "warm.jsonl"
    submit(runner, make_tasks(base, "warm", 1, journal, flat=True), TASK_ENV, CONCURRENCY)
    wait_for(journal, 1, timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layout", choices=("local", "flat"), default="local")
    parser.add_argument("--dir", default=None, help="where the repository and tasks go")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-floor-", dir=args.dir))
    db = ZODB.DB(FileStorage(str(base / "repository.fs")), cache_size=200_000)
    runner = base / "runner"
    warm_up(runner, base)
    print(f"subjobs: {args.n}, concurrency: {CONCURRENCY}, layout: {args.layout}, in {base}")
    ratios = []
    try:
        for number in range(1, args.rounds + 1):
            outdir = base / f"pool-{number}"
            outdir.mkdir()
            print(f"round {number}: {describe(base)}")
            pool_wall = plain_pool(args.n, CONCURRENCY, outdir)
            wall, handed_off, monitor_cpu = floor_run(
                db, runner, base, args.n, f"job{number}", args.layout == "flat"
            )
            ratios.append(wall / pool_wall)
            print(
                f"round {number}: plain subprocess pool {pool_wall:.2f} s; floor "
                f"{wall:.2f} s (handed to the runner at {1000 * handed_off:.0f} ms, "
                f"monitor CPU {monitor_cpu:.3f} s); ratio {wall / pool_wall:.2f}"
            )
    finally:
        stop(runner)
        db.close()
    print(f"ratio: {statistics.median(ratios):.2f} (median of {len(ratios)} rounds)")


if __name__ == "__main__":
    main()
