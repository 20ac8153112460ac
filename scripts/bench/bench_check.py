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
    from ganga_like.model.job import Job
    from ganga_like.repository.connection import Repository
    from ganga_like.repository.integrity import check_file, full_check
    from ganga_like.repository.registry import Registry
    from ganga_like.runtime.settings import Settings

    never = Settings(pack_threshold_mb=0).storage_options()
    repo = Repository(gangadir, options=never)
    path = gangadir / "repository" / "Data.fs"

    def build() -> int:
        registry = Registry(repo.connection().root())
        for i in range(1000):
            job = Job()
            job.name = f"job{i}"
            registry.add(job)
        master = Job()
        subjobs = [Job.new_subjob(master, k) for k in range(10_000)]
        for sj in subjobs:
            sj.__dict__["status"] = "submitted"
        master.attach_subjobs(subjobs)
        return registry.add(master)

    master_id = repo.in_transaction(build)
    master = repo.registry().get(master_id)
    assert master is not None
    subjobs = list(master.iter_subjobs())
    for c in range(cycles):
        for sj in subjobs[(c * 500) % 10_000:(c * 500) % 10_000 + 500]:
            sj.log_event(f"cycle {c}")
        repo.commit()
    repo.close()
    size = path.stat().st_size
    t0 = time.perf_counter()
    report = full_check(gangadir)
    seconds = time.perf_counter() - t0
    print(f"Data.fs {size / 2**20:.1f} MB: full check {seconds:.2f} s "
          f"({report.summary()})")
    t0 = time.perf_counter()
    check_file(path)
    print(f"check when opening: {(time.perf_counter() - t0) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
