"""What a job does when its status changes: its callbacks (``j.on(status, action)``) and,
for a job repeated by ``Iterate``, the next step of the iteration. Stored as plain data.

A callback is stored on its (top-level) job as ``(status, kind, argument)``: ``kind`` is
``notify`` (argument: an e-mail address), ``resubmit`` (argument: how many times at most),
``command`` (argument: the command's words) or ``function`` (argument: ``"module:name"``).

When a stored job's event log records a change to a status that something waits for, an
entry is added, in that same transaction, to the repository's due table
(``workflow_due``): key ``(job id, n)`` (``n`` counts the job's entries), value
``(what, status, detail, state)``. ``what`` is ``call`` (``detail``: the callback's
place in the job's list) or ``iterate`` (``detail``: the iteration that ended). A
monitor pass (``ganga_like.runtime.workflow.callbacks``) acts on the entries; ``state``
says how far it got (``due``, then ``calling`` or ``starting``), so that a monitor killed
in between neither loses nor repeats one.
"""

from __future__ import annotations

import time
from typing import Any

from BTrees.OOBTree import OOBTree

from ganga_like.model.history import make_entry
from ganga_like.model.status import Status

__all__ = [
    "CALLBACK_KINDS",
    "DUE",
    "DUE_KEY",
    "ITERATION_ENDS",
    "Callback",
    "IterateState",
    "Reacting",
    "due_table",
    "end_iterate",
    "note_status",
]

DUE_KEY = "workflow_due"
DUE = "due"
CALLBACK_KINDS = ("notify", "resubmit", "command", "function")

# (status, kind, argument) as the job stores it.
Callback = tuple[str, str, Any]
# An Iterate's state on its first job: (until "module:name", max_iterations, the ids of
# the iterations' jobs in order (the first job's own id first), whether it still goes on).
IterateState = tuple[str, int, tuple[int, ...], bool]


class Reacting:
    """What a job does when its status changes (the Job's, as class defaults: a record
    stores only what was set): its callbacks, how many entries it added to the due
    table, an Iterate's state (on its first job), and which Iterate (its first job's id)
    and iteration a job runs."""

    _callbacks: tuple[Callback, ...] = ()
    _due_count: int = 0
    _iterate: IterateState | None = None
    _iteration_of: tuple[int, int] | None = None


def due_table(root: Any) -> OOBTree | None:
    """The due table of the repository whose root is ``root``; None before the first
    callback or Iterate made it (``runtime.workflow.callbacks.make_due_table``: a table
    that merges concurrent inserts)."""
    found: OOBTree | None = root.get(DUE_KEY)
    return found


def _add(job: Any, root: Any, value: tuple[str, str, int, str]) -> None:
    table = due_table(root)
    if table is None:  # made by the first on() or Iterate; else here, plainly
        table = root[DUE_KEY] = OOBTree()
    count = int(getattr(job, "_due_count", 0)) + 1
    job._due_count = count
    table[(job.id, count)] = value


def note_status(job: Any, label: str) -> None:
    """``job``'s event log just recorded a change of its own status to ``label``: add
    what is due to the table of its repository (in this transaction). Callbacks follow
    the status the job shows (an Iterate's first job shows ``running`` until the
    iteration ends); nothing for a job not stored yet."""
    jar = getattr(job, "_p_jar", None)
    if jar is None or job._master is not None:
        return
    root = jar.root()
    shown = job.current_status().label
    for place, (status, _kind, _argument) in enumerate(job._callbacks):
        if status == shown:
            _add(job, root, ("call", shown, place, DUE))
    iteration = job._iteration_of
    going_on = job._iterate is None or job._iterate[3]  # not once its Iterate has ended
    if label in ITERATION_ENDS and iteration is not None and going_on:
        _add(job, root, ("iterate", label, iteration[1], DUE))


ITERATION_ENDS = frozenset({"completed", "failed", "killed", "skipped"})


def end_iterate(first: Any, failed: bool, cause: str) -> None:
    """The Iterate of its first job ``first`` ends: completed, or failed when ``failed``,
    and its event log says why (``cause``)."""
    until, most, ids, _going = first._iterate
    first._iterate = (until, most, ids, False)
    if failed and Status.parse(first.status) is Status.COMPLETED:
        first.change_status(Status.FAILED, cause)
    else:  # its own status, no longer shown as running
        now = first.current_status().label
        first._log(make_entry(time.time(), Status.RUNNING.label, now, cause))
