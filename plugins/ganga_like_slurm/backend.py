"""Slurm: run jobs on a Slurm cluster, a split job as ONE ``sbatch --array``.

Submission (see :mod:`.submission`): the subjobs of a split job become one job array
whose task ids are their subjob ids; subjobs whose Slurm options differ (a splitter
varied ``backend.resources``...) go in one array per set of options, and ``bulk=False``
submits each subjob as a job of its own.  Monitoring (see :mod:`.polling`) costs one
squeue and at most one sacct per cycle, however many jobs are active.  The workspace
is expected on a file system the compute nodes share: each (sub)job runs in its
``work/`` directory and writes ``output/stdout`` and ``output/stderr`` there.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar

import traitlets

from ganga_like.errors import BackendError, JobError
from ganga_like.model.interfaces import (
    ActiveRef,
    IBackend,
    PollContext,
    RunSpec,
    StatusReport,
    SubmitContext,
    SubmitOutcome,
)
from ganga_like.model.job import Job
from ganga_like.model.status import Status

from . import commands, polling
from .commands import SlurmCommandError
from .resource_object import Resources, ResourcesTrait
from .script import compress_indices
from .settings import Slurm as SlurmSection
from .settings import SlurmSettings
from .submission import (
    ARRAY_LIMIT,
    PARTITIONS,
    Batch,
    Member,
    find_jobs_by_name,
    link_elements,
    log_submission,
    plan,
    prepare_workspace,
    render_batch,
    retry,
    sbatch_with_retry,
    slurm_log_dir,
    unconfirmed_submissions,
)

__all__ = ["ScriptPreview", "SingleLine", "Slurm"]


class SingleLine(traitlets.Unicode):  # type: ignore[type-arg]
    """A string that stays on one line (it becomes one line of the batch script)."""

    info_text = "a single-line string"

    def validate(self, obj: Any, value: Any) -> str:
        result: str = super().validate(obj, value)
        if any(ch in result for ch in "\n\r\0"):
            self.error(obj, value)
        return result


class ScriptPreview(str):
    """The text :meth:`Slurm.preview` returns; it displays as itself, not as a quoted
    string, at the prompt."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


class Slurm(IBackend):
    """Runs jobs on a Slurm cluster: a split job is one job array (``bulk=True``), its
    subjob ids are the array's task ids. Leave ``partition`` empty to use the first
    partition whose limits fit ``resources``. ``preview()`` shows the batch script(s)
    submit() would send, without submitting anything."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "partition": SingleLine("", help="Partition (sbatch --partition); empty: the first "
                                "partition whose limits fit the resources."),
        "account": SingleLine("", help="Account to charge (sbatch --account); empty: your "
                              "default account."),
        "reservation": SingleLine("", help="Reservation to run in (sbatch --reservation)."),
        "qos": SingleLine("", help="Quality of service (sbatch --qos)."),
        "resources": ResourcesTrait(help="What each (sub)job needs: Resources(process_count"
                                    "=..., cpu_cores_per_process=..., gpus_per_process=..., "
                                    "processes_per_node=..., memory='2G', walltime='1:00:00'"
                                    ") or a dict of those."),
        "extra_options": traitlets.List(SingleLine(), help="More #SBATCH options, one per "
                                        "item, e.g. ['--constraint=avx2', '--exclusive']."),
        "setup": traitlets.List(SingleLine(), help="Shell lines run before the program, "
                                "e.g. ['module load gcc']."),
        "array_throttle": traitlets.Int(None, allow_none=True, min=1, help="At most this "
                                        "many subjobs of an array run at once (--array=...%N);"
                                        " None: no limit."),
        "bulk": traitlets.Bool(True, help="True: a split job is one job array. False: one "
                               "sbatch per subjob."),
        "id": traitlets.Unicode("", help="Slurm job id: '123_4' for array element 4, '123' "
                                "for a job; for a master, the array(s) of its latest "
                                "submission.").tag(protected=True, copyable=False),
        "actual_partition": traitlets.Unicode("", help="The partition the job was submitted "
                                              "to.").tag(protected=True, copyable=False),
    }
    _exported_methods = ("preview",)
    supports_real_bulk = True
    per_job_state = True  # each subjob keeps its own Slurm id

    partition: str
    account: str
    reservation: str
    qos: str
    resources: Resources | None
    extra_options: tuple[str, ...]
    setup: tuple[str, ...]
    array_throttle: int | None
    bulk: bool
    id: str
    actual_partition: str

    def __init__(self, **attributes: Any) -> None:
        super().__init__(**attributes)
        if "resources" not in attributes:
            # A default object, so that `j.backend.resources.memory = "2G"` just works.
            self.__dict__["resources"] = Resources()

    # -- submission ------------------------------------------------------------------

    def submit_bulk(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]], keep_going: bool
    ) -> SubmitOutcome:
        settings = SlurmSettings.from_section(ctx.config_for(SlurmSection))
        try:
            batches, failed = plan(ctx, jobs, settings, lambda: PARTITIONS.get(settings),
                                   lambda: ARRAY_LIMIT.get(settings))
        except SlurmCommandError as exc:
            raise BackendError(f"cannot read the cluster's partitions or limits: {exc.message}",
                               transient=exc.transient) from None
        order = {job.fqid: index for index, (job, _) in enumerate(jobs)}
        outcome = SubmitOutcome(failed=dict(failed))
        # keep_going=False: nothing after the first (sub)job that cannot be submitted.
        stop_at = len(jobs) if keep_going or not failed else min(order[f] for f in failed)
        down: str | None = None  # the controller did not answer: the rest is not tried
        submitted: set[str] = set()
        array_ids: list[str] = []
        for batch in batches:
            members = [m for m in batch.members if order[m.job.fqid] < stop_at]
            if down is not None:
                for member in members:
                    outcome.failed[member.job.fqid] = f"not tried: {down}"
                continue
            ready: list[Member] = []
            for member in members:
                try:
                    prepare_workspace(member)
                except OSError as exc:
                    outcome.failed[member.job.fqid] = f"preparing the workspace failed: {exc}"
                    if not keep_going:
                        stop_at = min(stop_at, order[member.job.fqid])
                        break
                    continue
                ready.append(member)
            if not ready:
                continue
            slurm_id, errors, transient = self._submit_batch(batch, ready, settings)
            outcome.failed.update(errors)
            if slurm_id is None:
                if transient:
                    down = next(iter(errors.values()))
                if not keep_going:
                    stop_at = min(stop_at, min(order[m.job.fqid] for m in ready))
                continue
            submitted.update(m.job.fqid for m in ready if m.job.fqid not in errors)
            if batch.is_array:
                array_ids.append(slurm_id)
            if errors and not keep_going:
                stop_at = min(stop_at, min(order[f] for f in errors))
        if array_ids:
            self._assign("id", ",".join(array_ids))
        # Arrays are real bulk: the splitting design wants refused subjobs failed.
        outcome.real_bulk = bool(array_ids) or any(b.is_array for b in batches)
        outcome.not_attempted = [job.fqid for job, _ in jobs
                                 if job.fqid not in submitted and job.fqid not in outcome.failed]
        return outcome

    def _submit_batch(
        self, batch: Batch, members: list[Member], settings: SlurmSettings
    ) -> tuple[str | None, dict[str, str], bool]:
        """sbatch ``members`` of ``batch``: (Slurm id or None, fqid -> error, transient)."""
        text, errors = render_batch(batch, members)
        members = [m for m in members if m.job.fqid not in errors]
        if text is None or not members:
            return None, errors, False
        log_dir = slurm_log_dir(batch.top)
        try:
            os.makedirs(log_dir, exist_ok=True)
            with open(os.path.join(log_dir, batch.name + ".sh"), "w", encoding="utf-8") as f:
                f.write(text)
            link_elements(batch, members)
        except OSError as exc:
            message = f"cannot keep the batch script in {log_dir}: {exc}"
            return None, {**errors, **{m.job.fqid: message for m in members}}, False
        try:
            slurm_id = sbatch_with_retry(text, batch.name, settings)
        except SlurmCommandError as exc:
            message = f"sbatch: {exc.message}"
            log_submission(log_dir, batch.name, "not submitted: " + message.replace("\n", " "))
            return None, {**errors, **{m.job.fqid: message for m in members}}, exc.transient
        for member in members:
            backend = member.job.backend
            element = slurm_id if member.index is None else f"{slurm_id}_{member.index}"
            backend._assign("id", element)
            backend._assign("actual_partition", batch.partition)
        if batch.is_array:
            what = "array " + compress_indices(m.index for m in members if m.index is not None)
            if batch.first_id:
                what += " (subjobs " + compress_indices(m.job.id for m in members) + ")"
        else:
            what = "job " + members[0].job.fqid
        log_submission(log_dir, batch.name,
                       f"submitted {slurm_id} partition={batch.partition} {what}")
        return slurm_id, errors, False

    # -- kill ------------------------------------------------------------------------

    def kill_bulk(self, ctx: SubmitContext, jobs: Sequence[Job]) -> dict[str, str]:
        settings = SlurmSettings.from_section(ctx.config_for(SlurmSection))
        errors: dict[str, str] = {}
        plain: dict[str, list[Job]] = {}
        elements: dict[str, dict[int, Job]] = {}
        # Jobs caught in a submission that a crash interrupted (startup recovery asks to
        # cancel those): their Slurm ids were never recorded.
        interrupted = [j for j in jobs if Status.parse(j.status) in _UNRECORDED]
        if interrupted:
            errors.update(_cancel_unconfirmed(ctx, interrupted, settings))
        for job in jobs:
            if Status.parse(job.status) in _UNRECORDED:
                continue
            slurm_id = job.backend.id
            if not slurm_id:
                errors[job.fqid] = "no Slurm job id was recorded for it"
                continue
            base, _, index = slurm_id.partition("_")
            if index:
                elements.setdefault(base, {})[int(index)] = job
            else:
                plain.setdefault(base, []).append(job)
        whole = _whole_arrays(jobs, set(elements))
        targets: dict[str, list[Job]] = dict(plain)
        for base, by_index in elements.items():
            if base in whole:
                targets[base] = list(by_index.values())  # the whole array, in one word
            elif len(by_index) == 1:
                index, job = next(iter(by_index.items()))
                targets[f"{base}_{index}"] = [job]
            else:
                targets[f"{base}_[{compress_indices(by_index)}]"] = list(by_index.values())
        if not targets:
            return errors
        try:
            retry(lambda: commands.scancel(list(targets), timeout=settings.command_timeout),
                  settings)
        except SlurmCommandError as exc:
            for killed in targets.values():
                for job in killed:
                    errors[job.fqid] = f"scancel: {exc.message}"
        return errors

    # -- monitoring ------------------------------------------------------------------

    def monitor_data(self, job: Job) -> Mapping[str, Any]:
        return {"id": job.backend.id}

    @classmethod
    def poll(cls, ctx: PollContext, refs: Sequence[ActiveRef]) -> list[StatusReport]:
        return polling.poll(ctx, refs)

    # -- preview ---------------------------------------------------------------------

    def preview(self, job: Job | None = None) -> ScriptPreview:
        """The batch script(s) that submit() (for a new job) or resubmit() (for a failed
        or killed one) would send to sbatch. Nothing is submitted, written or changed."""
        from ganga_like.runtime.session import current_session

        session = current_session()
        if job is None:
            job = _owning_job(session.registry().jobs, self)
        ctx = session.submit_context()
        return self.preview_bulk(ctx, _preview_pairs(ctx, job))

    def preview_bulk(self, ctx: SubmitContext,
                     jobs: Sequence[tuple[Job, RunSpec]]) -> ScriptPreview:
        """What :meth:`submit_bulk` would send for ``jobs``: every script, each after a
        comment saying what it holds. No side effect (the partitions and MaxArraySize may
        be read; a preview without a reachable cluster assumes Slurm's default limit)."""
        settings = SlurmSettings.from_section(ctx.config_for(SlurmSection))
        assumed: list[str] = []

        def array_limit() -> int:
            try:
                # One attempt: a preview should not wait out a controller that is down.
                return ARRAY_LIMIT.get(replace(settings, submit_attempts=1))
            except SlurmCommandError as exc:
                assumed.append(f"# MaxArraySize could not be read ({exc.message}); "
                               f"assumed {commands.DEFAULT_MAX_ARRAY_SIZE}")
                return commands.DEFAULT_MAX_ARRAY_SIZE

        try:
            batches, failed = plan(ctx, jobs, settings, lambda: PARTITIONS.get(settings),
                                   array_limit)
        except SlurmCommandError as exc:
            raise BackendError(f"cannot read the cluster's partitions or limits: {exc.message}",
                               transient=exc.transient) from None
        count = sum(len(b.members) for b in batches)
        lines = [f"# Slurm preview: {len(batches)} sbatch call(s) for {count} (sub)job(s); "
                 "nothing was submitted. Job names end in a random token.", *assumed]
        for fqid, message in failed.items():
            lines.append(f"# {fqid} cannot be submitted: {message}")
        for number, batch in enumerate(batches, 1):
            text, errors = render_batch(batch)
            for fqid, message in errors.items():
                lines.append(f"# {fqid} cannot be submitted: {message}")
            if text is None:
                continue
            lines.append("")
            lines.append(f"# --- sbatch {number} of {len(batches)}: {_describe(batch)}")
            script = os.path.join(slurm_log_dir(batch.top), batch.name + ".sh")
            lines.append(f"# $ sbatch --parsable < {script}")
            lines.append(text.rstrip("\n"))
        return ScriptPreview("\n".join(lines) + "\n")


# -- helpers --------------------------------------------------------------------------


def _describe(batch: Batch) -> str:
    if batch.is_array:
        indices = compress_indices(m.index for m in batch.members if m.index is not None)
        held = (f"subjobs {compress_indices(m.job.id for m in batch.members)}"
                if batch.first_id else f"{len(batch.members)} subjob(s)")
        what = f"job array {indices} ({held})"
    else:
        what = f"job {batch.members[0].job.fqid}"
    chosen = " (chosen: the first that fits)" if batch.partition_chosen else ""
    return f"{what}, partition {batch.partition}{chosen}"


_UNRECORDED = (Status.NEW, Status.SUBMITTING)


def _cancel_unconfirmed(ctx: SubmitContext, jobs: Sequence[Job],
                        settings: SlurmSettings) -> dict[str, str]:
    """Cancel what an interrupted submission of ``jobs`` may have left in Slurm.

    Each batch script is kept before sbatch runs and its outcome logged after, so a
    script without a log line is a submission whose outcome nobody saw; its job, if
    Slurm accepted it, is found by its unique name and cancelled.
    """
    dirs = {ctx.paths(j.master if j.master is not None else j).location for j in jobs}
    names: dict[str, str] = {}  # name -> its log directory
    for top in dirs:
        log_dir = slurm_log_dir(top)
        names.update((n, log_dir) for n in unconfirmed_submissions(log_dir))
    if not names:
        return {}
    try:
        found = retry(lambda: find_jobs_by_name(sorted(names),
                                                timeout=settings.command_timeout), settings)
        if found:
            retry(lambda: commands.scancel(sorted(set(found.values())),
                                           timeout=settings.command_timeout), settings)
    except SlurmCommandError as exc:
        return {j.fqid: f"cancelling an interrupted submission: {exc.message}" for j in jobs}
    for name, log_dir in names.items():
        outcome = f"cancelled {found[name]}" if name in found else "never reached Slurm"
        log_submission(log_dir, name, f"interrupted submission: {outcome}")
    return {}


def _whole_arrays(jobs: Sequence[Job], arrays: set[str]) -> set[str]:
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
            whole.discard(str(sj.backend.id).partition("_")[0])
    return whole


def _owning_job(registry_jobs: Any, backend: Slurm) -> Job:
    """The top-level job whose backend is ``backend`` (newest jobs are looked at first)."""
    for job_id in reversed(list(registry_jobs.keys())):
        job = registry_jobs[job_id]
        if getattr(job, "backend", None) is backend:
            result: Job = job
            return result
    raise JobError("preview() cannot tell which job this Slurm backend belongs to; "
                   "pass the job: j.backend.preview(j)")


def _preview_pairs(ctx: SubmitContext, job: Job) -> list[tuple[Job, RunSpec]]:
    """What submit() or resubmit() would hand to the backend, built without storing."""
    from ganga_like.runtime.splitting import build_subjobs

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
            targets = build_subjobs(job, variations)
        else:
            targets = [job]
    elif job.is_master:
        targets = [sj for sj in job.iter_subjobs()
                   if Status.parse(sj.status) in (Status.FAILED, Status.KILLED, Status.NEW)]
    elif status in (Status.FAILED, Status.KILLED, Status.COMPLETED):
        targets = [job]
    else:
        targets = []
    pairs: list[tuple[Job, RunSpec]] = []
    for target in targets:
        # As the submission does: the application's command plus the job's files.
        spec = target.application.prepare(target, ctx.paths(target))
        outputs = tuple(f.output_pattern() for f in target.outputfiles)
        inputs = tuple(f.input_path() for f in target.inputfiles)
        if outputs or inputs:
            spec = RunSpec(spec.argv, spec.env, spec.inputs + inputs,
                           spec.output_patterns + outputs)
        pairs.append((target, spec))
    if not pairs:
        raise JobError(f"job {job.fqid} is {status}: neither submit() nor resubmit() "
                       "would send anything")
    return pairs
