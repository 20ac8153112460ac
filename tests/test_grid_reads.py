"""The subjob grid of a master reads its status column and counter: a few records, none of
its subjobs and none of the buckets of its subjob tree, however many subjobs it has."""

from __future__ import annotations

from pathlib import Path

from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.repository.connection import Repository
from ganga_like.runtime.stats.grid import subjob_grid

SUBJOBS = 3_000  # about 50 buckets of the subjob tree, 3 chunks of the status column


def test_the_grid_of_a_master_loads_a_few_records_whatever_its_size(gangadir: Path) -> None:
    with Repository(gangadir) as repo:
        master = Job(name="grid")
        repo.registry().add(master)
        master.change_status(Status.SUBMITTING, "test")
        subjobs = [Job.new_subjob(master, i) for i in range(SUBJOBS)]
        for subjob in subjobs:
            subjob.backend = master.backend
        master.attach_subjobs(subjobs)
        for i, subjob in enumerate(subjobs):
            subjob.change_status(Status.SUBMITTED, "test")
            if i % 3 == 0:
                subjob.change_status(Status.KILLED, "test")
        master.change_status(Status.SUBMITTED, "test")
        repo.connection().transaction_manager.commit()
        master_id = master.id
    with Repository(gangadir) as repo:
        conn = repo.connection()
        stored = repo.registry().lookup(master_id, None)
        assert isinstance(stored, Job)
        conn.getTransferCounts(clear=True)
        grid = subjob_grid([stored])
        loads, _stores = conn.getTransferCounts()
    assert grid.labels == tuple("killed" if i % 3 == 0 else "submitted" for i in range(SUBJOBS))
    assert loads <= 10, f"{loads} records loaded for the grid of {SUBJOBS} subjobs"
