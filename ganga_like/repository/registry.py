"""The layout of the repository's root: jobs by id, the active index, id allocation.

``jobs``    IOBTree: id -> Job (top-level jobs only; subjobs live in their master)
``active``  OOBTree: (job id, subjob id or -1) -> (backend name, run, backend data): the jobs
            the monitor follows, with all it needs to poll them, so a cycle never scans the
            registry nor loads a job that has nothing new
``ids``     the next free job id (ids are never reused; shared-mode sessions reserve blocks
            of them, see ganga_like.repository.ids)
``submitting`` IOBTree: job id -> the intent of a submission in progress (kind, subjob ids,
            owner process), removed when its outcome is recorded; what is left after a crash
            is recovered at startup (see ganga_like.runtime.submission.recovery). It always holds
            ``KEEP`` -> None as its first entry (see below); ``intents()`` leaves it out.
``by_status`` OOBTree: status -> IdSet (an IITreeSet) of top-level job ids, and
            ``status_of`` IOBTree: id -> the status it is indexed under; ``by_name``
            OOBTree: name -> IdSet.
            Queries by status or name answer from these without loading a job.
            A status keeps its (possibly empty) set once it appeared.

Concurrent writers (shared mode): BTrees merge two sessions' changes to different keys of
the same bucket, but not when one of them empties the bucket or deletes its first key.
``submitting`` is empty most of the time and every submission adds and removes a key, so a
permanent first entry keeps those merges possible. The id sets of the indexes are
``IdSet``s, which merge any concurrent additions and removals while they are small (the
sets of transient statuses, ``submitting`` and ``submitted``, are small and change with
every submission); a status set that empties stays in ``by_status`` instead of being deleted
and created again at the next submission.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from BTrees.IIBTree import IITreeSet
from BTrees.IOBTree import IOBTree
from BTrees.OOBTree import OOBTree
from persistent import Persistent

from ganga_like.repository.checks.orphans import first_free_id
from ganga_like.repository.stored import StoredJob
from ganga_like.repository.trees import IdMap, IdSet, KeyMap

__all__ = ["FORMAT", "KEEP", "TOP", "IdAllocator", "IdSet", "Registry", "StoredJob", "active_key"]

FORMAT = 1
TOP = -1  # subjob id used in the active index for a job without subjobs
KEEP = -1  # the permanent first key of ``submitting`` (job ids are >= 0)


class IdAllocator(Persistent):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.next_id = 0

    def allocate(self) -> int:
        value: int = self.next_id
        self.next_id = value + 1
        return value

    def reserve(self, count: int) -> int:
        """Reserve ``count`` consecutive ids; the first one."""
        start: int = self.next_id
        self.next_id = start + count
        return start

    def release(self, start: int, end: int) -> bool:
        """Give back the reserved ids ``start..end-1`` if nothing was reserved after them."""
        if self.next_id != end:
            return False
        self.next_id = start
        return True


# The class of each tree of the root (ganga_like.repository.trees says why not plain BTrees).
_TREES: dict[str, type] = {
    "jobs": IdMap,
    "active": KeyMap,
    "submitting": IdMap,
    "by_status": KeyMap,
    "status_of": IdMap,
    "by_name": KeyMap,
}


def active_key(job: StoredJob) -> tuple[int, int]:
    master = job.master
    return (master.id, job.id) if master is not None else (job.id, TOP)


class Registry:
    """Typed access to the root mapping of one connection.

    Jobs are typed as :class:`StoredJob`, what the registry needs of them; what it hands
    back (``get``, ``lookup``) is the stored object itself, the model's job or a broken
    object, which the layers above know how to tell apart.

    ``workspace``, when given, is where job workspaces live: a new job never takes an id
    whose workspace directory exists. ``ids`` hands out job ids (the shared-mode blocks of
    ``ganga_like.repository.ids``); without it a new job takes the next id from the counter
    in its own transaction.
    """

    def __init__(
        self, root: Any, workspace: Path | None = None, ids: Callable[[Any], int] | None = None
    ) -> None:
        self.root = root
        self.workspace = workspace
        self._ids = ids

    @staticmethod
    def initialise(root: Any) -> bool:
        """Create the layout if missing; True when something was created.

        Every opening checks the root's shape against ``ganga_like.repository.layout``
        first: a new key of the root goes there too."""
        created = False
        for key, factory in (
            ("jobs", IdMap),
            ("active", KeyMap),
            ("ids", IdAllocator),
            ("submitting", IdMap),
        ):
            if key not in root:
                root[key] = factory()
                created = True
        if "by_status" not in root:
            # Also the migration of a repository made before the indexes existed.
            root["by_status"], root["status_of"], root["by_name"] = (KeyMap(), IdMap(), KeyMap())
            registry = Registry(root)
            for job in root["jobs"].values():
                registry.reindex(job)
            created = True
        for key, kind in _TREES.items():
            if type(root[key]) is not kind:
                # Made before the trees merged concurrent changes: copied once (the
                # references only; no job is loaded).
                root[key] = kind(root[key])
                created = True
        for key in ("by_status", "by_name"):
            index = root[key]
            for label, ids in list(index.items()):
                if type(ids) is not IdSet:
                    index[label] = IdSet(ids)
                    created = True
        if KEEP not in root["submitting"]:
            root["submitting"][KEEP] = None
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

    def intents(self) -> list[tuple[int, Any]]:
        """The submissions in progress: (job id, intent)."""
        return [(k, v) for k, v in self.submitting.items() if k != KEEP]

    def add(self, job: StoredJob) -> int:
        take = self._ids
        job_id = first_free_id(
            (lambda: take(self.root)) if take is not None else self.root["ids"].allocate,
            self.workspace,
        )
        job._put("id", job_id)
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
            _discard(self.root["by_status"], old, job_id, keep_empty=True)
        if job is not None:
            _discard(self.root["by_name"], getattr(job, "name", ""), job_id)
            del self.jobs[job_id]

    # -- indexes ---------------------------------------------------------------------

    def reindex(self, job: StoredJob) -> None:
        """Bring the status index up to date for a top-level job (O(log n)).

        The job says which label it is listed under and is told when that changed; an
        object without those methods (a broken one) keeps the entries it has."""
        index_label = getattr(job, "index_label", None)
        label = index_label() if index_label is not None else None
        if label is None:
            return
        status_of = self.root["status_of"]
        old = status_of.get(job.id)
        if old == label:
            return
        if old is not None:
            _discard(self.root["by_status"], old, job.id, keep_empty=True)
        _insert(self.root["by_status"], label, job.id)
        status_of[job.id] = label
        job.indexed_as(label)
        if old is None:
            _insert(self.root["by_name"], job.name, job.id)

    def rename(self, job: StoredJob, old_name: str) -> None:
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

    def get(self, job_id: int) -> Any:
        """The job stored under ``job_id``, or None."""
        return self.jobs.get(job_id)

    def lookup(self, job_id: int, subjob_id: int | None) -> Any:
        """The job or subjob of these ids, or None."""
        job = self.get(job_id)
        if job is None or subjob_id is None or subjob_id == TOP:
            return job
        return job.find_subjob(subjob_id)

    def follow(self, job: StoredJob, data: Any) -> None:
        """Put ``job`` in the active index with what its backend needs to poll it."""
        self.active[active_key(job)] = (type(job.backend).__name__, job.submit_count, data)

    def unfollow(self, job: StoredJob) -> None:
        key = active_key(job)
        if key in self.active:
            del self.active[key]


def _insert(index: OOBTree, key: str, job_id: int) -> None:
    ids = index.get(key)
    if ids is None:
        ids = index[key] = IdSet()
    ids.insert(job_id)


def _discard(index: OOBTree, key: str, job_id: int, keep_empty: bool = False) -> None:
    ids = index.get(key)
    if ids is not None and job_id in ids:
        ids.remove(job_id)
        if not ids and not keep_empty:
            del index[key]
