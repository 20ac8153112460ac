"""Slurm: run jobs on a Slurm cluster, a split job as ONE ``sbatch --array``.

Submission (see :mod:`.submission`): the subjobs of a split job become one job array
whose task ids are their subjob ids; subjobs whose Slurm options differ (a splitter
varied ``backend.resources``...) go in one array per set of options, and ``bulk=False``
submits each subjob as a job of its own.  Monitoring (see :mod:`.slurm_polling`) costs one
squeue and at most one sacct per cycle, however many jobs are active.  The workspace
is expected on a file system the compute nodes share: each (sub)job runs in its
``work/`` directory and writes ``output/stdout`` and ``output/stderr`` there.

Built over the batch base (:mod:`ganga_like.batch`): the submit loop, retries, kill and
the poll's rules are :class:`~ganga_like.batch.backend.BatchBackend`'s; Slurm's commands
are in :mod:`.scheduler` and :mod:`.slurm_commands`. Here: the attributes and the hooks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import traitlets

from ganga_like.batch.backend import BatchBackend, BatchSettings, ScriptPreview
from ganga_like.batch.quantities import grown_all, shown
from ganga_like.batch.records import HandOver
from ganga_like.batch.settings import single_attempt
from ganga_like.batch.traits import SingleLine, SubmitOption, array_throttle, setup_lines
from ganga_like.errors import BackendError
from ganga_like.model.interfaces import (
    ActiveRef,
    PollContext,
    RunSpec,
    StatusReport,
    SubmitContext,
    SubmitOutcome,
)
from ganga_like.model.job import Job
from ganga_like.model.launchers import LAUNCHERS, LauncherName

from . import pilot_run, pilot_script, slurm_commands
from .pilot import Pilot, PilotTrait
from .pilot_poller import SlurmPoller, is_pilot_ref
from .resource_object import Resources, ResourcesTrait
from .scheduler import SCHEDULER
from .settings import Slurm as SlurmSection
from .slurm_commands import SlurmCommandError
from .states import cause_of_reason
from .submission import (
    Batch,
    ClusterAnswers,
    Member,
    link_elements,
    prepare_workspace,
    render_batch,
)
from .submission import plan as plan_submission

__all__ = ["ScriptPreview", "SingleLine", "Slurm"]


class SbatchOption(SubmitOption):
    """One more ``#SBATCH`` option: it starts with '-' (sbatch refuses any other line as
    an invalid directive, at submit)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("--constraint=avx2", **kwargs)
        self.info_text = "a single-line sbatch option, such as '--constraint=avx2'"


class Slurm(BatchBackend):
    """Runs jobs on a Slurm cluster: a split job is one job array (``bulk=True``), its
    subjob ids are the array's task ids. Leave ``partition`` empty to use the first
    partition whose limits fit ``resources``. ``preview()`` shows the batch script(s)
    submit() would send, without submitting anything."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "partition": SingleLine(
            "",
            help="Partition (sbatch --partition); empty: the first "
            "partition whose limits fit the resources.",
        ).tag(changeable_at_resubmit=True),
        "account": SingleLine(
            "", help="Account to charge (sbatch --account); empty: your default account."
        ).tag(changeable_at_resubmit=True),
        "reservation": SingleLine("", help="Reservation to run in (sbatch --reservation).").tag(
            changeable_at_resubmit=True
        ),
        "qos": SingleLine("", help="Quality of service (sbatch --qos).").tag(
            changeable_at_resubmit=True
        ),
        "resources": ResourcesTrait(
            help="What each (sub)job needs: Resources(process_count"
            "=..., cpu_cores_per_process=..., gpus_per_process=..., "
            "processes_per_node=..., memory='2G', walltime='1:00:00'"
            ") or a dict of those."
        ).tag(changeable_at_resubmit=True),
        "launcher": LauncherName(
            tuple(LAUNCHERS),
            "srun",
            help="How resources.process_count processes are started: 'srun', "
            "'multiple' (N copies on the first node), 'mpirun', 'mpiexec' or 'single'; "
            "empty: srun when process_count is above 1.",
        ).tag(changeable_at_resubmit=True),
        "extra_options": traitlets.List(
            SbatchOption(),
            help="More #SBATCH options, one per item, e.g. ['--constraint=avx2', '--exclusive'].",
        ).tag(changeable_at_resubmit=True),
        "setup": setup_lines().tag(changeable_at_resubmit=True),
        "array_throttle": array_throttle("--array=...%N").tag(changeable_at_resubmit=True),
        "bulk": traitlets.Bool(
            True, help="True: a split job is one job array. False: one sbatch per subjob."
        ),
        "pilot": PilotTrait(
            help="Pilot(nodes=1, cores=None, walltime='1:00:00'): the subjobs run inside ONE "
            "allocation, packed on its cores, instead of one array element each; None: "
            "no pilot. May change once the job has ended (for its resubmission)."
        ).tag(changeable_at_resubmit=True),
        "id": traitlets.Unicode(
            "",
            help="Slurm job id: '123_4' for array element 4, '123' "
            "for a job; for a master, the array(s) of its latest "
            "submission.",
        ).tag(protected=True, copyable=False),
        "actual_partition": traitlets.Unicode(
            "", help="The partition the job was submitted to."
        ).tag(protected=True, copyable=False),
        "pilot_run": traitlets.Unicode(
            "", help="The pilot that runs the (sub)job: its directory under pilot/."
        ).tag(protected=True, copyable=False),
    }
    scheduler = SCHEDULER
    # What a Retry may grow: the memory and walltime of ``resources``.
    growable = frozenset({"memory", "walltime"})
    config_sections = (SlurmSection,)
    poller_class = SlurmPoller  # the batch base's, and the pilots'

    partition: str
    account: str
    reservation: str
    qos: str
    resources: Resources | None
    launcher: str
    extra_options: tuple[str, ...]
    setup: tuple[str, ...]
    array_throttle: int | None
    bulk: bool
    pilot: Pilot | None
    id: str
    actual_partition: str
    pilot_run: str

    def __init__(self, **attributes: Any) -> None:
        super().__init__(**attributes)
        if "resources" not in attributes:
            # A default object, so that `j.backend.resources.memory = "2G"` just works.
            self._put("resources", Resources())

    def requested(self) -> Mapping[str, float]:
        """``resources``' memory (per node), walltime and cores, as the stats compare
        them with what a run used."""
        resources = self.resources
        if resources is None:
            return {}
        asked: dict[str, float] = {
            "cores": resources.process_count * resources.cpu_cores_per_process
        }
        if resources.memory is not None:
            asked["memory"] = resources.memory
        if resources.walltime is not None:
            asked["walltime"] = resources.walltime.total_seconds()
        return asked

    def grow(self, factors: Mapping[str, float]) -> list[str]:
        """Multiply ``resources.memory`` (bytes, rounded up to a MiB) and
        ``resources.walltime`` (rounded up to a second) by their factors; a resource left
        to the partition's default (None) has nothing to grow."""
        resources = self.resources
        if resources is None:
            return []
        grown = grown_all({n: getattr(resources, n) for n in self.growable}, factors)
        if not grown:
            return []
        replacement = Resources(**{n: getattr(resources, n) for n in resources.stored()})
        for name, value in grown.items():
            replacement._assign(name, value)
        self._assign("resources", replacement)
        return [
            f"resources.{name} {shown(getattr(resources, name))} -> {shown(value)}"
            for name, value in grown.items()
        ]

    def set_resources(self, values: Mapping[str, Any]) -> list[str]:
        """Set ``resources.memory`` and ``resources.walltime`` as the attributes take them
        ("4G", "2:00:00"): a bad value raises SchemaError before anything changes."""
        current = self.resources or Resources()
        checked = {name: Resources._validate(name, value) for name, value in values.items()}
        replacement = Resources(**{n: getattr(current, n) for n in current.stored()})
        for name, value in checked.items():
            replacement._assign(name, value)
        self._assign("resources", replacement)
        return [
            f"resources.{name} {shown(getattr(current, name))} -> "
            f"{shown(getattr(replacement, name))}"
            for name in checked
        ]

    @classmethod
    def failure_cause(cls, reason: str) -> str:
        return cause_of_reason(reason)

    # -- the batch base's hooks ------------------------------------------------------

    @classmethod
    def batch_settings(cls, ctx: SubmitContext | PollContext) -> SlurmSection:
        return ctx.config[SlurmSection]

    def plan(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]], settings: BatchSettings
    ) -> tuple[list[Batch], dict[str, str]]:
        assert isinstance(settings, SlurmSection)
        answers = ctx.kept(ClusterAnswers)
        try:
            return plan_submission(
                ctx,
                jobs,
                settings,
                lambda: answers.partitions.get(settings),
                lambda: answers.array_limit.get(settings),
            )
        except SlurmCommandError as exc:
            raise BackendError(
                f"cannot read the cluster's partitions or limits: {exc.message}",
                transient=exc.transient,
            ) from None

    def render(
        self, batch: Batch, members: Sequence[Member] | None = None
    ) -> tuple[str | None, dict[str, str]]:
        return render_batch(batch, members)

    def before_submit(self, batch: Batch, members: Sequence[Member]) -> None:
        link_elements(batch, members)

    def record(self, member: Member, batch: Batch, scheduler_id: str) -> None:
        backend = member.job.backend
        backend._assign("id", scheduler_id)
        backend._assign("actual_partition", batch.queue)
        backend._assign("pilot_run", "")

    def record_received(self, job: Job, handover: HandOver, scheduler_id: str) -> None:
        backend = job.backend
        backend._assign("id", scheduler_id)
        backend._assign("actual_partition", handover.queue)
        pilot = handover.extra.get(pilot_run.HANDOVER_PILOT)
        backend._assign("pilot_run", handover.name if pilot else "")
        if pilot and job.master is not None:
            job.master.backend._assign("id", scheduler_id)
            job.master.backend._assign("actual_partition", handover.queue)

    # -- pilots (see .pilot_run): one allocation runs the subjobs --------------------

    def submit_bulk(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]], keep_going: bool
    ) -> SubmitOutcome:
        if self.pilot is None:
            return super().submit_bulk(ctx, jobs, keep_going)
        return pilot_run.submit(self, ctx, jobs, keep_going, self.batch_settings(ctx))

    def kill_bulk(self, ctx: SubmitContext, jobs: Sequence[Job]) -> dict[str, str]:
        piloted = [j for j in jobs if _in_pilot(j)]
        if not piloted:
            return super().kill_bulk(ctx, jobs)
        others = [j for j in jobs if not _in_pilot(j)]
        errors = super().kill_bulk(ctx, others) if others else {}
        errors.update(pilot_run.kill(ctx, piloted, self.batch_settings(ctx)))
        return errors

    def monitor_data(self, job: Job) -> Mapping[str, Any]:
        if _in_pilot(job):
            return {"id": job.backend.id, "pilot": job.backend.pilot_run}
        return {"id": job.backend.id}

    @classmethod
    def poll(cls, ctx: PollContext, refs: Sequence[ActiveRef]) -> list[StatusReport]:
        settings = cls.batch_settings(ctx)
        assert isinstance(settings, SlurmSection)
        poller = ctx.poller_as(SlurmPoller)
        reports, piloted = pilot_run.poll(ctx, poller.pilot, refs, settings)
        if piloted < len(refs) or poller.keeps_following():
            plain = refs if not piloted else [r for r in refs if not is_pilot_ref(r)]
            reports.extend(super().poll(ctx, plain))
        return reports

    def preview_bulk(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]]
    ) -> ScriptPreview:
        if self.pilot is None:
            return super().preview_bulk(ctx, jobs)
        first = jobs[0][0]
        top = ctx.paths(first.master or first).location
        name = f"ganga-{(first.master or first).fqid}-000000"
        note = ""
        try:
            settings = single_attempt(SlurmSection, self.batch_settings(ctx))
            partition, chosen = pilot_script.choose(ctx, self, self.pilot, settings)
            if chosen:
                note = f"# partition {partition}: the first that fits\n"
        except BackendError as exc:
            partition, note = "", f"# no partition: {exc}\n"
        text = pilot_script.render(self, name, top, partition)
        return ScriptPreview(
            f"# Slurm preview: 1 sbatch call, a pilot ({self.pilot.describe()}) running "
            f"{len(jobs)} (sub)job(s); nothing was submitted.\n{note}{text}"
        )

    @staticmethod
    def prepare(member: Member) -> None:
        prepare_workspace(member)

    def plan_preview(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]], settings: BatchSettings
    ) -> tuple[list[Batch], dict[str, str], list[str]]:
        """As :meth:`plan`, but a cluster whose MaxArraySize cannot be read is assumed to
        have Slurm's default, and said so."""
        assert isinstance(settings, SlurmSection)
        answers = ctx.kept(ClusterAnswers)
        assumed: list[str] = []
        once = single_attempt(SlurmSection, settings)

        def array_limit() -> int:
            try:
                return answers.array_limit.get(once)
            except SlurmCommandError as exc:
                assumed.append(
                    f"# MaxArraySize could not be read ({exc.message}); "
                    f"assumed {slurm_commands.DEFAULT_MAX_ARRAY_SIZE}"
                )
                return slurm_commands.DEFAULT_MAX_ARRAY_SIZE

        try:
            batches, failed = plan_submission(
                ctx, jobs, settings, lambda: answers.partitions.get(settings), array_limit
            )
        except SlurmCommandError as exc:
            raise BackendError(
                f"cannot read the cluster's partitions or limits: {exc.message}",
                transient=exc.transient,
            ) from None
        return batches, failed, assumed

    @staticmethod
    def describe(batch: Batch) -> str:
        chosen = " (chosen: the first that fits)" if batch.queue_chosen else ""
        return f"{BatchBackend.describe(batch)}, partition {batch.queue}{chosen}"


def _in_pilot(job: Job) -> bool:
    """Whether a pilot runs ``job`` (recovery passes skeletons with no backend)."""
    backend = job.backend
    return isinstance(backend, Slurm) and bool(backend.pilot_run and backend.id)
