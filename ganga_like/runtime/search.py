"""Answering job queries: indexes narrow the candidates, the query evaluator decides.

The indexes (status, name, the id order of the registry) only ever *narrow* the set of
jobs worth looking at; every candidate is then checked against the whole query with
``ganga_like.query.matches``. What an index says about a candidate (its id, its indexed
status, its name when the name index produced it) is handed to the evaluator by the
getter without loading the job, so a query on status, name and id still never loads a
job; any other attribute loads the job, once, and reads its attributes, its components
(``application.exe``), its subjob counts (``subjobs.failed``, never loading a subjob) and
the times of its statuses (``time.submitted``).
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
from collections.abc import Callable, Iterable
from typing import Any

from BTrees.IIBTree import IITreeSet, intersection, multiunion

from ganga_like.model.base import GangaObject
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.query import Getter, Query, QueryError, index_hints, matches
from ganga_like.repository.registry import Registry

__all__ = ["KNOWN_ROOTS", "candidate_ids", "filter_jobs", "getter_for", "search"]

KNOWN_ROOTS = frozenset({"id", "fqid", "name", "comment", "status", "application", "backend",
                         "splitter", "inputdata", "time", "subjobs", "exit_code",
                         "submit_count", "inputfiles", "outputfiles"})

# Job ids are keys of an IOBTree: 32-bit signed integers. A bound beyond them is clamped,
# which narrows nothing that could exist (the evaluator still compares the real values).
_KEY_MIN, _KEY_MAX = -(2**31), 2**31 - 1


def candidate_ids(registry: Registry, query: Query) -> list[int]:
    """Ids of top-level jobs that may match (all the indexes allow), in id order.

    A superset of the answer: every hint is a necessary condition, nothing more.
    """
    return [job_id for job_id, _ in _candidates(registry, query)]


def _candidates(registry: Registry, query: Query) -> list[tuple[int, str | None]]:
    """(id, its name when the name index produced it, else None), in id order."""
    hints = index_hints(query)
    sets: list[IITreeSet] = []
    known_names: dict[int, str] | None = None
    if "status" in hints:
        labels: set[str] = hints["status"]  # type: ignore[assignment]
        sets.append(multiunion([registry.ids_with_status(s) for s in labels]))
    if "status_not" in hints:
        excluded: set[str] = hints["status_not"]  # type: ignore[assignment]
        keep = [s.label for s in Status if s.label not in excluded]
        sets.append(multiunion([registry.ids_with_status(s) for s in keep]))
    if "name" in hints:
        name = str(hints["name"])
        named = registry.ids_named(name)
        known_names = dict.fromkeys(named, name)
        sets.append(named)
    elif "name_glob" in hints:
        pattern = str(hints["name_glob"])
        known_names = {}
        for candidate in _names_from(registry, pattern):
            if fnmatch.fnmatchcase(candidate, pattern):
                known_names.update(dict.fromkeys(registry.ids_named(candidate), candidate))
        sets.append(IITreeSet(known_names))
    lo, hi = _clamped(hints.get("id_range", (None, None)))  # type: ignore[arg-type]
    if lo is not None and hi is not None and lo > hi:
        return []
    ids: Iterable[int]
    if not sets:
        ids = registry.jobs.keys(min=lo, max=hi)
    else:
        result = sets[0]
        for other in sets[1:]:
            result = intersection(result, other)
        ids = result.keys(min=lo, max=hi) if lo is not None or hi is not None else result
    names = known_names or {}
    return [(job_id, names.get(job_id)) for job_id in ids]


def _clamped(bounds: tuple[int | None, int | None]) -> tuple[int | None, int | None]:
    lo, hi = bounds
    if (lo is not None and lo > _KEY_MAX) or (hi is not None and hi < _KEY_MIN):
        return 1, 0  # no key lies there: an empty range
    lo = None if lo is None or lo <= _KEY_MIN else lo
    hi = None if hi is None or hi >= _KEY_MAX else hi
    return lo, hi


def _names_from(registry: Registry, pattern: str) -> Iterable[str]:
    # A literal prefix narrows the key range of the name index.
    prefix = ""
    for ch in pattern:
        if ch in "*?[":
            break
        prefix += ch
    if not prefix:
        return list(registry.names())
    return list(registry.root["by_name"].keys(min=prefix, max=prefix + "\uffff"))


def search(registry: Registry, query: Query, now: _dt.datetime | None = None) -> list[int]:
    """Ids of the top-level jobs matching ``query``, in id order."""
    now = now or _dt.datetime.now(_dt.UTC)
    return [job_id for job_id, name in _candidates(registry, query)
            if matches(query, _indexed_getter(registry, job_id, name), now=now)]


def _indexed_getter(registry: Registry, job_id: int, name: str | None) -> Getter:
    """A getter answering id, status (and name, when known) from the indexes, and any
    other attribute from the job, loaded on first need."""
    loaded: list[Getter] = []

    def get(path: tuple[str, ...]) -> object:
        if path == ("id",):
            return job_id
        if path == ("status",):
            label = registry.indexed_status(job_id)
            if label is not None:
                return Status.parse(label)
        if path == ("name",) and name is not None:
            return name
        if not loaded:
            job = registry.get(job_id)
            if job is None:
                raise LookupError(path)
            loaded.append(getter_for(job))
        return loaded[0](path)

    return get


def filter_jobs(jobs: Iterable[Job], query: Query) -> list[Job]:
    now = _dt.datetime.now(_dt.UTC)
    return [j for j in jobs if matches(query, getter_for(j), now=now)]


def getter_for(job: Job) -> Callable[[tuple[str, ...]], object]:
    def get(path: tuple[str, ...]) -> object:
        head, rest = path[0], path[1:]
        if head == "status" and not rest:
            return job.current_status()
        if head == "time":
            if len(rest) != 1:
                raise LookupError(path)
            stamp = job.time.get(rest[0])
            if stamp is None:
                raise LookupError(path)
            return _dt.datetime.fromtimestamp(stamp, _dt.UTC)
        if head == "subjobs":
            counts = job.counts()
            if not rest:
                return sum(counts.values())
            if len(rest) != 1:
                raise LookupError(path)
            return counts.get(_status_named(rest[0]), 0)
        if head == "fqid" and not rest:
            return job.fqid
        value: Any = job
        for name in path:
            value = _attribute(value, name, path)
        if isinstance(value, GangaObject):
            return type(value).__name__
        return value

    return get


def _attribute(obj: Any, name: str, path: tuple[str, ...]) -> Any:
    if not isinstance(obj, GangaObject):
        raise LookupError(path)
    schema = type(obj)._schema
    if name not in schema or schema[name].metadata.get("hidden"):
        raise LookupError(path)
    value = getattr(obj, name)
    return list(value) if isinstance(value, tuple) else value


def _status_named(label: str) -> Status:
    try:
        return Status.parse(label)
    except ValueError as exc:  # subjobs.<status>: a mistyped status is the query's fault
        raise QueryError(f"subjobs.{label}: {exc}") from None
