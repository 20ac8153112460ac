"""CPU of the registry calls on the commit path of a status change: reindex and lookup.

    python scripts/bench/bench_reindex.py [N]

In a real FileStorage repository (embedded), one top-level job and one master of 1,000
subjobs. Times, per call: ``reindex`` of a job whose status did not change (the common
case: the monitor reindexes every master it touched), of a job whose status changed (the
indexes move it), of a master whose derived status changed (its history logs it), and
``lookup`` of a subjob (once per backend report). Nothing is committed in the loops.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    gangadir = Path(tempfile.mkdtemp(prefix="bench-reindex-")) / "gangadir"
    from ganga_like.model.job import Job
    from ganga_like.repository.connection import Repository

    repo = Repository(gangadir)
    registry = repo.registry()
    plain = Job()
    master = Job()
    subjobs = [Job.new_subjob(master, k) for k in range(1000)]
    master.attach_subjobs(subjobs)
    registry.add(plain)
    registry.add(master)
    repo.commit()
    counter = master._counter
    assert counter is not None

    def per_call(action: object, calls: int) -> float:
        assert callable(action)
        cpu0 = time.process_time()
        action()
        return 1e6 * (time.process_time() - cpu0) / calls

    def unchanged() -> None:
        for _ in range(n):
            registry.reindex(plain)

    def changed() -> None:
        d = plain.__dict__
        for i in range(n):
            d["status"] = "running" if i % 2 else "submitted"
            registry.reindex(plain)

    derived_n = n // 10
    start = ((0.0, "new", "submitted", "start"),)

    def derived() -> None:
        d = master.__dict__
        for i in range(derived_n):
            counter.counts = {"running": 1000} if i % 2 else {"submitted": 1000}
            d["history"] = start  # the log stays one entry long: each call adds one
            registry.reindex(master)

    def lookup() -> None:
        master_id = master.id
        for i in range(n):
            registry.lookup(master_id, i % 1000)

    results = {
        "reindex, status unchanged": per_call(unchanged, n),
        "reindex, status changed": per_call(changed, n),
        "reindex, master's derived status changed": per_call(derived, derived_n),
        "lookup of a subjob": per_call(lookup, n),
    }
    for label, micros in results.items():
        print(f"{label}: {micros:.2f} us CPU per call")
    repo.abort()
    repo.close()


if __name__ == "__main__":
    main()
