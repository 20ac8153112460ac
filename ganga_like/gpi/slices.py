"""Job slices: a list of jobs that prints as a table and acts on all its jobs at once,
and what ``select`` of jobs and of templates share."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ganga_like.errors import GangaError, JobError
from ganga_like.gpi import seeing, workflow
from ganga_like.gpi.arguments import keyword_options, shown_name, wanted_ids
from ganga_like.gpi.job_table import table
from ganga_like.gpi.lookups import check_index, check_select, refuse_pickling, select_ids
from ganga_like.gpi.progress import progress as show_progress
from ganga_like.gpi.proxy import GPIObject, current_session, unwrap, wrap
from ganga_like.model import plugin_registry
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status
from ganga_like.runtime.stats import JobStats, job_stats
from ganga_like.runtime.submission import actions, lifecycle

__all__ = ["JobSlice", "LazyJobSlice", "description_filter", "resubmit_backend"]


class JobSlice:
    """A list of jobs that prints as a table and acts on all its jobs at once."""

    def __init__(self, jobs: Iterable[JobImpl], title: str = "jobs") -> None:
        self._jobs = list(jobs)
        self._title = title

    def _impls(self) -> list[JobImpl]:
        return self._jobs

    def _stats_jobs(self) -> list[JobImpl]:
        """The jobs its stats and pictures read (a master stands for its subjobs)."""
        return self._impls()

    def __len__(self) -> int:
        return len(self._impls())

    # The GPI Job of each job (this module is below the one defining that class).
    def __iter__(self) -> Iterator[GPIObject]:
        return (wrap(j) for j in self._impls())

    def __getitem__(self, index: int | slice) -> Any:
        check_index(index, self._title)
        impls = self._impls()
        if isinstance(index, slice):
            return JobSlice(impls[index], self._title)
        try:
            return wrap(impls[index])
        except IndexError:
            raise JobError(
                f"{self._title}: index {index} out of range ({len(impls)} jobs)"
            ) from None

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list | tuple | JobSlice):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        current_session().refresh()
        return table(self._impls(), self._title)

    def ids(self) -> list[int]:
        return [j.id for j in self._impls()]

    # ``copy.copy(jobs)`` could mean new jobs (as ``copy.copy(j)`` is ``j.copy()``) or a
    # list of the same ones: neither is guessed.
    def __copy__(self) -> JobSlice:
        raise JobError(
            f"copy.copy() of {shown_name(self)} is not done: {shown_name(self)}.copy() makes "
            f"new {self._item}s of them, list({shown_name(self)}) lists them"
        )

    def __deepcopy__(self, memo: dict[int, Any]) -> JobSlice:
        return self.__copy__()

    def __reduce_ex__(self, protocol: Any) -> Any:
        shown = getattr(self, "_shown_as", None) or f"a slice of {self._item}s"
        raise refuse_pickling(shown, self._item)

    @keyword_options
    def select(
        self,
        ids: Iterable[int] | range | int | None = None,
        maxid: int | None = None,
        *,
        status: str | None = None,
        name: str | None = None,
        backend: str | type | None = None,
        application: str | type | None = None,
    ) -> JobSlice:
        """Jobs matching every given condition: ids (a list or range; or, as in Ganga, a
        first id and optionally a last one, both included: ``select(10, 20)``), status,
        name (glob), backend or application (its class, e.g. ``Local``, or class name)."""
        matches = description_filter(
            f"{shown_name(self)}.select()", ids, maxid, status, name, backend, application
        )
        wanted_status = Status.parse(status) if status else None
        out = [
            job
            for job in self._impls()
            if matches(job) and (wanted_status is None or job.current_status() is wanted_status)
        ]
        return JobSlice(out, self._title)

    @keyword_options
    def query(self, text: str) -> JobSlice:
        """The jobs matching a query, e.g. ``"status=failed; name~scan*; time.submitted>2d-ago"``
        (see the query language reference)."""
        from ganga_like.runtime.search import filter_jobs, parse_job_query

        query = parse_job_query(text)
        return JobSlice(filter_jobs(self._impls(), query), self._title)

    def _bulk(
        self, action: Callable[[JobImpl], Any], keep_going: bool, verb: str = ""
    ) -> list[str]:
        errors = []
        impls = self._impls()
        # A bar only if the whole thing lasts long enough to be worth watching.
        with show_progress(f"{verb} {len(impls)} jobs", delay=0.5) as bar:
            for done, job in enumerate(impls):
                try:
                    action(job)
                except GangaError as exc:
                    if not keep_going:
                        raise
                    errors.append(f"{job.fqid}: {exc}")
                bar.update(done + 1, len(impls), f"{len(errors)} errors" if errors else "")
        return errors

    # Each action acts on every job of the slice, or (ids given) on those of its jobs only:
    # ``jobs.remove(10)`` removes job 10. Options are keywords (see gpi.arguments).

    @keyword_options
    def submit(self, *ids: Any, keep_going: bool = True) -> list[str]:
        """Submit every job (or those of the ids given); with keep_going, errors are
        collected and returned."""
        return self._only("submit", ids)._bulk(
            lambda j: workflow.submit(current_session(), j, keep_going), keep_going, "submitting"
        )

    @keyword_options
    def kill(self, *ids: Any, keep_going: bool = True, dependents: str | None = None) -> list[str]:
        """Kill every job (or those of the ids given); ``dependents`` as for Job.kill."""
        return self._only("kill", ids)._bulk(
            lambda j: workflow.kill(current_session(), j, keep_going, dependents),
            keep_going,
            "killing",
        )

    @keyword_options
    def resubmit(self, *ids: Any, keep_going: bool = True, backend: Any = None) -> list[str]:
        """Resubmit every job, or those of the ids given (see Job.resubmit; ``backend`` is
        given to each)."""
        chosen = self._only("resubmit", ids)
        changed = resubmit_backend(backend)
        return chosen._bulk(
            lambda j: actions.resubmit(current_session(), j, keep_going, changed),
            keep_going,
            "resubmitting",
        )

    @keyword_options
    def remove(self, *ids: Any, keep_going: bool = True) -> list[str]:
        """Remove every job (or those of the ids given: ``jobs.remove(10)``)."""
        return self._only("remove", ids)._bulk(
            lambda j: actions.remove(current_session(), j), keep_going, "removing"
        )

    @keyword_options
    def freeze(self, *ids: Any, keep_going: bool = True) -> list[str]:
        """Freeze every job, or those of the ids given (see Job.freeze); with keep_going,
        errors are returned."""
        return self._only("freeze", ids)._bulk(
            lambda j: lifecycle.freeze(current_session(), j), keep_going, "freezing"
        )

    @keyword_options
    def unfreeze(self, *ids: Any, keep_going: bool = True) -> list[str]:
        """Unfreeze every job (or those of the ids given)."""
        return self._only("unfreeze", ids)._bulk(
            lambda j: lifecycle.unfreeze(current_session(), j), keep_going, "unfreezing"
        )

    def stats(self) -> JobStats:
        """How its jobs are doing, as plain data (a master: its subjobs; docs/stats.md)."""
        current_session().refresh()
        return job_stats(self._stats_jobs(), self._title)

    report = seeing.slice_report  # their plots and tables in one HTML file
    dashboard = seeing.slice_dashboard  # live plots in a notebook

    @keyword_options
    def copy(self, *ids: Any, keep_going: bool = True) -> JobSlice:
        """New jobs with the descriptions of every job (or of those of the ids given)."""
        copies = []
        for job in self._only("copy", ids)._impls():
            try:
                copies.append(actions.copy_job(current_session(), job))
            except GangaError:
                if not keep_going:
                    raise
        return JobSlice(copies, f"new jobs copied from {self._title}")

    # What an action's positional ids name.
    _item = "job"

    def _only(self, verb: str, ids: tuple[Any, ...]) -> JobSlice:
        """This slice, or (ids or objects given) a slice of those of its items, in that
        order; one it does not hold (an id, or a job of another slice) is one line, before
        anything is done."""
        if not ids:
            return self
        where = f"{shown_name(self)}.{verb}()"
        flat = tuple(list(i) if isinstance(i, JobSlice) else i for i in ids)
        chosen = wanted_ids(where, flat, self._item, self._held)
        found = self._by_ids([c if isinstance(c, int) else c.id for c in chosen])
        items: list[Any] = []
        missing: list[str] = []
        for named in chosen:
            if isinstance(named, int):
                item = found.get(named)
            else:  # an object: held only if the item of its id is that one
                item = found.get(named.id)
                item = item if item is not None and _same(item, named) else None
            if item is None:
                missing.append(str(named) if isinstance(named, int) else _shown_id(named))
            elif not any(_same(item, kept) for kept in items):
                items.append(item)
        if missing:
            raise JobError(
                f"{where}: no {self._item} {', '.join(missing)} in {self._title}; nothing done"
            )
        return self._sliced(items)

    # What kind of object an action takes as what to act on, besides ids.
    _kind: type = JobImpl

    def _held(self, value: Any) -> Any:
        """The item a GPI object given as what to act on stands for, if of this slice's
        kind (a job for jobs, a template for templates); None otherwise."""
        if not isinstance(value, GPIObject):
            return None
        impl = unwrap(value)
        return impl if isinstance(impl, self._kind) else None

    def _by_ids(self, ids: list[int]) -> dict[int, Any]:
        wanted = set(ids)
        items = ((getattr(item, "id", None), item) for item in self._impls())
        return {i: item for i, item in items if i in wanted}

    def _sliced(self, items: list[Any]) -> JobSlice:
        return JobSlice(items, self._title)


def _same(item: Any, other: Any) -> bool:
    """Whether two items are the same job (or template): same kind and same full id."""
    return item is other or (type(item) is type(other) and _shown_id(item) == _shown_id(other))


def _shown_id(item: Any) -> str:
    return str(getattr(item, "fqid", item.id))


def description_filter(
    where: str,
    ids: object,
    maxid: object,
    status: object,
    name: str | None,
    backend: str | type | None,
    application: str | type | None,
) -> Callable[[Any], bool]:
    """What ``select`` of jobs and of templates share: ids (a list or range, or a first and
    last id), a name glob, a backend or application by class or class name. An unknown
    plugin name is one line here, rather than a selection that matches nothing."""
    wanted_ids = select_ids(where, ids, maxid)
    check_select(where, status, name, backend=backend, application=application)
    for plugin in (backend, application):
        if isinstance(plugin, str) and plugin not in plugin_registry.known_names():
            plugin_registry.find(plugin)  # raises the one line, with a suggestion

    def matches(item: Any) -> bool:
        return (
            (wanted_ids is None or item.id in wanted_ids)
            and (name is None or fnmatch.fnmatchcase(item.name, name))
            and (backend is None or _is_plugin(item.backend, backend))
            and (application is None or _is_plugin(item.application, application))
        )

    return matches


def _is_plugin(component: Any, wanted: str | type) -> bool:
    """Whether a job's component is the plugin ``wanted``: a class name, a GPI class (which
    stands for the model class it wraps) or a model class."""
    if isinstance(wanted, str):
        return type(component).__name__ == wanted
    impl_class = getattr(wanted, "_impl_class", wanted)
    return isinstance(impl_class, type) and isinstance(component, impl_class)


class LazyJobSlice(JobSlice):
    """A slice of job ids, loading each job only when it is used."""

    def __init__(self, registry: Any, ids: list[int], title: str = "jobs") -> None:
        self._registry = registry
        self._ids = ids
        self._title = title

    def _impls(self) -> list[JobImpl]:
        return [j for j in (self._registry.get(i) for i in self._ids) if j is not None]

    def __len__(self) -> int:
        return len(self._ids)

    def ids(self) -> list[int]:
        return list(self._ids)


def resubmit_backend(value: Any) -> Any:
    """``resubmit(backend=...)``'s value, checked as Job.backend is (None: unchanged)."""
    if value is None:
        return None
    return JobImpl._validate("backend", unwrap(value))
