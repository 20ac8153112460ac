"""The layout of the repository's root: jobs by id, the active index, id allocation.

``jobs``    IOBTree: id -> Job (top-level jobs only; subjobs live in their master)
``active``  OOBTree: (job id, subjob id or -1) -> (backend name, run, backend data): the jobs
            the monitor follows, with all it needs to poll them, so a cycle never scans the
            registry nor loads a job that has nothing new
``ids``     the next free job id (ids are never reused)
``submitting`` IOBTree: job id -> the intent of a submission in progress (kind, subjob ids,
            owner process), removed when its outcome is recorded; what is left after a crash
            is recovered at startup (see ganga_like.runtime.recovery)
``by_status`` OOBTree: status -> IITreeSet of top-level job ids, and ``status_of`` IOBTree:
            id -> the status it is indexed under; ``by_name`` OOBTree: name -> IITreeSet.
            Queries by status or name answer from these without loading a job.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from BTrees.IIBTree import IITreeSet
from BTrees.IOBTree import IOBTree
from BTrees.OOBTree import OOBTree
from persistent import Persistent

from ganga_like.model.history import make_entry
from ganga_like.model.job import Job
from ganga_like.repository.orphans import first_free_id

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
    """Typed access to the root mapping of one connection.

    ``workspace``, when given, is where job workspaces live: a new job never takes an id
    whose workspace directory exists.
    """

    def __init__(self, root: Any, workspace: Path | None = None) -> None:
        self.root = root
        self.workspace = workspace

    @staticmethod
    def initialise(root: Any) -> bool:
        """Create the layout if missing; True when something was created."""
        created = False
        for key, factory in (("jobs", IOBTree), ("active", OOBTree), ("ids", IdAllocator),
                             ("submitting", IOBTree)):
            if key not in root:
                root[key] = factory()
                created = True
        if "by_status" not in root:
            # Also the migration of a repository made before the indexes existed.
            root["by_status"], root["status_of"], root["by_name"] = (
                OOBTree(), IOBTree(), OOBTree())
            registry = Registry(root)
            for job in root["jobs"].values():
                registry.reindex(job)
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
        job_id = first_free_id(self.root["ids"], self.workspace)
        job.__dict__["id"] = job_id
        job._p_changed = True
        self.jobs[job_id] = job
        self.reindex(job)
        return job_id

    def remove(self, job_id: int) -> None:
        """Forget a top-level job: registry, indexes, active entries."""
        for key in list(self.active.keys(min=(job_id, TOP), max=(job_id, 2**31 - 1))):
            del self.active[key]
        self.submitting.pop(job_id, None)
        job = self.jobs.get(job_id)
        old = self.root["status_of"].pop(job_id, None)
        if old is not None:
            _discard(self.root["by_status"], old, job_id)
        if job is not None:
            _discard(self.root["by_name"], getattr(job, "name", ""), job_id)
            del self.jobs[job_id]

    # -- indexes ---------------------------------------------------------------------

    def reindex(self, job: Job) -> None:
        """Bring the status index up to date for a top-level job (O(log n))."""
        if not isinstance(job, Job) or job.master is not None:
            return
        label = job.current_status().label
        status_of = self.root["status_of"]
        old = status_of.get(job.id)
        if old == label:
            return
        if old is not None:
            _discard(self.root["by_status"], old, job.id)
        _insert(self.root["by_status"], label, job.id)
        status_of[job.id] = label
        history = job.history
        if job.is_master and history and history[-1][2] != label:
            # A master's status is derived, never set: log its changes here, where they
            # are noticed, so its history and time show them too.
            job.history = (*history, make_entry(time.time(), history[-1][2], label,
                                                "derived from its subjobs"))
        if old is None:
            _insert(self.root["by_name"], job.name, job.id)

    def rename(self, job: Job, old_name: str) -> None:
        if job.master is None and old_name != job.name:
            _discard(self.root["by_name"], old_name, job.id)
            _insert(self.root["by_name"], job.name, job.id)

    def ids_with_status(self, label: str) -> IITreeSet:
        found: IITreeSet = self.root["by_status"].get(label, IITreeSet())
        return found

    def ids_named(self, name: str) -> IITreeSet:
        found: IITreeSet = self.root["by_name"].get(name, IITreeSet())
        return found

    def names(self) -> Any:
        return self.root["by_name"].keys()

    def indexed_status(self, job_id: int) -> str | None:
        found: str | None = self.root["status_of"].get(job_id)
        return found

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


def _insert(index: OOBTree, key: str, job_id: int) -> None:
    ids = index.get(key)
    if ids is None:
        ids = index[key] = IITreeSet()
    ids.insert(job_id)


def _discard(index: OOBTree, key: str, job_id: int) -> None:
    ids = index.get(key)
    if ids is not None and job_id in ids:
        ids.remove(job_id)
        if not ids:
            del index[key]
