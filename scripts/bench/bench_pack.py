"""What packing the repository costs, and what it gains.

    python scripts/bench/bench_pack.py [CYCLES] [GANGADIR]

Builds a repository like a busy one: 1,000 small jobs and a master of 10,000 subjobs, then
CYCLES monitor-like commits (default 300), each changing the event log of 500 subjobs. The
file only grows (FileStorage appends). Then:

1. packs keeping 7 days of history (everything here is recent: nothing can go), timed;
2. packs keeping no history (what automatic packing does once the history is old), timed,
   while another thread keeps committing: the commits' latency during the pack is shown;
3. reopens the repository with automatic packing due: opening does not wait for it.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path


def main() -> None:
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    base = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="bench-"))
    gangadir = base / "gangadir"
    from busy_repo import build, churn, data_fs, never_pack

    from ganga_like.repository.connection import Repository
    from ganga_like.repository.packing import pack_now
    from ganga_like.repository.registry import Registry
    from ganga_like.runtime.settings import Settings

    never = never_pack()
    repo = Repository(gangadir, options=never)
    path = data_fs(gangadir)

    t0 = time.perf_counter()
    master_id = build(repo)
    churn(repo, master_id, cycles)
    size = path.stat().st_size
    print(
        f"built: {cycles} cycles of 500 updates in {time.perf_counter() - t0:.1f} s; "
        f"Data.fs {size / 2**20:.1f} MB"
    )

    t0 = time.perf_counter()
    record = pack_now(repo.db.storage, path, keep_days=7)
    print(
        f"pack keeping 7 days: {record['seconds']:.2f} s, "
        f"{record['size_before'] / 2**20:.1f} -> {record['size_after'] / 2**20:.1f} MB"
    )

    latencies: list[float] = []
    done = threading.Event()

    def committer() -> None:
        import transaction

        tm = transaction.TransactionManager()
        conn = repo.db.open(transaction_manager=tm)
        other = Registry(conn.root()).get(5)
        assert other is not None
        n = 0
        while not done.is_set():
            start = time.perf_counter()
            other.comment = f"during pack {n}"
            tm.commit()
            latencies.append(time.perf_counter() - start)
            n += 1
            time.sleep(0.01)
        conn.close()

    thread = threading.Thread(target=committer)
    thread.start()
    time.sleep(0.2)
    record = pack_now(repo.db.storage, path, keep_days=0)
    done.set()
    thread.join()
    latencies.sort()
    print(
        f"pack keeping no history: {record['seconds']:.2f} s, "
        f"{record['size_before'] / 2**20:.1f} -> {record['size_after'] / 2**20:.1f} MB "
        f"({record['size_before'] / max(record['size_after'], 1):.0f}x smaller)"
    )
    print(
        f"  {len(latencies)} commits meanwhile: median "
        f"{statistics.median(latencies) * 1e3:.1f} ms, max {latencies[-1] * 1e3:.0f} ms"
    )
    repo.close()

    # Grow it again and reopen with packing due: the open does not wait for the pack.
    repo = Repository(gangadir, options=never)
    churn(repo, master_id, cycles, label="again")
    repo.close()
    due = Settings(pack_threshold_mb=1, pack_keep_days=0).storage_options()
    t0 = time.perf_counter()
    repo = Repository(gangadir, options=due)
    opened = time.perf_counter() - t0
    repo.close()  # waits for the background pack
    total = time.perf_counter() - t0
    print(
        f"open with packing due: {opened:.3f} s to open (the pack runs behind it; "
        f"{total:.1f} s until it finished)"
    )


if __name__ == "__main__":
    main()
