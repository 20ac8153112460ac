"""Job status: the states, their order, and the one transition table.

The order is PSI/J's partial order: a state's ``order`` says how far along a job is, so
``wait(until=RUNNING)`` is satisfied by ``COMPLETED``. Final states end a job's run;
resubmission leaves them again through the table.

``waiting`` and ``skipped`` belong to jobs that wait for others (``after=``,
``ganga_like.runtime.workflow``): a waiting job goes on to be submitted or ends
``skipped``; resubmitting what it waited for re-arms a skipped job to ``waiting``.

The frozen states (``completed_frozen``, ``failed_frozen``) are final states a user puts a
finished job or subjob in to say "this result stands": a master's derived status ignores
its frozen subjobs, and a master's resubmission never picks them. Only ``unfreeze`` leaves
them, back to the state the job had.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Iterable

from ganga_like.config.choices import MASTER_STATUS_ORDERS
from ganga_like.errors import IllegalTransitionError, UnknownStatusError, safe_repr

__all__ = [
    "MASTER_STATUS_ORDERS",
    "TRANSITIONS",
    "Status",
    "check_transition",
    "freezing",
    "master_status",
    "master_status_order",
    "path_to",
    "set_master_status_order",
]


class Status(enum.Enum):
    """The status of a job or subjob. ``str(status)`` is its lower-case name.

    New states go last: status chunks store a state as its place here."""

    NEW = ("new", 0, False)
    SUBMITTING = ("submitting", 1, False)
    SUBMITTED = ("submitted", 2, False)
    RUNNING = ("running", 3, False)
    COMPLETING = ("completing", 4, False)
    COMPLETED = ("completed", 5, True)
    FAILED = ("failed", 5, True)
    KILLED = ("killed", 5, True)
    COMPLETED_FROZEN = ("completed_frozen", 5, True)
    FAILED_FROZEN = ("failed_frozen", 5, True)
    # A job that waits for other jobs (``after=``): submitted by the user, not yet handed
    # to its backend. It is no further along than a new job.
    WAITING = ("waiting", 0, False)
    # A job whose ``after=`` condition can no longer hold: it never ran, and never will
    # unless what it waited for is resubmitted.
    SKIPPED = ("skipped", 5, True)

    def __init__(self, label: str, order: int, final: bool) -> None:
        self.label = label
        self.order = order
        self.final = final

    def __str__(self) -> str:
        return self.label

    @classmethod
    def parse(cls, value: str | Status) -> Status:
        """Accept a Status or its name in any case ("failed", "FAILED")."""
        if isinstance(value, Status):
            return value
        try:
            return _BY_LABEL[value.lower()]
        except (KeyError, AttributeError, TypeError):  # not a status name, or not a string
            labels = [s.label for s in cls]
            close = (
                difflib.get_close_matches(value.lower(), labels, n=1)
                if isinstance(value, str)
                else []
            )
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise UnknownStatusError(
                f"unknown status {safe_repr(value)}; {hint}expected one of: {', '.join(labels)}"
            ) from None

    @property
    def place(self) -> tuple[int, int]:
        """Where the state is shown among others: by how far along it is, and states of one
        step (completed, failed, killed...) as declared here, so a count of them reads the
        same whatever order it was stored in."""
        return (self.order, _DECLARED[self])

    @property
    def active(self) -> bool:
        """True while a backend is responsible for the job (it must be monitored)."""
        return self in (Status.SUBMITTED, Status.RUNNING, Status.COMPLETING)

    @property
    def frozen(self) -> bool:
        """True for the states only ``unfreeze`` leaves (ignored by a master's status)."""
        return self in (Status.COMPLETED_FROZEN, Status.FAILED_FROZEN)

    def reached(self, target: Status) -> bool:
        """True when a job in this state has reached or passed ``target``.

        Final states are mutually exclusive: a failed job never "reaches" completed.
        """
        if target.final:
            return self is target
        return self.order >= target.order


_BY_LABEL = {s.label: s for s in Status}
_DECLARED = {s: i for i, s in enumerate(Status)}

_FINAL = (Status.COMPLETED, Status.FAILED, Status.KILLED)

# What freezing a finished job makes of it: a killed job did not complete either.
_FREEZING = {
    Status.COMPLETED: Status.COMPLETED_FROZEN,
    Status.FAILED: Status.FAILED_FROZEN,
    Status.KILLED: Status.FAILED_FROZEN,
}


def freezing(status: Status) -> Status | None:
    """The frozen state a job in ``status`` is frozen to; None when it cannot be frozen."""
    return _FREEZING.get(status)


# The one transition table. Keys are the current state, values the states it may move to.
# Monitoring moves forward; user actions (kill, resubmit, force_status, rollback) are here
# too so that nothing else in the code decides what is legal.
TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.NEW: frozenset({Status.SUBMITTING, Status.SUBMITTED, Status.WAITING, Status.SKIPPED}),
    # A waiting job is submitted once its condition holds (a submission that fails
    # leaves it new, as any), skipped when the condition can no longer hold, or killed.
    Status.WAITING: frozenset({Status.SUBMITTING, Status.SKIPPED, Status.KILLED}),
    # Re-armed when what it waited for is resubmitted.
    Status.SKIPPED: frozenset({Status.WAITING, Status.NEW}),
    Status.SUBMITTING: frozenset({Status.NEW, Status.SUBMITTED, Status.FAILED, Status.KILLED}),
    Status.SUBMITTED: frozenset({Status.RUNNING, *_FINAL}),
    Status.RUNNING: frozenset({Status.COMPLETING, *_FINAL}),
    Status.COMPLETING: frozenset(_FINAL),
    # Leaving a final state: resubmission goes back through submitting; force_status may
    # flip one final state into another.
    # Freezing (a user's action) and unfreezing, back to the state frozen.
    Status.COMPLETED: frozenset({Status.SUBMITTING, Status.FAILED, Status.COMPLETED_FROZEN}),
    Status.FAILED: frozenset({Status.SUBMITTING, Status.COMPLETED, Status.FAILED_FROZEN}),
    Status.KILLED: frozenset(
        {Status.SUBMITTING, Status.FAILED, Status.COMPLETED, Status.FAILED_FROZEN}
    ),
    Status.COMPLETED_FROZEN: frozenset({Status.COMPLETED}),
    Status.FAILED_FROZEN: frozenset({Status.FAILED, Status.KILLED}),
}

# The path a job takes when every step is observed; used to fill in missed states.
_FORWARD = (Status.SUBMITTED, Status.RUNNING, Status.COMPLETING)


def check_transition(old: Status, new: Status) -> None:
    """Raise IllegalTransitionError unless the table allows ``old -> new``."""
    if new not in TRANSITIONS[old]:
        raise IllegalTransitionError(f"a job cannot go from {old} to {new}")


def path_to(old: Status, observed: Status, *, started: bool = True) -> list[Status]:
    """The states a job passes through from ``old`` to an ``observed`` state.

    A job seen completed without ever being seen running passes through running: the
    intermediate forward states are filled in (``started=False`` says the program never
    ran, e.g. it was not found, so no running state is invented). Observations that go
    backwards or repeat the current state give an empty path: a stale poll must never move
    a job back.
    """
    if observed is old:
        return []
    if old.final or observed.order < old.order:
        return []
    if observed in TRANSITIONS[old]:
        fills_running = observed in (Status.COMPLETED, Status.FAILED) and started
        if fills_running and old is Status.SUBMITTED:
            return [Status.RUNNING, observed]
        return [observed]
    path: list[Status] = []
    current = old
    for step in _FORWARD:
        if step.order <= current.order:
            continue
        if step.order >= observed.order:
            break
        path.append(step)
        current = step
    path.append(observed)
    for a, b in zip([old, *path], path, strict=False):
        check_transition(a, b)
    return path


# How a master's status is derived while some subjobs wait and others run. The splitting
# design lets its first two rules be swapped; "running_first" (the default) swaps them, so a
# big split job shows `running` as soon as any subjob runs instead of `submitted` until the
# last subjob starts. "submitted_first" is the design's own order. Set from the
# configuration (Jobs.master_status_order) when a session opens; the model only reads it.
_master_order = MASTER_STATUS_ORDERS[0]


def set_master_status_order(order: str) -> None:
    """Choose how masters' statuses are derived (one of MASTER_STATUS_ORDERS)."""
    global _master_order
    if order not in MASTER_STATUS_ORDERS:
        raise ValueError(
            f"unknown master status order {order!r}; expected one of: "
            f"{', '.join(MASTER_STATUS_ORDERS)}"
        )
    _master_order = order


def master_status_order() -> str:
    return _master_order


# A subjob held ``waiting`` by its workflow's throttle is queued as one at its backend is:
# its master is submitted, not done, while it waits for room.
_QUEUED = frozenset({Status.SUBMITTING, Status.SUBMITTED, Status.WAITING})
_RUNNING = frozenset({Status.RUNNING, Status.COMPLETING})


def master_status(counts: Iterable[tuple[Status, int]], order: str | None = None) -> Status:
    """A master's status from its subjob counts, by the splitting design's rules.

    With the default order ("running_first"), any running or completing subjob makes the
    master running; else any submitting/submitted makes it submitted. With the design's own
    order ("submitted_first") those two rules come the other way round. Then: any new ->
    new; else any failed -> failed; else any completed -> completed; else killed. A master
    with no subjob counted is new.

    Frozen subjobs are left out: a master whose other subjobs all completed is completed
    whatever its frozen ones ended as. A master whose subjobs are all frozen is completed
    if one of them completed, else failed.

    The "new" rule is this project's addition: the design leaves subjobs whose submission
    failed (or never happened: a submitting process killed part way) ``new``, and says
    nothing of the master once the others have finished. Calling it completed or failed
    would hide work that never ran; ``new`` says what is true (part of it was never
    submitted) and what to do (``submit()`` runs exactly those subjobs).
    """
    counted = {status for status, n in counts if n > 0}
    present = {status for status in counted if not status.frozen}
    if not present:
        if not counted:
            return Status.NEW
        if Status.COMPLETED_FROZEN in counted:
            return Status.COMPLETED
        return Status.FAILED
    first, second = (_RUNNING, Status.RUNNING), (_QUEUED, Status.SUBMITTED)
    if (order or _master_order) == "submitted_first":
        first, second = second, first
    for group, derived in (first, second):
        if present & group:
            return derived
    if Status.NEW in present:
        return Status.NEW
    if Status.FAILED in present:
        return Status.FAILED
    if Status.COMPLETED in present:
        return Status.COMPLETED
    if Status.KILLED in present:
        return Status.KILLED
    if Status.SKIPPED in present:
        return Status.SKIPPED
    return Status.NEW
