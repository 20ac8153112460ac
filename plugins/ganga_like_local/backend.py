"""Local: run subjobs on this machine through the detached runner.

Submission prepares each subjob's workspace (input files copied into its input directory)
and hands all of them to the runner in one batch. The runner keeps going after this process
exits; it appends each task's events to ``<workspace>/<job id>/runner-events.jsonl``, which is
all the monitor reads: one journal per active master per cycle, never one file per subjob,
and only its new lines (by offset). Events are matched to the followed subjobs through an
fqid -> run map kept from cycle to cycle and changed from the monitor's change log of the
followed refs (``ActiveRefs.changes_since``), so a cycle with nothing new costs a constant
per master, not per subjob.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import traitlets

from ganga_like.errors import BackendError
from ganga_like.model.interfaces import (
    ActiveRef,
    IBackend,
    PollContext,
    Poller,
    RunSpec,
    Staged,
    StatusReport,
    SubmitContext,
    SubmitOutcome,
)
from ganga_like.model.job import Job
from ganga_like.model.launchers import LOCAL_LAUNCHERS, process_schema, start_words
from ganga_like.model.ref_follower import RefFollower
from ganga_like.model.workspace import keep_earlier_output, run_environment, stage_inputs
from ganga_like_local.settings import Local as LocalSection
from ganga_like_runner import client as runner_client
from ganga_like_runner.client import TaskSpec
from ganga_like_runner.journal_reports import Pending, read_journals

__all__ = ["Local", "LocalPoller"]

log = logging.getLogger("ganga_like")

JOURNAL = "runner-events.jsonl"
# A runner found dead is restarted at most this often.
REVIVE_INTERVAL = 5.0


def runner_dir(gangadir: Path) -> Path:
    return gangadir / "local-runner"


UNREACHABLE = "the Local runner could not be reached"


def task_key(job: Job) -> str:
    return f"{job.fqid}@{job.submit_count}"


class LocalPoller(Poller):
    """What the Local backend keeps between monitor cycles."""

    def __init__(self) -> None:
        # Per master: how far its journal was read, and the events read but not yet
        # reported (a started event waits briefly for its end); kept once committed.
        self.offsets: Staged[Mapping[int, int]] = Staged({})
        self.pending: Staged[Pending] = Staged({})
        # The followed (sub)jobs' runs and the journals to read (ref_follower).
        self.followed = RefFollower()
        # Kept at once, not staged: a restart has happened whether or not the cycle's
        # commit succeeds.
        self.revived_at = -REVIVE_INTERVAL
        self.revive_failed = False
        self.elsewhere_said = False


# The launchers that can start several processes on this machine.
LAUNCHERS = LOCAL_LAUNCHERS


class Local(IBackend):
    """Runs jobs on this machine, at most ``config Local.max_concurrent`` at once (default:
    the number of cores). Each subjob runs in ``<workspace>/<id>/<subid>/work``, as
    ``process_count`` processes started by ``launcher`` when there are several."""

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        **process_schema(LAUNCHERS, "multiple"),
        "host": traitlets.Unicode(
            "",
            help="The host the (sub)job was submitted on: its runner runs it there (a "
            "gangadir on a filesystem several hosts share).",
        ).tag(protected=True, copyable=False),
    }
    config_sections = (LocalSection,)
    per_job_state = False  # the runner's key is derived from the fqid
    # The runner takes batches one after the other: the first 64 subjobs (about 30 ms of
    # trivial programs on two cores, as long as preparing 1,000 more takes) start at once.
    early_start_batch = 64
    poller_class = LocalPoller

    process_count: int
    launcher: str
    host: str

    def submit_bulk(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]], keep_going: bool
    ) -> SubmitOutcome:
        outcome = SubmitOutcome()
        # Subjobs mostly share one backend: each (launcher, count) is checked once.
        launches: dict[tuple[str, int], tuple[str, ...] | str] = {}
        here = socket.gethostname()  # where the runner runs them

        def tasks() -> Iterator[TaskSpec]:
            # Made one at a time as the batch file is written: a million subjobs' tasks
            # are never all in memory at once.
            for index, (job, spec) in enumerate(jobs):
                launch = start_words(job.backend, "multiple", LAUNCHERS, launches)
                if isinstance(launch, str):
                    outcome.failed[job.fqid] = launch
                else:
                    try:
                        task = self._task(ctx, job, spec, launch)
                    except OSError as exc:
                        outcome.failed[job.fqid] = f"preparing the workspace failed: {exc}"
                    else:
                        if job.backend.host != here:  # mostly one backend, shared
                            job.backend._assign("host", here)
                        yield task
                        continue
                if not keep_going:
                    outcome.not_attempted = [j.fqid for j, _ in jobs[index + 1 :]]
                    return

        section = ctx.config[LocalSection]
        try:
            runner_client.submit(
                runner_dir(ctx.gangadir),
                tasks(),
                dict(os.environ),
                max_concurrent=section.max_concurrent,
                idle_exit_seconds=section.idle_exit,
            )
        except OSError as exc:
            raise BackendError(f"the Local runner could not be started: {exc}") from exc
        return outcome

    def _task(
        self, ctx: SubmitContext, job: Job, spec: RunSpec, launch: Sequence[str] = ()
    ) -> TaskSpec:
        # Plain strings, not pathlib: this runs once per subjob on the submit path.
        master = job.master
        top = str(master.id if master is not None else job.id)
        base = os.path.join(str(ctx.workspace), top)
        root = base if master is None else os.path.join(base, str(job.id))
        output = keep_earlier_output(root, job.submit_count)
        inputs = stage_inputs(root, spec.inputs)
        env = run_environment(job, spec)
        return TaskSpec(
            key=task_key(job),
            argv=[*spec.wrapper, *launch, *spec.argv],
            env=env,
            workdir=os.path.join(root, "work"),
            output_dir=output,
            inputs=inputs,
            output_patterns=list(spec.output_patterns),
            events=os.path.join(base, JOURNAL),
        )

    def kill_bulk(self, ctx: SubmitContext, jobs: Sequence[Job]) -> dict[str, str]:
        try:
            runner_client.kill(runner_dir(ctx.gangadir), [task_key(j) for j in jobs])
        except OSError as exc:
            return {j.fqid: f"{UNREACHABLE}: {exc}" for j in jobs}
        return {}

    def kill_subjobs(
        self, ctx: SubmitContext, master: Job, ids: Sequence[int], every_active: bool
    ) -> dict[str, str]:
        where = runner_dir(ctx.gangadir)
        if not every_active or not runner_client.kills_by_prefix(where):
            return super().kill_subjobs(ctx, master, ids, every_active)
        # Every task of the master: named by the prefix of their keys, none loaded.
        try:
            runner_client.kill(where, [f"{master.id}."])
        except OSError as exc:
            return {f"{master.id}.{index}": f"{UNREACHABLE}: {exc}" for index in ids}
        return {}

    @classmethod
    def poll(cls, ctx: PollContext, refs: Sequence[ActiveRef]) -> list[StatusReport]:
        poller = ctx.poller_as(LocalPoller)
        if refs:
            _revive_runner(ctx, poller)
        poller.followed.follow(refs)
        reports, offsets, pending = read_journals(
            ctx.workspace,
            JOURNAL,
            poller.followed.masters,
            poller.followed.runs,
            poller.offsets.value,
            poller.pending.value,
        )
        poller.offsets.stage(offsets)
        poller.pending.stage(pending)
        return reports

    def monitor_data(self, job: Job) -> Mapping[str, Any]:
        return {}

    def received_bulk(self, ctx: SubmitContext, jobs: Sequence[Job]) -> set[str] | None:
        """The jobs whose task keys are in the runner's batches or in their journals.

        The queue is read before ``accepted/`` (a batch moves from one to the other) and
        both before the journals (a batch is deleted only once its final events are
        written there), so a batch moving or ending meanwhile is still found.
        """
        wanted = {task_key(job): job.fqid for job in jobs}
        found: set[str] = set()
        directory = runner_dir(ctx.gangadir)
        for keys in runner_client.batch_keys(directory):
            found.update(wanted[key] for key in keys if key in wanted)
        journals = {
            os.path.join(str(ctx.workspace), str((job.master or job).id), JOURNAL) for job in jobs
        }
        for journal in sorted(journals):
            events, _ = runner_client.read_events(Path(journal), 0)
            found.update(wanted[e.key] for e in events if e.key in wanted)
        return found


def _revive_runner(ctx: PollContext, poller: LocalPoller) -> None:
    """Restart a runner that died with work left: its jobs then end with no user action.

    The new runner reports the tasks that were running as failed ("the runner died while
    it ran") and runs the queued ones; the events reach the jobs through the journals.
    """
    now = time.monotonic()
    if now - poller.revived_at < REVIVE_INTERVAL:
        return  # a runner that dies at start-up must not be restarted every cycle
    elsewhere = runner_client.runner_elsewhere(runner_dir(ctx.gangadir))
    if elsewhere is not None:
        # Alive on its own host (a gangadir other hosts share): followed from here through
        # its journals, never restarted from here.
        if not poller.elsewhere_said:
            log.info(
                "the Local runner of this gangadir runs on %s: its jobs run there (their "
                "backend.host) and are followed here",
                elsewhere.where(),
            )
        poller.elsewhere_said = True
        return
    try:
        if runner_client.revive(runner_dir(ctx.gangadir)):
            poller.revived_at = now
            log.warning("the Local runner had died with jobs still active; it was restarted")
        poller.revive_failed = False
    except OSError as exc:
        if not poller.revive_failed:
            log.warning("the Local runner is not running and cannot be restarted: %s", exc)
        poller.revive_failed = True
