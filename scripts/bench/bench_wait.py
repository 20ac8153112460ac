"""What one look of a waiter costs over a master of N subjobs, one subjob changed between
two looks by another connection: the waiter's reading (runtime.waiting.SubjobGroup: the
counter's serial, the chunks that moved) against loading every subjob's status.

    python scripts/bench/bench_wait.py [N] [LOOKS]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import transaction
import ZODB
from ZODB.FileStorage import FileStorage

from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.runtime.waiting import FINAL_LABELS, SubjobGroup


def main(subjobs: int = 10_000, looks: int = 50) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = ZODB.DB(FileStorage(str(Path(tmp) / "Data.fs")), cache_size=10 * subjobs)
        writer = db.open(transaction.TransactionManager())
        reader = db.open(transaction.TransactionManager())
        with writer.transaction_manager:
            master = Job.__new__(Job)
            Job.__init__(master)
            master.__dict__["id"] = 1
            master.attach_subjobs([Job.new_subjob(master, i) for i in range(subjobs)])
            for sj in master.iter_subjobs():
                sj.change_status(Status.SUBMITTED, "bench")
            writer.root()["master"] = master
        reader.transaction_manager.begin()
        watched = reader.root()["master"]
        group = SubjobGroup(watched, range(subjobs))
        group.newly_finished()
        fast = slow = 0.0
        for n in range(looks):
            with writer.transaction_manager:
                writer.root()["master"].subjob(n).change_status(Status.COMPLETED, "bench")
            reader.transaction_manager.begin()
            started = time.perf_counter()
            assert group.newly_finished() == [n]
            fast += time.perf_counter() - started
            started = time.perf_counter()
            done = [sj for sj in watched.iter_subjobs() if sj.status in FINAL_LABELS]
            slow += time.perf_counter() - started
            assert len(done) == n + 1
        print(
            f"{subjobs} subjobs, one changed between looks: the waiter's look "
            f"{1e3 * fast / looks:.2f} ms ({group.labels_read} labels read in all), "
            f"loading every subjob's status {1e3 * slow / looks:.1f} ms (its cache warm)"
        )
        db.close()


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
