"""The GPI Job and the slice of a master's subjobs."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ganga_like.errors import JobError, SchemaError
from ganga_like.gpi import callbacks, resubmit_kill, results, seeing, workflow, workflow_graph
from ganga_like.gpi.arguments import given, keyword_options, refuse_positional
from ganga_like.gpi.lookups import check_index, check_lines, check_timeout, id_number, storable_id
from ganga_like.gpi.progress import progress as show_progress
from ganga_like.gpi.proxy import (
    GPIObject,
    _proxies,
    attribute_holding,
    current_session,
    register_proxy_class,
    schema_doc,
    unwrap,
    wrap,
)
from ganga_like.gpi.slices import JobSlice
from ganga_like.gpi.table_text import shorten
from ganga_like.gpi.waiting import wait_for_job
from ganga_like.model.history import History, HistoryEntry
from ganga_like.model.interfaces import JobPaths
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.parts import job_parts
from ganga_like.model.resources import ResourceUse
from ganga_like.model.status import Status
from ganga_like.model.status_column import status_of
from ganga_like.model.template import copy_description, describes
from ganga_like.model.times import JobTimes
from ganga_like.runtime import postprocessing
from ganga_like.runtime.stats import JobStats, job_stats
from ganga_like.runtime.submission import actions, lifecycle

__all__ = ["Job", "SubjobSlice", "subjob_place", "subjob_proxy", "unwrap_job"]


class Job(GPIObject, callbacks.JobReactions):
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
        if "after" in kwargs:  # the jobs waited for, by id (checked before anything is made)
            kwargs["after"] = workflow.after_value(kwargs["after"])
            workflow.check_after(current_session(), None, kwargs["after"])
        if "inputdata" in kwargs:  # a JobOutput: of a job that exists and can match
            workflow.check_inputdata(current_session(), None, kwargs["inputdata"])
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
        session = current_session()
        session.repo.in_transaction(lambda: session.registry().add(impl), what="creating a job")

    @property
    def _job(self) -> JobImpl:
        impl: JobImpl = object.__getattribute__(self, "_impl")
        return impl

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "after":  # the jobs waited for, by id
            value = workflow.after_value(value)
            workflow.check_after(current_session(), self._job, value)
        elif name == "inputdata":
            workflow.check_inputdata(current_session(), self._job, value)
        super().__setattr__(name, value)

    # -- read-only views -------------------------------------------------------------

    @property
    def status(self) -> str:
        """Current status; a master's is derived from its subjobs."""
        current_session().refresh()
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
        """The subjobs (empty until a split job is submitted; a streaming map's grow as
        what it reads completes)."""
        current_session().refresh()
        return SubjobSlice(self._job)

    @property
    def time(self) -> JobTimes:
        """When each status was reached: ``time.submitted``, ``time.runtime()``,
        ``time.details()``; also a mapping, ``time["running"]``."""
        current_session().refresh()
        return self._job.times()

    @property
    def upstream(self) -> JobSlice:
        """The jobs and subjobs this job waits for (``after``), read-only."""
        registry = current_session().registry()
        found = []
        for fqid in workflow.upstream_fqids(self._job):
            job_id, _, sub = fqid.partition(".")
            impl = registry.lookup(int(job_id), int(sub) if sub else None)
            if impl is not None:
                found.append(impl)
        return JobSlice(found, title=f"upstream of job {self.fqid}")

    @property
    def downstream(self) -> JobSlice:
        """The jobs that wait for this job (or one of its subjobs), read-only."""
        session = current_session()
        registry = session.registry()
        ids = workflow.downstream_ids(session, self._job)
        return JobSlice([registry.get(i) for i in ids], title=f"downstream of job {self.fqid}")

    graph = workflow_graph.job_graph  # j.graph(): the jobs linked to it by what waits for what
    report = seeing.job_report  # j.report('run.html'): its plots and tables in one file
    dashboard = seeing.job_dashboard  # j.dashboard(): live plots in a notebook

    @property
    def info(self) -> dict[str, Any]:
        """Submission bookkeeping: how many times the job was submitted."""
        return {"submit_count": self._job.submit_count}

    @property
    def exit_code(self) -> int | None:
        return self._job.exit_code

    def stats(self) -> JobStats:
        """How it is doing, as plain data (a master: its subjobs): counts by status now and
        over time, queue wait and run time with the slowest runs, the time left, failures
        grouped by cause, resources used; ``to_dict()``, ``to_json()`` (docs/stats.md)."""
        current_session().refresh()
        job = self._live("stats()")
        return job_stats([job], f"job {job.fqid}")

    @property
    def resources_used(self) -> ResourceUse | None:
        """What its run used once it ended, where the backend measures it (Local):
        peak memory (bytes), user and system CPU and wall seconds; None otherwise."""
        return self._job.resources_used()

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
        return current_session().submit_context().paths(self._job)

    # -- actions ---------------------------------------------------------------------

    @keyword_options
    def submit(self, *, keep_going: bool = False, dry_run: bool = False) -> bool | str:
        """Split (if a splitter is set) and submit; see the user guide for keep_going.

        ``dry_run=True`` returns what would be sent to the backend (e.g. the batch
        scripts) and changes nothing."""
        job = self._live("submit()")
        if dry_run:
            return actions.preview(current_session(), job)
        if job.after or workflow.reads_outputs(job):  # it may wait for others
            return workflow.submit(current_session(), job, keep_going)
        if job.stored().get("splitter") is None:
            return actions.submit(current_session(), job, keep_going)
        # Splitting and bulk submission of thousands of subjobs takes seconds: say so.
        with show_progress(f"submitting job {job.fqid}") as bar:
            bar.update(0, None, "splitting, preparing and handing to the backend")
            result = actions.submit(current_session(), job, keep_going)
            # From the status counter: counting the tree would load every bucket of it
            # (17 s and 290 MB for a million subjobs, just written and let go).
            count = sum(job.counts().values())
            bar.update(count, count, f"{count} subjobs submitted")
        return result

    kill = resubmit_kill.kill  # j.kill(): the job, or those of a failure group run again
    resubmit = resubmit_kill.resubmit  # j.resubmit(): again, or one failure group

    @keyword_options
    def remove(self) -> bool:
        """Remove the job, its subjobs and its workspace (running ones are killed first)."""
        return actions.remove(current_session(), self._live("remove()"))

    @keyword_options
    def freeze(self) -> bool:
        """Settle a finished job or subjob: completed -> completed_frozen, failed or
        killed -> failed_frozen. A master's status and resubmit() ignore frozen subjobs."""
        return lifecycle.freeze(current_session(), self._live("freeze()"))

    @keyword_options
    def unfreeze(self) -> bool:
        """A frozen job or subjob back to the state it was frozen in."""
        return lifecycle.unfreeze(current_session(), self._live("unfreeze()"))

    @keyword_options
    def resplit(self, splitter: Any) -> bool:
        """Split this finished subjob again with ``splitter``: the pieces run as new
        subjobs of the same master (the next ids), and this subjob is frozen."""
        return lifecycle.resplit(current_session(), self._live("resplit()"), unwrap(splitter))

    @keyword_options
    def copy(self) -> Job:
        """A new job with the same description (also for a subjob: a new top-level job)."""
        return wrap(actions.copy_job(current_session(), self._job))  # type: ignore[no-any-return]

    @keyword_options
    def runPostProcessors(self) -> bool:
        """Run the job's postprocessors again now (mergers, then checkers); True when the
        job is completed afterwards."""
        session = current_session()
        session.sync()  # what the monitor recorded (completed, postprocessing under way)
        job = self._live("runPostProcessors()")
        return postprocessing.run_by_hand(session.repo, job, session.config)

    @keyword_options
    def force_status(self, status: str) -> bool:
        """Force the job to 'completed' or 'failed'."""
        return actions.force_status(current_session(), self._live("force_status()"), status)

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
        session = current_session()
        session.refresh()
        return results.result_of(self._live("result()"), session.submit_context().paths)

    # -- what may change ------------------------------------------------------------

    _rules_edits = True
    _compared_by_content = False  # two jobs are equal only when they are the same job

    def _check_edit_below(self, node: GPIObject, name: str) -> None:
        """Refuse to change what a submitted job ran with, at any depth below the job.

        A job that is not new, or that has subjobs, keeps its description: only attributes
        declared ``changeable_at_resubmit`` change, and only once the job reached a final
        state (a resubmission will use them); a job's own name and comment change at any
        time."""
        job = self._job
        impl = object.__getattribute__(node, "_impl")
        if job_removed(job):
            raise JobError(removed_message(job, f"changing {node._path_to(name)}"))
        trait = type(impl)._schema[name]
        status = job.current_status()
        # Inside a part that may change (``j.retry.attempts``, ``j.postprocessors[0].files``)
        # as the part itself may: changing it in place is replacing it.
        part = name if impl is job else _part_holding(node)
        part_trait = JobImpl._schema.get(part) if part else None
        if part in job_parts().always_changeable and (impl is job or job.master is None):
            return
        if job.master is not None:
            raise JobError(
                f"subjob {job.fqid} is {status}: {node._path_to(name)} can no longer "
                "be changed; copy() it to a new job"
            )
        if status is Status.NEW and not job.is_master:
            return
        if job.is_master and status is Status.NEW:
            # Part of it never ran, but its subjobs were made from this description.
            raise JobError(
                f"job {job.fqid} has subjobs: {node._path_to(name)} can no "
                "longer be changed; copy() the job to change it"
            )
        if status.final and (
            trait.metadata.get("changeable_at_resubmit")
            or (part_trait is not None and part_trait.metadata.get("changeable_at_resubmit"))
        ):
            return
        raise JobError(
            f"job {job.fqid} is {status}: {node._path_to(name)} can no longer "
            "be changed; copy() the job to change it"
        )

    def _changing_in(self) -> str:
        return f" of job {self._job.fqid}"

    def _assigned(self, name: str, old: Any) -> None:
        job = self._job
        if name == "name" and job._p_jar is not None:
            current_session().registry().rename(job, old)  # the name index follows

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


class SubjobSlice(JobSlice):
    """The subjobs of a master, read lazily from its subjob tree."""

    def __init__(self, master: JobImpl) -> None:
        self._master = master
        self._title = f"subjobs of job {master.id}"

    def _impls(self) -> list[JobImpl]:
        return list(self._master.iter_subjobs())

    def _stats_jobs(self) -> list[JobImpl]:
        return [self._master]  # its subjobs, as the master's stats and grid read them

    def stats(self) -> JobStats:
        """The master's stats: its subjobs, counted by its status counter."""
        current_session().refresh()
        return job_stats([self._master], self._title)

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
        for index in range(len(known)):
            yield subjob_proxy(master, index)

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


def subjob_proxy(master: JobImpl, index: int) -> Job:
    """The GPI object of subjob ``index`` of ``master``, its status read from the master's
    status chunks; the subjob itself is looked up only if more than its status is asked."""
    proxy = object.__new__(Job)
    _OWNER_SLOT.__set__(proxy, None)
    _AT_SLOT.__set__(proxy, (master, index))
    return proxy


def subjob_place(proxy: Job) -> tuple[JobImpl, int] | None:
    """(master, id) of a subjob's GPI object that was not loaded (see :func:`subjob_proxy`)."""
    try:
        _IMPL_SLOT.__get__(proxy, Job)
        return None
    except AttributeError:
        pass
    try:
        place: tuple[JobImpl, int] = object.__getattribute__(proxy, "_at")
    except AttributeError:
        return None
    return place


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


def unwrap_job(value: Any) -> JobImpl:
    impl = unwrap(value)
    if not isinstance(impl, JobImpl):
        raise JobError(f"not a job: {value!r}")
    return impl


def _part_holding(node: GPIObject) -> str | None:
    """The job's attribute ``node`` is in (``postprocessors`` for a merger in its list), or
    None when it is in no job."""
    while True:
        owner: GPIObject | None = object.__getattribute__(node, "_owner")
        if owner is None:
            return None
        owner_impl = object.__getattribute__(owner, "_impl")
        if isinstance(owner_impl, JobImpl):
            held = attribute_holding(owner_impl, object.__getattribute__(node, "_impl"))
            return held.split("[")[0] if held else None
        node = owner


def job_removed(job: JobImpl) -> bool:
    """Whether a job (or its master) is no longer in the repository: the GPI object of a
    removed job outlives it, and must neither show nor accept a live job's state."""
    top = job
    while top.master is not None:
        top = top.master
    if top._p_jar is None:
        return False  # never stored (an object being built): nothing to have removed
    return current_session().registry().get(top.id) is not top


def removed_message(job: JobImpl, what: str) -> str:
    return f"job {job.fqid} was removed: {what} is not possible; copy() it to make a new job"
