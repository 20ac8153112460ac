"""The GPI Job, job slices and the ``jobs`` registry."""

from __future__ import annotations

import fnmatch
import inspect
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from ganga_like.errors import GangaError, JobError, SchemaError
from ganga_like.gpi import results
from ganga_like.gpi.arguments import given, keyword_options, shown_name, wanted_ids
from ganga_like.gpi.display import table
from ganga_like.gpi.lookups import (
    check_index,
    check_lines,
    check_select,
    check_timeout,
    id_number,
    is_whole,
    refuse_pickling,
    select_ids,
)
from ganga_like.gpi.progress import Progress
from ganga_like.gpi.progress import progress as show_progress
from ganga_like.gpi.proxy import (
    GPIObject,
    _proxies,
    _session,
    job_removed,
    register_proxy_class,
    removed_message,
    schema_doc,
    unwrap,
    wrap,
)
from ganga_like.gpi.table_text import shorten
from ganga_like.model import plugin_registry
from ganga_like.model.history import History, HistoryEntry
from ganga_like.model.interfaces import JobPaths
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.parts import job_parts
from ganga_like.model.status import Status
from ganga_like.model.status_column import status_of
from ganga_like.model.template import copy_description, describes
from ganga_like.model.times import JobTimes
from ganga_like.runtime import postprocessing
from ganga_like.runtime.submission import actions, lifecycle

__all__ = ["Job", "JobRegistry", "JobSlice", "SubjobSlice", "jobs"]


def refuse_positional(name: str, args: tuple[Any, ...]) -> None:
    """``Job(3)`` or ``Job("scan")``: the one positional argument a job or template takes
    is what to copy, so say that rather than counting arguments."""
    if args:
        shown = ", ".join(given(a) for a in args)
        raise SchemaError(
            f"{name}() takes a job or a JobTemplate to copy, not {shown}; give the rest as "
            f"keywords: {name}(name=..., application=..., backend=...)"
        )


class Job(GPIObject):
    """A job: ``Job(application=Executable(exe="echo", args=["hi"]), backend=Local())``.

    Split it with ``splitter=ArgSplitter(args=[...])``; ``submit()`` creates the subjobs.
    ``Job(template)`` or ``Job(other_job)`` makes a new job with a copy of its description
    (keywords given as well change the copy).
    """

    _impl_class = JobImpl
    # (master, id) of a subjob reached through its master's ``subjobs``: its status is
    # read from the master's status chunks, and the subjob itself is looked up (and
    # loaded) only when something else about it is asked.
    __slots__ = ("_at",)

    @property
    def _impl(self) -> JobImpl:
        try:
            impl: JobImpl = _IMPL_SLOT.__get__(self, Job)
            return impl
        except AttributeError:
            master, index = object.__getattribute__(self, "_at")  # else: no job at all
        impl = master.subjob(index)
        _IMPL_SLOT.__set__(self, impl)
        if _proxies.get(id(impl)) is None:
            _proxies[id(impl)] = self  # from now on, the subjob's GPI object
        return impl

    @_impl.setter
    def _impl(self, impl: JobImpl) -> None:
        _IMPL_SLOT.__set__(self, impl)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        source = unwrap(args[0]) if len(args) == 1 else None
        if describes(source):
            super().__init__()
            copy_description(source, self._job)
            for name, value in kwargs.items():
                setattr(self, name, value)  # validated as any assignment is
        else:
            refuse_positional(type(self).__name__, args)
            super().__init__(*args, **kwargs)
        impl = self._job
        session = _session()
        session.repo.in_transaction(lambda: session.registry().add(impl), what="creating a job")

    @property
    def _job(self) -> JobImpl:
        impl: JobImpl = object.__getattribute__(self, "_impl")
        return impl

    # -- read-only views -------------------------------------------------------------

    @property
    def status(self) -> str:
        """Current status; a master's is derived from its subjobs."""
        _session().refresh()
        try:
            loaded = _IMPL_SLOT.__get__(self, Job)
        except AttributeError:
            loaded = None
        if loaded is None or loaded._p_changed is None:  # not changed in this transaction
            label = _status_from_master(self)
            if label is not None:
                return label
        job = self._job
        if job_removed(job):
            return "removed"
        return job.current_status().label

    def _live(self, action: str) -> JobImpl:
        """The job, unless it was removed: then one line saying so."""
        job = self._job
        if job_removed(job):
            raise JobError(removed_message(job, action))
        return job

    @property
    def id(self) -> int:
        return self._job.id

    @property
    def fqid(self) -> str:
        """ "12" for a job, "12.3" for its subjob 3."""
        return self._job.fqid

    @property
    def master(self) -> Job | None:
        """The master of a subjob; None for a top-level job."""
        return wrap(self._job.master)  # type: ignore[no-any-return]

    parent = master

    @property
    def subjobs(self) -> SubjobSlice:
        """The subjobs (empty until a split job is submitted)."""
        return SubjobSlice(self._job)

    @property
    def time(self) -> JobTimes:
        """When each status was reached: ``time.submitted``, ``time.runtime()``,
        ``time.details()``; also a mapping, ``time["running"]``."""
        _session().refresh()
        return self._job.times()

    @property
    def info(self) -> dict[str, Any]:
        """Submission bookkeeping: how many times the job was submitted."""
        return {"submit_count": self._job.submit_count}

    @property
    def exit_code(self) -> int | None:
        return self._job.exit_code

    @property
    def history(self) -> History:
        """The event log: time, old status, new status, cause (a list of entries)."""
        return History(HistoryEntry(*e) for e in self._job.history)

    @property
    def inputdir(self) -> Path:
        return self._paths().input

    @property
    def outputdir(self) -> Path:
        return self._paths().output

    def _paths(self) -> JobPaths:
        return _session().submit_context().paths(self._job)

    # -- actions ---------------------------------------------------------------------

    @keyword_options
    def submit(self, *, keep_going: bool = False, dry_run: bool = False) -> bool | str:
        """Split (if a splitter is set) and submit; see the user guide for keep_going.

        ``dry_run=True`` returns what would be sent to the backend (e.g. the batch
        scripts) and changes nothing."""
        job = self._live("submit()")
        if dry_run:
            return actions.preview(_session(), job)
        if job.stored().get("splitter") is None:
            return actions.submit(_session(), job, keep_going)
        # Splitting and bulk submission of thousands of subjobs takes seconds: say so.
        with show_progress(f"submitting job {job.fqid}") as bar:
            bar.update(0, None, "splitting, preparing and handing to the backend")
            result = actions.submit(_session(), job, keep_going)
            # From the status counter: counting the tree would load every bucket of it
            # (17 s and 290 MB for a million subjobs, just written and let go).
            count = sum(job.counts().values())
            bar.update(count, count, f"{count} subjobs submitted")
        return result

    @keyword_options
    def kill(self, *, keep_going: bool = True) -> bool:
        """Kill the job (a master: all its active subjobs)."""
        return actions.kill(_session(), self._live("kill()"), keep_going)

    @keyword_options
    def resubmit(self, *, keep_going: bool = True, backend: Any = None) -> bool:
        """Resubmit a failed/killed job; for a master, its failed/killed subjobs.

        ``backend``: a changed copy of the job's backend, e.g. ``Slurm(resources=
        Resources(memory="4G"))``; of the same type, changing only what may change at
        resubmission (see each attribute's help). Each resubmitted (sub)job keeps it."""
        job = self._live("resubmit()")
        return actions.resubmit(_session(), job, keep_going, _resubmit_backend(backend))

    @keyword_options
    def remove(self) -> bool:
        """Remove the job, its subjobs and its workspace (running ones are killed first)."""
        return actions.remove(_session(), self._live("remove()"))

    @keyword_options
    def freeze(self) -> bool:
        """Settle a finished job or subjob: completed -> completed_frozen, failed or
        killed -> failed_frozen. A master's status and resubmit() ignore frozen subjobs."""
        return lifecycle.freeze(_session(), self._live("freeze()"))

    @keyword_options
    def unfreeze(self) -> bool:
        """A frozen job or subjob back to the state it was frozen in."""
        return lifecycle.unfreeze(_session(), self._live("unfreeze()"))

    @keyword_options
    def resplit(self, splitter: Any) -> bool:
        """Split this finished subjob again with ``splitter``: the pieces run as new
        subjobs of the same master (the next ids), and this subjob is frozen."""
        return lifecycle.resplit(_session(), self._live("resplit()"), unwrap(splitter))

    @keyword_options
    def copy(self) -> Job:
        """A new job with the same description (also for a subjob: a new top-level job)."""
        return wrap(actions.copy_job(_session(), self._job))  # type: ignore[no-any-return]

    @keyword_options
    def runPostProcessors(self) -> bool:
        """Run the job's postprocessors again now (mergers, then checkers); True when the
        job is completed afterwards."""
        session = _session()
        session.sync()  # what the monitor recorded (completed, postprocessing under way)
        return postprocessing.run_by_hand(session.repo, self._live("runPostProcessors()"))

    @keyword_options
    def force_status(self, status: str) -> bool:
        """Force the job to 'completed' or 'failed'."""
        return actions.force_status(_session(), self._live("force_status()"), status)

    @keyword_options
    def wait(
        self, timeout: float | None = None, until: str | None = None, progress: bool | None = None
    ) -> str:
        """Wait until the job reaches ``until`` (default: a final status); return the status.

        States follow their order: waiting for 'running' returns when the job is already
        completed. Raises JobError on timeout.
        """
        if progress is not None and not isinstance(progress, bool):
            raise SchemaError(f"wait(): progress expected True or False, not {given(progress)}")
        limit = check_timeout("wait()", timeout)
        return wait_for_job(self._job, limit, until, progress)

    @keyword_options
    def peek(self, filename: str = "stdout", lines: int | None = None) -> None:
        """Print an output file (default stdout; also 'stderr' or any collected file), or
        list the output directory with peek('')."""
        check_lines("peek()", filename, lines)
        path = self.outputdir / filename if filename else self.outputdir
        if path.is_dir():
            print("\n".join(sorted(p.name for p in path.iterdir())))
            return
        if not path.exists():
            raise JobError(f"job {self.fqid}: no {filename!r} in {self.outputdir}")
        if lines == 0:  # [-0:] would be every line
            return
        text = path.read_text(errors="replace")
        if lines is not None:
            text = "\n".join(text.splitlines()[-lines:])
        print(text, end="" if text.endswith("\n") else "\n")

    @keyword_options
    def result(self) -> Any:
        """What the job's function returned (a PythonFunction job), once it completed; a
        master: the list of its subjobs' results, in subjob order, once all completed."""
        session = _session()
        session.refresh()
        return results.result_of(self._live("result()"), session.submit_context().paths)

    def __repr__(self) -> str:
        job = self._job
        status = "removed" if job_removed(job) else job.current_status()
        fields = [f"fqid={job.fqid}", f"status={status}"]
        if job.name:
            fields.append(f"name={job.name!r}")
        for part in job_parts().components:
            value = job.stored().get(part.name)
            if value is not None:
                # Cut, as in `ganga show`: a 20,000-subjob splitter is 200 kB of one line;
                # repr(j.splitter) still gives it whole.
                fields.append(f"{part.name}={shorten(repr(wrap(value)), _REPR_CHARS)}")
        if job.is_master:
            fields.append(f"subjobs={job.subjob_count()}")
        return f"Job({', '.join(fields)})"


# Longest a part of a job's repr gets (cut with an ellipsis).
_REPR_CHARS = 300

# Wrapping a job (``proxy.wrap``) gives this class.
register_proxy_class(JobImpl, Job)


# ``Job?`` and ``help(Job)`` list every attribute with its type, default and help.
Job.__doc__ = f"{inspect.cleandoc(Job.__doc__ or '')}\n\n{schema_doc(JobImpl)}"


def wait_for_job(
    job: JobImpl, timeout: float | None, until: str | None, progress: bool | None
) -> str:
    target = Status.parse(until) if until else None
    try:
        return _wait(job, target, timeout, progress)
    except KeyboardInterrupt:
        # Ctrl-C stops the waiting, never the job: say so in the one line shown.
        raise KeyboardInterrupt(
            f"wait() for job {job.fqid} stopped; the job goes on ({job.current_status()})"
        ) from None


def _wait(job: JobImpl, target: Status | None, timeout: float | None, progress: bool | None) -> str:
    session = _session()
    deadline = None if timeout is None else time.monotonic() + timeout
    with show_progress(f"job {job.fqid}", show=progress) as bar:
        while True:
            seen = session.monitor.commits
            # Waiting is an action, like submit: inside a shell cell it commits what the
            # cell changed so far, so that the monitor's new commits become visible.
            session.sync()
            status = job.current_status()
            done = status.reached(target) or status.final if target else status.final
            if done and status is Status.COMPLETED and job.postprocessing_pending():
                done = target is not None and not target.final  # merging, checking: wait
            _report_progress(bar, job, status)
            if done:
                return status.label
            if status is Status.NEW and target is not Status.NEW:
                # Never submitted, or its submission was rolled back, or (a master) the
                # subjobs it did submit have finished and the others never were: nothing
                # will change until submit().
                if job.is_master:
                    never = job.counts().get(Status.NEW, 0)
                    raise JobError(
                        f"job {job.fqid} is new: {never} of its subjobs were never "
                        "submitted (the others have finished); submit() runs "
                        "them; nothing to wait for"
                    )
                raise JobError(f"job {job.fqid} is new: submit it first; nothing to wait for")
            if status is Status.SUBMITTING:
                _check_left_submitting(session, job)
            if deadline is not None and time.monotonic() >= deadline:
                raise JobError(f"job {job.fqid}: still {status} after waiting {timeout} s")
            session.poke_monitor()
            # Woken by this process's monitor as soon as it commits; the timeout covers
            # commits made by another process (the lease holder).
            session.monitor.wait_for_commit(seen, 0.05)


def _check_left_submitting(session: Any, job: JobImpl) -> None:
    """A job this session said stays submitting until ganga next starts: nothing changes
    before then, so waiting says that line again at once."""
    for fqid in (job.fqid, job.master.fqid if job.master is not None else None):
        line = session.left_submitting.get(fqid)
        if line is not None:
            raise JobError(f"{line}; nothing to wait for")


def _report_progress(bar: Progress, job: JobImpl, status: Status) -> None:
    counts = job.counts()
    if not counts:
        bar.update(0, None, str(status), {status.label: 1})
        return
    total = sum(counts.values())
    finished = sum(n for s, n in counts.items() if s.final)
    ordered = sorted(counts.items(), key=lambda kv: kv[0].place)
    detail = ", ".join(f"{n} {s}" for s, n in ordered)
    bar.update(finished, total, detail, {s.label: n for s, n in ordered})


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


class JobSlice:
    """A list of jobs that prints as a table and acts on all its jobs at once."""

    def __init__(self, jobs: Iterable[JobImpl], title: str = "jobs") -> None:
        self._jobs = list(jobs)
        self._title = title

    def _impls(self) -> list[JobImpl]:
        return self._jobs

    def __len__(self) -> int:
        return len(self._impls())

    def __iter__(self) -> Iterator[Job]:
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
        _session().refresh()
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
            lambda j: actions.submit(_session(), j, keep_going), keep_going, "submitting"
        )

    @keyword_options
    def kill(self, *ids: Any, keep_going: bool = True) -> list[str]:
        """Kill every job (or those of the ids given)."""
        return self._only("kill", ids)._bulk(
            lambda j: actions.kill(_session(), j, keep_going), keep_going, "killing"
        )

    @keyword_options
    def resubmit(self, *ids: Any, keep_going: bool = True, backend: Any = None) -> list[str]:
        """Resubmit every job, or those of the ids given (see Job.resubmit; ``backend`` is
        given to each)."""
        chosen = self._only("resubmit", ids)
        changed = _resubmit_backend(backend)
        return chosen._bulk(
            lambda j: actions.resubmit(_session(), j, keep_going, changed),
            keep_going,
            "resubmitting",
        )

    @keyword_options
    def remove(self, *ids: Any, keep_going: bool = True) -> list[str]:
        """Remove every job (or those of the ids given: ``jobs.remove(10)``)."""
        return self._only("remove", ids)._bulk(
            lambda j: actions.remove(_session(), j), keep_going, "removing"
        )

    @keyword_options
    def freeze(self, *ids: Any, keep_going: bool = True) -> list[str]:
        """Freeze every job, or those of the ids given (see Job.freeze); with keep_going,
        errors are returned."""
        return self._only("freeze", ids)._bulk(
            lambda j: lifecycle.freeze(_session(), j), keep_going, "freezing"
        )

    @keyword_options
    def unfreeze(self, *ids: Any, keep_going: bool = True) -> list[str]:
        """Unfreeze every job (or those of the ids given)."""
        return self._only("unfreeze", ids)._bulk(
            lambda j: lifecycle.unfreeze(_session(), j), keep_going, "unfreezing"
        )

    @keyword_options
    def copy(self, *ids: Any, keep_going: bool = True) -> JobSlice:
        """New jobs with the descriptions of every job (or of those of the ids given)."""
        copies = []
        for job in self._only("copy", ids)._impls():
            try:
                copies.append(actions.copy_job(_session(), job))
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


class SubjobSlice(JobSlice):
    """The subjobs of a master, read lazily from its subjob tree."""

    def __init__(self, master: JobImpl) -> None:
        self._master = master
        self._title = f"subjobs of job {master.id}"

    def _impls(self) -> list[JobImpl]:
        return list(self._master.iter_subjobs())

    def __len__(self) -> int:
        return self._master.subjob_count()

    def __iter__(self) -> Iterator[Job]:
        master = self._master
        known = master.subjob_statuses()  # from the chunks: the subjob tree is not read
        if known is None:  # no status chunks: the subjobs themselves
            for index, subjob in master.subjob_items():
                proxy = wrap(subjob)
                object.__setattr__(proxy, "_at", (master, index))
                yield proxy
            return
        # Ids are positions 0..N-1 (the chunks exist only then): a proxy per id, each
        # subjob looked up only if more than its status is asked (see Job._impl).
        new, owner_slot, at_slot = object.__new__, _OWNER_SLOT, _AT_SLOT
        for index in range(len(known)):
            proxy = new(Job)
            owner_slot.__set__(proxy, None)
            at_slot.__set__(proxy, (master, index))
            yield proxy

    def __getitem__(self, index: int | slice) -> Any:
        check_index(index, self._title, "subjob")
        if isinstance(index, int):
            count = self._master.subjob_count()
            position = index + count if index < 0 else index
            if not 0 <= position < count:
                raise JobError(f"job {self._master.id} has {count} subjobs; no index {index}")
            return wrap(self._master.subjob(position))
        return super().__getitem__(index)

    def __call__(self, subjob_id: int) -> Job:
        where = f"{self._shown_as}()"
        number = id_number(where, subjob_id, "subjob", "0, 1, ...")
        return wrap(self._master.subjob(number))  # type: ignore[no-any-return]

    _item = "subjob"

    @property
    def _shown_as(self) -> str:
        return f"jobs({self._master.id}).subjobs"

    def _by_ids(self, ids: list[int]) -> dict[int, Any]:
        found = ((i, self._master.find_subjob(i)) for i in ids if storable_id(i))
        return {i: subjob for i, subjob in found if subjob is not None}

    def submit(self, *ids: Any, **options: Any) -> list[str]:
        raise JobError(
            "subjobs cannot be submitted on their own; submit the master or resubmit subjobs"
        )

    def remove(self, *ids: Any, **options: Any) -> list[str]:
        raise JobError(
            f"subjobs cannot be removed on their own; remove the master: jobs({self._master.id})"
            ".remove()"
        )


_IMPL_SLOT: Any = GPIObject.__dict__["_impl"]
_OWNER_SLOT: Any = GPIObject.__dict__["_owner"]
_AT_SLOT: Any = Job.__dict__["_at"]


def _status_from_master(proxy: Job) -> str | None:
    """A subjob's status from its master's status chunks, if it was reached through them."""
    global _chunks_seen
    try:
        master, index = object.__getattribute__(proxy, "_at")
    except AttributeError:
        return None
    jar = master._p_jar
    current = jar.transaction_manager.get() if jar is not None else None
    seen_master, seen_transaction, chunks = _chunks_seen
    if seen_master is not master or seen_transaction is not current or current is None:
        chunks = _REMOVED if job_removed(master) else master.status_chunks()
        _chunks_seen = (master, current, chunks)
    if chunks is _REMOVED:
        return "removed"
    return status_of(chunks, index) if chunks is not None else None


# The last master whose chunks were looked up, in which transaction, and its chunks: the
# statuses of 100,000 subjobs ask the registry whether their master was removed once per
# transaction, not 100,000 times (a new transaction, e.g. after any action, asks again).
_REMOVED: Any = object()
_chunks_seen: tuple[Any, Any, Any] = (None, None, None)


class JobRegistry(JobSlice):
    """All jobs in the repository: ``jobs(3)``, ``jobs((3, 1))``, ``jobs("3.1")``,
    ``jobs[-1]``, ``jobs["name"]`` (the most recent job so named), slices, ``select(...)``."""

    _shown_as = "jobs"

    def __init__(self) -> None:
        self._title = "jobs"

    def _by_ids(self, ids: list[int]) -> dict[int, Any]:
        session = _session()
        session.refresh()
        registry = session.registry()
        found = ((i, registry.get(i)) for i in ids if storable_id(i))
        return {i: job for i, job in found if job is not None}

    def _impls(self) -> list[JobImpl]:
        return list(_session().registry().jobs.values())

    def __len__(self) -> int:
        _session().refresh()
        return len(_session().registry().jobs)

    def __call__(self, key: Any) -> Job:
        job_id, subjob_id = _parse_fqid(key)
        session = _session()
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
        ids = list(_session().registry().jobs.keys())
        if isinstance(index, slice):
            reg = _session().registry()
            return JobSlice([reg.jobs[i] for i in ids[index]], self._title)
        try:
            return wrap(_session().registry().jobs[ids[index]])
        except IndexError:
            raise JobError(f"jobs: index {index} out of range ({len(ids)} jobs)") from None

    def _named(self, name: str) -> Job:
        """The most recent (highest id) job called ``name``, found through the name index."""
        session = _session()
        session.refresh()
        registry = session.registry()
        ids = list(registry.ids_named(name))
        if not ids:
            raise NoSuchJobError(f"no job named {name!r} in the repository")
        return wrap(registry.get(max(ids)))  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        _session().refresh()
        return table(self._impls(), self._title)

    @keyword_options
    def query(self, text: str) -> JobSlice:
        """The jobs matching a query; status, name and id conditions are answered from the
        repository's indexes without loading jobs."""
        from ganga_like.runtime.search import parse_job_query, search

        query = parse_job_query(text)
        session = _session()
        session.refresh()
        registry = session.registry()
        return LazyJobSlice(registry, search(registry, query), self._title)


jobs = JobRegistry()


def _resubmit_backend(value: Any) -> Any:
    """``resubmit(backend=...)``'s value, checked as Job.backend is (None: unchanged)."""
    if value is None:
        return None
    return JobImpl._validate("backend", unwrap(value))


def storable_id(value: int) -> bool:
    """Whether an id fits a repository key (a signed 64-bit int): any other is no job's."""
    return -(2**63) <= value < 2**63


def unwrap_job(value: Any) -> JobImpl:
    impl = unwrap(value)
    if not isinstance(impl, JobImpl):
        raise JobError(f"not a job: {value!r}")
    return impl
