"""Answering job queries: indexes first, then the query evaluator on what is left.

A query whose every condition an index answers (status, name, id) never loads a job.
Otherwise the candidates the indexes allow are loaded one by one and checked with
``ganga_like.query.matches`` through a getter that reads the job's attributes, its
components (``application.exe``), its subjob counts (``subjobs.failed``, never loading a
subjob) and the times of its statuses (``time.submitted``).
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
from ganga_like.query import Query, index_hints, matches
from ganga_like.repository.registry import Registry

__all__ = ["KNOWN_ROOTS", "candidate_ids", "getter_for", "search"]

KNOWN_ROOTS = frozenset({"id", "fqid", "name", "comment", "status", "application", "backend",
                         "splitter", "inputdata", "time", "subjobs", "exit_code",
                         "submit_count", "inputfiles", "outputfiles"})

_INDEXED: dict[tuple[str, ...], tuple[str, ...]] = {
    ("status",): ("=", "<>"),
    ("name",): ("=", "~"),
    ("id",): ("=", "<", "<=", ">", ">="),
}


def _fully_indexed(query: Query) -> bool:
    hints = index_hints(query)
    for condition in query.conditions:
        ops = _INDEXED.get(condition.path)
        if ops is None or condition.op not in ops:
            return False
        if condition.path == ("name",) and condition.op == "~" and "name_glob" not in hints:
            return False
    # Several name conditions: only the first is a hint, the evaluator must see the rest.
    return sum(c.path == ("name",) for c in query.conditions) <= 1


def candidate_ids(registry: Registry, query: Query) -> Iterable[int]:
    """Ids of top-level jobs that may match (all the indexes allow), in id order."""
    hints = index_hints(query)
    sets: list[IITreeSet] = []
    if "status" in hints:
        labels: set[str] = hints["status"]  # type: ignore[assignment]
        sets.append(multiunion([registry.ids_with_status(s) for s in labels]))
    if "status_not" in hints:
        excluded: set[str] = hints["status_not"]  # type: ignore[assignment]
        keep = [s.label for s in Status if s.label not in excluded]
        sets.append(multiunion([registry.ids_with_status(s) for s in keep]))
    if "name" in hints:
        sets.append(registry.ids_named(str(hints["name"])))
    if "name_glob" in hints:
        pattern = str(hints["name_glob"])
        names = [n for n in _names_from(registry, pattern) if fnmatch.fnmatchcase(n, pattern)]
        sets.append(multiunion([registry.ids_named(n) for n in names]))
    bounds: tuple[int | None, int | None] = hints.get(  # type: ignore[assignment]
        "id_range", (None, None))
    lo, hi = bounds
    if lo is not None and hi is not None and lo > hi:
        return []
    if not sets:
        return list(registry.jobs.keys(min=lo, max=hi))
    result = sets[0]
    for other in sets[1:]:
        result = intersection(result, other)
    if lo is not None or hi is not None:
        return list(result.keys(min=lo, max=hi))
    return list(result)


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
    """Ids of the top-level jobs matching ``query``."""
    ids = candidate_ids(registry, query)
    if _fully_indexed(query):
        return list(ids)
    now = now or _dt.datetime.now(_dt.UTC)
    found = []
    for job_id in ids:
        job = registry.get(job_id)
        if job is not None and matches(query, getter_for(job), now=now):
            found.append(job_id)
    return found


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
            return counts.get(Status.parse(rest[0]), 0) if len(rest) == 1 else _missing(path)
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


def _missing(path: tuple[str, ...]) -> object:
    raise LookupError(path)
