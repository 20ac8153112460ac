"""What deciding on waiting jobs costs the monitor per upstream change, as the repository
grows.

    python scripts/bench/bench_workflow.py [SIZES...]

For each size N (default 1,000, 10,000 and 40,000), builds a repository of N jobs in which
half wait for one job of the other half each (their dependencies in the reverse index),
then times, in CPU seconds, ``upstream_changed`` for one upstream change that decides
nothing (its dependent keeps waiting) and for one that decides (its dependent's condition
holds), each in a transaction that is then rolled back, averaged over many changes. The
cost should follow the dependents of what changed, not N.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

REPEATS = 300


def build(gangadir: Path, size: int) -> object:
    from ganga_like.model.job import Job
    from ganga_like.model.status import Status
    from ganga_like.repository.connection import Repository
    from ganga_like.runtime.workflow import index

    repo = Repository(gangadir, mode="embedded")

    def add() -> None:
        registry = repo.registry()
        upstreams = [Job() for _ in range(size // 2)]
        for job in upstreams:
            registry.add(job)
        for up in upstreams:
            down = Job(after=(str(up.id),))
            registry.add(down)
            down.change_status(Status.WAITING, "bench")
            index.add_dependent(registry.root, str(up.id), down.id)
            registry.reindex(down)

    repo.in_transaction(add, what="building")
    return repo


def per_change(repo: object, final: bool) -> float:
    """CPU seconds of one upstream change and the decision on its dependent."""
    from ganga_like.model.status import Status
    from ganga_like.runtime.workflow.engine import upstream_changed

    registry = repo.registry()  # type: ignore[attr-defined]
    ids = [i for i in registry.jobs if registry.jobs[i].after == ()][:REPEATS]
    spent = 0.0
    for job_id in ids:
        up = registry.jobs[job_id]
        up.status = (Status.COMPLETED if final else Status.RUNNING).label
        started = time.thread_time()
        upstream_changed(registry, [up], "bench")
        spent += time.thread_time() - started
        repo.abort()  # type: ignore[attr-defined]
    return spent / len(ids)


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1_000, 10_000, 40_000]
    for size in sizes:
        base = Path(tempfile.mkdtemp(prefix="bench-workflow-"))
        repo = build(base / "gangadir", size)
        waiting = per_change(repo, final=False)
        decided = per_change(repo, final=True)
        print(
            f"{size:>7} jobs ({size // 2} waiting): {waiting * 1e6:7.1f} µs per change "
            f"that leaves its dependent waiting, {decided * 1e6:7.1f} µs per change that "
            "decides it"
        )
        repo.close()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
