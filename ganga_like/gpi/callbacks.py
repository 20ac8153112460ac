"""``j.on(status, action)``: what the monitor does when a job reaches a status.

The actions are ``Notify(email=...)`` (a mail through the ``Notifier`` postprocessor's
SMTP configuration), ``Resubmit(times=1)``, ``RunCommand([...])`` and a user's function
named ``"module:name"`` (called with a view of the job; importable by the monitor, the
daemon's included). Each is checked when given, in one line, and stored on the job as
plain data (``model.callbacks``); the monitor runs it (``runtime.workflow.callbacks``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ganga_like.errors import GangaError, JobError, SchemaError
from ganga_like.gpi.arguments import given
from ganga_like.gpi.proxy import current_session
from ganga_like.gpi.slices import JobSlice
from ganga_like.model import plugin_registry
from ganga_like.model.callbacks import Callback
from ganga_like.model.job import Job as JobImpl
from ganga_like.model.status import Status
from ganga_like.runtime.session import Session
from ganga_like.runtime.workflow import callbacks as runner
from ganga_like.runtime.workflow.user_functions import check_function_path

__all__ = [
    "JobReactions",
    "Notify",
    "Resubmit",
    "RunCommand",
    "callbacks_of",
    "not_an_iterate",
    "on",
]

_ACTIONS = 'Notify(email=...), Resubmit(), RunCommand([...]) or a function as "module:name"'


class _Action:
    """A built-in action: what it stores, as ``(kind, argument)``."""

    kind = ""
    argument: Any = None

    def __repr__(self) -> str:
        return runner.describe(("", self.kind, self.argument))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Action) and (self.kind, self.argument) == (
            other.kind,
            other.argument,
        )

    def __hash__(self) -> int:
        return hash((self.kind, self.argument))


class Notify(_Action):
    """``Notify(email="me@example.org")``: a mail when the job reaches the status, sent
    through the SMTP server of the ``Notifier`` configuration section."""

    kind = "notify"

    def __init__(self, email: str) -> None:
        try:
            notifier = plugin_registry.find("Notifier", "postprocessors")(address=email)
        except GangaError as exc:
            text = str(exc).split(": ", 1)[-1]
            raise SchemaError(f"Notify.email: {text}") from None
        if not notifier.address:
            raise SchemaError('Notify.email: expected an e-mail address, e.g. "me@example.org"')
        self.argument = str(notifier.address)


class Resubmit(_Action):
    """``Resubmit(times=1)``: resubmit the job when it reaches the status (``failed``,
    ``killed``), at most ``times`` times over the job's life."""

    kind = "resubmit"

    def __init__(self, times: int = 1) -> None:
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise SchemaError(f"Resubmit.times: expected an int, 1 or more, not {given(times)}")
        self.argument = times


class RunCommand(_Action):
    """``RunCommand(["mail-me.sh", "done"])``: run a command (no shell) in the job's
    output directory, with ``GANGA_JOB_ID`` and ``GANGA_JOB_STATUS`` set."""

    kind = "command"

    def __init__(self, args: list[str] | tuple[str, ...]) -> None:
        words = args if isinstance(args, list | tuple) else None
        if not words or not all(isinstance(w, str) and w for w in words):
            raise SchemaError(
                f"RunCommand.args: expected a list of non-empty strings, not {given(args)}"
            )
        self.argument = tuple(words)


def _stored_form(status: Any, action: Any) -> Callback:
    """What ``on(status, action)`` stores, or SchemaError (one line)."""
    try:
        label = Status.parse(status).label
    except JobError as exc:
        raise SchemaError(f"Job.on(): status: {exc}") from None
    if isinstance(action, _Action):
        return (label, action.kind, action.argument)
    if isinstance(action, str):
        return (label, "function", check_function_path("Job.on(): action", action))
    hint = " (a function object cannot be stored: name it)" if callable(action) else ""
    raise SchemaError(f"Job.on(): action expected {_ACTIONS}, not {given(action)}{hint}")


def on(session: Session, job: JobImpl, status: Any, action: Any) -> None:
    """Store callback ``action`` for ``job`` reaching ``status``; nothing stored when
    refused."""
    callback = _stored_form(status, action)
    if job.master is not None:
        raise JobError(f"job {job.fqid}: callbacks are set on a whole job, not on a subjob")

    def store() -> None:
        job._callbacks = (*job._callbacks, callback)
        runner.make_due_table(session.registry().root)  # then a change only adds to it

    session.repo.in_transaction(store, what=f"adding a callback to job {job.fqid}")


def callbacks_of(job: JobImpl) -> list[str]:
    """A job's callbacks in words, in the order they were added."""
    return [f"on {c[0]}: {runner.describe(c)}" for c in job._callbacks]


class JobReactions:
    """What the GPI Job offers of its callbacks and iterations (a part of its class)."""

    __slots__ = ()

    if TYPE_CHECKING:

        @property
        def _job(self) -> JobImpl: ...

        def _live(self, action: str) -> JobImpl: ...

    def on(self, status: str, action: Any) -> None:
        """Have the monitor run ``action`` each time the job reaches ``status``:
        ``Notify(email=...)``, ``Resubmit()``, ``RunCommand([...])`` or a function as
        ``"module:name"`` (given a view of the job). Each call and its outcome go in the
        job's event log."""
        on(current_session(), self._live("on()"), status, action)

    @property
    def callbacks(self) -> list[str]:
        """The job's callbacks (``on()``), in words."""
        return callbacks_of(self._job)

    @property
    def iterations(self) -> JobSlice:
        """An Iterate's jobs (``Iterate``), first iteration to last; else this job."""
        current_session().refresh()
        job = self._job
        registry, state = current_session().registry(), job._iterate
        found = [registry.get(i) for i in (state[2] if state else (job.id,))]
        return JobSlice([j for j in found if j], title=f"iterations of job {job.fqid}")


def not_an_iterate(job: JobImpl) -> JobImpl:
    """``job``, unless it is an Iterate: one is not resubmitted (JobError, one line)."""
    state = job._iterate
    if state is None:
        return job
    ids = ", ".join(str(i) for i in state[2])
    if state[3]:
        raise JobError(f"job {job.fqid} is an Iterate going on (its iterations: {ids})")
    raise JobError(
        f"job {job.fqid} is an Iterate that ended {job.current_status()}; it is not resubmitted: "
        f"make a new one from its last iteration, Iterate(Job(jobs({state[2][-1]})), until=...)"
    )
