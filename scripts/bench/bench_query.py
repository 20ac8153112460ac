"""A query by status over 100,000 jobs, answered from the repository's indexes.

    python scripts/bench/bench_query.py [N]

Builds a repository of N jobs (default 100,000; 1 in 50 failed, the rest completed or new)
through the model and registry directly (the GPI would take minutes to create that many one
by one), then, in a fresh process, times `jobs.query(...)` for a few queries.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEASURE = r"""
import time
from ganga_like import jobs
len(jobs)  # open the repository first: the figure is the query alone
for text in ("status=failed", "status=failed,killed; name~scan-1*", "status<>completed",
             "id=5000..5100; status=failed"):
    t0 = time.perf_counter()
    found = jobs.query(text)
    n = len(found)
    print(f"{text!r}: {n} jobs in {1000 * (time.perf_counter() - t0):.1f} ms")
"""


def build(gangadir: Path, n: int) -> None:
    from ganga_like.model.job import Job
    from ganga_like.model.status import Status
    from ganga_like.repository.connection import Repository

    repo = Repository(gangadir)
    registry = repo.registry()
    tm = repo.connection().transaction_manager
    for start in range(0, n, 10_000):
        for i in range(start, min(n, start + 10_000)):
            job = Job(name=f"scan-{i}")
            registry.add(job)
            if i % 3:
                job.change_status(Status.SUBMITTED, "bench")
                job.change_status(Status.RUNNING, "bench")
                job.change_status(Status.FAILED if i % 50 == 0 else Status.COMPLETED, "bench")
                registry.reindex(job)
        tm.commit()
    repo.close()


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    gangadir = Path(tempfile.mkdtemp(prefix="bench-query-")) / "gangadir"
    started = time.perf_counter()
    build(gangadir, n)
    print(f"built {n} jobs in {time.perf_counter() - started:.1f} s")
    env = dict(os.environ, GANGA_DIR=str(gangadir))
    out = subprocess.run(
        [sys.executable, "-c", MEASURE], env=env, capture_output=True, text=True, check=True
    )
    print(out.stdout, end="")


if __name__ == "__main__":
    main()
