"""The subjob grid of a master reads its status column and counter: a few records, none of
its subjobs and none of the buckets of its subjob tree, however many subjobs it has."""

from __future__ import annotations

from pathlib import Path

from ganga_like.model.job import Job
from ganga_like.repository.connection import Repository
from ganga_like.runtime.stats.grid import subjob_grid

from .web_server import master_with_statuses

SUBJOBS = 3_000  # about 50 buckets of the subjob tree, 3 chunks of the status column


def test_the_grid_of_a_master_loads_a_few_records_whatever_its_size(gangadir: Path) -> None:
    with Repository(gangadir) as repo:
        labels = ["killed" if i % 3 == 0 else "submitted" for i in range(SUBJOBS)]
        master = master_with_statuses(repo.registry(), labels, "grid")
        repo.connection().transaction_manager.commit()
        master_id = master.id
    with Repository(gangadir) as repo:
        conn = repo.connection()
        stored = repo.registry().lookup(master_id, None)
        assert isinstance(stored, Job)
        conn.getTransferCounts(clear=True)
        grid = subjob_grid([stored])
        loads, _stores = conn.getTransferCounts()
    assert grid.labels == tuple(labels)
    assert loads <= 10, f"{loads} records loaded for the grid of {SUBJOBS} subjobs"
