"""The GPI of workflows: ``after=`` as users give it, ``j.upstream``, ``j.downstream``,
``why(j)``, and what submit() and kill() do about jobs that wait for others.

Users give the jobs a job waits for as GPI jobs, subjobs, slices or ids; they are turned
into fqids here, before the value reaches the job (a job is never held by another job),
and checked against the repository (each exists, not the job itself) in one line.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ganga_like.errors import JobError, SchemaError
from ganga_like.gpi.proxy import current_session, unwrap
from ganga_like.model.dependencies import Upstreams, fqid_parts
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.job_output import JobOutput
from ganga_like.model.status import Status
from ganga_like.runtime.submission import actions
from ganga_like.runtime.workflow import (
    driver,  # noqa: F401 (every monitor drives waiting jobs)
    engine,
    index,
    outputs,
    stream,
)
from ganga_like.runtime.workflow import throttle as throttles
from ganga_like.runtime.workflow.condition import Verdict
from ganga_like.runtime.workflow.explain import explain

if TYPE_CHECKING:
    from ganga_like.runtime.session import Session

__all__ = [
    "DEPENDENTS_CHOICES",
    "after_value",
    "check_after",
    "check_inputdata",
    "downstream_ids",
    "kill",
    "reads_outputs",
    "resubmit_skipped",
    "submit",
    "throttle",
    "upstream_fqids",
    "why",
]

DEPENDENTS_CHOICES = ("skip", "keep")


def _fqid_of(value: Any) -> Any:
    fqid = getattr(value, "fqid", None)
    return fqid if isinstance(fqid, str) else value


def after_value(value: Any) -> Any:
    """What a user gave ``after=`` as plain ids: GPI jobs, stored jobs and the members of
    slices and lists by their fqids; anything else as given (the trait refuses it)."""
    if value is None or isinstance(value, str | int):
        return value
    if hasattr(value, "fqid"):
        return _fqid_of(value)
    if isinstance(value, Iterable) and not isinstance(value, dict | bytes):
        return [_fqid_of(v) for v in value]
    return value


def check_after(session: Session, job: JobImpl | None, value: Any) -> None:
    """SchemaError (one line, nothing changed) when ``value`` is not something a job can
    wait for, or names a job that does not exist or the job itself."""
    try:
        fqids = Upstreams().validate(None, value)
    except Exception as exc:  # a TraitError: worded as every attribute's refusal
        raise SchemaError(f"Job.after: {exc}") from None
    try:
        engine.check_upstreams(session.registry(), job, fqids)
    except JobError as exc:
        raise SchemaError(f"Job.after: {exc}") from None


def check_inputdata(session: Session, job: JobImpl | None, value: Any) -> None:
    """SchemaError (one line, nothing changed) when ``value`` is a ``JobOutput`` of a job
    that does not exist, of the job itself, or whose output files cannot match."""
    dataset = unwrap(value)
    if not isinstance(dataset, JobOutput):
        return
    try:
        outputs.check_dataset(session.registry(), job, dataset)
    except JobError as exc:
        raise SchemaError(f"Job.inputdata: {exc}") from None


def reads_outputs(job: JobImpl) -> bool:
    """Whether ``job``'s dataset is the output of another job (so it waits for it)."""
    return outputs.dataset_of(job) is not None


def submit(session: Session, job: JobImpl, keep_going: bool) -> bool:
    """``submit()`` of a job with ``after=``: submitted now when its condition holds,
    skipped when it can no longer hold, else left waiting (the monitor goes on)."""
    if (
        not (job.after or reads_outputs(job))
        or job.current_status() is not Status.NEW
        or job.is_master
    ):
        return actions.submit(session, job, keep_going)  # as any job, or its refusal
    decided: list[Verdict] = []

    def record() -> None:
        decided.clear()
        registry = session.registry()
        outputs.check_before_waiting(registry, job)
        dataset = outputs.dataset_of(job)
        if dataset is not None and dataset.each:
            stream.check_stream(job, dataset)
        decided.append(engine.start_waiting(registry, job))
        if decided[0] is Verdict.GO:  # what it reads is there already: found now
            outputs.resolve(registry, str(session.repo.workspace), job)

    session.repo.in_transaction(record, what=f"submitting job {job.fqid}")
    if decided[0] is Verdict.GO:
        return actions.submit(session, job, keep_going)
    session.poke_monitor()
    if decided[0] is Verdict.NEVER:
        cause = job._skipped_by[1] if job._skipped_by else "its condition cannot hold"
        print(f"job {job.fqid} skipped: {cause}", file=sys.stderr)
        return False
    return True


def _ask(job: JobImpl, waiting: list[int]) -> str | None:
    """In an interactive shell, what the user wants done with ``waiting``; None when
    there is nobody to ask."""
    if not sys.stdin.isatty():
        return None
    shell = sys.modules.get("IPython")
    if shell is None or getattr(shell, "get_ipython", lambda: None)() is None:
        return None
    shown = ", ".join(str(i) for i in waiting)
    answer = input(
        f"job {job.fqid}: job(s) {shown} wait for it. Skip them, keep them waiting "
        "(for a resubmission), or cancel the kill? [s/k/C] "
    )
    return {"s": "skip", "k": "keep"}.get(answer.strip().lower()[:1], "")


def kill(
    session: Session,
    job: JobImpl,
    keep_going: bool,
    dependents: str | None,
    how: str = "kill(dependents='skip') or kill(dependents='keep')",
) -> bool:
    """``kill()`` of a job others wait for: ``dependents`` says what becomes of the
    waiting ones ("skip": skipped, naming the kill; "keep": they keep waiting for a
    resubmission). Without it, the shell asks; anywhere else it is one line, nothing
    killed."""
    if dependents is not None and dependents not in DEPENDENTS_CHOICES:
        raise SchemaError(f"kill(): dependents expected one of 'skip', 'keep', not {dependents!r}")
    top = job.master or job
    waiting = engine.waiting_dependents(session.registry(), top)
    if waiting and dependents is None:
        dependents = _ask(job, waiting)
        if dependents == "":
            print(f"kill of job {job.fqid} cancelled; nothing done", file=sys.stderr)
            return False
        if dependents is None:
            shown = ", ".join(str(i) for i in waiting)
            raise JobError(
                f"job {job.fqid}: job(s) {shown} wait for it; say what becomes of them: {how}"
            )
    if job.master is None and stream.is_streaming(job):  # it grows no more subjobs

        def stop() -> None:
            registry = session.registry()
            stream.stop(job)
            registry.reindex(job)
            engine.upstream_changed(registry, [job], "user")

        session.repo.in_transaction(stop, what=f"killing job {job.fqid}")
        if job.current_status().final:
            return True  # what it had made had ended: stopping it was the whole kill
    job = _current_iteration(session, job)
    waiting_itself = job.master is None and job.current_status() is Status.WAITING
    kill_it = _kill_waiting if waiting_itself else actions.kill
    try:
        if dependents == "keep":
            with engine.keeping_dependents():
                return kill_it(session, job, keep_going)
        return kill_it(session, job, keep_going)
    finally:
        session.poke_monitor()  # what the kill decided is acted on soon


def _current_iteration(session: Session, job: JobImpl) -> JobImpl:
    """What killing ``job`` kills: for an Iterate going on past its first iteration, its
    current iteration (the Iterate then ends failed, naming it); else ``job``."""
    state = job._iterate
    if state is None or not state[3] or len(state[2]) == 1:
        return job
    found = session.registry().get(state[2][-1])
    return found if isinstance(found, JobImpl) else job


def resubmit_skipped(session: Session, job: JobImpl) -> bool:
    """``resubmit()`` of a skipped job: it waits again, and goes on or is skipped again as
    what it waits for says."""

    def record() -> None:
        registry = session.registry()
        if job.current_status() is not Status.SKIPPED:
            raise JobError(f"job {job.fqid} is {job.current_status()}: it is not skipped")
        engine.rearm(registry, job, "user")

    session.repo.in_transaction(record, what=f"resubmitting skipped job {job.fqid}")
    session.poke_monitor()
    return True


def _kill_waiting(session: Session, job: JobImpl, _keep_going: bool) -> bool:
    """A waiting job never reached a backend: killing it is recording it killed (and
    deciding on what waits for it, in that transaction)."""

    def record() -> None:
        registry = session.registry()
        if job.current_status() is not Status.WAITING:
            raise JobError(f"job {job.fqid} is {job.current_status()}: it no longer waits")
        job.change_status(Status.KILLED, "user: kill while waiting")
        table = index.pending(registry.root)
        if table is not None:
            table.pop(job.id, None)
        registry.reindex(job)
        engine.upstream_changed(registry, [job], "user")

    session.repo.in_transaction(record, what=f"killing waiting job {job.fqid}")
    return True


def upstream_fqids(job: JobImpl) -> list[str]:
    return list(job.after)


def downstream_ids(session: Session, job: JobImpl) -> list[int]:
    """The ids of the jobs that wait for ``job`` (or, for a master, for any of its
    subjobs), in id order; a subjob: those waiting for it or its master."""
    root = session.registry().root
    if job.master is not None:
        found = {*index.dependents(root, job.fqid), *index.dependents(root, str(job.master.id))}
    else:
        found = {d for _u, d in index.dependents_of_tree(root, job.id)}
    registry = session.registry()
    return sorted(d for d in found if registry.get(d) is not None)


def why(job: Any) -> None:
    """Print the chain from ``job`` (a job, a subjob, or its id) to the root failure
    when it was skipped, or what it waits for when it waits."""
    registry = current_session().registry()
    impl = unwrap(job)
    if not isinstance(impl, JobImpl):
        text = str(job)
        if not isinstance(job, int | str) or not re.match(r"^[0-9]+(\.[0-9]+)?$", text):
            raise SchemaError(f"why() expected a job, a subjob or an id such as 12.3, not {job!r}")
        job_id, sub = fqid_parts(text)
        impl = registry.lookup(job_id, sub)
        if impl is None:
            raise JobError(f"no job {text}")
    print(explain(registry, impl, monitored=current_session().monitor.lease.anyone_holds()))


_ASKED = object()


def throttle(workflow: Any, limit: Any = _ASKED) -> int | None:
    """At most ``limit`` (sub)jobs of the workflow named ``workflow`` (the jobs whose
    ``workflow`` is that name) submitted or running at once; ``None`` lifts the cap.
    Stored in the repository: every monitor, the daemon's too, keeps to it. Without
    ``limit``: the cap now (None when there is none)."""
    if not isinstance(workflow, str) or not workflow:
        raise SchemaError(f"throttle(): workflow expected a workflow's name, not {workflow!r}")
    session = current_session()
    if limit is _ASKED:
        found: int | None = throttles.limit_of(session.repo.connection().root(), workflow)
        return found
    if limit is not None and (type(limit) is not int or limit < 1):
        raise SchemaError(f"throttle(): limit expected an int >= 1 or None, not {limit!r}")

    def record() -> None:
        throttles.set_limit(session.registry().root, workflow, limit)

    session.repo.in_transaction(record, what=f"setting the throttle of workflow {workflow!r}")
    session.poke_monitor()  # room made by a higher cap is handed over soon
    return limit
