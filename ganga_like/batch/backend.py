"""``BatchBackend``: submission, kill and poll of a batch backend, over a
:class:`~.scheduler.BatchScheduler` and a few hooks of the backend class."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from ganga_like.errors import BackendError, JobError
from ganga_like.model.interfaces import (
    ActiveRef,
    IBackend,
    PollContext,
    RunSpec,
    StatusReport,
    SubmitContext,
    SubmitOutcome,
    current_submit_context,
)
from ganga_like.model.job import Job
from ganga_like.model.status import Status
from ganga_like.model.stop_points import stop_point
from ganga_like.model.workspace import run_spec

from . import polling
from .command_retry import RetrySettings
from .planning import Batch, Member, compress
from .records import (
    HandOver,
    handed_over,
    handover_key,
    keep_handover,
    log_submission,
    logged_outcomes,
    prepare_workspace,
    unconfirmed_submissions,
)
from .scheduler import BatchScheduler
from .scheduler_commands import CommandError
from .script import read_missing_output
from .tracker import Observation

__all__ = ["BatchBackend", "BatchSettings", "ScriptPreview"]

AnyBatch = Batch[Any, Any]
AnyMember = Member[Any]


class BatchSettings(RetrySettings, polling.PollSettings, Protocol):
    """The waits and limits the base reads (a backend's settings object has more)."""


class ScriptPreview(str):
    """The text :meth:`BatchBackend.preview` returns; it displays as itself, not as a
    quoted string, at the prompt."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


# A crash between the start of a submission and its recording leaves (sub)jobs in these
# statuses with no scheduler id stored.
_UNRECORDED = (Status.NEW, Status.SUBMITTING)


class BatchBackend(IBackend):
    """Base of the batch backends. A subclass declares an ``id`` attribute in its schema
    (protected; the scheduler's id of the job or array element, a master's arrays joined
    by commas), sets :attr:`scheduler`, and implements the hooks below."""

    supports_real_bulk = True
    per_job_state = True  # each (sub)job keeps its own scheduler id
    _exported_methods = ("preview",)
    scheduler: ClassVar[BatchScheduler]
    # What the poll keeps between cycles: a subclass that keeps more extends it.
    poller_class: ClassVar[type[polling.BatchPoller]] = polling.BatchPoller

    id: str

    # -- hooks -------------------------------------------------------------------------

    @classmethod
    def batch_settings(cls, ctx: SubmitContext | PollContext) -> BatchSettings:
        """The backend's waits and limits, typically its configuration section
        (``ctx.config[Section]``)."""
        raise NotImplementedError

    def plan(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]], settings: BatchSettings
    ) -> tuple[list[AnyBatch], dict[str, str]]:
        """The batches to submit and fqid -> error for the jobs that cannot be (see
        :func:`.planning.plan_batches`); raise BackendError when the scheduler's limits
        cannot be read."""
        raise NotImplementedError

    def render(
        self, batch: AnyBatch, members: Sequence[AnyMember] | None = None
    ) -> tuple[str | None, dict[str, str]]:
        """The script submitting ``members`` of ``batch`` (default all), and fqid ->
        error for members it cannot hold; None when nothing can be submitted."""
        raise NotImplementedError

    def before_submit(self, batch: AnyBatch, members: Sequence[AnyMember]) -> None:
        """What must exist on disk before the script is submitted (OSError: not sent)."""

    def record(self, member: AnyMember, batch: AnyBatch, scheduler_id: str) -> None:
        """Store the id the scheduler gave ``member``."""
        member.job.backend._assign("id", scheduler_id)

    @classmethod
    def read_failure(
        cls, ctx: PollContext, ref: ActiveRef, observation: Observation
    ) -> Observation:
        """A failure with exit code 1 may have left its real reason on disk: an output
        pattern that matched nothing (see :mod:`.script`)."""
        return read_missing_output(ctx, ref, observation)

    def plan_preview(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]], settings: BatchSettings
    ) -> tuple[list[AnyBatch], dict[str, str], list[str]]:
        """:meth:`plan` for a preview, and comment lines on what had to be assumed."""
        batches, failed = self.plan(ctx, jobs, settings)
        return batches, failed, []

    @staticmethod
    def describe(batch: AnyBatch) -> str:
        """What a batch holds, for the preview."""
        if not batch.is_array:
            return f"job {batch.members[0].job.fqid}"
        indices = compress(m.index for m in batch.members if m.index is not None)
        held = (
            f"subjobs {compress(m.job.id for m in batch.members)}"
            if batch.first_id
            else f"{len(batch.members)} subjob(s)"
        )
        return f"job array {indices} ({held})"

    # -- paths -------------------------------------------------------------------------

    @classmethod
    def log_dir(cls, top: str) -> str:
        """Where the scripts of a top-level job and its submission log are kept."""
        return os.path.join(top, cls.scheduler.log_dir_name)

    @staticmethod
    def prepare(member: AnyMember) -> None:
        prepare_workspace(member.root, member.job.submit_count, member.inputs)

    # -- submission --------------------------------------------------------------------

    def submit_bulk(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]], keep_going: bool
    ) -> SubmitOutcome:
        settings = self.batch_settings(ctx)
        batches, failed = self.plan(ctx, jobs, settings)
        order = {job.fqid: index for index, (job, _) in enumerate(jobs)}
        outcome = SubmitOutcome(failed=dict(failed))
        # keep_going=False: nothing after the first (sub)job that cannot be submitted.
        stop_at = len(jobs) if keep_going or not failed else min(order[f] for f in failed)
        down: str | None = None  # the scheduler did not answer: the rest is not tried
        submitted: set[str] = set()
        array_ids: list[str] = []
        for batch in batches:
            members = [m for m in batch.members if order[m.job.fqid] < stop_at]
            if down is not None:
                for member in members:
                    outcome.failed[member.job.fqid] = f"not tried: {down}"
                continue
            ready: list[AnyMember] = []
            for member in members:
                try:
                    self.prepare(member)
                except OSError as exc:
                    outcome.failed[member.job.fqid] = f"preparing the workspace failed: {exc}"
                    if not keep_going:
                        stop_at = min(stop_at, order[member.job.fqid])
                        break
                    continue
                ready.append(member)
            if not ready:
                continue
            scheduler_id, errors, transient = self._submit_batch(batch, ready, settings)
            outcome.failed.update(errors)
            if scheduler_id is None:
                if transient:
                    down = next(iter(errors.values()))
                if not keep_going:
                    stop_at = min(stop_at, min(order[m.job.fqid] for m in ready))
                continue
            submitted.update(m.job.fqid for m in ready if m.job.fqid not in errors)
            if batch.is_array:
                array_ids.append(scheduler_id)
            if errors and not keep_going:
                stop_at = min(stop_at, min(order[f] for f in errors))
        if array_ids:
            self._assign("id", ",".join(array_ids))
        # Arrays are real bulk: the splitting design wants refused subjobs failed.
        outcome.real_bulk = bool(array_ids) or any(b.is_array for b in batches)
        outcome.not_attempted = [
            job.fqid
            for job, _ in jobs
            if job.fqid not in submitted and job.fqid not in outcome.failed
        ]
        return outcome

    def _submit_batch(
        self, batch: AnyBatch, members: list[AnyMember], settings: BatchSettings
    ) -> tuple[str | None, dict[str, str], bool]:
        """Submit ``members`` of ``batch``: (scheduler id or None, fqid -> error, whether
        the failure is transient)."""
        scheduler = self.scheduler
        text, errors = self.render(batch, members)
        members = [m for m in members if m.job.fqid not in errors]
        if text is None or not members:
            return None, errors, False
        log_dir = self.log_dir(batch.top)
        # The script is kept BEFORE it is submitted: a script without a log line is a
        # submission whose outcome nobody saw (see _cancel_unconfirmed).
        try:
            os.makedirs(log_dir, exist_ok=True)
            path = os.path.join(log_dir, batch.name + scheduler.script_suffix)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            keep_handover(
                log_dir, batch.name, {handover_key(m.job): m.index for m in members}, batch.queue
            )
            self.before_submit(batch, members)
        except OSError as exc:
            message = f"cannot keep the batch script in {log_dir}: {exc}"
            return None, {**errors, **{m.job.fqid: message for m in members}}, False
        try:
            scheduler_id = scheduler.submit_with_retry(
                text, batch.name, settings, settings.command_timeout
            )
            stop_point("scheduler-accepted")
        except CommandError as exc:
            message = exc.as_submit_failure(scheduler.submit_name)
            log_submission(log_dir, batch.name, "not submitted: " + message.replace("\n", " "))
            return None, {**errors, **{m.job.fqid: message for m in members}}, exc.transient
        for member in members:
            element = (
                scheduler_id
                if member.index is None
                else scheduler.element_id(scheduler_id, member.index)
            )
            self.record(member, batch, element)
        if batch.is_array:
            what = "array " + compress(m.index for m in members if m.index is not None)
            if batch.first_id:
                what += " (subjobs " + compress(m.job.id for m in members) + ")"
        else:
            what = "job " + members[0].job.fqid
        log_submission(
            log_dir,
            batch.name,
            f"submitted {scheduler_id} {scheduler.queue_word}={batch.queue} {what}",
        )
        return scheduler_id, errors, False

    # -- recovery of a submission a crash interrupted ----------------------------------

    def received_bulk(self, ctx: SubmitContext, jobs: Sequence[Job]) -> set[str] | None:
        """The jobs a kept script handed over that the scheduler accepted: its log line
        says so, or (a crash between the submission and the line) the scheduler lists a
        job of the script's unique name. Each is given its scheduler id, as its submission
        would have (``record_received``), so that it is followed."""
        scheduler = self.scheduler
        settings = self.batch_settings(ctx)
        found: set[str] = set()
        by_dir: dict[str, dict[str, Job]] = {}
        for job in jobs:
            top = ctx.paths(job.master if job.master is not None else job).location
            by_dir.setdefault(self.log_dir(top), {})[handover_key(job)] = job
        arrays: list[str] = []
        for log_dir, wanted in by_dir.items():
            handovers = handed_over(log_dir, set(wanted))
            ids = self._accepted(log_dir, {h.name for h in handovers.values()}, settings)
            for key, handover in handovers.items():
                scheduler_id = ids.get(handover.name)
                if scheduler_id is None:
                    continue
                job = wanted[key]
                element = (
                    scheduler_id
                    if handover.index is None
                    else scheduler.element_id(scheduler_id, handover.index)
                )
                self.record_received(job, handover, element)
                found.add(job.fqid)
                if handover.index is not None and scheduler_id not in arrays:
                    arrays.append(scheduler_id)
        if arrays:
            self._assign("id", ",".join(arrays))
        return found

    def _accepted(self, log_dir: str, names: set[str], settings: BatchSettings) -> dict[str, str]:
        """name -> scheduler id of the kept scripts ``names`` the scheduler accepted."""
        scheduler = self.scheduler
        ids: dict[str, str] = {}
        outcomes = logged_outcomes(log_dir)
        unlogged = sorted(n for n in names if n not in outcomes)
        for name in names & set(outcomes):
            words = outcomes[name].split()
            if len(words) >= 2 and words[0] == "submitted":
                ids[name] = words[1]
        if unlogged:
            timeout = settings.command_timeout
            try:
                seen: dict[str, str] = scheduler.retry(
                    lambda: scheduler.find_submitted(unlogged, timeout=timeout), settings
                )
            except CommandError as exc:
                raise BackendError(
                    f"cannot ask {scheduler.label} what it received: {exc.message}"
                ) from None
            for name in unlogged:
                if name in seen:
                    ids[name] = seen[name]
                    # Logged now: a later recovery must not take it for a submission
                    # nobody saw and cancel it, recorded as it is.
                    log_submission(log_dir, name, f"submitted {seen[name]} (found by recovery)")
        return ids

    def record_received(self, job: Job, handover: HandOver, scheduler_id: str) -> None:
        """Record on ``job`` that the scheduler received it as ``scheduler_id`` (a crash
        interrupted its submission before this was recorded)."""
        job.backend._assign("id", scheduler_id)

    # -- kill --------------------------------------------------------------------------

    def kill_bulk(self, ctx: SubmitContext, jobs: Sequence[Job]) -> dict[str, str]:
        scheduler = self.scheduler
        settings = self.batch_settings(ctx)
        errors: dict[str, str] = {}
        plain: dict[str, list[Job]] = {}
        elements: dict[str, dict[int, Job]] = {}
        # Jobs caught in a submission that a crash interrupted (startup recovery asks to
        # cancel those): their scheduler ids were never recorded.
        interrupted = [j for j in jobs if Status.parse(j.status) in _UNRECORDED]
        if interrupted:
            errors.update(self._cancel_unconfirmed(ctx, interrupted, settings))
        for job in jobs:
            if Status.parse(job.status) in _UNRECORDED:
                continue
            scheduler_id = job.backend.id
            if not scheduler_id:
                errors[job.fqid] = f"no {scheduler.label} job id was recorded for it"
                continue
            base, index = scheduler.split_id(scheduler_id)
            if index is not None:
                elements.setdefault(base, {})[index] = job
            else:
                plain.setdefault(base, []).append(job)
        whole = self._whole_arrays(jobs, set(elements))
        targets: dict[str, list[Job]] = dict(plain)
        for base, by_index in elements.items():
            if base in whole:
                targets[base] = list(by_index.values())  # the whole array, in one word
            elif len(by_index) == 1:
                index, job = next(iter(by_index.items()))
                targets[scheduler.element_id(base, index)] = [job]
            else:
                targets[scheduler.elements_target(base, sorted(by_index))] = list(by_index.values())
        if not targets:
            return errors
        try:
            scheduler.retry(
                lambda: scheduler.cancel(list(targets), timeout=settings.command_timeout), settings
            )
        except CommandError as exc:
            for killed in targets.values():
                for job in killed:
                    errors[job.fqid] = f"{scheduler.cancel_name}: {exc.message}"
        return errors

    def _cancel_unconfirmed(
        self, ctx: SubmitContext, jobs: Sequence[Job], settings: BatchSettings
    ) -> dict[str, str]:
        """Cancel what an interrupted submission of ``jobs`` may have left in the queue.

        Each script is kept before it is submitted and its outcome logged after, so a
        script without a log line is a submission whose outcome nobody saw; its job, if
        the scheduler accepted it, is found by its unique name and cancelled.
        """
        scheduler = self.scheduler
        tops = {ctx.paths(j.master if j.master is not None else j).location for j in jobs}
        names: dict[str, str] = {}  # name -> its log directory
        for top in tops:
            log_dir = self.log_dir(top)
            names.update(
                (n, log_dir) for n in unconfirmed_submissions(log_dir, scheduler.script_suffix)
            )
        if not names:
            return {}
        timeout = settings.command_timeout
        try:
            found: dict[str, str] = scheduler.retry(
                lambda: scheduler.find_by_name(sorted(names), timeout=timeout), settings
            )
            if found:
                scheduler.retry(
                    lambda: scheduler.cancel(sorted(set(found.values())), timeout=timeout), settings
                )
        except CommandError as exc:
            return {j.fqid: f"cancelling an interrupted submission: {exc.message}" for j in jobs}
        for name, log_dir in names.items():
            outcome = (
                f"cancelled {found[name]}" if name in found else f"never reached {scheduler.label}"
            )
            log_submission(log_dir, name, f"interrupted submission: {outcome}")
        return {}

    def _whole_arrays(self, jobs: Sequence[Job], arrays: set[str]) -> set[str]:
        """The arrays among ``arrays`` none of whose other elements is still active: those
        can be cancelled by their id (one word, and pending elements with it)."""
        if not arrays:
            return set()
        targeted = {id(job) for job in jobs}
        whole = set(arrays)
        masters = {id(m): m for m in (job.master for job in jobs) if m is not None}
        for master in masters.values():
            for sj in master.iter_subjobs():
                if id(sj) in targeted or not Status.parse(sj.status).active:
                    continue
                whole.discard(self.scheduler.split_id(str(sj.backend.id))[0])
        return whole

    # -- preview ----------------------------------------------------------------------

    def preview(self, job: Job | None = None) -> ScriptPreview:
        """The batch script(s) that submit() (for a new job) or resubmit() (for a failed
        or killed one) would send. Nothing is submitted, written or changed."""
        ctx = current_submit_context(self)
        if job is None:
            owner = ctx.job_of_backend(self) if ctx.job_of_backend is not None else None
            if owner is None:
                raise JobError(
                    f"preview() cannot tell which job this {type(self).__name__} "
                    "backend belongs to; pass the job: j.backend.preview(j)"
                )
            job = owner
        return self.preview_bulk(ctx, _preview_pairs(ctx, job))

    def preview_bulk(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]]
    ) -> ScriptPreview:
        """What :meth:`submit_bulk` would send for ``jobs``: every script, each after a
        comment saying what it holds. No side effect (the scheduler's limits may be read)."""
        scheduler = self.scheduler
        batches, failed, notes = self.plan_preview(ctx, jobs, self.batch_settings(ctx))
        count = sum(len(b.members) for b in batches)
        lines = [
            f"# {scheduler.label} preview: {len(batches)} {scheduler.submit_name} call(s) "
            f"for {count} (sub)job(s); nothing was submitted. Job names end in a random "
            "token.",
            *notes,
        ]
        for fqid, message in failed.items():
            lines.append(f"# {fqid} cannot be submitted: {message}")
        for number, batch in enumerate(batches, 1):
            text, errors = self.render(batch)
            for fqid, message in errors.items():
                lines.append(f"# {fqid} cannot be submitted: {message}")
            if text is None:
                continue
            lines.append("")
            lines.append(
                f"# --- {scheduler.submit_name} {number} of {len(batches)}: {self.describe(batch)}"
            )
            script = os.path.join(self.log_dir(batch.top), batch.name + scheduler.script_suffix)
            lines.append(f"# $ {scheduler.shown_submit(script)}")
            lines.append(text.rstrip("\n"))
        return ScriptPreview("\n".join(lines) + "\n")

    # -- monitoring --------------------------------------------------------------------

    def monitor_data(self, job: Job) -> Mapping[str, Any]:
        return {"id": job.backend.id}

    @classmethod
    def poll(cls, ctx: PollContext, refs: Sequence[ActiveRef]) -> list[StatusReport]:
        return polling.poll(cls.scheduler, ctx, refs, cls.batch_settings(ctx), cls.read_failure)


def _preview_pairs(ctx: SubmitContext, job: Job) -> list[tuple[Job, RunSpec]]:
    """What submit() or resubmit() would hand to the backend, built without storing."""
    status = job.current_status()
    targets: Iterable[Job]
    if status is Status.NEW and job.is_master:
        # Subjobs never submitted beside finished ones: submit() sends exactly those.
        targets = [sj for sj in job.iter_subjobs() if Status.parse(sj.status) is Status.NEW]
    elif status is Status.NEW and job.master is None:
        if job.splitter is not None:
            variations = job.splitter.variations(job)
            if not variations:
                raise JobError(f"job {job.fqid}: the splitter produced no subjobs")
            if ctx.build_subjobs is None:
                raise JobError(f"job {job.fqid}: no session to split it in")
            targets = ctx.build_subjobs(job, variations)
        else:
            targets = [job]
    elif job.is_master:
        targets = [
            sj
            for sj in job.iter_subjobs()
            if Status.parse(sj.status) in (Status.FAILED, Status.KILLED, Status.NEW)
        ]
    elif status in (Status.FAILED, Status.KILLED, Status.COMPLETED):
        targets = [job]
    else:
        targets = []
    pairs: list[tuple[Job, RunSpec]] = []
    for target in targets:
        # As submitted, but writing nothing.
        pairs.append((target, run_spec(target, ctx.paths(target), stage=False)))
    if not pairs:
        raise JobError(
            f"job {job.fqid} is {status}: neither submit() nor resubmit() would send anything"
        )
    return pairs
