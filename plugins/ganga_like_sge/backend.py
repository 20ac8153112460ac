"""SGE: run jobs on (Son of) Grid Engine, a split job as ONE ``qsub -t`` array job.

Built over the batch base (:mod:`ganga_like.batch`): the submit loop, retries, the kept
scripts, recovery, kill and the poll's rules are
:class:`~ganga_like.batch.backend.BatchBackend`'s; Grid Engine's commands are in
:mod:`.scheduler`, its script in :mod:`.script`. Here: the attributes and the hooks.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, ClassVar

import traitlets

from ganga_like.batch.backend import BatchBackend, BatchSettings
from ganga_like.batch.planning import (
    batch_name,
    consecutive_arrays,
    plan_batches,
    render_pinned,
)
from ganga_like.batch.quantities import grown_all, shown
from ganga_like.batch.scheduler_commands import CommandError
from ganga_like.batch.script import ScriptError, element_command
from ganga_like.batch.settings import single_attempt
from ganga_like.batch.traits import (
    Memory,
    SingleLine,
    SubmitOption,
)
from ganga_like.errors import BackendError
from ganga_like.model.interfaces import PollContext, RunSpec, SubmitContext
from ganga_like.model.job import Job
from ganga_like.model.launchers import (
    LOCAL_LAUNCHERS,
    launch_problem,
    launcher_words,
    process_schema,
    resolve_launcher,
)

from .scheduler import SCHEDULER
from .script import Batch, Member, Options, render
from .settings import SGE as SGESection

__all__ = ["SGE"]

_TIME_RE = re.compile(r"^(?:(?:(\d+):)?(\d+):)?(\d+)$")


class Walltime(traitlets.TraitType[Any, Any]):
    """h_rt: a ``timedelta``, seconds, or Grid Engine's ``"[[H:]M:]S"``."""

    info_text = "a datetime.timedelta, seconds, or a time such as '1:30:00' (at most 365 days)"
    allow_none = True
    default_value = None

    def validate(self, obj: Any, value: Any) -> timedelta | None:
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            value = timedelta(seconds=value)
        elif isinstance(value, str) and (match := _TIME_RE.match(value.strip())):
            hours, minutes, seconds = (int(part or 0) for part in match.groups())
            value = timedelta(hours=hours, minutes=minutes, seconds=seconds)
        if isinstance(value, timedelta) and timedelta(0) < value <= timedelta(days=365):
            return value
        self.error(obj, value)


class SGE(BatchBackend):
    """Runs jobs on Grid Engine: a split job is one array job (``bulk=True``), subjob
    ``i`` its task ``i + 1``. ``preview()`` shows the batch script(s) submit() would
    send, without submitting anything."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "queue": SingleLine("", help="Queue (qsub -q); empty: Grid Engine chooses.").tag(
            changeable_at_resubmit=True
        ),
        "project": SingleLine("", help="Project to charge (qsub -P).").tag(
            changeable_at_resubmit=True
        ),
        **{
            name: trait.tag(changeable_at_resubmit=True)
            for name, trait in process_schema(LOCAL_LAUNCHERS, "mpirun").items()
        },
        "parallel_environment": SingleLine(
            "",
            help="Parallel environment giving process_count slots (qsub -pe NAME N; "
            "qconf -spl lists them); needed when process_count is above 1.",
        ).tag(changeable_at_resubmit=True),
        "memory": Memory(
            help="Memory per slot, enforced (h_vmem): bytes, or '2G', '500M'; None: the "
            "queue's default."
        ).tag(changeable_at_resubmit=True),
        "walltime": Walltime(
            help="Time limit (h_rt): a timedelta, seconds or '1:30:00'; None: the queue's."
        ).tag(changeable_at_resubmit=True),
        "extra_options": traitlets.List(
            SubmitOption("-l mem_free=2G"),
            help="More #$ options, one per item, e.g. ['-l mem_free=2G', '-m ea'].",
        ).tag(changeable_at_resubmit=True),
        "setup": traitlets.List(
            SingleLine(), help="Shell lines run before the program, e.g. ['module load gcc']."
        ).tag(changeable_at_resubmit=True),
        "array_throttle": traitlets.Int(
            None,
            allow_none=True,
            min=1,
            help="At most this many subjobs of an array run at once (qsub -tc); None: no limit.",
        ).tag(changeable_at_resubmit=True),
        "bulk": traitlets.Bool(
            True, help="True: a split job is one array job. False: one qsub per subjob."
        ),
        "id": traitlets.Unicode(
            "",
            help="Grid Engine job id: '123.5' for task 5 of array 123 (subjob 4), '123' for "
            "a job; for a master, the array(s) of its latest submission.",
        ).tag(protected=True, copyable=False),
    }
    scheduler = SCHEDULER
    # What a Retry may grow.
    growable = frozenset({"memory", "walltime"})
    config_sections = (SGESection,)

    queue: str
    project: str
    process_count: int
    launcher: str
    parallel_environment: str
    memory: int | None
    walltime: timedelta | None
    extra_options: tuple[str, ...]
    setup: tuple[str, ...]
    array_throttle: int | None
    bulk: bool
    id: str

    def grow(self, factors: Mapping[str, float]) -> list[str]:
        """Multiply ``memory`` (rounded up to a MiB) and ``walltime`` (to a second) by their
        factors; one left to the queue's default (None) has nothing to grow."""
        grown = grown_all({n: getattr(self, n) for n in self.growable}, factors)
        lines = [f"{name} {shown(getattr(self, name))} -> {shown(v)}" for name, v in grown.items()]
        for name, value in grown.items():
            self._assign(name, value)
        return lines

    # -- the batch base's hooks ------------------------------------------------------

    @classmethod
    def batch_settings(cls, ctx: SubmitContext | PollContext) -> SGESection:
        return ctx.config[SGESection]

    def plan(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]], settings: BatchSettings
    ) -> tuple[list[Batch], dict[str, str]]:
        assert isinstance(settings, SGESection)
        return self._plan(ctx, jobs, settings, lambda: _array_limit(ctx, settings))

    def plan_preview(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]], settings: BatchSettings
    ) -> tuple[list[Batch], dict[str, str], list[str]]:
        """As :meth:`plan`; a max_aj_tasks that cannot be read is assumed, and said so."""
        assert isinstance(settings, SGESection)
        assumed: list[str] = []
        once = single_attempt(SGESection, settings)

        def limit() -> int:
            try:
                return _array_limit(ctx, once)
            except BackendError as exc:
                assumed.append(f"# {exc}; assumed {SCHEDULER.default_max_tasks}")
                return SCHEDULER.default_max_tasks

        return (*self._plan(ctx, jobs, settings, limit), assumed)

    def _plan(
        self,
        ctx: SubmitContext,
        jobs: Sequence[tuple[Job, RunSpec]],
        settings: SGESection,
        limit: Any,
    ) -> tuple[list[Batch], dict[str, str]]:
        refused = _launch_problems(jobs)
        wanted = settings.max_array_size
        batches, failed = plan_batches(
            ctx,
            [pair for pair in jobs if pair[0].fqid not in refused],
            options_of=_options_of,
            place=lambda options: "",  # no queue named: Grid Engine chooses
            command=_element,
            array_size=lambda: min(limit(), wanted) if wanted > 0 else limit(),
            new_name=batch_name,
        )
        return consecutive_arrays(batches, batch_name), {**refused, **failed}

    def render(
        self, batch: Batch, members: Sequence[Member] | None = None
    ) -> tuple[str | None, dict[str, str]]:
        log_dir = self.log_dir(batch.top)
        return render_pinned(
            lambda chosen: render(batch, chosen, log_dir),
            batch.members if members is None else members,
            ScriptError,
        )

    @staticmethod
    def describe(batch: Batch) -> str:
        where = f", queue {batch.queue}" if batch.queue else ""
        return BatchBackend.describe(batch) + where


def _options_of(job: Job) -> tuple[Options, str, bool]:
    backend = job.backend
    options = Options(
        queue=backend.queue,
        project=backend.project,
        parallel_environment=backend.parallel_environment,
        process_count=backend.process_count,
        memory=backend.memory,
        walltime=backend.walltime,
        extra_options=tuple(backend.extra_options),
        setup=tuple(backend.setup),
        array_throttle=backend.array_throttle,
    )
    return options, backend.queue, backend.bulk


def _element(job: Job, spec: RunSpec, root: str, options: Options) -> Any:
    count = options.process_count
    words = launcher_words(resolve_launcher(job.backend.launcher, count, "mpirun"), count)
    return element_command(job, spec, root, words)


def _launch_problems(pairs: Sequence[tuple[Job, RunSpec]]) -> dict[str, str]:
    """fqid -> why its processes cannot be started, for the jobs that cannot."""
    problems: dict[str, str] = {}
    for job, _spec in pairs:
        backend = job.backend
        count = backend.process_count
        if count > 1 and not backend.parallel_environment:
            problems[job.fqid] = (
                f"SGE.parallel_environment: process_count={count} needs a parallel "
                "environment giving the slots (qconf -spl lists them), got ''"
            )
            continue
        # An MPI the setup lines bring in (`module load mpich`) is not on PATH here.
        name = resolve_launcher(backend.launcher, count, "mpirun")
        find = None if backend.setup else shutil.which
        problem = launch_problem(name, count, LOCAL_LAUNCHERS, find=find)
        if problem is not None:
            problems[job.fqid] = f"SGE.launcher: {problem}"
    return problems


class ArrayLimit:
    """The cluster's max_aj_tasks, read at most once per ``limits_cache_seconds`` while
    the session lasts (``ctx.kept(ArrayLimit)``): a loop of submissions reads it once."""

    def __init__(self) -> None:
        self._read: tuple[int, float] | None = None  # the value, and when it was read

    def get(self, settings: SGESection) -> int:
        now = time.monotonic()
        if self._read is None or now - self._read[1] > settings.limits_cache_seconds:
            self._read = (SCHEDULER.max_array_tasks(settings), now)
        return self._read[0]


def _array_limit(ctx: SubmitContext, settings: SGESection) -> int:
    try:
        return ctx.kept(ArrayLimit).get(settings)
    except CommandError as exc:
        raise BackendError(
            f"cannot read the cluster's max_aj_tasks: qconf: {exc.message}",
            transient=exc.transient,
        ) from None
