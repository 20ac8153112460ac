"""What the full repository check (``ganga repository check``) costs.

    python scripts/bench/bench_check.py [CYCLES] [GANGADIR]

Builds a repository like a busy one: 1,000 small jobs and a master of 10,000 subjobs, then
CYCLES monitor-like commits (default 100), each changing the event log of 500 subjobs.
Times the full check (every transaction, every record decoded, every current object
loaded, the registry's layout), and the check when the repository is opened, for
comparison.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    cycles = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    base = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="bench-"))
    gangadir = base / "gangadir"
    from busy_repo import build, churn, data_fs, never_pack

    from ganga_like.repository.checks.file_check import check_file
    from ganga_like.repository.connection import Repository
    from ganga_like.runtime.repository_check import full_check

    repo = Repository(gangadir, options=never_pack())
    path = data_fs(gangadir)
    churn(repo, build(repo), cycles)
    repo.close()
    size = path.stat().st_size
    t0 = time.perf_counter()
    report = full_check(gangadir)
    seconds = time.perf_counter() - t0
    print(f"Data.fs {size / 2**20:.1f} MB: full check {seconds:.2f} s ({report.summary()})")
    t0 = time.perf_counter()
    check_file(path)
    print(f"check when opening: {(time.perf_counter() - t0) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
