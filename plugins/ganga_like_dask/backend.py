"""Dask: subjobs run on the workers of a ``distributed`` cluster.

Submission sends a split job's subjobs in one ``client.map`` (``pure=False``, one key per
subjob recorded on its backend) and has the scheduler hold every key under a name of our own
(:mod:`.scheduler_side`), so that tasks and results outlive the submitting session's
client. Each monitoring cycle asks each scheduler once for the state of all followed keys,
fetches the results of the finished ones in one gather, writes their stdout, stderr, output
files and run record into the subjobs' output directories, and then releases those keys in
one call. A scheduler that does not answer raises a transient error: its jobs stay as they
are and are found again when it answers.
"""

from __future__ import annotations

# distributed imports this on first use, and it refuses to be imported first once the
# interpreter is exiting: a monitoring cycle still running then, in a session that never
# used distributed before, must not fail on it. Imported with the backend instead.
import concurrent.futures.thread  # noqa: F401
import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Final

import psutil
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
from ganga_like.model.status import Status
from ganga_like.model.workspace import keep_earlier_output, run_environment, stage_inputs
from ganga_like.private import make_private_dirs, write_private
from ganga_like_dask import default_cluster, scheduler_side, task
from ganga_like_dask.address import SchedulerAddress
from ganga_like_dask.dask_clients import DaskConnections, DaskUnreachable, on_scheduler
from ganga_like_dask.settings import Dask as DaskSection

__all__ = ["Dask"]

log = logging.getLogger("ganga_like")

# Longest wait for the scheduler to know every submitted key before holding them.
HOLD_PATIENCE = 30.0

_FINAL: Final[Mapping[str, Status]] = {
    "completed": Status.COMPLETED,
    "failed": Status.FAILED,
    "killed": Status.KILLED,
}


class DaskPoller(Poller):
    """What the Dask backend keeps between monitor cycles."""

    def __init__(self) -> None:
        # Task keys last reported running: reported once, kept once committed.
        self.running: Staged[set[str]] = Staged(set())


class Dask(IBackend):
    """Runs each subjob as a task on a Dask ``distributed`` cluster: ``Dask(address=
    "tcp://host:8786")`` for a running scheduler, ``Dask()`` for the gangadir's own cluster
    (``config Dask.n_workers`` workers), a detached process started on demand and shared by
    the gangadir's sessions (:mod:`.default_cluster`). The program runs
    in a fresh directory on a worker, with its input files; stdout, stderr, the exit code
    and output files come back into the subjob's output directory."""

    config_sections = (DaskSection,)

    _schema: ClassVar[dict[str, traitlets.TraitType[Any, Any]]] = {
        "address": SchedulerAddress(
            help="The Dask scheduler, e.g. 'tcp://host:8786'; empty: the gangadir's own "
            "cluster, started on demand.",
        ),
        "scheduler": traitlets.Unicode(
            "", help="The scheduler the (sub)job was sent to (set at submit)."
        ).tag(protected=True, copyable=False),
        "key": traitlets.Unicode("", help="The Dask task key of the subjob.").tag(
            protected=True, copyable=False
        ),
        # Several processes, side by side on the worker that runs the (sub)job.
        **process_schema(LOCAL_LAUNCHERS, "multiple"),
    }
    supports_real_bulk = True
    per_job_state = True  # each subjob keeps its task key
    poller_class = DaskPoller

    address: str
    scheduler: str
    key: str
    process_count: int
    launcher: str

    def _scheduler(self, ctx: SubmitContext, section: DaskSection) -> tuple[str, dict[str, Any]]:
        """The scheduler to use, and what each payload sent there carries besides: for
        ``address``, nothing; for the gangadir's own cluster (started when none runs),
        how this session's environment differs from its workers'."""
        if self.address:
            return self.address, {}
        try:
            record = default_cluster.ensure_cluster(
                ctx.gangadir, section.n_workers, section.threads_per_worker, section.idle_exit
            )
        except BackendError:
            raise
        except Exception as exc:  # anything else starting it raises: one line, nothing sent
            raise BackendError(f"the Dask cluster could not be started: {exc}") from None
        ctx.kept(DaskConnections).trust(record.address, record.security())
        return record.address, {"environment": default_cluster.environment_change(record)}

    def submit_bulk(
        self, ctx: SubmitContext, jobs: Sequence[tuple[Job, RunSpec]], keep_going: bool
    ) -> SubmitOutcome:
        # The launchers first: one that cannot start its processes starts no cluster.
        launches: dict[tuple[str, int], tuple[str, ...] | str] = {}
        # An MPI is looked for here only when the workers run here (the LocalCluster).
        find = None if self.address else shutil.which
        words = [
            start_words(job.backend, "multiple", LOCAL_LAUNCHERS, launches, find=find)
            for job, _spec in jobs
        ]
        if all(isinstance(w, str) for w in words):
            return SubmitOutcome(
                failed={j.fqid: str(w) for (j, _), w in zip(jobs, words, strict=True)}
            )
        section = ctx.config[DaskSection]
        with contextlib.ExitStack() as stack:
            if not self.address:  # the gangadir's cluster does not leave meanwhile
                stack.enter_context(default_cluster.in_use(ctx.gangadir))
            address, extra = self._scheduler(ctx, section)
            return self._send(ctx, section, jobs, words, keep_going, address, extra)

    def _send(
        self,
        ctx: SubmitContext,
        section: DaskSection,
        jobs: Sequence[tuple[Job, RunSpec]],
        words: list[tuple[str, ...] | str],
        keep_going: bool,
        address: str,
        extra: dict[str, Any],
    ) -> SubmitOutcome:
        connections = ctx.kept(DaskConnections)
        client = connections.client_for(address, section.timeout)  # unreachable: raises
        outcome = SubmitOutcome(real_bulk=True)
        token = _token(ctx, jobs[0][0])
        payloads: list[dict[str, Any]] = []
        chosen: list[Job] = []
        for index, ((job, spec), launch) in enumerate(zip(jobs, words, strict=True)):
            try:
                if isinstance(launch, str):
                    outcome.failed[job.fqid] = launch
                else:
                    payloads.append({**_payload(ctx, job, spec, token, launch), **extra})
                    chosen.append(job)
            except OSError as exc:
                outcome.failed[job.fqid] = f"preparing the workspace failed: {exc}"
            if job.fqid in outcome.failed and not keep_going:
                outcome.not_attempted = [j.fqid for j, _ in jobs[index + 1 :]]
                break
        if not payloads:
            return outcome
        keys = [p["key"] for p in payloads]
        timeout = section.timeout

        def send(c: Any) -> list[str]:
            futures = c.map(task.run, payloads, key=keys, pure=False)
            missing = keys
            deadline = time.monotonic() + HOLD_PATIENCE
            while missing and time.monotonic() < deadline:
                missing = on_scheduler(c, timeout, scheduler_side.hold, missing)
                if missing:
                    time.sleep(0.05)
            del futures  # held by the scheduler now: this client may let them go
            result: list[str] = missing
            return result

        missing = set(connections.call(address, timeout, send))
        for job in chosen:
            key = _key(job, token)
            if key in missing:
                outcome.failed[job.fqid] = f"the Dask scheduler at {address} did not take it"
                continue
            job.backend._assign("key", key)
            job.backend._assign("scheduler", address)
        del client
        return outcome

    def received_bulk(self, ctx: SubmitContext, jobs: Sequence[Job]) -> set[str] | None:
        """For the recovery of an interrupted submission: the fqids of ``jobs`` whose tasks
        the scheduler knows, or whose programs have started there (a task its submitting
        client let go of when it died may have run all the same); each found gets its
        key and scheduler back, to be followed. None when the scheduler does not answer.
        The gangadir's own cluster, when it is gone, received nothing that still runs."""
        section = ctx.config[DaskSection]
        address = self.address
        if not address:
            record = default_cluster.alive_record(ctx.gangadir)
            if record is None:
                return set()
            address = record.address
            ctx.kept(DaskConnections).trust(address, record.security())
        by_key = {_key(job, _token(ctx, job)): job for job in jobs}
        timeout = section.timeout

        def known(c: Any) -> list[str]:
            found: list[str] = on_scheduler(c, timeout, scheduler_side.known, list(by_key))
            return found

        try:
            found = ctx.kept(DaskConnections).call(address, timeout, known)
        except DaskUnreachable:
            return None
        for key in found:
            backend = getattr(by_key[key], "backend", None)
            if backend is not None:  # (a bare skeleton of a subjob has none)
                backend._assign("key", key)
                backend._assign("scheduler", address)
        return {by_key[key].fqid for key in found}

    def kill_bulk(self, ctx: SubmitContext, jobs: Sequence[Job]) -> dict[str, str]:
        section = ctx.config[DaskSection]
        by_address: dict[str, list[Job]] = {}
        for job in jobs:
            if job.backend.key:
                by_address.setdefault(job.backend.scheduler, []).append(job)
        errors: dict[str, str] = {}
        for address, group in by_address.items():
            if not group[0].backend.address and not _gangadir_cluster(ctx, address):
                continue  # the gangadir's cluster that ran them is gone, and they with it
            keys = [j.backend.key for j in group]

            def kill(c: Any, keys: list[str] = keys, t: float = section.timeout) -> None:
                # Cancelled first, so that no queued one starts; then the running
                # programs are stopped on whichever worker runs them.
                on_scheduler(c, t, scheduler_side.cancel, keys)
                c.sync(c._run, task.kill_keys, keys, callback_timeout=t)

            try:
                ctx.kept(DaskConnections).call(address, section.timeout, kill)
            except BackendError as exc:
                errors.update((j.fqid, str(exc)) for j in group)
        return errors

    def monitor_data(self, job: Job) -> Mapping[str, Any]:
        backend = job.backend
        return {
            "id": backend.key,
            "address": backend.scheduler,
            # The gangadir's own cluster: once it has ended, so have its jobs.
            "default": not backend.address,
        }

    @classmethod
    def poll(cls, ctx: PollContext, refs: Sequence[ActiveRef]) -> list[StatusReport]:
        poller = ctx.poller_as(DaskPoller)
        running = poller.running.value
        by_address: dict[str, list[ActiveRef]] = {}
        for ref in refs:
            if ref.backend_data.get("id"):
                by_address.setdefault(str(ref.backend_data["address"]), []).append(ref)
        reports: list[StatusReport] = []
        new_running: set[str] = set()
        unreachable: BackendError | None = None
        for address, here in sorted(by_address.items()):
            if here[0].backend_data.get("default") and not _gangadir_cluster(ctx, address):
                reports.extend(_ended_with_cluster(ctx, ref, address) for ref in here)
                continue
            try:
                reports.extend(_poll_at(ctx, address, here, running, new_running))
            except DaskUnreachable as exc:
                gone = _owner_gone(here)
                if gone:
                    now = time.time()
                    reports.extend(
                        StatusReport(
                            ref.fqid,
                            Status.FAILED,
                            now,
                            reason=f"the Dask LocalCluster of process {gone} ended with it",
                            started=False,
                        )
                        for ref in here
                    )
                else:
                    unreachable = exc
        poller.running.stage(new_running)
        if unreachable is not None:
            if not reports:
                raise unreachable
            log.warning("%s", unreachable)
        return reports


def _poll_at(
    ctx: PollContext,
    address: str,
    here: list[ActiveRef],
    running: set[str],
    new_running: set[str],
) -> list[StatusReport]:
    """The reports of ``here``, followed at ``address``, from one call for their states
    (which also releases what the cycle before wrote) and one gather of the finished
    ones' results. Raises DaskUnreachable."""
    timeout = ctx.config[DaskSection].timeout
    connections = ctx.kept(DaskConnections)
    keys = [str(ref.backend_data["id"]) for ref in here]
    written = connections.releases_due(address)

    def observe(c: Any) -> Any:
        return _observe(c, timeout, keys, written)

    try:
        answer, results = connections.call(address, timeout, observe)
    except DaskUnreachable:
        connections.release_later(address, written)
        raise
    reports: list[StatusReport] = []
    done: list[str] = []
    following = 0
    for ref in here:
        key = str(ref.backend_data["id"])
        observed = answer.get(key)  # none: no news of it (queued, or not started)
        report = None if observed is None else _report(ctx, ref, observed, results.get(key))
        if report is None or report.status is Status.RUNNING:
            following += 1
        if report is None:
            continue
        if report.status is Status.RUNNING:
            new_running.add(key)
            if key in running:
                continue  # reported by an earlier cycle
        elif key in results or observed[0] == "erred":
            done.append(key)
        reports.append(report)
    if done and following:
        # Written into the output directories: the scheduler may forget them, with the
        # next cycle's call (a cycle that still follows one, its commit having failed,
        # reads its outcome from ``__run__``).
        connections.release_later(address, done)
    elif done:  # nothing left to follow here: no next call to go with

        def release(c: Any) -> None:
            on_scheduler(c, timeout, scheduler_side.release, done)

        with contextlib.suppress(BackendError):
            connections.call(address, timeout, release)
    return reports


def _key(job: Job, token: str) -> str:
    return f"ganga_like-{job.fqid}@{job.submit_count}-{token}"


def _token(ctx: SubmitContext, job: Job) -> str:
    """What sets a gangadir's job apart at a scheduler that several gangadirs share, and
    from an earlier job that had its id: the gangadir and when the top-level job was made.
    The same for the same job whoever asks, so that a session recovering an interrupted
    submission finds the keys it was given (``received_bulk``)."""
    top = job.master or job
    identity = f"{Path(ctx.gangadir).resolve()}|{top._created_at()!r}|{top.id}"
    return hashlib.sha256(identity.encode()).hexdigest()[:8]


def _root(workspace: str, job: Job) -> str:
    master = job.master
    if master is None:
        return os.path.join(workspace, str(job.id))
    return os.path.join(workspace, str(master.id), str(job.id))


def _payload(
    ctx: SubmitContext, job: Job, spec: RunSpec, token: str, launch: Sequence[str] = ()
) -> dict[str, Any]:
    root = _root(str(ctx.workspace), job)
    output = keep_earlier_output(root, job.submit_count)
    make_private_dirs(output)
    # Kept in the input directory as with Local, and sent from there in the payload: the
    # workers need not see this file system.
    inputs = []
    for staged in stage_inputs(root, spec.inputs):
        with open(staged, "rb") as handle:
            inputs.append((os.path.basename(staged), handle.read()))
    env = run_environment(job, spec)
    return {
        "key": _key(job, token),
        "argv": [*spec.wrapper, *launch, *spec.argv],
        "env": env,
        "inputs": inputs,
        "output_patterns": list(spec.output_patterns),
    }


def _observe(
    client: Any, timeout: float, keys: list[str], written: list[str]
) -> tuple[dict[str, tuple[str, float | None, str]], dict[str, dict[str, Any]]]:
    """One call for the states of the keys with news (releasing ``written`` first), one
    gather for the results of the finished ones."""
    from distributed import Future

    answer: dict[str, tuple[str, float | None, str]] = on_scheduler(
        client, timeout, scheduler_side.observe, keys, written, task.STARTED_TOPIC
    )
    finished = [k for k, (state, _, _) in answer.items() if state == "memory"]
    results: dict[str, dict[str, Any]] = {}
    if finished:
        # Futures of keys another client may have submitted: the scheduler, told that this
        # client wants them, reports them in memory (our hold keeps them there).
        futures: list[Any] = [Future(k, client) for k in finished]
        client._send_to_scheduler({"op": "client-desires-keys", "keys": finished})
        values = client.sync(client._gather, futures, callback_timeout=timeout)
        results = dict(zip(finished, values, strict=True))
    return answer, results


def _report(
    ctx: PollContext,
    ref: ActiveRef,
    observed: tuple[str, float | None, str],
    result: dict[str, Any] | None,
) -> StatusReport | None:
    state, started, error = observed
    now = time.time()
    if state == "cancelled":
        return None  # killed just now: the session that killed it records that
    if state == "killed":
        return StatusReport(
            ref.fqid,
            Status.KILLED,
            now,
            reason="killed; the session that killed it did not record it",
            started=started is not None,
            started_at=started,
        )
    if state == "memory" and result is not None:
        _write_outcome(str(ctx.workspace), ref, result)
        return _final(ref, result, now)
    if state in ("unknown", "released", "forgotten"):
        # Released once its outcome was written, by a cycle whose commit then failed.
        record = _read_record(str(ctx.workspace), ref)
        if record is not None:
            return _final(ref, record, now)
    if state == "erred":
        return StatusReport(ref.fqid, Status.FAILED, now, reason=f"the Dask task erred: {error}")
    if state == "unknown":
        return StatusReport(
            ref.fqid,
            Status.FAILED,
            now,
            reason="the Dask scheduler no longer knows this task (was it restarted?)",
            started=False,
        )
    if state in ("released", "forgotten"):
        return StatusReport(
            ref.fqid, Status.FAILED, now, reason="the Dask task was cancelled", started=False
        )
    if state == "processing" and started is not None:
        return StatusReport(ref.fqid, Status.RUNNING, started)
    return None


def _final(ref: ActiveRef, outcome: Mapping[str, Any], now: float) -> StatusReport:
    """The report of a run that ended: from its result, or its record on disk."""
    start = outcome.get("start")
    return StatusReport(
        ref.fqid,
        _FINAL.get(str(outcome.get("state")), Status.FAILED),
        outcome.get("end") or now,
        reason=str(outcome.get("reason") or ""),
        exit_code=outcome.get("exit_code"),
        started=start is not None,
        started_at=start,
        usage=outcome.get("usage"),  # what its worker measured (task._reap)
    )


def _output_dir(workspace: str, ref: ActiveRef) -> str:
    root = os.path.join(workspace, str(ref.job_id))
    if ref.subjob_id is not None:
        root = os.path.join(root, str(ref.subjob_id))
    return os.path.join(root, "output")


def _read_record(workspace: str, ref: ActiveRef) -> dict[str, Any] | None:
    """The run record ``_write_outcome`` left, if any (None: none, or unreadable)."""
    try:
        with open(os.path.join(_output_dir(workspace, ref), "__run__"), "rb") as handle:
            record = json.loads(handle.read())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _write_outcome(workspace: str, ref: ActiveRef, result: dict[str, Any]) -> None:
    """The subjob's stdout, stderr, output files and, last, its run record (what a later
    cycle reads once the scheduler has forgotten the task) into its output dir."""
    output = _output_dir(workspace, ref)
    make_private_dirs(output)
    write_private(os.path.join(output, "stdout"), result["stdout"])
    write_private(os.path.join(output, "stderr"), result["stderr"])
    for name, data in result["outputs"].items():
        target = os.path.normpath(os.path.join(output, name))
        if not target.startswith(output + os.sep):
            continue  # a pattern never writes outside the output directory
        make_private_dirs(os.path.dirname(target))
        write_private(target, data)
    record = {k: result.get(k) for k in ("state", "exit_code", "start", "end", "reason", "usage")}
    write_private(os.path.join(output, "__run__"), json.dumps(record).encode())


def _gangadir_cluster(ctx: SubmitContext | PollContext, address: str) -> bool:
    """Whether ``address`` is the live cluster of the gangadir (then its clients connect
    with the credentials it left there)."""
    record = default_cluster.alive_record(ctx.gangadir)
    if record is None or record.address != address:
        return False
    ctx.kept(DaskConnections).trust(address, record.security())
    return True


def _ended_with_cluster(ctx: PollContext, ref: ActiveRef, address: str) -> StatusReport:
    """The report of a (sub)job whose gangadir cluster is gone: its recorded outcome if
    it had one, else failed (the cluster was killed or stopped while it held the task)."""
    now = time.time()
    record = _read_record(str(ctx.workspace), ref)
    if record is not None:
        return _final(ref, record, now)
    return StatusReport(
        ref.fqid,
        Status.FAILED,
        now,
        reason=f"the gangadir's Dask cluster ({address}) ended while it held this task",
        started=False,
    )


def _owner_gone(refs: Sequence[ActiveRef]) -> int:
    """The pid of the ended process whose in-session LocalCluster ran ``refs`` (0: none
    such): jobs submitted by an earlier version, which kept its cluster in the session."""
    owners = {int(ref.backend_data.get("owner") or 0) for ref in refs}
    if len(owners) != 1:
        return 0
    owner = owners.pop()
    if owner == 0 or owner == os.getpid() or psutil.pid_exists(owner):
        return 0
    return owner
