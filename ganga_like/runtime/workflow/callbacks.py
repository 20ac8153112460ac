"""Running the callbacks of jobs (``j.on(status, action)``): the lease holder's pass.

The transaction that records a job's change to a status it has callbacks for also
records, in the due table (``model.callbacks``), one entry per callback: the intent.
After each cycle the monitor holding the lease (a session's, or the daemon's) acts on
each entry in three steps: a transaction marks it ``calling`` and logs the call in the
job's event log; the action runs, outside any transaction; a transaction logs its
outcome and drops the entry. A monitor killed before the first step leaves the entry
``due``: the next one calls it (nothing lost). One killed during the call leaves it
``calling``: the next one logs that call as interrupted and does not call it again
(nothing repeated). So each trigger is called once at most and never silently lost.

An action that raises, or a function that cannot be imported in this process, is its
outcome, logged; monitoring goes on. The entries of an ``Iterate`` are acted on by
``runtime.workflow.iterate``, in the same pass.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import transaction

from ganga_like.errors import GangaError
from ganga_like.model import plugin_registry
from ganga_like.model.callbacks import DUE, DUE_KEY, Callback, due_table
from ganga_like.model.interfaces import PostProcessContext, config_of
from ganga_like.model.job import Job
from ganga_like.model.stop_points import stop_point
from ganga_like.repository.trees import KeyMap
from ganga_like.runtime.session import Session, add_monitor_pass
from ganga_like.runtime.submission import actions
from ganga_like.runtime.workflow import iterate
from ganga_like.runtime.workflow.user_functions import load_function, view_of

__all__ = ["CALLING", "COMMAND_TIMEOUT", "describe", "make_due_table", "run_due"]

log = logging.getLogger("ganga_like.workflow")

CALLING = "calling"
# Longest a command callback may run before it is stopped, in seconds: the monitor
# waits for it.
COMMAND_TIMEOUT = 300.0
Key = tuple[int, int]


def describe(callback: Callback) -> str:
    """A callback as its job's event log and views name it."""
    _status, kind, argument = callback
    if kind == "notify":
        return f"Notify(email={argument!r})"
    if kind == "resubmit":
        return f"Resubmit(times={argument})"
    if kind == "command":
        return f"RunCommand({list(argument)!r})"
    return str(argument)


def make_due_table(root: Any) -> None:
    """Make the due table if the repository has none yet (in the caller's transaction):
    one that merges concurrent inserts, so that status changes only add to it."""
    if due_table(root) is None:
        root[DUE_KEY] = KeyMap()


def run_due(session: Session) -> int:
    """Act on every due entry; how many were acted on."""
    repo = session.repo
    repo.connection(transaction.TransactionManager())  # this thread's own (see driver)
    repo.abort()  # what was committed since this thread last looked
    table = due_table(repo.connection().root())
    if not table:
        return 0
    done = 0
    for key in list(table.keys()):
        try:
            done += _act(session, key)
        except GangaError as exc:
            log.warning("job %s: its callbacks: %s", key[0], exc)
    return done


def _act(session: Session, key: Key) -> int:
    entry = due_table(session.repo.connection().root())
    found = entry.get(key) if entry is not None else None
    if found is None:
        return 0
    if found[0] == "iterate":
        return iterate.step(session, key)
    stop_point("callback-due")
    claimed: list[tuple[Job, Callback]] = []

    def claim() -> None:
        claimed.clear()
        table = due_table(session.registry().root)
        value = table.get(key) if table is not None else None
        if value is None:
            return  # acted on meanwhile
        assert table is not None
        job = session.registry().get(key[0])
        place = value[2]
        if not isinstance(job, Job) or place >= len(job._callbacks):
            del table[key]  # the job, or its callback, is gone
            return
        callback = job._callbacks[place]
        shown = f"monitor: on {value[1]}: {describe(callback)}"
        if value[3] != DUE:  # a monitor stopped during this call: never called again
            job.log_event(f"{shown}: interrupted (the monitor stopped during it)")
            del table[key]
            return
        table[key] = (*value[:3], CALLING)
        job.log_event(f"{shown}: calling")
        claimed.append((job, callback))

    session.repo.in_transaction(claim, what=f"calling the callbacks of job {key[0]}")
    if not claimed:
        return 1
    stop_point("callback-calling")
    job, callback = claimed[0]
    outcome = _outcome(session, job, callback)

    def record() -> None:
        table = due_table(session.registry().root)
        stored = session.registry().get(key[0])
        if isinstance(stored, Job):
            stored.log_event(f"monitor: on {callback[0]}: {describe(callback)}: {outcome}")
        if table is not None:
            table.pop(key, None)

    session.repo.in_transaction(record, what=f"recording a callback of job {key[0]}")
    return 1


def _outcome(session: Session, job: Job, callback: Callback) -> str:
    """Run ``callback`` for ``job``: what became of it, in words. Never raises."""
    run = _ACTIONS[callback[1]]
    try:
        return run(session, job, callback[2])
    except (Exception, SystemExit) as exc:  # a callback must never stop the monitor
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        log.warning("job %s: callback %s raised %r", job.fqid, describe(callback), exc)
        return f"raised {type(exc).__name__}: {text}".rstrip(": ")


def _notify(session: Session, job: Job, email: str) -> str:
    notifier = plugin_registry.find("Notifier", "postprocessors")(address=email)
    ctx = PostProcessContext(session.repo.workspace, config=config_of(notifier, session.config))
    problems = notifier.notify(job, ctx)
    return "; ".join(problems) if problems else f"sent to {email}"


def _resubmit(session: Session, job: Job, times: int) -> str:
    if job._iterate is not None:
        return "not resubmitted: an Iterate is not resubmitted"
    made = sum(1 for entry in job.history if entry[3].endswith(": resubmitted"))
    if made >= times:
        return f"not resubmitted: it was {made} time(s) already"
    actions.resubmit(session, job, keep_going=True)
    return "resubmitted"


def _command(session: Session, job: Job, words: tuple[str, ...]) -> str:
    view = view_of(job, session.repo.workspace)
    where = view.outputdir if view.outputdir.is_dir() else Path(session.repo.workspace)
    env = dict(os.environ, GANGA_JOB_ID=view.fqid, GANGA_JOB_STATUS=view.status)
    done = subprocess.run(
        list(words), cwd=where, env=env, capture_output=True, text=True, timeout=COMMAND_TIMEOUT
    )
    if done.returncode == 0:
        return "exit 0"
    last = (done.stderr.strip().splitlines() or [""])[-1]
    return f"exit {done.returncode}" + (f": {last}" if last else "")


def _function(session: Session, job: Job, path: str) -> str:
    returned = load_function(path)(view_of(job, session.repo.workspace))
    return "done" if returned is None else f"returned {returned!r}"[:200]


_ACTIONS: dict[str, Callable[[Session, Job, Any], str]] = {
    "notify": _notify,
    "resubmit": _resubmit,
    "command": _command,
    "function": _function,
}

# Every session's monitor (the daemon's too) runs the due callbacks after its cycles.
add_monitor_pass("job callbacks", run_due)
