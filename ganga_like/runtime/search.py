"""Answering job queries: indexes narrow the candidates, the query evaluator decides.

Every condition is decided by ``ganga_like.query.matches``; the indexes only say where to
look. A condition on ``status`` is evaluated once per status the index knows, and on
``name`` once per name in the name index (a name hint, ``name=x`` or ``name~x*``, narrows
which names are tried): the jobs indexed under the values that satisfy it are the ones
that satisfy it. The registry's id order narrows ``id`` conditions to a range of keys,
and what is left (every ``id`` condition, and conditions on anything else) is evaluated
job by job, through a getter that answers ``id`` and ``status`` from the indexes and
loads the job only for other attributes: its components (``application.exe``), its
subjob counts (``subjobs.failed``, never loading a subjob) and the times of its statuses
(``time.submitted``). A query on status, name and id therefore loads no job.

A condition that cannot be evaluated for some index value (``status>5``) is not decided
up front: it is left to the job-by-job evaluation, which reports it for the first job
that gets that far, as evaluating every job would.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Any

from BTrees.IIBTree import IITreeSet, intersection, multiunion

from ganga_like.model.base import GangaObject
from ganga_like.model.job import Job
from ganga_like.model.parts import job_parts
from ganga_like.model.status import Status
from ganga_like.query import Condition, Getter, Query, QueryError, index_hints, matches, parse
from ganga_like.repository.registry import Registry
from ganga_like.runtime.workflow import index as workflow_index

__all__ = [
    "KNOWN_ROOTS",
    "KNOWN_VALUES",
    "candidate_ids",
    "filter_jobs",
    "getter_for",
    "parse_job_query",
    "search",
]


class _KnownRoots(Collection[str]):
    """The names a job query may start with: Job's searchable schema attributes, read
    when asked (a part added to Job is searchable at once), and what ``getter_for``
    derives (fqid, the times of statuses, subjob counts)."""

    _DERIVED = frozenset({"fqid", "time", "subjobs"})

    def _names(self) -> frozenset[str]:
        return job_parts().searchable | self._DERIVED

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names()))

    def __len__(self) -> int:
        return len(self._names())


KNOWN_ROOTS = _KnownRoots()
# The texts a job's attribute can hold, when they are few: ``status=complete`` is a
# mistake to point out, not a query that matches nothing.
KNOWN_VALUES = {"status": tuple(s.label for s in Status)}
# What a job waits for holds job ids as text: ``after=12.10`` is subjob 10 of job 12.
ID_PATHS = ("after",)


def parse_job_query(text: str) -> Query:
    """A query on jobs: its attributes and statuses checked as they are parsed."""
    return parse(text, known_roots=KNOWN_ROOTS, known_values=KNOWN_VALUES, id_paths=ID_PATHS)


# Negated operators: "after<>12" holds for the jobs waiting for nothing too.
_POSITIVE_OF = ("<>", "!~")

# Job ids are keys of an IOBTree: 32-bit signed integers. A bound beyond them is clamped,
# which narrows nothing that could exist (the evaluator still compares the real values).
_KEY_MIN, _KEY_MAX = -(2**31), 2**31 - 1


def search(registry: Registry, query: Query, now: _dt.datetime | None = None) -> list[int]:
    """Ids of the top-level jobs matching ``query``, in id order."""
    now = now or _dt.datetime.now(_dt.UTC)
    ids, rest = _narrow(registry, query, now)
    if not rest.conditions:
        return ids
    # id conditions first: a job they rule out is never loaded (id=1,5 loads jobs 1 and
    # 5, not 2 to 4). The rest of the query then decides in its own order.
    by_id = [Query((c,)) for c in rest.conditions if c.path == ("id",)]
    if len(by_id) == len(rest.conditions):
        by_id = []
    found = []
    for job_id in ids:
        get = _indexed_getter(registry, job_id)
        if all(_may_hold(c, get, now) for c in by_id) and matches(rest, get, now=now):
            found.append(job_id)
    return found


def candidate_ids(registry: Registry, query: Query) -> list[int]:
    """Ids of top-level jobs that may match (all the indexes allow), in id order: a
    superset of the answer."""
    return _narrow(registry, query, _dt.datetime.now(_dt.UTC))[0]


def _narrow(registry: Registry, query: Query, now: _dt.datetime) -> tuple[list[int], Query]:
    """(the ids of the jobs that satisfy every condition decided from the indexes, the
    conditions left to evaluate job by job, in the query's order)."""
    sets: list[IITreeSet] = []
    rest: list[Condition] = []
    for condition in query.conditions:
        decided = None
        if condition.path == ("status",):
            decided = _by_status(registry, condition, now)
        elif condition.path == ("name",):
            decided = _by_name(registry, condition, now)
        elif condition.path == ("after",) and condition.op not in _POSITIVE_OF:
            # A superset: the condition is still evaluated, job by job, on these.
            maybe = _by_upstream(registry, condition, now)
            if maybe is not None:
                sets.append(maybe)
        if decided is None:
            rest.append(condition)
        else:
            sets.append(decided)
    lo, hi = _clamped(index_hints(query).get("id_range", (None, None)))  # type: ignore[arg-type]
    if lo is not None and hi is not None and lo > hi:
        return [], Query(tuple(rest))
    ids: Iterable[int]
    if not sets:
        ids = registry.jobs.keys(min=lo, max=hi)
    else:
        result = sets[0]
        for other in sets[1:]:
            result = intersection(result, other)
        ids = result.keys(min=lo, max=hi) if lo is not None or hi is not None else result
    return list(ids), Query(tuple(rest))


def _holding(
    condition: Condition, values: Iterable[object], now: _dt.datetime
) -> list[object] | None:
    """The values for which ``condition`` holds, as the evaluator says; None when it
    cannot be evaluated for one of them (then it is left to the job-by-job evaluation)."""
    single = Query((condition,))
    try:
        return [v for v in values if matches(single, _constant(v), now=now)]
    except QueryError:
        return None


def _constant(value: object) -> Getter:
    def get(_path: tuple[str, ...]) -> object:
        return value

    return get


def _by_status(registry: Registry, condition: Condition, now: _dt.datetime) -> Any:
    holding = _holding(condition, list(Status), now)
    if holding is None:
        return None
    return multiunion(
        [
            registry.ids_with_status(s.label)  # type: ignore[attr-defined]
            for s in holding
        ]
    )


def _by_name(registry: Registry, condition: Condition, now: _dt.datetime) -> Any:
    hints = index_hints(Query((condition,)))
    names: Iterable[str]
    if "name" in hints:
        names = [str(hints["name"])]
    elif "name_glob" in hints:
        pattern = str(hints["name_glob"])
        names = [n for n in _names_from(registry, pattern) if fnmatch.fnmatchcase(n, pattern)]
    else:
        names = list(registry.names())
    holding = _holding(condition, names, now)
    if holding is None:
        return None
    return multiunion([registry.ids_named(str(n)) for n in holding])


def _by_upstream(registry: Registry, condition: Condition, now: _dt.datetime) -> Any:
    """The jobs that may satisfy a (not negated) condition on ``after``: those the
    reverse index of what waits for what lists under an upstream satisfying it, and the
    new ones (a job's dependencies are indexed when it is submitted); None when the
    condition cannot be evaluated on an upstream's id (left to the job-by-job evaluation)."""
    table = registry.root.get(workflow_index.DEPENDENTS_KEY)
    upstreams = list(table.keys()) if table is not None else []
    holding = _holding(condition, upstreams, now)
    if holding is None:
        return None
    found = [table[u] for u in holding] if table is not None else []
    return multiunion([registry.ids_with_status("new"), *found])


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


def _may_hold(condition: Query, get: Getter, now: _dt.datetime) -> bool:
    try:
        return matches(condition, get, now=now)
    except QueryError:
        return True  # not for the pre-check to report: the whole query does, in order


def _indexed_getter(registry: Registry, job_id: int) -> Getter:
    """A getter answering id and status from the indexes, and any other attribute from
    the job, loaded on first need."""
    loaded: list[Getter] = []

    def get(path: tuple[str, ...]) -> object:
        if path == ("id",):
            return job_id
        if path == ("status",):
            label = registry.indexed_status(job_id)
            if label is not None:
                return Status.parse(label)
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
