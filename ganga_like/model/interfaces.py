"""The contracts plugins implement: applications, backends, splitters, datasets, files and
postprocessors.

A plugin is a GangaObject subclass of one of these bases, registered under the
``ganga_like.plugins`` entry-point group. The runtime talks to plugins only through the
methods declared here, and passes them plain data (run specifications, fqids, paths), never
the session or the repository.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from traitlets.config import Configurable

from ganga_like.config.snapshot import ConfigSnapshot
from ganga_like.errors import BackendError, GangaError, JobError, PluginError
from ganga_like.model import plugin_registry
from ganga_like.model.active_refs import ActiveRef, ActiveRefs
from ganga_like.model.base import GangaObject
from ganga_like.model.job import Job
from ganga_like.model.plugin_objects import PluginObjects
from ganga_like.model.poller import Poller, Staged
from ganga_like.model.status import Status

__all__ = [
    "FAILURE_CAUSES",
    "POSTPROCESSOR_KINDS",
    "ActiveRef",
    "ActiveRefs",
    "IApplication",
    "IBackend",
    "IDataset",
    "IFile",
    "IPostProcessor",
    "IRetry",
    "ISplitter",
    "JobPaths",
    "PluginObjects",
    "PollContext",
    "Poller",
    "PostProcessContext",
    "RunSpec",
    "Staged",
    "StatusReport",
    "SubmitContext",
    "SubmitOutcome",
    "config_of",
    "current_submit_context",
    "growable_resources",
    "set_submit_context_source",
]

Kept = TypeVar("Kept")
AnyPoller = TypeVar("AnyPoller", bound=Poller)


def config_of(plugin: object, config: ConfigSnapshot) -> ConfigSnapshot:
    """The part of ``config`` a context handed to ``plugin`` (an instance or a class)
    holds: the sections the plugin declares in ``config_sections`` (classes it declared
    through the ``ganga_like.config`` entry points), nothing else."""
    cls = plugin if isinstance(plugin, type) else type(plugin)
    sections: tuple[type[Configurable], ...] = ()
    if issubclass(cls, (IBackend, IPostProcessor)):  # the plugins that declare sections
        sections = cls.config_sections
    return config.only(sections)


class _Configured:
    """What every context offers: the plugin's configuration sections, typed
    (``ctx.config[Local].max_concurrent``: those it names in ``config_sections`` and no
    other), and the objects it keeps for as long as the session lasts."""

    config: ConfigSnapshot
    plugin_objects: PluginObjects

    def kept(self, kind: type[Kept]) -> Kept:
        """The session's one ``kind()`` (a Dask client per scheduler...), made on first
        use and closed with the session (ganga_like.model.plugin_objects)."""
        return self.plugin_objects.of(kind)


@dataclass(frozen=True)
class JobPaths:
    """Where a (sub)job lives on disk: ``<gangadir>/workspace/<id>/[<subid>/]``.

    Kept as a string and turned into Paths on demand: it is built once per subjob on the
    submit path, where pathlib's cost shows."""

    location: str

    @property
    def root(self) -> Path:
        return Path(self.location)

    @property
    def input(self) -> Path:
        return Path(self.location, "input")

    @property
    def output(self) -> Path:
        return Path(self.location, "output")

    @property
    def work(self) -> Path:
        return Path(self.location, "work")


@dataclass(frozen=True)
class RunSpec:
    """What to execute for one (sub)job, as the application prepared it."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    inputs: tuple[str, ...] = ()  # absolute paths to put in the work directory
    output_patterns: tuple[str, ...] = ()  # glob patterns collected into the output dir
    # Words run in front of the program (and of its launcher): a program that starts it
    # and does what must happen where it runs, before and after it (remote file transfers).
    wrapper: tuple[str, ...] = ()


@dataclass(frozen=True)
class SubmitContext(_Configured):
    """What a backend needs to know to submit: where things go, its configuration
    sections as the session has them, and the few services of the runtime a plugin may use
    (it never imports the runtime)."""

    gangadir: Path
    workspace: Path
    config: ConfigSnapshot
    # The subjobs a splitter's variations make, built as submit() builds them (not stored).
    build_subjobs: Callable[[Job, list[dict[str, Any]]], list[Job]] | None = None
    # The stored top-level job whose backend is the given object (None: no such job).
    job_of_backend: Callable[[IBackend], Job | None] | None = None
    # The session's (a context made on its own, in a test, has its own).
    plugin_objects: PluginObjects = field(default_factory=PluginObjects)

    def paths(self, job: Job) -> JobPaths:
        master = job.master
        if master is None:
            return JobPaths(f"{self.workspace}/{job.id}")
        return JobPaths(f"{self.workspace}/{master.id}/{job.id}")


# Where a plugin method called without a context (``j.backend.preview()`` at the prompt)
# gets one: the runtime installs the source when it is imported.
_submit_context_source: Callable[[], SubmitContext] | None = None


def set_submit_context_source(source: Callable[[], SubmitContext] | None) -> None:
    """Make ``source()`` (a context holding every section) what
    :func:`current_submit_context` narrows to a plugin's (None: none)."""
    global _submit_context_source
    _submit_context_source = source


def current_submit_context(plugin: object) -> SubmitContext:
    """The submit context of the current session (opened on first use, as by the GPI),
    made for ``plugin``: it holds ``plugin``'s configuration sections."""
    if _submit_context_source is None:
        raise GangaError("no session to submit from: import ganga_like to start one")
    ctx = _submit_context_source()
    return replace(ctx, config=config_of(plugin, ctx.config))


@dataclass
class SubmitOutcome:
    """Per-(sub)job result of a bulk submission: fqid -> error message for failures."""

    failed: dict[str, str] = field(default_factory=dict)
    # Submission stopped early (keep_going=False): these fqids were never attempted.
    not_attempted: list[str] = field(default_factory=list)
    # True when the backend submitted in real bulk (one scheduler call for many subjobs):
    # subjobs it refused are then failed rather than left new (the splitting design).
    real_bulk: bool = False


@dataclass(frozen=True)
class StatusReport:
    """A backend's observation of one (sub)job."""

    fqid: str
    status: Status
    time: float
    reason: str = ""
    exit_code: int | None = None
    started: bool = True  # False: the program never ran (no running state invented)
    # When the program started, if the backend knows and the report is a later state: the
    # running state filled in on the way is dated with it.
    started_at: float | None = None
    # Why a failed job failed, machine-readable: one of FAILURE_CAUSES ("timeout": its
    # walltime ran out, "out_of_memory", "failed": anything else). Empty: "failed".
    cause: str = ""
    # What the run used, where the backend measured it (the Local runner's reap):
    # [peak resident memory in KiB, user CPU seconds, system CPU seconds].
    usage: Sequence[float] | None = None
    # The run's wall-clock seconds, where the backend measured them (else they are taken
    # from its running state to the report's time).
    wall: float | None = None
    # Only what an ended run used, read after its end was reported (Slurm's steps): it is
    # kept on a (sub)job still in that end and never changes a status, for the (sub)job
    # may have been retried or resubmitted since.
    usage_only: bool = False


@dataclass
class PollContext(_Configured):
    """What a backend's poll is given: where the jobs are, its configuration sections
    (the monitor puts a new snapshot in ``config`` when the configuration changes), and
    the backend's poller (what it keeps between cycles), which the monitor holds from cycle
    to cycle."""

    gangadir: Path
    workspace: Path
    config: ConfigSnapshot
    # Made by the monitor from the backend's ``poller_class`` before its first poll; a
    # context made by hand gets one on first use (:meth:`poller_as`).
    poller: Poller | None = None
    # The session's (a context made on its own, in a test, has its own).
    plugin_objects: PluginObjects = field(default_factory=PluginObjects)

    def poller_as(self, kind: type[AnyPoller]) -> AnyPoller:
        """The backend's poller, a ``kind``; made now if the context has none yet."""
        poller = self.poller
        if poller is None:
            poller = self.poller = kind()
        if not isinstance(poller, kind):
            raise PluginError(
                f"PollContext.poller: expected a {kind.__name__}, got {type(poller).__name__}"
            )
        return poller


class IApplication(GangaObject):
    """What a job runs."""

    _category = "applications"
    # True when the application leaves a return value for ``j.result()`` (read_result).
    has_result: ClassVar[bool] = False

    def check_before_submit(self) -> None:
        """Raise a GangaError when a job with this application cannot be submitted at all
        (checked before anything is changed); by default there is nothing to check."""

    def prepare(self, job: Job, paths: JobPaths) -> RunSpec:
        """The command for ``job``; raise ApplicationError-like GangaErrors when impossible."""
        raise NotImplementedError

    def write_inputs(self, job: Job, paths: JobPaths) -> None:
        """Write the files the application generates for ``job`` and names in the ``inputs``
        of its :meth:`prepare` spec (kept under ``paths.root`` but outside ``paths.input``,
        where the backend copies them). Called when the job is submitted, never for a
        preview; by default there is nothing to write."""

    def read_result(self, job: Job, paths: JobPaths) -> Any:
        """What the completed ``job`` returned (``j.result()``); by default an application
        returns nothing but its output files."""
        raise JobError(
            f"job {job.fqid}: {_with_article(type(self).__name__)} job has no result(); "
            "its output files are in its outputdir"
        )


def _with_article(noun: str) -> str:
    return f"{'an' if noun[:1] in 'AEIOUaeiou' else 'a'} {noun}"


class IBackend(GangaObject):
    """Where a job runs. Subclasses implement bulk submission, kill and a bulk poll."""

    _category = "backends"
    # The configuration sections the backend reads (``ctx.config[Section]``); its
    # contexts hold these and no other.
    config_sections: ClassVar[tuple[type[Configurable], ...]] = ()
    supports_real_bulk: ClassVar[bool] = False
    # ``per_job_state`` (GangaObject): False when the backend stores nothing per job, so
    # that subjobs share their master's backend object instead of each storing a copy.
    # Above zero: submit_bulk may be called on consecutive slices of one submission, and
    # the first call gets this many subjobs, so that they start while the rest is prepared.
    # Zero for backends whose bulk call must see everything at once (a job array).
    early_start_batch: ClassVar[int] = 0
    # The resources a retry may grow (Retry's ``grow``), e.g. {"memory", "walltime"}.
    growable: ClassVar[frozenset[str]] = frozenset()
    # What the backend keeps between monitor cycles (ganga_like.model.poller): the monitor
    # makes one per backend class and hands it to every poll as ``ctx.poller``.
    poller_class: ClassVar[type[Poller]] = Poller

    def __getnewargs__(self) -> tuple[()]:
        # Having this method makes ZODB store references to backends as bare oids instead
        # of oid plus module and class name: every subjob record refers to its backend.
        return ()

    def submit_bulk(
        self,
        ctx: SubmitContext,
        jobs: Sequence[tuple[Job, RunSpec]],
        keep_going: bool,
    ) -> SubmitOutcome:
        """Submit every job, honouring ``keep_going`` as the splitting design says."""
        raise NotImplementedError

    def preview_bulk(self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]]) -> object:
        """What submit_bulk would send (scripts, commands), as text; no side effect."""
        raise BackendError(f"the {type(self).__name__} backend has no dry run")

    def kill_bulk(self, ctx: SubmitContext, jobs: Sequence[Job]) -> dict[str, str]:
        """Kill the jobs; return fqid -> error message for those that could not be killed."""
        raise NotImplementedError

    def kill_subjobs(
        self, ctx: SubmitContext, master: Job, ids: Sequence[int], every_active: bool
    ) -> dict[str, str]:
        """Kill subjobs ``ids`` of ``master`` (``every_active``: they are all its subjobs
        still queued or running), as :meth:`kill_bulk`. This loads them and calls
        :meth:`kill_bulk`; a backend that can name them without loading them (a prefix
        of their keys) does so."""
        return self.kill_bulk(ctx, [master.subjob(index) for index in ids])

    def monitor_data(self, job: Job) -> Mapping[str, Any]:
        """What the poll needs to know about ``job`` (e.g. the scheduler's id)."""
        return {}

    def requested(self) -> Mapping[str, float]:
        """What each (sub)job run asks of the machine, for the stats to set against what
        it used: any of "memory" (bytes), "walltime" (seconds) and "cores"; empty for a
        backend that asks for nothing in particular."""
        return {}

    def grow(self, factors: Mapping[str, float]) -> list[str]:
        """Multiply the named resources (a subset of ``growable``) by their factors, in
        place, before a retry; return one line per change (``"resources.walltime 0:01:00
        -> 0:02:00"``). Backends without such resources ignore it."""
        return []

    def set_resources(self, values: Mapping[str, Any]) -> list[str]:
        """Set the named resources (a subset of ``growable``) to ``values`` as the user
        gives them ("4G", "2:00:00"), in place, before a resubmission; return one line per
        change, as :meth:`grow`. A SchemaError for a bad value, with nothing changed."""
        return []

    @classmethod
    def failure_cause(cls, reason: str) -> str:
        """The cause (one of FAILURE_CAUSES) of a failure the backend gave ``reason`` for
        (the last line of what it said, e.g. "walltime exceeded"); "failed" when none in
        particular: the stats group failures by it, and a group's resubmission grows what
        its cause needs."""
        return "failed"

    def received_bulk(self, ctx: SubmitContext, jobs: Sequence[Job]) -> set[str] | None:
        """For the recovery of a submission a crash interrupted: the fqids of ``jobs`` this
        backend had received (queued, running or ended), or None when it cannot tell.

        Received jobs are then recorded as submitted and followed, so that what ran is
        recorded and never run again; without an answer the submission is rolled back
        and everything under its keys cancelled."""
        return None

    @classmethod
    def poll(cls, ctx: PollContext, refs: Sequence[ActiveRef]) -> list[StatusReport]:
        """One bulk status query for all ``refs``; raise BackendError(transient=True) when the
        backend cannot be reached (the jobs then stay as they are).

        The monitor passes an :class:`ActiveRefs`, the same object from cycle to cycle: a
        poll that runs every cycle should cost what changed (``refs.changes_since``), not
        walk every ref. Tests may pass a plain sequence."""
        raise BackendError(f"{cls.__name__} cannot be polled", transient=False)


class ISplitter(GangaObject):
    """How a job becomes subjobs."""

    _category = "splitters"

    def variations(self, job: Job) -> list[dict[str, Any]]:
        """One dict per subjob: dotted attribute path -> value, e.g.
        ``{"application.args": ["1"]}``. An empty list is an impossible split."""
        raise NotImplementedError

    def iter_variations(self, job: Job) -> Iterator[dict[str, Any]]:
        """The variations one at a time, as ``variations`` gives them: a splitter that can
        make them as they are needed overrides it, so that a split into a million
        subjobs never holds a million of them."""
        return iter(self.variations(job))


class IDataset(GangaObject):
    """Data a job processes."""

    _category = "datasets"

    def file_names(self) -> list[str]:
        raise NotImplementedError

    def files_to_copy(self) -> list[str]:
        """Those of ``file_names()`` to copy next to the program too; by default none
        (the program finds them all through ``$GANGA_INPUTDATA``)."""
        return []

    def remote_files(self) -> list[IFile]:
        """The entries the run fetches itself, where it runs (``IFile.remote``)."""
        return []


class IFile(GangaObject):
    """A file travelling with a job.

    A *remote* kind of file (``remote = True``, a URL on storage elsewhere) is neither
    checked nor copied at submission: its class wraps the run (``wrap_run``) in a program
    that fetches and uploads such files where the run happens, and a completed run's
    destinations are recorded in the (sub)job (``recorded``)."""

    _category = "files"
    remote: ClassVar[bool] = False

    def input_path(self) -> str:
        """Absolute path of the file to copy in (as input); for a remote kind, the path
        relative to the work directory it is fetched to."""
        raise NotImplementedError

    def output_pattern(self) -> str:
        """Name or glob pattern to collect (as output)."""
        raise NotImplementedError

    @classmethod
    def wrap_run(
        cls, job: Job, spec: RunSpec, inputs: Sequence[IFile], outputs: Sequence[IFile]
    ) -> RunSpec:
        """For a remote kind: ``spec`` with the transfers of ``inputs`` (the job's input
        files and dataset entries of this kind) and ``outputs`` done around its program."""
        raise NotImplementedError

    def recorded(self, job: Job, output_dir: str) -> IFile:
        """This output file as the completed run of ``job`` left it (its destinations
        filled in, read from ``output_dir``); by default itself."""
        return self


# Ganga's order: every merger, then every checker, then every notifier.
POSTPROCESSOR_KINDS = ("merger", "checker", "notifier")


@dataclass(frozen=True)
class PostProcessContext(_Configured):
    """What a postprocessor is given: where jobs live on disk, which outputs it may
    replace although ``overwrite`` is off (those the job's own postprocessing wrote before;
    all of them when an interrupted run is resumed), and its configuration sections
    (``ctx.config[Notifier].host``)."""

    workspace: Path
    written: frozenset[str] = frozenset()
    resumed: bool = False
    # The metadata read at completion (fqid -> dict), before it is stored in the jobs.
    metadata: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    config: ConfigSnapshot = field(default_factory=lambda: ConfigSnapshot({}))
    plugin_objects: PluginObjects = field(default_factory=PluginObjects)

    def paths(self, job: Job) -> JobPaths:
        master = job.master
        if master is None:
            return JobPaths(f"{self.workspace}/{job.id}")
        return JobPaths(f"{self.workspace}/{master.id}/{job.id}")

    def may_replace(self, path: str) -> bool:
        return self.resumed or path in self.written

    def metadata_of(self, job: Job) -> Mapping[str, Any]:
        found = self.metadata.get(job.fqid)
        return found if found is not None else dict(job.metadata)


class IPostProcessor(GangaObject):
    """Work done once a job has completed, in Ganga's order by ``kind``: mergers (combine
    the subjobs' outputs in the master's output directory), checkers (fail the (sub)jobs
    whose output is wrong), notifiers.

    A merger implements :meth:`merge`; a checker implements :meth:`check`, called for each
    subjob (or the job itself when it was not split)."""

    _category = "postprocessors"
    kind: ClassVar[str] = ""  # one of POSTPROCESSOR_KINDS
    # The configuration sections the postprocessor reads (``ctx.config[Section]``).
    config_sections: ClassVar[tuple[type[Configurable], ...]] = ()
    per_job_state = False

    def check_before_submit(self) -> None:
        """Raise a GangaError when what the postprocessor needs is gone (checked before a
        job with it is submitted); by default there is nothing to check."""

    def merge(self, master: Job, subjobs: Sequence[Job], ctx: PostProcessContext) -> list[str]:
        """Merge; return the paths written. Raise PostProcessError saying why it failed."""
        raise NotImplementedError

    def check(self, job: Job, ctx: PostProcessContext) -> str | None:
        """None when ``job`` passes; else why it fails (one line). Raising PostProcessError
        counts as failing with its message."""
        raise NotImplementedError

    def check_targets(self, job: Job) -> list[Job]:
        """The jobs a checker's :meth:`check` is called for, once ``job`` (a top-level job)
        has completed and its mergers have run: by default each subjob, or the job itself
        when it was not split."""
        return list(job.iter_subjobs()) if job.is_master else [job]

    def notify(self, job: Job, ctx: PostProcessContext) -> list[str]:
        """A notifier: tell of ``job`` (ended, its other postprocessors done); return one
        line for each notification that could not be given (kept in the job's event log)."""
        raise NotImplementedError


# Why a job failed, as the monitor is told (StatusReport.cause) and Retry's ``on`` names it.
FAILURE_CAUSES = ("failed", "timeout", "out_of_memory")


def growable_resources() -> frozenset[str]:
    """The resource names some installed backend can grow on a retry."""
    names: set[str] = set()
    for name in plugin_registry.available("backends"):
        try:
            cls = plugin_registry.find(name, "backends")
        except PluginError:
            continue
        if isinstance(cls, type) and issubclass(cls, IBackend):
            names |= cls.growable
    return frozenset(names)


class IRetry(GangaObject):
    """When the monitor resubmits a (sub)job that failed, and what it grows first."""

    _category = "retries"
    per_job_state = False

    def wants(self, cause: str, done: int) -> bool:
        """Whether a (sub)job that failed for ``cause`` after ``done`` retries since its
        last submission by the user is retried once more."""
        raise NotImplementedError

    def limit(self) -> int:
        """How many retries at most (for the event log)."""
        raise NotImplementedError

    def factors(self) -> dict[str, float]:
        """Resource name -> factor, applied by backends that have the resource."""
        raise NotImplementedError
