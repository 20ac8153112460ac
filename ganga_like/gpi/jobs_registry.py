"""The ``jobs`` registry: every job in the repository, looked up by id or name."""

from __future__ import annotations

from typing import Any

from ganga_like.errors import JobError
from ganga_like.gpi.arguments import given, keyword_options
from ganga_like.gpi.job import Job
from ganga_like.gpi.job_table import table
from ganga_like.gpi.lookups import check_index, is_whole, storable_id
from ganga_like.gpi.proxy import current_session, wrap
from ganga_like.gpi.slices import JobSlice, LazyJobSlice
from ganga_like.model.job import Job as JobImpl

__all__ = ["JobRegistry", "NoSuchJobError", "jobs"]


class NoSuchJobError(JobError, KeyError):
    """``jobs["name"]`` found no job of that name; a KeyError too, as for any mapping."""

    # KeyError quotes its message; the one line shown should read as written.
    __str__ = Exception.__str__


def _parse_fqid(key: Any) -> tuple[int, int | None]:
    if isinstance(key, Job):
        return key._job.ids
    if is_whole(key):
        return key, None
    if isinstance(key, tuple) and len(key) in (1, 2) and all(is_whole(k) for k in key):
        return key[0], key[1] if len(key) == 2 else None
    if isinstance(key, str):
        head, _, tail = key.strip().partition(".")
        try:
            return int(head), int(tail) if tail else None
        except ValueError:
            pass
    raise JobError(f"jobs(): expected a job id (3, (3, 1) or '3.1'), not {given(key)}")


class JobRegistry(JobSlice):
    """All jobs in the repository: ``jobs(3)``, ``jobs((3, 1))``, ``jobs("3.1")``,
    ``jobs[-1]``, ``jobs["name"]`` (the most recent job so named), slices, ``select(...)``."""

    _shown_as = "jobs"

    def __init__(self) -> None:
        self._title = "jobs"

    def _by_ids(self, ids: list[int]) -> dict[int, Any]:
        session = current_session()
        session.refresh()
        registry = session.registry()
        found = ((i, registry.get(i)) for i in ids if storable_id(i))
        return {i: job for i, job in found if job is not None}

    def _impls(self) -> list[JobImpl]:
        return list(current_session().registry().jobs.values())

    def __len__(self) -> int:
        current_session().refresh()
        return len(current_session().registry().jobs)

    def __call__(self, key: Any) -> Job:
        job_id, subjob_id = _parse_fqid(key)
        session = current_session()
        session.refresh()
        job = session.registry().get(job_id)
        if job is None:
            raise JobError(f"no job {job_id} in the repository")
        if subjob_id is not None:
            if not isinstance(job, JobImpl) or not job.is_master:
                raise JobError(f"job {job_id} has no subjobs")
            return wrap(job.subjob(subjob_id))  # type: ignore[no-any-return]
        return wrap(job)  # type: ignore[no-any-return]

    def __getitem__(self, index: int | slice | str) -> Any:
        if isinstance(index, str):
            return self._named(index)
        check_index(index, self._title)
        ids = list(current_session().registry().jobs.keys())
        if isinstance(index, slice):
            reg = current_session().registry()
            return JobSlice([reg.jobs[i] for i in ids[index]], self._title)
        try:
            return wrap(current_session().registry().jobs[ids[index]])
        except IndexError:
            raise JobError(f"jobs: index {index} out of range ({len(ids)} jobs)") from None

    def _named(self, name: str) -> Job:
        """The most recent (highest id) job called ``name``, found through the name index."""
        session = current_session()
        session.refresh()
        registry = session.registry()
        ids = list(registry.ids_named(name))
        if not ids:
            raise NoSuchJobError(f"no job named {name!r} in the repository")
        return wrap(registry.get(max(ids)))  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        current_session().refresh()
        return table(self._impls(), self._title)

    @keyword_options
    def query(self, text: str) -> JobSlice:
        """The jobs matching a query; status, name and id conditions are answered from the
        repository's indexes without loading jobs."""
        from ganga_like.runtime.search import parse_job_query, search

        query = parse_job_query(text)
        session = current_session()
        session.refresh()
        registry = session.registry()
        return LazyJobSlice(registry, search(registry, query), self._title)


jobs = JobRegistry()
