"""The Job: what to run (application), where (backend), how to split it, and what happened.

A master job keeps its subjobs in its own IOBTree (ids 0..N-1) and a StatusCounter; its
status is derived from the counter when read, never stored. A subjob holds a reference to its
master. Status changes go through :meth:`Job.change_status`, which consults the one
transition table, appends to the event log and keeps the master's counter right.
"""

from __future__ import annotations

import time as _time
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import traitlets
from BTrees.IOBTree import IOBTree
from persistent import Persistent

from ganga_like.errors import JobError
from ganga_like.model.base import Component, ComponentList, GangaObject
from ganga_like.model.bulk_kill import KilledInBulkView
from ganga_like.model.callbacks import Reacting, note_status
from ganga_like.model.counter import StatusCounter
from ganga_like.model.dependencies import workflow_schema
from ganga_like.model.history import Entry, HistoryChunk, align_moved_history, make_entry, spill
from ganga_like.model.periods import MasterPeriod, job_timeline
from ganga_like.model.resources import ResourceUse, stored_use, use_from_stored
from ganga_like.model.status import Status, check_transition, freezing
from ganga_like.model.status_column import (
    StatusChunk,
    StatusColumn,
    all_statuses,
    extend_chunks,
    status_of,
)
from ganga_like.model.stream import Stream, streamed
from ganga_like.model.subjob_builder import SubjobsBuilder
from ganga_like.model.text import Text
from ganga_like.model.times import ROUND_ENDS, JobTimes, end_of_run

__all__ = ["Job"]


class Job(KilledInBulkView, GangaObject, Reacting):
    """A unit of work; split, it becomes a master of subjobs."""

    _category = "jobs"
    # Subjob attributes first (the records written by the thousand). Append-only.
    _state_fields = (
        "id",
        "_master",
        "submit_count",
        "application",
        "backend",
        "status",
        "history",
        "exit_code",
        "name",
        "comment",
        "splitter",
        "inputdata",
        "inputfiles",
        "outputfiles",
        "_subjobs",
        "_counter",
        "_described",
        "postprocessors",
        "metadata",
        "_postprocessing",
        "_created",
        "_history_older",
        "_history_moved",
        "_used",
    )
    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "id": traitlets.Int(
            -1, help="Job id: unique in the repository, or in the master for a subjob."
        ).tag(protected=True, copyable=False),
        "name": Text(what="a name", help="A name of your choice.").tag(
            changeable_at_resubmit=True, always_changeable=True, subjob="share"
        ),
        "comment": traitlets.Unicode("", help="A free-text comment.").tag(
            changeable_at_resubmit=True, always_changeable=True, subjob="share"
        ),
        "status": traitlets.Unicode(
            "new", help="Current status (read-only; a master's is derived from its subjobs)."
        ).tag(protected=True, copyable=False),
        # The parts: plugin objects (see ganga_like.model.parts for the tags).
        "application": Component(
            "applications",
            default="Executable",
            help="What to run, e.g. Executable(exe=..., args=[...]).",
        ).tag(required=True, column=True, subjob="copy"),
        "backend": Component(
            "backends", default="Local", help="Where to run it, e.g. Local() or 'Local'."
        ).tag(required=True, column=True, subjob="copy"),
        "splitter": Component(
            "splitters", help="How to split the job into subjobs (None: no split)."
        ),
        "inputdata": Component(
            "datasets", help="The dataset to process, e.g. GangaDataset(files=[...])."
        ).tag(subjob="share"),
        "inputfiles": ComponentList(
            "files", help="Files copied into each (sub)job's input directory before it runs."
        ).tag(subjob="share"),
        "outputfiles": ComponentList(
            "files",
            help="Names or glob patterns collected into the output directory when the job ends.",
        ).tag(subjob="share"),
        "postprocessors": ComponentList(
            "postprocessors",
            help="Run once the job has completed: mergers, then checkers, e.g. "
            "[TextMerger(files=['stdout'])].",
        ).tag(changeable_at_resubmit=True),
        "retry": Component(
            "retries",
            help="Resubmit (sub)jobs that fail, e.g. Retry(attempts=3, on=['timeout'], "
            "grow={'walltime': 2.0}); None: never.",
        ).tag(changeable_at_resubmit=True, always_changeable=True),
        "metadata": traitlets.Dict(
            help="What the program wrote to __metadata__.json in its output (read when the "
            "job completes)."
        ).tag(protected=True, copyable=False, searchable=False),
        "history": traitlets.List(help="The event log: time, old status, new status, cause.").tag(
            protected=True, copyable=False, hidden=True, searchable=False
        ),
        "exit_code": traitlets.Int(
            None, allow_none=True, help="Exit code of the program (None until it ended)."
        ).tag(protected=True, copyable=False),
        "submit_count": traitlets.Int(0, help="How many times the job was submitted.").tag(
            protected=True, copyable=False, hidden=True
        ),
        # What the job waits for, and its workflow (docs/workflows.md).
        **workflow_schema(),
    }
    _append_only = frozenset({"history"})

    # Types of the schema attributes, for the type checker (values live in the instance
    # dict, or come from the schema defaults when never set).
    id: int
    name: str
    comment: str
    application: Any
    backend: Any
    splitter: Any
    inputdata: Any
    inputfiles: tuple[Any, ...]
    outputfiles: tuple[Any, ...]
    postprocessors: tuple[Any, ...]
    retry: Any
    metadata: dict[str, Any]
    exit_code: int | None
    submit_count: int
    after: tuple[str, ...]
    when: str
    allow_failed: int | float
    workflow: str

    # Non-schema persistent state (class defaults keep records small).
    _master: Job | None = None
    _subjobs: IOBTree | None = None
    _counter: StatusCounter | None = None
    # Every subjob's status label by id, in chunks (model.status_column); None for a
    # master stored before they were kept.
    _status_chunks: tuple[StatusChunk, ...] | None = None
    # The editable description at the last submission, to log what a resubmit changed.
    _described: dict[str, str] | None = None
    # Postprocessing of the current run (see ganga_like.runtime.postprocessing): None, or
    # (state, attempts, reason, written paths) with state "pending", "done" or "failed".
    _postprocessing: tuple[str, int, str, tuple[str, ...]] | None = None
    # When the job was created (unix time); None for a subjob (made by its submission, so
    # its first logged change says when) and for jobs stored before this was recorded.
    _created: float | None = None
    # The older part of a long event log (model.history): the newest of its chunks, and
    # how many entries they hold; the record keeps the recent ones under "history".
    _history_older: HistoryChunk | None = None
    _history_moved: int = 0
    # Why a job waiting for others was skipped: the upstream job that decided it, and the
    # root failure ("upstream 12.4 failed (exit 3)"), which its own dependents inherit.
    _skipped_by: tuple[str, str] | None = None
    # Upstream jobs killed with dependents="keep": until they run again, this job waits
    # for their resubmission instead of being skipped for them (runtime.workflow.engine).
    _kept_for: tuple[int, ...] = ()
    # What the current run used, once ended and measured (model.resources); a new run forgets it.
    _used: tuple[int, float, float, float] | None = None
    _stream: Stream | None = None  # a streaming map's record of what it read (model.stream)
    # Held waiting for room in its throttled workflow (ganga_like.runtime.workflow.throttle).
    _held: bool = False

    def __init__(self, **attributes: Any) -> None:
        super().__init__(**attributes)
        self._created = _time.time()

    def _copy(self) -> Job:
        clone = super()._copy()
        assert isinstance(clone, Job)
        clone._created = _time.time()  # a copy is a new job
        return clone

    # -- the event log ---------------------------------------------------------------

    @property
    def history(self) -> tuple[Entry, ...]:
        """The event log, oldest entry first: the older chunks' entries, then the recent
        ones this record holds."""
        recent: tuple[Entry, ...] = self.stored().get("history", ())
        killed = self._bulk_kill()
        if killed is not None:  # not written into its record yet (model.bulk_kill)
            stored = self.__dict__.get("status", "new")
            recent = (*recent, make_entry(killed[0], stored, Status.KILLED.label, killed[1]))
        older = self._history_older
        return recent if older is None else (*older.all_entries(), *recent)

    @history.setter
    def history(self, entries: tuple[Entry, ...]) -> None:
        # The whole log, as read: the entries already in chunks are not written again.
        self._keep_recent(tuple(entries)[self._history_moved :])

    def _log(self, entry: Entry) -> None:
        """Append ``entry`` to the event log, rewriting only its recent part."""
        self._write_bulk_kill()  # its kill first, in order
        self._keep_recent((*self.stored().get("history", ()), entry))
        if entry[1] != entry[2] and (self._callbacks or self._iteration_of is not None):
            note_status(self, entry[2])

    def _keep_recent(self, recent: tuple[Entry, ...]) -> None:
        recent, older, moved = spill(recent, self._history_older)
        if moved:
            self._history_older = older
            self._history_moved += moved
        self.stored()["history"] = recent
        self._p_changed = True

    def _merge_states(
        self, old: dict[str, Any], committed: dict[str, Any], new: dict[str, Any]
    ) -> dict[str, Any]:
        """As every object's, with a log that one side moved partly into chunks: the
        other side's appended entries follow what that side left in the record."""
        old, committed, new = align_moved_history(old, committed, new)
        return super()._merge_states(old, committed, new)

    # -- identity --------------------------------------------------------------------

    @property
    def master(self) -> Job | None:
        return self._master

    @property
    def fqid(self) -> str:
        """ "12" for a top-level job, "12.3" for subjob 3 of job 12."""
        master = self._master
        return f"{master.id}.{self.id}" if master is not None else str(self.id)

    @property
    def ids(self) -> tuple[int, int | None]:
        master = self._master
        return (master.id, self.id) if master is not None else (self.id, None)

    # -- status ----------------------------------------------------------------------

    def current_status(self) -> Status:
        """The job's status; a master's derives from its subjob counts (O(1))."""
        stored = Status.parse(self.status)
        counter = self._counter
        if self._iterate is not None and self._iterate[3] and stored.final:
            return Status.RUNNING  # an Iterate's first job: its next iteration is to come
        if counter is None or stored is Status.SUBMITTING or not self._subjobs:
            return stored
        derived = streamed(self._stream, counter.derived_status())
        if derived is Status.COMPLETED and self.postprocessing_failed():
            return Status.FAILED  # a merger failed: the master's own result is wrong
        return derived

    def postprocessing_pending(self) -> bool:
        """Completed, and its postprocessors still to run (or running)."""
        state = self._postprocessing
        return state is not None and state[0] == "pending"

    def postprocessing_failed(self) -> bool:
        state = self._postprocessing
        return state is not None and state[0] == "failed"

    def forget_postprocessing_failure(self, cause: str) -> None:
        """A master whose merger failed is completed again (``force_status``)."""
        state = self._postprocessing
        if state is not None and state[0] == "failed":
            before = self.current_status().label
            self._postprocessing = ("done", state[1], "", state[3])
            after = self.current_status().label
            self._log(make_entry(_time.time(), before, after, cause))

    def fail_postprocessing(self, reason: str, written: tuple[str, ...] = ()) -> None:
        """Postprocessing of the completed job failed: it is failed, the log says why."""
        state = self._postprocessing
        attempts = state[1] if state is not None else 0
        cause = f"postprocessing failed: {reason}"
        if self._subjobs:
            before = self.current_status().label
            self._postprocessing = ("failed", attempts, reason, written)
            self._log(make_entry(_time.time(), before, "failed", cause))
        else:
            self._postprocessing = ("failed", attempts, reason, written)
            self.change_status(Status.FAILED, cause)

    def change_status(self, new: Status, cause: str, when: float | None = None) -> None:
        """Move to ``new`` if the transition table allows it; log it; update the master."""
        self._write_bulk_kill()
        old = Status.parse(self.status)
        if old is new:
            return
        check_transition(old, new)
        if new is Status.SUBMITTING:
            self._forget_postprocessing()
            if self._used is not None:
                del self._used  # back to the class default: not stored
        when = _time.time() if when is None else when
        self.status = new.label
        self._log(make_entry(when, old.label, new.label, cause))
        master = self._master
        if master is not None and master._counter is not None:
            master._counter.move(old, new)
            chunks = master._status_chunks
            if chunks is not None:
                master._counter.note_status(chunks, self.id, new.label)
            # A run ends once: leaving one final state for another (freezing, forcing)
            # adds no running time.
            if new.final and not old.final and old is not Status.SUBMITTING:
                started = self.time.get(Status.RUNNING.label)
                if started is not None and when > started:
                    master._counter.run_seconds += when - started

    def _forget_postprocessing(self) -> None:
        # A new run is postprocessed afresh once it completes (what was written is kept,
        # so that its mergers may replace their own earlier output).
        for job in (self, self._master):
            state = job._postprocessing if job is not None else None
            if job is not None and state is not None and state[0] != "pending":
                job._postprocessing = ("", 0, "", state[3])

    def freeze(self, cause: str = "user: freeze") -> None:
        """Completed -> completed_frozen, failed or killed -> failed_frozen."""
        status = Status.parse(self.status)
        if self._subjobs:
            raise JobError(f"job {self.fqid} is a master: freeze its subjobs, not the master")
        if status.frozen:
            raise JobError(f"job {self.fqid} is {status} already")
        frozen = freezing(status)
        if frozen is None:
            raise JobError(
                f"job {self.fqid} is {status}: only a completed, failed or killed job can be frozen"
            )
        if self.postprocessing_pending():
            raise JobError(f"job {self.fqid}: its postprocessing is under way; freeze it after")
        self.change_status(frozen, cause)

    def unfreeze(self, cause: str = "user: unfreeze") -> None:
        """A frozen job goes back to the state it was frozen in."""
        status = Status.parse(self.status)
        if self._subjobs:
            # Its own stored status is not what it shows (that is derived): name the rule.
            raise JobError(f"job {self.fqid} is a master: unfreeze its subjobs, not the master")
        if not status.frozen:
            raise JobError(f"job {self.fqid} is {status}: only a frozen job can be unfrozen")
        self.change_status(self.frozen_from(), cause)

    def frozen_from(self) -> Status:
        """The state a frozen job was frozen in (its log says; killed or failed for
        failed_frozen)."""
        status = Status.parse(self.status)
        for _when, old, new, _cause in reversed(self.history):
            if new == status.label and old != new:
                return Status.parse(old)
        return Status.COMPLETED if status is Status.COMPLETED_FROZEN else Status.FAILED

    @property
    def time(self) -> dict[str, float]:
        """When each status was last reached (unix time by status name), from the log;
        ``new`` is when the job was created (a subjob: when its submission made it).
        Every round's latest arrival, as the search reads them;
        ``j.time`` is ``times()``: the current round, in order."""
        history = self.history
        created = self._created_at()
        times = {} if created is None else {Status.NEW.label: created}
        for when, old, new, _cause in history:
            if old != new and new != Status.NEW.label:
                times[new] = when
        return times

    def _created_at(self) -> float | None:
        """When it was created: recorded, or (a subjob) its first logged change."""
        created = self._created
        if created is None:
            history = self.history
            if history:
                created = history[0][0]
        return created

    def times(self) -> JobTimes:
        """The times of its states (``j.time`` in the GPI): those of its current round,
        in order (ganga_like.model.periods); a master's come from its subjobs too, which
        are read, and add the first and last time of each state over what each subjob
        shows."""
        if not self._subjobs:
            timeline = job_timeline(self.history, self._created_at(), self.status)
            end = next((timeline[label] for label in ROUND_ENDS if label in timeline), None)
            return JobTimes(
                self.fqid,
                timeline,
                queued=timeline.get(Status.SUBMITTED.label),
                started=timeline.get(Status.RUNNING.label),
                ended=end,
            )
        period = MasterPeriod(self.history)
        # Each state's first and last time over what each subjob shows (its own round).
        firsts: dict[str, float] = {}
        lasts: dict[str, float] = {}
        for sj in self.iter_subjobs():
            history = sj.history
            created = sj._created  # as _created_at(), read once per subjob
            if created is None and history:
                created = history[0][0]
            for label, when in job_timeline(history, created, sj.status).items():
                first = firsts.get(label)
                if first is None:
                    firsts[label] = lasts[label] = when
                elif when < first:
                    firsts[label] = when
                elif when > lasts[label]:
                    lasts[label] = when
            period.add_subjob(history)
        ranges = {label: (first, lasts[label]) for label, first in firsts.items()}
        final = self._round_end_label(self.current_status())
        timeline = period.stamps(self._created_at(), final)
        return JobTimes(
            self.fqid,
            timeline,
            queued=timeline.get(Status.SUBMITTED.label),
            started=timeline.get(Status.RUNNING.label),
            ended=timeline.get(final) if final is not None else None,
            subjobs=ranges,
            subjob_count=self.subjob_count(),
        )

    def own_timeline(self) -> dict[str, float]:
        """The times a job's tree shows, reading no subjob: a master's current period as
        its own log has it (when it was derived submitted, running and ended, a monitor
        cycle after its subjobs; ``times()`` has the subjobs' own times), in order; any
        other job's current round, as ``times()`` shows it."""
        if not self._subjobs:
            return job_timeline(self.history, self._created_at(), self.status)
        final = self._round_end_label(self.current_status())
        return MasterPeriod(self.history).stamps(self.time.get(Status.NEW.label), final)

    def _round_end_label(self, status: Status) -> str | None:
        """The round-ending state ``status`` stands for: itself, or the one a frozen job
        was frozen in; None while the job is not final."""
        if status.frozen:
            return self.frozen_from().label
        return status.label if status.label in ROUND_ENDS else None

    def log_event(self, cause: str, when: float | None = None) -> None:
        """An event-log entry that is not a status change (a master's resubmit, a kill...)."""
        when = _time.time() if when is None else when
        label = self.current_status().label
        self._log(make_entry(when, label, label, cause))

    # -- as the registry lists it (ganga_like.repository.stored) -----------------------

    def index_label(self) -> str | None:
        """The status a top-level job is listed under; None for a subjob (not listed)."""
        if self._master is not None:
            return None
        return self.current_status().label

    def indexed_as(self, label: str) -> None:
        """The registry now lists this job under ``label``.

        A master's status is derived, never set: its changes are noticed here, when the
        registry reindexes it after its subjobs changed, and logged so that its history
        and ``time`` show them too."""
        if not self._subjobs:
            return  # any other job logged its change when its status was set
        recent = self.stored().get("history", ())  # the last entry is always among them
        if recent and recent[-1][2] != label:
            self._log(make_entry(_time.time(), recent[-1][2], label, "derived from its subjobs"))

    # -- subjobs ---------------------------------------------------------------------

    @property
    def is_master(self) -> bool:
        return bool(self._subjobs)

    def subjob_count(self) -> int:
        subjobs = self._subjobs
        return len(subjobs) if subjobs else 0

    def subjob(self, index: int) -> Job:
        subjobs = self._subjobs
        if not subjobs or index not in subjobs:
            raise JobError(f"job {self.fqid} has no subjob {index}")
        result: Job = subjobs[index]
        return result

    def find_subjob(self, index: int) -> Job | None:
        """The subjob ``index``, or None (no such subjob, or not a master)."""
        subjobs = self._subjobs
        found: Job | None = subjobs.get(index) if subjobs else None
        return found

    def iter_subjobs(self) -> Iterator[Job]:
        subjobs = self._subjobs
        if subjobs:
            yield from subjobs.values()

    def subjob_items(self) -> Iterator[tuple[int, Job]]:
        """(id, subjob) pairs; the subjobs are not loaded until used."""
        subjobs = self._subjobs
        if subjobs:
            yield from subjobs.items()

    def subjob_ids(self) -> list[int]:
        """The subjobs' ids, without loading any."""
        subjobs = self._subjobs
        return list(subjobs.keys()) if subjobs else []

    def attach_subjobs(self, subjobs: list[Job]) -> None:
        """Make ``subjobs`` (built by the splitter, ids 0..N-1) the subjobs of this master."""
        builder = SubjobsBuilder()
        builder.add(subjobs)
        self.take_subjobs(builder)

    def take_subjobs(self, builder: SubjobsBuilder) -> None:
        """Make the subjobs ``builder`` collected the subjobs of this master."""
        self._subjobs, self._counter, self._status_chunks = builder.structures()

    def add_subjobs(self, subjobs: list[Job]) -> None:
        """Append ``subjobs`` (new, ids following this master's last) to its subjobs."""
        tree, counter = self._subjobs, self._counter
        if tree is None or counter is None:
            raise JobError(f"job {self.fqid} has no subjobs to add to")
        for sj in subjobs:
            tree[sj.id] = sj
            counter.add(Status.parse(sj.status), 1)
        chunks = self._status_chunks
        if chunks is not None and subjobs:
            labels = [sj.status for sj in subjobs]
            self._status_chunks = extend_chunks(chunks, subjobs[0].id, labels)

    def subjob_status(self, index: int) -> str | None:
        """Subjob ``index``'s status label without loading it; None if not known so."""
        column = self.status_chunks()
        return status_of(column, index) if column is not None else None

    def status_chunks(self) -> StatusColumn | None:
        """The chunks with the changes not written into them yet (model.status_column),
        for ``status_of``; or None."""
        chunks, counter = self._status_chunks, self._counter
        if chunks is None or counter is None:
            return None
        return counter.column(chunks)

    def subjob_statuses(self) -> list[str] | None:
        """Every subjob's status label by id, without loading any; None if not known so."""
        column = self.status_chunks()
        return all_statuses(column) if column is not None else None

    def run_seconds(self) -> float:
        """Seconds spent running: of the job itself, or summed over a master's subjobs."""
        counter = self._counter
        if counter is not None and self._subjobs:
            return float(counter.run_seconds)
        times = self.time
        started, status = times.get(Status.RUNNING.label), Status.parse(self.status)
        if started is None:
            return 0.0
        end = end_of_run(times) if status.final else _time.time()
        return max(0.0, (end or started) - started)

    def resources_used(self) -> ResourceUse | None:
        """What its current run used, once ended and measured (model.resources)."""
        return use_from_stored(self._used)

    def record_use(self, usage: Sequence[float], start: float | None, end: float) -> None:
        """Keep what the run from ``start`` to ``end`` used (a backend's measurement)."""
        self._used = stored_use(usage, start, end) or self._used  # damaged: kept as it was

    def counts(self) -> dict[Status, int]:
        counter = self._counter
        return counter.by_status() if counter is not None and self._subjobs else {}

    @classmethod
    def new_subjob(cls, master: Job, index: int) -> Job:
        """A subjob skeleton: fast path with no validation (the splitter validated)."""
        sj = cls.__new__(cls)
        Persistent.__init__(sj)
        d = sj.__dict__
        d["id"] = index
        d["_master"] = master
        return sj
