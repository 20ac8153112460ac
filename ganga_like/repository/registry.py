"""The layout of the repository's root: jobs by id, the active index, id allocation.

``jobs``    IOBTree: id -> Job (top-level jobs only; subjobs live in their master)
``active``  OOBTree: (job id, subjob id or -1) -> (backend name, run, backend data): the jobs
            the monitor follows, with all it needs to poll them, so a cycle never scans the
            registry nor loads a job that has nothing new
``ids``     the next free job id (ids are never reused)
``submitting`` IOBTree: job id -> the intent of a submission in progress (kind, subjob ids,
            owner process), removed when its outcome is recorded; what is left after a crash
            is recovered at startup (see ganga_like.runtime.recovery)
"""

from __future__ import annotations

from typing import Any

from BTrees.IOBTree import IOBTree
from BTrees.OOBTree import OOBTree
from persistent import Persistent

from ganga_like.model.job import Job

__all__ = ["FORMAT", "TOP", "IdAllocator", "Registry", "active_key"]

FORMAT = 1
TOP = -1  # subjob id used in the active index for a job without subjobs


class IdAllocator(Persistent):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.next_id = 0

    def allocate(self) -> int:
        value: int = self.next_id
        self.next_id = value + 1
        return value


def active_key(job: Job) -> tuple[int, int]:
    master = job.master
    return (master.id, job.id) if master is not None else (job.id, TOP)


class Registry:
    """Typed access to the root mapping of one connection."""

    def __init__(self, root: Any) -> None:
        self.root = root

    @staticmethod
    def initialise(root: Any) -> bool:
        """Create the layout if missing; True when something was created."""
        created = False
        for key, factory in (("jobs", IOBTree), ("active", OOBTree), ("ids", IdAllocator),
                             ("submitting", IOBTree)):
            if key not in root:
                root[key] = factory()
                created = True
        if root.get("format") != FORMAT:
            root["format"] = FORMAT
            created = True
        return created

    @property
    def jobs(self) -> IOBTree:
        return self.root["jobs"]

    @property
    def active(self) -> OOBTree:
        return self.root["active"]

    @property
    def submitting(self) -> IOBTree:
        return self.root["submitting"]

    def add(self, job: Job) -> int:
        job_id: int = self.root["ids"].allocate()
        job.__dict__["id"] = job_id
        job._p_changed = True
        self.jobs[job_id] = job
        return job_id

    def get(self, job_id: int) -> Job | None:
        result: Job | None = self.jobs.get(job_id)
        return result

    def lookup(self, job_id: int, subjob_id: int | None) -> Job | None:
        job = self.get(job_id)
        if job is None or subjob_id is None or subjob_id == TOP:
            return job
        subjobs = job._subjobs
        found: Job | None = subjobs.get(subjob_id) if subjobs else None
        return found

    def follow(self, job: Job, data: Any) -> None:
        """Put ``job`` in the active index with what its backend needs to poll it."""
        self.active[active_key(job)] = (type(job.backend).__name__, job.submit_count, data)

    def unfollow(self, job: Job) -> None:
        key = active_key(job)
        if key in self.active:
            del self.active[key]
